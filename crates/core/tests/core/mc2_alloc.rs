//! MC²'s criticality-aware buddy allocator: known answers of the i.MX6 layout, and property
//! tests that it never hands a frame out twice, keeps levels A/B in their core's banks and
//! colours and level C out of every A/B bank, fails cleanly when a list is exhausted,
//! coalesces back to its initial blocks, and that per-core slab caches never overlap objects
//! and give empty pages back.

use crate::common::seeded_config;
use critmem_core::mem::frames::GLOBAL_POOL;
use critmem_core::mem::mc2::{range_mask, Mc2Buddy, Mc2Platform, Mc2SlabCache, Partition, SlabObject};
use critmem_core::mem::{FrameAllocator, FrameRequest, Mc2Level, Placement};
use proptest::prelude::*;
use std::collections::BTreeSet;

/// 2 cores, 4 banks of 16 frames (bank = address bits 16–17), 4 colours (bits 12–13); core 0
/// owns bank 2, core 1 bank 3, level C banks 0–1. With `coloured`, core 0 may use colours 0–1
/// and core 1 colours 2–3 only, so half of each A/B bank is withheld.
fn small(coloured: bool, max_order: u8) -> Mc2Platform {
    let all = range_mask(0, 4);
    let (c0, c1) = if coloured { (range_mask(0, 2), range_mask(2, 2)) } else { (all, all) };
    Mc2Platform {
        cores: 2,
        page_bytes: 4096,
        dram_bytes: 4 << 16,
        banks: 4,
        bank_shift: 16,
        llc_bytes: 4 * 4 * 4096,
        llc_ways: 4,
        colour_shift: 12,
        max_order,
        core_ab: vec![Partition { banks: 1 << 2, colours: c0, ways: 1 }, Partition { banks: 1 << 3, colours: c1, ways: 2 }],
        level_c: Partition { banks: 0b11, colours: all, ways: 0b1100 },
    }
}

fn mc2(core: u32, level: Mc2Level) -> Placement {
    Placement::Mc2 { core, level }
}

/// Every free block of every list and order of `pool`, as sets (list order is reuse order).
fn blocks(b: &Mc2Buddy, pool: u32) -> Vec<BTreeSet<u32>> {
    let p = b.platform();
    (0..p.lists())
        .flat_map(|l| (0..=p.max_order).map(move |o| (l, o)))
        .map(|(l, o)| b.free_blocks(pool, l, o).into_iter().collect())
        .collect()
}

#[test]
fn imx6_default_lists() {
    let b = Mc2Buddy::new(Mc2Platform::imx6()).unwrap();
    // Each 128 MiB bank is 32768 frames = 32 blocks of order 10 (1024 frames).
    assert_eq!(b.free_blocks(GLOBAL_POOL, 0, 10).len(), 32);
    assert_eq!(b.free_blocks(GLOBAL_POOL, 0, 10)[0], 4 * 32768);
    // Level C has banks 0–3: 4 × 32 blocks, lowest address first.
    let c = b.free_blocks(GLOBAL_POOL, 4, 10);
    assert_eq!((c.len(), c[0], c[127]), (128, 0, 127 * 1024));
    assert_eq!(b.withheld_frames(), 0);
    assert_eq!(b.free_frames(GLOBAL_POOL), 262_144);
}

#[test]
fn coloured_lists_withhold_the_other_colours() {
    let b = Mc2Buddy::new(small(true, 3)).unwrap();
    // Banks 2 and 3 keep 2 of 4 colours: 2 × 8 frames withheld; blocks are pairs of colours.
    assert_eq!(b.withheld_frames(), 16);
    // Bank 2 is frames 32..48; colours 0–1 are frames ≡ 0, 1 (mod 4): order-1 blocks.
    assert_eq!(b.free_blocks(GLOBAL_POOL, 0, 1), vec![32, 36, 40, 44]);
    assert_eq!(b.free_blocks(GLOBAL_POOL, 1, 1), vec![50, 54, 58, 62]);
    assert_eq!(b.free_pool_of(34), None);
    b.check().unwrap();
}

#[derive(Clone, Debug)]
enum Op {
    /// Take a block of `order` for (core, level) from the pool.
    Take {
        pool: u32,
        core: u32,
        level: u8,
        order: u8,
    },
    /// Give back the i-th taken block (mod their number) to pool `pool`.
    GiveBack {
        i: usize,
        pool: u32,
    },
    /// Allocate from, or free the i-th object of, slab cache `cache`.
    SlabAlloc {
        cache: usize,
    },
    SlabFree {
        cache: usize,
        i: usize,
    },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0..2u32, 0..3u32, 0..3u8, 0..4u8).prop_map(|(pool, core, level, order)| Op::Take { pool, core, level, order }),
        2 => (any::<usize>(), 0..2u32).prop_map(|(i, pool)| Op::GiveBack { i, pool }),
        1 => (0..2usize).prop_map(|cache| Op::SlabAlloc { cache }),
        1 => (0..2usize, any::<usize>()).prop_map(|(cache, i)| Op::SlabFree { cache, i }),
    ]
}

