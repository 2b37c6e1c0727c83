//! CPU schedulers: a tree of nodes behind one trait.
//!
//! The engine tells the root which jobs are eligible (`add_ready` / `remove`) and asks it,
//! after every batch of same-time events, which job each CPU should run (`choose`). A node
//! never sees time advance on its own except through `next_wakeup`, which time-triggered
//! policies (cyclic tables, budgets and servers) use. A node with children routes each job to
//! one child and delegates `choose` to them over their CPUs ([`NodeSpec`]); a changed
//! effective priority (inheritance) is a `remove` + `add_ready` with a donor.

mod cyclic;
pub mod external;
mod global;
mod hierarchy;
mod levels;
mod partitioned;

pub use cyclic::CyclicScheduler;
pub use global::GlobalScheduler;
pub use hierarchy::{HierarchyScheduler, ServerMemory, ServerSummary, Servers};
pub use levels::{Mc2Node, Mc2ServerSet};
pub use partitioned::PartitionNode;

use crate::model::scheduler::{CyclicTable, Hierarchy, Mc2Server, PriorityOrder, ServerPolicy};
use crate::model::task::{Criticality, TaskSpec};
use crate::result::SimResult;
use crate::scenario::Scenario;
use crate::time::Nanos;

/// Engine-wide handle of a live job (a slot index; reused after the job ends).
pub type JobKey = u32;

/// What a scheduler may know about an eligible job.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReadyJob {
    pub key: JobKey,
    pub task: usize,
    /// Global release sequence number: unique, so it breaks every tie deterministically.
    pub seq: u64,
    pub release: Nanos,
    pub abs_deadline: Nanos,
    /// What the job inherits its priority from, where that is higher than its own.
    pub donor: Option<PriorityInputs>,
}

/// What a job's place in a priority order depends on: its task (fixed priorities) and its
/// absolute deadline (EDF). A job under priority inheritance is ordered by the higher of its
/// own and its donor's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PriorityInputs {
    pub task: usize,
    pub abs_deadline: Nanos,
}

pub trait Scheduler {
    fn name(&self) -> &'static str;
    /// Number of CPUs this scheduler assigns.
    fn cpus(&self) -> usize;
    /// `job` became eligible to run (released at the head of its task, or resumed).
    fn add_ready(&mut self, job: &ReadyJob);
    /// The job is no longer eligible (completed, aborted, or a new priority on its way in).
    fn remove(&mut self, key: JobKey);
    /// The job blocks where the scheduler does not run it: it suspends (I/O), or waits off
    /// the CPU for a lock or a stack. A hierarchy tells the job's servers through their
    /// child-scheduler threads; elsewhere it is [`Scheduler::remove`].
    fn block(&mut self, key: JobKey) {
        self.remove(key);
    }
    /// `job` became eligible at `now` for the first time, released by an activation
    /// ([`crate::Context::activate`], an I/O event thread woken by a packet). A hierarchy with
    /// child-scheduler events makes it eligible at once, with no event to deliver, where it
    /// outranks what runs at every level the two share (HiRes Sec. III-D); elsewhere it is
    /// [`Scheduler::add_ready`].
    fn activate(&mut self, _now: Nanos, job: &ReadyJob) {
        self.add_ready(job);
    }
    /// `job`, which was blocked, was woken at `now` by a subsystem (a lock or a unit handed to
    /// it by the job that runs). A hierarchy with child-scheduler events lets it into its leaf
    /// at once where a job of that same leaf runs on its CPU: the waker invoked the leaf's own
    /// scheduler, and no parent takes part (HiRes Fig. 4(a)); elsewhere it is
    /// [`Scheduler::add_ready`].
    fn wake(&mut self, _now: Nanos, job: &ReadyJob) {
        self.add_ready(job);
    }
    /// Writes into `assign[cpu]` the job each CPU should run from `now` on; `current[cpu]`
    /// is what it runs now. A job may appear at most once.
    fn choose(&mut self, now: Nanos, current: &[Option<JobKey>], assign: &mut [Option<JobKey>]);
    /// The next instant at which `choose` may answer differently without any event.
    fn next_wakeup(&self, _now: Nanos) -> Option<Nanos> {
        None
    }
    /// The run ends at `now`: adds the node's own section (servers' budgets) to the result.
    fn finish(&mut self, _now: Nanos, _result: &mut SimResult) {}
}

