//! The simulator's side of the controller tick loop (`[control]`): every interval the engine
//! builds a [`critmem_policy::Observation`] of the memory-limited groups from the memory model
//! and its job boundaries, calls the controller, and applies its actions — the semantics of
//! [`critmem_policy::Platform`], inside the deterministic engine.

use crate::engine::{Context, JobInfo, Subsystem};
use crate::memsim::{MemSim, MemorySubsystem};
use crate::model::memory::{ControlSpec, GroupDecl, MemorySpec};
use crate::model::task::TaskSpec;
use crate::result::{JsonFields, Outcome, Section, SimResult};
use crate::sched::JobKey;
use crate::time::Nanos;
use critmem_policy::{
    Action, BandwidthKnobs, Controller, GroupObservation, GroupRole, JobEvent, MemoryKnobs, Observation, Platform, StallTotals,
    CPU_PERIOD_US,
};
use serde::Serialize;
use std::collections::BTreeMap;
use std::convert::Infallible;

/// One group at one tick, after the tick's actions were applied.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GroupPoint {
    /// `memory.max` in force (`None`: unlimited).
    pub max_bytes: Option<u64>,
    pub high_bytes: Option<u64>,
    /// Memory charged to the group.
    pub usage_bytes: u64,
    /// The group's PSI totals so far (for per-job stall, e.g. SARA's `s_period`).
    pub memory_some_us: u64,
    pub io_some_us: u64,
}

/// One tick of the control timeline (for plots of limits and usage over time).
#[derive(Clone, Debug, PartialEq)]
pub struct ControlSample {
    pub time: Nanos,
    /// Per group, in `[[group]]` order.
    pub groups: Vec<GroupPoint>,
}

/// What a run with `[control]` adds to its results.
#[derive(Clone, Debug, PartialEq)]
pub struct ControlResult {
    pub controller: String,
    pub interval: Nanos,
    /// Group names in `[[group]]` order.
    pub groups: Vec<String>,
    pub ticks: u64,
    /// Jobs aborted at the controller's request (also counted in each task's `dropped`).
    pub dropped_jobs: u64,
    /// Actions naming a group or job that does not exist (ignored).
    pub ignored_actions: u64,
    /// Over every tick, per group in `[[group]]` order (exact even when the timeline is thinned).
    pub extremes: Vec<GroupExtremes>,
    /// One sample every `timeline_every_ticks` ticks, from the first: every tick until
    /// [`MAX_CONTROL_SAMPLES`] (or [`MAX_CONTROL_VALUES`] / groups) are kept, then the spacing
    /// doubles as often as needed.
    pub timeline: Vec<ControlSample>,
    pub timeline_every_ticks: u64,
}

/// Most control-timeline samples a run keeps, so a long horizon cannot exhaust memory...
pub const MAX_CONTROL_SAMPLES: usize = 1 << 20;
/// ...and most values (samples × groups).
pub const MAX_CONTROL_VALUES: usize = 1 << 24;

/// Keeps items 0, 2, 4, …: a timeline sampled at a fixed spacing stays evenly spaced, at twice
/// the spacing (how bounded timelines make room).
pub fn keep_every_other<T>(items: &mut Vec<T>) {
    let mut keep = false;
    items.retain(|_| {
        keep = !keep;
        keep
    });
}

/// A group's limit and usage extremes over a run, and what the controller reclaimed of it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GroupExtremes {
    /// `memory.max` after the last tick.
    pub final_max_bytes: Option<u64>,
    pub lowest_max_bytes: Option<u64>,
    pub peak_usage_bytes: u64,
    /// Memory evicted by the controller's `Reclaim` actions (pages that fault back in are
    /// counted again if reclaimed again).
    pub reclaimed_bytes: u64,
}

pub(crate) struct Control {
    controller: Box<dyn Controller + Send>,
    name: String,
    interval: Nanos,
    state: State,
    /// Live jobs of the managed groups' tasks: job id (release sequence) → (key, group).
    live: BTreeMap<u64, (JobKey, usize)>,
}

