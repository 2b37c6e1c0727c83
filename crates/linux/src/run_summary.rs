//! The summary `critmem-linux-run` prints: one JSON object whose fields mean what the
//! simulator's `--json` fields of the same name mean (`scenario`, `scheduler`, `cpus`,
//! `horizon_ms`, `seed`, and per task `name`, `criticality`, `cpu` and the job figures of
//! [`JobFigures`], built from the same [`critmem_core::TaskStats`]), plus what only a real
//! machine has, under names of their own.
//!
//! How jobs count, on both platforms: `jobs` are the jobs released; a job the controller
//! dropped is `aborted` (and `dropped`) and a deadline miss; a job unfinished at the end of
//! the run is a miss if its deadline had passed, else `pending` and not judged; `hit_ratio` is
//! the share of judged jobs that met their deadline. On Linux no job is `killed` or `skipped`
//! (the shipped worker never skips a release, and the job socket reports neither).
//!
//! The jobs one by one ([`JobRow`], the simulator's `jobs.csv` columns where they mean the
//! same) are those of every task whose jobs are counted from its group's job socket reports:
//! the only task of its group that reports jobs. Their outcome is judged at the end as the
//! totals are: `completed`; `dropped` (the simulator's `aborted`: a miss); `unfinished`, its
//! deadline passed (a miss); or `pending`, its deadline still ahead (not judged). A run keeps
//! at most [`MAX_JOB_ROWS`] rows, the first released; the totals count every job.

use crate::platform::JobTrace;
use critmem_core::JobFigures;
use critmem_policy::StallTotals;
use serde::{Serialize, Serializer};

/// The whole summary.
#[derive(Clone, Debug, Serialize)]
pub struct RunSummary {
    pub scenario: String,
    /// Always `linux`.
    pub platform: &'static str,
    /// Always `linux`: the kernel schedules the tasks.
    pub scheduler: &'static str,
    /// CPUs the machine offers this process.
    pub cpus: usize,
    /// How long the run lasted.
    pub horizon_ms: f64,
    pub seed: u64,
    pub controller: String,
    /// The cgroup backend (`cgroup v2` or `hybrid (v1 memory + v2 PSI)`).
    pub backend: String,
    pub tasks: Vec<TaskRow>,
    /// Every counted task's jobs, by release time.
    pub jobs: Vec<JobRow>,
    pub traces: TraceSummary,
    pub memory: MemorySummary,
    pub control: ControlSummary,
}

/// One job, its times in ms since the run started (the control loop's first tick, the zero
/// of the timeline): a job its process released just before that has a negative release.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct JobRow {
    pub task: String,
    /// The job's number as its process reported it.
    pub job: u64,
    /// Null for a completion or drop whose release report never arrived.
    pub release_ms: Option<f64>,
    /// Absolute.
    pub deadline_ms: Option<f64>,
    /// When it could start: its release, or the end of the job before it if later.
    pub start_ms: Option<f64>,
    pub completion_ms: Option<f64>,
    pub drop_ms: Option<f64>,
    /// Completion − release.
    pub response_ms: Option<f64>,
    /// Completion − deadline, 0 if met; for an unfinished job the end of the run − deadline;
    /// 0 for a pending one; null for a dropped job or an unknown deadline.
    pub tardiness_ms: Option<f64>,
    pub missed: bool,
    /// `completed`, `dropped`, `unfinished` or `pending`.
    pub outcome: &'static str,
    /// `s_period` of SARA's Eq. 2 from the group's PSI: the sum of `max(Δ memory some,
    /// Δ io some)` over the control intervals the job ran in.
    pub stall_ms: Option<f64>,
    /// CPU time the job's group used over those intervals, and time it waited for a CPU
    /// (`cpu.pressure` some): what Eq. 1 leaves out. Null where the kernel gives no per-group
    /// `cpu.stat`.
    pub cpu_ms: Option<f64>,
    pub cpu_wait_ms: Option<f64>,
}

