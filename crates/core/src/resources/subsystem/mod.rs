//! [`ResourceSubsystem`]: the jobs of tasks with a program take and give back units of shared
//! resources as their programs say, under each resource's protocol.
//!
//! - A lock takes its units at once (no CPU time) if enough are free. Otherwise the job waits
//!   in the resource's queue, ordered by the job's own priority and then by when it began to
//!   wait (FIFO among equal priorities). An unlock gives the units back and grants waiters in
//!   that order while the first one fits; a waiter that does not fit stops the granting, so a
//!   large request is not overtaken forever by smaller ones behind it.
//! - `none`: the waiting job blocks, off every CPU.
//! - `pip`: the waiting job keeps its place in its scheduler's ready queue with a dependency
//!   link ([`Context::depend`]) to the holder of the highest priority among the resource's
//!   holders; when the scheduler chooses the waiter, that holder runs instead (and if it
//!   waits too, the end of its chain). A waiter granted units at an unlock owns them only
//!   once it runs: until then a job of higher priority that locks the resource takes them
//!   from it, and the waiter locks again when it runs (as Linux's rt_mutex lets a pending
//!   owner's lock be stolen). PIP's blocking bound rests on this: a job entering a critical
//!   section after a higher-priority job's release would block it a second time. [`ResourceSubsystem::with_donor_inheritance`] gives the
//!   same protocol through priority donors ([`Context::inherit`]) instead: the waiter blocks
//!   and each holder is ordered by the highest priority of the jobs waiting on it, directly
//!   or through other holders.
//! - `srp`: Baker's stack resource policy per CPU. A job's preemption level is its task's
//!   fixed-priority rank (FP) or its relative deadline (EDF; shorter is higher). A resource's
//!   ceiling, for the units free now, is the highest level among the tasks that lock more
//!   units of it than are free; a CPU's system ceiling is the highest ceiling among the SRP
//!   resources held by jobs of that CPU. A job may start only when its level is above its
//!   CPU's system ceiling and no job of higher priority on that CPU is still held back;
//!   until then it is held back off the ready queue. So on one CPU a lock always finds its
//!   units free. (A resource shared by jobs of different CPUs can still be taken on the
//!   other CPU; a lock that finds it so waits as under `none`.) SRP assumes jobs that do not
//!   self-suspend, which the loader checks.
//!
//! - A call draws whether it is made (its probability, from the job's own stream of draws)
//!   and then enters the component: the job takes one of the component's stacks
//!   ([`UnitCache`]), runs the entry cost and the component's program, and on its end gives the
//!   stack back and returns to the caller's next action. A call that finds no stack free waits
//!   in the pool's queue (same order as a resource's); under `inherit` with a dependency link to
//!   the holder of highest priority, as `pip` does, under `block` off every CPU. A call is a
//!   zero-time action like a lock, so it yields to a scheduling decision first, and so does
//!   the return.
//!
//! Only completed holds count towards `longest_hold`; a hold still open at the horizon does not.

mod invocations;
mod locks;

use super::stacks::UnitCache;
use super::tmem::{Manager, TmemResult};
use super::waits::{OpenWait, WaitLog, WaitOn, WaitRecord};
use crate::engine::{Context, JobInfo, Subsystem};
use crate::memsim::MemorySubsystem;
use crate::model::program::{Action, ComponentSpec, Protocol, ResourceSpec, StackWait, TaskProgram};
use crate::model::task::TaskSpec;
use crate::program::{ComponentId, ResourceId, Step};
use crate::resources::{ComponentStats, JobCalls};
use crate::result::{JsonFields, Outcome, Section, SimResult};
use crate::rng::SimRng;
use crate::scenario::Scenario;
use crate::sched::{self, JobKey, JobOrder, QueueKey, ReadyJob};
use crate::time::Nanos;
use serde::Serialize;

/// What jobs held back by SRP wait on (no resource has this index).
const SRP_GATE: ResourceId = ResourceId(u32::MAX);

/// What a request waiting for a unit of cache `i` (a component's stacks or cbufs) waits on:
/// `ResourceId(CACHES + i)`.
const CACHES: u32 = 1 << 31;

/// The event tag of a run of TMEM's memory scheduler.
const TMEM_RUN: u64 = 0;

/// What a self-suspended job waits on.
const SUSPENDED: ResourceId = ResourceId(u32::MAX - 1);

/// The event tag that ends job `key`'s self-suspension: `RESUME | key`.
const RESUME: u64 = 1 << 32;

