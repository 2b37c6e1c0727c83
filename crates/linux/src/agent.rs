//! The agent daemon: configuration file, start-up checks, the control loop over a
//! [`crate::platform::LinuxPlatform`], restore on SIGINT/SIGTERM, configuration reload on
//! SIGHUP, and systemd's readiness, status and watchdog notifications ([`ServiceNotifier`]).
//!
//! Configuration (TOML); groups are spelled as in scenario files, times in decimal
//! milliseconds and sizes in MiB:
//!
//! ```toml
//! controller = "sara"                 # any of critmem_policy::CONTROLLERS
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
//! role = "soft-rt"                    # or "non-rt"
//! floor_mb = 64                       # the smallest limit ever applied
//! deadline_ms = 20                    # soft-rt only
//! bcet_ms = 2                         # soft-rt only
//! create = false                      # true: create it (and remove it on restore)
//! ```
//!
//! The older spelling (`role = "soft-real-time"` / `"non-real-time"`, `floor_bytes`,
//! `deadline_ns`, `bcet_ns`) is still read; each use is reported once in
//! [`AgentConfig::deprecations`], and giving both spellings of one value is an error.

use crate::error::{Error, Result};
use crate::metrics::{MetricsSink, Publisher};
use crate::one_line;
use crate::platform::{CostSummary, GroupSpec};
use crate::protocol::ProtocolStats;
use crate::session::{JobSocket, SessionBuilder, SessionPlan, TriggerSpec};
use nix::sys::signal::{SigSet, Signal};
use nix::sys::signalfd::{SfdFlags, SignalFd};
use serde::Serialize;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub use crate::agent_config::{AgentConfig, GroupConfig};

/// How the agent runs besides its configuration.
#[derive(Clone, Debug, Default)]
pub struct RunOptions {
    pub dry_run: bool,
    /// Stop (and restore) after this long; forever when `None`.
    pub duration: Option<Duration>,
    /// The file SIGHUP reads again (see [`reload`]); without one SIGHUP is logged and ignored.
    pub config_path: Option<PathBuf>,
    /// Tell the service manager how the agent is doing when `NOTIFY_SOCKET` is set
    /// ([`ServiceNotifier::from_env`]).
    pub notify: bool,
    /// Run the control loop's thread under SCHED_FIFO at this priority (1–99): no ordinary
    /// task can then delay a tick. `None` leaves it at the agent's nice value.
    pub realtime_priority: Option<u8>,
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
    /// CPU time the loop's thread used per tick (the cost figures above are wall time).
    pub tick_cpu_mean_ns: u64,
    /// How late ticks started against their schedule (see [`crate::control_loop::LoopStats`]).
    pub tick_lateness_p99_ns: u64,
    pub tick_lateness_max_ns: u64,
    pub early_wakes: u64,
    /// Quiet ticks followed by a rest (see `idle_interval_ms`), and rests a job report ended.
    pub idle_rests: u64,
    pub job_wakes: u64,
    pub overruns: u64,
    pub writes_ok: u64,
    pub writes_failed: u64,
    /// CPU time the writer threads used in the limit writes: mostly the kernel's reclaim.
    pub write_cpu_ns: u64,
    pub jobs_released: u64,
    pub jobs_completed: u64,
    /// Job reports per group, in the configuration's order.
    pub groups: Vec<GroupJobs>,
    /// What the job socket saw: connections, messages accepted, malformed and refused.
    pub job_socket: ProtocolStats,
    pub restored_files: usize,
    pub removed_dirs: usize,
    pub recovered_from_crash: bool,
}

/// One group's job reports over a run.
#[derive(Clone, Debug, Serialize)]
pub struct GroupJobs {
    pub name: String,
    pub released: u64,
    pub completed: u64,
    pub dropped: u64,
}

/// Blocks SIGINT, SIGTERM and SIGHUP in this thread (and every thread it starts afterwards)
/// and returns a non-blocking descriptor they can be read from: the loop checks it every tick.
/// SIGHUP too: the agent reloads its configuration on it, and for the other tools a closed
/// terminal must not end them without their restore. Call before any thread is started.
pub fn shutdown_signals() -> Result<SignalFd> {
    let mut mask = SigSet::empty();
    mask.add(Signal::SIGINT);
    mask.add(Signal::SIGTERM);
    mask.add(Signal::SIGHUP);
    mask.thread_block().map_err(|e| Error::io("block signals", Path::new("sigprocmask"), e.into()))?;
    SignalFd::with_flags(&mask, SfdFlags::SFD_NONBLOCK | SfdFlags::SFD_CLOEXEC)
        .map_err(|e| Error::io("signalfd", Path::new("signalfd"), e.into()))
}

/// The name of a signal waiting on `signals` (e.g. "SIGTERM"), taking it; `None` if none is.
pub fn pending_signal(signals: &SignalFd) -> Option<String> {
    let info = signals.read_signal().ok()??;
    Some(Signal::try_from(info.ssi_signo as i32).map_or_else(|_| info.ssi_signo.to_string(), |s| s.as_str().to_owned()))
}

/// Runs the agent until SIGINT, SIGTERM, `options.duration`, or an error; restores every
/// change before returning (also on error). SIGHUP reloads the configuration ([`reload`]).
pub fn run(config: &AgentConfig, options: &RunOptions, signals: &SignalFd) -> Result<AgentSummary> {
    run_in(SessionBuilder::new(), config, options, signals)
}

/// Puts the calling thread (the control loop's) under SCHED_FIFO at `priority`. Called once
/// the session has started, so the threads it started (cgroup writes, which may reclaim for
/// long; metrics) keep the agent's ordinary policy and cannot starve the workloads. Without
/// the privilege the agent warns and runs on at its nice value.
fn control_thread_realtime(priority: u8) {
    match crate::clock::run_current_thread_fifo(priority) {
        Ok(()) => tracing::info!(priority, "control loop runs under SCHED_FIFO"),
        Err(e) => {
            tracing::warn!(priority, error = %e, "cannot run the control loop under SCHED_FIFO (needs CAP_SYS_NICE and real-time runtime in the agent's CPU cgroup); it runs at the agent's nice value")
        }
    }
}

/// The controller a configuration asks for, and the interval it ticks at.
fn build_controller(config: &AgentConfig) -> Result<(Box<dyn critmem_policy::Controller + Send>, u64)> {
    let controller = config
        .controller_spec()
        .map(|spec| spec.build())
        .map_err(|e| Error::Config { path: PathBuf::from("controller"), reason: one_line(&e.to_string()) })?;
    let interval_ns = controller.interval_ns();
    Ok((controller, interval_ns))
}

