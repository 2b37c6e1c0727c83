//! MC²'s schedulability study ([`critmem_analysis::mc2_study`]) for Python: the inner loop of
//! `critmem study mc2`, the model's parameters with their sources, and its micro-benchmark
//! analogues.

use critmem_analysis::mc2_study::{self as study, ModelParams, Scenario, Scheme, CATEGORIES};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;

/// How many of task systems `first .. first + count` of a point are schedulable under each
/// scheme (`MC2_SCHEMES` order); system `i` comes from `(seed, i)` alone.
#[pyfunction]
#[pyo3(signature = (scenario, system_utilization, seed, first, count))]
fn mc2_schedulable(
    py: Python<'_>,
    scenario: Vec<String>,
    system_utilization: f64,
    seed: u64,
    first: u64,
    count: u64,
) -> PyResult<Vec<u64>> {
    let scenario = Scenario::from_names(&scenario).map_err(PyValueError::new_err)?;
    if !(system_utilization.is_finite() && system_utilization > 0.0 && system_utilization <= 64.0) {
        return Err(PyValueError::new_err(format!("system_utilization must be in (0, 64], got {system_utilization}")));
    }
    if first.checked_add(count).is_none() {
        return Err(PyValueError::new_err("first + count overflows"));
    }
    let params = ModelParams::default();
    Ok(py.detach(|| study::schedulable_counts(scenario, system_utilization, seed, first, count, &params)).to_vec())
}

/// The interference model's parameters: name, value, unit and source of each.
#[pyfunction]
fn mc2_model_parameters(py: Python<'_>) -> PyResult<Vec<Bound<'_, PyDict>>> {
    ModelParams::default()
        .table()
        .into_iter()
        .map(|row| {
            let d = PyDict::new(py);
            d.set_item("name", row.name)?;
            d.set_item("value", row.value)?;
            d.set_item("unit", row.unit)?;
            d.set_item("source", row.source)?;
            Ok(d)
        })
        .collect()
}

/// A message's worst-case (send, receive) cost in µs under SBP, CE or CL (Fig. 8's analogue).
#[pyfunction]
fn mc2_ipc_cost_us(strategy: &str, size_bytes: u64) -> PyResult<(f64, f64)> {
    study::ipc_cost_us(&ModelParams::default(), strategy, size_bytes as f64).map_err(PyValueError::new_err)
}

/// A non-I/O level-A task's worst-case cost over an idle system's when `level_c_percent` of the
/// I/O buffers are in level-C banks (Fig. 14's analogue).
#[pyfunction]
fn mc2_dma_inflation(level_c_percent: f64, bandwidth_mb_s: f64, ways: usize) -> PyResult<f64> {
    if !(0.0..=100.0).contains(&level_c_percent) {
        return Err(PyValueError::new_err(format!("level_c_percent must be in [0, 100], got {level_c_percent}")));
    }
    if !(bandwidth_mb_s.is_finite() && bandwidth_mb_s >= 0.0) {
        return Err(PyValueError::new_err(format!("bandwidth_mb_s must be finite and non-negative, got {bandwidth_mb_s}")));
    }
    Ok(study::dma_inflation(&ModelParams::default(), level_c_percent, bandwidth_mb_s, ways))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("MC2_SCHEMES", Scheme::ALL.map(Scheme::name).to_vec())?;
    let categories: Vec<(&str, Vec<&str>)> = CATEGORIES.iter().map(|(name, choices)| (*name, choices.to_vec())).collect();
    m.add("MC2_CATEGORIES", categories)?;
    m.add_function(wrap_pyfunction!(mc2_schedulable, m)?)?;
    m.add_function(wrap_pyfunction!(mc2_model_parameters, m)?)?;
    m.add_function(wrap_pyfunction!(mc2_ipc_cost_us, m)?)?;
    m.add_function(wrap_pyfunction!(mc2_dma_inflation, m)?)?;
    Ok(())
}
