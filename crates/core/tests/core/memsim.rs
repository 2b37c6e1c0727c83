//! The memory model driven by the engine: faults lengthen and suspend jobs, shared-page
//! policies decide whether one task's evictions reach another, PSI follows the stalls.

use critmem_core::{load_toml_str, simulate, Nanos, SimOptions, SimResult};
use proptest::prelude::*;

use crate::common;

const SHARED_PAGES: &str = include_str!("../../../../examples/shared-pages.toml");

fn run(text: &str) -> SimResult {
    let s = load_toml_str(text, "test.toml").unwrap_or_else(|e| panic!("{e}"));
    simulate(&s, SimOptions { record_jobs: true, record_segments: false, check_invariants: true })
}

fn with_policy(policy: &str) -> String {
    SHARED_PAGES.replace("policy = \"private\"", &format!("policy = \"{policy}\""))
}

/// τ1's deadline misses per τ2 period (500 ms), by the period in which the job was released.
fn tau1_misses_per_tau2_period(r: &SimResult) -> Vec<usize> {
    let periods = (r.horizon.0 / 500_000_000) as usize;
    let mut per = vec![0; periods];
    for j in r.jobs.iter().filter(|j| j.task == 0 && j.missed()) {
        per[(j.release.0 / 500_000_000) as usize] += 1;
    }
    per
}

#[test]
fn without_shared_page_management_tau2_evictions_make_tau1_miss_in_every_tau2_period() {
    let r = run(&with_policy("private"));
    let per = tau1_misses_per_tau2_period(&r);
    // The first τ2 period only fills memory; from then on each τ2 job evicts shared pages.
    assert!(per[2..].iter().all(|&m| m >= 1), "{per:?}");
    assert_eq!(r.tasks[1].stats.deadline_misses, 0, "τ2 itself is schedulable");
    let m = r.memory().unwrap();
    assert!(m.tasks[0].stats.major_faults > 0 && m.tasks[1].stats.pages_swapped_out > 0);
}

#[test]
fn spc_spel_and_running_alone_keep_tau1_free_of_faults_after_warm_up() {
    for (policy, tau2_mb) in [("spc", 2), ("spel", 11)] {
        let text = with_policy(policy).replace("name = \"r2\"\nsize_mb = 2", &format!("name = \"r2\"\nsize_mb = {tau2_mb}"));
        let r = run(&text);
        assert_eq!(r.tasks[0].stats.deadline_misses, 0, "{policy}");
        assert_eq!(r.memory().unwrap().tasks[0].stats.major_faults, 0, "{policy}");
    }
    // τ1 alone: drop τ2 and its reservation.
    let alone =
        SHARED_PAGES.split("[[task]]\nname = \"tau2\"").next().unwrap().replace("[[reservation]]\nname = \"r2\"\nsize_mb = 2\n", "");
    let r = run(&alone);
    assert_eq!(r.tasks.len(), 1);
    assert_eq!(r.tasks[0].stats.deadline_misses, 0);
}

#[test]
fn a_spel_reservation_too_small_for_the_region_is_refused_by_name_in_mib() {
    // The bundled example's r2 (2 MiB) cannot give up a 10 MiB region: SPEL needs more than
    // 2560 pages (10 MiB), so at least 2561 pages: 10.004 MiB, rounded up to a thousandth.
    let e = load_toml_str(&with_policy("spel"), "sp.toml").unwrap_err().to_string();
    assert_eq!(
        e,
        "sp.toml: region[0].policy: SPEL cannot lock region \"shm\" (10 MiB): reservation \"r2\" has 2 MiB not yet locked, which must exceed the region; make its size_mb at least 10.004 (reservation[1]) or use policy `spc`"
    );
    let enlarged = with_policy("spel").replace("name = \"r2\"\nsize_mb = 2", "name = \"r2\"\nsize_mb = 10.004");
    assert!(load_toml_str(&enlarged, "sp.toml").is_ok());
}

#[test]
fn physical_memory_follows_the_shared_page_policy() {
    let mb = |r: &SimResult| {
        let m = r.memory().unwrap();
        m.stats.reserved_physical_frames as f64 * m.page_bytes as f64 / 1_048_576.0
    };
    // SPC conserves a page per shared page a non-owner maps: the sum of the reservations.
    assert_eq!(mb(&run(&with_policy("spc"))), 13.0);
    // SPEL locks the region once; each sharer gives its size up: 11 + 11 − 10.
    let spel = with_policy("spel").replace("name = \"r2\"\nsize_mb = 2", "name = \"r2\"\nsize_mb = 11");
    assert_eq!(mb(&run(&spel)), 12.0);
}

