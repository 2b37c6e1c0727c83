//! `critmem._core`: thin PyO3 bindings over critmem-core and critmem-analysis.
//!
//! Everything here converts; nothing decides. Loading and column building are plain Rust
//! (unit-tested below without Python); the `#[pyfunction]`s only move data across.
//! Errors cross into Python in one place, `From<BindingError> for PyErr`.

use std::time::Instant;

mod hires;
mod mc2;
mod plugins;
mod py_sched;
mod writers;

use critmem_core::opcost::{self, OpCostError};
use critmem_core::{load_str, Format, Nanos, Outcome, Overrides, Scenario, SimOptions, SimResult};
use critmem_policy::sara::{job_stalls, JobSpan, StallTick};
use critmem_policy::{PolicyError, SaraConfig, CONTROLLERS};
use pyo3::create_exception;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

type CoreError = critmem_core::ScenarioError;

create_exception!(
    critmem._core,
    ScenarioError,
    PyValueError,
    "A scenario that could not be loaded. The message is one line: `file: key: reason`."
);

/// Every error a binding can raise. They cross into Python in one place, the [`From`] below:
/// a scenario's as `ScenarioError`, everything else as `ValueError`, each with its one-line
/// message.
#[derive(Debug)]
enum BindingError {
    Scenario(CoreError),
    Policy(PolicyError),
    OpCost(OpCostError),
    /// An argument the Rust side cannot take (a length mismatch, a negative time).
    Argument(String),
    /// Raised by Python itself while results were handed over.
    Python(PyErr),
}

impl From<BindingError> for PyErr {
    fn from(e: BindingError) -> PyErr {
        match e {
            BindingError::Scenario(e) => ScenarioError::new_err(e.to_string()),
            BindingError::Policy(e) => PyValueError::new_err(e.to_string()),
            BindingError::OpCost(e) => PyValueError::new_err(e.to_string()),
            BindingError::Argument(message) => PyValueError::new_err(message),
            BindingError::Python(e) => e,
        }
    }
}

impl From<CoreError> for BindingError {
    fn from(e: CoreError) -> Self {
        BindingError::Scenario(e)
    }
}

impl From<PolicyError> for BindingError {
    fn from(e: PolicyError) -> Self {
        BindingError::Policy(e)
    }
}

impl From<OpCostError> for BindingError {
    fn from(e: OpCostError) -> Self {
        BindingError::OpCost(e)
    }
}

impl From<writers::WriteError> for BindingError {
    fn from(e: writers::WriteError) -> Self {
        match e {
            // An OSError with its errno, as Python's own writes raise.
            writers::WriteError::Io(e) => BindingError::Python(PyErr::from(e)),
            writers::WriteError::Argument(m) => BindingError::Argument(m),
        }
    }
}

impl From<PyErr> for BindingError {
    fn from(e: PyErr) -> Self {
        BindingError::Python(e)
    }
}

fn parse_format(s: &str) -> Result<Format, BindingError> {
    match s {
        "toml" => Ok(Format::Toml),
        "json" => Ok(Format::Json),
        other => Err(BindingError::Argument(format!("format must be \"toml\" or \"json\", not {other:?}"))),
    }
}

/// Loads and validates a scenario; overrides apply before the file's defaults and checks.
fn load(text: &str, source_name: &str, format: Format, horizon_ms: Option<f64>, seed: Option<u64>) -> Result<Scenario, CoreError> {
    load_str(text, source_name, format, &Overrides { horizon_ms, seed })
}

/// Outcomes in the order of their codes (`critmem.api.OUTCOME_DTYPE`'s categories).
const OUTCOMES: [Outcome; 5] = [Outcome::Completed, Outcome::Aborted, Outcome::Killed, Outcome::Unfinished, Outcome::Pending];

fn i64s(values: impl Iterator<Item = i64>) -> RawColumn {
    RawColumn { dtype: "<i8", bytes: values.flat_map(i64::to_le_bytes).collect() }
}

fn ms_or_nan(t: Option<Nanos>) -> f64 {
    t.map_or(f64::NAN, Nanos::as_ms_f64)
}

/// The per-job trace as raw columns, in release order (jobs released together in the order
/// they ended): `task` indexes the scenario's tasks, times are decimal ms with NaN for a time
/// the job never reached, `outcome` is a code into [`OUTCOMES`], `last_cpu` is -1 where the
/// job never ran. Built column by column, so a million jobs take no copy beyond the bytes.
fn job_columns(result: &SimResult) -> Vec<(String, RawColumn)> {
    let jobs = &result.jobs;
    let mut order: Vec<usize> = (0..jobs.len()).collect();
    order.sort_by_key(|&i| jobs[i].release);
    let each = || order.iter().map(|&i| &jobs[i]);
    let f = |name: &str, value: &dyn Fn(&critmem_core::JobRecord) -> f64| (name.to_string(), RawColumn::f64s(each().map(value)));
    vec![
        ("task".to_string(), i64s(each().map(|j| i64::from(j.task)))),
        ("job".to_string(), RawColumn::u64s(each().map(|j| j.index))),
        f("release_ms", &|j| j.release.as_ms_f64()),
        f("deadline_ms", &|j| j.abs_deadline.as_ms_f64()),
        f("demand_ms", &|j| j.demand.as_ms_f64()),
        f("executed_ms", &|j| j.executed.as_ms_f64()),
        f("start_ms", &|j| ms_or_nan(j.start)),
        f("completion_ms", &|j| ms_or_nan(j.completion)),
        f("response_ms", &|j| ms_or_nan(j.response())),
        f("tardiness_ms", &|j| j.tardiness(result.horizon).as_ms_f64()),
        ("missed".to_string(), RawColumn { dtype: "|b1", bytes: each().map(|j| u8::from(j.missed())).collect() }),
        (
            "outcome".to_string(),
            i64s(each().map(|j| OUTCOMES.iter().position(|&x| x == j.outcome).expect("every outcome has a code") as i64)),
        ),
        ("last_cpu".to_string(), i64s(each().map(|j| j.last_cpu.map_or(-1, i64::from)))),
    ]
}

