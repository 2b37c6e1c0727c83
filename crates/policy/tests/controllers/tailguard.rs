//! Tailguard: its guard band, its learned job cost, its rescue and its drops, on the toy
//! plant and on hand-built observation sequences.

use super::plant::{Plant, PLANT_BCET, PLANT_L, PLANT_PERIOD};
use super::*;

fn tailguard(cfg: TailguardConfig) -> Tailguard {
    Tailguard::new(cfg).unwrap()
}

fn responses(plant: &Plant, after_job: u64) -> Vec<(u64, u64, bool)> {
    plant.finished.iter().filter(|j| j.0 > after_job).map(|&(job, release, end, dropped)| (job, end - release, dropped)).collect()
}

#[test]
fn tailguard_settles_each_job_just_inside_its_deadline_on_the_toy_plant() {
    let mut plant = Plant::new();
    let mut c = tailguard(TailguardConfig::default());
    plant.run(&mut c, 40);
    let settled = responses(&plant, 10);
    assert!(settled.len() >= 25, "jobs finished: {}", plant.finished.len());
    // Eq. 1 holds in this plant, so the learned cost is BCET. The one miss of the first
    // periods widened the guard band for a while; with no noise after, no job misses and the
    // guard band decays to nothing: the jobs end just inside their deadline.
    for &(job, response, dropped) in &settled {
        assert!(!dropped, "job {job} dropped");
        assert!(response <= PLANT_PERIOD, "job {job} late: {response} ns");
        let inside = if job > 20 { 2 * PLANT_L } else { PLANT_PERIOD / 50 };
        assert!(response >= PLANT_PERIOD - inside, "job {job} far inside its deadline: {response} ns (memory wasted)");
    }
    assert_eq!(c.rescues(0), 0, "steady jobs are never rescued");
    assert_eq!(c.guard_permille(0), 0);
}

#[test]
fn tailguard_meets_deadlines_when_cpu_contention_breaks_eq_1_and_sara_does_not() {
    // The CPU work takes 1.3 × BCET: SARA's stall budget d − BCET is 150 ms too generous.
    let mut plant = Plant::with_cpu_slowdown(1.3);
    let mut s = sara(SaraConfig::default());
    plant.run(&mut s, 40);
    let sara_late = responses(&plant, 10).iter().filter(|&&(_, r, dropped)| dropped || r > PLANT_PERIOD).count();
    assert!(sara_late >= 20, "SARA trims to a budget the CPU already used: {sara_late} late of 29");

    let mut plant = Plant::with_cpu_slowdown(1.3);
    let mut c = tailguard(TailguardConfig::default());
    plant.run(&mut c, 40);
    let settled = responses(&plant, 10);
    assert!(settled.iter().all(|&(_, r, dropped)| !dropped && r <= PLANT_PERIOD), "{settled:?}");
    // The learned cost is the slowed CPU time, not the configured BCET.
    let cost = c.job_cost_ns(0, PLANT_BCET);
    assert!((640 * MS..=660 * MS).contains(&cost), "learned cost {cost} ns");
}

/// Tailguard on a 1 GiB machine, 512 MiB starting limit, d = 100 ms, BCET = 50 ms.
fn setup(cfg: TailguardConfig) -> (Tailguard, Fake) {
    let fake = Fake::new(1 << 30, vec![srt("rt", 100 * MS, 50 * MS, 0), nrt("batch", 0)]);
    (tailguard(TailguardConfig { initial_limit_bytes: Some(512 * MIB), ..cfg }), fake)
}

/// Runs job `job` released at `release_ns` with `stall_us_per_tick` of stall in each 5 ms tick
/// for `ticks` ticks, completing it at the last tick unless `complete` is false.
fn run_job(c: &mut Tailguard, f: &mut Fake, job: u64, release_ns: u64, stall_us_per_tick: &[u64], complete: bool) -> Vec<Action> {
    f.release(0, job, release_ns, release_ns + 100 * MS);
    let mut all = f.tick(c, release_ns);
    for (k, &s) in stall_us_per_tick.iter().enumerate() {
        f.stall(0, s, 0);
        let now = release_ns + (k as u64 + 1) * 5 * MS;
        if complete && k + 1 == stall_us_per_tick.len() {
            f.complete(0, job, now);
        }
        all.extend(f.tick(c, now));
    }
    all
}

