//! Runs a scenario file on the real machine: one cgroup per `[[group]]` (created under
//! `critmem-run-<pid>/`, removed at the end), one shipped worker process per task
//! (`critmem-srt-worker` for soft real-time groups, `critmem-nrt-worker` for the others),
//! the scenario's controller (or `--controller`) ticking at its interval for `--duration-s`;
//! then everything is stopped and restored and one JSON object is printed on stdout, with
//! the simulator's summary fields where they mean the same thing. `critmem run FILE
//! --platform linux` calls this. Errors: one line on stderr, exit code 2.
//!
//! How a task becomes a worker: `period_ms`, `deadline_ms` and the WCET (`wcet_ms`/`exec`'s
//! largest value) become the worker's period, deadline and per-job compute; `private_mb`
//! its memory, of which the part its streams address (`offset_mb` + `span_mb`) is the hot
//! working set and the rest cold data (`--cold-mib`); per job it verifies as many pages as the task's streams reference
//! (`refs`, or a sweep's pages), or the whole working set; random or hot/cold streams make
//! it walk randomly, sweeps sequentially.
//!
//! A task with `command = [...]` runs that program instead (directly, no shell; a name without
//! `/` is looked up on `PATH`, a relative path from the current directory) in its group's
//! cgroup, with its output on stderr and the environment `CRITMEM_JOB_SOCKET`,
//! `CRITMEM_GROUP`, `CRITMEM_TASK`, `CRITMEM_PERIOD_NS`, `CRITMEM_DEADLINE_NS`,
//! `CRITMEM_WCET_NS` and `CRITMEM_SEED`. With `reports_jobs = true` it reports its jobs through
//! a job client and its group's job counts are its own. At the end it gets SIGTERM, then
//! SIGKILL after a grace period, and whatever it left in its cgroup is killed. The run ends at
//! `--duration-s` or when every task's process has exited, whichever is first.

use clap::Parser;
use critmem_core::workload::{GroupKind, Pattern as StreamPattern, Target};
use critmem_core::{load_str, Format, Overrides, Scenario};
use critmem_linux::agent::shutdown_signals;
use critmem_linux::cgroup::GroupPath;
use critmem_linux::clock::{Clock, SharedClock};
use critmem_linux::journal::{Journal, SharedJournalDir};
use critmem_linux::layout::Layout;
use critmem_linux::platform::{GroupSpec, LinuxPlatform};
use critmem_linux::session::{JobSocket, Session, SessionBuilder, SessionPlan};
use critmem_linux::workload::signalled;
use critmem_policy::{Controller, GroupRole, Platform, StallInputs};
use nix::sys::signal::Signal;
use nix::unistd::Pid;
use serde_json::{json, Value};
use std::io::Write;
use std::os::fd::AsFd;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

#[derive(Parser, Debug)]
#[command(name = "critmem-linux-run", about = "Runs a critmem scenario on real processes in cgroups and prints a JSON summary")]
struct Args {
    /// Scenario file (.toml or .json) with [[group]]s, and [control] unless --controller is given.
    file: PathBuf,
    /// How long the workers run.
    #[arg(long, value_parser = critmem_linux::parse_seconds)]
    duration_s: Duration,
    /// Controller in place of the scenario's [control] one: its config is then the defaults
    /// unless --controller-config is given, and it ticks at its own interval, not the
    /// scenario's interval_ms. SARA always ticks at its config's interval_ns (its l_intv).
    #[arg(long)]
    controller: Option<String>,
    /// The controller's parameters as a JSON object.
    #[arg(long)]
    controller_config: Option<String>,
    /// Timeline sampling period.
    #[arg(long, default_value_t = 100)]
    sample_ms: u64,
    /// Where the worker binaries are (default: beside this program).
    #[arg(long)]
    workers_dir: Option<PathBuf>,
}

/// The hidden first argument with which this program starts each task's process.
const EXEC_AFTER_GO: &str = "--exec-after-go";

fn main() {
    let argv: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if argv.get(1).is_some_and(|a| a == EXEC_AFTER_GO) {
        exec_after_go(&argv[2..]);
    }
    let args: Args = critmem_linux::parse_args();
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    tracing_subscriber::fmt().with_writer(std::io::stderr).with_ansi(ansi).with_max_level(tracing::Level::WARN).with_target(false).init();
    let signals = shutdown_signals().unwrap_or_else(|e| fail(&e));
    if let Err(message) = run(&args, &signals) {
        fail(&message);
    }
}

/// How every task process starts: it waits for one line on stdin, sent once its pid is in its
/// group's cgroup (v1 does not move charges with a process, so it must not allocate before),
/// unblocks the signals this program blocks for its signalfd (a mask survives exec, and a
/// command with SIGTERM blocked could never be asked to stop), and execs the program under the
/// same pid.
fn exec_after_go(argv: &[std::ffi::OsString]) -> ! {
    let Some(program) = argv.first() else { fail(&format!("{EXEC_AFTER_GO} needs a program")) };
    // A run killed with SIGKILL cannot stop its tasks: they die with it (the signal survives
    // exec), and the next run removes its cgroups.
    let _ = nix::sys::prctl::set_pdeathsig(Signal::SIGKILL);
    let mut go = String::new();
    let _ = std::io::stdin().read_line(&mut go);
    if go.trim_end() != "go" {
        // The run ended before it placed this process (or before the line above took effect).
        std::process::exit(1);
    }
    let _ = nix::sys::signal::sigprocmask(nix::sys::signal::SigmaskHow::SIG_SETMASK, Some(&nix::sys::signal::SigSet::empty()), None);
    let error = Command::new(program).args(&argv[1..]).exec();
    eprintln!("critmem-linux-run: cannot run {}: {error}", Path::new(program).display());
    std::process::exit(127);
}

