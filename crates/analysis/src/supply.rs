//! Tasks on a CPU they get only part of: supply-bound functions and the FP and EDF tests
//! against them.
//!
//! **Supply-bound functions.** [`Supply::sbf`]`(t)` is the least CPU time a supply gives in
//! any window of length t. [`PeriodicResource`] is Shin & Lee's periodic resource model
//! (RTSS 2003): Θ of CPU time in every period Π, placed anywhere in it. The worst window
//! starts right after a budget is spent at the very start of one period and the next budget
//! comes at the very end of the following one: no supply for `2(Π − Θ)`, then Θ of supply and
//! `Π − Θ` of none, repeating. A [`crate::SlotSupply`] (the time a cyclic table gives, or the
//! time it leaves free) is a supply too. Every supply here gains at most 1 ns per ns, which
//! the searches below rely on.
//!
//! **Fixed priorities on a supply**, [`fp_response_times_on`]: task i's response is at most the
//! least t with `sbf(t) ≥ Cᵢ + Bᵢ + Σ_hp ⌈(t + Jⱼ)/Tⱼ⌉·Cⱼ` (deadlines up to the period).
//!
//! **EDF on a periodic resource**, [`edf_supply_test`]: `dbf(t) + B(t) ≤ sbf(t)` at every
//! absolute deadline t up to a bound (`B(t)` from [`EdfSrpBlocking`], zero without shared
//! resources). Why checking up to the bound suffices: `dbf(t) ≤ U·t + Σ Uᵢ·max(0, Tᵢ − Dᵢ)`
//! and `B(t) ≤ B_max`, while `sbf(t) ≥ α·(t − Δ)` with `α = Θ/Π` and `Δ = 2(Π − Θ)`; for
//! `U < α` the demand side is below the supply side from
//! `t ≥ (Σ Uᵢ·max(0, Tᵢ − Dᵢ) + B_max + α·Δ)/(α − U)` on. For `U = α`, past
//! `max(D_max, Δ)` both sides grow by the same amount over `lcm(hyperperiod, Π)`, so one such
//! stretch more suffices. Between deadlines dbf and B(t) are constant and sbf does not fall,
//! so only deadlines need checking. With Θ = Π ([`PeriodicResource::dedicated`]) sbf(t) = t:
//! the processor-demand test with SRP blocking on a whole CPU, [`edf_srp_test`].

use crate::blocking::{EdfSrpBlocking, ResourceModel};
use crate::fp::{check_rta_inputs, higher_priority, Interferer, Rta};
use crate::input::{check_tasks, InvalidInput};
use crate::model::{exact_utilization, nanos, Ratio, TaskParams};
use critmem_core::Nanos;
use std::cmp::Ordering;

/// Steps a search may take before giving up.
const MAX_STEPS: u64 = 10_000_000;

/// A CPU supply, described by the least CPU time it gives in any window.
pub trait Supply {
    /// The least CPU time in any window of length `t`, ns; non-decreasing, and growing by at
    /// most `d` when `t` grows by `d`.
    fn sbf(&self, t: Nanos) -> Nanos;
}

impl Supply for crate::SlotSupply {
    fn sbf(&self, t: Nanos) -> Nanos {
        self.min_supply(t)
    }
}

/// Shin & Lee's periodic resource Γ(Π, Θ): `budget` ns of CPU time in every `period` ns
/// (built only through [`PeriodicResource::new`], so 0 ≤ Θ ≤ Π and Π > 0 always hold).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PeriodicResource {
    budget: Nanos,
    period: Nanos,
}

impl PeriodicResource {
    /// Θ of every Π; refuses Π = 0 and Θ > Π.
    pub fn new(budget: Nanos, period: Nanos) -> Result<Self, InvalidInput> {
        if period.0 == 0 {
            return Err(InvalidInput::new("period", "must be positive"));
        }
        if budget > period {
            return Err(InvalidInput::new("budget", format!("{} ns exceeds the {} ns period", budget.0, period.0)));
        }
        Ok(PeriodicResource { budget, period })
    }

    /// The whole CPU (Θ = Π = 1 ns): sbf(t) = t.
    pub const fn dedicated() -> Self {
        PeriodicResource { budget: Nanos(1), period: Nanos(1) }
    }

    /// Θ, ns.
    pub fn budget(&self) -> Nanos {
        self.budget
    }

