//! The TMEM memory schedulers on hand-made observations (expected values computed by hand from
//! the paper's Algorithm 1, the original system's policy and the baselines' definitions) and
//! property tests over random observations.

use std::collections::BTreeMap;

use critmem_policy::tmem::*;
use critmem_policy::PolicyError;
use proptest::prelude::*;

const MS: u64 = 1_000_000;

fn cache(kind: UnitKind, min: u32, allocated: u32, requests: u32) -> CacheObs {
    CacheObs {
        component: "c".into(),
        kind,
        min_units: min,
        desired_units: Some(allocated),
        allocated_units: allocated,
        estimated_requests: requests,
        touched_units: allocated.min(requests),
        waiting_now: 0,
        blocked_concurrency_ceil: 0,
        self_suspensions: 0,
    }
}

fn stack(min: u32, allocated: u32, requests: u32) -> CacheObs {
    cache(UnitKind::Stack, min, allocated, requests)
}

/// A real-time thread whose jobs missed their deadlines by `tardiness_ns` on average.
fn tardy(tardiness_ns: u64) -> ThreadObs {
    ThreadObs {
        name: "rt".into(),
        real_time: true,
        priority_rank: 0,
        completed_jobs: 2,
        missed_jobs: 2,
        avg_tardiness_ns: tardiness_ns,
        avg_lateness_ns: tardiness_ns as i64,
    }
}

/// A real-time thread whose jobs all finished `early_ns` before their deadlines.
fn on_time(early_ns: u64) -> ThreadObs {
    ThreadObs { missed_jobs: 0, avg_tardiness_ns: 0, avg_lateness_ns: -(early_ns as i64), ..tardy(0) }
}

fn block(cache: CacheId, thread: ThreadId, blocked_ns: u64, blocks: u32) -> BlockObs {
    BlockObs { cache, thread, blocked_ns, blocks }
}

fn obs(total_units: Option<u32>, caches: Vec<CacheObs>, threads: Vec<ThreadObs>, blocks: Vec<BlockObs>) -> TmemObservation {
    let held: u32 = caches.iter().map(|c| c.allocated_units).sum();
    TmemObservation { now_ns: 0, free_pool_units: total_units.map(|t| t.saturating_sub(held)), total_units, caches, threads, blocks }
}

fn run(name: &str, o: &TmemObservation) -> Vec<SetDesired> {
    make_memory_scheduler(name).expect("known name").schedule(o)
}

fn units(actions: &[SetDesired]) -> Vec<Option<u32>> {
    actions.iter().map(|a| a.units).collect()
}

fn some(v: &[u32]) -> Vec<Option<u32>> {
    v.iter().map(|&u| Some(u)).collect()
}

/// The design notes' Algorithm 1 case: no spare unit; c1 holds 1 of the 3 units requested and
/// τ1 blocked there 8 ms (one block); c2 holds 3 and is asked for 1; τ1's tardiness is 6 ms.
fn alg1_case() -> TmemObservation {
    obs(Some(4), vec![stack(1, 1, 3), stack(1, 3, 1)], vec![tardy(6 * MS)], vec![block(0, 0, 8 * MS, 1)])
}

#[test]
fn tmem_moves_two_units_in_the_design_notes_case() {
    // Step 1: gain in c1 = 8 ms / (3 − 1) = 4 ms → t 6 − 4 = 2 ms < 6; no spare, so c2 (3 > min
    // 1, r 1 ≤ a' − 1 = 2: loss 0) gives a unit; b becomes 4 ms. Step 2: gain 4 ms / (3 − 2) =
    // 4 ms → t −2 ms < 2 ms; c2 (2 > 1, r 1 ≤ 1: loss 0) gives again. t ≤ 0: stop.
    assert_eq!(units(&run("tmem", &alg1_case())), some(&[3, 1]));
}

