//! `[[task]]`: timing, criticality, pinning, overruns and suspensions, and the command a task
//! runs on Linux. What a task touches in memory is checked in [`super::memory`].

use super::components::Components;
use super::error::{Ctx, ScenarioError};
use super::raw::{ArrivalKind, RawExec, RawTask};
use crate::model::program::ResourceSpec;
use crate::model::scheduler::SchedulerKind;
use crate::model::task::{Arrival, Criticality, ExecTime, OverrunPolicy, Suspension, TaskCommand, TaskSpec};
use std::collections::BTreeMap;

/// What a task's placement is checked against.
#[derive(Clone, Copy)]
pub(super) struct Machine {
    pub(super) cpus: usize,
    pub(super) kind: SchedulerKind,
    /// Whether the file declares `[[scheduler.server]]` (then the task's server places it).
    pub(super) servers: bool,
}

/// Every task, in file order, with unique names; memory and command are filled in later.
pub(super) fn validate_tasks(
    cx: &Ctx,
    raw: &[RawTask],
    machine: Machine,
    resources: &[ResourceSpec],
    components: &Components,
) -> Result<Vec<TaskSpec>, ScenarioError> {
    if raw.is_empty() {
        return Err(cx.err("task", "no tasks: add at least one [[task]] entry"));
    }
    let mut tasks = Vec::with_capacity(raw.len());
    let mut names = BTreeMap::new();
    for (i, rt) in raw.iter().enumerate() {
        let t = validate_task(cx, i, rt, machine, resources, components)?;
        if let Some(prev) = names.insert(t.name.clone(), i) {
            return Err(cx.err(format!("task[{i}].name"), format!("duplicate task name {:?} (also task[{prev}])", t.name)));
        }
        tasks.push(t);
    }
    Ok(tasks)
}

