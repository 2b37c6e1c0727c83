//! The page-level memory model driven by the engine: one address space per task, each job's
//! references spread evenly over its compute, faults taken at the exact simulated instant
//! they happen, PSI states updated as jobs run, stall and resume.

use crate::engine::{Context, JobInfo, Subsystem};
use crate::mem::frames::GLOBAL_POOL;
use crate::mem::{
    Access, AsId, AutoDecision, BoundId, BoundKind, BoundSpec, BoundStats, DeviceStats, FaultCosts, LayoutFrames, MemConfig, MemError,
    MemStats, Memory, MemoryLayout, Placement, PsiAccounting, PsiGroupId, PsiTaskId, PsiTotals, RefKind, RegionId, RegionUsage, ResId,
    ReservationKind, ReservationSpec, ReservationStats, SharePolicy, SpaceStats, TaskPsiState, Throttle, Vpn,
};
use crate::model::memory::{reservation_placement, task_placement, AccessStep, MemorySpec, StreamCursor, Target, TaskMemory, MIB};
use crate::model::program::Protocol;
use crate::model::task::{Suspension, TaskSpec};
use crate::program::Step;
use crate::result::{JsonFields, Outcome, Section, SimResult};
use crate::rng::{sub_rng, SimRng};
use crate::scenario::Scenario;
use crate::sched::{JobKey, ServerMemory, Servers};
use crate::time::Nanos;
use serde::Serialize;

/// Hits are applied ahead of time in runs of at most this much compute, so tasks on other
/// CPUs see a run's references at most this early.
const HIT_RUN_NS: u64 = 1_000_000;
/// An `auto` region is decided once every task mapping it has finished this many jobs.
const AUTO_WINDOWS: u64 = 3;

/// A job's progress through its reference string.
#[derive(Clone, Debug)]
pub(crate) struct MemJob {
    refs: Vec<(Vpn, RefKind)>,
    /// Until the job first runs, what makes its references (see [`TaskMemory::skip_job`]).
    deferred: Option<Box<Deferred>>,
    cursor: usize,
    per_ref: Nanos,
    /// Compute left after the last reference.
    tail: Nanos,
    /// Kernel work owed that PSI counts as a memory stall (reclaim, refault handling);
    /// done before `owed`.
    owed_memstall: Nanos,
    /// Compute owed before the next reference (the faulting reference's own work).
    owed: Nanos,
    /// A device read the job must wait for, and what it is stalled on meanwhile.
    wait_until: Option<(Nanos, TaskPsiState)>,
    /// Compute owed once the wait is over (the faulting reference's own work).
    after_wait: Nanos,
    /// The address space the references are made in (the task's, or a component's).
    space: AsId,
    /// Self-suspensions of the job's demand still ahead (a task with both `access` and
    /// `suspend`); `None` for every other job.
    clock: Option<Box<DemandClock>>,
}

/// Where a job with self-suspensions is in its demand: the job's own compute (its references'
/// shares and the tail, not fault handling) counts towards each suspension's `after`.
#[derive(Clone, Debug)]
struct DemandClock {
    /// The suspensions not yet taken, first last.
    ahead: Vec<Suspension>,
    /// Demand run so far.
    done: Nanos,
    /// The last part of `owed` that is demand.
    owed_demand: Nanos,
}

impl DemandClock {
    /// The suspension due now, if its point is reached.
    fn due(&mut self) -> Option<Nanos> {
        let s = self.ahead.last().filter(|s| s.after <= self.done)?;
        let d = s.duration;
        self.ahead.pop();
        Some(d)
    }

    /// How much of `owed` to run now: all of it, or up to the next suspension point (the rest
    /// stays owed).
    fn cut(&mut self, owed: &mut Nanos) -> Nanos {
        let fault_part = *owed - self.owed_demand;
        let room = self.ahead.last().map_or(self.owed_demand, |s| s.after.saturating_sub(self.done).min(self.owed_demand));
        self.done += room;
        self.owed_demand -= room;
        let run = fault_part + room;
        *owed -= run;
        run
    }
}

/// A job's reference string not made yet: the task's generator and stream cursors as they
/// were at its release.
#[derive(Clone, Debug)]
struct Deferred {
    job_index: u64,
    rng: SimRng,
    cursors: Vec<StreamCursor>,
}

struct TaskMem {
    space: AsId,
    private_base: Vpn,
    /// Where each declared region is mapped in this task's space.
    region_base: Vec<Option<Vpn>>,
    psi_task: PsiTaskId,
    cursors: Vec<StreamCursor>,
    rng: SimRng,
    /// Reference buffers of finished jobs, reused: a job's string can be megabytes, and
    /// fresh ones cost page faults and regrowth on every release.
    spare_refs: Vec<Vec<(Vpn, RefKind)>>,
    /// Time its jobs spent suspended waiting for the device.
    fault_wait: Nanos,
    oom_kills: u64,
    /// Its `[[group]]`, whose I/O limits its reads obey.
    group: Option<u32>,
    /// The stream cursors of each access step of its program.
    step_cursors: Vec<Vec<StreamCursor>>,
}

/// A component's own memory: the address space its invocations' access steps touch.
struct ComponentMem {
    name: String,
    space: AsId,
    private_base: Vpn,
    region_base: Vec<Option<Vpn>>,
    rng: SimRng,
    step_cursors: Vec<Vec<StreamCursor>>,
}

/// Where an address space's targets start: its private memory, then each mapped region.
fn target_base(private_base: Vpn, region_base: &[Option<Vpn>], target: Target) -> Vpn {
    match target {
        Target::Private => private_base,
        Target::Region(r) => region_base[r].expect("mapped at setup"),
    }
}

/// One point of the memory timeline.
#[derive(Clone, Debug, PartialEq)]
pub struct MemSample {
    pub time: Nanos,
    /// Pages each reservation accounts (its active, inactive and unevictable lists).
    pub reservation_pages: Vec<u64>,
    /// Resident pages of each task's address space.
    pub task_resident_pages: Vec<u64>,
    /// Physical memory set aside for reservations (see [`MemStats::reserved_physical_frames`]).
    pub reserved_physical_frames: u64,
    /// Frames in use machine-wide.
    pub used_frames: u64,
    /// Pages each server's subtree holds (its bound's count), in file order; empty unless a
    /// server reserves memory.
    pub server_pages: Vec<u64>,
}

/// A component's memory at the end of a run.
#[derive(Clone, Debug, PartialEq)]
pub struct ComponentMemResult {
    pub name: String,
    pub reservation: Option<String>,
    pub stats: SpaceStats,
}

/// Per-task memory totals at the end of a run.
#[derive(Clone, Debug, PartialEq)]
pub struct TaskMemResult {
    pub group: String,
    pub reservation: Option<String>,
    pub stats: SpaceStats,
    pub fault_wait: Nanos,
    /// Jobs killed because no frame could be found for them.
    pub oom_kills: u64,
    /// Per shared region the task maps (in declaration order): the distinct pages it touched
    /// per ended job, whatever its outcome (their mean is the paper's Avg(S) of Sec. IV-C), and
    /// in the largest.
    pub shared_usage: Vec<(String, RegionUsage)>,
    /// Under the MC² layout, the frames holding its pages at the end, per DRAM bank (empty
    /// under the flat layout).
    pub bank_frames: Vec<u64>,
}

