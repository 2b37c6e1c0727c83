//! Bounds on the resident pages of sets of address spaces, nested through parents: what a
//! server's memory reservation and a group over reserved tasks are in the page-level model.

use super::*;

use proptest::prelude::*;
use rand::{Rng, SeedableRng};

const POLICIES: [SharePolicy; 6] =
    [SharePolicy::Global, SharePolicy::Private, SharePolicy::FirstTouch, SharePolicy::Spc, SharePolicy::Spel, SharePolicy::Auto];

fn bound<A: FrameAllocator>(m: &mut Memory<A>, name: &str, pages: Option<u64>, kind: BoundKind, parent: Option<BoundId>) -> BoundId {
    m.create_bound(BoundSpec { name: name.into(), pages, kind, parent }).unwrap()
}

fn charged<A: FrameAllocator>(m: &Memory<A>, b: BoundId) -> u64 {
    m.bound_charged_pages(b).unwrap()
}

#[test]
fn a_bound_at_its_size_evicts_its_own_oldest_page_and_leaves_other_spaces_alone() {
    let mut m = machine(64, 1);
    let b = bound(&mut m, "s", Some(4), BoundKind::Soft, None);
    let (inside, outside) = (m.create_space("in", None).unwrap(), m.create_space("out", None).unwrap());
    m.bind_space(inside, b).unwrap();
    let vi = m.map_private(inside, "p", 8).unwrap().1;
    let vo = m.map_private(outside, "p", 8).unwrap().1;
    for i in 0..8 {
        wr(&mut m, Nanos(i), outside, vo.offset(i as u32));
    }
    for i in 0..6u32 {
        wr(&mut m, Nanos(10 + u64::from(i)), inside, vi.offset(i));
        assert!(charged(&m, b) <= 4);
    }
    // Pages 0 and 1 went (written back to swap), 2..6 stay; the other space kept all 8.
    assert_eq!(m.space_stats(inside).unwrap().resident_pages, 4);
    assert!(!m.is_mapped(inside, vi) && !m.is_mapped(inside, vi.offset(1)) && m.is_mapped(inside, vi.offset(5)));
    assert_eq!(m.space_stats(outside).unwrap().resident_pages, 8);
    let st = m.bound_stats(b).unwrap();
    assert_eq!((st.charged_pages, st.peak_pages, st.evictions, st.unmaps), (4, 4, 2, 0));
    assert_eq!(m.stats().global_evictions, 0, "the bound's choices are not the global LRU's");
    // Touching page 0 again reads it back from swap, at the cost of the oldest page left.
    assert!(matches!(rd(&mut m, Nanos(1_000_000), inside, vi), Access::Major { .. }));
    assert!(!m.is_mapped(inside, vi.offset(2)));
    ok(&m);
}

#[test]
fn a_page_counts_once_per_bound_however_many_of_its_spaces_map_it_and_in_every_enclosing_bound() {
    let mut m = machine(64, 1);
    let shm = m.create_shared("shm", RegionKind::SharedAnon, 4, SharePolicy::Global).unwrap();
    let parent = bound(&mut m, "p", Some(6), BoundKind::Soft, None);
    let child = bound(&mut m, "c", Some(4), BoundKind::Soft, Some(parent));
    let [a, b, c] = ["a", "b", "c"].map(|n| m.create_space(n, None).unwrap());
    m.bind_space(a, child).unwrap();
    m.bind_space(b, child).unwrap();
    m.bind_space(c, parent).unwrap();
    assert_eq!(m.space_bounds(a), [child, parent]);
    let [va, vb, vc] = [a, b, c].map(|s| m.map_shared(Nanos::ZERO, s, shm, true).unwrap());
    for i in 0..4 {
        rd(&mut m, Nanos(1), a, va.offset(i));
        rd(&mut m, Nanos(2), b, vb.offset(i));
        rd(&mut m, Nanos(3), c, vc.offset(i));
    }
    assert_eq!((charged(&m, child), charged(&m, parent)), (4, 4));
    // c's own private pages fill the parent; the parent then reclaims among its whole subtree.
    let vp = m.map_private(c, "p", 4).unwrap().1;
    for i in 0..4 {
        wr(&mut m, Nanos(10 + u64::from(i)), c, vp.offset(i));
        assert!(charged(&m, parent) <= 6 && charged(&m, child) <= charged(&m, parent));
    }
    ok(&m);
}

