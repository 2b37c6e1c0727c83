//! Out-of-memory watch and rescue: a group found waiting at its hard limit (v1 `under_oom`,
//! v2 a new `oom` event) has the limit raised at once, so the kernel kills nothing.

use super::*;

/// OOM watch of one group: the file read when usage nears the limit, and the back-off after a
/// rescue.
#[derive(Default)]
pub(super) struct OomWatch {
    pub(super) file: Option<std::fs::File>,
    /// v2 `oom` events seen so far (a rise means a new OOM).
    pub(super) events_seen: u64,
    /// Requests below this are raised to it until `hold_until_ns`.
    pub(super) hold_bytes: u64,
    pub(super) hold_until_ns: u64,
    /// Rescues in a row (each doubles the hold), and when the last was.
    pub(super) streak: u32,
    pub(super) last_rescue_ns: u64,
    /// When the limit was last raised by one page to wake waiters far below it, and how many
    /// times since the group was last seen not waiting.
    pub(super) last_wakeup_ns: u64,
    pub(super) wakeups_while_waiting: u32,
    pub(super) guard: OomGuard,
    /// v1: the eventfd the kernel signals when a task starts waiting at the limit
    /// ([`CgroupBackend::oom_notifier`]). With it, usage the controller does not read is
    /// refreshed with the knobs only, as the rescue no longer needs it every tick.
    pub(super) notifier: Option<nix::sys::eventfd::EventFd>,
    /// Notified, or last seen waiting: the group's usage and OOM file are read every tick
    /// until it is neither.
    pub(super) pending: bool,
    /// Notified since the last tick: the OOM file is read whatever the usage.
    pub(super) notified: bool,
}

/// Who has a group's OOM killer switched off (v1 `memory.oom_control`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) enum OomGuard {
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

