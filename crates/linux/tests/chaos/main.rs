//! The chaos suite: the agent (SARA) over a soft real-time worker and a throughput worker on
//! critmem's swapfile, one fault injected per case, and the same invariants checked after
//! every case: no checksum failure in the workers, no OOM kill, every watched cgroup file as
//! it was before, no journal, socket or swapfile left.
//!
//! Real machine only: each case needs root and a supported cgroup layout, and otherwise says
//! why it skipped. Cases run one at a time (they measure timing). Each writes its figures to
//! `target/tmp/chaos/<case>.json`; `scripts/reliability_report.py` turns them into the tables
//! of `docs/reliability.md`. `CRITMEM_CHAOS_LONG=1` runs every case longer (and the kill -9
//! sweep at more instants); `CRITMEM_SOAK_S` sets the soak test's length.

use critmem_linux::cgroup::Knob;
use critmem_linux::swap::SwapManager;
use critmem_linux::PROC_ROOT;
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

#[path = "../support/mod.rs"]
mod support;
use support::*;

mod clients;
mod faults;
mod flood;
mod kill9;
mod rig;
mod soak;
mod stalls;

use rig::{agent_interval_ns, Record, Rig};

/// Cases measure timing and share the swap: one at a time.
static CHAOS: Mutex<()> = Mutex::new(());

/// `CRITMEM_CHAOS_LONG` is set: the longer mode.
fn long() -> bool {
    std::env::var_os("CRITMEM_CHAOS_LONG").is_some_and(|v| !v.is_empty() && v != "0")
}

/// How long a case's steady state lasts: a few seconds in CI, half a minute in the long mode.
fn steady() -> Duration {
    if long() {
        Duration::from_secs(30)
    } else {
        Duration::from_secs(4)
    }
}

/// The suite's lock and the machine, or `None` after saying why the case cannot run here.
fn chaos_machine(case: &str) -> Option<(MutexGuard<'static, ()>, Machine)> {
    let lock = CHAOS.lock().unwrap_or_else(|p| p.into_inner());
    let machine = machine(case)?;
    // swapon refuses files on some filesystems (tmpfs, overlay): nothing to test then.
    let probe = tempfile::tempdir_in(std::env::temp_dir()).unwrap();
    let manager = SwapManager::new(probe.path().join("state.json"), PathBuf::from(PROC_ROOT));
    match manager.setup(&probe.path().join("probe.swap"), 16 * MIB) {
        Ok(_) => {
            manager.teardown().unwrap();
        }
        Err(e) => {
            skip(case, &format!("no swapfile possible in {}: {e}", std::env::temp_dir().display()));
            return None;
        }
    }
    Some((lock, machine))
}

/// Sleeps `duration` while checking that the agent is still running.
fn run_for(rig: &mut Rig, duration: Duration) {
    let until = Instant::now() + duration;
    while Instant::now() < until {
        if let Some(agent) = rig.agent.as_mut() {
            if let Ok(Some(status)) = agent.child.try_wait() {
                panic!("the agent exited mid-case ({status}): {}", std::fs::read_to_string(&agent.stderr).unwrap_or_default());
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The agent's real-time priority in every case (its systemd unit's).
const AGENT_REALTIME_PRIORITY: u8 = 10;

/// A thread at the agent's real-time priority that sleeps one interval at a time and records
/// how late it wakes: the wake-up latency the machine gives any real-time thread under the
/// same load, which bounds from below how punctual any agent can tick. On a kernel without
/// full preemption, long kernel sections (reclaim, socket teardown) delay even SCHED_FIFO.
struct WakeProbe {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: std::thread::JoinHandle<Vec<u64>>,
}

impl WakeProbe {
    fn start(interval: Duration) -> Self {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let halt = stop.clone();
        let thread = std::thread::spawn(move || {
            critmem_linux::clock::run_current_thread_fifo(AGENT_REALTIME_PRIORITY).expect("a root test can run a thread under SCHED_FIFO");
            let mut late_ns = Vec::new();
            while !halt.load(Ordering::Relaxed) {
                let before = Instant::now();
                std::thread::sleep(interval);
                late_ns.push(before.elapsed().saturating_sub(interval).as_nanos() as u64);
            }
            late_ns
        });
        WakeProbe { stop, thread }
    }

    /// The 99th percentile of the wake-ups' lateness, in ns.
    fn stop_p99_ns(self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        let mut late_ns = self.thread.join().unwrap();
        late_ns.sort_unstable();
        late_ns.get(late_ns.len() * 99 / 100).copied().unwrap_or(0)
    }
}

/// A case that needs no more than start, fault, steady state, finish.
fn simple_case(case: &'static str, inject: impl FnOnce(&mut Rig, &mut Record)) {
    let Some((_lock, machine)) = chaos_machine(case) else { return };
    let mut record = Record::new(case);
    let mut rig = Rig::running(&machine);
    inject(&mut rig, &mut record);
    run_for(&mut rig, Duration::from_secs(1));
    rig.finish(&mut record);
    let faults = record.values.get("faults_injected").and_then(|v| v.as_u64()).unwrap_or(1);
    record.write(faults);
}
