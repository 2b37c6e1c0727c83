//! The file's structure as serde reads it (TOML, or the same structure as JSON). Unknown keys
//! are refused so typos never pass silently. Every key with a fixed set of values is a serde
//! enum ([`Choice`]); an unknown value is refused at its key with the accepted ones listed.

use super::error::{one_line, ScenarioError};
use crate::mem::{DeviceId, DeviceSpec, MemoryLayout, RegionKind, ReservationKind, SharePolicy};
use crate::model::memory::StreamOrder;
use crate::model::program::{Protocol, StackWait};
use crate::model::scheduler::{PriorityOrder, SchedulerKind};
use crate::model::scheduler::{ServerKind, ServerPolicy};
use crate::model::task::{Criticality, OverrunPolicy};
use critmem_policy::RoleName;
use schemars::{json_schema, JsonSchema, Schema, SchemaGenerator};
use serde::de::{DeserializeOwned, IntoDeserializer};
use serde::{Deserialize, Deserializer};
use std::fmt;

#[derive(Deserialize, JsonSchema, Debug, Default)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "Scenario")]
pub(super) struct RawScenario {
    /// `[machine]`: the CPUs the tasks run on.
    pub(super) machine: Option<RawMachine>,
    /// `[scheduler]`: the CPU scheduler, its table of slots and its tree of servers.
    pub(super) scheduler: Option<RawScheduler>,
    /// `[[task]]`: the tasks, one table each.
    #[serde(default)]
    pub(super) task: Vec<RawTask>,
    /// `[run]`: how long to simulate and the seed of every random draw.
    pub(super) run: Option<RawRun>,
    /// `[memory]`: switches on the page-level memory model (frames, address spaces, swap, PSI).
    pub(super) memory: Option<RawMemory>,
    /// `[[reservation]]`: memory reservations with page lists of their own.
    #[serde(default)]
    pub(super) reservation: Vec<RawReservation>,
    /// `[[region]]`: shared memory regions that tasks map and touch.
    #[serde(default)]
    pub(super) region: Vec<RawRegion>,
    /// `[control]`: the memory controller run on the groups every interval.
    pub(super) control: Option<RawControl>,
    /// `[[group]]`: memory-limited task groups with cgroup semantics, the controller's unit.
    #[serde(default)]
    pub(super) group: Vec<RawGroup>,
    /// `[[resource]]`: mutexes and k-unit resources that programs lock.
    #[serde(default)]
    pub(super) resource: Vec<RawResource>,
    /// `[components]`: what every component shares unless it says otherwise.
    pub(super) components: Option<RawComponents>,
    /// `[tmem]`: TMEM's memory scheduler over the components' stacks and cbufs.
    pub(super) tmem: Option<RawTmem>,
    /// `[[component]]`: components that programs call synchronously.
    #[serde(default)]
    pub(super) component: Vec<RawComponent>,
    /// `[io]`: HiRes's network device: packet streams, ports bound to event threads, transmissions.
    pub(super) io: Option<super::io::RawIo>,
}

#[derive(Deserialize, JsonSchema, Debug)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "Machine")]
pub(super) struct RawMachine {
    /// Number of CPUs, numbered from 0 (a file without `[machine]` has 1).
    pub(super) cpus: i64,
}

#[derive(Deserialize, JsonSchema, Debug)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "Scheduler")]
pub(super) struct RawScheduler {
    /// The scheduling policy: uniprocessor `fp`, `rm`, `dm`, `edf`; partitioned `pfp`, `pedf`;
    /// global `gedf`, `gfp`; the table-driven `cyclic`; MC²'s criticality levels `mc2`. With
    /// servers it is the root's policy.
    ///
    /// Or a scheduler written in Python: `"file.py:Class"` (relative to the scenario's
    /// directory), `"package.module:Class"`, or an installed entry point of `critmem.schedulers`.
    #[schemars(schema_with = "named_choice_schema::<SchedulerKind>")]
    pub(super) kind: NamedChoice<SchedulerKind>,
    /// A Python scheduler's keyword arguments (a table); only with a Python `kind`.
    #[schemars(with = "Option<serde_json::Map<String, serde_json::Value>>")]
    pub(super) config: Option<FiniteJson>,
    /// How `pfp` and `gfp` order tasks: `explicit` (each task's `priority`), `rm` (by period) or
    /// `dm` (by deadline); default explicit when every task has a `priority`, else rm.
    #[serde(default, deserialize_with = "some_choice")]
    #[schemars(schema_with = "some_choice_schema::<PriorityOrder>")]
    pub(super) priorities: Option<PriorityOrder>,
    /// Length of the cyclic table that repeats (`cyclic`, and level A under `mc2`), ms.
    pub(super) major_frame_ms: Option<f64>,
    /// `[[scheduler.slot]]`: the windows of the cyclic table (level A's table under `mc2`).
    #[serde(default)]
    pub(super) slot: Vec<RawSlot>,
    /// `[[scheduler.server]]`: the nodes of a tree of servers under each CPU's root scheduler.
    #[serde(default)]
    pub(super) server: Vec<RawServer>,
    /// CPU time a server's child-scheduler thread takes per delivered event (servers only).
    pub(super) event_cost_us: Option<f64>,
    /// Whether a child dispatches only once no event is pending for it (servers only).
    pub(super) pending_event_check: Option<bool>,
    /// Lets servers reserve more than their parent holds (no admission control; budgets are
    /// still enforced as the run goes).
    pub(super) overcommit: Option<bool>,
}

