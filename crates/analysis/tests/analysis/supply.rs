//! The periodic resource model's supply-bound function, and FP and EDF on a partial supply.

use crate::common::cases;
use critmem_analysis::{
    edf_demand_test, edf_supply_test, fp_response_times, fp_response_times_on, DemandTest, EdfSrpBlocking, PeriodicResource, Rta, Supply,
    SupplyTest, TaskParams,
};
use critmem_core::Nanos;
use proptest::prelude::*;

fn ms(x: u64) -> Nanos {
    Nanos::from_ms(x)
}

fn p(c: u64, t: u64) -> TaskParams {
    TaskParams::implicit(ms(c), ms(t))
}

#[test]
fn sbf_of_two_in_five_has_a_six_ms_blackout_then_two_of_every_five() {
    // Θ = 2, Π = 5: blackout 2·(5 − 2) = 6; then 2 of supply and 3 without, repeating.
    let r = PeriodicResource::new(ms(2), ms(5)).unwrap();
    assert_eq!(r.blackout(), ms(6));
    let sbf = |t| r.sbf(ms(t)).0 / 1_000_000;
    let expected = [(0, 0), (3, 0), (6, 0), (7, 1), (8, 2), (9, 2), (11, 2), (12, 3), (13, 4), (16, 4), (18, 6), (21, 6), (26, 8)];
    for (t, s) in expected {
        assert_eq!(sbf(t), s, "sbf({t} ms)");
    }
    // lsbf(t) = 2/5·(t − 6): lsbf(13) = 2.8 ms, lsbf(16) = 4 ms (touching sbf), lsbf(5) = 0.
    assert_eq!(r.lsbf(ms(13)), Nanos(2_800_000));
    assert_eq!(r.lsbf(ms(16)), ms(4));
    assert_eq!(r.lsbf(ms(5)), Nanos::ZERO);
    // The least t with 3 ms of supply: 6 + 5 + 1 = 12; with 4 ms: 13.
    assert_eq!(r.inverse(ms(3)), Some(ms(12)));
    assert_eq!(r.inverse(ms(4)), Some(ms(13)));
    assert_eq!(PeriodicResource::new(Nanos::ZERO, ms(5)).unwrap().inverse(ms(1)), None);
}

#[test]
fn bad_resources_are_refused() {
    assert_eq!(PeriodicResource::new(ms(6), ms(5)).unwrap_err().to_string(), "budget: 6000000 ns exceeds the 5000000 ns period");
    assert_eq!(PeriodicResource::new(ms(0), ms(0)).unwrap_err().key, "period");
    let zero = [TaskParams::new(ms(1), Nanos::ZERO, ms(1))];
    let whole = PeriodicResource::dedicated();
    assert_eq!(
        edf_supply_test(&whole, &zero, &EdfSrpBlocking::none()).unwrap_err().to_string(),
        "task[0]: period and deadline must be positive"
    );
    assert_eq!(fp_response_times_on(&whole, &zero, &[Nanos::ZERO], &[0], &[Nanos::ZERO]).unwrap_err().key, "task[0]");
}

#[test]
fn fixed_priority_tasks_on_a_two_in_five_resource() {
    // τ1 (1, 20): least t with sbf ≥ 1 is 7. τ2 (1, 30) under τ1: sbf(t) ≥ 1 + ⌈t/20⌉·1 = 2
    // first at t = 8. τ3 (4, 10) under both: needs 4 + 1 + 1 = 6 by t ≤ 10, but sbf(10) = 2.
    let r = PeriodicResource::new(ms(2), ms(5)).unwrap();
    let tasks = [p(1, 20), p(1, 30), p(4, 10)];
    let zeros = [Nanos::ZERO; 3];
    let res = fp_response_times_on(&r, &tasks, &zeros, &[0, 1, 2], &zeros).unwrap();
    assert_eq!(res[0], Rta::Meets { response: ms(7) });
    assert_eq!(res[1], Rta::Meets { response: ms(8) });
    assert!(matches!(res[2], Rta::Misses { .. }), "{res:?}");
    // Blocking of 1 ms on τ1: sbf ≥ 2 first at 8.
    let res = fp_response_times_on(&r, &tasks[..1], &zeros[..1], &[0], &[ms(1)]).unwrap();
    assert_eq!(res[0], Rta::Meets { response: ms(8) });
}

