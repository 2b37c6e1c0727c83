//! critmem schedulability analysis.
//!
//! [`analyze`] runs the tests that apply to a scenario's scheduler and returns an
//! [`AnalysisReport`]. The tests themselves work on plain [`TaskParams`] (integer ns) so other
//! analyses (MC², HiRes) can reuse them:
//!
//! - [`fp_response_times`] / [`fp_response_time`]: uniprocessor fixed-priority RTA, arbitrary
//!   deadlines (exact for sporadic tasks);
//! - [`edf_demand_test`], [`edf_dbf`], [`utilization_cmp`]: uniprocessor EDF (exact);
//! - [`gedf_tardiness_is_bounded`], [`gedf_tardiness_bounds`], [`gedf_gfb`]: global EDF;
//! - [`gfp_response_bounds`]: global fixed priority (sufficient);
//! - [`SlotSupply`], [`cyclic_periodic_response`], [`cyclic_sporadic_response`]: cyclic tables;
//! - [`pip_blocking`], [`srp_blocking`], [`EdfSrpBlocking`], [`fp_response_times_with_blocking`],
//!   [`fp_response_times_with_jitter`], [`edf_srp_test`]: shared resources (module `blocking`);
//! - [`PeriodicResource`], [`Supply`], [`fp_response_times_on`], [`edf_supply_test`]: tasks on a
//!   partial CPU supply (module `supply`);
//! - [`Server`], [`fp_server_analysis`]: deferrable and periodic servers (module `servers`);
//! - [`mc2_analysis`]: MC²'s criticality levels A–C (module `mc2`).
//!
//! These take plain structs and return [`InvalidInput`] (key and reason) for inputs they
//! cannot analyse. [`analyze`] feeds the resource and server analyses from scenario files
//! (modules `scenario_resources` and `scenario_servers`); MC²'s tests are not fed yet.
//!
//! Task model: sporadic tasks (a periodic task's period is its minimum inter-arrival time),
//! any job may take its WCET, and all tasks may release together: offsets are ignored
//! (synchronous release is the worst case) except by the cyclic analysis, which replays
//! periodic tasks at their real release times. Self-suspensions are counted as execution
//! (suspension-oblivious): sound, so a "schedulable" stays a proof, but a miss found that way
//! is reported as unknown.

mod blocking;
mod cyclic;
mod edf;
mod fp;
mod global;
mod input;
mod mc2;
pub mod mc2_study;
mod model;
mod report;
mod scenario_resources;
mod scenario_servers;
mod servers;
mod supply;

pub use blocking::{
    edf_preemption_levels, fp_preemption_levels, pip_blocking, srp_blocking, srp_ceiling, CriticalSection, EdfSrpBlocking, ResourceModel,
};
pub use cyclic::{cyclic_periodic_response, cyclic_sporadic_response, SlotSupply};
pub use edf::{edf_dbf, edf_demand_test, DemandTest};
pub use fp::{
    fp_response_time, fp_response_time_ending_at_a_step, fp_response_time_general, fp_response_times, fp_response_times_with_blocking,
    fp_response_times_with_jitter, Interferer, Rta,
};
pub use global::{gedf_gfb, gedf_tardiness_bounds, gedf_tardiness_is_bounded, gfp_response_bounds};
pub use input::InvalidInput;
pub use mc2::{mc2_analysis, mc2_analysis_with_jitter, LevelC, Mc2Analysis, Mc2System, Mc2Task};
pub use model::{utilization_cmp, TaskParams};
pub use report::{
    AnalysisReport, ResourceInfo, ResourcesReport, SectionReport, ServerReport, TaskBlocking, TaskReport, TestReport, Verdict,
};
pub use scenario_resources::{access_fault_bound, program_sections};
pub use servers::{fp_server_analysis, Server, ServerGuarantee, ServerKind};
pub use supply::{edf_srp_test, edf_supply_test, fp_response_times_on, PeriodicResource, Supply, SupplyTest};

