//! CPU groups: tasks a subsystem puts together ([`super::Context::join_cpu_group`]) so that
//! their CPU time and CPU wait are measured as one (cgroup `cpu.stat`, `cpu.pressure`), and so
//! that a bandwidth limit can hold all of them ([`super::Context::set_cpu_limit`], cgroup
//! `cpu.max`, the kernel's CFS bandwidth control): together they run at most `quota` in each
//! `period` (periods aligned to time zero); once it is spent, every job of the group leaves
//! its CPU and its scheduler until the next period begins, and a job of the group that becomes
//! eligible meanwhile waits with them.
//!
//! The engine keeps the group's clocks up to date at every change of what its tasks do: a job
//! of the group dispatched or taken off a CPU, or becoming eligible or not.

use super::{Event, JobState, Simulation};
use crate::sched::{JobKey, Scheduler};
use crate::time::Nanos;

/// How a throttled job entered the scheduler had its group not been throttled: it enters
/// that way once the group may run again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Entry {
    Ready,
    Activation,
    Wake,
}

#[derive(Clone, Debug)]
struct CpuGroup {
    /// CPU time per period, and the period; `None`: no limit.
    limit: Option<(Nanos, Nanos)>,
    /// CPU time used in the current period (when limited).
    used: Nanos,
    /// When the clocks were last brought up to date.
    since: Nanos,
    /// Jobs of the group on a CPU now.
    running: u32,
    /// Jobs of the group eligible now (running or not).
    eligible: u32,
    /// CPU time of the group's tasks since the groups were formed.
    cpu_total: Nanos,
    /// Time some eligible job of the group waited for a CPU.
    wait_total: Nanos,
    /// Held off the scheduler until the next period: (job, its sequence number, how it enters).
    throttled: Option<Vec<(JobKey, u64, Entry)>>,
    /// Bumped whenever the group's pending budget event is superseded.
    gen: u64,
}

impl CpuGroup {
    fn new(now: Nanos) -> Self {
        CpuGroup {
            limit: None,
            used: Nanos::ZERO,
            since: now,
            running: 0,
            eligible: 0,
            cpu_total: Nanos::ZERO,
            wait_total: Nanos::ZERO,
            throttled: None,
            gen: 0,
        }
    }

    /// Brings the clocks up to `now`; the budget starts afresh at each period boundary.
    fn update(&mut self, now: Nanos) {
        let dt = now - self.since;
        let running = u64::from(self.running);
        self.cpu_total += Nanos(dt.0 * running);
        if self.eligible > self.running {
            self.wait_total += dt;
        }
        if let Some((_, period)) = self.limit {
            if now.0 / period.0 != self.since.0 / period.0 {
                self.used = Nanos((now.0 % period.0) * running);
            } else {
                self.used += Nanos(dt.0 * running);
            }
        }
        self.since = now;
    }

    /// The clocks as they would read at `now`: (CPU time, CPU wait).
    fn read(&self, now: Nanos) -> (Nanos, Nanos) {
        let dt = now - self.since;
        let wait = if self.eligible > self.running { dt } else { Nanos::ZERO };
        (self.cpu_total + Nanos(dt.0 * u64::from(self.running)), self.wait_total + wait)
    }

    /// When the group's budget must next be looked at: the instant it runs out at the current
    /// rate, or the next period boundary, whichever is first; `None` when nothing can change.
    fn next_check(&self, now: Nanos) -> Option<Nanos> {
        let (quota, period) = self.limit?;
        let boundary = Nanos((now.0 / period.0 + 1) * period.0);
        if self.throttled.is_some() {
            return Some(boundary);
        }
        if self.running == 0 {
            return None;
        }
        let left = quota.0.saturating_sub(self.used.0);
        Some((now + Nanos(left.div_ceil(u64::from(self.running)))).min(boundary))
    }
}

/// The CPU groups of a run, and each task's group.
#[derive(Clone, Debug, Default)]
pub(super) struct CpuGroups {
    task_group: Vec<Option<u32>>,
    groups: Vec<CpuGroup>,
}

impl CpuGroups {
    #[inline]
    fn group_of(&self, task: u32) -> Option<usize> {
        self.task_group.get(task as usize).copied().flatten().map(|g| g as usize)
    }

