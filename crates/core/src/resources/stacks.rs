//! A component's cache of one kind of component-local memory — execution stacks (held by an
//! invocation from entry to return) or shared buffers (cbufs, held from `cbuf = "alloc"` to
//! `"free"`) — with who holds each unit and who waits for one. A cache without TMEM has a fixed
//! number of units (or one per request); under TMEM the manager ([`super::tmem`]) adds units
//! from its pool and takes free ones back.

use crate::sched::{JobKey, QueueKey};
use crate::time::Nanos;
use serde::Serialize;
use std::collections::BTreeSet;

/// One component's figures over a run.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ComponentStats {
    pub name: String,
    /// `None`: one stack per invocation, never a wait.
    pub stacks: Option<u32>,
    /// `"inherit"` or `"block"`.
    pub stack_wait: &'static str,
    /// Invocations entered (each took a stack).
    pub invocations: u64,
    /// Most invocations in the component at once.
    pub peak_concurrent_invocations: u32,
    /// Calls that found no free stack and waited.
    pub stack_waits: u64,
    /// Longest time from such a call to its grant.
    pub longest_stack_wait: Nanos,
    /// Sum of those times over every wait that ended in a grant (a caller aborted while it
    /// waits, or still waiting at the horizon, adds nothing).
    pub total_stack_wait: Nanos,
}

/// The invocations of each component one ended job made (in component order).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct JobCalls {
    pub task: u32,
    pub index: u64,
    pub invocations: Vec<u32>,
}

#[derive(Clone, Copy, Debug)]
pub(super) struct StackHolder {
    pub(super) key: JobKey,
    pub(super) seq: u64,
    pub(super) prio: QueueKey,
    /// The job's task (for per-thread contention accounting).
    pub(super) task: usize,
}

#[derive(Clone, Copy, Debug)]
pub(super) struct StackWaiter {
    pub(super) holder: StackHolder,
    /// (own priority, wait order): the order waiters are granted in.
    order: (u64, u64),
    pub(super) since: Nanos,
}

/// Counters of one cache over a run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct CacheCounters {
    /// Units handed out.
    pub(super) gets: u64,
    /// Requests that found no free unit and waited.
    pub(super) waits: u64,
    pub(super) longest_wait: Nanos,
    /// Over waits that ended in a grant.
    pub(super) total_wait: Nanos,
    pub(super) peak_held: u32,
    /// Longest time a unit was held, from its grant to its put.
    pub(super) longest_hold: Nanos,
}

/// The units of one cache.
#[derive(Debug)]
pub(super) struct UnitCache {
    /// Units the cache has (`None`: one per request, never a wait).
    capacity: Option<u32>,
    /// Unit ids not held, the most recently put last.
    free: Vec<u32>,
    /// The next id of a unit minted for a cache of unbounded capacity.
    next_local: u32,
    /// Each holder, its unit, and since when it holds it.
    holders: Vec<(StackHolder, u32, Nanos)>,
    /// Sorted by `order`.
    waiters: Vec<StackWaiter>,
    waits_begun: u64,
    pub(super) counters: CacheCounters,
    /// Distinct units handed out since the window began (TMEM's used bits), kept only for a
    /// cache TMEM manages.
    pub(super) touched: BTreeSet<u32>,
    pub(super) track_use: bool,
    /// Most units held and waited for at once since the window began.
    pub(super) window_peak_demand: u32,
    /// Waits begun since the window began, and the sum over them of the jobs waiting at once
    /// (each counting itself).
    pub(super) window_blocks: u32,
    pub(super) window_blocked_sum: u64,
    /// Waits begun since the window began that found every holder self-suspended.
    pub(super) window_self_suspensions: u32,
}

impl UnitCache {
    /// A cache of `capacity` units with ids `first_id..` (`None`: unbounded, ids minted).
    pub(super) fn new(capacity: Option<u32>, first_id: u32) -> Self {
        let free = match capacity {
            Some(n) => (first_id..first_id + n).rev().collect(),
            None => Vec::new(),
        };
        UnitCache {
            capacity,
            free,
            next_local: first_id,
            holders: Vec::new(),
            waiters: Vec::new(),
            waits_begun: 0,
            counters: CacheCounters::default(),
            touched: BTreeSet::new(),
            track_use: false,
            window_peak_demand: 0,
            window_blocks: 0,
            window_blocked_sum: 0,
            window_self_suspensions: 0,
        }
    }

    /// Units the cache has (held or free); for an unbounded cache, those held.
    pub(super) fn allocated(&self) -> u32 {
        self.capacity.unwrap_or(self.holders.len() as u32)
    }

    pub(super) fn held(&self) -> u32 {
        self.holders.len() as u32
    }

    pub(super) fn has_free(&self) -> bool {
        self.capacity.is_none() || !self.free.is_empty()
    }

    fn note_demand(&mut self) {
        let demand = (self.holders.len() + self.waiters.len()) as u32;
        self.window_peak_demand = self.window_peak_demand.max(demand);
    }

    /// Hands `unit` (free in this cache) to `holder`.
    fn hand(&mut self, holder: StackHolder, unit: u32, now: Nanos) {
        self.holders.push((holder, unit, now));
        self.counters.gets += 1;
        self.counters.peak_held = self.counters.peak_held.max(self.holders.len() as u32);
        if self.track_use {
            self.touched.insert(unit);
        }
        self.note_demand();
    }

    /// Takes a free unit for `holder` if there is one; the unit.
    pub(super) fn get(&mut self, holder: StackHolder, now: Nanos) -> Option<u32> {
        let unit = match self.capacity {
            None => {
                self.next_local += 1;
                self.next_local - 1
            }
            Some(_) => self.free.pop()?,
        };
        self.hand(holder, unit, now);
        Some(unit)
    }