/// [`run`] on the machine `session` describes (its `/proc`, cgroup roots and clock).
pub fn run_in(session: SessionBuilder, config: &AgentConfig, options: &RunOptions, signals: &SignalFd) -> Result<AgentSummary> {
    let host = session.dry_run(options.dry_run).connect()?;
    let backend_name = host.backend().name().to_owned();
    let clock = host.clock().clone();
    let (controller, interval_ns) = build_controller(config)?;
    let controller_name = controller.name().to_owned();
    // Bound before the platform changes anything: a port in use must not end the agent
    // after its changes and before the loop that restores them.
    let sink = match (&config.metrics_address, &config.metrics_file) {
        (Some(addr), _) => Some(MetricsSink::serve(*addr)?),
        (None, Some(path)) => Some(MetricsSink::File(path.clone())),
        (None, None) => None,
    };
    let mut notifier = if options.notify { ServiceNotifier::from_env() } else { ServiceNotifier::new(false, None) };
    let mut session = host.start(SessionPlan {
        groups: config.group_specs()?,
        initial_actions: config.initial_actions(),
        total_memory_bytes: config.total_memory_bytes,
        journal: Some(config.journal.clone()),
        job_socket: Some(JobSocket { path: config.socket.clone(), gid: config.socket_gid }),
        controller,
        interval_ns,
        triggers: (config.trigger_stall_us > 0).then_some(TriggerSpec {
            stall_us: config.trigger_stall_us,
            window_us: config.trigger_window_us,
            idle_interval_ns: notifier.rest_cap_ns(config.idle_interval_ms.saturating_mul(1_000_000)),
        }),
    })?;
    // A signal ends a rest at once: the loop then asks `stop` below.
    match signals.as_fd().try_clone_to_owned() {
        Ok(fd) => session.wake_on(fd),
        Err(e) => tracing::warn!(error = %e, "cannot watch for signals during rests; a stop may wait out a rest"),
    }
    if config.idle_interval_ms > 0 && config.idle_interval_ms.saturating_mul(1_000_000) <= interval_ns {
        tracing::warn!(
            idle_interval_ms = config.idle_interval_ms,
            interval_ms = interval_ns as f64 / 1e6,
            "idle_interval_ms is not longer than the controller's interval: the loop never rests"
        );
    }
    tracing::info!(controller = %controller_name, backend = %backend_name, groups = config.groups.len(), dry_run = options.dry_run, interval_ns, "agent started");
    if let Some(priority) = options.realtime_priority {
        control_thread_realtime(priority);
    }
    notifier.check_interval(interval_ns);
    let mut publisher = sink.map(|sink| Publisher::new(sink, METRICS_PERIOD_NS, clock.clone()));
    let mut running = Running { config: config.clone(), controller_name, interval_ns };
    let mut stopped_by = String::from("duration");
    let mut journal_fs = crate::durable::FsWatch::new(&config.journal);
    let started_ns = clock.now_ns();
    let result = loop {
        let mut hangup = false;
        let result = session.run(
            |_| {
                match pending_signal(signals) {
                    Some(signal) if signal == Signal::SIGHUP.as_str() => hangup = true,
                    Some(signal) => stopped_by = signal,
                    None => return options.duration.is_some_and(|d| u128::from(clock.now_ns().saturating_sub(started_ns)) >= d.as_nanos()),
                }
                true
            },
            |platform, applied, stats, _| {
                for action in applied {
                    tracing::debug!(?action, "applied");
                }
                if let Some(p) = publisher.as_mut() {
                    p.maybe_publish(platform, stats);
                }
                notifier.after_tick(clock.now_ns(), || running.status(stats));
                if let Some(state) = journal_fs.check(clock.now_ns()) {
                    say_journal_fs(&running.config.journal, state);
                }
            },
        );
        if let Err(Error::GroupVanished { .. }) = &result {
            match let_go_of_vanished(&mut session, &mut running) {
                Ok(true) => continue,
                Ok(false) => break result,
                Err(e) => break Err(e),
            }
        }
        if result.is_err() || !hangup {
            break result;
        }
        notifier.reloading();
        match &options.config_path {
            Some(path) => match reload(path, &running.config) {
                Ok(Some((config, controller, interval_ns))) => match change_groups(&mut session, &running.config, &config) {
                    Ok(true) => {
                        let groups = crate::agent_config::group_changes_of(&running.config.groups, &config.groups);
                        tracing::info!(
                            "{}: configuration reloaded: controller {} with {}, every {} ms{}",
                            path.display(),
                            config.controller,
                            serde_json::to_string(&config.controller_config).unwrap_or_default(),
                            interval_ns as f64 / 1e6,
                            if groups.is_empty() { String::new() } else { format!("; {}", groups.described) }
                        );
                        let controller_name = controller.name().to_owned();
                        session.replace_controller(controller, interval_ns);
                        notifier.check_interval(interval_ns);
                        running = Running { config, controller_name, interval_ns };
                    }
                    Ok(false) => {}
                    Err(e) => break Err(e),
                },
                Ok(None) => tracing::info!("{}: configuration unchanged", path.display()),
                Err(line) => tracing::warn!("{line}"),
            },
            None => tracing::warn!("SIGHUP: no configuration file to reload; ignored"),
        }
        notifier.reloaded(clock.now_ns(), running.status(session.loop_stats()));
    };
    let result = match (result, session.controller_failure()) {
        (Ok(()), Some(reason)) => Err(Error::ControllerFailed { reason }),
        (result, _) => result,
    };
    if let Err(e) = &result {
        stopped_by = format!("error: {e}");
    }
    notifier.stopping(&stopped_by);
    if let Some(p) = publisher.as_mut() {
        if let Err(e) = p.sink.publish(crate::metrics::render(session.platform(), session.loop_stats())) {
            tracing::warn!(error = %e, "cannot publish final metrics");
        }
    }
    let job_socket = session.platform().job_server().map(|s| s.stats()).unwrap_or_default();
    let end = session.finish(Duration::from_secs(10))?;
    result?;
    end.restored()?;
    let cost: CostSummary = end.loop_stats.summary();
    Ok(AgentSummary {
        controller: running.controller_name,
        backend: backend_name,
        stopped_by,
        ticks: cost.ticks,
        tick_cost_mean_ns: cost.mean_ns,
        tick_cost_p99_ns: cost.p99_ns,
        tick_cost_max_ns: cost.max_ns,
        tick_cpu_mean_ns: cost.cpu_mean_ns,
        tick_lateness_p99_ns: end.loop_stats.lateness_p99_ns(),
        tick_lateness_max_ns: end.loop_stats.lateness_max_ns,
        early_wakes: end.loop_stats.early_wakes,
        idle_rests: end.loop_stats.idle_rests,
        job_wakes: end.loop_stats.job_wakes,
        overruns: end.loop_stats.overruns,
        writes_ok: end.stats.writes_ok,
        writes_failed: end.stats.writes_failed,
        write_cpu_ns: end.stats.write_cpu_ns,
        jobs_released: end.job_counts.iter().map(|j| j.released).sum(),
        jobs_completed: end.job_counts.iter().map(|j| j.completed).sum(),
        groups: end
            .group_names
            .iter()
            .zip(&end.job_counts)
            .map(|(name, j)| GroupJobs { name: name.clone(), released: j.released, completed: j.completed, dropped: j.dropped })
            .collect(),
        job_socket,
        restored_files: end.restore.restored.len(),
        removed_dirs: end.restore.removed_dirs.len(),
        recovered_from_crash: end.recovered_from_crash,
    })
}

