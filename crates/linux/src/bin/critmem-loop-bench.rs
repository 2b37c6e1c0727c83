//! Control-loop cost on the real machine: creates `--groups` cgroups of its own (half soft
//! real-time, half non-real-time), optionally runs a throughput worker in each, ticks a
//! controller at `--interval-ms` for `--seconds`, prints the per-tick and per-group cost as
//! JSON, and removes everything it created. Its journal is in `/run/critmem-loop-bench/`, so a
//! run killed with SIGKILL is undone by the next one. Needs root. A benchmark, not a test: it
//! asserts nothing.
//!
//! With `--burst-at-s`, the groups stay idle until then (the loop's idle CPU is measured from
//! 1 s to the burst), and then a reader in the first group streams a file larger than that
//! group's limit through its page cache, a memory stall in bursts of reclaim. The reaction is
//! the time from the burst's start to the first action the controller applies to that group,
//! and the stall the group had by then; the run ends there.

use clap::Parser;
use critmem_linux::agent::shutdown_signals;
use critmem_linux::cgroup::GroupPath;
use critmem_linux::journal::SharedJournalDir;
use critmem_linux::launch::{command_after_go, exec_after_go, EXEC_AFTER_GO};
use critmem_linux::platform::{GroupSpec, LinuxPlatform};
use critmem_linux::session::{SessionBuilder, SessionPlan, TriggerSpec};
use critmem_linux::workload::signalled;
use critmem_policy::{make_controller, GroupRole, StallInputs};
use std::io::Write;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

#[derive(Parser, Debug)]
#[command(name = "critmem-loop-bench", about = "Measures the critmem control loop's cost per tick and per group")]
struct Args {
    #[arg(long, default_value_t = 4)]
    groups: usize,
    #[arg(long, default_value_t = 5)]
    interval_ms: u64,
    #[arg(long, default_value = "10", value_parser = critmem_linux::parse_seconds)]
    seconds: Duration,
    #[arg(long, default_value = "sara")]
    controller: String,
    /// Run a critmem-nrt-worker of this many MiB in every group (0: idle groups).
    #[arg(long, default_value_t = 0)]
    worker_mib: u64,
    /// Soft real-time groups among the groups (default: every other one).
    #[arg(long)]
    srt_groups: Option<usize>,
    /// Read every pressure file every tick, not only those the controller reads.
    #[arg(long)]
    read_all_stall: bool,
    /// Read every group's usage every tick, also where the controller does not read it and
    /// the kernel notifies OOMs.
    #[arg(long)]
    read_all_usage: bool,
    /// Switch between reading usage only where the controller does (A) and every group's usage
    /// every tick (B) each 100 ticks, and report both means and their ratio from this one run
    /// (the first 100 ticks, the warm-up, in neither). Both poll the OOM notifiers. The
    /// run's other figures then mix both modes.
    #[arg(long, conflicts_with = "read_all_usage")]
    alternate_usage_reads: bool,
    /// The controller's parameters as a JSON object, merged over the defaults this tool sets.
    #[arg(long)]
    controller_config: Option<String>,
    /// Arm a PSI trigger on each group's memory.pressure: `some` stall of this many µs within
    /// `--trigger-window-us` wakes the loop (0: timer only).
    #[arg(long, default_value_t = 0)]
    trigger_stall_us: u64,
    #[arg(long, default_value_t = 500_000)]
    trigger_window_us: u64,
    /// With triggers: rest up to this long after a quiet tick (0: tick at the interval always).
    #[arg(long, default_value_t = 0)]
    idle_interval_ms: u64,
    /// Start a memory stall burst in the first group this many seconds into the run (see above).
    #[arg(long, value_parser = critmem_linux::parse_seconds, conflicts_with = "alternate_usage_reads")]
    burst_at_s: Option<Duration>,
    /// The burst's file, MiB: streamed over and over through the first group's page cache.
    #[arg(long, default_value_t = 256)]
    burst_file_mib: u64,
}

