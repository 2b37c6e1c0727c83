//! Per-core small-object caches carved from level-A/B pages: MC²'s extension of Linux's
//! kmem_cache (Sec. 4), so that small kernel buffers a level-A/B task uses (IPC messages,
//! I/O descriptors) lie in its core's banks. A cache hands out fixed-size objects from pages
//! it takes from the core's level-A/B list and returns a page to that list as soon as it
//! holds no object.

use super::buddy::Mc2Buddy;
use crate::mem::frames::{FrameAllocator, FrameRequest, Mc2Level, Placement};
use std::collections::BTreeMap;

/// One object: the frame it lies in and its slot (byte offset `slot * object_bytes`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SlabObject {
    pub frame: u32,
    pub slot: u32,
}

/// A cache of `object_bytes`-sized objects for one core's level A or B.
#[derive(Clone, Debug)]
pub struct Mc2SlabCache {
    core: u32,
    level: Mc2Level,
    pool: u32,
    object_bytes: u64,
    objects_per_page: u32,
    /// Per page held: which slots are in use.
    pages: BTreeMap<u32, Vec<bool>>,
}

impl Mc2SlabCache {
    /// A cache drawing pages from `pool`'s list of `core` at `level` (A or B). Fails when
    /// the level is C, or an object is empty or larger than a page.
    pub fn new(alloc: &Mc2Buddy, pool: u32, core: u32, level: Mc2Level, object_bytes: u64) -> Result<Mc2SlabCache, String> {
        let page_bytes = alloc.platform().page_bytes;
        if level == Mc2Level::C {
            return Err("a per-core slab cache serves level A or B only".to_string());
        }
        if core >= alloc.platform().cores {
            return Err(format!("core {core} is not on the platform"));
        }
        if object_bytes == 0 || object_bytes > page_bytes {
            return Err(format!("object size {object_bytes} bytes is not in 1..={page_bytes}"));
        }
        let objects_per_page = (page_bytes / object_bytes) as u32;
        Ok(Mc2SlabCache { core, level, pool, object_bytes, objects_per_page, pages: BTreeMap::new() })
    }

    pub fn object_bytes(&self) -> u64 {
        self.object_bytes
    }

    pub fn objects_per_page(&self) -> u32 {
        self.objects_per_page
    }

    /// Pages the cache holds, lowest frame first.
    pub fn pages(&self) -> impl Iterator<Item = u32> + '_ {
        self.pages.keys().copied()
    }

    /// Objects in use.
    pub fn objects_in_use(&self) -> u64 {
        self.pages.values().map(|s| s.iter().filter(|&&u| u).count() as u64).sum()
    }

    /// Physical address of an object's first byte.
    pub fn phys_of(&self, alloc: &Mc2Buddy, obj: SlabObject) -> u64 {
        alloc.platform().phys_of_frame(obj.frame) + u64::from(obj.slot) * self.object_bytes
    }

    /// A free object: the lowest free slot of the lowest page with one, or the first slot of
    /// a page newly taken from the core's list; `None` (nothing changed) when that list is
    /// exhausted.
    pub fn alloc(&mut self, alloc: &mut Mc2Buddy) -> Option<SlabObject> {
        for (&frame, slots) in self.pages.iter_mut() {
            if let Some(slot) = slots.iter().position(|&u| !u) {
                slots[slot] = true;
                return Some(SlabObject { frame, slot: slot as u32 });
            }
        }
        let req = FrameRequest { pool: self.pool, placement: Placement::Mc2 { core: self.core, level: self.level } };
        let frame = alloc.take(req)?;
        let mut slots = vec![false; self.objects_per_page as usize];
        slots[0] = true;
        self.pages.insert(frame, slots);
        Some(SlabObject { frame, slot: 0 })
    }

    /// Frees `obj`; its page goes back to the core's list when it holds no object.
    ///
    /// # Panics
    /// If `obj` is not an object of this cache in use.
    pub fn free(&mut self, alloc: &mut Mc2Buddy, obj: SlabObject) {
        let slots = self.pages.get_mut(&obj.frame).expect("the object's page belongs to the cache");
        let used = slots.get_mut(obj.slot as usize).expect("the slot lies in the page");
        assert!(*used, "object {obj:?} is not in use");
        *used = false;
        if slots.iter().all(|&u| !u) {
            self.pages.remove(&obj.frame);
            alloc.give_back(self.pool, obj.frame);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mem::mc2::Mc2Platform;

    #[test]
    fn fills_a_page_before_taking_another_and_returns_it_empty() {
        let mut b = Mc2Buddy::new(Mc2Platform::imx6()).unwrap();
        let mut c = Mc2SlabCache::new(&b, 0, 1, Mc2Level::A, 1024).unwrap();
        // 4096 / 1024 = 4 objects a page.
        let objs: Vec<_> = (0..5).map(|_| c.alloc(&mut b).unwrap()).collect();
        assert_eq!(c.pages().count(), 2);
        assert_eq!(objs[3].frame, objs[0].frame);
        assert_eq!(objs[3].slot, 3);
        // Core 1's bank is 5: frames 5 × 32768 upwards (128 MiB / 4 KiB = 32768 a bank).
        assert_eq!(objs[0].frame, 5 * 32768);
        assert_eq!(c.phys_of(&b, objs[2]), 5 * (128 << 20) + 2 * 1024);
        let free_before = b.free_frames(0);
        c.free(&mut b, objs[4]);
        assert_eq!(b.free_frames(0), free_before + 1);
        assert!(Mc2SlabCache::new(&b, 0, 1, Mc2Level::C, 64).is_err());
        assert!(Mc2SlabCache::new(&b, 0, 1, Mc2Level::A, 8192).is_err());
    }
}
