//! `[machine]` and `[scheduler]`: the CPUs and the scheduling policy, with the data each
//! policy needs (priorities for fixed-priority kinds, the table of a cyclic executive).

use super::error::{Ctx, ScenarioError};
use super::raw::{RawScenario, RawScheduler, RawTask};
use super::server_policies;
use crate::model::scheduler::{CyclicSlot, CyclicTable, ExternalScheduler, PriorityOrder, SchedulerKind, SchedulerSpec};
use crate::model::scheduler::{Hierarchy, Mc2Levels, Mc2Server, ServerKind, ServerPolicy, ServerSpec};
use crate::model::task::{Criticality, TaskSpec};
use crate::time::Nanos;
use std::collections::BTreeMap;

/// `[machine] cpus` (1 when the section is left out).
pub(super) fn validate_cpus(cx: &Ctx, raw: &RawScenario) -> Result<usize, ScenarioError> {
    match &raw.machine {
        None => Ok(1),
        Some(m) if m.cpus < 1 => Err(cx.err("machine.cpus", format!("must be at least 1 (got {})", m.cpus))),
        Some(m) if m.cpus > 4096 => Err(cx.err("machine.cpus", format!("must be at most 4096 (got {})", m.cpus))),
        Some(m) => Ok(m.cpus as usize),
    }
}

/// `[scheduler] kind`, which must suit the machine; the rest of the section is checked by
/// [`validate_scheduler`] once the tasks are known.
pub(super) fn validate_kind<'r>(cx: &Ctx, raw: &'r RawScenario, cpus: usize) -> Result<(&'r RawScheduler, SchedulerKind), ScenarioError> {
    let quoted: Vec<String> = SchedulerKind::NAMES.iter().map(|n| format!("{n:?}")).collect();
    let sched = raw
        .scheduler
        .as_ref()
        .ok_or_else(|| cx.err("scheduler", format!("missing section [scheduler] with kind = {}", quoted.join(" | "))))?;
    let kind = sched.kind.choice;
    // A hierarchy has one root per CPU, each a uniprocessor scheduler.
    if kind.is_uniprocessor() && cpus != 1 && sched.server.is_empty() {
        return Err(cx.err(
            "machine.cpus",
            format!("scheduler {:?} is uniprocessor but machine.cpus = {cpus}; use pfp, pedf, gfp or gedf for several CPUs", kind.as_str()),
        ));
    }
    Ok((sched, kind))
}

/// The scheduler with its priorities or table (and, under mc2, the servers under its
/// levels), checked against the tasks.
pub(super) fn validate_scheduler(
    cx: &Ctx,
    raw: &RawScheduler,
    raw_tasks: &[RawTask],
    tasks: &[TaskSpec],
    cpus: usize,
) -> Result<SchedulerSpec, ScenarioError> {
    let kind = raw.kind.choice;
    // Priorities: fixed by the kind for fp/rm/dm, chosen (or inferred) for pfp/gfp.
    let chosen = match raw.priorities {
        None if tasks.iter().all(|t| t.priority.is_some()) => PriorityOrder::Explicit,
        None => PriorityOrder::RateMonotonic,
        Some(order) => order,
    };
    if raw.priorities.is_some() && !matches!(kind, SchedulerKind::Pfp | SchedulerKind::Gfp) {
        return Err(cx.err("scheduler.priorities", format!("only applies to pfp and gfp, not {:?}", kind.as_str())));
    }
    let spec = match kind {
        SchedulerKind::Fp => SchedulerSpec::Fp,
        SchedulerKind::Rm => SchedulerSpec::Rm,
        SchedulerKind::Dm => SchedulerSpec::Dm,
        SchedulerKind::Edf => SchedulerSpec::Edf,
        SchedulerKind::Pfp => SchedulerSpec::Pfp { priorities: chosen },
        SchedulerKind::Pedf => SchedulerSpec::Pedf,
        SchedulerKind::Gedf => SchedulerSpec::Gedf,
        SchedulerKind::Gfp => SchedulerSpec::Gfp { priorities: chosen },
        SchedulerKind::Cyclic => SchedulerSpec::Cyclic(validate_cyclic(cx, raw, tasks, cpus)?),
        SchedulerKind::Mc2 => {
            let table = validate_mc2_table(cx, raw, tasks)?;
            let (servers, task_server) = validate_mc2_servers(cx, raw, raw_tasks, tasks)?;
            SchedulerSpec::Mc2(Mc2Levels { table, servers, task_server })
        }
        SchedulerKind::External => {
            let name = raw.kind.external.clone().expect("an external kind has its name");
            let config = raw.config.as_ref().map_or_else(|| serde_json::json!({}), |c| c.0.clone());
            let spec = ExternalScheduler { name, config };
            if raw.server.is_empty() {
                server_policies::check_external(cx, &spec, tasks, cpus, "scheduler.kind", "scheduler.config")?;
            }
            SchedulerSpec::External(spec)
        }
    };
    if raw.config.is_some() && kind != SchedulerKind::External {
        return Err(cx.err("scheduler.config", "only applies to a Python scheduler (kind = \"file.py:Class\")"));
    }
    // In a hierarchy each leaf server's policy decides whether its tasks need priorities.
    if spec.priority_order() == Some(PriorityOrder::Explicit) && raw.server.is_empty() {
        if let Some(i) = tasks.iter().position(|t| t.priority.is_none()) {
            return Err(cx.err(
                format!("task[{i}].priority"),
                "missing: explicit fixed priorities need a priority on every task (lower number = higher priority)",
            ));
        }
    }
    if !matches!(kind, SchedulerKind::Cyclic | SchedulerKind::Mc2) {
        if raw.major_frame_ms.is_some() {
            return Err(cx.err("scheduler.major_frame_ms", "only applies to kind = \"cyclic\" or \"mc2\""));
        }
        if !raw.slot.is_empty() {
            return Err(cx.err("scheduler.slot", "only applies to kind = \"cyclic\" or \"mc2\""));
        }
    }
    Ok(spec)
}

