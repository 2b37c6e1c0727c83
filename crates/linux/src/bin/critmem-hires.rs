//! critmem-hires: a HiRes reservation tree as nested cgroups (`critmem hires` calls this).
//!
//! `apply TREE` creates the tree's cgroups with their limits, starts each subsystem's command
//! inside it, samples every subsystem's CPU time from the kernel's accounting, and at the end
//! (the commands done, `--duration-s`, SIGINT or SIGTERM) stops the commands and removes every
//! cgroup. Its processes die with it, and after `kill -9` the next `apply` or `teardown`
//! removes the cgroups by the journal. Errors: one line on stderr, exit code 2.

use clap::{Parser, Subcommand};
use critmem_core::hires::{Family, Kind, ReservationTree, Spec, SubsystemId, CPU_PARTS};
use critmem_core::scenario::{load_tree_str, TreeFile};
use critmem_linux::agent::shutdown_signals;
use critmem_linux::hires::{apply, teardown, HiresCgroups};
use critmem_linux::hires_bench::{event_latency, page_cost};
use critmem_linux::launch::{command_after_go, exec_after_go, EXEC_AFTER_GO};
use critmem_linux::workload::wait_signal;
use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use serde_json::{json, Value};
use std::io::Write;
use std::os::fd::AsFd;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

#[derive(Parser, Debug)]
#[command(name = "critmem-hires", about = "A HiRes reservation tree as nested cgroups")]
struct Args {
    /// The tree's top cgroup directory in every hierarchy; also names its journal.
    #[arg(long, default_value = "critmem-hires")]
    name: String,
    /// Where the journal of an applied tree is kept (as NAME.journal).
    #[arg(long, default_value = "/run")]
    state_dir: PathBuf,
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Apply TREE, run its commands (and CMD, in --in) inside it, measure, and undo it all.
    Apply {
        tree: PathBuf,
        /// Stop after this many seconds (default: when every command has exited).
        #[arg(long, value_parser = critmem_linux::parse_seconds)]
        duration_s: Option<Duration>,
        /// How often to read each subsystem's CPU time.
        #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u64).range(10..=60_000))]
        sample_ms: u64,
        /// The subsystem CMD runs in (needed when the tree has several).
        #[arg(long = "in", value_name = "SUBSYSTEM")]
        in_subsystem: Option<String>,
        /// Print the summary as JSON.
        #[arg(long)]
        json: bool,
        #[arg(last = true, value_name = "CMD")]
        command: Vec<String>,
    },
    /// Remove the cgroups a killed `apply` left behind.
    Teardown,
    /// Use a CPU until stopped: a CPU-bound workload for trees.
    Burn,
    /// Measure the latency of an event from one thread to another on one CPU (HiRes Fig. 4(a)).
    EventLatency(Sampling),
    /// Measure mapping (with the first write) and unmapping one anonymous page (HiRes Fig. 4(c)).
    PageCost(Sampling),
}

/// Most samples a measurement takes (its samples are kept in memory, 8 bytes each).
const MAX_SAMPLES: u64 = 10_000_000;

/// How many samples a measurement takes.
#[derive(clap::Args, Debug)]
struct Sampling {
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=MAX_SAMPLES))]
    samples: u64,
    /// Samples taken first and not recorded.
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u64).range(0..=MAX_SAMPLES))]
    warmup: u64,
    #[arg(long)]
    json: bool,
}

fn fail(message: &dyn std::fmt::Display) -> ! {
    eprintln!("critmem-hires: {}", critmem_linux::one_line(&message.to_string()));
    std::process::exit(2);
}

