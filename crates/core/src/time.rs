//! Simulated time: integer nanoseconds in a newtype, so units can never be mixed up.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::ops::{Add, AddAssign, Sub, SubAssign};

/// A point in simulated time or a duration, in nanoseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Nanos(pub u64);

impl Nanos {
    pub const ZERO: Nanos = Nanos(0);
    pub const MAX: Nanos = Nanos(u64::MAX);

    pub const fn from_us(us: u64) -> Nanos {
        Nanos(us * 1_000)
    }
    pub const fn from_ms(ms: u64) -> Nanos {
        Nanos(ms * 1_000_000)
    }
    pub const fn from_secs(s: u64) -> Nanos {
        Nanos(s * 1_000_000_000)
    }
    /// Converts decimal milliseconds (as written in scenario files), rounding to the nearest ns.
    /// Returns `None` for negative, non-finite or out-of-range values.
    pub fn try_from_ms_f64(ms: f64) -> Option<Nanos> {
        if !ms.is_finite() || ms < 0.0 {
            return None;
        }
        let ns = (ms * 1e6).round();
        if ns >= u64::MAX as f64 / 4.0 {
            return None;
        }
        Some(Nanos(ns as u64))
    }
    pub fn as_ms_f64(self) -> f64 {
        self.0 as f64 / 1e6
    }
    pub fn as_us(self) -> u64 {
        self.0 / 1_000
    }
    pub const fn as_ns(self) -> u64 {
        self.0
    }
    pub fn saturating_sub(self, other: Nanos) -> Nanos {
        Nanos(self.0.saturating_sub(other.0))
    }
}

impl Add for Nanos {
    type Output = Nanos;
    #[inline]
    fn add(self, rhs: Nanos) -> Nanos {
        Nanos(self.0 + rhs.0)
    }
}
impl AddAssign for Nanos {
    #[inline]
    fn add_assign(&mut self, rhs: Nanos) {
        self.0 += rhs.0;
    }
}
impl Sub for Nanos {
    type Output = Nanos;
    #[inline]
    fn sub(self, rhs: Nanos) -> Nanos {
        Nanos(self.0 - rhs.0)
    }
}
impl SubAssign for Nanos {
    #[inline]
    fn sub_assign(&mut self, rhs: Nanos) {
        self.0 -= rhs.0;
    }
}

impl fmt::Display for Nanos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}ms", self.as_ms_f64())
    }
}

/// Greatest common divisor, for hyperperiods.
pub fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        let t = a % b;
        a = b;
        b = t;
    }
    a
}

/// Least common multiple of all values, or `None` on overflow.
pub fn lcm_all(values: impl IntoIterator<Item = u64>) -> Option<u64> {
    let mut acc: u64 = 1;
    for v in values {
        if v == 0 {
            return None;
        }
        acc = (acc / gcd(acc, v)).checked_mul(v)?;
    }
    Some(acc)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimal_milliseconds_round_to_nanoseconds() {
        assert_eq!(Nanos::try_from_ms_f64(0.1), Some(Nanos(100_000)));
        assert_eq!(Nanos::try_from_ms_f64(1.5), Some(Nanos(1_500_000)));
        assert_eq!(Nanos::try_from_ms_f64(-1.0), None);
        assert_eq!(Nanos::try_from_ms_f64(f64::NAN), None);
        assert_eq!(Nanos::try_from_ms_f64(1e30), None);
    }

    #[test]
    fn hyperperiod_of_textbook_set() {
        assert_eq!(lcm_all([4, 5, 9, 18]), Some(180));
        assert_eq!(lcm_all([u64::MAX, u64::MAX - 1]), None);
    }
}
