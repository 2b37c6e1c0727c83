//! Periodic soft real-time worker: each job touches part of its working set (verifying every
//! page's pattern), computes for a fixed time, and reports release and completion on the job
//! socket. Exits 0 on SIGINT/SIGTERM (within about a millisecond, abandoning the job under way:
//! released, not completed, its deadline in the summary) or after --duration-s, 3 on a checksum
//! mismatch, 2 on bad arguments; prints a JSON summary ([`SrtWorkerSummary`]) on stdout at exit.

use clap::Parser;
use critmem_linux::agent::shutdown_signals;
use critmem_linux::client::JobClient;
use critmem_linux::clock::monotonic_ns;
use critmem_linux::protocol::JobOp;
use critmem_linux::workload::{busy_ns, signalled, wait_signal, Pattern, Region, SrtWorkerSummary, Walker, PAGE_BYTES};
use std::time::Duration;

#[derive(Parser, Debug)]
#[command(name = "critmem-srt-worker", about = "Periodic soft real-time worker for critmem")]
struct Args {
    /// Job socket of the agent; jobs are not reported without it.
    #[arg(long)]
    socket: Option<std::path::PathBuf>,
    #[arg(long, default_value_t = 20)]
    period_ms: u64,
    /// Relative deadline; the period if absent.
    #[arg(long)]
    deadline_ms: Option<u64>,
    /// Busy compute per job, after the memory accesses.
    #[arg(long, default_value_t = 2000)]
    compute_us: u64,
    #[arg(long, default_value_t = 64)]
    wss_mib: u64,
    /// Memory allocated (and checksummed) at start beside the working set but never touched by
    /// jobs: initialisation data a real task keeps, which a controller may push to swap. It is
    /// verified once more at exit.
    #[arg(long, default_value_t = 0)]
    cold_mib: u64,
    /// Pages touched (and verified) per job; the whole working set if absent.
    #[arg(long)]
    pages_per_job: Option<usize>,
    #[arg(long, value_enum, default_value_t = Pattern::Sequential)]
    pattern: Pattern,
    /// Phase changes, `AT_S:WSS_MIB:COMPUTE_US` (from AT_S seconds on, use this working set
    /// and compute); repeatable.
    #[arg(long = "phase", value_parser = parse_phase)]
    phases: Vec<Phase>,
    /// Stop after this long; runs until a signal if absent.
    #[arg(long, value_parser = critmem_linux::parse_seconds)]
    duration_s: Option<Duration>,
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

#[derive(Clone, Copy, Debug)]
struct Phase {
    at_ns: u64,
    wss_bytes: u64,
    compute_ns: u64,
}

fn parse_phase(text: &str) -> Result<Phase, String> {
    let parts: Vec<&str> = text.split(':').collect();
    let [at, wss, compute] = parts.as_slice() else { return Err("expected AT_S:WSS_MIB:COMPUTE_US".into()) };
    let at_s: f64 = at.parse().map_err(|_| format!("bad AT_S {at:?}"))?;
    let wss: u64 = wss.parse().map_err(|_| format!("bad WSS_MIB {wss:?}"))?;
    let compute: u64 = compute.parse().map_err(|_| format!("bad COMPUTE_US {compute:?}"))?;
    if at_s.is_nan() || at_s < 0.0 {
        return Err(format!("bad AT_S {at:?}: must be a number of seconds, 0 or more"));
    }
    let wss_bytes = wss.checked_mul(1 << 20).ok_or_else(|| format!("WSS_MIB {wss} is too large"))?;
    let compute_ns = compute.checked_mul(1000).ok_or_else(|| format!("COMPUTE_US {compute} is too large"))?;
    Ok(Phase { at_ns: (at_s * 1e9) as u64, wss_bytes, compute_ns })
}

fn main() {
    let args: Args = critmem_linux::parse_args();
    let signals = match shutdown_signals() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("critmem-srt-worker: {e}");
            std::process::exit(2);
        }
    };
    // Values whose nanoseconds or bytes do not fit 64 bits are refused, not wrapped around.
    let too_large = |what: &str, value: u64| -> ! {
        eprintln!("critmem-srt-worker: {what} {value} is too large");
        std::process::exit(2);
    };
    let period_ns = args.period_ms.max(1).checked_mul(1_000_000).unwrap_or_else(|| too_large("--period-ms", args.period_ms));
    let deadline_ns = args
        .deadline_ms
        .map_or(Some(period_ns), |d| d.checked_mul(1_000_000))
        .unwrap_or_else(|| too_large("--deadline-ms", args.deadline_ms.unwrap_or(0)));
    let wss_bytes = args.wss_mib.checked_mul(1 << 20).unwrap_or_else(|| too_large("--wss-mib", args.wss_mib));
    let cold_bytes = args.cold_mib.checked_mul(1 << 20).unwrap_or_else(|| too_large("--cold-mib", args.cold_mib));
    let compute_ns = args.compute_us.checked_mul(1000).unwrap_or_else(|| too_large("--compute-us", args.compute_us));
    let base = Phase { at_ns: 0, wss_bytes, compute_ns };
    let mut phases = vec![base];
    phases.extend(args.phases.iter().copied());
    phases.sort_by_key(|p| p.at_ns);
    let hot_bytes = phases.iter().map(|p| p.wss_bytes).max().unwrap_or(0) as usize;
    let hot_pages = hot_bytes.div_ceil(PAGE_BYTES).max(1);
    // The cold pages sit after the hot ones; jobs address only the first `active` pages.
    let region = (hot_pages as u64)
        .checked_mul(PAGE_BYTES as u64)
        .and_then(|hot| hot.checked_add(cold_bytes))
        .ok_or_else(|| "too large".to_owned())
        .and_then(|bytes| Region::try_new(bytes, args.seed))
        .unwrap_or_else(|e| {
            eprintln!("critmem-srt-worker: working set (--wss-mib, --phase) and --cold-mib: {e}");
            std::process::exit(2);
        });
    let mut walker = Walker::new(args.pattern, args.seed);
    let mut client = args.socket.clone().map(JobClient::new);
    let mut summary = SrtWorkerSummary { worker: "srt".into(), ..SrtWorkerSummary::default() };
    let start_ns = monotonic_ns();
    let end_ns = args.duration_s.map(|d| start_ns.saturating_add(d.as_nanos() as u64));
    let mut job = 0u64;
    let mut checksum_ok = true;
    'jobs: loop {
        let release_ns = start_ns.saturating_add(job.saturating_mul(period_ns));
        // Until the release, or the end of the run if that comes first.
        let wake_ns = end_ns.map_or(release_ns, |e| e.min(release_ns));
        let now = monotonic_ns();
        if wake_ns > now && wait_signal(&signals, Duration::from_nanos(wake_ns - now)) {
            break;
        }
        if end_ns.is_some_and(|e| monotonic_ns() >= e) || signalled(&signals) {
            break;
        }
        let elapsed_ns = release_ns - start_ns;
        let phase = phases.iter().rev().find(|p| p.at_ns <= elapsed_ns).copied().unwrap_or(base);
        let active = ((phase.wss_bytes as usize).div_ceil(PAGE_BYTES)).clamp(1, hot_pages);
        let touches = args.pages_per_job.unwrap_or(active);
        let absolute_deadline_ns = release_ns.saturating_add(deadline_ns);
        if let Some(c) = client.as_mut() {
            c.send(JobOp::Release { deadline_ns: absolute_deadline_ns }, job, release_ns);
        }
        summary.released += 1;
        // Until it completes or is dropped: a stop now leaves it unfinished.
        summary.unfinished_deadline_ns = Some(absolute_deadline_ns);
        let mut dropped = false;
        for i in 0..touches {
            let page = walker.next_page(active);
            if !region.verify_page(page) {
                eprintln!(
                    "critmem-srt-worker: CHECKSUM MISMATCH in page {page} during job {job}: memory contents changed under the worker"
                );
                summary.checksum_failures += 1;
                checksum_ok = false;
                break 'jobs;
            }
            summary.pages_verified += 1;
            if i % 256 == 255 {
                // A stop request ends the run now, the job unfinished and not counted: a long job
                // (a WCET of seconds) must not outlast the runner's grace period.
                if signalled(&signals) {
                    break 'jobs;
                }
                if let Some(c) = client.as_mut() {
                    if c.drop_requests().contains(&job) {
                        dropped = true;
                        break;
                    }
                }
            }
        }
        if !dropped {
            // In slices, so a drop request abandons the job within about a millisecond.
            let mut left_ns = phase.compute_ns;
            while left_ns > 0 {
                let slice_ns = left_ns.min(1_000_000);
                busy_ns(slice_ns);
                left_ns -= slice_ns;
                if left_ns > 0 && signalled(&signals) {
                    break 'jobs;
                }
                if left_ns > 0 && client.as_mut().is_some_and(|c| c.drop_requests().contains(&job)) {
                    dropped = true;
                    break;
                }
            }
        }
        let done_ns = monotonic_ns();
        summary.unfinished_deadline_ns = None;
        if dropped {
            summary.dropped += 1;
            if let Some(c) = client.as_mut() {
                c.send(JobOp::Drop, job, done_ns);
            }
        } else {
            summary.completed += 1;
            summary.max_response_ns = summary.max_response_ns.max(done_ns - release_ns);
            summary.total_response_ns += done_ns - release_ns;
            if done_ns > absolute_deadline_ns {
                summary.completed_late += 1;
                summary.max_tardiness_ns = summary.max_tardiness_ns.max(done_ns - absolute_deadline_ns);
            }
            if let Some(c) = client.as_mut() {
                c.send(JobOp::Complete, job, done_ns);
                // Requests for jobs already finished are stale; read them away.
                c.drop_requests();
            }
        }
        job += 1;
    }
    if checksum_ok {
        for page in hot_pages..region.pages() {
            if !region.verify_page(page) {
                eprintln!("critmem-srt-worker: CHECKSUM MISMATCH in cold page {page} at exit: memory contents changed under the worker");
                summary.checksum_failures += 1;
                checksum_ok = false;
                break;
            }
            summary.cold_pages_verified += 1;
        }
    }
    if let Some(c) = client.as_mut() {
        // Reports still in the outbox get a moment to reach the agent.
        c.close(Duration::from_millis(200));
        (summary.reports_sent, summary.reports_unsent, summary.connects) = (c.sent, c.unsent, c.connects);
    }
    println!("{}", serde_json::to_string(&summary).expect("summary serialises"));
    std::process::exit(if checksum_ok { 0 } else { 3 });
}
