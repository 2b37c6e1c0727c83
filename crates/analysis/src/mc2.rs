//! MC²'s criticality levels, each tested on what the levels above leave it.
//!
//! Levels are statically ordered A > B > C > D. **Level A** runs from a per-core cyclic table:
//! each level-A task only inside its own slots on its core. Its jobs (released at k·T from 0,
//! with the major frame a multiple of T and D ≤ T) are replayed against those slots, which is
//! exact. **Level B** is rate-monotonic per core on the time the core's level-A slots leave
//! free: A's table is the highest-priority load, taken in full whether or not A uses it, and
//! each B task's response bound is the supply-based one of [`crate::fp_response_times_on`]
//! with the free time's supply-bound function. **Level C** is global EDF over the capacity A
//! and B leave: per core `1 − (A slot time)/frame − U_B`. **Level D** gets no guarantee.
//!
//! **Servers** under the levels (`[[scheduler.server]]` with `kind = "mc2"`) enter their level
//! as tasks of their budget Θ and period Π, after the scenario's tasks; the tasks they hold
//! are counted through them. At level B a deferrable server can spend one period's budget at
//! its end and the next one's at once: release jitter Π − Θ towards the lower priorities of
//! its core ([`mc2_analysis_with_jitter`]). If the server as a task responds within Π, its
//! tasks see Γ(Π, Θ) (after a wait of up to Θ for a polling server, which may drop a budget
//! its tasks arrive just too late for) and are checked on it: fixed priorities with
//! [`crate::fp_response_times_on`], EDF with [`crate::edf_supply_test`]. At level C a polling
//! server's demand is a task's whose jobs may end early, so level C's bound holds with it; a
//! deferrable one's budget can resume mid-period after it idled, like a self-suspending job,
//! which the bound does not cover. What a level-C server's budget gives its tasks is not
//! analysed (`critmem analyze` names it under `not_covered`); level D has no test.
//!
//! Level C's utilisation condition (`bounded`) compares its utilisation with that capacity,
//! and the per-task figures in [`LevelC::tardiness_estimates`] are an estimate in the style of
//! [`crate::gedf_tardiness_bounds`] (Devi & Anderson) with the number of CPUs replaced by the
//! capacity left, plus the longest stretch any core can spend entirely on A and B: neither is
//! proven. [`LevelC::tardiness_bounds`] is.
//!
//! # Level C's bound
//!
//! Assumptions: level-C jobs neither self-suspend nor block (a pending job is always eligible
//! once its predecessor is done) and are never aborted or skipped (`critmem analyze` also
//! refuses the bound when any task touches modelled memory or runs a program), deadlines
//! equal periods at level C, every level-B task has a
//! response bound Rⱼ ≤ Dⱼ ≤ Tⱼ, and the scheduler gives a CPU that A and B leave to the
//! earliest-deadline level-C jobs (ties by release order) at every instant.
//!
//! *Supply.* On core k, A runs only in its slots: in any window of length Δ at most
//! (S/F)·Δ + c_A (S the slot time per frame F, c_A the largest excess, [`slot_excess`]).
//! A level-B task runs in [t, t+Δ) only for jobs released in (t − Rⱼ, t + Δ), at most
//! (Δ + Rⱼ)/Tⱼ + 1 of them, so at most uⱼ·Δ + uⱼ·Rⱼ + Cⱼ. Level C thus gets at least
//! αₖ·Δ − βₖ on core k, αₖ = 1 − S/F − Σuⱼ, βₖ = c_A + Σ(uⱼRⱼ + Cⱼ); over cores with αₖ > 0,
//! α = Σαₖ and β = Σβₖ. Let U = Σ Cᵢ/Tᵢ over level C, m the CPUs, Uₓ the sum of the m − 1
//! largest uᵢ and L the sum of the m − 1 largest Cᵢ(1 + uᵢ).
//!
//! *Claim.* If U ≤ α and α > Uₓ + (m − 1)·uᵢ for every level-C task i, every level-C job of
//! task ℓ completes within x + C_ℓ of its deadline, for any x ≥ 0 with
//! x·(α − Uₓ − (m − 1)u_ℓ) ≥ 2β + L + (m − 1)C_ℓ(1 + u_ℓ) − α·C_ℓ for every ℓ.
//!
//! *Proof sketch*, by induction over jobs in priority order. Take job J of τ_ℓ, deadline d;
//! Ψ is the set of jobs of priority at least J's (all have deadlines ≤ d), and LAG(t) is
//! Ψ's work in the processor-sharing schedule (each job at rate uᵢ from release to
//! deadline) minus its work actually done by t. An instant is busy if every CPU A and B
//! leave runs a Ψ job. (1) At a non-busy instant fewer tasks have an eligible Ψ job than
//! there are free CPUs, so at most m − 1, and each runs. A task with no pending Ψ work has
//! lag ≤ 0; one whose oldest pending job Jᵢ (released rᵢ, deadline dᵢ) is pending at t has
//! lag ≤ uᵢ(t − rᵢ), which is ≤ Cᵢ if t ≤ dᵢ and, by induction (Jᵢ's deadline is before
//! d), < uᵢ(Tᵢ + x + Cᵢ) = Cᵢ + uᵢ(x + Cᵢ) otherwise. So LAG ≤ L + Uₓ·x there.
//! (2) From the last non-busy instant t₀ (or 0) to d, every free CPU runs Ψ work: at least
//! α(d − t₀) − β, while processor sharing does at most U(d − t₀); with U ≤ α,
//! LAG(d) ≤ LAG(t₀) + β. With implicit deadlines processor sharing has finished Ψ by d,
//! so the Ψ work left at d is W = LAG(d) ≤ β + L + Uₓ·x, and τ_ℓ's share of it is its lag,
//! W_ℓ ≤ C_ℓ + u_ℓ(x + C_ℓ) as in (1). (3) No Ψ job arrives after d. At each instant of
//! [d, f_J) either all free CPUs run Ψ work (busy) or τ_ℓ's oldest pending job, a Ψ job,
//! runs (non-busy): the non-busy time is at most W_ℓ, and the free capacity in busy time
//! is at most W minus τ_ℓ's progress. Free capacity over [d, f_J) is at least
//! α(f_J − d) − β and at most W + (m − 1)W_ℓ, so
//! f_J − d ≤ (β + W + (m − 1)W_ℓ)/α ≤ x + C_ℓ by the choice of x. ∎
//!
//! The bound is sound and pessimistic (β counts twice, and (3) gives up the CPUs idle while
//! τ_ℓ runs alone); x is rounded up to whole nanoseconds from exact fractions.