/// The one event tag of the control loop: a tick.
const TICK: u64 = 0;

/// What the platform side keeps between ticks.
struct State {
    groups: Vec<GroupDecl>,
    /// Managed group of each task, if any.
    task_group: Vec<Option<usize>>,
    knobs: Vec<MemoryKnobs>,
    bandwidth: Vec<BandwidthKnobs>,
    /// Per group, CPU time and CPU wait as of this tick (from the engine's CPU groups).
    cpu_times: Vec<(Nanos, Nanos)>,
    /// Whether the groups are the engine's CPU groups: when the controller uses CPU figures
    /// or limits, or a group declares a CPU limit (the accounting costs every dispatch).
    cpu_groups: bool,
    cpus: u32,
    events: Vec<JobEvent>,
    extremes: Vec<GroupExtremes>,
    timeline: Vec<ControlSample>,
    timeline_every_ticks: u64,
    ticks: u64,
    dropped: u64,
    ignored: u64,
}

impl Control {
    pub(crate) fn new(spec: &ControlSpec, memory: &MemorySpec, tasks: &[TaskSpec], cpus: usize) -> Control {
        Control::with_controller(spec.config.build(), spec.config.name().to_string(), spec, memory, tasks, cpus)
    }

    /// A loop around a controller the caller built (the scenario's name and config unused).
    pub(crate) fn with_controller(
        controller: Box<dyn Controller + Send>,
        name: String,
        spec: &ControlSpec,
        memory: &MemorySpec,
        tasks: &[TaskSpec],
        cpus: usize,
    ) -> Control {
        let pb = memory.page_bytes;
        let bytes = |p: Option<u64>| p.map(|p| p * pb);
        let state = State {
            knobs: memory
                .groups
                .iter()
                .map(|g| MemoryKnobs {
                    max_bytes: bytes(g.max_pages),
                    high_bytes: bytes(g.high_pages),
                    min_bytes: bytes(g.min_pages),
                    low_bytes: bytes(g.low_pages),
                })
                .collect(),
            bandwidth: vec![BandwidthKnobs::default(); memory.groups.len()],
            cpu_times: vec![(Nanos::ZERO, Nanos::ZERO); memory.groups.len()],
            cpu_groups: controller.uses_cpu() || memory.groups.iter().any(|g| g.bandwidth.cpu_millicpus.is_some()),
            cpus: u32::try_from(cpus).expect("fewer than 2^32 CPUs"),
            task_group: tasks
                .iter()
                .map(|t| t.memory.as_ref().and_then(|tm| memory.groups.iter().position(|g| g.name == tm.group)))
                .collect(),
            groups: memory.groups.clone(),
            events: Vec::new(),
            extremes: vec![GroupExtremes::default(); memory.groups.len()],
            timeline: Vec::new(),
            timeline_every_ticks: 1,
            ticks: 0,
            dropped: 0,
            ignored: 0,
        };
        Control { controller, name, interval: spec.interval, state, live: BTreeMap::new() }
    }

