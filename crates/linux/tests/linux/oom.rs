//! A group held at or below its working set is never OOM-killed.

use super::*;

/// Asks for the same hard limit on every group, every tick, whatever happens: the controller
/// that once got a worker OOM-killed (SARA lowering a v1 limit toward a floor below the
/// worker's working set), reduced to its essence.
struct Squeeze {
    limit_bytes: u64,
    /// What it tells the platform (it never looks at usage either way).
    says_it_reads_usage: bool,
}

impl critmem_policy::Controller for Squeeze {
    fn name(&self) -> &str {
        "squeeze"
    }

    fn reads_usage(&self, _role: &GroupRole) -> bool {
        self.says_it_reads_usage
    }

    fn tick(&mut self, obs: &critmem_policy::Observation) -> Vec<critmem_policy::Action> {
        (0..obs.groups.len()).map(|group| critmem_policy::Action::SetMax { group, bytes: Some(self.limit_bytes) }).collect()
    }
}

/// The OOM state of a v1 group (`memory.oom_control`) or v2 group (`memory.events`).
fn oom_state(machine: &Machine, group: &GroupPath) -> critmem_linux::cgroup::OomState {
    let path = machine.backend.oom_file(group);
    critmem_linux::cgroup::parse_oom_state(&std::fs::read_to_string(&path).unwrap()).unwrap()
}

#[test]
fn a_worker_whose_working_set_exceeds_the_asked_limit_is_never_oom_killed() {
    let test = "a_worker_whose_working_set_exceeds_the_asked_limit_is_never_oom_killed";
    let Some(machine) = machine(test) else { return };
    let _no_swap_changes = SWAP_SENSITIVE.lock().unwrap_or_else(|p| p.into_inner());
    if std::fs::read_to_string("/proc/swaps").unwrap().lines().count() > 1 {
        skip(test, "swap is on, so the working set would be swapped out instead of hitting OOM");
        return;
    }
    let working_set = (96 * MIB).to_string();
    let asked_limit_bytes = 16 * MIB;

    // The hazard is real: without the agent, that limit OOM-kills the worker.
    if matches!(machine.layout, Layout::Hybrid { .. }) {
        let mut bare = GroupGuard::create(&machine);
        machine.backend.set_knob(&bare.group, Knob::Max, Some(asked_limit_bytes)).unwrap();
        let helper = bare.adopt(Helper::python(ALLOCATE, &[&working_set]));
        helper.say("go");
        let status = helper.child.wait().unwrap();
        assert!(!status.success(), "a {working_set}-byte working set under a 16 MiB limit without swap should be killed");
        assert_eq!(oom_state(&machine, &bare.group).oom_kills, 1, "the kernel's OOM killer did it");
    }
    // Usage read every tick (the near-limit check finds the waiting task), and usage not read
    // (v1: the kernel's OOM notification does).
    for says_it_reads_usage in [true, false] {
        squeezed_worker_survives(&machine, &working_set, asked_limit_bytes, says_it_reads_usage);
    }
}

fn squeezed_worker_survives(machine: &Machine, working_set: &str, asked_limit_bytes: u64, says_it_reads_usage: bool) {
    let dir = tempfile::tempdir().unwrap();
    let path = GroupPath::new(&unique_name()).unwrap();
    let specs =
        vec![GroupSpec { name: "hog".into(), path: path.clone(), role: GroupRole::NonRealTime, floor_bytes: 8 * MIB, create: true }];
    let options = PlatformOptions {
        total_memory_bytes: 1024 * MIB,
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
    let mut controller = Squeeze { limit_bytes: asked_limit_bytes, says_it_reads_usage };
    platform.set_usage_inputs(|role| critmem_policy::Controller::reads_usage(&controller, role));
    // The limit is in place before the worker allocates anything.
    critmem_policy::step(platform, &mut controller).unwrap();
    assert!(platform.wait_writes(Duration::from_secs(5)));
    // As the platform shows it: on cgroup v2 the limit is `memory.high` under a backstop.
    assert_eq!(critmem_policy::Platform::observe(platform).unwrap().groups[0].knobs.max_bytes, Some(asked_limit_bytes));
    let mut helper = Helper::python(ALLOCATE, &[working_set]);
    platform.add_process(0, helper.pid()).unwrap();
    helper.say("go");
    // The worker reports on its stdout when it has touched its whole working set.
    let (tx, ready) = std::sync::mpsc::channel();
    let mut stdout = helper.stdout.take().unwrap();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = stdout.read_line(&mut line);
        let _ = tx.send(line);
    });
    let mut control = ControlLoop::new(5_000_000, MonotonicClock::shared());
    let started = Instant::now();
    let mut said = None;
    control
        .run(
            platform,
            &mut controller,
            || {
                if said.is_none() {
                    said = ready.try_recv().ok();
                }
                // Past ready, keep squeezing a while: the held limit must stay held.
                said.is_some() && started.elapsed() > Duration::from_secs(3) || started.elapsed() > Duration::from_secs(30)
            },
            |_, _, _| {},
        )
        .unwrap();
    let stats = platform.stats().clone();
    let state = oom_state(machine, &path);
    let limit = platform.last_seen(0).1.max_bytes;
    let alive = helper.child.try_wait().unwrap().is_none();
    let _ = writeln!(
        std::io::stderr(),
        "squeezed to 16 MiB, controller reads usage: {says_it_reads_usage}: said {said:?} after {:?}, alive {alive}, {state:?}, limit {limit:?}, rescues {} ({} on notification), clamped to unreclaimable {}, wake-ups {}, held {}, failed writes {}, OOM notifications {}, usage reads skipped {}",
        started.elapsed(),
        stats.oom_rescues,
        stats.oom_rescues_on_notification,
        stats.clamped_to_unreclaimable,
        stats.oom_wakeups,
        stats.clamped_to_oom_hold,
        stats.writes_failed,
        stats.oom_notifications,
        stats.usage_reads_skipped
    );
    assert_eq!(said.as_deref().map(str::trim), Some("ready"), "the worker touched its whole working set");
    assert!(alive, "the worker is alive");
    assert_eq!(state.oom_kills, 0, "nothing was OOM-killed");
    // v1 rescues a task waiting at the limit; v2 never lets the limit (`memory.high`) go below
    // what the group cannot give back, so the raise can come from that clamp instead.
    assert!(stats.oom_rescues + stats.clamped_to_unreclaimable > 0, "the agent had to raise the limit");
    assert!(limit.is_some_and(|l| l >= 96 * MIB), "the limit was raised to the working set: {limit:?}");
    if matches!(machine.layout, Layout::Hybrid { .. }) {
        assert!(state.kill_disabled, "the agent switched the OOM killer off while it manages the group");
        assert!(stats.oom_notifications > 0, "the kernel notified the waiting task");
        assert!(stats.oom_rescues_on_notification > 0, "and a notified check raised the limit");
        if !says_it_reads_usage {
            assert!(stats.usage_reads_skipped > 0, "usage was not read every tick");
        }
    } else {
        assert_eq!(stats.usage_reads_skipped, 0, "cgroup v2 reads usage every tick (no OOM notification)");
    }
    drop(helper);
    let report = guard.restore();
    assert!(report.failures.is_empty(), "{report:?}");
    assert!(!machine.backend.exists(&path));
}