/// `[[scheduler.server]]`: one node of a scheduler hierarchy.
#[derive(Deserialize, JsonSchema, Debug)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "Server")]
pub(super) struct RawServer {
    /// The server's name, which tasks give as `server` and child servers as `parent`.
    pub(super) name: String,
    /// The server it runs under; default `root`, the CPU's root scheduler.
    pub(super) parent: Option<String>,
    /// `deferrable` (budget kept until its period ends), `polling` (budget lost when its subtree is
    /// idle) or `level` (a plain priority, no budget).
    #[serde(deserialize_with = "choice")]
    #[schemars(schema_with = "choice_schema::<ServerKind>")]
    pub(super) kind: ServerKind,
    /// CPU time per period (deferrable and polling servers), ms.
    pub(super) budget_ms: Option<f64>,
    /// Replenishment period of the budget (deferrable and polling servers), ms.
    pub(super) period_ms: Option<f64>,
    /// Rank among its siblings under a fixed-priority parent (lower number = higher priority).
    pub(super) priority: Option<i64>,
    /// How the server schedules its children: `fp`, `rm`, `dm`, `edf`, or at the top a task policy
    /// (`gedf`, `gfp`, `pedf`, `pfp`, `cyclic`, or a Python scheduler named as `[scheduler] kind`
    /// names one, over the server's CPUs); default the root's.
    #[serde(default, rename = "policy")]
    #[schemars(schema_with = "some_named_choice_schema::<ServerPolicy>")]
    pub(super) policy_name: Option<NamedChoice<ServerPolicy>>,
    /// A Python policy's keyword arguments (a table); only with a Python `policy`.
    #[schemars(with = "Option<serde_json::Map<String, serde_json::Value>>")]
    pub(super) config: Option<FiniteJson>,
    /// The CPU a top-level server runs on; default 0.
    pub(super) cpu: Option<i64>,
    /// The CPUs of a top-level server with a task policy (gedf, gfp, pedf, pfp, cyclic).
    pub(super) cpus: Option<Vec<i64>>,
    /// This server's own `[scheduler] event_cost_us`.
    pub(super) event_cost_us: Option<f64>,
    /// How gfp and pfp rank the server's tasks.
    #[serde(default, deserialize_with = "some_choice")]
    #[schemars(schema_with = "some_choice_schema::<PriorityOrder>")]
    pub(super) priorities: Option<PriorityOrder>,
    /// A cyclic server's table.
    pub(super) major_frame_ms: Option<f64>,
    /// `[[scheduler.server.slot]]`: the windows of a cyclic server's table.
    #[serde(default)]
    pub(super) slot: Vec<RawServerSlot>,
    /// Share of its own CPU reservation it keeps for itself (its scheduler, its event
    /// deliveries), in percent: its children's reservations fit in the rest.
    pub(super) overhead_percent: Option<f64>,
    /// Memory and I/O bandwidth reserved for it from its parent.
    pub(super) reserve: Option<super::server_reservations::RawReserve>,
}

impl RawServer {
    /// The server's policy as written (an external one as [`ServerPolicy::External`]).
    pub(super) fn policy(&self) -> Option<ServerPolicy> {
        self.policy_name.as_ref().map(|p| p.choice)
    }
}

/// `[[scheduler.server.slot]]`: a window of a cyclic server's table, for one of its tasks (a
/// leaf) or one of its child servers.
#[derive(Deserialize, JsonSchema, Debug)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "ServerSlot")]
pub(super) struct RawServerSlot {
    /// The task that runs in this window (a leaf server's table).
    pub(super) task: Option<String>,
    /// The child server that runs in this window (a table of partitions).
    pub(super) server: Option<String>,
    /// Start of the window within the major frame, ms.
    pub(super) start_ms: f64,
    /// Length of the window, ms.
    pub(super) duration_ms: f64,
    /// The CPU of the window, one of the server's `cpus`.
    pub(super) cpu: Option<i64>,
}

#[derive(Deserialize, JsonSchema, Debug)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "Slot")]
pub(super) struct RawSlot {
    /// The task that runs in this window (a level-A task under `mc2`).
    pub(super) task: String,
    /// Start of the window within the major frame, ms.
    pub(super) start_ms: f64,
    /// Length of the window, ms.
    pub(super) duration_ms: f64,
    /// The CPU of the window; default 0 (under `mc2` the task's own `cpu`, and not given).
    pub(super) cpu: Option<i64>,
}

#[derive(Deserialize, JsonSchema, Debug)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "Run")]
pub(super) struct RawRun {
    /// Simulated time, ms; default one hyperperiod plus the largest offset, if that is at most 100
    /// s.
    pub(super) horizon_ms: Option<f64>,
    /// Seed of every random draw (execution times, arrivals, accesses, calls); default 0.
    #[schemars(with = "Option<u64>")]
    pub(super) seed: Option<Seed>,
}

/// `[run] seed`: any 64-bit seed `--seed` takes. Read as i64 it would refuse 2^63 and up with
/// "expected i64", though the toml parser reads them.
#[derive(Debug, Clone, Copy)]
pub(super) struct Seed(pub(super) u64);

impl<'de> Deserialize<'de> for Seed {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(SeedVisitor)
    }
}

struct SeedVisitor;

impl serde::de::Visitor<'_> for SeedVisitor {
    type Value = Seed;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an integer from 0 to 2^64 - 1")
    }
    fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Seed, E> {
        u64::try_from(v).map(Seed).map_err(|_| E::custom(format!("must not be negative (got {v})")))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Seed, E> {
        Ok(Seed(v))
    }
}

