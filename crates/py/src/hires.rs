//! `critmem._core.ReservationTree`: HiRes's reservation tree ([`critmem_core::hires`]) and
//! its hierarchical memory ([`critmem_core::hires::memory`]) for Python. Subsystems are named,
//! reservations are handles (ints); amounts are the tree's integers (memory in bytes, I/O in
//! bytes per second, CPU in `CPU_PARTS` per CPU); addresses are byte addresses.

use critmem_core::hires::memory::{check_page_bytes, PagesHeld};
use critmem_core::hires::{self as core_hires, Family, HierMemory, Kind, MemoryRefusal, Refusal, ResId, Spec, SubsystemId, Update};
use critmem_core::scenario::load_tree_str;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;

fn refused(e: Refusal) -> PyErr {
    PyValueError::new_err(e.to_string())
}

fn memory_refused(e: MemoryRefusal) -> PyErr {
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

/// The tree, and its memory from the first call that needs it: the frame allocator is made
/// then, so a tree used for reservations only costs nothing per frame.
enum State {
    Tree(core_hires::ReservationTree),
    Memory(Box<HierMemory>),
}

/// HiRes's tree of subsystems and the hard and soft reservations between them, and the pages
/// each subsystem holds.
#[pyclass(module = "critmem._core")]
pub struct ReservationTree {
    state: State,
    page_bytes: u64,
}

impl ReservationTree {
    fn of(tree: core_hires::ReservationTree, page_bytes: u64) -> PyResult<Self> {
        check_page_bytes(page_bytes).map_err(memory_refused)?;
        Ok(ReservationTree { state: State::Tree(tree), page_bytes })
    }

    fn tree(&self) -> &core_hires::ReservationTree {
        match &self.state {
            State::Tree(tree) => tree,
            State::Memory(memory) => memory.tree(),
        }
    }

    /// Runs `change` on the tree; with memory, the aliases no longer bound go.
    fn change<R>(&mut self, change: impl FnOnce(&mut core_hires::ReservationTree) -> Result<R, Refusal>) -> PyResult<R> {
        match &mut self.state {
            State::Tree(tree) => change(tree),
            State::Memory(memory) => memory.change_reservations(change),
        }
        .map_err(refused)
    }

    fn memory(&mut self) -> PyResult<&mut HierMemory> {
        if let State::Tree(tree) = &self.state {
            let memory = HierMemory::new(tree.clone(), self.page_bytes).map_err(memory_refused)?;
            self.state = State::Memory(Box::new(memory));
        }
        match &mut self.state {
            State::Memory(memory) => Ok(memory),
            State::Tree(_) => unreachable!("the memory was made above"),
        }
    }

    fn subsystem(&self, name: &str) -> PyResult<SubsystemId> {
        self.tree().find(name).ok_or_else(|| PyValueError::new_err(format!("no subsystem named {name:?}")))
    }
}

fn pages_dict(py: Python<'_>, pages: PagesHeld, bound_pages: Option<u64>) -> PyResult<Bound<'_, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("frames", pages.frames)?;
    d.set_item("aliases", pages.aliases)?;
    if let Some(bound_pages) = bound_pages {
        d.set_item("bound_pages", bound_pages)?;
    }
    Ok(d)
}

#[pymethods]
impl ReservationTree {
    #[new]
    #[pyo3(signature = (cpus, memory_bytes, io_bytes_per_s = 0, *, page_bytes = 4096))]
    fn new(cpus: u64, memory_bytes: u64, io_bytes_per_s: u64, page_bytes: u64) -> PyResult<Self> {
        ReservationTree::of(core_hires::ReservationTree::new(cpus, memory_bytes, io_bytes_per_s), page_bytes)
    }

    /// A tree file's tree, every reservation made (a `ValueError` names the first that is not).
    #[staticmethod]
    #[pyo3(signature = (text, *, page_bytes = 4096))]
    fn load(text: &str, page_bytes: u64) -> PyResult<Self> {
        let file = load_tree_str(text).map_err(|e| PyValueError::new_err(e.to_string()))?;
        ReservationTree::of(file.tree, page_bytes)
    }

    /// Bytes per page of the tree's memory.
    #[getter]
    fn page_bytes(&self) -> u64 {
        self.page_bytes
    }

    #[pyo3(signature = (name, parent = "root"))]
    fn add_subsystem(&mut self, name: &str, parent: &str) -> PyResult<()> {
        let parent = self.subsystem(parent)?;
        self.change(|tree| tree.add_subsystem(name, parent)).map(drop)
    }

    /// `(name, parent)` of every subsystem, the root (parent None) first.
    fn subsystems(&self) -> Vec<(String, Option<String>)> {
        let tree = self.tree();
        tree.subsystems().map(|id| (tree.name(id).to_owned(), tree.parent(id).map(|p| tree.name(p).to_owned()))).collect()
    }

    fn set_overhead(&mut self, subsystem: &str, family: &str, amount: u64) -> PyResult<()> {
        let id = self.subsystem(subsystem)?;
        let family = family_of(family)?;
        self.change(|tree| tree.set_overhead(id, family, amount))
    }

    /// An empty reservation of `family` for `holder` from its parent; its handle.
    fn create(&mut self, holder: &str, kind: &str, family: &str) -> PyResult<usize> {
        let id = self.subsystem(holder)?;
        let (kind, family) = (kind_of(kind)?, family_of(family)?);
        self.change(|tree| tree.create(id, kind, family)).map(|r| r.0)
    }

    /// Binds a CPU budget per period, memory bytes or I/O bytes per second to `res`, as its
    /// family asks; a `ValueError` when the parent cannot admit it (nothing changed). Memory
    /// bound no longer goes with its newest aliases.
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
        self.change(|tree| tree.bind(ResId(res), spec))
    }

    /// Takes back part of soft reservation `res`: at most `keep` of its amount stays. Where
    /// a subsystem is left holding more pages than bound to it, its newest aliases go, with
    /// the aliases made from them.
    fn revoke(&mut self, res: usize, keep: u64) -> PyResult<()> {
        self.change(|tree| tree.revoke(ResId(res), keep))
    }

    /// Deletes `res`, taking back everything it backed down the subtree, the aliases of
    /// memory no longer bound included.
    fn delete(&mut self, res: usize) -> PyResult<()> {
        self.change(|tree| tree.delete(ResId(res)))
    }

    /// The next update of `res`: `"revoked"`, a dict of what is left, or None.
    fn wait<'py>(&mut self, py: Python<'py>, res: usize) -> PyResult<Option<Bound<'py, PyAny>>> {
        Ok(match self.change(|tree| Ok(tree.wait(ResId(res))))? {
            None => None,
            Some(Update::Revoked) => Some("revoked".into_pyobject(py)?.into_any()),
            Some(Update::Reduced(spec)) => Some(spec_dict(py, spec)?.into_any()),
        })
    }

    /// What `res` holds, or None.
    fn bound<'py>(&self, py: Python<'py>, res: usize) -> PyResult<Option<Bound<'py, PyDict>>> {
        self.tree().bound(ResId(res)).map(|spec| spec_dict(py, spec)).transpose()
    }

    /// What `subsystem` holds and gives out of `family`: `hard_in`, `soft_in`, `overhead`,
    /// `hard_out`, `soft_out` and what it keeps for itself, `own`.
    fn holding<'py>(&self, py: Python<'py>, subsystem: &str, family: &str) -> PyResult<Bound<'py, PyDict>> {
        let h = self.tree().holding(self.subsystem(subsystem)?, family_of(family)?);
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

    /// Maps a free frame at `addr` in the root's address space; the frame.
    fn allocate(&mut self, addr: u64) -> PyResult<u32> {
        self.memory()?.allocate(addr).map_err(memory_refused)
    }

    /// Unmaps the root's page at `addr` and every alias made from it, and frees its frame; the
    /// number of aliases removed with it.
    fn free(&mut self, addr: u64) -> PyResult<u64> {
        self.memory()?.free(addr).map_err(memory_refused)
    }

    /// Maps the page `parent` holds at `parent_addr` into its child `child` at `child_addr`;
    /// the frame. A `ValueError` (nothing changed) where `child` would hold more pages than
    /// its memory reservations bind, `parent` holds nothing there or `child` maps something
    /// there already.
    fn alias(&mut self, parent: &str, parent_addr: u64, child: &str, child_addr: u64) -> PyResult<u32> {
        let (parent, child) = (self.subsystem(parent)?, self.subsystem(child)?);
        self.memory()?.alias(parent, parent_addr, child, child_addr).map_err(memory_refused)
    }

    /// Unmaps the alias at `child_addr` in `parent`'s child `child` and every alias made from
    /// it further down; the number of aliases removed.
    fn remove(&mut self, parent: &str, child: &str, child_addr: u64) -> PyResult<u64> {
        let (parent, child) = (self.subsystem(parent)?, self.subsystem(child)?);
        self.memory()?.remove(parent, child, child_addr).map_err(memory_refused)
    }

    /// What `subsystem` maps: `frames` (distinct frames, the memory it holds), `aliases`
    /// (addresses mapped by alias) and `bound_pages` (what its memory reservations bind).
    fn pages<'py>(&mut self, py: Python<'py>, subsystem: &str) -> PyResult<Bound<'py, PyDict>> {
        let id = self.subsystem(subsystem)?;
        let memory = self.memory()?;
        pages_dict(py, memory.pages_held(id), Some(memory.bound_pages(id)))
    }

    /// What `subsystem` and everything below it map: `frames` (a frame mapped in several of
    /// them counts once) and `aliases`.
    fn subtree_pages<'py>(&mut self, py: Python<'py>, subsystem: &str) -> PyResult<Bound<'py, PyDict>> {
        let id = self.subsystem(subsystem)?;
        pages_dict(py, self.memory()?.subtree_pages(id), None)
    }

    /// `(address, frame)` of every page `subsystem` maps, by address.
    fn mappings(&mut self, subsystem: &str) -> PyResult<Vec<(u64, u32)>> {
        let id = self.subsystem(subsystem)?;
        Ok(self.memory()?.mappings(id).collect())
    }

    /// The machine's frames (the root's memory in whole pages): `total`, `in_use`, `free`.
    fn frames<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let memory = self.memory()?;
        let d = PyDict::new(py);
        d.set_item("total", memory.total_frames())?;
        d.set_item("in_use", memory.frames_in_use())?;
        d.set_item("free", memory.free_frames())?;
        Ok(d)
    }

    /// Raises `ValueError` if any subsystem gives out more than it holds or maps more pages
    /// than bound to it, or a frame is lost (never, by design).
    fn check(&self) -> PyResult<()> {
        match &self.state {
            State::Tree(tree) => tree.check(),
            State::Memory(memory) => memory.check(),
        }
        .map_err(PyValueError::new_err)
    }
}
