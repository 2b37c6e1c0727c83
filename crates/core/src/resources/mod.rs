//! Shared resources: mutexes and k-unit resources that jobs lock and unlock inside their
//! programs, under no protocol, priority inheritance through dependency links, or Baker's
//! stack resource policy; and components that programs call synchronously, each invocation
//! holding one of the component's execution stacks (TMEM's component-local transient memory).
//!
//! The declarations ([`ResourceSpec`], [`ComponentSpec`], [`Action`], [`TaskProgram`]) belong
//! to the model; the simulation of them is [`ResourceSubsystem`], a subsystem that takes over
//! the jobs of tasks with a program. One interpreter runs task and component programs alike,
//! because a job's locks, its calls and the waits of both form one nesting: a caller may hold a
//! lock across a call, and a component's locks wait under the same protocols as a task's.

mod components;
mod stacks;
mod subsystem;
mod tmem;
mod waits;

pub use components::{invocation_worst_cases, CallProbability, ComponentSpec, StackWait};
pub use stacks::{ComponentStats, JobCalls};
pub use subsystem::{ResourceResult, ResourceStats, ResourceSubsystem};
pub use tmem::{TmemResult, TmemSpec};
pub use waits::WaitRecord;

use crate::time::Nanos;
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
        self.actions.iter().fold(Nanos::ZERO, |acc, a| match a {
            Action::Compute(c) => acc + *c,
            _ => acc,
        })
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
                Action::Compute(c) => {
                    if let Some(o) = open.as_mut() {
                        *o += c;
                    }
                }
                _ => {}
            }
        }
        longest
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
