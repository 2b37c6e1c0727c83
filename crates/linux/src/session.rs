//! One Linux session: the setup every tool that drives a controller on the machine shares (the
//! agent, `critmem-linux-run`, the loop bench), and its end.
//!
//! [`SessionBuilder`] takes what the session reads the machine through, as constructor
//! arguments with production defaults: the `/proc` root, the cgroup layout (detected from that
//! `/proc` unless given), the clock, the CPU count and the swap disk I/O limits throttle (that
//! of critmem's swapfile, where one is on). [`SessionBuilder::connect`] detects the layout, checks
//! for root (unless a dry run) and opens the backend, giving a [`Host`]; a tool may then do its
//! own preparation against the host's layout (a run recovers crashed runs there).
//! [`Host::start`] binds the job socket, opens the [`LinuxPlatform`] (restoring a crashed
//! run's journal first, then creating or adopting the groups), tells it what the controller
//! reads, and arms the PSI triggers asked for. [`Session::run`] ticks the controller until the
//! tool says stop; [`Session::finish`] restores every change.

use crate::cgroup::BlockDevice;
use crate::cgroup::{open_backend, CgroupBackend};
use crate::clock::{MonotonicClock, SharedClock};
use crate::control_loop::{ControlLoop, LoopStats};
use crate::error::{Error, Result};
use crate::journal::RestoreReport;
use crate::layout::{detect_layout_in, Layout};
use crate::platform::{online_cpus, GroupSpec, JobCounts, LinuxPlatform, PlatformOptions, PlatformStats};
use crate::procfs::{Hierarchy, ProcFs};
use crate::protocol::{JobServer, JobServerConfig, PollBudget, ReportingGroup};
use critmem_policy::{Action, Controller, Platform};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Most job-socket connections a session accepts at once.
const MAX_JOB_CONNECTIONS: usize = 64;

/// Where a session reads the machine; see the module documentation.
pub struct SessionBuilder {
    proc_root: PathBuf,
    layout: Option<Layout>,
    clock: SharedClock,
    dry_run: bool,
    cpus: Option<u32>,
    swap: SwapDisk,
}

/// Where a session's I/O limits apply.
enum SwapDisk {
    /// The disk of the swapfile recorded in this state file, if it is on.
    Recorded(PathBuf),
    Given(Option<BlockDevice>),
}

impl Default for SessionBuilder {
    fn default() -> Self {
        SessionBuilder {
            proc_root: PathBuf::from(crate::PROC_ROOT),
            layout: None,
            clock: MonotonicClock::shared(),
            dry_run: false,
            cpus: None,
            swap: SwapDisk::Recorded(PathBuf::from(crate::swap::DEFAULT_STATE_FILE)),
        }
    }
}

impl SessionBuilder {
    /// `/proc`, the layout detected from it, CLOCK_MONOTONIC, changes made.
    pub fn new() -> Self {
        Self::default()
    }

    /// The `/proc` to read (layout, process cgroups, swap accounting, capabilities).
    pub fn proc_root(mut self, proc_root: PathBuf) -> Self {
        self.proc_root = proc_root;
        self
    }

    /// The cgroup roots to use instead of the ones `/proc` names.
    pub fn layout(mut self, layout: Layout) -> Self {
        self.layout = Some(layout);
        self
    }

    pub fn clock(mut self, clock: SharedClock) -> Self {
        self.clock = clock;
        self
    }

    /// Log the writes a controller asks for and change nothing (no root needed).
    pub fn dry_run(mut self, dry_run: bool) -> Self {
        self.dry_run = dry_run;
        self
    }

    /// The CPUs a CPU limit is a share of, instead of those online.
    pub fn cpus(mut self, cpus: u32) -> Self {
        self.cpus = Some(cpus);
        self
    }

    /// The state file of critmem's swapfile, whose disk I/O limits throttle (default
    /// [`crate::swap::DEFAULT_STATE_FILE`]).
    pub fn swap_state_file(mut self, path: PathBuf) -> Self {
        self.swap = SwapDisk::Recorded(path);
        self
    }

    /// The disk I/O limits throttle, instead of the swapfile's (`None`: I/O limits are left out).
    pub fn swap_device(mut self, device: Option<BlockDevice>) -> Self {
        self.swap = SwapDisk::Given(device);
        self
    }

