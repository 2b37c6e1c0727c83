//! One run of the TMEM memory schedulers at the paper's scale: 27 components × 2 kinds of
//! transient memory (54 caches), 16 threads (8 real-time), a pool of 320 units all held by the
//! caches, with contention spread over a third of the caches so that units must move. Every
//! policy first sees `WARM_UP_RUNS` quiet windows (not timed), so one with memory across
//! windows is measured in its steady state.
//!
//! Run: `cargo bench -p critmem-policy --bench tmem`

use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use critmem_policy::tmem::*;
use std::hint::black_box;

const COMPONENTS: usize = 27;
const THREADS: usize = 16;
const TOTAL_UNITS: u32 = 320;

fn bench(c: &mut Criterion) {
    let obs = synthetic_observation(COMPONENTS, THREADS, TOTAL_UNITS, 0x7e3e_2011);
    for name in ["tmem", "tmem-composite", "watermark"] {
        let mut policy = make_memory_scheduler(name).expect("known");
        warm_up(policy.as_mut(), &obs);
        let actions = policy.schedule(&obs);
        let moved = units_moved(&obs, &actions);
        assert!(moved >= 10, "{name} moves only {moved} units; the benchmark needs real work");
        eprintln!("{name}: {moved} units moved");
    }

    let mut g = c.benchmark_group("tmem");
    g.bench_function("tmem run (54 caches, 16 threads, 320 units)", |b| {
        let mut policy = Alg1;
        b.iter(|| policy.schedule(black_box(&obs)))
    });
    // The composite keeps state across runs: every measured run starts from a warmed fresh object.
    g.bench_function("tmem-composite run (54 caches, 16 threads, 320 units)", |b| {
        b.iter_batched(
            || {
                let mut p = TmemComposite::new(CompositeOptions::default());
                warm_up(&mut p, &obs);
                p
            },
            |mut policy| policy.schedule(black_box(&obs)),
            BatchSize::SmallInput,
        )
    });
    // Watermark keeps state across runs too: fresh objects, as for the composite.
    g.bench_function("watermark first run (54 caches, 16 threads, 320 units)", |b| {
        b.iter_batched(|| Watermark::new(WatermarkOptions::default()), |mut policy| policy.schedule(black_box(&obs)), BatchSize::SmallInput)
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
