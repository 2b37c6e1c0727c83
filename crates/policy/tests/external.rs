//! Controllers the registry does not hold go to the registered resolver (its own test binary:
//! the resolver is process-wide).

use critmem_policy::{
    register_external_controllers, Action, Controller, ControllerConfig, ControllerKind, ExternalControllers, ExternalError, ExternalInfo,
    Observation, PolicyError, TickRequest,
};
use serde_json::{json, Value};

/// Knows one class, `ctl.py:Cap`, whose `cap` parameter must be a number.
struct Resolver;

struct Cap {
    bytes: u64,
    ticks: u64,
}

impl Controller for Cap {
    fn name(&self) -> &str {
        "ctl.py:Cap"
    }
    fn tick(&mut self, obs: &Observation) -> Vec<Action> {
        self.ticks += 1;
        (0..obs.groups.len()).map(|group| Action::SetMax { group, bytes: Some(self.bytes) }).collect()
    }
    fn interval_ns(&self) -> u64 {
        2_000_000
    }
    fn failure(&self) -> Option<String> {
        (self.ticks > 1).then(|| "Cap.tick raised RuntimeError: twice".to_string())
    }
}

impl ExternalControllers for Resolver {
    fn check(&self, name: &str, params: &Value) -> Result<ExternalInfo, ExternalError> {
        if name != "ctl.py:Cap" {
            return Err(ExternalError::NotFound(format!("unknown controller `{name}`")));
        }
        match params.get("cap") {
            None | Some(Value::Number(_)) => Ok(ExternalInfo { interval_ns: 2_000_000, display_name: "Cap".into() }),
            Some(other) => Err(ExternalError::Invalid(format!("parameter 'cap' must be int, got {other}"))),
        }
    }
    fn build(&self, _name: &str, params: &Value) -> Box<dyn Controller + Send> {
        Box::new(Cap { bytes: params.get("cap").and_then(Value::as_u64).unwrap_or(1 << 20), ticks: 0 })
    }
}

fn observation() -> Observation {
    Observation { now_ns: 0, total_memory_bytes: 1 << 30, cpus: 1, groups: Vec::new(), events: Vec::new() }
}

#[test]
fn names_outside_the_registry_go_to_the_registered_resolver() {
    // Before a resolver is registered a name outside the registry is unknown.
    let before = ControllerConfig::parse("ctl.py:Cap", json!({})).unwrap_err();
    assert!(matches!(before, PolicyError::UnknownController { .. }), "{before:?}");
    assert!(register_external_controllers(Box::new(Resolver)));
    assert!(!register_external_controllers(Box::new(Resolver)), "a second registration is refused");

    let mut config = ControllerConfig::parse("ctl.py:Cap", json!({"cap": 4096})).unwrap();
    assert_eq!((config.kind(), config.name(), config.interval_ns()), (ControllerKind::External, "Cap", 2_000_000));
    assert_eq!(config.resolve_tick_ns(TickRequest::OwnInterval).unwrap(), 2_000_000);
    assert_eq!(config.resolve_tick_ns(TickRequest::WithConfig(7_000_000)).unwrap(), 7_000_000);
    assert_eq!(serde_json::to_value(&config).unwrap(), json!({"controller": "external", "name": "ctl.py:Cap", "params": {"cap": 4096}}));

    let mut controller = config.build();
    assert_eq!(controller.tick(&observation()), Vec::<Action>::new());
    assert_eq!(controller.failure(), None);
    controller.tick(&observation());
    assert_eq!(controller.failure().as_deref(), Some("Cap.tick raised RuntimeError: twice"));

    // Its refusals keep their kind: a missing name is about `controller`, the rest `config`.
    let missing = ControllerConfig::parse("ctl.py:Nope", json!({})).unwrap_err();
    assert_eq!(missing, PolicyError::ExternalNotFound { message: "unknown controller `ctl.py:Nope`".into() });
    let invalid = ControllerConfig::parse("ctl.py:Cap", json!({"cap": "big"})).unwrap_err();
    assert_eq!(invalid.to_string(), "parameter 'cap' must be int, got \"big\"");
    // The registry's own names never reach it.
    assert_eq!(ControllerConfig::parse("greedy", json!({})).unwrap().kind(), ControllerKind::Greedy);
}
