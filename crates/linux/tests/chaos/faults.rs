//! The agent's own resources and the machine under it failing: the journal's filesystem full
//! or read-only, the swapfile turned off, a managed group removed, a PSI file unreadable,
//! workers exiting or forking.

use super::*;

/// A small tmpfs of the test's own, unmounted on drop.
struct Tmpfs {
    dir: PathBuf,
    size: String,
    _parent: tempfile::TempDir,
}

impl Tmpfs {
    /// Mounted at a directory of its own (removed after the unmount).
    fn mount(size: &str) -> Tmpfs {
        let parent = tempfile::tempdir_in(std::env::temp_dir()).unwrap();
        let dir = parent.path().join("journal-fs");
        std::fs::create_dir(&dir).unwrap();
        let fs = Tmpfs { dir, size: size.to_owned(), _parent: parent };
        fs.mount_with("rw");
        fs
    }

    fn mount_with(&self, mode: &str) {
        let options = format!("size={},mode=0700,{mode}", self.size);
        let status = Command::new("mount").args(["-t", "tmpfs", "-o", &options, "critmem-test"]).arg(&self.dir).status().unwrap();
        assert!(status.success(), "mount tmpfs on {}", self.dir.display());
    }

    /// A fresh, empty mount, read-only or read-write (a mounted filesystem cannot be made
    /// read-only while a file on it is open for writing, so the switch is a new mount).
    fn remount(&self, mode: &str) {
        let status = Command::new("umount").arg(&self.dir).status().unwrap();
        assert!(status.success(), "umount {}", self.dir.display());
        self.mount_with(mode);
    }

    /// Writes a file until the filesystem is full.
    fn fill(&self) {
        let mut file = std::fs::File::create(self.dir.join("filler")).unwrap();
        let block = vec![0u8; 4096];
        while file.write_all(&block).is_ok() {}
        let _ = file.sync_all();
    }

    fn unfill(&self) {
        let _ = std::fs::remove_file(self.dir.join("filler"));
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.dir).status();
    }
}

/// Runs the agent on a journal whose filesystem `break_it` breaks before the start; it must
/// refuse to start in one line with exit code 2 and change nothing.
fn refuses_to_start(rig: &Rig, fs: &Tmpfs, break_it: impl Fn(&Tmpfs), heal: impl Fn(&Tmpfs)) -> String {
    break_it(fs);
    let mut agent = rig.spawn_agent(&[]);
    let exit = agent.wait();
    heal(fs);
    assert_eq!(exit.code, Some(2), "the agent must refuse to start: {}", exit.stderr);
    let lines = exit.error_lines();
    assert_eq!(lines.len(), 1, "one line: {}", exit.stderr);
    assert!(lines[0].contains("journal"), "names the journal: {}", lines[0]);
    assert!(rig.changed_knobs().is_empty(), "nothing may change without a journal: {:?}", rig.changed_knobs());
    lines[0].to_owned()
}

#[test]
fn a_full_or_read_only_journal_filesystem_changes_nothing_unjournaled_and_is_said_in_one_line() {
    let case = "journal_fs_full_or_read_only";
    let Some((_lock, machine)) = chaos_machine(case) else { return };
    let mut record = Record::new(case);
    let mut rig = Rig::new(&machine);
    let fs = Tmpfs::mount("256k");
    let journal = fs.dir.join("journal.jsonl");
    rig.journal = journal.clone();
    rig.write_config(&journal);
    rig.start_workers();

    // At start: full, then read-only.
    record.set("full_at_start", refuses_to_start(&rig, &fs, Tmpfs::fill, Tmpfs::unfill));
    record.set("read_only_at_start", refuses_to_start(&rig, &fs, |f| f.remount("ro"), |f| f.remount("rw")));

    // Mid-run, full: every change the agent then makes was journaled (the restore puts every
    // file back), or it stops, restores and says why in one line.
    rig.start_agent();
    rig.wait_for_jobs();
    fs.fill();
    run_for_or_exit(&mut rig, steady());
    let full_mid_run = match rig.agent.as_mut().unwrap().child.try_wait().unwrap() {
        None => {
            let exit = rig.agent.take().unwrap().stop();
            assert_eq!(exit.code, Some(0), "{}", exit.stderr);
            assert_eq!(exit.stderr.lines().filter(|l| l.contains("its filesystem is full")).count(), 1, "{}", exit.stderr);
            "kept running, said the filesystem is full; restored at exit".to_owned()
        }
        Some(_) => {
            let exit = rig.agent.take().unwrap().wait();
            assert_eq!(exit.code, Some(2), "{}", exit.stderr);
            assert_eq!(exit.error_lines().len(), 1, "{}", exit.stderr);
            exit.error_lines()[0].to_owned()
        }
    };
    fs.unfill();
    rig.check_restored();
    record.set("full_mid_run", full_mid_run);

    rig.start_agent();
    let summary = rig.finish(&mut record);
    assert_eq!(summary["recovered_from_crash"], false);
    drop(fs);
    record.write(3);
}