fn main() {
    let argv: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if argv.get(1).is_some_and(|a| a == EXEC_AFTER_GO) {
        exec_after_go(&argv[2..], "critmem-hires");
    }
    let args: Args = critmem_linux::parse_args();
    if args.name.is_empty() || args.name.contains('/') || args.name.starts_with('.') {
        fail(&format!("--name must be a plain directory name (got {:?})", args.name));
    }
    let journal = args.state_dir.join(format!("{}.journal", args.name));
    match args.command {
        Cmd::Burn => loop {
            std::hint::black_box(0u64);
        },
        Cmd::EventLatency(Sampling { samples, warmup, json }) => match event_latency(samples as usize, warmup as usize) {
            Ok(m) if json => println!("{}", m.to_json()),
            Ok(m) => println!("event latency on CPU {}: {}", m.placement.cpu, m.latency.line()),
            Err(e) => fail(&e),
        },
        Cmd::PageCost(Sampling { samples, warmup, json }) => match page_cost(samples as usize, warmup as usize) {
            Ok(m) if json => println!("{}", m.to_json()),
            Ok(m) => {
                println!("one {}-byte page on CPU {}:\nmap   {}\nunmap {}", m.page_bytes, m.placement.cpu, m.map.line(), m.unmap.line())
            }
            Err(e) => fail(&e),
        },
        Cmd::Teardown => match teardown(&journal) {
            Ok(None) => println!("{}", json!({"removed": false})),
            Ok(Some(report)) => println!("{}", json!({"removed": true, "dirs": report.removed_dirs.len(), "failures": report.failures})),
            Err(e) => fail(&e),
        },
        Cmd::Apply { tree, duration_s, sample_ms, in_subsystem, json, command } => {
            let text = std::fs::read_to_string(&tree).unwrap_or_else(|e| fail(&format!("{}: {e}", tree.display())));
            let file = load_tree_str(&text).unwrap_or_else(|e| fail(&format!("{}: {e}", tree.display())));
            let extra = extra_command(&file, in_subsystem.as_deref(), command).unwrap_or_else(|e| fail(&e));
            let run =
                Run { file: &file, top: &args.name, journal: &journal, duration: duration_s, sample: Duration::from_millis(sample_ms) };
            match run.go(extra) {
                Ok(summary) => print_summary(&summary, &file, &tree, json),
                Err(e) => fail(&e),
            }
        }
    }
}

/// The subsystem `-- CMD` runs in: `--in`, or the tree's only subsystem.
fn extra_command(file: &TreeFile, in_subsystem: Option<&str>, command: Vec<String>) -> Result<Option<(SubsystemId, Vec<String>)>, String> {
    if command.is_empty() {
        return match in_subsystem {
            Some(_) => Err("--in needs a command after --".into()),
            None => Ok(None),
        };
    }
    let id = match in_subsystem {
        // The root's own cgroup (the top directory) is a leaf only in a tree of no subsystems.
        Some("root") if file.subsystems.is_empty() => ReservationTree::ROOT,
        Some("root") => return Err("--in root: the root runs a command only in a tree with no subsystems; name a subsystem".into()),
        Some(name) => file
            .tree
            .find(name)
            .filter(|&id| id != ReservationTree::ROOT)
            .ok_or_else(|| format!("--in: no subsystem named {name:?} in the tree"))?,
        None => match file.subsystems.as_slice() {
            [(only, _)] => *only,
            [] => return Err("the tree has no subsystems: run the command in its root with --in root".into()),
            _ => return Err("the tree has several subsystems: say which one the command runs in with --in NAME".into()),
        },
    };
    Ok(Some((id, command)))
}

struct Run<'a> {
    file: &'a TreeFile,
    top: &'a str,
    journal: &'a Path,
    duration: Option<Duration>,
    sample: Duration,
}

/// One started process.
struct Started {
    subsystem: SubsystemId,
    child: Child,
    exit: Option<std::process::ExitStatus>,
}

/// What a run measured.
struct Summary {
    backend: &'static str,
    seconds: f64,
    /// Per subsystem (file order): CPU time used in the measured window, in ns.
    cpu_ns: Vec<(SubsystemId, u64)>,
    /// Per subsystem (file order): bytes read and written on block devices in the window
    /// (`None` without a block I/O controller).
    io_bytes: Vec<Option<u64>>,
    window_s: f64,
    /// Per sample after the first: seconds since the start and each subsystem's share of one
    /// CPU since the sample before.
    timeline: Vec<(f64, Vec<f64>)>,
    exits: Vec<(SubsystemId, Option<i32>)>,
    io_not_applied: Vec<String>,
    recovered: bool,
    stopped_by: String,
    /// The first N CPUs the tree's processes were held to, when the tree offers fewer than
    /// the machine has.
    pinned: Option<u64>,
}