use critmem_core::model::program::Action;
use critmem_core::model::task::{Arrival, OverrunPolicy};
use critmem_core::scenario::SchedulerKind;
use critmem_core::sched::{partition, priority_ranks};
use critmem_core::{Nanos, Scenario, TaskSpec};
use std::cmp::Ordering;

/// Analyses a scenario with the tests that apply to its scheduler:
///
/// | scheduler | tests (per CPU for pfp/pedf, with the simulator's worst-fit partition) |
/// |---|---|
/// | fp, rm, dm, pfp | `fp-rta` |
/// | edf, pedf | `edf-utilization`, `edf-demand` (only if some D < T) |
/// | gedf | `gedf-tardiness` (Devi–Anderson), `gedf-gfb` |
/// | gfp | `gfp-rta-bc` (Bertogna–Cirinei, sufficient) |
/// | cyclic | `cyclic-supply` (per task, against its slots) |
///
/// gedf and gfp on one CPU are analysed as edf and fp.
///
/// With `[[resource]]`s, a scope whose tasks lock resources gets `fp-rta-blocking` (PIP or
/// SRP blocking terms) or, under EDF with SRP, `edf-srp`, and the report a `resources`
/// section (critical sections and blocking per task); global scheduling, resources shared
/// across partitions and other combinations are reported as not analysed. With
/// `[[scheduler.server]]`, each CPU gets one `hierarchy` test (servers on their parents'
/// supply, leaf tasks on their servers') and the report a `servers` section.
///
/// The overall verdict: each scope (a CPU, or the whole machine for global and cyclic
/// tests) takes the strongest conclusion any of its tests proves — not_schedulable, then
/// unbounded_tardiness, then schedulable, then bounded_tardiness, else unknown (sound tests
/// never contradict each other). The machine is not_schedulable (or unbounded_tardiness) if
/// any scope is; schedulable if every scope is; bounded_tardiness if every scope is
/// schedulable or bounded_tardiness; otherwise unknown.
pub fn analyze(scenario: &Scenario) -> AnalysisReport {
    let mut a = Analysis::new(scenario);
    let all: Vec<usize> = (0..scenario.tasks.len()).collect();
    let m = scenario.cpus;
    if let Some(why) = components_outside_analysis(scenario) {
        a.push("components", None, Verdict::Unknown, format!("Not analysed: {why}."));
        return a.finish();
    }
    if scenario.hierarchy.is_some() {
        // A task under servers gets the servers' supply, not the whole CPU.
        a.hierarchy();
        return a.finish();
    }
    if !scenario.resources.is_empty() {
        a.with_resources();
        return a.finish();
    }
    match scenario.scheduler.kind() {
        SchedulerKind::Fp | SchedulerKind::Rm | SchedulerKind::Dm => a.fixed_priority(Some(0), &all, ""),
        SchedulerKind::Edf => a.edf(Some(0), &all, ""),
        SchedulerKind::Gedf if m == 1 => a.edf(Some(0), &all, " (global EDF on one CPU is EDF)"),
        SchedulerKind::Gfp if m == 1 => a.fixed_priority(Some(0), &all, " (global FP on one CPU is FP)"),
        SchedulerKind::Pfp | SchedulerKind::Pedf => {
            let part = partition(scenario).expect("partitioned kinds have a partition");
            for cpu in 0..m {
                let on_cpu: Vec<usize> = all.iter().copied().filter(|&i| part[i] == cpu).collect();
                if on_cpu.is_empty() {
                    continue;
                }
                if scenario.scheduler.kind() == SchedulerKind::Pfp {
                    a.fixed_priority(Some(cpu), &on_cpu, "");
                } else {
                    a.edf(Some(cpu), &on_cpu, "");
                }
            }
        }
        SchedulerKind::Gedf => a.global_edf(),
        SchedulerKind::Gfp => a.global_fp(),
        SchedulerKind::Cyclic => a.cyclic(),
        SchedulerKind::Mc2 => a.mc2(),
        SchedulerKind::External => a.push(
            "python-scheduler",
            None,
            Verdict::Unknown,
            format!("Not analysed: {:?} is a scheduler written in Python, whose decisions no test here models.", scenario.scheduler.name()),
        ),
    }
    a.finish()
}

