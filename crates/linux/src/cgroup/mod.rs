//! Cgroup backends: the narrow interface between the Linux platform and cgroupfs.
//!
//! [`CgroupBackend`] has two implementations: [`V2Backend`] (one cgroup2 tree) and
//! [`HybridBackend`] (cgroup v1 memory controller for limits, cgroup2 tree for PSI, v1 cpu,
//! cpuacct and blkio trees for bandwidth and CPU time; a group is a directory with the same
//! relative path in each). Roots are constructor arguments, so
//! tests run on a fake tree of plain files in a temporary directory.
//!
//! Changes are planned before they are made: `plan_create` and `plan_knob` return
//! [`Change`]s that the caller performs directly, hands to the off-thread knob writer (the
//! `writer` module, above this one), journals first (the `journal` module) or only logs (dry
//! run).
//!
//! Knob support:
//!
//! | knob | v2 file | hybrid (v1) |
//! |------|---------|-------------|
//! | max  | `memory.max` | `memory.limit_in_bytes` |
//! | high | `memory.high` | unsupported: v1 has no throttling limit (`memory.soft_limit_in_bytes` only steers global reclaim, it does not throttle) |
//! | min, low | `memory.min`, `memory.low` | unsupported: v1 has no reclaim protection |
//! | reclaim | `memory.reclaim` | unsupported |
//! | CPU bandwidth | `cpu.max` | `cpu.cfs_quota_us`, `cpu.cfs_period_us` (v1 cpu hierarchy) |
//! | I/O bandwidth | `io.max` | `blkio.throttle.{read,write}_bps_device` (v1 blkio hierarchy) |
//!
//! Bandwidth limits take effect where the group has the controller's files: on v2 where its
//! parent enables `cpu` or `io` for it ([`CgroupBackend::plan_bandwidth_controllers`]), on the
//! hybrid layout where the group has a directory in the v1 `cpu` or `blkio` hierarchy (made
//! with the group's other directories when critmem creates it). Their syntax is in
//! [`bandwidth`].
//!
//! A backend says what it can do through [`CgroupBackend::capabilities`] ([`Capabilities`]):
//! which knobs take effect, proactive reclaim, and what a hard limit below unreclaimable usage
//! does ([`LimitBelowUsage`]); the platform asks that, never which backend it has.
//!
//! On the hybrid backend, reading an unsupported knob yields `None` (the group truly has no
//! such limit or protection), writing `None` to it is a no-op, and writing a value is
//! [`Error::Unsupported`]: the platform decides whether to map the request elsewhere.

use crate::error::{Error, Result};
use crate::psi::{read_pressure, stall_totals};
pub use bandwidth::BlockDevice;
use critmem_policy::{Action, GroupId, MemoryKnobs, StallTotals};
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub mod bandwidth;
mod hybrid;
mod v2;
pub use hybrid::HybridBackend;
pub use v2::V2Backend;

#[cfg(test)]
pub(crate) mod fake;
#[cfg(test)]
mod tests;

/// A cgroup's path relative to the hierarchy root, e.g. `critmem/rt`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct GroupPath(String);

impl GroupPath {
    /// Validates a relative path: non-empty components, no `.`/`..`, no leading `/` needed
    /// (one is tolerated), no NUL or newline.
    pub fn new(path: &str) -> Result<Self> {
        let bad = |reason| Err(Error::InvalidGroupPath { path: path.to_owned(), reason });
        let trimmed = path.strip_prefix('/').unwrap_or(path);
        if trimmed.is_empty() {
            return bad("the hierarchy root cannot be a managed group");
        }
        if trimmed.contains(['\0', '\n']) {
            return bad("contains NUL or newline");
        }
        for component in trimmed.split('/') {
            match component {
                "" => return bad("empty component"),
                "." | ".." => return bad("`.` and `..` are not allowed"),
                _ => {}
            }
        }
        Ok(GroupPath(trimmed.to_owned()))
    }

    /// The relative path, without a leading `/`.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// This group's directory under `root`.
    pub fn dir_in(&self, root: &Path) -> PathBuf {
        root.join(&self.0)
    }

