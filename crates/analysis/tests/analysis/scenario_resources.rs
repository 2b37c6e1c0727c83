//! Scenarios with shared resources through `analyze`: critical sections from programs, PIP
//! and SRP blocking terms, the no-bound verdict for unmanaged locks, and agreement with the
//! simulator (property tests).

use crate::common::{cases, load};
use critmem_analysis::{analyze, program_sections, AnalysisReport, CriticalSection, Verdict};
use critmem_core::{simulate, Nanos, Scenario, SimOptions, SimResult};
use proptest::prelude::*;

fn example_text(name: &str) -> String {
    let path = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples").join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn blocking(r: &AnalysisReport) -> Vec<Option<f64>> {
    r.resources.as_ref().expect("a resources section").tasks.iter().map(|t| t.blocking_ms).collect()
}

fn responses(r: &AnalysisReport) -> Vec<Option<f64>> {
    r.tasks.iter().map(|t| t.response_time_ms).collect()
}

fn sim(s: &Scenario) -> SimResult {
    simulate(s, SimOptions { record_jobs: true, record_segments: true, check_invariants: true })
}

#[test]
fn sections_come_from_programs_with_nested_ones_at_the_outer_duration() {
    let text = "[scheduler]\nkind = \"fp\"\n[[resource]]\nname = \"a\"\n[[resource]]\nname = \"b\"\nunits = 3\n\
        [[task]]\nname = \"t\"\npriority = 1\nperiod_ms = 50\nprogram = [{ compute_ms = 1 }, { lock = \"a\" }, { compute_ms = 2 }, \
        { lock = \"b\", units = 2 }, { compute_ms = 3 }, { unlock = \"b\" }, { compute_ms = 0.5 }, { unlock = \"a\" }, \
        { lock = \"b\" }, { compute_ms = 4 }, { unlock = \"b\" }]\n";
    let s = load(text);
    let got = program_sections(s.tasks[0].program.as_ref().unwrap(), |_| Nanos::ZERO);
    // Outer a: 2 + 3 + 0.5 = 5.5 ms; b inside it at that duration; then b alone for 4 ms.
    let ms = |x: f64| Nanos::try_from_ms_f64(x).unwrap();
    assert_eq!(
        got,
        vec![
            CriticalSection { resource: 0, units: 1, duration: ms(5.5), within: None },
            CriticalSection { resource: 1, units: 2, duration: ms(5.5), within: Some(0) },
            CriticalSection { resource: 1, units: 1, duration: ms(4.0), within: None },
        ]
    );
    let r = analyze(&s);
    let res = r.resources.as_ref().unwrap();
    assert_eq!(res.resources[1].units, 3);
    assert_eq!(res.resources[1].users, vec!["t".to_string()]);
    assert_eq!(res.tasks[0].sections[1].within.as_deref(), Some("a"));
    assert_eq!(blocking(&r), vec![Some(0.0)]);
}

#[test]
fn the_inversion_example_under_pip_has_textbook_blocking_and_the_simulator_stays_below() {
    // hi (C 2, section 1), med (C 10), lo (C 5, section 4 on the bus); bus ceiling = hi.
    // B(hi) = lo's 4; B(med) = 4 (lo can inherit hi's priority above med); B(lo) = 0.
    // R(hi) = 2 + 4 = 6; R(med) = 10 + 4 + 2 = 16; R(lo) = 5 + 2 + 10 = 17.
    let s = load(&example_text("resources-inversion.toml"));
    let r = analyze(&s);
    assert_eq!(blocking(&r), vec![Some(4.0), Some(4.0), Some(0.0)]);
    assert_eq!(responses(&r), vec![Some(6.0), Some(16.0), Some(17.0)]);
    assert_eq!(r.verdict, Verdict::Schedulable);
    assert_eq!(r.tests[0].name, "fp-rta-blocking");
    let json: serde_json::Value = serde_json::from_str(&r.to_json()).unwrap();
    assert_eq!(json["resources"]["resources"][0]["protocol"], "pip");
    assert_eq!(json["resources"]["tasks"][2]["sections"][0]["duration_ms"], 4.0);
    // The file's offsets put hi 1 ms into lo's section: 5 ms, within the bound.
    let run = sim(&s);
    let worst: Vec<f64> = run.tasks.iter().map(|t| t.stats.max_response.unwrap().as_ms_f64()).collect();
    assert_eq!(worst[0], 5.0);
    for (a, w) in responses(&r).iter().zip(&worst) {
        assert!(a.unwrap() >= *w);
    }
}

