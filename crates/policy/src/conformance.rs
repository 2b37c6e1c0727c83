//! The platform conformance bodies: what every [`crate::Platform`] must do for a controller
//! (the contract is written on [`crate::Platform::apply`]), with no platform type named, so
//! the same checks run against the simulator and against real cgroups.
//!
//! [`check_platform`] drives a platform directly and checks what `apply` returns and what the
//! next observation shows. [`ConformanceProbe`] is the same script as a scripted
//! [`Controller`], for platforms whose loop owns the controller (the simulator's engine, the
//! Linux control loop). Each tick it checks the observation against the contract and asks for
//! the next step's actions; broken promises are collected in a shared [`ConformanceReport`]
//! the test reads afterwards (the platform owns the probe while it runs). The script:
//!
//! 1. every observation: the group set and each group's identity (name, role, floor) never
//!    change; time never goes backwards; PSI totals never go backwards and `full <= some`; an
//!    observed hard limit is never below the group's floor; at least one group, a positive
//!    budget;
//! 2. ask every group for half its floor: the limit is exactly the floor;
//! 3. ask for one byte more than one [`alignment`] above the floor: the limit is exactly one
//!    alignment above it (rounded down to whole pages, never up);
//! 4. ask for exactly two alignments above the floor: the limit is exactly that;
//! 5. ask every group to reclaim one byte more than one alignment: for
//!    [`RECLAIM_WATCH_TICKS`] no limit or protection changes, and usage grows by no more than
//!    [`RECLAIM_USAGE_NOISE_BYTES`] (a platform without proactive reclaim does nothing, which
//!    passes; [`check_platform`] also checks what `apply` returns: a whole-page reclaim no
//!    larger than asked, or nothing);
//! 6. clear every limit: no group has one;
//! 7. ask every group for a CPU limit of one millicpu and a read limit of one byte per second:
//!    each shows exactly the smallest limit the contract allows ([`MIN_CPU_MILLICPUS`],
//!    [`MIN_IO_BYTES_PER_S`]; a platform without a swap device it may limit shows no I/O
//!    limit, one whose group has no CPU controller no CPU limit), then clear both: none shows;
//! 8. ask for a limit and a reclaim of a group that does not exist: nothing may change or
//!    break.
//!
//! Preconditions: at least one group, none with a hard limit at the start, each using less
//! memory than its floor (so no platform raises a limit to protect the group), and room for a
//! limit of three times each floor.
//!
//! Writes may land asynchronously (the Linux platform writes off the control thread): the
//! probe passes a step as soon as its effect is observed and fails it only after
//! [`SETTLE_TICKS`]; [`check_platform`] calls its `settle` before each observation.

use std::sync::{Arc, Mutex, MutexGuard};

use crate::{Action, Controller, GroupObservation, Observation, Platform, MIN_CPU_MILLICPUS, MIN_IO_BYTES_PER_S};
use std::fmt;

/// Ticks a platform may take to show an applied change.
pub const SETTLE_TICKS: u32 = 200;
/// The alignment of a group without a floor: platforms' pages are at most this large.
const LARGEST_PAGE_BYTES: u64 = 64 << 10;
/// Ticks the probe watches a group after asking it to reclaim.
pub const RECLAIM_WATCH_TICKS: u32 = 3;
/// How much a group's usage may grow while a reclaim is watched: a live group's workload
/// keeps allocating meanwhile, and reclaimed pages may fault back in.
pub const RECLAIM_USAGE_NOISE_BYTES: u64 = 4 << 20;

/// A size every page of the platform divides, from a group's floor: the floor is a whole
/// number of pages and pages are powers of two, so the floor's lowest set bit is a multiple
/// of the page size.
pub fn alignment(floor_bytes: u64) -> u64 {
    if floor_bytes == 0 {
        LARGEST_PAGE_BYTES
    } else {
        1 << floor_bytes.trailing_zeros()
    }
}

