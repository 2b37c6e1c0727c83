//! Behaviour of every controller on synthetic observation sequences, with expectations computed
//! by hand from the published formulas (SARA Eq. 3–6 and Definition 1, TMO's reclaim rule,
//! senpai.py's update rule), property tests over random sequences, and a toy plant that closes
//! SARA's control loop.

use std::collections::VecDeque;

use critmem_policy::*;
use proptest::prelude::*;
use serde_json::json;

const MIB: u64 = 1 << 20;
const MS: u64 = 1_000_000;

// ---------------------------------------------------------------------------------------------
// Helpers

fn srt(name: &str, deadline_ns: u64, bcet_ns: u64, floor_bytes: u64) -> GroupObservation {
    GroupObservation {
        name: name.into(),
        role: GroupRole::SoftRealTime { deadline_ns, bcet_ns },
        stall: StallTotals::default(),
        usage_bytes: 0,
        knobs: MemoryKnobs::default(),
        floor_bytes,
    }
}

fn nrt(name: &str, floor_bytes: u64) -> GroupObservation {
    GroupObservation {
        name: name.into(),
        role: GroupRole::NonRealTime,
        stall: StallTotals::default(),
        usage_bytes: 0,
        knobs: MemoryKnobs::default(),
        floor_bytes,
    }
}

/// A platform stand-in: holds the groups, applies actions to their knobs like cgroupfs would.
struct Fake {
    now_ns: u64,
    total: u64,
    groups: Vec<GroupObservation>,
    events: Vec<JobEvent>,
}

impl Fake {
    fn new(total: u64, groups: Vec<GroupObservation>) -> Self {
        Fake { now_ns: 0, total, groups, events: Vec::new() }
    }

    fn obs(&mut self) -> Observation {
        Observation {
            now_ns: self.now_ns,
            total_memory_bytes: self.total,
            groups: self.groups.clone(),
            events: std::mem::take(&mut self.events),
        }
    }

    /// Adds `memory_us` of memory `some`/`full` stall and `io_us` of I/O stall to group `g`.
    fn stall(&mut self, g: usize, memory_us: u64, io_us: u64) {
        let s = &mut self.groups[g].stall;
        s.memory_some_us += memory_us;
        s.memory_full_us += memory_us;
        s.io_some_us += io_us;
        s.io_full_us += io_us;
    }

    fn release(&mut self, group: usize, job: u64, at_ns: u64, deadline_ns: u64) {
        self.events.push(JobEvent::Release { group, job, at_ns, deadline_ns });
    }

    fn complete(&mut self, group: usize, job: u64, at_ns: u64) {
        self.events.push(JobEvent::Completion { group, job, at_ns });
    }

    fn apply(&mut self, actions: &[Action]) {
        for a in actions {
            match *a {
                Action::SetMax { group, bytes } => self.groups[group].knobs.max_bytes = bytes,
                Action::SetHigh { group, bytes } => self.groups[group].knobs.high_bytes = bytes,
                Action::SetMin { group, bytes } => self.groups[group].knobs.min_bytes = bytes,
                Action::SetLow { group, bytes } => self.groups[group].knobs.low_bytes = bytes,
                Action::DropJob { .. } => {}
            }
        }
    }

    /// One tick at `now_ns`: observe, decide, apply.
    fn tick(&mut self, c: &mut dyn Controller, now_ns: u64) -> Vec<Action> {
        self.now_ns = now_ns;
        let obs = self.obs();
        let actions = c.tick(&obs);
        self.apply(&actions);
        actions
    }
}

fn drops(actions: &[Action]) -> Vec<(usize, u64)> {
    actions
        .iter()
        .filter_map(|a| match *a {
            Action::DropJob { group, job } => Some((group, job)),
            _ => None,
        })
        .collect()
}

fn sara(cfg: SaraConfig) -> Sara {
    Sara::new(cfg).unwrap()
}

/// SARA with a 512 MiB starting limit on a 1 GiB machine: one soft-RT group (d = 100 ms,
/// BCET = 57 ms, so s_ideal_period = 43 ms = 20 intervals of 5 ms) and one non-RT group.
fn sara_setup(cfg: SaraConfig) -> (Sara, Fake) {
    let fake = Fake::new(1 << 30, vec![srt("rt", 100 * MS, 57 * MS, 0), nrt("batch", 0)]);
    (sara(SaraConfig { initial_limit_bytes: Some(512 * MIB), ..cfg }), fake)
}

