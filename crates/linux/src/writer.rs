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

use crate::cgroup::FileWrite;
use crate::error::{Error, Result};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
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
    in_flight: BTreeSet<PathBuf>,
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

impl KnobWriter {
    /// Starts `workers` threads (at least 1) with room for `capacity` queued files (at least 1).
    pub fn new(workers: usize, capacity: usize) -> Self {
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
        state.pending.len() + state.in_flight.iter().filter(|p| !state.pending.contains_key(*p)).count()
    }

    /// Whether a worker is writing `path` right now.
    pub fn is_in_flight(&self, path: &Path) -> bool {
        self.shared.lock().in_flight.contains(path)
    }

    /// Whether a value for `path` is queued or being written.
    pub fn is_outstanding(&self, path: &Path) -> bool {
        let state = self.shared.lock();
        state.pending.contains_key(path) || state.in_flight.contains(path)
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
    /// ones in flight. Returns the files still being written when the time ran out (their
    /// workers are left to finish on their own: a write stuck in the kernel cannot be
    /// cancelled, and the caller must not hang on it).
    pub fn shutdown(mut self, timeout: Duration) -> Vec<PathBuf> {
        let stuck = {
            let mut state = self.shared.lock();
            state.shutdown = true;
            state.order.clear();
            state.pending.clear();
            drop(state);
            self.shared.changed.notify_all();
            let deadline = Instant::now() + timeout;
            let mut state = self.shared.lock();
            while !state.in_flight.is_empty() {
                let Some(left) = deadline.checked_duration_since(Instant::now()) else { break };
                state = self.shared.changed.wait_timeout(state, left).unwrap_or_else(|p| p.into_inner()).0;
            }
            state.in_flight.iter().cloned().collect::<Vec<_>>()
        };
        if stuck.is_empty() {
            for handle in self.workers.drain(..) {
                let _ = handle.join();
            }
        }
        stuck
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
    loop {
        let (pending, started) = {
            let mut state = shared.lock();
            loop {
                if state.shutdown {
                    return;
                }
                // The oldest queued file nobody is writing right now.
                let next = state.order.iter().position(|p| !state.in_flight.contains(p));
                if let Some(index) = next {
                    let path = state.order.remove(index).expect("index from position");
                    let pending = state.pending.remove(&path).expect("queued files are pending");
                    state.in_flight.insert(path);
                    break (pending, Instant::now());
                }
                state = shared.changed.wait(state).unwrap_or_else(|p| p.into_inner());
            }
        };
        let result = pending.write.perform();
        if let Err(e) = &result {
            tracing::warn!(path = %pending.write.path.display(), value = %pending.write.contents, error = %e, "cgroup write failed");
        }
        let outcome = WriteOutcome {
            path: pending.write.path.clone(),
            contents: pending.write.contents,
            superseded: pending.superseded,
            queued: started.duration_since(pending.submitted_at),
            took: started.elapsed(),
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

        let started = Instant::now();
        assert_eq!(writer.submit(FileWrite::new(blocking.clone(), "200", true)).unwrap(), Submitted::Queued);
        assert_eq!(writer.submit(FileWrite::new(blocking.clone(), "100", true)).unwrap(), Submitted::Coalesced);
        assert_eq!(writer.submit(FileWrite::new(plain.clone(), "4096", true)).unwrap(), Submitted::Queued);
        assert!(started.elapsed() < Duration::from_millis(100), "submit blocked for {:?}", started.elapsed());

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
        assert_eq!(drain_fifo(&blocking, 6), "300100");
        assert!(writer.wait_idle(Duration::from_secs(10)));
        let fifo_outcomes: Vec<_> = writer.completed().into_iter().filter(|o| o.path == blocking).collect();
        assert_eq!(fifo_outcomes.iter().map(|o| (o.contents.as_str(), o.superseded)).collect::<Vec<_>>(), [("300", 0), ("100", 1)]);
        assert!(fifo_outcomes.iter().all(|o| o.result.is_ok()));
        assert!(writer.shutdown(Duration::from_secs(5)).is_empty());
    }

    #[test]
    fn a_full_queue_fails_fast() {
        let dir = tempfile::tempdir().unwrap();
        let blocking = fifo(dir.path());
        let writer = KnobWriter::new(1, 1);
        writer.submit(FileWrite::new(blocking.clone(), "1", true)).unwrap();
        wait_until("the write to start", || writer.is_in_flight(&blocking));
        writer.submit(FileWrite::new(dir.path().join("a"), "1", true)).unwrap();
        let started = Instant::now();
        let err = writer.submit(FileWrite::new(dir.path().join("b"), "1", true)).unwrap_err();
        assert!(started.elapsed() < Duration::from_millis(100));
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
    fn shutdown_reports_a_stuck_write_without_hanging() {
        let dir = tempfile::tempdir().unwrap();
        let blocking = fifo(dir.path());
        let writer = KnobWriter::new(1, 4);
        writer.submit(FileWrite::new(blocking.clone(), "1", true)).unwrap();
        wait_until("the write to start", || writer.is_in_flight(&blocking));
        writer.submit(FileWrite::new(blocking.clone(), "2", true)).unwrap();
        let started = Instant::now();
        let stuck = writer.shutdown(Duration::from_millis(50));
        assert!(started.elapsed() < Duration::from_secs(2));
        assert_eq!(stuck, vec![blocking.clone()]);
        // Release the worker; the queued "2" was dropped at shutdown.
        assert_eq!(drain_fifo(&blocking, 1), "1");
    }

    #[test]
    fn submit_after_shutdown_is_refused() {
        let writer = KnobWriter::new(1, 1);
        writer.shared.lock().shutdown = true;
        assert!(matches!(writer.submit(FileWrite::new("/nonexistent".into(), "1", true)), Err(Error::WriterStopped)));
    }
}
