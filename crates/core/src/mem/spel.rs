//! Shared-Page Eviction Lock, the `auto` rule and its usage measurement, and address-space
//! exit.

use super::list::NIL;
use super::*;

impl<A: FrameAllocator> Memory<A> {
    /// Applies SPEL to a `spel` (or `auto`) region: runs the admission test, then makes the
    /// whole region resident in locked frames, never to be evicted. Every reservation
    /// mapping it gives up the region's size `S` (its own pages are evicted if it must), and
    /// the region is held once, so `n` sharers use `n·M − (n−1)·S` frames in total.
    ///
    /// Admission (as in the paper's system call): each sharing reservation's size not yet
    /// given to other locks must exceed `S`. Returns when the last page read completes (pages
    /// never written are zero-filled at once).
    pub fn lock_region(&mut self, now: Nanos, region: RegionId) -> Result<Nanos, MemError> {
        let r = self.region_idx(region)?;
        let reg = &self.regions[r];
        if !matches!(reg.policy, SharePolicy::Spel | SharePolicy::Auto) || reg.is_cow_base() {
            return Err(MemError::NotLockable { region: region.0, policy: reg.policy });
        }
        if reg.mode == Mode::Locked {
            return Ok(now);
        }
        let s_pages = u64::from(reg.pages);
        let mut participants: Vec<u32> = reg.mappers.iter().map(|&(s, _)| self.spaces[s as usize].pool).filter(|&p| p != GLOBAL).collect();
        participants.sort_unstable();
        participants.dedup();
        for &p in &participants {
            self.spel_admit(r as u32, p)?;
        }
        if participants.is_empty() {
            let capacity = u64::from(self.cfg.total_frames - self.cfg.unreserved_min_frames);
            let committed = self.committed_frames();
            if committed + s_pages > capacity {
                return Err(MemError::AdmissionRejected {
                    name: self.regions[r].name.clone(),
                    requested: s_pages,
                    available: capacity.saturating_sub(committed),
                    total: u64::from(self.cfg.total_frames),
                });
            }
            self.admit_placed(&self.regions[r].name, Placement::Any, s_pages)?;
        }
        // 1. Resident pages leave every reservation's accounting and become locked frames.
        for i in 0..self.regions[r].pages {
            let f = self.regions[r].frame[i as usize];
            if f != NIL {
                self.detach_for_lock(f);
            }
        }
        self.regions[r].mode = Mode::Locked;
        // 2. Each sharer gives up S slots; their frames go to the global pool.
        for &p in &participants {
            self.pools[p as usize].locked_charge += s_pages;
            self.shrink_slots(p, s_pages, now)?;
        }
        self.regions[r].participants = participants;
        // 3. The missing pages come from the global pool, read in runs.
        let mut ready = now;
        let mut run: Vec<u32> = Vec::new();
        for i in 0..self.regions[r].pages {
            if self.regions[r].frame[i as usize] != NIL {
                ready = ready.max(self.flush_lock_run(now, r, &mut run));
                continue;
            }
            let g = self.take_free(FrameRequest::from_pool(GLOBAL), now, true)?;
            self.frames[g as usize] =
                Frame { region: r as u32, page: i, first: NIL, dirty: false, pinned: false, ready_at: now, readahead: false };
            self.locked_frames += 1;
            let reg = &mut self.regions[r];
            reg.frame[i as usize] = g;
            reg.pflags[i as usize] |= MATERIAL;
            if reg.pflags[i as usize] & BACKED != 0 {
                run.push(g);
                if run.len() >= 64 {
                    ready = ready.max(self.flush_lock_run(now, r, &mut run));
                }
            } else {
                ready = ready.max(self.flush_lock_run(now, r, &mut run));
            }
        }
        ready = ready.max(self.flush_lock_run(now, r, &mut run));
        self.debug_check();
        Ok(ready)
    }

    fn flush_lock_run(&mut self, now: Nanos, r: usize, run: &mut Vec<u32>) -> Nanos {
        if run.is_empty() {
            return now;
        }
        let dev = self.regions[r].device as usize;
        let done = self.devices[dev].submit(now, IoOp::Read, run.len() as u64 * self.cfg.page_bytes);
        for &g in run.iter() {
            self.frames[g as usize].ready_at = done;
        }
        run.clear();
        done
    }

