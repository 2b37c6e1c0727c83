//! What jobs run, as the model declares it: shared resources and their protocols, components
//! with their stacks and programs, and the program each job of a task or each invocation of a
//! component runs in order.
//!
//! Components (TMEM Sec. IV): a program each invocation runs, an entry cost, and a pool of
//! execution stacks that bounds how many invocations run in it at once (with thread migration
//! the caller itself executes in the component, on one of its stacks).

use crate::rng::SimRng;
use crate::time::Nanos;
use rand::Rng;
use serde::Deserialize;

/// How jobs that contend a resource are treated.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Protocol {
    /// A job that finds too few units free blocks, off every CPU, until they are given back.
    None,
    /// Priority inheritance through dependency links: a waiting job stays in its scheduler's
    /// ready queue, and when chosen the holder runs in its place.
    Pip,
    /// Baker's stack resource policy: a job starts only when its preemption level is above
    /// its CPU's system ceiling, so it never blocks at a lock.
    Srp,
}

impl Protocol {
    pub fn as_str(self) -> &'static str {
        match self {
            Protocol::None => "none",
            Protocol::Pip => "pip",
            Protocol::Srp => "srp",
        }
    }
}

/// A validated `[[resource]]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResourceSpec {
    pub name: String,
    /// 1 for a mutex.
    pub units: u32,
    pub protocol: Protocol,
}

/// One entry of a task's program.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    Compute(Nanos),
    /// Take `units` of resource `resource` (its index among the scenario's resources).
    Lock {
        resource: usize,
        units: u32,
    },
    /// Give back every unit the job holds of `resource`.
    Unlock {
        resource: usize,
    },
    /// Invoke `component` (its index among the scenario's components) with `probability`,
    /// drawn per job and call; the caller goes on with its next action once it returns.
    Call {
        component: usize,
        probability: CallProbability,
    },
    /// Invoke exactly one of the components of the program's choice set `set`
    /// ([`TaskProgram::choices`]), drawn by weight per job and call; with `pass_cbuf` the
    /// shared buffer the caller holds is mapped into the callee.
    CallOneOf {
        set: usize,
        pass_cbuf: bool,
    },
    /// Compute this share, in parts per million, of the job's budget (its drawn demand),
    /// clipped to what is left of it.
    ComputeShare(u32),
    /// Compute what is left of the job's budget.
    ComputeRest,
    /// Take a shared buffer (cbuf) from the current component's cache.
    CbufAlloc,
    /// Give the cbuf this invocation holds back to its component's cache.
    CbufFree,
    /// Self-suspend, off every CPU, for this long (never while holding a lock; the loader
    /// checks it). Units of caches the job holds stay held.
    Suspend(Nanos),
    /// Touch memory: access step `step` of the program's owner (its memory declaration's
    /// `steps`: the task's, or the component's inside an invocation), with `compute` spread
    /// evenly over its references. A reference that faults takes the fault's CPU time and
    /// waits for the swap device like any other; locks the job holds stay held meanwhile.
    Access {
        step: u32,
        compute: Nanos,
    },
}

impl Action {
    /// The CPU time the action itself asks for, faults and calls apart.
    pub fn own_compute(&self) -> Nanos {
        match *self {
            Action::Compute(c) | Action::Access { compute: c, .. } => c,
            _ => Nanos::ZERO,
        }
    }
}

/// One option of a [`Action::CallOneOf`]: a component and its chance of being the one called.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CallChoice {
    pub component: usize,
    pub probability: CallProbability,
}

/// What each job of a task, or each invocation of a component, does in order: compute
/// stretches, locks and unlocks, and calls, every lock given back before the end (the loader
/// checks it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TaskProgram {
    pub actions: Vec<Action>,
    /// The choice sets of the program's [`Action::CallOneOf`]s, probabilities summing to 1.
    pub choices: Vec<Vec<CallChoice>>,
    /// A task's program whose job demand is a budget: its computes draw from it, clipped to
    /// what is left, and calls are skipped once it is spent (TMEM's synthetic threads).
    pub budgeted: bool,
}

impl TaskProgram {
    /// A program of `actions` with no choice sets and no budget.
    pub fn new(actions: Vec<Action>) -> Self {
        TaskProgram { actions, choices: Vec::new(), budgeted: false }
    }

    /// Whether the program takes shares or the rest of a job's budget.
    pub fn uses_budget(&self) -> bool {
        self.actions.iter().any(|a| matches!(a, Action::ComputeShare(_) | Action::ComputeRest))
    }