    /// The group and its ancestors' relative paths, outermost first (`a`, `a/b`, `a/b/c`).
    pub fn prefixes(&self) -> impl Iterator<Item = &str> {
        self.0.match_indices('/').map(|(i, _)| &self.0[..i]).chain(std::iter::once(self.0.as_str()))
    }
}

impl fmt::Display for GroupPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "/{}", self.0)
    }
}

/// A memory knob, named after its cgroup v2 file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Knob {
    Max,
    High,
    Min,
    Low,
}

impl Knob {
    pub const ALL: [Knob; 4] = [Knob::Max, Knob::High, Knob::Min, Knob::Low];

    pub fn name(self) -> &'static str {
        match self {
            Knob::Max => "memory.max",
            Knob::High => "memory.high",
            Knob::Min => "memory.min",
            Knob::Low => "memory.low",
        }
    }

    /// Limits mean "none" as `max`; protections as `0`.
    fn is_protection(self) -> bool {
        matches!(self, Knob::Min | Knob::Low)
    }
}

/// The knob change an [`Action`] asks for: `(group, knob, bytes)`; `None` for actions that
/// are not memory knob changes (job drops, reclaims, CPU and I/O bandwidth).
pub fn knob_change(action: &Action) -> Option<(GroupId, Knob, Option<u64>)> {
    match *action {
        Action::SetMax { group, bytes } => Some((group, Knob::Max, bytes)),
        Action::SetHigh { group, bytes } => Some((group, Knob::High, bytes)),
        Action::SetMin { group, bytes } => Some((group, Knob::Min, bytes)),
        Action::SetLow { group, bytes } => Some((group, Knob::Low, bytes)),
        Action::DropJob { .. } | Action::Reclaim { .. } | Action::SetCpuMax { .. } | Action::SetIoMax { .. } => None,
    }
}

/// Which pressure file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PsiResource {
    Memory,
    Io,
    Cpu,
}

impl PsiResource {
    pub fn file_name(self) -> &'static str {
        match self {
            PsiResource::Memory => "memory.pressure",
            PsiResource::Io => "io.pressure",
            PsiResource::Cpu => "cpu.pressure",
        }
    }
}

/// One write of a whole value to a cgroup file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileWrite {
    pub path: PathBuf,
    pub contents: String,
    /// Whether the file holds a setting that can be read now and written back later; false for
    /// write-only or event files such as `memory.reclaim` and `cgroup.procs`.
    pub restorable: bool,
    /// cgroup v2 limits: reclaim down to the value first, in steps that a signal can stop.
    pub reclaim_first: Option<ReclaimFirst>,
}

/// A v2 limit lowered below usage makes the kernel reclaim the whole excess inside the limit
/// write, in passes that a pending signal does not stop (a pass over gigabytes of dirty page
/// cache can take seconds). Reclaiming through `memory.reclaim` first, [`RECLAIM_STEP_BYTES`]
/// at a time (one step is one kernel pass), lets a write be cancelled between steps, and sets
/// the limit only once usage is at it, as cgroup v1 does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReclaimFirst {
    /// The group's `memory.current`.
    pub current: PathBuf,
    /// The group's `memory.reclaim` (Linux 5.19 and later; without it the limit write reclaims).
    pub reclaim: PathBuf,
    pub target_bytes: u64,
}

/// One `memory.reclaim` write of [`ReclaimFirst`].
pub const RECLAIM_STEP_BYTES: u64 = 1 << 20;