impl LinuxPlatform {
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
        self.now_ns = self.clock.now_ns();
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
            // v2: a task throttled over its limit sleeps before it can act on the signal.
            let over_high = self.rescue_if_stuck_over_high(id, true);
            match over_high.and_then(|over| Ok(over | self.rescue_if_near_limit(id, usage, knobs)?)) {
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
    pub(super) fn rescue_if_near_limit(&mut self, id: GroupId, usage_bytes: u64, knobs: MemoryKnobs) -> Result<bool> {
        let near = knobs.max_bytes.is_some_and(|limit| near_limit(usage_bytes, limit));
        if near || self.groups[id].oom.pending {
            self.rescue_if_out_of_memory(id, near)
        } else {
            Ok(false)
        }
    }

    /// Drains the OOM notifiers the kernel signalled since the last tick (one `poll` for all
    /// groups) and marks those groups pending, so this tick reads their usage and OOM file.
    pub(super) fn take_oom_notifications(&mut self) {
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
    pub(super) fn rescue_if_notified(&mut self, id: GroupId, usage_bytes: u64, knobs: MemoryKnobs) -> Result<bool> {
        self.stats.oom_checks_on_notification += 1;
        let raised = self.rescue_if_out_of_memory(id, knobs.max_bytes.is_some_and(|limit| near_limit(usage_bytes, limit)))?;
        self.stats.oom_rescues_on_notification += u64::from(raised);
        Ok(raised)
    }

    /// Signals group `id`'s OOM notifier as the kernel would.
    #[cfg(test)]
    pub(super) fn signal_oom_notifier(&self, id: GroupId) {
        self.groups[id].oom.notifier.as_ref().expect("a registered notifier").write(1).unwrap();
    }

    /// If group `id` is out of memory at its limit (v1: tasks waiting in `under_oom`, as the
    /// OOM killer is off; v2: a new `oom` event), raises the limit at once on this thread
    /// (raising never reclaims, so it cannot block) and holds it against lower requests for a
    /// while, longer after each rescue in a row. Returns whether it raised the limit.
    /// `near_own_limit` false (usage far below it): a full memory+swap limit is acted on, and
    /// tasks still waiting are woken ([`Self::wake_waiters_far_below_limit`]).
    pub(super) fn rescue_if_out_of_memory(&mut self, id: GroupId, near_own_limit: bool) -> Result<bool> {
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
    pub(super) fn wake_waiters_far_below_limit(&mut self, id: GroupId) -> Result<bool> {
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

    /// Group `id`'s OOM file, read now (opened again if it could not be opened or read before).
    pub(super) fn oom_state(&mut self, id: GroupId) -> Option<crate::cgroup::OomState> {
        let (backend, g) = (self.backend.as_ref(), &mut self.groups[id]);
        let open = || std::fs::File::open(backend.oom_file(&g.spec.path)).ok();
        read_kept(&mut g.oom.file, &mut self.read_buf, open, crate::cgroup::parse_oom_state)
    }

    /// Group `id`'s swap usage now, where the backend has a file for it (cgroup v2); else 0.
    pub(super) fn swap_bytes(&mut self, id: GroupId) -> u64 {
        let (backend, g) = (self.backend.as_ref(), &mut self.groups[id]);
        let open = || backend.swap_usage_file(&g.spec.path).and_then(|path| std::fs::File::open(path).ok());
        read_kept(&mut g.swap_file, &mut self.read_buf, open, |text| text.trim().parse().ok()).unwrap_or(0)
    }

    /// Re-reads group `id`'s memory+swap limit (kept as it was if the read fails).
    pub(super) fn refresh_combined(&mut self, id: GroupId) {
        let g = &mut self.groups[id];
        g.combined = self.backend.combined_limit(&g.spec.path).unwrap_or(g.combined);
    }

    /// Gives group `id` its OOM killer back (see [`Self::rescue_if_out_of_memory`]), if this
    /// platform switched it off; returns false (nothing raised).
    pub(super) fn release_oom_guard(&mut self, id: GroupId, combined: CombinedLimit) -> Result<bool> {
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
    pub(super) fn rearm_oom_guard(&mut self, id: GroupId) -> Result<()> {
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
    pub(super) fn raise_max_now(&mut self, id: GroupId, raised: u64) -> Result<bool> {
        self.raise_now(id, Knob::Max, raised)
    }

    /// Writes a higher `knob` (a limit) on this thread, journaled first: a raise above usage
    /// reclaims nothing, so it cannot block. Returns whether it was written.
    fn raise_now(&mut self, id: GroupId, knob: Knob, raised: u64) -> Result<bool> {
        let g = &mut self.groups[id];
        let Some(write) = self.backend.plan_knob(&g.spec.path, knob, Some(raised))? else { return Ok(false) };
        if let Some(journal) = self.journal.as_mut() {
            journal.record(&Change::Write(write.clone()))?;
        }
        if !perform_or_warn(&write, &g.spec.name, "raise the limit")? {
            self.stats.writes_failed += 1;
            return Ok(false);
        }
        // A lower value still queued in the writer must not land after this one.
        if self.writer.is_outstanding(&write.path) {
            let _ = self.writer.submit(write);
        }
        *knob_slot(&mut g.knobs, knob) = Some(raised);
        Ok(true)
    }

    /// cgroup v2, where a hard limit is applied as `memory.high` ([`Self::apply_v2_max`]):
    /// `high` throttles but does not stop growth, so `memory.max` is raised to stay at least
    /// half of [`V2_MAX_BACKSTOP_HEADROOM_BYTES`] above the limit and above usage with the
    /// group's swap (a swapoff brings all of it back at once); a group reaching it would be
    /// OOM-killed, and v2 reports that only after the kill.
    pub(super) fn keep_v2_max_ahead_of_usage(&mut self, id: GroupId) -> Result<bool> {
        let g = &self.groups[id];
        let Some(max) = g.knobs.max_bytes.filter(|_| g.high_is_ours) else { return Ok(false) };
        let (usage, high) = (g.usage_bytes, g.knobs.high_bytes.unwrap_or(0));
        let above = usage.saturating_add(self.swap_bytes(id)).max(high);
        if above.saturating_add(V2_MAX_BACKSTOP_HEADROOM_BYTES / 2) < max {
            return Ok(false);
        }
        let raised = page_align_up(above.saturating_add(V2_MAX_BACKSTOP_HEADROOM_BYTES));
        let done = self.raise_max_now(id, raised)?;
        self.stats.v2_max_kept_ahead += u64::from(done);
        Ok(done)
    }

    /// cgroup v2's counterpart of a task waiting at a v1 limit: a group over the `memory.high`
    /// that applies its hard limit, holding more memory than it can give back (anonymous
    /// memory beyond free swap, and unevictable memory), is throttled by the kernel for as long
    /// as that lasts. Its limit is raised at once as the v1 rescue raises it, and held the same
    /// way. `stopping`: the run is ending and the group's tasks must be able to exit, so any
    /// group over its limit is raised.
    pub(super) fn rescue_if_stuck_over_high(&mut self, id: GroupId, stopping: bool) -> Result<bool> {
        let g = &self.groups[id];
        let Some(high) = g.knobs.high_bytes.filter(|_| g.high_is_ours) else { return Ok(false) };
        if g.usage_bytes <= high {
            return Ok(false);
        }
        let unreclaimable = if stopping {
            g.usage_bytes
        } else {
            let stat = self.backend.memory_stat(&g.spec.path)?;
            let unevictable = stat.fields.get("unevictable").copied().unwrap_or(0);
            stat.anon_bytes.saturating_sub(swap_free_bytes(&self.proc_root)).saturating_add(unevictable)
        };
        if unreclaimable < high {
            return Ok(false);
        }
        let now_ns = self.now_ns;
        let usage_and_swap = self.groups[id].usage_bytes.saturating_add(self.swap_bytes(id));
        let g = &mut self.groups[id];
        let base = g.usage_bytes.max(unreclaimable.saturating_add(V2_UNRECLAIMABLE_MARGIN_BYTES));
        let raised = page_align_up(base.saturating_add((high / 4).max(OOM_RESCUE_MIN_STEP_BYTES)));
        if now_ns.saturating_sub(g.oom.last_rescue_ns) > OOM_BACKOFF_RESET_NS {
            g.oom.streak = 0;
        }
        g.oom.hold_bytes = raised;
        g.oom.hold_until_ns = now_ns + (OOM_HOLD_NS << g.oom.streak.min(4));
        g.oom.streak += 1;
        g.oom.last_rescue_ns = now_ns;
        tracing::warn!(group = %g.spec.name, usage_bytes = g.usage_bytes, unreclaimable_bytes = unreclaimable, limit_bytes = high, raised_bytes = raised, hold_ms = (g.oom.hold_until_ns - now_ns) / 1_000_000, "group throttled over its limit with memory it cannot give back: raised the limit so it can go on");
        // Backstop first: `memory.max` must stay above the throttle.
        let backstop = page_align_up(raised.max(usage_and_swap).saturating_add(V2_MAX_BACKSTOP_HEADROOM_BYTES));
        if g.knobs.max_bytes.is_some_and(|m| m < backstop) && !self.raise_max_now(id, backstop)? {
            return Ok(false);
        }
        let done = self.raise_now(id, Knob::High, raised)?;
        self.stats.oom_rescues += u64::from(done);
        Ok(done)
    }
}

/// Switches the kernel's OOM killer off for a group (where the backend can) with the original
/// journaled, so a limit the group outgrows makes its tasks wait for the agent to raise it
/// rather than die. A failure is logged and counted, not fatal: the rescue still works on v2's
/// events, and on v1 only the kill cannot be prevented.
pub(super) fn guard_against_oom_kills(
    backend: &dyn CgroupBackend,
    journal: &mut Journal,
    g: &mut Managed,
    stats: &mut PlatformStats,
) -> Result<()> {
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
        Err(e @ (Error::Journal { .. } | Error::JournalWrite { .. })) => Err(e),
        Err(e) => {
            stats.oom_guard_failures += 1;
            tracing::warn!(group = %g.spec.name, error = %e, "cannot switch off the OOM killer of the group; an OOM at its limit may kill a task before the agent raises it");
            Ok(())
        }
    }
}

/// Whether the cgroup directory `dir` has child groups (subdirectories); unreadable counts as yes.
pub(super) fn has_child_groups(dir: &Path) -> bool {
    std::fs::read_dir(dir).map_or(true, |entries| entries.flatten().any(|e| e.file_type().is_ok_and(|t| t.is_dir())))
}

/// Makes `write` on the calling thread; a failure other than a vanished group is logged
/// ("cannot {what}") and returned as `false`.
pub(super) fn perform_or_warn(write: &crate::cgroup::FileWrite, group: &str, what: &str) -> Result<bool> {
    match write.perform() {
        Ok(()) => Ok(true),
        Err(e @ Error::GroupVanished { .. }) => Err(e),
        Err(e) => {
            tracing::warn!(group, error = %e, "cannot {what}");
            Ok(false)
        }
    }
}
