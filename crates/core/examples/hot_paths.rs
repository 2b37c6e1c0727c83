//! Runs one benchmark workload once, for whole-program profilers and instruction counts:
//!
//!     cargo build --release -p critmem-core --example hot_paths
//!     valgrind --tool=callgrind target/release/examples/hot_paths engine-gedf
//!
//! Workloads (the same as benches/engine.rs, hierarchy.rs and memory.rs build): engine-gedf,
//! engine-rm, servers-flat, servers-tree, resources-flat, resources-pip, replacement-private,
//! replacement-spc. Prints the run's events (engine) or faults (memory).

#[path = "../benches/common/mod.rs"]
mod common;

use critmem_core::mem::SharePolicy;
use critmem_core::{simulate, SimOptions};
use std::process::ExitCode;

const WORKLOADS: &str =
    "engine-gedf, engine-rm, servers-flat, servers-tree, resources-flat, resources-pip, replacement-private, replacement-spc";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
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
