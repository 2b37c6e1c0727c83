use super::files::{parse_knob, parse_u64};
use super::*;
use crate::cgroup::fake::{populate, v2_root, V2_FILES};
use crate::cgroup::V2Backend;
use crate::clock::FakeClock;
use proptest::prelude::*;

const MIB: u64 = 1 << 20;
/// Where the platforms' fake clocks start.
const START_NS: u64 = 1_000_000_000;

/// Lets `ns` of the platform's (fake) clock pass.
fn pass_time(platform: &LinuxPlatform, ns: u64) {
    platform.clock.sleep_until_ns(platform.clock.now_ns() + ns);
}

fn specs() -> Vec<GroupSpec> {
    vec![
        GroupSpec {
            name: "rt".into(),
            path: GroupPath::new("crit-rt").unwrap(),
            role: GroupRole::SoftRealTime { deadline_ns: 10_000_000, bcet_ns: 1_000_000 },
            floor_bytes: 64 * MIB,
            create: true,
        },
        GroupSpec {
            name: "batch".into(),
            path: GroupPath::new("batch").unwrap(),
            role: GroupRole::NonRealTime,
            floor_bytes: 16 * MIB,
            create: false,
        },
    ]
}

/// A fake v2 tree with `batch` existing (adopted) and `critmem/rt` to be created.
fn fake(dir: &Path) -> PlatformOptions {
    v2_root(&dir.join("cg"));
    populate(&dir.join("cg/batch"), V2_FILES);
    populate(&dir.join("proc"), &[("meminfo", "MemTotal: 100 kB\nSwapFree:        0 kB\n")]);
    PlatformOptions {
        total_memory_bytes: 512 * MIB,
        dry_run: false,
        journal_path: Some(dir.join("journal.jsonl")),
        job_server: None,
        proc_root: dir.join("proc"),
        clock: FakeClock::new(START_NS),
        cpus: 2,
        swap_device: None,
    }
}

/// The fake tree has no kernel to fill a new directory; do it after open.
fn open(dir: &Path, options: PlatformOptions) -> LinuxPlatform {
    let backend = Box::new(V2Backend::new(dir.join("cg")));
    // mkdir happens inside open; pre-create the files the kernel would add afterwards.
    let platform = LinuxPlatform::open(backend, specs(), options);
    let platform = platform.unwrap();
    populate(&dir.join("cg/crit-rt"), V2_FILES);
    platform
}

fn settle(platform: &LinuxPlatform) {
    assert!(platform.writer.wait_idle(Duration::from_secs(5)));
}

#[test]
fn limits_are_rounded_down_to_pages_clamped_to_floors_journaled_and_restored() {
    let dir = tempfile::tempdir().unwrap();
    let options = fake(dir.path());
    let mut platform = open(dir.path(), options);
    platform.observe().unwrap();
    let applied = platform
        .apply(&[Action::SetMax { group: 0, bytes: Some(MIB) }, Action::SetMax { group: 1, bytes: Some(100 * MIB + 4095) }])
        .unwrap();
    // Never above the request (whole pages, rounded down), never below the floor.
    assert_eq!(applied, vec![Action::SetMax { group: 0, bytes: Some(64 * MIB) }, Action::SetMax { group: 1, bytes: Some(100 * MIB) }]);
    settle(&platform);
    // cgroup v2: the limit is memory.high, under a memory.max backstop 16 MiB above it.
    assert_eq!(std::fs::read_to_string(dir.path().join("cg/batch/memory.high")).unwrap(), (100 * MIB).to_string());
    assert_eq!(std::fs::read_to_string(dir.path().join("cg/batch/memory.max")).unwrap(), (116 * MIB).to_string());
    let obs = platform.observe().unwrap();
    assert_eq!((obs.groups[1].knobs.max_bytes, obs.groups[1].knobs.high_bytes), (Some(100 * MIB), None), "shown as the hard limit");
    assert_eq!(platform.stats().clamped_to_floor, 1);
    // The same value again is not rewritten.
    assert!(platform.apply(&[Action::SetMax { group: 1, bytes: Some(100 * MIB + 1) }]).unwrap().is_empty());
    // Protections round down as well; less than a page is none.
    let applied = platform.apply(&[Action::SetMin { group: 1, bytes: Some(MIB + 10) }, Action::SetLow { group: 1, bytes: Some(4095) }]);
    assert_eq!(applied.unwrap(), vec![Action::SetMin { group: 1, bytes: Some(MIB) }]);
    let report = platform.restore(Duration::from_secs(5)).unwrap();
    assert_eq!(std::fs::read_to_string(dir.path().join("cg/batch/memory.max")).unwrap(), "max");
    assert_eq!(std::fs::read_to_string(dir.path().join("cg/batch/memory.high")).unwrap(), "max");
    assert!(!dir.path().join("cg/crit-rt").exists(), "created groups are removed: {report:?}");
}

#[test]
fn a_floor_of_part_of_a_page_is_observed_and_applied_as_whole_pages() {
    let dir = tempfile::tempdir().unwrap();
    let options = fake(dir.path());
    let mut specs = specs();
    specs[1].floor_bytes = 16 * MIB + 1;
    let mut platform = LinuxPlatform::open(Box::new(V2Backend::new(dir.path().join("cg"))), specs, options).unwrap();
    populate(&dir.path().join("cg/crit-rt"), V2_FILES);
    assert_eq!(platform.observe().unwrap().groups[1].floor_bytes, 16 * MIB + 4096);
    let applied = platform.apply(&[Action::SetMax { group: 1, bytes: Some(16 * MIB) }]).unwrap();
    assert_eq!(applied, vec![Action::SetMax { group: 1, bytes: Some(16 * MIB + 4096) }]);
    platform.restore(Duration::from_secs(5)).unwrap();
}

/// Found by the audit: a group missing part-way through left the groups created before it,
/// and the journal, behind until a next start (never, for a configuration that stays wrong).
#[test]
fn a_failed_open_removes_the_groups_it_created_and_its_journal() {
    let dir = tempfile::tempdir().unwrap();
    let options = fake(dir.path());
    let mut specs = specs();
    specs[1].path = GroupPath::new("missing").unwrap();
    let backend = Box::new(V2Backend::new(dir.path().join("cg")));
    let err = LinuxPlatform::open(backend, specs, options).err().expect("the missing group is an error");
    assert!(err.to_string().contains("does not exist"), "{err}");
    assert!(!dir.path().join("cg/crit-rt").exists(), "the group created before the error is removed");
    assert!(!dir.path().join("journal.jsonl").exists(), "and the journal with it");
}

#[test]
fn a_v2_hard_limit_never_goes_below_unreclaimable_memory() {
    let dir = tempfile::tempdir().unwrap();
    let options = fake(dir.path());
    let mut platform = open(dir.path(), options);
    let batch = dir.path().join("cg/batch");
    std::fs::write(batch.join("memory.current"), (200 * MIB).to_string()).unwrap();
    std::fs::write(batch.join("memory.stat"), format!("anon {}\nfile 0\nunevictable 0\n", 150 * MIB)).unwrap();
    platform.observe().unwrap();
    let applied = platform.apply(&[Action::SetMax { group: 1, bytes: Some(32 * MIB) }]).unwrap();
    // Below usage: throttled through memory.high at what it cannot give back, memory.max kept
    // above usage.
    assert_eq!(applied, vec![Action::SetMax { group: 1, bytes: Some(158 * MIB) }]);
    settle(&platform);
    assert_eq!(std::fs::read_to_string(batch.join("memory.high")).unwrap(), (158 * MIB).to_string());
    assert_eq!(std::fs::read_to_string(batch.join("memory.max")).unwrap(), (216 * MIB).to_string());
    platform.observe().unwrap();
    // With enough free swap the anon memory is reclaimable, so the request stands.
    std::fs::write(dir.path().join("proc/meminfo"), "SwapFree: 1048576 kB\n").unwrap();
    let applied = platform.apply(&[Action::SetMax { group: 1, bytes: Some(32 * MIB) }]).unwrap();
    assert_eq!(applied, vec![Action::SetMax { group: 1, bytes: Some(32 * MIB) }]);
    settle(&platform);
    // Once usage is down, the backstop follows it down.
    std::fs::write(batch.join("memory.current"), (30 * MIB).to_string()).unwrap();
    platform.observe().unwrap();
    let applied = platform.apply(&[Action::SetMax { group: 1, bytes: Some(32 * MIB) }]).unwrap();
    assert!(applied.is_empty(), "the limit is already in place: {applied:?}");
    settle(&platform);
    assert_eq!(std::fs::read_to_string(batch.join("memory.high")).unwrap(), (32 * MIB).to_string());
    assert_eq!(std::fs::read_to_string(batch.join("memory.max")).unwrap(), (48 * MIB).to_string());
    assert_eq!(platform.stats().lowered_via_high, 2);
    platform.restore(Duration::from_secs(5)).unwrap();
}

#[test]
fn page_rounding_saturates_instead_of_wrapping_to_zero() {
    assert_eq!(page_align_up(1), 4096);
    assert_eq!(page_align_up(8192), 8192);
    assert_eq!(page_align_up(u64::MAX), u64::MAX / 4096 * 4096);
}

