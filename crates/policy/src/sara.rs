//! SARA, the stall-aware real-time memory allocator (Lee et al., papers/sara-stall-aware-allocation).
//!
//! Each tick is one monitoring interval of length `l_intv` (`interval_ns`). For every soft
//! real-time group, independently:
//!
//! - Eq. 3: `s_intv = max(s_mem, s_IO)`, the deltas of the group's PSI `some` (or `full`) totals
//!   since the previous tick — absolute stall time of the soft RT task's own cgroup. `some` by
//!   default: the paper's long-stall intervals reach 4.5–5 ms of 5 ms, i.e. wall-clock time in
//!   which the task was held up, which is what `some` measures (for the paper's one-process
//!   tasks `some` and `full` coincide). PSI totals are read only at ticks, so an interval's
//!   stall belongs to the job running at its end; a job that started inside the interval counts
//!   it from its start.
//! - Eq. 4: when a job starts, `s_ideal_period = d − t_BCET − t_wait`, with `d` its relative
//!   deadline and `t_wait = start − release`: how long the previous job overran into this job's
//!   period (Fig. 8). A job starts at its release, or when the previous job completes or is
//!   dropped, whichever is later.
//! - Eq. 2/5: `s_ideal_intv = (s_ideal_period − Σ s_intv_previous) / n_remain`, where the sum runs
//!   over the job's earlier intervals and `n_remain = ⌈(absolute deadline − interval start) / l_intv⌉`
//!   counts the intervals left in the period including the current one. Once an interval starts
//!   at or after the deadline no intervals are left and the target is zero stall (the paper
//!   leaves this case open; any further stall only delays the next job).
//! - Eq. 6: `mem_alloc = x · (s_intv − s_ideal_intv) / l_intv` is added to the group's limit,
//!   computed as `x · (s_intv · n_remain − remaining) / (l_intv · n_remain)` in exact integers
//!   with one truncation toward zero; the result is clamped to `[floor, total − others]`.
//!   `step_up_bytes` optionally gives growth its own `x` (default: the paper's single `x`).
//!   Why: with a target of ρ·l_intv per interval, one interval can add at most `x·(1 − ρ)` but
//!   take back `x·ρ`; at the stall shares of the paper's workloads (ρ ≈ 0.7–0.8) a trim that
//!   went too deep is undone 3–4× slower than it was made, and a job's time grows as
//!   BCET/(1 − ρ), so the jobs it steers miss rather than finish early.
//! - Definition 1: an interval is severe when `s_intv > n % · l_intv`; the job is in a long stall
//!   when at least `m %` of its intervals so far were severe. As §III-D prescribes, the check is
//!   made when the remaining ideal stall `s_ideal_period − Σ s_intv` falls below zero, and then
//!   (with early dropping on) the job is dropped that same tick.
//!
//! Between jobs the limit is held. The non-real-time groups get `total − Σ soft-RT limits`
//! (§IV-A: "the non-RT workload uses the remaining memory after allocation for soft RT
//! workloads"), see [`crate::budget`].

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::budget::{interval_stall_ns, is_soft_rt, plan_nrt, ActionPlan, Budget, LimitKnob, StallKind};
use crate::jobs::{JobQueue, Released, Steered};
use crate::{Action, Controller, GroupId, GroupRole, JobEvent, Observation, PolicyError, StallInputs, StallTotals};

/// SARA's parameters; defaults are the paper's (§IV-A).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SaraConfig {
    /// `l_intv`, the monitoring interval. The platform must tick SARA at this period
    /// ([`Controller::interval_ns`] reports it).
    pub interval_ns: u64,
    /// `x`, the base adjustment unit of Eq. 6.
    pub step_bytes: u64,
    /// `x` used when Eq. 6 grows the limit (`s_intv > s_ideal_intv`); `None` uses `step_bytes`
    /// for both directions, as the paper does. Not in the paper: see the module notes.
    pub step_up_bytes: Option<u64>,
    /// `m` of Definition 1: share of a job's intervals that must be severe.
    pub long_stall_intervals_pct: u8,
    /// `n` of Definition 1: an interval is severe when its stall exceeds this share of `l_intv`.
    pub long_stall_threshold_pct: u8,
    /// Drop a job in a long stall as soon as its remaining ideal stall is negative (§III-D).
    pub early_drop: bool,
    /// PSI line used for `s_mem` and `s_IO`.
    pub stall: StallKind,
    /// Knob the soft-RT (and non-RT) limits are written to.
    pub knob: LimitKnob,
    /// Starting limit of each soft-RT group; by default an even share of what the non-RT floors
    /// leave, so the first job is not starved before SARA has any stall evidence.
    pub initial_limit_bytes: Option<u64>,
}

