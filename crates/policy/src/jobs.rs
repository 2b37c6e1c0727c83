//! The jobs a soft real-time controller follows in one group: the one it steers, and those
//! released behind it (a job starts at its release, or when the one before it ends).

use std::collections::VecDeque;

/// Released jobs kept per group behind the running one (the Linux platform keeps as many open).
pub const MAX_PENDING_JOBS: usize = 1024;

/// A released job, as its release event reported it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Released {
    pub(crate) job: u64,
    pub(crate) release_ns: u64,
    /// Absolute deadline.
    pub(crate) deadline_ns: u64,
}

/// What a controller keeps of a running job: at least its number.
pub(crate) trait Steered {
    fn job(&self) -> u64;
}

/// The running job and those queued behind it, oldest first.
#[derive(Clone, Debug)]
pub(crate) struct JobQueue<J> {
    pub(crate) running: Option<J>,
    pending: VecDeque<Released>,
}

impl<J: Steered> JobQueue<J> {
    pub(crate) fn new() -> Self {
        JobQueue { running: None, pending: VecDeque::new() }
    }

    pub(crate) fn pending_len(&self) -> usize {
        self.pending.len()
    }

    /// A release: the job starts now (`start(job, now)`) when none runs, else waits. A job
    /// released again is ignored.
    pub(crate) fn release(&mut self, r: Released, start: impl FnOnce(Released, u64) -> J) {
        let known = self.running.as_ref().is_some_and(|j| j.job() == r.job) || self.pending.iter().any(|p| p.job == r.job);
        if known {
            return;
        }
        if self.running.is_none() {
            self.running = Some(start(r, r.release_ns));
        } else {
            self.pending.push_back(r);
            // A reporter that never completes its jobs must not grow this without bound;
            // the oldest waiting job is the one it has most surely abandoned.
            if self.pending.len() > MAX_PENDING_JOBS {
                self.pending.pop_front();
            }
        }
    }

    /// Job `job` completed or was dropped at `at_ns`. When it was the running one, the next
    /// waiting job starts then (`start(next, at_ns)`) and the ended one is returned.
    pub(crate) fn end(&mut self, job: u64, at_ns: u64, start: impl FnOnce(Released, u64) -> J) -> Option<J> {
        if self.running.as_ref().is_some_and(|j| j.job() == job) {
            let ended = self.running.take();
            self.running = self.pending.pop_front().map(|next| start(next, at_ns));
            ended
        } else {
            self.pending.retain(|p| p.job != job);
            None
        }
    }
}
