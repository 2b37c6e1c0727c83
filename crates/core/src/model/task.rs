//! Tasks as the engine sees them, after a scenario has been validated: timing, criticality,
//! and what each task touches and runs.

use crate::model::memory::TaskMemory;
use crate::rng::SimRng;
use crate::time::Nanos;
use rand::Rng;
use rand_distr::{Distribution, Normal};
use serde::{Deserialize, Serialize};
use std::fmt;

/// Criticality levels as in MC²: A and B are hard real-time, C soft real-time, D best-effort.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Criticality {
    A,
    B,
    C,
    D,
}

impl Criticality {
    pub fn as_str(self) -> &'static str {
        match self {
            Criticality::A => "A",
            Criticality::B => "B",
            Criticality::C => "C",
            Criticality::D => "D",
        }
    }
}

impl fmt::Display for Criticality {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How a task's jobs arrive.
#[derive(Clone, Debug, PartialEq)]
pub enum Arrival {
    /// Exactly every `period` after the offset.
    Periodic,
    /// At least `period` apart; the extra gap is uniform in `[0, max_interarrival - period]`.
    Sporadic { max_interarrival: Nanos },
}

/// Execution demand of one job.
#[derive(Clone, Debug, PartialEq)]
pub enum ExecTime {
    Fixed(Nanos),
    Uniform {
        min: Nanos,
        max: Nanos,
    },
    /// Normal, truncated to `[min, max]` by rejection.
    Normal {
        mean: Nanos,
        sd: Nanos,
        min: Nanos,
        max: Nanos,
    },
    /// Drawn uniformly from observed values.
    Empirical(Vec<Nanos>),
}

impl ExecTime {
    /// The largest demand this distribution can produce (the WCET analysis uses).
    pub fn wcet(&self) -> Nanos {
        match self {
            ExecTime::Fixed(c) => *c,
            ExecTime::Uniform { max, .. } | ExecTime::Normal { max, .. } => *max,
            ExecTime::Empirical(v) => v.iter().copied().max().unwrap_or(Nanos::ZERO),
        }
    }

    /// The smallest demand this distribution can produce.
    pub fn bcet(&self) -> Nanos {
        match self {
            ExecTime::Fixed(c) => *c,
            ExecTime::Uniform { min, .. } | ExecTime::Normal { min, .. } => *min,
            ExecTime::Empirical(v) => v.iter().copied().min().unwrap_or(Nanos::ZERO),
        }
    }

    pub fn sample(&self, rng: &mut SimRng) -> Nanos {
        match self {
            ExecTime::Fixed(c) => *c,
            ExecTime::Uniform { min, max } => Nanos(rng.random_range(min.0..=max.0)),
            ExecTime::Normal { mean, sd, min, max } => {
                if sd.0 == 0 {
                    return Nanos(mean.0.clamp(min.0, max.0));
                }
                let dist = Normal::new(mean.0 as f64, sd.0 as f64).expect("sd validated finite");
                // Rejection keeps the truncated shape. With the mean inside [min, max] (the
                // loader checks it), 64 misses in a row have a chance above 1 % only when
                // [min, max] holds under 7 % of the mass, i.e. is narrower than 0.18 sd, where
                // the density is flat to within 2 %: uniform is then nearly the same distribution.
                for _ in 0..64 {
                    let x = dist.sample(rng).round();
                    if x >= min.0 as f64 && x <= max.0 as f64 {
                        return Nanos(x as u64);
                    }
                }
                Nanos(rng.random_range(min.0..=max.0))
            }
            // An empty list (possible only when built in code) demands nothing, as its WCET says.
            ExecTime::Empirical(v) if v.is_empty() => Nanos::ZERO,
            ExecTime::Empirical(v) => v[rng.random_range(0..v.len())],
        }
    }

    pub fn is_random(&self) -> bool {
        !matches!(self, ExecTime::Fixed(_))
    }
}

/// What happens when a job is still unfinished.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OverrunPolicy {
    /// Keep running; later jobs of the task queue behind it.
    Continue,
    /// Abort the job at its deadline.
    Abort,
    /// Keep running, but drop any release that arrives while it is unfinished.
    Skip,
}

/// A self-suspension: after `after` of execution the job sleeps for `duration`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Suspension {
    pub after: Nanos,
    pub duration: Nanos,
}

