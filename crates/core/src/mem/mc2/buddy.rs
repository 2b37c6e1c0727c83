//! The criticality-aware buddy allocator of MC² (the paper's Fig. 7): m + 1 lists of free
//! blocks, one per core for levels A/B and one for level C and the OS, each a buddy allocator
//! with block orders, split and coalesce.
//!
//! A frame's list is fixed by its physical address (bank and colour, [`Mc2Platform`]); frames
//! no list may use are withheld: never free, never handed out. A request for level A or B on
//! a core is served only from that core's list and fails (`None`, nothing changed) when it is
//! empty, never from another bank; level C, `Placement::Any` and the OS use only the level-C
//! list.
//!
//! Pools: every pool of the memory model (the global pool, each reservation) has its own
//! m + 1 buddy lists. A frame given back to a pool is filed, by its address, under its list in
//! that pool, and a request is served from the pool's list its placement names. So a
//! reservation's frames keep their banks: a level-A/B request on a reservation gets a frame
//! of its core's bank that the reservation holds, or nothing.

use super::platform::Mc2Platform;
use crate::mem::frames::{FrameAllocator, FrameRequest, Placement};

const NONE: u32 = u32::MAX;
/// `order` of a frame that heads no free block.
const NOT_HEAD: u8 = u8::MAX;

/// The MC² buddy allocator; see the module documentation.
#[derive(Clone, Debug)]
pub struct Mc2Buddy {
    platform: Mc2Platform,
    /// List of each frame by address, `NONE` when withheld.
    list_of: Vec<u32>,
    /// Order of the free block a frame heads, `NOT_HEAD` otherwise.
    order: Vec<u8>,
    /// Pool of the free block a frame heads.
    pool_of_head: Vec<u32>,
    next: Vec<u32>,
    prev: Vec<u32>,
    /// First block of (pool, list, order), at `(pool * lists + list) * orders + order`.
    heads: Vec<u32>,
    /// Free frames per pool.
    pool_free: Vec<u64>,
    /// Frames of each list, by address.
    list_frames: Vec<u64>,
    withheld: u32,
}

impl Mc2Buddy {
    /// Every usable frame free in the global pool, as the largest aligned blocks that lie
    /// wholly in one list. The platform must validate.
    pub fn new(platform: Mc2Platform) -> Result<Mc2Buddy, String> {
        platform.validate()?;
        let n = platform.total_frames();
        let list_of: Vec<u32> = (0..n).map(|f| platform.list_of_frame(f).map_or(NONE, |l| l as u32)).collect();
        let orders = usize::from(platform.max_order) + 1;
        let mut list_frames = vec![0; platform.lists()];
        for &l in list_of.iter().filter(|&&l| l != NONE) {
            list_frames[l as usize] += 1;
        }
        let mut b = Mc2Buddy {
            list_frames,
            heads: vec![NONE; platform.lists() * orders],
            platform,
            order: vec![NOT_HEAD; n as usize],
            pool_of_head: vec![0; n as usize],
            next: vec![NONE; n as usize],
            prev: vec![NONE; n as usize],
            pool_free: vec![0],
            withheld: list_of.iter().filter(|&&l| l == NONE).count() as u32,
            list_of,
        };
        // Frames given back one by one coalesce into exactly the maximal aligned blocks; in
        // descending order so that each list serves its lowest addresses first.
        for f in (0..n).rev() {
            if b.list_of[f as usize] != NONE {
                b.free_block(0, f, 0);
            }
        }
        Ok(b)
    }

    /// The platform the allocator lays out.
    pub fn platform(&self) -> &Mc2Platform {
        &self.platform
    }

    /// Frames no list may use.
    pub fn withheld_frames(&self) -> u32 {
        self.withheld
    }

    /// The list a frame belongs to by address, `None` when withheld.
    pub fn list_of_frame(&self, f: u32) -> Option<usize> {
        let l = self.list_of[f as usize];
        (l != NONE).then_some(l as usize)
    }

    /// The list a placement names, `None` for a core the platform lacks.
    pub fn list_for(&self, placement: Placement) -> Option<usize> {
        self.platform.list_for(placement)
    }

