//! Locks of shared resources under `none`, `pip` (dependency links, or donors) and SRP's start
//! check: taking and giving back units, the waiters' order and links, and the ceilings.

use super::{Holder, ResourceSubsystem, WaitGroup, Waiter};
use crate::engine::Context;
use crate::model::program::{Protocol, StackWait};
use crate::program::{ResourceId, Step};
use crate::resources::waits::WaitOn;
use crate::sched::{JobKey, QueueKey};
use crate::time::Nanos;

impl ResourceSubsystem {
    /// A resource's SRP ceiling with its units free now (`u64::MAX`: no task can be blocked).
    pub(super) fn ceiling(&self, r: usize) -> u64 {
        let free = self.state[r].free;
        self.users[r].iter().filter(|&&(u, _)| u > free).map(|&(_, l)| l).min().unwrap_or(u64::MAX)
    }

    /// The system ceiling of `cpu`: the highest ceiling among SRP resources held there.
    pub(super) fn system_ceiling(&self, cpu: usize) -> u64 {
        let mut c = u64::MAX;
        for (r, st) in self.state.iter().enumerate() {
            if self.specs[r].protocol == Protocol::Srp && st.holders.iter().any(|h| self.task_cpu[self.jobs_task(h.key)] == cpu) {
                c = c.min(self.ceiling(r));
            }
        }
        c
    }

    pub(super) fn jobs_task(&self, key: JobKey) -> usize {
        self.jobs[key as usize].as_ref().expect("a holder is a live job").task
    }

    /// Whether a job may start now under SRP: its level is above its CPU's ceiling and no
    /// job of higher priority there is held back.
    pub(super) fn may_start(&self, task: usize, prio: QueueKey) -> bool {
        let cpu = self.task_cpu[task];
        let blocked_above = self.gated.iter().any(|&(p, k)| p < prio && self.task_cpu[self.jobs_task(k)] == cpu);
        !blocked_above && self.levels[task] < self.system_ceiling(cpu)
    }

    /// Lets held-back jobs start, highest priority first, while they may; whether any did.
    pub(super) fn release_gated(&mut self, cx: &mut Context<'_>) -> bool {
        let mut woke = false;
        self.gated.sort_unstable();
        let mut i = 0;
        while i < self.gated.len() {
            let (prio, key) = self.gated[i];
            let task = self.jobs_task(key);
            self.gated.remove(i);
            if self.may_start(task, prio) {
                self.end_wait(key, cx.now());
                self.run(key).admitted = true;
                cx.wake(key);
                woke = true;
            } else {
                self.gated.insert(i, (prio, key));
                i += 1;
            }
        }
        woke
    }

    /// Takes `units` of `r` for `key` if they are free.
    pub(super) fn try_take(&mut self, now: Nanos, key: JobKey, r: usize, units: u32) -> bool {
        if self.state[r].free < units {
            return false;
        }
        self.grant(now, key, r, units, false);
        true
    }

    /// Under `pip`, takes back from pending holders of lower priority than `key` (lowest
    /// first) the units `key` lacks, if that is enough, and gives them to `key`. The holders
    /// lose their grant and lock again when they run.
    pub(super) fn try_take_from_pending(&mut self, cx: &mut Context<'_>, key: JobKey, r: usize, units: u32) -> bool {
        if self.specs[r].protocol != Protocol::Pip {
            return false;
        }
        let own = {
            let run = self.jobs[key as usize].as_ref().expect("a job this subsystem took over");
            (run.prio, run.seq)
        };
        let mut lower: Vec<Holder> = self.state[r].holders.iter().filter(|h| h.pending && (h.prio, h.seq) > own).copied().collect();
        lower.sort_unstable_by_key(|h| std::cmp::Reverse((h.prio, h.seq)));
        let mut free = self.state[r].free;
        let mut taken = 0;
        while free < units && taken < lower.len() {
            free += lower[taken].units;
            taken += 1;
        }
        if free < units {
            return false;
        }
        for h in &lower[..taken] {
            let st = &mut self.state[r];
            st.holders.retain(|x| x.key != h.key);
            st.free += h.units;
            self.stats[r].acquisitions -= 1;
            // Its program still stands at the lock, which it takes again when it runs.
            self.run(h.key).held.retain(|&x| x != r);
        }
        self.grant(cx.now(), key, r, units, false);
        true
    }

    /// Whether `key` holds a pending grant of `r`, which it owns from now.
    pub(super) fn take_up_pending(&mut self, key: JobKey, r: usize) -> bool {
        match self.state[r].holders.iter_mut().find(|h| h.key == key && h.pending) {
            Some(h) => {
                h.pending = false;
                true
            }
            None => false,
        }
    }

    pub(super) fn grant(&mut self, now: Nanos, key: JobKey, r: usize, units: u32, pending: bool) {
        let run = self.run(key);
        let (seq, prio) = (run.seq, run.prio);
        run.held.push(r);
        run.waiting = None;
        let st = &mut self.state[r];
        st.free -= units;
        st.holders.push(Holder { key, seq, units, prio, since: now, pending });
        let s = &mut self.stats[r];
        s.acquisitions += 1;
        s.peak_units_held = s.peak_units_held.max(self.specs[r].units - st.free);
    }

    /// Gives back everything `key` holds of `r`.
    pub(super) fn give_back(&mut self, now: Nanos, key: JobKey, r: usize) {
        let st = &mut self.state[r];
        let at = st.holders.iter().position(|h| h.key == key).expect("unlock of a held resource");
        let h = st.holders.remove(at);
        st.free += h.units;
        let s = &mut self.stats[r];
        s.longest_hold = s.longest_hold.max(now - h.since);
        let run = self.run(key);
        run.held.retain(|&x| x != r);
    }