fn main() {
    let argv: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if argv.get(1).is_some_and(|a| a == EXEC_AFTER_GO) {
        exec_after_go(&argv[2..], "critmem-loop-bench");
    }
    let args: Args = critmem_linux::parse_args();
    // Warnings (PSI triggers unavailable, writes refused) on stderr; the figures on stdout.
    tracing_subscriber::fmt().with_writer(std::io::stderr).with_max_level(tracing::Level::WARN).with_target(false).init();
    // Everything that can fail on its own comes before the platform creates groups.
    // SARA's interval and senpai's tick are the loop's interval.
    let interval_ns = args.interval_ms * 1_000_000;
    let mut config = match args.controller.as_str() {
        "sara" => serde_json::json!({ "interval_ns": interval_ns }),
        "senpai" => serde_json::json!({ "tick_ns": interval_ns }),
        _ => serde_json::json!({}),
    };
    if let Some(text) = &args.controller_config {
        let extra: serde_json::Map<String, serde_json::Value> =
            serde_json::from_str(text).unwrap_or_else(|e| fail(&format!("--controller-config: {e}")));
        config.as_object_mut().expect("an object").extend(extra);
    }
    if args.idle_interval_ms > 0 && args.trigger_stall_us == 0 {
        fail(&"--idle-interval-ms needs --trigger-stall-us: nothing else would wake the loop from a rest");
    }
    let burst_file = args.burst_at_s.map(|_| BurstFile::create(args.burst_file_mib << 20).unwrap_or_else(|e| fail(&e)));
    // A Python class ("file.py:Class" from the working directory) runs in a process of its own.
    critmem_policy::register_external_controllers(Box::new(critmem_linux::external::PythonControllers::in_dir(std::path::Path::new("."))));
    let controller = make_controller(&args.controller, config).unwrap_or_else(|e| fail(&e));
    let worker_exe =
        (args.worker_mib > 0).then(|| std::env::current_exe().unwrap_or_else(|e| fail(&e)).with_file_name("critmem-nrt-worker"));
    let signals = shutdown_signals().unwrap_or_else(|e| fail(&e));
    let host = SessionBuilder::new().connect().unwrap_or_else(|e| fail(&e));
    let proc_root = host.proc_root().to_owned();
    // One journal directory for every run, so that the next run restores what a killed one
    // changed and removes its groups (a per-run directory would be forgotten).
    let shared_dir = SharedJournalDir::enter(Path::new(JOURNAL_DIR)).unwrap_or_else(|e| fail(&e));
    let dir = shared_dir.path();
    let specs: Vec<GroupSpec> = (0..args.groups)
        .map(|i| GroupSpec {
            name: format!("g{i}"),
            path: GroupPath::new(&format!("critmem-bench-{}-{i}", std::process::id())).unwrap_or_else(|e| fail(&e)),
            role: if args.srt_groups.map_or(i % 2 == 0, |n| i < n) {
                GroupRole::SoftRealTime { deadline_ns: 20_000_000, bcet_ns: 2_000_000 }
            } else {
                GroupRole::NonRealTime
            },
            floor_bytes: 16 << 20,
            create: true,
        })
        .collect();
    let reads_usage: Vec<(GroupRole, bool)> = specs.iter().map(|g| (g.role.clone(), controller.reads_usage(&g.role))).collect();
    let mut session = host
        .start(SessionPlan {
            groups: specs,
            total_memory_bytes: (args.groups as u64) * (args.worker_mib.max(64) << 20),
            journal: Some(dir.join("journal.jsonl")),
            job_socket: None,
            controller,
            interval_ns,
            initial_actions: Vec::new(),
            triggers: (args.trigger_stall_us > 0).then_some(TriggerSpec {
                stall_us: args.trigger_stall_us,
                window_us: args.trigger_window_us,
                idle_interval_ns: args.idle_interval_ms * 1_000_000,
            }),
        })
        .unwrap_or_else(|e| fail(&e));
    if let Ok(fd) = std::os::fd::AsFd::as_fd(&signals).try_clone_to_owned() {
        session.wake_on(fd);
    }
    // The reader waits in the first group from the start, blocked on its standard input, so
    // the burst needs nothing from the loop's thread.
    let mut burst = match &burst_file {
        Some(file) => match Burst::spawn(file, &session) {
            Ok(burst) => Some(burst),
            Err(e) => {
                let _ = session.finish(Duration::from_secs(30));
                fail(&e);
            }
        },
        None => None,
    };
    let mut workers: Vec<Child> = Vec::new();
    if let Some(exe) = worker_exe {
        for group in 0..args.groups {
            let spawned = Command::new("/bin/sh")
                .arg("-c")
                .arg("read go; exec \"$0\" \"$@\"")
                .arg(&exe)
                .args(["--wss-mib", &args.worker_mib.to_string(), "--report-ms", "100000"])
                .stdin(Stdio::piped())
                .stdout(Stdio::null())
                .spawn();
            let mut child = match spawned {
                Ok(child) => child,
                Err(e) => {
                    stop_workers(workers);
                    let _ = session.finish(Duration::from_secs(30));
                    fail(&e);
                }
            };
            if let Err(e) = session.platform().add_process(group, child.id()) {
                let _ = child.kill();
                eprintln!("critmem-loop-bench: {e}");
                break;
            }
            let _ = child.stdin.as_mut().map(|s| s.write_all(b"go\n"));
            workers.push(child);
        }
    }
    if args.read_all_stall {
        session.platform_mut().set_stall_inputs(|_| StallInputs::ALL);
    }
    if args.read_all_usage {
        session.platform_mut().set_usage_inputs(|_| true);
    }
    let cpu_before_ns = process_cpu_ns(&proc_root);
    let run = args.seconds;
    let clock = session.clock().clone();
    // Set by the burst thread, read by the loop's: when the burst started (0: not yet).
    let burst_started_ns = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let (cancel_burst, cancelled) = std::sync::mpsc::channel::<()>();
    let burst_thread =
        burst.as_mut().map(|b| b.start_later(args.burst_at_s.unwrap_or_default(), &proc_root, &clock, &burst_started_ns, cancelled));
    // (ns from the burst to the first action on its group, that group's stall by then in µs).
    let reaction: std::cell::Cell<Option<(u64, u64)>> = std::cell::Cell::new(None);
    let burst_pressure = burst.as_ref().map(|b| b.pressure_file.clone());
    // Per mode (0: usage as the controller reads it, 1: all usage every tick): ticks, cost.
    let mut by_mode = [(0u64, 0u64); 2];
    let (mut mode, mut cost_seen_ns) = (0usize, 0u64);
    let result = session.run(
        |elapsed_ns| u128::from(elapsed_ns) >= run.as_nanos() || signalled(&signals) || reaction.get().is_some(),
        |p, applied, stats, _| {
            let burst_ns = burst_started_ns.load(std::sync::atomic::Ordering::Acquire);
            if burst_ns > 0 && reaction.get().is_none() && applied.iter().any(|a| a.group() == 0) {
                let stall_us = burst_pressure.as_deref().map_or(0, some_total_us);
                let before_us = burst.as_ref().map_or(0, |b| b.stall_at_start_us.load(std::sync::atomic::Ordering::Acquire));
                reaction.set(Some((clock.now_ns().saturating_sub(burst_ns), stall_us.saturating_sub(before_us))));
            }
            if !args.alternate_usage_reads {
                return;
            }
            if stats.ticks > 100 {
                by_mode[mode].0 += 1;
                by_mode[mode].1 += stats.cost_sum_ns - cost_seen_ns;
            }
            cost_seen_ns = stats.cost_sum_ns;
            if stats.ticks % 100 == 0 {
                mode = 1 - mode;
                p.set_usage_inputs(|role| mode == 1 || reads_usage.iter().any(|(r, reads)| r == role && *reads));
            }
        },
    );
    // A run stopped before the burst has none.
    drop(cancel_burst);
    let burst_figures = burst_thread.map(|t| t.join().unwrap_or_default());
    if let Some(b) = burst.as_mut() {
        b.stop();
    }
    let elapsed_s = session.run_elapsed_ns() as f64 / 1e9;
    let loop_cpu_ns = process_cpu_ns(&proc_root).saturating_sub(cpu_before_ns);
    let platform = session.platform();
    let srt_groups = platform.group_specs().filter(|g| matches!(g.role, GroupRole::SoftRealTime { .. })).count();
    let platform_stats = platform.stats().clone();
    // A burst run measures the loop against the other loops, not against bare reads.
    let baseline_run = if args.burst_at_s.is_some() { Duration::ZERO } else { run.min(Duration::from_secs(5)) };
    let baseline = bare_reads(platform, args.interval_ms, baseline_run);
    let idle_cpu_share_pct = idle_loop_cpu_share_pct(&proc_root, args.interval_ms, baseline_run);
    stop_workers(workers);
    let end = session.finish(Duration::from_secs(30));
    // Removes the directory unless another run is in it.
    drop(shared_dir);
    if let Err(e) = result {
        fail(&e);
    }
    let end = end.unwrap_or_else(|e| fail(&e));
    let loop_stats = &end.loop_stats;
    let s = loop_stats.summary();
    let groups = args.groups.max(1) as u64;
    let summary = serde_json::json!({
        "controller": args.controller,
        "groups": args.groups,
        "srt_groups": srt_groups,
        "read_all_stall": args.read_all_stall,
        "read_all_usage": args.read_all_usage,
        "usage_reads_skipped": platform_stats.usage_reads_skipped,
        "oom_notifications": platform_stats.oom_notifications,
        "interval_ms": args.interval_ms,
        "worker_mib": args.worker_mib,
        "ticks": s.ticks,
        "overruns": loop_stats.overruns,
        "tick_cost_mean_us": s.mean_ns as f64 / 1e3,
        "tick_cost_p50_us": s.p50_ns as f64 / 1e3,
        "tick_cost_p99_us": s.p99_ns as f64 / 1e3,
        "tick_cost_max_us": s.max_ns as f64 / 1e3,
        "tick_cpu_mean_us": s.cpu_mean_ns as f64 / 1e3,
        "write_cpu_ms": platform_stats.write_cpu_ns as f64 / 1e6,
        "group_cost_mean_us": (s.mean_ns / groups) as f64 / 1e3,
        "loop_share_of_one_core_pct": loop_stats.cost_sum_ns as f64 / 1e9 / elapsed_s * 100.0,
        "process_cpu_share_of_one_core_pct": loop_cpu_ns as f64 / 1e9 / elapsed_s * 100.0,
        "idle_loop_cpu_share_of_one_core_pct": idle_cpu_share_pct,
        "baseline_files_per_tick": baseline.0,
        "baseline_bare_reads_mean_us": baseline.1 as f64 / 1e3,
        "tick_cost_over_bare_reads": s.mean_ns as f64 / baseline.1.max(1) as f64,
    });
    let mut summary = summary;
    summary["trigger_stall_us"] = args.trigger_stall_us.into();
    summary["trigger_window_us"] = args.trigger_window_us.into();
    summary["idle_interval_ms"] = args.idle_interval_ms.into();
    summary["early_wakes"] = loop_stats.early_wakes.into();
    summary["idle_rests"] = loop_stats.idle_rests.into();
    summary["actions_applied"] = loop_stats.actions_applied.into();
    if let Some(figures) = burst_figures {
        summary["burst"] = serde_json::json!({
            "file_mib": args.burst_file_mib,
            "started_at_s": args.burst_at_s.unwrap_or_default().as_secs_f64(),
            "idle_process_cpu_share_of_one_core_pct": figures.idle_cpu_share_pct,
            "idle_seconds": figures.idle_s,
            "reaction_ms": reaction.get().map(|(ns, _)| ns as f64 / 1e6),
            "stall_before_action_ms": reaction.get().map(|(_, us)| us as f64 / 1e3),
        });
    }
    if args.alternate_usage_reads {
        let mean_us = |(ticks, ns): (u64, u64)| ns as f64 / ticks.max(1) as f64 / 1e3;
        let (a, b) = (mean_us(by_mode[0]), mean_us(by_mode[1]));
        summary["alternating"] = serde_json::json!({
            "usage_as_controller_reads_ticks": by_mode[0].0,
            "usage_as_controller_reads_mean_us": a,
            "all_usage_every_tick_ticks": by_mode[1].0,
            "all_usage_every_tick_mean_us": b,
            "ratio": a / b,
            "note": "the run's other figures mix both modes; both modes poll the OOM notifiers",
        });
    }
    println!("{summary}");
}

