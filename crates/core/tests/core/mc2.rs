//! MC²'s criticality levels as a scheduler: level A from per-core tables, B rate-monotonic per
//! core, C global EDF on the CPUs A and B leave, D first released first.

use crate::common::seeded_config;
use critmem_core::{load_toml_str, simulate, Nanos, SimOptions, SimResult};
use proptest::prelude::*;

const MS: u64 = 1_000_000;

fn run(text: &str) -> SimResult {
    let s = load_toml_str(text, "test.toml").unwrap_or_else(|e| panic!("{e}\n{text}"));
    simulate(&s, SimOptions { record_jobs: true, record_segments: true, check_invariants: true })
}

fn error(text: &str) -> String {
    load_toml_str(text, "test.toml").expect_err("the file is refused").to_string()
}

/// `[[task]]` entries from `(name, level, cpu, wcet_ms, period_ms)`.
fn tasks(list: &[(&str, &str, Option<u32>, u64, u64)]) -> String {
    let mut s = String::new();
    for (name, level, cpu, c, t) in list {
        s += &format!("[[task]]\nname = \"{name}\"\ncriticality = \"{level}\"\nwcet_ms = {c}\nperiod_ms = {t}\n");
        if let Some(cpu) = cpu {
            s += &format!("cpu = {cpu}\n");
        }
    }
    s
}

fn slot(task: &str, start_ms: u64, duration_ms: u64) -> String {
    format!("[[scheduler.slot]]\ntask = \"{task}\"\nstart_ms = {start_ms}\nduration_ms = {duration_ms}\n")
}

/// Completion (ms) of each task's first job, in task order.
fn first_completions_ms(r: &SimResult) -> Vec<Option<u64>> {
    (0..r.tasks.len())
        .map(|t| r.jobs.iter().find(|j| j.task as usize == t && j.index == 0).and_then(|j| j.completion).map(|c| c.0 / MS))
        .collect()
}

/// Two cores, a 10 ms frame. A: a0 (2, 10) on core 0 in [0, 2); a1 (1, 5) on core 1 in
/// [0, 1) and [5, 6). B: b0 (3, 10) on core 0, b1 (2, 5) on core 1. C: c0 (5, 10), c1 and c2
/// (2, 10): 9 ms of level-C work, exactly the time A and B leave per frame.
fn two_core_system(horizon_ms: u64) -> String {
    let mut s = format!("[machine]\ncpus = 2\n[run]\nhorizon_ms = {horizon_ms}\n[scheduler]\nkind = \"mc2\"\nmajor_frame_ms = 10\n");
    s += &(slot("a0", 0, 2) + &slot("a1", 0, 1) + &slot("a1", 5, 1));
    s += &tasks(&[
        ("a0", "A", Some(0), 2, 10),
        ("a1", "A", Some(1), 1, 5),
        ("b0", "B", Some(0), 3, 10),
        ("b1", "B", Some(1), 2, 5),
        ("c0", "C", None, 5, 10),
        ("c1", "C", None, 2, 10),
        ("c2", "C", None, 2, 10),
    ]);
    s
}

#[test]
fn each_level_runs_on_what_the_levels_above_leave() {
    let r = run(&two_core_system(10));
    // Core 0: a0 [0, 2), b0 [2, 5), free from 5. Core 1: a1 [0, 1), b1 [1, 3), free [3, 5);
    // a1's second job [5, 6), b1's second job [6, 8), free [8, 10).
    // C (all deadlines 10, ties by release order c0, c1, c2): c0 takes core 1 at 3, moves to
    // core 0 at 5 when A takes core 1 back, and ends at 8 after 2 + 3 ms; c1 and c2 then take
    // the two free cores for [8, 10), ending exactly at their deadline.
    assert_eq!(first_completions_ms(&r), vec![Some(2), Some(1), Some(5), Some(3), Some(8), Some(10), Some(10)]);
    let second = |task: u32| r.jobs.iter().find(|j| j.task == task && j.index == 1).and_then(|j| j.completion);
    assert_eq!((second(1), second(3)), (Some(Nanos(6 * MS)), Some(Nanos(8 * MS))));
    let c0: Vec<(u32, u64, u64)> = r.segments.iter().filter(|s| s.task == 4).map(|s| (s.cpu, s.start.0 / MS, s.end.0 / MS)).collect();
    assert_eq!(c0, vec![(1, 3, 5), (0, 5, 8)]);
    let c12: Vec<(u32, u32, u64, u64)> =
        r.segments.iter().filter(|s| s.task >= 5).map(|s| (s.task, s.cpu, s.start.0 / MS, s.end.0 / MS)).collect();
    assert_eq!(c12, vec![(5, 0, 8, 10), (6, 1, 8, 10)]);
    assert!(r.tasks.iter().all(|t| t.stats.deadline_misses == 0));
}

