//! The page-level memory model: physical frames, address spaces, regions and page tables;
//! a global two-list LRU; hard and firm memory reservations with FIFO second-chance
//! replacement; shared-page policies (global, No-SP-Mgmt, first-touch, SPC, SPEL, auto); a
//! storage device model; PSI stall accounting.
//!
//! Pure and deterministic: the caller passes the simulated time into every operation that
//! may start I/O, and every choice is made by list order or index order.
//!
//! # Model
//!
//! * **Frames** are dense indices. Each frame is in exactly one place: a free list (of the
//!   global pool or a reservation), a reservation's conserved-page list (SPC), the locked list
//!   (SPEL), or in use, holding one page and linked into its holder's active or inactive list
//!   through the holder's *charge entry*.
//! * **Charge entries** are Linux/RK's `mem_reserve_page`: one per (pool, resident page) that
//!   the pool accounts. The first entry of a page is its holder (whose frame it occupies); the
//!   others belong to reservations that share the page, backed by a conserved frame (SPC) or
//!   by nothing because their frame was returned to the global pool (No-SP-Mgmt).
//! * **Pools**: pool 0 is the global pool (unreserved memory, two-list LRU); reservation `r` is
//!   pool `r + 1` (free, active, inactive and conserved lists; FIFO second chance).
//! * **Limit groups** (cgroup v2 memory controller, [`ReservationKind::Limit`]) are pools too,
//!   with their own active/inactive lists but no slots: `size` is `memory.max`, a cap on the
//!   pages charged to the group that sets nothing aside (limits may overcommit). A fault at
//!   the cap evicts one of the group's own pages; at or above `high` the group first reclaims
//!   its own idle pages (throttling: the fault pays the reclaim cost), otherwise it takes a
//!   global frame, and global reclaim picks among the global LRU and the limit groups the one
//!   with most pages above its protection — `low` counts only until nothing else is left,
//!   `min` always. [`Memory::set_reservation_size`] lowers `max` by evicting (dirty pages
//!   written back) and [`Memory::set_limit_protection`] sets high/min/low. Shared regions
//!   they map must be `global`, `private` or `first-touch` (no SPC/SPEL conserved frames).
//! * **Address spaces** get virtual pages allocated contiguously as regions are mapped, so a
//!   page table is one dense `Vec` indexed by virtual page number and a hit is one array
//!   lookup and one bit-or. Referenced and dirty bits live in the page table entries, as on
//!   hardware; reclaim reads them through the region's list of mappings (the reverse map).
//! * **Regions** hold per-page state (frame, whether a copy is on the device); a mapped region
//!   covers a contiguous run of virtual pages. Copy-on-write after `fork` uses a shared base
//!   region plus a private shadow region per address space.
//!
//! # How a caller (the engine) drives it
//!
//! Set up: [`Memory::new`], [`Memory::create_reservation`], one [`Memory::create_space`] per
//! task (bound to its reservation or to none), [`Memory::map_private`] for code/data,
//! [`Memory::create_shared`] + [`Memory::map_shared`] for shm and files, [`Memory::fork`],
//! and [`Memory::lock_region`] for SPEL regions.
//!
//! Run: for each page a running job references, call [`Memory::access`] at the simulated time
//! of the reference. [`Access::Hit`] costs nothing extra; [`Access::Minor`] adds `cpu` to the
//! job's execution; [`Access::Major`] adds `cpu` and then self-suspends the job until
//! `ready_at` (the reference is then complete: do not repeat it). While suspended the task
//! is stalled as [`Access::stall_state`] says; report that, and its return to runnable at
//! `ready_at`, to a [`psi::PsiAccounting`]. [`Memory::discard`] frees a private page the
//! program no longer needs (`madvise(MADV_DONTNEED)`). Call [`Memory::end_window`] at each job end (it
//! measures per-task use of shared regions for `auto`), [`Memory::resolve_auto`] when the
//! measurement is long enough, and [`Memory::exit_space`] when a process ends.

