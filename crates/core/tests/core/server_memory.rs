//! A server's memory reservation (`reserve.memory_mib`) bounds the resident pages of every task
//! under it in the page-level model: a subtree at its bound reclaims its own pages and never a
//! sibling's; children hold what their parent grants; `--json` servers report the reservation
//! and the most their subtree held.

use crate::common;
use critmem_core::mem::BoundKind;
use critmem_core::{load_toml_str, simulate, SimOptions, SimResult};
use proptest::prelude::*;
use rand::{Rng, SeedableRng};

fn run(text: &str) -> SimResult {
    let s = load_toml_str(text, "t.toml").unwrap_or_else(|e| panic!("{e}"));
    simulate(&s, SimOptions { record_jobs: true, record_segments: false, check_invariants: true })
}

/// Two deferrable servers under an fp root on a 64 MiB machine: `a` reserves `a_reserve`, and
/// its task sweeps 16 MiB of private memory per job; `b` reserves 16 MiB and its task sweeps
/// 4 MiB.
fn siblings(a_reserve: &str) -> String {
    format!(
        r#"
[scheduler]
kind = "fp"

[run]
horizon_ms = 400

[memory]
total_mb = 64
page_bytes = 65536
swap = "fast-ssd"
sample_ms = 1

[[scheduler.server]]
name = "a"
kind = "deferrable"
budget_ms = 5
period_ms = 10
priority = 0
policy = "fp"
reserve = {a_reserve}

[[scheduler.server]]
name = "b"
kind = "deferrable"
budget_ms = 5
period_ms = 10
priority = 1
policy = "fp"
reserve = {{ memory_mib = 16 }}

[[task]]
name = "big"
server = "a"
priority = 0
wcet_ms = 2
period_ms = 20
private_mb = 16
access = [{{ pattern = "sweep", mb = 16, writes = 1.0 }}]

[[task]]
name = "small"
server = "b"
priority = 0
wcet_ms = 2
period_ms = 20
private_mb = 4
access = [{{ pattern = "sweep", mb = 4 }}]
"#
    )
}

const PAGES_PER_MIB: u64 = 16;

#[test]
fn a_server_reserving_8_mib_keeps_at_most_8_mib_resident_at_every_sample_and_only_its_tasks_fault() {
    let r = run(&siblings("{ memory_mib = 8 }"));
    let m = r.memory().expect("[memory]");
    assert!(m.timeline.len() >= 400, "{} samples", m.timeline.len());
    for s in &m.timeline {
        assert!(s.server_pages[0] <= 8 * PAGES_PER_MIB, "at {:?} server a holds {} pages", s.time, s.server_pages[0]);
        assert!(s.task_resident_pages[0] <= 8 * PAGES_PER_MIB, "at {:?} task big holds {} pages", s.time, s.task_resident_pages[0]);
        assert_eq!(s.server_pages[0], s.task_resident_pages[0], "one task with private memory only");
    }
    assert_eq!(m.timeline.iter().map(|s| s.server_pages[0]).max(), Some(8 * PAGES_PER_MIB), "it fills its reservation");
    let (big, small) = (&m.tasks[0].stats, &m.tasks[1].stats);
    assert!(big.major_faults > 50, "the bounded task pages against its own reservation: {big:?}");
    assert_eq!(small.major_faults, 0, "the sibling with room never faults on the device: {small:?}");
    assert_eq!(small.resident_pages, 4 * PAGES_PER_MIB);
    // The machine had room: every eviction was the reservation's own.
    assert_eq!(m.stats.global_evictions, 0);
    assert!(m.server_bounds[0].1.evictions > 0 && m.server_bounds[1].1.evictions == 0, "{:?}", m.server_bounds);
    // Without the reservation the same task keeps its 16 MiB and only zero-fills.
    let free = run(&siblings("{ io_bytes_per_s = 1000 }"));
    let fm = free.memory().expect("[memory]");
    assert_eq!(fm.tasks[0].stats.major_faults, 0);
    assert_eq!(fm.tasks[0].stats.resident_pages, 16 * PAGES_PER_MIB);
}

