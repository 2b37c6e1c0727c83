//! `[memory]`, `[[reservation]]`, `[[region]]`, each task's memory keys (`reservation`,
//! `group`, `private_mb`, `access_order`, `access`), the access steps of programs and each
//! component's own memory, within caps that keep a scenario inside
//! this machine's memory.

use super::error::{Ctx, ScenarioError};
use super::raw::{PatternName, RawAccess, RawAction, RawComponent, RawDevice, RawScenario, RawSwap, RawTask, SwapPreset};
use crate::mem::mc2::Mc2Platform;
use crate::mem::{DeviceSpec, MemoryLayout, Placement, RegionKind, ReservationKind, SharePolicy};
use crate::model::memory::{
    task_placement, AccessStep, ComponentMemory, MemorySpec, Pattern, RegionDecl, ReservationDecl, Stream, StreamOrder, Target, TaskMemory,
    MIB,
};
use crate::model::task::TaskSpec;
use crate::time::Nanos;

/// Caps that keep a scenario within this machine's memory: frames and pages cost their
/// tables, references are made a job at a time, and the timeline keeps every sample.
const MAX_PAGES: u64 = 1 << 24;
const MAX_MAPPED_PAGES: u64 = 1 << 26;
const MAX_REFS_PER_JOB: u64 = 1 << 24;
const MAX_TIMELINE_SAMPLES: u64 = 1 << 20;
const MAX_TIMELINE_VALUES: u64 = 1 << 24;

/// `[memory] swap` given as a table: its figures checked and converted.
fn custom_device(cx: &Ctx<'_>, d: &RawDevice) -> Result<(String, DeviceSpec), ScenarioError> {
    let latency = |key: &str, us: f64| {
        if us.is_finite() && (0.0..=1e7).contains(&us) {
            Ok(Nanos((us * 1e3).round() as u64))
        } else {
            Err(cx.err(format!("memory.swap.{key}"), format!("must be from 0 to 1e7 µs (got {us})")))
        }
    };
    let bandwidth = |key: &str, mb_per_s: f64| {
        if mb_per_s.is_finite() && (0.001..=1e6).contains(&mb_per_s) {
            Ok((mb_per_s * 1e6).round() as u64)
        } else {
            Err(cx.err(format!("memory.swap.{key}"), format!("must be from 0.001 to 1e6 MB/s (got {mb_per_s})")))
        }
    };
    let name = d.name.clone().unwrap_or_else(|| "custom".into());
    if name.is_empty() {
        return Err(cx.err("memory.swap.name", "must not be empty"));
    }
    let spec = DeviceSpec {
        name: name.clone(),
        read_latency: latency("read_latency_us", d.read_latency_us)?,
        write_latency: latency("write_latency_us", d.write_latency_us)?,
        read_bytes_per_s: bandwidth("read_mb_per_s", d.read_mb_per_s)?,
        write_bytes_per_s: bandwidth("write_mb_per_s", d.write_mb_per_s)?,
    };
    Ok((name, spec))
}

impl Ctx<'_> {
    /// A size in MiB as whole pages (rounded up), at least `min_pages`.
    pub(super) fn pages(&self, key: &str, mb: f64, page_bytes: u64, min_pages: u64) -> Result<u64, ScenarioError> {
        if !mb.is_finite() || mb < 0.0 {
            return Err(self.err(key, format!("must be a non-negative number of MiB (got {mb})")));
        }
        let pages = (mb * MIB / page_bytes as f64).ceil();
        if pages > MAX_PAGES as f64 {
            return Err(self.err(key, format!("is too large: at most 2^24 pages of {page_bytes} bytes (got {mb} MiB)")));
        }
        let pages = pages as u64;
        if pages < min_pages {
            return Err(self.err(key, format!("must be at least {min_pages} page(s) of {page_bytes} bytes (got {mb} MiB)")));
        }
        Ok(pages)
    }
    fn count(&self, key: &str, v: Option<i64>, default: i64, min: i64) -> Result<u32, ScenarioError> {
        let v = v.unwrap_or(default);
        if v < min || v > i64::from(u32::MAX / 2) {
            return Err(self.err(key, format!("must be a whole number from {min} to {} (got {v})", u32::MAX / 2)));
        }
        Ok(v as u32)
    }
    fn fraction(&self, key: &str, v: Option<f64>, default: f64) -> Result<f64, ScenarioError> {
        let v = v.unwrap_or(default);
        if !(0.0..=1.0).contains(&v) {
            return Err(self.err(key, format!("must be a fraction from 0 to 1 (got {v})")));
        }
        Ok(v)
    }
}

