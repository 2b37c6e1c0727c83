//! TMEM in the simulator: budgets and exclusive calls, cbufs, caches growing from the pool and
//! shrinking with their lag, priority inheritance on a cache, the contention data a memory
//! scheduler observes, unit conservation over random workloads, and the loader's one-line
//! errors.

use crate::common::seeded_config;
use critmem_core::resources::TmemResult;
use critmem_core::{load_toml_str, simulate, simulate_with_memory_scheduler, Scenario, SimOptions, SimResult};
use critmem_policy::tmem::{MemoryScheduler, SetDesired, TmemObservation, MEMORY_SCHEDULERS};
use proptest::prelude::*;
use std::sync::{Arc, Mutex};

const OPTS: SimOptions = SimOptions { record_jobs: true, record_segments: false, check_invariants: true };

fn load(text: &str) -> Scenario {
    load_toml_str(text, "tmem.toml").unwrap_or_else(|e| panic!("{e}"))
}

fn err_of(text: &str) -> String {
    load_toml_str(text, "tmem.toml").unwrap_err().to_string()
}

fn tmem(r: &SimResult) -> &TmemResult {
    r.resources().and_then(|r| r.tmem.as_ref()).expect("a tmem section")
}

/// δ of every cache from the run's index and its observation.
type DesiredFn = Box<dyn Fn(usize, &TmemObservation) -> Vec<Option<u32>> + Send>;

/// Sets δ from a function of the run's index, and keeps every observation.
struct Probe {
    desired: DesiredFn,
    seen: Arc<Mutex<Vec<TmemObservation>>>,
}

impl MemoryScheduler for Probe {
    fn name(&self) -> &'static str {
        "probe"
    }
    fn schedule(&mut self, obs: &TmemObservation) -> Vec<SetDesired> {
        let mut seen = self.seen.lock().unwrap();
        let run = seen.len();
        seen.push(obs.clone());
        (self.desired)(run, obs).into_iter().enumerate().map(|(cache, units)| SetDesired { cache, units }).collect()
    }
}

type Seen = Arc<Mutex<Vec<TmemObservation>>>;

fn probe(desired: impl Fn(usize, &TmemObservation) -> Vec<Option<u32>> + Send + 'static) -> (Box<dyn MemoryScheduler>, Seen) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    (Box::new(Probe { desired: Box::new(desired), seen: seen.clone() }), seen)
}

/// Every cache at its minimum.
fn at_min() -> (Box<dyn MemoryScheduler>, Seen) {
    probe(|_, obs| obs.caches.iter().map(|c| Some(c.min_units)).collect())
}

/// No limit but the pool.
fn unlimited() -> (Box<dyn MemoryScheduler>, Seen) {
    probe(|_, obs| vec![None; obs.caches.len()])
}

fn response_ms(r: &SimResult, task: u32, index: u64) -> f64 {
    let j = r.jobs.iter().find(|j| j.task == task && j.index == index).expect("released");
    (j.completion.expect("completed") - j.release).as_ms_f64()
}

/// The priority-inversion case: L (release 0) holds c's one stack for 5 ms of its budget, M
/// (release 1, 10 ms, no call) preempts it, H (release 2, 1 ms in c) finds the stack held.
fn inversion(wait: &str, units_above_min: u32) -> String {
    format!(
        r#"
[scheduler]
kind = "rm"
[run]
horizon_ms = 20
[tmem]
policy = "min"
wait = "{wait}"
units_above_min = {units_above_min}
[[component]]
name = "c"
stacks = 1
program = [{{ compute_rest = true }}]
[[task]]
name = "H"
period_ms = 20
offset_ms = 2
wcet_ms = 1
program = [{{ call = "c" }}]
[[task]]
name = "M"
period_ms = 30
offset_ms = 1
wcet_ms = 10
[[task]]
name = "L"
period_ms = 40
wcet_ms = 5
program = [{{ call = "c" }}]
"#
    )
}

#[test]
fn with_inheritance_a_high_priority_thread_waits_one_hold_and_without_it_the_inversion_shows() {
    // inherit: L 0–1, M 1–2, L in H's place 2–6 (its 4 ms left), H 6–7: H waits 4 ms, at most
    // the one hold of L's 5 ms, and responds in 5 ms.
    let (p, _) = at_min();
    let r = simulate_with_memory_scheduler(&load(&inversion("inherit", 0)), OPTS, p).unwrap();
    assert_eq!(response_ms(&r, 0, 0), 5.0);
    let waits = &r.resources().unwrap().waits;
    let h_wait: Vec<_> = waits.iter().filter(|w| w.task == 0).collect();
    assert_eq!(h_wait.len(), 1);
    assert_eq!((h_wait[0].end - h_wait[0].start).as_ms_f64(), 4.0);
    assert_eq!(h_wait[0].resource, "stack:c");
    // block: H waits off the CPU, M runs 2–11, L 11–15, H 15–16: the wait is 13 ms, M's
    // whole job more than one hold.
    let (p, _) = at_min();
    let r = simulate_with_memory_scheduler(&load(&inversion("block", 0)), OPTS, p).unwrap();
    assert_eq!(response_ms(&r, 0, 0), 14.0);
    let h_wait = r.resources().unwrap().waits.iter().find(|w| w.task == 0).unwrap().clone();
    assert_eq!((h_wait.end - h_wait.start).as_ms_f64(), 13.0);
}

