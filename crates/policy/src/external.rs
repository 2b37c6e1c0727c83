//! Controllers written outside critmem (a Python class), built through a resolver the
//! program embedding critmem registers: the Python extension resolves them in-process, the
//! Linux binaries through a Python process of their own. Any controller name the registry
//! ([`crate::CONTROLLERS`]) does not hold goes to the resolver, which accepts or refuses it.

use std::sync::OnceLock;

use serde::Serialize;

use crate::Controller;

/// What a resolver learned of an external controller when it checked it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExternalInfo {
    /// The tick period the controller asks for.
    pub interval_ns: u64,
    /// What reports call it (the class's own name, or the name it was given by).
    pub display_name: String,
}

/// Why a resolver refused a controller; each message is one line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ExternalError {
    /// No controller has that name (no class, no module, no entry point).
    NotFound(String),
    /// It exists but cannot run as configured (a method missing, a parameter of the wrong type,
    /// its constructor raised).
    Invalid(String),
}

/// Builds controllers critmem's registry does not hold.
pub trait ExternalControllers: Send + Sync {
    /// Checks that `name` names a controller that builds with `params`.
    fn check(&self, name: &str, params: &serde_json::Value) -> Result<ExternalInfo, ExternalError>;
    /// A fresh controller. One that fails to build reports it through
    /// [`Controller::failure`] at its first tick.
    fn build(&self, name: &str, params: &serde_json::Value) -> Box<dyn Controller + Send>;
}

static RESOLVER: OnceLock<Box<dyn ExternalControllers>> = OnceLock::new();

/// Registers the program's resolver; a second registration is refused (returns false).
pub fn register_external_controllers(resolver: Box<dyn ExternalControllers>) -> bool {
    RESOLVER.set(resolver).is_ok()
}

/// The registered resolver, if any.
pub fn external_controllers() -> Option<&'static dyn ExternalControllers> {
    RESOLVER.get().map(|r| &**r)
}

/// An external controller's name and parameters, as a run logs them.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ExternalConfig {
    /// The name it is built by.
    pub name: String,
    pub params: serde_json::Value,
    #[serde(skip)]
    pub interval_ns: u64,
    #[serde(skip)]
    pub display_name: String,
}
