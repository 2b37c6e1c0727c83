//! Real cgroups: layout, limits, usage, and the off-thread writer against the kernel.

use super::*;

#[test]
fn layout_of_this_machine_is_detected_and_usable() {
    let Some(machine) = machine("layout_of_this_machine_is_detected_and_usable") else { return };
    let _ = writeln!(std::io::stderr(), "layout: {:?} (backend {})", machine.layout, machine.backend.name());
    match &machine.layout {
        Layout::Hybrid { memory_root, unified_root, .. } => {
            assert!(memory_root.join("memory.limit_in_bytes").exists());
            assert!(unified_root.join("cgroup.procs").exists());
        }
        Layout::V2 { root } => assert!(root.join("cgroup.controllers").exists()),
    }
}

#[test]
fn a_process_in_a_real_group_is_limited_observed_and_its_usage_rises() {
    let Some(machine) = machine("a_process_in_a_real_group_is_limited_observed_and_its_usage_rises") else { return };
    let mut guard = GroupGuard::create(&machine);
    let group = guard.group.clone();
    for dir in machine.backend.group_dirs(&group) {
        assert!(dir.is_dir(), "{} missing", dir.display());
    }

    let helper = guard.adopt(Helper::python(ALLOCATE, &[&(64 * MIB).to_string()]));
    let pid = helper.pid();
    assert_eq!(machine.backend.pids(&group).unwrap(), vec![pid]);
    let proc_lines = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap();
    let own = ProcFs::new(PROC_ROOT.into()).cgroup_of(pid, &Hierarchy::for_layout(&machine.layout)).unwrap();
    assert_eq!(own.as_deref(), Some(group.to_string().as_str()), "{proc_lines}");
    if matches!(machine.layout, Layout::Hybrid { .. }) {
        assert!(proc_lines.lines().any(|l| l == format!("0::{group}")), "also in the unified group for PSI: {proc_lines}");
    }

    machine.backend.set_knob(&group, Knob::Max, Some(256 * MIB)).unwrap();
    assert_eq!(machine.backend.knob(&group, Knob::Max).unwrap(), Some(256 * MIB));
    assert_eq!(machine.backend.knobs(&group).unwrap().max_bytes, Some(256 * MIB));

    let stall_before = machine.backend.stall_totals(&group).unwrap();
    let usage_before = machine.backend.usage_bytes(&group).unwrap();
    let helper = guard.helpers.last_mut().unwrap();
    helper.say("go");
    helper.expect("ready");
    let usage_after = machine.backend.usage_bytes(&group).unwrap();
    let stat = machine.backend.memory_stat(&group).unwrap();
    let stall_after = machine.backend.stall_totals(&group).unwrap();
    let _ = writeln!(
        std::io::stderr(),
        "usage {usage_before} -> {usage_after} bytes, anon {} bytes, stall {stall_before:?} -> {stall_after:?}",
        stat.anon_bytes
    );
    assert!(usage_after >= usage_before + 60 * MIB, "usage rose only from {usage_before} to {usage_after}");
    assert!(usage_after <= 256 * MIB);
    assert!(stat.anon_bytes >= 60 * MIB, "anon {}", stat.anon_bytes);
    for (before, after) in [
        (stall_before.memory_some_us, stall_after.memory_some_us),
        (stall_before.memory_full_us, stall_after.memory_full_us),
        (stall_before.io_some_us, stall_after.io_some_us),
        (stall_before.io_full_us, stall_after.io_full_us),
    ] {
        assert!(after >= before, "PSI total went backwards: {stall_before:?} -> {stall_after:?}");
    }
    // The group's pressure files parse in full (cpu.pressure included).
    for resource in [PsiResource::Memory, PsiResource::Io, PsiResource::Cpu] {
        read_pressure(&machine.backend.pressure_file(&group, resource)).unwrap();
    }

    machine.backend.set_knob(&group, Knob::Max, None).unwrap();
    assert_eq!(machine.backend.knob(&group, Knob::Max).unwrap(), None);
}

