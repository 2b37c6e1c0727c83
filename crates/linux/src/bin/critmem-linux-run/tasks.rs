//! The tasks' processes: how they end at the end of a run, and what they leave behind.

use crate::plan::{Launch, TaskPlan};
use critmem_linux::clock::Clock;
use critmem_linux::platform::LinuxPlatform;
use critmem_linux::session::Session;
use critmem_linux::workload::{NrtWorkerSummary, SrtWorkerSummary};
use nix::sys::signal::Signal;
use nix::unistd::Pid;
use std::io::Write;
use std::os::fd::AsFd;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::Duration;

/// A task's running process and what became of it.
pub(crate) struct Running {
    pub(crate) task: usize,
    pub(crate) child: Child,
    /// Seconds into the run at which it exited by itself, if it did.
    pub(crate) exited_at_s: Option<f64>,
    /// A command's progress file.
    pub(crate) progress_file: Option<PathBuf>,
}

/// Task processes; their process groups are SIGKILLed and reaped on drop unless stopped.
pub(crate) struct Processes(pub(crate) Vec<Running>);

impl Drop for Processes {
    fn drop(&mut self) {
        for r in &mut self.0 {
            kill_process_group(&r.child, Signal::SIGKILL);
            let _ = r.child.wait();
        }
    }
}

/// Starts every task's process in its group's cgroup: each waits (see `exec_after_go`) until
/// its pid is placed, then execs its program. A command's progress file is named in
/// `state_dir` (the run's own directory, removed with it).
pub(crate) fn start_tasks(
    platform: &LinuxPlatform,
    tasks: &[TaskPlan],
    workers_dir: &Path,
    socket: &Path,
    state_dir: &Path,
) -> Result<Processes, String> {
    let group_names: Vec<String> = platform.group_specs().map(|g| g.name.clone()).collect();
    let this_exe = std::env::current_exe().map_err(|e| format!("this program's path: {e}"))?;
    let mut processes = Processes(Vec::new());
    for (i, t) in tasks.iter().enumerate() {
        let mut command = critmem_linux::launch::command_after_go(&this_exe, &[] as &[&str]);
        let mut progress_file = None;
        match &t.launch {
            Launch::Worker { exe, args } => {
                command.arg(workers_dir.join(exe)).args(args).stdout(Stdio::piped());
                if *exe == "critmem-srt-worker" {
                    command.arg("--socket").arg(socket);
                }
            }
            Launch::Command { argv, program, .. } => {
                // Its output goes to stderr: stdout carries only the JSON summary.
                let stderr = std::io::stderr().as_fd().try_clone_to_owned().map_err(|e| format!("duplicate stderr: {e}"))?;
                command.arg(program).args(&argv[1..]).stdout(Stdio::from(stderr));
                command
                    .env("CRITMEM_JOB_SOCKET", socket)
                    .env("CRITMEM_GROUP", &group_names[t.group])
                    .env("CRITMEM_TASK", &t.name)
                    .env("CRITMEM_PERIOD_NS", t.period_ns.to_string())
                    .env("CRITMEM_DEADLINE_NS", t.deadline_ns.to_string())
                    .env("CRITMEM_WCET_NS", t.wcet_ns.to_string())
                    .env("CRITMEM_SEED", t.seed.to_string());
                let file = progress_dir(state_dir, i)?.join(PROGRESS_FILE_NAME);
                command.env("CRITMEM_PROGRESS_FILE", &file);
                progress_file = Some(file);
            }
        }
        let mut child = command
            .stdin(Stdio::piped())
            .stderr(Stdio::inherit())
            .process_group(0)
            .spawn()
            .map_err(|e| format!("task[{i}] {}: start {}: {e}", t.name, t.label()))?;
        let pid = child.id();
        if let Err(e) = platform.add_process(t.group, pid) {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("task[{i}] {}: {e}", t.name));
        }
        let _ = child.stdin.take().map(|mut s| s.write_all(b"go\n"));
        processes.0.push(Running { task: i, child, exited_at_s: None, progress_file });
    }
    Ok(processes)
}