    /// Pools the allocator keeps lists for (the global pool and every one added).
    pub fn pools(&self) -> u32 {
        self.pool_free.len() as u32
    }

    /// Free frames of `pool` in list `list`.
    pub fn free_frames_in(&self, pool: u32, list: usize) -> u64 {
        (0..=self.platform.max_order).map(|o| (self.free_blocks(pool, list, o).len() as u64) << o).sum()
    }

    /// Free blocks of `order` in `pool`'s list `list`, heads in list order.
    pub fn free_blocks(&self, pool: u32, list: usize, order: u8) -> Vec<u32> {
        let mut out = Vec::new();
        if (pool as usize) < self.pool_free.len() && order <= self.platform.max_order {
            let mut h = self.heads[self.slot(pool, list, order)];
            while h != NONE {
                out.push(h);
                h = self.next[h as usize];
            }
        }
        out
    }

    /// Free frames of `pool` in each bank (a block never spans banks: it is aligned and at
    /// most a bank long).
    pub fn free_frames_by_bank(&self, pool: u32) -> Vec<u64> {
        let mut out = vec![0; self.platform.banks as usize];
        for list in 0..self.platform.lists() {
            for order in 0..=self.platform.max_order {
                for head in self.free_blocks(pool, list, order) {
                    out[self.platform.bank_colour(head).0 as usize] += 1 << order;
                }
            }
        }
        out
    }

    /// A free block of `2^order` frames for `req`, its first frame returned and the block no
    /// longer free: the smallest free block that fits is split, the upper halves staying free.
    /// `None` (nothing changed) when the request's list in its pool has no block that large.
    pub fn take_block(&mut self, req: FrameRequest, order: u8) -> Option<u32> {
        if req.pool as usize >= self.pool_free.len() || order > self.platform.max_order {
            return None;
        }
        let list = self.list_for(req.placement)?;
        let mut o = order;
        while self.heads[self.slot(req.pool, list, o)] == NONE {
            if o == self.platform.max_order {
                return None;
            }
            o += 1;
        }
        let h = self.heads[self.slot(req.pool, list, o)];
        self.unlink(h);
        while o > order {
            o -= 1;
            self.link(req.pool, list, h + (1 << o), o);
        }
        self.pool_free[req.pool as usize] -= 1 << order;
        Some(h)
    }

    /// The taken block of `2^order` frames starting at `head` becomes free in `pool`,
    /// coalescing with its free buddies.
    ///
    /// # Panics
    /// If `head` is not aligned to `order` or its frames lie in different lists.
    pub fn give_back_block(&mut self, pool: u32, head: u32, order: u8) {
        assert!(head.is_multiple_of(1 << order), "block {head} is not aligned to order {order}");
        let list = self.list_of[head as usize];
        assert!(
            (head..head + (1 << order)).all(|f| self.list_of[f as usize] == list && list != NONE),
            "block {head} of order {order} is not wholly in one list"
        );
        self.free_block(pool, head, order);
    }

    fn free_block(&mut self, pool: u32, mut head: u32, mut order: u8) {
        let list = self.list_of[head as usize] as usize;
        self.pool_free[pool as usize] += 1 << order;
        while order < self.platform.max_order {
            let buddy = head ^ (1 << order);
            let b = buddy as usize;
            if b >= self.order.len() || self.order[b] != order || self.pool_of_head[b] != pool || self.list_of[b] as usize != list {
                break;
            }
            self.unlink(buddy);
            head = head.min(buddy);
            order += 1;
        }
        self.link(pool, list, head, order);
    }

    #[inline]
    fn slot(&self, pool: u32, list: usize, order: u8) -> usize {
        (pool as usize * self.platform.lists() + list) * (usize::from(self.platform.max_order) + 1) + usize::from(order)
    }

    /// Pushes the block at the front of its list: the block freed last is used first.
    fn link(&mut self, pool: u32, list: usize, head: u32, order: u8) {
        let s = self.slot(pool, list, order);
        let first = self.heads[s];
        let h = head as usize;
        self.order[h] = order;
        self.pool_of_head[h] = pool;
        self.prev[h] = NONE;
        self.next[h] = first;
        if first != NONE {
            self.prev[first as usize] = head;
        }
        self.heads[s] = head;
    }

