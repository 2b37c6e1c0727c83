//! Calls into components and the units jobs hold there: taking a stack on entry and a cbuf on
//! `cbuf = "alloc"`, waiting for one, giving units back to their cache or TMEM's pool, the
//! memory scheduler's runs, and the budget and choices of a job's program.

use super::{ResourceSubsystem, CACHES, TMEM_RUN};
use crate::engine::Context;
use crate::model::program::{CallProbability, StackWait};
use crate::program::{ResourceId, Step};
use crate::resources::components::calls_rng;
use crate::resources::stacks::StackHolder;
use crate::resources::waits::WaitOn;
use crate::sched::JobKey;
use crate::time::Nanos;

impl ResourceSubsystem {
    pub(super) fn holder(&self, key: JobKey) -> StackHolder {
        let run = self.jobs[key as usize].as_ref().expect("a job this subsystem took over");
        StackHolder { key, seq: run.seq, prio: run.prio, task: run.task }
    }

    /// Whether the job makes a call of `probability`, drawn from its own stream.
    pub(super) fn draw(&mut self, key: JobKey, probability: CallProbability) -> bool {
        let seed = self.seed;
        let run = self.run(key);
        let (task, index) = (run.task, run.index);
        let rng = run.calls_rng.get_or_insert_with(|| calls_rng(seed, task, index));
        probability.draw(rng)
    }

    /// The job, holding a stack of `c`, is in it from now: its entry cost, then its program.
    pub(super) fn enter(&mut self, key: JobKey, c: usize) {
        let run = self.run(key);
        run.frames.push((c, run.pc));
        run.frame_cbufs.push(None);
        run.pc = 0;
        run.cost_due = true;
        if let Some(n) = run.calls.get_mut(c) {
            *n += 1;
        }
        if let Some(unit) = run.passing.take() {
            let fresh = self.tmem.as_mut().is_some_and(|m| m.map_cbuf(unit, c));
            if fresh {
                let cost = self.tmem.as_ref().map_or(Nanos::ZERO, |m| m.spec.cbuf_map_cost);
                self.run(key).extra_cost = cost;
            }
        }
    }

    /// Starts waiting for a unit of cache `id` and gives the step that waits.
    pub(super) fn wait_unit(&mut self, cx: &mut Context<'_>, key: JobKey, id: usize) -> Step {
        let holder = self.holder(key);
        self.run(key).cache_waiting = Some(id);
        let c = self.cache_component[id];
        let on = if id < self.components.len() { WaitOn::Stack(c) } else { WaitOn::Cbuf(c) };
        self.begin_wait(key, on, cx.now());
        if self.caches[id].all_holders_out(|k| self.runnable(k)) {
            self.caches[id].window_self_suspensions += 1;
        }
        self.caches[id].wait(holder, cx.now());
        if let Some(m) = self.tmem.as_mut() {
            if let Some(i) = m.index(id) {
                m.note_block(i, holder.task);
            }
        }
        self.relink_cache(cx, id);
        Step::Block(ResourceId(CACHES + id as u32))
    }

    /// A unit of cache `id` for `key` now if one is free or the cache may grow into the pool.
    pub(super) fn try_get(&mut self, key: JobKey, id: usize, now: Nanos) -> Option<u32> {
        let holder = self.holder(key);
        if !self.caches[id].has_free() {
            // The same test as the self-suspension count in `wait_unit`.
            let self_suspension = self.caches[id].all_holders_out(|k| self.runnable(k));
            let (Some(m), cache) = (self.tmem.as_mut(), &mut self.caches[id]) else { return None };
            let i = m.index(id)?;
            let grown = m.grow(i, cache, now) || (self_suspension && m.grow_over_quota(i, cache, now));
            if !grown {
                return None;
            }
            self.note_allocated();
        }
        self.caches[id].get(holder, now)
    }