#[test]
fn tmem_composite_moves_the_same_two_units() {
    // First run, plan = minimums {1, 1}, pool spare 4 − 2 = 2. Following the allocation: c2
    // grows 1 → 3 (2 ≤ spare), spare 0. impact(c1) = 8 ms / (3 − 1) + 1 = 4_000_001 ns.
    // Move 1: c1 lowers τ1 to 6 ms − 4_000_001 = 1_999_999 ns (c2: no impact, 6 ms); c2 may
    // give (3 > 1, 0 + 1 < 3): max(0, 1_999_999) < 6 ms. Move 2: adding in c1 leaves
    // max(0, −2_000_002) = 0; c2 (2 > 1, 1 < 2) gives: 0 < 1_999_999. τ1 at −2_000_002: stop.
    assert_eq!(units(&run("tmem-composite", &alg1_case())), some(&[3, 1]));
}

#[test]
fn tmem_spends_spare_units_only_where_they_help() {
    // Spare 10 (total 14, 4 held). c0: a 1, r 4, b 9 ms → gain 9/3 = 3 ms per unit at first;
    // c1: a 1, r 5 but only the best-effort thread blocked there; c2: a 2, r 1.
    // t 5 ms: +1 in c0 → 2 ms (b 6 ms); +1 → gain 6/2 = 3 → −1 ms; stop. c1 never grows.
    let be = ThreadObs { real_time: false, ..tardy(50 * MS) };
    let o = obs(
        Some(14),
        vec![stack(1, 1, 4), stack(1, 1, 5), stack(1, 2, 1)],
        vec![tardy(5 * MS), be],
        vec![block(0, 0, 9 * MS, 3), block(1, 1, 40 * MS, 4)],
    );
    assert_eq!(units(&run("tmem", &o)), some(&[3, 1, 2]));
}

#[test]
fn tmem_takes_from_the_cache_whose_loss_hurts_least() {
    // No spare. τ0 (t 10 ms) blocked 12 ms in c0 (a 1, r 4: gain 12/3 = 4 ms → 6 ms).
    // Candidates: c1 (a 3, r 3, τ1 blocked 6 ms there: loss 6/(3 − 2) = 6 ms → τ1 4 + 6 = 10 ms,
    // max(6, 10) = 10, not below 10) and c2 (a 2, r 1: idle, loss 0 → max(6, 4) = 6).
    // c2 gives: c = {2, 3, 1}. Next: gain in c0 = 8/2 = 4 → τ0 2 ms, τ1 4 → 4 ms < 6; c2 at min
    // 1, c1 loses 6 ms → τ1 10 ms: no move. Stop.
    let o = obs(
        Some(6),
        vec![stack(1, 1, 4), stack(1, 3, 3), stack(1, 2, 1)],
        vec![tardy(10 * MS), tardy(4 * MS)],
        vec![block(0, 0, 12 * MS, 2), block(1, 1, 6 * MS, 1)],
    );
    assert_eq!(units(&run("tmem", &o)), some(&[2, 3, 1]));
}

#[test]
fn fair_splits_ten_spare_units_four_three_three() {
    // Minimums 1 + 2 + 3 = 6 of 16: spare 10 = 3 · 3 + 1, the first cache gets the extra unit:
    // 1 + 4, 2 + 3, 3 + 3.
    let o = obs(Some(16), vec![stack(1, 1, 0), stack(2, 2, 0), stack(3, 3, 0)], vec![], vec![]);
    assert_eq!(units(&run("fair", &o)), some(&[5, 5, 6]));
    // Unlimited pool: nothing to split.
    let o = obs(None, o.caches, vec![], vec![]);
    assert_eq!(units(&run("fair", &o)), vec![None; 3]);
}

#[test]
fn min_max_and_greedy_ignore_contention() {
    let o = alg1_case();
    assert_eq!(units(&run("min", &o)), some(&[1, 1]));
    assert_eq!(units(&run("max", &o)), vec![None, None]);
    assert_eq!(units(&run("greedy", &o)), vec![None, None]);
    for name in ["min", "max", "greedy", "fair", "tmem", "tmem-composite"] {
        let caches: Vec<CacheId> = run(name, &o).iter().map(|a| a.cache).collect();
        assert_eq!(caches, vec![0, 1], "{name}");
    }
}