/// Each task runs as the leader of its own process group, so a signal reaches its children.
fn kill_process_group(child: &Child, signal: Signal) {
    let _ = nix::sys::signal::killpg(Pid::from_raw(child.id() as i32), signal);
}

/// How a task's process ended, and what a shipped worker reported.
#[derive(Debug, Default)]
pub(crate) struct TaskEnd {
    pub(crate) exit_code: Option<i32>,
    pub(crate) exit_signal: Option<i32>,
    pub(crate) exited_early_s: Option<f64>,
    /// For a command still running at the end: the signal that ended it.
    pub(crate) stopped_by: Option<&'static str>,
    pub(crate) report: WorkerReport,
    /// The last count a command wrote to its progress file.
    pub(crate) work_units: Option<u64>,
}

/// The file a command writes its progress to, in a directory of its own (where it makes its
/// temporary file before renaming it over this one).
const PROGRESS_FILE_NAME: &str = "progress.json";
/// Longer progress files are malformed (the JSON is a few dozen bytes).
const MAX_PROGRESS_BYTES: u64 = 4096;

/// Task `i`'s own directory for its progress file, made in `state_dir`.
fn progress_dir(state_dir: &Path, i: usize) -> Result<PathBuf, String> {
    use std::os::unix::fs::DirBuilderExt;
    let dir = state_dir.join(format!("task-{i}"));
    std::fs::DirBuilder::new().mode(0o700).create(&dir).map_err(|e| format!("{}: create: {e}", dir.display()))?;
    Ok(dir)
}

/// What a command writes to its progress file: its cumulative work units.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Progress {
    work_units: u64,
}

/// The count in progress file `path`: none when the command never wrote one, an error saying
/// what is wrong with it otherwise. A FIFO, device or symlink put there is refused unread.
pub(crate) fn read_progress(path: &Path) -> Result<Option<u64>, String> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let flags = nix::fcntl::OFlag::O_NOFOLLOW | nix::fcntl::OFlag::O_NONBLOCK;
    let file = match std::fs::OpenOptions::new().read(true).custom_flags(flags.bits()).open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) if e.raw_os_error() == Some(nix::errno::Errno::ELOOP as i32) => return Err("a symlink, not a file".into()),
        Err(e) => return Err(e.to_string()),
    };
    if !file.metadata().map_err(|e| e.to_string())?.is_file() {
        return Err("not a regular file".into());
    }
    let mut text = String::new();
    file.take(MAX_PROGRESS_BYTES + 1).read_to_string(&mut text).map_err(|e| e.to_string())?;
    if text.len() as u64 > MAX_PROGRESS_BYTES {
        return Err(format!("longer than {MAX_PROGRESS_BYTES} bytes"));
    }
    serde_json::from_str::<Progress>(&text)
        .map(|p| Some(p.work_units))
        .map_err(|e| format!("expected {{\"work_units\": N}} with N a non-negative integer: {e}"))
}

/// The summary line a shipped worker printed at exit.
#[derive(Debug, Default)]
pub(crate) enum WorkerReport {
    Srt(SrtWorkerSummary),
    Nrt(NrtWorkerSummary),
    /// A command, or a worker that printed none (killed).
    #[default]
    None,
}

impl WorkerReport {
    fn parse(exe: &str, stdout: &str) -> Self {
        let Some(line) = stdout.lines().last() else { return WorkerReport::None };
        let parsed = match exe {
            "critmem-srt-worker" => serde_json::from_str(line).map(WorkerReport::Srt),
            _ => serde_json::from_str(line).map(WorkerReport::Nrt),
        };
        parsed.unwrap_or(WorkerReport::None)
    }
}

/// How often stopping tasks are looked at (and their groups rescued).
const STOP_POLL_NS: u64 = 10_000_000;

