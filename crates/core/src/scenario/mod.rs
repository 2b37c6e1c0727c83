//! Scenario files: TOML (or the same structure as JSON) → validated [`Scenario`].
//!
//! Times in files are decimal milliseconds (`period_ms = 2.5`); inside the engine they are
//! integer nanoseconds. Every problem is reported as one line naming the file, the key and
//! the reason, e.g. `rm.toml: task[2].period_ms: must be greater than 0`.
//!
//! The file is read by serde into [`raw`] structures, then each section is checked in its
//! module; memory admission (what building the memory model would refuse) is decided by
//! [`admission`] from the declarations, without building it.

pub mod admission;
mod components;
mod control;
mod error;
mod groups;
mod hires_tree;
mod io;
mod machine;
mod memory;
pub(crate) mod raw;
mod resources;
mod run;
mod server_policies;
mod server_reservations;
mod tasks;
#[cfg(test)]
mod tests;
mod tmem;
mod warnings;

pub use crate::model::scheduler::{CyclicSlot, CyclicTable, PriorityOrder, SchedulerKind, SchedulerSpec};
pub use crate::model::task::TaskCommand;
pub use error::ScenarioError;
pub use hires_tree::{load_tree_str, TreeError, TreeFile};
pub use raw::json_schema;
pub use server_reservations::ServerReservation;

use crate::model::memory::{ControlSpec, MemorySpec};
use crate::model::program::{ComponentSpec, ResourceSpec};
use crate::model::scheduler::Hierarchy;
use crate::model::task::{Arrival, TaskSpec};
use crate::time::{lcm_all, Nanos};
use error::Ctx;
use raw::RawScenario;

/// A validated scenario, ready to simulate or analyse.
#[derive(Clone, Debug, PartialEq)]
pub struct Scenario {
    pub source_name: String,
    pub cpus: usize,
    pub scheduler: SchedulerSpec,
    /// Each task with its timing, and its memory and command where the file gives them.
    pub tasks: Vec<TaskSpec>,
    pub horizon: Nanos,
    pub seed: u64,
    /// Page-level memory, when the scenario declares `[memory]` (then every task has its
    /// memory declaration).
    pub memory: Option<MemorySpec>,
    /// The controller tick loop over the memory's `groups`, when the scenario has `[control]`.
    pub control: Option<ControlSpec>,
    /// Shared resources the tasks' programs lock, in file order (`[[resource]]`).
    pub resources: Vec<ResourceSpec>,
    /// The servers under the root, when the scenario declares `[[scheduler.server]]`.
    pub hierarchy: Option<Hierarchy>,
    /// Components the programs call, in file order (`[[component]]`).
    pub components: Vec<ComponentSpec>,
    /// TMEM's memory scheduler over the components' stacks and cbufs (`[tmem]`).
    pub tmem: Option<crate::model::tmem::TmemSpec>,
    /// What each server reserves beyond its budget, in file order (empty without servers).
    pub reservations: Vec<ServerReservation>,
    /// The I/O device, its packet streams, port bindings and transmissions (`[io]`).
    pub io: Option<crate::model::io::IoSpec>,
    /// What the file allows but rarely means, one line each naming the key (shown on stderr).
    pub warnings: Vec<String>,
}

impl Scenario {
    pub fn task_index(&self, name: &str) -> Option<usize> {
        self.tasks.iter().position(|t| t.name == name)
    }
    /// Least common multiple of the periods, if it fits in 64-bit nanoseconds.
    pub fn hyperperiod(&self) -> Option<Nanos> {
        lcm_all(self.tasks.iter().map(|t| t.period.0)).map(Nanos)
    }
    pub fn total_utilization(&self) -> f64 {
        self.tasks.iter().map(TaskSpec::utilization).sum()
    }
    /// Whether any job's demand or arrival is random (so the seed matters).
    pub fn is_random(&self) -> bool {
        self.tasks.iter().any(|t| t.exec.is_random() || matches!(t.arrival, Arrival::Sporadic { .. }))
            || self.io.as_ref().is_some_and(crate::model::io::IoSpec::is_random)
    }
}

/// The text format of a scenario.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Toml,
    Json,
}

/// Values given outside the file (e.g. on the command line) that replace the file's own,
/// applied before defaults and validation so they can make a file valid.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Overrides {
    pub horizon_ms: Option<f64>,
    pub seed: Option<u64>,
}

/// Loads a scenario in either format with overrides.
pub fn load_str(text: &str, source_name: &str, format: Format, overrides: &Overrides) -> Result<Scenario, ScenarioError> {
    let raw = match format {
        Format::Toml => raw::parse_toml(text, source_name)?,
        Format::Json => raw::parse_json(text, source_name)?,
    };
    validate(raw, source_name, overrides)
}

/// Loads a scenario from TOML text. `source_name` is used in error messages.
pub fn load_toml_str(text: &str, source_name: &str) -> Result<Scenario, ScenarioError> {
    load_str(text, source_name, Format::Toml, &Overrides::default())
}

/// Loads a scenario from JSON text with the same structure as the TOML file.
pub fn load_json_str(text: &str, source_name: &str) -> Result<Scenario, ScenarioError> {
    load_str(text, source_name, Format::Json, &Overrides::default())
}