/// Run 1 of the composite sequences: caches A (a 1, r 3; τ0 blocked 8 ms once), B (a 3, r 1),
/// C (a 2, r 2), total 6; τ0 6 ms tardy.
fn composite_run1() -> TmemObservation {
    obs(Some(6), vec![stack(1, 1, 3), stack(1, 3, 1), stack(1, 2, 2)], vec![tardy(6 * MS)], vec![block(0, 0, 8 * MS, 1)])
}

#[test]
fn tmem_composite_first_run_of_the_sequence() {
    // Plan {1, 1, 1}, spare 3. Following the allocation: B 1 → 3 (spare 1), C 1 → 2 (spare 0).
    // impact(A, τ0) = 8 ms / 2 + 1 = 4_000_001. Move 1 into A: B and C tie at
    // max(0, 6 ms − 4_000_001) = 1_999_999 and B comes first; move 2: both at 0, B again.
    let mut p = TmemComposite::new(CompositeOptions::default());
    assert_eq!(units(&p.schedule(&composite_run1())), some(&[3, 1, 2]));
    assert_eq!(p.old_impact_ns(0, 0), 4_000_001);
}

#[test]
fn tmem_composite_decay_halves_and_spare_returns_to_the_last_plan() {
    // Run 2: A has grown to 2 of its planned 3 (growth waits for a thread to find it empty), one
    // unit is in the pool; τ0 met its deadlines and blocked nowhere.
    let run2 = obs(Some(6), vec![stack(1, 2, 2), stack(1, 1, 1), stack(1, 2, 2)], vec![on_time(MS)], vec![]);
    for (historical, expected) in [(true, [3, 1, 2]), (false, [2, 1, 2])] {
        let mut p = TmemComposite::new(CompositeOptions { historical_allocation: historical, ..CompositeOptions::default() });
        p.schedule(&composite_run1());
        // Following the allocation: A 3 → 2 puts a unit back, spare 1. No tardiness: no moves.
        // Historical allocation gives A its last plan of 3 back; without it the unit stays spare.
        assert_eq!(units(&p.schedule(&run2)), some(&expected), "historical {historical}");
        // τ0 did not block in A: old_impact 4_000_001 >> 1 = 2_000_000, then 1_000_000.
        assert_eq!(p.old_impact_ns(0, 0), 2_000_000);
        p.schedule(&run2);
        assert_eq!(p.old_impact_ns(0, 0), 1_000_000);
    }
}

#[test]
fn tmem_composite_history_prices_the_removal_of_recently_contended_units() {
    // Run 2: allocation as planned ({3, 1, 2}, spare 0); τ0 3 ms tardy, blocked 6 ms over two
    // blocks in C (a 2, r 4): impact(C) = 3 ms / 2 + 1 = 1_500_001. Adding to C gives
    // 3 ms − 1_500_001 = 1_499_999. Only A may give (B is at its minimum).
    let run2 = obs(Some(6), vec![stack(1, 3, 3), stack(1, 1, 1), stack(1, 2, 4)], vec![tardy(3 * MS)], vec![block(2, 0, 6 * MS, 2)]);
    // With run 1's history, A's loss is priced at old_impact 2_000_000:
    // 3 ms + 2_000_000 − 1_500_001 = 3_499_999, not below 3 ms: no move.
    let mut p = TmemComposite::new(CompositeOptions::default());
    p.schedule(&composite_run1());
    assert_eq!(units(&p.schedule(&run2)), some(&[3, 1, 2]));
    // Without history A's loss costs nothing: A → C (τ0 1_499_999), then again
    // (max(0, 1_499_999 − 1_500_001) = 0 < 1_499_999): {1, 1, 4}.
    assert_eq!(units(&run("tmem-composite", &run2)), some(&[1, 1, 4]));
}

