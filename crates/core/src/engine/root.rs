//! The scheduler at the root of a simulation: the one-queue scheduler (uniprocessor, global
//! FP/EDF) and partitioned FP/EDF (one such queue per CPU) held by value, any other tree
//! behind the trait object. Most runs are of the first two kinds, and their scheduler's
//! calls, several per event, are then direct and inlined.

use crate::result::SimResult;
use crate::scenario::Scenario;
use crate::sched::{GlobalScheduler, JobKey, NodeSpec, PartitionNode, ReadyJob, Scheduler};
use crate::time::Nanos;

pub(super) enum RootScheduler {
    Queue(GlobalScheduler),
    Partitioned(PartitionNode),
    Tree(Box<dyn Scheduler>),
}

impl RootScheduler {
    /// The tree a scenario's `[scheduler]` describes, as [`crate::sched::build`] builds it.
    pub(super) fn of(scenario: &Scenario) -> Self {
        match NodeSpec::of(scenario) {
            NodeSpec::Queue { name, order, cpus } => RootScheduler::Queue(GlobalScheduler::new(name, order, cpus)),
            NodeSpec::Partition { name, order, cpus, task_cpu } => {
                RootScheduler::Partitioned(PartitionNode::new(name, &order, cpus, task_cpu))
            }
            spec => RootScheduler::Tree(spec.build()),
        }
    }
}

/// Calls `$method` on whichever scheduler the root holds.
macro_rules! delegate {
    ($self:ident, $s:ident => $call:expr) => {
        match $self {
            RootScheduler::Queue($s) => $call,
            RootScheduler::Partitioned($s) => $call,
            RootScheduler::Tree($s) => $call,
        }
    };
}

impl Scheduler for RootScheduler {
    #[inline]
    fn name(&self) -> &'static str {
        delegate!(self, s => s.name())
    }
    #[inline]
    fn cpus(&self) -> usize {
        delegate!(self, s => s.cpus())
    }
    #[inline]
    fn add_ready(&mut self, job: &ReadyJob) {
        delegate!(self, s => s.add_ready(job))
    }
    #[inline]
    fn remove(&mut self, key: JobKey) {
        delegate!(self, s => s.remove(key))
    }
    #[inline]
    fn block(&mut self, key: JobKey) {
        delegate!(self, s => s.block(key))
    }
    #[inline]
    fn activate(&mut self, now: Nanos, job: &ReadyJob) {
        delegate!(self, s => s.activate(now, job))
    }
    #[inline]
    fn wake(&mut self, now: Nanos, job: &ReadyJob) {
        delegate!(self, s => s.wake(now, job))
    }
    #[inline]
    fn choose(&mut self, now: Nanos, current: &[Option<JobKey>], assign: &mut [Option<JobKey>]) {
        delegate!(self, s => s.choose(now, current, assign))
    }
    #[inline]
    fn next_wakeup(&self, now: Nanos) -> Option<Nanos> {
        delegate!(self, s => s.next_wakeup(now))
    }
    #[inline]
    fn finish(&mut self, now: Nanos, result: &mut SimResult) {
        delegate!(self, s => s.finish(now, result))
    }
}
