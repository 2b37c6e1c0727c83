use super::fake::*;
use super::*;
use proptest::prelude::*;

fn group(path: &str) -> GroupPath {
    GroupPath::new(path).unwrap()
}

fn v2() -> (tempfile::TempDir, V2Backend) {
    let dir = tempfile::tempdir().unwrap();
    v2_root(dir.path());
    let backend = V2Backend::new(dir.path().to_owned());
    (dir, backend)
}

fn hybrid() -> (tempfile::TempDir, HybridBackend) {
    let dir = tempfile::tempdir().unwrap();
    let (memory, unified) = hybrid_roots(dir.path());
    (dir, HybridBackend::new(memory, unified))
}

#[test]
fn group_paths_are_validated() {
    assert_eq!(group("/critmem/rt").as_str(), "critmem/rt");
    assert_eq!(group("critmem/rt").to_string(), "/critmem/rt");
    for bad in ["", "/", "a//b", "a/../b", "./a", "a/", "a\nb"] {
        assert!(GroupPath::new(bad).is_err(), "accepted {bad:?}");
    }
    assert_eq!(group("a/b/c").prefixes().collect::<Vec<_>>(), ["a", "a/b", "a/b/c"]);
}

#[test]
fn v2_create_makes_missing_ancestors_and_enables_memory_below_them() {
    let (dir, backend) = v2();
    let g = group("critmem/rt");
    let plan = backend.plan_create(&g).unwrap();
    let root = dir.path();
    assert_eq!(
        plan,
        vec![
            Change::Mkdir { dir: root.join("critmem"), evacuate_to: root.to_owned() },
            Change::Write(FileWrite::new(root.join("critmem/cgroup.subtree_control"), "+memory", true)),
            Change::Mkdir { dir: root.join("critmem/rt"), evacuate_to: root.to_owned() },
        ]
    );
    create(&backend, &g, |_| V2_FILES);
    assert!(backend.exists(&g));
    assert_eq!(read(&root.join("critmem/cgroup.subtree_control")), "+memory");
    // The kernel shows the enabled list, not the write.
    std::fs::write(root.join("critmem/cgroup.subtree_control"), "memory\n").unwrap();
    assert!(backend.plan_create(&g).unwrap().is_empty(), "nothing to do once it exists");
}

#[test]
fn v2_create_enables_memory_at_the_root_when_missing() {
    let (dir, backend) = v2();
    std::fs::write(dir.path().join("cgroup.subtree_control"), "cpu\n").unwrap();
    let plan = backend.plan_create(&group("g")).unwrap();
    assert_eq!(plan[0], Change::Write(FileWrite::new(dir.path().join("cgroup.subtree_control"), "+memory", true)));
}

#[test]
fn v2_knobs_read_and_write_in_kernel_syntax() {
    let (dir, backend) = v2();
    let g = group("g");
    create(&backend, &g, |_| V2_FILES);
    assert_eq!(backend.knobs(&g).unwrap(), MemoryKnobs::default());
    backend.set_knob(&g, Knob::Max, Some(1 << 20)).unwrap();
    backend.set_knob(&g, Knob::High, Some(1 << 19)).unwrap();
    backend.set_knob(&g, Knob::Min, Some(4096)).unwrap();
    backend.set_knob(&g, Knob::Low, Some(8192)).unwrap();
    assert_eq!(
        backend.knobs(&g).unwrap(),
        MemoryKnobs { max_bytes: Some(1 << 20), high_bytes: Some(1 << 19), min_bytes: Some(4096), low_bytes: Some(8192) }
    );
    backend.set_knob(&g, Knob::Max, None).unwrap();
    backend.set_knob(&g, Knob::Low, None).unwrap();
    assert_eq!(read(&dir.path().join("g/memory.max")), "max");
    assert_eq!(read(&dir.path().join("g/memory.low")), "0");
    assert_eq!(backend.knob(&g, Knob::Max).unwrap(), None);
    assert_eq!(backend.plan_reclaim(&g, 4096).unwrap(), FileWrite::new(dir.path().join("g/memory.reclaim"), "4096", false));
}

