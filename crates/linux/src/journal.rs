//! The restore journal: every cgroup file the agent changes gets its original value written to
//! disk first, so the machine can be put back as it was on shutdown, and on the next start
//! after a crash (`kill -9`, power loss).
//!
//! Format: one JSON object per line, appended and fsynced before the change it describes:
//!
//! ```text
//! {"v":1,"op":"original","path":"/sys/fs/cgroup/memory/db/memory.limit_in_bytes","value":"9223372036854771712"}
//! {"v":1,"op":"created","dir":"/sys/fs/cgroup/memory/critmem/rt","evacuate_to":"/sys/fs/cgroup/memory"}
//! {"v":1,"op":"abandoned","dir":"/sys/fs/cgroup/memory/critmem/rt"}
//! {"v":1,"op":"released","path":"/sys/fs/cgroup/memory/db/memory.limit_in_bytes"}
//! ```
//!
//! `original` is recorded once per file (the value before the agent's first change);
//! `created` before a mkdir (`abandoned` if the mkdir then failed); `released` once a group
//! leaves a running agent's care ([`Journal::release_within`]): its files were put back and
//! its created directories removed, so the entries before it for that path are done. Files inside directories
//! the agent created are not recorded: the directories are removed on restore.
//!
//! Restoring undoes the entries newest first: originals are written back (for
//! `cgroup.subtree_control`, as the `+ctrl`/`-ctrl` difference; for per-disk rule files such as
//! `io.max`, one rule per disk, removing those of disks that had none), and created directories are
//! emptied (their processes moved to `evacuate_to`) and removed. An exclusive `flock` on the
//! journal keeps two agents from sharing one.

use crate::cgroup::{self, Change, FileWrite};
use crate::durable::{remove_stale_temporary, replace_atomically, sync_parent};
use crate::error::{Error, Result};
use nix::fcntl::{Flock, FlockArg};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

const VERSION: u32 = 1;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
enum Entry {
    Original { v: u32, path: PathBuf, value: String },
    Created { v: u32, dir: PathBuf, evacuate_to: PathBuf },
    Abandoned { v: u32, dir: PathBuf },
    Released { v: u32, path: PathBuf },
}

impl Entry {
    fn version(&self) -> u32 {
        match self {
            Entry::Original { v, .. } | Entry::Created { v, .. } | Entry::Abandoned { v, .. } | Entry::Released { v, .. } => *v,
        }
    }
}

/// What a restore did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RestoreReport {
    /// Files written back to their original value.
    pub restored: Vec<PathBuf>,
    /// Directories the agent had created, now removed.
    pub removed_dirs: Vec<PathBuf>,
    /// Processes moved out of removed directories.
    pub evacuated_pids: Vec<u32>,
    /// Files or directories that were already gone (someone removed the group).
    pub gone: Vec<PathBuf>,
    /// What could not be restored, one line each.
    pub failures: Vec<String>,
    /// Journal lines that could not be read (a line torn by a crash mid-append, or garbage).
    pub skipped_lines: usize,
}

/// An open journal; see the module documentation.
#[derive(Debug)]
pub struct Journal {
    path: PathBuf,
    file: Flock<File>,
    recorded: BTreeSet<PathBuf>,
    created: BTreeSet<PathBuf>,
    /// Directories [`Journal::open`] made for the journal (outermost first), removed again
    /// with it when they are empty.
    made_dirs: Vec<PathBuf>,
}

impl Journal {
    /// Opens (creating) the journal at `path` and takes its lock. If it holds entries, a
    /// previous run did not shut down cleanly: they are restored first and the report returned.
    /// A restore with failures leaves the journal in place and fails, so nothing is lost.
    pub fn open(path: &Path) -> Result<(Journal, Option<RestoreReport>)> {
        let made_dirs = crate::durable::make_missing_dirs(path, "create journal directory")?;
        let opened = Self::open_in_place(path);
        if opened.is_err() {
            crate::durable::remove_empty_dirs(&made_dirs);
        }
        let (mut journal, report) = opened?;
        journal.made_dirs = made_dirs;
        Ok((journal, report))
    }

