//! The analysis report: what `critmem analyze` prints and the Python bindings return.

use critmem_core::Criticality;
use serde::Serialize;

/// What a test (or the whole analysis) concluded. Every conclusion other than `Unknown` is a
/// proof under the task model: sporadic tasks (period = minimum inter-arrival), every job
/// may take its WCET, and synchronous release is possible.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// No job ever misses its deadline.
    Schedulable,
    /// Some job can miss its deadline.
    NotSchedulable,
    /// Jobs may be late, but by a bounded amount.
    BoundedTardiness,
    /// Lateness can grow without bound.
    UnboundedTardiness,
    /// No test that applies could decide.
    Unknown,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Schedulable => "schedulable",
            Verdict::NotSchedulable => "not_schedulable",
            Verdict::BoundedTardiness => "bounded_tardiness",
            Verdict::UnboundedTardiness => "unbounded_tardiness",
            Verdict::Unknown => "unknown",
        }
    }
}

/// One test's conclusion for one CPU (`cpu = None`: the whole machine).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TestReport {
    pub name: &'static str,
    pub cpu: Option<usize>,
    pub verdict: Verdict,
    /// One sentence: the result and the assumptions it rests on.
    pub detail: String,
}

/// Per-task figures. Times are milliseconds.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TaskReport {
    pub name: String,
    /// The CPU the task runs on: its partition CPU, 0 on a one-CPU machine, `None` otherwise.
    pub cpu: Option<usize>,
    /// WCET / period (suspensions not included).
    pub utilization: f64,
    pub wcet_ms: f64,
    /// Period or minimum inter-arrival time.
    pub period_ms: f64,
    pub deadline_ms: f64,
    /// Fixed-priority rank the simulator uses (0 = highest); `None` for dynamic priorities.
    pub priority_rank: Option<u32>,
    /// Worst-case response time (exact or an upper bound, per the test's detail); `None`
    /// when the test gives none or the task can miss.
    pub response_time_ms: Option<f64>,
    /// `Some(true)`: never misses; `Some(false)`: can miss; `None`: not decided per task.
    pub schedulable: Option<bool>,
    /// Upper bound on lateness past the deadline (global EDF, implicit deadlines).
    pub tardiness_bound_ms: Option<f64>,
    pub criticality: Criticality,
    /// Total self-suspension per job, counted as execution by the tests.
    pub suspension_ms: f64,
}

/// The result of [`crate::analyze`].
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct AnalysisReport {
    pub scenario: String,
    pub scheduler: &'static str,
    pub cpus: usize,
    /// Σ WCET / period over all tasks.
    pub total_utilization: f64,
    /// See [`crate::analyze`] for how the tests combine.
    pub verdict: Verdict,
    pub tests: Vec<TestReport>,
    pub tasks: Vec<TaskReport>,
    /// Shared resources and each task's blocking; absent when the scenario declares none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourcesReport>,
    /// The scheduler hierarchy's servers; absent when the scenario declares none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub servers: Option<Vec<ServerReport>>,
    /// What the scenario runs that no test here models (page-level memory, a controller), one
    /// line each; the verdicts hold only for what is modelled, and `critmem run` shows the rest.
    pub not_covered: Vec<String>,
}

/// One `[[resource]]` as the analysis sees it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ResourceInfo {
    pub name: String,
    pub units: u32,
    /// `none`, `pip` or `srp`.
    pub protocol: &'static str,
    /// Tasks whose programs lock it, in task order.
    pub users: Vec<String>,
}

/// One critical section of a task's program. Times are milliseconds.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SectionReport {
    pub resource: String,
    pub units: u32,
    /// How long the units can be held: the compute inside the outermost section around it.
    pub duration_ms: f64,
    /// The resource of the section it is nested in, if any.
    pub within: Option<String>,
}

/// A task's critical sections and blocking term.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TaskBlocking {
    pub name: String,
    pub sections: Vec<SectionReport>,
    /// The longest time lower-priority (or lower-level) jobs can delay a job of this task,
    /// ms; `None` when no bound is known (see `note`).
    pub blocking_ms: Option<f64>,
    /// Why there is no bound, or what the term rests on; empty when there is nothing to say.
    pub note: String,
}