/// The machine's memory with its reservations and regions (groups are added by
/// [`super::groups`]), or `None` without `[memory]`.
pub(super) fn validate_memory(cx: &Ctx, raw: &RawScenario, horizon: Nanos) -> Result<Option<MemorySpec>, ScenarioError> {
    let Some(m) = &raw.memory else {
        if !raw.reservation.is_empty() {
            return Err(cx.err("reservation", "memory reservations need a [memory] section"));
        }
        if !raw.region.is_empty() {
            return Err(cx.err("region", "shared regions need a [memory] section"));
        }
        return Ok(None);
    };
    let page_bytes = match m.page_bytes {
        None => 4096,
        Some(b) if (512..=(1 << 30)).contains(&b) && (b as u64).is_power_of_two() => b as u64,
        Some(b) => return Err(cx.err("memory.page_bytes", format!("must be a power of two from 512 to 2^30 (got {b})"))),
    };
    let total_frames = cx.pages("memory.total_mb", m.total_mb.unwrap_or(4096.0), page_bytes, 16)?;
    let (swap_name, swap) = match &m.swap {
        None => (SwapPreset::default().name().to_string(), SwapPreset::default().device()),
        Some(RawSwap::Preset(p)) => (p.name().to_string(), p.device()),
        Some(RawSwap::Custom(d)) => custom_device(cx, d)?,
    };
    let swap_in_cpu = match m.swap_in_cpu_us {
        None => Nanos::ZERO,
        Some(us) if us.is_finite() && (0.0..=1e6).contains(&us) => Nanos((us * 1e3).round() as u64),
        Some(us) => return Err(cx.err("memory.swap_in_cpu_us", format!("must be from 0 to 1e6 µs (got {us})"))),
    };
    let readahead_pages = match m.readahead_pages {
        None => 8,
        Some(r) if (1..=1024).contains(&r) && (r as u64).is_power_of_two() => r as u32,
        Some(r) => return Err(cx.err("memory.readahead_pages", format!("must be a power of two from 1 to 1024 (got {r})"))),
    };
    let sample_interval = match m.sample_ms {
        Some(ms) => cx.positive("memory.sample_ms", ms)?,
        None => Nanos((horizon.0 / 500).max(1_000_000)),
    };
    // Each sample holds one value per reservation and per task, plus two totals, and one per
    // server when a server reserves memory. The first sample is at time 0.
    let samples = horizon.0 / sample_interval.0.max(1) + 1;
    let servers = raw.scheduler.as_ref().map_or(&[][..], |s| &s.server[..]);
    let server_values = if servers.iter().any(|s| s.reserve.as_ref().is_some_and(|r| r.memory_mib.is_some())) { servers.len() } else { 0 };
    let values_per_sample = (raw.reservation.len() + raw.task.len() + 2 + server_values) as u64;
    if samples > MAX_TIMELINE_SAMPLES || samples.saturating_mul(values_per_sample) > MAX_TIMELINE_VALUES {
        return Err(cx.err(
            "memory.sample_ms",
            format!(
                "the memory timeline would take {samples} samples of {values_per_sample} values; at most 2^20 samples and 2^24 values \
                 are kept: set a larger sample_ms"
            ),
        ));
    }
    let mut reservations = Vec::new();
    for (i, r) in raw.reservation.iter().enumerate() {
        if reservations.iter().any(|x: &ReservationDecl| x.name == r.name) || r.name.is_empty() {
            return Err(cx.err(format!("reservation[{i}].name"), format!("must be unique and non-empty (got {:?})", r.name)));
        }
        let kind = r.kind.map_or(ReservationKind::Hard, ReservationKind::from);
        let pages = cx.pages(&format!("reservation[{i}].size_mb"), r.size_mb, page_bytes, 1)?;
        reservations.push(ReservationDecl { name: r.name.clone(), pages, kind });
    }
    let mut regions = Vec::new();
    for (i, r) in raw.region.iter().enumerate() {
        if regions.iter().any(|x: &RegionDecl| x.name == r.name) || r.name.is_empty() || r.name == "private" {
            return Err(cx.err(format!("region[{i}].name"), format!("must be unique, non-empty and not \"private\" (got {:?})", r.name)));
        }
        let kind = r.kind.map_or(RegionKind::SharedAnon, RegionKind::from);
        let policy = r.policy.map_or(SharePolicy::Global, SharePolicy::from);
        let pages = cx.pages(&format!("region[{i}].size_mb"), r.size_mb, page_bytes, 1)? as u32;
        regions.push(RegionDecl { name: r.name.clone(), pages, kind, policy });
    }
    Ok(Some(MemorySpec {
        page_bytes,
        total_frames: total_frames as u32,
        layout: m.layout.map_or(MemoryLayout::Flat, MemoryLayout::from),
        swap_name,
        swap,
        swap_in_cpu,
        readahead_pages,
        sample_interval,
        reservations,
        regions,
        groups: Vec::new(),
        components: Vec::new(),
        server_bounds: Vec::new(),
    }))
}