#[test]
fn v2_usage_stat_and_psi_come_from_the_group() {
    let (_dir, backend) = v2();
    let g = group("g");
    create(&backend, &g, |_| V2_FILES);
    assert_eq!(backend.usage_bytes(&g).unwrap(), 4096);
    let stat = backend.memory_stat(&g).unwrap();
    assert_eq!((stat.anon_bytes, stat.file_bytes, stat.pgmajfault, stat.workingset_refault), (1000, 2000, 3, 9));
    assert_eq!(
        backend.stall_totals(&g).unwrap(),
        StallTotals { memory_some_us: 100, memory_full_us: 40, io_some_us: 7, io_full_us: 3, cpu_some_us: 19 }
    );
}

#[test]
fn hybrid_group_is_a_pair_of_directories() {
    let (dir, backend) = hybrid();
    let g = group("critmem/rt");
    create(&backend, &g, hybrid_files);
    assert!(dir.path().join("memory/critmem/rt/memory.limit_in_bytes").exists());
    assert!(dir.path().join("unified/critmem/rt/memory.pressure").exists());
    assert!(backend.exists(&g));
    backend.move_pid(&g, 4242).unwrap();
    assert_eq!(read(&dir.path().join("memory/critmem/rt/cgroup.procs")), "4242");
    assert_eq!(read(&dir.path().join("unified/critmem/rt/cgroup.procs")), "4242");
    assert_eq!(backend.pids(&g).unwrap(), vec![4242]);
}

#[test]
fn hybrid_limit_maps_to_limit_in_bytes_and_huge_means_unlimited() {
    let (dir, backend) = hybrid();
    let g = group("g");
    create(&backend, &g, hybrid_files);
    assert_eq!(backend.knob(&g, Knob::Max).unwrap(), None);
    backend.set_knob(&g, Knob::Max, Some(256 << 20)).unwrap();
    assert_eq!(read(&dir.path().join("memory/g/memory.limit_in_bytes")), "268435456");
    assert_eq!(backend.knob(&g, Knob::Max).unwrap(), Some(256 << 20));
    backend.set_knob(&g, Knob::Max, None).unwrap();
    assert_eq!(read(&dir.path().join("memory/g/memory.limit_in_bytes")), "-1");
    // The soft limit is a different thing and is never touched.
    assert_eq!(read(&dir.path().join("memory/g/memory.soft_limit_in_bytes")), "9223372036854771712\n");
}

#[test]
fn hybrid_rejects_high_min_low_values_but_clearing_them_is_a_no_op() {
    let (_dir, backend) = hybrid();
    let g = group("g");
    create(&backend, &g, hybrid_files);
    for knob in [Knob::High, Knob::Min, Knob::Low] {
        assert!(!backend.capabilities().has(knob));
        let err = backend.set_knob(&g, knob, Some(4096)).unwrap_err();
        assert!(err.to_string().contains("not available on the hybrid"), "{err}");
        assert_eq!(backend.plan_knob(&g, knob, None).unwrap(), None);
        assert_eq!(backend.knob(&g, knob).unwrap(), None);
    }
    assert!(backend.plan_reclaim(&g, 4096).is_err());
}

#[test]
fn hybrid_usage_and_stat_from_v1_psi_from_unified() {
    let (_dir, backend) = hybrid();
    let g = group("g");
    create(&backend, &g, hybrid_files);
    assert_eq!(backend.usage_bytes(&g).unwrap(), 8192);
    let stat = backend.memory_stat(&g).unwrap();
    assert_eq!((stat.anon_bytes, stat.file_bytes, stat.pgmajfault, stat.workingset_refault), (4000, 3000, 9, 6));
    assert_eq!(
        backend.stall_totals(&g).unwrap(),
        StallTotals { memory_some_us: 11, memory_full_us: 2, io_some_us: 13, io_full_us: 5, cpu_some_us: 17 }
    );
}

#[test]
fn vanished_group_is_reported_as_such() {
    let (dir, backend) = hybrid();
    let g = group("g");
    create(&backend, &g, hybrid_files);
    std::fs::remove_dir_all(dir.path().join("memory/g")).unwrap();
    std::fs::remove_dir_all(dir.path().join("unified/g")).unwrap();
    for err in
        [backend.usage_bytes(&g).unwrap_err(), backend.stall_totals(&g).unwrap_err(), backend.set_knob(&g, Knob::Max, Some(1)).unwrap_err()]
    {
        assert!(err.to_string().contains("vanished mid-run"), "{err}");
    }
}