/// One resource's figures over a run.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ResourceStats {
    pub name: String,
    pub protocol: &'static str,
    pub units: u32,
    /// Locks granted.
    pub acquisitions: u64,
    /// Locks that had to wait for units first.
    pub contended: u64,
    /// Longest time from a lock to its grant.
    pub longest_wait: Nanos,
    /// Longest completed time from a grant to its unlock.
    pub longest_hold: Nanos,
    /// Most units held at once.
    pub peak_units_held: u32,
}

/// The subsystem's section of [`SimResult`]: one entry per `[[resource]]` and per
/// `[[component]]`, in file order.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ResourceResult {
    pub resources: Vec<ResourceStats>,
    pub components: Vec<ComponentStats>,
    /// The invocations each ended job made, in order of ending, when job records were asked
    /// for and components are declared; up to the trace limit ([`crate::MAX_TRACE_RECORDS`]
    /// unless the run set a lower one).
    pub job_calls: Vec<JobCalls>,
    /// Ended jobs after `job_calls` was full.
    pub job_calls_left_out: u64,
    /// Every wait of a job for a resource, a stack or SRP's start check, in order of its end
    /// (waits still open at the horizon last, in job order), when job records were asked for;
    /// up to the trace limit.
    pub waits: Vec<WaitRecord>,
    /// Waits that ended after `waits` was full.
    pub waits_left_out: u64,
    /// TMEM's caches and pool, when the scenario declares `[tmem]`.
    pub tmem: Option<TmemResult>,
}

#[derive(Clone, Copy, Debug)]
struct Holder {
    key: JobKey,
    seq: u64,
    units: u32,
    prio: QueueKey,
    since: Nanos,
    /// Granted at an unlock and not yet run with it (`pip` only): a lock of higher priority
    /// may take the units back.
    pending: bool,
}

#[derive(Clone, Copy, Debug)]
struct Waiter {
    key: JobKey,
    units: u32,
    /// (own priority, wait order): the order waiters are granted in.
    order: (u64, u64),
    since: Nanos,
}

#[derive(Debug)]
struct ResourceState {
    free: u32,
    holders: Vec<Holder>,
    /// Sorted by `order`.
    waiters: Vec<Waiter>,
}

/// Jobs waiting on one thing, and its holders with their own priorities (donor mode).
type WaitGroup = (Vec<JobKey>, Vec<(JobKey, QueueKey)>);

/// A job this subsystem took over.
#[derive(Debug)]
struct JobRun {
    seq: u64,
    task: usize,
    index: u64,
    prio: QueueKey,
    /// The next action of the program the job is in (the innermost frame's, else the task's).
    pc: usize,
    /// The components the job is in, innermost last: (component, the caller's next action).
    frames: Vec<(usize, usize)>,
    /// A stack of this component was granted while the job waited: it enters on its next step.
    entering: Option<usize>,
    /// The entry cost of the innermost component is still to run.
    cost_due: bool,
    /// The cache whose unit the job waits for.
    cache_waiting: Option<usize>,
    /// The cbuf each frame's invocation holds, parallel to `frames`.
    frame_cbufs: Vec<Option<u32>>,
    /// A cbuf the job passes into the component it is entering.
    passing: Option<u32>,
    /// CPU time due on entering, beyond the component's entry cost (mapping a passed cbuf).
    extra_cost: Nanos,
    /// What is left of a budgeted job's demand (`None`: the job has no budget).
    budget_left: Option<Nanos>,
    /// The budgeted job's whole demand, which shares are of.
    budget: Nanos,
    /// The end of the job's self-suspension, while it is suspended.
    suspended_until: Option<Nanos>,
    /// The job's call draws, made on its first uncertain call.
    calls_rng: Option<SimRng>,
    /// Invocations per component (kept only when job calls are recorded).
    calls: Vec<u32>,
    /// A task without a program, taken over only to hold it back under SRP: it computes its
    /// demand in one step (SRP scenarios have no self-suspensions).
    plain: bool,
    held: Vec<usize>,
    waiting: Option<usize>,
    /// Past the SRP start check (always, without SRP resources).
    admitted: bool,
    /// Whether this request for the job's next step comes right after a scheduling decision
    /// that let it run (it yielded just before).
    decided: bool,
    /// The donor this subsystem last gave the job (donor mode).
    donor: Option<JobKey>,
    /// What the job waits on now, and since when.
    open_wait: Option<OpenWait>,
    /// In an access step: its steps come from the memory model until it is done.
    accessing: bool,
    /// Waiting for the swap device after a page fault (it holds what it held).
    fault_waiting: bool,
}

