//! TMO's proactive reclaim rule (Weiner et al., ASPLOS '22), as the SARA paper's TMO-Low and
//! TMO-High baselines apply it to the soft real-time groups:
//!
//! `reclaim = current · ratio · max(0, 1 − PSI_some / PSI_threshold)` once per `period`,
//!
//! where `PSI_some` is the group's memory `some` stall share over the period just ended,
//! computed from the deltas of its PSI totals (the kernel's avg10 is too coarse and too stale).
//!
//! TMO reclaims through `memory.reclaim`: a one-shot reclaim that never caps later growth. With
//! only limit knobs, the reclaim is a one-tick dip: the limit is set to `current − reclaim` (the
//! platform reclaims down to it) and lifted again on the next tick, the way oomd's
//! `SenpaiPoking` pokes `memory.high` and resets it (facebookincubator/oomd,
//! `src/oomd/plugins/SenpaiPoking.cpp`). Between reclaims the group is unconstrained, so it holds
//! its usage and the non-RT groups get the rest, as under Greedy.
//!
//! Defaults, from the published senpai (facebookincubator/senpai, `senpai.py`), whose probe
//! is the same "shrink by up to a ratio while pressure is low" step: `period` = 6 s (a probe
//! every `--interval 6` ticks of `time.sleep(1)`) and `ratio` = 0.01 (`--max-probe 0.01`).
//! TMO-Low's threshold is 0.1 % (SARA §IV-A); TMO-High's is found by [`pick_tmo_threshold`].

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::budget::{clamp_bytes, is_soft_rt, plan_nrt, ActionPlan, Budget, LimitKnob};
use crate::{Action, Controller, GroupId, GroupRole, Observation, PolicyError, StallInputs};

/// TMO-Low's PSI threshold (SARA §IV-A, "the original TMO parameter setting").
pub const TMO_LOW_THRESHOLD_PCT: f64 = 0.1;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TmoConfig {
    /// `PSI_threshold` in percent of wall time. Defaults to 0.1 for `tmo-low`; required for
    /// `tmo-high`.
    pub psi_threshold_pct: Option<f64>,
    /// `ratio`: share of current usage reclaimed per period at zero pressure.
    pub reclaim_ratio: f64,
    /// How often the rule runs; also the window `PSI_some` is measured over.
    pub period_ns: u64,
    /// Knob used for the reclaim dip and for the non-RT limits.
    pub knob: LimitKnob,
}

impl Default for TmoConfig {
    fn default() -> Self {
        TmoConfig { psi_threshold_pct: None, reclaim_ratio: 0.01, period_ns: 6_000_000_000, knob: LimitKnob::Max }
    }
}

#[derive(Clone, Copy, Debug)]
struct TmoState {
    window_start_ns: u64,
    window_start_some_us: u64,
}

/// The TMO controller (`tmo-low` or `tmo-high`).
#[derive(Clone, Debug)]
pub struct Tmo {
    name: &'static str,
    threshold_pct: f64,
    config: TmoConfig,
    groups: BTreeMap<GroupId, TmoState>,
}

impl TmoConfig {
    /// TMO-Low's threshold (0.1 % unless given), with every parameter checked.
    pub fn checked_low_threshold(&self) -> Result<f64, PolicyError> {
        let threshold_pct = self.psi_threshold_pct.unwrap_or(TMO_LOW_THRESHOLD_PCT);
        self.check("tmo-low", threshold_pct).map(|()| threshold_pct)
    }

    /// TMO-High's threshold (which must be given), with every parameter checked.
    pub fn checked_high_threshold(&self) -> Result<f64, PolicyError> {
        let threshold_pct = self.psi_threshold_pct.ok_or(PolicyError::MissingTmoThreshold)?;
        self.check("tmo-high", threshold_pct).map(|()| threshold_pct)
    }

    fn check(&self, name: &'static str, threshold_pct: f64) -> Result<(), PolicyError> {
        let bad = |field, requirement, got: String| Err(PolicyError::InvalidParameter { controller: name, field, requirement, got });
        if !(threshold_pct.is_finite() && threshold_pct > 0.0 && threshold_pct <= 100.0) {
            return bad("psi_threshold_pct", "must be a percentage in (0, 100]", threshold_pct.to_string());
        }
        if !(self.reclaim_ratio.is_finite() && (0.0..=1.0).contains(&self.reclaim_ratio)) {
            return bad("reclaim_ratio", "must be within 0..=1", self.reclaim_ratio.to_string());
        }
        if self.period_ns == 0 {
            return bad("period_ns", "must be > 0 (TMO/senpai use 6_000_000_000)", "0".into());
        }
        Ok(())
    }
}

impl Tmo {
    /// TMO-Low: the threshold defaults to 0.1 %.
    pub fn low(config: TmoConfig) -> Result<Self, PolicyError> {
        let threshold_pct = config.checked_low_threshold()?;
        Ok(Tmo::from_checked("tmo-low", threshold_pct, config))
    }