/// Priority order of a job in a ready queue: smaller key runs first; `seq` keeps keys unique.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct QueueKey {
    pub primary: u64,
    pub seq: u64,
}

/// How a queue-based scheduler orders jobs.
#[derive(Clone, Debug)]
pub enum JobOrder {
    /// Fixed priority: `ranks[task]`, 0 is the highest.
    FixedPriority { ranks: Vec<u32> },
    /// Earliest absolute deadline first.
    Edf,
}

impl JobOrder {
    #[inline]
    fn primary(&self, p: PriorityInputs) -> u64 {
        match self {
            JobOrder::FixedPriority { ranks } => u64::from(ranks[p.task]),
            JobOrder::Edf => p.abs_deadline.0,
        }
    }

    /// The job's key, with any inherited priority that beats its own.
    #[inline]
    pub fn key(&self, job: &ReadyJob) -> QueueKey {
        let own = self.primary(PriorityInputs { task: job.task, abs_deadline: job.abs_deadline });
        let primary = match job.donor {
            Some(d) => own.min(self.primary(d)),
            None => own,
        };
        QueueKey { primary, seq: job.seq }
    }
}

/// Unique fixed-priority ranks (0 = highest). Ties in the ordering criterion go to the task
/// listed first, so the simulator and the analysis see the same total order.
pub fn priority_ranks(order: PriorityOrder, tasks: &[TaskSpec]) -> Vec<u32> {
    let mut idx: Vec<usize> = (0..tasks.len()).collect();
    match order {
        PriorityOrder::Explicit => idx.sort_by_key(|&i| (tasks[i].priority.unwrap_or(i64::MAX), i)),
        PriorityOrder::RateMonotonic => idx.sort_by_key(|&i| (tasks[i].period, i)),
        PriorityOrder::DeadlineMonotonic => idx.sort_by_key(|&i| (tasks[i].deadline, i)),
    }
    let mut ranks = vec![0u32; tasks.len()];
    for (rank, &i) in idx.iter().enumerate() {
        ranks[i] = rank as u32;
    }
    ranks
}

/// Task → CPU: pinned tasks stay where they are; the rest go, in order of decreasing
/// utilisation, to the least-loaded CPU (worst-fit decreasing; ties to the lower index).
pub fn partition_worst_fit(tasks: &[TaskSpec], cpus: usize) -> Vec<usize> {
    let mut load = vec![0.0f64; cpus];
    let mut out = vec![usize::MAX; tasks.len()];
    for (i, t) in tasks.iter().enumerate() {
        if let Some(c) = t.cpu {
            out[i] = c;
            load[c] += t.utilization();
        }
    }
    let mut free: Vec<usize> = (0..tasks.len()).filter(|&i| tasks[i].cpu.is_none()).collect();
    free.sort_by(|&a, &b| tasks[b].utilization().total_cmp(&tasks[a].utilization()).then(a.cmp(&b)));
    for i in free {
        let (c, _) = load.iter().enumerate().min_by(|(ia, a), (ib, b)| a.total_cmp(b).then(ia.cmp(ib))).expect("cpus >= 1");
        out[i] = c;
        load[c] += tasks[i].utilization();
    }
    out
}

