//! Components and synchronous invocations: a fixed call tree's exact response time with entry
//! costs, waiting for an execution stack under inherit and block, call frequencies and
//! determinism of drawn call trees, the stack bound and per-job accounting over random call
//! graphs, and the loader's one-line errors.

use crate::common::seeded_config;
use critmem_core::resources::{ComponentStats, JobCalls, ResourceSubsystem};
use critmem_core::{load_toml_str, simulate, Nanos, Outcome, Scenario, SimOptions, SimResult, Simulation};
use proptest::prelude::*;

const OPTS: SimOptions = SimOptions { record_jobs: true, record_segments: true, check_invariants: true };

fn load(text: &str) -> Scenario {
    load_toml_str(text, "comp.toml").unwrap_or_else(|e| panic!("{e}"))
}

fn err_of(text: &str) -> String {
    load_toml_str(text, "comp.toml").unwrap_err().to_string()
}

fn components(r: &SimResult) -> &[ComponentStats] {
    &r.resources().expect("a resources section").components
}

/// Response time in ms of job `index` of task `task`.
fn response_ms(r: &SimResult, task: u32, index: u64) -> f64 {
    let j = r.jobs.iter().find(|j| j.task == task && j.index == index).expect("released");
    (j.completion.expect("completed") - j.release).as_ms_f64()
}

/// web calls fs, which calls disk; every probability is 1.
const TREE: &str = r#"
[scheduler]
kind = "fp"
[run]
horizon_ms = 20
[components]
invocation_cost_us = 500
[[component]]
name = "fs"
program = [{ compute_ms = 1 }, { call = "disk" }, { compute_ms = 0.5 }]
[[component]]
name = "disk"
invocation_cost_us = 250
program = [{ compute_ms = 2 }]
[[task]]
name = "hi"
priority = 1
period_ms = 5
wcet_ms = 1
[[task]]
name = "web"
priority = 2
period_ms = 20
program = [{ compute_ms = 1 }, { call = "fs" }, { compute_ms = 1 }]
"#;

#[test]
fn a_fixed_call_tree_takes_its_compute_plus_every_entry_cost() {
    let s = load(TREE);
    // web: 1 + fs (0.5 entry + 1 + disk (0.25 entry + 2) + 0.5) + 1 = 6.25 ms.
    assert_eq!(s.tasks[1].exec.wcet(), Nanos::from_us(6250));
    let r = simulate(&s, OPTS);
    // hi 0–1, web 1–5 (4 of its 6.25 ms), hi 5–6, web 6–8.25: response 8.25 ms.
    assert_eq!(response_ms(&r, 1, 0), 8.25);
    let web = r.jobs.iter().find(|j| j.task == 1).unwrap();
    assert_eq!(web.executed, Nanos::from_us(6250));
    let c = components(&r);
    assert_eq!((c[0].name.as_str(), c[0].invocations, c[0].peak_concurrent_invocations, c[0].stack_waits), ("fs", 1, 1, 0));
    assert_eq!((c[1].name.as_str(), c[1].invocations), ("disk", 1));
    let calls = &r.resources().unwrap().job_calls;
    assert_eq!(calls, &vec![JobCalls { task: 1, index: 0, invocations: vec![1, 1] }]);
    // The summary lists the components.
    let json: serde_json::Value = serde_json::from_str(&r.to_json()).unwrap();
    assert_eq!(json["components"][0]["name"], "fs");
    assert_eq!(json["components"][1]["invocations"], 1);
    assert_eq!(json["components"][0]["stacks"], serde_json::Value::Null);
}

/// One stack in fs. lo enters fs at 0 for 4 ms; hi, released at 1, computes 1 ms and calls
/// fs at 2; med (no calls, 10 ms) arrives at 2.5.
const ONE_STACK: &str = r#"
[scheduler]
kind = "fp"
[run]
horizon_ms = 30
[[component]]
name = "fs"
stacks = 1
stack_wait = "WAIT"
program = [{ compute_ms = 4 }]
[[task]]
name = "hi"
priority = 1
period_ms = 100
offset_ms = 1
program = [{ compute_ms = 1 }, { call = "fs" }]
[[task]]
name = "med"
priority = 2
period_ms = 100
offset_ms = 2.5
wcet_ms = 10
[[task]]
name = "lo"
priority = 3
period_ms = 100
program = [{ call = "fs" }]
"#;

