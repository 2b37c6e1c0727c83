//! Address spaces and regions: creating them, mapping private and shared memory, `fork`
//! with copy-on-write.

use super::list::NIL;
use super::*;

impl<A: FrameAllocator> Memory<A> {
    /// A new, empty address space, bound to `reservation` (or to the global pool).
    pub fn create_space(&mut self, name: &str, reservation: Option<ResId>) -> Result<AsId, MemError> {
        self.create_space_at(name, reservation, Placement::Any)
    }

    /// A new, empty address space whose faults take frames of `placement`. A level-A/B space
    /// ([`Placement::pins_pages`]) maps no shared region and is never forked: its pages are
    /// its own and unevictable. It is charged to the global pool or to a hard or firm
    /// reservation of its own core's banks ([`Memory::create_reservation_at`]), never to a
    /// limit group, which would reclaim its pages; any other space to a pool of the level-C
    /// banks.
    pub fn create_space_at(&mut self, name: &str, reservation: Option<ResId>, placement: Placement) -> Result<AsId, MemError> {
        let pool = match reservation {
            Some(r) => self.pool_of(r)?,
            None => GLOBAL,
        };
        let space = self.spaces.len() as u32;
        if pool != GLOBAL {
            let p = &self.pools[pool as usize];
            if placement.pins_pages() && !p.kind.sets_aside_frames() {
                return Err(MemError::PlacementUnsupported { space, what: "a memory-limited group cannot hold" });
            }
            if p.placement.ab_core() != placement.ab_core() {
                return Err(MemError::PlacementMismatch {
                    space,
                    name: p.name.clone(),
                    want: placement.banks(),
                    have: p.placement.banks(),
                });
            }
        }
        self.spaces.push(Space {
            name: name.to_string(),
            pool,
            placement,
            ptes: Vec::new(),
            vmas: Vec::new(),
            stats: SpaceStats::default(),
            bounds: Vec::new(),
            alive: true,
        });
        Ok(AsId(self.spaces.len() as u32 - 1))
    }

    pub(super) fn space_idx(&self, space: AsId) -> Result<usize, MemError> {
        match self.spaces.get(space.0 as usize) {
            Some(s) if s.alive => Ok(space.0 as usize),
            _ => Err(MemError::NoSuchSpace(space.0)),
        }
    }

    pub(super) fn region_idx(&self, region: RegionId) -> Result<usize, MemError> {
        match self.regions.get(region.0 as usize) {
            Some(r) if r.alive => Ok(region.0 as usize),
            _ => Err(MemError::NoSuchRegion(region.0)),
        }
    }

    pub fn space_name(&self, space: AsId) -> Option<&str> {
        self.spaces.get(space.0 as usize).map(|s| s.name.as_str())
    }

    fn new_region(&mut self, name: &str, kind: RegionKind, pages: u32, policy: SharePolicy, mode: Mode) -> u32 {
        self.regions.push(Region {
            name: name.to_string(),
            kind,
            policy,
            mode,
            pages,
            frame: vec![NIL; pages as usize],
            pflags: vec![0; pages as usize],
            cow_refs: Vec::new(),
            mappers: Vec::new(),
            solo: None,
            device: match kind {
                RegionKind::SharedFile { device } => device.0,
                _ => DeviceId::SWAP.0,
            },
            participants: Vec::new(),
            usage: BTreeMap::new(),
            ra_hits: 0,
            ra_prev: NIL,
            swap_owner: Vec::new(),
            alive: true,
        });
        self.regions.len() as u32 - 1
    }

    /// Records that vma `vi` of space `s` can map region `r`'s pages.
    fn add_mapper(&mut self, r: u32, s: u32, vi: u32) {
        self.regions[r as usize].mappers.push((s, vi));
        self.mappers_changed(r);
    }

    /// Keeps `regions[r].solo` in step with its mappers.
    pub(super) fn mappers_changed(&mut self, r: u32) {
        let solo = match self.regions[r as usize].mappers[..] {
            [(s, vi)] => Some((s, self.spaces[s as usize].vmas[vi as usize].start)),
            _ => None,
        };
        self.regions[r as usize].solo = solo;
    }

