//! Property tests over random observation sequences.

use super::*;

#[derive(Clone, Debug)]
struct Step {
    dt_ns: u64,
    stall: Vec<(u64, u64, u64)>, // (memory some, io some, full share in 0..=100) per group
    usage: Vec<u64>,
    events: Vec<(usize, u8, u64)>, // (group, kind, job)
    perturb: Option<(usize, Option<u64>)>,
}

impl Step {
    /// Adds this step's stall to every group's totals and sets its usage.
    fn advance(&self, groups: &mut [GroupObservation]) {
        for (g, &(mem, io, full_pct)) in self.stall.iter().enumerate() {
            let s = &mut groups[g].stall;
            s.memory_some_us += mem;
            s.io_some_us += io;
            s.memory_full_us += mem * full_pct / 100;
            s.io_full_us += io * full_pct / 100;
            groups[g].usage_bytes = self.usage[g];
        }
    }

    /// This step's job events, spread over the step that starts at `prev_ns`.
    fn job_events(&self, prev_ns: u64) -> impl Iterator<Item = JobEvent> + '_ {
        self.events.iter().enumerate().map(move |(k, &(group, kind, job))| {
            let at_ns = prev_ns + (self.dt_ns * k as u64) / 3;
            match kind {
                0 => JobEvent::Release { group, job, at_ns, deadline_ns: at_ns + 50 * MS },
                1 => JobEvent::Completion { group, job, at_ns },
                _ => JobEvent::Drop { group, job, at_ns },
            }
        })
    }
}

#[derive(Clone, Debug)]
struct Scenario {
    total: u64,
    groups: Vec<GroupObservation>,
    steps: Vec<Step>,
}

fn scenario() -> impl Strategy<Value = Scenario> {
    let groups = prop::collection::vec((any::<bool>(), 1u64..200, 0u64..100, 0u64..30), 1..5);
    (1u64..4096, groups).prop_flat_map(|(total_mib, groups)| {
        let total = total_mib * MIB;
        let n = groups.len();
        // Floors are shares of the total that sum to at most 100 %, so every config is feasible.
        let floor_sum: u64 = groups.iter().map(|g| g.3).sum::<u64>().max(100);
        let groups: Vec<GroupObservation> = groups
            .iter()
            .enumerate()
            .map(|(i, &(is_rt, d_ms, bcet_pct, floor_share))| {
                let floor = total / floor_sum * floor_share;
                if is_rt {
                    srt(&format!("g{i}"), d_ms * MS, d_ms * MS * bcet_pct / 100, floor)
                } else {
                    nrt(&format!("g{i}"), floor)
                }
            })
            .collect();
        let step = (
            1u64..20_000_000,
            prop::collection::vec((0u64..25_000, 0u64..25_000, 0u64..=100), n),
            prop::collection::vec(0u64..=2 * total, n),
            prop::collection::vec((0usize..n + 1, 0u8..3, 0u64..6), 0..3),
            prop::option::weighted(0.1, (0usize..n, prop::option::of(0u64..=2 * total))),
        )
            .prop_map(|(dt_ns, stall, usage, events, perturb)| Step { dt_ns, stall, usage, events, perturb });
        (Just(total), Just(groups), prop::collection::vec(step, 1..80)).prop_map(|(total, groups, steps)| Scenario { total, groups, steps })
    })
}

fn all_controllers() -> Vec<(Box<dyn Controller + Send>, LimitKnob)> {
    let specs = [
        ("sara", json!({}), LimitKnob::Max),
        ("sara", json!({"knob": "high", "stall": "full", "long_stall_intervals_pct": 0}), LimitKnob::High),
        ("sara", json!({"step_up_bytes": 3 * MIB, "step_bytes": 512 * 1024}), LimitKnob::Max),
        ("greedy", json!({}), LimitKnob::Max),
        ("offline", json!({"limit_bytes": 300 * MIB}), LimitKnob::Max),
        ("tmo-low", json!({"period_ns": 20_000_000}), LimitKnob::Max),
        ("tmo-high", json!({"psi_threshold_pct": 30.0, "period_ns": 10_000_000, "reclaim_ratio": 0.5}), LimitKnob::Max),
        ("senpai", json!({"tick_ns": 10_000_000, "interval_ticks": 2}), LimitKnob::High),
        ("senpai", json!({"tick_ns": 1, "interval_ticks": 1, "knob": "max", "limit_min_bytes": 8 * MIB}), LimitKnob::Max),
        ("static", json!({"limits_bytes": {"g0": 100 * MIB}, "default_limit_bytes": 50 * MIB}), LimitKnob::Max),
        ("tailguard", json!({}), LimitKnob::Max),
        (
            "tailguard",
            json!({"knob": "high", "guard_step_permille": 200, "guard_max_permille": 400, "cost_min_jobs": 1, "cost_window_jobs": 1}),
            LimitKnob::High,
        ),
    ];
    specs.into_iter().map(|(n, cfg, k)| (make_controller(n, cfg).unwrap(), k)).collect()
}

