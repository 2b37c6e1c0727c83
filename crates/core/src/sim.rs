//! A simulation assembled from a scenario: the engine, with the subsystems the scenario asks
//! for plugged in (the page-level memory model for `[memory]`, the controller loop for
//! `[control]`, shared resources for tasks with a `program`, the I/O device for `[io]`).

use crate::control::Control;
use crate::engine::{SimOptions, Simulation, Subsystem};
use crate::io::IoSubsystem;
use crate::memsim::MemorySubsystem;
use crate::resources::ResourceSubsystem;
use crate::result::SimResult;
use crate::scenario::Scenario;
use crate::time::Nanos;

/// Runs `scenario` to its horizon with its own seed.
pub fn simulate(scenario: &Scenario, opts: SimOptions) -> SimResult {
    simulate_with_progress(scenario, opts, crate::MAX_TRACE_RECORDS, |_| true).expect("a run nobody stops reaches its horizon")
}

/// [`simulate`] keeping at most `limit` entries of each trace (see
/// [`Simulation::with_trace_limit`]) and reporting the simulated time to `progress` as it goes
/// (see [`Simulation::run_with_progress`]); `None` if `progress` stopped the run.
pub fn simulate_with_progress(
    scenario: &Scenario,
    opts: SimOptions,
    limit: usize,
    progress: impl FnMut(Nanos) -> bool,
) -> Option<SimResult> {
    let subsystems = subsystems(scenario, opts, None, None);
    Simulation::new(scenario, scenario.seed, opts, subsystems).with_trace_limit(limit).run_with_progress(progress)
}

/// Runs `scenario` with `controller` in place of the one its `[control]` table names (same
/// interval and groups): for controllers built in code, such as test probes. `None` if the
/// scenario has no `[control]` table.
pub fn simulate_with_controller(
    scenario: &Scenario,
    opts: SimOptions,
    controller: Box<dyn critmem_policy::Controller + Send>,
    name: &str,
) -> Option<SimResult> {
    scenario.control.as_ref()?;
    let subsystems = subsystems(scenario, opts, Some((controller, name.to_string())), None);
    Some(Simulation::new(scenario, scenario.seed, opts, subsystems).run())
}

/// Runs `scenario` with `policy` in place of the memory scheduler its `[tmem]` table names
/// (same pool, wait and period). `None` if the scenario has no `[tmem]` table.
pub fn simulate_with_memory_scheduler(
    scenario: &Scenario,
    opts: SimOptions,
    policy: Box<dyn critmem_policy::tmem::MemoryScheduler>,
) -> Option<SimResult> {
    scenario.tmem.as_ref()?;
    let subsystems = subsystems(scenario, opts, None, Some(policy));
    Some(Simulation::new(scenario, scenario.seed, opts, subsystems).run())
}

/// The scenario's subsystems in hook order: memory first, so a job's references are set up
/// before anything else hears of its release, then the control loop, then shared resources
/// (tasks with a program have no memory streams, so the two never claim the same job), then
/// the I/O device, which claims none.
fn subsystems(
    scenario: &Scenario,
    opts: SimOptions,
    controller: Option<(Box<dyn critmem_policy::Controller + Send>, String)>,
    memory_scheduler: Option<Box<dyn critmem_policy::tmem::MemoryScheduler>>,
) -> Vec<Box<dyn Subsystem>> {
    let mut out: Vec<Box<dyn Subsystem>> = Vec::new();
    if let Some(memory) = MemorySubsystem::new(scenario, scenario.seed, opts.checks_invariants()) {
        out.push(Box::new(memory));
        if let (Some(c), Some(m)) = (&scenario.control, &scenario.memory) {
            let control = match controller {
                Some((controller, name)) => Control::with_controller(controller, name, c, m, &scenario.tasks, scenario.cpus),
                None => Control::new(c, m, &scenario.tasks, scenario.cpus),
            };
            out.push(Box::new(control));
        }
    }
    if let Some(resources) = ResourceSubsystem::with_memory_scheduler(scenario, opts.checks_invariants(), memory_scheduler) {
        out.push(Box::new(if opts.record_jobs { resources.recording_calls() } else { resources }));
    }
    if let Some(io) = IoSubsystem::new(scenario) {
        out.push(Box::new(io));
    }
    out
}
