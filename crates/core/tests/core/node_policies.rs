//! Servers that schedule their tasks over CPUs of their own: gedf and gfp over several CPUs,
//! pfp and pedf partitioned over them, cyclic tables, placed among other servers by priority.

use crate::common::seeded_config;
use critmem_core::{load_toml_str, simulate, SimOptions, SimResult};
use proptest::prelude::*;

const MS: u64 = 1_000_000;

fn run(text: &str) -> SimResult {
    let s = load_toml_str(text, "test.toml").unwrap_or_else(|e| panic!("{e}\n{text}"));
    simulate(&s, SimOptions { record_jobs: true, record_segments: true, check_invariants: true })
}

fn error(text: &str) -> String {
    load_toml_str(text, "test.toml").expect_err("the file is refused").to_string()
}

/// Completion (ms) of each task's first job, in task order.
fn first_completions_ms(r: &SimResult) -> Vec<Option<u64>> {
    (0..r.tasks.len())
        .map(|t| r.jobs.iter().find(|j| j.task as usize == t && j.index == 0).and_then(|j| j.completion).map(|c| c.0 / MS))
        .collect()
}

/// Segments as (task, cpu, start ms, end ms).
fn segments_ms(r: &SimResult) -> Vec<(u32, u32, u64, u64)> {
    r.segments.iter().map(|s| (s.task, s.cpu, s.start.0 / MS, s.end.0 / MS)).collect()
}

const GLOBAL_BELOW_ONE_CORE: &str = r#"
[machine]
cpus = 2
[run]
horizon_ms = 10
[scheduler]
kind = "fp"
[[scheduler.server]]
name = "hi"
kind = "level"
priority = 0
cpu = 0
policy = "fp"
[[scheduler.server]]
name = "g"
kind = "level"
priority = 1
cpus = [0, 1]
policy = "gedf"
[[task]]
name = "h"
server = "hi"
priority = 0
wcet_ms = 2
period_ms = 10
[[task]]
name = "x"
server = "g"
wcet_ms = 4
period_ms = 10
[[task]]
name = "y"
server = "g"
wcet_ms = 4
period_ms = 10
deadline_ms = 8
[[task]]
name = "z"
server = "g"
wcet_ms = 3
period_ms = 10
"#;

#[test]
fn a_global_edf_level_runs_on_what_a_higher_level_leaves() {
    let r = run(GLOBAL_BELOW_ONE_CORE);
    // h holds CPU 0 for [0, 2), so g has CPU 1 alone: y (deadline 8) first, [0, 4). At 2
    // CPU 0 comes free and x (deadline 10, released before z) takes it, [2, 6). At 4 z takes
    // CPU 1, [4, 7).
    assert_eq!(first_completions_ms(&r), vec![Some(2), Some(6), Some(4), Some(7)]);
    assert_eq!(segments_ms(&r), vec![(0, 0, 0, 2), (2, 1, 0, 4), (1, 0, 2, 6), (3, 1, 4, 7)]);
    let g = r.servers().iter().find(|s| s.name == "g").expect("server g");
    // Its jobs ran 4 + 4 + 3 ms, on both CPUs.
    assert_eq!(g.consumed_ns, 11 * MS);
}

#[test]
fn a_partitioned_level_places_tasks_worst_fit_and_keeps_pinned_ones() {
    let text = r#"
[machine]
cpus = 2
[run]
horizon_ms = 20
[scheduler]
kind = "fp"
[[scheduler.server]]
name = "p"
kind = "level"
priority = 0
cpus = [0, 1]
policy = "pfp"
priorities = "rm"
[[task]]
name = "big"
server = "p"
wcet_ms = 5
period_ms = 10
[[task]]
name = "pinned"
server = "p"
cpu = 0
wcet_ms = 1
period_ms = 20
[[task]]
name = "small"
server = "p"
wcet_ms = 2
period_ms = 10
"#;
    let r = run(text);
    // pinned (0.05) stays on CPU 0; big (0.5) goes to the less loaded CPU 1; small (0.2) then
    // to CPU 0 (0.05 < 0.5). On CPU 0 rate-monotonic runs small [0, 2) before pinned [2, 3).
    let cpus_of = |t: u32| r.segments.iter().filter(|s| s.task == t).map(|s| s.cpu).collect::<std::collections::BTreeSet<_>>();
    assert_eq!((cpus_of(0), cpus_of(1), cpus_of(2)), ([1].into(), [0].into(), [0].into()));
    assert_eq!(first_completions_ms(&r), vec![Some(5), Some(3), Some(2)]);
}

