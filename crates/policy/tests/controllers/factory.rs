//! Building controllers by name.

use super::*;

#[test]
fn factory_builds_every_named_controller() {
    let configs = [
        ("sara", json!({"interval_ns": 10_000_000, "early_drop": false})),
        ("greedy", json!({})),
        ("offline", json!({"limit_bytes": 1})),
        ("tmo-low", json!({})),
        ("tmo-high", json!({"psi_threshold_pct": 20.0})),
        ("senpai", json!({"pressure_us": 5_000})),
        ("static", json!({"default_limit_bytes": 1})),
    ];
    for (name, cfg) in configs {
        let c = make_controller(name, cfg).unwrap();
        assert_eq!(c.name(), name);
    }
    assert_eq!(make_controller("sara", json!({"interval_ns": 10_000_000})).unwrap().interval_ns(), 10_000_000);
}

#[test]
fn factory_errors_are_one_line_and_actionable() {
    let err = |name: &str, cfg: serde_json::Value| make_controller(name, cfg).err().unwrap().to_string();
    let errors = [
        err("sarah", json!({})),
        err("sara", json!({"intervl_ns": 5})),
        err("offline", json!({})),
        err("static", json!({})),
        err("senpai", json!({"knob": "min"})),
        err("tmo-low", json!({"reclaim_ratio": 2.0})),
        err("sara", json!({"step_bytes": "x"})),
        err("static", json!({"limits_bytes": {"srt": -1}})),
    ];
    assert_eq!(errors[0], "unknown controller `sarah`; use one of: sara, greedy, offline, tmo-low, tmo-high, senpai, static, tailguard");
    assert!(errors[1].starts_with("invalid config for controller `sara`: unknown field `intervl_ns`, expected one of"), "{}", errors[1]);
    assert_eq!(errors[2], "invalid config for controller `offline`: missing field `limit_bytes`");
    assert!(errors[3].contains("set `limits_bytes`"), "{}", errors[3]);
    assert!(errors[4].contains("unknown variant `min`, expected `max` or `high`"), "{}", errors[4]);
    assert_eq!(errors[5], "controller `tmo-low`: `reclaim_ratio` must be within 0..=1 (got 2)");
    // The key at fault is named, also inside a table.
    assert_eq!(errors[6], "invalid config for controller `sara`: `step_bytes`: invalid type: string \"x\", expected u64");
    assert_eq!(errors[7], "invalid config for controller `static`: `limits_bytes.srt`: invalid value: integer `-1`, expected u64");
    for e in &errors {
        assert!(!e.contains('\n'), "{e}");
    }
}

#[test]
fn controller_config_round_trips_for_logging() {
    let cfg = ControllerConfig::parse("tmo-high", json!({"psi_threshold_pct": 25.0})).unwrap();
    let logged = serde_json::to_value(&cfg).unwrap();
    assert_eq!(logged["controller"], "tmo-high");
    assert_eq!(logged["psi_threshold_pct"], 25.0);
    assert_eq!(logged["period_ns"], 6_000_000_000u64);
}
