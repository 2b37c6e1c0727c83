//! Building controllers by name from configuration (scenario files, the agent's config).

use serde::{Deserialize, Deserializer, Serialize};

use crate::external::{external_controllers, ExternalConfig, ExternalError};
use crate::fixed::{FixedLimits, OfflineConfig, StaticConfig};
use crate::greedy::{Greedy, GreedyConfig};
use crate::sara::{Sara, SaraConfig, SaraConfigInput};
use crate::senpai::{Senpai, SenpaiConfig};
use crate::tailguard::{Tailguard, TailguardConfig};
use crate::tmo::{Tmo, TmoConfig, TMO_LOW_THRESHOLD_PCT};
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
    Tailguard,
    /// A controller written outside critmem ([`crate::external`]).
    External,
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
pub const CONTROLLERS: [ControllerInfo; 8] = [
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
    ControllerInfo {
        name: "tailguard",
        kind: ControllerKind::Tailguard,
        summary: "critmem's own: stall steering with a guard band, a learned job cost and rescue instead of dropping",
    },
];

/// The registry entry named `name`.
pub fn controller_info(name: &str) -> Option<&'static ControllerInfo> {
    CONTROLLERS.iter().find(|c| c.name == name)
}

/// The registry's names, comma-separated (for messages).
pub fn controller_names() -> String {
    CONTROLLERS.iter().map(|c| c.name).collect::<Vec<_>>().join(", ")
}

/// A controller name with its parsed and checked configuration. Only
/// [`ControllerConfig::parse`] makes one, so [`ControllerConfig::build`] cannot fail.
/// Serialisable so a run can log exactly what it used.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(transparent)]
pub struct ControllerConfig {
    params: Params,
    /// Whether the configuration set `interval_ns`, which a tick requested beside it must then
    /// equal (see [`ControllerConfig::resolve_tick_ns`]).
    #[serde(skip)]
    interval_given: bool,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "controller", rename_all = "kebab-case")]
enum Params {
    Sara(SaraConfig),
    Greedy(GreedyConfig),
    Offline(OfflineConfig),
    TmoLow(TmoConfig),
    TmoHigh(TmoConfig),
    Senpai(SenpaiConfig),
    Static(StaticConfig),
    Tailguard(TailguardConfig),
    External(ExternalConfig),
}

/// What a control loop was asked to tick at, besides the controller's configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TickRequest {
    /// Nothing: the loop ticks at the controller's own interval.
    OwnInterval,
    /// An interval given together with this configuration (a scenario's `[control]
    /// interval_ms`).
    WithConfig(u64),
    /// An interval given together with a configuration this one replaces (a scenario's, when
    /// the command line gives another configuration).
    ForReplacedConfig(u64),
}