#[test]
fn tmem_composite_serves_self_suspension_first() {
    // Spare 2 (total 5, 3 held). C0 saw 3 self-suspensions with 1 unit: it gets 2 more before
    // the move loop; nobody is tardy.
    let mut c0 = stack(1, 1, 1);
    c0.self_suspensions = 3;
    let o = obs(Some(5), vec![c0, stack(1, 2, 2)], vec![on_time(MS)], vec![]);
    assert_eq!(units(&run("tmem-composite", &o)), some(&[3, 2]));
}

#[test]
fn tmem_composite_objectives_pick_different_caches() {
    // Spare 0 after following the allocation (C 1 → 2 of 4). impact(A, τ0) = 999_999 / 1 + 1 =
    // 1 ms; impact(B, τ1) = 2_999_999 / 1 + 1 = 3 ms. τ0 5 ms, τ1 4 ms tardy; only C may give.
    let o = obs(
        Some(4),
        vec![stack(1, 1, 2), stack(1, 1, 2), stack(1, 2, 1)],
        vec![tardy(5 * MS), tardy(4 * MS)],
        vec![block(0, 0, 999_999, 1), block(1, 1, 2_999_999, 1)],
    );
    // Max: τ0 picks A (max(5 − 1, 4) = 4 ms beats B's 5 ms); C gives (max(4, 4) = 4 < 5). Then
    // τ0 (first of the two at 4 ms) has no block time left anywhere: set aside; τ1 picks B,
    // but A got a unit this run and C is at its minimum: stop.
    let mut max = TmemComposite::new(CompositeOptions::default());
    assert_eq!(units(&max.schedule(&o)), some(&[2, 1, 1]));
    // Avg: B lowers the total by min(3, 4) = 3 ms, A by min(1, 5) = 1 ms: B, from C (no thread
    // loses anything: 0 < 3 ms). Then A (1 ms) has no giver left: stop.
    let mut avg = TmemComposite::new(CompositeOptions { objective: CompositeObjective::Avg, ..CompositeOptions::default() });
    assert_eq!(units(&avg.schedule(&o)), some(&[1, 2, 1]));
}

/// c0 (a 1, asked 3; tardy τ0 blocked `b0` there), c1 (a 1, asked 2; τ1 blocked `b1`), c2
/// (a 2, used none), all minimum 1.
fn watermark_case(total: Option<u32>, b0: u64, b1: u64, tau0_tardy: bool) -> TmemObservation {
    let mut idle = stack(1, 2, 0);
    idle.touched_units = 0;
    let tau0 = if tau0_tardy { tardy(6 * MS) } else { on_time(MS) };
    obs(total, vec![stack(1, 1, 3), stack(1, 1, 2), idle], vec![tau0, on_time(MS)], vec![block(0, 0, b0, 1), block(1, 1, b1, 1)])
}

#[test]
fn watermark_serves_what_was_asked_for_then_headroom_by_pressure() {
    // Watermarks 3, 2 and 2 (c2 held 2 with no history: kept). Pressure: c0 4 ms × 2 (τ0 is
    // tardy) = 8 ms, c1 8 ms. Kept 1 + 1 + 2 = 4. Total 6: 2 spare, asked-for units one at a
    // time by pressure per unit granted: c0 (8 vs 8, lower index), c1 (8/1 > 8/2): {2, 2, 2}.
    let fresh = |total| units(&Watermark::new(WatermarkOptions::default()).schedule(&watermark_case(total, 4 * MS, 8 * MS, true)));
    assert_eq!(fresh(Some(6)), some(&[2, 2, 2]));
    // Total 8: c0, c1, c0 reach their asks (3, 2); the last spare unit is headroom for c0 (both
    // blocked, tie to the lower index): {4, 2, 2}. Total 9: c1's headroom too. c2 has none: no
    // real-time thread blocked there and it used none of its units.
    assert_eq!(fresh(Some(8)), some(&[4, 2, 2]));
    assert_eq!(fresh(Some(9)), some(&[4, 3, 2]));
    assert_eq!(fresh(Some(20)), some(&[4, 3, 2]));
    assert_eq!(fresh(None), some(&[4, 3, 2]));
}