/// One DRAM bank of the MC² layout at the end of a run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BankUse {
    pub bank: u32,
    /// The core whose level-A/B tasks own it, `None` for level C.
    pub core: Option<u32>,
    pub frames: u64,
    pub used_frames: u64,
}

/// What a run with page-level memory adds to its results.
#[derive(Clone, Debug, PartialEq)]
pub struct MemoryResult {
    pub page_bytes: u64,
    pub total_frames: u64,
    pub layout: MemoryLayout,
    /// Per DRAM bank under the MC² layout (empty under the flat layout).
    pub banks: Vec<BankUse>,
    pub swap: String,
    pub tasks: Vec<TaskMemResult>,
    /// PSI totals per group, in order of first appearance.
    pub groups: Vec<(String, PsiTotals)>,
    pub reservations: Vec<(String, ReservationStats)>,
    /// Memory-limited groups (`[[group]]`) at the end: size is the final `memory.max`.
    pub limit_groups: Vec<(String, ReservationStats)>,
    pub stats: MemStats,
    pub device: DeviceStats,
    pub timeline: Vec<MemSample>,
    /// Decisions taken for `auto` regions: (region name, decision).
    pub auto_decisions: Vec<(String, AutoDecision)>,
    /// Each component that declares memory, in file order.
    pub components: Vec<ComponentMemResult>,
    /// Each server's bound at the end, in file order (empty unless a server reserves memory).
    pub server_bounds: Vec<(String, BoundStats)>,
    /// The bound of each `[[group]]` some of whose tasks hold their pages in a reservation:
    /// its `memory.max` over all its tasks.
    pub group_bounds: Vec<(String, BoundStats)>,
}

pub(crate) struct MemSim {
    mem: Memory<LayoutFrames>,
    psi: PsiAccounting,
    groups: Vec<(String, PsiGroupId)>,
    tasks: Vec<TaskMem>,
    /// By component index (`None`: it declares no memory).
    components: Vec<Option<ComponentMem>>,
    reservations: Vec<ResId>,
    regions: Vec<RegionId>,
    /// Auto regions not yet decided: (region index, address spaces mapping it).
    auto_pending: Vec<(usize, Vec<AsId>)>,
    auto_decisions: Vec<(String, AutoDecision)>,
    timeline: Vec<MemSample>,
    /// The limit group of each `[[group]]`, with its PSI group.
    limit_groups: Vec<(ResId, PsiGroupId)>,
    /// Per `[[group]]`, the bound its `memory.max` also is over all its tasks, when one of
    /// them holds its pages in a reservation.
    group_bounds: Vec<Option<BoundId>>,
    /// Each server's bound, in file order (empty unless a server reserves memory).
    server_bounds: Vec<BoundId>,
    page_bytes: u64,
    /// Per `[[group]]`, its read limit on the swap device.
    read_throttles: Vec<Throttle>,
    /// Whether any group has a read limit (the fault path looks no further when none has).
    reads_limited: bool,
}