    /// CPU time and CPU wait of group `group` at `now` (zero for a group nobody formed).
    pub(super) fn times(&self, group: u32, now: Nanos) -> (Nanos, Nanos) {
        self.groups.get(group as usize).map_or((Nanos::ZERO, Nanos::ZERO), |g| g.read(now))
    }
}

impl Simulation<'_> {
    /// Applies [`super::Context::join_cpu_group`].
    pub(super) fn join_cpu_group(&mut self, task: usize, group: u32) {
        assert!(task < self.tasks.len(), "a subsystem put task {task}, which does not exist, in a CPU group");
        assert!(self.tasks[task].pending.is_empty(), "a task joins a CPU group before its first job");
        let now = self.now;
        let n = self.tasks.len();
        let cg = self.cpu_groups.get_or_insert_with(Box::default);
        cg.task_group.resize(n, None);
        cg.task_group[task] = Some(group);
        while cg.groups.len() <= group as usize {
            cg.groups.push(CpuGroup::new(now));
        }
    }

    /// Applies [`super::Context::set_cpu_limit`].
    pub(super) fn set_cpu_limit(&mut self, group: u32, limit: Option<(Nanos, Nanos)>) {
        let now = self.now;
        let Some(g) = self.cpu_groups.as_mut().and_then(|cg| cg.groups.get_mut(group as usize)) else {
            panic!("a subsystem limited CPU group {group}, which has no task");
        };
        if let Some((quota, period)) = limit {
            assert!(period > Nanos::ZERO && quota > Nanos::ZERO, "a CPU limit needs a positive quota and period");
        }
        if g.limit == limit {
            return;
        }
        g.update(now);
        // A new limit starts with a whole quota, as a write of `cpu.max` refills the kernel's.
        g.used = Nanos::ZERO;
        g.limit = limit;
        self.check_budget(group as usize);
    }

    /// Throttles the group whose budget is spent, lets a throttled one go at a new period (or
    /// once its limit no longer holds it), and schedules the next look.
    fn check_budget(&mut self, gi: usize) {
        let now = self.now;
        let g = &mut self.cpu_groups.as_mut().expect("CPU groups exist").groups[gi];
        g.update(now);
        let spent = g.limit.is_some_and(|(quota, _)| g.used >= quota);
        match (g.throttled.is_some(), spent) {
            (false, true) => self.throttle(gi),
            (true, false) => self.unthrottle(gi),
            _ => {}
        }
        self.arm_budget(gi);
    }

    /// Schedules the next look at group `gi`'s budget, superseding the last one. Only that
    /// event throttles: a change mid-decision merely moves it (to now, if the budget is spent).
    fn arm_budget(&mut self, gi: usize) {
        let now = self.now;
        let g = &mut self.cpu_groups.as_mut().expect("CPU groups exist").groups[gi];
        g.gen += 1;
        if let Some(at) = g.next_check(now) {
            let gen = g.gen;
            self.queue.push(at, Event::CpuBudget { group: gi as u32, gen });
        }
    }

    /// [`Event::CpuBudget`]: false if superseded.
    pub(super) fn on_cpu_budget(&mut self, group: u32, gen: u64) -> bool {
        if self.cpu_groups.as_ref().is_none_or(|cg| cg.groups[group as usize].gen != gen) {
            return false;
        }
        self.check_budget(group as usize);
        true
    }

    /// Every job of group `gi` leaves its CPU and its scheduler.
    fn throttle(&mut self, gi: usize) {
        let now = self.now;
        self.cpu_groups.as_mut().expect("CPU groups exist").groups[gi].throttled = Some(Vec::new());
        for cpu in 0..self.cpus.len() {
            let Some(key) = self.cpus[cpu].running else { continue };
            if self.cpu_group_of(key) == Some(gi) {
                self.job_mut(key).account(now);
                self.leave_cpu(key, cpu);
            }
        }
        for ti in 0..self.tasks.len() {
            let Some(&key) = self.tasks[ti].pending.front() else { continue };
            if self.cpu_group_of(key) == Some(gi) && self.job(key).state == JobState::Ready {
                self.sched_mut().block(key);
                self.hold(key, gi, Entry::Ready);
            }
        }
    }

    /// The group's held jobs enter their schedulers as they would have.
    fn unthrottle(&mut self, gi: usize) {
        let now = self.now;
        let held = self.cpu_groups.as_mut().expect("CPU groups exist").groups[gi].throttled.take().unwrap_or_default();
        for (key, seq, entry) in held {
            if !self.is_live(key, seq) || self.job(key).state != JobState::Throttled {
                continue;
            }
            self.job_mut(key).state = JobState::Ready;
            self.note_eligible(key, true);
            let rj = self.ready_job(key);
            match entry {
                Entry::Ready => self.make_ready(key),
                Entry::Activation => self.sched_mut().activate(now, &rj),
                Entry::Wake => self.sched_mut().wake(now, &rj),
            }
        }
    }

    /// Puts an off-CPU job of throttled group `gi` aside until the group may run.
    fn hold(&mut self, key: JobKey, gi: usize, entry: Entry) {
        if self.job(key).state == JobState::Ready {
            self.note_eligible(key, false);
        }
        let job = self.job_mut(key);
        job.state = JobState::Throttled;
        let seq = job.seq;
        let g = &mut self.cpu_groups.as_mut().expect("CPU groups exist").groups[gi];
        g.throttled.as_mut().expect("the group is throttled").push((key, seq, entry));
    }

    /// Whether a job about to become eligible must wait for its throttled group instead; if
    /// so it is put aside (taken out of its scheduler if it was in it).
    pub(super) fn held_by_cpu_limit(&mut self, key: JobKey, activation: bool) -> bool {
        let Some(gi) = self.cpu_group_of(key) else { return false };
        if self.cpu_groups.as_ref().expect("CPU groups exist").groups[gi].throttled.is_none() {
            return false;
        }
        if matches!(self.job(key).state, JobState::Ready | JobState::Linked) {
            self.sched_mut().block(key);
        }
        let entry = if activation {
            Entry::Activation
        } else if self.waking {
            Entry::Wake
        } else {
            Entry::Ready
        };
        self.hold(key, gi, entry);
        true
    }

    #[inline]
    fn cpu_group_of(&self, key: JobKey) -> Option<usize> {
        self.cpu_groups.as_ref()?.group_of(self.job(key).task)
    }

    /// A job of a CPU group went on or off a CPU.
    #[inline(never)]
    pub(super) fn note_running(&mut self, key: JobKey, on: bool) {
        let Some(gi) = self.cpu_group_of(key) else { return };
        let now = self.now;
        let g = &mut self.cpu_groups.as_mut().expect("CPU groups exist").groups[gi];
        g.update(now);
        if on {
            g.running += 1;
        } else {
            g.running -= 1;
        }
        if g.limit.is_some() {
            self.arm_budget(gi);
        }
    }

    /// A job of a CPU group became eligible, or stopped being so.
    #[inline(never)]
    pub(super) fn note_eligible(&mut self, key: JobKey, eligible: bool) {
        let Some(gi) = self.cpu_group_of(key) else { return };
        let now = self.now;
        let g = &mut self.cpu_groups.as_mut().expect("CPU groups exist").groups[gi];
        g.update(now);
        if eligible {
            g.eligible += 1;
        } else {
            g.eligible -= 1;
        }
    }

    /// CPU groups' invariants: the counts match the jobs, and no job of a throttled group
    /// runs or waits in a scheduler.
    pub(super) fn check_cpu_groups(&self) {
        let Some(cg) = self.cpu_groups.as_deref() else { return };
        let mut running = vec![0u32; cg.groups.len()];
        let mut eligible = vec![0u32; cg.groups.len()];
        for j in self.jobs.iter().flatten() {
            let Some(gi) = cg.group_of(j.task) else {
                assert_ne!(j.state, JobState::Throttled, "a job outside every CPU group is throttled");
                continue;
            };
            let throttled = cg.groups[gi].throttled.is_some();
            if j.cpu.is_some() {
                assert!(!throttled, "a job of a throttled CPU group runs");
                running[gi] += 1;
            }
            if j.state == JobState::Ready {
                assert!(!throttled, "a job of a throttled CPU group is eligible");
                eligible[gi] += 1;
            }
            if j.state == JobState::Throttled {
                assert!(throttled, "a job of a CPU group that may run is held");
            }
        }
        for (gi, g) in cg.groups.iter().enumerate() {
            assert_eq!((g.running, g.eligible), (running[gi], eligible[gi]), "CPU group {gi}'s counts");
        }
    }
}
