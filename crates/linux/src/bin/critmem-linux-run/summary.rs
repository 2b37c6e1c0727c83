//! The run's summary ([`RunSummary`]) from what the run planned, measured and restored.

use crate::plan::{Launch, TaskPlan};
use crate::tasks::{TaskEnd, WorkerReport};
use critmem_core::{JobFigures, Nanos, Scenario};
use critmem_linux::run_summary::{ControlSummary, GroupRow, JobColumns, MemorySummary, ReportedJobs, RunSummary, TaskRow, TimelineSample};
use critmem_linux::session::SessionEnd;
use critmem_policy::StallTotals;

/// What a finished run knows, beside its plan.
pub(crate) struct Measured {
    pub(crate) controller: String,
    pub(crate) backend: String,
    pub(crate) total_memory_bytes: u64,
    pub(crate) interval_ns: u64,
    pub(crate) group_names: Vec<String>,
    /// When the control loop stopped (CLOCK_MONOTONIC): unfinished jobs are judged here.
    pub(crate) end_ns: u64,
    /// How long the control loop ran: the run's horizon.
    pub(crate) elapsed_ns: u64,
    pub(crate) ends: Vec<TaskEnd>,
    pub(crate) timeline: Vec<TimelineSample>,
    pub(crate) final_stall: Vec<StallTotals>,
    pub(crate) leftovers_killed: usize,
}

pub(crate) fn summarize(scenario: &Scenario, tasks: &[TaskPlan], m: Measured, end: &SessionEnd) -> RunSummary {
    let horizon = Nanos(m.elapsed_ns);
    let counts = &end.job_counts;
    let reporters = |group: usize| tasks.iter().filter(|o| o.group == group && o.reports_jobs()).count();
    let rows = tasks
        .iter()
        .zip(&m.ends)
        .map(|(t, e)| {
            // A shipped soft real-time worker counts its own jobs; otherwise a reporting task's
            // jobs are its group's, when it is the only reporter there.
            let stats = match &e.report {
                WorkerReport::Srt(w) => Some(w.task_stats(m.end_ns)),
                _ if t.reports_jobs() && reporters(t.group) == 1 => Some(counts[t.group].task_stats(m.end_ns)),
                _ => None,
            };
            let nrt = match &e.report {
                WorkerReport::Nrt(w) => Some(w),
                _ => None,
            };
            let checksum_failures = match (&t.launch, &e.report) {
                (Launch::Command { .. }, _) => None,
                (_, WorkerReport::Srt(w)) => Some(w.checksum_failures),
                (_, WorkerReport::Nrt(w)) => Some(w.checksum_failures),
                (_, WorkerReport::None) => Some(0),
            };
            TaskRow {
                name: t.name.clone(),
                criticality: t.criticality,
                cpu: None,
                group: m.group_names[t.group].clone(),
                worker: match t.launch {
                    Launch::Worker { exe, .. } => Some(exe),
                    Launch::Command { .. } => None,
                },
                command: match &t.launch {
                    Launch::Command { argv, .. } => Some(argv.clone()),
                    Launch::Worker { .. } => None,
                },
                reports_jobs: t.reports_jobs(),
                jobs: JobColumns(stats.map(|s| JobFigures::new(&s, horizon))),
                verified_mib: nrt.map(|w| w.verified_mib),
                verified_mib_per_s: nrt.map(|w| w.verified_mib_per_s),
                checksum_failures,
                exit_code: e.exit_code,
                exit_signal: e.exit_signal,
                exited_early_s: e.exited_early_s,
                stopped_by: e.stopped_by,
            }
        })
        .collect();
    let groups = m
        .group_names
        .iter()
        .enumerate()
        .map(|(g, name)| {
            let stats = counts[g].task_stats(m.end_ns);
            GroupRow {
                name: name.clone(),
                stall: m.final_stall[g],
                jobs: ReportedJobs {
                    jobs_reported: stats.released,
                    jobs_completed: stats.completed,
                    jobs_dropped: stats.dropped,
                    jobs_pending: stats.pending,
                    deadline_hits: counts[g].deadline_hits,
                    deadline_misses: stats.deadline_misses,
                },
            }
        })
        .collect();
    let cost = end.loop_stats.summary();
    RunSummary {
        scenario: scenario.source_name.clone(),
        platform: "linux",
        scheduler: "linux",
        cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
        horizon_ms: horizon.as_ms_f64(),
        seed: scenario.seed,
        controller: m.controller,
        backend: m.backend,
        tasks: rows,
        memory: MemorySummary { total_bytes: m.total_memory_bytes, groups },
        control: ControlSummary {
            interval_ms: m.interval_ns as f64 / 1e6,
            ticks: cost.ticks,
            tick_cost_mean_us: cost.mean_ns as f64 / 1e3,
            tick_cost_p99_us: cost.p99_ns as f64 / 1e3,
            writes_ok: end.stats.writes_ok,
            writes_failed: end.stats.writes_failed,
            oom_rescues: end.stats.oom_rescues,
            drops_requested: end.stats.drops_requested,
            leftover_processes_killed: m.leftovers_killed,
            restored_files: end.restore.restored.len(),
            removed_dirs: end.restore.removed_dirs.len(),
            timeline: m.timeline,
        },
    }
}
