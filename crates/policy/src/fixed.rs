//! Static soft real-time limits: the Offline baseline (one limit found by profiling runs) and
//! the fixed partition (`static`, limits per group from configuration). The non-real-time
//! groups get what the soft real-time limits leave.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::budget::{clamp_bytes, is_soft_rt, plan_nrt, ActionPlan, Budget, LimitKnob};
use crate::{Action, Controller, GroupObservation, GroupRole, Observation, PolicyError, StallInputs};

/// Offline: a static soft-RT limit found by profiling (see [`pick_offline_limit`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OfflineConfig {
    /// Limit of every soft-RT group.
    pub limit_bytes: u64,
    /// Per-group overrides by group name, when several soft-RT workloads were profiled apart.
    #[serde(default)]
    pub group_limits_bytes: BTreeMap<String, u64>,
    #[serde(default)]
    pub knob: LimitKnob,
}

/// Fixed partition: a constant limit per soft-RT group, by group name.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct StaticConfig {
    pub limits_bytes: BTreeMap<String, u64>,
    /// Limit of soft-RT groups not named in `limits_bytes`; without it they run unconstrained
    /// (holding their usage, as under Greedy).
    pub default_limit_bytes: Option<u64>,
    pub knob: LimitKnob,
}

impl StaticConfig {
    pub fn validate(&self) -> Result<(), PolicyError> {
        if self.limits_bytes.is_empty() && self.default_limit_bytes.is_none() {
            return Err(PolicyError::BadConfig {
                controller: "static".into(),
                message: "set `limits_bytes` (group name → bytes) or `default_limit_bytes`".into(),
            });
        }
        Ok(())
    }
}

/// Constant soft-RT limits; `name` is "offline" or "static".
#[derive(Clone, Debug)]
pub struct FixedLimits {
    name: &'static str,
    default_bytes: Option<u64>,
    by_name: BTreeMap<String, u64>,
    knob: LimitKnob,
}

impl FixedLimits {
    pub fn offline(config: OfflineConfig) -> Self {
        FixedLimits { name: "offline", default_bytes: Some(config.limit_bytes), by_name: config.group_limits_bytes, knob: config.knob }
    }

    /// A fixed partition from a configuration [`StaticConfig::validate`] accepted.
    pub(crate) fn from_valid(config: StaticConfig) -> Self {
        FixedLimits { name: "static", default_bytes: config.default_limit_bytes, by_name: config.limits_bytes, knob: config.knob }
    }

    fn limit_for(&self, g: &GroupObservation) -> Option<u64> {
        self.by_name.get(&g.name).copied().or(self.default_bytes)
    }
}

impl Controller for FixedLimits {
    fn name(&self) -> &str {
        self.name
    }

    fn stall_inputs(&self, _role: &GroupRole) -> StallInputs {
        StallInputs::NONE
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
        let mut plan = ActionPlan::default();
        let mut budget = Budget::new(obs);
        for (id, g) in obs.groups.iter().enumerate().filter(|(_, g)| is_soft_rt(g)) {
            match self.limit_for(g) {
                Some(bytes) => {
                    let (lo, hi) = budget.bounds(g.floor_bytes);
                    let limit = clamp_bytes(bytes, lo, hi);
                    plan.set(obs, id, self.knob, Some(limit));
                    budget.hold(g.floor_bytes, limit);
                }
                None => {
                    plan.set(obs, id, self.knob, None);
                    budget.hold(g.floor_bytes, g.usage_bytes);
                }
            }
        }
        plan_nrt(&mut plan, obs, &budget, self.knob);
        plan.finish()
    }
}

/// Offline profiling's choice: the smallest limit whose profiled deadline-hit ratio reaches
/// `target_hit_ratio`, from `(limit_bytes, hit_ratio)` results of the platform's profiling runs.
pub fn pick_offline_limit(profile: &[(u64, f64)], target_hit_ratio: f64) -> Result<u64, PolicyError> {
    if !(0.0..=1.0).contains(&target_hit_ratio) {
        return Err(PolicyError::BadInput {
            what: "pick_offline_limit",
            message: format!("target hit ratio must be within 0..=1 (got {target_hit_ratio})"),
        });
    }
    if let Some(&(limit, ratio)) = profile.iter().find(|(_, r)| !r.is_finite() || !(0.0..=1.0).contains(r)) {
        return Err(PolicyError::BadInput {
            what: "pick_offline_limit",
            message: format!("hit ratio at {limit} bytes must be within 0..=1 (got {ratio})"),
        });
    }
    let Some(&(best_limit_bytes, best_ratio)) = profile.iter().max_by(|a, b| a.1.total_cmp(&b.1).then(b.0.cmp(&a.0))) else {
        return Err(PolicyError::TooFewSamples { what: "pick_offline_limit", needed: 1, got: 0 });
    };
    profile.iter().filter(|(_, r)| *r >= target_hit_ratio).map(|(l, _)| *l).min().ok_or(PolicyError::NoLimitMeetsTarget {
        target: target_hit_ratio,
        best_ratio,
        best_limit_bytes,
    })
}