#[test]
fn stall_above_the_guarded_target_grows_the_limit_by_step_up_and_below_shrinks_by_step_down() {
    // Guard band 0: target finish 100 ms, cost = BCET 50 ms, a stall budget of 50 ms over 20
    // intervals. Interval 1 with 4 ms of stall: x_up · (4·20 − 50)/(5·20) = 2 MiB · 30/100 =
    // 629145.6 bytes.
    let (mut c, mut f) = setup(TailguardConfig::default());
    run_job(&mut c, &mut f, 1, 0, &[4_000], false);
    assert_eq!(c.limit_bytes(0), Some(512 * MIB + 629_145));
    // With 1 ms of stall: x_down · (1·20 − 50)/100 = −1 MiB · 30/100 = −314572.8 → −314572.
    let (mut c, mut f) = setup(TailguardConfig::default());
    run_job(&mut c, &mut f, 1, 0, &[1_000], false);
    assert_eq!(c.limit_bytes(0), Some(512 * MIB - 314_572));
    assert_eq!(f.groups[1].knobs.max_bytes, Some(512 * MIB + 314_572), "the non-RT group gets the rest");
}

#[test]
fn a_limit_bound_job_whose_next_interval_would_exhaust_its_slack_is_rescued() {
    let (mut c, mut f) = setup(TailguardConfig { drop_certain_misses: false, ..TailguardConfig::default() });
    // Usage at the limit: every fully stalled interval faulted in what the steering gave.
    let at_limit = |c: &Tailguard| c.limit_bytes(0).unwrap();
    f.release(0, 1, 0, 100 * MS);
    f.tick(&mut c, 0);
    // BCET 50 ms, no work done: the slack at 5·k ms is 100 − 5k − 50 ms; with 5 ms of stall
    // a tick it falls below one interval's stall (5 ms) once 50 − 5k < 5, at k = 10 (50 ms).
    for k in 1..=9 {
        f.groups[0].usage_bytes = at_limit(&c);
        f.stall(0, 5_000, 0);
        f.tick(&mut c, k * 5 * MS);
        assert_eq!(c.rescues(0), 0, "slack {} ms at tick {k}: the steering may still save it", 50 - 5 * k as i64);
    }
    f.groups[0].usage_bytes = at_limit(&c);
    f.stall(0, 5_000, 0);
    let actions = f.tick(&mut c, 50 * MS);
    assert_eq!(c.rescues(0), 1);
    assert!(c.running_job(0).unwrap().rescued);
    assert!(drops(&actions).is_empty(), "drop_certain_misses is off");
    // Rescued: the limit is the usage plus the headroom, and follows the usage up.
    f.groups[0].usage_bytes = 700 * MIB;
    f.stall(0, 5_000, 0);
    f.tick(&mut c, 55 * MS);
    assert_eq!(c.limit_bytes(0), Some(716 * MIB));
    assert_eq!(f.groups[1].knobs.max_bytes, Some(1024 * MIB - 716 * MIB));
}

#[test]
fn a_job_below_its_limit_or_running_part_of_each_interval_is_left_to_the_steering() {
    // The same job, but its usage stays a growth step and more below the limit: the stall is
    // not the limit's doing, so a rescue would only take memory from the non-RT group.
    let (mut c, mut f) = setup(TailguardConfig { drop_certain_misses: false, ..TailguardConfig::default() });
    f.release(0, 1, 0, 100 * MS);
    f.tick(&mut c, 0);
    for k in 1..=12 {
        f.groups[0].usage_bytes = c.limit_bytes(0).unwrap() - 2 * MIB - 1;
        f.stall(0, 5_000, 0);
        f.tick(&mut c, k * 5 * MS);
    }
    assert_eq!(c.rescues(0), 0);
    // Within one step of the limit it is limit-bound, and past the point above: rescued.
    f.groups[0].usage_bytes = c.limit_bytes(0).unwrap() - 2 * MIB;
    f.stall(0, 5_000, 0);
    f.tick(&mut c, 65 * MS);
    assert_eq!(c.rescues(0), 1);
    // At its limit but running for a fifth of every interval (4 ms of 5 stalled, below
    // rescue_stall_pct = 90): the steering's growth is reaching it.
    let (mut c, mut f) = setup(TailguardConfig { drop_certain_misses: false, ..TailguardConfig::default() });
    f.release(0, 1, 0, 100 * MS);
    f.tick(&mut c, 0);
    for k in 1..=20 {
        f.groups[0].usage_bytes = c.limit_bytes(0).unwrap();
        f.stall(0, 4_000, 0);
        f.tick(&mut c, k * 5 * MS);
    }
    assert_eq!(c.rescues(0), 0);
    // With rescue off, never.
    let (mut c, mut f) = setup(TailguardConfig { rescue: false, drop_certain_misses: false, ..TailguardConfig::default() });
    run_job(&mut c, &mut f, 1, 0, &[5_000; 12], false);
    assert_eq!(c.rescues(0), 0);
}

