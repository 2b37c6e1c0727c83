//! [`ControlLoop`]: ticks a controller on a platform at its interval.

use crate::clock::SharedClock;
use crate::psi::{wait_any_or_readable, PsiTrigger, TriggerEvent};
use critmem_policy::{Action, Controller, Platform};
use hdrhistogram::Histogram;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::time::Duration;

/// Descriptors that turn readable when the platform has news for the controller (job reports
/// on the job socket): a loop resting between quiet ticks wakes on them.
pub trait WakeSources {
    fn wake_fds(&self) -> Vec<BorrowedFd<'_>> {
        Vec::new()
    }
}

/// Figures of a control loop's run. Percentiles come from fixed-size histograms (3
/// significant digits, up to an hour per tick), so an agent that runs for months keeps the
/// same few kilobytes of them.
#[derive(Clone, Debug)]
pub struct LoopStats {
    pub ticks: u64,
    /// Ticks run before their time because a PSI trigger fired.
    pub early_wakes: u64,
    /// Quiet ticks (no job events, no actions) after which the loop rested up to its idle
    /// interval instead of its interval.
    pub idle_rests: u64,
    /// Rests cut short by a job report (or by a stop descriptor, the last one).
    pub job_wakes: u64,
    /// Ticks that started more than one interval late.
    pub overruns: u64,
    /// Cost (observe + tick + apply) of each tick, in ns.
    cost: Histogram<u64>,
    pub cost_sum_ns: u64,
    pub cost_max_ns: u64,
    /// CPU time the loop's thread used in its ticks (observe + tick + apply), in ns: the
    /// part of [`LoopStats::cost_sum_ns`] that was work, not waiting for a CPU.
    pub cpu_sum_ns: u64,
    /// How long after it was due (one interval after the previous tick's start) each tick
    /// started, in ns; 0 for a tick on time or woken early.
    lateness: Histogram<u64>,
    pub lateness_max_ns: u64,
    pub actions_applied: u64,
}

/// Longest tick (or lateness) the histograms tell apart: an hour; longer ones count as an hour.
const HISTOGRAM_MAX_NS: u64 = 3_600_000_000_000;

fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, HISTOGRAM_MAX_NS, 3).expect("valid histogram bounds")
}

impl Default for LoopStats {
    fn default() -> Self {
        LoopStats {
            ticks: 0,
            early_wakes: 0,
            idle_rests: 0,
            job_wakes: 0,
            overruns: 0,
            cost: histogram(),
            cost_sum_ns: 0,
            cost_max_ns: 0,
            cpu_sum_ns: 0,
            lateness: histogram(),
            lateness_max_ns: 0,
            actions_applied: 0,
        }
    }
}

/// Percentiles of the per-tick cost.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct CostSummary {
    pub ticks: u64,
    pub mean_ns: u64,
    pub p50_ns: u64,
    pub p99_ns: u64,
    pub max_ns: u64,
    /// Mean CPU time of the loop's thread per tick.
    pub cpu_mean_ns: u64,
}

/// The q-quantile (0..=1) of `histogram` (within its precision), never above `max_ns`; 0 when
/// empty.
fn quantile(histogram: &Histogram<u64>, q: f64, max_ns: u64) -> u64 {
    if histogram.is_empty() {
        return 0;
    }
    histogram.value_at_quantile(q).min(max_ns)
}

impl LoopStats {
    fn record(&mut self, cost_ns: u64, cpu_ns: u64) {
        self.ticks += 1;
        self.cpu_sum_ns += cpu_ns;
        self.cost_sum_ns += cost_ns;
        self.cost_max_ns = self.cost_max_ns.max(cost_ns);
        self.cost.saturating_record(cost_ns);
    }

    fn record_lateness(&mut self, lateness_ns: u64) {
        self.lateness_max_ns = self.lateness_max_ns.max(lateness_ns);
        self.lateness.saturating_record(lateness_ns);
    }

    pub fn summary(&self) -> CostSummary {
        CostSummary {
            ticks: self.ticks,
            mean_ns: self.cost_sum_ns.checked_div(self.ticks).unwrap_or(0),
            p50_ns: quantile(&self.cost, 0.5, self.cost_max_ns),
            p99_ns: quantile(&self.cost, 0.99, self.cost_max_ns),
            max_ns: self.cost_max_ns,
            cpu_mean_ns: self.cpu_sum_ns.checked_div(self.ticks).unwrap_or(0),
        }
    }

    /// The 99th percentile of tick lateness, in ns.
    pub fn lateness_p99_ns(&self) -> u64 {
        quantile(&self.lateness, 0.99, self.lateness_max_ns)
    }
}

/// What ended a wait between ticks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Wake {
    Timer,
    Trigger,
    Job,
}

