//! Prometheus text-format metrics (exposition format 0.0.4), served on 127.0.0.1 or written
//! to a file.
//!
//! The control loop renders a snapshot now and then ([`render`]) and publishes it; a server
//! thread answers every HTTP request with the latest snapshot, so a slow scraper never
//! touches the loop.

use crate::clock::SharedClock;
use crate::error::{Error, Result};
use crate::platform::{LinuxPlatform, LoopStats};
use std::fmt::Write as _;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Renders the platform's and loop's figures.
pub fn render(platform: &LinuxPlatform, loop_stats: &LoopStats) -> String {
    let mut out = String::new();
    let mut metric = |name: &str, kind: &str, help: &str, samples: &[(String, f64)]| {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
        for (labels, value) in samples {
            let _ = writeln!(out, "{name}{labels} {value}");
        }
    };
    let single = |v: f64| vec![(String::new(), v)];
    metric("critmem_ticks_total", "counter", "Control loop ticks.", &single(loop_stats.ticks as f64));
    metric(
        "critmem_tick_cost_seconds_sum",
        "counter",
        "Time spent in observe + tick + apply.",
        &single(loop_stats.cost_sum_ns as f64 / 1e9),
    );
    metric("critmem_tick_cost_seconds_max", "gauge", "Longest tick.", &single(loop_stats.cost_max_ns as f64 / 1e9));
    metric(
        "critmem_tick_cpu_seconds_sum",
        "counter",
        "CPU time the control loop's thread used in observe + tick + apply.",
        &single(loop_stats.cpu_sum_ns as f64 / 1e9),
    );
    metric("critmem_early_wakes_total", "counter", "Ticks run early on a PSI trigger.", &single(loop_stats.early_wakes as f64));
    metric(
        "critmem_idle_rests_total",
        "counter",
        "Quiet ticks after which the loop rested up to its idle interval.",
        &single(loop_stats.idle_rests as f64),
    );
    metric("critmem_job_wakes_total", "counter", "Rests ended by a job report.", &single(loop_stats.job_wakes as f64));
    metric("critmem_overruns_total", "counter", "Ticks that started over one interval late.", &single(loop_stats.overruns as f64));
    let s = platform.stats();
    metric(
        "critmem_writes_total",
        "counter",
        "Cgroup writes by outcome.",
        &[
            ("{outcome=\"submitted\"}".into(), s.writes_submitted as f64),
            ("{outcome=\"ok\"}".into(), s.writes_ok as f64),
            ("{outcome=\"failed\"}".into(), s.writes_failed as f64),
            ("{outcome=\"dropped\"}".into(), s.writes_dropped as f64),
            ("{outcome=\"dry_run\"}".into(), s.dry_run_writes as f64),
        ],
    );
    metric(
        "critmem_write_cpu_seconds_sum",
        "counter",
        "CPU time the writer threads used in cgroup writes: mostly the kernel's reclaim down to lowered limits.",
        &single(s.write_cpu_ns as f64 / 1e9),
    );
    metric(
        "critmem_clamps_total",
        "counter",
        "Limits the platform changed from what the controller asked: raised to a floor, the unreclaimable memory or an OOM hold, lowered to a v1 memory+swap limit.",
        &[
            ("{to=\"floor\"}".into(), s.clamped_to_floor as f64),
            ("{to=\"unreclaimable\"}".into(), s.clamped_to_unreclaimable as f64),
            ("{to=\"oom_hold\"}".into(), s.clamped_to_oom_hold as f64),
            ("{to=\"memsw_limit\"}".into(), s.clamped_to_combined_limit as f64),
        ],
    );
    metric(
        "critmem_oom_rescues_total",
        "counter",
        "Limits raised at once because a group was out of memory at its limit.",
        &single(s.oom_rescues as f64),
    );
    metric(
        "critmem_oom_guard_releases_total",
        "counter",
        "OOM killers switched back on for groups out of memory at a memory+swap limit critmem does not manage.",
        &single(s.oom_guard_releases as f64),
    );
    metric(
        "critmem_oom_wakeups_total",
        "counter",
        "Limits raised by one page to wake tasks (v1) left waiting far below their group's limit.",
        &single(s.oom_wakeups as f64),
    );
    metric(
        "critmem_oom_notifications_total",
        "counter",
        "Kernel notifications (v1) that a task of a managed group started waiting at its limit.",
        &single(s.oom_notifications as f64),
    );
    metric(
        "critmem_reclaims_total",
        "counter",
        "Proactive reclaims the controller asked for: asked of the kernel (v2 memory.reclaim), ended short of the bytes asked, or not applied on a backend without proactive reclaim (v1).",
        &[
            ("{outcome=\"requested\"}".into(), s.reclaims_requested as f64),
            ("{outcome=\"short\"}".into(), s.reclaims_short as f64),
            ("{outcome=\"unsupported\"}".into(), s.reclaim_unsupported as f64),
        ],
    );
    metric(
        "critmem_cpu_limits_unsupported_total",
        "counter",
        "CPU limits the controller asked for on a group without the CPU controller's files, not applied.",
        &single(s.cpu_limits_unsupported as f64),
    );
    if let Some(server) = platform.job_server() {
        let p = server.stats();
        metric(
            "critmem_job_messages_total",
            "counter",
            "Job socket messages by outcome.",
            &[
                ("{outcome=\"accepted\"}".into(), p.accepted_messages as f64),
                ("{outcome=\"malformed\"}".into(), p.malformed_messages as f64),
                ("{outcome=\"refused\"}".into(), p.refused as f64),
            ],
        );
    }
    let mut usage = Vec::new();
    let mut limit = Vec::new();
    let mut jobs = Vec::new();
    let (mut cpu_seconds, mut cpu_limit, mut io_limit) = (Vec::new(), Vec::new(), Vec::new());
    for (id, spec) in platform.group_specs().enumerate() {
        let label = format!("{{group=\"{}\"}}", escape(&spec.name));
        let (usage_bytes, knobs) = platform.last_seen(id);
        usage.push((label.clone(), usage_bytes as f64));
        if let Some(max) = knobs.max_bytes {
            limit.push((label.clone(), max as f64));
        }
        let (cpu_usage_us, bandwidth) = platform.last_bandwidth(id);
        cpu_seconds.push((label.clone(), cpu_usage_us as f64 / 1e6));
        if let Some(millicpus) = bandwidth.cpu_millicpus {
            cpu_limit.push((label.clone(), millicpus as f64 / 1000.0));
        }
        for (direction, bytes_per_s) in [("read", bandwidth.io_read_bytes_per_s), ("write", bandwidth.io_write_bytes_per_s)] {
            if let Some(bytes_per_s) = bytes_per_s {
                io_limit.push((format!("{{group=\"{}\",direction=\"{direction}\"}}", escape(&spec.name)), bytes_per_s as f64));
            }
        }
        let c = platform.job_counts(id);
        for (event, n) in [
            ("released", c.released),
            ("completed", c.completed),
            ("dropped", c.dropped),
            ("deadline_hit", c.deadline_hits),
            ("deadline_miss", c.completed_late),
        ] {
            jobs.push((format!("{{group=\"{}\",event=\"{event}\"}}", escape(&spec.name)), n as f64));
        }
    }
    metric("critmem_group_usage_bytes", "gauge", "Memory charged to the group, as last read (at least every 20 control ticks).", &usage);
    metric("critmem_group_limit_bytes", "gauge", "Hard limit of the group (absent: none).", &limit);
    metric("critmem_group_jobs_total", "counter", "Jobs reported by the group's processes.", &jobs);
    metric(
        "critmem_group_cpu_seconds_total",
        "counter",
        "CPU time the group's processes used, as last read (at least every 20 control ticks).",
        &cpu_seconds,
    );
    metric("critmem_group_cpu_limit_cpus", "gauge", "CPU bandwidth limit of the group, in CPUs (absent: none).", &cpu_limit);
    metric(
        "critmem_group_io_limit_bytes_per_second",
        "gauge",
        "I/O bandwidth limit of the group on the swap disk, by direction (absent: none).",
        &io_limit,
    );
    out
}

