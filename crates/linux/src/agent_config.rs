//! The agent's configuration: its TOML form read and checked ([`AgentConfig`]), the
//! configuration of a scenario's `[memory]`, `[[group]]`s and `[control]` (the same controller
//! with the same parameters over the same groups, each a cgroup of its own that the agent
//! creates, so a policy tried in the simulator runs as the daemon unchanged), and what a reload
//! (SIGHUP) may change of a running configuration.

use crate::cgroup::GroupPath;
use crate::error::{Error, Result};
use crate::one_line;
use crate::platform::GroupSpec;
use crate::psi::UNPRIVILEGED_WINDOW_STEP_US;
use critmem_core::Scenario;
use critmem_policy::{Action, BandwidthKnobs, GroupRole, RoleName};
use serde::Deserialize;
use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::path::Path;
use std::path::PathBuf;

/// Where the configuration puts the job socket and the journal (the systemd unit's
/// RuntimeDirectory and StateDirectory).
pub const DEFAULT_SOCKET: &str = "/run/critmem/jobs.sock";
pub const DEFAULT_JOURNAL: &str = "/var/lib/critmem/journal.jsonl";

/// The agent's configuration, read from TOML and checked.
#[derive(Clone, Debug)]
pub struct AgentConfig {
    pub controller: String,
    pub controller_config: toml::Table,
    pub total_memory_bytes: u64,
    pub socket: PathBuf,
    /// Group allowed to connect to the socket; root's group if absent.
    pub socket_gid: Option<u32>,
    pub journal: PathBuf,
    pub metrics_address: Option<SocketAddr>,
    pub metrics_file: Option<PathBuf>,
    /// Wake-up hint: `some` memory stall within a window (multiple of 2 s without
    /// CAP_SYS_RESOURCE). 0 disables the triggers.
    pub trigger_stall_us: u64,
    pub trigger_window_us: u64,
    /// Longest rest after a quiet tick, woken by a trigger or a job report; 0 ticks at the
    /// controller's interval always. Needs the triggers.
    pub idle_interval_ms: u64,
    pub groups: Vec<GroupConfig>,
    /// One line per deprecated spelling the file uses (once per key or role name), naming
    /// its replacement; the agent prints them as warnings.
    pub deprecations: Vec<String>,
}

/// The file as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    controller: String,
    #[serde(default)]
    controller_config: toml::Table,
    total_memory_bytes: u64,
    socket: PathBuf,
    #[serde(default)]
    socket_gid: Option<u32>,
    journal: PathBuf,
    #[serde(default)]
    metrics_address: Option<SocketAddr>,
    #[serde(default)]
    metrics_file: Option<PathBuf>,
    #[serde(default = "default_trigger_stall_us")]
    trigger_stall_us: u64,
    #[serde(default = "default_trigger_window_us")]
    trigger_window_us: u64,
    #[serde(default)]
    idle_interval_ms: u64,
    #[serde(rename = "group")]
    groups: Vec<RawGroup>,
}

/// Longest `idle_interval_ms`: a loop resting longer would look dead to a watchdog.
pub const MAX_IDLE_INTERVAL_MS: u64 = 3_600_000;

pub(crate) fn default_trigger_stall_us() -> u64 {
    100_000
}

pub(crate) fn default_trigger_window_us() -> u64 {
    UNPRIVILEGED_WINDOW_STEP_US
}

/// A `[[group]]` as written: the scenario spelling (`role = "soft-rt"`, `floor_mb`,
/// `deadline_ms`, `bcet_ms`) or the deprecated one (`"soft-real-time"`, `floor_bytes`,
/// `deadline_ns`, `bcet_ns`).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawGroup {
    name: String,
    cgroup: String,
    role: String,
    floor_mb: Option<f64>,
    floor_bytes: Option<u64>,
    deadline_ms: Option<f64>,
    deadline_ns: Option<u64>,
    bcet_ms: Option<f64>,
    bcet_ns: Option<u64>,
    #[serde(default)]
    create: bool,
    cpu_millicpus: Option<u64>,
    io_read_mb_per_s: Option<f64>,
    io_write_mb_per_s: Option<f64>,
}