/// `layout = "mc2"`: the i.MX6's 8 banks and 16 colours scaled to the machine's memory, one
/// bank (4–7) per CPU for its level-A/B tasks, banks 0–3 for level C. A level-A/B task with a
/// `cpu` keeps its pages in its core's bank and never pages, so it maps private memory only,
/// joins no memory-limited group (which would reclaim its pages), and its reservation is hard,
/// set aside in its core's bank, and holds its whole private memory. Every other task is
/// level C: its reservation's frames and its group's lie in banks 0–3. A reservation's frames
/// lie in one bank set, so its tasks share one; what each bank set can hold is admission's
/// (`admission.rs`).
pub(super) fn check_layout(cx: &Ctx, raw: &RawScenario, m: &MemorySpec, tasks: &[TaskSpec], cpus: usize) -> Result<(), ScenarioError> {
    if m.layout == MemoryLayout::Flat {
        return Ok(());
    }
    const MC2: &str = "with memory.layout = \"mc2\"";
    let dram_bytes = u64::from(m.total_frames) * m.page_bytes;
    if let Err(e) = Mc2Platform::imx6_scaled(dram_bytes, m.page_bytes) {
        return Err(cx.err("memory.total_mb", format!("memory.layout = \"mc2\" splits memory by address bits: {e}")));
    }
    if cpus > 4 {
        return Err(cx.err(
            "memory.layout",
            format!("\"mc2\" gives each CPU's level-A/B tasks one of DRAM banks 4–7, so at most 4 CPUs (machine.cpus = {cpus})"),
        ));
    }
    let mib = |pages: u64| fmt_mib(pages as f64 * m.page_bytes as f64 / MIB);
    // The first task of each reservation fixes where its frames lie.
    let mut first: Vec<Option<(usize, Placement)>> = vec![None; m.reservations.len()];
    let mut pinned_pages = vec![0u64; m.reservations.len()];
    for (i, t) in tasks.iter().enumerate() {
        let Some(tm) = &t.memory else { continue };
        let placement = task_placement(m.layout, t);
        let pinned = placement.pins_pages();
        if pinned {
            if let Some(key) = shared_region_key(&raw.task[i], i) {
                return Err(cx.err(
                    key,
                    format!(
                        "a level-{} task's pages stay in its core's bank and are never paged {MC2}, so it cannot map a shared region; use private memory",
                        t.criticality
                    ),
                ));
            }
            if raw.group.iter().any(|g| g.name == tm.group) {
                return Err(cx.err(
                    format!("task[{i}].group"),
                    format!(
                        "a memory-limited group holds its limit by reclaiming its tasks' pages, but level-{} task {:?} keeps its pages in core {}'s bank and never pages {MC2}; groups hold level-C and -D tasks",
                        t.criticality,
                        t.name,
                        placement.ab_core().unwrap_or(0)
                    ),
                ));
            }
        }
        let Some(r) = tm.reservation else { continue };
        let decl = &m.reservations[r];
        match first[r] {
            None => first[r] = Some((i, placement)),
            Some((f, fp)) if fp.ab_core() != placement.ab_core() => {
                return Err(cx.err(
                    format!("task[{i}].reservation"),
                    format!(
                        "reservation {:?} sets its frames aside in {} for level-{} task {:?}, but level-{} task {:?} keeps its pages in {} {MC2}; a reservation's frames lie in one bank set: give it a reservation of its own",
                        decl.name,
                        fp.banks(),
                        tasks[f].criticality,
                        tasks[f].name,
                        t.criticality,
                        t.name,
                        placement.banks()
                    ),
                ));
            }
            Some(_) => {}
        }
        if pinned {
            if decl.kind != ReservationKind::Hard {
                return Err(cx.err(
                    format!("task[{i}].reservation"),
                    format!(
                        "reservation {:?} is firm: it borrows frames beyond its size and gives them back under pressure, but level-{} task {:?}'s pages never leave memory {MC2}; make it kind = \"hard\"",
                        decl.name,
                        t.criticality,
                        t.name
                    ),
                ));
            }
            pinned_pages[r] += u64::from(tm.private_pages);
        }
    }
    // Components are level-C services: their pages lie in banks 0–3.
    for (c, cm) in m.components.iter().enumerate() {
        let Some(r) = cm.as_ref().and_then(|cm| cm.reservation) else { continue };
        if let Some((f, fp)) = first[r].filter(|(_, fp)| fp.pins_pages()) {
            return Err(cx.err(
                format!("component[{c}].reservation"),
                format!(
                    "reservation {:?} sets its frames aside in {} for level-{} task {:?}, but a component's pages lie in the level-C banks {MC2}; give the component a reservation of its own",
                    m.reservations[r].name,
                    fp.banks(),
                    tasks[f].criticality,
                    tasks[f].name
                ),
            ));
        }
    }
    for (r, decl) in m.reservations.iter().enumerate() {
        if pinned_pages[r] > decl.pages {
            return Err(cx.err(
                format!("reservation[{r}].size_mb"),
                format!(
                    "holds level-A/B tasks with {} MiB of private memory, which never pages {MC2}, so it must be at least that large (got {} MiB)",
                    mib(pinned_pages[r]),
                    mib(decl.pages)
                ),
            ));
        }
    }
    Ok(())
}