    /// Detects the layout (unless given), checks for root (unless a dry run) and opens the
    /// cgroup backend.
    pub fn connect(self) -> Result<Host> {
        let layout = match self.layout {
            Some(layout) => layout,
            None => detect_layout_in(&self.proc_root)?,
        };
        if !self.dry_run && !nix::unistd::geteuid().is_root() {
            return Err(Error::NotRoot { path: layout.memory_root().to_owned() });
        }
        let backend = open_backend(&layout)?;
        let swap_device = match self.swap {
            SwapDisk::Given(device) => device,
            SwapDisk::Recorded(state_file) => {
                match crate::swap::SwapManager::new(state_file, self.proc_root.clone()).active_disk(Path::new("/sys")) {
                    Ok(device) => device,
                    Err(e) => {
                        tracing::warn!(error = %e, "I/O limits are left out: cannot tell which disk critmem's swapfile is on");
                        None
                    }
                }
            }
        };
        let cpus = self.cpus.unwrap_or_else(online_cpus);
        Ok(Host { layout, backend, proc_root: self.proc_root, clock: self.clock, dry_run: self.dry_run, cpus, swap_device })
    }
}

/// The machine's cgroup side, ready for a session.
pub struct Host {
    layout: Layout,
    backend: Box<dyn CgroupBackend>,
    proc_root: PathBuf,
    clock: SharedClock,
    dry_run: bool,
    cpus: u32,
    swap_device: Option<BlockDevice>,
}

/// The job socket a session listens on.
#[derive(Clone, Debug)]
pub struct JobSocket {
    pub path: PathBuf,
    /// Group allowed to connect; the session's own if `None`.
    pub gid: Option<u32>,
}

/// PSI triggers that wake the loop before its next tick.
#[derive(Clone, Copy, Debug)]
pub struct TriggerSpec {
    pub stall_us: u64,
    pub window_us: u64,
    /// How long the loop may rest after a quiet tick, woken by a trigger or a job report
    /// (see [`ControlLoop`]); 0 ticks at the interval always.
    pub idle_interval_ns: u64,
}

/// What a session manages and with what.
pub struct SessionPlan {
    pub groups: Vec<GroupSpec>,
    /// The memory the groups share (the budget the controller divides).
    pub total_memory_bytes: u64,
    /// Restore journal; required unless a dry run.
    pub journal: Option<PathBuf>,
    /// Job socket for the groups' workloads; none in a dry run.
    pub job_socket: Option<JobSocket>,
    pub controller: Box<dyn Controller + Send>,
    pub interval_ns: u64,
    /// PSI triggers to arm (not in a dry run); a failure to arm them is a warning.
    pub triggers: Option<TriggerSpec>,
    /// The groups' starting CPU and I/O limits, applied as a controller's actions are when the
    /// session starts.
    pub initial_actions: Vec<Action>,
}

impl Host {
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    pub fn backend(&self) -> &dyn CgroupBackend {
        self.backend.as_ref()
    }

    pub fn proc_root(&self) -> &Path {
        &self.proc_root
    }

    pub fn clock(&self) -> &SharedClock {
        &self.clock
    }

    /// Binds the job socket, opens the platform over the plan's groups and prepares the
    /// control loop; nothing has ticked yet.
    pub fn start(self, plan: SessionPlan) -> Result<Session> {
        let server = match (&plan.job_socket, self.dry_run) {
            (Some(socket), false) => Some(JobServer::bind(JobServerConfig {
                socket_path: socket.path.clone(),
                socket_gid: socket.gid,
                groups: plan.groups.iter().map(|s| ReportingGroup { name: s.name.clone(), cgroup: s.path.to_string() }).collect(),
                hierarchy: Hierarchy::for_layout(&self.layout),
                proc: ProcFs::new(self.proc_root.clone()),
                max_connections: MAX_JOB_CONNECTIONS,
                poll_budget: PollBudget::for_interval(plan.interval_ns),
            })?),
            _ => None,
        };
        let options = PlatformOptions {
            total_memory_bytes: plan.total_memory_bytes,
            dry_run: self.dry_run,
            journal_path: plan.journal.clone(),
            job_server: server,
            proc_root: self.proc_root,
            clock: self.clock.clone(),
            cpus: self.cpus,
            swap_device: self.swap_device,
        };
        let mut platform = LinuxPlatform::open(self.backend, plan.groups, options)?;
        if !plan.initial_actions.is_empty() {
            let applied = platform.apply(&plan.initial_actions)?;
            tracing::info!(asked = ?plan.initial_actions, applied = ?applied, "starting limits");
        }
        let controller = plan.controller;
        platform.set_stall_inputs(|role| controller.stall_inputs(role));
        platform.set_usage_inputs(|role| controller.reads_usage(role));
        let control = ControlLoop::new(plan.interval_ns, self.clock.clone());
        let triggers = plan.triggers.filter(|_| !self.dry_run);
        let mut session = Session { platform, controller, control, clock: self.clock, journal: plan.journal, triggers, run_span_ns: None };
        session.arm_triggers();
        Ok(session)
    }
}

