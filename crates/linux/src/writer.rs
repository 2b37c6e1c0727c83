//! Cgroup writes off the control thread.
//!
//! Lowering `memory.max`/`memory.limit_in_bytes` or writing `memory.high` makes the kernel
//! reclaim in the writer's context, which can take hundreds of milliseconds (or block until
//! reclaim gives up). The control loop must keep its 5 ms cadence, so it hands writes to a
//! [`KnobWriter`]: `submit` never blocks, a small pool of worker threads performs the writes,
//! and outcomes are collected with `completed` on the next tick.
//!
//! - **Coalescing per file**: a write to a file that already has one queued replaces the
//!   queued value (only the newest limit matters); the outcome counts the values superseded.
//! - **Per-file order**: a file is written by at most one worker at a time, so a newer value
//!   never overtakes an older one. A file stuck in reclaim holds one worker; other files go on
//!   with the rest of the pool.
//! - **Bounded**: at most `capacity` files may be queued; beyond that `submit` fails at once
//!   with [`Error::WriterQueueFull`] instead of growing or blocking.
//! - **Cancellable at shutdown**: a write still in the kernel when `shutdown` times out is
//!   interrupted with `SIGURG` sent to its thread (a no-op handler without `SA_RESTART`, so
//!   the write returns `EINTR`; the kernel's limit-lowering loops stop on a pending signal).
//!   Otherwise it could land after the caller restored the file's original value.

use crate::cgroup::FileWrite;
use crate::error::{Error, Result};
use nix::sys::pthread::{pthread_kill, pthread_self, Pthread};
use nix::sys::signal::{SigAction, SigHandler, SigSet, Signal};
use std::collections::{BTreeMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// What became of one submitted write.
#[derive(Debug)]
pub struct WriteOutcome {
    pub path: PathBuf,
    pub contents: String,
    /// Older values for the same file that this write replaced before it started.
    pub superseded: u32,
    /// Time from first submission to the start of the write.
    pub queued: Duration,
    /// Time the write itself took (reclaim happens here).
    pub took: Duration,
    /// CPU time the writing thread used in the write: mostly the kernel's reclaim, which a
    /// limit below the group's usage makes the writer do before the write returns.
    pub cpu: Duration,
    pub result: Result<()>,
}

/// How `submit` handled a write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Submitted {
    /// Queued behind nothing else for this file.
    Queued,
    /// Replaced the value already queued for this file.
    Coalesced,
}

struct Pending {
    write: FileWrite,
    superseded: u32,
    submitted_at: Instant,
}

#[derive(Default)]
struct State {
    /// Queued files in submission order (each at most once).
    order: VecDeque<PathBuf>,
    pending: BTreeMap<PathBuf, Pending>,
    /// Files being written, and the thread writing each (to interrupt it at shutdown).
    in_flight: BTreeMap<PathBuf, Pthread>,
    shutdown: bool,
}