impl ReclaimFirst {
    /// Reclaims until usage is at or below the target, reclaim gives up (nothing more comes
    /// back, or usage does not fall, twice), or `give_up()` holds after a signal (then the error is returned
    /// and the limit is not written).
    fn run(&self, give_up: &dyn Fn() -> bool) -> Result<()> {
        let (mut stalled, mut last_usage_bytes) = (0, u64::MAX);
        loop {
            // A step the signal did not interrupt (it arrived as the step ended) still stops
            // here, so a cancelled write never sets the limit afterwards.
            if give_up() {
                return Err(Error::WriteRejected {
                    path: self.reclaim.clone(),
                    value: String::new(),
                    source: std::io::Error::from_raw_os_error(nix::libc::EINTR),
                });
            }
            let Ok(text) = std::fs::read_to_string(&self.current) else { return Ok(()) };
            let Ok(usage_bytes) = text.trim().parse::<u64>() else { return Ok(()) };
            if usage_bytes <= self.target_bytes || stalled >= 2 {
                return Ok(());
            }
            // The group may grow as fast as it is reclaimed: no progress counts as a stall.
            if usage_bytes >= last_usage_bytes {
                stalled += 1;
            }
            last_usage_bytes = usage_bytes;
            let step = (usage_bytes - self.target_bytes).min(RECLAIM_STEP_BYTES);
            match write_value_unless(&self.reclaim, &step.to_string(), give_up) {
                Ok(()) => {}
                Err(Error::WriteRejected { source, .. }) if source.raw_os_error() == Some(nix::libc::EINTR) => {
                    return Err(Error::WriteRejected { path: self.reclaim.clone(), value: step.to_string(), source })
                }
                // EAGAIN: the kernel's own retries found less than the step; the rest is left
                // to the limit write (which throttles, fails or OOM-kills as the kernel decides).
                Err(Error::WriteRejected { source, .. }) if source.raw_os_error() == Some(nix::libc::EAGAIN) => stalled += 1,
                // No `memory.reclaim` (an older kernel, a fake tree): the limit write reclaims.
                Err(_) => return Ok(()),
            }
        }
    }
}

impl FileWrite {
    pub fn new(path: PathBuf, contents: impl Into<String>, restorable: bool) -> Self {
        FileWrite { path, contents: contents.into(), restorable, reclaim_first: None }
    }

    /// Performs the write on the calling thread (may block in reclaim: the control loop hands
    /// its writes to the `writer` module's off-thread writer instead).
    pub fn perform(&self) -> Result<()> {
        self.perform_unless(&|| false)
    }

    /// [`Self::perform`], given up if a signal interrupts it while `give_up()` holds.
    pub fn perform_unless(&self, give_up: &dyn Fn() -> bool) -> Result<()> {
        if let Some(first) = &self.reclaim_first {
            first.run(give_up)?;
        }
        write_value_unless(&self.path, &self.contents, give_up)
    }
}

/// A filesystem change the platform makes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Change {
    /// Create a cgroup directory. Processes still inside when it must be removed are moved to
    /// `evacuate_to` (the hierarchy root: the only group cgroup v2 always accepts them in).
    Mkdir {
        dir: PathBuf,
        evacuate_to: PathBuf,
    },
    Write(FileWrite),
}

impl Change {
    pub fn perform(&self) -> Result<()> {
        match self {
            Change::Mkdir { dir, .. } => std::fs::create_dir(dir).map_err(|e| Error::io("create cgroup", dir, e)),
            Change::Write(write) => write.perform(),
        }
    }
}

impl fmt::Display for Change {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Change::Mkdir { dir, .. } => write!(f, "mkdir {}", dir.display()),
            Change::Write(w) => write!(f, "write {:?} to {}", w.contents, w.path.display()),
        }
    }
}

/// Writes `value` to a cgroup file in a single write(2), as cgroupfs requires. Never creates
/// the file: a missing file is a missing group or an unsupported knob.
pub fn write_value(path: &Path, value: &str) -> Result<()> {
    write_value_unless(path, value, &|| false)
}

/// [`write_value`], except that a write interrupted by a signal (`EINTR`) is given up when
/// `give_up()` says so instead of being retried. The kernel checks for pending signals in its
/// reclaim loops when a limit is lowered (v1 `mem_cgroup_resize_max`, v2 `memory_max_write`
/// and `memory_high_write`), so this is how a write stuck in reclaim is cancelled.
pub fn write_value_unless(path: &Path, value: &str, give_up: &dyn Fn() -> bool) -> Result<()> {
    use nix::fcntl::{open, OFlag};
    use nix::sys::stat::Mode;
    let flags = OFlag::O_WRONLY | OFlag::O_TRUNC | OFlag::O_CLOEXEC | OFlag::O_NOCTTY;
    let fd = loop {
        match open(path, flags, Mode::empty()) {
            Ok(fd) => break fd,
            Err(nix::errno::Errno::EINTR) if !give_up() => continue,
            Err(errno) => return Err(Error::group_io("open", &dir_name(path), path, errno.into())),
        }
    };
    let rejected = |e: std::io::Error| match e.kind() {
        std::io::ErrorKind::PermissionDenied | std::io::ErrorKind::NotFound => Error::group_io("write", &dir_name(path), path, e),
        _ => Error::WriteRejected { path: path.to_owned(), value: value.to_owned(), source: e },
    };
    loop {
        match nix::unistd::write(&fd, value.as_bytes()) {
            Ok(n) if n == value.len() => return Ok(()),
            // cgroupfs takes a value whole; a second write would be a second value.
            Ok(n) => {
                return Err(rejected(std::io::Error::new(
                    std::io::ErrorKind::WriteZero,
                    format!("only {n} of {} bytes written", value.len()),
                )))
            }
            Err(nix::errno::Errno::EINTR) if !give_up() => continue,
            Err(errno) => return Err(rejected(errno.into())),
        }
    }
}

