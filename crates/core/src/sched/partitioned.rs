//! A node that splits the CPUs among its children: each child schedules its own CPUs, and
//! each task's jobs go to one child (partitioned scheduling is this node over one uniprocessor
//! queue per CPU).

use super::{GlobalScheduler, JobKey, JobOrder, KeyMap, ReadyJob, Scheduler};
use crate::time::Nanos;
use std::ops::Range;

pub struct PartitionNode {
    name: &'static str,
    children: Vec<Box<dyn Scheduler>>,
    /// The CPUs of each child, contiguous and in child order.
    child_cpus: Vec<Range<usize>>,
    task_child: Vec<usize>,
    child_of_job: KeyMap<usize>,
}

impl PartitionNode {
    /// `children[i]` gets the next `children[i].cpus()` CPUs; task `t`'s jobs go to
    /// `children[task_child[t]]`.
    pub fn new(name: &'static str, children: Vec<Box<dyn Scheduler>>, task_child: Vec<usize>) -> Self {
        let mut next = 0;
        let child_cpus = children
            .iter()
            .map(|c| {
                let r = next..next + c.cpus();
                next = r.end;
                r
            })
            .collect();
        assert!(task_child.iter().all(|&c| c < children.len()), "every task goes to an existing child");
        PartitionNode { name, children, child_cpus, task_child, child_of_job: KeyMap::default() }
    }
}

impl Scheduler for PartitionNode {
    fn name(&self) -> &'static str {
        self.name
    }
    fn cpus(&self) -> usize {
        self.child_cpus.last().map_or(0, |r| r.end)
    }
    fn add_ready(&mut self, job: &ReadyJob) {
        let c = self.task_child[job.task];
        self.child_of_job.insert(job.key, c);
        self.children[c].add_ready(job);
    }
    fn remove(&mut self, key: JobKey) {
        if let Some(c) = self.child_of_job.take(key) {
            self.children[c].remove(key);
        }
    }
    fn choose(&mut self, now: Nanos, current: &[Option<JobKey>], assign: &mut [Option<JobKey>]) {
        for (child, cpus) in self.children.iter_mut().zip(&self.child_cpus) {
            child.choose(now, &current[cpus.clone()], &mut assign[cpus.clone()]);
        }
    }
    fn next_wakeup(&self, now: Nanos) -> Option<Nanos> {
        self.children.iter().filter_map(|c| c.next_wakeup(now)).min()
    }
    fn finish(&mut self, now: Nanos, result: &mut crate::result::SimResult) {
        for child in &mut self.children {
            child.finish(now, result);
        }
    }
}

/// Partitioned FP/EDF held by value: one uniprocessor queue per CPU, CPU `c` running the head
/// of queue `c`. It decides as a [`PartitionNode`] over such queues does, with no call through
/// a trait object per CPU (these decisions come several per event).
pub struct PartitionedQueues {
    name: &'static str,
    queues: Vec<GlobalScheduler>,
    task_cpu: Vec<usize>,
    cpu_of_job: KeyMap<usize>,
}

impl PartitionedQueues {
    /// One `order` queue per CPU; task `t`'s jobs go to CPU `task_cpu[t]`.
    pub fn new(name: &'static str, order: &JobOrder, cpus: usize, task_cpu: Vec<usize>) -> Self {
        assert!(task_cpu.iter().all(|&c| c < cpus), "every task goes to an existing CPU");
        let queues = (0..cpus).map(|_| GlobalScheduler::new(name, order.clone(), 1)).collect();
        PartitionedQueues { name, queues, task_cpu, cpu_of_job: KeyMap::default() }
    }
}

impl Scheduler for PartitionedQueues {
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
    use crate::sched::JobOrder;

    proptest::proptest! {
        /// Partitioned queues held by value decide as a partition node over one-CPU queues:
        /// through any mix of jobs of any task becoming eligible and leaving, under EDF and
        /// fixed priorities.
        #[test]
        fn queues_by_value_decide_as_the_partition_node(
            cpus in 1usize..6,
            edf in proptest::bool::ANY,
            ops in proptest::collection::vec((proptest::bool::ANY, 0u32..40, 0usize..12, 0u64..50), 1..300),
        ) {
            let task_cpu: Vec<usize> = (0..12).map(|t| t % cpus).collect();
            let order = if edf { JobOrder::Edf } else { JobOrder::FixedPriority { ranks: (0..12).map(|t| (t * 7 % 12) as u32).collect() } };
            let children: Vec<Box<dyn Scheduler>> = (0..cpus).map(|_| Box::new(GlobalScheduler::new("p", order.clone(), 1)) as Box<dyn Scheduler>).collect();
            let mut node = PartitionNode::new("p", children, task_cpu.clone());
            let mut queues = PartitionedQueues::new("p", &order, cpus, task_cpu);
            let mut current = vec![None; cpus];
            let (mut a, mut b) = (vec![None; cpus], vec![None; cpus]);
            let mut seq = 0;
            for (add, key, task, deadline) in ops {
                node.remove(key);
                queues.remove(key);
                if add {
                    seq += 1;
                    let job = ReadyJob { key, task, seq, release: Nanos::ZERO, abs_deadline: Nanos(deadline), donor: None };
                    node.add_ready(&job);
                    queues.add_ready(&job);
                }
                node.choose(Nanos::ZERO, &current, &mut a);
                queues.choose(Nanos::ZERO, &current, &mut b);
                proptest::prop_assert_eq!(&a, &b);
                proptest::prop_assert_eq!(node.next_wakeup(Nanos::ZERO), queues.next_wakeup(Nanos::ZERO));
                current.clone_from(&a);
            }
        }
    }
}
