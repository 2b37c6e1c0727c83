//! `[[resource]]` and the `program`s of tasks and components: names, unit counts, lock
//! nesting, an acyclic lock order across tasks and the components they call (so no run can
//! deadlock), and the protocols the scheduler allows.

use super::components::Components;
use super::error::{Ctx, ScenarioError};
use super::raw::{CbufStep, RawAction, RawResource};
use crate::model::memory::MemorySpec;
use crate::model::program::{Action, CallChoice, CallProbability, ComponentSpec, Protocol, ResourceSpec, TaskProgram};
use crate::model::task::TaskSpec;
use crate::time::Nanos;
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

/// Whose program is checked: the messages differ where a task's end and a component's return do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum ProgramOf {
    Task,
    Component,
}

/// `task[i].program`: each entry one action on a declared resource or component, locks nested
/// and given back innermost first, nothing held at the end, and some compute in the worst case.
pub(super) fn validate_program(
    cx: &Ctx,
    i: usize,
    raw: &[RawAction],
    resources: &[ResourceSpec],
    components: &Components,
    budgeted: bool,
) -> Result<TaskProgram, ScenarioError> {
    let key = format!("task[{i}].program");
    if raw.is_empty() {
        return Err(cx.err(&key, "must list at least one step"));
    }
    let mut program = parse_program(cx, &key, raw, resources, &components.names(), ProgramOf::Task)?;
    program.budgeted = budgeted;
    let reached = program.reachable_components(&components.specs);
    let uses_budget = program.uses_budget() || components.specs.iter().zip(&reached).any(|(c, &r)| r && c.program.uses_budget());
    if uses_budget && !budgeted {
        return Err(cx.err(
            &key,
            "takes shares of the job's budget (compute_share or compute_rest, here or in a component it calls); give the budget with wcet_ms",
        ));
    }
    match program.worst_case_compute(&components.invocations) {
        // A budgeted job's demand is its wcet, whatever the program's fixed compute.
        _ if budgeted => Ok(program),
        Some(t) if t.0 > 0 => Ok(program),
        Some(_) => Err(cx.err(&key, "must compute for some time (give at least one compute_ms step)")),
        None => Err(cx.err(&key, "its worst-case compute, calls included, exceeds 2^64 ns")),
    }
}

