//! The deterministic discrete-event simulation of jobs on CPUs.
//!
//! A job's execution is a sequence of steps: compute stretches, self-suspensions, waits on a
//! resource, invocations of components. The engine only ever schedules an event for the next
//! point where something changes (a job reaches the end of a step, a release, a resume, an
//! abort deadline, a time-triggered scheduler decision, a subsystem's own event). Superseded
//! events are left in the queue and skipped when they surface, recognised by generation
//! numbers. Models beyond CPU scheduling plug in as [`Subsystem`]s.

mod activation;
mod bandwidth;
mod links;
mod root;
mod subsystem;

pub use subsystem::{Context, JobInfo, Subsystem, SubsystemId};

use crate::event::EventQueue;
use crate::model::task::Arrival;
use crate::program::{ComponentId, ProgramState, Step};
use crate::result::{ExecSegment, JobRecord, Outcome, SimResult, TaskStats, TaskSummary};
use crate::rng::{sub_rng, SimRng};
use crate::scenario::Scenario;
use crate::sched::{self, JobKey, PriorityInputs, Scheduler};
use crate::time::Nanos;
use rand::Rng;
use std::collections::VecDeque;
use subsystem::Command;

/// Most job records and most segments one run keeps: enough for any trace a person reads, and
/// a run over a long horizon cannot exhaust the host with them (per-task totals count every job).
pub const MAX_TRACE_RECORDS: usize = 1 << 21;

/// Events between two calls of a run's progress callback: rare enough to cost nothing, often
/// enough (a few times a second) for a progress bar.
pub const PROGRESS_EVENTS: u64 = 1 << 16;

/// The first `limit` entries of a trace, and how many more there were.
struct Capped<T> {
    kept: Vec<T>,
    left_out: u64,
    limit: usize,
}

impl<T> Capped<T> {
    fn new() -> Self {
        Capped { kept: Vec::new(), left_out: 0, limit: MAX_TRACE_RECORDS }
    }
    fn push(&mut self, item: T) {
        if self.kept.len() < self.limit {
            self.kept.push(item);
        } else {
            self.left_out += 1;
        }
    }
}

/// What to keep beyond per-task totals, and how much to check.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SimOptions {
    /// Keep a [`JobRecord`] for every job.
    pub record_jobs: bool,
    /// Keep every execution segment (for Gantt charts).
    pub record_segments: bool,
    /// Check the engine's invariants after every scheduling decision, and let subsystems check
    /// theirs as they go, panicking on the first violation. Always on in debug builds; tests
    /// turn it on in release.
    pub check_invariants: bool,
}

impl SimOptions {
    /// Whether invariants are checked in this build with these options.
    pub fn checks_invariants(&self) -> bool {
        self.check_invariants || cfg!(debug_assertions)
    }
}

