//! `tmem`: the TMEM paper's Algorithm 1 (§V-B), memory scheduling that minimises the largest
//! tardiness of the real-time threads.
//!
//! The policy plans from what the caches hold (a'_j starts at `allocated_units`, so the lag of
//! earlier removals is respected) and estimates, for real-time thread i blocked b_i^j in cache
//! j, that one more unit there lowers its block time, and so its tardiness t_i, by the gain
//! g = b_i^j / (r_j − a'_j) (the paper's t_est with Δ = 1; zero when r_j ≤ a'_j, since a cache
//! that holds what it is asked for has nothing to gain). Each step gives one unit to the cache
//! whose addition yields the lowest resulting largest tardiness, from the pool while it has
//! spare units, else from the cache whose loss of a unit raises that largest tardiness least;
//! a step is taken only when it strictly lowers the largest tardiness. Best-effort threads are
//! served by the caches but are not in the objective.
//!
//! Integer nanoseconds throughout. Gains and losses are rounded down (floor division), so an
//! estimate never exceeds the measured block time; a thread whose block time is smaller than
//! the shortfall r − a' has a zero gain and never draws a unit.

use super::{MemoryScheduler, SetDesired, TmemObservation};

/// Algorithm 1; stateless (every run plans from the observation alone).
#[derive(Clone, Copy, Debug, Default)]
pub struct Alg1;

impl MemoryScheduler for Alg1 {
    fn name(&self) -> &'static str {
        "tmem"
    }

    fn schedule(&mut self, obs: &TmemObservation) -> Vec<SetDesired> {
        let mut plan = Plan::new(obs);
        plan.run();
        plan.alloc.iter().enumerate().map(|(cache, &a)| SetDesired { cache, units: Some(clamp_u32(a)) }).collect()
    }
}

/// The working state of one run: a', the estimated t_i and b_i^j of the real-time threads.
struct Plan {
    /// Real-time threads (the objective's).
    n_rt: usize,
    /// a'_j; starts at max(allocated, min) so δ is never below the minimum.
    alloc: Vec<u64>,
    min: Vec<u64>,
    requests: Vec<u64>,
    /// b_i^j in ns, at `[cache * n_rt + rt]`.
    blocked_ns: Vec<i64>,
    /// t_i in ns (below 0 once the estimates remove more than the observed tardiness).
    tardiness_ns: Vec<i64>,
    /// Units in the pool not planned for any cache; `None`: unlimited.
    spare: Option<u64>,
}

impl Plan {
    fn new(obs: &TmemObservation) -> Plan {
        let mut rt_of_thread = vec![None; obs.threads.len()];
        let mut tardiness_ns = Vec::new();
        for (id, t) in obs.threads.iter().enumerate().filter(|(_, t)| t.real_time) {
            rt_of_thread[id] = Some(tardiness_ns.len());
            tardiness_ns.push(i64::try_from(t.avg_tardiness_ns).unwrap_or(i64::MAX));
        }
        let n_rt = tardiness_ns.len();
        let n = obs.caches.len();
        let mut blocked_ns = vec![0i64; n * n_rt];
        for b in &obs.blocks {
            // Entries naming no cache or no real-time thread do not enter the objective.
            let Some(Some(rt)) = rt_of_thread.get(b.thread) else { continue };
            if b.cache < n {
                let slot = &mut blocked_ns[b.cache * n_rt + rt];
                *slot = slot.saturating_add(i64::try_from(b.blocked_ns).unwrap_or(i64::MAX));
            }
        }
        let alloc: Vec<u64> = obs.caches.iter().map(|c| u64::from(c.allocated_units.max(c.min_units))).collect();
        let planned: u64 = alloc.iter().sum();
        Plan {
            n_rt,
            min: obs.caches.iter().map(|c| u64::from(c.min_units)).collect(),
            requests: obs.caches.iter().map(|c| u64::from(c.estimated_requests)).collect(),
            spare: obs.total_units.map(|t| u64::from(t).saturating_sub(planned)),
            alloc,
            blocked_ns,
            tardiness_ns,
        }
    }