    /// Every component a [`Action::CallOneOf`] of set `set` can enter.
    pub fn choice_components(&self, set: usize) -> impl Iterator<Item = usize> + '_ {
        self.choices[set].iter().filter(|c| c.probability.is_possible()).map(|c| c.component)
    }

    /// The program's own compute, calls not followed: a task's WCET and every job's demand
    /// when it calls nothing ([`TaskProgram::worst_case_compute`] follows calls).
    pub fn compute_total(&self) -> Nanos {
        self.actions.iter().fold(Nanos::ZERO, |acc, a| acc + a.own_compute())
    }

    /// The longest stretch of the program's own compute during which the job holds
    /// `resource`, from its lock to its unlock (nested sections inside it count; calls are
    /// not followed).
    pub fn longest_section(&self, resource: usize) -> Nanos {
        let mut longest = Nanos::ZERO;
        let mut open: Option<Nanos> = None;
        for a in &self.actions {
            match *a {
                Action::Lock { resource: r, .. } if r == resource => open = Some(Nanos::ZERO),
                Action::Unlock { resource: r } if r == resource => {
                    longest = longest.max(open.take().unwrap_or(Nanos::ZERO));
                }
                Action::Compute(c) | Action::Access { compute: c, .. } => {
                    if let Some(o) = open.as_mut() {
                        *o += c;
                    }
                }
                _ => {}
            }
        }
        longest
    }

    /// Whether the program touches memory itself (calls not followed).
    pub fn accesses_memory(&self) -> bool {
        self.actions.iter().any(|a| matches!(a, Action::Access { .. }))
    }

    /// Whether the program suspends itself (calls not followed).
    pub fn suspends(&self) -> bool {
        self.actions.iter().any(|a| matches!(a, Action::Suspend(_)))
    }

    /// The resources this program locks, each once, in first-lock order.
    pub fn resources(&self) -> Vec<usize> {
        let mut out = Vec::new();
        for a in &self.actions {
            if let Action::Lock { resource, .. } = *a {
                if !out.contains(&resource) {
                    out.push(resource);
                }
            }
        }
        out
    }

    /// The most units of `resource` one lock of this program takes (0 if it never locks it).
    pub fn most_units(&self, resource: usize) -> u32 {
        self.actions
            .iter()
            .filter_map(|a| match *a {
                Action::Lock { resource: r, units } if r == resource => Some(units),
                _ => None,
            })
            .max()
            .unwrap_or(0)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StackWait {
    /// Wait with a dependency link to the holder of highest priority, which runs in the
    /// waiter's place when the scheduler chooses the waiter (TMEM Sec. IV-B, like PIP).
    Inherit,
    /// Block off every CPU until a stack is put back.
    Block,
}

impl StackWait {
    pub fn as_str(self) -> &'static str {
        match self {
            StackWait::Inherit => "inherit",
            StackWait::Block => "block",
        }
    }
}

/// The chance that a call is made, in [0, 1]; never NaN (so it is `Eq`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CallProbability(f64);

impl Eq for CallProbability {}

impl CallProbability {
    pub const ALWAYS: CallProbability = CallProbability(1.0);

    /// `None` unless `p` lies in [0, 1].
    pub fn new(p: f64) -> Option<Self> {
        (0.0..=1.0).contains(&p).then_some(CallProbability(p))
    }

    pub fn get(self) -> f64 {
        self.0
    }

    /// Whether some job can make the call.
    pub fn is_possible(self) -> bool {
        self.0 > 0.0
    }

    /// Whether this call is made: one draw from `rng`, only when the outcome is uncertain, so a
    /// certain call never shifts the draws of the uncertain ones after it.
    pub fn draw(self, rng: &mut SimRng) -> bool {
        if self.0 >= 1.0 {
            true
        } else if self.0 <= 0.0 {
            false
        } else {
            rng.random::<f64>() < self.0
        }
    }
}

/// A validated `[[component]]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ComponentSpec {
    pub name: String,
    /// Execution stacks; each running invocation holds one from entry to return. `None`: as
    /// many as there are invocations (no caller ever waits).
    pub stacks: Option<u32>,
    pub stack_wait: StackWait,
    /// Shared buffers (cbufs) its invocations take with `cbuf = "alloc"`; `None`: it takes none.
    pub cbufs: Option<u32>,
    /// CPU time of entering the component, run before its program.
    pub invocation_cost: Nanos,
    /// What each invocation does (possibly nothing beyond the entry cost).
    pub program: TaskProgram,
}

/// The worst-case CPU time of one invocation of each component: its entry cost, its own
/// compute, and every call it can make (probability > 0) in full (of a choice, the costliest
/// option). Shares of a job's budget count nothing here: a budgeted job's demand bounds them.
/// `None` if a figure exceeds 64-bit nanoseconds. The call graph must be acyclic (the loader
/// checks it first).
pub fn invocation_worst_cases(components: &[ComponentSpec]) -> Option<Vec<Nanos>> {
    fn visit(c: usize, components: &[ComponentSpec], memo: &mut [Option<Option<Nanos>>], depth: usize) -> Option<Nanos> {
        assert!(depth <= components.len(), "the component call graph has a cycle");
        if let Some(known) = memo[c] {
            return known;
        }
        let spec = &components[c];
        let mut total = Some(spec.invocation_cost);
        for a in &spec.program.actions {
            let add = match *a {
                Action::Compute(t) | Action::Access { compute: t, .. } => Some(t),
                Action::Call { component, probability } if probability.is_possible() => visit(component, components, memo, depth + 1),
                Action::CallOneOf { set, .. } => spec
                    .program
                    .choice_components(set)
                    .map(|d| visit(d, components, memo, depth + 1))
                    .try_fold(Nanos::ZERO, |m, x| x.map(|x| m.max(x))),
                _ => Some(Nanos::ZERO),
            };
            total = total.zip(add).and_then(|(t, x)| t.0.checked_add(x.0)).map(Nanos);
        }
        memo[c] = Some(total);
        total
    }
    let mut memo = vec![None; components.len()];
    (0..components.len()).map(|c| visit(c, components, &mut memo, 0)).collect()
}

