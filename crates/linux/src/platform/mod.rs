//! [`LinuxPlatform`]: the [`Platform`] the controllers drive on a real machine (the loop that
//! ticks them is [`crate::control_loop`]).
//!
//! One managed cgroup per workload group, created (and journaled, so restore removes it) or
//! adopted (only its knobs' originals are journaled). `observe` reads PSI totals, usage and
//! knobs through the [`CgroupBackend`] and drains job events from the [`JobServer`]; `apply`
//! clamps every limit to the group's floor (and, on cgroup v2, to the memory it cannot
//! reclaim, so a hard limit never OOM-kills), journals the original before the first change
//! of each file, and hands writes to the [`KnobWriter`] so a write stuck in reclaim never
//! stalls the loop; a proactive reclaim (v2 `memory.reclaim`) goes the same way, unjournaled
//! (nothing to put back), and is left out on a backend without it. CPU and I/O bandwidth
//! limits ([`bandwidth`]) go the same way as the memory knobs: journaled, written off the
//! control thread, re-read once written; I/O limits apply to the disk of critmem's swapfile
//! and are left out where there is none. In dry-run mode writes are logged, never made.

use crate::cgroup::{
    knob_change, BlockDevice, CgroupBackend, Change, CombinedLimit, CpuUsageFile, GroupPath, Knob, LimitBelowUsage, PsiResource,
};
use crate::clock::SharedClock;
use crate::error::{Error, Result};
use crate::journal::{Journal, RestoreReport};
use crate::protocol::{JobOp, JobServer, ReportingGroup};
use crate::psi::{PsiTrigger, StallKind};
use crate::writer::KnobWriter;
use critmem_policy::{
    Action, BandwidthKnobs, GroupId, GroupObservation, GroupRole, JobEvent, MemoryKnobs, Observation, Platform, StallInputs, StallTotals,
};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

mod bandwidth;
mod files;
mod jobs;
mod limits;
mod oom;
mod reclaim;

pub use crate::control_loop::{ControlLoop, CostSummary, LoopStats};
use files::{read_at_start, read_kept, CpuFiles, OpenFiles, READ_BUF_BYTES};
pub use jobs::{judge_unfinished, IntervalUse, JobCounts, JobOutcome, JobTrace};
pub use limits::parse_meminfo_kb;
use limits::{page_align_down, page_align_up, swap_free_bytes};
use oom::{guard_against_oom_kills, has_child_groups, OomWatch};

#[cfg(test)]
mod tests;

/// Limits are written page-aligned.
const PAGE_BYTES: u64 = 4096;
/// Head-room kept above unreclaimable memory when a v2 hard limit is lowered: the kernel
/// needs a little slack to reclaim into before it resorts to the OOM killer.
const V2_UNRECLAIMABLE_MARGIN_BYTES: u64 = 8 << 20;
/// A group whose usage is this close to its hard limit has its OOM file checked: further away
/// it cannot be out of memory (v1 usage is approximate by per-CPU charge batches, < 1 MiB).
const OOM_NEAR_LIMIT_BYTES: u64 = 4 << 20;
/// Whether `usage_bytes` is within [`OOM_NEAR_LIMIT_BYTES`] of `limit_bytes`.
fn near_limit(usage_bytes: u64, limit_bytes: u64) -> bool {
    usage_bytes.saturating_add(OOM_NEAR_LIMIT_BYTES) >= limit_bytes
}

/// An OOM rescue raises the limit by a quarter, at least this much.
const OOM_RESCUE_MIN_STEP_BYTES: u64 = 16 << 20;
/// How long a rescued limit is held against lower requests; doubled for each further rescue
/// within [`OOM_BACKOFF_RESET_NS`], up to 16 times as long.
const OOM_HOLD_NS: u64 = 2_000_000_000;
const OOM_BACKOFF_RESET_NS: u64 = 30_000_000_000;
/// v1: a group still seen waiting far below its own limit this long after its last raise is
/// woken again (see [`LinuxPlatform::wake_waiters_far_below_limit`]).
const OOM_WAKE_RETRY_NS: u64 = 100_000_000;
/// Knob files are re-read at least this often (20 ticks: 100 ms at the default 5 ms interval);
/// skipping them in between cuts a tick's file reads from 4 to 3 per group on the hybrid
/// layout and from 7 to 3 on cgroup v2.
const KNOB_REFRESH_TICKS: u32 = 20;
/// cgroup v2: a hard limit is applied as `memory.high`, and `memory.max` stays this far above
/// it and above usage (room for the kernel to throttle before the backstop is hit).
const V2_MAX_BACKSTOP_HEADROOM_BYTES: u64 = 16 << 20;

/// A workload group as configured.
#[derive(Clone, Debug)]
pub struct GroupSpec {
    /// Name in reports, metrics and the job protocol's `group` field.
    pub name: String,
    pub path: GroupPath,
    pub role: GroupRole,
    /// The smallest limit ever applied.
    pub floor_bytes: u64,
    /// Create the cgroup if it is missing (removed again on restore); otherwise it must exist.
    pub create: bool,
}

