//! Memory controllers shared by every platform.
//!
//! A controller is pure code: each tick it receives an [`Observation`] of the workload groups
//! it manages and returns [`Action`]s. It never reads a clock, a file or a cgroup; the loop
//! that calls it belongs to the platform (the simulator's engine, or the Linux agent), so the
//! same controller object runs unchanged on both. Nothing here names a simulator or Linux
//! type: times are integer nanoseconds or microseconds, sizes are bytes.
//!
//! Controllers: [`Sara`] (`sara`), [`Greedy`] (`greedy`), [`FixedLimits`] (`offline`, `static`),
//! [`Tmo`] (`tmo-low`, `tmo-high`), [`Senpai`] (`senpai`) and critmem's own [`Tailguard`]
//! (`tailguard`); [`make_controller`] builds one by
//! name from any serde source. In all of them the non-real-time groups get the memory the soft
//! real-time groups do not hold ([`budget`]). Pure profiling helpers the platform's profiling
//! runs feed: [`estimate_bcet_ns`], [`fit_exec_vs_stall`], [`pick_offline_limit`],
//! [`pick_tmo_threshold`].

use serde::{Deserialize, Serialize};

pub mod budget;
pub mod conformance;
mod error;
pub mod external;
pub mod factory;
pub mod fixed;
pub mod greedy;
mod jobs;
pub mod profile;
pub mod sara;
pub mod senpai;
pub mod tailguard;
pub mod tmem;
pub mod tmo;

pub use budget::{interval_stall_ns, LimitKnob, StallKind};
pub use conformance::{check_platform, ConformanceProbe, ConformanceReport, Violation};
pub use error::PolicyError;
pub use external::{external_controllers, register_external_controllers, ExternalConfig, ExternalControllers, ExternalError, ExternalInfo};
pub use factory::{
    controller_info, controller_names, make_controller, ControllerConfig, ControllerInfo, ControllerKind, TickRequest, CONTROLLERS,
};
pub use fixed::{pick_offline_limit, FixedLimits, OfflineConfig, StaticConfig};
pub use greedy::{Greedy, GreedyConfig};
pub use jobs::MAX_PENDING_JOBS;
pub use profile::{estimate_bcet_ns, fit_exec_vs_stall, JobProfile, LinearFit};
pub use sara::{is_long_stall, is_severe_interval, Sara, SaraConfig, SaraInterval, SaraJob};
pub use senpai::{Senpai, SenpaiConfig, SenpaiState};
pub use tailguard::{Tailguard, TailguardConfig, TailguardJob};
pub use tmo::{pick_tmo_threshold, tmo_reclaim_bytes, ThresholdSearch, Tmo, TmoConfig, TMO_LOW_THRESHOLD_PCT};

/// Index of a workload group in [`Observation::groups`]; stable for a run.
pub type GroupId = usize;

/// What a group is for, as declared by its configuration.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum GroupRole {
    /// Periodic soft real-time work whose jobs report release and completion.
    SoftRealTime {
        /// Relative deadline of each job.
        deadline_ns: u64,
        /// Best-case execution time (with unlimited memory), configured or profiled.
        bcet_ns: u64,
    },
    /// Throughput work that gets whatever memory the others do not hold.
    NonRealTime,
}

/// The role a group is declared with, as scenario files and the agent's config spell it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum RoleName {
    /// Soft real-time work: periodic jobs with deadlines.
    #[serde(rename = "soft-rt")]
    SoftRealTime,
    /// Throughput work (the default).
    #[default]
    #[serde(rename = "non-rt")]
    NonRealTime,
}

impl RoleName {
    pub fn as_str(self) -> &'static str {
        match self {
            RoleName::SoftRealTime => "soft-rt",
            RoleName::NonRealTime => "non-rt",
        }
    }
}

impl GroupRole {
    /// The declared role this is an instance of.
    pub fn name(&self) -> RoleName {
        match self {
            GroupRole::SoftRealTime { .. } => RoleName::SoftRealTime,
            GroupRole::NonRealTime => RoleName::NonRealTime,
        }
    }
}

/// Cumulative stall totals in microseconds, as PSI reports them (`total=`), since the group
/// was created. Controllers take deltas between ticks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StallTotals {
    pub memory_some_us: u64,
    pub memory_full_us: u64,
    pub io_some_us: u64,
    pub io_full_us: u64,
    /// Time some task of the group was runnable but waited for a CPU (`cpu.pressure`).
    #[serde(default)]
    pub cpu_some_us: u64,
}

/// Which pressure totals a controller reads of one group. A platform keeps these fresh at
/// every tick; the others it may refresh less often (they still feed metrics and logs), which
/// on Linux saves the kernel formatting a pressure file nobody looks at.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StallInputs {
    pub memory: bool,
    pub io: bool,
}

