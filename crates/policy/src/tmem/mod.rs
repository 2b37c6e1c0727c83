//! TMEM memory scheduling (transient memory: execution stacks and shared buffers held in
//! per-component caches, a global pool behind them). A memory scheduler is pure code like a
//! [`crate::Controller`]: every period it receives a [`TmemObservation`] — each cache's
//! allocation and contention, each thread's tardiness since the previous run, the block time
//! of each thread in each cache (the data of the TMEM paper's Table II) — and returns the
//! desired allocation δ of each cache. The platform grows a cache up to δ from the pool when a
//! thread finds it empty, removes free units when δ < a, and takes the rest back as threads
//! put units away (the lag); it never lets a cache fall below its minimum.

use serde::{Deserialize, Serialize};

use crate::PolicyError;

mod alg1;
mod baselines;
mod composite;
mod external;
mod synthetic;
mod watermark;

pub use alg1::Alg1;
pub use baselines::{Fair, Greedy, Max, Min};
pub use composite::{CompositeObjective, CompositeOptions, TmemComposite};
pub use external::{
    check_memory_scheduler, external_memory_schedulers, make_memory_scheduler_with, register_external_memory_schedulers,
    ExternalMemorySchedulers,
};
pub use synthetic::{quiet_observation, synthetic_observation, units_moved, warm_up, WARM_UP_RUNS};
pub use watermark::{Watermark, WatermarkOptions};

/// Index of a cache in [`TmemObservation::caches`]; stable for a run.
pub type CacheId = usize;
/// Index of a thread in [`TmemObservation::threads`]; stable for a run.
pub type ThreadId = usize;

/// What a cache holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum UnitKind {
    /// Execution stacks: one per concurrent invocation of the component.
    Stack,
    /// Shared buffers (cbufs), a page each.
    Cbuf,
}

/// One component's cache of one kind of transient memory, as seen at a policy run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CacheObs {
    pub component: String,
    pub kind: UnitKind,
    /// The allocation that guarantees progress (the largest single request); never taken away.
    pub min_units: u32,
    /// δ in force (`None`: no limit but the pool).
    pub desired_units: Option<u32>,
    /// a: units the cache holds now, free or in use.
    pub allocated_units: u32,
    /// r: the concurrently requested units since the previous run — the units touched (used
    /// bits) when no thread blocked, else the most units held and waited for at once.
    pub estimated_requests: u32,
    /// Distinct units used since the previous run.
    pub touched_units: u32,
    /// Threads waiting for a unit of this cache now.
    pub waiting_now: u32,
    /// Mean number of threads blocked at once over the blocks since the previous run,
    /// rounded up (each block samples how many were blocked, itself included); 0 without
    /// blocks. The original system's concurrency estimate adds it to `allocated_units`.
    pub blocked_concurrency_ceil: u32,
    /// Times a thread found every holder of the cache suspended since the previous run.
    pub self_suspensions: u32,
}

/// One thread (task) at a policy run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThreadObs {
    pub name: String,
    /// Best-effort threads (false) are served but their tardiness is not an objective.
    pub real_time: bool,
    /// 0 is the highest priority.
    pub priority_rank: u32,
    /// Jobs completed since the previous run.
    pub completed_jobs: u32,
    /// Of those, the ones that missed their deadline.
    pub missed_jobs: u32,
    /// t: mean tardiness max(0, completion − deadline) of those jobs (0 without any).
    pub avg_tardiness_ns: u64,
    /// Mean lateness (completion − deadline, negative when early) of those jobs.
    pub avg_lateness_ns: i64,
}

/// The contention of one thread in one cache since the previous run (only non-zero entries
/// are listed).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BlockObs {
    pub cache: CacheId,
    pub thread: ThreadId,
    /// b: time the thread spent blocked waiting for a unit of the cache.
    pub blocked_ns: u64,
    /// Times it blocked.
    pub blocks: u32,
}

/// Everything a memory scheduler sees at one run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TmemObservation {
    pub now_ns: u64,
    /// Units the pool and the caches share in all (`None`: no limit, the `max` setting).
    pub total_units: Option<u32>,
    /// Units in the pool now, in no cache.
    pub free_pool_units: Option<u32>,
    pub caches: Vec<CacheObs>,
    pub threads: Vec<ThreadObs>,
    pub blocks: Vec<BlockObs>,
}

/// The desired allocation of one cache (`None`: no limit but the pool). The platform raises
/// it to the cache's minimum; unknown caches are ignored.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SetDesired {
    pub cache: CacheId,
    pub units: Option<u32>,
}

/// A memory scheduling policy.
pub trait MemoryScheduler: Send {
    /// The name it is built by.
    fn name(&self) -> &'static str;
    /// One run: the δ of every cache whose δ it sets (the others keep theirs).
    fn schedule(&mut self, obs: &TmemObservation) -> Vec<SetDesired>;
}

/// Every memory scheduler [`make_memory_scheduler`] builds, with a line for help texts.
pub const MEMORY_SCHEDULERS: [(&str, &str); 7] = [
    ("min", "every cache keeps only its minimum"),
    ("max", "no limit on any cache (run it with an unlimited pool)"),
    ("fair", "the units above the minimums split equally between the caches"),
    ("greedy", "a cache grows whenever a thread finds it empty, until the pool runs out; nothing is taken back"),
    ("tmem", "TMEM's Algorithm 1: units moved toward the caches that most lower the largest tardiness"),
    ("tmem-composite", "the original system's variant: decaying impact estimate and historical allocation"),
    ("watermark", "critmem's own: caches keep their recent peak demand, idle ones give units back, headroom where real-time threads block"),
];

/// The names of [`MEMORY_SCHEDULERS`], comma separated (for messages).
pub fn memory_scheduler_names() -> String {
    MEMORY_SCHEDULERS.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ")
}

/// The memory scheduler called `name`.
pub fn make_memory_scheduler(name: &str) -> Result<Box<dyn MemoryScheduler>, PolicyError> {
    match name {
        "min" => Ok(Box::new(Min)),
        "max" => Ok(Box::new(Max)),
        "fair" => Ok(Box::new(Fair)),
        "greedy" => Ok(Box::new(Greedy)),
        "tmem" => Ok(Box::new(Alg1)),
        "tmem-composite" => Ok(Box::new(TmemComposite::new(CompositeOptions::default()))),
        "watermark" => Ok(Box::new(Watermark::new(WatermarkOptions::default()))),
        _ => Err(PolicyError::BadInput {
            what: "memory scheduler",
            message: format!("unknown `{name}`; use one of: {}", memory_scheduler_names()),
        }),
    }
}