fn dir_name(path: &Path) -> String {
    path.parent().map_or_else(String::new, |p| p.display().to_string())
}

/// `memory.stat` of a group, with the fields the controllers use pulled out under
/// backend-neutral names. All values are hierarchical (include child groups).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MemoryStat {
    /// Anonymous memory (v2 `anon`, v1 `total_rss`).
    pub anon_bytes: u64,
    /// Page cache (v2 `file`, v1 `total_cache`).
    pub file_bytes: u64,
    /// Major faults (v2 `pgmajfault`, v1 `total_pgmajfault`); 0 if the kernel lacks the field.
    pub pgmajfault: u64,
    /// Refaults of evicted pages, anon + file; 0 if the kernel lacks the fields.
    pub workingset_refault: u64,
    /// Every field as the file has it.
    pub fields: BTreeMap<String, u64>,
}

/// Parses `memory.stat` (v1 and v2 share the format; one `key value` pair a line):
///
/// ```text
/// anon 1531904
/// file 634880
/// pgmajfault 0
/// ```
pub fn parse_memory_stat(text: &str, origin: &str) -> Result<BTreeMap<String, u64>> {
    let mut fields = BTreeMap::new();
    for line in text.lines() {
        if line.trim().is_empty() {
            continue;
        }
        let mut words = line.split_whitespace();
        let (Some(key), Some(value), None) = (words.next(), words.next(), words.next()) else {
            return Err(Error::parse("memory.stat", origin, format!("expected `key value`, got {line:?}")));
        };
        let value = value
            .parse::<u64>()
            .map_err(|_| Error::parse("memory.stat", origin, format!("{key}: {value:?} is not an unsigned integer")))?;
        fields.insert(key.to_owned(), value);
    }
    Ok(fields)
}

/// Parses a `cgroup.procs` file: one pid a line.
pub fn parse_pids(text: &str, origin: &str) -> Result<Vec<u32>> {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.trim().parse::<u32>().map_err(|_| Error::parse("cgroup.procs", origin, format!("{l:?} is not a pid"))))
        .collect()
}

/// A group's limit on memory and swap together (v1 `memory.memsw.*`). critmem never changes
/// it, and it bounds the memory limit: the kernel refuses a memory limit above it (EINVAL).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CombinedLimit {
    pub limit_bytes: u64,
    pub usage_bytes: u64,
}

/// What the kernel does with a hard limit written below the memory a group cannot give back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LimitBelowUsage {
    /// The write fails (v1: EBUSY) and the old limit stays.
    Refused,
    /// The write succeeds and the kernel OOM-kills in the group (v2 `memory.max`).
    OomKills,
}

/// What a backend can do, asked for explicitly rather than inferred from which knobs it has.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Capabilities {
    /// A throttling limit (v2 `memory.high`) that reclaims above it and never kills.
    pub throttle_limit: bool,
    /// Reclaim protection (v2 `memory.min`, `memory.low`).
    pub protection: bool,
    /// Reclaim on request (v2 `memory.reclaim`).
    pub proactive_reclaim: bool,
    /// What lowering a hard limit below unreclaimable usage does.
    pub limit_below_usage: LimitBelowUsage,
}

impl Capabilities {
    /// Whether writes of `knob` take effect (every backend has a hard limit).
    pub fn has(&self, knob: Knob) -> bool {
        match knob {
            Knob::Max => true,
            Knob::High => self.throttle_limit,
            Knob::Min | Knob::Low => self.protection,
        }
    }
}

