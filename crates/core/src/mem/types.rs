//! Public value types of the memory model: identifiers, configuration, results, counters
//! and errors.

use crate::time::Nanos;
use serde::{Deserialize, Serialize};
use std::fmt;

/// An address space (one per task or process).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct AsId(pub u32);

/// A region: a private anonymous mapping, a shared memory segment or a file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct RegionId(pub u32);

/// A memory reservation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ResId(pub u32);

/// A bound on the resident pages of a set of address spaces (see
/// [`crate::mem::Memory::create_bound`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct BoundId(pub u32);

/// A storage device; `DeviceId(0)` is always the swap device.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct DeviceId(pub u32);

impl DeviceId {
    pub const SWAP: DeviceId = DeviceId(0);
}

/// A virtual page number inside one address space.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Vpn(pub u32);

impl Vpn {
    /// The page `i` pages after this one.
    pub fn offset(self, i: u32) -> Vpn {
        Vpn(self.0 + i)
    }
}

/// Whether a reference reads or writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum RefKind {
    Read,
    Write,
    /// Not an access: the program frees the page (`madvise(MADV_DONTNEED)` on private
    /// anonymous memory, see [`crate::mem::Memory::discard`]).
    Discard,
}

/// What one page reference cost the job that made it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Access {
    /// Resident and mapped with the needed permission: nothing beyond the access itself.
    Hit,
    /// Minor fault (map a resident page, zero-fill, copy-on-write, reclaim without waiting):
    /// the job spends `cpu` in the kernel and continues; `memstall_cpu` of it (direct
    /// reclaim) is a memory stall as PSI counts it.
    Minor { cpu: Nanos, memstall_cpu: Nanos },
    /// Major fault: the job spends `cpu` in the kernel, then self-suspends until `ready_at`,
    /// when the device read completes. During the suspension it is stalled on io, and on
    /// memory too if `refault` (the page had been in memory before and was evicted — what
    /// Linux counts as a memory stall; a first read of a file page is io only).
    Major {
        cpu: Nanos,
        /// The part of `cpu` that is a memory stall (reclaim, and a refault's own kernel work).
        memstall_cpu: Nanos,
        /// CPU spent once the read is done, outside any stall (the job cannot overlap it
        /// with the wait).
        after_cpu: Nanos,
        ready_at: Nanos,
        refault: bool,
    },
}

impl Access {
    pub fn is_hit(self) -> bool {
        matches!(self, Access::Hit)
    }
    /// What the task is stalled on while it waits out a major fault (PSI: io always, memory
    /// for a refault); `None` for hits and minor faults.
    pub fn stall_state(self) -> Option<crate::mem::TaskPsiState> {
        match self {
            Access::Major { refault, .. } => Some(crate::mem::TaskPsiState::blocked(refault, true)),
            _ => None,
        }
    }

    /// CPU time the reference costs beyond the access itself.
    pub fn cpu(self) -> Nanos {
        match self {
            Access::Hit => Nanos::ZERO,
            Access::Minor { cpu, .. } => cpu,
            Access::Major { cpu, after_cpu, .. } => cpu + after_cpu,
        }
    }
}

/// What a region holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum RegionKind {
    /// Anonymous memory of one address space (heap, stack, data); swap-backed.
    PrivateAnon,
    /// Shared anonymous memory (System V shm, `MAP_SHARED|MAP_ANONYMOUS`); swap-backed.
    SharedAnon,
    /// A file mapped shared (libraries, page cache); backed by its file on `device`, so
    /// clean pages are dropped on eviction and read back on the next touch.
    SharedFile { device: DeviceId },
}

impl RegionKind {
    pub fn is_shared(self) -> bool {
        !matches!(self, RegionKind::PrivateAnon)
    }
}

