//! `[memory] layout = "mc2"`: the page-level model takes frames from MC²'s criticality-aware
//! buddy allocator. Level-A/B pages lie in their core's bank and are never paged (a task whose
//! working set outgrows its bank is OOM-killed, taking nothing from another bank), level-C
//! pages lie in banks 0–3 whatever reclaim does, the flat layout is unchanged. Reservations
//! set their frames aside in their tasks' banks (a level-A/B reservation holds its tasks'
//! whole memory, never paged), memory-limited groups serve level C from banks 0–3, and what
//! the layout cannot support is refused in one line naming the key.

use crate::common::seeded_config;
use critmem_core::mem::mc2::{Mc2Buddy, Mc2Platform};
use critmem_core::mem::{Access, AsId, DeviceSpec, Mc2Level, MemConfig, MemError, Memory, Placement, RefKind, Vpn};
use critmem_core::{load_toml_str, simulate, Nanos, SimOptions, SimResult};
use proptest::prelude::*;

/// A task of a test scenario: its level, its CPU (levels A/B), private memory swept per job.
#[derive(Clone, Debug)]
struct Task {
    level: &'static str,
    cpu: Option<usize>,
    private_mb: f64,
    wcet_ms: u64,
    period_ms: u64,
    /// The `reservation` or `group` it names.
    reservation: Option<&'static str>,
    group: Option<&'static str>,
}

fn ab(level: &'static str, cpu: usize, private_mb: f64) -> Task {
    Task { level, cpu: Some(cpu), private_mb, wcet_ms: 1, period_ms: 10, reservation: None, group: None }
}

fn c(private_mb: f64) -> Task {
    Task { level: "C", cpu: None, private_mb, wcet_ms: 4, period_ms: 20, reservation: None, group: None }
}

impl Task {
    fn in_reservation(self, name: &'static str) -> Task {
        Task { reservation: Some(name), ..self }
    }
    fn in_group(self, name: &'static str) -> Task {
        Task { group: Some(name), ..self }
    }
}

/// An MC²-scheduled machine of `cpus` CPUs and `total_mb` MiB on `layout`; a level-A task
/// gets a 1 ms slot at the start of each 10 ms frame. Each job sweeps its private memory.
fn scenario(layout: &str, cpus: usize, total_mb: u64, tasks: &[Task]) -> String {
    let mut s = format!(
        "[machine]\ncpus = {cpus}\n[run]\nhorizon_ms = 100\nseed = 7\n[scheduler]\nkind = \"mc2\"\nmajor_frame_ms = 10\n\
         [memory]\ntotal_mb = {total_mb}\nswap = \"fast-ssd\"\nlayout = \"{layout}\"\n"
    );
    for (i, t) in tasks.iter().enumerate().filter(|(_, t)| t.level == "A") {
        s += &format!("[[scheduler.slot]]\ntask = \"t{i}\"\nstart_ms = 0\nduration_ms = {}\n", t.wcet_ms);
    }
    for (i, t) in tasks.iter().enumerate() {
        s += &format!(
            "[[task]]\nname = \"t{i}\"\ncriticality = \"{}\"\nwcet_ms = {}\nperiod_ms = {}\nprivate_mb = {}\n\
             access = [{{ pattern = \"sweep\", mb = {}, writes = 0.5 }}]\n",
            t.level, t.wcet_ms, t.period_ms, t.private_mb, t.private_mb
        );
        if let Some(cpu) = t.cpu {
            s += &format!("cpu = {cpu}\n");
        }
        if let Some(r) = t.reservation {
            s += &format!("reservation = \"{r}\"\n");
        }
        if let Some(g) = t.group {
            s += &format!("group = \"{g}\"\n");
        }
    }
    s
}

fn run(text: &str) -> SimResult {
    let s = load_toml_str(text, "test.toml").unwrap_or_else(|e| panic!("{e}\n{text}"));
    simulate(&s, SimOptions { record_jobs: false, record_segments: false, check_invariants: true })
}

fn error(text: &str) -> String {
    load_toml_str(text, "test.toml").expect_err("the file is refused").to_string()
}