/// Releases job 1 at t = 0 (deadline 100 ms) and takes the baseline tick.
fn start_first_job(c: &mut Sara, f: &mut Fake) {
    f.release(0, 1, 0, 100 * MS);
    f.tick(c, 0);
}

// ---------------------------------------------------------------------------------------------
// SARA

#[test]
fn sara_takes_the_initial_limit_and_gives_the_rest_to_non_rt() {
    let (mut c, mut f) = sara_setup(SaraConfig::default());
    let actions = f.tick(&mut c, 0);
    assert_eq!(actions, vec![Action::SetMax { group: 0, bytes: Some(512 * MIB) }, Action::SetMax { group: 1, bytes: Some(512 * MIB) }]);
    assert_eq!(c.interval_ns(), 5 * MS);
}

#[test]
fn sara_adds_exactly_x_times_excess_stall_over_interval_length() {
    // Interval 1: n_remain = 100/5 = 20, s_ideal_intv = 43/20 = 2.15 ms. s_mem = 5 ms, s_IO = 1 ms,
    // so s_intv = 5 ms (Eq. 3) and mem_alloc = 1 MiB · (5 − 2.15)/5 = 597688.32 → 597688 bytes.
    let (mut c, mut f) = sara_setup(SaraConfig::default());
    start_first_job(&mut c, &mut f);
    f.stall(0, 5_000, 1_000);
    let actions = f.tick(&mut c, 5 * MS);
    let iv = *c.last_interval(0).unwrap();
    assert_eq!((iv.stall_ns, iv.remaining_intervals, iv.target_ns), (5 * MS, 20, 2_150_000));
    assert_eq!(iv.delta_bytes, 597_688);
    assert_eq!(c.limit_bytes(0), Some(512 * MIB + 597_688));
    // The non-RT group loses exactly what the soft-RT group gained; shrinking is applied first.
    assert_eq!(
        actions,
        vec![Action::SetMax { group: 1, bytes: Some(512 * MIB - 597_688) }, Action::SetMax { group: 0, bytes: Some(512 * MIB + 597_688) },]
    );
}

#[test]
fn sara_takes_memory_back_when_stall_is_below_target() {
    // Interval 1: s_intv = 0.5 ms (I/O larger than memory), target 2.15 ms:
    // mem_alloc = 1 MiB · (0.5 − 2.15)/5 = −346030.08 → −346030 (truncated toward zero).
    let (mut c, mut f) = sara_setup(SaraConfig::default());
    start_first_job(&mut c, &mut f);
    f.stall(0, 200, 500);
    f.tick(&mut c, 5 * MS);
    assert_eq!(c.last_interval(0).unwrap().delta_bytes, -346_030);
    assert_eq!(c.limit_bytes(0), Some(512 * MIB - 346_030));
    assert_eq!(f.groups[1].knobs.max_bytes, Some(512 * MIB + 346_030));
}

#[test]
fn sara_step_up_bytes_scales_growth_only() {
    // The interval of the test above with x_up = 2 MiB: 2 MiB · (5 − 2.15)/5 = 1195376.64.
    let up = SaraConfig { step_up_bytes: Some(2 * MIB), ..SaraConfig::default() };
    let (mut c, mut f) = sara_setup(up.clone());
    start_first_job(&mut c, &mut f);
    f.stall(0, 5_000, 1_000);
    f.tick(&mut c, 5 * MS);
    assert_eq!(c.last_interval(0).unwrap().delta_bytes, 1_195_376);
    // Shrinking still uses x = step_bytes: the −346030 of the paper's rule.
    let (mut c, mut f) = sara_setup(up);
    start_first_job(&mut c, &mut f);
    f.stall(0, 200, 500);
    f.tick(&mut c, 5 * MS);
    assert_eq!(c.last_interval(0).unwrap().delta_bytes, -346_030);
}

