//! CPU and I/O bandwidth of controlled groups: what a controller observes of a group's CPU
//! time and CPU wait, and how `SetCpuMax` and `SetIoMax` hold the group's tasks.

use critmem_core::{load_toml_str, SimOptions, SimResult};
use critmem_policy::{Action, Controller, Observation};
use proptest::prelude::*;
use std::sync::{Arc, Mutex};

const MIB: u64 = 1 << 20;
const MS_US: u64 = 1_000;

/// Acts as scripted at given ticks (1-based) and keeps every observation.
struct Script {
    at: Vec<(usize, Vec<Action>)>,
    seen: Arc<Mutex<Vec<Observation>>>,
}

impl Controller for Script {
    fn name(&self) -> &str {
        "script"
    }

    fn tick(&mut self, obs: &Observation) -> Vec<Action> {
        let mut seen = self.seen.lock().unwrap();
        seen.push(obs.clone());
        let tick = seen.len();
        self.at.iter().filter(|(t, _)| *t == tick).flat_map(|(_, a)| a.clone()).collect()
    }
}

/// Runs `text` under a [`Script`]; the result and every observation (one per 5 ms tick).
fn run_script(text: &str, at: Vec<(usize, Vec<Action>)>, check_invariants: bool) -> (SimResult, Vec<Observation>) {
    let s = load_toml_str(text, "bandwidth.toml").unwrap_or_else(|e| panic!("{e}"));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let script = Script { at, seen: seen.clone() };
    let opts = SimOptions { record_jobs: false, record_segments: false, check_invariants };
    let r = critmem_core::simulate_with_controller(&s, opts, Box::new(script), "script").expect("[control]");
    let seen = seen.lock().unwrap().clone();
    (r, seen)
}

/// One CPU under rate-monotonic scheduling: `batch` (40 ms every 50 ms, so the higher
/// priority) and `srt` (30 ms every 100 ms), each alone in its group, touching little memory.
fn one_cpu(horizon_ms: u32) -> String {
    format!(
        r#"
[machine]
cpus = 1
[scheduler]
kind = "rm"
[run]
horizon_ms = {horizon_ms}
[memory]
total_mb = 64
[control]
controller = "greedy"
interval_ms = 5
[[group]]
name = "srt"
role = "soft-rt"
bcet_ms = 30
floor_mb = 2
[[group]]
name = "batch"
floor_mb = 2
[[task]]
name = "batch"
wcet_ms = 40
period_ms = 50
group = "batch"
private_mb = 1
access = [{{ pattern = "sweep" }}]
[[task]]
name = "srt"
wcet_ms = 30
period_ms = 100
group = "srt"
private_mb = 1
access = [{{ pattern = "sweep" }}]
"#
    )
}

fn misses(r: &SimResult, task: &str) -> u64 {
    r.tasks.iter().find(|t| t.name == task).unwrap().stats.deadline_misses
}

/// Group `g`'s CPU time (µs) at every tick that falls on a 100 ms boundary.
fn usage_per_period(seen: &[Observation], g: usize) -> Vec<u64> {
    let at_boundaries: Vec<u64> = seen.iter().filter(|o| o.now_ns % 100_000_000 == 0).map(|o| o.groups[g].cpu_usage_us).collect();
    at_boundaries.windows(2).map(|w| w[1] - w[0]).collect()
}

#[test]
fn a_groups_cpu_time_and_wait_are_observed() {
    let (_, seen) = run_script(&one_cpu(1001), Vec::new(), true);
    let last = seen.last().unwrap();
    assert_eq!(last.cpus, 1);
    // 0.8 + 0.3 of one CPU is asked: the CPU is never idle, and the lower-priority srt waits.
    let (srt, batch) = (&last.groups[0], &last.groups[1]);
    assert_eq!(srt.cpu_usage_us + batch.cpu_usage_us, last.now_ns / 1_000, "a busy CPU's time is all someone's");
    assert_eq!(usage_per_period(&seen, 1), vec![80 * MS_US; 9], "batch runs all it asks: 40 ms twice per 100 ms");
    assert!(srt.stall.cpu_some_us > 100 * MS_US, "srt waits behind batch: {:?}", srt.stall);
    // batch, the highest priority, waits only when it arrives while srt runs: never here, as
    // rate-monotonic preempts srt at once.
    assert_eq!(batch.stall.cpu_some_us, 0);
    for w in seen.windows(2) {
        let (a, b) = (&w[0].groups[0], &w[1].groups[0]);
        let dt_us = (w[1].now_ns - w[0].now_ns) / 1_000;
        assert!(b.cpu_usage_us >= a.cpu_usage_us && b.stall.cpu_some_us >= a.stall.cpu_some_us);
        assert!((b.cpu_usage_us - a.cpu_usage_us) + (b.stall.cpu_some_us - a.stall.cpu_some_us) <= dt_us);
    }
}