/// How the pages of a shared region are managed when address spaces bound to different
/// reservations (or to none) map them. Private pages ignore this.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum SharePolicy {
    /// Left to the global two-list LRU: the pages are allocated from and reclaimed by the
    /// global pool even when reserved tasks use them (the paper's Sec. III-A).
    Global,
    /// No-SP-Mgmt (Sec. III-B): every reservation that maps a page accounts it as its own
    /// page in its LRU lists, and may evict it (swapping it out under everyone). A mapper that
    /// is not the page's first holder returns one free page to the global pool for it, so the
    /// duplicate costs no physical memory but keeps its slot in the reservation.
    Private,
    /// The memory-cgroup rule (Sec. III-C): the reservation that brought the page into memory
    /// owns it and is the only one charged; it may evict the page by its own references alone,
    /// even while other tasks use it. A swapped-out page stays its owner's: whoever faults it
    /// back in, it is charged to the owner again (memory cgroups record the group with the
    /// swap entry). A file page dropped from memory has no such record: its next reader owns it.
    FirstTouch,
    /// Shared-Page Conservation (Sec. IV-A): each non-owner conserves one free page in its
    /// conserved-page list (CPL); when a reservation picks a shared page as a victim it only
    /// unmaps it and takes a page back from a CPL (its own, or the new owner's on an ownership
    /// transfer); only pages nobody else maps are really evicted.
    Spc,
    /// Shared-Page Eviction Lock (Sec. IV-B): once [`crate::mem::Memory::lock_region`] has
    /// admitted it, the whole region is resident and never evicted, each sharing reservation
    /// gives up the region's size, and the physical copy is held once, saving `(n−1)·S`.
    /// Until locked it behaves like `Spc`.
    Spel,
    /// SPEL where `Max(S) < n·Avg(S)`, else SPC (Sec. IV-C), decided by
    /// [`crate::mem::Memory::resolve_auto`] from measured per-task usage. Behaves like `Spc`
    /// until resolved.
    Auto,
}

impl SharePolicy {
    pub const ALL: [(&'static str, SharePolicy); 6] = [
        ("global", SharePolicy::Global),
        ("private", SharePolicy::Private),
        ("first-touch", SharePolicy::FirstTouch),
        ("spc", SharePolicy::Spc),
        ("spel", SharePolicy::Spel),
        ("auto", SharePolicy::Auto),
    ];

    pub fn name(self) -> &'static str {
        Self::ALL.iter().find(|(_, p)| *p == self).map(|(n, _)| *n).expect("every policy is named")
    }
}

impl fmt::Display for SharePolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Reservation types as Linux/RK defines them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ReservationKind {
    /// Never uses more than its size: when its free list is empty it evicts its own pages,
    /// even if the system has free memory.
    Hard,
    /// When its own pages are exhausted it borrows free pages from the global pool; borrowed
    /// pages are taken back (the reservation evicts its own pages) when the global pool runs
    /// out of free pages.
    Firm,
    /// A cgroup-style memory-limited group (`memory.max`): its size is a cap on the pages
    /// charged to it, not memory set aside (limits may overcommit the machine). Its pages
    /// live on its own FIFO second-chance lists; its frames come from and go back to the
    /// global pool. See [`crate::mem::Memory::set_limit_protection`] for high/min/low.
    Limit,
}

/// What a bound promises beside its cap, after HiRes's two kinds of reservation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum BoundKind {
    /// Its pages are set aside for its spaces: admission commits its size as it commits a
    /// hard reservation's (unless an enclosing hard bound already holds it), and reclaim on
    /// behalf of anyone else never takes a page it counts; only its own cap, its spaces' own
    /// pools and resizing evict them.
    Hard,
    /// A cap only: nothing is committed, and global memory pressure may take its pages, the
    /// page-level counterpart of a parent revoking a soft reservation.
    Soft,
}

impl BoundKind {
    pub fn as_str(self) -> &'static str {
        match self {
            BoundKind::Hard => "hard",
            BoundKind::Soft => "soft",
        }
    }
}

/// A bound request.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BoundSpec {
    pub name: String,
    /// Most pages it counts; `None` counts without a cap (for figures only).
    pub pages: Option<u64>,
    pub kind: BoundKind,
    /// The bound that holds it: every page it counts counts there too.
    pub parent: Option<BoundId>,
}

/// State and counters of one bound.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BoundStats {
    /// `None`: it only counts.
    pub size_pages: Option<u64>,
    pub kind: BoundKind,
    /// Distinct frames its spaces map, and those one of them brought in that nobody has
    /// mapped since (readahead).
    pub charged_pages: u64,
    /// The most `charged_pages` has been.
    pub peak_pages: u64,
    /// Pages it evicted to stay within its size.
    pub evictions: u64,
    /// Pages it only unmapped from its spaces to stay within its size (others still map them).
    pub unmaps: u64,
}

