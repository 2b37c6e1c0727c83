//! critmem on real Linux: the pieces the Linux platform and agent are built from.
//!
//! - [`layout`]: which cgroup layout the machine has (pure v2, or v1 memory + v2 PSI), from
//!   the text of `/proc/self/mounts` and `/proc/cgroups`.
//! - [`cgroup`]: the [`cgroup::CgroupBackend`] trait and its two implementations; roots are
//!   injectable so tests run on fake trees.
//! - [`psi`]: pressure files, deltas of `total`, triggers to wake early.
//! - [`writer`]: cgroup writes that may block in reclaim, off the control thread.
//! - [`journal`]: original values on disk before every change; restore on exit or after a
//!   crash.
//! - [`swap`]: critmem's own swapfile, and nothing else's.
//! - [`procfs`]: which cgroup a process is in.
//! - [`protocol`]: the job socket soft real-time processes report to.
//!
//! Every fallible function returns [`Error`], whose messages say what to do.

pub mod cgroup;
pub mod error;
pub mod journal;
pub mod layout;
pub mod procfs;
pub mod protocol;
pub mod psi;
pub mod swap;
pub mod writer;

pub use cgroup::{knob_change, open_backend, CgroupBackend, Change, FileWrite, GroupPath, HybridBackend, Knob, MemoryStat, PsiResource, V2Backend};
pub use error::{Error, Result};
pub use journal::{Journal, RestoreReport};
pub use layout::{detect_layout, detect_layout_in, Layout};
pub use writer::KnobWriter;
