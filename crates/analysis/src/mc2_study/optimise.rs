//! Phase 3 of Sec. 6.1: split the LLC ways into one region per core for levels A/B, one for
//! level C and the OS, and one for locked IPC buffers, minimising level C's utilisation while
//! every level passes its test.
//!
//! The tests (Vestal-style: each level's test uses that level's PETs for every task):
//! - level A, per core: Σ 1.5·(c + R + irq)/T over its A tasks ≤ 1 (a cyclic table of
//!   harmonic periods is feasible exactly when its utilisation is);
//! - level B, per core: Σ (c + R + irq)/T over its A and B tasks ≤ 1 (rate-monotonic on
//!   harmonic periods, with every A period at most every B period, is exact at utilisation 1);
//! - level C: the level-C utilisation of all tasks, with interrupts and the OS's copies, is at
//!   most the number of cores and no level-C task exceeds its period (bounded tardiness).
//!
//! `R` is the cache reload a preemption costs, charged to the preempting job: the largest on
//! the core for levels A and B, the largest among level C for level C (levels A and B run in
//! their own ways, so preempting a level-C job evicts none of its lines). The search is exact: per-core costs depend only on
//! that core's ways, level C's only on its own ways, so for each size of the locked region a
//! dynamic programme over the cores finds the least level-C utilisation.
//! [`Evaluator::exhaustive`] enumerates every split to check it.

use super::cost::Costs;
use super::generate::{Level, StudyTask};
use super::params::ModelParams;

/// A way split: per-core A/B regions, level C's, the locked region's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ways {
    pub cores: Vec<usize>,
    pub level_c: usize,
    pub locked: usize,
}

const EPS: f64 = 1e-9;

/// One scheme's placement of one task system, ready for the way search.
pub struct Evaluator<'a> {
    tasks: &'a [StudyTask],
    cpu: &'a [Option<usize>],
    costs: &'a Costs,
    miss: &'a [Vec<f64>],
    params: &'a ModelParams,
    /// CL candidate pairs (sender, receiver), best first: level-B utilisation saved per byte.
    lock_order: Vec<(usize, usize)>,
    by_core: Vec<Vec<usize>>,
    level_c: Vec<usize>,
}

impl<'a> Evaluator<'a> {
    pub(super) fn new(
        tasks: &'a [StudyTask],
        cpu: &'a [Option<usize>],
        costs: &'a Costs,
        miss: &'a [Vec<f64>],
        params: &'a ModelParams,
    ) -> Self {
        let cores = params.platform.cores;
        let mut by_core = vec![Vec::new(); cores];
        let mut level_c = Vec::new();
        for (i, _) in tasks.iter().enumerate() {
            match cpu[i] {
                Some(k) => by_core[k].push(i),
                None => level_c.push(i),
            }
        }
        let mut lock_order: Vec<(usize, usize)> =
            (0..tasks.len()).filter(|&i| costs.lock_bytes[i] > 0.0).map(|i| (i, tasks[i].ipc.map_or(i, |l| l.partner))).collect();
        let saved_per_byte = |&(s, r): &(usize, usize)| {
            -(costs.lock_delta[s] / tasks[s].period_us + costs.lock_delta[r] / tasks[r].period_us) / costs.lock_bytes[s]
        };
        lock_order.sort_by(|a, b| saved_per_byte(b).total_cmp(&saved_per_byte(a)).then(a.0.cmp(&b.0)));
        Evaluator { tasks, cpu, costs, miss, params, lock_order, by_core, level_c }
    }

    fn may_lock(&self) -> bool {
        !self.lock_order.is_empty()
    }

    /// The pairs whose buffers a locked region of `ways` holds: best first, skipping any that
    /// no longer fits.
    pub fn locked(&self, ways: usize) -> Vec<bool> {
        let mut room = ways as f64 * self.params.platform.way_bytes;
        let mut locked = vec![false; self.tasks.len()];
        for &(s, r) in &self.lock_order {
            let need = self.costs.lock_bytes[s];
            if need <= room {
                room -= need;
                locked[s] = true;
                locked[r] = true;
            }
        }
        locked
    }