/// MiB for a message: whole numbers bare, others to three decimals.
fn fmt_mib(mib: f64) -> String {
    let text = format!("{mib:.3}");
    text.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// Where a setup error comes from, so the loader can name the key.
pub(crate) struct SetupError {
    pub key: String,
    pub message: String,
}

impl MemSim {
    /// Builds the machine's memory from a validated scenario.
    /// `check_invariants`: check the memory model after every operation (small machines only).
    pub(crate) fn new(
        spec: &MemorySpec,
        task_specs: &[TaskSpec],
        task_names: &[String],
        component_names: &[String],
        seed: u64,
        check_invariants: bool,
    ) -> Result<MemSim, SetupError> {
        let at = |key: String| move |error: MemError| SetupError { key: key.clone(), message: error.to_string() };
        let cfg = MemConfig {
            page_bytes: spec.page_bytes,
            total_frames: spec.total_frames,
            readahead_pages: spec.readahead_pages,
            costs: FaultCosts { swap_in_per_page: spec.swap_in_cpu, ..FaultCosts::default() },
            // Checking every frame after every operation is O(frames): only on small machines.
            check_every_operation: check_invariants && spec.total_frames <= 1 << 16,
            ..MemConfig::default()
        };
        let frames = LayoutFrames::new(spec.layout, spec.total_frames, spec.page_bytes)
            .map_err(|message| SetupError { key: "memory.layout".into(), message })?;
        let mut mem = Memory::with_allocator(cfg, spec.swap.clone(), frames).map_err(at("memory".into()))?;
        let mut reservations = Vec::new();
        for (i, r) in spec.reservations.iter().enumerate() {
            let rs = ReservationSpec { name: r.name.clone(), pages: r.pages, kind: r.kind };
            let placement = reservation_placement(spec.layout, i, task_specs);
            reservations.push(mem.create_reservation_at(Nanos::ZERO, rs, placement).map_err(at(format!("reservation[{i}].size_mb")))?);
        }
        let mut bounds_in_order: Vec<BoundId> = Vec::new();
        for sb in &spec.server_bounds {
            let bs = BoundSpec { name: sb.name.clone(), pages: sb.pages, kind: sb.kind, parent: sb.parent.map(|p| bounds_in_order[p]) };
            bounds_in_order.push(mem.create_bound(bs).map_err(at(format!("scheduler.server[{}].reserve.memory_mib", sb.server)))?);
        }
        let mut server_bounds = vec![BoundId(0); bounds_in_order.len()];
        for (sb, &b) in spec.server_bounds.iter().zip(&bounds_in_order) {
            server_bounds[sb.server] = b;
        }
        let mut regions = Vec::new();
        for (i, r) in spec.regions.iter().enumerate() {
            regions.push(mem.create_shared(&r.name, r.kind, r.pages, r.policy).map_err(at(format!("region[{i}]")))?);
        }
        let mut psi = PsiAccounting::new();
        let mut groups: Vec<(String, PsiGroupId)> = Vec::new();
        let mut limit_groups = Vec::new();
        for (i, g) in spec.groups.iter().enumerate() {
            let pages = g.max_pages.unwrap_or(u64::from(spec.total_frames));
            let rs = ReservationSpec { name: g.name.clone(), pages, kind: ReservationKind::Limit };
            let res = mem.create_reservation(Nanos::ZERO, rs).map_err(at(format!("group[{i}].max_mb")))?;
            mem.set_limit_protection(res, g.high_pages, g.min_pages, g.low_pages).map_err(at(format!("group[{i}]")))?;
            let pg = psi.add_group(None);
            groups.push((g.name.clone(), pg));
            limit_groups.push((res, pg));
        }
        // A group whose tasks' pages a reservation holds caps them through a bound as well.
        let mut group_bounds = Vec::new();
        for (i, g) in spec.groups.iter().enumerate() {
            let reserved = task_specs.iter().filter_map(|t| t.memory.as_ref()).any(|tm| tm.group == g.name && tm.reservation.is_some());
            let bound = reserved
                .then(|| mem.create_bound(BoundSpec { name: g.name.clone(), pages: g.max_pages, kind: BoundKind::Soft, parent: None }))
                .transpose()
                .map_err(at(format!("group[{i}].max_mb")))?;
            group_bounds.push(bound);
        }
        let mut tasks = Vec::new();
        for (ti, t) in task_specs.iter().enumerate() {
            let tm = t.memory.as_ref().expect("every task has a memory declaration when [memory] exists");
            let key = |f: &str| format!("task[{ti}].{f}");
            let group = spec.groups.iter().position(|g| g.name == tm.group);
            let group_index = group.map(|gi| u32::try_from(gi).expect("fewer than 2^32 groups"));
            // Its reservation holds its pages; else its memory-limited group; else the global pool.
            let pool = match (tm.reservation, group) {
                (Some(r), _) => Some(reservations[r]),
                (None, Some(gi)) => Some(limit_groups[gi].0),
                (None, None) => None,
            };
            let place = task_placement(spec.layout, t);
            let space = mem.create_space_at(&task_names[ti], pool, place).map_err(at(key("reservation")))?;
            // Its server's memory bound and its group's; pinned pages no bound counts.
            let server_bound = spec.server_bounds.iter().position(|sb| sb.tasks.contains(&ti)).map(|b| bounds_in_order[b]);
            for b in [server_bound, group.and_then(|gi| group_bounds[gi])].into_iter().flatten().filter(|_| !place.pins_pages()) {
                mem.bind_space(space, b).map_err(at(key("server")))?;
            }
            let private_base = if tm.private_pages > 0 {
                mem.map_private(space, "private", tm.private_pages).map_err(at(key("private_mb")))?.1
            } else {
                Vpn(0)
            };
            let mut region_base = vec![None; regions.len()];
            for r in tm.regions() {
                let mapped = mem.map_shared(Nanos::ZERO, space, regions[r], true).map_err(|e| match e {
                    // The model names the group by its pool number; the user knows names.
                    MemError::UnsupportedForLimit(_) => SetupError {
                        key: key("access"),
                        message: format!(
                            "region {:?} uses policy `{}`, which needs per-reservation accounting that memory-limited group {:?} does not have; use a `global`, `private` or `first-touch` region",
                            spec.regions[r].name, spec.regions[r].policy, tm.group
                        ),
                    },
                    e => at(key("access"))(e),
                })?;
                region_base[r] = Some(mapped);
            }
            let group = match groups.iter().find(|(n, _)| *n == tm.group) {
                Some(&(_, g)) => g,
                None => {
                    let g = psi.add_group(None);
                    groups.push((tm.group.clone(), g));
                    g
                }
            };
            tasks.push(TaskMem {
                space,
                private_base,
                region_base,
                psi_task: psi.add_task(group),
                cursors: vec![StreamCursor::default(); tm.streams.len()],
                rng: sub_rng(seed, "task-memory", ti as u64),
                spare_refs: Vec::new(),
                fault_wait: Nanos::ZERO,
                oom_kills: 0,
                group: group_index,
                step_cursors: tm.steps.iter().map(|st| vec![StreamCursor::default(); st.streams.len()]).collect(),
            });
        }
        let mut components = Vec::with_capacity(spec.components.len());
        for (ci, cm) in spec.components.iter().enumerate() {
            let Some(cm) = cm else {
                components.push(None);
                continue;
            };
            let key = |f: &str| format!("component[{ci}].{f}");
            let name = format!("component {}", component_names[ci]);
            let bound = cm.reservation.map(|r| reservations[r]);
            let space = mem.create_space_at(&name, bound, Placement::Any).map_err(at(key("reservation")))?;
            let private_base = if cm.private_pages > 0 {
                mem.map_private(space, "private", cm.private_pages).map_err(at(key("private_mb")))?.1
            } else {
                Vpn(0)
            };
            let mut region_base = vec![None; regions.len()];
            for r in cm.regions() {
                region_base[r] = Some(mem.map_shared(Nanos::ZERO, space, regions[r], true).map_err(at(key("program")))?);
            }
            components.push(Some(ComponentMem {
                name: component_names[ci].clone(),
                space,
                private_base,
                region_base,
                rng: sub_rng(seed, "component-memory", ci as u64),
                step_cursors: cm.steps.iter().map(|st| vec![StreamCursor::default(); st.streams.len()]).collect(),
            }));
        }
        let mut auto_pending = Vec::new();
        for (ri, r) in spec.regions.iter().enumerate() {
            match r.policy {
                SharePolicy::Spel => {
                    mem.lock_region(Nanos::ZERO, regions[ri]).map_err(|e| {
                        // The model counts in pages and numbers reservations; the file names them in MiB.
                        let key = format!("region[{ri}].policy");
                        let MemError::SpelAdmission { res, effective, need, .. } = e else { return at(key)(e) };
                        let Some(i) = reservations.iter().position(|r| r.0 == res) else { return at(key)(e) };
                        let mib = |pages: u64| pages as f64 * spec.page_bytes as f64 / MIB;
                        let message = format!(
                            "SPEL cannot lock region {:?} ({} MiB): reservation {:?} has {} MiB not yet locked, which must exceed the region; make its size_mb at least {} (reservation[{i}]) or use policy `spc`",
                            r.name,
                            fmt_mib(mib(u64::from(r.pages))),
                            spec.reservations[i].name,
                            fmt_mib(mib(effective)),
                            fmt_mib((mib(need) * 1000.0).ceil() / 1000.0),
                        );
                        SetupError { key, message }
                    })?;
                }
                SharePolicy::Auto => {
                    let tasks_mapping = tasks.iter().filter(|t| t.region_base[ri].is_some()).map(|t| t.space);
                    let components_mapping = components.iter().flatten().filter(|c| c.region_base[ri].is_some()).map(|c| c.space);
                    auto_pending.push((ri, tasks_mapping.chain(components_mapping).collect()));
                }
                _ => {}
            }
        }
        Ok(MemSim {
            mem,
            psi,
            groups,
            tasks,
            components,
            reservations,
            regions,
            auto_pending,
            auto_decisions: Vec::new(),
            timeline: Vec::new(),
            read_throttles: vec![Throttle::default(); spec.groups.len()],
            reads_limited: false,
            limit_groups,
            group_bounds,
            server_bounds,
            page_bytes: spec.page_bytes,
        })
    }

    /// The reference string of job `job_index` of task `ti`, with `demand` of compute spread
    /// evenly over it. The string itself is made when the job first runs, from the draws it
    /// would have taken now.
    pub(crate) fn start_job(&mut self, ti: usize, tm: &TaskMemory, job_index: u64, demand: Nanos, suspensions: &[Suspension]) -> MemJob {
        let t = &mut self.tasks[ti];
        let deferred = Deferred { job_index, rng: t.rng.clone(), cursors: t.cursors.clone() };
        // Discards are not accesses: the job's compute is spread over the others only.
        let (n, discards) = tm.skip_job(job_index, &mut t.cursors, &mut t.rng);
        let n = n as u64;
        let per_ref = Nanos(demand.0.checked_div(n).unwrap_or(0));
        let tail = demand - Nanos(per_ref.0 * n);
        MemJob {
            refs: Vec::new(),
            deferred: (n > 0 || discards > 0).then(|| Box::new(deferred)),
            cursor: 0,
            per_ref,
            tail,
            owed_memstall: Nanos::ZERO,
            owed: Nanos::ZERO,
            wait_until: None,
            after_wait: Nanos::ZERO,
            space: t.space,
            clock: (!suspensions.is_empty()).then(|| {
                Box::new(DemandClock { ahead: suspensions.iter().rev().copied().collect(), done: Nanos::ZERO, owed_demand: Nanos::ZERO })
            }),
        }
    }

    /// A run of access step `step` of task `ti`'s program (`component`: of that component's,
    /// inside an invocation) for job `job_index`, with `compute` spread evenly over its
    /// references: its references are made now.
    pub(crate) fn start_access(
        &mut self,
        ti: usize,
        component: Option<usize>,
        step: &AccessStep,
        step_index: usize,
        job_index: u64,
        compute: Nanos,
    ) -> MemJob {
        let mut refs = self.tasks[ti].spare_refs.pop().unwrap_or_default();
        let space = match component {
            None => {
                let t = &mut self.tasks[ti];
                let (private_base, region_base) = (t.private_base, &t.region_base);
                step.refs(job_index, &mut t.step_cursors[step_index], &mut t.rng, |x| target_base(private_base, region_base, x), &mut refs);
                t.space
            }
            Some(c) => {
                let cm = self.components[c].as_mut().expect("a component with access steps has its memory");
                let (private_base, region_base) = (cm.private_base, &cm.region_base);
                step.refs(
                    job_index,
                    &mut cm.step_cursors[step_index],
                    &mut cm.rng,
                    |x| target_base(private_base, region_base, x),
                    &mut refs,
                );
                cm.space
            }
        };
        // Discards are not accesses: the compute is spread over the others only.
        let n = refs.iter().filter(|(_, k)| *k != RefKind::Discard).count() as u64;
        let per_ref = Nanos(compute.0.checked_div(n).unwrap_or(0));
        let tail = compute - Nanos(per_ref.0 * n);
        MemJob {
            refs,
            deferred: None,
            cursor: 0,
            per_ref,
            tail,
            owed_memstall: Nanos::ZERO,
            owed: Nanos::ZERO,
            wait_until: None,
            after_wait: Nanos::ZERO,
            space,
            clock: None,
        }
    }

    /// Makes a deferred job's reference string.
    fn make_refs(&mut self, ti: usize, tm: &TaskMemory, d: Deferred) -> Vec<(Vpn, RefKind)> {
        let Deferred { job_index, mut rng, mut cursors } = d;
        let t = &mut self.tasks[ti];
        let mut refs = t.spare_refs.pop().unwrap_or_default();
        let (private_base, region_base) = (t.private_base, &t.region_base);
        tm.job_refs(job_index, &mut cursors, &mut rng, |target| target_base(private_base, region_base, target), &mut refs);
        refs
    }

    /// A job of task `ti` is over: its reference buffer goes back for the task's next jobs.
    pub(crate) fn recycle(&mut self, ti: usize, job: MemJob) {
        let mut refs = job.refs;
        // A job dropped before it ran never had a buffer.
        if refs.capacity() > 0 {
            refs.clear();
            self.tasks[ti].spare_refs.push(refs);
        }
    }

    /// The job's next step at `now`; references whose time has come are made here.
    pub(crate) fn next_step(&mut self, ti: usize, tm: &TaskMemory, job: &mut MemJob, now: Nanos) -> Step {
        if let Some(d) = job.deferred.take() {
            job.refs = self.make_refs(ti, tm, *d);
        }
        let space = job.space;
        // Order within a faulting reference: the kernel's CPU work, the wait for the device,
        // then the reference's own compute.
        loop {
            if let Some(clock) = job.clock.as_deref_mut() {
                if job.owed_memstall == Nanos::ZERO && job.wait_until.is_none() {
                    if let Some(d) = clock.due() {
                        // A plain self-suspension is sleep, not a stall.
                        self.set_state(ti, now, TaskPsiState::IDLE);
                        return Step::Suspend(d);
                    }
                }
            }
            if job.owed_memstall > Nanos::ZERO {
                // Reclaim (and a refault's kernel work) first: on the CPU, but a memory stall.
                self.set_state(ti, now, TaskPsiState::RECLAIMING);
                return Step::Compute(std::mem::take(&mut job.owed_memstall));
            }
            if job.owed > Nanos::ZERO {
                self.set_state(ti, now, TaskPsiState::RUNNABLE);
                let run = match job.clock.as_deref_mut() {
                    Some(clock) => clock.cut(&mut job.owed),
                    None => std::mem::take(&mut job.owed),
                };
                return Step::Compute(run);
            }
            if let Some((until, stall)) = job.wait_until.take() {
                job.owed = std::mem::take(&mut job.after_wait);
                if let Some(clock) = job.clock.as_deref_mut() {
                    // After a major fault, the reference's own share; after a wait in reclaim, none.
                    clock.owed_demand = job.per_ref.min(job.owed);
                }
                if until > now {
                    self.set_state(ti, now, stall);
                    self.tasks[ti].fault_wait += until - now;
                    return Step::Suspend(until - now);
                }
                continue;
            }
            let Some(&(vpn, kind)) = job.refs.get(job.cursor) else {
                if job.tail > Nanos::ZERO {
                    self.set_state(ti, now, TaskPsiState::RUNNABLE);
                    let Some(clock) = job.clock.as_deref_mut() else { return Step::Compute(std::mem::take(&mut job.tail)) };
                    job.owed = std::mem::take(&mut job.tail);
                    clock.owed_demand = job.owed;
                    continue;
                }
                if let Some(d) = job.clock.as_deref_mut().and_then(DemandClock::due) {
                    self.set_state(ti, now, TaskPsiState::IDLE);
                    return Step::Suspend(d);
                }
                return Step::Done;
            };
            if self.reads_limited {
                if let Some(at) = self.read_held_until(ti, space, vpn, kind, now) {
                    // Its group's read limit holds the fault back; it is taken when the limit allows.
                    job.wait_until = Some((at, TaskPsiState::blocked(true, true)));
                    continue;
                }
            }
            job.cursor += 1;
            if kind == RefKind::Discard {
                // Freeing memory costs the job nothing in this model.
                self.mem.discard(space, vpn).expect("discard streams address private pages");
                continue;
            }
            let read_before = if self.reads_limited { self.swap_bytes_read() } else { 0 };
            let access = match self.mem.access(now, space, vpn, kind) {
                Ok(a) => a,
                Err(MemError::PlacementExhausted { .. }) => {
                    // Only level-A/B tasks of its core free frames of its bank, never the
                    // device: waiting for it would not help.
                    self.tasks[ti].oom_kills += 1;
                    return Step::Killed;
                }
                Err(MemError::OutOfMemory | MemError::ReservationExhausted(_) | MemError::BoundExhausted(_)) => {
                    // Every reclaimable frame is under I/O: wait in reclaim for the device and
                    // retry, as direct reclaim does. With the device idle nothing will ever free
                    // up: the task is OOM-killed.
                    let idle_at = self.mem.device(crate::mem::DeviceId::SWAP).map(|d| d.busy_until()).unwrap_or(now);
                    if idle_at > now {
                        job.cursor -= 1;
                        job.wait_until = Some((idle_at, TaskPsiState::blocked(true, false)));
                        continue;
                    }
                    self.tasks[ti].oom_kills += 1;
                    return Step::Killed;
                }
                Err(e) => panic!("streams only address mapped pages: {e}"),
            };
            match access {
                Access::Hit => {
                    // Apply the run of hits that follows now: their timing cannot change.
                    let max_run = HIT_RUN_NS.checked_div(job.per_ref.0).map_or(u64::MAX, |r| r.max(1));
                    let room = usize::try_from(max_run - 1).unwrap_or(usize::MAX);
                    let end = job.cursor.saturating_add(room).min(job.refs.len());
                    let more = self.mem.hit_run(space, &job.refs[job.cursor..end]);
                    job.cursor += more;
                    job.owed = Nanos(job.per_ref.0 * (1 + more as u64));
                    if let Some(clock) = job.clock.as_deref_mut() {
                        clock.owed_demand = job.owed;
                    }
                }
                Access::Minor { cpu, memstall_cpu } => {
                    job.owed_memstall = memstall_cpu;
                    job.owed = cpu - memstall_cpu + job.per_ref;
                    if let Some(clock) = job.clock.as_deref_mut() {
                        clock.owed_demand = job.per_ref;
                    }
                }
                major @ Access::Major { cpu, memstall_cpu, after_cpu, ready_at, .. } => {
                    if self.reads_limited {
                        self.charge_read(ti, now, read_before);
                    }
                    job.owed_memstall = memstall_cpu;
                    job.owed = cpu - memstall_cpu;
                    if let Some(clock) = job.clock.as_deref_mut() {
                        clock.owed_demand = Nanos::ZERO;
                    }
                    job.wait_until = Some((ready_at, major.stall_state().expect("a major fault stalls")));
                    job.after_wait = after_cpu + job.per_ref;
                }
            }
        }
    }

    /// When task `ti`'s reference would read from the swap device and its group's read limit
    /// holds the read back past `now`: the instant the limit lets it go.
    fn read_held_until(&self, ti: usize, space: AsId, vpn: Vpn, kind: RefKind, now: Nanos) -> Option<Nanos> {
        let throttle = &self.read_throttles[self.tasks[ti].group? as usize];
        let at = throttle.release_at(now);
        (at > now && self.mem.would_read(space, vpn, kind)).then_some(at)
    }

    fn swap_bytes_read(&self) -> u64 {
        self.mem.device(crate::mem::DeviceId::SWAP).map_or(0, |d| d.stats().bytes_read)
    }

    /// Charges what task `ti`'s fault read from the swap device since `read_before` to its
    /// group's read limit.
    fn charge_read(&mut self, ti: usize, now: Nanos, read_before: u64) {
        let read = self.swap_bytes_read() - read_before;
        if let Some(g) = self.tasks[ti].group.filter(|_| read > 0) {
            self.read_throttles[g as usize].pass(now, read);
        }
    }

    /// Sets the I/O limits of group `gi` on the swap device (bytes per second; `None`: none):
    /// its tasks' reads wait for the read limit, and write-backs of its pages for the write one.
    pub(crate) fn set_group_io_limits(&mut self, gi: usize, read_bytes_per_s: Option<u64>, write_bytes_per_s: Option<u64>) {
        self.read_throttles[gi].set_limit(read_bytes_per_s);
        self.reads_limited = self.read_throttles.iter().any(|t| t.limit().is_some());
        self.mem.set_write_limit(self.limit_groups[gi].0, write_bytes_per_s).expect("a limit group");
    }

    pub(crate) fn set_state(&mut self, ti: usize, now: Nanos, state: TaskPsiState) {
        let t = self.tasks[ti].psi_task;
        if self.psi.state(t) != state {
            self.psi.set_state(now, t, state);
        }
    }

    /// A job of task `ti` ended at `now`; `idle` if the task has no job left.
    pub(crate) fn job_ended(&mut self, ti: usize, now: Nanos, idle: bool, components: &[u32]) {
        self.mem.end_window(self.tasks[ti].space).expect("space exists");
        // A component's window is a job that touched its memory, like a task's.
        for &c in components {
            let space = self.components[c as usize].as_ref().expect("a component with memory").space;
            self.mem.end_window(space).expect("space exists");
        }
        if idle {
            self.set_state(ti, now, TaskPsiState::IDLE);
        }
        let mut k = 0;
        while k < self.auto_pending.len() {
            let (ri, users) = &self.auto_pending[k];
            let region = self.regions[*ri];
            let usage = self.mem.region_usage(region).expect("region exists");
            let measured = |space: AsId| usage.iter().any(|(s, u)| *s == space && u.windows >= AUTO_WINDOWS);
            if users.iter().all(|&space| measured(space)) {
                let name = self.mem.region_name(region).unwrap_or("?").to_string();
                if let Ok(d) = self.mem.resolve_auto(now, region) {
                    self.auto_decisions.push((name, d));
                }
                self.auto_pending.remove(k);
            } else {
                k += 1;
            }
        }
    }

    /// Memory the managed groups share: the machine minus what reservations and locks took.
    pub(crate) fn managed_bytes(&self) -> u64 {
        let st = self.mem.stats();
        (st.total_frames - st.committed_frames) * self.page_bytes
    }

    /// Stall totals and charged memory of `[[group]]` `gi` at `now`: what its limit group
    /// holds, or with a bound (some of its tasks hold their pages in reservations) what all
    /// its tasks hold.
    pub(crate) fn group_state(&self, gi: usize, now: Nanos) -> (PsiTotals, u64) {
        let (res, pg) = self.limit_groups[gi];
        let charged = match self.group_bounds[gi] {
            Some(b) => self.mem.bound_charged_pages(b).expect("bound exists"),
            None => self.mem.reservation_charged_pages(res).expect("group exists"),
        };
        (self.psi.totals(pg, now), charged * self.page_bytes)
    }

    /// Sets `memory.max` of group `gi` (pages; evicting down to it); false if it could not
    /// (every page of the group is pinned).
    pub(crate) fn set_group_max(&mut self, gi: usize, now: Nanos, pages: u64) -> bool {
        let capped = self.group_bounds[gi].is_none_or(|b| self.mem.set_bound_size(now, b, Some(pages)).is_ok());
        capped && self.mem.set_reservation_size(now, self.limit_groups[gi].0, pages).is_ok()
    }

    /// Reclaims up to `pages` of group `gi` at `now` without changing its limit (what its
    /// limit shrinking would evict, coldest first); returns the pages it gave up. A group with
    /// a bound gives them up through it (it counts the pages reservations hold too).
    pub(crate) fn reclaim_group(&mut self, gi: usize, now: Nanos, pages: u64) -> u64 {
        match self.group_bounds[gi] {
            Some(b) => self.mem.reclaim_bound(now, b, pages).expect("bound exists"),
            None => self.mem.reclaim_limit_group(now, self.limit_groups[gi].0, pages).expect("a limit group"),
        }
    }

    pub(crate) fn set_group_protection(&mut self, gi: usize, high: Option<u64>, min: Option<u64>, low: Option<u64>) {
        self.mem.set_limit_protection(self.limit_groups[gi].0, high, min, low).expect("a limit group");
    }

    pub(crate) fn page_bytes(&self) -> u64 {
        self.page_bytes
    }

    pub(crate) fn total_frames(&self) -> u64 {
        u64::from(self.mem.config().total_frames)
    }

    pub(crate) fn sample(&mut self, now: Nanos) {
        let stats = self.mem.stats();
        self.timeline.push(MemSample {
            time: now,
            reservation_pages: self.reservations.iter().map(|&r| self.mem.reservation_charged_pages(r).unwrap_or(0)).collect(),
            task_resident_pages: self.tasks.iter().map(|t| self.mem.space_stats(t.space).map(|s| s.resident_pages).unwrap_or(0)).collect(),
            reserved_physical_frames: stats.reserved_physical_frames,
            used_frames: stats.total_frames - stats.global_free_frames,
            server_pages: self.server_bounds.iter().map(|&b| self.mem.bound_charged_pages(b).unwrap_or(0)).collect(),
        });
    }

    /// What `t` touched of each shared region it maps, per ended job (none before its first ends).
    fn task_shared_usage(&self, t: &TaskMem, spec: &MemorySpec) -> Vec<(String, RegionUsage)> {
        (0..self.regions.len())
            .filter(|&ri| t.region_base[ri].is_some() && spec.regions[ri].kind.is_shared())
            .map(|ri| {
                let usage = self.mem.region_usage(self.regions[ri]).expect("region exists");
                let mine = usage.iter().find(|(s, _)| *s == t.space).map(|(_, u)| *u).unwrap_or_default();
                (spec.regions[ri].name.clone(), mine)
            })
            .collect()
    }

    /// The frames of `t`'s pages per bank, under the MC² layout.
    fn task_bank_frames(&self, t: &TaskMem) -> Vec<u64> {
        let Some(buddy) = self.mem.frame_allocator().mc2() else { return Vec::new() };
        let p = buddy.platform();
        let mut per_bank = vec![0; p.banks as usize];
        for f in self.mem.space_frames(t.space) {
            per_bank[p.bank_colour(f).0 as usize] += 1;
        }
        per_bank
    }

    /// Every bank's owner and use, under the MC² layout.
    fn bank_use(&self) -> Vec<BankUse> {
        let Some(buddy) = self.mem.frame_allocator().mc2() else { return Vec::new() };
        let p = buddy.platform();
        let frames = p.total_frames() as u64 / u64::from(p.banks);
        // Free in any pool: a reservation's free frames hold no page either.
        let mut free = buddy.free_frames_by_bank(GLOBAL_POOL);
        for pool in 1..buddy.pools() {
            for (f, n) in free.iter_mut().zip(buddy.free_frames_by_bank(pool)) {
                *f += n;
            }
        }
        (0..p.banks)
            .map(|bank| BankUse {
                bank,
                core: p.core_ab.iter().position(|c| c.banks >> bank & 1 == 1).map(|c| c as u32),
                frames,
                used_frames: frames - free[bank as usize],
            })
            .collect()
    }

    pub(crate) fn finish(self, now: Nanos, spec: &MemorySpec, task_specs: &[TaskSpec]) -> MemoryResult {
        let tasks = self
            .tasks
            .iter()
            .zip(task_specs)
            .map(|(t, spec_t)| {
                let tm = spec_t.memory.as_ref().expect("declared");
                TaskMemResult {
                    group: tm.group.clone(),
                    reservation: tm.reservation.map(|r| spec.reservations[r].name.clone()),
                    stats: self.mem.space_stats(t.space).unwrap_or_default(),
                    fault_wait: t.fault_wait,
                    oom_kills: t.oom_kills,
                    shared_usage: self.task_shared_usage(t, spec),
                    bank_frames: self.task_bank_frames(t),
                }
            })
            .collect();
        let components = self
            .components
            .iter()
            .zip(&spec.components)
            .filter_map(|(c, cm)| {
                let (c, cm) = (c.as_ref()?, cm.as_ref()?);
                Some(ComponentMemResult {
                    name: c.name.clone(),
                    reservation: cm.reservation.map(|r| spec.reservations[r].name.clone()),
                    stats: self.mem.space_stats(c.space).unwrap_or_default(),
                })
            })
            .collect();
        MemoryResult {
            page_bytes: spec.page_bytes,
            total_frames: u64::from(spec.total_frames),
            layout: spec.layout,
            banks: self.bank_use(),
            swap: spec.swap_name.clone(),
            tasks,
            groups: self.groups.iter().map(|(n, g)| (n.clone(), self.psi.totals(*g, now))).collect(),
            reservations: spec
                .reservations
                .iter()
                .zip(&self.reservations)
                .map(|(d, &r)| (d.name.clone(), self.mem.reservation_stats(r).expect("exists")))
                .collect(),
            limit_groups: spec
                .groups
                .iter()
                .zip(&self.limit_groups)
                .map(|(g, &(r, _))| (g.name.clone(), self.mem.reservation_stats(r).expect("exists")))
                .collect(),
            stats: self.mem.stats(),
            device: self.mem.device(crate::mem::DeviceId::SWAP).map(|d| d.stats()).unwrap_or_default(),
            timeline: self.timeline,
            auto_decisions: self.auto_decisions,
            components,
            server_bounds: self
                .server_bounds
                .iter()
                .map(|&b| (self.mem.bound_name(b).to_string(), self.mem.bound_stats(b).expect("exists")))
                .collect(),
            group_bounds: self
                .group_bounds
                .iter()
                .flatten()
                .map(|&b| (self.mem.bound_name(b).to_string(), self.mem.bound_stats(b).expect("exists")))
                .collect(),
        }
    }
}

/// The memory model as a subsystem of the engine: it takes over the steps of jobs whose tasks
/// have access streams (their references, faults and stalls), follows the PSI state of the
/// other tasks' jobs, and samples the memory timeline.
pub(crate) struct MemorySubsystem {
    model: MemSim,
    spec: MemorySpec,
    tasks: Vec<TaskSpec>,
    /// The reference string of each live job whose steps come from here, by job key: a task
    /// with `access` streams' whole job, or the access step a program runs now.
    jobs: Vec<Option<Box<MemJob>>>,
    /// Whether this subsystem takes over the jobs of tasks with `access` streams; when not
    /// (under SRP), the program interpreter does and runs them through [`Self::access_step`].
    claims_streams: bool,
    /// The components each live job touched the memory of, by job key.
    touched: Vec<Vec<u32>>,
}

/// The one event tag of [`MemorySubsystem`]: a point of the memory timeline.
const SAMPLE: u64 = 0;

impl MemorySubsystem {
    /// The memory of a validated scenario.
    pub(crate) fn new(s: &Scenario, seed: u64, check_invariants: bool) -> Option<MemorySubsystem> {
        let spec = s.memory.as_ref()?;
        let names: Vec<String> = s.tasks.iter().map(|t| t.name.clone()).collect();
        let component_names: Vec<String> = s.components.iter().map(|c| c.name.clone()).collect();
        let model = match MemSim::new(spec, &s.tasks, &names, &component_names, seed, check_invariants) {
            Ok(m) => m,
            Err(e) => panic!("memory setup failed after validation: {}: {}", e.key, e.message),
        };
        // SRP holds back every job of its CPUs at their start: the interpreter takes them all.
        let claims_streams = !s.resources.iter().any(|r| r.protocol == Protocol::Srp);
        Some(MemorySubsystem { model, spec: spec.clone(), tasks: s.tasks.clone(), jobs: Vec::new(), claims_streams, touched: Vec::new() })
    }

    /// Starts a run of access step `step` for `job`: of its task's program, or of component
    /// `component`'s inside an invocation, with `compute` spread over its references. Its
    /// steps then come from [`Self::access_step`].
    pub(crate) fn begin_access(&mut self, job: &JobInfo, component: Option<usize>, step: u32, compute: Nanos) {
        let step = step as usize;
        let spec = match component {
            None => &self.tasks[job.task].memory.as_ref().expect("a task with access steps has memory").steps[step],
            Some(c) => &self.spec.components[c].as_ref().expect("a component with access steps has memory").steps[step],
        };
        let mj = self.model.start_access(job.task, component, spec, step, job.index, compute);
        if let Some(c) = component {
            let k = job.key as usize;
            if k >= self.touched.len() {
                self.touched.resize_with(k + 1, Vec::new);
            }
            if !self.touched[k].contains(&(c as u32)) {
                self.touched[k].push(c as u32);
            }
        }
        let slot = self.job_slot(job.key);
        if let Some(old) = slot.replace(Box::new(mj)) {
            self.model.recycle(job.task, *old);
        }
    }

    /// The next step of `job`'s memory work at `now`: of the access step it runs, or of its
    /// whole job for a task with `access` streams this subsystem does not take over.
    /// [`Step::Done`] once the references are done.
    pub(crate) fn access_step(&mut self, job: &JobInfo, now: Nanos) -> Step {
        let tm = self.tasks[job.task].memory.as_ref().expect("a job with memory work has its task's declaration");
        let mj = self.jobs[job.key as usize].as_deref_mut().expect("a job with memory work");
        self.model.next_step(job.task, tm, mj, now)
    }

    /// Tells the stall accounting what task `task`'s job does now: runs (`runnable`) or waits
    /// for something other than memory.
    pub(crate) fn task_state(&mut self, task: usize, now: Nanos, runnable: bool) {
        self.model.set_state(task, now, if runnable { TaskPsiState::RUNNABLE } else { TaskPsiState::IDLE });
    }

    pub(crate) fn model_mut(&mut self) -> &mut MemSim {
        &mut self.model
    }

    fn job_slot(&mut self, key: JobKey) -> &mut Option<Box<MemJob>> {
        let k = key as usize;
        if k >= self.jobs.len() {
            self.jobs.resize_with(k + 1, || None);
        }
        &mut self.jobs[k]
    }
}

impl Subsystem for MemorySubsystem {
    fn name(&self) -> &'static str {
        "memory"
    }

    fn start(&mut self, cx: &mut Context<'_>) {
        cx.schedule(cx.now(), SAMPLE);
    }

    fn on_release(&mut self, _cx: &mut Context<'_>, job: &JobInfo) -> bool {
        let spec = &self.tasks[job.task];
        let Some(tm) = spec.memory.as_ref().filter(|tm| !tm.streams.is_empty()) else { return false };
        let mj = self.model.start_job(job.task, tm, job.index, job.demand, &spec.suspensions);
        *self.job_slot(job.key) = Some(Box::new(mj));
        self.claims_streams
    }

    #[inline]
    fn next_step(&mut self, cx: &mut Context<'_>, job: &JobInfo) -> Step {
        let tm = self.tasks[job.task].memory.as_ref().expect("a job with streams has its task's declaration");
        let mj = self.jobs[job.key as usize].as_deref_mut().expect("a job this subsystem took over");
        self.model.next_step(job.task, tm, mj, cx.now())
    }

    fn on_program_step(&mut self, cx: &mut Context<'_>, job: &JobInfo, step: Step) {
        match step {
            Step::Compute(_) => self.model.set_state(job.task, cx.now(), TaskPsiState::RUNNABLE),
            // A plain self-suspension is sleep, not a stall.
            Step::Suspend(_) => self.model.set_state(job.task, cx.now(), TaskPsiState::IDLE),
            _ => {}
        }
    }

    fn on_end(&mut self, cx: &mut Context<'_>, job: &JobInfo, _outcome: Outcome, task_idle: bool) {
        let touched = self.touched.get_mut(job.key as usize).map(std::mem::take).unwrap_or_default();
        self.model.job_ended(job.task, cx.now(), task_idle, &touched);
        if let Some(mj) = self.jobs.get_mut(job.key as usize).and_then(Option::take) {
            self.model.recycle(job.task, *mj);
        }
    }

    fn on_event(&mut self, cx: &mut Context<'_>, tag: u64) {
        debug_assert_eq!(tag, SAMPLE);
        let now = cx.now();
        self.model.sample(now);
        cx.schedule(now + self.spec.sample_interval, SAMPLE);
    }

    fn finish(self: Box<Self>, horizon: Nanos, result: &mut SimResult) {
        let MemorySubsystem { model, spec, tasks, .. } = *self;
        let memory = model.finish(horizon, &spec, &tasks);
        // Each server's memory reservation and the most its subtree held, beside its budget.
        if let Some(servers) = result.section_mut::<Servers>() {
            let mut by_server: Vec<_> = spec.server_bounds.iter().collect();
            by_server.sort_by_key(|sb| sb.server);
            for ((summary, sb), (_, stats)) in servers.0.iter_mut().zip(by_server).zip(&memory.server_bounds) {
                summary.memory = Some(ServerMemory {
                    reserved_bytes: sb.bytes,
                    kind: sb.bytes.map(|_| sb.kind.as_str()),
                    peak_resident_pages: stats.peak_pages,
                });
            }
        }
        result.set_section(memory);
    }
}