/// Stops every task and returns how each ended, in task order. SIGTERM first: a shipped worker
/// prints its summary and exits, a command's whole process group is asked to. While they exit
/// the platform's out-of-memory rescue keeps running (the controller no longer ticks): a
/// process waiting at its group's limit cannot act on SIGTERM until the limit lets it through.
/// What is still running after `grace` (`--stop-grace-s`) is SIGKILLed with its process group.
pub(crate) fn stop_tasks(
    platform: &mut LinuxPlatform,
    clock: &dyn Clock,
    tasks: &[TaskPlan],
    mut processes: Processes,
    grace: Duration,
) -> Vec<TaskEnd> {
    let mut running = std::mem::take(&mut processes.0);
    // Read stdout beside the wait, so a worker never blocks on a full pipe.
    let readers: Vec<_> = running
        .iter_mut()
        .map(|r| {
            r.child.stdout.take().map(|mut out| {
                std::thread::spawn(move || {
                    let mut text = String::new();
                    let _ = std::io::Read::read_to_string(&mut out, &mut text);
                    text
                })
            })
        })
        .collect();
    // A task that already exited was reaped: its pid (and process group) may be someone else's now.
    for r in running.iter().filter(|r| r.exited_at_s.is_none()) {
        match tasks[r.task].launch {
            Launch::Worker { .. } => {
                let _ = nix::sys::signal::kill(Pid::from_raw(r.child.id() as i32), Signal::SIGTERM);
            }
            Launch::Command { .. } => kill_process_group(&r.child, Signal::SIGTERM),
        }
    }
    let since_ns = clock.now_ns();
    let mut exited: Vec<bool> = vec![false; running.len()];
    loop {
        for (r, done) in running.iter_mut().zip(&mut exited) {
            *done = *done || !matches!(r.child.try_wait(), Ok(None));
        }
        if exited.iter().all(|&d| d) || u128::from(clock.now_ns() - since_ns) >= grace.as_nanos() {
            break;
        }
        let raised = platform.rescue_waiting_groups();
        if raised > 0 {
            tracing::info!(groups = raised, "raised a limit so a stopping task can exit");
        }
        clock.sleep_until_ns(clock.now_ns() + STOP_POLL_NS);
    }
    for (r, _) in running.iter().zip(&exited).filter(|(_, &done)| !done) {
        tracing::warn!(task = %tasks[r.task].name, grace_s = grace.as_secs_f64(), "task did not exit after SIGTERM: killed");
        kill_process_group(&r.child, Signal::SIGKILL);
    }
    let mut ends: Vec<TaskEnd> = tasks.iter().map(|_| TaskEnd::default()).collect();
    for ((mut r, reader), exited) in running.into_iter().zip(readers).zip(exited) {
        use std::os::unix::process::ExitStatusExt;
        let status = r.child.wait().ok();
        let stdout = reader.and_then(|h| h.join().ok()).unwrap_or_default();
        let end = &mut ends[r.task];
        (end.exit_code, end.exit_signal) = (status.and_then(|s| s.code()), status.and_then(|s| s.signal()));
        end.exited_early_s = r.exited_at_s;
        match tasks[r.task].launch {
            Launch::Worker { exe, .. } => end.report = WorkerReport::parse(exe, &stdout),
            Launch::Command { .. } => {
                if let Some(path) = &r.progress_file {
                    end.work_units = read_progress(path).unwrap_or_else(|error| {
                        tracing::warn!(task = %tasks[r.task].name, path = %path.display(), %error, "malformed progress file: work_units left null");
                        None
                    });
                }
                end.stopped_by = match (r.exited_at_s, exited) {
                    (Some(_), _) => None,
                    (None, true) => Some("SIGTERM"),
                    (None, false) => Some("SIGKILL"),
                };
            }
        }
    }
    ends
}

/// Kills whatever is still in the run's own cgroups (what commands forked and left behind), so
/// the groups can be removed; returns how many processes it killed.
pub(crate) fn kill_leftovers(session: &Session) -> usize {
    let platform = session.platform();
    let groups = platform.group_specs().count();
    // Only processes in our own cgroups get here. The last directory of a group is its
    // cgroup2 one (v2, or the unified half on the hybrid layout).
    let cgroup2_dirs: Vec<PathBuf> = platform.group_specs().filter_map(|g| platform.backend().group_dirs(&g.path).pop()).collect();
    kill_until_empty(
        session.clock().as_ref(),
        || (0..groups).flat_map(|g| platform.pids(g).unwrap_or_default()).collect(),
        || cgroup2_dirs.iter().filter(|d| !kill_cgroup2(d)).count() == 0,
    )
}