impl Run<'_> {
    fn go(&self, extra: Option<(SubsystemId, Vec<String>)>) -> Result<Summary, String> {
        let signals = shutdown_signals().map_err(|e| e.to_string())?;
        let mounts_text = std::fs::read_to_string("/proc/self/mounts").map_err(|e| format!("/proc/self/mounts: {e}"))?;
        let mounts = critmem_linux::layout::parse_mounts(&mounts_text).map_err(|e| e.to_string())?;
        let cgroups = HiresCgroups::detect(&mounts, |root| std::fs::read_to_string(root.join("cgroup.controllers")).ok())
            .map_err(|e| e.to_string())?;
        let backend = if matches!(cgroups, HiresCgroups::V1 { .. }) { "cgroup v1" } else { "cgroup v2" };
        let applied = apply(self.file, cgroups, self.top, self.journal).map_err(|e| e.to_string())?;
        let tree = applied.tree;
        let mut commands: Vec<(SubsystemId, Vec<String>)> = Vec::new();
        for ((id, _), command) in self.file.subsystems.iter().zip(&self.file.commands) {
            if let Some((argv, copies)) = command {
                commands.extend((0..*copies).map(|_| (*id, argv.clone())));
            }
        }
        commands.extend(extra);
        let mut started: Vec<Started> = Vec::new();
        let pinned = pinned_cpus(self.file);
        let outcome = (|| -> Result<Summary, String> {
            let this_exe = std::env::current_exe().map_err(|e| format!("this program's path: {e}"))?;
            for (id, argv) in &commands {
                // Its output goes to stderr: stdout carries only the summary.
                let stderr = std::io::stderr().as_fd().try_clone_to_owned().map_err(|e| format!("duplicate stderr: {e}"))?;
                let mut child = command_after_go(&this_exe, argv)
                    .stdin(Stdio::piped())
                    .stdout(Stdio::from(stderr))
                    .process_group(0)
                    .spawn()
                    .map_err(|e| format!("{}: start {}: {e}", self.file.tree.name(*id), argv[0]))?;
                let placed = tree.move_pid(*id, child.id()).map_err(|e| e.to_string()).and_then(|()| match &pinned {
                    Some(cpus) => nix::sched::sched_setaffinity(Pid::from_raw(child.id() as i32), cpus)
                        .map_err(|e| format!("pin to the tree's CPUs: {e}")),
                    None => Ok(()),
                });
                if let Err(e) = placed {
                    let _ = child.kill();
                    let _ = child.wait();
                    return Err(format!("{}: {e}", self.file.tree.name(*id)));
                }
                let _ = child.stdin.take().map(|mut s| s.write_all(b"go\n"));
                started.push(Started { subsystem: *id, child, exit: None });
            }
            let measured: Vec<(SubsystemId, PathBuf)> =
                self.file.subsystems.iter().map(|(id, _)| (*id, tree.path(*id).to_owned())).collect();
            let read = |paths: &[(SubsystemId, PathBuf)]| -> Result<Vec<u64>, String> {
                paths.iter().map(|(_, rel)| tree.cgroups.cpu_usage_ns(rel).map_err(|e| e.to_string())).collect()
            };
            let read_io = |paths: &[(SubsystemId, PathBuf)]| -> Result<Vec<Option<u64>>, String> {
                paths.iter().map(|(_, rel)| tree.cgroups.io_bytes(rel).map_err(|e| e.to_string())).collect()
            };
            let until = match self.duration {
                Some(d) => format!("for {:.1} s", d.as_secs_f64()),
                None if started.is_empty() => "until Ctrl-C".to_owned(),
                None => "until its commands exit".to_owned(),
            };
            eprintln!(
                "critmem-hires: {} subsystem(s) applied under {}/, {} process(es) started; running {until}",
                self.file.subsystems.len(),
                self.top,
                started.len()
            );
            let start = Instant::now();
            let mut samples: Vec<(f64, Vec<u64>)> = vec![(0.0, read(&measured)?)];
            let mut io_samples = vec![read_io(&measured)?];
            let stopped_by = loop {
                let signalled = wait_signal(&signals, self.sample);
                samples.push((start.elapsed().as_secs_f64(), read(&measured)?));
                io_samples.push(read_io(&measured)?);
                for s in started.iter_mut().filter(|s| s.exit.is_none()) {
                    s.exit = s.child.try_wait().map_err(|e| format!("wait: {e}"))?;
                }
                if signalled {
                    break "signal".to_owned();
                }
                if self.duration.is_some_and(|d| start.elapsed() >= d) {
                    break "duration".to_owned();
                }
                if self.duration.is_none() && started.iter().all(|s| s.exit.is_some()) {
                    break "commands exited".to_owned();
                }
            };
            let seconds = start.elapsed().as_secs_f64();
            // The first second (at most a fifth of the run) is warm-up: processes starting.
            let warm_up_s = (seconds / 5.0).min(1.0);
            let first = samples.iter().position(|(t, _)| *t >= warm_up_s).unwrap_or(0).min(samples.len() - 1);
            let last = samples.len() - 1;
            let window_s = samples[last].0 - samples[first].0;
            let cpu_ns = measured.iter().enumerate().map(|(i, (id, _))| (*id, samples[last].1[i] - samples[first].1[i])).collect();
            let io_bytes =
                (0..measured.len()).map(|i| io_samples[last][i].zip(io_samples[first][i]).map(|(b, a)| b.saturating_sub(a))).collect();
            let timeline = samples
                .windows(2)
                .map(|w| {
                    let dt_ns = ((w[1].0 - w[0].0) * 1e9).max(1.0);
                    (w[1].0, w[1].1.iter().zip(&w[0].1).map(|(b, a)| b.saturating_sub(*a) as f64 / dt_ns).collect())
                })
                .collect();
            Ok(Summary {
                backend,
                seconds,
                cpu_ns,
                io_bytes,
                window_s,
                timeline,
                exits: Vec::new(),
                io_not_applied: applied.io_not_applied.clone(),
                recovered: applied.recovered.is_some(),
                stopped_by,
                pinned: pinned.as_ref().map(|_| self.file.tree.holding(ReservationTree::ROOT, Family::Cpu).hard_in / CPU_PARTS),
            })
        })();
        stop(&mut started);
        let removed = tree.teardown();
        let mut summary = outcome?;
        let report = removed.map_err(|e| e.to_string())?;
        if !report.failures.is_empty() {
            return Err(format!("could not remove every cgroup (kept in the journal for `teardown`): {}", report.failures.join("; ")));
        }
        summary.exits = started.iter().map(|s| (s.subsystem, s.exit.and_then(|e| e.code()))).collect();
        Ok(summary)
    }
}

