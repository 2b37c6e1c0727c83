//! critmem's own swapfile: set up, tear down, and never touch any other swap.
//!
//! Ownership is proved twice: a state file records the swapfile's path, which file setup
//! created there (device, inode, birth time) and the UUID critmem gave it, and the file at the
//! path must be that file, its swap header carrying that UUID and the label [`SWAP_LABEL`].
//! `teardown` refuses to swapoff or delete anything that fails either check. The state file is
//! written before the swapfile is created and rewritten (atomically) with the file's identity
//! right after, so a crash mid-setup leaves enough behind for `teardown` to clean up; a crash
//! between the two leaves a state naming no file, and `teardown` then refuses to delete
//! whatever is at the path (it may be someone else's) and says so.

use crate::error::{Error, Result};
use crate::layout::unescape_octal;
use serde::{Deserialize, Serialize};
use std::fs::{File, Metadata, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Where critmem records its swapfile unless told otherwise.
pub const DEFAULT_STATE_FILE: &str = "/var/lib/critmem/swap.json";

/// Label mkswap writes into critmem's swapfile.
pub const SWAP_LABEL: &str = "critmem-swap";
/// mkswap needs at least 10 pages; anything under 1 MiB is surely a mistake.
pub const MIN_SWAP_BYTES: u64 = 1 << 20;

/// One line of `/proc/swaps`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SwapEntry {
    pub path: PathBuf,
    /// `file` or `partition`.
    pub kind: String,
    pub size_bytes: u64,
    pub used_bytes: u64,
    pub priority: i32,
}

/// Parses `/proc/swaps` (whitespace-separated, sizes in KiB, the path escaped like mount
/// fields):
///
/// ```text
/// Filename                Type        Size        Used        Priority
/// /var/lib/critmem/swapfile               file        65532        0        -2
/// ```
pub fn parse_proc_swaps(text: &str) -> Result<Vec<SwapEntry>> {
    let mut entries = Vec::new();
    for (index, line) in text.lines().enumerate() {
        if line.trim().is_empty() || (index == 0 && line.starts_with("Filename")) {
            continue;
        }
        let bad = |reason: &str| Error::parse("/proc/swaps", format!("line {}", index + 1), format!("{reason} in {line:?}"));
        // Only space and tab separate: the path escapes those, but not \r or Unicode spaces.
        let fields: Vec<&str> = line.split([' ', '\t']).filter(|f| !f.is_empty()).collect();
        let [path, kind, size_kib, used_kib, priority] = fields[..] else {
            return Err(bad("expected 5 fields"));
        };
        let kib = |s: &str| match s.parse::<u64>() {
            Ok(k) => k.checked_mul(1024).ok_or_else(|| bad("size is too large")),
            Err(_) => Err(bad("size is not a number")),
        };
        entries.push(SwapEntry {
            path: PathBuf::from(unescape_octal(path)),
            kind: kind.to_owned(),
            size_bytes: kib(size_kib)?,
            used_bytes: kib(used_kib)?,
            priority: priority.parse().map_err(|_| bad("priority is not a number"))?,
        });
    }
    Ok(entries)
}

/// What the state file records.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SwapState {
    pub v: u32,
    /// Absolute path of the swapfile.
    pub path: PathBuf,
    pub size_bytes: u64,
    /// UUID given to mkswap.
    pub uuid: String,
    pub label: String,
    /// The file setup created at `path`; `None` until it exists (and in states written before
    /// critmem recorded it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<FileIdentity>,
    /// Directories setup created to hold the state, outermost first; teardown removes them
    /// again where they are empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub created_dirs: Vec<PathBuf>,
}

/// Which file is meant, as opposed to whatever is at a path now.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileIdentity {
    pub dev: u64,
    pub ino: u64,
    /// Birth time (statx), ns since the epoch; `None` where the filesystem does not keep it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub birth_ns: Option<u64>,
}

impl FileIdentity {
    pub fn of(meta: &Metadata) -> Self {
        let birth_ns =
            meta.created().ok().and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok()).and_then(|d| u64::try_from(d.as_nanos()).ok());
        FileIdentity { dev: meta.dev(), ino: meta.ino(), birth_ns }
    }

    /// Whether `found` is this file. The inode number must match; it is reused once a file is
    /// deleted, so the birth time must match too where both have one. Without birth times the
    /// device must match; with them it need not, since device numbers (device-mapper, btrfs)
    /// may be assigned anew after a reboot.
    pub fn is(&self, found: &FileIdentity) -> bool {
        self.ino == found.ino
            && match (self.birth_ns, found.birth_ns) {
                (Some(recorded), Some(now)) => recorded == now,
                _ => self.dev == found.dev,
            }
    }
}

/// Manages critmem's swapfile.
#[derive(Clone, Debug)]
pub struct SwapManager {
    state_file: PathBuf,
    proc_root: PathBuf,
}

impl SwapManager {
    /// `state_file` records ownership (e.g. `/var/lib/critmem/swap.json`); `proc_root` is
    /// `/proc` or a fake tree.
    pub fn new(state_file: PathBuf, proc_root: PathBuf) -> Self {
        SwapManager { state_file, proc_root }
    }

    /// Active swap areas.
    pub fn active(&self) -> Result<Vec<SwapEntry>> {
        let path = self.proc_root.join("swaps");
        let text = std::fs::read_to_string(&path).map_err(|e| Error::io("read", &path, e))?;
        parse_proc_swaps(&text)
    }

