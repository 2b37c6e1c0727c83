//! A scenario's shared resources in [`crate::analyze`]: each task's critical sections from its
//! program, the blocking term of its resources' protocol, and the test of its scheduler with
//! that term (response-time analysis under fixed priorities, the demand test with SRP under
//! EDF).
//!
//! What is analysed, per scope (the CPU, or each CPU of a partitioned scheduler whose
//! resources stay on one CPU):
//!
//! - **fp, rm, dm, pfp** with `pip` and `none` resources: Sha–Rajkumar–Lehoczky's PIP bound
//!   ([`crate::pip_blocking`]); a `none` resource behaves like `pip` only while no task of a
//!   priority between a waiter and the holder can run: when one can, the waiter's blocking has
//!   no bound (that task may preempt the holder again and again), and neither has any task
//!   sharing a resource with such a waiter.
//! - **fp, rm, dm, pfp** with `srp` resources: Baker's bound ([`crate::srp_blocking`]).
//! - **edf, pedf** with `srp` resources: the processor-demand test with SRP blocking
//!   ([`crate::edf_srp_test`]).
//!
//! Anything else (EDF with `pip` or `none`, `srp` mixed with the others in one scope, global
//! scheduling, a resource shared across partitions) is reported as not analysed, with the
//! reason: no sound test for it exists here.

use crate::report::{ResourceInfo, ResourcesReport, SectionReport, TaskBlocking};
use crate::{
    edf_preemption_levels, edf_srp_test, fp_preemption_levels, fp_response_time_ending_at_a_step, fp_response_time_general, ms,
    pip_blocking, srp_blocking, Analysis, CriticalSection, Interferer, ResourceModel, Rta, SupplyTest, TaskParams, Verdict,
};
use critmem_core::mem::{FaultCosts, IoOp};
use critmem_core::model::program::{Action, Protocol, TaskProgram};
use critmem_core::scenario::SchedulerKind;
use critmem_core::sched::partition;
use critmem_core::Nanos;
use std::cmp::Ordering;

/// The critical sections of a program: an outermost section lasts for the compute between its
/// lock and its unlock; a section nested in it is listed with that same duration (its holder
/// keeps it at most that long) and names the section it is directly nested in. Calls into
/// components are not followed. A section that touches memory also lasts for the worst case
/// of its access steps' faults (`fault_bound` of each: see [`access_fault_bound`]), since the
/// holder keeps its locks while it waits for the device.
pub fn program_sections(program: &TaskProgram, fault_bound: impl Fn(u32) -> Nanos) -> Vec<CriticalSection> {
    let mut out: Vec<CriticalSection> = Vec::new();
    // Resources held at this point, innermost last.
    let mut held: Vec<usize> = Vec::new();
    // Where the current outermost section's entries start in `out`, and its compute so far.
    let mut group_start = 0;
    let mut group_ns = 0u64;
    for a in &program.actions {
        match *a {
            Action::Lock { resource, units } => {
                if held.is_empty() {
                    group_start = out.len();
                    group_ns = 0;
                }
                out.push(CriticalSection { resource, units, duration: Nanos::ZERO, within: held.last().copied() });
                held.push(resource);
            }
            Action::Unlock { .. } => {
                held.pop();
                if held.is_empty() {
                    for s in &mut out[group_start..] {
                        s.duration = Nanos(group_ns);
                    }
                }
            }
            Action::Compute(c) if !held.is_empty() => group_ns += c.0,
            Action::Access { step, compute } if !held.is_empty() => group_ns += compute.0 + fault_bound(step).0,
            Action::Compute(_) | Action::Access { .. } => {}
            // Not followed: `analyze` leaves scenarios whose tasks both call components and
            // share resources out of the blocking analysis.
            Action::Call { .. } | Action::CallOneOf { .. } | Action::CbufAlloc | Action::CbufFree => {}
            // Budget shares are bounded by the job's demand, not by the program.
            Action::ComputeShare(_) | Action::ComputeRest => {}
            // Scenarios whose programs suspend are left out before this (`analyze`).
            Action::Suspend(_) => {}
        }
    }
    out
}

