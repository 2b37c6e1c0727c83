//! `tmem-composite`: the memory scheduler of the original COMPOSITE implementation of TMEM
//! (its `tmem_policy` component), which refines Algorithm 1 in several ways:
//!
//! - **impact**: one more unit in cache c saves thread i `avg_blk / (r − a) + 1` ns, with
//!   `avg_blk` its mean time per block there (blocked ns / blocks, rounded down; the `+ 1`
//!   rounds the quotient up); where the thread did not block, a decaying `old_impact`, halved
//!   at every run, prices the removal of a unit from a recently contended cache;
//! - **self-suspension**: a cache whose holders suspended gets spare units up to the count of
//!   suspensions before anything else;
//! - **moves**: the thread with the largest tardiness picks the cache; a cache that got a unit
//!   this run, sits at its minimum, or holds no more than its self-suspensions + 1 never gives
//!   one up;
//! - **historical allocation**: units still spare at the end go back toward the previous run's
//!   plan, in cache order.
//!
//! The plan (`concur_new`) and `old_impact` persist in the object across runs; the first run
//! starts from the minimums (the original's bookkeeping starts at one unit per cache; its
//! reset of an idle cache to one unit is a reset to the minimum here). Only real-time threads
//! enter (the original sees periodic threads only). A thread's tardiness is its mean tardiness when it missed a deadline since the last
//! run, else its mean lateness (negative when early).
//!
//! Units: nanoseconds throughout. The original mixes units — tardiness in 2^20 cycles, block
//! times and impacts in 2^8 cycles — and subtracts one from the other; here both are ns, so the
//! `+ 1` is one nanosecond and the balance between tardiness and impact differs from the
//! original by that scale. Cache order stands for the original's order (stack caches, then
//! cbuf caches, each by component id); thread order for ties is priority rank, then index.

use super::{MemoryScheduler, SetDesired, TmemObservation, UnitKind};

/// What the move loop minimises.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum CompositeObjective {
    /// The largest tardiness of any real-time thread (the original's default).
    #[default]
    Max,
    /// The total tardiness (the original's alternative).
    Avg,
}

/// The original's compile-time switches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CompositeOptions {
    pub objective: CompositeObjective,
    /// Spare units go back toward the previous run's plan.
    pub historical_allocation: bool,
}

impl Default for CompositeOptions {
    fn default() -> Self {
        CompositeOptions { objective: CompositeObjective::Max, historical_allocation: true }
    }
}

/// A cbuf cache asked for anything keeps at least this many units (the original's `CBUF_UNIT`).
const CBUF_UNIT: i64 = 1;

/// The original system's memory scheduler; keeps its plan and decaying impacts across runs.
#[derive(Clone, Debug, Default)]
pub struct TmemComposite {
    options: CompositeOptions,
    /// (caches, threads) the state below is for; another shape starts afresh.
    shape: (usize, usize),
    /// The previous run's plan per cache (`concur_new`).
    plan: Vec<i64>,
    /// `old_impact` in ns per `[cache * threads + thread]`.
    old_impact_ns: Vec<i64>,
}

impl TmemComposite {
    pub fn new(options: CompositeOptions) -> TmemComposite {
        TmemComposite { options, ..TmemComposite::default() }
    }

    /// The decaying impact estimate of `thread` in `cache` after the last run (0 if unknown).
    pub fn old_impact_ns(&self, cache: usize, thread: usize) -> u64 {
        let (_, threads) = self.shape;
        if thread >= threads {
            return 0;
        }
        self.old_impact_ns.get(cache * threads + thread).map_or(0, |&v| v.max(0) as u64)
    }
}