/// A managed group as configured.
#[derive(Clone, Debug, PartialEq)]
pub struct GroupConfig {
    pub name: String,
    pub cgroup: String,
    pub role: RoleName,
    pub floor_bytes: u64,
    /// Soft real-time groups only.
    pub deadline_ns: Option<u64>,
    pub bcet_ns: Option<u64>,
    pub create: bool,
    /// Starting CPU and I/O limits (`cpu_millicpus`, `io_read_mb_per_s`, `io_write_mb_per_s`).
    pub bandwidth: BandwidthKnobs,
}

const MIB: f64 = 1_048_576.0;

/// Deprecated keys and the scenario spelling that replaces them.
const DEPRECATED_KEYS: [(&str, &str); 3] =
    [("floor_bytes", "floor_mb (MiB)"), ("deadline_ns", "deadline_ms (milliseconds)"), ("bcet_ns", "bcet_ms (milliseconds)")];

impl RawGroup {
    /// The group in the current spelling, noting each deprecated spelling it uses in `used`.
    fn convert(self, used: &mut BTreeSet<&'static str>) -> std::result::Result<GroupConfig, String> {
        let name = &self.name;
        let role = match self.role.as_str() {
            "soft-real-time" => {
                used.insert("soft-real-time");
                RoleName::SoftRealTime
            }
            "non-real-time" => {
                used.insert("non-real-time");
                RoleName::NonRealTime
            }
            other => RoleName::deserialize(serde::de::value::StrDeserializer::<serde::de::value::Error>::new(other))
                .map_err(|_| format!("group {name:?}: role: unknown role {other:?}; expected soft-rt or non-rt"))?,
        };
        let mut pick = |new_key: &str, new: Option<u64>, old_key: &'static str, old: Option<u64>| match (new, old) {
            (Some(_), Some(_)) => Err(format!("group {name:?}: {old_key} and {new_key} both given; keep {new_key}")),
            (None, Some(v)) => {
                used.insert(old_key);
                Ok(Some(v))
            }
            (v, None) => Ok(v),
        };
        let ms = |key: &str, ms: Option<f64>| {
            ms.map(|ms| {
                critmem_core::Nanos::try_from_ms_f64(ms)
                    .map(|t| t.as_ns())
                    .ok_or_else(|| format!("group {name:?}: {key} must be a finite, non-negative number of milliseconds (got {ms})"))
            })
            .transpose()
        };
        let floor_mb = self
            .floor_mb
            .map(|mb| {
                let bytes = (mb * MIB).ceil();
                if mb.is_finite() && mb >= 0.0 && bytes <= i64::MAX as f64 {
                    Ok(bytes as u64)
                } else {
                    Err(format!("group {name:?}: floor_mb must be a finite, non-negative number of MiB (got {mb})"))
                }
            })
            .transpose()?;
        let floor_bytes = pick("floor_mb", floor_mb, "floor_bytes", self.floor_bytes)?
            .ok_or_else(|| format!("group {name:?}: floor_mb missing: the smallest limit ever applied, in MiB"))?;
        let deadline_ns = pick("deadline_ms", ms("deadline_ms", self.deadline_ms)?, "deadline_ns", self.deadline_ns)?;
        let bcet_ns = pick("bcet_ms", ms("bcet_ms", self.bcet_ms)?, "bcet_ns", self.bcet_ns)?;
        match (role, deadline_ns, bcet_ns) {
            (RoleName::SoftRealTime, Some(_), Some(_)) | (RoleName::NonRealTime, None, None) => {}
            (RoleName::SoftRealTime, _, _) => return Err(format!("group {name:?}: soft-rt needs deadline_ms and bcet_ms")),
            (RoleName::NonRealTime, _, _) => return Err(format!("group {name:?}: non-rt takes no deadline_ms or bcet_ms")),
        }
        let bandwidth = BandwidthKnobs::declared(self.cpu_millicpus, self.io_read_mb_per_s, self.io_write_mb_per_s)
            .map_err(|(key, reason)| format!("group {name:?}: {key} {reason}"))?;
        Ok(GroupConfig { name: self.name, cgroup: self.cgroup, role, floor_bytes, deadline_ns, bcet_ns, create: self.create, bandwidth })
    }
}

