//! Dependency links ([`super::Context::depend`]): a waiting job stays eligible, and when the
//! scheduler chooses it, the job at the end of its chain of links runs on that CPU instead.
//! The scheduler always sees its own choices as the CPUs' current jobs, so its decisions do
//! not change because another job runs in a chosen one's place.

use super::{JobState, Simulation};
use crate::sched::{JobKey, Scheduler};

impl Simulation<'_> {
    /// Applies [`super::Context::depend`].
    pub(super) fn set_link(&mut self, key: JobKey, holder: Option<JobKey>) {
        if !self.is_live_key(key) {
            return;
        }
        let link = holder.filter(|&h| h != key && self.is_live_key(h)).map(|h| (h, self.job(h).seq));
        let had = self.job(key).ext.as_ref().is_some_and(|e| e.link.is_some());
        if link.is_none() && !had {
            return;
        }
        if link.is_some() && !had {
            if self.links == 0 {
                // Entering linked scheduling: until now each CPU ran what was chosen for it.
                for cpu in 0..self.cpus.len() {
                    self.chosen[cpu] = self.cpus[cpu].running.map(|k| (k, self.job(k).seq));
                }
            }
            self.links += 1;
        } else if link.is_none() {
            self.links -= 1;
        }
        self.undecided = true;
        let job = self.job_mut(key);
        job.ext_mut().link = link;
        match (job.state, link.is_some()) {
            (JobState::Blocked, true) => {
                job.state = JobState::Linked;
                self.make_ready(key);
            }
            (JobState::Linked, false) => {
                job.state = JobState::Blocked;
                self.sched_mut().remove(key);
            }
            _ => {}
        }
    }

    /// Removes a job's link, if it has one (it is woken or ends).
    pub(super) fn clear_link(&mut self, key: JobKey) {
        if self.job_mut(key).ext.as_mut().and_then(|e| e.link.take()).is_some() {
            self.links -= 1;
            self.undecided = true;
        }
    }

    /// [`crate::program::Step::Block`] for a job off its CPU: with a link it stays in the
    /// scheduler (it enters it if it was not there), without one it leaves it.
    pub(super) fn block(&mut self, key: JobKey) {
        if self.cpu_groups.is_some() && self.job(key).state == JobState::Ready {
            self.note_eligible(key, false);
        }
        let job = self.job_mut(key);
        let in_scheduler = matches!(job.state, JobState::Ready | JobState::Linked);
        if job.ext.as_ref().is_some_and(|e| e.link.is_some()) {
            job.state = JobState::Linked;
            if !in_scheduler {
                self.make_ready(key);
            }
        } else {
            job.state = JobState::Blocked;
            if in_scheduler {
                self.sched_mut().block(key);
            }
        }
    }

    /// The job that runs when `key` is chosen: `key` itself if it can run, else the end of
    /// its chain of links; `None` if the chain ends in a job that cannot run.
    fn chain_end(&self, mut key: JobKey) -> Option<JobKey> {
        // Acyclic lock orders make chains acyclic; the bound keeps a faulty subsystem's cycle
        // from hanging the run.
        for _ in 0..=self.jobs.len() {
            let job = self.job(key);
            match job.state {
                JobState::Ready => return Some(key),
                JobState::Linked => {
                    let (holder, seq) = job.ext.as_ref().and_then(|e| e.link).expect("a linked job has its link");
                    if !self.is_live(holder, seq) {
                        return None;
                    }
                    key = holder;
                }
                _ => return None,
            }
        }
        None
    }

    /// [`Simulation::reschedule`]'s decision while links exist: the scheduler chooses over its
    /// own previous choices, then each CPU runs the end of its chosen job's chain.
    #[cold]
    #[inline(never)]
    pub(super) fn reschedule_linked(&mut self) {
        let m = self.cpus.len();
        let now = self.now;
        for cpu in 0..m {
            self.current[cpu] = self.chosen[cpu]
                .filter(|&(k, seq)| self.is_live(k, seq) && matches!(self.job(k).state, JobState::Ready | JobState::Linked))
                .map(|(k, _)| k);
        }
        self.sched.choose(now, &self.current, &mut self.assign);
        for cpu in 0..m {
            self.chosen[cpu] = self.assign[cpu].map(|k| (k, self.job(k).seq));
        }
        for cpu in 0..m {
            self.assign[cpu] = self.assign[cpu].and_then(|k| self.chain_end(k));
        }
        // One CPU per job: where it runs, else where it was chosen itself, else the lowest.
        for cpu in 0..m {
            let Some(j) = self.assign[cpu] else { continue };
            let rivals: Vec<usize> = (cpu..m).filter(|&c| self.assign[c] == Some(j)).collect();
            if rivals.len() == 1 {
                continue;
            }
            let keep = rivals
                .iter()
                .copied()
                .find(|&c| self.cpus[c].running == Some(j))
                .or_else(|| rivals.iter().copied().find(|&c| self.chosen[c].map(|(k, _)| k) == Some(j)))
                .unwrap_or(cpu);
            for c in rivals {
                if c != keep {
                    self.assign[c] = None;
                }
            }
        }
        for cpu in 0..m {
            self.current[cpu] = self.cpus[cpu].running;
        }
        if self.assign[..m] != self.current[..m] {
            self.apply_assignment(now);
        }
        self.after_decision(now);
    }
}