/// Counters of what the platform did; exported as metrics.
#[derive(Clone, Debug, Default)]
pub struct PlatformStats {
    pub writes_submitted: u64,
    pub writes_ok: u64,
    /// Writes the kernel refused (e.g. EBUSY lowering a v1 limit below unreclaimable usage).
    pub writes_failed: u64,
    /// CPU time the writer threads used in finished writes, in ns: mostly the kernel's reclaim
    /// down to a lowered limit, which it does in the writer before the write returns.
    pub write_cpu_ns: u64,
    /// Writes skipped because the queue was full.
    pub writes_dropped: u64,
    /// Limits raised to a group's floor.
    pub clamped_to_floor: u64,
    /// v2 hard limits raised to the group's unreclaimable memory.
    pub clamped_to_unreclaimable: u64,
    /// Requests for knobs the backend does not have (v1 min/low), not applied.
    pub unsupported: u64,
    pub dry_run_writes: u64,
    pub drops_requested: u64,
    /// Times a group was found out of memory at its limit (v1 `under_oom`, v2 a new `oom`
    /// event) and its limit raised at once.
    pub oom_rescues: u64,
    /// cgroup v2: `memory.max` raised to stay ahead of a group growing while throttled by the
    /// `memory.high` that applies a lower limit.
    pub v2_max_kept_ahead: u64,
    /// Limits raised to a rescued group's held limit (backing off after an OOM).
    pub clamped_to_oom_hold: u64,
    /// Groups whose OOM killer could not be switched off (v1 `memory.oom_control`).
    pub oom_guard_failures: u64,
    /// v1 limits lowered to the group's memory+swap limit (`memory.memsw.limit_in_bytes`),
    /// above which the kernel refuses a memory limit.
    pub clamped_to_combined_limit: u64,
    /// Times a group out of memory at its memory+swap limit, which critmem does not manage and
    /// cannot raise, got its OOM killer back (it would otherwise wait there for ever).
    pub oom_guard_releases: u64,
    /// cgroup v2 hard limits below usage applied as `memory.high` first.
    pub lowered_via_high: u64,
    /// v1 notifications that a group's task started waiting at its limit (each makes the
    /// next tick read the group's usage and OOM file).
    pub oom_notifications: u64,
    /// Per group and tick, usage reads skipped: the controller does not read the group's usage
    /// and the kernel notifies an OOM, so it is refreshed with the knobs only.
    pub usage_reads_skipped: u64,
    /// Notified groups whose OOM state was checked, and how many of those checks raised the limit.
    pub oom_checks_on_notification: u64,
    pub oom_rescues_on_notification: u64,
    /// v1: limits raised by one page to wake tasks left waiting far below the group's limit
    /// (a wake-up lost to a raise that landed before they slept, or an ancestor's limit).
    pub oom_wakeups: u64,
    /// Proactive reclaims asked of the kernel (v2 `memory.reclaim`), and of those, how many
    /// it ended short of the bytes asked (`EAGAIN`: the group had less it could give up).
    pub reclaims_requested: u64,
    pub reclaims_short: u64,
    /// Reclaims requested on a backend without proactive reclaim (v1), not applied.
    pub reclaim_unsupported: u64,
    /// CPU limits requested for a group without the CPU controller's files (an adopted group
    /// with no directory in the v1 cpu hierarchy, or whose v2 parent does not enable `cpu`),
    /// not applied.
    pub cpu_limits_unsupported: u64,
}

struct Managed {
    spec: GroupSpec,
    /// Each knob's file (max, high, min, low), where the backend has one: checked for writes in
    /// flight without building the path every tick.
    knob_paths: [Option<PathBuf>; 4],
    /// Ticks since the knob files were last read. Between reads the knobs are what this
    /// platform last read or wrote; they are re-read every [`KNOB_REFRESH_TICKS`] ticks (to see
    /// changes made by others) and on the tick after one of this platform's writes lands.
    knobs_age_ticks: u32,
    /// Pressure totals the controller reads of this group: re-read every tick. The others are
    /// re-read with the knobs (they only feed metrics and logs).
    stall_inputs: StallInputs,
    /// Whether the controller reads this group's usage ([`Controller::reads_usage`]); if not,
    /// and the kernel notifies OOMs, usage is re-read with the knobs only.
    reads_usage: bool,
    /// Usage was read this tick (the OOM rescue's near-limit check needs a fresh value).
    usage_fresh: bool,
    /// cgroup v2: `memory.high` is this platform's hard limit, under a `memory.max` backstop (see
    /// `apply_v2_max`); observations show it as the hard limit.
    high_is_ours: bool,
    files: Option<OpenFiles>,
    /// cgroup v2: `memory.swap.current`, read where the `memory.max` backstop is set, as pages
    /// in swap come back into memory at a swapoff however the limit stands. `None` until
    /// first opened, or where the backend has no such file (then swap counts as 0).
    swap_file: Option<std::fs::File>,
    oom: OomWatch,
    /// Knobs as last read (for dedup and the v2 clamp).
    knobs: MemoryKnobs,
    /// v1 memory+swap limit of an adopted group, if set: read at open, after a refused limit
    /// write and at each OOM check.
    combined: Option<CombinedLimit>,
    usage_bytes: u64,
    stall: StallTotals,
    jobs: JobCounts,
    /// The group's CPU time and CPU pressure files, read with the knobs (every tick for jobs
    /// kept one by one).
    cpu: Option<CpuFiles>,
    /// CPU time the group used, as last read.
    cpu_usage_us: u64,
    /// Bandwidth limits as last read; re-read every [`KNOB_REFRESH_TICKS`] ticks and on the
    /// tick after one of this platform's bandwidth writes lands, not after a memory limit's
    /// write: a controller that steers a limit every tick would otherwise re-read them by path
    /// nearly every tick.
    bandwidth: BandwidthKnobs,
    bandwidth_stale: bool,
    bandwidth_age_ticks: u32,
    /// The files a CPU limit is written to, where the group has them all.
    cpu_paths: Option<Vec<PathBuf>>,
    /// The swap disk and the files its limits are written to, where both exist.
    io: Option<(BlockDevice, Vec<PathBuf>)>,
    /// Dry run: the bandwidth limits last logged as intended.
    dry_run_bandwidth: BandwidthKnobs,
    /// A CPU limit was asked for though the group has no CPU controller files (said once).
    warned_no_cpu_limits: bool,
}

