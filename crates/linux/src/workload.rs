//! Building blocks of the shipped workloads (`critmem-srt-worker`, `critmem-nrt-worker`):
//! a working set whose every page holds a known pattern and is verified when touched, a job
//! and signal-aware waiting (the job socket client is [`crate::client`]).

use critmem_core::{Nanos, TaskStats};
use nix::poll::{PollFd, PollFlags, PollTimeout};
use nix::sys::signalfd::SignalFd;
use serde::{Deserialize, Serialize};
use std::os::fd::AsFd;
use std::time::{Duration, Instant};

pub const PAGE_BYTES: usize = 4096;
const WORDS_PER_PAGE: usize = PAGE_BYTES / 8;

/// splitmix64: a full-period mix, so every word's expected value is cheap to recompute.
fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// An anonymous working set (a large `Vec` is an anonymous private mapping from the
/// allocator), every word written with a pattern derived from its position and a seed.
pub struct Region {
    words: Vec<u64>,
    seed: u64,
}

impl Region {
    /// Allocates `bytes` (rounded up to whole pages) and writes the pattern into every page,
    /// so all of it is resident (or swapped) and charged to the caller's cgroup.
    pub fn new(bytes: usize, seed: u64) -> Self {
        Self::try_new(bytes as u64, seed).unwrap_or_else(|e| panic!("{e}"))
    }

    /// [`Region::new`], or why it cannot be had: more than the address space, or than the
    /// machine will give (an error, where the allocator would abort the process).
    pub fn try_new(bytes: u64, seed: u64) -> Result<Self, String> {
        let words_len = usize::try_from(bytes.div_ceil(PAGE_BYTES as u64).max(1))
            .ok()
            .and_then(|pages| pages.checked_mul(WORDS_PER_PAGE))
            .ok_or_else(|| format!("{bytes} bytes is more than this machine can address"))?;
        let mut words = Vec::new();
        words.try_reserve_exact(words_len).map_err(|_| format!("cannot allocate {bytes} bytes"))?;
        words.extend((0..words_len).map(|i| mix(seed ^ i as u64)));
        Ok(Region { words, seed })
    }

    pub fn pages(&self) -> usize {
        self.words.len() / WORDS_PER_PAGE
    }

    /// Reads page `page` and checks every word; returns false on any mismatch.
    pub fn verify_page(&self, page: usize) -> bool {
        let start = page * WORDS_PER_PAGE;
        let mut bad = 0u64;
        for (j, w) in self.words[start..start + WORDS_PER_PAGE].iter().enumerate() {
            bad |= w ^ mix(self.seed ^ (start + j) as u64);
        }
        bad == 0
    }
}

/// Which pages a job or pass touches.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Pattern {
    Sequential,
    Random,
}

/// A page cursor over the first `active` pages of a region.
pub struct Walker {
    pattern: Pattern,
    cursor: usize,
    rng: u64,
}

impl Walker {
    pub fn new(pattern: Pattern, seed: u64) -> Self {
        Walker { pattern, cursor: 0, rng: mix(seed) | 1 }
    }

    pub fn next_page(&mut self, active: usize) -> usize {
        match self.pattern {
            Pattern::Sequential => {
                let page = self.cursor % active;
                self.cursor = page + 1;
                page
            }
            Pattern::Random => {
                // xorshift64
                self.rng ^= self.rng << 13;
                self.rng ^= self.rng >> 7;
                self.rng ^= self.rng << 17;
                (self.rng % active as u64) as usize
            }
        }
    }
}

/// Spins for `ns` of wall-clock time: compute that takes the same time on every machine.
pub fn busy_ns(ns: u64) {
    let started = Instant::now();
    let target = Duration::from_nanos(ns);
    let mut x = 1u64;
    while started.elapsed() < target {
        for _ in 0..64 {
            x = std::hint::black_box(mix(x));
        }
    }
}