impl StallInputs {
    pub const ALL: StallInputs = StallInputs { memory: true, io: true };
    pub const MEMORY: StallInputs = StallInputs { memory: true, io: false };
    pub const NONE: StallInputs = StallInputs { memory: false, io: false };

    /// These totals for a soft real-time group, none for any other.
    pub fn of_soft_rt(self, role: &GroupRole) -> StallInputs {
        if matches!(role, GroupRole::SoftRealTime { .. }) {
            self
        } else {
            StallInputs::NONE
        }
    }
}

/// Memory knobs of a group. `None` means "no limit" (max/high) or "no protection" (min/low).
/// Semantics follow cgroup v2: `max` is a hard limit (reclaim, never exceed), `high` throttles
/// and reclaims above it, `min`/`low` protect from reclaim (hard/best effort).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryKnobs {
    pub max_bytes: Option<u64>,
    pub high_bytes: Option<u64>,
    pub min_bytes: Option<u64>,
    pub low_bytes: Option<u64>,
}

/// CPU and I/O bandwidth limits of a group; `None` means no limit.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BandwidthKnobs {
    /// CPU time the group's tasks may use together, in thousandths of one CPU per unit of
    /// wall time (`cpu.max` with a [`CPU_PERIOD_US`] period: 500 is half a CPU, 2000 two).
    pub cpu_millicpus: Option<u64>,
    /// Reads from the platform's swap device (`io.max` `rbps`).
    pub io_read_bytes_per_s: Option<u64>,
    /// Writes to the platform's swap device (`io.max` `wbps`).
    pub io_write_bytes_per_s: Option<u64>,
}

impl BandwidthKnobs {
    /// Starting limits as a group declares them (`cpu_millicpus`, `io_read_mb_per_s`,
    /// `io_write_mb_per_s`, rates in decimal MB/s), each checked against the smallest limit
    /// a platform applies; an error names the key and says what is wrong.
    pub fn declared(
        cpu_millicpus: Option<u64>,
        io_read_mb_per_s: Option<f64>,
        io_write_mb_per_s: Option<f64>,
    ) -> Result<Self, (&'static str, String)> {
        if let Some(m) = cpu_millicpus.filter(|&m| m < MIN_CPU_MILLICPUS) {
            return Err((
                "cpu_millicpus",
                format!("must be at least {MIN_CPU_MILLICPUS} (1 ms per 100 ms period, the smallest quota) (got {m})"),
            ));
        }
        let rate = |key: &'static str, mb_per_s: Option<f64>| {
            let min_mb = MIN_IO_BYTES_PER_S as f64 / 1e6;
            match mb_per_s {
                Some(mb) if !mb.is_finite() || mb < min_mb => {
                    Err((key, format!("must be a number of at least {min_mb} MB/s, the smallest I/O limit (got {mb})")))
                }
                mb => Ok(mb.map(|mb| (mb * 1e6).round() as u64)),
            }
        };
        Ok(BandwidthKnobs {
            cpu_millicpus,
            io_read_bytes_per_s: rate("io_read_mb_per_s", io_read_mb_per_s)?,
            io_write_bytes_per_s: rate("io_write_mb_per_s", io_write_mb_per_s)?,
        })
    }

    /// The actions that put these limits on `group` (none for a limit that is not set).
    pub fn actions(self, group: GroupId) -> Vec<Action> {
        let mut out = Vec::new();
        if let Some(m) = self.cpu_millicpus {
            out.push(Action::SetCpuMax { group, millicpus: Some(m) });
        }
        if self.io_read_bytes_per_s.is_some() || self.io_write_bytes_per_s.is_some() {
            let (read_bytes_per_s, write_bytes_per_s) = (self.io_read_bytes_per_s, self.io_write_bytes_per_s);
            out.push(Action::SetIoMax { group, read_bytes_per_s, write_bytes_per_s });
        }
        out
    }
}

/// The period every platform enforces a CPU bandwidth limit over (the cgroup default).
pub const CPU_PERIOD_US: u64 = 100_000;
/// The smallest CPU limit a platform applies: the kernel's smallest quota (1 ms) per period.
pub const MIN_CPU_MILLICPUS: u64 = 10;
/// The smallest I/O limit a platform applies, so a throttled group can still fault its pages
/// back in.
pub const MIN_IO_BYTES_PER_S: u64 = 1 << 20;

/// The CPU limit a platform applies for a `SetCpuMax` request on a machine of `cpus` CPUs:
/// at least [`MIN_CPU_MILLICPUS`], and none where the request covers every CPU.
pub fn applied_cpu_millicpus(requested: Option<u64>, cpus: u32) -> Option<u64> {
    requested.filter(|&m| m < u64::from(cpus) * 1000).map(|m| m.max(MIN_CPU_MILLICPUS))
}

