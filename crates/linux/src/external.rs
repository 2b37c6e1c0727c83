//! Python controllers on real Linux: each runs in a Python process of its own
//! (`python -m critmem.controller_host`), which loads the class the way the simulator's
//! binding does and answers one JSON line per tick. The control loop stays in Rust; the
//! Python side sees the same typed observation and returns the same actions.
//!
//! Protocol, one JSON object per line: the loop sends `{"load": NAME, "params": {...}}`, the
//! host answers `{"ok": {"name": ..., "interval_ns": ...}}` or `{"error": ..., "not_found":
//! bool}`; then per tick `{"tick": OBSERVATION}` → `{"actions": [...]}` or `{"error": ...}`.
//! The host's stdout carries only the protocol; user prints go to stderr, which is held back
//! until the class has loaded.

use std::io::{BufRead, BufReader, Write};
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use critmem_policy::{Action, Controller, ExternalControllers, ExternalError, ExternalInfo, Observation};
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use serde_json::{json, Value};

/// How long loading a class may take (imports included).
const LOAD_TIMEOUT: Duration = Duration::from_secs(60);
/// How long one tick may take before the controller counts as hung.
const TICK_TIMEOUT: Duration = Duration::from_secs(10);

/// Builds Python controllers as host processes of `python`, resolving relative file names
/// against `base_dir` (the scenario's directory).
pub struct PythonControllers {
    pub python: PathBuf,
    pub base_dir: Option<PathBuf>,
}

impl PythonControllers {
    /// The interpreter: `$CRITMEM_PYTHON` (the `critmem` command sets it to its own), else
    /// `python3` beside this program (the project's venv installs its binaries there), else
    /// `python3` on the PATH.
    pub fn find_python() -> PathBuf {
        if let Some(p) = std::env::var_os("CRITMEM_PYTHON").filter(|p| !p.is_empty()) {
            return PathBuf::from(p);
        }
        let beside = std::env::current_exe().ok().and_then(|e| e.parent().map(|d| d.join("python3")));
        beside.filter(|p| p.is_file()).unwrap_or_else(|| PathBuf::from("python3"))
    }

    /// The resolver for a scenario at `scenario` (or an agent config there).
    pub fn for_file(scenario: &Path) -> Self {
        Self::in_dir(scenario.parent().map_or(Path::new("."), |d| if d.as_os_str().is_empty() { Path::new(".") } else { d }))
    }

    /// The resolver for relative file names starting at `dir`.
    pub fn in_dir(dir: &Path) -> Self {
        PythonControllers { python: Self::find_python(), base_dir: Some(dir.to_path_buf()) }
    }

    fn load(&self, name: &str, params: &Value) -> Result<(Host, String, u64), ExternalError> {
        // Without a Python that has critmem, a plain name is just unknown; a class name says why.
        let unavailable = |reason: String| {
            if name.contains(':') {
                ExternalError::Invalid(format!(
                    "controller `{name}`: {reason}; a Python controller runs in {}, which needs critmem installed (set CRITMEM_PYTHON)",
                    self.python.display()
                ))
            } else {
                ExternalError::NotFound(critmem_policy::PolicyError::UnknownController { name: name.to_string() }.to_string())
            }
        };
        let mut host = Host::spawn(&self.python, self.base_dir.as_deref()).map_err(unavailable)?;
        let reply = host.ask(&json!({"load": name, "params": params}), LOAD_TIMEOUT).map_err(unavailable)?;
        if let Some(ok) = reply.get("ok") {
            let name = ok.get("name").and_then(Value::as_str).unwrap_or(name).to_string();
            let interval_ns =
                ok.get("interval_ns").and_then(Value::as_u64).filter(|&n| n > 0).unwrap_or(critmem_policy::DEFAULT_INTERVAL_NS);
            host.stderr.pass_on();
            return Ok((host, name, interval_ns));
        }
        let message = error_of(&reply);
        if reply.get("not_found").and_then(Value::as_bool) == Some(true) {
            Err(ExternalError::NotFound(message))
        } else {
            Err(ExternalError::Invalid(message))
        }
    }
}

/// The host's stderr: held back while the class loads (a failure is summed up in one line; a
/// Python that cannot start would otherwise print its own), passed on from then on (the
/// user's prints). With CRITMEM_DEBUG=1 what was held back is printed too.
struct StderrRelay {
    held: std::sync::Arc<std::sync::Mutex<Option<Vec<u8>>>>,
}

impl StderrRelay {
    fn start(mut from: std::process::ChildStderr) -> StderrRelay {
        let held = std::sync::Arc::new(std::sync::Mutex::new(Some(Vec::new())));
        let shared = std::sync::Arc::clone(&held);
        std::thread::spawn(move || {
            let mut chunk = [0u8; 4096];
            loop {
                let n = match std::io::Read::read(&mut from, &mut chunk) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => n,
                };
                let mut held = shared.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                match held.as_mut() {
                    Some(buffer) => buffer.extend_from_slice(&chunk[..n]),
                    None => {
                        let _ = std::io::stderr().write_all(&chunk[..n]);
                    }
                }
            }
        });
        StderrRelay { held }
    }

    /// From now on the host's stderr reaches ours, starting with what was held back.
    fn pass_on(&self) {
        let mut held = self.held.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(buffer) = held.take() {
            let _ = std::io::stderr().write_all(&buffer);
        }
    }
}