use crate::cyclic::SlotSupply;
use crate::fp::Rta;
use crate::input::InvalidInput;
use crate::model::{nanos, Ratio, TaskParams};
use crate::supply::{edf_supply_test, fp_response_times_on, PeriodicResource, Supply, SupplyTest};
use crate::EdfSrpBlocking;
use critmem_core::model::scheduler::{Mc2Server, ServerKind, ServerPolicy};
use critmem_core::model::task::{Arrival, Criticality, OverrunPolicy};
use critmem_core::scenario::{CyclicTable, PriorityOrder};
use critmem_core::sched::priority_ranks;
use critmem_core::Nanos;
use std::cmp::Ordering;

/// One task of an MC² system.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mc2Task {
    pub params: TaskParams,
    pub level: Criticality,
    /// The core of a level-A or -B task; `None` for levels C and D (scheduled globally).
    pub cpu: Option<usize>,
}

/// An MC² system: tasks, core count and the level-A table (slots name tasks by index into
/// `tasks`; a table without slots is fine when there is no level-A task).
#[derive(Clone, Debug, PartialEq)]
pub struct Mc2System {
    pub cpus: usize,
    pub tasks: Vec<Mc2Task>,
    pub table: CyclicTable,
}

/// Level C's global-EDF figures.
#[derive(Clone, Debug, PartialEq)]
pub struct LevelC {
    /// `1 − (A slot time)/frame − U_B` per core (0 where A and B take everything), for display.
    pub capacity_per_cpu: Vec<f64>,
    /// Σ over cores of the above.
    pub capacity: f64,
    /// Σ C/T of the level-C tasks.
    pub utilization: f64,
    /// The utilisation condition of the module documentation; `None` if too close to call.
    pub bounded: Option<bool>,
    /// Per core, the longest stretch it can spend entirely on levels A and B, ns (`None` when
    /// its level-B tasks are not all schedulable).
    pub longest_gap: Vec<Option<Nanos>>,
    /// (task index, tardiness estimate) per level-C task, when `bounded` holds and the
    /// estimate is defined.
    pub tardiness_estimates: Option<Vec<(usize, Nanos)>>,
    /// (task index, proven tardiness bound) per level-C task (module documentation, "Level
    /// C's bound"), or why the bound does not apply.
    pub tardiness_bounds: Result<Vec<(usize, Nanos)>, String>,
}

/// Per-level results of [`mc2_analysis`].
#[derive(Clone, Debug, PartialEq)]
pub struct Mc2Analysis {
    /// (task index, exact response against its slots) per level-A task.
    pub level_a: Vec<(usize, Rta)>,
    /// (task index, response bound on the time A leaves) per level-B task.
    pub level_b: Vec<(usize, Rta)>,
    pub level_c: LevelC,
}

impl Mc2Analysis {
    /// Every level-A task meets its deadlines.
    pub fn level_a_schedulable(&self) -> bool {
        self.level_a.iter().all(|(_, r)| matches!(r, Rta::Meets { .. }))
    }
    /// Every level-B task meets its deadlines.
    pub fn level_b_schedulable(&self) -> bool {
        self.level_b.iter().all(|(_, r)| matches!(r, Rta::Meets { .. }))
    }
}