/// An ext4 filesystem of the test's own on a loop device, mounted `errors=remount-ro`: its
/// error trigger turns it read-only under files open for writing, as a failing disk does.
/// Unmounted and detached on drop.
struct Ext4 {
    dir: PathBuf,
    image: PathBuf,
    device: String,
    _parent: tempfile::TempDir,
}

impl Ext4 {
    /// The reason, where the machine has no loop devices or ext4 tools.
    fn mount() -> Result<Ext4, String> {
        let parent = tempfile::tempdir_in(std::env::temp_dir()).unwrap();
        let image = parent.path().join("journal.img");
        let dir = parent.path().join("journal-fs");
        std::fs::create_dir(&dir).unwrap();
        std::fs::File::create(&image).unwrap().set_len(8 << 20).unwrap();
        let run = |program: &str, args: &[&std::ffi::OsStr]| -> Result<String, String> {
            let out = Command::new(program).args(args).output().map_err(|e| format!("{program}: {e}"))?;
            if !out.status.success() {
                return Err(format!("{program}: {}", String::from_utf8_lossy(&out.stderr).trim()));
            }
            Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
        };
        run("mkfs.ext4", &["-q".as_ref(), "-F".as_ref(), image.as_os_str()])?;
        let device = run("losetup", &["-f".as_ref(), "--show".as_ref(), image.as_os_str()])?;
        let fs = Ext4 { dir, image, device, _parent: parent };
        fs.mount_it()?;
        Ok(fs)
    }

    fn mount_it(&self) -> Result<(), String> {
        let out = Command::new("mount").args(["-t", "ext4", "-o", "errors=remount-ro", &self.device]).arg(&self.dir).output().unwrap();
        if !out.status.success() {
            return Err(format!("mount {}: {}", self.device, String::from_utf8_lossy(&out.stderr).trim()));
        }
        Ok(())
    }

    /// The filesystem reports an error and turns itself read-only.
    fn fail(&self) {
        let name = self.device.trim_start_matches("/dev/");
        std::fs::write(format!("/sys/fs/ext4/{name}/trigger_fs_error"), "critmem chaos test").unwrap();
        // Kernels differ in how they show it (`ro`, `emergency_ro`, or still `rw` in
        // /proc/mounts with writes refused, as Debian's 6.1): a write says.
        let read_only = || {
            let mounts = std::fs::read_to_string("/proc/mounts").unwrap();
            let line = mounts.lines().find(|l| l.starts_with(&self.device)).expect("still mounted").to_owned();
            let probe = self.dir.join(".critmem-probe");
            let refused = match std::fs::write(&probe, "x") {
                Ok(()) => {
                    let _ = std::fs::remove_file(&probe);
                    false
                }
                Err(e) => matches!(e.raw_os_error(), Some(nix::libc::EROFS) | Some(nix::libc::EIO)),
            };
            (line.contains(" ro,") || line.contains("emergency_ro") || refused, line)
        };
        let deadline = Instant::now() + Duration::from_secs(5);
        while !read_only().0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        let (done, line) = read_only();
        assert!(done, "not read-only 5 s after the error: {line}");
    }

    /// Unmounted, checked and mounted again read-write: the journal on it is what reached the
    /// disk before the error.
    fn repair(&self) {
        assert!(Command::new("umount").arg(&self.dir).status().unwrap().success());
        // 0: clean, 1: errors corrected.
        let fsck = Command::new("e2fsck").args(["-f", "-y"]).arg(&self.image).output().unwrap();
        assert!(matches!(fsck.status.code(), Some(0 | 1)), "e2fsck: {}", String::from_utf8_lossy(&fsck.stdout));
        self.mount_it().unwrap();
    }
}