impl JobRow {
    /// Row of `trace` for `task`, times relative to `start_ns`, judged at `end_ns`.
    pub fn new(task: &str, trace: &JobTrace, start_ns: u64, end_ns: u64) -> Self {
        let since_start_ms = |ns: u64| (i128::from(ns) - i128::from(start_ns)) as f64 / 1e6;
        let ms = |ns: u64| ns as f64 / 1e6;
        JobRow {
            task: task.to_owned(),
            job: trace.job,
            release_ms: trace.release_ns.map(since_start_ms),
            deadline_ms: trace.deadline_ns.map(since_start_ms),
            start_ms: trace.start_ns.map(since_start_ms),
            completion_ms: trace.completion_ns.map(since_start_ms),
            drop_ms: trace.drop_ns.map(since_start_ms),
            response_ms: trace.response_ns().map(ms),
            tardiness_ms: trace.tardiness_ns(end_ns).map(ms),
            missed: trace.missed(end_ns),
            outcome: trace.outcome(end_ns).as_str(),
            stall_ms: trace.stall_us.map(|us| us as f64 / 1e3),
            cpu_ms: trace.cpu_us.map(|us| us as f64 / 1e3),
            cpu_wait_ms: trace.cpu_wait_us.map(|us| us as f64 / 1e3),
        }
    }
}

/// Most job rows a run keeps (about 20 MB of summary JSON).
pub const MAX_JOB_ROWS: usize = 100_000;

/// How many job rows the run kept, named as the simulator's `traces` section.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct TraceSummary {
    /// Most rows a run keeps.
    pub limit: usize,
    /// Rows in [`RunSummary::jobs`].
    pub jobs: usize,
    /// Jobs released after the limit was reached: counted in the totals, not kept.
    pub jobs_left_out: u64,
}

/// One task.
#[derive(Clone, Debug, Serialize)]
pub struct TaskRow {
    pub name: String,
    pub criticality: &'static str,
    /// Always null: Linux does not pin a task to a CPU.
    pub cpu: Option<usize>,
    pub group: String,
    /// The shipped worker that ran the task, or null for a command.
    pub worker: Option<&'static str>,
    /// The scenario's command that ran the task, or null for a shipped worker.
    pub command: Option<Vec<String>>,
    pub reports_jobs: bool,
    #[serde(flatten)]
    pub jobs: JobColumns,
    /// A throughput worker's MiB read and verified, and per second.
    pub verified_mib: Option<u64>,
    pub verified_mib_per_s: Option<f64>,
    /// A command's last count in its progress file (`CRITMEM_PROGRESS_FILE`), null when it
    /// wrote none, and per second of the time it ran.
    pub work_units: Option<u64>,
    pub work_units_per_s: Option<f64>,
    /// A shipped worker's pages whose contents had changed under it.
    pub checksum_failures: Option<u64>,
    pub exit_code: Option<i32>,
    pub exit_signal: Option<i32>,
    /// When the process exited by itself before the end of the run.
    pub exited_early_s: Option<f64>,
    /// What ended a command still running at the end (`SIGTERM`, or `SIGKILL` after the
    /// grace period).
    pub stopped_by: Option<&'static str>,
}

/// A task's job figures, or every one of them null where the run did not count the task's
/// jobs (a throughput worker, a command that reports none, a group with several reporters).
#[derive(Clone, Debug, PartialEq)]
pub struct JobColumns(pub Option<JobFigures>);

/// [`JobFigures`]' fields, all null.
#[derive(Default, Serialize)]
struct NoJobFigures {
    jobs: Option<u64>,
    completed: Option<u64>,
    deadline_misses: Option<u64>,
    aborted: Option<u64>,
    dropped: Option<u64>,
    killed: Option<u64>,
    skipped: Option<u64>,
    pending: Option<u64>,
    hit_ratio: Option<f64>,
    max_response_ms: Option<f64>,
    mean_response_ms: Option<f64>,
    max_tardiness_ms: Option<f64>,
    throughput_per_s: Option<f64>,
}

impl Serialize for JobColumns {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match &self.0 {
            Some(figures) => figures.serialize(serializer),
            None => NoJobFigures::default().serialize(serializer),
        }
    }
}

/// Memory the groups share, and each group.
#[derive(Clone, Debug, Serialize)]
pub struct MemorySummary {
    pub total_bytes: u64,
    pub groups: Vec<GroupRow>,
}

/// One group: its PSI totals at the end, named as the simulator's `memory.groups[]`, and the
/// jobs its workloads reported on the job socket.
#[derive(Clone, Debug, Serialize)]
pub struct GroupRow {
    pub name: String,
    #[serde(flatten)]
    pub stall: StallTotals,
    #[serde(flatten)]
    pub jobs: ReportedJobs,
}