#[test]
fn the_inversion_example_under_srp_has_the_same_terms() {
    // SRP: lo's bus section can leave the ceiling at hi's level, above med's: B = 4, 4, 0.
    let s = load(&example_text("resources-inversion.toml").replace("protocol = \"pip\"", "protocol = \"srp\""));
    let r = analyze(&s);
    assert_eq!(blocking(&r), vec![Some(4.0), Some(4.0), Some(0.0)]);
    assert_eq!(responses(&r), vec![Some(6.0), Some(16.0), Some(17.0)]);
    assert!(r.tests[0].detail.contains("SRP"), "{}", r.tests[0].detail);
}

#[test]
fn an_unmanaged_lock_with_a_medium_task_between_has_no_bound() {
    // protocol none: med can preempt lo while hi waits for the bus, as often as it is released.
    let s = load(&example_text("resources-inversion.toml").replace("protocol = \"pip\"", "protocol = \"none\""));
    let r = analyze(&s);
    let res = r.resources.as_ref().unwrap();
    assert_eq!(res.tasks[0].blocking_ms, None);
    assert!(res.tasks[0].note.starts_with("no bound: it locks bus (protocol none), which lower-priority task lo also locks, and task med"));
    // lo shares the bus with hi, so it has none either; med locks nothing and is blocked at
    // most by lo's section (4 ms): 10 + 4 + 2 = 16.
    assert_eq!(res.tasks[2].blocking_ms, None);
    assert_eq!(responses(&r), vec![None, Some(16.0), None]);
    assert_eq!(r.tests[0].verdict, Verdict::Unknown);
    assert!(r.tests[0].detail.contains("task hi has no blocking bound"), "{}", r.tests[0].detail);
    // Without med between them, the same lock is bounded like PIP: 2 + 4 = 6 and 5 + 2.
    let text = "[scheduler]\nkind = \"fp\"\n[[resource]]\nname = \"bus\"\nprotocol = \"none\"\n\
        [[task]]\nname = \"hi\"\npriority = 1\nperiod_ms = 20\nprogram = [{ compute_ms = 1 }, { lock = \"bus\" }, { compute_ms = 1 }, { unlock = \"bus\" }]\n\
        [[task]]\nname = \"lo\"\npriority = 3\nperiod_ms = 20\nprogram = [{ compute_ms = 1 }, { lock = \"bus\" }, { compute_ms = 4 }, { unlock = \"bus\" }]\n";
    let r = analyze(&load(text));
    assert_eq!(blocking(&r), vec![Some(4.0), Some(0.0)]);
    assert_eq!(responses(&r), vec![Some(6.0), Some(7.0)]);
}

