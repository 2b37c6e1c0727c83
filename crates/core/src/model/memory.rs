//! Memory behaviour of tasks: the declarations a scenario makes (machine memory,
//! reservations, shared regions, what each job touches) and the generation of each job's
//! page-reference string from them.

use crate::mem::{BoundKind, DeviceSpec, Mc2Level, MemoryLayout, Placement, RefKind, RegionKind, ReservationKind, SharePolicy, Vpn};
use crate::model::task::{Criticality, TaskSpec};
use crate::rng::{SimRng, Words};
use crate::time::Nanos;
use critmem_policy::{ControllerConfig, GroupRole};
use serde::Deserialize;

/// Bytes in a MiB (sizes in scenario files are MiB).
pub const MIB: f64 = 1_048_576.0;

/// Machine memory and the objects in it.
#[derive(Clone, Debug, PartialEq)]
pub struct MemorySpec {
    pub page_bytes: u64,
    pub total_frames: u32,
    /// Physical layout: flat, or MC²'s banks with level-A/B pages in their core's bank.
    pub layout: MemoryLayout,
    /// Swap device preset name and its parameters.
    pub swap_name: String,
    pub swap: DeviceSpec,
    /// CPU per page swapped in that is not memory stall.
    pub swap_in_cpu: Nanos,
    pub readahead_pages: u32,
    /// Interval of the memory timeline samples.
    pub sample_interval: Nanos,
    pub reservations: Vec<ReservationDecl>,
    pub regions: Vec<RegionDecl>,
    /// Memory-limited workload groups (`[[group]]`), the ones a controller manages.
    pub groups: Vec<GroupDecl>,
    /// Each component's own memory, by component index (`None`: it touches none); empty when
    /// no component declares memory.
    pub components: Vec<Option<ComponentMemory>>,
    /// One per `[[scheduler.server]]`, parents first, when a server reserves memory
    /// (`reserve.memory_mib`); empty otherwise.
    pub server_bounds: Vec<ServerBound>,
}

/// Where task `t`'s pages lie under `layout`: under MC²'s, a level-A/B task pinned to a CPU
/// takes its core's banks (and its pages are never paged out), every other task the level-C
/// banks; the flat layout places nothing.
pub fn task_placement(layout: MemoryLayout, t: &TaskSpec) -> Placement {
    match (layout, t.criticality, t.cpu) {
        (MemoryLayout::Mc2, Criticality::A, Some(cpu)) => Placement::Mc2 { core: cpu as u32, level: Mc2Level::A },
        (MemoryLayout::Mc2, Criticality::B, Some(cpu)) => Placement::Mc2 { core: cpu as u32, level: Mc2Level::B },
        _ => Placement::Any,
    }
}

/// Where reservation `r`'s frames lie: those of the first task bound to it (the loader
/// requires every task of a reservation to share one placement under a layout).
pub fn reservation_placement(layout: MemoryLayout, r: usize, tasks: &[TaskSpec]) -> Placement {
    tasks.iter().find(|t| t.memory.as_ref().is_some_and(|m| m.reservation == Some(r))).map_or(Placement::Any, |t| task_placement(layout, t))
}

/// A scheduler server's memory reservation as a bound on the resident pages of every task
/// under it (see [`crate::mem::Memory::create_bound`]); the servers under it hold what it
/// grants, their pages counting in its bound too.
#[derive(Clone, Debug, PartialEq)]
pub struct ServerBound {
    /// The server's index in file order.
    pub server: usize,
    pub name: String,
    /// What `reserve.memory_mib` reserves, in bytes; `None`: nothing (the bound only counts
    /// the subtree's pages, for the servers' figures).
    pub bytes: Option<u64>,
    /// The reservation in whole pages.
    pub pages: Option<u64>,
    pub kind: BoundKind,
    /// The parent server's bound (an index into [`MemorySpec::server_bounds`]).
    pub parent: Option<usize>,
    /// The tasks attached to the server itself.
    pub tasks: Vec<usize>,
}

