//! `watermark`: critmem's own memory scheduler. It schedules transient memory by where
//! contention hurts real-time threads, with memory across windows, and hands idle memory back.
//!
//! Per cache it keeps a **watermark**: the most units the cache was asked for at once
//! (`estimated_requests`: held and waited for when someone blocked, else the units used),
//! lowered by one unit only after the cache stayed below it for `idle_windows` windows in a
//! row. Per (cache, real-time thread) it keeps the **block time** decayed by half each window,
//! weighted double for a thread that was tardy in the recent windows (its tardiness also
//! decays by half).
//!
//! Each run sets δ in three steps:
//! 1. **keep**: a cache keeps what it holds up to its watermark — units are taken back only from
//!    caches that stayed below their watermark across windows;
//! 2. **needed**: the rest of the pool first goes to caches asked for more than they hold
//!    (up to their watermark), the caches with the most weighted block time first;
//! 3. **headroom**: then one unit beyond the watermark (`headroom_units`) for each cache where a
//!    real-time thread blocked in the remembered windows or that used every unit it holds — the
//!    caches the next burst will block in, before any tardiness is observed. δ above what a
//!    cache holds costs nothing until a request finds the cache empty.
//!
//! Why these numbers (Fig. 6's closed system, design task sets of seeds 1–10 only): under an
//! unlimited pool, a cache's demand came back to a level it had reached within 8 windows 96.1 %
//! of the time, within 16 windows 98.3 %, within 24 windows 98.9 %; with 8 windows of memory the
//! watermarks fell between bursts and the largest pools saw 0.2–0.3 ms of max tardiness where
//! greedy saw none, with 24 units sat idle and mid-size pools ran short (1.5 ms at +45 against
//! 0.65 ms with 16). One unit of headroom halved the remaining tardiness at the largest pools
//! against none (0.007 ms against 0.012 ms). Halving per window is the original system's decay
//! of remembered impact; a quarter per window measured the same.
//!
//! Within steps 2 and 3 the units go one at a time to the cache with the largest weighted block
//! time per unit already granted it there (ties: lower index), so scarce memory goes where
//! contention hurts most. Σ δ never exceeds the pool's total; with an unlimited pool nothing is
//! rationed. No cache is set below its minimum. Integer arithmetic throughout.

use super::{MemoryScheduler, SetDesired, TmemObservation};

/// The parameters of [`Watermark`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WatermarkOptions {
    /// Windows in a row below its watermark before a cache's watermark drops by one unit.
    pub idle_windows: u32,
    /// Units δ may stand above the watermark of a cache at risk.
    pub headroom_units: u32,
    /// Remembered block time and tardiness are shifted right by this much each window.
    pub decay_shift: u32,
}

impl Default for WatermarkOptions {
    fn default() -> Self {
        WatermarkOptions { idle_windows: 16, headroom_units: 1, decay_shift: 1 }
    }
}

/// critmem's memory scheduler; keeps watermarks and decayed contention across runs.
#[derive(Clone, Debug, Default)]
pub struct Watermark {
    options: WatermarkOptions,
    /// (caches, threads) the state is for; another shape starts afresh.
    shape: (usize, usize),
    mark: Vec<u32>,
    /// Windows in a row each cache stayed below its watermark.
    below: Vec<u32>,
    /// Windows since each cache last used every unit it held (`u32::MAX`: never).
    since_full: Vec<u32>,
    /// Windows since a real-time thread last blocked in each cache (`u32::MAX`: never).
    since_block: Vec<u32>,
    /// Decayed block time in ns per `[cache * threads + thread]` (real-time threads only).
    blocked_ns: Vec<u64>,
    /// Decayed tardiness in ns per thread.
    tardy_ns: Vec<u64>,
}

impl Watermark {
    pub fn new(options: WatermarkOptions) -> Watermark {
        Watermark { options, ..Watermark::default() }
    }

    /// The watermark of `cache` after the last run (0 before any).
    pub fn mark_units(&self, cache: usize) -> u32 {
        self.mark.get(cache).copied().unwrap_or(0)
    }

    /// The decayed block time of `thread` in `cache` after the last run.
    pub fn remembered_block_ns(&self, cache: usize, thread: usize) -> u64 {
        let (_, threads) = self.shape;
        if thread >= threads {
            return 0;
        }
        self.blocked_ns.get(cache * threads + thread).copied().unwrap_or(0)
    }

    fn reset(&mut self, obs: &TmemObservation) {
        let (n, m) = (obs.caches.len(), obs.threads.len());
        self.shape = (n, m);
        // Without history every unit held counts as needed: none is taken back before it has
        // been idle for the remembered windows.
        self.mark = obs.caches.iter().map(|c| c.allocated_units.max(c.min_units)).collect();
        self.below = vec![0; n];
        self.since_full = vec![u32::MAX; n];
        self.since_block = vec![u32::MAX; n];
        self.blocked_ns = vec![0; n * m];
        self.tardy_ns = vec![0; m];
    }