/// The shared-resources subsystem (see the module documentation).
pub struct ResourceSubsystem {
    specs: Vec<ResourceSpec>,
    tasks: Vec<TaskSpec>,
    order: Option<JobOrder>,
    /// SRP's scope of each task (a CPU, a leaf server, an MC² level; see
    /// [`sched::srp_scopes`]): the jobs whose start checks share one system ceiling.
    task_cpu: Vec<usize>,
    /// The order each task's held-back jobs start in, within its scope.
    srp_order: Vec<Option<JobOrder>>,
    /// SRP preemption level of each task: smaller is higher.
    levels: Vec<u64>,
    /// Per resource: (most units one lock takes, level) of each task that locks it.
    users: Vec<Vec<(u32, u64)>>,
    has_srp: bool,
    /// Whether the scenario has page-level memory: jobs' states then go to its stall
    /// accounting.
    memory: bool,
    /// Tasks with `access` streams, whose jobs the memory model runs whole (taken over here
    /// only to be held back under SRP).
    stream_tasks: Vec<bool>,
    donor_mode: bool,
    check: bool,
    state: Vec<ResourceState>,
    jobs: Vec<Option<JobRun>>,
    /// Jobs held back by SRP: (priority, key).
    gated: Vec<(QueueKey, JobKey)>,
    waits_begun: u64,
    stats: Vec<ResourceStats>,
    components: Vec<ComponentSpec>,
    /// Every component's stacks (cache `c` for component `c`), then the cbufs of those that
    /// have some.
    caches: Vec<UnitCache>,
    /// The cache of each component's cbufs.
    cbuf_cache: Vec<Option<usize>>,
    /// The component of each cache, and how its requests wait.
    cache_component: Vec<usize>,
    cache_wait: Vec<StackWait>,
    /// TMEM's manager, when the scenario declares `[tmem]`.
    tmem: Option<Manager>,
    /// The engine's id of each component, given at start.
    component_ids: Vec<ComponentId>,
    seed: u64,
    record_calls: bool,
    job_calls: Vec<JobCalls>,
    job_calls_left_out: u64,
    waits: WaitLog,
}

impl ResourceSubsystem {
    /// The subsystem for `scenario`, if any task has a program or any component is declared.
    /// `check` verifies unit and stack counts and holder lists after every change, panicking
    /// on the first violation.
    pub fn new(scenario: &Scenario, check: bool) -> Option<Self> {
        Self::with_memory_scheduler(scenario, check, None)
    }

    /// [`ResourceSubsystem::new`] with `policy` in place of the memory scheduler `[tmem]`
    /// names (for schedulers built in code, such as test probes).
    pub fn with_memory_scheduler(
        scenario: &Scenario,
        check: bool,
        policy: Option<Box<dyn critmem_policy::tmem::MemoryScheduler>>,
    ) -> Option<Self> {
        if scenario.tasks.iter().all(|t| t.program.is_none()) && scenario.components.is_empty() {
            return None;
        }
        let order = sched::job_order(scenario);
        let srp = sched::srp_scopes(scenario);
        let (task_cpu, levels) = (srp.scope, srp.level);
        let users = (0..scenario.resources.len())
            .map(|r| {
                scenario
                    .tasks
                    .iter()
                    .enumerate()
                    .filter_map(|(t, spec)| spec.program.as_ref().map(|p| (p.most_units_reached(r, &scenario.components), levels[t])))
                    .filter(|&(u, _)| u > 0)
                    .collect()
            })
            .collect();
        let layout = super::tmem::CacheLayout::new(scenario, policy);
        let stats = scenario
            .resources
            .iter()
            .map(|r| ResourceStats { name: r.name.clone(), protocol: r.protocol.as_str(), units: r.units, ..ResourceStats::default() })
            .collect();
        Some(ResourceSubsystem {
            state: scenario.resources.iter().map(|r| ResourceState { free: r.units, holders: Vec::new(), waiters: Vec::new() }).collect(),
            specs: scenario.resources.clone(),
            tasks: scenario.tasks.clone(),
            order,
            srp_order: srp.order,
            task_cpu,
            levels,
            users,
            has_srp: scenario.resources.iter().any(|r| r.protocol == Protocol::Srp),
            memory: scenario.memory.is_some(),
            stream_tasks: scenario.tasks.iter().map(|t| t.memory.as_ref().is_some_and(|m| !m.streams.is_empty())).collect(),
            donor_mode: false,
            check,
            jobs: Vec::new(),
            gated: Vec::new(),
            waits_begun: 0,
            stats,
            components: scenario.components.clone(),
            caches: layout.caches,
            cbuf_cache: layout.cbuf_cache,
            cache_component: layout.cache_component,
            cache_wait: layout.cache_wait,
            tmem: layout.manager,
            component_ids: Vec::new(),
            seed: scenario.seed,
            record_calls: false,
            job_calls: Vec::new(),
            job_calls_left_out: 0,
            waits: WaitLog::default(),
        })
    }