#[test]
fn lowering_a_limit_below_unreclaimable_usage_fails_off_the_control_thread() {
    let Some(machine) = machine("lowering_a_limit_below_unreclaimable_usage_fails_off_the_control_thread") else { return };
    let _no_swap_changes = SWAP_SENSITIVE.lock().unwrap_or_else(|p| p.into_inner());
    let swap_on = std::fs::read_to_string("/proc/swaps").unwrap().lines().count() > 1;
    if swap_on {
        skip("lowering_a_limit_below_unreclaimable_usage_fails_off_the_control_thread", "swap is on, so the memory would be reclaimable");
        return;
    }
    let mut guard = GroupGuard::create(&machine);
    let group = guard.group.clone();
    let helper = guard.adopt(Helper::python(ALLOCATE, &[&(64 * MIB).to_string()]));
    helper.say("go");
    helper.expect("ready");

    let writer = KnobWriter::new(2, 8);
    let write = machine.backend.plan_knob(&group, Knob::Max, Some(16 * MIB)).unwrap().unwrap();
    // Queued: the kernel's answer comes back as an outcome, not from submit.
    assert_eq!(writer.submit(write.clone()).unwrap(), Submitted::Queued);
    assert!(writer.wait_idle(Duration::from_secs(60)));
    let outcomes = writer.completed();
    assert_eq!(outcomes.len(), 1);
    let outcome = &outcomes[0];
    let _ = writeln!(std::io::stderr(), "lowering to 16 MiB under 64 MiB of anon, no swap: took {:?}, {:?}", outcome.took, outcome.result);
    match machine.backend.capabilities().limit_below_usage {
        LimitBelowUsage::Refused => {
            match &outcome.result {
                Err(e @ Error::WriteRejected { .. }) => assert!(e.to_string().contains("no swap?"), "{e}"),
                other => panic!("expected the kernel to refuse the limit, got {other:?}"),
            }
            // The helper is still alive (no OOM kill), and the limit is unchanged.
            assert!(guard.helpers[0].child.try_wait().unwrap().is_none(), "the helper was killed");
            assert_eq!(machine.backend.knob(&group, Knob::Max).unwrap(), None);
        }
        LimitBelowUsage::OomKills => {
            // v2 sets `memory.max` first and then, finding nothing to reclaim, OOM-kills in
            // the group: the write succeeds, the limit holds, the helper is gone.
            assert!(outcome.result.is_ok(), "{:?}", outcome.result);
            assert_eq!(machine.backend.knob(&group, Knob::Max).unwrap(), Some(16 * MIB));
            let status = guard.helpers[0].child.wait().unwrap();
            assert_eq!(std::os::unix::process::ExitStatusExt::signal(&status), Some(9), "the helper was not OOM-killed: {status}");
            let events = std::fs::read_to_string(machine.backend.oom_file(&group)).unwrap();
            assert!(events.lines().any(|l| l.starts_with("oom_kill ") && l != "oom_kill 0"), "memory.events: {events}");
        }
    }
    assert!(writer.shutdown(Duration::from_secs(5)).is_empty());
}

/// Dirty page cache of the helper's own, charged to its group: `$1` is the file, `$2` MiB.
const DIRTY_CACHE: &str = r#"read go; dd if=/dev/zero of="$1" bs=1M count="$2" status=none && echo ready; cat >/dev/null"#;

#[test]
fn a_limit_write_stuck_in_reclaim_at_shutdown_is_cancelled_and_never_lands_later() {
    let name = "a_limit_write_stuck_in_reclaim_at_shutdown_is_cancelled_and_never_lands_later";
    let Some(machine) = machine(name) else { return };
    let mut guard = GroupGuard::create(&machine);
    let group = guard.group.clone();
    let dir = tempfile::tempdir_in("/var/tmp").unwrap();
    let file = dir.path().join("dirty");
    let helper = guard.adopt(Helper::shell(DIRTY_CACHE, &[file.to_str().unwrap(), "2048"]));
    helper.say("go");
    helper.expect("ready");
    let before = machine.backend.knob(&group, Knob::Max).unwrap();

    // Lowering to 32 MiB under 2 GiB of dirty cache: the kernel writes it back inside the
    // write(2), for about a second here.
    let writer = KnobWriter::new(1, 4);
    writer.submit(machine.backend.plan_knob(&group, Knob::Max, Some(32 * MIB)).unwrap().unwrap()).unwrap();
    std::thread::sleep(Duration::from_millis(30));
    let path = machine.backend.plan_knob(&group, Knob::Max, None).unwrap().unwrap().path;
    if !writer.is_in_flight(&path) {
        skip(name, "the write finished within 30 ms, so this machine cannot show a stuck write");
        return;
    }
    let started = Instant::now();
    let stuck = writer.shutdown(Duration::ZERO);
    let took = started.elapsed();
    let at_shutdown = machine.backend.knob(&group, Knob::Max).unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    let later = machine.backend.knob(&group, Knob::Max).unwrap();
    let _ = writeln!(
        std::io::stderr(),
        "{name}: shutdown took {took:?}; limit before {before:?}, at shutdown {at_shutdown:?}, 1.5 s later {later:?}"
    );
    assert!(stuck.is_empty(), "the write was not cancelled: {stuck:?}");
    assert_eq!(later, at_shutdown, "the cancelled write landed after shutdown returned");
    if matches!(machine.layout, Layout::Hybrid { .. }) {
        // v1 sets the limit only once usage is under it: cancelled, it never did.
        assert_eq!(at_shutdown, before);
    }
}