fn fail(e: &dyn std::fmt::Display) -> ! {
    eprintln!("critmem-linux-run: {}", critmem_linux::one_line(&e.to_string()));
    std::process::exit(2);
}

fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// What runs for one task.
enum Launch {
    /// A shipped worker (`critmem-srt-worker` or `critmem-nrt-worker`) beside this program.
    Worker { exe: &'static str, args: Vec<String> },
    /// The scenario's `command`; `program` is resolved before anything is set up.
    Command { argv: Vec<String>, program: PathBuf, reports_jobs: bool },
}

/// A process to start for one task.
struct TaskPlan {
    name: String,
    criticality: &'static str,
    group: usize,
    launch: Launch,
    period_ns: u64,
    deadline_ns: u64,
    wcet_ns: u64,
    seed: u64,
}

impl TaskPlan {
    fn label(&self) -> &str {
        match &self.launch {
            Launch::Worker { exe, .. } => exe,
            Launch::Command { argv, .. } => &argv[0],
        }
    }
    fn is_srt_worker(&self) -> bool {
        matches!(self.launch, Launch::Worker { exe: "critmem-srt-worker", .. })
    }
    fn reports_jobs(&self) -> bool {
        match self.launch {
            Launch::Worker { exe, .. } => exe == "critmem-srt-worker",
            Launch::Command { reports_jobs, .. } => reports_jobs,
        }
    }
}

/// A program as `execvp` would find it: a path with a `/` as given, else the first executable
/// file of that name on `PATH`.
fn resolve_program(program: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let executable = |p: &Path| p.is_file() && p.metadata().is_ok_and(|m| m.permissions().mode() & 0o111 != 0);
    if program.contains('/') {
        let path = PathBuf::from(program);
        return executable(&path).then_some(path);
    }
    std::env::split_paths(&std::env::var_os("PATH")?).map(|dir| dir.join(program)).find(|p| executable(p))
}

fn ms_arg(ns: u64) -> String {
    // The workers take whole milliseconds; at least 1.
    (ns.div_ceil(1_000_000).max(1)).to_string()
}

fn load(path: &Path) -> Result<Scenario, String> {
    let text = critmem_linux::read_input_file(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let format = if path.extension().is_some_and(|e| e == "json") { Format::Json } else { Format::Toml };
    load_str(&text, &path.display().to_string(), format, &Overrides::default()).map_err(|e| e.to_string())
}

/// Groups and workers from the scenario; every error names the key.
fn plan(scenario: &Scenario, run_dir: &str) -> Result<(Vec<GroupSpec>, Vec<TaskPlan>), String> {
    let source = &scenario.source_name;
    let Some(memory) = scenario.memory.as_ref().filter(|m| !m.groups.is_empty()) else {
        return Err(format!(
            "{source}: the Linux platform needs [memory] and at least one [[group]] (each task runs in its group's cgroup)"
        ));
    };
    let page_bytes = memory.page_bytes;
    let mut groups = Vec::new();
    for g in &memory.groups {
        let role = match g.kind {
            GroupKind::SoftRealTime { bcet } => GroupRole::SoftRealTime { deadline_ns: g.deadline.0, bcet_ns: bcet.0 },
            GroupKind::NonRealTime => GroupRole::NonRealTime,
        };
        let path = GroupPath::new(&format!("{run_dir}/{}", g.name)).map_err(|e| format!("{source}: group {:?}: {e}", g.name))?;
        groups.push(GroupSpec { name: g.name.clone(), path, role, floor_bytes: g.floor_pages * page_bytes, create: true });
    }
    let mut tasks = Vec::new();
    for (i, (task, mem)) in scenario.tasks.iter().zip(&scenario.task_memory).enumerate() {
        let Some(mem) = mem else { return Err(format!("{source}: task[{i}]: no memory declaration")) };
        let Some(group) = memory.groups.iter().position(|g| g.name == mem.group) else {
            return Err(format!(
                "{source}: task[{i}].group: {:?} is not a [[group]]; on Linux every task runs in a managed group",
                mem.group
            ));
        };
        // Streams over part of the private memory make that part the hot working set; the
        // rest is cold data the worker writes once and verifies at exit.
        let private_pages = u64::from(mem.private_pages);
        let hot_pages = mem
            .streams
            .iter()
            .filter(|s| s.target == Target::Private)
            .map(|s| match &s.pattern {
                StreamPattern::Sweep { offset, span, .. }
                | StreamPattern::Random { offset, span, .. }
                | StreamPattern::HotCold { offset, span, .. } => u64::from(*offset) + u64::from(*span),
                StreamPattern::Trace { pages } => pages.iter().max().map_or(0, |&p| u64::from(p) + 1),
                StreamPattern::Discard { .. } => 0,
            })
            .max()
            .map_or(private_pages, |hot| hot.clamp(1, private_pages.max(1)));
        let to_mib = |pages: u64| (pages * page_bytes).div_ceil(1 << 20);
        let wss_mib = to_mib(hot_pages).max(1);
        let cold_mib = to_mib(private_pages.saturating_sub(hot_pages));
        let random = mem.streams.iter().any(|s| matches!(s.pattern, StreamPattern::Random { .. } | StreamPattern::HotCold { .. }));
        let pattern = if random { "random" } else { "sequential" };
        let seed = scenario.seed ^ (i as u64 + 1);
        let mut plan = TaskPlan {
            name: task.name.clone(),
            criticality: task.criticality.as_str(),
            group,
            launch: Launch::Worker { exe: "", args: Vec::new() },
            period_ns: task.period.0,
            deadline_ns: task.deadline.0,
            wcet_ns: task.exec.wcet().0,
            seed,
        };
        if let Some(command) = &scenario.task_commands[i] {
            let program = resolve_program(&command.argv[0]).ok_or_else(|| {
                format!(
                    "{source}: task[{i}].command: cannot run {:?}: no such executable file{}",
                    command.argv[0],
                    if command.argv[0].contains('/') { "" } else { " on PATH" }
                )
            })?;
            plan.launch = Launch::Command { argv: command.argv.clone(), program, reports_jobs: command.reports_jobs };
            tasks.push(plan);
            continue;
        }
        let seed = seed.to_string();
        let (exe, args) = match groups[group].role {
            GroupRole::SoftRealTime { .. } => {
                let refs: u64 = mem
                    .streams
                    .iter()
                    .map(|s| match &s.pattern {
                        StreamPattern::Sweep { pages, .. } => u64::from(*pages),
                        StreamPattern::Random { refs, .. } | StreamPattern::HotCold { refs, .. } => u64::from(*refs),
                        StreamPattern::Trace { pages } => pages.len() as u64,
                        StreamPattern::Discard { .. } => 0,
                    } * u64::from(s.passes.max(1)))
                    .sum();
                let mut args = vec![
                    "--period-ms".into(),
                    ms_arg(task.period.0),
                    "--deadline-ms".into(),
                    ms_arg(task.deadline.0),
                    "--compute-us".into(),
                    (task.exec.wcet().0 / 1000).to_string(),
                    "--wss-mib".into(),
                    wss_mib.to_string(),
                    "--pattern".into(),
                    pattern.into(),
                    "--seed".into(),
                    seed,
                ];
                if cold_mib > 0 {
                    args.extend(["--cold-mib".into(), cold_mib.to_string()]);
                }
                if refs > 0 {
                    args.extend(["--pages-per-job".into(), refs.to_string()]);
                }
                ("critmem-srt-worker", args)
            }
            GroupRole::NonRealTime => (
                "critmem-nrt-worker",
                vec![
                    "--wss-mib".into(),
                    to_mib(private_pages).max(1).to_string(),
                    "--pattern".into(),
                    pattern.into(),
                    "--seed".into(),
                    seed,
                    "--report-ms".into(),
                    "3600000".into(),
                ],
            ),
        };
        plan.launch = Launch::Worker { exe, args };
        tasks.push(plan);
    }
    for (g, spec) in groups.iter().enumerate() {
        if matches!(spec.role, GroupRole::SoftRealTime { .. }) && !tasks.iter().any(|t| t.group == g && t.reports_jobs()) {
            tracing::warn!(group = %spec.name, "soft real-time group has no task that reports jobs (set reports_jobs = true on its command): its controller sees no job releases or deadlines");
        }
    }
    Ok((groups, tasks))
}

/// A task's running process and what became of it.
struct Running {
    task: usize,
    child: Child,
    /// Seconds into the run at which it exited by itself, if it did.
    exited_at_s: Option<f64>,
}

/// Task processes; their process groups are SIGKILLed and reaped on drop unless stopped.
struct Processes(Vec<Running>);

impl Drop for Processes {
    fn drop(&mut self) {
        for r in &mut self.0 {
            kill_process_group(&r.child, Signal::SIGKILL);
            let _ = r.child.wait();
        }
    }
}

/// Each task runs as the leader of its own process group, so a signal reaches its children.
fn kill_process_group(child: &Child, signal: Signal) {
    let _ = nix::sys::signal::killpg(Pid::from_raw(child.id() as i32), signal);
}

fn exit_fields(status: Option<std::process::ExitStatus>) -> (Value, Value) {
    use std::os::unix::process::ExitStatusExt;
    match status {
        Some(s) => (json!(s.code()), json!(s.signal())),
        None => (Value::Null, Value::Null),
    }
}

/// How long a task has between SIGTERM and SIGKILL at the end of the run.
const STOP_GRACE: Duration = Duration::from_secs(5);
/// How often stopping tasks are looked at (and their groups rescued).
const STOP_POLL_NS: u64 = 10_000_000;

/// Stops every task and returns its summary. SIGTERM first: a shipped worker prints its
/// summary and exits, a command's whole process group is asked to. While they exit the
/// platform's out-of-memory rescue keeps running (the controller no longer ticks): a process
/// waiting at its group's limit cannot act on SIGTERM until the limit lets it through. What is
/// still running after [`STOP_GRACE`] is SIGKILLed with its process group.
fn stop_tasks(platform: &mut LinuxPlatform, clock: &dyn Clock, tasks: &[TaskPlan], mut running: Vec<Running>) -> Vec<(usize, Value)> {
    // Read stdout beside the wait, so a worker never blocks on a full pipe.
    let readers: Vec<_> = running
        .iter_mut()
        .map(|r| {
            r.child.stdout.take().map(|mut out| {
                std::thread::spawn(move || {
                    let mut text = String::new();
                    let _ = std::io::Read::read_to_string(&mut out, &mut text);
                    text
                })
            })
        })
        .collect();
    // A task that already exited was reaped: its pid (and process group) may be someone else's now.
    for r in running.iter().filter(|r| r.exited_at_s.is_none()) {
        match tasks[r.task].launch {
            Launch::Worker { .. } => {
                let _ = nix::sys::signal::kill(Pid::from_raw(r.child.id() as i32), Signal::SIGTERM);
            }
            Launch::Command { .. } => kill_process_group(&r.child, Signal::SIGTERM),
        }
    }
    let since_ns = clock.now_ns();
    let mut exited: Vec<bool> = vec![false; running.len()];
    loop {
        for (r, done) in running.iter_mut().zip(&mut exited) {
            *done = *done || !matches!(r.child.try_wait(), Ok(None));
        }
        if exited.iter().all(|&d| d) || u128::from(clock.now_ns() - since_ns) >= STOP_GRACE.as_nanos() {
            break;
        }
        let raised = platform.rescue_waiting_groups();
        if raised > 0 {
            tracing::info!(groups = raised, "raised a limit so a stopping task can exit");
        }
        clock.sleep_until_ns(clock.now_ns() + STOP_POLL_NS);
    }
    for (r, _) in running.iter().zip(&exited).filter(|(_, &done)| !done) {
        tracing::warn!(task = %tasks[r.task].name, grace_s = STOP_GRACE.as_secs(), "task did not exit after SIGTERM: killed");
        kill_process_group(&r.child, Signal::SIGKILL);
    }
    running
        .into_iter()
        .zip(readers)
        .zip(exited)
        .map(|((mut r, reader), exited)| {
            let status = r.child.wait().ok();
            let stdout = reader.and_then(|h| h.join().ok()).unwrap_or_default();
            let (code, signal) = exit_fields(status);
            let summary = match tasks[r.task].launch {
                Launch::Worker { .. } => {
                    let mut summary: Value = stdout.lines().last().and_then(|l| serde_json::from_str(l).ok()).unwrap_or(json!({}));
                    (summary["exit_code"], summary["exit_signal"]) = (code, signal);
                    summary["exited_early_s"] = json!(r.exited_at_s);
                    summary
                }
                Launch::Command { .. } => {
                    let stopped_by = match (r.exited_at_s, exited) {
                        (Some(_), _) => Value::Null,
                        (None, true) => json!("SIGTERM"),
                        (None, false) => json!("SIGKILL"),
                    };
                    json!({ "exit_code": code, "exit_signal": signal, "exited_early_s": r.exited_at_s, "stopped_by": stopped_by })
                }
            };
            (r.task, summary)
        })
        .collect()
}

/// Kills whatever is still in the run's own cgroups (what commands forked and left behind), so
/// the groups can be removed; returns how many processes it killed.
fn kill_leftovers(session: &Session) -> usize {
    let platform = session.platform();
    let groups = platform.group_specs().count();
    // Only processes in our own cgroups get here. The last directory of a group is its
    // cgroup2 one (v2, or the unified half on the hybrid layout).
    let cgroup2_dirs: Vec<PathBuf> = platform.group_specs().filter_map(|g| platform.backend().group_dirs(&g.path).pop()).collect();
    kill_until_empty(
        session.clock().as_ref(),
        || (0..groups).flat_map(|g| platform.pids(g).unwrap_or_default()).collect(),
        || cgroup2_dirs.iter().filter(|d| !kill_cgroup2(d)).count() == 0,
    )
}

/// Kills every process in the cgroup2 directory `dir` and below at once, by writing its
/// `cgroup.kill` (Linux 5.14+): no pid is read, so none can be reused in between. Returns
/// whether it could.
fn kill_cgroup2(dir: &Path) -> bool {
    let file = dir.join("cgroup.kill");
    file.exists() && critmem_linux::cgroup::write_value(&file, "1").is_ok()
}

/// Until the processes `list` names are gone or 5 s have passed: kills them with `kill_all`
/// where that works, else (and for what is still there after a second: a process outside
/// the cgroup2 group `kill_all` covers) SIGKILLs each pid listed, the fallback because a pid
/// can be reused between the read and the kill. Returns how many processes it saw.
fn kill_until_empty(clock: &dyn Clock, mut list: impl FnMut() -> Vec<u32>, mut kill_all: impl FnMut() -> bool) -> usize {
    let mut killed = std::collections::BTreeSet::new();
    let started_ns = clock.now_ns();
    loop {
        let pids = list();
        let elapsed_ns = clock.now_ns() - started_ns;
        if pids.is_empty() || elapsed_ns >= 5_000_000_000 {
            return killed.len();
        }
        let by_cgroup = elapsed_ns < 1_000_000_000 && kill_all();
        for pid in pids {
            if !by_cgroup {
                let _ = nix::sys::signal::kill(Pid::from_raw(pid as i32), Signal::SIGKILL);
            }
            killed.insert(pid);
        }
        clock.sleep_until_ns(clock.now_ns() + 20_000_000);
    }
}

/// Where runs keep their restore journals (root-only; a tmpfs, like the cgroups it describes).
/// Not the agent's /run/critmem: systemd removes that when the agent's unit stops.
const JOURNAL_DIR: &str = "/run/critmem-linux-run";

/// A run's own directory for its job socket, `critmem-run-<pid>.d` beside its journal, so that
/// the next run removes it when this one is killed. Locked while the run lives; removed on drop.
struct StateDir {
    path: PathBuf,
    _lock: nix::fcntl::Flock<std::fs::File>,
}

impl StateDir {
    fn create(dir: &Path, run_dir: &str) -> Result<Self, String> {
        use std::os::unix::fs::{DirBuilderExt, MetadataExt};
        let path = dir.join(format!("{run_dir}.d"));
        let err = |what: &str, e: &dyn std::fmt::Display| format!("{}: {what}: {e}", path.display());
        // A dead run of the same pid left it (killed before the recovery could see its journal).
        if path.exists() {
            std::fs::remove_dir_all(&path).map_err(|e| err("remove a dead run's directory", &e))?;
        }
        std::fs::DirBuilder::new().mode(0o700).create(&path).map_err(|e| err("create", &e))?;
        let file = std::fs::File::open(&path).map_err(|e| err("open", &e))?;
        let opened_ino = file.metadata().map_err(|e| err("stat", &e))?.ino();
        let lock = nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusiveNonblock).map_err(|(_, e)| err("lock", &e))?;
        // Another run starting at this instant may have taken it for a dead run's and removed it.
        if std::fs::metadata(&path).map(|m| m.ino()).ok() != Some(opened_ino) {
            return Err(err("lock", &"removed by another run starting at the same time; start again"));
        }
        Ok(StateDir { path, _lock: lock })
    }

    /// Removes a run's directory unless that run still holds its lock.
    fn remove_if_dead(path: &Path) {
        let Ok(file) = std::fs::File::open(path) else { return };
        if let Ok(lock) = nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusiveNonblock) {
            if let Err(e) = std::fs::remove_dir_all(path) {
                tracing::warn!(path = %path.display(), error = %e, "could not remove a dead run's socket directory");
            }
            drop(lock);
        }
    }
}