/// The I/O limit a platform applies for one direction of a `SetIoMax` request.
pub fn applied_io_bytes_per_s(requested: Option<u64>) -> Option<u64> {
    requested.map(|b| b.max(MIN_IO_BYTES_PER_S))
}

/// One group as seen at a tick.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GroupObservation {
    pub name: String,
    pub role: GroupRole,
    pub stall: StallTotals,
    /// Memory charged to the group now (resident pages, as `memory.current`).
    pub usage_bytes: u64,
    pub knobs: MemoryKnobs,
    /// The smallest limit the platform will ever apply (the group's declared floor).
    pub floor_bytes: u64,
    /// CPU time the group's tasks used since the group was created (`cpu.stat` `usage_usec`,
    /// v1 `cpuacct.usage`): a throughput group's progress where it computes.
    #[serde(default)]
    pub cpu_usage_us: u64,
    #[serde(default)]
    pub bandwidth: BandwidthKnobs,
}

/// A job boundary reported by a soft real-time group since the previous tick.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum JobEvent {
    /// Job `job` of `group` was released at `at_ns`; its absolute deadline is `deadline_ns`.
    Release { group: GroupId, job: u64, at_ns: u64, deadline_ns: u64 },
    /// Job `job` completed at `at_ns`.
    Completion { group: GroupId, job: u64, at_ns: u64 },
    /// Job `job` was dropped at `at_ns` (by a controller's request or by the workload).
    Drop { group: GroupId, job: u64, at_ns: u64 },
}

/// Everything a controller sees at one tick.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Observation {
    /// Platform time of this tick (monotonic; the simulator's clock or CLOCK_MONOTONIC).
    pub now_ns: u64,
    /// Memory the managed groups share (the budget the controller divides).
    pub total_memory_bytes: u64,
    /// CPUs of the machine; a CPU limit of this many CPUs or more limits nothing.
    #[serde(default = "one_cpu")]
    pub cpus: u32,
    pub groups: Vec<GroupObservation>,
    /// Job events since the previous tick, in the order they happened.
    pub events: Vec<JobEvent>,
}

fn one_cpu() -> u32 {
    1
}

/// A change a controller asks for. The platform clamps limits to each group's floor.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Action {
    /// A hard limit (`memory.max`); `None` removes it.
    SetMax { group: GroupId, bytes: Option<u64> },
    /// A throttling limit (`memory.high`); `None` removes it.
    SetHigh { group: GroupId, bytes: Option<u64> },
    /// Hard protection from reclaim (`memory.min`); `None` removes it.
    SetMin { group: GroupId, bytes: Option<u64> },
    /// Best-effort protection from reclaim (`memory.low`); `None` removes it.
    SetLow { group: GroupId, bytes: Option<u64> },
    /// Abort the running job `job` of `group` now.
    DropJob { group: GroupId, job: u64 },
    /// Reclaim up to `bytes` of the group's memory now (its coldest pages first), without
    /// changing any limit (cgroup v2's `memory.reclaim`). Pages reclaimed fault back in when
    /// the group touches them again.
    Reclaim { group: GroupId, bytes: u64 },
    /// A CPU bandwidth limit over all of the group's tasks (`cpu.max`), in thousandths of one
    /// CPU; `None` removes it.
    SetCpuMax { group: GroupId, millicpus: Option<u64> },
    /// I/O bandwidth limits on the platform's swap device (`io.max`; cgroup v1's
    /// `blkio.throttle.{read,write}_bps_device`); `None` removes a direction's limit.
    SetIoMax { group: GroupId, read_bytes_per_s: Option<u64>, write_bytes_per_s: Option<u64> },
}

impl Action {
    /// The group the action is for.
    pub fn group(&self) -> GroupId {
        match *self {
            Action::SetMax { group, .. }
            | Action::SetHigh { group, .. }
            | Action::SetMin { group, .. }
            | Action::SetLow { group, .. }
            | Action::DropJob { group, .. }
            | Action::Reclaim { group, .. }
            | Action::SetCpuMax { group, .. }
            | Action::SetIoMax { group, .. } => group,
        }
    }
}

