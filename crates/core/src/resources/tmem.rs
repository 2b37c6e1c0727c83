//! Components' caches of transient memory and TMEM's manager over them (the TMEM paper,
//! Secs. III–V): every component's stacks and cbufs in caches, a global pool behind them, and
//! a memory scheduler run periodically that sets each cache's desired allocation δ.
//!
//! - `get` (a cache with no free unit): grow by a unit from the pool while the cache holds
//!   fewer than δ; otherwise the request waits (with a dependency on the holder of highest
//!   priority under `inherit`, off every CPU under `block`).
//! - `put`: the unit goes back to the cache, or, while the cache holds more than δ (its
//!   relinquish bit), to the pool, where it serves the caches waiting to grow. Shrinking thus
//!   lags δ by at most the longest hold of a unit.
//! - A run of the scheduler first takes free units out of caches above their new δ at once
//!   (the asynchronous removal), then lets waiting caches grow from the pool.
//! - With `ss_max_units` (the original system's `ss_max`), a request that would wait on a
//!   cache whose every holder is self-suspended takes a unit over δ, up to `ss_max_units`
//!   over (see [`TmemSpec::ss_max_units`]).
//! - No cache ever holds fewer units than its minimum (the largest single request, so every
//!   thread can progress without the policy).
//! - A cbuf passed down a call is mapped into the callee once; the mapping is kept until the
//!   unit leaves its cache for the pool, which unmaps it from every component.

use super::stacks::UnitCache;
use crate::model::program::StackWait;
use crate::model::task::Criticality;
use crate::model::tmem::TmemSpec;
use crate::scenario::Scenario;
use crate::time::Nanos;
use critmem_policy::tmem::{BlockObs, CacheObs, MemoryScheduler, SetDesired, ThreadObs, TmemObservation, UnitKind};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

/// One managed cache over a run.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct TmemCacheStats {
    pub component: String,
    /// `"stack"` or `"cbuf"`.
    pub kind: &'static str,
    pub min_units: u32,
    pub peak_allocated_units: u32,
    pub final_allocated_units: u32,
    /// δ after the last run (`None`: no limit).
    pub final_desired_units: Option<u32>,
    /// Units handed out.
    pub gets: u64,
    /// Units the cache took from the pool to serve a request.
    pub grows: u64,
    /// Requests that waited.
    pub waits: u64,
    pub total_wait_ns: u64,
    pub longest_wait_ns: u64,
    /// Units given back to the pool (free ones removed at a run, or put back while above δ).
    pub removed_units: u64,
    /// Longest time a unit was held, from its grant to its put.
    pub longest_hold_ns: u64,
    /// Longest time from a run that left the cache above its new δ (units in use) to the put
    /// that brought it down to δ: the lag, never longer than the longest hold.
    pub longest_shrink_lag_ns: u64,
}

/// One run of the memory scheduler.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct TmemPoint {
    pub time_ns: u64,
    /// Units in caches, free or held, after the run's changes.
    pub allocated_units: u32,
    pub in_use_units: u32,
    /// Units in the pool (`None`: no limit).
    pub pool_free_units: Option<u32>,
}

/// What a run with `[tmem]` adds to its results.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct TmemResult {
    pub policy: String,
    /// `"inherit"` or `"block"` (the table's setting; components may set their own).
    pub wait: &'static str,
    pub period_ns: u64,
    /// Units of the pool and the caches together (`None`: no limit).
    pub total_units: Option<u32>,
    /// Sum of the caches' minimums.
    pub min_units: u32,
    /// Runs of the memory scheduler.
    pub runs: u64,
    /// Most units in caches at once.
    pub peak_allocated_units: u32,
    /// Units in caches integrated over the run (unit·µs): divided by the horizon, the units
    /// held on average, free or in use.
    pub allocated_unit_us: u64,
    /// Passed cbufs mapped into a component, and mappings removed with their unit.
    pub cbuf_mappings: u64,
    pub cbuf_unmappings: u64,
    pub caches: Vec<TmemCacheStats>,
    /// One point per run.
    pub timeline: Vec<TmemPoint>,
}