#[test]
fn sara_redistributes_the_remaining_ideal_stall_over_the_remaining_intervals() {
    // After interval 1 stalled 5 ms, 43 − 5 = 38 ms remain over 19 intervals: 2 ms each.
    // Interval 2 stalls 0.75 ms: mem_alloc = 1 MiB · (0.75 − 2)/5 = −262144 exactly.
    let (mut c, mut f) = sara_setup(SaraConfig::default());
    start_first_job(&mut c, &mut f);
    f.stall(0, 5_000, 0);
    f.tick(&mut c, 5 * MS);
    let after_first = c.limit_bytes(0).unwrap();
    f.stall(0, 750, 0);
    f.tick(&mut c, 10 * MS);
    let iv = *c.last_interval(0).unwrap();
    assert_eq!((iv.remaining_intervals, iv.target_ns, iv.delta_bytes), (19, 2_000_000, -262_144));
    assert_eq!(c.limit_bytes(0), Some(after_first - 262_144));
    let job = c.running_job(0).unwrap();
    assert_eq!((job.stall_so_far_ns, job.remaining_ideal_stall_ns()), (5_750_000, 37_250_000));
}

#[test]
fn sara_full_stall_kind_reads_the_full_lines() {
    let (mut c, mut f) = sara_setup(SaraConfig { stall: StallKind::Full, ..SaraConfig::default() });
    start_first_job(&mut c, &mut f);
    f.groups[0].stall.memory_some_us += 5_000; // some only: not counted
    f.groups[0].stall.memory_full_us += 1_000;
    f.tick(&mut c, 5 * MS);
    assert_eq!(c.last_interval(0).unwrap().stall_ns, MS);
}

#[test]
fn sara_t_wait_reduces_the_ideal_stall_after_an_overrun() {
    let (mut c, mut f) = sara_setup(SaraConfig::default());
    start_first_job(&mut c, &mut f);
    assert_eq!(c.running_job(0).unwrap().ideal_stall_ns, 43_000_000); // d − BCET, t_wait = 0
    for k in 1..=20 {
        f.tick(&mut c, k * 5 * MS);
    }
    // Job 2 is released at 100 ms while job 1 still runs; job 1 completes at 112.5 ms, between
    // ticks. Job 2 starts then: t_wait = 12.5 ms, s_ideal_period = 100 − 57 − 12.5 = 30.5 ms.
    f.release(0, 2, 100 * MS, 200 * MS);
    f.tick(&mut c, 105 * MS);
    assert_eq!(c.running_job(0).unwrap().job, 1);
    assert_eq!(c.pending_jobs(0), 1);
    f.tick(&mut c, 110 * MS);
    f.complete(0, 1, 112_500_000);
    f.stall(0, 1_000, 0);
    f.tick(&mut c, 115 * MS);
    let job = *c.running_job(0).unwrap();
    assert_eq!((job.job, job.start_ns, job.wait_ns), (2, 112_500_000, 12_500_000));
    assert_eq!(job.ideal_stall_ns, 30_500_000);
    // The interval that saw the start counts from the start: ⌈(200 − 112.5)/5⌉ = 18 intervals.
    let iv = c.last_interval(0).unwrap();
    assert_eq!((iv.job, iv.remaining_intervals, iv.target_ns), (2, 18, 30_500_000 / 18));
}

#[test]
fn sara_keeps_a_bounded_queue_when_jobs_never_complete() {
    let (mut c, mut f) = sara_setup(SaraConfig::default());
    start_first_job(&mut c, &mut f);
    let extra = MAX_PENDING_JOBS as u64 + 500;
    for job in 2..2 + extra {
        f.release(0, job, job * 100 * MS, (job + 1) * 100 * MS);
    }
    f.tick(&mut c, 5 * MS);
    assert_eq!(c.pending_jobs(0), MAX_PENDING_JOBS);
    // The newest releases are kept: completing job 1 starts the oldest one still queued.
    f.complete(0, 1, 6 * MS);
    f.tick(&mut c, 10 * MS);
    assert_eq!(c.running_job(0).unwrap().job, 2 + extra - MAX_PENDING_JOBS as u64);
}

#[test]
fn sara_job_released_after_completion_has_no_wait() {
    let (mut c, mut f) = sara_setup(SaraConfig::default());
    start_first_job(&mut c, &mut f);
    f.complete(0, 1, 80 * MS);
    f.tick(&mut c, 85 * MS);
    assert!(c.running_job(0).is_none());
    f.release(0, 2, 100 * MS, 200 * MS);
    f.tick(&mut c, 100 * MS);
    let job = c.running_job(0).unwrap();
    assert_eq!((job.wait_ns, job.ideal_stall_ns), (0, 43_000_000));
}