impl MemoryScheduler for TmemComposite {
    fn name(&self) -> &'static str {
        "tmem-composite"
    }

    fn schedule(&mut self, obs: &TmemObservation) -> Vec<SetDesired> {
        let shape = (obs.caches.len(), obs.threads.len());
        if self.shape != shape || self.plan.len() != shape.0 {
            self.shape = shape;
            self.plan = obs.caches.iter().map(|c| i64::from(c.min_units)).collect();
            self.old_impact_ns = vec![0; shape.0 * shape.1];
        }
        let mut run = Run::new(obs, &self.plan, &self.old_impact_ns, self.options);
        run.policy();
        for (c, &new) in run.new.iter().enumerate() {
            self.plan[c] = new;
        }
        for c in 0..shape.0 {
            for (k, &thread) in run.rt.iter().enumerate() {
                self.old_impact_ns[c * shape.1 + thread] = run.old_impact[c * run.n_rt + k];
            }
        }
        run.new
            .iter()
            .enumerate()
            .map(|(cache, &n)| SetDesired { cache, units: Some(u32::try_from(n.max(0)).unwrap_or(u32::MAX)) })
            .collect()
    }
}

/// One run's working state; per-thread vectors are over the real-time threads (`rt`), matrices
/// are `[cache * n_rt + k]`.
struct Run {
    options: CompositeOptions,
    rt: Vec<usize>,
    n_rt: usize,
    kind: Vec<UnitKind>,
    min: Vec<i64>,
    allocated: Vec<i64>,
    est: Vec<i64>,
    ss: Vec<i64>,
    /// `concur_new`: the plan being built.
    new: Vec<i64>,
    /// `concur_hist`: the previous run's plan.
    hist: Vec<i64>,
    /// Units given to each cache by the move loop this run.
    add_in: Vec<u32>,
    /// Spare units in the pool; `None`: unlimited.
    available: Option<i64>,
    tardiness: Vec<i64>,
    avg_blk: Vec<i64>,
    impact: Vec<i64>,
    old_impact: Vec<i64>,
    /// Per cache, the objective after adding a unit there (`add_impact`).
    add_impact: Vec<i64>,
    /// The largest tardiness at the choice of the latest cache to grow.
    largest: i64,
}

impl Run {
    fn new(obs: &TmemObservation, plan: &[i64], old_impact_ns: &[i64], options: CompositeOptions) -> Run {
        let n_threads = obs.threads.len();
        let mut rt: Vec<usize> = (0..n_threads).filter(|&t| obs.threads[t].real_time).collect();
        rt.sort_by_key(|&t| (obs.threads[t].priority_rank, t));
        let n_rt = rt.len();
        let n = obs.caches.len();
        let mut k_of_thread = vec![None; n_threads];
        for (k, &t) in rt.iter().enumerate() {
            k_of_thread[t] = Some(k);
        }
        let mut blk_ns = vec![0u64; n * n_rt];
        let mut blk_cnt = vec![0u64; n * n_rt];
        for b in &obs.blocks {
            let Some(Some(k)) = k_of_thread.get(b.thread) else { continue };
            if b.cache < n {
                blk_ns[b.cache * n_rt + k] = blk_ns[b.cache * n_rt + k].saturating_add(b.blocked_ns);
                blk_cnt[b.cache * n_rt + k] += u64::from(b.blocks);
            }
        }
        let avg_blk = blk_ns.iter().zip(&blk_cnt).map(|(&ns, &cnt)| to_i64(ns / cnt.max(1))).collect();
        let tardiness = rt
            .iter()
            .map(|&t| {
                let t = &obs.threads[t];
                if t.missed_jobs > 0 {
                    to_i64(t.avg_tardiness_ns)
                } else {
                    t.avg_lateness_ns
                }
            })
            .collect();
        let mut old_impact = vec![0; n * n_rt];
        for c in 0..n {
            for (k, &t) in rt.iter().enumerate() {
                old_impact[c * n_rt + k] = old_impact_ns[c * n_threads + t];
            }
        }
        let planned: i64 = plan.iter().sum();
        Run {
            options,
            n_rt,
            kind: obs.caches.iter().map(|c| c.kind).collect(),
            min: obs.caches.iter().map(|c| i64::from(c.min_units)).collect(),
            allocated: obs.caches.iter().map(|c| i64::from(c.allocated_units)).collect(),
            est: obs.caches.iter().map(|c| i64::from(c.estimated_requests)).collect(),
            ss: obs.caches.iter().map(|c| i64::from(c.self_suspensions)).collect(),
            new: plan.to_vec(),
            hist: plan.to_vec(),
            add_in: vec![0; n],
            available: obs.total_units.map(|t| (i64::from(t) - planned).max(0)),
            tardiness,
            avg_blk,
            impact: vec![0; n * n_rt],
            old_impact,
            add_impact: vec![0; n],
            largest: 0,
            rt,
        }
    }