#[test]
fn a_cache_grows_from_the_pool_up_to_its_desired_allocation() {
    // One unit above the minimum and no limit: H's request grows c to 2 stacks, so H runs at
    // once (2–3) and never waits.
    let (p, _) = unlimited();
    let r = simulate_with_memory_scheduler(&load(&inversion("inherit", 1)), OPTS, p).unwrap();
    assert_eq!(response_ms(&r, 0, 0), 1.0);
    let t = tmem(&r);
    assert_eq!((t.min_units, t.total_units, t.peak_allocated_units), (1, Some(2), 2));
    assert_eq!((t.caches[0].grows, t.caches[0].waits, t.caches[0].final_allocated_units), (1, 0, 2));
    // One unit 0–2 ms, two from H's growth to the 20 ms horizon: 2 + 2 · 18 = 38 unit·ms.
    assert_eq!(t.allocated_unit_us, 38_000);
    // The same pool with δ at the minimum: the unit stays in the pool and H waits as before.
    let (p, _) = at_min();
    let r = simulate_with_memory_scheduler(&load(&inversion("inherit", 1)), OPTS, p).unwrap();
    assert_eq!(response_ms(&r, 0, 0), 5.0);
    assert_eq!(tmem(&r).caches[0].grows, 0);
    assert_eq!(tmem(&r).allocated_unit_us, 20_000);
}

/// Three threads of one priority band each hold c's stacks 3 ms per 10 ms period, all
/// released together; runs of the scheduler every 5 ms.
const SHRINK: &str = r#"
[machine]
cpus = 3
[scheduler]
kind = "gfp"
[run]
horizon_ms = 40
[tmem]
policy = "min"
units_above_min = 4
period_ms = 5
[[component]]
name = "c"
stacks = 1
program = [{ compute_rest = true }]
[[task]]
name = "a"
priority = 1
period_ms = 10
wcet_ms = 3
program = [{ call = "c" }]
[[task]]
name = "b"
priority = 2
period_ms = 10
wcet_ms = 3
program = [{ call = "c" }]
[[task]]
name = "d"
priority = 3
period_ms = 10
wcet_ms = 3
program = [{ call = "c" }]
"#;

#[test]
fn a_shrunk_cache_gives_free_units_back_at_once_and_held_ones_when_they_are_put() {
    // δ unlimited until the run at 10 ms, then the minimum. At 0 every thread enters c: the
    // cache grows to 3. At 3 ms all return (free). At 10 ms the run removes the two free units
    // beyond the minimum at once, before the releases at 10 take any.
    let (p, _) = probe(|run, obs| vec![if run < 2 { None } else { Some(obs.caches[0].min_units) }]);
    let r = simulate_with_memory_scheduler(&load(SHRINK), OPTS, p).unwrap();
    let t = tmem(&r);
    let at = |ms: u64| t.timeline.iter().find(|p| p.time_ns == ms * 1_000_000).unwrap();
    assert_eq!(at(0).allocated_units, 1);
    assert_eq!(at(5).allocated_units, 3);
    assert_eq!(at(10).allocated_units, 1);
    assert_eq!(t.caches[0].removed_units, 2);

    // The same drop at 2.5 ms into the first jobs: the three units are in use, so the run
    // only marks the cache; two go back as their holders return at 3 ms, within one hold.
    let text = SHRINK.replace("period_ms = 5\n", "period_ms = 2.5\n");
    let (p, _) = probe(|run, obs| vec![if run < 1 { None } else { Some(obs.caches[0].min_units) }]);
    let r = simulate_with_memory_scheduler(&load(&text), OPTS, p).unwrap();
    let t = tmem(&r);
    let at = |us: u64| t.timeline.iter().find(|p| p.time_ns == us * 1_000).unwrap();
    assert_eq!((at(2500).allocated_units, at(2500).in_use_units), (3, 3));
    assert_eq!(at(5000).allocated_units, 1);
    // The shrink took 0.5 ms (2.5 → 3 ms), within the 3 ms holds.
    assert_eq!((t.caches[0].longest_shrink_lag_ns, t.caches[0].longest_hold_ns), (500_000, 3_000_000));
    // From then on the threads share the one stack: 2 of the 3 wait each period.
    assert!(t.caches[0].waits >= 2);
    assert_eq!(t.caches[0].final_allocated_units, 1);
}

