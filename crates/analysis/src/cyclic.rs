//! Table-driven cyclic executives: a task runs only inside its own slots, so each task is
//! analysed alone against the slot time the table gives it ("supply").

use crate::fp::Rta;
use crate::model::{nanos, TaskParams};
use critmem_core::program::{ProgramState, Step};
use critmem_core::scenario::CyclicTable;
use critmem_core::{Nanos, TaskSpec};

/// Jobs the exact periodic analysis may follow before giving up.
const MAX_JOBS: u128 = 1_000_000;

/// The slot time one task gets from a cyclic table, repeating every major frame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SlotSupply {
    frame_ns: u128,
    /// The task's slots on all CPUs, merged: sorted, disjoint `[start, end)` within a frame.
    /// (The executive runs a task on one CPU at a time, so overlapping slots count once.)
    intervals: Vec<(u128, u128)>,
    /// Slot time before each interval, within the frame.
    before: Vec<u128>,
    per_frame_ns: u128,
}

impl SlotSupply {
    pub fn new(table: &CyclicTable, task: usize) -> SlotSupply {
        let raw: Vec<(u128, u128)> =
            table.slots.iter().filter(|s| s.task == task).map(|s| (u128::from(s.start.0), u128::from((s.start + s.duration).0))).collect();
        SlotSupply::from_intervals(table.major_frame.0.into(), raw)
    }

    /// The supply of `[start, end)` intervals within a frame of `frame_ns` (> 0), in any order;
    /// overlaps count once.
    pub(crate) fn from_intervals(frame_ns: u128, mut raw: Vec<(u128, u128)>) -> SlotSupply {
        raw.sort_unstable();
        let mut intervals: Vec<(u128, u128)> = Vec::with_capacity(raw.len());
        for (s, e) in raw {
            match intervals.last_mut() {
                Some(last) if s <= last.1 => last.1 = last.1.max(e),
                _ => intervals.push((s, e)),
            }
        }
        let mut before = Vec::with_capacity(intervals.len());
        let mut acc = 0;
        for &(s, e) in &intervals {
            before.push(acc);
            acc += e - s;
        }
        SlotSupply { frame_ns, intervals, before, per_frame_ns: acc }
    }

    /// Slot time per major frame.
    pub fn per_frame(&self) -> Nanos {
        nanos(self.per_frame_ns)
    }

    /// Slot time in `[0, x)`.
    fn cumulative(&self, x: u128) -> u128 {
        let (frames, pos) = (x / self.frame_ns, x % self.frame_ns);
        // Intervals starting before `pos`.
        let k = self.intervals.partition_point(|&(s, _)| s < pos);
        let within = match k {
            0 => 0,
            _ => {
                let (s, e) = self.intervals[k - 1];
                self.before[k - 1] + pos.min(e) - s
            }
        };
        frames * self.per_frame_ns + within
    }

    /// Slot time in `[from, to)`.
    pub fn supply(&self, from: Nanos, to: Nanos) -> Nanos {
        nanos(self.cumulative(to.0.into()) - self.cumulative(from.0.into()))
    }

    /// When a job that becomes ready at `from` and needs `need` ns of execution finishes
    /// (`need = 0`: at once).
    pub(crate) fn finish(&self, from: u128, need: u128) -> Option<u128> {
        if need == 0 {
            return Some(from);
        }
        if self.per_frame_ns == 0 {
            return None;
        }
        let level = self.cumulative(from) + need;
        let frames = (level - 1) / self.per_frame_ns;
        let rem = level - frames * self.per_frame_ns;
        let k = self.before.partition_point(|&b| b < rem) - 1;
        Some(frames * self.frame_ns + self.intervals[k].0 + (rem - self.before[k]))
    }

