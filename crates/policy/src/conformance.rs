//! The platform conformance body: what every [`crate::Platform`] must do for a controller,
//! written as a controller, so the same body runs wherever controllers run — inside the
//! simulator's engine and in the Linux platform's control loop — with no platform type named.
//!
//! [`ConformanceProbe`] is a scripted [`Controller`]. Each tick it checks the observation
//! against the contract and asks for the next step's actions; broken promises are collected
//! in a shared [`ConformanceReport`] the test reads afterwards (the platform owns the probe
//! while it runs). The script:
//!
//! 1. every tick: the group set and each group's identity (name, role, floor) never change;
//!    time never goes backwards; PSI totals never go backwards and `full <= some`; an observed
//!    hard limit is never below the group's floor; at least one group, a positive budget;
//! 2. ask every group for half its floor; within [`SETTLE_TICKS`] the limit must show, at or
//!    above the floor (the platform raises it; it may raise it further, never lower);
//! 3. ask for an exact page-aligned limit above the floor; within [`SETTLE_TICKS`] it must
//!    show as asked, give or take one page (platforms align to pages);
//! 4. clear every limit; within [`SETTLE_TICKS`] every group must show no limit;
//! 5. ask for a limit on a group that does not exist: nothing may change or break.
//!
//! Writes may land asynchronously (the Linux platform writes off the control thread), so a
//! step passes as soon as its effect is observed and fails only after [`SETTLE_TICKS`].

use std::sync::{Arc, Mutex, MutexGuard};

use crate::{Action, Controller, GroupObservation, Observation};

/// Ticks a platform may take to show an applied change.
pub const SETTLE_TICKS: u32 = 200;
/// Platforms align limits to pages.
const PAGE_BYTES: u64 = 4096;

/// What the probe found; shared between the probe and the test.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ConformanceReport {
    /// Broken promises, one line each, with the tick they were found at.
    pub violations: Vec<String>,
    /// Ticks the probe saw.
    pub ticks: u64,
    /// Whether the whole script ran (a run that stopped early proves nothing).
    pub finished: bool,
}