    /// The recorded swapfile, if critmem set one up.
    pub fn state(&self) -> Result<Option<SwapState>> {
        match crate::read_input_file(&self.state_file) {
            Ok(text) => serde_json::from_str(&text).map(Some).map_err(|e| Error::SwapState {
                path: self.state_file.clone(),
                reason: format!("it is unreadable ({e}); check the swapfile it names by hand, then delete it"),
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(Error::io("read", &self.state_file, e)),
        }
    }

    /// The whole disk holding critmem's swapfile, when it has one and it is on (`sys_root` is
    /// `/sys` or a fake tree): the disk whose reads and writes I/O limits throttle.
    pub fn active_disk(&self, sys_root: &Path) -> Result<Option<crate::cgroup::BlockDevice>> {
        let Some(state) = self.state()? else { return Ok(None) };
        if !self.is_active(&state)? {
            return Ok(None);
        }
        crate::cgroup::bandwidth::whole_disk_of(&state.path, sys_root)
            .map(Some)
            .map_err(|reason| Error::SwapState { path: self.state_file.clone(), reason: format!("its swapfile's disk: {reason}") })
    }

    /// Whether the recorded swapfile is in `/proc/swaps`.
    pub fn is_active(&self, state: &SwapState) -> Result<bool> {
        Ok(self.active()?.iter().any(|e| e.path == state.path))
    }

    /// Creates a swapfile of `size_bytes` (rounded up to 4 KiB) at `path`, which must not
    /// exist, labels it, and enables it. Refuses if critmem already has one.
    pub fn setup(&self, path: &Path, size_bytes: u64) -> Result<SwapState> {
        self.setup_unless(path, size_bytes, &|| None)
    }

    /// [`SwapManager::setup`], asking `stop` between its steps (and between the chunks of a
    /// zero fill) whether a signal wants it to stop (`Some(signal name)`); then it undoes what
    /// it made, turning its own swapfile off again if it had already turned it on.
    pub fn setup_unless(&self, path: &Path, size_bytes: u64, stop: &dyn Fn() -> Option<String>) -> Result<SwapState> {
        if let Some(existing) = self.state()? {
            return Err(Error::SwapNotOurs {
                path: existing.path,
                reason: "critmem already has a swapfile recorded; run `critmem swap teardown` first".into(),
            });
        }
        if size_bytes < MIN_SWAP_BYTES {
            return Err(Error::parse("swap size", "setup", format!("{size_bytes} bytes is below the minimum of {MIN_SWAP_BYTES}")));
        }
        let size_bytes = size_bytes.div_ceil(4096) * 4096;
        if path.exists() {
            return Err(Error::SwapNotOurs { path: path.to_owned(), reason: "the file already exists; choose a new path".into() });
        }
        // The state directory (by default also the swapfile's) is critmem's own: made here on a
        // fresh machine, and removed by teardown.
        let created_dirs = self.make_state_dir()?;
        let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
        let resolved = std::fs::canonicalize(dir).map_err(|e| Error::io("resolve", dir, e));
        let file_name = path.file_name().ok_or_else(|| Error::parse("swap path", path.display().to_string(), "has no file name"));
        let path = match resolved.and_then(|dir| file_name.map(|name| dir.join(name))) {
            Ok(path) => path,
            Err(e) => {
                remove_empty_dirs(&created_dirs);
                return Err(e);
            }
        };
        let (file, state) = self.create_recorded(&path, size_bytes, created_dirs)?;
        if let Err(e) = self.format_and_enable(&file, &state, stop) {
            return Err(self.undo_failed_setup(&file, &state, e, stop));
        }
        Ok(state)
    }

    /// Undoes a setup that failed after `create_recorded`, and returns the error to report.
    fn undo_failed_setup(&self, file: &File, state: &SwapState, e: Error, stop: &dyn Fn() -> Option<String>) -> Error {
        // A signal also reaches mkswap and swapon (same process group) and fails them.
        let signal = match &e {
            Error::SwapSetupInterrupted { signal, .. } => Some(signal.clone()),
            _ => stop(),
        };
        // Undo what setup made: the file it created exclusively (if the path still names
        // it) and the state, unless the kernel is using it after all and setup did not
        // turn it on itself.
        let ours = file
            .metadata()
            .ok()
            .zip(std::fs::symlink_metadata(&state.path).ok())
            .is_some_and(|(made, now)| FileIdentity::of(&made).is(&FileIdentity::of(&now)));
        let active = match self.is_active(state) {
            Ok(true) if signal.is_some() && ours => swapoff_with_retries(&state.path).is_err(),
            Ok(active) => active,
            Err(_) => true,
        };
        if !active {
            if ours {
                let _ = std::fs::remove_file(&state.path);
            }
            let _ = std::fs::remove_file(&self.state_file);
            remove_empty_dirs(&state.created_dirs);
        }
        let Some(signal) = signal else { return e };
        let left: Vec<String> = [(ours && state.path.exists(), &state.path), (self.state_file.exists(), &self.state_file)]
            .into_iter()
            .filter(|(there, _)| *there)
            .map(|(_, p)| p.display().to_string())
            .collect();
        let mut outcome = if left.is_empty() {
            "the half-made swapfile and its state were removed".to_string()
        } else {
            format!("{} left behind; run `critmem swap teardown`", left.join(" and "))
        };
        // A step that failed on its own as the signal came: say so too.
        if !matches!(e, Error::SwapSetupInterrupted { .. }) {
            outcome.push_str(&format!(" (the step under way failed: {e})"));
        }
        Error::SwapSetupInterrupted { signal, outcome }
    }

    /// Records the state, creates the (empty) swapfile at `path`, which must not exist, and
    /// records which file it is. Leaves neither behind if it fails.
    fn create_recorded(&self, path: &Path, size_bytes: u64, created_dirs: Vec<PathBuf>) -> Result<(File, SwapState)> {
        let give_up = |e: Error, dirs: &[PathBuf]| {
            remove_empty_dirs(dirs);
            e
        };
        let uuid = random_uuid().map_err(|e| give_up(e, &created_dirs))?;
        let mut state = SwapState { v: 1, path: path.to_owned(), size_bytes, uuid, label: SWAP_LABEL.to_owned(), file: None, created_dirs };
        self.write_state(&state).map_err(|e| give_up(e, &state.created_dirs))?;
        let file = match OpenOptions::new().write(true).create_new(true).mode(0o600).open(path) {
            Ok(file) => file,
            Err(e) => {
                let _ = std::fs::remove_file(&self.state_file);
                return Err(give_up(Error::io("create swapfile", path, e), &state.created_dirs));
            }
        };
        // From the descriptor create_new returned: the file this call made, whatever the path holds later.
        let recorded = file.metadata().map_err(|e| Error::io("stat swapfile", path, e)).and_then(|meta| {
            state.file = Some(FileIdentity::of(&meta));
            self.replace_state(&state)
        });
        if let Err(e) = recorded {
            let _ = std::fs::remove_file(path);
            crate::durable::remove_stale_temporary(&self.state_file);
            let _ = std::fs::remove_file(&self.state_file);
            return Err(give_up(e, &state.created_dirs));
        }
        Ok((file, state))
    }

    fn format_and_enable(&self, file: &File, state: &SwapState, stop: &dyn Fn() -> Option<String>) -> Result<()> {
        let path = &state.path;
        let check = || stop().map_or(Ok(()), |signal| Err(Error::SwapSetupInterrupted { signal, outcome: String::new() }));
        check()?;
        allocate(file, path, state.size_bytes, &check)?;
        check()?;
        run("mkswap", &["-L", SWAP_LABEL, "-U", &state.uuid, &path.to_string_lossy()])?;
        check()?;
        let swapon = Command::new(tool("swapon")).arg(path).output().map_err(|e| Error::io("run", Path::new("swapon"), e))?;
        if !swapon.status.success() {
            return Err(Error::SwapUnsupported { path: path.clone(), stderr: String::from_utf8_lossy(&swapon.stderr).trim().to_owned() });
        }
        if !self.is_active(state)? {
            return Err(Error::SwapUnsupported {
                path: path.clone(),
                stderr: "swapon succeeded but /proc/swaps does not list the file".into(),
            });
        }
        check()
    }

    /// Creates the missing directories above the state file, owner-only (0700), and returns
    /// them outermost first.
    fn make_state_dir(&self) -> Result<Vec<PathBuf>> {
        crate::durable::make_missing_dirs(&self.state_file, "create state directory")
    }

    /// Writes the first state; create_new, so two setups cannot both own it. Durable (file and
    /// directory synced) before the swapfile is created.
    fn write_state(&self, state: &SwapState) -> Result<()> {
        let dir = crate::durable::parent_dir(&self.state_file);
        std::fs::create_dir_all(dir).map_err(|e| Error::io("create state directory", dir, e))?;
        self.check_state_location()?;
        let text = serde_json::to_string_pretty(state).map_err(|e| Error::parse("swap state", "setup", e.to_string()))?;
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&self.state_file)
            .map_err(|e| Error::io("create", &self.state_file, e))?;
        file.write_all(text.as_bytes()).and_then(|()| file.sync_all()).map_err(|e| Error::io("write", &self.state_file, e))?;
        crate::durable::sync_parent(&self.state_file)
    }

    /// Teardown swaps off and deletes the file the state names, so the state must sit where only
    /// its owner could have put it (the journal's rule).
    fn check_state_location(&self) -> Result<()> {
        match crate::durable::unsafe_location(&self.state_file) {
            Some(reason) => Err(Error::SwapState { path: self.state_file.clone(), reason }),
            None => Ok(()),
        }
    }

    /// Replaces the state atomically: a crash leaves the old state or the new one.
    fn replace_state(&self, state: &SwapState) -> Result<()> {
        let text = serde_json::to_string_pretty(state).map_err(|e| Error::parse("swap state", "setup", e.to_string()))?;
        crate::durable::replace_atomically(&self.state_file, text.as_bytes())
    }

    /// Refuses unless `found` is the file setup created.
    fn check_identity(&self, created: &FileIdentity, found: &Metadata, path: &Path) -> Result<()> {
        let found = FileIdentity::of(found);
        if created.is(&found) {
            return Ok(());
        }
        Err(Error::SwapNotOurs {
            path: path.to_owned(),
            reason: format!(
                "it is not the file critmem created there (that was inode {} on device {}, this is inode {} on device {}); if critmem's file is gone, remove {}",
                created.ino,
                created.dev,
                found.ino,
                found.dev,
                self.state_file.display()
            ),
        })
    }

    /// Disables and deletes critmem's swapfile. Returns its path, or `None` when critmem has
    /// none. Refuses (touching nothing) if the file at the path is not the one setup created,
    /// or its swap header is not the one critmem wrote.
    pub fn teardown(&self) -> Result<Option<PathBuf>> {
        let Some(state) = self.state()? else { return Ok(None) };
        self.check_state_location()?;
        let path = &state.path;
        let found = match std::fs::symlink_metadata(path) {
            Ok(meta) => Some(meta),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(Error::io("inspect swapfile", path, e)),
        };
        if let Some(found) = found {
            let Some(created) = state.file else {
                return Err(Error::SwapNotOurs {
                    path: path.clone(),
                    reason: format!(
                        "the state does not record which file critmem created (setup stopped before it could, or an older critmem wrote the state), so this may be someone else's; check it, swapoff and remove it by hand if it is critmem's, then remove {}",
                        self.state_file.display()
                    ),
                });
            };
            self.check_identity(&created, &found, path)?;
            // Identity and header from one descriptor, so both are of the same file; no
            // following a symlink swapped in since.
            let mut file = OpenOptions::new()
                .read(true)
                .custom_flags(nix::libc::O_NOFOLLOW)
                .open(path)
                .map_err(|e| Error::io("open swapfile", path, e))?;
            self.check_identity(&created, &file.metadata().map_err(|e| Error::io("stat swapfile", path, e))?, path)?;
            match read_header_of(&mut file, path)? {
                Some(header) if header.label == state.label && header.uuid == state.uuid => {}
                Some(header) => {
                    return Err(Error::SwapNotOurs {
                        path: path.clone(),
                        reason: format!(
                            "its swap header (label {:?}, UUID {}) is not the one critmem wrote ({})",
                            header.label, header.uuid, state.uuid
                        ),
                    })
                }
                // No swap signature: setup stopped between creating the file and mkswap.
                None if self.is_active(&state)? => {
                    return Err(Error::SwapNotOurs {
                        path: path.clone(),
                        reason: "it is active but has no swap header critmem can read".into(),
                    })
                }
                None => {}
            }
            if self.is_active(&state)? {
                swapoff_with_retries(path)?;
            }
            // Unlinking goes by path: check once more that it still names the file.
            self.check_identity(&created, &std::fs::symlink_metadata(path).map_err(|e| Error::io("inspect swapfile", path, e))?, path)?;
            std::fs::remove_file(path).map_err(|e| Error::io("remove swapfile", path, e))?;
        }
        // While the state is still ours: once it is gone a new setup may be writing its own.
        crate::durable::remove_stale_temporary(&self.state_file);
        std::fs::remove_file(&self.state_file).map_err(|e| Error::io("remove", &self.state_file, e))?;
        remove_empty_dirs(&state.created_dirs);
        Ok(Some(state.path))
    }
}

/// Removes `dirs` (outermost first) innermost first, each only if it is empty; a directory
/// something else has put files in stays.
use crate::durable::remove_empty_dirs;

/// Label and UUID from a swap header (`union swap_header` in include/linux/swap.h): the
/// `SWAPSPACE2` magic ends the first page; `sws_uuid[16]` is at byte 1036 and
/// `sws_volume[16]` (the label) at 1052.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SwapHeader {
    pub uuid: String,
    pub label: String,
}