#[test]
fn watermark_weighs_the_block_time_of_tardy_threads_double() {
    // Total 5: one spare unit. τ0 blocked 3 ms in c0, τ1 5 ms in c1. τ0 tardy: 6 ms > 5 ms, c0
    // gets it; τ0 on time: 3 ms < 5 ms, c1 does.
    let plan = |tardy| units(&Watermark::new(WatermarkOptions::default()).schedule(&watermark_case(Some(5), 3 * MS, 5 * MS, tardy)));
    assert_eq!(plan(true), some(&[2, 1, 2]));
    assert_eq!(plan(false), some(&[1, 2, 2]));
}

#[test]
fn watermark_takes_units_back_only_after_the_cache_stayed_idle_across_windows() {
    // c0 holds 3 and is asked for 3 once, then for 1 window after window: its watermark stays 3
    // for 15 windows below it and drops a unit at the 16th, again 16 windows later.
    let options = WatermarkOptions::default();
    assert_eq!(options.idle_windows, 16);
    let mut p = Watermark::new(options);
    let busy = obs(Some(3), vec![stack(1, 3, 3)], vec![on_time(MS)], vec![]);
    let quiet = obs(Some(3), vec![stack(1, 3, 1)], vec![on_time(MS)], vec![]);
    assert_eq!(units(&p.schedule(&busy)), some(&[3]));
    for window in 1..16 {
        assert_eq!(units(&p.schedule(&quiet)), some(&[3]), "window {window}");
    }
    assert_eq!(units(&p.schedule(&quiet)), some(&[2]));
    assert_eq!(p.mark_units(0), 2);
    for _ in 1..16 {
        assert_eq!(units(&p.schedule(&quiet)), some(&[2]));
    }
    assert_eq!(units(&p.schedule(&quiet)), some(&[1]));
    // A burst raises the watermark at once.
    p.schedule(&busy);
    assert_eq!(p.mark_units(0), 3);
}

#[test]
fn watermark_remembers_block_time_halved_each_window() {
    let mut p = Watermark::new(WatermarkOptions::default());
    p.schedule(&watermark_case(Some(6), 4 * MS, 8 * MS, true));
    assert_eq!((p.remembered_block_ns(0, 0), p.remembered_block_ns(1, 1)), (4 * MS, 8 * MS));
    // A window without blocks: halved. Still remembered, so c0 keeps its headroom although
    // nobody blocked now: c0, c1 hold 3 and 2 and asked for as much; total 8 leaves 1 spare.
    let calm = obs(Some(8), vec![stack(1, 3, 3), stack(1, 2, 2), stack(1, 2, 0)], vec![on_time(MS), on_time(MS)], vec![]);
    assert_eq!(units(&p.schedule(&calm)), some(&[4, 2, 2]));
    assert_eq!((p.remembered_block_ns(0, 0), p.remembered_block_ns(1, 1)), (2 * MS, 4 * MS));
    assert_eq!(p.remembered_block_ns(0, 1), 0);
}

#[test]
fn extreme_times_do_not_overflow() {
    // Every step is one unit, so the unit counts stay moderate; the times are the largest.
    let big = obs(
        Some(200),
        vec![stack(1, 1, 100), stack(1, 2, 50), stack(0, 3, 0)],
        vec![tardy(u64::MAX), tardy(u64::MAX - 1), ThreadObs { avg_lateness_ns: i64::MIN, ..on_time(0) }],
        vec![block(0, 0, u64::MAX, 1), block(0, 1, u64::MAX, 0), block(1, 0, u64::MAX, u32::MAX), block(1, 2, u64::MAX, 1)],
    );
    for (name, _) in MEMORY_SCHEDULERS {
        let mut p = make_memory_scheduler(name).expect("known");
        for _ in 0..3 {
            assert_eq!(p.schedule(&big).len(), 3, "{name}");
        }
    }
}

#[test]
fn unknown_names_list_every_scheduler() {
    let err = make_memory_scheduler("tmem2").err().expect("unknown name");
    assert!(matches!(err, PolicyError::BadInput { what: "memory scheduler", .. }));
    let msg = err.to_string();
    assert!(msg.contains("`tmem2`"), "{msg}");
    for (name, _) in MEMORY_SCHEDULERS {
        assert!(msg.contains(name), "{msg}");
        assert_eq!(make_memory_scheduler(name).expect("known").name(), name);
    }
    assert!(!msg.contains('\n'));
}

