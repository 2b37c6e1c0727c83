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
//! * **Frames** are dense indices. Each frame is in exactly one place: free in one pool (the
//!   global pool's or a reservation's) of the frame allocator ([`frames::FrameAllocator`],
//!   by default [`FreeLists`]), a reservation's conserved-page list (SPC), locked (holding a
//!   SPEL-locked page, charged to nobody), or in use, holding one page and linked into its
//!   holder's active, inactive or unevictable list through the holder's *charge entry*. Every
//!   frame taken or given back goes through the allocator, which chooses which frame serves a
//!   request.
//! * **Placement** (MC²): an address space may be placed at a criticality level on a core
//!   ([`Memory::create_space_at`]); its faults ask the allocator for frames of that
//!   placement. Level-A/B pages are unevictable (the paper assumes those tasks never page),
//!   so reclaim only ever frees level-C frames, and a level-A/B fault the allocator cannot
//!   serve fails with [`MemError::PlacementExhausted`] instead of reclaiming.
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
//! * **Bounds** ([`Memory::create_bound`], `bounds.rs`) cap the resident pages of sets of
//!   address spaces, nested through parents: HiRes's memory reservations of a server's
//!   subtree, or a memory-limited group over tasks that also hold a reservation. A bound
//!   counts the distinct frames its spaces map; a page counts in every bound its space is
//!   under, and a bound at its size reclaims its own pages only. Pools still decide where a
//!   page's frame comes from; bounds only decide how many pages a set of spaces may hold. A
//!   hard bound commits its size and is spared by everyone else's reclaim; a soft one is a
//!   cap only.
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
//! Set up: [`Memory::new`] (or [`Memory::with_allocator`] for another frame allocator),
//! [`Memory::create_reservation`], one [`Memory::create_space`] per task (bound to its
//! reservation or to none), [`Memory::map_private`] for code/data,
//! [`Memory::create_shared`] + [`Memory::map_shared`] for shm and files, [`Memory::fork`],
//! [`Memory::lock_region`] for SPEL regions, and [`Memory::create_bound`] +
//! [`Memory::bind_space`] (before the space touches memory) for bounds.
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

pub mod device;
pub mod frames;
pub mod layout;
mod list;
pub mod mc2;
pub mod psi;
mod types;

mod bounds;
mod check;
mod fault;
mod pool;
mod readout;
mod reclaim;
mod reservations;
mod slots;
mod spaces;
mod spel;

pub use device::{Device, DeviceSpec, DeviceStats, IoOp, Throttle};
pub use frames::{FrameAllocator, FrameRequest, FreeLists, Mc2Level, Placement};
pub use layout::{LayoutFrames, MemoryLayout};
pub use psi::{Pressure, PsiAccounting, PsiGroupId, PsiTaskId, PsiTotals, TaskPsiState};
pub use types::*;

use crate::time::Nanos;
use bounds::{BCharge, BoundState};
use list::{IndexLists, NIL};
use pool::{Pool, PoolKind};
use std::collections::{BTreeMap, VecDeque};

/// Pool index of the global (unreserved) pool.
const GLOBAL: u32 = frames::GLOBAL_POOL;

/// Charge-entry lists per pool: active, inactive, unevictable.
const LISTS_PER_POOL: u32 = 3;

#[inline]
const fn active(pool: u32) -> u32 {
    LISTS_PER_POOL * pool
}
#[inline]
const fn inactive(pool: u32) -> u32 {
    LISTS_PER_POOL * pool + 1
}
/// Pages reclaim never looks at (level-A/B pages, [`Placement::pins_pages`]); only the
/// global pool's is ever used.
#[inline]
const fn unevictable(pool: u32) -> u32 {
    LISTS_PER_POOL * pool + 2
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
    /// The frame's region and page, as `frames[frame]` has them: reclaim goes from a list's
    /// entry to the page's PTE without loading the frame.
    region: u32,
    page: u32,
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
    /// SPEL-locked: resident in locked frames, never evicted.
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
    /// (space, first page) of the one mapping when there is exactly one: reclaim then finds a
    /// frame's PTE without walking `mappers` (kept by [`Memory::mappers_changed`]).
    solo: Option<(u32, u32)>,
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
    /// Where the frames of the pages it faults in lie.
    placement: Placement,
    ptes: Vec<Pte>,
    vmas: Vec<Vma>,
    stats: SpaceStats,
    /// Every bound it is charged to: the ones it was bound to, each followed by its ancestors.
    bounds: Vec<u32>,
    alive: bool,
}

/// Which pools global reclaim may pass over: a pool whose scan found every page spared by a
/// hard bound (or pinned) stays so until a page enters it (its generation moves) or some page
/// loses its last hard charge (the epoch moves). Without it every global take would scan such
/// a pool whole again. A cache of what a scan would find, so not part of the model's state (its
/// `Debug` shows nothing).
#[derive(Clone, Default)]
pub(crate) struct SparedPools {
    /// Entries made in each pool so far.
    pub(crate) generation: Vec<u64>,
    /// Hard charges removed so far.
    pub(crate) epoch: u64,
    /// Per pool, the (generation, epoch) at which a scan found only spared pages.
    pub(crate) all_spared: Vec<Option<(u64, u64)>>,
}

impl SparedPools {
    pub(crate) fn entered(&mut self, pool: u32) {
        let p = pool as usize;
        if p >= self.generation.len() {
            self.generation.resize(p + 1, 0);
            self.all_spared.resize(p + 1, None);
        }
        self.generation[p] += 1;
    }