    fn compute(&self, i: usize, w: usize) -> f64 {
        self.costs.fixed[i] + self.costs.missing[i] * self.miss[i][w]
    }

    /// The longest cache reload a preemption among `tasks` costs at `w` ways: a share of the
    /// preempted job's cost, and never more than refilling the partition.
    fn reload(&self, tasks: &[usize], w: usize) -> f64 {
        let refill_us = w as f64 * self.params.platform.way_bytes / self.params.llc_fill_bytes_per_us;
        tasks.iter().map(|&j| self.tasks[j].reload_share * self.compute(j, w)).fold(0.0, f64::max).min(refill_us)
    }

    /// Level-C utilisation of core `k`'s tasks at `w` ways, `None` when level A or B fails.
    pub fn core_level_c(&self, k: usize, w: usize, locked: &[bool]) -> Option<f64> {
        let a_over_b = self.params.level_a_over_b;
        let reload = self.reload(&self.by_core[k], w);
        let (mut ua, mut ub, mut uc) = (0.0, 0.0, 0.0);
        for &i in &self.by_core[k] {
            let t = &self.tasks[i];
            let lock = if locked[i] { self.costs.lock_delta[i] } else { 0.0 };
            let c = self.compute(i, w) + self.costs.extra[i] + lock;
            ub += (c + reload + self.costs.irq[i]) / t.period_us;
            if t.level == Level::A {
                ua += (a_over_b * (c + reload) + self.costs.irq[i]) / t.period_us;
            }
            uc += t.acet_over_moet * c / t.period_us;
        }
        (ua <= 1.0 + EPS && ub <= 1.0 + EPS).then_some(uc)
    }

    /// Level-C utilisation of the level-C tasks at `w` ways with the reloads they cause every
    /// task and the overheads; `None` when a task exceeds its period.
    pub fn level_c_tasks(&self, w: usize) -> Option<f64> {
        let reload = self.reload(&self.level_c, w);
        let mut u = self.costs.level_c_overhead;
        for &i in &self.level_c {
            let c = self.compute(i, w) + self.costs.extra[i] + reload;
            let t = self.tasks[i].period_us;
            if c > t * (1.0 + EPS) {
                return None;
            }
            u += c / t;
        }
        Some(u)
    }

    /// The least level-C utilisation over every way split, and a split reaching it; `None`
    /// when no split passes levels A and B.
    pub fn optimise(&self) -> Option<(f64, Ways)> {
        let ways = self.params.platform.llc_ways;
        let cores = self.params.platform.cores;
        let g: Vec<Option<f64>> = (0..=ways).map(|w| self.level_c_tasks(w)).collect();
        // Per core and way count: (level A, level B, level C) utilisation with nothing locked.
        let base: Vec<Vec<(f64, f64, f64)>> = (0..cores).map(|k| (0..=ways).map(|w| self.core_terms(k, w)).collect()).collect();
        let mut best: Option<(f64, Ways)> = None;
        let locked_sizes = if self.may_lock() { 0..=ways } else { 0..=0 };
        for locked_ways in locked_sizes {
            let locked = self.locked(locked_ways);
            let shift = self.lock_shift(&locked);
            let avail = ways - locked_ways;
            // f[k][w]: core k's level-C utilisation at w ways, None when A or B fails.
            let f: Vec<Vec<Option<f64>>> = (0..cores)
                .map(|k| {
                    (0..=avail)
                        .map(|w| {
                            let (ua, ub, uc) = base[k][w];
                            let (da, db, dc) = shift[k];
                            (ua + da <= 1.0 + EPS && ub + db <= 1.0 + EPS).then_some(uc + dc)
                        })
                        .collect()
                })
                .collect();
            // dp[s]: least sum over the cores so far using s ways; pick[k][s]: core k's ways there.
            let mut dp: Vec<f64> = vec![f64::INFINITY; avail + 1];
            dp[0] = 0.0;
            let mut pick = vec![vec![0usize; avail + 1]; cores];
            for (k, fk) in f.iter().enumerate() {
                let mut next = vec![f64::INFINITY; avail + 1];
                for (s, &sum) in dp.iter().enumerate() {
                    if sum == f64::INFINITY {
                        continue;
                    }
                    for (w, fw) in fk.iter().enumerate().take(avail + 1 - s) {
                        let Some(fw) = fw else { continue };
                        if sum + fw < next[s + w] {
                            next[s + w] = sum + fw;
                            pick[k][s + w] = w;
                        }
                    }
                }
                dp = next;
            }
            for (s, &sum) in dp.iter().enumerate() {
                let Some(gc) = g[avail - s] else { continue };
                if sum == f64::INFINITY || best.as_ref().is_some_and(|(b, _)| sum + gc >= *b) {
                    continue;
                }
                let mut split = vec![0; cores];
                let mut left = s;
                for k in (0..cores).rev() {
                    split[k] = pick[k][left];
                    left -= split[k];
                }
                best = Some((sum + gc, Ways { cores: split, level_c: avail - s, locked: locked_ways }));
            }
        }
        best
    }

