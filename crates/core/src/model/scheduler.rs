//! The scheduler a scenario declares: its kind with the data each kind needs (priorities, the
//! table of a cyclic executive), and a tree of servers under the root (`[[scheduler.server]]`).

use crate::model::task::Criticality;
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
    /// MC²'s criticality levels: A from per-core tables, B rate-monotonic per core, C global
    /// EDF on what A and B leave, D best effort.
    Mc2,
    /// A scheduler written outside critmem (a Python class), named by the file
    /// (the resolver the embedding program registers); not one of [`Self::NAMES`].
    #[serde(skip)]
    External,
}

impl SchedulerKind {
    /// Each kind's name in files, in declaration order.
    pub const NAMES: &'static [&'static str] = &["fp", "rm", "dm", "edf", "pfp", "pedf", "gedf", "gfp", "cyclic", "mc2"];

    /// Each kind's one-line summary for help texts and listings, in the order of [`Self::NAMES`].
    pub const SUMMARIES: &'static [&'static str] = &[
        "fixed priorities from each task's `priority` (lower number first), one CPU",
        "rate-monotonic: the shorter period first, one CPU",
        "deadline-monotonic: the shorter relative deadline first, one CPU",
        "earliest deadline first, one CPU",
        "partitioned fixed priorities: each task on one CPU (its `cpu`, else worst-fit)",
        "partitioned EDF: each task on one CPU (its `cpu`, else worst-fit)",
        "global EDF over every CPU",
        "global fixed priorities over every CPU",
        "a cyclic executive: a table of time windows repeated every major frame",
        "MC²'s criticality levels: A from a table, B rate-monotonic per CPU, C global EDF, D in release order",
    ];

    /// The kind's name in files; `"python"` for an external scheduler, whose file gives its
    /// own name ([`SchedulerSpec::name`]).
    pub fn as_str(self) -> &'static str {
        Self::NAMES.get(self as usize).copied().unwrap_or("python")
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

// Every kind has its summary.
const _: () = assert!(SchedulerKind::NAMES.len() == SchedulerKind::SUMMARIES.len());

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
    /// MC²'s levels: level A's table and the servers under levels B–D.
    Mc2(Mc2Levels),
    /// A scheduler written outside critmem, built by the registered resolver.
    External(ExternalScheduler),
}

/// A scheduler critmem does not hold, as a scenario names it: `"file.py:Class"`,
/// `"package.module:Class"` or an installed entry point, with its keyword arguments.
#[derive(Clone, Debug, PartialEq)]
pub struct ExternalScheduler {
    pub name: String,
    /// `config`: a table of keyword arguments (an empty object when left out).
    pub config: serde_json::Value,
}

/// MC²'s levels as a scenario declares them (`[scheduler] kind = "mc2"`).
#[derive(Clone, Debug, PartialEq)]
pub struct Mc2Levels {
    /// Level A's slots (none, with a zero frame, when the file has no level-A task).
    pub table: CyclicTable,
    /// Budget servers under levels B–D, in file order (`[[scheduler.server]]`).
    pub servers: Vec<Mc2Server>,
    /// The server each task runs in; `None` for a task its level schedules directly.
    pub task_server: Vec<Option<usize>>,
}

/// A deferrable or polling server under one of MC²'s levels B–D. It runs at the level its
/// tasks share, one job at a time, as one entry of that level's policy: at level B in its
/// core's rate-monotonic order by its period (ties to tasks), at level C in global EDF by the
/// end of its current period, at level D in release order by its job's release. While its
/// budget lasts it runs its most urgent ready job (by `policy`); levels above preempt it as
/// they preempt that level's tasks.
#[derive(Clone, Debug, PartialEq)]
pub struct Mc2Server {
    pub name: String,
    /// Deferrable or polling.
    pub kind: ServerKind,
    pub budget: Nanos,
    pub period: Nanos,
    /// B, C or D: its tasks' criticality.
    pub level: Criticality,
    /// Its core at level B (its tasks'); `None` at levels C and D, which are global.
    pub cpu: Option<usize>,
    /// How it orders its tasks: fp, rm, dm or edf.
    pub policy: ServerPolicy,
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
            SchedulerSpec::Mc2(_) => SchedulerKind::Mc2,
            SchedulerSpec::External(_) => SchedulerKind::External,
        }
    }
    /// The name the file gives the kind (`"pfp"`, or an external scheduler's own name).
    pub fn name(&self) -> &'static str {
        match self {
            SchedulerSpec::External(e) => static_name(&e.name),
            _ => self.kind().as_str(),
        }
    }
    /// The external scheduler, if the file names one.
    pub fn external(&self) -> Option<&ExternalScheduler> {
        match self {
            SchedulerSpec::External(e) => Some(e),
            _ => None,
        }
    }
    /// How priorities are assigned, for the fixed-priority kinds only.
    pub fn priority_order(&self) -> Option<PriorityOrder> {
        match self {
            SchedulerSpec::Fp => Some(PriorityOrder::Explicit),
            SchedulerSpec::Rm => Some(PriorityOrder::RateMonotonic),
            SchedulerSpec::Dm => Some(PriorityOrder::DeadlineMonotonic),
            SchedulerSpec::Pfp { priorities } | SchedulerSpec::Gfp { priorities } => Some(*priorities),
            SchedulerSpec::Edf
            | SchedulerSpec::Pedf
            | SchedulerSpec::Gedf
            | SchedulerSpec::Cyclic(_)
            | SchedulerSpec::Mc2(_)
            | SchedulerSpec::External(_) => None,
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
    /// Level A's table under mc2.
    pub fn mc2_table(&self) -> Option<&CyclicTable> {
        self.mc2_levels().map(|l| &l.table)
    }
    /// MC²'s levels: the table and the servers under the levels.
    pub fn mc2_levels(&self) -> Option<&Mc2Levels> {
        match self {
            SchedulerSpec::Mc2(levels) => Some(levels),
            _ => None,
        }
    }
}

/// How a server's budget behaves (`[[scheduler.server]] kind`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ServerKind {
    /// Full budget at every period boundary, kept while idle within the period.
    Deferrable,
    /// Full budget at every period boundary, lost as soon as nothing below it is eligible.
    Polling,
    /// No budget: a plain priority level.
    Level,
}