#[derive(Deserialize, JsonSchema, Debug)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "Task")]
pub(super) struct RawTask {
    /// The task's name, unique among tasks.
    pub(super) name: String,
    /// A fixed execution time per job, ms; with a `program`, the job's budget its steps draw from.
    pub(super) wcet_ms: Option<f64>,
    /// An execution time drawn per job from a distribution, instead of `wcet_ms`.
    pub(super) exec: Option<RawExec>,
    /// Time between releases of a periodic task, ms.
    pub(super) period_ms: Option<f64>,
    /// Shortest gap between releases of a sporadic task, ms.
    pub(super) min_interarrival_ms: Option<f64>,
    /// Longest gap between releases of a sporadic task, ms; default the minimum.
    pub(super) max_interarrival_ms: Option<f64>,
    /// Relative deadline, ms; default the period.
    pub(super) deadline_ms: Option<f64>,
    /// Time of the first release, ms.
    #[serde(default)]
    pub(super) offset_ms: f64,
    /// No release at or after this time.
    pub(super) stop_ms: Option<f64>,
    /// Fixed priority (lower number = higher priority); needed by `fp` and by explicit orders.
    pub(super) priority: Option<i64>,
    /// `A` or `B` (hard real-time), `C` (soft real-time) or `D` (best effort); under `mc2` the
    /// task's level. Default C.
    #[serde(default, deserialize_with = "some_choice")]
    #[schemars(schema_with = "some_choice_schema::<Criticality>")]
    pub(super) criticality: Option<Criticality>,
    /// The CPU the task is pinned to (partitioned schedulers, and levels A and B under `mc2`).
    pub(super) cpu: Option<i64>,
    /// `periodic` (default) or `sporadic` (gaps drawn between the inter-arrival bounds).
    #[serde(default, deserialize_with = "some_choice")]
    #[schemars(schema_with = "some_choice_schema::<ArrivalKind>")]
    pub(super) arrival: Option<ArrivalKind>,
    /// What happens to a job still running at its deadline: `continue` (default), `abort` (at the
    /// deadline) or `skip` (releases are dropped while the previous job is unfinished).
    #[serde(default, deserialize_with = "some_choice")]
    #[schemars(schema_with = "some_choice_schema::<OverrunPolicy>")]
    pub(super) overrun: Option<OverrunPolicy>,
    /// Self-suspensions of every job: after `after_ms` of execution the job sleeps `for_ms`.
    #[serde(default)]
    pub(super) suspend: Vec<RawSuspend>,
    /// The memory reservation charged for the task's pages; default global LRU.
    pub(super) reservation: Option<String>,
    /// The memory group (PSI and controller) of the task; default its reservation, else the task
    /// itself.
    pub(super) group: Option<String>,
    /// Private code and data of the task, MiB.
    pub(super) private_mb: Option<f64>,
    /// How the `access` streams are spread over a job: `sequence` (one after another, default) or
    /// `interleave`.
    #[serde(default, deserialize_with = "some_choice")]
    #[schemars(schema_with = "some_choice_schema::<StreamOrder>")]
    pub(super) access_order: Option<StreamOrder>,
    /// The memory every job touches, as a list of access streams.
    #[serde(default)]
    pub(super) access: Vec<RawAccess>,
    /// A program to run for the task on Linux (no shell), instead of a shipped worker; the
    /// simulator ignores it.
    pub(super) command: Option<Vec<String>>,
    /// On Linux: the `command` reports its jobs over the job socket.
    pub(super) reports_jobs: Option<bool>,
    /// What each job does, in order: compute, lock and unlock, call components, suspend, touch
    /// memory.
    pub(super) program: Option<Vec<RawAction>>,
    /// The leaf server of `[[scheduler.server]]` the task runs under.
    pub(super) server: Option<String>,
}

/// `[[resource]]`.
#[derive(Deserialize, JsonSchema, Debug)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "Resource")]
pub(super) struct RawResource {
    /// The resource's name, unique among resources.
    pub(super) name: String,
    /// Units of the resource; default 1 (a mutex), more makes a k-unit resource.
    pub(super) units: Option<i64>,
    /// `none` (default: a waiter blocks), `pip` (priority inheritance through dependency links) or
    /// `srp` (Baker's stack resource policy).
    #[serde(default, deserialize_with = "some_choice")]
    #[schemars(schema_with = "some_choice_schema::<Protocol>")]
    pub(super) protocol: Option<Protocol>,
}

/// One entry of `program = [...]`: exactly one of `compute_ms`, `compute_share`,
/// `compute_rest`, `suspend_ms`, `lock` (with optional `units`), `unlock`, `call` (with optional
/// `probability` and `pass_cbuf`), `call_one_of` (with optional `weights` and `pass_cbuf`),
/// `cbuf` (`"alloc"` or `"free"`) and `access` (with optional `compute_ms` spread over its
/// references and `access_order`).
#[derive(Deserialize, JsonSchema, Debug)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "Action")]
pub(super) struct RawAction {
    /// Compute for this long, ms; in an `access` step, spread over its references.
    pub(super) compute_ms: Option<f64>,
    /// Take the named resource.
    pub(super) lock: Option<String>,
    /// Units a `lock` takes; default 1.
    pub(super) units: Option<i64>,
    /// Give back the named resource (the innermost one held first).
    pub(super) unlock: Option<String>,
    /// Call the named component synchronously.
    pub(super) call: Option<String>,
    /// Chance that a `call` is made, drawn per job; default 1.
    pub(super) probability: Option<f64>,
    /// Compute this share (0 to 1) of the job's budget.
    pub(super) compute_share: Option<f64>,
    /// Self-suspend for this long, off every CPU, ms.
    pub(super) suspend_ms: Option<f64>,
    /// Compute whatever is left of the job's budget.
    pub(super) compute_rest: Option<bool>,
    /// Call exactly one of the named components, drawn by `weights`.
    pub(super) call_one_of: Option<Vec<String>>,
    /// Relative weights of `call_one_of`'s components; default equal.
    pub(super) weights: Option<Vec<f64>>,
    /// Pass the cbuf the caller holds to the called component.
    pub(super) pass_cbuf: Option<bool>,
    /// `alloc` takes a cbuf from this component's cache; `free` gives it back.
    #[serde(default, deserialize_with = "some_choice")]
    #[schemars(schema_with = "some_choice_schema::<CbufStep>")]
    pub(super) cbuf: Option<CbufStep>,
    /// Memory the step touches: streams like a task's `access`, over the memory of the
    /// program's owner (the task's, or the component's).
    pub(super) access: Option<Vec<RawAccess>>,
    /// How the step's streams are spread: `sequence` (default) or `interleave`.
    #[serde(default, deserialize_with = "some_choice")]
    #[schemars(schema_with = "some_choice_schema::<StreamOrder>")]
    pub(super) access_order: Option<StreamOrder>,
}

/// `cbuf = "alloc"` or `"free"`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(super) enum CbufStep {
    Alloc,
    Free,
}

impl Choice for CbufStep {
    const NOUN: &'static str = "cbuf step";
    const NAMES: &'static [&'static str] = &["alloc", "free"];
}

// Components ------------------------------------------------------------------------------

/// `[tmem]`: TMEM's memory scheduler over the components' stacks and cbufs.
#[derive(Deserialize, JsonSchema, Debug)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "Tmem")]
pub(super) struct RawTmem {
    /// The memory scheduler: `min`, `max`, `fair`, `greedy`, `tmem` (the paper's Algorithm 1),
    /// `tmem-composite` or `watermark`; or one written in Python: `"file.py:Class"`,
    /// `"package.module:Class"` or an installed entry point of `critmem.memory_schedulers`.
    pub(super) policy: Option<String>,
    /// A Python memory scheduler's keyword arguments (a table); only with a Python `policy`.
    #[schemars(with = "Option<serde_json::Map<String, serde_json::Value>>")]
    pub(super) config: Option<FiniteJson>,
    /// How a request finding its cache empty waits: `inherit` (default: with a dependency link to
    /// the holder) or `block` (off every CPU).
    #[serde(default, deserialize_with = "some_choice")]
    #[schemars(schema_with = "some_choice_schema::<StackWait>")]
    pub(super) wait: Option<StackWait>,
    /// Units in the pool beyond every cache's minimum; left out: no limit.
    pub(super) units_above_min: Option<i64>,
    /// How often the policy runs, ms; default 250.
    pub(super) period_ms: Option<f64>,
    /// Time of the policy's first run, ms; until then no cache has a limit but the pool. Default 0.
    pub(super) first_run_ms: Option<f64>,
    /// CPU time of mapping a passed cbuf into a component the first time, µs; default 0.
    pub(super) cbuf_map_us: Option<f64>,
    /// Units a cache may take over its desired allocation when every holder is self-suspended;
    /// default 0 (off).
    pub(super) ss_max_units: Option<i64>,
}

