//! Shared arithmetic every controller uses to divide the memory budget.
//!
//! The rule common to SARA and all its baselines (paper §IV-A: "the non-RT workload uses the
//! remaining memory after allocation for soft RT workloads"):
//!
//! - each soft real-time group *holds* its limit when the controller sets one, or its usage
//!   when the controller leaves it unconstrained (Greedy, TMO between reclaims);
//! - soft real-time groups are bounded in group-id order, each to
//!   `[floor, total − Σ non-RT floors − Σ earlier soft-RT holdings − Σ later soft-RT floors]`,
//!   so that their sum plus the non-RT floors never exceeds the total and every group can get
//!   at least its floor;
//! - the non-real-time groups share `total − Σ soft-RT holdings`, split evenly but never below a
//!   group's floor (water-filling: groups whose floor is above the even share keep their floor,
//!   the rest share what is left equally; the < k bytes left by integer division stay unassigned).

use serde::{Deserialize, Serialize};

use crate::{Action, GroupId, GroupObservation, GroupRole, Observation, StallTotals};

/// Which cgroup knob a controller moves.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LimitKnob {
    /// `memory.max`: hard limit (reclaim, never exceed). Exists on cgroup v1 and v2.
    #[default]
    Max,
    /// `memory.high`: throttle and reclaim above it, never OOM-kills (cgroup v2 only).
    High,
}

impl LimitKnob {
    pub(crate) fn read(self, g: &GroupObservation) -> Option<u64> {
        match self {
            LimitKnob::Max => g.knobs.max_bytes,
            LimitKnob::High => g.knobs.high_bytes,
        }
    }

    pub(crate) fn action(self, group: GroupId, bytes: Option<u64>) -> Action {
        match self {
            LimitKnob::Max => Action::SetMax { group, bytes },
            LimitKnob::High => Action::SetHigh { group, bytes },
        }
    }
}

/// Which PSI line a stall measurement reads.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StallKind {
    /// Time at least one task of the group was stalled (wall-clock stall of the group).
    #[default]
    Some,
    /// Time all non-idle tasks of the group were stalled at once.
    Full,
}

/// Eq. 3 of the SARA paper over one interval: `s_intv = max(s_mem, s_IO)`, in nanoseconds,
/// from two PSI total snapshots (microseconds). A counter that went backwards (group
/// recreated) counts as no stall.
pub fn interval_stall_ns(prev: &StallTotals, now: &StallTotals, kind: StallKind) -> u64 {
    let (mem_us, io_us) = match kind {
        StallKind::Some => (now.memory_some_us.saturating_sub(prev.memory_some_us), now.io_some_us.saturating_sub(prev.io_some_us)),
        StallKind::Full => (now.memory_full_us.saturating_sub(prev.memory_full_us), now.io_full_us.saturating_sub(prev.io_full_us)),
    };
    mem_us.max(io_us).saturating_mul(1_000)
}

pub(crate) fn is_soft_rt(g: &GroupObservation) -> bool {
    matches!(g.role, GroupRole::SoftRealTime { .. })
}

/// Clamps into `[lo, hi]`; when the floors make the range empty the floor wins, as the
/// platform would raise the limit to the floor anyway.
pub(crate) fn clamp_bytes(v: u64, lo: u64, hi: u64) -> u64 {
    if hi < lo {
        lo
    } else {
        v.clamp(lo, hi)
    }
}

/// Walks the soft real-time groups in id order and hands out bounds, then the non-RT budget.
pub(crate) struct Budget {
    total: u64,
    nrt_floor_sum: u64,
    srt_floors_left: u64,
    held: u64,
}

impl Budget {
    pub(crate) fn new(obs: &Observation) -> Self {
        let (mut nrt_floor_sum, mut srt_floors_left) = (0u64, 0u64);
        for g in &obs.groups {
            if is_soft_rt(g) {
                srt_floors_left = srt_floors_left.saturating_add(g.floor_bytes);
            } else {
                nrt_floor_sum = nrt_floor_sum.saturating_add(g.floor_bytes);
            }
        }
        Budget { total: obs.total_memory_bytes, nrt_floor_sum, srt_floors_left, held: 0 }
    }

    /// Bounds `[floor, cap]` for the next soft-RT group in id order.
    pub(crate) fn bounds(&self, floor_bytes: u64) -> (u64, u64) {
        let later_floors = self.srt_floors_left.saturating_sub(floor_bytes);
        let cap = self.total.saturating_sub(self.nrt_floor_sum).saturating_sub(self.held).saturating_sub(later_floors);
        (floor_bytes, cap)
    }

    /// Records that the group holds `bytes` (its limit, or its usage when unconstrained).
    pub(crate) fn hold(&mut self, floor_bytes: u64, bytes: u64) {
        self.held = self.held.saturating_add(bytes);
        self.srt_floors_left = self.srt_floors_left.saturating_sub(floor_bytes);
    }

    /// Even share of the soft-RT budget for `n_srt` groups (a fresh controller's starting point).
    pub(crate) fn even_srt_share(obs: &Observation) -> u64 {
        let n_srt = obs.groups.iter().filter(|g| is_soft_rt(g)).count() as u64;
        let nrt_floors = obs.groups.iter().filter(|g| !is_soft_rt(g)).fold(0u64, |acc, g| acc.saturating_add(g.floor_bytes));
        obs.total_memory_bytes.saturating_sub(nrt_floors) / n_srt.max(1)
    }