/// Jobs a group's workloads reported, counted as a task's are (see the module documentation).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ReportedJobs {
    pub jobs_reported: u64,
    pub jobs_completed: u64,
    pub jobs_dropped: u64,
    pub jobs_pending: u64,
    /// Completed by their deadline.
    pub deadline_hits: u64,
    pub deadline_misses: u64,
}

/// The control loop's run.
#[derive(Clone, Debug, Serialize)]
pub struct ControlSummary {
    pub interval_ms: f64,
    pub ticks: u64,
    /// Wall time from a tick's observation to the end of its apply (waiting for a CPU included).
    pub tick_cost_mean_us: f64,
    pub tick_cost_p99_us: f64,
    /// CPU time the loop's thread used per tick.
    pub tick_cpu_mean_us: f64,
    pub writes_ok: u64,
    pub writes_failed: u64,
    /// CPU time the writer threads used in the limit writes, in ms: mostly the kernel's
    /// reclaim down to the lowered limits.
    pub write_cpu_ms: f64,
    pub oom_rescues: u64,
    /// Job drops the controller asked for.
    pub drops_requested: u64,
    /// Processes left in the run's cgroups at the end (what commands forked), killed.
    pub leftover_processes_killed: usize,
    pub restored_files: usize,
    pub removed_dirs: usize,
    /// Every group's usage and limits over the run.
    pub timeline: Vec<TimelineSample>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TimelineSample {
    pub t_ms: f64,
    /// In the order of [`MemorySummary::groups`].
    pub groups: Vec<GroupSample>,
    /// Per task, in the order of [`RunSummary::tasks`]: the count in a command's progress
    /// file so far (null before it wrote one, and for every other task).
    pub work_units: Vec<Option<u64>>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct GroupSample {
    pub usage_bytes: u64,
    /// Null: no limit.
    pub max_bytes: Option<u64>,
    pub high_bytes: Option<u64>,
    /// PSI `some` totals so far, as the simulator's `memory.groups[]` names them.
    pub memory_some_us: u64,
    pub io_some_us: u64,
    pub cpu_some_us: u64,
    /// CPU time the group used so far.
    pub cpu_usage_us: u64,
    /// CPU and swap-disk I/O limits in force (null: none).
    pub cpu_millicpus: Option<u64>,
    pub io_read_bytes_per_s: Option<u64>,
    pub io_write_bytes_per_s: Option<u64>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use critmem_core::{Nanos, TaskStats};
    use serde_json::Value;

    fn keys(value: &Value) -> Vec<String> {
        value.as_object().unwrap().keys().cloned().collect()
    }

    /// A task whose jobs were not counted has the same job fields as one whose were, null.
    #[test]
    fn uncounted_job_figures_are_the_same_fields_all_null() {
        let stats = TaskStats { released: 4, completed: 3, deadline_misses: 1, ..TaskStats::default() };
        let counted = serde_json::to_value(JobColumns(Some(JobFigures::new(&stats, Nanos::from_secs(1))))).unwrap();
        let uncounted = serde_json::to_value(JobColumns(None)).unwrap();
        assert_eq!(keys(&counted), keys(&uncounted));
        assert!(uncounted.as_object().unwrap().values().all(Value::is_null), "{uncounted}");
        assert_eq!((counted["jobs"].as_u64(), counted["hit_ratio"].as_f64()), (Some(4), Some(0.75)));
    }

    /// A job row reads as a row of the simulator's jobs.csv where the two mean the same.
    #[test]
    fn job_rows_use_the_simulators_column_names() {
        let trace = JobTrace {
            job: 3,
            release_ns: Some(1_500_000),
            deadline_ns: Some(3_500_000),
            completion_ns: Some(4_000_000),
            drop_ns: None,
            start_ns: Some(2_000_000),
            stall_us: Some(250),
            cpu_us: Some(900),
            cpu_wait_us: None,
        };
        let row = serde_json::to_value(JobRow::new("video", &trace, 1_000_000, 9_000_000)).unwrap();
        assert_eq!(
            row,
            serde_json::json!({"task": "video", "job": 3, "release_ms": 0.5, "deadline_ms": 2.5, "start_ms": 1.0, "completion_ms": 3.0,
                "drop_ms": null, "response_ms": 2.5, "tardiness_ms": 0.5, "missed": true, "outcome": "completed", "stall_ms": 0.25,
                "cpu_ms": 0.9, "cpu_wait_ms": null})
        );
    }
}