    /// Keeps, for every ended job, how many times it invoked each component
    /// ([`ResourceResult::job_calls`], only when components are declared), and every wait
    /// ([`ResourceResult::waits`]).
    pub fn recording_calls(mut self) -> Self {
        self.record_calls = !self.components.is_empty();
        self.waits.on = true;
        self
    }

    /// The job begins to wait on `on` now.
    fn begin_wait(&mut self, key: JobKey, on: WaitOn, now: Nanos) {
        self.run(key).open_wait = Some(OpenWait { on, since: now });
    }

    /// The job's wait, if any, ends now (a grant).
    fn end_wait(&mut self, key: JobKey, now: Nanos) {
        let run = self.jobs[key as usize].as_mut().expect("a job this subsystem took over");
        if let Some(open) = run.open_wait.take() {
            let (task, index) = (run.task, run.index);
            self.close_wait(task, index, open, now);
        }
    }

    fn close_wait(&mut self, task: usize, index: u64, open: OpenWait, end: Nanos) {
        let (specs, components) = (&self.specs, &self.components);
        self.waits.close(task, index, open, end, |on| match on {
            WaitOn::Resource(r) | WaitOn::Gate(Some(r)) => specs[r].name.clone(),
            WaitOn::Stack(c) => format!("stack:{}", components[c].name),
            WaitOn::Cbuf(c) => format!("cbuf:{}", components[c].name),
            WaitOn::Suspended => "suspend".to_string(),
            WaitOn::Gate(None) => "srp".to_string(),
        });
    }

    /// `pip` resources through priority donors instead of dependency links: the classic
    /// inheritance, for comparison.
    pub fn with_donor_inheritance(mut self) -> Self {
        self.donor_mode = true;
        self
    }

    fn prio(&self, job: &JobInfo) -> QueueKey {
        match &self.order {
            Some(o) => o.key(&ReadyJob {
                key: job.key,
                task: job.task,
                seq: job.seq,
                release: job.release,
                abs_deadline: job.abs_deadline,
                donor: None,
            }),
            None => QueueKey { primary: 0, seq: job.seq },
        }
    }

    /// The job's priority among the held-back jobs of its SRP scope.
    fn srp_prio(&self, job: &JobInfo) -> QueueKey {
        let ready =
            ReadyJob { key: job.key, task: job.task, seq: job.seq, release: job.release, abs_deadline: job.abs_deadline, donor: None };
        match &self.srp_order[job.task] {
            Some(o) => o.key(&ready),
            None => QueueKey { primary: 0, seq: job.seq },
        }
    }

    fn run(&mut self, key: JobKey) -> &mut JobRun {
        self.jobs[key as usize].as_mut().expect("a job this subsystem took over")
    }

    fn program(&self, task: usize) -> Option<&TaskProgram> {
        self.tasks[task].program.as_ref()
    }

    /// The action at the job's program counter in the program it is in, `None` at its end.
    fn action_at(&self, key: JobKey) -> Option<Action> {
        let run = self.jobs[key as usize].as_ref().expect("a job this subsystem took over");
        let program = match run.frames.last() {
            Some(&(c, _)) => Some(&self.components[c].program),
            None => self.program(run.task),
        };
        program.and_then(|p| p.actions.get(run.pc)).copied()
    }

