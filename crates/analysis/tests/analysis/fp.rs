//! Fixed-priority response-time analysis: textbook answers and exact agreement with the
//! simulator under synchronous release.

use crate::common::*;
use critmem_analysis::{analyze, fp_response_time, fp_response_times, Rta, TaskParams, Verdict};
use critmem_core::Nanos;
use proptest::prelude::*;

fn implicit(set: &[(f64, f64)]) -> Vec<Task> {
    set.iter().map(|&(c, t)| (c, t, t)).collect()
}

/// Analysed and simulated worst responses (ms) of an RM set over one hyperperiod.
fn rm_responses(set: &[(f64, f64)]) -> (Vec<Option<f64>>, Vec<Option<f64>>) {
    let s = load(&scenario_text("rm", 1, None, &implicit(set)));
    let report = analyze(&s);
    let sim = run(&s, false);
    let analysed = report.tasks.iter().map(|t| t.response_time_ms).collect();
    let simulated = sim.tasks.iter().map(|t| t.stats.max_response.map(Nanos::as_ms_f64)).collect();
    (analysed, simulated)
}

#[test]
fn textbook_rm_set_has_known_response_times_and_the_simulator_agrees() {
    let (analysed, simulated) = rm_responses(&[(1.0, 4.0), (1.0, 5.0), (3.0, 9.0), (3.0, 18.0)]);
    let expected = vec![Some(1.0), Some(2.0), Some(7.0), Some(18.0)];
    assert_eq!(analysed, expected);
    assert_eq!(simulated, expected);
}

#[test]
fn second_textbook_rm_set_has_known_response_times_and_the_simulator_agrees() {
    let (analysed, simulated) = rm_responses(&[(3.0, 7.0), (3.0, 12.0), (5.0, 20.0)]);
    let expected = vec![Some(3.0), Some(6.0), Some(20.0)];
    assert_eq!(analysed, expected);
    assert_eq!(simulated, expected);
}

#[test]
fn plain_parameter_api_matches_the_scenario_api() {
    let p = |c, t| TaskParams::implicit(Nanos::from_ms(c), Nanos::from_ms(t));
    let tasks = [p(3, 7), p(3, 12), p(5, 20)];
    let r = fp_response_times(&tasks, &[0, 1, 2]);
    assert_eq!(r[2], Rta::Meets { response: Nanos::from_ms(20) });
    // Reversed priorities: the 7 ms task now waits for 3 + 5 ms and misses.
    let r = fp_response_times(&tasks, &[2, 1, 0]);
    assert!(matches!(r[0], Rta::Misses { .. }), "{r:?}");
}

#[test]
fn a_miss_stops_at_the_first_iterate_past_the_deadline() {
    // U = 0.5 + 0.6: the 5 ms task's response iterates 4, 5, 7 > 5.
    let hi = TaskParams::implicit(Nanos::from_ms(2), Nanos::from_ms(4));
    let lo = TaskParams::implicit(Nanos::from_ms(3), Nanos::from_ms(5));
    assert_eq!(fp_response_time(&lo, &[hi]), Rta::Misses { response_at_least: Nanos::from_ms(7) });
}

#[test]
fn deadlines_beyond_the_period_use_the_busy_period() {
    // hi (2, 5) and lo (4, 7, D = 14): lo's first job ends at 8, after its next release at 7;
    // that second job ends at 14 (response 7), closing the busy period. Worst response 8.
    let hi = TaskParams::implicit(Nanos::from_ms(2), Nanos::from_ms(5));
    let lo = TaskParams::new(Nanos::from_ms(4), Nanos::from_ms(7), Nanos::from_ms(14));
    assert_eq!(fp_response_time(&lo, &[hi]), Rta::Meets { response: Nanos::from_ms(8) });
    let s = load(&scenario_text("rm", 1, None, &[(2.0, 5.0, 5.0), (4.0, 7.0, 14.0)]));
    assert_eq!(run(&s, false).tasks[1].stats.max_response, Some(Nanos::from_ms(8)));
    assert_eq!(analyze(&s).verdict, Verdict::Schedulable);
}

#[test]
fn explicit_priorities_follow_the_simulator_order_including_ties() {
    // Equal priorities: the task listed first ranks higher, as in the simulator.
    let text = "[scheduler]\nkind = \"fp\"\n[[task]]\nname = \"a\"\nwcet_ms = 2\nperiod_ms = 10\npriority = 1\n\
                [[task]]\nname = \"b\"\nwcet_ms = 3\nperiod_ms = 5\npriority = 1\n";
    let s = load(text);
    let r = analyze(&s);
    assert_eq!(r.tasks.iter().map(|t| t.priority_rank).collect::<Vec<_>>(), vec![Some(0), Some(1)]);
    assert_eq!(r.task("b").unwrap().response_time_ms, Some(5.0));
    assert_eq!(run(&s, false).tasks[1].stats.max_response, Some(Nanos::from_ms(5)));
}