    /// The least slot time in any window of length `window` (the supply bound function).
    /// The window's supply is piecewise linear in its start, so the minimum is at a start
    /// where the start or the end crosses a slot boundary.
    pub fn min_supply(&self, window: Nanos) -> Nanos {
        let w = u128::from(window.0);
        let f = self.frame_ns;
        let shift = f - w % f;
        let min = self
            .intervals
            .iter()
            .flat_map(|&(s, e)| [s, e, (s + shift) % f, (e + shift) % f])
            .map(|r| self.cumulative(r + w) - self.cumulative(r))
            .min();
        nanos(min.unwrap_or(0))
    }
}

/// Exact worst-case response of a periodic task (releases at `offset + k·period`) whose
/// jobs all take their WCET, replaying its jobs against its slots (self-suspensions included,
/// step by step as the engine runs them) until the backlog carried into a window of
/// lcm(period, frame) repeats.
pub fn cyclic_periodic_response(supply: &SlotSupply, task: &TaskSpec) -> Rta {
    let (t, d, o) = (u128::from(task.period.0), u128::from(task.deadline.0), u128::from(task.offset.0));
    if supply.per_frame_ns == 0 {
        return Rta::Misses { response_at_least: Nanos::MAX };
    }
    let window = t / gcd(t, supply.frame_ns) * supply.frame_ns;
    let jobs_per_window = window / t;
    let mut prev_done: u128 = 0;
    let mut prev_backlog = None;
    let mut worst = 0;
    let mut job: u128 = 0;
    while job < MAX_JOBS {
        let window_start = o + job * t;
        let backlog = prev_done.saturating_sub(window_start);
        if prev_backlog == Some(backlog) {
            return Rta::Meets { response: nanos(worst) };
        }
        prev_backlog = Some(backlog);
        for _ in 0..jobs_per_window {
            let release = o + job * t;
            let done = run_job(supply, release.max(prev_done), task);
            let response = done - release;
            if response > d {
                return Rta::Misses { response_at_least: nanos(response) };
            }
            worst = worst.max(response);
            prev_done = done;
            job += 1;
        }
    }
    Rta::Unknown { reason: format!("no steady state within {MAX_JOBS} jobs") }
}

/// Completion of one WCET-long job that becomes its task's head job at `start`, running the
/// task's program as the engine does: compute only inside the task's slots, suspensions off
/// the CPU (a final one ends the job when it ends).
fn run_job(supply: &SlotSupply, start: u128, task: &TaskSpec) -> u128 {
    let mut program = ProgramState::default();
    let mut now = start;
    loop {
        match program.next_step(task, task.exec.wcet()) {
            Step::Compute(left) => {
                now = supply.finish(now, left.0.into()).expect("the caller checked the task has slot time");
                program.executed += left;
            }
            Step::Suspend(duration) => now += u128::from(duration.0),
            Step::Done => return now,
            // Kills, waits on resources, yields and invocations come from subsystems, never from a
            // task's own program.
            Step::Killed | Step::Block(_) | Step::Yield | Step::Invoke(_) | Step::Return => {
                unreachable!("a plain task program only computes, suspends and ends")
            }
        }
    }
}

/// Worst-case response of a sporadic task released at any time: the shortest window that
/// always holds `task.wcet` of slot time. Exact while that is at most the period (jobs then
/// never queue behind each other); a longer one is reported as unknown.
pub fn cyclic_sporadic_response(supply: &SlotSupply, task: &TaskParams) -> Rta {
    let c = task.wcet;
    if supply.min_supply(task.deadline) < c {
        return Rta::Misses { response_at_least: nanos(u128::from(task.deadline.0) + 1) };
    }
    // The supply bound function is non-decreasing in the window: binary search.
    let (mut lo, mut hi) = (c.0, task.deadline.0);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if supply.min_supply(Nanos(mid)) >= c {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    if lo > task.period.0 {
        return Rta::Unknown { reason: "a job may still run when the next arrives; queued sporadic jobs are not analysed".into() };
    }
    Rta::Meets { response: Nanos(lo) }
}

fn gcd(mut a: u128, mut b: u128) -> u128 {
    while b != 0 {
        let t = a % b;
        a = b;
        b = t;
    }
    a
}