/// The memory section's place in the summary: first.
impl Section for MemoryResult {
    const ORDER: u32 = 100;

    fn write_json(&self, run: &SimResult, out: &mut JsonFields) {
        let m = self;
        let memory = JsonMemory {
            page_bytes: m.page_bytes,
            total_frames: m.total_frames,
            layout: (m.layout != crate::mem::MemoryLayout::Flat).then(|| m.layout.name()),
            banks: m
                .banks
                .iter()
                .map(|b| JsonBank {
                    bank: b.bank,
                    owner: b.core.map_or_else(|| "level C".to_string(), |c| format!("core {c}")),
                    frames: b.frames,
                    used_frames: b.used_frames,
                })
                .collect(),
            swap: &m.swap,
            tasks: run
                .tasks
                .iter()
                .zip(&m.tasks)
                .map(|(t, tm)| JsonTaskMemory {
                    name: &t.name,
                    group: &tm.group,
                    reservation: tm.reservation.as_deref(),
                    minor_faults: tm.stats.minor_faults,
                    major_faults: tm.stats.major_faults,
                    pages_swapped_in: tm.stats.pages_swapped_in,
                    pages_swapped_out: tm.stats.pages_swapped_out,
                    resident_pages: tm.stats.resident_pages,
                    peak_resident_pages: tm.stats.peak_resident_pages,
                    fault_wait_ms: tm.fault_wait.as_ms_f64(),
                    oom_kills: tm.oom_kills,
                    shared_regions: tm
                        .shared_usage
                        .iter()
                        .map(|(region, u)| JsonSharedUsage {
                            region,
                            jobs_ended: u.windows,
                            mean_job_pages: u.avg_pages(),
                            largest_job_pages: u.pages_max,
                        })
                        .collect(),
                    bank_frames: &tm.bank_frames,
                })
                .collect(),
            groups: m
                .groups
                .iter()
                .map(|(n, p)| JsonGroup {
                    name: n,
                    memory_some_us: p.memory.some_us,
                    memory_full_us: p.memory.full_us,
                    io_some_us: p.io.some_us,
                    io_full_us: p.io.full_us,
                })
                .collect(),
            reservations: m.reservations.iter().map(JsonReservation::new).collect(),
            limit_groups: m.limit_groups.iter().map(JsonReservation::new).collect(),
            reserved_physical_mb: m.stats.reserved_physical_frames as f64 * m.page_bytes as f64 / 1_048_576.0,
            // Each fault is counted once, by the task or component whose access took it.
            minor_faults: m.tasks.iter().map(|t| t.stats.minor_faults).chain(m.components.iter().map(|c| c.stats.minor_faults)).sum(),
            major_faults: m.tasks.iter().map(|t| t.stats.major_faults).chain(m.components.iter().map(|c| c.stats.major_faults)).sum(),
            global_evictions: m.stats.global_evictions,
            auto_decisions: m
                .auto_decisions
                .iter()
                .map(|(region, d)| JsonAuto {
                    region,
                    chosen: d.chosen.name(),
                    max_pages: d.max_pages,
                    avg_pages: d.avg_pages,
                    sharers: d.n,
                })
                .collect(),
            components: m
                .components
                .iter()
                .map(|c| JsonComponentMemory {
                    name: &c.name,
                    reservation: c.reservation.as_deref(),
                    minor_faults: c.stats.minor_faults,
                    major_faults: c.stats.major_faults,
                    pages_swapped_in: c.stats.pages_swapped_in,
                    pages_swapped_out: c.stats.pages_swapped_out,
                    resident_pages: c.stats.resident_pages,
                    peak_resident_pages: c.stats.peak_resident_pages,
                })
                .collect(),
        };
        out.field("memory", &memory);
    }
}