    /// The paper's O(M|C||T|) loop: at most one step per unit that can move or be added.
    fn run(&mut self) {
        let held: u64 = self.alloc.iter().sum();
        let addable = match self.spare {
            Some(s) => s,
            // Unlimited pool: a cache only gains up to its requests.
            None => self.alloc.iter().zip(&self.requests).map(|(&a, &r)| r.saturating_sub(a)).sum(),
        };
        for _ in 0..held.saturating_add(addable) {
            // Tardiness is never negative: once every estimate is at or below 0 there is
            // nothing left to remove.
            let Some(current) = self.tardiness_ns.iter().copied().max() else { return };
            if current <= 0 {
                return;
            }
            let Some(add) = self.best_addition(current) else { return };
            match &mut self.spare {
                Some(0) => {
                    let Some(take) = self.best_removal(add, current) else { return };
                    self.remove(take);
                    self.add(add);
                }
                Some(s) => {
                    *s -= 1;
                    self.add(add);
                }
                None => self.add(add),
            }
        }
    }

    /// g_i^j: the estimated block time one more unit in `cache` saves thread `rt`.
    fn gain(&self, cache: usize, rt: usize) -> i64 {
        let (a, r) = (self.alloc[cache], self.requests[cache]);
        let b = self.blocked_ns[cache * self.n_rt + rt];
        if r > a && b > 0 {
            b / (r - a) as i64
        } else {
            0
        }
    }

    /// The estimated block time thread `rt` gains when `cache` gives up a unit (the gain of
    /// adding it back); idle units (r ≤ a' − 1) cost nothing.
    fn loss(&self, cache: usize, rt: usize) -> i64 {
        let (a, r) = (self.alloc[cache], self.requests[cache]);
        let b = self.blocked_ns[cache * self.n_rt + rt];
        if r + 1 > a && b > 0 {
            b / (r + 1 - a) as i64
        } else {
            0
        }
    }

    /// c^max: the cache whose one-unit addition gives the lowest resulting largest tardiness,
    /// if that is strictly below `current` (ties: lower index).
    fn best_addition(&self, current: i64) -> Option<usize> {
        let mut best: Option<(usize, i64)> = None;
        for cache in 0..self.alloc.len() {
            if self.requests[cache] <= self.alloc[cache] {
                continue;
            }
            let mut any_gain = false;
            let mut after = i64::MIN;
            for (rt, &t) in self.tardiness_ns.iter().enumerate() {
                let g = self.gain(cache, rt);
                any_gain |= g > 0;
                after = after.max(t.saturating_sub(g));
            }
            if any_gain && best.is_none_or(|(_, b)| after < b) {
                best = Some((cache, after));
            }
        }
        best.filter(|&(_, after)| after < current).map(|(cache, _)| cache)
    }

    /// c^min: the cache other than `add`, above its minimum, whose loss of a unit (with the
    /// addition to `add` applied) gives the lowest resulting largest tardiness, if that is
    /// strictly below `current` (ties: lower index).
    fn best_removal(&self, add: usize, current: i64) -> Option<usize> {
        let after_add: Vec<i64> = self.tardiness_ns.iter().enumerate().map(|(rt, &t)| t.saturating_sub(self.gain(add, rt))).collect();
        let mut best: Option<(usize, i64)> = None;
        for cache in 0..self.alloc.len() {
            if cache == add || self.alloc[cache] <= self.min[cache] {
                continue;
            }
            let after = after_add.iter().enumerate().map(|(rt, &t)| t.saturating_add(self.loss(cache, rt))).max().unwrap_or(i64::MIN);
            if best.is_none_or(|(_, b)| after < b) {
                best = Some((cache, after));
            }
        }
        best.filter(|&(_, after)| after < current).map(|(cache, _)| cache)
    }

    /// One unit more in `cache`: each thread's tardiness and block time there drop by its gain.
    fn add(&mut self, cache: usize) {
        for rt in 0..self.n_rt {
            let g = self.gain(cache, rt);
            self.tardiness_ns[rt] = self.tardiness_ns[rt].saturating_sub(g);
            self.blocked_ns[cache * self.n_rt + rt] -= g;
        }
        self.alloc[cache] += 1;
    }

