//! Read-outs: machine-wide statistics, residency and charges of pages, region facts.

use super::list::NIL;
use super::*;

impl<A: FrameAllocator> Memory<A> {
    pub fn space_stats(&self, space: AsId) -> Option<SpaceStats> {
        self.spaces.get(space.0 as usize).map(|s| s.stats)
    }

    pub fn stats(&self) -> MemStats {
        let held: u64 =
            (1..self.pools.len() as u32).filter(|&p| self.pools[p as usize].kind.sets_aside_frames()).map(|p| self.frames_held(p)).sum();
        let lent: u64 = self.pools.iter().map(|p| p.lent).sum();
        let locked = self.locked_frames;
        MemStats {
            total_frames: u64::from(self.cfg.total_frames),
            global_free_frames: self.alloc.free_frames(GLOBAL),
            global_active_pages: u64::from(self.elists.len(active(GLOBAL))),
            global_inactive_pages: u64::from(self.elists.len(inactive(GLOBAL))),
            locked_frames: locked,
            reservation_frames_held: held,
            reservation_frames_lent: lent,
            reserved_physical_frames: held + lent + locked,
            committed_frames: self.committed_frames(),
            global_evictions: self.global_evictions,
        }
    }

    /// Frames holding the resident pages of every region `space` maps (its private memory,
    /// shared regions, copy-on-write shadows), in mapping order; empty for no such space.
    pub fn space_frames(&self, space: AsId) -> Vec<u32> {
        let Some(sp) = self.spaces.get(space.0 as usize) else {
            return Vec::new();
        };
        let regions = sp.vmas.iter().flat_map(|v| [v.region, v.shadow]).filter(|&r| r != NIL);
        regions.flat_map(|r| self.regions[r as usize].frame.iter().copied().filter(|&f| f != NIL)).collect()
    }

    /// Where `space`'s faults take frames.
    pub fn space_placement(&self, space: AsId) -> Option<Placement> {
        self.spaces.get(space.0 as usize).map(|s| s.placement)
    }

    /// Resident pages reclaim never takes (those of level-A/B spaces, in every pool).
    pub fn unevictable_pages(&self) -> u64 {
        (0..self.pools.len() as u32).map(|p| u64::from(self.elists.len(unevictable(p)))).sum()
    }

    /// Whether page `i` of `region` is resident.
    pub fn is_resident(&self, region: RegionId, page: u32) -> bool {
        self.regions.get(region.0 as usize).and_then(|r| r.frame.get(page as usize)).is_some_and(|&f| f != NIL)
    }

    /// The reservation holding (owning) a resident page: `Some(None)` for the global pool or
    /// a locked page, `None` if not resident.
    pub fn holder_of(&self, region: RegionId, page: u32) -> Option<Option<ResId>> {
        let f = *self.regions.get(region.0 as usize)?.frame.get(page as usize)?;
        if f == NIL {
            return None;
        }
        let e = self.frames[f as usize].first;
        if e == NIL {
            return Some(None);
        }
        let p = self.entries[e as usize].pool;
        Some((p != GLOBAL).then(|| ResId(p - 1)))
    }

    /// Reservations charged for a resident page (holder first).
    pub fn charged_to(&self, region: RegionId, page: u32) -> Vec<Option<ResId>> {
        let Some(&f) = self.regions.get(region.0 as usize).and_then(|r| r.frame.get(page as usize)) else {
            return Vec::new();
        };
        if f == NIL {
            return Vec::new();
        }
        let mut out = Vec::new();
        let mut e = self.frames[f as usize].first;
        while e != NIL {
            let p = self.entries[e as usize].pool;
            out.push((p != GLOBAL).then(|| ResId(p - 1)));
            e = self.entries[e as usize].next;
        }
        out
    }

    /// The effective policy of a region right now (`auto` and unlocked `spel` report `spc`).
    pub fn effective_policy(&self, region: RegionId) -> Option<SharePolicy> {
        let r = self.regions.get(region.0 as usize)?;
        Some(match r.mode {
            Mode::Global => SharePolicy::Global,
            Mode::Own => SharePolicy::Private,
            Mode::FirstTouch => SharePolicy::FirstTouch,
            Mode::Spc => SharePolicy::Spc,
            Mode::Locked => SharePolicy::Spel,
        })
    }

    /// Swap slots in use: pages of anonymous regions with a copy on the swap device.
    pub fn swap_slots_used(&self) -> u64 {
        self.regions
            .iter()
            .filter(|r| r.alive && !matches!(r.kind, RegionKind::SharedFile { .. }))
            .map(|r| r.pflags.iter().filter(|&&f| f & BACKED != 0).count() as u64)
            .sum()
    }

    pub fn region_pages(&self, region: RegionId) -> Option<u32> {
        self.regions.get(region.0 as usize).map(|r| r.pages)
    }

    pub fn region_name(&self, region: RegionId) -> Option<&str> {
        self.regions.get(region.0 as usize).map(|r| r.name.as_str())
    }
}