#[test]
fn the_scheduler_observes_block_time_counts_and_estimates_of_each_window() {
    // From the inversion case under inherit: H blocks 4 ms once in c's stacks (window of the
    // run at 20 ms, the period); c held one stack and had one waiter at once: r = 2.
    let text = inversion("inherit", 0).replace("units_above_min = 0", "units_above_min = 0\nperiod_ms = 10");
    let (p, seen) = at_min();
    simulate_with_memory_scheduler(&load(&text), OPTS, p).unwrap();
    let seen = seen.lock().unwrap();
    // Runs at 0 and 10 ms (the horizon ends the run before 20).
    assert_eq!(seen.len(), 2);
    let second = &seen[1];
    assert_eq!(second.blocks.len(), 1);
    let b = second.blocks[0];
    assert_eq!((b.cache, b.thread, b.blocked_ns, b.blocks), (0, 0, 4_000_000, 1));
    let c = &second.caches[0];
    assert_eq!((c.allocated_units, c.estimated_requests, c.touched_units, c.blocked_concurrency_ceil), (1, 2, 1, 1));
    // H completed at 7 (deadline 22), L at 6 (deadline 40), M at 11 (deadline 31): no tardiness,
    // lateness −15 ms for H.
    let h = &second.threads[0];
    assert_eq!((h.completed_jobs, h.missed_jobs, h.avg_tardiness_ns, h.avg_lateness_ns), (1, 0, 0, -15_000_000));
    // M has no program but is a thread all the same.
    assert_eq!(second.threads.len(), 3);
}

/// A budget of 10 ms through a chain of components each taking 10 % of it.
fn chain(depth: usize) -> String {
    let mut text = String::from("[scheduler]\nkind = \"rm\"\n[run]\nhorizon_ms = 100\n");
    for i in 0..depth {
        let next = if i + 1 < depth { format!(", {{ call = \"c{}\" }}", i + 1) } else { ", { compute_rest = true }".to_string() };
        text += &format!("[[component]]\nname = \"c{i}\"\nprogram = [{{ compute_share = 0.1 }}{next}]\n");
    }
    text + "[[task]]\nname = \"t\"\nperiod_ms = 50\nwcet_ms = 10\nprogram = [{ call = \"c0\" }]\n"
}

#[test]
fn a_budgeted_job_computes_exactly_its_budget_through_any_chain_of_shares() {
    for depth in [1, 3, 9, 14] {
        let r = simulate(&load(&chain(depth)), OPTS);
        let j = &r.jobs[0];
        assert_eq!(j.executed.as_ms_f64(), 10.0, "depth {depth}");
        // Past ten components the budget is spent: the rest are never entered.
        let calls = &r.resources().unwrap().job_calls[0].invocations;
        assert_eq!(calls.iter().filter(|&&n| n > 0).count(), depth.min(10), "depth {depth}");
    }
}

#[test]
fn call_one_of_calls_exactly_one_component_with_the_given_weights() {
    let text = r#"
[scheduler]
kind = "rm"
[run]
horizon_ms = 4000
[[component]]
name = "left"
program = [{ compute_ms = 0.1 }]
[[component]]
name = "right"
program = [{ compute_ms = 0.1 }]
[[task]]
name = "t"
period_ms = 1
program = [{ compute_ms = 0.1 }, { call_one_of = ["left", "right"], weights = [3, 1] }]
"#;
    let r = simulate(&load(text), OPTS);
    let calls = &r.resources().unwrap().job_calls;
    assert_eq!(calls.len(), 4000);
    assert!(calls.iter().all(|c| c.invocations.iter().sum::<u32>() == 1));
    let left = calls.iter().filter(|c| c.invocations[0] == 1).count() as f64;
    // 4000 draws at p = 0.75: mean 3000, sd ≈ 27.4; four sd either side.
    assert!((left - 3000.0).abs() < 110.0, "{left}");
}

/// A component holding a cbuf across a call passes it down; the callee maps it once.
const CBUFS: &str = r#"
[scheduler]
kind = "rm"
[run]
horizon_ms = 100
[tmem]
policy = "min"
units_above_min = 2
period_ms = 20
cbuf_map_us = 100
[[component]]
name = "top"
stacks = 1
cbufs = 1
program = [{ compute_share = 0.2 }, { cbuf = "alloc" }, { call = "leaf", pass_cbuf = true }, { cbuf = "free" }]
[[component]]
name = "leaf"
stacks = 1
program = [{ compute_rest = true }]
[[task]]
name = "t"
period_ms = 10
wcet_ms = 5
program = [{ call = "top" }]
"#;

