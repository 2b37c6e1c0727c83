//! Storage device model for swap and file-backed pages.
//!
//! One FIFO queue per device: a request starts when both it has been submitted and the
//! previous request has finished, and occupies the device for its per-request latency plus
//! its transfer time at the device's bandwidth. So concurrent faults wait for each other,
//! and a dirty victim written back during a fault delays the read submitted right after it.
//!
//! Like a block layer's elevator, a write submitted while the previous request is a write
//! that has not started yet is merged into it (one latency, summed transfer): write-backs of
//! consecutive victims go out as one request. Reads are never merged (faults are synchronous).

use crate::time::Nanos;
use serde::{Deserialize, Serialize};
use std::fmt;

/// Direction of a device request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum IoOp {
    Read,
    Write,
}

/// Parameters of a storage device.
///
/// The presets are *model parameters*, plausible orders of magnitude for each class of
/// device, not measurements of any particular product. Bandwidths are in bytes per second
/// (decimal: 1 MB/s = 10^6 B/s, as vendors quote them).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceSpec {
    pub name: String,
    /// Fixed cost of every read request (seek, rotation, command overhead), before transfer.
    pub read_latency: Nanos,
    /// Fixed cost of every write request.
    pub write_latency: Nanos,
    pub read_bytes_per_s: u64,
    pub write_bytes_per_s: u64,
}

impl DeviceSpec {
    /// Names accepted by [`DeviceSpec::preset`].
    pub const PRESETS: [&'static str; 4] = ["hdd", "slow-ssd", "fast-ssd", "zram"];

    /// A 7200 rpm disk with swap on a short partition: ~1 ms short seek plus ~4.2 ms average
    /// rotational delay per request, ~120 MB/s sequential transfer.
    pub fn hdd() -> Self {
        DeviceSpec {
            name: "hdd".into(),
            read_latency: Nanos::from_us(5_000),
            write_latency: Nanos::from_us(5_000),
            read_bytes_per_s: 120_000_000,
            write_bytes_per_s: 120_000_000,
        }
    }

    /// A SATA SSD: ~90 µs per read request, ~60 µs per write, 560/510 MB/s.
    pub fn slow_ssd() -> Self {
        DeviceSpec {
            name: "slow-ssd".into(),
            read_latency: Nanos::from_us(90),
            write_latency: Nanos::from_us(60),
            read_bytes_per_s: 560_000_000,
            write_bytes_per_s: 510_000_000,
        }
    }

    /// An NVMe SSD: ~25 µs per read request, ~20 µs per write, 2100/1000 MB/s.
    pub fn fast_ssd() -> Self {
        DeviceSpec {
            name: "fast-ssd".into(),
            read_latency: Nanos::from_us(25),
            write_latency: Nanos::from_us(20),
            read_bytes_per_s: 2_100_000_000,
            write_bytes_per_s: 1_000_000_000,
        }
    }

    /// Compressed RAM swap: a few µs of (de)compression per page, bandwidth bound by the
    /// compressor (~3000 MB/s decompress, ~1200 MB/s compress). It is CPU work in reality;
    /// modelled as a very fast device so the same fault path applies.
    pub fn zram() -> Self {
        DeviceSpec {
            name: "zram".into(),
            read_latency: Nanos::from_us(2),
            write_latency: Nanos::from_us(4),
            read_bytes_per_s: 3_000_000_000,
            write_bytes_per_s: 1_200_000_000,
        }
    }

    /// One of [`DeviceSpec::PRESETS`] by name.
    pub fn preset(name: &str) -> Option<Self> {
        match name {
            "hdd" => Some(Self::hdd()),
            "slow-ssd" => Some(Self::slow_ssd()),
            "fast-ssd" => Some(Self::fast_ssd()),
            "zram" => Some(Self::zram()),
            _ => None,
        }
    }

    /// Checks the parameters; the message says what to change.
    pub fn validate(&self) -> Result<(), String> {
        if self.read_bytes_per_s == 0 || self.write_bytes_per_s == 0 {
            return Err(format!("device `{}`: bandwidths must be greater than 0 bytes/s", self.name));
        }
        Ok(())
    }

    /// How long one request of `bytes` occupies the device (latency + transfer, transfer
    /// time rounded up to the next nanosecond).
    pub fn service_time(&self, op: IoOp, bytes: u64) -> Nanos {
        let (lat, bw) = match op {
            IoOp::Read => (self.read_latency, self.read_bytes_per_s),
            IoOp::Write => (self.write_latency, self.write_bytes_per_s),
        };
        let transfer = (u128::from(bytes) * 1_000_000_000).div_ceil(u128::from(bw));
        lat + Nanos(u64::try_from(transfer).unwrap_or(u64::MAX / 4))
    }
}

impl fmt::Display for DeviceSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} (read {} µs + {} MB/s, write {} µs + {} MB/s)",
            self.name,
            self.read_latency.as_us(),
            self.read_bytes_per_s / 1_000_000,
            self.write_latency.as_us(),
            self.write_bytes_per_s / 1_000_000
        )
    }
}

