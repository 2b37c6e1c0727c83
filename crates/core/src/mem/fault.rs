//! Page references: the hit path, and the fault path (zero-fill, swap-in with readahead,
//! mapping resident pages with per-policy charging, copy-on-write).

use super::list::NIL;
use super::*;

/// What the fault path accumulates while it works.
#[derive(Default)]
struct FaultOut {
    cpu: Nanos,
    /// The part of `cpu` Linux counts as a memory stall: direct reclaim, and the kernel work
    /// of a refault (swap_read_folio runs inside psi_memstall_enter for workingset pages).
    memstall_cpu: Nanos,
    /// CPU the job spends once its device read is done (swap-in work after the I/O).
    after_cpu: Nanos,
    /// Set when the job must wait for a device read.
    ready_at: Option<Nanos>,
    refault: bool,
}

impl FaultOut {
    fn wait_for(&mut self, t: Nanos, refault: bool) {
        self.ready_at = Some(self.ready_at.map_or(t, |r| r.max(t)));
        self.refault |= refault;
    }
}

/// Which page a faulting reference resolves to.
enum Target {
    /// Page `i` of this region (ordinary regions, or the shadow of a COW mapping).
    Page(u32),
    /// Read of a copy-on-write base page still shared: map it read-only.
    BaseRead,
    /// Write to a copy-on-write base page: break the sharing.
    CowBreak,
}

impl<A: FrameAllocator> Memory<A> {
    /// One page reference by `space` at `now`.
    ///
    /// The hit path is two bounds-checked array lookups and a bit-or: a present entry with
    /// the needed permission gets its referenced (and, on writes, dirty) bit set. Anything
    /// else goes to the fault path, which may evict pages (write-backs are queued on the
    /// device at `now`, ahead of any read this fault submits).
    #[inline]
    pub fn access(&mut self, now: Nanos, space: AsId, vpn: Vpn, kind: RefKind) -> Result<Access, MemError> {
        if let Some(sp) = self.spaces.get_mut(space.0 as usize) {
            if let Some(pte) = sp.ptes.get_mut(vpn.0 as usize) {
                let (need, set) = match kind {
                    RefKind::Read => (PRESENT, REFERENCED | WINDOW),
                    RefKind::Write => (PRESENT | WRITABLE, REFERENCED | WINDOW | DIRTY),
                    RefKind::Discard => return self.discard(space, vpn).map(|()| Access::Hit),
                };
                if pte.flags & need == need {
                    pte.flags |= set;
                    return Ok(Access::Hit);
                }
            }
        }
        let r = self.fault(now, space, vpn, kind);
        self.debug_check();
        r
    }

    /// Whether a reference of `kind` to `vpn` would be a hit now (present, and writable for
    /// a write). The engine applies a run of hits ahead and stops a job's compute step
    /// exactly where the first reference that faults falls.
    #[inline]
    pub fn would_hit(&self, space: AsId, vpn: Vpn, kind: RefKind) -> bool {
        let need = match kind {
            RefKind::Read => PRESENT,
            RefKind::Write => PRESENT | WRITABLE,
            RefKind::Discard => return false,
        };
        self.spaces.get(space.0 as usize).and_then(|s| s.ptes.get(vpn.0 as usize)).is_some_and(|p| p.flags & need == need)
    }

    /// Applies the leading references of `refs` that hit, exactly as [`Memory::access`]
    /// would, and returns how many; stops at the first that would fault. The engine's runs
    /// of hits, without a page-table lookup per reference for `would_hit` and another for
    /// `access`.
    #[inline]
    pub fn hit_run(&mut self, space: AsId, refs: &[(Vpn, RefKind)]) -> usize {
        let Some(sp) = self.spaces.get_mut(space.0 as usize) else {
            return 0;
        };
        // Flags needed and flags set per kind, looked up rather than matched: reads and writes
        // are mixed at random, and a branch on the kind mispredicts. A discard needs a flag no
        // page has, so the run ends there and the caller frees the page.
        const NEED: [u8; 3] = [PRESENT, PRESENT | WRITABLE, NEVER_SET];
        const SET: [u8; 3] = [REFERENCED | WINDOW, REFERENCED | WINDOW | DIRTY, 0];
        const _: () = assert!(RefKind::Read as usize == 0 && RefKind::Write as usize == 1 && RefKind::Discard as usize == 2);
        for (n, &(vpn, kind)) in refs.iter().enumerate() {
            let (need, set) = (NEED[kind as usize], SET[kind as usize]);
            match sp.ptes.get_mut(vpn.0 as usize) {
                Some(pte) if pte.flags & need == need => pte.flags |= set,
                _ => return n,
            }
        }
        refs.len()
    }

