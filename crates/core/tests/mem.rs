//! Behaviour of the page-level memory model (crate::mem) as its callers see it.

use critmem_core::mem::*;
use critmem_core::Nanos;

mod common;

const MB: u64 = 1 << 20;

fn machine(frames: u32, readahead: u32) -> Memory {
    let cfg = MemConfig {
        readahead_pages: readahead,
        // Every invariant after every operation, in release builds too.
        check_every_operation: true,
        ..MemConfig::with_frames(frames)
    };
    Memory::new(cfg, DeviceSpec::slow_ssd()).unwrap()
}

fn res(m: &mut Memory, name: &str, pages: u64, kind: ReservationKind) -> ResId {
    m.create_reservation(
        Nanos::ZERO,
        ReservationSpec {
            name: name.into(),
            pages,
            kind,
        },
    )
    .unwrap()
}

fn rd(m: &mut Memory, t: Nanos, s: AsId, v: Vpn) -> Access {
    m.access(t, s, v, RefKind::Read).unwrap()
}

fn wr(m: &mut Memory, t: Nanos, s: AsId, v: Vpn) -> Access {
    m.access(t, s, v, RefKind::Write).unwrap()
}

fn ok(m: &Memory) {
    m.check_invariants().unwrap_or_else(|e| panic!("{e}"));
}

// ------------------------------------------------------------------------------------------
// The paper's experiment, driven directly on the memory model (no CPU scheduling): τ1 sweeps
// the 10 MB shm every 100 ms period; τ2 makes two passes over one 1 MB chunk per 500 ms period
// (chunk k in its k-th job, so 10 jobs cover the region); each also keeps touching a small
// private footprint. Jobs run in priority order within each period.
// ------------------------------------------------------------------------------------------

mod paper {
    use super::*;

    pub const PAGE: u64 = 4096;
    pub const SHM_PAGES: u32 = (10 * MB / PAGE) as u32;
    pub const CHUNK_PAGES: u32 = (MB / PAGE) as u32;
    /// Private code/data footprint (pages) of τ1 and τ2.
    pub const PRIV1: u32 = 32;
    pub const PRIV2: u32 = 32;
    /// τ2 works on its chunk this many times per job (so a 1 MB reservation thrashes).
    pub const TAU2_PASSES: u32 = 4;
    pub const C1: Nanos = Nanos::from_ms(40);
    pub const T1: Nanos = Nanos::from_ms(100);
    pub const C2: Nanos = Nanos::from_ms(100);
    pub const T2: Nanos = Nanos::from_ms(500);

    #[derive(Clone, Copy, PartialEq, Eq, Debug)]
    pub enum Kind {
        Tau1,
        Tau2,
    }

    pub struct Task {
        pub kind: Kind,
        pub space: AsId,
        pub shm: Vpn,
        pub private: Vpn,
        pub jobs: u64,
        pub stall: Nanos,
        pub worst_job_stall: Nanos,
        /// Per job after warm-up: the device wait it suffered.
        pub job_stalls: Vec<Nanos>,
    }

    pub struct Run {
        pub m: Memory,
        pub tasks: Vec<Task>,
        /// Max over samples after warm-up of the physical memory reservations use (frames).
        pub steady_max_frames: u64,
        pub steady_min_frames: u64,
    }

    /// Sets up reservations of `sizes_mb` (one per task) sharing the shm under `policy`.
    pub fn setup(kinds: &[Kind], sizes_mb: &[u64], policy: SharePolicy) -> Result<Run, MemError> {
        // The paper's machine: 4 GB of RAM, swap on a 7200 rpm disk.
        let cfg = MemConfig {
            readahead_pages: 8,
            check_every_operation: false,
            ..MemConfig::with_frames((4096 * MB / PAGE) as u32)
        };
        let mut m = Memory::new(cfg, DeviceSpec::hdd()).unwrap();
        let region = m.create_shared("shm", RegionKind::SharedAnon, SHM_PAGES, policy)?;
        let mut tasks = Vec::new();
        for (i, (&kind, &mb)) in kinds.iter().zip(sizes_mb).enumerate() {
            let r = m.create_reservation(
                Nanos::ZERO,
                ReservationSpec {
                    name: format!("r{i}"),
                    pages: mb * MB / PAGE,
                    kind: ReservationKind::Hard,
                },
            )?;
            let space = m.create_space(&format!("tau{i}"), Some(r))?;
            let priv_pages = if kind == Kind::Tau1 { PRIV1 } else { PRIV2 };
            let (_, private) = m.map_private(space, "code+data", priv_pages)?;
            let shm = m.map_shared(Nanos::ZERO, space, region, true)?;
            tasks.push(Task {
                kind,
                space,
                shm,
                private,
                jobs: 0,
                stall: Nanos::ZERO,
                worst_job_stall: Nanos::ZERO,
                job_stalls: Vec::new(),
            });
        }
        if policy == SharePolicy::Spel {
            m.lock_region(Nanos::ZERO, region)?;
        }
        Ok(Run {
            m,
            tasks,
            steady_max_frames: 0,
            steady_min_frames: u64::MAX,
        })
    }

    /// One job: the reference string, each reference at the job's local time (1 µs apart,
    /// waiting out major faults). Returns the time spent waiting for the device.
    fn job(m: &mut Memory, t: &mut Task, start: Nanos) -> (Nanos, Nanos) {
        let mut now = start;
        let mut stall = Nanos::ZERO;
        let mut refs: Vec<Vpn> = Vec::new();
        let (shm_pages, passes, first) = match t.kind {
            Kind::Tau1 => (SHM_PAGES, 1, 0),
            Kind::Tau2 => (CHUNK_PAGES, TAU2_PASSES, (t.jobs as u32 % 10) * CHUNK_PAGES),
        };
        let priv_pages = if t.kind == Kind::Tau1 { PRIV1 } else { PRIV2 };
        for _ in 0..passes {
            for k in 0..shm_pages {
                refs.push(t.shm.offset(first + k));
                refs.push(t.private.offset(k % priv_pages));
            }
        }
        for v in refs {
            // The first job of each task writes the data it sweeps (initialising the shm).
            let kind = if t.jobs == 0 {
                RefKind::Write
            } else {
                RefKind::Read
            };
            match m.access(now, t.space, v, kind).unwrap() {
                Access::Hit => now += Nanos(1_000),
                Access::Minor { cpu, .. } => now += Nanos(1_000) + cpu,
                Access::Major { cpu, ready_at, .. } => {
                    stall += ready_at - (now + cpu);
                    now = ready_at + Nanos(1_000);
                }
            }
        }
        m.end_window(t.space).unwrap();
        t.jobs += 1;
        t.stall += stall;
        (stall, now)
    }

    /// Runs `periods` periods of 100 ms; samples the reserved physical memory after every job
    /// once `warmup` periods have passed.
    pub fn run(run: &mut Run, periods: u64, warmup: u64) {
        let mut now = Nanos::ZERO;
        for k in 0..periods {
            // One CPU, jobs in priority order, each after the previous one ends.
            now = now.max(Nanos::from_ms(100 * k));
            for ti in 0..run.tasks.len() {
                let t = &mut run.tasks[ti];
                let released = match t.kind {
                    Kind::Tau1 => true,
                    Kind::Tau2 => k % 5 == 0,
                };
                if !released {
                    continue;
                }
                let (stall, end) = job(&mut run.m, t, now);
                now = end;
                if k >= warmup {
                    t.worst_job_stall = t.worst_job_stall.max(stall);
                    t.job_stalls.push(stall);
                }
                if k >= warmup {
                    let used = run.m.stats().reserved_physical_frames;
                    run.steady_max_frames = run.steady_max_frames.max(used);
                    run.steady_min_frames = run.steady_min_frames.min(used);
                }
            }
        }
    }

    pub fn mb(frames: u64) -> f64 {
        frames as f64 * PAGE as f64 / MB as f64
    }
}

/// Smallest whole-MB reservation with which a task running alone meets its deadline in every
/// steady-state job: its CPU demand plus the time it waits for the device fits in its period.
fn minimum_reservation_mb(kind: paper::Kind) -> u64 {
    use paper::*;
    let (c, t) = if kind == Kind::Tau1 {
        (C1, T1)
    } else {
        (C2, T2)
    };
    (1..=16)
        .find(|&mb| {
            let mut r = setup(&[kind], &[mb], SharePolicy::Spc).unwrap();
            run(&mut r, 110, 55);
            c + r.tasks[0].worst_job_stall <= t
        })
        .expect("some size up to 16 MB is schedulable")
}

#[test]
fn minimum_reservations_are_11_mb_for_tau1_and_2_mb_for_tau2() {
    assert_eq!(
        minimum_reservation_mb(paper::Kind::Tau1),
        11,
        "10 MB sweep + code/data thrashes in 10 MB"
    );
    assert_eq!(
        minimum_reservation_mb(paper::Kind::Tau2),
        2,
        "1 MB chunk + code/data thrashes in 1 MB"
    );
}

