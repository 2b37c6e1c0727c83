//! Fixed-priority CPU servers on one CPU: what each costs the work below it, what each is
//! guaranteed, and the share each gets when all are backlogged.
//!
//! **Interference.** A server of budget Θ and period Π spends at most Θ per period. A
//! periodic (polling) server behaves towards lower priorities like a task with C = Θ, T = Π.
//! A deferrable server keeps its budget until it is needed, so it can spend Θ at the end of
//! one period and Θ again at the start of the next: like a task with C = Θ, T = Π and release
//! jitter Π − Θ ([`Server::interference`]).
//!
//! **Guarantees**, [`fp_server_analysis`]: each server analysed as a task (C = Θ, D = T = Π)
//! under the servers above it. If its response is within Π it gets its whole budget in every
//! period, and its children see the periodic resource Γ(Π, Θ) ([`Server::resource`]). In any
//! case its guaranteed budget per period is `min(Θ, max over 0 < t ≤ Π of t − I(t))`, I being
//! the interference of the servers above: by then the CPU has had at least that much time free
//! of them.
//!
//! **Long-run shares** of servers that are all backlogged: a backlogged deferrable server
//! behaves like a periodic one, unspent budget is lost at the period's end, and with all
//! periods starting at 0 the schedule repeats every hyperperiod. The share is therefore exact:
//! the budget served in one hyperperiod over its length.

use crate::blocking::check_per_task;
use crate::fp::{fp_response_time_general, Interferer, Rta};
use crate::input::InvalidInput;
use crate::model::{nanos, TaskParams};
use crate::supply::PeriodicResource;
use critmem_core::Nanos;

/// Events the backlogged schedule may take before giving up on the exact share.
const MAX_EVENTS: u64 = 10_000_000;

/// How a server treats an unspent budget.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ServerKind {
    /// Keeps the budget for work that arrives later in the period.
    Deferrable,
    /// Polling: budget not spent when the server has no work is gone.
    Periodic,
}

/// A CPU server: `budget` ns every `period` ns (built through [`Server::new`], which checks
/// them).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Server {
    resource: PeriodicResource,
    kind: ServerKind,
}

impl Server {
    /// Refuses a zero period and a budget above the period.
    pub fn new(budget: Nanos, period: Nanos, kind: ServerKind) -> Result<Self, InvalidInput> {
        Ok(Server { resource: PeriodicResource::new(budget, period)?, kind })
    }

    /// Θ, ns.
    pub fn budget(&self) -> Nanos {
        self.resource.budget()
    }

    /// Π, ns.
    pub fn period(&self) -> Nanos {
        self.resource.period()
    }

    pub fn kind(&self) -> ServerKind {
        self.kind
    }

    /// Release jitter towards lower priorities: Π − Θ for a deferrable server, else 0.
    pub fn jitter(&self) -> Nanos {
        match self.kind {
            ServerKind::Deferrable => self.period().saturating_sub(self.budget()),
            ServerKind::Periodic => Nanos::ZERO,
        }
    }

    /// The server as a higher-priority load in response-time analysis.
    pub fn as_interferer(&self) -> Interferer {
        Interferer { wcet: self.budget(), period: self.period(), jitter: self.jitter() }
    }

    /// The most CPU time it can take from lower priorities in a window of `t` ns:
    /// `⌈(t + J)/Π⌉·Θ`.
    pub fn interference(&self, t: Nanos) -> Nanos {
        nanos(self.as_interferer().demand(t.0.into()))
    }

    /// The supply its children see when it gets its whole budget every period.
    pub fn resource(&self) -> PeriodicResource {
        self.resource
    }
}

/// What one server of a fixed-priority set is guaranteed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerGuarantee {
    /// The server analysed as a task (C = Θ, D = T = Π): `Meets` means its whole budget
    /// every period.
    pub response: Rta,
    /// Budget it gets in every period for sure, ns (Θ when `response` meets).
    pub guaranteed_budget: Nanos,
    /// Budget served per hyperperiod when every server is backlogged, ns (`None` if the
    /// hyperperiod overflows or the schedule is too long to replay).
    pub backlogged_served: Option<Nanos>,
    /// The hyperperiod of all server periods, ns (`None` on overflow).
    pub hyperperiod: Option<Nanos>,
}