/// Reads the header; `None` if the file carries no swap signature.
pub fn read_swap_header(path: &Path) -> Result<Option<SwapHeader>> {
    let mut file = File::open(path).map_err(|e| Error::io("open", path, e))?;
    read_header_of(&mut file, path)
}

/// [`read_swap_header`] from an open file (read from its start); `path` names it in errors.
fn read_header_of(file: &mut File, path: &Path) -> Result<Option<SwapHeader>> {
    let page = nix::unistd::sysconf(nix::unistd::SysconfVar::PAGE_SIZE).ok().flatten().map_or(4096, |p| p as usize);
    let mut buffer = vec![0u8; page];
    let mut filled = 0;
    while filled < page {
        match file.read(&mut buffer[filled..]) {
            Ok(0) => return Ok(None),
            Ok(n) => filled += n,
            Err(e) => return Err(Error::io("read", path, e)),
        }
    }
    if &buffer[page - 10..] != b"SWAPSPACE2" {
        return Ok(None);
    }
    let uuid = format_uuid(buffer[1036..1052].try_into().expect("16 bytes"));
    let label_bytes = &buffer[1052..1068];
    let label = String::from_utf8_lossy(&label_bytes[..label_bytes.iter().position(|&b| b == 0).unwrap_or(16)]).into_owned();
    Ok(Some(SwapHeader { uuid, label }))
}