pub mod admission;
pub mod device;
mod list;
pub mod psi;
mod types;

mod check;
mod fault;
mod reclaim;
mod spel;

pub use device::{Device, DeviceSpec, DeviceStats, IoOp};
pub use psi::{Pressure, PsiAccounting, PsiGroupId, PsiTaskId, PsiTotals, TaskPsiState};
pub use types::*;

use crate::time::Nanos;
use list::{IndexLists, NIL};
use std::collections::BTreeMap;

/// Pool index of the global (unreserved) pool.
const GLOBAL: u32 = 0;

/// Frame list of SPEL-locked frames.
const LOCKED: u32 = 0;
#[inline]
const fn free_list(pool: u32) -> u32 {
    1 + 2 * pool
}
#[inline]
const fn cpl_list(pool: u32) -> u32 {
    2 + 2 * pool
}
#[inline]
const fn active(pool: u32) -> u32 {
    2 * pool
}
#[inline]
const fn inactive(pool: u32) -> u32 {
    2 * pool + 1
}

// Page table entry flags.
const PRESENT: u8 = 1;
const WRITABLE: u8 = 2;
const REFERENCED: u8 = 4;
const DIRTY: u8 = 8;
/// Touched in the current usage window (survives unmapping; cleared by `end_window`).
const WINDOW: u8 = 16;
/// A flag no page table entry ever has (`hit_run`'s "never hits").
const NEVER_SET: u8 = 128;
const _: () = assert!(NEVER_SET & (PRESENT | WRITABLE | REFERENCED | DIRTY | WINDOW) == 0);

// Region page flags.
/// A valid copy of the page is on its device (swap slot or file).
const BACKED: u8 = 1;
/// The page has been evicted at least once (a later read is a refault).
const EVICTED: u8 = 2;
/// The page exists in this region (for copy-on-write shadows: this space has its own copy).
const MATERIAL: u8 = 4;

#[derive(Clone, Copy, Debug)]
struct Pte {
    frame: u32,
    flags: u8,
}

const EMPTY_PTE: Pte = Pte { frame: NIL, flags: 0 };

#[derive(Clone, Copy, Debug)]
struct Frame {
    /// Region and page held, or `NIL` when free or conserved.
    region: u32,
    page: u32,
    /// Holder charge entry; `NIL` unless in use (locked frames have none).
    first: u32,
    /// Page content differs from the device copy (PTE dirty bits are folded in on unmap).
    dirty: bool,
    /// Never chosen as a victim (set while an operation works on the frame).
    pinned: bool,
    /// When the read that filled the frame completes.
    ready_at: Nanos,
    /// Brought in by readahead and not mapped since.
    readahead: bool,
}

const FREE_FRAME: Frame =
    Frame { region: NIL, page: NIL, first: NIL, dirty: false, pinned: false, ready_at: Nanos::ZERO, readahead: false };

#[derive(Clone, Copy, Debug)]
struct Entry {
    frame: u32,
    pool: u32,
    /// Next entry of the same frame (`NIL` ends the chain); the chain is in FCFS order.
    next: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum PoolKind {
    Global,
    Hard,
    Firm,
    /// cgroup-style limit: `size` caps charged pages, nothing is set aside.
    Limit,
}

#[derive(Clone, Debug)]
struct Pool {
    name: String,
    kind: PoolKind,
    size: u64,
    lent: u64,
    borrowed: u64,
    locked_charge: u64,
    evictions: u64,
    spc_unmaps: u64,
    transfers: u64,
    writebacks: u64,
    /// Limit groups only (pages): throttle above `high`; `min`/`low` protection from reclaim
    /// by others (`u64::MAX` = no high, 0 = no protection).
    high: u64,
    min: u64,
    low: u64,
    /// Smooth weighted round-robin credit for global reclaim (see `global_take`).
    reclaim_credit: i64,
}

impl Pool {
    /// A pool with no activity yet, no high limit and no protection.
    fn new(name: String, kind: PoolKind, size: u64, lent: u64) -> Pool {
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
        }
    }
}