#[test]
fn a_server_under_mc2s_level_c_bounds_its_tasks_pages_as_a_hires_server_does() {
    let mc2 = siblings("{ memory_mib = 8 }")
        .replace("[scheduler]\nkind = \"fp\"", "[machine]\ncpus = 2\n[scheduler]\nkind = \"mc2\"")
        .replace("priority = 0\npolicy = \"fp\"", "policy = \"edf\"")
        .replace("priority = 1\npolicy = \"fp\"", "policy = \"edf\"")
        .replace("server = \"a\"\npriority = 0", "server = \"a\"\ncriticality = \"C\"")
        .replace("server = \"b\"\npriority = 0", "server = \"b\"\ncriticality = \"C\"");
    let r = run(&mc2);
    let m = r.memory().expect("[memory]");
    assert!(m.timeline.iter().all(|s| s.server_pages[0] <= 8 * PAGES_PER_MIB && s.task_resident_pages[0] <= 8 * PAGES_PER_MIB));
    assert!(m.tasks[0].stats.major_faults > 50 && m.tasks[1].stats.major_faults == 0, "{:?}", m.tasks);
    let a = r.servers()[0].memory.as_ref().expect("a reserves memory");
    assert_eq!((a.reserved_bytes, a.kind, a.peak_resident_pages), (Some(8 << 20), Some("hard"), 8 * PAGES_PER_MIB));
    // A server under a level has no parent: it reserves from the machine, at most all of it.
    let e = load_toml_str(&mc2.replace("memory_mib = 8", "memory_mib = 65"), "t.toml").unwrap_err().to_string();
    assert!(
        e.starts_with(
            "t.toml: scheduler.server[0].reserve.memory_mib: server \"a\" reserves 65.00 MiB hard, more than the machine ([memory]'s total) has left"
        ),
        "{e}"
    );
}

#[test]
fn servers_report_their_memory_reservation_and_peak_resident_pages() {
    let r = run(&siblings("{ memory_mib = 8, kind = \"soft\" }"));
    let servers = r.servers();
    let a = servers[0].memory.as_ref().expect("a reserves memory");
    assert_eq!((a.reserved_bytes, a.kind, a.peak_resident_pages), (Some(8 << 20), Some("soft"), 8 * PAGES_PER_MIB));
    let b = servers[1].memory.as_ref().expect("b reserves memory");
    assert_eq!((b.reserved_bytes, b.kind, b.peak_resident_pages), (Some(16 << 20), Some("hard"), 4 * PAGES_PER_MIB));
    let json: serde_json::Value = serde_json::from_str(&r.to_json()).unwrap();
    let a = &json["servers"][0];
    assert_eq!(a["memory_reserved_mb"], 8.0);
    assert_eq!(a["memory_kind"], "soft");
    assert_eq!(a["peak_resident_pages"], 128);
    // A scenario whose servers reserve no memory reports none of it.
    let plain = run(&siblings("{ io_bytes_per_s = 1000 }").replace("reserve = { memory_mib = 16 }", ""));
    assert!(plain.servers().iter().all(|s| s.memory.is_none()));
    let json: serde_json::Value = serde_json::from_str(&plain.to_json()).unwrap();
    assert!(json["servers"][0].get("memory_reserved_mb").is_none() && json["servers"][0].get("peak_resident_pages").is_none());
}

/// `outer` reserves 12 MiB; its children `c1` (8 MiB) and `c2` (no reservation of its own)
/// each run a task sweeping 8 MiB: together they may hold only what `outer` grants.
const NESTED: &str = r#"
[scheduler]
kind = "fp"

[run]
horizon_ms = 300

[memory]
total_mb = 64
page_bytes = 65536
swap = "fast-ssd"
sample_ms = 1

[[scheduler.server]]
name = "outer"
kind = "deferrable"
budget_ms = 8
period_ms = 10
priority = 0
policy = "fp"
reserve = { memory_mib = 12 }

[[scheduler.server]]
name = "c1"
parent = "outer"
kind = "deferrable"
budget_ms = 3
period_ms = 10
priority = 0
policy = "fp"
reserve = { memory_mib = 8 }

[[scheduler.server]]
name = "c2"
parent = "outer"
kind = "deferrable"
budget_ms = 3
period_ms = 10
priority = 1
policy = "fp"