impl SimResult {
    /// Page-level memory results, when the scenario declares `[memory]`.
    pub fn memory(&self) -> Option<&MemoryResult> {
        self.section()
    }
}

#[derive(Serialize)]
struct JsonMemory<'a> {
    page_bytes: u64,
    total_frames: u64,
    /// Left out for the flat layout (so its output is as before).
    #[serde(skip_serializing_if = "Option::is_none")]
    layout: Option<&'static str>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    banks: Vec<JsonBank>,
    swap: &'a str,
    tasks: Vec<JsonTaskMemory<'a>>,
    groups: Vec<JsonGroup<'a>>,
    reservations: Vec<JsonReservation<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    limit_groups: Vec<JsonReservation<'a>>,
    reserved_physical_mb: f64,
    /// Faults of the whole machine: every task's and component's.
    minor_faults: u64,
    major_faults: u64,
    /// Pages the global LRU evicted (not those a reservation or group evicted from its own).
    global_evictions: u64,
    auto_decisions: Vec<JsonAuto<'a>>,
    /// Components with memory of their own (left out when none has any).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    components: Vec<JsonComponentMemory<'a>>,
}

/// A component's own memory: the faults its invocations took in it, whoever called.
#[derive(Serialize)]
struct JsonComponentMemory<'a> {
    name: &'a str,
    reservation: Option<&'a str>,
    minor_faults: u64,
    major_faults: u64,
    pages_swapped_in: u64,
    pages_swapped_out: u64,
    resident_pages: u64,
    peak_resident_pages: u64,
}