/// A validated task.
#[derive(Clone, Debug, PartialEq)]
pub struct TaskSpec {
    pub name: String,
    pub arrival: Arrival,
    pub exec: ExecTime,
    /// Period, or minimum inter-arrival time for sporadic tasks.
    pub period: Nanos,
    /// Relative deadline.
    pub deadline: Nanos,
    pub offset: Nanos,
    /// No job is released at or after this time (`None`: releases go on to the horizon).
    pub stop: Option<Nanos>,
    /// Explicit priority (lower number = higher priority), if given.
    pub priority: Option<i64>,
    pub criticality: Criticality,
    /// CPU the task is pinned to, for partitioned schedulers.
    pub cpu: Option<usize>,
    pub overrun: OverrunPolicy,
    /// Sorted by `after`, each within the WCET.
    pub suspensions: Vec<Suspension>,
    /// What the task's jobs touch, when the scenario has page-level memory (`[memory]`).
    pub memory: Option<TaskMemory>,
    /// What the task runs on the Linux platform in place of a shipped worker; the simulator
    /// ignores it and simulates the task's declared behaviour.
    pub command: Option<TaskCommand>,
    /// Compute, lock and unlock actions each job runs in order, when the task has a program
    /// (its `exec` is then fixed at the program's total compute).
    pub program: Option<crate::model::program::TaskProgram>,
}

/// An arbitrary program run as a task's workload on the Linux platform.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TaskCommand {
    /// Program and arguments, executed directly (no shell); a program without a `/` is looked
    /// up on `PATH`.
    pub argv: Vec<String>,
    /// Whether the program reports its jobs over the job socket (`CRITMEM_JOB_SOCKET`).
    pub reports_jobs: bool,
}

