//! A scheduler hierarchy per CPU: a root policy over servers, each server a policy over its
//! child servers or over the jobs of the tasks attached to it.
//!
//! A server sits in its parent's order like a job and is eligible while it has budget (a
//! level always has) and something below it is eligible; the parent delegates the CPU to its
//! best eligible child. Budgets are charged to the nanosecond: every `choose` first charges the
//! time since the previous call to each budgeted server above the job that ran (the engine
//! calls `choose` at every instant a job can stop, so that job ran the whole stretch), and
//! `next_wakeup` asks for a decision where a running server's budget runs out and at every
//! replenishment.
//!
//! With a cost per delivered event (`event_cost_us`), each server also has a child-scheduler
//! thread through which alone it learns that a job below it became eligible ([`events`]),
//! but for an activated event thread that outranks what runs ([`activation`]).

mod activation;
mod events;
mod leaves;

use super::{priority_ranks, JobKey, JobOrder, KeyMap, QueueKey, ReadyJob, ReadyQueue, Scheduler};
use crate::model::scheduler::PriorityOrder;
use crate::model::scheduler::{Hierarchy, ServerKind, ServerPolicy, ServerSpec};
use crate::model::task::TaskSpec;
use crate::result::{JsonFields, Section, SimResult};
use crate::time::Nanos;
use crate::MAX_TRACE_RECORDS;
use serde::Serialize;

/// The order of jobs under a leaf with policy `policy`; fixed ranks are global, so their
/// order within a leaf is the one the flat scheduler would use.
pub(crate) fn leaf_job_order(policy: ServerPolicy, tasks: &[TaskSpec]) -> JobOrder {
    let ranks = |order| JobOrder::FixedPriority { ranks: priority_ranks(order, tasks) };
    match policy {
        ServerPolicy::Fp => ranks(PriorityOrder::Explicit),
        ServerPolicy::Rm => ranks(PriorityOrder::RateMonotonic),
        ServerPolicy::Dm => ranks(PriorityOrder::DeadlineMonotonic),
        ServerPolicy::Edf | ServerPolicy::Gedf | ServerPolicy::Pedf | ServerPolicy::Cyclic | ServerPolicy::External => JobOrder::Edf,
        // Their ranks come from the server's own `priorities` ([`leaves`]).
        ServerPolicy::Gfp | ServerPolicy::Pfp => ranks(PriorityOrder::Explicit),
    }
}

struct Node {
    parent: Option<usize>,
    /// `None` for a CPU's root.
    kind: Option<ServerKind>,
    budget_ns: u64,
    period_ns: u64,
    left_ns: u64,
    /// Start of the next period (the first replenishment is at 0).
    next_boundary_ns: u64,
    /// Child servers, in static order (priority, or period) unless `policy` is EDF.
    children: Vec<usize>,
    policy: ServerPolicy,
    /// Eligible jobs of the tasks attached here (leaves only).
    jobs: ReadyQueue,
    order: JobOrder,
    consumed_ns: u64,
    replenishments: u64,
    exhaustions: u64,
    /// CPU time its child-scheduler thread takes per delivered event.
    cost_ns: u64,
    events_delivered: u64,
    /// CPU time its child-scheduler thread spent delivering.
    event_ns: u64,
    /// Jobs of its tasks an activation made eligible with no event to deliver.
    direct_activations: u64,
    /// What it consumed in each of its periods (budgeted servers), up to the trace cap.
    period_consumed_ns: Vec<u64>,
    /// When its budget ran out, up to the trace cap.
    exhausted_at: Vec<Nanos>,
    /// Stretches its child-scheduler thread ran, up to the trace cap.
    event_segments: Vec<(Nanos, Nanos)>,
    /// A task-policy server's own scheduler.
    task_policy: Option<leaves::TaskPolicy>,
    /// A cyclic server's table of windows for its child servers.
    windows: Option<crate::scenario::CyclicTable>,
    /// A gedf or gfp server over child servers on its CPUs.
    over_servers: bool,
    /// The CPU it ran on at the last decision (a child of a server over several CPUs).
    last_cpu: Option<usize>,
    /// The CPUs it runs on (a root's: its own).
    cpus: Vec<usize>,
}

impl Node {
    fn budgeted(&self) -> bool {
        matches!(self.kind, Some(ServerKind::Deferrable | ServerKind::Polling))
    }
}