#[test]
fn a_v1_group_out_of_memory_at_its_own_memory_and_swap_limit_is_left_to_the_kernel_not_hung() {
    let test = "a_v1_group_out_of_memory_at_its_own_memory_and_swap_limit_is_left_to_the_kernel_not_hung";
    let Some(machine) = machine(test) else { return };
    if !matches!(machine.layout, Layout::Hybrid { .. }) {
        skip(test, "memory+swap limits are cgroup v1's");
        return;
    }
    // An adopted group whose owner limits memory and memory+swap to 64 MiB.
    let mut bare = GroupGuard::create(&machine);
    let memsw = machine.backend.group_dirs(&bare.group)[0].join("memory.memsw.limit_in_bytes");
    if !memsw.exists() {
        skip(test, "the kernel does not account swap (no memory.memsw.* files)");
        return;
    }
    machine.backend.set_knob(&bare.group, Knob::Max, Some(64 * MIB)).unwrap();
    critmem_linux::cgroup::write_value(&memsw, &(64 * MIB).to_string()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let specs = vec![GroupSpec {
        name: "owned".into(),
        path: bare.group.clone(),
        role: GroupRole::NonRealTime,
        floor_bytes: 8 * MIB,
        create: false,
    }];
    let options = PlatformOptions {
        total_memory_bytes: 1024 * MIB,
        dry_run: false,
        journal_path: Some(dir.path().join("journal.jsonl")),
        job_server: None,
        proc_root: PROC_ROOT.into(),
        clock: MonotonicClock::shared(),
        cpus: critmem_linux::platform::online_cpus(),
        swap_device: None,
    };
    let mut guard = PlatformGuard(Some(LinuxPlatform::open(open_backend(&machine.layout).unwrap(), specs, options).unwrap()));
    assert!(oom_state(&machine, &bare.group).kill_disabled, "the platform switched the OOM killer off");

    // 128 MiB cannot fit under 64 MiB of memory+swap, whatever critmem does with the memory
    // limit; with the OOM killer off the worker would wait there for ever.
    let helper = bare.adopt(Helper::python(ALLOCATE, &[&(128 * MIB).to_string()]));
    helper.say("go");
    let started = Instant::now();
    let status = loop {
        critmem_policy::Platform::observe(guard.get()).unwrap();
        if let Some(status) = bare.helpers[0].child.try_wait().unwrap() {
            break Some(status);
        }
        if started.elapsed() > Duration::from_secs(20) {
            break None;
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let stats = guard.get().stats().clone();
    let state = oom_state(&machine, &bare.group);
    let _ = writeln!(
        std::io::stderr(),
        "{test}: worker {status:?} after {:?}, {state:?}, guard releases {}, rescues {}",
        started.elapsed(),
        stats.oom_guard_releases,
        stats.oom_rescues
    );
    assert!(
        status.is_some_and(|s| !s.success()),
        "the worker waited at the memory+swap limit instead of being killed as it would be without critmem"
    );
    assert!(state.oom_kills >= 1, "the kernel's OOM killer did it");
    assert!(stats.oom_guard_releases >= 1);
    assert_eq!(
        machine.backend.knob(&bare.group, Knob::Max).unwrap().map(|b| b <= 64 * MIB),
        Some(true),
        "the memory limit never went above the memory+swap limit"
    );
    let report = guard.restore();
    assert!(report.failures.is_empty(), "{report:?}");
    assert!(!oom_state(&machine, &bare.group).kill_disabled, "the switch is restored");
    assert_eq!(machine.backend.knob(&bare.group, Knob::Max).unwrap(), Some(64 * MIB));
}