#[test]
fn a_cyclic_level_runs_its_tasks_only_in_their_slots() {
    let text = r#"
[run]
horizon_ms = 20
[scheduler]
kind = "fp"
[[scheduler.server]]
name = "hi"
kind = "level"
priority = 0
policy = "fp"
[[scheduler.server]]
name = "table"
kind = "level"
priority = 1
policy = "cyclic"
major_frame_ms = 10
[[scheduler.server.slot]]
task = "c"
start_ms = 0
duration_ms = 5
[[scheduler.server]]
name = "lo"
kind = "level"
priority = 2
policy = "edf"
[[task]]
name = "h"
server = "hi"
priority = 0
wcet_ms = 2
period_ms = 10
[[task]]
name = "c"
server = "table"
wcet_ms = 4
period_ms = 10
[[task]]
name = "l"
server = "lo"
wcet_ms = 3
period_ms = 10
"#;
    let r = run(text);
    // h runs [0, 2); c may run only in [0, 5) of each frame: [2, 5), 3 of its 4 ms; l fills
    // [5, 8); c's last millisecond waits for the next frame's slot, [10, 11) -- preempted by
    // h's second job [10, 12), so [12, 13): c's first job misses its 10 ms deadline. Its
    // second job then has [13, 15) of the slot, 2 of its 4 ms, and misses at 20 too.
    assert_eq!(first_completions_ms(&r), vec![Some(2), Some(13), Some(8)]);
    assert_eq!(r.tasks[1].stats.deadline_misses, 2);
    assert!(r.segments.iter().filter(|s| s.task == 1).all(|s| s.start.0 % (10 * MS) < 5 * MS && s.end.0 % (10 * MS) <= 5 * MS));
}

#[test]
fn a_deferrable_server_with_global_edf_on_one_cpu_gets_its_share() {
    let text = r#"
[run]
horizon_ms = 5000
[scheduler]
kind = "fp"
[[scheduler.server]]
name = "s"
kind = "deferrable"
budget_ms = 2
period_ms = 5
priority = 0
policy = "gedf"
[[task]]
name = "busy"
server = "s"
wcet_ms = 100
period_ms = 100
"#;
    let r = run(text);
    // Budget 2 of every 5 ms over 1,000 periods: 2,000 ms.
    assert_eq!(r.servers()[0].consumed_ns, 2000 * MS);
}