    /// Whether a reference of `kind` to `vpn` would fault and read the page from its device:
    /// it is not resident but has a copy there. A reference that would hit, zero-fill or map
    /// a page already in memory would not.
    pub fn would_read(&self, space: AsId, vpn: Vpn, kind: RefKind) -> bool {
        if kind == RefKind::Discard || self.would_hit(space, vpn, kind) {
            return false;
        }
        let Ok(s) = self.space_idx(space) else { return false };
        let Some(vi) = self.find_vma(s, vpn.0) else { return false };
        let vma = self.spaces[s].vmas[vi];
        let i = (vpn.0 - vma.start) as usize;
        let on_device = |r: u32| {
            let reg = &self.regions[r as usize];
            reg.frame[i] == NIL && reg.pflags[i] & BACKED != 0
        };
        if vma.shadow == NIL {
            return on_device(vma.region);
        }
        let sh = &self.regions[vma.shadow as usize];
        let own = sh.frame[i] != NIL || sh.pflags[i] & MATERIAL != 0;
        if own || self.regions[vma.region as usize].cow_refs[i] == 0 {
            on_device(vma.shadow)
        } else {
            // A copy-on-write break or a read of the shared base reads the base page.
            on_device(vma.region)
        }
    }

    /// Whether `vpn` is mapped present in `space`'s page table.
    pub fn is_mapped(&self, space: AsId, vpn: Vpn) -> bool {
        self.spaces.get(space.0 as usize).and_then(|s| s.ptes.get(vpn.0 as usize)).is_some_and(|p| p.flags & PRESENT != 0)
    }

    /// Frees page `vpn` of `space` as `madvise(MADV_DONTNEED)` (or `free` returning it to the
    /// kernel) does for private anonymous memory: a resident page's frame is freed and its
    /// charge undone, its content dropped even if dirty (no write-back); a swapped-out page's
    /// swap slot is freed. The next reference zero-fills a new page (a minor fault, no read).
    /// No device time. Shared and copy-on-write pages are refused.
    pub fn discard(&mut self, space: AsId, vpn: Vpn) -> Result<(), MemError> {
        let s = self.space_idx(space)?;
        let vi = self.find_vma(s, vpn.0).ok_or(MemError::Unmapped { space: space.0, vpn: vpn.0 })?;
        let vma = self.spaces[s].vmas[vi];
        let reg = &self.regions[vma.region as usize];
        if vma.shadow != NIL || reg.kind.is_shared() || reg.is_cow_base() {
            return Err(MemError::NotDiscardable { space: space.0, vpn: vpn.0 });
        }
        self.discard_page(vma.region, vpn.0 - vma.start);
        // Not present and never touched, as after the mapping was created.
        self.spaces[s].ptes[vpn.0 as usize] = EMPTY_PTE;
        self.debug_check();
        Ok(())
    }

    fn find_vma(&self, s: usize, vpn: u32) -> Option<usize> {
        let vmas = &self.spaces[s].vmas;
        let k = vmas.partition_point(|v| v.start <= vpn);
        let v = vmas.get(k.checked_sub(1)?)?;
        (vpn < v.start + v.pages).then_some(k - 1)
    }

    fn fault(&mut self, now: Nanos, space: AsId, vpn: Vpn, kind: RefKind) -> Result<Access, MemError> {
        let s = self.space_idx(space)?;
        let vi = self.find_vma(s, vpn.0).ok_or(MemError::Unmapped { space: space.0, vpn: vpn.0 })?;
        let vma = self.spaces[s].vmas[vi];
        let write = kind == RefKind::Write;
        if write && !vma.writable {
            return Err(MemError::ReadOnly { space: space.0, vpn: vpn.0 });
        }
        let i = vpn.0 - vma.start;
        let pool = self.spaces[s].pool;
        let evictions_before = self.reclaim_work;
        let mut out = FaultOut::default();

        let target = if vma.shadow == NIL {
            Target::Page(vma.region)
        } else {
            let sh = &self.regions[vma.shadow as usize];
            let own = sh.frame[i as usize] != NIL || sh.pflags[i as usize] & MATERIAL != 0;
            if own || self.regions[vma.region as usize].cow_refs[i as usize] == 0 {
                Target::Page(vma.shadow)
            } else if write {
                Target::CowBreak
            } else {
                Target::BaseRead
            }
        };
        let (f, writable) = match target {
            Target::Page(r) => (self.bring_in(now, s, pool, r, i, &mut out)?, vma.writable),
            Target::BaseRead => (self.bring_in(now, s, pool, vma.region, i, &mut out)?, false),
            Target::CowBreak => (self.cow_break(now, s, pool, vma, i, &mut out)?, true),
        };
        self.map_pte(s, vpn.0, f, writable, write);

        let reclaim = Nanos(self.cfg.costs.reclaim_per_page.as_ns() * (self.reclaim_work - evictions_before));
        out.cpu += reclaim;
        out.memstall_cpu += reclaim;
        let st = &mut self.spaces[s].stats;
        Ok(match out.ready_at {
            Some(ready_at) if ready_at > now => {
                st.major_faults += 1;
                Access::Major { cpu: out.cpu, memstall_cpu: out.memstall_cpu, after_cpu: out.after_cpu, ready_at, refault: out.refault }
            }
            _ => {
                st.minor_faults += 1;
                Access::Minor { cpu: out.cpu + out.after_cpu, memstall_cpu: out.memstall_cpu }
            }
        })
    }