/// A limit group's throttle and protection thresholds in pages (`None`: none).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LimitProtection {
    pub high_pages: Option<u64>,
    pub min_pages: Option<u64>,
    pub low_pages: Option<u64>,
}

/// A reservation request.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReservationSpec {
    pub name: String,
    pub pages: u64,
    pub kind: ReservationKind,
}

/// CPU cost of the model's kernel paths. Model parameters in the order of magnitude the
/// paper's Table II reports (a few hundred to ~1400 cycles at 2.6 GHz for allocation and
/// (un)mapping), not measurements.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FaultCosts {
    /// Fault exception plus mapping a page that is already resident.
    pub minor: Nanos,
    /// Allocating and clearing a new anonymous page.
    pub zero_fill: Nanos,
    /// Allocating and copying a page on a copy-on-write fault.
    pub cow_copy: Nanos,
    /// Kernel work of a major fault before the task sleeps (allocation, I/O submission).
    pub major: Nanos,
    /// Per page evicted or unmapped by reclaim during the fault.
    pub reclaim_per_page: Nanos,
    /// Per page swapped in, kernel work PSI does not count as memory stall (on a fast device
    /// this can rival the wait itself).
    pub swap_in_per_page: Nanos,
}

impl Default for FaultCosts {
    fn default() -> Self {
        FaultCosts {
            minor: Nanos(600),
            zero_fill: Nanos(1_000),
            cow_copy: Nanos(1_500),
            major: Nanos(2_000),
            reclaim_per_page: Nanos(200),
            swap_in_per_page: Nanos::ZERO,
        }
    }
}

/// Configuration of the physical memory and the paging policies.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MemConfig {
    /// Bytes per page and frame (a power of two, at least 512).
    pub page_bytes: u64,
    /// Physical frames in the machine.
    pub total_frames: u32,
    /// Frames that admission control keeps out of reservations for unreserved tasks.
    pub unreserved_min_frames: u32,
    /// Smallest reservation admitted (Linux/RK uses 256 pages).
    pub min_reservation_pages: u64,
    /// Largest swap readahead window in pages (a power of two; 1 disables readahead), like
    /// Linux's `vm.page-cluster` (default 3, i.e. 8 pages). A major fault reads the
    /// swapped-out pages of the aligned window around the faulting page in one request; the
    /// window adapts as in Linux: it grows with the readahead pages actually used and falls to
    /// one page under random access.
    pub readahead_pages: u32,
    /// Reservations: share of their pages the inactive list is refilled to, in percent
    /// (Mach keeps about a third of the pages inactive).
    pub reservation_inactive_percent: u32,
    /// Global LRU: the active list is demoted while `inactive × ratio < active` (Linux uses
    /// 1 below 1 GiB of memory, more on larger machines).
    pub global_inactive_ratio: u32,
    pub costs: FaultCosts,
    /// Check every invariant after every state-changing operation and panic on a violation
    /// (default: in debug builds only; tests turn it on in release).
    pub check_every_operation: bool,
}

impl Default for MemConfig {
    fn default() -> Self {
        MemConfig {
            page_bytes: 4096,
            total_frames: 1 << 18,
            unreserved_min_frames: 0,
            min_reservation_pages: 1,
            readahead_pages: 8,
            reservation_inactive_percent: 33,
            global_inactive_ratio: 1,
            costs: FaultCosts::default(),
            check_every_operation: cfg!(debug_assertions),
        }
    }
}

impl MemConfig {
    /// A configuration with `total_frames` frames and the defaults otherwise.
    pub fn with_frames(total_frames: u32) -> Self {
        MemConfig { total_frames, ..Self::default() }
    }

    pub fn validate(&self) -> Result<(), MemError> {
        let bad = |m: String| Err(MemError::InvalidConfig(m));
        if !self.page_bytes.is_power_of_two() || self.page_bytes < 512 {
            return bad(format!("page_bytes = {}: must be a power of two of at least 512", self.page_bytes));
        }
        if self.total_frames == 0 || self.total_frames == u32::MAX {
            return bad(format!("total_frames = {}: must be between 1 and 2^32 − 2", self.total_frames));
        }
        if self.unreserved_min_frames > self.total_frames {
            return bad(format!("unreserved_min_frames = {} exceeds total_frames = {}", self.unreserved_min_frames, self.total_frames));
        }
        if !self.readahead_pages.is_power_of_two() {
            return bad(format!("readahead_pages = {}: must be a power of two (1 disables)", self.readahead_pages));
        }
        if self.reservation_inactive_percent == 0 || self.reservation_inactive_percent > 100 {
            return bad(format!("reservation_inactive_percent = {}: must be between 1 and 100", self.reservation_inactive_percent));
        }
        if self.global_inactive_ratio == 0 {
            return bad("global_inactive_ratio must be at least 1".into());
        }
        Ok(())
    }
}