#[test]
fn a_shared_page_others_still_map_is_only_unmapped_from_the_bounds_spaces() {
    let mut m = machine(64, 1);
    let shm = m.create_shared("shm", RegionKind::SharedAnon, 4, SharePolicy::Global).unwrap();
    let b = bound(&mut m, "s", Some(2), BoundKind::Soft, None);
    let (inside, outside) = (m.create_space("in", None).unwrap(), m.create_space("out", None).unwrap());
    m.bind_space(inside, b).unwrap();
    let vi = m.map_shared(Nanos::ZERO, inside, shm, true).unwrap();
    let vo = m.map_shared(Nanos::ZERO, outside, shm, true).unwrap();
    for i in 0..4 {
        rd(&mut m, Nanos(1), outside, vo.offset(i));
    }
    for i in 0..3 {
        rd(&mut m, Nanos(2 + u64::from(i)), inside, vi.offset(i));
    }
    // The bound gave up page 0 without evicting it: the other space still maps all four.
    assert_eq!(m.space_stats(outside).unwrap().resident_pages, 4);
    assert_eq!(m.space_stats(inside).unwrap().resident_pages, 2);
    let st = m.bound_stats(b).unwrap();
    assert_eq!((st.evictions, st.unmaps), (0, 1));
    // Mapping it again is a minor fault: it never left memory.
    assert!(matches!(rd(&mut m, Nanos(10), inside, vi), Access::Minor { .. }));
    ok(&m);
}

#[test]
fn global_reclaim_spares_a_hard_bounds_pages_and_takes_a_soft_ones() {
    for kind in [BoundKind::Hard, BoundKind::Soft] {
        let mut m = machine(16, 1);
        let b = bound(&mut m, "s", Some(8), kind, None);
        let (inside, outside) = (m.create_space("in", None).unwrap(), m.create_space("out", None).unwrap());
        m.bind_space(inside, b).unwrap();
        let vi = m.map_private(inside, "p", 8).unwrap().1;
        let vo = m.map_private(outside, "p", 16).unwrap().1;
        for i in 0..8 {
            wr(&mut m, Nanos(1), inside, vi.offset(i));
        }
        for i in 0..16 {
            wr(&mut m, Nanos(2 + u64::from(i)), outside, vo.offset(i));
        }
        let kept = m.space_stats(inside).unwrap().resident_pages;
        match kind {
            BoundKind::Hard => assert_eq!(kept, 8, "set aside: the unbounded space pages against itself"),
            BoundKind::Soft => assert!(kept < 8, "a soft bound's pages go under global pressure"),
        }
        ok(&m);
    }
}

#[test]
fn refused_bounds_and_bindings_change_nothing() {
    let mut m = machine(32, 1);
    res(&mut m, "r", 20, ReservationKind::Hard);
    let s = m.create_space("s", None).unwrap();
    let v = m.map_private(s, "p", 4).unwrap().1;
    wr(&mut m, Nanos(1), s, v);
    let before = format!("{m:?}");
    let refused = [
        m.create_bound(BoundSpec { name: "big".into(), pages: Some(13), kind: BoundKind::Hard, parent: None }),
        m.create_bound(BoundSpec { name: "none".into(), pages: Some(0), kind: BoundKind::Soft, parent: None }),
        m.create_bound(BoundSpec { name: "orphan".into(), pages: Some(1), kind: BoundKind::Soft, parent: Some(BoundId(7)) }),
    ];
    assert!(matches!(refused[0], Err(MemError::AdmissionRejected { requested: 13, available: 12, .. })), "{refused:?}");
    assert!(matches!(refused[1], Err(MemError::InvalidBound { .. })) && matches!(refused[2], Err(MemError::NoSuchBound(7))));
    assert_eq!(format!("{m:?}"), before);
    let b = bound(&mut m, "fits", Some(12), BoundKind::Hard, None);
    let before = format!("{m:?}");
    assert_eq!(m.bind_space(s, b), Err(MemError::SpaceNotEmpty { space: s.0 }), "it already holds a page");
    assert!(matches!(m.set_bound_size(Nanos(2), b, Some(13)), Err(MemError::AdmissionRejected { .. })));
    assert_eq!(format!("{m:?}"), before);
    // A hard child is held by its hard parent: nothing more is committed.
    bound(&mut m, "inner", Some(12), BoundKind::Hard, Some(b));
    assert_eq!(m.committed_frames(), 32);
    ok(&m);
}

