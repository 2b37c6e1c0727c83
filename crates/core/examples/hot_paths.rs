//! Runs one benchmark workload once, for whole-program profilers and instruction counts:
//!
//!     cargo build --release -p critmem-core --example hot_paths
//!     valgrind --tool=callgrind target/release/examples/hot_paths engine-gedf
//!
//! Workloads (the same as benches/engine.rs, hierarchy.rs and memory.rs build): engine-gedf,
//! engine-rm, servers-flat, servers-tree, resources-flat, resources-pip, replacement-private,
//! replacement-spc. Prints the run's events (engine) or faults (memory). `scenario FILE`
//! runs a scenario file (TOML or JSON) instead, with no traces kept, as a study's runs are:
//! e.g. one of `critmem reproduce sara`'s runs, written out by `scripts/sara_run_scenario.py`.

#[path = "../benches/common/mod.rs"]
mod common;

use critmem_core::mem::SharePolicy;
use critmem_core::{simulate, SimOptions};
use std::process::ExitCode;

const WORKLOADS: &str =
    "engine-gedf, engine-rm, servers-flat, servers-tree, resources-flat, resources-pip, replacement-private, replacement-spc";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let [cmd, file] = args.as_slice() {
        if cmd == "scenario" {
            return run_file(file);
        }
    }
    let [name] = args.as_slice() else {
        eprintln!("hot_paths: give one workload: {WORKLOADS}");
        return ExitCode::from(2);
    };
    let scenario = match name.as_str() {
        "engine-gedf" => common::engine_gedf(),
        "engine-rm" => common::engine_rm(),
        "servers-flat" => common::servers_scenario(false),
        "servers-tree" => common::servers_scenario(true),
        "resources-flat" => common::resources_scenario(false),
        "resources-pip" => common::resources_scenario(true),
        "replacement-private" | "replacement-spc" => {
            let policy = if name == "replacement-spc" { SharePolicy::Spc } else { SharePolicy::Private };
            let (mut m, spaces) = common::heavy_replacement_setup(policy);
            println!("{name}: {} faults", common::heavy_replacement_run(&mut m, &spaces));
            return ExitCode::SUCCESS;
        }
        other => {
            eprintln!("hot_paths: unknown workload {other:?}: one of {WORKLOADS}");
            return ExitCode::from(2);
        }
    };
    println!("{name}: {} events", simulate(&scenario, SimOptions::default()).events);
    ExitCode::SUCCESS
}

fn run_file(file: &str) -> ExitCode {
    let text = match std::fs::read_to_string(file) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("hot_paths: cannot read {file}: {e}");
            return ExitCode::from(2);
        }
    };
    let loaded = if file.ends_with(".json") {
        critmem_core::scenario::load_json_str(&text, file)
    } else {
        critmem_core::scenario::load_toml_str(&text, file)
    };
    match loaded {
        Ok(scenario) => {
            let opts = SimOptions { record_jobs: true, record_segments: false, check_invariants: false };
            println!("{file}: {} events", simulate(&scenario, opts).events);
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("hot_paths: {file}: {e}");
            ExitCode::from(2)
        }
    }
}