    /// One unit less in `cache`: each thread's tardiness and block time there rise by its loss.
    fn remove(&mut self, cache: usize) {
        for rt in 0..self.n_rt {
            let l = self.loss(cache, rt);
            self.tardiness_ns[rt] = self.tardiness_ns[rt].saturating_add(l);
            let b = &mut self.blocked_ns[cache * self.n_rt + rt];
            *b = b.saturating_add(l);
        }
        self.alloc[cache] -= 1;
    }
}

fn clamp_u32(units: u64) -> u32 {
    u32::try_from(units).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tmem::{BlockObs, CacheObs, ThreadObs, UnitKind};

    const MS: u64 = 1_000_000;

    fn cache(min: u32, allocated: u32, requests: u32) -> CacheObs {
        CacheObs {
            component: "c".into(),
            kind: UnitKind::Stack,
            min_units: min,
            desired_units: Some(allocated),
            allocated_units: allocated,
            estimated_requests: requests,
            touched_units: allocated.min(requests),
            waiting_now: 0,
            blocked_concurrency_ceil: 0,
            self_suspensions: 0,
        }
    }

    fn thread(real_time: bool, tardiness_ns: u64) -> ThreadObs {
        ThreadObs {
            name: "t".into(),
            real_time,
            priority_rank: 0,
            completed_jobs: 1,
            missed_jobs: u32::from(tardiness_ns > 0),
            avg_tardiness_ns: tardiness_ns,
            avg_lateness_ns: tardiness_ns as i64,
        }
    }

    #[test]
    fn gain_and_loss_round_down_and_ignore_idle_units() {
        // c0: a = 2, r = 5, b = 10 ms → gain 10/3 ms = 3_333_333 ns (floor); loss 10/4 ms.
        // c1: a = 4, r = 2 → no gain; loss of a unit leaves r ≤ a' − 1: nothing.
        let obs = TmemObservation {
            now_ns: 0,
            total_units: Some(6),
            free_pool_units: Some(0),
            caches: vec![cache(1, 2, 5), cache(1, 4, 2)],
            threads: vec![thread(true, 5 * MS), thread(false, 9 * MS)],
            blocks: vec![
                BlockObs { cache: 0, thread: 0, blocked_ns: 10 * MS, blocks: 2 },
                BlockObs { cache: 1, thread: 0, blocked_ns: 10 * MS, blocks: 2 },
                BlockObs { cache: 0, thread: 1, blocked_ns: 50 * MS, blocks: 2 },
            ],
        };
        let plan = Plan::new(&obs);
        assert_eq!(plan.n_rt, 1, "best-effort threads are outside the objective");
        assert_eq!(plan.gain(0, 0), 3_333_333);
        assert_eq!(plan.loss(0, 0), 2_500_000);
        assert_eq!(plan.gain(1, 0), 0);
        assert_eq!(plan.loss(1, 0), 0);
    }

    #[test]
    fn spare_units_are_added_before_any_move() {
        // One spare unit; c0 (a 1, r 3, b 8 ms, t 6 ms): the first step adds from the pool
        // (gain 8/2 = 4 → t 2 ms), the second has no spare left and takes c1's idle unit
        // (a 2 > min 1, r 0: loss 0) for gain 4/1 = 4 → t −2 ms; then stop.
        let obs = TmemObservation {
            now_ns: 0,
            total_units: Some(4),
            free_pool_units: Some(1),
            caches: vec![cache(1, 1, 3), cache(1, 2, 0)],
            threads: vec![thread(true, 6 * MS)],
            blocks: vec![BlockObs { cache: 0, thread: 0, blocked_ns: 8 * MS, blocks: 1 }],
        };
        let mut plan = Plan::new(&obs);
        assert_eq!(plan.spare, Some(1));
        plan.run();
        assert_eq!(plan.alloc, vec![3, 1]);
        assert_eq!(plan.spare, Some(0));
        assert_eq!(plan.tardiness_ns, vec![-2 * MS as i64]);
    }
}