/// Most timeline points a run keeps (a run every 250 ms over a year of simulated time fits).
const MAX_TMEM_POINTS: usize = 1 << 20;

/// Completions of one thread since the previous run.
#[derive(Clone, Copy, Debug, Default)]
struct ThreadWindow {
    completed: u32,
    missed: u32,
    tardiness_ns: u128,
    lateness_ns: i128,
}

/// A unit's place, for the invariant check.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Place {
    Nowhere,
    Pool,
    /// A cache, by its id.
    Cache(usize),
}

/// TMEM's manager: the pool, every managed cache's δ, and the scheduler's inputs.
pub(super) struct Manager {
    pub(super) spec: TmemSpec,
    policy: Box<dyn MemoryScheduler>,
    /// Ids of the managed caches, ascending: the observation's order.
    pub(super) caches: Vec<usize>,
    kinds: Vec<UnitKind>,
    min: Vec<u32>,
    desired: Vec<Option<u32>>,
    stats: Vec<TmemCacheStats>,
    /// Free units of the pool; with no limit, units are minted as needed.
    pool: Vec<u32>,
    unlimited: bool,
    minted: u32,
    total_units: Option<u32>,
    /// Per task: name, real-time (not criticality D), priority rank.
    threads: Vec<(String, bool, u32)>,
    windows: Vec<ThreadWindow>,
    /// (managed cache, task) → (blocked ns, blocks) since the previous run.
    blocks: BTreeMap<(usize, usize), (u64, u32)>,
    /// Passed cbufs mapped into components: (unit, component).
    mapped: BTreeSet<(u32, usize)>,
    mappings: u64,
    unmappings: u64,
    runs: u64,
    /// When the current window began (the previous run).
    window_start: Nanos,
    /// Per cache, since when it has been above δ with its excess in use (a shrink under way).
    shrinking_since: Vec<Option<Nanos>>,
    peak_allocated: u32,
    /// Units in caches now, since when, and their integral up to then (unit·ns).
    allocated_now: u32,
    allocated_since: Nanos,
    allocated_unit_ns: u128,
    timeline: Vec<TmemPoint>,
}

impl Manager {
    /// A manager over `caches` (each with its minimum), its pool holding `units_above_min`
    /// units beyond them. Units `0..Σmin` are the caches' own, in cache order.
    pub(super) fn new(
        spec: TmemSpec,
        policy: Box<dyn MemoryScheduler>,
        caches: Vec<(usize, UnitKind, String, u32)>,
        threads: Vec<(String, bool, u32)>,
    ) -> Self {
        let min_total: u32 = caches.iter().map(|c| c.3).sum();
        let extra = spec.units_above_min;
        let pool: Vec<u32> = extra.map(|n| (min_total..min_total + n).rev().collect()).unwrap_or_default();
        let stats = caches
            .iter()
            .map(|(_, kind, name, min)| TmemCacheStats {
                component: name.clone(),
                kind: match kind {
                    UnitKind::Stack => "stack",
                    UnitKind::Cbuf => "cbuf",
                },
                min_units: *min,
                peak_allocated_units: *min,
                final_allocated_units: *min,
                final_desired_units: Some(*min),
                ..TmemCacheStats::default()
            })
            .collect();
        let windows = vec![ThreadWindow::default(); threads.len()];
        let n_caches = caches.len();
        Manager {
            min: caches.iter().map(|c| c.3).collect(),
            desired: caches.iter().map(|c| (spec.first_run == Nanos::ZERO).then_some(c.3)).collect(),
            kinds: caches.iter().map(|c| c.1).collect(),
            caches: caches.into_iter().map(|c| c.0).collect(),
            stats,
            pool,
            unlimited: extra.is_none(),
            minted: min_total + extra.unwrap_or(0),
            total_units: extra.map(|n| min_total + n),
            threads,
            windows,
            blocks: BTreeMap::new(),
            mapped: BTreeSet::new(),
            mappings: 0,
            unmappings: 0,
            runs: 0,
            window_start: Nanos::ZERO,
            shrinking_since: vec![None; n_caches],
            peak_allocated: min_total,
            allocated_now: min_total,
            allocated_since: Nanos::ZERO,
            allocated_unit_ns: 0,
            timeline: Vec::new(),
            policy,
            spec,
        }
    }

