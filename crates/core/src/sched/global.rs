//! One ready queue shared by all CPUs: uniprocessor FP/EDF (m = 1), global EDF and global FP.

use super::{JobKey, JobOrder, KeyMap, QueueKey, ReadyJob, ReadyQueue, Scheduler};
use crate::time::Nanos;

pub struct GlobalScheduler {
    name: &'static str,
    order: JobOrder,
    cpus: usize,
    ready: ReadyQueue,
    keys: KeyMap<QueueKey>,
    top: Vec<JobKey>,
}

impl GlobalScheduler {
    pub fn new(name: &'static str, order: JobOrder, cpus: usize) -> Self {
        GlobalScheduler { name, order, cpus, ready: ReadyQueue::default(), keys: KeyMap::default(), top: Vec::with_capacity(cpus) }
    }

    /// Whether some job is eligible.
    pub fn has_jobs(&self) -> bool {
        self.ready.first().is_some()
    }

    /// Like `choose`, but only over the CPUs listed in `free` (a subset of `0..cpus`, each
    /// `None` in `assign`): the `free.len()` highest-priority jobs run there, a job keeping
    /// the CPU it runs on when that CPU is free. Other entries of `assign` are left alone.
    pub fn choose_on(&mut self, free: &[usize], current: &[Option<JobKey>], assign: &mut [Option<JobKey>]) {
        self.top.clear();
        self.top.extend(self.ready.iter().take(free.len()));
        for &cpu in free {
            assign[cpu] = current[cpu].filter(|j| self.top.contains(j));
        }
        let mut next_free = 0;
        for &j in &self.top {
            if free.iter().any(|&cpu| assign[cpu] == Some(j)) {
                continue;
            }
            while assign[free[next_free]].is_some() {
                next_free += 1;
            }
            assign[free[next_free]] = Some(j);
        }
    }
}

impl Scheduler for GlobalScheduler {
    fn name(&self) -> &'static str {
        self.name
    }
    fn cpus(&self) -> usize {
        self.cpus
    }
    fn add_ready(&mut self, job: &ReadyJob) {
        let k = self.order.key(job);
        self.keys.insert(job.key, k);
        self.ready.insert(k, job.key);
    }
    fn remove(&mut self, key: JobKey) {
        if let Some(k) = self.keys.take(key) {
            self.ready.remove(k, key);
        }
    }
    fn choose(&mut self, _now: Nanos, current: &[Option<JobKey>], assign: &mut [Option<JobKey>]) {
        if self.cpus == 1 {
            assign[0] = self.ready.first();
            return;
        }
        self.top.clear();
        self.top.extend(self.ready.iter().take(self.cpus));
        // Jobs that stay among the m highest keep their CPU, so nothing migrates needlessly.
        for (cpu, slot) in assign.iter_mut().enumerate() {
            *slot = current[cpu].filter(|j| self.top.contains(j));
        }
        let mut next_free = 0;
        for &j in &self.top {
            if assign.contains(&Some(j)) {
                continue;
            }
            while assign[next_free].is_some() {
                next_free += 1;
            }
            assign[next_free] = Some(j);
        }
    }
}
