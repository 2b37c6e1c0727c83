//! The crate's one error type. Every message is one line and says what to change.

use thiserror::Error;

#[derive(Debug, Error, Clone, PartialEq)]
pub enum PolicyError {
    #[error("unknown controller `{name}`; use one of: {}", crate::factory::controller_names())]
    UnknownController { name: String },

    /// A name neither the registry nor the registered resolver knows (its one-line reason).
    #[error("{message}")]
    ExternalNotFound { message: String },

    /// An external controller that cannot run as configured (the resolver's one-line reason).
    #[error("{message}")]
    External { message: String },

    #[error("invalid config for controller `{controller}`: {message}")]
    BadConfig { controller: String, message: String },

    #[error("controller `{controller}`: `{field}` {requirement} (got {got})")]
    InvalidParameter { controller: &'static str, field: &'static str, requirement: &'static str, got: String },

    #[error(
        "controller `{controller}`: the loop's interval ({requested_ns} ns) differs from `interval_ns` ({interval_ns} ns), its \
         monitoring interval and so its tick: give only one"
    )]
    IntervalConflict { controller: &'static str, requested_ns: u64, interval_ns: u64 },

    #[error("controller `tmo-high` needs `psi_threshold_pct` (find it with pick_tmo_threshold, e.g. `psi_threshold_pct = 30.0`)")]
    MissingTmoThreshold,

    #[error("{what} needs at least {needed} samples (got {got}); profile more periods")]
    TooFewSamples { what: &'static str, needed: usize, got: usize },

    #[error("{what}: {message}")]
    BadInput { what: &'static str, message: String },

    #[error("no profiled limit reaches hit ratio {target} (best {best_ratio} at {best_limit_bytes} bytes); profile larger limits or lower the target")]
    NoLimitMeetsTarget { target: f64, best_ratio: f64, best_limit_bytes: u64 },

    #[error("no PSI threshold keeps the mean elapsed time below the deadline {deadline_ns} ns (smallest mean {best_mean_ns} ns at {best_threshold_pct} %); try lower thresholds")]
    NoThresholdMeetsDeadline { deadline_ns: u64, best_threshold_pct: f64, best_mean_ns: u64 },
}
