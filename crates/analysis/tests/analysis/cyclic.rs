//! Cyclic executives: each task against the slot time its table gives it.

use crate::common::*;
use critmem_analysis::{analyze, cyclic_sporadic_response, Rta, SlotSupply, TaskParams, Verdict};
use critmem_core::Nanos;
use proptest::prelude::*;

fn table_head(frame_ms: u32, slots: &[(usize, &str, f64, f64)]) -> String {
    let mut s = format!("[scheduler]\nkind = \"cyclic\"\nmajor_frame_ms = {frame_ms}\n");
    for (cpu, task, start, dur) in slots {
        s += &format!("[[scheduler.slot]]\ntask = \"{task}\"\nstart_ms = {start}\nduration_ms = {dur}\ncpu = {cpu}\n");
    }
    s
}

#[test]
fn a_task_short_of_slot_time_is_not_schedulable() {
    // b needs 4 ms per 10 ms frame but its slot gives 3.
    let text = table_head(10, &[(0, "a", 0.0, 2.0), (0, "b", 5.0, 3.0)])
        + "[run]\nhorizon_ms = 30\n[[task]]\nname = \"a\"\nwcet_ms = 2\nperiod_ms = 10\n[[task]]\nname = \"b\"\nwcet_ms = 4\nperiod_ms = 10\n";
    let r = analyze(&load(&text));
    assert_eq!(r.verdict, Verdict::NotSchedulable);
    assert_eq!(r.task("a").unwrap().response_time_ms, Some(2.0));
    assert_eq!(r.task("b").unwrap().schedulable, Some(false));
    assert!(r.tests[0].detail.contains("b can miss"), "{}", r.tests[0].detail);
}

#[test]
fn overlapping_slots_on_two_cpus_count_once() {
    // The executive runs a task on one CPU at a time: [0, 4) on both CPUs is 4 ms, not 8.
    let text = table_head(10, &[(0, "a", 0.0, 4.0), (1, "a", 0.0, 4.0), (1, "a", 4.0, 1.0)])
        + "[machine]\ncpus = 2\n[[task]]\nname = \"a\"\nwcet_ms = 5\nperiod_ms = 10\n";
    let s = load(&text);
    let supply = SlotSupply::new(s.scheduler.cyclic_table().unwrap(), 0);
    assert_eq!(supply.per_frame(), Nanos::from_ms(5));
    let r = analyze(&s);
    assert_eq!(r.task("a").unwrap().response_time_ms, Some(5.0));
    assert_eq!(run(&s, false).tasks[0].stats.max_response, Some(Nanos::from_ms(5)));
}

#[test]
fn sporadic_task_waits_for_its_slot_from_the_worst_release() {
    // One 2 ms slot per 10 ms frame: released just after the slot, a 1 ms job ends 9 ms later.
    let text = table_head(10, &[(0, "s", 0.0, 2.0)])
        + "[[task]]\nname = \"s\"\nwcet_ms = 1\narrival = \"sporadic\"\nmin_interarrival_ms = 10\nmax_interarrival_ms = 25\n";
    let s = load(&text);
    let supply = SlotSupply::new(s.scheduler.cyclic_table().unwrap(), 0);
    assert_eq!(supply.min_supply(Nanos::from_ms(9)), Nanos::from_ms(1));
    assert_eq!(supply.min_supply(Nanos::from_ms(8)), Nanos::ZERO);
    let task = TaskParams::implicit(Nanos::from_ms(1), Nanos::from_ms(10));
    assert_eq!(cyclic_sporadic_response(&supply, &task), Rta::Meets { response: Nanos::from_ms(9) });
    let r = analyze(&s);
    assert_eq!(r.verdict, Verdict::Schedulable);
    let sim = run(&s, false);
    assert!(sim.tasks[0].stats.max_response.unwrap() <= Nanos::from_ms(9));
}

