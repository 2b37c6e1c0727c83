//! Uniprocessor fixed-priority response-time analysis (Joseph–Pandya / Audsley), extended to
//! arbitrary deadlines with Lehoczky's level-i busy period.

use crate::blocking::check_per_task;
use crate::input::{check_tasks, InvalidInput};
use crate::model::{exact_utilization, nanos, Ratio, TaskParams};
use critmem_core::Nanos;
use std::cmp::Ordering;

/// Fixed-point steps one task's analysis may take before giving up (each step is O(n)).
const MAX_STEPS: u64 = 10_000_000;

/// Outcome of the response-time analysis of one task.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Rta {
    /// The worst-case response time, ns; at most the deadline.
    Meets { response: Nanos },
    /// Some job can miss its deadline. `response_at_least` is the first iterate beyond the
    /// deadline: the worst response is at least this (the iteration stops there, so it is not
    /// the response itself).
    Misses { response_at_least: Nanos },
    /// The iteration budget ran out before a decision.
    Unknown { reason: String },
}

impl Rta {
    pub fn response(&self) -> Option<Nanos> {
        match self {
            Rta::Meets { response } => Some(*response),
            _ => None,
        }
    }
}

/// Response-time analysis of every task under the given unique priority ranks (0 = highest;
/// use `critmem_core::sched::priority_ranks` so the order matches the simulator).
pub fn fp_response_times(tasks: &[TaskParams], ranks: &[u32]) -> Vec<Rta> {
    assert_eq!(tasks.len(), ranks.len(), "one rank per task");
    (0..tasks.len())
        .map(|i| {
            let higher: Vec<TaskParams> = (0..tasks.len()).filter(|&j| ranks[j] < ranks[i]).map(|j| tasks[j]).collect();
            fp_response_time(&tasks[i], &higher)
        })
        .collect()
}

/// Worst-case response time of `task` preempted by `higher` (all higher-priority tasks on its
/// CPU), for sporadic tasks with synchronous release possible.
///
/// For D ≤ T this is the classic `R = C + Σ⌈R/Tj⌉·Cj` iteration, stopped as soon as R passes
/// D. For D > T every job of the level-i busy period is examined (job q completes at the least
/// `w = (q+1)·C + Σ⌈w/Tj⌉·Cj`; its response is `w − q·T`).
pub fn fp_response_time(task: &TaskParams, higher: &[TaskParams]) -> Rta {
    let higher: Vec<Interferer> = higher.iter().map(|&h| h.into()).collect();
    fp_response_time_general(task, Nanos::ZERO, &higher)
}

fn give_up(task: &TaskParams, higher: &[TaskParams], reached: u128) -> Rta {
    // With level-i utilisation above 1 the backlog grows forever, so some job misses.
    let u = exact_utilization(higher.iter().chain(std::iter::once(task)));
    if u.is_some_and(|u| u.cmp_exact(Ratio::int(1)) == Ordering::Greater) {
        Rta::Misses { response_at_least: nanos(reached) }
    } else {
        Rta::Unknown { reason: format!("gave up after {MAX_STEPS} fixed-point steps") }
    }
}

/// A higher-priority load in response-time analysis: a sporadic task whose releases may come
/// up to `jitter` late, so two of them can arrive `period − jitter` apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Interferer {
    pub wcet: Nanos,
    pub period: Nanos,
    pub jitter: Nanos,
}

impl From<TaskParams> for Interferer {
    fn from(t: TaskParams) -> Self {
        Interferer { wcet: t.wcet, period: t.period, jitter: Nanos::ZERO }
    }
}

impl Interferer {
    /// The most it can execute in a window of length `w` ns: `⌈(w + J)/T⌉·C` (0 for w = 0).
    pub(crate) fn demand(&self, w: u128) -> u128 {
        if w == 0 {
            return 0;
        }
        (w + u128::from(self.jitter.0)).div_ceil(u128::from(self.period.0)) * u128::from(self.wcet.0)
    }
}

/// Response-time analysis with blocking: `fp_response_time_general` for every task, with
/// `blocking[i]` (e.g. from [`crate::pip_blocking`] or [`crate::srp_blocking`]) and no jitter.
pub fn fp_response_times_with_blocking(tasks: &[TaskParams], ranks: &[u32], blocking: &[Nanos]) -> Result<Vec<Rta>, InvalidInput> {
    fp_response_times_with_jitter(tasks, &vec![Nanos::ZERO; tasks.len()], ranks, blocking)
}

