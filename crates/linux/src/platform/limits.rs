//! How a requested limit becomes the value written: clamping, page alignment, and cgroup v2's
//! hard limit as `memory.high` under a `memory.max` backstop.

use super::*;

impl LinuxPlatform {
    /// The limit actually written for a request, as [`Platform::apply`]'s contract says: the
    /// request rounded down to whole pages, at least the floor (itself whole pages), and, where
    /// the request would harm the group, higher (an OOM hold; for a v2 hard limit below usage,
    /// what the group cannot give back) or lower (a v1 memory+swap limit).
    pub(super) fn clamp_limit(&mut self, group: GroupId, knob: Knob, bytes: u64) -> Result<u64> {
        let g = &self.groups[group];
        let mut bytes = page_align_down(bytes);
        if bytes < g.spec.floor_bytes {
            bytes = g.spec.floor_bytes;
            self.stats.clamped_to_floor += 1;
        }
        // Backing off after an OOM rescue: no lower limit until the hold ends.
        if knob == Knob::Max && self.now_ns < g.oom.hold_until_ns && bytes < g.oom.hold_bytes {
            bytes = g.oom.hold_bytes;
            self.stats.clamped_to_oom_hold += 1;
        }
        // Where the kernel refuses such a write (v1: EBUSY) it needs no guard; v2 would OOM-kill.
        let kills = self.backend.capabilities().limit_below_usage == LimitBelowUsage::OomKills;
        if knob == Knob::Max && kills && bytes < g.usage_bytes {
            let stat = self.backend.memory_stat(&g.spec.path)?;
            let swap_free = swap_free_bytes(&self.proc_root);
            let unevictable = stat.fields.get("unevictable").copied().unwrap_or(0);
            let unreclaimable =
                stat.anon_bytes.saturating_sub(swap_free).saturating_add(unevictable).saturating_add(V2_UNRECLAIMABLE_MARGIN_BYTES);
            if bytes < unreclaimable {
                bytes = page_align_up(unreclaimable);
                self.stats.clamped_to_unreclaimable += 1;
            }
        }
        // v1 refuses a memory limit above the memory+swap limit (EINVAL); the latter binds anyway.
        if let Some(ceiling) = g.combined.filter(|_| knob == Knob::Max).map(|c| page_align_down(c.limit_bytes)) {
            if bytes > ceiling {
                bytes = ceiling;
                self.stats.clamped_to_combined_limit += 1;
            }
        }
        Ok(bytes)
    }

    /// A cgroup v2 hard limit. The kernel enforces `memory.max` by reclaiming and, when that
    /// fails, OOM-killing in the group, at once and with no way to switch that off (v1 makes a
    /// task wait at its limit instead, where the OOM rescue raises it). `memory.high`
    /// throttles and reclaims and never kills. So the limit is written as `memory.high`, with
    /// `memory.max` kept [`V2_MAX_BACKSTOP_HEADROOM_BYTES`] above the limit and above usage with
    /// swap as a backstop (raised as a throttled group grows, [`Self::keep_v2_max_ahead_of_usage`]); a
    /// group that cannot get under it is rescued as at a v1 limit
    /// ([`Self::rescue_if_stuck_over_high`]). Observations show the limit as the hard limit.
    /// A `high` the controller set itself is left to it: then `memory.max` takes the limit
    /// wherever usage is below it.
    pub(super) fn apply_v2_max(&mut self, group: GroupId, bytes: Option<u64>, applied: &mut Vec<Action>) -> Result<()> {
        let g = &self.groups[group];
        let (usage, high_is_ours) = (g.usage_bytes, g.high_is_ours);
        let Some(requested) = bytes else {
            applied.extend(self.apply_knob(group, Knob::Max, None)?);
            if high_is_ours {
                self.apply_knob(group, Knob::High, None)?;
                self.groups[group].high_is_ours = false;
            }
            return Ok(());
        };
        let limit = self.clamp_limit(group, Knob::Max, requested)?;
        let controllers_high = !high_is_ours && self.groups[group].knobs.high_bytes.is_some();
        if controllers_high && limit >= usage {
            applied.extend(self.apply_knob(group, Knob::Max, Some(limit))?);
            return Ok(());
        }
        let written = if controllers_high {
            None
        } else {
            self.groups[group].high_is_ours = true;
            let written = self.apply_knob(group, Knob::High, Some(limit))?;
            self.stats.lowered_via_high += u64::from(written.is_some() && limit < usage);
            written
        };
        let usage_and_swap = usage.saturating_add(self.swap_bytes(group));
        let backstop = page_align_up(limit.max(usage_and_swap).saturating_add(V2_MAX_BACKSTOP_HEADROOM_BYTES));
        let current = self.groups[group].knobs.max_bytes;
        // Rewritten only when too tight (the group would hit it before the throttle) or far too
        // loose, so a steady limit writes nothing.
        let tight = current.is_none_or(|m| m < backstop.saturating_sub(V2_MAX_BACKSTOP_HEADROOM_BYTES / 2));
        let loose = current.is_some_and(|m| m > backstop.saturating_add(4 * V2_MAX_BACKSTOP_HEADROOM_BYTES));
        let backstop_written = if tight || loose { self.apply_knob(group, Knob::Max, Some(backstop))? } else { None };
        if controllers_high {
            applied.extend(backstop_written);
        } else if written.is_some() {
            applied.push(Action::SetMax { group, bytes: Some(limit) });
        }
        Ok(())
    }

