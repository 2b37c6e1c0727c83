//! [`LinuxPlatform`]: the [`Platform`] the controllers drive on a real machine, and
//! [`ControlLoop`], the loop that ticks them at their interval.
//!
//! One managed cgroup per workload group, created (and journaled, so restore removes it) or
//! adopted (only its knobs' originals are journaled). `observe` reads PSI totals, usage and
//! knobs through the [`CgroupBackend`] and drains job events from the [`JobServer`]; `apply`
//! clamps every limit to the group's floor (and, on cgroup v2, to the memory it cannot
//! reclaim, so a hard limit never OOM-kills), journals the original before the first change
//! of each file, and hands writes to the [`KnobWriter`] so a write stuck in reclaim never
//! stalls the loop. In dry-run mode writes are logged, never made.

use crate::cgroup::{knob_change, CgroupBackend, Change, CombinedLimit, GroupPath, Knob, PsiResource};
use crate::error::{Error, Result};
use crate::journal::{Journal, RestoreReport};
use crate::protocol::{JobOp, JobServer};
use crate::psi::{wait_any, PsiTrigger, StallKind, TriggerEvent};
use crate::writer::KnobWriter;
use critmem_policy::{
    Action, Controller, GroupId, GroupObservation, GroupRole, JobEvent, MemoryKnobs, Observation, Platform, StallInputs, StallTotals,
};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

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
/// cgroup v2: while a hard limit below usage is applied as `memory.high`, `memory.max` stays
/// this far above usage (room for the kernel to throttle before any hard limit is hit).
const V2_HIGH_FIRST_HEADROOM_BYTES: u64 = 16 << 20;

/// CLOCK_MONOTONIC in nanoseconds: the clock the job protocol's `deadline_ns`/`at_ns` use.
pub fn monotonic_ns() -> u64 {
    let ts = nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC).expect("CLOCK_MONOTONIC is always available");
    ts.tv_sec() as u64 * 1_000_000_000 + ts.tv_nsec() as u64
}

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
}

/// Per-group job accounting from the job socket.
#[derive(Clone, Debug, Default)]
pub struct JobCounts {
    pub released: u64,
    pub completed: u64,
    pub dropped: u64,
    /// Completions at or before the released deadline.
    pub deadline_hits: u64,
    pub deadline_misses: u64,
    /// Deadlines of released jobs not yet completed or dropped, by job number.
    open: BTreeMap<u64, u64>,
}

impl JobCounts {
    /// Released jobs neither completed nor dropped whose deadline is before `now_ns`: misses
    /// nobody reported (a workload that stopped, or one killed at the end of a run).
    pub fn overdue(&self, now_ns: u64) -> u64 {
        self.open.values().filter(|&&d| d < now_ns).count() as u64
    }
}

/// The files a tick reads, kept open: re-reading an open cgroup file from offset 0 skips the
/// path lookup and open/close that dominate a tick's cost.
struct OpenFiles {
    memory_pressure: std::fs::File,
    io_pressure: std::fs::File,
    usage: std::fs::File,
    /// Per knob (max, high, min, low); `None` where the backend has no such file.
    knobs: [Option<std::fs::File>; 4],
}

impl OpenFiles {
    fn open(backend: &dyn CgroupBackend, group: &GroupPath) -> Option<Self> {
        let open = |path: &Path| std::fs::File::open(path).ok();
        let memory_dir = backend.group_dirs(group).into_iter().next()?;
        let usage = open(&memory_dir.join("memory.current")).or_else(|| open(&memory_dir.join("memory.usage_in_bytes")))?;
        let mut knobs: [Option<std::fs::File>; 4] = Default::default();
        for (slot, knob) in knobs.iter_mut().zip(Knob::ALL) {
            if let Some(write) = backend.plan_knob(group, knob, None).ok().flatten() {
                *slot = Some(open(&write.path)?);
            }
        }
        Some(OpenFiles {
            memory_pressure: open(&backend.pressure_file(group, PsiResource::Memory))?,
            io_pressure: open(&backend.pressure_file(group, PsiResource::Io))?,
            usage,
            knobs,
        })
    }

    /// Reads usage unless `usage_now` is given, the pressure files `fresh` asks for (the others
    /// keep their `kept` totals) and, unless `knobs_now` is given, the knob files; `None` on any
    /// failure (the caller then goes the slow way, which names the error, e.g. a vanished
    /// group). Parses bytes in place: only the PSI totals and plain numbers, no UTF-8 check,
    /// no allocation.
    fn read(
        &self,
        buf: &mut [u8; READ_BUF_BYTES],
        fresh: StallInputs,
        kept: StallTotals,
        usage_now: Option<u64>,
        knobs_now: Option<MemoryKnobs>,
    ) -> Option<(StallTotals, u64, MemoryKnobs)> {
        let (memory_some_us, memory_full_us) = if fresh.memory {
            crate::psi::parse_totals(pread_start(&self.memory_pressure, buf)?)?
        } else {
            (kept.memory_some_us, kept.memory_full_us)
        };
        let (io_some_us, io_full_us) =
            if fresh.io { crate::psi::parse_totals(pread_start(&self.io_pressure, buf)?)? } else { (kept.io_some_us, kept.io_full_us) };
        let usage = match usage_now {
            Some(usage) => usage,
            None => parse_u64(pread_start(&self.usage, buf)?)?,
        };
        if let Some(knobs) = knobs_now {
            return Some((StallTotals { memory_some_us, memory_full_us, io_some_us, io_full_us }, usage, knobs));
        }
        let mut values = [None; 4];
        for ((value, file), knob) in values.iter_mut().zip(&self.knobs).zip(Knob::ALL) {
            if let Some(file) = file {
                let bytes = pread_start(file, buf)?;
                *value =
                    if bytes.trim_ascii() == b"max" { None } else { knob_value(parse_u64(bytes)?, matches!(knob, Knob::Min | Knob::Low)) };
            }
        }
        let knobs = MemoryKnobs { max_bytes: values[0], high_bytes: values[1], min_bytes: values[2], low_bytes: values[3] };
        Some((StallTotals { memory_some_us, memory_full_us, io_some_us, io_full_us }, usage, knobs))
    }
}

/// Every file a tick reads fits: a pressure file is two lines of under 80 bytes.
const READ_BUF_BYTES: usize = 512;

/// pread from offset 0 into a fixed buffer; the bytes read.
fn pread_start<'b>(file: &std::fs::File, buf: &'b mut [u8; READ_BUF_BYTES]) -> Option<&'b [u8]> {
    use std::os::unix::fs::FileExt;
    let n = file.read_at(buf, 0).ok()?;
    // A full buffer may be a truncated file: go the slow way.
    (n < buf.len()).then(|| &buf[..n])
}

/// A decimal number with optional surrounding whitespace (`4096\n`).
fn parse_u64(bytes: &[u8]) -> Option<u64> {
    crate::psi::parse_u64(bytes.trim_ascii())
}

/// A knob's byte count as the controllers see it: v1's huge "no limit" value and a
/// protection of 0 are `None`.
fn knob_value(bytes: u64, is_protection: bool) -> Option<u64> {
    const V1_UNLIMITED_FROM_BYTES: u64 = 1 << 62;
    if bytes >= V1_UNLIMITED_FROM_BYTES || (is_protection && bytes == 0) {
        None
    } else {
        Some(bytes)
    }
}

/// pread from offset 0: cgroupfs regenerates the contents on every read from the start.
fn read_at_start<'b>(file: &std::fs::File, buf: &'b mut Vec<u8>) -> Option<&'b str> {
    use std::os::unix::fs::FileExt;
    buf.resize(4096, 0);
    let n = file.read_at(buf, 0).ok()?;
    std::str::from_utf8(&buf[..n]).ok()
}

/// A knob file's value: `max` or, on v1, a huge number (`9223372036854771712`) is no limit; a
/// protection of 0 is no protection. `None` when unparsable.
#[cfg(test)]
fn parse_knob(text: &str, is_protection: bool) -> Option<Option<u64>> {
    if text == "max" {
        return Some(None);
    }
    Some(knob_value(parse_u64(text.as_bytes())?, is_protection))
}

/// OOM watch of one group: the file read when usage nears the limit, and the back-off after a
/// rescue.
#[derive(Default)]
struct OomWatch {
    file: Option<std::fs::File>,
    /// v2 `oom` events seen so far (a rise means a new OOM).
    events_seen: u64,
    /// Requests below this are raised to it until `hold_until_ns`.
    hold_bytes: u64,
    hold_until_ns: u64,
    /// Rescues in a row (each doubles the hold), and when the last was.
    streak: u32,
    last_rescue_ns: u64,
    /// When the limit was last raised by one page to wake waiters far below it, and how many
    /// times since the group was last seen not waiting.
    last_wakeup_ns: u64,
    wakeups_while_waiting: u32,
    guard: OomGuard,
    /// v1: the eventfd the kernel signals when a task starts waiting at the limit
    /// ([`CgroupBackend::oom_notifier`]). With it, usage the controller does not read is
    /// refreshed with the knobs only, as the rescue no longer needs it every tick.
    notifier: Option<nix::sys::eventfd::EventFd>,
    /// Notified, or last seen waiting: the group's usage and OOM file are read every tick
    /// until it is neither.
    pending: bool,
    /// Notified since the last tick: the OOM file is read whatever the usage.
    notified: bool,
}

