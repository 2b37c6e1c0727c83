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

use clap::Parser;
use critmem_core::workload::{GroupKind, Pattern as StreamPattern, Target};
use critmem_core::{load_str, Format, Overrides, Scenario};
use critmem_linux::agent::shutdown_signals;
use critmem_linux::cgroup::{open_backend, GroupPath};
use critmem_linux::layout::{detect_layout_in, Layout};
use critmem_linux::platform::{ControlLoop, GroupSpec, LinuxPlatform, PlatformOptions};
use critmem_linux::procfs::{Hierarchy, ProcFs};
use critmem_linux::protocol::{JobServer, JobServerConfig, ReportingGroup};
use critmem_linux::workload::signalled;
use critmem_linux::Error;
use critmem_policy::{Controller, GroupRole, Platform};
use serde_json::{json, Value};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

#[derive(Parser, Debug)]
#[command(name = "critmem-linux-run", about = "Runs a critmem scenario on real processes in cgroups and prints a JSON summary")]
struct Args {
    /// Scenario file (.toml or .json) with [[group]]s and [control].
    file: PathBuf,
    /// How long the workers run.
    #[arg(long)]
    duration_s: f64,
    /// Controller in place of the scenario's [control] one (its config is then the defaults
    /// unless --controller-config is given).
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

fn main() {
    let args = Args::parse();
    let signals = shutdown_signals().unwrap_or_else(|e| fail(&e));
    if let Err(message) = run(&args, &signals) {
        fail(&message);
    }
}

fn fail(e: &dyn std::fmt::Display) -> ! {
    let line = e.to_string().split_whitespace().collect::<Vec<_>>().join(" ");
    eprintln!("critmem-linux-run: {line}");
    std::process::exit(2);
}

/// A worker to start for one task.
struct TaskPlan {
    name: String,
    criticality: &'static str,
    group: usize,
    exe: &'static str,
    args: Vec<String>,
}

fn ms_arg(ns: u64) -> String {
    // The workers take whole milliseconds; at least 1.
    (ns.div_ceil(1_000_000).max(1)).to_string()
}

fn load(path: &Path) -> Result<Scenario, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let format = if path.extension().is_some_and(|e| e == "json") { Format::Json } else { Format::Toml };
    load_str(&text, &path.display().to_string(), format, &Overrides::default()).map_err(|e| e.to_string())
}

