//! The agent daemon: configuration file, start-up checks, the control loop over a
//! [`LinuxPlatform`], and restore on SIGINT/SIGTERM.
//!
//! Configuration (TOML):
//!
//! ```toml
//! controller = "sara"                 # any of critmem_policy::CONTROLLER_NAMES
//! total_memory_bytes = 2147483648     # the budget the controller divides
//! socket = "/run/critmem/jobs.sock"   # job socket (directory root-owned, socket 0660)
//! journal = "/var/lib/critmem/journal.jsonl"
//! metrics_address = "127.0.0.1:9464"  # or metrics_file = "/var/lib/critmem/metrics.prom"
//!
//! [controller_config]                 # the controller's own parameters; {} for defaults
//! step_bytes = 2097152
//!
//! [[group]]
//! name = "rt"
//! cgroup = "critmem/rt"               # relative to the cgroup root(s)
//! role = "soft-real-time"             # or "non-real-time"
//! floor_bytes = 67108864
//! deadline_ns = 20000000              # soft-real-time only
//! bcet_ns = 2000000                   # soft-real-time only
//! create = false                      # true: create it (and remove it on restore)
//! ```

use crate::cgroup::{open_backend, GroupPath};
use crate::error::{Error, Result};
use crate::layout::detect_layout_in;
use crate::metrics::{MetricsSink, Publisher};
use crate::platform::{ControlLoop, CostSummary, GroupSpec, LinuxPlatform, PlatformOptions};
use crate::procfs::{Hierarchy, ProcFs};
use crate::protocol::{JobServer, JobServerConfig, ReportingGroup};
use crate::psi::UNPRIVILEGED_WINDOW_STEP_US;
use critmem_policy::GroupRole;
use nix::sys::signal::{SigSet, Signal};
use nix::sys::signalfd::{SfdFlags, SignalFd};
use serde::{Deserialize, Serialize};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentConfig {
    pub controller: String,
    #[serde(default)]
    pub controller_config: toml::Table,
    pub total_memory_bytes: u64,
    pub socket: PathBuf,
    /// Group allowed to connect to the socket; root's group if absent.
    #[serde(default)]
    pub socket_gid: Option<u32>,
    pub journal: PathBuf,
    #[serde(default)]
    pub metrics_address: Option<SocketAddr>,
    #[serde(default)]
    pub metrics_file: Option<PathBuf>,
    /// Wake-up hint: `some` memory stall within a window (multiple of 2 s without
    /// CAP_SYS_RESOURCE). 0 disables the triggers.
    #[serde(default = "default_trigger_stall_us")]
    pub trigger_stall_us: u64,
    #[serde(default = "default_trigger_window_us")]
    pub trigger_window_us: u64,
    #[serde(rename = "group")]
    pub groups: Vec<GroupConfig>,
}

fn default_trigger_stall_us() -> u64 {
    100_000
}

