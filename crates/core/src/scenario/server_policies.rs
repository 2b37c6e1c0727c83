//! `[[scheduler.server]]` entries whose policy schedules tasks over CPUs of their own (gedf,
//! gfp, pedf, pfp, cyclic): their CPUs, priorities, partition and table.

use super::error::{Ctx, ScenarioError};
use super::machine::sorted_table;
use super::raw::RawServer;
use crate::model::scheduler::{CyclicSlot, ExternalScheduler, PriorityOrder};
use crate::model::scheduler::{ServerKind, ServerPolicy, ServerSpec};
use crate::model::task::TaskSpec;

/// `cpus` of server `j`: the CPUs a top-level task-policy server runs on, if given.
pub(super) fn server_cpus(cx: &Ctx, j: usize, s: &RawServer, top_level: bool, cpus: usize) -> Result<Option<Vec<usize>>, ScenarioError> {
    let key = format!("scheduler.server[{j}].cpus");
    let Some(list) = &s.cpus else { return Ok(None) };
    if !top_level {
        return Err(cx.err(key, "only top-level servers take cpus; a child runs on its parent's CPU"));
    }
    if s.cpu.is_some() {
        return Err(cx.err(key, "give cpu or cpus, not both"));
    }
    if list.is_empty() {
        return Err(cx.err(key, "must name at least one CPU"));
    }
    let mut out: Vec<usize> = Vec::with_capacity(list.len());
    for &c in list {
        if c < 0 || c as usize >= cpus {
            return Err(cx.err(key, format!("CPU {c} does not exist: machine.cpus = {cpus}")));
        }
        if out.contains(&(c as usize)) {
            return Err(cx.err(key, format!("lists CPU {c} twice")));
        }
        out.push(c as usize);
    }
    let policy = s.policy().unwrap_or(ServerPolicy::Fp);
    if out.len() > 1 && !policy.is_task_policy() {
        return Err(cx.err(
            key,
            format!(
                "policy {:?} orders one CPU's jobs; a server on several CPUs needs policy gedf, gfp, pedf, pfp or cyclic",
                policy.as_str()
            ),
        ));
    }
    if out.len() > 1 && s.kind != ServerKind::Level {
        return Err(cx.err(format!("scheduler.server[{j}].kind"), "only a level may run on several CPUs: a budget belongs to one CPU"));
    }
    Ok(Some(out))
}

/// Server `j`'s Python policy with its `config`, if its policy names one.
pub(super) fn external_policy(cx: &Ctx, j: usize, s: &RawServer) -> Result<Option<ExternalScheduler>, ScenarioError> {
    let config = s.config.as_ref().map(|c| c.0.clone());
    match s.policy_name.as_ref().and_then(|p| p.external.clone()) {
        Some(name) => Ok(Some(ExternalScheduler { name, config: config.unwrap_or_else(|| serde_json::json!({})) })),
        None if config.is_some() => {
            Err(cx.err(format!("scheduler.server[{j}].config"), "only applies to a Python policy (\"file.py:Class\")"))
        }
        None => Ok(None),
    }
}

/// Checks a scheduler written outside critmem with the tasks and CPUs it will schedule: an
/// unknown name at `name_key`, a configuration that does not fit at `config_key`.
pub(super) fn check_external(
    cx: &Ctx,
    spec: &ExternalScheduler,
    tasks: &[TaskSpec],
    cpus: usize,
    name_key: &str,
    config_key: &str,
) -> Result<(), ScenarioError> {
    use crate::model::external::{external_scheduler_check, ExternalSchedulerError};
    let resolver =
        external_scheduler_check().ok_or_else(|| cx.err(name_key, format!("no resolver of Python schedulers for {:?}", spec.name)))?;
    resolver.check(&spec.name, &spec.config, tasks, cpus).map_err(|e| match e {
        ExternalSchedulerError::NotFound(m) => cx.err(name_key, m),
        ExternalSchedulerError::BadConfig(m) => cx.err(config_key, m),
    })
}

