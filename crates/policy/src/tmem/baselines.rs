//! The TMEM paper's comparison schemes (§VI-B): `min`, `max`, `fair` and `greedy`. None of them
//! reads contention; each sets the δ of every cache at every run.

use super::{MemoryScheduler, SetDesired, TmemObservation};

/// Every cache keeps only its minimum (the allocation that guarantees progress).
#[derive(Clone, Copy, Debug, Default)]
pub struct Min;

impl MemoryScheduler for Min {
    fn name(&self) -> &'static str {
        "min"
    }

    fn schedule(&mut self, obs: &TmemObservation) -> Vec<SetDesired> {
        obs.caches.iter().enumerate().map(|(cache, c)| SetDesired { cache, units: Some(c.min_units) }).collect()
    }
}

/// No limit on any cache; meant for an unlimited pool, where no thread ever waits.
#[derive(Clone, Copy, Debug, Default)]
pub struct Max;

impl MemoryScheduler for Max {
    fn name(&self) -> &'static str {
        "max"
    }

    fn schedule(&mut self, obs: &TmemObservation) -> Vec<SetDesired> {
        unlimited(obs)
    }
}

/// The units above the minimums split equally between the caches, in cache order: each cache
/// gets `min + spare / n`, the first `spare mod n` caches one more. With an unlimited pool
/// there is nothing to split and every cache is unlimited.
#[derive(Clone, Copy, Debug, Default)]
pub struct Fair;

impl MemoryScheduler for Fair {
    fn name(&self) -> &'static str {
        "fair"
    }

    fn schedule(&mut self, obs: &TmemObservation) -> Vec<SetDesired> {
        let Some(total) = obs.total_units else { return unlimited(obs) };
        let n = obs.caches.len() as u64;
        if n == 0 {
            return Vec::new();
        }
        let min_sum: u64 = obs.caches.iter().map(|c| u64::from(c.min_units)).sum();
        // Minimums above the total cannot be honoured by anyone; they stay, with no spare.
        let spare = u64::from(total).saturating_sub(min_sum);
        let (share, extra) = (spare / n, spare % n);
        obs.caches
            .iter()
            .enumerate()
            .map(|(cache, c)| {
                let bonus = share + u64::from((cache as u64) < extra);
                // share ≤ total, so the sum fits a u32 unless min itself is near u32::MAX.
                let units = u32::try_from(u64::from(c.min_units) + bonus).unwrap_or(u32::MAX);
                SetDesired { cache, units: Some(units) }
            })
            .collect()
    }
}

/// A cache grows whenever a thread finds it empty, until the pool runs out; nothing is taken
/// back. Same δ as `max`: only the pool limits growth.
#[derive(Clone, Copy, Debug, Default)]
pub struct Greedy;

impl MemoryScheduler for Greedy {
    fn name(&self) -> &'static str {
        "greedy"
    }

    fn schedule(&mut self, obs: &TmemObservation) -> Vec<SetDesired> {
        unlimited(obs)
    }
}

fn unlimited(obs: &TmemObservation) -> Vec<SetDesired> {
    (0..obs.caches.len()).map(|cache| SetDesired { cache, units: None }).collect()
}
