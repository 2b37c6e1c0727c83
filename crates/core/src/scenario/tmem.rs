//! `[tmem]`: TMEM's memory scheduler over the components' stacks and cbufs — its policy, how
//! requests wait, the pool beyond the caches' minimums, its period and over-quota allocation on
//! self-suspension.

use super::error::{Ctx, ScenarioError};
use super::raw::RawScenario;
use crate::model::program::StackWait;
use crate::model::tmem::TmemSpec;
use crate::time::Nanos;

/// Most units the pool may hold beyond the minimums (ids are 32-bit).
const MAX_UNITS: i64 = 1 << 24;

/// At most this many scheduler runs in one run.
const MAX_RUNS: u64 = 1 << 24;

pub(super) fn validate_tmem(cx: &Ctx, raw: &RawScenario, horizon: Nanos) -> Result<Option<TmemSpec>, ScenarioError> {
    let Some(t) = &raw.tmem else { return Ok(None) };
    let policy = t.policy.clone().unwrap_or_else(|| "tmem".to_string());
    let config = t.config.as_ref().map(|c| c.0.clone());
    critmem_policy::tmem::check_memory_scheduler(&policy, config.as_ref()).map_err(|e| match e {
        critmem_policy::ExternalError::NotFound(m) => cx.err("tmem.policy", m),
        critmem_policy::ExternalError::Invalid(m) => cx.err("tmem.config", m),
    })?;
    let units_above_min = match t.units_above_min {
        None => None,
        Some(n) if (0..=MAX_UNITS).contains(&n) => Some(n as u32),
        Some(n) => return Err(cx.err("tmem.units_above_min", format!("must be between 0 and {MAX_UNITS} (got {n})"))),
    };
    let period = cx.positive("tmem.period_ms", t.period_ms.unwrap_or(250.0))?;
    if horizon.0 / period.0 > MAX_RUNS {
        return Err(cx.err("tmem.period_ms", format!("gives more than {MAX_RUNS} runs of the scheduler over the horizon; lengthen it")));
    }
    let first_run = cx.time("tmem.first_run_ms", t.first_run_ms.unwrap_or(0.0))?;
    let cbuf_map_cost = cx.time("tmem.cbuf_map_us", t.cbuf_map_us.unwrap_or(0.0) / 1000.0)?;
    let ss_max_units = match t.ss_max_units {
        None => 0,
        Some(n) if (0..=MAX_UNITS).contains(&n) => n as u32,
        Some(n) => return Err(cx.err("tmem.ss_max_units", format!("must be between 0 and {MAX_UNITS} (got {n})"))),
    };
    if !raw.component.iter().any(|c| c.stacks.is_some() || c.cbufs.is_some()) {
        return Err(cx.err("tmem", "manages components' stacks and cbufs, but no [[component]] gives stacks or cbufs"));
    }
    Ok(Some(TmemSpec {
        policy,
        config,
        wait: t.wait.unwrap_or(StackWait::Inherit),
        units_above_min,
        period,
        first_run,
        cbuf_map_cost,
        ss_max_units,
    }))
}