fn default_trigger_window_us() -> u64 {
    UNPRIVILEGED_WINDOW_STEP_US
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RoleName {
    SoftRealTime,
    NonRealTime,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GroupConfig {
    pub name: String,
    pub cgroup: String,
    pub role: RoleName,
    pub floor_bytes: u64,
    #[serde(default)]
    pub deadline_ns: Option<u64>,
    #[serde(default)]
    pub bcet_ns: Option<u64>,
    #[serde(default)]
    pub create: bool,
}

impl AgentConfig {
    pub fn load(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path).map_err(|e| Error::io("read configuration", path, e))?;
        Self::parse(&text, path)
    }

    pub fn parse(text: &str, path: &Path) -> Result<Self> {
        let bad = |reason: String| Error::Config { path: path.to_owned(), reason };
        let config: AgentConfig = toml::from_str(text).map_err(|e| bad(e.to_string().split_whitespace().collect::<Vec<_>>().join(" ")))?;
        if config.groups.is_empty() {
            return Err(bad("no [[group]] configured".into()));
        }
        if config.metrics_address.is_some() && config.metrics_file.is_some() {
            return Err(bad("set metrics_address or metrics_file, not both".into()));
        }
        for (i, g) in config.groups.iter().enumerate() {
            if config.groups[..i].iter().any(|o| o.name == g.name) {
                return Err(bad(format!("group name {:?} appears twice", g.name)));
            }
            GroupPath::new(&g.cgroup)?;
            match (g.role, g.deadline_ns, g.bcet_ns) {
                (RoleName::SoftRealTime, Some(_), Some(_)) | (RoleName::NonRealTime, None, None) => {}
                (RoleName::SoftRealTime, _, _) => return Err(bad(format!("group {:?}: soft-real-time needs deadline_ns and bcet_ns", g.name))),
                (RoleName::NonRealTime, _, _) => return Err(bad(format!("group {:?}: non-real-time takes no deadline_ns or bcet_ns", g.name))),
            }
        }
        config.controller_spec()?;
        Ok(config)
    }

    /// The controller's configuration as JSON (any serde source works for the factory).
    fn controller_spec(&self) -> Result<critmem_policy::ControllerConfig> {
        let value = serde_json::to_value(&self.controller_config).map_err(|e| Error::Config { path: PathBuf::new(), reason: e.to_string() })?;
        critmem_policy::ControllerConfig::parse(&self.controller, value).map_err(|e| Error::Config { path: PathBuf::from("controller"), reason: e.to_string() })
    }

    pub fn group_specs(&self) -> Result<Vec<GroupSpec>> {
        self.groups
            .iter()
            .map(|g| {
                Ok(GroupSpec {
                    name: g.name.clone(),
                    path: GroupPath::new(&g.cgroup)?,
                    role: match g.role {
                        RoleName::SoftRealTime => GroupRole::SoftRealTime { deadline_ns: g.deadline_ns.unwrap_or(0), bcet_ns: g.bcet_ns.unwrap_or(0) },
                        RoleName::NonRealTime => GroupRole::NonRealTime,
                    },
                    floor_bytes: g.floor_bytes,
                    create: g.create,
                })
            })
            .collect()
    }
}

/// How the agent runs besides its configuration.
#[derive(Clone, Debug, Default)]
pub struct RunOptions {
    pub dry_run: bool,
    /// Stop (and restore) after this long; forever when `None`.
    pub duration: Option<Duration>,
}

/// What a run did, printed as JSON at exit.
#[derive(Clone, Debug, Serialize)]
pub struct AgentSummary {
    pub controller: String,
    pub backend: String,
    pub stopped_by: String,
    pub ticks: u64,
    pub tick_cost_mean_ns: u64,
    pub tick_cost_p99_ns: u64,
    pub tick_cost_max_ns: u64,
    pub early_wakes: u64,
    pub overruns: u64,
    pub writes_ok: u64,
    pub writes_failed: u64,
    pub jobs_released: u64,
    pub jobs_completed: u64,
    pub restored_files: usize,
    pub removed_dirs: usize,
    pub recovered_from_crash: bool,
}

/// Blocks SIGINT and SIGTERM in this thread (and every thread it starts afterwards) and
/// returns a non-blocking descriptor they can be read from: the loop checks it every tick.
/// Call before any thread is started.
pub fn shutdown_signals() -> Result<SignalFd> {
    let mut mask = SigSet::empty();
    mask.add(Signal::SIGINT);
    mask.add(Signal::SIGTERM);
    mask.thread_block().map_err(|e| Error::io("block signals", Path::new("sigprocmask"), e.into()))?;
    SignalFd::with_flags(&mask, SfdFlags::SFD_NONBLOCK | SfdFlags::SFD_CLOEXEC).map_err(|e| Error::io("signalfd", Path::new("signalfd"), e.into()))
}

/// Runs the agent until a signal, `options.duration`, or an error; restores every change
/// before returning (also on error).
pub fn run(config: &AgentConfig, options: &RunOptions, signals: &SignalFd) -> Result<AgentSummary> {
    let proc_root = PathBuf::from("/proc");
    let layout = detect_layout_in(&proc_root)?;
    if !options.dry_run && !nix::unistd::geteuid().is_root() {
        let root = match &layout {
            crate::layout::Layout::V2 { root } => root.clone(),
            crate::layout::Layout::Hybrid { memory_root, .. } => memory_root.clone(),
        };
        return Err(Error::NotRoot { path: root });
    }
    let backend = open_backend(&layout)?;
    let backend_name = backend.name().to_owned();
    let specs = config.group_specs()?;
    let mut controller = config.controller_spec()?.build().map_err(|e| Error::Config { path: PathBuf::from("controller"), reason: e.to_string() })?;
    let server = if options.dry_run {
        None
    } else {
        Some(JobServer::bind(JobServerConfig {
            socket_path: config.socket.clone(),
            socket_gid: config.socket_gid,
            groups: specs.iter().map(|s| ReportingGroup { name: s.name.clone(), cgroup: s.path.to_string() }).collect(),
            hierarchy: Hierarchy::for_layout(&layout),
            proc: ProcFs::new(proc_root.clone()),
            max_connections: 64,
        })?)
    };
    let mut platform = LinuxPlatform::open(
        backend,
        specs,
        PlatformOptions {
            total_memory_bytes: config.total_memory_bytes,
            dry_run: options.dry_run,
            journal_path: Some(config.journal.clone()),
            job_server: server,
            proc_root,
        },
    )?;
    platform.set_stall_inputs(|role| controller.stall_inputs(role));
    let recovered = platform.recovered().is_some();
    tracing::info!(controller = controller.name(), backend = %backend_name, groups = config.groups.len(), dry_run = options.dry_run, interval_ns = controller.interval_ns(), "agent started");
    let mut control = ControlLoop::new(controller.interval_ns());
    if config.trigger_stall_us > 0 && !options.dry_run {
        match platform.arm_triggers(config.trigger_stall_us, config.trigger_window_us) {
            Ok(triggers) => control.triggers = triggers,
            Err(e) => tracing::warn!(error = %e, "PSI triggers unavailable; ticking on the timer only"),
        }
    }
    let mut publisher = match (&config.metrics_address, &config.metrics_file) {
        (Some(addr), _) => Some(Publisher::new(MetricsSink::serve(*addr)?, Duration::from_secs(1))),
        (None, Some(path)) => Some(Publisher::new(MetricsSink::File(path.clone()), Duration::from_secs(1))),
        (None, None) => None,
    };
    let started = Instant::now();
    let mut stopped_by = String::from("duration");
    let result = control.run(
        &mut platform,
        controller.as_mut(),
        || {
            if let Ok(Some(info)) = signals.read_signal() {
                stopped_by = Signal::try_from(info.ssi_signo as i32).map_or_else(|_| info.ssi_signo.to_string(), |s| s.as_str().to_owned());
                return true;
            }
            options.duration.is_some_and(|d| started.elapsed() >= d)
        },
        |platform, applied, stats| {
            for action in applied {
                tracing::debug!(?action, "applied");
            }
            if let Some(p) = publisher.as_mut() {
                p.maybe_publish(platform, stats);
            }
        },
    );
    if let Err(e) = &result {
        stopped_by = format!("error: {e}");
    }
    if let Some(p) = publisher.as_mut() {
        if let Err(e) = p.sink.publish(crate::metrics::render(&platform, &control.stats)) {
            tracing::warn!(error = %e, "cannot publish final metrics");
        }
    }
    let (released, completed) = (0..config.groups.len()).fold((0, 0), |(r, c), id| {
        let j = platform.job_counts(id);
        (r + j.released, c + j.completed)
    });
    let stats = platform.stats().clone();
    let restore = platform.restore(Duration::from_secs(10))?;
    tracing::info!(restored = restore.restored.len(), removed_dirs = restore.removed_dirs.len(), failures = restore.failures.len(), "restored every original value");
    result?;
    let cost: CostSummary = control.stats.summary();
    Ok(AgentSummary {
        controller: controller.name().to_owned(),
        backend: backend_name,
        stopped_by,
        ticks: cost.ticks,
        tick_cost_mean_ns: cost.mean_ns,
        tick_cost_p99_ns: cost.p99_ns,
        tick_cost_max_ns: cost.max_ns,
        early_wakes: control.stats.early_wakes,
        overruns: control.stats.overruns,
        writes_ok: stats.writes_ok,
        writes_failed: stats.writes_failed,
        jobs_released: released,
        jobs_completed: completed,
        restored_files: restore.restored.len(),
        removed_dirs: restore.removed_dirs.len(),
        recovered_from_crash: recovered,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const CONFIG: &str = r#"
controller = "sara"
total_memory_bytes = 1073741824
socket = "/run/critmem/jobs.sock"
journal = "/var/lib/critmem/journal.jsonl"
metrics_address = "127.0.0.1:9464"

[controller_config]
step_bytes = 2097152

[[group]]
name = "rt"
cgroup = "critmem/rt"
role = "soft-real-time"
floor_bytes = 67108864
deadline_ns = 20000000
bcet_ns = 2000000

[[group]]
name = "batch"
cgroup = "critmem/batch"
role = "non-real-time"
floor_bytes = 33554432
create = true
"#;

    #[test]
    fn the_documented_configuration_parses() {
        let config = AgentConfig::parse(CONFIG, Path::new("agent.toml")).unwrap();
        assert_eq!(config.controller, "sara");
        let specs = config.group_specs().unwrap();
        assert_eq!(specs[0].role, GroupRole::SoftRealTime { deadline_ns: 20_000_000, bcet_ns: 2_000_000 });
        assert!(specs[1].create && !specs[0].create);
        assert_eq!(config.trigger_window_us, 2_000_000);
    }

    #[test]
    fn the_shipped_example_configuration_parses() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("dist/agent.example.toml");
        let config = AgentConfig::load(&path).unwrap();
        assert_eq!(config.group_specs().unwrap().len(), 2);
    }

    #[test]
    fn bad_configurations_are_one_line_errors() {
        for (edit, want) in [
            (CONFIG.replace("controller = \"sara\"", "controller = \"nope\""), "nope"),
            (CONFIG.replace("step_bytes", "stepbytes"), "stepbytes"),
            (CONFIG.replace("deadline_ns = 20000000\n", ""), "needs deadline_ns"),
            (CONFIG.replace("critmem/batch", "../x"), "invalid cgroup path"),
            (CONFIG.replace("floor_bytes = 33554432", "floor_bytes = \"x\""), "floor_bytes"),
        ] {
            let err = AgentConfig::parse(&edit, Path::new("agent.toml")).unwrap_err().to_string();
            assert!(err.contains(want), "{err}");
            assert!(!err.contains('\n'), "{err}");
        }
    }
}
