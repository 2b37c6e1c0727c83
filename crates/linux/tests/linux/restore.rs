//! Restoring what critmem changed: a crashed agent's journal, kill -9, a group that vanishes, start-up errors.

use super::*;

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

/// Reads the nrt group's hard limit until `condition` holds.
fn wait_for_limit(machine: &Machine, group: &GroupPath, what: &str, condition: impl Fn(Option<u64>) -> bool) {
    wait_until(what, Duration::from_secs(10), || condition(held_limit(machine, group)));
}

#[test]
fn kill_9_of_the_agent_then_a_restart_restores_every_original_and_workers_stay_intact() {
    let Some(machine) = machine("kill_9_of_the_agent_then_a_restart_restores_every_original_and_workers_stay_intact") else { return };
    let mut srt_guard = GroupGuard::create(&machine);
    let mut nrt_guard = GroupGuard::create(&machine);
    let original = 1024 * MIB;
    machine.backend.set_knob(&nrt_guard.group, Knob::Max, Some(original)).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("run/jobs.sock");
    let journal = dir.path().join("journal.jsonl");
    let metrics = dir.path().join("metrics.prom");
    let config_path = dir.path().join("agent.toml");
    // Above both workers' usage (no swap needed), below the original limit: greedy lowers it.
    let config = format!(
        r#"
controller = "greedy"
total_memory_bytes = {total}
socket = "{socket}"
journal = "{journal}"
metrics_file = "{metrics}"

[[group]]
name = "srt"
cgroup = "{srt}"
role = "soft-rt"
floor_mb = {floor_mb}
deadline_ms = 20
bcet_ms = 3

[[group]]
name = "nrt"
cgroup = "{nrt}"
role = "non-rt"
floor_mb = {floor_mb}
"#,
        total = 512 * MIB,
        socket = socket.display(),
        journal = journal.display(),
        metrics = metrics.display(),
        srt = srt_guard.group.as_str(),
        nrt = nrt_guard.group.as_str(),
        floor_mb = 16,
    );
    std::fs::write(&config_path, config).unwrap();
    AgentConfig::load(&config_path).unwrap();
    let socket_arg = socket.to_string_lossy().into_owned();
    let srt = Worker::start(
        |pid| machine.backend.move_pid(&srt_guard.group, pid).unwrap(),
        SRT_WORKER,
        &srt_args(&socket_arg).iter().map(String::as_str).collect::<Vec<_>>(),
    );
    let nrt = Worker::start(|pid| machine.backend.move_pid(&nrt_guard.group, pid).unwrap(), NRT_WORKER, &["--wss-mib", "64"]);
    let agent = |extra: &[&str]| {
        Command::new(AGENT).arg("--config").arg(&config_path).args(extra).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap()
    };

    // Killed if an assertion fails before the test kills it on purpose.
    let first = Worker { child: Some(agent(&[])) };
    wait_for_limit(&machine, &nrt_guard.group, "the agent to lower the limit", |l| l.is_some_and(|l| l < original));
    // The worker connects (it retries every 200 ms) and its jobs show in the metrics.
    let released = |text: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix("critmem_group_jobs_total{group=\"srt\",event=\"released\"} "))
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    wait_until("the first agent to see jobs", Duration::from_secs(10), || {
        released(&std::fs::read_to_string(&metrics).unwrap_or_default()) > 0.0
    });
    drop(first); // SIGKILL, as kill -9
    let lowered = held_limit(&machine, &nrt_guard.group);
    assert!(lowered.is_some_and(|l| l < original), "kill -9 left the changed limit: {lowered:?}");
    assert!(journal.exists(), "the journal survives the crash");

    // Long enough for the reconnecting worker to report even on a loaded 2-core machine.
    let second = agent(&["--duration-s", "5"]).wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&second.stderr);
    assert!(second.status.success(), "restarted agent failed: {stderr}");
    let summary: serde_json::Value = serde_json::from_slice(&second.stdout).unwrap_or_else(|e| panic!("{e}: {stderr}"));
    let _ = writeln!(std::io::stderr(), "restarted agent: {summary}");
    assert_eq!(summary["recovered_from_crash"], true);
    assert!(summary["jobs_released"].as_u64().unwrap() > 0, "the worker reported to the restarted agent: {summary}");
    assert_eq!(machine.backend.knob(&nrt_guard.group, Knob::Max).unwrap(), Some(original), "original restored");
    assert_eq!(machine.backend.knob(&srt_guard.group, Knob::Max).unwrap(), None);
    assert!(!journal.exists());
    let text = std::fs::read_to_string(&metrics).unwrap();
    assert!(text.contains("critmem_ticks_total") && text.contains("critmem_group_usage_bytes{group=\"nrt\"}"), "{text}");

    let (mut srt, mut nrt) = (srt, nrt);
    assert!(srt.running() && nrt.running(), "workers survived the agent's crash");
    let (srt_summary, srt_code) = srt.stop();
    let (nrt_summary, nrt_code) = nrt.stop();
    let _ = writeln!(std::io::stderr(), "srt {srt_summary}\nnrt {nrt_summary}");
    assert_eq!((srt_code, nrt_code), (Some(0), Some(0)));
    assert_eq!(srt_summary["checksum_failures"], 0);
    assert_eq!(nrt_summary["checksum_failures"], 0);
    assert!(srt_summary["connects"].as_u64().unwrap() >= 2, "the worker reconnected to the restarted agent: {srt_summary}");
    srt_guard.helpers.clear();
    nrt_guard.helpers.clear();
}

