//! Uniprocessor EDF: the utilisation test, the processor-demand criterion (QPA) against a
//! brute-force check, and agreement with the simulator.

use crate::common::*;
use critmem_analysis::{analyze, edf_dbf, edf_demand_test, DemandTest, TaskParams, Verdict};
use critmem_core::Nanos;
use proptest::prelude::*;

fn params(set: &[Task]) -> Vec<TaskParams> {
    set.iter().map(|&(c, t, d)| TaskParams::new(ms(c), ms(t), ms(d))).collect()
}

/// dbf(t) ≤ t at every absolute deadline up to one hyperperiod plus the longest deadline.
fn brute_force_pdc(set: &[Task]) -> bool {
    let p = params(set);
    let end = ms(hyperperiod_ms(set) + set.iter().map(|t| t.2).fold(0.0, f64::max));
    p.iter().all(|k| {
        let mut t = k.deadline;
        while t <= end {
            if edf_dbf(&p, t) > u128::from(t.0) {
                return false;
            }
            t += k.period;
        }
        true
    })
}

#[test]
fn full_utilisation_with_implicit_deadlines_is_schedulable() {
    let s = load(&scenario_text("edf", 1, None, &[(1.0, 2.0, 2.0), (1.5, 3.0, 3.0)]));
    let r = analyze(&s);
    assert_eq!(r.verdict, Verdict::Schedulable);
    assert_eq!(r.tests.len(), 1, "the utilisation test is exact here: {:?}", r.tests);
    assert!(run(&s, false).tasks.iter().all(|t| t.stats.deadline_misses == 0));
}

#[test]
fn overload_is_not_schedulable_and_misses_in_simulation() {
    let s = load(&scenario_text("edf", 1, None, &[(1.0, 2.0, 2.0), (2.0, 3.0, 3.0)]));
    assert_eq!(analyze(&s).verdict, Verdict::NotSchedulable);
    assert!(run(&s, false).tasks.iter().any(|t| t.stats.deadline_misses > 0));
}

#[test]
fn constrained_deadlines_fail_the_demand_test_where_utilisation_passes() {
    // U ≈ 0.96, but dbf(6) = 2·1 + 1·2 + 1·3 = 7 > 6 (QPA, walking down from the busy
    // period's end at 16, meets dbf(15) = 16 first).
    let set = [(1.0, 4.0, 2.0), (2.0, 6.0, 3.0), (3.0, 8.0, 6.0)];
    assert_eq!(edf_dbf(&params(&set), Nanos::from_ms(6)), 7_000_000);
    assert_eq!(edf_demand_test(&params(&set)), DemandTest::Violated { at: Nanos::from_ms(15), demand: Nanos::from_ms(16) });
    let s = load(&scenario_text("edf", 1, Some(30.0), &set));
    let r = analyze(&s);
    assert_eq!(r.verdict, Verdict::NotSchedulable);
    let names: Vec<_> = r.tests.iter().map(|t| (t.name, t.verdict)).collect();
    assert_eq!(names, vec![("edf-utilization", Verdict::Unknown), ("edf-demand", Verdict::NotSchedulable)]);
    assert!(run(&s, false).tasks.iter().any(|t| t.stats.deadline_misses > 0));
}

#[test]
fn demand_bound_function_counts_jobs_with_deadlines_inside_the_interval() {
    let p = params(&[(1.0, 4.0, 2.0), (2.0, 6.0, 3.0)]);
    assert_eq!(edf_dbf(&p, Nanos::from_ms(1)), 0);
    assert_eq!(edf_dbf(&p, Nanos::from_ms(3)), 3_000_000);
    assert_eq!(edf_dbf(&p, Nanos::from_ms(9)), 6_000_000);
}

#[test]
fn huge_coprime_periods_do_not_overflow() {
    // Periods near 2^40 ns with no common factor: the exact sums still fit or fall back cleanly.
    let p = [
        TaskParams::new(Nanos(1 << 38), Nanos((1 << 40) + 1), Nanos(1 << 39)),
        TaskParams::new(Nanos(1 << 38), Nanos((1 << 40) + 3), Nanos(1 << 39)),
        TaskParams::new(Nanos(1 << 37), Nanos((1 << 40) + 7), Nanos((1 << 40) + 7)),
    ];
    assert!(matches!(edf_demand_test(&p), DemandTest::Holds { .. }), "{:?}", edf_demand_test(&p));
}

proptest! {
    // Implicit deadlines, U from 0.5 to ~1.3: the verdict is schedulable exactly when U ≤ 1,
    // and the simulator (one hyperperiod, synchronous release) misses exactly when it is not.
    #![proptest_config(cases(500))]
    #[test]
    fn edf_implicit_verdict_matches_utilisation_and_simulation(set in task_set(2..=6, &PERIODS_MS, 500..=1300)) {
        let text = scenario_text("edf", 1, None, &set);
        let s = load(&text);
        let verdict = analyze(&s).verdict;
        let misses: u64 = run(&s, false).tasks.iter().map(|t| t.stats.deadline_misses).sum();
        prop_assert_eq!(verdict == Verdict::Schedulable, u_at_most_one(&set), "{}", text);
        prop_assert_eq!(verdict, if misses == 0 { Verdict::Schedulable } else { Verdict::NotSchedulable }, "{}", text);
    }
}

proptest! {
    // Constrained deadlines (C ≤ D ≤ T): QPA agrees with checking every deadline, and the
    // simulator (hyperperiod + longest deadline) misses exactly when the analysis says so.
    #![proptest_config(cases(500))]
    #[test]
    fn edf_constrained_verdict_matches_brute_force_and_simulation(
        set in task_set(2..=6, &PERIODS_MS, 300..=1000),
        shrink in prop::collection::vec(30u32..=100, 6),
    ) {
        let set: Vec<Task> = set.iter().zip(&shrink).map(|(&(c, t, _), &pct)| (c, t, (t * f64::from(pct) / 100.0).round().clamp(c.ceil(), t))).collect();
        let d_max = set.iter().map(|t| t.2).fold(0.0, f64::max);
        let text = scenario_text("edf", 1, Some(hyperperiod_ms(&set) + d_max), &set);
        let s = load(&text);
        let verdict = analyze(&s).verdict;
        let misses: u64 = run(&s, false).tasks.iter().map(|t| t.stats.deadline_misses).sum();
        let pdc = u_at_most_one(&set) && brute_force_pdc(&set);
        prop_assert_eq!(verdict == Verdict::Schedulable, pdc, "{}", text);
        prop_assert_eq!(verdict, if misses == 0 { Verdict::Schedulable } else { Verdict::NotSchedulable }, "{}", text);
    }
}
