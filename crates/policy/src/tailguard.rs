//! Tailguard, critmem's own soft real-time memory controller.
//!
//! SARA (see [`crate::sara`]) steers each job to spend exactly its stall budget
//! `d − t_BCET − t_wait`, i.e. to finish *at* its deadline. Three things make that miss on
//! real workloads: a job's stall is noisy, so aiming at the deadline misses some of the time
//! once the trim is deep; Eq. 6 takes memory back as fast as it gives it, so a trim that
//! went too deep is undone too slowly; and Eq. 1 (`t_exec ≈ t_BCET + stall`) fails when the
//! task also waits for a CPU, so a configured BCET leaves too little room. Tailguard keeps
//! SARA's per-interval stall steering, and changes what it aims at and how it recovers:
//!
//! - **A learned non-stall time `c`.** After each completed job Tailguard records what the job
//!   spent that was not memory or I/O stall, `(completion − start) − Σ stall`, and uses a high
//!   quantile (`cost_quantile_pct`) of the last `cost_window_jobs` of them instead of the
//!   configured BCET once it has `cost_min_jobs` of them. CPU contention and a wrong BCET show
//!   up there and nowhere else. A dropped job's non-stall time so far is remembered too when
//!   it is more than the learned cost: the job needed at least that, so the cost was too low.
//! - **Asymmetric steps.** Eq. 6's adjustment unit is `step_up_bytes` when the stall exceeds
//!   the per-interval target and `step_down_bytes` when it is below.
//! - **A guard band that follows the misses.** Each job aims to finish a guard `g` (in per
//!   mille of its relative deadline) early: the stall budget is `T − start − c`, with
//!   `T = deadline − g·(deadline − release)`. `g` starts at 0: a job the steering aims at its
//!   deadline keeps it unless its stall is noisier than the steering corrects. Each job that
//!   misses without having been rescued shows that it is, and adds `guard_step_permille`
//!   (up to `guard_max_permille`); each job that meets its deadline takes
//!   `guard_decay_permille` back. A guard costs memory in every job, so it is held only as long
//!   as misses ask for it.
//! - **Rescue when the steering cannot keep up.** The steering grows the limit by at most
//!   about `step_up_bytes` an interval. A job that stalled for more than `rescue_stall_pct` of
//!   an interval with its usage at its limit (within that step) was waiting on memory it
//!   faults in as fast as the steering gives it, so the steering cannot lower its next
//!   interval's stall; if another such interval would exceed the slack left before the
//!   deadline (`deadline − now − (c − work done)`, work done being the time since start less
//!   stall), only more memory now can save it, and the job is *rescued*:
//!   for the rest of the job its limit is its usage plus `rescue_headroom_bytes` each interval,
//!   so it grows as fast as it faults and takes nothing it does not use. A job below its limit
//!   stalls on faults a higher limit does not remove, and a job that still runs for part of
//!   each interval is one the steering's growth is reaching: both are left to the steering.
//!   Afterwards the steering brings the limit back down at `step_down_bytes`' pace (dropping it
//!   at once would evict what the next job reads first).
//! - **Dropping a job certain to miss.** With `drop_certain_misses`, a job is dropped as soon
//!   as even a stall-free rest cannot end it in time: its start plus the stall it has had plus
//!   the fastest non-stall time of the remembered jobs (or the configured BCET, if lower) is
//!   past its deadline. This is SARA's "remaining ideal stall below zero" test without
//!   Definition 1's severity condition: it costs no deadline (the job misses either way), and
//!   it stops the job holding memory and the shared swap device for nothing, and the next
//!   job from starting late.
//!
//! - **Room on the swap device when the device, not the limit, holds a job back.** A job
//!   that spends more than `io_guard_stall_pct` of an interval waiting on I/O with its usage
//!   more than a growth step below its limit faults in pages it has room for: a higher limit
//!   does not shorten that wait, but the non-real-time groups' requests queued ahead of it on
//!   the shared swap device do lengthen it. The non-real-time groups' swap reads and
//!   write-backs are then limited to `io_guard_bytes_per_s` until the job ends, if two things
//!   show that this job, unlike the others, needs the room: it has already stalled longer
//!   than any of the last `cost_window_jobs` jobs that kept their deadline did in all (once
//!   `cost_min_jobs` have), and at that interval's pace of work (the share of the interval it
//!   was not stalled) its work left does not fit before its deadline. A job stalled for 90 %
//!   of an interval nearly always fails the pace test alone, so without the first test the
//!   limit would hold for most jobs of a workload that reads from swap in every job, and cost
//!   the non-real-time groups throughput no deadline needed.
//!
//! - **No trim that costs the job CPU.** A trimmed job's own CPU time grows when the reclaim
//!   and the fault handling of its lowered limit run in its context: CPU taken from the cores
//!   the non-real-time groups run on too, which the stall budget does not count. A job's CPU
//!   time is its non-stall time less its CPU wait (the group's CPU pressure over the job). A
//!   job that stalled and whose CPU time is more than `trim_cost_pct` above the least of any
//!   completed job (one the trim cost nothing), seen while it runs or when it ends, shows that
//!   the trim has reached that cost at the limit it started with: the steering never lowers
//!   the limit below that limit again (it still raises it on stall, and a limit already below
//!   it is not lowered further). The least is never forgotten: a cost that became the norm
//!   would otherwise let the limit be lowered by the same margin again, and again. A job that
//!   did not stall was not reached by the trim, and a job slowed by waiting for a CPU was
//!   slowed by the other groups' work.
//!
//! - **A job past its cost is not done.** The steering's stall budget subtracts the job's cost
//!   `c`; a job that has already run longer than `c` (its time since start less its stall)
//!   still needs at least what it has run, so that is its cost for the rest of the job. A
//!   trimmed job whose own CPU time grows (direct reclaim, fault handling) is steered back up
//!   as it happens, not after its miss has taught the learned cost.
//!
//! Between jobs the limit is held, as under SARA; the non-real-time groups get what the
//! soft real-time groups do not hold ([`crate::budget`]).