/// The key of task `i`'s first access, as a stream or a program step, that names a shared
/// region.
fn shared_region_key(rt: &RawTask, i: usize) -> Option<String> {
    let shared = |a: &RawAccess| a.region.as_deref().is_some_and(|r| r != "private");
    if let Some(j) = rt.access.iter().position(shared) {
        return Some(format!("task[{i}].access[{j}].region"));
    }
    rt.program.iter().flatten().enumerate().find_map(|(j, a)| {
        let n = a.access.iter().flatten().position(shared)?;
        Some(format!("task[{i}].program[{j}].access[{n}].region"))
    })
}

/// MiB for a message: whole numbers bare, others to three decimals.
fn fmt_mib(mib: f64) -> String {
    let text = format!("{mib:.3}");
    text.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// Every region has per-page state, and every task maps its private pages and each region it
/// touches, with an entry per mapped page in the task's page table.
pub(super) fn check_mapped_pages<'t>(
    cx: &Ctx,
    m: &MemorySpec,
    task_memory: impl Iterator<Item = &'t TaskMemory>,
) -> Result<(), ScenarioError> {
    let mut mapped_pages: u64 = m.regions.iter().map(|r| u64::from(r.pages)).sum();
    let spaces = task_memory
        .map(|tm| (tm.private_pages, tm.regions()))
        .chain(m.components.iter().flatten().map(|cm| (cm.private_pages, cm.regions())));
    for (private_pages, regions) in spaces {
        let regions: u64 = regions.iter().map(|&r| u64::from(m.regions[r].pages)).sum();
        mapped_pages += u64::from(private_pages) + regions;
    }
    if mapped_pages > MAX_MAPPED_PAGES {
        return Err(cx.err("task", format!("the regions and tasks map {mapped_pages} pages in all (each region once, plus private and shared pages per task); at most 2^26 are allowed")));
    }
    Ok(())
}