// ---------------------------------------------------------------------------------------------
// Properties over random observations.

/// Random caches (min ≤ allocated), threads and sparse blocks; the total, when finite, covers
/// what the caches hold.
fn observation() -> impl Strategy<Value = TmemObservation> {
    let caches = prop::collection::vec((any::<bool>(), 0u32..3, 0u32..5, 0u32..10, 0u32..3), 1..8);
    let threads = prop::collection::vec((any::<bool>(), 0u32..4, 0u32..3, 0u64..20 * MS, -10i64 * MS as i64..10 * MS as i64), 0..6);
    (caches, threads, prop::option::weighted(0.8, 0u32..12)).prop_flat_map(|(caches, threads, extra)| {
        let (n, m) = (caches.len(), threads.len().max(1));
        let blocks = prop::collection::vec((0..n, 0..m, 0u64..20 * MS, 1u32..4), 0..12);
        (Just(caches), Just(threads), Just(extra), blocks)
            .prop_map(|(caches, threads, extra, blocks)| build(&caches, &threads, extra, &blocks))
    })
}

type CacheParts = (bool, u32, u32, u32, u32);
type ThreadParts = (bool, u32, u32, u64, i64);

fn build(caches: &[CacheParts], threads: &[ThreadParts], extra: Option<u32>, blocks: &[(usize, usize, u64, u32)]) -> TmemObservation {
    let caches: Vec<CacheObs> = caches
        .iter()
        .map(|&(cbuf, min, above, requests, ss)| {
            let mut c = cache(if cbuf { UnitKind::Cbuf } else { UnitKind::Stack }, min, min + above, requests);
            c.self_suspensions = ss;
            c
        })
        .collect();
    let threads: Vec<ThreadObs> = threads
        .iter()
        .enumerate()
        .map(|(i, &(real_time, rank, missed, tardiness_ns, lateness_ns))| ThreadObs {
            name: format!("t{i}"),
            real_time,
            priority_rank: rank,
            completed_jobs: missed + 1,
            missed_jobs: missed,
            avg_tardiness_ns: if missed > 0 { tardiness_ns } else { 0 },
            avg_lateness_ns: if missed > 0 { tardiness_ns as i64 } else { lateness_ns.min(0) },
        })
        .collect();
    // One entry per (cache, thread), as the platform reports them.
    let mut sparse = BTreeMap::new();
    for &(c, t, ns, count) in blocks.iter().filter(|b| b.1 < threads.len()) {
        sparse.insert((c, t), (ns, count));
    }
    let blocks = sparse.into_iter().map(|((c, t), (ns, count))| block(c, t, ns, count)).collect();
    let held: u32 = caches.iter().map(|c| c.allocated_units).sum();
    obs(extra.map(|e| held + e), caches, threads, blocks)
}

fn check_shape(name: &str, o: &TmemObservation, actions: &[SetDesired]) -> Result<(), TestCaseError> {
    prop_assert_eq!(actions.len(), o.caches.len(), "{}: one action per cache", name);
    for (k, a) in actions.iter().enumerate() {
        prop_assert_eq!(a.cache, k, "{}: in cache order", name);
        if let Some(u) = a.units {
            prop_assert!(u >= o.caches[k].min_units, "{}: cache {} below its minimum", name, k);
        }
    }
    Ok(())
}

fn planned_sum(actions: &[SetDesired]) -> Option<u64> {
    actions.iter().map(|a| a.units.map(u64::from)).sum()
}