#[test]
fn remove_refuses_busy_groups_and_groups_with_children() {
    let (_dir, backend) = v2();
    let parent = group("p");
    let child = group("p/c");
    create(&backend, &child, |_| V2_FILES);
    assert!(matches!(backend.remove(&parent).unwrap_err(), Error::GroupHasChildren { .. }));
    backend.move_pid(&child, 77).unwrap();
    assert!(matches!(backend.remove(&child).unwrap_err(), Error::GroupBusy { pids: 1, .. }));
    std::fs::write(backend.group_dirs(&child)[0].join("cgroup.procs"), "").unwrap();
    backend.remove(&child).unwrap();
    backend.remove(&parent).unwrap();
    assert!(!backend.exists(&parent));
    backend.remove(&parent).unwrap();
}

#[test]
fn open_backend_checks_the_memory_controller() {
    let dir = tempfile::tempdir().unwrap();
    v2_root(dir.path());
    assert_eq!(open_backend(&crate::layout::Layout::V2 { root: dir.path().to_owned() }).unwrap().name(), "cgroup v2");
    std::fs::write(dir.path().join("cgroup.controllers"), "cpu io\n").unwrap();
    let err = open_backend(&crate::layout::Layout::V2 { root: dir.path().to_owned() }).unwrap_err();
    assert!(err.to_string().contains("memory controller missing"), "{err}");
    let (memory, unified) = hybrid_roots(dir.path());
    assert!(
        open_backend(&crate::layout::Layout::Hybrid { memory_root: memory, unified_root: unified, bandwidth: Default::default() }).is_ok()
    );
}

#[test]
fn controller_actions_map_to_knobs() {
    assert_eq!(knob_change(&Action::SetHigh { group: 2, bytes: Some(7) }), Some((2, Knob::High, Some(7))));
    assert_eq!(knob_change(&Action::SetLow { group: 0, bytes: None }), Some((0, Knob::Low, None)));
    assert_eq!(knob_change(&Action::DropJob { group: 0, job: 1 }), None);
    assert_eq!(knob_change(&Action::Reclaim { group: 0, bytes: 4096 }), None);
    assert_eq!(knob_change(&Action::SetCpuMax { group: 0, millicpus: Some(10) }), None);
    assert_eq!(knob_change(&Action::SetIoMax { group: 0, read_bytes_per_s: None, write_bytes_per_s: None }), None);
}

#[test]
fn oom_files_of_both_versions_parse() {
    let v1 = parse_oom_state("oom_kill_disable 1\nunder_oom 1\noom_kill 2\n").unwrap();
    assert_eq!(v1, OomState { under_oom: true, kill_disabled: true, oom_events: 0, oom_kills: 2 });
    let events = parse_oom_state("low 0\nhigh 12\nmax 3\noom 4\noom_kill 1\noom_group_kill 0\n").unwrap();
    assert_eq!(events, OomState { under_oom: false, kill_disabled: false, oom_events: 4, oom_kills: 1 });
    assert_eq!(parse_oom_state("oom x\n"), None);
    // Nothing the kernel writes: no state, so a file that reads empty is opened again.
    assert_eq!(parse_oom_state(""), None);
    assert_eq!(parse_oom_state("low 0\nhigh 1\n"), None);
    let (_dir, hybrid) = hybrid();
    assert_eq!(hybrid.plan_oom_guard(&group("g")).map(|w| w.contents), Some("1".to_owned()));
    let (_dir, v2b) = v2();
    assert!(v2b.plan_oom_guard(&group("g")).is_none());
    assert!(v2b.oom_file(&group("g")).ends_with("g/memory.events"));
}