#[test]
fn a_passed_cbuf_is_mapped_into_its_callee_once_and_unmapped_when_it_leaves_for_the_pool() {
    let (p, _) = at_min();
    let r = simulate_with_memory_scheduler(&load(CBUFS), OPTS, p).unwrap();
    let t = tmem(&r);
    // One cbuf unit, always the same: one mapping, kept (the cache never shrinks).
    assert_eq!((t.cbuf_mappings, t.cbuf_unmappings), (1, 0));
    // The first job pays the 0.1 ms mapping on top of nothing: its budget covers it.
    assert_eq!(r.jobs[0].executed.as_ms_f64(), 5.0);
    let kinds: Vec<&str> = t.caches.iter().map(|c| c.kind).collect();
    assert_eq!(kinds, ["stack", "stack", "cbuf"]);
    assert_eq!(t.caches[2].gets, 10);
}

/// A random lattice in the style of the TMEM experiments: `n` components each computing a
/// share and calling one of two later ones with a cbuf, tasks entering at random.
fn lattice(n: usize, tasks: &[(u32, u32, usize)], above: Option<u32>, wait: &str) -> String {
    let mut text = String::from("[scheduler]\nkind = \"rm\"\n[run]\nhorizon_ms = 600\n[tmem]\npolicy = \"min\"\nperiod_ms = 50\n");
    text += &format!("wait = \"{wait}\"\n");
    if let Some(a) = above {
        text += &format!("units_above_min = {a}\n");
    }
    for i in 0..n {
        let tail = if i + 2 < n {
            format!(
                r#", {{ cbuf = "alloc" }}, {{ call_one_of = ["k{}", "k{}"], weights = [3, 1], pass_cbuf = true }}, {{ cbuf = "free" }}"#,
                i + 1,
                i + 2
            )
        } else {
            ", { compute_rest = true }".to_string()
        };
        let cbufs = if i + 2 < n { "cbufs = 1\n" } else { "" };
        text += &format!("[[component]]\nname = \"k{i}\"\nstacks = 1\n{cbufs}program = [{{ compute_share = 0.1 }}{tail}]\n");
    }
    for (t, &(period, wcet, entry)) in tasks.iter().enumerate() {
        text +=
            &format!("[[task]]\nname = \"t{t}\"\nperiod_ms = {period}\nwcet_ms = {wcet}\nprogram = [{{ call = \"k{}\" }}]\n", entry % n);
    }
    text
}

proptest! {
    #![proptest_config(seeded_config("tmem_units_stay_conserved", 24))]
    /// With invariant checks on after every event: each unit in exactly one place, no cache
    /// below its minimum, and none above its δ while it has a free unit — so a unit the
    /// scheduler takes away is gone when its holder puts it, within one hold.
    #[test]
    fn tmem_units_stay_conserved_and_shrinks_finish_within_a_hold(
        n in 3usize..8,
        tasks in prop::collection::vec((5u32..40, 1u32..5, 0usize..8), 1..6),
        above in prop::option::of(0u32..6),
        block in any::<bool>(),
        plan in prop::collection::vec(prop::option::of(0u32..4), 12),
    ) {
        let text = lattice(n, &tasks, above, if block { "block" } else { "inherit" });
        let plan2 = plan.clone();
        let (p, seen) = probe(move |run, obs| obs.caches.iter().map(|c| plan2[run % plan2.len()].map(|x| c.min_units + x)).collect());
        let r = simulate_with_memory_scheduler(&load(&text), OPTS, p).unwrap();
        let t = tmem(&r);
        let seen = seen.lock().unwrap();
        // Right after each run every cache is within its new δ but for units in use: the run
        // removed the free ones at once.
        let caches = t.caches.len() as u32;
        for (run, point) in t.timeline.iter().enumerate() {
            if let Some(x) = plan[run % plan.len()] {
                prop_assert!(point.allocated_units <= t.min_units + x * caches + point.in_use_units, "run {run}: {point:?}");
            }
        }
        prop_assert_eq!(seen.len() as u64, t.runs);
        prop_assert!(t.caches.iter().all(|c| c.final_allocated_units >= c.min_units));
        // A unit the scheduler takes away is gone within the longest hold.
        for c in &t.caches {
            prop_assert!(c.longest_shrink_lag_ns <= c.longest_hold_ns, "{}: lag {} over hold {}", c.component, c.longest_shrink_lag_ns, c.longest_hold_ns);
        }
    }
}