    /// Points `space`'s entry for `vpn` at frame `f`.
    fn map_pte(&mut self, s: usize, vpn: u32, f: u32, writable: bool, write: bool) {
        let old = self.spaces[s].ptes[vpn as usize];
        if old.flags & PRESENT != 0 && old.frame != f {
            self.clear_pte(s, vpn);
        }
        let sp = &mut self.spaces[s];
        let pte = &mut sp.ptes[vpn as usize];
        let fresh = pte.flags & PRESENT == 0;
        if fresh {
            sp.stats.resident_pages += 1;
            sp.stats.peak_resident_pages = sp.stats.peak_resident_pages.max(sp.stats.resident_pages);
        }
        pte.frame = f;
        pte.flags = (pte.flags & (WINDOW | DIRTY))
            | PRESENT
            | REFERENCED
            | WINDOW
            | if writable { WRITABLE } else { 0 }
            | if write { DIRTY } else { 0 };
        if fresh {
            self.bound_on_map(s, f);
        }
    }

    /// Unmaps one page table entry, folding its dirty bit into the frame. Keeps `WINDOW`.
    pub(super) fn clear_pte(&mut self, s: usize, vpn: u32) -> bool {
        let pte = self.spaces[s].ptes[vpn as usize];
        if pte.flags & PRESENT == 0 {
            return false;
        }
        if pte.flags & DIRTY != 0 {
            self.frames[pte.frame as usize].dirty = true;
        }
        let sp = &mut self.spaces[s];
        sp.ptes[vpn as usize] = Pte { frame: NIL, flags: pte.flags & WINDOW };
        sp.stats.resident_pages -= 1;
        self.bound_on_unmap(s, pte.frame);
        true
    }