#[test]
fn load_errors_name_the_key_and_reason() {
    let base = "[machine]\ncpus = 2\n[scheduler]\nkind = \"fp\"\n";
    let task = |server: &str, extra: &str| format!("[[task]]\nname = \"t\"\nserver = \"{server}\"\nwcet_ms = 1\nperiod_ms = 10\n{extra}");
    let cases = [
        (
            format!("{base}[[scheduler.server]]\nname = \"p\"\nkind = \"level\"\npriority = 0\npolicy = \"fp\"\n[[scheduler.server]]\nname = \"c\"\nparent = \"p\"\nkind = \"level\"\npriority = 0\ncpus = [0, 1]\npolicy = \"gedf\"\n{}", task("c", "")),
            "scheduler.server[1].cpus: only top-level servers take cpus",
        ),
        (
            format!("{base}[[scheduler.server]]\nname = \"g\"\nkind = \"level\"\npriority = 0\ncpus = [0, 1]\npolicy = \"edf\"\n{}", task("g", "")),
            "scheduler.server[0].cpus: policy \"edf\" orders one CPU's jobs",
        ),
        (
            format!("{base}[[scheduler.server]]\nname = \"g\"\nkind = \"deferrable\"\nbudget_ms = 1\nperiod_ms = 2\npriority = 0\ncpus = [0, 1]\npolicy = \"gedf\"\n{}", task("g", "")),
            "scheduler.server[0].kind: only a level may run on several CPUs",
        ),
        (
            format!("{base}[[scheduler.server]]\nname = \"g\"\nkind = \"level\"\npriority = 0\ncpus = [0, 2]\npolicy = \"gedf\"\n{}", task("g", "")),
            "scheduler.server[0].cpus: CPU 2 does not exist",
        ),
        (
            format!("{base}[[scheduler.server]]\nname = \"g\"\nkind = \"level\"\npriority = 0\ncpus = [0, 1]\npolicy = \"gedf\"\n{}", task("g", "cpu = 1\n")),
            "task[0].cpu: pins the task to CPU 1, but server \"g\" (policy \"gedf\") places its tasks itself",
        ),
        (
            format!("{base}[[scheduler.server]]\nname = \"p\"\nkind = \"level\"\npriority = 0\ncpu = 0\npolicy = \"pedf\"\n{}", task("p", "cpu = 1\n")),
            "task[0].cpu: CPU 1 is not one of server \"p\"'s cpus [0]",
        ),
        (
            format!("{base}[[scheduler.server]]\nname = \"c\"\nkind = \"level\"\npriority = 0\npolicy = \"cyclic\"\n{}", task("c", "")),
            "scheduler.server[0].major_frame_ms: missing: a cyclic server needs major_frame_ms",
        ),
        (
            format!("{base}[[scheduler.server]]\nname = \"c\"\nkind = \"level\"\npriority = 0\npolicy = \"cyclic\"\nmajor_frame_ms = 10\n[[scheduler.server]]\nname = \"o\"\nkind = \"level\"\npriority = 1\n[[scheduler.server.slot]]\ntask = \"t\"\nstart_ms = 0\nduration_ms = 1\n{}", task("c", "")),
            "scheduler.server[1].slot: only applies to policy \"cyclic\"",
        ),
        (
            format!("{base}[[scheduler.server]]\nname = \"g\"\nkind = \"level\"\npriority = 0\ncpus = [0, 1]\npolicy = \"pfp\"\n[[scheduler.server]]\nname = \"k\"\nparent = \"g\"\nkind = \"level\"\npriority = 0\n{}", task("k", "priority = 1\n")),
            "scheduler.server[1].parent: server \"g\" has policy \"pfp\": it runs tasks, not servers",
        ),
        (
            format!("[machine]\ncpus = 2\n[scheduler]\nkind = \"fp\"\nevent_cost_us = 5\n[[scheduler.server]]\nname = \"g\"\nkind = \"level\"\npriority = 0\ncpus = [0, 1]\npolicy = \"gedf\"\n[[scheduler.server]]\nname = \"f\"\nkind = \"level\"\npriority = 1\n{}", task("g", "")),
            "scheduler.event_cost_us: event delivery does not combine with servers that schedule tasks on CPUs of their own",
        ),
        (
            format!("[machine]\ncpus = 2\n[scheduler]\nkind = \"edf\"\n[[scheduler.server]]\nname = \"g\"\nkind = \"deferrable\"\nbudget_ms = 1\nperiod_ms = 2\npolicy = \"gedf\"\n{}", task("g", "")),
            "scheduler.server[0].policy: a \"gedf\" server needs a root with a static order",
        ),
        (
            format!("{base}[[scheduler.server]]\nname = \"g\"\nkind = \"level\"\npriority = 0\ncpus = [0, 1]\npolicy = \"gedf\"\npriorities = \"rm\"\n{}", task("g", "")),
            "scheduler.server[0].priorities: only applies to policy gfp and pfp, not \"gedf\"",
        ),
        (
            format!("{base}[[scheduler.server]]\nname = \"g\"\nkind = \"level\"\npriority = 0\ncpus = [0, 1]\npolicy = \"gfp\"\npriorities = \"explicit\"\n{}", task("g", "")),
            "task[0].priority: missing: server \"g\" ranks its tasks by explicit priority",
        ),
        (
            format!("{base}[[scheduler.server]]\nname = \"g\"\nkind = \"level\"\npriority = 0\npolicy = \"round-robin\"\n{}", task("g", "")),
            "unknown server policy \"round-robin\"; expected fp, rm, dm, edf, gedf, gfp, pedf, pfp or cyclic",
        ),
    ];
    for (text, want) in cases {
        let got = error(&text);
        assert!(got.contains(want), "got {got:?}, want {want:?}\n{text}");
        assert!(!got.contains('\n'), "one line: {got:?}");
    }
}

