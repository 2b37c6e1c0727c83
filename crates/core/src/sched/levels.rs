//! MC²'s criticality levels as one node stacking four child schedulers, statically ordered
//! A > B > C > D. Per CPU, level A's table decides first (a level-A job runs only in its own
//! slots on its core); a CPU it leaves goes to the core's highest-priority level-B job
//! (rate-monotonic per core); the CPUs both leave go to level C, global EDF over exactly those
//! CPUs; what is still free goes to level D, first released first. A higher level takes a CPU
//! from a lower one at the next decision, which the engine makes at every release, completion
//! and table boundary, so preemption across levels is immediate.
//!
//! **Servers.** A deferrable or polling server under level B, C or D ([`Mc2Server`]) holds
//! the ready jobs of its tasks in a queue of its own. While it has budget, its most urgent job
//! stands for it in its level's queue, ranked as the server: at level B as a pseudo-task of
//! its period among its core's rate-monotonic tasks, at level C with the end of its current
//! period as the deadline, at level D by the job's release. So the level chooses it exactly as
//! it would choose a task, and levels above preempt it the same way. Budgets are charged to
//! the nanosecond at each decision for the time the server's job ran since the last one, and
//! `next_wakeup` brings a decision where a running server's budget runs out and at every
//! period boundary (replenishment to the full budget; a polling server idle at a decision
//! gives up the rest of its period's budget once time moves on), as in HiRes's servers
//! (`hierarchy.rs`).

use super::{CyclicScheduler, GlobalScheduler, JobKey, JobOrder, KeyMap, PartitionNode, ReadyJob, ReadyQueue, Scheduler};
use super::{ServerSummary, Servers};
use crate::model::scheduler::{CyclicTable, Mc2Server, ServerKind};
use crate::model::task::Criticality;
use crate::result::SimResult;
use crate::time::Nanos;
use crate::MAX_TRACE_RECORDS;

/// The servers under MC²'s levels, as the node gets them.
#[derive(Clone, Debug, Default)]
pub struct Mc2ServerSet {
    pub servers: Vec<Mc2Server>,
    /// How each server orders its own tasks' jobs.
    pub orders: Vec<JobOrder>,
    /// The server of each task, `None` for a task its level schedules directly.
    pub task_server: Vec<Option<usize>>,
}

/// One server's run-time state.
struct LevelServer {
    spec: Mc2Server,
    order: JobOrder,
    jobs: ReadyQueue,
    left_ns: u64,
    /// Start of its next period (the first replenishment is at 0).
    next_boundary_ns: u64,
    /// The job standing for it in its level's queue, and the deadline it was queued with.
    queued: Option<(JobKey, Nanos)>,
    /// Nothing was ready in it at the last decision.
    idle: bool,
    consumed_ns: u64,
    replenishments: u64,
    exhaustions: u64,
    period_consumed_ns: Vec<u64>,
    exhausted_at: Vec<Nanos>,
}

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
    /// Servers under levels B–D; with none, decisions are exactly those without servers.
    servers: Vec<LevelServer>,
    task_server: Vec<Option<usize>>,
    /// Server `s` enters its level's queue as pseudo-task `tasks + s`.
    tasks: usize,
    /// The server holding each job of its tasks, with the job as it was made ready.
    server_job: KeyMap<(usize, ReadyJob)>,
    /// The server whose job each CPU was given at the last decision.
    running: Vec<Option<usize>>,
    last_choose: Nanos,
}

