//! The wait intervals the resources subsystem records: the classic inversion's blocking under
//! each protocol, a caller waiting for a component's stack, and, over random programs, that
//! every wait lies within its job's life and agrees with the per-resource and per-component
//! figures.

use crate::common::seeded_config;
use crate::components::{self, ComponentGen, COMPONENTS};
use crate::resources::{load, scenario_text, task_gen, INVERSION};
use critmem_core::resources::{ResourceSubsystem, WaitRecord};
use critmem_core::{simulate, Nanos, Outcome, SimOptions, SimResult, Simulation};
use proptest::prelude::*;

const OPTS: SimOptions = SimOptions { record_jobs: true, record_segments: true, check_invariants: true };

fn waits(r: &SimResult) -> &[WaitRecord] {
    &r.resources().expect("a resources section").waits
}

/// (task, job, resource, start ms, end ms) of each recorded wait.
fn spans(r: &SimResult) -> Vec<(u32, u64, &str, f64, f64)> {
    waits(r).iter().map(|w| (w.task, w.index, w.resource.as_str(), w.start.as_ms_f64(), w.end.as_ms_f64())).collect()
}

#[test]
fn the_inversions_blocking_is_recorded_as_the_high_priority_jobs_wait() {
    let inversion = |p: &str| load(&INVERSION.replace("PROTOCOL", p));
    // none: lo holds R from 1; hi (task 0) runs 2–3 and locks R at 3; med runs 3–13, lo ends
    // its section 13–16 and unlocks at 16, when hi is granted: 16 − 3 = 13 ms of blocking.
    assert_eq!(spans(&simulate(&inversion("none"), OPTS)), vec![(0, 0, "R", 3.0, 16.0)]);
    // pip: lo runs in hi's place 3–6 (the 3 ms left of its section) and unlocks at 6:
    // 6 − 3 = 3 ms, the resource's longest_wait.
    let pip = simulate(&inversion("pip"), OPTS);
    assert_eq!(spans(&pip), vec![(0, 0, "R", 3.0, 6.0)]);
    assert_eq!(pip.resources().unwrap().resources[0].longest_wait, Nanos::from_ms(3));
    // The donor path blocks hi off the CPU over the same 3–6.
    let s = inversion("pip");
    let donor = ResourceSubsystem::new(&s, true).expect("tasks with programs").with_donor_inheritance().recording_calls();
    let by_donor = Simulation::new(&s, s.seed, OPTS, vec![Box::new(donor)]).run();
    assert_eq!(spans(&by_donor), vec![(0, 0, "R", 3.0, 6.0)]);
    // srp: R's ceiling (hi's level) holds hi back from its release at 2 and med (task 1) from
    // its release at 3 until lo unlocks R at 5; the lock itself never waits.
    assert_eq!(spans(&simulate(&inversion("srp"), OPTS)), vec![(0, 0, "R", 2.0, 5.0), (1, 0, "R", 3.0, 5.0)]);
}

#[test]
fn waits_are_recorded_only_with_job_records() {
    let s = load(&INVERSION.replace("PROTOCOL", "none"));
    let r = simulate(&s, SimOptions { record_jobs: false, ..OPTS });
    let section = r.resources().unwrap();
    assert_eq!((section.waits.len(), section.waits_left_out), (0, 0));
}

#[test]
fn a_caller_waiting_for_a_stack_is_recorded_against_the_component() {
    let s = load(
        r#"
[scheduler]
kind = "fp"
[run]
horizon_ms = 10
[[component]]
name = "svc"
stacks = 1
stack_wait = "block"
program = [{ compute_ms = 2 }]
[[task]]
name = "hi"
priority = 1
period_ms = 10
offset_ms = 1
program = [{ call = "svc" }]
[[task]]
name = "lo"
priority = 2
period_ms = 10
program = [{ call = "svc" }]
"#,
    );
    let r = simulate(&s, OPTS);
    // lo enters svc at 0 and runs 0–1; hi, released at 1, finds the one stack taken and
    // blocks; lo runs 1–2 and returns at 2, when hi enters: hi waited 2 − 1 = 1 ms.
    assert_eq!(spans(&r), vec![(0, 0, "stack:svc", 1.0, 2.0)]);
    assert_eq!(r.resources().unwrap().components[0].longest_stack_wait, Nanos::from_ms(1));
}