/// An MC² system on two cores as data: per core an optional level-A task (period, wcet, slot
/// length extra, slot offset) and level-B tasks; level-C tasks; at most one level-D task.
#[derive(Clone, Debug)]
struct Mc2System {
    cores: Vec<Core>,
    c: Vec<(u64, u64)>,
    d: Vec<(u64, u64)>,
}

/// One core's level-A task (period, wcet, slot length extra, slot offset) and level-B tasks
/// (period, wcet).
type Core = (Option<(u64, u64, u64, u64)>, Vec<(u64, u64)>);

fn mc2_system() -> impl Strategy<Value = Mc2System> {
    let a = proptest::option::of((prop::sample::select(vec![5u64, 10, 20]), 1u64..=2, 0u64..=2, 0u64..=3));
    let b = prop::collection::vec((prop::sample::select(vec![5u64, 10, 20, 40]), 1u64..=3), 0..=2);
    let c = prop::collection::vec((prop::sample::select(vec![5u64, 10, 20, 40]), 1u64..=6), 0..=3);
    let d = prop::collection::vec((prop::sample::select(vec![10u64, 20, 40]), 1u64..=6), 0..=1);
    (prop::collection::vec((a, b), 2), c, d).prop_map(|(cores, c, d)| Mc2System { cores, c, d })
}

/// Every slot of the level-A table: (task, cpu, start, length).
fn a_slots(sys: &Mc2System) -> Vec<(String, usize, u64, u64)> {
    let mut out = Vec::new();
    for (cpu, (a, _)) in sys.cores.iter().enumerate() {
        if let Some((t, c, extra, at)) = *a {
            let len = (c + extra).min(t);
            let at = at.min(t - len);
            for k in 0..20 / t {
                out.push((format!("a{cpu}"), cpu, k * t + at, len));
            }
        }
    }
    out
}

/// Its tasks as (name, level, cpu, wcet, period); one level-D task when it has none at all.
fn mc2_tasks(sys: &Mc2System) -> Vec<(String, char, Option<usize>, u64, u64)> {
    let mut out = Vec::new();
    for (cpu, (a, b)) in sys.cores.iter().enumerate() {
        if let Some((t, c, _, _)) = *a {
            out.push((format!("a{cpu}"), 'A', Some(cpu), c, t));
        }
        for (i, &(t, c)) in b.iter().enumerate() {
            out.push((format!("b{cpu}_{i}"), 'B', Some(cpu), c, t));
        }
    }
    out.extend(sys.c.iter().enumerate().map(|(i, &(t, w))| (format!("c{i}"), 'C', None, w.min(t), t)));
    out.extend(sys.d.iter().enumerate().map(|(i, &(t, w))| (format!("d{i}"), 'D', None, w, t)));
    if out.is_empty() {
        out.push(("d".into(), 'D', None, 1, 10));
    }
    out
}

/// The system under `kind = "mc2"`.
fn as_mc2(sys: &Mc2System) -> String {
    let mut s = "[machine]\ncpus = 2\n[run]\nhorizon_ms = 160\n[scheduler]\nkind = \"mc2\"\nmajor_frame_ms = 20\n".to_string();
    for (task, _, start, len) in a_slots(sys) {
        s += &format!("[[scheduler.slot]]\ntask = \"{task}\"\nstart_ms = {start}\nduration_ms = {len}\n");
    }
    for (name, level, cpu, c, t) in mc2_tasks(sys) {
        s += &format!("[[task]]\nname = \"{name}\"\ncriticality = \"{level}\"\nwcet_ms = {c}\nperiod_ms = {t}\n");
        if let Some(cpu) = cpu {
            s += &format!("cpu = {cpu}\n");
        }
    }
    s
}