/// The hierarchy of every CPU as one scheduler: nodes `0..servers` are the servers in file
/// order, then one root per CPU.
pub struct HierarchyScheduler {
    name: &'static str,
    nodes: Vec<Node>,
    names: Vec<String>,
    /// Every node, children before parents.
    bottom_up: Vec<usize>,
    roots: Vec<usize>,
    task_leaf: Vec<usize>,
    leaf_of_job: KeyMap<(usize, QueueKey)>,
    /// The leaf whose job each CPU was given at the last `choose`.
    running: Vec<Option<usize>>,
    /// With event delivery, the job each CPU was given at the last `choose` and its key.
    assigned: Vec<Option<(JobKey, QueueKey)>>,
    last_choose: Nanos,
    /// Child-scheduler event delivery, when some server has a cost per event; without it a
    /// server sees every job below it become eligible at once.
    delivery: Option<Box<events::Delivery>>,
    eligible: Vec<bool>,
    /// Nodes with nothing eligible below them at the last `choose`.
    idle: Vec<bool>,
    /// Servers with a task policy; with any, decisions sweep `top_order`.
    task_policy_servers: Vec<usize>,
    /// Every top-level server, in its root's static order (ties to the one listed first).
    top_order: Vec<usize>,
    /// Scratch: a global task-policy server's CPUs still free.
    free: Vec<usize>,
    /// Whether decisions sweep `top_order` (some server has a task policy or is over
    /// child servers on several CPUs).
    sweep: bool,
    /// Scratch: the children a server over several CPUs runs.
    kids: Vec<usize>,
}

impl HierarchyScheduler {
    pub fn new(name: &'static str, hierarchy: &Hierarchy, tasks: &[TaskSpec], cpus: usize) -> Self {
        let n = hierarchy.servers.len();
        let mut nodes: Vec<Node> = hierarchy
            .servers
            .iter()
            .map(|s| Node {
                parent: Some(s.parent.unwrap_or(n + s.cpus.first().copied().unwrap_or(s.cpu))),
                kind: Some(s.kind),
                budget_ns: s.budget.0,
                period_ns: s.period.0,
                left_ns: 0,
                next_boundary_ns: 0,
                children: Vec::new(),
                policy: s.policy,
                jobs: ReadyQueue::default(),
                order: leaf_job_order(s.policy, tasks),
                consumed_ns: 0,
                replenishments: 0,
                exhaustions: 0,
                cost_ns: s.event_cost.0,
                events_delivered: 0,
                event_ns: 0,
                direct_activations: 0,
                period_consumed_ns: Vec::new(),
                exhausted_at: Vec::new(),
                event_segments: Vec::new(),
                task_policy: s.has_task_policy().then(|| leaves::TaskPolicy::new(name, s, tasks, cpus)),
                windows: s.table.clone().filter(|_| s.windows),
                over_servers: s.over_servers,
                last_cpu: None,
                cpus: if s.cpus.is_empty() { vec![s.cpu] } else { s.cpus.clone() },
            })
            .collect();
        for cpu in 0..cpus {
            nodes.push(Node {
                parent: None,
                kind: None,
                budget_ns: 0,
                period_ns: 0,
                left_ns: 0,
                next_boundary_ns: 0,
                children: Vec::new(),
                policy: hierarchy.root_policy,
                jobs: ReadyQueue::default(),
                order: JobOrder::Edf,
                consumed_ns: 0,
                replenishments: 0,
                exhaustions: 0,
                cost_ns: 0,
                events_delivered: 0,
                event_ns: 0,
                direct_activations: 0,
                period_consumed_ns: Vec::new(),
                exhausted_at: Vec::new(),
                event_segments: Vec::new(),
                task_policy: None,
                windows: None,
                over_servers: false,
                last_cpu: None,
                cpus: vec![cpu],
            });
        }
        for i in 0..n {
            match hierarchy.servers[i].parent {
                // A top-level server is a child of the root of every CPU it runs on.
                None => {
                    for c in nodes[i].cpus.clone() {
                        nodes[n + c].children.push(i);
                    }
                }
                Some(p) => nodes[p].children.push(i),
            }
        }
        // Static sibling order; ties go to the server listed first.
        let static_order = |policy: ServerPolicy, kids: &mut Vec<usize>| match policy {
            ServerPolicy::Fp | ServerPolicy::Gfp => kids.sort_by_key(|&c| (hierarchy.servers[c].priority.unwrap_or(i64::MAX), c)),
            ServerPolicy::Rm | ServerPolicy::Dm => kids.sort_by_key(|&c| (hierarchy.servers[c].period, c)),
            _ => {}
        };
        for node in &mut nodes {
            static_order(node.policy, &mut node.children);
        }
        let mut top_order: Vec<usize> = (0..n).filter(|&i| hierarchy.servers[i].parent.is_none()).collect();
        static_order(hierarchy.root_policy, &mut top_order);
        // Breadth-first from the roots, reversed: every child comes before its parent (a
        // server under several roots is listed once).
        let mut top_down: Vec<usize> = (n..n + cpus).collect();
        let mut seen = vec![false; nodes.len()];
        let mut at = 0;
        while at < top_down.len() {
            for &c in &nodes[top_down[at]].children {
                if !std::mem::replace(&mut seen[c], true) {
                    top_down.push(c);
                }
            }
            at += 1;
        }
        top_down.reverse();
        let delivery =
            nodes.iter().any(|n| n.cost_ns > 0).then(|| Box::new(events::Delivery::new(nodes.len(), cpus, hierarchy.pending_event_check)));
        HierarchyScheduler {
            delivery,
            name,
            eligible: vec![false; nodes.len()],
            idle: vec![false; nodes.len()],
            nodes,
            names: hierarchy.servers.iter().map(|s| s.name.clone()).collect(),
            bottom_up: top_down,
            roots: (n..n + cpus).collect(),
            task_leaf: hierarchy.task_server.clone(),
            leaf_of_job: KeyMap::default(),
            running: vec![None; cpus],
            assigned: vec![None; cpus],
            last_choose: Nanos::ZERO,
            task_policy_servers: (0..n).filter(|&i| hierarchy.servers[i].has_task_policy()).collect(),
            sweep: hierarchy.servers.iter().any(|s| s.has_task_policy() || s.over_servers),
            kids: Vec::new(),
            top_order,
            free: Vec::with_capacity(cpus),
        }
    }

