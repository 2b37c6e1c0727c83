//! Memory schedulers written outside critmem (a Python class), built through a resolver the
//! program embedding critmem registers, as [`crate::external`] does for controllers: any
//! `[tmem] policy` that [`super::MEMORY_SCHEDULERS`] does not hold goes to the resolver.

use std::sync::OnceLock;

use super::MemoryScheduler;
use crate::external::ExternalError;
use crate::PolicyError;

/// Builds memory schedulers critmem's registry does not hold.
pub trait ExternalMemorySchedulers: Send + Sync {
    /// Checks that `name` names a memory scheduler that builds with `config`.
    fn check(&self, name: &str, config: &serde_json::Value) -> Result<(), ExternalError>;
    /// A fresh memory scheduler. One that fails, to build or later, reports it the way the
    /// embedding program stops a run, and until then sets no cache's allocation.
    fn build(&self, name: &str, config: &serde_json::Value) -> Box<dyn MemoryScheduler>;
}

static RESOLVER: OnceLock<Box<dyn ExternalMemorySchedulers>> = OnceLock::new();

/// Registers the program's resolver; a second registration is refused (returns false).
pub fn register_external_memory_schedulers(resolver: Box<dyn ExternalMemorySchedulers>) -> bool {
    RESOLVER.set(resolver).is_ok()
}

/// The registered resolver, if any.
pub fn external_memory_schedulers() -> Option<&'static dyn ExternalMemorySchedulers> {
    RESOLVER.get().map(|r| &**r)
}

/// Checks `name` with its `config`: a built-in (which takes no config) or one the resolver
/// accepts. `Err(ExternalError::NotFound)` for an unknown name, `Invalid` for a config that
/// does not fit.
pub fn check_memory_scheduler(name: &str, config: Option<&serde_json::Value>) -> Result<(), ExternalError> {
    if super::make_memory_scheduler(name).is_ok() {
        return match config {
            Some(_) => Err(ExternalError::Invalid(format!("memory scheduler {name:?} takes no config; only a Python one does"))),
            None => Ok(()),
        };
    }
    let unknown = || ExternalError::NotFound(format!("unknown memory scheduler {name:?}; use one of: {}", super::memory_scheduler_names()));
    match external_memory_schedulers() {
        Some(resolver) => resolver.check(name, config.unwrap_or(&serde_json::json!({}))),
        None => Err(unknown()),
    }
}

/// The memory scheduler `name`: a built-in, else the resolver's (with `config`).
pub fn make_memory_scheduler_with(name: &str, config: &serde_json::Value) -> Result<Box<dyn MemoryScheduler>, PolicyError> {
    super::make_memory_scheduler(name).or_else(|e| match external_memory_schedulers() {
        Some(resolver) => Ok(resolver.build(name, config)),
        None => Err(e),
    })
}