impl Default for SaraConfig {
    fn default() -> Self {
        SaraConfig {
            interval_ns: crate::DEFAULT_INTERVAL_NS,
            step_bytes: 1 << 20,
            step_up_bytes: None,
            long_stall_intervals_pct: 80,
            long_stall_threshold_pct: 90,
            early_drop: true,
            stall: StallKind::Some,
            knob: LimitKnob::Max,
            initial_limit_bytes: None,
        }
    }
}

/// [`SaraConfig`] as a configuration writes it: the same keys, but whether `interval_ns` was
/// given stays known, since a loop's requested tick may set it only when it was not
/// (see [`crate::ControllerConfig::resolve_tick_ns`]). Field for field as [`SaraConfig`], in
/// the same order (error messages list them); a test keeps the two alike.
#[derive(Deserialize)]
#[serde(rename = "SaraConfig", default, deny_unknown_fields)]
pub(crate) struct SaraConfigInput {
    // Present means a number: an explicit null is an error, as for the other fields.
    #[serde(deserialize_with = "some_u64")]
    interval_ns: Option<u64>,
    step_bytes: u64,
    step_up_bytes: Option<u64>,
    long_stall_intervals_pct: u8,
    long_stall_threshold_pct: u8,
    early_drop: bool,
    stall: StallKind,
    knob: LimitKnob,
    initial_limit_bytes: Option<u64>,
}

fn some_u64<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    u64::deserialize(d).map(Some)
}

impl Default for SaraConfigInput {
    fn default() -> Self {
        let d = SaraConfig::default();
        SaraConfigInput {
            interval_ns: None,
            step_bytes: d.step_bytes,
            step_up_bytes: d.step_up_bytes,
            long_stall_intervals_pct: d.long_stall_intervals_pct,
            long_stall_threshold_pct: d.long_stall_threshold_pct,
            early_drop: d.early_drop,
            stall: d.stall,
            knob: d.knob,
            initial_limit_bytes: d.initial_limit_bytes,
        }
    }
}

impl SaraConfigInput {
    /// The configuration, and whether it gave `interval_ns`.
    pub(crate) fn into_config(self) -> (SaraConfig, bool) {
        let given = self.interval_ns.is_some();
        let config = SaraConfig {
            interval_ns: self.interval_ns.unwrap_or(crate::DEFAULT_INTERVAL_NS),
            step_bytes: self.step_bytes,
            step_up_bytes: self.step_up_bytes,
            long_stall_intervals_pct: self.long_stall_intervals_pct,
            long_stall_threshold_pct: self.long_stall_threshold_pct,
            early_drop: self.early_drop,
            stall: self.stall,
            knob: self.knob,
            initial_limit_bytes: self.initial_limit_bytes,
        };
        (config, given)
    }
}

impl SaraConfig {
    pub fn validate(&self) -> Result<(), PolicyError> {
        let bad = |field, requirement, got: String| Err(PolicyError::InvalidParameter { controller: "sara", field, requirement, got });
        if self.interval_ns == 0 {
            return bad("interval_ns", "must be > 0 (the paper uses 5_000_000)", "0".into());
        }
        if self.step_bytes == 0 {
            return bad("step_bytes", "must be > 0 (the paper uses 1048576)", "0".into());
        }
        if self.step_up_bytes == Some(0) {
            return bad("step_up_bytes", "must be > 0, or left out to use step_bytes", "0".into());
        }
        if self.long_stall_intervals_pct > 100 {
            return bad("long_stall_intervals_pct", "must be a percentage 0..=100", self.long_stall_intervals_pct.to_string());
        }
        if self.long_stall_threshold_pct > 100 {
            return bad("long_stall_threshold_pct", "must be a percentage 0..=100", self.long_stall_threshold_pct.to_string());
        }
        Ok(())
    }
}