/// Who has a group's OOM killer switched off (v1 `memory.oom_control`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum OomGuard {
    /// Nobody: the backend has no switch, or switching it failed.
    #[default]
    None,
    /// This platform switched it off.
    Armed,
    /// This platform switched it back on: out of memory at a limit critmem cannot raise.
    /// Armed again once the group is no longer out of memory and has room under that limit.
    Released,
    /// It was off before critmem came: the owner's choice, never released.
    Owners,
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
    /// cgroup v2: `memory.high` is this platform's stand-in for a hard limit below usage (see
    /// `apply_v2_max`), cleared again when the hard limit takes over.
    high_is_ours: bool,
    files: Option<OpenFiles>,
    oom: OomWatch,
    /// Knobs as last read (for dedup and the v2 clamp).
    knobs: MemoryKnobs,
    /// v1 memory+swap limit of an adopted group, if set: read at open, after a refused limit
    /// write and at each OOM check.
    combined: Option<CombinedLimit>,
    usage_bytes: u64,
    stall: StallTotals,
    jobs: JobCounts,
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
        (self.groups[group].usage_bytes, self.groups[group].knobs)
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

    /// One PSI trigger per group on `memory.pressure`, to wake the loop early. The window must
    /// be a multiple of 2 s without CAP_SYS_RESOURCE.
    pub fn arm_triggers(&self, stall_us: u64, window_us: u64) -> Result<Vec<PsiTrigger>> {
        self.groups
            .iter()
            .map(|g| PsiTrigger::new(&self.backend.pressure_file(&g.spec.path, PsiResource::Memory), StallKind::Some, stall_us, window_us))
            .collect()
    }

    /// Outcomes of finished writes: failures are counted and logged, never fatal (the next
    /// tick decides again from what the files then say).
    fn collect_writes(&mut self) {
        for outcome in self.writer.completed() {
            // Whatever happened, the file now says something new: read it next tick.
            if let Some(id) = self.groups.iter().position(|g| g.knob_paths.iter().flatten().any(|p| *p == outcome.path)) {
                self.groups[id].knobs_age_ticks = u32::MAX;
                // A refused limit may be above a memory+swap limit set meanwhile.
                if outcome.result.is_err() {
                    self.refresh_combined(id);
                }
            }
            match &outcome.result {
                Ok(()) => self.stats.writes_ok += 1,
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

    fn take_job_events(&mut self, now_ns: u64) -> Vec<JobEvent> {
        let Some(server) = self.server.as_mut() else { return Vec::new() };
        let mut events = Vec::new();
        for report in server.poll() {
            let at_ns = report.at_ns.unwrap_or(now_ns);
            let (group, job) = (report.group, report.job);
            let jobs = &mut self.groups[group].jobs;
            events.push(match report.op {
                JobOp::Release { deadline_ns } => {
                    jobs.released += 1;
                    jobs.open.insert(job, deadline_ns);
                    // A client that never completes must not grow this without bound (the
                    // controllers keep no more waiting jobs than this either).
                    while jobs.open.len() > critmem_policy::MAX_PENDING_JOBS {
                        jobs.open.pop_first();
                    }
                    JobEvent::Release { group, job, at_ns, deadline_ns }
                }
                JobOp::Complete => {
                    jobs.completed += 1;
                    if let Some(deadline_ns) = jobs.open.remove(&job) {
                        if at_ns <= deadline_ns {
                            jobs.deadline_hits += 1;
                        } else {
                            jobs.deadline_misses += 1;
                        }
                    }
                    JobEvent::Completion { group, job, at_ns }
                }
                JobOp::Drop => {
                    jobs.dropped += 1;
                    jobs.open.remove(&job);
                    JobEvent::Drop { group, job, at_ns }
                }
            });
        }
        events
    }

    /// Runs the out-of-memory rescue of [`Self::observe`] on every group, without taking job
    /// events, and returns how many groups it raised. For the end of a run, when the
    /// controller no longer ticks but a task waiting at its limit must still get past it to act
    /// on SIGTERM: without a rescue such a task would never exit. A group that cannot be read
    /// or raised is skipped (logged at debug), so it never keeps the others from their rescue.
    pub fn rescue_waiting_groups(&mut self) -> usize {
        if self.dry_run {
            return 0;
        }
        self.collect_writes();
        self.now_ns = monotonic_ns();
        let mut raised = 0;
        for id in 0..self.groups.len() {
            let path = &self.groups[id].spec.path;
            let (usage, knobs) = match (self.backend.usage_bytes(path), self.backend.knobs(path)) {
                (Ok(usage), Ok(knobs)) => (usage, knobs),
                (Err(e), _) | (_, Err(e)) => {
                    tracing::debug!(group = %self.groups[id].spec.name, error = %e, "out-of-memory rescue: group not readable");
                    continue;
                }
            };
            (self.groups[id].usage_bytes, self.groups[id].knobs) = (usage, knobs);
            match self.rescue_if_near_limit(id, usage, knobs) {
                Ok(true) => raised += 1,
                Ok(false) => {}
                Err(e) => tracing::debug!(group = %self.groups[id].spec.name, error = %e, "out-of-memory rescue failed"),
            }
        }
        raised
    }

    /// [`Self::rescue_if_out_of_memory`], checked when usage is within `OOM_NEAR_LIMIT_BYTES`
    /// of the hard limit (further below it no task can start waiting at it) or when the group
    /// was last seen waiting (a task can go on sleeping after a raise; see
    /// [`Self::wake_waiters_far_below_limit`]).
    fn rescue_if_near_limit(&mut self, id: GroupId, usage_bytes: u64, knobs: MemoryKnobs) -> Result<bool> {
        let near = knobs.max_bytes.is_some_and(|limit| near_limit(usage_bytes, limit));
        if near || self.groups[id].oom.pending {
            self.rescue_if_out_of_memory(id, near)
        } else {
            Ok(false)
        }
    }

    /// Drains the OOM notifiers the kernel signalled since the last tick (one `poll` for all
    /// groups) and marks those groups pending, so this tick reads their usage and OOM file.
    fn take_oom_notifications(&mut self) {
        use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
        use std::os::fd::AsFd;
        let mut fds: Vec<PollFd> =
            self.groups.iter().filter_map(|g| g.oom.notifier.as_ref().map(|n| PollFd::new(n.as_fd(), PollFlags::POLLIN))).collect();
        let ready: Vec<bool> = match poll(&mut fds, PollTimeout::ZERO) {
            Ok(0) => return,
            Ok(_) => fds.iter().map(|fd| fd.revents().is_some_and(|r| !r.is_empty())).collect(),
            // Cannot tell who was notified: check everyone this tick.
            Err(_) => vec![true; fds.len()],
        };
        drop(fds);
        for (oom, _) in
            self.groups.iter_mut().map(|g| &mut g.oom).filter(|oom| oom.notifier.is_some()).zip(ready).filter(|(_, ready)| *ready)
        {
            // Non-blocking: nothing to read (EAGAIN) means someone else drained it; still check.
            let _ = oom.notifier.as_ref().map(|n| n.read());
            (oom.pending, oom.notified) = (true, true);
            self.stats.oom_notifications += 1;
        }
    }

    /// [`Self::rescue_if_out_of_memory`] for a notified group, whatever its usage: far below its
    /// own limit it can still be waiting at its memory+swap limit.
    fn rescue_if_notified(&mut self, id: GroupId, usage_bytes: u64, knobs: MemoryKnobs) -> Result<bool> {
        self.stats.oom_checks_on_notification += 1;
        let raised = self.rescue_if_out_of_memory(id, knobs.max_bytes.is_some_and(|limit| near_limit(usage_bytes, limit)))?;
        self.stats.oom_rescues_on_notification += u64::from(raised);
        Ok(raised)
    }

    /// Signals group `id`'s OOM notifier as the kernel would.
    #[cfg(test)]
    fn signal_oom_notifier(&self, id: GroupId) {
        self.groups[id].oom.notifier.as_ref().expect("a registered notifier").write(1).unwrap();
    }

    /// If group `id` is out of memory at its limit (v1: tasks waiting in `under_oom`, as the
    /// OOM killer is off; v2: a new `oom` event), raises the limit at once on this thread
    /// (raising never reclaims, so it cannot block) and holds it against lower requests for a
    /// while, longer after each rescue in a row. Returns whether it raised the limit.
    /// `near_own_limit` false (usage far below it): a full memory+swap limit is acted on, and
    /// tasks still waiting are woken ([`Self::wake_waiters_far_below_limit`]).
    fn rescue_if_out_of_memory(&mut self, id: GroupId, near_own_limit: bool) -> Result<bool> {
        let now_ns = self.now_ns;
        let Some(state) = self.oom_state(id) else { return Ok(false) };
        let oom = &mut self.groups[id].oom;
        let new_event = state.oom_events > oom.events_seen;
        oom.events_seen = state.oom_events;
        oom.pending = state.under_oom;
        if !state.under_oom {
            oom.wakeups_while_waiting = 0;
        }
        if !(state.under_oom || new_event) {
            return Ok(false);
        }
        self.refresh_combined(id);
        let g = &mut self.groups[id];
        let limit = g.knobs.max_bytes.unwrap_or(g.usage_bytes);
        let mut raised = page_align_up(limit.max(g.usage_bytes).saturating_add((limit / 4).max(OOM_RESCUE_MIN_STEP_BYTES)));
        if let Some(combined) = g.combined {
            // At the memory+swap limit, or with the memory limit already at it, raising the
            // memory limit cannot help: the group is out of memory by a limit critmem does
            // not manage, and would wait there for ever with the OOM killer off.
            let ceiling = page_align_down(combined.limit_bytes);
            raised = raised.min(ceiling);
            if near_limit(combined.usage_bytes, combined.limit_bytes) || (near_own_limit && raised <= limit) {
                return self.release_oom_guard(id, combined);
            }
        }
        if !near_own_limit {
            return if state.under_oom && state.kill_disabled { self.wake_waiters_far_below_limit(id) } else { Ok(false) };
        }
        if now_ns.saturating_sub(g.oom.last_rescue_ns) > OOM_BACKOFF_RESET_NS {
            g.oom.streak = 0;
        }
        g.oom.hold_bytes = raised;
        g.oom.hold_until_ns = now_ns + (OOM_HOLD_NS << g.oom.streak.min(4));
        g.oom.streak += 1;
        g.oom.last_rescue_ns = now_ns;
        tracing::warn!(group = %g.spec.name, usage_bytes = g.usage_bytes, limit_bytes = limit, raised_bytes = raised, hold_ms = (g.oom.hold_until_ns - now_ns) / 1_000_000, "group out of memory at its limit: raised the limit so the kernel kills nothing");
        let done = self.raise_max_now(id, raised)?;
        self.stats.oom_rescues += u64::from(done);
        Ok(done)
    }

    /// v1, a group with tasks waiting (`under_oom`, OOM killer off) while its usage is far
    /// below its own limit and its memory+swap limit: the kernel wakes such waiters when the
    /// limit is raised or the group uncharges memory. A task whose charge failed at the old
    /// limit but which went to sleep after a raise woke the others misses that wake-up; usually
    /// reclaim of the group's page cache uncharges soon after and wakes it, but in a group with
    /// nothing to reclaim it sleeps on. A raise of one page wakes every waiter of the group; each
    /// retries its charge (one waiting for an ancestor's limit waits again). Done at most every
    /// [`OOM_WAKE_RETRY_NS`] after the last raise of either kind, so waiters the last raise
    /// woke have had time to leave. Returns whether the limit was raised.
    fn wake_waiters_far_below_limit(&mut self, id: GroupId) -> Result<bool> {
        let now_ns = self.now_ns;
        let g = &self.groups[id];
        let Some(limit) = g.knobs.max_bytes else { return Ok(false) };
        if now_ns.saturating_sub(g.oom.last_rescue_ns.max(g.oom.last_wakeup_ns)) < OOM_WAKE_RETRY_NS {
            return Ok(false);
        }
        let raised = page_align_down(limit).saturating_add(PAGE_BYTES);
        if g.combined.is_some_and(|c| raised > page_align_down(c.limit_bytes)) {
            return Ok(false);
        }
        let g = &mut self.groups[id];
        g.oom.last_wakeup_ns = now_ns;
        g.oom.wakeups_while_waiting += 1;
        if g.oom.wakeups_while_waiting == 1 {
            tracing::warn!(group = %g.spec.name, usage_bytes = g.usage_bytes, limit_bytes = limit, "tasks waiting far below the group's limit: raised it by one page to wake them");
        } else {
            tracing::debug!(group = %g.spec.name, usage_bytes = g.usage_bytes, limit_bytes = limit, times = g.oom.wakeups_while_waiting, "tasks still waiting far below the group's limit: woken again");
        }
        let done = self.raise_max_now(id, raised)?;
        self.stats.oom_wakeups += u64::from(done);
        Ok(done)
    }

    /// Group `id`'s OOM file, read now (opened again if it could not be before).
    fn oom_state(&mut self, id: GroupId) -> Option<crate::cgroup::OomState> {
        let g = &mut self.groups[id];
        if g.oom.file.is_none() {
            g.oom.file = std::fs::File::open(self.backend.oom_file(&g.spec.path)).ok();
        }
        read_at_start(g.oom.file.as_ref()?, &mut self.read_buf).and_then(crate::cgroup::parse_oom_state)
    }

    /// Re-reads group `id`'s memory+swap limit (kept as it was if the read fails).
    fn refresh_combined(&mut self, id: GroupId) {
        let g = &mut self.groups[id];
        g.combined = self.backend.combined_limit(&g.spec.path).unwrap_or(g.combined);
    }

    /// Gives group `id` its OOM killer back (see [`Self::rescue_if_out_of_memory`]), if this
    /// platform switched it off; returns false (nothing raised).
    fn release_oom_guard(&mut self, id: GroupId, combined: CombinedLimit) -> Result<bool> {
        let g = &mut self.groups[id];
        match g.oom.guard {
            OomGuard::Armed => {
                let Some(write) = self.backend.plan_oom_release(&g.spec.path) else { return Ok(false) };
                if perform_or_warn(&write, &g.spec.name, "switch the OOM killer back on")? {
                    g.oom.guard = OomGuard::Released;
                    self.stats.oom_guard_releases += 1;
                    tracing::warn!(group = %g.spec.name, memsw_limit_bytes = combined.limit_bytes, memsw_usage_bytes = combined.usage_bytes, "group out of memory at its memory+swap limit, which critmem does not manage: its OOM killer is back on, as it was before critmem");
                }
            }
            OomGuard::Owners if self.warned_paths.insert(self.backend.oom_file(&g.spec.path)) => {
                tracing::warn!(group = %g.spec.name, memsw_limit_bytes = combined.limit_bytes, "group out of memory at its memory+swap limit, which critmem does not manage; its OOM killer was off before critmem, so its tasks wait");
            }
            _ => {}
        }
        Ok(false)
    }

    /// Switches the OOM killer off again for a group whose guard was released, once it is
    /// no longer out of memory and has room under its memory+swap limit.
    fn rearm_oom_guard(&mut self, id: GroupId) -> Result<()> {
        if self.groups[id].oom.guard != OomGuard::Released {
            return Ok(());
        }
        let Some(state) = self.oom_state(id) else { return Ok(()) };
        self.refresh_combined(id);
        let g = &mut self.groups[id];
        let room = g.combined.is_none_or(|c| !near_limit(c.usage_bytes, c.limit_bytes));
        if state.under_oom || !room {
            return Ok(());
        }
        let Some(write) = self.backend.plan_oom_guard(&g.spec.path) else { return Ok(()) };
        if perform_or_warn(&write, &g.spec.name, "switch the OOM killer off again")? {
            g.oom.guard = OomGuard::Armed;
            tracing::info!(group = %g.spec.name, "group has room again: its OOM killer is switched off again");
        }
        Ok(())
    }

    /// Writes a higher hard limit on this thread (raising never reclaims, so it cannot block),
    /// journaled first; returns whether it was written.
    fn raise_max_now(&mut self, id: GroupId, raised: u64) -> Result<bool> {
        let g = &mut self.groups[id];
        let Some(write) = self.backend.plan_knob(&g.spec.path, Knob::Max, Some(raised))? else { return Ok(false) };
        if let Some(journal) = self.journal.as_mut() {
            journal.record(&Change::Write(write.clone()))?;
        }
        if !perform_or_warn(&write, &g.spec.name, "raise the hard limit")? {
            self.stats.writes_failed += 1;
            return Ok(false);
        }
        // A lower value still queued in the writer must not land after this one.
        if self.writer.is_outstanding(&write.path) {
            let _ = self.writer.submit(write);
        }
        g.knobs.max_bytes = Some(raised);
        Ok(true)
    }

    /// cgroup v2, while a limit below usage is applied as `memory.high` ([`Self::apply_v2_max`]):
    /// `high` throttles but does not stop growth, so `memory.max` is raised to stay at least
    /// half of [`V2_HIGH_FIRST_HEADROOM_BYTES`] above usage; a group reaching it would be
    /// OOM-killed, and v2 reports that only after the kill.
    fn keep_v2_max_ahead_of_usage(&mut self, id: GroupId) -> Result<bool> {
        let g = &self.groups[id];
        let Some(max) = g.knobs.max_bytes.filter(|_| g.high_is_ours) else { return Ok(false) };
        if g.usage_bytes.saturating_add(V2_HIGH_FIRST_HEADROOM_BYTES / 2) < max {
            return Ok(false);
        }
        let raised = page_align_up(g.usage_bytes.saturating_add(V2_HIGH_FIRST_HEADROOM_BYTES));
        let done = self.raise_max_now(id, raised)?;
        self.stats.v2_max_kept_ahead += u64::from(done);
        Ok(done)
    }

    /// The limit actually written for a request: page-aligned, at least the floor and, for a
    /// v2 hard limit below usage, at least what the group cannot give back.
    fn clamp_limit(&mut self, group: GroupId, knob: Knob, bytes: u64) -> Result<u64> {
        let g = &self.groups[group];
        let mut bytes = page_align_up(bytes);
        if bytes < g.spec.floor_bytes {
            bytes = page_align_up(g.spec.floor_bytes);
            self.stats.clamped_to_floor += 1;
        }
        // Backing off after an OOM rescue: no lower limit until the hold ends.
        if knob == Knob::Max && self.now_ns < g.oom.hold_until_ns && bytes < g.oom.hold_bytes {
            bytes = g.oom.hold_bytes;
            self.stats.clamped_to_oom_hold += 1;
        }
        // v1 refuses such a write with EBUSY on its own; v2 would OOM-kill instead.
        if knob == Knob::Max && self.backend.supports(Knob::Min) && bytes < g.usage_bytes {
            let stat = self.backend.memory_stat(&g.spec.path)?;
            let swap_free = swap_free_bytes(&self.proc_root);
            let unevictable = stat.fields.get("unevictable").copied().unwrap_or(0);
            let unreclaimable =
                stat.anon_bytes.saturating_sub(swap_free).saturating_add(unevictable).saturating_add(V2_UNRECLAIMABLE_MARGIN_BYTES);
            if bytes < unreclaimable {
                bytes = page_align_up(unreclaimable);
                self.stats.clamped_to_unreclaimable += 1;
            }
        }
        // v1 refuses a memory limit above the memory+swap limit (EINVAL); the latter binds anyway.
        if let Some(ceiling) = g.combined.filter(|_| knob == Knob::Max).map(|c| page_align_down(c.limit_bytes)) {
            if bytes > ceiling {
                bytes = ceiling;
                self.stats.clamped_to_combined_limit += 1;
            }
        }
        Ok(bytes)
    }

    /// A cgroup v2 hard limit. Lowering `memory.max` below what the group uses makes the kernel
    /// reclaim in the writer and OOM-kill in the group if that fails; `memory.high` throttles
    /// and reclaims and never kills. So a limit below current usage is applied as `memory.high`
    /// first, with `memory.max` kept [`V2_HIGH_FIRST_HEADROOM_BYTES`] above usage; once usage
    /// is at or below the limit, `memory.max` takes it and the helper `memory.high` is cleared.
    fn apply_v2_max(&mut self, group: GroupId, bytes: Option<u64>, applied: &mut Vec<Action>) -> Result<()> {
        let g = &self.groups[group];
        let (usage, high_is_ours) = (g.usage_bytes, g.high_is_ours);
        let Some(requested) = bytes else {
            applied.extend(self.apply_knob(group, Knob::Max, None)?);
            if high_is_ours {
                applied.extend(self.apply_knob(group, Knob::High, None)?);
                self.groups[group].high_is_ours = false;
            }
            return Ok(());
        };
        let limit = self.clamp_limit(group, Knob::Max, requested)?;
        if limit >= usage {
            applied.extend(self.apply_knob(group, Knob::Max, Some(limit))?);
            if high_is_ours {
                applied.extend(self.apply_knob(group, Knob::High, None)?);
                self.groups[group].high_is_ours = false;
            }
            return Ok(());
        }
        // A `high` the controller set itself is left to it.
        if high_is_ours || self.groups[group].knobs.high_bytes.is_none() {
            applied.extend(self.apply_knob(group, Knob::High, Some(limit))?);
            self.groups[group].high_is_ours = true;
            self.stats.lowered_via_high += 1;
        }
        let above_usage = (usage + V2_HIGH_FIRST_HEADROOM_BYTES).div_ceil(PAGE_BYTES) * PAGE_BYTES;
        let max = self.groups[group].knobs.max_bytes.map_or(above_usage, |m| m.min(above_usage)).max(limit);
        applied.extend(self.apply_knob(group, Knob::Max, Some(max))?);
        Ok(())
    }

    fn apply_knob(&mut self, group: GroupId, knob: Knob, bytes: Option<u64>) -> Result<Option<Action>> {
        // v1 has no throttling limit: a `high` request becomes the hard limit (reclaim, and
        // EBUSY rather than OOM if it cannot be met); v1 has no protections at all.
        let knob = match knob {
            Knob::High if !self.backend.supports(Knob::High) => Knob::Max,
            Knob::Min | Knob::Low if !self.backend.supports(knob) => {
                if bytes.is_some() {
                    self.stats.unsupported += 1;
                    tracing::debug!(group = %self.groups[group].spec.name, knob = knob.name(), "protection requested on a backend without it; ignored");
                }
                return Ok(None);
            }
            other => other,
        };
        let bytes = match bytes {
            Some(b) if matches!(knob, Knob::Max | Knob::High) => Some(self.clamp_limit(group, knob, b)?),
            other => other,
        };
        let current = match knob {
            Knob::Max => self.groups[group].knobs.max_bytes,
            Knob::High => self.groups[group].knobs.high_bytes,
            Knob::Min => self.groups[group].knobs.min_bytes,
            Knob::Low => self.groups[group].knobs.low_bytes,
        };
        // The common case: the controller asks again for what is already there.
        if current == bytes {
            let slot = Knob::ALL.iter().position(|&k| k == knob).unwrap_or(0);
            if let Some(path) = &self.groups[group].knob_paths[slot] {
                if !self.writer.is_outstanding(path) {
                    return Ok(None);
                }
            }
        }
        let path = &self.groups[group].spec.path;
        let Some(write) = self.backend.plan_knob(path, knob, bytes)? else { return Ok(None) };
        let applied = knob_action(group, knob, bytes);
        if current == bytes && !self.writer.is_outstanding(&write.path) {
            return Ok(None);
        }
        if self.dry_run {
            // Nothing changes on the machine, so the controller asks again every tick; log
            // each intended value once.
            if self.dry_run_intended.insert((group, knob), bytes) == Some(bytes) {
                return Ok(Some(applied));
            }
            self.stats.dry_run_writes += 1;
            tracing::info!(group = %self.groups[group].spec.name, path = %write.path.display(), value = %write.contents, "dry run: would write");
            return Ok(Some(applied));
        }
        if let Some(journal) = self.journal.as_mut() {
            journal.record(&Change::Write(write.clone()))?;
        }
        match self.writer.submit(write) {
            Ok(_) => {
                self.stats.writes_submitted += 1;
                Ok(Some(applied))
            }
            Err(e @ Error::WriterQueueFull { .. }) => {
                self.stats.writes_dropped += 1;
                tracing::warn!(error = %e, "write skipped this tick");
                Ok(None)
            }
            Err(e) => Err(e),
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

/// Creates or adopts every group of `specs` through `journal` (none in dry-run mode) and
/// switches their OOM killers off: the part of [`LinuxPlatform::open`] that changes the machine.
fn open_groups(
    backend: &dyn CgroupBackend,
    specs: Vec<GroupSpec>,
    mut journal: Option<&mut Journal>,
) -> Result<(Vec<Managed>, PlatformStats)> {
    let mut groups = Vec::with_capacity(specs.len());
    for spec in specs {
        if !backend.exists(&spec.path) {
            if !spec.create {
                return Err(Error::Config {
                    path: spec.path.dir_in(Path::new("/")),
                    reason: format!(
                        "cgroup of group {:?} does not exist; create it, or set create = true to let the agent create it",
                        spec.name
                    ),
                });
            }
            for change in backend.plan_create(&spec.path)? {
                match &mut journal {
                    Some(j) => j.perform(&change)?,
                    None => tracing::info!(group = %spec.name, change = %change, "dry run: would create"),
                }
            }
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

/// Switches the kernel's OOM killer off for a group (where the backend can) with the original
/// journaled, so a limit the group outgrows makes its tasks wait for the agent to raise it
/// rather than die. A failure is logged and counted, not fatal: the rescue still works on v2's
/// events, and on v1 only the kill cannot be prevented.
fn guard_against_oom_kills(backend: &dyn CgroupBackend, journal: &mut Journal, g: &mut Managed, stats: &mut PlatformStats) -> Result<()> {
    if let Some(file) = g.oom.file.as_ref() {
        let mut buf = Vec::new();
        if let Some(state) = read_at_start(file, &mut buf).and_then(crate::cgroup::parse_oom_state) {
            g.oom.events_seen = state.oom_events;
            if state.kill_disabled {
                g.oom.guard = OomGuard::Owners;
            }
        }
    }
    let Some(write) = backend.plan_oom_guard(&g.spec.path) else { return Ok(()) };
    match journal.perform(&Change::Write(write)) {
        Ok(()) => {
            if g.oom.guard == OomGuard::None {
                g.oom.guard = OomGuard::Armed;
            }
            Ok(())
        }
        Err(e @ (Error::Journal { .. } | Error::Io { op: "append to journal", .. })) => Err(e),
        Err(e) => {
            stats.oom_guard_failures += 1;
            tracing::warn!(group = %g.spec.name, error = %e, "cannot switch off the OOM killer of the group; an OOM at its limit may kill a task before the agent raises it");
            Ok(())
        }
    }
}

/// Whether the cgroup directory `dir` has child groups (subdirectories); unreadable counts as yes.
fn has_child_groups(dir: &Path) -> bool {
    std::fs::read_dir(dir).map_or(true, |entries| entries.flatten().any(|e| e.file_type().is_ok_and(|t| t.is_dir())))
}

/// Makes `write` on the calling thread; a failure other than a vanished group is logged
/// ("cannot {what}") and returned as `false`.
fn perform_or_warn(write: &crate::cgroup::FileWrite, group: &str, what: &str) -> Result<bool> {
    match write.perform() {
        Ok(()) => Ok(true),
        Err(e @ Error::GroupVanished { .. }) => Err(e),
        Err(e) => {
            tracing::warn!(group, error = %e, "cannot {what}");
            Ok(false)
        }
    }
}

fn knob_action(group: GroupId, knob: Knob, bytes: Option<u64>) -> Action {
    match knob {
        Knob::Max => Action::SetMax { group, bytes },
        Knob::High => Action::SetHigh { group, bytes },
        Knob::Min => Action::SetMin { group, bytes },
        Knob::Low => Action::SetLow { group, bytes },
    }
}

/// `SwapFree:` of `<proc_root>/meminfo` in bytes (`SwapFree:        1048572 kB`); 0 if absent.
/// `bytes` rounded up to whole pages; values too large for that become the largest page
/// multiple (no wrap to 0, which as a limit would freeze a group).
fn page_align_up(bytes: u64) -> u64 {
    bytes.checked_next_multiple_of(PAGE_BYTES).unwrap_or(u64::MAX / PAGE_BYTES * PAGE_BYTES)
}

fn page_align_down(bytes: u64) -> u64 {
    bytes / PAGE_BYTES * PAGE_BYTES
}

fn swap_free_bytes(proc_root: &Path) -> u64 {
    std::fs::read_to_string(proc_root.join("meminfo"))
        .ok()
        .and_then(|text| parse_meminfo_kb(&text, "SwapFree:"))
        .map_or(0, |kb| kb.saturating_mul(1024))
}

/// The value of `key` in /proc/meminfo text, in kB.
pub fn parse_meminfo_kb(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|l| l.strip_prefix(key)).and_then(|rest| rest.split_whitespace().next()).and_then(|v| v.parse().ok())
}

impl Platform for LinuxPlatform {
    type Error = Error;

    fn observe(&mut self) -> Result<Observation> {
        self.collect_writes();
        self.take_oom_notifications();
        let now_ns = monotonic_ns();
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
                    knobs: g.knobs,
                    floor_bytes: g.spec.floor_bytes,
                });
                continue;
            }
            if g.files.is_none() {
                g.files = OpenFiles::open(self.backend.as_ref(), &g.spec.path);
            }
            let knobs_now = (g.knobs_age_ticks < KNOB_REFRESH_TICKS).then_some(g.knobs);
            // Everything is fresh on the ticks that re-read the knobs.
            let fresh = if knobs_now.is_some() { g.stall_inputs } else { StallInputs::ALL };
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
                    g.stall = self.backend.stall_totals(&g.spec.path)?;
                    g.usage_bytes = self.backend.usage_bytes(&g.spec.path)?;
                    g.knobs = self.backend.knobs(&g.spec.path)?;
                    g.knobs_age_ticks = 0;
                    g.usage_fresh = true;
                }
            }
            observed.push(GroupObservation {
                name: g.spec.name.clone(),
                role: g.spec.role.clone(),
                stall: g.stall,
                usage_bytes: g.usage_bytes,
                knobs: g.knobs,
                floor_bytes: g.spec.floor_bytes,
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
                if rescued | self.keep_v2_max_ahead_of_usage(id)? {
                    seen.knobs = self.groups[id].knobs;
                }
                self.rearm_oom_guard(id)?;
            }
        }
        let events = self.take_job_events(now_ns);
        Ok(Observation { now_ns, total_memory_bytes: self.total_memory_bytes, groups: observed, events })
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
            let Some((group, knob, bytes)) = knob_change(action) else { continue };
            if group >= self.groups.len() {
                tracing::warn!(group, "controller named a group that does not exist; ignored");
                continue;
            }
            let result = if knob == Knob::Max && self.backend.supports(Knob::High) {
                self.apply_v2_max(group, bytes, &mut applied)
            } else {
                self.apply_knob(group, knob, bytes).map(|a| applied.extend(a))
            };
            match result {
                Ok(()) => {}
                Err(e @ Error::GroupVanished { .. }) => return Err(e),
                Err(e @ (Error::Journal { .. } | Error::Io { op: "append to journal", .. })) => return Err(e),
                Err(e) => {
                    self.stats.writes_failed += 1;
                    tracing::warn!(group = %self.groups[group].spec.name, error = %e, "cannot apply");
                }
            }
        }
        Ok(applied)
    }
}

/// Figures of a control loop's run.
#[derive(Clone, Debug, Default)]
pub struct LoopStats {
    pub ticks: u64,
    /// Ticks run before their time because a PSI trigger fired.
    pub early_wakes: u64,
    /// Ticks that started more than one interval late.
    pub overruns: u64,
    /// Cost (observe + tick + apply) of each tick, in ns; capped at [`LoopStats::MAX_SAMPLES`].
    pub cost_ns: Vec<u64>,
    pub cost_sum_ns: u64,
    pub cost_max_ns: u64,
    pub actions_applied: u64,
}

/// Percentiles of the per-tick cost.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct CostSummary {
    pub ticks: u64,
    pub mean_ns: u64,
    pub p50_ns: u64,
    pub p99_ns: u64,
    pub max_ns: u64,
}