#[test]
fn psi_memory_stall_of_a_single_task_group_equals_its_fault_waits() {
    let r = run(&with_policy("private"));
    let m = r.memory().unwrap();
    let (name, tau1) = &m.groups[0];
    assert_eq!(name, "r1");
    let wait_us = m.tasks[0].fault_wait.as_us();
    // Swap-ins are refaults: waiting for one is an io and a memory stall; the kernel work of
    // the refault and of reclaim is a memory stall too (on the CPU, as Linux counts it).
    assert!(wait_us > 0);
    assert!(tau1.io.some_us.abs_diff(wait_us) <= 1, "{} vs {wait_us}", tau1.io.some_us);
    let costs = critmem_core::mem::FaultCosts::default();
    let evictions = m.reservations[0].1.evictions;
    let kernel_us = (m.tasks[0].stats.major_faults * costs.major.0 + evictions * costs.reclaim_per_page.0) / 1_000;
    let extra_us = tau1.memory.some_us - wait_us;
    assert!(
        extra_us.abs_diff(kernel_us) <= 2 + kernel_us / 100,
        "memory stall beyond the waits {extra_us} µs vs kernel work {kernel_us} µs"
    );
    assert_eq!(tau1.memory.some_us, tau1.memory.full_us, "one task: some == full");
    // τ2 never waits for the device (its memory stall is reclaim, on the CPU or preempted
    // in it: Linux's memstall flag stays set while a reclaiming task waits for the CPU).
    assert_eq!(m.groups[1].1.io.some_us, 0, "τ2 never waits for the device");
    assert_eq!(m.tasks[1].fault_wait, critmem_core::Nanos::ZERO);
}

#[test]
fn faults_lengthen_jobs_by_their_cpu_cost_and_waits() {
    let r = run(&with_policy("private"));
    let m = r.memory().unwrap();
    // τ1's busiest job is longer than its compute by at least the device time it waited.
    let worst = r.tasks[0].stats.max_response.unwrap();
    assert!(worst > Nanos::from_ms(40) + Nanos::from_ms(60), "{worst}");
    assert!(m.device.reads > 0 && m.device.writes > 0);
}

#[test]
fn each_task_reports_the_shared_pages_it_touched_per_job() {
    for (chunk_mb, passes) in [(0.5, 1), (1.0, 4), (3.0, 2)] {
        let text = with_policy("spc").replace(
            "{ pattern = \"sweep\", region = \"shm\", mb = 1, passes = 4 }",
            &format!("{{ pattern = \"sweep\", region = \"shm\", mb = {chunk_mb}, passes = {passes} }}"),
        );
        let r = run(&text);
        let m = r.memory().unwrap();
        // A sweep of `chunk_mb` touches that many distinct pages whatever the passes.
        let want = [("tau1", 2560.0), ("tau2", chunk_mb * 256.0)];
        for ((t, tm), (name, pages)) in r.tasks.iter().zip(&m.tasks).zip(want) {
            assert_eq!(t.name, name);
            let [(region, u)] = tm.shared_usage.as_slice() else { panic!("{name}: {:?}", tm.shared_usage) };
            assert_eq!(region, "shm");
            assert_eq!(u.windows, t.stats.completed, "{name}: one window per ended job (all complete here)");
            assert_eq!((u.avg_pages(), u.pages_max as f64), (pages, pages), "{name} with a {chunk_mb} MB chunk");
        }
        let json: serde_json::Value = serde_json::from_str(&r.to_json()).unwrap();
        assert_eq!(json["memory"]["tasks"][1]["shared_regions"][0]["mean_job_pages"], chunk_mb * 256.0);
    }
    // A task that maps no shared region reports none.
    let alone = SHARED_PAGES.replace("{ pattern = \"sweep\", region = \"shm\", mb = 1, passes = 4 },\n", "");
    let r = run(&alone);
    assert!(r.memory().unwrap().tasks[1].shared_usage.is_empty());
    let json: serde_json::Value = serde_json::from_str(&r.to_json()).unwrap();
    assert!(json["memory"]["tasks"][1].get("shared_regions").is_none() && json["memory"]["tasks"][0].get("shared_regions").is_some());
}

