//! The stack resource policy composed with the rest: memory, suspension and controllers on
//! other tasks, global and hierarchical schedulers, MC²'s levels; refused only for a job that
//! locks an SRP resource and can suspend.

use critmem_core::{load_toml_str, simulate, SimOptions, SimResult};

const OPTS: SimOptions = SimOptions { record_jobs: true, record_segments: false, check_invariants: true };

fn run(text: &str) -> SimResult {
    let scenario = load_toml_str(text, "srp.toml").unwrap_or_else(|e| panic!("{e}"));
    simulate(&scenario, OPTS)
}

fn err_of(text: &str) -> String {
    load_toml_str(text, "srp.toml").expect_err("refused").to_string()
}

/// Kinds of wait each task's jobs had, by resource name.
fn waits_on(r: &SimResult, task: &str) -> Vec<String> {
    let t = r.tasks.iter().position(|t| t.name == task).expect("task") as u32;
    r.resources().expect("resources").waits.iter().filter(|w| w.task == t).map(|w| w.resource.clone()).collect()
}

/// hi and lo share R under SRP; a third task pages through memory, suspending on its faults.
const WITH_A_PAGER: &str = r#"
[machine]
cpus = 1
[scheduler]
kind = "fp"
[run]
horizon_ms = 200
[memory]
total_mb = 64
swap = "fast-ssd"
[[reservation]]
name = "small"
size_mb = 1
[[resource]]
name = "R"
protocol = "srp"
[[task]]
name = "hi"
priority = 1
period_ms = 50
offset_ms = 2
program = [{ compute_ms = 1 }, { lock = "R" }, { compute_ms = 1 }, { unlock = "R" }]
[[task]]
name = "pager"
priority = 2
period_ms = 50
offset_ms = 1
wcet_ms = 3
reservation = "small"
private_mb = 2
access = [{ pattern = "sweep", mb = 2, writes = 1.0 }]
[[task]]
name = "lo"
priority = 3
period_ms = 50
program = [{ compute_ms = 1 }, { lock = "R" }, { compute_ms = 4 }, { unlock = "R" }]
"#;

#[test]
fn srp_users_are_held_back_at_their_start_while_a_task_without_resources_pages_beside_them() {
    let r = run(WITH_A_PAGER);
    let pager = &r.memory().unwrap().tasks[1];
    assert!(pager.fault_wait > critmem_core::Nanos::ZERO, "the pager outgrows its reservation and waits for the device");
    // hi never waits at its lock: SRP holds it back at its start while lo holds R.
    let hi = waits_on(&r, "hi");
    assert!(!hi.is_empty() && hi.iter().all(|w| w == "R"), "hi's waits are SRP hold-backs on R's ceiling: {hi:?}");
    let stats = r.resources().unwrap().resources[0].clone();
    assert_eq!(stats.contended, 0, "no lock of R ever waits under SRP");
    assert!(r.tasks.iter().all(|t| t.stats.completed > 0));
}

#[test]
fn srp_scopes_follow_the_scheduler_global_leaf_servers_and_mc2_levels() {
    let inversion = r#"
[[resource]]
name = "R"
protocol = "srp"
[[task]]
name = "hi"
period_ms = 50
offset_ms = 2
criticality = "C"
program = [{ compute_ms = 1 }, { lock = "R" }, { compute_ms = 1 }, { unlock = "R" }]
[[task]]
name = "lo"
period_ms = 60
criticality = "C"
program = [{ compute_ms = 1 }, { lock = "R" }, { compute_ms = 4 }, { unlock = "R" }]
"#;
    // One scope for the whole machine under global EDF.
    let global = run(&format!("[machine]\ncpus = 2\n[scheduler]\nkind = \"gedf\"\n[run]\nhorizon_ms = 100\n{inversion}"));
    assert_eq!(global.resources().unwrap().resources[0].contended, 0);
    assert!(global.tasks.iter().all(|t| t.stats.deadline_misses == 0));
    // A leaf server's tasks share a scope.
    let served = run(&format!(
        "[scheduler]\nkind = \"fp\"\n[[scheduler.server]]\nname = \"s\"\nkind = \"deferrable\"\nbudget_ms = 8\nperiod_ms = 10\npriority = 1\npolicy = \"edf\"\n[run]\nhorizon_ms = 100\n{}",
        inversion.replace("criticality = \"C\"", "criticality = \"C\"\nserver = \"s\"")
    ));
    assert_eq!(served.resources().unwrap().resources[0].contended, 0);
    assert!(served.tasks.iter().all(|t| t.stats.completed > 0));
    // MC²'s level C is one scope, by deadline.
    let levels = run(&format!("[machine]\ncpus = 2\n[scheduler]\nkind = \"mc2\"\n[run]\nhorizon_ms = 100\n{inversion}"));
    assert_eq!(levels.resources().unwrap().resources[0].contended, 0);
    assert!(levels.tasks.iter().all(|t| t.stats.completed > 0));
}