    /// Charges `ran_ns`, ending at `now`, to `from` (a leaf whose job ran, or a server whose
    /// child-scheduler thread ran) and every server above it.
    fn charge(&mut self, from: usize, ran_ns: u64, now: Nanos) {
        let mut at = Some(from);
        while let Some(i) = at {
            let node = &mut self.nodes[i];
            if node.kind.is_some() {
                node.consumed_ns += ran_ns;
            }
            if node.budgeted() {
                debug_assert!(ran_ns <= node.left_ns, "a server ran past its budget");
                let before = node.left_ns;
                node.left_ns = before.saturating_sub(ran_ns);
                if before > 0 && node.left_ns == 0 {
                    node.exhaustions += 1;
                    if node.exhausted_at.len() < MAX_TRACE_RECORDS {
                        node.exhausted_at.push(now);
                    }
                }
                // A decision falls on every boundary, so the stretch lies in the period that
                // ends at the next one.
                let period = (node.next_boundary_ns / node.period_ns).saturating_sub(1) as usize;
                if period < MAX_TRACE_RECORDS {
                    if node.period_consumed_ns.len() <= period {
                        node.period_consumed_ns.resize(period + 1, 0);
                    }
                    node.period_consumed_ns[period] += ran_ns;
                }
            }
            at = node.parent;
        }
    }

    /// Charges the time since the last decision to the servers whose jobs ran through it.
    fn account_until(&mut self, now: Nanos) {
        let ran_ns = (now - self.last_choose).0;
        self.last_choose = now;
        if ran_ns == 0 {
            return;
        }
        for cpu in 0..self.running.len() {
            if let Some(node) = self.running[cpu] {
                self.charge(node, ran_ns, now);
                if self.delivery.is_some() {
                    self.advance_delivery(cpu, node, ran_ns, now);
                }
            }
        }
    }

