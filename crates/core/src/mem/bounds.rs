//! Bounds: caps on the resident pages of sets of address spaces, nested through parents.
//!
//! A bound is HiRes's memory reservation on the page-level model (Sec. III-E of the HiRes
//! paper): a subsystem holds at most as many distinct frames as its reservation binds, and a
//! page aliased into a child is still held by the parent. Here a bound counts the distinct
//! frames its spaces map (a frame mapped by several of them once), plus the frames one of them
//! brought in that nobody has mapped since (the faulting page until it is mapped, readahead
//! pages until used). A space bound to a bound is charged to it and to every ancestor, so a
//! child's pages count in its parent too and nested caps compose; a space may be bound to
//! several bounds (a server's and a group's).
//!
//! Bounds sit beside pools, not in place of them: a page's frame still comes from and goes
//! back to its pool (the global pool, a reservation, a limit group), which charges and
//! reclaims it as before. Before a space maps a page a bound does not count yet, every bound
//! it is charged to makes room: one at its size reclaims *its own* pages, FIFO with second
//! chance over its charges (referenced bits of its own spaces only), and never another's.
//! Reclaiming a page means unmapping it from the bound's spaces; a page nobody maps then
//! leaves memory (written back if dirty, the frame back to its holder pool), while one that
//! spaces outside the bound still map stays resident for them.
//!
//! SPEL-locked pages are held outside every pool, and outside every bound likewise. Spaces
//! whose pages are pinned (MC² levels A and B) cannot be bound: reclaim never takes their
//! pages.

use super::list::NIL;
use super::*;

#[derive(Clone, Debug)]
pub(super) struct BoundState {
    pub(super) name: String,
    pub(super) kind: BoundKind,
    /// Most pages it may count; `u64::MAX` when it only counts.
    pub(super) size: u64,
    /// The bound holding it, or `NIL`.
    pub(super) parent: u32,
    /// Charges on its list (= distinct frames it counts).
    pub(super) charged: u64,
    pub(super) peak: u64,
    pub(super) evictions: u64,
    pub(super) unmaps: u64,
}

impl BoundState {
    pub(super) fn capped(&self) -> bool {
        self.size != u64::MAX
    }
}

/// One frame counted by one bound.
#[derive(Clone, Copy, Debug)]
pub(super) struct BCharge {
    /// `NIL` while free.
    pub(super) frame: u32,
    pub(super) bound: u32,
    /// Present page-table entries of the bound's spaces that map the frame.
    pub(super) refs: u32,
    /// Brought in by one of the bound's spaces and mapped by nobody since.
    pub(super) pending: bool,
    /// The frame's next charge (`NIL` ends the chain).
    pub(super) next: u32,
}

impl<A: FrameAllocator> Memory<A> {
    /// Creates a bound on the resident pages of the spaces later bound to it
    /// ([`Memory::bind_space`]). With a parent, every page it counts counts there too.
    ///
    /// A hard bound with a size commits it as a hard reservation does, unless an enclosing
    /// hard bound already holds it: the frames committed to reservations, locked regions and
    /// such bounds must fit in `total_frames − unreserved_min_frames`. A refused bound changes
    /// nothing.
    pub fn create_bound(&mut self, spec: BoundSpec) -> Result<BoundId, MemError> {
        let parent = match spec.parent {
            Some(p) => self.bound_idx(p)?,
            None => NIL,
        };
        let bad = |why| Err(MemError::InvalidBound { name: spec.name.clone(), why });
        let size = match spec.pages {
            Some(0) => return bad("a bound of 0 pages could hold no page"),
            Some(p) if p == u64::MAX => return bad("its size must be below 2^64 − 1 pages"),
            Some(p) => p,
            None if spec.kind == BoundKind::Hard => return bad("a hard bound sets its size aside: give it one"),
            None => u64::MAX,
        };
        if spec.kind == BoundKind::Hard && !self.held_by_hard(parent) {
            let capacity = u64::from(self.cfg.total_frames - self.cfg.unreserved_min_frames);
            let committed = self.committed_frames();
            if committed + size > capacity {
                return Err(MemError::AdmissionRejected {
                    name: spec.name,
                    requested: size,
                    available: capacity.saturating_sub(committed),
                    total: u64::from(self.cfg.total_frames),
                });
            }
        }
        if self.bhead.is_empty() {
            self.bhead = vec![NIL; self.frames.len()];
        }
        let b = self.bounds.len() as u32;
        self.bounds.push(BoundState { name: spec.name, kind: spec.kind, size, parent, charged: 0, peak: 0, evictions: 0, unmaps: 0 });
        self.blists.grow_lists(self.bounds.len());
        self.hard_bounds |= spec.kind == BoundKind::Hard;
        self.debug_check();
        Ok(BoundId(b))
    }

