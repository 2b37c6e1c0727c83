//! Helpers: scenario text from task tuples, loading, simulation, random task sets.

use critmem_core::{load_toml_str, simulate, Nanos, Scenario, SimOptions, SimResult};
use proptest::prelude::*;

/// (wcet_ms, period_ms, deadline_ms) per task.
pub type Task = (f64, f64, f64);

/// Scenario text with tasks named t1, t2, ...; `extra` is appended to each task (e.g. a priority).
pub fn scenario_text(kind: &str, cpus: usize, horizon_ms: Option<f64>, tasks: &[Task]) -> String {
    let mut s = format!("[machine]\ncpus = {cpus}\n[scheduler]\nkind = \"{kind}\"\n");
    if let Some(h) = horizon_ms {
        s += &format!("[run]\nhorizon_ms = {h}\n");
    }
    for (i, (c, t, d)) in tasks.iter().enumerate() {
        s += &format!("[[task]]\nname = \"t{}\"\nwcet_ms = {c}\nperiod_ms = {t}\ndeadline_ms = {d}\n", i + 1);
    }
    s
}

/// `ProptestConfig { cases: n, .. }`, unless `PROPTEST_CASES` asks for another count.
pub fn cases(n: u32) -> ProptestConfig {
    let n = std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(n);
    ProptestConfig { cases: n, ..ProptestConfig::default() }
}

pub fn load(text: &str) -> Scenario {
    load_toml_str(text, "test.toml").unwrap_or_else(|e| panic!("{e}\n{text}"))
}

pub fn run(s: &Scenario, record_jobs: bool) -> SimResult {
    simulate(s, SimOptions { record_jobs, record_segments: false, check_invariants: true })
}

pub fn ms(x: f64) -> Nanos {
    Nanos::try_from_ms_f64(x).expect("valid ms")
}

/// Hyperperiod in ms of integer-ms periods.
pub fn hyperperiod_ms(tasks: &[Task]) -> f64 {
    critmem_core::time::lcm_all(tasks.iter().map(|t| t.1 as u64)).expect("small periods") as f64
}

/// Divisors of 360 ms, so every hyperperiod is at most 360 ms.
pub const PERIODS_MS: [u32; 12] = [10, 12, 15, 20, 24, 30, 40, 45, 60, 72, 90, 120];

/// `n` implicit-deadline tasks with periods from `periods` and integer-or-half ms WCETs whose
/// utilisations add up to roughly `u_total` (each WCET at least 0.5 ms and at most its period).
pub fn task_set(
    n: std::ops::RangeInclusive<usize>,
    periods: &'static [u32],
    u_permille: std::ops::RangeInclusive<u32>,
) -> impl Strategy<Value = Vec<Task>> {
    (prop::collection::vec((0..periods.len(), 1u32..=100), n), u_permille).prop_map(move |(raw, u)| {
        let weight: u32 = raw.iter().map(|(_, w)| w).sum();
        raw.iter()
            .map(|&(pi, w)| {
                let t = f64::from(periods[pi]);
                let share = f64::from(u) / 1000.0 * f64::from(w) / f64::from(weight);
                let halves = (2.0 * share * t).round().clamp(1.0, 2.0 * t);
                (halves / 2.0, t, t)
            })
            .collect()
    })
}

pub fn utilization(tasks: &[Task]) -> f64 {
    tasks.iter().map(|(c, t, _)| c / t).sum()
}

/// Σ C/T ≤ 1 exactly, for half-ms WCETs and periods dividing 360 ms.
pub fn u_at_most_one(set: &[Task]) -> bool {
    set.iter().map(|(c, t, _)| (c * 2.0) as u64 * (720 / (2 * *t as u64))).sum::<u64>() <= 720
}