/// What task `i` touches: its memory keys, which need `[memory]`.
pub(super) fn validate_task_memory(
    cx: &Ctx,
    i: usize,
    rt: &RawTask,
    memory: Option<&MemorySpec>,
) -> Result<Option<TaskMemory>, ScenarioError> {
    let k = |field: &str| format!("task[{i}].{field}");
    let Some(m) = memory else {
        for (present, field) in [
            (rt.reservation.is_some(), "reservation"),
            (rt.group.is_some(), "group"),
            (rt.private_mb.is_some(), "private_mb"),
            (rt.access_order.is_some(), "access_order"),
            (!rt.access.is_empty(), "access"),
        ] {
            if present {
                return Err(cx.err(k(field), "needs a [memory] section"));
            }
        }
        if let Some(j) = rt.program.iter().flatten().position(|a| a.access.is_some()) {
            return Err(cx.err(format!("task[{i}].program[{j}].access"), "touches memory, which needs a [memory] section"));
        }
        return Ok(None);
    };
    let reservation = match &rt.reservation {
        None => None,
        Some(name) => Some(
            m.reservations
                .iter()
                .position(|r| &r.name == name)
                .ok_or_else(|| cx.err(k("reservation"), format!("no reservation named {name:?}")))?,
        ),
    };
    let group = rt.group.clone().or_else(|| reservation.map(|r| m.reservations[r].name.clone())).unwrap_or_else(|| rt.name.clone());
    let private_pages = cx.pages(&k("private_mb"), rt.private_mb.unwrap_or(0.0), m.page_bytes, 0)? as u32;
    let order = rt.access_order.unwrap_or(StreamOrder::Sequence);
    let mut streams = Vec::with_capacity(rt.access.len());
    for (j, a) in rt.access.iter().enumerate() {
        streams.push(validate_stream(cx, &format!("task[{i}].access[{j}]"), a, m, private_pages)?);
    }
    let refs_per_job = streams.iter().map(Stream::refs_per_job).fold(0, u64::saturating_add);
    if refs_per_job > MAX_REFS_PER_JOB {
        return Err(cx.err(k("access"), format!("makes {refs_per_job} references per job; at most 2^24 are allowed")));
    }
    let steps = access_steps(cx, &k("program"), rt.program.as_deref().unwrap_or_default(), m, private_pages)?;
    Ok(Some(TaskMemory { reservation, group, private_pages, order, streams, steps }))
}