[[task]]
name = "t1"
server = "c1"
priority = 0
wcet_ms = 2
period_ms = 20
private_mb = 8
access = [{ pattern = "sweep", mb = 8, writes = 1.0 }]

[[task]]
name = "t2"
server = "c2"
priority = 0
wcet_ms = 2
period_ms = 20
private_mb = 8
access = [{ pattern = "sweep", mb = 8, writes = 1.0 }]
"#;

#[test]
fn children_hold_what_their_parent_grants() {
    let r = run(NESTED);
    let m = r.memory().expect("[memory]");
    for s in &m.timeline {
        let (outer, c1, c2) = (s.server_pages[0], s.server_pages[1], s.server_pages[2]);
        assert!(outer <= 12 * PAGES_PER_MIB && c1 <= 8 * PAGES_PER_MIB, "at {:?}: {:?}", s.time, s.server_pages);
        assert_eq!(outer, c1 + c2, "the parent counts its children's pages");
    }
    assert_eq!(m.timeline.iter().map(|s| s.server_pages[0]).max(), Some(12 * PAGES_PER_MIB));
    // Their 16 MiB do not fit in 12: both page.
    assert!(m.tasks.iter().all(|t| t.stats.major_faults > 0), "{:?}", m.tasks);
    let outer = r.servers()[0].memory.as_ref().unwrap();
    assert_eq!(outer.peak_resident_pages, 12 * PAGES_PER_MIB);
    let c2 = r.servers()[2].memory.as_ref().unwrap();
    assert_eq!((c2.reserved_bytes, c2.kind), (None, None), "c2 reserves nothing of its own");
}

#[test]
fn a_server_reservation_larger_than_its_parents_is_refused_naming_the_key() {
    let e = load_toml_str(&NESTED.replace("reserve = { memory_mib = 8 }", "reserve = { memory_mib = 13 }"), "t.toml").unwrap_err();
    assert_eq!(
        e.to_string(),
        "t.toml: scheduler.server[1].reserve.memory_mib: server \"c1\" reserves 13.00 MiB hard, more than server \"outer\" has \
         left: 12.00 MiB of 12.00 MiB (hard holding minus overhead and hard reservations given)"
    );
    assert!(!e.to_string().contains('\n'));
}

#[test]
fn hard_server_reservations_set_memory_aside_beside_the_hard_reservations() {
    // 48 MiB of hard [[reservation]] leave 16 MiB: a hard 20 MiB server does not fit, a soft one does.
    let with = |kind: &str| {
        NESTED.replace("memory_mib = 12 }", &format!("memory_mib = 20, kind = \"{kind}\" }}"))
            + "\n[[reservation]]\nname = \"r\"\nsize_mb = 48\n"
    };
    let e = load_toml_str(&with("hard").replace("reserve = { memory_mib = 8 }", ""), "t.toml").unwrap_err().to_string();
    assert!(
        e.starts_with("t.toml: scheduler.server[0].reserve.memory_mib: reservation `outer` of 320 pages rejected by admission control"),
        "{e}"
    );
    let soft =
        load_toml_str(&with("soft").replace("reserve = { memory_mib = 8 }", "reserve = { memory_mib = 8, kind = \"soft\" }"), "t.toml");
    let soft = soft.unwrap_or_else(|e| panic!("{e}"));
    let m = soft.memory.as_ref().unwrap();
    assert_eq!(m.server_bounds.iter().map(|b| b.kind).collect::<Vec<_>>(), [BoundKind::Soft, BoundKind::Soft, BoundKind::Soft]);
}

#[test]
fn a_reservation_smaller_than_a_page_is_refused() {
    let e = load_toml_str(&NESTED.replace("memory_mib = 8 }", "memory_mib = 0.01 }"), "t.toml").unwrap_err().to_string();
    assert_eq!(
        e,
        "t.toml: scheduler.server[1].reserve.memory_mib: server \"c1\" reserves less than one page (65536 bytes), so its tasks could hold no page"
    );
}

