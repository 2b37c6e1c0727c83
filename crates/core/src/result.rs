//! What a simulation run produces: per-task summaries, per-job records and execution segments.

use crate::model::task::Criticality;
use crate::time::Nanos;
use serde::Serialize;
use std::any::Any;
use std::fmt;

/// How a job ended (or had not, at the horizon).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Completed,
    /// Aborted at its deadline (overrun = "abort").
    Aborted,
    /// Killed before it could finish (out of memory).
    Killed,
    /// Unfinished at the horizon, deadline already passed: a miss.
    Unfinished,
    /// Unfinished at the horizon, deadline still ahead: not judged.
    Pending,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Completed => "completed",
            Outcome::Aborted => "aborted",
            Outcome::Killed => "killed",
            Outcome::Unfinished => "unfinished",
            Outcome::Pending => "pending",
        }
    }
}

/// One job of one task.
#[derive(Clone, Debug, PartialEq)]
pub struct JobRecord {
    pub task: u32,
    /// 0-based index among the task's released jobs.
    pub index: u64,
    pub release: Nanos,
    pub abs_deadline: Nanos,
    /// Execution demand drawn for this job.
    pub demand: Nanos,
    pub executed: Nanos,
    pub start: Option<Nanos>,
    pub completion: Option<Nanos>,
    pub outcome: Outcome,
    /// The CPU the job last ran on, if it ever ran.
    pub last_cpu: Option<u32>,
}

impl JobRecord {
    pub fn missed(&self) -> bool {
        match self.outcome {
            Outcome::Completed => self.completion.is_some_and(|c| c > self.abs_deadline),
            Outcome::Aborted | Outcome::Killed | Outcome::Unfinished => true,
            Outcome::Pending => false,
        }
    }
    pub fn response(&self) -> Option<Nanos> {
        self.completion.map(|c| c - self.release)
    }
    /// Lateness past the deadline: for a completed job, completion − deadline; for one
    /// unfinished at `horizon`, the lateness so far; an aborted job ended at its deadline, and
    /// a killed one is not judged late (it never produced a result).
    pub fn tardiness(&self, horizon: Nanos) -> Nanos {
        let end = match self.outcome {
            Outcome::Completed => self.completion.expect("completed jobs have a completion time"),
            Outcome::Aborted | Outcome::Killed => self.abs_deadline,
            Outcome::Unfinished | Outcome::Pending => horizon,
        };
        end.saturating_sub(self.abs_deadline)
    }
}

/// A stretch of time one job ran on one CPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExecSegment {
    pub cpu: u32,
    pub task: u32,
    pub job: u64,
    pub start: Nanos,
    pub end: Nanos,
}

/// Per-task totals, kept online so long runs need not store every job.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TaskStats {
    pub released: u64,
    pub completed: u64,
    pub deadline_misses: u64,
    pub aborted: u64,
    /// Of the aborted jobs, those a controller dropped (`DropJob`).
    pub dropped: u64,
    /// Jobs killed (out of memory).
    pub killed: u64,
    /// Releases dropped because the previous job was unfinished (overrun = "skip").
    pub skipped: u64,
    /// Unfinished at the horizon with the deadline still ahead.
    pub pending: u64,
    pub max_response: Option<Nanos>,
    pub total_response: u128,
    pub max_tardiness: Nanos,
}

impl TaskStats {
    pub(crate) fn record(&mut self, job: &JobRecord, horizon: Nanos) {
        match job.outcome {
            Outcome::Completed => {
                self.completed += 1;
                let r = job.response().expect("completed jobs have a completion time");
                self.total_response += u128::from(r.0);
                self.max_response = Some(self.max_response.map_or(r, |m| m.max(r)));
            }
            Outcome::Aborted => self.aborted += 1,
            Outcome::Killed => self.killed += 1,
            Outcome::Pending => self.pending += 1,
            Outcome::Unfinished => {}
        }
        if job.missed() {
            self.deadline_misses += 1;
            self.max_tardiness = self.max_tardiness.max(job.tardiness(horizon));
        }
    }
    pub fn mean_response(&self) -> Option<Nanos> {
        (self.completed > 0).then(|| Nanos((self.total_response / u128::from(self.completed)) as u64))
    }
    /// Share of judged jobs (all but pending ones) that met their deadline.
    pub fn hit_ratio(&self) -> Option<f64> {
        let judged = self.released - self.pending;
        (judged > 0).then(|| (judged - self.deadline_misses) as f64 / judged as f64)
    }
}

