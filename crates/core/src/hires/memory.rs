//! HiRes's hierarchical memory management (Sec. III-E, Table II of the HiRes paper) over the
//! page-level model's physical frames.
//!
//! The root takes frames from the frame allocator ([`FrameAllocator`], [`FreeLists`] by
//! default) into its own address space ([`HierMemory::allocate`]); the machine's memory is
//! the root's memory reservation in whole frames of the page size. A parent maps a page it
//! holds into a direct child ([`HierMemory::alias`]) and unmaps it, with every alias made from
//! it further down, with [`HierMemory::remove`]: L4's map and unmap without grant, so the
//! parent keeps its own mapping and with it control over the page. Siblings share a page only
//! when their parent aliases it into both.
//!
//! Aliasing follows the reservations: a subsystem holds at most as many distinct frames as
//! its hard and soft memory reservations bind, in whole pages. The reservations change only
//! through [`HierMemory::change_reservations`], which then brings every subsystem back within
//! its bound, from the root down: each one over its bound loses its newest aliases, with the
//! aliases made from them, until it fits. A revoked soft reservation, a shrunk or deleted one,
//! thus leaves no subsystem holding memory it no longer has.
//!
//! Addresses are byte addresses, page-aligned, in each subsystem's own address space.
//!
//! This is the explicit page map of Table II, for the `critmem hires` API. Simulations enforce
//! the same nested bounds on the page-level model instead: a server's memory reservation is a
//! bound on the distinct frames its subtree maps ([`crate::mem::Memory::create_bound`]).

use super::{Family, Refusal, ReservationTree, SubsystemId};
use crate::mem::frames::GLOBAL_POOL;
use crate::mem::{FrameAllocator, FrameRequest, FreeLists};
use std::collections::{BTreeMap, BTreeSet};

/// One mapping: an allocation at the root or an alias below it. Ids grow with creation, so
/// the largest is the newest.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct MapId(u64);

#[derive(Clone, Debug, PartialEq, Eq)]
struct Mapping {
    holder: SubsystemId,
    addr: u64,
    frame: u32,
    /// The parent's mapping this one aliases; `None` for the root's allocations.
    source: Option<MapId>,
    /// The aliases made from it into the holder's children.
    aliases: BTreeSet<MapId>,
}

/// One subsystem's address space.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Space {
    by_addr: BTreeMap<u64, MapId>,
    /// The same mappings, oldest first.
    by_age: BTreeSet<MapId>,
    /// How many addresses map each frame it holds.
    frame_refs: BTreeMap<u32, u32>,
}

/// Pages held by a subsystem or a subtree.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PagesHeld {
    /// Distinct frames mapped: the memory held, what the reservations bound.
    pub frames: u64,
    /// Addresses mapped by alias (the root's allocations are not aliases); at least `frames`
    /// below the root, more where one frame is mapped at several addresses.
    pub aliases: u64,
}

/// Why a memory request was refused; nothing changed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MemoryRefusal {
    #[error(transparent)]
    Tree(#[from] Refusal),
    #[error("page_bytes = {0}: must be a power of two of at least 512")]
    PageSize(u64),
    #[error(
        "the root's {root_bytes} bytes are {frames} frames of {page_bytes} bytes, more than a frame allocator indexes; use larger pages"
    )]
    TooManyFrames { root_bytes: u64, page_bytes: u64, frames: u64 },
    #[error("the frame allocator manages {managed} frames, {free} of them free; the root's memory needs exactly {needed}, all free")]
    Allocator { managed: u32, free: u64, needed: u32 },
    #[error("address {addr:#x} is not a multiple of the {page_bytes}-byte page; give a page-aligned address")]
    Misaligned { addr: u64, page_bytes: u64 },
    #[error("{child} is not a child of {parent}: a parent aliases into and removes from its direct children only")]
    NotAChild { parent: String, child: String },
    #[error("{holder} holds no page at {addr:#x}; name an address it maps")]
    NotHeld { holder: String, addr: u64 },
    #[error("{holder} already maps a page at {addr:#x}; remove that alias first or pick another address")]
    AddressTaken { holder: String, addr: u64 },
    #[error("{child} would hold {asked_pages} pages, more than the {bound_pages} its memory reservations bind ({bound_bytes} bytes); bind more memory to {child} or remove one of its aliases first")]
    OverBound { child: String, asked_pages: u64, bound_pages: u64, bound_bytes: u64 },
    #[error("no free frame: all {total_frames} are in use; free a page at the root first")]
    OutOfFrames { total_frames: u32 },
}