    /// Unit counts add up and no holder list names a job twice; no component has more
    /// invocations than stacks, and a job holds a stack exactly of the components it is in.
    fn check_invariants(&self) {
        for (id, cache) in self.caches.iter().enumerate() {
            cache.check(&self.components[self.cache_component[id]].name);
        }
        if let Some(m) = &self.tmem {
            m.check(&self.caches);
        }
        for (k, run) in self.jobs.iter().enumerate().filter_map(|(k, r)| r.as_ref().map(|r| (k as JobKey, r))) {
            for (c, cache) in self.caches.iter().enumerate().take(self.components.len()) {
                let holds = cache.holders().any(|h| h.key == k);
                let inside = run.frames.iter().any(|&(f, _)| f == c);
                assert_eq!(holds, inside, "job {} and component {}: a stack held outside an invocation", run.seq, self.components[c].name);
            }
            for (f, &(c, _)) in run.frames.iter().enumerate() {
                if let Some(id) = self.cbuf_cache[c] {
                    let holds = self.caches[id].holders_unit(k);
                    assert_eq!(
                        holds, run.frame_cbufs[f],
                        "job {} and component {}: a cbuf held outside its invocation",
                        run.seq, self.components[c].name
                    );
                }
            }
        }
        for (r, st) in self.state.iter().enumerate() {
            let held: u32 = st.holders.iter().map(|h| h.units).sum();
            assert_eq!(held + st.free, self.specs[r].units, "resource {}: units held plus free differ from its units", self.specs[r].name);
            for (i, h) in st.holders.iter().enumerate() {
                assert!(st.holders[i + 1..].iter().all(|o| o.key != h.key), "resource {}: a job holds it twice", self.specs[r].name);
            }
        }
    }

    /// A decision point before the next action: the job goes on once it runs after it.
    fn yield_now(&mut self, key: JobKey) -> Step {
        self.run(key).decided = true;
        Step::Yield
    }
}

impl Subsystem for ResourceSubsystem {
    fn name(&self) -> &'static str {
        "resources"
    }

    fn on_release(&mut self, _cx: &mut Context<'_>, job: &JobInfo) -> bool {
        let has_program = self.tasks[job.task].program.is_some();
        if !has_program && !self.has_srp {
            return false;
        }
        let k = job.key as usize;
        if k >= self.jobs.len() {
            self.jobs.resize_with(k + 1, || None);
        }
        let prio = self.prio(job);
        let calls = if self.record_calls && has_program { vec![0; self.components.len()] } else { Vec::new() };
        let budgeted = self.tasks[job.task].program.as_ref().is_some_and(|p| p.budgeted);
        self.jobs[k] = Some(JobRun {
            seq: job.seq,
            task: job.task,
            index: job.index,
            prio,
            pc: 0,
            frames: Vec::new(),
            entering: None,
            cost_due: false,
            cache_waiting: None,
            frame_cbufs: Vec::new(),
            passing: None,
            extra_cost: Nanos::ZERO,
            budget_left: budgeted.then_some(job.demand),
            budget: job.demand,
            suspended_until: None,
            calls_rng: None,
            calls,
            plain: !has_program,
            held: Vec::new(),
            waiting: None,
            admitted: !self.has_srp,
            decided: false,
            donor: None,
            open_wait: None,
            accessing: false,
            fault_waiting: false,
        });
        true
    }

    fn next_step(&mut self, cx: &mut Context<'_>, job: &JobInfo) -> Step {
        let step = self.step(cx, job);
        if self.memory && !self.run(job.key).accessing {
            // What the job does outside its access steps: running, or waiting on something
            // other than memory (a lock, a stack, a sleep).
            let runnable = match step {
                Step::Compute(_) => Some(true),
                Step::Suspend(_) | Step::Block(_) => Some(false),
                _ => None,
            };
            let now = cx.now();
            if let (Some(runnable), Some(memory)) = (runnable, cx.peer_mut::<MemorySubsystem>()) {
                memory.task_state(job.task, now, runnable);
            }
        }
        step
    }

    fn on_end(&mut self, cx: &mut Context<'_>, job: &JobInfo, outcome: Outcome, _task_idle: bool) {
        self.end(cx, job, outcome);
    }

    fn set_trace_limit(&mut self, limit: usize) {
        self.waits.limit = limit;
    }

    fn start(&mut self, cx: &mut Context<'_>) {
        self.begin(cx);
    }

    fn on_event(&mut self, cx: &mut Context<'_>, tag: u64) {
        self.event(cx, tag);
    }

    fn finish(self: Box<Self>, horizon: Nanos, result: &mut SimResult) {
        self.finish_run(horizon, result);
    }
}