impl TaskSpec {
    /// Worst-case utilisation, WCET / period.
    pub fn utilization(&self) -> f64 {
        self.exec.wcet().0 as f64 / self.period.0 as f64
    }
    /// Total self-suspension per job.
    pub fn suspension_total(&self) -> Nanos {
        self.suspensions.iter().fold(Nanos::ZERO, |acc, s| acc + s.duration)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::sub_rng;

    #[test]
    fn samples_stay_within_bounds() {
        let seed = 1;
        eprintln!("seed {seed}");
        let mut rng = sub_rng(seed, "t", 0);
        let n = ExecTime::Normal { mean: Nanos(100), sd: Nanos(50), min: Nanos(80), max: Nanos(130) };
        let u = ExecTime::Uniform { min: Nanos(5), max: Nanos(9) };
        let e = ExecTime::Empirical(vec![Nanos(3), Nanos(11)]);
        for _ in 0..2000 {
            let x = n.sample(&mut rng);
            assert!((80..=130).contains(&x.0));
            let y = u.sample(&mut rng);
            assert!((5..=9).contains(&y.0));
            let z = e.sample(&mut rng);
            assert!(z.0 == 3 || z.0 == 11);
        }
        assert_eq!(n.wcet(), Nanos(130));
        assert_eq!(e.wcet(), Nanos(11));
        assert_eq!(e.bcet(), Nanos(3));
        // Built in code without values: no demand, where indexing the empty list panicked.
        let empty = ExecTime::Empirical(vec![]);
        assert_eq!((empty.sample(&mut rng), empty.wcet(), empty.bcet()), (Nanos::ZERO, Nanos::ZERO, Nanos::ZERO));
    }

    // Statistical checks of `sample`: a fixed seed keeps them deterministic; tolerances come
    // from each distribution's theory (about 5 standard errors), not from observed output.
    const SEED: u64 = 20_251_124;
    const DRAWS: usize = 10_000;

    /// `DRAWS` demands in ns from the stream the engine would give task `index`.
    fn draws_ns(exec: &ExecTime, index: u64) -> Vec<u64> {
        eprintln!("seed {SEED}, task stream {index}, {DRAWS} draws of {exec:?}");
        let mut rng = sub_rng(SEED, "task", index);
        (0..DRAWS).map(|_| exec.sample(&mut rng).0).collect()
    }

    fn mean(xs: &[u64]) -> f64 {
        xs.iter().map(|&x| x as f64).sum::<f64>() / xs.len() as f64
    }

    fn sample_sd(xs: &[u64]) -> f64 {
        let m = mean(xs);
        (xs.iter().map(|&x| (x as f64 - m).powi(2)).sum::<f64>() / (xs.len() - 1) as f64).sqrt()
    }

    /// Pearson's statistic of `counts` against expected probabilities `probs`.
    fn chi_square(counts: &[u64], probs: &[f64]) -> f64 {
        let n = counts.iter().sum::<u64>() as f64;
        counts.iter().zip(probs).map(|(&c, &p)| (c as f64 - n * p).powi(2) / (n * p)).sum()
    }

    /// Chi-square quantile for `df` degrees of freedom about 5 standard normal deviations out
    /// (upper tail ≈ 3e-7), by the Wilson–Hilferty approximation.
    fn chi_square_bound(df: usize) -> f64 {
        let a = 2.0 / (9.0 * df as f64);
        df as f64 * (1.0 - a + 5.0 * a.sqrt()).powi(3)
    }

    #[test]
    fn uniform_draws_centre_on_the_midpoint_and_reach_both_ends() {
        let (min_ns, max_ns) = (Nanos::from_ms(10).0, Nanos::from_ms(30).0);
        let xs = draws_ns(&ExecTime::Uniform { min: Nanos(min_ns), max: Nanos(max_ns) }, 0);
        let span_ns = (max_ns - min_ns) as f64;
        assert!(xs.iter().all(|x| (min_ns..=max_ns).contains(x)));
        // Uniform sd is span/√12.
        let tol_ns = 5.0 * span_ns / (12.0 * DRAWS as f64).sqrt();
        let mid_ns = (min_ns + max_ns) as f64 / 2.0;
        assert!((mean(&xs) - mid_ns).abs() <= tol_ns, "mean {} ns, expected {mid_ns} ± {tol_ns}", mean(&xs));
        // P(no draw in the lowest 1 %) = 0.99^10 000 ≈ 2e-44, likewise at the top.
        let (lo, hi) = (*xs.iter().min().unwrap(), *xs.iter().max().unwrap());
        assert!((lo - min_ns) as f64 <= span_ns / 100.0, "smallest draw {lo} ns is far from min {min_ns}");
        assert!((max_ns - hi) as f64 <= span_ns / 100.0, "largest draw {hi} ns is far from max {max_ns}");
        // Flat across ten equal bins, not just right on average.
        let mut bins = [0u64; 10];
        for &x in &xs {
            bins[(((x - min_ns) as f64 / span_ns * 10.0) as usize).min(9)] += 1;
        }
        let chi2 = chi_square(&bins, &[0.1; 10]);
        assert!(chi2 <= chi_square_bound(9), "bins {bins:?}: chi-square {chi2} > {}", chi_square_bound(9));
    }

    #[test]
    fn uniform_includes_both_ends_of_a_small_range_equally() {
        let xs = draws_ns(&ExecTime::Uniform { min: Nanos(5), max: Nanos(9) }, 1);
        let mut counts = [0u64; 5];
        for &x in &xs {
            counts[(x - 5) as usize] += 1;
        }
        assert!(counts.iter().all(|&c| c > 0), "every value in 5..=9 appears: {counts:?}");
        let chi2 = chi_square(&counts, &[0.2; 5]);
        assert!(chi2 <= chi_square_bound(4), "counts {counts:?}: chi-square {chi2} > {}", chi_square_bound(4));
    }

    #[test]
    fn normal_with_negligible_truncation_has_the_configured_mean_and_sd() {
        // Bounds 10 sd either side: truncation removes ~1e-23 of the mass.
        let (mean_ns, sd_ns) = (Nanos::from_ms(20).0, Nanos::from_ms(2).0);
        let exec = ExecTime::Normal { mean: Nanos(mean_ns), sd: Nanos(sd_ns), min: Nanos::ZERO, max: Nanos::from_ms(40) };
        let xs = draws_ns(&exec, 2);
        assert!(xs.iter().all(|&x| x <= Nanos::from_ms(40).0));
        let n = DRAWS as f64;
        let mean_tol_ns = 5.0 * sd_ns as f64 / n.sqrt();
        assert!((mean(&xs) - mean_ns as f64).abs() <= mean_tol_ns, "mean {} ns, expected {mean_ns} ± {mean_tol_ns}", mean(&xs));
        // Standard error of a normal sample's sd is σ/√(2(n−1)).
        let sd_tol_ns = 5.0 * sd_ns as f64 / (2.0 * (n - 1.0)).sqrt();
        let sd = sample_sd(&xs);
        assert!((sd - sd_ns as f64).abs() <= sd_tol_ns, "sd {sd} ns, expected {sd_ns} ± {sd_tol_ns}");
    }

    #[test]
    fn normal_truncation_rejects_out_of_range_draws_rather_than_clamping_them() {
        // Bounds cut off ~62 % of the mass (−0.4 sd to +0.6 sd). Rejection of the rounded draw
        // gives each k in [80, 130] probability ∝ the density over [k − ½, k + ½]; clamping
        // would instead pile ~35 % on 80 and ~28 % on 130.
        let (mean_ns, sd_ns, min_ns, max_ns) = (100u64, 50u64, 80u64, 130u64);
        let exec = ExecTime::Normal { mean: Nanos(mean_ns), sd: Nanos(sd_ns), min: Nanos(min_ns), max: Nanos(max_ns) };
        let xs = draws_ns(&exec, 3);
        assert!(xs.iter().all(|x| (min_ns..=max_ns).contains(x)));
        // Midpoint-rule bin masses: relative error ~1/(24 sd²), far below sampling noise.
        let density = |k: u64| (-((k as f64 - mean_ns as f64) / sd_ns as f64).powi(2) / 2.0).exp();
        let total: f64 = (min_ns..=max_ns).map(density).sum();
        let probs: Vec<f64> = (min_ns..=max_ns).map(|k| density(k) / total).collect();
        let mut counts = vec![0u64; probs.len()];
        for &x in &xs {
            counts[(x - min_ns) as usize] += 1;
        }
        let n = DRAWS as f64;
        for (end, i) in [("min", 0), ("max", probs.len() - 1)] {
            let (p, c) = (probs[i], counts[i] as f64);
            let tol = 5.0 * (n * p * (1.0 - p)).sqrt();
            assert!((c - n * p).abs() <= tol, "{c} draws at {end}, expected {} ± {tol} (a point mass means clamping)", n * p);
        }
        let df = probs.len() - 1;
        let chi2 = chi_square(&counts, &probs);
        assert!(chi2 <= chi_square_bound(df), "chi-square {chi2} > {} against the truncated normal", chi_square_bound(df));
        let want_ns: f64 = (min_ns..=max_ns).zip(&probs).map(|(k, p)| k as f64 * p).sum();
        let var: f64 = (min_ns..=max_ns).zip(&probs).map(|(k, p)| (k as f64 - want_ns).powi(2) * p).sum();
        let tol_ns = 5.0 * (var / n).sqrt();
        assert!((mean(&xs) - want_ns).abs() <= tol_ns, "mean {} ns, truncated-normal mean {want_ns} ± {tol_ns}", mean(&xs));
    }

    #[test]
    fn normal_falls_back_to_uniform_within_bounds_when_rejection_keeps_failing() {
        // An 11 ns window under a 1 ms sd: each try lands inside with p ≈ 4e-6, so nearly every
        // draw takes the fallback after 64 tries. The truncated normal is flat there anyway, so
        // every value should appear about equally, none piled on an end.
        let exec = ExecTime::Normal { mean: Nanos(1000), sd: Nanos(1_000_000), min: Nanos(1000), max: Nanos(1010) };
        let xs = draws_ns(&exec, 4);
        let mut counts = [0u64; 11];
        for &x in &xs {
            assert!((1000..=1010).contains(&x), "draw {x} outside [1000, 1010]");
            counts[(x - 1000) as usize] += 1;
        }
        assert!(counts.iter().all(|&c| c > 0), "every value appears: {counts:?}");
        let chi2 = chi_square(&counts, &[1.0 / 11.0; 11]);
        assert!(chi2 <= chi_square_bound(10), "counts {counts:?}: chi-square {chi2} > {}", chi_square_bound(10));
    }

    #[test]
    fn normal_with_zero_sd_always_gives_the_mean() {
        let exec = ExecTime::Normal { mean: Nanos::from_ms(7), sd: Nanos::ZERO, min: Nanos::from_ms(5), max: Nanos::from_ms(9) };
        assert!(draws_ns(&exec, 5).iter().all(|&x| x == Nanos::from_ms(7).0));
    }

    #[test]
    fn empirical_draws_every_value_about_equally_often() {
        // Unsorted, so a draw biased to the first, last or largest entry shows.
        let values_ms = [8u64, 2, 13, 5, 3];
        let exec = ExecTime::Empirical(values_ms.iter().map(|&v| Nanos::from_ms(v)).collect());
        let xs = draws_ns(&exec, 6);
        let counts: Vec<u64> = values_ms.iter().map(|&v| xs.iter().filter(|&&x| x == Nanos::from_ms(v).0).count() as u64).collect();
        assert_eq!(counts.iter().sum::<u64>(), DRAWS as u64, "only listed values are drawn");
        assert!(counts.iter().all(|&c| c > 0), "every value appears: {counts:?}");
        let df = values_ms.len() - 1;
        let chi2 = chi_square(&counts, &[0.2; 5]);
        assert!(chi2 <= chi_square_bound(df), "counts {counts:?}: chi-square {chi2} > {}", chi_square_bound(df));
    }

    #[test]
    fn empirical_weighs_a_repeated_value_by_its_repeats() {
        let exec = ExecTime::Empirical(vec![Nanos(1), Nanos(4), Nanos(1)]);
        let xs = draws_ns(&exec, 7);
        let ones = xs.iter().filter(|&&x| x == 1).count() as f64;
        assert_eq!(xs.iter().filter(|&&x| x == 4).count() as f64 + ones, DRAWS as f64);
        let (n, p) = (DRAWS as f64, 2.0 / 3.0);
        let tol = 5.0 * (n * p * (1.0 - p)).sqrt();
        assert!((ones - n * p).abs() <= tol, "{ones} ones, expected {} ± {tol}", n * p);
    }

    #[test]
    fn fixed_always_gives_its_value() {
        assert!(draws_ns(&ExecTime::Fixed(Nanos::from_ms(3)), 8).iter().all(|&x| x == Nanos::from_ms(3).0));
    }
}
