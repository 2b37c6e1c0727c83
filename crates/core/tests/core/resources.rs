//! Shared resources: the classic priority inversion under each protocol, mutual exclusion and
//! unit counts over random programs, the PIP blocking bound, determinism, and the loader's
//! one-line errors.

use crate::common::seeded_config;
use critmem_core::resources::ResourceSubsystem;
use critmem_core::{load_toml_str, simulate, Nanos, Outcome, Scenario, SimOptions, SimResult, Simulation};
use proptest::prelude::*;

const OPTS: SimOptions = SimOptions { record_jobs: true, record_segments: true, check_invariants: true };

/// One CPU, fixed priorities. lo (lowest) releases at 0 and holds R for 4 ms after 1 ms of
/// compute; hi releases at 2 and takes R for 1 ms after 1 ms of compute; med (between)
/// releases at 3 and computes 10 ms without R.
pub(super) const INVERSION: &str = r#"
[scheduler]
kind = "fp"
[run]
horizon_ms = 30
[[resource]]
name = "R"
protocol = "PROTOCOL"
[[task]]
name = "hi"
priority = 1
period_ms = 100
offset_ms = 2
program = [{ compute_ms = 1 }, { lock = "R" }, { compute_ms = 1 }, { unlock = "R" }]
[[task]]
name = "med"
priority = 2
period_ms = 100
offset_ms = 3
wcet_ms = 10
[[task]]
name = "lo"
priority = 3
period_ms = 100
program = [{ compute_ms = 1 }, { lock = "R" }, { compute_ms = 4 }, { unlock = "R" }]
"#;

pub(super) fn load(text: &str) -> Scenario {
    load_toml_str(text, "res.toml").unwrap_or_else(|e| panic!("{e}"))
}

/// Response time in ms of each task's first job (hi, med, lo).
fn responses_ms(r: &SimResult) -> Vec<f64> {
    (0..3u32)
        .map(|t| {
            let j = r.jobs.iter().find(|j| j.task == t && j.index == 0).expect("released");
            (j.completion.expect("completed") - j.release).as_ms_f64()
        })
        .collect()
}

#[test]
fn the_classic_inversion_is_unbounded_without_a_protocol_and_one_section_long_with_one() {
    let inversion = |p: &str| load(&INVERSION.replace("PROTOCOL", p));
    // none: lo 0–1, takes R, 1–2; hi preempts 2–3 and blocks on R at 3; med runs 3–13; lo
    // finishes its section 13–16 and ends; hi 16–17. hi 17 − 2 = 15 (med's 10 ms inside),
    // med 13 − 3 = 10, lo 16.
    assert_eq!(responses_ms(&simulate(&inversion("none"), OPTS)), vec![15.0, 10.0, 16.0]);
    // pip through links: at 3 hi waits with a link to lo and stays the scheduler's choice, so
    // lo runs in its place 3–6 and ends; hi takes R, 6–7. med 7–17. hi 5, med 14, lo 6.
    let pip = simulate(&inversion("pip"), OPTS);
    assert_eq!(responses_ms(&pip), vec![5.0, 14.0, 6.0]);
    // srp: R's ceiling is hi's level, so from lo's lock at 1 to its unlock at 5 neither hi (2)
    // nor med (3) may start; lo runs 1–5 and ends; hi 5–7, med 7–17. hi 5, med 14, lo 5.
    let srp = simulate(&inversion("srp"), OPTS);
    assert_eq!(responses_ms(&srp), vec![5.0, 14.0, 5.0]);
    // The donor path: hi blocks off the CPU and lo inherits its priority, which keeps med
    // out 3–6: the same schedule as the links.
    let s = inversion("pip");
    let donor = ResourceSubsystem::new(&s, true).expect("tasks with programs").with_donor_inheritance();
    let by_donor = Simulation::new(&s, s.seed, OPTS, vec![Box::new(donor)]).run();
    assert_eq!(responses_ms(&by_donor), vec![5.0, 14.0, 6.0]);
    // Both bounds: hi's own 2 ms plus at most lo's 4 ms section.
    for r in [&pip, &srp, &by_donor] {
        assert!(responses_ms(r)[0] <= 2.0 + 4.0);
    }
}