/// The job order a scenario's scheduler uses (cyclic and external schedulers have none).
pub fn job_order(scenario: &Scenario) -> Option<JobOrder> {
    if scenario.scheduler.cyclic_table().is_some() || scenario.scheduler.external().is_some() {
        None
    } else if let Some(order) = scenario.scheduler.priority_order() {
        Some(JobOrder::FixedPriority { ranks: priority_ranks(order, &scenario.tasks) })
    } else {
        Some(JobOrder::Edf)
    }
}

/// The CPU each task runs on under a partitioned scheduler, `None` otherwise.
pub fn partition(scenario: &Scenario) -> Option<Vec<usize>> {
    scenario.scheduler.is_partitioned().then(|| partition_worst_fit(&scenario.tasks, scenario.cpus))
}

/// Where SRP's start check applies: each task's scope (the jobs that share one system
/// ceiling), its preemption level there (smaller is higher), and the order its held-back jobs
/// start in (`None`: release order).
#[derive(Clone, Debug)]
pub struct SrpScopes {
    pub scope: Vec<usize>,
    pub level: Vec<u64>,
    pub order: Vec<Option<JobOrder>>,
}

/// SRP's scopes under a scenario's scheduler: a CPU under a partitioned scheduler; the whole
/// machine under a uniprocessor or global one (a lock that finds its units taken by a job on
/// another CPU waits as under `none`); a leaf server's tasks under servers, by the leaf's
/// policy; under MC²'s levels each core's level-A/B tasks (A above B, B rate-monotonic), level
/// C by deadline, level D in release order, and each server's tasks by its policy; under a
/// cyclic table one scope, every job level.
pub fn srp_scopes(scenario: &Scenario) -> SrpScopes {
    let tasks = &scenario.tasks;
    let n = tasks.len();
    let levels_of = |order: &Option<JobOrder>, t: usize| match order {
        Some(JobOrder::FixedPriority { ranks }) => u64::from(ranks[t]),
        Some(_) => tasks[t].deadline.0,
        None => 0,
    };
    if let Some(h) = &scenario.hierarchy {
        let order: Vec<Option<JobOrder>> =
            (0..n).map(|t| Some(hierarchy::leaf_job_order(h.servers[h.task_server[t]].policy, tasks))).collect();
        let level = (0..n).map(|t| levels_of(&order[t], t)).collect();
        return SrpScopes { scope: h.task_server.clone(), level, order };
    }
    if let Some(levels) = scenario.scheduler.mc2_levels() {
        let rm = priority_ranks(PriorityOrder::RateMonotonic, tasks);
        let cpus = scenario.cpus;
        let ab_ranks: Vec<u32> = (0..n).map(|t| if tasks[t].criticality == Criticality::A { 0 } else { 1 + rm[t] }).collect();
        let mut out = SrpScopes { scope: Vec::with_capacity(n), level: Vec::with_capacity(n), order: Vec::with_capacity(n) };
        for (t, spec) in tasks.iter().enumerate() {
            let (scope, order) = match (levels.task_server[t], spec.criticality, spec.cpu) {
                // A server's tasks, run one at a time by its policy, share a scope of their own.
                (Some(s), _, _) => (cpus + 2 + s, Some(server_job_order(levels.servers[s].policy, tasks))),
                (None, Criticality::A | Criticality::B, Some(cpu)) => (cpu, Some(JobOrder::FixedPriority { ranks: ab_ranks.clone() })),
                (None, Criticality::C, _) | (None, _, None) => (cpus, Some(JobOrder::Edf)),
                (None, Criticality::D, _) => (cpus + 1, None),
            };
            out.level.push(levels_of(&order, t));
            out.scope.push(scope);
            out.order.push(order);
        }
        return out;
    }
    let order = job_order(scenario);
    let scope = partition(scenario).unwrap_or_else(|| vec![0; n]);
    SrpScopes { scope, level: (0..n).map(|t| levels_of(&order, t)).collect(), order: vec![order; n] }
}

