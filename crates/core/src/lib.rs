//! critmem core: the deterministic domain model and simulation engine.
//!
//! No I/O, no clocks, no Python: everything here is a pure function of a scenario and a seed.

pub mod control;
pub mod engine;
pub mod event;
pub mod hires;
pub mod mem;
pub mod memsim;
pub mod opcost;
pub mod program;
pub mod resources;
pub mod result;
pub mod rng;
pub mod scenario;
pub mod sched;
pub mod sim;
pub mod task;
pub mod time;
pub mod workload;

pub use engine::{Context, JobInfo, SimOptions, Simulation, Subsystem, SubsystemId, MAX_TRACE_RECORDS};
pub use result::{ExecSegment, JobFigures, JobRecord, Outcome, SimResult, TaskStats, TaskSummary};
pub use scenario::{load_json_str, load_str, load_toml_str, Format, Overrides, Scenario, ScenarioError, SchedulerKind, TaskCommand};
pub use sim::{simulate, simulate_with_controller, simulate_with_memory_scheduler, simulate_with_progress};
pub use task::{Criticality, TaskSpec};
pub use time::Nanos;
