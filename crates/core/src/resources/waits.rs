//! The wait intervals of a run: each stretch a job spent waiting for units of a resource, for
//! a stack of a component, or held back from starting under SRP, kept when job records are
//! asked for (a Gantt chart draws them as blocking).

use crate::time::Nanos;
use serde::Serialize;

/// One stretch a job waited.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct WaitRecord {
    pub task: u32,
    /// 0-based index among the task's released jobs (as [`crate::result::JobRecord::index`]).
    pub index: u64,
    /// The resource's name; `stack:NAME` for a stack of component NAME, `cbuf:NAME` for one
    /// of its cbufs, `suspend` for a self-suspension (a `suspend_ms` step); for an SRP hold-back
    /// the resource whose ceiling held the job back, or `srp` when only a held-back job of
    /// higher priority on its CPU did.
    pub resource: String,
    pub start: Nanos,
    /// The grant; the job's end if it ended while waiting; the horizon if it still waited.
    pub end: Nanos,
}

/// What an open wait is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum WaitOn {
    Resource(usize),
    Stack(usize),
    /// A cbuf of the component.
    Cbuf(usize),
    /// A self-suspension (a `suspend_ms` step).
    Suspended,
    /// SRP's start check, with the resource whose ceiling held the job back, if one did.
    Gate(Option<usize>),
}

/// A wait that has begun and not ended.
#[derive(Clone, Copy, Debug)]
pub(super) struct OpenWait {
    pub(super) on: WaitOn,
    pub(super) since: Nanos,
}

/// The recorded waits, up to `limit`.
#[derive(Debug)]
pub(super) struct WaitLog {
    pub(super) on: bool,
    pub(super) waits: Vec<WaitRecord>,
    pub(super) left_out: u64,
    pub(super) limit: usize,
}

impl Default for WaitLog {
    fn default() -> Self {
        WaitLog { on: false, waits: Vec::new(), left_out: 0, limit: crate::MAX_TRACE_RECORDS }
    }
}

impl WaitLog {
    /// Records the wait `open` of job (`task`, `index`) ending at `end`; `name` names what it
    /// waited on.
    pub(super) fn close(&mut self, task: usize, index: u64, open: OpenWait, end: Nanos, name: impl FnOnce(WaitOn) -> String) {
        if !self.on {
            return;
        }
        if self.waits.len() < self.limit {
            self.waits.push(WaitRecord { task: task as u32, index, resource: name(open.on), start: open.since, end });
        } else {
            self.left_out += 1;
        }
    }
}