#[test]
fn a_job_certain_to_miss_is_dropped_once_and_not_before() {
    // BCET 50 ms, d = 100 ms, usage 0 (never rescued): stalling 5 ms a tick, start + stall +
    // 50 ms passes 100 ms when the stall passes 50 ms, at the 11th tick (55 ms).
    let (mut c, mut f) = setup(TailguardConfig::default());
    let actions = run_job(&mut c, &mut f, 1, 0, &[5_000; 10], false);
    assert!(drops(&actions).is_empty(), "50 ms of stall: it can still end at 100 ms");
    f.stall(0, 5_000, 0);
    assert_eq!(drops(&f.tick(&mut c, 55 * MS)), vec![(0, 1)]);
    assert!(c.running_job(0).unwrap().drop_requested);
    f.stall(0, 5_000, 0);
    assert!(drops(&f.tick(&mut c, 60 * MS)).is_empty(), "asked for once");
    assert_eq!(c.drops(0), 1);
    // Off: the job runs on.
    let (mut c, mut f) = setup(TailguardConfig { drop_certain_misses: false, ..TailguardConfig::default() });
    let actions = run_job(&mut c, &mut f, 1, 0, &[5_000; 15], false);
    assert!(drops(&actions).is_empty());
}

#[test]
fn the_drop_test_uses_the_fastest_remembered_job_and_the_deadline_itself() {
    let (mut c, mut f) = setup(TailguardConfig::default());
    // Four jobs with non-stall times 41, 45, 49 and 53 ms (see the learned-cost test): the
    // fastest, 41 ms, is what a job needs at least.
    for (k, ticks) in [10usize, 11, 12, 13].into_iter().enumerate() {
        run_job(&mut c, &mut f, k as u64 + 1, k as u64 * 100 * MS, &vec![1_000; ticks], true);
    }
    assert_eq!(c.drops(0), 0);
    // A fully stalled job released at 400 ms: 400 + stall + 41 > 500 once the stall passes
    // 59 ms, at 60 ms (tick 12), not at 55 ms as with the BCET.
    let actions = run_job(&mut c, &mut f, 5, 400 * MS, &[5_000; 11], false);
    assert!(drops(&actions).is_empty());
    f.stall(0, 5_000, 0);
    assert_eq!(drops(&f.tick(&mut c, 460 * MS)), vec![(0, 5)]);
    // A job that stalls little but runs on past its deadline is dropped at the first tick after
    // it: its time since start less stall is past any remembered job's.
    f.events.push(JobEvent::Drop { group: 0, job: 5, at_ns: 460 * MS });
    let actions = run_job(&mut c, &mut f, 6, 500 * MS, &[0; 20], false);
    assert!(drops(&actions).iter().all(|&(_, j)| j != 6), "on time until 600 ms");
    f.stall(0, 0, 0);
    assert_eq!(drops(&f.tick(&mut c, 605 * MS)), vec![(0, 6)]);
}

