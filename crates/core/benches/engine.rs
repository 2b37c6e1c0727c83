//! Scheduler events per second.
//!
//! (a) 20 tasks on 4 CPUs under global EDF, 100 simulated seconds;
//! (b) 100 tasks on 1 CPU under fixed priority (RM), 100 simulated seconds;
//! plus a baseline measured in the same run: raw push/pop through the event queue, the
//! floor any event costs, so the engine's overhead is reported as a ratio to it.
//!
//! Run: `cargo bench -p critmem-core --bench engine`

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use critmem_core::event::EventQueue;
use critmem_core::{simulate, Nanos, SimOptions};
use std::hint::black_box;

mod common;

fn bench(c: &mut Criterion) {
    let cases = [("gedf_20_tasks_4_cpus", common::engine_gedf()), ("rm_100_tasks_1_cpu", common::engine_rm())];
    let mut g = c.benchmark_group("engine_100s");
    g.sample_size(10);
    for (name, s) in &cases {
        let events = simulate(s, SimOptions::default()).events;
        eprintln!("{name}: {events} events per 100 simulated seconds");
        g.throughput(Throughput::Elements(events));
        g.bench_function(*name, |b| b.iter(|| black_box(simulate(black_box(s), SimOptions::default()).events)));
    }
    g.finish();

    // Baseline: the same number of events as (b) through a bare queue holding ~100 pending.
    let n: u64 = simulate(&cases[1].1, SimOptions::default()).events;
    let mut g = c.benchmark_group("baseline");
    g.sample_size(10);
    g.throughput(Throughput::Elements(n));
    g.bench_function("event_queue_push_pop", |b| {
        b.iter_batched(
            || {
                let mut q = EventQueue::default();
                for i in 0..100u64 {
                    q.push(Nanos(i * 7919 % 100_000), i);
                }
                q
            },
            |mut q| {
                for _ in 0..n {
                    let (t, e) = q.pop().expect("never empty");
                    q.push(t + Nanos(1 + (e * 2654435761) % 100_000), e);
                }
                black_box(q.len())
            },
            BatchSize::LargeInput,
        )
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
