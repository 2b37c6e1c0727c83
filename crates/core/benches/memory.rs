//! Simulated page references per second.
//!
//! (a) references that hit resident pages; (b) a workload under heavy replacement (two hard
//! reservations of 8 MiB over 32 MiB private + 32 MiB shared each, random references, most
//! of them faulting); plus a baseline measured in the same run: the same random index stream
//! into a plain byte array of page-table size, the floor of any lookup.
//!
//! Run: `cargo bench -p critmem-core --bench memory`

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use critmem_core::mem::{Access, DeviceSpec, MemConfig, Memory, RefKind, RegionKind, ReservationKind, ReservationSpec, SharePolicy};
use critmem_core::Nanos;
use std::hint::black_box;

const HITS: u64 = 10_000_000;
const REPLACEMENT_REFS: u64 = 500_000;

fn xorshift(x: &mut u32) -> u32 {
    *x ^= *x << 13;
    *x ^= *x >> 17;
    *x ^= *x << 5;
    *x
}

fn config() -> MemConfig {
    MemConfig { check_every_operation: false, readahead_pages: 8, ..MemConfig::with_frames(1 << 16) }
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("memory");
    g.sample_size(10);

    // (a) 4096 resident private pages, random reads.
    let mut m = Memory::new(config(), DeviceSpec::fast_ssd()).expect("valid config");
    let s = m.create_space("a", None).expect("space");
    let (_, v) = m.map_private(s, "p", 4096).expect("map");
    for p in 0..4096 {
        m.access(Nanos::ZERO, s, v.offset(p), RefKind::Write).expect("fits");
    }
    g.throughput(Throughput::Elements(HITS));
    g.bench_function("resident_hits", |b| {
        b.iter(|| {
            let mut x = 0x9e37_79b9u32;
            let mut hits = 0u64;
            for _ in 0..HITS {
                let r = m.access(Nanos::ZERO, s, v.offset(xorshift(&mut x) & 4095), RefKind::Read).expect("mapped");
                hits += u64::from(r.is_hit());
            }
            assert_eq!(hits, HITS);
            black_box(hits)
        })
    });
    g.bench_function("baseline_array_lookups", |b| {
        let table = vec![1u8; 4096];
        b.iter(|| {
            let mut x = 0x9e37_79b9u32;
            let mut sum = 0u64;
            for _ in 0..HITS {
                sum += u64::from(table[(xorshift(&mut x) & 4095) as usize]);
            }
            black_box(sum)
        })
    });

    // (b) Heavy replacement under No-SP-Mgmt and SPC.
    g.throughput(Throughput::Elements(REPLACEMENT_REFS));
    for policy in [SharePolicy::Private, SharePolicy::Spc] {
        g.bench_function(format!("heavy_replacement_{policy}"), |b| {
            b.iter_batched(
                || {
                    let mut m = Memory::new(config(), DeviceSpec::fast_ssd()).expect("valid config");
                    let shm = m.create_shared("shm", RegionKind::SharedAnon, 8192, policy).expect("region");
                    let spaces: Vec<_> = (0..2)
                        .map(|i| {
                            let spec = ReservationSpec { name: format!("r{i}"), pages: 2048, kind: ReservationKind::Hard };
                            let r = m.create_reservation(Nanos::ZERO, spec).expect("admitted");
                            let s = m.create_space("t", Some(r)).expect("space");
                            let (_, vp) = m.map_private(s, "p", 8192).expect("map");
                            let vs = m.map_shared(Nanos::ZERO, s, shm, true).expect("map");
                            (s, vp, vs)
                        })
                        .collect();
                    (m, spaces)
                },
                |(mut m, spaces)| {
                    let mut x = 0x1234_5678u32;
                    let mut now = Nanos::ZERO;
                    let mut faults = 0u64;
                    for i in 0..REPLACEMENT_REFS {
                        let r = xorshift(&mut x);
                        let (s, vp, vs) = spaces[(i & 1) as usize];
                        let v = if r & 1 == 0 { vp } else { vs };
                        let kind = if r & 2 == 0 { RefKind::Write } else { RefKind::Read };
                        now += Nanos(100);
                        let a = m.access(now, s, v.offset((r >> 3) & 8191), kind).expect("no OOM with hard reservations");
                        faults += u64::from(!a.is_hit());
                        if let Access::Major { ready_at, .. } = a {
                            now = ready_at;
                        }
                    }
                    black_box(faults)
                },
                BatchSize::LargeInput,
            )
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