#[test]
fn table3_totals_fall_out_of_the_mechanism() {
    use paper::*;
    let sets: [(&str, [Kind; 2]); 3] = [
        ("{t1,t1}", [Kind::Tau1, Kind::Tau1]),
        ("{t2,t2}", [Kind::Tau2, Kind::Tau2]),
        ("{t1,t2}", [Kind::Tau1, Kind::Tau2]),
    ];
    let min_mb = |k: Kind| if k == Kind::Tau1 { 11 } else { 2 };
    let mut table = Vec::new();
    for policy in [SharePolicy::Private, SharePolicy::Spc, SharePolicy::Spel] {
        for (name, kinds) in &sets {
            // Per-task reservations: the minimum found alone, except that SPEL's admission test
            // requires each sharer to exceed the locked 10 MB — 10 MB is rejected, 11 MB admitted.
            let sizes: Vec<u64> = kinds
                .iter()
                .map(|&k| {
                    if policy != SharePolicy::Spel {
                        return min_mb(k);
                    }
                    (min_mb(k)..)
                        .find(|&mb| setup(&[k, k], &[mb, mb], policy).is_ok())
                        .expect("admitted eventually")
                })
                .collect();
            let mut r = setup(kinds, &sizes, policy).unwrap();
            run(&mut r, 120, 60);
            ok(&r.m);
            println!(
                "{policy:>8} {name}: reservations {sizes:?} MB; reserved physical memory after warm-up {:.3}..{:.3} MB \
                 ({}..{} frames); device wait per task {:?} ms",
                mb(r.steady_min_frames),
                mb(r.steady_max_frames),
                r.steady_min_frames,
                r.steady_max_frames,
                r.tasks.iter().map(|t| t.stall.as_ms_f64().round()).collect::<Vec<_>>()
            );
            table.push((
                policy,
                *name,
                sizes,
                r.steady_min_frames,
                r.steady_max_frames,
            ));
        }
    }
    let frames = |mb: u64| mb * MB / PAGE;
    for (policy, name, sizes, lo, hi) in table {
        match policy {
            // SPC conserves a frame for every shared page: the sum of the reservations.
            SharePolicy::Spc => assert_eq!(
                (lo, hi),
                (frames(sizes.iter().sum()), frames(sizes.iter().sum())),
                "{name}"
            ),
            // SPEL: (11 + 11) − 10 for every set.
            SharePolicy::Spel => assert_eq!((lo, hi), (frames(12), frames(12)), "{name}"),
            // No-SP-Mgmt: the sum minus the shm pages both reservations account but one pays.
            _ => match name {
                "{t1,t1}" => assert_eq!((lo, hi), (frames(12), frames(12))),
                // τ2's 2 MB keeps up to 2 MB − code/data of shm, all of it duplicated.
                "{t2,t2}" => assert!(
                    lo >= frames(2) && hi <= frames(4) - frames(1) / 2,
                    "{lo}..{hi}"
                ),
                _ => assert!(lo > frames(11) && hi < frames(12), "{lo}..{hi}"),
            },
        }
    }
}

#[test]
fn tau1_misses_once_per_tau2_period_without_management_and_never_under_spc_or_spel() {
    use paper::*;
    let slack = T1 - C1;
    for (policy, sizes, want) in [
        (SharePolicy::Private, [11, 2], Some(5)),
        (SharePolicy::Spc, [11, 2], None),
        (SharePolicy::Spel, [11, 11], None),
        // The cgroup rule charges each shm page to τ1, which touches the whole region first
        // and never has to evict with 11 MB; τ2 owns no shared page, so it cannot evict one.
        (SharePolicy::FirstTouch, [11, 2], None),
    ] {
        let mut r = setup(&[Kind::Tau1, Kind::Tau2], &sizes, policy).unwrap();
        run(&mut r, 110, 60);
        let misses: Vec<usize> = r.tasks[0]
            .job_stalls
            .iter()
            .enumerate()
            .filter(|(_, s)| **s > slack)
            .map(|(i, _)| i)
            .collect();
        println!("{policy}: τ1 jobs over their slack after warm-up: {misses:?}");
        match want {
            None => assert!(misses.is_empty(), "{policy}: {misses:?}"),
            Some(every) => {
                assert_eq!(misses.len(), 50 / every, "{policy}: {misses:?}");
                assert!(
                    misses.windows(2).all(|w| w[1] - w[0] == every),
                    "{policy}: {misses:?}"
                );
            }
        }
    }
    // Alone, τ1 never waits once its 10 MB are resident.
    let mut alone = setup(&[Kind::Tau1], &[11], SharePolicy::Spc).unwrap();
    run(&mut alone, 110, 60);
    assert_eq!(alone.tasks[0].worst_job_stall, Nanos::ZERO);
}

#[test]
fn changing_the_shared_size_changes_totals_as_the_formulas_say() {
    // A 3 MB shm swept whole by three tasks with 4 MB reservations.
    for policy in [SharePolicy::Spc, SharePolicy::Spel] {
        let cfg = MemConfig {
            readahead_pages: 8,
            check_every_operation: false,
            ..MemConfig::with_frames(4096)
        };
        let mut m = Memory::new(cfg, DeviceSpec::fast_ssd()).unwrap();
        let s_pages = 3 * 256;
        let shm = m
            .create_shared("shm", RegionKind::SharedAnon, s_pages, policy)
            .unwrap();
        let mut spaces = Vec::new();
        for i in 0..3 {
            let r = res(&mut m, &format!("r{i}"), 4 * 256, ReservationKind::Hard);
            let s = m.create_space("t", Some(r)).unwrap();
            let v = m.map_shared(Nanos::ZERO, s, shm, true).unwrap();
            spaces.push((s, v));
        }
        if policy == SharePolicy::Spel {
            m.lock_region(Nanos::ZERO, shm).unwrap();
        }
        let mut now = Nanos::ZERO;
        for _ in 0..2 {
            for &(s, v) in &spaces {
                for p in 0..s_pages {
                    now += Nanos(100);
                    m.access(now, s, v.offset(p), RefKind::Read).unwrap();
                }
            }
        }
        ok(&m);
        let total = m.stats().reserved_physical_frames;
        let sum = 3 * 4 * 256;
        match policy {
            SharePolicy::Spc => assert_eq!(total, sum),
            _ => assert_eq!(total, sum - 2 * u64::from(s_pages)),
        }
    }
}

// ------------------------------------------------------------------------------------------
// Replacement.
// ------------------------------------------------------------------------------------------

#[test]
fn second_chance_evicts_in_fifo_order_but_spares_a_page_referenced_again() {
    let mut m = machine(64, 1);
    let r = res(&mut m, "r", 3, ReservationKind::Hard);
    let s = m.create_space("a", Some(r)).unwrap();
    let (reg, v) = m.map_private(s, "data", 6).unwrap();
    let t = Nanos::ZERO;
    for p in 0..3 {
        assert!(
            matches!(rd(&mut m, t, s, v.offset(p)), Access::Minor { .. }),
            "zero-fill"
        );
    }
    // All three were referenced once: FIFO, the oldest goes.
    rd(&mut m, t, s, v.offset(3));
    assert!(!m.is_resident(reg, 0));
    // Page 1 is referenced again; page 2 is not: page 2 goes although page 1 is older.
    assert!(rd(&mut m, t, s, v.offset(1)).is_hit());
    rd(&mut m, t, s, v.offset(4));
    let resident: Vec<u32> = (0..6).filter(|&p| m.is_resident(reg, p)).collect();
    assert_eq!(resident, vec![1, 3, 4]);
    ok(&m);
}

#[test]
fn hard_reservation_evicts_its_own_pages_and_never_exceeds_its_size() {
    let mut m = machine(64, 1);
    let r = res(&mut m, "r", 4, ReservationKind::Hard);
    let a = m.create_space("a", Some(r)).unwrap();
    let b = m.create_space("b", None).unwrap();
    let (_, va) = m.map_private(a, "data", 10).unwrap();
    let (breg, vb) = m.map_private(b, "data", 8).unwrap();
    let mut now = Nanos::ZERO;
    for p in 0..8 {
        wr(&mut m, now, b, vb.offset(p));
    }
    let global_free = m.stats().global_free_frames;
    for pass in 0..2 {
        for p in 0..10 {
            now += Nanos::from_ms(1);
            let acc = wr(&mut m, now, a, va.offset(p));
            if pass == 1 {
                assert!(
                    matches!(acc, Access::Major { .. }),
                    "page {p} was swapped out"
                );
            }
            if let Access::Major { ready_at, .. } = acc {
                now = ready_at;
            }
            let st = m.reservation_stats(r).unwrap();
            assert!(st.frames_held <= 4 && st.borrowed_frames == 0, "{st:?}");
        }
    }
    assert_eq!(
        m.stats().global_free_frames,
        global_free,
        "free memory elsewhere is never touched"
    );
    assert!(
        (0..8).all(|p| m.is_resident(breg, p)),
        "other tasks' pages are never touched"
    );
    let st = m.reservation_stats(r).unwrap();
    assert_eq!(st.evictions, 16);
    assert_eq!(st.writebacks, 16, "every victim was dirty");
    assert_eq!(m.space_stats(a).unwrap().resident_pages, 4);
    ok(&m);
}

