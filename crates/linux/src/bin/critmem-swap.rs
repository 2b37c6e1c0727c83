//! critmem's own swapfile: `setup --size-bytes N` creates, labels and enables it (recording it
//! in the state file); `teardown` disables and deletes exactly that file and refuses to touch
//! any other swap; `status` prints the state and the active swap areas as JSON. `critmem swap`
//! calls this. Errors: one line on stderr, exit code 2.

use clap::{Parser, Subcommand};
use critmem_linux::agent::{pending_signal, shutdown_signals};
use critmem_linux::swap::{SwapManager, SwapState};
use critmem_linux::Result;
use std::cell::RefCell;
use std::path::{Path, PathBuf};

#[derive(Parser, Debug)]
#[command(name = "critmem-swap", about = "Sets up and tears down critmem's own swapfile")]
struct Args {
    /// Where critmem records the swapfile it owns.
    #[arg(long, default_value = critmem_linux::swap::DEFAULT_STATE_FILE)]
    state_file: PathBuf,
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Create and enable a swapfile (on a filesystem that supports swapfiles: ext4, xfs).
    Setup {
        #[arg(long)]
        size_bytes: u64,
        #[arg(long, default_value = "/var/lib/critmem/critmem.swap")]
        path: PathBuf,
    },
    /// Disable and delete the swapfile critmem created; other swap is never touched.
    Teardown,
    /// Print the recorded swapfile and the active swap areas.
    Status,
}

/// Setup with SIGINT, SIGTERM and SIGHUP held back, so that one of them stops it between
/// steps and it removes what it made, instead of dying with a half-made swapfile.
fn setup_stopping_on_signals(manager: &SwapManager, path: &Path, size_bytes: u64) -> Result<SwapState> {
    let signals = shutdown_signals()?;
    let seen: RefCell<Option<String>> = RefCell::new(None);
    let stop = || {
        if seen.borrow().is_none() {
            *seen.borrow_mut() = pending_signal(&signals);
        }
        seen.borrow().clone()
    };
    manager.setup_unless(path, size_bytes, &stop)
}

fn main() {
    let args: Args = critmem_linux::parse_args();
    let manager = SwapManager::new(args.state_file.clone(), PathBuf::from(critmem_linux::PROC_ROOT));
    let result = match args.command {
        Cmd::Setup { size_bytes, path } => setup_stopping_on_signals(&manager, &path, size_bytes)
            .map(|s| serde_json::json!({"swapfile": s.path, "size_bytes": s.size_bytes, "uuid": s.uuid})),
        Cmd::Teardown => manager.teardown().map(|p| serde_json::json!({"removed": p})),
        Cmd::Status => manager.state().and_then(|s| {
            let active: Vec<_> = manager
                .active()?
                .into_iter()
                .map(|e| serde_json::json!({"path": e.path, "kind": e.kind, "size_bytes": e.size_bytes}))
                .collect();
            Ok(serde_json::json!({"swapfile": s.map(|s| s.path), "active": active}))
        }),
    };
    match result {
        Ok(value) => println!("{value}"),
        Err(e) => {
            eprintln!("critmem-swap: {}", critmem_linux::one_line(&e.to_string()));
            std::process::exit(2);
        }
    }
}