#[test]
fn edf_on_a_two_in_five_resource() {
    // (1, 20) and (1, 30): U = 1/12 < 2/5; dbf(20) = 1 ≤ sbf(20) = 4 + min(4, 2) = 6, and
    // dbf(30) = 2 ≤ sbf(30) = 8 + 2 = 10 … the bound (0 + 0 + 0.4·6)/(0.4 − 1/12) = 7.6 ms is
    // below D_max = 30 ms.
    let r = PeriodicResource::new(ms(2), ms(5)).unwrap();
    assert_eq!(edf_supply_test(&r, &[p(1, 20), p(1, 30)], &EdfSrpBlocking::none()).unwrap(), SupplyTest::Holds { checked_to: ms(30) });
    // (2, 7): dbf(7) = 2 > sbf(7) = 1.
    assert_eq!(
        edf_supply_test(&r, &[p(2, 7)], &EdfSrpBlocking::none()).unwrap(),
        SupplyTest::Violated { at: ms(7), demand: ms(2), supply: ms(1) }
    );
    // (2, 5, D = 8): U = 2/5 equals the rate. dbf(8 + 5k) = 2(k + 1) = sbf(8 + 5k)
    // (x = 2 + 5k past the blackout: 2k + min(2, 2)). Checked to max(D, 6) + lcm(5, 5) = 13.
    let tight = [TaskParams::new(ms(2), ms(5), ms(8))];
    assert_eq!(edf_supply_test(&r, &tight, &EdfSrpBlocking::none()).unwrap(), SupplyTest::Holds { checked_to: ms(13) });
    // U = 1/2 > 2/5.
    assert_eq!(edf_supply_test(&r, &[p(5, 10)], &EdfSrpBlocking::none()).unwrap(), SupplyTest::Overloaded);
}

/// Shin & Lee's closed form: with k = max(⌈(t − (Π − Θ))/Π⌉, 1), sbf(t) = t − (k+1)(Π − Θ)
/// on [(k+1)Π − 2Θ, (k+1)Π − Θ], else (k − 1)Θ (and 0 for t below Π − Θ).
fn shin_lee(theta: i128, pi: i128, t: i128) -> i128 {
    let gap = pi - theta;
    let k = ((t - gap + pi - 1).div_euclid(pi)).max(1);
    let v = if t >= (k + 1) * pi - 2 * theta && t <= (k + 1) * pi - theta { t - (k + 1) * gap } else { (k - 1) * theta };
    v.max(0)
}

proptest! {
    #![proptest_config(cases(2000))]
    #[test]
    fn sbf_is_monotone_at_most_t_and_gives_k_budgets_after_k_periods_and_the_blackout(
        pi in 1u64..=50, theta_raw in 0u64..=50, t in 0u64..=400, k in 0u64..=20,
    ) {
        let theta = theta_raw % (pi + 1);
        let r = PeriodicResource::new(Nanos(theta), Nanos(pi)).unwrap();
        let s = |x: u64| r.sbf(Nanos(x)).0;
        prop_assert!(s(t) <= s(t + 1), "not monotone at {}", t);
        prop_assert!(s(t + 1) <= s(t) + 1, "grows faster than time at {}", t);
        prop_assert!(s(t) <= t);
        prop_assert_eq!(s(k * pi + 2 * (pi - theta)), k * theta);
        prop_assert!(r.lsbf(Nanos(t)).0 <= s(t));
        prop_assert_eq!(i128::from(s(t)), shin_lee(i128::from(theta), i128::from(pi), i128::from(t)));
        if let Some(inv) = r.inverse(Nanos(t)) {
            prop_assert!(s(inv.0) >= t);
            prop_assert!(inv.0 == 0 || s(inv.0 - 1) < t);
        }
    }

    #[test]
    fn a_whole_cpu_supply_reproduces_the_plain_analyses(raw in prop::collection::vec((1u64..=20, 4u64..=60), 1..=5)) {
        let tasks: Vec<TaskParams> = raw.iter().map(|&(c, t)| p(c.min(t), t)).collect();
        let ranks: Vec<u32> = (0..tasks.len() as u32).collect();
        let zeros = vec![Nanos::ZERO; tasks.len()];
        let whole = PeriodicResource::dedicated();
        let on = fp_response_times_on(&whole, &tasks, &zeros, &ranks, &zeros).unwrap();
        let plain = fp_response_times(&tasks, &ranks);
        for (a, b) in on.iter().zip(&plain) {
            match (a, b) {
                (Rta::Meets { response: x }, Rta::Meets { response: y }) => prop_assert_eq!(x, y),
                (Rta::Misses { .. }, Rta::Misses { .. }) => {}
                other => prop_assert!(false, "{:?}", other),
            }
        }
        let edf = edf_supply_test(&whole, &tasks, &EdfSrpBlocking::none()).unwrap();
        match edf_demand_test(&tasks) {
            DemandTest::Holds { .. } => prop_assert!(matches!(edf, SupplyTest::Holds { .. }), "{:?}", edf),
            DemandTest::Violated { .. } => prop_assert!(matches!(edf, SupplyTest::Violated { .. }), "{:?}", edf),
            DemandTest::Overloaded => prop_assert_eq!(edf, SupplyTest::Overloaded),
            DemandTest::Unknown { .. } => {}
        }
    }
}