#[test]
fn firm_reservation_borrows_free_pages_and_returns_them_under_pressure() {
    let mut m = machine(16, 1);
    let r = res(&mut m, "firm", 4, ReservationKind::Firm);
    let a = m.create_space("a", Some(r)).unwrap();
    let b = m.create_space("b", None).unwrap();
    let (_, va) = m.map_private(a, "data", 10).unwrap();
    let (_, vb) = m.map_private(b, "data", 13).unwrap();
    for p in 0..10 {
        wr(&mut m, Nanos::ZERO, a, va.offset(p));
    }
    let st = m.reservation_stats(r).unwrap();
    assert_eq!(
        (st.borrowed_frames, st.frames_held, st.evictions),
        (6, 10, 0),
        "borrowed instead of evicting"
    );
    assert_eq!(m.stats().global_free_frames, 6);
    let mut now = Nanos::ZERO;
    for p in 0..12 {
        now += Nanos::from_ms(1);
        wr(&mut m, now, b, vb.offset(p));
        ok(&m);
    }
    let st = m.reservation_stats(r).unwrap();
    assert_eq!(
        (st.borrowed_frames, st.frames_held, st.evictions),
        (0, 4, 6),
        "gave every borrowed page back"
    );
    assert_eq!(m.space_stats(b).unwrap().resident_pages, 12);
    // With nothing left to take back, the global LRU evicts unreserved pages; the firm
    // reservation keeps its size.
    wr(&mut m, now, b, vb.offset(12));
    assert_eq!(m.stats().global_evictions, 1);
    assert_eq!(m.reservation_stats(r).unwrap().frames_held, 4);
    ok(&m);
}

#[test]
fn admission_control_rejects_overcommitted_reservations() {
    let cfg = MemConfig {
        unreserved_min_frames: 10,
        min_reservation_pages: 8,
        ..MemConfig::with_frames(100)
    };
    let mut m = Memory::new(cfg, DeviceSpec::zram()).unwrap();
    let spec = |pages| ReservationSpec {
        name: "r".into(),
        pages,
        kind: ReservationKind::Hard,
    };
    m.create_reservation(Nanos::ZERO, spec(50)).unwrap();
    let err = m.create_reservation(Nanos::ZERO, spec(41)).unwrap_err();
    assert!(
        matches!(err, MemError::AdmissionRejected { available: 40, .. }),
        "{err}"
    );
    assert!(
        err.to_string().contains("40 of 100 frames are uncommitted"),
        "{err}"
    );
    m.create_reservation(Nanos::ZERO, spec(40)).unwrap();
    assert!(matches!(
        m.create_reservation(Nanos::ZERO, spec(8)),
        Err(MemError::AdmissionRejected { .. })
    ));
    assert!(matches!(
        m.create_reservation(Nanos::ZERO, spec(7)),
        Err(MemError::ReservationTooSmall { .. })
    ));
    assert_eq!(m.stats().committed_frames, 90);
    ok(&m);
}

#[test]
fn global_lru_promotes_referenced_pages_and_evicts_the_inactive_head() {
    let mut m = machine(4, 1);
    let s = m.create_space("a", None).unwrap();
    let (reg, v) = m.map_private(s, "data", 6).unwrap();
    for p in 0..5 {
        rd(&mut m, Nanos::ZERO, s, v.offset(p));
    }
    assert!(
        !m.is_resident(reg, 0),
        "all equally referenced: the oldest goes"
    );
    assert!(rd(&mut m, Nanos::ZERO, s, v.offset(1)).is_hit());
    rd(&mut m, Nanos::ZERO, s, v.offset(5));
    let resident: Vec<u32> = (0..6).filter(|&p| m.is_resident(reg, p)).collect();
    assert_eq!(
        resident,
        vec![1, 3, 4, 5],
        "page 1 was promoted, page 2 demoted and evicted"
    );
    assert_eq!(m.stats().global_evictions, 2);
    ok(&m);
}

// ------------------------------------------------------------------------------------------
// Shared pages.
// ------------------------------------------------------------------------------------------

/// Two hard reservations of `size` pages, spaces `a` and `b` bound to them, each with 8
/// private pages and the shm (4 pages) under `policy`.
struct Two {
    m: Memory,
    r: [ResId; 2],
    s: [AsId; 2],
    shm: RegionId,
    vs: [Vpn; 2],
    vp: [Vpn; 2],
}

fn two(policy: SharePolicy, size: u64) -> Two {
    let mut m = machine(64, 1);
    let shm = m
        .create_shared("shm", RegionKind::SharedAnon, 4, policy)
        .unwrap();
    let r = [
        res(&mut m, "r1", size, ReservationKind::Hard),
        res(&mut m, "r2", size, ReservationKind::Hard),
    ];
    let s = [
        m.create_space("a", Some(r[0])).unwrap(),
        m.create_space("b", Some(r[1])).unwrap(),
    ];
    let vs = [
        m.map_shared(Nanos::ZERO, s[0], shm, true).unwrap(),
        m.map_shared(Nanos::ZERO, s[1], shm, true).unwrap(),
    ];
    let vp = [
        m.map_private(s[0], "p", 8).unwrap().1,
        m.map_private(s[1], "p", 8).unwrap().1,
    ];
    Two {
        m,
        r,
        s,
        shm,
        vs,
        vp,
    }
}

#[test]
fn spc_keeps_a_shared_page_resident_when_its_owner_evicts_it_and_transfers_ownership() {
    let Two {
        mut m,
        r,
        s,
        shm,
        vs,
        vp,
    } = two(SharePolicy::Spc, 4);
    let t = Nanos::ZERO;
    wr(&mut m, t, s[0], vs[0]);
    assert_eq!(m.holder_of(shm, 0), Some(Some(r[0])));
    assert!(matches!(rd(&mut m, t, s[1], vs[1]), Access::Minor { .. }));
    let st = m.reservation_stats(r[1]).unwrap();
    assert_eq!(
        (st.conserved_frames, st.free_frames, st.frames_held),
        (1, 3, 4),
        "b conserves a page"
    );
    // a fills its reservation with private pages; the shm page is its oldest victim.
    for p in 0..4 {
        wr(&mut m, t, s[0], vp[0].offset(p));
    }
    assert!(m.is_resident(shm, 0), "unmapped, not evicted");
    assert!(!m.is_mapped(s[0], vs[0]));
    assert_eq!(
        m.holder_of(shm, 0),
        Some(Some(r[1])),
        "ownership moved to b"
    );
    let (sa, sb) = (
        m.reservation_stats(r[0]).unwrap(),
        m.reservation_stats(r[1]).unwrap(),
    );
    assert_eq!(
        (sa.ownership_transfers, sa.evictions, sb.conserved_frames),
        (1, 0, 0)
    );
    assert!(rd(&mut m, t, s[1], vs[1]).is_hit(), "b never notices");
    // a touching it again is a minor fault: it conserves a page now.
    assert!(matches!(rd(&mut m, t, s[0], vs[0]), Access::Minor { .. }));
    assert_eq!(m.reservation_stats(r[0]).unwrap().conserved_frames, 1);
    // As a non-owner, a's eviction of the page only unmaps it and frees its conserved page.
    for p in 4..8 {
        wr(&mut m, t, s[0], vp[0].offset(p));
    }
    assert!(m.is_resident(shm, 0) && !m.is_mapped(s[0], vs[0]));
    let sa = m.reservation_stats(r[0]).unwrap();
    assert_eq!((sa.conserved_frames, sa.spc_unmaps), (0, 2));
    assert!(rd(&mut m, t, s[1], vs[1]).is_hit());
    assert_eq!(m.space_stats(s[1]).unwrap().major_faults, 0);
    ok(&m);
}

#[test]
fn first_touch_lets_the_owner_evict_a_page_another_task_uses() {
    for (policy, interferes) in [(SharePolicy::FirstTouch, true), (SharePolicy::Spc, false)] {
        let Two {
            mut m,
            r,
            s,
            shm,
            vs,
            vp,
        } = two(policy, 4);
        let t = Nanos::ZERO;
        wr(&mut m, t, s[0], vs[0]);
        rd(&mut m, t, s[1], vs[1]);
        if policy == SharePolicy::FirstTouch {
            assert_eq!(
                m.reservation_stats(r[1]).unwrap().charged_pages,
                0,
                "the non-owner is not charged"
            );
        }
        assert!(rd(&mut m, t, s[1], vs[1]).is_hit(), "b keeps using it");
        for p in 0..4 {
            wr(&mut m, t, s[0], vp[0].offset(p));
        }
        let b_next = rd(&mut m, Nanos::from_ms(1), s[1], vs[1]);
        assert_eq!(
            matches!(b_next, Access::Major { .. }),
            interferes,
            "{policy}: {b_next:?}"
        );
        assert!(m.is_resident(shm, 0));
        if policy == SharePolicy::FirstTouch {
            // As a memory cgroup does with the swap entry's record: b faulted the page back
            // in, but it is a's again, so a can evict it again.
            assert_eq!(m.charged_to(shm, 0), vec![Some(r[0])], "the owner stays the owner");
            assert_eq!(m.reservation_stats(r[1]).unwrap().charged_pages, 0);
        }
        ok(&m);
    }
}

#[test]
fn no_sp_mgmt_duplicates_cost_no_frames_but_any_sharer_evicts_for_everyone() {
    let Two {
        mut m,
        r,
        s,
        shm,
        vs,
        vp,
    } = two(SharePolicy::Private, 4);
    let t = Nanos::ZERO;
    wr(&mut m, t, s[0], vs[0]);
    rd(&mut m, t, s[1], vs[1]);
    assert_eq!(m.charged_to(shm, 0), vec![Some(r[0]), Some(r[1])]);
    let sb = m.reservation_stats(r[1]).unwrap();
    assert_eq!(
        (sb.charged_pages, sb.frames_held),
        (1, 3),
        "b accounts the page but returned its frame"
    );
    assert_eq!(m.stats().reserved_physical_frames, 7);
    // b fills its reservation; the shm page is its oldest: swapped out under a too.
    for p in 0..4 {
        wr(&mut m, t, s[1], vp[1].offset(p));
    }
    assert!(!m.is_resident(shm, 0) && !m.is_mapped(s[0], vs[0]));
    assert_eq!(
        m.reservation_stats(r[0]).unwrap().lent_frames,
        1,
        "a lost the frame, keeps the slot"
    );
    assert!(matches!(
        rd(&mut m, Nanos::from_ms(1), s[0], vs[0]),
        Access::Major { .. }
    ));
    ok(&m);
}

