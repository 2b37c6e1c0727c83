//! HiRes's hierarchical I/O (Sec. III-D): a network device whose packets are demultiplexed by
//! destination port, early, into the ring of the subsystem the port is bound to, and whose
//! transmissions are checked and rate-limited per subsystem.
//!
//! - **Receive.** Each packet of a stream arrives at the device at an instant. A port bound to
//!   an event thread (a task attached to a server) gets the packet queued in that thread's
//!   ring and the thread activated at once: one job per packet, released with
//!   [`Context::activate`], so a hierarchy with child-scheduler events dispatches it without
//!   invoking the schedulers where it outranks what runs (see
//!   [`crate::sched::Scheduler::activate`]); it still runs only within its servers' budgets.
//!   A packet to an unbound port, or to a full ring, is dropped and counted. The packet's
//!   latency is from its arrival to the start of its job. Demultiplexing takes no simulated
//!   time.
//! - **Transmit.** Each completed job of a transmitting task sends its message on a source
//!   port bound to its own subsystem (checked at load). A subsystem's messages leave through a
//!   token bucket filled at the bandwidth bound to it (`reserve.io_bytes_per_s`, its depth
//!   `io_burst_bytes`), in order: a message waits until the bucket holds its size, so the
//!   bytes a subsystem sends in any window of length w are at most rate × w + depth.
//! - **Usage.** Per subsystem what it received and sent, and for each the sum over its
//!   subtree: what a parent reads of its children.

use crate::engine::{Context, JobInfo, Subsystem};
use crate::model::io::{Bucket, IoSpec, PacketArrival, Transmit};
use crate::result::{JsonFields, Outcome, Section, SimResult};
use crate::rng::{sub_rng, SimRng};
use crate::scenario::Scenario;
use crate::sched::{ServerSummary, Servers};
use crate::time::Nanos;
use crate::MAX_TRACE_RECORDS;
use rand_distr::{Distribution, Exp1};
use serde::Serialize;
use std::collections::{BTreeMap, VecDeque};

/// Token units per byte: a bucket counts bytes × 10^9, so a rate in bytes per second adds an
/// exact whole number of units per nanosecond.
const UNITS_PER_BYTE: u128 = 1_000_000_000;

/// What one port saw over a run.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct PortResult {
    pub port: u16,
    /// The event thread it is bound to (`None`: unbound).
    pub task: Option<String>,
    /// The thread's server (`"root"` outside servers).
    pub subsystem: Option<String>,
    /// Servers from the root down to the thread's (0 outside servers).
    pub depth: usize,
    pub arrivals: u64,
    pub received: u64,
    pub bytes_received: u64,
    /// Dropped: unbound, or its ring was full.
    pub dropped: u64,
    /// Packets whose job started; the latency figures are over these.
    pub started: u64,
    pub latency_total_ns: u128,
    pub latency_max_ns: u64,
    /// Jobs that ended without running to completion (aborted at their deadline).
    pub not_completed: u64,
    /// Packets whose job had not ended at the horizon.
    pub unfinished: u64,
}

impl PortResult {
    pub fn mean_latency_ns(&self) -> Option<f64> {
        (self.started > 0).then(|| self.latency_total_ns as f64 / self.started as f64)
    }
}

/// One subsystem's I/O over a run (a server, or the root outside servers).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct SubsystemIo {
    pub name: String,
    pub parent: String,
    pub depth: usize,
    pub packets_received: u64,
    pub bytes_received: u64,
    /// Where its tasks transmit, the bandwidth bound to it and its bucket's depth.
    pub bandwidth_bytes_per_s: Option<u64>,
    pub burst_bytes: Option<u64>,
    pub messages_sent: u64,
    pub bytes_sent: u64,
    /// Messages that waited for the bucket, and how long all and the longest did.
    pub messages_delayed: u64,
    pub transmit_delay_total_ns: u128,
    pub transmit_delay_max_ns: u64,
    /// Messages still waiting at the horizon, and their bytes.
    pub messages_queued: u64,
    pub bytes_queued: u64,
    /// Its own plus every subsystem's below it: what its parent reads.
    pub subtree_bytes_received: u64,
    pub subtree_bytes_sent: u64,
    /// Jobs of its event threads made eligible with no child-scheduler event.
    pub direct_activations: u64,
}