    /// Queues `holder` for the next unit: by own priority, then by when it began to wait.
    pub(super) fn wait(&mut self, holder: StackHolder, now: Nanos) {
        let w = StackWaiter { holder, order: (holder.prio.primary, self.waits_begun), since: now };
        self.waits_begun += 1;
        let at = self.waiters.partition_point(|x| x.order < w.order);
        self.waiters.insert(at, w);
        self.counters.waits += 1;
        self.window_blocks += 1;
        self.window_blocked_sum += self.waiters.len() as u64;
        self.note_demand();
    }

    /// Takes `key`'s unit back into the free list now; the unit.
    pub(super) fn put(&mut self, key: JobKey, now: Nanos) -> u32 {
        let at = self.holders.iter().position(|(h, _, _)| h.key == key).expect("a returning job holds a unit");
        let (_, unit, since) = self.holders.remove(at);
        self.counters.longest_hold = self.counters.longest_hold.max(now - since);
        if self.capacity.is_some() {
            self.free.push(unit);
        }
        unit
    }

    /// Hands a free unit to the first waiter, if both exist: the waiter and since when it
    /// waited.
    pub(super) fn grant_next(&mut self, now: Nanos) -> Option<(StackHolder, Nanos)> {
        if self.waiters.is_empty() || !self.has_free() {
            return None;
        }
        let w = self.waiters.remove(0);
        let waited = now - w.since;
        self.counters.longest_wait = self.counters.longest_wait.max(waited);
        self.counters.total_wait += waited;
        self.get(w.holder, now).expect("a free unit");
        Some((w.holder, w.since))
    }

    /// A unit from the pool joins the cache (free).
    pub(super) fn add_unit(&mut self, unit: u32) {
        let c = self.capacity.as_mut().expect("a managed cache has a capacity");
        *c += 1;
        self.free.push(unit);
    }

    /// A free unit leaves the cache (for the pool), if there is one.
    pub(super) fn remove_free_unit(&mut self) -> Option<u32> {
        let unit = self.free.pop()?;
        let c = self.capacity.as_mut().expect("a managed cache has a capacity");
        *c -= 1;
        Some(unit)
    }

    /// A unit just put back leaves the cache (for the pool).
    pub(super) fn remove_unit(&mut self, unit: u32) {
        let at = self.free.iter().rposition(|&u| u == unit).expect("the unit is free here");
        self.free.remove(at);
        let c = self.capacity.as_mut().expect("a managed cache has a capacity");
        *c -= 1;
    }

    /// Takes `key` out of the queue (it was aborted while it waited).
    pub(super) fn leave_queue(&mut self, key: JobKey) {
        self.waiters.retain(|w| w.holder.key != key);
    }

    /// The holder a waiter depends on: the one of highest priority among those `runnable`
    /// says can run in its place (a self-suspended holder cannot).
    pub(super) fn top_holder(&self, runnable: impl Fn(JobKey) -> bool) -> Option<JobKey> {
        self.holders.iter().filter(|(h, _, _)| runnable(h.key)).min_by_key(|(h, _, _)| (h.prio, h.seq)).map(|(h, _, _)| h.key)
    }

    /// Whether the cache has holders and none of them `runnable`.
    pub(super) fn all_holders_out(&self, runnable: impl Fn(JobKey) -> bool) -> bool {
        !self.holders.is_empty() && self.holders.iter().all(|(h, _, _)| !runnable(h.key))
    }

    /// The unit `key` holds here, if any.
    pub(super) fn holders_unit(&self, key: JobKey) -> Option<u32> {
        self.holders.iter().find(|(h, _, _)| h.key == key).map(|&(_, u, _)| u)
    }

    pub(super) fn holders(&self) -> impl Iterator<Item = &StackHolder> + '_ {
        self.holders.iter().map(|(h, _, _)| h)
    }

    pub(super) fn units(&self) -> impl Iterator<Item = u32> + '_ {
        self.holders.iter().map(|&(_, u, _)| u).chain(self.free.iter().copied())
    }

    pub(super) fn waiters(&self) -> impl Iterator<Item = JobKey> + '_ {
        self.waiters.iter().map(|w| w.holder.key)
    }

    /// The task of each waiter and since when it waits.
    pub(super) fn waiting_since(&self) -> impl Iterator<Item = (usize, Nanos)> + '_ {
        self.waiters.iter().map(|w| (w.holder.task, w.since))
    }

    pub(super) fn first_waiter(&self) -> Option<&StackWaiter> {
        self.waiters.first()
    }

    pub(super) fn waiting(&self) -> u32 {
        self.waiters.len() as u32
    }

    pub(super) fn has_waiters(&self) -> bool {
        !self.waiters.is_empty()
    }

    /// Starts a new window of used bits and contention figures.
    pub(super) fn new_window(&mut self) {
        self.touched.clear();
        self.window_peak_demand = (self.holders.len() + self.waiters.len()) as u32;
        self.window_blocks = 0;
        self.window_blocked_sum = 0;
        self.window_self_suspensions = 0;
    }

    /// Never more holders than units, nobody holding twice, free plus held equal to the
    /// capacity, nobody waiting while a unit is free.
    pub(super) fn check(&self, name: &str) {
        if let Some(c) = self.capacity {
            assert_eq!(self.holders.len() + self.free.len(), c as usize, "{name}: units held plus free differ from its units");
        }
        for (i, (h, _, _)) in self.holders.iter().enumerate() {
            assert!(self.holders[i + 1..].iter().all(|(o, _, _)| o.key != h.key), "{name}: a job holds two of its units");
        }
        assert!(self.waiters.is_empty() || !self.has_free(), "{name}: a request waits while a unit is free");
    }
}
