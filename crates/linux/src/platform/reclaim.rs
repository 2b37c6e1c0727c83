//! Proactive reclaim on request ([`Action::Reclaim`]): cgroup v2's `memory.reclaim`, written
//! off the control thread like the limits (the kernel reclaims in the writer).

use super::*;
use crate::writer::WriteOutcome;

/// The file a reclaim is written to (a file name the limits never use).
const RECLAIM_FILE: &str = "memory.reclaim";

impl LinuxPlatform {
    /// Asks the kernel to reclaim `bytes` (rounded down to whole pages) of `group`; returns the
    /// action as asked, or `None` when nothing was asked: less than a page, no proactive
    /// reclaim on this backend (counted; never an error), or the writer's queue full.
    pub(super) fn apply_reclaim(&mut self, group: GroupId, bytes: u64) -> Result<Option<Action>> {
        let bytes = page_align_down(bytes);
        if bytes == 0 {
            return Ok(None);
        }
        let name = &self.groups[group].spec.name;
        if !self.backend.capabilities().proactive_reclaim {
            self.stats.reclaim_unsupported += 1;
            // A controller asks again every tick; say it once.
            if self.stats.reclaim_unsupported == 1 {
                tracing::debug!(group = %name, "proactive reclaim requested on a backend without it (cgroup v1); ignored");
            }
            return Ok(None);
        }
        let write = self.backend.plan_reclaim(&self.groups[group].spec.path, bytes)?;
        self.stats.reclaims_requested += 1;
        let applied = Action::Reclaim { group, bytes };
        if self.dry_run {
            self.stats.dry_run_writes += 1;
            tracing::debug!(group = %name, path = %write.path.display(), value = %write.contents, "dry run: would write");
            return Ok(Some(applied));
        }
        // Not journaled: the file holds no setting to put back (`restorable` is false).
        match self.writer.submit(write) {
            Ok(_) => {
                self.stats.writes_submitted += 1;
                Ok(Some(applied))
            }
            Err(e @ Error::WriterQueueFull { .. }) => {
                self.stats.writes_dropped += 1;
                tracing::warn!(error = %e, "reclaim skipped this tick");
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }
}

/// Whether `outcome` is a reclaim the kernel ended short of what was asked (`EAGAIN`: the
/// group had less it could give up), which is an answer, not a failure.
pub(super) fn fell_short(outcome: &WriteOutcome) -> bool {
    let is_reclaim = outcome.path.file_name().is_some_and(|n| n == RECLAIM_FILE);
    let again = matches!(&outcome.result, Err(Error::WriteRejected { source, .. }) if source.raw_os_error() == Some(nix::libc::EAGAIN));
    is_reclaim && again
}