#[test]
fn same_seed_same_bytes_with_memory() {
    let text = with_policy("private");
    let (a, b) = (run(&text), run(&text));
    assert_eq!(a.to_json(), b.to_json());
    assert_eq!(a.jobs, b.jobs);
    assert_eq!(a.memory(), b.memory());
}

#[test]
fn memory_errors_name_the_key() {
    let err = |text: &str| load_toml_str(text, "m.toml").unwrap_err().to_string();
    let base =
        "[scheduler]\nkind = \"rm\"\n[run]\nhorizon_ms = 10\n[memory]\ntotal_mb = 16\n[[task]]\nname = \"a\"\nwcet_ms = 1\nperiod_ms = 5\n";
    assert!(err(&base.replace("total_mb = 16", "total_mb = 16\nswap = \"floppy\"")).starts_with("m.toml: memory.swap: unknown device"));
    assert!(err(&format!("{base}reservation = \"nope\"\n")).starts_with("m.toml: task[0].reservation: no reservation named"));
    assert!(err(&format!("{base}access = [{{ pattern = \"sweep\" }}]\n"))
        .starts_with("m.toml: task[0].access[0].region: the target has no pages"));
    assert!(err(&format!("{base}private_mb = 1\naccess = [{{ pattern = \"zigzag\" }}]\n"))
        .starts_with("m.toml: task[0].access[0].pattern: unknown pattern"));
    // Admission control: reservations larger than the machine are a load error, not a crash.
    let over = format!("{base}[[reservation]]\nname = \"big\"\nsize_mb = 64\n");
    assert!(err(&over).starts_with("m.toml: reservation[0].size_mb: "), "{}", err(&over));
    // Memory keys without [memory].
    let plain = base.replace("[memory]\ntotal_mb = 16\n", "");
    assert_eq!(err(&format!("{plain}private_mb = 1\n")), "m.toml: task[0].private_mb: needs a [memory] section");
}

/// One task on an 8 MiB machine with 4 KiB pages: each 10 ms job writes 2 MiB of private
/// memory, then (if `discard`) frees its second half.
fn grow_and_free(extra: &str) -> String {
    format!(
        "[scheduler]\nkind = \"rm\"\n[run]\nhorizon_ms = 100\n[memory]\ntotal_mb = 8\nsample_ms = 1\n\
         [[task]]\nname = \"t\"\nwcet_ms = 2\nperiod_ms = 10\nprivate_mb = 2\naccess_order = \"sequence\"\n\
         access = [{{ pattern = \"sweep\", mb = 2, writes = 1.0 }}{extra}]\n"
    )
}

#[test]
fn a_discard_frees_its_span_and_the_next_touch_is_a_zero_fill_minor_fault() {
    const PAGES_MB: u64 = 256;
    let keep = run(&grow_and_free(""));
    let free = run(&grow_and_free(", { pattern = \"discard\", offset_mb = 1, span_mb = 1 }"));
    let (k, f) = (&keep.memory().unwrap().tasks[0], &free.memory().unwrap().tasks[0]);
    assert_eq!(keep.jobs.len(), 10);
    // Without the discard only the first job faults; with it every job refills the freed MiB.
    assert_eq!(k.stats.minor_faults, 2 * PAGES_MB);
    assert_eq!(f.stats.minor_faults, 2 * PAGES_MB + 9 * PAGES_MB);
    assert_eq!((f.stats.major_faults, f.stats.pages_swapped_in, f.stats.pages_swapped_out), (0, 0, 0));
    assert_eq!(free.memory().unwrap().device.bytes_written, 0, "freed dirty pages are not written back");
    // Usage drops by the span at each job end: 2 MiB while a job runs, 1 MiB between jobs.
    assert_eq!(k.stats.resident_pages, 2 * PAGES_MB);
    assert_eq!(f.stats.resident_pages, PAGES_MB);
    let timeline = &free.memory().unwrap().timeline;
    let between_jobs = timeline.iter().filter(|s| s.time >= Nanos::from_ms(5) && (s.time.0 / 1_000_000) % 10 >= 5);
    assert!(between_jobs.clone().count() >= 40 && between_jobs.clone().all(|s| s.task_resident_pages[0] == PAGES_MB));
    let during_jobs = timeline.iter().filter(|s| s.time > Nanos::from_ms(10) && (s.time.0 / 1_000_000) % 10 < 5);
    assert!(during_jobs.clone().any(|s| s.task_resident_pages[0] > PAGES_MB), "usage grows again within each job");
    // Freeing costs no CPU: a job runs its compute plus its faults' kernel work only.
    let zero_fill = critmem_core::mem::FaultCosts::default().zero_fill;
    let job1 = &free.jobs[1];
    assert_eq!(job1.executed, job1.demand + Nanos(zero_fill.0 * PAGES_MB));
}