/// Ticks a controller at its interval on a [`crate::clock::Clock`]. Between ticks it waits on the PSI
/// triggers, if any: one firing runs the next tick at once (a hint that the situation changed;
/// the schedule then restarts from that tick).
///
/// With triggers armed and an idle interval longer than the interval, a quiet tick (no job
/// events observed, no action applied) is followed by a rest: after the interval the loop
/// keeps waiting, up to the idle interval from the tick's start, until a trigger fires or a
/// job report arrives. The next tick that is not quiet brings the interval back. A loop with
/// nothing to do then wakes once per idle interval, and a stall still wakes it within the
/// trigger's own delay.
pub struct ControlLoop {
    pub interval_ns: u64,
    /// 0, or not longer than `interval_ns`: no rests.
    pub idle_interval_ns: u64,
    pub triggers: Vec<PsiTrigger>,
    /// Descriptors readable when the caller's `stop` may have become true (a signalfd): they
    /// end a rest, so a stop is not held up by it.
    pub stop_fds: Vec<OwnedFd>,
    pub stats: LoopStats,
    clock: SharedClock,
}

impl ControlLoop {
    pub fn new(interval_ns: u64, clock: SharedClock) -> Self {
        ControlLoop {
            interval_ns: interval_ns.max(1),
            idle_interval_ns: 0,
            triggers: Vec::new(),
            stop_fds: Vec::new(),
            stats: LoopStats::default(),
            clock,
        }
    }

    /// Whether a quiet tick is followed by a rest.
    pub fn rests_when_idle(&self) -> bool {
        !self.triggers.is_empty() && self.idle_interval_ns > self.interval_ns
    }

    /// Runs until `stop` says so (checked before every tick), the controller fails
    /// ([`Controller::failure`]: the caller reads it and restores) or an error. `after_tick` sees
    /// the platform and this tick's applied actions (metrics, logs). A tick's cost is the
    /// clock's time from its observation to the end of its apply.
    pub fn run<P: Platform + WakeSources, C: Controller + ?Sized>(
        &mut self,
        platform: &mut P,
        controller: &mut C,
        mut stop: impl FnMut() -> bool,
        mut after_tick: impl FnMut(&mut P, &[Action], &LoopStats),
    ) -> std::result::Result<(), P::Error> {
        let mut next_ns = self.clock.now_ns();
        // When the tick is due on the ideal schedule: one interval after the previous start
        // (a long tick or a slow wake-up makes the next one late by the excess).
        let mut due_ns = next_ns;
        while controller.failure().is_none() && !stop() {
            let started_ns = self.clock.now_ns();
            if started_ns.saturating_sub(next_ns) > self.interval_ns {
                self.stats.overruns += 1;
            }
            self.stats.record_lateness(started_ns.saturating_sub(due_ns));
            due_ns = started_ns.saturating_add(self.interval_ns);
            let cpu_started_ns = self.clock.thread_cpu_ns();
            let observation = platform.observe()?;
            let actions = controller.tick(&observation);
            let applied = platform.apply(&actions)?;
            if controller.failure().is_some() {
                break;
            }
            let quiet = observation.events.is_empty() && applied.is_empty();
            let cpu_ns = self.clock.thread_cpu_ns().saturating_sub(cpu_started_ns);
            self.stats.record(self.clock.now_ns().saturating_sub(started_ns), cpu_ns);
            self.stats.actions_applied += applied.len() as u64;
            after_tick(platform, &applied, &self.stats);
            // A tick that took longer than the interval starts the next one now, not a burst.
            next_ns = started_ns.saturating_add(self.interval_ns).max(self.clock.now_ns());
            match self.wait_until(next_ns, &[], false) {
                Wake::Trigger => self.stats.early_wakes += 1,
                Wake::Job => {}
                Wake::Timer if quiet && self.rests_when_idle() => {
                    self.stats.idle_rests += 1;
                    let rest_until_ns = started_ns.saturating_add(self.idle_interval_ns);
                    // Job reports wake a rest only: during the interval they wait for its tick
                    // as always, so a flood of reports cannot tick the loop faster.
                    let wake = self.wait_until(rest_until_ns, &platform.wake_fds(), true);
                    match wake {
                        Wake::Trigger => self.stats.early_wakes += 1,
                        Wake::Job => self.stats.job_wakes += 1,
                        Wake::Timer => {}
                    }
                    // The rest is the schedule: neither late nor an overrun.
                    next_ns = if wake == Wake::Timer { rest_until_ns } else { self.clock.now_ns() };
                    due_ns = next_ns;
                }
                Wake::Timer => {}
            }
        }
        Ok(())
    }

