//! CPU and transient-memory schedulers written in Python, run inside the simulator: the
//! resolvers that build a scenario's Python scheduler (`critmem.plugins` finds and checks the
//! class), the [`Scheduler`] and [`MemoryScheduler`] that call it, and the listing of the
//! built-in memory schedulers.
//!
//! As for controllers ([`crate::plugins`]), a call into user code that raised (or answered
//! something a scheduler may not answer) is kept in the run's fault slot, and the scheduler
//! answers as if it had nothing to run until the run stops at its next progress check.

use critmem_core::sched::external::{static_name, ExternalSchedulerCheck, ExternalSchedulerError, ExternalSchedulers};
use critmem_core::sched::{JobKey, ReadyJob, Scheduler};
use critmem_core::Nanos;
use critmem_core::TaskSpec;
use critmem_policy::tmem::{ExternalMemorySchedulers, MemoryScheduler, SetDesired, TmemObservation, MEMORY_SCHEDULERS};
use critmem_policy::ExternalError;
use pyo3::prelude::*;

use crate::plugins::{message, plugins, record_fault};

/// Registers both resolvers (a second import keeps the first).
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    critmem_core::sched::external::register_external_schedulers(Box::new(PySchedulers));
    critmem_policy::tmem::register_external_memory_schedulers(Box::new(PyMemorySchedulers));
    m.add_function(wrap_pyfunction!(memory_schedulers, m)?)
}

/// The built-in memory schedulers a scenario's `[tmem] policy` can name, as (name, summary)
/// pairs in the order help texts list them.
#[pyfunction]
fn memory_schedulers() -> Vec<(&'static str, &'static str)> {
    MEMORY_SCHEDULERS.to_vec()
}

/// A `PluginError` with `text` (one line).
fn plugin_error(text: String) -> PyErr {
    Python::attach(|py| match plugins(py).and_then(|m| m.getattr("PluginError")).and_then(|c| c.call1((text.clone(),))) {
        Ok(value) => PyErr::from_value(value),
        Err(e) => e,
    })
}

/// Whether `err` is a `PluginNotFound`, or another refusal of what the name names (the
/// wrappers mark those by raising `PluginNotFound` or by the `kind` answer below).
fn is_not_found(err: &PyErr) -> bool {
    Python::attach(|py| err.value(py).get_type().name().is_ok_and(|n| n == "PluginNotFound"))
}

/// The task table a Python scheduler is set up with.
fn tasks_json(tasks: &[TaskSpec]) -> String {
    let rows: Vec<serde_json::Value> = tasks
        .iter()
        .enumerate()
        .map(|(i, t)| {
            serde_json::json!({
                "index": i,
                "name": t.name,
                "period_ns": t.period.0,
                "deadline_ns": t.deadline.0,
                "wcet_ns": t.exec.wcet().0,
                "offset_ns": t.offset.0,
                "priority": t.priority,
                "criticality": t.criticality.to_string(),
                "cpu": t.cpu,
            })
        })
        .collect();
    serde_json::Value::Array(rows).to_string()
}

// -- CPU schedulers -------------------------------------------------------------------------

/// Builds CPU schedulers named by a Python class or an entry point.
struct PySchedulers;

/// The wrappers of `critmem.plugins` a scheduler calls, looked up once.
struct Calls {
    ready: Py<PyAny>,
    remove: Py<PyAny>,
    choose: Py<PyAny>,
    wakeup: Py<PyAny>,
}

fn build_scheduler(name: &str, config: &serde_json::Value, tasks: &[TaskSpec], cpus: usize) -> PyResult<PyScheduler> {
    Python::attach(|py| {
        let m = plugins(py)?;
        let (object, display, wakes): (Py<PyAny>, String, bool) =
            m.call_method1("build_scheduler", (name, config.to_string(), tasks_json(tasks), cpus))?.extract()?;
        let calls = Calls {
            ready: m.getattr("scheduler_ready")?.unbind(),
            remove: m.getattr("scheduler_remove")?.unbind(),
            choose: m.getattr("scheduler_choose")?.unbind(),
            wakeup: m.getattr("scheduler_next_wakeup")?.unbind(),
        };
        let sched = PyScheduler {
            object: Some(object),
            calls: Some(calls),
            name: static_name(&display),
            owner: display,
            cpus,
            ready: Vec::new(),
            failed: false,
            wakes,
        };
        Ok(sched)
    })
}