/// A node of the scheduler tree, as a scenario describes it.
#[derive(Clone, Debug)]
pub enum NodeSpec {
    /// One ready queue in `order` over `cpus` CPUs: the `cpus` highest-priority eligible jobs
    /// run (uniprocessor FP/EDF, global FP/EDF).
    Queue { name: &'static str, order: JobOrder, cpus: usize },
    /// One uniprocessor queue in `order` per CPU, task `t`'s jobs on CPU `task_cpu[t]`.
    Partition { name: &'static str, order: JobOrder, cpus: usize, task_cpu: Vec<usize> },
    /// A time-triggered table of per-task windows.
    Table { table: CyclicTable, cpus: usize, tasks: usize },
    /// Servers under one root per CPU, the tasks attached to leaf servers.
    Hierarchy { name: &'static str, hierarchy: Hierarchy, tasks: Vec<TaskSpec>, cpus: usize },
    /// MC²'s levels: level A's table, rate-monotonic level B per core (`rm_ranks`, the tasks'
    /// then the servers'), global EDF level C and first-released-first level D on what the
    /// levels above leave, with the servers under levels B–D.
    Levels {
        table: CyclicTable,
        task_level: Vec<Criticality>,
        task_cpu: Vec<Option<usize>>,
        rm_ranks: Vec<u32>,
        servers: Mc2ServerSet,
        cpus: usize,
    },
    /// A scheduler written outside critmem over every CPU ([`external`]).
    External { spec: crate::model::scheduler::ExternalScheduler, tasks: Vec<TaskSpec>, cpus: usize },
}

impl NodeSpec {
    /// The tree a scenario's `[scheduler]` describes: one node, or a partition node of one
    /// uniprocessor queue per CPU.
    pub fn of(scenario: &Scenario) -> NodeSpec {
        let name = scenario.scheduler.name();
        if let Some(hierarchy) = &scenario.hierarchy {
            return NodeSpec::Hierarchy { name, hierarchy: hierarchy.clone(), tasks: scenario.tasks.clone(), cpus: scenario.cpus };
        }
        if let Some(spec) = scenario.scheduler.external() {
            return NodeSpec::External { spec: spec.clone(), tasks: scenario.tasks.clone(), cpus: scenario.cpus };
        }
        if let Some(levels) = scenario.scheduler.mc2_levels() {
            let tasks = &scenario.tasks;
            return NodeSpec::Levels {
                table: levels.table.clone(),
                task_level: tasks.iter().map(|t| t.criticality).collect(),
                task_cpu: tasks.iter().map(|t| t.cpu).collect(),
                rm_ranks: mc2_rm_ranks(tasks, &levels.servers),
                servers: Mc2ServerSet {
                    servers: levels.servers.clone(),
                    orders: levels.servers.iter().map(|s| server_job_order(s.policy, tasks)).collect(),
                    task_server: levels.task_server.clone(),
                },
                cpus: scenario.cpus,
            };
        }
        match (job_order(scenario), partition(scenario)) {
            (None, _) => NodeSpec::Table {
                table: scenario.scheduler.cyclic_table().cloned().expect("validated: cyclic has a table"),
                cpus: scenario.cpus,
                tasks: scenario.tasks.len(),
            },
            (Some(order), Some(task_cpu)) => NodeSpec::Partition { name, order, cpus: scenario.cpus, task_cpu },
            (Some(order), None) => NodeSpec::Queue { name, order, cpus: scenario.cpus },
        }
    }

    /// The node, with its subtree built.
    pub fn build(self) -> Box<dyn Scheduler> {
        match self {
            NodeSpec::Queue { name, order, cpus } => Box::new(GlobalScheduler::new(name, order, cpus)),
            NodeSpec::Partition { name, order, cpus, task_cpu } => Box::new(PartitionNode::new(name, &order, cpus, task_cpu)),
            NodeSpec::Table { table, cpus, tasks } => Box::new(CyclicScheduler::new(table, cpus, tasks)),
            NodeSpec::Hierarchy { name, hierarchy, tasks, cpus } => Box::new(HierarchyScheduler::new(name, &hierarchy, &tasks, cpus)),
            NodeSpec::Levels { table, task_level, task_cpu, rm_ranks, servers, cpus } => {
                Box::new(Mc2Node::new(table, task_level, &task_cpu, rm_ranks, servers, cpus))
            }
            NodeSpec::External { spec, tasks, cpus } => external::build(&spec.name, &spec.config, &tasks, cpus),
        }
    }
}

/// Rate-monotonic ranks of MC²'s tasks and then its servers (server `s` is entry
/// `tasks.len() + s`), by period; ties go to tasks, then to the one listed first. Without
/// servers they are the tasks' rate-monotonic ranks.
fn mc2_rm_ranks(tasks: &[TaskSpec], servers: &[Mc2Server]) -> Vec<u32> {
    let periods: Vec<(Nanos, usize)> = tasks.iter().map(|t| t.period).chain(servers.iter().map(|s| s.period)).zip(0..).collect();
    let mut idx: Vec<usize> = (0..periods.len()).collect();
    idx.sort_by_key(|&i| periods[i]);
    let mut ranks = vec![0u32; idx.len()];
    for (rank, &i) in idx.iter().enumerate() {
        ranks[i] = rank as u32;
    }
    ranks
}

/// How a server under MC²'s levels orders its tasks' jobs (fixed ranks are global, so their
/// order within a server is the one the task set would have).
fn server_job_order(policy: ServerPolicy, tasks: &[TaskSpec]) -> JobOrder {
    let ranks = |order| JobOrder::FixedPriority { ranks: priority_ranks(order, tasks) };
    match policy {
        ServerPolicy::Fp => ranks(PriorityOrder::Explicit),
        ServerPolicy::Rm => ranks(PriorityOrder::RateMonotonic),
        ServerPolicy::Dm => ranks(PriorityOrder::DeadlineMonotonic),
        _ => JobOrder::Edf,
    }
}

/// Builds the scheduler tree a scenario asks for.
pub fn build(scenario: &Scenario) -> Box<dyn Scheduler> {
    NodeSpec::of(scenario).build()
}

/// A ready queue: eligible jobs in (key, job) order, as a `BTreeSet` of the same pairs would
/// hold them. A sorted `Vec`: only a task's oldest unfinished job is ever eligible, so a queue
/// holds at most one job per task and is searched and shifted in place, with none of a
/// B-tree's node handling on every suspend and resume. Kept in descending order, the job that
/// runs first last: the jobs that come and go most (the running job ending, a higher-priority
/// job arriving to preempt it) are at the end, where adding and removing shifts little.
#[derive(Clone, Debug, Default)]
pub(crate) struct ReadyQueue {
    /// Descending; `jobs.last()` runs first.
    jobs: Vec<(QueueKey, JobKey)>,
}

impl ReadyQueue {
    #[inline]
    fn search(&self, x: &(QueueKey, JobKey)) -> Result<usize, usize> {
        self.jobs.binary_search_by(|probe| x.cmp(probe))
    }
    /// Adds `(key, job)`; no-op if it is already there.
    #[inline]
    pub(crate) fn insert(&mut self, key: QueueKey, job: JobKey) {
        let x = (key, job);
        if let Err(at) = self.search(&x) {
            self.jobs.insert(at, x);
        }
    }
    /// Removes `(key, job)` if it is there.
    #[inline]
    pub(crate) fn remove(&mut self, key: QueueKey, job: JobKey) {
        let x = (key, job);
        // Most often the job that runs first: no search, no shift.
        if self.jobs.last() == Some(&x) {
            self.jobs.pop();
        } else if let Ok(at) = self.search(&x) {
            self.jobs.remove(at);
        }
    }
    /// The job that runs first.
    #[inline]
    pub(crate) fn first(&self) -> Option<JobKey> {
        self.jobs.last().map(|&(_, j)| j)
    }
    /// The first `n` entries (fewer if fewer are queued), in reverse run order: the job that
    /// runs first is the last entry.
    #[inline]
    pub(crate) fn first_n_reversed(&self, n: usize) -> &[(QueueKey, JobKey)] {
        &self.jobs[self.jobs.len().saturating_sub(n)..]
    }
    /// The jobs in run order.
    #[inline]
    pub(crate) fn iter(&self) -> impl Iterator<Item = JobKey> + '_ {
        self.jobs.iter().rev().map(|&(_, j)| j)
    }
}

/// Maps a dense job key to per-job data; grows on demand (keys are small, reused slots).
#[derive(Debug)]
pub(crate) struct KeyMap<V: Copy> {
    slots: Vec<Option<V>>,
}

impl<V: Copy> Default for KeyMap<V> {
    fn default() -> Self {
        KeyMap { slots: Vec::new() }
    }
}

impl<V: Copy> KeyMap<V> {
    #[inline]
    pub(crate) fn insert(&mut self, key: JobKey, v: V) {
        let k = key as usize;
        if k >= self.slots.len() {
            self.slots.resize(k + 1, None);
        }
        self.slots[k] = Some(v);
    }
    #[inline]
    pub(crate) fn get(&self, key: JobKey) -> Option<V> {
        self.slots.get(key as usize).copied().flatten()
    }
    #[inline]
    pub(crate) fn take(&mut self, key: JobKey) -> Option<V> {
        self.slots.get_mut(key as usize).and_then(Option::take)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::task::{Arrival, Criticality, ExecTime, OverrunPolicy};

    fn task(c: u64, t: u64) -> TaskSpec {
        TaskSpec {
            name: format!("t{c}_{t}"),
            arrival: Arrival::Periodic,
            exec: ExecTime::Fixed(Nanos(c)),
            period: Nanos(t),
            deadline: Nanos(t),
            offset: Nanos::ZERO,
            stop: None,
            priority: None,
            criticality: Criticality::C,
            cpu: None,
            overrun: OverrunPolicy::Continue,
            suspensions: vec![],
            memory: None,
            command: None,
            program: None,
        }
    }

    #[test]
    fn rate_monotonic_ranks_break_ties_by_listing_order() {
        let ts = [task(1, 9), task(1, 4), task(1, 9), task(1, 5)];
        assert_eq!(priority_ranks(PriorityOrder::RateMonotonic, &ts), vec![2, 0, 3, 1]);
    }

    #[test]
    fn worst_fit_spreads_load() {
        let ts = [task(5, 10), task(4, 10), task(3, 10), task(2, 10)];
        // 0.5 -> cpu0, 0.4 -> cpu1, 0.3 -> cpu1 (0.4 < 0.5), 0.2 -> cpu0 (0.5 < 0.7)
        assert_eq!(partition_worst_fit(&ts, 2), vec![0, 1, 1, 0]);
    }

    proptest::proptest! {
        /// The sorted-Vec ready queue holds and orders what a `BTreeSet` of the same pairs would,
        /// through any mix of inserts (repeats included) and removals (absent ones included).
        #[test]
        fn ready_queue_matches_a_btree_set(ops in proptest::collection::vec((proptest::bool::ANY, 0u64..6, 0u64..6, 0u32..6), 0..200)) {
            let mut queue = ReadyQueue::default();
            let mut model = std::collections::BTreeSet::new();
            for (insert, primary, seq, job) in ops {
                let key = QueueKey { primary, seq };
                if insert {
                    queue.insert(key, job);
                    model.insert((key, job));
                } else {
                    queue.remove(key, job);
                    model.remove(&(key, job));
                }
                proptest::prop_assert_eq!(queue.iter().collect::<Vec<_>>(), model.iter().map(|&(_, j)| j).collect::<Vec<_>>());
                proptest::prop_assert_eq!(queue.first(), model.first().map(|&(_, j)| j));
            }
        }
    }
}