#[test]
fn under_pip_the_holder_runs_in_the_chosen_waiters_place() {
    let pip = simulate(&load(&INVERSION.replace("PROTOCOL", "pip")), OPTS);
    let lo: Vec<(f64, f64)> = pip.segments.iter().filter(|s| s.task == 2).map(|s| (s.start.as_ms_f64(), s.end.as_ms_f64())).collect();
    // lo runs 0–2, is preempted by hi 2–3, and runs 3–6 for hi.
    assert_eq!(lo, vec![(0.0, 2.0), (3.0, 6.0)]);
    let stats = &pip.resources().expect("resources section").resources[0];
    // Two acquisitions, hi's contended: it waited 3 → 6; lo held R 1 → 6, hi 6 → 7.
    assert_eq!((stats.name.as_str(), stats.acquisitions, stats.contended), ("R", 2, 1));
    assert_eq!((stats.longest_wait, stats.longest_hold, stats.peak_units_held), (Nanos::from_ms(3), Nanos::from_ms(5), 1));
}

#[test]
fn under_pip_a_waiter_granted_at_an_unlock_loses_it_to_a_higher_job_that_locks_before_it_runs() {
    // One CPU. lo holds R from 0 for 3 ms; mid waits on it from 1; top waits from 2, so lo
    // runs 2–3 for it and unlocks at 3: top takes R 3–4. At 4, R goes to mid, the only
    // waiter, but hi (released at 2, above mid) runs first, 4–5, and locks R at 5: it takes
    // R from mid, which has not run with it, and holds it 5–6. mid locks again at 6, 6–9.
    // Had mid kept R, hi would have waited 5–8 on a section that began after its release:
    // two sections of blocking (lo's and mid's) where PIP's bound allows one.
    let text = r#"
[scheduler]
kind = "fp"
[run]
horizon_ms = 20
[[resource]]
name = "R"
protocol = "PROTOCOL"
[[task]]
name = "top"
priority = 1
period_ms = 100
offset_ms = 2
program = [{ lock = "R" }, { compute_ms = 1 }, { unlock = "R" }]
[[task]]
name = "hi"
priority = 2
period_ms = 100
offset_ms = 2
program = [{ compute_ms = 1 }, { lock = "R" }, { compute_ms = 1 }, { unlock = "R" }]
[[task]]
name = "mid"
priority = 3
period_ms = 100
offset_ms = 1
program = [{ lock = "R" }, { compute_ms = 3 }, { unlock = "R" }]
[[task]]
name = "lo"
priority = 4
period_ms = 100
program = [{ lock = "R" }, { compute_ms = 3 }, { unlock = "R" }]
"#;
    let completions = |r: &SimResult| -> Vec<f64> {
        (0..4u32).map(|t| r.jobs.iter().find(|j| j.task == t).and_then(|j| j.completion).expect("completed").as_ms_f64()).collect()
    };
    let s = load(&text.replace("PROTOCOL", "pip"));
    let links = simulate(&s, OPTS);
    assert_eq!(completions(&links), vec![4.0, 6.0, 9.0, 3.0]);
    let donor = ResourceSubsystem::new(&s, true).expect("tasks with programs").with_donor_inheritance();
    let by_donor = Simulation::new(&s, s.seed, OPTS, vec![Box::new(donor)]).run();
    assert_eq!(completions(&by_donor), vec![4.0, 6.0, 9.0, 3.0]);
    // The taken-back grant is not an acquisition: lo, top, hi and mid each took R once. mid
    // and top waited; hi did not (it took a pending grant), nor mid again (R was free at 6).
    let stats = &links.resources().expect("resources section").resources[0];
    assert_eq!((stats.acquisitions, stats.contended), (4, 2));
}

