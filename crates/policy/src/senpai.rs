//! senpai, Meta's PSI-driven limit agent, applied to each soft real-time group.
//!
//! The update rule follows the published `senpai.py` (facebookincubator/senpai, `senpai.py`,
//! `Senpai.tick`, `Senpai.adjust`, `Cgroup.import_limit`), checked against the source:
//!
//! ```text
//! every tick:  integral += Δ(memory some total)              (microseconds)
//! if integral > pressure:                                    (strictly greater)
//!     adj = min((integral / pressure / coeff_backoff)² · max_backoff, max_backoff)
//!     limit = int(limit + limit · adj); integral = 0; grace = interval − 1
//! elif grace > 0: grace −= 1
//! else:
//!     adj = min((pressure / max(integral, 1) / coeff_probe)² · max_probe, max_probe)
//!     limit = int(limit − limit · adj); integral = 0; grace = interval − 1
//! every new limit: clamp to [min, max], then align down to 4 KiB
//! ```
//!
//! The first limit is the group's current usage and `grace` starts at `interval`
//! (`Senpai.__init__`). A limit someone else changed resets the group to its current usage with
//! fresh state; we check every tick, as oomd's Senpai plugin does
//! (facebookincubator/oomd, `src/oomd/plugins/Senpai.cpp`), where `senpai.py` only notices at its
//! next write. Readback differing by less than a page counts as unchanged (the kernel stores
//! limits in pages).
//!
//! senpai ticks once per second (`time.sleep(1)`); here a senpai tick runs when `tick_ns` has
//! passed since the previous one, so the platform may call this controller more often.
//! `[min, max]` are the group's `[floor, total − others]` narrowed by `limit_min_bytes` /
//! `limit_max_bytes` (senpai's `--min-size 100M`/`--max-size 100G` defaults would not fit an
//! edge device, so they are opt-in). senpai writes `memory.high`, which stays the default knob.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::budget::{clamp_bytes, is_soft_rt, plan_nrt, ActionPlan, Budget, LimitKnob};
use crate::{Action, Controller, GroupId, GroupRole, Observation, PolicyError, StallInputs};

const PAGE_BYTES: u64 = 4096;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SenpaiConfig {
    /// Length of one senpai tick (`time.sleep(1)` in senpai.py).
    pub tick_ns: u64,
    /// `--interval`: ticks between probes.
    pub interval_ticks: u32,
    /// `--pressure`: target stall per probe window, microseconds.
    pub pressure_us: u64,
    /// `--max-probe`.
    pub max_probe: f64,
    /// `--max-backoff`.
    pub max_backoff: f64,
    /// `--coeff-probe`.
    pub coeff_probe: f64,
    /// `--coeff-backoff`.
    pub coeff_backoff: f64,
    /// `--min-size`, raised to the group's floor.
    pub limit_min_bytes: u64,
    /// `--max-size`, lowered to what the other groups' floors leave.
    pub limit_max_bytes: Option<u64>,
    pub knob: LimitKnob,
}

impl Default for SenpaiConfig {
    fn default() -> Self {
        SenpaiConfig {
            tick_ns: 1_000_000_000,
            interval_ticks: 6,
            pressure_us: 10_000,
            max_probe: 0.01,
            max_backoff: 1.0,
            coeff_probe: 10.0,
            coeff_backoff: 20.0,
            limit_min_bytes: 0,
            limit_max_bytes: None,
            knob: LimitKnob::High,
        }
    }
}

impl SenpaiConfig {
    pub fn validate(&self) -> Result<(), PolicyError> {
        let bad = |field, requirement, got: String| Err(PolicyError::InvalidParameter { controller: "senpai", field, requirement, got });
        if self.tick_ns == 0 {
            return bad("tick_ns", "must be > 0 (senpai uses 1_000_000_000)", "0".into());
        }
        if self.interval_ticks == 0 {
            return bad("interval_ticks", "must be ≥ 1 (senpai uses 6)", "0".into());
        }
        if self.pressure_us == 0 {
            return bad("pressure_us", "must be > 0 (senpai uses 10_000)", "0".into());
        }
        for (field, v) in [("max_probe", self.max_probe), ("max_backoff", self.max_backoff)] {
            if !(v.is_finite() && v >= 0.0) {
                return bad(field, "must be a finite number ≥ 0", v.to_string());
            }
        }
        if self.max_probe > 1.0 {
            return bad("max_probe", "must be ≤ 1 (a probe cannot remove more than the limit)", self.max_probe.to_string());
        }
        for (field, v) in [("coeff_probe", self.coeff_probe), ("coeff_backoff", self.coeff_backoff)] {
            if !(v.is_finite() && v > 0.0) {
                return bad(field, "must be a finite number > 0", v.to_string());
            }
        }
        Ok(())
    }
}

/// senpai's state for one group (`Senpai` and `Cgroup` attributes in senpai.py).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SenpaiState {
    pub limit_bytes: u64,
    pub last_total_us: u64,
    pub integral_us: u64,
    pub grace_ticks: u32,
    pub last_tick_ns: u64,
}