    fn open_in_place(path: &Path) -> Result<(Journal, Option<RestoreReport>)> {
        check_directory(path)?;
        let mut file = lock_file_at(path)?;
        sync_parent(path)?;
        let mut text = String::new();
        file.rewind().and_then(|()| file.read_to_string(&mut text)).map_err(|e| Error::io("read journal", path, e))?;
        let report = if text.trim().is_empty() {
            None
        } else {
            check_is_journal(&text, path)?;
            tracing::warn!(journal = %path.display(), "journal from a previous run found: it did not shut down cleanly; restoring its changes");
            let (report, kept) = restore_entries(&text, path);
            if !report.failures.is_empty() {
                rewrite(path, &kept)?;
                return Err(Error::Journal {
                    path: path.to_owned(),
                    reason: format!(
                        "restoring a previous run's changes failed: {}; fix these by hand, then delete the journal",
                        report.failures.join("; ")
                    ),
                });
            }
            file.set_len(0).and_then(|()| file.sync_all()).map_err(|e| Error::io("truncate journal", path, e))?;
            Some(report)
        };
        // The lock makes the journal, now known to be one, this process's, and with it the
        // rewrite's temporary file.
        remove_stale_temporary(path);
        Ok((Journal { path: path.to_owned(), file, recorded: BTreeSet::new(), created: BTreeSet::new(), made_dirs: Vec::new() }, report))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Records what is needed to undo `change`, before it is made. Use this when the change
    /// itself goes through the off-thread writer; otherwise [`Journal::perform`].
    pub fn record(&mut self, change: &Change) -> Result<()> {
        match change {
            Change::Write(write) => self.record_write(write),
            Change::Mkdir { dir, evacuate_to } => {
                if dir.exists() || self.created.contains(dir) {
                    return Ok(());
                }
                self.append(&Entry::Created { v: VERSION, dir: dir.clone(), evacuate_to: evacuate_to.clone() })?;
                self.created.insert(dir.clone());
                Ok(())
            }
        }
    }

    /// Records and then makes `change` on the calling thread.
    pub fn perform(&mut self, change: &Change) -> Result<()> {
        self.record(change)?;
        let result = change.perform();
        if let (Err(_), Change::Mkdir { dir, .. }) = (&result, change) {
            if !dir.exists() && self.created.remove(dir) {
                self.append(&Entry::Abandoned { v: VERSION, dir: dir.clone() })?;
            }
        }
        result
    }

    fn record_write(&mut self, write: &FileWrite) -> Result<()> {
        let inside_created = write.path.parent().is_some_and(|dir| self.created.contains(dir));
        if !write.restorable || inside_created || self.recorded.contains(&write.path) {
            return Ok(());
        }
        let value = std::fs::read_to_string(&write.path).map_err(|e| Error::io("read original value of", &write.path, e))?;
        self.append(&Entry::Original { v: VERSION, path: write.path.clone(), value: value.trim().to_owned() })?;
        self.recorded.insert(write.path.clone());
        Ok(())
    }

    fn append(&mut self, entry: &Entry) -> Result<()> {
        let mut line = serde_json::to_string(entry)
            .map_err(|e| Error::Journal { path: self.path.clone(), reason: format!("cannot encode entry: {e}") })?;
        line.push('\n');
        // One write per line keeps a crash from interleaving; fsync makes it durable before
        // the change it guards is made.
        self.file
            .write_all(line.as_bytes())
            .and_then(|()| self.file.sync_data())
            .map_err(|source| Error::JournalWrite { path: self.path.clone(), source })
    }

    /// Restores what is recorded for files and directories within `dirs` (a group leaving
    /// the agent's care while it runs), newest first, and journals them as released so no
    /// later restore undoes them again. What could not be restored stays recorded (the
    /// shutdown's restore tries again). A crash before the release entry is written only
    /// makes the next start restore the same originals once more.
    pub fn release_within(&mut self, dirs: &[PathBuf]) -> Result<RestoreReport> {
        let mut text = String::new();
        self.file.rewind().and_then(|()| self.file.read_to_string(&mut text)).map_err(|e| Error::io("read journal", &self.path, e))?;
        let within = |path: &Path| dirs.iter().any(|d| path.starts_with(d));
        let mut report = RestoreReport::default();
        let mut ignored = Vec::new();
        let entries = live_entries(parse_entries(&text, &self.path, &mut report, &mut ignored));
        let subset: String = entries
            .iter()
            .filter(|(e, _)| match e {
                Entry::Original { path, .. } => within(path),
                Entry::Created { dir, .. } | Entry::Abandoned { dir, .. } => within(dir),
                Entry::Released { .. } => false,
            })
            .map(|(_, line)| format!("{line}\n"))
            .collect();
        let (report, kept) = restore_entries(&subset, &self.path);
        let failed: BTreeSet<&str> = kept.into_iter().collect();
        for line in subset.lines().filter(|l| !failed.contains(l)) {
            let path = match serde_json::from_str::<Entry>(line) {
                Ok(Entry::Original { path, .. }) => path,
                Ok(Entry::Created { dir, .. }) => dir,
                _ => continue,
            };
            self.append(&Entry::Released { v: VERSION, path: path.clone() })?;
            self.recorded.remove(&path);
            self.created.remove(&path);
        }
        self.compact()?;
        Ok(report)
    }

    /// Rewrites the journal with only what a restore would still do (released entries and
    /// those they finished dropped; lines of unknown versions kept), so groups coming and going
    /// do not grow it. The new file is locked before it is renamed over the path: no other
    /// process can take the journal in between. A crash leaves the old file or the new one.
    fn compact(&mut self) -> Result<()> {
        let mut text = String::new();
        self.file.rewind().and_then(|()| self.file.read_to_string(&mut text)).map_err(|e| Error::io("read journal", &self.path, e))?;
        let mut report = RestoreReport::default();
        let mut kept = Vec::new();
        let live = live_entries(parse_entries(&text, &self.path, &mut report, &mut kept));
        let lines: String = kept.iter().copied().chain(live.iter().map(|(_, line)| *line)).map(|l| format!("{l}\n")).collect();
        if lines.len() == text.len() {
            return Ok(());
        }
        let temp = crate::durable::temporary_for(&self.path);
        match std::fs::remove_file(&temp) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(Error::io("remove temporary file", &temp, e)),
        }
        let file = OpenOptions::new()
            .read(true)
            .append(true)
            .create_new(true)
            .mode_0600()
            .open(&temp)
            .map_err(|e| Error::io("create temporary file", &temp, e))?;
        let mut file = Flock::lock(file, FlockArg::LockExclusiveNonblock)
            .map_err(|(_, errno)| Error::io("lock temporary file", &temp, std::io::Error::from(errno)))?;
        file.write_all(lines.as_bytes())
            .and_then(|()| file.sync_data())
            .map_err(|source| Error::JournalWrite { path: temp.clone(), source })?;
        std::fs::rename(&temp, &self.path).map_err(|e| Error::io("replace journal", &self.path, e))?;
        sync_parent(&self.path)?;
        self.file = file;
        Ok(())
    }

    /// Restores everything recorded (newest first), then deletes the journal. If something
    /// could not be restored the journal keeps only that, so the next start tries again
    /// without undoing what was restored (and maybe changed by someone since).
    pub fn restore_all(self) -> Result<RestoreReport> {
        let mut text = String::new();
        let mut file = self.file;
        file.rewind().and_then(|()| file.read_to_string(&mut text)).map_err(|e| Error::io("read journal", &self.path, e))?;
        let (report, kept) = restore_entries(&text, &self.path);
        if report.failures.is_empty() {
            std::fs::remove_file(&self.path).map_err(|source| Error::JournalLeft { path: self.path.clone(), source })?;
            sync_parent(&self.path)?;
            crate::durable::remove_empty_dirs(&self.made_dirs);
        } else {
            rewrite(&self.path, &kept)?;
        }
        Ok(report)
    }
}

trait Mode0600 {
    fn mode_0600(&mut self) -> &mut Self;
}

impl Mode0600 for OpenOptions {
    /// The journal names every file the agent touches: root-only. Not through a symlink: the
    /// journal is truncated, so it must be the file named.
    fn mode_0600(&mut self) -> &mut Self {
        use std::os::unix::fs::OpenOptionsExt;
        self.mode(0o600).custom_flags(nix::libc::O_NOFOLLOW)
    }
}

fn check_directory(path: &Path) -> Result<()> {
    match crate::durable::unsafe_location(path) {
        Some(reason) => Err(Error::Journal { path: path.to_owned(), reason }),
        None => Ok(()),
    }
}

/// Refuses a file that is not a journal (a mistyped path must not be emptied): every line
/// must be an entry, except a last one torn by a crash mid-append.
fn check_is_journal(text: &str, path: &Path) -> Result<()> {
    let lines: Vec<(usize, &str)> = text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()).collect();
    for (i, &(index, line)) in lines.iter().enumerate() {
        let last = i + 1 == lines.len();
        let is_entry = serde_json::from_str::<serde_json::Value>(line).is_ok_and(|v| v.get("op").is_some() && v.get("v").is_some());
        let torn = last && line.starts_with('{');
        if !(is_entry || torn) {
            return Err(Error::Journal {
                path: path.to_owned(),
                reason: format!(
                    "line {} is not a journal entry: this is not a critmem journal; refusing to restore from or overwrite it",
                    index + 1
                ),
            });
        }
    }
    Ok(())
}

