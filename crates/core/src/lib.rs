//! critmem core: the deterministic domain model and simulation engine.
//!
//! No I/O, no clocks, no Python: everything here is a pure function of a scenario and a seed.
//!
//! Layers, each naming only those before it (`docs/architecture.md` draws them):
//! - foundation: [`time`], [`rng`], [`event`], the page-level memory machine [`mem`], HiRes's
//!   reservation tree [`hires`], [`opcost`];
//! - model: [`model`] (what a scenario declares) and [`scenario`] (files to the model);
//! - results: [`result`] (per-task figures, traces, and sections that subsystems own);
//! - runtime: the step vocabulary [`program`], schedulers [`sched`], the [`engine`], and its
//!   subsystems ([`memsim`], [`control`], [`resources`], [`io`]);
//! - assembly: [`sim`].

pub mod control;
pub mod engine;
pub mod event;
pub mod hires;
pub mod io;
pub mod mem;
pub mod memsim;
pub mod model;
pub mod opcost;
pub mod program;
pub mod resources;
pub mod result;
pub mod rng;
pub mod scenario;
pub mod sched;
pub mod sim;
pub mod time;

pub use engine::{Context, JobInfo, SimOptions, Simulation, Subsystem, SubsystemId, MAX_TRACE_RECORDS};
pub use model::task::{Criticality, TaskSpec};
pub use result::{ExecSegment, JobFigures, JobRecord, Outcome, SimResult, TaskStats, TaskSummary};
pub use scenario::{load_json_str, load_str, load_toml_str, Format, Overrides, Scenario, ScenarioError, SchedulerKind, TaskCommand};
pub use sim::{simulate, simulate_with_controller, simulate_with_memory_scheduler, simulate_with_progress};
pub use time::Nanos;