/// Per-task summary with names attached.
#[derive(Clone, Debug, PartialEq)]
pub struct TaskSummary {
    pub name: String,
    pub criticality: Criticality,
    /// The CPU a partitioned scheduler bound the task to.
    pub cpu: Option<usize>,
    pub stats: TaskStats,
}

/// What a run produces. The engine fills in everything up to `events`; each subsystem adds
/// its own section.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SimResult {
    pub source_name: String,
    pub scheduler: &'static str,
    pub cpus: usize,
    pub seed: u64,
    pub horizon: Nanos,
    pub tasks: Vec<TaskSummary>,
    /// Every job, in order of completion/end (empty unless recording was asked for), up to
    /// [`crate::MAX_TRACE_RECORDS`].
    pub jobs: Vec<JobRecord>,
    /// Jobs that ended after `jobs` was full.
    pub jobs_left_out: u64,
    /// Execution segments (empty unless recording was asked for), up to the same cap.
    pub segments: Vec<ExecSegment>,
    /// Segments that ended after `segments` was full.
    pub segments_left_out: u64,
    /// Events the engine handled (stale, superseded events not counted).
    pub events: u64,
    /// How much of the job and segment traces the run kept, when it recorded either.
    pub traces: Option<TraceSummary>,
    /// What the scheduler and each subsystem add (memory, controller, servers, resources,
    /// I/O), each present only when the scenario declares what it describes.
    pub sections: Sections,
}

/// A part of a run's result that one subsystem (or the scheduler) owns and writes. Its
/// owner's module defines it, its summary keys and a typed accessor on [`SimResult`]; the
/// result names no section.
pub trait Section: Any + Clone + PartialEq + fmt::Debug + Send + Sync {
    /// Its place in the summary: sections write their keys in ascending order, after the
    /// tasks and before the traces.
    const ORDER: u32;
    /// Writes its keys into the summary of `run` (none leaves it out).
    fn write_json(&self, run: &SimResult, out: &mut JsonFields);
}

/// The keys of a summary object being written, as `"key":value` text.
#[derive(Debug, Default)]
pub struct JsonFields {
    text: String,
}

impl JsonFields {
    /// Appends `key` with `value` serialised compactly.
    pub fn field(&mut self, key: &str, value: &impl Serialize) {
        self.text.push(',');
        self.text.push_str(&serde_json::to_string(key).expect("a string serialises"));
        self.text.push(':');
        self.text.push_str(&serde_json::to_string(value).expect("plain data serialises"));
    }
}

/// [`Section`] behind a box: what [`Sections`] holds.
trait AnySection: Any + fmt::Debug + Send + Sync {
    fn order(&self) -> u32;
    fn write_json(&self, run: &SimResult, out: &mut JsonFields);
    fn clone_box(&self) -> Box<dyn AnySection>;
    fn equals(&self, other: &dyn AnySection) -> bool;
    fn as_any(&self) -> &dyn Any;
    fn as_any_mut(&mut self) -> &mut dyn Any;
}

