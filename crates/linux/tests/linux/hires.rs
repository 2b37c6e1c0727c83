//! `critmem-hires`: a reservation tree as nested cgroups on the real machine.

use super::*;

const HIRES: &str = env!("CARGO_BIN_EXE_critmem-hires");

/// The trees' processes share one CPU: two trees at once would halve each other's shares.
static ONE_TREE: Mutex<()> = Mutex::new(());

/// A test's tree: whatever a failed test left (processes in its cgroups, the cgroups) is
/// removed on drop.
struct TreeGuard {
    name: String,
    state: tempfile::TempDir,
    _one: std::sync::MutexGuard<'static, ()>,
}

impl TreeGuard {
    fn new(prefix: &str) -> TreeGuard {
        let one = ONE_TREE.lock().unwrap_or_else(|p| p.into_inner());
        TreeGuard { name: format!("{prefix}-{}", std::process::id()), state: tempfile::tempdir().unwrap(), _one: one }
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(HIRES);
        command.arg(format!("--name={}", self.name)).arg("--state-dir").arg(self.state.path()).args(args);
        command
    }
}

impl Drop for TreeGuard {
    fn drop(&mut self) {
        for top in tree_dirs(&self.name) {
            for procs in walk_files(&top, "cgroup.procs") {
                for pid in std::fs::read_to_string(procs).unwrap_or_default().lines().filter_map(|l| l.parse().ok()) {
                    let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGKILL);
                }
            }
        }
        let _ = self.command(&["teardown"]).output();
    }
}

/// Files named `name` in `dir` and below.
fn walk_files(dir: &Path, name: &str) -> Vec<PathBuf> {
    let mut found = vec![dir.join(name)];
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            found.extend(walk_files(&entry.path(), name));
        }
    }
    found
}

/// A tree on one CPU: two subsystems side by side and one nested, all CPU-bound.
fn tree() -> String {
    format!(
        r#"
[root]
cpus = 1
memory_mib = 512

[[subsystem]]
name = "server"
reserve = [{{ family = "cpu", kind = "hard", budget_ms = 5, period_ms = 10 }}, {{ family = "memory", kind = "hard", mib = 64 }}]
command = ["{HIRES}", "burn"]
processes = 3

[[subsystem]]
name = "worker"
parent = "server"
reserve = [{{ family = "cpu", kind = "hard", budget_ms = 2, period_ms = 10 }}]
command = ["{HIRES}", "burn"]

[[subsystem]]
name = "rt"
reserve = [{{ family = "cpu", kind = "hard", budget_ms = 3, period_ms = 20 }}]
command = ["{HIRES}", "burn"]
"#
    )
}

/// Every hierarchy's directory of the tree named `name`.
fn tree_dirs(name: &str) -> Vec<PathBuf> {
    ["cpu", "cpuacct", "memory", "unified", ""]
        .iter()
        .map(|h| Path::new("/sys/fs/cgroup").join(h).join(name))
        .filter(|d| d.exists())
        .collect()
}

#[test]
fn a_tree_applied_as_nested_cgroups_gives_each_subsystem_its_reserved_cpu_share_and_leaves_nothing() {
    let test = "a_tree_applied_as_nested_cgroups_gives_each_subsystem_its_reserved_cpu_share_and_leaves_nothing";
    let Some(_machine) = machine(test) else { return };
    let guard = TreeGuard::new("critmem-test-hires");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tree.toml");
    std::fs::write(&path, tree()).unwrap();
    let name = guard.name.clone();
    let out = guard.command(&["apply", &path.to_string_lossy(), "--duration-s", "4", "--json"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let summary: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let _ = writeln!(std::io::stderr(), "{}", serde_json::to_string_pretty(&summary["subsystems"]).unwrap());
    assert_eq!(summary["pinned_cpus"], 1, "held to the tree's one CPU");
    for row in summary["subsystems"].as_array().unwrap() {
        let (reserved, measured) = (row["cpu_share_reserved"].as_f64().unwrap(), row["cpu_share_measured"].as_f64().unwrap());
        // The worker's share is also counted in its parent's (the kernel's accounting is
        // hierarchical, as the parent's reservation is).
        assert!((measured - reserved).abs() <= 0.05, "{}: reserved {reserved}, measured {measured}", row["name"]);
    }
    assert!(tree_dirs(&name).is_empty(), "left behind: {:?}", tree_dirs(&name));
    assert_eq!(std::fs::read_dir(guard.state.path()).unwrap().count(), 0, "no journal left");
}

#[test]
fn a_killed_apply_leaves_no_process_and_teardown_removes_its_cgroups() {
    let test = "a_killed_apply_leaves_no_process_and_teardown_removes_its_cgroups";
    let Some(_machine) = machine(test) else { return };
    let guard = TreeGuard::new("critmem-test-hires-kill");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tree.toml");
    std::fs::write(&path, tree()).unwrap();
    let name = guard.name.clone();
    let mut apply = guard.command(&["apply", &path.to_string_lossy(), "--duration-s", "60"]).stdout(Stdio::null()).spawn().unwrap();
    // A subsystem with children runs its own processes in a leaf of their own.
    let server = Path::new("/sys/fs/cgroup/cpu").join(&name).join("server/.own/cgroup.procs");
    wait_until("the tree's processes to start", Duration::from_secs(10), || {
        std::fs::read_to_string(&server).is_ok_and(|procs| procs.lines().count() == 3)
    });
    let pids: Vec<i32> = std::fs::read_to_string(&server).unwrap().lines().map(|l| l.parse().unwrap()).collect();
    apply.kill().unwrap();
    apply.wait().unwrap();
    wait_until("the tree's processes to die with it", Duration::from_secs(5), || {
        pids.iter().all(|&pid| nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None).is_err())
    });
    assert!(!tree_dirs(&name).is_empty(), "a kill -9 leaves the cgroups to the journal");
    let out = guard.command(&["teardown"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("\"removed\":true"));
    assert!(tree_dirs(&name).is_empty(), "left behind: {:?}", tree_dirs(&name));
    let again = guard.command(&["teardown"]).output().unwrap();
    assert_eq!(String::from_utf8_lossy(&again.stdout).trim(), r#"{"removed":false}"#);
}

#[test]
fn a_tree_that_does_not_admit_is_refused_in_one_line_and_changes_nothing() {
    let test = "a_tree_that_does_not_admit_is_refused_in_one_line_and_changes_nothing";
    let Some(_machine) = machine(test) else { return };
    let guard = TreeGuard::new("critmem-test-hires-bad");
    let dir = tempfile::tempdir().unwrap();
    let name = guard.name.clone();
    let cases = [
        (tree().replace("budget_ms = 2, period_ms = 10", "budget_ms = 6, period_ms = 10"), "does not fit in server"),
        (tree().replace("budget_ms = 3, period_ms = 20", "budget_ms = 30, period_ms = 20"), "must not exceed period_ms"),
        (tree().replace("family = \"memory\"", "family = \"gpu\""), "unknown variant `gpu`"),
        (tree().replace("budget_ms = 3, period_ms = 20", "budget_ms = 0.5, period_ms = 20"), "at least 1 ms"),
    ];
    for (text, expected) in cases {
        let path = dir.path().join("tree.toml");
        std::fs::write(&path, text).unwrap();
        let out = guard.command(&["apply", &path.to_string_lossy()]).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(stderr.contains(expected), "expected {expected:?} in {stderr}");
        assert!(tree_dirs(&name).is_empty(), "left behind: {:?}", tree_dirs(&name));
    }
}
