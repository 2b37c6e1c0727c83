//! Memory-limited groups (cgroup memory.max / high / min / low).

use super::*;

use proptest::prelude::*;

fn limit(m: &mut Memory, name: &str, max: u64) -> ResId {
    res(m, name, max, ReservationKind::Limit)
}

fn charged(m: &Memory, r: ResId) -> u64 {
    m.reservation_stats(r).unwrap().charged_pages
}

#[test]
fn a_limit_group_never_charges_more_than_its_max_and_sets_nothing_aside() {
    let mut m = machine(256, 1);
    let g = limit(&mut m, "g", 40);
    assert_eq!(m.stats().committed_frames, 0);
    let s = m.create_space("t", Some(g)).unwrap();
    let (_, v) = m.map_private(s, "heap", 100).unwrap();
    let mut now = Nanos::ZERO;
    for i in 0..100 {
        now += Nanos::from_us(10);
        wr(&mut m, now, s, v.offset(i));
        assert!(charged(&m, g) <= 40);
    }
    ok(&m);
    assert_eq!(charged(&m, g), 40);
    // Free memory was plentiful: the group evicted its own pages anyway.
    assert!(m.reservation_stats(g).unwrap().evictions >= 60);
    assert_eq!(m.stats().reserved_physical_frames, 0);
}

#[test]
fn global_reclaim_takes_from_groups_in_proportion_so_a_growing_group_can_grow() {
    // Memory full with two equal groups; `a` keeps touching new pages. Taking victims
    // in proportion to size (as Linux scans cgroups) lets `a` grow at `b`'s expense; a
    // largest-first rule would pin `a` at `b`'s size forever.
    let mut m = machine(200, 1);
    let (a, b) = (limit(&mut m, "a", 200), limit(&mut m, "b", 200));
    let (sa, sb) = (m.create_space("ta", Some(a)).unwrap(), m.create_space("tb", Some(b)).unwrap());
    let (_, va) = m.map_private(sa, "heap", 400).unwrap();
    let (_, vb) = m.map_private(sb, "heap", 100).unwrap();
    let mut now = Nanos::ZERO;
    for i in 0..100 {
        now += Nanos::from_us(10);
        wr(&mut m, now, sa, va.offset(i));
        wr(&mut m, now, sb, vb.offset(i));
    }
    assert_eq!((charged(&m, a), charged(&m, b)), (100, 100));
    for i in 100..400 {
        now += Nanos::from_ms(1);
        wr(&mut m, now, sa, va.offset(i));
    }
    ok(&m);
    assert!(charged(&m, a) >= 150, "a holds {} of 200 frames", charged(&m, a));
    assert_eq!(charged(&m, a) + charged(&m, b), 200);
}

#[test]
fn lowering_max_evicts_down_to_it_and_writes_dirty_pages_back() {
    let mut m = machine(256, 1);
    let g = limit(&mut m, "g", 100);
    let s = m.create_space("t", Some(g)).unwrap();
    let (_, v) = m.map_private(s, "heap", 100).unwrap();
    for i in 0..80 {
        wr(&mut m, Nanos::from_us(u64::from(i)), s, v.offset(i));
    }
    let writes_before = m.device(DeviceId::SWAP).unwrap().stats();
    m.set_reservation_size(Nanos::from_ms(1), g, 30).unwrap();
    ok(&m);
    assert_eq!(charged(&m, g), 30);
    assert_eq!(m.reservation_stats(g).unwrap().writebacks, 50);
    assert_ne!(m.device(DeviceId::SWAP).unwrap().stats(), writes_before);
    assert_eq!(m.stats().global_free_frames, 256 - 30);
    // Growing only allows more.
    m.set_reservation_size(Nanos::from_ms(2), g, 90).unwrap();
    assert_eq!(charged(&m, g), 30);
    assert!(m.set_reservation_size(Nanos::from_ms(2), g, 0).is_err());
    assert!(m.set_reservation_size(Nanos::from_ms(2), g, 257).is_err());
    ok(&m);
}

#[test]
fn above_high_a_group_reclaims_its_own_pages_first() {
    let mut m = machine(256, 1);
    let g = limit(&mut m, "g", 200);
    m.set_limit_protection(g, Some(20), None, None).unwrap();
    let s = m.create_space("t", Some(g)).unwrap();
    let (_, v) = m.map_private(s, "heap", 100).unwrap();
    for i in 0..100 {
        wr(&mut m, Nanos::from_us(u64::from(i)), s, v.offset(i));
    }
    ok(&m);
    assert_eq!(charged(&m, g), 20);
    assert_eq!(m.limit_protection(g).unwrap(), LimitProtection { high_pages: Some(20), min_pages: None, low_pages: None });
}