#[test]
fn a_v2_group_growing_while_throttled_keeps_its_hard_limit_ahead() {
    let dir = tempfile::tempdir().unwrap();
    let options = fake(dir.path());
    let mut platform = open(dir.path(), options);
    let batch = dir.path().join("cg/batch");
    std::fs::write(batch.join("memory.current"), (200 * MIB).to_string()).unwrap();
    std::fs::write(dir.path().join("proc/meminfo"), "SwapFree: 1048576 kB\n").unwrap();
    platform.observe().unwrap();
    let applied = platform.apply(&[Action::SetMax { group: 1, bytes: Some(100 * MIB) }]).unwrap();
    assert_eq!(applied, vec![Action::SetMax { group: 1, bytes: Some(100 * MIB) }]);
    settle(&platform);
    let max_file = || std::fs::read_to_string(batch.join("memory.max")).unwrap();
    assert_eq!(max_file(), (216 * MIB).to_string());
    // Throttled, it still grows; with no new request memory.max must move ahead of it.
    std::fs::write(batch.join("memory.current"), (205 * MIB).to_string()).unwrap();
    assert_eq!(platform.observe().unwrap().groups[1].knobs.max_bytes, Some(100 * MIB), "the limit, as the controller set it");
    assert_eq!(max_file(), (216 * MIB).to_string(), "still 11 MiB ahead");
    std::fs::write(batch.join("memory.current"), (210 * MIB).to_string()).unwrap();
    platform.observe().unwrap();
    assert_eq!(max_file(), (226 * MIB).to_string(), "6 MiB ahead is too close: raised to 16 MiB ahead");
    assert_eq!(platform.stats().v2_max_kept_ahead, 1);
    platform.restore(Duration::from_secs(5)).unwrap();
    assert_eq!(std::fs::read_to_string(batch.join("memory.max")).unwrap(), "max");
}

#[test]
fn a_v2_backstop_stays_above_memory_and_swap_so_a_swapoff_kills_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let options = fake(dir.path());
    let mut platform = open(dir.path(), options);
    let batch = dir.path().join("cg/batch");
    let write = |name: &str, mib: u64| std::fs::write(batch.join(name), (mib * MIB).to_string()).unwrap();
    let max_file = || std::fs::read_to_string(batch.join("memory.max")).unwrap();
    write("memory.current", 200);
    write("memory.swap.current", 0);
    std::fs::write(dir.path().join("proc/meminfo"), "SwapFree: 1048576 kB\n").unwrap();
    platform.observe().unwrap();
    platform.apply(&[Action::SetMax { group: 1, bytes: Some(100 * MIB) }]).unwrap();
    settle(&platform);
    assert_eq!(max_file(), (216 * MIB).to_string());
    // Squeezed to its limit, half of it is in swap: a lower limit keeps the backstop above
    // both, where usage alone would have let it fall to 116 MiB.
    write("memory.current", 100);
    write("memory.swap.current", 100);
    platform.observe().unwrap();
    platform.apply(&[Action::SetMax { group: 1, bytes: Some(90 * MIB) }]).unwrap();
    settle(&platform);
    assert_eq!(max_file(), (216 * MIB).to_string());
    // A swapoff brings it all back: still under the backstop, so nothing is killed.
    write("memory.current", 200);
    write("memory.swap.current", 0);
    platform.observe().unwrap();
    assert_eq!(max_file(), (216 * MIB).to_string());
    // More in swap than the headroom allows for: raised with it.
    write("memory.current", 90);
    write("memory.swap.current", 130);
    platform.observe().unwrap();
    assert_eq!(max_file(), (236 * MIB).to_string());
    assert_eq!(platform.stats().v2_max_kept_ahead, 1);
    // The group's file replaced, the one read so far answering nothing (as a removed
    // cgroup's file fails its reads): the new one is opened and counted.
    let old = std::fs::OpenOptions::new().write(true).open(batch.join("memory.swap.current")).unwrap();
    std::fs::write(batch.join("swap.new"), (150 * MIB).to_string()).unwrap();
    std::fs::rename(batch.join("swap.new"), batch.join("memory.swap.current")).unwrap();
    old.set_len(0).unwrap();
    platform.observe().unwrap();
    assert_eq!(max_file(), (256 * MIB).to_string());
    assert_eq!(platform.stats().v2_max_kept_ahead, 2);
    platform.restore(Duration::from_secs(5)).unwrap();
}

#[test]
fn a_v2_group_grown_past_its_limit_with_memory_it_cannot_give_back_is_raised_not_left_throttled() {
    let dir = tempfile::tempdir().unwrap();
    let options = fake(dir.path());
    let mut platform = open(dir.path(), options);
    let batch = dir.path().join("cg/batch");
    let file = |name: &str| std::fs::read_to_string(batch.join(name)).unwrap();
    std::fs::write(batch.join("memory.current"), (10 * MIB).to_string()).unwrap();
    platform.observe().unwrap();
    // Set while the group is small: a growing group meets the throttle, not an OOM kill.
    platform.apply(&[Action::SetMax { group: 1, bytes: Some(32 * MIB) }]).unwrap();
    settle(&platform);
    assert_eq!((file("memory.high"), file("memory.max")), ((32 * MIB).to_string(), (48 * MIB).to_string()));
    // It grew past the limit with page cache it can give back: the throttle is left to work.
    std::fs::write(batch.join("memory.current"), (40 * MIB).to_string()).unwrap();
    std::fs::write(batch.join("memory.stat"), format!("anon {}\nfile {}\nunevictable 0\n", 8 * MIB, 32 * MIB)).unwrap();
    assert_eq!(platform.observe().unwrap().groups[1].knobs.max_bytes, Some(32 * MIB));
    assert_eq!(platform.stats().oom_rescues, 0);
    assert_eq!(file("memory.max"), (56 * MIB).to_string(), "the backstop stays ahead of usage");
    // With anonymous memory and no swap it never can: raised at once, held, counted.
    std::fs::write(batch.join("memory.stat"), format!("anon {}\nfile 0\nunevictable 0\n", 40 * MIB)).unwrap();
    let obs = platform.observe().unwrap();
    assert_eq!(obs.groups[1].knobs.max_bytes, Some(64 * MIB), "48 MiB it cannot give back, plus 16");
    assert_eq!(file("memory.high"), (64 * MIB).to_string());
    assert_eq!(file("memory.max"), (80 * MIB).to_string(), "the backstop above the raised limit");
    assert_eq!(platform.stats().oom_rescues, 1);
    let applied = platform.apply(&[Action::SetMax { group: 1, bytes: Some(32 * MIB) }]).unwrap();
    assert!(applied.is_empty(), "held: {applied:?}");
    assert_eq!(platform.stats().clamped_to_oom_hold, 1);
    platform.restore(Duration::from_secs(5)).unwrap();
    assert_eq!((file("memory.high"), file("memory.max")), ("max".to_owned(), "max".to_owned()));
}

#[test]
fn at_the_end_of_a_run_a_v2_group_over_its_limit_is_raised_so_its_tasks_can_exit() {
    let dir = tempfile::tempdir().unwrap();
    let options = fake(dir.path());
    let mut platform = open(dir.path(), options);
    let batch = dir.path().join("cg/batch");
    std::fs::write(batch.join("memory.current"), (10 * MIB).to_string()).unwrap();
    platform.observe().unwrap();
    platform.apply(&[Action::SetMax { group: 1, bytes: Some(32 * MIB) }]).unwrap();
    settle(&platform);
    // Over the limit with page cache: not a rescue while running, but stopping tasks must not
    // sleep in the throttle.
    std::fs::write(batch.join("memory.current"), (40 * MIB).to_string()).unwrap();
    std::fs::write(batch.join("memory.stat"), format!("anon {}\nfile {}\nunevictable 0\n", 8 * MIB, 32 * MIB)).unwrap();
    assert_eq!(platform.rescue_waiting_groups(), 1);
    assert!(std::fs::read_to_string(batch.join("memory.high")).unwrap().parse::<u64>().unwrap() > 40 * MIB);
    platform.restore(Duration::from_secs(5)).unwrap();
}

#[test]
fn a_v2_limit_write_reclaims_first_and_stops_when_reclaim_makes_no_progress() {
    let dir = tempfile::tempdir().unwrap();
    let group = dir.path().join("cg/g");
    populate(&group, V2_FILES);
    std::fs::write(group.join("memory.current"), (100 * MIB).to_string()).unwrap();
    let backend = V2Backend::new(dir.path().join("cg"));
    let write = backend.plan_knob(&GroupPath::new("g").unwrap(), Knob::High, Some(32 * MIB)).unwrap().unwrap();
    let first = write.reclaim_first.clone().expect("a v2 limit reclaims first");
    assert_eq!((first.target_bytes, first.reclaim.file_name().unwrap().to_str()), (32 * MIB, Some("memory.reclaim")));
    // A plain file never frees anything: the loop gives up and the limit is written.
    write.perform().unwrap();
    assert_eq!(std::fs::read_to_string(group.join("memory.high")).unwrap(), (32 * MIB).to_string());
    assert_eq!(std::fs::read_to_string(group.join("memory.reclaim")).unwrap(), crate::cgroup::RECLAIM_STEP_BYTES.to_string());
    // Protections never reclaim.
    assert!(backend.plan_knob(&GroupPath::new("g").unwrap(), Knob::Min, Some(MIB)).unwrap().unwrap().reclaim_first.is_none());
    // Cancelled (the writer shutting down): no further step, and the limit is not written.
    let lower = backend.plan_knob(&GroupPath::new("g").unwrap(), Knob::High, Some(16 * MIB)).unwrap().unwrap();
    std::fs::write(group.join("memory.reclaim"), "").unwrap();
    assert!(lower.perform_unless(&|| true).is_err());
    assert_eq!(std::fs::read_to_string(group.join("memory.high")).unwrap(), (32 * MIB).to_string());
    assert_eq!(std::fs::read_to_string(group.join("memory.reclaim")).unwrap(), "");
}