/// The access steps of a program at `key` (a task's or a component's), over memory with
/// `private_pages` of the owner's own.
fn access_steps(cx: &Ctx, key: &str, program: &[RawAction], m: &MemorySpec, private_pages: u32) -> Result<Vec<AccessStep>, ScenarioError> {
    let mut steps = Vec::new();
    for (j, a) in program.iter().enumerate() {
        let Some(raw) = &a.access else { continue };
        let mut streams = Vec::with_capacity(raw.len());
        for (n, stream) in raw.iter().enumerate() {
            streams.push(validate_stream(cx, &format!("{key}[{j}].access[{n}]"), stream, m, private_pages)?);
        }
        let step = AccessStep { order: a.access_order.unwrap_or(StreamOrder::Sequence), streams };
        if step.refs_per_run() > MAX_REFS_PER_JOB {
            return Err(
                cx.err(format!("{key}[{j}].access"), format!("makes {} references per run; at most 2^24 are allowed", step.refs_per_run()))
            );
        }
        steps.push(step);
    }
    Ok(steps)
}

/// Each component's own memory: its `private_mb`, `reservation` and the access steps of its
/// program, which need `[memory]`. Empty when no component declares any.
pub(super) fn validate_component_memory(
    cx: &Ctx,
    raw: &[RawComponent],
    memory: Option<&MemorySpec>,
) -> Result<Vec<Option<ComponentMemory>>, ScenarioError> {
    let mut out = Vec::with_capacity(raw.len());
    for (c, rc) in raw.iter().enumerate() {
        let k = |field: &str| format!("component[{c}].{field}");
        let has_steps = rc.program.iter().any(|a| a.access.is_some());
        let Some(m) = memory else {
            if let Some((_, field)) =
                [(rc.private_mb.is_some(), "private_mb"), (rc.reservation.is_some(), "reservation"), (has_steps, "program")]
                    .into_iter()
                    .find(|(present, _)| *present)
            {
                let why = if field == "program" {
                    "touches memory (an access step), which needs a [memory] section"
                } else {
                    "needs a [memory] section"
                };
                return Err(cx.err(k(field), why));
            }
            out.push(None);
            continue;
        };
        if rc.private_mb.is_none() && rc.reservation.is_none() && !has_steps {
            out.push(None);
            continue;
        }
        let reservation = match &rc.reservation {
            None => None,
            Some(name) => Some(
                m.reservations
                    .iter()
                    .position(|r| &r.name == name)
                    .ok_or_else(|| cx.err(k("reservation"), format!("no reservation named {name:?}")))?,
            ),
        };
        let private_pages = cx.pages(&k("private_mb"), rc.private_mb.unwrap_or(0.0), m.page_bytes, 0)? as u32;
        let steps = access_steps(cx, &k("program"), &rc.program, m, private_pages)?;
        out.push(Some(ComponentMemory { reservation, private_pages, steps }));
    }
    if out.iter().all(Option::is_none) {
        out.clear();
    }
    Ok(out)
}