/// The operations the platform needs from cgroupfs.
pub trait CgroupBackend: fmt::Debug + Send + Sync {
    /// "cgroup v2" or "hybrid (v1 memory + v2 PSI)".
    fn name(&self) -> &'static str;
    /// What this backend can do.
    fn capabilities(&self) -> Capabilities;
    /// The directories that make up `group` (the memory directory first).
    fn group_dirs(&self, group: &GroupPath) -> Vec<PathBuf>;
    /// The changes that create `group` and any missing ancestors (empty if it exists).
    fn plan_create(&self, group: &GroupPath) -> Result<Vec<Change>>;
    /// The write that sets `knob` to `bytes` (`None` = no limit/protection); `Ok(None)` when
    /// nothing needs writing (clearing a knob this backend does not have).
    fn plan_knob(&self, group: &GroupPath, knob: Knob, bytes: Option<u64>) -> Result<Option<FileWrite>>;
    /// The write that asks the kernel to reclaim `bytes` from `group` now (v2 `memory.reclaim`).
    fn plan_reclaim(&self, group: &GroupPath, bytes: u64) -> Result<FileWrite>;
    /// Reads one knob (`None` = no limit/protection).
    fn knob(&self, group: &GroupPath, knob: Knob) -> Result<Option<u64>>;
    /// Memory charged to the group now.
    fn usage_bytes(&self, group: &GroupPath) -> Result<u64>;
    fn memory_stat(&self, group: &GroupPath) -> Result<MemoryStat>;
    /// The pressure file of `group` for `resource`.
    fn pressure_file(&self, group: &GroupPath, resource: PsiResource) -> PathBuf;
    /// Moves a process (all its threads) into the group.
    fn move_pid(&self, group: &GroupPath, pid: u32) -> Result<()>;
    /// Processes in the group (memory hierarchy).
    fn pids(&self, group: &GroupPath) -> Result<Vec<u32>>;
    /// Removes an empty group (no processes, no children). A group already gone is fine.
    fn remove(&self, group: &GroupPath) -> Result<()>;

    /// The writes that limit the group's tasks together to `quota_us` of CPU time per
    /// [`critmem_policy::CPU_PERIOD_US`] (`None`: no limit), in the order to make them.
    fn plan_cpu_max(&self, group: &GroupPath, quota_us: Option<u64>) -> Result<Vec<FileWrite>>;
    /// The writes that limit the group's reads from and writes to `device` (`None`: no limit).
    fn plan_io_max(
        &self,
        group: &GroupPath,
        device: BlockDevice,
        read_bytes_per_s: Option<u64>,
        write_bytes_per_s: Option<u64>,
    ) -> Result<Vec<FileWrite>>;
    /// The CPU limit in force, in thousandths of one CPU (`None`: no limit).
    fn cpu_max_millicpus(&self, group: &GroupPath) -> Result<Option<u64>>;
    /// The read and write limits on `device` in force, in bytes/s (`None`: no limit).
    fn io_max(&self, group: &GroupPath, device: BlockDevice) -> Result<(Option<u64>, Option<u64>)>;
    /// The file counting the CPU time the group's tasks used.
    fn cpu_usage_file(&self, group: &GroupPath) -> CpuUsageFile;

    /// The changes that give a group critmem created the CPU and I/O controllers, where the
    /// machine offers them (v2: `+cpu`, `+io` in each ancestor's `cgroup.subtree_control`). A
    /// failure only leaves the group without those limits.
    fn plan_bandwidth_controllers(&self, _group: &GroupPath) -> Result<Vec<Change>> {
        Ok(Vec::new())
    }

    /// The write that keeps the kernel from OOM-killing the group's processes when its limit
    /// is hit (v1 `memory.oom_control` = 1: they wait instead, for the agent to raise the
    /// limit); `None` where the backend has no such switch (v2).
    fn plan_oom_guard(&self, _group: &GroupPath) -> Option<FileWrite> {
        None
    }

    /// The write that gives the group its OOM killer back (v1 `memory.oom_control` = 0), for a
    /// group out of memory at a limit critmem does not manage; `None` where there is no switch.
    fn plan_oom_release(&self, _group: &GroupPath) -> Option<FileWrite> {
        None
    }

