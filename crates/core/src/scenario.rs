//! Scenario files: TOML (or the same structure as JSON) → validated [`Scenario`].
//!
//! Times in files are decimal milliseconds (`period_ms = 2.5`); inside the engine they are
//! integer nanoseconds. Every problem is reported as one line naming the file, the key and
//! the reason, e.g. `rm.toml: task[2].period_ms: must be greater than 0`.

use crate::mem::{DeviceSpec, RegionKind, ReservationKind, SharePolicy};
use crate::task::{Arrival, Criticality, ExecTime, OverrunPolicy, Suspension, TaskSpec};
use crate::time::{lcm_all, Nanos};
use crate::workload::{
    ControlSpec, GroupDecl, GroupKind, MemorySpec, Pattern, RegionDecl, ReservationDecl, Stream, StreamOrder, Target, TaskMemory,
};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::fmt;

/// A scenario that could not be loaded; `Display` is the one-line message for users.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub struct ScenarioError {
    /// The file (or `<string>`) the scenario came from.
    pub source_name: String,
    /// The offending key, e.g. `task[1].deadline_ms`, or a location such as `line 3, column 7`.
    pub key: String,
    pub reason: String,
}

impl fmt::Display for ScenarioError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.key.is_empty() {
            write!(f, "{}: {}", self.source_name, self.reason)
        } else {
            write!(f, "{}: {}: {}", self.source_name, self.key, self.reason)
        }
    }
}

/// Scheduling policy of the machine.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SchedulerKind {
    /// Uniprocessor fixed priority, explicit priorities.
    Fp,
    /// Uniprocessor fixed priority, rate-monotonic.
    Rm,
    /// Uniprocessor fixed priority, deadline-monotonic.
    Dm,
    /// Uniprocessor EDF.
    Edf,
    /// Partitioned fixed priority on `cpus` CPUs.
    Pfp,
    /// Partitioned EDF.
    Pedf,
    /// Global EDF.
    Gedf,
    /// Global fixed priority.
    Gfp,
    /// Table-driven cyclic executive.
    Cyclic,
}

impl SchedulerKind {
    pub const ALL: [(&'static str, SchedulerKind); 9] = [
        ("fp", SchedulerKind::Fp),
        ("rm", SchedulerKind::Rm),
        ("dm", SchedulerKind::Dm),
        ("edf", SchedulerKind::Edf),
        ("pfp", SchedulerKind::Pfp),
        ("pedf", SchedulerKind::Pedf),
        ("gedf", SchedulerKind::Gedf),
        ("gfp", SchedulerKind::Gfp),
        ("cyclic", SchedulerKind::Cyclic),
    ];

    pub fn as_str(self) -> &'static str {
        Self::ALL.iter().find(|(_, k)| *k == self).map(|(s, _)| *s).unwrap_or("?")
    }
    pub fn is_uniprocessor(self) -> bool {
        matches!(self, SchedulerKind::Fp | SchedulerKind::Rm | SchedulerKind::Dm | SchedulerKind::Edf)
    }
    pub fn is_partitioned(self) -> bool {
        matches!(self, SchedulerKind::Pfp | SchedulerKind::Pedf)
    }
    pub fn is_fixed_priority(self) -> bool {
        matches!(self, SchedulerKind::Fp | SchedulerKind::Rm | SchedulerKind::Dm | SchedulerKind::Pfp | SchedulerKind::Gfp)
    }
}

/// How fixed priorities are assigned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PriorityOrder {
    /// From each task's `priority` (lower number = higher priority).
    Explicit,
    /// Shorter period first.
    RateMonotonic,
    /// Shorter relative deadline first.
    DeadlineMonotonic,
}

/// One window of a cyclic-executive table: within every major frame, `task` may run on
/// `cpu` during `[start, start + duration)`.
#[derive(Clone, Debug, PartialEq)]
pub struct CyclicSlot {
    pub cpu: usize,
    pub start: Nanos,
    pub duration: Nanos,
    pub task: usize,
}

#[derive(Clone, Debug, PartialEq)]
pub struct CyclicTable {
    pub major_frame: Nanos,
    /// Sorted by (cpu, start), non-overlapping per CPU.
    pub slots: Vec<CyclicSlot>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct SchedulerSpec {
    pub kind: SchedulerKind,
    /// Priority order for fixed-priority kinds (derived from the kind for fp/rm/dm).
    pub priorities: PriorityOrder,
    pub cyclic: Option<CyclicTable>,
}

/// A validated scenario, ready to simulate or analyse.
#[derive(Clone, Debug, PartialEq)]
pub struct Scenario {
    pub source_name: String,
    pub cpus: usize,
    pub scheduler: SchedulerSpec,
    pub tasks: Vec<TaskSpec>,
    pub horizon: Nanos,
    pub seed: u64,
    /// Page-level memory, when the scenario declares `[memory]`.
    pub memory: Option<MemorySpec>,
    /// What each task touches (parallel to `tasks`; all `Some` exactly when `memory` is).
    pub task_memory: Vec<Option<TaskMemory>>,
    /// The controller tick loop over the memory's `groups`, when the scenario has `[control]`.
    pub control: Option<ControlSpec>,
    /// What each task runs on the Linux platform in place of a shipped worker (parallel to
    /// `tasks`); the simulator ignores it and simulates the task's declared behaviour.
    pub task_commands: Vec<Option<TaskCommand>>,
}

/// An arbitrary program run as a task's workload on the Linux platform.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TaskCommand {
    /// Program and arguments, executed directly (no shell); a program without a `/` is looked
    /// up on `PATH`.
    pub argv: Vec<String>,
    /// Whether the program reports its jobs over the job socket (`CRITMEM_JOB_SOCKET`).
    pub reports_jobs: bool,
}

impl Scenario {
    pub fn task_index(&self, name: &str) -> Option<usize> {
        self.tasks.iter().position(|t| t.name == name)
    }
    /// Least common multiple of the periods, if it fits in 64-bit nanoseconds.
    pub fn hyperperiod(&self) -> Option<Nanos> {
        lcm_all(self.tasks.iter().map(|t| t.period.0)).map(Nanos)
    }
    pub fn total_utilization(&self) -> f64 {
        self.tasks.iter().map(TaskSpec::utilization).sum()
    }
    /// Whether any job's demand or arrival is random (so the seed matters).
    pub fn is_random(&self) -> bool {
        self.tasks.iter().any(|t| t.exec.is_random() || matches!(t.arrival, Arrival::Sporadic { .. }))
    }
}

// ---------------------------------------------------------------------------------------------
// Raw file structure. Unknown keys are rejected so typos never pass silently.

#[derive(Deserialize, Debug, Default)]
#[serde(deny_unknown_fields)]
struct RawScenario {
    machine: Option<RawMachine>,
    scheduler: Option<RawScheduler>,
    #[serde(default)]
    task: Vec<RawTask>,
    run: Option<RawRun>,
    memory: Option<RawMemory>,
    #[serde(default)]
    reservation: Vec<RawReservation>,
    #[serde(default)]
    region: Vec<RawRegion>,
    control: Option<RawControl>,
    #[serde(default)]
    group: Vec<RawGroup>,
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
struct RawControl {
    controller: String,
    interval_ms: Option<f64>,
    /// The controller's own table, checked by the controller's parser.
    config: Option<FiniteJson>,
}

/// `[control] config` as JSON. serde_json turns NaN and infinities into null, which a
/// controller would read as "left out"; this refuses them where they are written instead.
#[derive(Debug, Clone)]
struct FiniteJson(serde_json::Value);

impl<'de> Deserialize<'de> for FiniteJson {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(FiniteJsonVisitor).map(FiniteJson)
    }
}

struct FiniteJsonVisitor;