#[test]
fn a_caller_without_a_stack_waits_one_invocation_under_inherit_and_longer_under_block() {
    let inherit = simulate(&load(&ONE_STACK.replace("WAIT", "inherit")), OPTS);
    // lo in fs 0–1; hi 1–2, finds fs's stack held and waits linked to lo, so lo runs in its
    // place 2–5 (its 3 ms left; med, released at 2.5, stays out) and returns; hi gets the
    // stack, fs 5–9. hi 9 − 1 = 8, med 9–19: 16.5, lo 5.
    assert_eq!([response_ms(&inherit, 0, 0), response_ms(&inherit, 1, 0), response_ms(&inherit, 2, 0)], [8.0, 16.5, 5.0]);
    let fs = &components(&inherit)[0];
    // hi waited 2 → 5: one invocation of lo, no more.
    assert_eq!((fs.invocations, fs.peak_concurrent_invocations, fs.stack_waits), (2, 1, 1));
    assert_eq!((fs.longest_stack_wait, fs.total_stack_wait), (Nanos::from_ms(3), Nanos::from_ms(3)));
    // Through priority donors instead of links: lo inherits hi's priority while hi waits,
    // which keeps med out just the same.
    let s = load(&ONE_STACK.replace("WAIT", "inherit"));
    let donor = ResourceSubsystem::new(&s, true).expect("components").with_donor_inheritance();
    let by_donor = Simulation::new(&s, s.seed, OPTS, vec![Box::new(donor)]).run();
    assert_eq!([response_ms(&by_donor, 0, 0), response_ms(&by_donor, 1, 0), response_ms(&by_donor, 2, 0)], [8.0, 16.5, 5.0]);

    let block = simulate(&load(&ONE_STACK.replace("WAIT", "block")), OPTS);
    // hi blocks off the CPU at 2; lo 2–2.5 (2.5 ms left), med 2.5–12.5, lo 12.5–15 returns;
    // hi fs 15–19. hi 18, med 10, lo 15: hi waited 2 → 15, med's 10 ms inside.
    assert_eq!([response_ms(&block, 0, 0), response_ms(&block, 1, 0), response_ms(&block, 2, 0)], [18.0, 10.0, 15.0]);
    let fs = &components(&block)[0];
    assert_eq!((fs.stack_waits, fs.longest_stack_wait, fs.total_stack_wait), (1, Nanos::from_ms(13), Nanos::from_ms(13)));
    assert_eq!(components(&block)[0].stack_wait, "block");
}

/// A task calling fs with probability 0.3 every 1 ms; fs calls disk with probability 0.5.
const FREQUENT: &str = r#"
[scheduler]
kind = "rm"
[run]
horizon_ms = 10000
seed = SEED
[[component]]
name = "fs"
program = [{ compute_ms = 0.1 }, { call = "disk", probability = 0.5 }]
[[component]]
name = "disk"
program = [{ compute_ms = 0.1 }]
[[task]]
name = "t"
period_ms = 1
program = [{ compute_ms = 0.1 }, { call = "fs", probability = 0.3 }]
"#;

/// Whether `k` successes of `n` trials lie within five standard deviations of `n·p`.
fn within_binomial_bound(k: u64, n: u64, p: f64) -> bool {
    let (n, k) = (n as f64, k as f64);
    (k - n * p).abs() <= 5.0 * (n * p * (1.0 - p)).sqrt()
}

#[test]
fn calls_are_made_as_often_as_their_probability_and_the_seed_fixes_the_call_tree() {
    let s = load(&FREQUENT.replace("SEED", "1"));
    let r = simulate(&s, OPTS);
    let c = components(&r);
    // 10 000 jobs: fs about 3 000 times (sd √(10⁴·0.3·0.7) ≈ 46), disk about half of those.
    assert_eq!(r.tasks[0].stats.completed, 10_000);
    assert!(within_binomial_bound(c[0].invocations, 10_000, 0.3), "fs {}", c[0].invocations);
    assert!(within_binomial_bound(c[1].invocations, c[0].invocations, 0.5), "disk {} of {}", c[1].invocations, c[0].invocations);
    // The per-job counts add up to the totals.
    let calls = &r.resources().unwrap().job_calls;
    assert_eq!(calls.len(), 10_000);
    assert_eq!(calls.iter().map(|j| u64::from(j.invocations[0])).sum::<u64>(), c[0].invocations);
    // Same seed, same call trees; another seed, other ones.
    assert_eq!(r, simulate(&s, OPTS));
    let other = simulate(&load(&FREQUENT.replace("SEED", "2")), OPTS);
    assert_ne!(calls, &other.resources().unwrap().job_calls);
}

