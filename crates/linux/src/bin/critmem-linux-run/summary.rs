//! The run's summary ([`RunSummary`]) from what the run planned, measured and restored.

use crate::plan::{Launch, TaskPlan};
use crate::tasks::{TaskEnd, WorkerReport};
use critmem_core::{JobFigures, Nanos, Scenario, TaskStats};
use critmem_linux::platform::JobCounts;
use critmem_linux::run_summary::{
    ControlSummary, GroupRow, JobColumns, JobRow, MemorySummary, ReportedJobs, RunSummary, TaskRow, TimelineSample, TraceSummary,
    MAX_JOB_ROWS,
};
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

/// The task whose jobs group `group`'s job socket reports: its only task that reports jobs.
pub(crate) fn sole_reporter(tasks: &[TaskPlan], group: usize) -> Option<usize> {
    let mut reporters = tasks.iter().enumerate().filter(|(_, t)| t.group == group && t.reports_jobs()).map(|(i, _)| i);
    match (reporters.next(), reporters.next()) {
        (Some(i), None) => Some(i),
        _ => None,
    }
}

/// Task `i`'s job totals judged at `end_ns`: a shipped soft real-time worker counts its own;
/// otherwise a reporting task's jobs are its group's, when it is the only reporter there.
pub(crate) fn task_stats(tasks: &[TaskPlan], i: usize, end: &TaskEnd, counts: &[JobCounts], end_ns: u64) -> Option<TaskStats> {
    match &end.report {
        WorkerReport::Srt(w) => Some(w.task_stats(end_ns)),
        _ if sole_reporter(tasks, tasks[i].group) == Some(i) => Some(counts[tasks[i].group].task_stats(end_ns)),
        _ => None,
    }
}

/// Every counted task's jobs by release time (a job whose release never arrived by its
/// completion or drop), times since `start_ns`, judged at `end_ns`; and the jobs left out.
pub(crate) fn job_rows(tasks: &[TaskPlan], counts: &[JobCounts], start_ns: u64, end_ns: u64) -> (Vec<JobRow>, u64) {
    let mut traces = Vec::new();
    let mut left_out = 0;
    for (g, group_counts) in counts.iter().enumerate() {
        let Some(i) = sole_reporter(tasks, g) else { continue };
        left_out += group_counts.rows_left_out();
        traces.extend(group_counts.rows().iter().map(|r| (r.release_ns.or(r.completion_ns).or(r.drop_ns), i, r)));
    }
    traces.sort_by_key(|&(at_ns, i, r)| (at_ns, i, r.job));
    (traces.into_iter().map(|(_, i, r)| JobRow::new(&tasks[i].name, r, start_ns, end_ns)).collect(), left_out)
}

