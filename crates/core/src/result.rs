//! What a simulation run produces: per-task summaries, per-job records and execution segments.

use crate::task::Criticality;
use crate::time::Nanos;
use serde::Serialize;

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
    /// Page-level memory results, when the scenario declares `[memory]`.
    pub memory: Option<crate::memsim::MemoryResult>,
    /// The controller loop's results, when the scenario declares `[control]`.
    pub control: Option<crate::control::ControlResult>,
    /// Per shared resource, when some task has a program.
    pub resources: Option<crate::resources::ResourceResult>,
    /// Each server of the scheduler hierarchy, in file order (empty without servers).
    pub servers: Vec<ServerSummary>,
    /// The I/O device's packets and transmissions, when the scenario declares `[io]`.
    pub io: Option<crate::hires::io::IoResult>,
    /// How much of the job and segment traces the run kept, when it recorded either.
    pub traces: Option<TraceSummary>,
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

/// What one server of the scheduler hierarchy did over a run.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ServerSummary {
    pub name: String,
    /// The parent server's name, or `"root"`.
    pub parent: String,
    /// `"deferrable"`, `"polling"` or `"level"`.
    pub kind: &'static str,
    /// `None` for a level.
    pub budget_ms: Option<f64>,
    pub period_ms: Option<f64>,
    /// CPU time the jobs below it ran.
    pub consumed_ns: u64,
    /// Period boundaries before the horizon (the first is at 0).
    pub replenishments: u64,
    /// Times its budget ran out while a job below it ran.
    pub exhaustions: u64,
    /// The CPU whose hierarchy it belongs to (the first of `cpus`).
    pub cpu: usize,
    /// Every CPU it runs on: one, but for a server with a task policy over several.
    pub cpus: Vec<usize>,
    /// The tasks attached to it (a leaf's), by index.
    pub tasks: Vec<usize>,
    /// Events its child-scheduler thread delivered (zero without `event_cost_us`).
    pub events_delivered: u64,
    /// CPU time its child-scheduler thread spent delivering them (part of `consumed_ns`).
    pub event_ns: u64,
    /// Jobs of its tasks an activation (an I/O event thread's packet) made eligible with no
    /// event to deliver, outranking what ran at every level they share (counted only where
    /// events are delivered: with `event_cost_us`).
    pub direct_activations: u64,
    /// What it consumed in each of its periods, the k-th starting at k × period (budgeted
    /// servers; the first [`crate::MAX_TRACE_RECORDS`] periods).
    pub period_consumed_ns: Vec<u64>,
    /// When its budget ran out (up to the same cap).
    pub exhausted_at: Vec<Nanos>,
    /// Stretches its child-scheduler thread ran, `(start, end)` (up to the same cap).
    pub event_segments: Vec<(Nanos, Nanos)>,
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

#[derive(Serialize)]
struct JsonResult<'a> {
    scenario: &'a str,
    scheduler: &'static str,
    cpus: usize,
    horizon_ms: f64,
    seed: u64,
    tasks: Vec<JsonTask<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    memory: Option<JsonMemory<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    control: Option<JsonControl<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    servers: Vec<JsonServer<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    components: Vec<JsonComponent<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tmem: Option<&'a crate::resources::TmemResult>,
    #[serde(skip_serializing_if = "Option::is_none")]
    io: Option<JsonIo<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    traces: Option<TraceSummary>,
}

/// The I/O device over the run: packets by port, bytes by subsystem.
#[derive(Serialize)]
struct JsonIo<'a> {
    arrivals: u64,
    received: u64,
    dropped_unbound: u64,
    dropped_ring_full: u64,
    bytes_received: u64,
    bytes_sent: u64,
    ports: Vec<JsonIoPort<'a>>,
    subsystems: Vec<JsonIoSubsystem<'a>>,
}

/// One destination port (`null` task: unbound).
#[derive(Serialize)]
struct JsonIoPort<'a> {
    port: u16,
    task: Option<&'a str>,
    subsystem: Option<&'a str>,
    depth: usize,
    arrivals: u64,
    received: u64,
    dropped: u64,
    bytes_received: u64,
    mean_latency_us: Option<f64>,
    max_latency_us: Option<f64>,
    unfinished: u64,
}