#[test]
fn spel_admission_needs_each_sharer_to_exceed_the_locked_size() {
    let mut m = machine(64, 1);
    let shm = m
        .create_shared("shm", RegionKind::SharedAnon, 8, SharePolicy::Spel)
        .unwrap();
    let r = res(&mut m, "r", 8, ReservationKind::Hard);
    let s = m.create_space("a", Some(r)).unwrap();
    m.map_shared(Nanos::ZERO, s, shm, true).unwrap();
    let err = m.lock_region(Nanos::ZERO, shm).unwrap_err();
    assert!(
        matches!(err, MemError::SpelAdmission { need: 9, .. }),
        "{err}"
    );
    assert_eq!(
        m.effective_policy(shm),
        Some(SharePolicy::Spc),
        "nothing changed"
    );
    let other = m
        .create_shared("spc", RegionKind::SharedAnon, 2, SharePolicy::Spc)
        .unwrap();
    assert!(matches!(
        m.lock_region(Nanos::ZERO, other),
        Err(MemError::NotLockable { .. })
    ));
    ok(&m);
}

#[test]
fn spel_locked_pages_are_never_evicted_and_duplicates_are_freed() {
    let mut m = machine(64, 1);
    let shm = m
        .create_shared("shm", RegionKind::SharedAnon, 8, SharePolicy::Spel)
        .unwrap();
    let r = [
        res(&mut m, "r1", 12, ReservationKind::Hard),
        res(&mut m, "r2", 10, ReservationKind::Hard),
    ];
    let s = [
        m.create_space("a", Some(r[0])).unwrap(),
        m.create_space("b", Some(r[1])).unwrap(),
    ];
    let vs: Vec<Vpn> = s
        .iter()
        .map(|&x| m.map_shared(Nanos::ZERO, x, shm, true).unwrap())
        .collect();
    let (_, vp) = m.map_private(s[0], "p", 30).unwrap();
    // a has already used part of the region (under SPC until locked).
    wr(&mut m, Nanos::ZERO, s[0], vs[0]);
    m.lock_region(Nanos::ZERO, shm).unwrap();
    let st = m.stats();
    assert_eq!(
        (
            st.locked_frames,
            st.reserved_physical_frames,
            st.committed_frames
        ),
        (8, 14, 14),
        "12 + 10 − 8"
    );
    assert_eq!(m.reservation_stats(r[0]).unwrap().locked_charge_pages, 8);
    let mut now = Nanos::ZERO;
    for round in 0..3 {
        for p in 0..30 {
            now += Nanos::from_ms(1);
            if let Access::Major { ready_at, .. } = wr(&mut m, now, s[0], vp.offset(p)) {
                now = ready_at;
            }
            let sa = m.reservation_stats(r[0]).unwrap();
            assert!(sa.frames_held + sa.locked_charge_pages <= 12);
        }
        for p in 0..8 {
            let acc = rd(&mut m, now, s[1], vs[1].offset(p));
            assert!(
                !matches!(acc, Access::Major { .. }),
                "round {round}: locked page {p} was evicted"
            );
            assert!(m.is_resident(shm, p));
        }
    }
    assert_eq!(m.space_stats(s[1]).unwrap().major_faults, 0);
    // A reservation joining later passes the same test and gives up the same size.
    let r3 = res(&mut m, "r3", 9, ReservationKind::Hard);
    let c = m.create_space("c", Some(r3)).unwrap();
    m.map_shared(now, c, shm, false).unwrap();
    assert_eq!(m.stats().reserved_physical_frames, 14 + 1);
    let r4 = res(&mut m, "r4", 8, ReservationKind::Hard);
    let d = m.create_space("d", Some(r4)).unwrap();
    assert!(matches!(
        m.map_shared(now, d, shm, false),
        Err(MemError::SpelAdmission { .. })
    ));
    ok(&m);
}

#[test]
fn auto_picks_spel_when_max_is_below_n_times_avg_and_spc_otherwise() {
    for (touched, expect) in [(10u32, SharePolicy::Spel), (3, SharePolicy::Spc)] {
        let mut m = machine(128, 1);
        let shm = m
            .create_shared("shm", RegionKind::SharedAnon, 10, SharePolicy::Auto)
            .unwrap();
        let mut spaces = Vec::new();
        for i in 0..2 {
            let r = res(&mut m, &format!("r{i}"), 16, ReservationKind::Hard);
            let s = m.create_space("t", Some(r)).unwrap();
            let v = m.map_shared(Nanos::ZERO, s, shm, true).unwrap();
            spaces.push((s, v));
        }
        assert!(matches!(
            m.resolve_auto(Nanos::ZERO, shm),
            Err(MemError::NoUsageMeasured(_))
        ));
        for job in 0..4u32 {
            for &(s, v) in &spaces {
                for k in 0..touched {
                    rd(&mut m, Nanos::ZERO, s, v.offset((job * touched + k) % 10));
                }
                m.end_window(s).unwrap();
            }
        }
        let usage = m.region_usage(shm).unwrap();
        assert!(usage
            .iter()
            .all(|(_, u)| u.windows == 4 && u.pages_max == u64::from(touched)));
        let d = m.resolve_auto(Nanos::ZERO, shm).unwrap();
        assert_eq!((d.chosen, d.n, d.max_pages), (expect, 2, 10), "{d:?}");
        assert!((d.avg_pages - f64::from(touched)).abs() < 1e-9);
        assert_eq!(m.effective_policy(shm), Some(expect));
        ok(&m);
    }
}

// ------------------------------------------------------------------------------------------
// Device and I/O.
// ------------------------------------------------------------------------------------------

#[test]
fn two_simultaneous_reads_complete_one_after_the_other() {
    let mut d = Device::new(DeviceSpec::hdd());
    let svc = d.spec().service_time(IoOp::Read, 4096);
    let first = d.submit(Nanos::ZERO, IoOp::Read, 4096);
    let second = d.submit(Nanos::ZERO, IoOp::Read, 4096);
    assert_eq!((first, second), (svc, svc + svc));
    assert_eq!(d.stats().queued, svc);

    // The same through the model: two tasks fault file pages at the same instant.
    let mut m = machine(64, 1);
    let file = m
        .create_shared(
            "lib",
            RegionKind::SharedFile {
                device: DeviceId::SWAP,
            },
            8,
            SharePolicy::Global,
        )
        .unwrap();
    let a = m.create_space("a", None).unwrap();
    let b = m.create_space("b", None).unwrap();
    let va = m.map_shared(Nanos::ZERO, a, file, false).unwrap();
    let vb = m.map_shared(Nanos::ZERO, b, file, false).unwrap();
    let svc = DeviceSpec::slow_ssd().service_time(IoOp::Read, 4096);
    let t = Nanos::from_ms(1);
    let ra = rd(&mut m, t, a, va.offset(0));
    let rb = rd(&mut m, t, b, vb.offset(5));
    assert!(matches!(ra, Access::Major { ready_at, refault: false, .. } if ready_at == t + svc));
    assert!(matches!(rb, Access::Major { ready_at, .. } if ready_at == t + svc + svc));
    // A third task touching page 0 while its read is in flight waits for the same read.
    let c = m.create_space("c", None).unwrap();
    let vc = m.map_shared(t, c, file, false).unwrap();
    assert!(
        matches!(rd(&mut m, t, c, vc.offset(0)), Access::Major { ready_at, .. } if ready_at == t + svc)
    );
    assert_eq!(m.device(DeviceId::SWAP).unwrap().stats().reads, 2);
    ok(&m);
}

#[test]
fn a_dirty_victim_is_written_back_ahead_of_the_read() {
    let mut m = machine(64, 1);
    let file = m
        .create_shared(
            "f",
            RegionKind::SharedFile {
                device: DeviceId::SWAP,
            },
            2,
            SharePolicy::Spc,
        )
        .unwrap();
    let r = res(&mut m, "r", 1, ReservationKind::Hard);
    let s = m.create_space("a", Some(r)).unwrap();
    let (_, vp) = m.map_private(s, "p", 1).unwrap();
    let vf = m.map_shared(Nanos::ZERO, s, file, false).unwrap();
    wr(&mut m, Nanos::ZERO, s, vp);
    let spec = DeviceSpec::slow_ssd();
    let t = Nanos::from_ms(1);
    let acc = rd(&mut m, t, s, vf);
    let expect = t + spec.service_time(IoOp::Write, 4096) + spec.service_time(IoOp::Read, 4096);
    assert!(
        matches!(acc, Access::Major { ready_at, .. } if ready_at == expect),
        "{acc:?}"
    );
    let st = m.device(DeviceId::SWAP).unwrap().stats();
    assert_eq!((st.writes, st.reads), (1, 1));
    assert_eq!(m.space_stats(s).unwrap().pages_swapped_out, 1);
    // Swapping the private page back in is a major fault and a refault.
    let t2 = Nanos::from_ms(5);
    assert!(matches!(
        wr(&mut m, t2, s, vp),
        Access::Major { refault: true, .. }
    ));
    ok(&m);
}