/// Why the tasks' calls into components put the scenario outside every analysis here, if they
/// do: a component with a bounded number of stacks makes callers wait for one another, and a
/// call within a critical section or a lock within a component lengthens sections beyond what
/// the blocking terms count. Calls alone only add their worst case to the WCET, which the
/// loader already does.
fn components_outside_analysis(scenario: &Scenario) -> Option<String> {
    if let Some(c) = scenario.components.iter().find(|c| c.stacks.is_some()) {
        let n = c.stacks.unwrap_or(0);
        let stacks = if n == 1 { "1 execution stack".to_string() } else { format!("{n} execution stacks") };
        return Some(format!("component {:?} has {stacks}, and waiting for one is not in the blocking analysis", c.name));
    }
    if let Some(c) = scenario.components.iter().find(|c| c.cbufs.is_some()) {
        return Some(format!("component {:?} has cbufs, and waiting for one is not in the blocking analysis", c.name));
    }
    let suspends = |p: &critmem_core::model::program::TaskProgram| {
        p.actions.iter().any(|a| matches!(a, critmem_core::model::program::Action::Suspend(_)))
    };
    if let Some(t) = scenario.tasks.iter().find(|t| t.program.as_ref().is_some_and(suspends)) {
        return Some(format!("task {:?}'s program suspends (suspend_ms), which the tests here do not model", t.name));
    }
    if let Some(c) = scenario.components.iter().find(|c| suspends(&c.program)) {
        return Some(format!("component {:?}'s program suspends (suspend_ms), which the tests here do not model", c.name));
    }
    if !scenario.components.is_empty() && !scenario.resources.is_empty() {
        return Some("tasks call components and share resources; calls within critical sections and locks within components are not in the blocking analysis".to_string());
    }
    None
}

/// What the scenario simulates that the tests leave out, one line each. The tests see each
/// job's declared compute and suspensions only: page faults, the swap I/O a job waits for and
/// a controller's changes to memory limits all lengthen jobs at run time by amounts no WCET
/// here includes.
fn not_covered(scenario: &Scenario) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(memory) = &scenario.memory {
        let sections = scenario.tasks.iter().any(|t| {
            t.program.as_ref().is_some_and(|p| {
                let mut held = 0usize;
                p.actions.iter().any(|a| match a {
                    Action::Lock { .. } => {
                        held += 1;
                        false
                    }
                    Action::Unlock { .. } => {
                        held -= 1;
                        false
                    }
                    Action::Access { .. } => held > 0,
                    _ => false,
                })
            })
        });
        let inside = if sections {
            "; faults inside critical sections are in the blocking terms (each reference a read from the device), but not their waits behind other tasks' I/O"
        } else {
            ""
        };
        out.push(format!(
            "page-level memory ([memory]): page faults and the waits for swap I/O on {} they cause (a job suspends while its pages are read in) are outside the response times, whose WCETs are compute alone{inside}; `critmem run` shows their effect",
            memory.swap_name
        ));
    }
    if let Some(levels) = scenario.scheduler.mc2_levels() {
        let held: Vec<&str> = levels.servers.iter().filter(|s| s.level == critmem_core::Criticality::C).map(|s| s.name.as_str()).collect();
        if !held.is_empty() {
            out.push(format!(
                "servers under MC²'s level C ({}): what a server's budget gives its tasks under global EDF is outside the analysis, which counts each server at level C as a task of its budget and period; `critmem run` shows its tasks' responses",
                held.join(", ")
            ));
        }
    }
    if let Some(control) = &scenario.control {
        out.push(format!(
            "the {} controller ([control]) changes memory limits while the tasks run; its effect on faults and response times is outside the analysis; `critmem run` shows it",
            control.config.name()
        ));
    }
    out
}