/// The v2 platform with group `batch` at 63 MiB of its 64 MiB `memory.max`.
fn v2_batch_near_its_limit(dir: &Path) -> (LinuxPlatform, PathBuf) {
    let platform = open(dir, fake(dir));
    let batch = dir.join("cg/batch");
    std::fs::write(batch.join("memory.max"), (64 * MIB).to_string()).unwrap();
    std::fs::write(batch.join("memory.current"), (63 * MIB).to_string()).unwrap();
    (platform, batch)
}

#[test]
fn a_v2_group_out_of_memory_gets_its_limit_raised_and_held() {
    let dir = tempfile::tempdir().unwrap();
    let (mut platform, batch) = v2_batch_near_its_limit(dir.path());
    assert_eq!(platform.observe().unwrap().groups[1].knobs.max_bytes, Some(64 * MIB), "no OOM yet");
    std::fs::write(batch.join("memory.events"), "low 0\nhigh 0\nmax 9\noom 1\noom_kill 0\n").unwrap();
    let obs = platform.observe().unwrap();
    assert_eq!(obs.groups[1].knobs.max_bytes, Some(80 * MIB), "raised by 16 MiB at once");
    assert_eq!(std::fs::read_to_string(batch.join("memory.max")).unwrap(), (80 * MIB).to_string());
    assert_eq!(platform.stats().oom_rescues, 1);
    // Held against the controller's lower requests for a while.
    let applied = platform.apply(&[Action::SetMax { group: 1, bytes: Some(32 * MIB) }]).unwrap();
    assert_eq!(applied, vec![Action::SetMax { group: 1, bytes: Some(80 * MIB) }]);
    assert_eq!(platform.stats().clamped_to_oom_hold, 1);
    settle(&platform);
    // The same event is not a new OOM.
    platform.observe().unwrap();
    assert_eq!(platform.stats().oom_rescues, 1);
    platform.restore(Duration::from_secs(5)).unwrap();
    assert_eq!(
        std::fs::read_to_string(batch.join("memory.max")).unwrap(),
        (64 * MIB).to_string(),
        "restored to its value before the rescue"
    );
}

#[test]
fn a_v2_oom_is_seen_in_a_replaced_events_file_when_the_old_one_no_longer_reads() {
    let dir = tempfile::tempdir().unwrap();
    let (mut platform, batch) = v2_batch_near_its_limit(dir.path());
    platform.observe().unwrap();
    // The file the platform holds answers nothing (as a removed cgroup's does); the group's
    // new one reports an OOM.
    let old = std::fs::OpenOptions::new().write(true).open(batch.join("memory.events")).unwrap();
    std::fs::write(batch.join("events.new"), "low 0\nhigh 0\nmax 9\noom 1\noom_kill 0\n").unwrap();
    std::fs::rename(batch.join("events.new"), batch.join("memory.events")).unwrap();
    old.set_len(0).unwrap();
    assert_eq!(platform.observe().unwrap().groups[1].knobs.max_bytes, Some(80 * MIB));
    assert_eq!(platform.stats().oom_rescues, 1);
    platform.restore(Duration::from_secs(5)).unwrap();
}

/// An adopted hybrid group `batch` (its v1 directory returned), with `extra` files beside
/// the usual ones, opened alone.
fn v1_adopted(dir: &Path, extra: &[(&str, &str)]) -> (LinuxPlatform, PathBuf) {
    v1_adopted_with(dir, extra, false)
}

/// A v1 group `batch` on a fake hybrid tree, with `extra` files; `notify`: the backend
/// registers OOM notifiers there too (the test signals them).
fn v1_adopted_with(dir: &Path, extra: &[(&str, &str)], notify: bool) -> (LinuxPlatform, PathBuf) {
    use crate::cgroup::fake::{
        hybrid_roots, v1_bandwidth_roots, UNIFIED_FILES, V1_BLKIO_FILES, V1_CPUACCT_FILES, V1_CPU_FILES, V1_MEMORY_FILES,
    };
    let (memory, unified) = hybrid_roots(&dir.join("cg"));
    let (cpu, cpuacct, blkio) = v1_bandwidth_roots(&dir.join("cg"));
    let batch = memory.join("batch");
    populate(&batch, V1_MEMORY_FILES);
    populate(&batch, extra);
    populate(&unified.join("batch"), UNIFIED_FILES);
    populate(&cpu.join("batch"), V1_CPU_FILES);
    populate(&cpuacct.join("batch"), V1_CPUACCT_FILES);
    populate(&blkio.join("batch"), V1_BLKIO_FILES);
    let mut options = fake(dir);
    options.journal_path = Some(dir.join("journal-v1.jsonl"));
    let specs = vec![GroupSpec {
        name: "batch".into(),
        path: GroupPath::new("batch").unwrap(),
        role: GroupRole::NonRealTime,
        floor_bytes: 16 * MIB,
        create: false,
    }];
    let backend = crate::cgroup::HybridBackend::new(memory, unified).with_bandwidth_roots(Some(cpu), Some(cpuacct), Some(blkio));
    let backend = if notify { backend.notifying_on_plain_fs() } else { backend };
    (LinuxPlatform::open(Box::new(backend), specs, options).unwrap(), batch)
}

#[test]
fn usage_nobody_reads_waits_for_the_knobs_until_an_oom_notification_brings_the_rescue() {
    let dir = tempfile::tempdir().unwrap();
    let (mut platform, batch) = v1_adopted_with(dir.path(), &[("cgroup.event_control", "")], true);
    let registration = std::fs::read_to_string(batch.join("cgroup.event_control")).unwrap();
    assert_eq!(registration.split(' ').filter(|fd| fd.parse::<u32>().is_ok()).count(), 2, "`<eventfd> <oom_control fd>`: {registration:?}");
    platform.set_usage_inputs(|_| false);
    let (usage_file, oom_control) = (batch.join("memory.usage_in_bytes"), batch.join("memory.oom_control"));
    let set = |usage_mib: u64, under_oom: bool| {
        std::fs::write(&usage_file, (usage_mib * MIB).to_string()).unwrap();
        std::fs::write(&oom_control, format!("oom_kill_disable 1\nunder_oom {}\noom_kill 0\n", u8::from(under_oom))).unwrap();
    };
    std::fs::write(batch.join("memory.limit_in_bytes"), (100 * MIB).to_string()).unwrap();
    set(10, false);
    assert_eq!(platform.observe().unwrap().groups[0].usage_bytes, 10 * MIB, "the first tick reads everything");

    // At its limit with a task waiting, but the kernel has not said so yet: usage is not
    // read, so nothing is rescued on a stale value.
    set(100, true);
    let obs = platform.observe().unwrap();
    assert_eq!(obs.groups[0].usage_bytes, 10 * MIB, "usage nobody reads is not read");
    assert_eq!((platform.stats().usage_reads_skipped, platform.stats().oom_rescues), (1, 0));

    platform.signal_oom_notifier(0);
    let obs = platform.observe().unwrap();
    assert_eq!(obs.groups[0].usage_bytes, 100 * MIB, "notified: usage read at once");
    assert_eq!(obs.groups[0].knobs.max_bytes, Some(125 * MIB), "and the limit raised by a quarter");
    assert_eq!((platform.stats().oom_notifications, platform.stats().oom_rescues, platform.stats().oom_rescues_on_notification), (1, 1, 1));

    // Seen waiting when rescued, so usage is read every tick until it is seen not waiting;
    // the raised limit is far above it (a task reaching it again is notified again), so no
    // second raise, and from then on usage waits for the knobs again.
    set(101, true);
    assert_eq!(platform.observe().unwrap().groups[0].usage_bytes, 101 * MIB);
    assert_eq!(platform.stats().oom_rescues, 1);
    set(60, false);
    assert_eq!(platform.observe().unwrap().groups[0].usage_bytes, 60 * MIB, "still pending: read");
    set(61, false);
    assert_eq!(platform.observe().unwrap().groups[0].usage_bytes, 60 * MIB, "not pending any more");
    let refreshed = (0..KNOB_REFRESH_TICKS).map(|_| platform.observe().unwrap().groups[0].usage_bytes).any(|u| u == 61 * MIB);
    assert!(refreshed, "unread usage is still refreshed with the knobs");
    assert_eq!(platform.usage_now(0).unwrap(), 61 * MIB);

    // A controller that reads usage gets it fresh every tick, notifier or not.
    platform.set_usage_inputs(|_| true);
    set(70, false);
    assert_eq!(platform.observe().unwrap().groups[0].usage_bytes, 70 * MIB);
    let report = platform.restore(Duration::from_secs(5)).unwrap();
    assert!(report.failures.is_empty(), "{report:?}");
}