/// A memory policy.
pub trait Controller {
    /// Short name for reports (e.g. "sara", "greedy").
    fn name(&self) -> &str;
    /// Decides this tick's actions.
    fn tick(&mut self, obs: &Observation) -> Vec<Action>;
    /// The tick period this controller is designed for; the platform's loop should call
    /// [`Controller::tick`] at this period. SARA counts one tick as one monitoring interval.
    fn interval_ns(&self) -> u64 {
        DEFAULT_INTERVAL_NS
    }
    /// The pressure totals [`Controller::tick`] reads of a group with this role. The default,
    /// everything, is always correct; a narrower answer lets a platform read less per tick.
    fn stall_inputs(&self, _role: &GroupRole) -> StallInputs {
        StallInputs::ALL
    }
    /// Whether [`Controller::tick`] reads the usage of a group with this role. The default,
    /// yes, is always correct; no lets a platform refresh that group's usage less often.
    fn reads_usage(&self, _role: &GroupRole) -> bool {
        true
    }
    /// Whether [`Controller::tick`] reads a group's CPU time or CPU pressure, or asks for CPU
    /// limits. The default, yes, is always correct; no lets a platform leave CPU accounting
    /// out (the simulator then keeps no CPU groups, and observes both as zero), and a
    /// `SetCpuMax` from such a controller may be ignored.
    fn uses_cpu(&self) -> bool {
        true
    }
    /// Why the controller's own code failed (an exception in a Python controller), once it
    /// has: the loop then stops, and the platform restores what it set up. Built-in
    /// controllers never fail.
    fn failure(&self) -> Option<String> {
        None
    }
}

/// The narrow interface a control loop needs from a platform. The simulator implements it
/// inside its engine; the Linux agent over cgroupfs, PSI and its job socket.
pub trait Platform {
    type Error: std::error::Error;
    /// Reads the current state of every managed group, and the job events since last time.
    fn observe(&mut self) -> Result<Observation, Self::Error>;
    /// Applies actions and returns what was applied, as applied. The contract every platform
    /// keeps ([`conformance`] checks it on each):
    ///
    /// - **Rounding.** A hard (`max`) or throttling (`high`) limit is the request rounded
    ///   *down* to whole pages of the platform: it never exceeds the request, except to honour
    ///   the floor. Protections (`min`, `low`) are rounded down the same way.
    /// - **Floor.** No limit is ever below the group's `floor_bytes` as observed (a whole
    ///   number of pages: a platform rounds a configured floor up to whole pages); a request
    ///   below it gets exactly the floor.
    /// - **Safety.** Beyond that a platform may apply a higher limit where the requested one
    ///   would harm the group (Linux: memory a cgroup v2 group cannot give back, a limit held
    ///   after an out-of-memory rescue) and a lower one where the machine cannot give more
    ///   (the simulator: its memory; cgroup v1: the group's memory+swap limit).
    /// - **Clearing.** `None` removes the limit or protection.
    /// - **What is returned.** Actions for groups that do not exist are ignored and left out;
    ///   an action asking for what is already in place may be left out too.
    /// - **Jobs.** `DropJob` is passed to the group's workload, and returned if it was.
    /// - **Reclaim.** `Reclaim` changes no limit or protection. It asks for whole pages (the
    ///   request rounded down; less than a page asks nothing and is left out). It is returned
    ///   with the bytes the platform reclaimed (the simulator, synchronously) or asked the
    ///   kernel to reclaim (Linux, off the control thread: an upper bound); a platform
    ///   without proactive reclaim (cgroup v1) leaves it out, never failing, and so does one
    ///   that could reclaim nothing.
    /// - **CPU bandwidth.** `SetCpuMax` is enforced over [`CPU_PERIOD_US`]: the group's tasks
    ///   together run at most `millicpus × period / 1000` in each period, then wait for the
    ///   next. A request below [`MIN_CPU_MILLICPUS`] gets exactly that; one of at least
    ///   `cpus × 1000` limits nothing and is applied (and returned) as `None`. Under a
    ///   controller whose [`Controller::uses_cpu`] is false a platform may leave it out, and
    ///   so does one for a group without the CPU controller (cgroup v2 where the cgroup above
    ///   the group, not critmem's, does not delegate `cpu`), always, never failing.
    /// - **I/O bandwidth.** `SetIoMax` limits the group's reads and writes of the swap device.
    ///   A request below [`MIN_IO_BYTES_PER_S`] gets exactly that. A platform with no swap
    ///   device it may limit leaves the action out, never failing.
    fn apply(&mut self, actions: &[Action]) -> Result<Vec<Action>, Self::Error>;
}

/// Default control interval (SARA's monitoring interval length).
pub const DEFAULT_INTERVAL_NS: u64 = 5_000_000;

/// One iteration of the platform-neutral loop: observe, decide, apply.
pub fn step<P: Platform, C: Controller + ?Sized>(platform: &mut P, controller: &mut C) -> Result<Vec<Action>, P::Error> {
    let obs = platform.observe()?;
    let actions = controller.tick(&obs);
    platform.apply(&actions)
}