#[test]
fn edf_with_srp_runs_the_demand_test_with_blocking() {
    // Levels by relative deadline: hi (D 5) above lo (D 20). lo's 3 ms bus section can block
    // hi: B = 3, 0. Demand: dbf(5) + B(5) = 1 + 3 = 4 ≤ 5, dbf(10) + B(10) = 2 + 3 ≤ 10, ...
    let text = "[scheduler]\nkind = \"edf\"\n[[resource]]\nname = \"bus\"\nprotocol = \"srp\"\n\
        [[task]]\nname = \"hi\"\nperiod_ms = 10\ndeadline_ms = 5\nprogram = [{ lock = \"bus\" }, { compute_ms = 1 }, { unlock = \"bus\" }]\n\
        [[task]]\nname = \"lo\"\nperiod_ms = 20\nprogram = [{ lock = \"bus\" }, { compute_ms = 3 }, { unlock = \"bus\" }, { compute_ms = 2 }]\n";
    let r = analyze(&load(text));
    assert_eq!(blocking(&r), vec![Some(3.0), Some(0.0)]);
    assert_eq!(r.tests[0].name, "edf-srp");
    assert_eq!(r.verdict, Verdict::Schedulable);
    // A 4.5 ms section: 1 + 4.5 > 5 at t = 5, which is no proof of a miss.
    let r = analyze(&load(&text.replace("compute_ms = 3 }", "compute_ms = 4.5 }")));
    assert_eq!(r.verdict, Verdict::Unknown);
    assert!(r.tests[0].detail.contains("dbf + B(5 ms) = 5.5 ms"), "{}", r.tests[0].detail);
    // EDF with PIP has no test here.
    let r = analyze(&load(&text.replace("\"srp\"", "\"pip\"")));
    assert_eq!(r.verdict, Verdict::Unknown);
    assert!(r.tests[0].detail.starts_with("Not analysed: under EDF only srp"), "{}", r.tests[0].detail);
}

#[test]
fn partitions_are_analysed_per_cpu_only_while_resources_stay_on_one_cpu() {
    let base = "[machine]\ncpus = 2\n[scheduler]\nkind = \"pfp\"\n[[resource]]\nname = \"a\"\nprotocol = \"pip\"\n\
        [[task]]\nname = \"x\"\npriority = 1\ncpu = 0\nperiod_ms = 10\nprogram = [{ lock = \"a\" }, { compute_ms = 1 }, { unlock = \"a\" }]\n\
        [[task]]\nname = \"y\"\npriority = 2\ncpu = CPU\nperiod_ms = 10\nprogram = [{ lock = \"a\" }, { compute_ms = 2 }, { unlock = \"a\" }]\n\
        [[task]]\nname = \"z\"\npriority = 3\ncpu = 1\nwcet_ms = 1\nperiod_ms = 10\n";
    let local = analyze(&load(&base.replace("CPU", "0")));
    assert_eq!(local.verdict, Verdict::Schedulable);
    assert_eq!(blocking(&local), vec![Some(2.0), Some(0.0), Some(0.0)]);
    assert_eq!(local.tests.iter().map(|t| (t.name, t.cpu)).collect::<Vec<_>>(), vec![("fp-rta-blocking", Some(0)), ("fp-rta", Some(1))]);
    let spread = analyze(&load(&base.replace("CPU", "1")));
    assert_eq!(spread.verdict, Verdict::Unknown);
    assert!(spread.tests[0].detail.contains("resource a is locked by tasks on CPUs 0, 1"), "{}", spread.tests[0].detail);
    assert_eq!(blocking(&spread), vec![None, None, None]);
}

#[test]
fn scenarios_without_resources_keep_their_report() {
    let text = "[scheduler]\nkind = \"rm\"\n[[task]]\nname = \"a\"\nwcet_ms = 1\nperiod_ms = 4\n";
    let json = analyze(&load(text)).to_json();
    assert!(!json.contains("\"resources\"") && !json.contains("\"servers\""), "{json}");
}

/// A random uniprocessor fixed-priority set sharing up to two resources.
#[derive(Clone, Debug)]
struct Shared {
    /// Priorities follow this order (the first is the highest).
    tasks: Vec<SharedTask>,
    units: [u32; 2],
}

#[derive(Clone, Debug)]
struct SharedTask {
    period_ms: u32,
    offset_ms: u32,
    before_ms: u32,
    section: Option<(usize, u32, u32, Option<u32>)>,
    after_ms: u32,
}

impl Shared {
    fn text(&self, protocol: &str) -> String {
        self.text_for("fp", protocol)
    }