    /// One iteration of the platform-neutral loop ([`critmem_policy::step`]) over the
    /// simulator platform; returns what the engine carries out: the jobs to drop (group, job
    /// id) and the CPU limits set (group, millicpus).
    pub(crate) fn tick(&mut self, now: Nanos, ms: &mut MemSim) -> EngineRequests {
        self.state.ticks += 1;
        let mut requests = EngineRequests::default();
        let mut platform = SimPlatform { state: &mut self.state, ms, now, requests: &mut requests };
        critmem_policy::step(&mut platform, &mut *self.controller).unwrap_or_else(|never| match never {});
        let st = &mut self.state;
        let points: Vec<GroupPoint> = (0..st.groups.len())
            .map(|gi| {
                let (psi, usage_bytes) = ms.group_state(gi, now);
                GroupPoint {
                    max_bytes: st.knobs[gi].max_bytes,
                    high_bytes: st.knobs[gi].high_bytes,
                    usage_bytes,
                    memory_some_us: psi.memory.some_us,
                    io_some_us: psi.io.some_us,
                }
            })
            .collect();
        for (x, p) in st.extremes.iter_mut().zip(&points) {
            x.final_max_bytes = p.max_bytes;
            x.lowest_max_bytes = match (x.lowest_max_bytes, p.max_bytes) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            x.peak_usage_bytes = x.peak_usage_bytes.max(p.usage_bytes);
        }
        // `%` rather than is_multiple_of: the workspace's rust-version predates it.
        #[allow(clippy::manual_is_multiple_of)]
        let sampled = (st.ticks - 1) % st.timeline_every_ticks == 0;
        if sampled {
            st.timeline.push(ControlSample { time: now, groups: points });
            let most_samples = (MAX_CONTROL_VALUES / st.groups.len().max(1)).clamp(2, MAX_CONTROL_SAMPLES);
            if st.timeline.len() >= most_samples {
                keep_every_other(&mut st.timeline);
                st.timeline_every_ticks *= 2;
            }
        }
        requests
    }

    pub(crate) fn into_result(self) -> ControlResult {
        let st = self.state;
        ControlResult {
            controller: self.name,
            interval: self.interval,
            groups: st.groups.iter().map(|g| g.name.clone()).collect(),
            ticks: st.ticks,
            dropped_jobs: st.dropped,
            ignored_actions: st.ignored,
            extremes: st.extremes,
            timeline: st.timeline,
            timeline_every_ticks: st.timeline_every_ticks,
        }
    }
}

impl Subsystem for Control {
    fn name(&self) -> &'static str {
        "control"
    }

    fn start(&mut self, cx: &mut Context<'_>) {
        // Where CPU figures or limits are used, each managed group is a CPU group: its CPU
        // time and wait are observed, and its bandwidth may be limited.
        if self.state.cpu_groups {
            for (task, group) in self.state.task_group.iter().enumerate() {
                if let Some(g) = group {
                    cx.join_cpu_group(task, u32::try_from(*g).expect("fewer than 2^32 groups"));
                }
            }
        }
        // The groups' declared CPU and I/O limits, applied as a controller's would be.
        let declared: Vec<Action> = self.state.groups.iter().enumerate().flat_map(|(group, g)| g.bandwidth.actions(group)).collect();
        if !declared.is_empty() {
            let now = cx.now();
            let memory = cx.peer_mut::<MemorySubsystem>().expect("a control loop runs beside the memory model");
            let mut requests = EngineRequests::default();
            let mut platform = SimPlatform { state: &mut self.state, ms: memory.model_mut(), now, requests: &mut requests };
            platform.apply(&declared).unwrap_or_else(|never| match never {});
            self.send(cx, requests);
        }
        // The first tick closes the first interval (SARA counts ticks as intervals).
        cx.schedule(cx.now() + self.interval, TICK);
    }

    fn on_release(&mut self, cx: &mut Context<'_>, job: &JobInfo) -> bool {
        self.state.on_release(job.task, job.seq, cx.now(), job.abs_deadline);
        if let Some(group) = self.state.task_group[job.task] {
            self.live.insert(job.seq, (job.key, group));
        }
        false
    }

    fn on_end(&mut self, cx: &mut Context<'_>, job: &JobInfo, outcome: Outcome, _task_idle: bool) {
        self.state.on_end(job.task, job.seq, cx.now(), outcome == Outcome::Completed);
        self.live.remove(&job.seq);
    }

    fn on_event(&mut self, cx: &mut Context<'_>, tag: u64) {
        debug_assert_eq!(tag, TICK);
        let now = cx.now();
        if self.state.cpu_groups {
            for (g, times) in self.state.cpu_times.iter_mut().enumerate() {
                *times = cx.cpu_group_times(u32::try_from(g).expect("fewer than 2^32 groups"));
            }
        }
        let memory = cx.peer_mut::<MemorySubsystem>().expect("a control loop runs beside the memory model");
        let requests = self.tick(now, memory.model_mut());
        self.send(cx, requests);
        cx.schedule(now + self.interval, TICK);
    }

    fn finish(self: Box<Self>, _horizon: Nanos, result: &mut SimResult) {
        result.set_section(self.into_result());
    }
}

