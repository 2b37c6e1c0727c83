//! Plain task parameters and exact utilisation arithmetic shared by every test.

use critmem_core::{Nanos, TaskSpec};
use std::cmp::Ordering;

/// What a schedulability test needs to know about one task, in integer nanoseconds.
///
/// Periodic and sporadic tasks are the same here: `period` is the minimum inter-arrival time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TaskParams {
    /// Worst-case demand per job, ns (for a self-suspending task: WCET + total suspension).
    pub wcet: Nanos,
    /// Period or minimum inter-arrival time, ns; must be > 0.
    pub period: Nanos,
    /// Relative deadline, ns; must be > 0.
    pub deadline: Nanos,
}

impl TaskParams {
    pub const fn new(wcet: Nanos, period: Nanos, deadline: Nanos) -> Self {
        TaskParams { wcet, period, deadline }
    }

    /// Implicit deadline (D = T).
    pub const fn implicit(wcet: Nanos, period: Nanos) -> Self {
        TaskParams { wcet, period, deadline: period }
    }

    /// Suspension-oblivious parameters of a scenario task: every self-suspension is counted
    /// as execution. That is sound for all tests here (a suspended job can only give the CPU
    /// away), but only sufficient: a miss found with it is not a proof of a miss.
    pub fn from_spec(spec: &TaskSpec) -> Self {
        TaskParams { wcet: spec.exec.wcet() + spec.suspension_total(), period: spec.period, deadline: spec.deadline }
    }

    /// WCET / period as a float, for reports only (decisions use exact fractions).
    pub fn utilization(&self) -> f64 {
        self.wcet.0 as f64 / self.period.0 as f64
    }

    /// WCET / min(D, T) as a float.
    pub fn density(&self) -> f64 {
        self.wcet.0 as f64 / self.period.0.min(self.deadline.0) as f64
    }
}

/// A non-negative fraction in lowest terms; arithmetic is checked so overflow is reported,
/// never wrapped.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Ratio {
    num: u128,
    den: u128,
}

fn gcd(mut a: u128, mut b: u128) -> u128 {
    while b != 0 {
        let t = a % b;
        a = b;
        b = t;
    }
    a
}

impl Ratio {
    pub(crate) fn new(num: u128, den: u128) -> Ratio {
        assert!(den > 0, "fraction with zero denominator");
        let g = gcd(num, den).max(1);
        Ratio { num: num / g, den: den / g }
    }
    pub(crate) fn int(n: u128) -> Ratio {
        Ratio { num: n, den: 1 }
    }
    pub(crate) fn checked_add(self, o: Ratio) -> Option<Ratio> {
        let g = gcd(self.den, o.den);
        let den = (self.den / g).checked_mul(o.den)?;
        let num = self.num.checked_mul(o.den / g)?.checked_add(o.num.checked_mul(self.den / g)?)?;
        Some(Ratio::new(num, den))
    }
    /// `self - o`, or `None` if negative or on overflow.
    pub(crate) fn checked_sub(self, o: Ratio) -> Option<Ratio> {
        let g = gcd(self.den, o.den);
        let den = (self.den / g).checked_mul(o.den)?;
        let a = self.num.checked_mul(o.den / g)?;
        let b = o.num.checked_mul(self.den / g)?;
        Some(Ratio::new(a.checked_sub(b)?, den))
    }
    pub(crate) fn checked_mul(self, o: Ratio) -> Option<Ratio> {
        let g1 = gcd(self.num, o.den).max(1);
        let g2 = gcd(o.num, self.den).max(1);
        Some(Ratio::new((self.num / g1).checked_mul(o.num / g2)?, (self.den / g2).checked_mul(o.den / g1)?))
    }
    pub(crate) fn checked_div(self, o: Ratio) -> Option<Ratio> {
        if o.num == 0 {
            return None;
        }
        self.checked_mul(Ratio { num: o.den, den: o.num })
    }
    pub(crate) fn ceil(self) -> u128 {
        self.num.div_ceil(self.den)
    }
    pub(crate) fn is_zero(self) -> bool {
        self.num == 0
    }
    pub(crate) fn to_f64(self) -> f64 {
        self.num as f64 / self.den as f64
    }
    /// Exact comparison by continued fractions: never overflows.
    pub(crate) fn cmp_exact(self, o: Ratio) -> Ordering {
        let (mut an, mut ad, mut bn, mut bd) = (self.num, self.den, o.num, o.den);
        let mut flipped = false;
        loop {
            let (qa, qb) = (an / ad, bn / bd);
            if qa != qb {
                let c = qa.cmp(&qb);
                return if flipped { c.reverse() } else { c };
            }
            let (ra, rb) = (an % ad, bn % bd);
            let c = match (ra == 0, rb == 0) {
                (true, true) => return Ordering::Equal,
                (true, false) => Ordering::Less,
                (false, true) => Ordering::Greater,
                (false, false) => {
                    // a = q + ra/ad, b = q + rb/bd: compare ra/ad with rb/bd via their reciprocals.
                    (an, ad, bn, bd) = (ad, ra, bd, rb);
                    flipped = !flipped;
                    continue;
                }
            };
            return if flipped { c.reverse() } else { c };
        }
    }
}

