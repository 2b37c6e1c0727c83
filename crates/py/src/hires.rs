//! `critmem._core.ReservationTree`: HiRes's reservation tree ([`critmem_core::hires`]) for
//! Python. Subsystems are named, reservations are handles (ints); amounts are the tree's
//! integers (memory in bytes, I/O in bytes per second, CPU in `CPU_PARTS` per CPU).

use critmem_core::hires::{self as core_hires, load_tree_str, Family, Kind, Refusal, ResId, Spec, SubsystemId, Update};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;

fn refused(e: Refusal) -> PyErr {
    PyValueError::new_err(e.to_string())
}

fn family_of(name: &str) -> PyResult<Family> {
    Family::ALL
        .into_iter()
        .find(|f| f.as_str() == name)
        .ok_or_else(|| PyValueError::new_err(format!("family must be cpu, memory or io (got {name:?})")))
}

fn kind_of(name: &str) -> PyResult<Kind> {
    match name {
        "hard" => Ok(Kind::Hard),
        "soft" => Ok(Kind::Soft),
        _ => Err(PyValueError::new_err(format!("kind must be hard or soft (got {name:?})"))),
    }
}

fn spec_dict<'py>(py: Python<'py>, spec: Spec) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("family", spec.family().as_str())?;
    match spec {
        Spec::Cpu { budget_ns, period_ns } => {
            d.set_item("budget_ns", budget_ns)?;
            d.set_item("period_ns", period_ns)?;
        }
        Spec::Memory { bytes } => d.set_item("bytes", bytes)?,
        Spec::Io { bytes_per_s } => d.set_item("bytes_per_s", bytes_per_s)?,
    }
    d.set_item("amount", spec.amount())?;
    Ok(d)
}

/// HiRes's tree of subsystems and the hard and soft reservations between them.
#[pyclass(module = "critmem._core")]
pub struct ReservationTree {
    tree: core_hires::ReservationTree,
}

impl ReservationTree {
    fn subsystem(&self, name: &str) -> PyResult<SubsystemId> {
        self.tree.find(name).ok_or_else(|| PyValueError::new_err(format!("no subsystem named {name:?}")))
    }
}

#[pymethods]
impl ReservationTree {
    #[new]
    #[pyo3(signature = (cpus, memory_bytes, io_bytes_per_s = 0))]
    fn new(cpus: u64, memory_bytes: u64, io_bytes_per_s: u64) -> Self {
        ReservationTree { tree: core_hires::ReservationTree::new(cpus, memory_bytes, io_bytes_per_s) }
    }

    /// A tree file's tree, every reservation made (a `ValueError` names the first that is not).
    #[staticmethod]
    fn load(text: &str) -> PyResult<Self> {
        load_tree_str(text).map(|f| ReservationTree { tree: f.tree }).map_err(|e| PyValueError::new_err(e.to_string()))
    }

    #[pyo3(signature = (name, parent = "root"))]
    fn add_subsystem(&mut self, name: &str, parent: &str) -> PyResult<()> {
        let parent = self.subsystem(parent)?;
        self.tree.add_subsystem(name, parent).map(|_| ()).map_err(refused)
    }

    /// `(name, parent)` of every subsystem, the root (parent None) first.
    fn subsystems(&self) -> Vec<(String, Option<String>)> {
        self.tree
            .subsystems()
            .map(|id| (self.tree.name(id).to_owned(), self.tree.parent(id).map(|p| self.tree.name(p).to_owned())))
            .collect()
    }

    fn set_overhead(&mut self, subsystem: &str, family: &str, amount: u64) -> PyResult<()> {
        let id = self.subsystem(subsystem)?;
        self.tree.set_overhead(id, family_of(family)?, amount).map_err(refused)
    }

    /// An empty reservation of `family` for `holder` from its parent; its handle.
    fn create(&mut self, holder: &str, kind: &str, family: &str) -> PyResult<usize> {
        let id = self.subsystem(holder)?;
        self.tree.create(id, kind_of(kind)?, family_of(family)?).map(|r| r.0).map_err(refused)
    }

    /// Binds a CPU budget per period, memory bytes or I/O bytes per second to `res`, as its
    /// family asks; a `ValueError` when the parent cannot admit it (nothing changed).
    #[pyo3(signature = (res, *, budget_ns = None, period_ns = None, bytes = None, bytes_per_s = None))]
    fn bind(
        &mut self,
        res: usize,
        budget_ns: Option<u64>,
        period_ns: Option<u64>,
        bytes: Option<u64>,
        bytes_per_s: Option<u64>,
    ) -> PyResult<()> {
        let spec = match (budget_ns, period_ns, bytes, bytes_per_s) {
            (Some(budget_ns), Some(period_ns), None, None) => Spec::Cpu { budget_ns, period_ns },
            (None, None, Some(bytes), None) => Spec::Memory { bytes },
            (None, None, None, Some(bytes_per_s)) => Spec::Io { bytes_per_s },
            _ => return Err(PyValueError::new_err("give budget_ns and period_ns (cpu), bytes (memory) or bytes_per_s (io)")),
        };
        self.tree.bind(ResId(res), spec).map_err(refused)
    }

    /// Takes back part of soft reservation `res`: at most `keep` of its amount stays.
    fn revoke(&mut self, res: usize, keep: u64) -> PyResult<()> {
        self.tree.revoke(ResId(res), keep).map_err(refused)
    }

    /// Deletes `res`, taking back everything it backed down the subtree.
    fn delete(&mut self, res: usize) -> PyResult<()> {
        self.tree.delete(ResId(res)).map_err(refused)
    }

    /// The next update of `res`: `"revoked"`, a dict of what is left, or None.
    fn wait<'py>(&mut self, py: Python<'py>, res: usize) -> PyResult<Option<Bound<'py, PyAny>>> {
        Ok(match self.tree.wait(ResId(res)) {
            None => None,
            Some(Update::Revoked) => Some("revoked".into_pyobject(py)?.into_any()),
            Some(Update::Reduced(spec)) => Some(spec_dict(py, spec)?.into_any()),
        })
    }

    /// What `res` holds, or None.
    fn bound<'py>(&self, py: Python<'py>, res: usize) -> PyResult<Option<Bound<'py, PyDict>>> {
        self.tree.bound(ResId(res)).map(|spec| spec_dict(py, spec)).transpose()
    }

    /// What `subsystem` holds and gives out of `family`: `hard_in`, `soft_in`, `overhead`,
    /// `hard_out`, `soft_out` and what it keeps for itself, `own`.
    fn holding<'py>(&self, py: Python<'py>, subsystem: &str, family: &str) -> PyResult<Bound<'py, PyDict>> {
        let h = self.tree.holding(self.subsystem(subsystem)?, family_of(family)?);
        let d = PyDict::new(py);
        for (key, value) in [
            ("hard_in", h.hard_in),
            ("soft_in", h.soft_in),
            ("overhead", h.overhead),
            ("hard_out", h.hard_out),
            ("soft_out", h.soft_out),
            ("own", h.own()),
        ] {
            d.set_item(key, value)?;
        }
        Ok(d)
    }

    /// Raises `ValueError` if any subsystem gives out more than it holds (never, by design).
    fn check(&self) -> PyResult<()> {
        self.tree.check().map_err(PyValueError::new_err)
    }
}
