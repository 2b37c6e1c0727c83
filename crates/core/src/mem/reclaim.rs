//! Charge entries, victim selection (global two-list LRU, per-reservation FIFO second
//! chance), and what evicting a page means under each shared-page policy.

use super::list::NIL;
use super::*;

impl<A: FrameAllocator> Memory<A> {
    // ------------------------------------------------------------- charge entries

    /// A charge of frame `f`, holding page `i` of region `r`, to `pool`.
    pub(super) fn new_entry(&mut self, f: u32, pool: u32, r: u32, i: u32) -> u32 {
        if self.hard_bounds {
            self.spared.entered(pool);
        }
        let entry = Entry { frame: f, pool, next: NIL, region: r, page: i };
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
        self.entries[e as usize] = Entry { frame: NIL, pool: NIL, next: NIL, region: NIL, page: NIL };
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

    // ------------------------------------------------------------- victims

    /// Picks a victim of `pool` and evicts (or, under SPC, unmaps) it; returns the frame
    /// `pool` gains.
    pub(super) fn reclaim_one(&mut self, pool: u32, now: Nanos, allow_busy: bool) -> Option<u32> {
        self.reclaim_sparing(pool, now, allow_busy, false)
    }

    /// [`Memory::reclaim_one`]; with `spare_hard`, pages a hard bound counts are passed over
    /// (reclaim on behalf of anyone else, which they are set aside from).
    pub(super) fn reclaim_sparing(&mut self, pool: u32, now: Nanos, allow_busy: bool, spare_hard: bool) -> Option<u32> {
        let spare = spare_hard && self.hard_bounds;
        if spare && self.spared.known(pool) {
            return None;
        }
        let mut passed = Passed::default();
        let e = if pool == GLOBAL {
            self.lru_victim(now, allow_busy, spare, &mut passed)
        } else {
            self.second_chance_victim(pool, now, allow_busy, spare, &mut passed)
        };
        let Some(e) = e else {
            if spare && passed.other == 0 && passed.spared > 0 {
                self.spared.found(pool);
            }
            return None;
        };
        Some(self.evict_entry(e, now))
    }

    /// Tests (and clears) the referenced bits `pool` can see for frame `f`: those of address
    /// spaces bound to `pool`, or all of them for the global pool — Linux's memcg reclaim
    /// likewise only counts references from the reclaiming group's mms.
    fn test_referenced(&mut self, pool: u32, e: u32) -> bool {
        let Entry { frame: f, region: r, page: i, .. } = self.entries[e as usize];
        // Reclaim calls this several times per fault, and the loads that lead to the PTE are
        // one chain: a region mapped once has its PTE's place at hand.
        let (regions, spaces) = (&self.regions, &mut self.spaces);
        let region = &regions[r as usize];
        if let Some((s, start)) = region.solo {
            let sp = &mut spaces[s as usize];
            return (pool == GLOBAL || sp.pool == pool) && take_referenced(&mut sp.ptes[(start + i) as usize], f);
        }
        let mut seen = false;
        for &(s, vi) in &region.mappers {
            let sp = &mut spaces[s as usize];
            if pool != GLOBAL && sp.pool != pool {
                continue;
            }
            let vpn = sp.vmas[vi as usize].start + i;
            seen |= take_referenced(&mut sp.ptes[vpn as usize], f);
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
    fn second_chance_victim(&mut self, p: u32, now: Nanos, allow_busy: bool, spare_hard: bool, passed: &mut Passed) -> Option<u32> {
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
                    if self.test_referenced(p, e) {
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
            if let Some(e) = self.judge_inactive_head(p, now, allow_busy, spare_hard, &mut fallback, passed) {
                return Some(e);
            }
        }
        fallback
    }

    /// The last step of both replacement policies: the inactive head of `pool` is the victim
    /// unless it is busy (back to the active tail, remembered as a last resort when busy pages
    /// may be taken), spared (`spare_hard` and a hard bound counts it: back to the active
    /// tail) or referenced again (promoted to the active tail).
    fn judge_inactive_head(
        &mut self,
        pool: u32,
        now: Nanos,
        allow_busy: bool,
        spare_hard: bool,
        fallback: &mut Option<u32>,
        passed: &mut Passed,
    ) -> Option<u32> {
        let (act, ina) = (active(pool), inactive(pool));
        let e = self.elists.front(ina).expect("refilled");
        let f = self.entries[e as usize].frame;
        if spare_hard && self.hard_protected(f) {
            passed.spared += 1;
            self.elists.move_to_back(act, e);
            return None;
        }
        let fr = self.frames[f as usize];
        if fr.pinned || fr.ready_at > now {
            if allow_busy && !fr.pinned && fallback.is_none() {
                *fallback = Some(e);
            }
            passed.other += u32::from(!fr.pinned);
            self.elists.move_to_back(act, e);
            return None;
        }
        if self.test_referenced(pool, e) {
            passed.other += 1;
            self.elists.move_to_back(act, e);
            return None;
        }
        Some(e)
    }

    /// Linux-like two-list LRU of the global pool. New pages enter the inactive tail. Before
    /// each pick, while `inactive × ratio < active`, the active head is demoted to the
    /// inactive tail with its referenced bits cleared. The inactive head is evicted unless it
    /// was referenced, in which case it is promoted to the active tail.
    fn lru_victim(&mut self, now: Nanos, allow_busy: bool, spare_hard: bool, passed: &mut Passed) -> Option<u32> {
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
                self.test_referenced(GLOBAL, e);
                self.elists.move_to_back(ina, e);
            }
            if self.elists.is_empty(ina) {
                let e = self.elists.front(act)?;
                self.test_referenced(GLOBAL, e);
                self.elists.move_to_back(ina, e);
            }
            if let Some(e) = self.judge_inactive_head(GLOBAL, now, allow_busy, spare_hard, &mut fallback, passed) {
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
        let Entry { frame: f, pool: p, next, .. } = self.entries[e as usize];
        let r = self.frames[f as usize].region;
        self.reclaim_work += 1;
        if self.regions[r as usize].mode == Mode::Spc {
            let holder = self.frames[f as usize].first == e;
            if !holder || next != NIL {
                let payer = if holder { self.entries[next as usize].pool } else { p };
                self.unmap_pool(p, f);
                self.remove_entry(e);
                let g = self.conserved[payer as usize].pop_front().expect("SPC: every non-owner conserves a frame");
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
        let g = self.evict_from_memory(f, evictor, now);
        if evictor == GLOBAL {
            self.global_evictions += 1;
        } else {
            self.pools[evictor as usize].evictions += 1;
        }
        g
    }

    /// [`Memory::full_evict`] without counting the eviction as the evictor's choice (a bound
    /// chose it).
    pub(super) fn evict_from_memory(&mut self, f: u32, evictor: u32, now: Nanos) -> u32 {
        let Frame { region: r, page: i, first, .. } = self.frames[f as usize];
        // The pool the page is charged to, whose write limit its write-back obeys.
        let holder = (!self.write_throttles.is_empty() && first != NIL).then(|| self.entries[first as usize].pool);
        let mut mapped_by = std::mem::take(&mut self.scratch_spaces);
        mapped_by.clear();
        self.unmap_all(f, Some(&mut mapped_by));
        let reg = &mut self.regions[r as usize];
        // Shared anonymous memory has no copy anywhere but swap (as shmem in Linux): even a
        // page never written is written out the first time it is evicted.
        let must_write = self.frames[f as usize].dirty || (reg.kind == RegionKind::SharedAnon && reg.pflags[i as usize] & BACKED == 0);
        if must_write {
            let dev = reg.device as usize;
            let bytes = self.cfg.page_bytes;
            match holder.and_then(|p| self.write_throttles.iter_mut().find(|(q, _)| *q == p)) {
                Some((_, throttle)) => {
                    let at = throttle.release_at(now);
                    throttle.pass(at, bytes);
                    if at > now {
                        self.devices[dev].submit_held_write(at, bytes);
                    } else {
                        self.devices[dev].submit(now, IoOp::Write, bytes);
                    }
                }
                None => {
                    self.devices[dev].submit(now, IoOp::Write, bytes);
                }
            }
            let reg = &mut self.regions[r as usize];
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
        self.bound_forget_frame(f);
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
        if self.frames[f as usize].first == NIL {
            // Resident without charges: a locked page.
            self.locked_frames -= 1;
        }
        let mut e = self.frames[f as usize].first;
        let mut first = true;
        while e != NIL {
            let Entry { pool: q, next, .. } = self.entries[e as usize];
            if !first {
                if mode == Mode::Spc {
                    let g = self.conserved[q as usize].pop_front().expect("SPC: every non-owner conserves a frame");
                    self.release_frame(q, g);
                } else {
                    self.release_unbacked_slot(q);
                }
            }
            self.remove_entry(e);
            first = false;
            e = next;
        }
        self.bound_forget_frame(f);
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
                    let g = self.conserved[payer as usize].pop_front().expect("SPC: every non-owner conserves a frame");
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

/// What a victim search passed over: pages a hard bound spares, and pages passed over for a
/// reason that can change with time (busy with I/O, referenced).
#[derive(Default)]
struct Passed {
    spared: u32,
    other: u32,
}

/// Whether `pte` maps frame `f` present with its referenced bit set; clears the bit.
#[inline]
fn take_referenced(pte: &mut Pte, f: u32) -> bool {
    let seen = pte.frame == f && pte.flags & (PRESENT | REFERENCED) == PRESENT | REFERENCED;
    if seen {
        pte.flags &= !REFERENCED;
    }
    seen
}
