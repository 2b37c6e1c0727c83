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

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use critmem_core::{load_toml_str, simulate, Scenario, SimOptions};
use std::fmt::Write;
use std::hint::black_box;

const HEADER: &str = "[machine]\ncpus = 1\n[run]\nhorizon_ms = 100000\nseed = 1\n";
const PERIODS_MS: [u64; 6] = [10, 20, 25, 40, 50, 100];

/// 30 tasks of about 3 % utilisation each; with `tree`, in 8 leaf servers of a 3-level tree.
fn servers_scenario(tree: bool) -> Scenario {
    let mut text = format!("{HEADER}[scheduler]\nkind = \"{}\"\n", if tree { "fp" } else { "rm" });
    if tree {
        // Budgets per 10 ms: 4.5 at the top, 2.2 in the middle, 1.1 at the leaves, so each
        // level can exhaust and every leaf is sometimes backlogged.
        let mut add = |name: &str, parent: &str, budget_ms: f64, priority: usize| {
            writeln!(
                text,
                "[[scheduler.server]]\nname = \"{name}\"\nparent = \"{parent}\"\nkind = \"deferrable\"\nbudget_ms = {budget_ms}\nperiod_ms = 10\npriority = {priority}\npolicy = \"fp\""
            )
            .expect("write to a string");
        };
        for a in 0..2 {
            add(&format!("s{a}"), "root", 4.5, a);
            for b in 0..2 {
                add(&format!("s{a}{b}"), &format!("s{a}"), 2.2, b);
                for c in 0..2 {
                    add(&format!("s{a}{b}{c}"), &format!("s{a}{b}"), 1.1, c);
                }
            }
        }
    }
    for i in 0..30 {
        let p = PERIODS_MS[(i * 7 + 3) % PERIODS_MS.len()];
        let c = p as f64 * 0.03 * (0.5 + (i % 5) as f64 * 0.25);
        write!(
            text,
            "[[task]]\nname = \"t{i}\"\npriority = {i}\nperiod_ms = {p}\nexec = {{ dist = \"uniform\", min_ms = {:.4}, max_ms = {:.4} }}\n",
            c * 0.6,
            c
        )
        .expect("write to a string");
        if tree {
            let leaf = i % 8;
            writeln!(text, "server = \"s{}{}{}\"", leaf / 4, (leaf / 2) % 2, leaf % 2).expect("write to a string");
        }
    }
    load_toml_str(&text, "bench-servers.toml").expect("bench scenario is valid")
}

/// 20 tasks, 4.5 % utilisation each; with `locks`, each locks one of 5 resources for the
/// middle half of its demand (a fixed demand, so both variants execute the same).
fn resources_scenario(locks: bool) -> Scenario {
    let mut text = format!("{HEADER}[scheduler]\nkind = \"rm\"\n");
    if locks {
        for r in 0..5 {
            writeln!(text, "[[resource]]\nname = \"r{r}\"\nunits = 1\nprotocol = \"pip\"").expect("write to a string");
        }
    }
    for i in 0..20 {
        let p = PERIODS_MS[(i * 7 + 3) % PERIODS_MS.len()];
        let quarter_ms = p as f64 * 0.045 / 4.0;
        write!(text, "[[task]]\nname = \"t{i}\"\nperiod_ms = {p}\noffset_ms = {}\n", i % 7).expect("write to a string");
        if locks {
            writeln!(
                text,
                "program = [{{ compute_ms = {quarter_ms} }}, {{ lock = \"r{r}\" }}, {{ compute_ms = {half_ms} }}, {{ unlock = \"r{r}\" }}, {{ compute_ms = {quarter_ms} }}]",
                r = i % 5,
                half_ms = 2.0 * quarter_ms
            )
            .expect("write to a string");
        } else {
            writeln!(text, "wcet_ms = {}", 4.0 * quarter_ms).expect("write to a string");
        }
    }
    load_toml_str(&text, "bench-resources.toml").expect("bench scenario is valid")
}

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