#[test]
fn sara_holds_the_limit_between_jobs() {
    let (mut c, mut f) = sara_setup(SaraConfig::default());
    start_first_job(&mut c, &mut f);
    f.complete(0, 1, 2 * MS);
    f.tick(&mut c, 5 * MS);
    let held = c.limit_bytes(0).unwrap();
    for k in 2..10 {
        f.stall(0, 5_000, 5_000);
        let actions = f.tick(&mut c, k * 5 * MS);
        assert!(actions.is_empty(), "no job runs, nothing to steer: {actions:?}");
    }
    assert_eq!(c.limit_bytes(0), Some(held));
}

#[test]
fn severe_interval_means_strictly_more_than_n_percent_of_the_interval() {
    assert!(!is_severe_interval(4_500_000, 5 * MS, 90));
    assert!(is_severe_interval(4_500_001, 5 * MS, 90));
}

#[test]
fn long_stall_needs_at_least_m_percent_severe_intervals() {
    assert!(is_long_stall(8, 10, 80));
    assert!(is_long_stall(4, 5, 80));
    assert!(!is_long_stall(7, 10, 80));
    assert!(!is_long_stall(3, 5, 80));
    assert!(!is_long_stall(0, 0, 0), "no intervals, no long stall");
}

/// One soft-RT group with d = 100 ms, BCET = 80 ms: s_ideal_period = 20 ms.
fn tight_setup(cfg: SaraConfig) -> (Sara, Fake) {
    let mut f = Fake::new(1 << 30, vec![srt("rt", 100 * MS, 80 * MS, 0), nrt("batch", 0)]);
    let mut c = sara(SaraConfig { initial_limit_bytes: Some(512 * MIB), ..cfg });
    f.release(0, 7, 0, 100 * MS);
    f.tick(&mut c, 0);
    (c, f)
}

#[test]
fn early_drop_fires_the_tick_the_remaining_ideal_stall_goes_negative_and_not_before() {
    let (mut c, mut f) = tight_setup(SaraConfig::default());
    // Four fully stalled intervals use the 20 ms budget exactly: remaining = 0, not negative.
    for k in 1..=4 {
        f.stall(0, 5_000, 0);
        let actions = f.tick(&mut c, k * 5 * MS);
        assert!(drops(&actions).is_empty(), "dropped at interval {k}");
    }
    assert_eq!(c.running_job(0).unwrap().remaining_ideal_stall_ns(), 0);
    f.stall(0, 5_000, 0);
    let actions = f.tick(&mut c, 25 * MS);
    assert_eq!(drops(&actions), vec![(0, 7)]);
    assert!(c.last_interval(0).unwrap().long_stall);
    assert_eq!(actions.last(), Some(&Action::DropJob { group: 0, job: 7 }));
    // Asked once: a further stalled tick before the platform reports the drop asks nothing more.
    f.stall(0, 5_000, 0);
    assert!(drops(&f.tick(&mut c, 30 * MS)).is_empty());
}

#[test]
fn early_drop_fires_at_exactly_m_percent_severe_intervals() {
    // 2, 5, 5, 5, 5 ms: Σ = 22 ms > 20 ms at interval 5, with 4 of 5 (80 %) severe.
    let (mut c, mut f) = tight_setup(SaraConfig::default());
    for (k, us) in [2_000, 5_000, 5_000, 5_000].into_iter().enumerate() {
        f.stall(0, us, 0);
        assert!(drops(&f.tick(&mut c, (k as u64 + 1) * 5 * MS)).is_empty());
    }
    f.stall(0, 5_000, 0);
    assert_eq!(drops(&f.tick(&mut c, 25 * MS)), vec![(0, 7)]);
}

#[test]
fn no_early_drop_below_m_percent_severe_intervals() {
    // 2, 2, 5, 5, 5 ms keeps Σ = 19 ms; the sixth interval (5 ms) makes it 24 ms > 20 ms, but only
    // 4 of 6 intervals (67 %) were severe: a plain miss, not a long stall.
    let (mut c, mut f) = tight_setup(SaraConfig::default());
    for (k, us) in [2_000, 2_000, 5_000, 5_000, 5_000, 5_000].into_iter().enumerate() {
        f.stall(0, us, 0);
        assert!(drops(&f.tick(&mut c, (k as u64 + 1) * 5 * MS)).is_empty(), "interval {}", k + 1);
    }
    let iv = c.last_interval(0).unwrap();
    assert!(c.running_job(0).unwrap().remaining_ideal_stall_ns() < 0);
    assert!(!iv.long_stall);
}