#[test]
fn shrinking_a_bound_evicts_down_to_its_new_size() {
    let mut m = machine(64, 1);
    let b = bound(&mut m, "s", Some(8), BoundKind::Soft, None);
    let s = m.create_space("s", None).unwrap();
    m.bind_space(s, b).unwrap();
    let v = m.map_private(s, "p", 8).unwrap().1;
    for i in 0..8 {
        wr(&mut m, Nanos(1), s, v.offset(i));
    }
    m.set_bound_size(Nanos(2), b, Some(3)).unwrap();
    assert_eq!((charged(&m, b), m.space_stats(s).unwrap().resident_pages), (3, 3));
    assert!(m.device(DeviceId::SWAP).unwrap().stats().bytes_written > 0, "dirty pages written back");
    ok(&m);
}

/// What a random run reached, so the generator is known to exercise the bounds.
#[derive(Default, Debug)]
struct Reached {
    bound_evictions: u64,
    bound_unmaps: u64,
    refused: u64,
    resized: u64,
    nested_full: u64,
}

/// A random machine with a random tree of bounds over random spaces (some in reservations,
/// mapping shared regions under every policy), and a random workload; every operation is
/// followed by the full invariant check (bounds within their sizes, children within their
/// parents, charges exact, frames conserved), and every refused bound or resize by a
/// comparison with the state before it.
fn bounded_scenario(seed: u64) -> Reached {
    let mut reached = Reached::default();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let cfg = MemConfig {
        readahead_pages: [1, 2, 4][rng.random_range(0..3)],
        check_every_operation: true,
        ..MemConfig::with_frames(rng.random_range(24..80))
    };
    let mut m = Memory::new(cfg, DeviceSpec::preset(DeviceSpec::PRESETS[rng.random_range(0..4)]).unwrap()).unwrap();
    let mut ress = Vec::new();
    for i in 0..rng.random_range(0..3) {
        let kind = if rng.random_bool(0.5) { ReservationKind::Hard } else { ReservationKind::Firm };
        if let Ok(r) = m.create_reservation(Nanos::ZERO, ReservationSpec { name: format!("r{i}"), pages: rng.random_range(3..12), kind }) {
            ress.push(r);
        }
    }
    let mut bounds: Vec<BoundId> = Vec::new();
    for i in 0..rng.random_range(1..7) {
        let parent = (!bounds.is_empty() && rng.random_bool(0.6)).then(|| bounds[rng.random_range(0..bounds.len())]);
        let pages = rng.random_bool(0.85).then(|| rng.random_range(1..24));
        let kind = if pages.is_some() && rng.random_bool(0.4) { BoundKind::Hard } else { BoundKind::Soft };
        let before = format!("{m:?}");
        match m.create_bound(BoundSpec { name: format!("b{i}"), pages, kind, parent }) {
            Ok(b) => bounds.push(b),
            Err(e) => {
                assert!(matches!(e, MemError::AdmissionRejected { .. }), "seed {seed}: {e}");
                assert_eq!(format!("{m:?}"), before, "seed {seed}: a refused bound changed the memory");
                reached.refused += 1;
            }
        }
    }
    let mut regions = Vec::new();
    for _ in 0..rng.random_range(0..3) {
        let policy = POLICIES[rng.random_range(0..POLICIES.len())];
        regions.push(m.create_shared("shm", RegionKind::SharedAnon, rng.random_range(1..8), policy).unwrap());
    }
    let mut spaces: Vec<(AsId, Vec<(Vpn, u32)>)> = Vec::new();
    for i in 0..rng.random_range(2..6) {
        let res = (!ress.is_empty() && rng.random_bool(0.4)).then(|| ress[rng.random_range(0..ress.len())]);
        let s = m.create_space(&format!("t{i}"), res).unwrap();
        if !bounds.is_empty() && rng.random_bool(0.85) {
            m.bind_space(s, bounds[rng.random_range(0..bounds.len())]).unwrap();
        }
        let pages = rng.random_range(1..24);
        let mut maps = vec![(m.map_private(s, "p", pages).unwrap().1, pages)];
        for &reg in &regions {
            if rng.random_bool(0.5) {
                if let Ok(v) = m.map_shared(Nanos::ZERO, s, reg, true) {
                    maps.push((v, m.region_pages(reg).unwrap()));
                }
            }
        }
        spaces.push((s, maps));
    }
    let mut now = Nanos::ZERO;
    for step in 0..400 {
        now += Nanos(rng.random_range(0..200_000));
        if spaces.is_empty() {
            break;
        }
        let si = rng.random_range(0..spaces.len());
        let (s, ref maps) = spaces[si];
        let roll = rng.random_range(0..1000);
        if roll < 880 {
            let (v, pages) = maps[rng.random_range(0..maps.len())];
            let kind = if rng.random_bool(0.5) { RefKind::Write } else { RefKind::Read };
            match m.access(now, s, v.offset(rng.random_range(0..pages)), kind) {
                Ok(_) | Err(MemError::ReservationExhausted(_) | MemError::OutOfMemory | MemError::BoundExhausted(_)) => {}
                Err(e) => panic!("seed {seed}, step {step}: unexpected {e}"),
            }
        } else if roll < 920 {
            let (v, pages) = maps[0];
            let _ = m.discard(s, v.offset(rng.random_range(0..pages)));
        } else if roll < 960 && !bounds.is_empty() {
            let b = bounds[rng.random_range(0..bounds.len())];
            let st = m.bound_stats(b).unwrap();
            let size = match st.kind {
                BoundKind::Hard => Some(rng.random_range(1..24)),
                BoundKind::Soft => rng.random_bool(0.9).then(|| rng.random_range(1..24)),
            };
            let before = format!("{m:?}");
            match m.set_bound_size(now, b, size) {
                Ok(()) => reached.resized += 1,
                Err(MemError::AdmissionRejected { .. }) => {
                    assert_eq!(format!("{m:?}"), before, "seed {seed}, step {step}: a refused grant changed the memory");
                    reached.refused += 1;
                }
                Err(MemError::BoundExhausted(_)) => {}
                Err(e) => panic!("seed {seed}, step {step}: unexpected {e}"),
            }
        } else if roll < 975 {
            let _ = m.lock_region(now, regions.first().copied().unwrap_or(RegionId(u32::MAX)));
        } else if roll < 990 && spaces.len() < 8 {
            if let Ok(c) = m.fork(now, s, "child", None, SharePolicy::Private) {
                let maps = maps.clone();
                spaces.push((c, maps));
            }
        } else {
            m.exit_space(now, s).unwrap();
            spaces.swap_remove(si);
        }
        for b in m.bounds() {
            let st = m.bound_stats(b).unwrap();
            assert!(st.size_pages.is_none_or(|size| st.charged_pages <= size), "seed {seed}, step {step}: {b:?} over its size: {st:?}");
            if let Some(p) = m.bound_parent(b) {
                let parent = m.bound_stats(p).unwrap();
                assert!(st.charged_pages <= parent.charged_pages, "seed {seed}, step {step}: {b:?} holds more than its parent");
                reached.nested_full += u64::from(parent.size_pages == Some(parent.charged_pages));
            }
        }
        let stats = m.stats();
        assert!(stats.global_free_frames + stats.locked_frames <= stats.total_frames, "seed {seed}, step {step}: {stats:?}");
    }
    for b in m.bounds() {
        let st = m.bound_stats(b).unwrap();
        reached.bound_evictions += st.evictions;
        reached.bound_unmaps += st.unmaps;
    }
    for (s, _) in spaces {
        m.exit_space(now, s).unwrap();
    }
    for b in m.bounds() {
        assert_eq!(charged(&m, b), 0, "seed {seed}: every space exited but {b:?} still counts pages");
    }
    reached
}

proptest! {
    #![proptest_config(common::seeded_config("bounds", 128))]

    #[test]
    fn no_bound_is_ever_exceeded_and_a_refused_grant_changes_nothing(seed in any::<u64>()) {
        bounded_scenario(seed);
    }
}

#[test]
fn the_random_bound_workloads_reach_every_mechanism() {
    let mut all = Reached::default();
    for seed in 0..48 {
        let r = bounded_scenario(seed);
        all.bound_evictions += r.bound_evictions;
        all.bound_unmaps += r.bound_unmaps;
        all.refused += r.refused;
        all.resized += r.resized;
        all.nested_full += r.nested_full;
    }
    let seen = format!("{all:?}");
    let Reached { bound_evictions, bound_unmaps, refused, resized, nested_full } = all;
    for (name, n) in
        [("evictions", bound_evictions), ("unmaps", bound_unmaps), ("refused", refused), ("resized", resized), ("nested_full", nested_full)]
    {
        assert!(n > 0, "no run reached {name}: {seen}");
    }
}