impl Drop for Ext4 {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.dir).status();
        let _ = Command::new("losetup").args(["-d", &self.device]).status();
    }
}

#[test]
fn a_journal_filesystem_turning_read_only_mid_run_leaves_nothing_unjournaled() {
    let case = "journal_fs_read_only_mid_run";
    let Some((_lock, machine)) = chaos_machine(case) else { return };
    let fs = match Ext4::mount() {
        Ok(fs) => fs,
        Err(reason) => {
            skip(case, &format!("no ext4 filesystem on a loop device here ({reason})"));
            return;
        }
    };
    let mut record = Record::new(case);
    let mut rig = Rig::new(&machine);
    let journal = fs.dir.join("journal.jsonl");
    rig.journal = journal.clone();
    rig.write_config(&journal);
    rig.start_workers();
    rig.start_agent();
    rig.wait_for_jobs();
    fs.fail();
    run_for_or_exit(&mut rig, steady());
    // The restore at exit reads the journal back from the broken filesystem: every change
    // the agent made must be in it, so every file is as before once the agent is gone.
    let agent = rig.agent.as_mut().unwrap();
    let running = agent.child.try_wait().unwrap().is_none();
    record.set("outcome", if running { "kept running until stopped" } else { "stopped itself" });
    if running {
        agent.signal(Signal::SIGTERM);
    }
    let exit = rig.agent.take().unwrap().wait();
    let warned: Vec<&str> = exit.stderr.lines().filter(|l| l.contains("its filesystem is read-only")).collect();
    assert!(!running || warned.len() == 1, "said once while running: {}", exit.stderr);
    record.set("agent_warned", warned.first().and_then(|l| l.split_once("WARN")).map_or("", |(_, l)| l.trim()).to_owned());
    assert_eq!(exit.code, Some(2), "{}", exit.stderr);
    assert_eq!(exit.error_lines().len(), 1, "{}", exit.stderr);
    assert!(exit.error_lines()[0].contains("could not be removed"), "{}", exit.stderr);
    record.set("agent_said", exit.error_lines()[0].to_owned());
    assert!(rig.changed_knobs().is_empty(), "not restored from the journal: {:?}", rig.changed_knobs());
    // Repaired, the journal left on it is replayed at the next start (putting the same
    // originals back), and the agent runs on as usual.
    fs.repair();
    rig.start_agent();
    let summary = rig.finish(&mut record);
    record.set("recovered_from_crash", summary["recovered_from_crash"].clone());
    drop(fs);
    record.write(1);
}

