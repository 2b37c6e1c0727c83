//! `critmem._core`: thin PyO3 bindings over critmem-core and critmem-analysis.
//!
//! Everything here converts; nothing decides. Loading and column building are plain Rust
//! (unit-tested below without Python); the `#[pyfunction]`s only move data across.
//! Core scenario errors become the Python `ScenarioError` in one place, [`to_py_err`].

use critmem_core::mem::{
    DeviceSpec, MemConfig, MemError, Memory, RefKind, RegionKind, ResId, ReservationKind, ReservationSpec, SharePolicy, Vpn,
};
use critmem_core::{load_str, Format, Nanos, Overrides, Scenario, SimOptions, SimResult};
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

/// The one place a core error crosses into Python.
fn to_py_err(e: CoreError) -> PyErr {
    ScenarioError::new_err(e.to_string())
}

fn parse_format(s: &str) -> PyResult<Format> {
    match s {
        "toml" => Ok(Format::Toml),
        "json" => Ok(Format::Json),
        other => Err(PyValueError::new_err(format!("format must be \"toml\" or \"json\", not {other:?}"))),
    }
}

/// Loads and validates a scenario; overrides apply before the file's defaults and checks.
fn load(text: &str, source_name: &str, format: Format, horizon_ms: Option<f64>, seed: Option<u64>) -> Result<Scenario, CoreError> {
    load_str(text, source_name, format, &Overrides { horizon_ms, seed })
}

/// Per-job trace as columns, times in decimal ms.
#[derive(Debug, Default, PartialEq)]
struct JobColumns {
    task: Vec<String>,
    job: Vec<u64>,
    release_ms: Vec<f64>,
    deadline_ms: Vec<f64>,
    demand_ms: Vec<f64>,
    executed_ms: Vec<f64>,
    start_ms: Vec<Option<f64>>,
    completion_ms: Vec<Option<f64>>,
    response_ms: Vec<Option<f64>>,
    tardiness_ms: Vec<f64>,
    missed: Vec<bool>,
    outcome: Vec<&'static str>,
    last_cpu: Vec<Option<u32>>,
}

impl JobColumns {
    fn new(result: &SimResult) -> JobColumns {
        let mut c = JobColumns::default();
        for j in &result.jobs {
            c.task.push(result.tasks[j.task as usize].name.clone());
            c.job.push(j.index);
            c.release_ms.push(j.release.as_ms_f64());
            c.deadline_ms.push(j.abs_deadline.as_ms_f64());
            c.demand_ms.push(j.demand.as_ms_f64());
            c.executed_ms.push(j.executed.as_ms_f64());
            c.start_ms.push(j.start.map(Nanos::as_ms_f64));
            c.completion_ms.push(j.completion.map(Nanos::as_ms_f64));
            c.response_ms.push(j.response().map(Nanos::as_ms_f64));
            c.tardiness_ms.push(j.tardiness(result.horizon).as_ms_f64());
            c.missed.push(j.missed());
            c.outcome.push(j.outcome.as_str());
            c.last_cpu.push(j.last_cpu);
        }
        c
    }

    fn into_dict(self, py: Python<'_>) -> PyResult<Py<PyDict>> {
        let d = PyDict::new(py);
        d.set_item("task", self.task)?;
        d.set_item("job", self.job)?;
        d.set_item("release_ms", self.release_ms)?;
        d.set_item("deadline_ms", self.deadline_ms)?;
        d.set_item("demand_ms", self.demand_ms)?;
        d.set_item("executed_ms", self.executed_ms)?;
        d.set_item("start_ms", self.start_ms)?;
        d.set_item("completion_ms", self.completion_ms)?;
        d.set_item("response_ms", self.response_ms)?;
        d.set_item("tardiness_ms", self.tardiness_ms)?;
        d.set_item("missed", self.missed)?;
        d.set_item("outcome", self.outcome)?;
        d.set_item("last_cpu", self.last_cpu)?;
        Ok(d.unbind())
    }
}

/// Execution segments as columns, times in decimal ms.
#[derive(Debug, Default, PartialEq)]
struct SegmentColumns {
    cpu: Vec<u32>,
    task: Vec<String>,
    job: Vec<u64>,
    start_ms: Vec<f64>,
    end_ms: Vec<f64>,
}