/// Cumulative counters of one device.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceStats {
    pub reads: u64,
    /// Write requests after merging.
    pub writes: u64,
    /// Writes merged into the previous queued write.
    pub merged_writes: u64,
    pub bytes_read: u64,
    pub bytes_written: u64,
    /// Total time the device spent serving requests.
    pub busy: Nanos,
    /// Total time requests spent queued behind earlier ones before starting.
    pub queued: Nanos,
}

/// A group's I/O bandwidth limit in one direction, as a block layer's throttle enforces it:
/// a request goes to the device once the bytes before it have been paid for at the limit's
/// rate, so the group's requests leave at no more than `bytes_per_s` (no burst).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Throttle {
    bytes_per_s: Option<u64>,
    /// When the bytes already let through have been paid for.
    paid_until: Nanos,
}

impl Throttle {
    pub fn set_limit(&mut self, bytes_per_s: Option<u64>) {
        debug_assert!(bytes_per_s != Some(0), "a zero limit would hold requests forever");
        self.bytes_per_s = bytes_per_s;
    }

    pub fn limit(&self) -> Option<u64> {
        self.bytes_per_s
    }

    /// When a request submitted at `now` may go to the device (`now` when unlimited).
    #[inline]
    pub fn release_at(&self, now: Nanos) -> Nanos {
        if self.bytes_per_s.is_some() {
            now.max(self.paid_until)
        } else {
            now
        }
    }

    /// Lets a request of `bytes` through at `at` (from [`Throttle::release_at`]) and charges it.
    pub fn pass(&mut self, at: Nanos, bytes: u64) {
        if let Some(bps) = self.bytes_per_s {
            let pay = (u128::from(bytes) * 1_000_000_000).div_ceil(u128::from(bps));
            self.paid_until = at.max(self.paid_until) + Nanos(u64::try_from(pay).unwrap_or(u64::MAX / 4));
        }
    }
}

/// A device with one FIFO queue.
#[derive(Clone, Debug)]
pub struct Device {
    spec: DeviceSpec,
    /// When the last submitted request completes.
    busy_until: Nanos,
    /// Start time and direction of the last submitted request.
    last: Option<(Nanos, IoOp)>,
    stats: DeviceStats,
    /// Writes a throttle holds back: (when they reach the queue, bytes), in that order.
    held_writes: Vec<(Nanos, u64)>,
}

impl Device {
    pub fn new(spec: DeviceSpec) -> Self {
        Device { spec, busy_until: Nanos::ZERO, last: None, stats: DeviceStats::default(), held_writes: Vec::new() }
    }

    /// Queues a write that a throttle holds back until `at`: it joins the queue then, behind
    /// whatever was submitted before `at`, and nothing submitted earlier waits for it. Writes
    /// are asynchronous in this model (nobody waits for their completion), so none is needed.
    pub fn submit_held_write(&mut self, at: Nanos, bytes: u64) {
        let k = self.held_writes.partition_point(|&(t, _)| t <= at);
        self.held_writes.insert(k, (at, bytes));
    }

    /// Puts held writes due by `now` in the queue, at the instants they were due.
    #[cold]
    #[inline(never)]
    fn release_held(&mut self, now: Nanos) {
        let due = self.held_writes.partition_point(|&(t, _)| t <= now);
        if due > 0 {
            let writes: Vec<(Nanos, u64)> = self.held_writes.drain(..due).collect();
            for (at, bytes) in writes {
                self.enqueue(at, IoOp::Write, bytes);
            }
        }
    }

    pub fn spec(&self) -> &DeviceSpec {
        &self.spec
    }

    pub fn stats(&self) -> DeviceStats {
        self.stats
    }

    /// When the device becomes idle if nothing else is submitted.
    pub fn busy_until(&self) -> Nanos {
        self.busy_until
    }

    /// Queues a request of `bytes` at `now` behind every earlier request and returns its
    /// completion time.
    #[inline]
    pub fn submit(&mut self, now: Nanos, op: IoOp, bytes: u64) -> Nanos {
        if !self.held_writes.is_empty() {
            self.release_held(now);
        }
        self.enqueue(now, op, bytes)
    }