#[test]
fn discard_keys_are_checked() {
    let err = |extra: &str| load_toml_str(&grow_and_free(extra), "m.toml").unwrap_err().to_string();
    let d = ", { pattern = \"discard\", offset_mb = 1, span_mb = 1";
    for (key, bad) in [
        ("refs", "refs = 5"),
        ("mb", "mb = 1"),
        ("writes", "writes = 0.5"),
        ("passes", "passes = 2"),
        ("hot_share", "hot_share = 0.5"),
        ("pages", "pages = [1]"),
    ] {
        let line = err(&format!("{d}, {bad} }}"));
        assert_eq!(line, format!("m.toml: task[0].access[1].{key}: does not apply to pattern = \"discard\""));
    }
    let line = err(", { pattern = \"discard\", offset_mb = 1, span_mb = 2 }");
    assert!(line.starts_with("m.toml: task[0].access[1].span_mb: offset + span exceeds"), "{line}");
    let shm = grow_and_free(", { pattern = \"discard\", region = \"shm\" }")
        .replace("sample_ms = 1\n", "sample_ms = 1\n[[region]]\nname = \"shm\"\nsize_mb = 1\n");
    let line = load_toml_str(&shm, "m.toml").unwrap_err().to_string();
    assert!(line.starts_with("m.toml: task[0].access[1].region: pattern = \"discard\" frees private memory only"), "{line}");
    // Phases apply: a discard every other job from job 1.
    let s = load_toml_str(&grow_and_free(", { pattern = \"discard\", span_mb = 1, from_job = 1, every_jobs = 2 }"), "m.toml").unwrap();
    let r = simulate(&s, SimOptions { record_jobs: true, record_segments: false, check_invariants: true });
    assert_eq!(r.memory().unwrap().tasks[0].stats.minor_faults, 512 + 4 * 256, "jobs 2, 4, 6, 8 refill");
}

// ---------------------------------------------------------------------------------------------
// Random memory workloads through the engine. Machines are small (≤ 64 Mi), so the memory model
// checks every invariant — frames conserved, each in exactly one place, hard reservations within
// their size, page tables consistent — after every operation (`check_invariants`, in release too).

fn memory_scenario(
    cpus: usize,
    total_mb: u32,
    tasks: &[(u8, u8, u8, u8, bool)],
    policy: &str,
    swap: &str,
    res_mb: &[u32],
    seed: u64,
) -> String {
    let kind = if cpus == 1 { "rm" } else { "gedf" };
    let mut s = format!(
        "[machine]\ncpus = {cpus}\n[scheduler]\nkind = \"{kind}\"\n[run]\nhorizon_ms = 300\nseed = {seed}\n\
         [memory]\ntotal_mb = {total_mb}\nswap = \"{swap}\"\nsample_ms = 20\n\
         [[region]]\nname = \"shm\"\nsize_mb = 2\npolicy = \"{policy}\"\n"
    );
    for (i, mb) in res_mb.iter().enumerate() {
        let kind = if i % 2 == 0 { "hard" } else { "firm" };
        s += &format!("[[reservation]]\nname = \"r{i}\"\nsize_mb = {mb}\nkind = \"{kind}\"\n");
    }
    for (i, &(pattern, period, work, res, write)) in tasks.iter().enumerate() {
        let period_ms = [10, 20, 25, 50][usize::from(period % 4)];
        let wcet = f64::from(work % 8 + 1) * period_ms as f64 / 40.0;
        s += &format!("[[task]]\nname = \"t{i}\"\nwcet_ms = {wcet}\nperiod_ms = {period_ms}\nprivate_mb = 0.5\n");
        if !res_mb.is_empty() && res % 3 != 0 {
            s += &format!("reservation = \"r{}\"\n", usize::from(res) % res_mb.len());
        }
        let writes = if write { 0.3 } else { 0.0 };
        let stream = match pattern % 4 {
            0 => format!("{{ pattern = \"sweep\", region = \"shm\", mb = 0.5, writes = {writes} }}"),
            1 => format!("{{ pattern = \"random\", refs = 200, writes = {writes} }}"),
            2 => format!("{{ pattern = \"hotcold\", region = \"shm\", refs = 300, hot_fraction = 0.1, writes = {writes} }}"),
            _ => format!("{{ pattern = \"sweep\", mb = 0.25, passes = 2, writes = {writes} }}"),
        };
        // Some tasks free part of their private memory every other job.
        let discard = if res & 4 != 0 { ", { pattern = \"discard\", offset_mb = 0.125, span_mb = 0.25, every_jobs = 2 }" } else { "" };
        s += &format!(
            "access = [{stream}, {{ pattern = \"random\", region = \"shm\", refs = 50 }}{discard}]\naccess_order = \"interleave\"\n"
        );
    }
    s
}

