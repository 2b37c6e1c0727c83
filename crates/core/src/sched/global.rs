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
    /// Per job key, the decision at which it was last among the top (`.0`) and placed on a
    /// CPU (`.1`): membership in O(1), so a decision costs O(m), not O(m²), on many CPUs.
    marks: Vec<(u64, u64)>,
    decision: u64,
}

/// Below this many CPUs a linear scan of the few top jobs beats keeping marks.
const MARKS_FROM_CPUS: usize = 16;

impl GlobalScheduler {
    pub fn new(name: &'static str, order: JobOrder, cpus: usize) -> Self {
        GlobalScheduler {
            name,
            order,
            cpus,
            ready: ReadyQueue::default(),
            keys: KeyMap::default(),
            top: Vec::with_capacity(cpus),
            marks: Vec::new(),
            decision: 0,
        }
    }

    /// Whether some job is eligible.
    pub fn has_jobs(&self) -> bool {
        self.head().is_some()
    }

    /// The job that runs first (the one a single CPU runs).
    #[inline]
    pub fn head(&self) -> Option<JobKey> {
        self.ready.first()
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

impl GlobalScheduler {
    /// `choose` on a few CPUs (at most 64): the top jobs are read in place and the ones that
    /// keep their CPU are marked in a bit mask, so a decision costs a few compares per CPU.
    fn choose_scanning(&mut self, current: &[Option<JobKey>], assign: &mut [Option<JobKey>]) {
        // In reverse run order: top[len - 1] runs first.
        let top = self.ready.first_n_reversed(self.cpus);
        assert!(top.len() <= 64, "scanning decides on at most 64 CPUs");
        // Bit i: top[i] is already running and stays where it is, so nothing migrates needlessly.
        let mut kept = 0u64;
        for (slot, cur) in assign.iter_mut().zip(current) {
            *slot = None;
            if let Some(j) = *cur {
                if let Some(i) = top.iter().position(|&(_, t)| t == j) {
                    kept |= 1 << i;
                    *slot = Some(j);
                }
            }
        }
        let mut next_free = 0;
        for (i, &(_, j)) in top.iter().enumerate().rev() {
            if kept & (1 << i) != 0 {
                continue;
            }
            while assign[next_free].is_some() {
                next_free += 1;
            }
            assign[next_free] = Some(j);
        }
    }

    /// `choose` on many CPUs, with the same outcome: the m highest jobs run, those already
    /// running keep their CPU, the others take the free CPUs in ascending order.
    fn choose_marked(&mut self, current: &[Option<JobKey>], assign: &mut [Option<JobKey>]) {
        self.decision += 1;
        let d = self.decision;
        self.top.clear();
        self.top.extend(self.ready.iter().take(self.cpus));
        for &j in &self.top {
            let k = j as usize;
            if k >= self.marks.len() {
                self.marks.resize(k + 1, (0, 0));
            }
            self.marks[k].0 = d;
        }
        for (slot, cur) in assign.iter_mut().zip(current) {
            *slot = cur.filter(|&j| self.marks.get(j as usize).is_some_and(|m| m.0 == d));
            if let Some(j) = *slot {
                self.marks[j as usize].1 = d;
            }
        }
        let mut next_free = 0;
        for &j in &self.top {
            if self.marks[j as usize].1 == d {
                continue;
            }
            while assign[next_free].is_some() {
                next_free += 1;
            }
            assign[next_free] = Some(j);
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
    #[inline]
    fn add_ready(&mut self, job: &ReadyJob) {
        let k = self.order.key(job);
        self.keys.insert(job.key, k);
        self.ready.insert(k, job.key);
    }
    #[inline]
    fn remove(&mut self, key: JobKey) {
        if let Some(k) = self.keys.take(key) {
            self.ready.remove(k, key);
        }
    }
    #[inline]
    fn choose(&mut self, _now: Nanos, current: &[Option<JobKey>], assign: &mut [Option<JobKey>]) {
        if self.cpus == 1 {
            assign[0] = self.head();
            return;
        }
        if self.cpus >= MARKS_FROM_CPUS {
            self.choose_marked(current, assign);
        } else {
            self.choose_scanning(current, assign);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        /// With marks and by scanning, a decision is the same: through any mix of jobs
        /// becoming eligible and leaving, with the engine running what was assigned.
        #[test]
        fn marks_decide_as_scanning_does(cpus in 2usize..40, ops in proptest::collection::vec((proptest::bool::ANY, 0u32..60, 0u64..50), 1..300)) {
            let mut marked = GlobalScheduler::new("g", JobOrder::Edf, cpus);
            let mut scanned = GlobalScheduler::new("g", JobOrder::Edf, cpus);
            let mut current = vec![None; cpus];
            let (mut a, mut b) = (vec![None; cpus], vec![None; cpus]);
            let mut seq = 0;
            for (add, key, deadline) in ops {
                if add {
                    seq += 1;
                    let job = ReadyJob { key, task: key as usize, seq, release: Nanos::ZERO, abs_deadline: Nanos(deadline), donor: None };
                    marked.remove(key);
                    scanned.remove(key);
                    marked.add_ready(&job);
                    scanned.add_ready(&job);
                } else {
                    marked.remove(key);
                    scanned.remove(key);
                    for c in current.iter_mut() {
                        if *c == Some(key) {
                            *c = None;
                        }
                    }
                }
                marked.choose_marked(&current, &mut a);
                scanned.choose_scanning(&current, &mut b);
                proptest::prop_assert_eq!(&a, &b);
                current.clone_from(&a);
            }
        }
    }
}
