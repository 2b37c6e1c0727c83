//! The platform conformance body: what every [`Platform`] must do, whatever it runs on.
//!
//! It names no Linux type and drives [`Platform`] directly (synchronous checks of what `apply`
//! returns). The body shared with the simulator, which runs inside any control loop, is
//! [`critmem_policy::ConformanceProbe`]; the real-machine tests run both.
//! Preconditions: at least one group, each with a floor above one page and no limits the
//! body would collide with; the body leaves every group with no `max` limit.

use critmem_policy::{Action, Platform};
use std::fmt;

/// A platform contract the body found broken.
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

/// Runs the contract against `platform`. `settle` lets writes land (a platform that applies
/// asynchronously waits for its writer; a synchronous one does nothing).
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
        let (s, t) = (a.stall, b.stall);
        ensure!(
            t.memory_some_us >= s.memory_some_us
                && t.memory_full_us >= s.memory_full_us
                && t.io_some_us >= s.io_some_us
                && t.io_full_us >= s.io_full_us,
            "stall totals of {} went backwards: {s:?} -> {t:?}",
            a.name
        );
        ensure!(t.memory_full_us <= t.memory_some_us, "{}: full stall exceeds some stall", a.name);
    }

    // A limit below the floor is raised to the floor, and what apply reports is what the next
    // observation shows.
    for (id, g) in second.groups.iter().enumerate() {
        let applied = platform.apply(&[Action::SetMax { group: id, bytes: Some(g.floor_bytes / 2) }])?;
        settle(platform);
        let limit = match applied.as_slice() {
            [Action::SetMax { group, bytes: Some(b) }] if *group == id => *b,
            other => return Err(Violation(format!("{}: apply reported {other:?} for one SetMax", g.name)).into()),
        };
        ensure!(limit >= g.floor_bytes, "{}: limit {limit} below floor {}", g.name, g.floor_bytes);
        let seen = platform.observe()?;
        // A platform may raise a limit further (unreclaimable memory), never lower it.
        ensure!(
            seen.groups[id].knobs.max_bytes.is_some_and(|m| m >= g.floor_bytes),
            "{}: observed limit {:?} is below the floor",
            g.name,
            seen.groups[id].knobs.max_bytes
        );
    }

    // Clearing the limit is applied and observed; nonexistent groups are ignored.
    let clear: Vec<Action> = (0..second.groups.len()).map(|id| Action::SetMax { group: id, bytes: None }).collect();
    let applied = platform.apply(&clear)?;
    ensure!(applied.len() == clear.len(), "clearing limits applied {applied:?}");
    settle(platform);
    let cleared = platform.observe()?;
    ensure!(
        cleared.groups.iter().all(|g| g.knobs.max_bytes.is_none()),
        "limits still set after clearing: {:?}",
        cleared.groups.iter().map(|g| g.knobs).collect::<Vec<_>>()
    );
    let stray = platform.apply(&[Action::SetMax { group: second.groups.len(), bytes: Some(1 << 30) }])?;
    ensure!(stray.is_empty(), "an action for a nonexistent group was applied: {stray:?}");
    Ok(())
}