/// Cumulative counters of one address space, plus its resident set.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SpaceStats {
    pub minor_faults: u64,
    pub major_faults: u64,
    /// Pages read from swap or file for this space's faults (readahead included).
    pub pages_swapped_in: u64,
    /// Pages written back while mapped by this space (every mapper of a shared page counts).
    pub pages_swapped_out: u64,
    pub cow_copies: u64,
    /// Pages currently mapped present in this space's page table.
    pub resident_pages: u64,
    /// The most pages it ever had mapped present at once.
    pub peak_resident_pages: u64,
}

/// State and counters of one reservation. `frames_held` is the physical memory set aside for
/// it: its free and conserved frames plus the frames of pages it holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReservationStats {
    pub size_pages: u64,
    pub kind: ReservationKind,
    pub frames_held: u64,
    /// Pages in its active and inactive lists (its own and those it shares).
    pub charged_pages: u64,
    pub active_pages: u64,
    pub inactive_pages: u64,
    pub free_frames: u64,
    /// Frames in its conserved-page list (SPC).
    pub conserved_frames: u64,
    /// Slots whose frame was returned to the global pool (No-SP-Mgmt duplicates).
    pub lent_frames: u64,
    /// Frames borrowed from the global pool beyond its size (firm only).
    pub borrowed_frames: u64,
    /// Pages of its size given up to SPEL-locked regions it shares.
    pub locked_charge_pages: u64,
    /// Pages it evicted from memory.
    pub evictions: u64,
    /// Shared pages it unmapped instead of evicting (SPC).
    pub spc_unmaps: u64,
    /// Shared pages whose ownership it handed over (SPC).
    pub ownership_transfers: u64,
    /// Dirty pages it wrote back.
    pub writebacks: u64,
}

/// Machine-wide state.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemStats {
    pub total_frames: u64,
    pub global_free_frames: u64,
    pub global_active_pages: u64,
    pub global_inactive_pages: u64,
    /// Frames holding SPEL-locked pages.
    pub locked_frames: u64,
    /// Sum of the frames held by reservations (free, conserved, and those of pages they hold).
    pub reservation_frames_held: u64,
    /// Sum of the frames reservations lent to the global pool and take back on demand.
    pub reservation_frames_lent: u64,
    /// Physical memory set aside for reservations: frames they hold or lent (and will take
    /// back on demand) plus SPEL-locked frames. Equals the sum of their sizes, minus what SPEL
    /// locks saved, minus the pages shared under No-SP-Mgmt that a reservation accounts
    /// while another pays the frame — the paper's "total physical memory usage" (Table III).
    pub reserved_physical_frames: u64,
    /// Frames admission control has promised to reservations and locked regions.
    pub committed_frames: u64,
    /// Pages evicted by the global LRU.
    pub global_evictions: u64,
}

/// Measured use of a shared region by one address space over its usage windows (jobs).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RegionUsage {
    pub windows: u64,
    /// Sum over windows of distinct pages touched.
    pub pages_sum: u64,
    pub pages_max: u64,
}

impl RegionUsage {
    pub fn avg_pages(&self) -> f64 {
        if self.windows == 0 {
            0.0
        } else {
            self.pages_sum as f64 / self.windows as f64
        }
    }
}

/// The outcome of [`crate::mem::Memory::resolve_auto`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AutoDecision {
    /// `Spel` or `Spc`.
    pub chosen: SharePolicy,
    /// Max(S): the region's size in pages (what SPEL would lock).
    pub max_pages: u64,
    /// Avg(S): mean over mapping address spaces of their mean pages touched per window.
    pub avg_pages: f64,
    /// Reservations sharing the region.
    pub n: u64,
    /// Why SPEL was not applied although the rule chose it (its admission test failed).
    pub spel_rejected: Option<String>,
}

