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