fn validate_task(
    cx: &Ctx,
    i: usize,
    rt: &RawTask,
    machine: Machine,
    resources: &[ResourceSpec],
    components: &Components,
) -> Result<TaskSpec, ScenarioError> {
    let Machine { cpus, kind, servers } = machine;
    let k = |field: &str| format!("task[{i}].{field}");
    if rt.name.trim().is_empty() {
        return Err(cx.err(k("name"), "must not be empty"));
    }
    let arrival_kind = rt.arrival.unwrap_or(ArrivalKind::Periodic);
    let period = match (arrival_kind, rt.period_ms, rt.min_interarrival_ms) {
        (_, Some(_), Some(_)) => return Err(cx.err(k("min_interarrival_ms"), "give either period_ms or min_interarrival_ms, not both")),
        (_, Some(p), None) => cx.positive(&k("period_ms"), p)?,
        (ArrivalKind::Sporadic, None, Some(p)) => cx.positive(&k("min_interarrival_ms"), p)?,
        (_, None, Some(_)) => return Err(cx.err(k("min_interarrival_ms"), "only applies to arrival = \"sporadic\"")),
        (_, None, None) => return Err(cx.err(k("period_ms"), "missing: every task needs period_ms (or min_interarrival_ms when sporadic)")),
    };
    let arrival = match arrival_kind {
        ArrivalKind::Periodic => {
            if rt.max_interarrival_ms.is_some() {
                return Err(cx.err(k("max_interarrival_ms"), "only applies to arrival = \"sporadic\""));
            }
            Arrival::Periodic
        }
        ArrivalKind::Sporadic => {
            let max_interarrival = match rt.max_interarrival_ms {
                Some(m) => cx.positive(&k("max_interarrival_ms"), m)?,
                None => period,
            };
            if max_interarrival < period {
                return Err(cx.err(k("max_interarrival_ms"), "must be at least the minimum inter-arrival time"));
            }
            Arrival::Sporadic { max_interarrival }
        }
    };
    let program = match &rt.program {
        None => None,
        Some(p) => {
            if !rt.suspend.is_empty() {
                return Err(cx.err(k("suspend"), "does not apply to a task with a program"));
            }
            // With wcet_ms or exec the job's demand is a budget the program draws from.
            let budgeted = rt.wcet_ms.is_some() || rt.exec.is_some();
            let program = super::resources::validate_program(cx, i, p, resources, components, budgeted)?;
            Some(program)
        }
    };
    let exec = match (&rt.wcet_ms, &rt.exec) {
        (Some(_), Some(_)) => return Err(cx.err(k("exec"), "give either wcet_ms or exec, not both")),
        // The worst case: every call that can be made, with its entry cost (checked to fit).
        (None, None) if program.is_some() => {
            ExecTime::Fixed(program.as_ref().and_then(|p| p.worst_case_compute(&components.invocations)).expect("checked"))
        }
        (None, None) => return Err(cx.err(k("wcet_ms"), "missing: give wcet_ms, an exec distribution or a program")),
        (Some(c), None) => ExecTime::Fixed(cx.positive(&k("wcet_ms"), *c)?),
        (None, Some(e)) => validate_exec(cx, &k("exec"), e)?,
    };
    let deadline = match rt.deadline_ms {
        Some(d) => cx.positive(&k("deadline_ms"), d)?,
        None => period,
    };
    let offset = cx.time(&k("offset_ms"), rt.offset_ms)?;
    let stop = match rt.stop_ms {
        None => None,
        Some(ms) => {
            let stop = cx.positive(&k("stop_ms"), ms)?;
            if stop <= offset {
                return Err(cx.err(k("stop_ms"), "must be after offset_ms, or the task releases no job"));
            }
            Some(stop)
        }
    };
    let criticality = rt.criticality.unwrap_or(Criticality::C);
    let cpu = match rt.cpu {
        // Under mc2 the level decides: A and B are partitioned, C and D global.
        None if kind == SchedulerKind::Mc2 && criticality <= Criticality::B => {
            return Err(cx.err(k("cpu"), format!("missing: a level-{criticality} task runs on one core under mc2; give its cpu")))
        }
        None => None,
        Some(c) if kind == SchedulerKind::Mc2 && criticality >= Criticality::C => {
            return Err(cx.err(
                k("cpu"),
                format!("level {criticality} is scheduled globally under mc2; only levels A and B take a cpu (got cpu = {c})"),
            ))
        }
        // Under servers, the task's server decides (pfp and pedf servers take pinned tasks).
        Some(c) if !kind.is_partitioned() && !matches!(kind, SchedulerKind::Mc2 | SchedulerKind::External) && !servers => {
            return Err(
                cx.err(k("cpu"), format!("pinning applies to partitioned schedulers (pfp, pedf), not {:?} (got cpu = {c})", kind.as_str()))
            )
        }
        Some(c) if c < 0 || c as usize >= cpus => {
            return Err(cx.err(k("cpu"), format!("CPU {c} does not exist: machine.cpus = {cpus}, so CPUs are 0..{}", cpus - 1)))
        }
        Some(c) => Some(c as usize),
    };
    let mut suspensions = Vec::with_capacity(rt.suspend.len());
    for (j, s) in rt.suspend.iter().enumerate() {
        let after = cx.time(&k(&format!("suspend[{j}].after_ms")), s.after_ms)?;
        let duration = cx.positive(&k(&format!("suspend[{j}].for_ms")), s.for_ms)?;
        if after > exec.bcet() {
            return Err(
                cx.err(k(&format!("suspend[{j}].after_ms")), "must not exceed the task's smallest execution time, so every job reaches it")
            );
        }
        suspensions.push(Suspension { after, duration });
    }
    suspensions.sort_by_key(|s| s.after);
    Ok(TaskSpec {
        name: rt.name.clone(),
        arrival,
        exec,
        period,
        deadline,
        offset,
        stop,
        priority: rt.priority,
        criticality,
        cpu,
        overrun: rt.overrun.unwrap_or(OverrunPolicy::Continue),
        suspensions,
        memory: None,
        command: None,
        program,
    })
}

