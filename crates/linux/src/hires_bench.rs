//! What a process pays the kernel for two of HiRes's microbenchmarks, measured wherever it runs
//! (`critmem-hires apply TREE --in lN -- critmem-hires event-latency` runs it in subsystem lN's
//! cgroup, as deep as lN is in the tree):
//!
//! - [`event_latency`] (the paper's Fig. 4(a)): one thread wakes another through an eventfd,
//!   both held to one CPU, so every sample is a wake-up and a switch through the scheduler,
//!   which charges the CPU time to every cgroup level above the threads;
//! - [`page_cost`] (Fig. 4(c)): mapping one anonymous private page and writing to it (the
//!   fault that charges it to every memory cgroup level), then unmapping it.
//!
//! Both run on the first CPU the process may use, so that every depth measures the same CPU.

use nix::sched::{sched_getaffinity, sched_setaffinity, CpuSet};
use nix::sys::eventfd::{EfdFlags, EventFd};
use nix::time::{clock_gettime, ClockId};
use nix::unistd::Pid;
use serde_json::{json, Value};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Summary statistics of samples in ns.
#[derive(Clone, Debug, PartialEq)]
pub struct Stats {
    pub samples: usize,
    pub mean_ns: f64,
    /// Sample standard deviation (n − 1).
    pub stddev_ns: f64,
    pub min_ns: u64,
    pub p50_ns: u64,
    pub p95_ns: u64,
    pub p99_ns: u64,
    pub max_ns: u64,
}

impl Stats {
    /// The statistics of `samples_ns` (sorted in place); percentiles by nearest rank. None when
    /// there are no samples.
    pub fn of(samples_ns: &mut [u64]) -> Option<Stats> {
        let n = samples_ns.len();
        if n == 0 {
            return None;
        }
        samples_ns.sort_unstable();
        let mean_ns = samples_ns.iter().map(|&s| s as f64).sum::<f64>() / n as f64;
        let variance = if n > 1 { samples_ns.iter().map(|&s| (s as f64 - mean_ns).powi(2)).sum::<f64>() / (n - 1) as f64 } else { 0.0 };
        let rank = |p: f64| samples_ns[((p * n as f64).ceil() as usize).clamp(1, n) - 1];
        Some(Stats {
            samples: n,
            mean_ns,
            stddev_ns: variance.sqrt(),
            min_ns: samples_ns[0],
            p50_ns: rank(0.50),
            p95_ns: rank(0.95),
            p99_ns: rank(0.99),
            max_ns: samples_ns[n - 1],
        })
    }

    pub fn to_json(&self) -> Value {
        json!({
            "samples": self.samples,
            "mean_ns": self.mean_ns,
            "stddev_ns": self.stddev_ns,
            "min_ns": self.min_ns,
            "p50_ns": self.p50_ns,
            "p95_ns": self.p95_ns,
            "p99_ns": self.p99_ns,
            "max_ns": self.max_ns,
        })
    }

    /// One line: `mean 1234 ns, stddev 56 ns, p50 ... (N samples)`.
    pub fn line(&self) -> String {
        format!(
            "mean {:.0} ns, stddev {:.0} ns, p50 {} ns, p95 {} ns, p99 {} ns, max {} ns ({} samples)",
            self.mean_ns, self.stddev_ns, self.p50_ns, self.p95_ns, self.p99_ns, self.max_ns, self.samples
        )
    }
}

/// Where a measurement ran: the CPU, and this process's cgroup in the hierarchy that holds the
/// CPU controller (as `/proc/self/cgroup` names it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placement {
    pub cpu: usize,
    pub cpu_cgroup: Option<String>,
}

impl Placement {
    fn json_fields(&self) -> serde_json::Map<String, Value> {
        let mut fields = serde_json::Map::new();
        fields.insert("cpu".into(), json!(self.cpu));
        fields.insert("cpu_cgroup".into(), json!(self.cpu_cgroup));
        fields
    }
}

/// Fig. 4(a)'s analogue: the latency of an event from one thread to another on one CPU.
#[derive(Clone, Debug)]
pub struct EventLatency {
    pub placement: Placement,
    pub warmup: usize,
    pub latency: Stats,
}

impl EventLatency {
    pub fn to_json(&self) -> Value {
        let mut fields = self.placement.json_fields();
        fields.insert("warmup".into(), json!(self.warmup));
        fields.insert("latency".into(), self.latency.to_json());
        Value::Object(fields)
    }
}

/// Fig. 4(c)'s analogue: mapping (with the first write) and unmapping one anonymous page.
#[derive(Clone, Debug)]
pub struct PageCost {
    pub placement: Placement,
    pub warmup: usize,
    pub page_bytes: usize,
    pub map: Stats,
    pub unmap: Stats,
}

impl PageCost {
    pub fn to_json(&self) -> Value {
        let mut fields = self.placement.json_fields();
        fields.insert("warmup".into(), json!(self.warmup));
        fields.insert("page_bytes".into(), json!(self.page_bytes));
        fields.insert("map".into(), self.map.to_json());
        fields.insert("unmap".into(), self.unmap.to_json());
        Value::Object(fields)
    }
}