/// Like [`run_for`], but the agent may exit (the case then judges how).
fn run_for_or_exit(rig: &mut Rig, duration: Duration) {
    let until = Instant::now() + duration;
    while Instant::now() < until && rig.agent.as_mut().unwrap().child.try_wait().unwrap().is_none() {
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn the_swapfile_turned_off_under_the_agent_keeps_every_invariant() {
    simple_case("swapfile_turned_off", |rig, record| {
        let output = Command::new("swapoff").arg(&rig.swap_path).output().unwrap();
        record.set(
            "swapoff",
            if output.status.success() { "ok".to_owned() } else { String::from_utf8_lossy(&output.stderr).trim().to_owned() },
        );
        run_for(rig, steady());
    });
}

#[test]
fn a_managed_group_removed_by_someone_else_is_let_go_of_in_one_line_and_the_agent_runs_on() {
    let case = "managed_group_removed";
    let Some((_lock, machine)) = chaos_machine(case) else { return };
    let mut record = Record::new(case);
    let mut rig = Rig::running(&machine);
    // Someone moves the throughput worker out and removes its group.
    let nrt_pid = rig.nrt_worker.as_mut().unwrap().child.as_ref().unwrap().id();
    for dir in machine.backend.group_dirs(&rig.nrt.group) {
        let parent = dir.parent().unwrap().to_path_buf();
        let _ = std::fs::write(parent.join("cgroup.procs"), nrt_pid.to_string());
    }
    machine.backend.remove(&rig.nrt.group).unwrap();
    let stderr = rig.agent.as_ref().unwrap().stderr.clone();
    let said = || -> Vec<String> {
        let text = std::fs::read_to_string(&stderr).unwrap_or_default();
        text.lines().filter(|l| l.contains("removed by something else")).map(str::to_owned).collect()
    };
    wait_until("the agent to let go of the removed group", Duration::from_secs(10), || !said().is_empty());
    // The soft real-time group stays managed.
    run_for(&mut rig, steady());
    assert!(rig.agent.as_mut().unwrap().child.try_wait().unwrap().is_none(), "the agent stopped");
    // Recreated as it was before the agent, the group is taken on again at the next reload
    // (the configuration file still lists it); the rest of the checks apply unchanged.
    assert!(machine.backend.create(&rig.nrt.group).unwrap());
    machine.backend.set_knob(&rig.nrt.group, Knob::Max, Some(rig::NRT_ORIGINAL_BYTES)).unwrap();
    machine.backend.move_pid(&rig.nrt.group, nrt_pid).unwrap();
    rig.agent.as_ref().unwrap().signal(Signal::SIGHUP);
    run_for(&mut rig, steady());
    let workers = rig.stop_workers();
    std::thread::sleep(Duration::from_millis(200));
    let exit = rig.agent.take().unwrap().stop();
    assert_eq!(exit.code, Some(0), "{}", exit.stderr);
    let summary = exit.summary().clone();
    rig.check_restored();
    rig.teardown_swap();
    let lines = said();
    assert_eq!(lines.len(), 1, "{}", exit.stderr);
    assert!(lines[0].contains("group nrt"), "{}", lines[0]);
    record.set("agent_said", lines[0].split_once("WARN").map_or(lines[0].as_str(), |(_, l)| l.trim()).to_owned());
    let groups: Vec<&str> = summary["groups"].as_array().unwrap().iter().map(|g| g["name"].as_str().unwrap()).collect();
    assert_eq!(groups, ["srt", "nrt"], "taken on again: {summary}");
    // Every report of the soft real-time worker was counted, before and after the removal.
    let srt = &summary["groups"][0];
    let agent_reports: u64 = ["released", "completed", "dropped"].iter().map(|k| srt[*k].as_u64().unwrap()).sum();
    assert_eq!(workers.srt["reports_unsent"], 0, "{}", workers.srt);
    assert_eq!(agent_reports, workers.srt["reports_sent"].as_u64().unwrap(), "agent {srt}, worker {}", workers.srt);
    record.agent(&summary);
    record.workers(&workers);
    record.write(1);
}

/// Bind-mounts a file of garbage over `target`; unmounted on drop.
struct Overmount {
    target: PathBuf,
    _garbage: tempfile::NamedTempFile,
}

impl Overmount {
    fn new(target: PathBuf) -> Overmount {
        let mut garbage = tempfile::NamedTempFile::new().unwrap();
        garbage.write_all(b"this is not a pressure file\n").unwrap();
        let status = Command::new("mount").arg("--bind").arg(garbage.path()).arg(&target).status().unwrap();
        assert!(status.success(), "bind mount over {}", target.display());
        Overmount { target, _garbage: garbage }
    }
}

impl Drop for Overmount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.target).status();
    }
}

#[test]
fn an_unreadable_psi_file_keeps_every_invariant() {
    let case = "psi_file_unreadable";
    let Some((_lock, machine)) = chaos_machine(case) else { return };
    let mut record = Record::new(case);
    let mut rig = Rig::new(&machine);
    rig.start_workers();
    let pressure = machine.backend.pressure_file(&rig.srt.group, critmem_linux::cgroup::PsiResource::Memory);
    let overmount = Overmount::new(pressure.clone());
    assert!(std::fs::read_to_string(&pressure).unwrap().starts_with("this is not"), "the overmount is in place");
    let mut agent = rig.spawn_agent(&["--duration-s", "3"]);
    let exit = agent.wait();
    drop(overmount);
    record.set("agent_exit_code", exit.code.map_or(-1, i64::from));
    record.set("agent_said", exit.error_lines().first().copied().unwrap_or("").to_owned());
    assert!(matches!(exit.code, Some(0) | Some(2)), "{}", exit.stderr);
    if exit.code == Some(2) {
        assert_eq!(exit.error_lines().len(), 1, "{}", exit.stderr);
    }
    assert!(rig.changed_knobs().is_empty(), "{:?}", rig.changed_knobs());
    // And with the file readable again the agent runs as usual.
    rig.start_agent();
    rig.wait_for_jobs();
    run_for(&mut rig, steady());
    rig.finish(&mut record);
    record.write(1);
}