fn validate(sys: &Mc2System) -> Result<(), InvalidInput> {
    if sys.cpus == 0 {
        return Err(InvalidInput::new("cpus", "at least one CPU"));
    }
    let frame = sys.table.major_frame.0;
    for (i, t) in sys.tasks.iter().enumerate() {
        let key = |f: &str| format!("task[{i}].{f}");
        let p = &t.params;
        if p.period.0 == 0 || p.deadline.0 == 0 {
            return Err(InvalidInput::new(key("period"), "period and deadline must be positive"));
        }
        let pinned = matches!(t.level, Criticality::A | Criticality::B);
        match t.cpu {
            Some(c) if !pinned => return Err(InvalidInput::new(key("cpu"), format!("level {} is global; it has no core ({c})", t.level))),
            Some(c) if c >= sys.cpus => return Err(InvalidInput::new(key("cpu"), format!("core {c} of {}", sys.cpus))),
            None if pinned => return Err(InvalidInput::new(key("cpu"), format!("a level-{} task needs a core", t.level))),
            _ => {}
        }
        if pinned && p.deadline > p.period {
            return Err(InvalidInput::new(key("deadline"), "levels A and B need a deadline within the period"));
        }
        if t.level == Criticality::A && (frame == 0 || !frame.is_multiple_of(p.period.0)) {
            return Err(InvalidInput::new("table.major_frame", format!("{frame} ns is not a multiple of task {i}'s period")));
        }
    }
    let mut slots: Vec<(usize, u64, u64)> = Vec::new();
    for (k, s) in sys.table.slots.iter().enumerate() {
        let key = |f: &str| format!("table.slot[{k}].{f}");
        let Some(t) = sys.tasks.get(s.task) else {
            return Err(InvalidInput::new(key("task"), format!("no task {}", s.task)));
        };
        if t.level != Criticality::A || t.cpu != Some(s.cpu) {
            return Err(InvalidInput::new(key("cpu"), format!("task {} is not a level-A task of core {}", s.task, s.cpu)));
        }
        if s.duration.0 == 0 || s.start.0.checked_add(s.duration.0).is_none_or(|e| e > frame) {
            return Err(InvalidInput::new(key("duration"), format!("the slot does not fit in the {frame} ns major frame")));
        }
        slots.push((s.cpu, s.start.0, s.start.0 + s.duration.0));
    }
    slots.sort_unstable();
    if let Some(w) = slots.windows(2).find(|w| w[0].0 == w[1].0 && w[1].1 < w[0].2) {
        return Err(InvalidInput::new("table.slot", format!("slots overlap on core {} at {} ns", w[0].0, w[1].1)));
    }
    Ok(())
}

/// The free time level A's slots leave on `cpu`, repeating every frame.
fn free_time(sys: &Mc2Ref<'_>, cpu: usize) -> SlotSupply {
    let frame = u128::from(sys.frame());
    let mut busy: Vec<(u128, u128)> =
        sys.0.table.slots.iter().filter(|s| s.cpu == cpu).map(|s| (u128::from(s.start.0), u128::from(s.start.0 + s.duration.0))).collect();
    busy.sort_unstable();
    let mut free = Vec::new();
    let mut at = 0;
    for (s, e) in busy {
        if s > at {
            free.push((at, s));
        }
        at = at.max(e);
    }
    if at < frame {
        free.push((at, frame));
    }
    SlotSupply::from_intervals(frame, free)
}

/// A borrowed system with a usable frame (1 ns when there are no slots and no frame).
struct Mc2Ref<'a>(&'a Mc2System);

impl Mc2Ref<'_> {
    fn frame(&self) -> u64 {
        self.0.table.major_frame.0.max(1)
    }
    fn on(&self, level: Criticality, cpu: Option<usize>) -> Vec<usize> {
        (0..self.0.tasks.len()).filter(|&i| self.0.tasks[i].level == level && (cpu.is_none() || self.0.tasks[i].cpu == cpu)).collect()
    }
}

/// Analyses every level; refuses malformed systems (see the module documentation).
pub fn mc2_analysis(sys: &Mc2System) -> Result<Mc2Analysis, InvalidInput> {
    mc2_analysis_with_jitter(sys, &vec![Nanos::ZERO; sys.tasks.len()])
}

/// [`mc2_analysis`] with a release jitter per task: a level-B task with jitter J interferes
/// with the lower priorities of its core as `⌈(t + J)/T⌉·C` (a deferrable server, J = T − C,
/// can spend one period's budget at its end and the next one's at once), and level C's bound
/// counts its jobs released in (t − R − J, t + Δ) as those that can run in [t, t + Δ).
pub fn mc2_analysis_with_jitter(sys: &Mc2System, jitter: &[Nanos]) -> Result<Mc2Analysis, InvalidInput> {
    validate(sys)?;
    if jitter.len() != sys.tasks.len() {
        return Err(InvalidInput::new("jitter", format!("{} entries for {} tasks", jitter.len(), sys.tasks.len())));
    }
    let r = Mc2Ref(sys);
    let level_a = r.on(Criticality::A, None).into_iter().map(|i| (i, level_a_response(sys, i))).collect();
    let mut level_b = Vec::new();
    let mut longest_gap = Vec::new();
    let mut capacity = Vec::new();
    for cpu in 0..sys.cpus {
        let free = free_time(&r, cpu);
        let idx = r.on(Criticality::B, Some(cpu));
        let params: Vec<TaskParams> = idx.iter().map(|&i| sys.tasks[i].params).collect();
        // Rate-monotonic, ties by task order.
        let mut order: Vec<usize> = (0..idx.len()).collect();
        order.sort_by_key(|&k| (params[k].period, k));
        let mut ranks = vec![0u32; idx.len()];
        for (rank, &k) in order.iter().enumerate() {
            ranks[k] = rank as u32;
        }
        let zeros = vec![Nanos::ZERO; idx.len()];
        let jit: Vec<Nanos> = idx.iter().map(|&i| jitter[i]).collect();
        let results = fp_response_times_on(&free, &params, &jit, &ranks, &zeros)?;
        let free_share = Ratio::new(u128::from(free.per_frame().0), u128::from(r.frame()));
        let left = crate::model::exact_utilization(&params).and_then(|u| free_share.checked_sub(u));
        let b_ok = results.iter().all(|x| matches!(x, Rta::Meets { .. }));
        level_b.extend(idx.iter().copied().zip(results));
        // The core is busy with A and B from a point where B has nothing pending until just
        // before the free time first exceeds what B's jobs released since then ask for
        // (never, with no capacity left).
        let gap = (b_ok && left.is_some_and(|l| !l.is_zero()))
            .then(|| {
                let demand = |t: u128| {
                    1 + params.iter().zip(&jit).map(|(p, &j)| crate::fp::Interferer { jitter: j, ..(*p).into() }.demand(t)).sum::<u128>()
                };
                first_supplied(&free, u128::from(r.frame()), &demand).map(|t| nanos(t - 1))
            })
            .flatten();
        longest_gap.push(gap);
        capacity.push(left);
    }
    level_b.sort_by_key(|&(i, _)| i);
    let mut level_c = level_c(sys, &r, capacity, longest_gap);
    level_c.tardiness_bounds = level_c_bounds(sys, &level_b, jitter);
    Ok(Mc2Analysis { level_a, level_b, level_c })
}