    /// Whether `b` (or `NIL`) or an ancestor is a hard bound.
    fn held_by_hard(&self, mut b: u32) -> bool {
        while b != NIL {
            if self.bounds[b as usize].kind == BoundKind::Hard {
                return true;
            }
            b = self.bounds[b as usize].parent;
        }
        false
    }

    /// Whether bound `b`'s size is among the committed frames: a hard one no hard ancestor
    /// holds.
    pub(super) fn bound_commits(&self, b: usize) -> bool {
        let bs = &self.bounds[b];
        bs.kind == BoundKind::Hard && !self.held_by_hard(bs.parent)
    }

    /// Frames committed to hard bounds.
    pub(super) fn bound_committed_frames(&self) -> u64 {
        (0..self.bounds.len()).filter(|&b| self.bound_commits(b)).map(|b| self.bounds[b].size).sum()
    }

    fn bound_idx(&self, b: BoundId) -> Result<u32, MemError> {
        if (b.0 as usize) < self.bounds.len() {
            Ok(b.0)
        } else {
            Err(MemError::NoSuchBound(b.0))
        }
    }

    /// Charges `space` to `bound` and its ancestors from now on. The space must not have a
    /// resident page yet, nor pin its pages. A refusal changes nothing.
    pub fn bind_space(&mut self, space: AsId, bound: BoundId) -> Result<(), MemError> {
        let s = self.space_idx(space)?;
        let mut b = self.bound_idx(bound)?;
        if self.spaces[s].placement.pins_pages() {
            return Err(MemError::PlacementUnsupported { space: space.0, what: "a bound cannot reclaim, so no bound may count" });
        }
        if self.spaces[s].stats.resident_pages > 0 {
            return Err(MemError::SpaceNotEmpty { space: space.0 });
        }
        while b != NIL {
            if !self.spaces[s].bounds.contains(&b) {
                self.spaces[s].bounds.push(b);
            }
            b = self.bounds[b as usize].parent;
        }
        self.debug_check();
        Ok(())
    }

    /// Sets bound `bound`'s size at `now` (`None`: count only). Shrinking reclaims its pages
    /// down to the new size (dirty ones written back); growing a hard one is subject to
    /// admission. On error nothing is resized, though pages already evicted stay evicted.
    pub fn set_bound_size(&mut self, now: Nanos, bound: BoundId, pages: Option<u64>) -> Result<(), MemError> {
        let b = self.bound_idx(bound)?;
        let bs = &self.bounds[b as usize];
        let name = bs.name.clone();
        let size = match pages {
            Some(0) => return Err(MemError::InvalidBound { name, why: "a bound of 0 pages could hold no page" }),
            Some(p) if p == u64::MAX => return Err(MemError::InvalidBound { name, why: "its size must be below 2^64 − 1 pages" }),
            Some(p) => p,
            None if bs.kind == BoundKind::Hard => {
                return Err(MemError::InvalidBound { name, why: "a hard bound sets its size aside: give it one" })
            }
            None => u64::MAX,
        };
        if self.bound_commits(b as usize) && size > bs.size {
            let capacity = u64::from(self.cfg.total_frames - self.cfg.unreserved_min_frames);
            let committed = self.committed_frames();
            if committed + (size - bs.size) > capacity {
                return Err(MemError::AdmissionRejected {
                    name,
                    requested: size,
                    available: capacity.saturating_sub(committed) + bs.size,
                    total: u64::from(self.cfg.total_frames),
                });
            }
        }
        while self.bounds[b as usize].charged > size {
            let v = self.bound_victim(b, now, true).ok_or(MemError::BoundExhausted(b))?;
            self.bound_release(b, v, now);
        }
        self.bounds[b as usize].size = size;
        self.debug_check();
        Ok(())
    }

