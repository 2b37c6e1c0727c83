//! Property tests of the memory model.

use super::*;

use proptest::prelude::*;
use rand::{Rng, SeedableRng};

const POLICIES: [SharePolicy; 6] =
    [SharePolicy::Global, SharePolicy::Private, SharePolicy::FirstTouch, SharePolicy::Spc, SharePolicy::Spel, SharePolicy::Auto];

fn check<A: FrameAllocator>(m: &Memory<A>, seed: u64, step: usize, what: &str) {
    if let Err(e) = m.check_invariants() {
        panic!("seed {seed}, step {step} ({what}): {e}");
    }
    let st = m.stats();
    let used: u64 = m.reservations().map(|r| m.reservation_stats(r).unwrap().frames_held).sum();
    assert!(st.global_free_frames + st.locked_frames + used <= st.total_frames, "seed {seed}, step {step}: frames not conserved: {st:?}");
    for r in m.reservations() {
        let s = m.reservation_stats(r).unwrap();
        if s.kind == ReservationKind::Hard {
            assert!(
                s.frames_held + s.locked_charge_pages <= s.size_pages && s.borrowed_frames == 0,
                "seed {seed}, step {step}: hard reservation {r:?} over its size: {s:?}"
            );
        }
    }
}

/// What a run reached, to check the generator exercises every mechanism.
#[derive(Default, Debug)]
pub(super) struct Reached {
    majors: u64,
    errors: u64,
    transfers: u64,
    spc_unmaps: u64,
    evictions: u64,
    borrowed: u64,
    lent: u64,
    locked: u64,
    cow_copies: u64,
    forks: u64,
    exits: u64,
    global_evictions: u64,
    discards: u64,
}

/// A random machine and workload from one seed; every step is checked.
fn scenario(seed: u64) -> Reached {
    scenario_on(seed, |cfg, dev| Memory::new(cfg, dev).unwrap()).0
}