#[test]
fn the_guard_band_grows_with_unrescued_misses_and_decays_with_jobs_on_time() {
    let (mut c, mut f) = setup(TailguardConfig::default());
    assert_eq!(c.guard_permille(0), 0);
    // Late by 5 ms, not rescued (usage 0 never reaches the limit): +10 ‰.
    run_job(&mut c, &mut f, 1, 0, &[1_000; 21], true);
    assert_eq!(c.guard_permille(0), 10);
    // A dropped job missed too: +10 ‰.
    run_job(&mut c, &mut f, 2, 200 * MS, &[5_000; 3], false);
    f.events.push(JobEvent::Drop { group: 0, job: 2, at_ns: 215 * MS });
    f.tick(&mut c, 215 * MS);
    assert_eq!(c.guard_permille(0), 20);
    // Each job on time takes 1 ‰ back.
    for k in 0..5u64 {
        run_job(&mut c, &mut f, 3 + k, (3 + k) * 100 * MS, &[1_000; 10], true);
    }
    assert_eq!(c.guard_permille(0), 15);
    // It never passes guard_max_permille.
    let (mut c, mut f) = setup(TailguardConfig { guard_step_permille: 60, ..TailguardConfig::default() });
    for k in 0..3u64 {
        run_job(&mut c, &mut f, k + 1, k * 200 * MS, &[1_000; 21], true);
    }
    assert_eq!(c.guard_permille(0), 100);
}

#[test]
fn a_rescued_job_that_misses_leaves_the_guard_band_alone() {
    let (mut c, mut f) = setup(TailguardConfig { drop_certain_misses: false, ..TailguardConfig::default() });
    f.release(0, 1, 0, 100 * MS);
    f.tick(&mut c, 0);
    for k in 1..=21 {
        f.groups[0].usage_bytes = c.limit_bytes(0).unwrap();
        f.stall(0, 5_000, 0);
        if k == 21 {
            f.complete(0, 1, 105 * MS);
        }
        f.tick(&mut c, k * 5 * MS);
    }
    assert_eq!(c.rescues(0), 1);
    assert_eq!(c.guard_permille(0), 0, "the steering handed the job over: no wider aim would have kept it");
}

#[test]
fn the_guard_band_moves_the_steerings_target() {
    // Guard 0: target finish 100 ms, cost 50 ms, budget 50 ms over 20 intervals. 5 ms of stall:
    // 2 MiB · (5·20 − 50)/(5·20) = 1 MiB exactly.
    let (mut c, mut f) = setup(TailguardConfig::default());
    run_job(&mut c, &mut f, 1, 0, &[5_000], false);
    assert_eq!(c.limit_bytes(0), Some(513 * MIB));
    // After one unrescued miss the guard is 10 ‰ = 1 ms: target 99 ms, budget 49 ms over 20
    // intervals: 2 MiB · 51/100 = 1069547.5 → 1069547 bytes.
    let (mut c, mut f) = setup(TailguardConfig::default());
    run_job(&mut c, &mut f, 1, 0, &[1_000; 21], true);
    assert_eq!(c.guard_permille(0), 10);
    let before = c.limit_bytes(0).unwrap();
    run_job(&mut c, &mut f, 2, 200 * MS, &[5_000], false);
    assert_eq!(c.limit_bytes(0).unwrap() - before, 1_069_547);
}

#[test]
fn the_learned_cost_is_a_high_quantile_of_recent_non_stall_times() {
    let cfg = TailguardConfig { cost_min_jobs: 4, cost_window_jobs: 4, cost_quantile_pct: 75, ..TailguardConfig::default() };
    let (mut c, mut f) = setup(cfg);
    // Jobs of 10, 11, 12 and 13 ticks with 1 ms stall a tick. A completion is seen at the tick
    // that ends its last interval, whose stall is not counted: non-stall times 41, 45, 49, 53 ms.
    for (k, ticks) in [10usize, 11, 12, 13].into_iter().enumerate() {
        assert_eq!(c.job_cost_ns(0, 50 * MS), 50 * MS, "the configured BCET until four jobs completed");
        run_job(&mut c, &mut f, k as u64 + 1, k as u64 * 100 * MS, &vec![1_000; ticks], true);
    }
    // The 75 % quantile by nearest rank of {41, 45, 49, 53} ms is the third: 49 ms.
    assert_eq!(c.job_cost_ns(0, 50 * MS), 49 * MS);
}