/// `[components]`: what every component shares unless it says otherwise.
#[derive(Deserialize, JsonSchema, Debug)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "Components")]
pub(super) struct RawComponents {
    /// CPU time of entering a component, µs; default 0.
    pub(super) invocation_cost_us: Option<f64>,
}

/// `[[component]]`.
#[derive(Deserialize, JsonSchema, Debug)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "Component")]
pub(super) struct RawComponent {
    /// The component's name, unique among components.
    pub(super) name: String,
    /// Execution stacks, one per running invocation; left out: as many as there are invocations.
    /// Under `[tmem]`, the cache's minimum.
    pub(super) stacks: Option<i64>,
    /// What a caller finding no free stack does: `inherit` (default) or `block`.
    #[serde(default, deserialize_with = "some_choice")]
    #[schemars(schema_with = "some_choice_schema::<StackWait>")]
    pub(super) stack_wait: Option<StackWait>,
    /// Shared buffers the component starts with (its minimum under `[tmem]`).
    pub(super) cbufs: Option<i64>,
    /// CPU time of entering this component, µs; overrides `[components]`.
    pub(super) invocation_cost_us: Option<f64>,
    /// What an invocation does, in order; without one only the entry cost runs.
    #[serde(default)]
    pub(super) program: Vec<RawAction>,
    /// The component's own private memory, which its program's access steps touch.
    pub(super) private_mb: Option<f64>,
    /// The memory reservation charged for the component's pages.
    pub(super) reservation: Option<String>,
}

impl Choice for StackWait {
    const NOUN: &'static str = "stack wait";
    const NAMES: &'static [&'static str] = &["inherit", "block"];
}

// ------------------------------------------------------------------------------------------

/// `exec = { dist = ..., ... }`: `dist` selects which of the other keys apply.
#[derive(Deserialize, JsonSchema, Debug)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "Exec")]
pub(super) struct RawExec {
    /// The distribution: `fixed` (`max_ms`), `uniform` (`min_ms`, `max_ms`), `normal` (`mean_ms`,
    /// `sd_ms`, `max_ms`, `min_ms`) or `empirical` (`values_ms`).
    #[serde(deserialize_with = "choice")]
    #[schemars(schema_with = "choice_schema::<DistName>")]
    pub(super) dist: DistName,
    /// Smallest execution time, ms (`normal`: default 0).
    pub(super) min_ms: Option<f64>,
    /// Largest execution time, ms; analyses take it as the WCET.
    pub(super) max_ms: Option<f64>,
    /// Mean of a `normal` distribution, ms.
    pub(super) mean_ms: Option<f64>,
    /// Standard deviation of a `normal` distribution, ms.
    pub(super) sd_ms: Option<f64>,
    /// Execution times an `empirical` distribution draws from uniformly, ms.
    pub(super) values_ms: Option<Vec<f64>>,
}

#[derive(Deserialize, JsonSchema, Debug)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "Suspend")]
pub(super) struct RawSuspend {
    /// Execution before the suspension, ms; at most the smallest execution time.
    pub(super) after_ms: f64,
    /// Length of the suspension, ms.
    pub(super) for_ms: f64,
}

#[derive(Deserialize, JsonSchema, Debug)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "Memory")]
pub(super) struct RawMemory {
    /// Physical memory, MiB; default 4096.
    pub(super) total_mb: Option<f64>,
    /// Page size, bytes; default 4096.
    pub(super) page_bytes: Option<i64>,
    /// A device preset's name, or a device of its own (`{ read_latency_us, read_mb_per_s, ... }`).
    #[serde(default, deserialize_with = "some_swap")]
    #[schemars(schema_with = "swap_schema")]
    pub(super) swap: Option<RawSwap>,
    /// CPU time the kernel spends per page swapped in that is not memory stall (fault
    /// handling outside PSI's accounting), µs; default 0.
    pub(super) swap_in_cpu_us: Option<f64>,
    /// Swap readahead window, pages, like `vm.page-cluster`; default 8.
    pub(super) readahead_pages: Option<i64>,
    /// Interval of the memory timeline, ms; default the horizon / 500, at least 1 ms.
    pub(super) sample_ms: Option<f64>,
    /// Physical layout: `flat` (default), or `mc2`: the i.MX6's 8 DRAM banks scaled to
    /// `total_mb` (a power of two), at most 4 CPUs; a level-A/B task with a `cpu` keeps its
    /// pages in bank 4 + cpu and never pages (outgrowing the bank OOM-kills its job), all
    /// others use banks 0–3. No reservations, groups, or shared regions for A/B tasks.
    #[serde(default, deserialize_with = "some_choice")]
    #[schemars(schema_with = "some_choice_schema::<LayoutName>")]
    pub(super) layout: Option<LayoutName>,
}

#[derive(Deserialize, JsonSchema, Debug)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "Reservation")]
pub(super) struct RawReservation {
    /// The reservation's name, which tasks give as `reservation`.
    pub(super) name: String,
    /// Size of the reservation, MiB.
    pub(super) size_mb: f64,
    /// `hard` (default: never exceeds its size) or `firm` (borrows free pages).
    #[serde(default, deserialize_with = "some_choice")]
    #[schemars(schema_with = "some_choice_schema::<ReservationKindName>")]
    pub(super) kind: Option<ReservationKindName>,
}

