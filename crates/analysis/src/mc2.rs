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
//! Level C's tardiness is bounded when its utilisation fits the capacity and no task's
//! utilisation exceeds 1: the utilisation condition, stated as such. Leontyev & Anderson
//! (RTS 2010) prove bounded tardiness for global EDF on such restricted supply under
//! conditions this test does not check in full, so `bounded` is that utilisation condition,
//! not their theorem. The per-task figures in [`LevelC::tardiness_estimates`] are likewise an
//! estimate in the style of [`crate::gedf_tardiness_bounds`] (Devi & Anderson) with the
//! number of CPUs replaced by the capacity left, plus the longest stretch any core can spend
//! entirely on A and B: not a proven bound.

use crate::cyclic::SlotSupply;
use crate::fp::Rta;
use crate::input::InvalidInput;
use crate::model::{nanos, Ratio, TaskParams};
use crate::supply::{fp_response_times_on, least_supplied, Search};
use critmem_core::scenario::CyclicTable;
use critmem_core::task::Criticality;
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
    validate(sys)?;
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
        let results = fp_response_times_on(&free, &params, &zeros, &ranks, &zeros)?;
        let free_share = Ratio::new(u128::from(free.per_frame().0), u128::from(r.frame()));
        let left = crate::model::exact_utilization(&params).and_then(|u| free_share.checked_sub(u));
        let b_ok = results.iter().all(|x| matches!(x, Rta::Meets { .. }));
        level_b.extend(idx.iter().copied().zip(results));
        // The core is busy with A and B from a point where B has nothing pending until just
        // before the free time first exceeds what B's jobs released since then ask for
        // (never, with no capacity left).
        let gap = (b_ok && left.is_some_and(|l| !l.is_zero()))
            .then(|| {
                let demand = |t: u128| 1 + params.iter().map(|p| crate::fp::Interferer::from(*p).demand(t)).sum::<u128>();
                match least_supplied(&free, &demand, 0, u128::from(u64::MAX)) {
                    Search::Found(t) => Some(nanos(t - 1)),
                    Search::Beyond(_) | Search::GaveUp => None,
                }
            })
            .flatten();
        longest_gap.push(gap);
        capacity.push(left);
    }
    level_b.sort_by_key(|&(i, _)| i);
    let level_c = level_c(sys, &r, capacity, longest_gap);
    Ok(Mc2Analysis { level_a, level_b, level_c })
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