fn validate_cyclic(cx: &Ctx, raw: &RawScheduler, tasks: &[TaskSpec], cpus: usize) -> Result<CyclicTable, ScenarioError> {
    let major_frame = cx.positive(
        "scheduler.major_frame_ms",
        raw.major_frame_ms.ok_or_else(|| cx.err("scheduler.major_frame_ms", "missing: a cyclic executive needs major_frame_ms"))?,
    )?;
    if raw.slot.is_empty() {
        return Err(cx.err("scheduler.slot", "a cyclic executive needs at least one [[scheduler.slot]] (task, start_ms, duration_ms)"));
    }
    let mut slots = Vec::with_capacity(raw.slot.len());
    for (j, s) in raw.slot.iter().enumerate() {
        let k = |f: &str| format!("scheduler.slot[{j}].{f}");
        let task = tasks.iter().position(|t| t.name == s.task).ok_or_else(|| cx.err(k("task"), format!("no task named {:?}", s.task)))?;
        let start = cx.time(&k("start_ms"), s.start_ms)?;
        let duration = cx.positive(&k("duration_ms"), s.duration_ms)?;
        if start + duration > major_frame {
            return Err(cx.err(k("duration_ms"), "slot ends after the major frame"));
        }
        let cpu = match s.cpu {
            None => 0,
            Some(c) if c < 0 || c as usize >= cpus => {
                return Err(cx.err(k("cpu"), format!("CPU {c} does not exist: machine.cpus = {cpus}")))
            }
            Some(c) => c as usize,
        };
        slots.push((j, CyclicSlot { cpu, start, duration, task }));
    }
    sorted_table(cx, "scheduler.slot", major_frame, slots)
}

/// The table with its slots sorted by (cpu, start), refusing slots that overlap on a CPU;
/// `slots` pairs each slot with its index in the file.
pub(super) fn sorted_table(
    cx: &Ctx,
    key: &str,
    major_frame: Nanos,
    mut slots: Vec<(usize, CyclicSlot)>,
) -> Result<CyclicTable, ScenarioError> {
    slots.sort_by_key(|(_, s)| (s.cpu, s.start));
    for w in slots.windows(2) {
        let (a, b) = (&w[0].1, &w[1].1);
        if a.cpu == b.cpu && a.start + a.duration > b.start {
            return Err(cx.err(format!("{key}[{}]", w[1].0), format!("overlaps slot[{}] on CPU {}", w[0].0, a.cpu)));
        }
    }
    Ok(CyclicTable { major_frame, slots: slots.into_iter().map(|(_, s)| s).collect() })
}

