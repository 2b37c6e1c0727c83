//! The stream of a job's call draws.

use crate::rng::{derive_seed, sub_rng, SimRng};

/// The stream a job's call draws come from: one per (seed, task, job index), so a job's call
/// tree depends on neither the schedule nor the other tasks.
pub(super) fn calls_rng(seed: u64, task: usize, index: u64) -> SimRng {
    sub_rng(derive_seed(seed, "component-calls", task as u64), "job", index)
}
