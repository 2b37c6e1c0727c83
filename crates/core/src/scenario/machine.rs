//! `[machine]` and `[scheduler]`: the CPUs and the scheduling policy, with the data each
//! policy needs (priorities for fixed-priority kinds, the table of a cyclic executive).

use super::error::{Ctx, ScenarioError};
use super::raw::{Choice, RawScenario, RawScheduler};
use crate::task::TaskSpec;
use crate::time::Nanos;
use serde::Deserialize;

/// Scheduling policy of the machine, as `[scheduler] kind` names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SchedulerKind {
    /// Uniprocessor fixed priority, explicit priorities.
    Fp,
    /// Uniprocessor fixed priority, rate-monotonic.
    Rm,
    /// Uniprocessor fixed priority, deadline-monotonic.
    Dm,
    /// Uniprocessor EDF.
    Edf,
    /// Partitioned fixed priority on `cpus` CPUs.
    Pfp,
    /// Partitioned EDF.
    Pedf,
    /// Global EDF.
    Gedf,
    /// Global fixed priority.
    Gfp,
    /// Table-driven cyclic executive.
    Cyclic,
}

impl SchedulerKind {
    pub fn as_str(self) -> &'static str {
        Self::NAMES[self as usize]
    }
    pub fn is_uniprocessor(self) -> bool {
        matches!(self, SchedulerKind::Fp | SchedulerKind::Rm | SchedulerKind::Dm | SchedulerKind::Edf)
    }
    pub fn is_partitioned(self) -> bool {
        matches!(self, SchedulerKind::Pfp | SchedulerKind::Pedf)
    }
    pub fn is_fixed_priority(self) -> bool {
        matches!(self, SchedulerKind::Fp | SchedulerKind::Rm | SchedulerKind::Dm | SchedulerKind::Pfp | SchedulerKind::Gfp)
    }
}

/// How fixed priorities are assigned (`[scheduler] priorities` for pfp and gfp).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
pub enum PriorityOrder {
    /// From each task's `priority` (lower number = higher priority).
    #[serde(rename = "explicit")]
    Explicit,
    /// Shorter period first.
    #[serde(rename = "rm")]
    RateMonotonic,
    /// Shorter relative deadline first.
    #[serde(rename = "dm")]
    DeadlineMonotonic,
}

/// One window of a cyclic-executive table: within every major frame, `task` may run on
/// `cpu` during `[start, start + duration)`.
#[derive(Clone, Debug, PartialEq)]
pub struct CyclicSlot {
    pub cpu: usize,
    pub start: Nanos,
    pub duration: Nanos,
    pub task: usize,
}

#[derive(Clone, Debug, PartialEq)]
pub struct CyclicTable {
    pub major_frame: Nanos,
    /// Sorted by (cpu, start), non-overlapping per CPU.
    pub slots: Vec<CyclicSlot>,
}

/// The scheduler of a scenario, each kind with the data it needs and no other.
#[derive(Clone, Debug, PartialEq)]
pub enum SchedulerSpec {
    /// Uniprocessor fixed priority, explicit priorities.
    Fp,
    /// Uniprocessor fixed priority, rate-monotonic.
    Rm,
    /// Uniprocessor fixed priority, deadline-monotonic.
    Dm,
    /// Uniprocessor EDF.
    Edf,
    /// Partitioned fixed priority.
    Pfp { priorities: PriorityOrder },
    /// Partitioned EDF.
    Pedf,
    /// Global EDF.
    Gedf,
    /// Global fixed priority.
    Gfp { priorities: PriorityOrder },
    /// Table-driven cyclic executive.
    Cyclic(CyclicTable),
}