use std::collections::{BTreeMap, VecDeque};

use serde::{Deserialize, Serialize};

use crate::budget::{interval_stall_ns, is_soft_rt, plan_nrt, ActionPlan, Budget, LimitKnob, StallKind};
use crate::jobs::{JobQueue, Released, Steered};
use crate::sara::is_severe_interval;
use crate::{Action, Controller, GroupId, GroupRole, JobEvent, Observation, PolicyError, StallInputs, StallTotals};

/// Tailguard's parameters; see the module documentation for what each one does.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TailguardConfig {
    /// Guard band added, in per mille of the relative deadline, each time a job that was not
    /// rescued misses its deadline (default 10: 1 %).
    pub guard_step_permille: u16,
    /// Largest guard band, in per mille of the relative deadline (default 100: 10 %).
    pub guard_max_permille: u16,
    /// Guard band taken back, in per mille of the relative deadline, each time a job meets
    /// its deadline (default 1: one miss's step is gone after ten jobs on time).
    pub guard_decay_permille: u16,
    /// Eq. 6's unit when the stall is above the per-interval target (the limit grows).
    pub step_up_bytes: u64,
    /// Eq. 6's unit when the stall is below the target (the limit shrinks).
    pub step_down_bytes: u64,
    /// Completed jobs whose non-stall time is remembered.
    pub cost_window_jobs: u16,
    /// Quantile of the remembered non-stall times used as the job's cost `c` (default 90).
    pub cost_quantile_pct: u8,
    /// Completed jobs needed before the learned cost replaces the configured BCET.
    pub cost_min_jobs: u16,
    /// Room above its usage a rescued job's limit keeps each interval.
    pub rescue_headroom_bytes: u64,
    /// Whether a job the steering cannot save is rescued.
    pub rescue: bool,
    /// Stall, in percent of the interval, above which an interval shows the job waiting on
    /// memory rather than running (default 90, SARA's Definition 1 `n`): only such a job is
    /// rescued.
    pub rescue_stall_pct: u8,
    /// Whether a job certain to miss its deadline is dropped.
    pub drop_certain_misses: bool,
    /// PSI line used for the stall.
    pub stall: StallKind,
    /// Knob the limits are written to.
    pub knob: LimitKnob,
    /// Starting limit of each soft-RT group; by default an even share of what the non-RT
    /// floors leave.
    pub initial_limit_bytes: Option<u64>,
    /// Swap I/O limit (reads and write-backs, bytes/s) of the non-RT groups while a soft-RT
    /// job the device holds back runs (default 32 MiB/s, about a twentieth of a SATA SSD's
    /// read bandwidth); `None`: never limited.
    pub io_guard_bytes_per_s: Option<u64>,
    /// I/O stall, in percent of an interval, above which a soft-RT job counts as waiting on
    /// the swap device (default 90, as `rescue_stall_pct`).
    pub io_guard_stall_pct: u8,
    /// Rise of a stalled job's CPU time over the least of any completed job, in percent, above
    /// which the limit the job started with becomes the lowest the steering lowers the limit
    /// to (default 25); `None`: no such floor.
    pub trim_cost_pct: Option<u16>,
}