/// The baseline: the same cgroup files a tick reads (both pressure files, usage and every knob
/// file of every group), opened once and read with one pread each from offset 0, at the same
/// cadence, with nothing parsed or decided. Returns (files per tick, mean ns per tick).
fn bare_reads(platform: &LinuxPlatform, interval_ms: u64, run: Duration) -> (usize, u64) {
    use critmem_linux::cgroup::{Knob, PsiResource};
    use std::os::unix::fs::FileExt;
    let backend = platform.backend();
    let mut files = Vec::new();
    for spec in platform.group_specs() {
        let memory_dir = &backend.group_dirs(&spec.path)[0];
        let usage = ["memory.current", "memory.usage_in_bytes"].iter().map(|n| memory_dir.join(n)).find(|p| p.exists());
        let knobs = Knob::ALL.iter().filter_map(|&k| backend.plan_knob(&spec.path, k, None).ok().flatten().map(|w| w.path));
        let paths = [backend.pressure_file(&spec.path, PsiResource::Memory), backend.pressure_file(&spec.path, PsiResource::Io)]
            .into_iter()
            .chain(usage)
            .chain(knobs);
        files.extend(paths.filter_map(|p| std::fs::File::open(p).ok()));
    }
    let mut buf = [0u8; 512];
    let (mut ticks, mut sum_ns) = (0u64, 0u64);
    let started = Instant::now();
    while started.elapsed() < run {
        let tick = Instant::now();
        for f in &files {
            let _ = std::hint::black_box(f.read_at(&mut buf, 0));
        }
        sum_ns += tick.elapsed().as_nanos() as u64;
        ticks += 1;
        std::thread::sleep(Duration::from_millis(interval_ms).saturating_sub(tick.elapsed()));
    }
    (files.len(), sum_ns / ticks.max(1))
}