/// The longest one run of task `task`'s access step `step` can wait on and work through its
/// faults, beyond its own compute: every reference may fault when its pages may be paged out
/// (each a read of one fault's pages from the swap device, with the fault's kernel work and
/// the eviction it makes); when they stay resident (pinned, or a hard reservation that holds
/// them all) only first touches fault, each a zero-filled page in CPU time. Waits behind
/// other tasks' I/O on the device are not in it (`not_covered` says so).
pub fn access_fault_bound(scenario: &critmem_core::Scenario, task: usize, step: u32) -> Nanos {
    let (Some(m), Some(tm)) = (&scenario.memory, scenario.tasks[task].memory.as_ref()) else { return Nanos::ZERO };
    let Some(access) = tm.steps.get(step as usize) else { return Nanos::ZERO };
    let refs = access.refs_per_run();
    let costs = FaultCosts::default();
    let per_fault = if m.keeps_resident(&scenario.tasks, task, None) {
        costs.minor + costs.zero_fill
    } else {
        let read = m.swap.service_time(IoOp::Read, m.page_bytes * u64::from(m.readahead_pages.max(1)));
        read + costs.major + costs.reclaim_per_page + Nanos(m.swap_in_cpu.0 * u64::from(m.readahead_pages.max(1)))
    };
    Nanos(per_fault.0.saturating_mul(refs))
}

/// Which blocking rule a scope's resources follow.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Rule {
    /// `pip`, and `none` while no medium-priority task can run.
    Inheritance,
    Srp,
}

