//! Finding free frames: free lists, lent and borrowed frames, victim selection (global
//! two-list LRU, per-reservation FIFO second chance), and what evicting a page means under
//! each shared-page policy.

use super::list::NIL;
use super::*;

impl Memory {
    // ------------------------------------------------------------- charge entries

    pub(super) fn new_entry(&mut self, f: u32, pool: u32) -> u32 {
        let entry = Entry { frame: f, pool, next: NIL };
        let e = match self.free_entries.pop() {
            Some(e) => {
                self.entries[e as usize] = entry;
                e
            }
            None => {
                self.entries.push(entry);
                let n = self.entries.len();
                if n > self.elists.elements() {
                    self.elists.grow_elements(n.next_power_of_two());
                }
                n as u32 - 1
            }
        };
        // Append to the frame's chain (FCFS: the first entry is the holder).
        let head = self.frames[f as usize].first;
        if head == NIL {
            self.frames[f as usize].first = e;
        } else {
            let mut last = head;
            while self.entries[last as usize].next != NIL {
                last = self.entries[last as usize].next;
            }
            self.entries[last as usize].next = e;
        }
        e
    }

    /// Unlinks an entry from its frame's chain and its list, and frees it.
    pub(super) fn remove_entry(&mut self, e: u32) {
        let Entry { frame: f, next, .. } = self.entries[e as usize];
        let head = self.frames[f as usize].first;
        if head == e {
            self.frames[f as usize].first = next;
        } else {
            let mut cur = head;
            while self.entries[cur as usize].next != e {
                cur = self.entries[cur as usize].next;
                debug_assert_ne!(cur, NIL, "entry {e} is on its frame's chain");
            }
            self.entries[cur as usize].next = next;
        }
        self.elists.remove(e);
        self.entries[e as usize] = Entry { frame: NIL, pool: NIL, next: NIL };
        self.free_entries.push(e);
    }

    pub(super) fn entry_of(&self, pool: u32, f: u32) -> Option<u32> {
        let mut e = self.frames[f as usize].first;
        while e != NIL {
            if self.entries[e as usize].pool == pool {
                return Some(e);
            }
            e = self.entries[e as usize].next;
        }
        None
    }

    // ------------------------------------------------------------- free frames