impl TaskReport {
    /// A task's response bound and verdict from its RTA; a miss counts only where `miss_is_proof`
    /// (the analysis is exact for it), else the verdict stays open.
    fn record_rta(&mut self, rta: &Rta, miss_is_proof: bool) {
        self.response_time_ms = rta.response().map(ms);
        self.schedulable = match rta {
            Rta::Meets { .. } => Some(true),
            Rta::Misses { .. } => miss_is_proof.then_some(false),
            Rta::Unknown { .. } => None,
        };
    }
}

struct Analysis<'a> {
    scenario: &'a Scenario,
    /// Suspension-oblivious parameters (suspensions counted as execution).
    params: Vec<TaskParams>,
    /// The same without suspensions: what the CPU is really asked for.
    raw: Vec<TaskParams>,
    ranks: Option<Vec<u32>>,
    tasks: Vec<TaskReport>,
    tests: Vec<TestReport>,
    /// Each task's critical sections, from its program (empty without one).
    sections: Vec<Vec<CriticalSection>>,
    resources: Option<ResourcesReport>,
    servers: Option<Vec<ServerReport>>,
}

fn ms(n: Nanos) -> f64 {
    n.as_ms_f64()
}

impl<'a> Analysis<'a> {
    fn new(scenario: &'a Scenario) -> Self {
        let ranks = scenario.scheduler.priority_order().map(|order| priority_ranks(order, &scenario.tasks));
        let part = partition(scenario);
        let tasks = scenario
            .tasks
            .iter()
            .enumerate()
            .map(|(i, t)| TaskReport {
                name: t.name.clone(),
                cpu: match &part {
                    Some(p) => Some(p[i]),
                    None if scenario.cpus == 1 => Some(0),
                    None => None,
                },
                utilization: t.utilization(),
                wcet_ms: ms(t.exec.wcet()),
                period_ms: ms(t.period),
                deadline_ms: ms(t.deadline),
                priority_rank: ranks.as_ref().map(|r| r[i]),
                response_time_ms: None,
                schedulable: None,
                tardiness_bound_ms: None,
                criticality: t.criticality,
                suspension_ms: ms(t.suspension_total()),
            })
            .collect();
        Analysis {
            scenario,
            params: scenario.tasks.iter().map(TaskParams::from_spec).collect(),
            raw: scenario.tasks.iter().map(|t| TaskParams::new(t.exec.wcet(), t.period, t.deadline)).collect(),
            ranks,
            tasks,
            tests: Vec::new(),
            sections: Analysis::all_sections(scenario),
            resources: None,
            servers: None,
        }
    }

    fn finish(self) -> AnalysisReport {
        AnalysisReport {
            scenario: self.scenario.source_name.clone(),
            scheduler: self.scenario.scheduler.name(),
            cpus: self.scenario.cpus,
            total_utilization: self.scenario.total_utilization(),
            verdict: report::overall(&self.tests),
            tests: self.tests,
            tasks: self.tasks,
            resources: self.resources,
            servers: self.servers,
            not_covered: not_covered(self.scenario),
        }
    }

    fn spec(&self, i: usize) -> &TaskSpec {
        &self.scenario.tasks[i]
    }

    fn pick(&self, of: &[TaskParams], idx: &[usize]) -> Vec<TaskParams> {
        idx.iter().map(|&i| of[i]).collect()
    }

    fn has_suspensions(&self, idx: &[usize]) -> bool {
        idx.iter().any(|&i| !self.spec(i).suspensions.is_empty())
    }

    /// Whether a miss found for these tasks (with suspension-free demands) is real: with
    /// overrun = skip and D > T the simulator drops releases that the tests still count.
    fn misses_are_real(&self, idx: &[usize]) -> bool {
        idx.iter().all(|&i| {
            let t = self.spec(i);
            !(t.overrun == OverrunPolicy::Skip && t.deadline > t.period)
        })
    }

    /// Whether a miss found with the suspension-oblivious parameters is real.
    fn inflated_misses_are_real(&self, idx: &[usize]) -> bool {
        !self.has_suspensions(idx) && self.misses_are_real(idx)
    }

