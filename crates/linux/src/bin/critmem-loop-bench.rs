//! Control-loop cost on the real machine: creates `--groups` cgroups of its own (half soft
//! real-time, half non-real-time), optionally runs a throughput worker in each, ticks a
//! controller at `--interval-ms` for `--seconds`, prints the per-tick and per-group cost as
//! JSON, and removes everything it created. Its journal is in `/run/critmem-loop-bench/`, so a
//! run killed with SIGKILL is undone by the next one. Needs root. A benchmark, not a test: it
//! asserts nothing.

use clap::Parser;
use critmem_linux::agent::shutdown_signals;
use critmem_linux::cgroup::GroupPath;
use critmem_linux::journal::SharedJournalDir;
use critmem_linux::platform::{GroupSpec, LinuxPlatform};
use critmem_linux::session::{SessionBuilder, SessionPlan};
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
}

fn main() {
    let args: Args = critmem_linux::parse_args();
    // Everything that can fail on its own comes before the platform creates groups.
    let config: serde_json::Value = serde_json::json!({ "interval_ns": args.interval_ms * 1_000_000 });
    let config = if args.controller == "sara" || args.controller == "senpai" { config } else { serde_json::json!({}) };
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
            interval_ns: args.interval_ms * 1_000_000,
            triggers: None,
        })
        .unwrap_or_else(|e| fail(&e));
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
    // Per mode (0: usage as the controller reads it, 1: all usage every tick): ticks, cost.
    let mut by_mode = [(0u64, 0u64); 2];
    let (mut mode, mut cost_seen_ns) = (0usize, 0u64);
    let result = session.run(
        |elapsed_ns| u128::from(elapsed_ns) >= run.as_nanos() || signalled(&signals),
        |p, _, stats, _| {
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
    let elapsed_s = session.run_elapsed_ns() as f64 / 1e9;
    let loop_cpu_ns = process_cpu_ns(&proc_root).saturating_sub(cpu_before_ns);
    let platform = session.platform();
    let srt_groups = platform.group_specs().filter(|g| matches!(g.role, GroupRole::SoftRealTime { .. })).count();
    let platform_stats = platform.stats().clone();
    let baseline = bare_reads(platform, args.interval_ms, run.min(Duration::from_secs(5)));
    let idle_cpu_share_pct = idle_loop_cpu_share_pct(&proc_root, args.interval_ms, run.min(Duration::from_secs(5)));
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
