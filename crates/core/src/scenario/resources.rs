//! `[[resource]]` and the tasks' `program`s: names, unit counts, lock nesting, an acyclic
//! lock order across tasks (so no run can deadlock), and the protocols the scheduler allows.

use super::error::{Ctx, ScenarioError};
use super::machine::SchedulerKind;
use super::raw::{RawAction, RawResource, RawScenario};
use crate::resources::{Action, Protocol, ResourceSpec, TaskProgram};
use crate::task::TaskSpec;
use std::collections::{BTreeMap, BTreeSet};

/// Most units one resource may have: unit counts are `u32` and sums of them must not overflow.
const MAX_UNITS: i64 = 1 << 20;

/// Every `[[resource]]`, in file order, with unique names.
pub(super) fn validate_resources(cx: &Ctx, raw: &[RawResource]) -> Result<Vec<ResourceSpec>, ScenarioError> {
    let mut out: Vec<ResourceSpec> = Vec::with_capacity(raw.len());
    for (i, r) in raw.iter().enumerate() {
        let k = |field: &str| format!("resource[{i}].{field}");
        if r.name.trim().is_empty() {
            return Err(cx.err(k("name"), "must not be empty"));
        }
        if let Some(prev) = out.iter().position(|o| o.name == r.name) {
            return Err(cx.err(k("name"), format!("duplicate resource name {:?} (also resource[{prev}])", r.name)));
        }
        let units = match r.units {
            None => 1,
            Some(u) if (1..=MAX_UNITS).contains(&u) => u as u32,
            Some(u) => return Err(cx.err(k("units"), format!("must be between 1 and {MAX_UNITS} (got {u})"))),
        };
        out.push(ResourceSpec { name: r.name.clone(), units, protocol: r.protocol.unwrap_or(Protocol::None) });
    }
    Ok(out)
}

/// `task[i].program`: each entry one action on a declared resource, locks nested and given
/// back innermost first, nothing held at the end.
pub(super) fn validate_program(cx: &Ctx, i: usize, raw: &[RawAction], resources: &[ResourceSpec]) -> Result<TaskProgram, ScenarioError> {
    let key = format!("task[{i}].program");
    if raw.is_empty() {
        return Err(cx.err(&key, "must list at least one step"));
    }
    let mut actions = Vec::with_capacity(raw.len());
    // Resources held at this point of the program, innermost last.
    let mut held: Vec<usize> = Vec::new();
    let find = |k: &str, name: &str| {
        resources.iter().position(|r| r.name == name).ok_or_else(|| {
            let declared: Vec<&str> = resources.iter().map(|r| r.name.as_str()).collect();
            let known = if declared.is_empty() { "none is declared".to_string() } else { format!("declared: {}", declared.join(", ")) };
            cx.err(k, format!("unknown resource {name:?} ({known})"))
        })
    };
    for (j, a) in raw.iter().enumerate() {
        let k = |field: &str| format!("{key}[{j}].{field}");
        let given = usize::from(a.compute_ms.is_some()) + usize::from(a.lock.is_some()) + usize::from(a.unlock.is_some());
        if given != 1 {
            return Err(cx.err(format!("{key}[{j}]"), "give exactly one of compute_ms, lock and unlock"));
        }
        if a.units.is_some() && a.lock.is_none() {
            return Err(cx.err(k("units"), "applies only to a lock"));
        }
        let action = if let Some(ms) = a.compute_ms {
            Action::Compute(cx.positive(&k("compute_ms"), ms)?)
        } else if let Some(name) = &a.lock {
            let resource = find(&k("lock"), name)?;
            let most = resources[resource].units;
            let units = match a.units {
                None => 1,
                Some(u) if u >= 1 && u <= i64::from(most) => u as u32,
                Some(u) => return Err(cx.err(k("units"), format!("must be between 1 and {most}, the units of {name:?} (got {u})"))),
            };
            if held.contains(&resource) {
                return Err(cx.err(k("lock"), format!("{name:?} is already held at this point of the program")));
            }
            held.push(resource);
            Action::Lock { resource, units }
        } else {
            let name = a.unlock.as_deref().expect("one of the three is given");
            let resource = find(&k("unlock"), name)?;
            match held.last() {
                Some(&last) if last == resource => {
                    held.pop();
                }
                Some(&last) if held.contains(&resource) => {
                    return Err(cx.err(
                        k("unlock"),
                        format!(
                            "unlocks {name:?} out of order: {:?}, locked inside it, is still held (unlock innermost first)",
                            resources[last].name
                        ),
                    ))
                }
                _ => return Err(cx.err(k("unlock"), format!("{name:?} is not held at this point of the program"))),
            }
            Action::Unlock { resource }
        };
        actions.push(action);
    }
    if let Some(&r) = held.last() {
        return Err(cx.err(&key, format!("ends with {:?} still held; unlock it before the end", resources[r].name)));
    }
    let program = TaskProgram { actions };
    if program.compute_total().0 == 0 {
        return Err(cx.err(&key, "must compute for some time (give at least one compute_ms step)"));
    }
    Ok(program)
}

