//! The workloads of the engine, hierarchy and memory benchmarks, shared by the criterion
//! benches and by `examples/hot_paths.rs`, which runs one of them once (for callgrind's
//! instruction counts and other whole-program profilers).

// Each bench uses only its own workloads.
#![allow(dead_code)]

use critmem_core::mem::{
    Access, AsId, DeviceSpec, MemConfig, Memory, RefKind, RegionKind, ReservationKind, ReservationSpec, SharePolicy, Vpn,
};
use critmem_core::{load_toml_str, Nanos, Scenario};
use std::fmt::Write;

/// A task set with periods from a harmonic-ish menu and WCETs scaled to `util`, 100
/// simulated seconds (benches/engine.rs).
pub fn engine_scenario(kind: &str, cpus: usize, tasks: usize, util: f64) -> Scenario {
    let periods_ms = [5.0, 8.0, 10.0, 20.0, 25.0, 40.0, 50.0, 100.0];
    let mut text = format!("[machine]\ncpus = {cpus}\n[scheduler]\nkind = \"{kind}\"\n[run]\nhorizon_ms = 100000\nseed = 1\n");
    let per_task = util / tasks as f64;
    for i in 0..tasks {
        let p = periods_ms[(i * 7 + 3) % periods_ms.len()];
        // Vary demand around the mean so preemptions happen at many points.
        let c = p * per_task * (0.5 + (i % 5) as f64 * 0.25);
        text += &format!(
            "[[task]]\nname = \"t{i}\"\nperiod_ms = {p}\nexec = {{ dist = \"uniform\", min_ms = {:.4}, max_ms = {:.4} }}\n",
            c * 0.6,
            c
        );
    }
    load_toml_str(&text, "bench.toml").expect("bench scenario is valid")
}

/// Engine (a): 20 tasks on 4 CPUs under global EDF, utilisation 3.6.
pub fn engine_gedf() -> Scenario {
    engine_scenario("gedf", 4, 20, 3.6)
}

/// Engine (b): 100 tasks on 1 CPU under rate-monotonic fixed priority, utilisation 0.9.
pub fn engine_rm() -> Scenario {
    engine_scenario("rm", 1, 100, 0.9)
}

const HEADER: &str = "[machine]\ncpus = 1\n[run]\nhorizon_ms = 100000\nseed = 1\n";
const PERIODS_MS: [u64; 6] = [10, 20, 25, 40, 50, 100];

/// 30 tasks of about 3 % utilisation each; with `tree`, in 8 leaf servers of a 3-level tree
/// (benches/hierarchy.rs).
pub fn servers_scenario(tree: bool) -> Scenario {
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
pub fn resources_scenario(locks: bool) -> Scenario {
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

/// References per run under heavy replacement (benches/memory.rs).
pub const REPLACEMENT_REFS: u64 = 500_000;

pub fn xorshift(x: &mut u32) -> u32 {
    *x ^= *x << 13;
    *x ^= *x >> 17;
    *x ^= *x << 5;
    *x
}

pub fn mem_config() -> MemConfig {
    MemConfig { check_every_operation: false, readahead_pages: 8, ..MemConfig::with_frames(1 << 16) }
}

/// Each task's address space, its private mapping and its mapping of the shared region.
pub type Spaces = Vec<(AsId, Vpn, Vpn)>;

/// Two hard reservations of 8 MiB, each task with 32 MiB private and a 32 MiB shared region
/// under `policy`.
pub fn heavy_replacement_setup(policy: SharePolicy) -> (Memory, Spaces) {
    let mut m = Memory::new(mem_config(), DeviceSpec::fast_ssd()).expect("valid config");
    let shm = m.create_shared("shm", RegionKind::SharedAnon, 8192, policy).expect("region");
    let spaces = (0..2)
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
}

/// [`REPLACEMENT_REFS`] random references alternating between the tasks, each major fault
/// waited out; returns the faults.
pub fn heavy_replacement_run(m: &mut Memory, spaces: &Spaces) -> u64 {
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
    faults
}