/// Definition 1, per interval: the stall exceeds `n %` of the interval length.
pub fn is_severe_interval(stall_ns: u64, interval_ns: u64, threshold_pct: u8) -> bool {
    u128::from(stall_ns) * 100 > u128::from(interval_ns) * u128::from(threshold_pct)
}

/// Definition 1: at least `m %` of the intervals were severe (never with no intervals).
pub fn is_long_stall(severe_intervals: u32, intervals: u32, intervals_pct: u8) -> bool {
    intervals > 0 && u64::from(severe_intervals) * 100 >= u64::from(intervals) * u64::from(intervals_pct)
}

/// One controller tick's cumulative PSI `some` totals of a group, as platforms report them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StallTick {
    /// When the tick observed the totals; it measured the interval `(at_ns − l_intv, at_ns]`.
    pub at_ns: u64,
    pub memory_some_us: u64,
    pub io_some_us: u64,
}

/// When a job ran: from its start to its completion (or, for a job that never completed, to
/// the instant it was judged, e.g. its deadline).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct JobSpan {
    pub start_ns: u64,
    pub end_ns: u64,
}

/// Eq. 2/3 and Definition 1 over one whole job, from the ticks that overlap its span.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct JobStall {
    /// `s_period` (Eq. 2): Σ `s_intv = max(s_mem, s_IO)` (Eq. 3) over the job's intervals, in
    /// ms. Accumulated as one running f64 total of `s_intv` in ms over every tick, in tick
    /// order, and read as the difference of two such totals: the figures and reports of the
    /// SARA reproduction are pinned to exactly these values.
    pub stall_ms: f64,
    /// Ticks whose interval overlaps the job (negative for an inverted span, see [`job_stalls`]).
    pub intervals: i64,
    /// Of those, the intervals that were severe (Definition 1's `n`).
    pub severe_intervals: i64,
    /// `severe_intervals / max(intervals, 1)`: Definition 1's share, checked against `m`.
    pub severe_share: f64,
}

/// Per job, the stall per period and the share of severe intervals that SARA's rules see
/// (Eq. 2, Eq. 3, Definition 1), from one group's per-tick cumulative PSI `some` totals.
///
/// `ticks` must be every tick of the run in time order (a thinned timeline would lose
/// intervals); `interval_ns` is `l_intv`. A job's intervals are the ticks at `t` with
/// `start < t < end + l_intv`, i.e. those whose interval `(t − l_intv, t]` overlaps
/// `(start, end]`; a job that ran inside no tick gets zero stall and one interval's worth of
/// denominator. The first tick's interval counts the totals from zero.
///
/// Every figure is a difference of running totals, `S(end + l_intv) − S(start)`, so a span that
/// ends more than an interval before it starts (a job judged at its deadline that started after
/// it) gets the negative of the stall in between, with `intervals` negative and a denominator
/// of one. Callers that want none pass `end_ns >= start_ns`.
pub fn job_stalls(ticks: &[StallTick], interval_ns: u64, threshold_pct: u8, jobs: &[JobSpan]) -> Result<Vec<JobStall>, PolicyError> {
    let bad = |message: String| Err(PolicyError::BadInput { what: "job_stalls", message });
    if interval_ns == 0 {
        return bad("interval_ns must be > 0".into());
    }
    if threshold_pct > 100 {
        return bad(format!("threshold_pct must be a percentage 0..=100 (got {threshold_pct})"));
    }
    // Running totals from the first tick: `total_ms[k]` and `severe[k]` cover ticks 0..k.
    let mut total_ms = Vec::with_capacity(ticks.len() + 1);
    let mut severe = Vec::with_capacity(ticks.len() + 1);
    total_ms.push(0.0_f64);
    severe.push(0_i64);
    let mut prev = StallTick { at_ns: 0, memory_some_us: 0, io_some_us: 0 };
    for (k, t) in ticks.iter().enumerate() {
        if k > 0 && t.at_ns <= prev.at_ns {
            return bad(format!("tick times must increase (tick {k} at {} ns after {} ns)", t.at_ns, prev.at_ns));
        }
        let (Some(mem_us), Some(io_us)) = (t.memory_some_us.checked_sub(prev.memory_some_us), t.io_some_us.checked_sub(prev.io_some_us))
        else {
            return bad(format!("PSI totals must not decrease (tick {k})"));
        };
        let s_intv_us = mem_us.max(io_us);
        total_ms.push(total_ms[k] + s_intv_us as f64 / 1000.0);
        let is_severe = is_severe_interval(s_intv_us.saturating_mul(1000), interval_ns, threshold_pct);
        severe.push(severe[k] + i64::from(is_severe));
        prev = *t;
    }
    let mut out = Vec::with_capacity(jobs.len());
    for j in jobs {
        let lo = ticks.partition_point(|t| t.at_ns <= j.start_ns);
        let until_ns = j.end_ns.saturating_add(interval_ns);
        let hi = ticks.partition_point(|t| t.at_ns < until_ns);
        // Tick counts fit in i64: a slice holds fewer than isize::MAX elements.
        let intervals = hi as i64 - lo as i64;
        let severe_intervals = severe[hi] - severe[lo];
        out.push(JobStall {
            stall_ms: total_ms[hi] - total_ms[lo],
            intervals,
            severe_intervals,
            severe_share: severe_intervals as f64 / intervals.max(1) as f64,
        });
    }
    Ok(out)
}