proptest! {
    #![proptest_config(seeded_config("tmem_named_schedulers_keep_invariants", 24))]
    /// Every named scheduler, `watermark` among them, with invariant checks on after every
    /// event: each unit in one place, no cache below its minimum, the shrink lag within the
    /// longest hold; the units held on average lie between the minimum and the peak.
    #[test]
    fn every_named_scheduler_keeps_the_unit_invariants(
        n in 3usize..8,
        tasks in prop::collection::vec((5u32..40, 1u32..5, 0usize..8), 1..6),
        above in prop::option::of(0u32..6),
        block in any::<bool>(),
        which in 0usize..MEMORY_SCHEDULERS.len(),
    ) {
        let name = MEMORY_SCHEDULERS[which].0;
        let text = lattice(n, &tasks, above, if block { "block" } else { "inherit" }).replace("policy = \"min\"", &format!("policy = \"{name}\""));
        let r = simulate(&load(&text), OPTS);
        let t = tmem(&r);
        prop_assert_eq!(t.policy.as_str(), name);
        prop_assert!(t.caches.iter().all(|c| c.final_allocated_units >= c.min_units));
        for c in &t.caches {
            prop_assert!(c.longest_shrink_lag_ns <= c.longest_hold_ns, "{}: {}: lag {} over hold {}", name, c.component, c.longest_shrink_lag_ns, c.longest_hold_ns);
        }
        // 600 ms run: the integral over it in unit·µs.
        let horizon_us = 600_000u64;
        prop_assert!(t.allocated_unit_us >= u64::from(t.min_units) * horizon_us, "{}: {} unit·µs", name, t.allocated_unit_us);
        prop_assert!(t.allocated_unit_us <= u64::from(t.peak_allocated_units) * horizon_us, "{}: {} unit·µs", name, t.allocated_unit_us);
    }
}

#[test]
fn the_same_scenario_and_seed_give_the_same_tmem_section() {
    let text = lattice(6, &[(10, 3, 0), (15, 4, 1), (25, 2, 0)], Some(3), "inherit");
    let run = || {
        let (p, _) = unlimited();
        let r = simulate_with_memory_scheduler(&load(&text), OPTS, p).unwrap();
        r.to_json()
    };
    assert_eq!(run(), run());
}

#[test]
fn every_tmem_load_error_is_one_line_naming_file_key_and_reason() {
    let base = CBUFS;
    let cases: Vec<(String, &str)> = vec![
        (base.replace("policy = \"min\"", "policy = \"best\""), "tmem.toml: tmem.policy: unknown memory scheduler \"best\""),
        (base.replace("units_above_min = 2", "units_above_min = -1"), "tmem.toml: tmem.units_above_min: must be between 0"),
        (base.replace("period_ms = 20", "period_ms = 0"), "tmem.toml: tmem.period_ms:"),
        (base.replace("units_above_min = 2", "units_above_min = 2\nss_max_units = -1"), "tmem.toml: tmem.ss_max_units: must be between 0"),
        (base.replace("units_above_min = 2", "units_above_min = 2\nss_max_units = 1.5"), "tmem.toml: tmem.ss_max_units"),
        (base.replace("cbufs = 1\n", ""), "tmem.toml: component[0].cbufs: missing"),
        (base.replace("{ cbuf = \"free\" }", "{ compute_ms = 1 }"), "tmem.toml: component[0].program: returns with a cbuf still held"),
        (base.replace("{ cbuf = \"alloc\" }, ", ""), "tmem.toml: component[0].program[1].pass_cbuf: no cbuf is held"),
        (base.replace("wcet_ms = 5\n", ""), "tmem.toml: task[0].program: takes shares of the job's budget"),
        (
            base.replace("program = [{ call = \"top\" }]", "program = [{ call = \"top\" }, { cbuf = \"alloc\" }]"),
            "tmem.toml: task[0].program[1].cbuf: cbufs belong to components",
        ),
        (
            base.replace("{ call = \"leaf\", pass_cbuf = true }", "{ call_one_of = [\"leaf\"], weights = [1, 2] }"),
            "tmem.toml: component[0].program[2].weights: must give one weight per component",
        ),
        (
            base.replace("{ call = \"leaf\", pass_cbuf = true }", "{ call_one_of = [\"leaf\", \"top\"], weights = [0, 0] }"),
            "tmem.toml: component[0].program[2].weights: must not all be 0",
        ),
        (
            base.replace("{ compute_share = 0.2 }", "{ compute_share = 1.5 }"),
            "tmem.toml: component[0].program[0].compute_share: must be above 0",
        ),
        (
            base.replace("{ cbuf = \"alloc\" }", "{ cbuf = \"take\" }"),
            "tmem.toml: component[0].program[1].cbuf: unknown cbuf step \"take\"",
        ),
        (
            base.replace("wcet_ms = 5\n", "wcet_ms = 5\noffset_ms = 10\nstop_ms = 10\n"),
            "tmem.toml: task[0].stop_ms: must be after offset_ms",
        ),
        (format!("[tmem]\npolicy = \"min\"\n{}", chain(2)), "tmem.toml: tmem: manages components' stacks and cbufs"),
    ];
    for (text, want) in cases {
        let e = err_of(&text);
        assert!(e.starts_with(want), "{e}\n  wanted {want}");
        assert!(!e.contains('\n'), "{e}");
    }
}

