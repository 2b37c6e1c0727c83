//! [`ControlLoop`]: ticks a controller on a platform at its interval.

use crate::psi::{wait_any, PsiTrigger, TriggerEvent};
use critmem_policy::{Action, Controller, Platform};
use std::time::{Duration, Instant};

/// Figures of a control loop's run.
#[derive(Clone, Debug, Default)]
pub struct LoopStats {
    pub ticks: u64,
    /// Ticks run before their time because a PSI trigger fired.
    pub early_wakes: u64,
    /// Ticks that started more than one interval late.
    pub overruns: u64,
    /// Cost (observe + tick + apply) of each tick, in ns; capped at [`LoopStats::MAX_SAMPLES`].
    pub cost_ns: Vec<u64>,
    pub cost_sum_ns: u64,
    pub cost_max_ns: u64,
    pub actions_applied: u64,
}

/// Percentiles of the per-tick cost.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct CostSummary {
    pub ticks: u64,
    pub mean_ns: u64,
    pub p50_ns: u64,
    pub p99_ns: u64,
    pub max_ns: u64,
}

impl LoopStats {
    pub const MAX_SAMPLES: usize = 1 << 20;

    fn record(&mut self, cost_ns: u64) {
        self.ticks += 1;
        self.cost_sum_ns += cost_ns;
        self.cost_max_ns = self.cost_max_ns.max(cost_ns);
        if self.cost_ns.len() < Self::MAX_SAMPLES {
            self.cost_ns.push(cost_ns);
        }
    }

    pub fn summary(&self) -> CostSummary {
        let mut sorted = self.cost_ns.clone();
        sorted.sort_unstable();
        let at = |q: f64| sorted.get(((sorted.len() as f64 - 1.0) * q).round() as usize).copied().unwrap_or(0);
        CostSummary {
            ticks: self.ticks,
            mean_ns: self.cost_sum_ns.checked_div(self.ticks).unwrap_or(0),
            p50_ns: at(0.5),
            p99_ns: at(0.99),
            max_ns: self.cost_max_ns,
        }
    }
}

/// Ticks a controller at its interval on CLOCK_MONOTONIC (std's `Instant`). Between ticks it
/// waits on the PSI triggers, if any: one firing runs the next tick at once (a hint that the
/// situation changed; the schedule then restarts from that tick).
pub struct ControlLoop {
    pub interval: Duration,
    pub triggers: Vec<PsiTrigger>,
    pub stats: LoopStats,
}

impl ControlLoop {
    pub fn new(interval_ns: u64) -> Self {
        ControlLoop { interval: Duration::from_nanos(interval_ns.max(1)), triggers: Vec::new(), stats: LoopStats::default() }
    }

    /// Runs until `stop` says so (checked before every tick) or an error. `after_tick` sees
    /// the platform and this tick's applied actions (metrics, logs).
    pub fn run<P: Platform, C: Controller + ?Sized>(
        &mut self,
        platform: &mut P,
        controller: &mut C,
        mut stop: impl FnMut() -> bool,
        mut after_tick: impl FnMut(&mut P, &[Action], &LoopStats),
    ) -> std::result::Result<(), P::Error> {
        let mut next = Instant::now();
        while !stop() {
            let started = Instant::now();
            if started.duration_since(next) > self.interval {
                self.stats.overruns += 1;
            }
            let applied = critmem_policy::step(platform, controller)?;
            self.stats.record(started.elapsed().as_nanos() as u64);
            self.stats.actions_applied += applied.len() as u64;
            after_tick(platform, &applied, &self.stats);
            next = started + self.interval;
            // A tick that took longer than the interval starts the next one now, not a burst.
            if next < Instant::now() {
                next = Instant::now();
            }
            if self.wait_until(next) {
                self.stats.early_wakes += 1;
            }
        }
        Ok(())
    }

    /// Sleeps until `deadline`, or returns `true` early when a trigger fires. Triggers whose
    /// group is gone are dropped (the next observe reports the vanished group).
    fn wait_until(&mut self, deadline: Instant) -> bool {
        let left = deadline.saturating_duration_since(Instant::now());
        if self.triggers.is_empty() {
            std::thread::sleep(left);
            return false;
        }
        let refs: Vec<&PsiTrigger> = self.triggers.iter().collect();
        match wait_any(&refs, left) {
            Ok(ready) => {
                let gone: Vec<usize> = ready.iter().filter(|(_, e)| *e == TriggerEvent::GroupGone).map(|(i, _)| *i).collect();
                let fired = ready.iter().any(|(_, e)| *e == TriggerEvent::Fired);
                for i in gone.into_iter().rev() {
                    self.triggers.remove(i);
                }
                if !fired {
                    // Interrupted or only gone-events: sleep out the rest.
                    std::thread::sleep(deadline.saturating_duration_since(Instant::now()));
                }
                fired
            }
            Err(e) => {
                tracing::warn!(error = %e, "waiting on PSI triggers failed; ticking on the timer only");
                self.triggers.clear();
                std::thread::sleep(deadline.saturating_duration_since(Instant::now()));
                false
            }
        }
    }
}
