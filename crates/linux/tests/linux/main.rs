//! Real-machine tests: real cgroups, PSI, processes, sockets and swap.
//!
//! They need root and a cgroup layout critmem supports; otherwise each prints why it skipped
//! and passes. Everything they create is named `critmem-test-<pid>-<n>` and removed by a drop
//! guard, also when an assertion fails; they never touch cgroups, swap or processes they did
//! not create.

use critmem_linux::cgroup::{open_backend, CgroupBackend, Change, GroupPath, Knob, PsiResource};
use critmem_linux::clock::MonotonicClock;
use critmem_linux::journal::Journal;
use critmem_linux::layout::{detect_layout_in, Layout};
use critmem_linux::procfs::{Hierarchy, ProcFs};
use critmem_linux::protocol::{JobOp, JobServer, JobServerConfig, ReportingGroup};
use critmem_linux::psi::{has_cap_sys_resource, read_pressure, PsiTrigger, StallKind, TriggerEvent, UNPRIVILEGED_WINDOW_STEP_US};
use critmem_linux::swap::{read_swap_header, SwapManager, SWAP_LABEL};
use critmem_linux::writer::{KnobWriter, Submitted};
use critmem_linux::{Error, FileWrite, PROC_ROOT};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

mod cgroups;
mod control;
mod jobs;
mod oom;
mod psi;
mod restore;
mod service;
mod swap;

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
/// A job server on `socket` for `groups` (name, cgroup path), as the agent binds it.
fn bind_job_server(machine: &Machine, socket: &std::path::Path, groups: Vec<ReportingGroup>) -> JobServer {
    JobServer::bind(JobServerConfig {
        socket_path: socket.to_path_buf(),
        socket_gid: None,
        groups,
        hierarchy: Hierarchy::for_layout(&machine.layout),
        proc: ProcFs::new(PROC_ROOT.into()),
        max_connections: 8,
    })
    .unwrap()
}

fn machine(test: &str) -> Option<Machine> {
    if !nix::unistd::geteuid().is_root() {
        skip(test, "not root (cgroup and swap changes need root)");
        return None;
    }
    let layout = match detect_layout_in(Path::new(PROC_ROOT)) {
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

/// Other swap areas as critmem must leave them: which they are, their size and priority. How
/// much of each is in use is the kernel's to change while a test runs.
fn swap_identities(swaps: &[critmem_linux::swap::SwapEntry]) -> Vec<(PathBuf, String, u64, i32)> {
    swaps.iter().map(|s| (s.path.clone(), s.kind.clone(), s.size_bytes, s.priority)).collect()
}

fn unique_name() -> String {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    format!("critmem-test-{}-{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed))
}

/// A child process talking over stdin/stdout; killed and reaped on drop.
struct Helper {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: Option<BufReader<ChildStdout>>,
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
        let stdout = Some(BufReader::new(child.stdout.take().unwrap()));
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
        let stdout = Some(BufReader::new(child.stdout.take().unwrap()));
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
        self.stdout.as_mut().unwrap().read_line(&mut line).unwrap();
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

// ---------------------------------------------------------------------------------------------
// The Linux platform, the shipped workers and the agent, end to end.

use critmem_linux::agent::AgentConfig;
use critmem_linux::platform::{ControlLoop, GroupSpec, LinuxPlatform, PlatformOptions};
use critmem_policy::{make_controller, GroupRole};

const SRT_WORKER: &str = env!("CARGO_BIN_EXE_critmem-srt-worker");
const NRT_WORKER: &str = env!("CARGO_BIN_EXE_critmem-nrt-worker");
const AGENT: &str = env!("CARGO_BIN_EXE_critmem-agent");

/// A shipped worker started inside a group: a shell waits for one line, then execs the worker
/// under the same pid, so the test moves it into the group before it allocates anything (v1
/// does not move charges with a process). SIGKILLed and reaped on drop unless stopped.
struct Worker {
    child: Option<Child>,
}

impl Worker {
    fn start(move_into: impl FnOnce(u32), exe: &str, args: &[&str]) -> Worker {
        let mut child = Command::new("/bin/sh")
            .arg("-c")
            .arg("read go; exec \"$0\" \"$@\"")
            .arg(exe)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        move_into(child.id());
        child.stdin.as_mut().unwrap().write_all(b"go\n").unwrap();
        Worker { child: Some(child) }
    }

    fn running(&mut self) -> bool {
        self.child.as_mut().unwrap().try_wait().unwrap().is_none()
    }

    /// SIGTERM, then the JSON summary the worker printed last, and its exit code.
    fn stop(mut self) -> (serde_json::Value, Option<i32>) {
        let child = self.child.take().unwrap();
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), nix::sys::signal::Signal::SIGTERM).unwrap();
        let output = child.wait_with_output().unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        let last = stdout.lines().last().unwrap_or("");
        let summary = serde_json::from_str(last).unwrap_or_else(|e| panic!("worker summary {last:?}: {e}"));
        (summary, output.status.code())
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Restores a platform (removing the groups it created) even when an assertion fails.
/// Declare it before the workers in it, so they are killed first.
struct PlatformGuard(Option<LinuxPlatform>);

impl PlatformGuard {
    fn get(&mut self) -> &mut LinuxPlatform {
        self.0.as_mut().unwrap()
    }

    fn restore(mut self) -> critmem_linux::RestoreReport {
        self.0.take().unwrap().restore(Duration::from_secs(30)).unwrap()
    }
}

impl Drop for PlatformGuard {
    fn drop(&mut self) {
        if let Some(platform) = self.0.take() {
            if let Err(e) = platform.restore(Duration::from_secs(30)) {
                let _ = writeln!(std::io::stderr(), "LEAK: platform not restored: {e}");
            }
        }
    }
}

fn srt_role() -> GroupRole {
    GroupRole::SoftRealTime { deadline_ns: 20_000_000, bcet_ns: 3_000_000 }
}

fn srt_args(socket: &str) -> Vec<String> {
    ["--socket", socket, "--period-ms", "20", "--compute-us", "2000", "--wss-mib", "48", "--pages-per-job", "2048", "--pattern", "random"]
        .iter()
        .map(|s| s.to_string())
        .collect()
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