/// The first CPU this process may run on, and where it runs.
fn placement() -> Result<(Placement, CpuSet), String> {
    let allowed = sched_getaffinity(Pid::from_raw(0)).map_err(|e| format!("sched_getaffinity: {e}"))?;
    let cpu = (0..CpuSet::count()).find(|&c| allowed.is_set(c).unwrap_or(false)).ok_or("this process may run on no CPU")?;
    let mut only = CpuSet::new();
    only.set(cpu).map_err(|e| format!("CPU {cpu}: {e}"))?;
    let cpu_cgroup = std::fs::read_to_string("/proc/self/cgroup").ok().and_then(|text| cpu_cgroup(&text));
    Ok((Placement { cpu, cpu_cgroup }, only))
}

/// The path in the v1 hierarchy holding `cpu`, else the cgroup2 one, from `/proc/self/cgroup`.
fn cpu_cgroup(text: &str) -> Option<String> {
    let lines = crate::procfs::parse_proc_pid_cgroup(text, "/proc/self/cgroup").ok()?;
    let v1 = lines.iter().find(|l| l.controllers.iter().any(|c| c == "cpu"));
    v1.or_else(|| lines.iter().find(|l| l.hierarchy == 0)).map(|l| l.path.clone())
}

/// Holds the calling thread to `cpus`.
fn pin(cpus: &CpuSet) -> Result<(), String> {
    sched_setaffinity(Pid::from_raw(0), cpus).map_err(|e| format!("sched_setaffinity: {e}"))
}

fn monotonic_ns() -> Result<u64, String> {
    let t = clock_gettime(ClockId::CLOCK_MONOTONIC).map_err(|e| format!("clock_gettime: {e}"))?;
    Ok(t.tv_sec() as u64 * 1_000_000_000 + t.tv_nsec() as u64)
}

/// Reads an eventfd, retrying when a signal interrupts the wait.
fn read_event(fd: &EventFd) -> Result<u64, String> {
    loop {
        match fd.read() {
            Err(nix::errno::Errno::EINTR) => continue,
            other => return other.map_err(|e| format!("eventfd read: {e}")),
        }
    }
}

fn write_event(fd: &EventFd, value: u64) -> Result<(), String> {
    fd.write(value).map(drop).map_err(|e| format!("eventfd write: {e}"))
}

/// The scheduler state letter of thread `tid` of this process (`S`: asleep in a wait).
fn thread_state(tid: Pid) -> Result<char, String> {
    let path = format!("/proc/self/task/{tid}/stat");
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{path}: {e}"))?;
    // The name in parentheses may hold anything, the state follows its last `)`.
    text.rsplit_once(')').and_then(|(_, rest)| rest.trim_start().chars().next()).ok_or_else(|| format!("{path}: no state in {text:?}"))
}

/// Longest wait for the woken thread to be back asleep before a sample is given up on.
const ASLEEP_TIMEOUT: Duration = Duration::from_secs(5);

/// How long the waking thread sleeps before each sample: the woken one then reaches its wait,
/// and every sample starts from the same state (the waker just woken by its timer).
const BETWEEN_SAMPLES: Duration = Duration::from_micros(50);

/// `warmup` unrecorded samples, then `samples` event latencies: thread A takes
/// CLOCK_MONOTONIC and writes it to an eventfd thread B is blocked reading; B takes the clock
/// when it wakes, and the latency is the difference. B acknowledges through a second eventfd,
/// and A waits until B is asleep again before the next sample. Both threads are held to the
/// first CPU the process may use, so each sample includes the scheduler's switch.
pub fn event_latency(samples: usize, warmup: usize) -> Result<EventLatency, String> {
    if samples == 0 {
        return Err("--samples must be at least 1".into());
    }
    let (placement, only) = placement()?;
    let total = samples + warmup;
    let event = EventFd::from_value_and_flags(0, EfdFlags::EFD_CLOEXEC).map_err(|e| format!("eventfd: {e}"))?;
    let ack = EventFd::from_value_and_flags(0, EfdFlags::EFD_CLOEXEC).map_err(|e| format!("eventfd: {e}"))?;
    let (tid_tx, tid_rx) = std::sync::mpsc::channel();
    let abandoned = AtomicBool::new(false);
    let mut latencies_ns = std::thread::scope(|scope| -> Result<Vec<u64>, String> {
        let (event, ack, only, abandoned) = (&event, &ack, &only, &abandoned);
        let woken = std::thread::Builder::new()
            .name("event-b".into())
            .spawn_scoped(scope, move || -> Result<Vec<u64>, String> {
                let pinned = pin(only);
                let _ = tid_tx.send(pinned.clone().map(|()| nix::unistd::gettid()));
                pinned?;
                let mut latencies_ns = Vec::with_capacity(total);
                let measured = (|| -> Result<(), String> {
                    for _ in 0..total {
                        let sent_ns = read_event(event)?;
                        let woke_ns = monotonic_ns()?;
                        if abandoned.load(Ordering::SeqCst) {
                            break;
                        }
                        latencies_ns.push(woke_ns.saturating_sub(sent_ns));
                        write_event(ack, 1)?;
                    }
                    Ok(())
                })();
                if measured.is_err() {
                    // The waker may be waiting for an acknowledgement: it ends on this one.
                    abandoned.store(true, Ordering::SeqCst);
                    let _ = write_event(ack, 1);
                }
                measured.map(|()| latencies_ns)
            })
            .map_err(|e| format!("start the woken thread: {e}"))?;
        let waker = || -> Result<(), String> {
            let tid = tid_rx.recv().map_err(|_| "the woken thread ended before it started".to_string())??;
            pin(only)?;
            for _ in 0..total {
                let deadline = Instant::now() + ASLEEP_TIMEOUT;
                loop {
                    std::thread::sleep(BETWEEN_SAMPLES);
                    if thread_state(tid)? == 'S' {
                        break;
                    }
                    if Instant::now() > deadline {
                        return Err(format!("the woken thread was not back asleep within {} s", ASLEEP_TIMEOUT.as_secs()));
                    }
                }
                // The clock is read just before the write: the latency is the kernel's part.
                write_event(event, monotonic_ns()?)?;
                read_event(ack)?;
                if abandoned.load(Ordering::SeqCst) {
                    return Err("the woken thread failed".into());
                }
            }
            Ok(())
        };
        let waited = waker();
        if waited.is_err() {
            // Wake the woken thread once more, to end.
            abandoned.store(true, Ordering::SeqCst);
            let _ = write_event(event, 1);
        }
        // The woken thread's own error first: the waker's may only be that it failed.
        let latencies = woken.join().map_err(|_| "the woken thread panicked".to_string())??;
        waited?;
        Ok(latencies)
    })?;
    let recorded = &mut latencies_ns[warmup..];
    let latency = Stats::of(recorded).ok_or("no samples")?;
    Ok(EventLatency { placement, warmup, latency })
}