impl ConformanceReport {
    /// `Ok` when the script finished without violations; otherwise every violation, one a line.
    pub fn verdict(&self) -> Result<(), String> {
        match (self.finished, self.violations.is_empty()) {
            (true, true) => Ok(()),
            (finished, _) => {
                let mut lines = self.violations.clone();
                if !finished {
                    lines.push(format!("the script did not finish ({} ticks seen): run the platform longer", self.ticks));
                }
                Err(lines.join("\n"))
            }
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Step {
    Start,
    BelowFloor { since: u32 },
    Exact { since: u32 },
    Clear { since: u32 },
    Stray,
    Done,
}

/// The scripted controller; see the module documentation.
pub struct ConformanceProbe {
    report: Arc<Mutex<ConformanceReport>>,
    step: Step,
    first: Option<Observation>,
    previous: Option<Observation>,
    interval_ns: u64,
}

impl ConformanceProbe {
    /// A probe ticking at `interval_ns`, and the report it fills.
    pub fn new(interval_ns: u64) -> (Self, Arc<Mutex<ConformanceReport>>) {
        let report = Arc::new(Mutex::new(ConformanceReport::default()));
        (ConformanceProbe { report: Arc::clone(&report), step: Step::Start, first: None, previous: None, interval_ns }, report)
    }

    /// Whether the script has run to its end (the platform's loop may stop).
    pub fn finished(&self) -> bool {
        self.step == Step::Done
    }

    fn lock(&self) -> MutexGuard<'_, ConformanceReport> {
        self.report.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn violation(&self, message: String) {
        let mut report = self.lock();
        let tick = report.ticks;
        report.violations.push(format!("tick {tick}: {message}"));
    }

    /// The exact limit step 3 asks of a group: a page-aligned value a little above its floor.
    fn exact_limit(g: &GroupObservation) -> u64 {
        (g.floor_bytes.div_ceil(PAGE_BYTES) + 256) * PAGE_BYTES
    }

    /// The checks every observation must pass.
    fn check_invariants(&self, obs: &Observation) {
        if obs.groups.is_empty() {
            self.violation("observe returned no groups".into());
        }
        if obs.total_memory_bytes == 0 {
            self.violation("total memory is 0".into());
        }
        for g in &obs.groups {
            let s = g.stall;
            if s.memory_full_us > s.memory_some_us || s.io_full_us > s.io_some_us {
                self.violation(format!("{}: full stall exceeds some stall: {s:?}", g.name));
            }
            if let Some(max) = g.knobs.max_bytes.filter(|&m| m < g.floor_bytes) {
                self.violation(format!("{}: observed limit {max} below floor {}", g.name, g.floor_bytes));
            }
        }
        let Some(prev) = &self.previous else { return };
        if obs.now_ns < prev.now_ns {
            self.violation(format!("time went backwards: {} -> {}", prev.now_ns, obs.now_ns));
        }
        if obs.groups.len() != prev.groups.len() {
            self.violation(format!("group count changed: {} -> {}", prev.groups.len(), obs.groups.len()));
            return;
        }
        for (a, b) in prev.groups.iter().zip(&obs.groups) {
            if a.name != b.name || a.role != b.role || a.floor_bytes != b.floor_bytes {
                self.violation(format!("group identity changed: {} -> {}", a.name, b.name));
            }
            let (s, t) = (a.stall, b.stall);
            if t.memory_some_us < s.memory_some_us
                || t.memory_full_us < s.memory_full_us
                || t.io_some_us < s.io_some_us
                || t.io_full_us < s.io_full_us
            {
                self.violation(format!("stall totals of {} went backwards: {s:?} -> {t:?}", a.name));
            }
        }
    }

    fn set_all(obs: &Observation, bytes: impl Fn(&GroupObservation) -> Option<u64>) -> Vec<Action> {
        obs.groups.iter().enumerate().map(|(group, g)| Action::SetMax { group, bytes: bytes(g) }).collect()
    }

    /// Moves on when `done` holds for every group, or reports `what` after [`SETTLE_TICKS`].
    fn wait(
        &mut self,
        obs: &Observation,
        since: u32,
        next: Step,
        what: &str,
        done: impl Fn(usize, &GroupObservation) -> bool,
    ) -> Option<Step> {
        let pending: Vec<String> = obs
            .groups
            .iter()
            .enumerate()
            .filter(|(i, g)| !done(*i, g))
            .map(|(_, g)| format!("{} {:?}", g.name, g.knobs.max_bytes))
            .collect();
        if pending.is_empty() {
            return Some(next);
        }
        if since >= SETTLE_TICKS {
            self.violation(format!("{what} did not show within {SETTLE_TICKS} ticks: {}", pending.join(", ")));
            return Some(next);
        }
        None
    }
}

impl Controller for ConformanceProbe {
    fn name(&self) -> &str {
        "conformance"
    }

    fn interval_ns(&self) -> u64 {
        self.interval_ns
    }

    fn tick(&mut self, obs: &Observation) -> Vec<Action> {
        self.check_invariants(obs);
        self.lock().ticks += 1;
        if self.first.is_none() {
            self.first = Some(obs.clone());
        }
        let actions = match self.step {
            Step::Start => {
                self.step = Step::BelowFloor { since: 0 };
                Self::set_all(obs, |g| Some(g.floor_bytes / 2))
            }
            Step::BelowFloor { since } => {
                match self.wait(obs, since, Step::Exact { since: 0 }, "a limit asked below the floor", |_, g| {
                    g.knobs.max_bytes.is_some_and(|m| m >= g.floor_bytes)
                }) {
                    Some(next) => {
                        self.step = next;
                        Self::set_all(obs, |g| Some(Self::exact_limit(g)))
                    }
                    None => {
                        self.step = Step::BelowFloor { since: since + 1 };
                        Vec::new()
                    }
                }
            }
            Step::Exact { since } => {
                let shown = |_, g: &GroupObservation| g.knobs.max_bytes.is_some_and(|m| m.abs_diff(Self::exact_limit(g)) <= PAGE_BYTES);
                match self.wait(obs, since, Step::Clear { since: 0 }, "an exact limit above the floor", shown) {
                    Some(next) => {
                        self.step = next;
                        Self::set_all(obs, |_| None)
                    }
                    None => {
                        self.step = Step::Exact { since: since + 1 };
                        Vec::new()
                    }
                }
            }
            Step::Clear { since } => match self.wait(obs, since, Step::Stray, "clearing every limit", |_, g| g.knobs.max_bytes.is_none()) {
                Some(next) => {
                    self.step = next;
                    vec![Action::SetMax { group: obs.groups.len(), bytes: Some(1 << 30) }]
                }
                None => {
                    self.step = Step::Clear { since: since + 1 };
                    Vec::new()
                }
            },
            Step::Stray => {
                if let Some(g) = obs.groups.iter().find(|g| g.knobs.max_bytes.is_some()) {
                    self.violation(format!(
                        "{}: an action for a nonexistent group changed this group's limit to {:?}",
                        g.name, g.knobs.max_bytes
                    ));
                }
                self.step = Step::Done;
                self.lock().finished = true;
                Vec::new()
            }
            Step::Done => Vec::new(),
        };
        self.previous = Some(obs.clone());
        actions
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{GroupRole, MemoryKnobs, StallTotals};

    /// A platform that applies synchronously and clamps to floors, in a few lines: the probe
    /// must pass on it, and fail on one that breaks the contract.
    fn run(mut break_it: impl FnMut(u64, &mut Vec<GroupObservation>)) -> ConformanceReport {
        let (mut probe, report) = ConformanceProbe::new(1);
        let mut groups: Vec<GroupObservation> = (0..2)
            .map(|i| GroupObservation {
                name: format!("g{i}"),
                role: GroupRole::NonRealTime,
                stall: StallTotals::default(),
                usage_bytes: 0,
                knobs: MemoryKnobs::default(),
                floor_bytes: (i + 1) << 20,
            })
            .collect();
        for now_ns in 0..100 {
            break_it(now_ns, &mut groups);
            let obs = Observation { now_ns, total_memory_bytes: 1 << 30, groups: groups.clone(), events: Vec::new() };
            for action in probe.tick(&obs) {
                if let Action::SetMax { group, bytes } = action {
                    if let Some(g) = groups.get_mut(group) {
                        g.knobs.max_bytes = bytes.map(|b| b.max(g.floor_bytes));
                    }
                }
            }
            if probe.finished() {
                break;
            }
        }
        let report = report.lock().unwrap().clone();
        report
    }

    #[test]
    fn a_conforming_platform_passes() {
        let report = run(|_, _| {});
        assert_eq!(report.verdict(), Ok(()), "{report:?}");
        assert!(report.ticks >= 5);
    }

    #[test]
    fn broken_platforms_are_caught() {
        let report = run(|_, groups| groups[0].knobs.max_bytes = Some(1));
        assert!(report.verdict().unwrap_err().contains("below floor"), "{report:?}");
        let report = run(|now, groups| groups[1].stall.memory_some_us = 100 - now);
        assert!(report.verdict().unwrap_err().contains("went backwards"), "{report:?}");
        let report = run(|now, groups| groups[0].name = format!("g{now}"));
        assert!(report.verdict().unwrap_err().contains("identity changed"), "{report:?}");
        let report = run(|_, groups| groups[1].knobs.max_bytes = Some(64 << 20));
        assert!(report.verdict().is_err(), "{report:?}");
    }
}
