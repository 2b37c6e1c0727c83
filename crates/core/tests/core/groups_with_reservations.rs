//! A task may hold its pages in a hard or firm reservation and belong to a memory-limited
//! `[[group]]`: the reservation charges and reclaims its pages as ever (SPC and SPEL per
//! reservation for shared regions), and the group's limit bounds all its tasks' pages on top.

use critmem_core::{load_toml_str, simulate, SimOptions, SimResult};

const PAGES_PER_MIB: u64 = 16;

fn run(text: &str) -> SimResult {
    let s = load_toml_str(text, "t.toml").unwrap_or_else(|e| panic!("{e}"));
    simulate(&s, SimOptions { record_jobs: true, record_segments: false, check_invariants: true })
}

/// `t1` sweeps 10 MiB of its own in reservation `r` (`r_mb`) and group `g` (`g_mb`); `t2` is
/// in `g` only and sweeps 2 MiB.
fn both(r_mb: u32, g_mb: u32) -> String {
    format!(
        r#"
[scheduler]
kind = "rm"

[run]
horizon_ms = 300

[memory]
total_mb = 64
page_bytes = 65536
swap = "fast-ssd"
sample_ms = 1

[[reservation]]
name = "r"
size_mb = {r_mb}

[[group]]
name = "g"
max_mb = {g_mb}

[[task]]
name = "t1"
wcet_ms = 4
period_ms = 20
reservation = "r"
group = "g"
private_mb = 10
access = [{{ pattern = "sweep", mb = 10, writes = 1.0 }}]

[[task]]
name = "t2"
wcet_ms = 2
period_ms = 20
group = "g"
private_mb = 2
access = [{{ pattern = "sweep", mb = 2, writes = 1.0 }}]
"#
    )
}

#[test]
fn a_task_in_a_hard_reservation_and_a_memory_limited_group_stays_within_both() {
    // (reservation, group, which of them must evict): the group binds, the reservation
    // binds, both bind (8 + 2 MiB of the group's other task do not fit in 9).
    for (r_mb, g_mb, r_evicts, g_evicts) in [(8, 6, false, true), (4, 16, true, false), (8, 9, true, true)] {
        let r = run(&both(r_mb, g_mb));
        let m = r.memory().expect("[memory]");
        let (r_pages, g_pages) = (u64::from(r_mb) * PAGES_PER_MIB, u64::from(g_mb) * PAGES_PER_MIB);
        for s in &m.timeline {
            assert!(s.reservation_pages[0] <= r_pages, "({r_mb}, {g_mb}) at {:?}: {:?}", s.time, s.reservation_pages);
            let group: u64 = s.task_resident_pages.iter().sum();
            assert!(group <= g_pages, "({r_mb}, {g_mb}) at {:?}: the group's tasks hold {group} pages", s.time);
        }
        let (name, g) = &m.group_bounds[0];
        assert_eq!(name, "g");
        assert!(g.peak_pages <= g_pages && g.size_pages == Some(g_pages), "{g:?}");
        // t1 pages against whichever is tighter, and the group's other task only against the group.
        assert!(m.tasks[0].stats.major_faults > 0, "({r_mb}, {g_mb}): {:?}", m.tasks[0]);
        let reservation = &m.reservations[0].1;
        assert_eq!((reservation.evictions > 0, g.evictions > 0), (r_evicts, g_evicts), "({r_mb}, {g_mb}): {reservation:?} {g:?}");
    }
}

/// Two tasks, each in its own hard reservation, share a 2 MiB region under `policy`, both in
/// group `g`.
fn shared(policy: &str) -> String {
    format!(
        r#"
[scheduler]
kind = "rm"

[run]
horizon_ms = 300

[memory]
total_mb = 64
page_bytes = 65536
swap = "fast-ssd"

[[reservation]]
name = "r1"
size_mb = 6

[[reservation]]
name = "r2"
size_mb = 6

[[region]]
name = "shm"
size_mb = 2
policy = "{policy}"

[[group]]
name = "g"
max_mb = 7

[[task]]
name = "a"
wcet_ms = 4
period_ms = 20
reservation = "r1"
group = "g"
private_mb = 3
access = [{{ pattern = "sweep", mb = 3, writes = 1.0 }}, {{ pattern = "sweep", region = "shm", mb = 2 }}]

[[task]]
name = "b"
wcet_ms = 4
period_ms = 20
reservation = "r2"
group = "g"
private_mb = 3
access = [{{ pattern = "sweep", mb = 3, writes = 1.0 }}, {{ pattern = "sweep", region = "shm", mb = 2 }}]
"#
    )
}

#[test]
fn shared_pages_are_charged_per_reservation_and_counted_once_by_the_group() {
    for policy in ["spc", "spel", "private"] {
        let r = run(&shared(policy));
        let m = r.memory().expect("[memory]");
        let g = &m.group_bounds[0].1;
        // 3 + 3 MiB private and a 2 MiB region held once: 8 MiB of demand against a 7 MiB group.
        assert!(g.peak_pages <= 7 * PAGES_PER_MIB, "{policy}: {g:?}");
        for (name, st) in &m.reservations {
            assert!(st.charged_pages + st.locked_charge_pages <= 6 * PAGES_PER_MIB, "{policy}: {name} {st:?}");
        }
        if policy == "spc" {
            // SPC: the non-owner of each shared page conserves a frame for it in its reservation.
            let conserved: u64 = m.reservations.iter().map(|(_, st)| st.conserved_frames + st.spc_unmaps).sum();
            assert!(conserved > 0, "{:?}", m.reservations);
        }
        if policy == "spel" {
            // Locked pages are held outside every reservation, and outside the group's bound.
            assert_eq!(m.stats.locked_frames, 2 * PAGES_PER_MIB);
            assert!(g.peak_pages <= 6 * PAGES_PER_MIB, "{g:?}");
        }
    }
}

#[test]
fn a_controller_resizes_a_group_whose_tasks_hold_reservations() {
    let text = both(8, 6)
        + r#"
[control]
controller = "greedy"
interval_ms = 10
"#;
    let text = text.replace("name = \"g\"\nmax_mb = 6", "name = \"g\"\nrole = \"non-rt\"\nmax_mb = 6");
    let r = run(&text);
    let m = r.memory().expect("[memory]");
    let g = &m.limit_groups[0].1;
    let bound = &m.group_bounds[0].1;
    assert_eq!(bound.size_pages, Some(g.size_pages), "the group's max and its bound move together");
    for s in &m.timeline {
        assert!(s.reservation_pages[0] <= 8 * PAGES_PER_MIB);
    }
}
