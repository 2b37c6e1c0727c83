//! Greedy (the paper's "enterprise" baseline): soft real-time groups run unconstrained and the
//! non-real-time groups get `total − Σ soft-RT usage`, recomputed every tick.

use serde::{Deserialize, Serialize};

use crate::budget::{is_soft_rt, plan_nrt, ActionPlan, Budget, LimitKnob};
use crate::{Action, Controller, GroupRole, Observation, StallInputs};

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GreedyConfig {
    /// Knob cleared on soft-RT groups and written on non-RT groups.
    pub knob: LimitKnob,
}

#[derive(Clone, Debug, Default)]
pub struct Greedy {
    config: GreedyConfig,
}

impl Greedy {
    pub fn new(config: GreedyConfig) -> Self {
        Greedy { config }
    }
}

impl Controller for Greedy {
    fn name(&self) -> &str {
        "greedy"
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
            plan.set(obs, id, self.config.knob, None);
            budget.hold(g.floor_bytes, g.usage_bytes);
        }
        plan_nrt(&mut plan, obs, &budget, self.config.knob);
        plan.finish()
    }
}
