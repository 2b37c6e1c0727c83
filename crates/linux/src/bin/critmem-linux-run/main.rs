//! Runs a scenario file on the real machine: one cgroup per `[[group]]` (created under
//! `critmem-run-<pid>/`, removed at the end), one shipped worker process per task
//! (`critmem-srt-worker` for soft real-time groups, `critmem-nrt-worker` for the others),
//! the scenario's controller (or `--controller`) ticking at its interval for `--duration-s`;
//! then everything is stopped and restored and one JSON object is printed on stdout
//! ([`critmem_linux::run_summary::RunSummary`]), with the simulator's summary fields where
//! they mean the same thing. `critmem run FILE --platform linux` calls this. Errors: one line
//! on stderr, exit code 2.
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
//! `CRITMEM_WCET_NS`, `CRITMEM_SEED` and `CRITMEM_PROGRESS_FILE`. With `reports_jobs = true` it
//! reports its jobs through a job client and its group's job counts, and jobs one by one, are
//! its own. A throughput program writes its cumulative work to `CRITMEM_PROGRESS_FILE` as
//! `{"work_units": N}` (a temporary file in the same directory renamed over it); the last count
//! becomes its `work_units` (the file lives in the run's own directory, removed at the end, or
//! by the next run after a crash). At the end it gets SIGTERM, then
//! SIGKILL after a grace period, and whatever it left in its cgroup is killed. The run ends at
//! `--duration-s` or when every task's process has exited, whichever is first.

use clap::Parser;
use critmem_core::{load_str, Format, Overrides, Scenario};
use critmem_linux::agent::shutdown_signals;
use critmem_linux::journal::SharedJournalDir;
use critmem_linux::run_summary::{GroupSample, TimelineSample, MAX_JOB_ROWS};
use critmem_linux::session::{JobSocket, Session, SessionBuilder, SessionPlan};
use critmem_linux::workload::signalled;
use critmem_policy::{Controller, ControllerConfig, GroupRole, Platform, StallInputs, StallTotals, TickRequest};
use plan::{plan, Launch, TaskPlan};
use recovery::{recover_crashed_runs, StateDir, JOURNAL_DIR};
use serde_json::{json, Value};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;
use summary::{summarize, Measured};
use tasks::{kill_leftovers, read_progress, start_tasks, stop_tasks, TaskEnd};

mod plan;
mod recovery;
mod summary;
mod tasks;

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
    /// End the run once every task whose jobs are counted has had this many jobs end
    /// (completed or dropped), before --duration-s if that comes first.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    stop_after_jobs: Option<u64>,
    /// How long each task has between SIGTERM and SIGKILL at the end of the run.
    #[arg(long, value_parser = critmem_linux::parse_seconds, default_value = "5")]
    stop_grace_s: Duration,
    /// Where the worker binaries are (default: beside this program).
    #[arg(long)]
    workers_dir: Option<PathBuf>,
}

use critmem_linux::launch::EXEC_AFTER_GO;