#[test]
fn readahead_grows_on_sequential_swap_ins_and_stays_off_for_random_ones() {
    let mut m = machine(64, 8);
    let file = m
        .create_shared(
            "lib",
            RegionKind::SharedFile {
                device: DeviceId::SWAP,
            },
            32,
            SharePolicy::Global,
        )
        .unwrap();
    let s = m.create_space("a", None).unwrap();
    let v = m.map_shared(Nanos::ZERO, s, file, false).unwrap();
    let spec = DeviceSpec::slow_ssd();
    let mut now = Nanos::ZERO;
    let mut requests = Vec::new();
    for p in 0..16 {
        match rd(&mut m, now, s, v.offset(p)) {
            Access::Major { ready_at, .. } => {
                let pages = (0..32).filter(|&q| m.is_resident(file, q)).count();
                requests.push((p, pages));
                now = ready_at;
            }
            Access::Minor { .. } => {}
            Access::Hit => panic!("page {p} was never mapped"),
        }
    }
    // Windows 1, 2 (aligned pair 0-1, page 0 already in), 2, 4, 8 as used readahead pages accrue.
    assert_eq!(requests, vec![(0, 1), (1, 2), (2, 4), (4, 8), (8, 16)]);
    let dev = m.device(DeviceId::SWAP).unwrap().stats();
    assert_eq!((dev.reads, dev.bytes_read), (5, 16 * 4096));
    assert!(now >= spec.service_time(IoOp::Read, 8 * 4096));
    // The next swap-in still gets the window the used readahead earned (8 pages: 16-23);
    // then, with none of those used and no adjacent fault, random swap-ins read one page each.
    for p in [20, 30, 26] {
        assert!(matches!(
            rd(&mut m, now, s, v.offset(p)),
            Access::Major { .. }
        ));
    }
    assert_eq!(
        m.device(DeviceId::SWAP).unwrap().stats().bytes_read,
        (16 + 8 + 1 + 1) * 4096
    );
    let st = m.space_stats(s).unwrap();
    assert_eq!(
        (st.pages_swapped_in, st.major_faults, st.minor_faults),
        (26, 8, 11)
    );
    ok(&m);
}

// ------------------------------------------------------------------------------------------
// Address spaces.
// ------------------------------------------------------------------------------------------

#[test]
fn fork_shares_pages_until_one_side_writes_them() {
    let mut m = machine(64, 1);
    let parent = m.create_space("parent", None).unwrap();
    let (data, v) = m.map_private(parent, "data", 4).unwrap();
    for p in 0..4 {
        wr(&mut m, Nanos::ZERO, parent, v.offset(p));
    }
    let child = m
        .fork(Nanos::ZERO, parent, "child", None, SharePolicy::Spc)
        .unwrap();
    assert!(
        matches!(
            rd(&mut m, Nanos::ZERO, child, v.offset(0)),
            Access::Minor { .. }
        ),
        "maps the parent's page"
    );
    assert_eq!(m.space_stats(child).unwrap().cow_copies, 0);
    assert!(!matches!(
        wr(&mut m, Nanos::ZERO, child, v.offset(1)),
        Access::Major { .. }
    ));
    assert_eq!(
        m.space_stats(child).unwrap().cow_copies,
        1,
        "writing a shared page copies it"
    );
    assert!(
        m.is_resident(data, 1) && m.is_mapped(parent, v.offset(1)),
        "the parent's copy is untouched"
    );
    // The parent is now the only user of page 1: it takes it over without copying.
    wr(&mut m, Nanos::ZERO, parent, v.offset(1));
    assert_eq!(m.space_stats(parent).unwrap().cow_copies, 0);
    // Page 2 is still shared: the parent's write copies it.
    wr(&mut m, Nanos::ZERO, parent, v.offset(2));
    assert_eq!(m.space_stats(parent).unwrap().cow_copies, 1);
    assert!(
        rd(&mut m, Nanos::ZERO, parent, v.offset(3)).is_hit(),
        "reads stay mapped"
    );
    ok(&m);
    m.exit_space(Nanos::ZERO, child).unwrap();
    m.exit_space(Nanos::ZERO, parent).unwrap();
    assert_eq!(m.stats().global_free_frames, 64, "every frame came back");
    ok(&m);
}

#[test]
fn exit_returns_private_frames_and_conserved_frames() {
    let Two {
        mut m,
        r,
        s,
        shm,
        vs,
        vp,
    } = two(SharePolicy::Spc, 4);
    let t = Nanos::ZERO;
    wr(&mut m, t, s[0], vs[0]);
    rd(&mut m, t, s[1], vs[1]);
    wr(&mut m, t, s[1], vp[1]);
    m.exit_space(t, s[1]).unwrap();
    let sb = m.reservation_stats(r[1]).unwrap();
    assert_eq!(
        (sb.free_frames, sb.conserved_frames, sb.charged_pages),
        (4, 0, 0)
    );
    assert_eq!(m.charged_to(shm, 0), vec![Some(r[0])]);
    assert!(matches!(
        m.access(t, s[1], vs[1], RefKind::Read),
        Err(MemError::NoSuchSpace(_))
    ));
    m.exit_space(t, s[0]).unwrap();
    assert!(
        !m.is_resident(shm, 0),
        "nobody maps it: swapped out, the owner gets its frame back"
    );
    assert_eq!(m.reservation_stats(r[0]).unwrap().free_frames, 4);
    ok(&m);
}

#[test]
fn errors_say_what_is_wrong() {
    let mut m = machine(8, 1);
    let s = m.create_space("a", None).unwrap();
    let (_, v) = m.map_private(s, "p", 2).unwrap();
    let e = m
        .access(Nanos::ZERO, s, v.offset(2), RefKind::Read)
        .unwrap_err();
    assert!(e.to_string().contains("not mapped"), "{e}");
    let f = m
        .create_shared(
            "f",
            RegionKind::SharedFile {
                device: DeviceId::SWAP,
            },
            1,
            SharePolicy::Global,
        )
        .unwrap();
    let vf = m.map_shared(Nanos::ZERO, s, f, false).unwrap();
    assert!(matches!(
        m.access(Nanos::ZERO, s, vf, RefKind::Write),
        Err(MemError::ReadOnly { .. })
    ));
    assert!(matches!(
        m.map_shared(Nanos::ZERO, s, f, false),
        Err(MemError::AlreadyMapped { .. })
    ));
    assert!(matches!(
        m.create_space("x", Some(ResId(3))),
        Err(MemError::NoSuchReservation(3))
    ));
    let bad = MemConfig {
        page_bytes: 1000,
        ..MemConfig::default()
    };
    assert!(Memory::new(bad, DeviceSpec::hdd())
        .unwrap_err()
        .to_string()
        .contains("power of two"));
    // A hard reservation smaller than what one fault needs at once says to enlarge it.
    let r = res(&mut m, "tiny", 1, ReservationKind::Hard);
    let c = m.create_space("c", Some(r)).unwrap();
    let (_, vc) = m.map_private(c, "p", 1).unwrap();
    m.access(Nanos::ZERO, c, vc, RefKind::Write).unwrap();
    let child = m
        .fork(Nanos::ZERO, c, "child", Some(r), SharePolicy::Private)
        .unwrap();
    // Copy-on-write needs the shared page and a new one at once: two pages in a 1-page pool.
    let e = m
        .access(Nanos::ZERO, child, vc, RefKind::Write)
        .unwrap_err();
    assert!(e.to_string().contains("enlarge"), "{e}");
    ok(&m);
}

// ------------------------------------------------------------------------------------------
// PSI.
// ------------------------------------------------------------------------------------------

#[test]
fn psi_some_and_full_on_a_hand_computed_timeline() {
    let ms = Nanos::from_ms;
    let mut p = PsiAccounting::new();
    let g = p.add_group(None);
    let (a, b) = (p.add_task(g), p.add_task(g));
    p.set_state(ms(0), a, TaskPsiState::RUNNABLE);
    p.set_state(ms(0), b, TaskPsiState::RUNNABLE);
    // a major-faults at 10 (memory + io) until 20; b waits for io from 15 to 30.
    p.set_state(ms(10), a, TaskPsiState::blocked(true, true));
    p.set_state(ms(15), b, TaskPsiState::blocked(false, true));
    assert_eq!(
        p.totals(g, ms(17)).memory,
        Pressure {
            some_us: 7_000,
            full_us: 2_000
        },
        "readable mid-stall"
    );
    p.set_state(ms(20), a, TaskPsiState::RUNNABLE);
    p.set_state(ms(30), b, TaskPsiState::RUNNABLE);
    // a reclaims on the CPU from 40 to 42 while b is runnable; then b sleeps and a reclaims
    // alone from 50 to 53.
    p.set_state(ms(40), a, TaskPsiState::RECLAIMING);
    p.set_state(ms(42), a, TaskPsiState::RUNNABLE);
    p.set_state(ms(45), b, TaskPsiState::IDLE);
    p.set_state(ms(50), a, TaskPsiState::RECLAIMING);
    p.set_state(ms(53), a, TaskPsiState::IDLE);
    let tot = p.totals(g, ms(100));
    // memory some: [10,20) + [40,42) + [50,53) = 15 ms; full: [15,20) (b stalled too, nobody
    // productive) + [50,53) = 8 ms.
    assert_eq!(
        tot.memory,
        Pressure {
            some_us: 15_000,
            full_us: 8_000
        }
    );
    // io some: [10,30) = 20 ms; full: [15,20) = 5 ms.
    assert_eq!(
        tot.io,
        Pressure {
            some_us: 20_000,
            full_us: 5_000
        }
    );
}

// ------------------------------------------------------------------------------------------
// Discarding private memory (madvise(MADV_DONTNEED) / free).
// ------------------------------------------------------------------------------------------

