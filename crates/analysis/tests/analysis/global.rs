//! Global EDF (bounded tardiness, GFB, Devi–Anderson bounds) and global FP
//! (Bertogna–Cirinei) against known answers, a plain re-implementation and the simulator.

use crate::common::*;
use critmem_analysis::{analyze, gedf_gfb, gedf_tardiness_bounds, gedf_tardiness_is_bounded, gfp_response_bounds, TaskParams, Verdict};
use critmem_core::{Nanos, Scenario};
use proptest::prelude::*;

const GLOBAL_PERIODS_MS: [u32; 6] = [10, 20, 30, 40, 60, 120];

fn p(c: u64, t: u64) -> TaskParams {
    TaskParams::implicit(Nanos::from_ms(c), Nanos::from_ms(t))
}

#[test]
fn devi_anderson_bounds_match_the_published_worked_example() {
    // Two CPUs, U = 2: Λ = 1, x = (4 − 2)/2 = 1, bounds x + C = 3, 3, 5
    // (the same figures RealTimeScheduling.jl documents for this set).
    let tasks = [p(2, 3), p(2, 3), p(4, 6)];
    assert_eq!(gedf_tardiness_is_bounded(&tasks, 2), Some(true));
    assert_eq!(gedf_tardiness_bounds(&tasks, 2), Some(vec![Nanos::from_ms(3), Nanos::from_ms(3), Nanos::from_ms(5)]));
    assert_eq!(gedf_gfb(&tasks, 2), Some(false));
}

#[test]
fn utilisation_above_the_cpu_count_or_one_fat_task_means_unbounded_tardiness() {
    assert_eq!(gedf_tardiness_is_bounded(&[p(3, 4), p(3, 4), p(3, 4)], 2), Some(false));
    assert_eq!(gedf_tardiness_is_bounded(&[p(5, 4)], 2), Some(false));
    let s = load(&scenario_text("gedf", 2, None, &[(3.0, 4.0, 4.0), (3.0, 4.0, 4.0), (3.0, 4.0, 4.0)]));
    assert_eq!(analyze(&s).verdict, Verdict::UnboundedTardiness);
}

#[test]
fn dropping_jobs_makes_overload_unknown_rather_than_unbounded() {
    let text = scenario_text("gedf", 2, None, &[(3.0, 4.0, 4.0), (3.0, 4.0, 4.0), (3.0, 4.0, 4.0)]) + "overrun = \"skip\"\n";
    assert_eq!(analyze(&load(&text)).verdict, Verdict::Unknown);
}

#[test]
fn gfb_passes_light_sets_and_makes_them_schedulable() {
    // U = 1.4 ≤ 2 − 0.5.
    let set = [(5.0, 10.0, 10.0), (10.0, 20.0, 20.0), (4.0, 10.0, 10.0)];
    let s = load(&scenario_text("gedf", 2, None, &set));
    let r = analyze(&s);
    assert_eq!(r.verdict, Verdict::Schedulable);
    assert!(r.tasks.iter().all(|t| t.schedulable == Some(true)));
    assert!(run(&s, false).tasks.iter().all(|t| t.stats.deadline_misses == 0));
}

#[test]
fn one_cpu_global_schedulers_are_analysed_as_uniprocessor_ones() {
    let set = [(1.0, 4.0, 4.0), (1.0, 5.0, 5.0), (3.0, 9.0, 9.0), (3.0, 18.0, 18.0)];
    let r = analyze(&load(&scenario_text("gfp", 1, None, &set)));
    assert_eq!(r.tests[0].name, "fp-rta");
    assert_eq!(r.tasks[3].response_time_ms, Some(18.0));
    let r = analyze(&load(&scenario_text("gedf", 1, None, &set)));
    assert_eq!(r.tests[0].name, "edf-utilization");
}