    /// Grants waiters of cache `id` units over its δ while every holder is out and
    /// `ss_max_units` allows (a put sent a unit to the pool: the original's woken waiters
    /// retry); whether any was granted.
    fn serve_over_quota(&mut self, cx: &mut Context<'_>, id: usize) -> bool {
        let mut granted = false;
        loop {
            let Some(m) = self.tmem.as_ref() else { return granted };
            let Some(i) = m.index(id) else { return granted };
            let cache = &self.caches[id];
            if !cache.has_waiters() || !m.pool_has_units() || !m.may_grow_over_quota(i, cache) {
                return granted;
            }
            if !cache.all_holders_out(|k| self.runnable(k)) {
                return granted;
            }
            let m = self.tmem.as_mut().expect("checked");
            if !m.grow_over_quota(i, &mut self.caches[id], cx.now()) {
                return granted;
            }
            self.note_allocated();
            let (w, since) = self.caches[id].grant_next(cx.now()).expect("a waiter and a free unit");
            self.granted(cx, id, w, since);
            self.relink_cache(cx, id);
            granted = true;
        }
    }

    pub(super) fn note_allocated(&mut self) {
        if let Some(m) = self.tmem.as_mut() {
            let total = m.caches.iter().map(|&i| self.caches[i].allocated()).sum();
            m.note_total_allocated(total);
        }
    }

    /// Gives back `key`'s unit of cache `id`: it serves the cache's waiters, or, while the
    /// cache holds more than TMEM's δ, goes to the pool for the caches waiting to grow. Points
    /// the links (or donors) of those still waiting at the holders; whether any was granted.
    pub(super) fn put_unit(&mut self, cx: &mut Context<'_>, key: JobKey, id: usize) -> bool {
        let unit = self.caches[id].put(key, cx.now());
        let to_pool = match (self.tmem.as_mut(), &mut self.caches[id]) {
            (Some(m), cache) => m.index(id).is_some_and(|i| m.after_put(i, cache, unit, cx.now())),
            _ => false,
        };
        let mut granted = if to_pool { self.serve_pool(cx) | self.serve_over_quota(cx, id) } else { false };
        while let Some((w, since)) = self.caches[id].grant_next(cx.now()) {
            self.granted(cx, id, w, since);
            granted = true;
        }
        if self.caches[id].has_waiters() || granted {
            self.relink_cache(cx, id);
        }
        granted
    }

    /// Lets managed caches with waiters grow from the pool, the one whose first waiter has
    /// the highest priority first; whether any request was granted.
    pub(super) fn serve_pool(&mut self, cx: &mut Context<'_>) -> bool {
        let mut granted = false;
        loop {
            let Some(m) = self.tmem.as_ref() else { return granted };
            if !m.pool_has_units() {
                return granted;
            }
            let next = m
                .caches
                .iter()
                .enumerate()
                .filter(|&(i, &id)| m.may_grow(i, &self.caches[id]))
                .filter_map(|(i, &id)| self.caches[id].first_waiter().map(|w| ((w.holder.prio, w.holder.seq), i, id)))
                .min();
            let Some((_, i, id)) = next else { return granted };
            let m = self.tmem.as_mut().expect("checked");
            m.grow(i, &mut self.caches[id], cx.now());
            self.note_allocated();
            let (w, since) = self.caches[id].grant_next(cx.now()).expect("a waiter and a free unit");
            self.granted(cx, id, w, since);
            self.relink_cache(cx, id);
            granted = true;
        }
    }

    /// `w`'s wait for a unit of cache `id`, since `since`, ended in a grant: a stack lets it
    /// enter on its next step, a cbuf is its invocation's from now.
    pub(super) fn granted(&mut self, cx: &mut Context<'_>, id: usize, w: StackHolder, since: Nanos) {
        self.end_wait(w.key, cx.now());
        if let Some(m) = self.tmem.as_mut() {
            if let Some(i) = m.index(id) {
                m.note_grant(i, w.task, since, cx.now());
            }
        }
        let run = self.run(w.key);
        run.cache_waiting = None;
        if id < self.components.len() {
            self.enter(w.key, id);
            self.run(w.key).entering = Some(id);
        } else {
            let unit = self.caches[id].holders_unit(w.key).expect("just granted");
            let run = self.run(w.key);
            *run.frame_cbufs.last_mut().expect("a cbuf is taken inside an invocation") = Some(unit);
            run.pc += 1;
        }
        cx.wake(w.key);
    }