/// Execution segments as raw columns, in the order the engine emitted them: cpu, task (an
/// index into the scenario's tasks), job, start_ms, end_ms.
fn segment_columns(result: &SimResult) -> Vec<(String, RawColumn)> {
    let segs = &result.segments;
    vec![
        ("cpu".to_string(), i64s(segs.iter().map(|s| i64::from(s.cpu)))),
        ("task".to_string(), i64s(segs.iter().map(|s| i64::from(s.task)))),
        ("job".to_string(), RawColumn::u64s(segs.iter().map(|s| s.job))),
        ("start_ms".to_string(), RawColumn::f64s(segs.iter().map(|s| s.start.as_ms_f64()))),
        ("end_ms".to_string(), RawColumn::f64s(segs.iter().map(|s| s.end.as_ms_f64()))),
    ]
}

/// The waits of jobs for resources, stacks and SRP's start check as columns (task, job,
/// resource, start_ms, end_ms); `None` when the scenario declares no resource and no component.
fn wait_columns(result: &SimResult) -> Option<WaitColumns> {
    let r = result.resources().filter(|r| !r.resources.is_empty() || !r.components.is_empty())?;
    let mut c = WaitColumns::default();
    for w in &r.waits {
        c.task.push(result.tasks[w.task as usize].name.clone());
        c.job.push(w.index);
        c.resource.push(w.resource.clone());
        c.start_ms.push(w.start.as_ms_f64());
        c.end_ms.push(w.end.as_ms_f64());
    }
    Some(c)
}

/// [`wait_columns`]' columns.
#[derive(Debug, Default, PartialEq)]
struct WaitColumns {
    task: Vec<String>,
    job: Vec<u64>,
    resource: Vec<String>,
    start_ms: Vec<f64>,
    end_ms: Vec<f64>,
}

impl WaitColumns {
    fn into_dict(self, py: Python<'_>) -> PyResult<Py<PyDict>> {
        let d = PyDict::new(py);
        d.set_item("task", self.task)?;
        d.set_item("job", self.job)?;
        d.set_item("resource", self.resource)?;
        d.set_item("start_ms", self.start_ms)?;
        d.set_item("end_ms", self.end_ms)?;
        Ok(d.unbind())
    }
}

/// The scheduler hierarchy's servers as columns, times in decimal ms (all empty without
/// servers): one row per server; per period of each budgeted server what it consumed; the
/// stretches each server's child-scheduler thread delivered events; the instants each
/// server's budget ran out; and each task's leaf server.
#[derive(Debug, Default, PartialEq)]
struct ServerColumns {
    name: Vec<String>,
    parent: Vec<String>,
    kind: Vec<&'static str>,
    cpu: Vec<usize>,
    budget_ms: Vec<Option<f64>>,
    period_ms: Vec<Option<f64>>,
    consumed_ms: Vec<f64>,
    replenishments: Vec<u64>,
    exhaustions: Vec<u64>,
    events_delivered: Vec<u64>,
    event_ms: Vec<f64>,
    /// server, period_start_ms, consumed_ms
    supply: (Vec<String>, Vec<f64>, Vec<f64>),
    /// server, cpu, start_ms, end_ms
    events: (Vec<String>, Vec<usize>, Vec<f64>, Vec<f64>),
    /// server, cpu, time_ms
    exhausted: (Vec<String>, Vec<usize>, Vec<f64>),
    task_server: Vec<Option<String>>,
    /// Only when a server reserves memory in the page-level model.
    memory: Option<ServerMemoryColumns>,
}

