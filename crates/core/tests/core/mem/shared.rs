//! Shared pages under each sharing policy.

use super::*;

#[test]
fn spc_keeps_a_shared_page_resident_when_its_owner_evicts_it_and_transfers_ownership() {
    let Two { mut m, r, s, shm, vs, vp } = two(SharePolicy::Spc, 4);
    let t = Nanos::ZERO;
    wr(&mut m, t, s[0], vs[0]);
    assert_eq!(m.holder_of(shm, 0), Some(Some(r[0])));
    assert!(matches!(rd(&mut m, t, s[1], vs[1]), Access::Minor { .. }));
    let st = m.reservation_stats(r[1]).unwrap();
    assert_eq!((st.conserved_frames, st.free_frames, st.frames_held), (1, 3, 4), "b conserves a page");
    // a fills its reservation with private pages; the shm page is its oldest victim.
    for p in 0..4 {
        wr(&mut m, t, s[0], vp[0].offset(p));
    }
    assert!(m.is_resident(shm, 0), "unmapped, not evicted");
    assert!(!m.is_mapped(s[0], vs[0]));
    assert_eq!(m.holder_of(shm, 0), Some(Some(r[1])), "ownership moved to b");
    let (sa, sb) = (m.reservation_stats(r[0]).unwrap(), m.reservation_stats(r[1]).unwrap());
    assert_eq!((sa.ownership_transfers, sa.evictions, sb.conserved_frames), (1, 0, 0));
    assert!(rd(&mut m, t, s[1], vs[1]).is_hit(), "b never notices");
    // a touching it again is a minor fault: it conserves a page now.
    assert!(matches!(rd(&mut m, t, s[0], vs[0]), Access::Minor { .. }));
    assert_eq!(m.reservation_stats(r[0]).unwrap().conserved_frames, 1);
    // As a non-owner, a's eviction of the page only unmaps it and frees its conserved page.
    for p in 4..8 {
        wr(&mut m, t, s[0], vp[0].offset(p));
    }
    assert!(m.is_resident(shm, 0) && !m.is_mapped(s[0], vs[0]));
    let sa = m.reservation_stats(r[0]).unwrap();
    assert_eq!((sa.conserved_frames, sa.spc_unmaps), (0, 2));
    assert!(rd(&mut m, t, s[1], vs[1]).is_hit());
    assert_eq!(m.space_stats(s[1]).unwrap().major_faults, 0);
    ok(&m);
}

#[test]
fn first_touch_lets_the_owner_evict_a_page_another_task_uses() {
    for (policy, interferes) in [(SharePolicy::FirstTouch, true), (SharePolicy::Spc, false)] {
        let Two { mut m, r, s, shm, vs, vp } = two(policy, 4);
        let t = Nanos::ZERO;
        wr(&mut m, t, s[0], vs[0]);
        rd(&mut m, t, s[1], vs[1]);
        if policy == SharePolicy::FirstTouch {
            assert_eq!(m.reservation_stats(r[1]).unwrap().charged_pages, 0, "the non-owner is not charged");
        }
        assert!(rd(&mut m, t, s[1], vs[1]).is_hit(), "b keeps using it");
        for p in 0..4 {
            wr(&mut m, t, s[0], vp[0].offset(p));
        }
        let b_next = rd(&mut m, Nanos::from_ms(1), s[1], vs[1]);
        assert_eq!(matches!(b_next, Access::Major { .. }), interferes, "{policy}: {b_next:?}");
        assert!(m.is_resident(shm, 0));
        if policy == SharePolicy::FirstTouch {
            // As a memory cgroup does with the swap entry's record: b faulted the page back
            // in, but it is a's again, so a can evict it again.
            assert_eq!(m.charged_to(shm, 0), vec![Some(r[0])], "the owner stays the owner");
            assert_eq!(m.reservation_stats(r[1]).unwrap().charged_pages, 0);
        }
        ok(&m);
    }
}

#[test]
fn no_sp_mgmt_duplicates_cost_no_frames_but_any_sharer_evicts_for_everyone() {
    let Two { mut m, r, s, shm, vs, vp } = two(SharePolicy::Private, 4);
    let t = Nanos::ZERO;
    wr(&mut m, t, s[0], vs[0]);
    rd(&mut m, t, s[1], vs[1]);
    assert_eq!(m.charged_to(shm, 0), vec![Some(r[0]), Some(r[1])]);
    let sb = m.reservation_stats(r[1]).unwrap();
    assert_eq!((sb.charged_pages, sb.frames_held), (1, 3), "b accounts the page but returned its frame");
    assert_eq!(m.stats().reserved_physical_frames, 7);
    // b fills its reservation; the shm page is its oldest: swapped out under a too.
    for p in 0..4 {
        wr(&mut m, t, s[1], vp[1].offset(p));
    }
    assert!(!m.is_resident(shm, 0) && !m.is_mapped(s[0], vs[0]));
    assert_eq!(m.reservation_stats(r[0]).unwrap().lent_frames, 1, "a lost the frame, keeps the slot");
    assert!(matches!(rd(&mut m, Nanos::from_ms(1), s[0], vs[0]), Access::Major { .. }));
    ok(&m);
}

