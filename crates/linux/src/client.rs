//! The job-protocol client for Rust workloads (the Python one is `critmem.jobclient`, the C
//! one `include/critmem_job.h`; all three speak protocol version 1, see [`crate::protocol`]).
//!
//! ```no_run
//! use critmem_linux::client::{monotonic_ns, JobClient, JobOp};
//! let mut client = JobClient::new("/run/critmem/jobs.sock".into());
//! let release_ns = monotonic_ns();
//! client.send(JobOp::Release { deadline_ns: release_ns + 20_000_000 }, 0, release_ns);
//! // ... work, checking now and then:
//! if client.drop_requests().contains(&0) {
//!     client.send(JobOp::Drop, 0, monotonic_ns());
//! } else {
//!     client.send(JobOp::Complete, 0, monotonic_ns());
//! }
//! ```
//!
//! The client never blocks and never fails: a message that cannot be sent (no agent, agent
//! restarting) is counted in `unsent`, and the next send reconnects (at most every 200 ms).

pub use crate::clock::monotonic_ns;
pub use crate::protocol::JobOp;
pub use crate::workload::JobClient;
