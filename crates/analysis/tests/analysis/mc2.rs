//! MC²'s levels: the level-A table, rate-monotonic level B on what A leaves, global-EDF
//! level C on the capacity A and B leave.

use critmem_analysis::{mc2_analysis, Mc2System, Mc2Task, Rta, TaskParams};
use critmem_core::scenario::{CyclicSlot, CyclicTable};
use critmem_core::task::Criticality;
use critmem_core::Nanos;

fn ms(x: u64) -> Nanos {
    Nanos::from_ms(x)
}

fn task(level: Criticality, cpu: Option<usize>, c: u64, t: u64) -> Mc2Task {
    Mc2Task { params: TaskParams::implicit(ms(c), ms(t)), level, cpu }
}

fn slot(cpu: usize, task: usize, start: u64, duration: u64) -> CyclicSlot {
    CyclicSlot { cpu, start: ms(start), duration: ms(duration), task }
}

/// Two cores, a 10 ms frame. A: τ0 (2, 10) on core 0 in [0, 2); τ1 (1, 5) on core 1 in
/// [0, 1) and [5, 6). B: τ2 (3, 10) on core 0, τ3 (2, 5) on core 1. C: τ4 (4, 10), τ5 (3, 20).
fn system() -> Mc2System {
    use Criticality::*;
    Mc2System {
        cpus: 2,
        tasks: vec![
            task(A, Some(0), 2, 10),
            task(A, Some(1), 1, 5),
            task(B, Some(0), 3, 10),
            task(B, Some(1), 2, 5),
            task(C, None, 4, 10),
            task(C, None, 3, 20),
        ],
        table: CyclicTable { major_frame: ms(10), slots: vec![slot(0, 0, 0, 2), slot(1, 1, 0, 1), slot(1, 1, 5, 1)] },
    }
}

#[test]
fn a_system_that_passes_every_level() {
    let r = mc2_analysis(&system()).unwrap();
    // A: τ0's job ends at 2; τ1's jobs at 1 and 6 (released 0 and 5).
    assert_eq!(r.level_a, vec![(0, Rta::Meets { response: ms(2) }), (1, Rta::Meets { response: ms(1) })]);
    // B on core 0: free time [2, 10) per frame, sbf(t) = t − 2 up to 10: 3 ms by t = 5.
    // B on core 1: free [1, 5) and [6, 10): 2 ms by t = 3.
    assert_eq!(r.level_b, vec![(2, Rta::Meets { response: ms(5) }), (3, Rta::Meets { response: ms(3) })]);
    assert!(r.level_a_schedulable() && r.level_b_schedulable());
    // C: capacity (1 − 0.2 − 0.3) + (1 − 0.2 − 0.4) = 0.9 ≥ U_C = 0.4 + 0.15 = 0.55.
    let c = &r.level_c;
    assert_eq!(c.bounded, Some(true));
    assert!((c.capacity - 0.9).abs() < 1e-12 && (c.utilization - 0.55).abs() < 1e-12, "{c:?}");
    // Longest stretch on A and B alone: core 0, A [0, 2) then B's 3 ms: 5 ms (the free time
    // t − 2 first exceeds B's 3 ms just after t = 5); core 1, A [0, 1) then B's 2 ms: 3 ms.
    assert_eq!(c.longest_gap, vec![Some(ms(5)), Some(ms(3))]);
    // Λ = ⌈0.55⌉ − 1 = 0, so the estimate is C + the longest gap: 4 + 5 and 3 + 5.
    assert_eq!(c.tardiness_estimates, Some(vec![(4, ms(9)), (5, ms(8))]));
}

#[test]
fn a_level_a_task_short_of_slot_time_fails_level_a() {
    // τ0 needs 2 ms per 10 ms but its slot is 1 ms: done at 10 + 1 = 11 > 10.
    let mut s = system();
    s.table.slots[0].duration = ms(1);
    let r = mc2_analysis(&s).unwrap();
    assert_eq!(r.level_a[0], (0, Rta::Misses { response_at_least: ms(11) }));
    assert!(!r.level_a_schedulable());
}

#[test]
fn a_level_b_task_too_big_for_the_free_time_fails_level_b() {
    // τ2 (9, 10) on core 0 with 8 ms free per frame: from t = 9, sbf(9) = 7 → t = 11 > 10.
    let mut s = system();
    s.tasks[2].params = TaskParams::implicit(ms(9), ms(10));
    let r = mc2_analysis(&s).unwrap();
    assert_eq!(r.level_b[0], (2, Rta::Misses { response_at_least: ms(11) }));
    assert!(r.level_a_schedulable() && !r.level_b_schedulable());
    assert_eq!(r.level_c.longest_gap[0], None);
}

#[test]
fn level_c_beyond_the_capacity_left_has_no_bounded_tardiness() {
    // τ4 (8, 10): U_C = 0.8 + 0.15 = 0.95 > 0.9.
    let mut s = system();
    s.tasks[4].params = TaskParams::implicit(ms(8), ms(10));
    let r = mc2_analysis(&s).unwrap();
    assert!(r.level_a_schedulable() && r.level_b_schedulable());
    assert_eq!(r.level_c.bounded, Some(false));
    assert_eq!(r.level_c.tardiness_estimates, None);
}

#[test]
fn malformed_systems_are_refused_with_the_key_and_reason() {
    let mut s = system();
    s.table.slots[0].start = ms(9);
    assert_eq!(mc2_analysis(&s).unwrap_err().to_string(), "table.slot[0].duration: the slot does not fit in the 10000000 ns major frame");
    let mut s = system();
    s.tasks[0].cpu = None;
    assert_eq!(mc2_analysis(&s).unwrap_err().to_string(), "task[0].cpu: a level-A task needs a core");
    let mut s = system();
    s.table.slots.push(slot(1, 1, 0, 2));
    assert_eq!(mc2_analysis(&s).unwrap_err().to_string(), "table.slot: slots overlap on core 1 at 0 ns");
    let mut s = system();
    s.table.slots[0].task = 2;
    assert_eq!(mc2_analysis(&s).unwrap_err().key, "table.slot[0].cpu");
    let mut s = system();
    s.tasks[0].params = TaskParams::implicit(ms(2), ms(3));
    assert_eq!(mc2_analysis(&s).unwrap_err().key, "table.major_frame");
}