impl ResourceSubsystem {
    /// The next step of a job this subsystem took over.
    fn step(&mut self, cx: &mut Context<'_>, job: &JobInfo) -> Step {
        let key = job.key;
        if std::mem::take(&mut self.run(key).fault_waiting) {
            // Back from the device: waiters on its units may pick it to run in their place.
            for id in self.caches_held_by(key) {
                self.relink_cache(cx, id);
            }
        }
        let run = self.run(key);
        if !run.admitted {
            let (task, prio) = (run.task, self.srp_prio(job));
            if !self.may_start(task, prio) {
                let cause = self.gate_cause(task);
                self.begin_wait(key, WaitOn::Gate(cause), cx.now());
                self.gated.push((prio, key));
                return Step::Block(SRP_GATE);
            }
            self.run(key).admitted = true;
        }
        let streams = self.stream_tasks[job.task];
        let run = self.run(key);
        if run.plain {
            if streams {
                // Its whole job is the memory model's references, held back here only by SRP.
                run.accessing = true;
                let now = cx.now();
                return cx.peer_mut::<MemorySubsystem>().expect("a task with access streams has memory").access_step(job, now);
            }
            run.pc += 1;
            return if run.pc == 1 && job.demand > Nanos::ZERO { Step::Compute(job.demand) } else { Step::Done };
        }
        // Locks, calls and unlocks take no time but happen while the job runs: before a lock or
        // a call the job yields to a scheduling decision (a job released at this instant may
        // preempt it), and again after waking a job that may.
        let mut running = std::mem::take(&mut self.run(key).decided);
        loop {
            let run = self.run(key);
            if run.accessing {
                let now = cx.now();
                let step = cx.peer_mut::<MemorySubsystem>().expect("access steps need memory").access_step(job, now);
                match step {
                    Step::Done => self.run(key).accessing = false,
                    Step::Suspend(_) => {
                        // A fault: the job waits for the device holding what it holds, so
                        // waiters on its units must not pick it to run in their place.
                        self.run(key).fault_waiting = true;
                        for id in self.caches_held_by(key) {
                            self.relink_cache(cx, id);
                        }
                        return step;
                    }
                    _ => return step,
                }
                continue;
            }
            let run = self.run(key);
            if let Some(c) = run.entering.take() {
                run.decided = running;
                return Step::Invoke(self.component_ids[c]);
            }
            if std::mem::take(&mut run.cost_due) {
                let &(c, _) = run.frames.last().expect("a job that entered is in a component");
                let cost = self.components[c].invocation_cost + std::mem::take(&mut self.run(key).extra_cost);
                let cost = self.spend(key, cost);
                if cost > Nanos::ZERO {
                    return Step::Compute(cost);
                }
            }
            let Some(action) = self.action_at(key) else {
                let run = self.run(key);
                let Some(&(c, back)) = run.frames.last() else { return Step::Done };
                if !running {
                    return self.yield_now(key);
                }
                run.frames.pop();
                let cbuf = run.frame_cbufs.pop().flatten();
                run.pc = back;
                if cbuf.is_some() {
                    let id = self.cbuf_cache[c].expect("a cbuf of a component with cbufs");
                    if self.put_unit(cx, key, id) {
                        running = false;
                    }
                }
                if self.put_unit(cx, key, c) {
                    running = false;
                }
                if self.check {
                    self.check_invariants();
                }
                self.run(key).decided = running;
                return Step::Return;
            };
            // An unlock is the end of the compute before it, so it needs no decision first:
            // a job ending with one completes when its compute does.
            if !running && matches!(action, Action::Lock { .. } | Action::Call { .. } | Action::CallOneOf { .. } | Action::CbufAlloc) {
                return self.yield_now(key);
            }
            match action {
                Action::Compute(c) => {
                    self.run(key).pc += 1;
                    let c = self.spend(key, c);
                    if c > Nanos::ZERO {
                        return Step::Compute(c);
                    }
                }
                Action::ComputeShare(ppm) => {
                    let run = self.run(key);
                    run.pc += 1;
                    let share = Nanos((u128::from(run.budget.0) * u128::from(ppm) / 1_000_000) as u64);
                    let c = self.spend(key, share);
                    if c > Nanos::ZERO {
                        return Step::Compute(c);
                    }
                }
                Action::ComputeRest => {
                    let run = self.run(key);
                    run.pc += 1;
                    let rest = run.budget_left.unwrap_or(Nanos::ZERO);
                    let c = self.spend(key, rest);
                    if c > Nanos::ZERO {
                        return Step::Compute(c);
                    }
                }
                Action::Lock { resource, units } => {
                    if self.take_up_pending(key, resource) {
                        self.run(key).pc += 1;
                    } else if self.try_take(cx.now(), key, resource, units) || self.try_take_from_pending(cx, key, resource, units) {
                        self.run(key).pc += 1;
                        // A new holder may change whom other waiters depend on.
                        if !self.state[resource].waiters.is_empty() {
                            self.relink(cx, resource);
                        }
                    } else {
                        return self.wait(cx, key, resource, units);
                    }
                }
                Action::Unlock { resource } => {
                    self.give_back(cx.now(), key, resource);
                    self.run(key).pc += 1;
                    if self.after_release(cx, resource) {
                        running = false;
                    }
                }
                Action::Call { component, probability } => {
                    self.run(key).pc += 1;
                    if self.draw(key, probability) && !self.spent(key) {
                        return self.call(cx, key, component, running);
                    }
                }
                Action::CallOneOf { set, pass_cbuf } => {
                    self.run(key).pc += 1;
                    let component = self.choose(key, set);
                    if !self.spent(key) {
                        if pass_cbuf {
                            let run = self.run(key);
                            run.passing = run.frame_cbufs.last().copied().flatten();
                        }
                        return self.call(cx, key, component, running);
                    }
                }
                Action::CbufAlloc => {
                    let &(c, _) = self.run(key).frames.last().expect("cbufs are taken inside an invocation");
                    if self.spent(key) {
                        // A job whose budget is spent unwinds without taking more memory.
                        self.run(key).pc += 1;
                    } else {
                        let id = self.cbuf_cache[c].expect("the loader checks cbufs are declared");
                        match self.try_get(key, id, cx.now()) {
                            Some(unit) => {
                                let run = self.run(key);
                                *run.frame_cbufs.last_mut().expect("in an invocation") = Some(unit);
                                run.pc += 1;
                            }
                            None => return self.wait_unit(cx, key, id),
                        }
                    }
                }
                Action::Suspend(d) => {
                    let now = cx.now();
                    let run = self.run(key);
                    run.pc += 1;
                    run.suspended_until = Some(now + d);
                    self.begin_wait(key, WaitOn::Suspended, now);
                    cx.schedule(now + d, RESUME | u64::from(key));
                    // Waiters linked to it must not pick it to run in their place.
                    for id in self.caches_held_by(key) {
                        self.relink_cache(cx, id);
                    }
                    return Step::Block(SUSPENDED);
                }
                Action::Access { step, compute } => {
                    self.run(key).pc += 1;
                    // A budgeted job whose budget is spent unwinds without touching memory.
                    if !self.spent(key) {
                        let compute = self.spend(key, compute);
                        let component = self.run(key).frames.last().map(|&(c, _)| c);
                        cx.peer_mut::<MemorySubsystem>().expect("access steps need memory").begin_access(job, component, step, compute);
                        self.run(key).accessing = true;
                    }
                }
                Action::CbufFree => {
                    let run = self.run(key);
                    run.pc += 1;
                    let &(c, _) = run.frames.last().expect("cbufs are freed inside an invocation");
                    if run.frame_cbufs.last_mut().expect("in an invocation").take().is_some() {
                        let id = self.cbuf_cache[c].expect("a cbuf of a component with cbufs");
                        if self.put_unit(cx, key, id) {
                            running = false;
                        }
                    }
                }
            }
            if self.check {
                self.check_invariants();
            }
        }
    }