/// One message leaving the device.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Transmission {
    pub at: Nanos,
    /// The sending subsystem's index in [`IoResult::subsystems`].
    pub subsystem: usize,
    pub port: u16,
    pub bytes: u64,
}

/// The `[io]` section of a run's result.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct IoResult {
    pub arrivals: u64,
    pub received: u64,
    pub dropped_unbound: u64,
    pub dropped_ring_full: u64,
    pub bytes_received: u64,
    pub bytes_sent: u64,
    /// Bound ports in file order, then unbound ports that saw packets, ascending.
    pub ports: Vec<PortResult>,
    /// The servers in file order (or the root alone, outside servers).
    pub subsystems: Vec<SubsystemIo>,
    /// Every message sent, in order, up to the trace limit.
    pub transmissions: Vec<Transmission>,
    pub transmissions_left_out: u64,
}

/// A packet in an event thread's ring.
#[derive(Clone, Copy, Debug)]
struct Packet {
    /// Its port's index in the result's `ports`.
    port: usize,
    arrival: Nanos,
}

/// A message waiting for its subsystem's bucket.
#[derive(Clone, Copy, Debug)]
struct Message {
    ready: Nanos,
    port: u16,
    bytes: u64,
}

struct BucketState {
    spec: Bucket,
    tokens: u128,
    filled_at: Nanos,
    waiting: VecDeque<Message>,
    /// When the event that sends the head is due.
    wake_at: Option<Nanos>,
}

impl BucketState {
    fn new(spec: Bucket) -> Self {
        BucketState {
            spec,
            tokens: u128::from(spec.burst_bytes) * UNITS_PER_BYTE,
            filled_at: Nanos::ZERO,
            waiting: VecDeque::new(),
            wake_at: None,
        }
    }

    fn fill(&mut self, now: Nanos) {
        let added = u128::from(self.spec.rate_bytes_per_s) * u128::from((now - self.filled_at).0);
        self.tokens = (self.tokens + added).min(u128::from(self.spec.burst_bytes) * UNITS_PER_BYTE);
        self.filled_at = now;
    }

    /// When the head can leave, with the bucket filled to `now`.
    fn head_due(&self, now: Nanos) -> Option<Nanos> {
        let head = self.waiting.front()?;
        let need = u128::from(head.bytes) * UNITS_PER_BYTE;
        let missing = need.saturating_sub(self.tokens);
        let wait = missing.div_ceil(u128::from(self.spec.rate_bytes_per_s));
        Some(now + Nanos(u64::try_from(wait).unwrap_or(u64::MAX - now.0)))
    }
}

struct StreamState {
    rng: SimRng,
}

/// Event tags: streams count from 0, buckets from here.
const BUCKET_TAG: u64 = 1 << 32;

/// The I/O device and its subsystems, plugged into the engine.
pub struct IoSubsystem {
    spec: IoSpec,
    streams: Vec<StreamState>,
    /// Destination port → its index in `ports` (bound ones first).
    port_index: BTreeMap<u16, usize>,
    ports: Vec<PortResult>,
    /// Each task's subsystem (an index of `subsystems`).
    task_subsystem: Vec<usize>,
    /// Each bound port's event thread.
    port_task: Vec<Option<usize>>,
    /// Packets activated and not yet seen released, per task.
    activated: Vec<VecDeque<Packet>>,
    /// Each event thread's unfinished jobs and their packets, by job sequence number.
    in_ring: Vec<BTreeMap<u64, Packet>>,
    /// What each task sends when a job of it completes.
    sends: Vec<Vec<Transmit>>,
    subsystems: Vec<SubsystemIo>,
    /// Each subsystem's parent (`None` at the top).
    parents: Vec<Option<usize>>,
    buckets: Vec<Option<BucketState>>,
    result: IoResult,
    trace_limit: usize,
}

