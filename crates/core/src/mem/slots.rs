//! Where a pool's frames come from and go back to: its slots (free frames in the allocator,
//! frames lent to the global pool, borrowed global frames), the global pool's free frames,
//! and reclaim when none is free. Frames are taken from and given back to the frame
//! allocator here, and when a reservation is created or resized (reservations.rs).

use super::*;

impl<A: FrameAllocator> Memory<A> {
    /// A free frame for `req.pool`, of `req.placement`, taken out of every list. For a
    /// reservation: its free frames, then a frame it lent to the global pool, then (firm) a
    /// free global frame to borrow, then its own victim. For the global pool: its free frames,
    /// then a frame taken back from the firm reservation that borrowed most, then the global
    /// LRU's victim. A request for unevictable pages (`pins_pages`) reclaims nothing: every
    /// page reclaim can take lies in a level-C frame, and levels A/B never take one, so once
    /// its pool has no free or lent frame of its core it fails with
    /// [`MemError::PlacementExhausted`].
    pub(super) fn take_free(&mut self, req: FrameRequest, now: Nanos, allow_busy: bool) -> Result<u32, MemError> {
        if let Some(f) = self.alloc.take(req) {
            return Ok(f);
        }
        let pool = req.pool;
        if let Some(core) = req.placement.ab_core() {
            // A reservation takes back a slot it lent from its core's free frames, never by
            // reclaim: every page reclaim can take lies in a level-C frame.
            if pool != GLOBAL && self.pools[pool as usize].lent > 0 {
                if let Some(f) = self.alloc.take(FrameRequest { pool: GLOBAL, ..req }) {
                    self.pools[pool as usize].lent -= 1;
                    return Ok(f);
                }
            }
            return Err(MemError::PlacementExhausted { core });
        }
        if pool == GLOBAL {
            return self.global_take(now, allow_busy);
        }
        if self.pools[pool as usize].kind.size_is_cap() {
            return self.limit_take(req, now, allow_busy);
        }
        if self.pools[pool as usize].lent > 0 {
            let f = self.take_free(FrameRequest { pool: GLOBAL, ..req }, now, allow_busy)?;
            self.pools[pool as usize].lent -= 1;
            return Ok(f);
        }
        if self.pools[pool as usize].kind.borrows_global_frames() {
            if let Some(f) = self.alloc.take(FrameRequest { pool: GLOBAL, ..req }) {
                self.pools[pool as usize].borrowed += 1;
                return Ok(f);
            }
        }
        self.reclaim_one(pool, now, allow_busy).ok_or(MemError::ReservationExhausted(pool - 1))
    }

    /// A frame for limit group `pool` (cgroup `memory.max`/`memory.high`): at its size it
    /// must evict one of its own pages; at or above `high` it tries its own idle pages first
    /// (throttling), then takes from the global pool; below `high` it takes from the global
    /// pool, whose reclaim may take other groups' unprotected pages.
    fn limit_take(&mut self, req: FrameRequest, now: Nanos, allow_busy: bool) -> Result<u32, MemError> {
        let pool = req.pool;
        let charged = self.charged_pages(pool);
        let p = &self.pools[pool as usize];
        if charged >= p.size {
            return self.reclaim_one(pool, now, allow_busy).ok_or(MemError::ReservationExhausted(pool - 1));
        }
        if charged >= p.high {
            if let Some(f) = self.reclaim_one(pool, now, false) {
                return Ok(f);
            }
        }
        if let Some(f) = self.alloc.take(FrameRequest { pool: GLOBAL, ..req }) {
            return Ok(f);
        }
        self.global_take(now, allow_busy)
    }

