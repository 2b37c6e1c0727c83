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
