//! Greedy, Offline and static limits.

use super::*;

#[test]
fn greedy_leaves_soft_rt_unlimited_and_gives_non_rt_the_rest_of_its_usage() {
    let mut f = Fake::new(1000 * MIB, vec![srt("rt", MS, MS, 0), nrt("b1", 0), nrt("b2", 0)]);
    f.groups[0].usage_bytes = 300 * MIB;
    f.groups[0].knobs.max_bytes = Some(100 * MIB); // left over from someone else
    let mut c = make_controller("greedy", json!({})).unwrap();
    let actions = f.tick(c.as_mut(), 0);
    assert_eq!(
        actions,
        vec![
            Action::SetMax { group: 1, bytes: Some(350 * MIB) },
            Action::SetMax { group: 2, bytes: Some(350 * MIB) },
            Action::SetMax { group: 0, bytes: None },
        ]
    );
    f.groups[0].usage_bytes = 500 * MIB;
    f.tick(c.as_mut(), 5 * MS);
    assert_eq!(f.groups[1].knobs.max_bytes, Some(250 * MIB));
    // Unchanged usage, nothing to write.
    assert!(f.tick(c.as_mut(), 10 * MS).is_empty());
}

#[test]
fn offline_holds_its_profiled_limit() {
    let mut f = Fake::new(1000 * MIB, vec![srt("sphinx", MS, MS, 0), nrt("graphchi", 0)]);
    let mut c = make_controller("offline", json!({"limit_bytes": 200 * MIB})).unwrap();
    f.tick(c.as_mut(), 0);
    assert_eq!(f.groups[0].knobs.max_bytes, Some(200 * MIB));
    assert_eq!(f.groups[1].knobs.max_bytes, Some(800 * MIB));
    f.groups[0].usage_bytes = 900 * MIB;
    assert!(f.tick(c.as_mut(), 5 * MS).is_empty());
}

#[test]
fn offline_picks_the_smallest_limit_meeting_the_target_hit_ratio() {
    let profile = [(250 * MIB, 0.99), (100 * MIB, 0.5), (200 * MIB, 0.97), (150 * MIB, 0.9), (300 * MIB, 1.0)];
    assert_eq!(pick_offline_limit(&profile, 0.95).unwrap(), 200 * MIB);
    assert_eq!(pick_offline_limit(&profile, 0.5).unwrap(), 100 * MIB);
    let err = pick_offline_limit(&profile[..2], 0.995).unwrap_err();
    assert_eq!(err, PolicyError::NoLimitMeetsTarget { target: 0.995, best_ratio: 0.99, best_limit_bytes: 250 * MIB });
    assert!(pick_offline_limit(&[], 0.9).is_err());
    assert!(pick_offline_limit(&profile, 1.5).is_err());
}

#[test]
fn static_partition_uses_named_limits_and_the_non_rt_groups_split_the_rest() {
    let mut f = Fake::new(1000 * MIB, vec![srt("a", MS, MS, 0), srt("b", MS, MS, 0), nrt("n1", 0), nrt("n2", 250 * MIB)]);
    let mut c = make_controller("static", json!({"limits_bytes": {"a": 300 * MIB}, "default_limit_bytes": 100 * MIB})).unwrap();
    f.tick(c.as_mut(), 0);
    let maxes: Vec<_> = f.groups.iter().map(|g| g.knobs.max_bytes).collect();
    // 600 MiB left; n2's floor (250) is below the even share (300), so both get 300.
    assert_eq!(maxes, vec![Some(300 * MIB), Some(100 * MIB), Some(300 * MIB), Some(300 * MIB)]);
    // A limit larger than what the others' floors allow is clamped.
    let mut c = make_controller("static", json!({"limits_bytes": {"a": 900 * MIB, "b": 50 * MIB}})).unwrap();
    f.groups[3].floor_bytes = 400 * MIB;
    f.tick(c.as_mut(), 5 * MS);
    let maxes: Vec<_> = f.groups.iter().map(|g| g.knobs.max_bytes).collect();
    assert_eq!(maxes, vec![Some(600 * MIB), Some(0), Some(0), Some(400 * MIB)]);
}

#[test]
fn per_group_limits_must_name_soft_real_time_groups() {
    let parse = |name: &str, v: serde_json::Value| ControllerConfig::parse(name, v).unwrap();
    let st = parse("static", json!({"limits_bytes": {"a": MIB, "nope": MIB}}));
    let err = st.check_group_names(&["a", "b"]).unwrap_err().to_string();
    assert_eq!(err, "invalid config for controller `static`: `limits_bytes` names \"nope\", which is not a soft real-time group (they are: \"a\", \"b\")");
    assert!(parse("static", json!({"limits_bytes": {"a": MIB}})).check_group_names(&["a", "b"]).is_ok());
    let off = parse("offline", json!({"limit_bytes": MIB, "group_limits_bytes": {"batch": MIB}}));
    let err = off.check_group_names(&[]).unwrap_err().to_string();
    assert!(err.contains("`group_limits_bytes` names \"batch\"") && err.ends_with("(they are: none)"), "{err}");
    // Controllers without per-group names accept any groups.
    assert!(parse("greedy", json!({})).check_group_names(&[]).is_ok());
}