#[test]
fn spel_admission_needs_each_sharer_to_exceed_the_locked_size() {
    let mut m = machine(64, 1);
    let shm = m.create_shared("shm", RegionKind::SharedAnon, 8, SharePolicy::Spel).unwrap();
    let r = res(&mut m, "r", 8, ReservationKind::Hard);
    let s = m.create_space("a", Some(r)).unwrap();
    m.map_shared(Nanos::ZERO, s, shm, true).unwrap();
    let err = m.lock_region(Nanos::ZERO, shm).unwrap_err();
    assert!(matches!(err, MemError::SpelAdmission { need: 9, .. }), "{err}");
    assert_eq!(m.effective_policy(shm), Some(SharePolicy::Spc), "nothing changed");
    let other = m.create_shared("spc", RegionKind::SharedAnon, 2, SharePolicy::Spc).unwrap();
    assert!(matches!(m.lock_region(Nanos::ZERO, other), Err(MemError::NotLockable { .. })));
    ok(&m);
}

#[test]
fn spel_locked_pages_are_never_evicted_and_duplicates_are_freed() {
    let mut m = machine(64, 1);
    let shm = m.create_shared("shm", RegionKind::SharedAnon, 8, SharePolicy::Spel).unwrap();
    let r = [res(&mut m, "r1", 12, ReservationKind::Hard), res(&mut m, "r2", 10, ReservationKind::Hard)];
    let s = [m.create_space("a", Some(r[0])).unwrap(), m.create_space("b", Some(r[1])).unwrap()];
    let vs: Vec<Vpn> = s.iter().map(|&x| m.map_shared(Nanos::ZERO, x, shm, true).unwrap()).collect();
    let (_, vp) = m.map_private(s[0], "p", 30).unwrap();
    // a has already used part of the region (under SPC until locked).
    wr(&mut m, Nanos::ZERO, s[0], vs[0]);
    m.lock_region(Nanos::ZERO, shm).unwrap();
    let st = m.stats();
    assert_eq!((st.locked_frames, st.reserved_physical_frames, st.committed_frames), (8, 14, 14), "12 + 10 − 8");
    assert_eq!(m.reservation_stats(r[0]).unwrap().locked_charge_pages, 8);
    let mut now = Nanos::ZERO;
    for round in 0..3 {
        for p in 0..30 {
            now += Nanos::from_ms(1);
            if let Access::Major { ready_at, .. } = wr(&mut m, now, s[0], vp.offset(p)) {
                now = ready_at;
            }
            let sa = m.reservation_stats(r[0]).unwrap();
            assert!(sa.frames_held + sa.locked_charge_pages <= 12);
        }
        for p in 0..8 {
            let acc = rd(&mut m, now, s[1], vs[1].offset(p));
            assert!(!matches!(acc, Access::Major { .. }), "round {round}: locked page {p} was evicted");
            assert!(m.is_resident(shm, p));
        }
    }
    assert_eq!(m.space_stats(s[1]).unwrap().major_faults, 0);
    // A reservation joining later passes the same test and gives up the same size.
    let r3 = res(&mut m, "r3", 9, ReservationKind::Hard);
    let c = m.create_space("c", Some(r3)).unwrap();
    m.map_shared(now, c, shm, false).unwrap();
    assert_eq!(m.stats().reserved_physical_frames, 14 + 1);
    let r4 = res(&mut m, "r4", 8, ReservationKind::Hard);
    let d = m.create_space("d", Some(r4)).unwrap();
    assert!(matches!(m.map_shared(now, d, shm, false), Err(MemError::SpelAdmission { .. })));
    ok(&m);
}

#[test]
fn auto_picks_spel_when_max_is_below_n_times_avg_and_spc_otherwise() {
    for (touched, expect) in [(10u32, SharePolicy::Spel), (3, SharePolicy::Spc)] {
        let mut m = machine(128, 1);
        let shm = m.create_shared("shm", RegionKind::SharedAnon, 10, SharePolicy::Auto).unwrap();
        let mut spaces = Vec::new();
        for i in 0..2 {
            let r = res(&mut m, &format!("r{i}"), 16, ReservationKind::Hard);
            let s = m.create_space("t", Some(r)).unwrap();
            let v = m.map_shared(Nanos::ZERO, s, shm, true).unwrap();
            spaces.push((s, v));
        }
        assert!(matches!(m.resolve_auto(Nanos::ZERO, shm), Err(MemError::NoUsageMeasured(_))));
        for job in 0..4u32 {
            for &(s, v) in &spaces {
                for k in 0..touched {
                    rd(&mut m, Nanos::ZERO, s, v.offset((job * touched + k) % 10));
                }
                m.end_window(s).unwrap();
            }
        }
        let usage = m.region_usage(shm).unwrap();
        assert!(usage.iter().all(|(_, u)| u.windows == 4 && u.pages_max == u64::from(touched)));
        let d = m.resolve_auto(Nanos::ZERO, shm).unwrap();
        assert_eq!((d.chosen, d.n, d.max_pages), (expect, 2, 10), "{d:?}");
        assert!((d.avg_pages - f64::from(touched)).abs() < 1e-9);
        assert_eq!(m.effective_policy(shm), Some(expect));
        ok(&m);
    }
}