/// Groups and workers from the scenario; every error names the key.
fn plan(scenario: &Scenario, run_dir: &str) -> Result<(Vec<GroupSpec>, Vec<TaskPlan>), String> {
    let source = &scenario.source_name;
    let Some(memory) = scenario.memory.as_ref().filter(|m| !m.groups.is_empty()) else {
        return Err(format!("{source}: the Linux platform needs [memory] and at least one [[group]] (each task runs in its group's cgroup)"));
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
            return Err(format!("{source}: task[{i}].group: {:?} is not a [[group]]; on Linux every task runs in a managed group", mem.group));
        };
        // Streams over part of the private memory make that part the hot working set; the
        // rest is cold data the worker writes once and verifies at exit.
        let private_pages = u64::from(mem.private_pages);
        let hot_pages = mem
            .streams
            .iter()
            .filter(|s| s.target == Target::Private)
            .map(|s| match &s.pattern {
                StreamPattern::Sweep { offset, span, .. } | StreamPattern::Random { offset, span, .. } | StreamPattern::HotCold { offset, span, .. } => u64::from(*offset) + u64::from(*span),
                StreamPattern::Trace { pages } => pages.iter().max().map_or(0, |&p| u64::from(p) + 1),
            })
            .max()
            .map_or(private_pages, |hot| hot.clamp(1, private_pages.max(1)));
        let to_mib = |pages: u64| (pages * page_bytes).div_ceil(1 << 20);
        let wss_mib = to_mib(hot_pages).max(1);
        let cold_mib = to_mib(private_pages.saturating_sub(hot_pages));
        let random = mem.streams.iter().any(|s| matches!(s.pattern, StreamPattern::Random { .. } | StreamPattern::HotCold { .. }));
        let pattern = if random { "random" } else { "sequential" };
        let seed = (scenario.seed ^ (i as u64 + 1)).to_string();
        let (exe, args) = match groups[group].role {
            GroupRole::SoftRealTime { .. } => {
                let refs: u64 = mem
                    .streams
                    .iter()
                    .map(|s| match &s.pattern {
                        StreamPattern::Sweep { pages, .. } => u64::from(*pages),
                        StreamPattern::Random { refs, .. } | StreamPattern::HotCold { refs, .. } => u64::from(*refs),
                        StreamPattern::Trace { pages } => pages.len() as u64,
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
            GroupRole::NonRealTime => ("critmem-nrt-worker", vec!["--wss-mib".into(), to_mib(private_pages).max(1).to_string(), "--pattern".into(), pattern.into(), "--seed".into(), seed, "--report-ms".into(), "3600000".into()]),
        };
        tasks.push(TaskPlan { name: task.name.clone(), criticality: task.criticality.as_str(), group, exe, args });
    }
    Ok((groups, tasks))
}

/// Worker processes; SIGKILLed and reaped on drop unless stopped.
struct Workers(Vec<(usize, Child)>);

impl Drop for Workers {
    fn drop(&mut self) {
        for (_, child) in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn stop(mut child: Child) -> Value {
    let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), nix::sys::signal::Signal::SIGTERM);
    let mut stdout = String::new();
    if let Some(mut out) = child.stdout.take() {
        let _ = std::io::Read::read_to_string(&mut out, &mut stdout);
    }
    let status = child.wait().ok().and_then(|s| s.code());
    let mut summary: Value = stdout.lines().last().and_then(|l| serde_json::from_str(l).ok()).unwrap_or(json!({}));
    summary["exit_code"] = json!(status);
    summary
}

fn run(args: &Args, signals: &nix::sys::signalfd::SignalFd) -> Result<(), String> {
    if !(args.duration_s.is_finite() && args.duration_s > 0.0) {
        return Err(format!("--duration-s must be a positive number of seconds (got {})", args.duration_s));
    }
    let scenario = load(&args.file)?;
    let run_dir = format!("critmem-run-{}", std::process::id());
    let (specs, tasks) = plan(&scenario, &run_dir)?;
    let (name, config) = match (&args.controller, &scenario.control) {
        (Some(name), _) => (name.clone(), json!({})),
        (None, Some(c)) => (c.controller.clone(), c.config.clone()),
        (None, None) => return Err(format!("{}: no [control] table and no --controller: name a controller", scenario.source_name)),
    };
    let config = match &args.controller_config {
        Some(text) => serde_json::from_str(text).map_err(|e| format!("--controller-config: not a JSON object: {e}"))?,
        None => config,
    };
    let mut controller: Box<dyn Controller + Send> = critmem_policy::make_controller(&name, config).map_err(|e| e.to_string())?;
    let interval_ns = scenario.control.as_ref().filter(|_| args.controller.is_none()).map_or(controller.interval_ns(), |c| c.interval.0);
    let memory = scenario.memory.as_ref().expect("plan checked [memory]");
    let total_memory_bytes = u64::from(memory.total_frames) * memory.page_bytes;

    let layout = detect_layout_in(Path::new("/proc")).map_err(|e| e.to_string())?;
    if !nix::unistd::geteuid().is_root() {
        let root = match &layout {
            Layout::V2 { root } => root.clone(),
            Layout::Hybrid { memory_root, .. } => memory_root.clone(),
        };
        return Err(Error::NotRoot { path: root }.to_string());
    }
    let backend = open_backend(&layout).map_err(|e| e.to_string())?;
    let backend_name = backend.name().to_owned();
    let workers_dir = match &args.workers_dir {
        Some(d) => d.clone(),
        None => std::env::current_exe().map_err(|e| e.to_string())?.parent().map(Path::to_path_buf).unwrap_or_default(),
    };
    for t in &tasks {
        let exe = workers_dir.join(t.exe);
        if !exe.is_file() {
            return Err(format!("worker {} not found in {}: run scripts/setup.sh (it installs the workers into .venv/bin)", t.exe, workers_dir.display()));
        }
    }
    let state_dir = tempfile::Builder::new().prefix("critmem-run-").tempdir().map_err(|e| format!("temporary directory: {e}"))?;
    let socket = state_dir.path().join("jobs.sock");
    let server = JobServer::bind(JobServerConfig {
        socket_path: socket.clone(),
        socket_gid: None,
        groups: specs.iter().map(|s| ReportingGroup { name: s.name.clone(), cgroup: s.path.to_string() }).collect(),
        hierarchy: Hierarchy::for_layout(&layout),
        proc: ProcFs::new("/proc".into()),
        max_connections: 64,
    })
    .map_err(|e| e.to_string())?;
    let options = PlatformOptions {
        total_memory_bytes,
        dry_run: false,
        journal_path: Some(state_dir.path().join("journal.jsonl")),
        job_server: Some(server),
        proc_root: "/proc".into(),
    };
    let group_names: Vec<String> = specs.iter().map(|s| s.name.clone()).collect();
    let mut platform = LinuxPlatform::open(backend, specs, options).map_err(|e| e.to_string())?;
    let outcome = drive(args, &mut platform, controller.as_mut(), interval_ns, &tasks, &workers_dir, &socket, signals);
    let counts: Vec<_> = (0..group_names.len()).map(|g| platform.job_counts(g).clone()).collect();
    let stats = platform.stats().clone();
    let restore = platform.restore(Duration::from_secs(30)).map_err(|e| e.to_string())?;
    let (worker_summaries, control, timeline, final_stall, elapsed_s) = outcome?;
    if !restore.failures.is_empty() {
        return Err(format!("could not restore everything: {}", restore.failures.join("; ")));
    }

    let task_rows: Vec<Value> = tasks
        .iter()
        .zip(&worker_summaries)
        .map(|(t, w)| {
            let get = |k: &str| w.get(k).and_then(Value::as_u64).unwrap_or(0);
            let ms = |k: &str| w.get(k).and_then(Value::as_u64).map(|ns| ns as f64 / 1e6);
            let (completed, dropped, hits) = (get("jobs"), get("dropped"), get("deadline_hits"));
            let is_srt = t.exe == "critmem-srt-worker";
            let released = completed + dropped;
            json!({
                "name": t.name,
                "criticality": t.criticality,
                "cpu": null,
                "group": group_names[t.group],
                "worker": t.exe,
                "jobs": if is_srt { json!(released) } else { json!(null) },
                "completed": if is_srt { json!(completed) } else { json!(null) },
                "deadline_misses": if is_srt { json!(get("deadline_misses") + dropped) } else { json!(null) },
                "dropped": if is_srt { json!(dropped) } else { json!(null) },
                "hit_ratio": if is_srt && released > 0 { json!(hits as f64 / released as f64) } else { json!(null) },
                "max_response_ms": if is_srt { json!(ms("max_response_ns")) } else { json!(null) },
                "mean_response_ms": if is_srt { json!(ms("mean_response_ns")) } else { json!(null) },
                "max_tardiness_ms": if is_srt { json!(ms("max_tardiness_ns")) } else { json!(null) },
                "work_units": w.get("work_units"),
                "work_units_per_s": w.get("work_units_per_s"),
                "checksum_failures": get("checksum_failures"),
                "exit_code": w.get("exit_code"),
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
                "jobs_dropped": counts[g].dropped,
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
            "restored_files": restore.restored.len(),
            "removed_dirs": restore.removed_dirs.len(),
            "timeline": timeline,
        },
    });
    let mut out = std::io::stdout().lock();
    writeln!(out, "{summary}").map_err(|e| format!("stdout: {e}"))
}

type Outcome = (Vec<Value>, (u64, u64, u64), Vec<Value>, Vec<critmem_policy::StallTotals>, f64);

#[allow(clippy::too_many_arguments)]
fn drive(
    args: &Args,
    platform: &mut LinuxPlatform,
    controller: &mut (dyn Controller + Send),
    interval_ns: u64,
    tasks: &[TaskPlan],
    workers_dir: &Path,
    socket: &Path,
    signals: &nix::sys::signalfd::SignalFd,
) -> Result<Outcome, String> {
    let mut workers = Workers(Vec::new());
    for (i, t) in tasks.iter().enumerate() {
        // A shell waits for one line and then execs the worker under the same pid, so it is in
        // its group before it allocates (v1 does not move charges with a process).
        let mut command = Command::new("/bin/sh");
        command.arg("-c").arg("read go; exec \"$0\" \"$@\"").arg(workers_dir.join(t.exe)).args(&t.args);
        if t.exe == "critmem-srt-worker" {
            command.arg("--socket").arg(socket);
        }
        let mut child = command.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::inherit()).spawn().map_err(|e| format!("start {}: {e}", t.exe))?;
        let pid = child.id();
        if let Err(e) = platform.add_process(t.group, pid) {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("task[{i}] {}: {e}", t.name));
        }
        let _ = child.stdin.take().map(|mut s| s.write_all(b"go\n"));
        workers.0.push((i, child));
    }
    let mut control = ControlLoop::new(interval_ns);
    let started = Instant::now();
    let run_for = Duration::from_secs_f64(args.duration_s);
    let sample = Duration::from_millis(args.sample_ms.max(1));
    let mut next_sample = Duration::ZERO;
    let mut timeline = Vec::new();
    let result = control.run(
        platform,
        controller,
        || started.elapsed() >= run_for || signalled(signals),
        |p, _, _| {
            let t = started.elapsed();
            if t >= next_sample {
                next_sample = t + sample;
                let groups: Vec<Value> = p
                    .group_specs()
                    .enumerate()
                    .map(|(g, _)| {
                        let (usage, knobs) = p.last_seen(g);
                        json!({ "usage_bytes": usage, "max_bytes": knobs.max_bytes, "high_bytes": knobs.high_bytes })
                    })
                    .collect();
                timeline.push(json!({ "t_ms": t.as_secs_f64() * 1e3, "groups": groups }));
            }
        },
    );
    let elapsed_s = started.elapsed().as_secs_f64();
    let final_obs = platform.observe();
    let mut summaries = vec![json!({}); tasks.len()];
    for (i, child) in std::mem::take(&mut workers.0) {
        summaries[i] = stop(child);
    }
    result.map_err(|e| e.to_string())?;
    let final_stall = final_obs.map_err(|e| e.to_string())?.groups.iter().map(|g| g.stall).collect();
    let cost = control.stats.summary();
    Ok((summaries, (cost.ticks, cost.mean_ns, cost.p99_ns), timeline, final_stall, elapsed_s))
}