    /// The highest-priority eligible child of `p`.
    fn best_child(&self, p: usize) -> Option<usize> {
        let children = &self.nodes[p].children;
        if let Some(table) = &self.nodes[p].windows {
            // The child whose window is open now (`last_choose` is the decision's instant).
            let pos = self.last_choose.0 % table.major_frame.0;
            let open = table.slots.iter().find(|s| s.start.0 <= pos && pos < s.start.0 + s.duration.0)?;
            return self.eligible[open.task].then_some(open.task);
        }
        match self.nodes[p].policy {
            ServerPolicy::Edf => {
                children.iter().copied().filter(|&c| self.eligible[c]).min_by_key(|&c| (self.nodes[c].next_boundary_ns, c))
            }
            _ => children.iter().copied().find(|&c| self.eligible[c]),
        }
    }

    /// Whether inner node `i` has an eligible child it may run now.
    fn inner_work(&self, i: usize) -> bool {
        if self.nodes[i].windows.is_some() {
            self.best_child(i).is_some()
        } else {
            self.nodes[i].children.iter().any(|&c| self.eligible[c])
        }
    }

    /// The next instant a window of some cyclic server opens or closes.
    fn next_window_edge(&self, now: Nanos) -> Option<u64> {
        self.nodes
            .iter()
            .filter_map(|n| n.windows.as_ref())
            .flat_map(|t| {
                let frame = t.major_frame.0;
                let (base, pos) = (now.0 / frame * frame, now.0 % frame);
                t.slots.iter().flat_map(move |s| [s.start.0, s.start.0 + s.duration.0]).map(move |edge| {
                    if edge > pos {
                        base + edge
                    } else {
                        base + frame + edge
                    }
                })
            })
            .min()
    }

    /// What every decision starts with: polling servers idle since the last one lose their
    /// budget, the time since then is charged, and budgets due are replenished.
    fn begin_decision(&mut self, now: Nanos) {
        // A polling server idle after every event of an instant gives up the rest of its
        // period's budget; it is judged once time moves on, so work arriving later in the
        // same instant (a release at the boundary) still finds the budget.
        if now > self.last_choose {
            for (node, &idle) in self.nodes.iter_mut().zip(&self.idle) {
                if idle && node.kind == Some(ServerKind::Polling) {
                    node.left_ns = 0;
                }
            }
        }
        self.account_until(now);
        for (i, node) in self.nodes.iter_mut().enumerate().filter(|(_, n)| n.budgeted() && n.next_boundary_ns <= now.0) {
            node.replenishments += (now.0 - node.next_boundary_ns) / node.period_ns + 1;
            node.next_boundary_ns = (now.0 / node.period_ns + 1) * node.period_ns;
            node.left_ns = node.budget_ns;
            if let Some(d) = self.delivery.as_mut() {
                d.replenished(i);
            }
        }
    }

    /// The CPU whose root `i` is under.
    fn cpu_of(&self, mut i: usize) -> usize {
        while let Some(p) = self.nodes[i].parent {
            i = p;
        }
        i - self.names.len()
    }

    /// Each server's state at the end of the run: name, parent, budget, and what it did.
    pub fn summaries(&self) -> Vec<ServerSummary> {
        let ms = |ns: u64| ns as f64 / 1e6;
        self.names
            .iter()
            .enumerate()
            .map(|(i, name)| {
                let node = &self.nodes[i];
                let parent = node.parent.expect("a server has a parent");
                let mut period_consumed_ns = node.period_consumed_ns.clone();
                if node.budgeted() {
                    period_consumed_ns.resize((node.replenishments as usize).min(MAX_TRACE_RECORDS), 0);
                }
                ServerSummary {
                    name: name.clone(),
                    parent: if parent < self.names.len() { self.names[parent].clone() } else { "root".to_string() },
                    kind: node.kind.expect("a server has a kind").as_str(),
                    budget_ms: node.budgeted().then(|| ms(node.budget_ns)),
                    period_ms: node.budgeted().then(|| ms(node.period_ns)),
                    consumed_ns: node.consumed_ns,
                    replenishments: node.replenishments,
                    exhaustions: node.exhaustions,
                    cpu: self.cpu_of(i),
                    cpus: if node.task_policy.is_some() { node.cpus.clone() } else { vec![self.cpu_of(i)] },
                    tasks: (0..self.task_leaf.len()).filter(|&t| self.task_leaf[t] == i).collect(),
                    events_delivered: node.events_delivered,
                    event_ns: node.event_ns,
                    direct_activations: node.direct_activations,
                    period_consumed_ns,
                    exhausted_at: node.exhausted_at.clone(),
                    event_segments: node.event_segments.clone(),
                    memory: None,
                }
            })
            .collect()
    }
}