/// The same system as a hierarchy of general servers: a cyclic level, a rate-monotonic
/// partitioned level, a global EDF level and a global level for D, in that priority order.
fn as_servers(sys: &Mc2System) -> String {
    let mut s = "[machine]\ncpus = 2\n[run]\nhorizon_ms = 160\n[scheduler]\nkind = \"fp\"\n".to_string();
    let slots = a_slots(sys);
    if !slots.is_empty() {
        s +=
            "[[scheduler.server]]\nname = \"A\"\nkind = \"level\"\npriority = 0\ncpus = [0, 1]\npolicy = \"cyclic\"\nmajor_frame_ms = 20\n";
        for (task, cpu, start, len) in slots {
            s += &format!("[[scheduler.server.slot]]\ntask = \"{task}\"\nstart_ms = {start}\nduration_ms = {len}\ncpu = {cpu}\n");
        }
    }
    s += "[[scheduler.server]]\nname = \"B\"\nkind = \"level\"\npriority = 1\ncpus = [0, 1]\npolicy = \"pfp\"\npriorities = \"rm\"\n";
    s += "[[scheduler.server]]\nname = \"C\"\nkind = \"level\"\npriority = 2\ncpus = [0, 1]\npolicy = \"gedf\"\n";
    // One level-D task at most, so release order and any fixed priority agree.
    s += "[[scheduler.server]]\nname = \"D\"\nkind = \"level\"\npriority = 3\ncpus = [0, 1]\npolicy = \"gfp\"\npriorities = \"rm\"\n";
    for (name, level, cpu, c, t) in mc2_tasks(sys) {
        s += &format!("[[task]]\nname = \"{name}\"\nserver = \"{level}\"\nwcet_ms = {c}\nperiod_ms = {t}\n");
        if let (Some(cpu), 'B') = (cpu, level) {
            s += &format!("cpu = {cpu}\n");
        }
    }
    s
}

proptest! {
    #![proptest_config(seeded_config("mc2_preset_is_a_hierarchy_of_general_servers", 256))]
    /// MC²'s preset is a hierarchy: the same system declared as four general servers runs the
    /// same schedule, segment for segment and job for job.
    #[test]
    fn mc2_preset_is_a_hierarchy_of_general_servers(sys in mc2_system()) {
        let (preset, servers) = (as_mc2(&sys), as_servers(&sys));
        let (a, b) = (run(&preset), run(&servers));
        prop_assert_eq!(&a.segments, &b.segments, "{}\n---\n{}", preset, servers);
        prop_assert_eq!(&a.jobs, &b.jobs);
    }
}

#[test]
fn the_composed_mc2_example_schedules_as_the_mc2_preset() {
    let example = |name: &str| {
        let path = format!("{}/../../examples/{name}", env!("CARGO_MANIFEST_DIR"));
        run(&std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}")))
    };
    let (preset, composed) = (example("mc2-levels.toml"), example("servers-mc2-composed.toml"));
    assert!(preset.segments.len() > 100, "a schedule worth comparing");
    assert_eq!(preset.segments, composed.segments);
    assert_eq!(preset.jobs, composed.jobs);
}

/// A major frame of 10 ms giving child server p1 the window [0, 4) and p2 [4, 8), as an
/// ARINC 653-style partition table; a background level below it takes what the windows leave.
const PARTITION_WINDOWS: &str = r#"
[run]
horizon_ms = 20
[scheduler]
kind = "fp"
[[scheduler.server]]
name = "frame"
kind = "level"
priority = 0
policy = "cyclic"
major_frame_ms = 10
[[scheduler.server.slot]]
server = "p1"
start_ms = 0
duration_ms = 4
[[scheduler.server.slot]]
server = "p2"
start_ms = 4
duration_ms = 4
[[scheduler.server]]
name = "p1"
parent = "frame"
kind = "level"
policy = "fp"
[[scheduler.server]]
name = "p2"
parent = "frame"
kind = "level"
policy = "edf"
[[scheduler.server]]
name = "bg"
kind = "level"
priority = 1
policy = "fp"
[[task]]
name = "a"
server = "p1"
priority = 0
wcet_ms = 3
period_ms = 10
[[task]]
name = "b"
server = "p1"
priority = 1
wcet_ms = 1
period_ms = 10
[[task]]
name = "c"
server = "p2"
wcet_ms = 3
period_ms = 10
[[task]]
name = "e"
server = "bg"
priority = 2
wcet_ms = 100
period_ms = 1000
"#;

