//! Where runs keep their journals and sockets, and how a run puts back what a killed one left.

use crate::tasks::{kill_cgroup2, kill_until_empty};
use critmem_linux::clock::{Clock, SharedClock};
use critmem_linux::journal::Journal;
use critmem_linux::layout::Layout;
use std::path::{Path, PathBuf};

/// Where runs keep their restore journals (root-only; a tmpfs, like the cgroups it describes).
/// Not the agent's /run/critmem: systemd removes that when the agent's unit stops.
pub(crate) const JOURNAL_DIR: &str = "/run/critmem-linux-run";

/// A run's own directory for its job socket and its commands' progress files,
/// `critmem-run-<pid>.d` beside its journal, so that the next run removes it when this one is
/// killed. Locked while the run lives; removed on drop.
pub(crate) struct StateDir {
    pub(crate) path: PathBuf,
    _lock: nix::fcntl::Flock<std::fs::File>,
}

impl StateDir {
    pub(crate) fn create(dir: &Path, run_dir: &str) -> Result<Self, String> {
        use std::os::unix::fs::{DirBuilderExt, MetadataExt};
        let path = dir.join(format!("{run_dir}.d"));
        let err = |what: &str, e: &dyn std::fmt::Display| format!("{}: {what}: {e}", path.display());
        // A dead run of the same pid left it (killed before the recovery could see its journal).
        if path.exists() {
            std::fs::remove_dir_all(&path).map_err(|e| err("remove a dead run's directory", &e))?;
        }
        std::fs::DirBuilder::new().mode(0o700).create(&path).map_err(|e| err("create", &e))?;
        let file = std::fs::File::open(&path).map_err(|e| err("open", &e))?;
        let opened_ino = file.metadata().map_err(|e| err("stat", &e))?.ino();
        let lock = nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusiveNonblock).map_err(|(_, e)| err("lock", &e))?;
        // Another run starting at this instant may have taken it for a dead run's and removed it.
        if std::fs::metadata(&path).map(|m| m.ino()).ok() != Some(opened_ino) {
            return Err(err("lock", &"removed by another run starting at the same time; start again"));
        }
        Ok(StateDir { path, _lock: lock })
    }

    /// Removes a run's directory unless that run still holds its lock.
    pub(crate) fn remove_if_dead(path: &Path) {
        let Ok(file) = std::fs::File::open(path) else { return };
        if let Ok(lock) = nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusiveNonblock) {
            if let Err(e) = std::fs::remove_dir_all(path) {
                tracing::warn!(path = %path.display(), error = %e, "could not remove a dead run's socket directory");
            }
            drop(lock);
        }
    }
}

impl Drop for StateDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// Puts back what runs that died without restoring (SIGKILL, power loss) left: their journal
/// in `dir` is unlocked. Their tasks, and what those forked, are killed first (they are this
/// program's own, in the dead run's own cgroups), then the journal is restored and removed.
pub(crate) fn recover_crashed_runs(dir: &Path, layout: &Layout, clock: &SharedClock) -> Result<(), String> {
    let entries = std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        // critmem-run-<pid>.journal and critmem-run-<pid>.d, a run's journal and socket directory.
        let Some((pid, kind)) = name.strip_prefix("critmem-run-").and_then(|n| n.split_once('.')).filter(|(p, _)| p.parse::<u32>().is_ok())
        else {
            continue;
        };
        let path = entry.path();
        match kind {
            "d" => {
                StateDir::remove_if_dead(&path);
                continue;
            }
            "journal" => {}
            _ => continue,
        }
        let Ok(file) = std::fs::File::open(&path) else { continue };
        // A live run holds the lock on its journal.
        match nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusiveNonblock) {
            Ok(lock) => drop(lock),
            Err(_) => continue,
        }
        let killed = kill_run_cgroups(layout, clock.as_ref(), &format!("critmem-run-{pid}"));
        // What cannot be put back stays journaled for the next run to try; this one goes on.
        let report = match Journal::open(&path).and_then(|(journal, report)| journal.restore_all().map(|_| report.unwrap_or_default())) {
            Ok(report) => report,
            Err(e) => {
                tracing::warn!(pid, error = %e, "a previous run ended without restoring (killed?), and putting back what it changed failed");
                continue;
            }
        };
        tracing::warn!(
            pid,
            killed_processes = killed,
            restored_files = report.restored.len(),
            removed_groups = report.removed_dirs.len(),
            "a previous run ended without restoring (killed?): put back what it changed"
        );
    }
    Ok(())
}

/// SIGKILLs every process in the cgroups under `name` (in every tree of `layout`) until they
/// are empty or 5 s have passed; returns how many it signalled.
pub(crate) fn kill_run_cgroups(layout: &Layout, clock: &dyn Clock, name: &str) -> usize {
    let (roots, cgroup2_root): (Vec<&Path>, &Path) = match layout {
        Layout::V2 { root } => (vec![root], root),
        Layout::Hybrid { memory_root, unified_root, .. } => (vec![memory_root, unified_root], unified_root),
    };
    let run_cgroup2 = cgroup2_root.join(name);
    kill_until_empty(
        clock,
        || {
            let mut pids = Vec::new();
            for root in &roots {
                let mut dirs = vec![root.join(name)];
                while let Some(d) = dirs.pop() {
                    let Ok(entries) = std::fs::read_dir(&d) else { continue };
                    dirs.extend(entries.flatten().filter(|e| e.file_type().is_ok_and(|t| t.is_dir())).map(|e| e.path()));
                    let procs = d.join("cgroup.procs");
                    let text = std::fs::read_to_string(&procs).unwrap_or_default();
                    pids.extend(critmem_linux::cgroup::parse_pids(&text, &procs.display().to_string()).unwrap_or_default());
                }
            }
            pids
        },
        || kill_cgroup2(&run_cgroup2),
    )
}
