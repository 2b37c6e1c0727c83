//! `[io]`: HiRes's network device (Sec. III-D) — packet streams by destination port, ports
//! bound to event threads (`[[io.port]]`), and what tasks transmit (`[[io.transmit]]`) from
//! ports bound to their own subsystem, rate-limited by the bandwidth bound to it
//! (`[[scheduler.server]] reserve.io_bytes_per_s`).

use super::error::{Ctx, ScenarioError};
use super::raw::RawScenario;
use super::server_reservations::ServerReservation;
use crate::model::io::{Bucket, IoSpec, PacketArrival, PacketStream, PortBinding, Transmit};
use crate::model::scheduler::{Hierarchy, Mc2Levels};
use crate::model::task::{OverrunPolicy, TaskSpec};
use schemars::JsonSchema;
use serde::Deserialize;
use std::collections::BTreeMap;

/// `[io]`.
#[derive(Deserialize, JsonSchema, Debug)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "Io")]
pub(in crate::scenario) struct RawIo {
    /// The device's transmit bandwidth: what the servers' `reserve.io_bytes_per_s` share.
    pub(super) bandwidth_bytes_per_s: Option<f64>,
    /// Most packets one event thread's ring holds; more are dropped.
    pub(super) ring_packets: Option<i64>,
    /// `[[io.stream]]`: packet streams arriving at the device.
    #[serde(default)]
    pub(super) stream: Vec<RawStream>,
    /// `[[io.port]]`: ports bound to event threads.
    #[serde(default)]
    pub(super) port: Vec<RawPort>,
    /// `[[io.transmit]]`: messages tasks send when their jobs complete.
    #[serde(default)]
    pub(super) transmit: Vec<RawTransmit>,
}

/// `[[io.stream]]`: packets of `bytes` to `port`, every `period_ms` or at `rate_per_s`
/// (Poisson).
#[derive(Deserialize, JsonSchema, Debug)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "IoStream")]
pub(in crate::scenario) struct RawStream {
    /// Destination port of the packets.
    pub(super) port: i64,
    /// Size of each packet, bytes.
    pub(super) bytes: i64,
    /// Time between packets of a periodic stream, ms.
    pub(super) period_ms: Option<f64>,
    /// Mean packets per second of a Poisson stream, drawn from the run's seed.
    pub(super) rate_per_s: Option<f64>,
    /// Time of the first packet, ms; default 0.
    pub(super) offset_ms: Option<f64>,
    /// No packet at or after this time, ms.
    pub(super) stop_ms: Option<f64>,
}

/// `[[io.port]]`: `port` bound to event thread `task`.
#[derive(Deserialize, JsonSchema, Debug)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "IoPort")]
pub(in crate::scenario) struct RawPort {
    /// The port number.
    pub(super) port: i64,
    /// The event thread: a task attached to a server, released once per packet.
    pub(super) task: String,
}

/// `[[io.transmit]]`: each completed job of `task` sends `bytes` from source `port`.
#[derive(Deserialize, JsonSchema, Debug)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "IoTransmit")]
pub(in crate::scenario) struct RawTransmit {
    /// The task whose every completed job sends a message.
    pub(super) task: String,
    /// Source port, bound to the task's own server.
    pub(super) port: i64,
    /// Size of each message, bytes.
    pub(super) bytes: i64,
}

/// `[io] bandwidth_bytes_per_s`, the root's I/O capacity (checked before the reservations).
pub(super) fn bandwidth(cx: &Ctx, raw: &RawScenario) -> Result<Option<u64>, ScenarioError> {
    let Some(v) = raw.io.as_ref().and_then(|io| io.bandwidth_bytes_per_s) else { return Ok(None) };
    let key = "io.bandwidth_bytes_per_s";
    if !v.is_finite() {
        return Err(cx.err(key, "must be a finite number"));
    }
    if v < 0.0 {
        return Err(cx.err(key, format!("must not be negative (got {v})")));
    }
    Ok(Some(v.round() as u64))
}

fn port_number(cx: &Ctx, key: &str, port: i64) -> Result<u16, ScenarioError> {
    u16::try_from(port).map_err(|_| cx.err(key, format!("must be a port from 0 to 65535 (got {port})")))
}

