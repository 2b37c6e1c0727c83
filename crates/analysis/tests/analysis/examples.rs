//! The bundled scenarios in examples/ load, analyse without panicking, and the verdicts
//! agree with what the files say and with the simulator.

use crate::common::*;
use critmem_analysis::{analyze, AnalysisReport, Verdict};
use critmem_core::{load_toml_str, Scenario};
use std::path::PathBuf;

fn examples_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples")
}

fn example(name: &str) -> Scenario {
    let path = examples_dir().join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    load_toml_str(&text, name).unwrap_or_else(|e| panic!("{e}"))
}

/// Analysed response times equal the simulator's worst responses for every task.
fn assert_responses_match_simulation(s: &Scenario, r: &AnalysisReport) {
    let sim = run(s, false);
    for (a, t) in r.tasks.iter().zip(&sim.tasks) {
        assert_eq!(a.response_time_ms.map(ms), t.stats.max_response, "{}: task {}", s.source_name, a.name);
        assert_eq!(a.cpu.filter(|_| s.scheduler.is_partitioned()), t.cpu, "{}: task {} placed differently", s.source_name, a.name);
    }
}

#[test]
fn every_example_loads_and_analyses() {
    let mut seen = 0;
    for entry in std::fs::read_dir(examples_dir()).expect("examples/ exists") {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "toml") {
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            let s = load_toml_str(&std::fs::read_to_string(&path).unwrap(), &name).unwrap_or_else(|e| panic!("{e}"));
            let r = analyze(&s);
            let json: serde_json::Value = serde_json::from_str(&r.to_json()).expect("valid JSON");
            assert_eq!(json["scenario"], name.as_str());
            assert_eq!(json["tasks"].as_array().unwrap().len(), s.tasks.len());
            assert!(!r.tests.is_empty(), "{name}: no test ran");
            seen += 1;
        }
    }
    assert!(seen > 0, "no examples found");
}

#[test]
fn rm_textbook_example_is_schedulable_with_textbook_responses() {
    let s = example("rm-textbook.toml");
    let r = analyze(&s);
    assert_eq!(r.verdict, Verdict::Schedulable);
    let resp: Vec<_> = r.tasks.iter().map(|t| t.response_time_ms).collect();
    assert_eq!(resp, vec![Some(1.0), Some(2.0), Some(7.0), Some(18.0)]);
    assert_responses_match_simulation(&s, &r);
}

#[test]
fn edf_uniprocessor_example_is_schedulable() {
    let s = example("edf-uniprocessor.toml");
    assert_eq!(analyze(&s).verdict, Verdict::Schedulable);
    assert!(run(&s, false).tasks.iter().all(|t| t.stats.deadline_misses == 0));
}

#[test]
fn partitioned_fp_example_is_schedulable_on_the_simulators_partition() {
    let s = example("partitioned-fp.toml");
    let r = analyze(&s);
    assert_eq!(r.verdict, Verdict::Schedulable);
    assert_eq!(r.tests.iter().filter(|t| t.name == "fp-rta").count(), 2, "one RTA per CPU");
    assert_responses_match_simulation(&s, &r);
}

#[test]
fn cyclic_example_is_schedulable_and_replays_like_the_simulator() {
    let s = example("cyclic.toml");
    let r = analyze(&s);
    assert_eq!(r.verdict, Verdict::Schedulable);
    assert_responses_match_simulation(&s, &r);
}

#[test]
fn gedf_mixed_verdict_follows_its_worst_case_utilisation() {
    let s = example("gedf-mixed.toml");
    let r = analyze(&s);
    let m = s.cpus as f64;
    let demand_ms_per_ms: f64 = s.tasks.iter().map(|t| (t.exec.wcet() + t.suspension_total()).as_ms_f64() / t.period.as_ms_f64()).sum();
    if demand_ms_per_ms <= m {
        assert!(matches!(r.verdict, Verdict::BoundedTardiness | Verdict::Schedulable), "{:?}", r.tests);
    } else {
        // Beyond m CPUs, tardiness is bounded only if tasks that skip or abort shed the excess.
        assert!(!matches!(r.verdict, Verdict::BoundedTardiness | Verdict::Schedulable), "{:?}", r.tests);
        assert!(r.total_utilization > m || s.tasks.iter().any(|t| !t.suspensions.is_empty()));
    }
}

/// Page-level memory and a controller are named as outside the analysis; a plain task set
/// has nothing to name.
#[test]
fn not_covered_names_memory_and_the_controller_only_where_the_scenario_has_them() {
    assert!(analyze(&example("rm-textbook.toml")).not_covered.is_empty());
    let memory_only = analyze(&example("shared-pages.toml")).not_covered;
    assert_eq!(memory_only.len(), 1, "{memory_only:?}");
    assert!(memory_only[0].starts_with("page-level memory ([memory])"), "{memory_only:?}");
    let controlled = analyze(&example("sara-opencv.toml")).not_covered;
    assert_eq!(controlled.len(), 2, "{controlled:?}");
    assert!(controlled[1].starts_with("the sara controller ([control])"), "{controlled:?}");
    for line in memory_only.iter().chain(&controlled) {
        assert!(!line.contains('\n') && line.contains("`critmem run`"), "{line}");
    }
}