    /// Why a miss found for these tasks is not a proof (call only when it is not).
    fn why_unproven(&self, idx: &[usize]) -> &'static str {
        if self.has_suspensions(idx) {
            ", but that is no proof: suspensions were counted as execution"
        } else {
            ", but that is no proof: the simulator skips releases (overrun = skip, D > T) that the test counts"
        }
    }

    /// The assumptions behind a uniprocessor or global test, as trailing clauses.
    fn caveats(&self, idx: &[usize]) -> String {
        let mut s = String::new();
        if idx.iter().any(|&i| self.spec(i).offset > Nanos::ZERO) {
            s.push_str("; offsets ignored (synchronous release is the worst case)");
        }
        if self.has_suspensions(idx) {
            s.push_str("; self-suspensions counted as execution (suspension-oblivious, sound but pessimistic)");
        }
        s
    }

    fn push(&mut self, name: &'static str, cpu: Option<usize>, verdict: Verdict, detail: String) {
        self.tests.push(TestReport { name, cpu, verdict, detail });
    }

    fn fixed_priority(&mut self, cpu: Option<usize>, idx: &[usize], note: &str) {
        let params = self.pick(&self.params, idx);
        let all_ranks = self.ranks.as_ref().expect("fixed-priority kinds have ranks");
        let ranks: Vec<u32> = idx.iter().map(|&i| all_ranks[i]).collect();
        let results = fp_response_times(&params, &ranks);
        let proof = self.inflated_misses_are_real(idx);
        let mut miss = None;
        let mut unknown = None;
        for (k, &i) in idx.iter().enumerate() {
            let r = &mut self.tasks[i];
            r.record_rta(&results[k], proof);
            // Report the highest-priority failure: it is the cause, later ones may follow.
            let first_by_rank = |cur: Option<usize>| cur.filter(|&c| ranks[c] < ranks[k]).or(Some(k));
            match &results[k] {
                Rta::Misses { .. } => miss = first_by_rank(miss),
                Rta::Unknown { .. } => unknown = first_by_rank(unknown),
                Rta::Meets { .. } => {}
            }
        }
        let name = |k: usize| &self.spec(idx[k]).name;
        let (verdict, what) = match (miss, unknown) {
            (Some(k), _) => {
                let Rta::Misses { response_at_least } = results[k] else { unreachable!() };
                let what = format!(
                    "task {} can miss: its response reaches at least {} ms against a {} ms deadline",
                    name(k),
                    ms(response_at_least),
                    ms(params[k].deadline)
                );
                if proof {
                    (Verdict::NotSchedulable, what)
                } else {
                    (Verdict::Unknown, what + self.why_unproven(idx))
                }
            }
            (None, Some(k)) => {
                let Rta::Unknown { reason } = &results[k] else { unreachable!() };
                (Verdict::Unknown, format!("task {}: {reason}", name(k)))
            }
            (None, None) if idx.len() == 1 => (Verdict::Schedulable, "the task meets its deadline".to_string()),
            (None, None) => (Verdict::Schedulable, format!("all {} tasks meet their deadlines", idx.len())),
        };
        let detail = format!("Response-time analysis{note}: {what}{}.", self.caveats(idx));
        self.push("fp-rta", cpu, verdict, detail);
    }

    fn edf(&mut self, cpu: Option<usize>, idx: &[usize], note: &str) {
        let params = self.pick(&self.params, idx);
        let raw = self.pick(&self.raw, idx);
        let caveats = self.caveats(idx);
        let u_fmt = |p: &[TaskParams]| p.iter().map(TaskParams::utilization).sum::<f64>();
        let all_d_ge_t = params.iter().all(|p| p.deadline >= p.period);
        let u_cmp = utilization_cmp(&params, 1);
        let (u_verdict, u_what) = match u_cmp {
            Some(Ordering::Greater) => {
                let raw_over = utilization_cmp(&raw, 1) == Some(Ordering::Greater);
                let what = format!("utilisation {:.4} exceeds 1", u_fmt(&params));
                if raw_over && self.misses_are_real(idx) {
                    (Verdict::NotSchedulable, what)
                } else if raw_over {
                    (Verdict::Unknown, what + self.why_unproven(&[]))
                } else {
                    (Verdict::Unknown, what + " only with suspensions counted as execution, so no miss is proven")
                }
            }
            None => (Verdict::Unknown, "utilisation is too close to 1 to compare exactly".to_string()),
            Some(_) if all_d_ge_t => {
                (Verdict::Schedulable, format!("utilisation {:.4} ≤ 1 with every deadline ≥ its period, which is exact", u_fmt(&params)))
            }
            Some(_) => (
                Verdict::Unknown,
                format!("utilisation {:.4} ≤ 1 is necessary but not sufficient with deadlines shorter than periods", u_fmt(&params)),
            ),
        };
        self.push("edf-utilization", cpu, u_verdict, format!("EDF utilisation test{note}: {u_what}{caveats}."));
        let mut verdict = u_verdict;
        if u_verdict == Verdict::Unknown && u_cmp.is_some_and(|o| o != Ordering::Greater) {
            let (v, what) = match edf_demand_test(&params) {
                DemandTest::Holds { checked_to } => {
                    (Verdict::Schedulable, format!("dbf(t) ≤ t for every absolute deadline up to {} ms (QPA)", ms(checked_to)))
                }
                DemandTest::Violated { at, demand } => {
                    let what = format!("dbf({} ms) = {} ms exceeds the interval", ms(at), ms(demand));
                    if self.inflated_misses_are_real(idx) {
                        (Verdict::NotSchedulable, what)
                    } else {
                        (Verdict::Unknown, what + self.why_unproven(idx))
                    }
                }
                DemandTest::Overloaded => (Verdict::Unknown, "utilisation exceeds 1".to_string()),
                DemandTest::Unknown { reason } => (Verdict::Unknown, reason),
            };
            self.push("edf-demand", cpu, v, format!("EDF processor-demand test{note}: {what}{caveats}."));
            verdict = v;
        }
        if verdict == Verdict::Schedulable {
            for &i in idx {
                self.tasks[i].schedulable = Some(true);
            }
        }
    }

    fn global_edf(&mut self) {
        let m = self.scenario.cpus;
        let all: Vec<usize> = (0..self.params.len()).collect();
        let caveats = self.caveats(&all);
        let u_raw = self.scenario.total_utilization();
        let u_inflated = self.params.iter().map(TaskParams::utilization).sum::<f64>();
        let u = if u_inflated > u_raw { format!("{u_raw:.4} ({u_inflated:.4} with suspensions)") } else { format!("{u_raw:.4}") };
        let (verdict, what) = match gedf_tardiness_is_bounded(&self.params, m) {
            Some(true) => (Verdict::BoundedTardiness, format!("utilisation {u} ≤ {m} CPUs and no task above 1")),
            None => (Verdict::Unknown, format!("utilisation is too close to {m} to compare exactly")),
            Some(false) => {
                let raw_fails = gedf_tardiness_is_bounded(&self.raw, m) == Some(false);
                let all_continue = self.scenario.tasks.iter().all(|t| t.overrun == OverrunPolicy::Continue);
                let what = match self.params.iter().position(|p| p.wcet > p.period) {
                    Some(i) => format!("task {} needs more than a whole CPU", self.spec(i).name),
                    None => format!("utilisation {u} exceeds {m} CPUs"),
                };
                if raw_fails && all_continue {
                    (Verdict::UnboundedTardiness, what)
                } else if !all_continue {
                    (Verdict::Unknown, what + ", but tasks that abort or skip jobs may shed the excess")
                } else {
                    (Verdict::Unknown, what + " only with suspensions counted as execution")
                }
            }
        };
        let bounds = gedf_tardiness_bounds(&self.params, m);
        let bound_note = if bounds.is_some() { "; per-task bounds from Devi–Anderson Cor. 1" } else { "" };
        self.push(
            "gedf-tardiness",
            None,
            verdict,
            format!("Global EDF bounded-tardiness condition (Devi–Anderson): {what}{bound_note}{caveats}."),
        );
        if let Some(b) = bounds {
            for (r, x) in self.tasks.iter_mut().zip(b) {
                r.tardiness_bound_ms = Some(ms(x));
            }
        }
        let density: f64 = self.params.iter().map(TaskParams::density).sum();
        let d_max = self.params.iter().map(TaskParams::density).fold(0.0, f64::max);
        let (verdict, what) = match gedf_gfb(&self.params, m) {
            Some(true) => (Verdict::Schedulable, "holds, so no deadline is missed"),
            Some(false) => (Verdict::Unknown, "does not hold (the test is only sufficient)"),
            None => (Verdict::Unknown, "is too close to call exactly"),
        };
        if verdict == Verdict::Schedulable {
            for r in &mut self.tasks {
                r.schedulable = Some(true);
            }
        }
        self.push(
            "gedf-gfb",
            None,
            verdict,
            format!("GFB test Σδ ≤ m − (m−1)·δmax ({density:.4} ≤ {:.4}) {what}{caveats}.", m as f64 - (m as f64 - 1.0) * d_max),
        );
    }

    fn global_fp(&mut self) {
        let m = self.scenario.cpus;
        let all: Vec<usize> = (0..self.params.len()).collect();
        let ranks = self.ranks.clone().expect("fixed-priority kinds have ranks");
        let bounds = gfp_response_bounds(&self.params, &ranks, m);
        for (r, b) in self.tasks.iter_mut().zip(&bounds) {
            r.response_time_ms = b.map(ms);
            r.schedulable = b.map(|_| true);
        }
        let first_open = (0..bounds.len()).filter(|&i| bounds[i].is_none()).min_by_key(|&i| ranks[i]);
        let (verdict, what) = match first_open {
            None => (Verdict::Schedulable, format!("every task has a response bound within its deadline on {m} CPUs")),
            Some(i) => {
                let t = self.spec(i);
                let why = if t.deadline > t.period { "its deadline exceeds its period" } else { "its bound exceeds its deadline" };
                (Verdict::Unknown, format!("no bound for task {} or lower-priority tasks ({why}; the test is only sufficient)", t.name))
            }
        };
        let caveats = self.caveats(&all);
        self.push("gfp-rta-bc", None, verdict, format!("Global FP response-time bounds (Bertogna–Cirinei): {what}{caveats}."));
    }

    fn cyclic(&mut self) {
        let table = self.scenario.scheduler.cyclic_table().cloned().expect("cyclic scenarios have a table");
        let mut missed = Vec::new();
        let mut open = Vec::new();
        for i in 0..self.params.len() {
            let spec = self.spec(i);
            let supply = SlotSupply::new(&table, i);
            let (result, proof) = match spec.arrival {
                Arrival::Periodic => (cyclic_periodic_response(&supply, spec), self.misses_are_real(&[i])),
                Arrival::Sporadic { .. } => (cyclic_sporadic_response(&supply, &self.params[i]), spec.suspensions.is_empty()),
            };
            let name = spec.name.clone();
            let r = &mut self.tasks[i];
            r.response_time_ms = result.response().map(ms);
            r.schedulable = match result {
                Rta::Meets { .. } => Some(true),
                Rta::Misses { .. } if proof => {
                    missed.push(name);
                    Some(false)
                }
                Rta::Misses { .. } => {
                    open.push(format!("{name} (suspensions or skipped releases make the miss unproven)"));
                    None
                }
                Rta::Unknown { reason } => {
                    open.push(format!("{name} ({reason})"));
                    None
                }
            };
        }
        let (verdict, what) = if !missed.is_empty() {
            (Verdict::NotSchedulable, format!("{} can miss", missed.join(", ")))
        } else if !open.is_empty() {
            (Verdict::Unknown, format!("undecided for {}", open.join(", ")))
        } else {
            (Verdict::Schedulable, "every job gets its WCET of slot time before its deadline".to_string())
        };
        self.push(
            "cyclic-supply",
            None,
            verdict,
            format!(
                "Slot supply per task ({} ms major frame; periodic tasks replayed at their own releases, sporadic ones at the worst release): {what}.",
                ms(table.major_frame)
            ),
        );
    }
}