#[test]
fn self_suspension_counts_as_execution_and_a_miss_is_then_not_a_proof() {
    // hi sleeps 3 ms mid-job: analysed as 5 ms of execution, so lo's bound is 2 + 5 = 7 ms
    // (the simulator's 3 ms is below it, as it must be).
    let text =
        "[scheduler]\nkind = \"rm\"\n[[task]]\nname = \"hi\"\nwcet_ms = 2\nperiod_ms = 10\nsuspend = [{ after_ms = 1, for_ms = 3 }]\n\
                [[task]]\nname = \"lo\"\nwcet_ms = 2\nperiod_ms = 20\n";
    let r = analyze(&load(text));
    assert_eq!(r.task("hi").unwrap().response_time_ms, Some(5.0));
    assert_eq!(r.task("lo").unwrap().response_time_ms, Some(7.0));
    assert!(r.tests[0].detail.contains("suspension-oblivious"), "{}", r.tests[0].detail);
    // Too much suspension for lo's deadline: the analysis cannot prove the miss.
    let tight = text.replace("period_ms = 20", "period_ms = 20\ndeadline_ms = 6");
    let r = analyze(&load(&tight));
    assert_eq!(r.verdict, Verdict::Unknown);
    assert_eq!(r.task("lo").unwrap().schedulable, None);
}

#[test]
fn offsets_are_ignored_and_said_so() {
    let text = "[scheduler]\nkind = \"rm\"\n[[task]]\nname = \"a\"\nwcet_ms = 1\nperiod_ms = 4\noffset_ms = 1\n";
    let r = analyze(&load(text));
    assert!(r.tests[0].detail.contains("offsets ignored"), "{}", r.tests[0].detail);
}

proptest! {
    // 1000 random RM sets (U up to ~1.1) over one hyperperiod: every task the analysis
    // clears has exactly the analysed worst response in simulation, and every task it
    // rejects misses a deadline in simulation.
    #![proptest_config(cases(1000))]
    #[test]
    fn rm_response_times_equal_simulated_worst_responses(set in task_set(2..=6, &PERIODS_MS, 300..=1100)) {
        let text = scenario_text("rm", 1, None, &set);
        let s = load(&text);
        let report = analyze(&s);
        let sim = run(&s, false);
        for (a, t) in report.tasks.iter().zip(&sim.tasks) {
            match a.schedulable {
                Some(true) => prop_assert_eq!(a.response_time_ms, t.stats.max_response.map(Nanos::as_ms_f64), "task {}\n{}", a.name, text),
                Some(false) => prop_assert!(t.stats.deadline_misses > 0, "task {} should miss\n{}", a.name, text),
                None => prop_assert!(false, "undecided task {}\n{}", a.name, text),
            }
        }
    }
}

proptest! {
    // Deadline-monotonic with deadlines from half to twice the period (horizon one
    // hyperperiod plus the longest deadline): the busy-period analysis is exact too. A miss
    // is checked in simulation only when U ≤ 1 (with U > 1 it may come after the horizon).
    #![proptest_config(cases(300))]
    #[test]
    fn dm_arbitrary_deadline_response_times_equal_simulated_worst_responses(
        set in task_set(2..=5, &PERIODS_MS, 300..=1000),
        stretch in prop::collection::vec(50u32..=200, 5),
    ) {
        let set: Vec<Task> = set.iter().zip(&stretch).map(|(&(c, t, _), &pct)| (c, t, (t * f64::from(pct) / 100.0).round().max(c))).collect();
        let d_max = set.iter().map(|t| t.2).fold(0.0, f64::max);
        let text = scenario_text("dm", 1, Some(hyperperiod_ms(&set) + d_max), &set);
        let s = load(&text);
        let report = analyze(&s);
        let sim = run(&s, false);
        let within_horizon = u_at_most_one(&set);
        for (a, t) in report.tasks.iter().zip(&sim.tasks) {
            match a.schedulable {
                Some(true) => prop_assert_eq!(a.response_time_ms, t.stats.max_response.map(Nanos::as_ms_f64), "task {}\n{}", a.name, text),
                Some(false) => prop_assert!(!within_horizon || t.stats.deadline_misses > 0, "task {} should miss\n{}", a.name, text),
                None => prop_assert!(false, "undecided task {}\n{}", a.name, text),
            }
        }
    }
}
