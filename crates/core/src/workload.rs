//! Memory behaviour of tasks: the declarations a scenario makes (machine memory,
//! reservations, shared regions, what each job touches) and the generation of each job's
//! page-reference string from them.

use crate::mem::{DeviceSpec, RefKind, RegionKind, ReservationKind, SharePolicy, Vpn};
use crate::rng::SimRng;
use crate::time::Nanos;
use rand::RngCore;

/// Machine memory and the objects in it.
#[derive(Clone, Debug, PartialEq)]
pub struct MemorySpec {
    pub page_bytes: u64,
    pub total_frames: u32,
    /// Swap device preset name and its parameters.
    pub swap_name: String,
    pub swap: DeviceSpec,
    pub readahead_pages: u32,
    /// Interval of the memory timeline samples.
    pub sample_interval: Nanos,
    pub reservations: Vec<ReservationDecl>,
    pub regions: Vec<RegionDecl>,
    /// Memory-limited workload groups (`[[group]]`), the ones a controller manages.
    pub groups: Vec<GroupDecl>,
}

/// What a managed group is for (the controller's [`critmem_policy::GroupRole`] without the
/// deadline, which comes from the group's tasks).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GroupKind {
    SoftRealTime { bcet: Nanos },
    NonRealTime,
}

/// A memory-limited group with cgroup v2 semantics (see [`crate::mem::ReservationKind::Limit`]).
#[derive(Clone, Debug, PartialEq)]
pub struct GroupDecl {
    pub name: String,
    pub kind: GroupKind,
    /// Relative deadline of the group's jobs (its first task's), for soft real-time groups.
    pub deadline: Nanos,
    /// The smallest max/high a controller may set.
    pub floor_pages: u64,
    /// Initial `memory.max`; `None` = unlimited (the whole machine).
    pub max_pages: Option<u64>,
    pub high_pages: Option<u64>,
    pub min_pages: Option<u64>,
    pub low_pages: Option<u64>,
}

/// The controller tick loop of a scenario (`[control]`).
#[derive(Clone, Debug, PartialEq)]
pub struct ControlSpec {
    /// A name [`critmem_policy::make_controller`] accepts.
    pub controller: String,
    /// Its configuration table, passed through as it was written.
    pub config: serde_json::Value,
    pub interval: Nanos,
}

#[derive(Clone, Debug, PartialEq)]
pub struct ReservationDecl {
    pub name: String,
    pub pages: u64,
    pub kind: ReservationKind,
}

#[derive(Clone, Debug, PartialEq)]
pub struct RegionDecl {
    pub name: String,
    pub pages: u32,
    pub kind: RegionKind,
    pub policy: SharePolicy,
}

/// What a task's jobs touch.
#[derive(Clone, Debug, PartialEq)]
pub struct TaskMemory {
    /// Index into [`MemorySpec::reservations`] charged for the task's pages.
    pub reservation: Option<usize>,
    /// Stall-accounting (PSI) and controller group.
    pub group: String,
    /// Private anonymous footprint (code, data, heap).
    pub private_pages: u32,
    pub order: StreamOrder,
    pub streams: Vec<Stream>,
}

/// How a job's streams combine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StreamOrder {
    /// One stream after the other (phases within a job).
    Sequence,
    /// One reference from each stream in turn.
    Interleave,
}

/// Which pages a stream addresses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    Private,
    /// Index into [`MemorySpec::regions`].
    Region(usize),
}