proptest! {
    #![proptest_config(common::seeded_config("memsim", 64))]

    #[test]
    fn random_memory_workloads_keep_every_invariant_and_a_valid_schedule(
        cpus in 1usize..3,
        total_mb in 4u32..12,
        tasks in prop::collection::vec((any::<u8>(), any::<u8>(), any::<u8>(), any::<u8>(), any::<bool>()), 1..5),
        policy in prop::sample::select(vec!["global", "private", "first-touch", "spc", "spel", "auto"]),
        swap in prop::sample::select(vec!["hdd", "slow-ssd", "fast-ssd", "zram"]),
        res_mb in prop::collection::vec(1u32..4, 0..3),
        seed in any::<u16>(),
    ) {
        let text = memory_scenario(cpus, total_mb, &tasks, policy, swap, &res_mb, u64::from(seed));
        let s = match load_toml_str(&text, "gen.toml") {
            Ok(s) => s,
            // Admission control may refuse the reservations (or SPEL's lock): a one-line error.
            Err(e) => {
                let line = e.to_string();
                prop_assert!(!line.contains('\n'));
                prop_assert!(line.contains("reservation") || line.contains("region"), "{line}\n{text}");
                return Ok(());
            }
        };
        let r = simulate(&s, SimOptions { record_jobs: true, record_segments: true, check_invariants: true });
        let m = r.memory().unwrap();
        let st = m.stats;
        prop_assert!(st.global_free_frames <= st.total_frames);
        for (_, res) in &m.reservations {
            if res.kind == critmem_core::mem::ReservationKind::Hard {
                prop_assert!(res.frames_held <= res.size_pages, "hard reservation over its size\n{text}");
            }
        }
        for (_, g) in &m.groups {
            prop_assert!(g.memory.full_us <= g.memory.some_us && g.io.full_us <= g.io.some_us);
        }
        // Every executed nanosecond is in a segment; no CPU runs two jobs at once.
        let mut segs = r.segments.clone();
        segs.sort_by_key(|s| (s.cpu, s.start));
        for w in segs.windows(2) {
            if w[0].cpu == w[1].cpu {
                prop_assert!(w[0].end <= w[1].start);
            }
        }
        for j in &r.jobs {
            let ran: u64 = r.segments.iter().filter(|s| s.task == j.task && s.job == j.index).map(|s| (s.end - s.start).0).sum();
            prop_assert_eq!(ran, j.executed.0);
            if j.outcome == critmem_core::Outcome::Completed {
                prop_assert!(j.executed >= j.demand, "faults only add CPU time");
            }
        }
        println!("seed {seed}: ok");
    }
}

// ---------------------------------------------------------------------------------------------
// Memory-limited groups without a controller: `min_mb`, `low_mb` and `high_mb` as cgroup v2
// defines them, and the OOM kill when nothing is left to reclaim.

