//! Scheduler events per second with the engine's foundations for hierarchical scheduling and
//! shared resources, each beside the flat engine on the same tasks in the same run:
//!
//! (a) 30 tasks in a three-level tree of deferrable servers on 1 CPU (2 servers at the top,
//!     2 under each, 2 under each of those: 8 leaves), 100 simulated seconds, against the same
//!     30 tasks under flat RM;
//! (b) 20 tasks on 1 CPU contending on 5 resources under priority inheritance through
//!     dependency links, 100 simulated seconds, against the same tasks with the same demand
//!     and no resources.
//!
//! Run: `cargo bench -p critmem-core --bench hierarchy`

use common::{resources_scenario, servers_scenario};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use critmem_core::{simulate, SimOptions};
use std::hint::black_box;

mod common;

fn bench(c: &mut Criterion) {
    let groups = [
        ("servers_100s", [("flat_rm_30_tasks", servers_scenario(false)), ("deferrable_tree_3_levels_30_tasks", servers_scenario(true))]),
        ("resources_100s", [("flat_rm_20_tasks", resources_scenario(false)), ("pip_links_20_tasks_5_resources", resources_scenario(true))]),
    ];
    for (group, cases) in &groups {
        let mut g = c.benchmark_group(*group);
        g.sample_size(10);
        for (name, s) in cases {
            let events = simulate(s, SimOptions::default()).events;
            eprintln!("{group}/{name}: {events} events per 100 simulated seconds");
            g.throughput(Throughput::Elements(events));
            g.bench_function(*name, |b| b.iter(|| black_box(simulate(black_box(s), SimOptions::default()).events)));
        }
        g.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