/// Effective management of a region's pages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    /// Global pool only.
    Global,
    /// Every charging pool treats the page as its own and evicts it outright (private pages,
    /// and shared pages under No-SP-Mgmt).
    Own,
    FirstTouch,
    Spc,
    /// SPEL-locked: resident, on the locked list, never evicted.
    Locked,
}

#[derive(Clone, Debug)]
struct Region {
    name: String,
    kind: RegionKind,
    policy: SharePolicy,
    mode: Mode,
    pages: u32,
    frame: Vec<u32>,
    pflags: Vec<u8>,
    /// For copy-on-write bases: how many mappings still resolve each page here.
    cow_refs: Vec<u32>,
    /// (space, vma index) of every mapping that can map this region's pages.
    mappers: Vec<(u32, u32)>,
    device: u32,
    /// Reservation pools that gave up the region's size to its SPEL lock.
    participants: Vec<u32>,
    usage: BTreeMap<u32, RegionUsage>,
    /// Readahead pages of this region used since its last swap-in (Linux's
    /// `swapin_readahead_hits`), and the page of that swap-in.
    ra_hits: u32,
    ra_prev: u32,
    /// First-touch swap-backed regions: the pool that owned each swapped-out page (NIL: none
    /// recorded). A swap-in is charged to it, as memory cgroups charge a swapped-in page to
    /// the group recorded with its swap entry, not to the task that faults it back. Empty
    /// until the region's first eviction.
    swap_owner: Vec<u32>,
    alive: bool,
}

impl Region {
    fn is_cow_base(&self) -> bool {
        !self.cow_refs.is_empty()
    }

    /// Page `i` is no longer swapped out (back in memory, moved or discarded).
    fn forget_swap_owner(&mut self, i: u32) {
        if let Some(o) = self.swap_owner.get_mut(i as usize) {
            *o = NIL;
        }
    }
}

#[derive(Clone, Copy, Debug)]
struct Vma {
    start: u32,
    pages: u32,
    region: u32,
    /// Copy-on-write: private region receiving written pages; `region` is then the base.
    shadow: u32,
    writable: bool,
}

#[derive(Clone, Debug)]
struct Space {
    name: String,
    pool: u32,
    ptes: Vec<Pte>,
    vmas: Vec<Vma>,
    stats: SpaceStats,
    alive: bool,
}

/// The memory model. See the module documentation.
#[derive(Clone, Debug)]
pub struct Memory {
    cfg: MemConfig,
    frames: Vec<Frame>,
    /// Lists of frames: `LOCKED`, `free_list(p)`, `cpl_list(p)`.
    flists: IndexLists,
    entries: Vec<Entry>,
    free_entries: Vec<u32>,
    /// Lists of charge entries: `active(p)`, `inactive(p)`.
    elists: IndexLists,
    pools: Vec<Pool>,
    regions: Vec<Region>,
    spaces: Vec<Space>,
    devices: Vec<Device>,
    global_evictions: u64,
    /// Pages evicted or unmapped by reclaim so far (for the per-page reclaim cost).
    reclaim_work: u64,
    /// Reused buffers (no allocation on the fault path).
    scratch_frames: Vec<u32>,
    scratch_spaces: Vec<u32>,
}

impl Memory {
    /// A machine with `cfg.total_frames` free frames and a swap device.
    pub fn new(cfg: MemConfig, swap: DeviceSpec) -> Result<Self, MemError> {
        cfg.validate()?;
        swap.validate().map_err(MemError::InvalidConfig)?;
        let n = cfg.total_frames as usize;
        let mut flists = IndexLists::new(n, 3);
        for f in 0..n as u32 {
            flists.push_back(free_list(GLOBAL), f);
        }
        let global = Pool::new("global".into(), PoolKind::Global, 0, 0);
        Ok(Memory {
            cfg,
            frames: vec![FREE_FRAME; n],
            flists,
            entries: Vec::new(),
            free_entries: Vec::new(),
            elists: IndexLists::new(0, 2),
            pools: vec![global],
            regions: Vec::new(),
            spaces: Vec::new(),
            devices: vec![Device::new(swap)],
            global_evictions: 0,
            reclaim_work: 0,
            scratch_frames: Vec::new(),
            scratch_spaces: Vec::new(),
        })
    }