impl Analysis<'_> {
    /// Whether any task locks a resource (then [`Analysis::with_resources`] runs instead of the
    /// plain tests).
    pub(crate) fn uses_resources(&self) -> bool {
        self.sections.iter().any(|s| !s.is_empty())
    }

    /// The critical sections of every task, from its program (empty without one).
    pub(crate) fn all_sections(scenario: &critmem_core::Scenario) -> Vec<Vec<CriticalSection>> {
        (0..scenario.tasks.len())
            .map(|i| match &scenario.tasks[i].program {
                Some(p) => program_sections(p, |step| access_fault_bound(scenario, i, step)),
                None => Vec::new(),
            })
            .collect()
    }

    /// The resources section of the report, with no blocking terms yet.
    pub(crate) fn resources_report(&self) -> ResourcesReport {
        let res = &self.scenario.resources;
        let resources = res
            .iter()
            .enumerate()
            .map(|(r, spec)| ResourceInfo {
                name: spec.name.clone(),
                units: spec.units,
                protocol: spec.protocol.as_str(),
                users: (0..self.scenario.tasks.len())
                    .filter(|&i| self.sections[i].iter().any(|s| s.resource == r))
                    .map(|i| self.spec(i).name.clone())
                    .collect(),
            })
            .collect();
        let tasks = self
            .scenario
            .tasks
            .iter()
            .zip(&self.sections)
            .map(|(t, list)| TaskBlocking {
                name: t.name.clone(),
                sections: list
                    .iter()
                    .map(|s| SectionReport {
                        resource: res[s.resource].name.clone(),
                        units: s.units,
                        duration_ms: ms(s.duration),
                        within: s.within.map(|o| res[o].name.clone()),
                    })
                    .collect(),
                blocking_ms: None,
                note: String::new(),
            })
            .collect();
        ResourcesReport { resources, tasks }
    }

    fn set_blocking(&mut self, i: usize, blocking: Option<Nanos>, note: impl Into<String>) {
        if let Some(r) = self.resources.as_mut() {
            r.tasks[i].blocking_ms = blocking.map(ms);
            r.tasks[i].note = note.into();
        }
    }

    /// Whether task `i`'s jobs end with a step that takes no time (an unlock): the simulator
    /// runs a higher-priority job released at the instant the last compute ends before it.
    fn ends_with_step(&self, i: usize) -> bool {
        self.spec(i).program.as_ref().and_then(|p| p.actions.last()).is_some_and(|a| !matches!(a, Action::Compute(_)))
    }

    /// Resources the tasks of `idx` lock, each once, in index order.
    fn used_resources(&self, idx: &[usize]) -> Vec<usize> {
        let mut used: Vec<usize> = idx.iter().flat_map(|&i| self.sections[i].iter().map(|s| s.resource)).collect();
        used.sort_unstable();
        used.dedup();
        used
    }

    fn not_analysed(&mut self, name: &'static str, cpu: Option<usize>, idx: &[usize], why: &str) {
        for &i in idx {
            self.set_blocking(i, None, format!("not analysed: {why}"));
        }
        self.push(name, cpu, Verdict::Unknown, format!("Not analysed: {why}."));
    }

    /// The analyses of a scenario whose tasks lock resources (see the module documentation).
    pub(crate) fn with_resources(&mut self) {
        self.resources = Some(self.resources_report());
        let all: Vec<usize> = (0..self.scenario.tasks.len()).collect();
        let m = self.scenario.cpus;
        match self.scenario.scheduler.kind() {
            SchedulerKind::Fp | SchedulerKind::Rm | SchedulerKind::Dm => self.scope_with_resources(Some(0), &all, false, ""),
            SchedulerKind::Gfp if m == 1 => self.scope_with_resources(Some(0), &all, false, " (global FP on one CPU is FP)"),
            SchedulerKind::Edf => self.scope_with_resources(Some(0), &all, true, ""),
            SchedulerKind::Gedf if m == 1 => self.scope_with_resources(Some(0), &all, true, " (global EDF on one CPU is EDF)"),
            SchedulerKind::Pfp | SchedulerKind::Pedf => self.partitioned_with_resources(),
            SchedulerKind::Gedf | SchedulerKind::Gfp => self.not_analysed(
                "resources",
                None,
                &all,
                "tasks share resources under global scheduling, for which no blocking analysis exists here",
            ),
            SchedulerKind::Cyclic => {
                self.not_analysed("resources", None, &all, "tasks share resources under a cyclic table, which this analysis does not cover")
            }
            SchedulerKind::Mc2 => self.not_analysed(
                "resources",
                None,
                &all,
                "tasks share resources across MC²'s criticality levels, for which no blocking analysis exists here",
            ),
            SchedulerKind::External => self.not_analysed(
                "resources",
                None,
                &all,
                "tasks share resources under a Python scheduler, which this analysis does not model",
            ),
        }
    }

    fn partitioned_with_resources(&mut self) {
        let part = partition(self.scenario).expect("partitioned kinds have a partition");
        let edf = self.scenario.scheduler.kind() == SchedulerKind::Pedf;
        let all: Vec<usize> = (0..self.scenario.tasks.len()).collect();
        // A resource locked from two CPUs: a lock can then wait for a holder on another CPU,
        // which the uniprocessor bounds do not cover.
        let mut spread = None;
        for r in self.used_resources(&all) {
            let mut cpus: Vec<usize> =
                all.iter().filter(|&&i| self.sections[i].iter().any(|s| s.resource == r)).map(|&i| part[i]).collect();
            cpus.sort_unstable();
            cpus.dedup();
            if cpus.len() > 1 {
                spread = Some((r, cpus));
                break;
            }
        }
        if let Some((r, cpus)) = spread {
            let list: Vec<String> = cpus.iter().map(usize::to_string).collect();
            let why = format!(
                "resource {} is locked by tasks on CPUs {}, and no blocking analysis across partitions exists here",
                self.scenario.resources[r].name,
                list.join(", ")
            );
            return self.not_analysed("resources", None, &all, &why);
        }
        for cpu in 0..self.scenario.cpus {
            let on_cpu: Vec<usize> = all.iter().copied().filter(|&i| part[i] == cpu).collect();
            if !on_cpu.is_empty() {
                self.scope_with_resources(Some(cpu), &on_cpu, edf, "");
            }
        }
    }

    /// One uniprocessor scope: the plain test if its tasks lock nothing, else the test with
    /// blocking.
    fn scope_with_resources(&mut self, cpu: Option<usize>, idx: &[usize], edf: bool, note: &str) {
        let used = self.used_resources(idx);
        if used.is_empty() {
            for &i in idx {
                self.set_blocking(i, Some(Nanos::ZERO), "");
            }
            return if edf { self.edf(cpu, idx, note) } else { self.fixed_priority(cpu, idx, note) };
        }
        let protocols: Vec<Protocol> = used.iter().map(|&r| self.scenario.resources[r].protocol).collect();
        let srp = protocols.contains(&Protocol::Srp);
        let rule = match (srp, protocols.iter().all(|&p| p == Protocol::Srp)) {
            (true, true) => Rule::Srp,
            (false, _) => Rule::Inheritance,
            (true, false) => {
                let name = if edf { "edf-srp" } else { "fp-rta-blocking" };
                return self.not_analysed(name, cpu, idx, "srp resources are mixed with pip or none ones in one scope");
            }
        };
        let model = ResourceModel {
            units: self.scenario.resources.iter().map(|r| r.units).collect(),
            sections: idx.iter().map(|&i| self.sections[i].clone()).collect(),
        };
        match (edf, rule) {
            (true, Rule::Srp) => self.edf_srp(cpu, idx, &model, note),
            (true, Rule::Inheritance) => self.not_analysed(
                "edf-srp",
                cpu,
                idx,
                "under EDF only srp resources are analysed (no demand test with priority inheritance or unmanaged locks exists here)",
            ),
            (false, rule) => self.fp_with_blocking(cpu, idx, &model, rule, note),
        }
    }

    /// Fixed-priority response times with blocking terms.
    fn fp_with_blocking(&mut self, cpu: Option<usize>, idx: &[usize], model: &ResourceModel, rule: Rule, note: &str) {
        let params = self.pick(&self.params, idx);
        let global = self.ranks.as_ref().expect("fixed-priority kinds have ranks");
        // Ranks 0..n within the scope (the bounds index levels by them).
        let mut order: Vec<usize> = (0..idx.len()).collect();
        order.sort_by_key(|&k| global[idx[k]]);
        let mut ranks = vec![0u32; idx.len()];
        for (r, &k) in order.iter().enumerate() {
            ranks[k] = r as u32;
        }
        let unbounded = match rule {
            Rule::Inheritance => self.unbounded_waiters(idx, model, &ranks),
            Rule::Srp => vec![None; idx.len()],
        };
        let blocking = match rule {
            Rule::Inheritance => pip_blocking(model, &ranks),
            Rule::Srp => srp_blocking(model, &fp_preemption_levels(&ranks)),
        };
        let blocking = match blocking {
            Ok(b) => b,
            Err(e) => return self.not_analysed("fp-rta-blocking", cpu, idx, &format!("the resource model is refused: {e}")),
        };
        let results: Vec<Rta> = (0..idx.len())
            .map(|k| {
                let higher: Vec<Interferer> = (0..idx.len()).filter(|&j| ranks[j] < ranks[k]).map(|j| params[j].into()).collect();
                if self.ends_with_step(idx[k]) {
                    fp_response_time_ending_at_a_step(&params[k], blocking[k], &higher)
                } else {
                    fp_response_time_general(&params[k], blocking[k], &higher)
                }
            })
            .collect();
        let rule_name = match rule {
            Rule::Inheritance => "PIP",
            Rule::Srp => "SRP",
        };
        // A miss is proven only where no resource is involved at or above the task: then its
        // response is the plain, exact one.
        let uses_any = |k: usize| !model.sections[k].is_empty();
        let plain_proof = self.inflated_misses_are_real(idx);
        let mut first_miss: Option<usize> = None;
        let mut first_open: Option<(usize, String)> = None;
        for k in 0..idx.len() {
            let i = idx[k];
            let name = self.spec(i).name.clone();
            if let Some(why) = &unbounded[k] {
                self.set_blocking(i, None, format!("no bound: {why}"));
                let r = &mut self.tasks[i];
                r.response_time_ms = None;
                r.schedulable = None;
                if first_open.as_ref().is_none_or(|(o, _)| ranks[k] < ranks[*o]) {
                    first_open = Some((k, format!("task {name} has no blocking bound: {why}")));
                }
                continue;
            }
            self.set_blocking(i, Some(blocking[k]), format!("{rule_name} bound"));
            let proof = plain_proof && blocking[k] == Nanos::ZERO && (0..idx.len()).all(|j| ranks[j] > ranks[k] || !uses_any(j));
            let r = &mut self.tasks[i];
            r.record_rta(&results[k], proof);
            match &results[k] {
                Rta::Misses { response_at_least } => {
                    if proof && first_miss.is_none_or(|o| ranks[k] < ranks[o]) {
                        first_miss = Some(k);
                    }
                    if !proof && first_open.as_ref().is_none_or(|(o, _)| ranks[k] < ranks[*o]) {
                        first_open = Some((
                            k,
                            format!(
                                "task {name} may miss: with a blocking term of {} ms its response bound reaches at least {} ms against a {} ms deadline (the bound is not a proof of a miss)",
                                ms(blocking[k]),
                                ms(*response_at_least),
                                ms(params[k].deadline)
                            ),
                        ));
                    }
                }
                Rta::Unknown { reason } => {
                    if first_open.as_ref().is_none_or(|(o, _)| ranks[k] < ranks[*o]) {
                        first_open = Some((k, format!("task {name}: {reason}")));
                    }
                }
                Rta::Meets { .. } => {}
            }
        }
        let (verdict, what) = match (first_miss, first_open) {
            (Some(k), _) => {
                let Rta::Misses { response_at_least } = results[k] else { unreachable!() };
                (
                    Verdict::NotSchedulable,
                    format!(
                        "task {} can miss: its response reaches at least {} ms against a {} ms deadline",
                        self.spec(idx[k]).name,
                        ms(response_at_least),
                        ms(params[k].deadline)
                    ),
                )
            }
            (None, Some((_, what))) => (Verdict::Unknown, what),
            (None, None) => (Verdict::Schedulable, format!("all {} tasks meet their deadlines", idx.len())),
        };
        let detail = format!("Response-time analysis with {rule_name} blocking terms{note}: {what}{}.", self.caveats(idx));
        self.push("fp-rta-blocking", cpu, verdict, detail);
    }

    /// For each task of the scope (by position), why its blocking has no bound, if it has none:
    /// it locks a `none` resource that a lower-priority task also locks while a task of a
    /// priority in between exists; then also every task sharing a resource with it.
    fn unbounded_waiters(&self, idx: &[usize], model: &ResourceModel, ranks: &[u32]) -> Vec<Option<String>> {
        let n = idx.len();
        let res = &self.scenario.resources;
        let locks = |k: usize, r: usize| model.sections[k].iter().any(|s| s.resource == r);
        let name = |k: usize| self.spec(idx[k]).name.as_str();
        let mut why: Vec<Option<String>> = vec![None; n];
        for h in 0..n {
            'found: for s in &model.sections[h] {
                if res[s.resource].protocol != Protocol::None {
                    continue;
                }
                for l in (0..n).filter(|&l| ranks[l] > ranks[h] && locks(l, s.resource)) {
                    if let Some(m) = (0..n).filter(|&m| ranks[m] > ranks[h] && ranks[m] < ranks[l]).min_by_key(|&m| ranks[m]) {
                        why[h] = Some(format!(
                            "it locks {} (protocol none), which lower-priority task {} also locks, and task {} can preempt {} while it holds it",
                            res[s.resource].name,
                            name(l),
                            name(m),
                            name(l)
                        ));
                        break 'found;
                    }
                }
            }
        }
        // Waiting for a task that itself has no bound has none either.
        loop {
            let mut changed = false;
            for k in 0..n {
                if why[k].is_some() {
                    continue;
                }
                let shared = (0..n).find(|&u| why[u].is_some() && model.sections[k].iter().any(|s| locks(u, s.resource)));
                if let Some(u) = shared {
                    why[k] = Some(format!("it shares a resource with task {}, whose blocking has no bound", name(u)));
                    changed = true;
                }
            }
            if !changed {
                return why;
            }
        }
    }

    /// EDF with SRP: the demand test with Baruah's blocking term.
    fn edf_srp(&mut self, cpu: Option<usize>, idx: &[usize], model: &ResourceModel, note: &str) {
        let params: Vec<TaskParams> = self.pick(&self.params, idx);
        let terms = match srp_blocking(model, &edf_preemption_levels(&params)) {
            Ok(b) => b,
            Err(e) => return self.not_analysed("edf-srp", cpu, idx, &format!("the resource model is refused: {e}")),
        };
        for (k, &i) in idx.iter().enumerate() {
            self.set_blocking(i, Some(terms[k]), "SRP bound (preemption levels by relative deadline)");
        }
        let caveats = self.caveats(idx);
        let (verdict, what) = match edf_srp_test(&params, model) {
            Ok(SupplyTest::Holds { checked_to }) => {
                (Verdict::Schedulable, format!("dbf(t) + B(t) ≤ t at every absolute deadline up to {} ms", ms(checked_to)))
            }
            Ok(SupplyTest::Violated { at, demand, .. }) => (
                Verdict::Unknown,
                format!(
                    "dbf + B({} ms) = {} ms exceeds the interval (B is an upper bound, so this is no proof of a miss)",
                    ms(at),
                    ms(demand)
                ),
            ),
            Ok(SupplyTest::Overloaded) => {
                let raw = self.pick(&self.raw, idx);
                let over = crate::utilization_cmp(&raw, 1) == Some(Ordering::Greater);
                if over && self.misses_are_real(idx) {
                    (Verdict::NotSchedulable, "utilisation exceeds 1".to_string())
                } else {
                    (Verdict::Unknown, "utilisation exceeds 1 only with suspensions counted or releases the simulator skips".to_string())
                }
            }
            Ok(SupplyTest::Unknown { reason }) => (Verdict::Unknown, reason),
            Err(e) => (Verdict::Unknown, format!("the resource model is refused: {e}")),
        };
        if verdict == Verdict::Schedulable {
            for &i in idx {
                self.tasks[i].schedulable = Some(true);
            }
        }
        self.push("edf-srp", cpu, verdict, format!("EDF processor-demand test with SRP blocking (Baruah){note}: {what}{caveats}."));
    }
}
