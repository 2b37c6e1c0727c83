//! Invariants as code. [`Memory::check_invariants`] is called after every state-changing
//! operation when `MemConfig::check_every_operation` is on (by default in debug builds) and by
//! the tests.

use super::list::NIL;
use super::*;

macro_rules! ensure {
    ($cond:expr, $($msg:tt)+) => {
        if !$cond {
            return Err(format!($($msg)+));
        }
    };
}

impl<A: FrameAllocator> Memory<A> {
    /// Checks every structural invariant; the error names the first violation found.
    ///
    /// * every frame is in exactly one place: free in one pool of the frame allocator, on one
    ///   conserved-page list, locked (holding a locked page, no charges), or in use with its
    ///   holder's charge entry on that pool's active or inactive list (so free + conserved +
    ///   locked + in use = total), and the allocator's free counts agree with the frames it
    ///   says are free;
    /// * resident pages and frames are in one-to-one correspondence (region → frame → region),
    ///   so no resident page is lost or duplicated;
    /// * every present page-table entry maps the frame holding the page its mapping resolves
    ///   to; resident-set counters match;
    /// * every reservation's slots add up: charged pages + free + lent + locked charge
    ///   = size (+ borrowed for firm), conserved frames = SPC pages it shares without owning,
    ///   a hard reservation never borrows, so it never holds more than its size;
    /// * a page mapped by a reservation's address space under a per-reservation policy is
    ///   charged to that reservation; SPEL-locked regions are wholly resident and locked;
    /// * the pages of level-A/B spaces, and only they, are on the unevictable list of their
    ///   space's pool (the global pool, or a reservation of their core's banks);
    /// * commitments (hard bounds included) fit in physical memory;
    /// * every bound counts exactly what its spaces map, never more than its size, and every
    ///   page a child bound counts counts in its parent (see `check_bounds`).
    pub fn check_invariants(&self) -> Result<(), String> {
        self.alloc.check().map_err(|e| format!("frame allocator: {e}"))?;
        self.elists.check().map_err(|e| format!("charge lists: {e}"))?;
        let n = self.frames.len();
        ensure!(n == self.cfg.total_frames as usize && self.alloc.total_frames() as usize == n, "frame count changed");
        let pools = self.pools.len();
        ensure!(self.conserved.len() == pools, "{} conserved-page lists for {pools} pools", self.conserved.len());

        // Conserved frames: each on one pool's list, once.
        let mut conserved_by = vec![NIL; n];
        for (p, list) in self.conserved.iter().enumerate() {
            for &f in list {
                ensure!((f as usize) < n, "pool {p} conserves frame {f}, which does not exist");
                let other = conserved_by[f as usize];
                ensure!(other == NIL, "frame {f} is conserved twice (pools {other} and {p})");
                conserved_by[f as usize] = p as u32;
            }
        }

        // Frames.
        let (mut in_use, mut locked) = (0usize, 0u64);
        let mut free_seen = vec![0u64; pools];
        for (f, fr) in self.frames.iter().enumerate() {
            let conserver = conserved_by[f];
            match self.alloc.free_pool_of(f as u32) {
                Some(p) => {
                    ensure!(conserver == NIL, "frame {f} is free in pool {p} and conserved by pool {conserver} at once");
                    ensure!((p as usize) < pools, "frame {f} is free in pool {p}, which does not exist");
                    free_seen[p as usize] += 1;
                    ensure!(fr.region == NIL && fr.first == NIL && !fr.pinned, "free frame {f} (pool {p}) holds a page or has charges");
                }
                None if conserver != NIL => {
                    ensure!(
                        fr.region == NIL && fr.first == NIL && !fr.pinned,
                        "conserved frame {f} (pool {conserver}) holds a page or has charges"
                    );
                }
                None if fr.region != NIL && fr.first == NIL => {
                    locked += 1;
                    let reg = &self.regions[fr.region as usize];
                    ensure!(reg.mode == Mode::Locked, "frame {f} holds a page charged to nobody but region {} is not locked", fr.region);
                }
                None => {
                    in_use += 1;
                    ensure!(fr.first != NIL, "frame {f} is neither free nor conserved and holds no page (lost)");
                    ensure!(fr.region != NIL, "in-use frame {f} holds no page");
                    let e = &self.entries[fr.first as usize];
                    ensure!(e.frame == f as u32, "frame {f}: holder entry {} points at frame {}", fr.first, e.frame);
                    ensure!(!fr.pinned, "frame {f} left pinned");
                }
            }
            if fr.region != NIL {
                let reg = &self.regions[fr.region as usize];
                ensure!(reg.alive, "frame {f} holds a page of dead region {}", fr.region);
                ensure!(
                    reg.frame.get(fr.page as usize) == Some(&(f as u32)),
                    "frame {f} holds page {} of region {} but the region points elsewhere",
                    fr.page,
                    fr.region
                );
            }
        }
        ensure!(locked == self.locked_frames, "{locked} frames hold locked pages but {} are counted", self.locked_frames);
        let mut free_total = 0u64;
        for (p, &seen) in free_seen.iter().enumerate() {
            let counted = self.alloc.free_frames(p as u32);
            ensure!(counted == seen, "pool {p}: the frame allocator counts {counted} free frames but {seen} frames are free in it");
            free_total += counted;
        }
        let conserved = self.conserved.iter().map(|l| l.len() as u64).sum::<u64>();
        let placed = in_use as u64 + free_total + conserved + locked;
        ensure!(placed == n as u64, "frames are not conserved: {placed} placed of {n}");

        // Charge entries.
        let mut live = 0usize;
        for (e, en) in self.entries.iter().enumerate() {
            let Some(list) = self.elists.list_of(e as u32) else {
                ensure!(en.frame == NIL, "entry {e} is on no list but still charges frame {}", en.frame);
                continue;
            };
            live += 1;
            ensure!(
                list == active(en.pool) || list == inactive(en.pool) || list == unevictable(en.pool),
                "entry {e} of pool {} is on list {list}",
                en.pool
            );
            let fr = &self.frames[en.frame as usize];
            ensure!(
                self.alloc.free_pool_of(en.frame).is_none() && conserved_by[en.frame as usize] == NIL,
                "entry {e} charges frame {} which is not in use",
                en.frame
            );
            let mut c = fr.first;
            let mut found = false;
            while c != NIL {
                found |= c == e as u32;
                c = self.entries[c as usize].next;
            }
            ensure!(found, "entry {e} is not on frame {}'s chain", en.frame);
            ensure!(
                (en.region, en.page) == (fr.region, fr.page),
                "entry {e} says frame {} holds page {} of region {}, the frame says page {} of region {}",
                en.frame,
                en.page,
                en.region,
                fr.page,
                fr.region
            );
        }
        ensure!(live + self.free_entries.len() == self.entries.len(), "charge entries leaked");

        // Per-frame charge chains.
        for (f, fr) in self.frames.iter().enumerate() {
            if fr.first == NIL {
                continue;
            }
            let mode = self.regions[fr.region as usize].mode;
            let mut pools_seen = Vec::new();
            let mut c = fr.first;
            while c != NIL {
                let en = &self.entries[c as usize];
                ensure!(en.frame == f as u32, "frame {f}'s chain contains entry {c} of frame {}", en.frame);
                ensure!(!pools_seen.contains(&en.pool), "frame {f} is charged twice to pool {}", en.pool);
                pools_seen.push(en.pool);
                c = en.next;
            }
            match mode {
                Mode::Global => ensure!(pools_seen == [GLOBAL], "global-policy frame {f} charged to {pools_seen:?}"),
                Mode::FirstTouch => ensure!(pools_seen.len() == 1, "first-touch frame {f} charged to {pools_seen:?}"),
                Mode::Own | Mode::Spc => {
                    ensure!(pools_seen[1..].iter().all(|&p| p != GLOBAL), "frame {f}: the global pool is a non-owner sharer")
                }
                Mode::Locked => return Err(format!("locked-region frame {f} has charges")),
            }
        }

        // Unevictable pages: those of level-A/B spaces, held by their space's pool (the global
        // pool, or a reservation of their core's banks), and only those.
        for p in 0..pools as u32 {
            let pool = &self.pools[p as usize];
            ensure!(
                p == GLOBAL || pool.placement.pins_pages() || self.elists.is_empty(unevictable(p)),
                "pool {p} has unevictable pages but its frames lie in the level-C banks"
            );
            for e in self.elists.iter(unevictable(p)) {
                let f = self.entries[e as usize].frame;
                let fr = &self.frames[f as usize];
                ensure!(fr.first == e && self.entries[e as usize].next == NIL, "unevictable frame {f} is shared by several charges");
                let reg = &self.regions[fr.region as usize];
                ensure!(
                    reg.mappers.iter().all(|&(s, _)| self.spaces[s as usize].placement.pins_pages()),
                    "unevictable frame {f} holds a page of region {}, which a space with evictable pages maps",
                    fr.region
                );
            }
        }
        for (s, sp) in self.spaces.iter().enumerate().filter(|(_, sp)| sp.alive && sp.placement.pins_pages()) {
            for v in &sp.vmas {
                for &f in self.regions[v.region as usize].frame.iter().filter(|&&f| f != NIL) {
                    let e = self.frames[f as usize].first;
                    ensure!(
                        self.elists.list_of(e) == Some(unevictable(sp.pool)),
                        "space {s} pins its pages but frame {f} is not on its pool's unevictable list"
                    );
                }
            }
        }

        // Pools.
        let mut committed = 0u64;
        for (p, pool) in self.pools.iter().enumerate() {
            let p = p as u32;
            let (mut holders, mut spc_shared, mut entries) = (0u64, 0u64, 0u64);
            for e in self.elists.iter(active(p)).chain(self.elists.iter(inactive(p))).chain(self.elists.iter(unevictable(p))) {
                entries += 1;
                let f = self.entries[e as usize].frame;
                if self.frames[f as usize].first == e {
                    holders += 1;
                } else if self.regions[self.frames[f as usize].region as usize].mode == Mode::Spc {
                    spc_shared += 1;
                }
            }
            let free = self.alloc.free_frames(p);
            let cpl = self.conserved[p as usize].len() as u64;
            ensure!(cpl == spc_shared, "pool {p}: {cpl} conserved frames but {spc_shared} SPC pages shared without owning");
            if p == GLOBAL {
                ensure!(pool.lent == 0 && pool.borrowed == 0 && cpl == 0, "global pool has lent/borrowed/conserved frames");
                continue;
            }
            ensure!(!(pool.lent > 0 && pool.borrowed > 0), "pool {p} both lends and borrows");
            ensure!(
                self.alloc.free_frames_for(FrameRequest { pool: p, placement: pool.placement }) == free,
                "pool {p} keeps free frames outside {}",
                pool.placement.banks()
            );
            if !pool.kind.sets_aside_frames() {
                // A cap, not a reservation: no slots, nothing set aside, never above max.
                ensure!(
                    pool.lent == 0 && pool.borrowed == 0 && free == 0 && cpl == 0 && pool.locked_charge == 0,
                    "limit group {} has slots (lent {}, borrowed {}, free {free}, conserved {cpl}, locked {})",
                    p - 1,
                    pool.lent,
                    pool.borrowed,
                    pool.locked_charge
                );
                if pool.kind.size_is_cap() {
                    ensure!(entries <= pool.size, "limit group {} charges {entries} pages above its max {}", p - 1, pool.size);
                }
                continue;
            }
            let charge = entries + free + pool.lent + pool.locked_charge;
            let held = holders + free + cpl;
            if pool.kind.borrows_global_frames() {
                ensure!(
                    charge == pool.size + pool.borrowed,
                    "firm reservation {}: charged {entries} + free {free} + lent {} + locked {} != size {} + borrowed {}",
                    p - 1,
                    pool.lent,
                    pool.locked_charge,
                    pool.size,
                    pool.borrowed
                );
                ensure!(pool.borrowed == 0 || free == 0, "firm reservation {} keeps free frames while borrowing", p - 1);
            } else {
                ensure!(pool.borrowed == 0, "hard reservation {} borrowed frames", p - 1);
                ensure!(
                    charge == pool.size,
                    "hard reservation {}: charged {entries} + free {free} + lent {} + locked {} != size {}",
                    p - 1,
                    pool.lent,
                    pool.locked_charge,
                    pool.size
                );
                ensure!(
                    held + pool.locked_charge <= pool.size,
                    "hard reservation {} holds {held} frames (+{} locked) beyond its size {}",
                    p - 1,
                    pool.locked_charge,
                    pool.size
                );
            }
            ensure!(pool.locked_charge <= pool.size, "pool {p}: locked charge beyond size");
            committed += pool.size - pool.locked_charge;
        }
        committed += self.locked_frames + self.bound_committed_frames();
        let capacity = u64::from(self.cfg.total_frames - self.cfg.unreserved_min_frames);
        ensure!(committed <= capacity, "committed {committed} frames beyond capacity {capacity}");

        // Regions.
        let mut resident = 0usize;
        for (r, reg) in self.regions.iter().enumerate() {
            if !reg.alive {
                ensure!(reg.frame.iter().all(|&f| f == NIL), "dead region {r} keeps resident pages");
                continue;
            }
            for (i, &f) in reg.frame.iter().enumerate() {
                if f == NIL {
                    ensure!(reg.mode != Mode::Locked, "page {i} of locked region {r} is not resident");
                    continue;
                }
                resident += 1;
                let fr = &self.frames[f as usize];
                ensure!(
                    fr.region == r as u32 && fr.page == i as u32,
                    "region {r} page {i} points at frame {f} which holds region {} page {}",
                    fr.region,
                    fr.page
                );
            }
            for (i, &o) in reg.swap_owner.iter().enumerate() {
                ensure!(
                    o == NIL || (reg.frame[i] == NIL && reg.pflags[i] & BACKED != 0 && (o as usize) < self.pools.len()),
                    "region {r} page {i}: swap owner {o} recorded for a page that is not swapped out"
                );
            }
            let solo = match reg.mappers[..] {
                [(s, vi)] => self.spaces[s as usize].vmas.get(vi as usize).map(|v| (s, v.start)),
                _ => None,
            };
            ensure!(reg.solo == solo, "region {r}: its one mapping is recorded as {:?}, its mappers say {solo:?}", reg.solo);
            for &(s, vi) in &reg.mappers {
                let sp = &self.spaces[s as usize];
                ensure!(sp.alive, "region {r} is mapped by dead space {s}");
                if reg.mode == Mode::Locked && sp.pool != GLOBAL {
                    ensure!(
                        reg.participants.contains(&sp.pool),
                        "locked region {r} is mapped by space {s} whose reservation gave up nothing for it"
                    );
                }
                let v = sp.vmas.get(vi as usize).ok_or_else(|| format!("region {r}: mapper ({s},{vi}) has no vma"))?;
                ensure!(v.region == r as u32 || v.shadow == r as u32, "region {r}: mapper ({s},{vi}) maps another region");
            }
        }
        ensure!(resident as u64 == in_use as u64 + locked, "{resident} resident pages but {in_use} in-use + {locked} locked frames");

        // Page tables.
        for (s, sp) in self.spaces.iter().enumerate() {
            if !sp.alive {
                continue;
            }
            let mut present = 0u64;
            let mut next_start = 0u32;
            for (vi, v) in sp.vmas.iter().enumerate() {
                ensure!(v.start == next_start, "space {s}: vma {vi} does not follow the previous one");
                next_start = v.start + v.pages;
                for me in [v.region, v.shadow] {
                    if me != NIL {
                        ensure!(
                            self.regions[me as usize].mappers.contains(&(s as u32, vi as u32)),
                            "space {s} vma {vi} is missing from region {me}'s reverse map"
                        );
                    }
                }
                for i in 0..v.pages {
                    let pte = sp.ptes[(v.start + i) as usize];
                    if pte.flags & PRESENT == 0 {
                        ensure!(pte.frame == NIL, "space {s} page {}: not present but points at a frame", v.start + i);
                        continue;
                    }
                    present += 1;
                    let fr = &self.frames[pte.frame as usize];
                    ensure!(
                        (fr.region == v.region || fr.region == v.shadow) && fr.page == i,
                        "space {s} page {} maps frame {} holding region {} page {}",
                        v.start + i,
                        pte.frame,
                        fr.region,
                        fr.page
                    );
                    let reg = &self.regions[fr.region as usize];
                    if pte.flags & WRITABLE != 0 {
                        ensure!(v.writable && !reg.is_cow_base(), "space {s} page {} is writable but must not be", v.start + i);
                    }
                    if sp.pool != GLOBAL && matches!(reg.mode, Mode::Own | Mode::Spc) {
                        ensure!(
                            self.entry_of(sp.pool, pte.frame).is_some(),
                            "space {s} maps frame {} which its reservation does not account",
                            pte.frame
                        );
                    }
                }
            }
            ensure!(next_start as usize == sp.ptes.len(), "space {s}: page table longer than its mappings");
            ensure!(
                present == sp.stats.resident_pages,
                "space {s}: {present} present entries but resident counter {}",
                sp.stats.resident_pages
            );
        }
        self.check_bounds()
    }

