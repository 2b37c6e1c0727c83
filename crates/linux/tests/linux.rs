//! Real-machine tests: real cgroups, PSI, processes, sockets and swap.
//!
//! They need root and a cgroup layout critmem supports; otherwise each prints why it skipped
//! and passes. Everything they create is named `critmem-test-<pid>-<n>` and removed by a drop
//! guard, also when an assertion fails; they never touch cgroups, swap or processes they did
//! not create.

use critmem_linux::cgroup::{open_backend, CgroupBackend, Change, GroupPath, Knob, PsiResource};
use critmem_linux::journal::Journal;
use critmem_linux::layout::{detect_layout_in, Layout};
use critmem_linux::procfs::{Hierarchy, ProcFs};
use critmem_linux::protocol::{JobOp, JobServer, JobServerConfig, ReportingGroup};
use critmem_linux::psi::{has_cap_sys_resource, read_pressure, PsiTrigger, StallKind, TriggerEvent, UNPRIVILEGED_WINDOW_STEP_US};
use critmem_linux::swap::{read_swap_header, SwapManager, SWAP_LABEL};
use critmem_linux::writer::KnobWriter;
use critmem_linux::{Error, FileWrite};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

const MIB: u64 = 1 << 20;

/// Tests whose outcome depends on whether swap exists (limit lowering, the swapfile itself)
/// must not overlap.
static SWAP_SENSITIVE: Mutex<()> = Mutex::new(());

/// Says why a test did not run, past libtest's output capture so it shows in CI logs.
fn skip(test: &str, reason: &str) {
    let _ = writeln!(std::io::stderr(), "SKIP {test}: {reason}");
}

struct Machine {
    layout: Layout,
    backend: Box<dyn CgroupBackend>,
}

/// The real cgroup setup, or `None` (after saying why) when these tests cannot run here.
fn machine(test: &str) -> Option<Machine> {
    if !nix::unistd::geteuid().is_root() {
        skip(test, "not root (cgroup and swap changes need root)");
        return None;
    }
    let layout = match detect_layout_in(Path::new("/proc")) {
        Ok(layout) => layout,
        Err(e) => {
            skip(test, &format!("no usable cgroup layout: {e}"));
            return None;
        }
    };
    match open_backend(&layout) {
        Ok(backend) => Some(Machine { layout, backend }),
        Err(e) => {
            skip(test, &format!("cgroup trees missing: {e}"));
            None
        }
    }
}

fn unique_name() -> String {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    format!("critmem-test-{}-{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed))
}

/// A child process talking over stdin/stdout; killed and reaped on drop.
struct Helper {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
}

impl Helper {
    /// Runs a Python script that first waits for one line on stdin, so the test can move it
    /// into a group before it does anything.
    fn python(script: &str, args: &[&str]) -> Helper {
        let python = if Path::new("/usr/bin/python3").exists() { "/usr/bin/python3" } else { "python3" };
        let mut child = Command::new(python)
            .arg("-c")
            .arg(script)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("python3 is needed for the real-machine tests (scripts/setup.sh installs the project's Python)");
        let stdin = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        Helper { child, stdin, stdout }
    }

    /// Same, for a POSIX shell script (`$1`.. are `args`).
    fn shell(script: &str, args: &[&str]) -> Helper {
        let mut child = Command::new("/bin/sh")
            .arg("-c")
            .arg(script)
            .arg("helper")
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        Helper { child, stdin, stdout }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn say(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().unwrap();
        stdin.write_all(line.as_bytes()).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
    }

    fn expect(&mut self, want: &str) {
        let mut line = String::new();
        self.stdout.read_line(&mut line).unwrap();
        assert_eq!(line.trim(), want, "helper {} said {line:?}", self.pid());
    }
}

impl Drop for Helper {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A group this test created: on drop its helpers are killed, and the group is removed.
struct GroupGuard<'m> {
    machine: &'m Machine,
    group: GroupPath,
    helpers: Vec<Helper>,
}

impl<'m> GroupGuard<'m> {
    fn create(machine: &'m Machine) -> Self {
        let group = GroupPath::new(&unique_name()).unwrap();
        assert!(!machine.backend.exists(&group));
        let guard = GroupGuard { machine, group, helpers: Vec::new() };
        assert!(machine.backend.create(&guard.group).unwrap());
        guard
    }

    fn adopt(&mut self, helper: Helper) -> &mut Helper {
        self.machine.backend.move_pid(&self.group, helper.pid()).unwrap();
        self.helpers.push(helper);
        self.helpers.last_mut().unwrap()
    }
}

impl Drop for GroupGuard<'_> {
    fn drop(&mut self) {
        self.helpers.clear();
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            match self.machine.backend.remove(&self.group) {
                Ok(()) => break,
                // Killed helpers leave the group once they are reaped; wait a moment.
                Err(Error::GroupBusy { .. }) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(10)),
                Err(e) => {
                    let _ = writeln!(std::io::stderr(), "LEAK: could not remove test cgroup {}: {e}", self.group);
                    break;
                }
            }
        }
    }
}