/// The warning for a deprecated spelling `used` (a key or an old role name).
fn deprecation(path: &Path, used: &str) -> String {
    let path = path.display();
    match DEPRECATED_KEYS.iter().find(|(key, _)| *key == used) {
        Some((key, new)) => format!("{path}: group key {key} is deprecated; write {new} instead"),
        None => {
            let new = if used == "soft-real-time" { RoleName::SoftRealTime } else { RoleName::NonRealTime }.as_str();
            format!("{path}: role = {used:?} is deprecated; write role = {new:?} instead")
        }
    }
}

impl AgentConfig {
    pub fn load(path: &Path) -> Result<Self> {
        let text = crate::read_input_file(path).map_err(|e| Error::io("read configuration", path, e))?;
        Self::parse(&text, path)
    }

    pub fn parse(text: &str, path: &Path) -> Result<Self> {
        let bad = |reason: String| Error::Config { path: path.to_owned(), reason };
        let raw: RawConfig = toml::from_str(text).map_err(|e| bad(one_line(&e.to_string())))?;
        let mut used = BTreeSet::new();
        let groups = raw.groups.into_iter().map(|g| g.convert(&mut used)).collect::<std::result::Result<Vec<_>, _>>();
        let config = AgentConfig {
            controller: raw.controller,
            controller_config: raw.controller_config,
            total_memory_bytes: raw.total_memory_bytes,
            socket: raw.socket,
            socket_gid: raw.socket_gid,
            journal: raw.journal,
            metrics_address: raw.metrics_address,
            metrics_file: raw.metrics_file,
            trigger_stall_us: raw.trigger_stall_us,
            trigger_window_us: raw.trigger_window_us,
            idle_interval_ms: raw.idle_interval_ms,
            groups: groups.map_err(|reason| bad(one_line(&reason)))?,
            deprecations: used.iter().map(|u| one_line(&deprecation(path, u))).collect(),
        };
        if config.groups.is_empty() {
            return Err(bad("no [[group]] configured".into()));
        }
        if config.metrics_address.is_some() && config.metrics_file.is_some() {
            return Err(bad("set metrics_address or metrics_file, not both".into()));
        }
        // One file each: metrics written over the journal lose it (a crash can then not be
        // undone), and over the socket cut the clients off.
        if config.socket == config.journal {
            return Err(bad(format!("socket and journal are the same file {}", config.journal.display())));
        }
        if let Some(metrics) = &config.metrics_file {
            // Published by writing `<name>.tmp` beside it and renaming that over it.
            let temporary = metrics.with_extension("tmp");
            for (key, path) in [("journal", &config.journal), ("socket", &config.socket)] {
                if path == metrics || *path == temporary {
                    return Err(bad(format!("metrics_file {} would overwrite the {key} {}", metrics.display(), path.display())));
                }
            }
        }
        for (i, g) in config.groups.iter().enumerate() {
            if config.groups[..i].iter().any(|o| o.name == g.name) {
                return Err(bad(format!("group name {:?} appears twice", g.name)));
            }
            let path = GroupPath::new(&g.cgroup)?;
            if let Some(other) = config.groups[..i].iter().find(|o| GroupPath::new(&o.cgroup).is_ok_and(|p| p == path)) {
                return Err(bad(format!("groups {:?} and {:?} are the same cgroup {path}: one group each", other.name, g.name)));
            }
        }
        if config.total_memory_bytes == 0 {
            return Err(bad("total_memory_bytes must be greater than 0: it is the memory the groups share".into()));
        }
        let floors_bytes: u128 = config.groups.iter().map(|g| u128::from(g.floor_bytes)).sum();
        if floors_bytes > u128::from(config.total_memory_bytes) {
            return Err(bad(format!(
                "the groups' floor_bytes add up to {floors_bytes}, more than total_memory_bytes = {}: no limits could keep every floor",
                config.total_memory_bytes
            )));
        }
        let (stall_us, window_us) = (config.trigger_stall_us, config.trigger_window_us);
        if stall_us > 0 && !crate::psi::trigger_accepted(stall_us, window_us) {
            return Err(bad(if crate::psi::trigger_accepted(1, window_us) {
                format!("trigger_stall_us = {stall_us} must be at most trigger_window_us = {window_us} (0 turns the triggers off)")
            } else {
                format!("trigger_window_us = {window_us} must be in 500000..=10000000 (the kernel's bounds)")
            }));
        }
        if config.idle_interval_ms > 0 && stall_us == 0 {
            return Err(bad(format!(
                "idle_interval_ms = {} needs the PSI triggers (trigger_stall_us > 0): nothing else would wake the loop from a rest",
                config.idle_interval_ms
            )));
        }
        if config.idle_interval_ms > MAX_IDLE_INTERVAL_MS {
            return Err(bad(format!("idle_interval_ms = {} must be at most {MAX_IDLE_INTERVAL_MS} (one hour)", config.idle_interval_ms)));
        }
        let soft_rt: Vec<&str> = config.groups.iter().filter(|g| g.role == RoleName::SoftRealTime).map(|g| g.name.as_str()).collect();
        config.controller_spec().and_then(|spec| spec.check_group_names(&soft_rt)).map_err(|e| bad(one_line(&e.to_string())))?;
        Ok(config)
    }