#[test]
fn a_cyclic_server_gives_its_child_servers_windows() {
    let r = run(PARTITION_WINDOWS);
    // Each frame: p1's window runs a [0, 3) and b [3, 4); p2's window runs c [4, 7) and then
    // has nothing; the background level gets [7, 10), the idle rest of p2's window and the
    // gap after it.
    assert_eq!(
        segments_ms(&r),
        vec![(0, 0, 0, 3), (1, 0, 3, 4), (2, 0, 4, 7), (3, 0, 7, 10), (0, 0, 10, 13), (1, 0, 13, 14), (2, 0, 14, 17), (3, 0, 17, 20)]
    );
    let consumed = |name: &str| r.servers().iter().find(|s| s.name == name).map(|s| s.consumed_ns / MS);
    assert_eq!((consumed("frame"), consumed("p1"), consumed("p2"), consumed("bg")), (Some(14), Some(8), Some(6), Some(6)));
}

#[test]
fn cyclic_windows_load_errors_name_the_key() {
    let cases = [
        (
            PARTITION_WINDOWS.replacen("server = \"p2\"\nstart_ms = 4", "server = \"bg\"\nstart_ms = 4", 1),
            "scheduler.server[0].slot[1].server: \"bg\" is not a child server of \"frame\"",
        ),
        (
            PARTITION_WINDOWS.replacen("server = \"p2\"\nstart_ms = 4", "server = \"p1\"\nstart_ms = 4", 1),
            "scheduler.server[0].slot: child server \"p2\" has no window",
        ),
        (
            PARTITION_WINDOWS.replacen("server = \"p1\"\nstart_ms = 0", "task = \"a\"\nstart_ms = 0", 1),
            "scheduler.server[0].slot[0].task: this cyclic server has child servers",
        ),
        (
            PARTITION_WINDOWS.replacen(
                "parent = \"frame\"\nkind = \"level\"\npolicy = \"fp\"",
                "parent = \"frame\"\nkind = \"level\"\npriority = 0\npolicy = \"fp\"",
                1,
            ),
            "scheduler.server[1].priority: only applies under an fp parent; under a cyclic parent its windows decide",
        ),
        (
            PARTITION_WINDOWS.replacen("start_ms = 0\nduration_ms = 4", "start_ms = 0\nduration_ms = 6", 1),
            "scheduler.server[0].slot[1]: overlaps slot[0] on CPU 0",
        ),
    ];
    for (text, want) in cases {
        let got = error(&text);
        assert!(got.contains(want), "got {got:?}, want {want:?}");
    }
}