#[derive(Deserialize, JsonSchema, Debug)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "Region")]
pub(super) struct RawRegion {
    /// The region's name, which access streams give as `region`.
    pub(super) name: String,
    /// Size of the region, MiB.
    pub(super) size_mb: f64,
    /// `shm` (default, shared memory) or `file` (file-backed pages).
    #[serde(default, deserialize_with = "some_choice")]
    #[schemars(schema_with = "some_choice_schema::<RegionKindName>")]
    pub(super) kind: Option<RegionKindName>,
    /// How reservations share its pages: `global` (default), `private` (no shared-page management),
    /// `first-touch`, `spc`, `spel` or `auto` (the paper's rule picks one).
    #[serde(default, deserialize_with = "some_choice")]
    #[schemars(schema_with = "some_choice_schema::<PolicyName>")]
    pub(super) policy: Option<PolicyName>,
}

/// One element of a task's `access`: `pattern` selects which of the other keys apply.
#[derive(Deserialize, JsonSchema, Debug)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "Access")]
pub(super) struct RawAccess {
    /// The stream's shape: `sweep`, `random`, `hotcold`, `trace` or `discard`.
    #[serde(deserialize_with = "choice")]
    #[schemars(schema_with = "choice_schema::<PatternName>")]
    pub(super) pattern: PatternName,
    /// The memory the stream addresses: a region's name; default `private`, the task's own memory.
    pub(super) region: Option<String>,
    /// Sweep: MiB per job.
    pub(super) mb: Option<f64>,
    /// Random, hot/cold: references per job.
    pub(super) refs: Option<i64>,
    /// Start of the part of the target the stream covers, MiB; default 0.
    pub(super) offset_mb: Option<f64>,
    /// Size of the part of the target the stream covers, MiB; default the rest of it.
    pub(super) span_mb: Option<f64>,
    /// Hot/cold: share of the pages that are hot; default 0.2.
    pub(super) hot_fraction: Option<f64>,
    /// Hot/cold: share of the references that go to hot pages; default 0.8.
    pub(super) hot_share: Option<f64>,
    /// Trace: page numbers within the target.
    pub(super) pages: Option<Vec<i64>>,
    /// Repeats of the job's references; default 1.
    pub(super) passes: Option<i64>,
    /// Share of the references that write; default 0.
    pub(super) writes: Option<f64>,
    /// First job the stream applies to, counted from 0; default 0.
    pub(super) from_job: Option<i64>,
    /// Job the stream stops before (it applies up to and without it); default none.
    pub(super) until_job: Option<i64>,
    /// The stream applies to every N-th job only (periodic bursts); default 1.
    pub(super) every_jobs: Option<i64>,
}

#[derive(Deserialize, JsonSchema, Debug)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "Group")]
pub(super) struct RawGroup {
    /// The group's name, which tasks give as `group`.
    pub(super) name: String,
    /// `soft-rt` (soft real-time: the controller protects its deadlines) or `non-rt` (default).
    #[serde(default, deserialize_with = "some_choice")]
    #[schemars(schema_with = "some_choice_schema::<RoleName>")]
    pub(super) role: Option<RoleName>,
    /// Best-case execution time of a soft real-time group's jobs, ms.
    pub(super) bcet_ms: Option<f64>,
    /// Smallest limit the controller ever applies, MiB; default one page.
    pub(super) floor_mb: Option<f64>,
    /// Hard limit of the group's memory (cgroup `memory.max`), MiB.
    pub(super) max_mb: Option<f64>,
    /// Throttle-and-reclaim limit (cgroup `memory.high`), MiB.
    pub(super) high_mb: Option<f64>,
    /// Memory protected from reclaim (cgroup `memory.min`), MiB.
    pub(super) min_mb: Option<f64>,
    /// Memory protected from reclaim unless nothing else is left (cgroup `memory.low`), MiB.
    pub(super) low_mb: Option<f64>,
    /// Starting CPU bandwidth limit over the group's tasks (cgroup `cpu.max`), in thousandths
    /// of one CPU; a controller may change it.
    pub(super) cpu_millicpus: Option<u64>,
    /// Starting limit of the group's reads from the swap device (cgroup `io.max` `rbps`),
    /// decimal MB/s; a controller may change it.
    pub(super) io_read_mb_per_s: Option<f64>,
    /// Starting limit of the write-backs of the group's pages to the swap device (`wbps`),
    /// decimal MB/s; a controller may change it.
    pub(super) io_write_mb_per_s: Option<f64>,
}

#[derive(Deserialize, JsonSchema, Debug)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "Control")]
pub(super) struct RawControl {
    /// A name of the controller registry, a Python class (`"file.py:Class"` relative to the
    /// scenario, `"package.module:Class"`) or an installed `critmem.controllers` entry point,
    /// checked by the controller's parser with its config.
    pub(super) controller: String,
    /// Time between controller ticks, ms; default the controller's own (for SARA also its
    /// monitoring interval).
    pub(super) interval_ms: Option<f64>,
    /// The controller's own table, checked by the controller's parser.
    #[schemars(with = "Option<serde_json::Value>")]
    pub(super) config: Option<FiniteJson>,
}

/// `[control] config` as JSON. serde_json turns NaN and infinities into null, which a
/// controller would read as "left out"; this refuses them where they are written instead.
#[derive(Debug, Clone)]
pub(super) struct FiniteJson(pub(super) serde_json::Value);

impl<'de> Deserialize<'de> for FiniteJson {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(FiniteJsonVisitor).map(FiniteJson)
    }
}

struct FiniteJsonVisitor;

impl<'de> serde::de::Visitor<'de> for FiniteJsonVisitor {
    type Value = serde_json::Value;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Self::Value, E> {
        Ok(v.into())
    }
    fn visit_i64<E>(self, v: i64) -> Result<Self::Value, E> {
        Ok(v.into())
    }
    fn visit_u64<E>(self, v: u64) -> Result<Self::Value, E> {
        Ok(v.into())
    }
    fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Self::Value, E> {
        serde_json::Number::from_f64(v)
            .map(serde_json::Value::Number)
            .ok_or_else(|| E::custom(format!("must be a finite number (got {v})")))
    }
    fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
        Ok(v.into())
    }
    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(serde_json::Value::Null)
    }
    fn visit_none<E>(self) -> Result<Self::Value, E> {
        Ok(serde_json::Value::Null)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        FiniteJson::deserialize(d).map(|v| v.0)
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut items = Vec::new();
        while let Some(FiniteJson(v)) = seq.next_element()? {
            items.push(v);
        }
        Ok(serde_json::Value::Array(items))
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut object = serde_json::Map::new();
        while let Some((k, FiniteJson(v))) = map.next_entry::<String, FiniteJson>()? {
            object.insert(k, v);
        }
        Ok(serde_json::Value::Object(object))
    }
}