impl IoSubsystem {
    /// The I/O subsystem of `scenario`, if it declares `[io]`.
    pub fn new(scenario: &Scenario) -> Option<Self> {
        let spec = scenario.io.clone()?;
        let (task_subsystem, mut subsystems, parents, mut buckets) = match &scenario.hierarchy {
            Some(h) => {
                let depth = |mut j: usize| {
                    let mut d = 1;
                    while let Some(p) = h.servers[j].parent {
                        d += 1;
                        j = p;
                    }
                    d
                };
                let subsystems = h
                    .servers
                    .iter()
                    .enumerate()
                    .map(|(j, s)| SubsystemIo {
                        name: s.name.clone(),
                        parent: s.parent.map_or_else(|| "root".to_string(), |p| h.servers[p].name.clone()),
                        depth: depth(j),
                        ..SubsystemIo::default()
                    })
                    .collect();
                let buckets = spec.buckets.iter().map(|b| b.map(BucketState::new)).collect();
                (h.task_server.clone(), subsystems, h.servers.iter().map(|s| s.parent).collect(), buckets)
            }
            None => match scenario.scheduler.mc2_levels().filter(|l| !l.servers.is_empty()) {
                // MC²'s servers sit under the root beside its own tasks, which send at the
                // device's bandwidth: the servers first (file order, as their buckets), the root last.
                Some(levels) => {
                    let root = levels.servers.len();
                    let mut subsystems: Vec<SubsystemIo> = levels
                        .servers
                        .iter()
                        .map(|s| SubsystemIo { name: s.name.clone(), parent: "root".into(), depth: 1, ..SubsystemIo::default() })
                        .collect();
                    subsystems.push(SubsystemIo { name: "root".into(), parent: String::new(), ..SubsystemIo::default() });
                    let mut buckets: Vec<Option<BucketState>> = spec.buckets.iter().map(|b| b.map(BucketState::new)).collect();
                    buckets.push(spec.root_bucket.map(BucketState::new));
                    let mut parents = vec![Some(root); root];
                    parents.push(None);
                    (levels.task_server.iter().map(|s| s.unwrap_or(root)).collect(), subsystems, parents, buckets)
                }
                None => (
                    vec![0; scenario.tasks.len()],
                    vec![SubsystemIo { name: "root".into(), parent: String::new(), ..SubsystemIo::default() }],
                    vec![None],
                    vec![spec.root_bucket.map(BucketState::new)],
                ),
            },
        };
        for (s, b) in subsystems.iter_mut().zip(&mut buckets) {
            if let Some(b) = b {
                s.bandwidth_bytes_per_s = Some(b.spec.rate_bytes_per_s);
                s.burst_bytes = Some(b.spec.burst_bytes);
            }
        }
        let mut port_index = BTreeMap::new();
        let mut ports = Vec::new();
        let mut port_task = Vec::new();
        for b in &spec.ports {
            let sub = &subsystems[task_subsystem[b.task]];
            port_index.insert(b.port, ports.len());
            ports.push(PortResult {
                port: b.port,
                task: Some(scenario.tasks[b.task].name.clone()),
                subsystem: Some(sub.name.clone()),
                depth: sub.depth,
                ..PortResult::default()
            });
            port_task.push(Some(b.task));
        }
        let mut sends = vec![Vec::new(); scenario.tasks.len()];
        for t in &spec.transmits {
            sends[t.task].push(*t);
        }
        let streams = (0..spec.streams.len()).map(|i| StreamState { rng: sub_rng(scenario.seed, "io.stream", i as u64) }).collect();
        let n = scenario.tasks.len();
        Some(IoSubsystem {
            streams,
            port_index,
            ports,
            task_subsystem,
            port_task,
            activated: vec![VecDeque::new(); n],
            in_ring: vec![BTreeMap::new(); n],
            sends,
            subsystems,
            parents,
            buckets,
            result: IoResult::default(),
            trace_limit: MAX_TRACE_RECORDS,
            spec,
        })
    }

