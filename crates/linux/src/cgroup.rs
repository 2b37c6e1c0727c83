//! Cgroup backends: the narrow interface between the Linux platform and cgroupfs.
//!
//! [`CgroupBackend`] has two implementations: [`V2Backend`] (one cgroup2 tree) and
//! [`HybridBackend`] (cgroup v1 memory controller for limits, cgroup2 tree for PSI; a group is
//! a pair of directories with the same relative path). Roots are constructor arguments, so
//! tests run on a fake tree of plain files in a temporary directory.
//!
//! Changes are planned before they are made: `plan_create` and `plan_knob` return
//! [`Change`]s that the caller performs directly, hands to the off-thread
//! [`crate::writer::KnobWriter`], journals first ([`crate::journal::Journal`]) or only logs
//! (dry run).
//!
//! Knob support:
//!
//! | knob | v2 file | hybrid (v1) |
//! |------|---------|-------------|
//! | max  | `memory.max` | `memory.limit_in_bytes` |
//! | high | `memory.high` | unsupported: v1 has no throttling limit (`memory.soft_limit_in_bytes` only steers global reclaim, it does not throttle) |
//! | min, low | `memory.min`, `memory.low` | unsupported: v1 has no reclaim protection |
//! | reclaim | `memory.reclaim` | unsupported |
//!
//! On the hybrid backend, reading an unsupported knob yields `None` (the group truly has no
//! such limit or protection), writing `None` to it is a no-op, and writing a value is
//! [`Error::Unsupported`]: the platform decides whether to map the request elsewhere.