impl Drop for StateDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// Puts back what runs that died without restoring (SIGKILL, power loss) left: their journal
/// in `dir` is unlocked. Their tasks, and what those forked, are killed first (they are this
/// program's own, in the dead run's own cgroups), then the journal is restored and removed.
fn recover_crashed_runs(dir: &Path, layout: &Layout, clock: &SharedClock) -> Result<(), String> {
    let entries = std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        // critmem-run-<pid>.journal and critmem-run-<pid>.d, a run's journal and socket directory.
        let Some((pid, kind)) = name.strip_prefix("critmem-run-").and_then(|n| n.split_once('.')).filter(|(p, _)| p.parse::<u32>().is_ok())
        else {
            continue;
        };
        let path = entry.path();
        match kind {
            "d" => {
                StateDir::remove_if_dead(&path);
                continue;
            }
            "journal" => {}
            _ => continue,
        }
        let Ok(file) = std::fs::File::open(&path) else { continue };
        // A live run holds the lock on its journal.
        match nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusiveNonblock) {
            Ok(lock) => drop(lock),
            Err(_) => continue,
        }
        let killed = kill_run_cgroups(layout, clock.as_ref(), &format!("critmem-run-{pid}"));
        // What cannot be put back stays journaled for the next run to try; this one goes on.
        let report = match Journal::open(&path).and_then(|(journal, report)| journal.restore_all().map(|_| report.unwrap_or_default())) {
            Ok(report) => report,
            Err(e) => {
                tracing::warn!(pid, error = %e, "a previous run ended without restoring (killed?), and putting back what it changed failed");
                continue;
            }
        };
        tracing::warn!(
            pid,
            killed_processes = killed,
            restored_files = report.restored.len(),
            removed_groups = report.removed_dirs.len(),
            "a previous run ended without restoring (killed?): put back what it changed"
        );
    }
    Ok(())
}

