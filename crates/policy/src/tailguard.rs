//! Tailguard, critmem's own soft real-time memory controller.
//!
//! SARA (see [`crate::sara`]) steers each job to spend exactly its stall budget
//! `d − t_BCET − t_wait`, i.e. to finish *at* its deadline. Three things make that miss on
//! real workloads: a job's stall is noisy, so aiming at the deadline misses about half the
//! time once the trim is deep; Eq. 6 takes memory back as fast as it gives it, so a trim that
//! went too deep is undone too slowly; and Eq. 1 (`t_exec ≈ t_BCET + stall`) fails when the
//! task also waits for a CPU, so a configured BCET leaves too little room. Tailguard keeps
//! SARA's per-interval stall steering, and changes what it aims at and how it recovers:
//!
//! - **A guard band.** Each job aims to finish `guard_pct` of its relative deadline early:
//!   the stall budget is `T − start − c`, with `T = deadline − guard_pct·(deadline − release)`.
//! - **A learned non-stall time `c`.** After each completed job Tailguard records what the job
//!   spent that was not memory or I/O stall, `(completion − start) − Σ stall`, and uses a high
//!   quantile (`cost_quantile_pct`) of the last `cost_window_jobs` of them instead of the
//!   configured BCET once it has `cost_min_jobs` of them. CPU contention and a wrong BCET show
//!   up there and nowhere else.
//! - **Asymmetric steps.** Eq. 6's adjustment unit is `step_up_bytes` when the stall exceeds
//!   the per-interval target and `step_down_bytes` when it is below.
//! - **Rescue instead of dropping.** The latest job that completed without a rescue is the
//!   reference. A running job that has done `w` of its work (time since start less stall) is
//!   projected to run the rest, `c − w`, at the reference's stall share `ρ`, finishing
//!   `(c − w)/(1 − ρ)` from now. When that is later than `rescue_at_pct`
//!   of its relative deadline the job is *rescued*: for the rest of the job its limit is its
//!   usage plus `rescue_headroom_bytes` each interval, so it grows as fast as it faults and
//!   takes nothing it does not use. Afterwards the steering brings the limit back down at
//!   `step_down_bytes`' pace (dropping it at once would evict what the next job reads first).
//!   Tailguard never drops a job: a dropped job is a miss.
//!
//! Between jobs the limit is held, as under SARA; the non-real-time groups get what the
//! soft real-time groups do not hold ([`crate::budget`]).

use std::collections::{BTreeMap, VecDeque};

use serde::{Deserialize, Serialize};

use crate::budget::{interval_stall_ns, is_soft_rt, plan_nrt, ActionPlan, Budget, LimitKnob, StallKind};
use crate::jobs::{JobQueue, Released, Steered};
use crate::{Action, Controller, GroupId, GroupRole, JobEvent, Observation, PolicyError, StallInputs, StallTotals};

/// Tailguard's parameters; see the module documentation for what each one does.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TailguardConfig {
    /// Share of each job's relative deadline kept free: the job aims to finish this early.
    pub guard_pct: u8,
    /// Eq. 6's unit when the stall is above the per-interval target (the limit grows).
    pub step_up_bytes: u64,
    /// Eq. 6's unit when the stall is below the target (the limit shrinks).
    pub step_down_bytes: u64,
    /// Completed jobs whose non-stall time is remembered.
    pub cost_window_jobs: u16,
    /// Quantile of the remembered non-stall times used as the job's cost `c`.
    pub cost_quantile_pct: u8,
    /// Completed jobs needed before the learned cost replaces the configured BCET.
    pub cost_min_jobs: u16,
    /// Room above its usage a rescued job's limit keeps each interval.
    pub rescue_headroom_bytes: u64,
    /// Whether a job projected to miss its deadline is rescued.
    pub rescue: bool,
    /// A job is rescued when it is projected to finish later than this share of its
    /// relative deadline.
    pub rescue_at_pct: u8,
    /// PSI line used for the stall.
    pub stall: StallKind,
    /// Knob the limits are written to.
    pub knob: LimitKnob,
    /// Starting limit of each soft-RT group; by default an even share of what the non-RT
    /// floors leave.
    pub initial_limit_bytes: Option<u64>,
}