/// `warmup` unrecorded rounds, then `samples` rounds of: map one anonymous private page and
/// write a byte to it (timed as "map": the mapping and the page fault), then unmap it (timed
/// as "unmap"). Held to the first CPU the process may use.
pub fn page_cost(samples: usize, warmup: usize) -> Result<PageCost, String> {
    if samples == 0 {
        return Err("--samples must be at least 1".into());
    }
    let (placement, only) = placement()?;
    pin(&only)?;
    let page_bytes = nix::unistd::sysconf(nix::unistd::SysconfVar::PAGE_SIZE).ok().flatten().map_or(4096, |b| b as usize);
    let mut map_ns = Vec::with_capacity(samples);
    let mut unmap_ns = Vec::with_capacity(samples);
    for i in 0..samples + warmup {
        let start = Instant::now();
        let mut page = memmap2::MmapOptions::new().len(page_bytes).map_anon().map_err(|e| format!("mmap one page: {e}"))?;
        page[0] = 1;
        std::hint::black_box(&mut page);
        let mapped = Instant::now();
        drop(page);
        let unmapped = Instant::now();
        if i >= warmup {
            map_ns.push((mapped - start).as_nanos() as u64);
            unmap_ns.push((unmapped - mapped).as_nanos() as u64);
        }
    }
    let map = Stats::of(&mut map_ns).ok_or("no samples")?;
    let unmap = Stats::of(&mut unmap_ns).ok_or("no samples")?;
    Ok(PageCost { placement, warmup, page_bytes, map, unmap })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statistics_are_by_nearest_rank_with_the_sample_deviation() {
        let mut samples: Vec<u64> = (1..=100).rev().collect();
        let s = Stats::of(&mut samples).unwrap();
        assert_eq!((s.samples, s.min_ns, s.p50_ns, s.p95_ns, s.p99_ns, s.max_ns), (100, 1, 50, 95, 99, 100));
        assert!((s.mean_ns - 50.5).abs() < 1e-9);
        assert!((s.stddev_ns - 29.011_491_975_882_016).abs() < 1e-9, "{}", s.stddev_ns);
        let one = Stats::of(&mut [7]).unwrap();
        assert_eq!((one.p50_ns, one.p99_ns, one.max_ns, one.stddev_ns), (7, 7, 7, 0.0));
        assert_eq!(Stats::of(&mut []), None);
    }

    #[test]
    fn the_cpu_cgroup_is_the_v1_cpu_hierarchy_else_the_unified_one() {
        let hybrid = "9:name=systemd:/\n4:memory:/process_api/c69f\n2:cpuacct:/\n1:cpu:/t/l1/l2\n0::/\n";
        assert_eq!(cpu_cgroup(hybrid).as_deref(), Some("/t/l1/l2"));
        assert_eq!(cpu_cgroup("2:cpu,cpuacct:/a\n").as_deref(), Some("/a"));
        assert_eq!(cpu_cgroup("0::/user.slice/x\n").as_deref(), Some("/user.slice/x"));
    }

    #[test]
    fn a_thread_state_is_read_past_a_name_holding_parentheses() {
        let running =
            std::thread::Builder::new().name("a) (b".into()).spawn(|| thread_state(nix::unistd::gettid())).unwrap().join().unwrap();
        assert_eq!(running, Ok('R'));
    }
}