fn knob_value(g: &GroupObservation, knob: LimitKnob) -> Option<u64> {
    match knob {
        LimitKnob::Max => g.knobs.max_bytes,
        LimitKnob::High => g.knobs.high_bytes,
    }
}

fn run_scenario(sc: &Scenario, c: &mut dyn Controller, knob: LimitKnob) -> Result<(), TestCaseError> {
    let mut f = Fake::new(sc.total, sc.groups.clone());
    let n = sc.groups.len();
    for (i, step) in sc.steps.iter().enumerate() {
        let prev_ns = f.now_ns;
        let now_ns = prev_ns + step.dt_ns;
        step.advance(&mut f.groups);
        f.events.extend(step.job_events(prev_ns));
        if let Some((g, bytes)) = step.perturb {
            match knob {
                LimitKnob::Max => f.groups[g].knobs.max_bytes = bytes,
                LimitKnob::High => f.groups[g].knobs.high_bytes = bytes,
            }
        }
        let actions = f.tick(c, now_ns);
        for a in &actions {
            match *a {
                Action::SetMax { group, bytes } | Action::SetHigh { group, bytes } => {
                    prop_assert!(group < n, "{}: action on unknown group {group}", c.name());
                    if let Some(b) = bytes {
                        let floor = sc.groups[group].floor_bytes;
                        prop_assert!(b >= floor && b <= sc.total, "{} step {i}: {a:?} outside [{floor}, {}]", c.name(), sc.total);
                    }
                }
                Action::DropJob { group, .. } => {
                    prop_assert!(matches!(sc.groups[group].role, GroupRole::SoftRealTime { .. }), "{}: drop on non-RT", c.name());
                }
                Action::SetCpuMax { group, .. } | Action::SetIoMax { group, .. } => {
                    prop_assert!(matches!(sc.groups[group].role, GroupRole::NonRealTime), "{}: bandwidth limit on soft RT", c.name());
                }
                Action::SetMin { .. } | Action::SetLow { .. } | Action::Reclaim { .. } => {
                    prop_assert!(false, "{}: unexpected {a:?}", c.name())
                }
            }
        }
        // Every limit that is set (soft RT and non-RT alike) fits in the total together.
        let limits: Vec<Option<u64>> = f.groups.iter().map(|g| knob_value(g, knob)).collect();
        let sum: u128 = limits.iter().flatten().map(|&b| u128::from(b)).sum();
        prop_assert!(sum <= u128::from(sc.total), "{} step {i}: limits {limits:?} exceed total {}", c.name(), sc.total);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn every_controller_keeps_limits_within_floor_and_total_and_never_oversubscribes(sc in scenario()) {
        for (mut c, knob) in all_controllers() {
            run_scenario(&sc, c.as_mut(), knob)?;
        }
    }
}

fn wild_group() -> impl Strategy<Value = GroupObservation> {
    (any::<bool>(), any::<u64>(), any::<u64>(), any::<[u64; 4]>(), any::<u64>(), any::<(Option<u64>, Option<u64>)>(), 0u64..=1 << 40)
        .prop_map(|(is_rt, d, bcet, st, usage, (max, high), floor)| GroupObservation {
            name: "w".into(),
            role: if is_rt { GroupRole::SoftRealTime { deadline_ns: d, bcet_ns: bcet } } else { GroupRole::NonRealTime },
            stall: StallTotals { memory_some_us: st[0], memory_full_us: st[1], io_some_us: st[2], io_full_us: st[3], cpu_some_us: 0 },
            usage_bytes: usage,
            knobs: MemoryKnobs { max_bytes: max, high_bytes: high, min_bytes: None, low_bytes: None },
            floor_bytes: floor,
            cpu_usage_us: 0,
            bandwidth: BandwidthKnobs::default(),
        })
}

fn wild_event() -> impl Strategy<Value = JobEvent> {
    (0usize..5, 0u8..3, any::<u64>(), any::<u64>(), any::<u64>()).prop_map(|(group, k, job, at_ns, deadline_ns)| match k {
        0 => JobEvent::Release { group, job: job % 4, at_ns, deadline_ns },
        1 => JobEvent::Completion { group, job: job % 4, at_ns },
        _ => JobEvent::Drop { group, job: job % 4, at_ns },
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 100, ..ProptestConfig::default() })]

    /// Counters that go backwards, clocks that jump, sizes near u64::MAX, infeasible floors,
    /// unknown groups in events: no controller may panic.
    #[test]
    fn no_controller_panics_on_extreme_or_inconsistent_observations(
        seq in prop::collection::vec(
            (any::<u64>(), any::<u64>(), prop::collection::vec(wild_group(), 0..4), prop::collection::vec(wild_event(), 0..4)),
            1..12,
        )
    ) {
        for (mut c, _) in all_controllers() {
            for (now_ns, total, groups, events) in &seq {
                let obs = Observation { now_ns: *now_ns, total_memory_bytes: *total, cpus: 2, groups: groups.clone(), events: events.clone() };
                for a in c.tick(&obs) {
                    prop_assert!(a.group() < groups.len());
                }
            }
        }
    }
}