proptest! {
    #[test]
    fn cgroup_file_parsers_never_panic_on_arbitrary_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
        let text = String::from_utf8_lossy(&bytes);
        let _ = parse_memory_stat(&text, "fuzz");
        let _ = parse_pids(&text, "fuzz");
        let _ = parse_bytes(&group("g"), Path::new("fuzz"), &text);
        let _ = parse_oom_state(&text);
    }

    /// `key value` lines with missing or extra words, signs, u64 overflow, odd spacing.
    #[test]
    fn key_value_parsers_never_panic_on_key_value_like_text(text in r"([ \t]{0,2}[a-z_]{0,12}([ \t]{1,2}(-|\+)?[0-9]{0,22}){0,3}[ \t]{0,2}\r?\n){0,6}") {
        let _ = parse_memory_stat(&text, "fuzz");
        let _ = parse_oom_state(&text);
    }

    #[test]
    fn number_parsers_never_panic_on_number_like_text(text in r"([ \t]{0,2}(-|\+)?[0-9]{0,22}(\.[0-9]?)?(max|x)?[ \t]{0,2}\r?\n?){0,5}") {
        let _ = parse_pids(&text, "fuzz");
        let _ = parse_bytes(&group("g"), Path::new("fuzz"), &text);
    }

    /// The kernel prints memory.stat as `%s %llu\n` per field.
    #[test]
    fn memory_stat_parses_back(fields in proptest::collection::btree_map(r"[a-z][a-z0-9_]{0,24}", any::<u64>(), 0..40)) {
        let text: String = fields.iter().map(|(key, value)| format!("{key} {value}\n")).collect();
        prop_assert_eq!(parse_memory_stat(&text, "gen").unwrap(), fields);
    }

    #[test]
    fn pids_parse_back(pids in proptest::collection::vec(any::<u32>(), 0..40)) {
        let text: String = pids.iter().map(|pid| format!("{pid}\n")).collect();
        prop_assert_eq!(parse_pids(&text, "gen").unwrap(), pids);
    }

    /// Byte counts arrive trimmed (`read_trimmed`).
    #[test]
    fn byte_counts_parse_back(bytes in any::<u64>()) {
        prop_assert_eq!(parse_bytes(&group("g"), Path::new("gen"), &bytes.to_string()).unwrap(), bytes);
    }

    /// v1 `memory.oom_control` (`%d`/`%lu` values) and v2 `memory.events` (`%lu`).
    #[test]
    fn oom_files_parse_back(disabled in any::<bool>(), under in any::<bool>(), counts in [any::<u64>(), any::<u64>(), any::<u64>(), any::<u64>(), any::<u64>(), any::<u64>()]) {
        let [low, high, max, oom, oom_kill, group_kill] = counts;
        let v1 = format!("oom_kill_disable {}\nunder_oom {}\noom_kill {oom_kill}\n", u8::from(disabled), u8::from(under));
        prop_assert_eq!(parse_oom_state(&v1), Some(OomState { under_oom: under, kill_disabled: disabled, oom_events: 0, oom_kills: oom_kill }));
        let v2 = format!("low {low}\nhigh {high}\nmax {max}\noom {oom}\noom_kill {oom_kill}\noom_group_kill {group_kill}\n");
        prop_assert_eq!(parse_oom_state(&v2), Some(OomState { under_oom: false, kill_disabled: false, oom_events: oom, oom_kills: oom_kill }));
    }
}

#[test]
fn malformed_files_are_parse_errors() {
    assert!(parse_memory_stat("anon x\n", "t").is_err());
    assert!(parse_memory_stat("anon 1 2\n", "t").is_err());
    assert!(parse_pids("12\nabc\n", "t").is_err());
    assert_eq!(parse_pids("12\n\n13\n", "t").unwrap(), vec![12, 13]);
}

#[test]
fn v2_bandwidth_controllers_are_enabled_where_offered_down_to_the_groups_parent() {
    let (dir, backend) = v2();
    let root = dir.path();
    let g = group("critmem/rt");
    create(&backend, &g, |_| V2_FILES);
    // The root offers cpu and io and enables cpu; critmem offers what the root enables.
    std::fs::write(root.join("critmem/cgroup.controllers"), "cpu memory\n").unwrap();
    std::fs::write(root.join("critmem/cgroup.subtree_control"), "memory\n").unwrap();
    assert_eq!(
        backend.plan_bandwidth_controllers(&g).unwrap(),
        vec![
            Change::Write(FileWrite::new(root.join("cgroup.subtree_control"), "+io", true)),
            Change::Write(FileWrite::new(root.join("critmem/cgroup.subtree_control"), "+cpu +io", true)),
        ]
    );
    std::fs::write(root.join("cgroup.controllers"), "memory pids\n").unwrap();
    std::fs::write(root.join("critmem/cgroup.controllers"), "memory\n").unwrap();
    assert!(backend.plan_bandwidth_controllers(&g).unwrap().is_empty(), "nothing the machine does not offer");
}