#[test]
fn the_brief_example_loads_with_a_lock_held_across_a_call() {
    let text = r#"
[scheduler]
kind = "rm"
[run]
horizon_ms = 10
[components]
invocation_cost_us = 0.5
[[resource]]
name = "m"
protocol = "pip"
[[component]]
name = "fs"
stacks = 2
stack_wait = "inherit"
invocation_cost_us = 1.0
program = [{ compute_ms = 0.2 }, { call = "disk", probability = 0.5 }, { compute_ms = 0.1 }]
[[component]]
name = "disk"
program = [{ compute_ms = 0.3 }]
[[component]]
name = "unused"
[[task]]
name = "web"
period_ms = 5
program = [{ compute_ms = 0.1 }, { call = "fs" }, { lock = "m" }, { call = "fs", probability = 0.3 }, { unlock = "m" }]
"#;
    let s = load(text);
    // disk: 0.5 µs + 300 µs = 300.5; fs: 1 + 200 + 300.5 + 100 = 601.5; web: 100 + 2·601.5
    // = 1303 µs.
    assert_eq!(s.tasks[0].exec.wcet(), Nanos(1_303_000));
    let r = simulate(&s, OPTS);
    assert_eq!(r.tasks[0].stats.completed, 2);
    assert_eq!(components(&r)[2].invocations, 0);
}

