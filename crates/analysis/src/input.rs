//! The error the plain-struct analyses return for inputs they cannot analyse.

use crate::model::TaskParams;
use std::fmt;

/// An input an analysis refuses, as one line: the offending key (a path into the input, e.g.
/// `task[2].section[0].units`) and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InvalidInput {
    pub key: String,
    pub reason: String,
}

impl InvalidInput {
    pub(crate) fn new(key: impl Into<String>, reason: impl Into<String>) -> Self {
        InvalidInput { key: key.into(), reason: reason.into() }
    }
}

impl fmt::Display for InvalidInput {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.key, self.reason)
    }
}

impl std::error::Error for InvalidInput {}

/// Refuses tasks the tests cannot divide by: a zero period or deadline.
pub(crate) fn check_tasks(tasks: &[TaskParams]) -> Result<(), InvalidInput> {
    match tasks.iter().position(|t| t.period.0 == 0 || t.deadline.0 == 0) {
        Some(i) => Err(InvalidInput::new(format!("task[{i}]"), "period and deadline must be positive")),
        None => Ok(()),
    }
}