    /// Sleeps until `deadline_ns`, or returns early when a trigger fires or one of `readable`
    /// (and in a `rest`, of the stop descriptors) has something to read. Triggers whose group
    /// is gone are dropped (the next observe reports the vanished group).
    fn wait_until(&mut self, deadline_ns: u64, readable: &[BorrowedFd<'_>], rest: bool) -> Wake {
        if self.triggers.is_empty() {
            self.clock.sleep_until_ns(deadline_ns);
            return Wake::Timer;
        }
        let left = Duration::from_nanos(deadline_ns.saturating_sub(self.clock.now_ns()));
        let waited = {
            let refs: Vec<&PsiTrigger> = self.triggers.iter().collect();
            let mut fds = readable.to_vec();
            if rest {
                fds.extend(self.stop_fds.iter().map(|fd| fd.as_fd()));
            }
            wait_any_or_readable(&refs, &fds, left)
        };
        match waited {
            Ok((ready, has_input)) => {
                let gone: Vec<usize> = ready.iter().filter(|(_, e)| *e == TriggerEvent::GroupGone).map(|(i, _)| *i).collect();
                let fired = ready.iter().any(|(_, e)| *e == TriggerEvent::Fired);
                for i in gone.into_iter().rev() {
                    self.triggers.remove(i);
                }
                if fired {
                    Wake::Trigger
                } else if has_input {
                    Wake::Job
                } else {
                    // Interrupted or only gone-events: sleep out the rest.
                    self.clock.sleep_until_ns(deadline_ns);
                    Wake::Timer
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "waiting on PSI triggers failed; ticking on the timer only");
                self.triggers.clear();
                self.clock.sleep_until_ns(deadline_ns);
                Wake::Timer
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::{Clock, FakeClock};
    use critmem_policy::{GroupObservation, GroupRole, MemoryKnobs, Observation, StallTotals};
    use std::sync::Arc;

    /// A platform whose every observation takes `observe_ns` of the clock's time, a third of it
    /// CPU time (the rest waiting for a CPU), and records when it started.
    struct Timed {
        clock: Arc<FakeClock>,
        observe_ns: u64,
        seen_ns: Vec<u64>,
    }

    impl WakeSources for Timed {}

    impl Platform for Timed {
        type Error = std::convert::Infallible;
        fn observe(&mut self) -> Result<Observation, Self::Error> {
            self.seen_ns.push(self.clock.now_ns());
            self.clock.advance_ns(self.observe_ns);
            self.clock.advance_cpu_ns(self.observe_ns / 3);
            let group = GroupObservation {
                name: "g".into(),
                role: GroupRole::NonRealTime,
                stall: StallTotals::default(),
                usage_bytes: 0,
                knobs: MemoryKnobs::default(),
                floor_bytes: 4096,
                cpu_usage_us: 0,
                bandwidth: Default::default(),
            };
            Ok(Observation { now_ns: self.clock.now_ns(), total_memory_bytes: 1 << 30, cpus: 1, groups: vec![group], events: Vec::new() })
        }
        fn apply(&mut self, _actions: &[Action]) -> Result<Vec<Action>, Self::Error> {
            Ok(Vec::new())
        }
    }

    fn run(interval_ns: u64, observe_ns: u64, ticks: u64) -> (Vec<u64>, LoopStats) {
        let clock = FakeClock::new(1_000_000);
        let mut platform = Timed { clock: Arc::clone(&clock), observe_ns, seen_ns: Vec::new() };
        let mut controller = critmem_policy::make_controller("greedy", serde_json::json!({})).unwrap();
        let mut control = ControlLoop::new(interval_ns, clock);
        let mut left = ticks;
        control
            .run(
                &mut platform,
                controller.as_mut(),
                || {
                    left = left.saturating_sub(1);
                    left == 0
                },
                |_, _, _| {},
            )
            .unwrap();
        (platform.seen_ns, control.stats)
    }

    #[test]
    fn ticks_start_one_interval_apart_and_cost_what_the_tick_took() {
        let (seen_ns, stats) = run(5_000_000, 300_000, 21);
        assert_eq!(seen_ns.len(), 20);
        assert!(seen_ns.windows(2).all(|w| w[1] - w[0] == 5_000_000), "{seen_ns:?}");
        let cost = stats.summary();
        assert_eq!((cost.ticks, cost.mean_ns, cost.p99_ns, cost.max_ns), (20, 300_000, 300_000, 300_000));
        // Of each tick's 300 µs, the thread worked for 100 µs.
        assert_eq!((cost.cpu_mean_ns, stats.cpu_sum_ns), (100_000, 2_000_000));
        assert_eq!((stats.overruns, stats.early_wakes), (0, 0));
        assert_eq!((stats.lateness_p99_ns(), stats.lateness_max_ns), (0, 0));
    }

    #[test]
    fn a_tick_longer_than_the_interval_starts_the_next_at_once_never_a_burst() {
        let (seen_ns, stats) = run(1_000_000, 2_500_000, 11);
        assert!(seen_ns.windows(2).all(|w| w[1] - w[0] == 2_500_000), "{seen_ns:?}");
        assert_eq!(stats.ticks, 10);
        // Each tick after the first starts 1.5 ms after the time it was due.
        assert_eq!((stats.lateness_p99_ns(), stats.lateness_max_ns), (1_500_000, 1_500_000));
    }
}