#[test]
fn a_k_unit_resource_lets_as_many_holders_in_as_it_has_units() {
    // Two units on two CPUs under global EDF: a and b take one each for 2 ms from 0; c,
    // released at 0.5 with the earliest deadline, needs both.
    let text = r#"
[machine]
cpus = 2
[scheduler]
kind = "gedf"
[run]
horizon_ms = 10
[[resource]]
name = "pool"
units = 2
protocol = "pip"
[[task]]
name = "a"
period_ms = 10
program = [{ lock = "pool" }, { compute_ms = 2 }, { unlock = "pool" }]
[[task]]
name = "b"
period_ms = 10
program = [{ lock = "pool" }, { compute_ms = 2 }, { unlock = "pool" }]
[[task]]
name = "c"
period_ms = 10
deadline_ms = 1
offset_ms = 0.5
program = [{ lock = "pool", units = 2 }, { compute_ms = 1 }, { unlock = "pool" }]
"#;
    let r = simulate(&load(text), OPTS);
    // At 0.5 c preempts b (same deadline as a, released later) and waits, linked to the
    // holder of higher priority, a, which already runs on CPU 0: CPU 1 stays idle. a ends at
    // 2 and gives back one unit; c, still short, links to b, which both CPUs' choices now
    // lead to: it runs its last 1.5 ms 2–3.5 on one of them. c takes both units, 3.5–4.5.
    let done: Vec<(u32, f64)> = r.jobs.iter().filter_map(|j| j.completion.map(|c| (j.task, c.as_ms_f64()))).collect();
    assert_eq!(done, vec![(0, 2.0), (1, 3.5), (2, 4.5)]);
    let idle_cpu1: Vec<(u32, f64, f64)> =
        r.segments.iter().filter(|s| s.cpu == 1).map(|s| (s.task, s.start.as_ms_f64(), s.end.as_ms_f64())).collect();
    assert!(idle_cpu1.iter().all(|&(_, start, end)| end <= 0.5 || start >= 2.0), "{idle_cpu1:?}");
    let stats = &r.resources().unwrap().resources[0];
    assert_eq!((stats.acquisitions, stats.contended, stats.peak_units_held), (3, 1, 2));
    // c waited 0.5 → 3.5.
    assert_eq!(stats.longest_wait, Nanos::from_ms(3));
}

/// A random block of a program over resources `0..RESOURCES`: compute, one section, or a
/// section with another inside it on a resource of higher index (so every lock order is
/// acyclic). Times in tenths of a ms.
#[derive(Clone, Debug)]
pub(super) enum Block {
    Compute(u32),
    Section { r: usize, units: u32, c: u32 },
    Nested { r: usize, inner: usize, c1: u32, c2: u32, c3: u32 },
}

const RESOURCES: usize = 3;

fn block() -> impl Strategy<Value = Block> {
    prop_oneof![
        (1u32..30).prop_map(Block::Compute),
        (0..RESOURCES, 1u32..=3, 1u32..30).prop_map(|(r, units, c)| Block::Section { r, units, c }),
        (0..RESOURCES - 1, 1usize..RESOURCES, 0u32..10, 1u32..20, 0u32..10).prop_map(|(r, d, c1, c2, c3)| Block::Nested {
            r,
            inner: (r + d).min(RESOURCES - 1).max(r + 1),
            c1,
            c2,
            c3
        }),
    ]
}

/// (period in ms, overrun policy, blocks) of one task.
pub(super) type TaskGen = (u32, usize, Vec<Block>);

pub(super) fn task_gen() -> impl Strategy<Value = TaskGen> {
    (prop::sample::select(vec![5u32, 8, 10, 20, 40]), 0usize..3, prop::collection::vec(block(), 1..4))
}

fn compute(tenths: u32) -> String {
    format!("{{ compute_ms = {} }}", f64::from(tenths) / 10.0)
}

/// A scenario of `tasks` on `scheduler` with three resources of `units` under `protocols`.
pub(super) fn scenario_text(scheduler: &str, units: &[u32], protocols: &[&str], tasks: &[TaskGen], overrun: bool) -> String {
    let cpus = if matches!(scheduler, "fp" | "edf") { 1 } else { 2 };
    let mut t = format!("[machine]\ncpus = {cpus}\n[scheduler]\nkind = \"{scheduler}\"\n[run]\nhorizon_ms = 120\n");
    for r in 0..RESOURCES {
        t += &format!("[[resource]]\nname = \"r{r}\"\nunits = {}\nprotocol = \"{}\"\n", units[r], protocols[r]);
    }
    for (i, (period, policy, blocks)) in tasks.iter().enumerate() {
        let mut steps = vec![compute(1)];
        for b in blocks {
            match *b {
                Block::Compute(c) => steps.push(compute(c)),
                Block::Section { r, units: u, c } => {
                    steps.push(format!("{{ lock = \"r{r}\", units = {} }}", u.min(units[r])));
                    steps.push(compute(c));
                    steps.push(format!("{{ unlock = \"r{r}\" }}"));
                }
                Block::Nested { r, inner, c1, c2, c3 } => {
                    steps.push(format!("{{ lock = \"r{r}\" }}"));
                    if c1 > 0 {
                        steps.push(compute(c1));
                    }
                    steps.push(format!("{{ lock = \"r{inner}\" }}"));
                    steps.push(compute(c2));
                    steps.push(format!("{{ unlock = \"r{inner}\" }}"));
                    if c3 > 0 {
                        steps.push(compute(c3));
                    }
                    steps.push(format!("{{ unlock = \"r{r}\" }}"));
                }
            }
        }
        let overrun = if overrun { ["continue", "abort", "skip"][*policy] } else { "skip" };
        t += &format!(
            "[[task]]\nname = \"t{i}\"\npriority = {}\nperiod_ms = {period}\noffset_ms = {}\noverrun = \"{overrun}\"\nprogram = [{}]\n",
            i + 1,
            i % 3,
            steps.join(", ")
        );
    }
    t
}