#[derive(Clone, Debug)]
pub struct Senpai {
    config: SenpaiConfig,
    groups: BTreeMap<GroupId, SenpaiState>,
}

impl Senpai {
    pub fn new(config: SenpaiConfig) -> Result<Self, PolicyError> {
        config.validate()?;
        Ok(Senpai::from_valid(config))
    }

    /// A controller from a configuration [`SenpaiConfig::validate`] accepted.
    pub(crate) fn from_valid(config: SenpaiConfig) -> Self {
        Senpai { config, groups: BTreeMap::new() }
    }

    pub fn state(&self, group: GroupId) -> Option<&SenpaiState> {
        self.groups.get(&group)
    }
}

/// `Cgroup.import_limit`: clamp, then align down to 4 KiB — unless aligning would cross the
/// floor (a floor that is not page-aligned), where the clamped value is kept.
fn import_limit(v: u64, lo: u64, hi: u64) -> u64 {
    let clamped = clamp_bytes(v, lo, hi);
    let aligned = clamped & !(PAGE_BYTES - 1);
    if aligned < lo {
        clamped
    } else {
        aligned
    }
}

/// One senpai.py `tick()` on a group whose limit nobody else touched.
fn senpai_tick(cfg: &SenpaiConfig, st: &mut SenpaiState, total_us: u64, lo: u64, hi: u64) {
    let delta = total_us.saturating_sub(st.last_total_us);
    st.last_total_us = total_us;
    st.integral_us = st.integral_us.saturating_add(delta);
    let pressure = cfg.pressure_us as f64;
    let factor = if st.integral_us > cfg.pressure_us {
        let err = st.integral_us as f64 / pressure;
        let adj = (err / cfg.coeff_backoff).powi(2);
        (adj * cfg.max_backoff).min(cfg.max_backoff)
    } else if st.grace_ticks > 0 {
        st.grace_ticks -= 1;
        return;
    } else {
        let err = pressure / (st.integral_us.max(1) as f64);
        let adj = (err / cfg.coeff_probe).powi(2);
        -(adj * cfg.max_probe).min(cfg.max_probe)
    };
    // `Cgroup.scale_limit`: x = int(x + x * factor), in floating point as Python does.
    let x = st.limit_bytes as f64;
    st.limit_bytes = import_limit((x + x * factor) as u64, lo, hi);
    st.integral_us = 0;
    st.grace_ticks = cfg.interval_ticks - 1;
}

impl Controller for Senpai {
    fn name(&self) -> &str {
        "senpai"
    }

    /// Only the memory `some` total of the soft real-time groups.
    fn stall_inputs(&self, role: &GroupRole) -> StallInputs {
        StallInputs::MEMORY.of_soft_rt(role)
    }

    /// Only a soft real-time group's usage (what it holds when unconstrained); the
    /// non-real-time groups get what the soft real-time ones leave.
    /// Memory controllers: no CPU time, CPU pressure or CPU limit.
    fn uses_cpu(&self) -> bool {
        false
    }

    fn reads_usage(&self, role: &GroupRole) -> bool {
        matches!(role, GroupRole::SoftRealTime { .. })
    }

    fn tick(&mut self, obs: &Observation) -> Vec<Action> {
        let cfg = &self.config;
        self.groups.retain(|id, _| obs.groups.get(*id).is_some_and(is_soft_rt));
        let mut plan = ActionPlan::default();
        let mut budget = Budget::new(obs);
        for (id, g) in obs.groups.iter().enumerate().filter(|(_, g)| is_soft_rt(g)) {
            let (floor, cap) = budget.bounds(g.floor_bytes);
            // `limit_min_bytes` is a preference: it yields to the total, floors do not.
            let lo = cfg.limit_min_bytes.min(cap).max(floor);
            let hi = cap.min(cfg.limit_max_bytes.unwrap_or(u64::MAX));
            let total_us = g.stall.memory_some_us;
            let fresh = SenpaiState {
                limit_bytes: import_limit(g.usage_bytes, lo, hi),
                last_total_us: total_us,
                integral_us: 0,
                grace_ticks: cfg.interval_ticks,
                last_tick_ns: obs.now_ns,
            };
            let created = !self.groups.contains_key(&id);
            let st = self.groups.entry(id).or_insert(fresh);
            let untouched = cfg.knob.read(g).is_some_and(|b| b.abs_diff(st.limit_bytes) < PAGE_BYTES);
            if created {
                // `Senpai.__init__`: start from current usage; the first tick comes one period later.
            } else if !untouched {
                *st = fresh;
            } else if obs.now_ns.saturating_sub(st.last_tick_ns) >= cfg.tick_ns {
                st.last_tick_ns = obs.now_ns;
                senpai_tick(cfg, st, total_us, lo, hi);
            }
            // The budget may have shrunk since the last write (other groups, a smaller total).
            st.limit_bytes = import_limit(st.limit_bytes, lo, hi);
            plan.set(obs, id, cfg.knob, Some(st.limit_bytes));
            budget.hold(g.floor_bytes, st.limit_bytes);
        }
        plan_nrt(&mut plan, obs, &budget, cfg.knob);
        plan.finish()
    }
}
