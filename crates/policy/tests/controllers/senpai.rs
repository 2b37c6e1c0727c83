//! senpai's update rule.

use super::*;

#[test]
fn senpai_update_rule_matches_hand_computed_numbers() {
    let mut f = Fake::new(1000 * MIB, vec![srt("rt", MS, MS, 0), nrt("batch", 0)]);
    f.groups[0].usage_bytes = 100 * MIB;
    let mut c = Senpai::new(SenpaiConfig::default()).unwrap();
    let s = 1_000 * MS;
    // Start: limit = memory.current = 104857600 (page aligned), written to memory.high.
    let actions = f.tick(&mut c, 0);
    assert_eq!(
        actions,
        vec![Action::SetHigh { group: 0, bytes: Some(104_857_600) }, Action::SetHigh { group: 1, bytes: Some(943_718_400) }]
    );
    // Calls between senpai ticks do nothing.
    assert!(f.tick(&mut c, 500 * MS).is_empty());
    // Ticks 1..6: grace 6 → 0, no change.
    for k in 1..=6 {
        assert!(f.tick(&mut c, k * s).is_empty(), "tick {k}");
        assert_eq!(c.state(0).unwrap().grace_ticks, 6 - k as u32);
    }
    // Tick 7 probes with integral 0: err = 10000/max(0,1) = 10000, (10000/10)² · 0.01 ≥ 0.01,
    // so adj = 0.01: int(104857600 − 1048576) = 103809024, already 4 KiB aligned.
    f.tick(&mut c, 7 * s);
    assert_eq!(f.groups[0].knobs.high_bytes, Some(103_809_024));
    assert_eq!(c.state(0).unwrap().grace_ticks, 5);
    // 2 ms of stall, then five grace ticks; tick 13 probes with integral 2000:
    // err = 5, adj = (5/10)² · 0.01 = 0.0025: int(103809024 · 0.9975) = 103549501 → 103546880.
    f.stall(0, 2_000, 0);
    for k in 8..=12 {
        assert!(f.tick(&mut c, k * s).is_empty());
    }
    assert_eq!(c.state(0).unwrap().integral_us, 2_000);
    f.tick(&mut c, 13 * s);
    assert_eq!(f.groups[0].knobs.high_bytes, Some(103_546_880));
    assert_eq!(c.state(0).unwrap().integral_us, 0);
    // 40 ms of stall: integral > target, back off: err = 4, adj = (4/20)² · 1.0 = 0.04:
    // int(103546880 · 1.04) = 107688755 → 107687936.
    f.stall(0, 40_000, 0);
    f.tick(&mut c, 14 * s);
    assert_eq!(f.groups[0].knobs.high_bytes, Some(107_687_936));
    assert_eq!(f.groups[1].knobs.high_bytes, Some(1000 * MIB - 107_687_936));
    // Exactly the target is not above it: no backoff, the grace countdown goes on.
    f.stall(0, 10_000, 0);
    assert!(f.tick(&mut c, 15 * s).is_empty());
    assert_eq!(c.state(0).unwrap().grace_ticks, 4);
    // 400 ms = 40× target saturates the backoff at max_backoff = 1.0: the limit doubles.
    f.stall(0, 390_000, 0);
    f.tick(&mut c, 16 * s);
    assert_eq!(f.groups[0].knobs.high_bytes, Some(2 * 107_687_936));
}

#[test]
fn senpai_resets_to_current_usage_when_someone_else_changed_the_limit() {
    let mut f = Fake::new(1000 * MIB, vec![srt("rt", MS, MS, 0), nrt("batch", 0)]);
    f.groups[0].usage_bytes = 100 * MIB;
    let mut c = Senpai::new(SenpaiConfig::default()).unwrap();
    f.tick(&mut c, 0);
    f.groups[0].knobs.high_bytes = Some(50 * MIB);
    f.groups[0].usage_bytes = 60 * MIB + 123;
    f.tick(&mut c, 500 * MS);
    assert_eq!(f.groups[0].knobs.high_bytes, Some(60 * MIB));
    assert_eq!(c.state(0).unwrap().grace_ticks, 6);
}

#[test]
fn senpai_clamps_to_its_configured_range() {
    let mut f = Fake::new(1000 * MIB, vec![srt("rt", MS, MS, 0), nrt("batch", 0)]);
    f.groups[0].usage_bytes = 10 * MIB;
    let mut c = make_controller("senpai", json!({"limit_min_bytes": 64 * MIB, "knob": "max"})).unwrap();
    f.tick(c.as_mut(), 0);
    assert_eq!(f.groups[0].knobs.max_bytes, Some(64 * MIB));
}