#[test]
fn level_d_runs_in_release_order_on_what_c_leaves() {
    // One core: c (1, 5) first; d1 (3 ms, released at 0) before d2 (1 ms, released at 1 with
    // a 2 ms deadline, which EDF would run first): c [0, 1), d1 [1, 4), d2 [4, 5), c [5, 6).
    let s = "[scheduler]\nkind = \"mc2\"\n[run]\nhorizon_ms = 10\n".to_string()
        + &tasks(&[("c", "C", None, 1, 5), ("d1", "D", None, 3, 100)])
        + "[[task]]\nname = \"d2\"\ncriticality = \"D\"\nwcet_ms = 1\nperiod_ms = 100\ndeadline_ms = 2\noffset_ms = 1\n";
    let r = run(&s);
    assert_eq!(first_completions_ms(&r), vec![Some(1), Some(4), Some(5)]);
    assert_eq!(r.tasks[2].stats.deadline_misses, 1, "d2 ends at 5 > 3");
}

#[test]
fn a_higher_level_preempts_a_lower_one_at_once() {
    // One core: d (10, 100) starts at 0; c (2, 20) released at 1 preempts it; b (1, 20)
    // released at 2 preempts c; a's slot [4, 6) preempts whatever runs then.
    let s = "[scheduler]\nkind = \"mc2\"\nmajor_frame_ms = 20\n[run]\nhorizon_ms = 20\n".to_string()
        + &slot("a", 4, 2)
        + "[[task]]\nname = \"a\"\ncriticality = \"A\"\ncpu = 0\nwcet_ms = 2\nperiod_ms = 20\noffset_ms = 0\n"
        + "[[task]]\nname = \"b\"\ncriticality = \"B\"\ncpu = 0\nwcet_ms = 1\nperiod_ms = 20\noffset_ms = 2\n"
        + "[[task]]\nname = \"c\"\ncriticality = \"C\"\nwcet_ms = 2\nperiod_ms = 20\noffset_ms = 1\n"
        + &tasks(&[("d", "D", None, 10, 100)]);
    let r = run(&s);
    let seg: Vec<(u32, u64, u64)> = r.segments.iter().map(|s| (s.task, s.start.0 / MS, s.end.0 / MS)).collect();
    // d [0, 1), c [1, 2), b [2, 3), c [3, 4), a [4, 6), d [6, 15).
    assert_eq!(seg, vec![(3, 0, 1), (2, 1, 2), (1, 2, 3), (2, 3, 4), (0, 4, 6), (3, 6, 15)]);
}

