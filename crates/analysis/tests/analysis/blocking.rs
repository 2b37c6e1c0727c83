//! Blocking terms (PIP, SRP with multi-unit resources), response times with blocking and
//! jitter, and EDF with SRP.

use crate::common::cases;
use critmem_analysis::{
    edf_preemption_levels, edf_srp_test, fp_preemption_levels, fp_response_time, fp_response_times, fp_response_times_with_blocking,
    fp_response_times_with_jitter, pip_blocking, srp_blocking, srp_ceiling, CriticalSection, ResourceModel, Rta, SupplyTest, TaskParams,
};
use critmem_core::Nanos;
use proptest::prelude::*;

fn ms(x: u64) -> Nanos {
    Nanos::from_ms(x)
}

fn cs(resource: usize, units: u32, duration_ms: u64) -> CriticalSection {
    CriticalSection { resource, units, duration: ms(duration_ms), within: None }
}

fn p(c: u64, t: u64) -> TaskParams {
    TaskParams::implicit(ms(c), ms(t))
}

/// Three tasks, two mutexes: τ1 uses R0; τ2 and τ3 use R0 and R1.
fn three_task_pip_model() -> ResourceModel {
    ResourceModel { units: vec![1, 1], sections: vec![vec![cs(0, 1, 1)], vec![cs(0, 1, 2), cs(1, 1, 3)], vec![cs(0, 1, 4), cs(1, 1, 5)]] }
}

#[test]
fn pip_takes_the_lesser_of_the_per_task_and_per_resource_sums() {
    // Ceilings: R0 → τ1's priority, R1 → τ2's.
    // τ1: only R0 reaches it. Per task: τ2's 2 + τ3's 4 = 6; per resource: R0's longest 4. B = 4.
    // τ2: R0 and R1 reach it, only τ3 is below. Per task: τ3's longest 5; per resource:
    //     4 + 5 = 9. B = 5.
    // τ3: nothing below. B = 0.
    let b = pip_blocking(&three_task_pip_model(), &[0, 1, 2]).unwrap();
    assert_eq!(b, vec![ms(4), ms(5), ms(0)]);
}

#[test]
fn pip_follows_a_chain_through_a_nested_section() {
    // τ1 uses R0 (1 ms); τ2 holds R0 for 4 ms and takes R1 inside it (listed with the outer
    // 4 ms); τ3 holds R1 for 3 ms. τ1 can wait for τ2's R0 while τ2 waits for τ3's R1: R1's
    // ceiling rises to τ1's priority. Per task: τ2's 4 + τ3's 3 = 7; per resource: R0's 4 +
    // R1's max(4, 3) = 8. B1 = 7 (without the nesting it would be 4). τ2: τ3's 3.
    let inner = CriticalSection { within: Some(0), ..cs(1, 1, 4) };
    let chained = ResourceModel { units: vec![1, 1], sections: vec![vec![cs(0, 1, 1)], vec![cs(0, 1, 4), inner], vec![cs(1, 1, 3)]] };
    assert_eq!(pip_blocking(&chained, &[0, 1, 2]).unwrap(), vec![ms(7), ms(3), ms(0)]);
    let flat = ResourceModel { units: vec![1, 1], sections: vec![vec![cs(0, 1, 1)], vec![cs(0, 1, 4), cs(1, 1, 4)], vec![cs(1, 1, 3)]] };
    assert_eq!(pip_blocking(&flat, &[0, 1, 2]).unwrap(), vec![ms(4), ms(3), ms(0)]);
    let bad = ResourceModel { units: vec![1, 1], sections: vec![vec![CriticalSection { within: Some(0), ..cs(1, 1, 1) }], vec![], vec![]] };
    assert_eq!(
        pip_blocking(&bad, &[0, 1, 2]).unwrap_err().to_string(),
        "task[0].section[0].within: the task has no other section on resource 0 to nest in"
    );
}

#[test]
fn response_times_with_pip_blocking_add_the_blocking_once() {
    // (C, T) = (2, 10), (6, 20), (10, 50) with B = 4, 5, 0:
    // R1 = 2 + 4 = 6.
    // R2 = 6 + 5 + ⌈R/10⌉·2: 13 → 6 + 5 + 4 = 15 → 15.
    // R3 = 10 + ⌈R/10⌉·2 + ⌈R/20⌉·6: 18 → 10 + 4 + 6 = 20 → 20.
    let tasks = [p(2, 10), p(6, 20), p(10, 50)];
    let b = pip_blocking(&three_task_pip_model(), &[0, 1, 2]).unwrap();
    let r = fp_response_times_with_blocking(&tasks, &[0, 1, 2], &b).unwrap();
    assert_eq!(r, vec![Rta::Meets { response: ms(6) }, Rta::Meets { response: ms(15) }, Rta::Meets { response: ms(20) }]);
}