    fn unlink(&mut self, head: u32) {
        let h = head as usize;
        let (p, n) = (self.prev[h], self.next[h]);
        if p == NONE {
            let s = self.slot(self.pool_of_head[h], self.list_of[h] as usize, self.order[h]);
            self.heads[s] = n;
        } else {
            self.next[p as usize] = n;
        }
        if n != NONE {
            self.prev[n as usize] = p;
        }
        self.order[h] = NOT_HEAD;
        self.next[h] = NONE;
        self.prev[h] = NONE;
    }
}

impl FrameAllocator for Mc2Buddy {
    fn total_frames(&self) -> u32 {
        self.order.len() as u32
    }

    fn add_pool(&mut self, pool: u32) {
        assert_eq!(pool as usize, self.pool_free.len(), "pools are added in index order");
        self.pool_free.push(0);
        self.heads.resize(self.heads.len() + self.platform.lists() * (usize::from(self.platform.max_order) + 1), NONE);
    }

    fn take(&mut self, req: FrameRequest) -> Option<u32> {
        self.take_block(req, 0)
    }

    fn give_back(&mut self, pool: u32, f: u32) {
        self.give_back_block(pool, f, 0);
    }

    fn free_frames(&self, pool: u32) -> u64 {
        self.pool_free.get(pool as usize).copied().unwrap_or(0)
    }

    fn free_pool_of(&self, f: u32) -> Option<u32> {
        // The free block holding `f`, if any, is headed by `f` rounded down to its order.
        (0..=self.platform.max_order).find_map(|o| {
            let h = (f & !((1u32 << o) - 1)) as usize;
            (self.order[h] == o).then(|| self.pool_of_head[h])
        })
    }

    fn placement_frames(&self, placement: Placement) -> Option<u64> {
        Some(self.list_for(placement).map_or(0, |l| self.list_frames[l]))
    }

    fn free_frames_for(&self, req: FrameRequest) -> u64 {
        match self.list_for(req.placement) {
            Some(l) if (req.pool as usize) < self.pool_free.len() => self.free_frames_in(req.pool, l),
            _ => 0,
        }
    }

