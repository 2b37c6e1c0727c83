//! `[control]`: the controller, its configuration (parsed and checked once, and kept) and the
//! loop's tick.

use super::error::{Ctx, ScenarioError};
use super::raw::RawScenario;
use crate::model::memory::{ControlSpec, MemorySpec};
use crate::time::Nanos;
use critmem_policy::{ControllerConfig, GroupRole, PolicyError, TickRequest};

/// At most this many controller ticks in one run: a minute or more of simulation beyond it.
const MAX_TICKS: u64 = 1 << 24;

pub(super) fn validate_control(
    cx: &Ctx,
    raw: &RawScenario,
    memory: Option<&MemorySpec>,
    horizon: Nanos,
) -> Result<Option<ControlSpec>, ScenarioError> {
    let Some(c) = &raw.control else { return Ok(None) };
    let Some(memory) = memory.filter(|m| !m.groups.is_empty()) else {
        return Err(cx.err("control", "a controller needs [memory] and at least one [[group]] to manage"));
    };
    let written = c.config.as_ref().map_or_else(|| serde_json::Value::Object(Default::default()), |c| c.0.clone());
    let err = |e: PolicyError| {
        let key = if matches!(e, PolicyError::UnknownController { .. } | PolicyError::ExternalNotFound { .. }) {
            "control.controller"
        } else {
            "control.config"
        };
        cx.err(key, e.to_string())
    };
    let mut config = ControllerConfig::parse(&c.controller, &written).map_err(err)?;
    let soft_rt: Vec<&str> =
        memory.groups.iter().filter(|g| matches!(g.role, GroupRole::SoftRealTime { .. })).map(|g| g.name.as_str()).collect();
    config.check_group_names(&soft_rt).map_err(err)?;
    let request = match c.interval_ms {
        Some(ms) => {
            let interval = cx.positive("control.interval_ms", ms)?;
            // The interval becomes SARA's interval_ns, a key of the table.
            if config.ticks_are_its_interval() && config.interval_ns() != interval.0 && !written.is_object() {
                return Err(cx.err("control.config", "must be a table"));
            }
            TickRequest::WithConfig(interval.0)
        }
        None => TickRequest::OwnInterval,
    };
    let interval = config.resolve_tick_ns(request).map_err(|e| match e {
        PolicyError::IntervalConflict { interval_ns, .. } => cx.err(
            "control.interval_ms",
            format!(
                "{} ms differs from config.interval_ns ({interval_ns} ns), SARA's monitoring interval and so its tick: give only one",
                c.interval_ms.unwrap_or_default()
            ),
        ),
        e => err(e),
    })?;
    // Named after the key that set the tick: the interval, else the controller's own config.
    let key = if c.interval_ms.is_some() { "control.interval_ms" } else { "control.config" };
    if interval > horizon.0 {
        return Err(cx.err(
            key,
            format!(
                "the tick ({} ms) is longer than the horizon ({} ms), so the controller would never run",
                Nanos(interval).as_ms_f64(),
                horizon.as_ms_f64()
            ),
        ));
    }
    let ticks = horizon.0 / interval;
    if ticks > MAX_TICKS {
        return Err(cx.err(
            key,
            format!(
                "the tick ({} ms) gives {ticks} controller ticks over the horizon ({} ms); at most 2^24 are run: set a longer interval",
                Nanos(interval).as_ms_f64(),
                horizon.as_ms_f64()
            ),
        ));
    }
    Ok(Some(ControlSpec { config, interval: Nanos(interval) }))
}
