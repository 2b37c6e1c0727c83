//! Policies written in Python, run inside the simulator: the resolver that builds a scenario's
//! Python controller (`critmem.plugins` finds and checks the class), the [`Controller`] that
//! calls it, and the run's fault slot.
//!
//! User code cannot fail a Rust trait method, so a wrapper whose Python call raised keeps the
//! exception in [`record_fault`] and answers as if nothing happened; the run's progress hook
//! sees the fault and stops the run, and the binding raises the exception when it returns.
//! Runs are single-threaded, so the slot is per thread.

use std::cell::RefCell;

use critmem_policy::{Action, Controller, ExternalControllers, ExternalError, ExternalInfo, Observation};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

thread_local! {
    static FAULT: RefCell<Option<PyErr>> = const { RefCell::new(None) };
}

/// Keeps the first failure of user code in this thread's run.
pub(crate) fn record_fault(err: PyErr) {
    FAULT.with(|f| {
        let mut f = f.borrow_mut();
        if f.is_none() {
            *f = Some(err);
        }
    });
}

/// Whether user code failed in this thread's run.
pub(crate) fn has_fault() -> bool {
    FAULT.with(|f| f.borrow().is_some())
}

/// The failure of user code in this thread's run, clearing it.
pub(crate) fn take_fault() -> Option<PyErr> {
    FAULT.with(|f| f.borrow_mut().take())
}

/// `critmem.plugins`, where classes are found and every call into user code is wrapped.
pub(crate) fn plugins(py: Python<'_>) -> PyResult<Bound<'_, PyModule>> {
    py.import("critmem.plugins")
}

/// The one-line message of an exception.
pub(crate) fn message(err: &PyErr) -> String {
    Python::attach(|py| err.value(py).to_string())
}

/// Builds controllers named by a Python class or an entry point.
pub(crate) struct PyControllers;

fn build(name: &str, params: &serde_json::Value) -> PyResult<(Py<PyAny>, String, u64)> {
    Python::attach(|py| plugins(py)?.call_method1("build_controller", (name, params.to_string()))?.extract())
}

impl ExternalControllers for PyControllers {
    fn check(&self, name: &str, params: &serde_json::Value) -> Result<ExternalInfo, ExternalError> {
        build(name, params).map(|(_, display_name, interval_ns)| ExternalInfo { interval_ns, display_name }).map_err(|e| {
            let not_found = Python::attach(|py| e.value(py).get_type().name().is_ok_and(|n| n == "PluginNotFound"));
            if not_found {
                ExternalError::NotFound(message(&e))
            } else {
                ExternalError::Invalid(message(&e))
            }
        })
    }

    fn build(&self, name: &str, params: &serde_json::Value) -> Box<dyn Controller + Send> {
        match build(name, params) {
            Ok((object, name, interval_ns)) => Box::new(PyController { object: Some(object), name, interval_ns, failure: None }),
            Err(e) => {
                let failure = Some(message(&e));
                record_fault(e);
                Box::new(PyController { object: None, name: name.to_string(), interval_ns: critmem_policy::DEFAULT_INTERVAL_NS, failure })
            }
        }
    }
}

/// A Python controller object; `object` is `None` when building it failed.
struct PyController {
    object: Option<Py<PyAny>>,
    name: String,
    interval_ns: u64,
    failure: Option<String>,
}

impl PyController {
    fn call(object: &Py<PyAny>, obs: &Observation) -> PyResult<Vec<Action>> {
        let wire = serde_json::to_string(obs).map_err(|e| PyValueError::new_err(e.to_string()))?;
        let out: String = Python::attach(|py| plugins(py)?.call_method1("controller_tick", (object.bind(py), wire))?.extract())?;
        serde_json::from_str(&out).map_err(|e| PyValueError::new_err(format!("the actions' form: {e}")))
    }
}

impl Controller for PyController {
    fn name(&self) -> &str {
        &self.name
    }

    fn tick(&mut self, obs: &Observation) -> Vec<Action> {
        let Some(object) = self.object.as_ref().filter(|_| self.failure.is_none()) else { return Vec::new() };
        match PyController::call(object, obs) {
            Ok(actions) => actions,
            Err(e) => {
                self.failure = Some(message(&e));
                record_fault(e);
                Vec::new()
            }
        }
    }

    fn interval_ns(&self) -> u64 {
        self.interval_ns
    }

    fn failure(&self) -> Option<String> {
        self.failure.clone()
    }
}

/// The platform conformance script ([`critmem_policy::ConformanceProbe`]) for a Python
/// controller to drive (`critmem.conformance.Probe`): the checks then run through the Python
/// bridge on whichever platform ticks it.
#[pyclass(name = "ConformanceProbe", module = "critmem._core")]
pub(crate) struct PyConformanceProbe {
    probe: critmem_policy::ConformanceProbe,
    report: std::sync::Arc<std::sync::Mutex<critmem_policy::ConformanceReport>>,
}

#[pymethods]
impl PyConformanceProbe {
    #[new]
    fn new(interval_ns: u64) -> Self {
        let (probe, report) = critmem_policy::ConformanceProbe::new(interval_ns);
        PyConformanceProbe { probe, report }
    }

    /// One tick: the observation's JSON in, the actions' JSON out.
    fn tick(&mut self, observation_json: &str) -> PyResult<String> {
        let obs: Observation = serde_json::from_str(observation_json).map_err(|e| PyValueError::new_err(format!("observation: {e}")))?;
        let actions = self.probe.tick(&obs);
        serde_json::to_string(&actions).map_err(|e| PyValueError::new_err(e.to_string()))
    }

    /// (finished, ticks seen, violations): the script's verdict so far.
    fn verdict(&self) -> (bool, u64, Vec<String>) {
        let r = self.report.lock().unwrap_or_else(|p| p.into_inner());
        (r.finished, r.ticks, r.violations.clone())
    }
}