/// One subsystem: what it received and sent, its bound bandwidth, and its subtree's usage.
#[derive(Serialize)]
struct JsonIoSubsystem<'a> {
    name: &'a str,
    parent: &'a str,
    depth: usize,
    packets_received: u64,
    bytes_received: u64,
    direct_activations: u64,
    bandwidth_bytes_per_s: Option<u64>,
    messages_sent: u64,
    bytes_sent: u64,
    messages_delayed: u64,
    mean_transmit_delay_us: Option<f64>,
    max_transmit_delay_us: f64,
    messages_queued: u64,
    subtree_bytes_received: u64,
    subtree_bytes_sent: u64,
}

/// One `[[component]]` over the run (`null` stacks: one per invocation).
#[derive(Serialize)]
struct JsonComponent<'a> {
    name: &'a str,
    stacks: Option<u32>,
    stack_wait: &'static str,
    invocations: u64,
    peak_concurrent_invocations: u32,
    stack_waits: u64,
    longest_stack_wait_ms: f64,
    total_stack_wait_ms: f64,
}

#[derive(Serialize)]
struct JsonServer<'a> {
    name: &'a str,
    parent: &'a str,
    kind: &'static str,
    /// The CPUs it runs on (one, but for a level with a task policy over several).
    cpus: &'a [usize],
    budget_ms: Option<f64>,
    period_ms: Option<f64>,
    consumed_ms: f64,
    replenishments: u64,
    exhaustions: u64,
    events_delivered: u64,
    event_ms: f64,
}

#[derive(Serialize)]
struct JsonControl<'a> {
    controller: &'a str,
    interval_ms: f64,
    ticks: u64,
    dropped_jobs: u64,
    ignored_actions: u64,
    groups: Vec<JsonControlGroup<'a>>,
}

/// A managed group's limits over the run (`null` max: unlimited).
#[derive(Serialize)]
struct JsonControlGroup<'a> {
    name: &'a str,
    final_max_mb: Option<f64>,
    lowest_max_mb: Option<f64>,
    peak_usage_mb: f64,
}

#[derive(Serialize)]
struct JsonMemory<'a> {
    page_bytes: u64,
    total_frames: u64,
    /// Left out for the flat layout (so its output is as before).
    #[serde(skip_serializing_if = "Option::is_none")]
    layout: Option<&'static str>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    banks: Vec<JsonBank>,
    swap: &'a str,
    tasks: Vec<JsonTaskMemory<'a>>,
    groups: Vec<JsonGroup<'a>>,
    reservations: Vec<JsonReservation<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    limit_groups: Vec<JsonReservation<'a>>,
    reserved_physical_mb: f64,
    auto_decisions: Vec<JsonAuto<'a>>,
}

#[derive(Serialize)]
struct JsonTaskMemory<'a> {
    name: &'a str,
    group: &'a str,
    reservation: Option<&'a str>,
    minor_faults: u64,
    major_faults: u64,
    pages_swapped_in: u64,
    pages_swapped_out: u64,
    resident_pages: u64,
    fault_wait_ms: f64,
    oom_kills: u64,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    shared_regions: Vec<JsonSharedUsage<'a>>,
    /// MC² layout: frames holding its pages, per bank.
    #[serde(skip_serializing_if = "<[u64]>::is_empty")]
    bank_frames: &'a [u64],
}

/// One DRAM bank of the MC² layout: who owns it (`"core 0"`, `"level C"`) and its frames.
#[derive(Serialize)]
struct JsonBank {
    bank: u32,
    owner: String,
    frames: u64,
    used_frames: u64,
}

/// Distinct pages of a shared region one task touched per ended job (any outcome): the mean
/// (the paper's Avg(S)) and the largest.
#[derive(Serialize)]
struct JsonSharedUsage<'a> {
    region: &'a str,
    jobs_ended: u64,
    mean_job_pages: f64,
    largest_job_pages: u64,
}