    /// Makes page `i` of region `r` resident and accounted for `pool`'s mapping of it.
    fn bring_in(&mut self, now: Nanos, s: usize, pool: u32, r: u32, i: u32, out: &mut FaultOut) -> Result<u32, MemError> {
        let f = self.regions[r as usize].frame[i as usize];
        if f != NIL {
            let was = self.frames[f as usize].pinned;
            self.frames[f as usize].pinned = true;
            let bounded = !self.spaces[s].bounds.is_empty() && self.regions[r as usize].mode != Mode::Locked;
            let mut charged = if bounded { self.bound_room(now, s, Some(f)) } else { Ok(()) };
            if charged.is_ok() {
                charged = self.charge_mapper(now, pool, f);
            }
            self.frames[f as usize].pinned = was;
            charged?;
            if self.frames[f as usize].readahead {
                self.frames[f as usize].readahead = false;
                self.regions[r as usize].ra_hits += 1;
            }
            out.cpu += self.cfg.costs.minor;
            let ready = self.frames[f as usize].ready_at;
            if ready > now {
                // Someone else's read of this page is still in flight.
                out.wait_for(ready, self.regions[r as usize].pflags[i as usize] & EVICTED != 0);
            }
            return Ok(f);
        }
        let mode = self.regions[r as usize].mode;
        debug_assert_ne!(mode, Mode::Locked, "locked pages are always resident");
        let alloc = if mode == Mode::Global { GLOBAL } else { self.swap_owner(r, i).unwrap_or(pool) };
        let placement = self.spaces[s].placement;
        let bounded = !self.spaces[s].bounds.is_empty();
        if bounded {
            self.bound_room(now, s, None)?;
        }
        let f = self.take_free(FrameRequest { pool: alloc, placement }, now, true)?;
        let first_list = if placement.pins_pages() {
            unevictable(alloc)
        } else if alloc == GLOBAL {
            inactive(GLOBAL)
        } else {
            active(alloc)
        };
        self.install(f, r, i, alloc, first_list, now);
        if bounded {
            self.bound_pending(s, f);
        }
        let flags = self.regions[r as usize].pflags[i as usize];
        if flags & BACKED == 0 {
            out.cpu += self.cfg.costs.zero_fill;
            return Ok(f);
        }
        // Read it, with the swapped-out neighbours of its readahead cluster.
        self.frames[f as usize].pinned = true;
        let mut batch = std::mem::take(&mut self.scratch_frames);
        batch.clear();
        batch.push(f);
        let ra = self.readahead_window(r, i);
        if ra > 1 {
            let lo = i & !(ra - 1);
            let hi = (lo + ra).min(self.regions[r as usize].pages);
            for j in lo..hi {
                let reg = &self.regions[r as usize];
                if j == i || reg.frame[j as usize] != NIL || reg.pflags[j as usize] & BACKED == 0 {
                    continue;
                }
                // Readahead takes room its bounds have; it never makes room.
                if bounded && !self.bound_has_room(s) {
                    break;
                }
                // Each page is charged to its own recorded owner (first-touch).
                let owner = self.swap_owner(r, j).unwrap_or(alloc);
                // Readahead never waits for or steals pages under I/O.
                let Ok(g) = self.take_free(FrameRequest { pool: owner, placement }, now, false) else {
                    break;
                };
                let list = if placement.pins_pages() { unevictable(owner) } else { inactive(owner) };
                self.install(g, r, j, owner, list, now);
                if bounded {
                    self.bound_pending(s, g);
                }
                self.frames[g as usize].pinned = true;
                self.frames[g as usize].readahead = true;
                batch.push(g);
            }
        }
        let dev = self.regions[r as usize].device as usize;
        let bytes = batch.len() as u64 * self.cfg.page_bytes;
        let done = self.devices[dev].submit(now, IoOp::Read, bytes);
        for &g in &batch {
            let fr = &mut self.frames[g as usize];
            fr.ready_at = done;
            fr.pinned = false;
        }
        self.spaces[s].stats.pages_swapped_in += batch.len() as u64;
        out.after_cpu += Nanos(self.cfg.costs.swap_in_per_page.as_ns() * batch.len() as u64);
        self.scratch_frames = batch;
        let anon = !matches!(self.regions[r as usize].kind, RegionKind::SharedFile { .. });
        // A swapped-out anonymous page was necessarily in memory before; a file page is a
        // refault only if it was evicted.
        let refault = anon || flags & EVICTED != 0;
        out.cpu += self.cfg.costs.major;
        if refault {
            out.memstall_cpu += self.cfg.costs.major;
        }
        out.wait_for(done, refault);
        Ok(f)
    }

    /// The owner recorded when page `i` of region `r` was swapped out (only first-touch
    /// regions record one; `install` clears it once the page is back).
    fn swap_owner(&self, r: u32, i: u32) -> Option<u32> {
        let owner = *self.regions[r as usize].swap_owner.get(i as usize)?;
        (owner != NIL).then_some(owner)
    }

    /// Pages to read around a swap-in of page `i` of region `r`: adaptive like Linux's
    /// `swapin_nr_pages` — the readahead pages used since the last swap-in plus two, rounded up
    /// to a power of two and capped at `readahead_pages`; a single page when none was used and
    /// this fault is not next to the previous one (random access).
    fn readahead_window(&mut self, r: u32, i: u32) -> u32 {
        let max = self.cfg.readahead_pages;
        let reg = &mut self.regions[r as usize];
        let hits = std::mem::take(&mut reg.ra_hits);
        let adjacent = reg.ra_prev != NIL && reg.ra_prev.abs_diff(i) == 1;
        reg.ra_prev = i;
        if max <= 1 || (hits == 0 && !adjacent) {
            return 1;
        }
        (hits + 2).next_power_of_two().min(max)
    }

    /// Puts page `i` of region `r` into free frame `f`, held by `pool`, on list `list`.
    pub(super) fn install(&mut self, f: u32, r: u32, i: u32, pool: u32, list: u32, now: Nanos) {
        let e = self.new_entry(f, pool, r, i);
        self.elists.push_back(list, e);
        self.frames[f as usize] = Frame { region: r, page: i, first: e, dirty: false, pinned: false, ready_at: now, readahead: false };
        let reg = &mut self.regions[r as usize];
        reg.frame[i as usize] = f;
        reg.pflags[i as usize] |= MATERIAL;
        reg.forget_swap_owner(i);
    }