/// A memory-limited group with cgroup v2 semantics (see [`crate::mem::ReservationKind::Limit`]).
#[derive(Clone, Debug, PartialEq)]
pub struct GroupDecl {
    pub name: String,
    /// What the group is for; a soft real-time group's deadline is its first task's.
    pub role: GroupRole,
    /// The smallest max/high a controller may set.
    pub floor_pages: u64,
    /// Initial `memory.max`; `None` = unlimited (the whole machine).
    pub max_pages: Option<u64>,
    pub high_pages: Option<u64>,
    pub min_pages: Option<u64>,
    pub low_pages: Option<u64>,
    /// Starting CPU and I/O bandwidth limits (cgroup `cpu.max`, `io.max` on the swap device).
    pub bandwidth: critmem_policy::BandwidthKnobs,
}

/// The controller tick loop of a scenario (`[control]`).
#[derive(Clone, Debug, PartialEq)]
pub struct ControlSpec {
    /// The controller and its checked configuration (SARA's interval already resolved to
    /// `interval`).
    pub config: ControllerConfig,
    /// The loop's tick.
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
    /// The task's `access` streams: each job's references, its whole demand spread over them
    /// (shorthand for a program of one access step).
    pub order: StreamOrder,
    pub streams: Vec<Stream>,
    /// The access steps of the task's program, in program order.
    pub steps: Vec<AccessStep>,
}

impl TaskMemory {
    /// The regions any of its streams or program steps address, each once, in first-use order.
    pub fn regions(&self) -> Vec<usize> {
        regions_of(self.streams.iter().chain(self.steps.iter().flat_map(|s| &s.streams)))
    }
}

/// The regions `streams` address, each once, in first-use order.
fn regions_of<'s>(streams: impl Iterator<Item = &'s Stream>) -> Vec<usize> {
    let mut out = Vec::new();
    for s in streams {
        if let Target::Region(r) = s.target {
            if !out.contains(&r) {
                out.push(r);
            }
        }
    }
    out
}

impl MemorySpec {
    /// Whether the pages of task `task`'s own space (`component`: of that component's space)
    /// stay resident once touched, so touching them never waits for the device: a level-A/B
    /// task's own pages on the MC² layout (pinned in its core's bank), or pages charged to a
    /// hard reservation that can hold every page of every space charged to it (private pages
    /// and the regions each maps, none of them file-backed, whose first touch reads the
    /// device).
    pub fn keeps_resident(&self, tasks: &[TaskSpec], task: usize, component: Option<usize>) -> bool {
        match component {
            None => {
                let t = &tasks[task];
                task_placement(self.layout, t).pins_pages() || self.holds_all(tasks, t.memory.as_ref().and_then(|tm| tm.reservation))
            }
            Some(c) => self.holds_all(tasks, self.components.get(c).and_then(Option::as_ref).and_then(|cm| cm.reservation)),
        }
    }

    /// Whether hard reservation `r` can hold every page of every space charged to it.
    fn holds_all(&self, tasks: &[TaskSpec], r: Option<usize>) -> bool {
        let Some(r) = r else { return false };
        if self.reservations[r].kind != ReservationKind::Hard {
            return false;
        }
        let space_pages = |private_pages: u32, regions: Vec<usize>| -> Option<u64> {
            regions.iter().try_fold(u64::from(private_pages), |acc, &g| {
                let region = &self.regions[g];
                (!matches!(region.kind, RegionKind::SharedFile { .. })).then(|| acc + u64::from(region.pages))
            })
        };
        let spaces = tasks
            .iter()
            .filter_map(|t| t.memory.as_ref())
            .filter(|tm| tm.reservation == Some(r))
            .map(|tm| space_pages(tm.private_pages, tm.regions()))
            .chain(
                self.components
                    .iter()
                    .flatten()
                    .filter(|cm| cm.reservation == Some(r))
                    .map(|cm| space_pages(cm.private_pages, cm.regions())),
            );
        let mut charged = 0u64;
        for pages in spaces {
            let Some(pages) = pages else { return false };
            charged += pages;
        }
        charged <= self.reservations[r].pages
    }
}