#[test]
fn early_drop_off_detects_the_long_stall_but_drops_nothing() {
    let (mut c, mut f) = tight_setup(SaraConfig { early_drop: false, ..SaraConfig::default() });
    for k in 1..=5 {
        f.stall(0, 5_000, 0);
        assert!(drops(&f.tick(&mut c, k * 5 * MS)).is_empty());
    }
    assert!(c.last_interval(0).unwrap().long_stall);
}

#[test]
fn sara_follows_a_job_dropped_by_someone_else() {
    let (mut c, mut f) = tight_setup(SaraConfig::default());
    f.release(0, 8, 3 * MS, 103 * MS); // queued behind job 7 (a burst)
    f.tick(&mut c, 5 * MS);
    f.events.push(JobEvent::Drop { group: 0, job: 7, at_ns: 7 * MS });
    f.stall(0, 5_000, 0);
    let actions = f.tick(&mut c, 10 * MS);
    assert!(drops(&actions).is_empty());
    let job = c.running_job(0).unwrap();
    assert_eq!((job.job, job.start_ns, job.wait_ns, job.ideal_stall_ns), (8, 7 * MS, 4 * MS, 16_000_000));
}

#[test]
fn sara_tracks_several_soft_rt_groups_independently() {
    // Groups 0 and 2 are soft RT, 1 is non-RT; only group 0 runs a job and stalls.
    let mut f = Fake::new(1 << 30, vec![srt("a", 100 * MS, 57 * MS, 0), nrt("batch", 0), srt("b", 100 * MS, 57 * MS, 0)]);
    let mut c = sara(SaraConfig { initial_limit_bytes: Some(256 * MIB), ..SaraConfig::default() });
    f.release(0, 1, 0, 100 * MS);
    f.tick(&mut c, 0);
    f.stall(0, 5_000, 0);
    f.stall(2, 5_000, 0); // stalls between jobs: ignored
    f.tick(&mut c, 5 * MS);
    assert_eq!(c.limit_bytes(0), Some(256 * MIB + 597_688));
    assert_eq!(c.limit_bytes(2), Some(256 * MIB));
    assert_eq!(f.groups[1].knobs.max_bytes, Some((1 << 30) - 512 * MIB - 597_688));
}

#[test]
fn sara_clamps_the_limit_to_floor_and_to_what_the_others_need() {
    let mut f = Fake::new(100 * MIB, vec![srt("rt", 100 * MS, 57 * MS, 20 * MIB), nrt("batch", 30 * MIB)]);
    let mut c = sara(SaraConfig { initial_limit_bytes: Some(200 * MIB), step_bytes: 64 * MIB, ..SaraConfig::default() });
    f.release(0, 1, 0, 100 * MS);
    f.tick(&mut c, 0);
    assert_eq!(c.limit_bytes(0), Some(70 * MIB), "total − non-RT floor");
    assert_eq!(f.groups[1].knobs.max_bytes, Some(30 * MIB));
    for k in 1..=10 {
        f.tick(&mut c, k * 5 * MS); // no stall: shrink by 64 MiB · 2.15/5 per interval
    }
    assert_eq!(c.limit_bytes(0), Some(20 * MIB), "never below the floor");
    assert_eq!(f.groups[1].knobs.max_bytes, Some(80 * MIB));
}

#[test]
fn sara_default_start_is_an_even_share_above_the_non_rt_floors() {
    let mut f = Fake::new(1000 * MIB, vec![srt("a", 100 * MS, 50 * MS, 0), nrt("batch", 100 * MIB), srt("b", 100 * MS, 50 * MS, 0)]);
    let mut c = sara(SaraConfig::default());
    f.tick(&mut c, 0);
    assert_eq!((c.limit_bytes(0), c.limit_bytes(2)), (Some(450 * MIB), Some(450 * MIB)));
    assert_eq!(f.groups[1].knobs.max_bytes, Some(100 * MIB));
}