#[test]
fn a_job_that_locks_an_srp_resource_and_can_fault_is_refused_naming_it() {
    let lo_pages = WITH_A_PAGER.replace(
        r#"program = [{ compute_ms = 1 }, { lock = "R" }, { compute_ms = 4 }, { unlock = "R" }]"#,
        r#"reservation = "small"
private_mb = 2
program = [{ compute_ms = 1 }, { lock = "R" }, { access = [{ pattern = "sweep", mb = 2 }], compute_ms = 4 }, { unlock = "R" }]"#,
    );
    assert_eq!(
        err_of(&lo_pages),
        "srp.toml: task[2].program[2].access: task \"lo\" uses srp resource \"R\", which assumes jobs that never suspend, but it touches pages that may be paged out and faulted back in (keep them resident: a hard reservation that holds every page charged to it, or level A/B with a cpu on the mc2 layout); use pip or none for \"R\""
    );
    // A reservation that holds every page charged to it never evicts: the same job composes.
    let resident = lo_pages
        .replace("name = \"small\"\nsize_mb = 1", "name = \"small\"\nsize_mb = 1\n[[reservation]]\nname = \"big\"\nsize_mb = 4")
        .replacen("reservation = \"small\"\nprivate_mb = 2\nprogram", "reservation = \"big\"\nprivate_mb = 2\nprogram", 1);
    let r = run(&resident);
    assert_eq!(r.memory().unwrap().tasks[2].stats.major_faults, 0);
    assert_eq!(r.resources().unwrap().resources[0].contended, 0);
    // Self-suspension, outside the critical section.
    let sleeper = WITH_A_PAGER.replace(
        r#"program = [{ compute_ms = 1 }, { lock = "R" }, { compute_ms = 4 }, { unlock = "R" }]"#,
        r#"program = [{ compute_ms = 1 }, { suspend_ms = 1 }, { lock = "R" }, { compute_ms = 4 }, { unlock = "R" }]"#,
    );
    assert_eq!(
        err_of(&sleeper),
        "srp.toml: task[2].program[1].suspend_ms: task \"lo\" uses srp resource \"R\", which assumes jobs that never suspend, but it self-suspends; use pip or none for \"R\""
    );
}

#[test]
fn a_pinned_level_b_task_on_the_mc2_layout_pages_nothing_and_composes_with_srp() {
    let text = r#"
[machine]
cpus = 2
[scheduler]
kind = "pfp"
[run]
horizon_ms = 100
[memory]
total_mb = 512
layout = "mc2"
[[resource]]
name = "R"
protocol = "srp"
[[task]]
name = "hi"
priority = 1
cpu = 0
criticality = "B"
period_ms = 20
offset_ms = 2
private_mb = 1
program = [{ lock = "R" }, { access = [{ pattern = "sweep", mb = 1 }], compute_ms = 1 }, { unlock = "R" }]
[[task]]
name = "lo"
priority = 2
cpu = 0
criticality = "B"
period_ms = 30
private_mb = 1
program = [{ compute_ms = 1 }, { lock = "R" }, { compute_ms = 3 }, { unlock = "R" }]
"#;
    let r = run(text);
    let hi = r.memory().unwrap().tasks[0].stats;
    assert_eq!((hi.major_faults, hi.resident_pages), (0, 256), "first touches only, then resident");
    assert_eq!(r.resources().unwrap().resources[0].contended, 0);
}
