//! MC²'s criticality-aware physical memory (Kim et al., "Supporting I/O and IPC via
//! Fine-Grained OS Isolation for Mixed-Criticality Real-Time Tasks", Secs. 2 and 4): the
//! platform's bank and colour layout, a buddy allocator with one free list per core for
//! levels A/B plus one for level C and the OS, and per-core small-object caches carved from
//! level-A/B pages.

pub mod buddy;
pub mod platform;
pub mod slab;

pub use buddy::Mc2Buddy;
pub use platform::{range_mask, IndexMask, Mc2Platform, Partition};
pub use slab::{Mc2SlabCache, SlabObject};
