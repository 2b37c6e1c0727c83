//! The agent kept from running: stopped, throttled, or outrun by other work.

use super::*;

#[test]
fn the_agent_stopped_for_seconds_then_continued_resumes_and_restores() {
    simple_case("agent_sigstop", |rig, record| {
        let agent = rig.agent.as_ref().unwrap();
        let stop = if long() { Duration::from_secs(20) } else { Duration::from_secs(3) };
        agent.signal(Signal::SIGSTOP);
        std::thread::sleep(stop);
        agent.signal(Signal::SIGCONT);
        record.set("stopped_s", stop.as_secs_f64());
        // It ticks again: the metrics file moves on.
        let ticks = rig.metric("critmem_ticks_total").unwrap_or(0.0);
        wait_until("ticks after SIGCONT", Duration::from_secs(10), || rig.metric("critmem_ticks_total").unwrap_or(0.0) > ticks);
        run_for(rig, steady());
    });
}

/// A CPU cgroup of the test's own (v1 `cpu` or v2 `cpu.max`), removed on drop after moving
/// its processes back where they were.
struct CpuCap {
    dir: PathBuf,
    root: PathBuf,
    moved: Vec<(u32, String)>,
    /// v2: the root's `cgroup.subtree_control` had no `cpu` and this test enabled it (and
    /// disables it again on drop).
    enabled_cpu: bool,
}

impl CpuCap {
    /// A group allowing `quota_us` of CPU per `period_us`, or `None` where the machine has no
    /// CPU controller to use.
    fn new(quota_us: u64, period_us: u64) -> Option<CpuCap> {
        let v1 = ["/sys/fs/cgroup/cpu", "/sys/fs/cgroup/cpu,cpuacct"]
            .into_iter()
            .map(PathBuf::from)
            .find(|p| p.join("cpu.cfs_quota_us").exists());
        let (root, v2) = match v1 {
            Some(root) => (root, false),
            None => {
                let root = PathBuf::from("/sys/fs/cgroup");
                let controllers = std::fs::read_to_string(root.join("cgroup.controllers")).ok()?;
                if !controllers.split_whitespace().any(|c| c == "cpu") {
                    return None;
                }
                (root, true)
            }
        };
        // v2 with no controller enabled below the root (a machine without systemd): the
        // group gets `cpu.max` only once the root delegates `cpu`.
        let subtree_control = root.join("cgroup.subtree_control");
        let enabled_cpu = v2
            && !std::fs::read_to_string(&subtree_control).ok()?.split_whitespace().any(|c| c == "cpu")
            && std::fs::write(&subtree_control, "+cpu").is_ok();
        let dir = root.join(format!("critmem-test-{}-cpu", std::process::id()));
        std::fs::create_dir(&dir).ok()?;
        let cap = CpuCap { dir, root, moved: Vec::new(), enabled_cpu };
        if v2 {
            std::fs::write(cap.dir.join("cpu.max"), format!("{quota_us} {period_us}")).unwrap();
        } else {
            std::fs::write(cap.dir.join("cpu.cfs_period_us"), period_us.to_string()).unwrap();
            std::fs::write(cap.dir.join("cpu.cfs_quota_us"), quota_us.to_string()).unwrap();
            // The agent's loop runs under SCHED_FIFO: with real-time group scheduling the
            // group needs real-time runtime to take it, and the same share caps it.
            if cap.dir.join("cpu.rt_runtime_us").exists() {
                std::fs::write(cap.dir.join("cpu.rt_period_us"), period_us.to_string()).unwrap();
                std::fs::write(cap.dir.join("cpu.rt_runtime_us"), quota_us.to_string()).unwrap();
            }
        }
        Some(cap)
    }

    /// The cgroup `pid` is in on this hierarchy, relative to its root.
    fn current(&self, pid: u32) -> String {
        let text = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap_or_default();
        let v1 = !self.root.ends_with("cgroup");
        text.lines()
            .find_map(|l| {
                let mut parts = l.splitn(3, ':');
                let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
                let ours = if v1 { controllers.split(',').any(|c| c == "cpu") } else { controllers.is_empty() };
                ours.then(|| path.to_owned())
            })
            .unwrap_or_else(|| "/".to_owned())
    }

    fn enter(&mut self, pid: u32) {
        let was = self.current(pid);
        std::fs::write(self.dir.join("cgroup.procs"), pid.to_string()).unwrap();
        self.moved.push((pid, was));
    }

    fn leave_all(&mut self) {
        for (pid, was) in self.moved.drain(..) {
            let _ = std::fs::write(self.root.join(was.trim_start_matches('/')).join("cgroup.procs"), pid.to_string());
        }
    }
}

impl Drop for CpuCap {
    fn drop(&mut self) {
        self.leave_all();
        let deadline = Instant::now() + Duration::from_secs(5);
        while std::fs::remove_dir(&self.dir).is_err() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        if self.dir.exists() {
            let _ = writeln!(std::io::stderr(), "LEAK: could not remove {}", self.dir.display());
        }
        if self.enabled_cpu && std::fs::write(self.root.join("cgroup.subtree_control"), "-cpu").is_err() {
            let _ = writeln!(std::io::stderr(), "LEAK: could not disable cpu in {}/cgroup.subtree_control", self.root.display());
        }
    }
}

#[test]
fn the_agent_throttled_to_one_percent_of_a_core_keeps_every_invariant() {
    simple_case("agent_cpu_throttled", |rig, record| {
        // 1 ms of CPU per 100 ms.
        let Some(mut cap) = CpuCap::new(1_000, 100_000) else {
            skip("agent_cpu_throttled", "no CPU controller to throttle the agent with; the case ran unthrottled");
            record.set("throttled", false);
            return;
        };
        let pid = rig.agent.as_ref().unwrap().pid() as u32;
        cap.enter(pid);
        record.set("throttled", true);
        // Without real-time group scheduling (v2 has none; CONFIG_RT_GROUP_SCHED on v1) the
        // agent's SCHED_FIFO loop thread is not held by a CFS quota: its other threads are.
        record.set("loop_thread_throttled", cap.dir.join("cpu.rt_runtime_us").exists());
        record.set("cpu_quota", "1 ms per 100 ms");
        run_for(rig, steady());
        let throttled_ticks = rig.metric("critmem_ticks_total").unwrap_or(0.0);
        cap.leave_all();
        drop(cap);
        record.set("ticks_when_released", throttled_ticks);
        run_for(rig, Duration::from_secs(1));
    });
}

#[test]
fn the_machines_cpus_saturated_by_other_work_keep_every_invariant() {
    simple_case("cpus_saturated", |rig, record| {
        let hogs: Vec<Helper> = (0..4).map(|_| Helper::shell("while :; do :; done", &[])).collect();
        record.set("cpu_hogs", hogs.len() as u64);
        run_for(rig, steady());
        drop(hogs);
    });
}
