//! Loader behaviour: defaults, overrides, and one-line errors naming file, key and reason.

use super::*;
use crate::model::task::Criticality;

const RM: &str = r#"
[machine]
cpus = 1
[scheduler]
kind = "rm"
[run]
horizon_ms = 36
seed = 3
[[task]]
name = "a"
wcet_ms = 1
period_ms = 4
"#;

fn err_of(text: &str) -> String {
    load_toml_str(text, "s.toml").unwrap_err().to_string()
}

#[test]
fn minimal_scenario_loads_with_defaults() {
    let s = load_toml_str(RM, "s.toml").unwrap();
    assert_eq!(s.tasks[0].deadline, Nanos::from_ms(4));
    assert_eq!(s.tasks[0].criticality, Criticality::C);
    assert_eq!(s.horizon, Nanos::from_ms(36));
    assert_eq!(s.seed, 3);
}

#[test]
fn a_seed_takes_every_u64_and_refuses_negatives_and_non_integers() {
    let with = |v: &str| RM.replace("seed = 3", &format!("seed = {v}"));
    assert_eq!(load_toml_str(&with("9223372036854775808"), "s.toml").unwrap().seed, 1 << 63);
    assert_eq!(load_toml_str(&with("18446744073709551615"), "s.toml").unwrap().seed, u64::MAX);
    assert_eq!(load_toml_str(&with("0"), "s.toml").unwrap().seed, 0);
    assert_eq!(err_of(&with("-1")), "s.toml: run.seed: must not be negative (got -1)");
    let e = err_of(&with("1.5"));
    assert!(e.starts_with("s.toml: run.seed: ") && e.contains("expected an integer from 0 to 2^64 - 1"), "{e}");
    let e = err_of(&with("18446744073709551616"));
    assert!(e.starts_with("s.toml: "), "{e}");
    assert!(!e.contains('\n'), "{e}");
}

#[test]
fn unknown_key_is_named() {
    let e = err_of(&RM.replace("wcet_ms = 1", "wcet_ms = 1\nperiodd_ms = 3"));
    assert!(e.starts_with("s.toml: task[0]"), "{e}");
    assert!(e.contains("periodd_ms"), "{e}");
}

#[test]
fn bad_values_name_file_key_and_reason() {
    assert_eq!(err_of(&RM.replace("period_ms = 4", "period_ms = -4")), "s.toml: task[0].period_ms: must not be negative (got -4)");
    assert_eq!(err_of(&RM.replace("period_ms = 4", "period_ms = 0")), "s.toml: task[0].period_ms: must be greater than 0 (got 0)");
    assert_eq!(
        err_of(&RM.replace("period_ms = 4", "period_ms = 1e-9")),
        "s.toml: task[0].period_ms: must be at least 1 ns, the simulator's resolution (got 0.000000001 ms)"
    );
    // The user wrote an array where a table belongs; serde's Rust type name stays out.
    let err = err_of("task = [\"a\"]\n[scheduler]\nkind = \"rm\"\n");
    assert!(!err.contains("Raw") && err.contains("a table"), "{err}");
    assert!(err_of(&RM.replace("wcet_ms = 1", "wcet_ms = 1\ndeadline_ms = 0")).starts_with("s.toml: task[0].deadline_ms:"));
    assert!(err_of(&RM.replace("cpus = 1", "cpus = 0")).starts_with("s.toml: machine.cpus: must be at least 1"));
    assert!(err_of(&RM.replace("\"rm\"", "\"lottery\"")).starts_with("s.toml: scheduler.kind: unknown scheduler \"lottery\""));
    assert!(err_of(&RM.replace("period_ms = 4", "")).starts_with("s.toml: task[0].period_ms: missing"));
}

#[test]
fn pinning_to_missing_cpu_is_rejected() {
    let text = RM.replace("\"rm\"", "\"pfp\"").replace("cpus = 1", "cpus = 2").replace("period_ms = 4", "period_ms = 4\ncpu = 2");
    assert_eq!(err_of(&text), "s.toml: task[0].cpu: CPU 2 does not exist: machine.cpus = 2, so CPUs are 0..1");
}

#[test]
fn syntax_error_gives_line_and_column() {
    let e = err_of("[machine]\ncpus = = 1\n");
    assert!(e.starts_with("s.toml: line 2, column"), "{e}");
    assert!(!e.contains('\n'));
}