#[derive(Serialize)]
struct JsonTaskMemory<'a> {
    name: &'a str,
    group: &'a str,
    reservation: Option<&'a str>,
    minor_faults: u64,
    major_faults: u64,
    pages_swapped_in: u64,
    pages_swapped_out: u64,
    resident_pages: u64,
    peak_resident_pages: u64,
    fault_wait_ms: f64,
    oom_kills: u64,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    shared_regions: Vec<JsonSharedUsage<'a>>,
    /// MC² layout: frames holding its pages, per bank.
    #[serde(skip_serializing_if = "<[u64]>::is_empty")]
    bank_frames: &'a [u64],
}

/// One DRAM bank of the MC² layout: who owns it (`"core 0"`, `"level C"`) and its frames.
#[derive(Serialize)]
struct JsonBank {
    bank: u32,
    owner: String,
    frames: u64,
    used_frames: u64,
}

/// Distinct pages of a shared region one task touched per ended job (any outcome): the mean
/// (the paper's Avg(S)) and the largest.
#[derive(Serialize)]
struct JsonSharedUsage<'a> {
    region: &'a str,
    jobs_ended: u64,
    mean_job_pages: f64,
    largest_job_pages: u64,
}

#[derive(Serialize)]
struct JsonGroup<'a> {
    name: &'a str,
    memory_some_us: u64,
    memory_full_us: u64,
    io_some_us: u64,
    io_full_us: u64,
}

#[derive(Serialize)]
struct JsonReservation<'a> {
    name: &'a str,
    size_pages: u64,
    charged_pages: u64,
    frames_held: u64,
    evictions: u64,
    spc_unmaps: u64,
    writebacks: u64,
}

impl<'a> JsonReservation<'a> {
    fn new((name, r): &'a (String, crate::mem::ReservationStats)) -> Self {
        JsonReservation {
            name,
            size_pages: r.size_pages,
            charged_pages: r.charged_pages,
            frames_held: r.frames_held,
            evictions: r.evictions,
            spc_unmaps: r.spc_unmaps,
            writebacks: r.writebacks,
        }
    }
}

#[derive(Serialize)]
struct JsonAuto<'a> {
    region: &'a str,
    chosen: &'static str,
    max_pages: u64,
    avg_pages: f64,
    sharers: u64,
}