    /// The controller and its parameters, read from the TOML itself: through JSON a `nan`
    /// would become null and be reported as one.
    pub(crate) fn controller_spec(&self) -> std::result::Result<critmem_policy::ControllerConfig, critmem_policy::PolicyError> {
        critmem_policy::ControllerConfig::parse(&self.controller, toml::Value::Table(self.controller_config.clone()))
    }

    pub fn group_specs(&self) -> Result<Vec<GroupSpec>> {
        self.groups
            .iter()
            .map(|g| {
                Ok(GroupSpec {
                    name: g.name.clone(),
                    path: GroupPath::new(&g.cgroup)?,
                    role: match g.role {
                        RoleName::SoftRealTime => {
                            GroupRole::SoftRealTime { deadline_ns: g.deadline_ns.unwrap_or(0), bcet_ns: g.bcet_ns.unwrap_or(0) }
                        }
                        RoleName::NonRealTime => GroupRole::NonRealTime,
                    },
                    floor_bytes: g.floor_bytes,
                    create: g.create,
                })
            })
            .collect()
    }

    /// The groups' starting CPU and I/O limits, as actions.
    pub fn initial_actions(&self) -> Vec<Action> {
        self.groups.iter().enumerate().flat_map(|(id, g)| g.bandwidth.actions(id)).collect()
    }
}

/// The configuration as TOML text, checked by the agent's own parser before it is returned.
/// `name` with a relative `file.py:Class` file made absolute against `scenario`'s folder.
fn python_file_from(scenario: &Path, name: &str) -> String {
    match name.split_once(':') {
        Some((file, class)) if file.ends_with(".py") && Path::new(file).is_relative() => {
            let folder = scenario.parent().unwrap_or(Path::new("."));
            let joined = folder.join(file);
            let absolute = std::path::absolute(&joined).unwrap_or(joined);
            format!("{}:{class}", absolute.display())
        }
        _ => name.to_string(),
    }
}

