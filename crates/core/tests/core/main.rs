//! Integration tests of critmem-core, one module per behaviour.

mod common;
mod conformance;
mod control;
mod distributions;
mod engine;
mod mem;
mod memsim;
mod properties;
mod subsystems;
