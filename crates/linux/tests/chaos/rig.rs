//! The rig every chaos case runs on, and the invariants every case checks afterwards.

use super::*;

/// The files of a v1 memory group (and of its v2 twin) whose values the agent may change or
/// guard; compared before and after each case. `memory.oom_control` is reduced to its
/// `oom_kill_disable` line (its other lines are counters).
const KNOB_FILES: [&str; 9] = [
    "memory.limit_in_bytes",
    "memory.memsw.limit_in_bytes",
    "memory.soft_limit_in_bytes",
    "memory.swappiness",
    "memory.oom_control",
    "memory.max",
    "memory.high",
    "memory.low",
    "memory.swap.max",
];

/// Budget the controller divides: below the workers' combined data (soft real-time 24 MiB
/// hot + 16 MiB cold, non-real-time 96 MiB), so the swapfile is used.
pub const BUDGET_BYTES: u64 = 100 * MIB;
/// The agent's tick: SARA's 5 ms, stretched by [`time_scale`] on a slower machine.
pub fn agent_interval_ns() -> u64 {
    (5_000_000.0 * time_scale()).round() as u64
}
/// The non-real-time group's limit before the agent starts; restored at the end.
pub const NRT_ORIGINAL_BYTES: u64 = 1024 * MIB;
const SWAPFILE_BYTES: u64 = 256 * MIB;

/// One case's machine: critmem's swapfile, two test-owned groups with a soft real-time and a
/// throughput worker in them, and the agent (SARA) over them.
/// Fields drop in this order after [`Rig`]'s own drop: processes, then groups, then swap.
pub struct Rig<'m> {
    pub agent: Option<Agent>,
    pub srt_worker: Option<Worker>,
    pub nrt_worker: Option<Worker>,
    pub srt: GroupGuard<'m>,
    pub nrt: GroupGuard<'m>,
    swap: Option<SwapGuard>,
    pub machine: &'m Machine,
    pub config_path: PathBuf,
    pub socket: PathBuf,
    pub journal: PathBuf,
    pub metrics: PathBuf,
    pub swap_path: PathBuf,
    before: Vec<(PathBuf, String)>,
    pub dir: tempfile::TempDir,
}

impl Drop for Rig<'_> {
    /// A failed case still leaves nothing behind: the agent is asked to restore (SIGTERM),
    /// killed if it does not exit in time, and whatever its journal still holds is restored.
    fn drop(&mut self) {
        if let Some(mut agent) = self.agent.take() {
            agent.signal(Signal::SIGCONT);
            agent.signal(Signal::SIGTERM);
            let deadline = Instant::now() + Duration::from_secs(15);
            while agent.child.try_wait().ok().flatten().is_none() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        if self.journal.exists() {
            match critmem_linux::journal::Journal::open(&self.journal).and_then(|(journal, _)| journal.restore_all()) {
                Ok(report) if report.failures.is_empty() => {}
                Ok(report) => {
                    let _ = writeln!(std::io::stderr(), "LEAK: chaos rig restore failed: {:?}", report.failures);
                }
                Err(e) => {
                    let _ = writeln!(std::io::stderr(), "LEAK: chaos rig restore failed: {e}");
                }
            }
        }
    }
}

/// The agent process, its stdout and stderr going to files (a full pipe must never stall it).
pub struct Agent {
    pub child: Child,
    pub stdout: PathBuf,
    pub stderr: PathBuf,
}