proptest! {
    #![proptest_config(seeded_config("cyclic_windows_keep_children_inside_them", 128))]
    /// Under a cyclic server, every stretch a child server's task runs lies inside one of that
    /// child's windows, and the background level below never runs while an open window's
    /// child has work (it is work-conserving only outside the children's demand).
    #[test]
    fn cyclic_windows_keep_children_inside_them(
        w1 in 1u64..=5, gap in 0u64..=2, w2 in 1u64..=5,
        tasks in prop::collection::vec((0usize..2, 1u64..=4, prop::sample::select(vec![10u64, 20, 40])), 1..=4),
    ) {
        let mut s = format!(
            "[run]\nhorizon_ms = 80\n[scheduler]\nkind = \"fp\"\n\
             [[scheduler.server]]\nname = \"frame\"\nkind = \"level\"\npriority = 0\npolicy = \"cyclic\"\nmajor_frame_ms = 12\n\
             [[scheduler.server.slot]]\nserver = \"p0\"\nstart_ms = 0\nduration_ms = {w1}\n\
             [[scheduler.server.slot]]\nserver = \"p1\"\nstart_ms = {}\nduration_ms = {w2}\n\
             [[scheduler.server]]\nname = \"p0\"\nparent = \"frame\"\nkind = \"level\"\npolicy = \"rm\"\n\
             [[scheduler.server]]\nname = \"p1\"\nparent = \"frame\"\nkind = \"level\"\npolicy = \"edf\"\n\
             [[scheduler.server]]\nname = \"bg\"\nkind = \"level\"\npriority = 1\npolicy = \"fp\"\n\
             [[task]]\nname = \"bg_task\"\nserver = \"bg\"\npriority = 0\nwcet_ms = 80\nperiod_ms = 80\n",
            w1 + gap
        );
        for (i, (child, c, t)) in tasks.iter().enumerate() {
            s += &format!("[[task]]\nname = \"t{i}\"\nserver = \"p{child}\"\nwcet_ms = {c}\nperiod_ms = {t}\n");
        }
        let r = run(&s);
        let window = |child: usize| if child == 0 { (0, w1) } else { (w1 + gap, w1 + gap + w2) };
        for seg in r.segments.iter().filter(|g| g.task > 0) {
            let (lo, hi) = window(tasks[seg.task as usize - 1].0);
            let (start, end) = (seg.start.0 % (12 * MS), seg.start.0 % (12 * MS) + (seg.end.0 - seg.start.0));
            prop_assert!(lo * MS <= start && end <= hi * MS, "{seg:?} outside [{lo}, {hi})\n{s}");
        }
        // While a window is open and its child has an unfinished released job, bg does not run.
        for seg in r.segments.iter().filter(|g| g.task == 0) {
            for j in r.jobs.iter().filter(|j| j.task > 0) {
                let child = tasks[j.task as usize - 1].0;
                let (lo, hi) = window(child);
                let pos = seg.start.0 % (12 * MS);
                let inside = lo * MS <= pos && pos < hi * MS;
                let pending = j.release.0 <= seg.start.0 && j.completion.is_none_or(|c| c.0 > seg.start.0);
                let oldest = !r.jobs.iter().any(|o| o.task == j.task && o.index < j.index && o.completion.is_none_or(|c| c.0 > seg.start.0));
                prop_assert!(!(inside && pending && oldest), "bg runs at {} ns while {:?} waits in its window\n{s}", seg.start.0, j);
            }
        }
    }
}

/// Three deferrable servers of 2 ms per 4 ms under a global EDF level on two CPUs, each
/// with two backlogged tasks.
fn servers_under_gedf(horizon_ms: u64) -> String {
    let mut s = format!(
        "[machine]\ncpus = 2\n[run]\nhorizon_ms = {horizon_ms}\n[scheduler]\nkind = \"fp\"\n\
         [[scheduler.server]]\nname = \"g\"\nkind = \"level\"\npriority = 0\ncpus = [0, 1]\npolicy = \"gedf\"\n"
    );
    for k in 0..3 {
        s += &format!(
            "[[scheduler.server]]\nname = \"s{k}\"\nparent = \"g\"\nkind = \"deferrable\"\nbudget_ms = 2\nperiod_ms = 4\npolicy = \"fp\"\n"
        );
    }
    for k in 0..3 {
        for t in 0..2 {
            s += &format!("[[task]]\nname = \"t{k}_{t}\"\nserver = \"s{k}\"\npriority = {t}\nwcet_ms = 1000\nperiod_ms = 1000\n");
        }
    }
    s
}

#[test]
fn a_global_edf_level_runs_its_best_child_servers_one_cpu_each() {
    let r = run(&servers_under_gedf(1000));
    // At every 4 ms boundary all three replenish with the same deadline: s0 and s1 take the
    // two CPUs for their 2 ms, then s2 has [2, 4) on one of them. Each gets 2 of every 4 ms.
    for k in 0..3 {
        let s = r.servers().iter().find(|x| x.name == format!("s{k}")).expect("server");
        assert_eq!(s.consumed_ns, 500 * MS, "s{k}");
        assert_eq!(s.exhaustions, 250, "s{k}");
    }
    // A server is one virtual processor: never two of its tasks at once.
    for k in 0..3u32 {
        let mine: Vec<_> = r.segments.iter().filter(|g| g.task / 2 == k).collect();
        for a in &mine {
            for b in &mine {
                if a.cpu != b.cpu {
                    assert!(a.end <= b.start || b.end <= a.start, "s{k} runs {a:?} and {b:?} at once");
                }
            }
        }
    }
}

