//! What the real-machine test binaries share: root and cgroup checks, test-owned cgroups,
//! helper processes, the shipped workers and the agent binary, and the swapfile guard. Every
//! name they create is `critmem-test-<pid>-<n>`, removed by a drop guard.

#![allow(dead_code)]

use critmem_linux::cgroup::{open_backend, CgroupBackend, GroupPath};
use critmem_linux::layout::{detect_layout_in, Layout};
use critmem_linux::swap::SwapManager;
use critmem_linux::{Error, PROC_ROOT};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

pub const MIB: u64 = 1 << 20;

/// Says why a test did not run, past libtest's output capture so it shows in CI logs.
pub fn skip(test: &str, reason: &str) {
    let _ = writeln!(std::io::stderr(), "SKIP {test}: {reason}");
}

/// How many times slower this machine runs code than the ones the tests' periods were chosen
/// on: `CRITMEM_TIME_SCALE`, which scripts/v2-guest-suite.sh measures in its emulated guest;
/// 1 where unset. Timing tests stretch their periods by it.
pub fn time_scale() -> f64 {
    match std::env::var("CRITMEM_TIME_SCALE") {
        Err(_) => 1.0,
        Ok(text) => match text.parse::<f64>() {
            Ok(scale) if scale.is_finite() && scale >= 1.0 => scale,
            _ => panic!("CRITMEM_TIME_SCALE must be a number of at least 1, not {text:?}"),
        },
    }
}

/// `ms` stretched by [`time_scale`], whole milliseconds.
pub fn scaled_ms(ms: u64) -> u64 {
    (ms as f64 * time_scale()).round() as u64
}

pub struct Machine {
    pub layout: Layout,
    pub backend: Box<dyn CgroupBackend>,
}

/// The real cgroup setup, or `None` (after saying why) when these tests cannot run here.
pub fn machine(test: &str) -> Option<Machine> {
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
pub fn swap_identities(swaps: &[critmem_linux::swap::SwapEntry]) -> Vec<(PathBuf, String, u64, i32)> {
    swaps.iter().map(|s| (s.path.clone(), s.kind.clone(), s.size_bytes, s.priority)).collect()
}

pub fn unique_name() -> String {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    format!("critmem-test-{}-{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed))
}

/// A child process talking over stdin/stdout; killed and reaped on drop.
pub struct Helper {
    pub child: Child,
    pub stdin: Option<ChildStdin>,
    pub stdout: Option<BufReader<ChildStdout>>,
}

impl Helper {
    /// Runs a Python script that first waits for one line on stdin, so the test can move it
    /// into a group before it does anything.
    pub fn python(script: &str, args: &[&str]) -> Helper {
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
    pub fn shell(script: &str, args: &[&str]) -> Helper {
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

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn say(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().unwrap();
        stdin.write_all(line.as_bytes()).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
    }

    pub fn expect(&mut self, want: &str) {
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
pub struct GroupGuard<'m> {
    pub machine: &'m Machine,
    pub group: GroupPath,
    pub helpers: Vec<Helper>,
}

impl<'m> GroupGuard<'m> {
    pub fn create(machine: &'m Machine) -> Self {
        let group = GroupPath::new(&unique_name()).unwrap();
        assert!(!machine.backend.exists(&group));
        let guard = GroupGuard { machine, group, helpers: Vec::new() };
        assert!(machine.backend.create(&guard.group).unwrap());
        guard
    }

    pub fn adopt(&mut self, helper: Helper) -> &mut Helper {
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
                // Killed helpers leave the group once they are reaped; wait a moment. Processes
                // they left behind (children of a helper that died first) are the test's own.
                Err(Error::GroupBusy { .. }) if Instant::now() < deadline => {
                    for pid in self.machine.backend.pids(&self.group).unwrap_or_default() {
                        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), nix::sys::signal::Signal::SIGKILL);
                    }
                    std::thread::sleep(Duration::from_millis(10));
                }
                Err(e) => {
                    let _ = writeln!(std::io::stderr(), "LEAK: could not remove test cgroup {}: {e}", self.group);
                    break;
                }
            }
        }
    }
}

pub const ALLOCATE: &str = r#"
import sys
sys.stdin.readline()
n = int(sys.argv[1])
b = bytearray(n)
for i in range(0, n, 4096):
    b[i] = 1
print("ready", flush=True)
sys.stdin.read()
"#;

/// The limit a group is held to, as the agent sets it: the lower of `memory.max` and
/// `memory.high` (on cgroup v2 the agent's hard limit is `memory.high`, under a `memory.max`
/// backstop; v1 has `memory.max` alone).
pub fn held_limit(machine: &Machine, group: &GroupPath) -> Option<u64> {
    let max = machine.backend.knob(group, critmem_linux::cgroup::Knob::Max).unwrap();
    let high = machine.backend.knob(group, critmem_linux::cgroup::Knob::High).unwrap();
    match (max, high) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

pub fn wait_until(what: &str, timeout: Duration, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !condition() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

pub const SRT_WORKER: &str = env!("CARGO_BIN_EXE_critmem-srt-worker");
pub const NRT_WORKER: &str = env!("CARGO_BIN_EXE_critmem-nrt-worker");
pub const AGENT: &str = env!("CARGO_BIN_EXE_critmem-agent");

/// A shipped worker started inside a group: a shell waits for one line, then execs the worker
/// under the same pid, so the test moves it into the group before it allocates anything (v1
/// does not move charges with a process). SIGKILLed and reaped on drop unless stopped.
pub struct Worker {
    pub child: Option<Child>,
}

impl Worker {
    pub fn start(move_into: impl FnOnce(u32), exe: &str, args: &[&str]) -> Worker {
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

    pub fn running(&mut self) -> bool {
        self.child.as_mut().unwrap().try_wait().unwrap().is_none()
    }

    /// SIGTERM, then the JSON summary the worker printed last, and its exit code.
    pub fn stop(mut self) -> (serde_json::Value, Option<i32>) {
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
pub fn srt_args(socket: &str) -> Vec<String> {
    ["--socket", socket, "--period-ms", "20", "--compute-us", "2000", "--wss-mib", "48", "--pages-per-job", "2048", "--pattern", "random"]
        .iter()
        .map(|s| s.to_string())
        .collect()
}

/// Removes the test's swapfile even when an assertion fails.
pub struct SwapGuard(pub SwapManager);

impl Drop for SwapGuard {
    fn drop(&mut self) {
        if let Err(e) = self.0.teardown() {
            let _ = writeln!(std::io::stderr(), "LEAK: test swapfile not torn down: {e}");
        }
    }
}
