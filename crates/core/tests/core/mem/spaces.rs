//! Address spaces: fork, exit, errors.

use super::*;

#[test]
fn fork_shares_pages_until_one_side_writes_them() {
    let mut m = machine(64, 1);
    let parent = m.create_space("parent", None).unwrap();
    let (data, v) = m.map_private(parent, "data", 4).unwrap();
    for p in 0..4 {
        wr(&mut m, Nanos::ZERO, parent, v.offset(p));
    }
    let child = m.fork(Nanos::ZERO, parent, "child", None, SharePolicy::Spc).unwrap();
    assert!(matches!(rd(&mut m, Nanos::ZERO, child, v.offset(0)), Access::Minor { .. }), "maps the parent's page");
    assert_eq!(m.space_stats(child).unwrap().cow_copies, 0);
    assert!(!matches!(wr(&mut m, Nanos::ZERO, child, v.offset(1)), Access::Major { .. }));
    assert_eq!(m.space_stats(child).unwrap().cow_copies, 1, "writing a shared page copies it");
    assert!(m.is_resident(data, 1) && m.is_mapped(parent, v.offset(1)), "the parent's copy is untouched");
    // The parent is now the only user of page 1: it takes it over without copying.
    wr(&mut m, Nanos::ZERO, parent, v.offset(1));
    assert_eq!(m.space_stats(parent).unwrap().cow_copies, 0);
    // Page 2 is still shared: the parent's write copies it.
    wr(&mut m, Nanos::ZERO, parent, v.offset(2));
    assert_eq!(m.space_stats(parent).unwrap().cow_copies, 1);
    assert!(rd(&mut m, Nanos::ZERO, parent, v.offset(3)).is_hit(), "reads stay mapped");
    ok(&m);
    m.exit_space(Nanos::ZERO, child).unwrap();
    m.exit_space(Nanos::ZERO, parent).unwrap();
    assert_eq!(m.stats().global_free_frames, 64, "every frame came back");
    ok(&m);
}

#[test]
fn exit_returns_private_frames_and_conserved_frames() {
    let Two { mut m, r, s, shm, vs, vp } = two(SharePolicy::Spc, 4);
    let t = Nanos::ZERO;
    wr(&mut m, t, s[0], vs[0]);
    rd(&mut m, t, s[1], vs[1]);
    wr(&mut m, t, s[1], vp[1]);
    m.exit_space(t, s[1]).unwrap();
    let sb = m.reservation_stats(r[1]).unwrap();
    assert_eq!((sb.free_frames, sb.conserved_frames, sb.charged_pages), (4, 0, 0));
    assert_eq!(m.charged_to(shm, 0), vec![Some(r[0])]);
    assert!(matches!(m.access(t, s[1], vs[1], RefKind::Read), Err(MemError::NoSuchSpace(_))));
    m.exit_space(t, s[0]).unwrap();
    assert!(!m.is_resident(shm, 0), "nobody maps it: swapped out, the owner gets its frame back");
    assert_eq!(m.reservation_stats(r[0]).unwrap().free_frames, 4);
    ok(&m);
}

#[test]
fn errors_say_what_is_wrong() {
    let mut m = machine(8, 1);
    let s = m.create_space("a", None).unwrap();
    let (_, v) = m.map_private(s, "p", 2).unwrap();
    let e = m.access(Nanos::ZERO, s, v.offset(2), RefKind::Read).unwrap_err();
    assert!(e.to_string().contains("not mapped"), "{e}");
    let f = m.create_shared("f", RegionKind::SharedFile { device: DeviceId::SWAP }, 1, SharePolicy::Global).unwrap();
    let vf = m.map_shared(Nanos::ZERO, s, f, false).unwrap();
    assert!(matches!(m.access(Nanos::ZERO, s, vf, RefKind::Write), Err(MemError::ReadOnly { .. })));
    assert!(matches!(m.map_shared(Nanos::ZERO, s, f, false), Err(MemError::AlreadyMapped { .. })));
    assert!(matches!(m.create_space("x", Some(ResId(3))), Err(MemError::NoSuchReservation(3))));
    let bad = MemConfig { page_bytes: 1000, ..MemConfig::default() };
    assert!(Memory::new(bad, DeviceSpec::hdd()).unwrap_err().to_string().contains("power of two"));
    // A hard reservation smaller than what one fault needs at once says to enlarge it.
    let r = res(&mut m, "tiny", 1, ReservationKind::Hard);
    let c = m.create_space("c", Some(r)).unwrap();
    let (_, vc) = m.map_private(c, "p", 1).unwrap();
    m.access(Nanos::ZERO, c, vc, RefKind::Write).unwrap();
    let child = m.fork(Nanos::ZERO, c, "child", Some(r), SharePolicy::Private).unwrap();
    // Copy-on-write needs the shared page and a new one at once: two pages in a 1-page pool.
    let e = m.access(Nanos::ZERO, child, vc, RefKind::Write).unwrap_err();
    assert!(e.to_string().contains("enlarge"), "{e}");
    ok(&m);
}