pub fn config_from_scenario(scenario: &Scenario) -> Result<String> {
    let bad = |reason: &str| Error::Config { path: scenario.source_name.clone().into(), reason: reason.to_string() };
    let (Some(memory), Some(control)) = (&scenario.memory, &scenario.control) else {
        return Err(bad("an agent configuration needs the scenario's [memory], [[group]] and [control]"));
    };
    let mut params = match toml::Value::try_from(&control.config) {
        Ok(toml::Value::Table(t)) => t,
        _ => return Err(bad("the controller's configuration has no TOML form")),
    };
    let mut controller = params.remove("controller").and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default();
    if let critmem_policy::ControllerKind::External = control.config.kind() {
        // A Python class: its name and its own parameters, a file named from where the agent
        // reads its configuration (anywhere), not from the scenario's folder.
        controller = python_file_from(Path::new(&scenario.source_name), &control.config.external_name().unwrap_or_default());
        params = match params.remove("params") {
            Some(toml::Value::Table(t)) => t,
            _ => toml::Table::new(),
        };
    }
    let mib = |pages: u64| pages as f64 * memory.page_bytes as f64 / 1_048_576.0;
    let ms = |ns: u64| ns as f64 / 1e6;
    let mut groups = Vec::new();
    for g in &memory.groups {
        let mut t = toml::Table::new();
        t.insert("name".into(), g.name.clone().into());
        t.insert("cgroup".into(), format!("critmem/{}", g.name).into());
        t.insert("floor_mb".into(), mib(g.floor_pages).into());
        match g.role {
            GroupRole::SoftRealTime { deadline_ns, bcet_ns } => {
                t.insert("role".into(), "soft-rt".into());
                t.insert("deadline_ms".into(), ms(deadline_ns).into());
                t.insert("bcet_ms".into(), ms(bcet_ns).into());
            }
            GroupRole::NonRealTime => {
                t.insert("role".into(), "non-rt".into());
            }
        }
        t.insert("create".into(), true.into());
        let b = g.bandwidth;
        if let Some(m) = b.cpu_millicpus {
            t.insert("cpu_millicpus".into(), i64::try_from(m).map_err(|_| bad("cpu_millicpus is too large"))?.into());
        }
        for (key, rate) in [("io_read_mb_per_s", b.io_read_bytes_per_s), ("io_write_mb_per_s", b.io_write_bytes_per_s)] {
            if let Some(bytes) = rate {
                t.insert(key.into(), (bytes as f64 / 1e6).into());
            }
        }
        groups.push(toml::Value::Table(t));
    }
    let total_bytes = u64::from(memory.total_frames) * memory.page_bytes;
    let mut top = toml::Table::new();
    top.insert("controller".into(), controller.into());
    top.insert("total_memory_bytes".into(), i64::try_from(total_bytes).map_err(|_| bad("the memory is too large"))?.into());
    top.insert("socket".into(), DEFAULT_SOCKET.into());
    top.insert("journal".into(), DEFAULT_JOURNAL.into());
    top.insert("controller_config".into(), params.into());
    top.insert("group".into(), groups.into());
    let body = toml::to_string(&top).map_err(|e| bad(&e.to_string()))?;
    let text = format!(
        "# critmem agent configuration from {}: its controller with every parameter written out,\n\
         # over its groups, each a cgroup the agent creates under critmem/ and removes again.\n\
         # The agent ticks at the controller's interval_ns ({} ms in the scenario).\n{body}",
        scenario.source_name,
        control.interval.as_ms_f64()
    );
    AgentConfig::parse(&text, Path::new(&scenario.source_name))?;
    Ok(text)
}

/// What differs between the `running` configuration and a `reloaded` one that only a restart
/// can apply, one phrase per key (empty: the reload can be applied). The socket, journal and
/// metrics endpoint are bound once, the budget is the platform's from its start, and the
/// triggers' parameters (the idle interval among them) are set once; the controller and its parameters (its interval among
/// them) and the groups ([`group_changes_of`]) are what a reload changes.
pub fn restart_only_changes(running: &AgentConfig, reloaded: &AgentConfig) -> Vec<String> {
    let mut changed = Vec::new();
    let mut key = |name: &str, differs: bool| {
        if differs {
            changed.push(name.to_owned());
        }
    };
    key("total_memory_bytes", running.total_memory_bytes != reloaded.total_memory_bytes);
    key("socket", running.socket != reloaded.socket);
    key("socket_gid", running.socket_gid != reloaded.socket_gid);
    key("journal", running.journal != reloaded.journal);
    key("metrics_address", running.metrics_address != reloaded.metrics_address);
    key("metrics_file", running.metrics_file != reloaded.metrics_file);
    key("trigger_stall_us", running.trigger_stall_us != reloaded.trigger_stall_us);
    key("trigger_window_us", running.trigger_window_us != reloaded.trigger_window_us);
    key("idle_interval_ms", running.idle_interval_ms != reloaded.idle_interval_ms);
    changed
}

/// The groups a reload lets go of and the groups it takes on, by name: a group whose
/// definition changed is in both (restored, then adopted anew). Order alone changes nothing.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GroupChanges {
    pub removed: Vec<String>,
    pub added: Vec<String>,
    /// One line for the log (see [`group_changes`]).
    pub described: String,
}

impl GroupChanges {
    pub fn is_empty(&self) -> bool {
        self.removed.is_empty() && self.added.is_empty()
    }
}