impl LoopStats {
    pub const MAX_SAMPLES: usize = 1 << 20;

    fn record(&mut self, cost_ns: u64) {
        self.ticks += 1;
        self.cost_sum_ns += cost_ns;
        self.cost_max_ns = self.cost_max_ns.max(cost_ns);
        if self.cost_ns.len() < Self::MAX_SAMPLES {
            self.cost_ns.push(cost_ns);
        }
    }

    pub fn summary(&self) -> CostSummary {
        let mut sorted = self.cost_ns.clone();
        sorted.sort_unstable();
        let at = |q: f64| sorted.get(((sorted.len() as f64 - 1.0) * q).round() as usize).copied().unwrap_or(0);
        CostSummary {
            ticks: self.ticks,
            mean_ns: self.cost_sum_ns.checked_div(self.ticks).unwrap_or(0),
            p50_ns: at(0.5),
            p99_ns: at(0.99),
            max_ns: self.cost_max_ns,
        }
    }
}

/// Ticks a controller at its interval on CLOCK_MONOTONIC (std's `Instant`). Between ticks it
/// waits on the PSI triggers, if any: one firing runs the next tick at once (a hint that the
/// situation changed; the schedule then restarts from that tick).
pub struct ControlLoop {
    pub interval: Duration,
    pub triggers: Vec<PsiTrigger>,
    pub stats: LoopStats,
}

