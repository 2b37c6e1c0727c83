//! Servers whose policy schedules tasks over CPUs of their own: gedf, gfp, pedf, pfp, cyclic.
//!
//! Such a server sits directly under the root of every CPU it spans, so one server can be a
//! level of several CPUs' hierarchies at once (MC²'s level C is global EDF over what levels A
//! and B leave). With one declared, a decision sweeps the top-level servers in their static
//! order, of which each CPU's own order is a part: a server on one CPU takes that CPU if it is
//! still free and something below it is eligible; a task-policy server fills what its policy
//! picks among its CPUs still free. Each CPU therefore goes to the first server in its own
//! order with work for it, and a higher server takes a CPU back at the next decision.

use super::super::{priority_ranks, CyclicScheduler, GlobalScheduler, JobKey, JobOrder, PartitionNode, QueueKey, ReadyJob, Scheduler};
use super::{HierarchyScheduler, ServerPolicy, ServerSpec};
use crate::model::task::TaskSpec;
use crate::scenario::PriorityOrder;
use crate::time::Nanos;

/// A task-policy server's own scheduler.
pub(super) enum TaskPolicy {
    /// gedf and gfp: one queue over the server's CPUs.
    Global(GlobalScheduler),
    /// pedf, pfp and cyclic: each CPU's pick is its own, refreshed at every decision.
    PerCpu { sched: Box<dyn Scheduler>, picks: Vec<Option<JobKey>> },
}

impl TaskPolicy {
    /// The scheduler of `spec` (a task policy) over the machine's `cpus`.
    pub(super) fn new(name: &'static str, spec: &ServerSpec, tasks: &[TaskSpec], cpus: usize) -> Self {
        let ranks = || JobOrder::FixedPriority { ranks: priority_ranks(spec.priorities.unwrap_or(PriorityOrder::Explicit), tasks) };
        let per_cpu = |order: JobOrder| {
            let mut task_child = vec![0; tasks.len()];
            for &(t, cpu) in &spec.task_cpus {
                task_child[t] = cpu;
            }
            Box::new(PartitionNode::new(name, &order, cpus, task_child)) as Box<dyn Scheduler>
        };
        let sched = match spec.policy {
            ServerPolicy::Gedf => return TaskPolicy::Global(GlobalScheduler::new(name, JobOrder::Edf, cpus)),
            ServerPolicy::Gfp => return TaskPolicy::Global(GlobalScheduler::new(name, ranks(), cpus)),
            ServerPolicy::Pedf => per_cpu(JobOrder::Edf),
            ServerPolicy::Pfp => per_cpu(ranks()),
            ServerPolicy::Cyclic => {
                Box::new(CyclicScheduler::new(spec.table.clone().expect("validated: a cyclic server has a table"), cpus, tasks.len()))
            }
            // It sees the server's CPUs as its own, numbered from 0.
            ServerPolicy::External => {
                let e = spec.external.as_ref().expect("validated: an external policy names its scheduler");
                let inner = super::super::external::build(&e.name, &e.config, tasks, spec.cpus.len());
                Box::new(super::super::external::CpuSubset::new(inner, spec.cpus.clone()))
            }
            ServerPolicy::Fp | ServerPolicy::Rm | ServerPolicy::Dm | ServerPolicy::Edf => {
                unreachable!("only task policies have their own scheduler")
            }
        };
        TaskPolicy::PerCpu { sched, picks: vec![None; cpus] }
    }

    fn sched(&mut self) -> &mut dyn Scheduler {
        match self {
            TaskPolicy::Global(g) => g,
            TaskPolicy::PerCpu { sched, .. } => sched.as_mut(),
        }
    }

    /// Whether it has a job to run now (per-CPU picks as of the last refresh).
    fn has_work(&self) -> bool {
        match self {
            TaskPolicy::Global(g) => g.has_jobs(),
            TaskPolicy::PerCpu { picks, .. } => picks.iter().any(Option::is_some),
        }
    }
}

impl HierarchyScheduler {
    /// `job` enters its task-policy server, if its leaf is one; whether it did.
    pub(super) fn add_to_task_policy(&mut self, job: &ReadyJob, leaf: usize) -> bool {
        match self.nodes[leaf].task_policy.as_mut() {
            Some(p) => {
                p.sched().add_ready(job);
                self.leaf_of_job.insert(job.key, (leaf, QueueKey { primary: 0, seq: job.seq }));
                true
            }
            None => false,
        }
    }

    /// The job leaves its task-policy server, if its leaf is one; whether it did.
    pub(super) fn remove_from_task_policy(&mut self, key: JobKey, leaf: usize) -> bool {
        match self.nodes[leaf].task_policy.as_mut() {
            Some(p) => {
                p.sched().remove(key);
                true
            }
            None => false,
        }
    }

    /// Whether task-policy server `i` has work, with its per-CPU picks refreshed for `now`.
    pub(super) fn task_policy_work(&mut self, i: usize, now: Nanos, current: &[Option<JobKey>]) -> bool {
        let policy = self.nodes[i].task_policy.as_mut().expect("a task-policy server");
        if let TaskPolicy::PerCpu { sched, picks } = policy {
            sched.choose(now, current, picks);
        }
        policy.has_work()
    }

