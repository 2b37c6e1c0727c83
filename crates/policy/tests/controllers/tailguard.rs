//! Tailguard: its guard band, its learned job cost and its rescue, on the toy plant and on
//! hand-built observation sequences.

use super::plant::{Plant, PLANT_BCET, PLANT_L, PLANT_PERIOD};
use super::*;

fn tailguard(cfg: TailguardConfig) -> Tailguard {
    Tailguard::new(cfg).unwrap()
}

fn responses(plant: &Plant, after_job: u64) -> Vec<(u64, u64, bool)> {
    plant.finished.iter().filter(|j| j.0 > after_job).map(|&(job, release, end, dropped)| (job, end - release, dropped)).collect()
}

#[test]
fn tailguard_settles_each_job_inside_its_guard_band_on_the_toy_plant() {
    let mut plant = Plant::new();
    let mut c = tailguard(TailguardConfig::default());
    plant.run(&mut c, 40);
    let settled = responses(&plant, 10);
    assert!(settled.len() >= 25, "jobs finished: {}", plant.finished.len());
    // Aimed at 95 % of the deadline; Eq. 1 holds in this plant, so the learned cost is BCET.
    for &(job, response, dropped) in &settled {
        assert!(!dropped, "job {job} dropped");
        assert!(response <= 950 * MS + PLANT_L, "job {job} past its guard band: {response} ns");
        assert!(response >= 900 * MS, "job {job} far inside its band: {response} ns (memory wasted)");
    }
    assert_eq!(c.rescues(0), 0, "steady jobs are never rescued");
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
    // Target finish 95 ms, cost = BCET 50 ms: a stall budget of 45 ms over 19 intervals.
    // Interval 1 with 5 ms of stall: x_up · (5·19 − 45)/(5·19) = 2 MiB · 50/95 = 1103764.2 bytes.
    let (mut c, mut f) = setup(TailguardConfig::default());
    run_job(&mut c, &mut f, 1, 0, &[5_000], false);
    assert_eq!(c.limit_bytes(0), Some(512 * MIB + 1_103_764));
    // With 1 ms of stall: x_down · (1·19 − 45)/95 = −1 MiB · 26/95 = −286978.7 → −286978.
    let (mut c, mut f) = setup(TailguardConfig::default());
    run_job(&mut c, &mut f, 1, 0, &[1_000], false);
    assert_eq!(c.limit_bytes(0), Some(512 * MIB - 286_978));
    assert_eq!(f.groups[1].knobs.max_bytes, Some(512 * MIB + 286_978), "the non-RT group gets the rest");
}

#[test]
fn a_job_projected_past_its_deadline_is_rescued_and_never_dropped() {
    let (mut c, mut f) = setup(TailguardConfig::default());
    // A reference job: 10 ticks with 1 ms of stall each, done at 50 ms. Its completion is seen
    // at the tick that ends its last interval, so its stall counts 9 ms: ρ = 9/50.
    run_job(&mut c, &mut f, 1, 0, &[1_000; 10], true);
    assert_eq!(c.rescues(0), 0);
    // The next job stalls fully and does no work: its 50 ms (BCET) left take 50/(1 − ρ) =
    // 60.98 ms, so from release + 5·k ms it is projected past its deadline from k = 8.
    f.groups[0].usage_bytes = 300 * MIB;
    let actions = run_job(&mut c, &mut f, 2, 100 * MS, &[5_000; 8], false);
    assert_eq!(c.rescues(0), 1);
    assert!(c.running_job(0).unwrap().rescued);
    assert!(drops(&actions).is_empty(), "Tailguard never drops a job");
    // Rescued: the limit is the usage plus the headroom, and follows the usage up.
    f.groups[0].usage_bytes = 600 * MIB;
    f.stall(0, 5_000, 0);
    f.tick(&mut c, 145 * MS);
    assert_eq!(c.limit_bytes(0), Some(616 * MIB));
    assert_eq!(f.groups[1].knobs.max_bytes, Some(1024 * MIB - 616 * MIB));
}

#[test]
fn a_rescue_waits_until_the_projection_passes_rescue_at_pct() {
    let (mut c, mut f) = setup(TailguardConfig::default());
    run_job(&mut c, &mut f, 1, 0, &[1_000; 10], true);
    run_job(&mut c, &mut f, 2, 100 * MS, &[5_000; 7], false);
    assert_eq!(c.rescues(0), 0, "projected at 135 + 60.98 ms: inside the deadline");
    f.stall(0, 5_000, 0);
    f.tick(&mut c, 140 * MS);
    assert_eq!(c.rescues(0), 1, "projected at 140 + 60.98 ms: past it");
    // With rescue_at_pct = 95 the same job is rescued a tick earlier (195.98 > 195 ms).
    let (mut c, mut f) = setup(TailguardConfig { rescue_at_pct: 95, ..TailguardConfig::default() });
    run_job(&mut c, &mut f, 1, 0, &[1_000; 10], true);
    run_job(&mut c, &mut f, 2, 100 * MS, &[5_000; 7], false);
    assert_eq!(c.rescues(0), 1);
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
    assert!(e(TailguardConfig { guard_pct: 100, ..TailguardConfig::default() }).contains("guard_pct"));
    assert!(e(TailguardConfig { step_up_bytes: 0, ..TailguardConfig::default() }).contains("step_up_bytes"));
    assert!(e(TailguardConfig { cost_min_jobs: 20, ..TailguardConfig::default() }).contains("cost_min_jobs"));
    assert!(e(TailguardConfig { rescue_at_pct: 101, ..TailguardConfig::default() }).contains("rescue_at_pct"));
    let err = make_controller("tailguard", json!({"guard": 5})).err().unwrap().to_string();
    assert!(err.contains("unknown field `guard`"), "{err}");
}
