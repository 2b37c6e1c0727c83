//! Page replacement and reservations.

use super::*;

#[test]
fn second_chance_evicts_in_fifo_order_but_spares_a_page_referenced_again() {
    let mut m = machine(64, 1);
    let r = res(&mut m, "r", 3, ReservationKind::Hard);
    let s = m.create_space("a", Some(r)).unwrap();
    let (reg, v) = m.map_private(s, "data", 6).unwrap();
    let t = Nanos::ZERO;
    for p in 0..3 {
        assert!(matches!(rd(&mut m, t, s, v.offset(p)), Access::Minor { .. }), "zero-fill");
    }
    // All three were referenced once: FIFO, the oldest goes.
    rd(&mut m, t, s, v.offset(3));
    assert!(!m.is_resident(reg, 0));
    // Page 1 is referenced again; page 2 is not: page 2 goes although page 1 is older.
    assert!(rd(&mut m, t, s, v.offset(1)).is_hit());
    rd(&mut m, t, s, v.offset(4));
    let resident: Vec<u32> = (0..6).filter(|&p| m.is_resident(reg, p)).collect();
    assert_eq!(resident, vec![1, 3, 4]);
    ok(&m);
}

#[test]
fn hard_reservation_evicts_its_own_pages_and_never_exceeds_its_size() {
    let mut m = machine(64, 1);
    let r = res(&mut m, "r", 4, ReservationKind::Hard);
    let a = m.create_space("a", Some(r)).unwrap();
    let b = m.create_space("b", None).unwrap();
    let (_, va) = m.map_private(a, "data", 10).unwrap();
    let (breg, vb) = m.map_private(b, "data", 8).unwrap();
    let mut now = Nanos::ZERO;
    for p in 0..8 {
        wr(&mut m, now, b, vb.offset(p));
    }
    let global_free = m.stats().global_free_frames;
    for pass in 0..2 {
        for p in 0..10 {
            now += Nanos::from_ms(1);
            let acc = wr(&mut m, now, a, va.offset(p));
            if pass == 1 {
                assert!(matches!(acc, Access::Major { .. }), "page {p} was swapped out");
            }
            if let Access::Major { ready_at, .. } = acc {
                now = ready_at;
            }
            let st = m.reservation_stats(r).unwrap();
            assert!(st.frames_held <= 4 && st.borrowed_frames == 0, "{st:?}");
        }
    }
    assert_eq!(m.stats().global_free_frames, global_free, "free memory elsewhere is never touched");
    assert!((0..8).all(|p| m.is_resident(breg, p)), "other tasks' pages are never touched");
    let st = m.reservation_stats(r).unwrap();
    assert_eq!(st.evictions, 16);
    assert_eq!(st.writebacks, 16, "every victim was dirty");
    assert_eq!(m.space_stats(a).unwrap().resident_pages, 4);
    ok(&m);
}

#[test]
fn firm_reservation_borrows_free_pages_and_returns_them_under_pressure() {
    let mut m = machine(16, 1);
    let r = res(&mut m, "firm", 4, ReservationKind::Firm);
    let a = m.create_space("a", Some(r)).unwrap();
    let b = m.create_space("b", None).unwrap();
    let (_, va) = m.map_private(a, "data", 10).unwrap();
    let (_, vb) = m.map_private(b, "data", 13).unwrap();
    for p in 0..10 {
        wr(&mut m, Nanos::ZERO, a, va.offset(p));
    }
    let st = m.reservation_stats(r).unwrap();
    assert_eq!((st.borrowed_frames, st.frames_held, st.evictions), (6, 10, 0), "borrowed instead of evicting");
    assert_eq!(m.stats().global_free_frames, 6);
    let mut now = Nanos::ZERO;
    for p in 0..12 {
        now += Nanos::from_ms(1);
        wr(&mut m, now, b, vb.offset(p));
        ok(&m);
    }
    let st = m.reservation_stats(r).unwrap();
    assert_eq!((st.borrowed_frames, st.frames_held, st.evictions), (0, 4, 6), "gave every borrowed page back");
    assert_eq!(m.space_stats(b).unwrap().resident_pages, 12);
    // With nothing left to take back, the global LRU evicts unreserved pages; the firm
    // reservation keeps its size.
    wr(&mut m, now, b, vb.offset(12));
    assert_eq!(m.stats().global_evictions, 1);
    assert_eq!(m.reservation_stats(r).unwrap().frames_held, 4);
    ok(&m);
}

#[test]
fn admission_control_rejects_overcommitted_reservations() {
    let cfg = MemConfig { unreserved_min_frames: 10, min_reservation_pages: 8, ..MemConfig::with_frames(100) };
    let mut m = Memory::new(cfg, DeviceSpec::zram()).unwrap();
    let spec = |pages| ReservationSpec { name: "r".into(), pages, kind: ReservationKind::Hard };
    m.create_reservation(Nanos::ZERO, spec(50)).unwrap();
    let err = m.create_reservation(Nanos::ZERO, spec(41)).unwrap_err();
    assert!(matches!(err, MemError::AdmissionRejected { available: 40, .. }), "{err}");
    assert!(err.to_string().contains("40 of 100 frames are uncommitted"), "{err}");
    m.create_reservation(Nanos::ZERO, spec(40)).unwrap();
    assert!(matches!(m.create_reservation(Nanos::ZERO, spec(8)), Err(MemError::AdmissionRejected { .. })));
    assert!(matches!(m.create_reservation(Nanos::ZERO, spec(7)), Err(MemError::ReservationTooSmall { .. })));
    assert_eq!(m.stats().committed_frames, 90);
    ok(&m);
}

#[test]
fn global_lru_promotes_referenced_pages_and_evicts_the_inactive_head() {
    let mut m = machine(4, 1);
    let s = m.create_space("a", None).unwrap();
    let (reg, v) = m.map_private(s, "data", 6).unwrap();
    for p in 0..5 {
        rd(&mut m, Nanos::ZERO, s, v.offset(p));
    }
    assert!(!m.is_resident(reg, 0), "all equally referenced: the oldest goes");
    assert!(rd(&mut m, Nanos::ZERO, s, v.offset(1)).is_hit());
    rd(&mut m, Nanos::ZERO, s, v.offset(5));
    let resident: Vec<u32> = (0..6).filter(|&p| m.is_resident(reg, p)).collect();
    assert_eq!(resident, vec![1, 3, 4, 5], "page 1 was promoted, page 2 demoted and evicted");
    assert_eq!(m.stats().global_evictions, 2);
    ok(&m);
}
