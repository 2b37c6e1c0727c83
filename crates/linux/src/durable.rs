//! Files that must survive a crash in a known state: the restore journal and the swap state.

use crate::error::{Error, Result};
use std::ffi::OsString;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// What a filesystem the agent appends to can take.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FsState {
    Writable,
    ReadOnly,
    Full,
    /// fsync fails otherwise (an I/O error, a shut-down filesystem).
    Failing(String),
}

/// Watches a file the agent must be able to append to (its journal), so that its filesystem
/// turning read-only, full or failing is said when it happens, not at the next change that
/// needs a new entry.
pub struct FsWatch {
    path: PathBuf,
    state: FsState,
    next_check_ns: u64,
}

impl FsWatch {
    const PERIOD_NS: u64 = 1_000_000_000;

    pub fn new(path: &Path) -> Self {
        FsWatch { path: path.to_owned(), state: FsState::Writable, next_check_ns: 0 }
    }

    /// At most once a second: the filesystem's state when it changed since the last call.
    /// `None` too while the file cannot be opened (then the next append names the error).
    pub fn check(&mut self, now_ns: u64) -> Option<FsState> {
        if now_ns < self.next_check_ns {
            return None;
        }
        self.next_check_ns = now_ns.saturating_add(Self::PERIOD_NS);
        let state = Self::state_of(&self.path)?;
        (state != self.state).then(|| {
            self.state = state.clone();
            state
        })
    }

    fn state_of(path: &Path) -> Option<FsState> {
        let failed = |e: std::io::Error| match e.raw_os_error() {
            Some(nix::libc::EROFS) => FsState::ReadOnly,
            _ => FsState::Failing(e.to_string()),
        };
        // An aborted ext4 (errors=remount-ro) may still show a read-write mount; fsync, which
        // costs nothing on a file with nothing unwritten, says what it is on most kernels.
        let file = File::open(path).ok()?;
        if let Err(e) = file.sync_all() {
            return Some(failed(e));
        }
        // On some (Debian's 6.1) fsync succeeds there too. An unnamed file made in the
        // journal's directory needs the filesystem's journal and leaves nothing behind; a
        // filesystem without O_TMPFILE says nothing this way.
        use nix::{
            errno::Errno,
            fcntl::{open, OFlag},
        };
        let probe = open(parent_dir(path), OFlag::O_TMPFILE | OFlag::O_WRONLY | OFlag::O_CLOEXEC, nix::sys::stat::Mode::S_IRUSR);
        match probe {
            // Full, or no unnamed files here: left to statvfs below.
            Ok(_) | Err(Errno::EOPNOTSUPP | Errno::EISDIR | Errno::EINVAL | Errno::ENOSPC | Errno::EDQUOT | Errno::EACCES) => {}
            Err(errno) => return Some(failed(errno.into())),
        }
        let stat = nix::sys::statvfs::fstatvfs(&file).ok()?;
        Some(if stat.flags().contains(nix::sys::statvfs::FsFlags::ST_RDONLY) {
            FsState::ReadOnly
        } else if stat.blocks_free() == 0 {
            FsState::Full
        } else {
            FsState::Writable
        })
    }
}

/// The directory holding `path` (`.` for a bare file name).
pub(crate) fn parent_dir(path: &Path) -> &Path {
    path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."))
}

/// Makes the missing directories above `path`, owner-only (0700), and returns them outermost
/// first; `op` names the step in an error (e.g. "create state directory").
pub(crate) fn make_missing_dirs(path: &Path, op: &'static str) -> Result<Vec<PathBuf>> {
    use std::os::unix::fs::DirBuilderExt;
    let dir = parent_dir(path);
    let missing: Vec<&Path> = dir.ancestors().take_while(|d| !d.as_os_str().is_empty() && !d.exists()).collect();
    let mut made = Vec::new();
    for d in missing.into_iter().rev() {
        match std::fs::DirBuilder::new().mode(0o700).create(d) {
            Ok(()) => made.push(d.to_owned()),
            // Made by someone else meanwhile: theirs, not ours to remove.
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => {
                remove_empty_dirs(&made);
                return Err(Error::io(op, d, e));
            }
        }
    }
    Ok(made)
}

/// Removes `dirs` (outermost first), innermost first, stopping at the first that is not empty.
pub(crate) fn remove_empty_dirs(dirs: &[PathBuf]) {
    for d in dirs.iter().rev() {
        if std::fs::remove_dir(d).is_err() {
            return;
        }
    }
}

/// fsync of `path`'s directory, so a file created, renamed or removed there survives a crash.
pub(crate) fn sync_parent(path: &Path) -> Result<()> {
    let dir = parent_dir(path);
    File::open(dir).and_then(|d| d.sync_all()).map_err(|e| Error::io("sync directory", dir, e))
}

/// Longest file name [`temporary_for`] can add its affixes to within the kernel's 255-byte
/// `NAME_MAX`.
pub(crate) const MAX_NAME_BYTES: usize = 255 - TEMPORARY_AFFIX_BYTES;
const TEMPORARY_PREFIX: &str = ".";
const TEMPORARY_SUFFIX: &str = ".critmem-tmp";
const TEMPORARY_AFFIX_BYTES: usize = TEMPORARY_PREFIX.len() + TEMPORARY_SUFFIX.len();