    fn global_take(&mut self, now: Nanos, allow_busy: bool) -> Result<u32, MemError> {
        // Memory pressure: firm reservations give borrowed pages back first.
        let mut lenders: Vec<(u64, u32)> = (1..self.pools.len() as u32)
            .filter(|&p| self.pools[p as usize].borrowed > 0)
            .map(|p| (self.pools[p as usize].borrowed, p))
            .collect();
        lenders.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        for (_, q) in lenders {
            if let Some(f) = self.reclaim_one(q, now, allow_busy) {
                self.pools[q as usize].borrowed -= 1;
                return Ok(f);
            }
        }
        // Then the global LRU and the limit groups, each in proportion to its unprotected
        // pages as Linux scans cgroups in proportion to their size (smooth weighted
        // round-robin, so it stays deterministic); pages below `low` only when nothing else
        // is left, pages below `min` never.
        let mut victims: Vec<(u64, u32)> = Vec::new();
        for use_low in [true, false] {
            victims.clear();
            let global = self.charged_pages(GLOBAL);
            if global > 0 {
                victims.push((global, GLOBAL));
            }
            let mut held_by_low = false;
            for q in 1..self.pools.len() as u32 {
                let pl = &self.pools[q as usize];
                if !pl.kind.honours_protection() {
                    continue;
                }
                let protected = if use_low { pl.min.max(pl.low) } else { pl.min };
                let charged = self.charged_pages(q);
                held_by_low |= use_low && pl.low > pl.min && charged > pl.min;
                if charged > protected {
                    victims.push((charged - protected, q));
                }
            }
            let total: u64 = victims.iter().map(|v| v.0).sum();
            for p in 0..self.pools.len() as u32 {
                let weight = victims.iter().find(|v| v.1 == p).map_or(0, |v| v.0);
                let pl = &mut self.pools[p as usize];
                // A pool with nothing to give keeps no credit for later.
                pl.reclaim_credit = if weight == 0 { 0 } else { pl.reclaim_credit.saturating_add(weight as i64) };
            }
            // Highest credit first (ties: lower pool index); the chosen one pays the total.
            victims.sort_by(|a, b| {
                let (ca, cb) = (self.pools[a.1 as usize].reclaim_credit, self.pools[b.1 as usize].reclaim_credit);
                cb.cmp(&ca).then(a.1.cmp(&b.1))
            });
            for &(_, q) in &victims {
                if let Some(f) = self.reclaim_sparing(q, now, allow_busy, true) {
                    let pl = &mut self.pools[q as usize];
                    pl.reclaim_credit = pl.reclaim_credit.saturating_sub(total as i64);
                    return Ok(f);
                }
            }
            if !held_by_low {
                break;
            }
        }
        Err(MemError::OutOfMemory)
    }

    /// A frame no longer used by `pool` (a firm reservation returns borrowed ones first).
    pub(super) fn release_frame(&mut self, pool: u32, f: u32) {
        debug_assert_eq!(self.frames[f as usize].region, NIL);
        let p = &mut self.pools[pool as usize];
        if p.kind.size_is_cap() {
            // No slots (a limit group): the frame simply goes back to the global pool.
            self.alloc.give_back(GLOBAL, f);
        } else if pool != GLOBAL && p.borrowed > 0 {
            p.borrowed -= 1;
            self.alloc.give_back(GLOBAL, f);
        } else {
            self.alloc.give_back(pool, f);
        }
    }

    /// A slot of `pool` for a page whose frame is paid for elsewhere (No-SP-Mgmt duplicate):
    /// its frame goes to the global pool.
    pub(super) fn acquire_unbacked_slot(&mut self, pool: u32, now: Nanos) -> Result<(), MemError> {
        if self.pools[pool as usize].kind.size_is_cap() {
            // No slots: only the cap counts, so at the cap one of its own pages goes.
            if self.charged_pages(pool) >= self.pools[pool as usize].size {
                let g = self.reclaim_one(pool, now, true).ok_or(MemError::ReservationExhausted(pool - 1))?;
                self.alloc.give_back(GLOBAL, g);
            }
            return Ok(());
        }
        let p = &mut self.pools[pool as usize];
        if p.lent > 0 {
            p.lent -= 1;
            return Ok(());
        }
        if let Some(g) = self.alloc.take(FrameRequest { pool, placement: self.pools[pool as usize].placement }) {
            self.alloc.give_back(GLOBAL, g);
            return Ok(());
        }
        if self.pools[pool as usize].kind.borrows_global_frames() && self.alloc.free_frames(GLOBAL) > 0 {
            self.pools[pool as usize].borrowed += 1;
            return Ok(());
        }
        let g = self.reclaim_one(pool, now, true).ok_or(MemError::ReservationExhausted(pool - 1))?;
        self.alloc.give_back(GLOBAL, g);
        Ok(())
    }

    /// `pool` lost a page it accounted without getting its frame: the slot stays, unbacked
    /// (a firm reservation first gives up a borrowed slot).
    pub(super) fn release_unbacked_slot(&mut self, pool: u32) {
        if !self.pools[pool as usize].kind.sets_aside_frames() {
            return;
        }
        let p = &mut self.pools[pool as usize];
        if p.borrowed > 0 {
            p.borrowed -= 1;
        } else {
            p.lent += 1;
        }
    }

    /// Gives up `n` of `pool`'s slots (their frames go to the global pool), evicting its own
    /// pages if its free and lent slots do not cover them.
    pub(super) fn shrink_slots(&mut self, pool: u32, n: u64, now: Nanos) -> Result<(), MemError> {
        for _ in 0..n {
            if self.pools[pool as usize].lent > 0 {
                self.pools[pool as usize].lent -= 1;
            } else if let Some(g) = self.alloc.take(FrameRequest { pool, placement: self.pools[pool as usize].placement }) {
                self.alloc.give_back(GLOBAL, g);
            } else {
                let g = self.reclaim_one(pool, now, true).ok_or(MemError::ReservationExhausted(pool - 1))?;
                self.alloc.give_back(GLOBAL, g);
            }
        }
        Ok(())
    }
}