/// One access step of a program: one run's references over its owner's memory.
#[derive(Clone, Debug, PartialEq)]
pub struct AccessStep {
    pub order: StreamOrder,
    pub streams: Vec<Stream>,
}

impl AccessStep {
    /// References one run of the step makes (discards apart).
    pub fn refs_per_run(&self) -> u64 {
        self.streams.iter().map(Stream::refs_per_job).fold(0, u64::saturating_add)
    }
}

/// A component's own memory: the address space its invocations' access steps touch.
#[derive(Clone, Debug, PartialEq)]
pub struct ComponentMemory {
    /// Index into [`MemorySpec::reservations`] charged for its pages.
    pub reservation: Option<usize>,
    pub private_pages: u32,
    /// The access steps of its program, in program order.
    pub steps: Vec<AccessStep>,
}

impl ComponentMemory {
    /// The regions its steps address, each once, in first-use order.
    pub fn regions(&self) -> Vec<usize> {
        regions_of(self.steps.iter().flat_map(|s| &s.streams))
    }
}

/// How a job's streams combine (`access_order`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
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
    /// Frees `[offset, offset + span)` at this point of the job (`madvise(MADV_DONTNEED)`):
    /// one [`RefKind::Discard`] per page, no compute and no random draws.
    Discard { offset: u32, span: u32 },
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
        refs_of(self.order, &self.streams, job_index, cursors, rng, base, out);
    }
}

impl AccessStep {
    /// Appends one run's references to `out` for job `job_index` of the owner's task (streams
    /// active only on some jobs follow it); `base(target)` is where the target starts in the
    /// owner's address space.
    pub fn refs(
        &self,
        job_index: u64,
        cursors: &mut [StreamCursor],
        rng: &mut SimRng,
        base: impl Fn(Target) -> Vpn,
        out: &mut Vec<(Vpn, RefKind)>,
    ) {
        refs_of(self.order, &self.streams, job_index, cursors, rng, base, out);
    }
}

/// The references of `streams` combined in `order`, for job `job_index`.
fn refs_of(
    order: StreamOrder,
    streams: &[Stream],
    job_index: u64,
    cursors: &mut [StreamCursor],
    rng: &mut SimRng,
    base: impl Fn(Target) -> Vpn,
    out: &mut Vec<(Vpn, RefKind)>,
) {
    let active = |s: &Stream| s.active(job_index);
    match order {
        // Straight into `out`: the streams follow one another there anyway.
        StreamOrder::Sequence => {
            for (s, cur) in streams.iter().zip(cursors.iter_mut()) {
                if active(s) {
                    s.generate(cur, rng, base(s.target), out);
                }
            }
        }
        StreamOrder::Interleave => {
            let mut per_stream: Vec<Vec<(Vpn, RefKind)>> = Vec::with_capacity(streams.len());
            for (s, cur) in streams.iter().zip(cursors.iter_mut()) {
                let mut refs = Vec::new();
                if active(s) {
                    s.generate(cur, rng, base(s.target), &mut refs);
                }
                per_stream.push(refs);
            }
            let longest = per_stream.iter().map(Vec::len).max().unwrap_or(0);
            for i in 0..longest {
                out.extend(per_stream.iter().filter_map(|r| r.get(i).copied()));
            }
        }
    }
}

impl TaskMemory {
    /// Leaves `cursors` and `rng` as [`TaskMemory::job_refs`] would for job `job_index`,
    /// without making the references, and returns how many accesses and how many discards it
    /// would make. The engine
    /// generates a job's references when the job first runs, from a copy of the generator
    /// taken at release: the same numbers, but a backlog of queued jobs holds no reference
    /// strings, and a job that never runs never makes its own.
    pub fn skip_job(&self, job_index: u64, cursors: &mut [StreamCursor], rng: &mut SimRng) -> (usize, usize) {
        let (mut words, mut refs, mut discards) = (0u128, 0usize, 0usize);
        for (s, cur) in self.streams.iter().zip(cursors.iter_mut()) {
            if !s.active(job_index) {
                continue;
            }
            match &s.pattern {
                Pattern::Sweep { pages, span, .. } => cur.next = (cur.next + pages) % span,
                Pattern::Random { refs, .. } => words += u128::from(*refs),
                Pattern::HotCold { refs, .. } => words += 2 * u128::from(*refs),
                Pattern::Trace { .. } => {}
                // No draws, no passes, no writes (the loader refuses them).
                Pattern::Discard { span, .. } => {
                    discards += *span as usize;
                    continue;
                }
            }
            let n = s.refs_per_job() as usize;
            if s.write_fraction > 0.0 && s.write_fraction < 1.0 {
                words += n as u128;
            }
            refs += n;
        }
        if words > 0 {
            rng.set_word_pos(rng.get_word_pos() + words);
        }
        (refs, discards)
    }
}