    /// Proactive reclaim of a bound: gives up to `pages` of its pages at `now`, as shrinking
    /// its size would (pages nobody else maps leave memory), without changing its size.
    /// Returns the pages it gave up: fewer than asked when it counts fewer (or only pinned ones).
    pub fn reclaim_bound(&mut self, now: Nanos, bound: BoundId, pages: u64) -> Result<u64, MemError> {
        let b = self.bound_idx(bound)?;
        let mut released = 0;
        while released < pages {
            let Some(v) = self.bound_victim(b, now, true) else { break };
            self.bound_release(b, v, now);
            released += 1;
        }
        self.debug_check();
        Ok(released)
    }

    pub fn bound_stats(&self, bound: BoundId) -> Result<BoundStats, MemError> {
        let bs = &self.bounds[self.bound_idx(bound)? as usize];
        Ok(BoundStats {
            size_pages: bs.capped().then_some(bs.size),
            kind: bs.kind,
            charged_pages: bs.charged,
            peak_pages: bs.peak,
            evictions: bs.evictions,
            unmaps: bs.unmaps,
        })
    }

    /// The name `bound` was created with ("" for no such bound).
    pub fn bound_name(&self, bound: BoundId) -> &str {
        self.bounds.get(bound.0 as usize).map_or("", |b| b.name.as_str())
    }

    /// Pages `bound` counts now (O(1)).
    pub fn bound_charged_pages(&self, bound: BoundId) -> Result<u64, MemError> {
        Ok(self.bounds[self.bound_idx(bound)? as usize].charged)
    }

    pub fn bounds(&self) -> impl Iterator<Item = BoundId> {
        (0..self.bounds.len() as u32).map(BoundId)
    }

    /// The bound holding `bound`, if any.
    pub fn bound_parent(&self, bound: BoundId) -> Option<BoundId> {
        let p = self.bounds.get(bound.0 as usize)?.parent;
        (p != NIL).then_some(BoundId(p))
    }

    /// Every bound `space` is charged to.
    pub fn space_bounds(&self, space: AsId) -> Vec<BoundId> {
        self.spaces.get(space.0 as usize).map_or_else(Vec::new, |s| s.bounds.iter().map(|&b| BoundId(b)).collect())
    }

    // ------------------------------------------------------------- charges

    pub(super) fn bcharge_of(&self, b: u32, f: u32) -> Option<u32> {
        let mut c = self.bhead[f as usize];
        while c != NIL {
            let ch = &self.bcharges[c as usize];
            if ch.bound == b {
                return Some(c);
            }
            c = ch.next;
        }
        None
    }

    fn new_bcharge(&mut self, b: u32, f: u32, refs: u32, pending: bool) {
        let charge = BCharge { frame: f, bound: b, refs, pending, next: self.bhead[f as usize] };
        let c = match self.free_bcharges.pop() {
            Some(c) => {
                self.bcharges[c as usize] = charge;
                c
            }
            None => {
                self.bcharges.push(charge);
                let n = self.bcharges.len();
                if n > self.blists.elements() {
                    self.blists.grow_elements(n.next_power_of_two());
                }
                n as u32 - 1
            }
        };
        self.bhead[f as usize] = c;
        self.blists.push_back(b, c);
        let bs = &mut self.bounds[b as usize];
        bs.charged += 1;
        bs.peak = bs.peak.max(bs.charged);
    }

    fn remove_bcharge(&mut self, c: u32) {
        let BCharge { frame: f, bound: b, next, .. } = self.bcharges[c as usize];
        if self.bounds[b as usize].kind == BoundKind::Hard {
            // A page may have lost what spared it: pools known to be all spared are no longer.
            self.spared.epoch += 1;
        }
        if self.bhead[f as usize] == c {
            self.bhead[f as usize] = next;
        } else {
            let mut cur = self.bhead[f as usize];
            while self.bcharges[cur as usize].next != c {
                cur = self.bcharges[cur as usize].next;
                debug_assert_ne!(cur, NIL, "charge {c} is on its frame's chain");
            }
            self.bcharges[cur as usize].next = next;
        }
        self.blists.remove(c);
        self.bounds[b as usize].charged -= 1;
        self.bcharges[c as usize] = BCharge { frame: NIL, bound: NIL, refs: 0, pending: false, next: NIL };
        self.free_bcharges.push(c);
    }

