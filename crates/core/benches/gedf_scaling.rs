//! Global EDF with many CPUs: the cost per event for 10,000 tasks on 16, 256, 1,024 and 4,096
//! CPUs (utilisation 80 % of the machine), to read as a ratio to 16 CPUs.
//!
//! Run: `cargo bench -p critmem-core --bench gedf_scaling`

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use critmem_core::{load_toml_str, simulate, Scenario, SimOptions};
use std::hint::black_box;

const TASKS: usize = 10_000;

/// `TASKS` tasks on `cpus` CPUs under gEDF at 80 % of the machine, for `horizon_ms`.
fn scenario(cpus: usize, horizon_ms: u64) -> Scenario {
    let periods_ms = [5.0, 8.0, 10.0, 20.0, 25.0, 40.0, 50.0, 100.0];
    let mut text = format!("[machine]\ncpus = {cpus}\n[scheduler]\nkind = \"gedf\"\n[run]\nhorizon_ms = {horizon_ms}\nseed = 1\n");
    let per_task = 0.8 * cpus as f64 / TASKS as f64;
    for i in 0..TASKS {
        let p = periods_ms[(i * 7 + 3) % periods_ms.len()];
        let c = (p * per_task * (0.5 + (i % 5) as f64 * 0.25)).min(p);
        text += &format!("[[task]]\nname = \"t{i}\"\nperiod_ms = {p}\nwcet_ms = {c:.6}\n");
    }
    load_toml_str(&text, "bench.toml").expect("bench scenario is valid")
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("gedf_10000_tasks");
    g.sample_size(10);
    for cpus in [16usize, 256, 1024, 4096] {
        let s = scenario(cpus, 200);
        let events = simulate(&s, SimOptions::default()).events;
        eprintln!("{cpus} CPUs: {events} events per 200 simulated ms");
        g.throughput(Throughput::Elements(events));
        g.bench_function(format!("{cpus}_cpus"), |b| b.iter(|| black_box(simulate(black_box(&s), SimOptions::default()).events)));
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