/// Opens (creating) the file at `path` and takes its exclusive lock. A rewrite by the previous
/// owner renames a new file over the path while still locking the old one, so a lock taken on
/// the file just opened may be on one the path no longer names: then it tries again.
fn lock_file_at(path: &Path) -> Result<Flock<File>> {
    for _ in 0..8 {
        let file = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .mode_0600()
            .open(path)
            .map_err(|e| Error::io("open journal", path, e))?;
        let file = Flock::lock(file, FlockArg::LockExclusiveNonblock).map_err(|(_, errno)| Error::Journal {
            path: path.to_owned(),
            reason: format!(
                "cannot lock it ({errno}): another critmem process (an agent or a loop bench) is running with this journal; stop it first"
            ),
        })?;
        if path_names(path, &file)? {
            return Ok(file);
        }
    }
    Err(Error::Journal { path: path.to_owned(), reason: "it keeps being replaced while critmem locks it: is another critmem process (an agent or a loop bench) starting with this journal?".into() })
}

/// Whether `path` (not following a symlink) is the open `file`.
fn path_names(path: &Path, file: &File) -> Result<bool> {
    let open = file.metadata().map_err(|e| Error::io("stat journal", path, e))?;
    match std::fs::symlink_metadata(path) {
        Ok(at_path) => Ok((at_path.dev(), at_path.ino()) == (open.dev(), open.ino())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(Error::io("stat journal", path, e)),
    }
}

/// Replaces the journal at `path` with `lines` (newline-terminated) atomically. Used only on
/// the way out (the lock stays with the replaced file).
fn rewrite(path: &Path, lines: &[&str]) -> Result<()> {
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    replace_atomically(path, text.as_bytes())
}

/// The entries of a journal, each with its line; lines of an unknown version are returned in
/// `unknown` (kept if the journal is rewritten: a newer critmem may restore them).
fn parse_entries<'t>(text: &'t str, path: &Path, report: &mut RestoreReport, unknown: &mut Vec<&'t str>) -> Vec<(Entry, &'t str)> {
    let mut entries = Vec::new();
    for (index, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<Entry>(line) {
            Ok(entry) if entry.version() == VERSION => entries.push((entry, line)),
            Ok(entry) => {
                tracing::warn!(journal = %path.display(), line = index + 1, version = entry.version(), "journal entry of an unknown version skipped");
                report.skipped_lines += 1;
                unknown.push(line);
            }
            Err(e) => {
                tracing::warn!(journal = %path.display(), line = index + 1, error = %e, "unreadable journal line skipped");
                report.skipped_lines += 1;
            }
        }
    }
    entries
}

/// `entries` without those a later `released` entry has done (and without the `released`
/// entries themselves), in journal order.
fn live_entries(entries: Vec<(Entry, &str)>) -> Vec<(Entry, &str)> {
    let mut released = BTreeSet::new();
    let mut live = Vec::with_capacity(entries.len());
    for (entry, line) in entries.into_iter().rev() {
        match &entry {
            Entry::Released { path, .. } => {
                released.insert(path.clone());
                continue;
            }
            Entry::Original { path, .. } if released.remove(path) => continue,
            Entry::Created { dir, .. } if released.remove(dir) => continue,
            Entry::Abandoned { dir, .. } if released.contains(dir) => continue,
            _ => {}
        }
        live.push((entry, line));
    }
    live.reverse();
    live
}

/// Undoes the entries of `text`, newest first. Returns the report and the lines to keep
/// for another try: entries that failed (in journal order) and lines of unknown versions.
fn restore_entries<'t>(text: &'t str, path: &Path) -> (RestoreReport, Vec<&'t str>) {
    let mut report = RestoreReport::default();
    let mut kept = Vec::new();
    let entries = live_entries(parse_entries(text, path, &mut report, &mut kept));
    let mut failed = vec![false; entries.len()];
    for (index, (entry, _)) in entries.iter().enumerate().rev() {
        let failures_before = report.failures.len();
        match entry {
            Entry::Original { path, value, .. } => restore_original(path, value, &mut report),
            Entry::Created { dir, evacuate_to, .. } => {
                let abandoned = entries.iter().any(|(e, _)| matches!(e, Entry::Abandoned { dir: d, .. } if d == dir));
                if !abandoned {
                    remove_created(dir, evacuate_to, &mut report);
                }
            }
            Entry::Abandoned { .. } | Entry::Released { .. } => {}
        }
        failed[index] = report.failures.len() > failures_before;
    }
    kept.extend(entries.iter().zip(failed).filter(|(_, failed)| *failed).map(|((_, line), _)| *line));
    (report, kept)
}

fn restore_original(path: &Path, original: &str, report: &mut RestoreReport) {
    if !path.exists() {
        report.gone.push(path.to_owned());
        return;
    }
    if cgroup::bandwidth::is_device_rules_file(path) {
        restore_device_rules(path, original, report);
        return;
    }
    let value = if path.file_name().is_some_and(|n| n == "cgroup.subtree_control") {
        // Writing the old list would not disable what was added; write the difference.
        match std::fs::read_to_string(path) {
            Ok(current) => subtree_control_diff(&current, original),
            Err(e) => {
                report.failures.push(format!("read {}: {e}", path.display()));
                return;
            }
        }
    } else if path.file_name().is_some_and(|n| n == "memory.oom_control") {
        // Reads show three `key value` lines; only `oom_kill_disable` can be written back.
        match crate::cgroup::parse_oom_state(original) {
            Some(state) => if state.kill_disabled { "1" } else { "0" }.to_owned(),
            None => {
                report.failures.push(format!("unreadable original of {}: {original:?}", path.display()));
                return;
            }
        }
    } else {
        original.to_owned()
    };
    if value.is_empty() {
        report.restored.push(path.to_owned());
        return;
    }
    if let Err(reason) = room_for_v2_max(path, &value) {
        report.failures.push(format!("left {} as it is: {reason}", path.display()));
        return;
    }
    match cgroup::write_value(path, &value) {
        Ok(()) => report.restored.push(path.to_owned()),
        Err(Error::GroupVanished { .. }) => report.gone.push(path.to_owned()),
        Err(e) => report.failures.push(format!("restore {} to {value:?}: {e}", path.display())),
    }
}