#[derive(Clone, Copy, Debug)]
enum Event {
    Release {
        task: u32,
    },
    /// The job on `cpu` reaches its next stop (suspension point or completion).
    CpuStop {
        cpu: u32,
        gen: u64,
    },
    Resume {
        key: JobKey,
        seq: u64,
    },
    AbortAt {
        key: JobKey,
        seq: u64,
    },
    SchedulerWake,
    /// A look at a CPU group's bandwidth budget (see [`bandwidth`]).
    CpuBudget {
        group: u32,
        gen: u64,
    },
    /// An event a subsystem scheduled for itself.
    Subsystem {
        id: u32,
        tag: u64,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum JobState {
    /// Released, waiting behind an earlier unfinished job of its own task.
    Queued,
    /// Eligible; the scheduler holds it (it may be running).
    Ready,
    Suspended,
    /// Off every CPU until a subsystem wakes it ([`Step::Block`]).
    Blocked,
    /// Waiting like `Blocked`, but with a dependency link ([`Context::depend`]): it stays in
    /// the scheduler, and when chosen the job at the end of its links runs in its place.
    Linked,
    /// Eligible, but its CPU group has spent its bandwidth for this period: off its
    /// scheduler until the group may run again.
    Throttled,
}

#[derive(Clone, Debug)]
struct Job {
    task: u32,
    index: u64,
    seq: u64,
    release: Nanos,
    abs_deadline: Nanos,
    demand: Nanos,
    /// Progress through the task's program; `executed` excludes the current dispatch.
    program: ProgramState,
    /// What only jobs of subsystems, components or inheritance carry; boxed so that the plain
    /// job, moved and copied on every scheduling step, stays small.
    ext: Option<Box<JobExt>>,
    /// Compute left in the current step, as of `dispatched_at` when running.
    step_left: Nanos,
    state: JobState,
    start: Option<Nanos>,
    cpu: Option<u32>,
    last_cpu: Option<u32>,
    /// When progress was last accounted while running.
    dispatched_at: Nanos,
    /// When the current uninterrupted stretch on a CPU began (for the segment trace).
    segment_start: Nanos,
}

/// The parts of a job most jobs never use.
#[derive(Clone, Debug, Default)]
struct JobExt {
    /// The subsystem that took over the job's steps, if any.
    stepper: Option<SubsystemId>,
    /// Components the job invoked and has not returned from, innermost last.
    invoked: Vec<ComponentId>,
    /// The job whose priority this one inherits, if higher than its own.
    donor: Option<PriorityInputs>,
    /// The job (key, seq) that runs in this one's place while it waits ([`Context::depend`]).
    link: Option<(JobKey, u64)>,
    /// Released by [`Context::activate`] and not yet eligible: its scheduler hears of it as an
    /// activation ([`Scheduler::activate`]) the first time it becomes eligible.
    activation: bool,
}

impl Job {
    /// Whether a subsystem or a component decides this job's next step.
    #[inline]
    fn stepped_elsewhere(&self) -> bool {
        self.ext.as_ref().is_some_and(|e| e.stepper.is_some() || !e.invoked.is_empty())
    }

    fn ext_mut(&mut self) -> &mut JobExt {
        self.ext.get_or_insert_with(Box::default)
    }

    fn priority_inputs(&self) -> PriorityInputs {
        PriorityInputs { task: self.task as usize, abs_deadline: self.abs_deadline }
    }

    fn info(&self, key: JobKey) -> JobInfo {
        JobInfo {
            key,
            task: self.task as usize,
            seq: self.seq,
            index: self.index,
            release: self.release,
            abs_deadline: self.abs_deadline,
            demand: self.demand,
            component: self.ext.as_ref().and_then(|e| e.invoked.last().copied()),
            start: self.start,
        }
    }

    /// The trace record of this job as it ends with `outcome`.
    fn record(&self, outcome: Outcome, completion: Option<Nanos>) -> JobRecord {
        JobRecord {
            task: self.task,
            index: self.index,
            release: self.release,
            abs_deadline: self.abs_deadline,
            demand: self.demand,
            executed: self.program.executed,
            start: self.start,
            completion,
            outcome,
            last_cpu: self.last_cpu,
        }
    }

    /// Credits the time run since the last accounting to the current compute step.
    #[inline]
    fn account(&mut self, now: Nanos) {
        let ran = now - self.dispatched_at;
        self.program.executed += ran;
        self.step_left -= ran;
        self.dispatched_at = now;
    }
}

struct TaskState {
    rng: SimRng,
    released: u64,
    /// A subsystem releases its jobs ([`Context::take_releases`]); its own arrivals are skipped.
    released_elsewhere: bool,
    /// Unfinished jobs in release order; only the head may be eligible.
    pending: VecDeque<JobKey>,
}

#[derive(Clone, Copy, Default)]
struct Cpu {
    running: Option<JobKey>,
    /// Bumped on every dispatch or preemption so older `CpuStop` events are recognised.
    gen: u64,
}

/// A running simulation. Most callers want [`simulate`].
pub struct Simulation<'a> {
    scenario: &'a Scenario,
    opts: SimOptions,
    seed: u64,
    now: Nanos,
    queue: EventQueue<Event>,
    sched: root::RootScheduler,
    jobs: Vec<Option<Job>>,
    free_keys: Vec<JobKey>,
    next_seq: u64,
    tasks: Vec<TaskState>,
    cpus: Vec<Cpu>,
    current: Vec<Option<JobKey>>,
    assign: Vec<Option<JobKey>>,
    wake_at: Option<Nanos>,
    /// A subsystem's wake-up is under way: a job it makes eligible goes to
    /// [`Scheduler::wake`].
    waking: bool,
    stats: Vec<TaskStats>,
    records: Capped<JobRecord>,
    segments: Capped<ExecSegment>,
    events: u64,
    /// Each is taken out of its slot while one of its hooks runs.
    subsystems: Vec<Option<Box<dyn Subsystem>>>,
    /// The owner of each component.
    components: Vec<SubsystemId>,
    /// A spare buffer for hooks' commands (kept to spare an allocation per hook call).
    spare_commands: Vec<Command>,
    /// Jobs with a dependency link set; while there are none, the job each CPU runs is the
    /// one the scheduler chose, and `chosen` is not kept.
    links: usize,
    /// What the scheduler chose for each CPU (key, seq) while links exist: the job running
    /// there may be the end of the chosen one's links.
    chosen: Vec<Option<(JobKey, u64)>>,
    /// Jobs that gave [`Step::Yield`] on a CPU at this instant: (cpu, the CPU's generation
    /// then). Each goes on once the scheduler has decided, unless it lost its CPU.
    yielded: Vec<(u32, u64)>,
    /// What the scheduler decides from changed since its last decision: a job entered or left
    /// it, left a CPU, or a link was set or cleared.
    undecided: bool,
    /// Tasks a subsystem grouped for CPU accounting and bandwidth limits, if any did.
    cpu_groups: Option<Box<bandwidth::CpuGroups>>,
}

impl<'a> Simulation<'a> {
    /// A simulation of `scenario`'s tasks with `seed`, and `subsystems` plugged in (their hooks
    /// run in this order).
    pub fn new(scenario: &'a Scenario, seed: u64, opts: SimOptions, subsystems: Vec<Box<dyn Subsystem>>) -> Self {
        let tasks = (0..scenario.tasks.len())
            .map(|i| TaskState { rng: sub_rng(seed, "task", i as u64), released: 0, released_elsewhere: false, pending: VecDeque::new() })
            .collect();
        let mut queue = EventQueue::default();
        for (i, t) in scenario.tasks.iter().enumerate() {
            queue.push(t.offset, Event::Release { task: i as u32 });
        }
        let m = scenario.cpus;
        let mut sim = Simulation {
            scenario,
            opts,
            seed,
            now: Nanos::ZERO,
            queue,
            sched: root::RootScheduler::of(scenario),
            jobs: Vec::new(),
            free_keys: Vec::new(),
            next_seq: 0,
            tasks,
            cpus: vec![Cpu::default(); m],
            current: vec![None; m],
            assign: vec![None; m],
            waking: false,
            wake_at: None,
            stats: vec![TaskStats::default(); scenario.tasks.len()],
            records: Capped::new(),
            segments: Capped::new(),
            events: 0,
            subsystems: subsystems.into_iter().map(Some).collect(),
            components: Vec::new(),
            spare_commands: Vec::new(),
            links: 0,
            chosen: vec![None; m],
            yielded: Vec::new(),
            undecided: true,
            cpu_groups: None,
        };
        for id in 0..sim.subsystems.len() {
            sim.call(id, |s, cx| s.start(cx));
        }
        sim
    }