#[test]
fn sara_rejects_bad_parameters_with_a_pointer_to_the_fix() {
    let e = Sara::new(SaraConfig { interval_ns: 0, ..SaraConfig::default() }).unwrap_err();
    assert_eq!(e.to_string(), "controller `sara`: `interval_ns` must be > 0 (the paper uses 5_000_000) (got 0)");
    assert!(Sara::new(SaraConfig { long_stall_intervals_pct: 101, ..SaraConfig::default() }).is_err());
    let e = Sara::new(SaraConfig { step_up_bytes: Some(0), ..SaraConfig::default() }).unwrap_err();
    assert!(e.to_string().contains("`step_up_bytes` must be > 0"), "{e}");
}

// ---------------------------------------------------------------------------------------------
// Greedy, Offline, static

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

// ---------------------------------------------------------------------------------------------
// TMO

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

// ---------------------------------------------------------------------------------------------
// senpai

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

// ---------------------------------------------------------------------------------------------
// Factory

#[test]
fn factory_builds_every_named_controller() {
    let configs = [
        ("sara", json!({"interval_ns": 10_000_000, "early_drop": false})),
        ("greedy", json!({})),
        ("offline", json!({"limit_bytes": 1})),
        ("tmo-low", json!({})),
        ("tmo-high", json!({"psi_threshold_pct": 20.0})),
        ("senpai", json!({"pressure_us": 5_000})),
        ("static", json!({"default_limit_bytes": 1})),
    ];
    for (name, cfg) in configs {
        let c = make_controller(name, cfg).unwrap();
        assert_eq!(c.name(), name);
    }
    assert_eq!(make_controller("sara", json!({"interval_ns": 10_000_000})).unwrap().interval_ns(), 10_000_000);
}

#[test]
fn factory_errors_are_one_line_and_actionable() {
    let err = |name: &str, cfg: serde_json::Value| make_controller(name, cfg).err().unwrap().to_string();
    let errors = [
        err("sarah", json!({})),
        err("sara", json!({"intervl_ns": 5})),
        err("offline", json!({})),
        err("static", json!({})),
        err("senpai", json!({"knob": "min"})),
        err("tmo-low", json!({"reclaim_ratio": 2.0})),
        err("sara", json!({"step_bytes": "x"})),
        err("static", json!({"limits_bytes": {"srt": -1}})),
    ];
    assert_eq!(errors[0], "unknown controller `sarah`; use one of: sara, greedy, offline, tmo-low, tmo-high, senpai, static");
    assert!(errors[1].starts_with("invalid config for controller `sara`: unknown field `intervl_ns`, expected one of"), "{}", errors[1]);
    assert_eq!(errors[2], "invalid config for controller `offline`: missing field `limit_bytes`");
    assert!(errors[3].contains("set `limits_bytes`"), "{}", errors[3]);
    assert!(errors[4].contains("unknown variant `min`, expected `max` or `high`"), "{}", errors[4]);
    assert_eq!(errors[5], "controller `tmo-low`: `reclaim_ratio` must be within 0..=1 (got 2)");
    // The key at fault is named, also inside a table.
    assert_eq!(errors[6], "invalid config for controller `sara`: `step_bytes`: invalid type: string \"x\", expected u64");
    assert_eq!(errors[7], "invalid config for controller `static`: `limits_bytes.srt`: invalid value: integer `-1`, expected u64");
    for e in &errors {
        assert!(!e.contains('\n'), "{e}");
    }
}

#[test]
fn controller_config_round_trips_for_logging() {
    let cfg = ControllerConfig::parse("tmo-high", json!({"psi_threshold_pct": 25.0})).unwrap();
    let logged = serde_json::to_value(&cfg).unwrap();
    assert_eq!(logged["controller"], "tmo-high");
    assert_eq!(logged["psi_threshold_pct"], 25.0);
    assert_eq!(logged["period_ns"], 6_000_000_000u64);
}

