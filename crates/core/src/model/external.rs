//! The scenario loader's half of the schedulers written outside critmem (a Python class):
//! whether a name is one and whether it runs with its configuration. The half that builds them
//! is `sched::external`'s, which registers both.

use std::sync::OnceLock;

use crate::model::task::TaskSpec;

/// Why a resolver refused a scheduler; each message is one line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ExternalSchedulerError {
    /// No scheduler has that name, or what it names is no scheduler (a method missing).
    NotFound(String),
    /// It exists but its `config` does not fit (a parameter unknown or of the wrong type, its
    /// constructor or setup raised).
    BadConfig(String),
}

/// What the loader asks of a resolver of schedulers critmem does not hold.
pub trait ExternalSchedulerCheck: Send + Sync {
    /// Whether `name`, which is no built-in kind and no `module:Class`, is one the resolver
    /// knows (an installed entry point): the loader then gives it to [`Self::check`] rather
    /// than refusing it as an unknown kind.
    fn knows(&self, name: &str) -> bool;
    /// Checks that `name` builds with `config` for `tasks` on `cpus` CPUs.
    fn check(&self, name: &str, config: &serde_json::Value, tasks: &[TaskSpec], cpus: usize) -> Result<(), ExternalSchedulerError>;
}

static CHECK: OnceLock<&'static dyn ExternalSchedulerCheck> = OnceLock::new();

/// Set once, by the registration of the whole resolver.
pub(crate) fn register_check(check: &'static dyn ExternalSchedulerCheck) -> bool {
    CHECK.set(check).is_ok()
}

/// The registered resolver's checks, if any.
pub fn external_scheduler_check() -> Option<&'static dyn ExternalSchedulerCheck> {
    CHECK.get().copied()
}

/// Whether a name that is no built-in kind goes to the resolver: a `module:Class` name or one
/// it knows, and only when one is registered.
pub fn is_external_name(name: &str) -> bool {
    external_scheduler_check().is_some_and(|r| name.contains(':') || r.knows(name))
}