    /// A free frame for `pool`, taken out of every list. For a reservation: its free list,
    /// then a frame it lent to the global pool, then (firm) a free global frame to borrow,
    /// then its own victim. For the global pool: its free list, then a frame taken back from
    /// the firm reservation that borrowed most, then the global LRU's victim.
    pub(super) fn take_free(&mut self, pool: u32, now: Nanos, allow_busy: bool) -> Result<u32, MemError> {
        if let Some(f) = self.flists.pop_front(free_list(pool)) {
            return Ok(f);
        }
        if pool == GLOBAL {
            return self.global_take(now, allow_busy);
        }
        if self.pools[pool as usize].kind == PoolKind::Limit {
            return self.limit_take(pool, now, allow_busy);
        }
        if self.pools[pool as usize].lent > 0 {
            let f = self.take_free(GLOBAL, now, allow_busy)?;
            self.pools[pool as usize].lent -= 1;
            return Ok(f);
        }
        if self.pools[pool as usize].kind == PoolKind::Firm {
            if let Some(f) = self.flists.pop_front(free_list(GLOBAL)) {
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
    fn limit_take(&mut self, pool: u32, now: Nanos, allow_busy: bool) -> Result<u32, MemError> {
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
        if let Some(f) = self.flists.pop_front(free_list(GLOBAL)) {
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
                if pl.kind != PoolKind::Limit {
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
                if let Some(f) = self.reclaim_one(q, now, allow_busy) {
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
        if p.kind == PoolKind::Limit {
            // A limit group has no slots: the frame simply goes back to the global pool.
            self.flists.push_back(free_list(GLOBAL), f);
        } else if pool != GLOBAL && p.borrowed > 0 {
            p.borrowed -= 1;
            self.flists.push_back(free_list(GLOBAL), f);
        } else {
            self.flists.push_back(free_list(pool), f);
        }
    }

    /// A slot of `pool` for a page whose frame is paid for elsewhere (No-SP-Mgmt duplicate):
    /// its frame goes to the global pool.
    pub(super) fn acquire_unbacked_slot(&mut self, pool: u32, now: Nanos) -> Result<(), MemError> {
        if self.pools[pool as usize].kind == PoolKind::Limit {
            // No slots: only the cap counts, so at the cap one of its own pages goes.
            if self.charged_pages(pool) >= self.pools[pool as usize].size {
                let g = self.reclaim_one(pool, now, true).ok_or(MemError::ReservationExhausted(pool - 1))?;
                self.flists.push_back(free_list(GLOBAL), g);
            }
            return Ok(());
        }
        let p = &mut self.pools[pool as usize];
        if p.lent > 0 {
            p.lent -= 1;
            return Ok(());
        }
        if let Some(g) = self.flists.pop_front(free_list(pool)) {
            self.flists.push_back(free_list(GLOBAL), g);
            return Ok(());
        }
        if self.pools[pool as usize].kind == PoolKind::Firm && !self.flists.is_empty(free_list(GLOBAL)) {
            self.pools[pool as usize].borrowed += 1;
            return Ok(());
        }
        let g = self.reclaim_one(pool, now, true).ok_or(MemError::ReservationExhausted(pool - 1))?;
        self.flists.push_back(free_list(GLOBAL), g);
        Ok(())
    }

    /// `pool` lost a page it accounted without getting its frame: the slot stays, unbacked
    /// (a firm reservation first gives up a borrowed slot).
    pub(super) fn release_unbacked_slot(&mut self, pool: u32) {
        if pool == GLOBAL || self.pools[pool as usize].kind == PoolKind::Limit {
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
            } else if let Some(g) = self.flists.pop_front(free_list(pool)) {
                self.flists.push_back(free_list(GLOBAL), g);
            } else {
                let g = self.reclaim_one(pool, now, true).ok_or(MemError::ReservationExhausted(pool - 1))?;
                self.flists.push_back(free_list(GLOBAL), g);
            }
        }
        Ok(())
    }

    // ------------------------------------------------------------- victims

    /// Picks a victim of `pool` and evicts (or, under SPC, unmaps) it; returns the frame
    /// `pool` gains.
    pub(super) fn reclaim_one(&mut self, pool: u32, now: Nanos, allow_busy: bool) -> Option<u32> {
        let e = if pool == GLOBAL { self.lru_victim(now, allow_busy)? } else { self.second_chance_victim(pool, now, allow_busy)? };
        Some(self.evict_entry(e, now))
    }

    /// Tests (and clears) the referenced bits `pool` can see for frame `f`: those of address
    /// spaces bound to `pool`, or all of them for the global pool — Linux's memcg reclaim
    /// likewise only counts references from the reclaiming group's mms.
    fn test_referenced(&mut self, pool: u32, f: u32) -> bool {
        let Frame { region: r, page: i, .. } = self.frames[f as usize];
        let mut seen = false;
        for k in 0..self.regions[r as usize].mappers.len() {
            let (s, vi) = self.regions[r as usize].mappers[k];
            let sp = &mut self.spaces[s as usize];
            if pool != GLOBAL && sp.pool != pool {
                continue;
            }
            let vpn = sp.vmas[vi as usize].start + i;
            let pte = &mut sp.ptes[vpn as usize];
            if pte.frame == f && pte.flags & (PRESENT | REFERENCED) == PRESENT | REFERENCED {
                pte.flags &= !REFERENCED;
                seen = true;
            }
        }
        seen
    }

    /// FIFO with second chance over a reservation's two lists (after Mach, Fig. 1 of the
    /// paper). Pages enter at the active tail. When the inactive list is empty it is refilled
    /// from the active head: a referenced page has its bit cleared and goes back to the
    /// active tail (its second chance), an unreferenced one moves to the inactive tail, until
    /// `reservation_inactive_percent` of the pages are inactive. The victim is the inactive
    /// head, unless it was referenced again since, in which case it is reactivated. Pages
    /// under I/O or pinned are passed over (under I/O: chosen only as a last resort when
    /// `allow_busy`).
    fn second_chance_victim(&mut self, p: u32, now: Nanos, allow_busy: bool) -> Option<u32> {
        let (act, ina) = (active(p), inactive(p));
        let total = self.elists.len(act) + self.elists.len(ina);
        if total == 0 {
            return None;
        }
        let target = (u64::from(total) * u64::from(self.cfg.reservation_inactive_percent) / 100).max(1) as u32;
        let mut budget = 4 * u64::from(total) + 4;
        let mut fallback = None;
        while budget > 0 {
            if self.elists.is_empty(ina) {
                let mut scan = 2 * self.elists.len(act) + 1;
                while self.elists.len(ina) < target && scan > 0 {
                    let Some(e) = self.elists.front(act) else {
                        break;
                    };
                    scan -= 1;
                    let f = self.entries[e as usize].frame;
                    if self.test_referenced(p, f) {
                        self.elists.move_to_back(act, e);
                    } else {
                        self.elists.move_to_back(ina, e);
                    }
                }
                if self.elists.is_empty(ina) {
                    let e = self.elists.front(act)?;
                    self.elists.move_to_back(ina, e);
                }
            }
            budget -= 1;
            if let Some(e) = self.judge_inactive_head(p, now, allow_busy, &mut fallback) {
                return Some(e);
            }
        }
        fallback
    }

    /// The last step of both replacement policies: the inactive head of `pool` is the victim
    /// unless it is busy (back to the active tail, remembered as a last resort when busy pages
    /// may be taken) or referenced again (promoted to the active tail).
    fn judge_inactive_head(&mut self, pool: u32, now: Nanos, allow_busy: bool, fallback: &mut Option<u32>) -> Option<u32> {
        let (act, ina) = (active(pool), inactive(pool));
        let e = self.elists.front(ina).expect("refilled");
        let fr = self.frames[self.entries[e as usize].frame as usize];
        if fr.pinned || fr.ready_at > now {
            if allow_busy && !fr.pinned && fallback.is_none() {
                *fallback = Some(e);
            }
            self.elists.move_to_back(act, e);
            return None;
        }
        if self.test_referenced(pool, self.entries[e as usize].frame) {
            self.elists.move_to_back(act, e);
            return None;
        }
        Some(e)
    }

    /// Linux-like two-list LRU of the global pool. New pages enter the inactive tail. Before
    /// each pick, while `inactive × ratio < active`, the active head is demoted to the
    /// inactive tail with its referenced bits cleared. The inactive head is evicted unless it
    /// was referenced, in which case it is promoted to the active tail.
    fn lru_victim(&mut self, now: Nanos, allow_busy: bool) -> Option<u32> {
        let (act, ina) = (active(GLOBAL), inactive(GLOBAL));
        let total = self.elists.len(act) + self.elists.len(ina);
        if total == 0 {
            return None;
        }
        let ratio = self.cfg.global_inactive_ratio;
        let mut budget = 4 * u64::from(total) + 4;
        let mut fallback = None;
        while budget > 0 {
            budget -= 1;
            while !self.elists.is_empty(act) && self.elists.len(ina).saturating_mul(ratio) < self.elists.len(act) {
                let e = self.elists.front(act).expect("non-empty");
                self.test_referenced(GLOBAL, self.entries[e as usize].frame);
                self.elists.move_to_back(ina, e);
            }
            if self.elists.is_empty(ina) {
                let e = self.elists.front(act)?;
                self.test_referenced(GLOBAL, self.entries[e as usize].frame);
                self.elists.move_to_back(ina, e);
            }
            if let Some(e) = self.judge_inactive_head(GLOBAL, now, allow_busy, &mut fallback) {
                return Some(e);
            }
        }
        fallback
    }

    // ------------------------------------------------------------- eviction

    /// `pool` (the entry's) gives up its page `e`; returns the free frame it gains.
    ///
    /// Under SPC a page someone else also accounts is only unmapped from `pool`'s address
    /// spaces: a non-owner takes back a frame from its own conserved-page list; an owner hands
    /// ownership to the next sharer in FCFS order, which pays with a frame from *its* list.
    /// Otherwise the page is evicted from memory for everyone.
    fn evict_entry(&mut self, e: u32, now: Nanos) -> u32 {
        let Entry { frame: f, pool: p, next } = self.entries[e as usize];
        let r = self.frames[f as usize].region;
        self.reclaim_work += 1;
        if self.regions[r as usize].mode == Mode::Spc {
            let holder = self.frames[f as usize].first == e;
            if !holder || next != NIL {
                let payer = if holder { self.entries[next as usize].pool } else { p };
                self.unmap_pool(p, f);
                self.remove_entry(e);
                let g = self.flists.pop_front(cpl_list(payer)).expect("SPC: every non-owner conserves a frame");
                let pl = &mut self.pools[p as usize];
                pl.spc_unmaps += 1;
                if holder {
                    pl.transfers += 1;
                }
                return g;
            }
        }
        debug_assert_ne!(self.regions[r as usize].mode, Mode::Locked);
        self.full_evict(f, p, now)
    }

    /// Evicts the page in `f` from memory: unmaps it everywhere, writes it back if dirty,
    /// drops every charge on it. The evicting pool gets the frame; every other reservation
    /// that accounted the page keeps the slot, unbacked.
    pub(super) fn full_evict(&mut self, f: u32, evictor: u32, now: Nanos) -> u32 {
        let Frame { region: r, page: i, .. } = self.frames[f as usize];
        let mut mapped_by = std::mem::take(&mut self.scratch_spaces);
        mapped_by.clear();
        self.unmap_all(f, Some(&mut mapped_by));
        let reg = &mut self.regions[r as usize];
        // Shared anonymous memory has no copy anywhere but swap (as shmem in Linux): even a
        // page never written is written out the first time it is evicted.
        let must_write = self.frames[f as usize].dirty || (reg.kind == RegionKind::SharedAnon && reg.pflags[i as usize] & BACKED == 0);
        if must_write {
            let dev = reg.device as usize;
            self.devices[dev].submit(now, IoOp::Write, self.cfg.page_bytes);
            reg.pflags[i as usize] |= BACKED;
            self.pools[evictor as usize].writebacks += 1;
            for &s in &mapped_by {
                self.spaces[s as usize].stats.pages_swapped_out += 1;
            }
        }
        self.scratch_spaces = mapped_by;
        let reg = &mut self.regions[r as usize];
        let swapped = reg.pflags[i as usize] & BACKED != 0;
        if swapped && reg.mode == Mode::FirstTouch && !matches!(reg.kind, RegionKind::SharedFile { .. }) {
            // The swap entry remembers its group (a page-cache refault has no such record).
            let e = self.frames[f as usize].first;
            let owner = if e == NIL { GLOBAL } else { self.entries[e as usize].pool };
            if reg.swap_owner.is_empty() {
                reg.swap_owner = vec![NIL; reg.pages as usize];
            }
            reg.swap_owner[i as usize] = owner;
        }
        reg.pflags[i as usize] |= EVICTED;
        reg.frame[i as usize] = NIL;
        let mut e = self.frames[f as usize].first;
        while e != NIL {
            let Entry { pool: q, next, .. } = self.entries[e as usize];
            if q != evictor {
                self.release_unbacked_slot(q);
            }
            self.remove_entry(e);
            e = next;
        }
        if evictor == GLOBAL {
            self.global_evictions += 1;
        } else {
            self.pools[evictor as usize].evictions += 1;
        }
        self.frames[f as usize] = FREE_FRAME;
        f
    }

    /// Unmaps frame `f` from every address space bound to `pool`.
    fn unmap_pool(&mut self, pool: u32, f: u32) {
        let Frame { region: r, page: i, .. } = self.frames[f as usize];
        for k in 0..self.regions[r as usize].mappers.len() {
            let (s, vi) = self.regions[r as usize].mappers[k];
            if self.spaces[s as usize].pool != pool {
                continue;
            }
            let vpn = self.spaces[s as usize].vmas[vi as usize].start + i;
            if self.spaces[s as usize].ptes[vpn as usize].frame == f {
                self.clear_pte(s as usize, vpn);
            }
        }
    }

    /// Unmaps frame `f` from every address space; records which had it present.
    pub(super) fn unmap_all(&mut self, f: u32, mut mapped_by: Option<&mut Vec<u32>>) {
        let Frame { region: r, page: i, .. } = self.frames[f as usize];
        for k in 0..self.regions[r as usize].mappers.len() {
            let (s, vi) = self.regions[r as usize].mappers[k];
            let vpn = self.spaces[s as usize].vmas[vi as usize].start + i;
            if self.spaces[s as usize].ptes[vpn as usize].frame == f && self.clear_pte(s as usize, vpn) {
                if let Some(v) = mapped_by.as_deref_mut() {
                    v.push(s);
                }
            }
        }
    }

    /// Throws away page `i` of region `r` (its content is dead: private memory of an exited
    /// space, a copy-on-write base page nobody sees any more). Every charge is undone: the
    /// holder gets the frame back, SPC sharers their conserved frames, No-SP sharers keep
    /// an unbacked slot.
    pub(super) fn discard_page(&mut self, r: u32, i: u32) {
        let f = self.regions[r as usize].frame[i as usize];
        self.regions[r as usize].pflags[i as usize] = 0;
        self.regions[r as usize].forget_swap_owner(i);
        if f == NIL {
            return;
        }
        self.unmap_all(f, None);
        self.regions[r as usize].frame[i as usize] = NIL;
        let mode = self.regions[r as usize].mode;
        let holder_pool = {
            let e = self.frames[f as usize].first;
            if e == NIL {
                GLOBAL
            } else {
                self.entries[e as usize].pool
            }
        };
        if self.flists.list_of(f) == Some(LOCKED) {
            self.flists.remove(f);
        }
        let mut e = self.frames[f as usize].first;
        let mut first = true;
        while e != NIL {
            let Entry { pool: q, next, .. } = self.entries[e as usize];
            if !first {
                if mode == Mode::Spc {
                    let g = self.flists.pop_front(cpl_list(q)).expect("SPC: every non-owner conserves a frame");
                    self.release_frame(q, g);
                } else {
                    self.release_unbacked_slot(q);
                }
            }
            self.remove_entry(e);
            first = false;
            e = next;
        }
        self.frames[f as usize] = FREE_FRAME;
        self.release_frame(holder_pool, f);
    }

    /// `pool` no longer maps the page in `f` (its last mapping went away): undo its charge
    /// per policy. First-touch keeps charging the owner (as memory cgroups do).
    pub(super) fn drop_charge(&mut self, pool: u32, f: u32, now: Nanos) {
        let Some(e) = self.entry_of(pool, f) else {
            return;
        };
        let r = self.frames[f as usize].region;
        let mode = self.regions[r as usize].mode;
        let holder = self.frames[f as usize].first == e;
        let next = self.entries[e as usize].next;
        match mode {
            Mode::FirstTouch | Mode::Global | Mode::Locked => {}
            Mode::Spc => {
                if !holder || next != NIL {
                    let payer = if holder { self.entries[next as usize].pool } else { pool };
                    self.remove_entry(e);
                    let g = self.flists.pop_front(cpl_list(payer)).expect("SPC: every non-owner conserves a frame");
                    self.release_frame(pool, g);
                    if holder {
                        self.pools[pool as usize].transfers += 1;
                    }
                } else {
                    let g = self.full_evict(f, pool, now);
                    self.release_frame(pool, g);
                }
            }
            Mode::Own => {
                if !holder || next != NIL {
                    // The next sharer's slot now holds the frame; this one's slot is unbacked.
                    self.remove_entry(e);
                    self.release_unbacked_slot(pool);
                } else {
                    let g = self.full_evict(f, pool, now);
                    self.release_frame(pool, g);
                }
            }
        }
    }
}
