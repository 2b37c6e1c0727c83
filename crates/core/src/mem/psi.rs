//! Pressure-stall (PSI) accounting per task group, in the form Linux reports it.
//!
//! A pure accumulator: the caller reports each task's state changes with timestamps, and
//! can read cumulative `some`/`full` totals for memory and io (microseconds, like the
//! `total=` field of `memory.pressure` / `io.pressure`) at any time.
//!
//! Definitions follow `kernel/sched/psi.c` (`test_state`) and
//! `Documentation/accounting/psi.rst`, per group:
//!
//! * a task is *non-idle* when it is runnable (running or waiting for a CPU), stalled on
//!   memory (`memstall`: blocked on a refault/swap-in, or reclaiming while running), or
//!   waiting for io (`iowait`);
//! * **memory some**: at least one task of the group is in a memory stall;
//! * **memory full**: at least one task is in a memory stall and every runnable task of the
//!   group is itself in a memory stall (`nr_memstall && nr_running == nr_memstall_running`),
//!   i.e. no non-idle task makes progress;
//! * **io some**: at least one task is waiting for io;
//! * **io full**: at least one task is waiting for io and no task is runnable.
//!
//! Deviation, on purpose: Linux evaluates these states per CPU and aggregates the per-CPU
//! times weighted by each CPU's non-idle time; this accumulator evaluates them over the whole
//! group, which is the documented meaning and what a uniprocessor reports. Groups may have a
//! parent: a task's state counts in its group and every ancestor, like nested cgroups.

use crate::time::Nanos;
use serde::{Deserialize, Serialize};

/// A task group (cgroup) in the accounting.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct PsiGroupId(pub u32);

/// A task known to the accounting.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct PsiTaskId(pub u32);

/// What a task is doing, as PSI sees it. `Default` is idle (sleeping, or no job).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct TaskPsiState {
    /// Running or waiting for a CPU.
    pub runnable: bool,
    /// In a memory stall: blocked on a refault/swap-in, or (if also runnable) reclaiming.
    pub memstall: bool,
    /// Blocked waiting for io to complete.
    pub iowait: bool,
}

impl TaskPsiState {
    pub const IDLE: TaskPsiState = TaskPsiState { runnable: false, memstall: false, iowait: false };
    pub const RUNNABLE: TaskPsiState = TaskPsiState { runnable: true, memstall: false, iowait: false };
    /// On the CPU but doing direct reclaim (Linux's `memstall` while running).
    pub const RECLAIMING: TaskPsiState = TaskPsiState { runnable: true, memstall: true, iowait: false };

    /// Blocked (not runnable) on memory and/or io; a major fault on a swapped-out page is
    /// both, a first read of a file page is io only.
    pub const fn blocked(memory: bool, io: bool) -> TaskPsiState {
        TaskPsiState { runnable: false, memstall: memory, iowait: io }
    }
}

/// Cumulative stall of one resource, microseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pressure {
    pub some_us: u64,
    pub full_us: u64,
}

/// Cumulative memory and io stall of one group.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PsiTotals {
    pub memory: Pressure,
    pub io: Pressure,
}

const MEM_SOME: usize = 0;
const MEM_FULL: usize = 1;
const IO_SOME: usize = 2;
const IO_FULL: usize = 3;

#[derive(Clone, Debug, Default)]
struct Group {
    parent: Option<u32>,
    nr_running: u32,
    nr_iowait: u32,
    nr_memstall: u32,
    nr_memstall_running: u32,
    /// Time up to which `acc_ns` is accounted.
    last: Nanos,
    acc_ns: [u64; 4],
}

impl Group {
    fn states(&self) -> [bool; 4] {
        let mem = self.nr_memstall > 0;
        let io = self.nr_iowait > 0;
        [mem, mem && self.nr_running == self.nr_memstall_running, io, io && self.nr_running == 0]
    }

    fn advance(&mut self, now: Nanos) {
        debug_assert!(now >= self.last, "PSI time went backwards: {now} < {}", self.last);
        let dt = now.saturating_sub(self.last).as_ns();
        let states = self.states();
        // Multiplied in rather than branched on: which states hold changes all the time.
        for (acc, on) in self.acc_ns.iter_mut().zip(states) {
            *acc += dt * u64::from(on);
        }
        self.last = self.last.max(now);
    }

    /// A task of this group goes from state `old` to `new`: the counts of what differs change.
    /// (The same as removing `old` and adding `new`, without touching the counts they share.)
    #[inline]
    fn change(&mut self, old: TaskPsiState, new: TaskPsiState) {
        // The flags added and taken as numbers, with one check for all four counts: tasks
        // change state several times per fault, and which flags differ is unpredictable.
        let step = |c: u32, was: bool, is: bool| c.wrapping_add(u32::from(is)).wrapping_sub(u32::from(was));
        self.nr_running = step(self.nr_running, old.runnable, new.runnable);
        self.nr_iowait = step(self.nr_iowait, old.iowait, new.iowait);
        self.nr_memstall = step(self.nr_memstall, old.memstall, new.memstall);
        self.nr_memstall_running = step(self.nr_memstall_running, old.memstall && old.runnable, new.memstall && new.runnable);
        // A count taken below zero wraps to the top half.
        let all = self.nr_running | self.nr_iowait | self.nr_memstall | self.nr_memstall_running;
        assert!(all < 1 << 31, "PSI task counts stay consistent");
    }

    fn apply(&mut self, s: TaskPsiState, sign: i32) {
        let add = |c: &mut u32, on: bool| {
            if on {
                *c = c.checked_add_signed(sign).expect("PSI task counts stay consistent");
            }
        };
        add(&mut self.nr_running, s.runnable);
        add(&mut self.nr_iowait, s.iowait);
        add(&mut self.nr_memstall, s.memstall);
        add(&mut self.nr_memstall_running, s.memstall && s.runnable);
    }