fn escape(label: &str) -> String {
    label.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

/// Where metrics go.
pub enum MetricsSink {
    /// Served over HTTP from a background thread.
    Http { snapshot: Arc<Mutex<String>>, stop: Arc<AtomicBool>, addr: SocketAddr },
    /// Rewritten (atomically, via rename) on every publish.
    File(PathBuf),
}

impl MetricsSink {
    /// Serves on `addr`, which must be a loopback address (metrics are for the local scraper).
    pub fn serve(addr: SocketAddr) -> Result<Self> {
        if !addr.ip().is_loopback() {
            return Err(Error::parse("metrics address", addr.to_string(), "must be on 127.0.0.1 (or ::1)"));
        }
        let listener = TcpListener::bind(addr).map_err(|e| Error::io("bind metrics address", Path::new(&addr.to_string()), e))?;
        let addr = listener.local_addr().map_err(|e| Error::io("bind metrics address", Path::new(&addr.to_string()), e))?;
        listener.set_nonblocking(true).map_err(|e| Error::io("set non-blocking", Path::new(&addr.to_string()), e))?;
        let snapshot = Arc::new(Mutex::new(String::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (snap, halt) = (Arc::clone(&snapshot), Arc::clone(&stop));
        std::thread::Builder::new()
            .name("critmem-metrics".into())
            .spawn(move || serve_loop(&listener, &snap, &halt))
            .map_err(|e| Error::io("spawn metrics thread", Path::new("metrics"), e))?;
        Ok(MetricsSink::Http { snapshot, stop, addr })
    }

    pub fn publish(&self, text: String) -> Result<()> {
        match self {
            MetricsSink::Http { snapshot, .. } => {
                *snapshot.lock().unwrap_or_else(|p| p.into_inner()) = text;
                Ok(())
            }
            MetricsSink::File(path) => {
                let tmp = path.with_extension("tmp");
                std::fs::write(&tmp, text).map_err(|e| Error::io("write metrics", &tmp, e))?;
                std::fs::rename(&tmp, path).map_err(|e| Error::io("rename metrics", path, e))
            }
        }
    }
}

impl Drop for MetricsSink {
    fn drop(&mut self) {
        if let MetricsSink::Http { stop, .. } = self {
            stop.store(true, Ordering::Relaxed);
        }
    }
}

/// Answers each request with the snapshot; polls for connections so it notices `stop`.
fn serve_loop(listener: &TcpListener, snapshot: &Mutex<String>, stop: &AtomicBool) {
    while !stop.load(Ordering::Relaxed) {
        match listener.accept() {
            Ok((mut stream, _)) => {
                let _ = stream.set_read_timeout(Some(Duration::from_millis(200)));
                let _ = stream.set_nonblocking(false);
                let mut request = [0u8; 1024];
                let _ = stream.read(&mut request);
                let body = snapshot.lock().unwrap_or_else(|p| p.into_inner()).clone();
                let _ = write!(
                    stream,
                    "HTTP/1.0 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\n\r\n{body}",
                    body.len()
                );
            }
            Err(_) => std::thread::sleep(Duration::from_millis(50)),
        }
    }
}

/// Renders and publishes at most every `period_ns` of `clock` (rendering costs more than a
/// tick should).
pub struct Publisher {
    pub sink: MetricsSink,
    period_ns: u64,
    clock: SharedClock,
    last_ns: Option<u64>,
}

impl Publisher {
    pub fn new(sink: MetricsSink, period_ns: u64, clock: SharedClock) -> Self {
        Publisher { sink, period_ns, clock, last_ns: None }
    }

    pub fn maybe_publish(&mut self, platform: &LinuxPlatform, stats: &LoopStats) {
        let now_ns = self.clock.now_ns();
        if self.last_ns.is_some_and(|t| now_ns.saturating_sub(t) < self.period_ns) {
            return;
        }
        self.last_ns = Some(now_ns);
        if let Err(e) = self.sink.publish(render(platform, stats)) {
            tracing::warn!(error = %e, "cannot publish metrics");
        }
    }
}