/// The same caches, total and threads through a sequence, as on a platform; the rest varies.
fn same_platform(seq: Vec<TmemObservation>) -> Vec<TmemObservation> {
    let first = seq[0].clone();
    seq.into_iter()
        .map(|mut o| {
            o.caches.resize(first.caches.len(), first.caches[0].clone());
            for (c, f) in o.caches.iter_mut().zip(&first.caches) {
                c.min_units = f.min_units;
                c.allocated_units = f.allocated_units;
            }
            o.total_units = first.total_units;
            o.threads = first.threads.clone();
            o.blocks.retain(|b| b.cache < first.caches.len() && b.thread < first.threads.len());
            o
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn every_scheduler_sets_every_cache_and_is_deterministic(o in observation()) {
        for (name, _) in MEMORY_SCHEDULERS {
            let first = run(name, &o);
            check_shape(name, &o, &first)?;
            prop_assert_eq!(&first, &run(name, &o), "{}: fresh objects agree", name);
            if let (Some(total), "fair" | "tmem" | "tmem-composite" | "watermark") = (o.total_units, name) {
                let sum = planned_sum(&first);
                prop_assert!(sum.is_some_and(|s| s <= u64::from(total)), "{}: plans {:?} of {}", name, sum, total);
            }
        }
    }

    #[test]
    fn tmem_grows_only_caches_where_a_real_time_thread_blocked(o in observation()) {
        for (j, a) in run("tmem", &o).iter().enumerate() {
            let c = &o.caches[j];
            let units = a.units.expect("tmem plans a number for every cache");
            if units > c.allocated_units {
                let blocked_rt = o.blocks.iter().any(|b| b.cache == j && b.blocked_ns > 0 && o.threads[b.thread].real_time);
                prop_assert!(blocked_rt, "cache {} grew with no real-time block", j);
                prop_assert!(units <= c.estimated_requests, "cache {} grew beyond its requests", j);
            }
        }
    }

    #[test]
    fn tmem_changes_nothing_without_tardiness(mut o in observation()) {
        for t in &mut o.threads {
            if t.real_time {
                t.avg_tardiness_ns = 0;
            }
        }
        let allocated: Vec<Option<u32>> = o.caches.iter().map(|c| Some(c.allocated_units)).collect();
        prop_assert_eq!(units(&run("tmem", &o)), allocated);
    }

    #[test]
    fn tmem_composite_keeps_its_invariants_across_runs(seq in prop::collection::vec(observation(), 1..4)) {
        let steps = same_platform(seq);
        let (mut a, mut b) = (TmemComposite::new(CompositeOptions::default()), TmemComposite::new(CompositeOptions::default()));
        for o in &steps {
            let actions = a.schedule(o);
            check_shape("tmem-composite", o, &actions)?;
            if let Some(total) = o.total_units {
                prop_assert!(planned_sum(&actions).is_some_and(|s| s <= u64::from(total)));
            }
            prop_assert_eq!(actions, b.schedule(o));
        }
    }

    #[test]
    fn watermark_takes_units_only_from_caches_idle_across_windows(seq in prop::collection::vec(observation(), 1..12)) {
        let steps = same_platform(seq);
        let options = WatermarkOptions::default();
        let (mut a, mut b) = (Watermark::new(options), Watermark::new(options));
        // The most each cache was asked for so far, and the runs since it was asked that much.
        let n = steps[0].caches.len();
        let mut peak = vec![0u32; n];
        let mut runs_below = vec![0u32; n];
        for o in &steps {
            let actions = a.schedule(o);
            check_shape("watermark", o, &actions)?;
            if let Some(total) = o.total_units {
                prop_assert!(planned_sum(&actions).is_some_and(|s| s <= u64::from(total)));
            }
            for (j, c) in o.caches.iter().enumerate() {
                let demand = c.estimated_requests.max(c.min_units);
                if demand >= peak[j] {
                    (peak[j], runs_below[j]) = (demand, 0);
                } else {
                    runs_below[j] += 1;
                }
                let units = actions[j].units.expect("watermark plans a number for every cache");
                // Below the peak for fewer runs than the memory: what it holds up to that peak stays.
                if runs_below[j] < options.idle_windows {
                    prop_assert!(units >= c.allocated_units.min(peak[j]), "cache {} cut to {} below its recent need", j, units);
                }
            }
            prop_assert_eq!(actions, b.schedule(o));
        }
    }
}
