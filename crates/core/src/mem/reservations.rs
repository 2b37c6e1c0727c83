//! Reservations and limit groups: admission, resizing, limit protection, and what each
//! reservation holds.

use super::*;

impl<A: FrameAllocator> Memory<A> {
    /// Admits a reservation and sets aside its frames (taken from the global pool, evicting
    /// unreserved pages or taking back borrowed ones if needed, with write-backs at `now`).
    ///
    /// Admission: the frames committed to reservations (sizes, minus what SPEL locks saved)
    /// plus the new size must fit in `total_frames − unreserved_min_frames`.
    pub fn create_reservation(&mut self, now: Nanos, spec: ReservationSpec) -> Result<ResId, MemError> {
        self.create_reservation_at(now, spec, Placement::Any)
    }

    /// [`Memory::create_reservation`] with its frames of `placement`: under MC²'s layout a
    /// core's level-A/B banks (its spaces then place their pages the same way and never page)
    /// or the level-C banks. With a layout, admission also holds per bank set
    /// ([`Memory::admit_placed`]).
    pub fn create_reservation_at(&mut self, now: Nanos, spec: ReservationSpec, placement: Placement) -> Result<ResId, MemError> {
        if spec.pages < self.cfg.min_reservation_pages.max(1) {
            return Err(MemError::ReservationTooSmall { name: spec.name, pages: spec.pages, min: self.cfg.min_reservation_pages.max(1) });
        }
        let capacity = u64::from(self.cfg.total_frames - self.cfg.unreserved_min_frames);
        let committed = self.committed_frames();
        let kind = PoolKind::of(spec.kind);
        if kind.counts_toward_admission() && committed + spec.pages > capacity {
            return Err(MemError::AdmissionRejected {
                name: spec.name,
                requested: spec.pages,
                available: capacity.saturating_sub(committed),
                total: u64::from(self.cfg.total_frames),
            });
        }
        if kind.counts_toward_admission() {
            self.admit_placed(&spec.name, placement, spec.pages)?;
        }
        let p = self.pools.len() as u32;
        // All slots start unbacked and are filled from the global pool right away (a limit
        // group has no slots: its frames come from the global pool on demand).
        let lent = if kind.sets_aside_frames() { spec.pages } else { 0 };
        self.pools.push(Pool::new(spec.name, kind, spec.pages, lent));
        self.pools[p as usize].placement = placement;
        self.alloc.add_pool(p);
        self.conserved.push(VecDeque::new());
        self.elists.grow_lists(unevictable(p) as usize + 1);
        while self.pools[p as usize].lent > 0 {
            let f = self.take_free(FrameRequest { pool: GLOBAL, placement }, now, true)?;
            self.pools[p as usize].lent -= 1;
            self.alloc.give_back(p, f);
        }
        self.debug_check();
        Ok(ResId(p - 1))
    }

    pub(super) fn pool_of(&self, res: ResId) -> Result<u32, MemError> {
        let p = res.0.checked_add(1).ok_or(MemError::NoSuchReservation(res.0))?;
        if (p as usize) < self.pools.len() {
            Ok(p)
        } else {
            Err(MemError::NoSuchReservation(res.0))
        }
    }

    /// Admission per bank set, under a layout that places frames: what reservations of the
    /// same placement promise (and, for the level-C banks, locked regions), plus `pages`, must
    /// fit in its banks (less `unreserved_min_frames` for the level-C banks, which the OS and
    /// unreserved pages share). Level-A/B frames are never reclaimed, so for them `pages` must
    /// also be free now.
    pub(super) fn admit_placed(&self, name: &str, placement: Placement, pages: u64) -> Result<(), MemError> {
        let Some(frames) = self.alloc.placement_frames(placement) else { return Ok(()) };
        let core = placement.ab_core();
        let capacity = if core.is_some() { frames } else { frames.saturating_sub(u64::from(self.cfg.unreserved_min_frames)) };
        let placed: u64 = self.pools[1..]
            .iter()
            .filter(|p| p.kind.counts_toward_admission() && p.placement.ab_core() == core)
            .map(|p| p.size - p.locked_charge)
            .sum();
        // Server bounds never hold level-A/B spaces: their hard commitments are level C's.
        let committed = placed + if core.is_none() { self.locked_frames + self.bound_committed_frames() } else { 0 };
        let mut available = capacity.saturating_sub(committed);
        if core.is_some() {
            available = available.min(self.alloc.free_frames_for(FrameRequest { pool: GLOBAL, placement }));
        }
        if pages > available {
            return Err(MemError::PlacementAdmission {
                name: name.to_string(),
                requested: pages,
                available,
                frames,
                banks: placement.banks(),
            });
        }
        Ok(())
    }