    fn totals_at(&self, now: Nanos) -> PsiTotals {
        let dt = now.saturating_sub(self.last).as_ns();
        let st = self.states();
        let t = |i: usize| (self.acc_ns[i] + if st[i] { dt } else { 0 }) / 1_000;
        PsiTotals {
            memory: Pressure { some_us: t(MEM_SOME), full_us: t(MEM_FULL) },
            io: Pressure { some_us: t(IO_SOME), full_us: t(IO_FULL) },
        }
    }
}

/// The accumulator for all groups.
#[derive(Clone, Debug, Default)]
pub struct PsiAccounting {
    groups: Vec<Group>,
    tasks: Vec<(u32, TaskPsiState)>,
}

impl PsiAccounting {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a group, optionally nested in `parent` (whose totals then include it).
    pub fn add_group(&mut self, parent: Option<PsiGroupId>) -> PsiGroupId {
        if let Some(p) = parent {
            assert!((p.0 as usize) < self.groups.len(), "PSI parent group {} does not exist", p.0);
        }
        self.groups.push(Group { parent: parent.map(|p| p.0), ..Group::default() });
        PsiGroupId(self.groups.len() as u32 - 1)
    }

    /// Adds an idle task in `group`.
    pub fn add_task(&mut self, group: PsiGroupId) -> PsiTaskId {
        assert!((group.0 as usize) < self.groups.len(), "PSI group {} does not exist", group.0);
        self.tasks.push((group.0, TaskPsiState::IDLE));
        PsiTaskId(self.tasks.len() as u32 - 1)
    }

    pub fn state(&self, task: PsiTaskId) -> TaskPsiState {
        self.tasks[task.0 as usize].1
    }

    pub fn group_of(&self, task: PsiTaskId) -> PsiGroupId {
        PsiGroupId(self.tasks[task.0 as usize].0)
    }

    /// Records that `task` is in `state` from `now` on. Times must not go backwards.
    pub fn set_state(&mut self, now: Nanos, task: PsiTaskId, state: TaskPsiState) {
        let (g, old) = self.tasks[task.0 as usize];
        if old == state {
            return;
        }
        self.for_ancestors(g, |grp| {
            grp.advance(now);
            grp.change(old, state);
        });
        self.tasks[task.0 as usize].1 = state;
    }

    /// Moves `task` (in whatever state) to another group at `now`.
    pub fn move_task(&mut self, now: Nanos, task: PsiTaskId, to: PsiGroupId) {
        let (g, s) = self.tasks[task.0 as usize];
        self.for_ancestors(g, |grp| {
            grp.advance(now);
            grp.apply(s, -1);
        });
        self.for_ancestors(to.0, |grp| {
            grp.advance(now);
            grp.apply(s, 1);
        });
        self.tasks[task.0 as usize].0 = to.0;
    }

    /// Cumulative totals of `group` up to `now` (which must not precede the last change).
    pub fn totals(&self, group: PsiGroupId, now: Nanos) -> PsiTotals {
        self.groups[group.0 as usize].totals_at(now)
    }

    fn for_ancestors(&mut self, mut g: u32, mut f: impl FnMut(&mut Group)) {
        loop {
            let grp = &mut self.groups[g as usize];
            f(grp);
            match grp.parent {
                Some(p) => g = p,
                None => break,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(x: u64) -> Nanos {
        Nanos::from_ms(x)
    }

    #[test]
    fn totals_include_the_interval_in_progress() {
        let mut p = PsiAccounting::new();
        let g = p.add_group(None);
        let t = p.add_task(g);
        p.set_state(ms(1), t, TaskPsiState::blocked(true, true));
        let at5 = p.totals(g, ms(5));
        assert_eq!(at5.memory, Pressure { some_us: 4_000, full_us: 4_000 });
        assert_eq!(at5.io, Pressure { some_us: 4_000, full_us: 4_000 });
        p.set_state(ms(7), t, TaskPsiState::IDLE);
        assert_eq!(p.totals(g, ms(100)).memory.some_us, 6_000);
    }

    #[test]
    fn a_reclaiming_task_alone_is_a_full_memory_stall() {
        let mut p = PsiAccounting::new();
        let g = p.add_group(None);
        let t = p.add_task(g);
        p.set_state(ms(0), t, TaskPsiState::RECLAIMING);
        p.set_state(ms(2), t, TaskPsiState::RUNNABLE);
        let tot = p.totals(g, ms(10));
        assert_eq!(tot.memory, Pressure { some_us: 2_000, full_us: 2_000 });
        assert_eq!(tot.io, Pressure::default());
    }

    #[test]
    fn nested_groups_see_their_childrens_tasks() {
        let mut p = PsiAccounting::new();
        let root = p.add_group(None);
        let a = p.add_group(Some(root));
        let b = p.add_group(Some(root));
        let ta = p.add_task(a);
        let tb = p.add_task(b);
        p.set_state(ms(0), ta, TaskPsiState::blocked(false, true));
        p.set_state(ms(0), tb, TaskPsiState::RUNNABLE);
        // a alone: io full for 10 ms; root: io some but not full (tb runs).
        assert_eq!(p.totals(a, ms(10)).io, Pressure { some_us: 10_000, full_us: 10_000 });
        assert_eq!(p.totals(root, ms(10)).io, Pressure { some_us: 10_000, full_us: 0 });
        p.move_task(ms(10), tb, a);
        p.set_state(ms(10), tb, TaskPsiState::IDLE);
        assert_eq!(p.totals(root, ms(12)).io, Pressure { some_us: 12_000, full_us: 2_000 });
    }
}