    fn policy(&mut self) {
        self.update_allocation();
        self.calc_improvement();
        self.solve_suspension();
        // Each step adds a spare unit or moves one out of a cache that got none this run, and
        // each add lowers some thread's block time by at least 1 ns of at most its r − a
        // impacts; the bound only guards against an unforeseen cycle.
        let bound =
            self.new.iter().sum::<i64>().saturating_add(self.est.iter().map(|&e| e + 1).sum::<i64>().saturating_mul(self.n_rt as i64 + 1));
        for _ in 0..bound.max(0) {
            let Some(c_add) = self.find_tardiness_comp() else { break };
            match &mut self.available {
                Some(0) => {
                    let Some(c_get) = self.find_min_tardiness_comp(c_add) else { break };
                    self.move_unit(Some(c_add), Some(c_get));
                }
                Some(a) => {
                    *a -= 1;
                    self.move_unit(Some(c_add), None);
                }
                None => self.move_unit(Some(c_add), None),
            }
        }
        if self.options.historical_allocation && self.available != Some(0) {
            self.historical_allocation();
        }
    }

    /// The plan follows what each cache holds (the lag), growth capped by the spare units; a
    /// cache asked for nothing, or holding nothing, drops to its minimum.
    fn update_allocation(&mut self) {
        for c in 0..self.new.len() {
            self.hist[c] = self.new[c];
            let target = self.allocated[c].max(self.min[c]);
            if self.allocated[c] == self.new[c] {
                continue;
            }
            if self.est[c] == 0 || self.allocated[c] == 0 {
                if let Some(a) = &mut self.available {
                    *a += self.new[c] - self.min[c];
                }
                self.new[c] = self.min[c];
                continue;
            }
            match &mut self.available {
                Some(a) if target - self.new[c] > *a => {
                    self.new[c] += *a;
                    *a = 0;
                }
                Some(a) => {
                    *a += self.new[c] - target;
                    self.new[c] = target;
                }
                None => self.new[c] = target,
            }
        }
    }

    fn calc_improvement(&mut self) {
        for c in 0..self.new.len() {
            self.add_in[c] = 0;
            for k in 0..self.n_rt {
                let i = c * self.n_rt + k;
                let short = self.est[c] - self.allocated[c];
                if self.avg_blk[i] > 0 && short > 0 {
                    self.impact[i] = (self.avg_blk[i] / short).saturating_add(1);
                    self.old_impact[i] = self.impact[i];
                } else {
                    self.impact[i] = 0;
                    self.old_impact[i] >>= 1;
                }
            }
        }
    }

    /// Spare units to caches whose holders suspended, up to the suspension count.
    fn solve_suspension(&mut self) {
        for c in 0..self.new.len() {
            if self.ss[c] == 0 {
                continue;
            }
            if self.available == Some(0) {
                break;
            }
            if self.new[c] >= self.ss[c] {
                continue;
            }
            let need = self.ss[c] - self.new[c];
            let changed = match &mut self.available {
                Some(a) => {
                    let changed = need.min(*a);
                    *a -= changed;
                    changed
                }
                None => need,
            };
            self.new[c] += changed;
            for k in 0..self.n_rt {
                let i = c * self.n_rt + k;
                if self.avg_blk[i] == 0 {
                    continue;
                }
                let saved = self.impact[i].saturating_mul(changed);
                let saved = saved.min(self.avg_blk[i]);
                self.tardiness[k] = self.tardiness[k].saturating_sub(saved);
                self.avg_blk[i] -= saved;
            }
        }
    }