impl Mc2Node {
    /// `task_level[t]` and `task_cpu[t]` per task (a core for levels A and B); `rm_ranks` the
    /// rate-monotonic ranks of all tasks followed by the servers' (only their order within a
    /// core matters); `table` level A's slots; `servers` the servers under levels B–D.
    pub fn new(
        table: CyclicTable,
        task_level: Vec<Criticality>,
        task_cpu: &[Option<usize>],
        rm_ranks: Vec<u32>,
        servers: Mc2ServerSet,
        cpus: usize,
    ) -> Self {
        let tasks = task_level.len();
        let table = (!table.slots.is_empty()).then(|| CyclicScheduler::new(table, cpus, tasks));
        // Tasks of other levels never reach level B; their entry only has to name a CPU.
        let task_child = task_cpu.iter().map(|c| c.unwrap_or(0)).chain(servers.servers.iter().map(|s| s.cpu.unwrap_or(0))).collect();
        let level_b = PartitionNode::new("mc2", &JobOrder::FixedPriority { ranks: rm_ranks.clone() }, cpus, task_child);
        let level_c = GlobalScheduler::new("mc2", JobOrder::Edf, cpus);
        // Equal ranks leave the release sequence number as the order: first released first.
        let level_d = GlobalScheduler::new("mc2", JobOrder::FixedPriority { ranks: vec![0; tasks + servers.servers.len()] }, cpus);
        let task_server = if servers.task_server.is_empty() { vec![None; tasks] } else { servers.task_server };
        let servers = servers
            .servers
            .into_iter()
            .zip(servers.orders)
            .map(|(spec, order)| LevelServer {
                spec,
                order,
                jobs: ReadyQueue::default(),
                left_ns: 0,
                next_boundary_ns: 0,
                queued: None,
                idle: true,
                consumed_ns: 0,
                replenishments: 0,
                exhaustions: 0,
                period_consumed_ns: Vec::new(),
                exhausted_at: Vec::new(),
            })
            .collect();
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
            servers,
            task_server,
            tasks,
            server_job: KeyMap::default(),
            running: vec![None; cpus],
            last_choose: Nanos::ZERO,
        }
    }

    fn level_add(&mut self, level: Criticality, job: &ReadyJob) {
        match level {
            Criticality::A => self.table.as_mut().expect("validated: level-A tasks have slots").add_ready(job),
            Criticality::B => self.level_b.add_ready(job),
            Criticality::C => self.level_c.add_ready(job),
            Criticality::D => self.level_d.add_ready(job),
        }
    }

    fn level_remove(&mut self, level: Criticality, key: JobKey) {
        match level {
            Criticality::A => self.table.as_mut().expect("level-A jobs went to the table").remove(key),
            Criticality::B => self.level_b.remove(key),
            Criticality::C => self.level_c.remove(key),
            Criticality::D => self.level_d.remove(key),
        }
    }

    /// What every decision with servers starts with: polling servers idle since the last one
    /// lose their budget, the time since then is charged, budgets due are replenished, and
    /// each server's most urgent job stands for it in its level's queue while it has budget.
    fn begin_decision(&mut self, now: Nanos) {
        self.account_until(now);
        for i in 0..self.servers.len() {
            let s = &mut self.servers[i];
            let period = s.spec.period.0;
            if s.next_boundary_ns <= now.0 {
                s.replenishments += (now.0 - s.next_boundary_ns) / period + 1;
                s.next_boundary_ns = (now.0 / period + 1) * period;
                s.left_ns = s.spec.budget.0;
            }
            self.requeue(i);
        }
    }

    /// Charges the time since the last decision to the servers whose jobs ran through it; a
    /// polling server idle at that decision gives up the rest of its budget (judged once time
    /// moves on, so work arriving later in the same instant still finds the budget).
    fn account_until(&mut self, now: Nanos) {
        let ran_ns = (now - self.last_choose).0;
        self.last_choose = now;
        if ran_ns == 0 {
            return;
        }
        for s in &mut self.servers {
            if s.idle && s.spec.kind == ServerKind::Polling {
                s.left_ns = 0;
            }
        }
        for cpu in 0..self.running.len() {
            if let Some(i) = self.running[cpu] {
                self.servers[i].charge(ran_ns, now);
            }
        }
    }

    /// Puts server `i`'s most urgent job in its level's queue in place of the one there, if
    /// that changed (another job, a new deadline, or none without budget).
    fn requeue(&mut self, i: usize) {
        let s = &self.servers[i];
        let want = match s.jobs.first().filter(|_| s.left_ns > 0) {
            Some(key) => {
                let (_, job) = self.server_job.get(key).expect("a queued job of the server");
                let deadline = if s.spec.level == Criticality::C { Nanos(s.next_boundary_ns) } else { job.abs_deadline };
                Some((job, deadline))
            }
            None => None,
        };
        if want.map(|(j, d)| (j.key, d)) == s.queued {
            return;
        }
        let level = s.spec.level;
        if let Some((old, _)) = s.queued {
            self.level_remove(level, old);
        }
        self.servers[i].queued = want.map(|(j, d)| (j.key, d));
        if let Some((job, deadline)) = want {
            let stand_in = ReadyJob { task: self.tasks + i, abs_deadline: deadline, ..job };
            self.level_add(level, &stand_in);
        }
    }

    /// Notes which server each CPU runs and which servers have nothing ready.
    fn end_decision(&mut self, assign: &[Option<JobKey>]) {
        // Only a server's stand-in is in a level's queue, so a job of a server that runs is it.
        for (cpu, job) in assign.iter().enumerate() {
            self.running[cpu] = job.and_then(|k| self.server_job.get(k)).map(|(i, _)| i);
        }
        for s in &mut self.servers {
            s.idle = s.jobs.first().is_none();
        }
    }

    /// Each server's state at the end of the run.
    fn summaries(&self) -> Vec<ServerSummary> {
        let ms = |ns: u64| ns as f64 / 1e6;
        self.servers
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let cpus: Vec<usize> = match s.spec.cpu {
                    Some(c) => vec![c],
                    None => (0..self.cpus).collect(),
                };
                let mut period_consumed_ns = s.period_consumed_ns.clone();
                period_consumed_ns.resize((s.replenishments as usize).min(MAX_TRACE_RECORDS), 0);
                ServerSummary {
                    name: s.spec.name.clone(),
                    parent: format!("level {}", s.spec.level),
                    kind: s.spec.kind.as_str(),
                    budget_ms: Some(ms(s.spec.budget.0)),
                    period_ms: Some(ms(s.spec.period.0)),
                    consumed_ns: s.consumed_ns,
                    replenishments: s.replenishments,
                    exhaustions: s.exhaustions,
                    cpu: cpus[0],
                    cpus,
                    tasks: (0..self.task_server.len()).filter(|&t| self.task_server[t] == Some(i)).collect(),
                    period_consumed_ns,
                    exhausted_at: s.exhausted_at.clone(),
                    ..ServerSummary::default()
                }
            })
            .collect()
    }
}