    fn spel_admit(&self, r: u32, p: u32) -> Result<(), MemError> {
        let s_pages = u64::from(self.regions[r as usize].pages);
        let pool = &self.pools[p as usize];
        let effective = pool.size - pool.locked_charge;
        if effective <= s_pages {
            return Err(MemError::SpelAdmission {
                region: r,
                pages: s_pages,
                res: p - 1,
                effective,
                need: pool.locked_charge + s_pages + 1,
            });
        }
        Ok(())
    }

    /// A reservation starts sharing an already locked region.
    pub(super) fn spel_join(&mut self, now: Nanos, r: u32, p: u32) -> Result<(), MemError> {
        self.spel_admit(r, p)?;
        let s_pages = u64::from(self.regions[r as usize].pages);
        self.pools[p as usize].locked_charge += s_pages;
        self.shrink_slots(p, s_pages, now)?;
        let parts = &mut self.regions[r as usize].participants;
        parts.push(p);
        parts.sort_unstable();
        Ok(())
    }

    /// Takes a resident page out of every pool's accounting into a locked frame. The holder
    /// keeps an (unbacked) slot for the frame it lost; SPC sharers get their conserved frame
    /// back as a free one.
    fn detach_for_lock(&mut self, f: u32) {
        let mode = self.regions[self.frames[f as usize].region as usize].mode;
        let mut e = self.frames[f as usize].first;
        let mut first = true;
        while e != NIL {
            let Entry { pool: q, next, .. } = self.entries[e as usize];
            if !first && mode == Mode::Spc {
                let g = self.conserved[q as usize].pop_front().expect("SPC: every non-owner conserves a frame");
                self.release_frame(q, g);
            } else {
                self.release_unbacked_slot(q);
            }
            self.remove_entry(e);
            first = false;
            e = next;
        }
        self.bound_forget_frame(f);
        self.locked_frames += 1;
    }

    // ---------------------------------------------------------------- usage and `auto`

    /// Ends a usage window (typically a job) of `space`: for every shared region it maps,
    /// records how many distinct pages it touched since the last call.
    pub fn end_window(&mut self, space: AsId) -> Result<(), MemError> {
        let s = self.space_idx(space)?;
        for vi in 0..self.spaces[s].vmas.len() {
            let v = self.spaces[s].vmas[vi];
            let reg = &self.regions[v.region as usize];
            if !(reg.kind.is_shared() || reg.is_cow_base()) {
                continue;
            }
            let mut touched = 0u64;
            for pte in &mut self.spaces[s].ptes[v.start as usize..(v.start + v.pages) as usize] {
                if pte.flags & WINDOW != 0 {
                    touched += 1;
                    pte.flags &= !WINDOW;
                }
            }
            let u = self.regions[v.region as usize].usage.entry(s as u32).or_default();
            u.windows += 1;
            u.pages_sum += touched;
            u.pages_max = u.pages_max.max(touched);
        }
        Ok(())
    }

    /// Measured use of a shared region per address space, in space order.
    pub fn region_usage(&self, region: RegionId) -> Result<Vec<(AsId, RegionUsage)>, MemError> {
        let r = self.region_idx(region)?;
        Ok(self.regions[r].usage.iter().map(|(&s, &u)| (AsId(s), u)).collect())
    }