#[test]
fn json_has_the_same_structure() {
    let s = load_json_str(
        r#"{"scheduler": {"kind": "edf"}, "task": [{"name": "x", "wcet_ms": 1, "period_ms": 5}], "run": {"horizon_ms": 10}}"#,
        "<dict>",
    )
    .unwrap();
    assert_eq!(s.scheduler.kind(), SchedulerKind::Edf);
    let e = load_json_str(r#"{"scheduler": {"kind": "edf"}, "task": [{"name": "x"}]}"#, "<dict>").unwrap_err();
    assert_eq!(e.key, "task[0].period_ms");
    let e = load_json_str(r#"{"scheduler": {"kind": "edf"}} trailing"#, "<dict>").unwrap_err();
    assert!(e.reason.contains("trailing"), "{e}");
}

#[test]
fn a_command_is_kept_for_linux_and_checked() {
    let with = |extra: &str| RM.replace("period_ms = 4", &format!("period_ms = 4\n{extra}"));
    let s = load_toml_str(&with("command = [\"python3\", \"job.py\", \"\"]\nreports_jobs = true"), "s.toml").unwrap();
    assert_eq!(s.tasks[0].command, Some(TaskCommand { argv: vec!["python3".into(), "job.py".into(), String::new()], reports_jobs: true }));
    assert_eq!(load_toml_str(RM, "s.toml").unwrap().tasks[0].command, None);
    assert_eq!(err_of(&with("command = []")), "s.toml: task[0].command: must name a program: command = [\"program\", \"arg\", ...]");
    assert_eq!(err_of(&with("command = [\"\"]")), "s.toml: task[0].command[0]: the program name is empty");
    assert_eq!(err_of(&with("command = [\"a\", \"b\\u0000\"]")), "s.toml: task[0].command[1]: contains a NUL character");
    assert!(err_of(&with("reports_jobs = true")).starts_with("s.toml: task[0].reports_jobs: applies only to a task with a command"));
    assert!(err_of(&with("command = \"ls -l\"")).starts_with("s.toml: "), "a string is not an argv");
}

#[test]
fn overrides_apply_before_defaults_and_validation() {
    // Periods whose hyperperiod is far too long to default to.
    let long = "[scheduler]\nkind = \"edf\"\n[[task]]\nname = \"a\"\nwcet_ms = 1\nperiod_ms = 99.999989\n[[task]]\nname = \"b\"\nwcet_ms = 1\nperiod_ms = 99.999971\n";
    assert_eq!(load_toml_str(long, "l.toml").unwrap_err().key, "run.horizon_ms");
    let o = Overrides { horizon_ms: Some(50.0), seed: Some(9) };
    let s = load_str(long, "l.toml", Format::Toml, &o).unwrap();
    assert_eq!((s.horizon, s.seed), (Nanos::from_ms(50), 9));
    let s = load_str(RM, "s.toml", Format::Toml, &o).unwrap();
    assert_eq!((s.horizon, s.seed), (Nanos::from_ms(50), 9), "overrides beat the file");
    let bad = Overrides { horizon_ms: Some(0.0), seed: None };
    assert_eq!(
        load_str(RM, "s.toml", Format::Toml, &bad).unwrap_err().to_string(),
        "s.toml: horizon_ms (override): must be greater than 0 (got 0)"
    );
}

#[test]
fn equal_priorities_warn_only_within_one_leaf_server() {
    let text = |b_server: &str| {
        format!(
            "[run]\nhorizon_ms = 20\n[scheduler]\nkind = \"fp\"\n\
             [[scheduler.server]]\nname = \"x\"\nkind = \"level\"\npriority = 0\n\
             [[scheduler.server]]\nname = \"y\"\nkind = \"level\"\npriority = 1\n\
             [[task]]\nname = \"a\"\nserver = \"x\"\npriority = 0\nwcet_ms = 1\nperiod_ms = 10\n\
             [[task]]\nname = \"b\"\nserver = \"{b_server}\"\npriority = 0\nwcet_ms = 1\nperiod_ms = 10\n"
        )
    };
    // In different servers each priority orders only its own server's tasks.
    assert_eq!(load_toml_str(&text("y"), "s.toml").unwrap().warnings, Vec::<String>::new());
    let same = load_toml_str(&text("x"), "s.toml").unwrap().warnings;
    assert_eq!(same.len(), 1);
    assert!(same[0].starts_with("s.toml: task[1].priority: 0 is also task[0]'s (\"a\")"), "{same:?}");
}