impl Managed {
    /// The knobs as the controller set them: on cgroup v2 a hard limit is the `memory.high`
    /// this platform wrote (the `memory.max` above it is a backstop of its own).
    fn shown_knobs(&self) -> MemoryKnobs {
        match self.knobs.high_bytes.filter(|_| self.high_is_ours) {
            Some(limit) => MemoryKnobs { max_bytes: Some(limit), high_bytes: None, ..self.knobs },
            None => self.knobs,
        }
    }
}

/// Options for [`LinuxPlatform::open`].
pub struct PlatformOptions {
    /// Budget the controller divides among the groups.
    pub total_memory_bytes: u64,
    /// Log intended writes only; nothing on the machine changes (no journal either).
    pub dry_run: bool,
    /// Restore journal; required unless dry-run.
    pub journal_path: Option<PathBuf>,
    /// The job socket, already bound with one [`crate::protocol::ReportingGroup`] per group,
    /// in the same order as the groups.
    pub job_server: Option<JobServer>,
    /// `/proc` (or a fake tree): swap accounting for the v2 unreclaimable clamp.
    pub proc_root: PathBuf,
    /// The time observations carry and OOM holds run on.
    pub clock: SharedClock,
    /// CPUs of the machine ([`online_cpus`]): a CPU limit of this many CPUs or more is none.
    pub cpus: u32,
    /// The whole disk holding critmem's swapfile, whose reads and writes I/O limits throttle;
    /// `None` leaves every I/O limit out.
    pub swap_device: Option<BlockDevice>,
}

/// CPUs online now, from `/sys/devices/system/cpu/online` (at least 1; where that file is
/// unreadable, the CPUs this process may run on).
pub fn online_cpus() -> u32 {
    std::fs::read_to_string("/sys/devices/system/cpu/online")
        .ok()
        .and_then(|text| parse_cpu_list(&text))
        .or_else(|| std::thread::available_parallelism().ok().and_then(|n| u32::try_from(n.get()).ok()))
        .unwrap_or(1)
        .max(1)
}

/// How many CPUs a kernel CPU list names (`0-1,4,6-7` is 5); `None` when unreadable.
pub fn parse_cpu_list(text: &str) -> Option<u32> {
    let mut cpus = 0u32;
    for range in text.trim().split(',') {
        let (first, last) = range.split_once('-').unwrap_or((range, range));
        let (first, last) = (first.parse::<u32>().ok()?, last.parse::<u32>().ok()?);
        cpus = cpus.checked_add(last.checked_sub(first)?.checked_add(1)?)?;
    }
    (cpus > 0).then_some(cpus)
}

/// The Linux [`Platform`]; see the module documentation.
pub struct LinuxPlatform {
    backend: Box<dyn CgroupBackend>,
    groups: Vec<Managed>,
    total_memory_bytes: u64,
    dry_run: bool,
    journal: Option<Journal>,
    writer: KnobWriter,
    server: Option<JobServer>,
    proc_root: PathBuf,
    clock: SharedClock,
    cpus: u32,
    swap_device: Option<BlockDevice>,
    stats: PlatformStats,
    /// Time of the last observation.
    now_ns: u64,
    /// Journal replay done when opening (a previous run crashed).
    recovered: Option<RestoreReport>,
    warned_paths: std::collections::BTreeSet<PathBuf>,
    read_buf: Vec<u8>,
    /// The control loop's fixed read buffer.
    tick_buf: Box<[u8; READ_BUF_BYTES]>,
    /// Last value logged per knob in dry-run mode.
    dry_run_intended: BTreeMap<(GroupId, Knob), Option<u64>>,
}

