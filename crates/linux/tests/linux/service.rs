//! The agent under a service manager: sd_notify readiness, status, watchdog and stopping on a
//! notification socket of the test's own, and SIGHUP reloading the configuration.

use super::*;
use critmem_linux::cgroup::Knob;
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use std::os::unix::net::UnixDatagram;

/// The static controller's limit on the test's soft real-time group.
fn config_text(dir: &Path, group: &GroupPath, limit_bytes: &str) -> String {
    format!(
        r#"
controller = "static"
total_memory_bytes = {total}
socket = "{socket}"
journal = "{journal}"

[controller_config]
limits_bytes = {{ rt = {limit_bytes} }}

[[group]]
name = "rt"
cgroup = "{group}"
role = "soft-rt"
floor_mb = 16
deadline_ms = 20
bcet_ms = 3
"#,
        total = 512 * MIB,
        socket = dir.join("run/jobs.sock").display(),
        journal = dir.join("journal.jsonl").display(),
        group = group.as_str(),
    )
}

/// The agent binary with a notification socket and its log in a file; SIGKILLed and reaped on
/// drop unless stopped (its journal then restores at the next start, and the group guard
/// declared before it removes the group).
struct Agent {
    child: Option<Child>,
    log: PathBuf,
}

impl Agent {
    fn start(dir: &Path, config: &Path, notify: &Path, watchdog_us: u64) -> Agent {
        let log = dir.join("agent.log");
        let child = Command::new(AGENT)
            .arg("--config")
            .arg(config)
            .args(["--log-level", "info"])
            .env("NOTIFY_SOCKET", notify)
            .env("WATCHDOG_USEC", watchdog_us.to_string())
            .env_remove("WATCHDOG_PID")
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        Agent { child: Some(child), log }
    }

    fn signal(&self, signal: Signal) {
        kill(Pid::from_raw(self.child.as_ref().unwrap().id() as i32), signal).unwrap();
    }

