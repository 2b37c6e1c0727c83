//! `[io]`: the I/O device, its packet streams, port bindings, transmissions and each server's
//! transmit limit (HiRes Sec. III-C).

use crate::time::Nanos;

/// The validated `[io]` section.
#[derive(Clone, Debug, PartialEq)]
pub struct IoSpec {
    /// The device's transmit bandwidth, the root's I/O capacity; `None`: unbounded.
    pub bandwidth_bytes_per_s: Option<u64>,
    /// Most packets one event thread's ring holds (its unfinished jobs); `None`: no bound.
    pub ring_packets: Option<u64>,
    pub streams: Vec<PacketStream>,
    /// Bound ports, in file order.
    pub ports: Vec<PortBinding>,
    pub transmits: Vec<Transmit>,
    /// Each server's transmit bucket (file order), where its tasks transmit.
    pub buckets: Vec<Option<Bucket>>,
    /// The root's bucket (the device's bandwidth), where tasks outside servers transmit.
    pub root_bucket: Option<Bucket>,
}

impl IoSpec {
    /// Whether some stream's arrivals are random.
    pub fn is_random(&self) -> bool {
        self.streams.iter().any(|s| matches!(s.arrival, PacketArrival::Poisson { .. }))
    }
}

/// Packets of one size to one destination port.
#[derive(Clone, Debug, PartialEq)]
pub struct PacketStream {
    pub port: u16,
    pub bytes: u64,
    pub arrival: PacketArrival,
    /// The first arrival (periodic), or where the first gap starts (Poisson).
    pub offset: Nanos,
    /// No arrival at or after this time.
    pub stop: Option<Nanos>,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum PacketArrival {
    Periodic {
        period: Nanos,
    },
    /// Exponential gaps with mean 1 / `rate_per_s`, drawn from the stream's own generator.
    Poisson {
        rate_per_s: f64,
    },
}

/// `port` bound to event thread `task`, in the subsystem the task is attached to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PortBinding {
    pub port: u16,
    pub task: usize,
}

/// Each completed job of `task` sends `bytes` from source `port`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Transmit {
    pub task: usize,
    pub port: u16,
    pub bytes: u64,
}

/// A subsystem's transmit limit: bandwidth bound to it and the bucket's depth.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bucket {
    pub rate_bytes_per_s: u64,
    pub burst_bytes: u64,
}