    /// Appends a mapping of `region` to `space`'s virtual pages; returns its first page.
    fn add_vma(&mut self, s: usize, region: u32, shadow: u32, writable: bool) -> Result<Vpn, MemError> {
        let pool = self.spaces[s].pool;
        if !self.pools[pool as usize].kind.may_map_spc_spel()
            && matches!(self.regions[region as usize].policy, SharePolicy::Spc | SharePolicy::Spel | SharePolicy::Auto)
        {
            return Err(MemError::UnsupportedForLimit(pool - 1));
        }
        let pages = self.regions[region as usize].pages;
        let start = self.spaces[s].ptes.len() as u64;
        if start + u64::from(pages) >= u64::from(u32::MAX) {
            return Err(MemError::AddressSpaceFull { space: s as u32 });
        }
        let sp = &mut self.spaces[s];
        sp.ptes.resize(sp.ptes.len() + pages as usize, EMPTY_PTE);
        let vi = sp.vmas.len() as u32;
        sp.vmas.push(Vma { start: start as u32, pages, region, shadow, writable });
        self.add_mapper(region, s as u32, vi);
        if shadow != NIL {
            self.add_mapper(shadow, s as u32, vi);
        }
        Ok(Vpn(start as u32))
    }

    /// Maps `pages` of new private anonymous memory into `space`.
    pub fn map_private(&mut self, space: AsId, name: &str, pages: u32) -> Result<(RegionId, Vpn), MemError> {
        let s = self.space_idx(space)?;
        if pages == 0 {
            return Err(MemError::EmptyRegion);
        }
        let r = self.new_region(name, RegionKind::PrivateAnon, pages, SharePolicy::Private, Mode::Own);
        let vpn = self.add_vma(s, r, NIL, true)?;
        Ok((RegionId(r), vpn))
    }

    /// Creates a shared region (shm segment or file) managed by `policy`; map it with
    /// [`Memory::map_shared`].
    pub fn create_shared(&mut self, name: &str, kind: RegionKind, pages: u32, policy: SharePolicy) -> Result<RegionId, MemError> {
        if pages == 0 {
            return Err(MemError::EmptyRegion);
        }
        let kind = match kind {
            RegionKind::PrivateAnon => RegionKind::SharedAnon,
            k => k,
        };
        if let RegionKind::SharedFile { device } = kind {
            self.device(device)?;
        }
        let mode = match policy {
            SharePolicy::Global => Mode::Global,
            SharePolicy::Private => Mode::Own,
            SharePolicy::FirstTouch => Mode::FirstTouch,
            SharePolicy::Spc | SharePolicy::Spel | SharePolicy::Auto => Mode::Spc,
        };
        let r = self.new_region(name, kind, pages, policy, mode);
        if let RegionKind::SharedFile { .. } = kind {
            // File pages start on the file.
            self.regions[r as usize].pflags.fill(BACKED);
        }
        Ok(RegionId(r))
    }

    /// Maps a shared region into `space`. Mapping a SPEL-locked region runs the SPEL
    /// admission test for the space's reservation and makes it give up the region's size
    /// (evicting its own pages at `now` if it must).
    pub fn map_shared(&mut self, now: Nanos, space: AsId, region: RegionId, writable: bool) -> Result<Vpn, MemError> {
        let s = self.space_idx(space)?;
        let r = self.region_idx(region)?;
        if !self.regions[r].kind.is_shared() || self.regions[r].is_cow_base() {
            return Err(MemError::NoSuchRegion(region.0));
        }
        if self.spaces[s].vmas.iter().any(|v| v.region == r as u32) {
            return Err(MemError::AlreadyMapped { space: space.0, region: region.0 });
        }
        if self.spaces[s].placement.pins_pages() {
            return Err(MemError::PlacementUnsupported { space: space.0, what: "shared regions cannot use" });
        }
        let pool = self.spaces[s].pool;
        if self.regions[r].mode == Mode::Locked && pool != GLOBAL && !self.regions[r].participants.contains(&pool) {
            self.spel_join(now, r as u32, pool)?;
        }
        let vpn = self.add_vma(s, r as u32, NIL, writable)?;
        self.debug_check();
        Ok(vpn)
    }

