//! The soak test: the agent running long under a changing workload, its resident memory,
//! file descriptors, journal size and tick cost sampled every second.

use super::*;

/// Resident memory may grow by at most this after the warm-up (allocator pools settling).
const RSS_GROWTH_BOUND_KIB: u64 = 2048;
/// Open descriptors may exceed the warm-up count by at most this (clients come and go).
const FD_GROWTH_BOUND: u64 = 16;

fn status_kib(pid: i32, key: &str) -> u64 {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    text.lines().find_map(|l| l.strip_prefix(key)?.split_whitespace().next()?.parse().ok()).unwrap_or(0)
}

fn fds(pid: i32) -> u64 {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map(|d| d.count() as u64).unwrap_or(0)
}

#[test]
fn soak_the_agent_under_a_changing_workload_without_growth() {
    let case = "soak";
    let Some((_lock, machine)) = chaos_machine(case) else { return };
    let length = std::env::var("CRITMEM_SOAK_S").ok().and_then(|s| s.parse().ok()).map_or(Duration::from_secs(70), Duration::from_secs);
    let warmup = (length / 6).max(Duration::from_secs(10));
    let mut record = Record::new(case);
    let mut rig = Rig::running(&machine);
    let pid = rig.agent.as_ref().unwrap().pid();
    let started = Instant::now();
    let mut rows = vec!["t_s,rss_kib,fds,journal_bytes,ticks,tick_cost_mean_us".to_owned()];
    let (mut last_ticks, mut last_cost_s) = (0.0, 0.0);
    let mut warm: Option<(u64, u64)> = None;
    let (mut rss_max, mut fds_max, mut journal_max) = (0u64, 0u64, 0u64);
    let mut extra: Option<Helper> = None;
    let mut changes = 0u64;
    let (mut groups_added, mut groups_removed) = (0u64, 0u64);
    let mut extra_group: Option<(String, Helper)> = None;
    let mut second = 0u64;
    while started.elapsed() < length {
        std::thread::sleep(Duration::from_secs(1));
        second += 1;
        // The workload changes every 10 s, in turn: the soft real-time worker leaves and a new
        // one comes (a client going and coming); 50 extra processes join the throughput
        // group, and leave; a third group comes (the agent creates it on a reload and a
        // process moves in) and goes (a reload lets go of it: its process is moved out and
        // the group removed).
        // No change in the last seconds: a worker started then would be stopped by the
        // teardown before it could answer.
        if second.is_multiple_of(10) && started.elapsed() + Duration::from_secs(5) < length {
            changes += 1;
            match (second / 10) % 3 {
                0 => {
                    let (summary, code) = rig.srt_worker.take().unwrap().stop();
                    assert_eq!((code, summary["checksum_failures"].as_u64()), (Some(0), Some(0)), "{summary}");
                    rig.start_srt_worker();
                }
                1 => match extra.take() {
                    Some(mut forker) => {
                        drop(forker.stdin.take());
                        forker.child.wait().unwrap();
                    }
                    None => {
                        extra = Some(super::faults::fork_into(&machine, &rig.nrt.group, 50).0);
                    }
                },
                _ => match extra_group.take() {
                    Some((cgroup, helper)) => {
                        rig.write_config(&rig.journal.clone());
                        rig.agent.as_ref().unwrap().signal(Signal::SIGHUP);
                        let group = critmem_linux::cgroup::GroupPath::new(&cgroup).unwrap();
                        wait_until("the extra group to be let go", Duration::from_secs(10), || !machine.backend.exists(&group));
                        // Moved out by the agent before it removed the group, still running.
                        let mut helper = helper;
                        assert!(helper.child.try_wait().unwrap().is_none(), "the extra group's process survived its group");
                        drop(helper);
                        groups_removed += 1;
                    }
                    None => {
                        let cgroup = format!("critmem-test-{}-extra-{second}", std::process::id());
                        rig.write_config_with(&rig.journal.clone(), Some(&cgroup));
                        rig.agent.as_ref().unwrap().signal(Signal::SIGHUP);
                        let group = critmem_linux::cgroup::GroupPath::new(&cgroup).unwrap();
                        wait_until("the agent to create the extra group", Duration::from_secs(10), || machine.backend.exists(&group));
                        let mut helper = Helper::python(ALLOCATE, &["8388608"]);
                        machine.backend.move_pid(&group, helper.pid()).unwrap();
                        helper.say("go");
                        helper.expect("ready");
                        extra_group = Some((cgroup, helper));
                        groups_added += 1;
                    }
                },
            }
        }
        let rss = status_kib(pid, "VmRSS:");
        let open = fds(pid);
        let journal = std::fs::metadata(&rig.journal).map(|m| m.len()).unwrap_or(0);
        let ticks = rig.metric("critmem_ticks_total").unwrap_or(0.0);
        let cost_s = rig.metric("critmem_tick_cost_seconds_sum").unwrap_or(0.0);
        let mean_us = if ticks > last_ticks { (cost_s - last_cost_s) / (ticks - last_ticks) * 1e6 } else { 0.0 };
        (last_ticks, last_cost_s) = (ticks, cost_s);
        rows.push(format!("{},{rss},{open},{journal},{ticks},{mean_us:.1}", started.elapsed().as_secs()));
        if started.elapsed() >= warmup {
            let (rss0, fds0) = *warm.get_or_insert((rss, open));
            let _ = (rss0, fds0);
            rss_max = rss_max.max(rss);
            fds_max = fds_max.max(open);
        }
        journal_max = journal_max.max(journal);
    }
    if let Some(mut forker) = extra.take() {
        drop(forker.stdin.take());
        forker.child.wait().unwrap();
    }
    if let Some((cgroup, _helper)) = extra_group.take() {
        rig.write_config(&rig.journal.clone());
        rig.agent.as_ref().unwrap().signal(Signal::SIGHUP);
        let group = critmem_linux::cgroup::GroupPath::new(&cgroup).unwrap();
        wait_until("the extra group to be let go", Duration::from_secs(10), || !machine.backend.exists(&group));
        groups_removed += 1;
    }
    record.set("groups_added", groups_added);
    record.set("groups_removed", groups_removed);
    assert!(groups_added > 0 && groups_added == groups_removed, "groups came and went: {groups_added} added, {groups_removed} removed");
    let (rss0, fds0) = warm.expect("the soak outlasted its warm-up");
    let hours = (length - warmup).as_secs_f64() / 3600.0;
    record.set("length_s", length.as_secs());
    record.set("workload_changes", changes);
    record.set("rss_after_warmup_kib", rss0);
    record.set("rss_max_kib", rss_max);
    record.set("rss_growth_kib_per_hour", ((rss_max - rss0.min(rss_max)) as f64 / hours).round());
    record.set("fds_after_warmup", fds0);
    record.set("fds_max", fds_max);
    record.set("journal_max_bytes", journal_max);
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("chaos");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("soak.csv"), rows.join("\n") + "\n").unwrap();
    let nrt = rig.nrt.group.clone();
    wait_until("the extra processes to be gone", Duration::from_secs(10), || machine.backend.pids(&nrt).unwrap().len() == 1);
    rig.finish(&mut record);
    assert!(rss_max <= rss0 + RSS_GROWTH_BOUND_KIB, "resident memory grew from {rss0} to {rss_max} KiB");
    assert!(fds_max <= fds0 + FD_GROWTH_BOUND, "descriptors grew from {fds0} to {fds_max}");
    record.write(changes);
}