impl Stream {
    /// References one job makes in this stream when it is active, all passes included
    /// (a discard makes none).
    pub fn refs_per_job(&self) -> u64 {
        let one_pass = match &self.pattern {
            Pattern::Sweep { pages, .. } => u64::from(*pages),
            Pattern::Random { refs, .. } | Pattern::HotCold { refs, .. } => u64::from(*refs),
            Pattern::Trace { pages } => pages.len() as u64,
            Pattern::Discard { .. } => 0,
        };
        one_pass.saturating_mul(u64::from(self.passes))
    }

    // `%` rather than is_multiple_of: the workspace's rust-version predates it.
    #[allow(clippy::manual_is_multiple_of)]
    fn active(&self, job_index: u64) -> bool {
        job_index >= self.from_job
            && self.until_job.is_none_or(|u| job_index < u)
            && (job_index - self.from_job) % self.every_jobs.max(1) == 0
    }
}

/// Calls `f` on each element of `dst` with one random word, taken from the generator a
/// buffer at a time ([`Words`]): its `fill_bytes` hands out the same little-endian
/// 32-bit words as `next_u32` (and `next_u64` is two of them, low first), so the draws are the
/// same numbers in the same order as one call per draw, without the per-draw bookkeeping.
fn zip_words<T>(rng: &mut SimRng, dst: &mut [T], mut f: impl FnMut(&mut T, u32)) {
    let mut buf = [0u8; 4 * WORD_CHUNK];
    let mut words = Words::of(rng, dst.len());
    for part in dst.chunks_mut(WORD_CHUNK) {
        let bytes = &mut buf[..4 * part.len()];
        words.fill(rng, bytes);
        for (d, w) in part.iter_mut().zip(bytes.chunks_exact(4)) {
            f(d, u32::from_le_bytes([w[0], w[1], w[2], w[3]]));
        }
    }
    words.finish(rng);
}

/// As [`zip_words`], with one `next_u64` draw per element.
fn zip_u64s<T>(rng: &mut SimRng, dst: &mut [T], mut f: impl FnMut(&mut T, u64)) {
    let mut buf = [0u8; 4 * WORD_CHUNK];
    let mut words = Words::of(rng, 2 * dst.len());
    for part in dst.chunks_mut(WORD_CHUNK / 2) {
        let bytes = &mut buf[..8 * part.len()];
        words.fill(rng, bytes);
        for (d, w) in part.iter_mut().zip(bytes.chunks_exact(8)) {
            f(d, u64::from_le_bytes([w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7]]));
        }
    }
    words.finish(rng);
}

/// Words per [`Words::fill`] call (4 KiB on the stack).
const WORD_CHUNK: usize = 1024;