#[test]
fn a_cpu_limit_holds_the_group_to_its_quota_in_every_period_and_frees_the_cpu() {
    let limit = vec![(1, vec![Action::SetCpuMax { group: 1, millicpus: Some(500) }])];
    let (r, seen) = run_script(&one_cpu(1001), limit, true);
    // From the first whole period on, batch runs exactly half of each 100 ms.
    assert_eq!(usage_per_period(&seen, 1), vec![50 * MS_US; 9]);
    assert_eq!(seen.last().unwrap().groups[1].bandwidth.cpu_millicpus, Some(500));
    // Without the limit srt misses deadlines behind batch; with it, srt has the CPU it needs.
    let (free, _) = run_script(&one_cpu(1001), Vec::new(), false);
    assert!(misses(&free, "srt") >= 8, "unlimited: srt missed {}", misses(&free, "srt"));
    assert_eq!(misses(&r, "srt"), 0);
    assert!(misses(&r, "batch") > 0, "batch cannot finish 40 ms in 50 ms at half a CPU");
}

#[test]
fn clearing_a_cpu_limit_lets_a_throttled_group_run_at_once() {
    // Limited at 5 ms to the smallest quota (1 ms per 100 ms), cleared at 50 ms.
    let script =
        vec![(1, vec![Action::SetCpuMax { group: 1, millicpus: Some(1) }]), (10, vec![Action::SetCpuMax { group: 1, millicpus: None }])];
    let (_, seen) = run_script(&one_cpu(200), script, true);
    let usage = |tick: usize| seen[tick - 1].groups[1].cpu_usage_us;
    // By 5 ms batch ran 5 ms; the new limit gives it a whole quota, 1 ms, and then holds it.
    assert_eq!(usage(1), 5 * MS_US);
    assert_eq!(usage(2), 6 * MS_US);
    assert_eq!(usage(10), 6 * MS_US, "held while limited");
    assert_eq!(seen[9].groups[1].bandwidth.cpu_millicpus, Some(10), "one millicpu asked, the smallest applied");
    assert_eq!(usage(11), 11 * MS_US, "runs again the moment the limit is cleared");
}

/// Two CPUs: `srt` sweeping 8 MiB per 100 ms job with all of it resident, and `batch`
/// thrashing 24 MiB of random references in 8 MiB; both on one slow swap device.
fn shared_swap(horizon_ms: u32) -> String {
    format!(
        r#"
[machine]
cpus = 2
[scheduler]
kind = "pfp"
[run]
horizon_ms = {horizon_ms}
[memory]
total_mb = 40
swap = "slow-ssd"
[control]
controller = "greedy"
interval_ms = 5
[[group]]
name = "srt"
role = "soft-rt"
bcet_ms = 20
floor_mb = 2
[[group]]
name = "batch"
floor_mb = 8
max_mb = 8
[[task]]
name = "srt"
wcet_ms = 20
period_ms = 100
group = "srt"
cpu = 0
private_mb = 8
access = [{{ pattern = "sweep", writes = 0.0 }}]
[[task]]
name = "batch"
wcet_ms = 40
period_ms = 50
deadline_ms = 50
group = "batch"
cpu = 1
private_mb = 24
access = [{{ pattern = "random", refs = 4000, writes = 0.5 }}]
"#
    )
}