/// `page_bytes` is a page size the memory model takes: a power of two of at least 512.
pub fn check_page_bytes(page_bytes: u64) -> Result<(), MemoryRefusal> {
    if page_bytes.is_power_of_two() && page_bytes >= 512 {
        Ok(())
    } else {
        Err(MemoryRefusal::PageSize(page_bytes))
    }
}

/// The root's memory in whole frames of `page_bytes`: the machine's frames.
pub fn root_frames(tree: &ReservationTree, page_bytes: u64) -> Result<u32, MemoryRefusal> {
    check_page_bytes(page_bytes)?;
    let root_bytes = tree.holding(ReservationTree::ROOT, Family::Memory).hard_in;
    let frames = root_bytes / page_bytes;
    // u32::MAX is the frame lists' "none".
    u32::try_from(frames).ok().filter(|&f| f < u32::MAX).ok_or(MemoryRefusal::TooManyFrames { root_bytes, page_bytes, frames })
}

/// A reservation tree with the pages each subsystem holds: see the module documentation.
#[derive(Clone, Debug)]
pub struct HierMemory<A = FreeLists> {
    tree: ReservationTree,
    alloc: A,
    page_bytes: u64,
    total_frames: u32,
    /// Subsystem `i`'s address space is `spaces[i]`.
    spaces: Vec<Space>,
    mappings: BTreeMap<MapId, Mapping>,
    next_id: u64,
}

impl HierMemory<FreeLists> {
    /// `tree` with its root's memory as free frames of `page_bytes` in FIFO free lists.
    pub fn new(tree: ReservationTree, page_bytes: u64) -> Result<Self, MemoryRefusal> {
        let frames = root_frames(&tree, page_bytes)?;
        HierMemory::with_allocator(tree, page_bytes, FreeLists::new(frames))
    }
}

impl<A: FrameAllocator> HierMemory<A> {
    /// `tree` with its root's memory as the frames `alloc` hands out; `alloc` must manage
    /// exactly the root's memory in frames of `page_bytes`, all free in the global pool.
    pub fn with_allocator(tree: ReservationTree, page_bytes: u64, alloc: A) -> Result<Self, MemoryRefusal> {
        let needed = root_frames(&tree, page_bytes)?;
        let free = alloc.free_frames(GLOBAL_POOL);
        if alloc.total_frames() != needed || free != u64::from(needed) {
            return Err(MemoryRefusal::Allocator { managed: alloc.total_frames(), free, needed });
        }
        let spaces = vec![Space::default(); tree.subsystems().count()];
        let memory = HierMemory { tree, alloc, page_bytes, total_frames: needed, spaces, mappings: BTreeMap::new(), next_id: 0 };
        memory.debug_check();
        Ok(memory)
    }

    pub fn tree(&self) -> &ReservationTree {
        &self.tree
    }

    pub fn into_tree(self) -> ReservationTree {
        self.tree
    }

    pub fn page_bytes(&self) -> u64 {
        self.page_bytes
    }

    pub fn frame_allocator(&self) -> &A {
        &self.alloc
    }

    /// Changes the reservations (add subsystems, create, bind, revoke, delete, wait, set
    /// overheads) through `change`, then removes the aliases no longer bound: every subsystem
    /// over its bound, from the root down, loses its newest aliases (and the aliases made from
    /// them) until it fits. Whatever `change` returns is returned; a refusal of the tree has
    /// changed nothing, so it removes nothing either.
    pub fn change_reservations<R>(&mut self, change: impl FnOnce(&mut ReservationTree) -> Result<R, Refusal>) -> Result<R, Refusal> {
        let result = change(&mut self.tree);
        let subsystems = self.tree.subsystems().count();
        assert!(subsystems >= self.spaces.len(), "change_reservations must not replace the tree");
        assert_eq!(root_frames(&self.tree, self.page_bytes), Ok(self.total_frames), "the root's memory is the machine's");
        self.spaces.resize(subsystems, Space::default());
        self.fit();
        self.debug_check();
        result
    }