    /// The group's [`CombinedLimit`], where the backend has one and it is set; `None` without
    /// swap accounting, when unlimited, and on v2 (whose `memory.swap.max` bounds swap alone).
    fn combined_limit(&self, _group: &GroupPath) -> Result<Option<CombinedLimit>> {
        Ok(None)
    }

    /// The file that tells whether the group hit its limit with nothing left to reclaim: v1
    /// `memory.oom_control` (`under_oom`), v2 `memory.events` (`oom` counter).
    fn oom_file(&self, group: &GroupPath) -> PathBuf;

    /// The file holding the group's swap usage in bytes (v2 `memory.swap.current`); `None`
    /// where the backend has none of its own (v1 counts swap with memory in `memsw`).
    fn swap_usage_file(&self, _group: &GroupPath) -> Option<PathBuf> {
        None
    }

    /// An eventfd the kernel signals when a task of the group starts waiting at its limit
    /// (v1: `cgroup.event_control` on `memory.oom_control`), so the platform need not read
    /// usage every tick to find such a task. Closing it unregisters. `Ok(None)` where the
    /// backend has no such notification (v2) or the group is not on cgroupfs (a fake tree,
    /// where nothing would ever signal it).
    fn oom_notifier(&self, _group: &GroupPath) -> Result<Option<nix::sys::eventfd::EventFd>> {
        Ok(None)
    }

    /// Whether every directory of the group exists.
    fn exists(&self, group: &GroupPath) -> bool {
        self.group_dirs(group).iter().all(|d| d.is_dir())
    }

    /// Creates the group now; returns whether anything was created.
    fn create(&self, group: &GroupPath) -> Result<bool> {
        let changes = self.plan_create(group)?;
        for change in &changes {
            change.perform()?;
        }
        Ok(changes.iter().any(|c| matches!(c, Change::Mkdir { .. })))
    }

    /// Sets a knob now, on the calling thread.
    fn set_knob(&self, group: &GroupPath, knob: Knob, bytes: Option<u64>) -> Result<()> {
        match self.plan_knob(group, knob, bytes)? {
            Some(write) => write.perform(),
            None => Ok(()),
        }
    }

    /// All four knobs.
    fn knobs(&self, group: &GroupPath) -> Result<MemoryKnobs> {
        Ok(MemoryKnobs {
            max_bytes: self.knob(group, Knob::Max)?,
            high_bytes: self.knob(group, Knob::High)?,
            min_bytes: self.knob(group, Knob::Min)?,
            low_bytes: self.knob(group, Knob::Low)?,
        })
    }

    /// Cumulative memory, io and CPU stall of the group (a kernel without `cpu.pressure`
    /// counts no CPU stall).
    fn stall_totals(&self, group: &GroupPath) -> Result<StallTotals> {
        let read = |resource| {
            let path = self.pressure_file(group, resource);
            read_pressure(&path).map_err(|e| match e {
                Error::PsiMissing { path } if path.parent().is_some_and(|d| !d.exists()) => {
                    Error::GroupVanished { group: group.to_string(), path }
                }
                other => other,
            })
        };
        let cpu = read(PsiResource::Cpu).ok();
        Ok(stall_totals(&read(PsiResource::Memory)?, &read(PsiResource::Io)?, cpu.as_ref()))
    }

    /// CPU time the group's tasks used, in µs.
    fn cpu_usage_us(&self, group: &GroupPath) -> Result<u64> {
        let file = self.cpu_usage_file(group);
        let text = read_trimmed(group, file.path())?;
        file.parse(&text).ok_or_else(|| Error::parse("CPU usage", file.path().display().to_string(), format!("{text:?} in group {group}")))
    }
}

/// Where a group's cumulative CPU time is kept, and in which unit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CpuUsageFile {
    /// v2 `cpu.stat`, whose `usage_usec` line counts µs.
    Stat(PathBuf),
    /// v1 `cpuacct.usage`, one number of ns.
    Nanoseconds(PathBuf),
}

impl CpuUsageFile {
    pub fn path(&self) -> &Path {
        match self {
            CpuUsageFile::Stat(path) | CpuUsageFile::Nanoseconds(path) => path,
        }
    }

    /// The CPU time in µs that the file's text says.
    pub fn parse(&self, text: &str) -> Option<u64> {
        self.parse_bytes(text.as_bytes())
    }