impl Default for TailguardConfig {
    fn default() -> Self {
        TailguardConfig {
            guard_pct: 5,
            step_up_bytes: 2 << 20,
            step_down_bytes: 1 << 20,
            cost_window_jobs: 16,
            cost_quantile_pct: 90,
            cost_min_jobs: 4,
            rescue_headroom_bytes: 16 << 20,
            rescue: true,
            rescue_at_pct: 100,
            stall: StallKind::Some,
            knob: LimitKnob::Max,
            initial_limit_bytes: None,
        }
    }
}

impl TailguardConfig {
    pub fn validate(&self) -> Result<(), PolicyError> {
        let bad = |field, requirement, got: String| Err(PolicyError::InvalidParameter { controller: "tailguard", field, requirement, got });
        if self.guard_pct >= 100 {
            return bad("guard_pct", "must be a percentage below 100", self.guard_pct.to_string());
        }
        if self.rescue_at_pct > 100 || self.rescue_at_pct < 100 - self.guard_pct {
            // Below the guarded target, every job the steering aims there would be rescued.
            return bad("rescue_at_pct", "must be a percentage from 100 − guard_pct to 100", self.rescue_at_pct.to_string());
        }
        if self.step_up_bytes == 0 {
            return bad("step_up_bytes", "must be > 0", "0".into());
        }
        if self.step_down_bytes == 0 {
            return bad("step_down_bytes", "must be > 0", "0".into());
        }
        if self.cost_window_jobs == 0 {
            return bad("cost_window_jobs", "must be > 0", "0".into());
        }
        if self.cost_quantile_pct > 100 {
            return bad("cost_quantile_pct", "must be a percentage 0..=100", self.cost_quantile_pct.to_string());
        }
        if self.cost_min_jobs > self.cost_window_jobs {
            return bad("cost_min_jobs", "must be at most cost_window_jobs", self.cost_min_jobs.to_string());
        }
        Ok(())
    }
}

/// The job Tailguard is steering in one group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TailguardJob {
    pub job: u64,
    pub release_ns: u64,
    pub deadline_ns: u64,
    /// When it could start: its release, or the previous job's end if later.
    pub start_ns: u64,
    /// Stall measured over the job's intervals so far.
    pub stall_ns: u64,
    /// The limit when the job started.
    pub start_limit_bytes: u64,
    /// Whether the job is being rescued.
    pub rescued: bool,
}

#[derive(Clone, Debug)]
struct GroupState {
    limit_bytes: u64,
    last_stall: Option<StallTotals>,
    jobs: JobQueue<TailguardJob>,
    /// Non-stall time of the latest completed jobs, oldest first.
    costs_ns: VecDeque<u64>,
    /// The latest job that completed without a rescue: how long it ran, and its stall.
    reference: Option<Reference>,
    rescues: u64,
}

#[derive(Clone, Copy, Debug)]
struct Reference {
    exec_ns: u64,
    stall_ns: u64,
}

/// The Tailguard controller.
#[derive(Clone, Debug)]
pub struct Tailguard {
    config: TailguardConfig,
    last_tick_ns: Option<u64>,
    groups: BTreeMap<GroupId, GroupState>,
}

impl Tailguard {
    pub fn new(config: TailguardConfig) -> Result<Self, PolicyError> {
        config.validate()?;
        Ok(Tailguard::from_valid(config))
    }

    pub(crate) fn from_valid(config: TailguardConfig) -> Self {
        Tailguard { config, last_tick_ns: None, groups: BTreeMap::new() }
    }

    pub fn config(&self) -> &TailguardConfig {
        &self.config
    }

    /// The limit held for `group` after the latest tick.
    pub fn limit_bytes(&self, group: GroupId) -> Option<u64> {
        self.groups.get(&group).map(|s| s.limit_bytes)
    }

    /// The job being steered in `group`, if any.
    pub fn running_job(&self, group: GroupId) -> Option<&TailguardJob> {
        self.groups.get(&group)?.jobs.running.as_ref()
    }

    /// Jobs of `group` rescued so far.
    pub fn rescues(&self, group: GroupId) -> u64 {
        self.groups.get(&group).map_or(0, |s| s.rescues)
    }

    /// The job cost `c` used for `group` now: the learned quantile, or the configured BCET.
    pub fn job_cost_ns(&self, group: GroupId, bcet_ns: u64) -> u64 {
        self.groups.get(&group).map_or(bcet_ns, |s| learned_cost_ns(&self.config, s, bcet_ns))
    }

