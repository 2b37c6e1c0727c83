//! CPU per tick of the soft real-time controllers against Greedy's, on the same synthetic
//! observations: 2 soft real-time groups (d = 100 ms, a job every 100 ms, stall rising and
//! falling over each job, usage at the limit) and 2 non-real-time groups, ticked every 5 ms
//! for 4000 ticks (20 s). Each measured run starts from a fresh controller.
//!
//! Run: `cargo bench -p critmem-policy --bench controllers`

use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use critmem_policy::*;
use serde_json::json;
use std::hint::black_box;

const MS: u64 = 1_000_000;
const MIB: u64 = 1 << 20;
const TICKS: u64 = 4000;
const SRT_GROUPS: usize = 2;

/// The observations of one run, built once: every controller sees the same sequence.
fn observations() -> Vec<Observation> {
    let group = |name: &str, role: GroupRole| GroupObservation {
        name: name.into(),
        role,
        stall: StallTotals::default(),
        usage_bytes: 0,
        knobs: MemoryKnobs::default(),
        floor_bytes: 16 * MIB,
        cpu_usage_us: 0,
        bandwidth: BandwidthKnobs::default(),
    };
    let mut groups: Vec<GroupObservation> =
        (0..SRT_GROUPS).map(|g| group(&format!("rt{g}"), GroupRole::SoftRealTime { deadline_ns: 100 * MS, bcet_ns: 40 * MS })).collect();
    groups.extend((0..2).map(|g| group(&format!("batch{g}"), GroupRole::NonRealTime)));
    let mut out = Vec::with_capacity(TICKS as usize);
    for k in 0..TICKS {
        let now_ns = k * 5 * MS;
        let mut events = Vec::new();
        let phase = k % 20; // 20 ticks a job
        for (g, obs) in groups.iter_mut().enumerate().take(SRT_GROUPS) {
            let job = k / 20;
            if phase == 0 {
                if job > 0 {
                    events.push(JobEvent::Completion { group: g, job: job - 1, at_ns: now_ns - MS });
                }
                events.push(JobEvent::Release { group: g, job, at_ns: now_ns, deadline_ns: now_ns + 100 * MS });
            }
            // A burst of stall mid-job, light stall otherwise; some jobs stall past the deadline.
            let stall_us = if (6..12).contains(&phase) { 4_600 + 100 * (job % 5) } else { 1_500 };
            obs.stall.memory_some_us += stall_us;
            obs.stall.memory_full_us += stall_us / 2;
            obs.stall.io_some_us += stall_us / 3;
            obs.usage_bytes = (120 + (k % 40)) * MIB;
        }
        for obs in groups.iter_mut().skip(SRT_GROUPS) {
            obs.usage_bytes = 300 * MIB;
        }
        out.push(Observation { now_ns, total_memory_bytes: 1024 * MIB, cpus: 2, groups: groups.clone(), events });
    }
    out
}

fn bench(c: &mut Criterion) {
    let seq = observations();
    let mut g = c.benchmark_group("controller ticks");
    for name in ["greedy", "sara", "tailguard"] {
        g.bench_function(format!("{name}, {TICKS} ticks, {SRT_GROUPS} soft-RT + 2 non-RT groups"), |b| {
            b.iter_batched(
                || make_controller(name, json!({})).expect("known controller"),
                |mut ctl| {
                    for obs in &seq {
                        black_box(ctl.tick(black_box(obs)));
                    }
                },
                BatchSize::SmallInput,
            )
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
