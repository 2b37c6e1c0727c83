//! Every bundled example's summary is its golden file byte for byte (`tests/golden/run-*.json`,
//! what `critmem run examples/NAME.toml --json --out DIR` prints), so a change to the core
//! that moves a figure fails here, in the Rust suite, before the Python one runs.

use critmem_core::{load_toml_str, simulate, SimOptions};
use std::path::Path;

#[test]
fn every_example_summary_matches_its_golden_file() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut names: Vec<String> = std::fs::read_dir(root.join("examples"))
        .expect("examples/")
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter_map(|n| n.strip_suffix(".toml").map(str::to_string))
        .collect();
    names.sort();
    assert!(names.len() > 10, "found the examples: {names:?}");
    let mut differ = Vec::new();
    for name in &names {
        let source = format!("examples/{name}.toml");
        let text = std::fs::read_to_string(root.join(&source)).expect("example readable");
        let Ok(golden) = std::fs::read_to_string(root.join(format!("tests/golden/run-{name}.json"))) else {
            differ.push(format!("{name}: no golden file"));
            continue;
        };
        let scenario = load_toml_str(&text, &source).unwrap_or_else(|e| panic!("{e}"));
        let opts = SimOptions { record_jobs: true, record_segments: true, check_invariants: false };
        let summary = simulate(&scenario, opts).to_json() + "\n";
        if summary != golden {
            let at = summary.bytes().zip(golden.bytes()).position(|(a, b)| a != b).unwrap_or(summary.len().min(golden.len()));
            let from = at.saturating_sub(80);
            differ.push(format!("{name}: differs at byte {at}: ours …{}…", &summary[from..(at + 80).min(summary.len())]));
        }
    }
    assert!(differ.is_empty(), "{}", differ.join("\n"));
}