/// Response-time analysis with blocking and release jitter: task i is preempted by every
/// task of a higher rank, each arriving with its own jitter (`jitter[j]`). A task's own
/// jitter only affects the tasks below it: responses are measured from the actual release.
pub fn fp_response_times_with_jitter(
    tasks: &[TaskParams],
    jitter: &[Nanos],
    ranks: &[u32],
    blocking: &[Nanos],
) -> Result<Vec<Rta>, InvalidInput> {
    check_rta_inputs(tasks, jitter, ranks, blocking)?;
    Ok((0..tasks.len()).map(|i| fp_response_time_general(&tasks[i], blocking[i], &higher_priority(i, tasks, jitter, ranks))).collect())
}

/// Checks the per-task slices of a response-time analysis against the task list.
pub(crate) fn check_rta_inputs(tasks: &[TaskParams], jitter: &[Nanos], ranks: &[u32], blocking: &[Nanos]) -> Result<(), InvalidInput> {
    check_tasks(tasks)?;
    check_per_task("ranks", ranks.len(), tasks.len())?;
    check_per_task("jitter", jitter.len(), tasks.len())?;
    check_per_task("blocking", blocking.len(), tasks.len())
}

/// The tasks ranked above task `i`, each with its release jitter.
pub(crate) fn higher_priority(i: usize, tasks: &[TaskParams], jitter: &[Nanos], ranks: &[u32]) -> Vec<Interferer> {
    (0..tasks.len())
        .filter(|&j| ranks[j] < ranks[i])
        .map(|j| Interferer { wcet: tasks[j].wcet, period: tasks[j].period, jitter: jitter[j] })
        .collect()
}

/// Worst-case response of `task` blocked for at most `blocking` by lower-priority work and
/// preempted by `higher`: job q of the level-i busy period completes at the least
/// `w = (q+1)·C + B + Σ⌈(w + Jⱼ)/Tⱼ⌉·Cⱼ` and responds in `w − q·T` (blocking happens once per
/// busy period, before its first job can start). With B = 0 and no jitter this is
/// [`fp_response_time`], which calls it; it expects positive periods (the slice entry points
/// check).
pub fn fp_response_time_general(task: &TaskParams, blocking: Nanos, higher: &[Interferer]) -> Rta {
    response_time(task, blocking, higher, false)
}

/// [`fp_response_time_general`] for a job that ends with a step taking no time (an unlock
/// after its last compute): a higher-priority release at the very instant its compute ends
/// runs before that step, so job q completes at the least `w` with
/// `w ≥ (q+1)·C + B + Σ (⌊(w + Jⱼ)/Tⱼ⌋ + 1)·Cⱼ` (releases in the closed window `[0, w]`
/// count).
pub fn fp_response_time_ending_at_a_step(task: &TaskParams, blocking: Nanos, higher: &[Interferer]) -> Rta {
    response_time(task, blocking, higher, true)
}

/// The busy-period iteration; `closed` counts a release at the window's end as interference.
fn response_time(task: &TaskParams, blocking: Nanos, higher: &[Interferer], closed: bool) -> Rta {
    let (c, t, d, b) = (u128::from(task.wcet.0), u128::from(task.period.0), u128::from(task.deadline.0), u128::from(blocking.0));
    let interference = |w: u128| -> u128 {
        if closed {
            higher.iter().map(|h| ((w + u128::from(h.jitter.0)) / u128::from(h.period.0) + 1) * u128::from(h.wcet.0)).sum()
        } else {
            higher.iter().map(|h| h.demand(w)).sum()
        }
    };
    let mut steps = 0u64;
    let mut worst = 0u128;
    let mut w = c + b + higher.iter().map(|h| u128::from(h.wcet.0)).sum::<u128>();
    let mut q: u128 = 0;
    let plain: Vec<TaskParams> = higher.iter().map(|h| TaskParams::implicit(h.wcet, h.period)).collect();
    loop {
        loop {
            let response = w - q * t;
            if response > d {
                return Rta::Misses { response_at_least: nanos(response) };
            }
            let next = (q + 1) * c + b + interference(w);
            if next == w {
                break;
            }
            w = next;
            steps += 1;
            if steps > MAX_STEPS {
                return give_up(task, &plain, w - q * t);
            }
        }
        worst = worst.max(w - q * t);
        // The busy period goes on while the next own release falls inside it (at its end too
        // when that release would run first).
        if w < (q + 1) * t || (!closed && w == (q + 1) * t) {
            return Rta::Meets { response: nanos(worst) };
        }
        q += 1;
        w += c;
        steps += 1;
        if steps > MAX_STEPS {
            return give_up(task, &plain, w - q * t);
        }
    }
}