#[test]
fn a_v1_group_under_oom_gets_its_limit_raised_and_the_oom_killer_switch_restored() {
    let dir = tempfile::tempdir().unwrap();
    let (mut platform, batch) = v1_adopted(dir.path(), &[]);
    let oom_control = batch.join("memory.oom_control");
    assert_eq!(std::fs::read_to_string(&oom_control).unwrap(), "1", "the OOM killer is switched off");
    std::fs::write(batch.join("memory.limit_in_bytes"), (100 * MIB).to_string()).unwrap();
    std::fs::write(batch.join("memory.usage_in_bytes"), (100 * MIB).to_string()).unwrap();
    std::fs::write(&oom_control, "oom_kill_disable 1\nunder_oom 1\noom_kill 0\n").unwrap();
    let obs = platform.observe().unwrap();
    assert_eq!(obs.groups[0].knobs.max_bytes, Some(125 * MIB), "raised by a quarter at once");
    assert_eq!(platform.stats().oom_rescues, 1);
    let report = platform.restore(Duration::from_secs(5)).unwrap();
    assert!(report.failures.is_empty(), "{report:?}");
    assert_eq!(std::fs::read_to_string(&oom_control).unwrap(), "0", "switch restored");
    assert_eq!(
        std::fs::read_to_string(batch.join("memory.limit_in_bytes")).unwrap(),
        (100 * MIB).to_string(),
        "limit restored to its value before the rescue"
    );
}

/// [`v1_adopted`] with a memory+swap limit of 256 MiB.
fn v1_with_memsw_limit(dir: &Path) -> (LinuxPlatform, PathBuf) {
    v1_adopted(dir, &[("memory.memsw.limit_in_bytes", "268435456\n"), ("memory.memsw.usage_in_bytes", "8192\n")])
}

#[test]
fn a_v1_memory_limit_never_goes_above_the_groups_memory_and_swap_limit() {
    let dir = tempfile::tempdir().unwrap();
    let (mut platform, batch) = v1_with_memsw_limit(dir.path());
    platform.observe().unwrap();
    // The kernel would refuse 1 GiB with EINVAL; the memory+swap limit binds anyway.
    let applied = platform.apply(&[Action::SetMax { group: 0, bytes: Some(1024 * MIB) }]).unwrap();
    assert_eq!(applied, vec![Action::SetMax { group: 0, bytes: Some(256 * MIB) }]);
    settle(&platform);
    assert_eq!(std::fs::read_to_string(batch.join("memory.limit_in_bytes")).unwrap(), (256 * MIB).to_string());
    assert_eq!(platform.stats().clamped_to_combined_limit, 1);
    platform.apply(&[Action::SetMax { group: 0, bytes: Some(100 * MIB) }]).unwrap();
    settle(&platform);
    assert_eq!(
        std::fs::read_to_string(batch.join("memory.limit_in_bytes")).unwrap(),
        (100 * MIB).to_string(),
        "lower limits are left alone"
    );
    assert_eq!(platform.stats().clamped_to_combined_limit, 1);
}

#[test]
fn a_v1_group_out_of_memory_at_its_memory_and_swap_limit_gets_its_oom_killer_back_until_it_has_room() {
    let dir = tempfile::tempdir().unwrap();
    let (mut platform, batch) = v1_with_memsw_limit(dir.path());
    let oom_control = batch.join("memory.oom_control");
    assert_eq!(std::fs::read_to_string(&oom_control).unwrap(), "1", "the OOM killer is switched off");
    // Memory limit 200 MiB, but memory+swap is full at 256 MiB: raising the memory limit
    // cannot help, and with the killer off the tasks would wait for ever.
    std::fs::write(batch.join("memory.limit_in_bytes"), (200 * MIB).to_string()).unwrap();
    std::fs::write(batch.join("memory.usage_in_bytes"), (199 * MIB).to_string()).unwrap();
    std::fs::write(batch.join("memory.memsw.usage_in_bytes"), (256 * MIB).to_string()).unwrap();
    std::fs::write(&oom_control, "oom_kill_disable 1\nunder_oom 1\noom_kill 0\n").unwrap();
    let obs = platform.observe().unwrap();
    assert_eq!(std::fs::read_to_string(&oom_control).unwrap(), "0", "the OOM killer is back on");
    assert_eq!((platform.stats().oom_guard_releases, platform.stats().oom_rescues), (1, 0));
    assert_eq!(obs.groups[0].knobs.max_bytes, Some(200 * MIB), "nothing raised");

    // Still out of memory: stays released.
    std::fs::write(&oom_control, "oom_kill_disable 0\nunder_oom 1\noom_kill 0\n").unwrap();
    platform.observe().unwrap();
    assert_eq!(std::fs::read_to_string(&oom_control).unwrap(), "oom_kill_disable 0\nunder_oom 1\noom_kill 0\n");
    // The kernel killed a task: room again, so the guard comes back.
    std::fs::write(batch.join("memory.usage_in_bytes"), (120 * MIB).to_string()).unwrap();
    std::fs::write(batch.join("memory.memsw.usage_in_bytes"), (150 * MIB).to_string()).unwrap();
    std::fs::write(&oom_control, "oom_kill_disable 0\nunder_oom 0\noom_kill 1\n").unwrap();
    platform.observe().unwrap();
    assert_eq!(std::fs::read_to_string(&oom_control).unwrap(), "1", "switched off again");
    assert_eq!(platform.stats().oom_guard_releases, 1);

    // Out of memory at the memory limit alone: raised as usual, but not above 256 MiB.
    std::fs::write(batch.join("memory.usage_in_bytes"), (200 * MIB).to_string()).unwrap();
    std::fs::write(&oom_control, "oom_kill_disable 1\nunder_oom 1\noom_kill 1\n").unwrap();
    let obs = platform.observe().unwrap();
    assert_eq!(obs.groups[0].knobs.max_bytes, Some(250 * MIB), "raised by a quarter");
    assert_eq!(platform.stats().oom_rescues, 1);
    std::fs::write(batch.join("memory.limit_in_bytes"), (250 * MIB).to_string()).unwrap();
    std::fs::write(batch.join("memory.usage_in_bytes"), (250 * MIB).to_string()).unwrap();
    let obs = platform.observe().unwrap();
    assert_eq!(obs.groups[0].knobs.max_bytes, Some(256 * MIB), "capped at the memory+swap limit");
    assert_eq!(platform.stats().oom_rescues, 2);
    let report = platform.restore(Duration::from_secs(5)).unwrap();
    assert!(report.failures.is_empty(), "{report:?}");
    assert_eq!(std::fs::read_to_string(&oom_control).unwrap(), "0", "switch restored");
}

#[test]
fn a_notified_group_waiting_at_its_memory_and_swap_limit_far_below_its_memory_limit_gets_its_oom_killer_back() {
    let dir = tempfile::tempdir().unwrap();
    let memsw = [("memory.memsw.limit_in_bytes", "268435456\n"), ("memory.memsw.usage_in_bytes", "8192\n"), ("cgroup.event_control", "")];
    let (mut platform, batch) = v1_adopted_with(dir.path(), &memsw, true);
    let oom_control = batch.join("memory.oom_control");
    // Most of it swapped out: memory usage is far below the memory limit, memory+swap full.
    std::fs::write(batch.join("memory.limit_in_bytes"), (200 * MIB).to_string()).unwrap();
    std::fs::write(batch.join("memory.usage_in_bytes"), (100 * MIB).to_string()).unwrap();
    std::fs::write(batch.join("memory.memsw.usage_in_bytes"), (256 * MIB).to_string()).unwrap();
    std::fs::write(&oom_control, "oom_kill_disable 1\nunder_oom 1\noom_kill 0\n").unwrap();
    platform.observe().unwrap();
    assert_eq!(platform.stats().oom_guard_releases, 0, "usage is not near the memory limit: not looked at without a notification");
    platform.signal_oom_notifier(0);
    platform.observe().unwrap();
    assert_eq!(std::fs::read_to_string(&oom_control).unwrap(), "0", "the OOM killer is back on");
    assert_eq!((platform.stats().oom_guard_releases, platform.stats().oom_rescues, platform.stats().oom_checks_on_notification), (1, 0, 1));
    let report = platform.restore(Duration::from_secs(5)).unwrap();
    assert!(report.failures.is_empty(), "{report:?}");
}