/// Group `a`'s task sweeps (and dirties) 12 MiB per 20 ms job, group `b`'s 8 MiB, on a 16 MiB
/// machine with swap: together they need 4 MiB more than there is. `a_keys` and `b_keys` are
/// each group's extra keys.
fn two_groups(a_keys: &str, b_keys: &str) -> String {
    format!(
        r#"
[scheduler]
kind = "edf"
[run]
horizon_ms = 200
[memory]
total_mb = 16
swap = "fast-ssd"
[[group]]
name = "a"
{a_keys}
[[group]]
name = "b"
{b_keys}
[[task]]
name = "ta"
wcet_ms = 5
period_ms = 20
group = "a"
private_mb = 12
access = [{{ pattern = "sweep", writes = 1.0 }}]
[[task]]
name = "tb"
wcet_ms = 5
period_ms = 20
group = "b"
private_mb = 8
access = [{{ pattern = "sweep", writes = 1.0 }}]
"#
    )
}

const MIB_PAGES: u64 = 256;

#[test]
fn without_protection_both_groups_thrash() {
    let r = run(&two_groups("", ""));
    let m = r.memory().unwrap();
    for t in 0..2 {
        assert!(m.tasks[t].stats.major_faults > 100, "{}: {:?}", r.tasks[t].name, m.tasks[t].stats);
        assert!(r.tasks[t].stats.deadline_misses > 0);
        assert_eq!(r.tasks[t].stats.killed, 0);
    }
}

#[test]
fn memory_min_holds_a_groups_pages_and_the_group_left_without_memory_is_oom_killed() {
    // Every frame is under memory.min (12 + 4 MiB): nothing can be reclaimed, so `b`'s task,
    // which needs more than its 4 MiB, is killed (as Linux's OOM killer would) and `a` is untouched.
    let r = run(&two_groups("min_mb = 12", "min_mb = 4"));
    let m = r.memory().unwrap();
    let (ta, tb) = (&r.tasks[0].stats, &r.tasks[1].stats);
    assert_eq!((ta.completed, ta.deadline_misses, m.tasks[0].stats.major_faults), (10, 0, 0));
    assert_eq!(m.tasks[0].stats.resident_pages, 12 * MIB_PAGES);
    assert_eq!((tb.completed, tb.killed, m.tasks[1].oom_kills), (0, 10, 10));
    assert_eq!(m.tasks[0].oom_kills, 0);
    let killed: Vec<_> = r.jobs.iter().filter(|j| j.task == 1).map(|j| j.outcome).collect();
    assert_eq!(killed, vec![critmem_core::Outcome::Killed; 10]);
}

#[test]
fn memory_low_shields_a_group_from_reclaim_while_others_have_memory_to_give() {
    // `a` is protected below 12 MiB; `b` has no protection, so reclaim takes only from `b`, which
    // then thrashes within the 4 MiB left but, unlike under memory.min, is never killed.
    let r = run(&two_groups("low_mb = 12", ""));
    let m = r.memory().unwrap();
    assert_eq!((r.tasks[0].stats.deadline_misses, m.tasks[0].stats.major_faults), (0, 0));
    assert_eq!(m.tasks[0].stats.resident_pages, 12 * MIB_PAGES);
    assert!(m.tasks[1].stats.major_faults > 100);
    assert_eq!((r.tasks[1].stats.killed, m.tasks[1].oom_kills), (0, 0));
    // memory.low is best effort: when every frame is under it, it is breached rather than
    // anyone being killed.
    let r = run(&two_groups("low_mb = 12", "low_mb = 4"));
    let m = r.memory().unwrap();
    assert!(m.tasks[0].stats.major_faults > 0, "{:?}", m.tasks[0].stats);
    assert_eq!((r.tasks[0].stats.killed, r.tasks[1].stats.killed), (0, 0));
}

#[test]
fn memory_high_keeps_a_group_at_its_mark_by_reclaiming_its_own_pages() {
    // `b` throttled at 3 MiB: it reclaims its own pages (and stalls doing so) and leaves `a`
    // room for its whole 12 MiB, although memory is not full.
    let r = run(&two_groups("", "high_mb = 3"));
    let m = r.memory().unwrap();
    assert!(m.timeline.iter().all(|s| s.task_resident_pages[1] <= 3 * MIB_PAGES), "b above its high mark");
    assert!(m.timeline.iter().any(|s| s.task_resident_pages[1] >= 3 * MIB_PAGES - 16), "b never reached its high mark");
    assert_eq!((r.tasks[0].stats.deadline_misses, m.tasks[0].stats.major_faults), (0, 0));
    let (name, b) = &m.limit_groups[1];
    assert_eq!(name, "b");
    assert!(b.evictions > 0 && m.tasks[1].stats.major_faults > 0);
    let b_psi = &m.groups.iter().find(|(n, _)| n == "b").expect("group b has PSI").1;
    assert!(b_psi.memory.some_us > 0, "throttled group stalls: {b_psi:?}");
    assert_eq!(r.tasks[1].stats.killed, 0);
}