impl Control {
    /// Passes what a tick asked of the engine on: CPU limits, then job drops.
    fn send(&mut self, cx: &mut Context<'_>, requests: EngineRequests) {
        let EngineRequests { drops, cpu_limits } = requests;
        for (group, millicpus) in cpu_limits {
            let period = Nanos::from_us(CPU_PERIOD_US);
            let quota = |m: u64| Nanos(period.0 * m / 1000);
            cx.set_cpu_limit(u32::try_from(group).expect("fewer than 2^32 groups"), millicpus.map(|m| (quota(m), period)));
        }
        for (group, job) in drops {
            // A job asked for twice in one tick is dropped once; the second request is ignored.
            match self.live.get(&job).copied().filter(|&(_, g)| g == group) {
                Some((key, _)) => {
                    self.live.remove(&job);
                    self.state.dropped += 1;
                    cx.drop_job(key);
                }
                None => self.state.ignored += 1,
            }
        }
    }
}

impl State {
    /// The managed group of task `ti`, if it is soft real-time (only those report jobs).
    fn soft_rt_group(&self, ti: usize) -> Option<usize> {
        self.task_group[ti].filter(|&g| matches!(self.groups[g].role, GroupRole::SoftRealTime { .. }))
    }

    fn on_release(&mut self, ti: usize, job: u64, at: Nanos, deadline: Nanos) {
        if let Some(group) = self.soft_rt_group(ti) {
            self.events.push(JobEvent::Release { group, job, at_ns: at.0, deadline_ns: deadline.0 });
        }
    }

    /// A job ended: `completed`, or dropped (aborted, killed, dropped by request).
    fn on_end(&mut self, ti: usize, job: u64, at: Nanos, completed: bool) {
        if let Some(group) = self.soft_rt_group(ti) {
            self.events.push(if completed {
                JobEvent::Completion { group, job, at_ns: at.0 }
            } else {
                JobEvent::Drop { group, job, at_ns: at.0 }
            });
        }
    }
}

/// What a tick asks of the engine, which owns the jobs and the CPUs.
#[derive(Default)]
pub(crate) struct EngineRequests {
    /// `DropJob`s: (group, job id).
    drops: Vec<(usize, u64)>,
    /// `SetCpuMax`es as applied: (group, millicpus).
    cpu_limits: Vec<(usize, Option<u64>)>,
}

/// The simulator as a [`Platform`]: observations come from the memory model, the engine's CPU
/// groups and the job boundaries the engine reported; limits apply at once (synchronously,
/// at `now`).
struct SimPlatform<'a> {
    state: &'a mut State,
    ms: &'a mut MemSim,
    now: Nanos,
    requests: &'a mut EngineRequests,
}