#[test]
fn bad_parameters_are_refused_with_the_field_named() {
    let e = |cfg: TailguardConfig| Tailguard::new(cfg).unwrap_err().to_string();
    assert!(e(TailguardConfig { guard_max_permille: 1000, ..TailguardConfig::default() }).contains("guard_max_permille"));
    assert!(e(TailguardConfig { guard_step_permille: 101, ..TailguardConfig::default() }).contains("guard_step_permille"));
    assert!(e(TailguardConfig { step_up_bytes: 0, ..TailguardConfig::default() }).contains("step_up_bytes"));
    assert!(e(TailguardConfig { cost_min_jobs: 20, ..TailguardConfig::default() }).contains("cost_min_jobs"));
    let err = make_controller("tailguard", json!({"guard": 5})).err().unwrap().to_string();
    assert!(err.contains("unknown field `guard`"), "{err}");
}

fn io_limits(actions: &[Action]) -> Vec<(GroupId, Option<u64>, Option<u64>)> {
    actions
        .iter()
        .filter_map(|a| match *a {
            Action::SetIoMax { group, read_bytes_per_s, write_bytes_per_s } => Some((group, read_bytes_per_s, write_bytes_per_s)),
            _ => None,
        })
        .collect()
}

/// Four jobs, released 100 ms apart from 0, that keep their deadlines after 10 ms of stall
/// each (2 ms in each of five ticks, then a sixth without): the most a kept job stalled is 10 ms.
fn kept_jobs(c: &mut Tailguard, f: &mut Fake) {
    for job in 1..=4 {
        run_job(c, f, job, (job - 1) * 100 * MS, &[2_000, 2_000, 2_000, 2_000, 2_000, 0], true);
    }
}

/// Ticks job 5 (released at 400 ms) for `ticks` 5 ms intervals, each with `io_us` of I/O stall
/// and as much memory stall, its usage `below_limit_bytes` under its limit; the actions of each.
fn io_bound_job(c: &mut Tailguard, f: &mut Fake, ticks: u64, io_us: u64, below_limit_bytes: u64) -> Vec<Vec<Action>> {
    let release_ns = 400 * MS;
    f.release(0, 5, release_ns, release_ns + 100 * MS);
    let mut out = vec![f.tick(c, release_ns)];
    for k in 1..=ticks {
        f.groups[0].usage_bytes = c.limit_bytes(0).unwrap() - below_limit_bytes;
        f.stall(0, io_us, io_us);
        out.push(f.tick(c, release_ns + k * 5 * MS));
    }
    out
}

#[test]
fn a_job_held_back_by_the_swap_device_and_not_by_its_limit_limits_the_non_rt_io_until_it_ends() {
    let guard = Some(32 * MIB);
    let (mut c, mut f) = setup(TailguardConfig { drop_certain_misses: false, ..TailguardConfig::default() });
    assert_eq!(c.config().io_guard_bytes_per_s, guard, "on by default");
    kept_jobs(&mut c, &mut f);
    // Waiting on the device the whole interval, 10 MiB under its limit: at that pace (no work
    // done) it misses, and more memory would not help. Only once its stall (5 ms a tick) is
    // past the 10 ms of the kept jobs is it unlike them.
    let ticks = io_bound_job(&mut c, &mut f, 4, 5_000, 10 * MIB);
    assert!(ticks[..3].iter().all(|a| io_limits(a).is_empty()), "5 and 10 ms of stall: like the kept jobs");
    assert_eq!(io_limits(&ticks[3]), [(1, guard, guard)], "only the non-RT group is limited");
    assert!(io_limits(&ticks[4]).is_empty(), "asked once, then held");
    assert_eq!(f.groups[1].bandwidth.io_read_bytes_per_s, guard);
    f.complete(0, 5, 420 * MS);
    assert_eq!(io_limits(&f.tick(&mut c, 420 * MS)), [(1, None, None)], "lifted when the job ends");
}