/// The actions of a program at `key` (a task's or a component's), with names resolved among
/// `resources` and `components`.
pub(super) fn parse_program(
    cx: &Ctx,
    key: &str,
    raw: &[RawAction],
    resources: &[ResourceSpec],
    components: &[&str],
    of: ProgramOf,
) -> Result<TaskProgram, ScenarioError> {
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
    // Whether the invocation holds a cbuf at this point of the program.
    let mut cbuf_held = false;
    // Access steps so far: the next one's index among the owner's steps.
    let mut accesses: u32 = 0;
    let mut choices: Vec<Vec<CallChoice>> = Vec::new();
    for (j, a) in raw.iter().enumerate() {
        let k = |field: &str| format!("{key}[{j}].{field}");
        // An access step may carry compute_ms: the CPU time spread over its references.
        let given = usize::from(a.compute_ms.is_some() && a.access.is_none())
            + usize::from(a.access.is_some())
            + usize::from(a.compute_share.is_some())
            + usize::from(a.compute_rest.is_some())
            + usize::from(a.lock.is_some())
            + usize::from(a.unlock.is_some())
            + usize::from(a.call.is_some())
            + usize::from(a.call_one_of.is_some())
            + usize::from(a.cbuf.is_some())
            + usize::from(a.suspend_ms.is_some());
        if given != 1 {
            let which = if components.is_empty() {
                "compute_ms, compute_share, compute_rest, suspend_ms, lock, unlock and access"
            } else {
                "compute_ms, compute_share, compute_rest, suspend_ms, lock, unlock, call, call_one_of, cbuf and access"
            };
            return Err(cx.err(format!("{key}[{j}]"), format!("give exactly one of {which}")));
        }
        if a.access_order.is_some() && a.access.is_none() {
            return Err(cx.err(k("access_order"), "applies only to an access step"));
        }
        if let Some(streams) = &a.access {
            if streams.is_empty() {
                return Err(cx.err(k("access"), "must list at least one stream"));
            }
            let compute = match a.compute_ms {
                None => Nanos::ZERO,
                Some(ms) => cx.time(&k("compute_ms"), ms)?,
            };
            actions.push(Action::Access { step: accesses, compute });
            accesses += 1;
            continue;
        }
        if a.units.is_some() && a.lock.is_none() {
            return Err(cx.err(k("units"), "applies only to a lock"));
        }
        if a.probability.is_some() && a.call.is_none() {
            return Err(cx.err(k("probability"), "applies only to a call"));
        }
        if a.weights.is_some() && a.call_one_of.is_none() {
            return Err(cx.err(k("weights"), "applies only to call_one_of"));
        }
        let pass_cbuf = a.pass_cbuf.unwrap_or(false);
        if a.pass_cbuf.is_some() && a.call.is_none() && a.call_one_of.is_none() {
            return Err(cx.err(k("pass_cbuf"), "applies only to a call or call_one_of"));
        }
        if pass_cbuf && !cbuf_held {
            return Err(cx.err(k("pass_cbuf"), "no cbuf is held at this point of the program (take one with cbuf = \"alloc\" first)"));
        }
        let component_of = |field: &str, name: &str| {
            components.iter().position(|c| *c == name).ok_or_else(|| {
                let known =
                    if components.is_empty() { "none is declared".to_string() } else { format!("declared: {}", components.join(", ")) };
                cx.err(k(field), format!("unknown component {name:?} ({known})"))
            })
        };
        if let Some(share) = a.compute_share {
            if !(share > 0.0 && share <= 1.0) {
                return Err(cx.err(k("compute_share"), format!("must be above 0 and at most 1, a share of the job's budget (got {share})")));
            }
            actions.push(Action::ComputeShare((share * 1e6).round().max(1.0) as u32));
            continue;
        }
        if let Some(ms) = a.suspend_ms {
            if let Some(&r) = held.last() {
                return Err(cx.err(
                    k("suspend_ms"),
                    format!("suspends while holding {:?}; a program suspends only outside critical sections", resources[r].name),
                ));
            }
            actions.push(Action::Suspend(cx.positive(&k("suspend_ms"), ms)?));
            continue;
        }
        if let Some(rest) = a.compute_rest {
            if !rest {
                return Err(cx.err(k("compute_rest"), "must be true (leave the step out otherwise)"));
            }
            actions.push(Action::ComputeRest);
            continue;
        }
        if let Some(step) = a.cbuf {
            if of == ProgramOf::Task {
                return Err(cx.err(k("cbuf"), "cbufs belong to components: allocate one in a component's program"));
            }
            match step {
                CbufStep::Alloc if cbuf_held => return Err(cx.err(k("cbuf"), "a cbuf is already held at this point (free it first)")),
                CbufStep::Free if !cbuf_held => return Err(cx.err(k("cbuf"), "no cbuf is held at this point of the program")),
                CbufStep::Alloc => actions.push(Action::CbufAlloc),
                CbufStep::Free => actions.push(Action::CbufFree),
            }
            cbuf_held = step == CbufStep::Alloc;
            continue;
        }
        if let Some(names) = &a.call_one_of {
            if names.is_empty() {
                return Err(cx.err(k("call_one_of"), "must name at least one component"));
            }
            let weights = match &a.weights {
                None => vec![1.0; names.len()],
                Some(w) if w.len() != names.len() => {
                    return Err(
                        cx.err(k("weights"), format!("must give one weight per component ({} named, {} weights)", names.len(), w.len()))
                    )
                }
                Some(w) => w.clone(),
            };
            if let Some(bad) = weights.iter().find(|w| !(w.is_finite() && **w >= 0.0)) {
                return Err(cx.err(k("weights"), format!("must be finite and not negative (got {bad})")));
            }
            let total: f64 = weights.iter().sum();
            if total <= 0.0 {
                return Err(cx.err(k("weights"), "must not all be 0"));
            }
            let mut set = Vec::with_capacity(names.len());
            for (name, w) in names.iter().zip(&weights) {
                let component = component_of("call_one_of", name)?;
                let probability = CallProbability::new((w / total).min(1.0)).expect("a share of the total");
                set.push(CallChoice { component, probability });
            }
            choices.push(set);
            actions.push(Action::CallOneOf { set: choices.len() - 1, pass_cbuf });
            continue;
        }
        if pass_cbuf {
            // A passed cbuf goes with a call made for sure: one choice of weight 1.
            let name = a.call.as_deref().expect("pass_cbuf applies only to calls");
            if a.probability.is_some() {
                return Err(cx.err(k("probability"), "a call that passes a cbuf is always made; use call_one_of with weights to choose"));
            }
            let component = component_of("call", name)?;
            choices.push(vec![CallChoice { component, probability: CallProbability::ALWAYS }]);
            actions.push(Action::CallOneOf { set: choices.len() - 1, pass_cbuf });
            continue;
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
        } else if let Some(name) = &a.call {
            let component = components.iter().position(|c| c == name).ok_or_else(|| {
                let known =
                    if components.is_empty() { "none is declared".to_string() } else { format!("declared: {}", components.join(", ")) };
                cx.err(k("call"), format!("unknown component {name:?} ({known})"))
            })?;
            let probability = match a.probability {
                None => CallProbability::ALWAYS,
                Some(p) => CallProbability::new(p).ok_or_else(|| cx.err(k("probability"), format!("must be between 0 and 1 (got {p})")))?,
            };
            Action::Call { component, probability }
        } else {
            let name = a.unlock.as_deref().expect("one of the four is given");
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
        let name = &resources[r].name;
        return Err(match of {
            ProgramOf::Task => cx.err(key, format!("ends with {name:?} still held; unlock it before the end")),
            ProgramOf::Component => {
                cx.err(key, format!("returns with {name:?} still held; a component unlocks what it locks before it returns"))
            }
        });
    }
    if cbuf_held {
        return Err(cx.err(key, "returns with a cbuf still held; free it (cbuf = \"free\") before the end"));
    }
    Ok(TaskProgram { actions, choices, budgeted: false })
}

/// Whose program takes two things in some order, for messages and keys.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Owner {
    Task(usize),
    Component(usize),
}