#[test]
fn a_deferred_higher_priority_release_counts_through_its_jitter() {
    // hi (2, 10) with jitter 8 can hit twice within any window over 2 ms:
    // R = 3 + ⌈(R + 8)/10⌉·2: 5 → ⌈13/10⌉ = 2 → 7 → ⌈15/10⌉ = 2 → 7. Without jitter, 5.
    let tasks = [p(2, 10), p(3, 20)];
    let r = fp_response_times_with_jitter(&tasks, &[ms(8), ms(0)], &[0, 1], &[ms(0), ms(0)]).unwrap();
    assert_eq!(r[1], Rta::Meets { response: ms(7) });
    let r = fp_response_times_with_jitter(&tasks, &[ms(0), ms(0)], &[0, 1], &[ms(0), ms(0)]).unwrap();
    assert_eq!(r[1], Rta::Meets { response: ms(5) });
}

#[test]
fn blocking_past_the_deadline_is_a_miss() {
    // C = 2, B = 9 against D = 10: the first iterate 11 already passes the deadline.
    let r = fp_response_times_with_blocking(&[p(2, 10)], &[0], &[ms(9)]).unwrap();
    assert_eq!(r[0], Rta::Misses { response_at_least: ms(11) });
}

/// One 2-unit resource: τ1 takes 1 unit for 1 ms, τ2 both units for 3 ms, τ3 1 unit for 4 ms.
fn two_unit_model() -> ResourceModel {
    ResourceModel { units: vec![2], sections: vec![vec![cs(0, 1, 1)], vec![cs(0, 2, 3)], vec![cs(0, 1, 4)]] }
}

#[test]
fn srp_ceiling_of_a_two_unit_resource_depends_on_the_units_left() {
    // Levels 3, 2, 1. With 2 units left nobody can want more: no ceiling; with 1 left only τ2
    // (who takes 2) can: level 2; with none left every user: level 3.
    let levels = fp_preemption_levels(&[0, 1, 2]);
    assert_eq!(levels, vec![3, 2, 1]);
    let m = two_unit_model();
    assert_eq!(srp_ceiling(&m, &levels, 0, 2), None);
    assert_eq!(srp_ceiling(&m, &levels, 0, 1), Some(2));
    assert_eq!(srp_ceiling(&m, &levels, 0, 0), Some(3));
}

#[test]
fn srp_blocks_only_through_sections_that_raise_the_ceiling_high_enough() {
    // τ1 (level 3): τ2 holding both units leaves 0 → ceiling 3 ≥ 3: 3 ms. τ3 holding one unit
    //   leaves 1 → ceiling 2 < 3: τ1 still finds a unit, no blocking. B1 = 3.
    // τ2 (level 2): τ3's section leaves 1 → ceiling 2 ≥ 2: B2 = 4. τ3: B3 = 0.
    let b = srp_blocking(&two_unit_model(), &[3, 2, 1]).unwrap();
    assert_eq!(b, vec![ms(3), ms(4), ms(0)]);
    // The same sections on a mutex: every section blocks every higher level. B1 = max(3, 4).
    let mutex = ResourceModel { units: vec![1], sections: vec![vec![cs(0, 1, 1)], vec![cs(0, 1, 3)], vec![cs(0, 1, 4)]] };
    assert_eq!(srp_blocking(&mutex, &[3, 2, 1]).unwrap(), vec![ms(4), ms(4), ms(0)]);
}

#[test]
fn edf_preemption_levels_follow_relative_deadlines() {
    let tasks = [TaskParams::new(ms(1), ms(20), ms(10)), p(1, 5), p(1, 20), p(1, 10)];
    assert_eq!(edf_preemption_levels(&tasks), vec![2, 3, 1, 2]);
}

#[test]
fn edf_with_srp_checks_demand_plus_the_blocking_of_longer_deadline_jobs() {
    // (C, T = D) = (1, 5), (2, 10), (4, 20); τ1 and τ3 share a mutex, τ3 for 2 ms. For
    // t in [5, 20) a τ3 section can be in the way: B(t) = 2.
    // t = 5: 1 + 2 = 3 ≤ 5; 10: 2 + 2 + 2 = 6; 15: 3 + 2 + 2 = 7; 20: 4 + 4 + 4 = 12 ≤ 20.
    // Check bound: B_max/(1 − U) = 2/0.4 = 5 ms, below D_max = 20 ms.
    let model = ResourceModel { units: vec![1], sections: vec![vec![cs(0, 1, 1)], vec![], vec![cs(0, 1, 2)]] };
    assert_eq!(edf_srp_test(&[p(1, 5), p(2, 10), p(4, 20)], &model).unwrap(), SupplyTest::Holds { checked_to: ms(20) });
    // (2, 5), (4, 10), (3, 20) with a 3 ms τ3 section: at t = 10, dbf = 4 + 4 = 8, plus 3 = 11 > 10.
    let model = ResourceModel { units: vec![1], sections: vec![vec![cs(0, 1, 1)], vec![], vec![cs(0, 1, 3)]] };
    assert_eq!(
        edf_srp_test(&[p(2, 5), p(4, 10), p(3, 20)], &model).unwrap(),
        SupplyTest::Violated { at: ms(10), demand: ms(11), supply: ms(10) }
    );
}