/// The least t with `sbf(t) ≥ demand(t)` on a core's free time (`demand` non-decreasing),
/// `None` if there is none before 2^64 ns. Where supply falls short, the next candidate is
/// the least t' with sbf(t') ≥ demand(t), found by bisection: no earlier t' can do, and
/// sbf(t + k·F) = sbf(t) + k·S (S the free time per frame F) bounds the search.
fn first_supplied(free: &SlotSupply, frame: u128, demand: &dyn Fn(u128) -> u128) -> Option<u128> {
    let per_frame = u128::from(free.per_frame().0);
    if per_frame == 0 {
        return None;
    }
    let sbf = |t: u128| u128::from(free.min_supply(nanos(t)).0);
    let mut t = 0u128;
    loop {
        let (need, got) = (demand(t), sbf(t));
        if got >= need {
            return Some(t);
        }
        let (mut lo, mut hi) = (t, t.checked_add((need - got).div_ceil(per_frame).checked_mul(frame)?)?);
        if hi > u128::from(u64::MAX) {
            return None;
        }
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            if sbf(mid) >= need {
                hi = mid;
            } else {
                lo = mid;
            }
        }
        t = hi;
    }
}

/// Exact response of level-A task `i` against its slots: its jobs in one major frame.
fn level_a_response(sys: &Mc2System, i: usize) -> Rta {
    let p = sys.tasks[i].params;
    let supply = SlotSupply::new(&sys.table, i);
    let (t, c, d) = (u128::from(p.period.0), u128::from(p.wcet.0), u128::from(p.deadline.0));
    let mut worst = 0;
    for k in 0..u128::from(sys.table.major_frame.0) / t {
        // Jobs never overlap: each ends by its deadline (checked here), within its period.
        let release = k * t;
        let Some(done) = supply.finish(release, c) else {
            return Rta::Misses { response_at_least: Nanos::MAX };
        };
        if done - release > d {
            return Rta::Misses { response_at_least: nanos(done - release) };
        }
        worst = worst.max(done - release);
    }
    Rta::Meets { response: nanos(worst) }
}

fn level_c(sys: &Mc2System, r: &Mc2Ref<'_>, capacity: Vec<Option<Ratio>>, longest_gap: Vec<Option<Nanos>>) -> LevelC {
    let idx = r.on(Criticality::C, None);
    let params: Vec<TaskParams> = idx.iter().map(|&i| sys.tasks[i].params).collect();
    let utilization = params.iter().map(TaskParams::utilization).sum();
    let exact_cap = capacity.iter().map(|c| c.unwrap_or(Ratio::int(0))).try_fold(Ratio::int(0), |a, c| a.checked_add(c));
    let fat = params.iter().any(|p| p.wcet > p.period);
    let fits = match (crate::model::exact_utilization(&params), exact_cap) {
        (Some(u), Some(cap)) => Some(u.cmp_exact(cap) != Ordering::Greater),
        _ => None,
    };
    let bounded = if fat { Some(false) } else { fits };
    let tardiness_estimates = (bounded == Some(true))
        .then(|| estimate(&params, exact_cap?, longest_gap.iter().copied().collect::<Option<Vec<_>>>()?))
        .flatten()
        .map(|v| idx.iter().copied().zip(v).collect());
    LevelC {
        capacity_per_cpu: capacity.iter().map(|c| c.map_or(0.0, Ratio::to_f64)).collect(),
        capacity: exact_cap.map_or(0.0, Ratio::to_f64),
        utilization,
        bounded,
        longest_gap,
        tardiness_estimates,
        tardiness_bounds: Ok(Vec::new()),
    }
}

/// Devi–Anderson's `x + Cᵢ` with the capacity in place of m, plus the longest gap.
fn estimate(tasks: &[TaskParams], capacity: Ratio, gaps: Vec<Nanos>) -> Option<Vec<Nanos>> {
    if tasks.is_empty() {
        return Some(Vec::new());
    }
    let gap = u128::from(gaps.iter().map(|g| g.0).max().unwrap_or(0));
    let lambda = (crate::model::exact_utilization(tasks)?.ceil() as usize).saturating_sub(1);
    let x = if lambda == 0 {
        0
    } else {
        let mut costs: Vec<u128> = tasks.iter().map(|t| u128::from(t.wcet.0)).collect();
        costs.sort_unstable_by(|a, b| b.cmp(a));
        let e_min = *costs.last()?;
        let e_sum: u128 = costs.iter().take(lambda).sum();
        let mut utils: Vec<Ratio> = tasks.iter().map(|t| Ratio::new(t.wcet.0.into(), t.period.0.into())).collect();
        utils.sort_unstable_by(|a, b| b.cmp_exact(*a));
        let u_sum = utils.iter().take(lambda - 1).try_fold(Ratio::int(0), |acc, u| acc.checked_add(*u))?;
        let room = capacity.checked_sub(u_sum)?;
        if room.is_zero() {
            return None;
        }
        Ratio::int(e_sum.saturating_sub(e_min)).checked_div(room)?.ceil()
    };
    Some(tasks.iter().map(|t| nanos(x + u128::from(t.wcet.0) + gap)).collect())
}