/// Why critmem must not keep a file that names what it may undo (the journal, the swap state)
/// at `path`, or `None` if it may. Undoing writes and removes whatever such a file names, so
/// only its owner may be able to put one there: the directory must exist, belong to this user
/// and be writable by no one else. The name must leave room for [`temporary_for`]'s affixes, or
/// the file's first atomic replace would fail halfway through a run.
pub(crate) fn unsafe_location(path: &Path) -> Option<String> {
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let name_bytes = path.file_name().map_or(0, |n| n.as_bytes().len());
    if name_bytes > MAX_NAME_BYTES {
        return Some(format!("its file name is {name_bytes} bytes; at most {MAX_NAME_BYTES} leave room for its temporary file"));
    }
    let dir = parent_dir(path);
    let meta = match std::fs::metadata(dir) {
        Ok(meta) => meta,
        Err(e) => return Some(format!("cannot inspect its directory {}: {e}", dir.display())),
    };
    let euid = nix::unistd::geteuid().as_raw();
    if meta.uid() != euid || meta.permissions().mode() & 0o022 != 0 {
        return Some(format!(
            "its directory {} must be owned by uid {euid} and writable by no one else (owner {}, mode {:o})",
            dir.display(),
            meta.uid(),
            meta.permissions().mode() & 0o7777
        ));
    }
    None
}

/// The temporary file [`replace_atomically`] writes beside `path`: one fixed name per file, so
/// one that a crash left behind is overwritten by the next replace, and whoever owns `path`
/// can remove it ([`remove_stale_temporary`]) without touching anyone else's.
pub(crate) fn temporary_for(path: &Path) -> PathBuf {
    let mut name = OsString::from(TEMPORARY_PREFIX);
    name.push(path.file_name().unwrap_or(path.as_os_str()));
    name.push(TEMPORARY_SUFFIX);
    parent_dir(path).join(name)
}

/// Replaces `path` with `contents` so that a crash leaves the old file or the new one, never a
/// torn one: [`temporary_for`] it, written 0600 and fsynced, renamed over it, and the
/// directory fsynced. The caller owns `path` (holds its lock, or created it exclusively).
pub(crate) fn replace_atomically(path: &Path, contents: &[u8]) -> Result<()> {
    let temp = temporary_for(path);
    // A leftover goes first, whatever it is: opening it could block (a FIFO), write through a
    // hard link, or share a descriptor someone else holds. Exclusive create then makes a fresh
    // file of our own, and refuses a symlink.
    match std::fs::remove_file(&temp) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(Error::io("remove temporary file", &temp, e)),
    }
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&temp)
        .map_err(|e| Error::io("create temporary file", &temp, e))?;
    file.write_all(contents).and_then(|()| file.sync_all()).map_err(|e| Error::io("write", &temp, e))?;
    std::fs::rename(&temp, path).map_err(|e| Error::io("replace", path, e))?;
    sync_parent(path)
}

/// Removes the temporary file of `path` that a crash inside [`replace_atomically`] left. Only
/// a warning if that fails: the file is litter, and the next replace overwrites it anyway.
pub(crate) fn remove_stale_temporary(path: &Path) {
    let temp = temporary_for(path);
    match std::fs::remove_file(&temp) {
        Ok(()) => tracing::info!(file = %temp.display(), "removed a temporary file left by a crash"),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => tracing::warn!(file = %temp.display(), error = %e, "cannot remove a temporary file left by a crash"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    /// A name one byte too long for its temporary file is refused before anything is written,
    /// not when the file is first replaced mid-run.
    #[test]
    fn names_must_leave_room_for_the_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        let longest = dir.path().join("j".repeat(MAX_NAME_BYTES));
        assert_eq!(unsafe_location(&longest), None);
        replace_atomically(&longest, b"fits").unwrap();
        let too_long = dir.path().join("j".repeat(MAX_NAME_BYTES + 1));
        let reason = unsafe_location(&too_long).unwrap();
        assert_eq!(
            reason,
            format!("its file name is {} bytes; at most {MAX_NAME_BYTES} leave room for its temporary file", MAX_NAME_BYTES + 1)
        );
        assert!(replace_atomically(&too_long, b"").is_err(), "the kernel's limit is what the check guards");
    }

    #[test]
    fn a_missing_directory_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let reason = unsafe_location(&dir.path().join("gone/journal.jsonl")).unwrap();
        assert!(reason.starts_with("cannot inspect its directory") && reason.contains("gone"), "{reason}");
    }

    #[test]
    fn a_replace_overwrites_a_leftover_temporary_and_leaves_none() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("journal.jsonl");
        std::fs::write(&path, "old").unwrap();
        let temp = temporary_for(&path);
        assert_eq!(temp, dir.path().join(".journal.jsonl.critmem-tmp"));
        std::fs::write(&temp, "torn by a crash, longer than the new text").unwrap();
        std::fs::set_permissions(&temp, std::fs::Permissions::from_mode(0o644)).unwrap();
        replace_atomically(&path, b"new").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "new");
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        assert!(!temp.exists());

        std::fs::write(&temp, "torn").unwrap();
        remove_stale_temporary(&path);
        assert!(!temp.exists());
        remove_stale_temporary(&path);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1, "only the file itself");
    }

    /// Whatever sits at the temporary name is unlinked, never opened: a symlink or a hard link
    /// to another file leaves that file alone, and a FIFO does not block the replace.
    #[test]
    fn what_sits_at_the_temporary_name_is_replaced_not_written_through() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.json");
        let victim = dir.path().join("victim");
        std::fs::write(&victim, "precious").unwrap();
        std::os::unix::fs::symlink(&victim, temporary_for(&path)).unwrap();
        replace_atomically(&path, b"one").unwrap();
        std::fs::hard_link(&victim, temporary_for(&path)).unwrap();
        replace_atomically(&path, b"two").unwrap();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
        let fifo = std::process::Command::new("mkfifo").arg(temporary_for(&path)).status().unwrap();
        assert!(fifo.success());
        replace_atomically(&path, b"three").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "three");
        assert!(!temporary_for(&path).exists());
    }
}
