//! CPU schedulers written outside critmem (a Python class), built through a resolver the
//! program embedding critmem registers (the Python extension resolves them in-process). A
//! scenario names one where a built-in kind goes: `[scheduler] kind` for the root, a top-level
//! server's `policy`; the loader asks the resolver to check it with the tasks and CPUs it will
//! schedule, so a name or a configuration that cannot run fails at load, at its key.

use std::sync::OnceLock;

use super::{JobKey, ReadyJob, Scheduler};
use crate::model::task::TaskSpec;
use crate::result::SimResult;
use crate::time::Nanos;

/// Builds schedulers critmem does not hold; the loader's half ([`ExternalSchedulerCheck`])
/// lives with the scenario model.
pub trait ExternalSchedulers: ExternalSchedulerCheck {
    /// A fresh scheduler over `cpus` CPUs (numbered from 0). One that fails, to build or later,
    /// reports it the way the embedding program stops a run; until then it leaves the CPUs idle.
    fn build(&self, name: &str, config: &serde_json::Value, tasks: &[TaskSpec], cpus: usize) -> Box<dyn Scheduler>;
}

static RESOLVER: OnceLock<Box<dyn ExternalSchedulers>> = OnceLock::new();

/// Registers the program's resolver, for the loader's checks and the runs' builds; a second
/// registration is refused (returns false).
pub fn register_external_schedulers(resolver: Box<dyn ExternalSchedulers>) -> bool {
    if RESOLVER.set(resolver).is_err() {
        return false;
    }
    let registered: &'static dyn ExternalSchedulers = &**RESOLVER.get().expect("set just now");
    crate::model::external::register_check(registered)
}

/// The registered resolver, if any.
pub fn external_schedulers() -> Option<&'static dyn ExternalSchedulers> {
    RESOLVER.get().map(|r| &**r)
}

pub use crate::model::external::{is_external_name, ExternalSchedulerCheck, ExternalSchedulerError};
pub use crate::model::scheduler::static_name;

/// The scheduler `name` builds, through the registered resolver.
pub(crate) fn build(name: &str, config: &serde_json::Value, tasks: &[TaskSpec], cpus: usize) -> Box<dyn Scheduler> {
    external_schedulers().expect("an external scheduler is only loaded through a registered resolver").build(name, config, tasks, cpus)
}

/// A scheduler over some of the machine's CPUs: `inner` sees them as CPUs `0..n`, in the
/// order `cpus` lists them (a server's `cpus`).
pub(crate) struct CpuSubset {
    inner: Box<dyn Scheduler>,
    cpus: Vec<usize>,
    current: Vec<Option<JobKey>>,
    assign: Vec<Option<JobKey>>,
}

impl CpuSubset {
    pub(crate) fn new(inner: Box<dyn Scheduler>, cpus: Vec<usize>) -> Self {
        let n = cpus.len();
        CpuSubset { inner, cpus, current: vec![None; n], assign: vec![None; n] }
    }
}

impl Scheduler for CpuSubset {
    fn name(&self) -> &'static str {
        self.inner.name()
    }
    fn cpus(&self) -> usize {
        self.cpus.len()
    }
    fn add_ready(&mut self, job: &ReadyJob) {
        self.inner.add_ready(job);
    }
    fn remove(&mut self, key: JobKey) {
        self.inner.remove(key);
    }
    fn block(&mut self, key: JobKey) {
        self.inner.block(key);
    }
    fn activate(&mut self, now: Nanos, job: &ReadyJob) {
        self.inner.activate(now, job);
    }
    fn wake(&mut self, now: Nanos, job: &ReadyJob) {
        self.inner.wake(now, job);
    }
    /// `current` and `assign` span the machine; only this node's CPUs are written.
    fn choose(&mut self, now: Nanos, current: &[Option<JobKey>], assign: &mut [Option<JobKey>]) {
        for (local, &cpu) in self.cpus.iter().enumerate() {
            self.current[local] = current[cpu];
        }
        self.inner.choose(now, &self.current, &mut self.assign);
        for (local, &cpu) in self.cpus.iter().enumerate() {
            assign[cpu] = self.assign[local];
        }
    }
    fn next_wakeup(&self, now: Nanos) -> Option<Nanos> {
        self.inner.next_wakeup(now)
    }
    fn finish(&mut self, now: Nanos, result: &mut SimResult) {
        self.inner.finish(now, result);
    }
}

#[cfg(test)]
mod tests {
    use super::super::{GlobalScheduler, JobOrder};
    use super::*;

    fn job(key: JobKey, deadline: u64) -> ReadyJob {
        ReadyJob { key, task: key as usize, seq: u64::from(key), release: Nanos::ZERO, abs_deadline: Nanos(deadline), donor: None }
    }

    #[test]
    fn a_subset_places_its_jobs_on_its_own_cpus_only() {
        let mut s = CpuSubset::new(Box::new(GlobalScheduler::new("gedf", JobOrder::Edf, 2)), vec![3, 1]);
        s.add_ready(&job(0, 10));
        s.add_ready(&job(1, 5));
        s.add_ready(&job(2, 20));
        let mut assign = vec![Some(9); 4];
        s.choose(Nanos::ZERO, &[None; 4], &mut assign);
        // Jobs 1 and 0 (earliest deadlines) on local CPUs 0 and 1: machine CPUs 3 and 1.
        assert_eq!(assign, vec![Some(9), Some(0), Some(9), Some(1)]);
        // What runs keeps its CPU.
        s.remove(1);
        s.choose(Nanos::ZERO, &[None, Some(0), None, None], &mut assign);
        assert_eq!(assign, vec![Some(9), Some(0), Some(9), Some(2)]);
    }

