//! A scenario's scheduler hierarchy in [`crate::analyze`]: what each server is guaranteed on
//! its parent's supply, and each leaf's tasks on their server's.
//!
//! **Supplies.** A CPU's root supplies the whole CPU. A budgeted server that gets its whole
//! budget Θ in every period Π while it has work supplies its children Shin and Lee's periodic
//! resource Γ(Π, Θ) ([`crate::PeriodicResource`]); one guaranteed only g < Θ per period
//! supplies Γ(Π, g). A level has no budget: its children are placed, in its order, at its
//! place among its parent's children, so they compete on the parent's supply directly.
//!
//! **Servers under a parent.** Under an fp, rm or dm parent every budgeted server is analysed
//! as a task (C = Θ, D = T = Π) on the parent's supply below the siblings (and the levels'
//! tasks) above it ([`crate::fp_response_times_on`]): a deferrable server can spend a budget
//! late in one period and the next one early, so towards lower priorities it has release
//! jitter Π − Θ, unless its tasks keep it busy from time 0 on (then it never defers and, like
//! a polling server, has none). A response within Π means the whole budget every period.
//! Otherwise two sound lower bounds on what it gets in every period are taken, the larger
//! wins: the free supply `max over t ≤ Π of sbf(t) − I(t)`, where a budgeted sibling above
//! can take `⌈(t + Π − Θ)/Π⌉·Θ` of any window of length t; and, when every sibling above is
//! budgeted, the same over each of its own periods in one hyperperiod with the siblings'
//! real periods (the simulator replenishes every server at the multiples of its period from
//! time 0, so a sibling takes at most `min(Θ, overlap)` of each of its periods that overlaps
//! the window). Under an edf parent the servers are implicit-deadline tasks in the EDF demand
//! test on the parent's supply ([`crate::edf_supply_test`]).
//!
//! **Tasks in a leaf** are checked on their server's supply: fixed priorities with
//! [`crate::fp_response_times_on`], EDF with [`crate::edf_supply_test`]. A miss found on a
//! supply bound is no proof (the server may get more); tasks that need more than Θ/Π of the
//! CPU do miss, since no server gives more.

use crate::report::ServerReport;
use crate::{
    edf_supply_test, fp_response_times_on, fp_server_analysis, ms, utilization_cmp, Analysis, EdfSrpBlocking, PeriodicResource, Rta,
    Server, ServerKind as AnalysisServerKind, Supply, SupplyTest, TaskParams, Verdict,
};
use critmem_core::model::program::Action;
use critmem_core::model::scheduler::{Hierarchy, ServerKind, ServerPolicy, ServerSpec};
use critmem_core::model::task::{Arrival, OverrunPolicy};
use critmem_core::scenario::PriorityOrder;
use critmem_core::sched::priority_ranks;
use critmem_core::Nanos;
use std::cmp::Ordering;

/// Candidate points a phased check may visit before giving up on it.
const MAX_PHASED_POINTS: u64 = 2_000_000;

/// What a node gives its children: Γ(Π, Θ) delayed by `delay`. A polling server may drop a
/// period's budget at the period's start when nothing below it has work yet, so work that
/// arrives just after waits up to a whole period more: Γ's blackout `2(Π − Θ)` grows by Θ.
#[derive(Clone, Copy, Debug)]
struct ServerSupply {
    resource: PeriodicResource,
    delay: Nanos,
}

impl Supply for ServerSupply {
    fn sbf(&self, t: Nanos) -> Nanos {
        self.resource.sbf(t.saturating_sub(self.delay))
    }
}

impl ServerSupply {
    fn whole_cpu() -> Self {
        ServerSupply { resource: PeriodicResource::dedicated(), delay: Nanos::ZERO }
    }

    /// A periodic resource below this supply everywhere, for the EDF test (which takes one):
    /// itself without delay; with one, Γ(Π, ⌊Θ/2⌋), whose blackout `2Π − 2⌊Θ/2⌋` is at least
    /// `2Π − Θ` and which gives no more per period after it.
    fn as_resource(&self) -> Option<PeriodicResource> {
        if self.delay == Nanos::ZERO {
            return Some(self.resource);
        }
        let half = Nanos(self.resource.budget().0 / 2);
        (half > Nanos::ZERO).then(|| PeriodicResource::new(half, self.resource.period()).expect("a smaller budget"))
    }

