//! Memory-intensive throughput worker: walks its whole working set again and again, verifying
//! every page, and reports MiB verified per second on stdout, one JSON line per report period.
//! Exits 0 on SIGINT/SIGTERM or after --duration-s, 3 on a checksum mismatch, 2 on bad
//! arguments; prints a JSON summary line ([`NrtWorkerSummary`]) at exit.

use clap::Parser;
use critmem_linux::agent::shutdown_signals;
use critmem_linux::workload::{signalled, NrtWorkerSummary, Pattern, Region, Walker, PAGE_BYTES};
use std::time::{Duration, Instant};

#[derive(Parser, Debug)]
#[command(name = "critmem-nrt-worker", about = "Memory-intensive throughput worker for critmem")]
struct Args {
    #[arg(long, default_value_t = 256)]
    wss_mib: u64,
    #[arg(long, value_enum, default_value_t = Pattern::Sequential)]
    pattern: Pattern,
    #[arg(long, default_value_t = 1000)]
    report_ms: u64,
    /// Stop after this long; runs until a signal if absent.
    #[arg(long, value_parser = critmem_linux::parse_seconds)]
    duration_s: Option<Duration>,
    #[arg(long, default_value_t = 2)]
    seed: u64,
}

const PAGES_PER_MIB: u64 = (1 << 20) / PAGE_BYTES as u64;

fn main() {
    let args: Args = critmem_linux::parse_args();
    let signals = match shutdown_signals() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("critmem-nrt-worker: {e}");
            std::process::exit(2);
        }
    };
    let region = args
        .wss_mib
        .checked_mul(1 << 20)
        .ok_or_else(|| "too large".to_owned())
        .and_then(|bytes| Region::try_new(bytes, args.seed))
        .unwrap_or_else(|e| {
            eprintln!("critmem-nrt-worker: --wss-mib {}: {e}", args.wss_mib);
            std::process::exit(2);
        });
    let mut walker = Walker::new(args.pattern, args.seed);
    let started = Instant::now();
    let end = args.duration_s.map(|d| started + d);
    let report = Duration::from_millis(args.report_ms.max(1));
    let (mut pages, mut last_report, mut mib_at_report) = (0u64, Instant::now(), 0u64);
    let mut checksum_failures = 0;
    loop {
        let page = walker.next_page(region.pages());
        if !region.verify_page(page) {
            eprintln!("critmem-nrt-worker: CHECKSUM MISMATCH in page {page}: memory contents changed under the worker");
            checksum_failures += 1;
            break;
        }
        pages += 1;
        if pages % 256 == 0 {
            if signalled(&signals) || end.is_some_and(|e| Instant::now() >= e) {
                break;
            }
            if last_report.elapsed() >= report {
                let mib = pages / PAGES_PER_MIB;
                let rate = (mib - mib_at_report) as f64 / last_report.elapsed().as_secs_f64();
                println!("{{\"t_s\":{:.3},\"verified_mib_per_s\":{rate:.1}}}", started.elapsed().as_secs_f64());
                (last_report, mib_at_report) = (Instant::now(), mib);
            }
        }
    }
    let elapsed_s = started.elapsed().as_secs_f64();
    let verified_mib = pages / PAGES_PER_MIB;
    let summary = NrtWorkerSummary {
        worker: "nrt".into(),
        verified_mib,
        verified_mib_per_s: verified_mib as f64 / elapsed_s.max(1e-9),
        checksum_failures,
        elapsed_s,
    };
    println!("{}", serde_json::to_string(&summary).expect("summary serialises"));
    std::process::exit(if checksum_failures == 0 { 0 } else { 3 });
}