impl Scheduler for HierarchyScheduler {
    fn name(&self) -> &'static str {
        self.name
    }
    fn cpus(&self) -> usize {
        self.running.len()
    }
    fn add_ready(&mut self, job: &ReadyJob) {
        let leaf = self.task_leaf[job.task];
        if self.add_to_task_policy(job, leaf) {
            return;
        }
        let key = self.nodes[leaf].order.key(job);
        self.leaf_of_job.insert(job.key, (leaf, key));
        if let Some(d) = self.delivery.as_mut() {
            if !d.arrive(job, leaf) {
                return;
            }
        }
        self.nodes[leaf].jobs.insert(key, job.key);
    }
    fn remove(&mut self, key: JobKey) {
        if let Some((leaf, k)) = self.leaf_of_job.take(key) {
            if self.remove_from_task_policy(key, leaf) {
                return;
            }
            if let Some(d) = self.delivery.as_mut() {
                let known = self.nodes[leaf].jobs.iter().any(|j| j == key);
                d.stopped(key, k.seq, known);
            }
            self.nodes[leaf].jobs.remove(k, key);
        }
    }
    fn activate(&mut self, now: Nanos, job: &ReadyJob) {
        if !self.activate_at_once(now, job) {
            self.add_ready(job);
        }
    }
    fn wake(&mut self, _now: Nanos, job: &ReadyJob) {
        if !self.wake_in_running_leaf(job) {
            self.add_ready(job);
        }
    }
    fn block(&mut self, key: JobKey) {
        let known = self.leaf_of_job.get(key).filter(|&(leaf, _)| self.nodes[leaf].jobs.iter().any(|j| j == key));
        self.remove(key);
        if let (Some((leaf, k)), Some(d)) = (known, self.delivery.as_mut()) {
            d.blocked(key, k.seq, leaf);
        }
    }
    fn choose(&mut self, now: Nanos, current: &[Option<JobKey>], assign: &mut [Option<JobKey>]) {
        if self.delivery.is_some() {
            self.choose_with_events(now, current, assign);
            return;
        }
        if self.sweep {
            self.choose_sweep(now, current, assign);
            return;
        }
        self.begin_decision(now);
        self.mark_eligible(now, current);
        for (cpu, slot) in assign.iter_mut().enumerate() {
            let mut at = self.roots[cpu];
            let mut job = None;
            if self.eligible[at] {
                while let Some(c) = self.best_child(at) {
                    at = c;
                }
                job = self.nodes[at].jobs.first();
            }
            *slot = job;
            self.running[cpu] = job.map(|_| at);
        }
    }
    fn next_wakeup(&self, now: Nanos) -> Option<Nanos> {
        let mut best = self.nodes.iter().filter(|n| n.budgeted()).map(|n| n.next_boundary_ns).min().unwrap_or(u64::MAX);
        if let Some(d) = &self.delivery {
            best = best.min(d.next_delivery_end(now, &self.running));
        }
        if let Some(t) = self.task_policy_wakeup(now) {
            best = best.min(t.0);
        }
        if let Some(t) = self.next_window_edge(now) {
            best = best.min(t);
        }
        for leaf in self.running.iter().flatten() {
            let mut at = Some(*leaf);
            while let Some(i) = at {
                let node = &self.nodes[i];
                if node.budgeted() {
                    best = best.min(now.0 + node.left_ns);
                }
                at = node.parent;
            }
        }
        (best != u64::MAX).then_some(Nanos(best))
    }
    fn finish(&mut self, now: Nanos, result: &mut SimResult) {
        self.account_until(now);
        result.set_section(Servers(self.summaries()));
    }
}

/// Each server of the hierarchy over a run, in file order: the scheduler's section.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Servers(pub Vec<ServerSummary>);