#[test]
fn a_limit_bound_job_one_that_still_runs_or_one_like_the_kept_jobs_leaves_the_non_rt_io_alone() {
    let cfg = TailguardConfig { drop_certain_misses: false, ..TailguardConfig::default() };
    let run = |cfg: TailguardConfig, history: bool, io_us: u64, below_limit_bytes: u64| {
        let (mut c, mut f) = setup(cfg);
        if history {
            kept_jobs(&mut c, &mut f);
        }
        io_bound_job(&mut c, &mut f, 6, io_us, below_limit_bytes).iter().all(|a| io_limits(a).is_empty())
    };
    assert!(!run(cfg.clone(), true, 5_000, 10 * MIB), "the guarded case itself");
    // At its limit: its faults are the limit's doing, and the steering gives it memory.
    assert!(run(cfg.clone(), true, 5_000, 0));
    // Running a fifth of each interval (4 ms of 5 on the device, below io_guard_stall_pct).
    assert!(run(cfg.clone(), true, 4_000, 10 * MIB));
    // No kept jobs to compare it with: nothing shows it is unlike the others.
    assert!(run(cfg.clone(), false, 5_000, 10 * MIB));
    // Switched off.
    assert!(run(TailguardConfig { io_guard_bytes_per_s: None, ..cfg }, true, 5_000, 10 * MIB));
}

/// Job 1 (10 ticks, 41 ms of non-stall time: the fastest), then job 2 of `second_job_ticks`
/// ticks with `second_job_stall_us` of stall a tick; then how much job 3's first interval,
/// whose 1 ms of stall is below the target, lowers the limit, and the floor.
fn lowered_after(cfg: TailguardConfig, second_job_ticks: usize, second_job_stall_us: u64) -> (u64, u64, u64) {
    let (mut c, mut f) = setup(TailguardConfig { drop_certain_misses: false, ..cfg });
    run_job(&mut c, &mut f, 1, 0, &[1_000; 10], true);
    let second_start = c.limit_bytes(0).unwrap();
    run_job(&mut c, &mut f, 2, 100 * MS, &vec![second_job_stall_us; second_job_ticks], true);
    let before = c.limit_bytes(0).unwrap();
    run_job(&mut c, &mut f, 3, 200 * MS, &[1_000], false);
    (before - c.limit_bytes(0).unwrap(), c.trim_floor_bytes(0), second_start)
}

#[test]
fn a_stalled_job_slowed_past_the_margin_sets_the_lowest_limit_to_the_one_it_started_with() {
    let cfg = TailguardConfig::default();
    assert_eq!(cfg.trim_cost_pct, Some(25));
    // 12 ticks with 1 ms stall: 49 ms, within 25 % of 41 ms (51.25 ms): no floor, lowered.
    let (lowered, floor, _) = lowered_after(cfg.clone(), 12, 1_000);
    assert!(lowered > 0);
    assert_eq!(floor, 0);
    // 14 ticks: 57 ms, past the margin: the floor is job 2's starting limit, above the limit
    // job 2 left, which is then not lowered at all.
    let (lowered, floor, second_start) = lowered_after(cfg.clone(), 14, 1_000);
    assert_eq!((lowered, floor), (0, second_start));
    // A slow job that never stalled was not reached by the trim: no floor.
    let (lowered, floor, _) = lowered_after(cfg.clone(), 14, 0);
    assert!(lowered > 0);
    assert_eq!(floor, 0);
    // Nor one slowed by waiting for a CPU: 14 ticks with 1 ms of stall and 1 ms of CPU wait
    // each are 57 ms of non-stall time but 44 ms of CPU time.
    let (mut c, mut f) = setup(TailguardConfig { drop_certain_misses: false, ..cfg.clone() });
    run_job(&mut c, &mut f, 1, 0, &[1_000; 10], true);
    f.release(0, 2, 100 * MS, 200 * MS);
    f.tick(&mut c, 100 * MS);
    for k in 1..=14 {
        f.stall(0, 1_000, 0);
        f.groups[0].stall.cpu_some_us += 1_000;
        if k == 14 {
            f.complete(0, 2, 100 * MS + k * 5 * MS);
        }
        f.tick(&mut c, 100 * MS + k * 5 * MS);
    }
    assert_eq!(c.trim_floor_bytes(0), 0);
    // Without the rule the costly trim goes on.
    let (lowered, floor, _) = lowered_after(TailguardConfig { trim_cost_pct: None, ..cfg }, 14, 1_000);
    assert!(lowered > 0);
    assert_eq!(floor, 0);
}