    fn core_terms(&self, k: usize, w: usize) -> (f64, f64, f64) {
        let a_over_b = self.params.level_a_over_b;
        let reload = self.reload(&self.by_core[k], w);
        let (mut ua, mut ub, mut uc) = (0.0, 0.0, 0.0);
        for &i in &self.by_core[k] {
            let t = &self.tasks[i];
            let c = self.compute(i, w) + self.costs.extra[i];
            ub += (c + reload + self.costs.irq[i]) / t.period_us;
            if t.level == Level::A {
                ua += (a_over_b * (c + reload) + self.costs.irq[i]) / t.period_us;
            }
            uc += t.acet_over_moet * c / t.period_us;
        }
        (ua, ub, uc)
    }

    /// How locking shifts each core's level-A, -B and -C utilisation (a constant per core:
    /// locking changes a buffer's cost, not the task's way curve).
    fn lock_shift(&self, locked: &[bool]) -> Vec<(f64, f64, f64)> {
        let mut shift = vec![(0.0, 0.0, 0.0); self.params.platform.cores];
        for (i, &l) in locked.iter().enumerate() {
            let (true, Some(k)) = (l, self.cpu[i]) else { continue };
            let t = &self.tasks[i];
            let d = self.costs.lock_delta[i] / t.period_us;
            if t.level == Level::A {
                shift[k].0 += self.params.level_a_over_b * d;
            }
            shift[k].1 += d;
            shift[k].2 += t.acet_over_moet * d;
        }
        shift
    }

    /// Every way split, evaluated from scratch: the check on [`Evaluator::optimise`].
    pub fn exhaustive(&self) -> Option<(f64, Ways)> {
        let ways = self.params.platform.llc_ways;
        let cores = self.params.platform.cores;
        let mut best: Option<(f64, Ways)> = None;
        let locked_sizes = if self.may_lock() { 0..=ways } else { 0..=0 };
        for locked_ways in locked_sizes {
            let locked = self.locked(locked_ways);
            let mut split = vec![0usize; cores];
            loop {
                let used: usize = split.iter().sum();
                if used + locked_ways <= ways {
                    let level_c = ways - locked_ways - used;
                    let mut total = Some(0.0);
                    for (k, &w) in split.iter().enumerate() {
                        total = total.and_then(|s| self.core_level_c(k, w, &locked).map(|u| s + u));
                    }
                    if let Some(v) = total.and_then(|s| self.level_c_tasks(level_c).map(|g| s + g)) {
                        if best.as_ref().is_none_or(|(b, _)| v < *b) {
                            best = Some((v, Ways { cores: split.clone(), level_c, locked: locked_ways }));
                        }
                    }
                }
                // Next split, as an odometer over 0..=ways per core.
                let mut d = 0;
                while d < cores {
                    split[d] += 1;
                    if split[d] <= ways {
                        break;
                    }
                    split[d] = 0;
                    d += 1;
                }
                if d == cores {
                    break;
                }
            }
        }
        best
    }
}
