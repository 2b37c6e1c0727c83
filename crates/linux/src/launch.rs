//! Starting a process inside cgroups before it runs anything of its own: the tool re-executes
//! itself with [`EXEC_AFTER_GO`]; that child waits for one line on stdin, sent once its pid is
//! in its cgroups (v1 does not move memory charges with a process, so it must not allocate
//! before), and then execs the program under the same pid.

use nix::sys::signal::{SigSet, SigmaskHow, Signal};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Command;

/// The first argument that makes a tool's process wait and exec (see the module).
pub const EXEC_AFTER_GO: &str = "--exec-after-go";

/// The launching tool's pid, for the child to check that it is still there.
const LAUNCHER_PID_ENV: &str = "CRITMEM_LAUNCHER_PID";

/// The command that starts `argv` through this tool (`this_exe`) as the module describes.
pub fn command_after_go(this_exe: &Path, argv: &[impl AsRef<std::ffi::OsStr>]) -> Command {
    let mut command = Command::new(this_exe);
    command.arg(EXEC_AFTER_GO).args(argv).env(LAUNCHER_PID_ENV, std::process::id().to_string());
    command
}

/// The child's side (of [`command_after_go`]): waits for `go`, unblocks every signal (a mask survives exec, and a
/// command with SIGTERM blocked could never be asked to stop), and execs `argv`. It dies with
/// its parent (SIGKILL), so a tool killed with `kill -9` leaves no process of its own behind.
pub fn exec_after_go(argv: &[std::ffi::OsString], tool: &str) -> ! {
    let Some(program) = argv.first() else {
        eprintln!("{tool}: {EXEC_AFTER_GO} needs a program");
        std::process::exit(2);
    };
    let _ = nix::sys::prctl::set_pdeathsig(Signal::SIGKILL);
    // A tool that died before the line above took effect sends no signal: the child would
    // outlive it (its `go` may already be in the pipe).
    let launcher = std::env::var(LAUNCHER_PID_ENV).ok().and_then(|p| p.parse::<i32>().ok());
    if launcher.is_some_and(|pid| nix::unistd::getppid().as_raw() != pid) {
        std::process::exit(1);
    }
    let mut go = String::new();
    let _ = std::io::stdin().read_line(&mut go);
    if go.trim_end() != "go" {
        // The tool ended before it placed this process (or before the line above took effect).
        std::process::exit(1);
    }
    let _ = nix::sys::signal::sigprocmask(SigmaskHow::SIG_SETMASK, Some(&SigSet::empty()), None);
    let error = Command::new(program).args(&argv[1..]).env_remove(LAUNCHER_PID_ENV).exec();
    eprintln!("{tool}: cannot run {}: {error}", Path::new(program).display());
    std::process::exit(127);
}