    /// Grants `r`'s waiters in order while the first fits, wakes them, and points the links
    /// (or donors) of those still waiting at the current holders; whether any was granted.
    pub(super) fn grant_waiters(&mut self, cx: &mut Context<'_>, r: usize) -> bool {
        let now = cx.now();
        let mut woke = false;
        while let Some(&w) = self.state[r].waiters.first() {
            if self.state[r].free < w.units {
                break;
            }
            self.state[r].waiters.remove(0);
            let pending = self.specs[r].protocol == Protocol::Pip;
            self.grant(now, w.key, r, w.units, pending);
            self.end_wait(w.key, now);
            let s = &mut self.stats[r];
            s.longest_wait = s.longest_wait.max(now - w.since);
            // A pending grant is taken up by the lock itself when the job runs.
            if !pending {
                self.run(w.key).pc += 1;
            }
            cx.wake(w.key);
            woke = true;
        }
        self.relink(cx, r);
        woke
    }

    /// The holder whose release a waiter on `r` depends on: the highest priority one.
    pub(super) fn top_holder(&self, r: usize) -> Option<JobKey> {
        self.state[r].holders.iter().min_by_key(|h| (h.prio, h.seq)).map(|h| h.key)
    }

    pub(super) fn links_apply(&self, r: usize) -> bool {
        self.specs[r].protocol == Protocol::Pip && !self.donor_mode
    }

    pub(super) fn relink(&mut self, cx: &mut Context<'_>, r: usize) {
        if self.links_apply(r) {
            let top = self.top_holder(r);
            for w in &self.state[r].waiters {
                cx.depend(w.key, top);
            }
        }
        if self.donor_mode {
            self.update_donors(cx);
        }
    }

    /// Donor mode: each holder of a `pip` resource takes the highest priority among the jobs
    /// waiting on what it holds, following holders that wait themselves.
    pub(super) fn update_donors(&mut self, cx: &mut Context<'_>) {
        let n = self.jobs.len();
        // Who waits on whom: (waiters, holders with their own priority) of each `pip`
        // resource and each component whose callers inherit.
        let mut waits: Vec<WaitGroup> = Vec::new();
        for (r, st) in self.state.iter().enumerate() {
            if self.specs[r].protocol == Protocol::Pip && !st.waiters.is_empty() {
                waits.push((st.waiters.iter().map(|w| w.key).collect(), st.holders.iter().map(|h| (h.key, h.prio)).collect()));
            }
        }
        for (id, cache) in self.caches.iter().enumerate() {
            if self.cache_wait[id] == StackWait::Inherit && cache.has_waiters() {
                waits.push((cache.waiters().collect(), cache.holders().map(|h| (h.key, h.prio)).collect()));
            }
        }
        // Best (priority, source job) reaching each job.
        let mut best: Vec<Option<(QueueKey, JobKey)>> = vec![None; n];
        for _ in 0..=n {
            let mut changed = false;
            for (waiters, holders) in &waits {
                for &w in waiters {
                    let own = self.jobs[w as usize].as_ref().map(|j| (j.prio, w)).expect("a waiter is live");
                    let src = best[w as usize].map_or(own, |b| b.min(own));
                    for &(h, prio) in holders {
                        let hk = h as usize;
                        if src.0 < prio && best[hk].is_none_or(|b| src < b) {
                            best[hk] = Some(src);
                            changed = true;
                        }
                    }
                }
            }
            if !changed {
                break;
            }
        }
        for (k, slot) in self.jobs.iter_mut().enumerate() {
            let Some(run) = slot.as_mut() else { continue };
            let want = best[k].map(|(_, src)| src);
            if run.donor != want {
                run.donor = want;
                cx.inherit(k as JobKey, want);
            }
        }
    }

    /// Starts waiting on `r` and gives the step that waits.
    pub(super) fn wait(&mut self, cx: &mut Context<'_>, key: JobKey, r: usize, units: u32) -> Step {
        self.begin_wait(key, WaitOn::Resource(r), cx.now());
        let run = self.run(key);
        run.waiting = Some(r);
        let prio = run.prio;
        let w = Waiter { key, units, order: (prio.primary, self.waits_begun), since: cx.now() };
        self.waits_begun += 1;
        let waiters = &mut self.state[r].waiters;
        let at = waiters.partition_point(|x| x.order < w.order);
        waiters.insert(at, w);
        self.stats[r].contended += 1;
        if self.links_apply(r) {
            cx.depend(key, self.top_holder(r));
        }
        if self.donor_mode {
            self.update_donors(cx);
        }
        Step::Block(ResourceId(r as u32))
    }

    /// The first SRP resource (file order) held on the task's CPU whose ceiling is at or above
    /// the task's level: what holds a job of the task back, if its CPU's ceiling does.
    pub(super) fn gate_cause(&self, task: usize) -> Option<usize> {
        let (cpu, level) = (self.task_cpu[task], self.levels[task]);
        (0..self.state.len()).find(|&r| {
            self.specs[r].protocol == Protocol::Srp
                && self.state[r].holders.iter().any(|h| self.task_cpu[self.jobs_task(h.key)] == cpu)
                && self.ceiling(r) <= level
        })
    }

    /// After units of `r` came back: grant waiters, and under SRP let held-back jobs start;
    /// whether any job was woken.
    pub(super) fn after_release(&mut self, cx: &mut Context<'_>, r: usize) -> bool {
        let granted = self.grant_waiters(cx, r);
        let started = self.has_srp && self.release_gated(cx);
        granted || started
    }
}