impl LinuxPlatform {
    /// Opens the journal (restoring a crashed run's changes first), then creates or adopts
    /// every group.
    pub fn open(backend: Box<dyn CgroupBackend>, specs: Vec<GroupSpec>, options: PlatformOptions) -> Result<Self> {
        let (mut journal, recovered) = match (&options.journal_path, options.dry_run) {
            (Some(path), false) => {
                let (journal, report) = Journal::open(path)?;
                if let Some(r) = &report {
                    tracing::warn!(
                        restored = r.restored.len(),
                        removed_dirs = r.removed_dirs.len(),
                        "restored the changes of a previous run that did not shut down"
                    );
                }
                (Some(journal), report)
            }
            (None, false) => {
                return Err(Error::Journal { path: PathBuf::new(), reason: "a journal path is required unless --dry-run".into() });
            }
            (_, true) => (None, None),
        };
        if let Some(server) = &options.job_server {
            if server.groups().len() != specs.len() {
                return Err(Error::Socket {
                    path: server.socket_path().to_owned(),
                    reason: format!("the job server knows {} groups but the platform manages {}", server.groups().len(), specs.len()),
                });
            }
        }
        let (groups, stats) = match open_groups(backend.as_ref(), specs, journal.as_mut()) {
            Ok(done) => done,
            Err(e) => {
                // Undo the groups created and the files changed so far: an error part-way
                // through must not leave them behind (until a next start that may never come).
                if let Some(journal) = journal {
                    match journal.restore_all() {
                        Ok(report) if report.failures.is_empty() => {}
                        Ok(report) => {
                            tracing::error!(failures = ?report.failures, "start-up failed, and undoing what it had set up failed too; kept in the journal for the next start")
                        }
                        Err(undo) => tracing::error!(error = %undo, "start-up failed, and undoing what it had set up failed too"),
                    }
                }
                return Err(e);
            }
        };
        Ok(LinuxPlatform {
            backend,
            groups,
            total_memory_bytes: options.total_memory_bytes,
            dry_run: options.dry_run,
            journal,
            writer: KnobWriter::new(crate::writer::DEFAULT_WORKERS, crate::writer::DEFAULT_CAPACITY),
            server: options.job_server,
            proc_root: options.proc_root,
            clock: options.clock,
            cpus: options.cpus.max(1),
            swap_device: options.swap_device,
            stats,
            now_ns: 0,
            recovered,
            warned_paths: Default::default(),
            read_buf: Vec::with_capacity(4096),
            tick_buf: Box::new([0; READ_BUF_BYTES]),
            dry_run_intended: BTreeMap::new(),
        })
    }

    pub fn backend(&self) -> &dyn CgroupBackend {
        self.backend.as_ref()
    }

    pub fn group_specs(&self) -> impl Iterator<Item = &GroupSpec> {
        self.groups.iter().map(|g| &g.spec)
    }

    pub fn stats(&self) -> &PlatformStats {
        &self.stats
    }

    pub fn job_counts(&self, group: GroupId) -> &JobCounts {
        &self.groups[group].jobs
    }

    pub fn job_server(&self) -> Option<&JobServer> {
        self.server.as_ref()
    }

    /// Sets what each poll of the job socket may take.
    pub fn set_job_poll_budget(&mut self, budget: crate::protocol::PollBudget) {
        if let Some(server) = self.server.as_mut() {
            server.set_poll_budget(budget);
        }
    }

    /// What opening restored from a crashed previous run.
    pub fn recovered(&self) -> Option<&RestoreReport> {
        self.recovered.as_ref()
    }

    /// Tells the platform which pressure totals the controller reads of each group (from
    /// [`critmem_policy::Controller::stall_inputs`]); the others are then read only every
    /// [`KNOB_REFRESH_TICKS`] ticks. Until called, everything is read every tick.
    pub fn set_stall_inputs(&mut self, inputs: impl Fn(&GroupRole) -> StallInputs) {
        for g in &mut self.groups {
            g.stall_inputs = inputs(&g.spec.role);
        }
    }

    /// Tells the platform whether the controller reads each group's usage (from
    /// [`critmem_policy::Controller::reads_usage`]). Usage it does not read is refreshed every
    /// [`KNOB_REFRESH_TICKS`] ticks where the kernel notifies OOMs (v1); elsewhere, and
    /// until this is called, it is read every tick, as the OOM rescue then needs it.
    pub fn set_usage_inputs(&mut self, reads_usage: impl Fn(&GroupRole) -> bool) {
        for g in &mut self.groups {
            g.reads_usage = reads_usage(&g.spec.role);
        }
    }

    /// Reads `group`'s usage now (for samples that must be fresh whatever the controller reads).
    pub fn usage_now(&mut self, group: GroupId) -> Result<u64> {
        let g = &mut self.groups[group];
        g.usage_bytes = self.backend.usage_bytes(&g.spec.path)?;
        Ok(g.usage_bytes)
    }