/// Lock order across tasks must be acyclic: "A before B" whenever a program takes B while
/// holding A. With no cycle, no set of jobs can each hold what the next one waits for.
pub(super) fn check_lock_order(cx: &Ctx, tasks: &[TaskSpec], resources: &[ResourceSpec]) -> Result<(), ScenarioError> {
    // (outer, inner) → the first task that takes inner inside outer.
    let mut edges: BTreeMap<(usize, usize), usize> = BTreeMap::new();
    for (ti, t) in tasks.iter().enumerate() {
        let Some(p) = &t.program else { continue };
        let mut held: Vec<usize> = Vec::new();
        for a in &p.actions {
            match *a {
                Action::Lock { resource, .. } => {
                    for &outer in &held {
                        edges.entry((outer, resource)).or_insert(ti);
                    }
                    held.push(resource);
                }
                Action::Unlock { .. } => {
                    held.pop();
                }
                Action::Compute(_) => {}
            }
        }
    }
    let names = |ts: &BTreeSet<usize>| ts.iter().map(|&t| tasks[t].name.as_str()).collect::<Vec<_>>().join(", ");
    // Two resources in opposite orders: the common case, said plainly.
    for (&(a, b), &ta) in &edges {
        if let Some(&tb) = edges.get(&(b, a)) {
            let ts: BTreeSet<usize> = [ta, tb].into();
            return Err(cx.err(
                format!("task[{}].program", ta.max(tb)),
                format!(
                    "possible deadlock: tasks {} take resources {} and {} in opposite orders",
                    names(&ts),
                    resources[a.min(b)].name,
                    resources[a.max(b)].name
                ),
            ));
        }
    }
    // Longer cycles: a depth-first search over the "taken inside" graph.
    let n = resources.len();
    let mut succ: Vec<Vec<usize>> = vec![Vec::new(); n];
    for &(a, b) in edges.keys() {
        succ[a].push(b);
    }
    // 0 unvisited, 1 on the current path, 2 done.
    let mut mark = vec![0u8; n];
    let mut path: Vec<usize> = Vec::new();
    for start in 0..n {
        if mark[start] == 0 {
            if let Some(cycle) = find_cycle(start, &succ, &mut mark, &mut path) {
                let mut ts = BTreeSet::new();
                for w in 0..cycle.len() {
                    ts.insert(edges[&(cycle[w], cycle[(w + 1) % cycle.len()])]);
                }
                let rs: Vec<&str> = cycle.iter().map(|&r| resources[r].name.as_str()).collect();
                return Err(cx.err(
                    format!("task[{}].program", ts.last().expect("a cycle has edges")),
                    format!("possible deadlock: tasks {} take resources {} in a cyclic order", names(&ts), rs.join(", ")),
                ));
            }
        }
    }
    Ok(())
}

fn find_cycle(v: usize, succ: &[Vec<usize>], mark: &mut [u8], path: &mut Vec<usize>) -> Option<Vec<usize>> {
    mark[v] = 1;
    path.push(v);
    for &w in &succ[v] {
        if mark[w] == 1 {
            let at = path.iter().position(|&p| p == w).expect("on the path");
            return Some(path[at..].to_vec());
        }
        if mark[w] == 0 {
            if let Some(c) = find_cycle(w, succ, mark, path) {
                return Some(c);
            }
        }
    }
    path.pop();
    mark[v] = 2;
    None
}

/// What each protocol needs of the rest of the scenario.
pub(super) fn check_protocols(cx: &Ctx, raw: &RawScenario, resources: &[ResourceSpec], kind: SchedulerKind) -> Result<(), ScenarioError> {
    for (i, r) in resources.iter().enumerate() {
        if r.protocol != Protocol::Srp {
            continue;
        }
        let key = format!("resource[{i}].protocol");
        if matches!(kind, SchedulerKind::Gedf | SchedulerKind::Gfp | SchedulerKind::Cyclic | SchedulerKind::Mc2) {
            return Err(cx.err(
                key,
                format!(
                    "srp is defined here for uniprocessor and partitioned priority scheduling, not {:?}; use pip or none",
                    kind.as_str()
                ),
            ));
        }
        if raw.scheduler.as_ref().is_some_and(|s| !s.server.is_empty()) {
            return Err(cx.err(key, "srp is not defined here across a hierarchy of servers ([[scheduler.server]]); use pip or none"));
        }
        if raw.memory.is_some() {
            return Err(cx.err(key, "srp does not combine with [memory] (both would take over the same jobs); use pip or none"));
        }
        if let Some(t) = raw.task.iter().position(|t| !t.suspend.is_empty()) {
            return Err(cx.err(key, format!("srp assumes jobs that do not self-suspend, but task[{t}] declares suspend; use pip or none")));
        }
    }
    Ok(())
}