impl ControllerConfig {
    /// Parses `config` (any serde source: a TOML table, a JSON object; `{}` for defaults) as the
    /// configuration of controller `name`, and checks its parameters.
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
            return Self::parse_external(name, config);
        };
        let (params, interval_given) = match info.kind {
            ControllerKind::Sara => {
                let (config, interval_given) = de::<SaraConfigInput, _>(name, config)?.into_config();
                (Params::Sara(config), interval_given)
            }
            ControllerKind::Greedy => (Params::Greedy(de(name, config)?), false),
            ControllerKind::Offline => (Params::Offline(de(name, config)?), false),
            ControllerKind::TmoLow => (Params::TmoLow(de(name, config)?), false),
            ControllerKind::TmoHigh => (Params::TmoHigh(de(name, config)?), false),
            ControllerKind::Senpai => (Params::Senpai(de(name, config)?), false),
            ControllerKind::Static => (Params::Static(de(name, config)?), false),
            ControllerKind::Tailguard => (Params::Tailguard(de(name, config)?), false),
            ControllerKind::External => unreachable!("the registry holds no external controller"),
        };
        params.check()?;
        Ok(ControllerConfig { params, interval_given })
    }

    /// A name the registry does not hold, given to the registered resolver.
    fn parse_external<'de, D: Deserializer<'de>>(name: &str, config: D) -> Result<Self, PolicyError> {
        let Some(resolver) = external_controllers() else {
            return Err(PolicyError::UnknownController { name: name.to_string() });
        };
        let params = serde_json::Value::deserialize(config)
            .map_err(|e| PolicyError::BadConfig { controller: name.to_string(), message: one_line(&e.to_string()) })?;
        let info = resolver.check(name, &params).map_err(|e| match e {
            ExternalError::NotFound(message) => PolicyError::ExternalNotFound { message },
            ExternalError::Invalid(message) => PolicyError::External { message },
        })?;
        let params = Params::External(ExternalConfig {
            name: name.to_string(),
            params,
            interval_ns: info.interval_ns,
            display_name: info.display_name,
        });
        Ok(ControllerConfig { params, interval_given: false })
    }

    pub fn kind(&self) -> ControllerKind {
        match self.params {
            Params::Sara(_) => ControllerKind::Sara,
            Params::Greedy(_) => ControllerKind::Greedy,
            Params::Offline(_) => ControllerKind::Offline,
            Params::TmoLow(_) => ControllerKind::TmoLow,
            Params::TmoHigh(_) => ControllerKind::TmoHigh,
            Params::Senpai(_) => ControllerKind::Senpai,
            Params::Static(_) => ControllerKind::Static,
            Params::Tailguard(_) => ControllerKind::Tailguard,
            Params::External(_) => ControllerKind::External,
        }
    }

    /// The registry name of this controller, or what an external one calls itself.
    pub fn name(&self) -> &str {
        match &self.params {
            Params::External(c) => &c.display_name,
            _ => self.registry_name(),
        }
    }

    /// The name an external controller is built by (`None` for the registry's own).
    pub fn external_name(&self) -> Option<String> {
        match &self.params {
            Params::External(c) => Some(c.name.clone()),
            _ => None,
        }
    }

    fn registry_name(&self) -> &'static str {
        let kind = self.kind();
        CONTROLLERS.iter().find(|c| c.kind == kind).map_or("?", |c| c.name)
    }

    /// Whether the controller's rule counts one tick as one interval of its own `interval_ns`
    /// (SARA's l_intv in Eq. 5, Eq. 6 and Definition 1), so a loop must tick at exactly that
    /// interval. The others measure elapsed time from the observations.
    pub fn ticks_are_its_interval(&self) -> bool {
        matches!(self.params, Params::Sara(_))
    }

    /// The interval the controller is designed to tick at: [`Controller::interval_ns`] of what
    /// [`ControllerConfig::build`] makes.
    pub fn interval_ns(&self) -> u64 {
        match &self.params {
            Params::Sara(c) => c.interval_ns,
            Params::External(c) => c.interval_ns,
            _ => crate::DEFAULT_INTERVAL_NS,
        }
    }

    /// The loop's tick in nanoseconds, the one rule every platform follows. A controller whose
    /// ticks are its own intervals ([`ControllerConfig::ticks_are_its_interval`]) ticks at its
    /// `interval_ns`: an interval requested with its configuration becomes its `interval_ns`,
    /// unless the configuration gives a different one ([`PolicyError::IntervalConflict`]); one
    /// requested with a configuration this one replaced does not apply. Any other controller
    /// ticks at the requested interval, or at its own when none is requested.
    pub fn resolve_tick_ns(&mut self, request: TickRequest) -> Result<u64, PolicyError> {
        let Params::Sara(config) = &mut self.params else {
            return Ok(match request {
                TickRequest::OwnInterval => self.interval_ns(),
                TickRequest::WithConfig(ns) | TickRequest::ForReplacedConfig(ns) => ns,
            });
        };
        match request {
            TickRequest::WithConfig(ns) if ns != config.interval_ns => {
                if self.interval_given {
                    return Err(PolicyError::IntervalConflict { controller: "sara", requested_ns: ns, interval_ns: config.interval_ns });
                }
                let adopted = SaraConfig { interval_ns: ns, ..config.clone() };
                adopted.validate()?;
                *config = adopted;
                self.interval_given = true;
                Ok(ns)
            }
            _ => Ok(config.interval_ns),
        }
    }

    /// Checks that every group the configuration names per group (`static`'s `limits_bytes`,
    /// `offline`'s `group_limits_bytes`) is one of `soft_rt_groups`: limits apply only to soft
    /// real-time groups, so any other name would be silently ignored.
    pub fn check_group_names(&self, soft_rt_groups: &[&str]) -> Result<(), PolicyError> {
        let (field, named) = match &self.params {
            Params::Static(c) => ("limits_bytes", &c.limits_bytes),
            Params::Offline(c) => ("group_limits_bytes", &c.group_limits_bytes),
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

    /// A fresh controller (its parameters were checked by [`ControllerConfig::parse`]).
    pub fn build(&self) -> Box<dyn Controller + Send> {
        match &self.params {
            Params::Sara(c) => Box::new(Sara::from_valid(c.clone())),
            Params::Greedy(c) => Box::new(Greedy::new(c.clone())),
            Params::Offline(c) => Box::new(FixedLimits::offline(c.clone())),
            // `check` refused a tmo-high config without a threshold, so the default is tmo-low's only.
            Params::TmoLow(c) | Params::TmoHigh(c) => {
                Box::new(Tmo::from_checked(self.registry_name(), c.psi_threshold_pct.unwrap_or(TMO_LOW_THRESHOLD_PCT), c.clone()))
            }
            Params::Senpai(c) => Box::new(Senpai::from_valid(c.clone())),
            Params::Static(c) => Box::new(FixedLimits::from_valid(c.clone())),
            Params::Tailguard(c) => Box::new(Tailguard::from_valid(c.clone())),
            Params::External(c) => match external_controllers() {
                Some(resolver) => resolver.build(&c.name, &c.params),
                None => unreachable!("an external config is only parsed through a registered resolver"),
            },
        }
    }
}

impl Params {
    /// The parameter checks of each controller's constructor.
    fn check(&self) -> Result<(), PolicyError> {
        match self {
            Params::Sara(c) => c.validate(),
            Params::Greedy(_) | Params::Offline(_) | Params::External(_) => Ok(()),
            Params::TmoLow(c) => c.checked_low_threshold().map(drop),
            Params::TmoHigh(c) => c.checked_high_threshold().map(drop),
            Params::Senpai(c) => c.validate(),
            Params::Static(c) => c.validate(),
            Params::Tailguard(c) => c.validate(),
        }
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
    Ok(ControllerConfig::parse(name, config)?.build())
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
            "static" => r#"{"default_limit_bytes": 16777216}"#,
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

    fn parse(name: &str, config: serde_json::Value) -> Result<ControllerConfig, PolicyError> {
        ControllerConfig::parse(name, config)
    }

    /// SARA's configuration is read through `SaraConfigInput`, which must take exactly the keys,
    /// defaults and values `SaraConfig` itself takes.
    #[test]
    fn sara_is_read_as_its_config_reads_itself() {
        let unknown = |e: String| e[e.find("expected").unwrap()..].to_string();
        let direct = serde_json::from_value::<SaraConfig>(serde_json::json!({"bogus": 1})).unwrap_err().to_string();
        let via = parse("sara", serde_json::json!({"bogus": 1})).unwrap_err().to_string();
        assert_eq!(unknown(direct), unknown(via), "the same keys in the same order");
        assert_eq!(
            parse("sara", serde_json::json!({})).unwrap(),
            parse("sara", serde_json::to_value(SaraConfig::default()).unwrap()).unwrap().without_interval_given()
        );
        let full = serde_json::json!({
            "interval_ns": 7, "step_bytes": 9, "step_up_bytes": 11, "long_stall_intervals_pct": 12, "long_stall_threshold_pct": 13,
            "early_drop": false, "stall": "full", "knob": "high", "initial_limit_bytes": 14,
        });
        let direct: SaraConfig = serde_json::from_value(full.clone()).unwrap();
        let mut logged = serde_json::to_value(parse("sara", full).unwrap()).unwrap();
        logged.as_object_mut().unwrap().remove("controller");
        assert_eq!(logged, serde_json::to_value(direct).unwrap());
        let e = parse("sara", serde_json::json!({"interval_ns": null})).unwrap_err().to_string();
        assert!(e.contains("invalid type: null, expected u64"), "{e}");
    }

    impl ControllerConfig {
        fn without_interval_given(mut self) -> Self {
            self.interval_given = false;
            self
        }
    }

    #[test]
    fn parse_checks_the_parameters_so_building_cannot_fail() {
        let e = parse("tmo-high", serde_json::json!({})).unwrap_err();
        assert_eq!(e, PolicyError::MissingTmoThreshold);
        let e = parse("sara", serde_json::json!({"interval_ns": 0})).unwrap_err().to_string();
        assert_eq!(e, "controller `sara`: `interval_ns` must be > 0 (the paper uses 5_000_000) (got 0)");
        assert!(parse("senpai", serde_json::json!({"tick_ns": 0})).is_err());
        assert!(parse("static", serde_json::json!({})).is_err());
        assert!(parse("tmo-low", serde_json::json!({"period_ns": 0})).is_err());
    }

    #[test]
    fn the_config_knows_the_interval_its_controller_ticks_at() {
        for info in CONTROLLERS {
            let config = match info.name {
                "tmo-high" => serde_json::json!({"psi_threshold_pct": 30.0}),
                "offline" => serde_json::json!({"limit_bytes": 1}),
                "static" => serde_json::json!({"default_limit_bytes": 1}),
                "sara" => serde_json::json!({"interval_ns": 3}),
                _ => serde_json::json!({}),
            };
            let config = parse(info.name, config).unwrap();
            assert_eq!(config.interval_ns(), config.build().interval_ns(), "{}", info.name);
        }
    }

    #[test]
    fn sara_ticks_at_its_own_interval_and_adopts_one_requested_with_its_config() {
        let tick = |name: &str, config: serde_json::Value, request: TickRequest| {
            let mut c = parse(name, config).unwrap();
            c.resolve_tick_ns(request).map(|ns| (ns, c.build().interval_ns()))
        };
        let none = serde_json::json!({});
        let own_2ms = serde_json::json!({"interval_ns": 2_000_000});
        let own_5ms = serde_json::json!({"interval_ns": 5_000_000});
        // SARA: a tick requested with its config becomes its l_intv, unless the config sets another.
        assert_eq!(tick("sara", none.clone(), TickRequest::WithConfig(10_000_000)), Ok((10_000_000, 10_000_000)));
        assert_eq!(tick("sara", own_5ms.clone(), TickRequest::WithConfig(5_000_000)), Ok((5_000_000, 5_000_000)));
        assert_eq!(
            tick("sara", own_5ms, TickRequest::WithConfig(10_000_000)),
            Err(PolicyError::IntervalConflict { controller: "sara", requested_ns: 10_000_000, interval_ns: 5_000_000 })
        );
        // ...and one requested for a config this one replaced does not apply.
        assert_eq!(tick("sara", own_2ms.clone(), TickRequest::ForReplacedConfig(5_000_000)), Ok((2_000_000, 2_000_000)));
        assert_eq!(tick("sara", none.clone(), TickRequest::ForReplacedConfig(10_000_000)), Ok((5_000_000, 5_000_000)));
        assert_eq!(tick("sara", own_2ms, TickRequest::OwnInterval), Ok((2_000_000, 2_000_000)));
        // The others tick at what is asked, or at their own interval.
        assert_eq!(tick("greedy", none.clone(), TickRequest::WithConfig(10_000_000)), Ok((10_000_000, 5_000_000)));
        assert_eq!(tick("greedy", none.clone(), TickRequest::ForReplacedConfig(10_000_000)), Ok((10_000_000, 5_000_000)));
        assert_eq!(tick("greedy", none, TickRequest::OwnInterval), Ok((5_000_000, 5_000_000)));
        // Once adopted, the interval is the config's own: another request conflicts with it.
        let mut c = parse("sara", serde_json::json!({})).unwrap();
        assert_eq!(c.resolve_tick_ns(TickRequest::WithConfig(10_000_000)), Ok(10_000_000));
        assert!(c.resolve_tick_ns(TickRequest::WithConfig(20_000_000)).is_err());
        assert!(parse("sara", serde_json::json!({})).unwrap().resolve_tick_ns(TickRequest::WithConfig(0)).is_err());
    }

    #[test]
    fn an_unknown_name_lists_the_registry() {
        let e = ControllerConfig::parse("sarah", serde_json::json!({})).unwrap_err();
        assert_eq!(
            e.to_string(),
            "unknown controller `sarah`; use one of: sara, greedy, offline, tmo-low, tmo-high, senpai, static, tailguard"
        );
    }
}