    /// Maps a free frame at `root_addr` in the root's address space; the frame.
    pub fn allocate(&mut self, root_addr: u64) -> Result<u32, MemoryRefusal> {
        let root = ReservationTree::ROOT;
        self.aligned(root_addr)?;
        self.vacant(root, root_addr)?;
        let frame =
            self.alloc.take(FrameRequest::from_pool(GLOBAL_POOL)).ok_or(MemoryRefusal::OutOfFrames { total_frames: self.total_frames })?;
        self.map(root, root_addr, frame, None);
        self.debug_check();
        Ok(frame)
    }

    /// Unmaps the root's page at `root_addr` and every alias made from it, and gives its frame
    /// back to the allocator; the number of aliases removed with it.
    pub fn free(&mut self, root_addr: u64) -> Result<u64, MemoryRefusal> {
        self.aligned(root_addr)?;
        let id = self.mapped(ReservationTree::ROOT, root_addr)?;
        let frame = self.mappings[&id].frame;
        let removed = self.unmap_tree(id);
        self.alloc.give_back(GLOBAL_POOL, frame);
        self.debug_check();
        Ok(removed - 1)
    }

    /// Maps the page `parent` holds at `parent_addr` into its direct child `child` at
    /// `child_addr` (Table II's `alias`); the frame. Refused where `parent` holds nothing
    /// there, `child` maps something there already, or `child` would hold more distinct
    /// frames than its memory reservations bind.
    pub fn alias(&mut self, parent: SubsystemId, parent_addr: u64, child: SubsystemId, child_addr: u64) -> Result<u32, MemoryRefusal> {
        self.direct_child(parent, child)?;
        self.aligned(parent_addr)?;
        self.aligned(child_addr)?;
        let source = self.mapped(parent, parent_addr)?;
        self.vacant(child, child_addr)?;
        let frame = self.mappings[&source].frame;
        let held = &self.spaces[child.0].frame_refs;
        if !held.contains_key(&frame) {
            let bound_pages = self.bound_pages(child);
            let asked_pages = held.len() as u64 + 1;
            if asked_pages > bound_pages {
                return Err(MemoryRefusal::OverBound {
                    child: self.tree.name(child).to_owned(),
                    asked_pages,
                    bound_pages,
                    bound_bytes: self.bound_bytes(child),
                });
            }
        }
        self.map(child, child_addr, frame, Some(source));
        self.debug_check();
        Ok(frame)
    }

    /// Unmaps the alias at `child_addr` in `parent`'s direct child `child` and every alias
    /// made from it further down (Table II's `remove`); the number of aliases removed.
    pub fn remove(&mut self, parent: SubsystemId, child: SubsystemId, child_addr: u64) -> Result<u64, MemoryRefusal> {
        self.direct_child(parent, child)?;
        self.aligned(child_addr)?;
        let id = self.mapped(child, child_addr)?;
        let removed = self.unmap_tree(id);
        self.debug_check();
        Ok(removed)
    }

    /// Distinct frames `id` may hold: its hard and soft memory reservations, in whole pages.
    pub fn bound_pages(&self, id: SubsystemId) -> u64 {
        self.bound_bytes(id) / self.page_bytes
    }

    fn bound_bytes(&self, id: SubsystemId) -> u64 {
        let h = self.tree.holding(id, Family::Memory);
        h.hard_in + h.soft_in
    }

    /// What `id` maps itself.
    pub fn pages_held(&self, id: SubsystemId) -> PagesHeld {
        let space = &self.spaces[id.0];
        let aliases = if id == ReservationTree::ROOT { 0 } else { space.by_addr.len() as u64 };
        PagesHeld { frames: space.frame_refs.len() as u64, aliases }
    }

    /// What `id` and every subsystem below it map: a frame mapped in several of them counts
    /// once in `frames`, every alias in `aliases`.
    pub fn subtree_pages(&self, id: SubsystemId) -> PagesHeld {
        let mut frames = BTreeSet::new();
        let mut aliases = 0;
        for s in self.tree.subsystems().filter(|&s| self.in_subtree(s, id)) {
            frames.extend(self.spaces[s.0].frame_refs.keys().copied());
            aliases += self.pages_held(s).aliases;
        }
        PagesHeld { frames: frames.len() as u64, aliases }
    }