    fn end(&mut self, cx: &mut Context<'_>, job: &JobInfo, outcome: Outcome) {
        let Some(run) = self.jobs.get_mut(job.key as usize).and_then(Option::take) else { return };
        self.gated.retain(|&(_, k)| k != job.key);
        if let Some(r) = run.waiting {
            self.state[r].waiters.retain(|w| w.key != job.key);
        }
        if let Some(id) = run.cache_waiting {
            self.caches[id].leave_queue(job.key);
        }
        if outcome == Outcome::Completed {
            if let Some(m) = self.tmem.as_mut() {
                m.job_completed(run.task, cx.now(), job.abs_deadline);
            }
        }
        // A job ended while it waited (aborted): its wait ends with it.
        if let Some(open) = run.open_wait {
            self.close_wait(run.task, run.index, open, cx.now());
        }
        if self.record_calls && !run.calls.is_empty() {
            if self.job_calls.len() < self.waits.limit {
                self.job_calls.push(JobCalls { task: run.task as u32, index: run.index, invocations: run.calls.clone() });
            } else {
                self.job_calls_left_out += 1;
            }
        }
        let frames = run.frames.clone();
        let cbufs = run.frame_cbufs.clone();
        // An aborted holder gives its units back, so no one waits on it forever.
        let held = run.held.clone();
        self.jobs[job.key as usize] = Some(run);
        for &r in held.iter().rev() {
            self.give_back(cx.now(), job.key, r);
        }
        self.jobs[job.key as usize] = None;
        for r in held {
            self.grant_waiters(cx, r);
        }
        // An aborted caller gives back the cbufs and stacks of the components it is in,
        // innermost first.
        for (&(c, _), cbuf) in frames.iter().zip(&cbufs).rev() {
            if cbuf.is_some() {
                self.put_unit(cx, job.key, self.cbuf_cache[c].expect("a cbuf of a component with cbufs"));
            }
            self.put_unit(cx, job.key, c);
        }
        if self.donor_mode {
            self.update_donors(cx);
        }
        if self.has_srp {
            self.release_gated(cx);
        }
        if self.check {
            self.check_invariants();
        }
    }