/// Lock order across tasks and components must be acyclic: "A before B" whenever a program
/// takes B while holding A, directly or in a component it calls. The stacks of a component
/// with a bounded number of them count as one more thing taken (on entry, held to return),
/// since a caller can wait for them. With no cycle, no set of jobs can each hold what the next
/// one waits for.
pub(super) fn check_lock_order(
    cx: &Ctx,
    tasks: &[TaskSpec],
    resources: &[ResourceSpec],
    components: &[ComponentSpec],
) -> Result<(), ScenarioError> {
    let nr = resources.len();
    // The thing a call to `c` takes on entry, if a caller can wait for it.
    // A component's cbufs are taken inside its invocation, so they share its node.
    let stack_node = |c: usize| (components[c].stacks.is_some() || components[c].cbufs.is_some()).then_some(nr + c);
    // Everything an invocation of each component can take, its own stacks included.
    let mut takes: Vec<Option<BTreeSet<usize>>> = vec![None; components.len()];
    fn takes_of(
        c: usize,
        components: &[ComponentSpec],
        stack_node: &dyn Fn(usize) -> Option<usize>,
        takes: &mut Vec<Option<BTreeSet<usize>>>,
    ) -> BTreeSet<usize> {
        if let Some(known) = &takes[c] {
            return known.clone();
        }
        let mut out: BTreeSet<usize> = stack_node(c).into_iter().collect();
        for a in &components[c].program.actions {
            match *a {
                Action::Lock { resource, .. } => {
                    out.insert(resource);
                }
                Action::Call { component, probability } if probability.is_possible() => {
                    out.extend(takes_of(component, components, stack_node, takes));
                }
                Action::CallOneOf { set, .. } => {
                    for d in components[c].program.choice_components(set).collect::<Vec<_>>() {
                        out.extend(takes_of(d, components, stack_node, takes));
                    }
                }
                _ => {}
            }
        }
        takes[c] = Some(out.clone());
        out
    }
    for c in 0..components.len() {
        takes_of(c, components, &stack_node, &mut takes);
    }
    let takes: Vec<BTreeSet<usize>> = takes.into_iter().map(|t| t.expect("computed")).collect();
    // (outer, inner) → the first program that takes inner inside outer.
    let mut edges: BTreeMap<(usize, usize), Owner> = BTreeMap::new();
    let programs = tasks
        .iter()
        .enumerate()
        .filter_map(|(t, spec)| spec.program.as_ref().map(|p| (Owner::Task(t), p, None)))
        .chain(components.iter().enumerate().map(|(c, spec)| (Owner::Component(c), &spec.program, stack_node(c))));
    for (owner, p, own_stack) in programs {
        let mut held: Vec<usize> = own_stack.into_iter().collect();
        for a in &p.actions {
            match *a {
                Action::Lock { resource, .. } => {
                    for &outer in &held {
                        edges.entry((outer, resource)).or_insert(owner);
                    }
                    held.push(resource);
                }
                Action::Unlock { .. } => {
                    held.pop();
                }
                Action::Call { component, probability } if probability.is_possible() => {
                    for &outer in &held {
                        for &inner in &takes[component] {
                            edges.entry((outer, inner)).or_insert(owner);
                        }
                    }
                }
                Action::CallOneOf { set, .. } => {
                    for component in p.choice_components(set) {
                        for &outer in &held {
                            for &inner in &takes[component] {
                                edges.entry((outer, inner)).or_insert(owner);
                            }
                        }
                    }
                }
                _ => {}
            }
        }
    }
    let node = |n: usize| if n < nr { resources[n].name.clone() } else { format!("the stacks of {}", components[n - nr].name) };
    let names = |os: &BTreeSet<Owner>| {
        let ts: Vec<&str> = os.iter().filter_map(|o| if let Owner::Task(t) = *o { Some(tasks[t].name.as_str()) } else { None }).collect();
        let cs: Vec<&str> =
            os.iter().filter_map(|o| if let Owner::Component(c) = *o { Some(components[c].name.as_str()) } else { None }).collect();
        match (ts.is_empty(), cs.is_empty()) {
            (_, true) => format!("tasks {}", ts.join(", ")),
            (true, false) => format!("components {}", cs.join(", ")),
            (false, false) => format!("tasks {} and components {}", ts.join(", "), cs.join(", ")),
        }
    };
    // The key of a message: the last task among `os`, else the last component.
    let key_of = |os: &BTreeSet<Owner>| {
        let tasks_in = os.iter().filter_map(|o| if let Owner::Task(t) = *o { Some(t) } else { None }).max();
        match (tasks_in, os.iter().max()) {
            (Some(t), _) => format!("task[{t}].program"),
            (None, Some(Owner::Component(c))) => format!("component[{c}].program"),
            _ => unreachable!("a cycle has an owner"),
        }
    };
    // A caller that holds what a component it calls takes again.
    if let Some((&(a, _), &o)) = edges.iter().find(|(&(a, b), _)| a == b) {
        let os: BTreeSet<Owner> = [o].into();
        return Err(
            cx.err(key_of(&os), format!("possible deadlock: {} can take {} again while holding it (through a call)", names(&os), node(a)))
        );
    }
    // Two resources in opposite orders: the common case, said plainly.
    for (&(a, b), &oa) in &edges {
        if let Some(&ob) = edges.get(&(b, a)) {
            let os: BTreeSet<Owner> = [oa, ob].into();
            let kind = if a.max(b) < nr { "resources" } else { "resources and stacks" };
            return Err(cx.err(
                key_of(&os),
                format!("possible deadlock: {} take {kind} {} and {} in opposite orders", names(&os), node(a.min(b)), node(a.max(b))),
            ));
        }
    }
    // Longer cycles: a depth-first search over the "taken inside" graph.
    let n = nr + components.len();
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
                let mut os = BTreeSet::new();
                for w in 0..cycle.len() {
                    os.insert(edges[&(cycle[w], cycle[(w + 1) % cycle.len()])]);
                }
                let rs: Vec<String> = cycle.iter().map(|&r| node(r)).collect();
                let kind = if cycle.iter().all(|&r| r < nr) { "resources" } else { "resources and stacks" };
                return Err(
                    cx.err(key_of(&os), format!("possible deadlock: {} take {kind} {} in a cyclic order", names(&os), rs.join(", ")))
                );
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
/// SRP's guarantee, that a job once started never waits for a unit, holds only for jobs that
/// never suspend: a job that locks an SRP resource (itself or in a component it calls) must not
/// self-suspend, and must not touch memory that may be paged out (a page fault waits for the
/// swap device). Pages stay resident when they cannot be evicted: a level-A/B task's own pages
/// on the MC² layout (pinned in its core's bank), or pages charged to a hard reservation that
/// can hold every page of every space charged to it. Everything else composes with SRP: the
/// first offending step is refused, naming the task.
pub(super) fn check_srp(
    cx: &Ctx,
    tasks: &[TaskSpec],
    resources: &[ResourceSpec],
    components: &[ComponentSpec],
    memory: Option<&MemorySpec>,
) -> Result<(), ScenarioError> {
    let srp: Vec<usize> = (0..resources.len()).filter(|&r| resources[r].protocol == Protocol::Srp).collect();
    if srp.is_empty() {
        return Ok(());
    }
    for (i, t) in tasks.iter().enumerate() {
        let Some(program) = &t.program else { continue };
        let Some(&r) = srp.iter().find(|&&r| program.most_units_reached(r, components) > 0) else { continue };
        let why = |what: &str| {
            format!(
                "task {:?} uses srp resource {:?}, which assumes jobs that never suspend, but {what}; use pip or none for {:?}",
                t.name, resources[r].name, resources[r].name
            )
        };
        let reached = program.reachable_components(components);
        // The programs the job can run: its own, then each component it can enter.
        let programs = std::iter::once((None, program))
            .chain(components.iter().enumerate().filter(|&(c, _)| reached[c]).map(|(c, spec)| (Some(c), &spec.program)));
        for (owner, p) in programs {
            let at = |j: usize, field: &str| match owner {
                None => format!("task[{i}].program[{j}].{field}"),
                Some(c) => format!("component[{c}].program[{j}].{field}"),
            };
            let whose = match owner {
                None => "it".to_string(),
                Some(c) => format!("component {:?}, which it calls,", components[c].name),
            };
            if let Some(j) = p.actions.iter().position(|a| matches!(a, Action::Suspend(_))) {
                return Err(cx.err(at(j, "suspend_ms"), why(&format!("{whose} self-suspends"))));
            }
            let Some(j) = p.actions.iter().position(|a| matches!(a, Action::Access { .. })) else { continue };
            let m = memory.expect("access steps have [memory]");
            if !m.keeps_resident(tasks, i, owner) {
                return Err(cx.err(
                    at(j, "access"),
                    why(&format!(
                        "{whose} touches pages that may be paged out and faulted back in (keep them resident: a hard reservation that holds every page charged to it, or level A/B with a cpu on the mc2 layout)"
                    )),
                ));
            }
        }
    }
    Ok(())
}