impl SchedulerSpec {
    pub fn kind(&self) -> SchedulerKind {
        match self {
            SchedulerSpec::Fp => SchedulerKind::Fp,
            SchedulerSpec::Rm => SchedulerKind::Rm,
            SchedulerSpec::Dm => SchedulerKind::Dm,
            SchedulerSpec::Edf => SchedulerKind::Edf,
            SchedulerSpec::Pfp { .. } => SchedulerKind::Pfp,
            SchedulerSpec::Pedf => SchedulerKind::Pedf,
            SchedulerSpec::Gedf => SchedulerKind::Gedf,
            SchedulerSpec::Gfp { .. } => SchedulerKind::Gfp,
            SchedulerSpec::Cyclic(_) => SchedulerKind::Cyclic,
        }
    }
    /// The name the file gives the kind (`"pfp"`).
    pub fn name(&self) -> &'static str {
        self.kind().as_str()
    }
    /// How priorities are assigned, for the fixed-priority kinds only.
    pub fn priority_order(&self) -> Option<PriorityOrder> {
        match self {
            SchedulerSpec::Fp => Some(PriorityOrder::Explicit),
            SchedulerSpec::Rm => Some(PriorityOrder::RateMonotonic),
            SchedulerSpec::Dm => Some(PriorityOrder::DeadlineMonotonic),
            SchedulerSpec::Pfp { priorities } | SchedulerSpec::Gfp { priorities } => Some(*priorities),
            SchedulerSpec::Edf | SchedulerSpec::Pedf | SchedulerSpec::Gedf | SchedulerSpec::Cyclic(_) => None,
        }
    }
    pub fn is_partitioned(&self) -> bool {
        self.kind().is_partitioned()
    }
    pub fn is_uniprocessor(&self) -> bool {
        self.kind().is_uniprocessor()
    }
    pub fn is_fixed_priority(&self) -> bool {
        self.kind().is_fixed_priority()
    }
    /// The table of a cyclic executive.
    pub fn cyclic_table(&self) -> Option<&CyclicTable> {
        match self {
            SchedulerSpec::Cyclic(table) => Some(table),
            _ => None,
        }
    }
}

/// `[machine] cpus` (1 when the section is left out).
pub(super) fn validate_cpus(cx: &Ctx, raw: &RawScenario) -> Result<usize, ScenarioError> {
    match &raw.machine {
        None => Ok(1),
        Some(m) if m.cpus < 1 => Err(cx.err("machine.cpus", format!("must be at least 1 (got {})", m.cpus))),
        Some(m) if m.cpus > 4096 => Err(cx.err("machine.cpus", format!("must be at most 4096 (got {})", m.cpus))),
        Some(m) => Ok(m.cpus as usize),
    }
}

/// `[scheduler] kind`, which must suit the machine; the rest of the section is checked by
/// [`validate_scheduler`] once the tasks are known.
pub(super) fn validate_kind<'r>(cx: &Ctx, raw: &'r RawScenario, cpus: usize) -> Result<(&'r RawScheduler, SchedulerKind), ScenarioError> {
    let quoted: Vec<String> = SchedulerKind::NAMES.iter().map(|n| format!("{n:?}")).collect();
    let sched = raw
        .scheduler
        .as_ref()
        .ok_or_else(|| cx.err("scheduler", format!("missing section [scheduler] with kind = {}", quoted.join(" | "))))?;
    let kind = sched.kind;
    if kind.is_uniprocessor() && cpus != 1 {
        return Err(cx.err(
            "machine.cpus",
            format!("scheduler {:?} is uniprocessor but machine.cpus = {cpus}; use pfp, pedf, gfp or gedf for several CPUs", kind.as_str()),
        ));
    }
    Ok((sched, kind))
}

