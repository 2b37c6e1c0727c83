//! MC²'s criticality levels as one node stacking four child schedulers, statically ordered
//! A > B > C > D. Per CPU, level A's table decides first (a level-A job runs only in its own
//! slots on its core); a CPU it leaves goes to the core's highest-priority level-B job
//! (rate-monotonic per core); the CPUs both leave go to level C, global EDF over exactly those
//! CPUs; what is still free goes to level D, first released first. A higher level takes a CPU
//! from a lower one at the next decision, which the engine makes at every release, completion
//! and table boundary, so preemption across levels is immediate.

use super::{CyclicScheduler, GlobalScheduler, JobKey, JobOrder, KeyMap, PartitionNode, ReadyJob, Scheduler};
use crate::model::task::Criticality;
use crate::scenario::CyclicTable;
use crate::time::Nanos;

pub struct Mc2Node {
    cpus: usize,
    /// Level A; `None` when the scenario has no level-A task.
    table: Option<CyclicScheduler>,
    /// Level B: one rate-monotonic queue per CPU.
    level_b: PartitionNode,
    /// Level C: global EDF, over the CPUs A and B leave at each decision.
    level_c: GlobalScheduler,
    /// Level D: global, in release order.
    level_d: GlobalScheduler,
    task_level: Vec<Criticality>,
    level_of_job: KeyMap<Criticality>,
    /// Scratch: level B's choice, and the CPUs still free for C and D.
    b_assign: Vec<Option<JobKey>>,
    free: Vec<usize>,
}

impl Mc2Node {
    /// `task_level[t]` and `task_cpu[t]` per task (a core for levels A and B); `rm_ranks` the
    /// rate-monotonic ranks of all tasks (only their order within a core matters); `table`
    /// level A's slots.
    pub fn new(table: CyclicTable, task_level: Vec<Criticality>, task_cpu: &[Option<usize>], rm_ranks: Vec<u32>, cpus: usize) -> Self {
        let tasks = task_level.len();
        let table = (!table.slots.is_empty()).then(|| CyclicScheduler::new(table, cpus, tasks));
        let per_cpu = (0..cpus)
            .map(|_| Box::new(GlobalScheduler::new("mc2", JobOrder::FixedPriority { ranks: rm_ranks.clone() }, 1)) as Box<dyn Scheduler>)
            .collect();
        // Tasks of other levels never reach level B; their entry only has to name a child.
        let task_child = task_cpu.iter().map(|c| c.unwrap_or(0)).collect();
        let level_b = PartitionNode::new("mc2", per_cpu, task_child);
        let level_c = GlobalScheduler::new("mc2", JobOrder::Edf, cpus);
        // Equal ranks leave the release sequence number as the order: first released first.
        let level_d = GlobalScheduler::new("mc2", JobOrder::FixedPriority { ranks: vec![0; tasks] }, cpus);
        Mc2Node {
            cpus,
            table,
            level_b,
            level_c,
            level_d,
            task_level,
            level_of_job: KeyMap::default(),
            b_assign: vec![None; cpus],
            free: Vec::with_capacity(cpus),
        }
    }
}

impl Scheduler for Mc2Node {
    fn name(&self) -> &'static str {
        "mc2"
    }
    fn cpus(&self) -> usize {
        self.cpus
    }
    fn add_ready(&mut self, job: &ReadyJob) {
        let level = self.task_level[job.task];
        self.level_of_job.insert(job.key, level);
        match level {
            Criticality::A => self.table.as_mut().expect("validated: level-A tasks have slots").add_ready(job),
            Criticality::B => self.level_b.add_ready(job),
            Criticality::C => self.level_c.add_ready(job),
            Criticality::D => self.level_d.add_ready(job),
        }
    }
    fn remove(&mut self, key: JobKey) {
        match self.level_of_job.take(key) {
            Some(Criticality::A) => self.table.as_mut().expect("level-A jobs went to the table").remove(key),
            Some(Criticality::B) => self.level_b.remove(key),
            Some(Criticality::C) => self.level_c.remove(key),
            Some(Criticality::D) => self.level_d.remove(key),
            None => {}
        }
    }
    fn choose(&mut self, now: Nanos, current: &[Option<JobKey>], assign: &mut [Option<JobKey>]) {
        match &mut self.table {
            Some(table) => table.choose(now, current, assign),
            None => assign.fill(None),
        }
        self.level_b.choose(now, current, &mut self.b_assign);
        self.free.clear();
        for (cpu, slot) in assign.iter_mut().enumerate() {
            if slot.is_none() {
                *slot = self.b_assign[cpu];
            }
            if slot.is_none() {
                self.free.push(cpu);
            }
        }
        if self.free.is_empty() {
            return;
        }
        self.level_c.choose_on(&self.free, current, assign);
        self.free.retain(|&cpu| assign[cpu].is_none());
        if !self.free.is_empty() {
            self.level_d.choose_on(&self.free, current, assign);
        }
    }
    fn next_wakeup(&self, now: Nanos) -> Option<Nanos> {
        self.table.as_ref().and_then(|t| t.next_wakeup(now))
    }
}