impl Stream {
    /// Appends one job's references of this stream to `out`: every pass's pages first, then
    /// the read/write draws in reference order (the draw order of the original
    /// one-reference-at-a-time loop).
    fn generate(&self, cur: &mut StreamCursor, rng: &mut SimRng, base: Vpn, out: &mut Vec<(Vpn, RefKind)>) {
        let start = out.len();
        let write_fraction = self.write_fraction;
        let kind = if write_fraction >= 1.0 { RefKind::Write } else { RefKind::Read };
        let at = |p: u32| (base.offset(p), kind);
        match &self.pattern {
            Pattern::Sweep { pages, offset, span } => {
                let s = cur.next;
                out.extend((0..*pages).map(|k| at(offset + (s + k) % span)));
                cur.next = (s + pages) % span;
            }
            Pattern::Random { refs, offset, span } => {
                out.resize(start + *refs as usize, at(0));
                zip_words(rng, &mut out[start..], |d, w| d.0 = base.offset(offset + below(w, *span)));
            }
            Pattern::HotCold { refs, offset, span, hot_pages, hot_share } => {
                let cold = span - hot_pages;
                let hot_below = threshold(*hot_share);
                out.resize(start + *refs as usize, at(0));
                // One draw per reference: the low half decides hot or cold, the high half picks
                // the page (references are the simulator's innermost loop). Written as selects,
                // not branches: hot or cold is unpredictable.
                zip_u64s(rng, &mut out[start..], |d, r| {
                    let hot = cold == 0 || (r & 0xffff_ffff) < hot_below;
                    let (first, n) = if hot { (0, *hot_pages) } else { (*hot_pages, cold) };
                    d.0 = base.offset(offset + first + below((r >> 32) as u32, n));
                });
            }
            Pattern::Trace { pages } => out.extend(pages.iter().map(|&p| at(p))),
            Pattern::Discard { offset, span } => {
                out.extend((*offset..offset + span).map(|p| (base.offset(p), RefKind::Discard)));
                return;
            }
        }
        let one_pass = out.len() - start;
        if self.passes == 0 {
            out.truncate(start);
            return;
        }
        for _ in 1..self.passes {
            out.extend_from_within(start..start + one_pass);
        }
        if write_fraction > 0.0 && write_fraction < 1.0 {
            let write_below = threshold(write_fraction);
            zip_words(rng, &mut out[start..], |d, w| {
                d.1 = if u64::from(w) < write_below { RefKind::Write } else { RefKind::Read };
            });
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
    use rand::RngCore;

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
            steps: Vec::new(),
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
        let tm = TaskMemory {
            reservation: None,
            group: "g".into(),
            private_pages: 10,
            order: StreamOrder::Interleave,
            streams: vec![a, b],
            steps: Vec::new(),
        };
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
        let tm = TaskMemory {
            reservation: None,
            group: "g".into(),
            private_pages: 10,
            order: StreamOrder::Sequence,
            streams: vec![burst],
            steps: Vec::new(),
        };
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

    /// The generator as it was before the batched draws: one `next_u64`/`next_u32` call per
    /// draw, every pass's pages first, then one write draw per reference.
    fn one_draw_at_a_time(s: &Stream, rng: &mut SimRng, base: Vpn) -> Vec<(Vpn, RefKind)> {
        let mut one_pass = Vec::new();
        match &s.pattern {
            Pattern::Random { refs, offset, span } => {
                one_pass.extend((0..*refs).map(|_| offset + below(rng.next_u32(), *span)));
            }
            Pattern::HotCold { refs, offset, span, hot_pages, hot_share } => {
                let cold = span - hot_pages;
                for _ in 0..*refs {
                    let r = rng.next_u64();
                    let hot = cold == 0 || (r & 0xffff_ffff) < threshold(*hot_share);
                    let pick = (r >> 32) as u32;
                    one_pass.push(offset + if hot { below(pick, *hot_pages) } else { hot_pages + below(pick, cold) });
                }
            }
            _ => unreachable!(),
        }
        let mut out = Vec::new();
        for _ in 0..s.passes {
            for &p in &one_pass {
                let write = s.write_fraction >= 1.0 || (s.write_fraction > 0.0 && u64::from(rng.next_u32()) < threshold(s.write_fraction));
                out.push((base.offset(p), if write { RefKind::Write } else { RefKind::Read }));
            }
        }
        out
    }

    #[test]
    fn batched_draws_are_the_one_at_a_time_draws() {
        // Odd lengths straddle the generator's blocks and the batch size, in both word widths.
        let streams = [
            Pattern::HotCold { refs: 3001, offset: 5, span: 100, hot_pages: 10, hot_share: 0.9 },
            Pattern::Random { refs: 2049, offset: 7, span: 50 },
            Pattern::HotCold { refs: 777, offset: 0, span: 40, hot_pages: 40, hot_share: 0.3 },
        ];
        for (k, pattern) in streams.into_iter().enumerate() {
            for (passes, write_fraction) in [(1, 0.2), (3, 0.0), (2, 1.0), (0, 0.5)] {
                let s = Stream { passes, write_fraction, ..stream(pattern.clone()) };
                let seed = 9;
                let (mut a, mut b) = (sub_rng(seed, "m", k as u64), sub_rng(seed, "m", k as u64));
                // Misalign the word position first: a u64 draw can span two blocks.
                a.next_u32();
                b.next_u32();
                let mut out = vec![(Vpn(1), RefKind::Write)];
                s.generate(&mut StreamCursor::default(), &mut a, Vpn(64), &mut out);
                assert_eq!(out[0], (Vpn(1), RefKind::Write), "appends");
                assert_eq!(
                    out[1..],
                    one_draw_at_a_time(&s, &mut b, Vpn(64))[..],
                    "seed {seed}, stream {k}, {passes} passes, writes {write_fraction}"
                );
                assert_eq!(a.get_word_pos(), b.get_word_pos(), "same number of draws");
            }
        }
    }

    #[test]
    fn skipping_a_job_leaves_the_generator_and_cursors_as_making_it_does() {
        let mut burst = stream(Pattern::Random { refs: 333, offset: 10, span: 90 });
        burst.from_job = 1;
        burst.every_jobs = 2;
        let mut sweep = stream(Pattern::Sweep { pages: 7, offset: 0, span: 10 });
        sweep.passes = 2;
        sweep.write_fraction = 0.5;
        let mut hot = stream(Pattern::HotCold { refs: 501, offset: 0, span: 100, hot_pages: 10, hot_share: 0.9 });
        hot.write_fraction = 0.3;
        let mut trace = stream(Pattern::Trace { pages: vec![1, 2, 3] });
        trace.write_fraction = 1.0;
        let mut free = stream(Pattern::Discard { offset: 20, span: 5 });
        free.every_jobs = 3;
        for order in [StreamOrder::Sequence, StreamOrder::Interleave] {
            let tm = TaskMemory {
                reservation: None,
                group: "g".into(),
                private_pages: 100,
                order,
                streams: vec![burst.clone(), sweep.clone(), free.clone(), hot.clone(), trace.clone()],
                steps: Vec::new(),
            };
            let (mut cur_a, mut cur_b) = (vec![StreamCursor::default(); 5], vec![StreamCursor::default(); 5]);
            let seed = 5;
            eprintln!("seed {seed}, order {order:?}");
            let (mut a, mut b) = (sub_rng(seed, "m", 0), sub_rng(seed, "m", 0));
            for job in 0..6 {
                let mut out = Vec::new();
                tm.job_refs(job, &mut cur_a, &mut a, |_| Vpn(0), &mut out);
                let discards = out.iter().filter(|r| r.1 == RefKind::Discard).count();
                assert_eq!(tm.skip_job(job, &mut cur_b, &mut b), (out.len() - discards, discards), "job {job}");
                assert_eq!(a.get_word_pos(), b.get_word_pos(), "job {job}");
                assert_eq!(cur_a.iter().map(|c| c.next).collect::<Vec<_>>(), cur_b.iter().map(|c| c.next).collect::<Vec<_>>());
            }
            assert_eq!(a.next_u64(), b.next_u64());
        }
    }

    #[test]
    fn hot_cold_concentrates_on_the_hot_set() {
        let s = stream(Pattern::HotCold { refs: 10_000, offset: 0, span: 100, hot_pages: 10, hot_share: 0.9 });
        let mut out = Vec::new();
        let seed = 3;
        s.generate(&mut StreamCursor::default(), &mut sub_rng(seed, "m", 0), Vpn(0), &mut out);
        let hot = out.iter().filter(|(v, _)| v.0 < 10).count();
        assert!((8_800..=9_200).contains(&hot), "seed {seed}: {hot} of 10000 references hot");
        assert!(out.iter().all(|(v, _)| v.0 < 100));
    }
}
