//! Table-driven cyclic executive: within every major frame, each slot lets one task's
//! pending job run on one CPU; outside its slots a task does not run, even if CPUs idle.

use super::{JobKey, ReadyJob, Scheduler};
use crate::scenario::CyclicTable;
use crate::time::Nanos;

pub struct CyclicScheduler {
    table: CyclicTable,
    cpus: usize,
    /// Slot indices per CPU, sorted by start.
    per_cpu: Vec<Vec<usize>>,
    /// The eligible job of each task (only a task's oldest unfinished job is ever eligible).
    ready_by_task: Vec<Option<JobKey>>,
    task_of_key: super::KeyMap<usize>,
}

impl CyclicScheduler {
    pub fn new(table: CyclicTable, cpus: usize, tasks: usize) -> Self {
        let mut per_cpu = vec![Vec::new(); cpus];
        for (i, s) in table.slots.iter().enumerate() {
            per_cpu[s.cpu].push(i);
        }
        CyclicScheduler { table, cpus, per_cpu, ready_by_task: vec![None; tasks], task_of_key: super::KeyMap::default() }
    }

    fn frame_pos(&self, now: Nanos) -> (u64, u64) {
        let f = self.table.major_frame.0;
        (now.0 / f * f, now.0 % f)
    }
}

impl Scheduler for CyclicScheduler {
    fn name(&self) -> &'static str {
        "cyclic"
    }
    fn cpus(&self) -> usize {
        self.cpus
    }
    fn add_ready(&mut self, job: &ReadyJob) {
        self.ready_by_task[job.task] = Some(job.key);
        self.task_of_key.insert(job.key, job.task);
    }
    fn remove(&mut self, key: JobKey) {
        if let Some(t) = self.task_of_key.take(key) {
            if self.ready_by_task[t] == Some(key) {
                self.ready_by_task[t] = None;
            }
        }
    }
    fn choose(&mut self, now: Nanos, _current: &[Option<JobKey>], assign: &mut [Option<JobKey>]) {
        let (_, pos) = self.frame_pos(now);
        for (cpu, slot) in assign.iter_mut().enumerate() {
            *slot = None;
            let active =
                self.per_cpu[cpu].iter().map(|&i| &self.table.slots[i]).find(|s| s.start.0 <= pos && pos < s.start.0 + s.duration.0);
            if let Some(s) = active {
                *slot = self.ready_by_task[s.task];
            }
        }
        // A task given overlapping slots on two CPUs runs on the lower-numbered one only.
        for cpu in 1..assign.len() {
            if assign[cpu].is_some() && assign[..cpu].contains(&assign[cpu]) {
                assign[cpu] = None;
            }
        }
    }
    fn next_wakeup(&self, now: Nanos) -> Option<Nanos> {
        let (frame_start, pos) = self.frame_pos(now);
        let f = self.table.major_frame.0;
        let mut best = u64::MAX;
        for s in &self.table.slots {
            for b in [s.start.0, s.start.0 + s.duration.0] {
                let t = if b > pos { frame_start + b } else { frame_start + f + b };
                best = best.min(t);
            }
        }
        (best != u64::MAX).then_some(Nanos(best))
    }
}