    /// Whether job `key` can run in a waiter's place (it is not self-suspended).
    pub(super) fn runnable(&self, key: JobKey) -> bool {
        self.jobs.get(key as usize).and_then(Option::as_ref).is_none_or(|r| r.suspended_until.is_none() && !r.fault_waiting)
    }

    /// The caches of which `key` holds a unit.
    pub(super) fn caches_held_by(&self, key: JobKey) -> Vec<usize> {
        (0..self.caches.len()).filter(|&id| self.caches[id].holders_unit(key).is_some()).collect()
    }

    pub(super) fn relink_cache(&mut self, cx: &mut Context<'_>, id: usize) {
        if self.cache_wait[id] == StackWait::Inherit && !self.donor_mode {
            // With every holder self-suspended nobody can run in a waiter's place: waiters
            // wait off the CPU until a holder resumes or puts its unit.
            let top = self.caches[id].top_holder(|k| self.runnable(k));
            for w in self.caches[id].waiters() {
                cx.depend(w, top);
            }
        }
        if self.donor_mode {
            self.update_donors(cx);
        }
    }

    /// A run of TMEM's memory scheduler, then the caches it let grow serve their waiters.
    pub(super) fn run_memory_scheduler(&mut self, cx: &mut Context<'_>) {
        let Some(m) = self.tmem.as_mut() else { return };
        m.run(cx.now(), &mut self.caches);
        let period = m.spec.period;
        self.serve_pool(cx);
        let m = self.tmem.as_mut().expect("checked");
        let (allocated, in_use) = m.caches.iter().fold((0, 0), |(a, u), &i| (a + self.caches[i].allocated(), u + self.caches[i].held()));
        m.record_point(cx.now(), allocated, in_use);
        cx.schedule(cx.now() + period, TMEM_RUN);
        if self.check {
            self.check_invariants();
        }
    }

    /// Takes `want` from a budgeted job's budget, as much as is left; the time to compute.
    pub(super) fn spend(&mut self, key: JobKey, want: Nanos) -> Nanos {
        let run = self.run(key);
        match run.budget_left.as_mut() {
            None => want,
            Some(left) => {
                let take = want.min(*left);
                *left -= take;
                take
            }
        }
    }

    /// Whether the job's budget is spent (a job without one never is).
    pub(super) fn spent(&self, key: JobKey) -> bool {
        self.jobs[key as usize].as_ref().is_some_and(|r| r.budget_left == Some(Nanos::ZERO))
    }

    /// The component a call of choice set `set` of the current program goes to: one draw from
    /// the job's stream, the first option whose cumulative chance exceeds it.
    pub(super) fn choose(&mut self, key: JobKey, set: usize) -> usize {
        let run = self.jobs[key as usize].as_ref().expect("a job this subsystem took over");
        let options: Vec<(usize, f64)> = {
            let program = match run.frames.last() {
                Some(&(c, _)) => &self.components[c].program,
                None => self.program(run.task).expect("a job with a program"),
            };
            program.choices[set].iter().map(|c| (c.component, c.probability.get())).collect()
        };
        if options.len() == 1 {
            return options[0].0;
        }
        let seed = self.seed;
        let run = self.run(key);
        let (task, index) = (run.task, run.index);
        let rng = run.calls_rng.get_or_insert_with(|| calls_rng(seed, task, index));
        let u: f64 = rand::Rng::random(rng);
        let mut acc = 0.0;
        for &(c, p) in &options {
            acc += p;
            if u < acc {
                return c;
            }
        }
        options.iter().rev().find(|&&(_, p)| p > 0.0).expect("some option has a chance").0
    }

    /// Enters `component` now if a stack is free (or its cache may grow), else waits for one.
    pub(super) fn call(&mut self, cx: &mut Context<'_>, key: JobKey, component: usize, running: bool) -> Step {
        if self.try_get(key, component, cx.now()).is_none() {
            return self.wait_unit(cx, key, component);
        }
        self.enter(key, component);
        if self.check {
            self.check_invariants();
        }
        self.run(key).decided = running;
        Step::Invoke(self.component_ids[component])
    }
}