    /// The gap before stream `i`'s next arrival.
    fn gap(&mut self, i: usize) -> Nanos {
        match self.spec.streams[i].arrival {
            PacketArrival::Periodic { period } => period,
            PacketArrival::Poisson { rate_per_s } => {
                let unit: f64 = Exp1.sample(&mut self.streams[i].rng);
                Nanos((unit * 1e9 / rate_per_s).round().min(u64::MAX as f64 / 2.0) as u64)
            }
        }
    }

    /// Schedules stream `i`'s arrival at `at` unless the stream has stopped by then.
    fn schedule_arrival(&self, cx: &mut Context<'_>, i: usize, at: Nanos) {
        if self.spec.streams[i].stop.is_none_or(|stop| at < stop) {
            cx.schedule(at, i as u64);
        }
    }

    /// A packet of stream `i` arrives now.
    fn arrive(&mut self, cx: &mut Context<'_>, i: usize) {
        let now = cx.now();
        let next = now + self.gap(i);
        self.schedule_arrival(cx, i, next);
        let stream = &self.spec.streams[i];
        let (port, bytes) = (stream.port, stream.bytes);
        self.result.arrivals += 1;
        let at = *self.port_index.entry(port).or_insert_with(|| {
            self.ports.push(PortResult { port, ..PortResult::default() });
            self.port_task.push(None);
            self.ports.len() - 1
        });
        self.ports[at].arrivals += 1;
        let Some(task) = self.port_task[at] else {
            self.ports[at].dropped += 1;
            self.result.dropped_unbound += 1;
            return;
        };
        let queued = self.in_ring[task].len() + self.activated[task].len();
        if self.spec.ring_packets.is_some_and(|cap| queued as u64 >= cap) {
            self.ports[at].dropped += 1;
            self.result.dropped_ring_full += 1;
            return;
        }
        self.ports[at].received += 1;
        self.ports[at].bytes_received += bytes;
        self.result.received += 1;
        self.result.bytes_received += bytes;
        let sub = &mut self.subsystems[self.task_subsystem[task]];
        sub.packets_received += 1;
        sub.bytes_received += bytes;
        self.activated[task].push_back(Packet { port: at, arrival: now });
        cx.activate(task);
    }

    /// Sends what subsystem `s`'s bucket lets through now, and schedules the next send.
    fn drain(&mut self, cx: &mut Context<'_>, s: usize) {
        let now = cx.now();
        let b = self.buckets[s].as_mut().expect("a subsystem that transmits has a bucket");
        b.fill(now);
        while let Some(&m) = b.waiting.front() {
            let need = u128::from(m.bytes) * UNITS_PER_BYTE;
            if b.tokens < need {
                break;
            }
            b.tokens -= need;
            b.waiting.pop_front();
            let sub = &mut self.subsystems[s];
            let delay = (now - m.ready).0;
            sub.messages_sent += 1;
            sub.bytes_sent += m.bytes;
            if delay > 0 {
                sub.messages_delayed += 1;
            }
            sub.transmit_delay_total_ns += u128::from(delay);
            sub.transmit_delay_max_ns = sub.transmit_delay_max_ns.max(delay);
            self.result.bytes_sent += m.bytes;
            if self.result.transmissions.len() < self.trace_limit {
                self.result.transmissions.push(Transmission { at: now, subsystem: s, port: m.port, bytes: m.bytes });
            } else {
                self.result.transmissions_left_out += 1;
            }
        }
        let due = b.head_due(now);
        if let Some(due) = due.filter(|&d| b.wake_at != Some(d)) {
            b.wake_at = Some(due);
            cx.schedule(due, BUCKET_TAG + s as u64);
        }
    }
}

impl Subsystem for IoSubsystem {
    fn start(&mut self, cx: &mut Context<'_>) {
        for b in &self.spec.ports {
            cx.take_releases(b.task);
        }
        for i in 0..self.spec.streams.len() {
            let offset = self.spec.streams[i].offset;
            let first = match self.spec.streams[i].arrival {
                PacketArrival::Periodic { .. } => offset,
                PacketArrival::Poisson { .. } => offset + self.gap(i),
            };
            self.schedule_arrival(cx, i, first);
        }
    }