    /// [`Self::parse`] of raw bytes (the per-tick read path).
    pub fn parse_bytes(&self, bytes: &[u8]) -> Option<u64> {
        match self {
            CpuUsageFile::Stat(_) => {
                bytes.split(|&b| b == b'\n').find_map(|line| crate::psi::parse_u64(line.strip_prefix(b"usage_usec ")?.trim_ascii()))
            }
            CpuUsageFile::Nanoseconds(_) => crate::psi::parse_u64(bytes.trim_ascii()).map(|ns| ns / 1000),
        }
    }
}

/// Opens the backend for a detected layout, checking that the memory controller is usable.
pub fn open_backend(layout: &crate::layout::Layout) -> Result<Box<dyn CgroupBackend>> {
    use crate::layout::Layout;
    match layout {
        Layout::V2 { root } => {
            let controllers_file = root.join("cgroup.controllers");
            let controllers = std::fs::read_to_string(&controllers_file).map_err(|e| Error::io("read", &controllers_file, e))?;
            if !controllers.split_whitespace().any(|c| c == "memory") {
                return Err(Error::NoMemoryController { detail: format!("{} does not list memory", controllers_file.display()) });
            }
            Ok(Box::new(V2Backend::new(root.clone())))
        }
        Layout::Hybrid { memory_root, unified_root, bandwidth } => {
            let limit = memory_root.join("memory.limit_in_bytes");
            if !limit.exists() {
                return Err(Error::NoMemoryController { detail: format!("{} is missing", limit.display()) });
            }
            if !unified_root.join("cgroup.procs").exists() {
                return Err(Error::PsiMissing { path: unified_root.clone() });
            }
            let roots = bandwidth.clone();
            Ok(Box::new(HybridBackend::new(memory_root.clone(), unified_root.clone()).with_bandwidth_roots(
                roots.cpu,
                roots.cpuacct,
                roots.blkio,
            )))
        }
    }
}

fn read_trimmed(group: &GroupPath, path: &Path) -> Result<String> {
    std::fs::read_to_string(path).map(|s| s.trim().to_owned()).map_err(|e| Error::group_io("read", &group.to_string(), path, e))
}

fn parse_bytes(group: &GroupPath, path: &Path, text: &str) -> Result<u64> {
    text.parse::<u64>().map_err(|_| Error::parse("byte count", path.display().to_string(), format!("{text:?} in group {group}")))
}

/// Missing directories of `group` under `root`, outermost first.
fn missing_dirs(group: &GroupPath, root: &Path) -> Vec<PathBuf> {
    group.prefixes().map(|p| root.join(p)).filter(|d| !d.is_dir()).collect()
}

fn move_pid_into(group: &GroupPath, dir: &Path, pid: u32) -> Result<()> {
    let procs = dir.join("cgroup.procs");
    write_value(&procs, &pid.to_string()).map_err(|e| match e {
        Error::WriteRejected { source, .. } if source.raw_os_error() == Some(nix::libc::ESRCH) => {
            Error::Io { op: "move pid (it has exited) into", path: procs.clone(), source }
        }
        Error::Io { path, source, .. } if source.kind() == std::io::ErrorKind::NotFound => {
            Error::GroupVanished { group: group.to_string(), path }
        }
        other => other,
    })
}

fn read_pids(group: &GroupPath, dir: &Path) -> Result<Vec<u32>> {
    let path = dir.join("cgroup.procs");
    let text = std::fs::read_to_string(&path).map_err(|e| Error::group_io("read", &group.to_string(), &path, e))?;
    parse_pids(&text, &path.display().to_string())
}

/// Removes the group's directories, innermost-tree order as given. Retries briefly on EBUSY:
/// a process that has just exited keeps its group busy until it is reaped.
fn remove_dirs(group: &GroupPath, dirs: &[PathBuf]) -> Result<()> {
    for dir in dirs {
        if !dir.is_dir() {
            continue;
        }
        if std::fs::read_dir(dir).map_err(|e| Error::io("list", dir, e))?.flatten().any(|e| e.file_type().is_ok_and(|t| t.is_dir())) {
            return Err(Error::GroupHasChildren { group: group.to_string() });
        }
        let pids = read_pids(group, dir)?;
        if !pids.is_empty() {
            return Err(Error::GroupBusy { group: group.to_string(), pids: pids.len() });
        }
        remove_cgroup_dir(dir)?;
    }
    Ok(())
}