impl Platform for SimPlatform<'_> {
    type Error = Infallible;

    fn observe(&mut self) -> Result<Observation, Infallible> {
        Ok(Observation {
            now_ns: self.now.0,
            total_memory_bytes: self.ms.managed_bytes(),
            cpus: self.state.cpus,
            groups: self
                .state
                .groups
                .iter()
                .enumerate()
                .map(|(gi, g)| {
                    let (psi, usage_bytes) = self.ms.group_state(gi, self.now);
                    GroupObservation {
                        name: g.name.clone(),
                        role: g.role.clone(),
                        stall: StallTotals {
                            memory_some_us: psi.memory.some_us,
                            memory_full_us: psi.memory.full_us,
                            io_some_us: psi.io.some_us,
                            io_full_us: psi.io.full_us,
                            cpu_some_us: self.state.cpu_times[gi].1.as_us(),
                        },
                        usage_bytes,
                        knobs: self.state.knobs[gi],
                        floor_bytes: g.floor_pages * self.ms.page_bytes(),
                        cpu_usage_us: self.state.cpu_times[gi].0.as_us(),
                        bandwidth: self.state.bandwidth[gi],
                    }
                })
                .collect(),
            events: std::mem::take(&mut self.state.events),
        })
    }

    /// Applies limit and protection changes, clamped as the platform promises: max and high
    /// to `[floor, machine]`, min and low to the machine; a limit is rounded down to whole
    /// pages so it never exceeds the request (except to honour the floor). A reclaim evicts
    /// up to the request's whole pages at once, as a shrinking limit would, and is returned
    /// with the bytes it evicted (left out when it evicted none). Returns what was applied,
    /// as applied; actions for groups that do not exist are left out.
    fn apply(&mut self, actions: &[Action]) -> Result<Vec<Action>, Infallible> {
        let (pb, total) = (self.ms.page_bytes(), self.ms.total_frames());
        let st = &mut *self.state;
        let mut applied = Vec::with_capacity(actions.len());
        for &a in actions {
            let group = a.group();
            if group >= st.groups.len() {
                st.ignored += 1;
                continue;
            }
            let floor = st.groups[group].floor_pages;
            let limit = |b: Option<u64>| b.map(|b| (b / pb).clamp(floor, total) * pb);
            let protect = |b: Option<u64>| b.map(|b| (b / pb).min(total) * pb);
            let k = &mut st.knobs[group];
            let done = match a {
                Action::SetMax { bytes, .. } => {
                    let bytes = limit(bytes);
                    // Fails only when every page of the group is pinned: the old limit stays.
                    if !self.ms.set_group_max(group, self.now, bytes.map_or(total, |b| b / pb)) {
                        continue;
                    }
                    k.max_bytes = bytes;
                    Action::SetMax { group, bytes }
                }
                Action::SetHigh { bytes, .. } => {
                    k.high_bytes = limit(bytes);
                    Action::SetHigh { group, bytes: k.high_bytes }
                }
                Action::SetMin { bytes, .. } => {
                    k.min_bytes = protect(bytes);
                    Action::SetMin { group, bytes: k.min_bytes }
                }
                Action::SetLow { bytes, .. } => {
                    k.low_bytes = protect(bytes);
                    Action::SetLow { group, bytes: k.low_bytes }
                }
                Action::DropJob { job, .. } => {
                    self.requests.drops.push((group, job));
                    applied.push(a);
                    continue;
                }
                Action::SetCpuMax { .. } if !st.cpu_groups => {
                    // From a controller that says it uses no CPU limits: nothing to hold.
                    st.ignored += 1;
                    continue;
                }
                Action::SetCpuMax { millicpus, .. } => {
                    let millicpus = critmem_policy::applied_cpu_millicpus(millicpus, st.cpus);
                    st.bandwidth[group].cpu_millicpus = millicpus;
                    self.requests.cpu_limits.push((group, millicpus));
                    applied.push(Action::SetCpuMax { group, millicpus });
                    continue;
                }
                Action::SetIoMax { read_bytes_per_s, write_bytes_per_s, .. } => {
                    let b = &mut st.bandwidth[group];
                    b.io_read_bytes_per_s = critmem_policy::applied_io_bytes_per_s(read_bytes_per_s);
                    b.io_write_bytes_per_s = critmem_policy::applied_io_bytes_per_s(write_bytes_per_s);
                    let (read_bytes_per_s, write_bytes_per_s) = (b.io_read_bytes_per_s, b.io_write_bytes_per_s);
                    self.ms.set_group_io_limits(group, read_bytes_per_s, write_bytes_per_s);
                    applied.push(Action::SetIoMax { group, read_bytes_per_s, write_bytes_per_s });
                    continue;
                }
                Action::Reclaim { bytes, .. } => {
                    // Whole pages, as many as the group can give up now; none: not applied.
                    let reclaimed = self.ms.reclaim_group(group, self.now, bytes / pb) * pb;
                    if reclaimed > 0 {
                        st.extremes[group].reclaimed_bytes += reclaimed;
                        applied.push(Action::Reclaim { group, bytes: reclaimed });
                    }
                    continue;
                }
            };
            let pages = |b: Option<u64>| b.map(|b| b / pb);
            self.ms.set_group_protection(group, pages(k.high_bytes), pages(k.min_bytes), pages(k.low_bytes));
            applied.push(done);
        }
        Ok(applied)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::load_toml_str;

    const SCENARIO: &str = r#"
[scheduler]
kind = "edf"
[run]
horizon_ms = 100
[memory]
total_mb = 16
[[group]]
name = "srt"
role = "soft-rt"
bcet_ms = 5
floor_mb = 2
max_mb = 8
[[task]]
name = "t"
wcet_ms = 10
period_ms = 50
group = "srt"
private_mb = 4
access = [{ pattern = "sweep" }]
"#;

    /// The contract the Linux platform's conformance body checks, on the simulator side.
    #[test]
    fn the_simulator_platform_clamps_reports_what_it_applied_and_ignores_strays() {
        let s = load_toml_str(SCENARIO, "p.toml").unwrap();
        let spec = s.memory.as_ref().unwrap();
        let mut ms = MemSim::new(spec, &s.tasks, &["t".to_string()], &[], 1, true).ok().unwrap();
        let config = critmem_policy::ControllerConfig::parse("greedy", serde_json::json!({})).unwrap();
        let cs = ControlSpec { config, interval: Nanos::from_ms(5) };
        let mut c = Control::new(&cs, spec, &s.tasks, s.cpus);
        let mut requests = EngineRequests::default();
        let mut p = SimPlatform { state: &mut c.state, ms: &mut ms, now: Nanos::from_ms(1), requests: &mut requests };
        let obs = p.observe().unwrap();
        assert_eq!(obs.total_memory_bytes, 16 << 20);
        assert_eq!(obs.groups[0].knobs.max_bytes, Some(8 << 20));
        assert_eq!(obs.groups[0].floor_bytes, 2 << 20);
        let applied = p.apply(&[Action::SetMax { group: 0, bytes: Some(1 << 20) }]).unwrap();
        assert_eq!(applied, [Action::SetMax { group: 0, bytes: Some(2 << 20) }], "raised to the floor");
        assert_eq!(p.observe().unwrap().groups[0].knobs.max_bytes, Some(2 << 20));
        let applied = p.apply(&[Action::SetMax { group: 0, bytes: Some((3 << 20) + 100) }]).unwrap();
        assert_eq!(applied, [Action::SetMax { group: 0, bytes: Some(3 << 20) }], "rounded down to pages");
        let applied = p.apply(&[Action::SetMax { group: 0, bytes: None }, Action::SetMin { group: 0, bytes: Some(1 << 40) }]).unwrap();
        assert_eq!(applied, [Action::SetMax { group: 0, bytes: None }, Action::SetMin { group: 0, bytes: Some(16 << 20) }]);
        assert!(p.apply(&[Action::SetMax { group: 1, bytes: Some(1 << 30) }]).unwrap().is_empty());
        assert_eq!(p.observe().unwrap().groups[0].knobs.max_bytes, None);
        // Greedy uses no CPU figures or limits: no CPU groups are kept, and a CPU limit is left out.
        assert!(p.apply(&[Action::SetCpuMax { group: 0, millicpus: Some(500) }]).unwrap().is_empty());
        assert_eq!(p.observe().unwrap().groups[0].bandwidth.cpu_millicpus, None);
    }

    /// The synchronous conformance body the Linux platform runs, here against the
    /// simulator's: the same contract, checked exactly (rounding, clamping, strays).
    #[test]
    fn the_simulator_platform_passes_the_synchronous_conformance_body() {
        let text = r#"
[scheduler]
kind = "edf"
[run]
horizon_ms = 100
[memory]
total_mb = 64
[[group]]
name = "srt"
role = "soft-rt"
bcet_ms = 5
floor_mb = 2
[[group]]
name = "batch"
floor_mb = 3
[[task]]
name = "t"
wcet_ms = 10
period_ms = 50
group = "srt"
private_mb = 1
access = [{ pattern = "sweep" }]
[[task]]
name = "b"
wcet_ms = 10
period_ms = 50
group = "batch"
private_mb = 1
access = [{ pattern = "sweep" }]
"#;
        let s = load_toml_str(text, "conformance.toml").unwrap();
        let spec = s.memory.as_ref().unwrap();
        let names: Vec<String> = s.tasks.iter().map(|t| t.name.clone()).collect();
        let mut ms = MemSim::new(spec, &s.tasks, &names, &[], 1, true).ok().unwrap();
        let config = critmem_policy::ControllerConfig::parse("greedy", serde_json::json!({})).unwrap();
        let cs = ControlSpec { config, interval: Nanos::from_ms(5) };
        // Under a controller that uses CPU limits (the probe's own), as the body's steps do.
        let (probe, _) = critmem_policy::ConformanceProbe::new(5_000_000);
        let mut c = Control::with_controller(Box::new(probe), "conformance".into(), &cs, spec, &s.tasks, s.cpus);
        let mut requests = EngineRequests::default();
        let mut p = SimPlatform { state: &mut c.state, ms: &mut ms, now: Nanos::from_ms(1), requests: &mut requests };
        critmem_policy::check_platform(&mut p, |_| {}).unwrap_or_else(|e| panic!("{e}"));
        assert!(requests.drops.is_empty());
        // Every CPU limit the body asked for reaches the engine as applied, the last one cleared.
        assert_eq!(requests.cpu_limits.len(), 8);
        assert!(requests.cpu_limits.iter().all(|&(g, _)| g < 2));
        assert_eq!(requests.cpu_limits.last(), Some(&(1, None)));
    }
}