    /// Usage and knobs of `group` as last observed.
    pub fn last_seen(&self, group: GroupId) -> (u64, MemoryKnobs) {
        (self.groups[group].usage_bytes, self.groups[group].shown_knobs())
    }

    /// PSI totals of `group` as last observed (those the controller does not read are at most
    /// [`KNOB_REFRESH_TICKS`] ticks old).
    pub fn last_stall(&self, group: GroupId) -> StallTotals {
        self.groups[group].stall
    }

    /// CPU time `group` used (µs) and its CPU and I/O limits, as last observed (at most
    /// [`KNOB_REFRESH_TICKS`] ticks old).
    pub fn last_bandwidth(&self, group: GroupId) -> (u64, BandwidthKnobs) {
        (self.groups[group].cpu_usage_us, self.groups[group].bandwidth)
    }

    /// Waits up to `timeout` for every submitted write to land; for tests and shutdown,
    /// never for the control loop.
    pub fn wait_writes(&self, timeout: Duration) -> bool {
        self.writer.wait_idle(timeout)
    }

    /// Places a process in a managed group.
    pub fn add_process(&self, group: GroupId, pid: u32) -> Result<()> {
        self.backend.move_pid(&self.groups[group].spec.path, pid)
    }

    /// The processes in a managed group now.
    pub fn pids(&self, group: GroupId) -> Result<Vec<u32>> {
        self.backend.pids(&self.groups[group].spec.path)
    }

    /// Takes the group named `name` out of the platform's care: waits up to `timeout` for
    /// writes in flight, puts its files back as they were (removing it if the platform created
    /// it) and journals that. Groups after it move down one place (a new controller follows).
    pub fn remove_group(&mut self, name: &str, timeout: Duration) -> Result<RestoreReport> {
        let Some(id) = self.groups.iter().position(|g| g.spec.name == name) else {
            return Err(Error::Config { path: PathBuf::from("group"), reason: format!("no managed group {name:?}") });
        };
        if !self.writer.wait_idle(timeout) {
            tracing::warn!(group = %name, "writes still in the kernel while removing the group; restoring anyway");
        }
        let removed = self.groups.remove(id);
        self.dry_run_intended.clear();
        let dirs = self.backend.group_dirs(&removed.spec.path);
        let report = match self.journal.as_mut() {
            Some(journal) => journal.release_within(&dirs)?,
            None => RestoreReport::default(),
        };
        self.tell_server_the_groups();
        if !report.failures.is_empty() {
            tracing::error!(group = %name, failures = ?report.failures, "could not restore everything of the removed group; kept in the journal for the shutdown");
        }
        Ok(report)
    }

    /// The job server reports for the groups managed now, in their order.
    fn tell_server_the_groups(&mut self) {
        if let Some(server) = self.server.as_mut() {
            server.set_groups(
                self.groups.iter().map(|g| ReportingGroup { name: g.spec.name.clone(), cgroup: g.spec.path.to_string() }).collect(),
            );
        }
    }

    /// Creates or adopts the groups of `specs` as at open, after the groups already managed.
    pub fn add_groups(&mut self, specs: Vec<GroupSpec>) -> Result<()> {
        let (added, stats) = open_groups(self.backend.as_ref(), specs, self.journal.as_mut())?;
        self.stats.oom_guard_failures += stats.oom_guard_failures;
        self.groups.extend(added);
        self.tell_server_the_groups();
        Ok(())
    }

    /// One PSI trigger per group on `memory.pressure`, to wake the loop early. The window must
    /// be a multiple of 2 s without CAP_SYS_RESOURCE.
    pub fn arm_triggers(&self, stall_us: u64, window_us: u64) -> Result<Vec<PsiTrigger>> {
        self.groups
            .iter()
            .map(|g| {
                PsiTrigger::new(
                    &self.backend.pressure_file(&g.spec.path, PsiResource::Memory),
                    StallKind::Some,
                    stall_us,
                    window_us,
                    &self.proc_root,
                )
            })
            .collect()
    }

    /// Outcomes of finished writes: failures are counted and logged, never fatal (the next
    /// tick decides again from what the files then say).
    fn collect_writes(&mut self) {
        for outcome in self.writer.completed() {
            self.stats.write_cpu_ns += u64::try_from(outcome.cpu.as_nanos()).unwrap_or(u64::MAX);
            // Whatever happened, the file now says something new: read it next tick.
            if let Some(g) = self.groups.iter_mut().find(|g| g.writes_bandwidth_to(&outcome.path)) {
                g.bandwidth_stale = true;
            }
            if let Some(id) = self.groups.iter().position(|g| g.knob_paths.iter().flatten().any(|p| *p == outcome.path)) {
                self.groups[id].knobs_age_ticks = u32::MAX;
                // A refused limit may be above a memory+swap limit set meanwhile.
                if outcome.result.is_err() {
                    self.refresh_combined(id);
                }
            }
            match &outcome.result {
                Ok(()) => self.stats.writes_ok += 1,
                Err(e) if reclaim::fell_short(&outcome) => {
                    self.stats.reclaims_short += 1;
                    tracing::debug!(path = %outcome.path.display(), value = %outcome.contents, error = %e, "reclaim ended short of the bytes asked");
                }
                Err(e) => {
                    self.stats.writes_failed += 1;
                    // A refused limit is asked for again every tick; say so once per file.
                    if self.warned_paths.insert(outcome.path.clone()) {
                        tracing::warn!(path = %outcome.path.display(), value = %outcome.contents, took_us = outcome.took.as_micros() as u64, error = %e, "cgroup write failed (further failures of this file are logged at debug)");
                    } else {
                        tracing::debug!(path = %outcome.path.display(), value = %outcome.contents, error = %e, "cgroup write failed");
                    }
                }
            }
        }
    }