impl ServerGuarantee {
    /// Long-run share of the CPU when all servers are backlogged, for display.
    pub fn backlogged_share(&self) -> Option<f64> {
        Some(self.backlogged_served?.0 as f64 / self.hyperperiod?.0 as f64)
    }
}

/// Analyses servers on one CPU under unique fixed-priority ranks (0 = highest); see the module
/// documentation.
pub fn fp_server_analysis(servers: &[Server], ranks: &[u32]) -> Result<Vec<ServerGuarantee>, InvalidInput> {
    check_per_task("ranks", ranks.len(), servers.len())?;
    if servers.is_empty() {
        return Ok(Vec::new());
    }
    let hyperperiod = critmem_core::time::lcm_all(servers.iter().map(|s| s.period().0)).map(Nanos);
    let served = hyperperiod.and_then(|h| backlogged_schedule(servers, ranks, h));
    Ok((0..servers.len())
        .map(|i| {
            let s = &servers[i];
            let higher: Vec<Interferer> = (0..servers.len()).filter(|&j| ranks[j] < ranks[i]).map(|j| servers[j].as_interferer()).collect();
            let response = fp_response_time_general(&TaskParams::implicit(s.budget(), s.period()), Nanos::ZERO, &higher);
            let guaranteed_budget =
                if matches!(response, Rta::Meets { .. }) { s.budget() } else { free_time_by(&higher, s.period()).min(s.budget()) };
            ServerGuarantee { response, guaranteed_budget, backlogged_served: served.as_ref().map(|v| v[i]), hyperperiod }
        })
        .collect())
}

/// `max over 0 < t ≤ limit of t − I(t)` (clamped at 0). I only steps up just after the points
/// where some `(t + Jⱼ)/Tⱼ` is whole, so the maximum is at one of them or at `limit`. Gives 0
/// (still a lower bound) if there are too many points to visit.
fn free_time_by(higher: &[Interferer], limit: Nanos) -> Nanos {
    let limit = u128::from(limit.0);
    let value = |t: u128| t.saturating_sub(higher.iter().map(|h| h.demand(t)).sum());
    let points: u128 = higher.iter().map(|h| limit / u128::from(h.period.0) + 1).sum();
    if points > u128::from(MAX_EVENTS) {
        return Nanos::ZERO;
    }
    let mut best = value(limit);
    for h in higher {
        let (p, j) = (u128::from(h.period.0), u128::from(h.jitter.0));
        // t = k·T − J for k ≥ 1, within (0, limit].
        let mut k = j / p + 1;
        while k * p - j <= limit {
            best = best.max(value(k * p - j));
            k += 1;
        }
    }
    nanos(best)
}

/// Budget each server spends in `[0, hyperperiod)` when all are backlogged and all periods
/// start at 0; `None` if the replay is too long.
fn backlogged_schedule(servers: &[Server], ranks: &[u32], hyperperiod: Nanos) -> Option<Vec<Nanos>> {
    let h = hyperperiod.0;
    let mut order: Vec<usize> = (0..servers.len()).collect();
    order.sort_by_key(|&i| ranks[i]);
    let mut left: Vec<u64> = servers.iter().map(|s| s.budget().0).collect();
    let mut refill: Vec<u64> = servers.iter().map(|s| s.period().0).collect();
    let mut served = vec![0u64; servers.len()];
    let mut now = 0u64;
    for _ in 0..MAX_EVENTS {
        if now >= h {
            return Some(served.into_iter().map(Nanos).collect());
        }
        let next_refill = *refill.iter().min().expect("at least one server");
        match order.iter().copied().find(|&i| left[i] > 0) {
            Some(i) => {
                let run = left[i].min(next_refill - now);
                left[i] -= run;
                served[i] += run;
                now += run;
            }
            None => now = next_refill,
        }
        for (i, s) in servers.iter().enumerate() {
            if refill[i] == now {
                left[i] = s.budget().0;
                refill[i] += s.period().0;
            }
        }
    }
    None
}