/// Level A's table under mc2: slots name level-A tasks and run on their task's core.
fn validate_mc2_table(cx: &Ctx, raw: &RawScheduler, tasks: &[TaskSpec]) -> Result<CyclicTable, ScenarioError> {
    let first_a = tasks.iter().position(|t| t.criticality == Criticality::A);
    let major_frame = match (raw.major_frame_ms, first_a) {
        (Some(f), _) => cx.positive("scheduler.major_frame_ms", f)?,
        (None, Some(i)) => {
            return Err(cx.err(
                "scheduler.major_frame_ms",
                format!("missing: level-A tasks (such as {:?}) run from a table with a major frame", tasks[i].name),
            ))
        }
        (None, None) if !raw.slot.is_empty() => {
            return Err(cx.err("scheduler.major_frame_ms", "missing: the level-A table needs a major frame"))
        }
        (None, None) => Nanos::ZERO,
    };
    let mut slots = Vec::with_capacity(raw.slot.len());
    for (j, s) in raw.slot.iter().enumerate() {
        let k = |f: &str| format!("scheduler.slot[{j}].{f}");
        let task = tasks.iter().position(|t| t.name == s.task).ok_or_else(|| cx.err(k("task"), format!("no task named {:?}", s.task)))?;
        let spec = &tasks[task];
        if spec.criticality != Criticality::A {
            return Err(cx.err(
                k("task"),
                format!("task {:?} is level {}: under mc2 only level-A tasks run from the table", s.task, spec.criticality),
            ));
        }
        if s.cpu.is_some() {
            return Err(cx.err(k("cpu"), "does not apply to mc2: a level-A slot runs on its task's cpu"));
        }
        let start = cx.time(&k("start_ms"), s.start_ms)?;
        let duration = cx.positive(&k("duration_ms"), s.duration_ms)?;
        if start + duration > major_frame {
            return Err(cx.err(k("duration_ms"), "slot ends after the major frame"));
        }
        let cpu = spec.cpu.expect("validated: a level-A task under mc2 has a cpu");
        slots.push((j, CyclicSlot { cpu, start, duration, task }));
    }
    if let Some(i) = (0..tasks.len()).find(|&i| tasks[i].criticality == Criticality::A && slots.iter().all(|(_, s)| s.task != i)) {
        return Err(cx.err(
            "scheduler.slot",
            format!("level-A task {:?} has no slot: it runs only in its [[scheduler.slot]] windows", tasks[i].name),
        ));
    }
    sorted_table(cx, "scheduler.slot", major_frame, slots)
}

