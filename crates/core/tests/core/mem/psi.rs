//! Pressure stall accounting.

use super::*;

#[test]
fn psi_some_and_full_on_a_hand_computed_timeline() {
    let ms = Nanos::from_ms;
    let mut p = PsiAccounting::new();
    let g = p.add_group(None);
    let (a, b) = (p.add_task(g), p.add_task(g));
    p.set_state(ms(0), a, TaskPsiState::RUNNABLE);
    p.set_state(ms(0), b, TaskPsiState::RUNNABLE);
    // a major-faults at 10 (memory + io) until 20; b waits for io from 15 to 30.
    p.set_state(ms(10), a, TaskPsiState::blocked(true, true));
    p.set_state(ms(15), b, TaskPsiState::blocked(false, true));
    assert_eq!(p.totals(g, ms(17)).memory, Pressure { some_us: 7_000, full_us: 2_000 }, "readable mid-stall");
    p.set_state(ms(20), a, TaskPsiState::RUNNABLE);
    p.set_state(ms(30), b, TaskPsiState::RUNNABLE);
    // a reclaims on the CPU from 40 to 42 while b is runnable; then b sleeps and a reclaims
    // alone from 50 to 53.
    p.set_state(ms(40), a, TaskPsiState::RECLAIMING);
    p.set_state(ms(42), a, TaskPsiState::RUNNABLE);
    p.set_state(ms(45), b, TaskPsiState::IDLE);
    p.set_state(ms(50), a, TaskPsiState::RECLAIMING);
    p.set_state(ms(53), a, TaskPsiState::IDLE);
    let tot = p.totals(g, ms(100));
    // memory some: [10,20) + [40,42) + [50,53) = 15 ms; full: [15,20) (b stalled too, nobody
    // productive) + [50,53) = 8 ms.
    assert_eq!(tot.memory, Pressure { some_us: 15_000, full_us: 8_000 });
    // io some: [10,30) = 20 ms; full: [15,20) = 5 ms.
    assert_eq!(tot.io, Pressure { some_us: 20_000, full_us: 5_000 });
}