#[test]
fn global_fp_top_m_tasks_respond_in_their_wcet() {
    let set = [(2.0, 10.0, 10.0), (3.0, 12.0, 12.0), (4.0, 20.0, 20.0)];
    let r = analyze(&load(&scenario_text("gfp", 2, None, &set)));
    assert_eq!(r.tasks[0].response_time_ms, Some(2.0));
    assert_eq!(r.tasks[1].response_time_ms, Some(3.0));
    assert_eq!(r.verdict, Verdict::Schedulable);
}

#[test]
fn global_edf_tardiness_can_keep_growing_for_twenty_hyperperiods_before_settling() {
    // t1 needs 115.5 of every 120 ms; t2 and t3 together take both CPUs for 0.5 ms every
    // 10 ms while t1 is not yet late. t1's lateness grows 0.5 ms per job and settles at
    // 10.5 ms from job 19 on: bounded (Devi–Anderson: 173 ms), but the second half of a
    // 20-hyperperiod run is later than the first.
    let set = [(115.5, 120.0, 120.0), (0.5, 10.0, 10.0), (0.5, 10.0, 10.0)];
    let s = load(&scenario_text("gedf", 2, Some(60.0 * 120.0), &set));
    let r = analyze(&s);
    assert_eq!(r.verdict, Verdict::BoundedTardiness);
    assert_eq!(r.tasks[0].tardiness_bound_ms, Some(173.0));
    let sim = run(&s, true);
    let lateness = |from: u64, to: u64| {
        let jobs: Vec<_> = sim.jobs.iter().filter(|j| j.task == 0 && (from..to).contains(&j.index)).collect();
        max_tardiness(&jobs, s.horizon)
    };
    assert!(lateness(10, 20) > lateness(0, 10), "grows during the first 20 hyperperiods");
    assert_eq!(lateness(19, 59), Nanos::from_us(10_500), "then settles");
}

/// Bertogna–Cirinei by plain fixed-point iteration, to check the accelerated search.
fn bc_plain(tasks: &[TaskParams], ranks: &[u32], m: u64) -> Vec<Option<Nanos>> {
    let mut order: Vec<usize> = (0..tasks.len()).collect();
    order.sort_by_key(|&i| ranks[i]);
    let mut out = vec![None; tasks.len()];
    let mut hp: Vec<(u64, u64, u64)> = vec![];
    'tasks: for &k in &order {
        let (c, d) = (tasks[k].wcet.0, tasks[k].deadline.0);
        if d > tasks[k].period.0 {
            break;
        }
        let mut r = c;
        loop {
            let s: u64 = hp
                .iter()
                .map(|&(ci, ti, ri)| {
                    let n = (r + ri - ci) / ti;
                    let w = n * ci + ci.min(r + ri - ci - n * ti);
                    w.min(r - c + 1)
                })
                .sum();
            let next = c + s / m;
            if next == r {
                break;
            }
            r = next;
            if r > d {
                break 'tasks;
            }
        }
        out[k] = Some(Nanos(r));
        hp.push((c, tasks[k].period.0, r));
    }
    out
}

fn max_tardiness(jobs: &[&critmem_core::JobRecord], horizon: Nanos) -> Nanos {
    jobs.iter().map(|j| j.tardiness(horizon)).max().unwrap_or(Nanos::ZERO)
}

fn gedf_case() -> impl Strategy<Value = (usize, Vec<Task>)> {
    (2usize..=4).prop_flat_map(|m| (Just(m), task_set(3..=8, &GLOBAL_PERIODS_MS, 500..=(1000 * m as u32))))
}