    /// Space `s` now maps frame `f` (a present entry that was not): its bounds count it, and
    /// nobody is waiting to map it any more. Room was made before (`bound_room`).
    pub(super) fn bound_on_map(&mut self, s: usize, f: u32) {
        if self.bhead.is_empty() || (self.spaces[s].bounds.is_empty() && self.bhead[f as usize] == NIL) {
            return;
        }
        if self.regions[self.frames[f as usize].region as usize].mode == Mode::Locked {
            return;
        }
        for k in 0..self.spaces[s].bounds.len() {
            let b = self.spaces[s].bounds[k];
            match self.bcharge_of(b, f) {
                Some(c) => self.bcharges[c as usize].refs += 1,
                None => self.new_bcharge(b, f, 1, false),
            }
        }
        let mut c = self.bhead[f as usize];
        while c != NIL {
            let ch = &mut self.bcharges[c as usize];
            let next = ch.next;
            ch.pending = false;
            if ch.refs == 0 {
                self.remove_bcharge(c);
            }
            c = next;
        }
    }

    /// Space `s` no longer maps frame `f`.
    pub(super) fn bound_on_unmap(&mut self, s: usize, f: u32) {
        if self.spaces[s].bounds.is_empty() {
            return;
        }
        for k in 0..self.spaces[s].bounds.len() {
            let b = self.spaces[s].bounds[k];
            // A locked page has no charges.
            if let Some(c) = self.bcharge_of(b, f) {
                let ch = &mut self.bcharges[c as usize];
                ch.refs -= 1;
                if ch.refs == 0 && !ch.pending {
                    self.remove_bcharge(c);
                }
            }
        }
    }

    /// Space `s` brought frame `f` in: its bounds count it until someone maps it or it goes.
    pub(super) fn bound_pending(&mut self, s: usize, f: u32) {
        for k in 0..self.spaces[s].bounds.len() {
            let b = self.spaces[s].bounds[k];
            match self.bcharge_of(b, f) {
                Some(c) => self.bcharges[c as usize].pending = true,
                None => self.new_bcharge(b, f, 0, true),
            }
        }
    }

    /// Space `s` is exiting: a bound no other live space is under counts nothing its
    /// spaces brought in and nobody mapped (readahead pages its subtree can no longer map).
    pub(super) fn bound_space_exiting(&mut self, s: usize) {
        for k in 0..self.spaces[s].bounds.len() {
            let b = self.spaces[s].bounds[k];
            let others = self.spaces.iter().enumerate().any(|(i, sp)| i != s && sp.alive && sp.bounds.contains(&b));
            if others {
                continue;
            }
            let unmapped: Vec<u32> = self.blists.iter(b).filter(|&c| self.bcharges[c as usize].refs == 0).collect();
            for c in unmapped {
                self.remove_bcharge(c);
            }
        }
    }

    /// Frame `f` left memory or became a locked frame: no bound counts it any more.
    pub(super) fn bound_forget_frame(&mut self, f: u32) {
        if self.bhead.is_empty() {
            return;
        }
        while self.bhead[f as usize] != NIL {
            self.remove_bcharge(self.bhead[f as usize]);
        }
    }

    // ------------------------------------------------------------- room and reclaim

    /// Makes room in every bound of space `s` for one more page: frame `keep` (pinned by the
    /// caller) if it is resident, a new one otherwise. A bound at its size reclaims its own
    /// pages, the innermost first.
    pub(super) fn bound_room(&mut self, now: Nanos, s: usize, keep: Option<u32>) -> Result<(), MemError> {
        for k in 0..self.spaces[s].bounds.len() {
            let b = self.spaces[s].bounds[k];
            loop {
                let need = u64::from(keep.and_then(|f| self.bcharge_of(b, f)).is_none());
                let bs = &self.bounds[b as usize];
                if bs.charged + need <= bs.size {
                    break;
                }
                let v = self.bound_victim(b, now, true).ok_or(MemError::BoundExhausted(b))?;
                self.bound_release(b, v, now);
            }
        }
        Ok(())
    }

    /// Whether every bound of space `s` has room for one more page without reclaiming.
    pub(super) fn bound_has_room(&self, s: usize) -> bool {
        self.spaces[s].bounds.iter().all(|&b| self.bounds[b as usize].charged < self.bounds[b as usize].size)
    }