#[derive(Serialize)]
struct JsonGroup<'a> {
    name: &'a str,
    memory_some_us: u64,
    memory_full_us: u64,
    io_some_us: u64,
    io_full_us: u64,
}

#[derive(Serialize)]
struct JsonReservation<'a> {
    name: &'a str,
    size_pages: u64,
    charged_pages: u64,
    frames_held: u64,
    evictions: u64,
    spc_unmaps: u64,
    writebacks: u64,
}

impl<'a> JsonReservation<'a> {
    fn new((name, r): &'a (String, crate::mem::ReservationStats)) -> Self {
        JsonReservation {
            name,
            size_pages: r.size_pages,
            charged_pages: r.charged_pages,
            frames_held: r.frames_held,
            evictions: r.evictions,
            spc_unmaps: r.spc_unmaps,
            writebacks: r.writebacks,
        }
    }
}

#[derive(Serialize)]
struct JsonAuto<'a> {
    region: &'a str,
    chosen: &'static str,
    max_pages: u64,
    avg_pages: f64,
    sharers: u64,
}

impl SimResult {
    /// The summary as one JSON object (stable key order, so equal runs give equal bytes).
    pub fn to_json(&self) -> String {
        let tasks = self
            .tasks
            .iter()
            .map(|t| JsonTask {
                name: &t.name,
                criticality: t.criticality.as_str(),
                cpu: t.cpu,
                jobs: JobFigures::new(&t.stats, self.horizon),
            })
            .collect();
        let memory = self.memory.as_ref().map(|m| JsonMemory {
            page_bytes: m.page_bytes,
            total_frames: m.total_frames,
            layout: (m.layout != crate::mem::MemoryLayout::Flat).then(|| m.layout.name()),
            banks: m
                .banks
                .iter()
                .map(|b| JsonBank {
                    bank: b.bank,
                    owner: b.core.map_or_else(|| "level C".to_string(), |c| format!("core {c}")),
                    frames: b.frames,
                    used_frames: b.used_frames,
                })
                .collect(),
            swap: &m.swap,
            tasks: self
                .tasks
                .iter()
                .zip(&m.tasks)
                .map(|(t, tm)| JsonTaskMemory {
                    name: &t.name,
                    group: &tm.group,
                    reservation: tm.reservation.as_deref(),
                    minor_faults: tm.stats.minor_faults,
                    major_faults: tm.stats.major_faults,
                    pages_swapped_in: tm.stats.pages_swapped_in,
                    pages_swapped_out: tm.stats.pages_swapped_out,
                    resident_pages: tm.stats.resident_pages,
                    fault_wait_ms: tm.fault_wait.as_ms_f64(),
                    oom_kills: tm.oom_kills,
                    shared_regions: tm
                        .shared_usage
                        .iter()
                        .map(|(region, u)| JsonSharedUsage {
                            region,
                            jobs_ended: u.windows,
                            mean_job_pages: u.avg_pages(),
                            largest_job_pages: u.pages_max,
                        })
                        .collect(),
                    bank_frames: &tm.bank_frames,
                })
                .collect(),
            groups: m
                .groups
                .iter()
                .map(|(n, p)| JsonGroup {
                    name: n,
                    memory_some_us: p.memory.some_us,
                    memory_full_us: p.memory.full_us,
                    io_some_us: p.io.some_us,
                    io_full_us: p.io.full_us,
                })
                .collect(),
            reservations: m.reservations.iter().map(JsonReservation::new).collect(),
            limit_groups: m.limit_groups.iter().map(JsonReservation::new).collect(),
            reserved_physical_mb: m.stats.reserved_physical_frames as f64 * m.page_bytes as f64 / 1_048_576.0,
            auto_decisions: m
                .auto_decisions
                .iter()
                .map(|(region, d)| JsonAuto {
                    region,
                    chosen: d.chosen.name(),
                    max_pages: d.max_pages,
                    avg_pages: d.avg_pages,
                    sharers: d.n,
                })
                .collect(),
        });
        let mb = |b: u64| b as f64 / 1_048_576.0;
        let control = self.control.as_ref().map(|c| JsonControl {
            controller: &c.controller,
            interval_ms: c.interval.as_ms_f64(),
            ticks: c.ticks,
            dropped_jobs: c.dropped_jobs,
            ignored_actions: c.ignored_actions,
            groups: c
                .groups
                .iter()
                .zip(&c.extremes)
                .map(|(name, x)| JsonControlGroup {
                    name,
                    final_max_mb: x.final_max_bytes.map(mb),
                    lowest_max_mb: x.lowest_max_bytes.map(mb),
                    peak_usage_mb: mb(x.peak_usage_bytes),
                })
                .collect(),
        });
        let r = JsonResult {
            scenario: &self.source_name,
            scheduler: self.scheduler,
            cpus: self.cpus,
            horizon_ms: self.horizon.as_ms_f64(),
            seed: self.seed,
            tasks,
            memory,
            control,
            servers: self
                .servers
                .iter()
                .map(|s| JsonServer {
                    name: &s.name,
                    parent: &s.parent,
                    kind: s.kind,
                    cpus: &s.cpus,
                    budget_ms: s.budget_ms,
                    period_ms: s.period_ms,
                    consumed_ms: Nanos(s.consumed_ns).as_ms_f64(),
                    replenishments: s.replenishments,
                    exhaustions: s.exhaustions,
                    events_delivered: s.events_delivered,
                    event_ms: Nanos(s.event_ns).as_ms_f64(),
                })
                .collect(),
            components: self
                .resources
                .iter()
                .flat_map(|r| &r.components)
                .map(|c| JsonComponent {
                    name: &c.name,
                    stacks: c.stacks,
                    stack_wait: c.stack_wait,
                    invocations: c.invocations,
                    peak_concurrent_invocations: c.peak_concurrent_invocations,
                    stack_waits: c.stack_waits,
                    longest_stack_wait_ms: c.longest_stack_wait.as_ms_f64(),
                    total_stack_wait_ms: c.total_stack_wait.as_ms_f64(),
                })
                .collect(),
            tmem: self.resources.as_ref().and_then(|r| r.tmem.as_ref()),
            io: self.io.as_ref().map(json_io),
            traces: self.traces,
        };
        serde_json::to_string(&r).expect("plain data serialises")
    }
}