use crate::error::{Error, Result};
use crate::psi::{read_pressure, stall_totals};
use critmem_policy::{Action, GroupId, MemoryKnobs, StallTotals};
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

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
/// are not knob changes (job drops).
pub fn knob_change(action: &Action) -> Option<(GroupId, Knob, Option<u64>)> {
    match *action {
        Action::SetMax { group, bytes } => Some((group, Knob::Max, bytes)),
        Action::SetHigh { group, bytes } => Some((group, Knob::High, bytes)),
        Action::SetMin { group, bytes } => Some((group, Knob::Min, bytes)),
        Action::SetLow { group, bytes } => Some((group, Knob::Low, bytes)),
        Action::DropJob { .. } => None,
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
}

impl FileWrite {
    pub fn new(path: PathBuf, contents: impl Into<String>, restorable: bool) -> Self {
        FileWrite { path, contents: contents.into(), restorable }
    }

    /// Performs the write on the calling thread (may block in reclaim: see
    /// [`crate::writer::KnobWriter`] for the control loop).
    pub fn perform(&self) -> Result<()> {
        write_value(&self.path, &self.contents)
    }

    /// [`Self::perform`], given up if a signal interrupts it while `give_up()` holds.
    pub fn perform_unless(&self, give_up: &dyn Fn() -> bool) -> Result<()> {
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

/// The operations the platform needs from cgroupfs.
pub trait CgroupBackend: fmt::Debug + Send + Sync {
    /// "cgroup v2" or "hybrid (v1 memory + v2 PSI)".
    fn name(&self) -> &'static str;
    /// Whether writes of `knob` can take effect on this backend.
    fn supports(&self, knob: Knob) -> bool;
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

    /// Cumulative memory and io stall of the group.
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
        Ok(stall_totals(&read(PsiResource::Memory)?, &read(PsiResource::Io)?))
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
        Layout::Hybrid { memory_root, unified_root } => {
            let limit = memory_root.join("memory.limit_in_bytes");
            if !limit.exists() {
                return Err(Error::NoMemoryController { detail: format!("{} is missing", limit.display()) });
            }
            if !unified_root.join("cgroup.procs").exists() {
                return Err(Error::PsiMissing { path: unified_root.clone() });
            }
            Ok(Box::new(HybridBackend::new(memory_root.clone(), unified_root.clone())))
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
        Error::Io { op: "open", path, source } if source.kind() == std::io::ErrorKind::NotFound => {
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

/// Pure cgroup v2: limits, protections and PSI in one directory.
#[derive(Clone, Debug)]
pub struct V2Backend {
    root: PathBuf,
}

impl V2Backend {
    /// `root` is the cgroup2 mount point (or a fake tree); nothing is checked here, see
    /// [`open_backend`].
    pub fn new(root: PathBuf) -> Self {
        V2Backend { root }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    fn file(&self, group: &GroupPath, name: &str) -> PathBuf {
        group.dir_in(&self.root).join(name)
    }
}

impl CgroupBackend for V2Backend {
    fn name(&self) -> &'static str {
        "cgroup v2"
    }

    fn supports(&self, _knob: Knob) -> bool {
        true
    }

    fn group_dirs(&self, group: &GroupPath) -> Vec<PathBuf> {
        vec![group.dir_in(&self.root)]
    }

    /// Creates missing directories and enables the memory controller in every ancestor's
    /// `cgroup.subtree_control` (root included) so the group gets `memory.*` files.
    fn plan_create(&self, group: &GroupPath) -> Result<Vec<Change>> {
        let mut changes = Vec::new();
        let mut parent = self.root.clone();
        for prefix in group.prefixes() {
            let subtree_control = parent.join("cgroup.subtree_control");
            let parent_is_new = changes.iter().any(|c| matches!(c, Change::Mkdir { dir, .. } if *dir == parent));
            let enabled = !parent_is_new
                && std::fs::read_to_string(&subtree_control)
                    .map_err(|e| Error::io("read", &subtree_control, e))?
                    .split_whitespace()
                    .any(|c| c == "memory");
            if !enabled {
                changes.push(Change::Write(FileWrite::new(subtree_control, "+memory", true)));
            }
            let dir = self.root.join(prefix);
            if !dir.is_dir() {
                changes.push(Change::Mkdir { dir: dir.clone(), evacuate_to: self.root.clone() });
            }
            parent = dir;
        }
        Ok(changes)
    }

    fn plan_knob(&self, group: &GroupPath, knob: Knob, bytes: Option<u64>) -> Result<Option<FileWrite>> {
        let value = match (bytes, knob.is_protection()) {
            (Some(b), _) => b.to_string(),
            (None, false) => "max".to_owned(),
            (None, true) => "0".to_owned(),
        };
        Ok(Some(FileWrite::new(self.file(group, knob.name()), value, true)))
    }

    fn plan_reclaim(&self, group: &GroupPath, bytes: u64) -> Result<FileWrite> {
        Ok(FileWrite::new(self.file(group, "memory.reclaim"), bytes.to_string(), false))
    }

    /// Files hold `max` (no limit) or a byte count; a protection of 0 is no protection.
    fn knob(&self, group: &GroupPath, knob: Knob) -> Result<Option<u64>> {
        let path = self.file(group, knob.name());
        let text = read_trimmed(group, &path)?;
        if text == "max" {
            return Ok(None);
        }
        let bytes = parse_bytes(group, &path, &text)?;
        Ok(if knob.is_protection() && bytes == 0 { None } else { Some(bytes) })
    }

    fn usage_bytes(&self, group: &GroupPath) -> Result<u64> {
        let path = self.file(group, "memory.current");
        parse_bytes(group, &path, &read_trimmed(group, &path)?)
    }

    fn memory_stat(&self, group: &GroupPath) -> Result<MemoryStat> {
        let path = self.file(group, "memory.stat");
        let origin = path.display().to_string();
        let fields = parse_memory_stat(&read_trimmed(group, &path)?, &origin)?;
        let required =
            |key: &str| fields.get(key).copied().ok_or_else(|| Error::parse("memory.stat", origin.clone(), format!("no `{key}` field")));
        Ok(MemoryStat {
            anon_bytes: required("anon")?,
            file_bytes: required("file")?,
            pgmajfault: fields.get("pgmajfault").copied().unwrap_or(0),
            workingset_refault: refaults(&fields, ""),
            fields,
        })
    }

    fn pressure_file(&self, group: &GroupPath, resource: PsiResource) -> PathBuf {
        self.file(group, resource.file_name())
    }

    fn move_pid(&self, group: &GroupPath, pid: u32) -> Result<()> {
        move_pid_into(group, &group.dir_in(&self.root), pid)
    }

    fn pids(&self, group: &GroupPath) -> Result<Vec<u32>> {
        read_pids(group, &group.dir_in(&self.root))
    }

    fn remove(&self, group: &GroupPath) -> Result<()> {
        remove_dirs(group, &self.group_dirs(group))
    }

    fn oom_file(&self, group: &GroupPath) -> PathBuf {
        self.file(group, "memory.events")
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
pub fn parse_oom_state(text: &str) -> Option<OomState> {
    let mut state = OomState::default();
    for line in text.lines() {
        let mut words = line.split_whitespace();
        let (Some(key), Some(value)) = (words.next(), words.next()) else { continue };
        let value: u64 = value.parse().ok()?;
        match key {
            "under_oom" => state.under_oom = value != 0,
            "oom_kill_disable" => state.kill_disabled = value != 0,
            "oom" => state.oom_events = value,
            "oom_kill" => state.oom_kills = value,
            _ => {}
        }
    }
    Some(state)
}

/// `workingset_refault_anon + workingset_refault_file`, or the older single field.
fn refaults(fields: &BTreeMap<String, u64>, prefix: &str) -> u64 {
    let get = |key: &str| fields.get(&format!("{prefix}{key}")).copied();
    match (get("workingset_refault_anon"), get("workingset_refault_file")) {
        (None, None) => get("workingset_refault").unwrap_or(0),
        (anon, file) => anon.unwrap_or(0).saturating_add(file.unwrap_or(0)),
    }
}

/// v1 reports "no limit" as the largest page-aligned value that fits a signed long
/// (9223372036854771712 with 4 KiB pages); anything this large is no limit.
const V1_UNLIMITED_FROM_BYTES: u64 = 1 << 62;

/// The hybrid layout: v1 memory controller for limits and usage, cgroup2 for PSI. A group is
/// a directory in each tree with the same relative path; processes are moved into both.
#[derive(Clone, Debug)]
pub struct HybridBackend {
    memory_root: PathBuf,
    unified_root: PathBuf,
    /// Registers OOM notifiers on an ordinary filesystem too (tests signal them by hand).
    notify_on_plain_fs: bool,
}

impl HybridBackend {
    pub fn new(memory_root: PathBuf, unified_root: PathBuf) -> Self {
        HybridBackend { memory_root, unified_root, notify_on_plain_fs: false }
    }

    /// For fake trees: [`CgroupBackend::oom_notifier`] registers there too, so a test can
    /// signal the eventfd in the kernel's place.
    #[cfg(test)]
    pub(crate) fn notifying_on_plain_fs(mut self) -> Self {
        self.notify_on_plain_fs = true;
        self
    }

    pub fn memory_root(&self) -> &Path {
        &self.memory_root
    }

    pub fn unified_root(&self) -> &Path {
        &self.unified_root
    }

    fn memory_file(&self, group: &GroupPath, name: &str) -> PathBuf {
        group.dir_in(&self.memory_root).join(name)
    }

    fn unsupported(knob: Knob) -> Error {
        let hint = match knob {
            Knob::High => {
                "cgroup v1 has no throttling limit (memory.soft_limit_in_bytes only steers global reclaim); use max, or run on cgroup v2"
            }
            Knob::Min | Knob::Low => "cgroup v1 has no reclaim protection; keep protected groups' limits high instead, or run on cgroup v2",
            Knob::Max => "unreachable",
        };
        Error::Unsupported { knob: knob.name(), backend: "hybrid (v1 memory + v2 PSI)", hint }
    }
}

impl CgroupBackend for HybridBackend {
    fn name(&self) -> &'static str {
        "hybrid (v1 memory + v2 PSI)"
    }

    fn supports(&self, knob: Knob) -> bool {
        knob == Knob::Max
    }

    fn group_dirs(&self, group: &GroupPath) -> Vec<PathBuf> {
        vec![group.dir_in(&self.memory_root), group.dir_in(&self.unified_root)]
    }

    /// Missing directories in both trees; v1 needs no controller enabling, and cgroup2
    /// accounts PSI for every group without any controller.
    fn plan_create(&self, group: &GroupPath) -> Result<Vec<Change>> {
        let mut changes = Vec::new();
        for root in [&self.memory_root, &self.unified_root] {
            for dir in missing_dirs(group, root) {
                changes.push(Change::Mkdir { dir, evacuate_to: root.clone() });
            }
        }
        Ok(changes)
    }

    fn plan_knob(&self, group: &GroupPath, knob: Knob, bytes: Option<u64>) -> Result<Option<FileWrite>> {
        match (knob, bytes) {
            (Knob::Max, Some(b)) => Ok(Some(FileWrite::new(self.memory_file(group, "memory.limit_in_bytes"), b.to_string(), true))),
            (Knob::Max, None) => Ok(Some(FileWrite::new(self.memory_file(group, "memory.limit_in_bytes"), "-1", true))),
            // Clearing a knob v1 does not have leaves the group exactly as asked.
            (_, None) => Ok(None),
            (_, Some(_)) => Err(Self::unsupported(knob)),
        }
    }

    fn plan_reclaim(&self, _group: &GroupPath, _bytes: u64) -> Result<FileWrite> {
        Err(Error::Unsupported {
            knob: "memory.reclaim",
            backend: "hybrid (v1 memory + v2 PSI)",
            hint: "cgroup v1 has no proactive reclaim file; lower memory.limit_in_bytes temporarily instead",
        })
    }

    fn knob(&self, group: &GroupPath, knob: Knob) -> Result<Option<u64>> {
        if knob != Knob::Max {
            return Ok(None);
        }
        let path = self.memory_file(group, "memory.limit_in_bytes");
        let bytes = parse_bytes(group, &path, &read_trimmed(group, &path)?)?;
        Ok((bytes < V1_UNLIMITED_FROM_BYTES).then_some(bytes))
    }

    fn usage_bytes(&self, group: &GroupPath) -> Result<u64> {
        let path = self.memory_file(group, "memory.usage_in_bytes");
        parse_bytes(group, &path, &read_trimmed(group, &path)?)
    }

    /// Uses the hierarchical `total_*` fields so a group with children counts them, as v2 does.
    fn memory_stat(&self, group: &GroupPath) -> Result<MemoryStat> {
        let path = self.memory_file(group, "memory.stat");
        let origin = path.display().to_string();
        let fields = parse_memory_stat(&read_trimmed(group, &path)?, &origin)?;
        let required =
            |key: &str| fields.get(key).copied().ok_or_else(|| Error::parse("memory.stat", origin.clone(), format!("no `{key}` field")));
        Ok(MemoryStat {
            anon_bytes: required("total_rss")?,
            file_bytes: required("total_cache")?,
            pgmajfault: fields.get("total_pgmajfault").copied().unwrap_or(0),
            workingset_refault: refaults(&fields, "total_"),
            fields,
        })
    }

    fn pressure_file(&self, group: &GroupPath, resource: PsiResource) -> PathBuf {
        group.dir_in(&self.unified_root).join(resource.file_name())
    }

    /// Into the unified group first (PSI), then the memory group (limits): a failure of the
    /// second leaves the process unlimited rather than limited without being observed.
    fn move_pid(&self, group: &GroupPath, pid: u32) -> Result<()> {
        move_pid_into(group, &group.dir_in(&self.unified_root), pid)?;
        move_pid_into(group, &group.dir_in(&self.memory_root), pid)
    }

    fn pids(&self, group: &GroupPath) -> Result<Vec<u32>> {
        read_pids(group, &group.dir_in(&self.memory_root))
    }

    fn remove(&self, group: &GroupPath) -> Result<()> {
        remove_dirs(group, &self.group_dirs(group))
    }

    fn plan_oom_guard(&self, group: &GroupPath) -> Option<FileWrite> {
        Some(FileWrite::new(self.memory_file(group, "memory.oom_control"), "1", true))
    }

    fn plan_oom_release(&self, group: &GroupPath) -> Option<FileWrite> {
        Some(FileWrite::new(self.memory_file(group, "memory.oom_control"), "0", true))
    }

    /// Writes `<eventfd> <fd of memory.oom_control>` to `cgroup.event_control`; the kernel
    /// signals the eventfd when a task starts waiting in `under_oom` (and at once if one
    /// already is). The `memory.oom_control` descriptor is only needed for the write.
    fn oom_notifier(&self, group: &GroupPath) -> Result<Option<nix::sys::eventfd::EventFd>> {
        use nix::sys::eventfd::{EfdFlags, EventFd};
        use std::os::fd::AsRawFd;
        let dir = group.dir_in(&self.memory_root);
        if is_plain_fs(&dir) && !self.notify_on_plain_fs {
            return Ok(None);
        }
        let control = dir.join("cgroup.event_control");
        let eventfd = EventFd::from_flags(EfdFlags::EFD_CLOEXEC | EfdFlags::EFD_NONBLOCK)
            .map_err(|e| Error::io("create eventfd for", &control, e.into()))?;
        let oom_path = dir.join("memory.oom_control");
        let oom = std::fs::File::open(&oom_path).map_err(|e| Error::group_io("open", &group.to_string(), &oom_path, e))?;
        write_value(&control, &format!("{} {}", eventfd.as_raw_fd(), oom.as_raw_fd()))?;
        Ok(Some(eventfd))
    }

    /// `memory.memsw.limit_in_bytes` and `memory.memsw.usage_in_bytes`, present when the kernel
    /// accounts swap (`swapaccount`); unlimited reads as the same huge value as the memory limit.
    fn combined_limit(&self, group: &GroupPath) -> Result<Option<CombinedLimit>> {
        let path = self.memory_file(group, "memory.memsw.limit_in_bytes");
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && path.parent().is_some_and(Path::is_dir) => return Ok(None),
            Err(e) => return Err(Error::group_io("read", &group.to_string(), &path, e)),
        };
        let limit_bytes = parse_bytes(group, &path, text.trim())?;
        if limit_bytes >= V1_UNLIMITED_FROM_BYTES {
            return Ok(None);
        }
        let usage = self.memory_file(group, "memory.memsw.usage_in_bytes");
        Ok(Some(CombinedLimit { limit_bytes, usage_bytes: parse_bytes(group, &usage, &read_trimmed(group, &usage)?)? }))
    }

    fn oom_file(&self, group: &GroupPath) -> PathBuf {
        self.memory_file(group, "memory.oom_control")
    }
}

#[cfg(test)]
pub(crate) mod fake {
    //! Fake cgroup trees: directories of plain files that look like cgroupfs.
    use super::*;
    use std::fs;

    pub const V2_FILES: &[(&str, &str)] = &[
        ("cgroup.procs", ""),
        ("cgroup.subtree_control", ""),
        ("memory.current", "4096\n"),
        ("memory.max", "max\n"),
        ("memory.high", "max\n"),
        ("memory.min", "0\n"),
        ("memory.low", "0\n"),
        ("memory.reclaim", ""),
        ("memory.stat", "anon 1000\nfile 2000\npgmajfault 3\nworkingset_refault_anon 4\nworkingset_refault_file 5\n"),
        ("memory.events", "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\noom_group_kill 0\n"),
        ("memory.pressure", "some avg10=0.00 avg60=0.00 avg300=0.00 total=100\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=40\n"),
        ("io.pressure", "some avg10=0.00 avg60=0.00 avg300=0.00 total=7\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=3\n"),
    ];

    pub const V1_MEMORY_FILES: &[(&str, &str)] = &[
        ("cgroup.procs", ""),
        ("memory.usage_in_bytes", "8192\n"),
        ("memory.limit_in_bytes", "9223372036854771712\n"),
        ("memory.soft_limit_in_bytes", "9223372036854771712\n"),
        ("memory.stat", "cache 1\nrss 2\ntotal_cache 3000\ntotal_rss 4000\ntotal_pgmajfault 9\ntotal_workingset_refault_file 6\n"),
        ("memory.oom_control", "oom_kill_disable 0\nunder_oom 0\noom_kill 0\n"),
    ];

    pub const UNIFIED_FILES: &[(&str, &str)] = &[
        ("cgroup.procs", ""),
        ("memory.pressure", "some avg10=0.00 avg60=0.00 avg300=0.00 total=11\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=2\n"),
        ("io.pressure", "some avg10=0.00 avg60=0.00 avg300=0.00 total=13\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=5\n"),
        ("cpu.pressure", "some avg10=0.00 avg60=0.00 avg300=0.00 total=17\n"),
    ];

    /// Writes the files a new cgroup directory would have (what the kernel does on mkdir).
    pub fn populate(dir: &Path, files: &[(&str, &str)]) {
        fs::create_dir_all(dir).unwrap();
        for (name, contents) in files {
            fs::write(dir.join(name), contents).unwrap();
        }
    }

    /// A v2 tree whose root has the memory controller available.
    pub fn v2_root(root: &Path) {
        populate(
            root,
            &[("cgroup.procs", "1\n"), ("cgroup.controllers", "cpu io memory pids\n"), ("cgroup.subtree_control", "cpu memory\n")],
        );
    }

    pub fn hybrid_roots(base: &Path) -> (PathBuf, PathBuf) {
        let (memory, unified) = (base.join("memory"), base.join("unified"));
        populate(&memory, &[("cgroup.procs", "1\n"), ("memory.limit_in_bytes", "9223372036854771712\n")]);
        populate(&unified, &[("cgroup.procs", "1\n"), ("cgroup.controllers", "")]);
        (memory, unified)
    }

    /// Performs planned changes and fills each new directory like the kernel would.
    pub fn create(backend: &dyn CgroupBackend, group: &GroupPath, files_for: impl Fn(&Path) -> &'static [(&'static str, &'static str)]) {
        for change in backend.plan_create(group).unwrap() {
            change.perform().unwrap();
            if let Change::Mkdir { dir, .. } = change {
                populate(&dir, files_for(&dir));
            }
        }
    }

    pub fn read(path: &Path) -> String {
        fs::read_to_string(path).unwrap()
    }
}

#[cfg(test)]
mod tests {
    use super::fake::*;
    use super::*;
    use proptest::prelude::*;

    fn group(path: &str) -> GroupPath {
        GroupPath::new(path).unwrap()
    }

    fn v2() -> (tempfile::TempDir, V2Backend) {
        let dir = tempfile::tempdir().unwrap();
        v2_root(dir.path());
        let backend = V2Backend::new(dir.path().to_owned());
        (dir, backend)
    }

    fn hybrid() -> (tempfile::TempDir, HybridBackend) {
        let dir = tempfile::tempdir().unwrap();
        let (memory, unified) = hybrid_roots(dir.path());
        (dir, HybridBackend::new(memory, unified))
    }

    fn hybrid_files(dir: &Path) -> &'static [(&'static str, &'static str)] {
        if dir.components().any(|c| c.as_os_str() == "memory") {
            V1_MEMORY_FILES
        } else {
            UNIFIED_FILES
        }
    }

    #[test]
    fn group_paths_are_validated() {
        assert_eq!(group("/critmem/rt").as_str(), "critmem/rt");
        assert_eq!(group("critmem/rt").to_string(), "/critmem/rt");
        for bad in ["", "/", "a//b", "a/../b", "./a", "a/", "a\nb"] {
            assert!(GroupPath::new(bad).is_err(), "accepted {bad:?}");
        }
        assert_eq!(group("a/b/c").prefixes().collect::<Vec<_>>(), ["a", "a/b", "a/b/c"]);
    }

    #[test]
    fn v2_create_makes_missing_ancestors_and_enables_memory_below_them() {
        let (dir, backend) = v2();
        let g = group("critmem/rt");
        let plan = backend.plan_create(&g).unwrap();
        let root = dir.path();
        assert_eq!(
            plan,
            vec![
                Change::Mkdir { dir: root.join("critmem"), evacuate_to: root.to_owned() },
                Change::Write(FileWrite::new(root.join("critmem/cgroup.subtree_control"), "+memory", true)),
                Change::Mkdir { dir: root.join("critmem/rt"), evacuate_to: root.to_owned() },
            ]
        );
        create(&backend, &g, |_| V2_FILES);
        assert!(backend.exists(&g));
        assert_eq!(read(&root.join("critmem/cgroup.subtree_control")), "+memory");
        // The kernel shows the enabled list, not the write.
        std::fs::write(root.join("critmem/cgroup.subtree_control"), "memory\n").unwrap();
        assert!(backend.plan_create(&g).unwrap().is_empty(), "nothing to do once it exists");
    }

    #[test]
    fn v2_create_enables_memory_at_the_root_when_missing() {
        let (dir, backend) = v2();
        std::fs::write(dir.path().join("cgroup.subtree_control"), "cpu\n").unwrap();
        let plan = backend.plan_create(&group("g")).unwrap();
        assert_eq!(plan[0], Change::Write(FileWrite::new(dir.path().join("cgroup.subtree_control"), "+memory", true)));
    }

    #[test]
    fn v2_knobs_read_and_write_in_kernel_syntax() {
        let (dir, backend) = v2();
        let g = group("g");
        create(&backend, &g, |_| V2_FILES);
        assert_eq!(backend.knobs(&g).unwrap(), MemoryKnobs::default());
        backend.set_knob(&g, Knob::Max, Some(1 << 20)).unwrap();
        backend.set_knob(&g, Knob::High, Some(1 << 19)).unwrap();
        backend.set_knob(&g, Knob::Min, Some(4096)).unwrap();
        backend.set_knob(&g, Knob::Low, Some(8192)).unwrap();
        assert_eq!(
            backend.knobs(&g).unwrap(),
            MemoryKnobs { max_bytes: Some(1 << 20), high_bytes: Some(1 << 19), min_bytes: Some(4096), low_bytes: Some(8192) }
        );
        backend.set_knob(&g, Knob::Max, None).unwrap();
        backend.set_knob(&g, Knob::Low, None).unwrap();
        assert_eq!(read(&dir.path().join("g/memory.max")), "max");
        assert_eq!(read(&dir.path().join("g/memory.low")), "0");
        assert_eq!(backend.knob(&g, Knob::Max).unwrap(), None);
        assert_eq!(backend.plan_reclaim(&g, 4096).unwrap(), FileWrite::new(dir.path().join("g/memory.reclaim"), "4096", false));
    }

    #[test]
    fn v2_usage_stat_and_psi_come_from_the_group() {
        let (_dir, backend) = v2();
        let g = group("g");
        create(&backend, &g, |_| V2_FILES);
        assert_eq!(backend.usage_bytes(&g).unwrap(), 4096);
        let stat = backend.memory_stat(&g).unwrap();
        assert_eq!((stat.anon_bytes, stat.file_bytes, stat.pgmajfault, stat.workingset_refault), (1000, 2000, 3, 9));
        assert_eq!(
            backend.stall_totals(&g).unwrap(),
            StallTotals { memory_some_us: 100, memory_full_us: 40, io_some_us: 7, io_full_us: 3 }
        );
    }

    #[test]
    fn hybrid_group_is_a_pair_of_directories() {
        let (dir, backend) = hybrid();
        let g = group("critmem/rt");
        create(&backend, &g, hybrid_files);
        assert!(dir.path().join("memory/critmem/rt/memory.limit_in_bytes").exists());
        assert!(dir.path().join("unified/critmem/rt/memory.pressure").exists());
        assert!(backend.exists(&g));
        backend.move_pid(&g, 4242).unwrap();
        assert_eq!(read(&dir.path().join("memory/critmem/rt/cgroup.procs")), "4242");
        assert_eq!(read(&dir.path().join("unified/critmem/rt/cgroup.procs")), "4242");
        assert_eq!(backend.pids(&g).unwrap(), vec![4242]);
    }

    #[test]
    fn hybrid_limit_maps_to_limit_in_bytes_and_huge_means_unlimited() {
        let (dir, backend) = hybrid();
        let g = group("g");
        create(&backend, &g, hybrid_files);
        assert_eq!(backend.knob(&g, Knob::Max).unwrap(), None);
        backend.set_knob(&g, Knob::Max, Some(256 << 20)).unwrap();
        assert_eq!(read(&dir.path().join("memory/g/memory.limit_in_bytes")), "268435456");
        assert_eq!(backend.knob(&g, Knob::Max).unwrap(), Some(256 << 20));
        backend.set_knob(&g, Knob::Max, None).unwrap();
        assert_eq!(read(&dir.path().join("memory/g/memory.limit_in_bytes")), "-1");
        // The soft limit is a different thing and is never touched.
        assert_eq!(read(&dir.path().join("memory/g/memory.soft_limit_in_bytes")), "9223372036854771712\n");
    }

    #[test]
    fn hybrid_rejects_high_min_low_values_but_clearing_them_is_a_no_op() {
        let (_dir, backend) = hybrid();
        let g = group("g");
        create(&backend, &g, hybrid_files);
        for knob in [Knob::High, Knob::Min, Knob::Low] {
            assert!(!backend.supports(knob));
            let err = backend.set_knob(&g, knob, Some(4096)).unwrap_err();
            assert!(err.to_string().contains("not available on the hybrid"), "{err}");
            assert_eq!(backend.plan_knob(&g, knob, None).unwrap(), None);
            assert_eq!(backend.knob(&g, knob).unwrap(), None);
        }
        assert!(backend.plan_reclaim(&g, 4096).is_err());
    }

    #[test]
    fn hybrid_usage_and_stat_from_v1_psi_from_unified() {
        let (_dir, backend) = hybrid();
        let g = group("g");
        create(&backend, &g, hybrid_files);
        assert_eq!(backend.usage_bytes(&g).unwrap(), 8192);
        let stat = backend.memory_stat(&g).unwrap();
        assert_eq!((stat.anon_bytes, stat.file_bytes, stat.pgmajfault, stat.workingset_refault), (4000, 3000, 9, 6));
        assert_eq!(backend.stall_totals(&g).unwrap(), StallTotals { memory_some_us: 11, memory_full_us: 2, io_some_us: 13, io_full_us: 5 });
    }

    #[test]
    fn vanished_group_is_reported_as_such() {
        let (dir, backend) = hybrid();
        let g = group("g");
        create(&backend, &g, hybrid_files);
        std::fs::remove_dir_all(dir.path().join("memory/g")).unwrap();
        std::fs::remove_dir_all(dir.path().join("unified/g")).unwrap();
        for err in [
            backend.usage_bytes(&g).unwrap_err(),
            backend.stall_totals(&g).unwrap_err(),
            backend.set_knob(&g, Knob::Max, Some(1)).unwrap_err(),
        ] {
            assert!(err.to_string().contains("vanished mid-run"), "{err}");
        }
    }

    #[test]
    fn remove_refuses_busy_groups_and_groups_with_children() {
        let (_dir, backend) = v2();
        let parent = group("p");
        let child = group("p/c");
        create(&backend, &child, |_| V2_FILES);
        assert!(matches!(backend.remove(&parent).unwrap_err(), Error::GroupHasChildren { .. }));
        backend.move_pid(&child, 77).unwrap();
        assert!(matches!(backend.remove(&child).unwrap_err(), Error::GroupBusy { pids: 1, .. }));
        std::fs::write(backend.group_dirs(&child)[0].join("cgroup.procs"), "").unwrap();
        backend.remove(&child).unwrap();
        backend.remove(&parent).unwrap();
        assert!(!backend.exists(&parent));
        backend.remove(&parent).unwrap();
    }

    #[test]
    fn open_backend_checks_the_memory_controller() {
        let dir = tempfile::tempdir().unwrap();
        v2_root(dir.path());
        assert_eq!(open_backend(&crate::layout::Layout::V2 { root: dir.path().to_owned() }).unwrap().name(), "cgroup v2");
        std::fs::write(dir.path().join("cgroup.controllers"), "cpu io\n").unwrap();
        let err = open_backend(&crate::layout::Layout::V2 { root: dir.path().to_owned() }).unwrap_err();
        assert!(err.to_string().contains("memory controller missing"), "{err}");
        let (memory, unified) = hybrid_roots(dir.path());
        assert!(open_backend(&crate::layout::Layout::Hybrid { memory_root: memory, unified_root: unified }).is_ok());
    }

    #[test]
    fn controller_actions_map_to_knobs() {
        assert_eq!(knob_change(&Action::SetHigh { group: 2, bytes: Some(7) }), Some((2, Knob::High, Some(7))));
        assert_eq!(knob_change(&Action::SetLow { group: 0, bytes: None }), Some((0, Knob::Low, None)));
        assert_eq!(knob_change(&Action::DropJob { group: 0, job: 1 }), None);
    }

    #[test]
    fn oom_files_of_both_versions_parse() {
        let v1 = parse_oom_state("oom_kill_disable 1\nunder_oom 1\noom_kill 2\n").unwrap();
        assert_eq!(v1, OomState { under_oom: true, kill_disabled: true, oom_events: 0, oom_kills: 2 });
        let events = parse_oom_state("low 0\nhigh 12\nmax 3\noom 4\noom_kill 1\noom_group_kill 0\n").unwrap();
        assert_eq!(events, OomState { under_oom: false, kill_disabled: false, oom_events: 4, oom_kills: 1 });
        assert_eq!(parse_oom_state("oom x\n"), None);
        let (_dir, hybrid) = hybrid();
        assert_eq!(hybrid.plan_oom_guard(&group("g")).map(|w| w.contents), Some("1".to_owned()));
        let (_dir, v2b) = v2();
        assert!(v2b.plan_oom_guard(&group("g")).is_none());
        assert!(v2b.oom_file(&group("g")).ends_with("g/memory.events"));
    }

    proptest! {
        #[test]
        fn cgroup_file_parsers_never_panic_on_arbitrary_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
            let text = String::from_utf8_lossy(&bytes);
            let _ = parse_memory_stat(&text, "fuzz");
            let _ = parse_pids(&text, "fuzz");
            let _ = parse_bytes(&group("g"), Path::new("fuzz"), &text);
            let _ = parse_oom_state(&text);
        }

        /// `key value` lines with missing or extra words, signs, u64 overflow, odd spacing.
        #[test]
        fn key_value_parsers_never_panic_on_key_value_like_text(text in r"([ \t]{0,2}[a-z_]{0,12}([ \t]{1,2}(-|\+)?[0-9]{0,22}){0,3}[ \t]{0,2}\r?\n){0,6}") {
            let _ = parse_memory_stat(&text, "fuzz");
            let _ = parse_oom_state(&text);
        }

        #[test]
        fn number_parsers_never_panic_on_number_like_text(text in r"([ \t]{0,2}(-|\+)?[0-9]{0,22}(\.[0-9]?)?(max|x)?[ \t]{0,2}\r?\n?){0,5}") {
            let _ = parse_pids(&text, "fuzz");
            let _ = parse_bytes(&group("g"), Path::new("fuzz"), &text);
        }

        /// The kernel prints memory.stat as `%s %llu\n` per field.
        #[test]
        fn memory_stat_parses_back(fields in proptest::collection::btree_map(r"[a-z][a-z0-9_]{0,24}", any::<u64>(), 0..40)) {
            let text: String = fields.iter().map(|(key, value)| format!("{key} {value}\n")).collect();
            prop_assert_eq!(parse_memory_stat(&text, "gen").unwrap(), fields);
        }

        #[test]
        fn pids_parse_back(pids in proptest::collection::vec(any::<u32>(), 0..40)) {
            let text: String = pids.iter().map(|pid| format!("{pid}\n")).collect();
            prop_assert_eq!(parse_pids(&text, "gen").unwrap(), pids);
        }

        /// Byte counts arrive trimmed (`read_trimmed`).
        #[test]
        fn byte_counts_parse_back(bytes in any::<u64>()) {
            prop_assert_eq!(parse_bytes(&group("g"), Path::new("gen"), &bytes.to_string()).unwrap(), bytes);
        }

        /// v1 `memory.oom_control` (`%d`/`%lu` values) and v2 `memory.events` (`%lu`).
        #[test]
        fn oom_files_parse_back(disabled in any::<bool>(), under in any::<bool>(), counts in [any::<u64>(), any::<u64>(), any::<u64>(), any::<u64>(), any::<u64>(), any::<u64>()]) {
            let [low, high, max, oom, oom_kill, group_kill] = counts;
            let v1 = format!("oom_kill_disable {}\nunder_oom {}\noom_kill {oom_kill}\n", u8::from(disabled), u8::from(under));
            prop_assert_eq!(parse_oom_state(&v1), Some(OomState { under_oom: under, kill_disabled: disabled, oom_events: 0, oom_kills: oom_kill }));
            let v2 = format!("low {low}\nhigh {high}\nmax {max}\noom {oom}\noom_kill {oom_kill}\noom_group_kill {group_kill}\n");
            prop_assert_eq!(parse_oom_state(&v2), Some(OomState { under_oom: false, kill_disabled: false, oom_events: oom, oom_kills: oom_kill }));
        }
    }

    #[test]
    fn malformed_files_are_parse_errors() {
        assert!(parse_memory_stat("anon x\n", "t").is_err());
        assert!(parse_memory_stat("anon 1 2\n", "t").is_err());
        assert!(parse_pids("12\nabc\n", "t").is_err());
        assert_eq!(parse_pids("12\n\n13\n", "t").unwrap(), vec![12, 13]);
    }
}