// ---------------------------------------------------------------------------------------------
// Property tests: random observation sequences

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
                Action::SetMin { .. } | Action::SetLow { .. } => prop_assert!(false, "{}: unexpected {a:?}", c.name()),
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
            stall: StallTotals { memory_some_us: st[0], memory_full_us: st[1], io_some_us: st[2], io_full_us: st[3] },
            usage_bytes: usage,
            knobs: MemoryKnobs { max_bytes: max, high_bytes: high, min_bytes: None, low_bytes: None },
            floor_bytes: floor,
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
                let obs = Observation { now_ns: *now_ns, total_memory_bytes: *total, groups: groups.clone(), events: events.clone() };
                for a in c.tick(&obs) {
                    let group = match a {
                        Action::SetMax { group, .. } | Action::SetHigh { group, .. } | Action::SetMin { group, .. }
                        | Action::SetLow { group, .. } | Action::DropJob { group, .. } => group,
                    };
                    prop_assert!(group < groups.len());
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// A toy plant that closes the loop

/// One periodic soft-RT task and one memory-hungry non-RT group. The soft-RT task needs
/// `NEED` bytes; with a limit `L` below that it stalls a share `min(1, (NEED − L)/RAMP)` of its
/// time (stall per interval falls linearly as the limit grows) and its execution time is exactly
/// BCET + stall (Eq. 1 holds by construction). With x = 1 MiB the loop gain per interval is
/// x/RAMP = 2.5 %; below about 1.5 % (e.g. RAMP = 100 MiB) SARA settles into a two-period cycle
/// instead (slow in-job correction, then the 1/n_remain end-of-period term overcorrects).
struct Plant {
    fake: Fake,
    running: Option<(u64, u64, f64)>, // (job, release, remaining work ns)
    pending: VecDeque<(u64, u64)>,
    next_job: u64,
    stall_acc_ns: f64,
    /// (job, release, end, dropped)
    finished: Vec<(u64, u64, u64, bool)>,
}

const PLANT_L: u64 = 5 * MS;
const PLANT_PERIOD: u64 = 1_000 * MS;
const PLANT_BCET: u64 = 500 * MS;
const PLANT_NEED: u64 = 100 * MIB;
/// Shortage at which the task stalls all the time.
const PLANT_RAMP: u64 = 40 * MIB;
const PLANT_TOTAL: u64 = 200 * MIB;

impl Plant {
    fn new() -> Self {
        let mut fake = Fake::new(PLANT_TOTAL, vec![srt("rt", PLANT_PERIOD, PLANT_BCET, 10 * MIB), nrt("batch", 10 * MIB)]);
        fake.groups[1].usage_bytes = PLANT_TOTAL;
        Plant { fake, running: None, pending: VecDeque::new(), next_job: 0, stall_acc_ns: 0.0, finished: Vec::new() }
    }

    fn stall_share(&self) -> f64 {
        let limit = self.fake.groups[0].knobs.max_bytes.unwrap_or(u64::MAX);
        (PLANT_NEED.saturating_sub(limit) as f64 / PLANT_RAMP as f64).min(1.0)
    }

    fn start_next(&mut self) {
        if self.running.is_none() {
            if let Some((job, release)) = self.pending.pop_front() {
                self.running = Some((job, release, PLANT_BCET as f64));
            }
        }
    }

    /// Advances from `t` to `t + PLANT_L`, releasing a job at period boundaries.
    fn advance(&mut self, t: u64) {
        if t == self.next_job * PLANT_PERIOD {
            self.next_job += 1;
            self.pending.push_back((self.next_job, t));
            self.fake.release(0, self.next_job, t, t + PLANT_PERIOD);
            self.start_next();
        }
        let end = (t + PLANT_L) as f64;
        let mut cursor = t as f64;
        let f = self.stall_share();
        while let Some((job, release, work)) = self.running {
            if f >= 1.0 {
                self.stall_acc_ns += end - cursor;
                break;
            }
            let to_finish = work / (1.0 - f);
            if cursor + to_finish <= end {
                self.stall_acc_ns += f * to_finish;
                cursor += to_finish;
                let at_ns = cursor.round() as u64;
                self.fake.complete(0, job, at_ns);
                self.finished.push((job, release, at_ns, false));
                self.running = None;
                self.start_next();
            } else {
                self.stall_acc_ns += f * (end - cursor);
                self.running = Some((job, release, work - (end - cursor) * (1.0 - f)));
                break;
            }
        }
        let stall_us = (self.stall_acc_ns / 1_000.0) as u64;
        let s = &mut self.fake.groups[0].stall;
        s.memory_some_us = stall_us;
        s.memory_full_us = stall_us;
        let limit = self.fake.groups[0].knobs.max_bytes.unwrap_or(u64::MAX);
        self.fake.groups[0].usage_bytes = PLANT_NEED.min(limit);
    }

    fn run(&mut self, c: &mut dyn Controller, periods: u64) -> Vec<u64> {
        let mut srt_limit_trace = Vec::new();
        let mut t = 0;
        while t < periods * PLANT_PERIOD {
            let actions = self.fake.tick(c, t);
            for (group, job) in drops(&actions) {
                if group == 0 && self.running.is_some_and(|r| r.0 == job) {
                    let (job, release, _) = self.running.take().unwrap();
                    self.fake.events.push(JobEvent::Drop { group, job, at_ns: t });
                    self.finished.push((job, release, t, true));
                    self.start_next();
                }
            }
            srt_limit_trace.push(self.fake.groups[0].knobs.max_bytes.unwrap_or(self.fake.groups[0].usage_bytes));
            self.advance(t);
            t += PLANT_L;
        }
        srt_limit_trace
    }
}

#[test]
fn sara_closes_the_loop_on_a_toy_plant_and_greedy_holds_everything() {
    let periods = 40;
    let mut plant = Plant::new();
    let mut c = sara(SaraConfig::default());
    let trace = plant.run(&mut c, periods);
    // After a 10-period warm-up every job ends at its deadline: at most one interval early
    // (SARA acts once per interval) and at most 0.1 ms late. Eq. 4 aims at the deadline itself
    // (s_period = d − BCET, no margin), so equality is the target and the residual either side is
    // Eq. 6's integer truncation and PSI's microsecond resolution.
    let settled: Vec<_> = plant.finished.iter().filter(|j| j.0 > 10).collect();
    assert!(settled.len() >= 25, "jobs finished: {}", plant.finished.len());
    for &&(job, release, end, dropped) in &settled {
        let response = end - release;
        assert!(!dropped, "job {job} dropped");
        assert!(response <= PLANT_PERIOD + 100_000, "job {job} late: {response} ns");
        assert!(response >= PLANT_PERIOD - PLANT_L, "job {job} early: {response} ns");
    }
    // The equilibrium the formulas predict: a stall share of 0.5 in every interval (s_ideal =
    // d − BCET = half the period) needs a limit of NEED − 0.5 · RAMP = 80 MiB.
    let tail = &trace[trace.len() - 2 * (PLANT_PERIOD / PLANT_L) as usize..];
    let mean_limit = tail.iter().sum::<u64>() / tail.len() as u64;
    assert!((78 * MIB..=82 * MIB).contains(&mean_limit), "mean soft-RT limit {mean_limit} bytes");
    let sara_nrt = plant.fake.groups[1].knobs.max_bytes.unwrap();

    let mut plant = Plant::new();
    let mut g = Greedy::new(GreedyConfig::default());
    let trace = plant.run(&mut g, 5);
    assert!(plant.finished.iter().all(|&(_, release, end, _)| end - release == PLANT_BCET), "greedy jobs never stall");
    assert_eq!(*trace.last().unwrap(), PLANT_NEED, "greedy's soft-RT task holds all it needs");
    let greedy_nrt = plant.fake.groups[1].knobs.max_bytes.unwrap();
    assert_eq!(greedy_nrt, PLANT_TOTAL - PLANT_NEED);
    assert!(sara_nrt >= greedy_nrt + 15 * MIB, "SARA gives non-RT {} MiB, Greedy {} MiB", sara_nrt / MIB, greedy_nrt / MIB);
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
    g
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 100, ..ProptestConfig::default() })]

    /// `Controller::stall_inputs` and `Controller::reads_usage` tell the truth: totals and
    /// usage a controller says it does not read change none of its actions, so a platform may
    /// skip reading them.
    #[test]
    fn controllers_ignore_the_stall_totals_and_usage_they_say_they_do_not_read(sc in scenario(), junk in prop::collection::vec(any::<u64>(), 80)) {
        for ((mut honest, _), (mut fooled, _)) in all_controllers().into_iter().zip(all_controllers()) {
            let mut groups = sc.groups.clone();
            let mut now_ns = 0;
            for (i, step) in sc.steps.iter().enumerate() {
                step.advance(&mut groups);
                let events: Vec<JobEvent> = step.job_events(now_ns).collect();
                now_ns += step.dt_ns;
                let obs = Observation { now_ns, total_memory_bytes: sc.total, groups: groups.clone(), events };
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