/// Where each task's frames lie, and that levels A/B never page: a level-A/B task's frames
/// are all in bank `4 + cpu` and are its resident pages, a level-C task's all in banks 0–3;
/// each A/B bank's use is its core's tasks' frames. The error names the first violation.
fn banks_hold(tasks: &[Task], r: &SimResult) -> Result<(), String> {
    let m = r.memory().ok_or("no memory results")?;
    if m.banks.len() != 8 {
        return Err(format!("{} banks reported", m.banks.len()));
    }
    let mut ab_use = [0u64; 8];
    for (i, (t, tm)) in tasks.iter().zip(&m.tasks).enumerate() {
        let frames = &tm.bank_frames;
        match t.cpu.filter(|_| t.level != "C") {
            Some(cpu) => {
                let bank = 4 + cpu;
                let total: u64 = frames.iter().sum();
                if frames[bank] != total || total != tm.stats.resident_pages {
                    return Err(format!(
                        "level-{} task t{i} on cpu {cpu}: frames per bank {frames:?}, {} resident",
                        t.level, tm.stats.resident_pages
                    ));
                }
                if tm.stats.major_faults != 0 || tm.stats.pages_swapped_out != 0 {
                    return Err(format!("level-{} task t{i} paged: {:?}", t.level, tm.stats));
                }
                ab_use[bank] += total;
            }
            None => {
                if frames[4..].iter().any(|&n| n > 0) {
                    return Err(format!("level-C task t{i} holds frames of A/B banks: {frames:?}"));
                }
            }
        }
    }
    for b in &m.banks[4..] {
        if b.used_frames != ab_use[b.bank as usize] || b.core != Some(b.bank - 4) {
            return Err(format!("bank {b:?}: its core's tasks hold {} frames", ab_use[b.bank as usize]));
        }
    }
    Ok(())
}