    fn find_tardiness_comp(&mut self) -> Option<usize> {
        match self.options.objective {
            CompositeObjective::Max => self.find_max_comp(),
            CompositeObjective::Avg => self.find_total_comp(),
        }
    }

    /// The cache whose added unit gives the lowest largest tardiness, chosen for the thread
    /// with the largest tardiness; a thread that no cache can help is set aside (tardiness 0).
    fn find_max_comp(&mut self) -> Option<usize> {
        loop {
            let mut t = 0;
            for k in 1..self.n_rt {
                if self.tardiness[k] > self.tardiness[t] {
                    t = k;
                }
            }
            self.largest = *self.tardiness.get(t)?;
            if self.largest <= 0 {
                return None;
            }
            let mut best: Option<(usize, i64)> = None;
            for c in 0..self.new.len() {
                let mut largest = 0;
                for k in 0..self.n_rt {
                    let i = c * self.n_rt + k;
                    if self.tardiness[k] > 0 {
                        let after = if self.avg_blk[i] != 0 { self.tardiness[k].saturating_sub(self.impact[i]) } else { self.tardiness[k] };
                        largest = largest.max(after);
                    }
                }
                self.add_impact[c] = largest;
                best = match best {
                    Some((b, min))
                        if largest > min || (largest == min && self.impact[c * self.n_rt + t] <= self.impact[b * self.n_rt + t]) =>
                    {
                        Some((b, min))
                    }
                    _ => Some((c, largest)),
                };
            }
            let (c, _) = best?;
            let i = c * self.n_rt + t;
            if self.avg_blk[i] != 0 && self.impact[i] != 0 {
                return Some(c);
            }
            self.tardiness[t] = 0;
        }
    }

    /// The cache whose added unit lowers the total tardiness most (ties: the larger total
    /// impact), if it lowers it at all.
    fn find_total_comp(&mut self) -> Option<usize> {
        let mut max = 0;
        let mut max_c: Option<usize> = None;
        for c in 0..self.new.len() {
            let mut gain = 0i64;
            for k in 0..self.n_rt {
                let i = c * self.n_rt + k;
                if self.tardiness[k] > 0 && self.avg_blk[i] != 0 {
                    gain = gain.saturating_add(self.impact[i].min(self.tardiness[k]));
                }
            }
            self.add_impact[c] = gain;
            if gain > max {
                max = gain;
                max_c = Some(c);
            } else if gain == max && max > 0 {
                if let Some(m) = max_c.filter(|&m| m != c) {
                    if self.total_impact(c) > self.total_impact(m) {
                        max_c = Some(c);
                    }
                }
            }
        }
        max_c.filter(|_| max > 0)
    }

    fn total_impact(&self, c: usize) -> i64 {
        self.impact[c * self.n_rt..(c + 1) * self.n_rt].iter().fold(0i64, |s, &v| s.saturating_add(v))
    }

    /// The impact a thread is assumed to suffer when `c` loses a unit: this run's impact, else
    /// the decaying history.
    fn impact_with_history(&self, i: usize) -> i64 {
        if self.impact[i] != 0 {
            self.impact[i]
        } else {
            self.old_impact[i]
        }
    }