/// A per-disk rule file (`io.max`, v1 `blkio.throttle.*_bps_device`) reads as one line per disk
/// with a rule, and takes one rule per write: every disk's original rule is written back, and
/// rules of disks that had none are removed.
fn restore_device_rules(path: &Path, original: &str, report: &mut RestoreReport) {
    let current = match std::fs::read_to_string(path) {
        Ok(current) => current,
        Err(e) => {
            report.failures.push(format!("read {}: {e}", path.display()));
            return;
        }
    };
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
    for rule in cgroup::bandwidth::device_rules_restore(name, &current, original) {
        match cgroup::write_value(path, &rule) {
            Ok(()) => {}
            Err(Error::GroupVanished { .. }) => {
                report.gone.push(path.to_owned());
                return;
            }
            Err(e) => {
                report.failures.push(format!("restore {} to {rule:?}: {e}", path.display()));
                return;
            }
        }
    }
    report.restored.push(path.to_owned());
}

/// Before a cgroup v2 `memory.max` goes back to an original below what the group now uses
/// (it grew while critmem allowed more): the kernel would reclaim and then OOM-kill to meet
/// it, where v1 refuses with EBUSY. So the excess is reclaimed first (`memory.reclaim`, which
/// fails rather than kills), and if usage is still above the original the write is not made.
fn room_for_v2_max(path: &Path, original: &str) -> std::result::Result<(), String> {
    let Ok(original_bytes) = original.trim().parse::<u64>() else { return Ok(()) };
    let (Some(dir), true) = (path.parent(), path.file_name().is_some_and(|n| n == "memory.max")) else { return Ok(()) };
    let usage = || std::fs::read_to_string(dir.join("memory.current")).ok().and_then(|t| t.trim().parse::<u64>().ok());
    let Some(usage_bytes) = usage() else { return Ok(()) };
    if usage_bytes <= original_bytes {
        return Ok(());
    }
    let excess_bytes = usage_bytes - original_bytes;
    tracing::info!(path = %path.display(), usage_bytes, original_bytes, "reclaiming the group's excess before its memory.max goes back to the original");
    // EAGAIN when not all of it could be reclaimed: usage says how far it got.
    let _ = cgroup::write_value(&dir.join("memory.reclaim"), &excess_bytes.to_string());
    match usage() {
        Some(now) if now > original_bytes => Err(format!(
            "the group uses {now} bytes, above the original limit of {original_bytes}, and reclaim could not free the rest; writing it would make the kernel OOM-kill the group's tasks (free memory in the group, then start critmem again to finish the restore)"
        )),
        _ => Ok(()),
    }
}

/// The `+ctrl -ctrl` write that turns `current` into `original` (both space-separated lists).
fn subtree_control_diff(current: &str, original: &str) -> String {
    let current: BTreeSet<&str> = current.split_whitespace().collect();
    let original: BTreeSet<&str> = original.split_whitespace().collect();
    let disable = current.difference(&original).map(|c| format!("-{c}"));
    let enable = original.difference(&current).map(|c| format!("+{c}"));
    disable.chain(enable).collect::<Vec<_>>().join(" ")
}

fn remove_created(dir: &Path, evacuate_to: &Path, report: &mut RestoreReport) {
    if !dir.exists() {
        report.gone.push(dir.to_owned());
        return;
    }
    let procs = dir.join("cgroup.procs");
    let pids =
        std::fs::read_to_string(&procs).ok().and_then(|t| cgroup::parse_pids(&t, &procs.display().to_string()).ok()).unwrap_or_default();
    for pid in pids {
        match cgroup::write_value(&evacuate_to.join("cgroup.procs"), &pid.to_string()) {
            Ok(()) => report.evacuated_pids.push(pid),
            // The process exited meanwhile.
            Err(Error::WriteRejected { source, .. }) if source.raw_os_error() == Some(nix::libc::ESRCH) => {}
            Err(e) => report.failures.push(format!("move pid {pid} out of {}: {e}", dir.display())),
        }
    }
    match cgroup::remove_cgroup_dir(dir) {
        Ok(()) => report.removed_dirs.push(dir.to_owned()),
        Err(e) => report.failures.push(format!("remove {}: {e}", dir.display())),
    }
}

/// A directory that concurrent runs keep their journals in, made when the first run enters and
/// removed when the last one leaves it empty, so that runs leave nothing behind.
///
/// Each run holds a shared `flock` on the directory while it lives. Leaving, a run asks for an
/// exclusive lock without waiting: granted only when no other run holds it, and then the
/// directory is removed if empty (a journal that failed to restore keeps it). A run entering
/// while another removes the directory finds, once locked, that the path no longer names the
/// directory it opened, and makes it again. Create files in it only while entered.
#[derive(Debug)]
pub struct SharedJournalDir {
    path: PathBuf,
    /// Released after `drop` has run, so after the removal.
    lock: Flock<File>,
}