/// A running session; see the module documentation.
pub struct Session {
    platform: LinuxPlatform,
    controller: Box<dyn Controller + Send>,
    control: ControlLoop,
    clock: SharedClock,
    journal: Option<PathBuf>,
    triggers: Option<TriggerSpec>,
    /// When [`Session::run`] started and ended.
    run_span_ns: Option<(u64, u64)>,
}

impl Session {
    pub fn platform(&self) -> &LinuxPlatform {
        &self.platform
    }

    pub fn platform_mut(&mut self) -> &mut LinuxPlatform {
        &mut self.platform
    }

    pub fn clock(&self) -> &SharedClock {
        &self.clock
    }

    pub fn loop_stats(&self) -> &LoopStats {
        &self.control.stats
    }

    /// Ticks the controller until `stop` says so (asked before every tick with the time since
    /// the run started, in ns) or an error. `after_tick` sees the platform, the tick's applied
    /// actions, the loop's figures and the time since the run started.
    pub fn run(
        &mut self,
        mut stop: impl FnMut(u64) -> bool,
        mut after_tick: impl FnMut(&mut LinuxPlatform, &[Action], &LoopStats, u64),
    ) -> Result<()> {
        let clock = self.clock.clone();
        let started_ns = clock.now_ns();
        let since = || clock.now_ns().saturating_sub(started_ns);
        let result = self.control.run(
            &mut self.platform,
            self.controller.as_mut(),
            || stop(since()),
            |p, applied, stats| after_tick(p, applied, stats, since()),
        );
        self.run_span_ns = Some((started_ns, clock.now_ns()));
        result
    }

    /// Why the controller's own code failed (a Python controller's exception), if it did:
    /// [`Session::run`] has then stopped, and [`Session::finish`] restores as always.
    pub fn controller_failure(&self) -> Option<String> {
        self.controller.failure()
    }

    /// Ticks `controller` at `interval_ns` from the next [`Session::run`] on (a reloaded
    /// configuration); the platform reads what the new controller needs.
    pub fn replace_controller(&mut self, controller: Box<dyn Controller + Send>, interval_ns: u64) {
        self.platform.set_stall_inputs(|role| controller.stall_inputs(role));
        self.platform.set_usage_inputs(|role| controller.reads_usage(role));
        self.controller = controller;
        self.control.interval_ns = interval_ns.max(1);
        self.platform.set_job_poll_budget(PollBudget::for_interval(interval_ns));
    }

    /// Ends the loop's rests when `fd` turns readable (the caller's signalfd), so that `stop`
    /// is asked at once.
    pub fn wake_on(&mut self, fd: std::os::fd::OwnedFd) {
        self.control.stop_fds.push(fd);
    }

    /// (Re-)arms one PSI trigger per managed group, as the plan asked.
    fn arm_triggers(&mut self) {
        let Some(t) = self.triggers else { return };
        self.control.idle_interval_ns = t.idle_interval_ns;
        match self.platform.arm_triggers(t.stall_us, t.window_us) {
            Ok(triggers) => self.control.triggers = triggers,
            Err(e) => {
                self.control.triggers.clear();
                tracing::warn!(error = %e, "PSI triggers unavailable; ticking on the timer only");
            }
        }
    }

