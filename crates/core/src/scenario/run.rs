//! `[run]`: the seed and the horizon, which values given outside the file replace.

use super::error::{Ctx, ScenarioError};
use super::raw::{RawScenario, Seed};
use super::Overrides;
use crate::model::task::TaskSpec;
use crate::time::{lcm_all, Nanos};

/// Default horizon when none is given: one hyperperiod plus the largest offset, if that is
/// at most this long.
const MAX_DEFAULT_HORIZON: Nanos = Nanos::from_secs(100);

/// The seed: the override, else the file's, else 0.
pub(super) fn seed(raw: &RawScenario, overrides: &Overrides) -> u64 {
    match (overrides.seed, raw.run.as_ref().and_then(|r| r.seed)) {
        (Some(s), _) => s,
        (None, Some(Seed(s))) => s,
        (None, None) => 0,
    }
}

/// The horizon: the override, else the file's, else one hyperperiod plus the largest offset.
pub(super) fn horizon(cx: &Ctx, raw: &RawScenario, overrides: &Overrides, tasks: &[TaskSpec]) -> Result<Nanos, ScenarioError> {
    match (overrides.horizon_ms, raw.run.as_ref().and_then(|r| r.horizon_ms)) {
        (Some(h), _) => cx.positive("horizon_ms (override)", h),
        (None, Some(h)) => cx.positive("run.horizon_ms", h),
        (None, None) => default_horizon(tasks)
            .ok_or_else(|| cx.err("run.horizon_ms", "missing, and the hyperperiod is too long to default to: set [run] horizon_ms")),
    }
}

fn default_horizon(tasks: &[TaskSpec]) -> Option<Nanos> {
    let hyper = lcm_all(tasks.iter().map(|t| t.period.0))?;
    let max_offset = tasks.iter().map(|t| t.offset.0).max().unwrap_or(0);
    let h = Nanos(hyper.checked_add(max_offset)?);
    (h <= MAX_DEFAULT_HORIZON).then_some(h)
}