    /// Frames promised to reservations, locked regions and hard bounds (limit groups and soft
    /// bounds promise nothing).
    pub fn committed_frames(&self) -> u64 {
        let sizes: u64 = self.pools[1..].iter().filter(|p| p.kind.counts_toward_admission()).map(|p| p.size - p.locked_charge).sum();
        sizes + self.locked_frames + self.bound_committed_frames()
    }

    /// Resizes a reservation at `now`. Growing a hard or firm reservation is subject to
    /// admission (physical memory); its new slots start lent to the global pool and are taken
    /// back on demand. Shrinking gives slots up: lent ones, then free ones, then a hard
    /// reservation evicts its own pages (dirty ones written back through the device) while a
    /// firm one keeps them as borrowed pages.
    /// A limit group (`memory.max`) may be set to any size from 1 page up to the machine's
    /// frames; shrinking evicts its own pages down to the new size. On error nothing is
    /// resized, though pages already evicted stay evicted.
    pub fn set_reservation_size(&mut self, now: Nanos, res: ResId, pages: u64) -> Result<(), MemError> {
        let p = self.pool_of(res)?;
        let pi = p as usize;
        let (kind, size) = (self.pools[pi].kind, self.pools[pi].size);
        let name = self.pools[pi].name.clone();
        let floor = if kind.size_is_cap() { 1 } else { self.cfg.min_reservation_pages.max(1).max(self.pools[pi].locked_charge + 1) };
        if pages < floor {
            return Err(MemError::ReservationTooSmall { name, pages, min: floor });
        }
        if kind.size_is_cap() {
            let total = u64::from(self.cfg.total_frames);
            if pages > total {
                return Err(MemError::AdmissionRejected { name, requested: pages, available: total, total });
            }
            while self.charged_pages(p) > pages {
                let f = self.reclaim_one(p, now, true).ok_or(MemError::ReservationExhausted(res.0))?;
                self.alloc.give_back(GLOBAL, f);
            }
            self.pools[pi].size = pages;
        } else if pages > size {
            let capacity = u64::from(self.cfg.total_frames - self.cfg.unreserved_min_frames);
            let committed = self.committed_frames();
            if committed + (pages - size) > capacity {
                return Err(MemError::AdmissionRejected {
                    name,
                    requested: pages,
                    available: capacity.saturating_sub(committed) + size,
                    total: u64::from(self.cfg.total_frames),
                });
            }
            self.admit_placed(&name, self.pools[pi].placement, pages - size)?;
            let pool = &mut self.pools[pi];
            let mut grow = pages - size;
            // A firm reservation's borrowed frames become its own first.
            let absorbed = grow.min(pool.borrowed);
            pool.borrowed -= absorbed;
            grow -= absorbed;
            pool.lent += grow;
            pool.size = pages;
        } else {
            // One slot at a time, so an eviction failure leaves the books balanced.
            while self.pools[pi].size > pages {
                if self.pools[pi].lent > 0 {
                    self.pools[pi].lent -= 1;
                } else if let Some(g) = self.alloc.take(FrameRequest { pool: p, placement: self.pools[pi].placement }) {
                    self.alloc.give_back(GLOBAL, g);
                } else if self.pools[pi].kind.borrows_global_frames() {
                    // A firm reservation keeps its pages beyond the new size as borrowed ones,
                    // which global memory pressure takes back first.
                    self.pools[pi].borrowed += 1;
                } else {
                    let g = self.reclaim_one(p, now, true).ok_or(MemError::ReservationExhausted(res.0))?;
                    self.alloc.give_back(GLOBAL, g);
                }
                self.pools[pi].size -= 1;
            }
        }
        self.debug_check();
        Ok(())
    }

    /// Proactive reclaim of a limit group (cgroup v2's `memory.reclaim`): evicts up to `pages`
    /// of its own pages at `now`, as shrinking its limit would (victims chosen the same way,
    /// dirty ones written back, frames back to the global pool), without changing its size.
    /// Returns the pages evicted: fewer than asked when nothing more can be (every page left
    /// is pinned, or the group holds fewer).
    pub fn reclaim_limit_group(&mut self, now: Nanos, res: ResId, pages: u64) -> Result<u64, MemError> {
        let p = self.pool_of(res)?;
        if !self.pools[p as usize].kind.size_is_cap() {
            return Err(MemError::NotALimitGroup(res.0));
        }
        let mut evicted = 0;
        while evicted < pages {
            let Some(f) = self.reclaim_one(p, now, true) else { break };
            self.alloc.give_back(GLOBAL, f);
            evicted += 1;
        }
        self.debug_check();
        Ok(evicted)
    }

