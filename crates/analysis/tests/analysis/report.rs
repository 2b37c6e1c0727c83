//! The report's JSON shape: fixed keys in a fixed order, snake_case verdicts, null for
//! what a test does not give.

use crate::common::*;
use critmem_analysis::analyze;
use serde_json::Value;

const RM: &[Task] = &[(1.0, 4.0, 4.0), (1.0, 5.0, 5.0), (3.0, 9.0, 9.0), (3.0, 18.0, 18.0)];

fn keys(v: &Value) -> Vec<&str> {
    v.as_object().unwrap().keys().map(String::as_str).collect()
}

#[test]
fn json_has_the_documented_keys_in_order() {
    let json = analyze(&load(&scenario_text("rm", 1, None, RM))).to_json();
    // serde_json keeps insertion order only with its preserve_order feature; check the text.
    let order = ["\"scenario\"", "\"scheduler\"", "\"cpus\"", "\"total_utilization\"", "\"verdict\"", "\"tests\"", "\"tasks\""];
    let pos: Vec<usize> = order.iter().map(|k| json.find(k).unwrap_or_else(|| panic!("{k} missing"))).collect();
    assert!(pos.windows(2).all(|w| w[0] < w[1]), "{json}");
    let v: Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["scenario"], "test.toml");
    assert_eq!(v["scheduler"], "rm");
    assert_eq!(v["cpus"], 1);
    assert_eq!(v["verdict"], "schedulable");
    let mut test_keys = keys(&v["tests"][0]);
    test_keys.sort_unstable();
    assert_eq!(test_keys, ["cpu", "detail", "name", "verdict"]);
    assert_eq!(v["tests"][0]["name"], "fp-rta");
    assert_eq!(v["tests"][0]["cpu"], 0);
    let t = &v["tasks"][2];
    for k in [
        "name",
        "cpu",
        "utilization",
        "wcet_ms",
        "period_ms",
        "deadline_ms",
        "priority_rank",
        "response_time_ms",
        "schedulable",
        "tardiness_bound_ms",
    ] {
        assert!(t.get(k).is_some(), "task key {k} missing: {t}");
    }
    assert_eq!(t["response_time_ms"], 7.0);
    assert_eq!(t["priority_rank"], 2);
    assert_eq!(t["schedulable"], true);
    assert_eq!(t["tardiness_bound_ms"], Value::Null);
    assert!((v["total_utilization"].as_f64().unwrap() - 0.95).abs() < 1e-9);
}

#[test]
fn json_is_identical_for_identical_input() {
    let s = load(&scenario_text("gedf", 2, Some(100.0), &[(2.0, 3.0, 3.0), (2.0, 3.0, 3.0), (4.0, 6.0, 6.0)]));
    let a = analyze(&s).to_json();
    assert_eq!(a, analyze(&s).to_json());
    let v: Value = serde_json::from_str(&a).unwrap();
    assert_eq!(v["verdict"], "bounded_tardiness");
    assert_eq!(v["tasks"][2]["tardiness_bound_ms"], 5.0);
    assert_eq!(v["tasks"][2]["cpu"], Value::Null);
    assert_eq!(v["tasks"][2]["priority_rank"], Value::Null);
}