#[test]
fn a_task_left_waiting_far_below_a_raised_limit_is_woken_by_a_one_page_raise() {
    let dir = tempfile::tempdir().unwrap();
    let (mut platform, batch) = v1_adopted(dir.path(), &[]);
    let (limit_file, usage_file, oom_control) =
        (batch.join("memory.limit_in_bytes"), batch.join("memory.usage_in_bytes"), batch.join("memory.oom_control"));
    let set = |usage_mib: u64, under_oom: bool, kill_disabled: bool| {
        std::fs::write(&usage_file, (usage_mib * MIB).to_string()).unwrap();
        std::fs::write(
            &oom_control,
            format!("oom_kill_disable {}\nunder_oom {}\noom_kill 0\n", u8::from(kill_disabled), u8::from(under_oom)),
        )
        .unwrap();
    };
    let limit = || std::fs::read_to_string(&limit_file).unwrap().parse::<u64>().unwrap();
    std::fs::write(&limit_file, (100 * MIB).to_string()).unwrap();
    set(100, true, true);
    platform.observe().unwrap();
    assert_eq!((limit(), platform.stats().oom_rescues), (125 * MIB, 1), "rescued");

    // One task still waits after the raise (it slept after the raise's wake-up). Right after
    // the raise that may be a woken task that has not left yet: left alone.
    set(101, true, true);
    platform.observe().unwrap();
    assert_eq!((limit(), platform.stats().oom_wakeups), (125 * MIB, 0));
    pass_time(&platform, OOM_WAKE_RETRY_NS + 10_000_000);
    let obs = platform.observe().unwrap();
    assert_eq!((limit(), platform.stats().oom_wakeups), (125 * MIB + PAGE_BYTES, 1), "woken by a one-page raise");
    assert_eq!(obs.groups[0].knobs.max_bytes, Some(125 * MIB + PAGE_BYTES));
    platform.observe().unwrap();
    assert_eq!(platform.stats().oom_wakeups, 1, "not again at once");
    pass_time(&platform, OOM_WAKE_RETRY_NS + 10_000_000);
    platform.observe().unwrap();
    assert_eq!((limit(), platform.stats().oom_wakeups), (125 * MIB + 2 * PAGE_BYTES, 2), "and again while it waits");

    // Nobody waits any more: no more raises.
    set(101, false, true);
    platform.observe().unwrap();
    pass_time(&platform, OOM_WAKE_RETRY_NS + 10_000_000);
    platform.observe().unwrap();
    assert_eq!((limit(), platform.stats().oom_wakeups), (125 * MIB + 2 * PAGE_BYTES, 2));
    // With the OOM killer on, a task does not sleep at the limit: nothing to wake.
    set(101, true, false);
    platform.observe().unwrap();
    assert_eq!(platform.stats().oom_wakeups, 2);
    assert_eq!(platform.stats().oom_rescues, 1, "never treated as a rescue");
    let report = platform.restore(Duration::from_secs(5)).unwrap();
    assert!(report.failures.is_empty(), "{report:?}");
    assert_eq!(limit(), 100 * MIB, "the limit before critmem restored");
}

#[test]
fn a_task_notified_waiting_after_a_raise_is_woken_at_once_but_not_above_the_memory_and_swap_limit() {
    let dir = tempfile::tempdir().unwrap();
    let memsw = [("memory.memsw.limit_in_bytes", "524288000\n"), ("memory.memsw.usage_in_bytes", "8192\n"), ("cgroup.event_control", "")];
    let (mut platform, batch) = v1_adopted_with(dir.path(), &memsw, true);
    let (limit_file, oom_control) = (batch.join("memory.limit_in_bytes"), batch.join("memory.oom_control"));
    let limit = || std::fs::read_to_string(&limit_file).unwrap().parse::<u64>().unwrap();
    std::fs::write(&limit_file, (200 * MIB).to_string()).unwrap();
    std::fs::write(batch.join("memory.usage_in_bytes"), (100 * MIB).to_string()).unwrap();
    platform.observe().unwrap();
    // The task's charge failed at an older, lower limit; it went to sleep (and notified)
    // after the raise to 200 MiB woke the waiters.
    std::fs::write(&oom_control, "oom_kill_disable 1\nunder_oom 1\noom_kill 0\n").unwrap();
    platform.signal_oom_notifier(0);
    platform.observe().unwrap();
    assert_eq!((limit(), platform.stats().oom_wakeups, platform.stats().oom_rescues), (200 * MIB + PAGE_BYTES, 1, 0));
    assert_eq!(platform.stats().oom_guard_releases, 0, "memory+swap has room");

    // With the memory limit at the memory+swap limit a raise would be refused: left alone.
    std::fs::write(batch.join("memory.memsw.limit_in_bytes"), (200 * MIB + PAGE_BYTES).to_string()).unwrap();
    pass_time(&platform, OOM_WAKE_RETRY_NS + 10_000_000);
    platform.observe().unwrap();
    assert_eq!((limit(), platform.stats().oom_wakeups), (200 * MIB + PAGE_BYTES, 1));
    let report = platform.restore(Duration::from_secs(5)).unwrap();
    assert!(report.failures.is_empty(), "{report:?}");
}

#[test]
fn a_group_with_child_groups_gets_no_oom_notifier_and_its_usage_is_read_every_tick() {
    let dir = tempfile::tempdir().unwrap();
    let (memory, _) = crate::cgroup::fake::hybrid_roots(&dir.path().join("cg"));
    std::fs::create_dir_all(memory.join("batch/child")).unwrap();
    let (mut platform, batch) = v1_adopted_with(dir.path(), &[("cgroup.event_control", "")], true);
    assert_eq!(std::fs::read_to_string(batch.join("cgroup.event_control")).unwrap(), "", "nothing registered");
    platform.set_usage_inputs(|_| false);
    for _ in 0..3 {
        platform.observe().unwrap();
    }
    assert_eq!(platform.stats().usage_reads_skipped, 0);
    let report = platform.restore(Duration::from_secs(5)).unwrap();
    assert!(report.failures.is_empty(), "{report:?}");
}

#[test]
fn dry_run_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let mut options = fake(dir.path());
    options.dry_run = true;
    let backend = Box::new(V2Backend::new(dir.path().join("cg")));
    let mut platform = LinuxPlatform::open(backend, specs(), options).unwrap();
    assert!(!dir.path().join("cg/crit-rt").exists());
    let obs = platform.observe().unwrap();
    assert_eq!(obs.groups.len(), 2);
    for _ in 0..3 {
        let applied = platform.apply(&[Action::SetMax { group: 1, bytes: Some(32 * MIB) }]).unwrap();
        assert_eq!(applied.len(), 1);
    }
    assert_eq!(platform.stats().dry_run_writes, 2, "an unchanged intention (the limit and its backstop) is logged once");
    assert_eq!(std::fs::read_to_string(dir.path().join("cg/batch/memory.max")).unwrap(), "max\n");
    platform.restore(Duration::from_secs(1)).unwrap();
    assert!(!dir.path().join("journal.jsonl").exists());
}

#[test]
fn the_conformance_body_passes_on_a_fake_tree() {
    let dir = tempfile::tempdir().unwrap();
    let options = fake(dir.path());
    let mut platform = open(dir.path(), options);
    critmem_policy::check_platform(&mut platform, |p| settle(p)).unwrap();
    platform.restore(Duration::from_secs(5)).unwrap();
}

#[test]
fn the_loop_ticks_the_platform_one_interval_apart_on_its_clock() {
    let dir = tempfile::tempdir().unwrap();
    let options = fake(dir.path());
    let clock = options.clock.clone();
    let mut platform = open(dir.path(), options);
    let mut controller = critmem_policy::make_controller("greedy", serde_json::json!({})).unwrap();
    let mut control = ControlLoop::new(2_000_000, clock.clone());
    let seen_ns = std::cell::RefCell::new(Vec::new());
    control
        .run(
            &mut platform,
            controller.as_mut(),
            || seen_ns.borrow().len() == 20,
            |p, _, _| {
                // A fake tree's file is empty while the writer rewrites it (cgroupfs swaps
                // values whole): let the tick's writes land before the next one reads.
                settle(p);
                seen_ns.borrow_mut().push(clock.now_ns());
            },
        )
        .unwrap();
    let seen_ns = seen_ns.into_inner();
    assert_eq!(control.stats.summary().ticks, 20);
    // Each tick starts an interval after the one before: never a burst, never a gap.
    assert!(seen_ns.windows(2).all(|w| w[1] - w[0] == 2_000_000), "{seen_ns:?}");
    assert_eq!(clock.now_ns(), START_NS + 20 * 2_000_000);
    platform.restore(Duration::from_secs(5)).unwrap();
}

#[test]
fn knob_files_parse_like_the_backends_read_them() {
    assert_eq!(parse_knob("max", false), Some(None));
    assert_eq!(parse_knob("9223372036854771712", false), Some(None));
    assert_eq!(parse_knob("0", true), Some(None));
    assert_eq!(parse_knob("0", false), Some(Some(0)));
    assert_eq!(parse_knob("4096", true), Some(Some(4096)));
    assert_eq!(parse_knob("x", false), None);
}