/// The scheduler with its priorities or table, checked against the tasks.
pub(super) fn validate_scheduler(cx: &Ctx, raw: &RawScheduler, tasks: &[TaskSpec], cpus: usize) -> Result<SchedulerSpec, ScenarioError> {
    let kind = raw.kind;
    // Priorities: fixed by the kind for fp/rm/dm, chosen (or inferred) for pfp/gfp.
    let chosen = match raw.priorities {
        None if tasks.iter().all(|t| t.priority.is_some()) => PriorityOrder::Explicit,
        None => PriorityOrder::RateMonotonic,
        Some(order) => order,
    };
    if raw.priorities.is_some() && !matches!(kind, SchedulerKind::Pfp | SchedulerKind::Gfp) {
        return Err(cx.err("scheduler.priorities", format!("only applies to pfp and gfp, not {:?}", kind.as_str())));
    }
    let spec = match kind {
        SchedulerKind::Fp => SchedulerSpec::Fp,
        SchedulerKind::Rm => SchedulerSpec::Rm,
        SchedulerKind::Dm => SchedulerSpec::Dm,
        SchedulerKind::Edf => SchedulerSpec::Edf,
        SchedulerKind::Pfp => SchedulerSpec::Pfp { priorities: chosen },
        SchedulerKind::Pedf => SchedulerSpec::Pedf,
        SchedulerKind::Gedf => SchedulerSpec::Gedf,
        SchedulerKind::Gfp => SchedulerSpec::Gfp { priorities: chosen },
        SchedulerKind::Cyclic => SchedulerSpec::Cyclic(validate_cyclic(cx, raw, tasks, cpus)?),
    };
    if spec.priority_order() == Some(PriorityOrder::Explicit) {
        if let Some(i) = tasks.iter().position(|t| t.priority.is_none()) {
            return Err(cx.err(
                format!("task[{i}].priority"),
                "missing: explicit fixed priorities need a priority on every task (lower number = higher priority)",
            ));
        }
    }
    if kind != SchedulerKind::Cyclic {
        if raw.major_frame_ms.is_some() {
            return Err(cx.err("scheduler.major_frame_ms", "only applies to kind = \"cyclic\""));
        }
        if !raw.slot.is_empty() {
            return Err(cx.err("scheduler.slot", "only applies to kind = \"cyclic\""));
        }
    }
    Ok(spec)
}

fn validate_cyclic(cx: &Ctx, raw: &RawScheduler, tasks: &[TaskSpec], cpus: usize) -> Result<CyclicTable, ScenarioError> {
    let major_frame = cx.positive(
        "scheduler.major_frame_ms",
        raw.major_frame_ms.ok_or_else(|| cx.err("scheduler.major_frame_ms", "missing: a cyclic executive needs major_frame_ms"))?,
    )?;
    if raw.slot.is_empty() {
        return Err(cx.err("scheduler.slot", "a cyclic executive needs at least one [[scheduler.slot]] (task, start_ms, duration_ms)"));
    }
    let mut slots = Vec::with_capacity(raw.slot.len());
    for (j, s) in raw.slot.iter().enumerate() {
        let k = |f: &str| format!("scheduler.slot[{j}].{f}");
        let task = tasks.iter().position(|t| t.name == s.task).ok_or_else(|| cx.err(k("task"), format!("no task named {:?}", s.task)))?;
        let start = cx.time(&k("start_ms"), s.start_ms)?;
        let duration = cx.positive(&k("duration_ms"), s.duration_ms)?;
        if start + duration > major_frame {
            return Err(cx.err(k("duration_ms"), "slot ends after the major frame"));
        }
        let cpu = match s.cpu {
            None => 0,
            Some(c) if c < 0 || c as usize >= cpus => {
                return Err(cx.err(k("cpu"), format!("CPU {c} does not exist: machine.cpus = {cpus}")))
            }
            Some(c) => c as usize,
        };
        slots.push((j, CyclicSlot { cpu, start, duration, task }));
    }
    slots.sort_by_key(|(_, s)| (s.cpu, s.start));
    for w in slots.windows(2) {
        let (a, b) = (&w[0].1, &w[1].1);
        if a.cpu == b.cpu && a.start + a.duration > b.start {
            return Err(cx.err(format!("scheduler.slot[{}]", w[1].0), format!("overlaps slot[{}] on CPU {}", w[0].0, a.cpu)));
        }
    }
    Ok(CyclicTable { major_frame, slots: slots.into_iter().map(|(_, s)| s).collect() })
}
