//! Random execution demands end to end: a periodic task's demands come from its `exec`
//! distribution through the loader and engine, vary with the seed, and leave arrivals alone.

use critmem_core::{load_toml_str, simulate, JobRecord, Nanos, Outcome, SimOptions};

const HORIZON_MS: u64 = 5000;
const PERIOD_MS: u64 = 50;

/// The records of one run of a single periodic task with uniform demand in [10, 30] ms.
fn periodic_uniform_jobs(seed: u64) -> Vec<JobRecord> {
    eprintln!("seed {seed}");
    let text = format!(
        "[machine]\ncpus = 1\n[scheduler]\nkind = \"rm\"\n[run]\nhorizon_ms = {HORIZON_MS}\nseed = {seed}\n\
         [[task]]\nname = \"periodic\"\nperiod_ms = {PERIOD_MS}\nexec = {{ dist = \"uniform\", min_ms = 10, max_ms = 30 }}\n"
    );
    let s = load_toml_str(&text, "distributions.toml").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(s.seed, seed);
    let r = simulate(&s, SimOptions { record_jobs: true, check_invariants: true, ..SimOptions::default() });
    assert_eq!(r.jobs.len() as u64, HORIZON_MS / PERIOD_MS, "one job per period");
    r.jobs
}

fn demands_ns(jobs: &[JobRecord]) -> Vec<u64> {
    jobs.iter().map(|j| j.demand.0).collect()
}

#[test]
fn periodic_uniform_demands_vary_across_jobs_within_the_range() {
    let jobs = periodic_uniform_jobs(11);
    let d = demands_ns(&jobs);
    let (min_ns, max_ns) = (Nanos::from_ms(10).0, Nanos::from_ms(30).0);
    assert!(d.iter().all(|x| (min_ns..=max_ns).contains(x)), "demands outside [10, 30] ms: {d:?}");
    // 100 draws from 20 000 001 values: a repeat has probability ≈ 2.5e-4.
    let mut distinct = d.clone();
    distinct.sort_unstable();
    distinct.dedup();
    assert!(distinct.len() >= d.len() * 9 / 10, "only {} distinct demands among {}", distinct.len(), d.len());
    // Mean within 5 standard errors (uniform sd = 20 ms/√12); both quarters of the range
    // reached (missing one has probability 0.75^100 ≈ 3e-13).
    let n = d.len() as f64;
    let mean_ms = d.iter().map(|&x| x as f64).sum::<f64>() / n / 1e6;
    let tol_ms = 5.0 * 20.0 / (12.0 * n).sqrt();
    assert!((mean_ms - 20.0).abs() <= tol_ms, "mean demand {mean_ms} ms, expected 20 ± {tol_ms}");
    assert!(*d.iter().min().unwrap() < Nanos::from_ms(15).0 && *d.iter().max().unwrap() > Nanos::from_ms(25).0, "{d:?}");
    // The demand drawn is the work done: alone on the CPU, each job finishes within 30 ms of
    // its release, so all do before the horizon.
    for j in &jobs {
        assert_eq!((j.outcome, j.executed), (Outcome::Completed, j.demand), "job {}", j.index);
    }
}

#[test]
fn a_different_seed_changes_periodic_demands_but_not_releases() {
    let (a, b) = (periodic_uniform_jobs(11), periodic_uniform_jobs(12));
    let releases = |jobs: &[JobRecord]| jobs.iter().map(|j| (j.index, j.release, j.abs_deadline)).collect::<Vec<_>>();
    assert_eq!(releases(&a), releases(&b), "periodic arrivals must not depend on the seed");
    assert!(a.iter().enumerate().all(|(i, j)| j.release == Nanos::from_ms(PERIOD_MS * i as u64)));
    // Equal demands at one position have probability 1/20 000 001 per job.
    let (da, db) = (demands_ns(&a), demands_ns(&b));
    let differing = da.iter().zip(&db).filter(|(x, y)| x != y).count();
    assert!(differing >= da.len() * 9 / 10, "only {differing} of {} demands differ between seeds 11 and 12", da.len());
}

#[test]
fn the_same_seed_gives_identical_demands() {
    let (a, b) = (periodic_uniform_jobs(11), periodic_uniform_jobs(11));
    assert_eq!(demands_ns(&a), demands_ns(&b));
    assert_eq!(a, b);
}