impl ExternalSchedulerCheck for PySchedulers {
    fn knows(&self, name: &str) -> bool {
        Python::attach(|py| {
            plugins(py).and_then(|m| m.call_method1("scheduler_known", (name,))).and_then(|v| v.extract::<bool>()).unwrap_or(false)
        })
    }

    fn check(&self, name: &str, config: &serde_json::Value, tasks: &[TaskSpec], cpus: usize) -> Result<(), ExternalSchedulerError> {
        let answer: PyResult<Option<(String, String)>> = Python::attach(|py| {
            plugins(py)?.call_method1("check_scheduler", (name, config.to_string(), tasks_json(tasks), cpus))?.extract()
        });
        match answer {
            Ok(None) => Ok(()),
            Ok(Some((key, text))) if key == "kind" => Err(ExternalSchedulerError::NotFound(text)),
            Ok(Some((_, text))) => Err(ExternalSchedulerError::BadConfig(text)),
            Err(e) if is_not_found(&e) => Err(ExternalSchedulerError::NotFound(message(&e))),
            Err(e) => Err(ExternalSchedulerError::BadConfig(message(&e))),
        }
    }
}

impl ExternalSchedulers for PySchedulers {
    fn build(&self, name: &str, config: &serde_json::Value, tasks: &[TaskSpec], cpus: usize) -> Box<dyn Scheduler> {
        match build_scheduler(name, config, tasks, cpus) {
            Ok(sched) => Box::new(sched),
            Err(e) => {
                record_fault(e);
                let owner = name.to_string();
                Box::new(PyScheduler {
                    object: None,
                    calls: None,
                    name: static_name(name),
                    owner,
                    cpus,
                    ready: Vec::new(),
                    failed: true,
                    wakes: false,
                })
            }
        }
    }
}

/// A Python scheduler object; after a failure it leaves every CPU idle.
struct PyScheduler {
    object: Option<Py<PyAny>>,
    calls: Option<Calls>,
    name: &'static str,
    /// The class's name, for messages.
    owner: String,
    cpus: usize,
    /// Which job keys are eligible now (what `choose` may assign).
    ready: Vec<bool>,
    failed: bool,
    /// Whether its class asks to be woken (`next_wakeup_ns`).
    wakes: bool,
}

impl PyScheduler {
    fn live(&self) -> Option<(&Py<PyAny>, &Calls)> {
        if self.failed {
            return None;
        }
        self.object.as_ref().zip(self.calls.as_ref())
    }

    fn fail(&mut self, e: PyErr) {
        self.failed = true;
        record_fault(e);
    }

    fn is_ready(&self, key: JobKey) -> bool {
        self.ready.get(key as usize).copied().unwrap_or(false)
    }

    fn set_ready(&mut self, key: JobKey, ready: bool) {
        let k = key as usize;
        if k >= self.ready.len() {
            self.ready.resize(k + 1, false);
        }
        self.ready[k] = ready;
    }

    /// Checks an answer of `choose`: one entry per CPU, each an eligible job at most once.
    fn check_assignment(&self, answer: &[Option<JobKey>]) -> Result<(), String> {
        let owner = &self.owner;
        if answer.len() != self.cpus {
            return Err(format!(
                "{owner}.choose returned {} entries for {} CPUs: give one job key (or None) per CPU",
                answer.len(),
                self.cpus
            ));
        }
        for (cpu, job) in answer.iter().enumerate() {
            let Some(key) = *job else { continue };
            if !self.is_ready(key) {
                return Err(format!("{owner}.choose put job {key} on CPU {cpu}, but job {key} is not ready"));
            }
            if let Some(other) = answer[..cpu].iter().position(|j| *j == Some(key)) {
                return Err(format!("{owner}.choose put job {key} on two CPUs ({other} and {cpu})"));
            }
        }
        Ok(())
    }
}