#[test]
fn cpu_stat_gives_its_usage_wherever_the_line_is() {
    let stat = CpuUsageFile::Stat(PathBuf::from("cpu.stat"));
    assert_eq!(stat.parse_bytes(b"usage_usec 1333969566\nuser_usec 1233427549\nsystem_usec 100542017\n"), Some(1_333_969_566));
    assert_eq!(stat.parse_bytes(b"user_usec 5\nusage_usec 7\n"), Some(7));
    assert_eq!(stat.parse_bytes(b"user_usec 5\n"), None);
    assert_eq!(stat.parse_bytes(b"usage_usec x\n"), None);
    assert_eq!(CpuUsageFile::Nanoseconds(PathBuf::from("cpuacct.usage")).parse("7000999\n"), Some(7000));
}

proptest! {
    #[test]
    fn number_parsers_never_panic_on_arbitrary_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..100), key in ".{0,10}") {
        let text = String::from_utf8_lossy(&bytes);
        let _ = parse_u64(&bytes);
        let _ = CpuUsageFile::Stat(PathBuf::new()).parse_bytes(&bytes);
        let _ = CpuUsageFile::Nanoseconds(PathBuf::new()).parse_bytes(&bytes);
        let _ = parse_knob(&text, false);
        let _ = parse_knob(&text, true);
        let _ = parse_meminfo_kb(&text, &key);
    }

    /// Whatever the fast reader accepts, the standard parser reads the same from the trimmed
    /// text; on plain digits it refuses exactly what does not fit in u64 (or is over 20 long).
    #[test]
    fn parse_u64_agrees_with_the_standard_parser(text in r"[ \t\r\n]{0,2}(\+|-)?[0-9]{0,25}(max|x| [0-9])?[ \t\r\n\x0b\x0c]{0,2}", digits in "[0-9]{1,25}") {
        if let Some(v) = parse_u64(text.as_bytes()) {
            prop_assert_eq!(text.trim().parse::<u64>(), Ok(v));
        }
        prop_assert_eq!(parse_u64(digits.as_bytes()), digits.parse::<u64>().ok().filter(|_| digits.len() <= 20));
    }

    /// Kernel counters and knobs are `%llu` followed by a newline.
    #[test]
    fn u64_files_parse_back(n in any::<u64>(), before in r"[ \t]{0,2}", after in r"[ \t\r]{0,2}\n?") {
        prop_assert_eq!(parse_u64(format!("{n}\n").as_bytes()), Some(n));
        prop_assert_eq!(parse_u64(format!("{before}{n}{after}").as_bytes()), Some(n));
    }

    #[test]
    fn knobs_never_panic_on_knob_like_text(text in r"[ \t]?(max|-1|(\+|-)?[0-9]{0,25})[ \t\n]?") {
        let _ = parse_knob(&text, false);
        let _ = parse_knob(&text, true);
    }

    /// `max`, v1's huge "no limit" and a protection of 0 are no limit; other counts are kept.
    #[test]
    fn knobs_parse_back(n in prop_oneof![any::<u64>(), 0..4096u64, (1u64 << 62) - 2..(1u64 << 62) + 2], is_protection in any::<bool>()) {
        prop_assert_eq!(parse_knob("max", is_protection), Some(None));
        let want = if n >= 1 << 62 || (is_protection && n == 0) { None } else { Some(n) };
        prop_assert_eq!(parse_knob(&n.to_string(), is_protection), Some(want));
    }

    #[test]
    fn meminfo_never_panics_on_meminfo_like_text(text in r"([A-Za-z_()]{0,10}:?[ \t]{0,9}(\+|-)?[0-9]{0,22}( kB)?[ \t]?\r?\n){0,6}", key in "[A-Za-z]{0,6}:?") {
        let _ = parse_meminfo_kb(&text, &key);
    }

    /// fs/proc/meminfo.c pads `Key:` to 16 columns and the value to 8 (`%8lu kB`); the
    /// first line with the key wins.
    #[test]
    fn meminfo_parses_back(fields in proptest::collection::btree_map(r"[A-Za-z][A-Za-z0-9_()]{0,14}", any::<u64>(), 1..30), pick in any::<proptest::sample::Index>()) {
        let text: String = fields.iter().map(|(key, kb)| format!("{:<16}{kb:>8} kB\n", format!("{key}:"))).collect();
        let (key, kb) = fields.iter().nth(pick.index(fields.len())).unwrap();
        prop_assert_eq!(parse_meminfo_kb(&text, &format!("{key}:")), Some(*kb));
        prop_assert_eq!(parse_meminfo_kb(&text, "NoSuchKey:"), None);
    }
}

#[test]
fn meminfo_parses() {
    assert_eq!(parse_meminfo_kb("MemTotal:       24570000 kB\nSwapFree:        1024 kB\n", "SwapFree:"), Some(1024));
    assert_eq!(parse_meminfo_kb("MemTotal: 1 kB\n", "SwapFree:"), None);
}

#[test]
fn a_reclaim_writes_whole_pages_to_memory_reclaim_on_v2_and_changes_no_limit() {
    let dir = tempfile::tempdir().unwrap();
    let options = fake(dir.path());
    let mut platform = open(dir.path(), options);
    let before = platform.observe().unwrap();
    let applied = platform.apply(&[Action::Reclaim { group: 1, bytes: 3 * MIB + 4095 }]).unwrap();
    assert_eq!(applied, vec![Action::Reclaim { group: 1, bytes: 3 * MIB }], "rounded down to whole pages");
    settle(&platform);
    let batch = dir.path().join("cg/batch");
    assert_eq!(std::fs::read_to_string(batch.join("memory.reclaim")).unwrap(), (3 * MIB).to_string());
    assert_eq!(std::fs::read_to_string(batch.join("memory.max")).unwrap(), "max\n", "no limit written");
    assert_eq!(std::fs::read_to_string(batch.join("memory.high")).unwrap(), "max\n");
    assert_eq!(platform.observe().unwrap().groups[1].knobs, before.groups[1].knobs);
    // Less than a page asks nothing; a group that does not exist is ignored.
    std::fs::write(batch.join("memory.reclaim"), "").unwrap();
    assert!(platform.apply(&[Action::Reclaim { group: 1, bytes: 4095 }, Action::Reclaim { group: 2, bytes: MIB }]).unwrap().is_empty());
    settle(&platform);
    assert_eq!(std::fs::read_to_string(batch.join("memory.reclaim")).unwrap(), "");
    let stats = platform.stats();
    assert_eq!((stats.reclaims_requested, stats.reclaim_unsupported, stats.writes_ok, stats.writes_failed), (1, 0, 1, 0));
    // The reclaim is not journaled: restoring leaves the file alone and puts nothing back.
    let journal = std::fs::read_to_string(dir.path().join("journal.jsonl")).unwrap();
    assert!(!journal.contains("memory.reclaim"), "{journal}");
    std::fs::write(batch.join("memory.reclaim"), "untouched").unwrap();
    let report = platform.restore(Duration::from_secs(5)).unwrap();
    assert!(report.failures.is_empty(), "{report:?}");
    assert_eq!(std::fs::read_to_string(batch.join("memory.reclaim")).unwrap(), "untouched");
}

#[test]
fn a_reclaim_on_the_hybrid_layout_writes_nothing_and_is_not_applied() {
    let dir = tempfile::tempdir().unwrap();
    let (mut platform, batch) = v1_adopted(dir.path(), &[]);
    platform.observe().unwrap();
    for _ in 0..3 {
        assert!(platform.apply(&[Action::Reclaim { group: 0, bytes: 8 * MIB }]).unwrap().is_empty());
    }
    settle(&platform);
    assert!(!batch.join("memory.reclaim").exists());
    assert_eq!(std::fs::read_to_string(batch.join("memory.limit_in_bytes")).unwrap(), "9223372036854771712\n");
    let stats = platform.stats();
    assert_eq!((stats.reclaim_unsupported, stats.reclaims_requested, stats.writes_submitted), (3, 0, 0));
    platform.restore(Duration::from_secs(5)).unwrap();
}

#[test]
fn a_reclaim_the_kernel_ends_short_is_counted_as_such_not_as_a_failed_write() {
    let outcome = |path: &str, errno: i32| crate::writer::WriteOutcome {
        path: PathBuf::from(path),
        contents: "4096".into(),
        superseded: 0,
        queued: Duration::ZERO,
        took: Duration::ZERO,
        cpu: Duration::ZERO,
        result: Err(Error::WriteRejected {
            path: PathBuf::from(path),
            value: "4096".into(),
            source: std::io::Error::from_raw_os_error(errno),
        }),
    };
    assert!(reclaim::fell_short(&outcome("/cg/batch/memory.reclaim", nix::libc::EAGAIN)));
    assert!(!reclaim::fell_short(&outcome("/cg/batch/memory.reclaim", nix::libc::EINVAL)));
    assert!(!reclaim::fell_short(&outcome("/cg/batch/memory.max", nix::libc::EAGAIN)));
}

#[test]
fn the_conformance_body_passes_on_a_fake_hybrid_tree() {
    let dir = tempfile::tempdir().unwrap();
    let (mut platform, batch) = v1_adopted(dir.path(), &[]);
    let limit = batch.join("memory.limit_in_bytes");
    critmem_policy::check_platform(&mut platform, |p| {
        settle(p);
        // The kernel reads back a cleared v1 limit (-1) as its largest page-aligned value.
        if std::fs::read_to_string(&limit).unwrap().trim() == "-1" {
            std::fs::write(&limit, "9223372036854771712\n").unwrap();
        }
    })
    .unwrap();
    assert!(platform.stats().reclaim_unsupported > 0, "the body asked for a reclaim");
    platform.restore(Duration::from_secs(5)).unwrap();
}