    fn running(&mut self) -> bool {
        self.child.as_mut().unwrap().try_wait().unwrap().is_none()
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The log's lines containing `text`, once there is at least one.
    fn wait_for_log(&self, text: &str) -> Vec<String> {
        wait_until(&format!("the agent to log {text:?}"), Duration::from_secs(10), || self.log().contains(text));
        self.log().lines().filter(|l| l.contains(text)).map(str::to_owned).collect()
    }

    /// SIGTERM, then the JSON summary and whether the agent exited successfully.
    fn stop(mut self) -> (serde_json::Value, bool) {
        self.signal(Signal::SIGTERM);
        let output = self.child.take().unwrap().wait_with_output().unwrap();
        let log = self.log();
        let summary = serde_json::from_slice(&output.stdout).unwrap_or_else(|e| panic!("agent summary: {e}: {log}"));
        (summary, output.status.success())
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// The test's end of `NOTIFY_SOCKET`.
struct NotifySocket(UnixDatagram);

impl NotifySocket {
    fn bind(path: &Path) -> Self {
        let socket = UnixDatagram::bind(path).unwrap();
        socket.set_read_timeout(Some(Duration::from_millis(200))).unwrap();
        NotifySocket(socket)
    }

    /// Datagrams until one has the line `want` (that one included), within 10 s.
    fn until(&self, want: &str) -> Vec<String> {
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut seen = Vec::new();
        let mut buf = vec![0u8; 4096];
        while Instant::now() < deadline {
            let Ok(n) = self.0.recv(&mut buf) else { continue };
            let message = String::from_utf8_lossy(&buf[..n]).into_owned();
            let done = message.lines().any(|l| l == want);
            seen.push(message);
            if done {
                return seen;
            }
        }
        panic!("no {want:?} within 10 s; got {seen:?}");
    }
}

fn wait_for_max(machine: &Machine, group: &GroupPath, want: Option<u64>) {
    wait_until(&format!("memory limit {want:?}"), Duration::from_secs(10), || held_limit(machine, group) == want);
}

#[test]
fn the_agent_notifies_readiness_status_watchdog_and_stopping_and_restores_on_sigterm() {
    let Some(machine) = machine("the_agent_notifies_readiness_status_watchdog_and_stopping_and_restores_on_sigterm") else { return };
    let guard = GroupGuard::create(&machine);
    let original = 1024 * MIB;
    machine.backend.set_knob(&guard.group, Knob::Max, Some(original)).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("agent.toml");
    std::fs::write(&config, config_text(dir.path(), &guard.group, &(64 * MIB).to_string())).unwrap();
    let notify = NotifySocket::bind(&dir.path().join("notify.sock"));
    // A 1 s watchdog: pings every 250 ms.
    let agent = Agent::start(dir.path(), &config, &dir.path().join("notify.sock"), 1_000_000);

    let first = notify.until("READY=1");
    let ready = first.last().unwrap();
    assert!(ready.lines().any(|l| l.starts_with("STATUS=static over 1 group(s) (rt) every 5 ms; tick 1 ")), "{ready:?}");
    wait_for_max(&machine, &guard.group, Some(64 * MIB));
    // Three more pings from the running loop, each after the one before.
    for _ in 0..3 {
        notify.until("WATCHDOG=1");
    }
    let (summary, success) = agent.stop();
    assert!(success, "{summary}");
    assert_eq!(summary["stopped_by"], "SIGTERM");
    let stopping = notify.until("STOPPING=1");
    assert!(stopping.last().unwrap().contains("STATUS=stopping (SIGTERM): restoring every original value"), "{stopping:?}");
    assert_eq!(machine.backend.knob(&guard.group, Knob::Max).unwrap(), Some(original), "original restored");
    assert!(!dir.path().join("journal.jsonl").exists(), "a complete restore removes the journal");
}

#[test]
fn sighup_applies_a_good_configuration_keeps_the_running_one_otherwise_and_sigterm_still_restores() {
    let Some(machine) = machine("sighup_applies_a_good_configuration_keeps_the_running_one_otherwise_and_sigterm_still_restores") else {
        return;
    };
    let guard = GroupGuard::create(&machine);
    let original = 1024 * MIB;
    machine.backend.set_knob(&guard.group, Knob::Max, Some(original)).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("agent.toml");
    let write = |limit: &str| std::fs::write(&config, config_text(dir.path(), &guard.group, limit)).unwrap();
    write(&(64 * MIB).to_string());
    let notify = NotifySocket::bind(&dir.path().join("notify.sock"));
    let mut agent = Agent::start(dir.path(), &config, &dir.path().join("notify.sock"), 2_000_000);
    notify.until("READY=1");
    wait_for_max(&machine, &guard.group, Some(64 * MIB));

    // A good change: the new limit is applied, and the reload is reported around it.
    write(&(48 * MIB).to_string());
    agent.signal(Signal::SIGHUP);
    notify.until("RELOADING=1");
    let reloaded = notify.until("READY=1");
    assert!(reloaded.last().unwrap().contains("STATUS=static over 1 group(s)"), "{reloaded:?}");
    wait_for_max(&machine, &guard.group, Some(48 * MIB));
    let applied = agent.wait_for_log("configuration reloaded");
    assert!(applied[0].contains(&format!("{}: configuration reloaded: controller static", config.display())), "{applied:?}");

    // A bad value: one line naming the file and the key, and the running configuration stays.
    write("\"lots\"");
    agent.signal(Signal::SIGHUP);
    let refused = agent.wait_for_log("reload refused");
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert!(refused[0].contains(&config.display().to_string()) && refused[0].contains("limits_bytes"), "{refused:?}");
    notify.until("READY=1");
    notify.until("WATCHDOG=1");
    assert!(agent.running(), "{}", agent.log());
    assert_eq!(held_limit(&machine, &guard.group), Some(48 * MIB), "the reloaded limit stays");

    // A new group whose cgroup does not exist: refused in one line, the running configuration stays.
    let mut grown = config_text(dir.path(), &guard.group, &(32 * MIB).to_string());
    grown.push_str("[[group]]\nname = \"more\"\ncgroup = \"critmem-test-never-created\"\nrole = \"non-rt\"\nfloor_mb = 16\n");
    std::fs::write(&config, grown).unwrap();
    agent.signal(Signal::SIGHUP);
    wait_until("the second refusal", Duration::from_secs(10), || agent.log().matches("reload refused").count() == 2);
    let refused = agent.log().lines().rfind(|l| l.contains("reload refused")).unwrap().to_owned();
    assert!(refused.contains("\"more\" does not exist"), "{refused}");
    notify.until("READY=1");
    assert!(agent.running(), "{}", agent.log());
    assert_eq!(held_limit(&machine, &guard.group), Some(48 * MIB));

    // A group that exists is taken on by a reload, and let go of (its original back at once)
    // by the next.
    let more = GroupGuard::create(&machine);
    machine.backend.set_knob(&more.group, Knob::Max, Some(original)).unwrap();
    let mut grown = config_text(dir.path(), &guard.group, &(48 * MIB).to_string())
        .replace(&format!("rt = {} }}", 48 * MIB), &format!("rt = {}, more = {} }}", 48 * MIB, 40 * MIB));
    grown.push_str(&format!(
        "[[group]]\nname = \"more\"\ncgroup = \"{}\"\nrole = \"soft-rt\"\nfloor_mb = 16\ndeadline_ms = 20\nbcet_ms = 3\n",
        more.group.as_str()
    ));
    std::fs::write(&config, grown).unwrap();
    agent.signal(Signal::SIGHUP);
    wait_until("the reload taking on the group", Duration::from_secs(10), || agent.log().contains("(\"more\" added)"));
    wait_for_max(&machine, &more.group, Some(40 * MIB));
    write(&(48 * MIB).to_string());
    agent.signal(Signal::SIGHUP);
    wait_until("the reload letting go of the group", Duration::from_secs(10), || agent.log().contains("(\"more\" removed)"));
    wait_for_max(&machine, &more.group, Some(original));
    assert!(agent.running(), "{}", agent.log());
    assert_eq!(held_limit(&machine, &guard.group), Some(48 * MIB));

    let (summary, success) = agent.stop();
    assert!(success, "{summary}");
    assert_eq!((summary["stopped_by"].as_str(), summary["controller"].as_str()), (Some("SIGTERM"), Some("static")));
    assert_eq!(machine.backend.knob(&guard.group, Knob::Max).unwrap(), Some(original), "original restored after the reloads");
    assert!(!dir.path().join("journal.jsonl").exists(), "a complete restore removes the journal");
}