#[test]
fn load_errors_name_the_key_and_reason() {
    let head = "[machine]\ncpus = 2\n[scheduler]\nkind = \"mc2\"\nmajor_frame_ms = 10\n";
    assert_eq!(
        error(&(head.to_string() + &tasks(&[("b", "B", None, 1, 10)]))),
        "test.toml: task[0].cpu: missing: a level-B task runs on one core under mc2; give its cpu"
    );
    assert_eq!(
        error(&(head.to_string() + &tasks(&[("c", "C", Some(1), 1, 10)]))),
        "test.toml: task[0].cpu: level C is scheduled globally under mc2; only levels A and B take a cpu (got cpu = 1)"
    );
    assert_eq!(
        error(&(head.to_string() + &slot("b", 0, 1) + &tasks(&[("b", "B", Some(0), 1, 10)]))),
        "test.toml: scheduler.slot[0].task: task \"b\" is level B: under mc2 only level-A tasks run from the table"
    );
    assert!(error(&(head.to_string() + &tasks(&[("x", "E", None, 1, 10)]))).starts_with("test.toml: task[0].criticality: unknown"));
    assert_eq!(
        error(&(head.to_string() + &tasks(&[("a", "A", Some(0), 1, 10)]))),
        "test.toml: scheduler.slot: level-A task \"a\" has no slot: it runs only in its [[scheduler.slot]] windows"
    );
    assert_eq!(
        error(
            &("[machine]\ncpus = 2\n[scheduler]\nkind = \"mc2\"\n".to_string() + &slot("a", 0, 1) + &tasks(&[("a", "A", Some(0), 1, 10)]))
        ),
        "test.toml: scheduler.major_frame_ms: missing: level-A tasks (such as \"a\") run from a table with a major frame"
    );
    assert_eq!(
        error(&(head.to_string() + &slot("a", 0, 1) + "cpu = 1\n" + &tasks(&[("a", "A", Some(0), 1, 10)]))),
        "test.toml: scheduler.slot[0].cpu: does not apply to mc2: a level-A slot runs on its task's cpu"
    );
    // The level is a label on other schedulers, as before; a pin is refused there as before.
    assert!(load_toml_str(&("[scheduler]\nkind = \"edf\"\n".to_string() + &tasks(&[("a", "A", None, 1, 10)])), "t.toml").is_ok());
    assert!(error(&("[scheduler]\nkind = \"edf\"\n".to_string() + &tasks(&[("a", "A", Some(0), 1, 10)]))).contains("task[0].cpu"));
}

/// Random two-core MC² sets: per core at most one level-A task (one slot per period, at
/// `slot_at` within it) and up to two level-B tasks; up to three level-C and one level-D task.
fn random_system() -> impl Strategy<Value = String> {
    let a = proptest::option::of((prop::sample::select(vec![5u64, 10, 20]), 1u64..=2, 0u64..=2, 0u64..=3));
    let b = prop::collection::vec((prop::sample::select(vec![5u64, 10, 20, 40]), 1u64..=3), 0..=2);
    let c = prop::collection::vec((prop::sample::select(vec![5u64, 10, 20, 40]), 1u64..=6), 0..=3);
    let d = prop::collection::vec((prop::sample::select(vec![10u64, 20, 40]), 1u64..=6), 0..=1);
    (prop::collection::vec((a, b), 2), c, d).prop_map(|(cores, c, d)| {
        let mut s = "[machine]\ncpus = 2\n[run]\nhorizon_ms = 160\n[scheduler]\nkind = \"mc2\"\nmajor_frame_ms = 20\n".to_string();
        let mut list = String::new();
        for (cpu, (a, b)) in cores.iter().enumerate() {
            if let Some((t, c, extra, at)) = *a {
                let len = (c + extra).min(t);
                let at = at.min(t - len);
                for k in 0..20 / t {
                    s += &slot(&format!("a{cpu}"), k * t + at, len);
                }
                list += &tasks(&[(&format!("a{cpu}"), "A", Some(cpu as u32), c, t)]);
            }
            for (i, &(t, c)) in b.iter().enumerate() {
                list += &tasks(&[(&format!("b{cpu}_{i}"), "B", Some(cpu as u32), c, t)]);
            }
        }
        for (i, &(t, w)) in c.iter().enumerate() {
            list += &tasks(&[(&format!("c{i}"), "C", None, w.min(t), t)]);
        }
        for (i, &(t, w)) in d.iter().enumerate() {
            list += &tasks(&[(&format!("d{i}"), "D", None, w, t)]);
        }
        if list.is_empty() {
            list = tasks(&[("d", "D", None, 1, 10)]);
        }
        s + &list
    })
}

