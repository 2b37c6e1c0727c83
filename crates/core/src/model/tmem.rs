//! `[tmem]`: TMEM's memory scheduler over the components' stacks and cbufs.

use crate::model::program::StackWait;
use crate::time::Nanos;

/// A validated `[tmem]` table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TmemSpec {
    /// The memory scheduler's name (`critmem_policy::tmem::make_memory_scheduler`).
    pub policy: String,
    /// How a request that finds its cache empty waits (components may set their own).
    pub wait: StackWait,
    /// Units the pool holds beyond every cache's minimum (`None`: no limit).
    pub units_above_min: Option<u32>,
    /// Time between the scheduler's runs.
    pub period: Nanos,
    /// The scheduler's first run; until then no cache has a limit but the pool (the original
    /// system's default allocations while its policy waits for data). Zero: a run at time zero.
    pub first_run: Nanos,
    /// CPU time of mapping a passed cbuf into a component it is not yet mapped in.
    pub cbuf_map_cost: Nanos,
}