const ALLOCATE: &str = r#"
import sys
sys.stdin.readline()
n = int(sys.argv[1])
b = bytearray(n)
for i in range(0, n, 4096):
    b[i] = 1
print("ready", flush=True)
sys.stdin.read()
"#;

fn wait_until(what: &str, timeout: Duration, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !condition() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn layout_of_this_machine_is_detected_and_usable() {
    let Some(machine) = machine("layout_of_this_machine_is_detected_and_usable") else { return };
    let _ = writeln!(std::io::stderr(), "layout: {:?} (backend {})", machine.layout, machine.backend.name());
    match &machine.layout {
        Layout::Hybrid { memory_root, unified_root } => {
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
    let own = ProcFs::new("/proc".into()).cgroup_of(pid, &Hierarchy::for_layout(&machine.layout)).unwrap();
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
    let started = Instant::now();
    writer.submit(write.clone()).unwrap();
    let submit_took = started.elapsed();
    assert!(submit_took < Duration::from_millis(5), "submit took {submit_took:?}");
    assert!(writer.wait_idle(Duration::from_secs(60)));
    let outcomes = writer.completed();
    assert_eq!(outcomes.len(), 1);
    let outcome = &outcomes[0];
    let _ = writeln!(std::io::stderr(), "lowering to 16 MiB under 64 MiB of anon, no swap: took {:?}, {:?}", outcome.took, outcome.result);
    match &outcome.result {
        Err(e @ Error::WriteRejected { .. }) => assert!(e.to_string().contains("no swap?"), "{e}"),
        other => panic!("expected the kernel to refuse the limit, got {other:?}"),
    }
    // The helper is still alive (no OOM kill), and the limit is unchanged.
    assert!(guard.helpers[0].child.try_wait().unwrap().is_none(), "the helper was killed");
    assert_eq!(machine.backend.knob(&group, Knob::Max).unwrap(), None);
    assert!(writer.shutdown(Duration::from_secs(5)).is_empty());
}

#[test]
fn psi_trigger_times_out_quietly_and_reports_a_removed_group() {
    let Some(machine) = machine("psi_trigger_times_out_quietly_and_reports_a_removed_group") else { return };
    let guard = GroupGuard::create(&machine);
    let pressure = machine.backend.pressure_file(&guard.group, PsiResource::Memory);
    // Sub-2 s windows need CAP_SYS_RESOURCE, which root in a container may lack.
    let window_us = if has_cap_sys_resource(Path::new("/proc")) {
        1_000_000
    } else {
        let err = PsiTrigger::new(&pressure, StallKind::Some, 100_000, 1_000_000).unwrap_err();
        assert!(err.to_string().contains("multiple of 2 s"), "{err}");
        UNPRIVILEGED_WINDOW_STEP_US
    };
    let trigger = PsiTrigger::new(&pressure, StallKind::Some, 100_000, window_us).unwrap();
    assert_eq!(trigger.wait(Duration::from_millis(20)).unwrap(), TriggerEvent::Timeout);
    machine.backend.remove(&guard.group).unwrap();
    let started = Instant::now();
    let event = trigger.wait(Duration::from_secs(2)).unwrap();
    let _ = writeln!(std::io::stderr(), "trigger after rmdir: {event:?} in {:?}", started.elapsed());
    assert_eq!(event, TriggerEvent::GroupGone);
}

/// Writes a file from inside the group (so its page cache is charged there), then reads it
/// back again and again: with a limit below its size, every pass refaults.
const THRASH: &str = r#"
read go
head -c "$2" /dev/zero > "$1"
for pass in 1 2 3 4; do cat "$1" > /dev/null; done
echo done
cat > /dev/null
"#;

#[test]
fn reclaim_under_the_memory_limit_shows_as_pressure_and_fires_a_trigger() {
    let Some(machine) = machine("reclaim_under_the_memory_limit_shows_as_pressure_and_fires_a_trigger") else { return };
    let mut guard = GroupGuard::create(&machine);
    let group = guard.group.clone();
    machine.backend.set_knob(&group, Knob::Max, Some(32 * MIB)).unwrap();
    let window_us = if has_cap_sys_resource(Path::new("/proc")) { 1_000_000 } else { UNPRIVILEGED_WINDOW_STEP_US };
    let trigger = PsiTrigger::new(&machine.backend.pressure_file(&group, PsiResource::Memory), StallKind::Some, 10_000, window_us).unwrap();
    let before = machine.backend.stall_totals(&group).unwrap();
    let stat_before = machine.backend.memory_stat(&group).unwrap();

    let dir = tempfile::tempdir_in(std::env::temp_dir()).unwrap();
    let data = dir.path().join("data");
    let helper = guard.adopt(Helper::shell(THRASH, &[&data.to_string_lossy(), &(128 * MIB).to_string()]));
    let started = Instant::now();
    helper.say("go");
    helper.expect("done");
    let ran = started.elapsed();
    let event = trigger.wait(Duration::from_secs(3 * window_us / 1_000_000 + 2)).unwrap();
    let fired_after = started.elapsed();

    let after = machine.backend.stall_totals(&group).unwrap();
    let stat_after = machine.backend.memory_stat(&group).unwrap();
    let usage = machine.backend.usage_bytes(&group).unwrap();
    let _ = writeln!(
        std::io::stderr(),
        "thrash under 32 MiB: ran {ran:?}, memory some {} us, full {} us, refaults {}, usage {usage} bytes, trigger {event:?} after {fired_after:?}",
        after.memory_some_us - before.memory_some_us,
        after.memory_full_us - before.memory_full_us,
        stat_after.workingset_refault - stat_before.workingset_refault,
    );
    assert!(after.memory_some_us > before.memory_some_us, "no memory stall recorded: {before:?} -> {after:?}");
    assert!(stat_after.workingset_refault > stat_before.workingset_refault);
    assert!(usage <= 32 * MIB);
    assert_eq!(event, TriggerEvent::Fired);
}

const REPORT: &str = r#"
import socket, sys
sys.stdin.readline()
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(sys.argv[1])
s.sendall(sys.argv[2].encode() + b"\n")
print("sent", flush=True)
sys.stdin.read()
"#;

#[test]
fn only_a_process_inside_the_group_can_report_its_jobs() {
    let Some(machine) = machine("only_a_process_inside_the_group_can_report_its_jobs") else { return };
    let mut guard = GroupGuard::create(&machine);
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("run/critmem.sock");
    let mut server = JobServer::bind(JobServerConfig {
        socket_path: socket.clone(),
        socket_gid: None,
        groups: vec![ReportingGroup { name: "rt".into(), cgroup: guard.group.to_string() }],
        hierarchy: Hierarchy::for_layout(&machine.layout),
        proc: ProcFs::new("/proc".into()),
        max_connections: 8,
    })
    .unwrap();
    let message = r#"{"v":1,"op":"release","job":3,"deadline_ns":1000,"group":"rt"}"#;
    let socket_arg = socket.to_string_lossy().into_owned();

    let inside = guard.adopt(Helper::python(REPORT, &[&socket_arg, message]));
    let inside_pid = inside.pid();
    inside.say("go");
    inside.expect("sent");
    let mut outside = Helper::python(REPORT, &[&socket_arg, message]);
    outside.say("go");
    outside.expect("sent");

    let mut jobs = Vec::new();
    wait_until("both connections to be handled", Duration::from_secs(5), || {
        jobs.extend(server.poll());
        let stats = server.stats();
        stats.accepted_messages + stats.refused >= 2
    });
    assert_eq!(jobs.len(), 1);
    assert_eq!((jobs[0].pid, jobs[0].job, jobs[0].op), (inside_pid, 3, JobOp::Release { deadline_ns: 1000 }));
    assert_eq!(server.stats().refused, 1, "the process outside the group is refused");
}

#[test]
fn a_crashed_agents_journal_restores_real_cgroups() {
    let Some(machine) = machine("a_crashed_agents_journal_restores_real_cgroups") else { return };
    let dir = tempfile::tempdir().unwrap();
    let journal_path = dir.path().join("journal.jsonl");
    let parent = GroupGuard::create(&machine);
    let child = GroupPath::new(&format!("{}/job", parent.group.as_str())).unwrap();
    let mut helper = Helper::python(ALLOCATE, &["4096"]);
    {
        let (mut journal, previous) = Journal::open(&journal_path).unwrap();
        assert!(previous.is_none());
        // A pre-existing group (the parent) gets a limit; a new one (the child) is created.
        let write = machine.backend.plan_knob(&parent.group, Knob::Max, Some(512 * MIB)).unwrap().unwrap();
        journal.perform(&Change::Write(write)).unwrap();
        for change in machine.backend.plan_create(&child).unwrap() {
            journal.perform(&change).unwrap();
        }
        machine.backend.set_knob(&child, Knob::Max, Some(128 * MIB)).unwrap();
        machine.backend.move_pid(&child, helper.pid()).unwrap();
        // kill -9 of the agent: no restore_all.
    }
    assert_eq!(machine.backend.knob(&parent.group, Knob::Max).unwrap(), Some(512 * MIB));
    let (journal, report) = Journal::open(&journal_path).unwrap();
    let report = report.expect("the crashed run's journal is replayed");
    let _ = writeln!(std::io::stderr(), "restore report: {report:?}");
    assert_eq!(machine.backend.knob(&parent.group, Knob::Max).unwrap(), None);
    assert!(!machine.backend.exists(&child));
    assert!(machine.backend.group_dirs(&child).iter().all(|d| !d.exists()));
    assert!(report.evacuated_pids.contains(&helper.pid()));
    assert!(report.failures.is_empty());
    journal.restore_all().unwrap();
    assert!(!journal_path.exists());
    helper.say("go");
    helper.expect("ready");
    drop(helper);
    drop(parent);
}

/// Removes the test's swapfile even when an assertion fails.
struct SwapGuard(SwapManager);

impl Drop for SwapGuard {
    fn drop(&mut self) {
        if let Err(e) = self.0.teardown() {
            let _ = writeln!(std::io::stderr(), "LEAK: test swapfile not torn down: {e}");
        }
    }
}

#[test]
fn a_swapfile_of_our_own_is_set_up_and_torn_down_leaving_other_swap_alone() {
    let test = "a_swapfile_of_our_own_is_set_up_and_torn_down_leaving_other_swap_alone";
    if !nix::unistd::geteuid().is_root() {
        skip(test, "not root (swapon needs root)");
        return;
    }
    let _exclusive = SWAP_SENSITIVE.lock().unwrap_or_else(|p| p.into_inner());
    let dir = tempfile::tempdir_in(std::env::temp_dir()).unwrap();
    let manager = SwapManager::new(dir.path().join("state/swap.json"), PathBuf::from("/proc"));
    let others_before = manager.active().unwrap();
    let path = dir.path().join("critmem.swap");
    let guard = SwapGuard(manager.clone());
    let state = match manager.setup(&path, 64 * MIB) {
        Ok(state) => state,
        Err(Error::SwapUnsupported { stderr, .. }) => {
            skip(test, &format!("swapon refused a file in {}: {stderr}", dir.path().display()));
            return;
        }
        Err(e) => panic!("{e}"),
    };
    let active = manager.active().unwrap();
    let ours = active.iter().find(|e| e.path == state.path).expect("/proc/swaps lists our swapfile");
    let _ = writeln!(std::io::stderr(), "swap active: {ours:?}");
    assert_eq!(ours.kind, "file");
    assert!(ours.size_bytes >= 60 * MIB && ours.size_bytes <= 64 * MIB, "{}", ours.size_bytes);
    let header = read_swap_header(&state.path).unwrap().unwrap();
    assert_eq!((header.label.as_str(), header.uuid.as_str()), (SWAP_LABEL, state.uuid.as_str()));
    let mode = std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&state.path).unwrap().permissions()) & 0o777;
    assert_eq!(mode, 0o600);
    // A second setup is refused while ours exists.
    assert!(manager.setup(&dir.path().join("second.swap"), 64 * MIB).is_err());

    assert_eq!(manager.teardown().unwrap(), Some(state.path.clone()));
    assert!(!state.path.exists());
    assert_eq!(manager.active().unwrap(), others_before, "other swap must be exactly as it was");
    assert_eq!(manager.teardown().unwrap(), None);
    drop(guard);
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
