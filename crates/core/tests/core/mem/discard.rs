//! Discarding private memory (madvise(MADV_DONTNEED) / free).

use super::*;

fn dev(m: &Memory) -> DeviceStats {
    m.device(DeviceId::SWAP).unwrap().stats()
}

#[test]
fn a_discarded_dirty_page_is_freed_without_writeback_and_comes_back_zero_filled() {
    for kind in [None, Some(ReservationKind::Hard), Some(ReservationKind::Firm), Some(ReservationKind::Limit)] {
        let mut m = machine(64, 1);
        let r = kind.map(|k| res(&mut m, "r", 16, k));
        let s = m.create_space("t", r).unwrap();
        let (_, v) = m.map_private(s, "heap", 8).unwrap();
        for i in 0..8 {
            wr(&mut m, Nanos::ZERO, s, v.offset(i));
        }
        let free_before = m.stats().global_free_frames;
        let charged = |m: &Memory| {
            r.map_or(m.stats().global_active_pages + m.stats().global_inactive_pages, |r| m.reservation_charged_pages(r).unwrap())
        };
        assert_eq!(charged(&m), 8, "{kind:?}");
        for i in 0..4 {
            m.discard(s, v.offset(i)).unwrap();
        }
        ok(&m);
        assert_eq!(m.space_stats(s).unwrap().resident_pages, 4, "{kind:?}");
        assert_eq!(charged(&m), 4, "the charge goes with the page ({kind:?})");
        assert!(!m.is_mapped(s, v), "{kind:?}");
        if matches!(kind, None | Some(ReservationKind::Limit)) {
            assert_eq!(m.stats().global_free_frames, free_before + 4, "frames back to the machine ({kind:?})");
        } else {
            assert_eq!(m.reservation_stats(r.unwrap()).unwrap().free_frames, 12, "frames back to the reservation ({kind:?})");
        }
        assert_eq!(dev(&m).writes, 0, "dirty data is dropped, not written back ({kind:?})");
        // The next touch is a zero-fill minor fault.
        assert!(matches!(rd(&mut m, Nanos::from_ms(1), s, v), Access::Minor { .. }), "{kind:?}");
        let st = m.space_stats(s).unwrap();
        assert_eq!((st.minor_faults, st.major_faults, st.pages_swapped_in), (9, 0, 0), "{kind:?}");
        ok(&m);
    }
}

#[test]
fn a_discarded_swapped_out_page_frees_its_slot_and_is_not_read_back() {
    let mut m = machine(64, 1);
    let r = res(&mut m, "r", 4, ReservationKind::Hard);
    let s = m.create_space("t", Some(r)).unwrap();
    let (_, v) = m.map_private(s, "heap", 12).unwrap();
    let mut now = Nanos::ZERO;
    for i in 0..12 {
        now += Nanos::from_ms(1);
        wr(&mut m, now, s, v.offset(i));
    }
    // Only 4 pages fit: the first 8 were written to swap.
    assert_eq!(m.swap_slots_used(), 8);
    let reads = dev(&m).reads;
    for i in 0..8 {
        m.discard(s, v.offset(i)).unwrap();
    }
    ok(&m);
    assert_eq!(m.swap_slots_used(), 0);
    now += Nanos::from_secs(1);
    for i in 0..4 {
        now += Nanos::from_ms(1);
        assert!(matches!(rd(&mut m, now, s, v.offset(i)), Access::Minor { .. }), "page {i}");
    }
    assert_eq!(dev(&m).reads, reads, "no device read for a discarded page");
    assert_eq!(m.space_stats(s).unwrap().pages_swapped_in, 0);
    ok(&m);
}

#[test]
fn shared_and_copy_on_write_pages_cannot_be_discarded() {
    let mut m = machine(64, 1);
    let s = m.create_space("t", None).unwrap();
    let (_, v) = m.map_private(s, "heap", 4).unwrap();
    let shm = m.create_shared("shm", RegionKind::SharedAnon, 4, SharePolicy::Global).unwrap();
    let vs = m.map_shared(Nanos::ZERO, s, shm, true).unwrap();
    wr(&mut m, Nanos::ZERO, s, vs);
    assert_eq!(m.discard(s, vs), Err(MemError::NotDiscardable { space: s.0, vpn: vs.0 }));
    assert!(m.is_mapped(s, vs), "a refused discard changes nothing");
    m.fork(Nanos::ZERO, s, "child", None, SharePolicy::Private).unwrap();
    assert!(matches!(m.discard(s, v), Err(MemError::NotDiscardable { .. })));
    assert!(matches!(m.discard(s, Vpn(1000)), Err(MemError::Unmapped { .. })));
    ok(&m);
}