struct Shared {
    state: Mutex<State>,
    changed: Condvar,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A worker never panics while holding the lock; if one did, the state is still
        // consistent (every mutation is a single step), so keep going.
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// Performs cgroup writes on worker threads; see the module documentation.
pub struct KnobWriter {
    shared: Arc<Shared>,
    outcomes: Receiver<WriteOutcome>,
    workers: Vec<JoinHandle<()>>,
    capacity: usize,
}

/// Default pool size: enough that one group stuck in reclaim does not delay the others of a
/// typical run (a handful of groups).
pub const DEFAULT_WORKERS: usize = 4;
/// Default queue bound (distinct files waiting).
pub const DEFAULT_CAPACITY: usize = 64;
/// How long `shutdown` keeps interrupting writes that outlived its timeout.
const INTERRUPT_FOR: Duration = Duration::from_secs(2);
/// Sent to a writer thread to cancel its write: ignored by default, so a stray one is harmless.
const CANCEL_SIGNAL: Signal = Signal::SIGURG;

extern "C" fn on_cancel_signal(_: nix::libc::c_int) {}

/// Installs the no-op `CANCEL_SIGNAL` handler once; returns whether writes can be cancelled.
/// A handler someone else installed is left alone (and nothing is cancelled).
// The one unsafe code of the workspace: sigaction is unsafe in any binding, and the libraries
// that wrap it safely install with SA_RESTART, which would resume the write being cancelled.
#[allow(unsafe_code)]
fn cancellation_ready() -> bool {
    static READY: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *READY.get_or_init(|| {
        // No SA_RESTART: the interrupted write must return EINTR, not resume.
        let action = SigAction::new(SigHandler::Handler(on_cancel_signal), nix::sys::signal::SaFlags::empty(), SigSet::empty());
        // SAFETY: the handler does nothing, so it is async-signal-safe.
        match unsafe { nix::sys::signal::sigaction(CANCEL_SIGNAL, &action) } {
            Ok(previous) if matches!(previous.handler(), SigHandler::SigDfl) => true,
            Ok(previous) => {
                // SAFETY: reinstalls the disposition that was installed a moment ago.
                let _ = unsafe { nix::sys::signal::sigaction(CANCEL_SIGNAL, &previous) };
                tracing::warn!(signal = %CANCEL_SIGNAL, "the signal that cancels stuck cgroup writes has a handler already; writes stuck at shutdown will not be cancelled");
                false
            }
            Err(e) => {
                tracing::warn!(signal = %CANCEL_SIGNAL, error = %e, "cannot install the handler that cancels stuck cgroup writes");
                false
            }
        }
    })
}

impl KnobWriter {
    /// Starts `workers` threads (at least 1) with room for `capacity` queued files (at least 1).
    pub fn new(workers: usize, capacity: usize) -> Self {
        cancellation_ready();
        let shared = Arc::new(Shared { state: Mutex::new(State::default()), changed: Condvar::new() });
        let (tx, outcomes) = mpsc::channel();
        let workers = (0..workers.max(1))
            .map(|i| {
                let shared = Arc::clone(&shared);
                let tx = tx.clone();
                std::thread::Builder::new()
                    .name(format!("critmem-writer-{i}"))
                    .spawn(move || worker(&shared, &tx))
                    .expect("spawning a writer thread (out of threads?)")
            })
            .collect();
        KnobWriter { shared, outcomes, workers, capacity: capacity.max(1) }
    }

    /// Queues a write without blocking.
    pub fn submit(&self, write: FileWrite) -> Result<Submitted> {
        let mut state = self.shared.lock();
        if state.shutdown {
            return Err(Error::WriterStopped);
        }
        let submitted = if let Some(pending) = state.pending.get_mut(&write.path) {
            pending.write = write;
            pending.superseded += 1;
            Submitted::Coalesced
        } else {
            if state.pending.len() >= self.capacity {
                return Err(Error::WriterQueueFull { capacity: self.capacity });
            }
            state.order.push_back(write.path.clone());
            state.pending.insert(write.path.clone(), Pending { write, superseded: 0, submitted_at: Instant::now() });
            Submitted::Queued
        };
        drop(state);
        self.shared.changed.notify_all();
        Ok(submitted)
    }

    /// Outcomes of writes finished since the last call, in completion order. Never blocks.
    pub fn completed(&self) -> Vec<WriteOutcome> {
        self.outcomes.try_iter().collect()
    }

    /// Files queued or being written.
    pub fn outstanding(&self) -> usize {
        let state = self.shared.lock();
        state.pending.len() + state.in_flight.keys().filter(|p| !state.pending.contains_key(*p)).count()
    }

    /// Whether a worker is writing `path` right now.
    pub fn is_in_flight(&self, path: &Path) -> bool {
        self.shared.lock().in_flight.contains_key(path)
    }

    /// Whether a value for `path` is queued or being written.
    pub fn is_outstanding(&self, path: &Path) -> bool {
        let state = self.shared.lock();
        state.pending.contains_key(path) || state.in_flight.contains_key(path)
    }