impl SharedJournalDir {
    /// Creates `path` (mode 0700, with its parents) if missing and enters it.
    pub fn enter(path: &Path) -> Result<Self> {
        use std::os::unix::fs::DirBuilderExt;
        // A directory removed between making and locking it is made again; only a run
        // leaving at that instant removes it, so a few tries suffice.
        for _ in 0..100 {
            // Owner-only: Journal::open refuses a directory that others can write.
            match std::fs::DirBuilder::new().recursive(true).mode(0o700).create(path) {
                Ok(()) => {}
                // Made by another run and removed again before std could see it was a directory.
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && std::fs::metadata(path).map_or(true, |m| m.is_dir()) => continue,
                Err(e) => return Err(Error::io("create journal directory", path, e)),
            }
            let dir = match File::open(path) {
                Ok(dir) => dir,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => return Err(Error::io("open journal directory", path, e)),
            };
            let opened_ino = dir.metadata().map_err(|e| Error::io("stat journal directory", path, e))?.ino();
            let lock = Flock::lock(dir, FlockArg::LockShared).map_err(|(_, e)| Error::io("lock journal directory", path, e.into()))?;
            if std::fs::metadata(path).map(|m| m.ino()).ok() == Some(opened_ino) {
                return Ok(SharedJournalDir { path: path.to_owned(), lock });
            }
        }
        Err(Error::io("enter journal directory", path, std::io::Error::other("removed again on every try")))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for SharedJournalDir {
    fn drop(&mut self) {
        // Converting the lock may drop it before failing; this run is leaving either way.
        if self.lock.relock(FlockArg::LockExclusiveNonblock).is_ok() {
            // Fails, and stays, if not empty.
            let _ = std::fs::remove_dir(&self.path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cgroup::fake::*;
    use crate::cgroup::{CgroupBackend, GroupPath, HybridBackend, Knob, V2Backend};
    use proptest::prelude::*;

    fn group(path: &str) -> GroupPath {
        GroupPath::new(path).unwrap()
    }

    fn entry(v: impl Strategy<Value = u32> + Clone) -> impl Strategy<Value = Entry> {
        let path = || any::<String>().prop_map(PathBuf::from);
        prop_oneof![
            (v.clone(), path(), any::<String>()).prop_map(|(v, path, value)| Entry::Original { v, path, value }),
            (v.clone(), path(), path()).prop_map(|(v, dir, evacuate_to)| Entry::Created { v, dir, evacuate_to }),
            (v, path()).prop_map(|(v, dir)| Entry::Abandoned { v, dir }),
        ]
    }

    proptest! {
        #[test]
        fn journal_parser_never_panics_on_arbitrary_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
            let mut report = RestoreReport::default();
            let _ = parse_entries(&String::from_utf8_lossy(&bytes), Path::new("fuzz"), &mut report, &mut Vec::new());
        }

        /// Entry-shaped JSON: unknown ops and fields, wrong types, versions that overflow u32.
        #[test]
        fn journal_parser_never_panics_on_entry_like_lines(text in r#"(\{("(v|op|path|dir|value|evacuate_to|x)":(-?[0-9]{0,12}|"(original|created|abandoned|/[a-z]{0,4})"|null|\[\]),?){0,5}\}?[ \t]?\r?\n){0,4}"#) {
            let mut report = RestoreReport::default();
            let entries = parse_entries(&text, Path::new("fuzz"), &mut report, &mut Vec::new());
            let lines = text.lines().filter(|l| !l.trim().is_empty()).count();
            prop_assert_eq!(entries.len() + report.skipped_lines, lines);
        }

        /// Entries as `append` writes them come back in order; torn lines (a crash mid-append),
        /// blank lines and entries of other versions are skipped and counted.
        #[test]
        fn journal_entries_parse_back(
            lines in proptest::collection::vec(
                prop_oneof![
                    4 => entry(Just(VERSION)).prop_map(|e| (Some(e.clone()), serde_json::to_string(&e).unwrap())),
                    1 => (entry(Just(VERSION)), any::<proptest::sample::Index>()).prop_map(|(e, at)| {
                        let line = serde_json::to_string(&e).unwrap();
                        let cuts: Vec<usize> = line.char_indices().map(|(i, _)| i).skip(1).collect();
                        (None, line[..cuts[at.index(cuts.len())]].to_owned())
                    }),
                    1 => entry(any::<u32>().prop_filter("another version", |v| *v != VERSION)).prop_map(|e| (None, serde_json::to_string(&e).unwrap())),
                    1 => r"[ \t]{0,3}".prop_map(|blank| (None, blank)),
                ],
                0..10,
            ),
        ) {
            let text: String = lines.iter().map(|(_, line)| format!("{line}\n")).collect();
            let mut report = RestoreReport::default();
            let mut unknown = Vec::new();
            let entries = parse_entries(&text, Path::new("gen"), &mut report, &mut unknown);
            let want: Vec<(Entry, &str)> = lines.iter().filter_map(|(e, line)| e.clone().map(|e| (e, line.as_str()))).collect();
            let skipped = lines.iter().filter(|(e, line)| e.is_none() && !line.trim().is_empty()).count();
            prop_assert_eq!(entries, want);
            prop_assert_eq!(report.skipped_lines, skipped);
            // Lines of other versions are handed back whole, to be kept.
            prop_assert!(unknown.iter().all(|l| serde_json::from_str::<Entry>(l).is_ok_and(|e| e.version() != VERSION)));
        }
    }

    /// Performs planned changes through the journal and fills new directories like the kernel.
    fn create_journaled(
        journal: &mut Journal,
        backend: &dyn CgroupBackend,
        g: &GroupPath,
        files: &'static [(&'static str, &'static str)],
        unified_files: &'static [(&'static str, &'static str)],
    ) {
        for change in backend.plan_create(g).unwrap() {
            journal.perform(&change).unwrap();
            if let Change::Mkdir { dir, .. } = &change {
                populate(dir, if dir.to_string_lossy().contains("/unified") { unified_files } else { files });
            }
        }
    }

    fn set(journal: &mut Journal, backend: &dyn CgroupBackend, g: &GroupPath, knob: Knob, bytes: Option<u64>) {
        let write = backend.plan_knob(g, knob, bytes).unwrap().unwrap();
        journal.perform(&Change::Write(write)).unwrap();
    }

    #[test]
    fn a_crashed_run_is_restored_by_the_next_journal_hybrid() {
        let dir = tempfile::tempdir().unwrap();
        let (memory, unified) = hybrid_roots(dir.path());
        let backend = HybridBackend::new(memory.clone(), unified.clone());
        // Two groups that existed before the agent, with their own limits.
        let (db, web) = (group("db"), group("web"));
        for g in [&db, &web] {
            populate(&g.dir_in(&memory), V1_MEMORY_FILES);
            populate(&g.dir_in(&unified), UNIFIED_FILES);
        }
        std::fs::write(db.dir_in(&memory).join("memory.limit_in_bytes"), "1073741824\n").unwrap();
        let journal_path = dir.path().join("journal.jsonl");

        {
            let (mut journal, report) = Journal::open(&journal_path).unwrap();
            assert_eq!(report, None);
            set(&mut journal, &backend, &db, Knob::Max, Some(512 << 20));
            set(&mut journal, &backend, &db, Knob::Max, Some(256 << 20));
            set(&mut journal, &backend, &web, Knob::Max, Some(128 << 20));
            let rt = group("critmem/rt");
            create_journaled(&mut journal, &backend, &rt, V1_MEMORY_FILES, UNIFIED_FILES);
            set(&mut journal, &backend, &rt, Knob::Max, Some(64 << 20));
            backend.move_pid(&rt, 4321).unwrap();
            // Crash: the journal is dropped without restore_all.
        }
        assert_eq!(read(&db.dir_in(&memory).join("memory.limit_in_bytes")), "268435456");
        let lines = read(&journal_path);
        assert_eq!(lines.lines().count(), 6, "two originals, four created dirs (limits inside them not recorded):\n{lines}");

        let (journal, report) = Journal::open(&journal_path).unwrap();
        let report = report.expect("a previous run's journal is restored");
        assert_eq!(read(&db.dir_in(&memory).join("memory.limit_in_bytes")), "1073741824");
        assert_eq!(read(&web.dir_in(&memory).join("memory.limit_in_bytes")), "9223372036854771712");
        for d in ["memory/critmem", "unified/critmem"] {
            assert!(!dir.path().join(d).exists(), "{d} left behind");
        }
        assert_eq!(report.restored.len(), 2);
        assert_eq!(report.removed_dirs.len(), 4);
        assert_eq!(report.evacuated_pids, vec![4321, 4321]);
        assert_eq!(read(&memory.join("cgroup.procs")), "4321");
        assert!(report.failures.is_empty());
        // The new journal starts empty; a clean shutdown removes it.
        assert_eq!(read(&journal_path), "");
        assert_eq!(journal.restore_all().unwrap(), RestoreReport::default());
        assert!(!journal_path.exists());
    }

    #[test]
    fn groups_coming_and_going_do_not_grow_the_journal_and_it_stays_locked() {
        let dir = tempfile::tempdir().unwrap();
        let (memory, unified) = hybrid_roots(dir.path());
        let backend = HybridBackend::new(memory.clone(), unified.clone());
        let db = group("db");
        populate(&db.dir_in(&memory), V1_MEMORY_FILES);
        populate(&db.dir_in(&unified), UNIFIED_FILES);
        let journal_path = dir.path().join("journal.jsonl");
        let (mut journal, _) = Journal::open(&journal_path).unwrap();
        set(&mut journal, &backend, &db, Knob::Max, Some(512 << 20));
        let steady = read(&journal_path).len();
        for n in 0..50 {
            let extra = group(&format!("critmem/extra{n}"));
            create_journaled(&mut journal, &backend, &extra, V1_MEMORY_FILES, UNIFIED_FILES);
            journal.release_within(&backend.group_dirs(&extra)).unwrap();
            assert!(Journal::open(&journal_path).is_err(), "the compacted journal is still this one's");
        }
        // The created parents stay recorded until the end; nothing else accumulates.
        let lines = read(&journal_path);
        assert!(lines.len() <= steady + 2 * 200, "{} bytes after 50 groups came and went:\n{lines}", lines.len());
        journal.restore_all().unwrap();
        assert!(!dir.path().join("memory/critmem").exists());
    }

    #[test]
    fn a_group_released_mid_run_is_restored_at_once_and_never_undone_again() {
        let dir = tempfile::tempdir().unwrap();
        let (memory, unified) = hybrid_roots(dir.path());
        let backend = HybridBackend::new(memory.clone(), unified.clone());
        let (db, web) = (group("db"), group("web"));
        for g in [&db, &web] {
            populate(&g.dir_in(&memory), V1_MEMORY_FILES);
            populate(&g.dir_in(&unified), UNIFIED_FILES);
        }
        std::fs::write(db.dir_in(&memory).join("memory.limit_in_bytes"), "1073741824\n").unwrap();
        let limit = |g: &GroupPath| read(&g.dir_in(&memory).join("memory.limit_in_bytes"));
        let journal_path = dir.path().join("journal.jsonl");
        {
            let (mut journal, _) = Journal::open(&journal_path).unwrap();
            set(&mut journal, &backend, &db, Knob::Max, Some(512 << 20));
            set(&mut journal, &backend, &web, Knob::Max, Some(128 << 20));
            let rt = group("critmem/rt");
            create_journaled(&mut journal, &backend, &rt, V1_MEMORY_FILES, UNIFIED_FILES);
            backend.move_pid(&rt, 4321).unwrap();
            // db and the created rt leave the agent's care; web stays.
            let report = journal.release_within(&backend.group_dirs(&db)).unwrap();
            assert_eq!((report.restored.len(), limit(&db)), (1, "1073741824".to_owned()));
            let report = journal.release_within(&backend.group_dirs(&rt)).unwrap();
            assert_eq!((report.removed_dirs.len(), report.evacuated_pids.clone()), (2, vec![4321, 4321]));
            assert!(!rt.dir_in(&memory).exists() && !rt.dir_in(&unified).exists());
            assert!(report.failures.is_empty());
            // Someone sets db after it was let go; db then comes back under the agent.
            std::fs::write(db.dir_in(&memory).join("memory.limit_in_bytes"), "805306368\n").unwrap();
            set(&mut journal, &backend, &db, Knob::Max, Some(256 << 20));
            // Crash.
        }
        let (journal, report) = Journal::open(&journal_path).unwrap();
        let report = report.unwrap();
        assert!(report.failures.is_empty(), "{report:?}");
        // db goes back to what it was when the agent took it on again, not to the first original.
        assert_eq!(limit(&db), "805306368");
        assert_eq!(limit(&web), "9223372036854771712");
        // The released rt directories are not removed twice; only their created parents remain to go.
        assert!(report.gone.is_empty(), "{report:?}");
        assert!(!dir.path().join("memory/critmem").exists());
        journal.restore_all().unwrap();
    }

    #[test]
    fn the_oom_guard_of_an_adopted_v1_group_is_restored_to_its_switch_value() {
        let dir = tempfile::tempdir().unwrap();
        let (memory, unified) = hybrid_roots(dir.path());
        let backend = HybridBackend::new(memory.clone(), unified.clone());
        let db = group("db");
        populate(&db.dir_in(&memory), V1_MEMORY_FILES);
        populate(&db.dir_in(&unified), UNIFIED_FILES);
        let journal_path = dir.path().join("journal.jsonl");
        {
            let (mut journal, _) = Journal::open(&journal_path).unwrap();
            journal.perform(&Change::Write(backend.plan_oom_guard(&db).unwrap())).unwrap();
            assert_eq!(read(&db.dir_in(&memory).join("memory.oom_control")), "1");
        }
        let (_journal, report) = Journal::open(&journal_path).unwrap();
        assert!(report.unwrap().failures.is_empty());
        // The kernel file would now read `oom_kill_disable 0`; the write is the bare switch.
        assert_eq!(read(&db.dir_in(&memory).join("memory.oom_control")), "0");
    }

    #[test]
    fn v2_subtree_control_is_restored_by_difference() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("cg");
        v2_root(&root);
        std::fs::write(root.join("cgroup.subtree_control"), "cpu\n").unwrap();
        let backend = V2Backend::new(root.clone());
        let existing = group("existing");
        populate(&existing.dir_in(&root), V2_FILES);
        let journal_path = dir.path().join("journal.jsonl");
        {
            let (mut journal, _) = Journal::open(&journal_path).unwrap();
            create_journaled(&mut journal, &backend, &group("critmem/a"), V2_FILES, V2_FILES);
            // The fake root does not merge `+memory` into its list as the kernel would.
            std::fs::write(root.join("cgroup.subtree_control"), "cpu memory\n").unwrap();
            for knob in Knob::ALL {
                set(&mut journal, &backend, &existing, knob, Some(1 << 20));
            }
        }
        let (_journal, report) = Journal::open(&journal_path).unwrap();
        let report = report.unwrap();
        assert_eq!(read(&root.join("cgroup.subtree_control")), "-memory");
        assert_eq!(backend.knobs(&existing).unwrap(), Default::default());
        assert!(!root.join("critmem").exists());
        assert_eq!(report.restored.len(), 5);
    }

    #[test]
    fn torn_last_line_and_vanished_groups_do_not_stop_the_restore() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("memory.limit_in_bytes");
        std::fs::write(&file, "42").unwrap();
        let journal_path = dir.path().join("journal.jsonl");
        let lines = [
            serde_json::to_string(&Entry::Original { v: 1, path: file.clone(), value: "7".into() }).unwrap(),
            serde_json::to_string(&Entry::Original { v: 1, path: dir.path().join("gone/memory.max"), value: "max".into() }).unwrap(),
            serde_json::to_string(&Entry::Original { v: 9, path: file.clone(), value: "8".into() }).unwrap(),
            r#"{"v":1,"op":"original","path":"/x"#.to_owned(),
        ];
        std::fs::write(&journal_path, lines.join("\n")).unwrap();
        let (_journal, report) = Journal::open(&journal_path).unwrap();
        let report = report.unwrap();
        assert_eq!(read(&file), "7");
        assert_eq!(report.skipped_lines, 2);
        assert_eq!(report.gone, vec![dir.path().join("gone/memory.max")]);
    }

    #[test]
    fn failed_restore_keeps_the_journal_and_says_so() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("limit");
        std::fs::create_dir(&target).unwrap(); // a directory cannot be written: the restore fails
        let journal_path = dir.path().join("journal.jsonl");
        let line = serde_json::to_string(&Entry::Original { v: 1, path: target, value: "7".into() }).unwrap();
        std::fs::write(&journal_path, format!("{line}\n")).unwrap();
        let err = Journal::open(&journal_path).unwrap_err();
        assert!(err.to_string().contains("delete the journal"), "{err}");
        assert!(read(&journal_path).contains("limit"));
    }

    #[test]
    fn a_partly_failed_restore_keeps_only_what_failed_so_a_retry_does_not_undo_later_changes() {
        let dir = tempfile::tempdir().unwrap();
        let restorable = dir.path().join("memory.limit_in_bytes");
        std::fs::write(&restorable, "42").unwrap();
        let stuck = dir.path().join("limit");
        std::fs::create_dir(&stuck).unwrap(); // a directory cannot be written: the restore fails
        let journal_path = dir.path().join("journal.jsonl");
        let good = serde_json::to_string(&Entry::Original { v: 1, path: restorable.clone(), value: "7".into() }).unwrap();
        let bad = serde_json::to_string(&Entry::Original { v: 1, path: stuck.clone(), value: "9".into() }).unwrap();
        let future = r#"{"v":2,"op":"original","path":"/x","value":"1"}"#;
        std::fs::write(&journal_path, format!("{good}\n{bad}\n{future}\n{{\"v\":1,\"op")).unwrap();
        assert!(Journal::open(&journal_path).is_err());
        assert_eq!(read(&restorable), "7");
        assert_eq!(read(&journal_path), format!("{future}\n{bad}\n"), "the failed entry and the unknown version stay; the torn line goes");
        // Someone sets the restored file again; the next try must leave it alone.
        std::fs::write(&restorable, "1000").unwrap();
        assert!(Journal::open(&journal_path).is_err());
        assert_eq!(read(&restorable), "1000");
        // Once the failure is fixed the journal finishes and empties.
        std::fs::remove_dir(&stuck).unwrap();
        std::fs::write(&stuck, "0").unwrap();
        let (journal, report) = Journal::open(&journal_path).unwrap();
        assert_eq!(report.unwrap().restored, vec![stuck.clone()]);
        assert_eq!(read(&stuck), "9");
        journal.restore_all().unwrap();
        assert!(!journal_path.exists());
        let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(left.len(), 2, "no temporary file left beside the journal: {left:?}");
    }

    #[test]
    fn restore_all_with_a_failure_rewrites_the_journal_the_same_way() {
        let dir = tempfile::tempdir().unwrap();
        let backend = V2Backend::new(dir.path().join("cg"));
        v2_root(&dir.path().join("cg"));
        let (a, b) = (group("a"), group("b"));
        populate(&a.dir_in(&dir.path().join("cg")), V2_FILES);
        populate(&b.dir_in(&dir.path().join("cg")), V2_FILES);
        let journal_path = dir.path().join("journal.jsonl");
        let (mut journal, _) = Journal::open(&journal_path).unwrap();
        set(&mut journal, &backend, &a, Knob::High, Some(1 << 20));
        set(&mut journal, &backend, &b, Knob::High, Some(1 << 20));
        // b's file turns into something that cannot be written.
        let b_high = b.dir_in(&dir.path().join("cg")).join("memory.high");
        std::fs::remove_file(&b_high).unwrap();
        std::fs::create_dir(&b_high).unwrap();
        let report = journal.restore_all().unwrap();
        assert_eq!(report.failures.len(), 1, "{report:?}");
        assert_eq!(backend.knob(&a, Knob::High).unwrap(), None);
        let left = read(&journal_path);
        assert_eq!(left.lines().count(), 1, "{left}");
        assert!(left.contains("b/memory.high"), "{left}");
    }

    #[test]
    fn a_v2_hard_limit_is_not_restored_below_usage_reclaim_cannot_bring_down() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("cg");
        v2_root(&root);
        let backend = V2Backend::new(root.clone());
        let db = group("db");
        let db_dir = db.dir_in(&root);
        populate(&db_dir, V2_FILES);
        std::fs::write(db_dir.join("memory.max"), (200u64 << 20).to_string()).unwrap();
        let journal_path = dir.path().join("journal.jsonl");
        {
            let (mut journal, _) = Journal::open(&journal_path).unwrap();
            set(&mut journal, &backend, &db, Knob::Max, Some(400 << 20));
        }
        // The group grew to 300 MiB under the raised limit; the fake memory.reclaim frees nothing.
        std::fs::write(db_dir.join("memory.current"), (300u64 << 20).to_string()).unwrap();
        let err = Journal::open(&journal_path).unwrap_err().to_string();
        assert!(err.contains("OOM-kill"), "{err}");
        assert_eq!(read(&db_dir.join("memory.max")), (400u64 << 20).to_string(), "left as it was");
        assert_eq!(read(&db_dir.join("memory.reclaim")), (100u64 << 20).to_string(), "reclaim of the excess was asked for");
        // Usage came down: the next start finishes the restore.
        std::fs::write(db_dir.join("memory.current"), (150u64 << 20).to_string()).unwrap();
        let (_journal, report) = Journal::open(&journal_path).unwrap();
        assert!(report.unwrap().failures.is_empty());
        assert_eq!(read(&db_dir.join("memory.max")), (200u64 << 20).to_string());
    }

