//! critmem-analysis behaviour, one test binary: known answers, agreement with the simulator
//! (property tests), the bundled examples and the report format.
//!
//! Property tests print the shrunk failing input (the scenario TOML, ready to paste into a
//! file and simulate) and persist its seed in `crates/analysis/tests/proptest-regressions/`;
//! the next `cargo test -p critmem-analysis` replays that seed first, so rerunning the same
//! command reproduces the failure. `PROPTEST_CASES=N` changes every property's case count.

mod blocking;
mod common;
mod cyclic;
mod edf;
mod examples;
mod fp;
mod global;
mod mc2;
mod mc2_level_b;
mod mc2_study;
mod report;
mod scenario_resources;
mod scenario_servers;
mod servers;
mod supply;
