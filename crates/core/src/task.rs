//! Tasks as the engine sees them, after a scenario has been validated.

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
    pub fn is_hard(self) -> bool {
        matches!(self, Criticality::A | Criticality::B)
    }
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
    Uniform { min: Nanos, max: Nanos },
    /// Normal, truncated to `[min, max]` by rejection.
    Normal { mean: Nanos, sd: Nanos, min: Nanos, max: Nanos },
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
                // Rejection keeps the truncated shape; the cap only matters for absurd bounds.
                for _ in 0..64 {
                    let x = dist.sample(rng).round();
                    if x >= min.0 as f64 && x <= max.0 as f64 {
                        return Nanos(x as u64);
                    }
                }
                Nanos(rng.random_range(min.0..=max.0))
            }
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
    /// Explicit priority (lower number = higher priority), if given.
    pub priority: Option<i64>,
    pub criticality: Criticality,
    /// CPU the task is pinned to, for partitioned schedulers.
    pub cpu: Option<usize>,
    pub overrun: OverrunPolicy,
    /// Sorted by `after`, each within the WCET.
    pub suspensions: Vec<Suspension>,
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
        let mut rng = sub_rng(1, "t", 0);
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
    }
}