impl Default for TailguardConfig {
    fn default() -> Self {
        TailguardConfig {
            guard_step_permille: 10,
            guard_max_permille: 100,
            guard_decay_permille: 1,
            step_up_bytes: 2 << 20,
            step_down_bytes: 1 << 20,
            cost_window_jobs: 16,
            cost_quantile_pct: 90,
            cost_min_jobs: 4,
            rescue_headroom_bytes: 16 << 20,
            rescue: true,
            rescue_stall_pct: 90,
            drop_certain_misses: true,
            stall: StallKind::Some,
            knob: LimitKnob::Max,
            initial_limit_bytes: None,
            io_guard_bytes_per_s: Some(32 << 20),
            io_guard_stall_pct: 90,
            trim_cost_pct: Some(25),
        }
    }
}

impl TailguardConfig {
    pub fn validate(&self) -> Result<(), PolicyError> {
        let bad = |field, requirement, got: String| Err(PolicyError::InvalidParameter { controller: "tailguard", field, requirement, got });
        if self.guard_max_permille >= 1000 {
            return bad("guard_max_permille", "must be below 1000 (the whole deadline)", self.guard_max_permille.to_string());
        }
        if self.guard_step_permille > self.guard_max_permille {
            return bad("guard_step_permille", "must be at most guard_max_permille", self.guard_step_permille.to_string());
        }
        if self.io_guard_stall_pct > 100 {
            return bad("io_guard_stall_pct", "must be a percentage 0..=100", self.io_guard_stall_pct.to_string());
        }
        if self.io_guard_bytes_per_s == Some(0) {
            return bad("io_guard_bytes_per_s", "must be > 0 (leave it out to never limit)", "0".into());
        }
        if self.rescue_stall_pct > 100 {
            return bad("rescue_stall_pct", "must be a percentage 0..=100", self.rescue_stall_pct.to_string());
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
    /// CPU wait (the group's CPU pressure) over the job's intervals so far.
    pub cpu_wait_ns: u64,
    /// The limit when the job started.
    pub start_limit_bytes: u64,
    /// Whether the job is being rescued.
    pub rescued: bool,
    /// Whether its drop has been asked for.
    pub drop_requested: bool,
    /// Whether it has waited on the swap device (the non-RT groups' I/O is then limited until
    /// it ends).
    pub io_waiting: bool,
}

/// What the trim has been seen to cost a group's jobs in CPU.
#[derive(Clone, Debug, Default)]
struct TrimCost {
    /// The least CPU time of any completed job (not trimmed, or trimmed at no cost).
    least_cpu_ns: Option<u64>,
    /// The lowest limit the steering lowers to: the start limit of a job the trim cost CPU.
    floor_bytes: u64,
}

/// Raises the floor to `job`'s starting limit if the job, having stalled, has used more than
/// `trim_cost_pct` above the least CPU time of any completed job.
fn note_trim_cost(cfg: &TailguardConfig, trim: &mut TrimCost, job: &TailguardJob, cpu_ns: u64) {
    if let (Some(pct), Some(least)) = (cfg.trim_cost_pct, trim.least_cpu_ns) {
        let costly = u128::from(cpu_ns) * 100 > u128::from(least) * (100 + u128::from(pct));
        if costly && job.stall_ns > 0 {
            trim.floor_bytes = trim.floor_bytes.max(job.start_limit_bytes);
        }
    }
}

#[derive(Clone, Debug)]
struct GroupState {
    limit_bytes: u64,
    last_stall: Option<StallTotals>,
    jobs: JobQueue<TailguardJob>,
    /// Non-stall time of the latest completed jobs, oldest first.
    costs_ns: VecDeque<u64>,
    /// Their `cost_quantile_pct` quantile once there are `cost_min_jobs` of them, and their
    /// least: kept as they change, not recomputed each tick.
    cost_quantile_ns: Option<u64>,
    cost_min_ns: Option<u64>,
    trim: TrimCost,
    /// Stall of the latest jobs that met their deadline, oldest first, and the most of them
    /// once there are `cost_min_jobs`: a job that has waited longer is not one of them.
    kept_stalls_ns: VecDeque<u64>,
    kept_stall_max_ns: Option<u64>,
    /// The guard band now, in per mille of the relative deadline.
    guard_permille: u16,
    rescues: u64,
    drops: u64,
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

    /// Jobs of `group` whose drop Tailguard asked for so far.
    pub fn drops(&self, group: GroupId) -> u64 {
        self.groups.get(&group).map_or(0, |s| s.drops)
    }

    /// The guard band of `group` now, in per mille of its relative deadline.
    pub fn guard_permille(&self, group: GroupId) -> u16 {
        self.groups.get(&group).map_or(0, |s| s.guard_permille)
    }

    /// The lowest limit the steering lowers `group`'s to (0: none yet).
    pub fn trim_floor_bytes(&self, group: GroupId) -> u64 {
        self.groups.get(&group).map_or(0, |s| s.trim.floor_bytes)
    }

    /// The job cost `c` used for `group` now: the learned quantile, or the configured BCET.
    pub fn job_cost_ns(&self, group: GroupId, bcet_ns: u64) -> u64 {
        self.groups.get(&group).map_or(bcet_ns, |s| learned_cost_ns(s, bcet_ns))
    }

    fn on_event(&mut self, obs: &Observation, event: &JobEvent) {
        let cfg = &self.config;
        match *event {
            JobEvent::Release { group, job, at_ns, deadline_ns } => {
                let Some(st) = self.groups.get_mut(&group) else { return };
                let limit_bytes = st.limit_bytes;
                st.jobs.release(Released { job, release_ns: at_ns, deadline_ns }, |r, now_ns| start_job(r, now_ns, limit_bytes));
            }
            JobEvent::Completion { group, job, at_ns } | JobEvent::Drop { group, job, at_ns } => {
                let Some(GroupRole::SoftRealTime { bcet_ns, .. }) = obs.groups.get(group).map(|g| &g.role) else { return };
                let bcet_ns = *bcet_ns;
                let Some(st) = self.groups.get_mut(&group) else { return };
                let limit_bytes = st.limit_bytes;
                let Some(ended) = st.jobs.end(job, at_ns, |next, now_ns| start_job(next, now_ns, limit_bytes)) else { return };
                let completed = matches!(event, JobEvent::Completion { .. });
                let cost_ns = at_ns.saturating_sub(ended.start_ns).saturating_sub(ended.stall_ns);
                // A dropped job needed at least what it ran; when that is more than the learned
                // cost, the cost was too low, and only dropped jobs can show it (a job the cost
                // misjudges is dropped before it completes).
                if completed || cost_ns > learned_cost_ns(st, bcet_ns) {
                    remember_cost(cfg, st, cost_ns);
                }
                let cpu_ns = cost_ns.saturating_sub(ended.cpu_wait_ns);
                note_trim_cost(cfg, &mut st.trim, &ended, cpu_ns);
                if completed {
                    st.trim.least_cpu_ns = Some(st.trim.least_cpu_ns.map_or(cpu_ns, |f| f.min(cpu_ns)));
                }
                // A dropped job missed too. A rescued one missed although the steering had
                // handed it over: a wider aim would not have changed that.
                let missed = !completed || at_ns > ended.deadline_ns;
                if !missed {
                    remember_kept_stall(cfg, st, ended.stall_ns);
                }
                st.guard_permille = if !missed {
                    st.guard_permille.saturating_sub(cfg.guard_decay_permille)
                } else if !ended.rescued {
                    st.guard_permille.saturating_add(cfg.guard_step_permille).min(cfg.guard_max_permille)
                } else {
                    st.guard_permille
                };
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
        cpu_wait_ns: 0,
        start_limit_bytes: limit_bytes,
        rescued: false,
        drop_requested: false,
        io_waiting: false,
    }
}

/// Adds a non-stall time to the window, and updates its quantile (nearest rank, once there
/// are `cost_min_jobs` of them) and its least.
fn remember_cost(cfg: &TailguardConfig, st: &mut GroupState, cost_ns: u64) {
    st.costs_ns.push_back(cost_ns);
    while st.costs_ns.len() > usize::from(cfg.cost_window_jobs) {
        st.costs_ns.pop_front();
    }
    let mut sorted: Vec<u64> = st.costs_ns.iter().copied().collect();
    sorted.sort_unstable();
    let n = sorted.len();
    st.cost_min_ns = sorted.first().copied();
    st.cost_quantile_ns = (n >= usize::from(cfg.cost_min_jobs)).then(|| {
        let rank = (n * usize::from(cfg.cost_quantile_pct)).div_ceil(100).clamp(1, n);
        sorted[rank - 1]
    });
}

/// Adds a kept job's stall to its window, and updates the window's most once there are
/// `cost_min_jobs` of them.
fn remember_kept_stall(cfg: &TailguardConfig, st: &mut GroupState, stall_ns: u64) {
    st.kept_stalls_ns.push_back(stall_ns);
    while st.kept_stalls_ns.len() > usize::from(cfg.cost_window_jobs) {
        st.kept_stalls_ns.pop_front();
    }
    st.kept_stall_max_ns =
        (st.kept_stalls_ns.len() >= usize::from(cfg.cost_min_jobs)).then(|| st.kept_stalls_ns.iter().copied().max().unwrap_or(0));
}

/// The job cost `c`: the learned quantile, or the configured BCET before there is one.
fn learned_cost_ns(st: &GroupState, bcet_ns: u64) -> u64 {
    st.cost_quantile_ns.unwrap_or(bcet_ns)
}

/// The least non-stall time a job can still need: the fastest remembered one, or the
/// configured BCET if that is lower (a job may be the fastest yet).
fn fastest_cost_ns(st: &GroupState, bcet_ns: u64) -> u64 {
    st.cost_min_ns.map_or(bcet_ns, |c| c.min(bcet_ns))
}

impl Controller for Tailguard {
    fn name(&self) -> &str {
        "tailguard"
    }

    fn stall_inputs(&self, role: &GroupRole) -> StallInputs {
        StallInputs::ALL.of_soft_rt(role)
    }

    /// A job's CPU wait (CPU pressure) tells its CPU time from its non-stall time.
    fn uses_cpu(&self) -> bool {
        self.config.trim_cost_pct.is_some()
    }

    /// A rescue is decided on, and a rescued job's limit follows, the group's usage.
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
                cost_quantile_ns: None,
                cost_min_ns: None,
                trim: TrimCost::default(),
                kept_stalls_ns: VecDeque::new(),
                kept_stall_max_ns: None,
                guard_permille: 0,
                rescues: 0,
                drops: 0,
            });
        }
        for event in &obs.events {
            self.on_event(obs, event);
        }

        let cfg = &self.config;
        let mut plan = ActionPlan::default();
        let mut budget = Budget::new(obs);
        for (id, g) in obs.groups.iter().enumerate().filter(|(_, g)| is_soft_rt(g)) {
            let GroupRole::SoftRealTime { bcet_ns, .. } = g.role else { continue };
            let st = self.groups.get_mut(&id).expect("state created above for every soft-RT group");
            let (lo, hi) = budget.bounds(g.floor_bytes);
            let stall_ns = st.last_stall.map(|prev| interval_stall_ns(&prev, &g.stall, cfg.stall));
            let io_stall_ns = st.last_stall.map(|prev| g.stall.io_some_us.saturating_sub(prev.io_some_us) * 1_000);
            let cpu_wait_ns = st.last_stall.map_or(0, |prev| g.stall.cpu_some_us.saturating_sub(prev.cpu_some_us) * 1_000);
            st.last_stall = Some(g.stall);
            let cost_ns = learned_cost_ns(st, bcet_ns);
            let fastest_ns = fastest_cost_ns(st, bcet_ns);
            let held_bytes = st.limit_bytes;
            // Lowering stops at the floor, or where the limit is if it is already below.
            let lowest = i128::from(st.trim.floor_bytes.min(held_bytes));
            let mut limit = i128::from(held_bytes);
            let mut drop_job = None;
            if let (Some(s_intv), Some(prev_ns), Some(job)) = (stall_ns, prev_tick_ns, st.jobs.running.as_mut()) {
                if job.start_ns < obs.now_ns {
                    let interval_start_ns = prev_ns.max(job.start_ns);
                    let length_ns = obs.now_ns - interval_start_ns;
                    let s_intv = s_intv.min(length_ns);
                    let stall_before_ns = job.stall_ns;
                    job.stall_ns += s_intv;
                    job.cpu_wait_ns += cpu_wait_ns.min(length_ns);

                    let rescue = |usage: u64| i128::from(usage) + i128::from(cfg.rescue_headroom_bytes);
                    if job.rescued {
                        limit = limit.max(rescue(g.usage_bytes));
                    } else {
                        let done_ns = obs.now_ns.saturating_sub(job.start_ns).saturating_sub(job.stall_ns);
                        let steer = Steer {
                            cost_ns: cost_ns.max(done_ns),
                            guard_permille: st.guard_permille,
                            interval_start_ns,
                            length_ns,
                            stall_before_ns,
                            s_intv,
                        };
                        let delta = steer.delta_bytes(cfg, job);
                        limit = if delta >= 0 { limit.saturating_add(delta) } else { limit.saturating_add(delta).max(lowest) };
                        // Waiting on memory for nearly the whole interval, with its usage at the
                        // limit it was held to (less one growth step): it faults in what the
                        // steering gives it as fast as it is given.
                        let waiting = is_severe_interval(s_intv, length_ns, cfg.rescue_stall_pct);
                        let limit_bound = g.usage_bytes.saturating_add(cfg.step_up_bytes) >= held_bytes;
                        if cfg.rescue && waiting && limit_bound && slack_ns(job, cost_ns, obs.now_ns) < i128::from(s_intv) {
                            job.rescued = true;
                            st.rescues += 1;
                            limit = limit.max(rescue(g.usage_bytes));
                        }
                    }
                    // Waiting on the swap device at a pace that misses the deadline: the time
                    // left, at this interval's share of running, holds less than its work left.
                    let io_bound = io_stall_ns.is_some_and(|io| is_severe_interval(io.min(length_ns), length_ns, cfg.io_guard_stall_pct));
                    let below_limit = g.usage_bytes.saturating_add(cfg.step_up_bytes) < held_bytes;
                    let unlike_kept = st.kept_stall_max_ns.is_some_and(|most| job.stall_ns > most);
                    if io_bound && below_limit && unlike_kept && !job.io_waiting {
                        let done_ns = obs.now_ns.saturating_sub(job.start_ns).saturating_sub(job.stall_ns);
                        let work_left = u128::from(cost_ns.saturating_sub(done_ns));
                        let time_left = u128::from(job.deadline_ns.saturating_sub(obs.now_ns));
                        job.io_waiting = time_left * u128::from(length_ns - s_intv) < work_left * u128::from(length_ns);
                    }
                    // The trim's cost shows while the job runs, not only once it has ended.
                    let cpu_ns = obs.now_ns.saturating_sub(job.start_ns).saturating_sub(job.stall_ns).saturating_sub(job.cpu_wait_ns);
                    note_trim_cost(cfg, &mut st.trim, job, cpu_ns);
                    if cfg.drop_certain_misses && !job.drop_requested && certain_miss(job, fastest_ns, obs.now_ns) {
                        job.drop_requested = true;
                        st.drops += 1;
                        drop_job = Some(job.job);
                    }
                }
            }
            let clamped = if hi < lo { lo } else { limit.clamp(i128::from(lo), i128::from(hi)) as u64 };
            st.limit_bytes = clamped;
            budget.hold(g.floor_bytes, clamped);
            plan.set(obs, id, cfg.knob, Some(clamped));
            if let Some(job) = drop_job {
                plan.drop_job(id, job);
            }
        }
        plan_nrt(&mut plan, obs, &budget, cfg.knob);
        if let Some(rate) = cfg.io_guard_bytes_per_s {
            let waiting = self.groups.values().any(|st| st.jobs.running.as_ref().is_some_and(|j| j.io_waiting));
            let limit = waiting.then_some(rate);
            for (id, _) in obs.groups.iter().enumerate().filter(|(_, g)| !is_soft_rt(g)) {
                plan.set_io(obs, id, limit, limit);
            }
        }
        plan.finish()
    }
}