    pub fn config(&self) -> &MemConfig {
        &self.cfg
    }

    /// Adds a device (for file-backed regions).
    pub fn add_device(&mut self, spec: DeviceSpec) -> Result<DeviceId, MemError> {
        spec.validate().map_err(MemError::InvalidConfig)?;
        self.devices.push(Device::new(spec));
        Ok(DeviceId(self.devices.len() as u32 - 1))
    }

    pub fn device(&self, id: DeviceId) -> Result<&Device, MemError> {
        self.devices.get(id.0 as usize).ok_or(MemError::NoSuchDevice(id.0))
    }

    // ---------------------------------------------------------------- reservations

    /// Admits a reservation and sets aside its frames (taken from the global pool, evicting
    /// unreserved pages or taking back borrowed ones if needed, with write-backs at `now`).
    ///
    /// Admission: the frames committed to reservations (sizes, minus what SPEL locks saved)
    /// plus the new size must fit in `total_frames − unreserved_min_frames`.
    pub fn create_reservation(&mut self, now: Nanos, spec: ReservationSpec) -> Result<ResId, MemError> {
        if spec.pages < self.cfg.min_reservation_pages.max(1) {
            return Err(MemError::ReservationTooSmall { name: spec.name, pages: spec.pages, min: self.cfg.min_reservation_pages.max(1) });
        }
        let capacity = u64::from(self.cfg.total_frames - self.cfg.unreserved_min_frames);
        let committed = self.committed_frames();
        let is_limit = spec.kind == ReservationKind::Limit;
        if !is_limit && committed + spec.pages > capacity {
            return Err(MemError::AdmissionRejected {
                name: spec.name,
                requested: spec.pages,
                available: capacity.saturating_sub(committed),
                total: u64::from(self.cfg.total_frames),
            });
        }
        let p = self.pools.len() as u32;
        let kind = match spec.kind {
            ReservationKind::Hard => PoolKind::Hard,
            ReservationKind::Firm => PoolKind::Firm,
            ReservationKind::Limit => PoolKind::Limit,
        };
        // All slots start unbacked and are filled from the global pool right away (a limit
        // group has no slots: its frames come from the global pool on demand).
        let lent = if is_limit { 0 } else { spec.pages };
        self.pools.push(Pool::new(spec.name, kind, spec.pages, lent));
        self.flists.grow_lists(cpl_list(p) as usize + 1);
        self.elists.grow_lists(inactive(p) as usize + 1);
        while self.pools[p as usize].lent > 0 {
            let f = self.take_free(GLOBAL, now, true)?;
            self.pools[p as usize].lent -= 1;
            self.flists.push_back(free_list(p), f);
        }
        self.debug_check();
        Ok(ResId(p - 1))
    }

    fn pool_of(&self, res: ResId) -> Result<u32, MemError> {
        let p = res.0.checked_add(1).ok_or(MemError::NoSuchReservation(res.0))?;
        if (p as usize) < self.pools.len() {
            Ok(p)
        } else {
            Err(MemError::NoSuchReservation(res.0))
        }
    }

