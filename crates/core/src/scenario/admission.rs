//! Admission of a scenario's memory declarations: what setting up the memory model for them
//! would refuse (reservation admission control, per bank set under MC²'s layout, limit
//! groups, the mappings a limit group may make, SPEL's lock admission), decided by arithmetic
//! over the declarations, without frames or page tables.
//!
//! The set-up it answers for is the simulator's, in its order: the machine, each reservation,
//! each server's memory bound (a hard one commits its size unless a hard ancestor holds it),
//! each region, each memory-limited group, then each task's address space with its private
//! memory and the regions its streams address (first use first), then each `spel` region's
//! lock. The first refusal is the answer, with the scenario key it comes from.

use crate::mem::mc2::Mc2Platform;
use crate::mem::{BoundKind, DeviceId, MemConfig, MemError, MemoryLayout, Placement, RegionKind, ReservationKind, SharePolicy};
use crate::model::memory::{reservation_placement, MemorySpec, MIB};
use crate::model::task::{Criticality, TaskSpec};
use std::collections::BTreeSet;

/// Why a scenario's memory cannot be set up: the key at fault and the reason.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AdmissionError {
    pub key: String,
    pub message: String,
}

/// MiB for a message: whole numbers bare, others to three decimals.
fn fmt_mib(mib: f64) -> String {
    let text = format!("{mib:.3}");
    text.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// What a task's address space is charged to.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Bound {
    Global,
    /// A hard or firm reservation, by index.
    Reservation(usize),
    /// A limit group (a `[[group]]`, or a reservation declared as one).
    Limit,
}