    /// Limits for the non-RT groups: `total − Σ holdings`, split evenly above floors.
    pub(crate) fn nrt_limits(&self, obs: &Observation) -> Vec<(GroupId, u64)> {
        let budget = self.total.saturating_sub(self.held);
        let nrt: Vec<(GroupId, u64)> =
            obs.groups.iter().enumerate().filter(|(_, g)| !is_soft_rt(g)).map(|(id, g)| (id, g.floor_bytes)).collect();
        // Each share is at most the budget (≤ total) unless a floor alone exceeds the total.
        water_fill(budget, &nrt)
    }
}

/// Splits `budget` evenly among `groups` (id, floor), never below a floor.
pub(crate) fn water_fill(budget: u64, groups: &[(GroupId, u64)]) -> Vec<(GroupId, u64)> {
    if groups.is_empty() {
        return Vec::new();
    }
    let mut pinned = vec![false; groups.len()];
    // Each pass pins the groups whose floor exceeds the current even level; at most k passes.
    let level = loop {
        let pinned_sum = groups.iter().zip(&pinned).filter(|(_, p)| **p).fold(0u64, |acc, (g, _)| acc.saturating_add(g.1));
        let free = pinned.iter().filter(|p| !**p).count() as u64;
        if free == 0 {
            break 0;
        }
        let level = budget.saturating_sub(pinned_sum) / free;
        let mut changed = false;
        for (i, (_, floor)) in groups.iter().enumerate() {
            if !pinned[i] && *floor > level {
                pinned[i] = true;
                changed = true;
            }
        }
        if !changed {
            break level;
        }
    };
    groups.iter().zip(&pinned).map(|(&(id, floor), &p)| (id, if p { floor } else { level.max(floor) })).collect()
}

/// Collects limit changes and emits them in an order that never overshoots the total while
/// the platform applies them one by one: shrinking changes first, then growing ones, then drops.
#[derive(Default)]
pub(crate) struct ActionPlan {
    shrink: Vec<Action>,
    grow: Vec<Action>,
    drops: Vec<Action>,
    bandwidth: Vec<Action>,
}

impl ActionPlan {
    /// Asks for `bytes` on `knob` of group `id`, unless the group already has it.
    pub(crate) fn set(&mut self, obs: &Observation, id: GroupId, knob: LimitKnob, bytes: Option<u64>) {
        let current = knob.read(&obs.groups[id]);
        if current == bytes {
            return;
        }
        let shrinks = match (current, bytes) {
            (None, Some(_)) => true,
            (Some(c), Some(b)) => b < c,
            (_, None) => false,
        };
        let action = knob.action(id, bytes);
        if shrinks {
            self.shrink.push(action);
        } else {
            self.grow.push(action);
        }
    }

    pub(crate) fn drop_job(&mut self, group: GroupId, job: u64) {
        self.drops.push(Action::DropJob { group, job });
    }

    /// Asks for I/O limits on group `id`'s swap traffic, unless the group already has them.
    pub(crate) fn set_io(&mut self, obs: &Observation, id: GroupId, read_bytes_per_s: Option<u64>, write_bytes_per_s: Option<u64>) {
        let b = obs.groups[id].bandwidth;
        if (b.io_read_bytes_per_s, b.io_write_bytes_per_s) != (read_bytes_per_s, write_bytes_per_s) {
            self.bandwidth.push(Action::SetIoMax { group: id, read_bytes_per_s, write_bytes_per_s });
        }
    }

    pub(crate) fn finish(self) -> Vec<Action> {
        let mut out = self.shrink;
        out.extend(self.grow);
        out.extend(self.drops);
        out.extend(self.bandwidth);
        out
    }
}

/// Gives every non-RT group its share of what the soft RT groups do not hold.
pub(crate) fn plan_nrt(plan: &mut ActionPlan, obs: &Observation, budget: &Budget, knob: LimitKnob) {
    for (id, bytes) in budget.nrt_limits(obs) {
        plan.set(obs, id, knob, Some(bytes));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn water_fill_splits_evenly_when_floors_are_low() {
        assert_eq!(water_fill(100, &[(1, 0), (3, 10)]), vec![(1, 50), (3, 50)]);
    }

    #[test]
    fn water_fill_keeps_a_high_floor_and_shares_the_rest() {
        assert_eq!(water_fill(100, &[(0, 70), (1, 0), (2, 10)]), vec![(0, 70), (1, 15), (2, 15)]);
    }

    #[test]
    fn water_fill_gives_floors_when_budget_is_short() {
        assert_eq!(water_fill(5, &[(0, 4), (1, 4)]), vec![(0, 4), (1, 4)]);
    }

    #[test]
    fn interval_stall_is_the_larger_of_memory_and_io() {
        let prev = StallTotals { memory_some_us: 10, io_some_us: 10, memory_full_us: 5, io_full_us: 5, cpu_some_us: 0 };
        let now = StallTotals { memory_some_us: 1_010, io_some_us: 3_010, memory_full_us: 905, io_full_us: 105, cpu_some_us: 0 };
        assert_eq!(interval_stall_ns(&prev, &now, StallKind::Some), 3_000_000);
        assert_eq!(interval_stall_ns(&prev, &now, StallKind::Full), 900_000);
        // A reset counter is no stall, not a huge one.
        assert_eq!(interval_stall_ns(&now, &prev, StallKind::Some), 0);
    }
}