/// Everything that can go wrong, with what to do about it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MemError {
    #[error("invalid memory configuration: {0}")]
    InvalidConfig(String),
    #[error("address space {0} does not exist (or has exited); create it with Memory::create_space")]
    NoSuchSpace(u32),
    #[error("region {0} does not exist; create it with Memory::create_shared or map_private")]
    NoSuchRegion(u32),
    #[error("reservation {0} does not exist; create it with Memory::create_reservation")]
    NoSuchReservation(u32),
    #[error("device {0} does not exist; add it with Memory::add_device")]
    NoSuchDevice(u32),
    #[error("address space {space}: virtual page {vpn} is not mapped (segmentation fault); map a region covering it first")]
    Unmapped { space: u32, vpn: u32 },
    #[error("address space {space}: write to read-only page {vpn}; map the region writable")]
    ReadOnly { space: u32, vpn: u32 },
    #[error("a region must have at least one page")]
    EmptyRegion,
    #[error("bound {0} does not exist; create it with Memory::create_bound")]
    NoSuchBound(u32),
    #[error("bound `{name}`: {why}")]
    InvalidBound { name: String, why: &'static str },
    #[error("address space {space} already has resident pages; bind it to its bounds before it touches memory")]
    SpaceNotEmpty { space: u32 },
    #[error("bound {0} has no page it can reclaim (all pinned or under I/O); enlarge it")]
    BoundExhausted(u32),
    #[error("address space {space} would exceed 2^32 − 1 virtual pages; use fewer or smaller regions")]
    AddressSpaceFull { space: u32 },
    #[error("address space {space} already maps region {region}")]
    AlreadyMapped { space: u32, region: u32 },
    #[error("reservation `{name}` of {pages} pages is below the minimum of {min} pages; enlarge it")]
    ReservationTooSmall { name: String, pages: u64, min: u64 },
    #[error(
        "reservation `{name}` of {requested} pages rejected by admission control: {available} of {total} frames \
         are uncommitted; shrink it, or shrink or remove other reservations"
    )]
    AdmissionRejected { name: String, requested: u64, available: u64, total: u64 },
    #[error(
        "SPEL lock of region {region} ({pages} pages) rejected: reservation {res} has {effective} pages not yet \
         locked, which must exceed the locked size; enlarge it to at least {need} pages or use SPC"
    )]
    SpelAdmission { region: u32, pages: u64, res: u32, effective: u64, need: u64 },
    #[error("region {region} uses policy `{policy}`; only `spel` (or `auto`) regions can be locked")]
    NotLockable { region: u32, policy: SharePolicy },
    #[error("region {0} has no usage measurements yet; call end_window at job ends before resolve_auto")]
    NoUsageMeasured(u32),
    #[error("reservation {0} has no page it can evict (all pinned or under I/O); enlarge it")]
    ReservationExhausted(u32),
    #[error("out of memory: no free frame and nothing the global pool can reclaim; add frames or shrink reservations")]
    OutOfMemory,
    #[error(
        "core {core}'s level-A/B frames are exhausted; levels A and B never page, so their working sets must fit \
         in their core's banks: shrink them or give the machine more memory"
    )]
    PlacementExhausted { core: u32 },
    #[error("address space {space} takes MC² level-A/B frames, which {what}")]
    PlacementUnsupported { space: u32, what: &'static str },
    #[error("address space {space} places its pages in {want}, but reservation `{name}` holds frames of {have}")]
    PlacementMismatch { space: u32, name: String, want: String, have: String },
    #[error(
        "`{name}` of {requested} pages rejected by admission control: {banks} hold {frames} frames, {available} of them \
         neither promised nor in use; shrink it, or shrink or remove what else is placed there"
    )]
    PlacementAdmission { name: String, requested: u64, available: u64, frames: u64, banks: String },
    #[error("memory-limited group {0}: shared pages under `spc`, `spel` or `auto` need per-reservation accounting a limit group does not have; use `global`, `private` or `first-touch` regions")]
    UnsupportedForLimit(u32),
    #[error("{0} applies to memory-limited groups (kind = limit) only")]
    NotALimitGroup(u32),
    #[error("copy-on-write memory can be managed by `private`, `first-touch` or `spc`, not `{0}`")]
    UnsupportedCowPolicy(SharePolicy),
    #[error(
        "address space {space}: page {vpn} is not private anonymous memory (shared or copy-on-write); only private pages can be discarded"
    )]
    NotDiscardable { space: u32, vpn: u32 },
}