fn byte_count(cx: &Ctx, key: &str, bytes: i64) -> Result<u64, ScenarioError> {
    match u64::try_from(bytes) {
        Ok(b) if b > 0 => Ok(b),
        _ => Err(cx.err(key, format!("must be at least 1 byte (got {bytes})"))),
    }
}

fn task_named(cx: &Ctx, key: &str, tasks: &[TaskSpec], name: &str) -> Result<usize, ScenarioError> {
    tasks.iter().position(|t| t.name == name).ok_or_else(|| cx.err(key, format!("no task named {name:?}")))
}

/// The subsystems I/O is bound to: each server (by file index) and the server each task is
/// in, `None` for a task of the root itself (outside servers, or beside MC²'s servers).
pub(super) struct IoServers<'a> {
    pub(super) names: Vec<&'a str>,
    pub(super) task_server: Vec<Option<usize>>,
}

impl<'a> IoServers<'a> {
    /// A HiRes server tree's: every task is in a leaf server.
    pub(super) fn of_hierarchy(h: &'a Hierarchy) -> Self {
        IoServers {
            names: h.servers.iter().map(|s| s.name.as_str()).collect(),
            task_server: h.task_server.iter().map(|&j| Some(j)).collect(),
        }
    }

    /// MC²'s servers under its levels: tasks without one are the root's.
    pub(super) fn of_mc2(levels: &'a Mc2Levels) -> Self {
        IoServers { names: levels.servers.iter().map(|s| s.name.as_str()).collect(), task_server: levels.task_server.clone() }
    }
}