#[test]
fn an_io_limit_holds_the_groups_swap_traffic_under_it() {
    let read = 4 * MIB;
    let write = 2 * MIB;
    let limit = vec![(1, vec![Action::SetIoMax { group: 1, read_bytes_per_s: Some(read), write_bytes_per_s: Some(write) }])];
    let (free, _) = run_script(&shared_swap(1000), Vec::new(), false);
    let (held, seen) = run_script(&shared_swap(1000), limit, true);
    let b = seen.last().unwrap().groups[1].bandwidth;
    assert_eq!((b.io_read_bytes_per_s, b.io_write_bytes_per_s), (Some(read), Some(write)));
    let page = held.memory().unwrap().page_bytes;
    let swapped_in = |r: &SimResult| r.memory().unwrap().tasks[1].stats.pages_swapped_in * page;
    let written = |r: &SimResult| r.memory().unwrap().device.bytes_written;
    // Unlimited, batch reads and writes far more than its limits would let through in 1 s.
    assert!(swapped_in(&free) > 4 * read && written(&free) > 4 * write, "{} {}", swapped_in(&free), written(&free));
    // Held: what went through since the limit (at 5 ms) fits the rate, plus one request
    // (srt, its working set resident from its first job on, writes nothing back).
    assert!(swapped_in(&held) <= read + 64 * page, "read {} bytes", swapped_in(&held));
    assert!(written(&held) <= write + page, "wrote {} bytes", written(&held));
    // The wait shows as batch's I/O and memory stall.
    let stall = seen.last().unwrap().groups[1].stall;
    assert!(stall.io_some_us > 500 * MS_US && stall.memory_some_us > 500 * MS_US, "{stall:?}");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// Limits set and cleared at any ticks keep the engine's invariants (checked after every
    /// event), and no group ever runs more than its quota in a period while limited.
    #[test]
    fn limits_set_and_cleared_at_random_keep_every_invariant(
        steps in prop::collection::vec((1usize..80, 0usize..2, prop::option::of(1u64..1200), prop::option::of(1u64..(64 * MIB))), 1..8),
    ) {
        let script: Vec<(usize, Vec<Action>)> = steps
            .iter()
            .map(|&(tick, group, millicpus, io)| {
                (tick, vec![Action::SetCpuMax { group, millicpus }, Action::SetIoMax { group, read_bytes_per_s: io, write_bytes_per_s: io }])
            })
            .collect();
        let (_, seen) = run_script(&shared_swap(400), script.clone(), true);
        // Over each period a limit held throughout (every tick after its start shows it in
        // force), usage is at most the quota.
        let at_boundaries: Vec<&Observation> = seen.iter().filter(|o| o.now_ns % 100_000_000 == 0).collect();
        for g in 0..2 {
            for w in at_boundaries.windows(2) {
                let (a, b) = (w[0], w[1]);
                let in_force: Vec<Option<u64>> = seen
                    .iter()
                    .filter(|o| o.now_ns > a.now_ns && o.now_ns <= b.now_ns)
                    .map(|o| o.groups[g].bandwidth.cpu_millicpus)
                    .collect();
                if let Some(m) = in_force[0].filter(|_| in_force.iter().all(|h| *h == in_force[0])) {
                    let used = b.groups[g].cpu_usage_us - a.groups[g].cpu_usage_us;
                    prop_assert!(used <= m * 100, "group {g} used {used} µs of a {m}-millicpu limit");
                }
            }
        }
    }
}

#[test]
fn a_groups_declared_limits_hold_from_the_start() {
    let declared = one_cpu(1001)
        .replace("name = \"batch\"\nfloor_mb = 2", "name = \"batch\"\nfloor_mb = 2\ncpu_millicpus = 500\nio_read_mb_per_s = 4");
    let (r, seen) = run_script(&declared, Vec::new(), true);
    let b = seen[0].groups[1].bandwidth;
    assert_eq!((b.cpu_millicpus, b.io_read_bytes_per_s, b.io_write_bytes_per_s), (Some(500), Some(4_000_000), None));
    assert_eq!(usage_per_period(&seen, 1), vec![50 * MS_US; 9]);
    assert_eq!(seen[0].groups[1].cpu_usage_us, 5 * MS_US, "half of the first 100 ms, and batch runs first");
    assert_eq!(misses(&r, "srt"), 0);
    // Under the scenario's own controller, Greedy, which uses no CPU figures: held the same.
    let s = load_toml_str(&declared, "declared.toml").unwrap();
    let greedy = critmem_core::simulate(&s, SimOptions { record_jobs: false, record_segments: false, check_invariants: true });
    assert_eq!((misses(&greedy, "srt"), misses(&greedy, "batch")), (misses(&r, "srt"), misses(&r, "batch")));
    assert!(misses(&greedy, "batch") > 0);
}

#[test]
fn declared_limits_below_what_a_platform_applies_are_refused_by_key() {
    for (key, value, says) in [
        ("cpu_millicpus", "5", "must be at least 10"),
        ("io_read_mb_per_s", "0.5", "at least 1.048576 MB/s"),
        ("io_write_mb_per_s", "-3", "at least 1.048576 MB/s"),
    ] {
        let text = one_cpu(100).replace("name = \"batch\"\nfloor_mb = 2", &format!("name = \"batch\"\nfloor_mb = 2\n{key} = {value}"));
        let err = load_toml_str(&text, "bad.toml").unwrap_err().to_string();
        assert!(err.contains(&format!("group[1].{key}")) && err.contains(says), "{err}");
        assert_eq!(err.lines().count(), 1, "{err}");
    }
}