    /// Stops the writer (waiting up to `timeout` for writes in flight) and puts every file
    /// back as it was; groups this platform created are removed, their processes moved to
    /// the root first.
    pub fn restore(self, timeout: Duration) -> Result<RestoreReport> {
        let stuck = self.writer.shutdown(timeout);
        if !stuck.is_empty() {
            tracing::warn!(files = ?stuck, "writes still stuck in the kernel at shutdown; restoring anyway");
        }
        drop(self.server);
        match self.journal {
            Some(journal) => journal.restore_all(),
            None => Ok(RestoreReport::default()),
        }
    }
}

/// The error for a group whose cgroup does not exist and is not to be created.
pub(crate) fn missing_cgroup(spec: &GroupSpec) -> Error {
    Error::Config {
        path: spec.path.dir_in(Path::new("/")),
        reason: format!("cgroup of group {:?} does not exist; create it, or set create = true to let the agent create it", spec.name),
    }
}

/// Creates or adopts every group of `specs` through `journal` (none in dry-run mode) and
/// switches their OOM killers off: the part of [`LinuxPlatform::open`] that changes the machine.
fn open_groups(
    backend: &dyn CgroupBackend,
    specs: Vec<GroupSpec>,
    mut journal: Option<&mut Journal>,
) -> Result<(Vec<Managed>, PlatformStats)> {
    let mut groups = Vec::with_capacity(specs.len());
    for mut spec in specs {
        // Limits are whole pages, so the floor is too (rounded up: a limit never goes below it).
        spec.floor_bytes = page_align_up(spec.floor_bytes);
        if !backend.exists(&spec.path) && !spec.create {
            return Err(missing_cgroup(&spec));
        }
        if spec.create {
            // Directories of a created group missing in some hierarchy (the bandwidth ones on
            // the hybrid layout) are made too.
            let mut created_dirs = Vec::new();
            for change in backend.plan_create(&spec.path)? {
                if let Change::Mkdir { dir, .. } = &change {
                    created_dirs.push(dir.clone());
                }
                match &mut journal {
                    Some(j) => j.perform(&change)?,
                    None => tracing::info!(group = %spec.name, change = %change, "dry run: would create"),
                }
            }
            bandwidth::enable_controllers(backend, &spec, &created_dirs, journal.as_deref_mut());
        }
        // A group created just now has no limits; reading them is for adopted groups.
        let knobs = if spec.create && journal.is_some() {
            MemoryKnobs::default()
        } else if backend.exists(&spec.path) {
            backend.knobs(&spec.path)?
        } else {
            MemoryKnobs::default()
        };
        let files = OpenFiles::open(backend, &spec.path);
        let oom = OomWatch { file: std::fs::File::open(backend.oom_file(&spec.path)).ok(), ..OomWatch::default() };
        let knob_paths = Knob::ALL.map(|k| backend.plan_knob(&spec.path, k, None).ok().flatten().map(|w| w.path));
        let combined = if backend.exists(&spec.path) { backend.combined_limit(&spec.path)? } else { None };
        if let Some(c) = combined {
            tracing::info!(group = %spec.name, memsw_limit_bytes = c.limit_bytes, "the group has a memory+swap limit: its memory limit stays at or below it, and an OOM at it is the kernel's to handle");
        }
        groups.push(Managed {
            spec,
            knob_paths,
            knobs_age_ticks: u32::MAX,
            stall_inputs: StallInputs::ALL,
            reads_usage: true,
            usage_fresh: false,
            high_is_ours: false,
            files,
            oom,
            knobs,
            combined,
            usage_bytes: 0,
            stall: StallTotals::default(),
            jobs: JobCounts::default(),
            cpu: None,
            swap_file: None,
            cpu_usage_us: 0,
            bandwidth: BandwidthKnobs::default(),
            bandwidth_stale: true,
            bandwidth_age_ticks: 0,
            cpu_paths: None,
            io: None,
            dry_run_bandwidth: BandwidthKnobs::default(),
            warned_no_cpu_limits: false,
        });
    }
    let mut stats = PlatformStats::default();
    if let Some(journal) = &mut journal {
        for g in &mut groups {
            guard_against_oom_kills(backend, journal, g, &mut stats)?;
            // A child group waiting at its own limit holds the OOM lock of the subtree, and
            // the kernel then notifies nobody when a task of the parent starts waiting.
            if has_child_groups(&backend.group_dirs(&g.spec.path)[0]) {
                tracing::info!(group = %g.spec.name, "the group has child groups, whose OOMs can hide its own from the kernel's notification; its usage is read every tick");
                continue;
            }
            match backend.oom_notifier(&g.spec.path) {
                Ok(notifier) => g.oom.notifier = notifier,
                Err(e) => {
                    tracing::warn!(group = %g.spec.name, error = %e, "cannot register for the kernel's OOM notifications; the group's usage is read every tick instead")
                }
            }
        }
    }
    Ok((groups, stats))
}