#[test]
fn the_agent_fails_with_one_line_and_exit_code_2_on_a_missing_group() {
    let Some(_machine) = machine("the_agent_fails_with_one_line_and_exit_code_2_on_a_missing_group") else { return };
    let dir = tempfile::tempdir().unwrap();
    let config_path = dir.path().join("agent.toml");
    std::fs::write(
        &config_path,
        format!(
            "controller = \"greedy\"\ntotal_memory_bytes = 1073741824\nsocket = \"{}\"\njournal = \"{}\"\n[[group]]\nname = \"nrt\"\ncgroup = \"{}\"\nrole = \"non-rt\"\nfloor_mb = 0\n",
            dir.path().join("run/jobs.sock").display(),
            dir.path().join("journal.jsonl").display(),
            unique_name(),
        ),
    )
    .unwrap();
    let output = Command::new(AGENT).arg("--config").arg(&config_path).arg("--log-level").arg("error").output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert!(stderr.contains("does not exist"), "{stderr}");
}

/// The agent's configuration over `groups` (name, cgroup), Greedy within 512 MiB.
fn greedy_config(dir: &Path, groups: &[(&str, &str)]) -> (PathBuf, PathBuf) {
    let config_path = dir.join("agent.toml");
    let journal = dir.join("journal.jsonl");
    let mut text = format!(
        "controller = \"greedy\"\ntotal_memory_bytes = {}\nsocket = \"{}\"\njournal = \"{}\"\n",
        512 * MIB,
        dir.join("run/jobs.sock").display(),
        journal.display()
    );
    for (name, cgroup) in groups {
        text += &format!("[[group]]\nname = \"{name}\"\ncgroup = \"{cgroup}\"\nrole = \"non-rt\"\nfloor_mb = 16\n");
    }
    std::fs::write(&config_path, text).unwrap();
    (config_path, journal)
}

fn spawn_agent(config: &Path, log_level: &str) -> std::process::Child {
    Command::new(AGENT)
        .arg("--config")
        .arg(config)
        .args(["--log-level", log_level])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

#[test]
fn a_managed_group_vanishing_mid_run_is_let_go_of_and_the_agent_runs_on_with_the_rest() {
    let Some(machine) = machine("a_managed_group_vanishing_mid_run_is_let_go_of_and_the_agent_runs_on_with_the_rest") else { return };
    let doomed = GroupGuard::create(&machine);
    let kept = GroupGuard::create(&machine);
    let original = 1024 * MIB;
    machine.backend.set_knob(&kept.group, Knob::Max, Some(original)).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (config, journal) = greedy_config(dir.path(), &[("doomed", doomed.group.as_str()), ("kept", kept.group.as_str())]);
    let mut agent = Worker { child: Some(spawn_agent(&config, "warn")) };
    wait_for_limit(&machine, &kept.group, "the agent to lower the kept group's limit", |l| l.is_some_and(|l| l < original));
    machine.backend.remove(&doomed.group).unwrap();
    std::thread::sleep(Duration::from_secs(1));
    let child = agent.child.as_mut().unwrap();
    assert!(child.try_wait().unwrap().is_none(), "the agent runs on with the kept group");
    assert!(held_limit(&machine, &kept.group).is_some_and(|l| l < original), "and still controls it");
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), nix::sys::signal::Signal::SIGTERM).unwrap();
    let output = agent.child.take().unwrap().wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    let said: Vec<&str> = stderr.lines().filter(|l| l.contains("removed by something else")).collect();
    assert!(said.len() == 1 && said[0].contains("group doomed"), "one warning naming it: {stderr}");
    assert_eq!(machine.backend.knob(&kept.group, Knob::Max).unwrap(), Some(original), "the rest is restored");
    assert!(!journal.exists(), "a complete restore removes the journal");
}

#[test]
fn the_last_managed_group_vanishing_stops_the_agent_with_one_line() {
    let Some(machine) = machine("the_last_managed_group_vanishing_stops_the_agent_with_one_line") else { return };
    let doomed = GroupGuard::create(&machine);
    let original = 1024 * MIB;
    machine.backend.set_knob(&doomed.group, Knob::Max, Some(original)).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (config, journal) = greedy_config(dir.path(), &[("doomed", doomed.group.as_str())]);
    let mut agent = Worker { child: Some(spawn_agent(&config, "error")) };
    wait_for_limit(&machine, &doomed.group, "the agent to lower the group's limit", |l| l.is_some_and(|l| l < original));
    machine.backend.remove(&doomed.group).unwrap();
    let output = agent.child.take().unwrap().wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "one line: {stderr}");
    assert!(stderr.contains("vanished mid-run") && stderr.contains(doomed.group.as_str()), "{stderr}");
    assert!(!journal.exists(), "a complete restore removes the journal");
}
