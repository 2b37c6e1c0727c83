//! `[tmem]`: TMEM's memory scheduler over the components' stacks and cbufs.

use crate::model::program::StackWait;
use crate::time::Nanos;

/// A validated `[tmem]` table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TmemSpec {
    /// The memory scheduler's name (`critmem_policy::tmem::make_memory_scheduler`).
    pub policy: String,
    /// A Python memory scheduler's keyword arguments (`config`); `None` for a built-in.
    pub config: Option<serde_json::Value>,
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
    /// Over-quota allocation on self-suspension (the original system's `ss_max`): a request
    /// that finds its cache empty, may not grow it (it holds δ), and whose every holder is out
    /// (self-suspended or waiting on a fault, so priority inheritance has nobody to run) takes
    /// a unit from the pool anyway while the cache holds fewer than δ + `ss_max_units`; past
    /// that it waits as usual. The same test is made again for a cache's waiters when one of
    /// its units leaves for the pool (the original's waiters retry when a put wakes them). Over-
    /// quota units go back to the pool when put, like any unit above δ. 0 (the default): off.
    pub ss_max_units: u32,
}