fn validate_exec(cx: &Ctx, key: &str, e: &RawExec) -> Result<ExecTime, ScenarioError> {
    use super::raw::DistName;
    let k = |field: &str| format!("{key}.{field}");
    let dist = e.dist.name();
    let need = |v: Option<f64>, field: &str| v.ok_or_else(|| cx.err(k(field), format!("missing: dist = {dist:?} needs {field}")));
    let forbid = |present: bool, field: &str| {
        if present {
            Err(cx.err(k(field), format!("does not apply to dist = {dist:?}")))
        } else {
            Ok(())
        }
    };
    match e.dist {
        DistName::Fixed => {
            forbid(e.min_ms.is_some(), "min_ms")?;
            forbid(e.mean_ms.is_some(), "mean_ms")?;
            forbid(e.sd_ms.is_some(), "sd_ms")?;
            forbid(e.values_ms.is_some(), "values_ms")?;
            Ok(ExecTime::Fixed(cx.positive(&k("max_ms"), need(e.max_ms, "max_ms")?)?))
        }
        DistName::Uniform => {
            forbid(e.mean_ms.is_some(), "mean_ms")?;
            forbid(e.sd_ms.is_some(), "sd_ms")?;
            forbid(e.values_ms.is_some(), "values_ms")?;
            let min = cx.time(&k("min_ms"), need(e.min_ms, "min_ms")?)?;
            let max = cx.positive(&k("max_ms"), need(e.max_ms, "max_ms")?)?;
            if min > max {
                return Err(cx.err(k("min_ms"), "must not exceed max_ms"));
            }
            Ok(ExecTime::Uniform { min, max })
        }
        DistName::Normal => {
            forbid(e.values_ms.is_some(), "values_ms")?;
            let mean = cx.positive(&k("mean_ms"), need(e.mean_ms, "mean_ms")?)?;
            let sd = cx.time(&k("sd_ms"), need(e.sd_ms, "sd_ms")?)?;
            let min = cx.time(&k("min_ms"), e.min_ms.unwrap_or(0.0))?;
            let max = cx.positive(&k("max_ms"), need(e.max_ms, "max_ms")?)?;
            if min > max {
                return Err(cx.err(k("min_ms"), "must not exceed max_ms"));
            }
            if mean < min || mean > max {
                return Err(cx.err(k("mean_ms"), "must lie within [min_ms, max_ms]"));
            }
            Ok(ExecTime::Normal { mean, sd, min, max })
        }
        DistName::Empirical => {
            forbid(e.min_ms.is_some(), "min_ms")?;
            forbid(e.max_ms.is_some(), "max_ms")?;
            forbid(e.mean_ms.is_some(), "mean_ms")?;
            forbid(e.sd_ms.is_some(), "sd_ms")?;
            let values = e.values_ms.as_ref().ok_or_else(|| cx.err(k("values_ms"), "missing: dist = \"empirical\" needs values_ms"))?;
            if values.is_empty() {
                return Err(cx.err(k("values_ms"), "must list at least one value"));
            }
            let v =
                values.iter().enumerate().map(|(j, &x)| cx.positive(&format!("{key}.values_ms[{j}]"), x)).collect::<Result<Vec<_>, _>>()?;
            Ok(ExecTime::Empirical(v))
        }
    }
}

/// `command` and `reports_jobs` of task `i`.
pub(super) fn validate_command(cx: &Ctx, i: usize, rt: &RawTask) -> Result<Option<TaskCommand>, ScenarioError> {
    let Some(argv) = &rt.command else {
        if rt.reports_jobs.is_some() {
            return Err(cx.err(
                format!("task[{i}].reports_jobs"),
                "applies only to a task with a command (the shipped workers always report their jobs)",
            ));
        }
        return Ok(None);
    };
    match argv.first() {
        None => return Err(cx.err(format!("task[{i}].command"), "must name a program: command = [\"program\", \"arg\", ...]")),
        Some(program) if program.is_empty() => return Err(cx.err(format!("task[{i}].command[0]"), "the program name is empty")),
        Some(_) => {}
    }
    // exec takes C strings.
    if let Some(n) = argv.iter().position(|a| a.contains('\0')) {
        return Err(cx.err(format!("task[{i}].command[{n}]"), "contains a NUL character"));
    }
    Ok(Some(TaskCommand { argv: argv.clone(), reports_jobs: rt.reports_jobs.unwrap_or(false) }))
}