#[test]
fn a_task_stops_releasing_at_its_stop_time() {
    let text = "[scheduler]\nkind = \"rm\"\n[run]\nhorizon_ms = 100\n[[task]]\nname = \"t\"\nperiod_ms = 10\nwcet_ms = 1\noffset_ms = 20\nstop_ms = 50\n";
    let r = simulate(&load(text), OPTS);
    let releases: Vec<f64> = r.jobs.iter().map(|j| j.release.as_ms_f64()).collect();
    assert_eq!(releases, [20.0, 30.0, 40.0]);
}

#[test]
fn before_the_first_run_caches_grow_without_limit_and_the_first_run_trims_them() {
    // first_run_ms = 7: at 0 the three threads enter c and it grows to 3 stacks (no δ yet);
    // they return at 3 ms; the first run, at 7 ms, sets δ to the minimum and removes the two
    // free units at once. The next releases, at 10 ms, share one stack.
    let text = SHRINK.replace("period_ms = 5\n", "period_ms = 5\nfirst_run_ms = 7\n");
    let (p, seen) = at_min();
    let r = simulate_with_memory_scheduler(&load(&text), OPTS, p).unwrap();
    let t = tmem(&r);
    assert_eq!(seen.lock().unwrap()[0].now_ns, 7_000_000);
    assert_eq!(seen.lock().unwrap()[0].caches[0].allocated_units, 3);
    assert_eq!(seen.lock().unwrap()[0].caches[0].desired_units, None);
    assert_eq!((t.timeline[0].time_ns, t.timeline[0].allocated_units), (7_000_000, 1));
    assert_eq!((t.caches[0].grows, t.caches[0].removed_units, t.peak_allocated_units), (2, 2, 3));
    assert_eq!(t.caches[0].waits, 6);
}

/// L enters c (one stack) and suspends inside it; H then calls c; M computes without calls.
const SUSPENSION: &str = r#"
[scheduler]
kind = "rm"
[run]
horizon_ms = 30
[tmem]
policy = "min"
period_ms = 10
[[component]]
name = "c"
stacks = 1
program = [{ compute_ms = 1 }, { suspend_ms = 5 }, { compute_ms = 1 }]
[[task]]
name = "H"
period_ms = 30
offset_ms = 2
program = [{ call = "c" }]
[[task]]
name = "M"
period_ms = 40
offset_ms = 3
wcet_ms = 2
[[task]]
name = "L"
period_ms = 50
program = [{ call = "c" }]
"#;

#[test]
fn a_request_finding_every_holder_suspended_waits_off_the_cpu_and_is_counted() {
    // L: in c 0–1, suspended 1–6. H at 2 finds c's one stack held by a suspended job: nobody
    // can run in its place, so it waits off the CPU (a self-suspension counted in c's
    // window) and M runs 3–5 undelayed. L resumes at 6: H depends on it again, so L runs its
    // last 1 ms in H's place (6–7) and returns; H enters, computes 7–8, suspends 8–13,
    // computes 13–14: H responds in 12 ms.
    let (p, seen) = at_min();
    let r = simulate_with_memory_scheduler(&load(SUSPENSION), OPTS, p).unwrap();
    assert_eq!(response_ms(&r, 1, 0), 2.0, "M ran while H waited off the CPU");
    assert_eq!(response_ms(&r, 2, 0), 7.0);
    assert_eq!(response_ms(&r, 0, 0), 12.0);
    let seen = seen.lock().unwrap();
    // The run at 10 ms saw the window 0–10: one self-suspension, H blocked 2–7.
    assert_eq!(seen[1].caches[0].self_suspensions, 1);
    assert_eq!(seen[1].blocks[0].blocked_ns, 5_000_000);
    assert_eq!(seen[2].caches[0].self_suspensions, 0);
    let waits = &r.resources().unwrap().waits;
    let suspends: Vec<(u32, f64, f64)> =
        waits.iter().filter(|w| w.resource == "suspend").map(|w| (w.task, w.start.as_ms_f64(), w.end.as_ms_f64())).collect();
    assert_eq!(suspends, [(2, 1.0, 6.0), (0, 8.0, 13.0)]);
}

/// SUSPENSION with `ss_max_units` and a second high-priority thread H2 (released at 4 ms, while
/// L and H are both suspended inside c).
fn over_quota(ss_max_units: Option<u32>) -> String {
    let ss = ss_max_units.map_or(String::new(), |n| format!("ss_max_units = {n}\n"));
    SUSPENSION.replace("period_ms = 10\n", &format!("period_ms = 10\n{ss}")).replace(
        "[[task]]\nname = \"M\"",
        "[[task]]\nname = \"H2\"\nperiod_ms = 35\noffset_ms = 4\nprogram = [{ call = \"c\" }]\n[[task]]\nname = \"M\"",
    )
}

fn stack_waits(r: &SimResult, task: u32) -> usize {
    r.resources().unwrap().waits.iter().filter(|w| w.task == task && w.resource == "stack:c").count()
}