    /// TMO-High: the threshold must be given (found by exhaustive search).
    pub fn high(config: TmoConfig) -> Result<Self, PolicyError> {
        let threshold_pct = config.checked_high_threshold()?;
        Ok(Tmo::from_checked("tmo-high", threshold_pct, config))
    }

    /// A controller from a threshold and configuration [`TmoConfig::checked_low_threshold`] or
    /// [`TmoConfig::checked_high_threshold`] accepted.
    pub(crate) fn from_checked(name: &'static str, threshold_pct: f64, config: TmoConfig) -> Self {
        Tmo { name, threshold_pct, config, groups: BTreeMap::new() }
    }

    pub fn threshold_pct(&self) -> f64 {
        self.threshold_pct
    }
}

/// `current · ratio · max(0, 1 − psi / threshold)` in whole bytes (truncated).
pub fn tmo_reclaim_bytes(current_bytes: u64, ratio: f64, psi_some_pct: f64, threshold_pct: f64) -> u64 {
    let factor = (1.0 - psi_some_pct / threshold_pct).max(0.0);
    // `min` guards the float round trip of very large sizes.
    ((current_bytes as f64 * ratio * factor) as u64).min(current_bytes)
}

impl Controller for Tmo {
    fn name(&self) -> &str {
        self.name
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
        self.groups.retain(|id, _| obs.groups.get(*id).is_some_and(is_soft_rt));
        let mut plan = ActionPlan::default();
        let mut budget = Budget::new(obs);
        for (id, g) in obs.groups.iter().enumerate().filter(|(_, g)| is_soft_rt(g)) {
            let some_us = g.stall.memory_some_us;
            let st = self.groups.entry(id).or_insert(TmoState { window_start_ns: obs.now_ns, window_start_some_us: some_us });
            let elapsed_ns = obs.now_ns.saturating_sub(st.window_start_ns);
            let mut dip = None;
            if elapsed_ns >= self.config.period_ns {
                let stall_ns = some_us.saturating_sub(st.window_start_some_us) as f64 * 1_000.0;
                let psi_some_pct = 100.0 * stall_ns / elapsed_ns as f64;
                let reclaim = tmo_reclaim_bytes(g.usage_bytes, self.config.reclaim_ratio, psi_some_pct, self.threshold_pct);
                let (lo, hi) = budget.bounds(g.floor_bytes);
                let target = clamp_bytes(g.usage_bytes.saturating_sub(reclaim), lo, hi);
                if reclaim > 0 && target < g.usage_bytes {
                    dip = Some(target);
                }
                *st = TmoState { window_start_ns: obs.now_ns, window_start_some_us: some_us };
            }
            // A dip lasts one tick; otherwise the group is unconstrained and holds its usage.
            plan.set(obs, id, self.config.knob, dip);
            budget.hold(g.floor_bytes, dip.unwrap_or(g.usage_bytes));
        }
        plan_nrt(&mut plan, obs, &budget, self.config.knob);
        plan.finish()
    }
}

/// Result of TMO-High's exhaustive threshold search.
#[derive(Clone, Debug, PartialEq)]
pub struct ThresholdSearch {
    pub threshold_pct: f64,
    pub mean_elapsed_ns: u64,
    /// Every candidate with its mean elapsed time, in ascending threshold order.
    pub evaluated: Vec<(f64, u64)>,
}

/// TMO-High's threshold: evaluates every candidate (the platform's `mean_elapsed_ns` runs a
/// profiling run per threshold) and picks the largest threshold whose mean job elapsed time
/// stays below the deadline. All candidates are run because the mean need not be monotonic.
pub fn pick_tmo_threshold<F>(candidates_pct: &[f64], deadline_ns: u64, mut mean_elapsed_ns: F) -> Result<ThresholdSearch, PolicyError>
where
    F: FnMut(f64) -> u64,
{
    if candidates_pct.is_empty() {
        return Err(PolicyError::TooFewSamples { what: "pick_tmo_threshold", needed: 1, got: 0 });
    }
    if let Some(bad) = candidates_pct.iter().find(|t| !(t.is_finite() && **t > 0.0 && **t <= 100.0)) {
        return Err(PolicyError::BadInput {
            what: "pick_tmo_threshold",
            message: format!("thresholds must be percentages in (0, 100] (got {bad})"),
        });
    }
    let mut sorted = candidates_pct.to_vec();
    sorted.sort_by(f64::total_cmp);
    sorted.dedup();
    let evaluated: Vec<(f64, u64)> = sorted.iter().map(|&t| (t, mean_elapsed_ns(t))).collect();
    match evaluated.iter().rev().find(|(_, mean)| *mean < deadline_ns) {
        Some(&(threshold_pct, mean_elapsed_ns)) => Ok(ThresholdSearch { threshold_pct, mean_elapsed_ns, evaluated }),
        None => {
            let &(best_threshold_pct, best_mean_ns) = evaluated.iter().min_by_key(|(_, m)| *m).expect("candidates checked non-empty");
            Err(PolicyError::NoThresholdMeetsDeadline { deadline_ns, best_threshold_pct, best_mean_ns })
        }
    }
}