    /// Folds this window's observation into the remembered state.
    fn remember(&mut self, obs: &TmemObservation) {
        let (_, m) = self.shape;
        let shift = self.options.decay_shift.min(63);
        for (j, c) in obs.caches.iter().enumerate() {
            let demand = c.estimated_requests.max(c.min_units);
            if demand >= self.mark[j] {
                self.mark[j] = demand;
                self.below[j] = 0;
            } else {
                self.below[j] += 1;
                if self.below[j] >= self.options.idle_windows.max(1) {
                    self.mark[j] = (self.mark[j] - 1).max(demand);
                    self.below[j] = 0;
                }
            }
            let full = c.allocated_units > 0 && c.touched_units >= c.allocated_units;
            self.since_full[j] = if full { 0 } else { self.since_full[j].saturating_add(1) };
            self.since_block[j] = self.since_block[j].saturating_add(1);
        }
        for b in &mut self.blocked_ns {
            *b >>= shift;
        }
        for t in &mut self.tardy_ns {
            *t >>= shift;
        }
        for b in &obs.blocks {
            if b.cache < obs.caches.len() && obs.threads.get(b.thread).is_some_and(|t| t.real_time) {
                let slot = &mut self.blocked_ns[b.cache * m + b.thread];
                *slot = slot.saturating_add(b.blocked_ns);
                if b.blocked_ns > 0 {
                    self.since_block[b.cache] = 0;
                }
            }
        }
        for (i, t) in obs.threads.iter().enumerate() {
            if t.real_time && t.missed_jobs > 0 {
                self.tardy_ns[i] = self.tardy_ns[i].saturating_add(t.avg_tardiness_ns.max(1));
            }
        }
    }

    /// Per cache, the remembered block time of real-time threads, a tardy thread's counted twice.
    fn pressure(&self) -> Vec<u64> {
        let (n, m) = self.shape;
        (0..n)
            .map(|j| {
                (0..m).fold(0u64, |sum, i| {
                    let b = self.blocked_ns[j * m + i];
                    let weight = if self.tardy_ns[i] > 0 { 2 } else { 1 };
                    sum.saturating_add(b.saturating_mul(weight))
                })
            })
            .collect()
    }
}

impl MemoryScheduler for Watermark {
    fn name(&self) -> &'static str {
        "watermark"
    }

    fn schedule(&mut self, obs: &TmemObservation) -> Vec<SetDesired> {
        if self.shape != (obs.caches.len(), obs.threads.len()) {
            self.reset(obs);
        }
        self.remember(obs);
        let pressure = self.pressure();
        let n = obs.caches.len();
        let memory = self.options.idle_windows.max(1);
        // Step 1: what each cache holds, up to its watermark, never below its minimum.
        let mut desired: Vec<u64> =
            obs.caches.iter().enumerate().map(|(j, c)| u64::from(c.allocated_units.min(self.mark[j]).max(c.min_units))).collect();
        let needed: Vec<u64> = (0..n).map(|j| u64::from(self.mark[j]).max(desired[j])).collect();
        let at_risk: Vec<bool> = (0..n).map(|j| self.since_block[j] < memory || self.since_full[j] < memory).collect();
        let ceiling: Vec<u64> = (0..n).map(|j| needed[j] + if at_risk[j] { u64::from(self.options.headroom_units) } else { 0 }).collect();
        let Some(total) = obs.total_units else {
            return ceiling.iter().enumerate().map(|(cache, &u)| SetDesired { cache, units: Some(clamp_u32(u)) }).collect();
        };
        let mut spare = u64::from(total).saturating_sub(desired.iter().sum());
        // Steps 2 and 3: the units asked for, then the headroom, to the most pressed caches.
        for limit in [&needed, &ceiling] {
            let mut granted = vec![0u64; n];
            while spare > 0 {
                let mut best: Option<usize> = None;
                for j in (0..n).filter(|&j| desired[j] < limit[j]) {
                    // pressure / (granted + 1), compared by cross-multiplication.
                    let better = best.is_none_or(|b| {
                        u128::from(pressure[j]) * u128::from(granted[b] + 1) > u128::from(pressure[b]) * u128::from(granted[j] + 1)
                    });
                    if better {
                        best = Some(j);
                    }
                }
                let Some(j) = best else { break };
                desired[j] += 1;
                granted[j] += 1;
                spare -= 1;
            }
        }
        desired.iter().enumerate().map(|(cache, &u)| SetDesired { cache, units: Some(clamp_u32(u)) }).collect()
    }
}

fn clamp_u32(units: u64) -> u32 {
    u32::try_from(units).unwrap_or(u32::MAX)
}
