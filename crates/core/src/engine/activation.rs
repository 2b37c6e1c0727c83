//! Creating jobs: at a task's own arrivals, and at a subsystem's activation
//! ([`super::Context::activate`]), which its scheduler hears of as such
//! ([`crate::sched::Scheduler::activate`]) when the job first becomes eligible.

use super::{Event, Job, JobState, Simulation};
use crate::model::task::OverrunPolicy;
use crate::program::ProgramState;
use crate::sched::{JobKey, ReadyJob};
use crate::time::Nanos;

impl Simulation<'_> {
    /// Applies [`super::Context::activate`]: a job of task `ti` released now.
    pub(super) fn activate(&mut self, ti: usize) {
        assert!(ti < self.tasks.len(), "a subsystem activated task {ti}, which does not exist");
        let spec = &self.scenario.tasks[ti];
        let demand = spec.exec.sample(&mut self.tasks[ti].rng);
        self.new_job(ti, demand, true);
    }

    /// Releases a job of task `ti` now with `demand`; `activation`: released by
    /// [`super::Context::activate`].
    pub(super) fn new_job(&mut self, ti: usize, demand: Nanos, activation: bool) {
        let spec = &self.scenario.tasks[ti];
        let now = self.now;
        let st = &mut self.tasks[ti];
        if spec.overrun == OverrunPolicy::Skip && !st.pending.is_empty() {
            self.stats[ti].skipped += 1;
            return;
        }
        let index = st.released;
        st.released += 1;
        self.stats[ti].released += 1;
        let seq = self.next_seq;
        self.next_seq += 1;
        let job = Job {
            task: ti as u32,
            index,
            seq,
            release: now,
            abs_deadline: now + spec.deadline,
            demand,
            program: ProgramState::default(),
            ext: None,
            step_left: Nanos::ZERO,
            state: JobState::Queued,
            start: None,
            cpu: None,
            last_cpu: None,
            dispatched_at: now,
            segment_start: now,
        };
        let key = match self.free_keys.pop() {
            Some(k) => {
                self.jobs[k as usize] = Some(job);
                k
            }
            None => {
                self.jobs.push(Some(job));
                (self.jobs.len() - 1) as JobKey
            }
        };
        if activation {
            self.job_mut(key).ext_mut().activation = true;
        }
        if !self.subsystems.is_empty() {
            let info = self.job(key).info(key);
            let mut stepper = None;
            for id in 0..self.subsystems.len() {
                if self.call(id, |s, cx| s.on_release(cx, &info)) && stepper.is_none() {
                    stepper = Some(id);
                }
            }
            if stepper.is_some() {
                self.job_mut(key).ext_mut().stepper = stepper;
            }
        }
        if spec.overrun == OverrunPolicy::Abort {
            self.queue.push(now + spec.deadline, Event::AbortAt { key, seq });
        }
        let st = &mut self.tasks[ti];
        st.pending.push_back(key);
        if st.pending.len() == 1 {
            self.advance(key);
        }
    }

    /// What the scheduler knows of a job as it becomes eligible.
    pub(super) fn ready_job(&self, key: JobKey) -> ReadyJob {
        let j = self.job(key);
        ReadyJob {
            key,
            task: j.task as usize,
            seq: j.seq,
            release: j.release,
            abs_deadline: j.abs_deadline,
            donor: j.ext.as_ref().and_then(|e| e.donor),
        }
    }

    /// Whether the job is an activation not yet told to its scheduler; it is told with the
    /// job's first step, whatever that is (a wake-up after a first suspension is no activation).
    pub(super) fn take_activation(&mut self, key: JobKey) -> bool {
        self.job_mut(key).ext.as_mut().is_some_and(|e| std::mem::take(&mut e.activation))
    }
}