#[test]
fn with_ss_max_a_request_on_a_self_suspended_holder_takes_a_unit_over_quota_up_to_the_limit() {
    // δ stays 1 (policy min). Off (the default), as in the test above: H at 2 waits for the
    // suspended L and responds in 12 ms; H2 (at 4) waits too; c never holds more than 1.
    let (p, _) = at_min();
    let r = simulate_with_memory_scheduler(&load(&over_quota(None)), OPTS, p).unwrap();
    assert_eq!(response_ms(&r, 0, 0), 12.0);
    assert_eq!((stack_waits(&r, 0), stack_waits(&r, 1)), (1, 1));
    assert_eq!(tmem(&r).caches[0].peak_allocated_units, 1);
    // ss_max_units = 1: H takes a second stack at 2 (every holder suspended) and never waits:
    // in c 2–3, suspended 3–8, 8–9, a response of 7 ms. H2 at 4 finds both holders suspended
    // but c already one over δ: it waits. L puts at 7 and its unit, above δ, goes to the pool;
    // H is still suspended, so H2 takes it back over quota at 7.
    let (p, _) = at_min();
    let r = simulate_with_memory_scheduler(&load(&over_quota(Some(1))), OPTS, p).unwrap();
    assert_eq!(response_ms(&r, 0, 0), 7.0);
    assert_eq!((stack_waits(&r, 0), stack_waits(&r, 1)), (0, 1));
    let h2_wait = r.resources().unwrap().waits.iter().find(|w| w.task == 1 && w.resource == "stack:c").unwrap().clone();
    assert_eq!((h2_wait.start.as_ms_f64(), h2_wait.end.as_ms_f64()), (4.0, 7.0));
    let t = tmem(&r);
    assert_eq!((t.caches[0].peak_allocated_units, t.caches[0].final_desired_units), (2, Some(1)));
    assert_eq!(t.caches[0].grows, 2);
    // ss_max_units = 2: neither H nor H2 waits; c holds 3, two over δ.
    let (p, _) = at_min();
    let r = simulate_with_memory_scheduler(&load(&over_quota(Some(2))), OPTS, p).unwrap();
    assert_eq!((stack_waits(&r, 0), stack_waits(&r, 1)), (0, 0));
    assert_eq!(response_ms(&r, 0, 0), 7.0);
    assert_eq!(tmem(&r).caches[0].peak_allocated_units, 3);
    // A holder that can run is no self-suspension: the inversion case is unchanged by ss_max.
    let (p, _) = at_min();
    let text = inversion("inherit", 3).replace("units_above_min = 3\n", "units_above_min = 3\nss_max_units = 5\n");
    let r = simulate_with_memory_scheduler(&load(&text), OPTS, p).unwrap();
    assert_eq!(response_ms(&r, 0, 0), 5.0);
    assert_eq!(tmem(&r).caches[0].peak_allocated_units, 1);
}

#[test]
fn suspending_inside_a_critical_section_or_under_srp_is_refused() {
    let lock = r#"
[scheduler]
kind = "rm"
[[resource]]
name = "m"
protocol = "pip"
[[task]]
name = "t"
period_ms = 10
program = [{ lock = "m" }, { suspend_ms = 1 }, { compute_ms = 1 }, { unlock = "m" }]
"#;
    let e = err_of(lock);
    assert!(e.starts_with("tmem.toml: task[0].program[1].suspend_ms: suspends while holding \"m\""), "{e}");
    let srp = lock.replace("\"pip\"", "\"srp\"").replace(
        "{ lock = \"m\" }, { suspend_ms = 1 }, { compute_ms = 1 }, { unlock = \"m\" }",
        "{ suspend_ms = 1 }, { lock = \"m\" }, { compute_ms = 1 }, { unlock = \"m\" }",
    );
    let e = err_of(&srp);
    assert_eq!(
        e,
        "tmem.toml: task[0].program[0].suspend_ms: task \"t\" uses srp resource \"m\", which assumes jobs that never suspend, but it self-suspends; use pip or none for \"m\""
    );
}