#[test]
fn a_dry_run_reclaim_is_reported_and_logged_never_written() {
    let dir = tempfile::tempdir().unwrap();
    let mut options = fake(dir.path());
    options.dry_run = true;
    let mut platform = LinuxPlatform::open(Box::new(V2Backend::new(dir.path().join("cg"))), specs(), options).unwrap();
    platform.observe().unwrap();
    let applied = platform.apply(&[Action::Reclaim { group: 1, bytes: 2 * MIB }]).unwrap();
    assert_eq!(applied, vec![Action::Reclaim { group: 1, bytes: 2 * MIB }]);
    settle(&platform);
    assert_eq!(std::fs::read_to_string(dir.path().join("cg/batch/memory.reclaim")).unwrap(), "");
    assert_eq!((platform.stats().reclaims_requested, platform.stats().dry_run_writes, platform.stats().writes_submitted), (1, 1, 0));
    platform.restore(Duration::from_secs(1)).unwrap();
}

// ---------------------------------------------------------------------------------------------
// CPU and I/O bandwidth.

/// The disk the fake trees' I/O limits name (critmem's swapfile's disk on this project's machines).
const VDA: BlockDevice = BlockDevice { major: 254, minor: 0 };

fn read(path: PathBuf) -> String {
    std::fs::read_to_string(path).unwrap()
}

#[test]
fn v2_cpu_and_io_limits_are_clamped_written_observed_and_undone_at_teardown() {
    use critmem_policy::{BandwidthKnobs, MIN_IO_BYTES_PER_S};
    let dir = tempfile::tempdir().unwrap();
    let mut options = fake(dir.path());
    options.swap_device = Some(VDA);
    let mut platform = open(dir.path(), options);
    let cg = dir.path().join("cg");
    assert_eq!(read(cg.join("cgroup.subtree_control")), "cpu memory\n", "the root, not critmem's, gets no +io");
    let obs = platform.observe().unwrap();
    assert_eq!(obs.cpus, 2);
    assert_eq!((obs.groups[0].cpu_usage_us, obs.groups[0].stall.cpu_some_us), (5000, 19), "cpu.stat usage_usec, cpu.pressure some");
    assert_eq!(obs.groups[0].bandwidth, BandwidthKnobs::default());
    let applied = platform
        .apply(&[
            Action::SetCpuMax { group: 0, millicpus: Some(1) },
            Action::SetCpuMax { group: 1, millicpus: Some(2500) },
            Action::SetIoMax { group: 0, read_bytes_per_s: Some(10), write_bytes_per_s: Some(8 * MIB) },
        ])
        .unwrap();
    assert_eq!(
        applied,
        [
            Action::SetCpuMax { group: 0, millicpus: Some(10) },
            Action::SetCpuMax { group: 1, millicpus: None },
            Action::SetIoMax { group: 0, read_bytes_per_s: Some(MIN_IO_BYTES_PER_S), write_bytes_per_s: Some(8 * MIB) },
        ],
        "at least the smallest limits; covering both CPUs is none"
    );
    let submitted = platform.stats().writes_submitted;
    assert_eq!(submitted, 2, "no limit over no limit writes nothing");
    settle(&platform);
    assert_eq!(read(cg.join("crit-rt/cpu.max")), "1000 100000");
    assert_eq!(read(cg.join("crit-rt/io.max")), "254:0 rbps=1048576 wbps=8388608");
    let obs = platform.observe().unwrap();
    let want = BandwidthKnobs { cpu_millicpus: Some(10), io_read_bytes_per_s: Some(MIB), io_write_bytes_per_s: Some(8 * MIB) };
    assert_eq!(obs.groups[0].bandwidth, want, "read back as applied the tick after the writes land");
    // Asked again: returned as applied, not rewritten.
    assert_eq!(platform.apply(&[Action::SetCpuMax { group: 0, millicpus: Some(10) }]).unwrap().len(), 1);
    assert_eq!(platform.stats().writes_submitted, submitted);

    // The adopted group's files are journaled and put back; the created group is removed.
    let applied = platform
        .apply(&[
            Action::SetCpuMax { group: 1, millicpus: Some(500) },
            Action::SetIoMax { group: 1, read_bytes_per_s: None, write_bytes_per_s: Some(2 * MIB) },
        ])
        .unwrap();
    assert_eq!(applied.len(), 2);
    settle(&platform);
    assert_eq!(read(cg.join("batch/cpu.max")), "50000 100000");
    assert_eq!(read(cg.join("batch/io.max")), "254:0 rbps=max wbps=2097152");
    let report = platform.restore(Duration::from_secs(5)).unwrap();
    assert!(report.failures.is_empty(), "{report:?}");
    assert!(!cg.join("crit-rt").exists(), "{report:?}");
    assert_eq!(read(cg.join("batch/cpu.max")), "max 100000");
    assert_eq!(read(cg.join("batch/io.max")), "254:0 rbps=max wbps=max riops=max wiops=max", "a disk that had no rule loses ours");
}

#[test]
fn a_memory_limit_write_does_not_re_read_the_bandwidth_limits_the_periodic_refresh_does() {
    let dir = tempfile::tempdir().unwrap();
    let mut options = fake(dir.path());
    options.swap_device = Some(VDA);
    let mut platform = open(dir.path(), options);
    let cg = dir.path().join("cg");
    assert_eq!(platform.observe().unwrap().groups[1].bandwidth.cpu_millicpus, None);
    // Another writer's CPU limit: seen only when the bandwidth files are next read.
    std::fs::write(cg.join("batch/cpu.max"), "50000 100000\n").unwrap();
    // A steering controller writes a memory limit every tick; each write re-reads the memory
    // knobs on the next tick, and must not re-read the bandwidth files too.
    for limit_mib in 100..110 {
        platform.apply(&[Action::SetMax { group: 1, bytes: Some(limit_mib * MIB) }]).unwrap();
        settle(&platform);
        let obs = platform.observe().unwrap();
        assert_eq!(obs.groups[1].knobs.max_bytes, Some(limit_mib * MIB), "the memory knob is re-read after its write");
        assert_eq!(obs.groups[1].bandwidth.cpu_millicpus, None, "bandwidth not re-read after a memory write");
    }
    // 11 ticks so far: the periodic refresh comes within the next KNOB_REFRESH_TICKS.
    let seen = (0..KNOB_REFRESH_TICKS).position(|_| platform.observe().unwrap().groups[1].bandwidth.cpu_millicpus == Some(500));
    assert_eq!(seen, Some(usize::try_from(KNOB_REFRESH_TICKS).unwrap() - 11), "re-read every KNOB_REFRESH_TICKS ticks");
}

#[test]
fn io_limits_are_left_out_without_a_swap_disk_and_cpu_limits_without_cpu_files() {
    let dir = tempfile::tempdir().unwrap();
    let mut platform = open(dir.path(), fake(dir.path()));
    std::fs::remove_file(dir.path().join("cg/batch/cpu.max")).unwrap();
    platform.observe().unwrap();
    let applied = platform
        .apply(&[
            Action::SetIoMax { group: 0, read_bytes_per_s: Some(MIB), write_bytes_per_s: None },
            Action::SetCpuMax { group: 1, millicpus: Some(500) },
            Action::SetCpuMax { group: 1, millicpus: Some(500) },
        ])
        .unwrap();
    assert!(applied.is_empty(), "{applied:?}");
    settle(&platform);
    assert_eq!(read(dir.path().join("cg/crit-rt/io.max")), "");
    assert_eq!((platform.stats().cpu_limits_unsupported, platform.stats().writes_submitted), (2, 0));
    assert_eq!(platform.observe().unwrap().groups[1].bandwidth, Default::default());
    platform.restore(Duration::from_secs(5)).unwrap();
}

/// Nothing reads CPU time or CPU pressure to decide: they are read with the knobs, every
/// [`KNOB_REFRESH_TICKS`] ticks, not on every tick.
#[test]
fn cpu_time_and_cpu_pressure_are_read_with_the_knobs_not_every_tick() {
    let dir = tempfile::tempdir().unwrap();
    let mut platform = open(dir.path(), fake(dir.path()));
    assert_eq!(platform.observe().unwrap().groups[1].cpu_usage_us, 5000);
    let batch = dir.path().join("cg/batch");
    std::fs::write(batch.join("cpu.stat"), "usage_usec 9000\n").unwrap();
    std::fs::write(batch.join("cpu.pressure"), "some avg10=0.00 avg60=0.00 avg300=0.00 total=77\n").unwrap();
    for _ in 0..KNOB_REFRESH_TICKS {
        let g = &platform.observe().unwrap().groups[1];
        assert_eq!((g.cpu_usage_us, g.stall.cpu_some_us), (5000, 19));
    }
    let g = &platform.observe().unwrap().groups[1];
    assert_eq!((g.cpu_usage_us, g.stall.cpu_some_us), (9000, 77));
    platform.restore(Duration::from_secs(5)).unwrap();
}