impl ControlLoop {
    pub fn new(interval_ns: u64) -> Self {
        ControlLoop { interval: Duration::from_nanos(interval_ns.max(1)), triggers: Vec::new(), stats: LoopStats::default() }
    }

    /// Runs until `stop` says so (checked before every tick) or an error. `after_tick` sees
    /// the platform and this tick's applied actions (metrics, logs).
    pub fn run<P: Platform, C: Controller + ?Sized>(
        &mut self,
        platform: &mut P,
        controller: &mut C,
        mut stop: impl FnMut() -> bool,
        mut after_tick: impl FnMut(&mut P, &[Action], &LoopStats),
    ) -> std::result::Result<(), P::Error> {
        let mut next = Instant::now();
        while !stop() {
            let started = Instant::now();
            if started.duration_since(next) > self.interval {
                self.stats.overruns += 1;
            }
            let applied = critmem_policy::step(platform, controller)?;
            self.stats.record(started.elapsed().as_nanos() as u64);
            self.stats.actions_applied += applied.len() as u64;
            after_tick(platform, &applied, &self.stats);
            next = started + self.interval;
            // A tick that took longer than the interval starts the next one now, not a burst.
            if next < Instant::now() {
                next = Instant::now();
            }
            if self.wait_until(next) {
                self.stats.early_wakes += 1;
            }
        }
        Ok(())
    }

