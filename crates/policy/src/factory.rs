//! Building controllers by name from configuration (scenario files, the agent's config).

use serde::{Deserialize, Deserializer, Serialize};

use crate::fixed::{FixedLimits, OfflineConfig, StaticConfig};
use crate::greedy::{Greedy, GreedyConfig};
use crate::sara::{Sara, SaraConfig};
use crate::senpai::{Senpai, SenpaiConfig};
use crate::tmo::{Tmo, TmoConfig};
use crate::{Controller, PolicyError};

/// Which controller a [`ControllerConfig`] configures.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ControllerKind {
    Sara,
    Greedy,
    Offline,
    TmoLow,
    TmoHigh,
    Senpai,
    Static,
}

/// One controller as users name it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ControllerInfo {
    /// The name scenario files, the agent's config and the command line use.
    pub name: &'static str,
    pub kind: ControllerKind,
    /// One line for help texts and listings.
    pub summary: &'static str,
}

/// Every controller [`make_controller`] builds, in the order help texts list them: the one
/// registry every front end reads.
pub const CONTROLLERS: [ControllerInfo; 7] = [
    ControllerInfo {
        name: "sara",
        kind: ControllerKind::Sara,
        summary: "SARA: stall-aware limits for soft real-time groups, with early job dropping",
    },
    ControllerInfo {
        name: "greedy",
        kind: ControllerKind::Greedy,
        summary: "no limit on soft real-time groups; the rest to non-real-time work",
    },
    ControllerInfo { name: "offline", kind: ControllerKind::Offline, summary: "fixed per-group limits found by offline profiling" },
    ControllerInfo {
        name: "tmo-low",
        kind: ControllerKind::TmoLow,
        summary: "TMO with a low pressure threshold (reclaims while stall stays under it)",
    },
    ControllerInfo {
        name: "tmo-high",
        kind: ControllerKind::TmoHigh,
        summary: "TMO with a profiled pressure threshold (psi_threshold_pct)",
    },
    ControllerInfo {
        name: "senpai",
        kind: ControllerKind::Senpai,
        summary: "senpai: probes memory.high down while pressure stays under its target",
    },
    ControllerInfo { name: "static", kind: ControllerKind::Static, summary: "fixed limits given per group in the config" },
];

/// The registry entry named `name`.
pub fn controller_info(name: &str) -> Option<&'static ControllerInfo> {
    CONTROLLERS.iter().find(|c| c.name == name)
}

/// The registry's names, comma-separated (for messages).
pub fn controller_names() -> String {
    CONTROLLERS.iter().map(|c| c.name).collect::<Vec<_>>().join(", ")
}

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
        let Some(info) = controller_info(name) else {
            return Err(PolicyError::UnknownController { name: name.to_string() });
        };
        Ok(match info.kind {
            ControllerKind::Sara => ControllerConfig::Sara(de(name, config)?),
            ControllerKind::Greedy => ControllerConfig::Greedy(de(name, config)?),
            ControllerKind::Offline => ControllerConfig::Offline(de(name, config)?),
            ControllerKind::TmoLow => ControllerConfig::TmoLow(de(name, config)?),
            ControllerKind::TmoHigh => ControllerConfig::TmoHigh(de(name, config)?),
            ControllerKind::Senpai => ControllerConfig::Senpai(de(name, config)?),
            ControllerKind::Static => ControllerConfig::Static(de(name, config)?),
        })
    }

    pub fn kind(&self) -> ControllerKind {
        match self {
            ControllerConfig::Sara(_) => ControllerKind::Sara,
            ControllerConfig::Greedy(_) => ControllerKind::Greedy,
            ControllerConfig::Offline(_) => ControllerKind::Offline,
            ControllerConfig::TmoLow(_) => ControllerKind::TmoLow,
            ControllerConfig::TmoHigh(_) => ControllerKind::TmoHigh,
            ControllerConfig::Senpai(_) => ControllerKind::Senpai,
            ControllerConfig::Static(_) => ControllerKind::Static,
        }
    }

    /// The registry name of this controller.
    pub fn name(&self) -> &'static str {
        let kind = self.kind();
        CONTROLLERS.iter().find(|c| c.kind == kind).map_or("?", |c| c.name)
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
pub fn make_controller<'de, D: Deserializer<'de>>(name: &str, config: D) -> Result<Box<dyn Controller + Send>, PolicyError> {
    ControllerConfig::parse(name, config)?.build()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each registry name parses to a config of its own kind, which serialises under that
    /// same name (the serde tag is derived from the variant, the registry is written out).
    #[test]
    fn every_registered_name_round_trips_through_its_config() {
        let defaults = |name: &str| match name {
            "tmo-high" => r#"{"psi_threshold_pct": 30.0}"#,
            "offline" => r#"{"limit_bytes": 16777216}"#,
            _ => "{}",
        };
        for info in CONTROLLERS {
            let mut de = serde_json::Deserializer::from_str(defaults(info.name));
            let config = ControllerConfig::parse(info.name, &mut de).unwrap_or_else(|e| panic!("{}: {e}", info.name));
            assert_eq!((config.kind(), config.name()), (info.kind, info.name));
            let tagged = serde_json::to_value(&config).unwrap();
            assert_eq!(tagged["controller"], info.name);
        }
        let kinds: std::collections::BTreeSet<_> = CONTROLLERS.iter().map(|c| format!("{:?}", c.kind)).collect();
        assert_eq!(kinds.len(), CONTROLLERS.len(), "each kind is registered once");
    }

    #[test]
    fn an_unknown_name_lists_the_registry() {
        let e = ControllerConfig::parse("sarah", serde_json::json!({})).unwrap_err();
        assert_eq!(e.to_string(), "unknown controller `sarah`; use one of: sara, greedy, offline, tmo-low, tmo-high, senpai, static");
    }
}