/// memory_reserved_mb, memory_kind, peak_resident_pages of each server.
type ServerMemoryColumns = (Vec<Option<f64>>, Vec<Option<&'static str>>, Vec<u64>);

impl ServerColumns {
    fn new(result: &SimResult) -> ServerColumns {
        let mut c = ServerColumns { task_server: vec![None; result.tasks.len()], ..ServerColumns::default() };
        let ms = |ns: u64| Nanos(ns).as_ms_f64();
        for s in result.servers() {
            c.name.push(s.name.clone());
            c.parent.push(s.parent.clone());
            c.kind.push(s.kind);
            c.cpu.push(s.cpu);
            c.budget_ms.push(s.budget_ms);
            c.period_ms.push(s.period_ms);
            c.consumed_ms.push(ms(s.consumed_ns));
            c.replenishments.push(s.replenishments);
            c.exhaustions.push(s.exhaustions);
            c.events_delivered.push(s.events_delivered);
            c.event_ms.push(ms(s.event_ns));
            let period_ms = s.period_ms.unwrap_or(0.0);
            for (k, &used) in s.period_consumed_ns.iter().enumerate() {
                c.supply.0.push(s.name.clone());
                c.supply.1.push(k as f64 * period_ms);
                c.supply.2.push(ms(used));
            }
            for &(start, end) in &s.event_segments {
                c.events.0.push(s.name.clone());
                c.events.1.push(s.cpu);
                c.events.2.push(start.as_ms_f64());
                c.events.3.push(end.as_ms_f64());
            }
            for &at in &s.exhausted_at {
                c.exhausted.0.push(s.name.clone());
                c.exhausted.1.push(s.cpu);
                c.exhausted.2.push(at.as_ms_f64());
            }
            for &t in &s.tasks {
                c.task_server[t] = Some(s.name.clone());
            }
            if let Some(m) = &s.memory {
                let (reserved, kind, peak) = c.memory.get_or_insert_with(Default::default);
                reserved.push(m.reserved_bytes.map(|b| b as f64 / 1_048_576.0));
                kind.push(m.kind);
                peak.push(m.peak_resident_pages);
            }
        }
        c
    }

    /// (servers, server_supply, server_events, server_exhaustions, task_servers)
    #[allow(clippy::type_complexity)] // the five values SimOutput carries
    fn into_dicts(self, py: Python<'_>) -> PyResult<(Py<PyDict>, Py<PyDict>, Py<PyDict>, Py<PyDict>, Vec<Option<String>>)> {
        let d = PyDict::new(py);
        d.set_item("name", self.name)?;
        d.set_item("parent", self.parent)?;
        d.set_item("kind", self.kind)?;
        d.set_item("cpu", self.cpu)?;
        d.set_item("budget_ms", self.budget_ms)?;
        d.set_item("period_ms", self.period_ms)?;
        d.set_item("consumed_ms", self.consumed_ms)?;
        d.set_item("replenishments", self.replenishments)?;
        d.set_item("exhaustions", self.exhaustions)?;
        d.set_item("events_delivered", self.events_delivered)?;
        d.set_item("event_ms", self.event_ms)?;
        if let Some((reserved, kind, peak)) = self.memory {
            d.set_item("memory_reserved_mb", reserved)?;
            d.set_item("memory_kind", kind)?;
            d.set_item("peak_resident_pages", peak)?;
        }
        let supply = PyDict::new(py);
        supply.set_item("server", self.supply.0)?;
        supply.set_item("period_start_ms", self.supply.1)?;
        supply.set_item("consumed_ms", self.supply.2)?;
        let events = PyDict::new(py);
        events.set_item("server", self.events.0)?;
        events.set_item("cpu", self.events.1)?;
        events.set_item("start_ms", self.events.2)?;
        events.set_item("end_ms", self.events.3)?;
        let exhausted = PyDict::new(py);
        exhausted.set_item("server", self.exhausted.0)?;
        exhausted.set_item("cpu", self.exhausted.1)?;
        exhausted.set_item("time_ms", self.exhausted.2)?;
        Ok((d.unbind(), supply.unbind(), events.unbind(), exhausted.unbind(), self.task_server))
    }
}

/// The memory timeline as columns: time_ms, reserved_physical_mb, used_mb, then
/// `reservation_pages:<name>` (pages it accounts) and `resident_pages:<task>` per object.
fn timeline_dict(py: Python<'_>, result: &SimResult) -> PyResult<Py<PyDict>> {
    let d = PyDict::new(py);
    let Some(m) = &result.memory() else { return Ok(d.unbind()) };
    let mb = |frames: u64| frames as f64 * m.page_bytes as f64 / 1_048_576.0;
    d.set_item("time_ms", m.timeline.iter().map(|s| s.time.as_ms_f64()).collect::<Vec<_>>())?;
    d.set_item("reserved_physical_mb", m.timeline.iter().map(|s| mb(s.reserved_physical_frames)).collect::<Vec<_>>())?;
    d.set_item("used_mb", m.timeline.iter().map(|s| mb(s.used_frames)).collect::<Vec<_>>())?;
    for (i, (name, _)) in m.reservations.iter().enumerate() {
        d.set_item(format!("reservation_pages:{name}"), m.timeline.iter().map(|s| s.reservation_pages[i]).collect::<Vec<_>>())?;
    }
    for (i, t) in result.tasks.iter().enumerate() {
        d.set_item(format!("resident_pages:{}", t.name), m.timeline.iter().map(|s| s.task_resident_pages[i]).collect::<Vec<_>>())?;
    }
    Ok(d.unbind())
}

/// A numeric column as raw little-endian bytes and its numpy dtype, for `numpy.frombuffer`:
/// one buffer per column instead of a Python object per value (a long run's control timeline
/// has hundreds of thousands of rows).
#[derive(Debug, PartialEq)]
struct RawColumn {
    /// `<f8`, `<i8`, or `<u8` (the dtype pandas infers from the same numbers as Python ints).
    dtype: &'static str,
    bytes: Vec<u8>,
}

impl RawColumn {
    fn f64s(values: impl Iterator<Item = f64>) -> RawColumn {
        RawColumn { dtype: "<f8", bytes: values.flat_map(f64::to_le_bytes).collect() }
    }

    fn u64s(values: impl Iterator<Item = u64>) -> RawColumn {
        let (mut bytes, mut largest) = (Vec::new(), 0);
        for v in values {
            bytes.extend_from_slice(&v.to_le_bytes());
            largest = largest.max(v);
        }
        RawColumn { dtype: if i64::try_from(largest).is_ok() { "<i8" } else { "<u8" }, bytes }
    }
}

/// The control timeline (one row per tick) as columns: time_ms, then per group
/// `max_mb:<g>` and `high_mb:<g>` (NaN when unlimited), `usage_mb:<g>`, and the cumulative PSI totals
/// `memory_some_us:<g>` and `io_some_us:<g>`. Empty without `[control]`. Built without the
/// GIL; [`raw_dict`] hands it over.
fn control_columns(result: &SimResult) -> Vec<(String, RawColumn)> {
    let Some(c) = &result.control() else { return Vec::new() };
    let mb = |b: u64| b as f64 / 1_048_576.0;
    let mut cols = vec![("time_ms".to_string(), RawColumn::f64s(c.timeline.iter().map(|s| s.time.as_ms_f64())))];
    for (gi, name) in c.groups.iter().enumerate() {
        let points = || c.timeline.iter().map(move |s| &s.groups[gi]);
        cols.push((format!("max_mb:{name}"), RawColumn::f64s(points().map(|p| p.max_bytes.map_or(f64::NAN, mb)))));
        cols.push((format!("high_mb:{name}"), RawColumn::f64s(points().map(|p| p.high_bytes.map_or(f64::NAN, mb)))));
        cols.push((format!("usage_mb:{name}"), RawColumn::f64s(points().map(|p| mb(p.usage_bytes)))));
        cols.push((format!("memory_some_us:{name}"), RawColumn::u64s(points().map(|p| p.memory_some_us))));
        cols.push((format!("io_some_us:{name}"), RawColumn::u64s(points().map(|p| p.io_some_us))));
    }
    cols
}

/// Columns as a dict of name → (dtype, bytes).
fn raw_dict(py: Python<'_>, columns: Vec<(String, RawColumn)>) -> PyResult<Py<PyDict>> {
    let d = PyDict::new(py);
    for (name, col) in columns {
        d.set_item(name, (col.dtype, PyBytes::new(py, &col.bytes)))?;
    }
    Ok(d.unbind())
}

/// What one simulation run hands to Python.
#[pyclass(frozen, get_all, module = "critmem._core")]
struct SimOutput {
    /// The core's summary JSON, byte for byte.
    summary_json: String,
    /// The seed actually used (the override, or the scenario's).
    seed: u64,
    /// Events the engine handled.
    events: u64,
    /// Least common multiple of the periods in ms, if it fits in 64-bit nanoseconds.
    hyperperiod_ms: Option<f64>,
    /// Per-job columns as (numpy dtype, little-endian bytes), empty unless jobs were
    /// recorded: `task` indexes the scenario's tasks, `outcome` is a code (`OUTCOMES`),
    /// `last_cpu` is -1 for a job that never ran, NaN marks a time the job never reached.
    jobs: Py<PyDict>,
    /// Jobs not in `jobs` because the trace was full (the trace limit).
    jobs_left_out: u64,
    /// Execution-segment columns, raw as `jobs` (`task` indexes the scenario's tasks).
    segments: Py<PyDict>,
    /// Segments not in `segments` because the trace was full.
    segments_left_out: u64,
    /// Memory timeline columns (empty unless the scenario declares [memory]).
    memory_timeline: Py<PyDict>,
    /// Control-loop timeline columns (empty unless the scenario declares [control]), each as
    /// (numpy dtype, little-endian bytes).
    control_timeline: Py<PyDict>,
    /// Controller ticks per control-timeline row (1 unless a long run thinned it).
    control_timeline_every_ticks: u64,
    /// One row per server of the scheduler hierarchy (empty lists without servers).
    servers: Py<PyDict>,
    /// What each budgeted server consumed in each of its periods.
    server_supply: Py<PyDict>,
    /// Stretches each server's child-scheduler thread ran delivering events.
    server_events: Py<PyDict>,
    /// Instants each server's budget ran out.
    server_exhaustions: Py<PyDict>,
    /// Each task's leaf server, in task order (None without servers).
    task_servers: Vec<Option<String>>,
    /// Each wait of a job for a resource, a component's stack or SRP's start check (empty
    /// lists unless jobs were recorded; None when the scenario declares no resource and no
    /// component).
    waits: Option<Py<PyDict>>,
    /// Waits not in `waits` because the trace was full.
    waits_left_out: u64,
    /// What the scenario allows but rarely means, one line each naming the key.
    warnings: Vec<String>,
}

/// Calls a Python `progress(now_ms)` from the running simulation at most every
/// [`ProgressReport::EVERY`] of wall time (the first after [`ProgressReport::FIRST`], so a short
/// run shows nothing), and lets Ctrl-C stop the run: the pending signal's exception, or one the
/// callback raised, stops it and is raised when the call returns.
struct ProgressReport {
    callback: Option<Py<PyAny>>,
    started: Instant,
    last: Option<Instant>,
    stopped: Option<PyErr>,
}

impl ProgressReport {
    const FIRST: std::time::Duration = std::time::Duration::from_millis(500);
    const EVERY: std::time::Duration = std::time::Duration::from_millis(100);

    fn new(callback: Option<Py<PyAny>>) -> Self {
        ProgressReport { callback, started: Instant::now(), last: None, stopped: None }
    }

    /// Whether the run goes on.
    fn tell(&mut self, now: Nanos) -> bool {
        if plugins::has_fault() {
            self.stopped = plugins::take_fault();
            return false;
        }
        let due = match self.last {
            None => self.started.elapsed() >= Self::FIRST,
            Some(last) => last.elapsed() >= Self::EVERY,
        };
        if !due {
            return true;
        }
        self.last = Some(Instant::now());
        let outcome = Python::attach(|py| {
            py.check_signals()?;
            if let Some(cb) = &self.callback {
                cb.call1(py, (now.as_ms_f64(),))?;
            }
            Ok::<(), PyErr>(())
        });
        match outcome {
            Ok(()) => true,
            Err(e) => {
                self.stopped = Some(e);
                false
            }
        }
    }
}

/// Loads `text` (TOML or JSON), simulates it to its horizon and returns the summary JSON
/// plus, if asked, the per-job and per-segment traces as columns.
#[pyfunction]
#[pyo3(signature = (text, source_name, format, *, seed=None, horizon_ms=None, record_jobs=true, record_segments=true, trace_limit=None, progress=None))]
#[allow(clippy::too_many_arguments)] // mirrors the Python keyword arguments one to one
fn simulate(
    py: Python<'_>,
    text: &str,
    source_name: &str,
    format: &str,
    seed: Option<u64>,
    horizon_ms: Option<f64>,
    record_jobs: bool,
    record_segments: bool,
    trace_limit: Option<usize>,
    progress: Option<Py<PyAny>>,
) -> Result<SimOutput, BindingError> {
    let format = parse_format(format)?;
    let opts = SimOptions { record_jobs, record_segments, check_invariants: false };
    let trace_limit = trace_limit.unwrap_or(critmem_core::MAX_TRACE_RECORDS);
    let mut report = ProgressReport::new(progress);
    plugins::take_fault();
    let run = py.detach(|| {
        let scenario = load(text, source_name, format, horizon_ms, seed)?;
        let mut result = match critmem_core::simulate_with_progress(&scenario, opts, trace_limit, |now| report.tell(now)) {
            // User code that failed after the last progress check.
            Some(_) if plugins::has_fault() => return Ok(Err(plugins::take_fault().expect("a fault was recorded"))),
            Some(result) => result,
            None => return Ok(Err(report.stopped.take().expect("a stopped run has its reason"))),
        };
        let summary_json = result.to_json();
        let hyper = scenario.hyperperiod().map(Nanos::as_ms_f64);
        // The records go as soon as their columns exist: a long trace is held once, not twice.
        let jobs = job_columns(&result);
        result.jobs = Vec::new();
        let segments = segment_columns(&result);
        result.segments = Vec::new();
        let control = control_columns(&result);
        let servers = ServerColumns::new(&result);
        let waits = wait_columns(&result);
        Ok::<_, CoreError>(Ok((result, summary_json, scenario, hyper, jobs, segments, control, servers, waits)))
    })?;
    let (result, summary_json, scenario, hyperperiod_ms, jobs, segments, control, servers, waits) = run?;
    let (servers, server_supply, server_events, server_exhaustions, task_servers) = servers.into_dicts(py)?;
    Ok(SimOutput {
        summary_json,
        seed: scenario.seed,
        events: result.events,
        hyperperiod_ms,
        jobs: raw_dict(py, jobs)?,
        jobs_left_out: result.jobs_left_out,
        segments: raw_dict(py, segments)?,
        segments_left_out: result.segments_left_out,
        memory_timeline: timeline_dict(py, &result)?,
        control_timeline: raw_dict(py, control)?,
        control_timeline_every_ticks: result.control().map_or(1, |c| c.timeline_every_ticks),
        servers,
        server_supply,
        server_events,
        server_exhaustions,
        task_servers,
        waits: waits.map(|w| w.into_dict(py)).transpose()?,
        waits_left_out: result.resources().map_or(0, |r| r.waits_left_out),
        warnings: scenario.warnings,
    })
}

/// One column handed to [`write_csv`]: (kind, values, mask, labels). Kinds: `text` (int64
/// codes into `labels`, negative for missing), `int`, `uint`, `float`, `bool` (one byte each),
/// `nint` (int64 values and a one-byte mask, non-zero for missing).
type CsvColumnArg<'py> = (String, Bound<'py, PyBytes>, Option<Bound<'py, PyBytes>>, Option<Vec<String>>);

/// Writes a CSV with the bytes pandas' `to_csv(index=False, lineterminator="\n")` writes.
#[pyfunction]
fn write_csv(path: &str, header: Vec<String>, columns: Vec<CsvColumnArg<'_>>) -> Result<(), BindingError> {
    let mut cols = Vec::with_capacity(columns.len());
    for (kind, values, mask, labels) in &columns {
        let values = values.as_bytes();
        cols.push(match (kind.as_str(), mask, labels) {
            ("text", None, Some(labels)) => writers::CsvColumn::Text { codes: values, labels: labels.clone() },
            ("int", None, None) => writers::CsvColumn::Int(values),
            ("uint", None, None) => writers::CsvColumn::UInt(values),
            ("float", None, None) => writers::CsvColumn::Float(values),
            ("bool", None, None) => writers::CsvColumn::Bool(values),
            ("nint", Some(mask), None) => writers::CsvColumn::NullableInt { values, mask: mask.as_bytes() },
            _ => return Err(BindingError::Argument(format!("a CSV column of kind {kind:?} with the wrong buffers"))),
        });
    }
    Ok(writers::write_csv(path, &header, &cols)?)
}

/// Writes the schedule as trace-event JSON (see `critmem.export.write_trace_events`):
/// `head`, one event per segment and per job from the little-endian column buffers, `tail`.
#[pyfunction]
#[pyo3(signature = (path, head, tail, segments, jobs, quoted_tasks, quoted_outcomes, horizon_ms))]
#[allow(clippy::too_many_arguments)] // mirrors the Python call one to one
fn write_trace_events(
    path: &str,
    head: &str,
    tail: &str,
    segments: [Bound<'_, PyBytes>; 5],
    jobs: [Bound<'_, PyBytes>; 7],
    quoted_tasks: Vec<String>,
    quoted_outcomes: Vec<String>,
    horizon_ms: f64,
) -> Result<(), BindingError> {
    let c = writers::TraceColumns {
        seg_cpu: segments[0].as_bytes(),
        seg_task: segments[1].as_bytes(),
        seg_job: segments[2].as_bytes(),
        seg_start_ms: segments[3].as_bytes(),
        seg_end_ms: segments[4].as_bytes(),
        job_task: jobs[0].as_bytes(),
        job_index: jobs[1].as_bytes(),
        job_release_ms: jobs[2].as_bytes(),
        job_deadline_ms: jobs[3].as_bytes(),
        job_completion_ms: jobs[4].as_bytes(),
        job_missed: jobs[5].as_bytes(),
        job_outcome: jobs[6].as_bytes(),
    };
    Ok(writers::write_trace(path, head, tail, &c, &quoted_tasks, &quoted_outcomes, horizon_ms)?)
}

/// Loads `text` (TOML or JSON) and runs the schedulability analyses; returns the report JSON
/// and the scenario's warnings.
#[pyfunction]
#[pyo3(signature = (text, source_name, format))]
fn analyze(py: Python<'_>, text: &str, source_name: &str, format: &str) -> Result<(String, Vec<String>), BindingError> {
    let format = parse_format(format)?;
    Ok(py.detach(|| load(text, source_name, format, None, None).map(|s| (critmem_analysis::analyze(&s).to_json(), s.warnings)))?)
}

/// The JSON Schema of scenario files, derived from the loader's own structures (pretty JSON
/// ending in a newline; `docs/scenario.schema.json` holds the same text).
#[pyfunction]
fn scenario_schema() -> String {
    critmem_core::scenario::json_schema()
}

/// Loads `text` (TOML or JSON) without running it; returns what was loaded as JSON: scheduler,
/// cpus, tasks, horizon_ms, seed and the warnings.
#[pyfunction]
#[pyo3(signature = (text, source_name, format))]
fn validate(py: Python<'_>, text: &str, source_name: &str, format: &str) -> Result<String, BindingError> {
    let format = parse_format(format)?;
    Ok(py.detach(|| {
        load(text, source_name, format, None, None).map(|s| {
            serde_json::json!({
                "scheduler": s.scheduler.name(),
                "cpus": s.cpus,
                "tasks": s.tasks.len(),
                "horizon_ms": s.horizon.as_ms_f64(),
                "seed": s.seed,
                "warnings": s.warnings,
            })
            .to_string()
        })
    })?)
}

/// Wall-clock nanoseconds per operation of the memory model's own data structures, median
/// over `iterations` runs of `pages` operations each: `alloc`, `free`, `map` and `unmap`
/// under global management, reservations without shared-page management, and SPC. Keys are
/// `"<operation>/<global|reservation|spc>"`.
#[pyfunction]
#[pyo3(signature = (iterations=20, pages=4096))]
fn measure_memory_ops(py: Python<'_>, iterations: u32, pages: u32) -> Result<Py<PyDict>, BindingError> {
    let rows = py.detach(|| {
        let origin = Instant::now();
        opcost::measure_ops(iterations, pages, &mut || u64::try_from(origin.elapsed().as_nanos()).unwrap_or(u64::MAX))
    })?;
    let d = PyDict::new(py);
    for r in rows {
        d.set_item(format!("{}/{}", r.operation, r.column), r.ns_per_op)?;
    }
    Ok(d.unbind())
}

/// Milliseconds from Python as integer nanoseconds.
fn ms_to_ns(what: &str, ms: f64) -> Result<u64, BindingError> {
    if ms.is_finite() && ms >= 0.0 && ms * 1e6 < u64::MAX as f64 {
        Ok((ms * 1e6).round() as u64)
    } else {
        Err(BindingError::Argument(format!("{what} must be finite, non-negative milliseconds (got {ms})")))
    }
}

fn same_length(what: &str, a: usize, b: usize) -> Result<(), BindingError> {
    if a == b {
        Ok(())
    } else {
        Err(BindingError::Argument(format!("{what} differ in length ({a} vs {b})")))
    }
}

fn profiles(stall_ms: &[f64], exec_ms: &[f64]) -> Result<Vec<critmem_policy::JobProfile>, BindingError> {
    same_length("stall_ms and exec_ms", stall_ms.len(), exec_ms.len())?;
    let ns = |ms: f64| ms_to_ns("times", ms);
    stall_ms.iter().zip(exec_ms).map(|(&s, &e)| Ok(critmem_policy::JobProfile { stall_ns: ns(s)?, exec_ns: ns(e)? })).collect()
}

/// Fig. 7 of the SARA paper: least-squares line of execution time against stall per period.
/// Returns (slope, intercept_ms, r_squared).
#[pyfunction]
fn fit_exec_vs_stall(stall_ms: Vec<f64>, exec_ms: Vec<f64>) -> Result<(f64, f64, f64), BindingError> {
    let fit = critmem_policy::fit_exec_vs_stall(&profiles(&stall_ms, &exec_ms)?)?;
    Ok((fit.slope, fit.intercept_ns / 1e6, fit.r_squared))
}

/// BCET from profiled jobs: the smallest execution time minus stall (ms).
#[pyfunction]
fn estimate_bcet_ms(stall_ms: Vec<f64>, exec_ms: Vec<f64>) -> Result<f64, BindingError> {
    let bcet = critmem_policy::estimate_bcet_ns(&profiles(&stall_ms, &exec_ms)?)?;
    Ok(bcet as f64 / 1e6)
}

/// The wall time of one run of TMEM memory scheduler `policy` on a seeded synthetic
/// observation of `components` components (two caches each), `threads` threads and
/// `total_units` units: the median over `runs` runs from a fresh policy each, warmed by
/// `warm_up`'s quiet windows (not timed), in µs, and the units the plan moves. A measurement of
/// this machine, not part of any simulated result.
#[pyfunction]
fn tmem_policy_cost(
    policy: &str,
    components: usize,
    threads: usize,
    total_units: u32,
    runs: usize,
    seed: u64,
) -> Result<(f64, u32), BindingError> {
    use critmem_policy::tmem::{make_memory_scheduler, synthetic_observation, units_moved, warm_up};
    if components == 0 || threads == 0 || runs == 0 {
        return Err(BindingError::Argument("components, threads and runs must be at least 1".into()));
    }
    let obs = synthetic_observation(components, threads, total_units, seed);
    let mut moved = 0;
    let mut times_us: Vec<f64> = (0..runs)
        .map(|_| {
            let mut p = make_memory_scheduler(policy)?;
            warm_up(p.as_mut(), &obs);
            let start = std::time::Instant::now();
            let actions = p.schedule(std::hint::black_box(&obs));
            let elapsed = start.elapsed().as_secs_f64() * 1e6;
            moved = units_moved(&obs, &actions);
            Ok(elapsed)
        })
        .collect::<Result<_, PolicyError>>()?;
    times_us.sort_by(f64::total_cmp);
    Ok((times_us[times_us.len() / 2], moved))
}

/// Offline profiling's choice from (limit_bytes, hit_ratio) pairs: the smallest limit that
/// reaches `target_hit_ratio`.
#[pyfunction]
fn pick_offline_limit(profile: Vec<(u64, f64)>, target_hit_ratio: f64) -> Result<u64, BindingError> {
    Ok(critmem_policy::pick_offline_limit(&profile, target_hit_ratio)?)
}

/// TMO-High's threshold from (threshold_pct, mean_elapsed_ms) results of its exhaustive
/// search: the largest threshold whose mean elapsed time stays below `deadline_ms`.
#[pyfunction]
fn pick_tmo_threshold(evaluated: Vec<(f64, f64)>, deadline_ms: f64) -> Result<f64, BindingError> {
    let thresholds: Vec<f64> = evaluated.iter().map(|e| e.0).collect();
    let mean_of = |t: f64| evaluated.iter().find(|e| e.0 == t).map_or(u64::MAX, |e| (e.1 * 1e6).round() as u64);
    let search = critmem_policy::pick_tmo_threshold(&thresholds, (deadline_ms * 1e6).round() as u64, mean_of)?;
    Ok(search.threshold_pct)
}

/// SARA's view of each job (Eq. 2/3, Definition 1) from one group's control timeline: per job,
/// `s_period` in ms and the share of its intervals that were severe. Returns (stall_ms,
/// severe_share), one entry per job.
#[pyfunction]
#[pyo3(signature = (tick_ms, memory_some_us, io_some_us, interval_ms, start_ms, end_ms, *, threshold_pct=None))]
#[allow(clippy::too_many_arguments)] // mirrors the Python arguments one to one
fn sara_job_stalls(
    py: Python<'_>,
    tick_ms: Vec<f64>,
    memory_some_us: Vec<u64>,
    io_some_us: Vec<u64>,
    interval_ms: f64,
    start_ms: Vec<f64>,
    end_ms: Vec<f64>,
    threshold_pct: Option<u8>,
) -> Result<(Vec<f64>, Vec<f64>), BindingError> {
    same_length("tick_ms and memory_some_us", tick_ms.len(), memory_some_us.len())?;
    same_length("tick_ms and io_some_us", tick_ms.len(), io_some_us.len())?;
    same_length("start_ms and end_ms", start_ms.len(), end_ms.len())?;
    let ticks = tick_ms
        .iter()
        .zip(memory_some_us.iter().zip(&io_some_us))
        .map(|(&t, (&memory_some_us, &io_some_us))| Ok(StallTick { at_ns: ms_to_ns("tick_ms", t)?, memory_some_us, io_some_us }))
        .collect::<Result<Vec<_>, BindingError>>()?;
    let jobs = start_ms
        .iter()
        .zip(&end_ms)
        .map(|(&s, &e)| Ok(JobSpan { start_ns: ms_to_ns("start_ms", s)?, end_ns: ms_to_ns("end_ms", e)? }))
        .collect::<Result<Vec<_>, BindingError>>()?;
    let interval_ns = ms_to_ns("interval_ms", interval_ms)?;
    let threshold_pct = threshold_pct.unwrap_or(SaraConfig::default().long_stall_threshold_pct);
    let stalls = py.detach(|| job_stalls(&ticks, interval_ns, threshold_pct, &jobs))?;
    Ok(stalls.iter().map(|s| (s.stall_ms, s.severe_share)).unzip())
}

/// The controller registry (`critmem_policy::CONTROLLERS`) as (name, summary) pairs, in the
/// order help texts list them.
#[pyfunction]
fn controllers() -> Vec<(&'static str, &'static str)> {
    CONTROLLERS.iter().map(|c| (c.name, c.summary)).collect()
}

/// The scheduler kinds a scenario's `[scheduler] kind` can name, as (name, summary) pairs in
/// the order the loader lists them.
#[pyfunction]
fn schedulers() -> Vec<(&'static str, &'static str)> {
    critmem_core::SchedulerKind::NAMES.iter().copied().zip(critmem_core::SchedulerKind::SUMMARIES.iter().copied()).collect()
}

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("MAX_TRACE_RECORDS", critmem_core::MAX_TRACE_RECORDS)?;
    m.add("OUTCOMES", OUTCOMES.map(Outcome::as_str).to_vec())?;
    m.add("ScenarioError", m.py().get_type::<ScenarioError>())?;
    m.add_class::<SimOutput>()?;
    m.add_class::<plugins::PyConformanceProbe>()?;
    m.add_class::<hires::ReservationTree>()?;
    m.add("CPU_PARTS", critmem_core::hires::CPU_PARTS)?;
    mc2::register(m)?;
    // Controllers the registry does not hold are Python classes (a second import keeps the first).
    critmem_policy::register_external_controllers(Box::new(plugins::PyControllers));
    py_sched::register(m)?;
    m.add_function(wrap_pyfunction!(simulate, m)?)?;
    m.add_function(wrap_pyfunction!(write_csv, m)?)?;
    m.add_function(wrap_pyfunction!(write_trace_events, m)?)?;
    m.add_function(wrap_pyfunction!(analyze, m)?)?;
    m.add_function(wrap_pyfunction!(validate, m)?)?;
    m.add_function(wrap_pyfunction!(scenario_schema, m)?)?;
    m.add_function(wrap_pyfunction!(measure_memory_ops, m)?)?;
    m.add_function(wrap_pyfunction!(fit_exec_vs_stall, m)?)?;
    m.add_function(wrap_pyfunction!(estimate_bcet_ms, m)?)?;
    m.add_function(wrap_pyfunction!(tmem_policy_cost, m)?)?;
    m.add_function(wrap_pyfunction!(pick_offline_limit, m)?)?;
    m.add_function(wrap_pyfunction!(pick_tmo_threshold, m)?)?;
    m.add_function(wrap_pyfunction!(sara_job_stalls, m)?)?;
    m.add_function(wrap_pyfunction!(controllers, m)?)?;
    m.add_function(wrap_pyfunction!(schedulers, m)?)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use critmem_core::simulate as run;

    const RM: &str = "[scheduler]\nkind = \"rm\"\n[run]\nhorizon_ms = 20\n\
                      [[task]]\nname = \"a\"\nwcet_ms = 1\nperiod_ms = 4\n\
                      [[task]]\nname = \"b\"\nwcet_ms = 5\nperiod_ms = 10\n";

    #[test]
    fn overrides_reach_the_scenario() {
        let s = load(RM, "rm.toml", Format::Toml, Some(7.5), Some(4)).unwrap();
        assert_eq!((s.horizon, s.seed), (Nanos(7_500_000), 4));
        assert_eq!(load(RM, "rm.toml", Format::Toml, None, None).unwrap().horizon, Nanos::from_ms(20));
        let e = load(RM, "rm.toml", Format::Toml, Some(-1.0), None).unwrap_err();
        assert!(e.to_string().starts_with("rm.toml: horizon_ms (override): must not be negative"), "{e}");
    }

    fn col<'a>(cols: &'a [(String, RawColumn)], name: &str) -> &'a RawColumn {
        &cols.iter().find(|(n, _)| n == name).expect("a column").1
    }

    fn f64s_of(c: &RawColumn) -> Vec<f64> {
        c.bytes.chunks_exact(8).map(|b| f64::from_le_bytes(b.try_into().unwrap())).collect()
    }

    fn i64s_of(c: &RawColumn) -> Vec<i64> {
        c.bytes.chunks_exact(8).map(|b| i64::from_le_bytes(b.try_into().unwrap())).collect()
    }

    #[test]
    fn job_columns_line_up_in_release_order_and_mark_unfinished_jobs() {
        // b (5 ms every 10 ms) is preempted by a; the horizon cuts the last b job short.
        let s = load(RM, "rm.toml", Format::Toml, Some(21.0), None).unwrap();
        let r = run(&s, SimOptions { record_jobs: true, record_segments: true, check_invariants: true });
        let c = job_columns(&r);
        let n = r.jobs.len();
        assert!(n > 0);
        for (name, column) in &c {
            assert_eq!(column.bytes.len(), n * if name == "missed" { 1 } else { 8 }, "{name}");
        }
        let (release, completion, response) =
            (f64s_of(col(&c, "release_ms")), f64s_of(col(&c, "completion_ms")), f64s_of(col(&c, "response_ms")));
        let (task, outcome) = (i64s_of(col(&c, "task")), i64s_of(col(&c, "outcome")));
        assert!(release.windows(2).all(|w| w[0] <= w[1]), "release order");
        for i in 0..n {
            let completed = OUTCOMES[outcome[i] as usize] == Outcome::Completed;
            assert_eq!(!completion[i].is_nan(), completed, "job {i}");
            if completed {
                assert_eq!(response[i], completion[i] - release[i], "job {i}");
            } else {
                assert!(response[i].is_nan(), "job {i}");
            }
        }
        // The job released at 20 ms (task b, the second) is still running at 21 ms.
        let last_b = (0..n).find(|&i| task[i] == 1 && release[i] == 20.0).expect("b released at 20 ms");
        assert_eq!(OUTCOMES[outcome[last_b] as usize].as_str(), "pending");
        assert!(completion[last_b].is_nan());
        assert_eq!(col(&c, "missed").dtype, "|b1");
        // One CPU: last_cpu is 0 for a job that started, -1 for one that never ran.
        let start = f64s_of(col(&c, "start_ms"));
        for (i, &cpu) in i64s_of(col(&c, "last_cpu")).iter().enumerate() {
            assert_eq!(cpu, if start[i].is_nan() { -1 } else { 0 }, "job {i}");
        }
    }

    #[test]
    fn raw_columns_are_little_endian_with_the_dtype_pandas_would_infer() {
        let f = RawColumn::f64s([1.5, f64::NAN].into_iter());
        assert_eq!(f.dtype, "<f8");
        assert_eq!(f.bytes[..8], 1.5f64.to_le_bytes());
        assert!(f64::from_le_bytes(f.bytes[8..].try_into().unwrap()).is_nan());
        let i = RawColumn::u64s([3, 1 << 40].into_iter());
        assert_eq!((i.dtype, i.bytes.len()), ("<i8", 16));
        assert_eq!(i.bytes[8..], (1u64 << 40).to_le_bytes());
        // Python ints past i64 make pandas pick uint64.
        assert_eq!(RawColumn::u64s([1, u64::MAX].into_iter()).dtype, "<u8");
        assert_eq!(RawColumn::u64s(std::iter::empty()), RawColumn { dtype: "<i8", bytes: Vec::new() });
    }

    #[test]
    fn server_columns_line_up_with_the_servers() {
        // A deferrable 1/4 server, 100 us per event, over a task of 0.5 ms every 4 ms, 12 ms:
        // three periods of 0.1 + 0.5 = 0.6 ms, three deliveries of 0.1 ms, never exhausted.
        let text = "[scheduler]\nkind = \"fp\"\nevent_cost_us = 100\n[run]\nhorizon_ms = 12\n\
                    [[scheduler.server]]\nname = \"s\"\nkind = \"deferrable\"\nbudget_ms = 1\nperiod_ms = 4\npriority = 0\npolicy = \"rm\"\n\
                    [[task]]\nname = \"a\"\nwcet_ms = 0.5\nperiod_ms = 4\nserver = \"s\"\n";
        let s = load(text, "s.toml", Format::Toml, None, None).unwrap();
        let r = run(&s, SimOptions { record_jobs: false, record_segments: false, check_invariants: true });
        let c = ServerColumns::new(&r);
        assert_eq!(
            (c.name.clone(), c.cpu.clone(), c.events_delivered.clone(), c.exhaustions.clone()),
            (vec!["s".to_string()], vec![0], vec![3], vec![0])
        );
        assert_eq!(c.supply.1, vec![0.0, 4.0, 8.0]);
        assert!(c.supply.2.iter().all(|&m| (m - 0.6).abs() < 1e-9), "{:?}", c.supply.2);
        assert_eq!((c.events.2.clone(), c.events.3.clone()), (vec![0.0, 4.0, 8.0], vec![0.1, 4.1, 8.1]));
        assert_eq!(c.task_server, vec![Some("s".to_string())]);
        let flat = ServerColumns::new(&run(&load(RM, "rm.toml", Format::Toml, None, None).unwrap(), SimOptions::default()));
        assert_eq!((flat.name.len(), flat.task_server), (0, vec![None, None]));
    }

    #[test]
    fn wait_columns_name_the_task_and_the_resource() {
        // lo holds m 0–3; hi, released at 1, locks m at once and waits 1–3 (one CPU, fp).
        let text = "[scheduler]\nkind = \"fp\"\n[run]\nhorizon_ms = 10\n\
                    [[resource]]\nname = \"m\"\nprotocol = \"none\"\n\
                    [[task]]\nname = \"hi\"\npriority = 1\nperiod_ms = 10\noffset_ms = 1\n\
                    program = [{ lock = \"m\" }, { compute_ms = 1 }, { unlock = \"m\" }]\n\
                    [[task]]\nname = \"lo\"\npriority = 2\nperiod_ms = 10\n\
                    program = [{ lock = \"m\" }, { compute_ms = 3 }, { unlock = \"m\" }]\n";
        let s = load(text, "m.toml", Format::Toml, None, None).unwrap();
        let c =
            wait_columns(&run(&s, SimOptions { record_jobs: true, record_segments: false, check_invariants: true })).expect("a resource");
        assert_eq!(
            c,
            WaitColumns { task: vec!["hi".into()], job: vec![0], resource: vec!["m".into()], start_ms: vec![1.0], end_ms: vec![3.0] }
        );
        // Without resources or components there is no table at all.
        assert_eq!(wait_columns(&run(&load(RM, "rm.toml", Format::Toml, None, None).unwrap(), SimOptions::default())), None);
    }

    #[test]
    fn control_columns_carry_each_groups_limits_and_usage_per_tick() {
        // Greedy every 10 ms over 35 ms: ticks at 10, 20 and 30 ms. The group's memory.high
        // is the scenario's 6 MB and its memory.max the scenario's 8 MB unless greedy moves it.
        let text = "[scheduler]\nkind = \"edf\"\n[run]\nhorizon_ms = 35\n[memory]\ntotal_mb = 16\n\
                    [control]\ncontroller = \"greedy\"\ninterval_ms = 10\n\
                    [[group]]\nname = \"g\"\nfloor_mb = 2\nmax_mb = 8\nhigh_mb = 6\n\
                    [[task]]\nname = \"t\"\nwcet_ms = 2\nperiod_ms = 10\ngroup = \"g\"\nprivate_mb = 4\n\
                    access = [{ pattern = \"sweep\" }]\n";
        let s = load(text, "c.toml", Format::Toml, None, None).unwrap();
        let r = run(&s, SimOptions::default());
        let cols = control_columns(&r);
        let names: Vec<&str> = cols.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["time_ms", "max_mb:g", "high_mb:g", "usage_mb:g", "memory_some_us:g", "io_some_us:g"]);
        let f64s = |c: &RawColumn| c.bytes.chunks(8).map(|b| f64::from_le_bytes(b.try_into().unwrap())).collect::<Vec<_>>();
        assert_eq!(f64s(&cols[0].1), [10.0, 20.0, 30.0]);
        let timeline = &r.control().unwrap().timeline;
        let mb = |b: Option<u64>| b.map_or(f64::NAN, |b| b as f64 / 1_048_576.0);
        let max: Vec<f64> = timeline.iter().map(|t| mb(t.groups[0].max_bytes)).collect();
        assert_eq!(f64s(&cols[1].1).iter().map(|v| v.to_bits()).collect::<Vec<_>>(), max.iter().map(|v| v.to_bits()).collect::<Vec<_>>());
        assert_eq!(f64s(&cols[2].1), [6.0, 6.0, 6.0]);
        assert!(f64s(&cols[3].1).iter().all(|&u| u > 0.0 && u <= 8.0));
        assert!(control_columns(&run(&load(RM, "rm.toml", Format::Toml, None, None).unwrap(), SimOptions::default())).is_empty());
    }

    #[test]
    fn segment_columns_carry_task_indices_and_ms() {
        let s = load(RM, "rm.toml", Format::Toml, None, None).unwrap();
        let r = run(&s, SimOptions { record_jobs: false, record_segments: true, check_invariants: true });
        let c = segment_columns(&r);
        let (start, end) = (f64s_of(col(&c, "start_ms")), f64s_of(col(&c, "end_ms")));
        assert_eq!(start.len(), r.segments.len());
        // a runs first, 0-1 ms, on CPU 0.
        let first = (i64s_of(col(&c, "cpu"))[0], i64s_of(col(&c, "task"))[0], i64s_of(col(&c, "job"))[0], start[0], end[0]);
        assert_eq!(first, (0, 0, 0, 0.0, 1.0));
        let busy_ms: f64 = start.iter().zip(&end).map(|(s, e)| e - s).sum();
        // 5 jobs of a (1 ms) and 2 of b (5 ms) in 20 ms.
        assert_eq!(busy_ms, 15.0);
    }
}
