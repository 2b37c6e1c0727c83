//! Partitioned FP/EDF: one uniprocessor queue per CPU, each task's jobs going to its CPU's
//! queue, and CPU `c` running the head of queue `c`. The queues are held by value: these
//! decisions come several per event.

use super::{GlobalScheduler, JobKey, JobOrder, KeyMap, ReadyJob, Scheduler};
use crate::time::Nanos;

pub struct PartitionNode {
    name: &'static str,
    queues: Vec<GlobalScheduler>,
    task_cpu: Vec<usize>,
    cpu_of_job: KeyMap<usize>,
}

impl PartitionNode {
    /// One `order` queue per CPU; task `t`'s jobs go to CPU `task_cpu[t]`.
    pub fn new(name: &'static str, order: &JobOrder, cpus: usize, task_cpu: Vec<usize>) -> Self {
        assert!(task_cpu.iter().all(|&c| c < cpus), "every task goes to an existing CPU");
        let queues = (0..cpus).map(|_| GlobalScheduler::new(name, order.clone(), 1)).collect();
        PartitionNode { name, queues, task_cpu, cpu_of_job: KeyMap::default() }
    }
}

impl Scheduler for PartitionNode {
    fn name(&self) -> &'static str {
        self.name
    }
    fn cpus(&self) -> usize {
        self.queues.len()
    }
    #[inline]
    fn add_ready(&mut self, job: &ReadyJob) {
        let c = self.task_cpu[job.task];
        self.cpu_of_job.insert(job.key, c);
        self.queues[c].add_ready(job);
    }
    #[inline]
    fn remove(&mut self, key: JobKey) {
        if let Some(c) = self.cpu_of_job.take(key) {
            self.queues[c].remove(key);
        }
    }
    #[inline]
    fn choose(&mut self, _now: Nanos, _current: &[Option<JobKey>], assign: &mut [Option<JobKey>]) {
        for (slot, queue) in assign.iter_mut().zip(&self.queues) {
            *slot = queue.head();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        /// Each CPU runs what a uniprocessor queue fed only its tasks' jobs would run: through
        /// any mix of jobs of any task becoming eligible and leaving, under EDF and fixed
        /// priorities.
        #[test]
        fn each_cpu_runs_what_its_own_queue_would(
            cpus in 1usize..6,
            edf in proptest::bool::ANY,
            ops in proptest::collection::vec((proptest::bool::ANY, 0u32..40, 0usize..12, 0u64..50), 1..300),
        ) {
            let task_cpu: Vec<usize> = (0..12).map(|t| t % cpus).collect();
            let order = if edf { JobOrder::Edf } else { JobOrder::FixedPriority { ranks: (0..12u32).map(|t| t * 7 % 12).collect() } };
            let mut node = PartitionNode::new("p", &order, cpus, task_cpu.clone());
            let mut alone: Vec<GlobalScheduler> = (0..cpus).map(|_| GlobalScheduler::new("p", order.clone(), 1)).collect();
            let mut assign = vec![None; cpus];
            let mut seq = 0;
            for (add, key, task, deadline) in ops {
                node.remove(key);
                alone.iter_mut().for_each(|q| q.remove(key));
                if add {
                    seq += 1;
                    let job = ReadyJob { key, task, seq, release: Nanos::ZERO, abs_deadline: Nanos(deadline), donor: None };
                    node.add_ready(&job);
                    alone[task_cpu[task]].add_ready(&job);
                }
                let current = assign.clone();
                node.choose(Nanos::ZERO, &current, &mut assign);
                for (cpu, q) in alone.iter_mut().enumerate() {
                    let mut one = [None];
                    q.choose(Nanos::ZERO, &current[cpu..=cpu], &mut one);
                    proptest::prop_assert_eq!(assign[cpu], one[0]);
                }
                proptest::prop_assert_eq!(node.next_wakeup(Nanos::ZERO), None);
            }
        }
    }
}
