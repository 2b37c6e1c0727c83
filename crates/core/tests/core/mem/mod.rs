//! Behaviour of the page-level memory model (crate::mem) as its callers see it.

use critmem_core::mem::*;
use critmem_core::Nanos;

use crate::common;

const MB: u64 = 1 << 20;

fn machine(frames: u32, readahead: u32) -> Memory {
    let cfg = MemConfig {
        readahead_pages: readahead,
        // Every invariant after every operation, in release builds too.
        check_every_operation: true,
        ..MemConfig::with_frames(frames)
    };
    Memory::new(cfg, DeviceSpec::slow_ssd()).unwrap()
}

fn res<A: FrameAllocator>(m: &mut Memory<A>, name: &str, pages: u64, kind: ReservationKind) -> ResId {
    m.create_reservation(Nanos::ZERO, ReservationSpec { name: name.into(), pages, kind }).unwrap()
}

fn rd<A: FrameAllocator>(m: &mut Memory<A>, t: Nanos, s: AsId, v: Vpn) -> Access {
    m.access(t, s, v, RefKind::Read).unwrap()
}

fn wr<A: FrameAllocator>(m: &mut Memory<A>, t: Nanos, s: AsId, v: Vpn) -> Access {
    m.access(t, s, v, RefKind::Write).unwrap()
}

fn ok<A: FrameAllocator>(m: &Memory<A>) {
    m.check_invariants().unwrap_or_else(|e| panic!("{e}"));
}

/// Two hard reservations of `size` pages, spaces `a` and `b` bound to them, each with 8
/// private pages and the shm (4 pages) under `policy`.
struct Two {
    m: Memory,
    r: [ResId; 2],
    s: [AsId; 2],
    shm: RegionId,
    vs: [Vpn; 2],
    vp: [Vpn; 2],
}

fn two(policy: SharePolicy, size: u64) -> Two {
    let mut m = machine(64, 1);
    let shm = m.create_shared("shm", RegionKind::SharedAnon, 4, policy).unwrap();
    let r = [res(&mut m, "r1", size, ReservationKind::Hard), res(&mut m, "r2", size, ReservationKind::Hard)];
    let s = [m.create_space("a", Some(r[0])).unwrap(), m.create_space("b", Some(r[1])).unwrap()];
    let vs = [m.map_shared(Nanos::ZERO, s[0], shm, true).unwrap(), m.map_shared(Nanos::ZERO, s[1], shm, true).unwrap()];
    let vp = [m.map_private(s[0], "p", 8).unwrap().1, m.map_private(s[1], "p", 8).unwrap().1];
    Two { m, r, s, shm, vs, vp }
}

mod bounds;
mod device;
mod discard;
mod frames;
mod limit_groups;
mod props;
mod psi;
mod replacement;
mod reservations_paper;
mod shared;
mod spaces;