/// [`scenario`] on the machine `make` builds (the frame allocator is its choice); returns the
/// machine after every space has exited.
pub(super) fn scenario_on<A: FrameAllocator>(seed: u64, make: impl FnOnce(MemConfig, DeviceSpec) -> Memory<A>) -> (Reached, Memory<A>) {
    let mut reached = Reached::default();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let cfg = MemConfig {
        readahead_pages: [1, 2, 4][rng.random_range(0..3)],
        reservation_inactive_percent: [33, 100][rng.random_range(0..2)],
        global_inactive_ratio: rng.random_range(1..3),
        ..MemConfig::with_frames(rng.random_range(24..72))
    };
    let dev = DeviceSpec::preset(DeviceSpec::PRESETS[rng.random_range(0..4)]).unwrap();
    let mut m = make(cfg, dev);
    let file_dev = m.add_device(DeviceSpec::fast_ssd()).unwrap();
    let mut ress = Vec::new();
    for i in 0..rng.random_range(1..4) {
        let kind = if rng.random_bool(0.5) { ReservationKind::Hard } else { ReservationKind::Firm };
        let spec = ReservationSpec { name: format!("r{i}"), pages: rng.random_range(3..14), kind };
        if let Ok(r) = m.create_reservation(Nanos::ZERO, spec) {
            ress.push(r);
        }
    }
    let mut regions = Vec::new();
    for _ in 0..rng.random_range(1..4) {
        let policy = POLICIES[rng.random_range(0..POLICIES.len())];
        let kind = if rng.random_bool(0.7) { RegionKind::SharedAnon } else { RegionKind::SharedFile { device: file_dev } };
        regions.push(m.create_shared("shm", kind, rng.random_range(1..10), policy).unwrap());
    }
    // (space, list of (first vpn, pages))
    let mut spaces: Vec<(AsId, Vec<(Vpn, u32)>)> = Vec::new();
    for i in 0..rng.random_range(2..6) {
        let res = if ress.is_empty() || rng.random_bool(0.25) { None } else { Some(ress[rng.random_range(0..ress.len())]) };
        let s = m.create_space(&format!("t{i}"), res).unwrap();
        let pages = rng.random_range(1..20);
        let (_, v) = m.map_private(s, "p", pages).unwrap();
        let mut maps = vec![(v, pages)];
        for &reg in &regions {
            if rng.random_bool(0.6) {
                if let Ok(v) = m.map_shared(Nanos::ZERO, s, reg, true) {
                    maps.push((v, m.region_pages(reg).unwrap()));
                }
            }
        }
        spaces.push((s, maps));
    }
    check(&m, seed, 0, "setup");
    let mut now = Nanos::ZERO;
    for step in 1..400 {
        now += Nanos(rng.random_range(0..200_000));
        let roll = rng.random_range(0..1000);
        if spaces.is_empty() {
            break;
        }
        let si = rng.random_range(0..spaces.len());
        let (s, ref maps) = spaces[si];
        let what;
        if roll < 30 {
            // maps[0] is the space's private memory (copy-on-write after a fork).
            let (v, pages) = maps[0];
            let vpn = v.offset(rng.random_range(0..pages));
            what = "discard";
            match m.discard(s, vpn) {
                Ok(()) => {
                    reached.discards += 1;
                    assert!(!m.is_mapped(s, vpn), "seed {seed}, step {step}: discarded page still mapped");
                }
                Err(MemError::NotDiscardable { .. }) => {}
                Err(e) => panic!("seed {seed}, step {step}: unexpected {e}"),
            }
        } else if roll < 940 {
            let (v, pages) = maps[rng.random_range(0..maps.len())];
            let kind = if rng.random_bool(0.3) { RefKind::Write } else { RefKind::Read };
            what = "access";
            match m.access(now, s, v.offset(rng.random_range(0..pages)), kind) {
                Ok(a) => reached.majors += u64::from(matches!(a, Access::Major { .. })),
                Err(MemError::ReservationExhausted(_) | MemError::OutOfMemory) => reached.errors += 1,
                Err(e) => panic!("seed {seed}, step {step}: unexpected {e}"),
            }
        } else if roll < 960 {
            what = "end_window";
            m.end_window(s).unwrap();
        } else if roll < 975 {
            what = "lock/resolve";
            let reg = regions[rng.random_range(0..regions.len())];
            let _ = m.lock_region(now, reg);
            let _ = m.resolve_auto(now, reg);
        } else if roll < 990 && spaces.len() < 8 {
            what = "fork";
            let res = if ress.is_empty() { None } else { Some(ress[rng.random_range(0..ress.len())]) };
            let policy = [SharePolicy::Private, SharePolicy::FirstTouch, SharePolicy::Spc][rng.random_range(0..3)];
            if let Ok(c) = m.fork(now, s, "child", res, policy) {
                reached.forks += 1;
                let maps = maps.clone();
                spaces.push((c, maps));
            }
        } else {
            what = "exit";
            reached.exits += 1;
            m.exit_space(now, s).unwrap();
            spaces.swap_remove(si);
        }
        check(&m, seed, step, what);
        for r in m.reservations() {
            let st = m.reservation_stats(r).unwrap();
            reached.borrowed += st.borrowed_frames;
            reached.lent += st.lent_frames;
        }
        reached.locked += m.stats().locked_frames;
    }
    for r in m.reservations() {
        let st = m.reservation_stats(r).unwrap();
        reached.transfers += st.ownership_transfers;
        reached.spc_unmaps += st.spc_unmaps;
        reached.evictions += st.evictions;
    }
    reached.global_evictions = m.stats().global_evictions;
    reached.cow_copies = spaces.iter().map(|(s, _)| m.space_stats(*s).unwrap().cow_copies).sum();
    for (s, _) in spaces {
        m.exit_space(now, s).unwrap();
        check(&m, seed, usize::MAX, "final exit");
    }
    // Everything unmapped: no reservation accounts a page any more except first-touch
    // charges and conserved pages of... nothing: all private memory is free again.
    for r in m.reservations() {
        let st = m.reservation_stats(r).unwrap();
        assert_eq!(st.conserved_frames, 0, "seed {seed}: {st:?}");
    }
    (reached, m)
}

proptest! {
    #![proptest_config(common::seeded_config("mem", 256))]

    #[test]
    fn random_workloads_keep_every_invariant(seed in any::<u64>()) {
        scenario(seed);
    }
}

#[test]
fn the_random_workloads_reach_every_mechanism() {
    let mut all = Reached::default();
    for seed in 0..64 {
        let r = scenario(seed);
        all.majors += r.majors;
        all.errors += r.errors;
        all.transfers += r.transfers;
        all.spc_unmaps += r.spc_unmaps;
        all.evictions += r.evictions;
        all.borrowed += r.borrowed;
        all.lent += r.lent;
        all.locked += r.locked;
        all.cow_copies += r.cow_copies;
        all.forks += r.forks;
        all.exits += r.exits;
        all.global_evictions += r.global_evictions;
        all.discards += r.discards;
    }
    println!("{all:?}");
    let Reached {
        majors,
        transfers,
        spc_unmaps,
        evictions,
        borrowed,
        lent,
        locked,
        cow_copies,
        forks,
        exits,
        global_evictions,
        discards,
        ..
    } = all;
    for (name, n) in [
        ("majors", majors),
        ("transfers", transfers),
        ("spc_unmaps", spc_unmaps),
        ("evictions", evictions),
        ("borrowed", borrowed),
        ("lent", lent),
        ("locked", locked),
        ("cow_copies", cow_copies),
        ("forks", forks),
        ("exits", exits),
        ("global_evictions", global_evictions),
        ("discards", discards),
    ] {
        assert!(n > 0, "no run reached {name}");
    }
}