    /// Forks `parent` at `now`: the child is bound to `reservation`, maps the same shared
    /// regions (joining their SPEL locks, which may evict its reservation's pages), and
    /// the parent's private memory becomes copy-on-write for both: a shared *base* region
    /// managed between reservations by `cow_policy` (`private`, `first-touch` or `spc`), plus
    /// a private shadow region per address space that receives the pages it writes. The
    /// child starts with an empty page table (its first touches are minor faults).
    ///
    /// Simplification: pages a parent had already copied in an earlier fork are seen by the
    /// child as the base's version (content is not modelled, only residency and cost).
    pub fn fork(
        &mut self,
        now: Nanos,
        parent: AsId,
        name: &str,
        reservation: Option<ResId>,
        cow_policy: SharePolicy,
    ) -> Result<AsId, MemError> {
        let ps = self.space_idx(parent)?;
        if self.spaces[ps].placement.pins_pages() {
            return Err(MemError::PlacementUnsupported { space: parent.0, what: "copy-on-write sharing cannot use" });
        }
        if !matches!(cow_policy, SharePolicy::Private | SharePolicy::FirstTouch | SharePolicy::Spc) {
            return Err(MemError::UnsupportedCowPolicy(cow_policy));
        }
        let no_spc = |p: u32| !self.pools[p as usize].kind.may_map_spc_spel();
        let child_no_spc = match reservation {
            Some(r) => no_spc(self.pool_of(r)?),
            None => false,
        };
        if cow_policy == SharePolicy::Spc && (child_no_spc || no_spc(self.spaces[ps].pool)) {
            return Err(MemError::UnsupportedForLimit(reservation.map_or(self.spaces[ps].pool - 1, |r| r.0)));
        }
        // The child joins the SPEL locks of the regions it inherits: admit it to all of them
        // before changing anything.
        if let Some(res) = reservation {
            let pool = self.pool_of(res)?;
            let p = &self.pools[pool as usize];
            let mut free_of_locks = p.size - p.locked_charge;
            for v in &self.spaces[ps].vmas {
                let reg = &self.regions[v.region as usize];
                if reg.mode == Mode::Locked && !reg.participants.contains(&pool) {
                    let need = u64::from(reg.pages);
                    if free_of_locks <= need {
                        return Err(MemError::SpelAdmission {
                            region: v.region,
                            pages: need,
                            res: res.0,
                            effective: free_of_locks,
                            need: p.size - free_of_locks + need + 1,
                        });
                    }
                    free_of_locks -= need;
                }
            }
        }
        let child = self.create_space(name, reservation)?;
        // A forked process stays where its parent is bounded (as it stays in its cgroup).
        self.spaces[child.0 as usize].bounds = self.spaces[ps].bounds.clone();
        match self.fork_into(now, ps, child, cow_policy) {
            Ok(()) => {
                self.debug_check();
                Ok(child)
            }
            Err(e) => {
                self.exit_space(now, child)?;
                Err(e)
            }
        }
    }

    fn fork_into(&mut self, now: Nanos, ps: usize, child: AsId, cow_policy: SharePolicy) -> Result<(), MemError> {
        let cs = child.0 as usize;
        let parent_vmas = self.spaces[ps].vmas.clone();
        for (vi, v) in parent_vmas.iter().enumerate() {
            let base = v.region;
            if v.shadow == NIL && self.regions[base as usize].kind.is_shared() {
                let pool = self.spaces[cs].pool;
                let reg = &self.regions[base as usize];
                if reg.mode == Mode::Locked && pool != GLOBAL && !reg.participants.contains(&pool) {
                    self.spel_join(now, base, pool)?;
                }
                self.add_vma(cs, base, NIL, v.writable)?;
                continue;
            }
            if v.shadow == NIL {
                // First fork of this private memory: it becomes a copy-on-write base.
                self.make_cow_base(base, cow_policy);
                let sh = self.new_region(
                    &format!("{}.cow", self.regions[base as usize].name),
                    RegionKind::PrivateAnon,
                    v.pages,
                    SharePolicy::Private,
                    Mode::Own,
                );
                self.spaces[ps].vmas[vi].shadow = sh;
                self.add_mapper(sh, ps as u32, vi as u32);
                for i in 0..v.pages {
                    let pte = &mut self.spaces[ps].ptes[(v.start + i) as usize];
                    pte.flags &= !WRITABLE;
                }
            }
            let csh = self.new_region(
                &format!("{}.cow", self.regions[base as usize].name),
                RegionKind::PrivateAnon,
                v.pages,
                SharePolicy::Private,
                Mode::Own,
            );
            self.add_vma(cs, base, csh, v.writable)?;
            // The child sees every base page that still exists.
            for r in self.regions[base as usize].cow_refs.iter_mut().filter(|r| **r > 0) {
                *r += 1;
            }
        }
        Ok(())
    }

    /// Turns a private region into a copy-on-write base used by its current mapping.
    fn make_cow_base(&mut self, r: u32, policy: SharePolicy) {
        let reg = &mut self.regions[r as usize];
        reg.mode = match policy {
            SharePolicy::FirstTouch => Mode::FirstTouch,
            SharePolicy::Spc => Mode::Spc,
            _ => Mode::Own,
        };
        reg.policy = policy;
        reg.cow_refs = (0..reg.pages as usize).map(|i| u32::from(reg.frame[i] != NIL || reg.pflags[i] & BACKED != 0)).collect();
    }
}