    fn on_release(&mut self, _cx: &mut Context<'_>, job: &JobInfo) -> bool {
        if let Some(p) = self.activated[job.task].pop_front() {
            self.in_ring[job.task].insert(job.seq, p);
        }
        false
    }

    fn on_end(&mut self, cx: &mut Context<'_>, job: &JobInfo, outcome: Outcome, _task_idle: bool) {
        if let Some(p) = self.in_ring[job.task].remove(&job.seq) {
            let port = &mut self.ports[p.port];
            if let Some(start) = job.start {
                let latency = (start - p.arrival).0;
                port.started += 1;
                port.latency_total_ns += u128::from(latency);
                port.latency_max_ns = port.latency_max_ns.max(latency);
            }
            if outcome != Outcome::Completed {
                port.not_completed += 1;
            }
        }
        if outcome != Outcome::Completed || self.sends[job.task].is_empty() {
            return;
        }
        let s = self.task_subsystem[job.task];
        let now = cx.now();
        for t in &self.sends[job.task] {
            let b = self.buckets[s].as_mut().expect("validated: a transmitting subsystem has a bucket");
            b.waiting.push_back(Message { ready: now, port: t.port, bytes: t.bytes });
        }
        self.drain(cx, s);
    }

    fn on_event(&mut self, cx: &mut Context<'_>, tag: u64) {
        if tag >= BUCKET_TAG {
            let s = (tag - BUCKET_TAG) as usize;
            let b = self.buckets[s].as_mut().expect("a bucket's event");
            if b.wake_at == Some(cx.now()) {
                b.wake_at = None;
                self.drain(cx, s);
            }
        } else {
            self.arrive(cx, tag as usize);
        }
    }

    fn set_trace_limit(&mut self, limit: usize) {
        self.trace_limit = limit;
    }

    fn finish(mut self: Box<Self>, _horizon: Nanos, result: &mut SimResult) {
        for (task, ring) in self.in_ring.iter().enumerate() {
            for p in ring.values().chain(&self.activated[task]) {
                self.ports[p.port].unfinished += 1;
            }
        }
        for (s, b) in self.buckets.iter().enumerate() {
            if let Some(b) = b {
                self.subsystems[s].messages_queued = b.waiting.len() as u64;
                self.subsystems[s].bytes_queued = b.waiting.iter().map(|m| m.bytes).sum();
            }
        }
        let servers: &[ServerSummary] = result.section::<Servers>().map_or(&[], |s| &s.0);
        for (s, summary) in self.subsystems.iter_mut().zip(servers) {
            s.direct_activations = summary.direct_activations;
        }
        // Children before parents: each adds its subtree to its parent's.
        for s in 0..self.subsystems.len() {
            self.subsystems[s].subtree_bytes_received = self.subsystems[s].bytes_received;
            self.subsystems[s].subtree_bytes_sent = self.subsystems[s].bytes_sent;
        }
        for s in subtree_order(&self.parents) {
            if let Some(p) = self.parents[s] {
                let (r, t) = (self.subsystems[s].subtree_bytes_received, self.subsystems[s].subtree_bytes_sent);
                self.subsystems[p].subtree_bytes_received += r;
                self.subsystems[p].subtree_bytes_sent += t;
            }
        }
        // Unbound ports in ascending order after the bound ones.
        let bound = self.spec.ports.len();
        self.ports[bound..].sort_by_key(|p| p.port);
        let mut out = std::mem::take(&mut self.result);
        out.ports = std::mem::take(&mut self.ports);
        out.subsystems = std::mem::take(&mut self.subsystems);
        result.set_section(out);
    }

    fn name(&self) -> &'static str {
        "io"
    }
}

/// Every node with its descendants before it.
fn subtree_order(parents: &[Option<usize>]) -> Vec<usize> {
    let depth = |mut j: usize| {
        let mut d = 0;
        while let Some(p) = parents[j] {
            d += 1;
            j = p;
        }
        d
    };
    let mut order: Vec<usize> = (0..parents.len()).collect();
    order.sort_by_key(|&j| (std::cmp::Reverse(depth(j)), j));
    order
}