// ---------------------------------------------------------------------------------------------
// Keys with a fixed set of values.

/// A serde enum of unit variants that a scenario key names by a string.
pub(super) trait Choice: DeserializeOwned {
    /// What the value is, for `unknown {NOUN} "x"; expected ...`.
    const NOUN: &'static str;
    /// The names serde accepts, in variant order (a test checks them against serde's list).
    const NAMES: &'static [&'static str];
}

/// `a`, `a or b`, `a, b or c`.
pub(super) fn or_list(names: &[&str]) -> String {
    match names {
        [] => String::new(),
        [one] => (*one).to_string(),
        [init @ .., last] => format!("{} or {last}", init.join(", ")),
    }
}

fn parse_choice<T: Choice, E: serde::de::Error>(name: &str) -> Result<T, E> {
    T::deserialize(name.into_deserializer())
        .map_err(|_: serde::de::value::Error| E::custom(format!("unknown {} {name:?}; expected {}", T::NOUN, or_list(T::NAMES))))
}

/// A required key whose value names one of `T`'s variants.
fn choice<'de, T: Choice, D: Deserializer<'de>>(d: D) -> Result<T, D::Error> {
    parse_choice(&String::deserialize(d)?)
}

/// The schema of a required choice key: one of `T::NAMES`.
fn choice_schema<T: Choice>(_: &mut SchemaGenerator) -> Schema {
    json_schema!({ "type": "string", "enum": T::NAMES })
}

/// The schema of an optional one: one of `T::NAMES`, or null (JSON's "left out").
pub(super) fn some_choice_schema<T: Choice>(_: &mut SchemaGenerator) -> Schema {
    let mut names: Vec<serde_json::Value> = T::NAMES.iter().map(|&n| n.into()).collect();
    names.push(serde_json::Value::Null);
    json_schema!({ "type": ["string", "null"], "enum": names })
}

/// An optional one (JSON's null counts as left out, as for every optional key).
pub(super) fn some_choice<'de, T: Choice, D: Deserializer<'de>>(d: D) -> Result<Option<T>, D::Error> {
    Option::<String>::deserialize(d)?.map(|name| parse_choice(&name)).transpose()
}

/// A choice whose value may also name a scheduler written outside critmem
/// ([`crate::model::external`]): `choice` is then the type's external variant.
#[derive(Debug, Clone)]
pub(super) struct NamedChoice<T> {
    pub(super) choice: T,
    /// The external scheduler's name.
    pub(super) external: Option<String>,
}

/// A choice that has a variant standing for external schedulers.
pub(super) trait ExternalChoice: Choice {
    const EXTERNAL: Self;
}

impl ExternalChoice for SchedulerKind {
    const EXTERNAL: Self = SchedulerKind::External;
}

impl ExternalChoice for ServerPolicy {
    const EXTERNAL: Self = ServerPolicy::External;
}

impl<'de, T: ExternalChoice> Deserialize<'de> for NamedChoice<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = String::deserialize(d)?;
        match parse_choice::<T, D::Error>(&name) {
            Ok(choice) => Ok(NamedChoice { choice, external: None }),
            Err(_) if crate::model::external::is_external_name(&name) => Ok(NamedChoice { choice: T::EXTERNAL, external: Some(name) }),
            Err(e) if name.contains(':') => Err(serde::de::Error::custom(format!(
                "{e}; a Python {} (`{name}`) runs only where critmem's Python package loads the scenario",
                T::NOUN
            ))),
            Err(e) => Err(e),
        }
    }
}

/// The schema of a choice that may name a Python scheduler instead. Its `module:Class` form
/// only: the schema cannot know which entry points are installed.
fn named_choice_schema<T: Choice>(_: &mut SchemaGenerator) -> Schema {
    json_schema!({ "anyOf": [{ "type": "string", "enum": T::NAMES }, python_class_schema()] })
}

/// The same, optional.
fn some_named_choice_schema<T: Choice>(_: &mut SchemaGenerator) -> Schema {
    json_schema!({ "anyOf": [{ "type": "string", "enum": T::NAMES }, python_class_schema(), { "type": "null" }] })
}

fn python_class_schema() -> serde_json::Value {
    serde_json::json!({
        "type": "string",
        "pattern": "^[^:\\s]+:[A-Za-z_][A-Za-z0-9_.]*$",
        "description": "a scheduler written in Python: \"file.py:Class\" (relative to the scenario's directory) or \"package.module:Class\"; an installed entry point's name is accepted too"
    })
}

impl Choice for SchedulerKind {
    const NOUN: &'static str = "scheduler";
    const NAMES: &'static [&'static str] = SchedulerKind::NAMES;
}

impl Choice for ServerKind {
    const NOUN: &'static str = "server kind";
    const NAMES: &'static [&'static str] = &["deferrable", "polling", "level"];
}

impl Choice for ServerPolicy {
    const NOUN: &'static str = "server policy";
    const NAMES: &'static [&'static str] = &["fp", "rm", "dm", "edf", "gedf", "gfp", "pedf", "pfp", "cyclic"];
}

impl Choice for PriorityOrder {
    const NOUN: &'static str = "priority order";
    const NAMES: &'static [&'static str] = &["explicit", "rm", "dm"];
}

impl Choice for Criticality {
    const NOUN: &'static str = "criticality";
    const NAMES: &'static [&'static str] = &["A", "B", "C", "D"];
}

impl Choice for OverrunPolicy {
    const NOUN: &'static str = "overrun policy";
    const NAMES: &'static [&'static str] = &["continue", "abort", "skip"];
}

impl Choice for StreamOrder {
    const NOUN: &'static str = "order";
    const NAMES: &'static [&'static str] = &["sequence", "interleave"];
}

impl Choice for Protocol {
    const NOUN: &'static str = "protocol";
    const NAMES: &'static [&'static str] = &["none", "pip", "srp"];
}

impl Choice for RoleName {
    const NOUN: &'static str = "role";
    const NAMES: &'static [&'static str] = &["soft-rt", "non-rt"];
}

/// `arrival`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(super) enum ArrivalKind {
    Periodic,
    Sporadic,
}

