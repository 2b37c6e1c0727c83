//! Uniprocessor EDF: the utilisation test and the processor-demand criterion, checked with
//! Zhang & Burns' Quick Processor-demand Analysis (QPA, IEEE TC 2009).

use crate::model::{exact_utilization, nanos, Ratio, TaskParams};
use critmem_core::Nanos;
use std::cmp::Ordering;

/// Demand-function evaluations (or busy-period steps) allowed before giving up.
const MAX_STEPS: u64 = 10_000_000;

/// Demand bound function: the execution that jobs released in `[0, t)` with deadlines at or
/// before `t` need, under synchronous release: `Σ max(0, ⌊(t − Di)/Ti⌋ + 1)·Ci`, ns.
pub fn edf_dbf(tasks: &[TaskParams], t: Nanos) -> u128 {
    dbf(tasks, u128::from(t.0))
}

fn dbf(tasks: &[TaskParams], t: u128) -> u128 {
    tasks
        .iter()
        .filter(|k| u128::from(k.deadline.0) <= t)
        .map(|k| ((t - u128::from(k.deadline.0)) / u128::from(k.period.0) + 1) * u128::from(k.wcet.0))
        .sum()
}

/// Outcome of the processor-demand criterion.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DemandTest {
    /// `dbf(t) ≤ t` for every absolute deadline up to `checked_to` (a bound past which no
    /// first violation can lie): EDF meets every deadline.
    Holds {
        checked_to: Nanos,
    },
    /// `dbf(at) = demand > at`: some job misses under any scheduler, EDF included.
    Violated {
        at: Nanos,
        demand: Nanos,
    },
    /// Total utilisation above 1: the demand eventually exceeds any interval.
    Overloaded,
    Unknown {
        reason: String,
    },
}

/// The processor-demand criterion (exact for sporadic tasks with arbitrary deadlines on one
/// CPU). Checks deadlines up to min(La, Lb): Baruah's La = max(Dmax, Σ(Ti − Di)⁺·Ui / (1 − U))
/// when U < 1, and the synchronous busy period Lb.
pub fn edf_demand_test(tasks: &[TaskParams]) -> DemandTest {
    if tasks.is_empty() {
        return DemandTest::Holds { checked_to: Nanos::ZERO };
    }
    let u = exact_utilization(tasks);
    let approx: f64 = tasks.iter().map(TaskParams::utilization).sum();
    let u_vs_one = crate::model::compare(u, approx, Ratio::int(1));
    match u_vs_one {
        Some(Ordering::Greater) => return DemandTest::Overloaded,
        None => return DemandTest::Unknown { reason: "total utilisation is too close to 1 to compare exactly".into() },
        _ => {}
    }
    let la = match (u, u_vs_one) {
        (Some(u), Some(Ordering::Less)) => baruah_la(tasks, u),
        _ => None,
    };
    let bound = match busy_period(tasks, la) {
        Some(lb) => la.map_or(lb, |la| la.min(lb)),
        None => match la {
            Some(la) => la,
            None => {
                return DemandTest::Unknown { reason: format!("the synchronous busy period did not converge within {MAX_STEPS} steps") }
            }
        },
    };
    qpa(tasks, bound)
}

/// Baruah's bound, rounded up; `None` on overflow.
fn baruah_la(tasks: &[TaskParams], u: Ratio) -> Option<u128> {
    let d_max = tasks.iter().map(|k| u128::from(k.deadline.0)).max().unwrap_or(0);
    let mut sum = Ratio::int(0);
    for k in tasks {
        let slack = k.period.0.saturating_sub(k.deadline.0);
        if slack > 0 {
            let term = Ratio::new(u128::from(slack) * u128::from(k.wcet.0), k.period.0.into());
            sum = sum.checked_add(term)?;
        }
    }
    let la = sum.checked_div(Ratio::int(1).checked_sub(u)?)?.ceil();
    Some(la.max(d_max))
}

/// Length of the synchronous busy period (least w with `w = Σ⌈w/Ti⌉·Ci`), stopping early
/// once it passes `cap`. Only called with U ≤ 1, where it is finite.
fn busy_period(tasks: &[TaskParams], cap: Option<u128>) -> Option<u128> {
    let mut w: u128 = tasks.iter().map(|k| u128::from(k.wcet.0)).sum();
    for _ in 0..MAX_STEPS {
        if cap.is_some_and(|c| w > c) {
            return cap;
        }
        let next: u128 = tasks.iter().map(|k| w.div_ceil(u128::from(k.period.0)) * u128::from(k.wcet.0)).sum();
        if next == w {
            return Some(w);
        }
        w = next;
    }
    None
}

/// Latest absolute deadline strictly before `t`, if any.
fn deadline_before(tasks: &[TaskParams], t: u128) -> Option<u128> {
    tasks
        .iter()
        .filter_map(|k| {
            let (d, p) = (u128::from(k.deadline.0), u128::from(k.period.0));
            (t > d).then(|| (t - 1 - d) / p * p + d)
        })
        .max()
}

/// QPA: walks backwards from the last deadline ≤ `bound`, jumping to h(t) whenever h(t) < t.
fn qpa(tasks: &[TaskParams], bound: u128) -> DemandTest {
    let d_min = tasks.iter().map(|k| u128::from(k.deadline.0)).min().unwrap_or(0);
    let checked_to = nanos(bound);
    let Some(mut t) = deadline_before(tasks, bound + 1) else {
        return DemandTest::Holds { checked_to };
    };
    for _ in 0..MAX_STEPS {
        let h = dbf(tasks, t);
        if h > t {
            return DemandTest::Violated { at: nanos(t), demand: nanos(h) };
        }
        if h <= d_min {
            return DemandTest::Holds { checked_to };
        }
        if h < t {
            t = h;
        } else {
            match deadline_before(tasks, t) {
                Some(prev) => t = prev,
                None => return DemandTest::Holds { checked_to },
            }
        }
    }
    DemandTest::Unknown { reason: format!("QPA did not finish within {MAX_STEPS} steps") }
}