    /// Frames promised to reservations and locked regions (limit groups promise nothing).
    pub fn committed_frames(&self) -> u64 {
        let sizes: u64 = self.pools[1..].iter().filter(|p| p.kind != PoolKind::Limit).map(|p| p.size - p.locked_charge).sum();
        sizes + u64::from(self.flists.len(LOCKED))
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
        let floor = if kind == PoolKind::Limit { 1 } else { self.cfg.min_reservation_pages.max(1).max(self.pools[pi].locked_charge + 1) };
        if pages < floor {
            return Err(MemError::ReservationTooSmall { name, pages, min: floor });
        }
        if kind == PoolKind::Limit {
            let total = u64::from(self.cfg.total_frames);
            if pages > total {
                return Err(MemError::AdmissionRejected { name, requested: pages, available: total, total });
            }
            while self.charged_pages(p) > pages {
                let f = self.reclaim_one(p, now, true).ok_or(MemError::ReservationExhausted(res.0))?;
                self.flists.push_back(free_list(GLOBAL), f);
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
                } else if let Some(g) = self.flists.pop_front(free_list(p)) {
                    self.flists.push_back(free_list(GLOBAL), g);
                } else if self.pools[pi].kind == PoolKind::Firm {
                    // A firm reservation keeps its pages beyond the new size as borrowed ones,
                    // which global memory pressure takes back first.
                    self.pools[pi].borrowed += 1;
                } else {
                    let g = self.reclaim_one(p, now, true).ok_or(MemError::ReservationExhausted(res.0))?;
                    self.flists.push_back(free_list(GLOBAL), g);
                }
                self.pools[pi].size -= 1;
            }
        }
        self.debug_check();
        Ok(())
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
        if pool.kind != PoolKind::Limit {
            return Err(MemError::NotALimitGroup(res.0));
        }
        pool.high = high.unwrap_or(u64::MAX);
        pool.min = min.unwrap_or(0);
        pool.low = low.unwrap_or(0);
        Ok(())
    }

    /// A limit group's high, min and low in pages, as [`Memory::set_limit_protection`] set them.
    pub fn limit_protection(&self, res: ResId) -> Result<LimitProtection, MemError> {
        let p = &self.pools[self.pool_of(res)? as usize];
        if p.kind != PoolKind::Limit {
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

    // ---------------------------------------------------------------- address spaces

    /// A new, empty address space, bound to `reservation` (or to the global pool).
    pub fn create_space(&mut self, name: &str, reservation: Option<ResId>) -> Result<AsId, MemError> {
        let pool = match reservation {
            Some(r) => self.pool_of(r)?,
            None => GLOBAL,
        };
        self.spaces.push(Space {
            name: name.to_string(),
            pool,
            ptes: Vec::new(),
            vmas: Vec::new(),
            stats: SpaceStats::default(),
            alive: true,
        });
        Ok(AsId(self.spaces.len() as u32 - 1))
    }

    fn space_idx(&self, space: AsId) -> Result<usize, MemError> {
        match self.spaces.get(space.0 as usize) {
            Some(s) if s.alive => Ok(space.0 as usize),
            _ => Err(MemError::NoSuchSpace(space.0)),
        }
    }

    fn region_idx(&self, region: RegionId) -> Result<usize, MemError> {
        match self.regions.get(region.0 as usize) {
            Some(r) if r.alive => Ok(region.0 as usize),
            _ => Err(MemError::NoSuchRegion(region.0)),
        }
    }

    pub fn space_name(&self, space: AsId) -> Option<&str> {
        self.spaces.get(space.0 as usize).map(|s| s.name.as_str())
    }

    /// The reservation an address space is bound to.
    pub fn reservation_of(&self, space: AsId) -> Option<ResId> {
        let p = self.spaces.get(space.0 as usize)?.pool;
        (p != GLOBAL).then(|| ResId(p - 1))
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

    /// Appends a mapping of `region` to `space`'s virtual pages; returns its first page.
    fn add_vma(&mut self, s: usize, region: u32, shadow: u32, writable: bool) -> Result<Vpn, MemError> {
        let pool = self.spaces[s].pool;
        if self.pools[pool as usize].kind == PoolKind::Limit
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
        self.regions[region as usize].mappers.push((s as u32, vi));
        if shadow != NIL {
            self.regions[shadow as usize].mappers.push((s as u32, vi));
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
        if !matches!(cow_policy, SharePolicy::Private | SharePolicy::FirstTouch | SharePolicy::Spc) {
            return Err(MemError::UnsupportedCowPolicy(cow_policy));
        }
        let limit_pool = |p: u32| self.pools[p as usize].kind == PoolKind::Limit;
        let child_limit = match reservation {
            Some(r) => limit_pool(self.pool_of(r)?),
            None => false,
        };
        if cow_policy == SharePolicy::Spc && (child_limit || limit_pool(self.spaces[ps].pool)) {
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
                self.regions[sh as usize].mappers.push((ps as u32, vi as u32));
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

    // ---------------------------------------------------------------- read-outs

    pub fn space_stats(&self, space: AsId) -> Option<SpaceStats> {
        self.spaces.get(space.0 as usize).map(|s| s.stats)
    }

    /// Pages charged to `res` (O(1); `reservation_stats` also walks its lists).
    pub fn reservation_charged_pages(&self, res: ResId) -> Result<u64, MemError> {
        Ok(self.charged_pages(self.pool_of(res)?))
    }

    pub fn reservation_stats(&self, res: ResId) -> Result<ReservationStats, MemError> {
        let p = self.pool_of(res)?;
        let pool = &self.pools[p as usize];
        let act = u64::from(self.elists.len(active(p)));
        let inact = u64::from(self.elists.len(inactive(p)));
        Ok(ReservationStats {
            size_pages: pool.size,
            kind: match pool.kind {
                PoolKind::Firm => ReservationKind::Firm,
                PoolKind::Limit => ReservationKind::Limit,
                PoolKind::Hard | PoolKind::Global => ReservationKind::Hard,
            },
            frames_held: self.frames_held(p),
            charged_pages: act + inact,
            active_pages: act,
            inactive_pages: inact,
            free_frames: u64::from(self.flists.len(free_list(p))),
            conserved_frames: u64::from(self.flists.len(cpl_list(p))),
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
    fn frames_held(&self, p: u32) -> u64 {
        let holders = self
            .elists
            .iter(active(p))
            .chain(self.elists.iter(inactive(p)))
            .filter(|&e| self.frames[self.entries[e as usize].frame as usize].first == e)
            .count() as u64;
        holders + u64::from(self.flists.len(free_list(p))) + u64::from(self.flists.len(cpl_list(p)))
    }

    pub fn reservation_name(&self, res: ResId) -> Result<&str, MemError> {
        Ok(&self.pools[self.pool_of(res)? as usize].name)
    }

    pub fn reservations(&self) -> impl Iterator<Item = ResId> {
        (0..self.pools.len() as u32 - 1).map(ResId)
    }

    pub fn stats(&self) -> MemStats {
        let held: u64 =
            (1..self.pools.len() as u32).filter(|&p| self.pools[p as usize].kind != PoolKind::Limit).map(|p| self.frames_held(p)).sum();
        let lent: u64 = self.pools.iter().map(|p| p.lent).sum();
        let locked = u64::from(self.flists.len(LOCKED));
        MemStats {
            total_frames: u64::from(self.cfg.total_frames),
            global_free_frames: u64::from(self.flists.len(free_list(GLOBAL))),
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

    /// Whether page `i` of `region` is resident.
    pub fn is_resident(&self, region: RegionId, page: u32) -> bool {
        self.regions.get(region.0 as usize).and_then(|r| r.frame.get(page as usize)).is_some_and(|&f| f != NIL)
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

    /// Whether `vpn` is mapped present in `space`'s page table.
    pub fn is_mapped(&self, space: AsId, vpn: Vpn) -> bool {
        self.spaces.get(space.0 as usize).and_then(|s| s.ptes.get(vpn.0 as usize)).is_some_and(|p| p.flags & PRESENT != 0)
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

    #[inline]
    fn debug_check(&self) {
        if self.cfg.check_every_operation {
            if let Err(e) = self.check_invariants() {
                panic!("memory model invariant violated: {e}");
            }
        }
    }
}
