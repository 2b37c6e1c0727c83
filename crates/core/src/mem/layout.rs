//! The physical layouts a scenario may ask for (`[memory] layout`) and one frame allocator
//! type serving either, so the simulator's memory model stays statically dispatched: each
//! call is one `match`, not a virtual call.

use super::frames::{FrameAllocator, FrameRequest, FreeLists, Placement};
use super::mc2::{Mc2Buddy, Mc2Platform};

/// How the machine's physical frames are laid out and handed out.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum MemoryLayout {
    /// No physical placement: FIFO free lists per pool ([`FreeLists`]).
    #[default]
    Flat,
    /// MC²'s banks (the i.MX6 layout scaled to the machine, [`Mc2Platform::imx6_scaled`]),
    /// served by the criticality-aware buddy allocator ([`Mc2Buddy`]).
    Mc2,
}

impl MemoryLayout {
    pub fn name(self) -> &'static str {
        match self {
            MemoryLayout::Flat => "flat",
            MemoryLayout::Mc2 => "mc2",
        }
    }
}

/// The allocator of a [`MemoryLayout`].
#[derive(Clone, Debug)]
pub enum LayoutFrames {
    Flat(FreeLists),
    /// Boxed so the flat variant stays small; one indirection on the MC² path only.
    Mc2(Box<Mc2Buddy>),
}

impl LayoutFrames {
    /// `total_frames` frames of `page_bytes`, all free in the global pool.
    pub fn new(layout: MemoryLayout, total_frames: u32, page_bytes: u64) -> Result<LayoutFrames, String> {
        Ok(match layout {
            MemoryLayout::Flat => LayoutFrames::Flat(FreeLists::new(total_frames)),
            MemoryLayout::Mc2 => {
                let dram_bytes = u64::from(total_frames) * page_bytes;
                LayoutFrames::Mc2(Box::new(Mc2Buddy::new(Mc2Platform::imx6_scaled(dram_bytes, page_bytes)?)?))
            }
        })
    }

    /// The MC² allocator, under that layout.
    pub fn mc2(&self) -> Option<&Mc2Buddy> {
        match self {
            LayoutFrames::Flat(_) => None,
            LayoutFrames::Mc2(b) => Some(b),
        }
    }
}

impl FrameAllocator for LayoutFrames {
    #[inline]
    fn total_frames(&self) -> u32 {
        match self {
            LayoutFrames::Flat(a) => a.total_frames(),
            LayoutFrames::Mc2(a) => a.total_frames(),
        }
    }

    fn add_pool(&mut self, pool: u32) {
        match self {
            LayoutFrames::Flat(a) => a.add_pool(pool),
            LayoutFrames::Mc2(a) => a.add_pool(pool),
        }
    }

    #[inline]
    fn take(&mut self, req: FrameRequest) -> Option<u32> {
        match self {
            LayoutFrames::Flat(a) => a.take(req),
            LayoutFrames::Mc2(a) => a.take(req),
        }
    }

    #[inline]
    fn give_back(&mut self, pool: u32, f: u32) {
        match self {
            LayoutFrames::Flat(a) => a.give_back(pool, f),
            LayoutFrames::Mc2(a) => a.give_back(pool, f),
        }
    }

    #[inline]
    fn free_frames(&self, pool: u32) -> u64 {
        match self {
            LayoutFrames::Flat(a) => a.free_frames(pool),
            LayoutFrames::Mc2(a) => a.free_frames(pool),
        }
    }

    #[inline]
    fn free_pool_of(&self, f: u32) -> Option<u32> {
        match self {
            LayoutFrames::Flat(a) => a.free_pool_of(f),
            LayoutFrames::Mc2(a) => a.free_pool_of(f),
        }
    }

    fn check(&self) -> Result<(), String> {
        match self {
            LayoutFrames::Flat(a) => a.check(),
            LayoutFrames::Mc2(a) => a.check(),
        }
    }

    fn placement_frames(&self, placement: Placement) -> Option<u64> {
        match self {
            LayoutFrames::Flat(a) => a.placement_frames(placement),
            LayoutFrames::Mc2(a) => a.placement_frames(placement),
        }
    }

    fn free_frames_for(&self, req: FrameRequest) -> u64 {
        match self {
            LayoutFrames::Flat(a) => a.free_frames_for(req),
            LayoutFrames::Mc2(a) => a.free_frames_for(req),
        }
    }
}