    /// Π, ns.
    pub fn period(&self) -> Nanos {
        self.period
    }

    /// The longest stretch without supply, `2(Π − Θ)`, ns.
    pub fn blackout(&self) -> Nanos {
        Nanos(2 * (self.period.0 - self.budget.0))
    }

    /// The linear lower bound `lsbf(t) = Θ/Π · (t − 2(Π − Θ))` (0 before the blackout ends),
    /// rounded down to whole ns so it stays a lower bound of [`Supply::sbf`].
    pub fn lsbf(&self, t: Nanos) -> Nanos {
        let x = u128::from(t.0.saturating_sub(self.blackout().0));
        nanos(x * u128::from(self.budget.0) / u128::from(self.period.0))
    }

    /// The least t with `sbf(t) ≥ x`, or `None` for a zero budget (and x > 0).
    pub fn inverse(&self, x: Nanos) -> Option<Nanos> {
        let (theta, pi, x) = (u128::from(self.budget.0), u128::from(self.period.0), u128::from(x.0));
        if x == 0 {
            return Some(Nanos::ZERO);
        }
        if theta == 0 {
            return None;
        }
        // x = j·Θ + r with 0 < r ≤ Θ: j whole periods after the blackout, then r more.
        let j = (x - 1) / theta;
        Some(nanos(u128::from(self.blackout().0) + j * pi + (x - j * theta)))
    }

    fn rate(&self) -> Ratio {
        Ratio::new(self.budget.0.into(), self.period.0.into())
    }
}

impl Supply for PeriodicResource {
    fn sbf(&self, t: Nanos) -> Nanos {
        let Some(x) = t.0.checked_sub(self.blackout().0) else {
            return Nanos::ZERO;
        };
        let (theta, pi) = (self.budget.0, self.period.0);
        Nanos(x / pi * theta + (x % pi).min(theta))
    }
}

/// Where [`least_supplied`] stopped.
pub(crate) enum Search {
    /// The least t with enough supply.
    Found(u128),
    /// Past the limit: the least such t is at least this.
    Beyond(u128),
    /// The step budget ran out.
    GaveUp,
}

/// The least t ≥ `start` with `sbf(t) ≥ demand(t)`, searched up to `limit`; `demand` must be
/// non-decreasing.
pub(crate) fn least_supplied(supply: &dyn Supply, demand: &dyn Fn(u128) -> u128, start: u128, limit: u128) -> Search {
    let mut t = start;
    for _ in 0..MAX_STEPS {
        if t > limit {
            return Search::Beyond(t);
        }
        let (need, got) = (demand(t), u128::from(supply.sbf(nanos(t)).0));
        if got >= need {
            return Search::Found(t);
        }
        // sbf gains at most 1 ns per ns, so no t' < t + (need − got) can be enough.
        t += need - got;
    }
    Search::GaveUp
}

/// Response bounds of fixed-priority tasks on a supply: for task i the least t with
/// `sbf(t) ≥ Cᵢ + Bᵢ + Σ_hp ⌈(t + Jⱼ)/Tⱼ⌉·Cⱼ`, up to its deadline (`Unknown` for a deadline
/// beyond the period: queued jobs are not analysed on a supply).
pub fn fp_response_times_on(
    supply: &dyn Supply,
    tasks: &[TaskParams],
    jitter: &[Nanos],
    ranks: &[u32],
    blocking: &[Nanos],
) -> Result<Vec<Rta>, InvalidInput> {
    check_rta_inputs(tasks, jitter, ranks, blocking)?;
    Ok((0..tasks.len())
        .map(|i| {
            let task = &tasks[i];
            if task.deadline > task.period {
                return Rta::Unknown { reason: "a deadline beyond the period is not analysed on a partial supply".into() };
            }
            fp_response_on(supply, task, blocking[i], &higher_priority(i, tasks, jitter, ranks))
        })
        .collect())
}

/// One task's response bound on a supply (see [`fp_response_times_on`]).
fn fp_response_on(supply: &dyn Supply, task: &TaskParams, blocking: Nanos, higher: &[Interferer]) -> Rta {
    let own = u128::from(task.wcet.0) + u128::from(blocking.0);
    let demand = |t: u128| own + higher.iter().map(|h| h.demand(t)).sum::<u128>();
    match least_supplied(supply, &demand, 0, task.deadline.0.into()) {
        Search::Found(t) => Rta::Meets { response: nanos(t) },
        Search::Beyond(t) => Rta::Misses { response_at_least: nanos(t) },
        Search::GaveUp => Rta::Unknown { reason: format!("no decision within {MAX_STEPS} steps") },
    }
}