#[test]
fn malformed_models_are_refused_with_the_key_and_reason() {
    let e = pip_blocking(&ResourceModel { units: vec![2], sections: vec![vec![cs(0, 3, 1)]] }, &[0]).unwrap_err();
    assert_eq!(e.to_string(), "task[0].section[0].units: takes 3 units of a 2-unit resource");
    let e = srp_blocking(&ResourceModel { units: vec![1], sections: vec![vec![cs(1, 1, 1)]] }, &[1]).unwrap_err();
    assert_eq!(e.to_string(), "task[0].section[0].resource: no resource 1 (there are 1)");
    let e = pip_blocking(&ResourceModel { units: vec![0], sections: vec![vec![]] }, &[0]).unwrap_err();
    assert_eq!(e.key, "resource[0].units");
    let e = fp_response_times_with_blocking(&[p(1, 4)], &[0], &[]).unwrap_err();
    assert_eq!(e.to_string(), "blocking: 0 entries for 1 tasks");
}

/// A random resource model: `n` tasks, up to 3 resources of 1–3 units, up to 3 sections each.
fn model(n: usize) -> impl Strategy<Value = ResourceModel> {
    (prop::collection::vec(1u32..=3, 1..=3), prop::collection::vec(prop::collection::vec((0usize..3, 1u32..=3, 1u64..=10), 0..=3), n))
        .prop_map(|(units, raw)| {
            let sections = raw
                .iter()
                .map(|list| {
                    list.iter()
                        .map(|&(r, u, d)| {
                            let r = r % units.len();
                            cs(r, u.min(units[r]), d)
                        })
                        .collect()
                })
                .collect();
            ResourceModel { units, sections }
        })
}

proptest! {
    #![proptest_config(cases(500))]
    #[test]
    fn blocking_never_grows_when_a_section_shrinks(m in model(4), task in 0usize..4, which in 0usize..3, cut in 1u64..=10) {
        let ranks = [0, 1, 2, 3];
        let levels = fp_preemption_levels(&ranks);
        let (pip, srp) = (pip_blocking(&m, &ranks).unwrap(), srp_blocking(&m, &levels).unwrap());
        let mut shorter = m.clone();
        if let Some(s) = shorter.sections[task].get_mut(which) {
            s.duration = s.duration.saturating_sub(ms(cut));
        }
        let (pip2, srp2) = (pip_blocking(&shorter, &ranks).unwrap(), srp_blocking(&shorter, &levels).unwrap());
        for i in 0..4 {
            prop_assert!(pip2[i] <= pip[i], "PIP task {}: {:?} > {:?}\n{:?}", i, pip2[i], pip[i], m);
            prop_assert!(srp2[i] <= srp[i], "SRP task {}: {:?} > {:?}\n{:?}", i, srp2[i], srp[i], m);
        }
        // On mutexes the SRP ceiling is the priority ceiling and SRP blocks at most once, by
        // one of the sections PIP adds up: never more than PIP. The lowest task is never blocked.
        if m.units.iter().all(|&u| u == 1) {
            for i in 0..4 {
                prop_assert!(srp[i] <= pip[i], "task {}: SRP {:?} > PIP {:?}\n{:?}", i, srp[i], pip[i], m);
            }
        }
        prop_assert_eq!(pip[3], Nanos::ZERO);
        prop_assert_eq!(srp[3], Nanos::ZERO);
    }

    #[test]
    fn rta_with_zero_blocking_equals_the_plain_rta(
        raw in prop::collection::vec((1u64..=20, 4u64..=60), 1..=6),
        stretch in prop::collection::vec(50u64..=200, 6),
    ) {
        let tasks: Vec<TaskParams> = raw.iter().zip(&stretch).map(|(&(c, t), &s)| {
            TaskParams::new(Nanos::from_ms(c.min(t)), Nanos::from_ms(t), Nanos::from_ms((t * s / 100).max(1)))
        }).collect();
        let ranks: Vec<u32> = (0..tasks.len() as u32).collect();
        let zeros = vec![Nanos::ZERO; tasks.len()];
        prop_assert_eq!(fp_response_times_with_blocking(&tasks, &ranks, &zeros).unwrap(), fp_response_times(&tasks, &ranks));
        // And blocking B acts like a job that can only run first: never better than without.
        let b = vec![Nanos::from_ms(1); tasks.len()];
        let with = fp_response_times_with_blocking(&tasks, &ranks, &b).unwrap();
        for (k, r) in with.iter().enumerate() {
            let higher: Vec<TaskParams> = tasks[..k].to_vec();
            if let (Rta::Meets { response: a }, Rta::Meets { response: z }) = (r, fp_response_time(&tasks[k], &higher)) {
                prop_assert!(*a >= z);
            }
        }
    }
}