    /// The index among managed caches of `r`, if it is managed.
    pub(super) fn index(&self, r: usize) -> Option<usize> {
        self.caches.binary_search(&r).ok()
    }

    /// δ of managed cache `i`, never below its minimum.
    fn desired(&self, i: usize) -> Option<u32> {
        self.desired[i].map(|d| d.max(self.min[i]))
    }

    /// A unit from the pool, if it has one.
    fn take_from_pool(&mut self) -> Option<u32> {
        if self.unlimited {
            if let Some(u) = self.pool.pop() {
                return Some(u);
            }
            self.minted += 1;
            return Some(self.minted - 1);
        }
        self.pool.pop()
    }

    /// The units in caches change by `delta` at `now`: the integral advances to `now`.
    fn note_held_change(&mut self, now: Nanos, delta: i32) {
        let span = u128::from(now.0.saturating_sub(self.allocated_since.0));
        self.allocated_unit_ns += u128::from(self.allocated_now) * span;
        self.allocated_since = self.allocated_since.max(now);
        self.allocated_now = self.allocated_now.saturating_add_signed(delta);
    }

    /// A unit leaves cache `i` for the pool at `now`: unmapped from every component it was
    /// mapped in.
    fn return_to_pool(&mut self, i: usize, unit: u32, now: Nanos) {
        self.note_held_change(now, -1);
        self.stats[i].removed_units += 1;
        if self.kinds[i] == UnitKind::Cbuf {
            let gone: Vec<(u32, usize)> = self.mapped.range((unit, 0)..=(unit, usize::MAX)).copied().collect();
            self.unmappings += gone.len() as u64;
            for m in gone {
                self.mapped.remove(&m);
            }
        }
        self.pool.push(unit);
    }

    /// Grows managed cache `i` by a unit from the pool for a request that found it empty,
    /// if it holds fewer than δ and the pool has one.
    pub(super) fn grow(&mut self, i: usize, cache: &mut UnitCache, now: Nanos) -> bool {
        if self.desired(i).is_some_and(|d| cache.allocated() >= d) {
            return false;
        }
        self.grow_from_pool(i, cache, now)
    }

    /// Moves a unit from the pool into managed cache `i`, if the pool has one.
    fn grow_from_pool(&mut self, i: usize, cache: &mut UnitCache, now: Nanos) -> bool {
        let Some(unit) = self.take_from_pool() else { return false };
        self.note_held_change(now, 1);
        cache.add_unit(unit);
        self.stats[i].grows += 1;
        self.note_allocation(i, cache.allocated());
        true
    }

    /// Grows managed cache `i` by a unit over its δ for a request whose every holder is out
    /// (a self-suspension), while it holds fewer than δ + `ss_max_units` and the pool has one
    /// ([`TmemSpec::ss_max_units`]). Counted among the cache's grows.
    pub(super) fn grow_over_quota(&mut self, i: usize, cache: &mut UnitCache, now: Nanos) -> bool {
        self.may_grow_over_quota(i, cache) && self.grow_from_pool(i, cache, now)
    }

    /// Whether over-quota allocation is on and cache `i` holds fewer than δ + `ss_max_units`.
    pub(super) fn may_grow_over_quota(&self, i: usize, cache: &UnitCache) -> bool {
        let ss = self.spec.ss_max_units;
        ss > 0 && self.desired(i).is_some_and(|d| cache.allocated() < d.saturating_add(ss))
    }

    fn note_allocation(&mut self, i: usize, allocated: u32) {
        let s = &mut self.stats[i];
        s.peak_allocated_units = s.peak_allocated_units.max(allocated);
    }