    /// The earliest instant a task-policy server's own schedule changes (a table boundary).
    pub(super) fn task_policy_wakeup(&self, now: Nanos) -> Option<Nanos> {
        self.task_policy_servers
            .iter()
            .filter_map(|&i| match &self.nodes[i].task_policy {
                Some(TaskPolicy::PerCpu { sched, .. }) => sched.next_wakeup(now),
                _ => None,
            })
            .min()
    }

    /// A gedf or gfp server over child servers: of its CPUs still free, one each goes to its
    /// best eligible children (earliest period end, or priority); a child keeps the CPU it
    /// ran on where that is free, the others take the rest in ascending order.
    fn run_children_globally(&mut self, top: usize, assign: &mut [Option<JobKey>]) {
        self.free.clear();
        self.free.extend(self.nodes[top].cpus.iter().copied().filter(|&cpu| assign[cpu].is_none()));
        let mut kids = std::mem::take(&mut self.kids);
        kids.clear();
        kids.extend(self.nodes[top].children.iter().copied().filter(|&c| self.eligible[c]));
        if self.nodes[top].policy == ServerPolicy::Gedf {
            kids.sort_by_key(|&c| (self.nodes[c].next_boundary_ns, c));
        }
        kids.truncate(self.free.len());
        let mut placed = vec![false; kids.len()];
        for (k, &child) in kids.iter().enumerate() {
            if let Some(cpu) = self.nodes[child].last_cpu.filter(|&c| self.free.contains(&c) && assign[c].is_none()) {
                self.run_subtree(child, cpu, assign);
                placed[k] = true;
            }
        }
        let mut at = 0;
        for (k, &child) in kids.iter().enumerate() {
            if placed[k] {
                continue;
            }
            while assign[self.free[at]].is_some() {
                at += 1;
            }
            self.run_subtree(child, self.free[at], assign);
        }
        self.kids = kids;
    }

    /// Runs eligible server `child`'s best job on `cpu`.
    fn run_subtree(&mut self, child: usize, cpu: usize, assign: &mut [Option<JobKey>]) {
        let mut leaf = child;
        while let Some(c) = self.best_child(leaf) {
            leaf = c;
        }
        assign[cpu] = self.nodes[leaf].jobs.first();
        self.running[cpu] = Some(leaf);
        self.nodes[child].last_cpu = Some(cpu);
    }

    /// Bottom up, which nodes have work below them (`idle`) and may run it (`eligible`:
    /// with budget left), task-policy servers' per-CPU picks refreshed for `now`.
    pub(super) fn mark_eligible(&mut self, now: Nanos, current: &[Option<JobKey>]) {
        for at in 0..self.bottom_up.len() {
            let i = self.bottom_up[at];
            let work = if self.nodes[i].task_policy.is_some() {
                self.task_policy_work(i, now, current)
            } else if self.nodes[i].children.is_empty() {
                self.nodes[i].jobs.first().is_some()
            } else {
                self.inner_work(i)
            };
            let node = &self.nodes[i];
            self.idle[i] = !work;
            self.eligible[i] = work && (!node.budgeted() || node.left_ns > 0);
        }
    }

    /// [`super::super::Scheduler::choose`] with task-policy servers: the sweep of the
    /// top-level servers in static order.
    pub(super) fn choose_sweep(&mut self, now: Nanos, current: &[Option<JobKey>], assign: &mut [Option<JobKey>]) {
        self.begin_decision(now);
        self.mark_eligible(now, current);
        assign.fill(None);
        self.running.fill(None);
        for at in 0..self.top_order.len() {
            let top = self.top_order[at];
            if !self.eligible[top] {
                continue;
            }
            if self.nodes[top].over_servers {
                self.run_children_globally(top, assign);
                continue;
            }
            let node = &mut self.nodes[top];
            match node.task_policy.as_mut() {
                None => {
                    let cpu = node.cpus[0];
                    if assign[cpu].is_some() {
                        continue;
                    }
                    let mut leaf = top;
                    while let Some(c) = self.best_child(leaf) {
                        leaf = c;
                    }
                    assign[cpu] = self.nodes[leaf].jobs.first();
                    self.running[cpu] = Some(leaf);
                }
                Some(TaskPolicy::Global(g)) => {
                    self.free.clear();
                    self.free.extend(node.cpus.iter().copied().filter(|&cpu| assign[cpu].is_none()));
                    if self.free.is_empty() {
                        continue;
                    }
                    g.choose_on(&self.free, current, assign);
                    for &cpu in &self.free {
                        if assign[cpu].is_some() {
                            self.running[cpu] = Some(top);
                        }
                    }
                }
                Some(TaskPolicy::PerCpu { picks, .. }) => {
                    for &cpu in &node.cpus {
                        if assign[cpu].is_none() && picks[cpu].is_some() {
                            assign[cpu] = picks[cpu];
                            self.running[cpu] = Some(top);
                        }
                    }
                }
            }
        }
    }
}