/// The tree's root offers `cpus` CPUs: where the machine has more, its processes are held to
/// the first `cpus` of those this process may use, so that they compete as in the tree.
fn pinned_cpus(file: &TreeFile) -> Option<nix::sched::CpuSet> {
    let cpus = (file.tree.holding(ReservationTree::ROOT, Family::Cpu).hard_in / CPU_PARTS) as usize;
    let mine = nix::sched::sched_getaffinity(Pid::from_raw(0)).ok()?;
    let usable: Vec<usize> = (0..nix::sched::CpuSet::count()).filter(|&c| mine.is_set(c).unwrap_or(false)).collect();
    if cpus >= usable.len() {
        return None;
    }
    let mut set = nix::sched::CpuSet::new();
    for &cpu in &usable[..cpus] {
        set.set(cpu).ok()?;
    }
    Some(set)
}

/// SIGTERM to every process group still running, SIGKILL after 2 s; all reaped.
fn stop(started: &mut [Started]) {
    let pgid = |s: &Started| Pid::from_raw(s.child.id() as i32);
    for s in started.iter().filter(|s| s.exit.is_none()) {
        let _ = killpg(pgid(s), Signal::SIGTERM);
    }
    let deadline = Instant::now() + Duration::from_secs(2);
    while Instant::now() < deadline && started.iter_mut().any(|s| s.exit.is_none() && s.child.try_wait().ok().flatten().is_none()) {
        std::thread::sleep(Duration::from_millis(10));
    }
    for s in started.iter_mut() {
        if s.exit.is_none() {
            let _ = killpg(pgid(s), Signal::SIGKILL);
            s.exit = s.child.wait().ok();
        }
    }
}

fn reserved_cpu_share(file: &TreeFile, id: SubsystemId) -> Option<f64> {
    file.tree.reservations_of(id).find_map(|(_, kind, family, spec)| match (kind, family, spec) {
        (Kind::Hard, Family::Cpu, Some(spec)) => Some(spec.amount() as f64 / CPU_PARTS as f64),
        _ => None,
    })
}

