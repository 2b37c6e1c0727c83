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
    ["cpu", "cpuacct", "memory", "blkio", "unified", ""]
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
    // The cpu hierarchy: cgroup2's root on a v2 machine, the v1 `cpu` mount otherwise.
    let cpu_root = if Path::new("/sys/fs/cgroup/cgroup.controllers").exists() { "/sys/fs/cgroup" } else { "/sys/fs/cgroup/cpu" };
    let server = Path::new(cpu_root).join(&name).join("server/.own/cgroup.procs");
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

/// `critmem-hires ARGS` with `--json`: its JSON, after asserting it succeeded.
fn measured(args: &[&str]) -> serde_json::Value {
    let out = Command::new(HIRES).args(args).arg("--json").output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)))
}

/// Statistics in ns as the measurements print them: every field, `samples` of them, ordered.
fn assert_sane_statistics(stats: &serde_json::Value, samples: u64) {
    let field = |name: &str| stats[name].as_f64().unwrap_or_else(|| panic!("no {name} in {stats}"));
    assert_eq!(stats["samples"], samples, "{stats}");
    let (min, p50, p95, p99, max) = (field("min_ns"), field("p50_ns"), field("p95_ns"), field("p99_ns"), field("max_ns"));
    assert!(min > 0.0 && min <= p50 && p50 <= p95 && p95 <= p99 && p99 <= max, "{stats}");
    assert!(field("mean_ns") >= min && field("mean_ns") <= max, "{stats}");
    assert!(field("stddev_ns") >= 0.0, "{stats}");
    // Neither a wake-up nor a page costs a second: a unit mistake would.
    assert!(max < 1e9, "{stats}");
}

/// The first CPU this process may use, which the measurements run on.
fn first_cpu() -> u64 {
    let allowed = nix::sched::sched_getaffinity(nix::unistd::Pid::from_raw(0)).unwrap();
    (0..nix::sched::CpuSet::count()).find(|&c| allowed.is_set(c).unwrap()).unwrap() as u64
}

#[test]
fn event_latency_reports_the_samples_asked_for_on_the_first_cpu() {
    // Its threads sleep and wake on the CPU the trees' CPU shares are measured on.
    let _one = ONE_TREE.lock().unwrap_or_else(|p| p.into_inner());
    let out = measured(&["event-latency", "--samples", "300", "--warmup", "20"]);
    assert_sane_statistics(&out["latency"], 300);
    assert_eq!(out["warmup"], 20);
    assert_eq!(out["cpu"], first_cpu());
    assert!(out["cpu_cgroup"].as_str().is_some_and(|c| c.starts_with('/')), "{out}");
}

#[test]
fn page_cost_reports_map_and_unmap_of_one_page() {
    let _one = ONE_TREE.lock().unwrap_or_else(|p| p.into_inner());
    let out = measured(&["page-cost", "--samples", "500"]);
    assert_sane_statistics(&out["map"], 500);
    assert_sane_statistics(&out["unmap"], 500);
    assert_eq!(out["page_bytes"], nix::unistd::sysconf(nix::unistd::SysconfVar::PAGE_SIZE).unwrap().unwrap());
    assert_eq!(out["cpu"], first_cpu());
}

#[test]
fn bad_measurement_arguments_are_refused_in_one_line_with_exit_code_2() {
    let cases: [(&[&str], &str); 5] = [
        (&["event-latency"], "--samples"),
        (&["event-latency", "--samples", "0"], "0 is not in 1..=10000000"),
        (&["event-latency", "--samples", "10", "--warmup=-1"], "invalid value '-1' for '--warmup"),
        (&["page-cost", "--samples", "many"], "invalid digit"),
        (&["page-cost", "--samples", "10", "--bogus"], "'--bogus'"),
    ];
    for (args, expected) in cases {
        let out = Command::new(HIRES).args(args).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
        assert!(stderr.starts_with("critmem-hires: ") && stderr.contains(expected), "{args:?}: expected {expected:?} in {stderr}");
        assert!(out.stdout.is_empty(), "{args:?}");
    }
}