/// `[[scheduler.server]]` and each task's `server`: the scheduler hierarchy, or `None` when the
/// file declares no servers (then no task may name one).
pub(super) fn validate_hierarchy(
    cx: &Ctx,
    raw: &RawScheduler,
    raw_tasks: &[RawTask],
    tasks: &[TaskSpec],
    cpus: usize,
) -> Result<Option<Hierarchy>, ScenarioError> {
    if raw.server.is_empty() {
        if raw.event_cost_us.is_some() {
            return Err(cx.err(
                "scheduler.event_cost_us",
                "only applies with [[scheduler.server]]: it is the cost of delivering an event to a server",
            ));
        }
        if raw.pending_event_check.is_some() {
            return Err(cx.err("scheduler.pending_event_check", "only applies with [[scheduler.server]]"));
        }
        if let Some(i) = raw_tasks.iter().position(|t| t.server.is_some()) {
            return Err(
                cx.err(format!("task[{i}].server"), "no [[scheduler.server]] is declared: without servers tasks run under the root")
            );
        }
        return Ok(None);
    }
    // MC²'s servers sit under its levels ([`validate_mc2_servers`]), not in a HiRes tree.
    if raw.kind.choice == SchedulerKind::Mc2 {
        return Ok(None);
    }
    let root_policy = match raw.kind.choice {
        SchedulerKind::Fp => ServerPolicy::Fp,
        SchedulerKind::Rm => ServerPolicy::Rm,
        SchedulerKind::Dm => ServerPolicy::Dm,
        SchedulerKind::Edf => ServerPolicy::Edf,
        other => {
            return Err(cx.err(
                "scheduler.server",
                format!("a scheduler hierarchy needs kind = \"fp\", \"rm\", \"dm\" or \"edf\" at its root (got {:?})", other.as_str()),
            ))
        }
    };
    let index = server_index(cx, raw)?;
    let mut parents = Vec::with_capacity(raw.server.len());
    for (j, s) in raw.server.iter().enumerate() {
        let parent = match s.parent.as_deref() {
            None | Some("root") => None,
            Some(p) => Some(
                *index
                    .get(p)
                    .ok_or_else(|| cx.err(format!("scheduler.server[{j}].parent"), format!("no server named {p:?} (nor \"root\")")))?,
            ),
        };
        parents.push(parent);
    }
    // A walk up from any server reaches the root within as many steps as there are servers.
    for j in 0..raw.server.len() {
        let mut path = vec![j];
        let mut at = parents[j];
        while let Some(p) = at {
            if path.contains(&p) {
                path.push(p);
                let names: Vec<&str> = path.iter().map(|&i| raw.server[i].name.as_str()).collect();
                return Err(cx.err(format!("scheduler.server[{j}].parent"), format!("the tree has a cycle: {}", names.join(" -> "))));
            }
            path.push(p);
            at = parents[p];
        }
    }
    let default_cost = match raw.event_cost_us {
        None => Nanos::ZERO,
        Some(us) => event_cost(cx, "scheduler.event_cost_us", us)?,
    };
    let mut servers: Vec<ServerSpec> = Vec::with_capacity(raw.server.len());
    for (j, s) in raw.server.iter().enumerate() {
        let k = |f: &str| format!("scheduler.server[{j}].{f}");
        let parent_policy = match parents[j] {
            None => root_policy,
            Some(p) => raw.server[p].policy().unwrap_or(root_policy),
        };
        // A cyclic server may give windows to child servers, gedf and gfp run the best of them
        // on their CPUs; pedf and pfp run tasks.
        if let Some(p) = parents[j].filter(|_| matches!(parent_policy, ServerPolicy::Pedf | ServerPolicy::Pfp)) {
            return Err(cx.err(
                k("parent"),
                format!("server {:?} has policy {:?}: it runs tasks, not servers", raw.server[p].name, parent_policy.as_str()),
            ));
        }
        let span = server_policies::server_cpus(cx, j, s, parents[j].is_none(), cpus)?;
        let windows = s.policy() == Some(ServerPolicy::Cyclic) && parents.contains(&Some(j));
        let over_servers = matches!(s.policy(), Some(ServerPolicy::Gedf | ServerPolicy::Gfp)) && parents.contains(&Some(j));
        server_policies::check_task_policy(cx, j, s, parents[j].is_none(), root_policy, windows)?;
        let task_policy = s.policy().unwrap_or(root_policy).is_task_policy() && !windows;
        let (budget, period) = match s.kind {
            ServerKind::Level => {
                if s.budget_ms.is_some() {
                    return Err(cx.err(k("budget_ms"), "a level server has no budget: it is a plain priority level"));
                }
                if s.period_ms.is_some() {
                    return Err(cx.err(k("period_ms"), "a level server has no period: it is a plain priority level"));
                }
                if !matches!(parent_policy, ServerPolicy::Fp | ServerPolicy::Gfp | ServerPolicy::Cyclic) {
                    return Err(cx.err(
                        k("kind"),
                        format!(
                            "a level is ordered by its priority, so its parent's policy must be \"fp\" or \"gfp\" (or \"cyclic\", whose windows place it; got {:?})",
                            parent_policy.as_str()
                        ),
                    ));
                }
                (Nanos::ZERO, Nanos::ZERO)
            }
            ServerKind::Deferrable | ServerKind::Polling => {
                let budget = cx.positive(
                    &k("budget_ms"),
                    s.budget_ms.ok_or_else(|| cx.err(k("budget_ms"), "missing: a deferrable or polling server needs budget_ms"))?,
                )?;
                let period = cx.positive(
                    &k("period_ms"),
                    s.period_ms.ok_or_else(|| cx.err(k("period_ms"), "missing: a deferrable or polling server needs period_ms"))?,
                )?;
                if budget > period {
                    return Err(cx.err(
                        k("budget_ms"),
                        format!("must not exceed period_ms (got {} > {})", s.budget_ms.unwrap_or(0.0), s.period_ms.unwrap_or(0.0)),
                    ));
                }
                (budget, period)
            }
        };
        match (parent_policy, s.priority) {
            (ServerPolicy::Fp, None) => {
                return Err(cx.err(k("priority"), "missing: under an fp parent a server needs a priority (lower number = higher priority)"))
            }
            (ServerPolicy::Rm | ServerPolicy::Dm | ServerPolicy::Edf, Some(_)) => {
                return Err(cx.err(
                    k("priority"),
                    format!("only applies under an fp parent; under {:?} the period orders servers", parent_policy.as_str()),
                ))
            }
            (ServerPolicy::Gfp, None) => {
                return Err(cx.err(k("priority"), "missing: under a gfp parent a server needs a priority (lower number = higher priority)"))
            }
            (ServerPolicy::Gedf, Some(_)) => {
                return Err(cx.err(k("priority"), "only applies under an fp or gfp parent; under gedf the end of its period orders it"))
            }
            (ServerPolicy::Cyclic, Some(_)) => {
                return Err(cx.err(k("priority"), "only applies under an fp parent; under a cyclic parent its windows decide when it runs"))
            }
            _ => {}
        }
        let cpu = match (parents[j], s.cpu) {
            (Some(_), Some(_)) => return Err(cx.err(k("cpu"), "only top-level servers take cpu; a child runs on its parent's")),
            (None, None) => 0,
            (None, Some(c)) if c < 0 || c as usize >= cpus => {
                return Err(cx.err(k("cpu"), format!("CPU {c} does not exist: machine.cpus = {cpus}")))
            }
            (None, Some(c)) => c as usize,
            (Some(_), None) => usize::MAX,
        };
        let cpu = span.as_ref().map_or(cpu, |list| list[0]);
        servers.push(ServerSpec {
            name: s.name.clone(),
            parent: parents[j],
            kind: s.kind,
            budget,
            period,
            priority: s.priority,
            policy: s.policy().unwrap_or(root_policy),
            cpu,
            event_cost: match s.event_cost_us {
                None if task_policy => Nanos::ZERO,
                None => default_cost,
                Some(us) => event_cost(cx, &k("event_cost_us"), us)?,
            },
            cpus: if task_policy { span.unwrap_or_else(|| vec![cpu]) } else { Vec::new() },
            priorities: None,
            table: None,
            windows,
            over_servers,
            task_cpus: Vec::new(),
            external: server_policies::external_policy(cx, j, s)?,
        });
    }
    // A child's CPU is its top-level ancestor's.
    for j in 0..servers.len() {
        let mut top = j;
        while let Some(p) = servers[top].parent {
            top = p;
        }
        servers[j].cpu = servers[top].cpu;
    }
    let mut task_server = Vec::with_capacity(tasks.len());
    for (i, rt) in raw_tasks.iter().enumerate() {
        let key = format!("task[{i}].server");
        let name = rt
            .server
            .as_deref()
            .ok_or_else(|| cx.err(&key, "missing: with [[scheduler.server]] declared, every task names the leaf server it runs in"))?;
        if name == "root" {
            return Err(cx.err(key, "the root has servers below it: tasks attach to leaf servers"));
        }
        let s = *index.get(name).ok_or_else(|| cx.err(&key, format!("no server named {name:?}")))?;
        if let Some(child) = servers.iter().find(|c| c.parent == Some(s)) {
            return Err(cx.err(key, format!("server {name:?} has child servers (such as {:?}): tasks attach to leaf servers", child.name)));
        }
        if servers[s].policy == ServerPolicy::Fp && tasks[i].priority.is_none() {
            return Err(cx.err(
                format!("task[{i}].priority"),
                format!("missing: server {name:?} orders its tasks by fixed priority (policy \"fp\")"),
            ));
        }
        task_server.push(s);
    }
    if let (Some(t), Some(c)) =
        (servers.iter().find(|s| s.has_task_policy() || s.over_servers), servers.iter().position(|s| s.event_cost > Nanos::ZERO))
    {
        let key = if raw.server[c].event_cost_us.is_some() {
            format!("scheduler.server[{c}].event_cost_us")
        } else {
            "scheduler.event_cost_us".into()
        };
        return Err(cx.err(
            key,
            format!(
                "event delivery does not combine with servers that schedule tasks on CPUs of their own (server {:?} has policy {:?})",
                t.name,
                t.policy.as_str()
            ),
        ));
    }
    server_policies::finish_task_policies(cx, &raw.server, &mut servers, tasks, &task_server)?;
    Ok(Some(Hierarchy { root_policy, servers, task_server, pending_event_check: raw.pending_event_check.unwrap_or(true) }))
}