/// The job SARA is steering in one group.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SaraJob {
    pub job: u64,
    pub release_ns: u64,
    /// Absolute deadline.
    pub deadline_ns: u64,
    /// When the job could start: its release, or the previous job's completion if later.
    pub start_ns: u64,
    /// `t_wait` of Eq. 4.
    pub wait_ns: u64,
    /// `s_ideal_period` of Eq. 4 (negative when the wait alone exhausts the slack).
    pub ideal_stall_ns: i64,
    /// `Σ s_intv` over the job's intervals so far.
    pub stall_so_far_ns: i64,
    pub intervals: u32,
    /// Intervals whose stall exceeded `n %` of `l_intv`.
    pub severe_intervals: u32,
    pub drop_requested: bool,
}

impl SaraJob {
    /// `s_ideal_period − Σ s_intv`: stall the job may still absorb and meet its deadline.
    pub fn remaining_ideal_stall_ns(&self) -> i64 {
        self.ideal_stall_ns.saturating_sub(self.stall_so_far_ns)
    }
}

/// What SARA computed for one group in the latest interval that had a running job.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SaraInterval {
    pub job: u64,
    /// `s_intv` (Eq. 3).
    pub stall_ns: u64,
    /// `n_remain` of Eq. 5 (including this interval); 0 once the deadline has passed.
    pub remaining_intervals: u64,
    /// `s_ideal_intv` of Eq. 5, truncated to whole nanoseconds (Eq. 6 uses the exact ratio);
    /// 0 past the deadline.
    pub target_ns: i64,
    /// `mem_alloc` of Eq. 6 before clamping.
    pub delta_bytes: i64,
    /// The limit after adjustment and clamping.
    pub limit_bytes: u64,
    /// Definition 1 held when the remaining ideal stall went negative.
    pub long_stall: bool,
}

#[derive(Clone, Debug)]
struct GroupState {
    limit_bytes: u64,
    last_stall: Option<StallTotals>,
    jobs: JobQueue<SaraJob>,
    last_interval: Option<SaraInterval>,
}

/// The SARA controller.
#[derive(Clone, Debug)]
pub struct Sara {
    config: SaraConfig,
    last_tick_ns: Option<u64>,
    groups: BTreeMap<GroupId, GroupState>,
}

impl Sara {
    pub fn new(config: SaraConfig) -> Result<Self, PolicyError> {
        config.validate()?;
        Ok(Sara::from_valid(config))
    }

    /// A controller from a configuration [`SaraConfig::validate`] accepted.
    pub(crate) fn from_valid(config: SaraConfig) -> Self {
        Sara { config, last_tick_ns: None, groups: BTreeMap::new() }
    }

