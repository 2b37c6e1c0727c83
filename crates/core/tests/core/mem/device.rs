//! The swap device and its I/O.

use super::*;

#[test]
fn two_simultaneous_reads_complete_one_after_the_other() {
    let mut d = Device::new(DeviceSpec::hdd());
    let svc = d.spec().service_time(IoOp::Read, 4096);
    let first = d.submit(Nanos::ZERO, IoOp::Read, 4096);
    let second = d.submit(Nanos::ZERO, IoOp::Read, 4096);
    assert_eq!((first, second), (svc, svc + svc));
    assert_eq!(d.stats().queued, svc);

    // The same through the model: two tasks fault file pages at the same instant.
    let mut m = machine(64, 1);
    let file = m.create_shared("lib", RegionKind::SharedFile { device: DeviceId::SWAP }, 8, SharePolicy::Global).unwrap();
    let a = m.create_space("a", None).unwrap();
    let b = m.create_space("b", None).unwrap();
    let va = m.map_shared(Nanos::ZERO, a, file, false).unwrap();
    let vb = m.map_shared(Nanos::ZERO, b, file, false).unwrap();
    let svc = DeviceSpec::slow_ssd().service_time(IoOp::Read, 4096);
    let t = Nanos::from_ms(1);
    let ra = rd(&mut m, t, a, va.offset(0));
    let rb = rd(&mut m, t, b, vb.offset(5));
    assert!(matches!(ra, Access::Major { ready_at, refault: false, .. } if ready_at == t + svc));
    assert!(matches!(rb, Access::Major { ready_at, .. } if ready_at == t + svc + svc));
    // A third task touching page 0 while its read is in flight waits for the same read.
    let c = m.create_space("c", None).unwrap();
    let vc = m.map_shared(t, c, file, false).unwrap();
    assert!(matches!(rd(&mut m, t, c, vc.offset(0)), Access::Major { ready_at, .. } if ready_at == t + svc));
    assert_eq!(m.device(DeviceId::SWAP).unwrap().stats().reads, 2);
    ok(&m);
}

#[test]
fn a_dirty_victim_is_written_back_ahead_of_the_read() {
    let mut m = machine(64, 1);
    let file = m.create_shared("f", RegionKind::SharedFile { device: DeviceId::SWAP }, 2, SharePolicy::Spc).unwrap();
    let r = res(&mut m, "r", 1, ReservationKind::Hard);
    let s = m.create_space("a", Some(r)).unwrap();
    let (_, vp) = m.map_private(s, "p", 1).unwrap();
    let vf = m.map_shared(Nanos::ZERO, s, file, false).unwrap();
    wr(&mut m, Nanos::ZERO, s, vp);
    let spec = DeviceSpec::slow_ssd();
    let t = Nanos::from_ms(1);
    let acc = rd(&mut m, t, s, vf);
    let expect = t + spec.service_time(IoOp::Write, 4096) + spec.service_time(IoOp::Read, 4096);
    assert!(matches!(acc, Access::Major { ready_at, .. } if ready_at == expect), "{acc:?}");
    let st = m.device(DeviceId::SWAP).unwrap().stats();
    assert_eq!((st.writes, st.reads), (1, 1));
    assert_eq!(m.space_stats(s).unwrap().pages_swapped_out, 1);
    // Swapping the private page back in is a major fault and a refault.
    let t2 = Nanos::from_ms(5);
    assert!(matches!(wr(&mut m, t2, s, vp), Access::Major { refault: true, .. }));
    ok(&m);
}

#[test]
fn readahead_grows_on_sequential_swap_ins_and_stays_off_for_random_ones() {
    let mut m = machine(64, 8);
    let file = m.create_shared("lib", RegionKind::SharedFile { device: DeviceId::SWAP }, 32, SharePolicy::Global).unwrap();
    let s = m.create_space("a", None).unwrap();
    let v = m.map_shared(Nanos::ZERO, s, file, false).unwrap();
    let spec = DeviceSpec::slow_ssd();
    let mut now = Nanos::ZERO;
    let mut requests = Vec::new();
    for p in 0..16 {
        match rd(&mut m, now, s, v.offset(p)) {
            Access::Major { ready_at, .. } => {
                let pages = (0..32).filter(|&q| m.is_resident(file, q)).count();
                requests.push((p, pages));
                now = ready_at;
            }
            Access::Minor { .. } => {}
            Access::Hit => panic!("page {p} was never mapped"),
        }
    }
    // Windows 1, 2 (aligned pair 0-1, page 0 already in), 2, 4, 8 as used readahead pages accrue.
    assert_eq!(requests, vec![(0, 1), (1, 2), (2, 4), (4, 8), (8, 16)]);
    let dev = m.device(DeviceId::SWAP).unwrap().stats();
    assert_eq!((dev.reads, dev.bytes_read), (5, 16 * 4096));
    assert!(now >= spec.service_time(IoOp::Read, 8 * 4096));
    // The next swap-in still gets the window the used readahead earned (8 pages: 16-23);
    // then, with none of those used and no adjacent fault, random swap-ins read one page each.
    for p in [20, 30, 26] {
        assert!(matches!(rd(&mut m, now, s, v.offset(p)), Access::Major { .. }));
    }
    assert_eq!(m.device(DeviceId::SWAP).unwrap().stats().bytes_read, (16 + 8 + 1 + 1) * 4096);
    let st = m.space_stats(s).unwrap();
    assert_eq!((st.pages_swapped_in, st.major_faults, st.minor_faults), (26, 8, 11));
    ok(&m);
}