    /// `(address, frame)` of every page `id` maps, by address.
    pub fn mappings(&self, id: SubsystemId) -> impl Iterator<Item = (u64, u32)> + '_ {
        self.spaces[id.0].by_addr.iter().map(|(&addr, m)| (addr, self.mappings[m].frame))
    }

    /// The frame `id` maps at `addr`, if any.
    pub fn frame_at(&self, id: SubsystemId, addr: u64) -> Option<u32> {
        self.spaces.get(id.0)?.by_addr.get(&addr).map(|m| self.mappings[m].frame)
    }

    /// The machine's frames: the root's memory in whole pages.
    pub fn total_frames(&self) -> u32 {
        self.total_frames
    }

    /// Frames the root has taken from the allocator.
    pub fn frames_in_use(&self) -> u64 {
        self.spaces[ReservationTree::ROOT.0].by_addr.len() as u64
    }

    pub fn free_frames(&self) -> u64 {
        self.alloc.free_frames(GLOBAL_POOL)
    }

    /// Every invariant, for tests and debug checks: the tree's own; frames conserved (in use
    /// at the root + free = total, no frame allocated twice or both in use and free); every
    /// alias made from a live mapping of the same frame in its holder's parent, and recorded
    /// there; the address spaces' indexes agree with the mappings; every subsystem holds no
    /// more distinct frames than its reservations bind.
    pub fn check(&self) -> Result<(), String> {
        self.tree.check()?;
        self.alloc.check().map_err(|e| format!("frame allocator: {e}"))?;
        if self.spaces.len() != self.tree.subsystems().count() {
            return Err(format!("{} address spaces for {} subsystems", self.spaces.len(), self.tree.subsystems().count()));
        }
        let mut in_use = BTreeSet::new();
        for (id, m) in &self.mappings {
            let name = self.tree.name(m.holder);
            let at = format!("{name}'s mapping at {:#x}", m.addr);
            if id.0 >= self.next_id {
                return Err(format!("{at} has an id not yet handed out"));
            }
            if !m.addr.is_multiple_of(self.page_bytes) {
                return Err(format!("{at} is not page-aligned"));
            }
            let space = &self.spaces[m.holder.0];
            if space.by_addr.get(&m.addr) != Some(id) || !space.by_age.contains(id) {
                return Err(format!("{at} is missing from its address space"));
            }
            match m.source {
                None if m.holder != ReservationTree::ROOT => return Err(format!("{at} aliases nothing")),
                None => {
                    if m.frame >= self.total_frames || self.alloc.free_pool_of(m.frame).is_some() {
                        return Err(format!("{at}: frame {} is not a taken frame of the machine", m.frame));
                    }
                    if !in_use.insert(m.frame) {
                        return Err(format!("frame {} is allocated twice", m.frame));
                    }
                }
                Some(source) => {
                    let Some(src) = self.mappings.get(&source) else {
                        return Err(format!("{at} aliases a mapping that is gone"));
                    };
                    if Some(src.holder) != self.tree.parent(m.holder) || src.frame != m.frame || !src.aliases.contains(id) {
                        return Err(format!("{at} is not an alias of {}'s mapping at {:#x}", self.tree.name(src.holder), src.addr));
                    }
                }
            }
            if let Some(stray) = m.aliases.iter().find(|a| self.mappings.get(a).is_none_or(|a| a.source != Some(*id))) {
                return Err(format!("{at} records alias #{} that does not alias it", stray.0));
            }
        }
        if in_use.len() as u64 + self.free_frames() != u64::from(self.total_frames) {
            return Err(format!("{} frames in use + {} free ≠ {} frames", in_use.len(), self.free_frames(), self.total_frames));
        }
        for (s, space) in self.spaces.iter().enumerate() {
            let id = SubsystemId(s);
            let name = self.tree.name(id);
            if space.by_age.len() != space.by_addr.len() || space.by_addr.values().any(|m| !space.by_age.contains(m)) {
                return Err(format!("{name}'s address space indexes disagree"));
            }
            let mut refs = BTreeMap::new();
            for m in space.by_addr.values() {
                match self.mappings.get(m) {
                    Some(m) if m.holder == id => *refs.entry(m.frame).or_insert(0u32) += 1,
                    _ => return Err(format!("{name}'s address space names a mapping not its own")),
                }
            }
            if refs != space.frame_refs {
                return Err(format!("{name}'s frame counts are off"));
            }
            if space.frame_refs.len() as u64 > self.bound_pages(id) {
                return Err(format!(
                    "{name} holds {} frames, beyond the {} pages bound to it",
                    space.frame_refs.len(),
                    self.bound_pages(id)
                ));
            }
        }
        Ok(())
    }

    fn debug_check(&self) {
        if cfg!(debug_assertions) {
            if let Err(e) = self.check() {
                panic!("hierarchical memory invariant violated: {e}");
            }
        }
    }

    /// Removes aliases, newest first, wherever a subsystem holds more than is bound to it.
    /// Parents come before their children in id order, so a parent's removals are done
    /// before its children are measured. The root's bound is the machine: it never loses
    /// pages here.
    fn fit(&mut self) {
        for s in 1..self.spaces.len() {
            let bound_pages = self.bound_pages(SubsystemId(s));
            while self.spaces[s].frame_refs.len() as u64 > bound_pages {
                let newest = *self.spaces[s].by_age.last().expect("a space holding frames maps something");
                self.unmap_tree(newest);
            }
        }
    }

    fn map(&mut self, holder: SubsystemId, addr: u64, frame: u32, source: Option<MapId>) {
        let id = MapId(self.next_id);
        self.next_id += 1;
        let space = &mut self.spaces[holder.0];
        space.by_addr.insert(addr, id);
        space.by_age.insert(id);
        *space.frame_refs.entry(frame).or_insert(0) += 1;
        if let Some(source) = source {
            self.mappings.get_mut(&source).expect("an alias's source is mapped").aliases.insert(id);
        }
        self.mappings.insert(id, Mapping { holder, addr, frame, source, aliases: BTreeSet::new() });
    }

    /// Unmaps `top` and every alias made from it; how many mappings that was.
    fn unmap_tree(&mut self, top: MapId) -> u64 {
        if let Some(source) = self.mappings[&top].source {
            self.mappings.get_mut(&source).expect("an alias's source is mapped").aliases.remove(&top);
        }
        let mut stack = vec![top];
        let mut removed = 0;
        while let Some(id) = stack.pop() {
            let m = self.mappings.remove(&id).expect("aliases are mapped");
            stack.extend(m.aliases.iter().copied());
            let space = &mut self.spaces[m.holder.0];
            space.by_addr.remove(&m.addr);
            space.by_age.remove(&id);
            match space.frame_refs.get_mut(&m.frame) {
                Some(n) if *n > 1 => *n -= 1,
                _ => {
                    space.frame_refs.remove(&m.frame);
                }
            }
            removed += 1;
        }
        removed
    }

    fn known(&self, id: SubsystemId) -> Result<(), MemoryRefusal> {
        if id.0 < self.spaces.len() {
            Ok(())
        } else {
            Err(Refusal::Unknown(format!("subsystem #{}", id.0)).into())
        }
    }

    fn direct_child(&self, parent: SubsystemId, child: SubsystemId) -> Result<(), MemoryRefusal> {
        self.known(parent)?;
        self.known(child)?;
        if self.tree.parent(child) == Some(parent) {
            Ok(())
        } else {
            Err(MemoryRefusal::NotAChild { parent: self.tree.name(parent).to_owned(), child: self.tree.name(child).to_owned() })
        }
    }

    fn aligned(&self, addr: u64) -> Result<(), MemoryRefusal> {
        if addr.is_multiple_of(self.page_bytes) {
            Ok(())
        } else {
            Err(MemoryRefusal::Misaligned { addr, page_bytes: self.page_bytes })
        }
    }

    fn mapped(&self, holder: SubsystemId, addr: u64) -> Result<MapId, MemoryRefusal> {
        self.spaces[holder.0]
            .by_addr
            .get(&addr)
            .copied()
            .ok_or_else(|| MemoryRefusal::NotHeld { holder: self.tree.name(holder).to_owned(), addr })
    }

    fn vacant(&self, holder: SubsystemId, addr: u64) -> Result<(), MemoryRefusal> {
        if self.spaces[holder.0].by_addr.contains_key(&addr) {
            Err(MemoryRefusal::AddressTaken { holder: self.tree.name(holder).to_owned(), addr })
        } else {
            Ok(())
        }
    }

    /// `s` is `top` or below it.
    fn in_subtree(&self, s: SubsystemId, top: SubsystemId) -> bool {
        let mut at = Some(s);
        while let Some(id) = at {
            if id == top {
                return true;
            }
            at = self.tree.parent(id);
        }
        false
    }
}

#[cfg(test)]
#[path = "memory_tests.rs"]
mod tests;