#[test]
fn servers_under_a_global_level_load_errors_name_the_key() {
    let base = servers_under_gedf(10);
    let cases = [
        (
            base.replacen("kind = \"deferrable\"\nbudget_ms = 2\nperiod_ms = 4\n", "kind = \"level\"\n", 1),
            "scheduler.server[1].kind: a level is ordered by its priority",
        ),
        (
            base.replacen("parent = \"g\"\nkind = \"deferrable\"", "parent = \"g\"\npriority = 1\nkind = \"deferrable\"", 1),
            "scheduler.server[1].priority: only applies under an fp or gfp parent",
        ),
        (base.replacen("policy = \"gedf\"", "policy = \"gfp\"", 1), "scheduler.server[1].priority: missing: under a gfp parent"),
        (
            base.replacen("policy = \"gedf\"", "policy = \"pedf\"", 1),
            "scheduler.server[1].parent: server \"g\" has policy \"pedf\": it runs tasks, not servers",
        ),
        (
            base.replacen("kind = \"fp\"\n", "kind = \"fp\"\nevent_cost_us = 5\n", 1),
            "event delivery does not combine with servers that schedule tasks on CPUs of their own (server \"g\"",
        ),
    ];
    for (text, want) in cases {
        let got = error(&text);
        assert!(got.contains(want), "got {got:?}, want {want:?}");
    }
}

proptest! {
    #![proptest_config(seeded_config("servers_under_a_global_level_keep_their_budgets", 128))]
    /// Child servers of a global EDF level on two CPUs: none ever runs on two CPUs at once,
    /// and none gets more than its budget in any of its periods.
    #[test]
    fn servers_under_a_global_level_keep_their_budgets(
        servers in prop::collection::vec((1u64..=4, prop::sample::select(vec![4u64, 5, 8, 10])), 1..=4),
        demand in prop::collection::vec((1u64..=6, prop::sample::select(vec![5u64, 10, 20])), 1..=6),
    ) {
        // Overcommitted sets too: the budgets hold at run time.
        let mut s = "[machine]\ncpus = 2\n[run]\nhorizon_ms = 80\n[scheduler]\nkind = \"fp\"\novercommit = true\n\
                     [[scheduler.server]]\nname = \"g\"\nkind = \"level\"\npriority = 0\ncpus = [0, 1]\npolicy = \"gedf\"\n".to_string();
        for (k, &(budget, period)) in servers.iter().enumerate() {
            s += &format!("[[scheduler.server]]\nname = \"s{k}\"\nparent = \"g\"\nkind = \"deferrable\"\nbudget_ms = {}\nperiod_ms = {period}\npolicy = \"edf\"\n", budget.min(period));
        }
        for (i, &(c, t)) in demand.iter().enumerate() {
            s += &format!("[[task]]\nname = \"t{i}\"\nserver = \"s{}\"\nwcet_ms = {c}\nperiod_ms = {t}\n", i % servers.len());
        }
        let r = run(&s);
        for k in 0..servers.len() {
            let mine: Vec<_> = r.segments.iter().filter(|g| g.task as usize % servers.len() == k).collect();
            for a in &mine {
                for b in &mine {
                    prop_assert!(a.cpu == b.cpu || a.end <= b.start || b.end <= a.start, "s{} at once: {:?} {:?}\n{}", k, a, b, s);
                }
            }
            let summary = r.servers().iter().find(|x| x.name == format!("s{k}")).unwrap();
            let budget_ns = servers[k].0.min(servers[k].1) * MS;
            prop_assert!(summary.period_consumed_ns.iter().all(|&used| used <= budget_ns), "s{}: {:?}\n{}", k, summary.period_consumed_ns, s);
        }
    }
}