/// The floor of any loop at this interval: CPU share (scheduler accounting) of a loop that
/// only sleeps and wakes up.
fn idle_loop_cpu_share_pct(proc_root: &Path, interval_ms: u64, run: Duration) -> f64 {
    let (cpu_before_ns, started) = (process_cpu_ns(proc_root), Instant::now());
    while started.elapsed() < run {
        std::thread::sleep(Duration::from_millis(interval_ms));
    }
    process_cpu_ns(proc_root).saturating_sub(cpu_before_ns) as f64 / 1e9 / started.elapsed().as_secs_f64() * 100.0
}

/// CPU time of every thread of this process (the loop and the knob writer), in nanoseconds,
/// from the scheduler's own accounting: `<proc_root>/self/task/*/schedstat` starts with the
/// time spent on a CPU. This includes what the tick timer cannot see: waking up and going to
/// sleep.
fn process_cpu_ns(proc_root: &Path) -> u64 {
    let Ok(tasks) = std::fs::read_dir(proc_root.join("self/task")) else { return 0 };
    tasks
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("schedstat")).ok())
        .filter_map(|s| s.split_whitespace().next().and_then(|v| v.parse::<u64>().ok()))
        .sum()
}

const JOURNAL_DIR: &str = "/run/critmem-loop-bench";