/// SIGKILLs every process in the cgroups under `name` (in every tree of `layout`) until they
/// are empty or 5 s have passed; returns how many it signalled.
fn kill_run_cgroups(layout: &Layout, clock: &dyn Clock, name: &str) -> usize {
    let (roots, cgroup2_root): (Vec<&Path>, &Path) = match layout {
        Layout::V2 { root } => (vec![root], root),
        Layout::Hybrid { memory_root, unified_root } => (vec![memory_root, unified_root], unified_root),
    };
    let run_cgroup2 = cgroup2_root.join(name);
    kill_until_empty(
        clock,
        || {
            let mut pids = Vec::new();
            for root in &roots {
                let mut dirs = vec![root.join(name)];
                while let Some(d) = dirs.pop() {
                    let Ok(entries) = std::fs::read_dir(&d) else { continue };
                    dirs.extend(entries.flatten().filter(|e| e.file_type().is_ok_and(|t| t.is_dir())).map(|e| e.path()));
                    let procs = d.join("cgroup.procs");
                    let text = std::fs::read_to_string(&procs).unwrap_or_default();
                    pids.extend(critmem_linux::cgroup::parse_pids(&text, &procs.display().to_string()).unwrap_or_default());
                }
            }
            pids
        },
        || kill_cgroup2(&run_cgroup2),
    )
}