/// The I/O device's place in the summary: last of the sections.
impl Section for IoResult {
    const ORDER: u32 = 500;

    fn write_json(&self, _run: &SimResult, out: &mut JsonFields) {
        out.field("io", &json_io(self));
    }
}

impl SimResult {
    /// The I/O device's packets and transmissions, when the scenario declares `[io]`.
    pub fn io(&self) -> Option<&IoResult> {
        self.section()
    }
}

/// The I/O device over the run: packets by port, bytes by subsystem.
#[derive(Serialize)]
struct JsonIo<'a> {
    arrivals: u64,
    received: u64,
    dropped_unbound: u64,
    dropped_ring_full: u64,
    bytes_received: u64,
    bytes_sent: u64,
    ports: Vec<JsonIoPort<'a>>,
    subsystems: Vec<JsonIoSubsystem<'a>>,
}

/// One destination port (`null` task: unbound).
#[derive(Serialize)]
struct JsonIoPort<'a> {
    port: u16,
    task: Option<&'a str>,
    subsystem: Option<&'a str>,
    depth: usize,
    arrivals: u64,
    received: u64,
    dropped: u64,
    bytes_received: u64,
    mean_latency_us: Option<f64>,
    max_latency_us: Option<f64>,
    unfinished: u64,
}

/// One subsystem: what it received and sent, its bound bandwidth, and its subtree's usage.
#[derive(Serialize)]
struct JsonIoSubsystem<'a> {
    name: &'a str,
    parent: &'a str,
    depth: usize,
    packets_received: u64,
    bytes_received: u64,
    direct_activations: u64,
    bandwidth_bytes_per_s: Option<u64>,
    messages_sent: u64,
    bytes_sent: u64,
    messages_delayed: u64,
    mean_transmit_delay_us: Option<f64>,
    max_transmit_delay_us: f64,
    messages_queued: u64,
    subtree_bytes_received: u64,
    subtree_bytes_sent: u64,
}

fn json_io(io: &IoResult) -> JsonIo<'_> {
    let us = |ns: f64| ns / 1e3;
    JsonIo {
        arrivals: io.arrivals,
        received: io.received,
        dropped_unbound: io.dropped_unbound,
        dropped_ring_full: io.dropped_ring_full,
        bytes_received: io.bytes_received,
        bytes_sent: io.bytes_sent,
        ports: io
            .ports
            .iter()
            .map(|p| JsonIoPort {
                port: p.port,
                task: p.task.as_deref(),
                subsystem: p.subsystem.as_deref(),
                depth: p.depth,
                arrivals: p.arrivals,
                received: p.received,
                dropped: p.dropped,
                bytes_received: p.bytes_received,
                mean_latency_us: p.mean_latency_ns().map(us),
                max_latency_us: (p.started > 0).then(|| us(p.latency_max_ns as f64)),
                unfinished: p.unfinished,
            })
            .collect(),
        subsystems: io
            .subsystems
            .iter()
            .map(|s| JsonIoSubsystem {
                name: &s.name,
                parent: &s.parent,
                depth: s.depth,
                packets_received: s.packets_received,
                bytes_received: s.bytes_received,
                direct_activations: s.direct_activations,
                bandwidth_bytes_per_s: s.bandwidth_bytes_per_s,
                messages_sent: s.messages_sent,
                bytes_sent: s.bytes_sent,
                messages_delayed: s.messages_delayed,
                mean_transmit_delay_us: (s.messages_sent > 0).then(|| us(s.transmit_delay_total_ns as f64 / s.messages_sent as f64)),
                max_transmit_delay_us: us(s.transmit_delay_max_ns as f64),
                messages_queued: s.messages_queued,
                subtree_bytes_received: s.subtree_bytes_received,
                subtree_bytes_sent: s.subtree_bytes_sent,
            })
            .collect(),
    }
}