impl SegmentColumns {
    fn new(result: &SimResult) -> SegmentColumns {
        let mut c = SegmentColumns::default();
        for s in &result.segments {
            c.cpu.push(s.cpu);
            c.task.push(result.tasks[s.task as usize].name.clone());
            c.job.push(s.job);
            c.start_ms.push(s.start.as_ms_f64());
            c.end_ms.push(s.end.as_ms_f64());
        }
        c
    }

    fn into_dict(self, py: Python<'_>) -> PyResult<Py<PyDict>> {
        let d = PyDict::new(py);
        d.set_item("cpu", self.cpu)?;
        d.set_item("task", self.task)?;
        d.set_item("job", self.job)?;
        d.set_item("start_ms", self.start_ms)?;
        d.set_item("end_ms", self.end_ms)?;
        Ok(d.unbind())
    }
}

/// The memory timeline as columns: time_ms, reserved_physical_mb, used_mb, then
/// `reservation:<name>` (pages it accounts) and `resident:<task>` (resident pages) per object.
fn timeline_dict(py: Python<'_>, result: &SimResult) -> PyResult<Py<PyDict>> {
    let d = PyDict::new(py);
    let Some(m) = &result.memory else { return Ok(d.unbind()) };
    let mb = |frames: u64| frames as f64 * m.page_bytes as f64 / 1_048_576.0;
    d.set_item("time_ms", m.timeline.iter().map(|s| s.time.as_ms_f64()).collect::<Vec<_>>())?;
    d.set_item("reserved_physical_mb", m.timeline.iter().map(|s| mb(s.reserved_physical_frames)).collect::<Vec<_>>())?;
    d.set_item("used_mb", m.timeline.iter().map(|s| mb(s.used_frames)).collect::<Vec<_>>())?;
    for (i, (name, _)) in m.reservations.iter().enumerate() {
        d.set_item(format!("reservation:{name}"), m.timeline.iter().map(|s| s.reservation_pages[i]).collect::<Vec<_>>())?;
    }
    for (i, t) in result.tasks.iter().enumerate() {
        d.set_item(format!("resident:{}", t.name), m.timeline.iter().map(|s| s.task_resident_pages[i]).collect::<Vec<_>>())?;
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
/// `max_mb:<g>` (NaN when unlimited), `usage_mb:<g>`, and the cumulative PSI totals
/// `memory_some_us:<g>` and `io_some_us:<g>`. Empty without `[control]`. Built without the
/// GIL; [`raw_dict`] hands it over.
fn control_columns(result: &SimResult) -> Vec<(String, RawColumn)> {
    let Some(c) = &result.control else { return Vec::new() };
    let mb = |b: u64| b as f64 / 1_048_576.0;
    let mut cols = vec![("time_ms".to_string(), RawColumn::f64s(c.timeline.iter().map(|s| s.time.as_ms_f64())))];
    for (gi, name) in c.groups.iter().enumerate() {
        let points = || c.timeline.iter().map(move |s| &s.groups[gi]);
        cols.push((format!("max_mb:{name}"), RawColumn::f64s(points().map(|p| p.max_bytes.map_or(f64::NAN, mb)))));
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
    /// Per-job columns (empty lists unless jobs were recorded).
    jobs: Py<PyDict>,
    /// Jobs not in `jobs` because the trace was full (`critmem_core::MAX_TRACE_RECORDS`).
    jobs_left_out: u64,
    /// Execution-segment columns (empty lists unless segments were recorded).
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
}

/// Loads `text` (TOML or JSON), simulates it to its horizon and returns the summary JSON
/// plus, if asked, the per-job and per-segment traces as columns.
#[pyfunction]
#[pyo3(signature = (text, source_name, format, *, seed=None, horizon_ms=None, record_jobs=true, record_segments=true))]
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
) -> PyResult<SimOutput> {
    let format = parse_format(format)?;
    let opts = SimOptions { record_jobs, record_segments, check_invariants: false };
    let (result, seed, hyperperiod_ms, jobs, segments, control) = py
        .detach(|| {
            let scenario = load(text, source_name, format, horizon_ms, seed)?;
            let result = critmem_core::simulate(&scenario, opts);
            let hyper = scenario.hyperperiod().map(Nanos::as_ms_f64);
            let (jobs, segments) = (JobColumns::new(&result), SegmentColumns::new(&result));
            let control = control_columns(&result);
            Ok((result, scenario.seed, hyper, jobs, segments, control))
        })
        .map_err(to_py_err)?;
    Ok(SimOutput {
        summary_json: result.to_json(),
        seed,
        events: result.events,
        hyperperiod_ms,
        jobs: jobs.into_dict(py)?,
        jobs_left_out: result.jobs_left_out,
        segments: segments.into_dict(py)?,
        segments_left_out: result.segments_left_out,
        memory_timeline: timeline_dict(py, &result)?,
        control_timeline: raw_dict(py, control)?,
        control_timeline_every_ticks: result.control.as_ref().map_or(1, |c| c.timeline_every_ticks),
    })
}

/// Loads `text` (TOML or JSON) and runs the schedulability analyses; returns the report JSON.
#[pyfunction]
#[pyo3(signature = (text, source_name, format))]
fn analyze(py: Python<'_>, text: &str, source_name: &str, format: &str) -> PyResult<String> {
    let format = parse_format(format)?;
    py.detach(|| load(text, source_name, format, None, None).map(|s| critmem_analysis::analyze(&s).to_json())).map_err(to_py_err)
}

// ---------------------------------------------------------------------------------------------
// Cost of the memory model's own operations (the paper's Table II, as wall-clock time).
//
// Timing lives here, in the front end: critmem-core never reads a clock.

/// The three columns of the paper's Table II: global management (no reservation, the shared
/// region left to the global LRU), reservations without shared-page management (No-SP-Mgmt),
/// reservations with it (SPC).
const OP_COLUMNS: [(&str, bool, SharePolicy); 3] =
    [("global", false, SharePolicy::Global), ("reservation", true, SharePolicy::Private), ("spc", true, SharePolicy::Spc)];

/// The rows: allocate (first touch of a private anonymous page: zero-fill fault that takes a
/// frame and installs the entry), free (the frames of those pages released when their address
/// space exits), map (a second address space's first read of a resident shared page) and
/// unmap (that space exiting, which unmaps each shared page and undoes its charge).
const OP_ROWS: [&str; 4] = ["alloc", "free", "map", "unmap"];

/// Nanoseconds per operation of one row, for each of `pages` operations, in one fresh machine.
fn time_ops_once(reserved: bool, policy: SharePolicy, pages: u32) -> Result<[f64; 4], MemError> {
    use std::time::Instant;
    let cfg = MemConfig { check_every_operation: false, ..MemConfig::with_frames(pages * 4 + 4096) };
    let mut mem = Memory::new(cfg, DeviceSpec::hdd())?;
    let t0 = Nanos::ZERO;
    let res = |mem: &mut Memory, name: &str| -> Result<Option<ResId>, MemError> {
        if !reserved {
            return Ok(None);
        }
        let spec = ReservationSpec { name: name.into(), pages: u64::from(pages) + 64, kind: ReservationKind::Hard };
        mem.create_reservation(t0, spec).map(Some)
    };
    let (ra, rb, rc) = (res(&mut mem, "a")?, res(&mut mem, "b")?, res(&mut mem, "c")?);
    let shm = mem.create_shared("shm", RegionKind::SharedAnon, pages, policy)?;
    let (a, b, c) = (mem.create_space("a", ra)?, mem.create_space("b", rb)?, mem.create_space("c", rc)?);
    let va = mem.map_shared(t0, a, shm, true)?;
    let vb = mem.map_shared(t0, b, shm, true)?;
    let (_, vc) = mem.map_private(c, "private", pages)?;
    // `a` brings the shared pages in (not timed): they are resident, owned by `a`'s pool.
    for i in 0..pages {
        mem.access(t0, a, va.offset(i), RefKind::Write)?;
    }
    let per_op = |start: Instant| start.elapsed().as_nanos() as f64 / f64::from(pages);
    let touch = |mem: &mut Memory, space, base: Vpn, kind| -> Result<(), MemError> {
        for i in 0..pages {
            std::hint::black_box(mem.access(t0, space, base.offset(i), kind)?);
        }
        Ok(())
    };
    let start = Instant::now();
    touch(&mut mem, c, vc, RefKind::Write)?;
    let alloc = per_op(start);
    let start = Instant::now();
    mem.exit_space(t0, c)?;
    let free = per_op(start);
    let start = Instant::now();
    touch(&mut mem, b, vb, RefKind::Read)?;
    let map = per_op(start);
    let start = Instant::now();
    mem.exit_space(t0, b)?;
    let unmap = per_op(start);
    std::hint::black_box(&mem);
    Ok([alloc, free, map, unmap])
}

/// Median over `iterations` fresh machines of ns per operation, keyed `"<row>/<column>"`.
fn measure_ops(iterations: u32, pages: u32) -> Result<Vec<(String, f64)>, MemError> {
    let mut out = Vec::new();
    for (col, reserved, policy) in OP_COLUMNS {
        let mut samples: [Vec<f64>; 4] = Default::default();
        for _ in 0..iterations {
            let t = time_ops_once(reserved, policy, pages)?;
            for (k, v) in t.into_iter().enumerate() {
                samples[k].push(v);
            }
        }
        for (row, mut s) in OP_ROWS.into_iter().zip(samples) {
            s.sort_by(f64::total_cmp);
            let median = if s.is_empty() { f64::NAN } else { (s[(s.len() - 1) / 2] + s[s.len() / 2]) / 2.0 };
            out.push((format!("{row}/{col}"), median));
        }
    }
    Ok(out)
}

/// Wall-clock nanoseconds per operation of the memory model's own data structures, median
/// over `iterations` runs of `pages` operations each: `alloc`, `free`, `map` and `unmap`
/// under global management, reservations without shared-page management, and SPC. Keys are
/// `"<operation>/<global|reservation|spc>"`.
#[pyfunction]
#[pyo3(signature = (iterations=20, pages=4096))]
fn measure_memory_ops(py: Python<'_>, iterations: u32, pages: u32) -> PyResult<Py<PyDict>> {
    if iterations == 0 || pages == 0 || pages > 1 << 22 {
        return Err(PyValueError::new_err(format!(
            "iterations must be at least 1 and pages from 1 to 4194304 (got iterations={iterations}, pages={pages})"
        )));
    }
    let rows = py.detach(|| measure_ops(iterations, pages)).map_err(|e| PyValueError::new_err(e.to_string()))?;
    let d = PyDict::new(py);
    for (k, v) in rows {
        d.set_item(k, v)?;
    }
    Ok(d.unbind())
}

fn profiles(stall_ms: &[f64], exec_ms: &[f64]) -> PyResult<Vec<critmem_policy::JobProfile>> {
    if stall_ms.len() != exec_ms.len() {
        return Err(PyValueError::new_err(format!("stall_ms and exec_ms differ in length ({} vs {})", stall_ms.len(), exec_ms.len())));
    }
    let ns = |ms: f64| -> PyResult<u64> {
        if ms.is_finite() && ms >= 0.0 {
            Ok((ms * 1e6).round() as u64)
        } else {
            Err(PyValueError::new_err(format!("times must be finite and non-negative (got {ms})")))
        }
    };
    stall_ms.iter().zip(exec_ms).map(|(&s, &e)| Ok(critmem_policy::JobProfile { stall_ns: ns(s)?, exec_ns: ns(e)? })).collect()
}

fn policy_err(e: critmem_policy::PolicyError) -> PyErr {
    PyValueError::new_err(e.to_string())
}

/// Fig. 7 of the SARA paper: least-squares line of execution time against stall per period.
/// Returns (slope, intercept_ms, r_squared).
#[pyfunction]
fn fit_exec_vs_stall(stall_ms: Vec<f64>, exec_ms: Vec<f64>) -> PyResult<(f64, f64, f64)> {
    let fit = critmem_policy::fit_exec_vs_stall(&profiles(&stall_ms, &exec_ms)?).map_err(policy_err)?;
    Ok((fit.slope, fit.intercept_ns / 1e6, fit.r_squared))
}

/// BCET from profiled jobs: the smallest execution time minus stall (ms).
#[pyfunction]
fn estimate_bcet_ms(stall_ms: Vec<f64>, exec_ms: Vec<f64>) -> PyResult<f64> {
    let bcet = critmem_policy::estimate_bcet_ns(&profiles(&stall_ms, &exec_ms)?).map_err(policy_err)?;
    Ok(bcet as f64 / 1e6)
}

/// Offline profiling's choice from (limit_bytes, hit_ratio) pairs: the smallest limit that
/// reaches `target_hit_ratio`.
#[pyfunction]
fn pick_offline_limit(profile: Vec<(u64, f64)>, target_hit_ratio: f64) -> PyResult<u64> {
    critmem_policy::pick_offline_limit(&profile, target_hit_ratio).map_err(policy_err)
}

/// TMO-High's threshold from (threshold_pct, mean_elapsed_ms) results of its exhaustive
/// search: the largest threshold whose mean elapsed time stays below `deadline_ms`.
#[pyfunction]
fn pick_tmo_threshold(evaluated: Vec<(f64, f64)>, deadline_ms: f64) -> PyResult<f64> {
    let thresholds: Vec<f64> = evaluated.iter().map(|e| e.0).collect();
    let mean_of = |t: f64| evaluated.iter().find(|e| e.0 == t).map_or(u64::MAX, |e| (e.1 * 1e6).round() as u64);
    let search = critmem_policy::pick_tmo_threshold(&thresholds, (deadline_ms * 1e6).round() as u64, mean_of).map_err(policy_err)?;
    Ok(search.threshold_pct)
}

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("MAX_TRACE_RECORDS", critmem_core::MAX_TRACE_RECORDS)?;
    m.add("ScenarioError", m.py().get_type::<ScenarioError>())?;
    m.add_class::<SimOutput>()?;
    m.add_function(wrap_pyfunction!(simulate, m)?)?;
    m.add_function(wrap_pyfunction!(analyze, m)?)?;
    m.add_function(wrap_pyfunction!(measure_memory_ops, m)?)?;
    m.add_function(wrap_pyfunction!(fit_exec_vs_stall, m)?)?;
    m.add_function(wrap_pyfunction!(estimate_bcet_ms, m)?)?;
    m.add_function(wrap_pyfunction!(pick_offline_limit, m)?)?;
    m.add_function(wrap_pyfunction!(pick_tmo_threshold, m)?)?;
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

    #[test]
    fn job_columns_line_up_and_mark_unfinished_jobs() {
        // b (5 ms every 10 ms) is preempted by a; the horizon cuts the last b job short.
        let s = load(RM, "rm.toml", Format::Toml, Some(21.0), None).unwrap();
        let r = run(&s, SimOptions { record_jobs: true, record_segments: true, check_invariants: true });
        let c = JobColumns::new(&r);
        let n = c.task.len();
        assert_eq!(n, r.jobs.len());
        assert!(n > 0);
        for len in
            [c.job.len(), c.release_ms.len(), c.start_ms.len(), c.completion_ms.len(), c.response_ms.len(), c.missed.len(), c.outcome.len()]
        {
            assert_eq!(len, n);
        }
        for i in 0..n {
            assert_eq!(c.completion_ms[i].is_some(), c.outcome[i] == "completed", "job {i}");
            assert_eq!(c.response_ms[i], c.completion_ms[i].map(|f| f - c.release_ms[i]), "job {i}");
        }
        // The job released at 20 ms is still running at 21 ms.
        let last_b = (0..n).find(|&i| c.task[i] == "b" && c.release_ms[i] == 20.0).expect("b released at 20 ms");
        assert_eq!(c.outcome[last_b], "pending");
        assert_eq!(c.completion_ms[last_b], None);
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
    fn memory_ops_are_measured_for_every_row_and_column() {
        let rows = measure_ops(2, 64).unwrap();
        let keys: Vec<&str> = rows.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys.len(), 12);
        for col in ["global", "reservation", "spc"] {
            for row in OP_ROWS {
                assert!(keys.contains(&format!("{row}/{col}").as_str()), "{row}/{col}");
            }
        }
        assert!(rows.iter().all(|(_, v)| v.is_finite() && *v >= 0.0), "{rows:?}");
    }

    #[test]
    fn segment_columns_carry_task_names_and_ms() {
        let s = load(RM, "rm.toml", Format::Toml, None, None).unwrap();
        let r = run(&s, SimOptions { record_jobs: false, record_segments: true, check_invariants: true });
        let c = SegmentColumns::new(&r);
        assert_eq!(c.task.len(), r.segments.len());
        // a runs first, 0-1 ms, on CPU 0.
        assert_eq!((c.cpu[0], c.task[0].as_str(), c.job[0], c.start_ms[0], c.end_ms[0]), (0, "a", 0, 0.0, 1.0));
        let busy_ms: f64 = c.start_ms.iter().zip(&c.end_ms).map(|(s, e)| e - s).sum();
        // 5 jobs of a (1 ms) and 2 of b (5 ms) in 20 ms.
        assert_eq!(busy_ms, 15.0);
    }
}