/// A random tree of servers (some reserving memory, hard or soft) over random tasks sweeping
/// and touching private memory and a shared region, on a 16 MiB machine of 64 KiB pages.
fn random_tree(seed: u64) -> (String, Vec<Option<u64>>, Vec<Option<usize>>) {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let n = rng.random_range(1..6);
    let mut text = String::from(
        "[scheduler]\nkind = \"fp\"\novercommit = true\n[run]\nhorizon_ms = 150\n\
         [memory]\ntotal_mb = 16\npage_bytes = 65536\nswap = \"fast-ssd\"\nsample_ms = 1\n\
         [[region]]\nname = \"shm\"\nsize_mb = 2\npolicy = \"first-touch\"\n",
    );
    let (mut caps, mut parents) = (Vec::new(), Vec::new());
    for i in 0..n {
        let parent = (i > 0 && rng.random_bool(0.6)).then(|| rng.random_range(0..i));
        // Hard reservations stay small enough that every top-level one fits the machine.
        let reserve = rng.random_bool(0.7).then(|| {
            let hard = rng.random_bool(0.5);
            let mib = if hard { rng.random_range(1..=2) } else { rng.random_range(1..=8) };
            (mib, hard)
        });
        text += &format!(
            "[[scheduler.server]]\nname = \"s{i}\"\n{}kind = \"deferrable\"\nbudget_ms = 2\nperiod_ms = 10\npriority = {i}\npolicy = \"fp\"\n{}\n",
            parent.map_or(String::new(), |p| format!("parent = \"s{p}\"\n")),
            reserve.map_or(String::new(), |(mib, hard)| format!(
                "reserve = {{ memory_mib = {mib}, kind = \"{}\" }}\n",
                if hard { "hard" } else { "soft" }
            )),
        );
        caps.push(reserve.map(|(mib, _)| mib * PAGES_PER_MIB));
        parents.push(parent);
    }
    let leaves: Vec<usize> = (0..n).filter(|&i| !parents.contains(&Some(i))).collect();
    for t in 0..rng.random_range(1..6) {
        let leaf = leaves[rng.random_range(0..leaves.len())];
        let mib = rng.random_range(1..=6);
        let shared = if rng.random_bool(0.4) { ", { pattern = \"random\", region = \"shm\", refs = 20 }" } else { "" };
        text += &format!(
            "[[task]]\nname = \"t{t}\"\nserver = \"s{leaf}\"\npriority = {t}\nwcet_ms = 1\nperiod_ms = {}\nprivate_mb = {mib}\n\
             access = [{{ pattern = \"sweep\", mb = {mib}, writes = 0.5 }}{shared}]\n",
            rng.random_range(5..30),
        );
    }
    (text, caps, parents)
}

fn check_tree_at_every_sample(seed: u64) -> u64 {
    let (text, caps, parents) = random_tree(seed);
    let r = run(&text);
    let m = r.memory().expect("[memory]");
    let mut at_cap = 0;
    if caps.iter().all(Option::is_none) {
        assert!(m.timeline.iter().all(|s| s.server_pages.is_empty()), "seed {seed}");
        return 0;
    }
    for s in &m.timeline {
        for (j, pages) in s.server_pages.iter().enumerate() {
            if let Some(cap) = caps[j] {
                assert!(*pages <= cap, "seed {seed}: at {:?} server s{j} holds {pages} pages, above its {cap}\n{text}", s.time);
                at_cap += u64::from(*pages == cap);
            }
            if let Some(p) = parents[j] {
                assert!(*pages <= s.server_pages[p], "seed {seed}: at {:?} s{j} holds more than its parent s{p}\n{text}", s.time);
            }
        }
    }
    for (j, summary) in r.servers().iter().enumerate() {
        let mem = summary.memory.as_ref().expect("a server reserves memory");
        assert!(caps[j].is_none_or(|cap| mem.peak_resident_pages <= cap), "seed {seed}: s{j} peaked at {mem:?}");
    }
    at_cap
}

proptest! {
    #![proptest_config(common::seeded_config("server_memory", 24))]

    #[test]
    fn no_server_subtree_ever_holds_more_than_its_reservation(seed in any::<u64>()) {
        check_tree_at_every_sample(seed);
    }
}

#[test]
fn the_random_trees_fill_their_reservations() {
    let filled: u64 = (0..16).map(check_tree_at_every_sample).sum();
    assert!(filled > 0, "no sample had a subtree at its bound");
}
