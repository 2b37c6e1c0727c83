//! A component's pool of execution stacks, the component-local resource an invocation holds
//! from entry to return: get on entry, put on return, and who holds or waits for one. A policy
//! that grows or shrinks a component's stacks (TMEM's memory scheduler) changes only the
//! pool's capacity and the granting that follows.

use crate::sched::{JobKey, QueueKey};
use crate::time::Nanos;
use serde::Serialize;

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
}

#[derive(Clone, Copy, Debug)]
struct StackWaiter {
    holder: StackHolder,
    /// (own priority, wait order): the order waiters are granted in.
    order: (u64, u64),
    since: Nanos,
}

/// The stacks of one component.
#[derive(Debug)]
pub(super) struct StackPool {
    capacity: Option<u32>,
    holders: Vec<StackHolder>,
    /// Sorted by `order`.
    waiters: Vec<StackWaiter>,
    waits_begun: u64,
    pub(super) stats: ComponentStats,
}

impl StackPool {
    pub(super) fn new(capacity: Option<u32>, stats: ComponentStats) -> Self {
        StackPool { capacity, holders: Vec::new(), waiters: Vec::new(), waits_begun: 0, stats }
    }

    fn free(&self) -> bool {
        self.capacity.is_none_or(|c| (self.holders.len() as u64) < u64::from(c))
    }

    fn take(&mut self, holder: StackHolder) {
        self.holders.push(holder);
        self.stats.invocations += 1;
        self.stats.peak_concurrent_invocations = self.stats.peak_concurrent_invocations.max(self.holders.len() as u32);
    }

    /// Takes a stack for `holder` on entry if one is free.
    pub(super) fn get(&mut self, holder: StackHolder) -> bool {
        if !self.free() {
            return false;
        }
        self.take(holder);
        true
    }

    /// Queues `holder` for the next free stack: by own priority, then by when it began to wait.
    pub(super) fn wait(&mut self, holder: StackHolder, now: Nanos) {
        let w = StackWaiter { holder, order: (holder.prio.primary, self.waits_begun), since: now };
        self.waits_begun += 1;
        let at = self.waiters.partition_point(|x| x.order < w.order);
        self.waiters.insert(at, w);
        self.stats.stack_waits += 1;
    }

    /// Gives back `key`'s stack on return (or abort) and grants free stacks to waiters in
    /// order; the jobs granted one.
    pub(super) fn put(&mut self, key: JobKey, now: Nanos) -> Vec<JobKey> {
        let at = self.holders.iter().position(|h| h.key == key).expect("a returning job holds a stack");
        self.holders.remove(at);
        let mut granted = Vec::new();
        while self.free() && !self.waiters.is_empty() {
            let w = self.waiters.remove(0);
            let waited = now - w.since;
            self.stats.longest_stack_wait = self.stats.longest_stack_wait.max(waited);
            self.stats.total_stack_wait += waited;
            self.take(w.holder);
            granted.push(w.holder.key);
        }
        granted
    }

    /// Takes `key` out of the queue (it was aborted while it waited).
    pub(super) fn leave_queue(&mut self, key: JobKey) {
        self.waiters.retain(|w| w.holder.key != key);
    }

    /// The holder a waiter depends on: the one of highest priority.
    pub(super) fn top_holder(&self) -> Option<JobKey> {
        self.holders.iter().min_by_key(|h| (h.prio, h.seq)).map(|h| h.key)
    }

    pub(super) fn holders(&self) -> &[StackHolder] {
        &self.holders
    }

    pub(super) fn waiters(&self) -> impl Iterator<Item = JobKey> + '_ {
        self.waiters.iter().map(|w| w.holder.key)
    }

    pub(super) fn has_waiters(&self) -> bool {
        !self.waiters.is_empty()
    }

    /// Never more holders than stacks, nobody holding twice, nobody waiting while one is free.
    pub(super) fn check(&self) {
        let name = &self.stats.name;
        if let Some(c) = self.capacity {
            assert!(self.holders.len() as u64 <= u64::from(c), "component {name}: more invocations than stacks");
        }
        for (i, h) in self.holders.iter().enumerate() {
            assert!(self.holders[i + 1..].iter().all(|o| o.key != h.key), "component {name}: a job holds two of its stacks");
        }
        assert!(self.waiters.is_empty() || !self.free(), "component {name}: a caller waits while a stack is free");
    }
}