mod discard {
    use super::*;

    fn dev(m: &Memory) -> DeviceStats {
        m.device(DeviceId::SWAP).unwrap().stats()
    }

    #[test]
    fn a_discarded_dirty_page_is_freed_without_writeback_and_comes_back_zero_filled() {
        for kind in [None, Some(ReservationKind::Hard), Some(ReservationKind::Firm), Some(ReservationKind::Limit)] {
            let mut m = machine(64, 1);
            let r = kind.map(|k| res(&mut m, "r", 16, k));
            let s = m.create_space("t", r).unwrap();
            let (_, v) = m.map_private(s, "heap", 8).unwrap();
            for i in 0..8 {
                wr(&mut m, Nanos::ZERO, s, v.offset(i));
            }
            let free_before = m.stats().global_free_frames;
            let charged = |m: &Memory| r.map_or(m.stats().global_active_pages + m.stats().global_inactive_pages, |r| m.reservation_charged_pages(r).unwrap());
            assert_eq!(charged(&m), 8, "{kind:?}");
            for i in 0..4 {
                m.discard(s, v.offset(i)).unwrap();
            }
            ok(&m);
            assert_eq!(m.space_stats(s).unwrap().resident_pages, 4, "{kind:?}");
            assert_eq!(charged(&m), 4, "the charge goes with the page ({kind:?})");
            assert!(!m.is_mapped(s, v), "{kind:?}");
            if matches!(kind, None | Some(ReservationKind::Limit)) {
                assert_eq!(m.stats().global_free_frames, free_before + 4, "frames back to the machine ({kind:?})");
            } else {
                assert_eq!(m.reservation_stats(r.unwrap()).unwrap().free_frames, 12, "frames back to the reservation ({kind:?})");
            }
            assert_eq!(dev(&m).writes, 0, "dirty data is dropped, not written back ({kind:?})");
            // The next touch is a zero-fill minor fault.
            assert!(matches!(rd(&mut m, Nanos::from_ms(1), s, v), Access::Minor { .. }), "{kind:?}");
            let st = m.space_stats(s).unwrap();
            assert_eq!((st.minor_faults, st.major_faults, st.pages_swapped_in), (9, 0, 0), "{kind:?}");
            ok(&m);
        }
    }

    #[test]
    fn a_discarded_swapped_out_page_frees_its_slot_and_is_not_read_back() {
        let mut m = machine(64, 1);
        let r = res(&mut m, "r", 4, ReservationKind::Hard);
        let s = m.create_space("t", Some(r)).unwrap();
        let (_, v) = m.map_private(s, "heap", 12).unwrap();
        let mut now = Nanos::ZERO;
        for i in 0..12 {
            now += Nanos::from_ms(1);
            wr(&mut m, now, s, v.offset(i));
        }
        // Only 4 pages fit: the first 8 were written to swap.
        assert_eq!(m.swap_slots_used(), 8);
        let reads = dev(&m).reads;
        for i in 0..8 {
            m.discard(s, v.offset(i)).unwrap();
        }
        ok(&m);
        assert_eq!(m.swap_slots_used(), 0);
        now += Nanos::from_secs(1);
        for i in 0..4 {
            now += Nanos::from_ms(1);
            assert!(matches!(rd(&mut m, now, s, v.offset(i)), Access::Minor { .. }), "page {i}");
        }
        assert_eq!(dev(&m).reads, reads, "no device read for a discarded page");
        assert_eq!(m.space_stats(s).unwrap().pages_swapped_in, 0);
        ok(&m);
    }

    #[test]
    fn shared_and_copy_on_write_pages_cannot_be_discarded() {
        let mut m = machine(64, 1);
        let s = m.create_space("t", None).unwrap();
        let (_, v) = m.map_private(s, "heap", 4).unwrap();
        let shm = m.create_shared("shm", RegionKind::SharedAnon, 4, SharePolicy::Global).unwrap();
        let vs = m.map_shared(Nanos::ZERO, s, shm, true).unwrap();
        wr(&mut m, Nanos::ZERO, s, vs);
        assert_eq!(m.discard(s, vs), Err(MemError::NotDiscardable { space: s.0, vpn: vs.0 }));
        assert!(m.is_mapped(s, vs), "a refused discard changes nothing");
        m.fork(Nanos::ZERO, s, "child", None, SharePolicy::Private).unwrap();
        assert!(matches!(m.discard(s, v), Err(MemError::NotDiscardable { .. })));
        assert!(matches!(m.discard(s, Vpn(1000)), Err(MemError::Unmapped { .. })));
        ok(&m);
    }
}

// ------------------------------------------------------------------------------------------
// Property tests.
// ------------------------------------------------------------------------------------------

mod props {
    use super::*;
    use proptest::prelude::*;
    use crate::common;
    use rand::{Rng, SeedableRng};

    const POLICIES: [SharePolicy; 6] = [
        SharePolicy::Global,
        SharePolicy::Private,
        SharePolicy::FirstTouch,
        SharePolicy::Spc,
        SharePolicy::Spel,
        SharePolicy::Auto,
    ];

    fn check(m: &Memory, seed: u64, step: usize, what: &str) {
        if let Err(e) = m.check_invariants() {
            panic!("seed {seed}, step {step} ({what}): {e}");
        }
        let st = m.stats();
        let used: u64 = m
            .reservations()
            .map(|r| m.reservation_stats(r).unwrap().frames_held)
            .sum();
        assert!(
            st.global_free_frames + st.locked_frames + used <= st.total_frames,
            "seed {seed}, step {step}: frames not conserved: {st:?}"
        );
        for r in m.reservations() {
            let s = m.reservation_stats(r).unwrap();
            if s.kind == ReservationKind::Hard {
                assert!(
                    s.frames_held + s.locked_charge_pages <= s.size_pages && s.borrowed_frames == 0,
                    "seed {seed}, step {step}: hard reservation {r:?} over its size: {s:?}"
                );
            }
        }
    }

    /// What a run reached, to check the generator exercises every mechanism.
    #[derive(Default, Debug)]
    struct Reached {
        majors: u64,
        errors: u64,
        transfers: u64,
        spc_unmaps: u64,
        evictions: u64,
        borrowed: u64,
        lent: u64,
        locked: u64,
        cow_copies: u64,
        forks: u64,
        exits: u64,
        global_evictions: u64,
        discards: u64,
    }

    /// A random machine and workload from one seed; every step is checked.
    fn scenario(seed: u64) -> Reached {
        let mut reached = Reached::default();
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        let cfg = MemConfig {
            readahead_pages: [1, 2, 4][rng.random_range(0..3)],
            reservation_inactive_percent: [33, 100][rng.random_range(0..2)],
            global_inactive_ratio: rng.random_range(1..3),
            ..MemConfig::with_frames(rng.random_range(24..72))
        };
        let dev = DeviceSpec::preset(DeviceSpec::PRESETS[rng.random_range(0..4)]).unwrap();
        let mut m = Memory::new(cfg, dev).unwrap();
        let file_dev = m.add_device(DeviceSpec::fast_ssd()).unwrap();
        let mut ress = Vec::new();
        for i in 0..rng.random_range(1..4) {
            let kind = if rng.random_bool(0.5) {
                ReservationKind::Hard
            } else {
                ReservationKind::Firm
            };
            let spec = ReservationSpec {
                name: format!("r{i}"),
                pages: rng.random_range(3..14),
                kind,
            };
            if let Ok(r) = m.create_reservation(Nanos::ZERO, spec) {
                ress.push(r);
            }
        }
        let mut regions = Vec::new();
        for _ in 0..rng.random_range(1..4) {
            let policy = POLICIES[rng.random_range(0..POLICIES.len())];
            let kind = if rng.random_bool(0.7) {
                RegionKind::SharedAnon
            } else {
                RegionKind::SharedFile { device: file_dev }
            };
            regions.push(
                m.create_shared("shm", kind, rng.random_range(1..10), policy)
                    .unwrap(),
            );
        }
        // (space, list of (first vpn, pages))
        let mut spaces: Vec<(AsId, Vec<(Vpn, u32)>)> = Vec::new();
        for i in 0..rng.random_range(2..6) {
            let res = if ress.is_empty() || rng.random_bool(0.25) {
                None
            } else {
                Some(ress[rng.random_range(0..ress.len())])
            };
            let s = m.create_space(&format!("t{i}"), res).unwrap();
            let pages = rng.random_range(1..20);
            let (_, v) = m.map_private(s, "p", pages).unwrap();
            let mut maps = vec![(v, pages)];
            for &reg in &regions {
                if rng.random_bool(0.6) {
                    if let Ok(v) = m.map_shared(Nanos::ZERO, s, reg, true) {
                        maps.push((v, m.region_pages(reg).unwrap()));
                    }
                }
            }
            spaces.push((s, maps));
        }
        check(&m, seed, 0, "setup");
        let mut now = Nanos::ZERO;
        for step in 1..400 {
            now += Nanos(rng.random_range(0..200_000));
            let roll = rng.random_range(0..1000);
            if spaces.is_empty() {
                break;
            }
            let si = rng.random_range(0..spaces.len());
            let (s, ref maps) = spaces[si];
            let what;
            if roll < 30 {
                // maps[0] is the space's private memory (copy-on-write after a fork).
                let (v, pages) = maps[0];
                let vpn = v.offset(rng.random_range(0..pages));
                what = "discard";
                match m.discard(s, vpn) {
                    Ok(()) => {
                        reached.discards += 1;
                        assert!(!m.is_mapped(s, vpn), "seed {seed}, step {step}: discarded page still mapped");
                    }
                    Err(MemError::NotDiscardable { .. }) => {}
                    Err(e) => panic!("seed {seed}, step {step}: unexpected {e}"),
                }
            } else if roll < 940 {
                let (v, pages) = maps[rng.random_range(0..maps.len())];
                let kind = if rng.random_bool(0.3) {
                    RefKind::Write
                } else {
                    RefKind::Read
                };
                what = "access";
                match m.access(now, s, v.offset(rng.random_range(0..pages)), kind) {
                    Ok(a) => reached.majors += u64::from(matches!(a, Access::Major { .. })),
                    Err(MemError::ReservationExhausted(_) | MemError::OutOfMemory) => {
                        reached.errors += 1
                    }
                    Err(e) => panic!("seed {seed}, step {step}: unexpected {e}"),
                }
            } else if roll < 960 {
                what = "end_window";
                m.end_window(s).unwrap();
            } else if roll < 975 {
                what = "lock/resolve";
                let reg = regions[rng.random_range(0..regions.len())];
                let _ = m.lock_region(now, reg);
                let _ = m.resolve_auto(now, reg);
            } else if roll < 990 && spaces.len() < 8 {
                what = "fork";
                let res = if ress.is_empty() {
                    None
                } else {
                    Some(ress[rng.random_range(0..ress.len())])
                };
                let policy = [
                    SharePolicy::Private,
                    SharePolicy::FirstTouch,
                    SharePolicy::Spc,
                ][rng.random_range(0..3)];
                if let Ok(c) = m.fork(now, s, "child", res, policy) {
                    reached.forks += 1;
                    let maps = maps.clone();
                    spaces.push((c, maps));
                }
            } else {
                what = "exit";
                reached.exits += 1;
                m.exit_space(now, s).unwrap();
                spaces.swap_remove(si);
            }
            check(&m, seed, step, what);
            for r in m.reservations() {
                let st = m.reservation_stats(r).unwrap();
                reached.borrowed += st.borrowed_frames;
                reached.lent += st.lent_frames;
            }
            reached.locked += m.stats().locked_frames;
        }
        for r in m.reservations() {
            let st = m.reservation_stats(r).unwrap();
            reached.transfers += st.ownership_transfers;
            reached.spc_unmaps += st.spc_unmaps;
            reached.evictions += st.evictions;
        }
        reached.global_evictions = m.stats().global_evictions;
        reached.cow_copies = spaces
            .iter()
            .map(|(s, _)| m.space_stats(*s).unwrap().cow_copies)
            .sum();
        for (s, _) in spaces {
            m.exit_space(now, s).unwrap();
            check(&m, seed, usize::MAX, "final exit");
        }
        // Everything unmapped: no reservation accounts a page any more except first-touch
        // charges and conserved pages of... nothing: all private memory is free again.
        for r in m.reservations() {
            let st = m.reservation_stats(r).unwrap();
            assert_eq!(st.conserved_frames, 0, "seed {seed}: {st:?}");
        }
        reached
    }