    fn begin(&mut self, cx: &mut Context<'_>) {
        self.component_ids = self.components.iter().map(|_| cx.add_component()).collect();
        if let Some(m) = &self.tmem {
            match m.spec.first_run {
                Nanos::ZERO => self.run_memory_scheduler(cx),
                first => cx.schedule(first, TMEM_RUN),
            }
        }
    }

    fn event(&mut self, cx: &mut Context<'_>, tag: u64) {
        if tag == TMEM_RUN {
            self.run_memory_scheduler(cx);
            return;
        }
        let key = (tag & !RESUME) as JobKey;
        let now = cx.now();
        // A job that ended while suspended (or a later job under its key) ignores the event.
        let Some(run) = self.jobs.get_mut(key as usize).and_then(Option::as_mut) else { return };
        if run.suspended_until != Some(now) {
            return;
        }
        run.suspended_until = None;
        self.end_wait(key, now);
        for id in self.caches_held_by(key) {
            self.relink_cache(cx, id);
        }
        cx.wake(key);
    }

    fn finish_run(mut self: Box<Self>, horizon: Nanos, result: &mut SimResult) {
        // Waits still open at the horizon end there.
        let open: Vec<(usize, u64, OpenWait)> =
            self.jobs.iter().flatten().filter_map(|run| run.open_wait.map(|w| (run.task, run.index, w))).collect();
        for (task, index, w) in open {
            self.close_wait(task, index, w, horizon);
        }
        if let Some(t) = result.traces.as_mut() {
            t.waits = Some(self.waits.waits.len() as u64);
            t.waits_left_out = Some(self.waits.left_out);
        }
        result.set_section(ResourceResult {
            resources: self.stats,
            components: self
                .components
                .iter()
                .zip(&self.caches)
                .zip(&self.cache_wait)
                .map(|((c, cache), wait)| ComponentStats {
                    name: c.name.clone(),
                    stacks: c.stacks,
                    stack_wait: wait.as_str(),
                    invocations: cache.counters.gets,
                    peak_concurrent_invocations: cache.counters.peak_held,
                    stack_waits: cache.counters.waits,
                    longest_stack_wait: cache.counters.longest_wait,
                    total_stack_wait: cache.counters.total_wait,
                })
                .collect(),
            tmem: self.tmem.map(|m| m.finish(&self.caches, horizon)),
            job_calls: self.job_calls,
            job_calls_left_out: self.job_calls_left_out,
            waits: self.waits.waits,
            waits_left_out: self.waits.left_out,
        });
    }
}

/// The resources' place in the summary: after the servers. Components and TMEM's pool are
/// theirs; resources themselves appear only in the traces and tables.
impl Section for ResourceResult {
    const ORDER: u32 = 400;

    fn write_json(&self, _run: &SimResult, out: &mut JsonFields) {
        let components: Vec<JsonComponent<'_>> = self
            .components
            .iter()
            .map(|c| JsonComponent {
                name: &c.name,
                stacks: c.stacks,
                stack_wait: c.stack_wait,
                invocations: c.invocations,
                peak_concurrent_invocations: c.peak_concurrent_invocations,
                stack_waits: c.stack_waits,
                longest_stack_wait_ms: c.longest_stack_wait.as_ms_f64(),
                total_stack_wait_ms: c.total_stack_wait.as_ms_f64(),
            })
            .collect();
        if !components.is_empty() {
            out.field("components", &components);
        }
        if let Some(tmem) = &self.tmem {
            out.field("tmem", tmem);
        }
    }
}

impl SimResult {
    /// Per shared resource and component, when some task has a program or a component is
    /// declared.
    pub fn resources(&self) -> Option<&ResourceResult> {
        self.section()
    }
}

/// One `[[component]]` over the run (`null` stacks: one per invocation).
#[derive(Serialize)]
struct JsonComponent<'a> {
    name: &'a str,
    stacks: Option<u32>,
    stack_wait: &'static str,
    invocations: u64,
    peak_concurrent_invocations: u32,
    stack_waits: u64,
    longest_stack_wait_ms: f64,
    total_stack_wait_ms: f64,
}
