//! The critmem agent daemon: controls the memory of configured cgroups from PSI with one of
//! the critmem controllers, restoring every original value when it stops (and, after a crash,
//! when it starts again). Errors are one line on stderr with exit code 2.

use clap::Parser;
use critmem_linux::agent::{run, shutdown_signals, AgentConfig, RunOptions};
use std::path::PathBuf;
use std::time::Duration;

#[derive(Parser, Debug)]
#[command(name = "critmem-agent", about = "Predictable memory management for mixed-criticality workloads on Linux")]
struct Args {
    /// Agent configuration (TOML).
    #[arg(long)]
    config: PathBuf,
    /// Log the writes the controller asks for; change nothing.
    #[arg(long)]
    dry_run: bool,
    /// Stop (restoring everything) after this many seconds.
    #[arg(long, value_parser = critmem_linux::parse_seconds)]
    duration_s: Option<Duration>,
    /// Log level: error, warn, info, debug, trace.
    #[arg(long, default_value = "info")]
    log_level: tracing::Level,
}

fn main() {
    let args: Args = critmem_linux::parse_args();
    // Before any thread exists, so every thread has the signals blocked.
    let signals = shutdown_signals().unwrap_or_else(|e| fail(&e));
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_max_level(args.log_level)
        .with_target(false)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let config = AgentConfig::load(&args.config).unwrap_or_else(|e| fail(&e));
    for warning in &config.deprecations {
        eprintln!("critmem-agent: warning: {warning}");
    }
    let options = RunOptions { dry_run: args.dry_run, duration: args.duration_s };
    match run(&config, &options, &signals) {
        Ok(summary) => println!("{}", serde_json::to_string(&summary).expect("summary serialises")),
        Err(e) => fail(&e),
    }
}

fn fail(e: &dyn std::fmt::Display) -> ! {
    eprintln!("critmem-agent: {e}");
    std::process::exit(2);
}