/// One line when the journal's filesystem turns read-only, full or failing, or recovers.
fn say_journal_fs(journal: &Path, state: crate::durable::FsState) {
    use crate::durable::FsState;
    let journal = journal.display();
    let what = match state {
        FsState::Writable => return tracing::info!("journal {journal}: its filesystem is writable again"),
        FsState::ReadOnly => "read-only".to_owned(),
        FsState::Full => "full".to_owned(),
        FsState::Failing(error) => format!("failing ({error})"),
    };
    tracing::warn!(
        "journal {journal}: its filesystem is {what}; limits already journaled are still controlled, and a change that needs a new entry stops the agent (restoring everything)"
    );
}

/// Applies a reload's group changes to `session` (groups let go of, then groups taken on):
/// `Ok(false)` when the new groups cannot be taken on (said in one line; nothing changed),
/// an error when changing them failed part-way (the agent then stops and restores).
fn change_groups(session: &mut crate::session::Session, running: &AgentConfig, reloaded: &AgentConfig) -> Result<bool> {
    let changes = crate::agent_config::group_changes_of(&running.groups, &reloaded.groups);
    if changes.is_empty() {
        return Ok(true);
    }
    let added: Vec<GroupSpec> = reloaded.group_specs()?.into_iter().filter(|g| changes.added.contains(&g.name)).collect();
    if let Err(e) = session.check_new_groups(&added, &changes.removed) {
        tracing::warn!("{}", one_line(&format!("reload refused, keeping the running configuration: {e}")));
        return Ok(false);
    }
    session.change_groups(&changes.removed, added)?;
    Ok(true)
}

/// Lets go of the managed groups whose cgroup something else removed (one warning each), with
/// a fresh controller for the groups left, as a reload dropping them would: `Ok(true)` when the
/// agent runs on, `Ok(false)` when no group is gone or none would be left.
fn let_go_of_vanished(session: &mut crate::session::Session, running: &mut Running) -> Result<bool> {
    let gone: Vec<(String, String)> = session
        .platform()
        .group_specs()
        .filter(|g| session.platform().backend().group_dirs(&g.path).iter().any(|dir| !dir.exists()))
        .map(|g| (g.name.clone(), g.path.to_string()))
        .collect();
    if gone.is_empty() || gone.len() == running.config.groups.len() {
        return Ok(false);
    }
    let names: Vec<String> = gone.iter().map(|(name, _)| name.clone()).collect();
    session.change_groups(&names, Vec::new())?;
    running.config.groups.retain(|g| !names.contains(&g.name));
    let (controller, interval_ns) = build_controller(&running.config)?;
    session.replace_controller(controller, interval_ns);
    for (name, path) in &gone {
        tracing::warn!(
            "group {name}: cgroup {path} was removed by something else; let go of it, managing {} group(s) on",
            running.config.groups.len()
        );
    }
    Ok(true)
}

/// The configuration in force, its controller's name and the interval it ticks at.
struct Running {
    config: AgentConfig,
    controller_name: String,
    interval_ns: u64,
}

impl Running {
    /// One short line for the service manager: controller, groups, interval and the last tick.
    fn status(&self, stats: &crate::control_loop::LoopStats) -> String {
        let groups: Vec<&str> = self.config.groups.iter().map(|g| g.name.as_str()).collect();
        let mean_us = stats.cost_sum_ns.checked_div(stats.ticks).unwrap_or(0) / 1_000;
        one_line(&format!(
            "{} over {} group(s) ({}) every {} ms; tick {} (mean cost {mean_us} us, {} late)",
            self.controller_name,
            groups.len(),
            groups.join(", "),
            self.interval_ns as f64 / 1e6,
            stats.ticks,
            stats.overruns
        ))
    }
}

/// Reads the configuration at `path` again for a reload of `running`: `Ok(None)` when it
/// is the same, `Ok(Some(..))` with the new configuration and its controller when it can be
/// applied, and otherwise one line naming the file, the key and the reason (the running
/// configuration then stays). A reload changes the controller and its parameters, its
/// interval among them, and the groups (applied by the caller to the session); the
/// controller starts afresh with them, from the limits in force. The keys
/// [`crate::agent_config::restart_only_changes`] lists need a restart.
pub fn reload(path: &Path, running: &AgentConfig) -> std::result::Result<Option<Reloaded>, String> {
    let refused = |reason: &dyn std::fmt::Display| one_line(&format!("reload refused, keeping the running configuration: {reason}"));
    let config = AgentConfig::load(path).map_err(|e| refused(&e))?;
    let restart = crate::agent_config::restart_only_changes(running, &config);
    if !restart.is_empty() {
        let keys = restart.join(", ");
        return Err(refused(&format!(
            "configuration {}: {keys}: takes effect only at a start; restart the agent to apply it",
            path.display()
        )));
    }
    let groups = crate::agent_config::group_changes_of(&running.groups, &config.groups);
    if config.controller == running.controller && config.controller_config == running.controller_config && groups.is_empty() {
        return Ok(None);
    }
    config.group_specs().map_err(|e| refused(&format!("configuration {}: {e}", path.display())))?;
    for warning in &config.deprecations {
        tracing::warn!("{warning}");
    }
    let (controller, interval_ns) = build_controller(&config).map_err(|e| refused(&format!("configuration {}: {e}", path.display())))?;
    Ok(Some((config, controller, interval_ns)))
}

/// A reloaded configuration with its controller and interval.
pub type Reloaded = (AgentConfig, Box<dyn critmem_policy::Controller + Send>, u64);

/// The agent's side of the service manager's notification protocol (systemd's sd_notify):
/// `READY=1` once the groups are set up and the first tick ran, a `STATUS=` line every
/// [`STATUS_PERIOD_NS`], `WATCHDOG=1` from the control loop at a quarter of `WATCHDOG_USEC`
/// (so a stuck loop misses them and gets restarted), `RELOADING=1` and `READY=1` around a
/// reload, and `STOPPING=1` before the restore. Silent unless enabled.
#[derive(Debug)]
pub struct ServiceNotifier {
    enabled: bool,
    /// How often the loop pings the watchdog; `None` without one.
    watchdog_ping_ns: Option<u64>,
    watchdog_ns: u64,
    last_ping_ns: Option<u64>,
    last_status_ns: Option<u64>,
    ready: bool,
    /// A failed send is warned about once: the manager may be gone, the loop must go on.
    warned: bool,
}