/// The `some` total (µs) of a pressure file; 0 if unreadable.
fn some_total_us(path: &Path) -> u64 {
    std::fs::read(path).ok().and_then(|text| critmem_linux::psi::parse_totals(&text)).map_or(0, |(some_us, _)| some_us)
}

/// The file a burst streams, on disk (not tmpfs, whose pages would stay charged to whoever
/// wrote them), out of the page cache when the burst starts. Unnamed (O_TMPFILE), so it goes
/// with this process however that ends; the reader opens it through `/proc`.
struct BurstFile {
    /// Held open: the path below names it only while it is.
    _file: std::fs::File,
    path: std::path::PathBuf,
}

impl BurstFile {
    fn create(bytes: u64) -> std::io::Result<Self> {
        use std::os::fd::AsRawFd;
        use std::os::unix::fs::OpenOptionsExt;
        let mut file =
            std::fs::OpenOptions::new().read(true).write(true).mode(0o600).custom_flags(nix::libc::O_TMPFILE).open("/var/tmp")?;
        let chunk = vec![0x5au8; 1 << 20];
        for _ in 0..bytes.div_ceil(chunk.len() as u64) {
            file.write_all(&chunk)?;
        }
        file.sync_all()?;
        // Written pages are charged to this process's group: drop them, so that the reader
        // charges its own group.
        nix::fcntl::posix_fadvise(&file, 0, 0, nix::fcntl::PosixFadviseAdvice::POSIX_FADV_DONTNEED).map_err(std::io::Error::from)?;
        let path = Path::new("/proc").join(std::process::id().to_string()).join("fd").join(file.as_raw_fd().to_string());
        Ok(BurstFile { _file: file, path })
    }
}