    /// Whether cache `c` may give a unit to `c_add`.
    fn may_give(&self, c: usize, c_add: usize, objective: CompositeObjective) -> bool {
        let cbuf_floor =
            objective == CompositeObjective::Max && self.kind[c] == UnitKind::Cbuf && self.est[c] > 0 && self.new[c] <= CBUF_UNIT;
        c != c_add && self.add_in[c] == 0 && self.new[c] > self.min[c] && self.ss[c] + 1 < self.new[c] && !cbuf_floor
    }

    fn find_min_tardiness_comp(&self, c_add: usize) -> Option<usize> {
        let objective = self.options.objective;
        let mut best: Option<(usize, i64, i64)> = None;
        for c in (0..self.new.len()).filter(|&c| self.may_give(c, c_add, objective)) {
            // (value minimised, tie-breaker minimised)
            let (value, tie) = match objective {
                CompositeObjective::Max => {
                    let (mut largest, mut impact_largest) = (0i64, i64::MIN);
                    for k in 0..self.n_rt {
                        let ih = self.impact_with_history(c * self.n_rt + k);
                        let after = self.tardiness[k].saturating_add(ih).saturating_sub(self.impact[c_add * self.n_rt + k]);
                        largest = largest.max(after);
                        if ih != 0 {
                            impact_largest = impact_largest.max(after);
                        }
                    }
                    (largest, impact_largest)
                }
                CompositeObjective::Avg => {
                    let (mut worsen, mut total) = (0i64, 0i64);
                    for k in 0..self.n_rt {
                        let ih = self.impact_with_history(c * self.n_rt + k);
                        let after = self.tardiness[k].saturating_sub(self.impact[c_add * self.n_rt + k]);
                        total = total.saturating_add(ih);
                        if after > 0 {
                            worsen = worsen.saturating_add(ih);
                        } else if after.saturating_add(ih) > 0 {
                            worsen = worsen.saturating_add(after.saturating_add(ih));
                        }
                    }
                    (worsen, total)
                }
            };
            if best.is_none_or(|(_, v, t)| value < v || (value == v && tie < t)) {
                best = Some((c, value, tie));
            }
        }
        let (c, value, _) = best?;
        let limit = match objective {
            CompositeObjective::Max => self.largest,
            CompositeObjective::Avg => self.add_impact[c_add],
        };
        (value < limit).then_some(c)
    }

    /// Adding a unit lowers each thread's block time and tardiness in `c_add` by its impact;
    /// taking one raises them in `c_take` by the impact with history.
    fn move_unit(&mut self, c_add: Option<usize>, c_take: Option<usize>) {
        if let Some(c) = c_add {
            for k in 0..self.n_rt {
                let i = c * self.n_rt + k;
                if self.avg_blk[i] != 0 {
                    self.avg_blk[i] = (self.avg_blk[i] - self.impact[i]).max(0);
                    self.tardiness[k] = self.tardiness[k].saturating_sub(self.impact[i]);
                }
            }
            self.new[c] += 1;
            self.add_in[c] += 1;
        }
        if let Some(c) = c_take {
            for k in 0..self.n_rt {
                let ih = self.impact_with_history(c * self.n_rt + k);
                if ih != 0 {
                    let i = c * self.n_rt + k;
                    self.avg_blk[i] = self.avg_blk[i].saturating_add(ih);
                    self.tardiness[k] = self.tardiness[k].saturating_add(ih);
                }
            }
            self.new[c] -= 1;
        }
    }

    /// Spare units go back toward the previous run's plan, in cache order.
    fn historical_allocation(&mut self) {
        for c in 0..self.new.len() {
            if self.available == Some(0) {
                break;
            }
            if self.hist[c] <= self.new[c] {
                continue;
            }
            let need = self.hist[c] - self.new[c];
            let changed = match &mut self.available {
                Some(a) => {
                    let changed = need.min(*a);
                    *a -= changed;
                    changed
                }
                None => need,
            };
            self.new[c] += changed;
        }
    }
}

fn to_i64(ns: u64) -> i64 {
    i64::try_from(ns).unwrap_or(i64::MAX)
}
