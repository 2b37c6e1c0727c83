//! Integration tests of critmem-core, one module per behaviour.

mod alloc;
mod common;
mod components;
mod conformance;
mod control;
mod distributions;
mod engine;
mod loading;
mod mem;
mod memsim;
mod properties;
mod resources;
mod servers;
mod subsystems;

#[global_allocator]
static ALLOCATOR: alloc::CountingAllocator = alloc::CountingAllocator;