/// The validated `[io]` section, with each transmitting subsystem's bucket.
pub(super) fn validate_io(
    cx: &Ctx,
    raw: &RawScenario,
    tasks: &[TaskSpec],
    servers: Option<&IoServers<'_>>,
    reservations: &[ServerReservation],
    bandwidth_bytes_per_s: Option<u64>,
) -> Result<Option<IoSpec>, ScenarioError> {
    let Some(io) = &raw.io else { return Ok(None) };
    let ring_packets = match io.ring_packets {
        None => None,
        Some(n) if n >= 1 => Some(n as u64),
        Some(n) => return Err(cx.err("io.ring_packets", format!("must be at least 1 (got {n})"))),
    };
    let mut streams = Vec::with_capacity(io.stream.len());
    for (i, s) in io.stream.iter().enumerate() {
        let k = |f: &str| format!("io.stream[{i}].{f}");
        let arrival = match (s.period_ms, s.rate_per_s) {
            (Some(ms), None) => PacketArrival::Periodic { period: cx.positive(&k("period_ms"), ms)? },
            (None, Some(rate)) if rate.is_finite() && rate > 0.0 => PacketArrival::Poisson { rate_per_s: rate },
            (None, Some(rate)) => return Err(cx.err(k("rate_per_s"), format!("must be a finite number above 0 (got {rate})"))),
            (Some(_), Some(_)) => return Err(cx.err(k("rate_per_s"), "give period_ms (periodic) or rate_per_s (Poisson), not both")),
            (None, None) => return Err(cx.err(k("period_ms"), "missing: give period_ms (periodic) or rate_per_s (Poisson)")),
        };
        let offset = cx.time(&k("offset_ms"), s.offset_ms.unwrap_or(0.0))?;
        let stop = s.stop_ms.map(|ms| cx.time(&k("stop_ms"), ms)).transpose()?;
        streams.push(PacketStream {
            port: port_number(cx, &k("port"), s.port)?,
            bytes: byte_count(cx, &k("bytes"), s.bytes)?,
            arrival,
            offset,
            stop,
        });
    }
    let mut ports: Vec<PortBinding> = Vec::with_capacity(io.port.len());
    let mut bound_at = BTreeMap::new();
    for (i, p) in io.port.iter().enumerate() {
        let k = |f: &str| format!("io.port[{i}].{f}");
        let port = port_number(cx, &k("port"), p.port)?;
        if let Some(prev) = bound_at.insert(port, i) {
            return Err(cx.err(k("port"), format!("port {port} is bound twice (also io.port[{prev}]): a packet goes to one event thread")));
        }
        let task = task_named(cx, &k("task"), tasks, &p.task)?;
        if tasks[task].overrun == OverrunPolicy::Skip {
            return Err(cx.err(
                k("task"),
                format!("event thread {:?} has overrun = \"skip\", which would drop packets unseen; bound its ring with [io] ring_packets instead", p.task),
            ));
        }
        ports.push(PortBinding { port, task });
    }
    let subsystem_of = |task: usize| servers.and_then(|v| v.task_server[task]);
    let subsystem_name = |s: Option<usize>| match (s, servers) {
        (Some(j), Some(v)) => format!("server {:?}", v.names[j]),
        _ => "the root".to_string(),
    };
    let mut transmits = Vec::with_capacity(io.transmit.len());
    // Per subsystem (server index, or `None` for the root): the largest message and who sends it.
    let mut largest: BTreeMap<Option<usize>, (u64, usize)> = BTreeMap::new();
    for (i, t) in io.transmit.iter().enumerate() {
        let k = |f: &str| format!("io.transmit[{i}].{f}");
        let task = task_named(cx, &k("task"), tasks, &t.task)?;
        let port = port_number(cx, &k("port"), t.port)?;
        let bytes = byte_count(cx, &k("bytes"), t.bytes)?;
        let mine = subsystem_of(task);
        match ports.iter().find(|b| b.port == port) {
            None => {
                return Err(cx.err(
                    k("port"),
                    format!("source port {port} is not bound: bind it with [[io.port]] to an event thread of {}", subsystem_name(mine)),
                ))
            }
            Some(b) if subsystem_of(b.task) != mine => {
                return Err(cx.err(
                    k("port"),
                    format!(
                        "source port {port} is bound to {} (task {:?}), not to task {:?}'s {}: a subsystem sends only from its own ports",
                        subsystem_name(subsystem_of(b.task)),
                        tasks[b.task].name,
                        t.task,
                        subsystem_name(mine)
                    ),
                ))
            }
            Some(_) => {}
        }
        let has_bandwidth = match mine {
            Some(j) => reservations.get(j).and_then(|r| r.io_bytes_per_s).is_some(),
            None => bandwidth_bytes_per_s.is_some(),
        };
        if !has_bandwidth {
            let fix = match (mine, servers) {
                (Some(j), Some(v)) => format!("give scheduler.server[{j}] (\"{}\") reserve.io_bytes_per_s", v.names[j]),
                _ => "give [io] bandwidth_bytes_per_s".to_string(),
            };
            return Err(
                cx.err(k("task"), format!("{} has no I/O bandwidth bound to rate-limit task {:?} by: {fix}", subsystem_name(mine), t.task))
            );
        }
        let entry = largest.entry(mine).or_insert((bytes, task));
        if bytes > entry.0 {
            *entry = (bytes, task);
        }
        transmits.push(Transmit { task, port, bytes });
    }
    let bucket = |rate: u64, burst: Option<u64>, key: String, s: Option<usize>| -> Result<Option<Bucket>, ScenarioError> {
        let Some(&(bytes, task)) = largest.get(&s) else { return Ok(None) };
        if rate == 0 {
            return Err(cx.err(key, format!("must be above 0: task {:?} sends through it", tasks[task].name)));
        }
        let burst_bytes = burst.unwrap_or(bytes);
        if burst_bytes < bytes {
            return Err(cx.err(
                key.replace("io_bytes_per_s", "io_burst_bytes"),
                format!("must hold the largest message sent through it ({bytes} bytes from task {:?})", tasks[task].name),
            ));
        }
        Ok(Some(Bucket { rate_bytes_per_s: rate, burst_bytes }))
    };
    let mut buckets = Vec::new();
    if let Some(v) = servers {
        for j in 0..v.names.len() {
            let r = reservations.get(j);
            let rate = r.and_then(|r| r.io_bytes_per_s).unwrap_or(0);
            buckets.push(bucket(rate, r.and_then(|r| r.io_burst_bytes), format!("scheduler.server[{j}].reserve.io_bytes_per_s"), Some(j))?);
        }
    }
    // The root's own tasks send at the device's bandwidth (none of a HiRes tree's are the root's).
    let root_bucket = bucket(bandwidth_bytes_per_s.unwrap_or(0), None, "io.bandwidth_bytes_per_s".into(), None)?;
    Ok(Some(IoSpec { bandwidth_bytes_per_s, ring_packets, streams, ports, transmits, buckets, root_bucket }))
}
