//! Shared resources: mutexes and k-unit resources that jobs lock and unlock inside their
//! programs, under no protocol, priority inheritance through dependency links, or Baker's
//! stack resource policy; and components that programs call synchronously, each invocation
//! holding one of the component's execution stacks (TMEM's component-local transient memory).
//!
//! The declarations (`ResourceSpec`, `ComponentSpec`, `Action`, `TaskProgram`) belong to the
//! model ([`crate::model::program`]); the simulation of them is [`ResourceSubsystem`], a subsystem that takes over
//! the jobs of tasks with a program. One interpreter runs task and component programs alike,
//! because a job's locks, its calls and the waits of both form one nesting: a caller may hold a
//! lock across a call, and a component's locks wait under the same protocols as a task's.

mod components;
mod stacks;
mod subsystem;
mod tmem;
mod waits;

pub use stacks::{ComponentStats, JobCalls};
pub use subsystem::{ResourceResult, ResourceStats, ResourceSubsystem};
pub use tmem::TmemResult;
pub use waits::WaitRecord;