fn json_io(io: &crate::hires::io::IoResult) -> JsonIo<'_> {
    let us = |ns: f64| ns / 1e3;
    JsonIo {
        arrivals: io.arrivals,
        received: io.received,
        dropped_unbound: io.dropped_unbound,
        dropped_ring_full: io.dropped_ring_full,
        bytes_received: io.bytes_received,
        bytes_sent: io.bytes_sent,
        ports: io
            .ports
            .iter()
            .map(|p| JsonIoPort {
                port: p.port,
                task: p.task.as_deref(),
                subsystem: p.subsystem.as_deref(),
                depth: p.depth,
                arrivals: p.arrivals,
                received: p.received,
                dropped: p.dropped,
                bytes_received: p.bytes_received,
                mean_latency_us: p.mean_latency_ns().map(us),
                max_latency_us: (p.started > 0).then(|| us(p.latency_max_ns as f64)),
                unfinished: p.unfinished,
            })
            .collect(),
        subsystems: io
            .subsystems
            .iter()
            .map(|s| JsonIoSubsystem {
                name: &s.name,
                parent: &s.parent,
                depth: s.depth,
                packets_received: s.packets_received,
                bytes_received: s.bytes_received,
                direct_activations: s.direct_activations,
                bandwidth_bytes_per_s: s.bandwidth_bytes_per_s,
                messages_sent: s.messages_sent,
                bytes_sent: s.bytes_sent,
                messages_delayed: s.messages_delayed,
                mean_transmit_delay_us: (s.messages_sent > 0).then(|| us(s.transmit_delay_total_ns as f64 / s.messages_sent as f64)),
                max_transmit_delay_us: us(s.transmit_delay_max_ns as f64),
                messages_queued: s.messages_queued,
                subtree_bytes_received: s.subtree_bytes_received,
                subtree_bytes_sent: s.subtree_bytes_sent,
            })
            .collect(),
    }
}
