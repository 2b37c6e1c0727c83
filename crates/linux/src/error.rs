//! The crate's one error type. Every message says what went wrong and what to do about it,
//! so a front end can print `Display` as one line and exit.

use std::io;
use std::path::{Path, PathBuf};

/// Everything that can go wrong on the Linux platform.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("not root: critmem needs root to write cgroup files ({path}); run with sudo or use --dry-run")]
    NotRoot { path: PathBuf },

    #[error("permission denied on {path} although running as root: is the cgroup filesystem mounted read-only, or is a security module (SELinux/AppArmor) blocking it? ({source})")]
    PermissionDenied { path: PathBuf, source: io::Error },

    #[error("PSI missing: {path} not found; mount cgroup2 (e.g. `mount -t cgroup2 none /sys/fs/cgroup/unified`) or boot with psi=1")]
    PsiMissing { path: PathBuf },

    #[error("the kernel rejected PSI trigger `{spec}` on {path}: {hint}")]
    PsiTriggerRejected { path: PathBuf, spec: String, hint: String },

    #[error("memory controller missing: {detail}; boot without cgroup_disable=memory, or enable it with `echo +memory > <parent>/cgroup.subtree_control`")]
    NoMemoryController { detail: String },

    #[error("no cgroup filesystem found in {mounts}: mount cgroup2 on /sys/fs/cgroup (or the v1 memory controller plus cgroup2 for PSI)")]
    NoCgroupFs { mounts: PathBuf },

    /// The controller's own code failed (a Python controller's exception); every limit is
    /// restored before this is reported.
    #[error("{reason}")]
    ControllerFailed { reason: String },

    #[error("cgroup {group} vanished mid-run ({path} is gone): something else removed it; restart the agent to recreate it")]
    GroupVanished { group: String, path: PathBuf },

    #[error("cgroup {group} still holds {pids} process(es); move them out or stop them before removing it")]
    GroupBusy { group: String, pids: usize },

    #[error("cgroup {group} has child groups; remove them first")]
    GroupHasChildren { group: String },

    #[error("invalid cgroup path {path:?}: {reason} (use a relative path like \"critmem/rt\")")]
    InvalidGroupPath { path: String, reason: &'static str },

    #[error("{knob} is not available on the {backend} backend: {hint}")]
    Unsupported { knob: &'static str, backend: &'static str, hint: &'static str },

    #[error("the kernel refused `{value}` for {path}: {source}; if lowering a limit, usage may be above it and unreclaimable (no swap?) — raise the floor or add swap")]
    WriteRejected { path: PathBuf, value: String, source: io::Error },

    #[error("cannot parse {what} from {origin}: {reason}")]
    Parse { what: &'static str, origin: String, reason: String },

    #[error("{op} {path}: {source}")]
    Io { op: &'static str, path: PathBuf, source: io::Error },

    #[error("writer queue full ({capacity} files pending): the kernel is not completing cgroup writes; check for a group stuck in reclaim, or raise the queue capacity")]
    WriterQueueFull { capacity: usize },

    #[error("the cgroup writer has shut down; no further writes are accepted")]
    WriterStopped,

    #[error("refusing to touch swap {path}: {reason}; critmem only manages the swapfile it created itself")]
    SwapNotOurs { path: PathBuf, reason: String },

    #[error("swapon {path} failed: {stderr}; the filesystem may not support swapfiles (tmpfs, overlayfs, NFS cannot; btrfs needs a nocow file) — choose a path on ext4 or xfs")]
    SwapUnsupported { path: PathBuf, stderr: String },

    #[error("swap setup stopped by {signal}: {outcome}")]
    SwapSetupInterrupted { signal: String, outcome: String },

    #[error("`{command}` failed ({status}): {stderr}; is util-linux installed and are you root?")]
    Command { command: String, status: String, stderr: String },

    #[error("swap state {path}: {reason}")]
    SwapState { path: PathBuf, reason: String },

    #[error("journal {path}: {reason}")]
    Journal { path: PathBuf, reason: String },

    /// The journal could not be written: nothing may change that it does not record.
    #[error("append to journal {path}: {source}")]
    JournalWrite { path: PathBuf, source: io::Error },

    /// Every change was undone, but the journal could not be removed.
    #[error("every change was restored, but the journal {path} could not be removed ({source}); the next start replays it, putting the same original values back")]
    JournalLeft { path: PathBuf, source: io::Error },

    #[error("could not restore everything (kept in the journal {} for the next start): {failures}", journal.display())]
    RestoreIncomplete { journal: PathBuf, failures: String },

    #[error("configuration {path}: {reason}")]
    Config { path: PathBuf, reason: String },

    #[error("job socket {path}: {reason}")]
    Socket { path: PathBuf, reason: String },
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// Wraps an I/O error on `path`, turning the common kernel answers into actionable variants:
    /// EACCES/EPERM into [`Error::NotRoot`] (when not root), ENOENT inside a group that no longer
    /// exists into [`Error::GroupVanished`].
    pub fn io(op: &'static str, path: &Path, source: io::Error) -> Self {
        match source.kind() {
            io::ErrorKind::PermissionDenied => {
                if nix::unistd::geteuid().is_root() {
                    Error::PermissionDenied { path: path.to_owned(), source }
                } else {
                    Error::NotRoot { path: path.to_owned() }
                }
            }
            _ => Error::Io { op, path: path.to_owned(), source },
        }
    }

    /// Like [`Error::io`], but a missing file whose group directory is gone too means the group
    /// vanished (rather than a plain I/O error).
    pub fn group_io(op: &'static str, group: &str, path: &Path, source: io::Error) -> Self {
        if source.kind() == io::ErrorKind::NotFound && path.parent().is_some_and(|dir| !dir.exists()) {
            return Error::GroupVanished { group: group.to_owned(), path: path.to_owned() };
        }
        Error::io(op, path, source)
    }

    pub(crate) fn parse(what: &'static str, origin: impl Into<String>, reason: impl Into<String>) -> Self {
        Error::Parse { what, origin: origin.into(), reason: reason.into() }
    }
}
