//! Integration tests of critmem-core, one module per behaviour.

mod alloc;
mod bandwidth;
mod common;
mod components;
mod composition;
mod conformance;
mod control;
mod distributions;
mod engine;
mod golden;
mod groups_with_reservations;
mod io;
mod loading;
mod mc2;
mod mc2_alloc;
mod mc2_layout;
mod mem;
mod memsim;
mod node_policies;
mod programs;
mod properties;
mod reservations;
mod resources;
mod server_events;
mod server_memory;
mod servers;
mod srp;
mod subsystems;
mod tmem;
mod waits;

#[global_allocator]
static ALLOCATOR: alloc::CountingAllocator = alloc::CountingAllocator;
