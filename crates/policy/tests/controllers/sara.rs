//! SARA: Eq. 3–6 and Definition 1 on hand-computed observation sequences.

use super::*;

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