/// Checks that the memory of `spec` with the tasks' declarations can be set up. A task
/// without a declaration maps nothing (the loader gives every task one).
pub fn check(spec: &MemorySpec, tasks: &[TaskSpec]) -> Result<(), AdmissionError> {
    let at = |key: String| move |e: MemError| AdmissionError { key: key.clone(), message: e.to_string() };
    let cfg = MemConfig {
        page_bytes: spec.page_bytes,
        total_frames: spec.total_frames,
        readahead_pages: spec.readahead_pages,
        ..MemConfig::default()
    };
    cfg.validate().map_err(at("memory".into()))?;
    spec.swap.validate().map_err(|m| at("memory".into())(MemError::InvalidConfig(m)))?;
    let total = u64::from(cfg.total_frames);
    let capacity = u64::from(cfg.total_frames - cfg.unreserved_min_frames);
    let min_pages = cfg.min_reservation_pages.max(1);
    let too_small = |name: &str, pages: u64| MemError::ReservationTooSmall { name: name.to_string(), pages, min: min_pages };

    // Under MC²'s layout each bank set admits what is placed in it: a core's level-A/B banks
    // its reservations, the level-C banks theirs and SPEL's locks (less the OS's minimum).
    let platform = match spec.layout {
        MemoryLayout::Flat => None,
        MemoryLayout::Mc2 => Some(
            Mc2Platform::imx6_scaled(u64::from(spec.total_frames) * spec.page_bytes, spec.page_bytes)
                .map_err(|m| at("memory.total_mb".into())(MemError::InvalidConfig(m)))?,
        ),
    };
    let mut committed_in = platform.as_ref().map_or_else(Vec::new, |p| vec![0u64; p.lists()]);
    let admit_placed = |committed_in: &[u64], name: &str, placement: Placement, pages: u64| -> Result<(), MemError> {
        let Some(p) = &platform else { return Ok(()) };
        let list = p.list_for(placement).expect("validated: cores of the machine");
        let frames = p.list_frames(list);
        let capacity = if placement.ab_core().is_some() { frames } else { frames.saturating_sub(u64::from(cfg.unreserved_min_frames)) };
        let available = capacity.saturating_sub(committed_in[list]);
        if pages > available {
            return Err(MemError::PlacementAdmission {
                name: name.to_string(),
                requested: pages,
                available,
                frames,
                banks: placement.banks(),
            });
        }
        Ok(())
    };
    let list_of = |placement: Placement| platform.as_ref().and_then(|p| p.list_for(placement));
    let level_c = list_of(Placement::Any);

    // Frames promised to reservations: their sizes; SPEL locks below move part of them.
    let mut committed = 0;
    for (i, r) in spec.reservations.iter().enumerate() {
        if r.pages < min_pages {
            return Err(at(format!("reservation[{i}].size_mb"))(too_small(&r.name, r.pages)));
        }
        if r.kind != ReservationKind::Limit {
            if committed + r.pages > capacity {
                let available = capacity.saturating_sub(committed);
                let e = MemError::AdmissionRejected { name: r.name.clone(), requested: r.pages, available, total };
                return Err(at(format!("reservation[{i}].size_mb"))(e));
            }
            let placement = reservation_placement(spec.layout, i, tasks);
            admit_placed(&committed_in, &r.name, placement, r.pages).map_err(at(format!("reservation[{i}].size_mb")))?;
            if let Some(list) = list_of(placement) {
                committed_in[list] += r.pages;
            }
            committed += r.pages;
        }
    }
    // Hard server bounds set their size aside, beside the reservations.
    let held_by_hard = |mut p: Option<usize>| {
        while let Some(b) = p {
            if spec.server_bounds[b].kind == BoundKind::Hard {
                return true;
            }
            p = spec.server_bounds[b].parent;
        }
        false
    };
    for sb in &spec.server_bounds {
        let Some(pages) = sb.pages else { continue };
        if sb.kind == BoundKind::Hard && !held_by_hard(sb.parent) {
            if committed + pages > capacity {
                let available = capacity.saturating_sub(committed);
                let e = MemError::AdmissionRejected { name: sb.name.clone(), requested: pages, available, total };
                return Err(at(format!("scheduler.server[{}].reserve.memory_mib", sb.server))(e));
            }
            committed += pages;
        }
    }
    for (i, r) in spec.regions.iter().enumerate() {
        if r.pages == 0 {
            return Err(at(format!("region[{i}]"))(MemError::EmptyRegion));
        }
        // The machine has one device, the swap device.
        if let RegionKind::SharedFile { device } = r.kind {
            if device != DeviceId::SWAP {
                return Err(at(format!("region[{i}]"))(MemError::NoSuchDevice(device.0)));
            }
        }
    }
    for (i, g) in spec.groups.iter().enumerate() {
        let pages = g.max_pages.unwrap_or(total);
        if pages < min_pages {
            return Err(at(format!("group[{i}].max_mb"))(too_small(&g.name, pages)));
        }
    }

    // The reservations sharing each region: those of the tasks and components that map it.
    let mut sharers: Vec<BTreeSet<usize>> = vec![BTreeSet::new(); spec.regions.len()];
    for (ti, tm) in tasks.iter().enumerate().filter_map(|(ti, t)| Some((ti, t.memory.as_ref()?))) {
        let key = |f: &str| format!("task[{ti}].{f}");
        // A reservation holds the task's pages; a group of a reserved task is a bound on top.
        let bound = match (tm.reservation, spec.groups.iter().any(|g| g.name == tm.group)) {
            (Some(r), _) if spec.reservations.get(r).is_some_and(|d| d.kind == ReservationKind::Limit) => Bound::Limit,
            (Some(r), _) if r < spec.reservations.len() => Bound::Reservation(r),
            (Some(r), _) => return Err(at(key("reservation"))(MemError::NoSuchReservation(r as u32))),
            (None, true) => Bound::Limit,
            (None, false) => Bound::Global,
        };
        let t = &tasks[ti];
        let pinned = spec.layout == MemoryLayout::Mc2 && t.criticality <= Criticality::B && t.cpu.is_some();
        if pinned {
            let mut at_bound = spec.server_bounds.iter().position(|sb| sb.tasks.contains(&ti));
            while let Some(b) = at_bound {
                let sb = &spec.server_bounds[b];
                if sb.pages.is_some() {
                    return Err(AdmissionError {
                        key: key("server"),
                        message: format!(
                            "a level-{} task's pages stay in its core's bank and never page, so server {:?}'s reserve.memory_mib cannot bound them; attach the task under a server that reserves no memory",
                            t.criticality, sb.name
                        ),
                    });
                }
                at_bound = sb.parent;
            }
        }
        let space = Space { id: ti as u32, key: &key, bound, group: &tm.group, private_pages: tm.private_pages };
        map_space(spec, &space, &tm.regions(), &mut sharers)?;
    }
    // Components' own spaces come after every task's, in file order.
    for (ci, cm) in spec.components.iter().enumerate().filter_map(|(ci, c)| Some((ci, c.as_ref()?))) {
        let key = |f: &str| format!("component[{ci}].{f}");
        let bound = match cm.reservation {
            Some(r) if spec.reservations.get(r).is_some_and(|d| d.kind == ReservationKind::Limit) => Bound::Limit,
            Some(r) if r < spec.reservations.len() => Bound::Reservation(r),
            Some(r) => return Err(at(key("reservation"))(MemError::NoSuchReservation(r as u32))),
            None => Bound::Global,
        };
        let name = spec.reservations.get(cm.reservation.unwrap_or(usize::MAX)).map_or("", |r| r.name.as_str());
        let space = Space { id: (tasks.len() + ci) as u32, key: &key, bound, group: name, private_pages: cm.private_pages };
        map_space(spec, &space, &cm.regions(), &mut sharers)?;
    }

    // SPEL: each sharing reservation gives up the region's size to a copy held once; each
    // must have more than that not yet given to other locks.
    let mut locked_charge = vec![0u64; spec.reservations.len()];
    for (ri, r) in spec.regions.iter().enumerate().filter(|(_, r)| r.policy == SharePolicy::Spel) {
        let key = format!("region[{ri}].policy");
        let region_pages = u64::from(r.pages);
        for &res in &sharers[ri] {
            let effective = spec.reservations[res].pages - locked_charge[res];
            if effective <= region_pages {
                let need = locked_charge[res] + region_pages + 1;
                // The model counts pages; the file names the region and reservation, in MiB.
                let mib = |pages: u64| pages as f64 * spec.page_bytes as f64 / MIB;
                let message = format!(
                    "SPEL cannot lock region {:?} ({} MiB): reservation {:?} has {} MiB not yet locked, which must exceed the region; make its size_mb at least {} (reservation[{res}]) or use policy `spc`",
                    r.name,
                    fmt_mib(mib(region_pages)),
                    spec.reservations[res].name,
                    fmt_mib(mib(effective)),
                    fmt_mib((mib(need) * 1000.0).ceil() / 1000.0),
                );
                return Err(AdmissionError { key, message });
            }
        }
        // Nobody gives anything up: the lock takes its frames from what is left uncommitted.
        if sharers[ri].is_empty() {
            if committed + region_pages > capacity {
                let available = capacity.saturating_sub(committed);
                return Err(at(key)(MemError::AdmissionRejected { name: r.name.clone(), requested: region_pages, available, total }));
            }
            admit_placed(&committed_in, &r.name, Placement::Any, region_pages).map_err(at(key.clone()))?;
        }
        // The sharers' sizes shrink by the region, which is committed once (locked pages lie
        // in the level-C banks, as do the sharers' frames: level-A/B tasks map no region).
        for &res in &sharers[ri] {
            locked_charge[res] += region_pages;
            committed -= region_pages;
            if let Some(c) = level_c {
                committed_in[c] -= region_pages;
            }
        }
        committed += region_pages;
        if let Some(c) = level_c {
            committed_in[c] += region_pages;
        }
    }
    Ok(())
}

