//! One ready queue per CPU; each task is bound to a CPU by the partition.

use super::{JobKey, JobOrder, KeyMap, QueueKey, ReadyJob, ReadyQueue, Scheduler};
use crate::time::Nanos;

pub struct PartitionedScheduler {
    name: &'static str,
    order: JobOrder,
    task_cpu: Vec<usize>,
    queues: Vec<ReadyQueue>,
    keys: KeyMap<(usize, QueueKey)>,
}

impl PartitionedScheduler {
    pub fn new(name: &'static str, order: JobOrder, task_cpu: Vec<usize>, cpus: usize) -> Self {
        PartitionedScheduler { name, order, task_cpu, queues: vec![ReadyQueue::default(); cpus], keys: KeyMap::default() }
    }
}

impl Scheduler for PartitionedScheduler {
    fn name(&self) -> &'static str {
        self.name
    }
    fn cpus(&self) -> usize {
        self.queues.len()
    }
    fn add_ready(&mut self, job: &ReadyJob) {
        let cpu = self.task_cpu[job.task];
        let k = self.order.key(job);
        self.keys.insert(job.key, (cpu, k));
        self.queues[cpu].insert(k, job.key);
    }
    fn remove(&mut self, key: JobKey) {
        if let Some((cpu, k)) = self.keys.take(key) {
            self.queues[cpu].remove(k, key);
        }
    }
    fn choose(&mut self, _now: Nanos, _current: &[Option<JobKey>], assign: &mut [Option<JobKey>]) {
        for (slot, q) in assign.iter_mut().zip(&self.queues) {
            *slot = q.first();
        }
    }
}