#[test]
fn writes_through_the_off_thread_writer_land_on_real_files() {
    let Some(machine) = machine("writes_through_the_off_thread_writer_land_on_real_files") else { return };
    let guard = GroupGuard::create(&machine);
    let writer = KnobWriter::new(1, 4);
    let limit = |mib: u64| machine.backend.plan_knob(&guard.group, Knob::Max, Some(mib * MIB)).unwrap().unwrap();
    for mib in [300, 200, 100] {
        writer.submit(limit(mib)).unwrap();
    }
    assert!(writer.wait_idle(Duration::from_secs(10)));
    let outcomes = writer.completed();
    assert!(outcomes.iter().all(|o| o.result.is_ok()), "{outcomes:?}");
    assert_eq!(outcomes.last().map(|o| o.contents.as_str()), Some("104857600"));
    assert_eq!(machine.backend.knob(&guard.group, Knob::Max).unwrap(), Some(100 * MIB));
    let missing = FileWrite::new(guard.group.dir_in(Path::new("/sys/fs/cgroup/critmem-no-such-group")).join("memory.max"), "1", true);
    writer.submit(missing).unwrap();
    assert!(writer.wait_idle(Duration::from_secs(10)));
    assert!(writer.completed()[0].result.is_err());
    assert!(writer.shutdown(Duration::from_secs(5)).is_empty());
}

#[test]
fn protections_asked_by_a_controller_land_on_v2_and_are_restored() {
    let name = "protections_asked_by_a_controller_land_on_v2_and_are_restored";
    let Some(machine) = machine(name) else { return };
    let dir = tempfile::tempdir().unwrap();
    let path = GroupPath::new(&unique_name()).unwrap();
    let specs = vec![GroupSpec { name: "srt".into(), path: path.clone(), role: srt_role(), floor_bytes: 8 * MIB, create: true }];
    let options = PlatformOptions {
        total_memory_bytes: 256 * MIB,
        dry_run: false,
        journal_path: Some(dir.path().join("journal.jsonl")),
        job_server: None,
        proc_root: PROC_ROOT.into(),
        clock: MonotonicClock::shared(),
        cpus: critmem_linux::platform::online_cpus(),
        swap_device: None,
    };
    let mut guard = PlatformGuard(Some(LinuxPlatform::open(open_backend(&machine.layout).unwrap(), specs, options).unwrap()));
    let platform = guard.get();
    critmem_policy::Platform::observe(platform).unwrap();
    let asked = [
        critmem_policy::Action::SetMin { group: 0, bytes: Some(16 * MIB + 100) },
        critmem_policy::Action::SetLow { group: 0, bytes: Some(32 * MIB) },
    ];
    let applied = critmem_policy::Platform::apply(platform, &asked).unwrap();
    assert!(platform.wait_writes(Duration::from_secs(10)));
    let knobs = critmem_policy::Platform::observe(platform).unwrap().groups[0].knobs;
    if machine.backend.capabilities().protection {
        // Whole pages, never more than asked.
        assert_eq!(applied.len(), 2, "{applied:?}");
        assert_eq!((knobs.min_bytes, knobs.low_bytes), (Some(16 * MIB), Some(32 * MIB)));
        assert_eq!(machine.backend.knob(&path, Knob::Min).unwrap(), Some(16 * MIB));
        assert_eq!(machine.backend.knob(&path, Knob::Low).unwrap(), Some(32 * MIB));
    } else {
        // v1 has no protections: not applied, not an error.
        assert!(applied.is_empty(), "{applied:?}");
        assert_eq!(platform.stats().unsupported, 2);
    }
    let report = guard.restore();
    assert!(report.failures.is_empty(), "{report:?}");
    assert!(!machine.backend.exists(&path));
}