/// Shared resources in the report.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ResourcesReport {
    pub resources: Vec<ResourceInfo>,
    /// One entry per task, in task order.
    pub tasks: Vec<TaskBlocking>,
}

/// One server of a scheduler hierarchy. Times are milliseconds.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ServerReport {
    pub name: String,
    /// The parent server, or `root`.
    pub parent: String,
    pub cpu: usize,
    /// `deferrable`, `polling` or `level`.
    pub kind: &'static str,
    /// How it orders its children.
    pub policy: &'static str,
    /// Θ and Π (`None` for a level).
    pub budget_ms: Option<f64>,
    pub period_ms: Option<f64>,
    /// Worst response of its budget as a task under its siblings on its parent's supply
    /// (`None` if not within its period, or for a level).
    pub response_ms: Option<f64>,
    /// Budget it gets in every period while it has work, for sure.
    pub guaranteed_budget_ms: Option<f64>,
    /// The supply its children see: at least `supply_budget_ms` in every `supply_period_ms`
    /// (Shin and Lee's periodic resource); `None` when nothing is guaranteed or for a level.
    pub supply_budget_ms: Option<f64>,
    pub supply_period_ms: Option<f64>,
    /// The longest stretch its children may go without supply while they have work:
    /// `2(Π − Θ)`, plus Θ for a polling server that may drop a budget its children arrive
    /// just too late for.
    pub supply_blackout_ms: Option<f64>,
    /// Its long-run share of the CPU when every server under the root is backlogged (top-level
    /// servers under an fp root only).
    pub backlogged_share: Option<f64>,
    /// `schedulable`: its whole budget every period; `unknown`: only `guaranteed_budget_ms`.
    pub verdict: Verdict,
    pub detail: String,
    /// Its memory reservation (`reserve.memory_mib`, MiB) and its kind (`hard` or `soft`):
    /// the most its subtree's tasks may hold resident. Absent for a server reserving none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory_reserved_mb: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory_kind: Option<&'static str>,
}

impl AnalysisReport {
    /// The report as one JSON object; keys in declaration order, so equal reports give
    /// equal bytes.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("plain data serialises")
    }

    pub fn task(&self, name: &str) -> Option<&TaskReport> {
        self.tasks.iter().find(|t| t.name == name)
    }
}

/// Verdict of one scope (a CPU or the machine) from its tests: a proven miss wins, then
/// proven unbounded tardiness, then a proof of schedulability, then of bounded tardiness.
fn scope_verdict<'a>(tests: impl Iterator<Item = &'a TestReport> + Clone) -> Verdict {
    let any = |v: Verdict| tests.clone().any(|t| t.verdict == v);
    [Verdict::NotSchedulable, Verdict::UnboundedTardiness, Verdict::Schedulable, Verdict::BoundedTardiness]
        .into_iter()
        .find(|&v| any(v))
        .unwrap_or(Verdict::Unknown)
}

/// The machine's verdict from per-scope verdicts (see [`crate::analyze`]).
pub(crate) fn overall(tests: &[TestReport]) -> Verdict {
    let mut scopes: Vec<Option<usize>> = tests.iter().map(|t| t.cpu).collect();
    scopes.sort_unstable();
    scopes.dedup();
    let per_scope: Vec<Verdict> = scopes.iter().map(|s| scope_verdict(tests.iter().filter(|t| t.cpu == *s))).collect();
    let all = |ok: &[Verdict]| !per_scope.is_empty() && per_scope.iter().all(|v| ok.contains(v));
    if per_scope.contains(&Verdict::NotSchedulable) {
        Verdict::NotSchedulable
    } else if per_scope.contains(&Verdict::UnboundedTardiness) {
        Verdict::UnboundedTardiness
    } else if all(&[Verdict::Schedulable]) {
        Verdict::Schedulable
    } else if all(&[Verdict::Schedulable, Verdict::BoundedTardiness]) {
        Verdict::BoundedTardiness
    } else {
        Verdict::Unknown
    }
}
