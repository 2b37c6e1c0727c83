//! A seeded observation of a given size, for benchmarks and for measuring a policy's cost
//! against components × threads × units (the TMEM paper's O(M|C||T|)).

use super::{BlockObs, CacheObs, ThreadObs, TmemObservation, UnitKind};

const MS: u64 = 1_000_000;

fn xorshift(x: &mut u64) -> u64 {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    *x
}

/// An observation of `components` components × 2 kinds of transient memory, `threads` threads
/// (the first half real-time and tardy by 2–22 ms), and a pool of `total_units` all held by
/// the caches: each cache at its minimum of 1 plus a random share of the rest; a contended third
/// asks for 1–4 units more than it holds, with a quarter of the threads blocked there 1–11 ms;
/// the others hold idle units. So a memory scheduler has units to move. `total_units` is raised
/// to at least one per cache.
pub fn synthetic_observation(components: usize, threads: usize, total_units: u32, seed: u64) -> TmemObservation {
    let mut x = seed | 1;
    let n = components * 2;
    let total_units = total_units.max(n as u32);
    let mut allocated = vec![1u32; n];
    for _ in 0..total_units as usize - n {
        allocated[(xorshift(&mut x) % n as u64) as usize] += 1;
    }
    let mut caches = Vec::with_capacity(n);
    let mut blocks = Vec::new();
    for (j, &a) in allocated.iter().enumerate() {
        let contended = xorshift(&mut x).is_multiple_of(3);
        let requests = if contended { a + 1 + (xorshift(&mut x) % 4) as u32 } else { 1 + (xorshift(&mut x) % u64::from(a)) as u32 };
        if contended {
            for thread in 0..threads {
                if xorshift(&mut x).is_multiple_of(4) {
                    let blocked_ns = MS + xorshift(&mut x) % (10 * MS);
                    blocks.push(BlockObs { cache: j, thread, blocked_ns, blocks: 1 + (xorshift(&mut x) % 5) as u32 });
                }
            }
        }
        caches.push(CacheObs {
            component: format!("c{}", j / 2),
            kind: if j % 2 == 0 { UnitKind::Stack } else { UnitKind::Cbuf },
            min_units: 1,
            desired_units: Some(a),
            allocated_units: a,
            estimated_requests: requests,
            touched_units: a.min(requests),
            waiting_now: 0,
            blocked_concurrency_ceil: u32::from(contended),
            self_suspensions: 0,
        });
    }
    let real_time = threads.div_ceil(2);
    let threads = (0..threads)
        .map(|i| {
            let rt = i < real_time;
            let tardiness_ns = if rt { 2 * MS + xorshift(&mut x) % (20 * MS) } else { 0 };
            ThreadObs {
                name: format!("t{i}"),
                real_time: rt,
                priority_rank: i as u32,
                completed_jobs: 4,
                missed_jobs: u32::from(tardiness_ns > 0) * 2,
                avg_tardiness_ns: tardiness_ns,
                avg_lateness_ns: tardiness_ns as i64,
            }
        })
        .collect();
    TmemObservation { now_ns: 0, total_units: Some(total_units), free_pool_units: Some(0), caches, threads, blocks }
}

/// Runs of a quiet window [`warm_up`] gives a scheduler before it is measured: as many as
/// `watermark` waits before it lowers an idle cache's watermark.
pub const WARM_UP_RUNS: usize = 16;

/// `obs` as a quiet window: every cache asked for and using only its minimum, nobody blocked,
/// every thread on time.
pub fn quiet_observation(obs: &TmemObservation) -> TmemObservation {
    let mut quiet = obs.clone();
    for c in &mut quiet.caches {
        c.estimated_requests = c.min_units;
        c.touched_units = c.min_units;
        c.blocked_concurrency_ceil = 0;
    }
    for t in &mut quiet.threads {
        (t.missed_jobs, t.avg_tardiness_ns, t.avg_lateness_ns) = (0, 0, -1_000_000);
    }
    quiet.blocks.clear();
    quiet
}

/// `WARM_UP_RUNS` quiet windows of `obs` through `policy`, so that a scheduler with memory
/// across windows is measured in its steady state rather than on its first run.
pub fn warm_up(policy: &mut dyn super::MemoryScheduler, obs: &TmemObservation) {
    let quiet = quiet_observation(obs);
    for _ in 0..WARM_UP_RUNS {
        policy.schedule(&quiet);
    }
}

/// Units a plan gives to caches beyond what they hold in `obs`.
pub fn units_moved(obs: &TmemObservation, actions: &[super::SetDesired]) -> u32 {
    actions.iter().map(|a| a.units.unwrap_or(u32::MAX).saturating_sub(obs.caches[a.cache].allocated_units)).sum()
}