/// The largest excess of level A's slot time over its long-run share in any window on `cpu`:
/// max over windows of `slot time − (S/F)·length`, ns, where S is the core's slot time per
/// frame F. A window that starts inside a gap or ends inside one only loses by shrinking to
/// the slots, and one frame longer adds S − (S/F)·F = 0, so windows from a slot's start to a
/// slot's end at most one frame later are enough.
fn slot_excess(sys: &Mc2System, cpu: usize) -> Option<Ratio> {
    let frame = u128::from(sys.table.major_frame.0);
    let mut slots: Vec<(u128, u128)> =
        sys.table.slots.iter().filter(|s| s.cpu == cpu).map(|s| (u128::from(s.start.0), u128::from(s.start.0 + s.duration.0))).collect();
    slots.sort_unstable();
    let per_frame: u128 = slots.iter().map(|(s, e)| e - s).sum();
    let mut best = 0u128;
    for i in 0..slots.len() {
        let mut busy = 0u128;
        for j in i..i + slots.len() {
            let wrap = if j >= slots.len() { frame } else { 0 };
            let (s, e) = slots[j % slots.len()];
            busy += e - s;
            let len = e + wrap - slots[i].0;
            // F·busy − S·len, the excess times F.
            let (gain, loss) = (frame.checked_mul(busy)?, per_frame.checked_mul(len)?);
            best = best.max(gain.saturating_sub(loss));
        }
    }
    Some(if frame == 0 { Ratio::int(0) } else { Ratio::new(best, frame) })
}

/// Sum of the `k` largest of `values` (all of them if fewer).
fn largest_sum(mut values: Vec<Ratio>, k: usize) -> Option<Ratio> {
    values.sort_unstable_by(|a, b| b.cmp_exact(*a));
    values.into_iter().take(k).try_fold(Ratio::int(0), |acc, v| acc.checked_add(v))
}

/// Level C's proven tardiness bounds (module documentation, "Level C's bound"), or why the
/// bound does not apply.
fn level_c_bounds(sys: &Mc2System, level_b: &[(usize, Rta)], jitter: &[Nanos]) -> Result<Vec<(usize, Nanos)>, String> {
    let overflow = || "the exact arithmetic overflows".to_string();
    let m = sys.cpus;
    let frame = u128::from(sys.table.major_frame.0);
    let (mut rate, mut burst) = (Ratio::int(0), Ratio::int(0));
    for cpu in 0..m {
        // A and B together run at most u·Δ + b in any window of length Δ on this core.
        let slot_share = if frame == 0 {
            Ratio::int(0)
        } else {
            let s: u128 = sys.table.slots.iter().filter(|s| s.cpu == cpu).map(|s| u128::from(s.duration.0)).sum();
            Ratio::new(s, frame)
        };
        let (mut u, mut b) = (slot_share, slot_excess(sys, cpu).ok_or_else(overflow)?);
        for (i, rta) in level_b.iter().filter(|(i, _)| sys.tasks[*i].cpu == Some(cpu)) {
            let Rta::Meets { response } = rta else {
                return Err(format!("level B on CPU {cpu} has no response bound, so the time it takes is unbounded"));
            };
            let p = sys.tasks[*i].params;
            let u_j = Ratio::new(p.wcet.0.into(), p.period.0.into());
            // Jobs released in (t − R − J, t + Δ) are the only ones that run in [t, t + Δ):
            // at most ⌈(Δ + R + J)/T⌉ ≤ (Δ + R + J)/T + 1 of them, C each.
            let window = u128::from(response.0) + u128::from(jitter[*i].0);
            let carry = u_j.checked_mul(Ratio::int(window)).and_then(|x| x.checked_add(Ratio::int(p.wcet.0.into())));
            u = u.checked_add(u_j).ok_or_else(overflow)?;
            b = b.checked_add(carry.ok_or_else(overflow)?).ok_or_else(overflow)?;
        }
        // A core A and B can fill entirely supplies nothing for sure: leave it out.
        if let Some(alpha) = Ratio::int(1).checked_sub(u).filter(|a| !a.is_zero()) {
            rate = rate.checked_add(alpha).ok_or_else(overflow)?;
            burst = burst.checked_add(b).ok_or_else(overflow)?;
        }
    }
    let idx: Vec<usize> = (0..sys.tasks.len()).filter(|&i| sys.tasks[i].level == Criticality::C).collect();
    if idx.is_empty() {
        return Ok(Vec::new());
    }
    let params: Vec<TaskParams> = idx.iter().map(|&i| sys.tasks[i].params).collect();
    if let Some(k) = params.iter().position(|p| p.deadline != p.period) {
        return Err(format!("level-C task {} has a deadline other than its period (the bound needs implicit deadlines)", idx[k]));
    }
    let u_c = crate::model::exact_utilization(&params).ok_or_else(overflow)?;
    if u_c.cmp_exact(rate) == Ordering::Greater {
        return Err(format!("level C's utilisation {:.4} exceeds the {:.4} CPUs A and B surely leave", u_c.to_f64(), rate.to_f64()));
    }
    let utils: Vec<Ratio> = params.iter().map(|p| Ratio::new(p.wcet.0.into(), p.period.0.into())).collect();
    // C·(1 + u) per task, ns.
    let lag_terms = params
        .iter()
        .zip(&utils)
        .map(|(p, u)| Ratio::int(p.wcet.0.into()).checked_mul(Ratio::int(1).checked_add(*u)?))
        .collect::<Option<Vec<Ratio>>>()
        .ok_or_else(overflow)?;
    let others = m - 1;
    let u_x = largest_sum(utils.clone(), others).ok_or_else(overflow)?;
    let lag0 = largest_sum(lag_terms.clone(), others).ok_or_else(overflow)?;
    let fixed = burst.checked_add(burst).and_then(|x| x.checked_add(lag0)).ok_or_else(overflow)?;
    let m1 = Ratio::int(others as u128);
    let mut x = Ratio::int(0);
    for (k, p) in params.iter().enumerate() {
        let slope = u_x.checked_add(m1.checked_mul(utils[k]).ok_or_else(overflow)?).ok_or_else(overflow)?;
        let Some(room) = rate.checked_sub(slope).filter(|r| !r.is_zero()) else {
            return Err(format!(
                "the CPUs A and B surely leave ({:.4}) do not exceed the growth term {:.4} of level-C task {}",
                rate.to_f64(),
                slope.to_f64(),
                idx[k]
            ));
        };
        let need = fixed.checked_add(m1.checked_mul(lag_terms[k]).ok_or_else(overflow)?).ok_or_else(overflow)?;
        let have = rate.checked_mul(Ratio::int(p.wcet.0.into())).ok_or_else(overflow)?;
        if let Some(excess) = need.checked_sub(have) {
            let x_k = excess.checked_div(room).ok_or_else(overflow)?;
            if x_k.cmp_exact(x) == Ordering::Greater {
                x = x_k;
            }
        }
    }
    let x = x.ceil();
    Ok(idx.iter().zip(&params).map(|(&i, p)| (i, nanos(x + u128::from(p.wcet.0)))).collect())
}