/// What one notification carries.
#[derive(Debug, Default, PartialEq)]
pub struct Notice {
    pub ready: bool,
    pub status: Option<String>,
    pub watchdog: bool,
}

/// How often the agent updates its status line for the service manager.
pub const STATUS_PERIOD_NS: u64 = 1_000_000_000;

impl ServiceNotifier {
    /// Enabled when `NOTIFY_SOCKET` is set, with the watchdog `WATCHDOG_USEC` asks for (if
    /// `WATCHDOG_PID` is unset or this process).
    pub fn from_env() -> Self {
        let enabled = std::env::var_os("NOTIFY_SOCKET").is_some();
        Self::new(enabled, sd_notify::watchdog_enabled().filter(|_| enabled))
    }

    pub fn new(enabled: bool, watchdog: Option<Duration>) -> Self {
        let watchdog_ns = watchdog.map_or(0, |w| u64::try_from(w.as_nanos()).unwrap_or(u64::MAX));
        ServiceNotifier {
            enabled,
            watchdog_ping_ns: (enabled && watchdog_ns > 0).then_some(watchdog_ns / 4),
            watchdog_ns,
            last_ping_ns: None,
            last_status_ns: None,
            ready: false,
            warned: false,
        }
    }

    /// Warns when ticks at `interval_ns` come too seldom for the watchdog: the loop pings only
    /// as it ticks, and systemd asks for a ping every half of its timeout.
    pub fn check_interval(&self, interval_ns: u64) {
        if self.watchdog_ping_ns.is_some() && interval_ns > self.watchdog_ns / 2 {
            tracing::warn!(
                "the control interval of {} ms is longer than half the watchdog timeout of {} ms: raise WatchdogSec",
                interval_ns as f64 / 1e6,
                self.watchdog_ns as f64 / 1e6
            );
        }
    }

    /// The longest rest the watchdog allows: the loop pings only as it ticks, so a rest must
    /// end within half the timeout. `idle_interval_ns` itself without a watchdog.
    pub fn rest_cap_ns(&self, idle_interval_ns: u64) -> u64 {
        match self.watchdog_ping_ns {
            Some(_) if idle_interval_ns > self.watchdog_ns / 2 => {
                tracing::warn!(
                    "idle_interval_ms = {} is longer than half the watchdog timeout of {} ms: resting {} ms at most",
                    idle_interval_ns as f64 / 1e6,
                    self.watchdog_ns as f64 / 1e6,
                    (self.watchdog_ns / 2) as f64 / 1e6
                );
                self.watchdog_ns / 2
            }
            _ => idle_interval_ns,
        }
    }

    /// What to send after a tick at `now_ns` (`None`: nothing due); `status` makes the line.
    pub fn notice_after_tick(&mut self, now_ns: u64, status: impl FnOnce() -> String) -> Option<Notice> {
        if !self.enabled {
            return None;
        }
        let due = |last: Option<u64>, period_ns: u64| last.is_none_or(|t| now_ns.saturating_sub(t) >= period_ns);
        let notice = Notice {
            ready: !self.ready,
            status: (!self.ready || due(self.last_status_ns, STATUS_PERIOD_NS)).then(status),
            watchdog: self.watchdog_ping_ns.is_some_and(|period_ns| due(self.last_ping_ns, period_ns)),
        };
        self.ready = true;
        if notice.status.is_some() {
            self.last_status_ns = Some(now_ns);
        }
        if notice.watchdog {
            self.last_ping_ns = Some(now_ns);
        }
        (notice != Notice::default()).then_some(notice)
    }

    /// Sends what is due after a tick at `now_ns`.
    pub fn after_tick(&mut self, now_ns: u64, status: impl FnOnce() -> String) {
        if let Some(notice) = self.notice_after_tick(now_ns, status) {
            let mut states = Vec::new();
            if notice.ready {
                states.push(sd_notify::NotifyState::Ready);
            }
            if let Some(line) = &notice.status {
                states.push(sd_notify::NotifyState::Status(line));
            }
            if notice.watchdog {
                states.push(sd_notify::NotifyState::Watchdog);
            }
            self.send(&states);
        }
    }

    /// A reload starts (the monotonic time lets systemd match it with the `SIGHUP`).
    pub fn reloading(&mut self) {
        if self.enabled {
            let now = sd_notify::NotifyState::monotonic_usec_now();
            let mut states = vec![sd_notify::NotifyState::Reloading];
            states.extend(now.ok());
            self.send(&states);
        }
    }

    /// A reload ended at `now_ns` (applied or refused); the watchdog is pinged too, as the
    /// reload read a file between two ticks. Before the first tick, readiness waits for it.
    pub fn reloaded(&mut self, now_ns: u64, status: String) {
        if self.enabled {
            self.last_status_ns = Some(now_ns);
            let mut states = vec![sd_notify::NotifyState::Status(&status)];
            if self.ready {
                states.insert(0, sd_notify::NotifyState::Ready);
            }
            if self.watchdog_ping_ns.is_some() {
                self.last_ping_ns = Some(now_ns);
                states.push(sd_notify::NotifyState::Watchdog);
            }
            self.send(&states);
        }
    }

    /// The loop ended (by `stopped_by`); the restore follows.
    pub fn stopping(&mut self, stopped_by: &str) {
        if self.enabled {
            let status = one_line(&format!("stopping ({stopped_by}): restoring every original value"));
            self.send(&[sd_notify::NotifyState::Stopping, sd_notify::NotifyState::Status(&status)]);
        }
    }

    fn send(&mut self, states: &[sd_notify::NotifyState]) {
        if let Err(e) = sd_notify::notify(states) {
            if !std::mem::replace(&mut self.warned, true) {
                tracing::warn!(error = %e, "cannot notify the service manager (NOTIFY_SOCKET); going on without");
            }
        }
    }
}

/// How often the agent publishes its metrics.
const METRICS_PERIOD_NS: u64 = 1_000_000_000;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::psi::{TRIGGER_WINDOW_MAX_US, TRIGGER_WINDOW_MIN_US};
    use critmem_policy::GroupRole;
    use proptest::prelude::*;

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
role = "soft-rt"
floor_mb = 64
deadline_ms = 20
bcet_ms = 2