impl Choice for ArrivalKind {
    const NOUN: &'static str = "arrival";
    const NAMES: &'static [&'static str] = &["periodic", "sporadic"];
}

/// `exec.dist`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(super) enum DistName {
    Fixed,
    Uniform,
    Normal,
    Empirical,
}

impl Choice for DistName {
    const NOUN: &'static str = "distribution";
    const NAMES: &'static [&'static str] = &["fixed", "uniform", "normal", "empirical"];
}

/// An access stream's `pattern`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(super) enum PatternName {
    Sweep,
    Random,
    Hotcold,
    Trace,
    Discard,
}

impl Choice for PatternName {
    const NOUN: &'static str = "pattern";
    const NAMES: &'static [&'static str] = &["sweep", "random", "hotcold", "trace", "discard"];
}

/// A reservation's `kind` (limit groups are `[[group]]`s, not reservations).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(super) enum ReservationKindName {
    Hard,
    Firm,
}

impl Choice for ReservationKindName {
    const NOUN: &'static str = "kind";
    const NAMES: &'static [&'static str] = &["hard", "firm"];
}

impl From<ReservationKindName> for ReservationKind {
    fn from(kind: ReservationKindName) -> Self {
        match kind {
            ReservationKindName::Hard => ReservationKind::Hard,
            ReservationKindName::Firm => ReservationKind::Firm,
        }
    }
}

/// A region's `kind`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(super) enum RegionKindName {
    Shm,
    File,
}

impl Choice for RegionKindName {
    const NOUN: &'static str = "kind";
    const NAMES: &'static [&'static str] = &["shm", "file"];
}

impl From<RegionKindName> for RegionKind {
    fn from(kind: RegionKindName) -> Self {
        match kind {
            RegionKindName::Shm => RegionKind::SharedAnon,
            // Files live on the swap device: the model has one device.
            RegionKindName::File => RegionKind::SharedFile { device: DeviceId::SWAP },
        }
    }
}

/// A region's `policy`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(super) enum PolicyName {
    Global,
    Private,
    FirstTouch,
    Spc,
    Spel,
    Auto,
}

impl Choice for PolicyName {
    const NOUN: &'static str = "policy";
    const NAMES: &'static [&'static str] = &["global", "private", "first-touch", "spc", "spel", "auto"];
}

impl From<PolicyName> for SharePolicy {
    fn from(policy: PolicyName) -> Self {
        match policy {
            PolicyName::Global => SharePolicy::Global,
            PolicyName::Private => SharePolicy::Private,
            PolicyName::FirstTouch => SharePolicy::FirstTouch,
            PolicyName::Spc => SharePolicy::Spc,
            PolicyName::Spel => SharePolicy::Spel,
            PolicyName::Auto => SharePolicy::Auto,
        }
    }
}

/// `[memory] layout`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(super) enum LayoutName {
    Flat,
    Mc2,
}

impl Choice for LayoutName {
    const NOUN: &'static str = "layout";
    const NAMES: &'static [&'static str] = &["flat", "mc2"];
}

impl From<LayoutName> for MemoryLayout {
    fn from(layout: LayoutName) -> Self {
        match layout {
            LayoutName::Flat => MemoryLayout::Flat,
            LayoutName::Mc2 => MemoryLayout::Mc2,
        }
    }
}

/// `[memory] swap`: a preset, or a device described by its own figures.
#[derive(Debug)]
pub(super) enum RawSwap {
    Preset(SwapPreset),
    Custom(RawDevice),
}

/// A swap device of a scenario's own: per-request latencies and bandwidths (decimal MB/s, as
/// vendors quote them), e.g. those `critmem profile` measured on a machine.
#[derive(Deserialize, JsonSchema, Debug)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "SwapDevice")]
pub(super) struct RawDevice {
    /// Shown in results (default `custom`).
    pub(super) name: Option<String>,
    /// Latency of a read request, µs.
    pub(super) read_latency_us: f64,
    /// Latency of a write request, µs.
    pub(super) write_latency_us: f64,
    /// Read bandwidth, decimal MB/s.
    pub(super) read_mb_per_s: f64,
    /// Write bandwidth, decimal MB/s.
    pub(super) write_mb_per_s: f64,
}

fn some_swap<'de, D: Deserializer<'de>>(d: D) -> Result<Option<RawSwap>, D::Error> {
    struct SwapVisitor;
    impl<'de> serde::de::Visitor<'de> for SwapVisitor {
        type Value = Option<RawSwap>;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            write!(
                f,
                "a device name ({}) or a table of read_latency_us, write_latency_us, read_mb_per_s, write_mb_per_s",
                or_list(SwapPreset::NAMES)
            )
        }
        fn visit_unit<E: serde::de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_none<E: serde::de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_some<D2: Deserializer<'de>>(self, d: D2) -> Result<Self::Value, D2::Error> {
            d.deserialize_any(self)
        }
        fn visit_str<E: serde::de::Error>(self, name: &str) -> Result<Self::Value, E> {
            parse_choice(name).map(|p| Some(RawSwap::Preset(p)))
        }
        fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
            RawDevice::deserialize(serde::de::value::MapAccessDeserializer::new(map)).map(|d| Some(RawSwap::Custom(d)))
        }
    }
    d.deserialize_option(SwapVisitor)
}

fn swap_schema(generator: &mut SchemaGenerator) -> Schema {
    let mut names: Vec<serde_json::Value> = SwapPreset::NAMES.iter().map(|&n| n.into()).collect();
    names.push(serde_json::Value::Null);
    let device = generator.subschema_for::<RawDevice>();
    json_schema!({ "anyOf": [{ "type": ["string", "null"], "enum": names }, device] })
}

/// `[memory] swap`: one of the device presets.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(super) enum SwapPreset {
    Hdd,
    #[default]
    SlowSsd,
    FastSsd,
    Zram,
}

impl Choice for SwapPreset {
    const NOUN: &'static str = "device";
    const NAMES: &'static [&'static str] = &["hdd", "slow-ssd", "fast-ssd", "zram"];
}

impl SwapPreset {
    pub(super) fn name(self) -> &'static str {
        Self::NAMES[self as usize]
    }
    pub(super) fn device(self) -> DeviceSpec {
        match self {
            SwapPreset::Hdd => DeviceSpec::hdd(),
            SwapPreset::SlowSsd => DeviceSpec::slow_ssd(),
            SwapPreset::FastSsd => DeviceSpec::fast_ssd(),
            SwapPreset::Zram => DeviceSpec::zram(),
        }
    }
}