#[test]
fn a_dry_run_bandwidth_limit_is_reported_and_logged_once_never_written() {
    let dir = tempfile::tempdir().unwrap();
    let mut options = fake(dir.path());
    (options.dry_run, options.swap_device) = (true, Some(VDA));
    let mut platform = LinuxPlatform::open(Box::new(V2Backend::new(dir.path().join("cg"))), specs(), options).unwrap();
    platform.observe().unwrap();
    for _ in 0..3 {
        let applied = platform.apply(&[Action::SetCpuMax { group: 1, millicpus: Some(300) }]).unwrap();
        assert_eq!(applied, [Action::SetCpuMax { group: 1, millicpus: Some(300) }]);
    }
    assert_eq!(platform.observe().unwrap().groups[1].bandwidth.cpu_millicpus, None, "nothing changed on the machine");
    assert_eq!((platform.stats().dry_run_writes, platform.stats().writes_submitted), (1, 0));
    assert_eq!(read(dir.path().join("cg/batch/cpu.max")), "max 100000\n");
    platform.restore(Duration::from_secs(1)).unwrap();
}

#[test]
fn the_conformance_body_passes_on_a_fake_tree_with_a_swap_disk() {
    let dir = tempfile::tempdir().unwrap();
    let mut options = fake(dir.path());
    options.swap_device = Some(VDA);
    let mut platform = open(dir.path(), options);
    critmem_policy::check_platform(&mut platform, |p| settle(p)).unwrap();
    assert!(platform.stats().writes_submitted > 0);
    let report = platform.restore(Duration::from_secs(5)).unwrap();
    assert!(report.failures.is_empty(), "{report:?}");
}

/// A hybrid tree with the v1 bandwidth hierarchies: `batch` adopted (with a directory in each),
/// `crit-rt` created by the platform in all five trees.
fn v1_with_bandwidth(dir: &Path) -> (LinuxPlatform, [PathBuf; 5]) {
    use crate::cgroup::fake::{hybrid_files, hybrid_roots, v1_bandwidth_roots};
    let (memory, unified) = hybrid_roots(&dir.join("cg"));
    let (cpu, cpuacct, blkio) = v1_bandwidth_roots(&dir.join("cg"));
    let roots = [memory.clone(), unified.clone(), cpu.clone(), cpuacct.clone(), blkio.clone()];
    for root in &roots {
        populate(&root.join("batch"), hybrid_files(root));
    }
    let mut options = fake(dir);
    options.swap_device = Some(VDA);
    let backend = crate::cgroup::HybridBackend::new(memory, unified).with_bandwidth_roots(Some(cpu), Some(cpuacct), Some(blkio));
    let platform = LinuxPlatform::open(Box::new(backend), specs(), options).unwrap();
    for root in &roots {
        populate(&root.join("crit-rt"), hybrid_files(root));
    }
    (platform, roots)
}

#[test]
fn hybrid_cpu_and_io_limits_go_to_the_v1_hierarchies_and_are_undone_at_teardown() {
    use critmem_policy::MIN_CPU_MILLICPUS;
    let dir = tempfile::tempdir().unwrap();
    let (mut platform, [_, _, cpu, _, blkio]) = v1_with_bandwidth(dir.path());
    let obs = platform.observe().unwrap();
    assert_eq!(obs.groups[0].cpu_usage_us, 7000, "cpuacct.usage in ns");
    assert_eq!(obs.groups[0].stall.cpu_some_us, 17, "cpu.pressure of the unified group");
    platform.add_process(0, 4242).unwrap();
    for root in [&cpu, &blkio] {
        assert_eq!(read(root.join("crit-rt/cgroup.procs")), "4242", "processes join the bandwidth groups too");
    }
    let applied = platform
        .apply(&[
            Action::SetCpuMax { group: 0, millicpus: Some(0) },
            Action::SetIoMax { group: 0, read_bytes_per_s: Some(3 * MIB), write_bytes_per_s: None },
            Action::SetCpuMax { group: 1, millicpus: Some(1500) },
            Action::SetIoMax { group: 1, read_bytes_per_s: None, write_bytes_per_s: Some(4 * MIB) },
        ])
        .unwrap();
    assert_eq!(applied[0], Action::SetCpuMax { group: 0, millicpus: Some(MIN_CPU_MILLICPUS) });
    settle(&platform);
    assert_eq!(read(cpu.join("crit-rt/cpu.cfs_period_us")), "100000");
    assert_eq!(read(cpu.join("crit-rt/cpu.cfs_quota_us")), "1000");
    assert_eq!(read(blkio.join("crit-rt/blkio.throttle.read_bps_device")), "254:0 3145728");
    assert_eq!(read(blkio.join("crit-rt/blkio.throttle.write_bps_device")), "254:0 0");
    assert_eq!(read(cpu.join("batch/cpu.cfs_quota_us")), "150000");
    let obs = platform.observe().unwrap();
    assert_eq!(
        (obs.groups[0].bandwidth.cpu_millicpus, obs.groups[0].bandwidth.io_read_bytes_per_s, obs.groups[0].bandwidth.io_write_bytes_per_s),
        (Some(10), Some(3 * MIB), None)
    );
    assert_eq!(obs.groups[1].bandwidth.io_write_bytes_per_s, Some(4 * MIB));
    // Cleared, and the limits go away.
    platform.apply(&[Action::SetCpuMax { group: 1, millicpus: None }]).unwrap();
    settle(&platform);
    assert_eq!(read(cpu.join("batch/cpu.cfs_quota_us")), "-1");
    std::fs::write(blkio.join("batch/blkio.throttle.read_bps_device"), "8:0 77\n").unwrap();
    let report = platform.restore(Duration::from_secs(5)).unwrap();
    assert!(report.failures.is_empty(), "{report:?}");
    for root in std::fs::read_dir(dir.path().join("cg")).unwrap().flatten() {
        assert!(!root.path().join("crit-rt").exists(), "created in every tree, removed from every tree: {}", root.path().display());
    }
    assert_eq!(read(cpu.join("batch/cpu.cfs_quota_us")), "-1");
    assert_eq!(read(blkio.join("batch/blkio.throttle.write_bps_device")), "254:0 0", "a disk that had no rule loses ours");
}

#[test]
fn the_conformance_body_passes_on_a_fake_hybrid_tree_with_a_swap_disk() {
    let dir = tempfile::tempdir().unwrap();
    let (mut platform, _) = v1_with_bandwidth(dir.path());
    let limits = [dir.path().join("cg/memory/batch/memory.limit_in_bytes"), dir.path().join("cg/memory/crit-rt/memory.limit_in_bytes")];
    critmem_policy::check_platform(&mut platform, |p| {
        settle(p);
        for limit in &limits {
            if std::fs::read_to_string(limit).unwrap().trim() == "-1" {
                std::fs::write(limit, "9223372036854771712\n").unwrap();
            }
        }
    })
    .unwrap();
    let report = platform.restore(Duration::from_secs(5)).unwrap();
    assert!(report.failures.is_empty(), "{report:?}");
}

#[test]
fn cpu_lists_count_every_cpu_they_name() {
    assert_eq!(parse_cpu_list("0-1\n"), Some(2));
    assert_eq!(parse_cpu_list("0-3,6,8-9"), Some(7));
    assert_eq!(parse_cpu_list("0"), Some(1));
    assert_eq!((parse_cpu_list(""), parse_cpu_list("3-1"), parse_cpu_list("x")), (None, None, None));
}

/// Controllers are enabled only in cgroups critmem created: a new parent gets what the cgroup
/// above it delegates (cpu here, not io), and nothing it did not create is touched.
#[test]
fn v2_bandwidth_controllers_are_enabled_only_in_cgroups_critmem_created() {
    let dir = tempfile::tempdir().unwrap();
    fake(dir.path());
    let cg = dir.path().join("cg");
    populate(&cg.join("critmem-x"), &[("cgroup.controllers", "cpu memory\n"), ("cgroup.subtree_control", "memory\n")]);
    let backend = V2Backend::new(cg.clone());
    let spec = GroupSpec {
        name: "rt".into(),
        path: GroupPath::new("critmem-x/rt").unwrap(),
        role: GroupRole::NonRealTime,
        floor_bytes: 16 * MIB,
        create: true,
    };
    let (mut journal, _) = crate::journal::Journal::open(&dir.path().join("j.jsonl")).unwrap();
    // critmem-x found, not made: nothing is enabled anywhere.
    super::bandwidth::enable_controllers(&backend, &spec, &[], Some(&mut journal));
    assert_eq!(read(cg.join("critmem-x/cgroup.subtree_control")), "memory\n");
    // Made by critmem: it gets cpu, which the root delegates; the root gets no +io.
    super::bandwidth::enable_controllers(&backend, &spec, &[cg.join("critmem-x")], Some(&mut journal));
    assert_eq!(read(cg.join("critmem-x/cgroup.subtree_control")), "+cpu");
    assert_eq!(read(cg.join("cgroup.subtree_control")), "cpu memory\n");
}