impl<'de> serde::de::Visitor<'de> for FiniteJsonVisitor {
    type Value = serde_json::Value;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Self::Value, E> {
        Ok(v.into())
    }
    fn visit_i64<E>(self, v: i64) -> Result<Self::Value, E> {
        Ok(v.into())
    }
    fn visit_u64<E>(self, v: u64) -> Result<Self::Value, E> {
        Ok(v.into())
    }
    fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Self::Value, E> {
        serde_json::Number::from_f64(v)
            .map(serde_json::Value::Number)
            .ok_or_else(|| E::custom(format!("must be a finite number (got {v})")))
    }
    fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
        Ok(v.into())
    }
    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(serde_json::Value::Null)
    }
    fn visit_none<E>(self) -> Result<Self::Value, E> {
        Ok(serde_json::Value::Null)
    }
    fn visit_some<D: serde::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        FiniteJson::deserialize(d).map(|v| v.0)
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut items = Vec::new();
        while let Some(FiniteJson(v)) = seq.next_element()? {
            items.push(v);
        }
        Ok(serde_json::Value::Array(items))
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut object = serde_json::Map::new();
        while let Some((k, FiniteJson(v))) = map.next_entry::<String, FiniteJson>()? {
            object.insert(k, v);
        }
        Ok(serde_json::Value::Object(object))
    }
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
struct RawGroup {
    name: String,
    role: Option<String>,
    bcet_ms: Option<f64>,
    floor_mb: Option<f64>,
    max_mb: Option<f64>,
    high_mb: Option<f64>,
    min_mb: Option<f64>,
    low_mb: Option<f64>,
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
struct RawMemory {
    total_mb: Option<f64>,
    page_bytes: Option<i64>,
    swap: Option<String>,
    readahead_pages: Option<i64>,
    sample_ms: Option<f64>,
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
struct RawReservation {
    name: String,
    size_mb: f64,
    kind: Option<String>,
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
struct RawRegion {
    name: String,
    size_mb: f64,
    kind: Option<String>,
    policy: Option<String>,
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
struct RawAccess {
    pattern: String,
    region: Option<String>,
    /// Sweep: MiB per job.
    mb: Option<f64>,
    /// Random, hot/cold: references per job.
    refs: Option<i64>,
    offset_mb: Option<f64>,
    span_mb: Option<f64>,
    hot_fraction: Option<f64>,
    hot_share: Option<f64>,
    /// Trace: page numbers within the target.
    pages: Option<Vec<i64>>,
    passes: Option<i64>,
    writes: Option<f64>,
    from_job: Option<i64>,
    until_job: Option<i64>,
    every_jobs: Option<i64>,
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
struct RawMachine {
    cpus: i64,
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
struct RawScheduler {
    kind: String,
    priorities: Option<String>,
    major_frame_ms: Option<f64>,
    #[serde(default)]
    slot: Vec<RawSlot>,
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
struct RawSlot {
    task: String,
    start_ms: f64,
    duration_ms: f64,
    cpu: Option<i64>,
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
struct RawRun {
    horizon_ms: Option<f64>,
    seed: Option<Seed>,
}

/// `[run] seed`: any 64-bit seed `--seed` takes. Read as i64 it would refuse 2^63 and up with
/// "expected i64", though the toml parser reads them.
#[derive(Debug, Clone, Copy)]
struct Seed(u64);

impl<'de> Deserialize<'de> for Seed {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(SeedVisitor)
    }
}

struct SeedVisitor;

impl serde::de::Visitor<'_> for SeedVisitor {
    type Value = Seed;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an integer from 0 to 2^64 - 1")
    }
    fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Seed, E> {
        u64::try_from(v).map(Seed).map_err(|_| E::custom(format!("must not be negative (got {v})")))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Seed, E> {
        Ok(Seed(v))
    }
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
struct RawTask {
    name: String,
    wcet_ms: Option<f64>,
    exec: Option<RawExec>,
    period_ms: Option<f64>,
    min_interarrival_ms: Option<f64>,
    max_interarrival_ms: Option<f64>,
    deadline_ms: Option<f64>,
    #[serde(default)]
    offset_ms: f64,
    priority: Option<i64>,
    criticality: Option<String>,
    cpu: Option<i64>,
    arrival: Option<String>,
    overrun: Option<String>,
    #[serde(default)]
    suspend: Vec<RawSuspend>,
    reservation: Option<String>,
    group: Option<String>,
    private_mb: Option<f64>,
    access_order: Option<String>,
    #[serde(default)]
    access: Vec<RawAccess>,
    command: Option<Vec<String>>,
    reports_jobs: Option<bool>,
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
struct RawExec {
    dist: String,
    min_ms: Option<f64>,
    max_ms: Option<f64>,
    mean_ms: Option<f64>,
    sd_ms: Option<f64>,
    values_ms: Option<Vec<f64>>,
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
struct RawSuspend {
    after_ms: f64,
    for_ms: f64,
}

/// Default horizon when none is given: one hyperperiod plus the largest offset, if that is
/// at most this long.
const MAX_DEFAULT_HORIZON: Nanos = Nanos::from_secs(100);

/// The text format of a scenario.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Toml,
    Json,
}

/// Values given outside the file (e.g. on the command line) that replace the file's own,
/// applied before defaults and validation so they can make a file valid.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Overrides {
    pub horizon_ms: Option<f64>,
    pub seed: Option<u64>,
}

/// Loads a scenario in either format with overrides.
pub fn load_str(text: &str, source_name: &str, format: Format, overrides: &Overrides) -> Result<Scenario, ScenarioError> {
    let raw = match format {
        Format::Toml => parse_toml(text, source_name)?,
        Format::Json => parse_json(text, source_name)?,
    };
    validate(raw, source_name, overrides)
}

/// Loads a scenario from TOML text. `source_name` is used in error messages.
pub fn load_toml_str(text: &str, source_name: &str) -> Result<Scenario, ScenarioError> {
    load_str(text, source_name, Format::Toml, &Overrides::default())
}

/// Loads a scenario from JSON text with the same structure as the TOML file.
pub fn load_json_str(text: &str, source_name: &str) -> Result<Scenario, ScenarioError> {
    load_str(text, source_name, Format::Json, &Overrides::default())
}

fn parse_toml(text: &str, source_name: &str) -> Result<RawScenario, ScenarioError> {
    let de = toml::Deserializer::parse(text).map_err(|e| toml_error(text, source_name, &e))?;
    let raw: RawScenario = serde_path_to_error::deserialize(de).map_err(|e| {
        let key = e.path().to_string();
        let inner = e.into_inner();
        ScenarioError {
            source_name: source_name.to_string(),
            key: if key == "." { String::new() } else { key },
            reason: without_type_names(&one_line(inner.message())),
        }
    })?;
    Ok(raw)
}

fn parse_json(text: &str, source_name: &str) -> Result<RawScenario, ScenarioError> {
    let mut de = serde_json::Deserializer::from_str(text);
    let raw: RawScenario = serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let key = e.path().to_string();
        ScenarioError {
            source_name: source_name.to_string(),
            key: if key == "." { String::new() } else { key },
            reason: without_type_names(&one_line(&e.into_inner().to_string())),
        }
    })?;
    // Anything after the value is an error too (serde_path_to_error stops at the value).
    de.end().map_err(|e| ScenarioError { source_name: source_name.to_string(), key: String::new(), reason: one_line(&e.to_string()) })?;
    Ok(raw)
}

/// serde names the Rust type it expected (`expected struct RawTask`); a user wrote a table.
fn without_type_names(reason: &str) -> String {
    let mut out = String::with_capacity(reason.len());
    let mut rest = reason;
    while let Some(at) = rest.find("struct Raw") {
        out.push_str(&rest[..at]);
        let after = &rest[at + "struct Raw".len()..];
        rest = after.trim_start_matches(|c: char| c.is_ascii_alphanumeric());
        out.push_str("a table");
    }
    out.push_str(rest);
    out
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn toml_error(text: &str, source_name: &str, e: &toml::de::Error) -> ScenarioError {
    let key = match e.span() {
        Some(span) => {
            let before = &text[..span.start.min(text.len())];
            let line = before.matches('\n').count() + 1;
            let col = before.len() - before.rfind('\n').map(|i| i + 1).unwrap_or(0) + 1;
            format!("line {line}, column {col}")
        }
        None => String::new(),
    };
    ScenarioError { source_name: source_name.to_string(), key, reason: one_line(e.message()) }
}

struct Ctx<'a> {
    source_name: &'a str,
}

impl Ctx<'_> {
    fn err(&self, key: impl Into<String>, reason: impl Into<String>) -> ScenarioError {
        ScenarioError { source_name: self.source_name.to_string(), key: key.into(), reason: reason.into() }
    }
    /// A non-negative time in ms.
    fn time(&self, key: &str, ms: f64) -> Result<Nanos, ScenarioError> {
        if !ms.is_finite() {
            return Err(self.err(key, "must be a finite number of milliseconds"));
        }
        if ms < 0.0 {
            return Err(self.err(key, format!("must not be negative (got {ms})")));
        }
        Nanos::try_from_ms_f64(ms).ok_or_else(|| self.err(key, format!("is too large (got {ms})")))
    }
    /// A strictly positive time in ms.
    fn positive(&self, key: &str, ms: f64) -> Result<Nanos, ScenarioError> {
        let t = self.time(key, ms)?;
        if t == Nanos::ZERO {
            let reason = if ms > 0.0 {
                format!("must be at least 1 ns, the simulator's resolution (got {ms} ms)")
            } else {
                format!("must be greater than 0 (got {ms})")
            };
            return Err(self.err(key, reason));
        }
        Ok(t)
    }
}

fn validate(raw: RawScenario, source_name: &str, overrides: &Overrides) -> Result<Scenario, ScenarioError> {
    let cx = Ctx { source_name };
    let cpus = match &raw.machine {
        None => 1,
        Some(m) if m.cpus < 1 => return Err(cx.err("machine.cpus", format!("must be at least 1 (got {})", m.cpus))),
        Some(m) if m.cpus > 4096 => return Err(cx.err("machine.cpus", format!("must be at most 4096 (got {})", m.cpus))),
        Some(m) => m.cpus as usize,
    };
    let raw_sched = raw.scheduler.as_ref().ok_or_else(|| cx.err("scheduler", "missing section [scheduler] with kind = \"fp\" | \"rm\" | \"dm\" | \"edf\" | \"pfp\" | \"pedf\" | \"gedf\" | \"gfp\" | \"cyclic\""))?;
    let kind = SchedulerKind::ALL.iter().find(|(s, _)| *s == raw_sched.kind).map(|(_, k)| *k).ok_or_else(|| {
        let names: Vec<_> = SchedulerKind::ALL.iter().map(|(s, _)| *s).collect();
        cx.err("scheduler.kind", format!("unknown scheduler {:?}; expected one of {}", raw_sched.kind, names.join(", ")))
    })?;
    if kind.is_uniprocessor() && cpus != 1 {
        return Err(cx.err(
            "machine.cpus",
            format!("scheduler {:?} is uniprocessor but machine.cpus = {cpus}; use pfp, pedf, gfp or gedf for several CPUs", kind.as_str()),
        ));
    }

    if raw.task.is_empty() {
        return Err(cx.err("task", "no tasks: add at least one [[task]] entry"));
    }
    let mut tasks = Vec::with_capacity(raw.task.len());
    let mut names = BTreeMap::new();
    for (i, rt) in raw.task.iter().enumerate() {
        let t = validate_task(&cx, i, rt, cpus, kind)?;
        if let Some(prev) = names.insert(t.name.clone(), i) {
            return Err(cx.err(format!("task[{i}].name"), format!("duplicate task name {:?} (also task[{prev}])", t.name)));
        }
        tasks.push(t);
    }

    let priorities = match kind {
        SchedulerKind::Fp => PriorityOrder::Explicit,
        SchedulerKind::Rm => PriorityOrder::RateMonotonic,
        SchedulerKind::Dm => PriorityOrder::DeadlineMonotonic,
        _ => match raw_sched.priorities.as_deref() {
            None if tasks.iter().all(|t| t.priority.is_some()) => PriorityOrder::Explicit,
            None => PriorityOrder::RateMonotonic,
            Some("explicit") => PriorityOrder::Explicit,
            Some("rm") => PriorityOrder::RateMonotonic,
            Some("dm") => PriorityOrder::DeadlineMonotonic,
            Some(other) => {
                return Err(cx.err("scheduler.priorities", format!("unknown priority order {other:?}; expected explicit, rm or dm")))
            }
        },
    };
    if raw_sched.priorities.is_some() && !matches!(kind, SchedulerKind::Pfp | SchedulerKind::Gfp) {
        return Err(cx.err("scheduler.priorities", format!("only applies to pfp and gfp, not {:?}", kind.as_str())));
    }
    if priorities == PriorityOrder::Explicit && kind.is_fixed_priority() {
        if let Some(i) = tasks.iter().position(|t| t.priority.is_none()) {
            return Err(cx.err(
                format!("task[{i}].priority"),
                "missing: explicit fixed priorities need a priority on every task (lower number = higher priority)",
            ));
        }
    }

    let cyclic = if kind == SchedulerKind::Cyclic {
        Some(validate_cyclic(&cx, raw_sched, &tasks, cpus)?)
    } else {
        if raw_sched.major_frame_ms.is_some() {
            return Err(cx.err("scheduler.major_frame_ms", "only applies to kind = \"cyclic\""));
        }
        if !raw_sched.slot.is_empty() {
            return Err(cx.err("scheduler.slot", "only applies to kind = \"cyclic\""));
        }
        None
    };

    let seed = match (overrides.seed, raw.run.as_ref().and_then(|r| r.seed)) {
        (Some(s), _) => s,
        (None, Some(Seed(s))) => s,
        (None, None) => 0,
    };
    let horizon = match (overrides.horizon_ms, raw.run.as_ref().and_then(|r| r.horizon_ms)) {
        (Some(h), _) => cx.positive("horizon_ms (override)", h)?,
        (None, Some(h)) => cx.positive("run.horizon_ms", h)?,
        (None, None) => default_horizon(&tasks)
            .ok_or_else(|| cx.err("run.horizon_ms", "missing, and the hyperperiod is too long to default to: set [run] horizon_ms"))?,
    };

    let mut memory = validate_memory(&cx, &raw, horizon)?;
    let task_memory =
        raw.task.iter().enumerate().map(|(i, rt)| validate_task_memory(&cx, i, rt, memory.as_ref())).collect::<Result<Vec<_>, _>>()?;
    if let Some(m) = memory.as_ref() {
        check_mapped_pages(&cx, m, &task_memory)?;
    }
    if let Some(m) = memory.as_mut() {
        m.groups = validate_groups(&cx, &raw, m, &tasks, &task_memory)?;
    } else if !raw.group.is_empty() {
        return Err(cx.err("group", "memory-limited groups need a [memory] section"));
    }
    let control = validate_control(&cx, &raw, memory.as_ref())?;
    let task_commands = raw.task.iter().enumerate().map(|(i, rt)| validate_command(&cx, i, rt)).collect::<Result<Vec<_>, _>>()?;

    let scenario = Scenario {
        source_name: source_name.to_string(),
        cpus,
        scheduler: SchedulerSpec { kind, priorities, cyclic },
        tasks,
        horizon,
        seed,
        memory,
        task_memory,
        control,
        task_commands,
    };
    // Building the memory once here turns admission failures into load errors.
    crate::memsim::check_setup(&scenario).map_err(|e| cx.err(e.key, e.message))?;
    Ok(scenario)
}

/// Every region has per-page state, and every task maps its private pages and each region it
/// touches, with an entry per mapped page in the task's page table.
fn check_mapped_pages(cx: &Ctx, m: &MemorySpec, task_memory: &[Option<TaskMemory>]) -> Result<(), ScenarioError> {
    let mut mapped_pages: u64 = m.regions.iter().map(|r| u64::from(r.pages)).sum();
    for tm in task_memory.iter().flatten() {
        let mut touched = vec![false; m.regions.len()];
        for s in &tm.streams {
            if let Target::Region(r) = s.target {
                touched[r] = true;
            }
        }
        let regions: u64 = m.regions.iter().zip(&touched).filter(|(_, &t)| t).map(|(r, _)| u64::from(r.pages)).sum();
        mapped_pages += u64::from(tm.private_pages) + regions;
    }
    if mapped_pages > MAX_MAPPED_PAGES {
        return Err(cx.err("task", format!("the regions and tasks map {mapped_pages} pages in all (each region once, plus private and shared pages per task); at most 2^26 are allowed")));
    }
    Ok(())
}

pub(crate) const MIB: f64 = 1_048_576.0;
/// Caps that keep a scenario within this machine's memory: frames and pages cost their
/// tables, references are made a job at a time, and the timeline keeps every sample.
const MAX_PAGES: u64 = 1 << 24;
const MAX_MAPPED_PAGES: u64 = 1 << 26;
const MAX_REFS_PER_JOB: u64 = 1 << 24;
const MAX_TIMELINE_SAMPLES: u64 = 1 << 20;
const MAX_TIMELINE_VALUES: u64 = 1 << 24;

impl Ctx<'_> {
    /// A size in MiB as whole pages (rounded up), at least `min_pages`.
    fn pages(&self, key: &str, mb: f64, page_bytes: u64, min_pages: u64) -> Result<u64, ScenarioError> {
        if !mb.is_finite() || mb < 0.0 {
            return Err(self.err(key, format!("must be a non-negative number of MiB (got {mb})")));
        }
        let pages = (mb * MIB / page_bytes as f64).ceil();
        if pages > MAX_PAGES as f64 {
            return Err(self.err(key, format!("is too large: at most 2^24 pages of {page_bytes} bytes (got {mb} MiB)")));
        }
        let pages = pages as u64;
        if pages < min_pages {
            return Err(self.err(key, format!("must be at least {min_pages} page(s) of {page_bytes} bytes (got {mb} MiB)")));
        }
        Ok(pages)
    }
    fn count(&self, key: &str, v: Option<i64>, default: i64, min: i64) -> Result<u32, ScenarioError> {
        let v = v.unwrap_or(default);
        if v < min || v > i64::from(u32::MAX / 2) {
            return Err(self.err(key, format!("must be a whole number from {min} to {} (got {v})", u32::MAX / 2)));
        }
        Ok(v as u32)
    }
    fn fraction(&self, key: &str, v: Option<f64>, default: f64) -> Result<f64, ScenarioError> {
        let v = v.unwrap_or(default);
        if !(0.0..=1.0).contains(&v) {
            return Err(self.err(key, format!("must be a fraction from 0 to 1 (got {v})")));
        }
        Ok(v)
    }
}

fn validate_memory(cx: &Ctx, raw: &RawScenario, horizon: Nanos) -> Result<Option<MemorySpec>, ScenarioError> {
    let Some(m) = &raw.memory else {
        if !raw.reservation.is_empty() {
            return Err(cx.err("reservation", "memory reservations need a [memory] section"));
        }
        if !raw.region.is_empty() {
            return Err(cx.err("region", "shared regions need a [memory] section"));
        }
        return Ok(None);
    };
    let page_bytes = match m.page_bytes {
        None => 4096,
        Some(b) if (512..=(1 << 30)).contains(&b) && (b as u64).is_power_of_two() => b as u64,
        Some(b) => return Err(cx.err("memory.page_bytes", format!("must be a power of two from 512 to 2^30 (got {b})"))),
    };
    let total_frames = cx.pages("memory.total_mb", m.total_mb.unwrap_or(4096.0), page_bytes, 16)?;
    let swap_name = m.swap.clone().unwrap_or_else(|| "slow-ssd".to_string());
    let swap = DeviceSpec::preset(&swap_name)
        .ok_or_else(|| cx.err("memory.swap", format!("unknown device {swap_name:?}; expected hdd, slow-ssd, fast-ssd or zram")))?;
    let readahead_pages = match m.readahead_pages {
        None => 8,
        Some(r) if (1..=1024).contains(&r) && (r as u64).is_power_of_two() => r as u32,
        Some(r) => return Err(cx.err("memory.readahead_pages", format!("must be a power of two from 1 to 1024 (got {r})"))),
    };
    let sample_interval = match m.sample_ms {
        Some(ms) => cx.positive("memory.sample_ms", ms)?,
        None => Nanos((horizon.0 / 500).max(1_000_000)),
    };
    // Each sample holds one value per reservation and per task, plus two totals.
    // The first sample is at time 0.
    let samples = horizon.0 / sample_interval.0.max(1) + 1;
    let values_per_sample = (raw.reservation.len() + raw.task.len() + 2) as u64;
    if samples > MAX_TIMELINE_SAMPLES || samples.saturating_mul(values_per_sample) > MAX_TIMELINE_VALUES {
        return Err(cx.err(
            "memory.sample_ms",
            format!(
                "the memory timeline would take {samples} samples of {values_per_sample} values; at most 2^20 samples and 2^24 values \
                 are kept: set a larger sample_ms"
            ),
        ));
    }
    let mut reservations = Vec::new();
    for (i, r) in raw.reservation.iter().enumerate() {
        if reservations.iter().any(|x: &ReservationDecl| x.name == r.name) || r.name.is_empty() {
            return Err(cx.err(format!("reservation[{i}].name"), format!("must be unique and non-empty (got {:?})", r.name)));
        }
        let kind = match r.kind.as_deref() {
            None | Some("hard") => ReservationKind::Hard,
            Some("firm") => ReservationKind::Firm,
            Some(k) => return Err(cx.err(format!("reservation[{i}].kind"), format!("unknown kind {k:?}; expected hard or firm"))),
        };
        let pages = cx.pages(&format!("reservation[{i}].size_mb"), r.size_mb, page_bytes, 1)?;
        reservations.push(ReservationDecl { name: r.name.clone(), pages, kind });
    }
    let mut regions = Vec::new();
    for (i, r) in raw.region.iter().enumerate() {
        if regions.iter().any(|x: &RegionDecl| x.name == r.name) || r.name.is_empty() || r.name == "private" {
            return Err(cx.err(format!("region[{i}].name"), format!("must be unique, non-empty and not \"private\" (got {:?})", r.name)));
        }
        let kind = match r.kind.as_deref() {
            None | Some("shm") => RegionKind::SharedAnon,
            Some("file") => RegionKind::SharedFile { device: crate::mem::DeviceId::SWAP },
            Some(k) => return Err(cx.err(format!("region[{i}].kind"), format!("unknown kind {k:?}; expected shm or file"))),
        };
        let policy = match r.policy.as_deref() {
            None => SharePolicy::Global,
            Some(p) => SharePolicy::from_name(p).ok_or_else(|| {
                cx.err(
                    format!("region[{i}].policy"),
                    format!("unknown policy {p:?}; expected global, private, first-touch, spc, spel or auto"),
                )
            })?,
        };
        let pages = cx.pages(&format!("region[{i}].size_mb"), r.size_mb, page_bytes, 1)? as u32;
        regions.push(RegionDecl { name: r.name.clone(), pages, kind, policy });
    }
    Ok(Some(MemorySpec {
        page_bytes,
        total_frames: total_frames as u32,
        swap_name,
        swap,
        readahead_pages,
        sample_interval,
        reservations,
        regions,
        groups: Vec::new(),
    }))
}

fn validate_groups(
    cx: &Ctx,
    raw: &RawScenario,
    m: &MemorySpec,
    tasks: &[TaskSpec],
    task_memory: &[Option<TaskMemory>],
) -> Result<Vec<GroupDecl>, ScenarioError> {
    let mut groups: Vec<GroupDecl> = Vec::new();
    let total = u64::from(m.total_frames);
    for (i, g) in raw.group.iter().enumerate() {
        let k = |f: &str| format!("group[{i}].{f}");
        if g.name.is_empty() || groups.iter().any(|x| x.name == g.name) || m.reservations.iter().any(|r| r.name == g.name) {
            return Err(cx.err(k("name"), format!("must be unique, non-empty and not a reservation's name (got {:?})", g.name)));
        }
        let members: Vec<usize> = (0..tasks.len()).filter(|&t| task_memory[t].as_ref().is_some_and(|tm| tm.group == g.name)).collect();
        if let Some(&t) = members.iter().find(|&&t| task_memory[t].as_ref().is_some_and(|tm| tm.reservation.is_some())) {
            return Err(cx.err(
                format!("task[{t}].reservation"),
                format!("task is in memory-limited group {:?}, which is its reservation; remove the key", g.name),
            ));
        }
        let kind = match g.role.as_deref() {
            None | Some("non-rt") => {
                if g.bcet_ms.is_some() {
                    return Err(cx.err(k("bcet_ms"), "only applies to role = \"soft-rt\""));
                }
                GroupKind::NonRealTime
            }
            Some("soft-rt") => {
                let bcet = g.bcet_ms.ok_or_else(|| cx.err(k("bcet_ms"), "missing: a soft-rt group needs its best-case execution time"))?;
                if members.is_empty() {
                    return Err(
                        cx.err(k("name"), format!("soft-rt group {:?} has no tasks (set group = {:?} on its task)", g.name, g.name))
                    );
                }
                GroupKind::SoftRealTime { bcet: cx.time(&k("bcet_ms"), bcet)? }
            }
            Some(r) => return Err(cx.err(k("role"), format!("unknown role {r:?}; expected soft-rt or non-rt"))),
        };
        let size = |f: &str, mb: Option<f64>, min: u64| -> Result<Option<u64>, ScenarioError> {
            let Some(mb) = mb else { return Ok(None) };
            let p = cx.pages(&k(f), mb, m.page_bytes, min)?;
            if p > total {
                return Err(cx.err(k(f), format!("exceeds the machine's memory ({} MiB)", total * m.page_bytes / 1_048_576)));
            }
            Ok(Some(p))
        };
        let floor_pages = size("floor_mb", g.floor_mb, 1)?.unwrap_or(1);
        let max_pages = size("max_mb", g.max_mb, 1)?;
        if max_pages.is_some_and(|x| x < floor_pages) {
            return Err(cx.err(k("max_mb"), "must be at least floor_mb"));
        }
        let high_pages = size("high_mb", g.high_mb, 1)?;
        if high_pages.is_some_and(|x| x < floor_pages) {
            return Err(cx.err(k("high_mb"), "must be at least floor_mb"));
        }
        let deadline = members.first().map_or(Nanos::ZERO, |&t| tasks[t].deadline);
        groups.push(GroupDecl {
            name: g.name.clone(),
            kind,
            deadline,
            floor_pages,
            max_pages,
            high_pages,
            min_pages: size("min_mb", g.min_mb, 0)?,
            low_pages: size("low_mb", g.low_mb, 0)?,
        });
    }
    Ok(groups)
}

fn validate_control(cx: &Ctx, raw: &RawScenario, memory: Option<&MemorySpec>) -> Result<Option<ControlSpec>, ScenarioError> {
    let Some(c) = &raw.control else { return Ok(None) };
    if memory.is_none_or(|m| m.groups.is_empty()) {
        return Err(cx.err("control", "a controller needs [memory] and at least one [[group]] to manage"));
    }
    let mut config = c.config.as_ref().map_or_else(|| serde_json::Value::Object(Default::default()), |c| c.0.clone());
    let err = |e: critmem_policy::PolicyError| {
        let key = if matches!(e, critmem_policy::PolicyError::UnknownController { .. }) { "control.controller" } else { "control.config" };
        cx.err(key, e.to_string())
    };
    let parsed = critmem_policy::ControllerConfig::parse(&c.controller, &config).map_err(err)?;
    let soft_rt: Vec<&str> = memory
        .map_or(&[][..], |m| &m.groups[..])
        .iter()
        .filter(|g| matches!(g.kind, GroupKind::SoftRealTime { .. }))
        .map(|g| g.name.as_str())
        .collect();
    parsed.check_group_names(&soft_rt).map_err(err)?;
    let controller = parsed.build();
    let interval = match c.interval_ms {
        Some(ms) => {
            let interval = cx.positive("control.interval_ms", ms)?;
            // Ticking at another interval than such a rule's config says would mis-scale it.
            if parsed.ticks_are_its_interval() && controller.interval_ns() != interval.0 {
                let Some(table) = config.as_object_mut() else {
                    return Err(cx.err("control.config", "must be a table"));
                };
                if table.contains_key("interval_ns") {
                    return Err(cx.err(
                        "control.interval_ms",
                        format!(
                            "{ms} ms differs from config.interval_ns ({} ns), SARA's monitoring interval and so its tick: give only one",
                            controller.interval_ns()
                        ),
                    ));
                }
                table.insert("interval_ns".into(), interval.0.into());
            }
            interval
        }
        None => Nanos(controller.interval_ns()),
    };
    Ok(Some(ControlSpec { controller: c.controller.clone(), config, interval }))
}

fn validate_task_memory(cx: &Ctx, i: usize, rt: &RawTask, memory: Option<&MemorySpec>) -> Result<Option<TaskMemory>, ScenarioError> {
    let k = |field: &str| format!("task[{i}].{field}");
    let Some(m) = memory else {
        for (present, field) in [
            (rt.reservation.is_some(), "reservation"),
            (rt.group.is_some(), "group"),
            (rt.private_mb.is_some(), "private_mb"),
            (rt.access_order.is_some(), "access_order"),
            (!rt.access.is_empty(), "access"),
        ] {
            if present {
                return Err(cx.err(k(field), "needs a [memory] section"));
            }
        }
        return Ok(None);
    };
    if !rt.access.is_empty() && !rt.suspend.is_empty() {
        return Err(cx.err(
            k("suspend"),
            "explicit self-suspensions cannot be combined with memory access streams (faults suspend jobs by themselves)",
        ));
    }
    let reservation = match &rt.reservation {
        None => None,
        Some(name) => Some(
            m.reservations
                .iter()
                .position(|r| &r.name == name)
                .ok_or_else(|| cx.err(k("reservation"), format!("no reservation named {name:?}")))?,
        ),
    };
    let group = rt.group.clone().or_else(|| reservation.map(|r| m.reservations[r].name.clone())).unwrap_or_else(|| rt.name.clone());
    let private_pages = cx.pages(&k("private_mb"), rt.private_mb.unwrap_or(0.0), m.page_bytes, 0)? as u32;
    let order = match rt.access_order.as_deref() {
        None | Some("sequence") => StreamOrder::Sequence,
        Some("interleave") => StreamOrder::Interleave,
        Some(o) => return Err(cx.err(k("access_order"), format!("unknown order {o:?}; expected sequence or interleave"))),
    };
    let mut streams = Vec::with_capacity(rt.access.len());
    for (j, a) in rt.access.iter().enumerate() {
        let k = |field: &str| format!("task[{i}].access[{j}].{field}");
        let (target, size) = match a.region.as_deref() {
            None | Some("private") => (Target::Private, private_pages),
            Some(name) => {
                let r = m
                    .regions
                    .iter()
                    .position(|r| r.name == name)
                    .ok_or_else(|| cx.err(k("region"), format!("no region named {name:?}")))?;
                (Target::Region(r), m.regions[r].pages)
            }
        };
        if size == 0 {
            return Err(cx.err(k("region"), "the target has no pages: set the task's private_mb or name a shared region"));
        }
        let offset = cx.pages(&k("offset_mb"), a.offset_mb.unwrap_or(0.0), m.page_bytes, 0)? as u32;
        if offset >= size {
            return Err(cx.err(k("offset_mb"), format!("lies beyond the target's {size} pages")));
        }
        let span = match a.span_mb {
            Some(mb) => cx.pages(&k("span_mb"), mb, m.page_bytes, 1)? as u32,
            None => size - offset,
        };
        if offset + span > size {
            return Err(cx.err(k("span_mb"), format!("offset + span exceeds the target's {size} pages")));
        }
        let forbid = |present: bool, field: &str| {
            if present {
                Err(cx.err(k(field), format!("does not apply to pattern = {:?}", a.pattern)))
            } else {
                Ok(())
            }
        };
        let pattern = match a.pattern.as_str() {
            "sweep" => {
                forbid(a.refs.is_some(), "refs")?;
                forbid(a.pages.is_some(), "pages")?;
                forbid(a.hot_fraction.is_some() || a.hot_share.is_some(), "hot_fraction")?;
                let pages = match a.mb {
                    Some(mb) => cx.pages(&k("mb"), mb, m.page_bytes, 1)? as u32,
                    None => span,
                };
                Pattern::Sweep { pages, offset, span }
            }
            "random" | "hotcold" => {
                forbid(a.mb.is_some(), "mb")?;
                forbid(a.pages.is_some(), "pages")?;
                let refs = cx.count(&k("refs"), a.refs, 0, 1)?;
                if a.pattern == "random" {
                    forbid(a.hot_fraction.is_some() || a.hot_share.is_some(), "hot_fraction")?;
                    Pattern::Random { refs, offset, span }
                } else {
                    let hot_fraction = cx.fraction(&k("hot_fraction"), a.hot_fraction, 0.2)?;
                    let hot_pages = ((f64::from(span) * hot_fraction).round() as u32).clamp(1, span);
                    let hot_share = cx.fraction(&k("hot_share"), a.hot_share, 0.8)?;
                    Pattern::HotCold { refs, offset, span, hot_pages, hot_share }
                }
            }
            "trace" => {
                forbid(a.mb.is_some(), "mb")?;
                forbid(a.refs.is_some(), "refs")?;
                let list =
                    a.pages.as_ref().ok_or_else(|| cx.err(k("pages"), "missing: pattern = \"trace\" needs pages = [page numbers]"))?;
                if list.is_empty() {
                    return Err(cx.err(k("pages"), "must list at least one page"));
                }
                let pages = list
                    .iter()
                    .enumerate()
                    .map(|(n, &p)| {
                        if p < 0 || p as u64 >= u64::from(span) {
                            Err(cx
                                .err(format!("task[{i}].access[{j}].pages[{n}]"), format!("page {p} is outside the span of {span} pages")))
                        } else {
                            Ok(offset + p as u32)
                        }
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                Pattern::Trace { pages }
            }
            "discard" => {
                if target != Target::Private {
                    return Err(
                        cx.err(k("region"), "pattern = \"discard\" frees private memory only; drop region or set it to \"private\"")
                    );
                }
                forbid(a.mb.is_some(), "mb")?;
                forbid(a.refs.is_some(), "refs")?;
                forbid(a.pages.is_some(), "pages")?;
                forbid(a.hot_fraction.is_some(), "hot_fraction")?;
                forbid(a.hot_share.is_some(), "hot_share")?;
                forbid(a.writes.is_some(), "writes")?;
                forbid(a.passes.is_some(), "passes")?;
                Pattern::Discard { offset, span }
            }
            other => {
                return Err(cx.err(k("pattern"), format!("unknown pattern {other:?}; expected sweep, random, hotcold, trace or discard")))
            }
        };
        let passes = cx.count(&k("passes"), a.passes, 1, 1)?;
        let write_fraction = cx.fraction(&k("writes"), a.writes, 0.0)?;
        let from_job = cx.count(&k("from_job"), a.from_job, 0, 0)? as u64;
        let until_job = match a.until_job {
            None => None,
            Some(u) => Some(u64::from(cx.count(&k("until_job"), Some(u), 0, 0)?)),
        };
        if until_job.is_some_and(|u| u <= from_job) {
            return Err(cx.err(k("until_job"), "must be greater than from_job"));
        }
        let every_jobs = u64::from(cx.count(&k("every_jobs"), a.every_jobs, 1, 1)?);
        streams.push(Stream { target, pattern, passes, write_fraction, from_job, until_job, every_jobs });
    }
    let refs_per_job = streams.iter().map(Stream::refs_per_job).fold(0, u64::saturating_add);
    if refs_per_job > MAX_REFS_PER_JOB {
        return Err(cx.err(k("access"), format!("makes {refs_per_job} references per job; at most 2^24 are allowed")));
    }
    Ok(Some(TaskMemory { reservation, group, private_pages, order, streams }))
}

fn validate_command(cx: &Ctx, i: usize, rt: &RawTask) -> Result<Option<TaskCommand>, ScenarioError> {
    let Some(argv) = &rt.command else {
        if rt.reports_jobs.is_some() {
            return Err(cx.err(
                format!("task[{i}].reports_jobs"),
                "applies only to a task with a command (the shipped workers always report their jobs)",
            ));
        }
        return Ok(None);
    };
    match argv.first() {
        None => return Err(cx.err(format!("task[{i}].command"), "must name a program: command = [\"program\", \"arg\", ...]")),
        Some(program) if program.is_empty() => return Err(cx.err(format!("task[{i}].command[0]"), "the program name is empty")),
        Some(_) => {}
    }
    // exec takes C strings.
    if let Some(n) = argv.iter().position(|a| a.contains('\0')) {
        return Err(cx.err(format!("task[{i}].command[{n}]"), "contains a NUL character"));
    }
    Ok(Some(TaskCommand { argv: argv.clone(), reports_jobs: rt.reports_jobs.unwrap_or(false) }))
}

fn default_horizon(tasks: &[TaskSpec]) -> Option<Nanos> {
    let hyper = lcm_all(tasks.iter().map(|t| t.period.0))?;
    let max_offset = tasks.iter().map(|t| t.offset.0).max().unwrap_or(0);
    let h = Nanos(hyper.checked_add(max_offset)?);
    (h <= MAX_DEFAULT_HORIZON).then_some(h)
}

fn validate_task(cx: &Ctx, i: usize, rt: &RawTask, cpus: usize, kind: SchedulerKind) -> Result<TaskSpec, ScenarioError> {
    let k = |field: &str| format!("task[{i}].{field}");
    if rt.name.trim().is_empty() {
        return Err(cx.err(k("name"), "must not be empty"));
    }
    let arrival_kind = rt.arrival.as_deref().unwrap_or("periodic");
    let period = match (arrival_kind, rt.period_ms, rt.min_interarrival_ms) {
        (_, Some(_), Some(_)) => return Err(cx.err(k("min_interarrival_ms"), "give either period_ms or min_interarrival_ms, not both")),
        (_, Some(p), None) => cx.positive(&k("period_ms"), p)?,
        ("sporadic", None, Some(p)) => cx.positive(&k("min_interarrival_ms"), p)?,
        (_, None, Some(_)) => return Err(cx.err(k("min_interarrival_ms"), "only applies to arrival = \"sporadic\"")),
        (_, None, None) => return Err(cx.err(k("period_ms"), "missing: every task needs period_ms (or min_interarrival_ms when sporadic)")),
    };
    let arrival = match arrival_kind {
        "periodic" => {
            if rt.max_interarrival_ms.is_some() {
                return Err(cx.err(k("max_interarrival_ms"), "only applies to arrival = \"sporadic\""));
            }
            Arrival::Periodic
        }
        "sporadic" => {
            let max_interarrival = match rt.max_interarrival_ms {
                Some(m) => cx.positive(&k("max_interarrival_ms"), m)?,
                None => period,
            };
            if max_interarrival < period {
                return Err(cx.err(k("max_interarrival_ms"), "must be at least the minimum inter-arrival time"));
            }
            Arrival::Sporadic { max_interarrival }
        }
        other => return Err(cx.err(k("arrival"), format!("unknown arrival {other:?}; expected periodic or sporadic"))),
    };
    let exec = match (&rt.wcet_ms, &rt.exec) {
        (Some(_), Some(_)) => return Err(cx.err(k("exec"), "give either wcet_ms or exec, not both")),
        (None, None) => return Err(cx.err(k("wcet_ms"), "missing: give wcet_ms or an exec distribution")),
        (Some(c), None) => ExecTime::Fixed(cx.positive(&k("wcet_ms"), *c)?),
        (None, Some(e)) => validate_exec(cx, &k("exec"), e)?,
    };
    let deadline = match rt.deadline_ms {
        Some(d) => cx.positive(&k("deadline_ms"), d)?,
        None => period,
    };
    let offset = cx.time(&k("offset_ms"), rt.offset_ms)?;
    let criticality = match rt.criticality.as_deref() {
        None | Some("C") => Criticality::C,
        Some("A") => Criticality::A,
        Some("B") => Criticality::B,
        Some("D") => Criticality::D,
        Some(other) => return Err(cx.err(k("criticality"), format!("unknown criticality {other:?}; expected A, B, C or D"))),
    };
    let cpu = match rt.cpu {
        None => None,
        Some(c) if !kind.is_partitioned() => {
            return Err(
                cx.err(k("cpu"), format!("pinning applies to partitioned schedulers (pfp, pedf), not {:?} (got cpu = {c})", kind.as_str()))
            )
        }
        Some(c) if c < 0 || c as usize >= cpus => {
            return Err(cx.err(k("cpu"), format!("CPU {c} does not exist: machine.cpus = {cpus}, so CPUs are 0..{}", cpus - 1)))
        }
        Some(c) => Some(c as usize),
    };
    let overrun = match rt.overrun.as_deref() {
        None | Some("continue") => OverrunPolicy::Continue,
        Some("abort") => OverrunPolicy::Abort,
        Some("skip") => OverrunPolicy::Skip,
        Some(other) => return Err(cx.err(k("overrun"), format!("unknown overrun policy {other:?}; expected continue, abort or skip"))),
    };
    let mut suspensions = Vec::with_capacity(rt.suspend.len());
    for (j, s) in rt.suspend.iter().enumerate() {
        let after = cx.time(&k(&format!("suspend[{j}].after_ms")), s.after_ms)?;
        let duration = cx.positive(&k(&format!("suspend[{j}].for_ms")), s.for_ms)?;
        if after > exec.bcet() {
            return Err(
                cx.err(k(&format!("suspend[{j}].after_ms")), "must not exceed the task's smallest execution time, so every job reaches it")
            );
        }
        suspensions.push(Suspension { after, duration });
    }
    suspensions.sort_by_key(|s| s.after);
    Ok(TaskSpec {
        name: rt.name.clone(),
        arrival,
        exec,
        period,
        deadline,
        offset,
        priority: rt.priority,
        criticality,
        cpu,
        overrun,
        suspensions,
    })
}

fn validate_exec(cx: &Ctx, key: &str, e: &RawExec) -> Result<ExecTime, ScenarioError> {
    let k = |field: &str| format!("{key}.{field}");
    let need = |v: Option<f64>, field: &str| v.ok_or_else(|| cx.err(k(field), format!("missing: dist = {:?} needs {field}", e.dist)));
    let forbid = |present: bool, field: &str| {
        if present {
            Err(cx.err(k(field), format!("does not apply to dist = {:?}", e.dist)))
        } else {
            Ok(())
        }
    };
    match e.dist.as_str() {
        "fixed" => {
            forbid(e.min_ms.is_some(), "min_ms")?;
            forbid(e.mean_ms.is_some(), "mean_ms")?;
            forbid(e.sd_ms.is_some(), "sd_ms")?;
            forbid(e.values_ms.is_some(), "values_ms")?;
            Ok(ExecTime::Fixed(cx.positive(&k("max_ms"), need(e.max_ms, "max_ms")?)?))
        }
        "uniform" => {
            forbid(e.mean_ms.is_some(), "mean_ms")?;
            forbid(e.sd_ms.is_some(), "sd_ms")?;
            forbid(e.values_ms.is_some(), "values_ms")?;
            let min = cx.time(&k("min_ms"), need(e.min_ms, "min_ms")?)?;
            let max = cx.positive(&k("max_ms"), need(e.max_ms, "max_ms")?)?;
            if min > max {
                return Err(cx.err(k("min_ms"), "must not exceed max_ms"));
            }
            Ok(ExecTime::Uniform { min, max })
        }
        "normal" => {
            forbid(e.values_ms.is_some(), "values_ms")?;
            let mean = cx.positive(&k("mean_ms"), need(e.mean_ms, "mean_ms")?)?;
            let sd = cx.time(&k("sd_ms"), need(e.sd_ms, "sd_ms")?)?;
            let min = cx.time(&k("min_ms"), e.min_ms.unwrap_or(0.0))?;
            let max = cx.positive(&k("max_ms"), need(e.max_ms, "max_ms")?)?;
            if min > max {
                return Err(cx.err(k("min_ms"), "must not exceed max_ms"));
            }
            if mean < min || mean > max {
                return Err(cx.err(k("mean_ms"), "must lie within [min_ms, max_ms]"));
            }
            Ok(ExecTime::Normal { mean, sd, min, max })
        }
        "empirical" => {
            forbid(e.min_ms.is_some(), "min_ms")?;
            forbid(e.max_ms.is_some(), "max_ms")?;
            forbid(e.mean_ms.is_some(), "mean_ms")?;
            forbid(e.sd_ms.is_some(), "sd_ms")?;
            let values = e.values_ms.as_ref().ok_or_else(|| cx.err(k("values_ms"), "missing: dist = \"empirical\" needs values_ms"))?;
            if values.is_empty() {
                return Err(cx.err(k("values_ms"), "must list at least one value"));
            }
            let v =
                values.iter().enumerate().map(|(j, &x)| cx.positive(&format!("{key}.values_ms[{j}]"), x)).collect::<Result<Vec<_>, _>>()?;
            Ok(ExecTime::Empirical(v))
        }
        other => Err(cx.err(k("dist"), format!("unknown distribution {other:?}; expected fixed, uniform, normal or empirical"))),
    }
}

fn validate_cyclic(cx: &Ctx, raw: &RawScheduler, tasks: &[TaskSpec], cpus: usize) -> Result<CyclicTable, ScenarioError> {
    let major_frame = cx.positive(
        "scheduler.major_frame_ms",
        raw.major_frame_ms.ok_or_else(|| cx.err("scheduler.major_frame_ms", "missing: a cyclic executive needs major_frame_ms"))?,
    )?;
    if raw.slot.is_empty() {
        return Err(cx.err("scheduler.slot", "a cyclic executive needs at least one [[scheduler.slot]] (task, start_ms, duration_ms)"));
    }
    let mut slots = Vec::with_capacity(raw.slot.len());
    for (j, s) in raw.slot.iter().enumerate() {
        let k = |f: &str| format!("scheduler.slot[{j}].{f}");
        let task = tasks.iter().position(|t| t.name == s.task).ok_or_else(|| cx.err(k("task"), format!("no task named {:?}", s.task)))?;
        let start = cx.time(&k("start_ms"), s.start_ms)?;
        let duration = cx.positive(&k("duration_ms"), s.duration_ms)?;
        if start + duration > major_frame {
            return Err(cx.err(k("duration_ms"), "slot ends after the major frame"));
        }
        let cpu = match s.cpu {
            None => 0,
            Some(c) if c < 0 || c as usize >= cpus => {
                return Err(cx.err(k("cpu"), format!("CPU {c} does not exist: machine.cpus = {cpus}")))
            }
            Some(c) => c as usize,
        };
        slots.push((j, CyclicSlot { cpu, start, duration, task }));
    }
    slots.sort_by_key(|(_, s)| (s.cpu, s.start));
    for w in slots.windows(2) {
        let (a, b) = (&w[0].1, &w[1].1);
        if a.cpu == b.cpu && a.start + a.duration > b.start {
            return Err(cx.err(format!("scheduler.slot[{}]", w[1].0), format!("overlaps slot[{}] on CPU {}", w[0].0, a.cpu)));
        }
    }
    Ok(CyclicTable { major_frame, slots: slots.into_iter().map(|(_, s)| s).collect() })
}

#[cfg(test)]
mod tests {
    use super::*;

    const RM: &str = r#"
[machine]
cpus = 1
[scheduler]
kind = "rm"
[run]
horizon_ms = 36
seed = 3
[[task]]
name = "a"
wcet_ms = 1
period_ms = 4
"#;

    fn err_of(text: &str) -> String {
        load_toml_str(text, "s.toml").unwrap_err().to_string()
    }

    #[test]
    fn minimal_scenario_loads_with_defaults() {
        let s = load_toml_str(RM, "s.toml").unwrap();
        assert_eq!(s.tasks[0].deadline, Nanos::from_ms(4));
        assert_eq!(s.tasks[0].criticality, Criticality::C);
        assert_eq!(s.horizon, Nanos::from_ms(36));
        assert_eq!(s.seed, 3);
    }

    #[test]
    fn a_seed_takes_every_u64_and_refuses_negatives_and_non_integers() {
        let with = |v: &str| RM.replace("seed = 3", &format!("seed = {v}"));
        assert_eq!(load_toml_str(&with("9223372036854775808"), "s.toml").unwrap().seed, 1 << 63);
        assert_eq!(load_toml_str(&with("18446744073709551615"), "s.toml").unwrap().seed, u64::MAX);
        assert_eq!(load_toml_str(&with("0"), "s.toml").unwrap().seed, 0);
        assert_eq!(err_of(&with("-1")), "s.toml: run.seed: must not be negative (got -1)");
        let e = err_of(&with("1.5"));
        assert!(e.starts_with("s.toml: run.seed: ") && e.contains("expected an integer from 0 to 2^64 - 1"), "{e}");
        let e = err_of(&with("18446744073709551616"));
        assert!(e.starts_with("s.toml: "), "{e}");
        assert!(!e.contains('\n'), "{e}");
    }

    #[test]
    fn unknown_key_is_named() {
        let e = err_of(&RM.replace("wcet_ms = 1", "wcet_ms = 1\nperiodd_ms = 3"));
        assert!(e.starts_with("s.toml: task[0]"), "{e}");
        assert!(e.contains("periodd_ms"), "{e}");
    }

    #[test]
    fn bad_values_name_file_key_and_reason() {
        assert_eq!(err_of(&RM.replace("period_ms = 4", "period_ms = -4")), "s.toml: task[0].period_ms: must not be negative (got -4)");
        assert_eq!(err_of(&RM.replace("period_ms = 4", "period_ms = 0")), "s.toml: task[0].period_ms: must be greater than 0 (got 0)");
        assert_eq!(
            err_of(&RM.replace("period_ms = 4", "period_ms = 1e-9")),
            "s.toml: task[0].period_ms: must be at least 1 ns, the simulator's resolution (got 0.000000001 ms)"
        );
        // The user wrote an array where a table belongs; serde's Rust type name stays out.
        let err = err_of("task = [\"a\"]\n[scheduler]\nkind = \"rm\"\n");
        assert!(!err.contains("Raw") && err.contains("a table"), "{err}");
        assert!(err_of(&RM.replace("wcet_ms = 1", "wcet_ms = 1\ndeadline_ms = 0")).starts_with("s.toml: task[0].deadline_ms:"));
        assert!(err_of(&RM.replace("cpus = 1", "cpus = 0")).starts_with("s.toml: machine.cpus: must be at least 1"));
        assert!(err_of(&RM.replace("\"rm\"", "\"lottery\"")).starts_with("s.toml: scheduler.kind: unknown scheduler \"lottery\""));
        assert!(err_of(&RM.replace("period_ms = 4", "")).starts_with("s.toml: task[0].period_ms: missing"));
    }

    #[test]
    fn pinning_to_missing_cpu_is_rejected() {
        let text = RM.replace("\"rm\"", "\"pfp\"").replace("cpus = 1", "cpus = 2").replace("period_ms = 4", "period_ms = 4\ncpu = 2");
        assert_eq!(err_of(&text), "s.toml: task[0].cpu: CPU 2 does not exist: machine.cpus = 2, so CPUs are 0..1");
    }

    #[test]
    fn syntax_error_gives_line_and_column() {
        let e = err_of("[machine]\ncpus = = 1\n");
        assert!(e.starts_with("s.toml: line 2, column"), "{e}");
        assert!(!e.contains('\n'));
    }

    #[test]
    fn json_has_the_same_structure() {
        let s = load_json_str(
            r#"{"scheduler": {"kind": "edf"}, "task": [{"name": "x", "wcet_ms": 1, "period_ms": 5}], "run": {"horizon_ms": 10}}"#,
            "<dict>",
        )
        .unwrap();
        assert_eq!(s.scheduler.kind, SchedulerKind::Edf);
        let e = load_json_str(r#"{"scheduler": {"kind": "edf"}, "task": [{"name": "x"}]}"#, "<dict>").unwrap_err();
        assert_eq!(e.key, "task[0].period_ms");
        let e = load_json_str(r#"{"scheduler": {"kind": "edf"}} trailing"#, "<dict>").unwrap_err();
        assert!(e.reason.contains("trailing"), "{e}");
    }

    #[test]
    fn a_command_is_kept_for_linux_and_checked() {
        let with = |extra: &str| RM.replace("period_ms = 4", &format!("period_ms = 4\n{extra}"));
        let s = load_toml_str(&with("command = [\"python3\", \"job.py\", \"\"]\nreports_jobs = true"), "s.toml").unwrap();
        assert_eq!(
            s.task_commands,
            [Some(TaskCommand { argv: vec!["python3".into(), "job.py".into(), String::new()], reports_jobs: true })]
        );
        assert_eq!(load_toml_str(RM, "s.toml").unwrap().task_commands, [None]);
        assert_eq!(err_of(&with("command = []")), "s.toml: task[0].command: must name a program: command = [\"program\", \"arg\", ...]");
        assert_eq!(err_of(&with("command = [\"\"]")), "s.toml: task[0].command[0]: the program name is empty");
        assert_eq!(err_of(&with("command = [\"a\", \"b\\u0000\"]")), "s.toml: task[0].command[1]: contains a NUL character");
        assert!(err_of(&with("reports_jobs = true")).starts_with("s.toml: task[0].reports_jobs: applies only to a task with a command"));
        assert!(err_of(&with("command = \"ls -l\"")).starts_with("s.toml: "), "a string is not an argv");
    }

    #[test]
    fn overrides_apply_before_defaults_and_validation() {
        // Periods whose hyperperiod is far too long to default to.
        let long = "[scheduler]\nkind = \"edf\"\n[[task]]\nname = \"a\"\nwcet_ms = 1\nperiod_ms = 99.999989\n[[task]]\nname = \"b\"\nwcet_ms = 1\nperiod_ms = 99.999971\n";
        assert_eq!(load_toml_str(long, "l.toml").unwrap_err().key, "run.horizon_ms");
        let o = Overrides { horizon_ms: Some(50.0), seed: Some(9) };
        let s = load_str(long, "l.toml", Format::Toml, &o).unwrap();
        assert_eq!((s.horizon, s.seed), (Nanos::from_ms(50), 9));
        let s = load_str(RM, "s.toml", Format::Toml, &o).unwrap();
        assert_eq!((s.horizon, s.seed), (Nanos::from_ms(50), 9), "overrides beat the file");
        let bad = Overrides { horizon_ms: Some(0.0), seed: None };
        assert_eq!(
            load_str(RM, "s.toml", Format::Toml, &bad).unwrap_err().to_string(),
            "s.toml: horizon_ms (override): must be greater than 0 (got 0)"
        );
    }
}