#[test]
fn v2_bandwidth_limits_read_and_write_in_kernel_syntax() {
    let (dir, backend) = v2();
    let g = group("g");
    create(&backend, &g, |_| V2_FILES);
    let vda = BlockDevice { major: 254, minor: 0 };
    for write in
        backend.plan_cpu_max(&g, Some(25_000)).unwrap().into_iter().chain(backend.plan_io_max(&g, vda, None, Some(1 << 20)).unwrap())
    {
        write.perform().unwrap();
    }
    assert_eq!(read(&dir.path().join("g/cpu.max")), "25000 100000");
    assert_eq!(read(&dir.path().join("g/io.max")), "254:0 rbps=max wbps=1048576");
    assert_eq!(backend.cpu_max_millicpus(&g).unwrap(), Some(250));
    assert_eq!(backend.io_max(&g, vda).unwrap(), (None, Some(1 << 20)));
    assert_eq!(backend.cpu_usage_us(&g).unwrap(), 5000);
}

fn hybrid_with_bandwidth() -> (tempfile::TempDir, HybridBackend) {
    let (dir, backend) = hybrid();
    let (cpu, cpuacct, blkio) = v1_bandwidth_roots(dir.path());
    (dir, backend.with_bandwidth_roots(Some(cpu), Some(cpuacct), Some(blkio)))
}

#[test]
fn hybrid_groups_get_directories_in_the_bandwidth_hierarchies_and_limits_there() {
    let (dir, backend) = hybrid_with_bandwidth();
    let g = group("critmem/rt");
    let made: Vec<PathBuf> = backend
        .plan_create(&g)
        .unwrap()
        .into_iter()
        .filter_map(|c| if let Change::Mkdir { dir, .. } = c { Some(dir) } else { None })
        .collect();
    assert_eq!(made.len(), 10, "two levels in five trees: {made:?}");
    create(&backend, &g, hybrid_files);
    assert_eq!(backend.group_dirs(&g).len(), 5);
    assert_eq!(backend.cpu_usage_us(&g).unwrap(), 7000, "cpuacct.usage, ns");
    let vda = BlockDevice { major: 254, minor: 0 };
    for write in backend.plan_cpu_max(&g, Some(50_000)).unwrap().into_iter().chain(backend.plan_io_max(&g, vda, Some(4096), None).unwrap())
    {
        write.perform().unwrap();
    }
    assert_eq!(read(&dir.path().join("cpu/critmem/rt/cpu.cfs_quota_us")), "50000");
    assert_eq!(read(&dir.path().join("blkio/critmem/rt/blkio.throttle.write_bps_device")), "254:0 0");
    assert_eq!(backend.cpu_max_millicpus(&g).unwrap(), Some(500));
    assert_eq!(backend.io_max(&g, vda).unwrap(), (Some(4096), None));
    backend.remove(&g).unwrap();
    assert!(backend.group_dirs(&g).iter().all(|d| !d.exists()));

    // An adopted group with no bandwidth directories still exists; its CPU time is cgroup2's.
    let adopted = group("adopted");
    populate(&adopted.dir_in(backend.memory_root()), V1_MEMORY_FILES);
    populate(&adopted.dir_in(backend.unified_root()), UNIFIED_FILES);
    assert!(backend.exists(&adopted));
    assert_eq!(backend.cpu_usage_us(&adopted).unwrap(), 3000);
    backend.move_pid(&adopted, 7).unwrap();
    assert!(!dir.path().join("cpu/adopted").exists(), "nothing made for a group critmem did not create");
}

#[test]
fn hybrid_without_bandwidth_hierarchies_refuses_bandwidth_limits() {
    let (_dir, backend) = hybrid();
    let err = backend.plan_cpu_max(&group("g"), Some(1000)).unwrap_err();
    assert!(err.to_string().contains("cpu hierarchy"), "{err}");
    assert!(backend.plan_io_max(&group("g"), BlockDevice { major: 8, minor: 0 }, None, None).is_err());
}