impl ServerKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ServerKind::Deferrable => "deferrable",
            ServerKind::Polling => "polling",
            ServerKind::Level => "level",
        }
    }
}

/// How a node orders its children (`[scheduler] kind` for the root, `policy` for a server).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ServerPolicy {
    /// Explicit priorities: a task's `priority`, a server's `priority` (lower = higher).
    Fp,
    /// Shorter period first.
    Rm,
    /// Shorter relative deadline first (a server's deadline is its period).
    Dm,
    /// Earliest absolute deadline first (a server's is the end of its current period).
    Edf,
    /// Global EDF: the earliest-deadline jobs on the server's CPUs its parent leaves it.
    Gedf,
    /// Global fixed priority over the server's CPUs.
    Gfp,
    /// EDF per CPU, each task on one of the server's CPUs.
    Pedf,
    /// Fixed priority per CPU, each task on one of the server's CPUs.
    Pfp,
    /// A table of per-task windows within a major frame, on the server's CPUs.
    Cyclic,
    /// A scheduler written outside critmem over the server's CPUs ([`ServerSpec::external`]).
    #[serde(skip)]
    External,
}

impl ServerPolicy {
    pub fn as_str(self) -> &'static str {
        match self {
            ServerPolicy::Fp => "fp",
            ServerPolicy::Rm => "rm",
            ServerPolicy::Dm => "dm",
            ServerPolicy::Edf => "edf",
            ServerPolicy::Gedf => "gedf",
            ServerPolicy::Gfp => "gfp",
            ServerPolicy::Pedf => "pedf",
            ServerPolicy::Pfp => "pfp",
            ServerPolicy::Cyclic => "cyclic",
            ServerPolicy::External => "python",
        }
    }

    /// Whether it schedules tasks only, over CPUs of its own; the others order
    /// child servers or tasks on their parent's CPU.
    pub fn is_task_policy(self) -> bool {
        matches!(
            self,
            ServerPolicy::Gedf | ServerPolicy::Gfp | ServerPolicy::Pedf | ServerPolicy::Pfp | ServerPolicy::Cyclic | ServerPolicy::External
        )
    }
}

/// One server of a validated hierarchy.
#[derive(Clone, Debug, PartialEq)]
pub struct ServerSpec {
    pub name: String,
    /// The parent server's index; `None` for a child of the root.
    pub parent: Option<usize>,
    pub kind: ServerKind,
    /// Zero for a level.
    pub budget: Nanos,
    /// Zero for a level.
    pub period: Nanos,
    /// Rank among siblings under an fp parent (lower = higher).
    pub priority: Option<i64>,
    /// How it orders its children.
    pub policy: ServerPolicy,
    /// The CPU of its hierarchy (its top-level ancestor's).
    pub cpu: usize,
    /// CPU time its child-scheduler thread takes to deliver one event; zero delivers at once.
    pub event_cost: Nanos,
    /// The CPUs a task policy runs its tasks on (`cpus`, or `[cpu]`); empty for the others.
    pub cpus: Vec<usize>,
    /// How gfp and pfp rank their tasks.
    pub priorities: Option<PriorityOrder>,
    /// A cyclic server's table: slots on its CPUs naming its tasks, or, with `windows`, its
    /// child servers (a slot's `task` is then the child's server index).
    pub table: Option<CyclicTable>,
    /// A cyclic server over child servers: its table gives each child time windows.
    pub windows: bool,
    /// A gedf or gfp server over child servers: the best of them run on its CPUs, one CPU each.
    pub over_servers: bool,
    /// Under pfp and pedf, the CPU each of its tasks runs on (task index, CPU).
    pub task_cpus: Vec<(usize, usize)>,
    /// The scheduler of a server whose policy names one written outside critmem.
    pub external: Option<ExternalScheduler>,
}

impl ServerSpec {
    /// Whether it schedules tasks with a scheduler of its own (a task policy over its own CPUs).
    pub fn has_task_policy(&self) -> bool {
        self.policy.is_task_policy() && !self.windows && !self.over_servers
    }
}

/// A validated `[[scheduler.server]]` tree: one root per CPU with the scheduler's policy.
#[derive(Clone, Debug, PartialEq)]
pub struct Hierarchy {
    pub root_policy: ServerPolicy,
    /// In file order; parents may come after their children.
    pub servers: Vec<ServerSpec>,
    /// The leaf server each task attaches to.
    pub task_server: Vec<usize>,
    /// A child dispatches a job only once no event is pending for it (HiRes's `pevt`); off,
    /// an event that arrives while its child-scheduler thread delivers the last one it saw
    /// waits for the next event or replenishment.
    pub pending_event_check: bool,
}

/// `name` as a `&'static str` (schedulers and results name their kind so); each distinct
/// name is kept once for the life of the program.
pub fn static_name(name: &str) -> &'static str {
    static NAMES: std::sync::Mutex<std::collections::BTreeSet<&'static str>> = std::sync::Mutex::new(std::collections::BTreeSet::new());
    let mut names = NAMES.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(&known) = names.get(name) {
        return known;
    }
    let leaked: &'static str = Box::leak(name.to_string().into_boxed_str());
    names.insert(leaked);
    leaked
}