/// Waits up to `timeout` for SIGINT/SIGTERM on `signals`; returns whether one arrived.
pub fn wait_signal(signals: &SignalFd, timeout: Duration) -> bool {
    let mut fds = [PollFd::new(signals.as_fd(), PollFlags::POLLIN)];
    let timeout = PollTimeout::try_from(timeout).unwrap_or(PollTimeout::MAX);
    matches!(nix::poll::poll(&mut fds, timeout), Ok(n) if n > 0) && signals.read_signal().is_ok_and(|s| s.is_some())
}

/// Whether SIGINT/SIGTERM is pending, without waiting.
pub fn signalled(signals: &SignalFd) -> bool {
    signals.read_signal().is_ok_and(|s| s.is_some())
}

/// What `critmem-srt-worker` prints at exit (one JSON line), and `critmem-linux-run` reads.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SrtWorkerSummary {
    pub worker: String,
    /// Jobs released, including one under way when the worker stopped.
    pub released: u64,
    pub completed: u64,
    /// Of the completed jobs, those that finished after their deadline.
    pub completed_late: u64,
    /// Jobs abandoned because the controller dropped them.
    pub dropped: u64,
    /// The absolute deadline (CLOCK_MONOTONIC) of the job under way when the worker stopped.
    pub unfinished_deadline_ns: Option<u64>,
    pub checksum_failures: u64,
    pub pages_verified: u64,
    pub max_response_ns: u64,
    pub total_response_ns: u64,
    /// The longest time a completed job finished past its deadline.
    pub max_tardiness_ns: u64,
    /// Pages of the cold memory verified at exit.
    pub cold_pages_verified: u64,
    pub reports_sent: u64,
    pub reports_unsent: u64,
    pub connects: u64,
}

impl SrtWorkerSummary {
    /// The worker's jobs as the simulator's per-task totals, judged at `end_ns` (the end of
    /// the run): as [`crate::platform::JobCounts::task_stats`] counts a group's jobs.
    pub fn task_stats(&self, end_ns: u64) -> TaskStats {
        let mut stats = TaskStats {
            released: self.released,
            completed: self.completed,
            deadline_misses: self.completed_late + self.dropped,
            aborted: self.dropped,
            dropped: self.dropped,
            max_response: (self.completed > 0).then_some(Nanos(self.max_response_ns)),
            total_response: u128::from(self.total_response_ns),
            max_tardiness: Nanos(self.max_tardiness_ns),
            ..TaskStats::default()
        };
        if let Some(deadline_ns) = self.unfinished_deadline_ns {
            crate::platform::judge_unfinished(&mut stats, deadline_ns, end_ns);
        }
        stats
    }
}

/// What `critmem-nrt-worker` prints at exit (one JSON line), and `critmem-linux-run` reads.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct NrtWorkerSummary {
    pub worker: String,
    /// MiB of its working set read and verified.
    pub verified_mib: u64,
    pub verified_mib_per_s: f64,
    pub checksum_failures: u64,
    pub elapsed_s: f64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_region_verifies_until_a_word_changes() {
        let mut region = Region::new(3 * PAGE_BYTES + 1, 7);
        assert_eq!(region.pages(), 4);
        assert!((0..4).all(|p| region.verify_page(p)));
        region.words[2 * WORDS_PER_PAGE + 5] ^= 1;
        assert!(!region.verify_page(2));
        assert!(region.verify_page(3));
    }

    #[test]
    fn walkers_stay_in_the_active_range() {
        let mut seq = Walker::new(Pattern::Sequential, 1);
        assert_eq!((0..5).map(|_| seq.next_page(3)).collect::<Vec<_>>(), [0, 1, 2, 0, 1]);
        let seed = 1;
        let mut random = Walker::new(Pattern::Random, seed);
        assert!((0..1000).all(|_| random.next_page(10) < 10), "seed {seed}");
    }

    #[test]
    fn busy_spins_for_about_the_asked_time() {
        let started = Instant::now();
        busy_ns(2_000_000);
        assert!(started.elapsed() >= Duration::from_millis(2));
    }
}
