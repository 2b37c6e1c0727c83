//! `[components]` and `[[component]]`: unique names, stack counts, entry costs, programs (their
//! locks given back before they return), and a call graph without cycles (TMEM Sec. IV-B:
//! invocations between components are not cyclic, which also keeps stack waits deadlock-free).

use super::error::{Ctx, ScenarioError};
use super::raw::RawScenario;
use super::resources::{parse_program, ProgramOf};
use crate::model::program::{invocation_worst_cases, Action, ComponentSpec, ResourceSpec, StackWait};
use crate::time::Nanos;

/// Most stacks one component may have (as many as a resource's units).
const MAX_STACKS: i64 = 1 << 20;

/// The validated components and the worst-case CPU time of one invocation of each.
#[derive(Debug, Default)]
pub(super) struct Components {
    pub(super) specs: Vec<ComponentSpec>,
    pub(super) invocations: Vec<Nanos>,
}

impl Components {
    pub(super) fn names(&self) -> Vec<&str> {
        self.specs.iter().map(|c| c.name.as_str()).collect()
    }
}

/// Microseconds as written at `key` (finite, not negative), to the nearest nanosecond.
fn micros(cx: &Ctx, key: &str, us: f64) -> Result<Nanos, ScenarioError> {
    cx.time(key, us / 1000.0)
}

/// Every `[[component]]`, in file order.
/// `default_wait`: `[tmem]`'s wait, for components that give none.
pub(super) fn validate_components(
    cx: &Ctx,
    raw: &RawScenario,
    resources: &[ResourceSpec],
    default_wait: Option<StackWait>,
) -> Result<Components, ScenarioError> {
    let default_cost = match raw.components.as_ref().and_then(|c| c.invocation_cost_us) {
        Some(us) => micros(cx, "components.invocation_cost_us", us)?,
        None => Nanos::ZERO,
    };
    let mut names: Vec<&str> = Vec::with_capacity(raw.component.len());
    for (i, c) in raw.component.iter().enumerate() {
        if c.name.trim().is_empty() {
            return Err(cx.err(format!("component[{i}].name"), "must not be empty"));
        }
        if let Some(prev) = names.iter().position(|&n| n == c.name) {
            return Err(cx.err(format!("component[{i}].name"), format!("duplicate component name {:?} (also component[{prev}])", c.name)));
        }
        names.push(&c.name);
    }
    let mut specs = Vec::with_capacity(raw.component.len());
    for (i, c) in raw.component.iter().enumerate() {
        let k = |field: &str| format!("component[{i}].{field}");
        let stacks = match c.stacks {
            None => None,
            Some(n) if (1..=MAX_STACKS).contains(&n) => Some(n as u32),
            Some(n) => return Err(cx.err(k("stacks"), format!("must be between 1 and {MAX_STACKS} (got {n})"))),
        };
        if c.stack_wait.is_some() && stacks.is_none() && c.cbufs.is_none() {
            return Err(cx.err(k("stack_wait"), "applies only with stacks or cbufs (without them every invocation gets its own)"));
        }
        let invocation_cost = match c.invocation_cost_us {
            Some(us) => micros(cx, &k("invocation_cost_us"), us)?,
            None => default_cost,
        };
        let cbufs = match c.cbufs {
            None => None,
            Some(n) if (1..=MAX_STACKS).contains(&n) => Some(n as u32),
            Some(n) => return Err(cx.err(k("cbufs"), format!("must be between 1 and {MAX_STACKS} (got {n})"))),
        };
        let program = parse_program(cx, &k("program"), &c.program, resources, &names, ProgramOf::Component)?;
        if cbufs.is_none() && program.actions.contains(&Action::CbufAlloc) {
            return Err(cx.err(k("cbufs"), "missing: the program allocates cbufs, so give the component some (cbufs = 1)"));
        }
        specs.push(ComponentSpec {
            name: c.name.clone(),
            stacks,
            stack_wait: c.stack_wait.or(default_wait).unwrap_or(StackWait::Inherit),
            cbufs,
            invocation_cost,
            program,
        });
    }
    check_call_graph(cx, &specs)?;
    let invocations = invocation_worst_cases(&specs)
        .ok_or_else(|| cx.err("component", "the worst-case compute of an invocation, calls included, exceeds 2^64 ns"))?;
    Ok(Components { specs, invocations })
}

/// Calls between components must not form a cycle (a call of any probability counts).
fn check_call_graph(cx: &Ctx, specs: &[ComponentSpec]) -> Result<(), ScenarioError> {
    let callees = |c: usize| {
        let p = &specs[c].program;
        p.actions.iter().flat_map(move |a| match *a {
            Action::Call { component, .. } => vec![component],
            Action::CallOneOf { set, .. } => p.choices[set].iter().map(|ch| ch.component).collect(),
            _ => Vec::new(),
        })
    };
    // 0 unvisited, 1 on the current path, 2 done; an explicit stack of (component, next callee).
    let mut mark = vec![0u8; specs.len()];
    for start in 0..specs.len() {
        if mark[start] != 0 {
            continue;
        }
        let mut path: Vec<(usize, usize)> = vec![(start, 0)];
        mark[start] = 1;
        while let Some(&mut (c, ref mut next)) = path.last_mut() {
            match callees(c).nth(*next) {
                Some(d) => {
                    *next += 1;
                    if mark[d] == 1 {
                        let at = path.iter().position(|&(p, _)| p == d).expect("on the path");
                        let mut cycle: Vec<&str> = path[at..].iter().map(|&(p, _)| specs[p].name.as_str()).collect();
                        cycle.push(&specs[d].name);
                        let reason = if cycle.len() == 2 {
                            format!("{:?} calls itself; calls between components must not form a cycle", specs[d].name)
                        } else {
                            format!("calls form a cycle: {}; calls between components must not form one", cycle.join(" -> "))
                        };
                        return Err(cx.err(format!("component[{c}].program"), reason));
                    }
                    if mark[d] == 0 {
                        mark[d] = 1;
                        path.push((d, 0));
                    }
                }
                None => {
                    mark[c] = 2;
                    path.pop();
                }
            }
        }
    }
    Ok(())
}