    /// Blocks up to `timeout` until nothing is queued or in flight; returns whether it got
    /// there. For shutdown and tests, never for the control loop.
    pub fn wait_idle(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let mut state = self.shared.lock();
        loop {
            if state.pending.is_empty() && state.in_flight.is_empty() {
                return true;
            }
            let Some(left) = deadline.checked_duration_since(Instant::now()) else { return false };
            state = self.shared.changed.wait_timeout(state, left).unwrap_or_else(|p| p.into_inner()).0;
        }
    }

    /// Stops accepting writes, drops those not yet started, and waits up to `timeout` for the
    /// ones in flight; those still in the kernel then are interrupted (see the module
    /// documentation) for up to [`INTERRUPT_FOR`]. Returns the files whose write could not be
    /// stopped (their workers are left to finish on their own: the caller must not hang).
    pub fn shutdown(mut self, timeout: Duration) -> Vec<PathBuf> {
        let stuck = {
            let mut state = self.shared.lock();
            state.shutdown = true;
            state.order.clear();
            state.pending.clear();
            drop(state);
            self.shared.changed.notify_all();
            let mut state = self.wait_in_flight(self.shared.lock(), Instant::now() + timeout, false);
            if !state.in_flight.is_empty() && cancellation_ready() {
                tracing::warn!(files = ?state.in_flight.keys().collect::<Vec<_>>(), "cgroup writes still in the kernel at shutdown; interrupting them");
                state = self.wait_in_flight(state, Instant::now() + INTERRUPT_FOR, true);
            }
            state.in_flight.keys().cloned().collect::<Vec<_>>()
        };
        if stuck.is_empty() {
            for handle in self.workers.drain(..) {
                let _ = handle.join();
            }
        }
        stuck
    }