    #[test]
    fn a_file_that_is_not_a_journal_is_refused_and_left_as_it_was() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("agent.toml");
        let config = "controller = \"sara\"\n[[group]]\nname = \"rt\"\n";
        std::fs::write(&path, config).unwrap();
        let err = Journal::open(&path).unwrap_err().to_string();
        assert!(err.contains("line 1 is not a journal entry"), "{err}");
        assert_eq!(read(&path), config);
        // Entries, then something else: refused too (only a torn last line is expected).
        let entry = serde_json::to_string(&Entry::Abandoned { v: 1, dir: dir.path().join("x") }).unwrap();
        std::fs::write(&path, format!("{entry}\nnot json\n{entry}\n")).unwrap();
        assert!(Journal::open(&path).unwrap_err().to_string().contains("line 2 is not a journal entry"));
    }

    #[test]
    fn a_symlink_or_a_directory_others_can_write_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("precious");
        std::fs::write(&target, "keep").unwrap();
        let link = dir.path().join("journal.jsonl");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let err = Journal::open(&link).unwrap_err().to_string();
        assert!(err.contains("open journal"), "{err}");
        assert_eq!(read(&target), "keep");

        let shared = dir.path().join("shared");
        std::fs::create_dir(&shared).unwrap();
        std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o777)).unwrap();
        let err = Journal::open(&shared.join("journal.jsonl")).unwrap_err().to_string();
        assert!(err.contains("writable by no one else"), "{err}");
        assert!(!shared.join("journal.jsonl").exists());
    }

    #[test]
    fn only_one_agent_holds_a_journal() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("journal.jsonl");
        let (_first, _) = Journal::open(&path).unwrap();
        // The second must not touch the first's rewrite in progress either.
        let temp = crate::durable::temporary_for(&path);
        std::fs::write(&temp, "being written").unwrap();
        let err = Journal::open(&path).unwrap_err();
        assert!(err.to_string().contains("another critmem process (an agent or a loop bench) is running with this journal"), "{err}");
        assert!(temp.exists());
    }

    /// What the lock retry looks at: a file renamed over the path is no longer the one an
    /// earlier open holds, so a lock on that one would not be the journal's.
    #[test]
    fn a_lock_on_a_file_replaced_at_the_path_is_noticed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("journal.jsonl");
        std::fs::write(&path, "").unwrap();
        let held = File::open(&path).unwrap();
        assert!(path_names(&path, &held).unwrap());
        rewrite(&path, &[]).unwrap();
        assert!(!path_names(&path, &held).unwrap());
        std::fs::remove_file(&path).unwrap();
        assert!(!path_names(&path, &held).unwrap());
    }

    /// A crash while a restore rewrote the journal leaves its temporary file; the next owner
    /// of the journal removes it.
    #[test]
    fn a_rewrite_left_by_a_crash_is_removed_by_the_next_open() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("journal.jsonl");
        let temp = crate::durable::temporary_for(&path);
        std::fs::write(&temp, "torn").unwrap();
        let (_journal, report) = Journal::open(&path).unwrap();
        assert!(report.is_none());
        assert!(!temp.exists());
    }

    #[test]
    fn failed_mkdir_is_abandoned_not_removed_later() {
        let dir = tempfile::tempdir().unwrap();
        let journal_path = dir.path().join("journal.jsonl");
        let target = dir.path().join("missing-parent/child");
        {
            let (mut journal, _) = Journal::open(&journal_path).unwrap();
            let change = Change::Mkdir { dir: target.clone(), evacuate_to: dir.path().to_owned() };
            assert!(journal.perform(&change).is_err());
        }
        // Someone else creates it later; the restore must leave it alone.
        std::fs::create_dir_all(&target).unwrap();
        let (_journal, report) = Journal::open(&journal_path).unwrap();
        assert!(target.exists());
        assert!(report.unwrap().removed_dirs.is_empty());
    }

    #[test]
    fn subtree_control_diff_adds_and_removes() {
        assert_eq!(subtree_control_diff("cpu memory io", "cpu pids"), "-io -memory +pids");
        assert_eq!(subtree_control_diff("cpu", "cpu"), "");
    }

    #[test]
    fn a_missing_journal_directory_is_made_owner_only_and_removed_with_the_journal() {
        use std::os::unix::fs::PermissionsExt;
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("var/lib/critmem/journal.jsonl");
        let (journal, report) = Journal::open(&path).unwrap();
        assert_eq!(report, None);
        for dir in [tmp.path().join("var"), tmp.path().join("var/lib"), tmp.path().join("var/lib/critmem")] {
            assert_eq!(std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777, 0o700, "{}", dir.display());
        }
        journal.restore_all().unwrap();
        assert!(!tmp.path().join("var").exists(), "what the journal made goes with it");
        // A directory that was there stays, and so does one holding something else.
        std::fs::create_dir_all(tmp.path().join("keep")).unwrap();
        let (journal, _) = Journal::open(&tmp.path().join("keep/state/journal.jsonl")).unwrap();
        std::fs::write(tmp.path().join("keep/state/swap.json"), "{}").unwrap();
        journal.restore_all().unwrap();
        assert!(tmp.path().join("keep/state/swap.json").exists());
        // A crash leaves the directory and its journal for the next start to restore from.
        let crashed = tmp.path().join("crash/critmem/journal.jsonl");
        drop(Journal::open(&crashed).unwrap());
        assert!(crashed.exists());
    }

    #[test]
    fn the_last_run_to_leave_removes_the_journal_directory_if_empty() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("runs/state");
        let first = SharedJournalDir::enter(&path).unwrap();
        let second = SharedJournalDir::enter(&path).unwrap();
        drop(first);
        assert!(path.is_dir(), "removed while another run was in it");
        drop(second);
        assert!(!path.exists(), "the last run out left the empty directory");
        assert!(path.parent().unwrap().is_dir(), "only the directory itself is removed");
        let third = SharedJournalDir::enter(&path).unwrap();
        std::fs::write(third.path().join("critmem-run-1.journal"), "").unwrap();
        drop(third);
        assert!(path.join("critmem-run-1.journal").exists(), "a journal left to restore keeps its directory");
        let file = tmp.path().join("a-file");
        std::fs::write(&file, "").unwrap();
        let err = SharedJournalDir::enter(&file).unwrap_err().to_string();
        assert!(err.contains("create journal directory") && err.contains("a-file"), "{err}");
    }

    #[test]
    fn runs_entering_and_leaving_at_once_always_find_their_directory() {
        // Each thread opens the directory itself, so their flocks conflict as separate runs' do.
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("state");
        std::thread::scope(|scope| {
            for run in 0..8 {
                let path = &path;
                scope.spawn(move || {
                    for i in 0..200 {
                        let dir = SharedJournalDir::enter(path).unwrap();
                        let journal = dir.path().join(format!("critmem-run-{run}.journal"));
                        std::fs::write(&journal, "").unwrap_or_else(|e| panic!("run {run}, try {i}: the directory went away: {e}"));
                        std::fs::remove_file(&journal).unwrap();
                    }
                });
            }
        });
        assert!(!path.exists());
    }
}