#[test]
fn the_floor_is_set_as_soon_as_the_running_job_has_used_too_much_cpu() {
    let (mut c, mut f) = setup(TailguardConfig { drop_certain_misses: false, ..TailguardConfig::default() });
    run_job(&mut c, &mut f, 1, 0, &[1_000; 10], true);
    let start = c.limit_bytes(0).unwrap();
    f.release(0, 2, 100 * MS, 200 * MS);
    f.tick(&mut c, 100 * MS);
    let mut limits = vec![];
    for k in 1..=16 {
        f.stall(0, 1_000, 0);
        f.tick(&mut c, 100 * MS + k * 5 * MS);
        limits.push(c.limit_bytes(0).unwrap());
    }
    // 4 ms of CPU a tick: 48 ms after 12 ticks, within 25 % of 41 ms; 52 ms after 13, past
    // it, which that tick's steering does not know yet.
    assert!(limits[12] < limits[11], "lowered through tick 13");
    assert_eq!(c.trim_floor_bytes(0), start, "set before the job ends");
    assert!(limits[13..].iter().all(|&l| l == limits[12]), "not lowered after tick 13: {limits:?}");
}

#[test]
fn the_floor_stops_lowering_at_it_and_never_stops_a_raise() {
    let (mut c, mut f) = setup(TailguardConfig { drop_certain_misses: false, ..TailguardConfig::default() });
    run_job(&mut c, &mut f, 1, 0, &[1_000; 10], true);
    run_job(&mut c, &mut f, 2, 100 * MS, &[1_000; 14], true);
    let floor = c.trim_floor_bytes(0);
    // A job stalling above its target raises the limit past the floor.
    let mut stalls = vec![5_000; 12];
    stalls.push(0);
    run_job(&mut c, &mut f, 3, 200 * MS, &stalls, true);
    assert!(c.limit_bytes(0).unwrap() > floor, "{} ≤ {floor}", c.limit_bytes(0).unwrap());
    // Jobs stalling below it lower it back to the floor and no lower.
    for job in 4..=12 {
        run_job(&mut c, &mut f, job, (job - 1) * 100 * MS, &[0; 10], true);
    }
    assert_eq!(c.limit_bytes(0), Some(floor));
}

#[test]
fn the_fastest_job_is_never_forgotten_so_a_costly_limit_is_not_lowered_by_the_margin_again() {
    let (mut c, mut f) = setup(TailguardConfig { drop_certain_misses: false, cost_window_jobs: 4, ..TailguardConfig::default() });
    run_job(&mut c, &mut f, 1, 0, &[1_000; 10], true);
    // Five jobs of 49 ms: the window of four no longer holds the 41 ms job, but the margin is
    // still 25 % over 41 ms, and a 57 ms job sets the floor.
    for job in 2..=6 {
        run_job(&mut c, &mut f, job, (job - 1) * 100 * MS, &[1_000; 12], true);
    }
    assert_eq!(c.trim_floor_bytes(0), 0);
    let seventh_start = c.limit_bytes(0).unwrap();
    run_job(&mut c, &mut f, 7, 600 * MS, &[1_000; 14], true);
    assert_eq!(c.trim_floor_bytes(0), seventh_start);
}

#[test]
fn a_job_that_ran_past_its_cost_is_steered_as_needing_at_least_what_it_ran() {
    let (mut c, mut f) = setup(TailguardConfig { drop_certain_misses: false, ..TailguardConfig::default() });
    f.release(0, 1, 0, 100 * MS);
    f.tick(&mut c, 0);
    let mut limits = vec![c.limit_bytes(0).unwrap()];
    for k in 1..=16 {
        f.stall(0, 1_000, 0);
        f.tick(&mut c, k * 5 * MS);
        limits.push(c.limit_bytes(0).unwrap());
    }
    // At 80 ms: 16 ms of stall, 64 ms of non-stall time, past the 50 ms BCET. Stall budget
    // 100 − 64 − 15 = 21 ms over the 5 intervals to 100 ms: 1 MiB · (1·5 − 21)/(5·5) =
    // −671088.64. At the BCET the budget would be 35 ms: −1258291 bytes.
    assert_eq!(limits[15] - limits[16], 671_088);
}