/// The controller's place in the summary: after memory.
impl Section for ControlResult {
    const ORDER: u32 = 200;

    fn write_json(&self, _run: &SimResult, out: &mut JsonFields) {
        let mb = |b: u64| b as f64 / 1_048_576.0;
        let c = self;
        let control = JsonControl {
            controller: &c.controller,
            interval_ms: c.interval.as_ms_f64(),
            ticks: c.ticks,
            dropped_jobs: c.dropped_jobs,
            ignored_actions: c.ignored_actions,
            groups: c
                .groups
                .iter()
                .zip(&c.extremes)
                .map(|(name, x)| JsonControlGroup {
                    name,
                    final_max_mb: x.final_max_bytes.map(mb),
                    lowest_max_mb: x.lowest_max_bytes.map(mb),
                    peak_usage_mb: mb(x.peak_usage_bytes),
                    reclaimed_mb: (x.reclaimed_bytes > 0).then(|| mb(x.reclaimed_bytes)),
                })
                .collect(),
        };
        out.field("control", &control);
    }
}

impl SimResult {
    /// The controller loop's results, when the scenario declares `[control]`.
    pub fn control(&self) -> Option<&ControlResult> {
        self.section()
    }
}

#[derive(Serialize)]
struct JsonControl<'a> {
    controller: &'a str,
    interval_ms: f64,
    ticks: u64,
    dropped_jobs: u64,
    ignored_actions: u64,
    groups: Vec<JsonControlGroup<'a>>,
}

/// A managed group's limits over the run (`null` max: unlimited).
#[derive(Serialize)]
struct JsonControlGroup<'a> {
    name: &'a str,
    final_max_mb: Option<f64>,
    lowest_max_mb: Option<f64>,
    peak_usage_mb: f64,
    /// Only when the controller reclaimed some of the group (most never ask).
    #[serde(skip_serializing_if = "Option::is_none")]
    reclaimed_mb: Option<f64>,
}