    /// The set under scheduler `kind` (task priorities are ignored by EDF).
    fn text_for(&self, kind: &str, protocol: &str) -> String {
        let mut s = format!("[scheduler]\nkind = \"{kind}\"\n");
        for (r, u) in self.units.iter().enumerate() {
            s += &format!("[[resource]]\nname = \"r{r}\"\nunits = {u}\nprotocol = \"{protocol}\"\n");
        }
        for (i, t) in self.tasks.iter().enumerate() {
            let mut steps = Vec::new();
            if t.before_ms > 0 {
                steps.push(format!("{{ compute_ms = {} }}", t.before_ms));
            }
            if let Some((r, units, len, inner)) = t.section {
                let units = units.min(self.units[r]);
                steps.push(format!("{{ lock = \"r{r}\", units = {units} }}"));
                steps.push(format!("{{ compute_ms = {len} }}"));
                // r0 may hold r1 inside it (one lock order, so no cycle).
                if let (0, Some(inner_len)) = (r, inner) {
                    steps.push("{ lock = \"r1\" }".to_string());
                    steps.push(format!("{{ compute_ms = {inner_len} }}"));
                    steps.push("{ unlock = \"r1\" }".to_string());
                }
                steps.push(format!("{{ unlock = \"r{r}\" }}"));
            }
            if t.after_ms > 0 || steps.is_empty() {
                steps.push(format!("{{ compute_ms = {} }}", t.after_ms.max(1)));
            }
            let priority = if kind == "fp" { format!("priority = {}\n", i + 1) } else { String::new() };
            s += &format!(
                "[[task]]\nname = \"t{}\"\n{priority}period_ms = {}\noffset_ms = {}\nprogram = [{}]\n",
                i + 1,
                t.period_ms,
                t.offset_ms,
                steps.join(", ")
            );
        }
        s
    }
}

fn shared_set(offsets: bool) -> impl Strategy<Value = Shared> {
    let task = (
        prop::sample::select(vec![10u32, 12, 15, 20, 24, 30, 40, 60]),
        0u32..60,
        0u32..=2,
        prop::option::weighted(0.8, (0usize..2, 1u32..=2, 1u32..=3, prop::option::of(1u32..=2))),
        0u32..=2,
    )
        .prop_map(move |(period_ms, off, before_ms, section, after_ms)| SharedTask {
            period_ms,
            offset_ms: if offsets { off % period_ms } else { 0 },
            before_ms,
            section,
            after_ms,
        });
    (prop::collection::vec(task, 2..=4), 1u32..=2, 1u32..=2).prop_map(|(tasks, a, b)| Shared { tasks, units: [a, b] })
}

/// Every analysed bound holds in simulation (one hyperperiod plus the largest offset): no
/// completed job of a task the analysis clears responds later than its bound, and none is
/// left unfinished past its deadline (a job due exactly at the horizon is not judged: its
/// completion at that instant is not simulated).
fn check_bounds(set: &Shared, protocol: &str) -> Result<(), TestCaseError> {
    let text = set.text(protocol);
    let s = load(&text);
    let report = analyze(&s);
    let run = sim(&s);
    for j in &run.jobs {
        let a = &report.tasks[j.task as usize];
        if a.schedulable != Some(true) {
            continue;
        }
        let bound = Nanos::try_from_ms_f64(a.response_time_ms.unwrap()).unwrap();
        match j.response() {
            Some(r) => prop_assert!(r <= bound, "task {} job {}: simulated {:?} > bound {:?}\n{}", a.name, j.index, r, bound, text),
            None => prop_assert!(j.abs_deadline >= s.horizon, "task {} job {} unfinished past its deadline\n{}", a.name, j.index, text),
        }
    }
    Ok(())
}

/// Per job, the time lower-priority jobs ran while it was pending, from the segment trace.
fn worst_blocking_ms(s: &Scenario, run: &SimResult) -> Vec<f64> {
    let mut worst = vec![0.0f64; s.tasks.len()];
    for j in &run.jobs {
        let end = j.completion.unwrap_or(s.horizon);
        let ran: u64 = run
            .segments
            .iter()
            .filter(|g| (g.task as usize) > j.task as usize)
            .map(|g| g.end.min(end).0.saturating_sub(g.start.max(j.release).0))
            .sum();
        let w = &mut worst[j.task as usize];
        *w = w.max(Nanos(ran).as_ms_f64());
    }
    worst
}