pub(crate) fn summarize(scenario: &Scenario, tasks: &[TaskPlan], m: Measured, end: &SessionEnd) -> RunSummary {
    let horizon = Nanos(m.elapsed_ns);
    let counts = &end.job_counts;
    let start_ns = m.end_ns - m.elapsed_ns;
    let (jobs, jobs_left_out) = job_rows(tasks, counts, start_ns, m.end_ns);
    let rows = tasks
        .iter()
        .zip(&m.ends)
        .enumerate()
        .map(|(i, (t, e))| {
            let stats = task_stats(tasks, i, e, counts, m.end_ns);
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
                work_units: e.work_units,
                work_units_per_s: work_units_per_s(e, horizon),
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
        traces: TraceSummary { limit: MAX_JOB_ROWS, jobs: jobs.len(), jobs_left_out },
        jobs,
        memory: MemorySummary { total_bytes: m.total_memory_bytes, groups },
        control: ControlSummary {
            interval_ms: m.interval_ns as f64 / 1e6,
            ticks: cost.ticks,
            tick_cost_mean_us: cost.mean_ns as f64 / 1e3,
            tick_cost_p99_us: cost.p99_ns as f64 / 1e3,
            tick_cpu_mean_us: cost.cpu_mean_ns as f64 / 1e3,
            writes_ok: end.stats.writes_ok,
            writes_failed: end.stats.writes_failed,
            write_cpu_ms: end.stats.write_cpu_ns as f64 / 1e6,
            oom_rescues: end.stats.oom_rescues,
            drops_requested: end.stats.drops_requested,
            leftover_processes_killed: m.leftovers_killed,
            restored_files: end.restore.restored.len(),
            removed_dirs: end.restore.removed_dirs.len(),
            timeline: m.timeline,
        },
    }
}

/// A command's work units per second of the time it ran in the run (until it exited, or the
/// whole run).
fn work_units_per_s(end: &TaskEnd, horizon: Nanos) -> Option<f64> {
    let ran_s = end.exited_early_s.unwrap_or(horizon.0 as f64 / 1e9);
    end.work_units.filter(|_| ran_s > 0.0).map(|units| units as f64 / ran_s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use critmem_linux::protocol::JobOp;

    fn task(name: &str, group: usize, launch: Launch) -> TaskPlan {
        TaskPlan { name: name.into(), criticality: "C", group, launch, period_ns: 100, deadline_ns: 100, wcet_ns: 10, seed: 1 }
    }

    fn command(name: &str, group: usize, reports_jobs: bool) -> TaskPlan {
        task(name, group, Launch::Command { argv: vec!["prog".into()], program: "/bin/true".into(), reports_jobs })
    }

    /// Group 0's only reporter is a command; group 1 has two reporters, group 2 none.
    fn plans() -> Vec<TaskPlan> {
        vec![
            command("alone", 0, true),
            command("first", 1, true),
            task("second", 1, Launch::Worker { exe: "critmem-srt-worker", args: Vec::new() }),
            command("batch", 2, false),
        ]
    }

    /// Job `job` of a group released at `at`, deadline 100 ns later.
    fn release(counts: &mut JobCounts, job: u64, at: u64) {
        counts.record(job, JobOp::Release { deadline_ns: at + 100 }, at);
    }

    #[test]
    fn a_command_that_is_its_groups_only_reporter_has_every_job_figure() {
        let tasks = plans();
        let mut counts = vec![JobCounts::default(), JobCounts::default(), JobCounts::default()];
        for (job, at) in [(0, 1_000), (1, 1_100), (2, 1_200)] {
            release(&mut counts[0], job, at);
            release(&mut counts[1], job, at);
        }
        counts[0].record(0, JobOp::Complete, 1_040);
        counts[0].record(1, JobOp::Complete, 1_230); // 30 late
        let stats: Vec<_> = (0..tasks.len()).map(|i| task_stats(&tasks, i, &TaskEnd::default(), &counts, 1_250)).collect();
        let alone = JobFigures::new(stats[0].as_ref().unwrap(), Nanos(1_000_000));
        assert_eq!((alone.jobs, alone.completed, alone.deadline_misses, alone.pending), (3, 2, 1, 1));
        assert_eq!(alone.hit_ratio, Some(0.5));
        assert_eq!((alone.max_response_ms, alone.mean_response_ms, alone.max_tardiness_ms), (Some(130e-6), Some(85e-6), 30e-6));
        assert!(stats[1].is_none() && stats[2].is_none(), "two reporters share a group: neither's counts are known");
        assert!(stats[3].is_none(), "a command that reports nothing");
    }

    #[test]
    fn job_rows_belong_to_their_groups_only_reporter_in_release_order() {
        let tasks = plans();
        let budget = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(4));
        let mut counts = vec![JobCounts::default(), JobCounts::default(), JobCounts::default()];
        counts[0].keep_rows(budget.clone());
        counts[0].record(9, JobOp::Complete, 1_010); // its release was lost
        for (job, at) in [(0, 990), (1, 1_100), (2, 1_200), (3, 1_300)] {
            release(&mut counts[0], job, at);
        }
        counts[0].record(0, JobOp::Complete, 1_040);
        counts[0].record(1, JobOp::Drop, 1_150);
        release(&mut counts[1], 0, 1_000); // not kept: two reporters
        let (rows, left_out) = job_rows(&tasks, &counts, 1_000, 1_250);
        assert_eq!(left_out, 1, "job 3 found the budget spent");
        let summary: Vec<_> = rows.iter().map(|r| (r.task.as_str(), r.job, r.outcome)).collect();
        assert_eq!(summary, [("alone", 0, "completed"), ("alone", 9, "completed"), ("alone", 1, "dropped"), ("alone", 2, "pending")]);
        let first = &rows[0];
        assert_eq!((first.release_ms, first.deadline_ms, first.completion_ms), (Some(-10e-6), Some(90e-6), Some(40e-6)));
        assert_eq!((first.response_ms, first.tardiness_ms, first.missed), (Some(50e-6), Some(0.0), false));
        assert_eq!((rows[1].release_ms, rows[1].response_ms), (None, None));
        assert_eq!((rows[2].drop_ms, rows[2].missed, rows[2].tardiness_ms), (Some(150e-6), true, None));
    }

    #[test]
    fn work_units_per_second_are_over_the_time_the_command_ran() {
        let horizon = Nanos::from_secs(10);
        let end = |work_units, exited_early_s| TaskEnd { work_units, exited_early_s, ..TaskEnd::default() };
        assert_eq!(work_units_per_s(&end(Some(500), None), horizon), Some(50.0));
        assert_eq!(work_units_per_s(&end(Some(500), Some(2.5)), horizon), Some(200.0));
        assert_eq!(work_units_per_s(&end(None, None), horizon), None);
        assert_eq!(work_units_per_s(&end(Some(1), None), Nanos(0)), None);
    }
}