#[test]
fn level_ab_pages_stay_in_their_cores_bank_while_level_c_pages_in_banks_0_to_3() {
    // 64 MiB: banks of 8 MiB. Level C has 32 MiB for 2 × 20 MiB of sweeps: it pages.
    let tasks = [ab("A", 0, 2.0), ab("B", 1, 3.0), ab("B", 0, 1.0), c(20.0), c(20.0)];
    let r = run(&scenario("mc2", 2, 64, &tasks));
    banks_hold(&tasks, &r).unwrap();
    let m = r.memory().unwrap();
    assert!(m.tasks[3].stats.major_faults + m.tasks[4].stats.major_faults > 0, "level C never paged");
    assert_eq!(m.tasks.iter().map(|t| t.oom_kills).sum::<u64>(), 0);
    // 2 + 1 MiB on core 0, 3 MiB on core 1, of 2048 frames each; cores 2 and 3 are absent.
    let used: Vec<u64> = m.banks.iter().map(|b| b.used_frames).collect();
    assert_eq!(used[4..], [768, 768, 0, 0]);
    assert!(used[..4].iter().sum::<u64>() > 0 && m.banks.iter().all(|b| b.frames == 2048));
    let json = r.to_json();
    assert!(json.contains(r#""layout":"mc2","banks":[{"bank":0,"owner":"level C","frames":2048,"#), "{json}");
    assert!(json.contains(r#"{"bank":4,"owner":"core 0","frames":2048,"used_frames":768}"#), "{json}");
    assert!(json.contains(r#""bank_frames":[0,0,0,0,512,0,0,0]"#), "{json}");
}

#[test]
fn an_ab_task_outgrowing_its_bank_is_oom_killed_without_touching_other_banks() {
    // t0's 12 MiB exceed core 0's 8 MiB bank: each job is killed when the bank runs out.
    let tasks = [ab("B", 0, 12.0), ab("B", 1, 2.0), c(10.0), c(10.0)];
    let r = run(&scenario("mc2", 2, 64, &tasks));
    banks_hold(&tasks, &r).unwrap();
    let m = r.memory().unwrap();
    assert!(m.tasks[0].oom_kills > 0 && r.tasks[0].stats.killed > 0);
    assert_eq!(m.tasks[0].bank_frames, [0, 0, 0, 0, 2048, 0, 0, 0]);
    assert_eq!((m.banks[4].used_frames, m.banks[6].used_frames, m.banks[7].used_frames), (2048, 0, 0));
    // Everyone else runs as if t0 fitted: nothing killed, level C has its 32 MiB.
    assert_eq!(m.tasks[1..].iter().map(|t| t.oom_kills).collect::<Vec<_>>(), [0, 0, 0]);
    assert_eq!(m.tasks[2].stats.resident_pages + m.tasks[3].stats.resident_pages, 5120);
}

#[test]
fn the_flat_layout_is_the_default_and_reports_no_banks() {
    let tasks = [ab("B", 0, 1.0), c(2.0)];
    let flat = scenario("flat", 2, 64, &tasks);
    let default = flat.replace("layout = \"flat\"\n", "");
    assert_ne!(flat, default);
    let (a, b) = (run(&flat).to_json(), run(&default).to_json());
    assert_eq!(a, b);
    for key in ["\"layout\"", "\"banks\"", "\"bank_frames\""] {
        assert!(!a.contains(key), "{key} in {a}");
    }
}

#[test]
fn bad_layouts_and_what_mc2_cannot_support_are_refused_in_one_line() {
    let good = scenario("mc2", 2, 64, &[ab("B", 0, 1.0), c(2.0)]);
    let cases = [
        (good.replace("layout = \"mc2\"", "layout = \"numa\""), "test.toml: memory.layout: unknown layout \"numa\"; expected flat or mc2"),
        (good.replace("layout = \"mc2\"", "layout = 2"), "test.toml: memory.layout: invalid type: integer `2`, expected a string"),
        (good.replace("total_mb = 64", "total_mb = 48"), "test.toml: memory.total_mb: memory.layout = \"mc2\" splits memory by address bits: "),
        (good.replace("total_mb = 64", "total_mb = 0.25"), "test.toml: memory.total_mb: memory.layout = \"mc2\" splits memory by address bits: "),
        (good.replace("cpus = 2", "cpus = 5"), "test.toml: memory.layout: \"mc2\" gives each CPU's level-A/B tasks one of DRAM banks 4–7, so at most 4 CPUs (machine.cpus = 5)"),
        (
            good.replace("writes = 0.5 }]\ncpu = 0", "writes = 0.5 }, { pattern = \"sweep\", region = \"shm\" }]\ncpu = 0")
                + "[[region]]\nname = \"shm\"\nsize_mb = 1\n",
            "test.toml: task[0].access[1].region: a level-B task's pages stay in its core's bank and are never paged with memory.layout = \"mc2\", so it cannot map a shared region",
        ),
    ];
    for (text, start) in cases {
        let e = error(&text);
        assert!(e.starts_with(start) && !e.contains('\n'), "{e}");
    }
    // A level-C task may map a shared region.
    let c_maps = good.replace("mb = 2, writes = 0.5 }]", "mb = 2, writes = 0.5 }, { pattern = \"sweep\", region = \"shm\" }]")
        + "[[region]]\nname = \"shm\"\nsize_mb = 1\n";
    assert_ne!(c_maps, good.clone() + "[[region]]\nname = \"shm\"\nsize_mb = 1\n");
    run(&c_maps);
}

fn reservation(name: &str, size_mb: f64, kind: &str) -> String {
    format!("[[reservation]]\nname = \"{name}\"\nsize_mb = {size_mb}\nkind = \"{kind}\"\n")
}

#[test]
fn a_level_b_task_with_a_hard_reservation_keeps_all_its_frames_in_its_cores_bank() {
    // 64 MiB: banks of 8 MiB (2048 frames). On core 1, t0 reserves 5 MiB for its 4 MiB; t1,
    // unreserved on the same core, sweeps 7 MiB but only the 3 MiB the reservation leaves are
    // its: each of its jobs is killed when they run out. t0 never faults past its first touch.
    let tasks = [ab("B", 1, 4.0).in_reservation("r"), ab("B", 1, 7.0), ab("A", 0, 1.0), c(20.0), c(20.0)];
    let r = run(&(scenario("mc2", 2, 64, &tasks) + &reservation("r", 5.0, "hard")));
    banks_hold(&tasks, &r).unwrap();
    let m = r.memory().unwrap();
    assert_eq!(m.tasks[0].bank_frames, [0, 0, 0, 0, 0, 1024, 0, 0]);
    assert_eq!((m.tasks[0].oom_kills, m.tasks[0].stats.major_faults, r.tasks[0].stats.killed), (0, 0, 0));
    assert!(m.tasks[1].oom_kills > 0 && r.tasks[1].stats.killed > 0);
    assert_eq!(m.tasks[1].bank_frames, [0, 0, 0, 0, 0, 2048 - 1280, 0, 0]);
    // The reservation holds its 1280 frames: 1024 with t0's pages, 256 free for it alone.
    let (name, res) = &m.reservations[0];
    assert_eq!(name, "r");
    assert_eq!((res.size_pages, res.frames_held, res.charged_pages, res.free_frames, res.evictions), (1280, 1280, 1024, 256, 0));
    assert!(m.timeline.iter().all(|s| s.reservation_pages[0] == s.task_resident_pages[0]));
    assert_eq!(m.tasks[3..].iter().map(|t| t.oom_kills).sum::<u64>(), 0);
}

#[test]
fn a_level_c_reservation_sets_its_frames_aside_in_banks_0_to_3_and_pages_within_them() {
    // t1 sweeps 6 MiB in a hard reservation of 4 MiB: it pages within its own frames, all in
    // banks 0–3, while t2 pages in what level C has left.
    let tasks = [ab("B", 0, 1.0), c(6.0).in_reservation("r"), c(30.0)];
    let r = run(&(scenario("mc2", 2, 64, &tasks) + &reservation("r", 4.0, "hard")));
    banks_hold(&tasks, &r).unwrap();
    let m = r.memory().unwrap();
    let (_, res) = &m.reservations[0];
    assert!(res.evictions > 0 && m.tasks[1].stats.major_faults > 0, "{res:?}");
    assert_eq!((res.size_pages, res.frames_held), (1024, 1024));
    assert!(m.timeline.iter().all(|s| s.task_resident_pages[1] <= 1024));
    assert_eq!(m.tasks[0].stats.major_faults, 0);
}

#[test]
fn a_groups_level_c_tasks_take_frames_only_from_level_c_banks_and_its_limit_holds() {
    // Group g (max 3 MiB) holds two level-C tasks sweeping 4 MiB each; a third level-C task is
    // outside it, and a level-B task keeps its pages pinned in core 0's bank.
    let tasks = [ab("B", 0, 2.0), c(4.0).in_group("g"), c(4.0).in_group("g"), c(2.0)];
    let r = run(&(scenario("mc2", 2, 64, &tasks) + "[[group]]\nname = \"g\"\nmax_mb = 3\n"));
    banks_hold(&tasks, &r).unwrap();
    let m = r.memory().unwrap();
    assert!(m.timeline.iter().all(|s| s.task_resident_pages[1] + s.task_resident_pages[2] <= 768));
    assert!(m.tasks[1].stats.major_faults + m.tasks[2].stats.major_faults > 0);
    assert_eq!((m.tasks[0].stats.major_faults, m.tasks[3].stats.major_faults), (0, 0));
    let (name, g) = &m.limit_groups[0];
    assert_eq!((name.as_str(), g.size_pages), ("g", 768));
}

#[test]
fn a_controller_resizes_level_c_groups_while_level_ab_pages_stay_pinned() {
    // Greedy grows and shrinks the groups' limits; whatever it does, level C stays in banks
    // 0–3 and the level-A/B tasks never fault.
    let tasks = [ab("A", 0, 1.0), ab("B", 1, 2.0), c(12.0).in_group("srt"), c(12.0).in_group("batch")];
    let text = scenario("mc2", 2, 64, &tasks)
        + "[control]\ncontroller = \"greedy\"\ninterval_ms = 5\nconfig = {}\n\
           [[group]]\nname = \"srt\"\nrole = \"soft-rt\"\nbcet_ms = 4\nfloor_mb = 2\nmax_mb = 8\n\
           [[group]]\nname = \"batch\"\nrole = \"non-rt\"\nfloor_mb = 2\nmax_mb = 8\n";
    let r = run(&text);
    banks_hold(&tasks, &r).unwrap();
    let c = r.control().expect("control results");
    assert!(c.timeline.len() > 10);
    let m = r.memory().unwrap();
    assert_eq!(m.tasks[..2].iter().map(|t| t.stats.major_faults + t.oom_kills).sum::<u64>(), 0);
}

#[test]
fn what_reservations_and_groups_cannot_be_under_mc2_is_refused_in_one_line() {
    let on = |tasks: &[Task], extra: String| scenario("mc2", 2, 64, tasks) + &extra;
    let cases = [
        (
            on(&[ab("B", 0, 1.0).in_reservation("r"), c(2.0).in_reservation("r")], reservation("r", 4.0, "hard")),
            "test.toml: task[1].reservation: reservation \"r\" sets its frames aside in core 0's level-A/B banks for level-B task \"t0\", but level-C task \"t1\" keeps its pages in the level-C banks",
        ),
        (
            on(&[ab("B", 0, 1.0).in_reservation("r"), ab("A", 1, 1.0).in_reservation("r")], reservation("r", 4.0, "hard")),
            "test.toml: task[1].reservation: reservation \"r\" sets its frames aside in core 0's level-A/B banks for level-B task \"t0\", but level-A task \"t1\" keeps its pages in core 1's level-A/B banks",
        ),
        (
            on(&[ab("B", 0, 1.0).in_reservation("r")], reservation("r", 4.0, "firm")),
            "test.toml: task[0].reservation: reservation \"r\" is firm: it borrows frames beyond its size",
        ),
        (
            on(&[ab("B", 0, 3.0).in_reservation("r"), ab("B", 0, 0.5).in_reservation("r")], reservation("r", 3.0, "hard")),
            "test.toml: reservation[0].size_mb: holds level-A/B tasks with 3.5 MiB of private memory, which never pages with memory.layout = \"mc2\", so it must be at least that large (got 3 MiB)",
        ),
        (
            on(&[ab("B", 0, 1.0).in_reservation("r")], reservation("r", 9.0, "hard")),
            "test.toml: reservation[0].size_mb: `r` of 2304 pages rejected by admission control: core 0's level-A/B banks hold 2048 frames, 2048 of them neither promised nor in use",
        ),
        (
            on(
                &[ab("B", 0, 1.0).in_reservation("r"), ab("B", 0, 1.0).in_reservation("q")],
                reservation("r", 5.0, "hard") + &reservation("q", 4.0, "hard"),
            ),
            "test.toml: reservation[1].size_mb: `q` of 1024 pages rejected by admission control: core 0's level-A/B banks hold 2048 frames, 768 of them",
        ),
        (
            on(&[c(1.0).in_reservation("r")], reservation("r", 40.0, "hard")),
            "test.toml: reservation[0].size_mb: `r` of 10240 pages rejected by admission control: the level-C banks hold 8192 frames, 8192 of them",
        ),
        (
            on(&[ab("B", 0, 1.0).in_group("g")], "[[group]]\nname = \"g\"\nmax_mb = 4\n".into()),
            "test.toml: task[0].group: a memory-limited group holds its limit by reclaiming its tasks' pages, but level-B task \"t0\" keeps its pages in core 0's bank",
        ),
    ];
    for (text, start) in cases {
        let e = error(&text);
        assert!(e.starts_with(start) && !e.contains('\n'), "{e}\n{start}");
    }
    // A level-B task's program step cannot map a shared region either, and a component (a
    // level-C service) cannot share a level-A/B reservation.
    let region = "[[region]]\nname = \"shm\"\nsize_mb = 1\n";
    let step = on(&[ab("B", 0, 1.0)], region.into()).replace(
        "access = [{ pattern = \"sweep\", mb = 1, writes = 0.5 }]\n",
        "program = [{ access = [{ pattern = \"sweep\", mb = 1 }], compute_ms = 1 }, { access = [{ pattern = \"sweep\", region = \"shm\" }], compute_ms = 1 }]\n",
    );
    assert!(
        error(&step).starts_with("test.toml: task[0].program[1].access[0].region: a level-B task's pages stay in its core's bank"),
        "{}",
        error(&step)
    );
    let component = on(&[ab("B", 0, 1.0).in_reservation("r")], reservation("r", 2.0, "hard"))
        + "[[component]]\nname = \"db\"\nprivate_mb = 0.5\nreservation = \"r\"\nprogram = [{ compute_ms = 1 }]\n";
    assert!(
        error(&component).starts_with("test.toml: component[0].reservation: reservation \"r\" sets its frames aside in core 0's level-A/B banks for level-B task \"t0\", but a component's pages lie in the level-C banks"),
        "{}",
        error(&component)
    );
    // A component with a reservation of its own, in banks 0–3, runs.
    let own = on(&[ab("B", 0, 1.0), c(1.0)], reservation("q", 2.0, "hard"))
        + "[[component]]\nname = \"db\"\nprivate_mb = 0.5\nreservation = \"q\"\nprogram = [{ access = [{ pattern = \"sweep\", mb = 0.5 }], compute_ms = 1 }]\n";
    run(&own);
    // A reservation on a flat machine of the same size is fine: the banks are what refuse it.
    let flat = on(&[c(1.0).in_reservation("r")], reservation("r", 40.0, "hard")).replace("layout = \"mc2\"", "layout = \"flat\"");
    run(&flat);
}

// ------------------------------------------------------------------ the model itself

/// 1 MiB as on the i.MX6: 8 banks of 32 frames, 16 colours; core i owns bank 4 + i.
fn small_platform() -> Mc2Platform {
    Mc2Platform::imx6_scaled(1 << 20, 4096).unwrap()
}

const BANK_FRAMES: u32 = 32;

fn level_of(code: u8) -> Option<Mc2Level> {
    [Some(Mc2Level::A), Some(Mc2Level::B), None][code as usize % 3]
}

proptest! {
    #![proptest_config(seeded_config("mc2_layout_model", 128))]

    /// Spaces at levels A/B on random cores and level-C spaces reference and discard random
    /// pages. After every operation: the model's invariants hold; every frame an A/B space
    /// holds is in its core's bank, every other in-use frame in banks 0–3; no A/B page ever
    /// leaves memory but by a discard; an A/B fault fails only with its bank exhausted, and
    /// a level-C fault never fails for want of an A/B frame.
    #[test]
    fn level_ab_frames_stay_in_their_bank_and_are_never_evicted(
        spaces in proptest::collection::vec((0..3u8, 0..4u32, 1..48u32), 1..6),
        ops in proptest::collection::vec((any::<usize>(), any::<u32>(), 0..10u8), 1..400),
    ) {
        let platform = small_platform();
        let cfg = MemConfig { check_every_operation: true, ..MemConfig::with_frames(platform.total_frames()) };
        let mut m = Memory::with_allocator(cfg, DeviceSpec::fast_ssd(), Mc2Buddy::new(platform.clone()).unwrap()).unwrap();
        // (space, first page, pages, core of an A/B space)
        let mut made: Vec<(AsId, Vpn, u32, Option<u32>)> = Vec::new();
        for (i, &(level, core, pages)) in spaces.iter().enumerate() {
            let placement = level_of(level).map_or(Placement::Any, |level| Placement::Mc2 { core, level });
            let s = m.create_space_at(&format!("s{i}"), None, placement).unwrap();
            let (_, v) = m.map_private(s, "p", pages).unwrap();
            made.push((s, v, pages, level_of(level).map(|_| core)));
        }
        // Pages of each A/B space that must stay mapped (touched, not discarded since).
        let mut pinned: Vec<Vec<bool>> = made.iter().map(|&(_, _, pages, _)| vec![false; pages as usize]).collect();
        let mut now = Nanos::ZERO;
        for (step, &(si, page, kind)) in ops.iter().enumerate() {
            now += Nanos(10_000);
            let si = si % made.len();
            let (s, v, pages, ab) = made[si];
            let page = page % pages;
            let kind = match kind {
                0 => RefKind::Discard,
                1..=3 => RefKind::Write,
                _ => RefKind::Read,
            };
            let bank_free = |m: &Memory<Mc2Buddy>, core: u32| m.frame_allocator().free_frames_by_bank(0)[4 + core as usize];
            match m.access(now, s, v.offset(page), kind) {
                Ok(_) => {
                    if ab.is_some() {
                        pinned[si][page as usize] = kind != RefKind::Discard;
                    }
                }
                Err(MemError::PlacementExhausted { core }) => {
                    let own = ab.ok_or_else(|| TestCaseError::fail(format!("step {step}: a level-C fault wanted core {core}'s frames")))?;
                    prop_assert_eq!(own, core);
                    prop_assert_eq!(bank_free(&m, core), 0, "step {}: refused with frames free in its bank", step);
                }
                Err(MemError::OutOfMemory) => prop_assert!(ab.is_none(), "step {}: an A/B fault reclaimed", step),
                Err(e) => return Err(TestCaseError::fail(format!("step {step}: {e}"))),
            }
            m.check_invariants().map_err(|e| TestCaseError::fail(format!("step {step}: {e}")))?;
            let mut ab_resident = 0;
            for (k, &(s2, v2, pages2, ab2)) in made.iter().enumerate() {
                let frames = m.space_frames(s2);
                for &f in &frames {
                    let bank = platform.bank_colour(f).0;
                    match ab2 {
                        Some(core) => prop_assert_eq!(bank, 4 + core, "step {}: space {} frame {}", step, k, f),
                        None => prop_assert!(bank < 4, "step {}: level-C space {} holds frame {} of bank {}", step, k, f, bank),
                    }
                }
                if ab2.is_some() {
                    ab_resident += frames.len() as u64;
                    for p in (0..pages2).filter(|&p| pinned[k][p as usize]) {
                        prop_assert!(m.is_mapped(s2, v2.offset(p)), "step {}: A/B space {} lost page {}", step, k, p);
                    }
                }
            }
            prop_assert_eq!(m.unevictable_pages(), ab_resident);
        }
        // Bank capacity bounds what A/B spaces of one core ever hold.
        for core in 0..4 {
            let held: usize = made.iter().filter(|x| x.3 == Some(core)).map(|x| m.space_frames(x.0).len()).sum();
            prop_assert!(held <= BANK_FRAMES as usize);
        }
    }
}

proptest! {
    #![proptest_config(seeded_config("mc2_layout_scenarios", 24))]

    /// Random small MC² scenarios (level-B tasks on random cores, some larger than their bank,
    /// level-C tasks that page) run, with the model's invariants checked after every
    /// operation, and end with every bank invariant holding.
    #[test]
    fn random_mc2_scenarios_keep_every_bank_invariant(
        cpus in 1..=4usize,
        ab_tasks in proptest::collection::vec((0..4usize, 1..12u32), 1..5),
        c_tasks in proptest::collection::vec(1..12u32, 0..3),
    ) {
        // 16 MiB: banks of 2 MiB; sizes in quarters of a MiB, up to 2.75 MiB.
        let mut tasks: Vec<Task> = ab_tasks.iter().map(|&(cpu, q)| ab("B", cpu % cpus, f64::from(q) / 4.0)).collect();
        tasks.extend(c_tasks.iter().map(|&q| c(f64::from(q))));
        let r = run(&scenario("mc2", cpus, 16, &tasks));
        banks_hold(&tasks, &r).map_err(TestCaseError::fail)?;
        let m = r.memory().unwrap();
        for (i, t) in tasks.iter().enumerate() {
            if t.level == "C" {
                prop_assert_eq!(m.tasks[i].oom_kills, 0, "level-C task t{} killed", i);
            }
        }
    }
}

/// A level-A/B space cannot join what would let reclaim or another core reach its pages: a
/// limit group, a reservation of other banks, a shared region, a fork.
#[test]
fn the_model_refuses_level_ab_spaces_in_pools_shared_regions_and_forks() {
    use critmem_core::mem::{RegionKind, ReservationKind, ReservationSpec, SharePolicy};
    let platform = small_platform();
    let mut m =
        Memory::with_allocator(MemConfig::with_frames(platform.total_frames()), DeviceSpec::fast_ssd(), Mc2Buddy::new(platform).unwrap())
            .unwrap();
    let pinned = Placement::Mc2 { core: 1, level: Mc2Level::B };
    let spec = |name: &str, kind| ReservationSpec { name: name.into(), pages: 16, kind };
    let level_c = m.create_reservation(Nanos::ZERO, spec("c", ReservationKind::Hard)).unwrap();
    let core0 =
        m.create_reservation_at(Nanos::ZERO, spec("core0", ReservationKind::Hard), Placement::Mc2 { core: 0, level: Mc2Level::A }).unwrap();
    let limit = m.create_reservation(Nanos::ZERO, spec("g", ReservationKind::Limit)).unwrap();
    for (res, want) in [(level_c, "the level-C banks"), (core0, "core 0's level-A/B banks")] {
        match m.create_space_at("a", Some(res), pinned) {
            Err(MemError::PlacementMismatch { have, .. }) => assert_eq!(have, want),
            other => panic!("{other:?}"),
        }
    }
    assert!(matches!(m.create_space_at("a", Some(limit), pinned), Err(MemError::PlacementUnsupported { .. })));
    // And a level-C space stays out of a core's reservation.
    assert!(matches!(m.create_space_at("c", Some(core0), Placement::Any), Err(MemError::PlacementMismatch { .. })));
    m.check_invariants().unwrap();
    let s = m.create_space_at("b", None, pinned).unwrap();
    let shm = m.create_shared("shm", RegionKind::SharedAnon, 4, SharePolicy::Global).unwrap();
    assert!(matches!(m.map_shared(Nanos::ZERO, s, shm, true), Err(MemError::PlacementUnsupported { .. })));
    assert!(matches!(m.fork(Nanos::ZERO, s, "child", None, SharePolicy::Private), Err(MemError::PlacementUnsupported { .. })));
    let (_, v) = m.map_private(s, "p", 40).unwrap();
    for p in 0..BANK_FRAMES {
        assert!(matches!(m.access(Nanos::ZERO, s, v.offset(p), RefKind::Write), Ok(Access::Minor { .. })));
    }
    assert_eq!(m.access(Nanos::ZERO, s, v.offset(BANK_FRAMES), RefKind::Write), Err(MemError::PlacementExhausted { core: 1 }));
    m.check_invariants().unwrap();
}

proptest! {
    #![proptest_config(seeded_config("mc2_layout_reservations", 96))]

    /// Hard reservations of random placements (a core's level-A/B banks or the level-C
    /// banks), spaces bound to one of the same placement or to none, random references and
    /// discards. A reservation refused by admission changes nothing. After every operation the
    /// invariants hold (frames conserved); every frame a reservation keeps free, and every
    /// frame of its spaces' pages, lies in its banks; a level-A/B page leaves memory only by a
    /// discard; no reservation charges more than its size.
    #[test]
    fn reservations_keep_their_frames_in_their_banks(
        reservations in proptest::collection::vec((0..5u32, 1..40u64), 0..5),
        spaces in proptest::collection::vec((0..3u8, 0..4u32, 1..40u32, proptest::option::of(0..5usize)), 1..6),
        ops in proptest::collection::vec((any::<usize>(), any::<u32>(), 0..10u8), 1..300),
    ) {
        use critmem_core::mem::{FrameAllocator, ReservationKind, ReservationSpec, ResId};
        let platform = small_platform();
        let cfg = MemConfig { check_every_operation: true, ..MemConfig::with_frames(platform.total_frames()) };
        let mut m = Memory::with_allocator(cfg, DeviceSpec::fast_ssd(), Mc2Buddy::new(platform.clone()).unwrap()).unwrap();
        // (reservation, its core or None for level C)
        let mut made_res: Vec<(ResId, Option<u32>, u64)> = Vec::new();
        for (i, &(home, pages)) in reservations.iter().enumerate() {
            let core = (home < 4).then_some(home);
            let placement = core.map_or(Placement::Any, |core| Placement::Mc2 { core, level: Mc2Level::B });
            let before = (m.frame_allocator().free_frames(0), m.committed_frames());
            let spec = ReservationSpec { name: format!("r{i}"), pages, kind: ReservationKind::Hard };
            match m.create_reservation_at(Nanos::ZERO, spec, placement) {
                Ok(r) => made_res.push((r, core, pages)),
                Err(MemError::PlacementAdmission { .. }) => {
                    prop_assert_eq!((m.frame_allocator().free_frames(0), m.committed_frames()), before);
                }
                Err(e) => return Err(TestCaseError::fail(format!("reservation {i}: {e}"))),
            }
        }
        // Each core's reservations fit its bank, level C's its four.
        for core in 0..4 {
            let held: u64 = made_res.iter().filter(|r| r.1 == Some(core)).map(|r| r.2).sum();
            prop_assert!(held <= u64::from(BANK_FRAMES));
        }
        let mut made: Vec<(AsId, Vpn, u32, Option<u32>)> = Vec::new();
        for (i, &(level, core, pages, pick)) in spaces.iter().enumerate() {
            let placement = level_of(level).map_or(Placement::Any, |level| Placement::Mc2 { core, level });
            let home = placement.ab_core();
            let bound = pick.and_then(|k| made_res.get(k)).filter(|r| r.1 == home).map(|r| r.0);
            let s = m.create_space_at(&format!("s{i}"), bound, placement).unwrap();
            let (_, v) = m.map_private(s, "p", pages).unwrap();
            made.push((s, v, pages, home));
        }
        let mut pinned: Vec<Vec<bool>> = made.iter().map(|&(_, _, pages, _)| vec![false; pages as usize]).collect();
        let mut now = Nanos::ZERO;
        for (step, &(si, page, kind)) in ops.iter().enumerate() {
            now += Nanos(10_000);
            let si = si % made.len();
            let (s, v, pages, ab) = made[si];
            let page = page % pages;
            let kind = match kind {
                0 => RefKind::Discard,
                1..=3 => RefKind::Write,
                _ => RefKind::Read,
            };
            match m.access(now, s, v.offset(page), kind) {
                Ok(_) => {
                    if ab.is_some() {
                        pinned[si][page as usize] = kind != RefKind::Discard;
                    }
                }
                Err(MemError::PlacementExhausted { core }) => prop_assert_eq!(ab, Some(core), "step {}", step),
                Err(MemError::OutOfMemory | MemError::ReservationExhausted(_)) => prop_assert!(ab.is_none(), "step {}: an A/B fault reclaimed", step),
                Err(e) => return Err(TestCaseError::fail(format!("step {step}: {e}"))),
            }
            m.check_invariants().map_err(|e| TestCaseError::fail(format!("step {step}: {e}")))?;
            let in_home = |bank: u32, home: Option<u32>| match home {
                Some(core) => bank == 4 + core,
                None => bank < 4,
            };
            for &(r, home, size) in &made_res {
                let free = m.frame_allocator().free_frames_by_bank(r.0 + 1);
                prop_assert!(free.iter().enumerate().all(|(b, &n)| n == 0 || in_home(b as u32, home)), "step {}: {:?} keeps {:?}", step, r, free);
                prop_assert!(m.reservation_charged_pages(r).unwrap() <= size);
            }
            for (k, &(s2, v2, pages2, home)) in made.iter().enumerate() {
                for f in m.space_frames(s2) {
                    prop_assert!(in_home(platform.bank_colour(f).0, home), "step {}: space {} frame {}", step, k, f);
                }
                if home.is_some() {
                    for p in (0..pages2).filter(|&p| pinned[k][p as usize]) {
                        prop_assert!(m.is_mapped(s2, v2.offset(p)), "step {}: A/B space {} lost page {}", step, k, p);
                    }
                }
            }
        }
    }
}