/// The rules of a task policy on server `j`, before its tasks are known; `windows`: a cyclic
/// server with child servers.
pub(super) fn check_task_policy(
    cx: &Ctx,
    j: usize,
    s: &RawServer,
    top_level: bool,
    root_policy: ServerPolicy,
    windows: bool,
) -> Result<(), ScenarioError> {
    let k = |f: &str| format!("scheduler.server[{j}].{f}");
    let policy = s.policy().unwrap_or(root_policy);
    if windows && s.cpus.as_ref().is_some_and(|c| c.len() > 1) {
        return Err(cx.err(k("cpus"), "a cyclic server over child servers gives them windows on one CPU"));
    }
    if policy.is_task_policy() && !windows {
        if !top_level {
            return Err(cx.err(
                k("policy"),
                format!("a server with policy {:?} runs its tasks on CPUs of its own, so it sits directly under the root", policy.as_str()),
            ));
        }
        if root_policy == ServerPolicy::Edf {
            return Err(cx.err(
                k("policy"),
                format!("a {:?} server needs a root with a static order: [scheduler] kind fp, rm or dm (got edf)", policy.as_str()),
            ));
        }
        if s.event_cost_us.is_some() {
            return Err(cx.err(k("event_cost_us"), "event delivery is modelled for servers with policy fp, rm, dm or edf"));
        }
    }
    if s.priorities.is_some() && !matches!(policy, ServerPolicy::Gfp | ServerPolicy::Pfp) {
        return Err(cx.err(k("priorities"), format!("only applies to policy gfp and pfp, not {:?}", policy.as_str())));
    }
    if policy != ServerPolicy::Cyclic {
        if s.major_frame_ms.is_some() {
            return Err(cx.err(k("major_frame_ms"), "only applies to policy \"cyclic\""));
        }
        if !s.slot.is_empty() {
            return Err(cx.err(k("slot"), "only applies to policy \"cyclic\""));
        }
    }
    Ok(())
}

/// Fills in what task-policy servers need from their tasks: gfp/pfp priorities, the pfp/pedf
/// partition, the cyclic table; and checks every task's `cpu` against its server.
pub(super) fn finish_task_policies(
    cx: &Ctx,
    raw: &[RawServer],
    servers: &mut [ServerSpec],
    tasks: &[TaskSpec],
    task_server: &[usize],
) -> Result<(), ScenarioError> {
    for (i, t) in tasks.iter().enumerate() {
        let s = &servers[task_server[i]];
        if let Some(c) = t.cpu {
            if !matches!(s.policy, ServerPolicy::Pfp | ServerPolicy::Pedf) {
                return Err(cx.err(
                    format!("task[{i}].cpu"),
                    format!("pins the task to CPU {c}, but server {:?} (policy {:?}) places its tasks itself; pinning applies under pfp and pedf servers", s.name, s.policy.as_str()),
                ));
            }
            if !s.cpus.contains(&c) {
                return Err(cx.err(format!("task[{i}].cpu"), format!("CPU {c} is not one of server {:?}'s cpus {:?}", s.name, s.cpus)));
            }
        }
    }
    for j in 0..servers.len() {
        let own: Vec<usize> = (0..tasks.len()).filter(|&t| task_server[t] == j).collect();
        let policy = servers[j].policy;
        if matches!(policy, ServerPolicy::Gfp | ServerPolicy::Pfp) {
            let order = match raw[j].priorities {
                Some(o) => o,
                None if own.iter().all(|&t| tasks[t].priority.is_some()) => PriorityOrder::Explicit,
                None => PriorityOrder::RateMonotonic,
            };
            if order == PriorityOrder::Explicit {
                if let Some(&t) = own.iter().find(|&&t| tasks[t].priority.is_none()) {
                    return Err(cx.err(
                        format!("task[{t}].priority"),
                        format!("missing: server {:?} ranks its tasks by explicit priority", servers[j].name),
                    ));
                }
            }
            servers[j].priorities = Some(order);
        }
        if matches!(policy, ServerPolicy::Pfp | ServerPolicy::Pedf) {
            servers[j].task_cpus = worst_fit_onto(&own, tasks, &servers[j].cpus);
        }
        if policy == ServerPolicy::Cyclic {
            servers[j].table = Some(cyclic_table(cx, j, &raw[j], servers, &own, tasks)?);
        }
        if let Some(e) = &servers[j].external {
            let (name_key, config_key) = (format!("scheduler.server[{j}].policy"), format!("scheduler.server[{j}].config"));
            check_external(cx, e, tasks, servers[j].cpus.len(), &name_key, &config_key)?;
        }
    }
    Ok(())
}

