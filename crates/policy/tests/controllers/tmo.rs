//! TMO's reclaim rule and its threshold search.

use super::*;

fn tmo_setup() -> Fake {
    let mut f = Fake::new(1000 * MIB, vec![srt("rt", MS, MS, 0), nrt("batch", 0)]);
    f.groups[0].usage_bytes = 100 * MIB;
    f
}

#[test]
fn tmo_low_reclaims_ratio_scaled_by_headroom_below_the_threshold() {
    let mut f = tmo_setup();
    let mut c = make_controller("tmo-low", json!({})).unwrap();
    f.tick(c.as_mut(), 0);
    assert_eq!(f.groups[1].knobs.max_bytes, Some(900 * MIB));
    // 3 ms of stall in the 6 s period: PSI_some = 0.05 % of a 0.1 % threshold, so
    // reclaim = 100 MiB · 0.01 · (1 − 0.5) = 524288 bytes, as a one-tick dip of the limit.
    f.stall(0, 3_000, 0);
    f.tick(c.as_mut(), 3_000 * MS); // mid-period: nothing
    assert_eq!(f.groups[0].knobs.max_bytes, None);
    let actions = f.tick(c.as_mut(), 6_000 * MS);
    assert_eq!(
        actions,
        vec![Action::SetMax { group: 0, bytes: Some(100 * MIB - 524_288) }, Action::SetMax { group: 1, bytes: Some(900 * MIB + 524_288) },]
    );
    assert_eq!(tmo_reclaim_bytes(100 * MIB, 0.01, 0.05, 0.1), 524_288);
    // Next tick the dip is lifted; the group is unconstrained and holds its (reclaimed) usage.
    f.groups[0].usage_bytes = 100 * MIB - 524_288;
    let actions = f.tick(c.as_mut(), 6_005 * MS);
    assert_eq!(actions, vec![Action::SetMax { group: 0, bytes: None }]);
}

#[test]
fn tmo_low_does_not_reclaim_at_or_above_its_threshold() {
    let mut f = tmo_setup();
    let mut c = make_controller("tmo-low", json!({})).unwrap();
    f.tick(c.as_mut(), 0);
    f.stall(0, 6_000, 0); // 6 ms / 6 s = exactly 0.1 %
    assert!(f.tick(c.as_mut(), 6_000 * MS).is_empty());
}

#[test]
fn tmo_high_tolerates_pressure_up_to_its_threshold() {
    let mut f = tmo_setup();
    let mut c = make_controller("tmo-high", json!({"psi_threshold_pct": 30.0})).unwrap();
    f.tick(c.as_mut(), 0);
    f.stall(0, 900_000, 0); // 0.9 s of 6 s = 15 %: half the headroom
    f.tick(c.as_mut(), 6_000 * MS);
    assert_eq!(f.groups[0].knobs.max_bytes, Some(100 * MIB - 524_288));
}

#[test]
fn tmo_high_requires_a_threshold() {
    let e = make_controller("tmo-high", json!({})).err().unwrap();
    assert_eq!(e, PolicyError::MissingTmoThreshold);
}

#[test]
fn tmo_high_search_picks_the_largest_threshold_with_mean_below_the_deadline() {
    let mean = |t: f64| match t as u32 {
        10 => 1_000 * MS,
        20 => 1_200 * MS,
        30 => 1_450 * MS,
        40 => 1_600 * MS,
        _ => 2_000 * MS,
    };
    let r = pick_tmo_threshold(&[40.0, 10.0, 30.0, 20.0, 50.0], 1_500 * MS, mean).unwrap();
    assert_eq!((r.threshold_pct, r.mean_elapsed_ns), (30.0, 1_450 * MS));
    assert_eq!(r.evaluated.len(), 5);
    // Not monotone: a larger threshold that happens to pass wins, since every candidate is run.
    let r = pick_tmo_threshold(&[10.0, 30.0, 40.0], 1_500 * MS, |t| if t == 40.0 { 1_400 * MS } else { mean(t) }).unwrap();
    assert_eq!(r.threshold_pct, 40.0);
    let e = pick_tmo_threshold(&[40.0, 50.0], 1_500 * MS, mean).unwrap_err();
    assert_eq!(e, PolicyError::NoThresholdMeetsDeadline { deadline_ns: 1_500 * MS, best_threshold_pct: 40.0, best_mean_ns: 1_600 * MS });
}
