//! Simulated page references per second.
//!
//! (a) references that hit resident pages; (b) a workload under heavy replacement (two hard
//! reservations of 8 MiB over 32 MiB private + 32 MiB shared each, random references, most
//! of them faulting); plus a baseline measured in the same run: the same random index stream
//! into a plain byte array of page-table size, the floor of any lookup.
//!
//! Run: `cargo bench -p critmem-core --bench memory`

use common::{heavy_replacement_run, heavy_replacement_setup, mem_config, xorshift, REPLACEMENT_REFS};
use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use critmem_core::mem::{DeviceSpec, Memory, RefKind, SharePolicy};
use critmem_core::Nanos;
use std::hint::black_box;

mod common;

const HITS: u64 = 10_000_000;

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("memory");
    g.sample_size(10);

    // (a) 4096 resident private pages, random reads.
    let mut m = Memory::new(mem_config(), DeviceSpec::fast_ssd()).expect("valid config");
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
                || heavy_replacement_setup(policy),
                |(mut m, spaces)| black_box(heavy_replacement_run(&mut m, &spaces)),
                BatchSize::LargeInput,
            )
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