/// rmdir of a cgroup directory. On cgroupfs the control files vanish with the directory; on a
/// fake tree (plain files) they are deleted first.
pub(crate) fn remove_cgroup_dir(dir: &Path) -> Result<()> {
    let mut attempts = 0;
    loop {
        match std::fs::remove_dir(dir) {
            Ok(()) => return Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) if e.raw_os_error() == Some(nix::libc::EBUSY) && attempts < 100 => {
                attempts += 1;
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(e) if e.raw_os_error() == Some(nix::libc::ENOTEMPTY) && is_plain_fs(dir) => {
                use std::os::unix::fs::FileTypeExt;
                for entry in std::fs::read_dir(dir).map_err(|e| Error::io("list", dir, e))?.flatten() {
                    if entry.file_type().is_ok_and(|t| t.is_file() || t.is_fifo()) {
                        std::fs::remove_file(entry.path()).map_err(|e| Error::io("remove", &entry.path(), e))?;
                    }
                }
                std::fs::remove_dir(dir).map_err(|e| Error::io("remove cgroup", dir, e))?;
                return Ok(());
            }
            Err(e) => return Err(Error::io("remove cgroup", dir, e)),
        }
    }
}

/// Whether `dir` is on an ordinary filesystem rather than cgroupfs (a fake tree in tests).
fn is_plain_fs(dir: &Path) -> bool {
    // cgroup (v1) and cgroup2 superblock magics, from linux/magic.h.
    const CGROUP_SUPER_MAGIC: i64 = 0x0027_e0eb;
    const CGROUP2_SUPER_MAGIC: i64 = 0x6367_7270;
    match nix::sys::statfs::statfs(dir) {
        Ok(fs) => {
            // The magic's integer type differs between architectures.
            #[allow(clippy::unnecessary_cast)]
            let magic = fs.filesystem_type().0 as i64;
            magic != CGROUP_SUPER_MAGIC && magic != CGROUP2_SUPER_MAGIC
        }
        Err(_) => false,
    }
}
/// What a group's OOM file says: v1 `memory.oom_control` or v2 `memory.events`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OomState {
    /// v1: tasks are waiting for memory right now (only with the OOM killer disabled).
    pub under_oom: bool,
    /// v1 `oom_kill_disable`.
    pub kill_disabled: bool,
    /// Times the limit was hit with reclaim failing (v2 `oom`; v1 has no such counter and
    /// reports 0).
    pub oom_events: u64,
    /// Processes the kernel OOM-killed in the group (v1 and v2 `oom_kill`).
    pub oom_kills: u64,
}

/// Parses v1 `memory.oom_control` or v2 `memory.events` (both `key value` lines):
///
/// ```text
/// oom_kill_disable 1      # v1
/// under_oom 0
/// oom_kill 0
/// low 0                   # v2
/// high 12
/// max 3
/// oom 0
/// oom_kill 0
/// oom_group_kill 0
/// ```
///
/// `None` when a value is not a number, or when no line is one of these keys (an empty read:
/// every kernel's file has some).
pub fn parse_oom_state(text: &str) -> Option<OomState> {
    let mut state = OomState::default();
    let mut known = false;
    for line in text.lines() {
        let mut words = line.split_whitespace();
        let (Some(key), Some(value)) = (words.next(), words.next()) else { continue };
        let value: u64 = value.parse().ok()?;
        match key {
            "under_oom" => state.under_oom = value != 0,
            "oom_kill_disable" => state.kill_disabled = value != 0,
            "oom" => state.oom_events = value,
            "oom_kill" => state.oom_kills = value,
            _ => continue,
        }
        known = true;
    }
    known.then_some(state)
}

/// `workingset_refault_anon + workingset_refault_file`, or the older single field.
fn refaults(fields: &BTreeMap<String, u64>, prefix: &str) -> u64 {
    let get = |key: &str| fields.get(&format!("{prefix}{key}")).copied();
    match (get("workingset_refault_anon"), get("workingset_refault_file")) {
        (None, None) => get("workingset_refault").unwrap_or(0),
        (anon, file) => anon.unwrap_or(0).saturating_add(file.unwrap_or(0)),
    }
}