    /// A resolver of two names, both EDF by the built-in queue: an entry point `toy-edf` and
    /// `toys:Edf`; `config = { bad = ... }` does not fit them.
    struct Toys;

    impl ExternalSchedulerCheck for Toys {
        fn knows(&self, name: &str) -> bool {
            name == "toy-edf"
        }
        fn check(&self, name: &str, config: &serde_json::Value, _: &[TaskSpec], _: usize) -> Result<(), ExternalSchedulerError> {
            match name {
                "toy-edf" | "toys:Edf" if config.get("bad").is_some() => {
                    Err(ExternalSchedulerError::BadConfig(format!("scheduler `{name}`: unknown parameter 'bad'")))
                }
                "toy-edf" | "toys:Edf" => Ok(()),
                _ => Err(ExternalSchedulerError::NotFound(format!("scheduler `{name}`: no such toy"))),
            }
        }
    }

    impl ExternalSchedulers for Toys {
        fn build(&self, _: &str, _: &serde_json::Value, _: &[TaskSpec], cpus: usize) -> Box<dyn Scheduler> {
            Box::new(GlobalScheduler::new("toy-edf", JobOrder::Edf, cpus))
        }
    }

    const SET: &str = r#"
[machine]
cpus = CPUS
[scheduler]
kind = "KIND"
[run]
horizon_ms = 60
[[task]]
name = "a"
period_ms = 4
wcet_ms = 2
[[task]]
name = "b"
period_ms = 6
wcet_ms = 3
[[task]]
name = "c"
period_ms = 10
wcet_ms = 3
"#;

    const SERVER: &str = r#"
[scheduler]
kind = "rm"
[[scheduler.server]]
name = "s"
kind = "deferrable"
budget_ms = 3
period_ms = 5
policy = "POLICY"
[run]
horizon_ms = 60
[[task]]
name = "a"
period_ms = 4
wcet_ms = 1
server = "s"
[[task]]
name = "b"
period_ms = 6
wcet_ms = 2
server = "s"
"#;

    fn run(text: &str) -> crate::result::SimResult {
        let scenario = crate::load_toml_str(text, "s.toml").expect("loads");
        crate::simulate(&scenario, crate::SimOptions { record_jobs: true, record_segments: true, check_invariants: true })
    }

    fn err(text: &str) -> String {
        crate::load_toml_str(text, "s.toml").expect_err("refused").to_string()
    }

    #[test]
    fn the_resolver_builds_root_schedulers_and_server_policies_and_refuses_at_their_keys() {
        register_external_schedulers(Box::new(Toys));
        for (cpus, builtin) in [("1", "edf"), ("2", "gedf")] {
            let with = |kind: &str| SET.replace("CPUS", cpus).replace("KIND", kind);
            let (a, b, c) = (run(&with(builtin)), run(&with("toy-edf")), run(&with("toys:Edf")));
            assert_eq!((&a.jobs, &a.segments), (&b.jobs, &b.segments));
            assert_eq!((&a.jobs, &a.segments), (&c.jobs, &c.segments));
            // Results name the scheduler as it names itself.
            assert_eq!(c.scheduler, "toy-edf");
        }
        let one = SET.replace("CPUS", "1");
        assert_eq!(err(&one.replace("KIND", "toys:Nope")), "s.toml: scheduler.kind: scheduler `toys:Nope`: no such toy");
        assert_eq!(
            err(&one.replace("KIND\"", "toy-edf\"\nconfig = { bad = 1 }")),
            "s.toml: scheduler.config: scheduler `toy-edf`: unknown parameter 'bad'"
        );
        assert!(err(&one.replace("KIND\"", "edf\"\nconfig = { x = 1 }")).starts_with("s.toml: scheduler.config: only applies to a Python"));
        // A name the resolver does not know and no built-in has is still an unknown kind.
        assert!(err(&one.replace("KIND", "lottery")).starts_with("s.toml: scheduler.kind: unknown scheduler \"lottery\""));
        // As a deferrable server's task policy, with the built-in gedf on one CPU as its twin.
        let server = |policy: &str| SERVER.replace("POLICY", policy);
        let (a, b) = (run(&server("gedf")), run(&server("toys:Edf")));
        assert!(!a.segments.is_empty());
        assert_eq!((&a.jobs, &a.segments), (&b.jobs, &b.segments));
        assert_eq!(err(&server("toys:Nope")), "s.toml: scheduler.server[0].policy: scheduler `toys:Nope`: no such toy");
    }

    #[test]
    fn static_names_are_kept_once() {
        let a = static_name("edf.py:Edf");
        let b = static_name(&String::from("edf.py:Edf"));
        assert!(std::ptr::eq(a, b));
        assert_eq!(a, "edf.py:Edf");
    }
}