/// An address space being set up: its number, where its keys are, what bounds it.
struct Space<'a> {
    id: u32,
    key: &'a dyn Fn(&str) -> String,
    bound: Bound,
    /// Its memory-limited group (or reservation), for messages.
    group: &'a str,
    private_pages: u32,
}

/// Maps `space`'s private pages and then `regions` (first use first), as setting it up
/// would; notes which reservations share each region.
fn map_space(spec: &MemorySpec, space: &Space<'_>, regions: &[usize], sharers: &mut [BTreeSet<usize>]) -> Result<(), AdmissionError> {
    let at = |key: String| move |e: MemError| AdmissionError { key: key.clone(), message: e.to_string() };
    let key = space.key;
    // Virtual pages are allocated contiguously as regions are mapped.
    let space_full = || MemError::AddressSpaceFull { space: space.id };
    let mut mapped_pages = u64::from(space.private_pages);
    if mapped_pages >= u64::from(u32::MAX) {
        return Err(at(key("private_mb"))(space_full()));
    }
    let where_ = if key("").starts_with("component") { "program" } else { "access" };
    for &r in regions {
        let region = &spec.regions[r];
        if space.bound == Bound::Limit && matches!(region.policy, SharePolicy::Spc | SharePolicy::Spel | SharePolicy::Auto) {
            return Err(AdmissionError {
                key: key(where_),
                message: format!(
                    "region {:?} uses policy `{}`, which needs per-reservation accounting that memory-limited group {:?} does not have; use a `global`, `private` or `first-touch` region",
                    region.name, region.policy, space.group
                ),
            });
        }
        if mapped_pages + u64::from(region.pages) >= u64::from(u32::MAX) {
            return Err(at(key(where_))(space_full()));
        }
        mapped_pages += u64::from(region.pages);
        if let Bound::Reservation(res) = space.bound {
            sharers[r].insert(res);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memsim::MemSim;
    use crate::model::memory::{GroupDecl, Pattern, RegionDecl, ReservationDecl, ServerBound, Stream, StreamOrder, Target, TaskMemory};
    use crate::model::task::{Arrival, Criticality, ExecTime, OverrunPolicy};
    use crate::time::Nanos;
    use critmem_policy::GroupRole;
    use proptest::prelude::*;
    use proptest::strategy::ValueTree;
    use proptest::test_runner::{Config, RngSeed};

    fn task(name: String, memory: TaskMemory) -> TaskSpec {
        TaskSpec {
            name,
            arrival: Arrival::Periodic,
            exec: ExecTime::Fixed(Nanos(1)),
            period: Nanos(10),
            deadline: Nanos(10),
            offset: Nanos::ZERO,
            stop: None,
            priority: None,
            criticality: Criticality::C,
            cpu: None,
            overrun: OverrunPolicy::Continue,
            suspensions: Vec::new(),
            memory: Some(memory),
            command: None,
            program: None,
        }
    }

    fn stream(target: Target) -> Stream {
        Stream {
            target,
            pattern: Pattern::Sweep { pages: 1, offset: 0, span: 1 },
            passes: 1,
            write_fraction: 0.0,
            from_job: 0,
            until_job: None,
            every_jobs: 1,
        }
    }

    const POLICIES: [SharePolicy; 6] =
        [SharePolicy::Global, SharePolicy::Private, SharePolicy::FirstTouch, SharePolicy::Spc, SharePolicy::Spel, SharePolicy::Auto];

    /// (reservation pages, firm), (region pages, file, policy), group max pages, tasks as
    /// (group pick, reservation pick, private pages, streams' region picks).
    type Declarations = (u32, Vec<(u64, bool)>, Vec<(u32, bool, usize)>, Vec<Option<u64>>, Vec<(usize, Option<usize>, u32, Vec<usize>)>);

    fn declarations() -> impl Strategy<Value = Declarations> {
        (
            // Small sizes, so that the draws often land on the boundaries (equal sizes).
            16u32..160,
            prop::collection::vec((1u64..60, any::<bool>()), 0..4),
            prop::collection::vec((1u32..40, any::<bool>(), 0..POLICIES.len()), 0..4),
            prop::collection::vec(prop::option::of(1u64..200), 0..3),
            prop::collection::vec((0usize..6, prop::option::of(0usize..4), 0u32..40, prop::collection::vec(0usize..6, 0..5)), 1..5),
        )
    }

    /// The memory and tasks of the drawn declarations: picks beyond the lists mean none (or a
    /// task's own group, or its private memory).
    fn build((total_frames, reservations, regions, groups, tasks): Declarations) -> (MemorySpec, Vec<TaskSpec>) {
        let reservations: Vec<ReservationDecl> = reservations
            .into_iter()
            .enumerate()
            .map(|(i, (pages, firm))| ReservationDecl {
                name: format!("r{i}"),
                pages,
                kind: if firm { ReservationKind::Firm } else { ReservationKind::Hard },
            })
            .collect();
        let regions: Vec<RegionDecl> = regions
            .into_iter()
            .enumerate()
            .map(|(i, (pages, file, policy))| RegionDecl {
                name: format!("shm{i}"),
                pages,
                kind: if file { RegionKind::SharedFile { device: DeviceId::SWAP } } else { RegionKind::SharedAnon },
                policy: POLICIES[policy],
            })
            .collect();
        let groups: Vec<GroupDecl> = groups
            .into_iter()
            .enumerate()
            .map(|(i, max_pages)| GroupDecl {
                name: format!("g{i}"),
                role: GroupRole::NonRealTime,
                floor_pages: 1,
                max_pages,
                high_pages: None,
                min_pages: None,
                low_pages: None,
                bandwidth: Default::default(),
            })
            .collect();
        let tasks = tasks
            .into_iter()
            .enumerate()
            .map(|(ti, (group, reservation, private_pages, streams))| {
                let reservation = reservation.filter(|&r| r < reservations.len());
                let group = match (groups.get(group), reservation) {
                    (Some(g), _) => g.name.clone(),
                    (None, Some(r)) => reservations[r].name.clone(),
                    (None, None) => format!("t{ti}"),
                };
                let streams = streams
                    .into_iter()
                    .map(|r| stream(if r < regions.len() { Target::Region(r) } else { Target::Private }))
                    .filter(|s| s.target != Target::Private || private_pages > 0)
                    .collect();
                task(
                    format!("t{ti}"),
                    TaskMemory { reservation, group, private_pages, order: StreamOrder::Sequence, streams, steps: Vec::new() },
                )
            })
            .collect();
        let spec = MemorySpec {
            page_bytes: 4096,
            total_frames,
            layout: crate::mem::MemoryLayout::Flat,
            swap_name: "slow-ssd".into(),
            swap: crate::mem::DeviceSpec::slow_ssd(),
            swap_in_cpu: Nanos::ZERO,
            readahead_pages: 8,
            sample_interval: Nanos::from_ms(1),
            reservations,
            regions,
            groups,
            components: Vec::new(),
            server_bounds: Vec::new(),
        };
        (spec, tasks)
    }

    /// Server bounds as (pages or none, hard, parent pick), parents first; each task is
    /// attached to the bound its index picks (none beyond the list).
    type BoundDeclarations = Vec<(Option<u64>, bool, usize)>;

    fn server_bounds() -> impl Strategy<Value = BoundDeclarations> {
        prop::collection::vec((prop::option::of(1u64..90), any::<bool>(), 0usize..6), 0..4)
    }

    fn with_bounds(spec: &mut MemorySpec, tasks: usize, bounds: BoundDeclarations) {
        let n = bounds.len();
        spec.server_bounds = bounds
            .into_iter()
            .enumerate()
            .map(|(i, (pages, hard, parent))| ServerBound {
                server: i,
                name: format!("s{i}"),
                bytes: pages.map(|p| p * 4096),
                pages,
                kind: if hard && pages.is_some() { BoundKind::Hard } else { BoundKind::Soft },
                parent: (parent < i).then_some(parent),
                tasks: (0..tasks).filter(|t| t % 4 == i && i < n).collect(),
            })
            .collect();
    }

    fn seeded(cases: u32) -> Config {
        let seed = std::env::var("PROPTEST_RNG_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(rand::random);
        eprintln!("admission: proptest seed {seed} (rerun with PROPTEST_RNG_SEED={seed})");
        Config { cases, failure_persistence: None, rng_seed: RngSeed::Fixed(seed), ..Config::default() }
    }

    proptest! {
        #![proptest_config(seeded(2048))]

        /// The arithmetic accepts exactly what setting up the simulator's memory accepts, and
        /// refuses the rest at the same key with the same message.
        #[test]
        fn admission_agrees_with_building_the_memory_model(d in declarations(), b in server_bounds(), seed in any::<u64>()) {
            let (mut spec, tasks) = build(d);
            with_bounds(&mut spec, tasks.len(), b);
            let names: Vec<String> = tasks.iter().map(|t| t.name.clone()).collect();
            let built = MemSim::new(&spec, &tasks, &names, &[], seed, true)
                .map(drop)
                .map_err(|e| AdmissionError { key: e.key, message: e.message });
            prop_assert_eq!(check(&spec, &tasks), built, "{:?}", spec);
        }
    }

    /// Declarations under MC²'s layout: `total_frames` a power of two of at least 128,
    /// reservations with a home (a core's level-A/B banks, or 4 for level C), each task placed
    /// as its reservation (or drawn) and, at level A/B, mapping no region and joining no group,
    /// as the loader requires.
    type Mc2Declarations = (u32, Vec<(u32, u64, bool)>, Vec<(u32, bool, usize)>, Vec<(u32, Option<usize>, u32, Vec<usize>, bool)>);

    fn mc2_declarations() -> impl Strategy<Value = Mc2Declarations> {
        (
            7u32..10,
            prop::collection::vec((0u32..5, 1u64..90, any::<bool>()), 0..5),
            prop::collection::vec((1u32..60, any::<bool>(), 0..POLICIES.len()), 0..3),
            prop::collection::vec(
                (0u32..5, prop::option::of(0usize..5), 0u32..20, prop::collection::vec(0usize..4, 0..3), any::<bool>()),
                1..5,
            ),
        )
    }

    fn build_mc2((log_frames, reservations, regions, tasks): Mc2Declarations) -> (MemorySpec, Vec<TaskSpec>) {
        let homes: Vec<u32> = reservations.iter().map(|r| r.0).collect();
        let reservations = reservations.iter().map(|&(home, pages, firm)| (pages, firm && home == 4)).collect();
        let flat_tasks =
            tasks.iter().map(|(_, r, private, streams, _)| (9, r.filter(|&r| r < homes.len()), *private, streams.clone())).collect();
        let (mut spec, mut specs) = build((1 << log_frames, reservations, regions, vec![Some(64)], flat_tasks));
        spec.layout = crate::mem::MemoryLayout::Mc2;
        for (t, (home, pick, _, _, grouped)) in specs.iter_mut().zip(tasks) {
            let tm = t.memory.as_mut().expect("built with memory");
            let home = tm.reservation.map_or(home, |r| homes[r]);
            if home < 4 {
                t.criticality = Criticality::B;
                t.cpu = Some(home as usize);
                tm.streams.retain(|s| s.target == Target::Private);
            } else if grouped && pick.is_none() {
                tm.group = "g0".into();
            }
        }
        (spec, specs)
    }

    proptest! {
        #![proptest_config(seeded(1024))]

        /// Under MC²'s layout too: each bank set admits what is placed in it, and the
        /// arithmetic refuses exactly what building the memory model refuses.
        #[test]
        fn admission_agrees_with_building_the_memory_model_under_mc2(d in mc2_declarations(), seed in any::<u64>()) {
            let (spec, tasks) = build_mc2(d);
            let names: Vec<String> = tasks.iter().map(|t| t.name.clone()).collect();
            let built = MemSim::new(&spec, &tasks, &names, &[], seed, true)
                .map(drop)
                .map_err(|e| AdmissionError { key: e.key, message: e.message });
            prop_assert_eq!(check(&spec, &tasks), built, "{:?}", spec);
        }
    }

    /// The mc2 draws reach a bank set's refusal, for a core and for level C, and acceptance.
    #[test]
    fn the_mc2_draws_reach_every_bank_refusal() {
        let mut runner = proptest::test_runner::TestRunner::new(seeded(1));
        let mut seen = std::collections::BTreeSet::new();
        for _ in 0..4000 {
            let (spec, tasks) = build_mc2(mc2_declarations().new_tree(&mut runner).unwrap().current());
            match check(&spec, &tasks) {
                Ok(()) => seen.insert("accepted"),
                Err(e) if e.message.contains("level-A/B banks hold") => seen.insert("core"),
                Err(e) if e.message.contains("the level-C banks hold") => seen.insert("level C"),
                Err(_) => seen.insert("other"),
            };
        }
        for want in ["accepted", "core", "level C"] {
            assert!(seen.contains(want), "{want} never drawn: {seen:?}");
        }
    }

    /// At the boundaries, where an off-by-one would hide among random draws: a reservation
    /// exactly the size of the SPEL region it shares (refused) or one page larger (admitted),
    /// a second lock counting the first, and an unshared lock filling the machine exactly.
    #[test]
    fn admission_agrees_at_the_boundaries() {
        let spel = POLICIES.iter().position(|&p| p == SharePolicy::Spel).unwrap();
        let task = |reservation: usize, regions: Vec<usize>| (9, Some(reservation), 0, regions);
        let cases: Vec<Declarations> = vec![
            (100, vec![(20, false)], vec![(20, false, spel)], vec![], vec![task(0, vec![0])]),
            (100, vec![(21, false)], vec![(20, false, spel)], vec![], vec![task(0, vec![0])]),
            (100, vec![(41, true)], vec![(20, false, spel), (20, true, spel)], vec![], vec![task(0, vec![0, 1])]),
            (100, vec![(40, true)], vec![(20, false, spel), (20, true, spel)], vec![], vec![task(0, vec![0, 1])]),
            (100, vec![(60, false)], vec![(40, false, spel)], vec![], vec![(9, None, 1, vec![0])]),
            (100, vec![(61, false)], vec![(40, false, spel)], vec![], vec![(9, None, 1, vec![0])]),
            (100, vec![(60, false), (40, true)], vec![], vec![], vec![(9, None, 1, vec![])]),
            (100, vec![(60, false), (41, true)], vec![], vec![], vec![(9, None, 1, vec![])]),
        ];
        let mut refused = 0;
        for d in cases {
            let (spec, tasks) = build(d);
            let names: Vec<String> = tasks.iter().map(|t| t.name.clone()).collect();
            let built =
                MemSim::new(&spec, &tasks, &names, &[], 1, true).map(drop).map_err(|e| AdmissionError { key: e.key, message: e.message });
            let ours = check(&spec, &tasks);
            refused += usize::from(ours.is_err());
            assert_eq!(ours, built, "{spec:?}");
        }
        assert_eq!(refused, 4, "every other case is one page over its boundary");
    }

    /// The draws reach every kind of refusal (so the agreement above is not vacuous).
    #[test]
    fn the_drawn_declarations_reach_every_refusal() {
        let mut runner = proptest::test_runner::TestRunner::new(seeded(1));
        let mut keys = std::collections::BTreeSet::new();
        for _ in 0..4000 {
            let d = declarations().new_tree(&mut runner).unwrap().current();
            let (mut spec, tasks) = build(d);
            with_bounds(&mut spec, tasks.len(), server_bounds().new_tree(&mut runner).unwrap().current());
            match check(&spec, &tasks) {
                Ok(()) => keys.insert("accepted".to_string()),
                Err(e) => keys.insert(e.key.split(['[', '.']).next().unwrap().to_string() + "/" + e.message.split(' ').next().unwrap()),
            };
        }
        for want in ["accepted", "reservation/reservation", "task/region", "region/SPEL", "region/reservation", "scheduler/reservation"] {
            assert!(keys.contains(want), "{want} never drawn: {keys:?}");
        }
    }
}