/// The field of `knobs` that holds `knob`'s value.
fn knob_slot(knobs: &mut MemoryKnobs, knob: Knob) -> &mut Option<u64> {
    match knob {
        Knob::Max => &mut knobs.max_bytes,
        Knob::High => &mut knobs.high_bytes,
        Knob::Min => &mut knobs.min_bytes,
        Knob::Low => &mut knobs.low_bytes,
    }
}

impl crate::control_loop::WakeSources for LinuxPlatform {
    fn wake_fds(&self) -> Vec<std::os::fd::BorrowedFd<'_>> {
        self.server.as_ref().map(JobServer::wake_fds).unwrap_or_default()
    }
}

impl Platform for LinuxPlatform {
    type Error = Error;

    fn observe(&mut self) -> Result<Observation> {
        self.collect_writes();
        self.take_oom_notifications();
        let now_ns = self.clock.now_ns();
        self.now_ns = now_ns;
        let mut observed = Vec::with_capacity(self.groups.len());
        for g in &mut self.groups {
            if self.dry_run && !self.backend.exists(&g.spec.path) {
                // Dry run over a group it would have created.
                observed.push(GroupObservation {
                    name: g.spec.name.clone(),
                    role: g.spec.role.clone(),
                    stall: g.stall,
                    usage_bytes: 0,
                    knobs: g.shown_knobs(),
                    floor_bytes: g.spec.floor_bytes,
                    cpu_usage_us: 0,
                    bandwidth: g.dry_run_bandwidth,
                });
                continue;
            }
            if g.files.is_none() {
                g.files = OpenFiles::open(self.backend.as_ref(), &g.spec.path);
            }
            let knobs_now = (g.knobs_age_ticks < KNOB_REFRESH_TICKS).then_some(g.knobs);
            // Everything is fresh on the ticks that re-read the knobs, and for jobs kept one by
            // one, whose stall counts every interval.
            let fresh = if knobs_now.is_some() && !g.jobs.keeps_rows() { g.stall_inputs } else { StallInputs::ALL };
            let stall_before = g.stall;
            // Unread usage can wait for the knobs while the kernel will say if the group
            // starts waiting at its limit (the one thing the platform itself needs it for).
            let usage_now = (knobs_now.is_some() && !g.reads_usage && g.oom.notifier.is_some() && !g.oom.pending).then_some(g.usage_bytes);
            match g.files.as_ref().and_then(|f| f.read(&mut self.tick_buf, fresh, g.stall, usage_now, knobs_now)) {
                Some((stall, usage, knobs)) => {
                    (g.stall, g.usage_bytes, g.knobs) = (stall, usage, knobs);
                    g.knobs_age_ticks = if knobs_now.is_some() { g.knobs_age_ticks + 1 } else { 0 };
                    g.usage_fresh = usage_now.is_none();
                    self.stats.usage_reads_skipped += u64::from(usage_now.is_some());
                }
                None => {
                    g.files = None;
                    // CPU pressure comes from the CPU files below, whose reading it stays.
                    let cpu_some_us = g.stall.cpu_some_us;
                    g.stall = StallTotals { cpu_some_us, ..self.backend.stall_totals(&g.spec.path)? };
                    g.usage_bytes = self.backend.usage_bytes(&g.spec.path)?;
                    g.knobs = self.backend.knobs(&g.spec.path)?;
                    g.knobs_age_ticks = 0;
                    g.usage_fresh = true;
                }
            }
            // CPU time and CPU pressure feed no controller's decision today: read with the knobs
            // (every tick only for jobs kept one by one), like the totals a controller does not read.
            let refreshed = g.knobs_age_ticks == 0;
            let keeps_rows = g.jobs.keeps_rows();
            let mut cpu_now = None;
            if refreshed || keeps_rows {
                if g.cpu.is_none() {
                    g.cpu = CpuFiles::open(self.backend.as_ref(), &g.spec.path);
                }
                cpu_now = g.cpu.as_ref().and_then(|c| c.totals(&mut self.tick_buf));
                if cpu_now.is_none() {
                    // Opened anew next time (the group may have been recreated).
                    g.cpu = None;
                }
                if let Some((usage_us, wait_us)) = cpu_now {
                    (g.cpu_usage_us, g.stall.cpu_some_us) = (usage_us, wait_us);
                }
            }
            g.bandwidth_age_ticks = g.bandwidth_age_ticks.saturating_add(1);
            if g.bandwidth_stale || g.bandwidth_age_ticks >= KNOB_REFRESH_TICKS {
                bandwidth::probe(self.backend.as_ref(), g, self.swap_device);
                g.bandwidth = bandwidth::read(self.backend.as_ref(), g);
                (g.bandwidth_stale, g.bandwidth_age_ticks) = (false, 0);
            }
            if keeps_rows {
                // Totals that went backwards (the group recreated) count as no stall.
                let memory_us = g.stall.memory_some_us.saturating_sub(stall_before.memory_some_us);
                let io_us = g.stall.io_some_us.saturating_sub(stall_before.io_some_us);
                let cpu_us = g.cpu.as_mut().and_then(|c| c.interval(cpu_now));
                g.jobs.add_interval(&IntervalUse { stall_us: memory_us.max(io_us), cpu_us });
            } else if let Some(c) = g.cpu.as_mut() {
                c.interval(None);
            }
            observed.push(GroupObservation {
                name: g.spec.name.clone(),
                role: g.spec.role.clone(),
                stall: g.stall,
                usage_bytes: g.usage_bytes,
                knobs: g.shown_knobs(),
                floor_bytes: g.spec.floor_bytes,
                cpu_usage_us: g.cpu_usage_us,
                bandwidth: g.bandwidth,
            });
        }
        if !self.dry_run {
            for (id, seen) in observed.iter_mut().enumerate() {
                // Stale usage says nothing of the limit; such a group is checked when notified
                // (its usage is then fresh).
                let rescued = if std::mem::take(&mut self.groups[id].oom.notified) {
                    self.rescue_if_notified(id, seen.usage_bytes, seen.knobs)?
                } else {
                    self.groups[id].usage_fresh && self.rescue_if_near_limit(id, seen.usage_bytes, seen.knobs)?
                };
                let rescued_over_high = self.groups[id].usage_fresh && self.rescue_if_stuck_over_high(id, false)?;
                if rescued | rescued_over_high | self.keep_v2_max_ahead_of_usage(id)? {
                    seen.knobs = self.groups[id].shown_knobs();
                }
                self.rearm_oom_guard(id)?;
            }
        }
        let events = self.take_job_events(now_ns);
        Ok(Observation { now_ns, total_memory_bytes: self.total_memory_bytes, cpus: self.cpus, groups: observed, events })
    }