proptest! {
    #![proptest_config(seeded_config("resources_never_exceed_their_units", 48))]
    /// Over random programs, task sets, schedulers and protocols (aborts of holders included),
    /// the subsystem's checked invariant holds after every change (held plus free units equal
    /// the resource's units), no resource ever has more units out than it has, every job that
    /// completes ran exactly its program's compute, and the same scenario gives the same result.
    #[test]
    fn resources_never_exceed_their_units(
        scheduler in prop::sample::select(vec!["fp", "edf", "pfp", "gedf"]),
        units in prop::collection::vec(1u32..=3, RESOURCES),
        protocols in prop::collection::vec(prop::sample::select(vec!["none", "pip", "srp"]), RESOURCES),
        tasks in prop::collection::vec(task_gen(), 2..6),
    ) {
        let protocols: Vec<&str> =
            protocols.iter().map(|&p| if p == "srp" && scheduler == "gedf" { "pip" } else { p }).collect();
        let s = load(&scenario_text(scheduler, &units, &protocols, &tasks, true));
        let r = simulate(&s, OPTS);
        for (stats, &u) in r.resources().unwrap().resources.iter().zip(&units) {
            prop_assert!(stats.peak_units_held <= u, "{} held {} of {u} units", stats.name, stats.peak_units_held);
        }
        for j in r.jobs.iter().filter(|j| j.outcome == Outcome::Completed) {
            prop_assert_eq!(j.executed, s.tasks[j.task as usize].program.as_ref().unwrap().compute_total());
        }
        prop_assert_eq!(&r, &simulate(&s, OPTS));
    }

    /// With every resource under srp on one CPU, no lock ever waits: a job starts only when
    /// everything it may lock is free.
    #[test]
    fn under_srp_on_one_cpu_no_lock_waits(
        scheduler in prop::sample::select(vec!["fp", "edf"]),
        units in prop::collection::vec(1u32..=3, RESOURCES),
        tasks in prop::collection::vec(task_gen(), 2..6),
    ) {
        let s = load(&scenario_text(scheduler, &units, &["srp"; RESOURCES], &tasks, true));
        let r = simulate(&s, OPTS);
        let stats = &r.resources().unwrap().resources;
        prop_assert!(stats.iter().all(|st| st.contended == 0), "{stats:?}");
    }
}

/// Time in `[from, to)` during which a task of lower priority than `task` ran (fixed
/// priorities: task i has priority i + 1, so higher index is lower priority).
fn lower_priority_run(r: &SimResult, task: u32, from: Nanos, to: Nanos) -> Nanos {
    r.segments
        .iter()
        .filter(|s| s.task > task)
        .map(|s| {
            let (a, b) = (s.start.max(from), s.end.min(to));
            if b > a {
                b - a
            } else {
                Nanos::ZERO
            }
        })
        .fold(Nanos::ZERO, |acc, x| acc + x)
}