    /// Sleeps until `deadline`, or returns `true` early when a trigger fires. Triggers whose
    /// group is gone are dropped (the next observe reports the vanished group).
    fn wait_until(&mut self, deadline: Instant) -> bool {
        let left = deadline.saturating_duration_since(Instant::now());
        if self.triggers.is_empty() {
            std::thread::sleep(left);
            return false;
        }
        let refs: Vec<&PsiTrigger> = self.triggers.iter().collect();
        match wait_any(&refs, left) {
            Ok(ready) => {
                let gone: Vec<usize> = ready.iter().filter(|(_, e)| *e == TriggerEvent::GroupGone).map(|(i, _)| *i).collect();
                let fired = ready.iter().any(|(_, e)| *e == TriggerEvent::Fired);
                for i in gone.into_iter().rev() {
                    self.triggers.remove(i);
                }
                if !fired {
                    // Interrupted or only gone-events: sleep out the rest.
                    std::thread::sleep(deadline.saturating_duration_since(Instant::now()));
                }
                fired
            }
            Err(e) => {
                tracing::warn!(error = %e, "waiting on PSI triggers failed; ticking on the timer only");
                self.triggers.clear();
                std::thread::sleep(deadline.saturating_duration_since(Instant::now()));
                false
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cgroup::fake::{populate, v2_root, V2_FILES};
    use crate::cgroup::V2Backend;
    use proptest::prelude::*;

    const MIB: u64 = 1 << 20;

    fn specs() -> Vec<GroupSpec> {
        vec![
            GroupSpec {
                name: "rt".into(),
                path: GroupPath::new("crit-rt").unwrap(),
                role: GroupRole::SoftRealTime { deadline_ns: 10_000_000, bcet_ns: 1_000_000 },
                floor_bytes: 64 * MIB,
                create: true,
            },
            GroupSpec {
                name: "batch".into(),
                path: GroupPath::new("batch").unwrap(),
                role: GroupRole::NonRealTime,
                floor_bytes: 16 * MIB,
                create: false,
            },
        ]
    }

    /// A fake v2 tree with `batch` existing (adopted) and `critmem/rt` to be created.
    fn fake(dir: &Path) -> PlatformOptions {
        v2_root(&dir.join("cg"));
        populate(&dir.join("cg/batch"), V2_FILES);
        populate(&dir.join("proc"), &[("meminfo", "MemTotal: 100 kB\nSwapFree:        0 kB\n")]);
        PlatformOptions {
            total_memory_bytes: 512 * MIB,
            dry_run: false,
            journal_path: Some(dir.join("journal.jsonl")),
            job_server: None,
            proc_root: dir.join("proc"),
        }
    }

    /// The fake tree has no kernel to fill a new directory; do it after open.
    fn open(dir: &Path, options: PlatformOptions) -> LinuxPlatform {
        let backend = Box::new(V2Backend::new(dir.join("cg")));
        // mkdir happens inside open; pre-create the files the kernel would add afterwards.
        let platform = LinuxPlatform::open(backend, specs(), options);
        let platform = platform.unwrap();
        populate(&dir.join("cg/crit-rt"), V2_FILES);
        platform
    }

    fn settle(platform: &LinuxPlatform) {
        assert!(platform.writer.wait_idle(Duration::from_secs(5)));
    }

    #[test]
    fn limits_are_clamped_to_floors_journaled_and_restored() {
        let dir = tempfile::tempdir().unwrap();
        let options = fake(dir.path());
        let mut platform = open(dir.path(), options);
        platform.observe().unwrap();
        let applied = platform
            .apply(&[Action::SetMax { group: 0, bytes: Some(MIB) }, Action::SetMax { group: 1, bytes: Some(100 * MIB + 1) }])
            .unwrap();
        assert_eq!(
            applied,
            vec![Action::SetMax { group: 0, bytes: Some(64 * MIB) }, Action::SetMax { group: 1, bytes: Some(100 * MIB + 4096) }]
        );
        settle(&platform);
        assert_eq!(std::fs::read_to_string(dir.path().join("cg/batch/memory.max")).unwrap(), (100 * MIB + 4096).to_string());
        let obs = platform.observe().unwrap();
        assert_eq!(obs.groups[1].knobs.max_bytes, Some(100 * MIB + 4096));
        assert_eq!(platform.stats().clamped_to_floor, 1);
        // The same value again is not rewritten.
        assert!(platform.apply(&[Action::SetMax { group: 1, bytes: Some(100 * MIB + 4096) }]).unwrap().is_empty());
        let report = platform.restore(Duration::from_secs(5)).unwrap();
        assert_eq!(std::fs::read_to_string(dir.path().join("cg/batch/memory.max")).unwrap(), "max");
        assert!(!dir.path().join("cg/crit-rt").exists(), "created groups are removed: {report:?}");
    }

    /// Found by the audit: a group missing part-way through left the groups created before it,
    /// and the journal, behind until a next start (never, for a configuration that stays wrong).
    #[test]
    fn a_failed_open_removes_the_groups_it_created_and_its_journal() {
        let dir = tempfile::tempdir().unwrap();
        let options = fake(dir.path());
        let mut specs = specs();
        specs[1].path = GroupPath::new("missing").unwrap();
        let backend = Box::new(V2Backend::new(dir.path().join("cg")));
        let err = LinuxPlatform::open(backend, specs, options).err().expect("the missing group is an error");
        assert!(err.to_string().contains("does not exist"), "{err}");
        assert!(!dir.path().join("cg/crit-rt").exists(), "the group created before the error is removed");
        assert!(!dir.path().join("journal.jsonl").exists(), "and the journal with it");
    }

    #[test]
    fn a_v2_hard_limit_never_goes_below_unreclaimable_memory() {
        let dir = tempfile::tempdir().unwrap();
        let options = fake(dir.path());
        let mut platform = open(dir.path(), options);
        let batch = dir.path().join("cg/batch");
        std::fs::write(batch.join("memory.current"), (200 * MIB).to_string()).unwrap();
        std::fs::write(batch.join("memory.stat"), format!("anon {}\nfile 0\nunevictable 0\n", 150 * MIB)).unwrap();
        platform.observe().unwrap();
        let applied = platform.apply(&[Action::SetMax { group: 1, bytes: Some(32 * MIB) }]).unwrap();
        // Below usage: throttled through memory.high, memory.max kept above usage.
        assert_eq!(
            applied,
            vec![Action::SetHigh { group: 1, bytes: Some(158 * MIB) }, Action::SetMax { group: 1, bytes: Some(216 * MIB) }]
        );
        settle(&platform);
        platform.observe().unwrap();
        // With enough free swap the anon memory is reclaimable, so the request stands (as high).
        std::fs::write(dir.path().join("proc/meminfo"), "SwapFree: 1048576 kB\n").unwrap();
        let applied = platform.apply(&[Action::SetMax { group: 1, bytes: Some(32 * MIB) }]).unwrap();
        assert_eq!(applied, vec![Action::SetHigh { group: 1, bytes: Some(32 * MIB) }]);
        settle(&platform);
        // Once usage is down, the hard limit takes over and the helper high is cleared.
        std::fs::write(batch.join("memory.current"), (30 * MIB).to_string()).unwrap();
        platform.observe().unwrap();
        let applied = platform.apply(&[Action::SetMax { group: 1, bytes: Some(32 * MIB) }]).unwrap();
        assert_eq!(applied, vec![Action::SetMax { group: 1, bytes: Some(32 * MIB) }, Action::SetHigh { group: 1, bytes: None }]);
        settle(&platform);
        assert_eq!(std::fs::read_to_string(batch.join("memory.high")).unwrap(), "max");
        assert_eq!(std::fs::read_to_string(batch.join("memory.max")).unwrap(), (32 * MIB).to_string());
        assert_eq!(platform.stats().lowered_via_high, 2);
        platform.restore(Duration::from_secs(5)).unwrap();
    }

    #[test]
    fn page_rounding_saturates_instead_of_wrapping_to_zero() {
        assert_eq!(page_align_up(1), 4096);
        assert_eq!(page_align_up(8192), 8192);
        assert_eq!(page_align_up(u64::MAX), u64::MAX / 4096 * 4096);
    }

    #[test]
    fn a_v2_group_growing_while_throttled_keeps_its_hard_limit_ahead() {
        let dir = tempfile::tempdir().unwrap();
        let options = fake(dir.path());
        let mut platform = open(dir.path(), options);
        let batch = dir.path().join("cg/batch");
        std::fs::write(batch.join("memory.current"), (200 * MIB).to_string()).unwrap();
        std::fs::write(dir.path().join("proc/meminfo"), "SwapFree: 1048576 kB\n").unwrap();
        platform.observe().unwrap();
        let applied = platform.apply(&[Action::SetMax { group: 1, bytes: Some(100 * MIB) }]).unwrap();
        assert_eq!(
            applied,
            vec![Action::SetHigh { group: 1, bytes: Some(100 * MIB) }, Action::SetMax { group: 1, bytes: Some(216 * MIB) }]
        );
        settle(&platform);
        // Throttled, it still grows; with no new request memory.max must move ahead of it.
        std::fs::write(batch.join("memory.current"), (205 * MIB).to_string()).unwrap();
        assert_eq!(platform.observe().unwrap().groups[1].knobs.max_bytes, Some(216 * MIB), "still 11 MiB ahead");
        std::fs::write(batch.join("memory.current"), (210 * MIB).to_string()).unwrap();
        let obs = platform.observe().unwrap();
        assert_eq!(obs.groups[1].knobs.max_bytes, Some(226 * MIB), "6 MiB ahead is too close: raised to 16 MiB ahead");
        assert_eq!(std::fs::read_to_string(batch.join("memory.max")).unwrap(), (226 * MIB).to_string());
        assert_eq!(platform.stats().v2_max_kept_ahead, 1);
        platform.restore(Duration::from_secs(5)).unwrap();
        assert_eq!(std::fs::read_to_string(batch.join("memory.max")).unwrap(), "max");
    }

    #[test]
    fn a_v2_group_out_of_memory_gets_its_limit_raised_and_held() {
        let dir = tempfile::tempdir().unwrap();
        let options = fake(dir.path());
        let mut platform = open(dir.path(), options);
        let batch = dir.path().join("cg/batch");
        std::fs::write(batch.join("memory.max"), (64 * MIB).to_string()).unwrap();
        std::fs::write(batch.join("memory.current"), (63 * MIB).to_string()).unwrap();
        assert_eq!(platform.observe().unwrap().groups[1].knobs.max_bytes, Some(64 * MIB), "no OOM yet");
        std::fs::write(batch.join("memory.events"), "low 0\nhigh 0\nmax 9\noom 1\noom_kill 0\n").unwrap();
        let obs = platform.observe().unwrap();
        assert_eq!(obs.groups[1].knobs.max_bytes, Some(80 * MIB), "raised by 16 MiB at once");
        assert_eq!(std::fs::read_to_string(batch.join("memory.max")).unwrap(), (80 * MIB).to_string());
        assert_eq!(platform.stats().oom_rescues, 1);
        // Held against the controller's lower requests for a while.
        let applied = platform.apply(&[Action::SetMax { group: 1, bytes: Some(32 * MIB) }]).unwrap();
        assert!(applied.is_empty(), "{applied:?}");
        assert_eq!(platform.stats().clamped_to_oom_hold, 1);
        // The same event is not a new OOM.
        platform.observe().unwrap();
        assert_eq!(platform.stats().oom_rescues, 1);
        platform.restore(Duration::from_secs(5)).unwrap();
        assert_eq!(
            std::fs::read_to_string(batch.join("memory.max")).unwrap(),
            (64 * MIB).to_string(),
            "restored to its value before the rescue"
        );
    }

    /// An adopted hybrid group `batch` (its v1 directory returned), with `extra` files beside
    /// the usual ones, opened alone.
    fn v1_adopted(dir: &Path, extra: &[(&str, &str)]) -> (LinuxPlatform, PathBuf) {
        v1_adopted_with(dir, extra, false)
    }

    /// A v1 group `batch` on a fake hybrid tree, with `extra` files; `notify`: the backend
    /// registers OOM notifiers there too (the test signals them).
    fn v1_adopted_with(dir: &Path, extra: &[(&str, &str)], notify: bool) -> (LinuxPlatform, PathBuf) {
        use crate::cgroup::fake::{hybrid_roots, UNIFIED_FILES, V1_MEMORY_FILES};
        let (memory, unified) = hybrid_roots(&dir.join("cg"));
        let batch = memory.join("batch");
        populate(&batch, V1_MEMORY_FILES);
        populate(&batch, extra);
        populate(&unified.join("batch"), UNIFIED_FILES);
        let mut options = fake(dir);
        options.journal_path = Some(dir.join("journal-v1.jsonl"));
        let specs = vec![GroupSpec {
            name: "batch".into(),
            path: GroupPath::new("batch").unwrap(),
            role: GroupRole::NonRealTime,
            floor_bytes: 16 * MIB,
            create: false,
        }];
        let backend = crate::cgroup::HybridBackend::new(memory, unified);
        let backend = if notify { backend.notifying_on_plain_fs() } else { backend };
        (LinuxPlatform::open(Box::new(backend), specs, options).unwrap(), batch)
    }

    #[test]
    fn usage_nobody_reads_waits_for_the_knobs_until_an_oom_notification_brings_the_rescue() {
        let dir = tempfile::tempdir().unwrap();
        let (mut platform, batch) = v1_adopted_with(dir.path(), &[("cgroup.event_control", "")], true);
        let registration = std::fs::read_to_string(batch.join("cgroup.event_control")).unwrap();
        assert_eq!(
            registration.split(' ').filter(|fd| fd.parse::<u32>().is_ok()).count(),
            2,
            "`<eventfd> <oom_control fd>`: {registration:?}"
        );
        platform.set_usage_inputs(|_| false);
        let (usage_file, oom_control) = (batch.join("memory.usage_in_bytes"), batch.join("memory.oom_control"));
        let set = |usage_mib: u64, under_oom: bool| {
            std::fs::write(&usage_file, (usage_mib * MIB).to_string()).unwrap();
            std::fs::write(&oom_control, format!("oom_kill_disable 1\nunder_oom {}\noom_kill 0\n", u8::from(under_oom))).unwrap();
        };
        std::fs::write(batch.join("memory.limit_in_bytes"), (100 * MIB).to_string()).unwrap();
        set(10, false);
        assert_eq!(platform.observe().unwrap().groups[0].usage_bytes, 10 * MIB, "the first tick reads everything");

        // At its limit with a task waiting, but the kernel has not said so yet: usage is not
        // read, so nothing is rescued on a stale value.
        set(100, true);
        let obs = platform.observe().unwrap();
        assert_eq!(obs.groups[0].usage_bytes, 10 * MIB, "usage nobody reads is not read");
        assert_eq!((platform.stats().usage_reads_skipped, platform.stats().oom_rescues), (1, 0));

        platform.signal_oom_notifier(0);
        let obs = platform.observe().unwrap();
        assert_eq!(obs.groups[0].usage_bytes, 100 * MIB, "notified: usage read at once");
        assert_eq!(obs.groups[0].knobs.max_bytes, Some(125 * MIB), "and the limit raised by a quarter");
        assert_eq!(
            (platform.stats().oom_notifications, platform.stats().oom_rescues, platform.stats().oom_rescues_on_notification),
            (1, 1, 1)
        );

        // Seen waiting when rescued, so usage is read every tick until it is seen not waiting;
        // the raised limit is far above it (a task reaching it again is notified again), so no
        // second raise, and from then on usage waits for the knobs again.
        set(101, true);
        assert_eq!(platform.observe().unwrap().groups[0].usage_bytes, 101 * MIB);
        assert_eq!(platform.stats().oom_rescues, 1);
        set(60, false);
        assert_eq!(platform.observe().unwrap().groups[0].usage_bytes, 60 * MIB, "still pending: read");
        set(61, false);
        assert_eq!(platform.observe().unwrap().groups[0].usage_bytes, 60 * MIB, "not pending any more");
        let refreshed = (0..KNOB_REFRESH_TICKS).map(|_| platform.observe().unwrap().groups[0].usage_bytes).any(|u| u == 61 * MIB);
        assert!(refreshed, "unread usage is still refreshed with the knobs");
        assert_eq!(platform.usage_now(0).unwrap(), 61 * MIB);

        // A controller that reads usage gets it fresh every tick, notifier or not.
        platform.set_usage_inputs(|_| true);
        set(70, false);
        assert_eq!(platform.observe().unwrap().groups[0].usage_bytes, 70 * MIB);
        let report = platform.restore(Duration::from_secs(5)).unwrap();
        assert!(report.failures.is_empty(), "{report:?}");
    }

    #[test]
    fn a_v1_group_under_oom_gets_its_limit_raised_and_the_oom_killer_switch_restored() {
        let dir = tempfile::tempdir().unwrap();
        let (mut platform, batch) = v1_adopted(dir.path(), &[]);
        let oom_control = batch.join("memory.oom_control");
        assert_eq!(std::fs::read_to_string(&oom_control).unwrap(), "1", "the OOM killer is switched off");
        std::fs::write(batch.join("memory.limit_in_bytes"), (100 * MIB).to_string()).unwrap();
        std::fs::write(batch.join("memory.usage_in_bytes"), (100 * MIB).to_string()).unwrap();
        std::fs::write(&oom_control, "oom_kill_disable 1\nunder_oom 1\noom_kill 0\n").unwrap();
        let obs = platform.observe().unwrap();
        assert_eq!(obs.groups[0].knobs.max_bytes, Some(125 * MIB), "raised by a quarter at once");
        assert_eq!(platform.stats().oom_rescues, 1);
        let report = platform.restore(Duration::from_secs(5)).unwrap();
        assert!(report.failures.is_empty(), "{report:?}");
        assert_eq!(std::fs::read_to_string(&oom_control).unwrap(), "0", "switch restored");
        assert_eq!(
            std::fs::read_to_string(batch.join("memory.limit_in_bytes")).unwrap(),
            (100 * MIB).to_string(),
            "limit restored to its value before the rescue"
        );
    }

    /// [`v1_adopted`] with a memory+swap limit of 256 MiB.
    fn v1_with_memsw_limit(dir: &Path) -> (LinuxPlatform, PathBuf) {
        v1_adopted(dir, &[("memory.memsw.limit_in_bytes", "268435456\n"), ("memory.memsw.usage_in_bytes", "8192\n")])
    }

    #[test]
    fn a_v1_memory_limit_never_goes_above_the_groups_memory_and_swap_limit() {
        let dir = tempfile::tempdir().unwrap();
        let (mut platform, batch) = v1_with_memsw_limit(dir.path());
        platform.observe().unwrap();
        // The kernel would refuse 1 GiB with EINVAL; the memory+swap limit binds anyway.
        let applied = platform.apply(&[Action::SetMax { group: 0, bytes: Some(1024 * MIB) }]).unwrap();
        assert_eq!(applied, vec![Action::SetMax { group: 0, bytes: Some(256 * MIB) }]);
        settle(&platform);
        assert_eq!(std::fs::read_to_string(batch.join("memory.limit_in_bytes")).unwrap(), (256 * MIB).to_string());
        assert_eq!(platform.stats().clamped_to_combined_limit, 1);
        platform.apply(&[Action::SetMax { group: 0, bytes: Some(100 * MIB) }]).unwrap();
        settle(&platform);
        assert_eq!(
            std::fs::read_to_string(batch.join("memory.limit_in_bytes")).unwrap(),
            (100 * MIB).to_string(),
            "lower limits are left alone"
        );
        assert_eq!(platform.stats().clamped_to_combined_limit, 1);
    }

    #[test]
    fn a_v1_group_out_of_memory_at_its_memory_and_swap_limit_gets_its_oom_killer_back_until_it_has_room() {
        let dir = tempfile::tempdir().unwrap();
        let (mut platform, batch) = v1_with_memsw_limit(dir.path());
        let oom_control = batch.join("memory.oom_control");
        assert_eq!(std::fs::read_to_string(&oom_control).unwrap(), "1", "the OOM killer is switched off");
        // Memory limit 200 MiB, but memory+swap is full at 256 MiB: raising the memory limit
        // cannot help, and with the killer off the tasks would wait for ever.
        std::fs::write(batch.join("memory.limit_in_bytes"), (200 * MIB).to_string()).unwrap();
        std::fs::write(batch.join("memory.usage_in_bytes"), (199 * MIB).to_string()).unwrap();
        std::fs::write(batch.join("memory.memsw.usage_in_bytes"), (256 * MIB).to_string()).unwrap();
        std::fs::write(&oom_control, "oom_kill_disable 1\nunder_oom 1\noom_kill 0\n").unwrap();
        let obs = platform.observe().unwrap();
        assert_eq!(std::fs::read_to_string(&oom_control).unwrap(), "0", "the OOM killer is back on");
        assert_eq!((platform.stats().oom_guard_releases, platform.stats().oom_rescues), (1, 0));
        assert_eq!(obs.groups[0].knobs.max_bytes, Some(200 * MIB), "nothing raised");

        // Still out of memory: stays released.
        std::fs::write(&oom_control, "oom_kill_disable 0\nunder_oom 1\noom_kill 0\n").unwrap();
        platform.observe().unwrap();
        assert_eq!(std::fs::read_to_string(&oom_control).unwrap(), "oom_kill_disable 0\nunder_oom 1\noom_kill 0\n");
        // The kernel killed a task: room again, so the guard comes back.
        std::fs::write(batch.join("memory.usage_in_bytes"), (120 * MIB).to_string()).unwrap();
        std::fs::write(batch.join("memory.memsw.usage_in_bytes"), (150 * MIB).to_string()).unwrap();
        std::fs::write(&oom_control, "oom_kill_disable 0\nunder_oom 0\noom_kill 1\n").unwrap();
        platform.observe().unwrap();
        assert_eq!(std::fs::read_to_string(&oom_control).unwrap(), "1", "switched off again");
        assert_eq!(platform.stats().oom_guard_releases, 1);

        // Out of memory at the memory limit alone: raised as usual, but not above 256 MiB.
        std::fs::write(batch.join("memory.usage_in_bytes"), (200 * MIB).to_string()).unwrap();
        std::fs::write(&oom_control, "oom_kill_disable 1\nunder_oom 1\noom_kill 1\n").unwrap();
        let obs = platform.observe().unwrap();
        assert_eq!(obs.groups[0].knobs.max_bytes, Some(250 * MIB), "raised by a quarter");
        assert_eq!(platform.stats().oom_rescues, 1);
        std::fs::write(batch.join("memory.limit_in_bytes"), (250 * MIB).to_string()).unwrap();
        std::fs::write(batch.join("memory.usage_in_bytes"), (250 * MIB).to_string()).unwrap();
        let obs = platform.observe().unwrap();
        assert_eq!(obs.groups[0].knobs.max_bytes, Some(256 * MIB), "capped at the memory+swap limit");
        assert_eq!(platform.stats().oom_rescues, 2);
        let report = platform.restore(Duration::from_secs(5)).unwrap();
        assert!(report.failures.is_empty(), "{report:?}");
        assert_eq!(std::fs::read_to_string(&oom_control).unwrap(), "0", "switch restored");
    }

    #[test]
    fn a_notified_group_waiting_at_its_memory_and_swap_limit_far_below_its_memory_limit_gets_its_oom_killer_back() {
        let dir = tempfile::tempdir().unwrap();
        let memsw =
            [("memory.memsw.limit_in_bytes", "268435456\n"), ("memory.memsw.usage_in_bytes", "8192\n"), ("cgroup.event_control", "")];
        let (mut platform, batch) = v1_adopted_with(dir.path(), &memsw, true);
        let oom_control = batch.join("memory.oom_control");
        // Most of it swapped out: memory usage is far below the memory limit, memory+swap full.
        std::fs::write(batch.join("memory.limit_in_bytes"), (200 * MIB).to_string()).unwrap();
        std::fs::write(batch.join("memory.usage_in_bytes"), (100 * MIB).to_string()).unwrap();
        std::fs::write(batch.join("memory.memsw.usage_in_bytes"), (256 * MIB).to_string()).unwrap();
        std::fs::write(&oom_control, "oom_kill_disable 1\nunder_oom 1\noom_kill 0\n").unwrap();
        platform.observe().unwrap();
        assert_eq!(platform.stats().oom_guard_releases, 0, "usage is not near the memory limit: not looked at without a notification");
        platform.signal_oom_notifier(0);
        platform.observe().unwrap();
        assert_eq!(std::fs::read_to_string(&oom_control).unwrap(), "0", "the OOM killer is back on");
        assert_eq!(
            (platform.stats().oom_guard_releases, platform.stats().oom_rescues, platform.stats().oom_checks_on_notification),
            (1, 0, 1)
        );
        let report = platform.restore(Duration::from_secs(5)).unwrap();
        assert!(report.failures.is_empty(), "{report:?}");
    }

    #[test]
    fn a_task_left_waiting_far_below_a_raised_limit_is_woken_by_a_one_page_raise() {
        let dir = tempfile::tempdir().unwrap();
        let (mut platform, batch) = v1_adopted(dir.path(), &[]);
        let (limit_file, usage_file, oom_control) =
            (batch.join("memory.limit_in_bytes"), batch.join("memory.usage_in_bytes"), batch.join("memory.oom_control"));
        let set = |usage_mib: u64, under_oom: bool, kill_disabled: bool| {
            std::fs::write(&usage_file, (usage_mib * MIB).to_string()).unwrap();
            std::fs::write(
                &oom_control,
                format!("oom_kill_disable {}\nunder_oom {}\noom_kill 0\n", u8::from(kill_disabled), u8::from(under_oom)),
            )
            .unwrap();
        };
        let limit = || std::fs::read_to_string(&limit_file).unwrap().parse::<u64>().unwrap();
        std::fs::write(&limit_file, (100 * MIB).to_string()).unwrap();
        set(100, true, true);
        platform.observe().unwrap();
        assert_eq!((limit(), platform.stats().oom_rescues), (125 * MIB, 1), "rescued");

        // One task still waits after the raise (it slept after the raise's wake-up). Right after
        // the raise that may be a woken task that has not left yet: left alone.
        set(101, true, true);
        platform.observe().unwrap();
        assert_eq!((limit(), platform.stats().oom_wakeups), (125 * MIB, 0));
        std::thread::sleep(Duration::from_nanos(OOM_WAKE_RETRY_NS + 10_000_000));
        let obs = platform.observe().unwrap();
        assert_eq!((limit(), platform.stats().oom_wakeups), (125 * MIB + PAGE_BYTES, 1), "woken by a one-page raise");
        assert_eq!(obs.groups[0].knobs.max_bytes, Some(125 * MIB + PAGE_BYTES));
        platform.observe().unwrap();
        assert_eq!(platform.stats().oom_wakeups, 1, "not again at once");
        std::thread::sleep(Duration::from_nanos(OOM_WAKE_RETRY_NS + 10_000_000));
        platform.observe().unwrap();
        assert_eq!((limit(), platform.stats().oom_wakeups), (125 * MIB + 2 * PAGE_BYTES, 2), "and again while it waits");

        // Nobody waits any more: no more raises.
        set(101, false, true);
        platform.observe().unwrap();
        std::thread::sleep(Duration::from_nanos(OOM_WAKE_RETRY_NS + 10_000_000));
        platform.observe().unwrap();
        assert_eq!((limit(), platform.stats().oom_wakeups), (125 * MIB + 2 * PAGE_BYTES, 2));
        // With the OOM killer on, a task does not sleep at the limit: nothing to wake.
        set(101, true, false);
        platform.observe().unwrap();
        assert_eq!(platform.stats().oom_wakeups, 2);
        assert_eq!(platform.stats().oom_rescues, 1, "never treated as a rescue");
        let report = platform.restore(Duration::from_secs(5)).unwrap();
        assert!(report.failures.is_empty(), "{report:?}");
        assert_eq!(limit(), 100 * MIB, "the limit before critmem restored");
    }

    #[test]
    fn a_task_notified_waiting_after_a_raise_is_woken_at_once_but_not_above_the_memory_and_swap_limit() {
        let dir = tempfile::tempdir().unwrap();
        let memsw =
            [("memory.memsw.limit_in_bytes", "524288000\n"), ("memory.memsw.usage_in_bytes", "8192\n"), ("cgroup.event_control", "")];
        let (mut platform, batch) = v1_adopted_with(dir.path(), &memsw, true);
        let (limit_file, oom_control) = (batch.join("memory.limit_in_bytes"), batch.join("memory.oom_control"));
        let limit = || std::fs::read_to_string(&limit_file).unwrap().parse::<u64>().unwrap();
        std::fs::write(&limit_file, (200 * MIB).to_string()).unwrap();
        std::fs::write(batch.join("memory.usage_in_bytes"), (100 * MIB).to_string()).unwrap();
        platform.observe().unwrap();
        // The task's charge failed at an older, lower limit; it went to sleep (and notified)
        // after the raise to 200 MiB woke the waiters.
        std::fs::write(&oom_control, "oom_kill_disable 1\nunder_oom 1\noom_kill 0\n").unwrap();
        platform.signal_oom_notifier(0);
        platform.observe().unwrap();
        assert_eq!((limit(), platform.stats().oom_wakeups, platform.stats().oom_rescues), (200 * MIB + PAGE_BYTES, 1, 0));
        assert_eq!(platform.stats().oom_guard_releases, 0, "memory+swap has room");

        // With the memory limit at the memory+swap limit a raise would be refused: left alone.
        std::fs::write(batch.join("memory.memsw.limit_in_bytes"), (200 * MIB + PAGE_BYTES).to_string()).unwrap();
        std::thread::sleep(Duration::from_nanos(OOM_WAKE_RETRY_NS + 10_000_000));
        platform.observe().unwrap();
        assert_eq!((limit(), platform.stats().oom_wakeups), (200 * MIB + PAGE_BYTES, 1));
        let report = platform.restore(Duration::from_secs(5)).unwrap();
        assert!(report.failures.is_empty(), "{report:?}");
    }

    #[test]
    fn a_group_with_child_groups_gets_no_oom_notifier_and_its_usage_is_read_every_tick() {
        let dir = tempfile::tempdir().unwrap();
        let (memory, _) = crate::cgroup::fake::hybrid_roots(&dir.path().join("cg"));
        std::fs::create_dir_all(memory.join("batch/child")).unwrap();
        let (mut platform, batch) = v1_adopted_with(dir.path(), &[("cgroup.event_control", "")], true);
        assert_eq!(std::fs::read_to_string(batch.join("cgroup.event_control")).unwrap(), "", "nothing registered");
        platform.set_usage_inputs(|_| false);
        for _ in 0..3 {
            platform.observe().unwrap();
        }
        assert_eq!(platform.stats().usage_reads_skipped, 0);
        let report = platform.restore(Duration::from_secs(5)).unwrap();
        assert!(report.failures.is_empty(), "{report:?}");
    }

    #[test]
    fn dry_run_changes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let mut options = fake(dir.path());
        options.dry_run = true;
        let backend = Box::new(V2Backend::new(dir.path().join("cg")));
        let mut platform = LinuxPlatform::open(backend, specs(), options).unwrap();
        assert!(!dir.path().join("cg/crit-rt").exists());
        let obs = platform.observe().unwrap();
        assert_eq!(obs.groups.len(), 2);
        for _ in 0..3 {
            let applied = platform.apply(&[Action::SetMax { group: 1, bytes: Some(32 * MIB) }]).unwrap();
            assert_eq!(applied.len(), 1);
        }
        assert_eq!(platform.stats().dry_run_writes, 1, "an unchanged intention is logged once");
        assert_eq!(std::fs::read_to_string(dir.path().join("cg/batch/memory.max")).unwrap(), "max\n");
        platform.restore(Duration::from_secs(1)).unwrap();
        assert!(!dir.path().join("journal.jsonl").exists());
    }

    #[test]
    fn the_conformance_body_passes_on_a_fake_tree() {
        let dir = tempfile::tempdir().unwrap();
        let options = fake(dir.path());
        let mut platform = open(dir.path(), options);
        crate::conformance::check_platform(&mut platform, |p| settle(p)).unwrap();
        platform.restore(Duration::from_secs(5)).unwrap();
    }

    #[test]
    fn the_loop_ticks_at_its_interval_and_measures_cost() {
        let dir = tempfile::tempdir().unwrap();
        let options = fake(dir.path());
        let mut platform = open(dir.path(), options);
        let mut controller = critmem_policy::make_controller("greedy", serde_json::json!({})).unwrap();
        let mut control = ControlLoop::new(2_000_000);
        // Counted in ticks, not wall time, so a slow machine cannot fail it.
        let ticks = std::cell::Cell::new(0u64);
        let started = Instant::now();
        control.run(&mut platform, controller.as_mut(), || ticks.get() == 20, |_, _, _| ticks.set(ticks.get() + 1)).unwrap();
        let took = started.elapsed();
        let summary = control.stats.summary();
        assert_eq!(summary.ticks, 20, "{summary:?}");
        // Each tick starts an interval after the one before, or later: never a burst.
        assert!(took >= 19 * control.interval, "20 ticks in {took:?}");
        assert!(summary.max_ns >= summary.p50_ns && summary.p50_ns > 0);
        platform.restore(Duration::from_secs(5)).unwrap();
    }

    #[test]
    fn knob_files_parse_like_the_backends_read_them() {
        assert_eq!(parse_knob("max", false), Some(None));
        assert_eq!(parse_knob("9223372036854771712", false), Some(None));
        assert_eq!(parse_knob("0", true), Some(None));
        assert_eq!(parse_knob("0", false), Some(Some(0)));
        assert_eq!(parse_knob("4096", true), Some(Some(4096)));
        assert_eq!(parse_knob("x", false), None);
    }

    proptest! {
        #[test]
        fn number_parsers_never_panic_on_arbitrary_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..100), key in ".{0,10}") {
            let text = String::from_utf8_lossy(&bytes);
            let _ = parse_u64(&bytes);
            let _ = parse_knob(&text, false);
            let _ = parse_knob(&text, true);
            let _ = parse_meminfo_kb(&text, &key);
        }

        /// Whatever the fast reader accepts, the standard parser reads the same from the trimmed
        /// text; on plain digits it refuses exactly what does not fit in u64 (or is over 20 long).
        #[test]
        fn parse_u64_agrees_with_the_standard_parser(text in r"[ \t\r\n]{0,2}(\+|-)?[0-9]{0,25}(max|x| [0-9])?[ \t\r\n\x0b\x0c]{0,2}", digits in "[0-9]{1,25}") {
            if let Some(v) = parse_u64(text.as_bytes()) {
                prop_assert_eq!(text.trim().parse::<u64>(), Ok(v));
            }
            prop_assert_eq!(parse_u64(digits.as_bytes()), digits.parse::<u64>().ok().filter(|_| digits.len() <= 20));
        }

        /// Kernel counters and knobs are `%llu` followed by a newline.
        #[test]
        fn u64_files_parse_back(n in any::<u64>(), before in r"[ \t]{0,2}", after in r"[ \t\r]{0,2}\n?") {
            prop_assert_eq!(parse_u64(format!("{n}\n").as_bytes()), Some(n));
            prop_assert_eq!(parse_u64(format!("{before}{n}{after}").as_bytes()), Some(n));
        }

        #[test]
        fn knobs_never_panic_on_knob_like_text(text in r"[ \t]?(max|-1|(\+|-)?[0-9]{0,25})[ \t\n]?") {
            let _ = parse_knob(&text, false);
            let _ = parse_knob(&text, true);
        }

        /// `max`, v1's huge "no limit" and a protection of 0 are no limit; other counts are kept.
        #[test]
        fn knobs_parse_back(n in prop_oneof![any::<u64>(), 0..4096u64, (1u64 << 62) - 2..(1u64 << 62) + 2], is_protection in any::<bool>()) {
            prop_assert_eq!(parse_knob("max", is_protection), Some(None));
            let want = if n >= 1 << 62 || (is_protection && n == 0) { None } else { Some(n) };
            prop_assert_eq!(parse_knob(&n.to_string(), is_protection), Some(want));
        }

        #[test]
        fn meminfo_never_panics_on_meminfo_like_text(text in r"([A-Za-z_()]{0,10}:?[ \t]{0,9}(\+|-)?[0-9]{0,22}( kB)?[ \t]?\r?\n){0,6}", key in "[A-Za-z]{0,6}:?") {
            let _ = parse_meminfo_kb(&text, &key);
        }

        /// fs/proc/meminfo.c pads `Key:` to 16 columns and the value to 8 (`%8lu kB`); the
        /// first line with the key wins.
        #[test]
        fn meminfo_parses_back(fields in proptest::collection::btree_map(r"[A-Za-z][A-Za-z0-9_()]{0,14}", any::<u64>(), 1..30), pick in any::<proptest::sample::Index>()) {
            let text: String = fields.iter().map(|(key, kb)| format!("{:<16}{kb:>8} kB\n", format!("{key}:"))).collect();
            let (key, kb) = fields.iter().nth(pick.index(fields.len())).unwrap();
            prop_assert_eq!(parse_meminfo_kb(&text, &format!("{key}:")), Some(*kb));
            prop_assert_eq!(parse_meminfo_kb(&text, "NoSuchKey:"), None);
        }
    }

    #[test]
    fn meminfo_parses() {
        assert_eq!(parse_meminfo_kb("MemTotal:       24570000 kB\nSwapFree:        1024 kB\n", "SwapFree:"), Some(1024));
        assert_eq!(parse_meminfo_kb("MemTotal: 1 kB\n", "SwapFree:"), None);
    }
}