/// Most timeline samples a run keeps (at the default 100 ms, about 3.6 hours of them).
const MAX_TIMELINE_SAMPLES: usize = 1 << 17;

fn run(args: &Args, signals: &nix::sys::signalfd::SignalFd) -> Result<(), String> {
    let scenario = load(&args.file)?;
    let run_dir = format!("critmem-run-{}", std::process::id());
    let (specs, tasks) = plan(&scenario, &run_dir)?;
    let (name, config) = match (&args.controller, &scenario.control) {
        (Some(name), _) => (name.clone(), json!({})),
        (None, Some(c)) => (c.controller.clone(), c.config.clone()),
        (None, None) => return Err(format!("{}: no [control] table and no --controller: name a controller", scenario.source_name)),
    };
    let config = match &args.controller_config {
        Some(text) => match serde_json::from_str(text).map_err(|e| format!("--controller-config: not valid JSON: {e}"))? {
            // serde would read an array as the fields in order, `[]` as all defaults.
            object @ Value::Object(_) => object,
            other => return Err(format!("--controller-config: not a JSON object (got {})", json_kind(&other))),
        },
        None => config,
    };
    let memory = scenario.memory.as_ref().expect("plan checked [memory]");
    let parsed = critmem_policy::ControllerConfig::parse(&name, config).map_err(|e| e.to_string())?;
    let soft_rt: Vec<&str> =
        memory.groups.iter().filter(|g| matches!(g.kind, GroupKind::SoftRealTime { .. })).map(|g| g.name.as_str()).collect();
    parsed.check_group_names(&soft_rt).map_err(|e| e.to_string())?;
    let controller: Box<dyn Controller + Send> = parsed.build().map_err(|e| e.to_string())?;
    // SARA's tick is its l_intv, so it follows the config in use (the scenario's [control]
    // interval_ms is already in that config); others take the scenario's.
    let interval_ns = match scenario.control.as_ref().filter(|_| args.controller.is_none()) {
        Some(c) if !parsed.ticks_are_its_interval() => c.interval.0,
        _ => controller.interval_ns(),
    };
    let total_memory_bytes = u64::from(memory.total_frames) * memory.page_bytes;

    let host = SessionBuilder::new().connect().map_err(|e| e.to_string())?;
    let backend_name = host.backend().name().to_owned();
    let workers_dir = match &args.workers_dir {
        Some(d) => d.clone(),
        None => std::env::current_exe().map_err(|e| e.to_string())?.parent().map(Path::to_path_buf).unwrap_or_default(),
    };
    for t in &tasks {
        if let Launch::Worker { exe, .. } = t.launch {
            if !workers_dir.join(exe).is_file() {
                return Err(format!(
                    "worker {exe} not found in {}: run scripts/setup.sh (it installs the workers into .venv/bin)",
                    workers_dir.display()
                ));
            }
        }
    }
    // Dropped last (declared first): removes the directory if this run is the last one out.
    let shared_dir = SharedJournalDir::enter(Path::new(JOURNAL_DIR)).map_err(|e| e.to_string())?;
    let journal_dir = shared_dir.path();
    recover_crashed_runs(journal_dir, host.layout(), host.clock())?;
    let state_dir = StateDir::create(journal_dir, &run_dir)?;
    let socket = state_dir.path.join("jobs.sock");
    let group_names: Vec<String> = specs.iter().map(|s| s.name.clone()).collect();
    let mut session = host
        .start(SessionPlan {
            groups: specs,
            total_memory_bytes,
            // Not in the temporary directory: after a crash the next run must find it.
            journal: Some(journal_dir.join(format!("{run_dir}.journal"))),
            job_socket: Some(JobSocket { path: socket.clone(), gid: None }),
            controller,
            interval_ns,
            triggers: None,
        })
        .map_err(|e| e.to_string())?;
    let outcome = drive(args, &mut session, &tasks, &workers_dir, &socket, signals);
    // Before restoring, which would move them to the root cgroup and leave them running.
    let leftovers_killed = kill_leftovers(&session);
    let end_ns = session.run_ended_ns();
    let elapsed_s = session.run_elapsed_ns() as f64 / 1e9;
    let end = session.finish(Duration::from_secs(30)).map_err(|e| e.to_string())?;
    let (worker_summaries, timeline, final_stall) = outcome?;
    end.restored().map_err(|e| e.to_string())?;
    let (counts, stats) = (&end.job_counts, &end.stats);
    let control = end.loop_stats.summary();
    let control = (control.ticks, control.mean_ns, control.p99_ns);
    let restore = &end.restore;

    let task_rows: Vec<Value> = tasks
        .iter()
        .zip(&worker_summaries)
        .map(|(t, w)| {
            let get = |k: &str| w.get(k).and_then(Value::as_u64).unwrap_or(0);
            let ms = |k: &str| w.get(k).and_then(Value::as_u64).map(|ns| ns as f64 / 1e6);
            // A shipped soft real-time worker counts its own jobs; a reporting command's jobs are
            // its group's, when it is the only reporter there.
            let sole_reporter = t.reports_jobs() && tasks.iter().filter(|o| o.group == t.group && o.reports_jobs()).count() == 1;
            let jobs: Option<(u64, u64, u64, u64, u64)> = if t.is_srt_worker() {
                let (completed, dropped) = (get("jobs"), get("dropped"));
                Some((completed + dropped, completed, dropped, get("deadline_hits"), get("deadline_misses")))
            } else if sole_reporter {
                let c = &counts[t.group];
                Some((c.released, c.completed, c.dropped, c.deadline_hits, c.deadline_misses + c.overdue(end_ns)))
            } else {
                None
            };
            let is_srt = t.is_srt_worker();
            let (command, exit_code, exit_signal) = match &t.launch {
                Launch::Command { argv, .. } => (json!(argv), w["exit_code"].clone(), w["exit_signal"].clone()),
                Launch::Worker { .. } => (Value::Null, w["exit_code"].clone(), w["exit_signal"].clone()),
            };
            let worker = match t.launch {
                Launch::Worker { exe, .. } => json!(exe),
                Launch::Command { .. } => Value::Null,
            };
            json!({
                "name": t.name,
                "criticality": t.criticality,
                "cpu": null,
                "group": group_names[t.group],
                "worker": worker,
                "command": command,
                "reports_jobs": t.reports_jobs(),
                "jobs": jobs.map(|j| j.0),
                "completed": jobs.map(|j| j.1),
                "deadline_misses": jobs.map(|j| j.4 + j.2),
                "dropped": jobs.map(|j| j.2),
                "hit_ratio": jobs.filter(|j| j.0 > 0).map(|j| j.3 as f64 / j.0 as f64),
                "max_response_ms": if is_srt { json!(ms("max_response_ns")) } else { json!(null) },
                "mean_response_ms": if is_srt { json!(ms("mean_response_ns")) } else { json!(null) },
                "max_tardiness_ms": if is_srt { json!(ms("max_tardiness_ns")) } else { json!(null) },
                "work_units": w.get("work_units"),
                "work_units_per_s": w.get("work_units_per_s"),
                "checksum_failures": if matches!(t.launch, Launch::Worker { .. }) { json!(get("checksum_failures")) } else { json!(null) },
                "exit_code": exit_code,
                "exit_signal": exit_signal,
                "exited_early_s": w["exited_early_s"],
                "stopped_by": w.get("stopped_by"),
            })
        })
        .collect();
    let groups: Vec<Value> = group_names
        .iter()
        .enumerate()
        .map(|(g, name)| {
            let s = final_stall[g];
            json!({
                "name": name,
                "memory_some_us": s.memory_some_us,
                "memory_full_us": s.memory_full_us,
                "io_some_us": s.io_some_us,
                "io_full_us": s.io_full_us,
                "jobs_reported": counts[g].released,
                "jobs_completed": counts[g].completed,
                "jobs_dropped": counts[g].dropped,
                "deadline_hits": counts[g].deadline_hits,
                "deadline_misses": counts[g].deadline_misses + counts[g].overdue(end_ns),
            })
        })
        .collect();
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let summary = json!({
        "scenario": scenario.source_name,
        "platform": "linux",
        "scheduler": "linux",
        "cpus": cpus,
        "horizon_ms": elapsed_s * 1e3,
        "seed": scenario.seed,
        "controller": name,
        "backend": backend_name,
        "tasks": task_rows,
        "memory": { "total_bytes": total_memory_bytes, "groups": groups },
        "control": {
            "interval_ms": interval_ns as f64 / 1e6,
            "ticks": control.0,
            "tick_cost_mean_us": control.1 as f64 / 1e3,
            "tick_cost_p99_us": control.2 as f64 / 1e3,
            "writes_ok": stats.writes_ok,
            "writes_failed": stats.writes_failed,
            "oom_rescues": stats.oom_rescues,
            "drops_requested": stats.drops_requested,
            "leftover_processes_killed": leftovers_killed,
            "restored_files": restore.restored.len(),
            "removed_dirs": restore.removed_dirs.len(),
            "timeline": timeline,
        },
    });
    let mut out = std::io::stdout().lock();
    writeln!(out, "{summary}").map_err(|e| format!("stdout: {e}"))
}