    pub(super) fn apply_knob(&mut self, group: GroupId, knob: Knob, bytes: Option<u64>) -> Result<Option<Action>> {
        // v1 has no throttling limit: a `high` request becomes the hard limit (reclaim, and
        // EBUSY rather than OOM if it cannot be met); v1 has no protections at all.
        let capabilities = self.backend.capabilities();
        let knob = match knob {
            Knob::High if !capabilities.has(Knob::High) => Knob::Max,
            Knob::Min | Knob::Low if !capabilities.has(knob) => {
                if bytes.is_some() {
                    self.stats.unsupported += 1;
                    tracing::debug!(group = %self.groups[group].spec.name, knob = knob.name(), "protection requested on a backend without it; ignored");
                }
                return Ok(None);
            }
            other => other,
        };
        let bytes = match bytes {
            Some(b) if matches!(knob, Knob::Max | Knob::High) => Some(self.clamp_limit(group, knob, b)?),
            // Protections are whole pages too, never more than asked; 0 is no protection.
            Some(b) => Some(page_align_down(b)).filter(|&b| b > 0),
            None => None,
        };
        let current = *knob_slot(&mut self.groups[group].knobs, knob);
        // The common case: the controller asks again for what is already there.
        if current == bytes {
            let slot = Knob::ALL.iter().position(|&k| k == knob).unwrap_or(0);
            if let Some(path) = &self.groups[group].knob_paths[slot] {
                if !self.writer.is_outstanding(path) {
                    return Ok(None);
                }
            }
        }
        let path = &self.groups[group].spec.path;
        let Some(write) = self.backend.plan_knob(path, knob, bytes)? else { return Ok(None) };
        let applied = knob_action(group, knob, bytes);
        if current == bytes && !self.writer.is_outstanding(&write.path) {
            return Ok(None);
        }
        if self.dry_run {
            // Nothing changes on the machine, so the controller asks again every tick; log
            // each intended value once.
            if self.dry_run_intended.insert((group, knob), bytes) == Some(bytes) {
                return Ok(Some(applied));
            }
            self.stats.dry_run_writes += 1;
            tracing::info!(group = %self.groups[group].spec.name, path = %write.path.display(), value = %write.contents, "dry run: would write");
            return Ok(Some(applied));
        }
        if let Some(journal) = self.journal.as_mut() {
            journal.record(&Change::Write(write.clone()))?;
        }
        match self.writer.submit(write) {
            Ok(_) => {
                self.stats.writes_submitted += 1;
                Ok(Some(applied))
            }
            Err(e @ Error::WriterQueueFull { .. }) => {
                self.stats.writes_dropped += 1;
                tracing::warn!(error = %e, "write skipped this tick");
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }
}

pub(super) fn knob_action(group: GroupId, knob: Knob, bytes: Option<u64>) -> Action {
    match knob {
        Knob::Max => Action::SetMax { group, bytes },
        Knob::High => Action::SetHigh { group, bytes },
        Knob::Min => Action::SetMin { group, bytes },
        Knob::Low => Action::SetLow { group, bytes },
    }
}

/// `SwapFree:` of `<proc_root>/meminfo` in bytes (`SwapFree:        1048572 kB`); 0 if absent.
/// `bytes` rounded up to whole pages; values too large for that become the largest page
/// multiple (no wrap to 0, which as a limit would freeze a group).
pub(super) fn page_align_up(bytes: u64) -> u64 {
    bytes.checked_next_multiple_of(PAGE_BYTES).unwrap_or(u64::MAX / PAGE_BYTES * PAGE_BYTES)
}

pub(super) fn page_align_down(bytes: u64) -> u64 {
    bytes / PAGE_BYTES * PAGE_BYTES
}

pub(super) fn swap_free_bytes(proc_root: &Path) -> u64 {
    std::fs::read_to_string(proc_root.join("meminfo"))
        .ok()
        .and_then(|text| parse_meminfo_kb(&text, "SwapFree:"))
        .map_or(0, |kb| kb.saturating_mul(1024))
}

/// The value of `key` in /proc/meminfo text, in kB.
pub fn parse_meminfo_kb(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|l| l.strip_prefix(key)).and_then(|rest| rest.split_whitespace().next()).and_then(|v| v.parse().ok())
}