    /// FIFO with second chance over bound `b`'s charges: the oldest that is neither pinned,
    /// under I/O (chosen only as a last resort when `allow_busy`) nor referenced by one of
    /// its spaces since its last chance. Pages brought in and never used go first.
    fn bound_victim(&mut self, b: u32, now: Nanos, allow_busy: bool) -> Option<u32> {
        let n = u64::from(self.blists.len(b));
        let mut budget = 2 * n + 2;
        let mut fallback = None;
        while budget > 0 {
            budget -= 1;
            let c = self.blists.front(b)?;
            let f = self.bcharges[c as usize].frame;
            let fr = self.frames[f as usize];
            if fr.pinned || fr.ready_at > now {
                if allow_busy && !fr.pinned && fallback.is_none() {
                    fallback = Some(f);
                }
                self.blists.move_to_back(b, c);
                continue;
            }
            if self.bound_referenced(b, f) {
                self.blists.move_to_back(b, c);
                continue;
            }
            return Some(f);
        }
        fallback
    }

    /// Tests (and clears) the referenced bits of bound `b`'s spaces for frame `f`.
    fn bound_referenced(&mut self, b: u32, f: u32) -> bool {
        let Frame { region: r, page: i, .. } = self.frames[f as usize];
        let mut seen = false;
        for k in 0..self.regions[r as usize].mappers.len() {
            let (s, vi) = self.regions[r as usize].mappers[k];
            let sp = &mut self.spaces[s as usize];
            if !sp.bounds.contains(&b) {
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

    /// Bound `b` gives up frame `f`: the page is unmapped from its spaces, and leaves memory
    /// if nobody else maps it.
    fn bound_release(&mut self, b: u32, f: u32, now: Nanos) {
        let Frame { region: r, page: i, .. } = self.frames[f as usize];
        self.reclaim_work += 1;
        for k in 0..self.regions[r as usize].mappers.len() {
            let (s, vi) = self.regions[r as usize].mappers[k];
            if !self.spaces[s as usize].bounds.contains(&b) {
                continue;
            }
            let vpn = self.spaces[s as usize].vmas[vi as usize].start + i;
            if self.spaces[s as usize].ptes[vpn as usize].frame == f {
                self.clear_pte(s as usize, vpn);
            }
        }
        if self.mapped_anywhere(f) {
            self.bounds[b as usize].unmaps += 1;
        } else {
            self.bound_evict(f, now);
            self.bounds[b as usize].evictions += 1;
        }
        debug_assert!(self.bcharge_of(b, f).is_none(), "bound {b} still counts frame {f} it gave up");
    }

    /// Whether some address space maps frame `f` present.
    fn mapped_anywhere(&self, f: u32) -> bool {
        let Frame { region: r, page: i, .. } = self.frames[f as usize];
        self.regions[r as usize].mappers.iter().any(|&(s, vi)| {
            let sp = &self.spaces[s as usize];
            let pte = sp.ptes[(sp.vmas[vi as usize].start + i) as usize];
            pte.frame == f && pte.flags & PRESENT != 0
        })
    }

    /// Evicts a page nobody maps: SPC sharers other than the holder take their conserved
    /// frames back, the page is written back if it must be, and the holder pool gets the frame.
    fn bound_evict(&mut self, f: u32, now: Nanos) {
        let r = self.frames[f as usize].region;
        debug_assert_ne!(self.regions[r as usize].mode, Mode::Locked, "bounds never count locked pages");
        let holder_entry = self.frames[f as usize].first;
        let holder = self.entries[holder_entry as usize].pool;
        if self.regions[r as usize].mode == Mode::Spc {
            let mut e = self.entries[holder_entry as usize].next;
            while e != NIL {
                let Entry { pool: q, next, .. } = self.entries[e as usize];
                self.remove_entry(e);
                let g = self.conserved[q as usize].pop_front().expect("SPC: every non-owner conserves a frame");
                self.release_frame(q, g);
                e = next;
            }
        }
        let g = self.evict_from_memory(f, holder, now);
        self.release_frame(holder, g);
    }

    /// Whether a hard bound counts frame `f` (reclaim on behalf of others passes it over).
    pub(super) fn hard_protected(&self, f: u32) -> bool {
        let mut c = self.bhead[f as usize];
        while c != NIL {
            let ch = &self.bcharges[c as usize];
            if self.bounds[ch.bound as usize].kind == BoundKind::Hard {
                return true;
            }
            c = ch.next;
        }
        false
    }
}