/// Σ wcet/period exactly, or `None` if the common denominator overflows u128.
pub(crate) fn exact_utilization<'a>(tasks: impl IntoIterator<Item = &'a TaskParams>) -> Option<Ratio> {
    tasks.into_iter().try_fold(Ratio::int(0), |acc, t| acc.checked_add(Ratio::new(t.wcet.0.into(), t.period.0.into())))
}

/// Σ wcet/min(D, T) exactly, or `None` on overflow.
pub(crate) fn exact_density<'a>(tasks: impl IntoIterator<Item = &'a TaskParams>) -> Option<Ratio> {
    tasks.into_iter().try_fold(Ratio::int(0), |acc, t| acc.checked_add(Ratio::new(t.wcet.0.into(), t.period.0.min(t.deadline.0).into())))
}

/// Compares an exactly computed value (if available) with `bound`; without the exact value,
/// falls back to the float estimate and refuses to decide when it is within rounding noise.
pub(crate) fn compare(exact: Option<Ratio>, approx: f64, bound: Ratio) -> Option<Ordering> {
    if let Some(x) = exact {
        return Some(x.cmp_exact(bound));
    }
    let b = bound.to_f64();
    let margin = 1e-9 * b.abs().max(1.0);
    if approx < b - margin {
        Some(Ordering::Less)
    } else if approx > b + margin {
        Some(Ordering::Greater)
    } else {
        None
    }
}

/// Exact comparison of Σ wcet/period with an integer (e.g. `U ≤ 1`, `U ≤ m`); `None` only when
/// the exact sum overflows and the float estimate is too close to call.
pub fn utilization_cmp(tasks: &[TaskParams], bound: u64) -> Option<Ordering> {
    let approx: f64 = tasks.iter().map(TaskParams::utilization).sum();
    compare(exact_utilization(tasks), approx, Ratio::int(bound.into()))
}

/// Saturating conversion of an internal u128 time back to [`Nanos`].
pub(crate) fn nanos(x: u128) -> Nanos {
    Nanos(u64::try_from(x).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_comparison_handles_thirds_and_huge_values() {
        let third = Ratio::new(1, 3);
        let one = third.checked_add(third).unwrap().checked_add(third).unwrap();
        assert_eq!(one.cmp_exact(Ratio::int(1)), Ordering::Equal);
        let a = Ratio::new(u128::MAX - 1, u128::MAX);
        let b = Ratio::new(u128::MAX - 2, u128::MAX - 1);
        assert_eq!(a.cmp_exact(b), Ordering::Greater);
        assert_eq!(b.cmp_exact(a), Ordering::Less);
        assert_eq!(Ratio::new(7, 2).ceil(), 4);
        assert!(Ratio::new(1, 3).checked_sub(Ratio::new(1, 2)).is_none());
    }

    #[test]
    fn float_fallback_refuses_to_call_a_tie() {
        assert_eq!(compare(None, 1.0, Ratio::int(1)), None);
        assert_eq!(compare(None, 0.9, Ratio::int(1)), Some(Ordering::Less));
    }
}
