//! What a job does, as a sequence of steps the engine carries out.
//!
//! A job alternates compute stretches (preemptible CPU time) with self-suspensions. The engine
//! asks the job's program for its next step whenever the current one ends, at the exact
//! simulated instant it ends, so a program can base its next step on the state of the world
//! at that moment (a page reference that faults, a lock that is taken, a device queue).

use crate::model::task::TaskSpec;
use crate::time::Nanos;

/// A resource a job can block on (a lock, a pool of units), named by the subsystem that owns it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ResourceId(pub u32);

/// A component jobs invoke; its owner is the subsystem that added it (the engine's
/// `Context::add_component`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ComponentId(pub u32);

/// The next thing a job does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// Run on a CPU for this long (preemptible).
    Compute(Nanos),
    /// Sleep for this long, off every CPU.
    Suspend(Nanos),
    /// Wait, off every CPU, until the subsystem that owns the resource wakes the job
    /// (the engine's `Context::wake`).
    Block(ResourceId),
    /// Go on without taking CPU time, but only once the scheduler has decided at this
    /// instant: the job stays eligible and is asked for its next step right after that
    /// decision if it keeps (or gets) a CPU, else when it is next dispatched. A subsystem gives
    /// it before an action that happens while the job runs (taking a lock), so the action
    /// never runs ahead of a preemption due at the same instant.
    Yield,
    /// Enter a component: the job's steps come from the component's owner until it returns.
    Invoke(ComponentId),
    /// Leave the component the job is in, back to the caller's steps.
    Return,
    /// The job is finished.
    Done,
    /// The job cannot go on and is killed (e.g. the memory model found no frame it could ever
    /// reclaim: an OOM kill).
    Killed,
}

/// Per-job progress through a task's program.
#[derive(Clone, Debug, Default)]
pub struct ProgramState {
    /// Compute executed so far.
    pub executed: Nanos,
    /// Index of the next self-suspension of the task's list.
    next_suspension: usize,
}

impl ProgramState {
    /// The step after `executed` of compute, given the job's drawn `demand`.
    /// Suspensions happen when compute reaches their `after` point (one at the very end
    /// happens before completion).
    pub fn next_step(&mut self, spec: &TaskSpec, demand: Nanos) -> Step {
        if let Some(s) = spec.suspensions.get(self.next_suspension) {
            if s.after <= self.executed {
                self.next_suspension += 1;
                return Step::Suspend(s.duration);
            }
            if s.after < demand {
                return Step::Compute(s.after - self.executed);
            }
        }
        if self.executed < demand {
            Step::Compute(demand - self.executed)
        } else {
            Step::Done
        }
    }
}