fn format_uuid(bytes: [u8; 16]) -> String {
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!("{}-{}-{}-{}-{}", &hex[0..8], &hex[8..12], &hex[12..16], &hex[16..20], &hex[20..32])
}

/// A random (version 4) UUID.
fn random_uuid() -> Result<String> {
    let mut bytes = [0u8; 16];
    File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut bytes)).map_err(|e| Error::io("read", Path::new("/dev/urandom"), e))?;
    bytes[6] = (bytes[6] & 0x0f) | 0x40;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    Ok(format_uuid(bytes))
}

/// Reserves the file's blocks. Swap needs real blocks (no holes): fallocate, or zeros where
/// the filesystem lacks it.
fn allocate(file: &File, path: &Path, size_bytes: u64, check: &dyn Fn() -> Result<()>) -> Result<()> {
    let len = i64::try_from(size_bytes).map_err(|_| Error::parse("swap size", "setup", "too large"))?;
    match nix::fcntl::fallocate(file, nix::fcntl::FallocateFlags::empty(), 0, len) {
        Ok(()) => {}
        Err(nix::errno::Errno::EOPNOTSUPP) => fill_zeros(&mut &*file, path, size_bytes, check)?,
        Err(e) => return Err(Error::io("allocate swapfile", path, e.into())),
    }
    file.sync_all().map_err(|e| Error::io("sync swapfile", path, e))
}

