//! The time the Linux side runs on: a [`Clock`] gives the time now and sleeps until an instant.
//! Production code uses [`MonotonicClock`] (CLOCK_MONOTONIC, the clock the job protocol's
//! `at_ns` and `deadline_ns` are on); tests that only need time to pass use [`FakeClock`],
//! whose sleeps return at once with the time moved on.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// A monotonic clock in nanoseconds.
pub trait Clock: Send + Sync {
    /// The time now, in nanoseconds on this clock's own line (never goes backwards).
    fn now_ns(&self) -> u64;
    /// Returns once [`Clock::now_ns`] is at or past `deadline_ns` (at once if it already is).
    fn sleep_until_ns(&self, deadline_ns: u64);
    /// CPU time the calling thread has used, in nanoseconds: what work costs the machine, where
    /// [`Clock::now_ns`] also counts the time the thread waited for a CPU.
    fn thread_cpu_ns(&self) -> u64;
}

/// The clock a run shares between its parts.
pub type SharedClock = Arc<dyn Clock>;

/// `clock` in nanoseconds; both clocks read here exist on every Linux.
fn clock_ns(clock: nix::time::ClockId) -> u64 {
    let ts = nix::time::clock_gettime(clock).unwrap_or_else(|e| panic!("{clock} is always available: {e}"));
    ts.tv_sec() as u64 * 1_000_000_000 + ts.tv_nsec() as u64
}

/// CLOCK_MONOTONIC in nanoseconds: the clock the job protocol's `deadline_ns`/`at_ns` use.
pub fn monotonic_ns() -> u64 {
    clock_ns(nix::time::ClockId::CLOCK_MONOTONIC)
}

/// CLOCK_THREAD_CPUTIME_ID in nanoseconds: the CPU time the calling thread has used, in user
/// and kernel mode (a cgroup write's reclaim included).
pub fn thread_cpu_ns() -> u64 {
    clock_ns(nix::time::ClockId::CLOCK_THREAD_CPUTIME_ID)
}

/// The machine's CLOCK_MONOTONIC.
#[derive(Clone, Copy, Debug, Default)]
pub struct MonotonicClock;

impl MonotonicClock {
    pub fn shared() -> SharedClock {
        Arc::new(MonotonicClock)
    }
}

impl Clock for MonotonicClock {
    fn now_ns(&self) -> u64 {
        monotonic_ns()
    }

    fn sleep_until_ns(&self, deadline_ns: u64) {
        // std's sleep is relative and may wake early on a signal: sleep again for what is left.
        loop {
            let now_ns = monotonic_ns();
            if now_ns >= deadline_ns {
                return;
            }
            std::thread::sleep(Duration::from_nanos(deadline_ns - now_ns));
        }
    }

    fn thread_cpu_ns(&self) -> u64 {
        thread_cpu_ns()
    }
}

/// A clock that moves only when told to or slept on: a sleep returns at once, with the time
/// at its deadline. For tests of anything that waits on time.
#[derive(Debug, Default)]
pub struct FakeClock {
    now_ns: AtomicU64,
    cpu_ns: AtomicU64,
}

impl FakeClock {
    /// A clock reading `start_ns`.
    pub fn new(start_ns: u64) -> Arc<Self> {
        Arc::new(FakeClock { now_ns: AtomicU64::new(start_ns), cpu_ns: AtomicU64::new(0) })
    }

    /// Moves the time on by `ns`.
    pub fn advance_ns(&self, ns: u64) {
        self.now_ns.fetch_add(ns, Ordering::SeqCst);
    }

    /// Counts `ns` of CPU time as used (by whichever thread asks next: one counter for all).
    pub fn advance_cpu_ns(&self, ns: u64) {
        self.cpu_ns.fetch_add(ns, Ordering::SeqCst);
    }
}

impl Clock for FakeClock {
    fn now_ns(&self) -> u64 {
        self.now_ns.load(Ordering::SeqCst)
    }

    fn sleep_until_ns(&self, deadline_ns: u64) {
        self.now_ns.fetch_max(deadline_ns, Ordering::SeqCst);
    }

    fn thread_cpu_ns(&self) -> u64 {
        self.cpu_ns.load(Ordering::SeqCst)
    }
}

/// Runs the calling thread under SCHED_FIFO at `priority` (1–99); threads it starts later
/// inherit the policy. Fails without CAP_SYS_NICE, or in a CPU cgroup with no real-time
/// runtime.
pub fn run_current_thread_fifo(priority: u8) -> std::result::Result<(), String> {
    use thread_priority::{RealtimeThreadSchedulePolicy, ThreadPriority, ThreadPriorityValue, ThreadSchedulePolicy};
    let value = ThreadPriorityValue::try_from(priority).map_err(|e| e.to_string())?;
    thread_priority::set_thread_priority_and_policy(
        thread_priority::thread_native_id(),
        ThreadPriority::Crossplatform(value),
        ThreadSchedulePolicy::Realtime(RealtimeThreadSchedulePolicy::Fifo),
    )
    .map_err(|e| format!("{e:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fake_clock_moves_only_when_advanced_or_slept_on() {
        let clock = FakeClock::new(1_000);
        assert_eq!(clock.now_ns(), 1_000);
        clock.advance_ns(500);
        assert_eq!(clock.now_ns(), 1_500);
        clock.sleep_until_ns(10_000);
        assert_eq!(clock.now_ns(), 10_000);
        // A deadline in the past returns at once and never moves the time back.
        clock.sleep_until_ns(2_000);
        assert_eq!(clock.now_ns(), 10_000);
    }

    #[test]
    fn the_monotonic_clock_sleeps_until_its_deadline() {
        let clock = MonotonicClock;
        let deadline_ns = clock.now_ns() + 2_000_000;
        clock.sleep_until_ns(deadline_ns);
        assert!(clock.now_ns() >= deadline_ns);
    }

    #[test]
    fn thread_cpu_time_counts_work_but_not_sleep() {
        let clock = MonotonicClock;
        let before_ns = clock.thread_cpu_ns();
        std::thread::sleep(Duration::from_millis(30));
        let slept_ns = clock.thread_cpu_ns() - before_ns;
        assert!(slept_ns < 10_000_000, "a 30 ms sleep used {slept_ns} ns of CPU");
        // Work until this thread has used 20 ms of CPU: that takes at least 20 ms, whatever
        // other threads of the process do meanwhile.
        let started = std::time::Instant::now();
        let start_cpu_ns = clock.thread_cpu_ns();
        let mut x = 0u64;
        while clock.thread_cpu_ns() - start_cpu_ns < 20_000_000 {
            x = std::hint::black_box(x.wrapping_add(1));
        }
        assert!(started.elapsed() >= Duration::from_millis(20), "20 ms of CPU in {:?}", started.elapsed());
    }
}