    /// Whether `pool` is known to hold nothing but spared pages.
    pub(crate) fn known(&self, pool: u32) -> bool {
        let p = pool as usize;
        self.all_spared.get(p).copied().flatten().is_some_and(|at| at == (self.generation[p], self.epoch))
    }

    pub(crate) fn found(&mut self, pool: u32) {
        let p = pool as usize;
        if p >= self.generation.len() {
            self.generation.resize(p + 1, 0);
            self.all_spared.resize(p + 1, None);
        }
        self.all_spared[p] = Some((self.generation[p], self.epoch));
    }
}

impl std::fmt::Debug for SparedPools {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SparedPools")
    }
}

/// The memory model. See the module documentation. `A` is the physical frame allocator
/// (static dispatch: the fault path calls it directly).
#[derive(Clone, Debug)]
pub struct Memory<A = FreeLists> {
    cfg: MemConfig,
    frames: Vec<Frame>,
    /// Every free frame, in the pool it is free in.
    alloc: A,
    /// Pool `p`'s conserved-page list (SPC): frames out of the allocator, holding nothing,
    /// oldest first.
    conserved: Vec<VecDeque<u32>>,
    /// Frames holding SPEL-locked pages (a resident page without charges is a locked one).
    locked_frames: u64,
    entries: Vec<Entry>,
    free_entries: Vec<u32>,
    /// Lists of charge entries: `active(p)`, `inactive(p)`, `unevictable(p)`.
    elists: IndexLists,
    pools: Vec<Pool>,
    regions: Vec<Region>,
    spaces: Vec<Space>,
    devices: Vec<Device>,
    global_evictions: u64,
    /// Bounds on the resident pages of sets of spaces (`bounds.rs`), their charges of frames
    /// with one list per bound, and each frame's first charge (empty until the first bound).
    bounds: Vec<BoundState>,
    bcharges: Vec<BCharge>,
    free_bcharges: Vec<u32>,
    blists: IndexLists,
    bhead: Vec<u32>,
    /// Some bound is hard, so global reclaim must look for the pages it spares.
    hard_bounds: bool,
    /// Pools global reclaim found nothing but spared pages in, until that may change.
    spared: SparedPools,
    /// Pages evicted or unmapped by reclaim so far (for the per-page reclaim cost).
    reclaim_work: u64,
    /// Reused buffers (no allocation on the fault path).
    scratch_frames: Vec<u32>,
    scratch_spaces: Vec<u32>,
    /// Write limits of limit groups' pools (pool, throttle): the write-back of a page charged
    /// to one goes to the device no faster than its limit.
    write_throttles: Vec<(u32, Throttle)>,
}

impl Memory<FreeLists> {
    /// A machine with `cfg.total_frames` free frames, handed out by per-pool FIFO free lists,
    /// and a swap device.
    pub fn new(cfg: MemConfig, swap: DeviceSpec) -> Result<Self, MemError> {
        cfg.validate()?;
        let alloc = FreeLists::new(cfg.total_frames);
        Memory::with_allocator(cfg, swap, alloc)
    }
}

impl<A: FrameAllocator> Memory<A> {
    /// A machine whose frames `alloc` hands out; it must manage exactly `cfg.total_frames`
    /// frames, all free in the global pool.
    pub fn with_allocator(cfg: MemConfig, swap: DeviceSpec, alloc: A) -> Result<Self, MemError> {
        cfg.validate()?;
        swap.validate().map_err(MemError::InvalidConfig)?;
        let n = cfg.total_frames;
        if alloc.total_frames() != n || alloc.free_frames(GLOBAL) != u64::from(n) {
            return Err(MemError::InvalidConfig(format!(
                "the frame allocator manages {} frames, {} of them free in the global pool; total_frames = {n} needs all {n} free there",
                alloc.total_frames(),
                alloc.free_frames(GLOBAL)
            )));
        }
        let global = Pool::new("global".into(), PoolKind::Global, 0, 0);
        Ok(Memory {
            cfg,
            frames: vec![FREE_FRAME; n as usize],
            alloc,
            conserved: vec![VecDeque::new()],
            locked_frames: 0,
            entries: Vec::new(),
            free_entries: Vec::new(),
            elists: IndexLists::new(0, LISTS_PER_POOL as usize),
            pools: vec![global],
            regions: Vec::new(),
            spaces: Vec::new(),
            devices: vec![Device::new(swap)],
            global_evictions: 0,
            bounds: Vec::new(),
            bcharges: Vec::new(),
            free_bcharges: Vec::new(),
            blists: IndexLists::new(0, 0),
            bhead: Vec::new(),
            hard_bounds: false,
            spared: SparedPools::default(),
            reclaim_work: 0,
            scratch_frames: Vec::new(),
            scratch_spaces: Vec::new(),
            write_throttles: Vec::new(),
        })
    }

    pub fn config(&self) -> &MemConfig {
        &self.cfg
    }

    /// The frame allocator, for its own read-outs.
    pub fn frame_allocator(&self) -> &A {
        &self.alloc
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

    #[inline]
    fn debug_check(&self) {
        if self.cfg.check_every_operation {
            if let Err(e) = self.check_invariants() {
                panic!("memory model invariant violated: {e}");
            }
        }
    }
}