    proptest! {
        #![proptest_config(common::seeded_config("mem", 256))]

        #[test]
        fn random_workloads_keep_every_invariant(seed in any::<u64>()) {
            scenario(seed);
        }
    }

    #[test]
    fn the_random_workloads_reach_every_mechanism() {
        let mut all = Reached::default();
        for seed in 0..64 {
            let r = scenario(seed);
            all.majors += r.majors;
            all.errors += r.errors;
            all.transfers += r.transfers;
            all.spc_unmaps += r.spc_unmaps;
            all.evictions += r.evictions;
            all.borrowed += r.borrowed;
            all.lent += r.lent;
            all.locked += r.locked;
            all.cow_copies += r.cow_copies;
            all.forks += r.forks;
            all.exits += r.exits;
            all.global_evictions += r.global_evictions;
            all.discards += r.discards;
        }
        println!("{all:?}");
        let Reached {
            majors,
            transfers,
            spc_unmaps,
            evictions,
            borrowed,
            lent,
            locked,
            cow_copies,
            forks,
            exits,
            global_evictions,
            discards,
            ..
        } = all;
        for (name, n) in [
            ("majors", majors),
            ("transfers", transfers),
            ("spc_unmaps", spc_unmaps),
            ("evictions", evictions),
            ("borrowed", borrowed),
            ("lent", lent),
            ("locked", locked),
            ("cow_copies", cow_copies),
            ("forks", forks),
            ("exits", exits),
            ("global_evictions", global_evictions),
            ("discards", discards),
        ] {
            assert!(n > 0, "no run reached {name}");
        }
    }
}

// ------------------------------------------------------------------------------------------
// Speed smoke test (numbers for the record; run with --release --ignored --nocapture).
// ------------------------------------------------------------------------------------------

#[test]
#[ignore = "speed measurement, not a test: cargo test --release -p critmem-core --test mem -- --ignored --nocapture"]
fn reference_throughput() {
    use std::time::Instant;
    let cfg = MemConfig {
        check_every_operation: false,
        readahead_pages: 8,
        ..MemConfig::with_frames(1 << 16)
    };
    let mut m = Memory::new(cfg.clone(), DeviceSpec::fast_ssd()).unwrap();
    let s = m.create_space("a", None).unwrap();
    let (_, v) = m.map_private(s, "p", 4096).unwrap();
    for p in 0..4096 {
        m.access(Nanos::ZERO, s, v.offset(p), RefKind::Write)
            .unwrap();
    }
    let n = 200_000_000u64;
    let t = Instant::now();
    let mut x = 0x9e37_79b9u32;
    let mut hits = 0u64;
    for _ in 0..n {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        hits += u64::from(
            m.access(Nanos::ZERO, s, v.offset(x & 4095), RefKind::Read)
                .unwrap()
                .is_hit(),
        );
    }
    let dt = t.elapsed().as_secs_f64();
    assert_eq!(hits, n);
    println!("resident hits: {:.1} M references/s", n as f64 / dt / 1e6);

    for policy in [SharePolicy::Private, SharePolicy::Spc] {
        let mut m = Memory::new(cfg.clone(), DeviceSpec::fast_ssd()).unwrap();
        let shm = m
            .create_shared("shm", RegionKind::SharedAnon, 8192, policy)
            .unwrap();
        let mut sp = Vec::new();
        for i in 0..2 {
            let r = m
                .create_reservation(
                    Nanos::ZERO,
                    ReservationSpec {
                        name: format!("r{i}"),
                        pages: 2048,
                        kind: ReservationKind::Hard,
                    },
                )
                .unwrap();
            let s = m.create_space("t", Some(r)).unwrap();
            let (_, vp) = m.map_private(s, "p", 8192).unwrap();
            let vs = m.map_shared(Nanos::ZERO, s, shm, true).unwrap();
            sp.push((s, vp, vs));
        }
        let n = 5_000_000u64;
        let t = Instant::now();
        let mut now = Nanos::ZERO;
        let mut faults = 0u64;
        for i in 0..n {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            let (s, vp, vs) = sp[(i & 1) as usize];
            let v = if x & 1 == 0 { vp } else { vs };
            let kind = if x & 2 == 0 {
                RefKind::Write
            } else {
                RefKind::Read
            };
            now += Nanos(100);
            let a = m.access(now, s, v.offset((x >> 3) & 8191), kind).unwrap();
            faults += u64::from(!a.is_hit());
            // The job waits for its read, as the engine will make it.
            if let Access::Major { ready_at, .. } = a {
                now = ready_at;
            }
        }
        let dt = t.elapsed().as_secs_f64();
        println!(
            "heavy replacement ({policy}, {:.0} % faults): {:.2} M references/s",
            100.0 * faults as f64 / n as f64,
            n as f64 / dt / 1e6
        );
    }
}

// ------------------------------------------------------------------------------------------
// Memory-limited groups (cgroup memory.max / high / min / low).
// ------------------------------------------------------------------------------------------

mod limit_groups {
    use super::*;
    use proptest::prelude::*;

    fn limit(m: &mut Memory, name: &str, max: u64) -> ResId {
        res(m, name, max, ReservationKind::Limit)
    }

    fn charged(m: &Memory, r: ResId) -> u64 {
        m.reservation_stats(r).unwrap().charged_pages
    }

    #[test]
    fn a_limit_group_never_charges_more_than_its_max_and_sets_nothing_aside() {
        let mut m = machine(256, 1);
        let g = limit(&mut m, "g", 40);
        assert_eq!(m.stats().committed_frames, 0);
        let s = m.create_space("t", Some(g)).unwrap();
        let (_, v) = m.map_private(s, "heap", 100).unwrap();
        let mut now = Nanos::ZERO;
        for i in 0..100 {
            now += Nanos::from_us(10);
            wr(&mut m, now, s, v.offset(i));
            assert!(charged(&m, g) <= 40);
        }
        ok(&m);
        assert_eq!(charged(&m, g), 40);
        // Free memory was plentiful: the group evicted its own pages anyway.
        assert!(m.reservation_stats(g).unwrap().evictions >= 60);
        assert_eq!(m.stats().reserved_physical_frames, 0);
    }