#[test]
fn every_component_load_error_is_one_line_naming_file_key_and_reason() {
    let base = TREE.to_string();
    let cases = [
        (
            base.replace(r#"{ call = "disk" }"#, r#"{ call = "tape" }"#),
            "comp.toml: component[0].program[1].call: unknown component \"tape\" (declared: fs, disk)",
        ),
        (
            base.replace(r#"program = [{ compute_ms = 2 }]"#, r#"program = [{ compute_ms = 2 }, { call = "fs" }]"#),
            "comp.toml: component[1].program: calls form a cycle: fs -> disk -> fs; calls between components must not form one",
        ),
        (
            base.replace(r#"program = [{ compute_ms = 2 }]"#, r#"program = [{ call = "disk" }]"#),
            "comp.toml: component[1].program: \"disk\" calls itself; calls between components must not form a cycle",
        ),
        (
            base.replace(r#"{ call = "fs" }"#, r#"{ call = "fs", probability = 1.5 }"#),
            "comp.toml: task[1].program[1].probability: must be between 0 and 1 (got 1.5)",
        ),
        (
            base.replace(r#"{ call = "fs" }"#, r#"{ call = "fs", probability = -0.5 }"#),
            "comp.toml: task[1].program[1].probability: must be between 0 and 1 (got -0.5)",
        ),
        (
            base.replace("name = \"fs\"\n", "name = \"fs\"\nstacks = 0\n"),
            "comp.toml: component[0].stacks: must be between 1 and 1048576 (got 0)",
        ),
        (
            base.replace("name = \"disk\"", "name = \"fs\""),
            "comp.toml: component[1].name: duplicate component name \"fs\" (also component[0])",
        ),
        (
            base.replace("name = \"fs\"\n", "name = \"fs\"\nstack_wait = \"block\"\n"),
            "comp.toml: component[0].stack_wait: applies only with stacks or cbufs (without them every invocation gets its own)",
        ),
        (
            base.replace("name = \"fs\"\n", "name = \"fs\"\nstacks = 1\nstack_wait = \"spin\"\n"),
            "comp.toml: component[0].stack_wait: unknown stack wait \"spin\"; expected inherit or block",
        ),
        (
            base.replace("invocation_cost_us = 500", "invocation_cost_us = -1"),
            "comp.toml: components.invocation_cost_us: must not be negative (got -0.001)",
        ),
        (
            base.replace(r#"{ compute_ms = 1 }, { call = "fs" }"#, r#"{ compute_ms = 1, call = "fs" }"#),
            "comp.toml: task[1].program[0]: give exactly one of compute_ms, compute_share, compute_rest, suspend_ms, lock, unlock, call, call_one_of, cbuf and access",
        ),
        (
            base.replace(r#"{ compute_ms = 1 }, { call = "fs" }"#, r#"{ compute_ms = 1, probability = 0.5 }, { call = "fs" }"#),
            "comp.toml: task[1].program[0].probability: applies only to a call",
        ),
    ];
    for (text, want) in cases {
        assert_eq!(err_of(&text), want);
    }
    // A component must give back what it locks before it returns.
    let with_m = format!("[[resource]]\nname = \"m\"\n{base}");
    assert_eq!(
        err_of(&with_m.replace(r#"program = [{ compute_ms = 2 }]"#, r#"program = [{ lock = "m" }, { compute_ms = 2 }]"#)),
        "comp.toml: component[1].program: returns with \"m\" still held; a component unlocks what it locks before it returns"
    );
    // A caller holding m calls fs, which takes m through disk.
    let relock = with_m
        .replace(r#"program = [{ compute_ms = 2 }]"#, r#"program = [{ lock = "m" }, { compute_ms = 2 }, { unlock = "m" }]"#)
        .replace(r#"{ compute_ms = 1 }, { call = "fs" }"#, r#"{ lock = "m" }, { call = "fs" }, { unlock = "m" }"#);
    assert_eq!(
        err_of(&relock),
        "comp.toml: task[1].program: possible deadlock: tasks web can take m again while holding it (through a call)"
    );
    // fs takes n inside m; web takes m inside n.
    let with_mn = format!("[[resource]]\nname = \"m\"\n[[resource]]\nname = \"n\"\n{base}");
    let opposite = with_mn
        .replace(
            r#"program = [{ compute_ms = 1 }, { call = "disk" }"#,
            r#"program = [{ lock = "m" }, { lock = "n" }, { compute_ms = 1 }, { unlock = "n" }, { unlock = "m" }, { call = "disk" }"#,
        )
        .replace(
            r#"{ compute_ms = 1 }, { call = "fs" }, { compute_ms = 1 }"#,
            r#"{ lock = "n" }, { lock = "m" }, { compute_ms = 1 }, { unlock = "m" }, { unlock = "n" }, { call = "fs" }"#,
        );
    assert_eq!(
        err_of(&opposite),
        "comp.toml: task[1].program: possible deadlock: tasks web and components fs take resources m and n in opposite orders"
    );
    // A component no one calls is fine, and so is one without a program.
    load(&format!("{base}[[component]]\nname = \"idle\"\n"));
}

/// A random block of a component's or task's program. Calls go only to components of higher
/// index (so the call graph is acyclic); sections contain no calls (so lock orders are too).
#[derive(Clone, Debug)]
pub(super) enum Block {
    Compute(u32),
    Section { r: usize, c: u32 },
    Call { to: usize, p: usize },
}

pub(super) const COMPONENTS: usize = 4;
const PROBABILITIES: [f64; 5] = [1.0, 1.0, 0.5, 0.25, 0.0];

pub(super) fn block() -> impl Strategy<Value = Block> {
    prop_oneof![
        (1u32..20).prop_map(Block::Compute),
        (0usize..2, 1u32..20).prop_map(|(r, c)| Block::Section { r, c }),
        (0..COMPONENTS, 0..PROBABILITIES.len()).prop_map(|(to, p)| Block::Call { to, p }),
        (0..COMPONENTS, 0..PROBABILITIES.len()).prop_map(|(to, p)| Block::Call { to, p }),
    ]
}

fn program(blocks: &[Block], above: Option<usize>) -> String {
    let mut steps = Vec::new();
    for b in blocks {
        match *b {
            Block::Compute(c) => steps.push(format!("{{ compute_ms = {} }}", f64::from(c) / 10.0)),
            Block::Section { r, c } => {
                steps.push(format!("{{ lock = \"r{r}\" }}, {{ compute_ms = {} }}, {{ unlock = \"r{r}\" }}", f64::from(c) / 10.0));
            }
            Block::Call { to, p } => {
                if above.is_none_or(|a| to > a) {
                    steps.push(format!("{{ call = \"c{to}\", probability = {} }}", PROBABILITIES[p]));
                }
            }
        }
    }
    steps.join(", ")
}

/// (stacks, inherit?, entry cost in µs, blocks) of one component.
pub(super) type ComponentGen = (u32, bool, u32, Vec<Block>);

pub(super) fn scenario_text(scheduler: &str, comps: &[ComponentGen], tasks: &[(u32, bool, Vec<Block>)]) -> String {
    let cpus = if matches!(scheduler, "fp" | "edf") { 1 } else { 2 };
    let mut t = format!("[machine]\ncpus = {cpus}\n[scheduler]\nkind = \"{scheduler}\"\n[run]\nhorizon_ms = 120\nseed = 7\n");
    t += "[[resource]]\nname = \"r0\"\nprotocol = \"pip\"\n[[resource]]\nname = \"r1\"\n";
    for (i, (stacks, inherit, cost, blocks)) in comps.iter().enumerate() {
        let wait = if *inherit { "inherit" } else { "block" };
        t += &format!(
            "[[component]]\nname = \"c{i}\"\nstacks = {stacks}\nstack_wait = \"{wait}\"\ninvocation_cost_us = {cost}\nprogram = [{}]\n",
            // Half a millisecond in every invocation, so callers overlap and wait for stacks.
            ["{ compute_ms = 0.5 }".to_string(), program(blocks, Some(i))].join(", ").trim_end_matches(", ")
        );
    }
    for (i, (period, abort, blocks)) in tasks.iter().enumerate() {
        let overrun = if *abort { "abort" } else { "skip" };
        t += &format!(
            "[[task]]\nname = \"t{i}\"\npriority = {}\nperiod_ms = {period}\noffset_ms = {}\noverrun = \"{overrun}\"\nprogram = [{{ compute_ms = 0.1 }}, {}]\n",
            i + 1,
            i % 3,
            program(blocks, None)
        );
    }
    t
}

proptest! {
    #![proptest_config(seeded_config("stacks_bound_invocations_and_jobs_run_their_drawn_call_trees", 48))]
    /// Over random call graphs, stack counts, waits and schedulers (aborts of callers inside
    /// components included), the subsystem's checked invariants hold after every change, no
    /// component ever has more invocations at once than stacks, every completed job ran its
    /// own compute plus, for each invocation it made, the callee's entry cost and own compute,
    /// and the same scenario gives the same result.
    #[test]
    fn stacks_bound_invocations_and_jobs_run_their_drawn_call_trees(
        scheduler in prop::sample::select(vec!["fp", "edf", "pfp", "gedf", "gfp"]),
        comps in prop::collection::vec((1u32..=2, any::<bool>(), 0u32..300, prop::collection::vec(block(), 0..4)), COMPONENTS),
        tasks in prop::collection::vec((prop::sample::select(vec![5u32, 8, 10, 20]), any::<bool>(), prop::collection::vec(block(), 1..4)), 2..6),
    ) {
        let s = load(&scenario_text(scheduler, &comps, &tasks));
        let r = simulate(&s, OPTS);
        let section = r.resources().unwrap();
        for (stats, spec) in section.components.iter().zip(&s.components) {
            prop_assert!(stats.peak_concurrent_invocations <= spec.stacks.unwrap(), "{} ran {} at once", stats.name, stats.peak_concurrent_invocations);
        }
        // What one invocation of each component runs besides its calls.
        let own: Vec<Nanos> = s.components.iter().map(|c| c.invocation_cost + c.program.compute_total()).collect();
        for j in r.jobs.iter().filter(|j| j.outcome == Outcome::Completed) {
            let calls = section.job_calls.iter().find(|c| c.task == j.task && c.index == j.index).expect("an ended job's calls");
            let expected = calls.invocations.iter().zip(&own).fold(
                s.tasks[j.task as usize].program.as_ref().unwrap().compute_total(),
                |acc, (&n, &t)| acc + Nanos(u64::from(n) * t.0),
            );
            prop_assert_eq!(j.executed, expected, "job {} of t{}", j.index, j.task);
            prop_assert!(j.executed <= s.tasks[j.task as usize].exec.wcet());
        }
        prop_assert_eq!(&r, &simulate(&s, OPTS));
    }
}