proptest! {
    // Global EDF, m ∈ {2, 3, 4}, U ≤ m, each u ≤ 1, simulated for 20 hyperperiods: no job is
    // later than its task's Devi–Anderson bound, and when GFB (or U ≤ 1) holds nothing is
    // late at all. (Lateness in the second half can exceed the first half's: see
    // `global_edf_tardiness_can_keep_growing_for_twenty_hyperperiods_before_settling`.)
    #![proptest_config(cases(300))]
    #[test]
    fn global_edf_tardiness_stays_within_devi_anderson_bounds((m, set) in gedf_case()) {
        let horizon_ms = 20.0 * hyperperiod_ms(&set);
        let text = scenario_text("gedf", m, Some(horizon_ms), &set);
        let s: Scenario = load(&text);
        let report = analyze(&s);
        prop_assume!(report.tests[0].verdict == Verdict::BoundedTardiness);
        let sim = run(&s, true);
        let horizon = s.horizon;
        for (i, t) in report.tasks.iter().enumerate() {
            let jobs: Vec<_> = sim.jobs.iter().filter(|j| j.task as usize == i).collect();
            let bound = ms(t.tardiness_bound_ms.expect("implicit deadlines get a bound"));
            prop_assert!(max_tardiness(&jobs, horizon) <= bound, "task {} exceeds its bound {:?}\n{}", t.name, bound, text);
        }
        if report.verdict == Verdict::Schedulable || utilization(&set) <= 1.0 {
            prop_assert!(sim.jobs.iter().all(|j| !j.missed()), "GFB-schedulable set misses\n{}", text);
        }
    }
}

fn gfp_case() -> impl Strategy<Value = (usize, Vec<Task>)> {
    (2usize..=3, prop::collection::vec(40u32..=100, 7)).prop_flat_map(|(m, shrink)| {
        (Just(m), task_set(3..=7, &GLOBAL_PERIODS_MS, 400..=(800 * m as u32))).prop_map(move |(m, set)| {
            let set =
                set.iter().zip(&shrink).map(|(&(c, t, _), &pct)| (c, t, (t * f64::from(pct) / 100.0).round().clamp(c.ceil(), t))).collect();
            (m, set)
        })
    })
}

proptest! {
    // Global rate-monotonic, m ∈ {2, 3}, constrained deadlines: every Bertogna–Cirinei bound
    // is at least the simulated worst response (over 4 hyperperiods) and that task never misses.
    #![proptest_config(cases(300))]
    #[test]
    fn global_fp_bounds_cover_simulated_responses((m, set) in gfp_case()) {
        let text = scenario_text("gfp", m, Some(4.0 * hyperperiod_ms(&set)), &set);
        let s = load(&text);
        let report = analyze(&s);
        let sim = run(&s, false);
        for (a, t) in report.tasks.iter().zip(&sim.tasks) {
            if let Some(bound) = a.response_time_ms {
                prop_assert_eq!(t.stats.deadline_misses, 0, "task {}\n{}", a.name, text);
                prop_assert!(t.stats.max_response.is_none_or(|r| r <= ms(bound)), "task {} responds in {:?} > {}\n{}", a.name, t.stats.max_response, bound, text);
            }
        }
    }
}

proptest! {
    // The accelerated fixed-point search finds exactly what plain iteration finds.
    #![proptest_config(cases(1000))]
    #[test]
    fn global_fp_accelerated_search_equals_plain_iteration(
        m in 2u64..=4,
        raw in prop::collection::vec((5u64..=60, 1u64..=100, 1u64..=100, any::<u32>()), 2..=8),
    ) {
        let tasks: Vec<TaskParams> = raw
            .iter()
            .map(|&(t, cw, dw, _)| {
                let c = (t * cw / 200).max(1);
                let d = c + (t - c) * dw / 100;
                TaskParams::new(Nanos(c), Nanos(t), Nanos(d))
            })
            .collect();
        let mut order: Vec<usize> = (0..raw.len()).collect();
        order.sort_by_key(|&i| (raw[i].3, i));
        let mut ranks = vec![0u32; raw.len()];
        for (r, &i) in order.iter().enumerate() {
            ranks[i] = r as u32;
        }
        prop_assert_eq!(gfp_response_bounds(&tasks, &ranks, m as usize), bc_plain(&tasks, &ranks, m));
    }
}