pub fn group_changes_of(running: &[GroupConfig], reloaded: &[GroupConfig]) -> GroupChanges {
    let same = |g: &GroupConfig, others: &[GroupConfig]| others.iter().any(|o| o == g);
    let removed: Vec<String> = running.iter().filter(|g| !same(g, reloaded)).map(|g| g.name.clone()).collect();
    let added: Vec<String> = reloaded.iter().filter(|g| !same(g, running)).map(|g| g.name.clone()).collect();
    let described =
        if removed.is_empty() && added.is_empty() { String::new() } else { group_changes(running, reloaded).unwrap_or_default() };
    GroupChanges { removed, added, described }
}

/// The groups added, removed or changed, in the reloaded file's order (then the removed ones in
/// the running order); `None` when the groups are the same, in the same order.
fn group_changes(running: &[GroupConfig], reloaded: &[GroupConfig]) -> Option<String> {
    if running == reloaded {
        return None;
    }
    let find = |groups: &[GroupConfig], name: &str| groups.iter().position(|g| g.name == name);
    let mut parts = Vec::new();
    for g in reloaded {
        match find(running, &g.name) {
            None => parts.push(format!("{:?} added", g.name)),
            Some(i) if running[i] != *g => parts.push(format!("{:?} changed", g.name)),
            Some(_) => {}
        }
    }
    parts.extend(running.iter().filter(|g| find(reloaded, &g.name).is_none()).map(|g| format!("{:?} removed", g.name)));
    if parts.is_empty() {
        parts.push("reordered".to_owned());
    }
    Some(format!("[[group]] ({})", parts.join(", ")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use critmem_policy::RoleName;

    fn example(name: &str) -> Scenario {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples").join(name);
        let text = std::fs::read_to_string(&path).expect("example exists");
        critmem_core::load_toml_str(&text, name).expect("example loads")
    }

    #[test]
    fn every_example_with_a_controller_gives_a_configuration_of_its_groups_and_controller() {
        for name in ["linux-sara.toml", "sara-sphinx.toml", "sara-opencv.toml", "linux-command.toml"] {
            let scenario = example(name);
            let text = config_from_scenario(&scenario).expect("converts");
            let config = AgentConfig::parse(&text, Path::new(name)).expect("the agent reads it");
            let memory = scenario.memory.as_ref().expect("has memory");
            let control = scenario.control.as_ref().expect("has control");
            assert_eq!(config.controller, control.config.name());
            assert_eq!(config.total_memory_bytes, u64::from(memory.total_frames) * memory.page_bytes);
            assert_eq!(config.groups.len(), memory.groups.len());
            for (g, decl) in config.groups.iter().zip(&memory.groups) {
                assert_eq!(g.name, decl.name);
                assert_eq!(g.cgroup, format!("critmem/{}", decl.name));
                assert!(g.create);
                assert_eq!(g.floor_bytes, decl.floor_pages * memory.page_bytes);
                match decl.role {
                    GroupRole::SoftRealTime { deadline_ns, bcet_ns } => {
                        assert_eq!(g.role, RoleName::SoftRealTime);
                        assert_eq!((g.deadline_ns, g.bcet_ns), (Some(deadline_ns), Some(bcet_ns)));
                    }
                    GroupRole::NonRealTime => assert_eq!(g.role, RoleName::NonRealTime),
                }
            }
            // The controller the agent builds is the scenario's, parameter for parameter.
            let rebuilt = critmem_policy::ControllerConfig::parse(&config.controller, toml::Value::Table(config.controller_config.clone()))
                .expect("parameters parse");
            assert_eq!(serde_json::to_value(&rebuilt).unwrap(), serde_json::to_value(&control.config).unwrap(), "{name}");
        }
    }

    const RUNNING: &str = r#"
controller = "sara"
total_memory_bytes = 1073741824
socket = "/run/critmem/jobs.sock"
journal = "/var/lib/critmem/journal.jsonl"
[controller_config]
interval_ns = 5000000
[[group]]
name = "rt"
cgroup = "critmem/rt"
role = "soft-rt"
floor_mb = 64
deadline_ms = 20
bcet_ms = 2
[[group]]
name = "batch"
cgroup = "critmem/batch"
role = "non-rt"
floor_mb = 32
"#;

    fn changes(edited: &str) -> Vec<String> {
        let running = AgentConfig::parse(RUNNING, Path::new("agent.toml")).unwrap();
        let reloaded = AgentConfig::parse(edited, Path::new("agent.toml")).unwrap();
        restart_only_changes(&running, &reloaded)
    }

    #[test]
    fn a_reload_may_change_the_controller_and_its_parameters_and_nothing_else() {
        assert!(changes(RUNNING).is_empty());
        assert!(changes(&RUNNING.replace("interval_ns = 5000000", "interval_ns = 10000000\nstep_bytes = 4096")).is_empty());
        assert!(changes(&RUNNING.replace("\"sara\"", "\"greedy\"").replace("interval_ns = 5000000", "")).is_empty());
        for (edit, want) in [
            (RUNNING.replace("1073741824", "2147483648"), vec!["total_memory_bytes"]),
            (RUNNING.replace("jobs.sock", "other.sock").replace("journal.jsonl", "j2.jsonl"), vec!["socket", "journal"]),
            (
                RUNNING.replace("controller = \"sara\"", "controller = \"sara\"\nmetrics_address = \"127.0.0.1:9464\"\nsocket_gid = 5"),
                vec!["socket_gid", "metrics_address"],
            ),
            (RUNNING.replace("controller = \"sara\"", "controller = \"sara\"\ntrigger_stall_us = 0"), vec!["trigger_stall_us"]),
            (RUNNING.replace("controller = \"sara\"", "controller = \"sara\"\nidle_interval_ms = 1000"), vec!["idle_interval_ms"]),
        ] {
            assert_eq!(changes(&edit), want);
        }
    }

    fn group_edit(edited: &str) -> GroupChanges {
        let running = AgentConfig::parse(RUNNING, Path::new("agent.toml")).unwrap();
        let reloaded = AgentConfig::parse(edited, Path::new("agent.toml")).unwrap();
        assert!(restart_only_changes(&running, &reloaded).is_empty(), "groups change without a restart");
        group_changes_of(&running.groups, &reloaded.groups)
    }

    #[test]
    fn a_reload_adds_removes_and_replaces_groups_by_name() {
        let names = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert!(group_edit(RUNNING).is_empty());
        let changed = group_edit(&RUNNING.replace("floor_mb = 32", "floor_mb = 33"));
        assert_eq!((changed.removed, changed.added), (names(&["batch"]), names(&["batch"])));
        assert_eq!(changed.described, "[[group]] (\"batch\" changed)");
        let added = group_edit(&format!("{RUNNING}[[group]]\nname = \"new\"\ncgroup = \"critmem/new\"\nrole = \"non-rt\"\nfloor_mb = 1\n"));
        assert_eq!((added.removed, added.added), (vec![], names(&["new"])));
        let swapped = group_edit(&RUNNING[..RUNNING.rfind("[[group]]").unwrap()].replace("\"rt\"", "\"rt2\""));
        assert_eq!((swapped.removed, swapped.added), (names(&["rt", "batch"]), names(&["rt2"])));
        // The same groups in another order are the same groups.
        let (head, groups) = RUNNING.split_at(RUNNING.find("[[group]]").unwrap());
        let (rt, batch) = groups.split_at(groups.rfind("[[group]]").unwrap());
        assert!(group_edit(&format!("{head}{batch}\n{rt}")).is_empty());
    }

    /// A group's starting CPU and I/O limits: read from the configuration, written into one
    /// made from a scenario, and refused below what a platform applies.
    #[test]
    fn starting_bandwidth_limits_are_read_and_carried_from_a_scenario() {
        let text = example_text("linux-sara.toml").replace("floor_mb = 32\n", "floor_mb = 32\ncpu_millicpus = 500\nio_read_mb_per_s = 4\n");
        let scenario = critmem_core::load_toml_str(&text, "limited.toml").expect("loads");
        let limited: Vec<usize> = scenario
            .memory
            .as_ref()
            .unwrap()
            .groups
            .iter()
            .enumerate()
            .filter(|(_, g)| g.bandwidth.cpu_millicpus.is_some())
            .map(|(i, _)| i)
            .collect();
        assert!(!limited.is_empty(), "the example has a group with floor_mb = 32");
        let config = AgentConfig::parse(&config_from_scenario(&scenario).unwrap(), Path::new("limited.toml")).unwrap();
        for &i in &limited {
            assert_eq!(
                config.groups[i].bandwidth,
                BandwidthKnobs { cpu_millicpus: Some(500), io_read_bytes_per_s: Some(4_000_000), io_write_bytes_per_s: None }
            );
        }
        let actions = config.initial_actions();
        assert_eq!(actions.len(), 2 * limited.len());
        assert!(actions.contains(&Action::SetCpuMax { group: limited[0], millicpus: Some(500) }));
        let head = "controller = \"greedy\"\ntotal_memory_bytes = 1000000000\nsocket = \"/run/j.sock\"\njournal = \"/run/j.jsonl\"\n[[group]]\nname = \"b\"\ncgroup = \"critmem/b\"\nrole = \"non-rt\"\nfloor_mb = 1\n";
        for (key, value) in [("cpu_millicpus", "5"), ("io_read_mb_per_s", "0.5"), ("io_write_mb_per_s", "nan")] {
            let e = AgentConfig::parse(&format!("{head}{key} = {value}\n"), Path::new("bad.toml")).unwrap_err().to_string();
            assert!(e.contains(key) && !e.contains('\n'), "{e}");
        }
    }

    fn example_text(name: &str) -> String {
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples").join(name)).expect("example exists")
    }

    #[test]
    fn a_scenario_without_a_controller_is_refused_in_one_line() {
        let e = config_from_scenario(&example("rm-textbook.toml")).unwrap_err().to_string();
        assert!(e.contains("needs the scenario's [memory], [[group]] and [control]") && !e.contains('\n'), "{e}");
    }
}

#[cfg(test)]
mod reference {
    use crate::agent_config::AgentConfig;
    use std::path::Path;

    fn keys_of_table(doc: &str, heading: &str) -> Vec<String> {
        let section = doc.split(heading).nth(1).expect("the reference has the section");
        let table = section.split("\n## ").next().expect("a section");
        table.lines().filter_map(|l| l.strip_prefix("| `")).filter_map(|l| l.split('`').next()).map(str::to_string).collect()
    }

    #[test]
    fn every_key_the_reference_names_is_one_the_agent_reads() {
        let doc = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/agent-config.md")).expect("reference");
        let top = keys_of_table(&doc, "## Top level");
        let group = keys_of_table(&doc, "## `[[group]]`");
        // A file with every documented key set parses (so each exists) ...
        let value = |k: &str| match k {
            "controller" => "\"sara\"".to_string(),
            "controller_config" => "{ step_bytes = 1048576 }".to_string(),
            "socket" => "\"/run/critmem/jobs.sock\"".to_string(),
            "journal" => "\"/var/lib/critmem/journal.jsonl\"".to_string(),
            "metrics_address" => "\"127.0.0.1:9464\"".to_string(),
            "metrics_file" => "\"/var/lib/critmem/m.prom\"".to_string(),
            "trigger_window_us" => "2000000".to_string(),
            "trigger_stall_us" => "100000".to_string(),
            "socket_gid" => "0".to_string(),
            "idle_interval_ms" => "1000".to_string(),
            _ => "4000000000".to_string(),
        };
        let mut text: String = top.iter().filter(|k| *k != "metrics_file").map(|k| format!("{k} = {}\n", value(k))).collect();
        text += "[[group]]\n";
        for k in &group {
            text += &format!(
                "{k} = {}\n",
                match k.as_str() {
                    "name" => "\"rt\"",
                    "cgroup" => "\"critmem/rt\"",
                    "role" => "\"soft-rt\"",
                    "create" => "true",
                    "cpu_millicpus" => "500",
                    _ => "2",
                }
            );
        }
        AgentConfig::parse(&text, Path::new("all-keys.toml")).expect("every documented key is read");
        // ... and one more, undocumented, key is refused.
        let extra = text.replacen("[[group]]", "undocumented_key = 1\n[[group]]", 1);
        assert!(AgentConfig::parse(&extra, Path::new("extra.toml")).is_err());
        assert!(top.len() >= 10 && group.len() >= 7, "{top:?} {group:?}");
    }
}