/// Checks the sections in file order of dependence; the first problem found is the error.
fn validate(raw: RawScenario, source_name: &str, overrides: &Overrides) -> Result<Scenario, ScenarioError> {
    let cx = Ctx { source_name };
    let cpus = machine::validate_cpus(&cx, &raw)?;
    let (raw_scheduler, kind) = machine::validate_kind(&cx, &raw, cpus)?;
    let resources = resources::validate_resources(&cx, &raw.resource)?;
    let tmem_wait = raw.tmem.as_ref().and_then(|t| t.wait);
    let components = components::validate_components(&cx, &raw, &resources, tmem_wait)?;
    let mut tasks = tasks::validate_tasks(
        &cx,
        &raw.task,
        tasks::Machine { cpus, kind, servers: !raw_scheduler.server.is_empty() },
        &resources,
        &components,
    )?;
    resources::check_lock_order(&cx, &tasks, &resources, &components.specs)?;
    let scheduler = machine::validate_scheduler(&cx, raw_scheduler, &raw.task, &tasks, cpus)?;
    let hierarchy = machine::validate_hierarchy(&cx, raw_scheduler, &raw.task, &tasks, cpus)?;
    let seed = run::seed(&raw, overrides);
    let horizon = run::horizon(&cx, &raw, overrides, &tasks)?;
    let horizon_defaulted = overrides.horizon_ms.is_none() && raw.run.as_ref().and_then(|r| r.horizon_ms).is_none();

    let mut memory = memory::validate_memory(&cx, &raw, horizon)?;
    for (i, (task, rt)) in tasks.iter_mut().zip(&raw.task).enumerate() {
        task.memory = memory::validate_task_memory(&cx, i, rt, memory.as_ref())?;
        if task.program.is_some() && task.memory.as_ref().is_some_and(|m| !m.streams.is_empty()) {
            return Err(cx.err(
                format!("task[{i}].access"),
                "a task with a program gives its accesses as program steps ({ access = [...], compute_ms = ... })",
            ));
        }
    }
    if let Some(m) = memory.as_mut() {
        m.components = memory::validate_component_memory(&cx, &raw.component, Some(m))?;
    } else {
        memory::validate_component_memory(&cx, &raw.component, None)?;
    }
    if let Some(m) = memory.as_ref() {
        memory::check_mapped_pages(&cx, m, tasks.iter().filter_map(|t| t.memory.as_ref()))?;
    }
    if let Some(m) = memory.as_mut() {
        memory::check_layout(&cx, &raw, m, &tasks, cpus)?;
        m.groups = groups::validate_groups(&cx, &raw, m, &tasks)?;
    } else if !raw.group.is_empty() {
        return Err(cx.err("group", "memory-limited groups need a [memory] section"));
    }
    resources::check_srp(&cx, &tasks, &resources, &components.specs, memory.as_ref())?;
    let control = control::validate_control(&cx, &raw, memory.as_ref(), horizon)?;
    let tmem = tmem::validate_tmem(&cx, &raw, horizon)?;
    for (i, (task, rt)) in tasks.iter_mut().zip(&raw.task).enumerate() {
        task.command = tasks::validate_command(&cx, i, rt)?;
    }
    let memory_bytes = memory.as_ref().map(|m| m.page_bytes * u64::from(m.total_frames));
    let io_bandwidth = io::bandwidth(&cx, &raw)?;
    let reservations = match scheduler.mc2_levels() {
        Some(levels) => server_reservations::validate_mc2_reservations(&cx, raw_scheduler, levels, memory_bytes, io_bandwidth)?,
        None => server_reservations::validate_reservations(&cx, raw_scheduler, hierarchy.as_ref(), memory_bytes, io_bandwidth)?,
    };
    if let Some(m) = memory.as_mut() {
        m.server_bounds = match scheduler.mc2_levels() {
            Some(levels) => server_reservations::mc2_memory_bounds(levels, &reservations, m.page_bytes).map_err(|(k, e)| cx.err(k, e))?,
            None => server_reservations::memory_bounds(&cx, hierarchy.as_ref(), &reservations, m.page_bytes)?,
        };
    }
    // Admission failures are load errors, so a run never fails half-way.
    if let Some(m) = &memory {
        admission::check(m, &tasks).map_err(|e| cx.err(e.key, e.message))?;
    }
    let io_servers = match (&hierarchy, scheduler.mc2_levels()) {
        (Some(h), _) => Some(io::IoServers::of_hierarchy(h)),
        (None, Some(levels)) if !levels.servers.is_empty() => Some(io::IoServers::of_mc2(levels)),
        _ => None,
    };
    let io = io::validate_io(&cx, &raw, &tasks, io_servers.as_ref(), &reservations, io_bandwidth)?;
    let components = components.specs;
    let task_server = hierarchy.as_ref().map(|h| h.task_server.as_slice());
    let warnings = warnings::collect(source_name, &scheduler, &tasks, task_server, horizon, horizon_defaulted);
    Ok(Scenario {
        source_name: source_name.to_string(),
        cpus,
        scheduler,
        tasks,
        horizon,
        seed,
        memory,
        control,
        resources,
        hierarchy,
        components,
        tmem,
        reservations,
        io,
        warnings,
    })
}