/// One stream at `key`: `pattern` decides which keys apply.
fn validate_stream(cx: &Ctx, key: &str, a: &RawAccess, m: &MemorySpec, private_pages: u32) -> Result<Stream, ScenarioError> {
    let k = |field: &str| format!("{key}.{field}");
    let (target, size) = match a.region.as_deref() {
        None | Some("private") => (Target::Private, private_pages),
        Some(name) => {
            let r =
                m.regions.iter().position(|r| r.name == name).ok_or_else(|| cx.err(k("region"), format!("no region named {name:?}")))?;
            (Target::Region(r), m.regions[r].pages)
        }
    };
    if size == 0 {
        return Err(cx.err(k("region"), "the target has no pages: set the task's private_mb or name a shared region"));
    }
    let offset = cx.pages(&k("offset_mb"), a.offset_mb.unwrap_or(0.0), m.page_bytes, 0)? as u32;
    if offset >= size {
        return Err(cx.err(k("offset_mb"), format!("lies beyond the target's {size} pages")));
    }
    let span = match a.span_mb {
        Some(mb) => cx.pages(&k("span_mb"), mb, m.page_bytes, 1)? as u32,
        None => size - offset,
    };
    if offset + span > size {
        return Err(cx.err(k("span_mb"), format!("offset + span exceeds the target's {size} pages")));
    }
    let forbid = |present: bool, field: &str| {
        if present {
            Err(cx.err(k(field), format!("does not apply to pattern = {:?}", a.pattern.name())))
        } else {
            Ok(())
        }
    };
    let pattern = match a.pattern {
        PatternName::Sweep => {
            forbid(a.refs.is_some(), "refs")?;
            forbid(a.pages.is_some(), "pages")?;
            forbid(a.hot_fraction.is_some() || a.hot_share.is_some(), "hot_fraction")?;
            let pages = match a.mb {
                Some(mb) => cx.pages(&k("mb"), mb, m.page_bytes, 1)? as u32,
                None => span,
            };
            Pattern::Sweep { pages, offset, span }
        }
        PatternName::Random => {
            forbid(a.mb.is_some(), "mb")?;
            forbid(a.pages.is_some(), "pages")?;
            let refs = cx.count(&k("refs"), a.refs, 0, 1)?;
            forbid(a.hot_fraction.is_some() || a.hot_share.is_some(), "hot_fraction")?;
            Pattern::Random { refs, offset, span }
        }
        PatternName::Hotcold => {
            forbid(a.mb.is_some(), "mb")?;
            forbid(a.pages.is_some(), "pages")?;
            let refs = cx.count(&k("refs"), a.refs, 0, 1)?;
            let hot_fraction = cx.fraction(&k("hot_fraction"), a.hot_fraction, 0.2)?;
            let hot_pages = ((f64::from(span) * hot_fraction).round() as u32).clamp(1, span);
            let hot_share = cx.fraction(&k("hot_share"), a.hot_share, 0.8)?;
            Pattern::HotCold { refs, offset, span, hot_pages, hot_share }
        }
        PatternName::Trace => {
            forbid(a.mb.is_some(), "mb")?;
            forbid(a.refs.is_some(), "refs")?;
            let list = a.pages.as_ref().ok_or_else(|| cx.err(k("pages"), "missing: pattern = \"trace\" needs pages = [page numbers]"))?;
            if list.is_empty() {
                return Err(cx.err(k("pages"), "must list at least one page"));
            }
            let pages = list
                .iter()
                .enumerate()
                .map(|(n, &p)| {
                    if p < 0 || p as u64 >= u64::from(span) {
                        Err(cx.err(format!("{key}.pages[{n}]"), format!("page {p} is outside the span of {span} pages")))
                    } else {
                        Ok(offset + p as u32)
                    }
                })
                .collect::<Result<Vec<_>, _>>()?;
            Pattern::Trace { pages }
        }
        PatternName::Discard => {
            if target != Target::Private {
                return Err(cx.err(k("region"), "pattern = \"discard\" frees private memory only; drop region or set it to \"private\""));
            }
            forbid(a.mb.is_some(), "mb")?;
            forbid(a.refs.is_some(), "refs")?;
            forbid(a.pages.is_some(), "pages")?;
            forbid(a.hot_fraction.is_some(), "hot_fraction")?;
            forbid(a.hot_share.is_some(), "hot_share")?;
            forbid(a.writes.is_some(), "writes")?;
            forbid(a.passes.is_some(), "passes")?;
            Pattern::Discard { offset, span }
        }
    };
    let passes = cx.count(&k("passes"), a.passes, 1, 1)?;
    let write_fraction = cx.fraction(&k("writes"), a.writes, 0.0)?;
    let from_job = cx.count(&k("from_job"), a.from_job, 0, 0)? as u64;
    let until_job = match a.until_job {
        None => None,
        Some(u) => Some(u64::from(cx.count(&k("until_job"), Some(u), 0, 0)?)),
    };
    if until_job.is_some_and(|u| u <= from_job) {
        return Err(cx.err(k("until_job"), "must be greater than from_job"));
    }
    let every_jobs = u64::from(cx.count(&k("every_jobs"), a.every_jobs, 1, 1)?);
    Ok(Stream { target, pattern, passes, write_fraction, from_job, until_job, every_jobs })
}