    /// Decides an `auto` region (Sec. IV-C): SPEL if `Max(S) < n·Avg(S)`, else SPC, where
    /// `Max(S)` is the region's size (what SPEL locks), `Avg(S)` the mean over measuring
    /// address spaces of their mean pages touched per window, and `n` the number of
    /// reservations sharing it. Applies SPEL at `now` if chosen and admitted; otherwise the
    /// region stays under SPC. Idempotent once locked.
    pub fn resolve_auto(&mut self, now: Nanos, region: RegionId) -> Result<AutoDecision, MemError> {
        let r = self.region_idx(region)?;
        let reg = &self.regions[r];
        if reg.policy != SharePolicy::Auto {
            return Err(MemError::NotLockable { region: region.0, policy: reg.policy });
        }
        let measured: Vec<f64> = reg.usage.values().filter(|u| u.windows > 0).map(RegionUsage::avg_pages).collect();
        if measured.is_empty() {
            return Err(MemError::NoUsageMeasured(region.0));
        }
        let avg = measured.iter().sum::<f64>() / measured.len() as f64;
        let mut pools: Vec<u32> = reg.mappers.iter().map(|&(s, _)| self.spaces[s as usize].pool).collect();
        pools.sort_unstable();
        pools.dedup();
        let n = pools.iter().filter(|&&p| p != GLOBAL).count().max(1) as u64;
        let max_pages = u64::from(reg.pages);
        let mut d = AutoDecision { chosen: SharePolicy::Spc, max_pages, avg_pages: avg, n, spel_rejected: None };
        if reg.mode == Mode::Locked {
            d.chosen = SharePolicy::Spel;
        } else if (max_pages as f64) < n as f64 * avg {
            match self.lock_region(now, region) {
                Ok(_) => d.chosen = SharePolicy::Spel,
                Err(e) => d.spel_rejected = Some(e.to_string()),
            }
        }
        Ok(d)
    }

    // ---------------------------------------------------------------- exit

    /// Tears down an address space at `now`: its private pages are freed, its charges on
    /// shared pages undone per policy (first-touch charges stay with the owner, as memory
    /// cgroups keep them), its copy-on-write references released.
    pub fn exit_space(&mut self, now: Nanos, space: AsId) -> Result<(), MemError> {
        let s = self.space_idx(space)?;
        let pool = self.spaces[s].pool;
        let vmas = std::mem::take(&mut self.spaces[s].vmas);
        for v in &vmas {
            for i in 0..v.pages {
                self.clear_pte(s, v.start + i);
            }
        }
        for (vi, v) in vmas.iter().enumerate() {
            let me = (s as u32, vi as u32);
            self.regions[v.region as usize].mappers.retain(|&m| m != me);
            if v.shadow != NIL {
                self.regions[v.shadow as usize].mappers.retain(|&m| m != me);
            }
        }
        // Once every one of the space's mappings is gone (its vmas are taken above).
        for v in &vmas {
            self.mappers_changed(v.region);
            if v.shadow != NIL {
                self.mappers_changed(v.shadow);
            }
        }
        for v in &vmas {
            let r = v.region;
            if v.shadow != NIL {
                for i in 0..v.pages {
                    let sh = &self.regions[v.shadow as usize];
                    let own = sh.frame[i as usize] != NIL || sh.pflags[i as usize] & MATERIAL != 0;
                    let refs = self.regions[r as usize].cow_refs[i as usize];
                    if !own && refs > 0 {
                        self.regions[r as usize].cow_refs[i as usize] = refs - 1;
                        if refs == 1 {
                            self.discard_page(r, i);
                            continue;
                        }
                    }
                    self.drop_if_unmapped(pool, r, i, now);
                }
                self.discard_region(v.shadow);
            } else if !self.regions[r as usize].kind.is_shared() {
                self.discard_region(r);
            } else {
                for i in 0..v.pages {
                    self.drop_if_unmapped(pool, r, i, now);
                }
            }
        }
        self.bound_space_exiting(s);
        let sp = &mut self.spaces[s];
        sp.ptes = Vec::new();
        sp.alive = false;
        debug_assert_eq!(sp.stats.resident_pages, 0);
        self.debug_check();
        Ok(())
    }

    /// Drops `pool`'s charge on page `i` of `r` if no address space of `pool` maps `r` any more.
    fn drop_if_unmapped(&mut self, pool: u32, r: u32, i: u32, now: Nanos) {
        if pool == GLOBAL {
            return;
        }
        let f = self.regions[r as usize].frame[i as usize];
        if f == NIL {
            return;
        }
        let still = self.regions[r as usize].mappers.iter().any(|&(s2, _)| self.spaces[s2 as usize].pool == pool);
        if !still {
            self.drop_charge(pool, f, now);
        }
    }

    /// Frees every page of a private region and retires it.
    fn discard_region(&mut self, r: u32) {
        for i in 0..self.regions[r as usize].pages {
            self.discard_page(r, i);
        }
        let reg = &mut self.regions[r as usize];
        reg.alive = false;
        reg.mappers.clear();
        reg.solo = None;
        reg.usage.clear();
    }
}