proptest! {
    #![proptest_config(seeded_config("pip_blocks_a_job_at_most_one_section_per_lower_task", 48))]
    /// One CPU, fixed priorities, every resource under pip, and no job released while its
    /// task's previous one is unfinished: while a job is pending, lower-priority tasks run
    /// only to finish sections they were in, at most the longest outermost section of each.
    #[test]
    fn pip_blocks_a_job_at_most_one_section_per_lower_task(
        units in prop::collection::vec(1u32..=3, RESOURCES),
        tasks in prop::collection::vec(task_gen(), 2..6),
    ) {
        let s = load(&scenario_text("fp", &units, &["pip"; RESOURCES], &tasks, false));
        let r = simulate(&s, OPTS);
        // Each lower task's longest outermost section: the longest section of any resource
        // it locks (a nested section lies inside its outer one).
        let longest: Vec<Nanos> = s
            .tasks
            .iter()
            .map(|t| {
                let p = t.program.as_ref().unwrap();
                p.resources().into_iter().map(|res| p.longest_section(res)).max().unwrap_or(Nanos::ZERO)
            })
            .collect();
        for j in &r.jobs {
            let end = j.completion.unwrap_or(s.horizon);
            let bound = longest[j.task as usize + 1..].iter().fold(Nanos::ZERO, |acc, &x| acc + x);
            let blocked = lower_priority_run(&r, j.task, j.release, end);
            prop_assert!(blocked <= bound, "job {} of t{}: blocked {blocked:?} > {bound:?}", j.index, j.task);
        }
    }
}

#[test]
fn the_same_scenario_and_seed_give_the_same_result() {
    for p in ["none", "pip", "srp"] {
        let s = load(&INVERSION.replace("PROTOCOL", p));
        assert_eq!(simulate(&s, OPTS), simulate(&s, OPTS), "{p}");
    }
}

fn err_of(text: &str) -> String {
    load_toml_str(text, "res.toml").unwrap_err().to_string()
}