proptest! {
    #![proptest_config(seeded_config("mc2_levels_keep_to_their_cores_and_slots", 256))]
    /// A level-A job runs only inside its task's slots on its core, a level-B job only on its
    /// core, and a CPU never idles while a level-C or -D job waits outside A's and B's time.
    #[test]
    fn levels_keep_to_their_cores_and_slots(text in random_system()) {
        let s = load_toml_str(&text, "test.toml").unwrap();
        let r = run(&text);
        let table = s.scheduler.mc2_table().unwrap().clone();
        for seg in &r.segments {
            let spec = &s.tasks[seg.task as usize];
            match spec.criticality {
                critmem_core::Criticality::A => {
                    let (f, pos) = (table.major_frame.0, seg.start.0 % table.major_frame.0);
                    let inside = table.slots.iter().any(|sl| sl.task == seg.task as usize
                        && sl.start.0 <= pos && seg.end.0 - seg.start.0 + pos <= sl.start.0 + sl.duration.0 && pos < f);
                    prop_assert!(inside, "level-A segment {seg:?} outside its slots\n{text}");
                    prop_assert_eq!(Some(seg.cpu as usize), spec.cpu);
                }
                critmem_core::Criticality::B => prop_assert_eq!(Some(seg.cpu as usize), spec.cpu, "{}", text),
                _ => {}
            }
        }
        // Work conservation for C and D: at every segment boundary, count the CPUs busy and
        // the C/D jobs that are released, unfinished and not running.
        let mut instants: Vec<u64> = r.segments.iter().flat_map(|g| [g.start.0, g.end.0]).chain(r.jobs.iter().map(|j| j.release.0)).collect();
        instants.retain(|&t| t < 160 * MS);
        instants.sort_unstable();
        instants.dedup();
        for &t in &instants {
            let running: Vec<_> = r.segments.iter().filter(|g| g.start.0 <= t && t < g.end.0).collect();
            if running.len() == 2 {
                continue;
            }
            let waiting = r.jobs.iter().any(|j| {
                let level = s.tasks[j.task as usize].criticality;
                level >= critmem_core::Criticality::C
                    && j.release.0 <= t
                    && j.completion.is_none_or(|c| c.0 > t)
                    && !running.iter().any(|g| g.task == j.task)
                    // Only a task's oldest unfinished job is eligible.
                    && !r.jobs.iter().any(|o| o.task == j.task && o.index < j.index && o.completion.is_none_or(|c| c.0 > t))
            });
            prop_assert!(!waiting, "a CPU idles at {t} ns while a level-C or -D job waits\n{text}");
        }
    }
}

// ------------------------------------------------------------------ servers under the levels

/// `[[scheduler.server]]` under mc2.
fn server(name: &str, kind: &str, budget_ms: u64, period_ms: u64) -> String {
    format!("[[scheduler.server]]\nname = \"{name}\"\nkind = \"{kind}\"\nbudget_ms = {budget_ms}\nperiod_ms = {period_ms}\n")
}

/// `(task, start_ms, end_ms)` of every segment.
fn segments_ms(r: &SimResult) -> Vec<(u32, u64, u64)> {
    r.segments.iter().map(|s| (s.task, s.start.0 / MS, s.end.0 / MS)).collect()
}