    /// Sets a limit group's `memory.high`, `memory.min` and `memory.low`, in pages (`None`:
    /// no throttle / no protection). Above `high` a faulting task of the group reclaims the
    /// group's own pages first (synchronously, paying the reclaim cost) and only takes a new
    /// frame when none of them can be evicted, so `high` may be exceeded, never `size` (max).
    /// Pages of a group charged at or below `min` are never reclaimed by other pools' faults;
    /// below `low` only when no unprotected page is left anywhere. Lowering `high` reclaims
    /// nothing by itself (Linux reclaims on the next charge too).
    pub fn set_limit_protection(&mut self, res: ResId, high: Option<u64>, min: Option<u64>, low: Option<u64>) -> Result<(), MemError> {
        let p = self.pool_of(res)?;
        let pool = &mut self.pools[p as usize];
        if !pool.kind.honours_protection() {
            return Err(MemError::NotALimitGroup(res.0));
        }
        pool.high = high.unwrap_or(u64::MAX);
        pool.min = min.unwrap_or(0);
        pool.low = low.unwrap_or(0);
        Ok(())
    }

    /// Limits the rate at which pages charged to limit group `res` are written back to their
    /// device (`None`: no limit): a write-back over the limit joins the device's queue when
    /// the group's earlier writes have been paid for, and delays nobody before then.
    pub fn set_write_limit(&mut self, res: ResId, bytes_per_s: Option<u64>) -> Result<(), MemError> {
        let p = self.pool_of(res)?;
        if !self.pools[p as usize].kind.honours_protection() {
            return Err(MemError::NotALimitGroup(res.0));
        }
        match (self.write_throttles.iter().position(|&(q, _)| q == p), bytes_per_s) {
            (Some(k), None) => {
                self.write_throttles.remove(k);
            }
            (Some(k), limit) => self.write_throttles[k].1.set_limit(limit),
            (None, None) => {}
            (None, limit) => {
                let mut t = Throttle::default();
                t.set_limit(limit);
                self.write_throttles.push((p, t));
            }
        }
        Ok(())
    }

    /// A limit group's high, min and low in pages, as [`Memory::set_limit_protection`] set them.
    pub fn limit_protection(&self, res: ResId) -> Result<LimitProtection, MemError> {
        let p = &self.pools[self.pool_of(res)? as usize];
        if !p.kind.honours_protection() {
            return Err(MemError::NotALimitGroup(res.0));
        }
        Ok(LimitProtection {
            high_pages: (p.high != u64::MAX).then_some(p.high),
            min_pages: (p.min > 0).then_some(p.min),
            low_pages: (p.low > 0).then_some(p.low),
        })
    }

    /// Pages charged to pool `p` (its active and inactive lists).
    pub(super) fn charged_pages(&self, p: u32) -> u64 {
        u64::from(self.elists.len(active(p))) + u64::from(self.elists.len(inactive(p)))
    }

    /// Pages of level-A/B spaces pool `p` holds (never evicted, so not on its LRU lists).
    pub(super) fn pinned_pages(&self, p: u32) -> u64 {
        u64::from(self.elists.len(unevictable(p)))
    }

    // ---------------------------------------------------------------- read-outs

    /// Pages charged to `res` (O(1); `reservation_stats` also walks its lists).
    pub fn reservation_charged_pages(&self, res: ResId) -> Result<u64, MemError> {
        let p = self.pool_of(res)?;
        Ok(self.charged_pages(p) + self.pinned_pages(p))
    }

    pub fn reservation_stats(&self, res: ResId) -> Result<ReservationStats, MemError> {
        let p = self.pool_of(res)?;
        let pool = &self.pools[p as usize];
        let act = u64::from(self.elists.len(active(p)));
        let inact = u64::from(self.elists.len(inactive(p)));
        Ok(ReservationStats {
            size_pages: pool.size,
            kind: pool.kind.reservation_kind(),
            frames_held: self.frames_held(p),
            charged_pages: act + inact + self.pinned_pages(p),
            active_pages: act,
            inactive_pages: inact,
            free_frames: self.alloc.free_frames(p),
            conserved_frames: self.conserved[p as usize].len() as u64,
            lent_frames: pool.lent,
            borrowed_frames: pool.borrowed,
            locked_charge_pages: pool.locked_charge,
            evictions: pool.evictions,
            spc_unmaps: pool.spc_unmaps,
            ownership_transfers: pool.transfers,
            writebacks: pool.writebacks,
        })
    }

    /// Frames set aside for pool `p`: free, conserved, and those of pages it holds.
    pub(super) fn frames_held(&self, p: u32) -> u64 {
        let holders = self
            .elists
            .iter(active(p))
            .chain(self.elists.iter(inactive(p)))
            .chain(self.elists.iter(unevictable(p)))
            .filter(|&e| self.frames[self.entries[e as usize].frame as usize].first == e)
            .count() as u64;
        holders + self.alloc.free_frames(p) + self.conserved[p as usize].len() as u64
    }

    pub fn reservations(&self) -> impl Iterator<Item = ResId> {
        (0..self.pools.len() as u32 - 1).map(ResId)
    }
}