    fn on_event(&mut self, event: &JobEvent) {
        match *event {
            JobEvent::Release { group, job, at_ns, deadline_ns } => {
                let Some(st) = self.groups.get_mut(&group) else { return };
                let limit_bytes = st.limit_bytes;
                st.jobs.release(Released { job, release_ns: at_ns, deadline_ns }, |r, now_ns| start_job(r, now_ns, limit_bytes));
            }
            JobEvent::Completion { group, job, at_ns } | JobEvent::Drop { group, job, at_ns } => {
                let Some(st) = self.groups.get_mut(&group) else { return };
                let limit_bytes = st.limit_bytes;
                let Some(ended) = st.jobs.end(job, at_ns, |next, now_ns| start_job(next, now_ns, limit_bytes)) else { return };
                if matches!(event, JobEvent::Completion { .. }) {
                    let cost_ns = at_ns.saturating_sub(ended.start_ns).saturating_sub(ended.stall_ns);
                    st.costs_ns.push_back(cost_ns);
                    while st.costs_ns.len() > usize::from(self.config.cost_window_jobs) {
                        st.costs_ns.pop_front();
                    }
                    if !ended.rescued {
                        st.reference = Some(Reference { exec_ns: at_ns.saturating_sub(ended.start_ns), stall_ns: ended.stall_ns });
                    }
                }
            }
        }
    }
}

impl Steered for TailguardJob {
    fn job(&self) -> u64 {
        self.job
    }
}

fn start_job(r: Released, now_ns: u64, limit_bytes: u64) -> TailguardJob {
    TailguardJob {
        job: r.job,
        release_ns: r.release_ns,
        deadline_ns: r.deadline_ns,
        start_ns: now_ns.max(r.release_ns),
        stall_ns: 0,
        start_limit_bytes: limit_bytes,
        rescued: false,
    }
}

/// The `cost_quantile_pct` quantile (nearest rank) of the remembered non-stall times, once
/// there are `cost_min_jobs` of them; the configured BCET before.
fn learned_cost_ns(cfg: &TailguardConfig, st: &GroupState, bcet_ns: u64) -> u64 {
    let n = st.costs_ns.len();
    if n == 0 || n < usize::from(cfg.cost_min_jobs) {
        return bcet_ns;
    }
    let mut sorted: Vec<u64> = st.costs_ns.iter().copied().collect();
    sorted.sort_unstable();
    let rank = (n * usize::from(cfg.cost_quantile_pct)).div_ceil(100).clamp(1, n);
    sorted[rank - 1]
}

impl Controller for Tailguard {
    fn name(&self) -> &str {
        "tailguard"
    }

    fn stall_inputs(&self, role: &GroupRole) -> StallInputs {
        StallInputs::ALL.of_soft_rt(role)
    }

    /// A rescued job's limit follows its usage.
    fn reads_usage(&self, role: &GroupRole) -> bool {
        matches!(role, GroupRole::SoftRealTime { .. })
    }