impl<T: Section> AnySection for T {
    fn order(&self) -> u32 {
        T::ORDER
    }
    fn write_json(&self, run: &SimResult, out: &mut JsonFields) {
        Section::write_json(self, run, out);
    }
    fn clone_box(&self) -> Box<dyn AnySection> {
        Box::new(self.clone())
    }
    fn equals(&self, other: &dyn AnySection) -> bool {
        other.as_any().downcast_ref::<T>().is_some_and(|o| o == self)
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

/// A run's sections, in summary order (one of each type).
#[derive(Debug, Default)]
pub struct Sections(Vec<Box<dyn AnySection>>);

impl Clone for Sections {
    fn clone(&self) -> Self {
        Sections(self.0.iter().map(|s| s.clone_box()).collect())
    }
}

impl PartialEq for Sections {
    fn eq(&self, other: &Self) -> bool {
        self.0.len() == other.0.len() && self.0.iter().zip(&other.0).all(|(a, b)| a.equals(b.as_ref()))
    }
}

impl SimResult {
    /// The section of type `T`, if the run has one.
    pub fn section<T: Section>(&self) -> Option<&T> {
        self.sections.0.iter().find_map(|s| s.as_any().downcast_ref::<T>())
    }

    /// The section of type `T` to change, if the run has one.
    pub fn section_mut<T: Section>(&mut self) -> Option<&mut T> {
        self.sections.0.iter_mut().find_map(|s| s.as_any_mut().downcast_mut::<T>())
    }

    /// Adds `section`, or replaces the one of its type.
    pub fn set_section<T: Section>(&mut self, section: T) {
        if let Some(old) = self.section_mut::<T>() {
            *old = section;
            return;
        }
        let at = self.sections.0.partition_point(|s| s.order() <= T::ORDER);
        self.sections.0.insert(at, Box::new(section));
    }

    /// The summary as one JSON object (stable key order, so equal runs give equal bytes):
    /// the run, its tasks, each section in order, then the traces.
    pub fn to_json(&self) -> String {
        let tasks: Vec<JsonTask<'_>> = self
            .tasks
            .iter()
            .map(|t| JsonTask {
                name: &t.name,
                criticality: t.criticality.as_str(),
                cpu: t.cpu,
                jobs: JobFigures::new(&t.stats, self.horizon),
            })
            .collect();
        let head = JsonHead {
            scenario: &self.source_name,
            scheduler: self.scheduler,
            cpus: self.cpus,
            horizon_ms: self.horizon.as_ms_f64(),
            seed: self.seed,
            tasks,
        };
        let mut text = serde_json::to_string(&head).expect("plain data serialises");
        text.pop(); // the closing brace: the sections' keys follow
        let mut out = JsonFields { text };
        for s in &self.sections.0 {
            s.write_json(self, &mut out);
        }
        if let Some(traces) = &self.traces {
            out.field("traces", traces);
        }
        out.text.push('}');
        out.text
    }
}

#[derive(Serialize)]
struct JsonHead<'a> {
    scenario: &'a str,
    scheduler: &'static str,
    cpus: usize,
    horizon_ms: f64,
    seed: u64,
    tasks: Vec<JsonTask<'a>>,
}

/// The traces' cap and what it left out: the summary's `traces` section.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct TraceSummary {
    /// Most entries each trace keeps (the first to end).
    pub limit: u64,
    /// Job records kept, and those left out once the trace was full.
    pub jobs: u64,
    pub jobs_left_out: u64,
    /// Execution segments kept, and those left out.
    pub segments: u64,
    pub segments_left_out: u64,
    /// Resource and stack waits kept, and those left out (with resources or components).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub waits: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub waits_left_out: Option<u64>,
}

/// A task's job figures as a run summary names them (the per-task fields of `--json` after
/// name, criticality and cpu). The Linux run summary prints the same fields with the same
/// meaning, built from the same [`TaskStats`], for the tasks whose jobs it counts.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct JobFigures {
    pub jobs: u64,
    pub completed: u64,
    pub deadline_misses: u64,
    pub aborted: u64,
    pub dropped: u64,
    pub killed: u64,
    pub skipped: u64,
    pub pending: u64,
    pub hit_ratio: Option<f64>,
    pub max_response_ms: Option<f64>,
    pub mean_response_ms: Option<f64>,
    pub max_tardiness_ms: f64,
    /// Completed jobs per second of the run (a non-real-time task's work units per second).
    pub throughput_per_s: f64,
}

impl JobFigures {
    /// The figures of `stats` over a run of `horizon`.
    pub fn new(stats: &TaskStats, horizon: Nanos) -> Self {
        JobFigures {
            jobs: stats.released,
            completed: stats.completed,
            deadline_misses: stats.deadline_misses,
            aborted: stats.aborted,
            dropped: stats.dropped,
            killed: stats.killed,
            skipped: stats.skipped,
            pending: stats.pending,
            hit_ratio: stats.hit_ratio(),
            max_response_ms: stats.max_response.map(Nanos::as_ms_f64),
            mean_response_ms: stats.mean_response().map(Nanos::as_ms_f64),
            max_tardiness_ms: stats.max_tardiness.as_ms_f64(),
            throughput_per_s: if horizon.0 == 0 { 0.0 } else { stats.completed as f64 / (horizon.0 as f64 * 1e-9) },
        }
    }
}

#[derive(Serialize)]
struct JsonTask<'a> {
    name: &'a str,
    criticality: &'static str,
    cpu: Option<usize>,
    #[serde(flatten)]
    jobs: JobFigures,
}