fn main() {
    let argv: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if argv.get(1).is_some_and(|a| a == EXEC_AFTER_GO) {
        critmem_linux::launch::exec_after_go(&argv[2..], "critmem-linux-run");
    }
    let args: Args = critmem_linux::parse_args();
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    tracing_subscriber::fmt().with_writer(std::io::stderr).with_ansi(ansi).with_max_level(tracing::Level::WARN).with_target(false).init();
    let signals = shutdown_signals().unwrap_or_else(|e| fail(&e));
    if let Err(message) = run(&args, &signals) {
        fail(&message);
    }
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

fn load(path: &Path) -> Result<Scenario, String> {
    let text = critmem_linux::read_input_file(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let format = if path.extension().is_some_and(|e| e == "json") { Format::Json } else { Format::Toml };
    load_str(&text, &path.display().to_string(), format, &Overrides::default()).map_err(|e| e.to_string())
}

/// Most timeline samples a run keeps (at the default 100 ms, about 3.6 hours of them).
const MAX_TIMELINE_SAMPLES: usize = 1 << 17;

fn run(args: &Args, signals: &nix::sys::signalfd::SignalFd) -> Result<(), String> {
    // Controllers the registry does not hold are Python classes, each in a process of its own.
    critmem_policy::register_external_controllers(Box::new(critmem_linux::external::PythonControllers::for_file(&args.file)));
    let scenario = load(&args.file)?;
    let run_dir = format!("critmem-run-{}", std::process::id());
    let (specs, tasks) = plan(&scenario, &run_dir)?;
    // The groups' declared starting CPU and I/O limits.
    let initial_actions: Vec<critmem_policy::Action> =
        scenario.memory.iter().flat_map(|m| m.groups.iter().enumerate().flat_map(|(id, g)| g.bandwidth.actions(id))).collect();
    let (name, scenario_control) = match (&args.controller, &scenario.control) {
        (Some(name), _) => (name.as_str(), None),
        (None, Some(c)) => (c.config.name(), Some(c)),
        (None, None) => return Err(format!("{}: no [control] table and no --controller: name a controller", scenario.source_name)),
    };
    let replacement = match &args.controller_config {
        Some(text) => match serde_json::from_str(text).map_err(|e| format!("--controller-config: not valid JSON: {e}"))? {
            // serde would read an array as the fields in order, `[]` as all defaults.
            object @ Value::Object(_) => Some(object),
            other => return Err(format!("--controller-config: not a JSON object (got {})", json_kind(&other))),
        },
        None => None,
    };
    // The scenario's [control] interval_ms goes with its config (SARA's already holds it); a
    // config given here replaces that one, and another controller ticks at its own interval.
    let parse = |config: Value| ControllerConfig::parse(name, config).map_err(|e| e.to_string());
    let (mut config, request) = match (replacement, scenario_control) {
        (Some(config), Some(c)) => (parse(config)?, TickRequest::ForReplacedConfig(c.interval.0)),
        (None, Some(c)) => (c.config.clone(), TickRequest::WithConfig(c.interval.0)),
        (replacement, None) => (parse(replacement.unwrap_or_else(|| json!({})))?, TickRequest::OwnInterval),
    };
    let memory = scenario.memory.as_ref().expect("plan checked [memory]");
    let soft_rt: Vec<&str> =
        memory.groups.iter().filter(|g| matches!(g.role, GroupRole::SoftRealTime { .. })).map(|g| g.name.as_str()).collect();
    config.check_group_names(&soft_rt).map_err(|e| e.to_string())?;
    let interval_ns = config.resolve_tick_ns(request).map_err(|e| e.to_string())?;
    let controller: Box<dyn Controller + Send> = config.build();
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
            initial_actions,
        })
        .map_err(|e| e.to_string())?;
    // Jobs one by one for every task counted from its group's reports, within one budget.
    let counted: Vec<usize> = (0..group_names.len()).filter(|&g| summary::sole_reporter(&tasks, g).is_some()).collect();
    session.platform_mut().keep_job_rows(&counted, MAX_JOB_ROWS);
    if args.stop_after_jobs.is_some() && counted.is_empty() {
        return Err("--stop-after-jobs: no task's jobs are counted (no group has exactly one task that reports jobs)".into());
    }
    let outcome = drive(args, &mut session, &tasks, &workers_dir, &socket, &state_dir.path, signals);
    // Before restoring, which would move them to the root cgroup and leave them running.
    let leftovers_killed = kill_leftovers(&session);
    let (end_ns, elapsed_ns) = (session.run_ended_ns(), session.run_elapsed_ns());
    let failure = session.controller_failure();
    let end = session.finish(Duration::from_secs(30)).map_err(|e| e.to_string())?;
    end.restored().map_err(|e| e.to_string())?;
    // Reported once every limit is restored.
    if let Some(failure) = failure {
        return Err(failure);
    }
    let (ends, timeline, final_stall) = outcome?;
    let measured = Measured {
        controller: name.to_string(),
        backend: backend_name,
        total_memory_bytes,
        interval_ns,
        group_names,
        end_ns,
        elapsed_ns,
        ends,
        timeline,
        final_stall,
        leftovers_killed,
    };
    let summary = summarize(&scenario, &tasks, measured, &end);
    let line = serde_json::to_string(&summary).map_err(|e| format!("summary: {e}"))?;
    let mut out = std::io::stdout().lock();
    writeln!(out, "{line}").map_err(|e| format!("stdout: {e}"))
}