proptest! {
    // Priorities follow task order (t1 highest). Synchronous release: the RTA bound with
    // PIP blocking holds for every task it clears.
    #![proptest_config(cases(500))]
    #[test]
    fn pip_bounds_hold_in_simulation_with_synchronous_release(set in shared_set(false)) {
        check_bounds(&set, "pip")?;
    }
}

proptest! {
    #![proptest_config(cases(300))]
    #[test]
    fn pip_bounds_hold_in_simulation_with_offsets(set in shared_set(true)) {
        check_bounds(&set, "pip")?;
    }

    #[test]
    fn srp_bounds_hold_in_simulation(set in shared_set(false)) {
        check_bounds(&set, "srp")?;
    }

    #[test]
    fn srp_bounds_hold_in_simulation_with_offsets(set in shared_set(true)) {
        check_bounds(&set, "srp")?;
    }

    // Under PIP no job is held up by lower-priority work for longer than its blocking term.
    #[test]
    fn pip_blocking_measured_in_the_trace_stays_within_the_term(set in shared_set(true)) {
        let text = set.text("pip");
        let s = load(&text);
        let report = analyze(&s);
        let run = sim(&s);
        let terms = blocking(&report);
        for (i, measured) in worst_blocking_ms(&s, &run).into_iter().enumerate() {
            let term = terms[i].unwrap();
            prop_assert!(measured <= term + 1e-9, "task t{}: lower-priority work ran {} ms > B = {}\n{}", i + 1, measured, term, text);
        }
    }

    // EDF with SRP: when the demand test with blocking holds, no job misses in simulation.
    #[test]
    fn edf_srp_sets_that_pass_the_demand_test_never_miss(set in shared_set(true)) {
        let text = set.text_for("edf", "srp");
        let s = load(&text);
        let report = analyze(&s);
        let locks = set.tasks.iter().any(|t| t.section.is_some());
        prop_assert_eq!(report.tests[0].name, if locks { "edf-srp" } else { "edf-utilization" });
        if report.verdict == Verdict::Schedulable {
            for j in sim(&s).jobs.iter().filter(|j| j.abs_deadline < s.horizon) {
                prop_assert!(!j.missed(), "t{} job {} missed\n{}", j.task + 1, j.index, text);
            }
        }
    }

    // Exact cases: the lowest task takes the resource at 0, the others arrive δ later and
    // the highest one needs it; the bound is then reached up to δ (and exactly for the lowest).
    #[test]
    fn the_bound_is_reached_when_the_lowest_task_is_in_its_section_at_the_others_release(
        a in 1u32..=3, b in 1u32..=3, section in 1u32..=5, med in 1u32..=4, tail in 0u32..=3, srp in any::<bool>(),
    ) {
        let protocol = if srp { "srp" } else { "pip" };
        let lo_tail = if tail > 0 { format!(", {{ compute_ms = {tail} }}") } else { String::new() };
        let text = format!(
            "[scheduler]\nkind = \"fp\"\n[run]\nhorizon_ms = 100\n[[resource]]\nname = \"r\"\nprotocol = \"{protocol}\"\n\
             [[task]]\nname = \"hi\"\npriority = 1\nperiod_ms = 100\noffset_ms = 0.001\nprogram = [{{ compute_ms = {a} }}, {{ lock = \"r\" }}, {{ compute_ms = {b} }}, {{ unlock = \"r\" }}]\n\
             [[task]]\nname = \"med\"\npriority = 2\nperiod_ms = 100\noffset_ms = 0.001\nwcet_ms = {med}\n\
             [[task]]\nname = \"lo\"\npriority = 3\nperiod_ms = 100\nprogram = [{{ lock = \"r\" }}, {{ compute_ms = {section} }}, {{ unlock = \"r\" }}{lo_tail}]\n"
        );
        let s = load(&text);
        let delta = s.tasks[0].offset;
        let report = analyze(&s);
        let run = sim(&s);
        let bound = |i: usize| Nanos::try_from_ms_f64(report.tasks[i].response_time_ms.unwrap()).unwrap();
        let worst = |i: usize| run.tasks[i].stats.max_response.unwrap();
        // hi: a + b + section; med: + med; lo: everything once.
        prop_assert_eq!(bound(0), Nanos::from_ms(u64::from(a + b + section)));
        prop_assert_eq!(worst(0) + delta, bound(0), "{}", text);
        prop_assert_eq!(worst(1) + delta, bound(1), "{}", text);
        // With work after its section the lowest task ends last; without, it ends at its unlock.
        if tail > 0 {
            prop_assert_eq!(worst(2), bound(2), "{}", text);
        }
    }
}