/// One stream of references per job.
#[derive(Clone, Debug, PartialEq)]
pub struct Stream {
    pub target: Target,
    pub pattern: Pattern,
    /// Repeat the job's references this many times.
    pub passes: u32,
    /// Share of references that write.
    pub write_fraction: f64,
    /// Active for jobs `from_job..until_job` (phases over time).
    pub from_job: u64,
    pub until_job: Option<u64>,
    /// Active only on every `every_jobs`-th job counted from `from_job` (periodic bursts,
    /// such as loading the next shard); 1 = every job.
    pub every_jobs: u64,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Pattern {
    /// `pages` consecutive pages per job from where the previous job stopped, wrapping
    /// around `[offset, offset + span)`.
    Sweep { pages: u32, offset: u32, span: u32 },
    /// `refs` references uniform over `[offset, offset + span)`.
    Random { refs: u32, offset: u32, span: u32 },
    /// `refs` references, `hot_share` of them to the first `hot_pages` of the span.
    HotCold { refs: u32, offset: u32, span: u32, hot_pages: u32, hot_share: f64 },
    /// A fixed page-number sequence (offsets into the target) per job.
    Trace { pages: Vec<u32> },
}

/// Per-task state carried from job to job.
#[derive(Clone, Debug, Default)]
pub struct StreamCursor {
    next: u32,
}

impl TaskMemory {
    /// Appends job `job_index`'s references to `out`; `base(target)` is where the target
    /// starts in the task's address space.
    pub fn job_refs(
        &self,
        job_index: u64,
        cursors: &mut [StreamCursor],
        rng: &mut SimRng,
        base: impl Fn(Target) -> Vpn,
        out: &mut Vec<(Vpn, RefKind)>,
    ) {
        let mut per_stream: Vec<Vec<(Vpn, RefKind)>> = Vec::with_capacity(self.streams.len());
        for (s, cur) in self.streams.iter().zip(cursors.iter_mut()) {
            let active = job_index >= s.from_job
                && s.until_job.is_none_or(|u| job_index < u)
                && (job_index - s.from_job) % s.every_jobs.max(1) == 0;
            let mut refs = Vec::new();
            if active {
                s.generate(cur, rng, base(s.target), &mut refs);
            }
            per_stream.push(refs);
        }
        match self.order {
            StreamOrder::Sequence => per_stream.into_iter().for_each(|r| out.extend(r)),
            StreamOrder::Interleave => {
                let longest = per_stream.iter().map(Vec::len).max().unwrap_or(0);
                for i in 0..longest {
                    out.extend(per_stream.iter().filter_map(|r| r.get(i).copied()));
                }
            }
        }
    }
}

impl Stream {
    fn generate(&self, cur: &mut StreamCursor, rng: &mut SimRng, base: Vpn, out: &mut Vec<(Vpn, RefKind)>) {
        let mut one_pass: Vec<u32> = Vec::new();
        match &self.pattern {
            Pattern::Sweep { pages, offset, span } => {
                let start = cur.next;
                one_pass.extend((0..*pages).map(|k| offset + (start + k) % span));
                cur.next = (start + pages) % span;
            }
            Pattern::Random { refs, offset, span } => {
                one_pass.extend((0..*refs).map(|_| offset + below(rng.next_u32(), *span)));
            }
            Pattern::HotCold { refs, offset, span, hot_pages, hot_share } => {
                let cold = span - hot_pages;
                let hot_below = threshold(*hot_share);
                // One draw per reference: the low half decides hot or cold, the high half picks
                // the page (references are the simulator's innermost loop).
                for _ in 0..*refs {
                    let r = rng.next_u64();
                    let hot = cold == 0 || (r & 0xffff_ffff) < hot_below;
                    let pick = (r >> 32) as u32;
                    let p = if hot { below(pick, *hot_pages) } else { hot_pages + below(pick, cold) };
                    one_pass.push(offset + p);
                }
            }
            Pattern::Trace { pages } => one_pass.extend(pages.iter().copied()),
        }
        let write_below = threshold(self.write_fraction);
        for _ in 0..self.passes {
            for &p in &one_pass {
                let kind = if self.write_fraction >= 1.0
                    || (self.write_fraction > 0.0 && u64::from(rng.next_u32()) < write_below)
                {
                    RefKind::Write
                } else {
                    RefKind::Read
                };
                out.push((base.offset(p), kind));
            }
        }
    }
}

/// A uniform pick from `0..n` out of 32 random bits (multiply-shift: no rejection loop; the
/// bias is below n / 2^32).
fn below(bits: u32, n: u32) -> u32 {
    ((u64::from(bits) * u64::from(n)) >> 32) as u32
}

/// `p` as a threshold on 32 random bits: `bits < threshold(p)` with probability `p`.
fn threshold(p: f64) -> u64 {
    (p.clamp(0.0, 1.0) * 4_294_967_296.0) as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::sub_rng;

    fn stream(pattern: Pattern) -> Stream {
        Stream { target: Target::Private, pattern, passes: 1, write_fraction: 0.0, from_job: 0, until_job: None, every_jobs: 1 }
    }

    #[test]
    fn sweeps_continue_where_the_previous_job_stopped_and_wrap() {
        let tm = TaskMemory {
            reservation: None,
            group: "g".into(),
            private_pages: 10,
            order: StreamOrder::Sequence,
            streams: vec![stream(Pattern::Sweep { pages: 4, offset: 0, span: 10 })],
        };
        let mut cur = vec![StreamCursor::default()];
        let mut rng = sub_rng(0, "m", 0);
        let mut pages = |job| {
            let mut out = Vec::new();
            tm.job_refs(job, &mut cur, &mut rng, |_| Vpn(100), &mut out);
            out.iter().map(|(v, _)| v.0 - 100).collect::<Vec<_>>()
        };
        assert_eq!(pages(0), vec![0, 1, 2, 3]);
        assert_eq!(pages(1), vec![4, 5, 6, 7]);
        assert_eq!(pages(2), vec![8, 9, 0, 1]);
    }

    #[test]
    fn interleaving_alternates_streams_and_phases_switch_by_job() {
        let mut a = stream(Pattern::Trace { pages: vec![1, 2, 3] });
        a.until_job = Some(1);
        let mut b = stream(Pattern::Trace { pages: vec![7, 8] });
        b.passes = 2;
        let tm = TaskMemory { reservation: None, group: "g".into(), private_pages: 10, order: StreamOrder::Interleave, streams: vec![a, b] };
        let mut cur = vec![StreamCursor::default(), StreamCursor::default()];
        let mut rng = sub_rng(0, "m", 0);
        let mut out = Vec::new();
        tm.job_refs(0, &mut cur, &mut rng, |_| Vpn(0), &mut out);
        assert_eq!(out.iter().map(|(v, _)| v.0).collect::<Vec<_>>(), vec![1, 7, 2, 8, 3, 7, 8]);
        out.clear();
        tm.job_refs(1, &mut cur, &mut rng, |_| Vpn(0), &mut out);
        assert_eq!(out.iter().map(|(v, _)| v.0).collect::<Vec<_>>(), vec![7, 8, 7, 8], "stream a ended after job 0");
    }

    #[test]
    fn a_periodic_stream_runs_on_every_nth_job_from_its_first() {
        let mut burst = stream(Pattern::Trace { pages: vec![9] });
        burst.from_job = 2;
        burst.every_jobs = 3;
        let tm = TaskMemory { reservation: None, group: "g".into(), private_pages: 10, order: StreamOrder::Sequence, streams: vec![burst] };
        let mut cur = vec![StreamCursor::default()];
        let mut rng = sub_rng(0, "m", 0);
        let active: Vec<u64> = (0..10)
            .filter(|&j| {
                let mut out = Vec::new();
                tm.job_refs(j, &mut cur, &mut rng, |_| Vpn(0), &mut out);
                !out.is_empty()
            })
            .collect();
        assert_eq!(active, vec![2, 5, 8]);
    }

    #[test]
    fn hot_cold_concentrates_on_the_hot_set() {
        let s = stream(Pattern::HotCold { refs: 10_000, offset: 0, span: 100, hot_pages: 10, hot_share: 0.9 });
        let mut out = Vec::new();
        s.generate(&mut StreamCursor::default(), &mut sub_rng(3, "m", 0), Vpn(0), &mut out);
        let hot = out.iter().filter(|(v, _)| v.0 < 10).count();
        assert!((8_800..=9_200).contains(&hot), "{hot}");
        assert!(out.iter().all(|(v, _)| v.0 < 100));
    }
}