/// One interval of the steering: a job's learned cost, the guard band, and the interval of
/// `length_ns` from `interval_start_ns` whose stall was `s_intv`, after `stall_before_ns`.
struct Steer {
    cost_ns: u64,
    guard_permille: u16,
    interval_start_ns: u64,
    length_ns: u64,
    stall_before_ns: u64,
    s_intv: u64,
}

impl Steer {
    /// Eq. 5/6 aimed at the guarded finish time: the change of limit for the interval. Past
    /// the guarded finish the target is zero stall, as for SARA past the deadline.
    fn delta_bytes(&self, cfg: &TailguardConfig, job: &TailguardJob) -> i128 {
        let deadline_rel = i128::from(job.deadline_ns.saturating_sub(job.release_ns));
        let target_ns = i128::from(job.deadline_ns) - deadline_rel * i128::from(self.guard_permille) / 1000;
        let remaining = target_ns - i128::from(job.start_ns) - i128::from(self.cost_ns) - i128::from(self.stall_before_ns);
        let l = i128::from(self.length_ns.max(1));
        let s = i128::from(self.s_intv);
        let left_ns = target_ns - i128::from(self.interval_start_ns);
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
}

/// Stall the job may still have and meet its deadline: the time left, less the work left
/// (`cost − (time since start − stall)`, none once it has done `cost`).
fn slack_ns(job: &TailguardJob, cost_ns: u64, now_ns: u64) -> i128 {
    let done_ns = now_ns.saturating_sub(job.start_ns).saturating_sub(job.stall_ns);
    let left_ns = cost_ns.saturating_sub(done_ns);
    i128::from(job.deadline_ns) - i128::from(now_ns) - i128::from(left_ns)
}

/// Whether the job misses its deadline even if it stalls no more and its rest runs as fast
/// as the fastest job remembered: `start + stall + fastest > deadline`, or the deadline has
/// passed.
fn certain_miss(job: &TailguardJob, fastest_ns: u64, now_ns: u64) -> bool {
    slack_ns(job, fastest_ns, now_ns) < 0
}
