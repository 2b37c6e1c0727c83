//! The critmem agent daemon: controls the memory of configured cgroups from PSI with one of
//! the critmem controllers, restoring every original value when it stops on SIGINT or SIGTERM
//! (and, after a crash, when it starts again). SIGHUP reads the configuration again and
//! applies its controller, parameters and groups, or keeps the running ones and says why in
//! one line.
//! Under systemd (`Type=notify`) it reports readiness, a status line and watchdog pings.
//! Errors are one line on stderr with exit code 2.

use clap::Parser;
use critmem_core::{load_str, Format, Overrides};
use critmem_linux::agent::{run, shutdown_signals, AgentConfig, RunOptions};
use critmem_linux::agent_config::config_from_scenario;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Parser, Debug)]
#[command(name = "critmem-agent", about = "Predictable memory management for mixed-criticality workloads on Linux")]
struct Args {
    /// Agent configuration (TOML).
    #[arg(long, required_unless_present = "config_from_scenario")]
    config: Option<PathBuf>,
    /// Print an agent configuration made from this scenario's [memory], [[group]]s and
    /// [control], and exit.
    #[arg(long, value_name = "SCENARIO", conflicts_with_all = ["config", "dry_run", "duration_s"])]
    config_from_scenario: Option<PathBuf>,
    /// Log the writes the controller asks for; change nothing.
    #[arg(long)]
    dry_run: bool,
    /// Stop (restoring everything) after this many seconds.
    #[arg(long, value_parser = critmem_linux::parse_seconds)]
    duration_s: Option<Duration>,
    /// Run the control loop under SCHED_FIFO at this priority (1-99), ahead of every ordinary
    /// task; the agent's other threads (cgroup writes, metrics) keep its nice value. Needs
    /// CAP_SYS_NICE: without it the agent warns and runs at its nice value.
    #[arg(long, value_name = "PRIORITY", value_parser = clap::value_parser!(u8).range(1..=99))]
    realtime_priority: Option<u8>,
    /// Log level: error, warn, info, debug, trace.
    #[arg(long, default_value = "info")]
    log_level: tracing::Level,
}

fn main() {
    let args: Args = critmem_linux::parse_args();
    // Controllers the registry does not hold are Python classes, each in a process of its own;
    // relative file names start at the configuration's (or scenario's) directory.
    let file = args.config_from_scenario.as_ref().or(args.config.as_ref());
    if let Some(file) = file {
        critmem_policy::register_external_controllers(Box::new(critmem_linux::external::PythonControllers::for_file(file)));
    }
    if let Some(path) = &args.config_from_scenario {
        match config_from_scenario_file(path) {
            Ok(text) => print!("{text}"),
            Err(e) => {
                eprintln!("critmem-agent: error: {e}");
                std::process::exit(2);
            }
        }
        return;
    }
    let config_path = args.config.as_ref().expect("clap requires --config without --config-from-scenario");
    // Before any thread exists, so every thread has the signals blocked.
    let signals = shutdown_signals().unwrap_or_else(|e| fail(&e));
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_max_level(args.log_level)
        .with_target(false)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let config = AgentConfig::load(config_path).unwrap_or_else(|e| fail(&e));
    for warning in &config.deprecations {
        eprintln!("critmem-agent: warning: {warning}");
    }
    let options = RunOptions {
        dry_run: args.dry_run,
        duration: args.duration_s,
        config_path: Some(config_path.clone()),
        notify: true,
        realtime_priority: args.realtime_priority,
    };
    match run(&config, &options, &signals) {
        Ok(summary) => println!("{}", serde_json::to_string(&summary).expect("summary serialises")),
        Err(e) => fail(&e),
    }
}

fn fail(e: &dyn std::fmt::Display) -> ! {
    eprintln!("critmem-agent: {e}");
    std::process::exit(2);
}

fn config_from_scenario_file(path: &std::path::Path) -> Result<String, String> {
    let text = critmem_linux::read_input_file(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let format = if path.extension().is_some_and(|e| e == "json") { Format::Json } else { Format::Toml };
    let scenario = load_str(&text, &path.display().to_string(), format, &Overrides::default()).map_err(|e| e.to_string())?;
    config_from_scenario(&scenario).map_err(|e| e.to_string())
}