/// Outcome of [`edf_supply_test`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SupplyTest {
    /// `dbf(t) + B(t) ≤ sbf(t)` at every deadline up to `checked_to`, past which it always
    /// holds: every deadline is met.
    Holds {
        checked_to: Nanos,
    },
    /// At `at` the demand (with blocking) exceeds the least supply.
    Violated {
        at: Nanos,
        demand: Nanos,
        supply: Nanos,
    },
    /// Utilisation above the supply's rate Θ/Π: the demand outgrows any supply.
    Overloaded,
    Unknown {
        reason: String,
    },
}

/// EDF with SRP on a whole CPU: [`edf_supply_test`] on [`PeriodicResource::dedicated`].
pub fn edf_srp_test(tasks: &[TaskParams], model: &ResourceModel) -> Result<SupplyTest, InvalidInput> {
    edf_supply_test(&PeriodicResource::dedicated(), tasks, &EdfSrpBlocking::new(tasks, model)?)
}

/// EDF on a periodic resource with blocking: the demand test of the module documentation.
pub fn edf_supply_test(resource: &PeriodicResource, tasks: &[TaskParams], blocking: &EdfSrpBlocking) -> Result<SupplyTest, InvalidInput> {
    check_tasks(tasks)?;
    Ok(edf_on_resource(resource, tasks, blocking))
}

fn edf_on_resource(resource: &PeriodicResource, tasks: &[TaskParams], blocking: &EdfSrpBlocking) -> SupplyTest {
    if tasks.is_empty() {
        return SupplyTest::Holds { checked_to: Nanos::ZERO };
    }
    let Some(u) = exact_utilization(tasks) else {
        return SupplyTest::Unknown { reason: "the exact utilisation overflows".into() };
    };
    let alpha = resource.rate();
    let d_max = tasks.iter().map(|k| u128::from(k.deadline.0)).max().unwrap_or(0);
    let delta = u128::from(resource.blackout().0);
    let bound = match u.cmp_exact(alpha) {
        Ordering::Greater => return SupplyTest::Overloaded,
        Ordering::Less => {
            let slack = tasks.iter().try_fold(Ratio::int(0), |acc, k| {
                let extra = k.period.0.saturating_sub(k.deadline.0);
                acc.checked_add(Ratio::new(u128::from(k.wcet.0) * u128::from(extra), k.period.0.into()))
            });
            let num = slack
                .and_then(|s| s.checked_add(Ratio::int(blocking.max().0.into())))
                .and_then(|s| s.checked_add(alpha.checked_mul(Ratio::int(delta))?));
            match num.and_then(|n| n.checked_div(alpha.checked_sub(u)?)) {
                Some(l) => l.ceil().max(d_max),
                None => return SupplyTest::Unknown { reason: "the check bound overflows".into() },
            }
        }
        Ordering::Equal => {
            let periods = tasks.iter().map(|k| k.period.0).chain(std::iter::once(resource.period.0));
            match critmem_core::time::lcm_all(periods) {
                Some(l) => d_max.max(delta) + u128::from(l),
                None => return SupplyTest::Unknown { reason: "utilisation equals the supply rate and the hyperperiod overflows".into() },
            }
        }
    };
    // Absolute deadlines in increasing order, one cursor per task.
    let mut next: Vec<u128> = tasks.iter().map(|k| u128::from(k.deadline.0)).collect();
    for _ in 0..MAX_STEPS {
        let t = *next.iter().min().expect("non-empty");
        if t > bound {
            return SupplyTest::Holds { checked_to: nanos(bound) };
        }
        for (k, n) in tasks.iter().zip(next.iter_mut()) {
            if *n == t {
                *n += u128::from(k.period.0);
            }
        }
        let demand = crate::edf::edf_dbf(tasks, nanos(t)) + u128::from(blocking.at(nanos(t)).0);
        let supply = u128::from(resource.sbf(nanos(t)).0);
        if demand > supply {
            return SupplyTest::Violated { at: nanos(t), demand: nanos(demand), supply: nanos(supply) };
        }
    }
    SupplyTest::Unknown { reason: format!("more than {MAX_STEPS} deadlines below the check bound") }
}