    fn tick(&mut self, obs: &Observation) -> Vec<Action> {
        let prev_tick_ns = self.last_tick_ns.replace(obs.now_ns);
        self.groups.retain(|id, _| obs.groups.get(*id).is_some_and(is_soft_rt));
        let initial = self.config.initial_limit_bytes.unwrap_or_else(|| Budget::even_srt_share(obs));
        for (id, g) in obs.groups.iter().enumerate().filter(|(_, g)| is_soft_rt(g)) {
            self.groups.entry(id).or_insert_with(|| GroupState {
                limit_bytes: initial.max(g.floor_bytes),
                last_stall: None,
                jobs: JobQueue::new(),
                costs_ns: VecDeque::new(),
                reference: None,
                rescues: 0,
            });
        }
        for event in &obs.events {
            self.on_event(event);
        }

        let cfg = &self.config;
        let mut plan = ActionPlan::default();
        let mut budget = Budget::new(obs);
        for (id, g) in obs.groups.iter().enumerate().filter(|(_, g)| is_soft_rt(g)) {
            let GroupRole::SoftRealTime { bcet_ns, .. } = g.role else { continue };
            let st = self.groups.get_mut(&id).expect("state created above for every soft-RT group");
            let (lo, hi) = budget.bounds(g.floor_bytes);
            let stall_ns = st.last_stall.map(|prev| interval_stall_ns(&prev, &g.stall, cfg.stall));
            st.last_stall = Some(g.stall);
            let cost_ns = learned_cost_ns(cfg, st, bcet_ns);
            let mut limit = i128::from(st.limit_bytes);
            if let (Some(s_intv), Some(prev_ns), Some(job)) = (stall_ns, prev_tick_ns, st.jobs.running.as_mut()) {
                if job.start_ns < obs.now_ns {
                    let interval_start_ns = prev_ns.max(job.start_ns);
                    let length_ns = obs.now_ns - interval_start_ns;
                    let s_intv = s_intv.min(length_ns);
                    let stall_before_ns = job.stall_ns;
                    job.stall_ns += s_intv;
                    if job.rescued {
                        limit = limit.max(i128::from(g.usage_bytes) + i128::from(cfg.rescue_headroom_bytes));
                    } else {
                        limit = limit.saturating_add(steer(cfg, job, cost_ns, interval_start_ns, length_ns, stall_before_ns, s_intv));
                        if cfg.rescue
                            && st.reference.as_ref().is_some_and(|r| projected_miss(job, r, cost_ns, obs.now_ns, cfg.rescue_at_pct))
                        {
                            job.rescued = true;
                            st.rescues += 1;
                            limit = limit.max(i128::from(g.usage_bytes) + i128::from(cfg.rescue_headroom_bytes));
                        }
                    }
                }
            }
            let clamped = if hi < lo { lo } else { limit.clamp(i128::from(lo), i128::from(hi)) as u64 };
            st.limit_bytes = clamped;
            budget.hold(g.floor_bytes, clamped);
            plan.set(obs, id, cfg.knob, Some(clamped));
        }
        plan_nrt(&mut plan, obs, &budget, cfg.knob);
        plan.finish()
    }
}

/// Eq. 5/6 aimed at the guarded finish time: the change of limit for one interval of
/// `length_ns` that started at `interval_start_ns`. Past the guarded finish the target is zero
/// stall, as for SARA past the deadline.
fn steer(
    cfg: &TailguardConfig,
    job: &TailguardJob,
    cost_ns: u64,
    interval_start_ns: u64,
    length_ns: u64,
    stall_before_ns: u64,
    s_intv: u64,
) -> i128 {
    let deadline_rel = i128::from(job.deadline_ns.saturating_sub(job.release_ns));
    let target_ns = i128::from(job.deadline_ns) - deadline_rel * i128::from(cfg.guard_pct) / 100;
    let remaining = target_ns - i128::from(job.start_ns) - i128::from(cost_ns) - i128::from(stall_before_ns);
    let l = i128::from(length_ns.max(1));
    let s = i128::from(s_intv);
    let left_ns = target_ns - i128::from(interval_start_ns);
    // x·(s − R/n)/l = x·(s·n − R)/(l·n), with n the intervals left including this one.
    let (excess, n) = if left_ns > 0 {
        let n = (left_ns + l - 1) / l;
        (s.saturating_mul(n).saturating_sub(remaining), n)
    } else {
        (s, 1)
    };
    let x = i128::from(if excess > 0 { cfg.step_up_bytes } else { cfg.step_down_bytes });
    x.saturating_mul(excess) / l.saturating_mul(n)
}

/// Whether the job would finish after `at_pct` of its relative deadline if the rest of its
/// work, `cost − (time since start − stall)`, ran at the reference job's stall share.
fn projected_miss(job: &TailguardJob, reference: &Reference, cost_ns: u64, now_ns: u64, at_pct: u8) -> bool {
    let running_ns = reference.exec_ns.saturating_sub(reference.stall_ns);
    if running_ns == 0 {
        return false;
    }
    let done_ns = now_ns.saturating_sub(job.start_ns).saturating_sub(job.stall_ns);
    let left_ns = cost_ns.saturating_sub(done_ns);
    // left / (1 − ρ) with ρ = stall / exec of the reference.
    let finish_ns = u128::from(now_ns) + u128::from(left_ns) * u128::from(reference.exec_ns) / u128::from(running_ns);
    let relative_ns = u128::from(job.deadline_ns.saturating_sub(job.release_ns));
    finish_ns > u128::from(job.release_ns) + relative_ns * u128::from(at_pct) / 100
}