/// One level's verdict on one core from the tasks that can miss and those left open.
fn per_core_verdict(missed: &[String], open: &[String]) -> (crate::Verdict, String) {
    use crate::Verdict;
    if !missed.is_empty() {
        (Verdict::NotSchedulable, format!("{} can miss", missed.join(", ")))
    } else if !open.is_empty() {
        (Verdict::Unknown, format!("undecided for {}", open.join(", ")))
    } else {
        (Verdict::Schedulable, String::new())
    }
}

impl crate::Analysis<'_> {
    /// `critmem analyze` on an mc2 scenario: level A per core (exact replay of the table),
    /// level B per core (rate-monotonic response times on the time A's slots leave) and level
    /// C on the machine (the proven tardiness bounds of the module
    /// documentation, "Level C's bound", with the estimates beside it). Level D has no test.
    ///
    /// Servers under the levels enter their level as tasks of their budget and period
    /// (module documentation, "Servers"), after the scenario's tasks; the tasks they hold are
    /// left out of the levels' tests and checked on their server's supply ([`Self::mc2_servers`]).
    pub(crate) fn mc2(&mut self) {
        use crate::{ms, Verdict};
        let scenario = self.scenario;
        let levels = scenario.scheduler.mc2_levels().expect("mc2 scenarios have levels");
        let n = scenario.tasks.len();
        // A task in a server is counted through its server; level D, which no test counts,
        // keeps its place in the list.
        let mut tasks: Vec<Mc2Task> = scenario
            .tasks
            .iter()
            .zip(&self.params)
            .zip(&levels.task_server)
            .map(|((t, p), srv)| match srv {
                None => Mc2Task { params: *p, level: t.criticality, cpu: t.cpu },
                Some(_) => Mc2Task { params: *p, level: Criticality::D, cpu: None },
            })
            .collect();
        let mut jitter = vec![Nanos::ZERO; n];
        for srv in &levels.servers {
            tasks.push(Mc2Task { params: TaskParams::implicit(srv.budget, srv.period), level: srv.level, cpu: srv.cpu });
            jitter.push(server_jitter(srv));
        }
        let sys = Mc2System { cpus: scenario.cpus, tasks, table: levels.table.clone() };
        for (report, spec) in self.tasks.iter_mut().zip(&scenario.tasks) {
            report.cpu = spec.cpu.or(report.cpu);
        }
        let r = match mc2_analysis_with_jitter(&sys, &jitter) {
            Ok(r) => r,
            Err(e) => {
                self.push("mc2", None, Verdict::Unknown, format!("MC² levels not analysed: {e}."));
                return;
            }
        };
        let frame_ms = ms(sys.table.major_frame);
        for cpu in 0..sys.cpus {
            let (mut missed, mut open) = (Vec::new(), Vec::new());
            let on_core: Vec<&(usize, Rta)> = r.level_a.iter().filter(|(i, _)| sys.tasks[*i].cpu == Some(cpu)).collect();
            for (i, rta) in on_core.iter().map(|x| (x.0, &x.1)) {
                let spec = self.spec(i);
                let name = spec.name.clone();
                // The replay releases jobs at k·T from 0, as MC² requires of level A.
                let replayed = spec.arrival == Arrival::Periodic && spec.offset == Nanos::ZERO;
                let proof = replayed && self.inflated_misses_are_real(&[i]);
                let report = &mut self.tasks[i];
                report.response_time_ms = if replayed { rta.response().map(ms) } else { None };
                report.schedulable = match rta {
                    Rta::Meets { .. } if replayed => Some(true),
                    Rta::Misses { .. } if proof => {
                        missed.push(name);
                        Some(false)
                    }
                    Rta::Unknown { reason } => {
                        open.push(format!("{name} ({reason})"));
                        None
                    }
                    _ if !replayed => {
                        open.push(format!("{name} (not periodic from time 0, so the replay does not apply)"));
                        None
                    }
                    _ => {
                        open.push(format!("{name} (suspensions or skipped releases make the miss unproven)"));
                        None
                    }
                };
            }
            if !on_core.is_empty() {
                let (verdict, what) = per_core_verdict(&missed, &open);
                let what = if what.is_empty() { "every job gets its WCET of slot time before its deadline".to_string() } else { what };
                self.push(
                    "mc2-level-a",
                    Some(cpu),
                    verdict,
                    format!("Level A (cyclic table, {frame_ms} ms major frame, jobs replayed over one frame): {what}."),
                );
            }
            let mut open = Vec::new();
            let on_core: Vec<usize> = r.level_b.iter().filter(|(i, _)| *i < n && sys.tasks[*i].cpu == Some(cpu)).map(|(i, _)| *i).collect();
            for &i in &on_core {
                let rta = &r.level_b.iter().find(|(j, _)| *j == i).expect("listed above").1;
                let name = self.spec(i).name.clone();
                let report = &mut self.tasks[i];
                report.response_time_ms = rta.response().map(ms);
                report.schedulable = match rta {
                    Rta::Meets { .. } => Some(true),
                    // Level A may leave part of its slots unused: the test's worst case may not occur.
                    Rta::Misses { response_at_least } => {
                        open.push(format!("{name} (response at least {} ms, assuming A fills its slots)", ms(*response_at_least)));
                        None
                    }
                    Rta::Unknown { reason } => {
                        open.push(format!("{name} ({reason})"));
                        None
                    }
                };
            }
            if !on_core.is_empty() {
                let (verdict, what) = per_core_verdict(&[], &open);
                let what = match (what.is_empty(), on_core.len()) {
                    (true, 1) => "the task meets its deadline".to_string(),
                    (true, n) => format!("all {n} tasks meet their deadlines"),
                    (false, _) => what,
                };
                let caveats = self.caveats(&on_core);
                self.push(
                    "mc2-level-b",
                    Some(cpu),
                    verdict,
                    format!("Level B (rate-monotonic response times on the time level A's slots leave): {what}{caveats}."),
                );
            }
        }
        let level_c: Vec<usize> = (0..n).filter(|&i| sys.tasks[i].level == Criticality::C).collect();
        if !level_c.is_empty() {
            self.mc2_level_c(&r.level_c, &level_c);
        }
        self.mc2_servers(&r);
    }

    /// Level C's test: its proven tardiness bounds, with the estimates beside them.
    fn mc2_level_c(&mut self, c: &LevelC, level_c: &[usize]) {
        use crate::{ms, Verdict};
        let scenario = self.scenario;
        let n = scenario.tasks.len();
        let estimates = match &c.tardiness_estimates {
            Some(v) => {
                let list: Vec<String> =
                    v.iter().filter(|&&(i, _)| i < n).map(|&(i, x)| format!("{} {} ms", self.spec(i).name, ms(x))).collect();
                format!("tardiness estimates (not proven): {}", list.join(", "))
            }
            None => "no tardiness estimate".to_string(),
        };
        // The proof needs level-C jobs that are always eligible and never dropped, and level-B
        // response bounds that no fault or lock can stretch.
        let unproven = scenario.tasks.iter().find(|t| {
            t.memory.is_some()
                || t.program.is_some()
                || (t.criticality == Criticality::C && (!t.suspensions.is_empty() || t.overrun != OverrunPolicy::Continue))
        });
        // A deferrable server's budget can resume mid-period after it idled: a job of it
        // self-suspends, which the bound does not cover.
        let levels = scenario.scheduler.mc2_levels().expect("mc2 scenarios have levels");
        let deferring = levels.servers.iter().find(|s| s.level == Criticality::C && s.kind == ServerKind::Deferrable);
        let bounds = match (&c.tardiness_bounds, unproven, deferring) {
            (Ok(_), Some(t), _) => Err(format!(
                "task {} touches modelled memory, runs a program, or (at level C) self-suspends or drops jobs, which the bound does not cover",
                t.name
            )),
            (Ok(_), None, Some(srv)) => Err(format!(
                "server {:?} is deferrable: its budget resumes mid-period after it idled, like a self-suspending job, which the bound does not cover",
                srv.name
            )),
            (b, _, _) => b.clone(),
        };
        let (verdict, what) = match bounds {
            Ok(b) => {
                let b: Vec<(usize, Nanos)> = b.into_iter().filter(|&(i, _)| i < n).collect();
                let list: Vec<String> = b.iter().map(|&(i, x)| format!("{} {} ms", self.spec(i).name, ms(x))).collect();
                for &(i, x) in &b {
                    self.tasks[i].tardiness_bound_ms = Some(ms(x));
                }
                (Verdict::BoundedTardiness, format!("tardiness bounds {} (sound, pessimistic); {estimates}", list.join(", ")))
            }
            Err(why) => (Verdict::Unknown, format!("no proven bound: {why}; {estimates}")),
        };
        let caveats = self.caveats(level_c);
        self.push(
            "mc2-level-c",
            None,
            verdict,
            format!(
                "Level C (global EDF on what A and B leave; utilisation {:.4}, capacity {:.4} CPUs at A's full slots and B's utilisation): {what}{caveats}.",
                c.utilization, c.capacity
            ),
        );
    }

    /// One `mc2-server` test per server at level B: the server as a task of its core's level B
    /// (entry `tasks + j` of the analysed system); if it meets its period, its tasks on the supply it then
    /// gives them. Servers at levels C and D have no test (`not_covered` names level C's).
    fn mc2_servers(&mut self, r: &Mc2Analysis) {
        use crate::{ms, Verdict};
        let scenario = self.scenario;
        let n = scenario.tasks.len();
        let levels = scenario.scheduler.mc2_levels().expect("mc2 scenarios have levels");
        for (j, srv) in levels.servers.iter().enumerate().filter(|(_, s)| s.level == Criticality::B) {
            let members: Vec<usize> = (0..n).filter(|&i| levels.task_server[i] == Some(j)).collect();
            let rta = r.level_b.iter().find(|(i, _)| *i == n + j).map(|x| &x.1).expect("a level-B server is analysed at level B");
            let head = format!(
                "Server {:?} ({}, {} ms every {} ms) at level B on core {}",
                srv.name,
                srv.kind.as_str(),
                ms(srv.budget),
                ms(srv.period),
                srv.cpu.unwrap_or(0)
            );
            let Rta::Meets { response } = rta else {
                let why = match rta {
                    Rta::Misses { response_at_least } => format!("its budget as a task reaches at least {} ms", ms(*response_at_least)),
                    Rta::Unknown { reason } => reason.clone(),
                    Rta::Meets { .. } => unreachable!(),
                };
                self.push(
                    "mc2-server",
                    srv.cpu,
                    Verdict::Unknown,
                    format!("{head}: not guaranteed its budget every period ({why}), so its tasks are not analysed."),
                );
                continue;
            };
            let resource = PeriodicResource::new(srv.budget, srv.period).expect("validated: 0 < budget ≤ period");
            // A polling server drops a budget its tasks arrive just too late for.
            let delay = if srv.kind == ServerKind::Polling { srv.budget } else { Nanos::ZERO };
            let supply = DelayedResource { resource, delay };
            let params: Vec<TaskParams> = members.iter().map(|&i| self.params[i]).collect();
            let (verdict, what) = match srv.policy {
                ServerPolicy::Edf if delay > Nanos::ZERO => {
                    (Verdict::Unknown, "EDF on a polling server's supply is not analysed".to_string())
                }
                ServerPolicy::Edf => match edf_supply_test(&resource, &params, &EdfSrpBlocking::none()) {
                    Ok(SupplyTest::Holds { .. }) => {
                        for &i in &members {
                            self.tasks[i].schedulable = Some(true);
                        }
                        (Verdict::Schedulable, "its tasks meet their deadlines under EDF on its supply".to_string())
                    }
                    Ok(other) => (Verdict::Unknown, format!("EDF on its supply is not shown to hold ({other:?})")),
                    Err(e) => (Verdict::Unknown, e.to_string()),
                },
                policy => {
                    let order = match policy {
                        ServerPolicy::Fp => PriorityOrder::Explicit,
                        ServerPolicy::Dm => PriorityOrder::DeadlineMonotonic,
                        _ => PriorityOrder::RateMonotonic,
                    };
                    let all = priority_ranks(order, &scenario.tasks);
                    let ranks: Vec<u32> = members.iter().map(|&i| all[i]).collect();
                    let zeros = vec![Nanos::ZERO; members.len()];
                    match fp_response_times_on(&supply, &params, &zeros, &ranks, &zeros) {
                        Ok(results) => {
                            let mut open = Vec::new();
                            for (&i, rta) in members.iter().zip(&results) {
                                let report = &mut self.tasks[i];
                                report.response_time_ms = rta.response().map(ms);
                                report.schedulable = matches!(rta, Rta::Meets { .. }).then_some(true);
                                if !matches!(rta, Rta::Meets { .. }) {
                                    open.push(scenario.tasks[i].name.clone());
                                }
                            }
                            if open.is_empty() {
                                (Verdict::Schedulable, format!("its {} task(s) meet their deadlines on its supply", members.len()))
                            } else {
                                (
                                    Verdict::Unknown,
                                    format!("undecided for {} on its supply (a bound, not a proof of a miss)", open.join(", ")),
                                )
                            }
                        }
                        Err(e) => (Verdict::Unknown, e.to_string()),
                    }
                }
            };
            let caveats = self.caveats(&members);
            self.push(
                "mc2-server",
                srv.cpu,
                verdict,
                format!(
                    "{head}: as a task it gets its budget within {} ms of each period's start, so its tasks see {} ms every {} ms{}: {what}{caveats}.",
                    ms(*response),
                    ms(srv.budget),
                    ms(srv.period),
                    if delay > Nanos::ZERO { " after a wait of up to one budget (polling)" } else { "" }
                ),
            );
        }
    }
}

/// Release jitter of a server towards lower priorities: a deferrable server can spend one
/// period's budget at its end and the next one's at once.
fn server_jitter(srv: &Mc2Server) -> Nanos {
    match srv.kind {
        ServerKind::Deferrable => srv.period - srv.budget,
        _ => Nanos::ZERO,
    }
}

/// Γ(Π, Θ) after `delay`: what a server's tasks are sure to get.
struct DelayedResource {
    resource: PeriodicResource,
    delay: Nanos,
}

impl Supply for DelayedResource {
    fn sbf(&self, t: Nanos) -> Nanos {
        self.resource.sbf(t.saturating_sub(self.delay))
    }
}