proptest! {
    #![proptest_config(seeded_config("recorded_waits_lie_within_their_jobs_and_match_the_figures", 48))]
    /// Over random programs, schedulers and protocols (aborts included): every wait lies
    /// within its job's release and end (the horizon for a job still pending), a job's waits
    /// never overlap, each resource has exactly one wait per contended lock, and its longest
    /// granted wait is its `longest_wait` (a wait cut short by an abort or the horizon counts
    /// towards neither).
    #[test]
    fn recorded_waits_lie_within_their_jobs_and_match_the_figures(
        scheduler in prop::sample::select(vec!["fp", "edf", "pfp", "gedf"]),
        units in prop::collection::vec(1u32..=3, 3),
        protocols in prop::collection::vec(prop::sample::select(vec!["none", "pip", "srp"]), 3),
        tasks in prop::collection::vec(task_gen(), 2..6),
    ) {
        let protocols: Vec<&str> =
            protocols.iter().map(|&p| if p == "srp" && scheduler == "gedf" { "pip" } else { p }).collect();
        let s = load(&scenario_text(scheduler, &units, &protocols, &tasks, true));
        let r = simulate(&s, OPTS);
        let section = r.resources().unwrap();
        prop_assert_eq!(section.waits_left_out, 0);
        for w in &section.waits {
            prop_assert!(w.start <= w.end, "{w:?}");
            let job = r.jobs.iter().find(|j| j.task == w.task && j.index == w.index);
            let (release, end) = match job {
                Some(j) => (j.release, j.completion.unwrap_or(r.horizon).min(r.horizon)),
                None => (Nanos::ZERO, r.horizon), // still pending at the horizon: not in `jobs`
            };
            prop_assert!(release <= w.start && w.end <= r.horizon, "{w:?} outside {release:?}–{:?}", r.horizon);
            if let Some(j) = job.filter(|j| j.outcome == Outcome::Completed) {
                prop_assert!(w.end <= end, "{w:?} after completion {:?} of {j:?}", end);
            }
        }
        for (i, a) in section.waits.iter().enumerate() {
            for b in &section.waits[i + 1..] {
                if (a.task, a.index) == (b.task, b.index) {
                    prop_assert!(a.end <= b.start || b.end <= a.start, "{a:?} overlaps {b:?}");
                }
            }
        }
        for (stats, protocol) in section.resources.iter().zip(&protocols) {
            let mine: Vec<&WaitRecord> = section.waits.iter().filter(|w| w.resource == stats.name).collect();
            // Under srp the resource also names the hold-backs its ceiling caused.
            if *protocol == "srp" {
                prop_assert!(mine.len() as u64 >= stats.contended, "{}", stats.name);
                continue;
            }
            prop_assert_eq!(mine.len() as u64, stats.contended, "{}", stats.name);
            // The longest grant is recorded (no grant at all if every wait was cut short); a
            // completed job's waits all ended in a grant.
            let longest = stats.longest_wait;
            prop_assert!(longest == Nanos::ZERO || mine.iter().any(|w| w.end - w.start == longest), "{}: none {longest:?}", stats.name);
            for w in &mine {
                let completed = r.jobs.iter().any(|j| j.task == w.task && j.index == w.index && j.outcome == Outcome::Completed);
                prop_assert!(!completed || w.end - w.start <= stats.longest_wait, "{w:?} longer than {:?}", stats.longest_wait);
            }
        }
    }
}

proptest! {
    #![proptest_config(seeded_config("recorded_stack_waits_match_the_component_figures", 32))]
    /// Over random call graphs with one or two stacks per component (aborts of callers
    /// included): each component has exactly one recorded wait per `stack_waits`, its longest
    /// grant is among them, a completed job's waits are no longer than it, and the granted
    /// ones it sums in `total_stack_wait` lie between the completed jobs' and all recorded.
    #[test]
    fn recorded_stack_waits_match_the_component_figures(
        scheduler in prop::sample::select(vec!["fp", "edf", "pfp", "gedf", "gfp"]),
        comps in prop::collection::vec((1u32..=2, any::<bool>(), 0u32..300, prop::collection::vec(components::block(), 0..4)), COMPONENTS),
        tasks in prop::collection::vec((prop::sample::select(vec![5u32, 8, 10, 20]), any::<bool>(), prop::collection::vec(components::block(), 1..4)), 2..6),
    ) {
        let comps: Vec<ComponentGen> = comps;
        let s = load(&components::scenario_text(scheduler, &comps, &tasks));
        let r = simulate(&s, OPTS);
        let section = r.resources().unwrap();
        prop_assert_eq!(section.waits_left_out, 0);
        for stats in &section.components {
            let mine: Vec<&WaitRecord> = section.waits.iter().filter(|w| w.resource == format!("stack:{}", stats.name)).collect();
            prop_assert_eq!(mine.len() as u64, stats.stack_waits, "{}", stats.name);
            let longest = stats.longest_stack_wait;
            prop_assert!(longest == Nanos::ZERO || mine.iter().any(|w| w.end - w.start == longest), "{}: none {longest:?}", stats.name);
            let completed = |w: &WaitRecord| r.jobs.iter().any(|j| j.task == w.task && j.index == w.index && j.outcome == Outcome::Completed);
            let sum = |ws: &mut dyn Iterator<Item = &&WaitRecord>| ws.fold(Nanos::ZERO, |acc, w| acc + (w.end - w.start));
            prop_assert!(mine.iter().filter(|w| completed(w)).all(|w| w.end - w.start <= longest), "{}", stats.name);
            let (of_completed, of_all) = (sum(&mut mine.iter().filter(|w| completed(w))), sum(&mut mine.iter()));
            prop_assert!(of_completed <= stats.total_stack_wait && stats.total_stack_wait <= of_all, "{}: {of_completed:?} {:?} {of_all:?}", stats.name, stats.total_stack_wait);
        }
    }
}