/// The reader of a burst, in the first group; its own process group, so that stopping it
/// stops the `cat` it runs too. Started through [`command_after_go`]: it waits for `go` and
/// dies with this process, so a killed run leaves no reader looping in the group.
struct Burst {
    child: Child,
    pressure_file: std::path::PathBuf,
    stall_at_start_us: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

#[derive(Default)]
struct BurstFigures {
    idle_cpu_share_pct: f64,
    idle_s: f64,
}

impl Burst {
    fn spawn(file: &BurstFile, session: &critmem_linux::session::Session) -> critmem_linux::error::Result<Self> {
        use std::os::unix::process::CommandExt;
        let platform = session.platform();
        let group = platform.group_specs().next().expect("at least one group");
        let pressure_file = platform.backend().pressure_file(&group.path, critmem_linux::cgroup::PsiResource::Memory);
        let this_exe = std::env::current_exe().map_err(|e| critmem_linux::error::Error::io("find", Path::new("/proc/self/exe"), e))?;
        let reader =
            [std::ffi::OsStr::new("/bin/sh"), "-c".as_ref(), "while :; do cat \"$0\" >/dev/null; done".as_ref(), file.path.as_os_str()];
        let child = command_after_go(&this_exe, &reader)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .process_group(0)
            .spawn()
            .map_err(|e| critmem_linux::error::Error::io("spawn", Path::new("/bin/sh"), e))?;
        let mut burst = Burst { child, pressure_file, stall_at_start_us: Default::default() };
        if let Err(e) = platform.add_process(0, burst.child.id()) {
            burst.stop();
            return Err(e);
        }
        Ok(burst)
    }

    /// A thread that measures the process's CPU from 1 s into the run to `at`, then starts the
    /// reader and notes when, and the group's stall then. Dropping `cancel`'s sender before
    /// then ends the thread without a burst.
    fn start_later(
        &mut self,
        at: Duration,
        proc_root: &Path,
        clock: &critmem_linux::clock::SharedClock,
        started_ns: &std::sync::Arc<std::sync::atomic::AtomicU64>,
        cancel: std::sync::mpsc::Receiver<()>,
    ) -> std::thread::JoinHandle<BurstFigures> {
        let (stdin, proc_root, clock, started_ns) = (self.child.stdin.take(), proc_root.to_owned(), clock.clone(), started_ns.clone());
        let (pressure_file, stall_at_start_us) = (self.pressure_file.clone(), self.stall_at_start_us.clone());
        let run_start = Instant::now();
        // Whether the wait ran its full time (not cancelled).
        let wait = move |d: Duration| matches!(cancel.recv_timeout(d), Err(std::sync::mpsc::RecvTimeoutError::Timeout));
        std::thread::spawn(move || {
            if !wait(Duration::from_secs(1).min(at / 2)) {
                return BurstFigures::default();
            }
            let (cpu_before_ns, idle_from) = (process_cpu_ns(&proc_root), Instant::now());
            if !wait(at.saturating_sub(run_start.elapsed())) {
                return BurstFigures::default();
            }
            let idle_s = idle_from.elapsed().as_secs_f64();
            let idle_cpu_share_pct = process_cpu_ns(&proc_root).saturating_sub(cpu_before_ns) as f64 / 1e9 / idle_s * 100.0;
            stall_at_start_us.store(some_total_us(&pressure_file), std::sync::atomic::Ordering::Release);
            started_ns.store(clock.now_ns().max(1), std::sync::atomic::Ordering::Release);
            if let Some(mut stdin) = stdin {
                let _ = stdin.write_all(b"go\n");
            }
            BurstFigures { idle_cpu_share_pct, idle_s }
        })
    }

    fn stop(&mut self) {
        let _ = nix::sys::signal::killpg(nix::unistd::Pid::from_raw(self.child.id() as i32), nix::sys::signal::Signal::SIGKILL);
        let _ = self.child.wait();
    }
}

fn stop_workers(workers: Vec<Child>) {
    for mut w in workers {
        let _ = w.kill();
        let _ = w.wait();
    }
}

fn fail(e: &dyn std::fmt::Display) -> ! {
    eprintln!("critmem-loop-bench: {e}");
    std::process::exit(2);
}