#[test]
fn a_level_c_server_gets_its_budget_under_global_edf_and_a_level_a_table_still_preempts_it() {
    // One core, a 10 ms frame. a (level A) runs in its slot [3, 5); server s (deferrable,
    // 4 ms every 10 ms) holds c0 (6 ms of work); c1 (2, 20) is level C outside it. s stands in
    // level C's EDF with its period's end, 10, before c1's 20: c0 [0, 3), a preempts [3, 5),
    // c0 [5, 6) spends the budget, c1 [6, 8); at 10 s is replenished and c0 ends [10, 12).
    let s = "[scheduler]\nkind = \"mc2\"\nmajor_frame_ms = 10\n[run]\nhorizon_ms = 20\n".to_string()
        + &slot("a", 3, 2)
        + &server("s", "deferrable", 4, 10)
        + &tasks(&[("a", "A", Some(0), 2, 10)])
        + "[[task]]\nname = \"c0\"\ncriticality = \"C\"\nserver = \"s\"\nwcet_ms = 6\nperiod_ms = 20\n"
        + &tasks(&[("c1", "C", None, 2, 20)]);
    let r = run(&s);
    assert_eq!(segments_ms(&r), vec![(1, 0, 3), (0, 3, 5), (1, 5, 6), (2, 6, 8), (1, 10, 12), (0, 13, 15)]);
    let srv = &r.servers()[0];
    assert_eq!((srv.name.as_str(), srv.parent.as_str(), srv.kind), ("s", "level C", "deferrable"));
    assert_eq!((srv.consumed_ns, srv.replenishments, srv.exhaustions, srv.tasks.clone()), (6 * MS, 2, 1, vec![1]));
    assert_eq!(
        (srv.period_consumed_ns.clone(), srv.exhausted_at.clone(), srv.cpus.clone()),
        (vec![4 * MS, 2 * MS], vec![Nanos(6 * MS)], vec![0])
    );
    assert!(r.to_json().contains(r#""servers":[{"name":"s","parent":"level C","kind":"deferrable","cpus":[0],"budget_ms":4.0,"period_ms":10.0,"consumed_ms":6.0,"replenishments":2,"exhaustions":1"#));
}

#[test]
fn a_level_b_server_runs_at_the_rank_of_its_period_on_its_core() {
    // One core. Rate-monotonic: b0 (2, 5) above server s (1 ms every 10, holding b1 (3, 20))
    // above b2 (1, 20). b0 [0, 2), s [2, 3), b2 [3, 4), b0 [5, 7), b0 [10, 12), s [12, 13),
    // b0 [15, 17), b0 [20, 22), s [22, 23): b1 ends at 23, one budget a period.
    let s = "[scheduler]\nkind = \"mc2\"\n[run]\nhorizon_ms = 25\n".to_string()
        + &server("s", "deferrable", 1, 10)
        + &tasks(&[("b0", "B", Some(0), 2, 5)])
        + "[[task]]\nname = \"b1\"\ncriticality = \"B\"\ncpu = 0\nserver = \"s\"\nwcet_ms = 3\nperiod_ms = 20\n"
        + &tasks(&[("b2", "B", Some(0), 1, 20)]);
    let r = run(&s);
    let b1: Vec<(u64, u64)> = segments_ms(&r).into_iter().filter(|s| s.0 == 1).map(|s| (s.1, s.2)).collect();
    assert_eq!(b1, vec![(2, 3), (12, 13), (22, 23)]);
    assert_eq!(first_completions_ms(&r), vec![Some(2), Some(23), Some(4)]);
    assert_eq!(r.servers()[0].parent, "level B");
}

#[test]
fn a_polling_server_gives_up_its_budget_when_idle_and_a_deferrable_one_keeps_it() {
    // c arrives at 1 ms. The polling server was idle at 0, so its budget is gone until 10;
    // the deferrable one still has it.
    let with = |kind: &str| {
        "[scheduler]\nkind = \"mc2\"\n[run]\nhorizon_ms = 20\n".to_string()
            + &server("s", kind, 2, 10)
            + "[[task]]\nname = \"c\"\ncriticality = \"C\"\nserver = \"s\"\nwcet_ms = 1\nperiod_ms = 20\noffset_ms = 1\n"
    };
    assert_eq!(segments_ms(&run(&with("polling"))), vec![(0, 10, 11)]);
    assert_eq!(segments_ms(&run(&with("deferrable"))), vec![(0, 1, 2)]);
}

#[test]
fn a_kind_mc2_without_servers_reports_none() {
    let r = run(&two_core_system(20));
    assert!(r.servers().is_empty() && !r.to_json().contains("\"servers\""));
}

#[test]
fn servers_under_mc2_that_cannot_be_are_refused_in_one_line() {
    let head = "[machine]\ncpus = 2\n[scheduler]\nkind = \"mc2\"\nmajor_frame_ms = 10\n".to_string();
    let task = |name: &str, level: &str, cpu: Option<u32>, srv: &str| {
        tasks(&[(name, level, cpu, 1, 10)]) + &if srv.is_empty() { String::new() } else { format!("server = \"{srv}\"\n") }
    };
    let s = server("s", "deferrable", 1, 10);
    let cases = [
        (head.clone() + &s + &slot("a", 0, 1) + &task("a", "A", Some(0), "s"), "test.toml: task[0].server: level-A task \"a\" runs only in its table slots ([[scheduler.slot]]), so no server holds it"),
        (head.clone() + &s + &task("b", "B", Some(0), "s") + &task("c", "C", None, "s"), "test.toml: task[1].server: server \"s\" runs at level B (task \"b\"), but task \"c\" is level C: a server runs at one level, so its tasks share a criticality"),
        (head.clone() + &s + &task("b", "B", Some(0), "s") + &task("b1", "B", Some(1), "s"), "test.toml: task[1].server: level-B server \"s\" runs on core 0 (task \"b\"), but task \"b1\" is pinned to cpu 1: a level-B server runs on one core"),
        (head.clone() + &s + "cpu = 1\n" + &task("b", "B", Some(0), "s"), "test.toml: scheduler.server[0].cpu: a level-B server runs on its tasks' core 0 (got cpu = 1)"),
        (head.clone() + &s + "cpu = 1\n" + &task("c", "C", None, "s"), "test.toml: scheduler.server[0].cpu: level C is scheduled globally under kind = \"mc2\"; its servers run on any CPU (got cpu = 1)"),
        (head.clone() + &s + &task("c", "C", None, ""), "test.toml: scheduler.server[0].name: no task names server \"s\", and under kind = \"mc2\" a server runs at the level of its tasks"),
        (head.clone() + &s.replace("deferrable", "level").replace("budget_ms = 1\nperiod_ms = 10\n", "") + &task("c", "C", None, "s"), "test.toml: scheduler.server[0].kind: under kind = \"mc2\" the criticality levels are the levels"),
        (head.clone() + &s + "parent = \"t\"\n" + &task("c", "C", None, "s"), "test.toml: scheduler.server[0].parent: under kind = \"mc2\" a server runs directly under the level of its tasks"),
        (head.clone() + &s + "priority = 1\n" + &task("c", "C", None, "s"), "test.toml: scheduler.server[0].priority: under kind = \"mc2\" its level orders a server"),
        (head.clone() + &s + "policy = \"gedf\"\n" + &task("c", "C", None, "s"), "test.toml: scheduler.server[0].policy: a server under kind = \"mc2\" runs one job at a time"),
        (head.clone() + &s + "policy = \"fp\"\n" + &task("c", "C", None, "s"), "test.toml: task[0].priority: missing: server \"s\" orders its tasks by fixed priority"),
        (head.clone() + &s + "overhead_percent = 5\n" + &task("c", "C", None, "s"), "test.toml: scheduler.server[0].overhead_percent: keeps CPU back from child servers"),
        (head.clone() + "event_cost_us = 5\n" + &s + &task("c", "C", None, "s"), "test.toml: scheduler.event_cost_us: delivering events through child-scheduler threads belongs to HiRes server trees"),
        (head.clone() + &s.replace("budget_ms = 1", "budget_ms = 11") + &task("c", "C", None, "s"), "test.toml: scheduler.server[0].budget_ms: must not exceed period_ms"),
        (head.clone() + &s + &task("c", "C", None, "nope"), "test.toml: task[0].server: no server named \"nope\""),
    ];
    for (text, start) in cases {
        let e = error(&text);
        assert!(e.starts_with(start) && !e.contains('\n'), "{e}\n{start}\n{text}");
    }
}

/// Random two-core MC² sets as [`random_system`], with up to two servers: one at level B on
/// a drawn core, one at level C, each holding one or two tasks of its level.
fn random_system_with_servers() -> impl Strategy<Value = String> {
    let srv = (any::<bool>(), 1u64..=4, prop::sample::select(vec![5u64, 10, 20]));
    let members = prop::collection::vec((prop::sample::select(vec![5u64, 10, 20, 40]), 1u64..=6), 1..=2);
    (random_system(), proptest::option::of((srv.clone(), 0u32..2, members.clone())), proptest::option::of((srv, members))).prop_map(
        |(mut s, b, c)| {
            let kind = |deferrable: bool| if deferrable { "deferrable" } else { "polling" };
            if let Some(((d, q, p), cpu, members)) = b {
                s += &server("sb", kind(d), q.min(p), p);
                for (i, (t, w)) in members.into_iter().enumerate() {
                    s += &format!(
                        "[[task]]\nname = \"sb{i}\"\ncriticality = \"B\"\ncpu = {cpu}\nserver = \"sb\"\nwcet_ms = {}\nperiod_ms = {t}\n",
                        w.min(t)
                    );
                }
            }
            if let Some(((d, q, p), members)) = c {
                s += &server("sc", kind(d), q.min(p), p);
                for (i, (t, w)) in members.into_iter().enumerate() {
                    s += &format!(
                        "[[task]]\nname = \"sc{i}\"\ncriticality = \"C\"\nserver = \"sc\"\nwcet_ms = {}\nperiod_ms = {t}\n",
                        w.min(t)
                    );
                }
            }
            s
        },
    )
}

proptest! {
    #![proptest_config(seeded_config("servers_under_mc2_spend_at_most_their_budget", 192))]
    /// With servers under the levels: a level-A job still runs only in its slots, a level-B
    /// job (in a server or not) only on its core; a server never spends more than its budget
    /// in a period, what it spent is exactly its tasks' running time, and its tasks run one
    /// at a time.
    #[test]
    fn servers_under_mc2_spend_at_most_their_budget(text in random_system_with_servers()) {
        let s = load_toml_str(&text, "test.toml").unwrap();
        let r = run(&text);
        let levels = s.scheduler.mc2_levels().unwrap();
        for seg in &r.segments {
            let spec = &s.tasks[seg.task as usize];
            if spec.criticality <= critmem_core::Criticality::B {
                prop_assert_eq!(Some(seg.cpu as usize), spec.cpu, "{}", text);
            }
            if spec.criticality == critmem_core::Criticality::A {
                let pos = seg.start.0 % levels.table.major_frame.0;
                prop_assert!(levels.table.slots.iter().any(|sl| sl.task == seg.task as usize && sl.start.0 <= pos && pos < sl.start.0 + sl.duration.0));
            }
        }
        for (j, (srv, spec)) in r.servers().iter().zip(&levels.servers).enumerate() {
            prop_assert!(srv.period_consumed_ns.iter().all(|&c| c <= spec.budget.0), "{:?}\n{}", srv, text);
            let mine: Vec<_> = r.segments.iter().filter(|g| levels.task_server[g.task as usize] == Some(j)).collect();
            let ran: u64 = mine.iter().map(|g| g.end.0 - g.start.0).sum();
            prop_assert_eq!(ran, srv.consumed_ns, "{}", text);
            for (a, b) in mine.iter().zip(mine.iter().skip(1)) {
                prop_assert!(a.end <= b.start || b.end <= a.start, "server {} runs two jobs at once\n{}", j, text);
            }
        }
    }
}

#[test]
fn a_servers_tasks_share_an_srp_scope_of_their_own() {
    // hi and lo lock R under SRP inside server s at level C; c outside it never waits on R.
    let text = "[machine]\ncpus = 2\n[scheduler]\nkind = \"mc2\"\n[run]\nhorizon_ms = 100\n".to_string()
        + &server("s", "deferrable", 8, 10)
        + "[[resource]]\nname = \"R\"\nprotocol = \"srp\"\n\
           [[task]]\nname = \"hi\"\ncriticality = \"C\"\nserver = \"s\"\nperiod_ms = 50\noffset_ms = 2\n\
           program = [{ compute_ms = 1 }, { lock = \"R\" }, { compute_ms = 1 }, { unlock = \"R\" }]\n\
           [[task]]\nname = \"lo\"\ncriticality = \"C\"\nserver = \"s\"\nperiod_ms = 60\n\
           program = [{ compute_ms = 1 }, { lock = \"R\" }, { compute_ms = 4 }, { unlock = \"R\" }]\n"
        + &tasks(&[("c", "C", None, 3, 20)]);
    let r = run(&text);
    let res = r.resources().expect("resources");
    assert_eq!(res.resources[0].contended, 0, "no lock of R waits under SRP");
    assert!(res.waits.iter().all(|w| w.task != 2), "c is outside the server's scope");
    assert!(r.tasks.iter().all(|t| t.stats.completed > 0 && t.stats.deadline_misses == 0));
}