    #[inline]
    fn enqueue(&mut self, now: Nanos, op: IoOp, bytes: u64) -> Nanos {
        if let Some((last_start, IoOp::Write)) = self.last {
            if op == IoOp::Write && last_start >= now {
                let transfer = self.spec.service_time(op, bytes) - self.spec.write_latency;
                self.busy_until += transfer;
                self.stats.busy += transfer;
                self.stats.merged_writes += 1;
                self.stats.bytes_written += bytes;
                return self.busy_until;
            }
        }
        let start = now.max(self.busy_until);
        self.last = Some((start, op));
        let service = self.spec.service_time(op, bytes);
        self.busy_until = start + service;
        self.stats.busy += service;
        self.stats.queued += start - now;
        match op {
            IoOp::Read => {
                self.stats.reads += 1;
                self.stats.bytes_read += bytes;
            }
            IoOp::Write => {
                self.stats.writes += 1;
                self.stats.bytes_written += bytes;
            }
        }
        self.busy_until
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_have_the_documented_bandwidths() {
        let s = DeviceSpec::slow_ssd();
        assert_eq!((s.read_bytes_per_s, s.write_bytes_per_s), (560_000_000, 510_000_000));
        let f = DeviceSpec::fast_ssd();
        assert_eq!((f.read_bytes_per_s, f.write_bytes_per_s), (2_100_000_000, 1_000_000_000));
        for name in DeviceSpec::PRESETS {
            let d = DeviceSpec::preset(name).unwrap();
            assert_eq!(d.name, name);
            d.validate().unwrap();
        }
        assert!(DeviceSpec::preset("floppy").is_none());
    }

    #[test]
    fn service_time_is_latency_plus_transfer() {
        // 4096 B at 560 MB/s = 7314.29 ns, rounded up.
        assert_eq!(DeviceSpec::slow_ssd().service_time(IoOp::Read, 4096), Nanos(90_000 + 7_315));
        assert_eq!(DeviceSpec::hdd().service_time(IoOp::Write, 120_000), Nanos(5_000_000 + 1_000_000));
    }

    #[test]
    fn idle_device_starts_immediately_and_later_submissions_start_late() {
        let mut d = Device::new(DeviceSpec::fast_ssd());
        let svc = d.spec().service_time(IoOp::Read, 4096);
        assert_eq!(d.submit(Nanos(1_000), IoOp::Read, 4096), Nanos(1_000) + svc);
        // Submitted long after the first finished: starts at once.
        assert_eq!(d.submit(Nanos::from_ms(1), IoOp::Read, 4096), Nanos::from_ms(1) + svc);
        assert_eq!(d.stats().queued, Nanos::ZERO);
    }

    /// A held write keeps nobody waiting before it is due, and joins the queue when it is.
    #[test]
    fn a_held_write_joins_the_queue_when_due() {
        let mut d = Device::new(DeviceSpec::slow_ssd());
        let (read, write) = (d.spec().service_time(IoOp::Read, 4096), d.spec().service_time(IoOp::Write, 4096));
        d.submit_held_write(Nanos::from_ms(1), 4096);
        // A read before the write is due starts at once.
        assert_eq!(d.submit(Nanos::ZERO, IoOp::Read, 4096), read);
        // A read just after it is due waits for it.
        let at = Nanos::from_ms(1) + Nanos(1);
        assert_eq!(d.submit(at, IoOp::Read, 4096), Nanos::from_ms(1) + write + read);
        assert_eq!(d.stats().writes, 1);
        assert_eq!(d.stats().queued, write - Nanos(1));
    }

    #[test]
    fn a_throttle_spaces_requests_at_its_rate() {
        let mut t = Throttle::default();
        assert_eq!(t.release_at(Nanos(5)), Nanos(5));
        t.set_limit(Some(1_000_000));
        t.pass(Nanos::ZERO, 1_000);
        // 1000 bytes at 1 MB/s: the next request waits 1 ms.
        assert_eq!(t.release_at(Nanos(10)), Nanos::from_ms(1));
        t.pass(Nanos::from_ms(1), 500);
        assert_eq!(t.release_at(Nanos::ZERO), Nanos::from_us(1_500));
        // Long idle: no credit is banked.
        assert_eq!(t.release_at(Nanos::from_ms(10)), Nanos::from_ms(10));
        t.set_limit(None);
        assert_eq!(t.release_at(Nanos::ZERO), Nanos::ZERO);
    }

    #[test]
    fn a_write_queued_behind_a_write_is_merged_into_it() {
        let mut d = Device::new(DeviceSpec::hdd());
        let one = d.spec().service_time(IoOp::Write, 4096);
        let transfer = one - d.spec().write_latency;
        let t0 = d.submit(Nanos::ZERO, IoOp::Write, 4096);
        assert_eq!(t0, one);
        // Submitted at the same instant: merged, only the transfer is added.
        assert_eq!(d.submit(Nanos::ZERO, IoOp::Write, 4096), one + transfer);
        // A read is never merged, and a write behind a read is a new request.
        let r = d.submit(Nanos::ZERO, IoOp::Read, 4096);
        assert_eq!(r, one + transfer + d.spec().service_time(IoOp::Read, 4096));
        assert_eq!(d.submit(Nanos::ZERO, IoOp::Write, 4096), r + one);
        assert_eq!((d.stats().writes, d.stats().merged_writes, d.stats().reads), (2, 1, 1));
    }
}