impl LevelServer {
    /// Charges `ran_ns`, ending at `now`, that its job ran.
    fn charge(&mut self, ran_ns: u64, now: Nanos) {
        debug_assert!(ran_ns <= self.left_ns, "a server ran past its budget");
        self.consumed_ns += ran_ns;
        let before = self.left_ns;
        self.left_ns = before.saturating_sub(ran_ns);
        if before > 0 && self.left_ns == 0 {
            self.exhaustions += 1;
            if self.exhausted_at.len() < MAX_TRACE_RECORDS {
                self.exhausted_at.push(now);
            }
        }
        // A decision falls on every boundary, so the stretch lies in the period that ends at
        // the next one.
        let period = (self.next_boundary_ns / self.spec.period.0).saturating_sub(1) as usize;
        if period < MAX_TRACE_RECORDS {
            if self.period_consumed_ns.len() <= period {
                self.period_consumed_ns.resize(period + 1, 0);
            }
            self.period_consumed_ns[period] += ran_ns;
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
        if let Some(i) = self.task_server[job.task] {
            // It stands in its level's queue once it is the server's most urgent (next decision).
            self.server_job.insert(job.key, (i, *job));
            let s = &mut self.servers[i];
            s.jobs.insert(s.order.key(job), job.key);
            return;
        }
        let level = self.task_level[job.task];
        self.level_of_job.insert(job.key, level);
        self.level_add(level, job);
    }
    fn remove(&mut self, key: JobKey) {
        if let Some((i, job)) = self.server_job.take(key) {
            let s = &mut self.servers[i];
            s.jobs.remove(s.order.key(&job), key);
            // At once: the key may be reused by a job released in the same instant.
            if s.queued.is_some_and(|(k, _)| k == key) {
                let level = s.spec.level;
                s.queued = None;
                self.level_remove(level, key);
            }
            return;
        }
        if let Some(level) = self.level_of_job.take(key) {
            self.level_remove(level, key);
        }
    }
    fn choose(&mut self, now: Nanos, current: &[Option<JobKey>], assign: &mut [Option<JobKey>]) {
        if !self.servers.is_empty() {
            self.begin_decision(now);
        }
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
        if !self.free.is_empty() {
            self.level_c.choose_on(&self.free, current, assign);
            self.free.retain(|&cpu| assign[cpu].is_none());
            if !self.free.is_empty() {
                self.level_d.choose_on(&self.free, current, assign);
            }
        }
        if !self.servers.is_empty() {
            self.end_decision(assign);
        }
    }
    fn next_wakeup(&self, now: Nanos) -> Option<Nanos> {
        let table = self.table.as_ref().and_then(|t| t.next_wakeup(now));
        if self.servers.is_empty() {
            return table;
        }
        let boundaries = self.servers.iter().map(|s| s.next_boundary_ns);
        let exhaustions = self.running.iter().flatten().map(|&i| now.0 + self.servers[i].left_ns);
        boundaries.chain(exhaustions).map(Nanos).chain(table).min()
    }
    fn finish(&mut self, now: Nanos, result: &mut SimResult) {
        if self.servers.is_empty() {
            return;
        }
        self.account_until(now);
        result.set_section(Servers(self.summaries()));
    }
}