    pub fn config(&self) -> &SaraConfig {
        &self.config
    }

    /// The soft-RT limit SARA holds for `group` (after the latest tick).
    pub fn limit_bytes(&self, group: GroupId) -> Option<u64> {
        self.groups.get(&group).map(|s| s.limit_bytes)
    }

    /// The job SARA is steering in `group`, if any.
    pub fn running_job(&self, group: GroupId) -> Option<&SaraJob> {
        self.groups.get(&group)?.jobs.running.as_ref()
    }

    /// Released jobs of `group` queued behind the running one.
    pub fn pending_jobs(&self, group: GroupId) -> usize {
        self.groups.get(&group).map_or(0, |s| s.jobs.pending_len())
    }

    /// The latest interval computation for `group`.
    pub fn last_interval(&self, group: GroupId) -> Option<&SaraInterval> {
        self.groups.get(&group)?.last_interval.as_ref()
    }

    fn on_event(&mut self, obs: &Observation, event: &JobEvent) {
        match *event {
            JobEvent::Release { group, job, at_ns, deadline_ns } => {
                let Some(bcet_ns) = bcet_of(obs, group) else { return };
                let Some(st) = self.groups.get_mut(&group) else { return };
                st.jobs.release(Released { job, release_ns: at_ns, deadline_ns }, |r, now_ns| start_job(r, now_ns, bcet_ns));
            }
            JobEvent::Completion { group, job, at_ns } | JobEvent::Drop { group, job, at_ns } => {
                let Some(bcet_ns) = bcet_of(obs, group) else { return };
                let Some(st) = self.groups.get_mut(&group) else { return };
                // The next job starts now; how late that is past its release is its t_wait.
                st.jobs.end(job, at_ns, |next, now_ns| start_job(next, now_ns, bcet_ns));
            }
        }
    }
}

impl Steered for SaraJob {
    fn job(&self) -> u64 {
        self.job
    }
}

fn bcet_of(obs: &Observation, group: GroupId) -> Option<u64> {
    match obs.groups.get(group)?.role {
        GroupRole::SoftRealTime { bcet_ns, .. } => Some(bcet_ns),
        GroupRole::NonRealTime => None,
    }
}

fn start_job(r: Released, now_ns: u64, bcet_ns: u64) -> SaraJob {
    let start_ns = now_ns.max(r.release_ns);
    let wait_ns = start_ns - r.release_ns;
    let deadline_rel_ns = i128::from(r.deadline_ns.saturating_sub(r.release_ns));
    let ideal = deadline_rel_ns - i128::from(bcet_ns) - i128::from(wait_ns);
    SaraJob {
        job: r.job,
        release_ns: r.release_ns,
        deadline_ns: r.deadline_ns,
        start_ns,
        wait_ns,
        ideal_stall_ns: clamp_i64(ideal),
        stall_so_far_ns: 0,
        intervals: 0,
        severe_intervals: 0,
        drop_requested: false,
    }
}

fn clamp_i64(v: i128) -> i64 {
    v.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64
}

impl Controller for Sara {
    fn name(&self) -> &str {
        "sara"
    }

    fn interval_ns(&self) -> u64 {
        self.config.interval_ns
    }

    /// `s_intv = max(s_mem, s_IO)` of the soft real-time groups; the rest get what is left.
    fn stall_inputs(&self, role: &GroupRole) -> StallInputs {
        StallInputs::ALL.of_soft_rt(role)
    }

    /// SARA steers by stall alone, and the non-real-time groups get what is left of the limits.
    /// Memory controllers: no CPU time, CPU pressure or CPU limit.
    fn uses_cpu(&self) -> bool {
        false
    }

