//! Files that must survive a crash in a known state: the restore journal and the swap state.

use crate::error::{Error, Result};
use std::fs::File;
use std::io::Write;
use std::path::Path;

/// The directory holding `path` (`.` for a bare file name).
pub(crate) fn parent_dir(path: &Path) -> &Path {
    path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."))
}

/// fsync of `path`'s directory, so a file created, renamed or removed there survives a crash.
pub(crate) fn sync_parent(path: &Path) -> Result<()> {
    let dir = parent_dir(path);
    File::open(dir).and_then(|d| d.sync_all()).map_err(|e| Error::io("sync directory", dir, e))
}

/// Replaces `path` with `contents` so that a crash leaves the old file or the new one, never a
/// torn one: a 0600 temporary file beside it (a fresh random name, created exclusively),
/// fsynced, renamed over it, and the directory fsynced.
pub(crate) fn replace_atomically(path: &Path, contents: &[u8]) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let dir = parent_dir(path);
    let mut temp = tempfile::Builder::new()
        .prefix(".critmem-")
        .permissions(std::fs::Permissions::from_mode(0o600))
        .tempfile_in(dir)
        .map_err(|e| Error::io("create a temporary file in", dir, e))?;
    temp.write_all(contents).and_then(|()| temp.as_file().sync_all()).map_err(|e| Error::io("write", temp.path(), e))?;
    temp.persist(path).map_err(|e| Error::io("replace", path, e.error))?;
    sync_parent(path)
}