/// Writes `size_bytes` of zeros in 1 MiB chunks, asking `check` before each (a slow disk can
/// take minutes for a few GiB).
fn fill_zeros(writer: &mut impl Write, path: &Path, size_bytes: u64, check: &dyn Fn() -> Result<()>) -> Result<()> {
    let zeros = vec![0u8; 1 << 20];
    let mut left = size_bytes;
    while left > 0 {
        check()?;
        let n = left.min(zeros.len() as u64) as usize;
        writer.write_all(&zeros[..n]).map_err(|e| Error::io("fill swapfile", path, e))?;
        left -= n as u64;
    }
    Ok(())
}

/// util-linux tools live in sbin, which a non-login PATH may lack.
fn tool(name: &str) -> PathBuf {
    for dir in ["/usr/sbin", "/sbin", "/usr/bin", "/bin"] {
        let candidate = Path::new(dir).join(name);
        if candidate.exists() {
            return candidate;
        }
    }
    PathBuf::from(name)
}

fn run(name: &str, args: &[&str]) -> Result<()> {
    let output = Command::new(tool(name)).args(args).output().map_err(|e| Error::io("run", Path::new(name), e))?;
    if output.status.success() {
        Ok(())
    } else {
        Err(Error::Command {
            command: format!("{name} {}", args.join(" ")),
            status: output.status.to_string(),
            stderr: String::from_utf8_lossy(&output.stderr).trim().to_owned(),
        })
    }
}