/// Whether every frame of a block lies in the partition `placement` names.
fn placed_right(p: &Mc2Platform, placement: Placement, head: u32, order: u8) -> Result<(), String> {
    for f in head..head + (1 << order) {
        let (bank, colour) = p.bank_colour(f);
        match placement {
            Placement::Mc2 { core, level: Mc2Level::A | Mc2Level::B } => {
                let part = p.core_ab[core as usize];
                if part.banks >> bank & 1 == 0 || part.colours >> colour & 1 == 0 {
                    return Err(format!("frame {f} (bank {bank}, colour {colour}) outside core {core}'s partition"));
                }
            }
            _ => {
                if p.core_ab.iter().any(|c| c.banks >> bank & 1 == 1) {
                    return Err(format!("level-C frame {f} lies in A/B bank {bank}"));
                }
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(seeded_config("mc2_alloc_buddy_properties", 256))]

    #[test]
    fn buddy_properties(coloured in any::<bool>(), max_order in 0..=3u8, ops in proptest::collection::vec(op(), 1..120)) {
        let platform = small(coloured, max_order);
        let fresh = Mc2Buddy::new(platform.clone()).unwrap();
        let mut b = fresh.clone();
        b.add_pool(1);
        let page_bytes = platform.page_bytes;
        let mut caches = [
            Mc2SlabCache::new(&b, GLOBAL_POOL, 0, Mc2Level::A, 1024).unwrap(),
            Mc2SlabCache::new(&b, GLOBAL_POOL, 1, Mc2Level::B, 1536).unwrap(),
        ];
        let mut objects: Vec<Vec<SlabObject>> = vec![Vec::new(), Vec::new()];
        // Blocks the test holds: (head, order).
        let mut taken: Vec<(u32, u8)> = Vec::new();
        for op in ops {
            match op {
                Op::Take { pool, core, level, order } => {
                    let level = [Mc2Level::A, Mc2Level::B, Mc2Level::C][level as usize];
                    let placement = if level == Mc2Level::C && core == 2 { Placement::Any } else { mc2(core, level) };
                    let before = format!("{b:?}");
                    match b.take_block(FrameRequest { pool, placement }, order) {
                        Some(head) => {
                            prop_assert!(core < 2 || level == Mc2Level::C, "a request for a missing core was served");
                            placed_right(&platform, placement, head, order).map_err(TestCaseError::fail)?;
                            taken.push((head, order));
                        }
                        None => {
                            prop_assert_eq!(format!("{b:?}"), before, "a failed request changed the allocator");
                            if let Some(l) = b.list_for(placement) {
                                for o in order..=max_order {
                                    prop_assert!(b.free_blocks(pool, l, o).is_empty(), "refused with a block of order {} free", o);
                                }
                            }
                        }
                    }
                }
                Op::GiveBack { i, pool } => {
                    if !taken.is_empty() {
                        let (head, order) = taken.swap_remove(i % taken.len());
                        b.give_back_block(pool, head, order);
                    }
                }
                Op::SlabAlloc { cache } => {
                    let before = format!("{b:?}");
                    match caches[cache].alloc(&mut b) {
                        Some(o) => objects[cache].push(o),
                        None => prop_assert_eq!(format!("{b:?}"), before),
                    }
                }
                Op::SlabFree { cache, i } => {
                    if !objects[cache].is_empty() {
                        let n = objects[cache].len();
                        let o = objects[cache].swap_remove(i % n);
                        caches[cache].free(&mut b, o);
                    }
                }
            }
            b.check().map_err(TestCaseError::fail)?;
            // No frame both free and held, none held twice (blocks and slab pages).
            let mut held = BTreeSet::new();
            let slab_pages = caches.iter().flat_map(|c| c.pages().map(|f| (f, 0u8)));
            for (head, order) in taken.iter().copied().chain(slab_pages) {
                for f in head..head + (1 << order) {
                    prop_assert!(held.insert(f), "frame {} handed out twice", f);
                    prop_assert_eq!(b.free_pool_of(f), None);
                }
            }
            let free: u64 = (0..2).map(|p| b.free_frames(p)).sum();
            prop_assert_eq!(free + held.len() as u64 + u64::from(b.withheld_frames()), u64::from(b.total_frames()));
            // Slab objects: in their core's partition, never overlapping, no page empty.
            for (ci, c) in caches.iter().enumerate() {
                let mut spans: Vec<(u64, u64)> = objects[ci].iter().map(|&o| (c.phys_of(&b, o), c.object_bytes())).collect();
                spans.sort_unstable();
                for w in spans.windows(2) {
                    prop_assert!(w[0].0 + w[0].1 <= w[1].0, "objects overlap at {:#x}", w[1].0);
                }
                for &o in &objects[ci] {
                    prop_assert!(u64::from(o.slot + 1) * c.object_bytes() <= page_bytes);
                    placed_right(&platform, mc2(ci as u32, Mc2Level::A), o.frame, 0).map_err(TestCaseError::fail)?;
                }
                prop_assert_eq!(c.objects_in_use(), objects[ci].len() as u64);
                for page in c.pages() {
                    prop_assert!(objects[ci].iter().any(|o| o.frame == page), "empty page {} kept", page);
                }
            }
        }
        // Freeing everything, and moving pool 1's frames back, restores the initial blocks.
        for (ci, c) in caches.iter_mut().enumerate() {
            for o in objects[ci].drain(..) {
                c.free(&mut b, o);
            }
            prop_assert_eq!(c.pages().count(), 0);
        }
        for (head, order) in taken.drain(..) {
            b.give_back_block(GLOBAL_POOL, head, order);
        }
        for l in 0..platform.lists() {
            for o in 0..=max_order {
                for head in b.free_blocks(1, l, o) {
                    let placement = if l == platform.level_c_list() { Placement::Any } else { mc2(l as u32, Mc2Level::B) };
                    prop_assert_eq!(b.take_block(FrameRequest { pool: 1, placement }, o), Some(head));
                    b.give_back_block(GLOBAL_POOL, head, o);
                }
            }
        }
        b.check().map_err(TestCaseError::fail)?;
        prop_assert_eq!(blocks(&b, GLOBAL_POOL), blocks(&fresh, GLOBAL_POOL));
        prop_assert_eq!(b.free_frames(1), 0);
    }
}

/// The memory model driven through the MC² allocator: it asks only for `Placement::Any`, so
/// every frame it holds must lie in a level-C bank, and its invariant check (which audits the
/// allocator's counts frame by frame) holds after every operation.
#[test]
fn memory_model_on_the_mc2_allocator_stays_in_level_c() {
    use critmem_core::mem::{Access, DeviceSpec, MemConfig, MemError, Memory, RefKind, ReservationKind, ReservationSpec};
    use critmem_core::Nanos;
    use rand::{Rng, SeedableRng};
    let platform = small(false, 3);
    let mut majors = 0;
    for seed in 0..16u64 {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        let cfg = MemConfig { check_every_operation: true, ..MemConfig::with_frames(platform.total_frames()) };
        let alloc = Mc2Buddy::new(platform.clone()).unwrap();
        let mut m = Memory::with_allocator(cfg, DeviceSpec::fast_ssd(), alloc).unwrap();
        let res = m.create_reservation(Nanos::ZERO, ReservationSpec { name: "r".into(), pages: 8, kind: ReservationKind::Hard }).unwrap();
        let mut spaces = Vec::new();
        for i in 0..3 {
            let s = m.create_space(&format!("t{i}"), (i == 0).then_some(res)).unwrap();
            let (_, v) = m.map_private(s, "p", 20).unwrap();
            spaces.push((s, v));
        }
        let mut now = Nanos::ZERO;
        for step in 0..300 {
            now += Nanos(rng.random_range(0..100_000));
            let (s, v) = spaces[rng.random_range(0..spaces.len())];
            let kind = if rng.random_bool(0.3) { RefKind::Write } else { RefKind::Read };
            match m.access(now, s, v.offset(rng.random_range(0..20)), kind) {
                Ok(Access::Major { .. }) => majors += 1,
                Ok(_) | Err(MemError::ReservationExhausted(_) | MemError::OutOfMemory) => {}
                Err(e) => panic!("seed {seed}, step {step}: {e}"),
            }
            m.check_invariants().unwrap_or_else(|e| panic!("seed {seed}, step {step}: {e}"));
            let a = m.frame_allocator();
            for f in 0..a.total_frames() {
                if a.free_pool_of(f).is_none() {
                    let (bank, _) = platform.bank_colour(f);
                    assert!(bank < 2, "seed {seed}, step {step}: the model holds frame {f} of A/B bank {bank}");
                }
            }
        }
    }
    assert!(majors > 0, "the level-C banks never ran short");
}