/// Forks up to `n` children that sleep; prints `ready` with the number forked; kills them
/// when stdin closes. At a v1 memory limit with the OOM killer off, the kernel's own charges
/// fail rather than wait: a fork or an allocation the group cannot pay for (ENOMEM, as
/// `OSError` or `MemoryError`) ends the forking early. Each child dies with the forker.
pub const FORKER: &str = r#"
import ctypes, os, signal, sys, time
prctl = ctypes.CDLL(None).prctl
PR_SET_PDEATHSIG = 1
sys.stdin.readline()
n = int(sys.argv[1])
parent = os.getpid()
kids = [0] * n
forked = 0
while forked < n:
    try:
        pid = os.fork()
    except (OSError, MemoryError):
        break
    if pid == 0:
        try:
            prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
            if os.getppid() == parent:
                # The children must not hold the test's pipes open.
                os.close(0)
                os.close(1)
                time.sleep(3600)
        finally:
            os._exit(0)
    kids[forked] = pid
    forked += 1
print("ready", forked, flush=True)
sys.stdin.read()
for pid in kids[:forked]:
    os.kill(pid, 9)
"#;

/// Starts [`FORKER`] with `n` children in `group`; returns it and how many it forked.
pub fn fork_into(machine: &Machine, group: &critmem_linux::cgroup::GroupPath, n: u32) -> (Helper, u64) {
    let mut forker = Helper::python(FORKER, &[&n.to_string()]);
    machine.backend.move_pid(group, forker.pid()).unwrap();
    forker.say("go");
    let mut line = String::new();
    std::io::BufRead::read_line(forker.stdout.as_mut().unwrap(), &mut line).unwrap();
    let Some(forked) = line.strip_prefix("ready ").and_then(|n| n.trim().parse().ok()) else {
        let status = forker.child.wait().unwrap();
        panic!("forker said {line:?} and ended with {status}; {}", memory_state(machine, group));
    };
    (forker, forked)
}

/// A group's memory usage, limit and OOM state, for a failure message.
pub fn memory_state(machine: &Machine, group: &critmem_linux::cgroup::GroupPath) -> String {
    let usage = machine.backend.usage_bytes(group);
    let max = machine.backend.knob(group, Knob::Max);
    let oom = std::fs::read_to_string(machine.backend.oom_file(group)).unwrap_or_default().replace('\n', ", ");
    format!("group {group}: usage {usage:?}, limit {max:?}, OOM state: {oom}")
}

#[test]
fn a_worker_that_exits_and_one_that_forks_many_children_keep_every_invariant() {
    simple_case("worker_exits_and_forks", |rig, record| {
        // The soft real-time worker exits mid-run; a new one starts and reconnects.
        let old = rig.srt_worker.take().unwrap();
        let (summary, code) = old.stop();
        assert_eq!((code, summary["checksum_failures"].as_u64()), (Some(0), Some(0)), "{summary}");
        record.set("exited_worker_released", summary["released"].clone());
        run_for(rig, Duration::from_secs(1));
        rig.start_srt_worker();
        // A process in the throughput group forks 200 children into it.
        let children = if long() { 1000 } else { 200 };
        let (mut forker, forked) = fork_into(rig.machine, &rig.nrt.group, children);
        record.set("children_forked", forked);
        let pids = rig.machine.backend.pids(&rig.nrt.group).unwrap().len();
        record.set("nrt_group_processes", pids as u64);
        run_for(rig, steady());
        // Closing its stdin makes it kill its children and exit.
        drop(forker.stdin.take());
        forker.child.wait().unwrap();
        let nrt = rig.nrt.group.clone();
        wait_until("the forked children to be gone", Duration::from_secs(10), || rig.machine.backend.pids(&nrt).unwrap().len() == 1);
        record.set("faults_injected", 2u64);
    });
}