/// A plausible value for a TMEM key (mostly of the right type), or now and then any value.
fn fuzz_value(key: &'static str) -> BoxedStrategy<String> {
    let good: Vec<&'static str> = match key {
        "policy" => vec!["\"min\"", "\"max\"", "\"fair\"", "\"greedy\"", "\"tmem\"", "\"tmem-composite\""],
        "wait" | "stack_wait" => vec!["\"inherit\"", "\"block\""],
        "units_above_min" | "ss_max_units" => vec!["0", "1", "3", "6"],
        "period_ms" => vec!["1", "5", "20"],
        "first_run_ms" => vec!["0", "7"],
        "cbuf_map_us" | "invocation_cost_us" => vec!["0", "100"],
        "stacks" | "cbufs" => vec!["1", "2", "3"],
        "compute_ms" | "suspend_ms" => vec!["0.5", "1", "3"],
        "compute_share" => vec!["0.1", "0.5", "1"],
        "compute_rest" | "pass_cbuf" => vec!["true"],
        "cbuf" => vec!["\"alloc\"", "\"free\""],
        "call" => vec!["\"b\""],
        "call_one_of" => vec!["[\"b\"]", "[\"b\", \"b\"]"],
        "weights" => vec!["[1]", "[1, 2]"],
        _ => vec!["0.5"],
    };
    let any = vec!["-1", "0", "1.5", "1e30", "nan", "false", "\"x\"", "[]", "[0, 0]"];
    prop_oneof![12 => prop::sample::select(good), 1 => prop::sample::select(any)].prop_map(str::to_string).boxed()
}

/// One or a few program steps: mostly well formed (a cbuf taken, passed down and freed; a
/// share; a suspension; calls), now and then a key with any value.
fn fuzz_step() -> impl Strategy<Value = String> {
    let formed = vec![
        "{ compute_ms = 1 }",
        "{ compute_share = 0.3 }",
        "{ compute_rest = true }",
        "{ suspend_ms = 2 }",
        "{ call = \"b\" }",
        "{ call_one_of = [\"b\", \"b\"], weights = [1, 2] }",
        "{ cbuf = \"alloc\" }, { call = \"b\", pass_cbuf = true }, { cbuf = \"free\" }",
        "{ cbuf = \"alloc\" }, { suspend_ms = 1 }, { cbuf = \"free\" }",
    ];
    let keys = vec!["compute_ms", "compute_share", "compute_rest", "suspend_ms", "cbuf", "call", "call_one_of", "weights", "pass_cbuf"];
    prop_oneof![
        8 => prop::sample::select(formed).prop_map(str::to_string),
        1 => prop::sample::select(keys).prop_flat_map(|k| fuzz_value(k).prop_map(move |v| format!("{{ {k} = {v} }}"))),
    ]
}

/// Keys with plausible values for a table.
fn fuzz_table(keys: Vec<&'static str>, most: usize) -> impl Strategy<Value = Vec<(&'static str, String)>> {
    prop::sample::subsequence(keys, 0..=most)
        .prop_flat_map(|ks| ks.into_iter().map(|k| fuzz_value(k).prop_map(move |v| (k, v))).collect::<Vec<_>>())
}

proptest! {
    #![proptest_config(seeded_config("tmem_fuzz", 600))]
    /// Any mix of `[tmem]` values, component keys and program steps either loads, and then
    /// simulates with every invariant checked, or is refused in one line naming the file.
    #[test]
    fn fuzzed_tmem_scenarios_load_and_run_or_are_refused_in_one_line(
        tmem in fuzz_table(vec!["policy", "wait", "units_above_min", "period_ms", "first_run_ms", "cbuf_map_us", "ss_max_units"], 6),
        comp in fuzz_table(vec!["stacks", "cbufs", "stack_wait", "invocation_cost_us"], 4),
        steps_a in prop::collection::vec(fuzz_step(), 0..5),
        steps_b in prop::collection::vec(fuzz_step(), 0..3),
        wcet in prop::option::of(prop::sample::select(vec!["5", "5", "0.5", "-1"])),
    ) {
        let mut text = String::from("[scheduler]\nkind = \"rm\"\n[run]\nhorizon_ms = 50\n[tmem]\n");
        for (k, v) in &tmem {
            text += &format!("{k} = {v}\n");
        }
        text += "[[component]]\nname = \"a\"\n";
        for (k, v) in &comp {
            text += &format!("{k} = {v}\n");
        }
        if !comp.iter().any(|(k, _)| *k == "cbufs") {
            text += "cbufs = 1\n";
        }
        // b calls only c, so the call graph has no cycle.
        let steps_b: Vec<String> = steps_b.iter().map(|s| s.replace("\"b\"", "\"c\"")).collect();
        text += &format!("program = [{}]\n[[component]]\nname = \"b\"\nstacks = 1\ncbufs = 1\nprogram = [{}]\n", steps_a.join(", "), steps_b.join(", "));
        text += "[[component]]\nname = \"c\"\nstacks = 1\nprogram = [{ compute_ms = 0.5 }]\n";
        text += "[[task]]\nname = \"t\"\nperiod_ms = 10\nprogram = [{ call = \"a\" }]\n";
        if let Some(w) = wcet {
            text += &format!("wcet_ms = {w}\n");
        }
        match load_toml_str(&text, "fuzz.toml") {
            Ok(s) => {
                simulate(&s, OPTS);
            }
            Err(e) => {
                let line = e.to_string();
                prop_assert!(line.starts_with("fuzz.toml: ") && !line.contains('\n'), "{line}");
            }
        }
    }
}