    fn check(&self) -> Result<(), String> {
        let n = self.order.len();
        let mut seen = vec![false; n];
        let mut free = vec![0u64; self.pool_free.len()];
        for pool in 0..self.pool_free.len() as u32 {
            for list in 0..self.platform.lists() {
                for o in 0..=self.platform.max_order {
                    let mut prev = NONE;
                    let mut h = self.heads[self.slot(pool, list, o)];
                    while h != NONE {
                        let hu = h as usize;
                        let ctx = format!("pool {pool} list {list} order {o} block {h}");
                        if self.order[hu] != o || self.pool_of_head[hu] != pool || self.prev[hu] != prev {
                            return Err(format!("{ctx}: head fields disagree with the list"));
                        }
                        if !h.is_multiple_of(1 << o) || hu + (1 << o) > n {
                            return Err(format!("{ctx}: misaligned or past the last frame"));
                        }
                        for (f, seen_f) in seen.iter_mut().enumerate().skip(hu).take(1 << o) {
                            if *seen_f {
                                return Err(format!("{ctx}: frame {f} is free twice"));
                            }
                            *seen_f = true;
                            if self.list_of[f] as usize != list {
                                return Err(format!("{ctx}: frame {f} belongs to another list"));
                            }
                            if f != hu && self.order[f] != NOT_HEAD {
                                return Err(format!("{ctx}: frame {f} inside the block heads another"));
                            }
                        }
                        let b = (h ^ (1 << o)) as usize;
                        if o < self.platform.max_order
                            && b < n
                            && self.order[b] == o
                            && self.pool_of_head[b] == pool
                            && self.list_of[b] as usize == list
                        {
                            return Err(format!("{ctx}: its free buddy {b} did not coalesce"));
                        }
                        free[pool as usize] += 1 << o;
                        prev = h;
                        h = self.next[hu];
                    }
                }
            }
        }
        if let Some(f) = (0..n).find(|&f| !seen[f] && self.order[f] != NOT_HEAD) {
            return Err(format!("frame {f} heads a block on no list"));
        }
        if let Some(p) = (0..free.len()).find(|&p| free[p] != self.pool_free[p]) {
            return Err(format!("pool {p}: {} frames on its lists, counted {}", free[p], self.pool_free[p]));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mem::frames::Mc2Level;
    use crate::mem::mc2::platform::{range_mask, Partition};

    /// 32 frames of 4 KiB: 2 cores, 4 banks of 8 frames (bank = bits 15–16), 4 colours
    /// (bits 12–13); core 0 bank 2, core 1 bank 3, level C banks 0–1; blocks up to order 3.
    fn tiny() -> Mc2Platform {
        let all = range_mask(0, 4);
        Mc2Platform {
            cores: 2,
            page_bytes: 4096,
            dram_bytes: 4 << 15,
            banks: 4,
            bank_shift: 15,
            llc_bytes: 4 * 4 * 4096,
            llc_ways: 4,
            colour_shift: 12,
            max_order: 3,
            core_ab: vec![Partition { banks: 1 << 2, colours: all, ways: 1 }, Partition { banks: 1 << 3, colours: all, ways: 2 }],
            level_c: Partition { banks: 0b11, colours: all, ways: 0b1100 },
        }
    }

    #[test]
    fn starts_as_one_max_block_per_bank() {
        let b = Mc2Buddy::new(tiny()).unwrap();
        // Counted by address, as the platform's arithmetic says.
        assert_eq!(b.list_frames, (0..3).map(|l| b.platform.list_frames(l)).collect::<Vec<_>>());
        assert_eq!(b.list_frames, [8, 8, 16]);
        // Bank k is frames 8k..8k+8, one order-3 block each.
        assert_eq!(b.free_blocks(0, 2, 3), vec![0, 8]);
        assert_eq!(b.free_blocks(0, 0, 3), vec![16]);
        assert_eq!(b.free_blocks(0, 1, 3), vec![24]);
        assert_eq!(b.free_frames(0), 32);
        b.check().unwrap();
    }

    #[test]
    fn split_and_coalesce_by_hand() {
        let mut b = Mc2Buddy::new(tiny()).unwrap();
        let core1 = FrameRequest { pool: 0, placement: Placement::Mc2 { core: 1, level: Mc2Level::A } };
        // Splitting 24..32 for one frame leaves 28..32 (order 2), 26..28 (order 1), 25 (order 0).
        assert_eq!(b.take(core1), Some(24));
        assert_eq!(b.free_blocks(0, 1, 2), vec![28]);
        assert_eq!(b.free_blocks(0, 1, 1), vec![26]);
        assert_eq!(b.free_blocks(0, 1, 0), vec![25]);
        assert_eq!(b.take(core1), Some(25));
        b.check().unwrap();
        // Freeing 24 alone cannot coalesce (25 is taken); freeing 25 then rebuilds 24..32.
        b.give_back(0, 24);
        assert_eq!(b.free_blocks(0, 1, 0), vec![24]);
        b.give_back(0, 25);
        assert_eq!(b.free_blocks(0, 1, 3), vec![24]);
        assert_eq!(b.free_pool_of(27), Some(0));
        b.check().unwrap();
    }

    #[test]
    fn exhausted_core_list_fails_without_change() {
        let mut b = Mc2Buddy::new(tiny()).unwrap();
        let core0 = FrameRequest { pool: 0, placement: Placement::Mc2 { core: 0, level: Mc2Level::B } };
        assert_eq!(b.take_block(core0, 3), Some(16));
        let before = format!("{b:?}");
        assert_eq!(b.take(core0), None);
        assert_eq!(format!("{b:?}"), before);
        assert_eq!(b.take(FrameRequest { pool: 0, placement: Placement::Mc2 { core: 2, level: Mc2Level::A } }), None);
    }
}
