//! Load errors, and the checks of times every section shares: each problem is one line naming
//! the file, the key and the reason.

use crate::time::Nanos;
use std::fmt;

/// A scenario that could not be loaded; `Display` is the one-line message for users.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub struct ScenarioError {
    /// The file (or `<string>`) the scenario came from.
    pub source_name: String,
    /// The offending key, e.g. `task[1].deadline_ms`, or a location such as `line 3, column 7`.
    pub key: String,
    pub reason: String,
}

impl fmt::Display for ScenarioError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.key.is_empty() {
            write!(f, "{}: {}", self.source_name, self.reason)
        } else {
            write!(f, "{}: {}: {}", self.source_name, self.key, self.reason)
        }
    }
}

pub(super) fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// What every check needs to make its error: the scenario's source.
pub(super) struct Ctx<'a> {
    pub(super) source_name: &'a str,
}

impl Ctx<'_> {
    pub(super) fn err(&self, key: impl Into<String>, reason: impl Into<String>) -> ScenarioError {
        ScenarioError { source_name: self.source_name.to_string(), key: key.into(), reason: reason.into() }
    }

    /// A non-negative time in ms.
    pub(super) fn time(&self, key: &str, ms: f64) -> Result<Nanos, ScenarioError> {
        if !ms.is_finite() {
            return Err(self.err(key, "must be a finite number of milliseconds"));
        }
        if ms < 0.0 {
            return Err(self.err(key, format!("must not be negative (got {ms})")));
        }
        Nanos::try_from_ms_f64(ms).ok_or_else(|| self.err(key, format!("is too large (got {ms})")))
    }

    /// A strictly positive time in ms.
    pub(super) fn positive(&self, key: &str, ms: f64) -> Result<Nanos, ScenarioError> {
        let t = self.time(key, ms)?;
        if t == Nanos::ZERO {
            let reason = if ms > 0.0 {
                format!("must be at least 1 ns, the simulator's resolution (got {ms} ms)")
            } else {
                format!("must be greater than 0 (got {ms})")
            };
            return Err(self.err(key, reason));
        }
        Ok(t)
    }
}