/// swapoff, retried for a few seconds: it fails with ENOMEM while a swapped page cannot yet be
/// charged back to its memory cgroup (one just removed, still being torn down at its limit);
/// seen once right after a run's cgroups went away, and a retry a moment later succeeds.
fn swapoff_with_retries(path: &Path) -> Result<()> {
    let mut attempts = 0;
    loop {
        match run("swapoff", &[&path.to_string_lossy()]) {
            Ok(()) => return Ok(()),
            Err(e @ Error::Command { .. }) if attempts < 10 => {
                attempts += 1;
                tracing::warn!(path = %path.display(), error = %e, attempts, "swapoff failed; retrying");
                std::thread::sleep(std::time::Duration::from_millis(500));
            }
            Err(e) => return Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::os::unix::fs::PermissionsExt;

    const SWAPS: &str = "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n/dev/vdb                                partition\t1048572\t\t0\t\t-2\n/var/lib/my\\040swap                     file\t\t65532\t\t1024\t\t-3\n";

    #[test]
    fn proc_swaps_is_parsed() {
        let entries = parse_proc_swaps(SWAPS).unwrap();
        assert_eq!(entries.len(), 2);
        assert_eq!(
            entries[1],
            SwapEntry {
                path: "/var/lib/my swap".into(),
                kind: "file".into(),
                size_bytes: 65532 * 1024,
                used_bytes: 1024 * 1024,
                priority: -3
            }
        );
        assert!(parse_proc_swaps("Filename Type Size Used Priority\n").unwrap().is_empty());
        assert!(parse_proc_swaps("Filename Type Size Used Priority\n/x file 1 2\n").is_err());
        assert!(parse_proc_swaps("/x file big 2 -1\n").is_err());
    }

    /// One `/proc/swaps` line as mm/swapfile.c prints it: the path escaped (` \t\n\\`) and
    /// padded to 40 columns, then `%s\t%lu\t%s%lu\t%s%d`, with tabs that depend on the widths.
    fn swaps_line(path: &str, partition: bool, size_kib: u64, used_kib: u64, priority: i32) -> String {
        let escaped: String = path
            .chars()
            .map(|c| if matches!(c, ' ' | '\t' | '\n' | '\\') { format!("\\{:03o}", c as u32) } else { c.to_string() })
            .collect();
        let pad = if escaped.len() < 40 { 40 - escaped.len() } else { 1 };
        let tab = |kib: u64| if kib < 10_000_000 { "\t" } else { "" };
        let kind = if partition { "partition" } else { "file\t" };
        format!("{escaped}{:pad$}{kind}\t{size_kib}\t{}{used_kib}\t{}{priority}\n", "", tab(size_kib), tab(used_kib))
    }

    /// Mostly sizes that fit in bytes, sometimes any u64.
    fn kib() -> impl Strategy<Value = u64> {
        prop_oneof![4 => 0..=u64::MAX / 1024, 1 => any::<u64>()]
    }

    proptest! {
        #[test]
        fn proc_swaps_never_panics_on_arbitrary_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
            let _ = parse_proc_swaps(&String::from_utf8_lossy(&bytes));
        }

        /// Missing and extra fields, sizes that overflow u64 (or only once in bytes), signs.
        #[test]
        fn proc_swaps_never_panics_on_swaps_like_text(text in r"(Filename\tType\n)?(([ \t]{0,3}(/[a-z\\0-7]{0,6}|file|partition|(-|\+)?[0-9]{0,22})){0,6}[ \t]{0,2}\r?\n){0,5}") {
            let _ = parse_proc_swaps(&text);
        }

        /// Any sizes in KiB: the entry has them in bytes, or the line is refused if that
        /// overflows (the kernel never prints such sizes).
        #[test]
        fn proc_swaps_parse_back(
            entries in proptest::collection::vec(
                (prop_oneof![r"/[^\n]{0,50}", r"/[a-z \t\\\r\u{a0}]{0,10}"], any::<bool>(), kib(), kib(), any::<i32>()),
                0..6,
            ),
        ) {
            let mut text = "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n".to_owned();
            for (path, partition, size, used, priority) in &entries {
                text.push_str(&swaps_line(path, *partition, *size, *used, *priority));
            }
            let want: Option<Vec<SwapEntry>> = entries
                .into_iter()
                .map(|(path, partition, size, used, priority)| {
                    Some(SwapEntry {
                        path: PathBuf::from(path),
                        kind: if partition { "partition" } else { "file" }.into(),
                        size_bytes: size.checked_mul(1024)?,
                        used_bytes: used.checked_mul(1024)?,
                        priority,
                    })
                })
                .collect();
            let parsed = parse_proc_swaps(&text);
            match want {
                Some(want) => prop_assert_eq!(parsed.map_err(|e| e.to_string()), Ok(want)),
                None => prop_assert!(parsed.is_err()),
            }
        }
    }

    /// Found by `proc_swaps_parse_back`: a size of 2^54 KiB wrapped to 0 bytes in release
    /// builds (and panicked with overflow checks on).
    #[test]
    fn sizes_that_overflow_in_bytes_are_refused() {
        let err = parse_proc_swaps("/ file 0 18014398509481984 0\n").unwrap_err();
        assert!(err.to_string().contains("too large"), "{err}");
        let max = u64::MAX / 1024;
        assert_eq!(parse_proc_swaps(&format!("/ file {max} 0 0\n")).unwrap()[0].size_bytes, max * 1024);
    }

    /// Found by `proc_swaps_parse_back`: a swapfile path with a raw `\r` or non-ASCII space
    /// (left unescaped by the kernel) was split, so the line was refused.
    #[test]
    fn unescaped_unicode_and_control_spaces_stay_in_the_path() {
        let line = "/\\040\u{a0}\rh\\011\r\r\\134                     file\t\t892543749749865\t1038264307669117\t1000271153\n";
        let entries = parse_proc_swaps(line).unwrap();
        assert_eq!(entries[0].path, PathBuf::from("/ \u{a0}\rh\t\r\r\\"));
        assert_eq!((entries[0].size_bytes, entries[0].priority), (892_543_749_749_865 * 1024, 1_000_271_153));
    }

    fn manager(dir: &Path, swaps: &str) -> SwapManager {
        let proc = dir.join("proc");
        std::fs::create_dir_all(&proc).unwrap();
        std::fs::write(proc.join("swaps"), swaps).unwrap();
        SwapManager::new(dir.join("state/swap.json"), proc)
    }

    /// A file with a swap header as mkswap writes it.
    fn fake_swapfile(path: &Path, uuid: [u8; 16], label: &str) {
        let mut page = vec![0u8; 4096];
        page[1036..1052].copy_from_slice(&uuid);
        page[1052..1052 + label.len()].copy_from_slice(label.as_bytes());
        page[4086..].copy_from_slice(b"SWAPSPACE2");
        std::fs::write(path, page).unwrap();
    }

    #[test]
    fn swap_header_label_and_uuid_are_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("swapfile");
        fake_swapfile(&path, [0x12; 16], "critmem-swap");
        assert_eq!(
            read_swap_header(&path).unwrap(),
            Some(SwapHeader { uuid: "12121212-1212-1212-1212-121212121212".into(), label: "critmem-swap".into() })
        );
        std::fs::write(&path, vec![0u8; 8192]).unwrap();
        assert_eq!(read_swap_header(&path).unwrap(), None);
    }

    #[test]
    fn teardown_without_state_does_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let manager = manager(dir.path(), SWAPS);
        assert_eq!(manager.teardown().unwrap(), None);
    }

    /// The bytes of a `SwapState` UUID, as mkswap writes them into the header.
    fn uuid_bytes(uuid: &str) -> [u8; 16] {
        let hex: String = uuid.chars().filter(|c| *c != '-').collect();
        std::array::from_fn(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap())
    }

    #[test]
    fn teardown_refuses_a_file_whose_header_is_not_ours() {
        let dir = tempfile::tempdir().unwrap();
        let manager = manager(dir.path(), SWAPS);
        let path = dir.path().join("swapfile");
        fake_swapfile(&path, [0x34; 16], "someone-else");
        let file = Some(FileIdentity::of(&std::fs::metadata(&path).unwrap()));
        let state = SwapState {
            v: 1,
            path: path.clone(),
            size_bytes: 4096,
            uuid: "12121212-1212-1212-1212-121212121212".into(),
            label: SWAP_LABEL.into(),
            file,
            created_dirs: Vec::new(),
        };
        manager.write_state(&state).unwrap();
        let err = manager.teardown().unwrap_err();
        assert!(err.to_string().contains("is not the one critmem wrote"), "{err}");
        assert!(path.exists(), "the file must be left alone");
    }

    #[test]
    fn teardown_cleans_up_after_a_setup_that_died_before_mkswap() {
        let dir = tempfile::tempdir().unwrap();
        let manager = manager(dir.path(), SWAPS);
        let path = dir.path().join("swapfile");
        let (_file, state) = manager.create_recorded(&path, 8192, Vec::new()).unwrap();
        assert_eq!(manager.state().unwrap(), Some(state));
        assert_eq!(read_swap_header(&path).unwrap(), None);
        assert_eq!(manager.teardown().unwrap(), Some(path.clone()));
        assert!(!path.exists());
        assert_eq!(manager.state().unwrap(), None);
    }

    /// Setup as far as it goes without the real mkswap and swapon (a header written in place
    /// stands in for mkswap), then teardown: the swapfile and the state are gone.
    #[test]
    fn teardown_removes_the_swapfile_setup_created_and_its_state() {
        let dir = tempfile::tempdir().unwrap();
        let manager = manager(dir.path(), SWAPS);
        let path = dir.path().join("swapfile");
        let (_file, state) = manager.create_recorded(&path, 1 << 20, Vec::new()).unwrap();
        fake_swapfile(&path, uuid_bytes(&state.uuid), SWAP_LABEL);
        let recorded = manager.state().unwrap().unwrap();
        assert_eq!(recorded.file, Some(FileIdentity::of(&std::fs::metadata(&path).unwrap())));
        let state_mode = std::fs::metadata(dir.path().join("state/swap.json")).unwrap().permissions().mode() & 0o777;
        assert_eq!(state_mode, 0o600);
        let state_dir: Vec<_> = std::fs::read_dir(dir.path().join("state")).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(state_dir, ["swap.json"], "no temporary state left behind");

        assert_eq!(manager.teardown().unwrap(), Some(path.clone()));
        assert!(!path.exists());
        assert_eq!(manager.state().unwrap(), None);
        assert_eq!(manager.teardown().unwrap(), None);
    }

    /// A setup that crashed after recording the state but before creating the file, then
    /// someone else's file at that path: it must not be deleted (no swap header, not active).
    #[test]
    fn teardown_refuses_a_file_created_at_the_path_after_setup_crashed_before_creating_its_own() {
        let dir = tempfile::tempdir().unwrap();
        let manager = manager(dir.path(), SWAPS);
        let path = dir.path().join("swapfile");
        let state = SwapState {
            v: 1,
            path: path.clone(),
            size_bytes: 1 << 20,
            uuid: random_uuid().unwrap(),
            label: SWAP_LABEL.into(),
            file: None,
            created_dirs: Vec::new(),
        };
        manager.write_state(&state).unwrap();
        std::fs::write(&path, "someone else's data").unwrap();
        let err = manager.teardown().unwrap_err().to_string();
        assert!(err.contains("remove it by hand") && err.contains("state/swap.json"), "{err}");
        assert!(!err.contains('\n'), "one line: {err}");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "someone else's data");
        assert_eq!(manager.state().unwrap(), Some(state), "the state stays until the user has checked");
    }

    /// Someone replaced critmem's swapfile with another file carrying the same header (a copy,
    /// say): the header matches but it is not the file setup created.
    #[test]
    fn teardown_refuses_a_swapfile_replaced_by_another_with_our_header() {
        let dir = tempfile::tempdir().unwrap();
        let manager = manager(dir.path(), SWAPS);
        let path = dir.path().join("swapfile");
        let (_file, state) = manager.create_recorded(&path, 1 << 20, Vec::new()).unwrap();
        fake_swapfile(&path, uuid_bytes(&state.uuid), SWAP_LABEL);
        let copy = dir.path().join("copy");
        fake_swapfile(&copy, uuid_bytes(&state.uuid), SWAP_LABEL);
        std::fs::rename(&copy, &path).unwrap();
        assert_eq!(read_swap_header(&path).unwrap().map(|h| h.uuid), Some(state.uuid.clone()));

        let err = manager.teardown().unwrap_err().to_string();
        assert!(err.contains("not the file critmem created"), "{err}");
        assert!(path.exists(), "the file must be left alone");
        assert_eq!(manager.state().unwrap(), Some(state));
    }

    #[test]
    fn a_state_written_before_file_identities_were_recorded_still_reads() {
        let dir = tempfile::tempdir().unwrap();
        let manager = manager(dir.path(), SWAPS);
        let path = dir.path().join("swapfile");
        std::fs::create_dir_all(dir.path().join("state")).unwrap();
        let old = format!(
            r#"{{"v": 1, "path": {:?}, "size_bytes": 1048576, "uuid": "12121212-1212-1212-1212-121212121212", "label": "critmem-swap"}}"#,
            path.display().to_string()
        );
        std::fs::write(dir.path().join("state/swap.json"), old).unwrap();
        assert_eq!(manager.state().unwrap().map(|s| s.file), Some(None));
        // No file at the path: nothing to protect, so the state goes.
        assert_eq!(manager.teardown().unwrap(), Some(path));
        assert_eq!(manager.state().unwrap(), None);
    }

    #[test]
    fn file_identity_needs_the_same_inode_and_birth_time() {
        let created = FileIdentity { dev: 2049, ino: 77, birth_ns: Some(1_700_000_000_000_000_000) };
        assert!(created.is(&created));
        assert!(!created.is(&FileIdentity { ino: 78, ..created }));
        assert!(
            !created.is(&FileIdentity { birth_ns: Some(1_700_000_000_000_000_001), ..created }),
            "an inode number reused by a newer file"
        );
        assert!(created.is(&FileIdentity { dev: 2050, ..created }), "device numbers may change across a reboot");
        assert!(!created.is(&FileIdentity { dev: 2050, birth_ns: None, ..created }), "without birth times the device must match");
        assert!(FileIdentity { birth_ns: None, ..created }.is(&created));
    }

    #[test]
    fn setup_refuses_existing_files_and_tiny_sizes() {
        let dir = tempfile::tempdir().unwrap();
        let manager = manager(dir.path(), SWAPS);
        let existing = dir.path().join("data");
        std::fs::write(&existing, "precious").unwrap();
        assert!(manager.setup(&existing, 64 << 20).is_err());
        assert_eq!(std::fs::read_to_string(&existing).unwrap(), "precious");
        assert!(manager.setup(&dir.path().join("new"), 4096).is_err());
        assert_eq!(manager.state().unwrap(), None);
    }

    /// The state names the file teardown deletes, so a state where others could have put it is
    /// not acted on: setup refuses to record one there, teardown to follow one found there.
    #[test]
    fn a_state_in_a_directory_others_can_write_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let shared = dir.path().join("shared");
        std::fs::create_dir(&shared).unwrap();
        std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o1777)).unwrap();
        let proc = dir.path().join("proc");
        std::fs::create_dir_all(&proc).unwrap();
        std::fs::write(proc.join("swaps"), SWAPS).unwrap();
        let manager = SwapManager::new(shared.join("swap.json"), proc);
        let path = dir.path().join("swapfile");
        let err = manager.setup(&path, 1 << 20).unwrap_err().to_string();
        assert!(err.starts_with("swap state ") && err.contains("writable by no one else (owner"), "{err}");
        assert!(!path.exists() && !shared.join("swap.json").exists());

        // A planted state naming a file with critmem's header: teardown leaves both alone.
        let planted = dir.path().join("precious");
        fake_swapfile(&planted, uuid_bytes("a3c6e4a0-0b1c-4d2e-8f3a-5b6c7d8e9f00"), SWAP_LABEL);
        let state = SwapState {
            v: 1,
            path: planted.clone(),
            size_bytes: 4096,
            uuid: "a3c6e4a0-0b1c-4d2e-8f3a-5b6c7d8e9f00".into(),
            label: SWAP_LABEL.into(),
            file: None,
            created_dirs: Vec::new(),
        };
        std::fs::write(shared.join("swap.json"), serde_json::to_string(&state).unwrap()).unwrap();
        let err = manager.teardown().unwrap_err().to_string();
        assert!(err.contains("writable by no one else"), "{err}");
        assert!(planted.exists() && shared.join("swap.json").exists());
    }

    /// A signal seen at any step before swapon (the k-th time setup asks) stops setup, and it
    /// leaves neither the file nor the state behind. (Past swapon needs root and real swap.)
    #[test]
    fn a_signal_during_setup_removes_what_it_made() {
        for k in 0..3 {
            let dir = tempfile::tempdir().unwrap();
            let manager = manager(dir.path(), SWAPS);
            let path = dir.path().join("swapfile");
            let asked = std::cell::Cell::new(0);
            let stop = || {
                asked.set(asked.get() + 1);
                (asked.get() > k).then(|| "SIGTERM".to_string())
            };
            let err = manager.setup_unless(&path, 1 << 20, &stop).unwrap_err().to_string();
            assert_eq!(err, "swap setup stopped by SIGTERM: the half-made swapfile and its state were removed", "k = {k}");
            assert!(!path.exists(), "k = {k}");
            assert_eq!(manager.state().unwrap(), None, "k = {k}");
            assert!(!dir.path().join("state").exists(), "k = {k}: no temporary state, and not the state directory setup made");
        }
    }

    /// Where fallocate is missing, the zero fill stops at the next 1 MiB chunk once asked to.
    #[test]
    fn the_zero_fill_stops_between_chunks() {
        let mut written = Vec::new();
        let asked = std::cell::Cell::new(0);
        let check = || {
            asked.set(asked.get() + 1);
            if asked.get() > 2 {
                return Err(Error::SwapSetupInterrupted { signal: "SIGINT".into(), outcome: String::new() });
            }
            Ok(())
        };
        let err = fill_zeros(&mut written, Path::new("x"), 5 << 20, &check).unwrap_err();
        assert!(matches!(err, Error::SwapSetupInterrupted { .. }));
        assert_eq!(written.len(), 2 << 20, "two chunks, then it stopped");
        let mut all = Vec::new();
        fill_zeros(&mut all, Path::new("x"), (3 << 20) + 5, &|| Ok(())).unwrap();
        assert!(all.len() == (3 << 20) + 5 && all.iter().all(|b| *b == 0));
    }

    #[test]
    fn uuids_are_version_4() {
        let uuid = random_uuid().unwrap();
        assert_eq!(uuid.len(), 36);
        assert_eq!(&uuid[14..15], "4");
    }
}