/// A group's observation with every pressure total and the usage the controller says it does
/// not read replaced by `junk` (what a platform that skipped those reads might hold).
fn mask_unread(c: &dyn Controller, g: &GroupObservation, junk: u64) -> GroupObservation {
    let wants = c.stall_inputs(&g.role);
    let mut g = g.clone();
    if !wants.memory {
        (g.stall.memory_some_us, g.stall.memory_full_us) = (junk, junk / 2);
    }
    if !wants.io {
        (g.stall.io_some_us, g.stall.io_full_us) = (junk / 3, junk / 5);
    }
    if !c.reads_usage(&g.role) {
        g.usage_bytes = junk / 7;
    }
    if !c.uses_cpu() {
        (g.cpu_usage_us, g.stall.cpu_some_us) = (junk / 11, junk / 13);
    }
    g
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 100, ..ProptestConfig::default() })]

    /// `Controller::stall_inputs`, `Controller::reads_usage` and `Controller::uses_cpu` tell
    /// the truth: totals, usage and CPU figures a controller says it does not read change none
    /// of its actions, so a platform may skip reading them.
    #[test]
    fn controllers_ignore_the_stall_totals_and_usage_they_say_they_do_not_read(sc in scenario(), junk in prop::collection::vec(any::<u64>(), 80)) {
        for ((mut honest, _), (mut fooled, _)) in all_controllers().into_iter().zip(all_controllers()) {
            let mut groups = sc.groups.clone();
            let mut now_ns = 0;
            for (i, step) in sc.steps.iter().enumerate() {
                step.advance(&mut groups);
                let events: Vec<JobEvent> = step.job_events(now_ns).collect();
                now_ns += step.dt_ns;
                let obs = Observation { now_ns, total_memory_bytes: sc.total, cpus: 2, groups: groups.clone(), events };
                let masked = Observation {
                    groups: groups.iter().map(|g| mask_unread(fooled.as_ref(), g, junk[i % junk.len()])).collect(),
                    ..obs.clone()
                };
                let (a, b) = (honest.tick(&obs), fooled.tick(&masked));
                prop_assert_eq!(a, b, "{} at step {} acted on a total or usage it says it does not read", honest.name(), i);
            }
        }
    }
}

#[test]
fn the_controllers_read_only_what_their_rules_use() {
    let (rt, nrt) = (GroupRole::SoftRealTime { deadline_ns: 100 * MS, bcet_ns: 10 * MS }, GroupRole::NonRealTime);
    let wants = |name: &str, cfg: serde_json::Value, role: &GroupRole| make_controller(name, cfg).unwrap().stall_inputs(role);
    assert_eq!(wants("sara", json!({}), &rt), StallInputs::ALL, "s_intv = max(s_mem, s_IO)");
    assert_eq!(wants("sara", json!({}), &nrt), StallInputs::NONE);
    assert_eq!(wants("tmo-low", json!({}), &rt), StallInputs::MEMORY);
    assert_eq!(wants("senpai", json!({}), &rt), StallInputs::MEMORY);
    assert_eq!(wants("greedy", json!({}), &rt), StallInputs::NONE);
    assert_eq!(wants("offline", json!({"limit_bytes": MIB}), &rt), StallInputs::NONE);
    let usage = |name: &str, cfg: serde_json::Value, role: &GroupRole| make_controller(name, cfg).unwrap().reads_usage(role);
    assert!(!usage("sara", json!({}), &rt), "SARA steers by stall alone");
    for (name, cfg) in [("greedy", json!({})), ("tmo-low", json!({})), ("senpai", json!({})), ("offline", json!({"limit_bytes": MIB}))] {
        assert!(usage(name, cfg.clone(), &rt), "{name} holds a soft real-time group's usage");
        assert!(!usage(name, cfg, &nrt), "{name} gives non-real-time groups what is left");
    }
}