/// Kills every process in the cgroup2 directory `dir` and below at once, by writing its
/// `cgroup.kill` (Linux 5.14+): no pid is read, so none can be reused in between. Returns
/// whether it could.
pub(crate) fn kill_cgroup2(dir: &Path) -> bool {
    let file = dir.join("cgroup.kill");
    file.exists() && critmem_linux::cgroup::write_value(&file, "1").is_ok()
}

/// Until the processes `list` names are gone or 5 s have passed: kills them with `kill_all`
/// where that works, else (and for what is still there after a second: a process outside
/// the cgroup2 group `kill_all` covers) SIGKILLs each pid listed, the fallback because a pid
/// can be reused between the read and the kill. Returns how many processes it saw.
pub(crate) fn kill_until_empty(clock: &dyn Clock, mut list: impl FnMut() -> Vec<u32>, mut kill_all: impl FnMut() -> bool) -> usize {
    let mut killed = std::collections::BTreeSet::new();
    let started_ns = clock.now_ns();
    loop {
        let pids = list();
        let elapsed_ns = clock.now_ns() - started_ns;
        if pids.is_empty() || elapsed_ns >= 5_000_000_000 {
            return killed.len();
        }
        let by_cgroup = elapsed_ns < 1_000_000_000 && kill_all();
        for pid in pids {
            if !by_cgroup {
                let _ = nix::sys::signal::kill(Pid::from_raw(pid as i32), Signal::SIGKILL);
            }
            killed.insert(pid);
        }
        clock.sleep_until_ns(clock.now_ns() + 20_000_000);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_progress_file_gives_its_count_or_says_what_is_wrong() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(PROGRESS_FILE_NAME);
        assert_eq!(read_progress(&path), Ok(None), "a command that never wrote one has none");
        std::fs::write(&path, r#"{"work_units": 1234}"#).unwrap();
        assert_eq!(read_progress(&path), Ok(Some(1234)));
        std::fs::write(&path, format!("{{\"work_units\":{}}}\n", u64::MAX)).unwrap();
        assert_eq!(read_progress(&path), Ok(Some(u64::MAX)));
        for bad in [
            r#"{"work_units": -1}"#,
            r#"{"work_units": 2.5}"#,
            r#"{"work_units": "3"}"#,
            r#"{"units": 3}"#,
            "{\"work_units\": 3",
            "",
            "\u{0}",
        ] {
            let error = {
                std::fs::write(&path, bad).unwrap();
                read_progress(&path)
            }
            .unwrap_err();
            assert!(error.contains("work_units"), "{bad:?}: {error}");
        }
        std::fs::write(&path, format!("{{\"work_units\": 1{}}}", " ".repeat(5000))).unwrap();
        assert!(read_progress(&path).unwrap_err().contains("longer than"));
        std::fs::write(&path, [0xff, 0xfe]).unwrap();
        assert!(read_progress(&path).is_err(), "not UTF-8");
    }

    #[test]
    fn a_fifo_or_symlink_in_place_of_a_progress_file_is_refused_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(PROGRESS_FILE_NAME);
        nix::unistd::mkfifo(&path, nix::sys::stat::Mode::S_IRWXU).unwrap();
        assert_eq!(read_progress(&path), Err("not a regular file".into()));
        std::fs::remove_file(&path).unwrap();
        let target = dir.path().join("elsewhere.json");
        std::fs::write(&target, r#"{"work_units": 5}"#).unwrap();
        std::os::unix::fs::symlink(&target, &path).unwrap();
        assert_eq!(read_progress(&path), Err("a symlink, not a file".into()));
        std::fs::remove_file(&path).unwrap();
        std::fs::create_dir(&path).unwrap();
        assert!(read_progress(&path).is_err());
    }
}
