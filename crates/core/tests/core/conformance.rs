//! The platform conformance body ([`critmem_policy::ConformanceProbe`]) against the
//! simulator: the same body crates/linux/tests/linux/control.rs runs against real cgroups.

use critmem_core::{load_toml_str, simulate_with_controller, SimOptions};
use critmem_policy::ConformanceProbe;

/// Two groups (soft real-time and non-real-time) with work in both, so stall totals move.
const SCENARIO: &str = r#"
[machine]
cpus = 2

[scheduler]
kind = "gedf"

[run]
horizon_ms = 3000
seed = 5

[memory]
total_mb = 64
swap = "fast-ssd"

[control]
controller = "greedy"
interval_ms = 5

[[group]]
name = "srt"
role = "soft-rt"
bcet_ms = 5
floor_mb = 8

[[group]]
name = "batch"
role = "non-rt"
floor_mb = 16

[[task]]
name = "srt"
wcet_ms = 5
period_ms = 20
group = "srt"
private_mb = 12
access = [{ pattern = "random", refs = 500, writes = 0.2 }]

[[task]]
name = "nrt"
wcet_ms = 20
period_ms = 40
group = "batch"
private_mb = 24
access = [{ pattern = "random", refs = 2000, writes = 0.3 }]
"#;

#[test]
fn the_platform_conformance_body_passes_on_the_simulator() {
    let scenario = load_toml_str(SCENARIO, "conformance.toml").unwrap_or_else(|e| panic!("{e}"));
    let (probe, report) = ConformanceProbe::new(5_000_000);
    let result = simulate_with_controller(
        &scenario,
        SimOptions { record_jobs: false, record_segments: false, check_invariants: true },
        Box::new(probe),
        "conformance",
    );
    assert!(result.is_some(), "the scenario has [control]");
    let report = report.lock().unwrap().clone();
    assert!(report.ticks > 10, "{report:?}");
    if let Err(violations) = report.verdict() {
        panic!("the simulator broke the platform contract:\n{violations}");
    }
}