/// Each server's index by name: names non-empty, unique and not "root".
fn server_index<'r>(cx: &Ctx, raw: &'r RawScheduler) -> Result<BTreeMap<&'r str, usize>, ScenarioError> {
    let mut index = BTreeMap::new();
    for (j, s) in raw.server.iter().enumerate() {
        let key = format!("scheduler.server[{j}].name");
        if s.name.trim().is_empty() {
            return Err(cx.err(key, "must not be empty"));
        }
        if s.name == "root" {
            return Err(cx.err(key, "\"root\" names the root of the hierarchy; give the server another name"));
        }
        if let Some(prev) = index.insert(s.name.as_str(), j) {
            return Err(cx.err(key, format!("duplicate server name {:?} (also scheduler.server[{prev}])", s.name)));
        }
    }
    Ok(index)
}

/// `[[scheduler.server]]` under `kind = "mc2"`: deferrable and polling servers, each at the
/// level its tasks share (B, C or D; level A runs from its table), directly under that level
/// ([`Mc2Server`]). Tasks that name no server run under their level directly. What belongs to
/// HiRes server trees (nesting, levels as servers, event delivery, reservations) is refused
/// with the reason.
fn validate_mc2_servers(
    cx: &Ctx,
    raw: &RawScheduler,
    raw_tasks: &[RawTask],
    tasks: &[TaskSpec],
) -> Result<(Vec<Mc2Server>, Vec<Option<usize>>), ScenarioError> {
    if raw.server.is_empty() {
        // A task naming a server is refused with the hierarchy's rules.
        return Ok((Vec::new(), vec![None; tasks.len()]));
    }
    const MC2: &str = "under kind = \"mc2\"";
    let hires_only = |key: &str, what: &str| {
        cx.err(
            key,
            format!("{what} belongs to HiRes server trees (kind = \"fp\", \"rm\", \"dm\" or \"edf\"); {MC2} a level dispatches its servers' jobs directly"),
        )
    };
    if raw.event_cost_us.is_some() {
        return Err(hires_only("scheduler.event_cost_us", "delivering events through child-scheduler threads"));
    }
    if raw.pending_event_check.is_some() {
        return Err(hires_only("scheduler.pending_event_check", "delivering events through child-scheduler threads"));
    }
    if raw.overcommit.is_some() {
        return Err(hires_only("scheduler.overcommit", "admitting servers' reservations from their parents"));
    }
    let index = server_index(cx, raw)?;
    let mut task_server = Vec::with_capacity(tasks.len());
    for (i, rt) in raw_tasks.iter().enumerate() {
        let Some(name) = rt.server.as_deref() else {
            task_server.push(None);
            continue;
        };
        let s = *index.get(name).ok_or_else(|| cx.err(format!("task[{i}].server"), format!("no server named {name:?}")))?;
        task_server.push(Some(s));
    }
    let mut servers = Vec::with_capacity(raw.server.len());
    for (j, s) in raw.server.iter().enumerate() {
        let k = |f: &str| format!("scheduler.server[{j}].{f}");
        if s.kind == ServerKind::Level {
            return Err(cx.err(
                k("kind"),
                format!("{MC2} the criticality levels are the levels: a server under one needs a budget (\"deferrable\" or \"polling\")"),
            ));
        }
        if s.parent.is_some() {
            return Err(cx.err(k("parent"), format!("{MC2} a server runs directly under the level of its tasks")));
        }
        if s.priority.is_some() {
            return Err(cx.err(
                k("priority"),
                format!("{MC2} its level orders a server: by period at level B (rate-monotonic), by the end of its period at level C, by release at level D"),
            ));
        }
        for (present, field, why) in [
            (s.cpus.is_some(), "cpus", "a server runs one job at a time, on its core at level B or on any CPU at levels C and D"),
            (s.priorities.is_some(), "priorities", "policy = \"fp\" orders a server's tasks by their priority"),
            (
                s.major_frame_ms.is_some() || !s.slot.is_empty(),
                "major_frame_ms",
                "level A's table is [[scheduler.slot]]; a server runs on a budget",
            ),
        ] {
            if present {
                return Err(cx.err(k(field), format!("does not apply {MC2}: {why}")));
            }
        }
        if s.event_cost_us.is_some() {
            return Err(hires_only(&k("event_cost_us"), "delivering events through child-scheduler threads"));
        }
        if s.overhead_percent.is_some() {
            return Err(cx.err(
                k("overhead_percent"),
                format!("keeps CPU back from child servers, and {MC2} a server has none: its CPU is its budget"),
            ));
        }
        let budget = cx.positive(
            &k("budget_ms"),
            s.budget_ms.ok_or_else(|| cx.err(k("budget_ms"), "missing: a deferrable or polling server needs budget_ms"))?,
        )?;
        let period = cx.positive(
            &k("period_ms"),
            s.period_ms.ok_or_else(|| cx.err(k("period_ms"), "missing: a deferrable or polling server needs period_ms"))?,
        )?;
        if budget > period {
            return Err(cx.err(
                k("budget_ms"),
                format!("must not exceed period_ms (got {} > {})", s.budget_ms.unwrap_or(0.0), s.period_ms.unwrap_or(0.0)),
            ));
        }
        let members: Vec<usize> = (0..tasks.len()).filter(|&i| task_server[i] == Some(j)).collect();
        let Some(&first) = members.first() else {
            return Err(cx.err(k("name"), format!("no task names server {:?}, and {MC2} a server runs at the level of its tasks", s.name)));
        };
        let (level, core) = (tasks[first].criticality, tasks[first].cpu);
        if level == Criticality::A {
            return Err(cx.err(
                format!("task[{first}].server"),
                format!("level-A task {:?} runs only in its table slots ([[scheduler.slot]]), so no server holds it", tasks[first].name),
            ));
        }
        for &i in &members[1..] {
            let t = &tasks[i];
            if t.criticality != level {
                return Err(cx.err(
                    format!("task[{i}].server"),
                    format!(
                        "server {:?} runs at level {level} (task {:?}), but task {:?} is level {}: a server runs at one level, so its tasks share a criticality",
                        s.name, tasks[first].name, t.name, t.criticality
                    ),
                ));
            }
            if t.cpu != core {
                return Err(cx.err(
                    format!("task[{i}].server"),
                    format!(
                        "level-B server {:?} runs on core {} (task {:?}), but task {:?} is pinned to cpu {}: a level-B server runs on one core",
                        s.name,
                        core.unwrap_or(0),
                        tasks[first].name,
                        t.name,
                        t.cpu.unwrap_or(0)
                    ),
                ));
            }
        }
        match (s.cpu, core) {
            (Some(c), Some(core)) if c != core as i64 => {
                return Err(cx.err(k("cpu"), format!("a level-B server runs on its tasks' core {core} (got cpu = {c})")))
            }
            (Some(c), None) => {
                return Err(
                    cx.err(k("cpu"), format!("level {level} is scheduled globally {MC2}; its servers run on any CPU (got cpu = {c})"))
                )
            }
            _ => {}
        }
        let policy = match s.policy() {
            None if level == Criticality::B => ServerPolicy::Rm,
            None => ServerPolicy::Edf,
            Some(p @ (ServerPolicy::Fp | ServerPolicy::Rm | ServerPolicy::Dm | ServerPolicy::Edf)) => p,
            Some(p) => {
                return Err(cx.err(
                    k("policy"),
                    format!(
                    "a server {MC2} runs one job at a time, so its policy orders its tasks: \"fp\", \"rm\", \"dm\" or \"edf\" (got {:?})",
                    p.as_str()
                ),
                ))
            }
        };
        if policy == ServerPolicy::Fp {
            if let Some(&i) = members.iter().find(|&&i| tasks[i].priority.is_none()) {
                return Err(cx.err(
                    format!("task[{i}].priority"),
                    format!("missing: server {:?} orders its tasks by fixed priority (policy \"fp\")", s.name),
                ));
            }
        }
        servers.push(Mc2Server { name: s.name.clone(), kind: s.kind, budget, period, level, cpu: core, policy });
    }
    Ok((servers, task_server))
}

/// A child-scheduler thread's CPU time per delivered event, given in microseconds.
fn event_cost(cx: &Ctx, key: &str, us: f64) -> Result<Nanos, ScenarioError> {
    if !us.is_finite() {
        return Err(cx.err(key, "must be a finite number of microseconds"));
    }
    if us < 0.0 {
        return Err(cx.err(key, format!("must not be negative (got {us})")));
    }
    Nanos::try_from_ms_f64(us / 1000.0).ok_or_else(|| cx.err(key, format!("is too large (got {us})")))
}
