//! The engine's extension seam. A subsystem plugs a model into a simulation through hooks on
//! job release and end, a say in the steps of the jobs it takes over, events of its own through
//! the engine's queue, and a section of its own in the result. The engine names no subsystem:
//! adding a model adds a subsystem, not a branch in the engine.

use crate::program::{ComponentId, Step};
use crate::result::{Outcome, SimResult};
use crate::sched::JobKey;
use crate::time::Nanos;
use std::any::Any;

/// A subsystem's place in the order the simulation was given them (hooks run in that order).
pub type SubsystemId = usize;

/// A live job as subsystems see it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct JobInfo {
    /// The engine's handle of the job; reused by a later job once this one ends.
    pub key: JobKey,
    pub task: usize,
    /// Unique over the run: the job's place in the global release order.
    pub seq: u64,
    /// 0-based index among the task's released jobs.
    pub index: u64,
    pub release: Nanos,
    pub abs_deadline: Nanos,
    /// Execution demand drawn for the job.
    pub demand: Nanos,
    /// The component the job is in, if it invoked one and has not returned.
    pub component: Option<ComponentId>,
    /// When it first ran, if it has.
    pub start: Option<Nanos>,
}

/// A model plugged into the engine. Every hook has a default that does nothing, so a
/// subsystem implements only what it takes part in.
pub trait Subsystem: Any {
    /// At time zero, after the tasks' first releases are queued: schedule the first events.
    fn start(&mut self, _cx: &mut Context<'_>) {}

    /// A job was released. Returning true takes over its steps: from then on the engine asks
    /// [`Subsystem::next_step`] instead of the task's own program. The first subsystem to
    /// claim a job gets it; later ones are still told of the release.
    fn on_release(&mut self, _cx: &mut Context<'_>, _job: &JobInfo) -> bool {
        false
    }

    /// The next step of a job this subsystem took over, or of a job inside one of its
    /// components, at `cx.now()`, the instant the previous step ended.
    fn next_step(&mut self, _cx: &mut Context<'_>, job: &JobInfo) -> Step {
        panic!("subsystem {} gave no steps for job {} of task {}", self.name(), job.seq, job.task)
    }

    /// The step a job's own program took (jobs no subsystem took over).
    fn on_program_step(&mut self, _cx: &mut Context<'_>, _job: &JobInfo, _step: Step) {}

    /// A job ended with `outcome`; `task_idle` if its task has no other unfinished job.
    fn on_end(&mut self, _cx: &mut Context<'_>, _job: &JobInfo, _outcome: Outcome, _task_idle: bool) {}

    /// An event this subsystem scheduled with [`Context::schedule`] is due.
    fn on_event(&mut self, _cx: &mut Context<'_>, _tag: u64) {}

    /// Keep at most `limit` entries of each trace this subsystem records.
    fn set_trace_limit(&mut self, _limit: usize) {}

    /// The run is over at `horizon`: write this subsystem's section of the result.
    fn finish(self: Box<Self>, horizon: Nanos, result: &mut SimResult);

    /// Short name for messages.
    fn name(&self) -> &'static str;
}

/// What a hook asks of the engine. Applied in the order asked, once the hook returns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Command {
    Schedule { at: Nanos, tag: u64 },
    DropJob(JobKey),
    Wake(JobKey),
    Inherit { job: JobKey, donor: Option<JobKey> },
    Depend { job: JobKey, holder: Option<JobKey> },
    TakeReleases(usize),
    Activate(usize),
    JoinCpuGroup { task: usize, group: u32 },
    SetCpuLimit { group: u32, limit: Option<(Nanos, Nanos)> },
}

/// A hook's view of the engine: the time, requests to the engine, and the other subsystems.
pub struct Context<'e> {
    pub(crate) now: Nanos,
    pub(crate) commands: &'e mut Vec<Command>,
    /// Every subsystem but the one being called (its slot is empty while it runs).
    pub(crate) peers: &'e mut [Option<Box<dyn Subsystem>>],
    pub(crate) components: &'e mut Vec<SubsystemId>,
    pub(crate) me: SubsystemId,
    pub(super) cpu_groups: Option<&'e super::bandwidth::CpuGroups>,
}

impl Context<'_> {
    #[inline]
    pub fn now(&self) -> Nanos {
        self.now
    }

    /// Delivers `tag` to this subsystem's [`Subsystem::on_event`] at `at` (not before now).
    /// Events at the same instant are handled in the order they were scheduled, engine and
    /// subsystem events alike.
    pub fn schedule(&mut self, at: Nanos, tag: u64) {
        assert!(at >= self.now, "an event scheduled in the past");
        self.commands.push(Command::Schedule { at, tag });
    }

    /// Aborts a live job now, counted in its task's `dropped` (a policy's early drop).
    pub fn drop_job(&mut self, job: JobKey) {
        self.commands.push(Command::DropJob(job));
    }

    /// Lets a job blocked with [`Step::Block`] go on: the engine asks for its next step now.
    pub fn wake(&mut self, job: JobKey) {
        self.commands.push(Command::Wake(job));
    }

    /// Gives `job` the priority of `donor` wherever that is higher than its own (priority
    /// inheritance); `None` takes an inherited priority away.
    pub fn inherit(&mut self, job: JobKey, donor: Option<JobKey>) {
        self.commands.push(Command::Inherit { job, donor });
    }

    /// Sets the dependency link of `job` to `holder` (`None` removes it). A job that blocks
    /// ([`Step::Block`]) with a link set stays in its scheduler's ready queue at its own
    /// priority; whenever the scheduler chooses it for a CPU, the engine follows the links
    /// (the holder may itself wait with a link) and runs the job at the end of the chain on
    /// that CPU instead. If that job already runs on another CPU, or another CPU's choice leads
    /// to it as well, one CPU runs it (the one it runs on, else the one that chose it, else
    /// the lowest) and the others stay idle for that decision. A waiting job whose link is
    /// removed waits off the ready queue, as a plain [`Step::Block`] does; [`Context::wake`]
    /// removes the link and lets the job go on.
    pub fn depend(&mut self, job: JobKey, holder: Option<JobKey>) {
        self.commands.push(Command::Depend { job, holder });
    }

    /// From now on the engine releases no job of task `task` at the task's own arrivals: only
    /// [`Context::activate`] does (a task driven by a subsystem's events, such as packets).
    pub fn take_releases(&mut self, task: usize) {
        self.commands.push(Command::TakeReleases(task));
    }

    /// Releases a job of task `task` now, as an activation: when the job first becomes
    /// eligible its scheduler hears of it through [`crate::sched::Scheduler::activate`], not as
    /// an ordinary release, and every subsystem is told of the release as usual.
    pub fn activate(&mut self, task: usize) {
        self.commands.push(Command::Activate(task));
    }

    /// A new component owned by this subsystem: jobs that take [`Step::Invoke`] of it get
    /// their steps from this subsystem until they take [`Step::Return`].
    pub fn add_component(&mut self) -> ComponentId {
        self.components.push(self.me);
        ComponentId(u32::try_from(self.components.len() - 1).expect("fewer than 2^32 components"))
    }

    /// Puts task `task` in CPU group `group` (a small number the subsystem chooses): from now
    /// on the group's CPU time and CPU wait are measured ([`Context::cpu_group_times`]) and a
    /// bandwidth limit may hold it ([`Context::set_cpu_limit`]). Only before the task's first
    /// job (from [`Subsystem::start`]).
    pub fn join_cpu_group(&mut self, task: usize, group: u32) {
        self.commands.push(Command::JoinCpuGroup { task, group });
    }

    /// Limits CPU group `group` to `quota` of CPU time in each `period` over all its tasks
    /// (`None`: no limit), as cgroup `cpu.max` does.
    pub fn set_cpu_limit(&mut self, group: u32, limit: Option<(Nanos, Nanos)>) {
        self.commands.push(Command::SetCpuLimit { group, limit });
    }

    /// CPU time CPU group `group`'s tasks used, and time some job of the group was eligible
    /// but waited for a CPU (PSI's `cpu some`), since the group was formed; zero for a group
    /// nobody formed.
    pub fn cpu_group_times(&self, group: u32) -> (Nanos, Nanos) {
        self.cpu_groups.map_or((Nanos::ZERO, Nanos::ZERO), |cg| cg.times(group, self.now))
    }

    /// The other subsystem of type `T`, if the simulation has one.
    pub fn peer_mut<T: Subsystem>(&mut self) -> Option<&mut T> {
        self.peers.iter_mut().flatten().find_map(|s| {
            let any: &mut dyn Any = s.as_mut();
            any.downcast_mut::<T>()
        })
    }
}