impl Drop for StderrRelay {
    fn drop(&mut self) {
        if std::env::var_os("CRITMEM_DEBUG").is_some_and(|v| v == "1") {
            self.pass_on();
        }
    }
}

fn error_of(reply: &Value) -> String {
    reply.get("error").and_then(Value::as_str).map_or_else(|| format!("the controller process answered {reply}"), str::to_string)
}

impl ExternalControllers for PythonControllers {
    fn check(&self, name: &str, params: &Value) -> Result<ExternalInfo, ExternalError> {
        self.load(name, params).map(|(_, display_name, interval_ns)| ExternalInfo { interval_ns, display_name })
    }

    fn build(&self, name: &str, params: &Value) -> Box<dyn Controller + Send> {
        match self.load(name, params) {
            Ok((host, name, interval_ns)) => Box::new(HostedController { host: Some(host), name, interval_ns, failure: None }),
            Err(ExternalError::NotFound(m) | ExternalError::Invalid(m)) => Box::new(HostedController {
                host: None,
                name: name.to_string(),
                interval_ns: critmem_policy::DEFAULT_INTERVAL_NS,
                failure: Some(m),
            }),
        }
    }
}

/// A host process and its pipes; killed when dropped.
struct Host {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    stderr: StderrRelay,
}

impl Host {
    fn spawn(python: &Path, base_dir: Option<&Path>) -> Result<Host, String> {
        let mut command = Command::new(python);
        command.args(["-m", "critmem.controller_host"]).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
        if let Some(dir) = base_dir {
            command.env("CRITMEM_SCENARIO_DIR", dir);
        }
        let mut child = command.spawn().map_err(|e| format!("cannot start {}: {e}", python.display()))?;
        let (Some(stdin), Some(stdout), Some(stderr)) = (child.stdin.take(), child.stdout.take(), child.stderr.take()) else {
            unreachable!("the three pipes were asked for")
        };
        Ok(Host { child, stdin, stdout: BufReader::new(stdout), stderr: StderrRelay::start(stderr) })
    }

    /// Sends `message` and reads the answer line, waiting at most `timeout`.
    fn ask(&mut self, message: &Value, timeout: Duration) -> Result<Value, String> {
        let gone = |e: std::io::Error| format!("the Python controller process is gone ({e})");
        // One write: the pipe is unbuffered, and the host wakes for every write.
        let mut line = message.to_string();
        line.push('\n');
        self.stdin.write_all(line.as_bytes()).map_err(gone)?;
        let deadline = Instant::now() + timeout;
        if self.stdout.buffer().is_empty() {
            loop {
                let left = deadline.saturating_duration_since(Instant::now());
                let ms = PollTimeout::try_from(left.as_millis().min(i32::MAX as u128) as i32).unwrap_or(PollTimeout::MAX);
                let mut fds = [PollFd::new(self.stdout.get_ref().as_fd(), PollFlags::POLLIN)];
                match poll(&mut fds, ms) {
                    Ok(0) => return Err(format!("the Python controller did not answer within {} s", timeout.as_secs())),
                    Ok(_) => break,
                    Err(nix::errno::Errno::EINTR) => continue,
                    Err(e) => return Err(format!("waiting for the Python controller: {e}")),
                }
            }
        }
        let mut line = String::new();
        match self.stdout.read_line(&mut line) {
            Ok(0) => {
                let status = self.child.wait().map(|s| s.to_string()).unwrap_or_else(|e| e.to_string());
                Err(format!("the Python controller process exited ({status})"))
            }
            Ok(_) => {
                serde_json::from_str(&line).map_err(|e| format!("the Python controller process answered something else than JSON ({e})"))
            }
            Err(e) => Err(gone(e)),
        }
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A Python controller in its host process; `host` is `None` once it failed.
struct HostedController {
    host: Option<Host>,
    name: String,
    interval_ns: u64,
    failure: Option<String>,
}

impl HostedController {
    fn call(host: &mut Host, obs: &Observation) -> Result<Vec<Action>, String> {
        let reply = host.ask(&json!({ "tick": obs }), TICK_TIMEOUT)?;
        match reply.get("actions") {
            Some(actions) => serde_json::from_value(actions.clone()).map_err(|e| format!("the Python controller's actions: {e}")),
            None => Err(error_of(&reply)),
        }
    }
}

impl Controller for HostedController {
    fn name(&self) -> &str {
        &self.name
    }

    fn tick(&mut self, obs: &Observation) -> Vec<Action> {
        let Some(host) = self.host.as_mut() else { return Vec::new() };
        match HostedController::call(host, obs) {
            Ok(actions) => actions,
            Err(message) => {
                self.failure = Some(message);
                self.host = None;
                Vec::new()
            }
        }
    }

    fn interval_ns(&self) -> u64 {
        self.interval_ns
    }

    fn failure(&self) -> Option<String> {
        self.failure.clone()
    }
}
