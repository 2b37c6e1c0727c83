//! Pure helpers for the profiling runs the platform performs: BCET and the Fig. 7 fit of
//! execution time against stall per period (the experimental basis of Eq. 1,
//! `t_exec ≈ s_period + t_BCET`).

use crate::PolicyError;

/// One profiled soft real-time job.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct JobProfile {
    /// `t_exec`: from the job's start to its completion (the wait behind an overrunning
    /// predecessor excluded).
    pub exec_ns: u64,
    /// `s_period` (Eq. 2): the sum of the job's per-interval stalls `s_intv` (Eq. 3).
    pub stall_ns: u64,
}

/// Least-squares line `exec = slope · stall + intercept`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LinearFit {
    /// `A` of Fig. 7 (dimensionless; the paper finds ≈ 1).
    pub slope: f64,
    /// `B` of Fig. 7 (the paper finds ≈ BCET).
    pub intercept_ns: f64,
    /// Coefficient of determination (1 when every point is on the line).
    pub r_squared: f64,
    pub samples: usize,
}

/// Fits Fig. 7's line through `(s_period, t_exec)` points by ordinary least squares.
pub fn fit_exec_vs_stall(samples: &[JobProfile]) -> Result<LinearFit, PolicyError> {
    if samples.len() < 2 {
        return Err(PolicyError::TooFewSamples { what: "fit_exec_vs_stall", needed: 2, got: samples.len() });
    }
    let n = samples.len() as f64;
    let mean_x = samples.iter().map(|s| s.stall_ns as f64).sum::<f64>() / n;
    let mean_y = samples.iter().map(|s| s.exec_ns as f64).sum::<f64>() / n;
    let (mut sxx, mut sxy, mut syy) = (0.0, 0.0, 0.0);
    for s in samples {
        let dx = s.stall_ns as f64 - mean_x;
        let dy = s.exec_ns as f64 - mean_y;
        sxx += dx * dx;
        sxy += dx * dy;
        syy += dy * dy;
    }
    if sxx == 0.0 {
        return Err(PolicyError::BadInput {
            what: "fit_exec_vs_stall",
            message: "every job stalled the same; profile under a tighter limit so stall varies".into(),
        });
    }
    let slope = sxy / sxx;
    let r_squared = if syy == 0.0 { 1.0 } else { (sxy * sxy) / (sxx * syy) };
    Ok(LinearFit { slope, intercept_ns: mean_y - slope * mean_x, r_squared, samples: samples.len() })
}

/// BCET estimate: the smallest `t_exec − s_period` over the profiled jobs. With unlimited
/// memory the stall is ≈ 0 and this is the plain best case; subtracting the stall (Eq. 1) makes
/// runs under a constrained limit usable too.
pub fn estimate_bcet_ns(samples: &[JobProfile]) -> Result<u64, PolicyError> {
    samples.iter().map(|s| s.exec_ns.saturating_sub(s.stall_ns)).min().ok_or(PolicyError::TooFewSamples {
        what: "estimate_bcet_ns",
        needed: 1,
        got: 0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fit_recovers_an_exact_line() {
        // exec = 1.0 · stall + 480 ms, the paper's Sphinx numbers.
        let pts: Vec<JobProfile> =
            [0u64, 100, 250, 400].iter().map(|ms| JobProfile { stall_ns: ms * 1_000_000, exec_ns: ms * 1_000_000 + 480_000_000 }).collect();
        let fit = fit_exec_vs_stall(&pts).unwrap();
        assert!((fit.slope - 1.0).abs() < 1e-12);
        assert!((fit.intercept_ns - 480e6).abs() < 1e-3);
        assert!((fit.r_squared - 1.0).abs() < 1e-12);
    }

    #[test]
    fn fit_rejects_too_few_or_degenerate_points() {
        let one = [JobProfile { exec_ns: 1, stall_ns: 0 }];
        assert!(matches!(fit_exec_vs_stall(&one), Err(PolicyError::TooFewSamples { .. })));
        let flat = [JobProfile { exec_ns: 1, stall_ns: 5 }, JobProfile { exec_ns: 2, stall_ns: 5 }];
        assert!(matches!(fit_exec_vs_stall(&flat), Err(PolicyError::BadInput { .. })));
    }

    #[test]
    fn bcet_is_the_smallest_stall_free_execution() {
        let pts = [
            JobProfile { exec_ns: 600, stall_ns: 100 },
            JobProfile { exec_ns: 520, stall_ns: 30 },
            JobProfile { exec_ns: 700, stall_ns: 250 },
        ];
        assert_eq!(estimate_bcet_ns(&pts).unwrap(), 450);
        assert!(estimate_bcet_ns(&[]).is_err());
    }
}