    /// After `put` returned `unit` to managed cache `i`: while the cache holds more than δ the
    /// unit goes on to the pool (true).
    pub(super) fn after_put(&mut self, i: usize, cache: &mut UnitCache, unit: u32, now: Nanos) -> bool {
        let Some(d) = self.desired(i).filter(|&d| cache.allocated() > d) else { return false };
        cache.remove_unit(unit);
        self.return_to_pool(i, unit, now);
        if cache.allocated() <= d {
            if let Some(since) = self.shrinking_since[i].take() {
                let s = &mut self.stats[i];
                s.longest_shrink_lag_ns = s.longest_shrink_lag_ns.max((now - since).0);
            }
        }
        true
    }

    /// Whether the pool can give a unit now.
    pub(super) fn pool_has_units(&self) -> bool {
        self.unlimited || !self.pool.is_empty()
    }

    /// Whether managed cache `i` may grow (it holds fewer than δ).
    pub(super) fn may_grow(&self, i: usize, cache: &UnitCache) -> bool {
        self.desired(i).is_none_or(|d| cache.allocated() < d)
    }

    /// A request of `task` on managed cache `i` begins to wait: a block of this window.
    pub(super) fn note_block(&mut self, i: usize, task: usize) {
        self.blocks.entry((i, task)).or_default().1 += 1;
    }

    /// A wait on managed cache `i` since `since` ends now (a grant): its time within this
    /// window is the thread's block time here (the rest was counted at the runs it spanned).
    pub(super) fn note_grant(&mut self, i: usize, task: usize, since: Nanos, now: Nanos) {
        let from = since.max(self.window_start);
        self.blocks.entry((i, task)).or_default().0 += (now - from).0;
    }

    /// Maps cbuf `unit` into `component`; whether it was not mapped there yet (a cost is due).
    pub(super) fn map_cbuf(&mut self, unit: u32, component: usize) -> bool {
        let fresh = self.mapped.insert((unit, component));
        if fresh {
            self.mappings += 1;
        }
        fresh
    }

    /// A job of `task` completed at `end` with absolute deadline `deadline`.
    pub(super) fn job_completed(&mut self, task: usize, end: Nanos, deadline: Nanos) {
        let w = &mut self.windows[task];
        w.completed += 1;
        let lateness = i128::from(end.0) - i128::from(deadline.0);
        w.lateness_ns += lateness;
        if lateness > 0 {
            w.missed += 1;
            w.tardiness_ns += lateness as u128;
        }
    }

    /// One run of the scheduler at `now`: observe, decide, take free units out of caches above
    /// their new δ, start new windows. The caller then lets waiting caches grow.
    pub(super) fn run(&mut self, now: Nanos, all: &mut [UnitCache]) {
        // Waits still open count the part within this window: block time "since the last run".
        for (i, &id) in self.caches.iter().enumerate() {
            for (task, since) in all[id].waiting_since() {
                let from = since.max(self.window_start);
                self.blocks.entry((i, task)).or_default().0 += (now - from).0;
            }
        }
        let caches: Vec<CacheObs> = (0..self.caches.len())
            .map(|i| {
                let c = &all[self.caches[i]];
                let blocked = c.window_blocks > 0;
                CacheObs {
                    component: self.stats[i].component.clone(),
                    kind: self.kinds[i],
                    min_units: self.min[i],
                    desired_units: self.desired(i),
                    allocated_units: c.allocated(),
                    estimated_requests: if blocked { c.window_peak_demand } else { c.touched.len() as u32 },
                    touched_units: c.touched.len() as u32,
                    waiting_now: c.waiting(),
                    blocked_concurrency_ceil: if blocked { c.window_blocked_sum.div_ceil(u64::from(c.window_blocks)) as u32 } else { 0 },
                    self_suspensions: c.window_self_suspensions,
                }
            })
            .collect();
        let threads: Vec<ThreadObs> = self
            .threads
            .iter()
            .zip(&self.windows)
            .map(|((name, real_time, rank), w)| {
                let n = u128::from(w.completed.max(1));
                ThreadObs {
                    name: name.clone(),
                    real_time: *real_time,
                    priority_rank: *rank,
                    completed_jobs: w.completed,
                    missed_jobs: w.missed,
                    avg_tardiness_ns: (w.tardiness_ns / n) as u64,
                    avg_lateness_ns: (w.lateness_ns / n as i128) as i64,
                }
            })
            .collect();
        let blocks =
            self.blocks.iter().map(|(&(cache, thread), &(blocked_ns, blocks))| BlockObs { cache, thread, blocked_ns, blocks }).collect();
        let obs = TmemObservation {
            now_ns: now.0,
            total_units: self.total_units,
            free_pool_units: (!self.unlimited).then_some(self.pool.len() as u32),
            caches,
            threads,
            blocks,
        };
        for SetDesired { cache, units } in self.policy.schedule(&obs) {
            if cache < self.desired.len() {
                self.desired[cache] = units;
            }
        }
        self.runs += 1;
        for i in 0..self.caches.len() {
            let c = &mut all[self.caches[i]];
            if let Some(d) = self.desired(i) {
                while c.allocated() > d {
                    let Some(unit) = c.remove_free_unit() else { break };
                    self.return_to_pool(i, unit, now);
                }
            }
            // Units in use above δ leave as they are put (the lag, measured from here).
            if self.desired(i).is_some_and(|d| c.allocated() > d) {
                self.shrinking_since[i].get_or_insert(now);
            } else {
                self.shrinking_since[i] = None;
            }
            c.new_window();
        }
        self.windows.iter_mut().for_each(|w| *w = ThreadWindow::default());
        self.blocks.clear();
        self.window_start = now;
    }