#[test]
fn a_measurement_run_in_a_trees_deepest_subsystem_reports_from_that_cgroup() {
    let test = "a_measurement_run_in_a_trees_deepest_subsystem_reports_from_that_cgroup";
    let Some(_machine) = machine(test) else { return };
    let guard = TreeGuard::new("critmem-test-hires-depth");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("chain.toml");
    std::fs::write(
        &path,
        "[root]\ncpus = 1\nmemory_mib = 512\n\
         [[subsystem]]\nname = \"l1\"\nreserve = [{ family = \"cpu\", kind = \"hard\", budget_ms = 99, period_ms = 100 }]\n\
         [[subsystem]]\nname = \"l2\"\nparent = \"l1\"\nreserve = [{ family = \"cpu\", kind = \"hard\", budget_ms = 98, period_ms = 100 }]\n",
    )
    .unwrap();
    let name = guard.name.clone();
    let out = guard
        .command(&["apply", &path.to_string_lossy(), "--in", "l2", "--json", "--", HIRES, "event-latency", "--samples", "200", "--json"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    // The command's output reaches stderr; stdout is the tree's summary.
    let latency: serde_json::Value = stderr
        .lines()
        .find_map(|l| serde_json::from_str::<serde_json::Value>(l).ok().filter(|v| v.get("latency").is_some()))
        .unwrap_or_else(|| panic!("no measurement in {stderr}"));
    assert_eq!(latency["cpu_cgroup"], format!("/{name}/l1/l2"), "{latency}");
    assert_sane_statistics(&latency["latency"], 200);
    let summary: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(summary["stopped_by"], "commands exited", "{summary}");
    assert!(tree_dirs(&name).is_empty(), "left behind: {:?}", tree_dirs(&name));
}

#[test]
fn a_hard_io_reservation_holds_a_subsystems_direct_reads_to_its_bandwidth() {
    let test = "a_hard_io_reservation_holds_a_subsystems_direct_reads_to_its_bandwidth";
    let Some(_machine) = machine(test) else { return };
    if !Path::new("/sys/fs/cgroup/blkio/blkio.throttle.read_bps_device").exists()
        && !Path::new("/sys/fs/cgroup/cgroup.controllers").exists()
    {
        eprintln!("SKIP {test}: no block I/O controller (blkio) on this machine");
        return;
    }
    // Direct reads of a file on a disk (not tmpfs): /var/tmp is on the root filesystem.
    let data_dir = tempfile::tempdir_in("/var/tmp").unwrap();
    let data = data_dir.path().join("data");
    let written = Command::new("dd")
        .args(["if=/dev/zero", &format!("of={}", data.display()), "bs=1M", "count=32", "oflag=direct", "status=none"])
        .status()
        .unwrap();
    assert!(written.success());
    if critmem_linux::hires::resolve_io_device(data_dir.path()).is_err() {
        eprintln!("SKIP {test}: {} is on no block device", data_dir.path().display());
        return;
    }
    let guard = TreeGuard::new("critmem-test-hires-io");
    let reader = format!("while :; do dd if={} of=/dev/null bs=256k iflag=direct status=none; done", data.display());
    let tree = format!(
        "[root]\ncpus = 1\nmemory_mib = 256\nio_mib_per_s = 64\nio_device = {:?}\n\
         [[subsystem]]\nname = \"slow\"\nreserve = [{{ family = \"io\", kind = \"hard\", mib_per_s = 4 }}]\ncommand = [\"sh\", \"-c\", {reader:?}]\n\
         [[subsystem]]\nname = \"soft\"\nreserve = [{{ family = \"io\", kind = \"soft\", mib_per_s = 4 }}]\n",
        data_dir.path().display().to_string()
    );
    let path = data_dir.path().join("tree.toml");
    std::fs::write(&path, tree).unwrap();
    let out = guard.command(&["apply", &path.to_string_lossy(), "--duration-s", "4", "--json"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let summary: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let rows = summary["subsystems"].as_array().unwrap();
    let slow = rows.iter().find(|r| r["name"] == "slow").unwrap();
    let rate = slow["io_mib_per_s_measured"].as_f64().unwrap();
    // The kernel's throttle lets a short burst through at the start of a slice.
    assert!((3.0..=4.6).contains(&rate), "read at {rate} MiB/s under a 4 MiB/s reservation");
    let not_applied: Vec<&str> = summary["io_not_applied"].as_array().unwrap().iter().filter_map(|v| v.as_str()).collect();
    assert_eq!(not_applied.len(), 1, "the soft one is listed: {not_applied:?}");
    assert!(not_applied[0].starts_with("soft: soft"), "{not_applied:?}");
    assert!(tree_dirs(&guard.name).is_empty(), "left behind: {:?}", tree_dirs(&guard.name));
}
