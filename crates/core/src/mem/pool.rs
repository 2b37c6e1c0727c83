//! Pools (the global pool, reservations, limit groups) and what each kind of pool does.
//!
//! Code elsewhere asks a pool's kind what it does (does it set frames aside, may it borrow,
//! is its size a cap, does it honour protection) rather than which kind it is, so the
//! behaviour of each kind is stated here once.

use super::frames::Placement;
use super::types::ReservationKind;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum PoolKind {
    /// Unreserved memory: the global free frames and the two-list LRU.
    Global,
    /// Never uses more than its size: when its slots are used up it evicts its own pages,
    /// even if the system has free memory.
    Hard,
    /// Borrows free global frames once its slots are used up; gives them back first under
    /// global memory pressure.
    Firm,
    /// cgroup-style limit: `size` caps charged pages, nothing is set aside.
    Limit,
}

impl PoolKind {
    pub(super) const fn of(kind: ReservationKind) -> PoolKind {
        match kind {
            ReservationKind::Hard => PoolKind::Hard,
            ReservationKind::Firm => PoolKind::Firm,
            ReservationKind::Limit => PoolKind::Limit,
        }
    }

    /// The reservation kind reported for it (the global pool never is one).
    pub(super) const fn reservation_kind(self) -> ReservationKind {
        match self {
            PoolKind::Firm => ReservationKind::Firm,
            PoolKind::Limit => ReservationKind::Limit,
            PoolKind::Hard | PoolKind::Global => ReservationKind::Hard,
        }
    }

    /// Its size is physical memory set aside for it: slots backed by its free frames, frames
    /// lent to the global pool (taken back on demand), conserved frames and the frames of
    /// the pages it holds.
    pub(super) const fn sets_aside_frames(self) -> bool {
        matches!(self, PoolKind::Hard | PoolKind::Firm)
    }

    /// Admission control counts its size (less what SPEL locks saved) against the frames
    /// reservations may take: exactly the pools that set frames aside.
    pub(super) const fn counts_toward_admission(self) -> bool {
        self.sets_aside_frames()
    }

    /// Once its slots are used up it takes free global frames as borrowed ones, keeps the
    /// pages beyond a lowered size as borrowed ones, and gives borrowed frames back first
    /// (before any other global reclaim) under global memory pressure.
    pub(super) const fn borrows_global_frames(self) -> bool {
        matches!(self, PoolKind::Firm)
    }

    /// Its size caps the pages charged to it (cgroup `memory.max`) and sets nothing aside: its
    /// frames come from the global pool on demand and go straight back; at the cap a fault
    /// evicts one of its own pages.
    pub(super) const fn size_is_cap(self) -> bool {
        matches!(self, PoolKind::Limit)
    }

    /// Honours `memory.high` (its faults reclaim its own idle pages first above it) and
    /// `memory.min`/`memory.low` (protection from global reclaim), and global reclaim takes
    /// its unprotected pages beside the global LRU's, in proportion to them.
    pub(super) const fn honours_protection(self) -> bool {
        matches!(self, PoolKind::Limit)
    }

    /// May map shared regions managed per reservation (`spc`, `spel`, `auto`): their
    /// conserved frames and locked sizes are paid from the mapper's slots, which a limit group
    /// does not have (the global pool is never charged for them at all).
    pub(super) const fn may_map_spc_spel(self) -> bool {
        !matches!(self, PoolKind::Limit)
    }
}

#[derive(Clone, Debug)]
pub(super) struct Pool {
    pub(super) name: String,
    pub(super) kind: PoolKind,
    pub(super) size: u64,
    pub(super) lent: u64,
    pub(super) borrowed: u64,
    pub(super) locked_charge: u64,
    pub(super) evictions: u64,
    pub(super) spc_unmaps: u64,
    pub(super) transfers: u64,
    pub(super) writebacks: u64,
    /// Pools that honour protection only (pages): throttle above `high`; `min`/`low`
    /// protection from reclaim by others (`u64::MAX` = no high, 0 = no protection).
    pub(super) high: u64,
    pub(super) min: u64,
    pub(super) low: u64,
    /// Smooth weighted round-robin credit for global reclaim (see `global_take`).
    pub(super) reclaim_credit: i64,
    /// Where its frames lie (MC²: a core's level-A/B banks, or the level-C banks); its
    /// address spaces take frames of the same placement.
    pub(super) placement: Placement,
}

impl Pool {
    /// A pool with no activity yet, no high limit and no protection.
    pub(super) fn new(name: String, kind: PoolKind, size: u64, lent: u64) -> Pool {
        Pool {
            name,
            kind,
            size,
            lent,
            borrowed: 0,
            locked_charge: 0,
            evictions: 0,
            spc_unmaps: 0,
            transfers: 0,
            writebacks: 0,
            high: u64::MAX,
            min: 0,
            low: 0,
            reclaim_credit: 0,
            placement: Placement::Any,
        }
    }
}