    /// Keeps at most `limit` entries of each trace (jobs, segments, and the subsystems'
    /// traces) instead of [`MAX_TRACE_RECORDS`]; a larger limit is taken as that.
    pub fn with_trace_limit(mut self, limit: usize) -> Self {
        let limit = limit.min(MAX_TRACE_RECORDS);
        self.records.limit = limit;
        self.segments.limit = limit;
        for s in self.subsystems.iter_mut().flatten() {
            s.set_trace_limit(limit);
        }
        self
    }

    /// Runs hook `f` of subsystem `id`, then applies what it asked of the engine, in order.
    #[inline]
    fn call<R>(&mut self, id: SubsystemId, f: impl FnOnce(&mut dyn Subsystem, &mut Context<'_>) -> R) -> R {
        let mut me = self.subsystems[id].take().expect("a subsystem's hooks do not nest");
        let mut commands = std::mem::take(&mut self.spare_commands);
        let out = {
            let mut cx = Context {
                now: self.now,
                commands: &mut commands,
                peers: &mut self.subsystems,
                components: &mut self.components,
                me: id,
                cpu_groups: self.cpu_groups.as_deref(),
            };
            f(me.as_mut(), &mut cx)
        };
        self.subsystems[id] = Some(me);
        if !commands.is_empty() {
            for c in commands.drain(..) {
                self.apply(id, c);
            }
        }
        if self.spare_commands.capacity() == 0 {
            self.spare_commands = commands;
        }
        out
    }

    /// Runs hook `f` of every subsystem, in order.
    #[inline]
    fn call_all(&mut self, mut f: impl FnMut(&mut dyn Subsystem, &mut Context<'_>)) {
        for id in 0..self.subsystems.len() {
            self.call(id, &mut f);
        }
    }

    fn apply(&mut self, from: SubsystemId, command: Command) {
        match command {
            Command::Schedule { at, tag } => {
                self.queue.push(at, Event::Subsystem { id: from as u32, tag });
            }
            Command::DropJob(key) => {
                if self.is_live_key(key) {
                    let ti = self.job(key).task as usize;
                    self.stats[ti].dropped += 1;
                    self.abort(key);
                }
            }
            Command::Wake(key) => {
                if self.is_live_key(key) && matches!(self.job(key).state, JobState::Blocked | JobState::Linked) {
                    self.clear_link(key);
                    self.waking = true;
                    self.advance(key);
                    self.waking = false;
                }
            }
            Command::Depend { job, holder } => self.set_link(job, holder),
            Command::JoinCpuGroup { task, group } => self.join_cpu_group(task, group),
            Command::SetCpuLimit { group, limit } => self.set_cpu_limit(group, limit),
            Command::TakeReleases(task) => self.tasks[task].released_elsewhere = true,
            Command::Activate(task) => self.activate(task),
            Command::Inherit { job, donor } => {
                if !self.is_live_key(job) {
                    return;
                }
                let donor = donor.filter(|&d| self.is_live_key(d)).map(|d| self.job(d).priority_inputs());
                let j = self.job_mut(job);
                if donor.is_some() || j.ext.is_some() {
                    j.ext_mut().donor = donor;
                }
                if matches!(j.state, JobState::Ready | JobState::Linked) {
                    // A new key means a new place in the ready queue.
                    self.sched_mut().remove(job);
                    self.make_ready(job);
                }
            }
        }
    }

    /// Runs to the horizon and returns the results.
    pub fn run(self) -> SimResult {
        self.run_with_progress(|_| true).expect("a run nobody stops reaches its horizon")
    }

    /// [`Simulation::run`], calling `progress` with the simulated time every
    /// [`PROGRESS_EVENTS`] events; when it returns false the run stops there and gives `None`.
    pub fn run_with_progress(mut self, mut progress: impl FnMut(Nanos) -> bool) -> Option<SimResult> {
        let horizon = self.scenario.horizon;
        self.reschedule();
        while let Some(t) = self.queue.peek_time() {
            if t >= horizon {
                break;
            }
            let (t, ev) = self.queue.pop().expect("peeked");
            self.now = t;
            if self.handle(ev) {
                self.events += 1;
                if self.events.is_multiple_of(PROGRESS_EVENTS) && !progress(t) {
                    return None;
                }
            }
            // Decide only once every event of this instant has been applied, and not where the
            // decision could not differ: nothing it depends on changed since the last one.
            if self.queue.peek_time() != Some(t) && (self.undecided || !self.decides_on_jobs_alone()) {
                self.reschedule();
            }
        }
        Some(self.finish())
    }

    /// Applies one event; returns false if it was stale.
    fn handle(&mut self, ev: Event) -> bool {
        match ev {
            Event::Release { task } => {
                if self.tasks[task as usize].released_elsewhere {
                    return false;
                }
                self.release(task as usize);
            }
            Event::CpuStop { cpu, gen } => {
                let c = self.cpus[cpu as usize];
                if c.gen != gen {
                    return false;
                }
                let key = c.running.expect("a current CpuStop has a running job");
                self.reach_stop(key, cpu as usize);
            }
            Event::Resume { key, seq } => {
                if !self.is_live(key, seq) {
                    return false;
                }
                debug_assert_eq!(self.job(key).state, JobState::Suspended);
                self.advance(key);
            }
            Event::AbortAt { key, seq } => {
                if !self.is_live(key, seq) {
                    return false;
                }
                self.abort(key);
            }
            Event::SchedulerWake => {
                self.wake_at = None;
            }
            Event::CpuBudget { group, gen } => return self.on_cpu_budget(group, gen),
            Event::Subsystem { id, tag } => self.call(id as usize, |s, cx| s.on_event(cx, tag)),
        }
        true
    }

    fn is_live(&self, key: JobKey, seq: u64) -> bool {
        self.jobs.get(key as usize).and_then(Option::as_ref).is_some_and(|j| j.seq == seq)
    }

    fn is_live_key(&self, key: JobKey) -> bool {
        self.jobs.get(key as usize).is_some_and(Option::is_some)
    }

    #[inline]
    fn job(&self, key: JobKey) -> &Job {
        self.jobs[key as usize].as_ref().expect("live job")
    }
    #[inline]
    fn job_mut(&mut self, key: JobKey) -> &mut Job {
        self.jobs[key as usize].as_mut().expect("live job")
    }

    fn release(&mut self, ti: usize) {
        let spec = &self.scenario.tasks[ti];
        let now = self.now;
        let st = &mut self.tasks[ti];
        // The next release first, so the draw order per task never depends on the schedule.
        let gap = match spec.arrival {
            Arrival::Periodic => spec.period,
            Arrival::Sporadic { max_interarrival } => {
                let extra = max_interarrival.0 - spec.period.0;
                spec.period + Nanos(if extra == 0 { 0 } else { st.rng.random_range(0..=extra) })
            }
        };
        let demand = spec.exec.sample(&mut st.rng);
        if spec.stop.is_none_or(|stop| now + gap < stop) {
            self.queue.push(now + gap, Event::Release { task: ti as u32 });
        }
        self.new_job(ti, demand, false);
    }

    fn make_ready(&mut self, key: JobKey) {
        let rj = self.ready_job(key);
        self.sched_mut().add_ready(&rj);
    }

    /// Asks an off-CPU job's program for its next step and applies it: compute makes the
    /// job eligible, a suspension puts it to sleep, done completes it.
    fn advance(&mut self, key: JobKey) {
        debug_assert!(self.job(key).cpu.is_none());
        let step = self.next_step(key);
        self.apply_off_cpu(key, step);
    }

    /// Applies a step to a job that is not on a CPU.
    fn apply_off_cpu(&mut self, key: JobKey, step: Step) {
        let activation = self.jobs[key as usize].as_ref().is_some_and(|j| j.ext.is_some()) && self.take_activation(key);
        if self.cpu_groups.is_some() {
            self.apply_off_cpu_grouped(key, step, activation);
        } else {
            self.apply_step_off_cpu(key, step, activation);
        }
    }

    /// [`Self::apply_off_cpu`] with CPU groups formed: a job of a throttled group is held
    /// instead of entering its scheduler, and each group's count of eligible jobs follows.
    #[inline(never)]
    fn apply_off_cpu_grouped(&mut self, key: JobKey, step: Step, activation: bool) {
        let was_eligible = self.job(key).state == JobState::Ready;
        match step {
            Step::Compute(_) | Step::Yield => {
                self.job_mut(key).step_left = if let Step::Compute(left) = step { left } else { Nanos::ZERO };
                if self.held_by_cpu_limit(key, activation) {
                    return;
                }
                self.apply_step_off_cpu(key, step, activation);
                if !was_eligible {
                    self.note_eligible(key, true);
                }
            }
            Step::Suspend(_) => {
                if was_eligible {
                    self.note_eligible(key, false);
                }
                self.apply_step_off_cpu(key, step, activation);
            }
            // Blocking and ending keep the count themselves.
            _ => self.apply_step_off_cpu(key, step, activation),
        }
    }

    #[inline(always)]
    fn apply_step_off_cpu(&mut self, key: JobKey, step: Step, activation: bool) {
        let job = self.jobs[key as usize].as_mut().expect("live job");
        match step {
            Step::Compute(_) | Step::Yield => {
                job.step_left = if let Step::Compute(left) = step { left } else { Nanos::ZERO };
                match job.state {
                    JobState::Ready => {}
                    // Still in the scheduler, at the same place.
                    JobState::Linked => job.state = JobState::Ready,
                    _ if activation => {
                        job.state = JobState::Ready;
                        let (rj, now) = (self.ready_job(key), self.now);
                        self.sched_mut().activate(now, &rj);
                    }
                    _ if self.waking => {
                        job.state = JobState::Ready;
                        let (rj, now) = (self.ready_job(key), self.now);
                        self.sched_mut().wake(now, &rj);
                    }
                    _ => {
                        job.state = JobState::Ready;
                        self.make_ready(key);
                    }
                }
            }
            Step::Suspend(duration) => {
                let was_ready = matches!(job.state, JobState::Ready | JobState::Linked);
                job.state = JobState::Suspended;
                let seq = job.seq;
                if was_ready {
                    self.sched_mut().block(key);
                }
                self.queue.push(self.now + duration, Event::Resume { key, seq });
            }
            Step::Block(_) => self.block(key),
            Step::Done => self.end_job(key, Outcome::Completed),
            Step::Killed => self.end_job(key, Outcome::Killed),
            Step::Invoke(_) | Step::Return => unreachable!("next_step resolves invocations"),
        }
    }

    /// The job running on `cpu` has finished its compute step. If its next step is more
    /// compute it keeps the CPU, and its trace segment stays whole.
    fn reach_stop(&mut self, key: JobKey, cpu: usize) {
        let now = self.now;
        let job = self.job_mut(key);
        job.account(now);
        debug_assert_eq!(job.step_left, Nanos::ZERO);
        // The step is taken now, at the instant it begins, whatever it turns out to be.
        let step = self.next_step(key);
        if let Step::Compute(left) = step {
            self.job_mut(key).step_left = left;
            let c = &mut self.cpus[cpu];
            c.gen += 1;
            let gen = c.gen;
            self.queue.push(now + left, Event::CpuStop { cpu: cpu as u32, gen });
            return;
        }
        if step == Step::Yield {
            // It keeps its CPU (and its trace segment) unless the coming decision takes it.
            self.job_mut(key).step_left = Nanos::ZERO;
            self.yielded.push((cpu as u32, self.cpus[cpu].gen));
            return;
        }
        self.leave_cpu(key, cpu);
        self.apply_off_cpu(key, step);
    }

    /// The next step of a job at `now`: from the component it is in, the subsystem that took
    /// it over, or its task's program. Invocations and returns are followed here, so the step
    /// returned is one the engine carries out.
    #[inline]
    fn next_step(&mut self, key: JobKey) -> Step {
        let job = self.jobs[key as usize].as_mut().expect("live job");
        if job.stepped_elsewhere() {
            return self.next_step_from_subsystems(key);
        }
        // A task's own program only computes, suspends and ends.
        let step = job.program.next_step(&self.scenario.tasks[job.task as usize], job.demand);
        if !self.subsystems.is_empty() {
            self.announce_program_step(key, step);
        }
        step
    }

    /// Tells every subsystem the step a job's own program takes (kept out of line: the engine
    /// alone never needs it, and its hot path stays small).
    #[inline(never)]
    fn announce_program_step(&mut self, key: JobKey, step: Step) {
        let info = self.job(key).info(key);
        self.call_all(|s, cx| s.on_program_step(cx, &info, step));
    }

    /// [`Self::next_step`] of a job a subsystem took over or that is inside a component.
    #[inline(never)]
    fn next_step_from_subsystems(&mut self, key: JobKey) -> Step {
        loop {
            let job = self.jobs[key as usize].as_mut().expect("live job");
            let ext = job.ext.as_ref();
            let owner = match ext.and_then(|e| e.invoked.last()) {
                Some(c) => Some(self.components[c.0 as usize]),
                None => ext.and_then(|e| e.stepper),
            };
            let step = match owner {
                Some(id) => {
                    let info = job.info(key);
                    self.call(id, |s, cx| s.next_step(cx, &info))
                }
                None => return self.next_step(key),
            };
            let job = self.jobs[key as usize].as_mut().expect("live job");
            match step {
                Step::Invoke(c) => {
                    assert!((c.0 as usize) < self.components.len(), "job {} invoked component {} that no subsystem added", job.seq, c.0);
                    job.ext_mut().invoked.push(c);
                }
                Step::Return => {
                    let seq = job.seq;
                    let left = job.ext.as_mut().and_then(|e| e.invoked.pop());
                    assert!(left.is_some(), "job {seq} returned from a component it was not in");
                }
                step => return step,
            }
        }
    }

    /// Takes a job off its CPU, recording the segment it ran. Its progress is the caller's.
    fn leave_cpu(&mut self, key: JobKey, cpu: usize) {
        let now = self.now;
        let job = self.jobs[key as usize].as_mut().expect("live job");
        debug_assert_eq!(job.cpu, Some(cpu as u32));
        debug_assert_eq!(job.dispatched_at, now, "progress is accounted before leaving a CPU");
        if self.opts.record_segments && now > job.segment_start {
            self.segments.push(ExecSegment { cpu: cpu as u32, task: job.task, job: job.index, start: job.segment_start, end: now });
        }
        job.cpu = None;
        let c = &mut self.cpus[cpu];
        c.running = None;
        c.gen += 1;
        self.undecided = true;
        if self.cpu_groups.is_some() {
            self.note_running(key, false);
        }
    }

    fn abort(&mut self, key: JobKey) {
        if let Some(cpu) = self.job(key).cpu {
            let now = self.now;
            self.job_mut(key).account(now);
            self.leave_cpu(key, cpu as usize);
        }
        self.end_job(key, Outcome::Aborted);
    }

    /// Records a finished (or aborted) job, frees its slot and lets the task's next job in.
    fn end_job(&mut self, key: JobKey, outcome: Outcome) {
        if self.cpu_groups.is_some() && self.job(key).state == JobState::Ready {
            self.note_eligible(key, false);
        }
        self.sched_mut().remove(key);
        if self.links > 0 {
            self.clear_link(key);
        }
        // Read in place and then cleared: moving the job out would copy it whole.
        let job = self.job(key);
        let rec = job.record(outcome, (outcome == Outcome::Completed).then_some(self.now));
        let ti = job.task as usize;
        let info = (!self.subsystems.is_empty()).then(|| job.info(key));
        self.jobs[key as usize] = None;
        self.free_keys.push(key);
        self.stats[ti].record(&rec, self.scenario.horizon);
        if self.opts.record_jobs {
            self.records.push(rec);
        }
        let pending = &mut self.tasks[ti].pending;
        // Jobs end in release order unless one is aborted out of turn.
        if pending.front() == Some(&key) {
            pending.pop_front();
        } else if let Some(pos) = pending.iter().position(|&k| k == key) {
            pending.remove(pos);
        }
        if let Some(info) = info {
            let idle = pending.is_empty();
            self.call_all(|s, cx| s.on_end(cx, &info, outcome, idle));
        }
        let pending = &self.tasks[ti].pending;
        if pos_is_head_queued(pending, &self.jobs) {
            let next = pending[0];
            self.advance(next);
        }
    }

    /// Whether a decision depends only on which jobs are eligible and what runs: queue
    /// schedulers (one, or one per CPU: no time-triggered policy, no state of its own between
    /// decisions) with no dependency link and no yielded job waiting for it. Subsystems reach
    /// the scheduler only through the engine, which marks what they change. Then a decision
    /// with nothing changed since the last one keeps every CPU's job, and can be skipped.
    #[inline]
    fn decides_on_jobs_alone(&self) -> bool {
        matches!(self.sched, root::RootScheduler::Queue(_) | root::RootScheduler::Partitioned(_))
            && self.links == 0
            && self.yielded.is_empty()
    }

    /// The scheduler, to tell it of a change: its next decision is then taken.
    #[inline]
    fn sched_mut(&mut self) -> &mut root::RootScheduler {
        self.undecided = true;
        &mut self.sched
    }

    fn reschedule(&mut self) {
        if self.links > 0 {
            self.reschedule_linked();
            self.undecided = false;
            return;
        }
        let m = self.cpus.len();
        for (cur, c) in self.current[..m].iter_mut().zip(&self.cpus[..m]) {
            *cur = c.running;
        }
        self.sched.choose(self.now, &self.current, &mut self.assign);
        let now = self.now;
        // Mostly nothing changes (a running job went on to its next compute step).
        if self.assign[..m] != self.current[..m] {
            self.apply_assignment(now);
        }
        // Taking jobs off their CPUs above was the decision's own doing.
        self.undecided = false;
        self.after_decision(now);
    }

    /// What follows every scheduling decision: yielded jobs go on, invariants are checked,
    /// and the scheduler's next time-triggered decision is scheduled.
    #[inline(always)]
    fn after_decision(&mut self, now: Nanos) {
        if !self.yielded.is_empty() {
            self.resume_yielded();
        }
        if self.opts.checks_invariants() {
            self.check_invariants();
        }
        if let Some(t) = self.sched.next_wakeup(now) {
            if self.wake_at.is_none_or(|w| t < w) {
                self.wake_at = Some(t);
                self.queue.push(t, Event::SchedulerWake);
            }
        }
    }

    /// Lets the jobs that yielded and kept their CPU through the decision take their next
    /// step now.
    fn resume_yielded(&mut self) {
        let now = self.now;
        for (cpu, gen) in std::mem::take(&mut self.yielded) {
            if self.cpus[cpu as usize].gen == gen {
                self.queue.push(now, Event::CpuStop { cpu, gen });
            }
        }
    }

    /// Takes off their CPUs the jobs `choose` moved away, then dispatches the ones it chose.
    fn apply_assignment(&mut self, now: Nanos) {
        for cpu in 0..self.cpus.len() {
            if self.assign[cpu] != self.current[cpu] {
                if let Some(key) = self.current[cpu] {
                    self.job_mut(key).account(now);
                    self.leave_cpu(key, cpu);
                }
            }
        }
        for cpu in 0..self.cpus.len() {
            if self.assign[cpu] != self.current[cpu] {
                if let Some(key) = self.assign[cpu] {
                    self.dispatch(key, cpu);
                }
            }
        }
    }

    /// Every running job is eligible and runs on exactly the CPU that says it runs it; every
    /// eligible job heads its task's queue; progress never exceeds the next stop.
    fn check_invariants(&self) {
        for (cpu, c) in self.cpus.iter().enumerate() {
            if let Some(key) = c.running {
                let j = self.job(key);
                assert_eq!(j.cpu, Some(cpu as u32), "CPU {cpu} runs a job that is elsewhere");
                assert_eq!(j.state, JobState::Ready, "CPU {cpu} runs an ineligible job");
                assert!(self.now - j.dispatched_at <= j.step_left, "job ran past the end of its step");
            }
        }
        for (key, j) in self.jobs.iter().enumerate().filter_map(|(k, j)| j.as_ref().map(|j| (k, j))) {
            if let Some(cpu) = j.cpu {
                assert_eq!(self.cpus[cpu as usize].running, Some(key as JobKey));
            }
            let linked = j.ext.as_ref().is_some_and(|e| e.link.is_some());
            assert!(j.state != JobState::Linked || linked, "a linked job has its link");
            let head = self.tasks[j.task as usize].pending.front() == Some(&(key as JobKey));
            assert_eq!(head, j.state != JobState::Queued, "only a task's oldest job may be eligible");
            // A subsystem's steps may add CPU time beyond the drawn demand.
            assert!(j.stepped_elsewhere() || j.program.executed <= j.demand);
        }
        self.check_cpu_groups();
    }

    fn dispatch(&mut self, key: JobKey, cpu: usize) {
        let now = self.now;
        let job = self.job_mut(key);
        debug_assert_eq!(job.state, JobState::Ready);
        debug_assert!(job.cpu.is_none(), "job dispatched twice");
        job.cpu = Some(cpu as u32);
        job.last_cpu = job.cpu;
        job.dispatched_at = now;
        job.segment_start = now;
        job.start.get_or_insert(now);
        let left = job.step_left;
        let c = &mut self.cpus[cpu];
        c.running = Some(key);
        c.gen += 1;
        let gen = c.gen;
        self.queue.push(now + left, Event::CpuStop { cpu: cpu as u32, gen });
        if self.cpu_groups.is_some() {
            self.note_running(key, true);
        }
    }

    fn finish(mut self) -> SimResult {
        let horizon = self.scenario.horizon;
        self.now = horizon;
        // Steps that end exactly at the horizon still count (a job finishing at the horizon
        // completed within it); nothing new starts there, so releases and decisions do not.
        while self.queue.peek_time() == Some(horizon) {
            let (_, ev) = self.queue.pop().expect("peeked");
            if matches!(ev, Event::CpuStop { .. } | Event::Resume { .. }) && self.handle(ev) {
                self.events += 1;
            }
        }
        for cpu in 0..self.cpus.len() {
            if let Some(key) = self.cpus[cpu].running {
                self.job_mut(key).account(horizon);
                self.leave_cpu(key, cpu);
            }
        }
        // Unfinished jobs, in release order so the trace is stable.
        let mut left: Vec<Job> = self.jobs.drain(..).flatten().collect();
        left.sort_by_key(|j| j.seq);
        for job in left {
            let outcome = if job.abs_deadline <= horizon { Outcome::Unfinished } else { Outcome::Pending };
            let rec = job.record(outcome, None);
            self.stats[job.task as usize].record(&rec, horizon);
            if self.opts.record_jobs {
                self.records.push(rec);
            }
        }
        let partition = sched::partition(self.scenario);
        let tasks = self
            .scenario
            .tasks
            .iter()
            .zip(self.stats)
            .enumerate()
            .map(|(i, (t, stats))| TaskSummary {
                name: t.name.clone(),
                criticality: t.criticality,
                cpu: partition.as_ref().map(|p| p[i]),
                stats,
            })
            .collect();
        let traces = (self.opts.record_jobs || self.opts.record_segments).then_some(crate::result::TraceSummary {
            limit: self.records.limit as u64,
            jobs: self.records.kept.len() as u64,
            jobs_left_out: self.records.left_out,
            segments: self.segments.kept.len() as u64,
            segments_left_out: self.segments.left_out,
            waits: None,
            waits_left_out: None,
        });
        let mut result = SimResult {
            source_name: self.scenario.source_name.clone(),
            scheduler: self.sched.name(),
            cpus: self.scenario.cpus,
            seed: self.seed,
            horizon,
            tasks,
            jobs: self.records.kept,
            jobs_left_out: self.records.left_out,
            segments: self.segments.kept,
            segments_left_out: self.segments.left_out,
            events: self.events,
            traces,
            ..SimResult::default()
        };
        self.sched.finish(horizon, &mut result);
        for s in self.subsystems.into_iter().flatten() {
            s.finish(horizon, &mut result);
        }
        result
    }
}

fn pos_is_head_queued(pending: &VecDeque<JobKey>, jobs: &[Option<Job>]) -> bool {
    pending.front().and_then(|&k| jobs[k as usize].as_ref()).is_some_and(|j| j.state == JobState::Queued)
}