    /// The bounds' invariants:
    ///
    /// * each bound counts exactly the distinct frames its spaces map present (locked pages
    ///   aside), with one charge per frame whose `refs` is the number of those entries, plus
    ///   frames one of its spaces brought in that nobody has mapped since (`pending`);
    /// * no bound counts more than its size, and a child's frames all count in its parent
    ///   (nested bounds: no subtree exceeds any bound it is under);
    /// * a space's bounds are closed under parents; pinned spaces have none; parents come
    ///   before their children (the tree has no cycle).
    fn check_bounds(&self) -> Result<(), String> {
        if self.bounds.is_empty() {
            ensure!(self.bhead.is_empty() && self.bcharges.is_empty(), "bound charges without bounds");
            return Ok(());
        }
        self.blists.check().map_err(|e| format!("bound lists: {e}"))?;
        let n = self.frames.len();
        ensure!(self.bhead.len() == n, "{} bound chains for {n} frames", self.bhead.len());
        for (b, bs) in self.bounds.iter().enumerate() {
            ensure!(bs.parent == NIL || (bs.parent as usize) < b, "bound {b}'s parent {} does not come before it", bs.parent);
            ensure!(
                bs.charged == u64::from(self.blists.len(b as u32)),
                "bound {b} counts {} pages but lists {}",
                bs.charged,
                self.blists.len(b as u32)
            );
            ensure!(bs.charged <= bs.size, "bound {b} ({}) counts {} pages, above its size {}", bs.name, bs.charged, bs.size);
            ensure!(bs.peak >= bs.charged, "bound {b}: peak {} below its count {}", bs.peak, bs.charged);
        }
        // Present entries per (bound, frame), and whether anyone maps each frame.
        let mut expected: BTreeMap<(u32, u32), u32> = BTreeMap::new();
        let mut mapped = vec![false; n];
        for (s, sp) in self.spaces.iter().enumerate().filter(|(_, sp)| sp.alive) {
            ensure!(!sp.placement.pins_pages() || sp.bounds.is_empty(), "space {s} pins its pages but is bound");
            for &b in &sp.bounds {
                ensure!((b as usize) < self.bounds.len(), "space {s} is bound to missing bound {b}");
                let p = self.bounds[b as usize].parent;
                ensure!(p == NIL || sp.bounds.contains(&p), "space {s} is charged to bound {b} but not to its parent {p}");
            }
            for pte in sp.ptes.iter().filter(|p| p.flags & PRESENT != 0) {
                mapped[pte.frame as usize] = true;
                if self.regions[self.frames[pte.frame as usize].region as usize].mode == Mode::Locked {
                    continue;
                }
                for &b in &sp.bounds {
                    *expected.entry((b, pte.frame)).or_default() += 1;
                }
            }
        }
        let mut live = 0usize;
        for (f, &head) in self.bhead.iter().enumerate() {
            let mut seen: Vec<u32> = Vec::new();
            let mut c = head;
            while c != NIL {
                let ch = &self.bcharges[c as usize];
                live += 1;
                ensure!(ch.frame == f as u32, "frame {f}'s bound chain holds charge {c} of frame {}", ch.frame);
                ensure!(!seen.contains(&ch.bound), "frame {f} is counted twice by bound {}", ch.bound);
                seen.push(ch.bound);
                ensure!(self.blists.list_of(c) == Some(ch.bound), "charge {c} of bound {} is not on its list", ch.bound);
                let fr = &self.frames[f];
                ensure!(fr.region != NIL, "bound {} counts frame {f}, which holds no page", ch.bound);
                ensure!(
                    self.regions[fr.region as usize].mode != Mode::Locked,
                    "bound {} counts frame {f}, which holds a locked page",
                    ch.bound
                );
                let want = expected.remove(&(ch.bound, f as u32)).unwrap_or(0);
                ensure!(ch.refs == want, "bound {} counts {} mappings of frame {f} but its spaces map it {want} times", ch.bound, ch.refs);
                ensure!(ch.refs > 0 || ch.pending, "bound {} counts frame {f}, which its spaces neither map nor brought in", ch.bound);
                ensure!(!(ch.pending && mapped[f]), "frame {f} is mapped but still pending for bound {}", ch.bound);
                c = ch.next;
            }
            for &b in &seen {
                let p = self.bounds[b as usize].parent;
                ensure!(p == NIL || seen.contains(&p), "bound {b} counts frame {f} but its parent {p} does not");
            }
        }
        if let Some(((b, f), k)) = expected.into_iter().next() {
            return Err(format!("bound {b}'s spaces map frame {f} {k} times but the bound does not count it"));
        }
        ensure!(live + self.free_bcharges.len() == self.bcharges.len(), "bound charges leaked");
        Ok(())
    }
}
