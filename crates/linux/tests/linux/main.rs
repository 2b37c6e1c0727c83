//! Real-machine tests: real cgroups, PSI, processes, sockets and swap.
//!
//! They need root and a cgroup layout critmem supports; otherwise each prints why it skipped
//! and passes. Everything they create is named `critmem-test-<pid>-<n>` and removed by a drop
//! guard, also when an assertion fails; they never touch cgroups, swap or processes they did
//! not create.

use critmem_linux::cgroup::{open_backend, Change, GroupPath, Knob, LimitBelowUsage, PsiResource};
use critmem_linux::clock::MonotonicClock;
use critmem_linux::journal::Journal;
use critmem_linux::layout::Layout;
use critmem_linux::procfs::{Hierarchy, ProcFs};
use critmem_linux::protocol::{JobOp, JobServer, JobServerConfig, ReportingGroup};
use critmem_linux::psi::{has_cap_sys_resource, read_pressure, PsiTrigger, StallKind, TriggerEvent, UNPRIVILEGED_WINDOW_STEP_US};
use critmem_linux::swap::{read_swap_header, SwapManager, SWAP_LABEL};
use critmem_linux::writer::{KnobWriter, Submitted};
use critmem_linux::{Error, FileWrite, PROC_ROOT};
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

#[path = "../support/mod.rs"]
mod support;
use support::*;

mod cgroups;
mod control;
mod hires;
mod jobs;
mod oom;
mod psi;
mod restore;
mod service;
mod swap;

/// Tests whose outcome depends on whether swap exists (limit lowering, the swapfile itself)
/// must not overlap.
static SWAP_SENSITIVE: Mutex<()> = Mutex::new(());

/// A job server on `socket` for `groups` (name, cgroup path), as the agent binds it.
fn bind_job_server(machine: &Machine, socket: &std::path::Path, groups: Vec<ReportingGroup>) -> JobServer {
    JobServer::bind(JobServerConfig {
        socket_path: socket.to_path_buf(),
        socket_gid: None,
        groups,
        hierarchy: Hierarchy::for_layout(&machine.layout),
        proc: ProcFs::new(PROC_ROOT.into()),
        max_connections: 8,
        poll_budget: critmem_linux::protocol::PollBudget::UNTIMED,
    })
    .unwrap()
}

// ---------------------------------------------------------------------------------------------
// The Linux platform, the shipped workers and the agent, end to end.

use critmem_linux::agent::AgentConfig;
use critmem_linux::platform::{ControlLoop, GroupSpec, LinuxPlatform, PlatformOptions};
use critmem_policy::{make_controller, GroupRole};

/// Declare it before the workers in it, so they are killed first.
struct PlatformGuard(Option<LinuxPlatform>);

impl PlatformGuard {
    fn get(&mut self) -> &mut LinuxPlatform {
        self.0.as_mut().unwrap()
    }

    fn restore(mut self) -> critmem_linux::RestoreReport {
        self.0.take().unwrap().restore(Duration::from_secs(30)).unwrap()
    }
}

impl Drop for PlatformGuard {
    fn drop(&mut self) {
        if let Some(platform) = self.0.take() {
            if let Err(e) = platform.restore(Duration::from_secs(30)) {
                let _ = writeln!(std::io::stderr(), "LEAK: platform not restored: {e}");
            }
        }
    }
}

/// A platform over `specs` (created groups), its journal in `dir`, with a job server for them
/// on `socket`, dividing `total_memory_bytes`.
fn platform_with_job_socket(machine: &Machine, dir: &Path, socket: &Path, specs: Vec<GroupSpec>, total_memory_bytes: u64) -> PlatformGuard {
    let server = bind_job_server(
        machine,
        socket,
        specs.iter().map(|s| ReportingGroup { name: s.name.clone(), cgroup: s.path.to_string() }).collect(),
    );
    let options = PlatformOptions {
        total_memory_bytes,
        dry_run: false,
        journal_path: Some(dir.join("journal.jsonl")),
        job_server: Some(server),
        proc_root: PROC_ROOT.into(),
        clock: MonotonicClock::shared(),
        cpus: critmem_linux::platform::online_cpus(),
        swap_device: None,
    };
    PlatformGuard(Some(LinuxPlatform::open(open_backend(&machine.layout).unwrap(), specs, options).unwrap()))
}

fn srt_role() -> GroupRole {
    GroupRole::SoftRealTime { deadline_ns: 20_000_000, bcet_ns: 3_000_000 }
}