[[group]]
name = "batch"
cgroup = "critmem/batch"
role = "non-rt"
floor_mb = 32
create = true
"#;

    /// The groups of [`CONFIG`] in the deprecated spelling.
    const OLD_GROUPS: &str = r#"
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
    fn the_deprecated_spelling_reads_the_same_and_is_warned_once_per_key() {
        let old = format!("{}{OLD_GROUPS}", &CONFIG[..CONFIG.find("[[group]]").unwrap()]);
        let old = AgentConfig::parse(&old, Path::new("agent.toml")).unwrap();
        let new = AgentConfig::parse(CONFIG, Path::new("agent.toml")).unwrap();
        assert_eq!(old.groups, new.groups);
        assert!(new.deprecations.is_empty(), "{:?}", new.deprecations);
        assert_eq!(
            old.deprecations,
            [
                "agent.toml: group key bcet_ns is deprecated; write bcet_ms (milliseconds) instead",
                "agent.toml: group key deadline_ns is deprecated; write deadline_ms (milliseconds) instead",
                "agent.toml: group key floor_bytes is deprecated; write floor_mb (MiB) instead",
                "agent.toml: role = \"non-real-time\" is deprecated; write role = \"non-rt\" instead",
                "agent.toml: role = \"soft-real-time\" is deprecated; write role = \"soft-rt\" instead",
            ]
        );
    }

    #[test]
    fn decimal_milliseconds_and_mib_read_as_in_scenarios() {
        let text = CONFIG
            .replace("floor_mb = 64", "floor_mb = 0.5")
            .replace("deadline_ms = 20", "deadline_ms = 12.5")
            .replace("bcet_ms = 2", "bcet_ms = 0.001");
        let rt = &AgentConfig::parse(&text, Path::new("agent.toml")).unwrap().groups[0];
        assert_eq!((rt.floor_bytes, rt.deadline_ns, rt.bcet_ns), (1 << 19, Some(12_500_000), Some(1_000)));
    }

    #[test]
    fn both_spellings_of_one_value_are_a_one_line_error() {
        for (new, old) in [
            ("floor_mb = 64", "floor_bytes = 67108864"),
            ("deadline_ms = 20", "deadline_ns = 20000000"),
            ("bcet_ms = 2", "bcet_ns = 2000000"),
        ] {
            let err = AgentConfig::parse(&CONFIG.replace(new, &format!("{new}\n{old}")), Path::new("agent.toml")).unwrap_err().to_string();
            let (old_key, new_key) = (old.split(' ').next().unwrap(), new.split(' ').next().unwrap());
            assert_eq!(err, format!("configuration agent.toml: group \"rt\": {old_key} and {new_key} both given; keep {new_key}"));
        }
    }

    /// The whole agent, through its session, on a fake v2 tree and a fake clock: a dry run of
    /// one simulated second ticks exactly every 5 ms and changes nothing.
    #[test]
    fn a_dry_run_on_a_fake_tree_ticks_on_its_clock_and_changes_nothing() {
        use crate::cgroup::fake::{populate, v2_root, V2_FILES};
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("cg");
        v2_root(&root);
        populate(&root.join("critmem"), &[("cgroup.procs", ""), ("cgroup.subtree_control", "memory\n")]);
        populate(&root.join("critmem/rt"), V2_FILES);
        populate(&dir.path().join("proc"), &[("meminfo", "SwapFree: 0 kB\n")]);
        let metrics = dir.path().join("metrics.prom");
        let text = CONFIG.replace("metrics_address = \"127.0.0.1:9464\"", &format!("metrics_file = \"{}\"", metrics.display()));
        let config = AgentConfig::parse(&text, Path::new("agent.toml")).unwrap();
        let session = SessionBuilder::new()
            .proc_root(dir.path().join("proc"))
            .layout(crate::layout::Layout::V2 { root: root.clone() })
            .clock(crate::clock::FakeClock::new(0));
        // Never signalled: the run ends at its duration.
        let signals = SignalFd::with_flags(&SigSet::empty(), SfdFlags::SFD_NONBLOCK | SfdFlags::SFD_CLOEXEC).unwrap();
        let options = RunOptions { dry_run: true, duration: Some(Duration::from_secs(1)), ..RunOptions::default() };
        let summary = run_in(session, &config, &options, &signals).unwrap();
        assert_eq!((summary.ticks, summary.stopped_by.as_str(), summary.writes_ok), (200, "duration", 0));
        assert_eq!(std::fs::read_to_string(root.join("critmem/rt/memory.max")).unwrap(), "max\n");
        assert!(!root.join("critmem/batch").exists(), "a dry run creates nothing");
        assert!(std::fs::read_to_string(&metrics).unwrap().contains("critmem_group_usage_bytes"));
    }

    /// A group's starting CPU limit is written when the session starts, before any tick, and
    /// put back as it was when the session ends.
    #[test]
    fn starting_limits_are_applied_at_the_start_and_restored_at_the_end() {
        use crate::cgroup::fake::{populate, v2_root, V2_FILES};
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("cg");
        v2_root(&root);
        populate(&root.join("critmem"), &[("cgroup.procs", ""), ("cgroup.subtree_control", "memory cpu\n")]);
        populate(&root.join("critmem/rt"), V2_FILES);
        populate(&dir.path().join("proc"), &[("meminfo", "SwapFree: 0 kB\n")]);
        let text = CONFIG.replace("bcet_ms = 2\n", "bcet_ms = 2\ncpu_millicpus = 250\n").replace(
            "journal = \"/var/lib/critmem/journal.jsonl\"",
            &format!("journal = \"{}\"", dir.path().join("journal.jsonl").display()),
        );
        let config = AgentConfig::parse(&text, Path::new("agent.toml")).unwrap();
        let (controller, interval_ns) = build_controller(&config).unwrap();
        let host = SessionBuilder::new()
            .proc_root(dir.path().join("proc"))
            .layout(crate::layout::Layout::V2 { root: root.clone() })
            .clock(crate::clock::FakeClock::new(0))
            .cpus(2)
            .connect()
            .unwrap();
        let session = host
            .start(SessionPlan {
                groups: config.group_specs().unwrap(),
                total_memory_bytes: config.total_memory_bytes,
                journal: Some(config.journal.clone()),
                job_socket: None,
                controller,
                interval_ns,
                triggers: None,
                initial_actions: config.initial_actions(),
            })
            .unwrap();
        assert!(session.platform().wait_writes(Duration::from_secs(5)));
        let cpu_max = || std::fs::read_to_string(root.join("critmem/rt/cpu.max")).unwrap();
        assert_eq!(cpu_max(), "25000 100000");
        session.finish(Duration::from_secs(5)).unwrap();
        assert_eq!(cpu_max().trim(), "max 100000");
    }

    /// Ticks every 5 ms for 10 s of clock time under a 2 s watchdog: the loop pings every
    /// 2 s / 4 = 500 ms (10 s / 500 ms = 20 pings, well inside systemd's half timeout of
    /// 1 s), updates its status every second (10 lines) and is ready once, at the first tick.
    #[test]
    fn the_notifier_pings_at_a_quarter_of_the_watchdog_and_is_ready_after_the_first_tick() {
        let mut notifier = ServiceNotifier::new(true, Some(Duration::from_secs(2)));
        let notices: Vec<(u64, Notice)> = (0..2000u64)
            .map(|tick| tick * 5_000_000)
            .filter_map(|now_ns| notifier.notice_after_tick(now_ns, || format!("at {now_ns}")).map(|n| (now_ns, n)))
            .collect();
        let at = |pick: fn(&Notice) -> bool| notices.iter().filter(|(_, n)| pick(n)).map(|(t, _)| *t).collect::<Vec<u64>>();
        assert_eq!(at(|n| n.ready), [0]);
        assert_eq!(at(|n| n.watchdog), (0..20).map(|i| i * 500_000_000).collect::<Vec<u64>>());
        assert_eq!(at(|n| n.status.is_some()), (0..10).map(|i| i * 1_000_000_000).collect::<Vec<u64>>());
        assert_eq!(notices[1].1.status, None);
        assert_eq!(notices[2].1.status.as_deref(), Some("at 1000000000"));
    }

    #[test]
    fn a_rest_ends_within_half_the_watchdog_timeout() {
        let watched = ServiceNotifier::new(true, Some(Duration::from_secs(10)));
        assert_eq!(watched.rest_cap_ns(1_000_000_000), 1_000_000_000);
        assert_eq!(watched.rest_cap_ns(60_000_000_000), 5_000_000_000);
        assert_eq!(ServiceNotifier::new(true, None).rest_cap_ns(60_000_000_000), 60_000_000_000);
        assert_eq!(ServiceNotifier::new(false, Some(Duration::from_secs(10))).rest_cap_ns(60_000_000_000), 60_000_000_000);
    }

    #[test]
    fn the_notifier_is_silent_when_disabled_and_never_pings_without_a_watchdog() {
        let mut off = ServiceNotifier::new(false, Some(Duration::from_secs(2)));
        assert!((0..1000u64).all(|t| off.notice_after_tick(t * 5_000_000, String::new).is_none()));
        let mut no_watchdog = ServiceNotifier::new(true, None);
        let notices: Vec<Notice> = (0..1000u64).filter_map(|t| no_watchdog.notice_after_tick(t * 5_000_000, String::new)).collect();
        // 5 s of ticks: ready at 0, status at 0, 1, 2, 3 and 4 s.
        assert_eq!(notices.len(), 5);
        assert!(notices.iter().all(|n| !n.watchdog) && notices[0].ready && !notices[1].ready);
    }

    #[test]
    fn a_reload_applies_new_parameters_and_groups_and_refuses_a_bad_file_or_a_new_socket_in_one_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("agent.toml");
        let running = AgentConfig::parse(CONFIG, &path).unwrap();
        let reload_text = |text: &str| {
            std::fs::write(&path, text).unwrap();
            reload(&path, &running)
        };
        assert!(reload_text(CONFIG).unwrap().is_none(), "the same file changes nothing");
        let (config, controller, interval_ns) =
            reload_text(&CONFIG.replace("step_bytes = 2097152", "step_bytes = 4194304\ninterval_ns = 10000000")).unwrap().unwrap();
        assert_eq!((controller.name(), interval_ns), ("sara", 10_000_000));
        assert_eq!(config.controller_config["step_bytes"].as_integer(), Some(4_194_304));
        let (_, controller, interval_ns) =
            reload_text(&CONFIG.replace("\"sara\"", "\"greedy\"").replace("step_bytes = 2097152", "")).unwrap().unwrap();
        assert_eq!((controller.name(), interval_ns), ("greedy", critmem_policy::DEFAULT_INTERVAL_NS));
        // A group changed and nothing else: a reload (the groups follow in the session).
        let (config, controller, _) = reload_text(&CONFIG.replace("floor_mb = 32", "floor_mb = 31")).unwrap().unwrap();
        assert_eq!(controller.name(), "sara");
        assert_eq!(config.groups.iter().find(|g| g.name == "batch").unwrap().floor_bytes, 31 * 1024 * 1024);
        let file = path.display();
        for (text, want) in [
            (
                CONFIG.replace("step_bytes = 2097152", "step_bytes = \"x\""),
                format!("reload refused, keeping the running configuration: configuration {file}: invalid config for controller `sara`: invalid type: string \"x\", expected u64 in `step_bytes`"),
            ),
            (CONFIG.replace("jobs.sock", "other.sock"), format!("reload refused, keeping the running configuration: configuration {file}: socket: takes effect only at a start; restart the agent to apply it")),
        ] {
            assert_eq!(reload_text(&text).err(), Some(want));
        }
        std::fs::remove_file(&path).unwrap();
        let gone = reload(&path, &running).err().unwrap();
        assert!(
            gone.starts_with("reload refused, keeping the running configuration: read configuration") && gone.contains("agent.toml"),
            "{gone}"
        );
    }

    #[test]
    fn the_shipped_example_configuration_parses() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("dist/agent.example.toml");
        let config = AgentConfig::load(&path).unwrap();
        assert_eq!(config.group_specs().unwrap().len(), 2);
        assert!(config.deprecations.is_empty(), "{:?}", config.deprecations);
    }

    /// A TOML value: wrong types, numbers beyond i64 (TOML's integers), escapes in strings.
    const TOML_VALUE: &str = r#"-?[0-9]{1,22}|"([a-z/.:0-9 -]|\\n|\\"){0,12}"|"(sara|greedy|offline|tmo-low|tmo-high|senpai|static|soft-rt|non-rt|soft-real-time|non-real-time|critmem/[a-z]{1,3}|127\.0\.0\.1:[0-9]{1,6})"|true|false|[0-9]\.[0-9]e[0-9]{1,3}|nan|inf|\[\]|\{\}|1979-05-27"#;

    /// `key = value` lines drawn from the keys of `keys`.
    fn toml_lines(keys: &'static [&'static str], n: std::ops::Range<usize>) -> impl Strategy<Value = String> {
        proptest::collection::vec((proptest::sample::select(keys), TOML_VALUE), n)
            .prop_map(|pairs| pairs.iter().map(|(k, v)| format!("{k} = {v}\n")).collect())
    }

    /// Configuration-shaped text: the real keys and tables with values of any shape.
    fn config_like() -> impl Strategy<Value = String> {
        const TOP: &[&str] = &[
            "controller",
            "total_memory_bytes",
            "socket",
            "socket_gid",
            "journal",
            "metrics_address",
            "metrics_file",
            "trigger_stall_us",
            "trigger_window_us",
            "idle_interval_ms",
            "x",
        ];
        const CONTROLLER: &[&str] = &["step_bytes", "step_up_bytes", "interval_ns", "psi_threshold_pct", "x"];
        const GROUP: &[&str] =
            &["name", "cgroup", "role", "floor_mb", "floor_bytes", "deadline_ms", "deadline_ns", "bcet_ms", "bcet_ns", "create", "x"];
        (
            toml_lines(TOP, 0..10),
            proptest::option::of(toml_lines(CONTROLLER, 0..4)),
            proptest::collection::vec(toml_lines(GROUP, 0..8), 0..3),
        )
            .prop_map(|(top, controller, groups)| {
                let mut text = top;
                if let Some(controller) = controller {
                    text.push_str(&format!("[controller_config]\n{controller}"));
                }
                for group in groups {
                    text.push_str(&format!("[[group]]\n{group}"));
                }
                text
            })
    }

    /// Whatever the input, a configuration error is one line (front ends print it and exit).
    fn check_one_line(text: &str) -> std::result::Result<(), TestCaseError> {
        if let Err(e) = AgentConfig::parse(text, Path::new("agent.toml")) {
            prop_assert!(!e.to_string().contains('\n'), "{}", e);
        }
        Ok(())
    }

    #[derive(Debug, Clone)]
    struct GenGroup {
        name: String,
        cgroup: String,
        times: Option<(u64, u64)>,
        floor_bytes: u64,
        create: bool,
        /// Written in the deprecated spelling.
        deprecated: bool,
    }

    fn gen_group() -> impl Strategy<Value = GenGroup> {
        (
            r#"[^"\\\x00-\x1f\x7f]{1,12}"#,
            r"/?[a-z0-9_.-]{1,8}(/[a-z0-9_-]{1,8}){0,3}",
            proptest::option::of((0..=i64::MAX as u64, 0..=i64::MAX as u64)),
            0..=i64::MAX as u64 / 4,
            any::<bool>(),
            any::<bool>(),
        )
            .prop_filter("`.` and `..` are not group names", |(_, cgroup, ..)| cgroup.split('/').all(|c| c != "." && c != ".."))
            .prop_map(|(name, cgroup, times, floor_bytes, create, deprecated)| GenGroup {
                name,
                cgroup,
                times,
                floor_bytes,
                create,
                deprecated,
            })
    }

    /// Controllers whose parameters all have defaults.
    fn defaults_parse() -> Vec<&'static str> {
        critmem_policy::CONTROLLERS
            .iter()
            .map(|c| c.name)
            .filter(|name| critmem_policy::ControllerConfig::parse(name, serde_json::json!({})).is_ok())
            .collect()
    }

    /// The documented configuration with a few lines dropped, repeated or given another value,
    /// so that most inputs get past TOML into the checks behind it.
    fn config_mutants() -> impl Strategy<Value = String> {
        let edit = (any::<proptest::sample::Index>(), 0..4u8, TOML_VALUE);
        proptest::collection::vec(edit, 1..4).prop_map(|edits| {
            let mut lines: Vec<String> = CONFIG.lines().map(str::to_owned).collect();
            for (at, kind, value) in edits {
                let i = at.index(lines.len());
                match kind {
                    0 => drop(lines.remove(i)),
                    1 => lines.insert(i, lines[i].clone()),
                    _ => {
                        if let Some((key, _)) = lines[i].split_once(" = ") {
                            lines[i] = format!("{key} = {value}");
                        }
                    }
                }
            }
            lines.join("\n")
        })
    }

    proptest! {
        #[test]
        fn config_parser_never_panics_on_mutated_configurations(text in config_mutants()) {
            check_one_line(&text)?;
        }

        #[test]
        fn config_parser_never_panics_on_arbitrary_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
            check_one_line(&String::from_utf8_lossy(&bytes))?;
        }

        #[test]
        fn config_parser_never_panics_on_config_like_text(text in config_like()) {
            check_one_line(&text)?;
        }

        /// Valid configurations (TOML integers are i64, so u64 fields stop at i64::MAX) parse
        /// back to what was written.
        #[test]
        fn valid_configurations_parse_back(
            controller in proptest::sample::select(defaults_parse()),
            total in 1..=i64::MAX as u64,
            gid in proptest::option::of(any::<u32>()),
            // A stall of 0 turns the triggers off, whatever the window.
            triggers in proptest::option::of(prop_oneof![
                (Just(0u64), 0..=i64::MAX as u64),
                (TRIGGER_WINDOW_MIN_US..=TRIGGER_WINDOW_MAX_US).prop_flat_map(|window| (1..=window, Just(window))),
            ]),
            groups in proptest::collection::vec(gen_group(), 1..4),
        ) {
            // The floors must fit in the total (each is at most a quarter of i64::MAX).
            let total = total.max(groups.iter().map(|g| g.floor_bytes).sum());
            prop_assume!(groups.iter().enumerate().all(|(i, g)| groups[..i].iter().all(|o| o.name != g.name)));
            // One group per cgroup (a leading `/` is the same path).
            prop_assume!(groups.iter().enumerate().all(|(i, g)| groups[..i].iter().all(|o| o.cgroup.trim_start_matches('/') != g.cgroup.trim_start_matches('/'))));
            let mut text = format!("controller = \"{controller}\"\ntotal_memory_bytes = {total}\nsocket = \"/run/s.sock\"\njournal = \"/var/j\"\n");
            if let Some(gid) = gid {
                text.push_str(&format!("socket_gid = {gid}\n"));
            }
            if let Some((stall, window)) = triggers {
                text.push_str(&format!("trigger_stall_us = {stall}\ntrigger_window_us = {window}\n"));
            }
            // The scenario spelling in whole MiB and decimal milliseconds of up to 10^15 ns
            // (what f64 holds to the nanosecond), or the deprecated one in bytes and ns.
            let groups: Vec<GenGroup> = groups
                .into_iter()
                .map(|g| if g.deprecated { g } else {
                    GenGroup { floor_bytes: g.floor_bytes >> 20 << 20, times: g.times.map(|(d, b)| (d % 1_000_000_000_000_000, b % 1_000_000_000_000_000)), ..g }
                })
                .collect();
            let ms = |ns: u64| format!("{}.{:06}", ns / 1_000_000, ns % 1_000_000);
            for g in &groups {
                text.push_str(&format!("[[group]]\nname = \"{}\"\ncgroup = \"{}\"\ncreate = {}\n", g.name, g.cgroup, g.create));
                match (g.deprecated, g.times) {
                    (true, Some((deadline, bcet))) => text.push_str(&format!("role = \"soft-real-time\"\ndeadline_ns = {deadline}\nbcet_ns = {bcet}\n")),
                    (true, None) => text.push_str("role = \"non-real-time\"\n"),
                    (false, Some((deadline, bcet))) => text.push_str(&format!("role = \"soft-rt\"\ndeadline_ms = {}\nbcet_ms = {}\n", ms(deadline), ms(bcet))),
                    (false, None) => text.push_str("role = \"non-rt\"\n"),
                }
                if g.deprecated {
                    text.push_str(&format!("floor_bytes = {}\n", g.floor_bytes));
                } else {
                    text.push_str(&format!("floor_mb = {}\n", g.floor_bytes >> 20));
                }
            }
            let config = AgentConfig::parse(&text, Path::new("gen.toml")).map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert_eq!((config.controller.as_str(), config.total_memory_bytes, config.socket_gid), (controller, total, gid));
            prop_assert_eq!((config.trigger_stall_us, config.trigger_window_us), triggers.unwrap_or((crate::agent_config::default_trigger_stall_us(), crate::agent_config::default_trigger_window_us())));
            let specs = config.group_specs().unwrap();
            prop_assert_eq!(specs.len(), groups.len());
            for (spec, g) in specs.iter().zip(&groups) {
                prop_assert_eq!(&spec.name, &g.name);
                prop_assert_eq!(spec.path.as_str(), g.cgroup.trim_start_matches('/'));
                prop_assert_eq!((spec.floor_bytes, spec.create), (g.floor_bytes, g.create));
                let role = match g.times {
                    Some((deadline_ns, bcet_ns)) => GroupRole::SoftRealTime { deadline_ns, bcet_ns },
                    None => GroupRole::NonRealTime,
                };
                prop_assert_eq!(&spec.role, &role);
            }
        }
    }

    /// Found by `config_parser_never_panics_on_mutated_configurations`: the unknown-controller
    /// error quoted the name with its newline.
    #[test]
    fn an_unknown_controller_name_with_a_newline_is_a_one_line_error() {
        let text = CONFIG.replace("controller = \"sara\"", "controller = \"\\n\"");
        let err = AgentConfig::parse(&text, Path::new("agent.toml")).unwrap_err().to_string();
        assert!(err.contains("unknown controller") && !err.contains('\n'), "{err}");
    }

    #[test]
    fn bad_configurations_are_one_line_errors() {
        for (edit, want) in [
            (CONFIG.replace("controller = \"sara\"", "controller = \"nope\""), "nope"),
            (CONFIG.replace("step_bytes", "stepbytes"), "stepbytes"),
            (CONFIG.replace("deadline_ms = 20\n", ""), "group \"rt\": soft-rt needs deadline_ms and bcet_ms"),
            (CONFIG.replace("create = true", "create = true\nbcet_ms = 1"), "group \"batch\": non-rt takes no deadline_ms or bcet_ms"),
            (CONFIG.replace("role = \"non-rt\"", "role = \"nrt\""), "group \"batch\": role: unknown role \"nrt\"; expected soft-rt or non-rt"),
            (CONFIG.replace("floor_mb = 32\n", ""), "group \"batch\": floor_mb missing"),
            (CONFIG.replace("floor_mb = 32", "floor_mb = -1"), "group \"batch\": floor_mb must be a finite, non-negative number of MiB (got -1)"),
            (CONFIG.replace("bcet_ms = 2", "bcet_ms = nan"), "group \"rt\": bcet_ms must be a finite, non-negative number of milliseconds (got NaN)"),
            (CONFIG.replace("critmem/batch", "../x"), "invalid cgroup path"),
            (CONFIG.replace("floor_mb = 32", "floor_mb = \"x\""), "floor_mb"),
            // Found by the audit: metrics written over the journal lost it, and a crash could then not be undone.
            (CONFIG.replace("metrics_address = \"127.0.0.1:9464\"", "metrics_file = \"/var/lib/critmem/journal.jsonl\""), "would overwrite the journal"),
            (CONFIG.replace("metrics_address = \"127.0.0.1:9464\"", "metrics_file = \"/var/lib/critmem/./journal.jsonl\""), "would overwrite the journal"),
            (CONFIG.replace("metrics_address = \"127.0.0.1:9464\"", "metrics_file = \"/var/lib/critmem/journal.prom\"").replace("journal.jsonl", "journal.tmp"), "would overwrite the journal"),
            (CONFIG.replace("metrics_address = \"127.0.0.1:9464\"", "metrics_file = \"/run/critmem/jobs.sock\""), "would overwrite the socket"),
            (CONFIG.replace("/run/critmem/jobs.sock", "/var/lib/critmem/journal.jsonl"), "socket and journal are the same file"),
            // Two groups over one cgroup fight over its limit.
            (CONFIG.replace("critmem/batch", "/critmem/rt"), "are the same cgroup /critmem/rt"),
            (CONFIG.replace("total_memory_bytes = 1073741824", "total_memory_bytes = 0"), "total_memory_bytes must be greater than 0"),
            (CONFIG.replace("total_memory_bytes = 1073741824", "total_memory_bytes = 100663295"), "floor_bytes add up to 100663296, more than total_memory_bytes = 100663295"),
            (CONFIG.replace("[controller_config]", "trigger_window_us = 0\n[controller_config]"), "trigger_window_us = 0 must be in 500000..=10000000 (the kernel's bounds)"),
            (CONFIG.replace("[controller_config]", "trigger_stall_us = 3000000\n[controller_config]"), "trigger_stall_us = 3000000 must be at most trigger_window_us = 2000000"),
            (CONFIG.replace("[controller_config]", "trigger_stall_us = 0\nidle_interval_ms = 1000\n[controller_config]"), "idle_interval_ms = 1000 needs the PSI triggers (trigger_stall_us > 0)"),
            (CONFIG.replace("[controller_config]", "idle_interval_ms = 3600001\n[controller_config]"), "idle_interval_ms = 3600001 must be at most 3600000 (one hour)"),
            (CONFIG.replace("[controller_config]", "idle_interval_ms = -5\n[controller_config]"), "idle_interval_ms"),
            // Limits apply to soft real-time groups only; any other name was ignored.
            (
                CONFIG.replace("controller = \"sara\"", "controller = \"static\"").replace("step_bytes = 2097152", "limits_bytes = { batch = 1 }"),
                "`limits_bytes` names \"batch\", which is not a soft real-time group (they are: \"rt\")",
            ),
            // The file and the key; `nan` must not reach the controller as JSON null.
            (CONFIG.replace("step_bytes = 2097152", "step_bytes = nan"), "configuration agent.toml: invalid config for controller `sara`: invalid type: floating point `NaN`, expected u64 in `step_bytes`"),
            (CONFIG.replace("step_bytes = 2097152", "step_bytes = \"x\""), "agent.toml: invalid config for controller `sara`: invalid type: string \"x\", expected u64 in `step_bytes`"),
        ] {
            let err = AgentConfig::parse(&edit, Path::new("agent.toml")).unwrap_err().to_string();
            assert!(err.contains(want), "{err}");
            assert!(!err.contains('\n'), "{err}");
        }
    }
}