    /// Whether `added` could join the managed groups once those named in `leaving` are gone:
    /// each group's cgroup exists or is to be created, and none is managed already. Nothing
    /// changes either way.
    pub fn check_new_groups(&self, added: &[GroupSpec], leaving: &[String]) -> Result<()> {
        let backend = self.platform.backend();
        for spec in added {
            if !spec.create && !backend.exists(&spec.path) {
                return Err(crate::platform::missing_cgroup(spec));
            }
            let staying = self.platform.group_specs().filter(|g| !leaving.contains(&g.name));
            if let Some(same) = staying.into_iter().find(|g| g.path == spec.path || g.name == spec.name) {
                return Err(Error::Config {
                    path: spec.path.dir_in(Path::new("/")),
                    reason: format!("group {:?} is managed already (as {:?})", spec.name, same.name),
                });
            }
        }
        Ok(())
    }

    /// Changes the managed groups while running: the groups named in `removed` are restored
    /// and let go, then `added` are created or adopted (check them with
    /// [`Session::check_new_groups`] first). A new controller must follow
    /// ([`Session::replace_controller`]): group positions change.
    pub fn change_groups(&mut self, removed: &[String], added: Vec<GroupSpec>) -> Result<()> {
        for name in removed {
            let report = self.platform.remove_group(name, Duration::from_secs(10))?;
            tracing::info!(group = %name, restored = report.restored.len(), removed_dirs = report.removed_dirs.len(), "group released");
        }
        let names: Vec<String> = added.iter().map(|g| g.name.clone()).collect();
        self.platform.add_groups(added)?;
        for name in names {
            tracing::info!(group = %name, "group added");
        }
        self.arm_triggers();
        Ok(())
    }

    /// How long [`Session::run`] ran, in ns (0 before it has).
    pub fn run_elapsed_ns(&self) -> u64 {
        self.run_span_ns.map_or(0, |(start, end)| end - start)
    }

    /// When [`Session::run`] ended, on the session's clock (now, before it has).
    pub fn run_ended_ns(&self) -> u64 {
        self.run_span_ns.map_or_else(|| self.clock.now_ns(), |(_, end)| end)
    }

    /// Stops the writer (waiting up to `restore_timeout` for writes in flight) and restores
    /// every change; what it could not restore is in [`SessionEnd::restore`] (see
    /// [`SessionEnd::restored`]).
    pub fn finish(mut self, restore_timeout: Duration) -> Result<SessionEnd> {
        // Reports sent before the stop count, though no tick read them.
        self.platform.drain_job_reports(JOB_DRAIN_BUDGET);
        let group_names: Vec<String> = self.platform.group_specs().map(|g| g.name.clone()).collect();
        let job_counts = (0..group_names.len()).map(|g| self.platform.job_counts(g).clone()).collect();
        let stats = self.platform.stats().clone();
        let recovered_from_crash = self.platform.recovered().is_some();
        let restore = self.platform.restore(restore_timeout)?;
        if restore.failures.is_empty() {
            tracing::info!(restored = restore.restored.len(), removed_dirs = restore.removed_dirs.len(), "restored every original value");
        } else {
            // The journal is kept: the next start tries these again.
            tracing::error!(failures = ?restore.failures, journal = ?self.journal, "could not restore everything; kept in the journal for the next start");
        }
        Ok(SessionEnd {
            group_names,
            job_counts,
            stats,
            loop_stats: self.control.stats,
            restore,
            recovered_from_crash,
            journal: self.journal,
        })
    }
}

/// How long [`Session::finish`] reads the job socket's backlog at most.
const JOB_DRAIN_BUDGET: Duration = Duration::from_secs(1);

/// What a session did, once everything is restored.
pub struct SessionEnd {
    /// The groups managed at the end (the plan's, unless changed while running), in order.
    pub group_names: Vec<String>,
    /// Per group, in the order of `group_names`.
    pub job_counts: Vec<JobCounts>,
    pub stats: PlatformStats,
    pub loop_stats: LoopStats,
    pub restore: RestoreReport,
    /// The platform restored a crashed earlier session's journal when it opened.
    pub recovered_from_crash: bool,
    journal: Option<PathBuf>,
}

impl SessionEnd {
    /// `Ok` when every change was put back; otherwise [`Error::RestoreIncomplete`] (what could
    /// not be restored stays journaled for the next start).
    pub fn restored(&self) -> Result<()> {
        if self.restore.failures.is_empty() {
            return Ok(());
        }
        Err(Error::RestoreIncomplete { journal: self.journal.clone().unwrap_or_default(), failures: self.restore.failures.join("; ") })
    }
}