    fn reads_usage(&self, _role: &GroupRole) -> bool {
        false
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
                last_interval: None,
            });
        }
        for event in &obs.events {
            self.on_event(obs, event);
        }

        let cfg = &self.config;
        let mut plan = ActionPlan::default();
        let mut budget = Budget::new(obs);
        for (id, g) in obs.groups.iter().enumerate().filter(|(_, g)| is_soft_rt(g)) {
            let st = self.groups.get_mut(&id).expect("state created above for every soft-RT group");
            let (lo, hi) = budget.bounds(g.floor_bytes);
            let stall_ns = st.last_stall.map(|prev| interval_stall_ns(&prev, &g.stall, cfg.stall));
            st.last_stall = Some(g.stall);
            let mut limit = i128::from(st.limit_bytes);
            let mut drop_job = None;
            let mut record = None;
            if let (Some(s_intv), Some(prev_ns), Some(job)) = (stall_ns, prev_tick_ns, st.jobs.running.as_mut()) {
                // A job that starts exactly at this tick has not run in the interval just measured.
                if job.start_ns < obs.now_ns {
                    let l = i128::from(cfg.interval_ns);
                    let interval_start_ns = prev_ns.max(job.start_ns);
                    let left_ns = job.deadline_ns.saturating_sub(interval_start_ns);
                    let n_remain = left_ns.div_ceil(cfg.interval_ns);
                    let remaining = i128::from(job.remaining_ideal_stall_ns());
                    let s = i128::from(s_intv);
                    let x_for = |excess: i128| {
                        let up = cfg.step_up_bytes.filter(|_| excess > 0);
                        i128::from(up.unwrap_or(cfg.step_bytes))
                    };
                    let (delta, target_ns) = if n_remain > 0 {
                        // Eq. 6 with Eq. 5 substituted: x·(s − R/n)/l = x·(s·n − R)/(l·n).
                        let n = i128::from(n_remain);
                        // Saturating: absurd totals must not panic; the limit is clamped anyway.
                        let excess = s.saturating_mul(n).saturating_sub(remaining);
                        (x_for(excess).saturating_mul(excess) / l.saturating_mul(n), remaining / n)
                    } else {
                        // Past the deadline Eq. 5 has no intervals left; every further stall
                        // delays the next job (its t_wait), so the target is zero stall.
                        (x_for(s).saturating_mul(s) / l, 0)
                    };
                    limit = limit.saturating_add(delta);

                    job.stall_so_far_ns = clamp_i64(i128::from(job.stall_so_far_ns) + s);
                    job.intervals = job.intervals.saturating_add(1);
                    if is_severe_interval(s_intv, cfg.interval_ns, cfg.long_stall_threshold_pct) {
                        job.severe_intervals = job.severe_intervals.saturating_add(1);
                    }
                    let hopeless = job.remaining_ideal_stall_ns() < 0;
                    let long_stall = hopeless && is_long_stall(job.severe_intervals, job.intervals, cfg.long_stall_intervals_pct);
                    if long_stall && cfg.early_drop && !job.drop_requested {
                        job.drop_requested = true;
                        drop_job = Some(job.job);
                    }
                    record = Some(SaraInterval {
                        job: job.job,
                        stall_ns: s_intv,
                        remaining_intervals: n_remain,
                        target_ns: clamp_i64(target_ns),
                        delta_bytes: clamp_i64(delta),
                        limit_bytes: 0, // filled in after clamping
                        long_stall,
                    });
                }
            }
            let clamped = if hi < lo { lo } else { limit.clamp(i128::from(lo), i128::from(hi)) as u64 };
            st.limit_bytes = clamped;
            if let Some(record) = record {
                st.last_interval = Some(SaraInterval { limit_bytes: clamped, ..record });
            }
            budget.hold(g.floor_bytes, clamped);
            plan.set(obs, id, cfg.knob, Some(clamped));
            if let Some(job) = drop_job {
                plan.drop_job(id, job);
            }
        }
        plan_nrt(&mut plan, obs, &budget, cfg.knob);
        plan.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    /// Ticks every 5 ms from 5 ms on, with the given per-interval (memory, io) stall in µs.
    fn ticks(per_interval_us: &[(u64, u64)]) -> Vec<StallTick> {
        let (mut mem, mut io) = (0, 0);
        per_interval_us
            .iter()
            .enumerate()
            .map(|(k, &(m, i))| {
                mem += m;
                io += i;
                StallTick { at_ns: (k as u64 + 1) * 5 * MS, memory_some_us: mem, io_some_us: io }
            })
            .collect()
    }

    #[test]
    fn a_jobs_stall_is_the_sum_of_the_larger_of_memory_and_io_stall_over_its_intervals() {
        // Intervals end at 5, 10, 15, 20, 25 ms.
        let t = ticks(&[(1000, 0), (4600, 200), (300, 4501), (4500, 0), (0, 0)]);
        // Runs in (3 ms, 12 ms]: the intervals ending at 5, 10 and 15 ms overlap it.
        let s = job_stalls(&t, 5 * MS, 90, &[JobSpan { start_ns: 3 * MS, end_ns: 12 * MS }]).unwrap();
        assert_eq!(s[0].intervals, 3);
        assert_eq!(s[0].stall_ms, 1.0 + 4.6 + 4.501);
        // 4.6 and 4.501 ms exceed 90 % of 5 ms; 4.5 ms (the fourth interval) would not.
        assert_eq!((s[0].severe_intervals, s[0].severe_share), (2, 2.0 / 3.0));
        // Starting exactly at a tick leaves that tick's interval out; ending exactly at one
        // keeps the next interval out.
        let s = job_stalls(&t, 5 * MS, 90, &[JobSpan { start_ns: 10 * MS, end_ns: 20 * MS }]).unwrap();
        assert_eq!((s[0].intervals, s[0].severe_intervals), (2, 1));
        assert_eq!(s[0].stall_ms, (1.0 + 4.6 + 4.501 + 4.5) - (1.0 + 4.6));
    }

    #[test]
    fn a_job_inside_no_tick_has_no_stall_and_no_share() {
        let t = ticks(&[(5000, 5000)]);
        let s = job_stalls(&t, 5 * MS, 90, &[JobSpan { start_ns: 30 * MS, end_ns: 31 * MS }]).unwrap();
        assert_eq!(s, vec![JobStall { stall_ms: 0.0, intervals: 0, severe_intervals: 0, severe_share: 0.0 }]);
        assert!(job_stalls(&[], 5 * MS, 90, &[JobSpan { start_ns: 0, end_ns: 1 }]).unwrap()[0].stall_ms == 0.0);
    }

    #[test]
    fn an_inverted_span_gives_the_negative_of_the_stall_in_between() {
        let t = ticks(&[(1000, 0), (4600, 0), (2000, 0), (0, 0)]);
        // Ends at 2 ms (so up to the tick at 5 ms), starts at 15 ms: ticks 10 and 15 ms between.
        let s = job_stalls(&t, 5 * MS, 90, &[JobSpan { start_ns: 15 * MS, end_ns: 2 * MS }]).unwrap()[0];
        assert_eq!(s.stall_ms, 1.0 - (1.0 + 4.6 + 2.0));
        assert_eq!((s.intervals, s.severe_intervals, s.severe_share), (-2, -1, -1.0));
    }

    #[test]
    fn the_severity_threshold_is_definition_ones_n() {
        let t = ticks(&[(4000, 0)]);
        let span = [JobSpan { start_ns: 0, end_ns: 5 * MS }];
        assert_eq!(job_stalls(&t, 5 * MS, 80, &span).unwrap()[0].severe_intervals, 0, "4 ms is not more than 80 % of 5 ms");
        assert_eq!(job_stalls(&t, 5 * MS, 79, &span).unwrap()[0].severe_intervals, 1);
    }

    #[test]
    fn bad_input_is_refused_with_a_reason() {
        let span = [JobSpan { start_ns: 0, end_ns: 1 }];
        let e = |t: &[StallTick], l, pct| job_stalls(t, l, pct, &span).unwrap_err().to_string();
        assert!(e(&ticks(&[(1, 1)]), 0, 90).contains("interval_ns must be > 0"));
        assert!(e(&ticks(&[(1, 1)]), 5 * MS, 101).contains("percentage"));
        let mut back = ticks(&[(1, 1), (1, 1)]);
        back[1].at_ns = back[0].at_ns;
        assert!(e(&back, 5 * MS, 90).contains("tick times must increase"));
        let mut down = ticks(&[(5, 5), (1, 1)]);
        down[1].io_some_us = 0;
        assert!(e(&down, 5 * MS, 90).contains("must not decrease"));
    }
}