impl DistName {
    pub(super) fn name(self) -> &'static str {
        Self::NAMES[self as usize]
    }
}

impl PatternName {
    pub(super) fn name(self) -> &'static str {
        Self::NAMES[self as usize]
    }
}

// ---------------------------------------------------------------------------------------------
// Parsing.

/// The JSON Schema (draft 2020-12) of a scenario file, as pretty-printed JSON ending in a
/// newline: derived from the structures the loader deserialises, so the keys, their types and
/// each choice key's accepted names are the loader's own. Rules across keys (a period or a
/// minimum inter-arrival time, names that must exist) are the loader's alone.
pub fn json_schema() -> String {
    let mut schema = schemars::schema_for!(RawScenario);
    schema.insert("title".into(), "critmem scenario file".into());
    serde_json::to_string_pretty(&schema).expect("a schema is plain JSON") + "\n"
}

pub(super) fn parse_toml(text: &str, source_name: &str) -> Result<RawScenario, ScenarioError> {
    let de = toml::Deserializer::parse(text).map_err(|e| toml_error(text, source_name, &e))?;
    serde_path_to_error::deserialize(de).map_err(|e| {
        let key = e.path().to_string();
        let inner = e.into_inner();
        ScenarioError {
            source_name: source_name.to_string(),
            key: if key == "." { String::new() } else { key },
            reason: without_type_names(&one_line(inner.message())),
        }
    })
}

pub(super) fn parse_json(text: &str, source_name: &str) -> Result<RawScenario, ScenarioError> {
    let mut de = serde_json::Deserializer::from_str(text);
    let raw: RawScenario = serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let key = e.path().to_string();
        ScenarioError {
            source_name: source_name.to_string(),
            key: if key == "." { String::new() } else { key },
            reason: without_type_names(&one_line(&e.into_inner().to_string())),
        }
    })?;
    // Anything after the value is an error too (serde_path_to_error stops at the value).
    de.end().map_err(|e| ScenarioError { source_name: source_name.to_string(), key: String::new(), reason: one_line(&e.to_string()) })?;
    Ok(raw)
}

/// serde names the Rust type it expected (`expected struct RawTask`); a user wrote a table.
pub(crate) fn without_type_names(reason: &str) -> String {
    let mut out = String::with_capacity(reason.len());
    let mut rest = reason;
    while let Some(at) = rest.find("struct Raw") {
        out.push_str(&rest[..at]);
        let after = &rest[at + "struct Raw".len()..];
        rest = after.trim_start_matches(|c: char| c.is_ascii_alphanumeric());
        out.push_str("a table");
    }
    out.push_str(rest);
    out
}

fn toml_error(text: &str, source_name: &str, e: &toml::de::Error) -> ScenarioError {
    let key = match e.span() {
        Some(span) => {
            let before = &text[..span.start.min(text.len())];
            let line = before.matches('\n').count() + 1;
            let col = before.len() - before.rfind('\n').map(|i| i + 1).unwrap_or(0) + 1;
            format!("line {line}, column {col}")
        }
        None => String::new(),
    };
    ScenarioError { source_name: source_name.to_string(), key, reason: one_line(e.message()) }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `T::NAMES` are exactly the names serde accepts, in variant order, and an unknown name
    /// is refused with them listed.
    fn names_are_serdes<T: Choice + std::fmt::Debug>() {
        let serde_says = T::deserialize("?".into_deserializer()).map(drop).unwrap_err();
        let serde_says: serde::de::value::Error = serde_says;
        let text = serde_says.to_string();
        let listed: Vec<&str> = text[text.find("expected").unwrap()..].split('`').skip(1).step_by(2).collect();
        assert_eq!(listed, T::NAMES, "{}", T::NOUN);
        for name in T::NAMES {
            parse_choice::<T, serde::de::value::Error>(name).unwrap();
        }
        let e = parse_choice::<T, serde::de::value::Error>("nope").unwrap_err().to_string();
        assert_eq!(e, format!("unknown {} \"nope\"; expected {}", T::NOUN, or_list(T::NAMES)));
    }

    #[test]
    fn every_enumerated_key_lists_what_serde_accepts() {
        names_are_serdes::<SchedulerKind>();
        names_are_serdes::<PriorityOrder>();
        names_are_serdes::<Criticality>();
        names_are_serdes::<OverrunPolicy>();
        names_are_serdes::<StreamOrder>();
        names_are_serdes::<RoleName>();
        names_are_serdes::<ArrivalKind>();
        names_are_serdes::<DistName>();
        names_are_serdes::<PatternName>();
        names_are_serdes::<ReservationKindName>();
        names_are_serdes::<RegionKindName>();
        names_are_serdes::<PolicyName>();
        names_are_serdes::<SwapPreset>();
        names_are_serdes::<LayoutName>();
        names_are_serdes::<Protocol>();
        names_are_serdes::<ServerKind>();
        names_are_serdes::<ServerPolicy>();
        names_are_serdes::<StackWait>();
        names_are_serdes::<CbufStep>();
        assert_eq!(or_list(&["a"]), "a");
        assert_eq!(or_list(&["a", "b", "c"]), "a, b or c");
    }

    #[test]
    fn names_in_messages_are_the_files_and_the_presets_their_own() {
        for (i, name) in PatternName::NAMES.iter().enumerate() {
            assert_eq!(parse_choice::<PatternName, serde::de::value::Error>(name).unwrap().name(), *name, "{i}");
        }
        for name in DistName::NAMES {
            assert_eq!(parse_choice::<DistName, serde::de::value::Error>(name).unwrap().name(), *name);
        }
        for name in SwapPreset::NAMES {
            let preset = parse_choice::<SwapPreset, serde::de::value::Error>(name).unwrap();
            assert_eq!(preset.name(), *name);
            assert_eq!(Some(preset.device()), DeviceSpec::preset(name));
        }
        for name in LayoutName::NAMES {
            assert_eq!(MemoryLayout::from(parse_choice::<LayoutName, serde::de::value::Error>(name).unwrap()).name(), *name);
        }
        for (name, policy) in SharePolicy::ALL {
            assert_eq!(SharePolicy::from(parse_choice::<PolicyName, serde::de::value::Error>(name).unwrap()), policy);
        }
    }
}
