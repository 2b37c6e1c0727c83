//! The model: what a scenario declares, typed and validated, and nothing of how it is
//! simulated. Tasks with their timing, criticality and memory; the programs their jobs run
//! (locks, calls, transient memory, suspensions, memory accesses); shared resources and
//! components; the scheduler and its servers; the I/O device; TMEM's pool. The scenario
//! loader builds these from a file; the runtime (engine, schedulers,
//! subsystems) reads them. Nothing here names the runtime.

pub mod external;
pub mod io;
pub mod memory;
pub mod program;
pub mod scheduler;
pub mod task;
pub mod tmem;