#[test]
fn every_load_error_is_one_line_naming_file_key_and_reason() {
    let base = INVERSION.replace("PROTOCOL", "pip");
    let hi_program = r#"program = [{ compute_ms = 1 }, { lock = "R" }, { compute_ms = 1 }, { unlock = "R" }]"#;
    let with_hi = |p: &str| base.replacen(hi_program, &format!("program = [{p}]"), 1);
    let cases = [
        (with_hi(r#"{ lock = "S" }, { unlock = "S" }"#), "res.toml: task[0].program[0].lock: unknown resource \"S\" (declared: R)"),
        (
            with_hi(r#"{ lock = "R", units = 2 }, { unlock = "R" }"#),
            "res.toml: task[0].program[0].units: must be between 1 and 1, the units of \"R\" (got 2)",
        ),
        (
            with_hi(r#"{ lock = "R", units = 0 }, { unlock = "R" }"#),
            "res.toml: task[0].program[0].units: must be between 1 and 1, the units of \"R\" (got 0)",
        ),
        (
            with_hi(r#"{ compute_ms = 1 }, { unlock = "R" }"#),
            "res.toml: task[0].program[1].unlock: \"R\" is not held at this point of the program",
        ),
        (
            with_hi(r#"{ lock = "R" }, { compute_ms = 1 }"#),
            "res.toml: task[0].program: ends with \"R\" still held; unlock it before the end",
        ),
        (
            with_hi(r#"{ compute_ms = 1, lock = "R" }"#),
            "res.toml: task[0].program[0]: give exactly one of compute_ms, compute_share, compute_rest, suspend_ms, lock, unlock and access",
        ),
        (
            base.replacen(
                "offset_ms = 2\nprogram",
                "offset_ms = 2\nwcet_ms = 1\nexec = { dist = \"uniform\", min_ms = 1, max_ms = 2 }\nprogram",
                1,
            ),
            "res.toml: task[0].exec: give either wcet_ms or exec, not both",
        ),
        (
            base.replace("protocol = \"pip\"", "protocol = \"pip\"\nunits = 0"),
            "res.toml: resource[0].units: must be between 1 and 1048576 (got 0)",
        ),
        (
            base.replace("protocol = \"pip\"", "protocol = \"pcp\""),
            "res.toml: resource[0].protocol: unknown protocol \"pcp\"; expected none, pip or srp",
        ),
    ];
    for (text, want) in cases {
        assert_eq!(err_of(&text), want);
    }
    // Out of LIFO order.
    let two = base.replace("[[task]]\nname = \"hi\"", "[[resource]]\nname = \"S\"\n[[task]]\nname = \"hi\"");
    let lifo = two.replacen(
        hi_program,
        r#"program = [{ lock = "R" }, { lock = "S" }, { compute_ms = 1 }, { unlock = "R" }, { unlock = "S" }]"#,
        1,
    );
    assert_eq!(
        err_of(&lifo),
        "res.toml: task[0].program[3].unlock: unlocks \"R\" out of order: \"S\", locked inside it, is still held (unlock innermost first)"
    );
    // hi takes R then S inside it, lo takes S then R.
    let lo_program = r#"program = [{ compute_ms = 1 }, { lock = "R" }, { compute_ms = 4 }, { unlock = "R" }]"#;
    let cycle = two
        .replacen(hi_program, r#"program = [{ lock = "R" }, { lock = "S" }, { compute_ms = 1 }, { unlock = "S" }, { unlock = "R" }]"#, 1)
        .replacen(lo_program, r#"program = [{ lock = "S" }, { lock = "R" }, { compute_ms = 1 }, { unlock = "R" }, { unlock = "S" }]"#, 1);
    assert_eq!(err_of(&cycle), "res.toml: task[2].program: possible deadlock: tasks hi, lo take resources R and S in opposite orders");
}

#[test]
fn a_tasks_wcet_is_its_programs_compute() {
    let s = load(&INVERSION.replace("PROTOCOL", "none"));
    // hi: 1 + 1; lo: 1 + 4.
    assert_eq!(s.tasks[0].exec.wcet(), Nanos::from_ms(2));
    assert_eq!(s.tasks[2].exec.wcet(), Nanos::from_ms(5));
}

#[test]
fn a_longer_cycle_of_lock_orders_is_refused_with_every_task_in_it() {
    // a takes B inside A, b takes C inside B, c takes A inside C: A → B → C → A.
    let nested = |outer: &str, inner: &str| {
        format!(
            "program = [{{ lock = \"{outer}\" }}, {{ lock = \"{inner}\" }}, {{ compute_ms = 1 }}, {{ unlock = \"{inner}\" }}, {{ unlock = \"{outer}\" }}]"
        )
    };
    let mut text = String::from("[scheduler]\nkind = \"edf\"\n[run]\nhorizon_ms = 10\n");
    for r in ["A", "B", "C"] {
        text += &format!("[[resource]]\nname = \"{r}\"\n");
    }
    for (t, (outer, inner)) in ["a", "b", "c"].iter().zip([("A", "B"), ("B", "C"), ("C", "A")]) {
        text += &format!("[[task]]\nname = \"{t}\"\nperiod_ms = 10\n{}\n", nested(outer, inner));
    }
    assert_eq!(err_of(&text), "res.toml: task[2].program: possible deadlock: tasks a, b, c take resources A, B, C in a cyclic order");
    // Taking them in one order everywhere is fine.
    let ordered = text
        .replace("{ lock = \"C\" }, { lock = \"A\" }", "{ lock = \"A\" }, { lock = \"C\" }")
        .replace("{ unlock = \"A\" }, { unlock = \"C\" }", "{ unlock = \"C\" }, { unlock = \"A\" }");
    load(&ordered);
}

#[test]
fn a_job_ending_with_an_unlock_completes_when_its_compute_ends() {
    // lo computes 1, takes R, computes 3 and gives R back: its compute ends at 4, the instant
    // hi is released. The unlock is the end of that compute, so lo completes at 4 (response
    // 4 ms) and hi runs 4–6; lo does not wait for hi to give it the CPU back to unlock.
    for protocol in ["none", "pip", "srp"] {
        let text = format!(
            r#"
[scheduler]
kind = "fp"
[run]
horizon_ms = 10
[[resource]]
name = "R"
protocol = "{protocol}"
[[task]]
name = "hi"
priority = 1
period_ms = 10
offset_ms = 4
program = [{{ compute_ms = 1 }}, {{ lock = "R" }}, {{ compute_ms = 1 }}, {{ unlock = "R" }}]
[[task]]
name = "lo"
priority = 2
period_ms = 10
program = [{{ compute_ms = 1 }}, {{ lock = "R" }}, {{ compute_ms = 3 }}, {{ unlock = "R" }}]
"#
        );
        let r = simulate(&load(&text), SimOptions { record_jobs: true, record_segments: false, check_invariants: true });
        let response = |t: u32| r.jobs.iter().find(|j| j.task == t).map(|j| (j.completion.expect("completed") - j.release).as_ms_f64());
        assert_eq!((response(0), response(1)), (Some(2.0), Some(4.0)), "{protocol}");
    }
}