    /// Records a timeline point after a run's changes.
    pub(super) fn record_point(&mut self, now: Nanos, allocated: u32, in_use: u32) {
        self.peak_allocated = self.peak_allocated.max(allocated);
        if self.timeline.len() < MAX_TMEM_POINTS {
            self.timeline.push(TmemPoint {
                time_ns: now.0,
                allocated_units: allocated,
                in_use_units: in_use,
                pool_free_units: (!self.unlimited).then_some(self.pool.len() as u32),
            });
        }
    }

    pub(super) fn note_total_allocated(&mut self, allocated: u32) {
        self.peak_allocated = self.peak_allocated.max(allocated);
    }

    /// Every unit in exactly one place — the pool or one cache — no cache below its minimum,
    /// and none above δ with a free unit.
    pub(super) fn check(&self, all: &[UnitCache]) {
        let mut place = vec![Place::Nowhere; self.minted as usize];
        let mut put = |u: u32, p: Place| {
            let slot = &mut place[u as usize];
            assert_eq!(*slot, Place::Nowhere, "TMEM unit {u} is in two places ({slot:?} and {p:?})");
            *slot = p;
        };
        for &u in &self.pool {
            put(u, Place::Pool);
        }
        for (i, &r) in self.caches.iter().enumerate() {
            for u in all[r].units() {
                put(u, Place::Cache(r));
            }
            assert!(all[r].allocated() >= self.min[i], "a TMEM cache of {} fell below its minimum", self.stats[i].component);
            // Above δ only by units in use: each goes to the pool when put, within its hold.
            if self.desired(i).is_some_and(|d| all[r].allocated() > d) {
                assert!(!all[r].has_free(), "a TMEM cache of {} keeps a free unit above its desired allocation", self.stats[i].component);
            }
        }
        if !self.unlimited {
            assert!(place.iter().all(|&p| p != Place::Nowhere), "a TMEM unit is lost");
        }
        let allocated: u32 = self.caches.iter().map(|&r| all[r].allocated()).sum();
        assert_eq!(allocated, self.allocated_now, "the TMEM integral counts {} units in caches, they hold {allocated}", self.allocated_now);
    }