#[test]
fn min_protects_a_group_from_others_and_low_yields_only_as_a_last_resort() {
    // 64 frames; group a fills 40 pages, then group b faults 60.
    let run = |min: Option<u64>, low: Option<u64>| {
        let mut m = machine(64, 1);
        let a = limit(&mut m, "a", 64);
        let b = limit(&mut m, "b", 64);
        m.set_limit_protection(a, None, min, low).unwrap();
        let sa = m.create_space("a", Some(a)).unwrap();
        let sb = m.create_space("b", Some(b)).unwrap();
        let (_, va) = m.map_private(sa, "heap", 40).unwrap();
        let (_, vb) = m.map_private(sb, "heap", 60).unwrap();
        let mut now = Nanos::ZERO;
        for i in 0..40 {
            now += Nanos::from_us(1);
            rd(&mut m, now, sa, va.offset(i));
        }
        for i in 0..60 {
            now += Nanos::from_us(1);
            rd(&mut m, now, sb, vb.offset(i));
        }
        ok(&m);
        (charged(&m, a), charged(&m, b))
    };
    let (a, b) = run(None, None);
    assert!(a < 40, "unprotected pages are taken ({a}, {b})");
    assert_eq!(run(Some(40), None), (40, 24), "never below min: b recycles its own");
    // Low: b has unprotected pages of its own to reclaim, so a's stay.
    assert_eq!(run(None, Some(40)), (40, 24));
    // Both protected by low: the last resort takes from them anyway.
    let mut m = machine(32, 1);
    let a = limit(&mut m, "a", 64);
    m.set_limit_protection(a, None, None, Some(64)).unwrap();
    let b = limit(&mut m, "b", 64);
    m.set_limit_protection(b, None, None, Some(64)).unwrap();
    let sa = m.create_space("a", Some(a)).unwrap();
    let sb = m.create_space("b", Some(b)).unwrap();
    let (_, va) = m.map_private(sa, "heap", 40).unwrap();
    let (_, vb) = m.map_private(sb, "heap", 40).unwrap();
    for i in 0..32 {
        rd(&mut m, Nanos::from_us(u64::from(i)), sa, va.offset(i));
    }
    rd(&mut m, Nanos::from_ms(1), sb, vb);
    ok(&m);
    assert_eq!((charged(&m, a), charged(&m, b)), (31, 1));
    m.set_limit_protection(a, None, Some(31), None).unwrap();
    assert_eq!(m.access(Nanos::from_ms(2), sb, vb.offset(1), RefKind::Read).map(|_| ()), Ok(()));
    assert_eq!(charged(&m, a), 31, "min holds even when low would yield");
}

#[test]
fn limit_groups_reject_per_reservation_share_policies() {
    let mut m = machine(64, 1);
    let g = limit(&mut m, "g", 32);
    let s = m.create_space("t", Some(g)).unwrap();
    let spc = m.create_shared("shm", RegionKind::SharedAnon, 4, SharePolicy::Spc).unwrap();
    assert_eq!(m.map_shared(Nanos::ZERO, s, spc, true), Err(MemError::UnsupportedForLimit(g.0)));
    let glob = m.create_shared("g", RegionKind::SharedAnon, 4, SharePolicy::Global).unwrap();
    m.map_shared(Nanos::ZERO, s, glob, true).unwrap();
    ok(&m);
}

/// Random resizes of hard, firm and limit pools interleaved with random references by
/// spaces of each: every invariant holds and no limit group ever charges above its max.
fn resize_scenario(seed: u64) {
    let mut x = seed | 1;
    let mut rnd = move |n: u64| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % n
    };
    let mut m = machine(128, 4);
    let hard = res(&mut m, "hard", 16, ReservationKind::Hard);
    let firm = res(&mut m, "firm", 16, ReservationKind::Firm);
    let lims = [limit(&mut m, "l0", 30), limit(&mut m, "l1", 200)];
    let shared = m.create_shared("shm", RegionKind::SharedAnon, 24, SharePolicy::Private).unwrap();
    let pools = [None, Some(hard), Some(firm), Some(lims[0]), Some(lims[1]), Some(lims[1])];
    let mut spaces = Vec::new();
    for (k, p) in pools.iter().enumerate() {
        let s = m.create_space(&format!("s{k}"), *p).unwrap();
        let (_, v) = m.map_private(s, "heap", 60).unwrap();
        let sv = m.map_shared(Nanos::ZERO, s, shared, true).unwrap();
        spaces.push((s, v, sv));
    }
    let mut now = Nanos::ZERO;
    for step in 0..600 {
        now += Nanos::from_us(1 + rnd(400));
        match rnd(10) {
            0 => {
                let r = [hard, firm, lims[0], lims[1]][rnd(4) as usize];
                let _ = m.set_reservation_size(now, r, rnd(140));
            }
            2 => {
                let (s, v, _) = spaces[rnd(spaces.len() as u64) as usize];
                m.discard(s, v.offset(rnd(60) as u32)).unwrap_or_else(|e| panic!("seed {seed} step {step}: {e}"));
            }
            1 => {
                let r = lims[rnd(2) as usize];
                let o = |v: u64| (v < 80).then_some(v);
                m.set_limit_protection(r, o(rnd(160)), o(rnd(160)), o(rnd(160))).unwrap();
            }
            _ => {
                let (s, v, sv) = spaces[rnd(spaces.len() as u64) as usize];
                let vpn = if rnd(4) == 0 { sv.offset(rnd(24) as u32) } else { v.offset(rnd(60) as u32) };
                let kind = if rnd(2) == 0 { RefKind::Read } else { RefKind::Write };
                match m.access(now, s, vpn, kind) {
                    Ok(Access::Major { ready_at, .. }) if rnd(2) == 0 => now = now.max(ready_at),
                    Ok(_) | Err(MemError::OutOfMemory | MemError::ReservationExhausted(_)) => {}
                    Err(e) => panic!("seed {seed} step {step}: {e}"),
                }
            }
        }
        m.check_invariants().unwrap_or_else(|e| panic!("seed {seed} step {step}: {e}"));
        for &r in &lims {
            let st = m.reservation_stats(r).unwrap();
            assert!(st.charged_pages <= st.size_pages, "seed {seed} step {step}: {st:?}");
        }
    }
}

proptest! {
    #![proptest_config(common::seeded_config("mem", 128))]

    #[test]
    fn random_resizes_and_references_keep_every_invariant(seed in any::<u64>()) {
        resize_scenario(seed);
    }
}