/// One task paging over 8 MiB with 4 MiB of memory.
fn thrashing(swap: &str, swap_in_cpu_us: f64) -> SimResult {
    run(&format!(
        r#"
[scheduler]
kind = "rm"
[run]
horizon_ms = 2000
[memory]
total_mb = 4
page_bytes = 65536
readahead_pages = 1
swap = {swap}
swap_in_cpu_us = {swap_in_cpu_us}
[[task]]
name = "t"
wcet_ms = 5
period_ms = 100
private_mb = 8
access = [{{ pattern = "sweep", mb = 8, writes = 1.0 }}]
"#
    ))
}

#[test]
fn a_swap_device_given_by_its_figures_behaves_as_the_preset_with_the_same_figures() {
    let preset = thrashing("\"slow-ssd\"", 0.0);
    let own = thrashing("{ name = \"mine\", read_latency_us = 90, write_latency_us = 60, read_mb_per_s = 560, write_mb_per_s = 510 }", 0.0);
    assert_eq!(preset.tasks[0].stats, own.tasks[0].stats);
    assert_eq!(own.memory().unwrap().swap, "mine");
    let slower = thrashing("{ read_latency_us = 900, write_latency_us = 600, read_mb_per_s = 56, write_mb_per_s = 51 }", 0.0);
    assert!(slower.tasks[0].stats.max_response > preset.tasks[0].stats.max_response);
    let e = load_toml_str("[scheduler]\nkind = \"rm\"\n[memory]\nswap = { read_latency_us = -1, write_latency_us = 1, read_mb_per_s = 1, write_mb_per_s = 1 }\n[[task]]\nname = \"t\"\nwcet_ms = 1\nperiod_ms = 10\n", "d.toml")
        .unwrap_err()
        .to_string();
    assert!(e.contains("memory.swap.read_latency_us") && e.contains("-1"), "{e}");
    let e = load_toml_str(
        "[scheduler]\nkind = \"rm\"\n[memory]\nswap = { read_latency_us = 1 }\n[[task]]\nname = \"t\"\nwcet_ms = 1\nperiod_ms = 10\n",
        "d.toml",
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("write_latency_us"), "{e}");
    let e = load_toml_str(
        "[scheduler]\nkind = \"rm\"\n[memory]\nswap = \"floppy\"\n[[task]]\nname = \"t\"\nwcet_ms = 1\nperiod_ms = 10\n",
        "d.toml",
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("floppy") && e.contains("slow-ssd"), "{e}");
}

#[test]
fn swap_in_cpu_lengthens_jobs_without_counting_as_memory_stall() {
    let plain = thrashing("\"fast-ssd\"", 0.0);
    let costly = thrashing("\"fast-ssd\"", 200.0);
    let m = |r: &SimResult| r.memory().unwrap().tasks[0].stats.pages_swapped_in;
    let swapped = m(&costly);
    assert!(swapped > 100 && swapped.abs_diff(m(&plain)) * 50 < swapped, "{swapped} vs {}", m(&plain));
    let mean = |r: &SimResult| r.tasks[0].stats.total_response as f64 / r.tasks[0].stats.completed as f64;
    // 200 µs per page swapped in, spread over the run's jobs.
    let added_ms = (mean(&costly) - mean(&plain)) / 1e6;
    let expected_ms = 0.2 * swapped as f64 / costly.tasks[0].stats.completed as f64;
    assert!((added_ms - expected_ms).abs() < 0.1 * expected_ms, "{added_ms} ms added, {expected_ms} expected");
    let stall = |r: &SimResult| r.memory().unwrap().groups[0].1.memory.some_us;
    let (a, b) = (stall(&plain) as f64, stall(&costly) as f64);
    assert!((b - a).abs() < 0.1 * a, "memory stall {a} µs vs {b} µs");
}