type Outcome = (Vec<Value>, Vec<Value>, Vec<critmem_policy::StallTotals>);

fn drive(
    args: &Args,
    session: &mut Session,
    tasks: &[TaskPlan],
    workers_dir: &Path,
    socket: &Path,
    signals: &nix::sys::signalfd::SignalFd,
) -> Result<Outcome, String> {
    let group_names: Vec<String> = session.platform().group_specs().map(|g| g.name.clone()).collect();
    let this_exe = std::env::current_exe().map_err(|e| format!("this program's path: {e}"))?;
    let mut processes = Processes(Vec::new());
    for (i, t) in tasks.iter().enumerate() {
        let mut command = Command::new(&this_exe);
        command.arg(EXEC_AFTER_GO);
        match &t.launch {
            Launch::Worker { exe, args } => {
                command.arg(workers_dir.join(exe)).args(args).stdout(Stdio::piped());
                if *exe == "critmem-srt-worker" {
                    command.arg("--socket").arg(socket);
                }
            }
            Launch::Command { argv, program, .. } => {
                // Its output goes to stderr: stdout carries only the JSON summary.
                let stderr = std::io::stderr().as_fd().try_clone_to_owned().map_err(|e| format!("duplicate stderr: {e}"))?;
                command.arg(program).args(&argv[1..]).stdout(Stdio::from(stderr));
                command
                    .env("CRITMEM_JOB_SOCKET", socket)
                    .env("CRITMEM_GROUP", &group_names[t.group])
                    .env("CRITMEM_TASK", &t.name)
                    .env("CRITMEM_PERIOD_NS", t.period_ns.to_string())
                    .env("CRITMEM_DEADLINE_NS", t.deadline_ns.to_string())
                    .env("CRITMEM_WCET_NS", t.wcet_ns.to_string())
                    .env("CRITMEM_SEED", t.seed.to_string());
            }
        }
        let mut child = command
            .stdin(Stdio::piped())
            .stderr(Stdio::inherit())
            .process_group(0)
            .spawn()
            .map_err(|e| format!("task[{i}] {}: start {}: {e}", t.name, t.label()))?;
        let pid = child.id();
        if let Err(e) = session.platform().add_process(t.group, pid) {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("task[{i}] {}: {e}", t.name));
        }
        let _ = child.stdin.take().map(|mut s| s.write_all(b"go\n"));
        processes.0.push(Running { task: i, child, exited_at_s: None });
    }
    let run_for_ns = args.duration_s.as_nanos();
    let mut sample_ns = args.sample_ms.max(1) * 1_000_000;
    // Exited tasks are looked for at the sampling period the run started with.
    let exit_check_every_ns = sample_ns;
    let mut next_sample_ns = 0;
    let mut next_exit_check_ns = 0;
    let mut timeline = Vec::new();
    let all_exited = std::cell::Cell::new(false);
    let result = session.run(
        |elapsed_ns| u128::from(elapsed_ns) >= run_for_ns || all_exited.get() || signalled(signals),
        |p, _, _, t_ns| {
            if t_ns >= next_sample_ns {
                next_sample_ns = t_ns + sample_ns;
                let groups: Vec<Value> = (0..p.group_specs().count())
                    .map(|g| {
                        // Fresh even where the controller does not read usage every tick.
                        let (seen, knobs) = p.last_seen(g);
                        let usage = p.usage_now(g).unwrap_or(seen);
                        json!({ "usage_bytes": usage, "max_bytes": knobs.max_bytes, "high_bytes": knobs.high_bytes })
                    })
                    .collect();
                timeline.push(json!({ "t_ms": t_ns as f64 / 1e6, "groups": groups }));
                if timeline.len() >= MAX_TIMELINE_SAMPLES {
                    // A long run keeps every other sample and samples half as often from now on.
                    critmem_core::control::keep_every_other(&mut timeline);
                    sample_ns *= 2;
                }
            }
            // On its own clock: a thinned timeline must not make a finished run wait.
            if t_ns >= next_exit_check_ns {
                next_exit_check_ns = t_ns + exit_check_every_ns;
                let t_s = t_ns as f64 / 1e9;
                for r in processes.0.iter_mut().filter(|r| r.exited_at_s.is_none()) {
                    if let Ok(Some(status)) = r.child.try_wait() {
                        r.exited_at_s = Some(t_s);
                        tracing::warn!(task = %tasks[r.task].name, %status, at_s = t_s, "task process exited before the end of the run");
                    }
                }
                all_exited.set(processes.0.iter().all(|r| r.exited_at_s.is_some()));
            }
        },
    );
    let platform = session.platform_mut();
    // The report's stall totals are fresh for every group, not only the ones the controller read.
    platform.set_stall_inputs(|_| StallInputs::ALL);
    platform.set_usage_inputs(|_| true);
    let final_obs = platform.observe();
    let mut summaries = vec![json!({}); tasks.len()];
    let clock = session.clock().clone();
    for (i, summary) in stop_tasks(session.platform_mut(), clock.as_ref(), tasks, std::mem::take(&mut processes.0)) {
        summaries[i] = summary;
    }
    result.map_err(|e| e.to_string())?;
    let final_stall = final_obs.map_err(|e| e.to_string())?.groups.iter().map(|g| g.stall).collect();
    Ok((summaries, timeline, final_stall))
}