    fn apply(&mut self, actions: &[Action]) -> Result<Vec<Action>> {
        let mut applied = Vec::new();
        for action in actions {
            if let Action::DropJob { group, job } = *action {
                if group >= self.groups.len() {
                    continue;
                }
                self.stats.drops_requested += 1;
                if self.dry_run {
                    tracing::info!(group = %self.groups[group].spec.name, job, "dry run: would ask the worker to drop the job");
                    applied.push(*action);
                } else if let Some(server) = self.server.as_mut() {
                    if server.deliver_drop(group, job) > 0 {
                        applied.push(*action);
                    }
                }
                continue;
            }
            if let Action::Reclaim { group, bytes } = *action {
                if group >= self.groups.len() {
                    continue;
                }
                match self.apply_reclaim(group, bytes) {
                    Ok(done) => applied.extend(done),
                    Err(e @ Error::GroupVanished { .. }) => return Err(e),
                    Err(e) => tracing::warn!(group = %self.groups[group].spec.name, error = %e, "cannot ask for reclaim"),
                }
                continue;
            }
            if let Action::SetCpuMax { group, .. } | Action::SetIoMax { group, .. } = *action {
                if group >= self.groups.len() {
                    continue;
                }
                match self.apply_bandwidth(action) {
                    Ok(done) => applied.extend(done),
                    Err(e @ (Error::GroupVanished { .. } | Error::Journal { .. } | Error::JournalWrite { .. })) => return Err(e),
                    Err(e) => {
                        self.stats.writes_failed += 1;
                        tracing::warn!(group = %self.groups[group].spec.name, error = %e, "cannot apply");
                    }
                }
                continue;
            }
            let Some((group, knob, bytes)) = knob_change(action) else { continue };
            if group >= self.groups.len() {
                tracing::warn!(group, "controller named a group that does not exist; ignored");
                continue;
            }
            let result = if knob == Knob::Max && self.backend.capabilities().throttle_limit {
                self.apply_v2_max(group, bytes, &mut applied)
            } else {
                self.apply_knob(group, knob, bytes).map(|a| applied.extend(a))
            };
            match result {
                Ok(()) => {}
                Err(e @ Error::GroupVanished { .. }) => return Err(e),
                Err(e @ (Error::Journal { .. } | Error::JournalWrite { .. })) => return Err(e),
                Err(e) => {
                    self.stats.writes_failed += 1;
                    tracing::warn!(group = %self.groups[group].spec.name, error = %e, "cannot apply");
                }
            }
        }
        Ok(applied)
    }
}