impl Agent {
    /// Each of the agent's threads by name, with its scheduling policy (`/proc/PID/task/*/stat`
    /// field 41: 0 SCHED_OTHER, 1 SCHED_FIFO).
    pub fn thread_policies(&self) -> Vec<(String, u32)> {
        let tasks = std::fs::read_dir(format!("/proc/{}/task", self.child.id())).unwrap();
        let mut out: Vec<(String, u32)> = tasks
            .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("stat")).ok())
            .filter_map(|stat| {
                let (head, tail) = stat.rsplit_once(") ")?;
                let name = head.split_once(" (")?.1.to_owned();
                // The fields after the name start at field 3.
                let policy = tail.split_whitespace().nth(41 - 3)?.parse().ok()?;
                Some((name, policy))
            })
            .collect();
        out.sort();
        out
    }

    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    pub fn signal(&self, signal: Signal) {
        let _ = kill(Pid::from_raw(self.pid()), signal);
    }

    /// SIGTERM, then its exit code, JSON summary (if it printed one) and stderr.
    pub fn stop(mut self) -> AgentExit {
        self.signal(Signal::SIGTERM);
        self.wait()
    }

    pub fn wait(&mut self) -> AgentExit {
        let status = self.child.wait().unwrap();
        let stdout = std::fs::read_to_string(&self.stdout).unwrap_or_default();
        let stderr = std::fs::read_to_string(&self.stderr).unwrap_or_default();
        let summary = stdout.lines().last().and_then(|l| serde_json::from_str(l).ok());
        AgentExit { code: status.code(), summary, stderr }
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[derive(Debug)]
pub struct AgentExit {
    pub code: Option<i32>,
    pub summary: Option<serde_json::Value>,
    pub stderr: String,
}

impl AgentExit {
    pub fn summary(&self) -> &serde_json::Value {
        self.summary.as_ref().unwrap_or_else(|| panic!("the agent printed no summary (exit {:?}): {}", self.code, self.stderr))
    }

    /// The agent's stderr without its log lines (tracing's timestamped lines): what it says
    /// to a user on exit.
    pub fn error_lines(&self) -> Vec<&str> {
        self.stderr.lines().filter(|l| l.starts_with("critmem-agent")).collect()
    }
}

/// What the workers said when stopped.
pub struct WorkerExits {
    pub srt: serde_json::Value,
    pub nrt: serde_json::Value,
}

impl<'m> Rig<'m> {
    /// Swapfile, groups (the non-real-time one with a limit to restore), workers; no agent yet.
    pub fn new(machine: &'m Machine) -> Rig<'m> {
        let dir = tempfile::tempdir_in(std::env::temp_dir()).unwrap();
        let swap_manager = SwapManager::new(dir.path().join("swap/state.json"), PathBuf::from(PROC_ROOT));
        let swap_path = dir.path().join("swap/critmem.swap");
        let swap = SwapGuard(swap_manager.clone());
        swap_manager.setup(&swap_path, SWAPFILE_BYTES).expect("critmem's swapfile");
        let srt = GroupGuard::create(machine);
        let nrt = GroupGuard::create(machine);
        machine.backend.set_knob(&nrt.group, Knob::Max, Some(NRT_ORIGINAL_BYTES)).unwrap();
        let socket = dir.path().join("run/jobs.sock");
        let journal = dir.path().join("state/journal.jsonl");
        let metrics = dir.path().join("metrics.prom");
        let config_path = dir.path().join("agent.toml");
        let mut rig = Rig {
            agent: None,
            srt_worker: None,
            nrt_worker: None,
            srt,
            nrt,
            swap: Some(swap),
            machine,
            config_path,
            socket,
            journal,
            metrics,
            swap_path,
            before: Vec::new(),
            dir,
        };
        rig.write_config(&rig.journal.clone());
        rig.before = rig.knobs();
        rig
    }

    /// [`Rig::new`] with both workers started and the agent in control, the soft real-time
    /// worker's jobs reaching it.
    pub fn running(machine: &'m Machine) -> Rig<'m> {
        let mut rig = Rig::new(machine);
        rig.start_workers();
        rig.start_agent();
        rig.wait_for_jobs();
        rig
    }

    /// The agent's configuration, with its journal at `journal`.
    pub fn write_config(&self, journal: &Path) {
        self.write_config_with(journal, None);
    }

    /// The configuration with a third group, created by the agent at `extra`, when given.
    pub fn write_config_with(&self, journal: &Path, extra: Option<&str>) {
        let extra = extra.map_or(String::new(), |cgroup| {
            format!("\n[[group]]\nname = \"extra\"\ncgroup = \"{cgroup}\"\nrole = \"non-rt\"\nfloor_mb = 8\ncreate = true\n")
        });
        let config = format!(
            r#"controller = "sara"
total_memory_bytes = {BUDGET_BYTES}
socket = "{socket}"
journal = "{journal}"
metrics_file = "{metrics}"

[controller_config]
interval_ns = {interval_ns}

[[group]]
name = "srt"
cgroup = "{srt}"
role = "soft-rt"
floor_mb = 24
deadline_ms = {period_ms}
bcet_ms = {bcet_ms}

[[group]]
name = "nrt"
cgroup = "{nrt}"
role = "non-rt"
floor_mb = 16
"#,
            interval_ns = agent_interval_ns(),
            period_ms = scaled_ms(20),
            bcet_ms = scaled_ms(4),
            socket = self.socket.display(),
            journal = journal.display(),
            metrics = self.metrics.display(),
            srt = self.srt.group.as_str(),
            nrt = self.nrt.group.as_str(),
        );
        std::fs::write(&self.config_path, config + &extra).unwrap();
    }

    pub fn start_workers(&mut self) {
        self.start_srt_worker();
        let (machine, nrt) = (self.machine, &self.nrt.group);
        self.nrt_worker = Some(Worker::start(
            |pid| machine.backend.move_pid(nrt, pid).unwrap(),
            NRT_WORKER,
            &["--wss-mib", "96", "--pattern", "random", "--report-ms", "1000"],
        ));
    }

    /// The soft real-time worker: period and deadline 20 ms, 2 ms of compute after checking
    /// 1024 random pages of a 24 MiB working set, 16 MiB of cold data checked at exit (times
    /// stretched by [`time_scale`] on a slower machine).
    pub fn start_srt_worker(&mut self) {
        let socket = self.socket.to_string_lossy().into_owned();
        let (period_ms, compute_us) = (scaled_ms(20).to_string(), scaled_ms(2000).to_string());
        let srt_args = [
            "--socket",
            &socket,
            "--period-ms",
            &period_ms,
            "--deadline-ms",
            &period_ms,
            "--compute-us",
            &compute_us,
            "--wss-mib",
            "24",
            "--cold-mib",
            "16",
            "--pages-per-job",
            "1024",
            "--pattern",
            "random",
        ];
        let (machine, srt) = (self.machine, &self.srt.group);
        self.srt_worker = Some(Worker::start(|pid| machine.backend.move_pid(srt, pid).unwrap(), SRT_WORKER, &srt_args));
    }

    /// Starts the agent as its systemd unit runs it (`Nice=-10`, the loop under SCHED_FIFO 10),
    /// with `extra` arguments.
    pub fn spawn_agent(&self, extra: &[&str]) -> Agent {
        static RUN: AtomicUsize = AtomicUsize::new(0);
        let n = RUN.fetch_add(1, Ordering::Relaxed);
        let stdout = self.dir.path().join(format!("agent-{n}.out"));
        let stderr = self.dir.path().join(format!("agent-{n}.err"));
        let child = Command::new("nice")
            .args(["-n", "-10", AGENT, "--config"])
            .arg(&self.config_path)
            .args(["--log-level", "warn", "--realtime-priority", &super::AGENT_REALTIME_PRIORITY.to_string()])
            .args(extra)
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&stdout).unwrap())
            .stderr(std::fs::File::create(&stderr).unwrap())
            .spawn()
            .unwrap();
        Agent { child, stdout, stderr }
    }

    /// Starts the agent and waits until it has lowered the non-real-time group's limit (its
    /// set-up is done and its loop is running).
    pub fn start_agent(&mut self) {
        let agent = self.spawn_agent(&[]);
        self.agent = Some(agent);
        self.wait_for_control();
    }

    pub fn wait_for_control(&mut self) {
        let (machine, nrt) = (self.machine, self.nrt.group.clone());
        let agent = self.agent.as_mut().unwrap();
        wait_until("the agent to take control", Duration::from_secs(20), || {
            if let Ok(Some(status)) = agent.child.try_wait() {
                panic!("the agent exited at start ({status}): {}", std::fs::read_to_string(&agent.stderr).unwrap_or_default());
            }
            held_limit(machine, &nrt).is_some_and(|l| l < NRT_ORIGINAL_BYTES)
        });
    }

    /// The metrics file's value of `name` (a full sample name with labels), if present.
    pub fn metric(&self, name: &str) -> Option<f64> {
        let text = std::fs::read_to_string(&self.metrics).ok()?;
        text.lines().find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
    }

    /// Waits until the agent has counted soft real-time jobs, so the worker is connected.
    pub fn wait_for_jobs(&self) {
        wait_until("the soft real-time worker's jobs to reach the agent", Duration::from_secs(20), || {
            self.metric("critmem_group_jobs_total{group=\"srt\",event=\"released\"}").unwrap_or(0.0) > 0.0
        });
    }

    /// Every watched knob file of both groups: (path, value).
    pub fn knobs(&self) -> Vec<(PathBuf, String)> {
        let mut out = Vec::new();
        for group in [&self.srt.group, &self.nrt.group] {
            for dir in self.machine.backend.group_dirs(group) {
                for name in KNOB_FILES {
                    let path = dir.join(name);
                    if let Ok(text) = std::fs::read_to_string(&path) {
                        let value = if name == "memory.oom_control" {
                            text.lines().find(|l| l.starts_with("oom_kill_disable")).unwrap_or("").to_owned()
                        } else {
                            text.trim().to_owned()
                        };
                        out.push((path, value));
                    }
                }
            }
        }
        out
    }

    /// Files whose value differs from before the case.
    pub fn changed_knobs(&self) -> Vec<String> {
        let now = self.knobs();
        self.before
            .iter()
            .zip(&now)
            .filter(|(a, b)| a != b)
            .map(|((path, was), (_, is))| format!("{}: {was:?} -> {is:?}", path.display()))
            .collect()
    }

    /// OOM kills the kernel counted in either group (v1 `oom_kill`, v2 `memory.events`).
    pub fn oom_kills(&self) -> u64 {
        let mut kills = 0;
        for group in [&self.srt.group, &self.nrt.group] {
            for dir in self.machine.backend.group_dirs(group) {
                for (file, key) in [("memory.oom_control", "oom_kill "), ("memory.events", "oom_kill ")] {
                    if let Ok(text) = std::fs::read_to_string(dir.join(file)) {
                        kills += text.lines().find_map(|l| l.strip_prefix(key)?.trim().parse::<u64>().ok()).unwrap_or(0);
                    }
                }
            }
        }
        kills
    }

    /// SIGTERM to both workers; asserts they were alive, exit 0 and verified every page.
    pub fn stop_workers(&mut self) -> WorkerExits {
        let stop = |worker: Option<Worker>, name: &str| {
            let mut worker = worker.unwrap_or_else(|| panic!("{name} worker was not started"));
            assert!(worker.running(), "the {name} worker died during the case (OOM kill?)");
            let (summary, code) = worker.stop();
            assert_eq!(code, Some(0), "{name} worker: {summary}");
            assert_eq!(summary["checksum_failures"], 0, "{name} worker: {summary}");
            summary
        };
        let srt = stop(self.srt_worker.take(), "soft real-time");
        let nrt = stop(self.nrt_worker.take(), "throughput");
        WorkerExits { srt, nrt }
    }

    /// The shared invariants once the agent has exited: no OOM kill, every watched file as
    /// before, no journal or socket left.
    pub fn check_restored(&self) {
        assert_eq!(self.oom_kills(), 0, "an OOM kill in a managed group");
        let changed = self.changed_knobs();
        assert!(changed.is_empty(), "not restored: {changed:#?}");
        assert!(!self.journal.exists(), "journal left behind: {}", self.journal.display());
        assert!(!self.socket.exists(), "socket left behind: {}", self.socket.display());
    }

    /// Removes critmem's swapfile and checks it is gone from the machine.
    pub fn teardown_swap(&mut self) {
        if let Some(guard) = self.swap.take() {
            guard.0.teardown().unwrap();
            let active = guard.0.active().unwrap();
            assert!(active.iter().all(|s| s.path != self.swap_path), "swapfile still active");
            assert!(!self.swap_path.exists(), "swapfile left behind");
        }
    }

    /// The usual end of a case: workers stopped and checked, the agent stopped and its summary
    /// returned, every invariant checked, the swapfile removed.
    pub fn finish(mut self, record: &mut Record) -> serde_json::Value {
        let workers = self.stop_workers();
        // The workers' last reports reach the agent at its next ticks.
        std::thread::sleep(Duration::from_millis(200).mul_f64(time_scale()));
        let exit = self.agent.take().expect("agent running").stop();
        assert_eq!(exit.code, Some(0), "agent: {}", exit.stderr);
        let summary = exit.summary().clone();
        self.check_restored();
        record.agent(&summary);
        record.workers(&workers);
        self.teardown_swap();
        summary
    }
}

/// One case's figures, written as JSON to `target/tmp/chaos/<case>.json` for
/// `scripts/reliability_report.py`.
pub struct Record {
    pub case: &'static str,
    pub values: serde_json::Map<String, serde_json::Value>,
    started: Instant,
}

impl Record {
    pub fn new(case: &'static str) -> Record {
        Record { case, values: serde_json::Map::new(), started: Instant::now() }
    }

    pub fn set(&mut self, key: &str, value: impl Into<serde_json::Value>) {
        self.values.insert(key.to_owned(), value.into());
    }

    pub fn agent(&mut self, summary: &serde_json::Value) {
        for key in ["ticks", "tick_lateness_p99_ns", "tick_lateness_max_ns", "tick_cost_p99_ns", "overruns", "writes_failed"] {
            self.set(key, summary[key].clone());
        }
        self.set("job_socket", summary["job_socket"].clone());
        if let Some(srt) = summary["groups"].as_array().and_then(|g| g.iter().find(|g| g["name"] == "srt")) {
            self.set("agent_srt_jobs", srt.clone());
        }
    }

    pub fn workers(&mut self, workers: &WorkerExits) {
        for key in ["released", "completed", "dropped", "completed_late", "reports_sent", "reports_unsent", "connects"] {
            self.set(&format!("worker_srt_{key}"), workers.srt[key].clone());
        }
        self.set("worker_nrt_verified_mib_per_s", workers.nrt["verified_mib_per_s"].clone());
    }

    /// Writes the record (passed: the case got here, so every assertion held).
    pub fn write(mut self, faults: u64) {
        self.set("case", self.case);
        self.set("faults_injected", faults);
        self.set("seconds", (self.started.elapsed().as_secs_f64() * 10.0).round() / 10.0);
        self.set("passed", true);
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("chaos");
        std::fs::create_dir_all(&dir).unwrap();
        let text = serde_json::to_string_pretty(&serde_json::Value::Object(self.values)).unwrap();
        let _ = writeln!(std::io::stderr(), "chaos {}: {text}", self.case);
        std::fs::write(dir.join(format!("{}.json", self.case)), text + "\n").unwrap();
    }
}