#[test]
fn components_with_cbufs_and_programs_that_suspend_are_left_out_and_said_so() {
    let base = "[scheduler]\nkind = \"rm\"\n[[task]]\nname = \"t\"\nperiod_ms = 10\n";
    let cbufs = format!(
        "{base}program = [{{ call = \"c\" }}]\n[[component]]\nname = \"c\"\ncbufs = 1\nprogram = [{{ cbuf = \"alloc\" }}, {{ compute_ms = 1 }}, {{ cbuf = \"free\" }}]\n"
    );
    let suspends = format!("{base}program = [{{ compute_ms = 1 }}, {{ suspend_ms = 2 }}, {{ compute_ms = 1 }}]\n");
    for (text, why) in [(cbufs, "component \"c\" has cbufs"), (suspends, "task \"t\"'s program suspends")] {
        let r = analyze(&load(&text));
        assert_eq!(r.verdict, Verdict::Unknown, "{text}");
        let detail = &r.tests[0].detail;
        assert!(detail.contains(why), "{detail}");
    }
}

#[test]
fn a_fault_inside_a_section_is_in_the_blocking_term_and_the_bound_covers_the_simulated_response() {
    // lo holds the bus across 3 first reads of a file: each a 3 ms read plus 4096 B at
    // 100 MB/s (40.96 µs), with the fault's kernel work and an eviction on top in the bound.
    let text = r#"
[machine]
cpus = 1
[scheduler]
kind = "fp"
[run]
horizon_ms = 60
[memory]
total_mb = 64
readahead_pages = 1
swap = { read_latency_us = 3000, write_latency_us = 3000, read_mb_per_s = 100, write_mb_per_s = 100 }
[[region]]
name = "model"
size_mb = 1
kind = "file"
[[resource]]
name = "bus"
protocol = "pip"
[[task]]
name = "hi"
priority = 1
period_ms = 60
offset_ms = 1.5
program = [{ lock = "bus" }, { compute_ms = 1 }, { unlock = "bus" }]
[[task]]
name = "med"
priority = 2
period_ms = 60
offset_ms = 2
wcet_ms = 10
[[task]]
name = "lo"
priority = 3
period_ms = 60
program = [
  { compute_ms = 1 },
  { lock = "bus" },
  { compute_ms = 2 },
  { access = [{ pattern = "trace", region = "model", pages = [0, 1, 2] }] },
  { compute_ms = 1 },
  { unlock = "bus" },
]
"#;
    let s = load(text);
    let r = analyze(&s);
    let read_ns = 3_000_000 + 40_960;
    let costs = critmem_core::mem::FaultCosts::default();
    let fault_ns = read_ns + (costs.major + costs.reclaim_per_page).0;
    let b = blocking(&r)[0].expect("hi's blocking is bounded");
    assert!((b - (3.0 + 3.0 * fault_ns as f64 / 1e6)).abs() < 1e-9, "B(hi) = lo's 3 ms section plus three faults: {b}");
    let sim = sim(&s);
    let hi = sim.jobs.iter().find(|j| j.task == 0).unwrap();
    let simulated_ms = hi.response().unwrap().as_ms_f64();
    let bound_ms = responses(&r)[0].expect("hi has a bound");
    assert!(bound_ms >= simulated_ms, "bound {bound_ms} ms below the simulated response {simulated_ms} ms");
    assert!(r.not_covered.iter().any(|n| n.contains("faults inside critical sections are in the blocking terms")), "{:?}", r.not_covered);
}