impl TaskProgram {
    /// The worst-case compute of one run of this program: its own compute plus, for every
    /// call it can make (probability > 0), the callee's worst-case invocation
    /// ([`invocation_worst_cases`], given as `invocations`). `None` on overflow.
    pub fn worst_case_compute(&self, invocations: &[Nanos]) -> Option<Nanos> {
        self.actions.iter().try_fold(Nanos::ZERO, |acc, a| {
            let add = match *a {
                Action::Compute(t) | Action::Access { compute: t, .. } => t,
                Action::Call { component, probability } if probability.is_possible() => invocations[component],
                Action::CallOneOf { set, .. } => self.choice_components(set).map(|d| invocations[d]).max().unwrap_or(Nanos::ZERO),
                _ => Nanos::ZERO,
            };
            acc.0.checked_add(add.0).map(Nanos)
        })
    }

    /// Every component a run of this program can enter (directly or through other calls,
    /// probability > 0), as a mask over the components.
    pub fn reachable_components(&self, components: &[ComponentSpec]) -> Vec<bool> {
        let mut seen = vec![false; components.len()];
        let mut todo: Vec<&TaskProgram> = vec![self];
        while let Some(p) = todo.pop() {
            for a in &p.actions {
                let callees: Vec<usize> = match *a {
                    Action::Call { component, probability } if probability.is_possible() => vec![component],
                    Action::CallOneOf { set, .. } => p.choice_components(set).collect(),
                    _ => Vec::new(),
                };
                for component in callees {
                    if !seen[component] {
                        seen[component] = true;
                        todo.push(&components[component].program);
                    }
                }
            }
        }
        seen
    }

    /// The most units of `resource` one lock takes anywhere a run of this program can reach:
    /// in its own actions or in a component it can enter.
    pub fn most_units_reached(&self, resource: usize, components: &[ComponentSpec]) -> u32 {
        let reached = self.reachable_components(components);
        components
            .iter()
            .zip(reached)
            .filter(|&(_, r)| r)
            .map(|(c, _)| c.program.most_units(resource))
            .fold(self.most_units(resource), u32::max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn component(name: &str, cost_us: u64, actions: Vec<Action>) -> ComponentSpec {
        ComponentSpec {
            name: name.into(),
            stacks: None,
            stack_wait: StackWait::Inherit,
            cbufs: None,
            invocation_cost: Nanos::from_us(cost_us),
            program: TaskProgram::new(actions),
        }
    }

    fn call(component: usize, p: f64) -> Action {
        Action::Call { component, probability: CallProbability::new(p).unwrap() }
    }

    #[test]
    fn worst_cases_follow_every_possible_call_once_per_call_site() {
        // disk: 1 µs entry + 100 µs = 101 µs. fs: 2 µs + 200 µs + disk twice (p 0.5 and 1)
        // + never (p 0) = 2 + 200 + 2·101 = 404 µs.
        let comps = vec![
            component("fs", 2, vec![Action::Compute(Nanos::from_us(200)), call(1, 0.5), call(1, 1.0), call(1, 0.0)]),
            component("disk", 1, vec![Action::Compute(Nanos::from_us(100))]),
        ];
        let inv = invocation_worst_cases(&comps).unwrap();
        assert_eq!(inv, vec![Nanos::from_us(404), Nanos::from_us(101)]);
        // A task: 50 µs + fs (404) = 454 µs.
        let task = TaskProgram::new(vec![Action::Compute(Nanos::from_us(50)), call(0, 0.3)]);
        assert_eq!(task.worst_case_compute(&inv), Some(Nanos::from_us(454)));
        assert_eq!(task.reachable_components(&comps), vec![true, true]);
        let never = TaskProgram::new(vec![Action::Compute(Nanos::from_us(50)), call(0, 0.0)]);
        assert_eq!(never.reachable_components(&comps), vec![false, false]);
    }

    #[test]
    fn probabilities_outside_the_unit_interval_are_refused_and_certain_calls_draw_nothing() {
        assert!(CallProbability::new(-0.1).is_none());
        assert!(CallProbability::new(1.5).is_none());
        assert!(CallProbability::new(f64::NAN).is_none());
        let mut a = crate::rng::sub_rng(1, "calls", 0);
        let mut b = crate::rng::sub_rng(1, "calls", 0);
        assert!(CallProbability::ALWAYS.draw(&mut a));
        assert!(!CallProbability::new(0.0).unwrap().draw(&mut a));
        // Neither drew: both streams are still in step.
        assert_eq!(a.random::<u64>(), b.random::<u64>());
    }
}