/// The limits the script asks of a group above its floor, and what each must show:
/// (asked, shown) for the rounding step (a byte past whole pages), then for the exact step.
fn steps_above_floor(floor_bytes: u64) -> [(u64, u64); 2] {
    let align = alignment(floor_bytes);
    [(floor_bytes + align + 1, floor_bytes + align), (floor_bytes + 2 * align, floor_bytes + 2 * align)]
}

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
    RoundDown { since: u32 },
    Exact { since: u32 },
    Reclaim { since: u32 },
    Clear { since: u32 },
    Bandwidth { since: u32 },
    ClearBandwidth { since: u32 },
    Stray,
    Done,
}

/// The scripted controller; see the module documentation.
pub struct ConformanceProbe {
    report: Arc<Mutex<ConformanceReport>>,
    step: Step,
    first: Option<Observation>,
    previous: Option<Observation>,
    /// The observation the reclaim step was asked at.
    before_reclaim: Option<Observation>,
    interval_ns: u64,
}

impl ConformanceProbe {
    /// A probe ticking at `interval_ns`, and the report it fills.
    pub fn new(interval_ns: u64) -> (Self, Arc<Mutex<ConformanceReport>>) {
        let report = Arc::new(Mutex::new(ConformanceReport::default()));
        (
            ConformanceProbe {
                report: Arc::clone(&report),
                step: Step::Start,
                first: None,
                previous: None,
                before_reclaim: None,
                interval_ns,
            },
            report,
        )
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
            let b = g.bandwidth;
            let io_below = |l: Option<u64>| l.is_some_and(|l| l < MIN_IO_BYTES_PER_S);
            if b.cpu_millicpus.is_some_and(|m| m < MIN_CPU_MILLICPUS) || io_below(b.io_read_bytes_per_s) || io_below(b.io_write_bytes_per_s)
            {
                self.violation(format!("{}: observed bandwidth limits below the smallest allowed: {b:?}", g.name));
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
            if !totals_grow(a, b) {
                self.violation(format!("totals of {} went backwards: {:?} -> {:?}", a.name, a.stall, b.stall));
            }
        }
    }

    fn bandwidth_all(obs: &Observation, millicpus: Option<u64>, read_bytes_per_s: Option<u64>) -> Vec<Action> {
        (0..obs.groups.len())
            .flat_map(|group| {
                [Action::SetCpuMax { group, millicpus }, Action::SetIoMax { group, read_bytes_per_s, write_bytes_per_s: None }]
            })
            .collect()
    }

    fn set_all(obs: &Observation, bytes: impl Fn(&GroupObservation) -> Option<u64>) -> Vec<Action> {
        obs.groups.iter().enumerate().map(|(group, g)| Action::SetMax { group, bytes: bytes(g) }).collect()
    }