    /// Waits until nothing is in flight or `deadline`; with `interrupt`, signals every writing
    /// thread each few milliseconds meanwhile (a signal that arrives just before its thread
    /// enters the kernel would be missed, so once is not enough).
    fn wait_in_flight<'a>(&'a self, mut state: MutexGuard<'a, State>, deadline: Instant, interrupt: bool) -> MutexGuard<'a, State> {
        while !state.in_flight.is_empty() {
            let Some(left) = deadline.checked_duration_since(Instant::now()) else { break };
            if interrupt {
                // Under the lock a thread in `in_flight` cannot have exited: it removes itself
                // under the lock first.
                for thread in state.in_flight.values() {
                    let _ = pthread_kill(*thread, CANCEL_SIGNAL);
                }
            }
            let wait = if interrupt { left.min(Duration::from_millis(5)) } else { left };
            state = self.shared.changed.wait_timeout(state, wait).unwrap_or_else(|p| p.into_inner()).0;
        }
        state
    }
}

impl Drop for KnobWriter {
    /// Tells the workers to stop after their current write; does not wait for them.
    fn drop(&mut self) {
        self.shared.lock().shutdown = true;
        self.shared.changed.notify_all();
    }
}

fn worker(shared: &Shared, outcomes: &Sender<WriteOutcome>) {
    // The spawning thread may block signals (the agent handles SIGTERM through a signalfd);
    // this one must be able to receive the cancel signal.
    let _ = SigSet::from(CANCEL_SIGNAL).thread_unblock();
    loop {
        let (pending, started) = {
            let mut state = shared.lock();
            loop {
                if state.shutdown {
                    return;
                }
                // The oldest queued file nobody is writing right now.
                let next = state.order.iter().position(|p| !state.in_flight.contains_key(p));
                if let Some(index) = next {
                    let path = state.order.remove(index).expect("index from position");
                    let pending = state.pending.remove(&path).expect("queued files are pending");
                    state.in_flight.insert(path, pthread_self());
                    break (pending, Instant::now());
                }
                state = shared.changed.wait(state).unwrap_or_else(|p| p.into_inner());
            }
        };
        let cpu_started_ns = crate::clock::thread_cpu_ns();
        let result = pending.write.perform_unless(&|| shared.lock().shutdown);
        let cpu = Duration::from_nanos(crate::clock::thread_cpu_ns().saturating_sub(cpu_started_ns));
        if let Err(e) = &result {
            // The outcome goes to the platform, which warns once per file; a limit the kernel
            // refuses is asked for again every tick.
            tracing::debug!(path = %pending.write.path.display(), value = %pending.write.contents, error = %e, "cgroup write failed");
        }
        let outcome = WriteOutcome {
            path: pending.write.path.clone(),
            contents: pending.write.contents,
            superseded: pending.superseded,
            queued: started.duration_since(pending.submitted_at),
            took: started.elapsed(),
            cpu,
            result,
        };
        // Report before clearing in-flight so that `wait_idle` implies the outcome is there.
        let _ = outcomes.send(outcome);
        shared.lock().in_flight.remove(&pending.write.path);
        shared.changed.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;

    /// A FIFO stands in for a cgroup file whose write blocks in reclaim: opening it for
    /// writing blocks until someone opens it for reading.
    fn fifo(dir: &Path) -> PathBuf {
        let path = dir.join("memory.max");
        nix::unistd::mkfifo(&path, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        path
    }

    /// Reads `len` bytes out of the FIFO, unblocking the writes that deliver them. The reader
    /// stays open across writers (a read with no writer returns 0 until the next one opens).
    fn drain_fifo(path: &Path, len: usize) -> String {
        let mut reader = std::fs::File::open(path).unwrap();
        let mut bytes = vec![0u8; len];
        let mut filled = 0;
        let deadline = Instant::now() + Duration::from_secs(10);
        while filled < len {
            assert!(Instant::now() < deadline, "FIFO got only {:?}", String::from_utf8_lossy(&bytes[..filled]));
            match reader.read(&mut bytes[filled..]).unwrap() {
                0 => std::thread::sleep(Duration::from_millis(1)),
                n => filled += n,
            }
        }
        String::from_utf8(bytes).unwrap()
    }

    fn wait_until(what: &str, mut condition: impl FnMut() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !condition() {
            assert!(Instant::now() < deadline, "timed out waiting for {what}");
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    #[test]
    fn blocked_write_neither_stalls_the_caller_nor_other_files_and_coalesces() {
        let dir = tempfile::tempdir().unwrap();
        let blocking = fifo(dir.path());
        let plain = dir.path().join("memory.high");
        std::fs::write(&plain, "max").unwrap();
        let writer = KnobWriter::new(2, 8);

        assert_eq!(writer.submit(FileWrite::new(blocking.clone(), "300", true)).unwrap(), Submitted::Queued);
        wait_until("the first write to start", || writer.is_in_flight(&blocking));

        // The FIFO has no reader: a submit that waited for the write would never return.
        assert_eq!(writer.submit(FileWrite::new(blocking.clone(), "200", true)).unwrap(), Submitted::Queued);
        assert_eq!(writer.submit(FileWrite::new(blocking.clone(), "100", true)).unwrap(), Submitted::Coalesced);
        assert_eq!(writer.submit(FileWrite::new(plain.clone(), "4096", true)).unwrap(), Submitted::Queued);

        // The other file completes while the FIFO write is still stuck.
        let mut done = Vec::new();
        wait_until("the plain file's write", || {
            done.extend(writer.completed());
            !done.is_empty()
        });
        assert_eq!(done[0].path, plain);
        assert!(done[0].result.is_ok());
        assert_eq!(std::fs::read_to_string(&plain).unwrap(), "4096");
        assert!(writer.is_in_flight(&blocking));
        assert_eq!(writer.outstanding(), 1, "one file: in flight with a newer value queued");

        // Unblock: the first value lands, then only the newest of the two queued behind it.
        std::thread::sleep(Duration::from_millis(30));
        assert_eq!(drain_fifo(&blocking, 6), "300100");
        assert!(writer.wait_idle(Duration::from_secs(10)));
        let fifo_outcomes: Vec<_> = writer.completed().into_iter().filter(|o| o.path == blocking).collect();
        assert_eq!(fifo_outcomes.iter().map(|o| (o.contents.as_str(), o.superseded)).collect::<Vec<_>>(), [("300", 0), ("100", 1)]);
        assert!(fifo_outcomes.iter().all(|o| o.result.is_ok()));
        // The first write waited 30 ms and more for a reader, using next to no CPU meanwhile.
        let first = &fifo_outcomes[0];
        assert!(first.took >= Duration::from_millis(30) && first.cpu < first.took / 2, "took {:?}, CPU {:?}", first.took, first.cpu);
        assert!(writer.shutdown(Duration::from_secs(5)).is_empty());
    }

    /// A one-worker writer with room for `capacity` files, its worker stuck writing `value`
    /// to a FIFO in `dir` (returned).
    fn stuck_writer(dir: &Path, capacity: usize, value: &str) -> (KnobWriter, PathBuf) {
        let blocking = fifo(dir);
        let writer = KnobWriter::new(1, capacity);
        writer.submit(FileWrite::new(blocking.clone(), value, true)).unwrap();
        wait_until("the write to start", || writer.is_in_flight(&blocking));
        (writer, blocking)
    }

    #[test]
    fn a_full_queue_fails_fast() {
        let dir = tempfile::tempdir().unwrap();
        let (writer, blocking) = stuck_writer(dir.path(), 1, "1");
        writer.submit(FileWrite::new(dir.path().join("a"), "1", true)).unwrap();
        // Full: refused at once rather than waiting for room behind the stuck write.
        let err = writer.submit(FileWrite::new(dir.path().join("b"), "1", true)).unwrap_err();
        assert!(matches!(err, Error::WriterQueueFull { capacity: 1 }), "{err}");
        assert_eq!(drain_fifo(&blocking, 1), "1");
        assert!(writer.wait_idle(Duration::from_secs(10)));
        // "a" does not exist: writes never create files, and the failure is reported.
        let outcomes = writer.completed();
        let a = outcomes.iter().find(|o| o.path.ends_with("a")).unwrap();
        assert!(a.result.is_err());
        assert!(!dir.path().join("a").exists());
    }

    #[test]
    fn shutdown_interrupts_a_write_stuck_in_the_kernel_so_it_cannot_land_later() {
        let dir = tempfile::tempdir().unwrap();
        let (writer, blocking) = stuck_writer(dir.path(), 4, "1");
        writer.submit(FileWrite::new(blocking.clone(), "2", true)).unwrap();
        // Nobody ever reads the FIFO: a shutdown that waited for the write would not return.
        let stuck = writer.shutdown(Duration::from_millis(50));
        assert!(stuck.is_empty(), "the stuck write was not interrupted: {stuck:?}");
        // Neither value reaches the file: a reader now finds no writer at all.
        let mut reader = std::fs::OpenOptions::new().read(true).custom_flags(nix::libc::O_NONBLOCK).open(&blocking).unwrap();
        let mut got = String::new();
        reader.read_to_string(&mut got).unwrap();
        assert_eq!(got, "");
    }

    #[test]
    fn an_interrupted_write_is_retried_while_the_writer_runs() {
        let dir = tempfile::tempdir().unwrap();
        let (writer, blocking) = stuck_writer(dir.path(), 4, "7");
        let thread = *writer.shared.lock().in_flight.get(&blocking).unwrap();
        pthread_kill(thread, CANCEL_SIGNAL).unwrap();
        std::thread::sleep(Duration::from_millis(20));
        assert!(writer.is_in_flight(&blocking), "a signal outside shutdown must not cancel the write");
        assert_eq!(drain_fifo(&blocking, 1), "7");
        assert!(writer.wait_idle(Duration::from_secs(10)));
        assert!(writer.completed().iter().all(|o| o.result.is_ok()));
    }

    #[test]
    fn submit_after_shutdown_is_refused() {
        let writer = KnobWriter::new(1, 1);
        writer.shared.lock().shutdown = true;
        assert!(matches!(writer.submit(FileWrite::new("/nonexistent".into(), "1", true)), Err(Error::WriterStopped)));
    }
}