#[test]
fn periodic_task_with_deadline_beyond_its_period_reaches_a_steady_backlog() {
    // 3 ms of slot per 10 ms frame, 4 ms jobs every 15 ms, D = 20: the job released at 15
    // gets [20, 23) and [30, 31), responding in 16 ms; the one at 30 then starts late, at 31.
    // From then on every 30 ms window starts 1 ms behind, as the first did not: steady.
    let text = table_head(10, &[(0, "a", 0.0, 3.0)])
        + "[run]\nhorizon_ms = 300\n[[task]]\nname = \"a\"\nwcet_ms = 4\nperiod_ms = 15\ndeadline_ms = 20\n";
    let s = load(&text);
    let r = analyze(&s);
    assert_eq!(r.verdict, Verdict::Schedulable);
    assert_eq!(r.task("a").unwrap().response_time_ms, Some(16.0));
    assert_eq!(run(&s, false).tasks[0].stats.max_response, Some(Nanos::from_ms(16)));
}

/// A random table over a 20 ms frame: each CPU cut into segments given to a task or left idle.
fn random_case() -> impl Strategy<Value = String> {
    let task = (0usize..4, 1u32..=8, 0u32..=100, 0u32..40, prop::option::of((0u32..=100, 1u32..=8)));
    (1usize..=2, prop::collection::vec(task, 2..=4), prop::collection::vec((1u32..=6, 0usize..5), 4..=10)).prop_map(
        |(cpus, tasks, segments)| {
            const PERIODS: [u32; 4] = [5, 10, 20, 40];
            let n = tasks.len();
            let mut text = format!("[machine]\ncpus = {cpus}\n[scheduler]\nkind = \"cyclic\"\nmajor_frame_ms = 20\n");
            // The loader wants at least one slot: t0 always has the frame's last millisecond.
            text += "[[scheduler.slot]]\ntask = \"t0\"\nstart_ms = 19\nduration_ms = 1\ncpu = 0\n";
            for cpu in 0..cpus {
                let mut at = 0;
                for (k, &(len, who)) in segments.iter().enumerate() {
                    // Some slots abut, some leave a 1 ms gap.
                    let start = at + (k + cpu) as u32 % 2;
                    let end = (start + len).min(if cpu == 0 { 19 } else { 20 });
                    if start >= end {
                        break;
                    }
                    if who < n {
                        text += &format!(
                            "[[scheduler.slot]]\ntask = \"t{who}\"\nstart_ms = {start}\nduration_ms = {}\ncpu = {cpu}\n",
                            end - start
                        );
                    }
                    at = end;
                }
            }
            let mut max_end = 0;
            for (i, &(pi, c_halves, d_pct, offset, susp)) in tasks.iter().enumerate() {
                let t = PERIODS[pi];
                let c = f64::from(c_halves.min(t)) / 2.0;
                let d = (c + (f64::from(t) - c) * f64::from(d_pct) / 100.0).round().max(c.ceil());
                let offset = offset % t;
                max_end = max_end.max(offset + t + d as u32);
                text += &format!("[[task]]\nname = \"t{i}\"\nwcet_ms = {c}\nperiod_ms = {t}\ndeadline_ms = {d}\noffset_ms = {offset}\n");
                if let Some((after_pct, dur)) = susp {
                    let after = (c * f64::from(after_pct) / 100.0 * 2.0).round() / 2.0;
                    text += &format!("suspend = [{{ after_ms = {after}, for_ms = {dur} }}]\n");
                }
            }
            // Off the ms grid, so no deadline falls on the horizon itself (the engine does not
            // complete a job whose last suspension ends exactly at the horizon).
            text + &format!("[run]\nhorizon_ms = {}.25\n", max_end + 2 * 40)
        },
    )
}

proptest! {
    // Random tables on one or two CPUs with periodic tasks (offsets, D ≤ T, some
    // self-suspending, possibly right at the start or end of the job): the exact replay
    // equals the simulated worst response, and a miss it finds happens in simulation.
    #![proptest_config(cases(500))]
    #[test]
    fn cyclic_replay_equals_simulated_worst_response(text in random_case()) {
        let s = load(&text);
        let report = analyze(&s);
        let sim = run(&s, false);
        for (a, t) in report.tasks.iter().zip(&sim.tasks) {
            match a.schedulable {
                Some(true) => {
                    prop_assert_eq!(t.stats.deadline_misses, 0, "task {}\n{}", a.name, text);
                    prop_assert_eq!(a.response_time_ms.map(ms), t.stats.max_response, "task {}\n{}", a.name, text);
                }
                Some(false) => prop_assert!(t.stats.deadline_misses > 0, "task {} should miss\n{}", a.name, text),
                None => prop_assert!(false, "undecided task {}: {}\n{}", a.name, report.tests[0].detail, text),
            }
        }
    }
}
