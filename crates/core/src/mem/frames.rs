//! The physical frame allocator: the one interface through which the memory model takes
//! free frames and gives them back.
//!
//! The memory model decides *which pool* a frame comes from or goes back to (reservation
//! slots, lending and borrowing, reclaim); the allocator decides *which frame* that is. Every
//! frame that holds no page and is not set aside for shared-page conservation or a lock is
//! free in exactly one pool of the allocator. [`FreeLists`], one FIFO list per pool, is the
//! default. An allocator with physical placement (per-core bank or cache-colour lists, buddy
//! blocks) implements the same trait and serves a [`FrameRequest`]'s [`Placement`], failing
//! cleanly (`None`) when the frames it may use are exhausted.

use super::list::IndexLists;

/// Pool index of the global (unreserved) pool; reservation `ResId(r)` is pool `r + 1`.
pub const GLOBAL_POOL: u32 = 0;

/// Where in physical memory a requested frame may lie.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Placement {
    /// Any frame free in the pool: bank- or colour-aware allocators add their constraints
    /// here.
    #[default]
    Any,
    /// MC²'s criticality-aware placement (the paper's extra GFP bit): levels A and B take a
    /// frame only from `core`'s own banks and colours, level C (and D, and the OS) only from
    /// the level-C banks. An allocator without physical layout treats it as `Any`.
    Mc2 { core: u32, level: Mc2Level },
}

impl Placement {
    /// Whether pages placed so are never reclaimed: MC² assumes level-A/B tasks fit in memory
    /// and never page (Sec. 4.1), and their frames may come from their core's banks only, so
    /// reclaim (which hands the victim's frame to whoever asked) must never take one.
    #[inline]
    pub const fn pins_pages(self) -> bool {
        matches!(self, Placement::Mc2 { level: Mc2Level::A | Mc2Level::B, .. })
    }

    /// The core whose level-A/B banks serve it, `None` for the level-C banks (or no
    /// layout): two placements draw on the same frames exactly when these agree.
    #[inline]
    pub const fn ab_core(self) -> Option<u32> {
        match self {
            Placement::Mc2 { core, level: Mc2Level::A | Mc2Level::B } => Some(core),
            _ => None,
        }
    }

    /// Where its frames lie, for messages.
    pub fn banks(self) -> String {
        match self.ab_core() {
            Some(core) => format!("core {core}'s level-A/B banks"),
            None => "the level-C banks".to_string(),
        }
    }
}

/// The allocation list an MC² request names: its core's level-A/B list or the level-C/OS one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Mc2Level {
    A,
    B,
    /// Level C, level D and the OS share the level-C list.
    C,
}

/// A request for one free frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FrameRequest {
    /// The pool whose free frames serve the request ([`GLOBAL_POOL`] or a reservation's).
    pub pool: u32,
    pub placement: Placement,
}

impl FrameRequest {
    /// Any free frame of `pool`.
    #[inline]
    pub const fn from_pool(pool: u32) -> FrameRequest {
        FrameRequest { pool, placement: Placement::Any }
    }
}

/// Hands out and takes back free frames, per pool.
///
/// Frames are dense indices `0..total_frames()`. A frame is either free in exactly one pool
/// (and then the allocator's) or taken (and then the memory model's until given back). The
/// counts must agree with the frames: `free_frames(p)` is the number of frames `f` with
/// `free_pool_of(f) == Some(p)`, which is what the memory model's invariant check relies on
/// to catch a frame the allocator lost or handed out twice.
pub trait FrameAllocator {
    /// Frames the allocator manages (the machine's physical frames).
    fn total_frames(&self) -> u32;
    /// Makes room for pool `pool`, with no free frames; pools are added in index order.
    fn add_pool(&mut self, pool: u32);
    /// A free frame satisfying `req`, no longer free; `None` when there is none.
    fn take(&mut self, req: FrameRequest) -> Option<u32>;
    /// Frame `f` (taken, holding no page) becomes free in `pool`.
    fn give_back(&mut self, pool: u32, f: u32);
    /// Free frames of `pool`.
    fn free_frames(&self, pool: u32) -> u64;
    /// The pool frame `f` is free in, or `None` if it is taken.
    fn free_pool_of(&self, f: u32) -> Option<u32>;
    /// The allocator's own structural check; the error names the first violation found.
    fn check(&self) -> Result<(), String>;
    /// Frames of the machine that requests of `placement` may ever take, or `None` when the
    /// allocator places nothing (every frame serves every request).
    fn placement_frames(&self, _placement: Placement) -> Option<u64> {
        None
    }
    /// Free frames of `req.pool` that could serve `req`.
    fn free_frames_for(&self, req: FrameRequest) -> u64 {
        self.free_frames(req.pool)
    }
}

/// The default allocator: one FIFO list of free frames per pool. A pool serves the frame it
/// was given back longest ago; the machine starts with every frame free in the global pool
/// in index order.
#[derive(Clone, Debug)]
pub struct FreeLists {
    /// List `p` holds pool `p`'s free frames.
    lists: IndexLists,
}

impl FreeLists {
    /// `total_frames` frames, all free in the global pool.
    pub fn new(total_frames: u32) -> FreeLists {
        let mut lists = IndexLists::new(total_frames as usize, 1);
        for f in 0..total_frames {
            lists.push_back(GLOBAL_POOL, f);
        }
        FreeLists { lists }
    }
}

impl FrameAllocator for FreeLists {
    #[inline]
    fn total_frames(&self) -> u32 {
        self.lists.elements() as u32
    }

    fn add_pool(&mut self, pool: u32) {
        self.lists.grow_lists(pool as usize + 1);
    }

    #[inline]
    fn take(&mut self, req: FrameRequest) -> Option<u32> {
        match req.placement {
            Placement::Any | Placement::Mc2 { .. } => self.lists.pop_front(req.pool),
        }
    }

    #[inline]
    fn give_back(&mut self, pool: u32, f: u32) {
        self.lists.push_back(pool, f);
    }

    #[inline]
    fn free_frames(&self, pool: u32) -> u64 {
        u64::from(self.lists.len(pool))
    }

    #[inline]
    fn free_pool_of(&self, f: u32) -> Option<u32> {
        self.lists.list_of(f)
    }

    fn check(&self) -> Result<(), String> {
        self.lists.check()
    }
}