/// What the run's loop saw: how each task ended, the timeline, the final PSI totals per group.
type Outcome = (Vec<TaskEnd>, Vec<TimelineSample>, Vec<StallTotals>);

/// Starts the tasks, runs the control loop until the duration is up, every task has exited or
/// a signal came, then stops the tasks.
fn drive(
    args: &Args,
    session: &mut Session,
    tasks: &[TaskPlan],
    workers_dir: &Path,
    socket: &Path,
    state_dir: &Path,
    signals: &nix::sys::signalfd::SignalFd,
) -> Result<Outcome, String> {
    let counted: Vec<usize> =
        (0..session.platform().group_specs().count()).filter(|&g| summary::sole_reporter(tasks, g).is_some()).collect();
    let mut processes = start_tasks(session.platform(), tasks, workers_dir, socket, state_dir)?;
    let run_for_ns = args.duration_s.as_nanos();
    let mut sample_ns = args.sample_ms.max(1) * 1_000_000;
    // Exited tasks are looked for at the sampling period the run started with.
    let exit_check_every_ns = sample_ns;
    let mut next_sample_ns = 0;
    let mut next_exit_check_ns = 0;
    let mut timeline = Vec::new();
    let all_exited = std::cell::Cell::new(false);
    let enough_jobs = std::cell::Cell::new(false);
    let result = session.run(
        |elapsed_ns| u128::from(elapsed_ns) >= run_for_ns || all_exited.get() || enough_jobs.get() || signalled(signals),
        |p, _, _, t_ns| {
            if let Some(n) = args.stop_after_jobs {
                enough_jobs.set(counted.iter().all(|&g| {
                    let c = p.job_counts(g);
                    c.completed + c.dropped >= n
                }));
            }
            if t_ns >= next_sample_ns {
                next_sample_ns = t_ns + sample_ns;
                let groups = (0..p.group_specs().count())
                    .map(|g| {
                        // Fresh even where the controller does not read usage every tick.
                        let (seen, knobs) = p.last_seen(g);
                        let usage_bytes = p.usage_now(g).unwrap_or(seen);
                        let stall = p.last_stall(g);
                        let (cpu_usage_us, bandwidth) = p.last_bandwidth(g);
                        GroupSample {
                            usage_bytes,
                            max_bytes: knobs.max_bytes,
                            high_bytes: knobs.high_bytes,
                            memory_some_us: stall.memory_some_us,
                            io_some_us: stall.io_some_us,
                            cpu_some_us: stall.cpu_some_us,
                            cpu_usage_us,
                            cpu_millicpus: bandwidth.cpu_millicpus,
                            io_read_bytes_per_s: bandwidth.io_read_bytes_per_s,
                            io_write_bytes_per_s: bandwidth.io_write_bytes_per_s,
                        }
                    })
                    .collect();
                let mut work_units = vec![None; tasks.len()];
                for r in &processes.0 {
                    // A malformed file is said once, at the end; here it only has no count.
                    work_units[r.task] = r.progress_file.as_deref().and_then(|path| read_progress(path).ok().flatten());
                }
                timeline.push(TimelineSample { t_ms: t_ns as f64 / 1e6, groups, work_units });
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
    let clock = session.clock().clone();
    let ends = stop_tasks(session.platform_mut(), clock.as_ref(), tasks, processes, args.stop_grace_s);
    result.map_err(|e| e.to_string())?;
    let final_stall = final_obs.map_err(|e| e.to_string())?.groups.iter().map(|g| g.stall).collect();
    Ok((ends, timeline, final_stall))
}