/// What one server of the scheduler hierarchy did over a run.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ServerSummary {
    pub name: String,
    /// The parent server's name, or `"root"`.
    pub parent: String,
    /// `"deferrable"`, `"polling"` or `"level"`.
    pub kind: &'static str,
    /// `None` for a level.
    pub budget_ms: Option<f64>,
    pub period_ms: Option<f64>,
    /// CPU time the jobs below it ran.
    pub consumed_ns: u64,
    /// Period boundaries before the horizon (the first is at 0).
    pub replenishments: u64,
    /// Times its budget ran out while a job below it ran.
    pub exhaustions: u64,
    /// The CPU whose hierarchy it belongs to (the first of `cpus`).
    pub cpu: usize,
    /// Every CPU it runs on: one, but for a server with a task policy over several.
    pub cpus: Vec<usize>,
    /// The tasks attached to it (a leaf's), by index.
    pub tasks: Vec<usize>,
    /// Events its child-scheduler thread delivered (zero without `event_cost_us`).
    pub events_delivered: u64,
    /// CPU time its child-scheduler thread spent delivering them (part of `consumed_ns`).
    pub event_ns: u64,
    /// Jobs of its tasks an activation (an I/O event thread's packet) made eligible with no
    /// event to deliver, outranking what ran at every level they share (counted only where
    /// events are delivered: with `event_cost_us`).
    pub direct_activations: u64,
    /// What it consumed in each of its periods, the k-th starting at k × period (budgeted
    /// servers; the first [`crate::MAX_TRACE_RECORDS`] periods).
    pub period_consumed_ns: Vec<u64>,
    /// When its budget ran out (up to the same cap).
    pub exhausted_at: Vec<Nanos>,
    /// Stretches its child-scheduler thread ran, `(start, end)` (up to the same cap).
    pub event_segments: Vec<(Nanos, Nanos)>,
    /// Its memory reservation as the page-level model enforced it; `None` unless the scenario
    /// has `[memory]` and some server reserves memory (the memory model fills it in).
    pub memory: Option<ServerMemory>,
}

/// A server's memory reservation over a run: a bound on its subtree's resident pages.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ServerMemory {
    /// What `reserve.memory_mib` reserves (`None`: nothing; its subtree is bounded by its
    /// ancestors' reservations only).
    pub reserved_bytes: Option<u64>,
    /// `"hard"` or `"soft"`, with a reservation.
    pub kind: Option<&'static str>,
    /// The most pages its subtree's tasks held resident at once (distinct frames).
    pub peak_resident_pages: u64,
}

/// The servers' place in the summary: after the controller.
impl Section for Servers {
    const ORDER: u32 = 300;

    fn write_json(&self, _run: &SimResult, out: &mut JsonFields) {
        let servers: Vec<JsonServer<'_>> = self
            .0
            .iter()
            .map(|s| JsonServer {
                name: &s.name,
                parent: &s.parent,
                kind: s.kind,
                cpus: &s.cpus,
                budget_ms: s.budget_ms,
                period_ms: s.period_ms,
                consumed_ms: Nanos(s.consumed_ns).as_ms_f64(),
                replenishments: s.replenishments,
                exhaustions: s.exhaustions,
                events_delivered: s.events_delivered,
                event_ms: Nanos(s.event_ns).as_ms_f64(),
                memory_reserved_mb: s.memory.as_ref().map(|m| m.reserved_bytes.map(|b| b as f64 / 1_048_576.0)),
                memory_kind: s.memory.as_ref().map(|m| m.kind),
                peak_resident_pages: s.memory.as_ref().map(|m| m.peak_resident_pages),
            })
            .collect();
        if !servers.is_empty() {
            out.field("servers", &servers);
        }
    }
}

impl SimResult {
    /// Each server of the scheduler hierarchy, in file order (empty without servers).
    pub fn servers(&self) -> &[ServerSummary] {
        self.section::<Servers>().map_or(&[], |s| &s.0)
    }
}

#[derive(Serialize)]
struct JsonServer<'a> {
    name: &'a str,
    parent: &'a str,
    kind: &'static str,
    /// The CPUs it runs on (one, but for a level with a task policy over several).
    cpus: &'a [usize],
    budget_ms: Option<f64>,
    period_ms: Option<f64>,
    consumed_ms: f64,
    replenishments: u64,
    exhaustions: u64,
    events_delivered: u64,
    event_ms: f64,
    /// Only with `[memory]` and a server memory reservation: null for a server reserving none.
    #[serde(skip_serializing_if = "Option::is_none")]
    memory_reserved_mb: Option<Option<f64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    memory_kind: Option<Option<&'static str>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    peak_resident_pages: Option<u64>,
}