/// `own` tasks onto `cpus`: pinned ones stay, the rest in order of decreasing utilisation to
/// the least-loaded CPU (ties to the one listed first), as the flat partitioned schedulers do.
fn worst_fit_onto(own: &[usize], tasks: &[TaskSpec], cpus: &[usize]) -> Vec<(usize, usize)> {
    let mut load = vec![0.0f64; cpus.len()];
    let mut out = Vec::with_capacity(own.len());
    for &t in own {
        if let Some(c) = tasks[t].cpu {
            let at = cpus.iter().position(|&x| x == c).expect("validated: a pinned task's cpu is the server's");
            load[at] += tasks[t].utilization();
            out.push((t, c));
        }
    }
    let mut free: Vec<usize> = own.iter().copied().filter(|&t| tasks[t].cpu.is_none()).collect();
    free.sort_by(|&a, &b| tasks[b].utilization().total_cmp(&tasks[a].utilization()).then(a.cmp(&b)));
    for t in free {
        let (at, _) = load.iter().enumerate().min_by(|(ia, a), (ib, b)| a.total_cmp(b).then(ia.cmp(ib))).expect("a server has a CPU");
        load[at] += tasks[t].utilization();
        out.push((t, cpus[at]));
    }
    out.sort_unstable();
    out
}

/// A cyclic server's table: slots name its own tasks, on its CPUs (the first by default), or,
/// over child servers, its children (by server index) on its CPU.
fn cyclic_table(
    cx: &Ctx,
    j: usize,
    raw: &RawServer,
    servers: &[ServerSpec],
    own: &[usize],
    tasks: &[TaskSpec],
) -> Result<crate::model::scheduler::CyclicTable, ScenarioError> {
    let server = &servers[j];
    let k = |f: &str| format!("scheduler.server[{j}].{f}");
    let frame_ms = raw.major_frame_ms.ok_or_else(|| cx.err(k("major_frame_ms"), "missing: a cyclic server needs major_frame_ms"))?;
    let major_frame = cx.positive(&k("major_frame_ms"), frame_ms)?;
    if raw.slot.is_empty() {
        return Err(cx.err(k("slot"), "a cyclic server needs at least one [[scheduler.server.slot]] (task, start_ms, duration_ms)"));
    }
    let mut slots = Vec::with_capacity(raw.slot.len());
    for (n, s) in raw.slot.iter().enumerate() {
        let ks = |f: &str| format!("scheduler.server[{j}].slot[{n}].{f}");
        let task = if server.windows {
            if s.task.is_some() {
                return Err(cx.err(ks("task"), "this cyclic server has child servers: each slot names one of them with server = \"...\""));
            }
            let name =
                s.server.as_deref().ok_or_else(|| cx.err(ks("server"), "missing: a slot names the child server it opens a window for"))?;
            (0..servers.len())
                .find(|&c| servers[c].name == name && servers[c].parent == Some(j))
                .ok_or_else(|| cx.err(ks("server"), format!("{name:?} is not a child server of {:?}", server.name)))?
        } else {
            if s.server.is_some() {
                return Err(cx.err(ks("server"), "only applies to a cyclic server with child servers; this one runs tasks"));
            }
            let name = s.task.as_deref().ok_or_else(|| cx.err(ks("task"), "missing: a slot names the task it runs"))?;
            let task = tasks.iter().position(|t| t.name == name).ok_or_else(|| cx.err(ks("task"), format!("no task named {name:?}")))?;
            if !own.contains(&task) {
                return Err(cx.err(ks("task"), format!("task {name:?} does not run under server {:?}", server.name)));
            }
            task
        };
        let start = cx.time(&ks("start_ms"), s.start_ms)?;
        let duration = cx.positive(&ks("duration_ms"), s.duration_ms)?;
        if start + duration > major_frame {
            return Err(cx.err(ks("duration_ms"), "slot ends after the major frame"));
        }
        let cpu = match s.cpu {
            None if server.windows => server.cpu,
            Some(_) if server.windows => return Err(cx.err(ks("cpu"), "a window runs on its cyclic server's CPU")),
            None => server.cpus[0],
            Some(c) if c >= 0 && server.cpus.contains(&(c as usize)) => c as usize,
            Some(c) => return Err(cx.err(ks("cpu"), format!("CPU {c} is not one of server {:?}'s cpus {:?}", server.name, server.cpus))),
        };
        slots.push((n, CyclicSlot { cpu, start, duration, task }));
    }
    if server.windows {
        if let Some(c) = (0..servers.len()).find(|&c| servers[c].parent == Some(j) && slots.iter().all(|(_, s)| s.task != c)) {
            return Err(cx.err(
                k("slot"),
                format!("child server {:?} has no window: under a cyclic server it runs only in its windows", servers[c].name),
            ));
        }
    } else if let Some(&t) = own.iter().find(|&&t| slots.iter().all(|(_, s)| s.task != t)) {
        return Err(cx.err(k("slot"), format!("task {:?} has no slot: under a cyclic server it runs only in its slots", tasks[t].name)));
    }
    sorted_table(cx, &k("slot"), major_frame, slots)
}