fn describe(spec: Spec, kind: Kind) -> Value {
    match spec {
        Spec::Cpu { budget_ns, period_ns } => {
            json!({"family": "cpu", "kind": kind.as_str(), "budget_ms": budget_ns as f64 / 1e6, "period_ms": period_ns as f64 / 1e6})
        }
        Spec::Memory { bytes } => json!({"family": "memory", "kind": kind.as_str(), "mib": bytes as f64 / (1u64 << 20) as f64}),
        Spec::Io { bytes_per_s } => json!({"family": "io", "kind": kind.as_str(), "mib_per_s": bytes_per_s as f64 / (1u64 << 20) as f64}),
    }
}

fn print_summary(summary: &Summary, file: &TreeFile, tree_path: &Path, as_json: bool) {
    let rows: Vec<Value> = summary
        .cpu_ns
        .iter()
        .zip(&summary.io_bytes)
        .map(|((id, ns), io)| {
            let parent = file.tree.parent(*id).map(|p| file.tree.name(p).to_owned());
            let reservations: Vec<Value> =
                file.tree.reservations_of(*id).filter_map(|(_, kind, _, spec)| spec.map(|s| describe(s, kind))).collect();
            let processes = summary.exits.iter().filter(|(s, _)| s == id).count();
            json!({
                "name": file.tree.name(*id),
                "parent": parent,
                "reservations": reservations,
                "processes": processes,
                "cpu_seconds": *ns as f64 / 1e9,
                "cpu_share_reserved": reserved_cpu_share(file, *id),
                "cpu_share_measured": if summary.window_s > 0.0 { *ns as f64 / 1e9 / summary.window_s } else { 0.0 },
                "io_bytes": io,
                "io_mib_per_s_measured": io.filter(|_| summary.window_s > 0.0).map(|b| b as f64 / (1u64 << 20) as f64 / summary.window_s),
            })
        })
        .collect();
    let names: Vec<&str> = summary.cpu_ns.iter().map(|(id, _)| file.tree.name(*id)).collect();
    let timeline: Vec<Value> = summary
        .timeline
        .iter()
        .map(|(t, shares)| json!({"t_s": t, "shares": names.iter().zip(shares).map(|(n, s)| (n.to_string(), json!(s))).collect::<serde_json::Map<_, _>>()}))
        .collect();
    let exit_codes: Vec<Value> =
        summary.exits.iter().map(|(id, code)| json!({"subsystem": file.tree.name(*id), "exit_code": code})).collect();
    if as_json {
        let out = json!({
            "tree": tree_path,
            "backend": summary.backend,
            "seconds": summary.seconds,
            "measured_seconds": summary.window_s,
            "stopped_by": summary.stopped_by,
            "recovered_from_crash": summary.recovered,
            "pinned_cpus": summary.pinned,
            "io_not_applied": summary.io_not_applied,
            "subsystems": rows,
            "processes": exit_codes,
            "timeline": timeline,
        });
        println!("{out}");
        return;
    }
    let pinned = summary.pinned.map_or(String::new(), |n| format!(", processes held to {n} CPU(s)"));
    println!(
        "{} on {}{pinned}: {:.1} s ({}), CPU shares of one CPU over the last {:.1} s",
        tree_path.display(),
        summary.backend,
        summary.seconds,
        summary.stopped_by,
        summary.window_s
    );
    println!("{:<16} {:<12} {:>9} {:>9} {:>9} {:>11}", "subsystem", "parent", "reserved", "measured", "processes", "I/O MiB/s");
    for row in &rows {
        let share = |v: &Value| v.as_f64().map_or("-".to_owned(), |s| format!("{:.1} %", s * 100.0));
        println!(
            "{:<16} {:<12} {:>9} {:>9} {:>9} {:>11}",
            row["name"].as_str().unwrap_or(""),
            row["parent"].as_str().unwrap_or("-"),
            share(&row["cpu_share_reserved"]),
            share(&row["cpu_share_measured"]),
            row["processes"],
            row["io_mib_per_s_measured"].as_f64().map_or("-".to_owned(), |r| format!("{r:.2}"))
        );
    }
    for line in &summary.io_not_applied {
        println!("not applied (I/O): {line}");
    }
}