    /// Accounts a resident page for a new mapping by `pool`, per the region's policy.
    fn charge_mapper(&mut self, now: Nanos, pool: u32, f: u32) -> Result<(), MemError> {
        let r = self.frames[f as usize].region;
        let mode = self.regions[r as usize].mode;
        if pool == GLOBAL || matches!(mode, Mode::Global | Mode::Locked | Mode::FirstTouch) {
            return Ok(());
        }
        if self.entry_of(pool, f).is_some() {
            return Ok(());
        }
        match mode {
            Mode::Own => {
                // No-SP-Mgmt: the page counts in this reservation too, but its frame is
                // already paid for, so one free page goes back to the global pool.
                self.acquire_unbacked_slot(pool, now)?;
            }
            Mode::Spc => {
                // SPC: conserve one free page for it in the conserved-page list.
                let g = self.take_free(FrameRequest::from_pool(pool), now, true)?;
                self.conserved[pool as usize].push_back(g);
            }
            Mode::Global | Mode::Locked | Mode::FirstTouch => unreachable!(),
        }
        let Frame { region: r, page: i, .. } = self.frames[f as usize];
        let e = self.new_entry(f, pool, r, i);
        self.elists.push_back(active(pool), e);
        Ok(())
    }

    /// A write to a copy-on-write page still shared through the base region.
    fn cow_break(&mut self, now: Nanos, s: usize, pool: u32, vma: Vma, i: u32, out: &mut FaultOut) -> Result<u32, MemError> {
        let (b, sh) = (vma.region, vma.shadow);
        let fb = self.regions[b as usize].frame[i as usize];
        let sole_user = self.regions[b as usize].cow_refs[i as usize] == 1;
        let sole_charge = fb == NIL || {
            let e = self.frames[fb as usize].first;
            e != NIL && self.entries[e as usize].pool == pool && self.entries[e as usize].next == NIL
        };
        if sole_user && sole_charge {
            // Nobody else can see the page any more: it simply becomes private (no copy).
            self.move_page(b, sh, i);
            self.regions[b as usize].cow_refs[i as usize] = 0;
            return self.bring_in(now, s, pool, sh, i, out);
        }
        let src = self.bring_in(now, s, pool, b, i, out)?;
        let was = self.frames[src as usize].pinned;
        self.frames[src as usize].pinned = true;
        let placement = self.spaces[s].placement;
        let bounded = !self.spaces[s].bounds.is_empty();
        let mut got = if bounded { self.bound_room(now, s, None).map(|()| NIL) } else { Ok(NIL) };
        if got.is_ok() {
            got = self.take_free(FrameRequest { pool, placement }, now, true);
        }
        self.frames[src as usize].pinned = was;
        let g = got?;
        let list = if placement.pins_pages() { unevictable(pool) } else { active(pool) };
        self.install(g, sh, i, pool, list, now);
        if bounded {
            self.bound_pending(s, g);
        }
        let src_ready = self.frames[src as usize].ready_at.max(now);
        let fr = &mut self.frames[g as usize];
        fr.dirty = true;
        fr.ready_at = src_ready;
        out.cpu += self.cfg.costs.cow_copy;
        self.spaces[s].stats.cow_copies += 1;
        let refs = &mut self.regions[b as usize].cow_refs[i as usize];
        *refs -= 1;
        if *refs == 0 {
            self.discard_page(b, i);
        }
        Ok(g)
    }

    /// Moves page `i` (resident or swapped) from region `from` to region `to`.
    fn move_page(&mut self, from: u32, to: u32, i: u32) {
        let f = self.regions[from as usize].frame[i as usize];
        let flags = self.regions[from as usize].pflags[i as usize];
        if f != NIL {
            // Unmap whatever still maps it through the base (only the writer can).
            self.unmap_all(f, None);
            self.frames[f as usize].region = to;
            let mut e = self.frames[f as usize].first;
            while e != NIL {
                self.entries[e as usize].region = to;
                e = self.entries[e as usize].next;
            }
        }
        self.regions[from as usize].forget_swap_owner(i);
        self.regions[to as usize].frame[i as usize] = f;
        self.regions[to as usize].pflags[i as usize] = flags | MATERIAL;
        self.regions[from as usize].frame[i as usize] = NIL;
        self.regions[from as usize].pflags[i as usize] = 0;
    }
}
