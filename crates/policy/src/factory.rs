//! Building controllers by name from configuration (scenario files, the agent's config).

use serde::{Deserialize, Deserializer, Serialize};

use crate::fixed::{FixedLimits, OfflineConfig, StaticConfig};
use crate::greedy::{Greedy, GreedyConfig};
use crate::sara::{Sara, SaraConfig};
use crate::senpai::{Senpai, SenpaiConfig};
use crate::tmo::{Tmo, TmoConfig};
use crate::{Controller, PolicyError};

/// Names [`make_controller`] accepts.
pub const CONTROLLER_NAMES: &[&str] = &["sara", "greedy", "offline", "tmo-low", "tmo-high", "senpai", "static"];

/// A controller name with its parsed configuration; serialisable so a run can log exactly what
/// it used.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "controller", rename_all = "kebab-case")]
pub enum ControllerConfig {
    Sara(SaraConfig),
    Greedy(GreedyConfig),
    Offline(OfflineConfig),
    TmoLow(TmoConfig),
    TmoHigh(TmoConfig),
    Senpai(SenpaiConfig),
    Static(StaticConfig),
}

impl ControllerConfig {
    /// Parses `config` (any serde source: a TOML table, a JSON object; `{}` for defaults) as the
    /// configuration of controller `name`.
    pub fn parse<'de, D: Deserializer<'de>>(name: &str, config: D) -> Result<Self, PolicyError> {
        fn de<'de, T: Deserialize<'de>, D: Deserializer<'de>>(name: &str, d: D) -> Result<T, PolicyError> {
            // The path names the key at fault, e.g. `step_bytes: invalid type: ...`.
            serde_path_to_error::deserialize(d).map_err(|e| {
                let path = e.path().to_string();
                let inner = one_line(&e.inner().to_string());
                // serde names the key itself in some errors (`unknown field `x``).
                let message = if path == "." || inner.contains(&format!("`{path}`")) { inner } else { format!("`{path}`: {inner}") };
                PolicyError::BadConfig { controller: name.to_string(), message }
            })
        }
        Ok(match name {
            "sara" => ControllerConfig::Sara(de(name, config)?),
            "greedy" => ControllerConfig::Greedy(de(name, config)?),
            "offline" => ControllerConfig::Offline(de(name, config)?),
            "tmo-low" => ControllerConfig::TmoLow(de(name, config)?),
            "tmo-high" => ControllerConfig::TmoHigh(de(name, config)?),
            "senpai" => ControllerConfig::Senpai(de(name, config)?),
            "static" => ControllerConfig::Static(de(name, config)?),
            other => return Err(PolicyError::UnknownController { name: other.to_string() }),
        })
    }

    pub fn name(&self) -> &'static str {
        match self {
            ControllerConfig::Sara(_) => "sara",
            ControllerConfig::Greedy(_) => "greedy",
            ControllerConfig::Offline(_) => "offline",
            ControllerConfig::TmoLow(_) => "tmo-low",
            ControllerConfig::TmoHigh(_) => "tmo-high",
            ControllerConfig::Senpai(_) => "senpai",
            ControllerConfig::Static(_) => "static",
        }
    }

    /// Whether the controller's rule counts one tick as one interval of its own `interval_ns`
    /// (SARA's l_intv in Eq. 5, Eq. 6 and Definition 1), so a loop must tick at exactly that
    /// interval. The others measure elapsed time from the observations.
    pub fn ticks_are_its_interval(&self) -> bool {
        matches!(self, ControllerConfig::Sara(_))
    }

    /// Checks that every group the configuration names per group (`static`'s `limits_bytes`,
    /// `offline`'s `group_limits_bytes`) is one of `soft_rt_groups`: limits apply only to soft
    /// real-time groups, so any other name would be silently ignored.
    pub fn check_group_names(&self, soft_rt_groups: &[&str]) -> Result<(), PolicyError> {
        let (field, named) = match self {
            ControllerConfig::Static(c) => ("limits_bytes", &c.limits_bytes),
            ControllerConfig::Offline(c) => ("group_limits_bytes", &c.group_limits_bytes),
            _ => return Ok(()),
        };
        match named.keys().find(|name| !soft_rt_groups.contains(&name.as_str())) {
            None => Ok(()),
            Some(name) => Err(PolicyError::BadConfig {
                controller: self.name().into(),
                message: format!(
                    "`{field}` names {name:?}, which is not a soft real-time group (they are: {})",
                    // Quoted, so that a name with a newline keeps the message on one line.
                    if soft_rt_groups.is_empty() {
                        "none".to_string()
                    } else {
                        soft_rt_groups.iter().map(|g| format!("{g:?}")).collect::<Vec<_>>().join(", ")
                    }
                ),
            }),
        }
    }

    /// Validates the parameters and builds a fresh controller.
    pub fn build(&self) -> Result<Box<dyn Controller + Send>, PolicyError> {
        Ok(match self {
            ControllerConfig::Sara(c) => Box::new(Sara::new(c.clone())?),
            ControllerConfig::Greedy(c) => Box::new(Greedy::new(c.clone())),
            ControllerConfig::Offline(c) => Box::new(FixedLimits::offline(c.clone())),
            ControllerConfig::TmoLow(c) => Box::new(Tmo::low(c.clone())?),
            ControllerConfig::TmoHigh(c) => Box::new(Tmo::high(c.clone())?),
            ControllerConfig::Senpai(c) => Box::new(Senpai::new(c.clone())?),
            ControllerConfig::Static(c) => Box::new(FixedLimits::fixed_partition(c.clone())?),
        })
    }
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Builds controller `name` from `config`; see [`ControllerConfig::parse`].
///
/// ```
/// use critmem_policy::{make_controller, Controller};
/// let sara = make_controller("sara", serde_json::json!({"step_bytes": 2_097_152})).unwrap();
/// assert_eq!((sara.name(), sara.interval_ns()), ("sara", 5_000_000));
/// let err = make_controller("tmo-high", serde_json::json!({})).err().unwrap();
/// assert!(err.to_string().contains("psi_threshold_pct"));
/// ```
pub fn make_controller<'de, D: Deserializer<'de>>(
    name: &str,
    config: D,
) -> Result<Box<dyn Controller + Send>, PolicyError> {
    ControllerConfig::parse(name, config)?.build()
}