    /// The longest stretch without supply, ns.
    fn blackout(&self) -> Nanos {
        self.resource.blackout() + self.delay
    }
}

/// One competitor under a fixed-priority parent, in priority order.
#[derive(Clone, Copy)]
enum Entry {
    /// A budgeted server (its index among the scenario's servers).
    Server(usize),
    /// A task attached to a level; `analysed` is false where the level's policy is EDF,
    /// global or a table (its tasks still count as work above those below the level).
    Task { task: usize, analysed: bool, policy: ServerPolicy },
}

/// What the walk over one CPU's tree has found so far.
struct Walk {
    /// The supply each server gives its children (`None`: nothing guaranteed), by server.
    given: Vec<Option<ServerSupply>>,
    servers_whole: usize,
    servers: usize,
    /// Leaves whose tasks need more than their server can ever give.
    overloaded: Vec<String>,
    /// Why tasks are undecided, one clause per cause.
    open: Vec<String>,
}

impl Analysis<'_> {
    fn tree(&self) -> &Hierarchy {
        self.scenario.hierarchy.as_ref().expect("a hierarchy")
    }

    /// Children servers of `parent` (`None`: the root of `cpu`) in their parent's static order
    /// (EDF parents: file order).
    fn child_servers(&self, parent: Option<usize>, cpu: usize) -> Vec<usize> {
        let h = self.tree();
        let on_cpu = |s: &ServerSpec| if s.cpus.is_empty() { s.cpu == cpu } else { s.cpus.contains(&cpu) };
        let mut kids: Vec<usize> = (0..h.servers.len()).filter(|&j| h.servers[j].parent == parent && on_cpu(&h.servers[j])).collect();
        let policy = parent.map_or(h.root_policy, |p| h.servers[p].policy);
        match policy {
            ServerPolicy::Fp => kids.sort_by_key(|&c| (h.servers[c].priority.unwrap_or(i64::MAX), c)),
            ServerPolicy::Rm | ServerPolicy::Dm => kids.sort_by_key(|&c| (h.servers[c].period, c)),
            _ => {}
        }
        kids
    }

    fn leaf_tasks(&self, server: usize) -> Vec<usize> {
        (0..self.scenario.tasks.len()).filter(|&i| self.tree().task_server[i] == server).collect()
    }

    fn is_leaf(&self, server: usize) -> bool {
        !self.tree().servers.iter().any(|s| s.parent == Some(server))
    }

    /// Whether a leaf's tasks keep it busy from time 0 on: periodic, released at 0, never
    /// suspending, blocking or dropping work, with best-case demand of a whole CPU (released
    /// work by t is then more than t, more than any server can have served).
    fn never_idle(&self, server: usize) -> bool {
        if !self.is_leaf(server) {
            return false;
        }
        let steady: Vec<TaskParams> = self
            .leaf_tasks(server)
            .into_iter()
            .map(|i| self.spec(i))
            .filter(|t| {
                t.arrival == Arrival::Periodic
                    && t.offset == Nanos::ZERO
                    && t.overrun == OverrunPolicy::Continue
                    && t.suspensions.is_empty()
                    && t.memory.is_none()
                    && t.program.as_ref().is_none_or(|p| !p.actions.iter().any(|a| matches!(a, Action::Lock { .. })))
            })
            .map(|t| TaskParams::implicit(t.exec.bcet(), t.period))
            .collect();
        !steady.is_empty() && utilization_cmp(&steady, 1).is_some_and(|o| o != Ordering::Less)
    }

    /// The server as a higher-priority load for the busy-period tests.
    fn as_server(&self, j: usize) -> Server {
        let s = &self.tree().servers[j];
        let kind = match s.kind {
            ServerKind::Deferrable if !self.never_idle(j) => AnalysisServerKind::Deferrable,
            _ => AnalysisServerKind::Periodic,
        };
        Server::new(s.budget, s.period, kind).expect("the loader checks 0 < budget ≤ period")
    }

    /// The competitors under a fixed-priority node, with levels opened in place.
    fn entries(&self, parent: Option<usize>, cpu: usize, out: &mut Vec<Entry>) {
        for c in self.child_servers(parent, cpu) {
            let s = &self.tree().servers[c];
            if s.kind != ServerKind::Level {
                out.push(Entry::Server(c));
            } else if self.is_leaf(c) {
                // Those of its tasks that may run on this CPU.
                let mut tasks: Vec<usize> = match s.policy {
                    ServerPolicy::Pfp | ServerPolicy::Pedf => s.task_cpus.iter().filter(|&&(_, c)| c == cpu).map(|&(t, _)| t).collect(),
                    ServerPolicy::Cyclic => {
                        let table = s.table.as_ref().expect("validated: a cyclic server has a table");
                        self.leaf_tasks(c).into_iter().filter(|&t| table.slots.iter().any(|x| x.task == t && x.cpu == cpu)).collect()
                    }
                    _ => self.leaf_tasks(c),
                };
                let analysed = matches!(s.policy, ServerPolicy::Fp | ServerPolicy::Rm | ServerPolicy::Dm | ServerPolicy::Pfp)
                    || (s.policy == ServerPolicy::Gfp && s.cpus.len() == 1);
                if analysed {
                    let ranks = self.leaf_ranks(s);
                    tasks.sort_by_key(|&i| ranks[i]);
                }
                out.extend(tasks.into_iter().map(|task| Entry::Task { task, analysed, policy: s.policy }));
            } else {
                self.entries(Some(c), s.cpu, out);
            }
        }
    }

    /// Ranks of every task under a leaf policy (the simulator's global ranks for it).
    fn leaf_ranks(&self, server: &ServerSpec) -> Vec<u32> {
        let order = match server.policy {
            ServerPolicy::Fp => PriorityOrder::Explicit,
            ServerPolicy::Rm => PriorityOrder::RateMonotonic,
            ServerPolicy::Gfp | ServerPolicy::Pfp => server.priorities.unwrap_or(PriorityOrder::Explicit),
            ServerPolicy::Dm
            | ServerPolicy::Edf
            | ServerPolicy::Gedf
            | ServerPolicy::Pedf
            | ServerPolicy::Cyclic
            | ServerPolicy::External => PriorityOrder::DeadlineMonotonic,
        };
        priority_ranks(order, &self.scenario.tasks)
    }

    /// Analyses the whole hierarchy, one `hierarchy` test per CPU.
    pub(crate) fn hierarchy(&mut self) {
        let h = self.tree().clone();
        if !self.scenario.resources.is_empty() {
            let mut report = self.resources_report();
            for (t, sections) in report.tasks.iter_mut().zip(&self.sections) {
                if !sections.is_empty() {
                    t.note = "not analysed: shared resources in a scheduler hierarchy (a holder may run on another server's budget)".into();
                }
            }
            self.resources = Some(report);
        }
        let reserve = &self.scenario.reservations;
        self.servers = Some(
            h.servers
                .iter()
                .enumerate()
                .map(|(j, s)| ServerReport {
                    name: s.name.clone(),
                    parent: s.parent.map_or_else(|| "root".to_string(), |p| h.servers[p].name.clone()),
                    cpu: s.cpu,
                    kind: s.kind.as_str(),
                    policy: s.policy.as_str(),
                    budget_ms: (s.kind != ServerKind::Level).then(|| ms(s.budget)),
                    period_ms: (s.kind != ServerKind::Level).then(|| ms(s.period)),
                    response_ms: None,
                    guaranteed_budget_ms: None,
                    supply_budget_ms: None,
                    supply_period_ms: None,
                    supply_blackout_ms: None,
                    backlogged_share: None,
                    verdict: Verdict::Unknown,
                    detail: if s.kind == ServerKind::Level {
                        "a plain priority level: what is below it competes directly on its parent's supply".to_string()
                    } else {
                        String::new()
                    },
                    memory_reserved_mb: reserve.get(j).and_then(|r| r.memory_bytes).map(|b| b as f64 / 1_048_576.0),
                    memory_kind: reserve.get(j).filter(|r| r.memory_bytes.is_some()).and_then(|r| r.kind).map(|k| k.as_str()),
                })
                .collect(),
        );
        for cpu in 0..self.scenario.cpus {
            if !h.servers.iter().any(|s| s.cpu == cpu || s.cpus.contains(&cpu)) {
                continue;
            }
            if let Some(g) = h.servers.iter().find(|s| s.over_servers && s.cpus.contains(&cpu)) {
                let detail = format!(
                    "Not analysed: server {:?} runs its child servers globally ({}) over CPUs {:?}, and the supply of servers that migrate is not analysed here; `critmem run` shows the schedule.",
                    g.name,
                    g.policy.as_str(),
                    g.cpus
                );
                self.push("hierarchy", Some(cpu), Verdict::Unknown, detail);
                continue;
            }
            if let Some(w) = h.servers.iter().find(|s| s.windows && s.cpu == cpu) {
                let detail = format!(
                    "Not analysed: server {:?} gives its child servers windows from a cyclic table, and the supply of table windows is not analysed here; `critmem run` shows the schedule.",
                    w.name
                );
                self.push("hierarchy", Some(cpu), Verdict::Unknown, detail);
                continue;
            }
            let mut walk =
                Walk { given: vec![None; h.servers.len()], servers_whole: 0, servers: 0, overloaded: Vec::new(), open: Vec::new() };
            self.backlogged_shares(cpu);
            self.under(None, cpu, Some(ServerSupply::whole_cpu()), &mut walk);
            self.hierarchy_test(cpu, &walk);
        }
    }

    fn server_report(&mut self, j: usize) -> &mut ServerReport {
        &mut self.servers.as_mut().expect("set by hierarchy")[j]
    }

    /// Long-run shares of the top-level servers under an fp root when all are backlogged.
    fn backlogged_shares(&mut self, cpu: usize) {
        let h = self.tree();
        if h.root_policy != ServerPolicy::Fp {
            return;
        }
        let tops = self.child_servers(None, cpu);
        if tops.iter().any(|&j| h.servers[j].kind == ServerKind::Level) {
            return;
        }
        let servers: Vec<Server> = tops.iter().map(|&j| self.as_server(j)).collect();
        let ranks: Vec<u32> = (0..tops.len() as u32).collect();
        if let Ok(g) = fp_server_analysis(&servers, &ranks) {
            for (k, &j) in tops.iter().enumerate() {
                self.server_report(j).backlogged_share = g[k].backlogged_share();
            }
        }
    }

    /// Analyses the children of `parent` on `supply` (`None`: nothing guaranteed), then
    /// recurses into every budgeted child.
    fn under(&mut self, parent: Option<usize>, cpu: usize, supply: Option<ServerSupply>, walk: &mut Walk) {
        if let Some(p) = parent.filter(|&p| self.is_leaf(p)) {
            return self.leaf(p, supply, walk);
        }
        let policy = parent.map_or(self.tree().root_policy, |p| self.tree().servers[p].policy);
        let mut entries = Vec::new();
        if policy == ServerPolicy::Edf {
            entries.extend(self.child_servers(parent, cpu).into_iter().map(Entry::Server));
            self.edf_servers(&entries, supply, walk);
        } else {
            self.entries(parent, cpu, &mut entries);
            self.fp_entries(&entries, supply, walk);
        }
        for e in entries {
            if let Entry::Server(j) = e {
                walk.servers += 1;
                if self.server_report(j).verdict == Verdict::Schedulable {
                    walk.servers_whole += 1;
                }
                let given = walk.given[j];
                self.under(Some(j), cpu, given, walk);
            }
        }
    }

    /// Records what server `j` is guaranteed per period.
    fn grant(&mut self, j: usize, guaranteed: Nanos, verdict: Verdict, detail: String, walk: &mut Walk) {
        let s = &self.tree().servers[j];
        let drops = s.kind == ServerKind::Polling && !self.never_idle(j);
        walk.given[j] = PeriodicResource::new(guaranteed, s.period)
            .ok()
            .filter(|_| guaranteed > Nanos::ZERO)
            .map(|resource| ServerSupply { resource, delay: if drops { guaranteed } else { Nanos::ZERO } });
        let r = self.server_report(j);
        r.guaranteed_budget_ms = Some(ms(guaranteed));
        r.supply_budget_ms = walk.given[j].map(|g| ms(g.resource.budget()));
        r.supply_period_ms = walk.given[j].map(|g| ms(g.resource.period()));
        r.supply_blackout_ms = walk.given[j].map(|g| ms(g.blackout()));
        r.verdict = verdict;
        r.detail = detail;
    }

    /// Servers and level tasks under a fixed-priority node, on its supply.
    fn fp_entries(&mut self, entries: &[Entry], supply: Option<ServerSupply>, walk: &mut Walk) {
        let Some(sup) = supply else {
            for e in entries {
                match *e {
                    Entry::Server(j) => self.grant(j, Nanos::ZERO, Verdict::Unknown, "its parent is guaranteed no supply".into(), walk),
                    Entry::Task { task, .. } => {
                        walk.open.push(format!("{} (its level's parent is guaranteed no supply)", self.spec(task).name))
                    }
                }
            }
            return;
        };
        let mut params = Vec::with_capacity(entries.len());
        let mut jitter = Vec::with_capacity(entries.len());
        for e in entries {
            match *e {
                Entry::Server(j) => {
                    let s = self.as_server(j);
                    params.push(TaskParams::implicit(s.budget(), s.period()));
                    jitter.push(s.jitter());
                }
                Entry::Task { task, .. } => {
                    params.push(self.params[task]);
                    jitter.push(Nanos::ZERO);
                }
            }
        }
        let ranks: Vec<u32> = (0..entries.len() as u32).collect();
        let results = match fp_response_times_on(&sup, &params, &jitter, &ranks, &vec![Nanos::ZERO; entries.len()]) {
            Ok(r) => r,
            Err(e) => vec![Rta::Unknown { reason: e.to_string() }; entries.len()],
        };
        for (k, e) in entries.iter().enumerate() {
            match *e {
                Entry::Server(j) => {
                    let s = &self.tree().servers[j];
                    let (budget, period) = (s.budget, s.period);
                    if let Rta::Meets { response } = results[k] {
                        self.server_report(j).response_ms = Some(ms(response));
                        let detail = format!(
                            "gets its whole budget every period: as a task on its parent's supply it responds within {} ms ≤ {} ms",
                            ms(response),
                            ms(period)
                        );
                        self.grant(j, budget, Verdict::Schedulable, detail, walk);
                        continue;
                    }
                    let free = self.free_supply(&sup, &entries[..k], &results[..k], period);
                    let phased = self.phased_supply(&sup, j, &entries[..k], &results[..k]);
                    let why = match &results[k] {
                        Rta::Misses { response_at_least } => {
                            format!("as a task its response bound reaches {} ms > its {} ms period", ms(*response_at_least), ms(period))
                        }
                        Rta::Unknown { reason } => reason.clone(),
                        Rta::Meets { .. } => unreachable!(),
                    };
                    match phased {
                        Some(g) if g >= budget => {
                            let detail = format!("gets its whole budget every period: in each of its periods over a hyperperiod, the siblings above leave it at least {} ms (phased check; {why})", ms(g));
                            self.grant(j, budget, Verdict::Schedulable, detail, walk);
                        }
                        _ => {
                            let g = free.max(phased.unwrap_or(Nanos::ZERO)).min(budget);
                            let detail = format!(
                                "not guaranteed its whole budget ({why}); it gets at least {} ms of its {} ms in every period",
                                ms(g),
                                ms(budget)
                            );
                            self.grant(j, g, Verdict::Unknown, detail, walk);
                        }
                    }
                }
                Entry::Task { task, analysed, policy } => {
                    let name = self.spec(task).name.clone();
                    if !analysed {
                        let how = match policy {
                            ServerPolicy::Gedf => "global EDF",
                            ServerPolicy::Gfp => "global fixed priority",
                            ServerPolicy::Cyclic => "a cyclic table",
                            _ => "EDF",
                        };
                        walk.open.push(format!("{name} ({how} inside a level is not analysed)"));
                        continue;
                    }
                    let r = &mut self.tasks[task];
                    r.response_time_ms = results[k].response().map(ms);
                    r.schedulable = matches!(results[k], Rta::Meets { .. }).then_some(true);
                    if r.schedulable.is_none() {
                        walk.open.push(format!("{name} (no response bound within its deadline on its level's supply)"));
                    }
                }
            }
        }
    }

    /// `max over 0 < t ≤ limit of sbf(t) − I(t)` with every entry above as a load over any
    /// window: a budgeted server takes at most `⌈(t + Π − Θ)/Π⌉·Θ`, a task with response R at
    /// most `⌈(t + R − C)/T⌉·C`; zero if a task above has no response bound. Between the
    /// points where some load steps up, sbf − I only grows, so those points and `limit` suffice.
    fn free_supply(&self, sup: &ServerSupply, above: &[Entry], results: &[Rta], limit: Nanos) -> Nanos {
        let mut loads = Vec::with_capacity(above.len());
        for (e, r) in above.iter().zip(results) {
            let (c, t, j) = match *e {
                Entry::Server(s) => {
                    let s = &self.tree().servers[s];
                    (s.budget, s.period, s.period - s.budget)
                }
                Entry::Task { task, .. } => match r.response() {
                    Some(resp) => (self.params[task].wcet, self.params[task].period, resp.saturating_sub(self.params[task].wcet)),
                    None => return Nanos::ZERO,
                },
            };
            loads.push(crate::Interferer { wcet: c, period: t, jitter: j });
        }
        let limit = u128::from(limit.0);
        let points: u128 = loads.iter().map(|h| limit / u128::from(h.period.0) + 1).sum();
        if points > u128::from(MAX_PHASED_POINTS) {
            return Nanos::ZERO;
        }
        let value = |t: u128| {
            let got = u128::from(sup.sbf(crate::model::nanos(t)).0);
            got.saturating_sub(loads.iter().map(|h| h.demand(t)).sum())
        };
        let mut best = value(limit);
        for h in &loads {
            let (p, j) = (u128::from(h.period.0), u128::from(h.jitter.0));
            let mut k = j / p + 1;
            while k * p - j <= limit {
                best = best.max(value(k * p - j));
                k += 1;
            }
        }
        crate::model::nanos(best)
    }

    /// The least supply server `j` gets in any of its periods over one hyperperiod, with every
    /// sibling above it budgeted and taking at most `min(Θ, overlap)` of each of its own
    /// periods (all replenished at the multiples of their periods from 0); `None` when a level
    /// is above it or the check would take too long.
    fn phased_supply(&self, sup: &ServerSupply, j: usize, above: &[Entry], results: &[Rta]) -> Option<Nanos> {
        let servers = &self.tree().servers;
        // Each sibling above with the part of its period it can run in: all of it, or for one
        // that never defers (polling, or always busy) and gets its budget, up to its response.
        let mut higher: Vec<(&ServerSpec, u64)> = Vec::with_capacity(above.len());
        for (e, r) in above.iter().zip(results) {
            match *e {
                Entry::Server(s) => {
                    let spec = &servers[s];
                    let reach = match (self.as_server(s).kind(), r) {
                        (AnalysisServerKind::Periodic, Rta::Meets { response }) => response.0,
                        _ => spec.period.0,
                    };
                    higher.push((spec, reach));
                }
                Entry::Task { .. } => return None,
            }
        }
        let own = &servers[j];
        let hyper = critmem_core::time::lcm_all(higher.iter().map(|(s, _)| s.period.0).chain(std::iter::once(own.period.0)))?;
        let windows = hyper / own.period.0;
        let per_window: u64 = higher.iter().map(|(s, _)| own.period.0 / s.period.0 + 2).sum::<u64>() + 1;
        if windows.checked_mul(per_window)?.checked_mul(per_window)? > MAX_PHASED_POINTS {
            return None;
        }
        let taken = |a: u64, b: u64| -> u64 {
            higher
                .iter()
                .map(|&(s, reach)| {
                    let (p, c) = (s.period.0, s.budget.0);
                    (a / p..b.div_ceil(p)).map(|m| c.min(b.min(m * p + reach).saturating_sub(a.max(m * p)))).sum::<u64>()
                })
                .sum()
        };
        let mut least = u64::MAX;
        for w in 0..windows {
            let a = w * own.period.0;
            let mut xs = vec![own.period.0];
            for (s, _) in &higher {
                let p = s.period.0;
                let mut start = (a / p + 1) * p;
                while start < a + own.period.0 {
                    xs.push(start - a);
                    start += p;
                }
            }
            let best = xs.iter().map(|&x| sup.sbf(Nanos(x)).0.saturating_sub(taken(a, a + x))).max().unwrap_or(0);
            least = least.min(best);
        }
        Some(Nanos(least))
    }

    /// Servers under an EDF node: the demand test with the servers as implicit-deadline tasks.
    fn edf_servers(&mut self, entries: &[Entry], supply: Option<ServerSupply>, walk: &mut Walk) {
        let servers: Vec<usize> = entries.iter().filter_map(|e| if let Entry::Server(j) = *e { Some(j) } else { None }).collect();
        let params: Vec<TaskParams> =
            servers.iter().map(|&j| TaskParams::implicit(self.tree().servers[j].budget, self.tree().servers[j].period)).collect();
        let outcome = match supply {
            None => Err("its parent is guaranteed no supply".to_string()),
            Some(sup) => match sup
                .as_resource()
                .map(|r| edf_supply_test(&r, &params, &EdfSrpBlocking::none()))
                .unwrap_or(Ok(SupplyTest::Unknown { reason: "its parent's supply is too small to bound for EDF".into() }))
            {
                Ok(SupplyTest::Holds { .. }) => Ok(()),
                Ok(SupplyTest::Violated { at, demand, supply }) => Err(format!(
                    "the EDF demand test of its siblings fails at {} ms (demand {} ms, supply {} ms)",
                    ms(at),
                    ms(demand),
                    ms(supply)
                )),
                Ok(SupplyTest::Overloaded) => Err("its siblings' budgets exceed their parent's supply rate".to_string()),
                Ok(SupplyTest::Unknown { reason }) => Err(reason),
                Err(e) => Err(e.to_string()),
            },
        };
        for j in servers {
            let budget = self.tree().servers[j].budget;
            match &outcome {
                Ok(()) => self.grant(
                    j,
                    budget,
                    Verdict::Schedulable,
                    "gets its whole budget every period: the EDF demand test of the servers under its parent holds".into(),
                    walk,
                ),
                Err(why) => self.grant(j, Nanos::ZERO, Verdict::Unknown, format!("not guaranteed any budget: {why}"), walk),
            }
        }
    }

    /// The tasks of leaf server `p` on the supply it gives.
    fn leaf(&mut self, p: usize, supply: Option<ServerSupply>, walk: &mut Walk) {
        let idx = self.leaf_tasks(p);
        if idx.is_empty() {
            return;
        }
        let s = self.tree().servers[p].clone();
        if s.kind == ServerKind::Level {
            // Its tasks were analysed in place, among its parent's children.
            return;
        }
        let raw = self.pick(&self.raw, &idx);
        // More than Θ/Π of the CPU: the backlog grows by a bounded amount in every period.
        let scaled: Option<Vec<TaskParams>> = raw
            .iter()
            .map(|t| Some(TaskParams::implicit(Nanos(t.wcet.0.checked_mul(s.period.0)?), Nanos(t.period.0.checked_mul(s.budget.0)?))))
            .collect();
        let over = scaled.is_some_and(|v| utilization_cmp(&v, 1) == Some(Ordering::Greater));
        let all_continue = idx.iter().all(|&i| self.spec(i).overrun == OverrunPolicy::Continue);
        if over && all_continue {
            walk.overloaded.push(s.name.clone());
        }
        if self.uses_resources() {
            walk.open.push(format!(
                "the tasks of {} (shared resources in a hierarchy are not analysed: a holder may run on another server's budget)",
                s.name
            ));
            return;
        }
        let Some(sup) = supply else {
            walk.open.push(format!("the tasks of {} (the server is guaranteed no supply)", s.name));
            return;
        };
        if s.policy == ServerPolicy::Cyclic {
            walk.open.push(format!("the tasks of {} (a cyclic table inside a server is not analysed)", s.name));
            return;
        }
        let params = self.pick(&self.params, &idx);
        // A budgeted server runs on one CPU, where global and partitioned EDF are EDF.
        if matches!(s.policy, ServerPolicy::Edf | ServerPolicy::Gedf | ServerPolicy::Pedf) {
            match sup.as_resource().map(|r| edf_supply_test(&r, &params, &EdfSrpBlocking::none())) {
                Some(Ok(SupplyTest::Holds { .. })) => {
                    for &i in &idx {
                        self.tasks[i].schedulable = Some(true);
                    }
                }
                _ => walk.open.push(format!("the tasks of {} (the EDF demand test on its supply fails)", s.name)),
            }
            return;
        }
        let global = self.leaf_ranks(&s);
        let ranks: Vec<u32> = idx.iter().map(|&i| global[i]).collect();
        let results = match fp_response_times_on(&sup, &params, &vec![Nanos::ZERO; idx.len()], &ranks, &vec![Nanos::ZERO; idx.len()]) {
            Ok(r) => r,
            Err(e) => {
                walk.open.push(format!("the tasks of {} ({e})", s.name));
                return;
            }
        };
        let mut open = Vec::new();
        for (k, &i) in idx.iter().enumerate() {
            let r = &mut self.tasks[i];
            r.response_time_ms = results[k].response().map(ms);
            r.schedulable = matches!(results[k], Rta::Meets { .. }).then_some(true);
            if r.schedulable.is_none() {
                open.push(self.spec(i).name.clone());
            }
        }
        if !open.is_empty() {
            walk.open.push(format!("{} (no response bound within the deadline on {}'s supply)", open.join(", "), s.name));
        }
    }

    /// The `hierarchy` test of one CPU.
    fn hierarchy_test(&mut self, cpu: usize, walk: &Walk) {
        // The CPUs a task may run on: its partition's, its slots', a global server's all.
        let runs_on = |i: usize| {
            let s = &self.tree().servers[self.tree().task_server[i]];
            match s.policy {
                ServerPolicy::Pfp | ServerPolicy::Pedf => s.task_cpus.iter().any(|&(t, c)| t == i && c == cpu),
                ServerPolicy::Cyclic => s.table.as_ref().is_some_and(|tb| tb.slots.iter().any(|x| x.task == i && x.cpu == cpu)),
                ServerPolicy::Gedf | ServerPolicy::Gfp => s.cpus.contains(&cpu),
                _ => s.cpu == cpu,
            }
        };
        let on_cpu: Vec<usize> = (0..self.scenario.tasks.len()).filter(|&i| runs_on(i)).collect();
        let meets = on_cpu.iter().filter(|&&i| self.tasks[i].schedulable == Some(true)).count();
        let servers = format!("{} of {} servers get their whole budget every period", walk.servers_whole, walk.servers);
        let tasks = format!("{meets} of {} tasks meet their deadlines on their servers' supply", on_cpu.len());
        let (verdict, what) = if !walk.overloaded.is_empty() {
            // Without suspensions counted and with every job run to its end, so a proof.
            (
                Verdict::NotSchedulable,
                format!("the tasks of {} need more of the CPU than their server's budget per period gives", walk.overloaded.join(", ")),
            )
        } else if meets == on_cpu.len() {
            (Verdict::Schedulable, "every task meets its deadline".to_string())
        } else {
            (Verdict::Unknown, format!("undecided for {}", walk.open.join("; ")))
        };
        let detail = format!(
            "Servers on their parents' supply and tasks on their servers' (periodic resource model): {servers}; {tasks}; {what}{}.",
            self.caveats(&on_cpu)
        );
        self.push("hierarchy", Some(cpu), verdict, detail);
    }
}