impl Scheduler for PyScheduler {
    fn name(&self) -> &'static str {
        self.name
    }
    fn cpus(&self) -> usize {
        self.cpus
    }
    fn add_ready(&mut self, job: &ReadyJob) {
        self.set_ready(job.key, true);
        let Some((object, calls)) = self.live() else { return };
        let donor = job.donor.map(|d| (d.task, d.abs_deadline.0));
        let args = (job.key, job.task, job.seq, job.release.0, job.abs_deadline.0, donor);
        let result = Python::attach(|py| calls.ready.call1(py, (object.bind(py), args)).map(drop));
        if let Err(e) = result {
            self.fail(e);
        }
    }
    fn remove(&mut self, key: JobKey) {
        if !self.is_ready(key) {
            return;
        }
        self.set_ready(key, false);
        let Some((object, calls)) = self.live() else { return };
        let result = Python::attach(|py| calls.remove.call1(py, (object.bind(py), key)).map(drop));
        if let Err(e) = result {
            self.fail(e);
        }
    }
    fn choose(&mut self, now: Nanos, current: &[Option<JobKey>], assign: &mut [Option<JobKey>]) {
        assign.fill(None);
        let Some((object, calls)) = self.live() else { return };
        let answer: PyResult<Vec<Option<JobKey>>> =
            Python::attach(|py| calls.choose.call1(py, (object.bind(py), now.0, current.to_vec()))?.extract(py));
        match answer.and_then(|a| self.check_assignment(&a).map(|()| a).map_err(plugin_error)) {
            Ok(a) => assign.copy_from_slice(&a),
            Err(e) => self.fail(e),
        }
    }
    /// `next_wakeup` cannot fail; an exception is kept in the fault slot, and the run stops
    /// at its next progress check.
    fn next_wakeup(&self, now: Nanos) -> Option<Nanos> {
        if !self.wakes {
            return None;
        }
        let (object, calls) = self.live()?;
        let answer: PyResult<Option<u64>> = Python::attach(|py| calls.wakeup.call1(py, (object.bind(py), now.0))?.extract(py));
        match answer {
            Ok(at) => at.map(Nanos),
            Err(e) => {
                record_fault(e);
                None
            }
        }
    }
}

// -- Transient-memory schedulers -------------------------------------------------------------

/// Builds memory schedulers named by a Python class or an entry point.
struct PyMemorySchedulers;

fn build_memory(name: &str, config: &serde_json::Value) -> PyResult<(Py<PyAny>, String)> {
    Python::attach(|py| plugins(py)?.call_method1("build_memory_scheduler", (name, config.to_string()))?.extract())
}

impl ExternalMemorySchedulers for PyMemorySchedulers {
    fn check(&self, name: &str, config: &serde_json::Value) -> Result<(), ExternalError> {
        build_memory(name, config).map(drop).map_err(|e| {
            if is_not_found(&e) {
                ExternalError::NotFound(message(&e))
            } else {
                ExternalError::Invalid(message(&e))
            }
        })
    }

    fn build(&self, name: &str, config: &serde_json::Value) -> Box<dyn MemoryScheduler> {
        match build_memory(name, config) {
            Ok((object, display)) => Box::new(PyMemoryScheduler { object: Some(object), name: static_name(&display) }),
            Err(e) => {
                record_fault(e);
                Box::new(PyMemoryScheduler { object: None, name: static_name(name) })
            }
        }
    }
}

/// A Python memory scheduler object; after a failure it sets nothing.
struct PyMemoryScheduler {
    object: Option<Py<PyAny>>,
    name: &'static str,
}

impl PyMemoryScheduler {
    fn call(object: &Py<PyAny>, obs: &TmemObservation) -> PyResult<Vec<SetDesired>> {
        let wire = serde_json::to_string(obs).map_err(|e| plugin_error(e.to_string()))?;
        let out: String = Python::attach(|py| plugins(py)?.call_method1("memory_schedule", (object.bind(py), wire))?.extract())?;
        serde_json::from_str(&out).map_err(|e| plugin_error(format!("the allocations' form: {e}")))
    }
}

impl MemoryScheduler for PyMemoryScheduler {
    fn name(&self) -> &'static str {
        self.name
    }

    fn schedule(&mut self, obs: &TmemObservation) -> Vec<SetDesired> {
        let Some(object) = self.object.as_ref() else { return Vec::new() };
        match PyMemoryScheduler::call(object, obs) {
            Ok(out) => out,
            Err(e) => {
                self.object = None;
                record_fault(e);
                Vec::new()
            }
        }
    }
}