    /// The run's `tmem` section, from the caches at the `horizon`.
    pub(super) fn finish(mut self, all: &[UnitCache], horizon: Nanos) -> TmemResult {
        self.note_held_change(horizon, 0);
        for (i, &r) in self.caches.iter().enumerate() {
            let c = &all[r];
            let s = &mut self.stats[i];
            s.final_allocated_units = c.allocated();
            s.final_desired_units = self.desired[i].map(|d| d.max(self.min[i]));
            s.gets = c.counters.gets;
            s.waits = c.counters.waits;
            s.total_wait_ns = c.counters.total_wait.0;
            s.longest_wait_ns = c.counters.longest_wait.0;
            s.longest_hold_ns = c.counters.longest_hold.0;
        }
        TmemResult {
            policy: self.spec.policy.clone(),
            wait: self.spec.wait.as_str(),
            period_ns: self.spec.period.0,
            total_units: self.total_units,
            min_units: self.min.iter().sum(),
            runs: self.runs,
            peak_allocated_units: self.peak_allocated,
            allocated_unit_us: u64::try_from(self.allocated_unit_ns / 1000).unwrap_or(u64::MAX),
            cbuf_mappings: self.mappings,
            cbuf_unmappings: self.unmappings,
            caches: self.stats,
            timeline: self.timeline,
        }
    }
}

/// The caches of a scenario's components and, with `[tmem]`, the manager over them.
pub(super) struct CacheLayout {
    pub(super) caches: Vec<UnitCache>,
    pub(super) cbuf_cache: Vec<Option<usize>>,
    pub(super) cache_component: Vec<usize>,
    pub(super) cache_wait: Vec<StackWait>,
    pub(super) manager: Option<Manager>,
}

impl CacheLayout {
    /// Cache `c` holds component `c`'s stacks; the cbufs of the components that have some
    /// follow, in component order. Under `[tmem]` every cache with a bounded number of units is
    /// managed, that number its minimum, and unit ids are global (the pool's beyond them).
    /// `policy` replaces the scheduler `[tmem]` names.
    pub(super) fn new(scenario: &Scenario, policy: Option<Box<dyn MemoryScheduler>>) -> Self {
        let comps = &scenario.components;
        let tmem = scenario.tmem.as_ref();
        let mut caches = Vec::new();
        let mut cache_component = Vec::new();
        let mut cache_wait = Vec::new();
        let mut managed = Vec::new();
        let mut next_id = 0u32;
        let mut add = |caches: &mut Vec<UnitCache>, c: usize, units: Option<u32>, kind: UnitKind| {
            let id = caches.len();
            caches.push(UnitCache::new(units, next_id));
            if let Some(n) = units {
                if tmem.is_some() {
                    managed.push((id, kind, comps[c].name.clone(), n));
                    caches[id].track_use = true;
                }
                // Bounded caches' ids are unique across them, so TMEM can track each unit
                // (unbounded caches are not TMEM's and mint ids of their own).
                next_id += n;
            }
            cache_component.push(c);
            cache_wait.push(comps[c].stack_wait);
            id
        };
        for (c, spec) in comps.iter().enumerate() {
            add(&mut caches, c, spec.stacks, UnitKind::Stack);
        }
        let mut cbuf_cache = vec![None; comps.len()];
        for (c, spec) in comps.iter().enumerate() {
            if spec.cbufs.is_some() {
                cbuf_cache[c] = Some(add(&mut caches, c, spec.cbufs, UnitKind::Cbuf));
            }
        }
        let ranks = match crate::sched::job_order(scenario) {
            Some(crate::sched::JobOrder::FixedPriority { ranks }) => ranks,
            _ => (0..scenario.tasks.len() as u32).collect(),
        };
        let manager = tmem.map(|spec| {
            let threads = scenario
                .tasks
                .iter()
                .enumerate()
                .map(|(t, task)| (task.name.clone(), task.criticality != Criticality::D, ranks[t]))
                .collect();
            let policy = policy.unwrap_or_else(|| {
                critmem_policy::tmem::make_memory_scheduler_with(&spec.policy, spec.config.as_ref().unwrap_or(&serde_json::json!({})))
                    .expect("the loader checks the policy name")
            });
            Manager::new(spec.clone(), policy, managed, threads)
        });
        CacheLayout { caches, cbuf_cache, cache_component, cache_wait, manager }
    }
}