    #[test]
    fn global_reclaim_takes_from_groups_in_proportion_so_a_growing_group_can_grow() {
        // Memory full with two equal groups; `a` keeps touching new pages. Taking victims
        // in proportion to size (as Linux scans cgroups) lets `a` grow at `b`'s expense; a
        // largest-first rule would pin `a` at `b`'s size forever.
        let mut m = machine(200, 1);
        let (a, b) = (limit(&mut m, "a", 200), limit(&mut m, "b", 200));
        let (sa, sb) = (m.create_space("ta", Some(a)).unwrap(), m.create_space("tb", Some(b)).unwrap());
        let (_, va) = m.map_private(sa, "heap", 400).unwrap();
        let (_, vb) = m.map_private(sb, "heap", 100).unwrap();
        let mut now = Nanos::ZERO;
        for i in 0..100 {
            now += Nanos::from_us(10);
            wr(&mut m, now, sa, va.offset(i));
            wr(&mut m, now, sb, vb.offset(i));
        }
        assert_eq!((charged(&m, a), charged(&m, b)), (100, 100));
        for i in 100..400 {
            now += Nanos::from_ms(1);
            wr(&mut m, now, sa, va.offset(i));
        }
        ok(&m);
        assert!(charged(&m, a) >= 150, "a holds {} of 200 frames", charged(&m, a));
        assert_eq!(charged(&m, a) + charged(&m, b), 200);
    }

    #[test]
    fn lowering_max_evicts_down_to_it_and_writes_dirty_pages_back() {
        let mut m = machine(256, 1);
        let g = limit(&mut m, "g", 100);
        let s = m.create_space("t", Some(g)).unwrap();
        let (_, v) = m.map_private(s, "heap", 100).unwrap();
        for i in 0..80 {
            wr(&mut m, Nanos::from_us(u64::from(i)), s, v.offset(i));
        }
        let writes_before = m.device(DeviceId::SWAP).unwrap().stats();
        m.set_reservation_size(Nanos::from_ms(1), g, 30).unwrap();
        ok(&m);
        assert_eq!(charged(&m, g), 30);
        assert_eq!(m.reservation_stats(g).unwrap().writebacks, 50);
        assert_ne!(m.device(DeviceId::SWAP).unwrap().stats(), writes_before);
        assert_eq!(m.stats().global_free_frames, 256 - 30);
        // Growing only allows more.
        m.set_reservation_size(Nanos::from_ms(2), g, 90).unwrap();
        assert_eq!(charged(&m, g), 30);
        assert!(m.set_reservation_size(Nanos::from_ms(2), g, 0).is_err());
        assert!(m.set_reservation_size(Nanos::from_ms(2), g, 257).is_err());
        ok(&m);
    }

    #[test]
    fn above_high_a_group_reclaims_its_own_pages_first() {
        let mut m = machine(256, 1);
        let g = limit(&mut m, "g", 200);
        m.set_limit_protection(g, Some(20), None, None).unwrap();
        let s = m.create_space("t", Some(g)).unwrap();
        let (_, v) = m.map_private(s, "heap", 100).unwrap();
        for i in 0..100 {
            wr(&mut m, Nanos::from_us(u64::from(i)), s, v.offset(i));
        }
        ok(&m);
        assert_eq!(charged(&m, g), 20);
        assert_eq!(m.limit_protection(g).unwrap(), LimitProtection { high_pages: Some(20), min_pages: None, low_pages: None });
    }

    #[test]
    fn min_protects_a_group_from_others_and_low_yields_only_as_a_last_resort() {
        // 64 frames; group a fills 40 pages, then group b faults 60.
        let run = |min: Option<u64>, low: Option<u64>| {
            let mut m = machine(64, 1);
            let a = limit(&mut m, "a", 64);
            let b = limit(&mut m, "b", 64);
            m.set_limit_protection(a, None, min, low).unwrap();
            let sa = m.create_space("a", Some(a)).unwrap();
            let sb = m.create_space("b", Some(b)).unwrap();
            let (_, va) = m.map_private(sa, "heap", 40).unwrap();
            let (_, vb) = m.map_private(sb, "heap", 60).unwrap();
            let mut now = Nanos::ZERO;
            for i in 0..40 {
                now += Nanos::from_us(1);
                rd(&mut m, now, sa, va.offset(i));
            }
            for i in 0..60 {
                now += Nanos::from_us(1);
                rd(&mut m, now, sb, vb.offset(i));
            }
            ok(&m);
            (charged(&m, a), charged(&m, b))
        };
        let (a, b) = run(None, None);
        assert!(a < 40, "unprotected pages are taken ({a}, {b})");
        assert_eq!(run(Some(40), None), (40, 24), "never below min: b recycles its own");
        // Low: b has unprotected pages of its own to reclaim, so a's stay.
        assert_eq!(run(None, Some(40)), (40, 24));
        // Both protected by low: the last resort takes from them anyway.
        let mut m = machine(32, 1);
        let a = limit(&mut m, "a", 64);
        m.set_limit_protection(a, None, None, Some(64)).unwrap();
        let b = limit(&mut m, "b", 64);
        m.set_limit_protection(b, None, None, Some(64)).unwrap();
        let sa = m.create_space("a", Some(a)).unwrap();
        let sb = m.create_space("b", Some(b)).unwrap();
        let (_, va) = m.map_private(sa, "heap", 40).unwrap();
        let (_, vb) = m.map_private(sb, "heap", 40).unwrap();
        for i in 0..32 {
            rd(&mut m, Nanos::from_us(u64::from(i)), sa, va.offset(i));
        }
        rd(&mut m, Nanos::from_ms(1), sb, vb);
        ok(&m);
        assert_eq!((charged(&m, a), charged(&m, b)), (31, 1));
        m.set_limit_protection(a, None, Some(31), None).unwrap();
        assert_eq!(m.access(Nanos::from_ms(2), sb, vb.offset(1), RefKind::Read).map(|_| ()), Ok(()));
        assert_eq!(charged(&m, a), 31, "min holds even when low would yield");
    }

    #[test]
    fn limit_groups_reject_per_reservation_share_policies() {
        let mut m = machine(64, 1);
        let g = limit(&mut m, "g", 32);
        let s = m.create_space("t", Some(g)).unwrap();
        let spc = m.create_shared("shm", RegionKind::SharedAnon, 4, SharePolicy::Spc).unwrap();
        assert_eq!(m.map_shared(Nanos::ZERO, s, spc, true), Err(MemError::UnsupportedForLimit(g.0)));
        let glob = m.create_shared("g", RegionKind::SharedAnon, 4, SharePolicy::Global).unwrap();
        m.map_shared(Nanos::ZERO, s, glob, true).unwrap();
        ok(&m);
    }

    /// Random resizes of hard, firm and limit pools interleaved with random references by
    /// spaces of each: every invariant holds and no limit group ever charges above its max.
    fn resize_scenario(seed: u64) {
        let mut x = seed | 1;
        let mut rnd = move |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n
        };
        let mut m = machine(128, 4);
        let hard = res(&mut m, "hard", 16, ReservationKind::Hard);
        let firm = res(&mut m, "firm", 16, ReservationKind::Firm);
        let lims = [limit(&mut m, "l0", 30), limit(&mut m, "l1", 200)];
        let shared = m.create_shared("shm", RegionKind::SharedAnon, 24, SharePolicy::Private).unwrap();
        let pools = [None, Some(hard), Some(firm), Some(lims[0]), Some(lims[1]), Some(lims[1])];
        let mut spaces = Vec::new();
        for (k, p) in pools.iter().enumerate() {
            let s = m.create_space(&format!("s{k}"), *p).unwrap();
            let (_, v) = m.map_private(s, "heap", 60).unwrap();
            let sv = m.map_shared(Nanos::ZERO, s, shared, true).unwrap();
            spaces.push((s, v, sv));
        }
        let mut now = Nanos::ZERO;
        for step in 0..600 {
            now += Nanos::from_us(1 + rnd(400));
            match rnd(10) {
                0 => {
                    let r = [hard, firm, lims[0], lims[1]][rnd(4) as usize];
                    let _ = m.set_reservation_size(now, r, rnd(140));
                }
                2 => {
                    let (s, v, _) = spaces[rnd(spaces.len() as u64) as usize];
                    m.discard(s, v.offset(rnd(60) as u32)).unwrap_or_else(|e| panic!("seed {seed} step {step}: {e}"));
                }
                1 => {
                    let r = lims[rnd(2) as usize];
                    let o = |v: u64| (v < 80).then_some(v);
                    m.set_limit_protection(r, o(rnd(160)), o(rnd(160)), o(rnd(160))).unwrap();
                }
                _ => {
                    let (s, v, sv) = spaces[rnd(spaces.len() as u64) as usize];
                    let vpn = if rnd(4) == 0 { sv.offset(rnd(24) as u32) } else { v.offset(rnd(60) as u32) };
                    let kind = if rnd(2) == 0 { RefKind::Read } else { RefKind::Write };
                    match m.access(now, s, vpn, kind) {
                        Ok(Access::Major { ready_at, .. }) if rnd(2) == 0 => now = now.max(ready_at),
                        Ok(_) | Err(MemError::OutOfMemory | MemError::ReservationExhausted(_)) => {}
                        Err(e) => panic!("seed {seed} step {step}: {e}"),
                    }
                }
            }
            m.check_invariants().unwrap_or_else(|e| panic!("seed {seed} step {step}: {e}"));
            for &r in &lims {
                let st = m.reservation_stats(r).unwrap();
                assert!(st.charged_pages <= st.size_pages, "seed {seed} step {step}: {st:?}");
            }
        }
    }

    proptest! {
        #![proptest_config(common::seeded_config("mem", 128))]

        #[test]
        fn random_resizes_and_references_keep_every_invariant(seed in any::<u64>()) {
            resize_scenario(seed);
        }
    }
}