    /// Checks a reclaim's promises against the observation it was asked at; false on a
    /// violation (reported).
    fn check_reclaim(&self, obs: &Observation) -> bool {
        let Some(before) = &self.before_reclaim else { return true };
        let mut kept = true;
        for (a, b) in before.groups.iter().zip(&obs.groups) {
            if a.knobs != b.knobs {
                self.violation(format!("{}: a reclaim changed its limits: {:?} -> {:?}", a.name, a.knobs, b.knobs));
                kept = false;
            }
            if b.usage_bytes > a.usage_bytes.saturating_add(RECLAIM_USAGE_NOISE_BYTES) {
                self.violation(format!("{}: usage grew from {} to {} bytes after a reclaim", a.name, a.usage_bytes, b.usage_bytes));
                kept = false;
            }
        }
        kept
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
            .map(|(_, g)| format!("{} {:?} {:?}", g.name, g.knobs.max_bytes, g.bandwidth))
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
                match self.wait(obs, since, Step::RoundDown { since: 0 }, "a limit asked below the floor", |_, g| {
                    g.knobs.max_bytes == Some(g.floor_bytes)
                }) {
                    Some(next) => {
                        self.step = next;
                        Self::set_all(obs, |g| Some(steps_above_floor(g.floor_bytes)[0].0))
                    }
                    None => {
                        self.step = Step::BelowFloor { since: since + 1 };
                        Vec::new()
                    }
                }
            }
            Step::RoundDown { since } => {
                let shown = |_, g: &GroupObservation| g.knobs.max_bytes == Some(steps_above_floor(g.floor_bytes)[0].1);
                match self.wait(obs, since, Step::Exact { since: 0 }, "a limit rounded down to whole pages", shown) {
                    Some(next) => {
                        self.step = next;
                        Self::set_all(obs, |g| Some(steps_above_floor(g.floor_bytes)[1].0))
                    }
                    None => {
                        self.step = Step::RoundDown { since: since + 1 };
                        Vec::new()
                    }
                }
            }
            Step::Exact { since } => {
                // The reclaim is asked once usage has settled too: a workload still faulting its
                // memory in (just started, on a slow machine) grows past the reclaim check's noise
                // while the reclaim is watched, whatever the reclaim did.
                let previous: Vec<u64> = self.previous.iter().flat_map(|p| p.groups.iter().map(|g| g.usage_bytes)).collect();
                let settled = |i: usize, g: &GroupObservation| {
                    previous.get(i).is_none_or(|&u| g.usage_bytes <= u.saturating_add(RECLAIM_USAGE_NOISE_BYTES / 4))
                };
                let shown = |i, g: &GroupObservation| g.knobs.max_bytes == Some(steps_above_floor(g.floor_bytes)[1].1) && settled(i, g);
                match self.wait(obs, since, Step::Reclaim { since: 0 }, "an exact page-aligned limit", shown) {
                    Some(next) => {
                        self.step = next;
                        self.before_reclaim = Some(obs.clone());
                        let reclaim =
                            |(group, g): (usize, &GroupObservation)| Action::Reclaim { group, bytes: alignment(g.floor_bytes) + 1 };
                        obs.groups.iter().enumerate().map(reclaim).collect()
                    }
                    None => {
                        self.step = Step::Exact { since: since + 1 };
                        Vec::new()
                    }
                }
            }
            Step::Reclaim { since } => {
                if !self.check_reclaim(obs) || since + 1 >= RECLAIM_WATCH_TICKS {
                    self.step = Step::Clear { since: 0 };
                    Self::set_all(obs, |_| None)
                } else {
                    self.step = Step::Reclaim { since: since + 1 };
                    Vec::new()
                }
            }
            Step::Clear { since } => {
                match self.wait(obs, since, Step::Bandwidth { since: 0 }, "clearing every limit", |_, g| g.knobs.max_bytes.is_none()) {
                    Some(next) => {
                        self.step = next;
                        Self::bandwidth_all(obs, Some(1), Some(1))
                    }
                    None => {
                        self.step = Step::Clear { since: since + 1 };
                        Vec::new()
                    }
                }
            }
            Step::Bandwidth { since } => {
                let shown = |_, g: &GroupObservation| {
                    let b = g.bandwidth;
                    matches!(b.cpu_millicpus, None | Some(MIN_CPU_MILLICPUS))
                        && matches!(b.io_read_bytes_per_s, None | Some(MIN_IO_BYTES_PER_S))
                        && b.io_write_bytes_per_s.is_none()
                };
                match self.wait(obs, since, Step::ClearBandwidth { since: 0 }, "the smallest CPU and I/O limits", shown) {
                    Some(next) => {
                        self.step = next;
                        Self::bandwidth_all(obs, None, None)
                    }
                    None => {
                        self.step = Step::Bandwidth { since: since + 1 };
                        Vec::new()
                    }
                }
            }
            Step::ClearBandwidth { since } => {
                let cleared = |_, g: &GroupObservation| g.bandwidth == crate::BandwidthKnobs::default();
                match self.wait(obs, since, Step::Stray, "clearing the CPU and I/O limits", cleared) {
                    Some(next) => {
                        self.step = next;
                        let group = obs.groups.len();
                        vec![
                            Action::SetMax { group, bytes: Some(1 << 30) },
                            Action::Reclaim { group, bytes: 1 << 30 },
                            Action::SetCpuMax { group, millicpus: Some(100) },
                            Action::SetIoMax { group, read_bytes_per_s: Some(MIN_IO_BYTES_PER_S), write_bytes_per_s: None },
                        ]
                    }
                    None => {
                        self.step = Step::ClearBandwidth { since: since + 1 };
                        Vec::new()
                    }
                }
            }
            Step::Stray => {
                if let Some(g) = obs.groups.iter().find(|g| g.knobs.max_bytes.is_some() || g.bandwidth != crate::BandwidthKnobs::default())
                {
                    self.violation(format!(
                        "{}: an action for a nonexistent group changed this group's limits to {:?}, {:?}",
                        g.name, g.knobs.max_bytes, g.bandwidth
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

/// A platform contract [`check_platform`] found broken.
#[derive(Debug)]
pub struct Violation(pub String);

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "platform contract broken: {}", self.0)
    }
}

impl std::error::Error for Violation {}

macro_rules! ensure {
    ($cond:expr, $($msg:tt)+) => {
        if !$cond {
            return Err(Violation(format!($($msg)+)).into());
        }
    };
}

/// Runs the script of the module documentation against `platform` synchronously: what each
/// `apply` returns is checked as well as what the next observation shows. `settle` lets
/// writes land before each observation (a platform that applies asynchronously waits for its
/// writer; a synchronous one does nothing).
pub fn check_platform<P: Platform>(platform: &mut P, mut settle: impl FnMut(&mut P)) -> Result<(), Box<dyn std::error::Error>>
where
    P::Error: 'static,
{
    let first = platform.observe()?;
    ensure!(!first.groups.is_empty(), "observe returned no groups");
    ensure!(first.total_memory_bytes > 0, "total memory is 0");
    let second = platform.observe()?;
    ensure!(second.now_ns >= first.now_ns, "time went backwards: {} -> {}", first.now_ns, second.now_ns);
    ensure!(second.groups.len() == first.groups.len(), "group count changed between observations");
    for (a, b) in first.groups.iter().zip(&second.groups) {
        ensure!(a.name == b.name && a.role == b.role && a.floor_bytes == b.floor_bytes, "group identity changed: {} -> {}", a.name, b.name);
        ensure!(totals_grow(a, b), "totals of {} went backwards: {:?} -> {:?}", a.name, a.stall, b.stall);
        ensure!(b.stall.memory_full_us <= b.stall.memory_some_us, "{}: full stall exceeds some stall", a.name);
    }

    // Below the floor, one byte short of whole pages, whole pages: each applied exactly as the
    // contract says, reported as applied and observed so.
    for (id, g) in second.groups.iter().enumerate() {
        let [round_down, exact] = steps_above_floor(g.floor_bytes);
        for (what, asked, want) in [
            ("half the floor", g.floor_bytes / 2, g.floor_bytes),
            ("a partial page", round_down.0, round_down.1),
            ("whole pages", exact.0, exact.1),
        ] {
            let applied = platform.apply(&[Action::SetMax { group: id, bytes: Some(asked) }])?;
            settle(platform);
            ensure!(
                applied == [Action::SetMax { group: id, bytes: Some(want) }],
                "{}: asked for {asked} bytes ({what}), apply reported {applied:?}, not a limit of {want}",
                g.name
            );
            let seen = platform.observe()?.groups[id].knobs.max_bytes;
            ensure!(seen == Some(want), "{}: asked for {asked} bytes ({what}), observed {seen:?}, not {want}", g.name);
        }
    }

    // A reclaim changes no limit, asks whole pages no more than requested (or nothing, on a
    // platform without proactive reclaim), never raises usage; less than a page asks nothing.
    for (id, g) in second.groups.iter().enumerate() {
        let before = platform.observe()?.groups[id].clone();
        let asked = alignment(g.floor_bytes) + 1;
        let applied = platform.apply(&[Action::Reclaim { group: id, bytes: asked }])?;
        // Whole pages divide the alignment, so asked (one byte past it) rounds down to at most it.
        let whole_pages = |bytes: u64| bytes > 0 && bytes < asked;
        ensure!(
            match applied.as_slice() {
                [] => true,
                [Action::Reclaim { group, bytes }] => *group == id && whole_pages(*bytes),
                _ => false,
            },
            "{}: asked to reclaim {asked} bytes, apply reported {applied:?}, not whole pages up to {} or nothing",
            g.name,
            asked - 1
        );
        settle(platform);
        let after = platform.observe()?.groups[id].clone();
        ensure!(after.knobs == before.knobs, "{}: a reclaim changed its limits: {:?} -> {:?}", g.name, before.knobs, after.knobs);
        ensure!(
            after.usage_bytes <= before.usage_bytes.saturating_add(RECLAIM_USAGE_NOISE_BYTES),
            "{}: usage grew from {} to {} bytes after a reclaim",
            g.name,
            before.usage_bytes,
            after.usage_bytes
        );
        let tiny = platform.apply(&[Action::Reclaim { group: id, bytes: 1 }])?;
        ensure!(tiny.is_empty(), "{}: a reclaim of less than a page was applied: {tiny:?}", g.name);
    }

    check_bandwidth(platform, &second, &mut settle)?;

    // Clearing the limit is applied and observed; nonexistent groups are ignored.
    let clear: Vec<Action> = (0..second.groups.len()).map(|id| Action::SetMax { group: id, bytes: None }).collect();
    let applied = platform.apply(&clear)?;
    ensure!(applied == clear, "clearing limits applied {applied:?}");
    settle(platform);
    let cleared = platform.observe()?;
    ensure!(
        cleared.groups.iter().all(|g| g.knobs.max_bytes.is_none()),
        "limits still set after clearing: {:?}",
        cleared.groups.iter().map(|g| g.knobs).collect::<Vec<_>>()
    );
    let group = second.groups.len();
    let stray = platform.apply(&[
        Action::SetMax { group, bytes: Some(1 << 30) },
        Action::Reclaim { group, bytes: 1 << 30 },
        Action::SetCpuMax { group, millicpus: Some(100) },
        Action::SetIoMax { group, read_bytes_per_s: Some(MIN_IO_BYTES_PER_S), write_bytes_per_s: None },
    ])?;
    ensure!(stray.is_empty(), "an action for a nonexistent group was applied: {stray:?}");
    Ok(())
}

/// PSI totals and CPU usage never go backwards between two observations of a group.
fn totals_grow(a: &GroupObservation, b: &GroupObservation) -> bool {
    let (s, t) = (a.stall, b.stall);
    t.memory_some_us >= s.memory_some_us
        && t.memory_full_us >= s.memory_full_us
        && t.io_some_us >= s.io_some_us
        && t.io_full_us >= s.io_full_us
        && t.cpu_some_us >= s.cpu_some_us
        && b.cpu_usage_us >= a.cpu_usage_us
}

/// CPU limits below the smallest, in between and covering every CPU, then cleared (or left out
/// entirely for a group without the CPU controller); I/O limits likewise (or left out entirely
/// by a platform with no swap device it may limit): each applied as the contract says,
/// reported as applied and observed so.
fn check_bandwidth<P: Platform>(
    platform: &mut P,
    obs: &Observation,
    settle: &mut impl FnMut(&mut P),
) -> Result<(), Box<dyn std::error::Error>>
where
    P::Error: 'static,
{
    let every_cpu = u64::from(obs.cpus) * 1000;
    for (id, g) in obs.groups.iter().enumerate() {
        let mut cpu_limited = None;
        for (asked, want) in
            [(Some(1), Some(MIN_CPU_MILLICPUS)), (Some(every_cpu - 1), Some(every_cpu - 1)), (Some(every_cpu), None), (None, None)]
        {
            let applied = platform.apply(&[Action::SetCpuMax { group: id, millicpus: asked }])?;
            let now_limited = !applied.is_empty();
            ensure!(
                applied.is_empty() || applied == [Action::SetCpuMax { group: id, millicpus: want }],
                "{}: asked for a CPU limit of {asked:?} millicpus, apply reported {applied:?}, not {want:?} or nothing",
                g.name
            );
            ensure!(
                *cpu_limited.get_or_insert(now_limited) == now_limited,
                "{}: CPU limits were applied for some requests and left out for others",
                g.name
            );
            settle(platform);
            let seen = platform.observe()?.groups[id].bandwidth.cpu_millicpus;
            let want = if now_limited { want } else { None };
            ensure!(seen == want, "{}: asked for a CPU limit of {asked:?} millicpus, observed {seen:?}, not {want:?}", g.name);
        }
        let mut limited = None;
        for (read, write) in [(Some(1), Some(8 << 20)), (Some(3 << 20), None), (None, None)] {
            let want =
                Action::SetIoMax { group: id, read_bytes_per_s: read.map(|b: u64| b.max(MIN_IO_BYTES_PER_S)), write_bytes_per_s: write };
            let applied = platform.apply(&[Action::SetIoMax { group: id, read_bytes_per_s: read, write_bytes_per_s: write }])?;
            let now_limited = !applied.is_empty();
            ensure!(
                applied.is_empty() || applied == [want],
                "{}: asked for I/O limits {read:?}/{write:?} bytes/s, apply reported {applied:?}, not {want:?} or nothing",
                g.name
            );
            ensure!(
                *limited.get_or_insert(now_limited) == now_limited,
                "{}: I/O limits were applied for some requests and left out for others",
                g.name
            );
            settle(platform);
            let seen = platform.observe()?.groups[id].bandwidth;
            let (r, w) = if now_limited { (read.map(|b| b.max(MIN_IO_BYTES_PER_S)), write) } else { (None, None) };
            ensure!(
                (seen.io_read_bytes_per_s, seen.io_write_bytes_per_s) == (r, w),
                "{}: asked for I/O limits {read:?}/{write:?} bytes/s, observed {seen:?}",
                g.name
            );
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{BandwidthKnobs, GroupRole, MemoryKnobs, StallTotals};

    const PAGE_BYTES: u64 = 4096;

    /// A platform that applies synchronously and keeps the contract, in a few lines; `round`
    /// turns a request into the applied limit (before the floor), `reclaim` does a reclaim
    /// (returning what it applied), and `break_it` may spoil each observation.
    struct Toy<B: FnMut(u64, &mut Vec<GroupObservation>)> {
        groups: Vec<GroupObservation>,
        now_ns: u64,
        round: fn(u64) -> u64,
        reclaim: ReclaimFn,
        /// Whether I/O limits apply (a swap device the platform may limit).
        io: bool,
        /// Turns a CPU request into the applied limit.
        cpu: fn(Option<u64>) -> Option<u64>,
        break_it: B,
    }

    const CPUS: u32 = 2;

    fn cpu_as_contracted(millicpus: Option<u64>) -> Option<u64> {
        crate::applied_cpu_millicpus(millicpus, CPUS)
    }

    type ReclaimFn = fn(&mut GroupObservation, usize, u64) -> Option<Action>;

    /// A conforming reclaim: whole pages, taken from usage, nothing else changed.
    fn reclaim_whole_pages(g: &mut GroupObservation, group: usize, bytes: u64) -> Option<Action> {
        let bytes = round_down(bytes);
        g.usage_bytes = g.usage_bytes.saturating_sub(bytes);
        (bytes > 0).then_some(Action::Reclaim { group, bytes })
    }

    fn toy<B: FnMut(u64, &mut Vec<GroupObservation>)>(round: fn(u64) -> u64, break_it: B) -> Toy<B> {
        let groups = (0..2)
            .map(|i| GroupObservation {
                name: format!("g{i}"),
                role: GroupRole::NonRealTime,
                stall: StallTotals::default(),
                usage_bytes: 1 << 20,
                knobs: MemoryKnobs::default(),
                floor_bytes: (i + 1) * (3 << 20),
                cpu_usage_us: 0,
                bandwidth: BandwidthKnobs::default(),
            })
            .collect();
        Toy { groups, now_ns: 0, round, reclaim: reclaim_whole_pages, io: true, cpu: cpu_as_contracted, break_it }
    }

    fn round_down(bytes: u64) -> u64 {
        bytes / PAGE_BYTES * PAGE_BYTES
    }

    impl<B: FnMut(u64, &mut Vec<GroupObservation>)> Platform for Toy<B> {
        type Error = std::convert::Infallible;

        fn observe(&mut self) -> Result<Observation, Self::Error> {
            self.now_ns += 1;
            (self.break_it)(self.now_ns, &mut self.groups);
            Ok(Observation {
                now_ns: self.now_ns,
                total_memory_bytes: 1 << 30,
                cpus: CPUS,
                groups: self.groups.clone(),
                events: Vec::new(),
            })
        }

        fn apply(&mut self, actions: &[Action]) -> Result<Vec<Action>, Self::Error> {
            let mut applied = Vec::new();
            for action in actions {
                let Some(g) = self.groups.get_mut(action.group()) else { continue };
                match *action {
                    Action::SetMax { group, bytes } => {
                        g.knobs.max_bytes = bytes.map(|b| (self.round)(b).max(g.floor_bytes));
                        applied.push(Action::SetMax { group, bytes: g.knobs.max_bytes });
                    }
                    Action::Reclaim { group, bytes } => applied.extend((self.reclaim)(g, group, bytes)),
                    Action::SetCpuMax { group, millicpus } => {
                        g.bandwidth.cpu_millicpus = (self.cpu)(millicpus);
                        applied.push(Action::SetCpuMax { group, millicpus: g.bandwidth.cpu_millicpus });
                    }
                    Action::SetIoMax { group, read_bytes_per_s, write_bytes_per_s } if self.io => {
                        g.bandwidth.io_read_bytes_per_s = crate::applied_io_bytes_per_s(read_bytes_per_s);
                        g.bandwidth.io_write_bytes_per_s = crate::applied_io_bytes_per_s(write_bytes_per_s);
                        let (read_bytes_per_s, write_bytes_per_s) = (g.bandwidth.io_read_bytes_per_s, g.bandwidth.io_write_bytes_per_s);
                        applied.push(Action::SetIoMax { group, read_bytes_per_s, write_bytes_per_s });
                    }
                    _ => {}
                }
            }
            Ok(applied)
        }
    }

    /// The probe run as a controller on `platform` until it finishes (or 1000 ticks).
    fn probe<P: Platform>(mut platform: P) -> ConformanceReport {
        let (mut probe, report) = ConformanceProbe::new(1);
        for _ in 0..1000 {
            let obs = platform.observe().unwrap_or_else(|_| unreachable!());
            let actions = probe.tick(&obs);
            let _ = platform.apply(&actions);
            if probe.finished() {
                break;
            }
        }
        let report = report.lock().unwrap().clone();
        report
    }

    #[test]
    fn a_conforming_platform_passes_both_bodies() {
        let report = probe(toy(round_down, |_, _| {}));
        assert_eq!(report.verdict(), Ok(()), "{report:?}");
        assert!(report.ticks >= 6);
        check_platform(&mut toy(round_down, |_, _| {}), |_| {}).unwrap();
    }

    #[test]
    fn broken_platforms_are_caught() {
        let report = probe(toy(round_down, |_, groups| groups[0].knobs.max_bytes = Some(1)));
        assert!(report.verdict().unwrap_err().contains("below floor"), "{report:?}");
        let report = probe(toy(round_down, |now, groups| groups[1].stall.memory_some_us = 100 - now));
        assert!(report.verdict().unwrap_err().contains("went backwards"), "{report:?}");
        let report = probe(toy(round_down, |now, groups| groups[0].name = format!("g{now}")));
        assert!(report.verdict().unwrap_err().contains("identity changed"), "{report:?}");
        let report = probe(toy(round_down, |_, groups| groups[1].knobs.max_bytes = Some(64 << 20)));
        assert!(report.verdict().is_err(), "{report:?}");
    }

    /// Rounding up, or not at all, breaks the contract in both bodies.
    #[test]
    fn a_platform_that_does_not_round_down_to_whole_pages_is_caught() {
        for round in [|b: u64| b.next_multiple_of(PAGE_BYTES), |b: u64| b] {
            let report = probe(toy(round, |_, _| {}));
            assert!(report.verdict().unwrap_err().contains("rounded down to whole pages"), "{report:?}");
            let err = check_platform(&mut toy(round, |_, _| {}), |_| {}).unwrap_err().to_string();
            assert!(err.contains("a partial page"), "{err}");
        }
    }

    /// A platform without proactive reclaim passes by leaving it out; one whose reclaim caps
    /// the group, grows its usage or reports more than whole pages of the request is caught.
    #[test]
    fn reclaim_changes_no_limit_never_grows_usage_and_asks_whole_pages() {
        fn unsupported(_: &mut GroupObservation, _: usize, _: u64) -> Option<Action> {
            None
        }
        fn caps(g: &mut GroupObservation, group: usize, bytes: u64) -> Option<Action> {
            g.knobs.high_bytes = Some(g.usage_bytes);
            reclaim_whole_pages(g, group, bytes)
        }
        fn grows(g: &mut GroupObservation, group: usize, bytes: u64) -> Option<Action> {
            g.usage_bytes += 8 << 20;
            reclaim_whole_pages(g, group, bytes)
        }
        fn unrounded(_: &mut GroupObservation, group: usize, bytes: u64) -> Option<Action> {
            Some(Action::Reclaim { group, bytes })
        }
        let with = |reclaim: ReclaimFn| Toy { reclaim, ..toy(round_down, |_, _| {}) };
        assert_eq!(probe(with(reclaim_whole_pages)).verdict(), Ok(()));
        assert_eq!(probe(with(unsupported)).verdict(), Ok(()));
        check_platform(&mut with(unsupported), |_| {}).unwrap();
        for (reclaim, what) in [(caps as ReclaimFn, "changed its limits"), (grows, "usage grew")] {
            let report = probe(with(reclaim));
            assert!(report.verdict().unwrap_err().contains(what), "{report:?}");
            let err = check_platform(&mut with(reclaim), |_| {}).unwrap_err().to_string();
            assert!(err.contains(what), "{err}");
        }
        let err = check_platform(&mut with(unrounded), |_| {}).unwrap_err().to_string();
        assert!(err.contains("not whole pages"), "{err}");
    }

    /// CPU and I/O limits: a platform without a swap device passes by leaving I/O limits out;
    /// one that applies a CPU limit below the smallest, or keeps one covering every CPU, is
    /// caught by both bodies.
    #[test]
    fn bandwidth_limits_are_clamped_as_the_contract_says() {
        let without_io = Toy { io: false, ..toy(round_down, |_, _| {}) };
        assert_eq!(probe(without_io).verdict(), Ok(()));
        check_platform(&mut Toy { io: false, ..toy(round_down, |_, _| {}) }, |_| {}).unwrap();
        let unclamped = |millicpus: Option<u64>| millicpus;
        let report = probe(Toy { cpu: unclamped, ..toy(round_down, |_, _| {}) });
        assert!(report.verdict().unwrap_err().contains("below the smallest"), "{report:?}");
        let err = check_platform(&mut Toy { cpu: unclamped, ..toy(round_down, |_, _| {}) }, |_| {}).unwrap_err().to_string();
        assert!(err.contains("CPU limit of Some(1)"), "{err}");
        let never_none = |millicpus: Option<u64>| millicpus.map(|m| m.max(MIN_CPU_MILLICPUS));
        let err = check_platform(&mut Toy { cpu: never_none, ..toy(round_down, |_, _| {}) }, |_| {}).unwrap_err().to_string();
        assert!(err.contains("CPU limit of Some(2000)"), "{err}");
    }

    #[test]
    fn the_alignment_divides_every_page_size_the_floor_allows() {
        assert_eq!(alignment(0), 64 << 10);
        assert_eq!(alignment(3 << 20), 1 << 20);
        assert_eq!(alignment(4096 * 5), 4096);
        assert_eq!(steps_above_floor(3 << 20), [((4 << 20) + 1, 4 << 20), (5 << 20, 5 << 20)]);
    }
}
