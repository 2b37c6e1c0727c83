//! MC²'s schedulability study: the way search against exhaustive enumeration, batches that do
//! not change counts, Table 3's scenarios, and schemes on systems whose answer is known.

use critmem_analysis::mc2_study::{dma_inflation, ipc_cost_us, schedulable_counts, Level, ModelParams, Scenario, Scheme, System};

fn scenario(names: [&str; 7]) -> Scenario {
    Scenario::from_names(&names).unwrap()
}

const FIG15_C: [&str; 7] = ["C-Light", "Short", "Medium", "Slow", "Large", "High", "Many"];

#[test]
fn the_way_search_equals_exhaustive_enumeration_on_a_thousand_systems() {
    let p = ModelParams::default();
    let scenarios = Scenario::all();
    let (mut compared, mut feasible, mut locking) = (0, 0, 0);
    let heavy: Vec<Scenario> = scenarios.iter().copied().filter(|s| s.names()[2] == "Heavy").collect();
    let optimised = [Scheme::OC, Scheme::OcAbAll, Scheme::OcAbLp, Scheme::OcAbSp];
    for i in 0..1000u64 {
        // Every scenario in turn, utilisations across the curves' fall, all nine schemes in
        // turn; then heavy tasks under the O schemes, whose pairs often end up on two cores
        // and so exercise the locked region.
        let (s, u, scheme) = if i < 700 {
            (scenarios[(i as usize * 7) % scenarios.len()], 0.5 + 0.25 * (i % 14) as f64, Scheme::ALL[(i % 9) as usize])
        } else {
            (heavy[(i as usize * 5) % heavy.len()], 2.0 + 0.25 * (i % 9) as f64, optimised[(i % 4) as usize])
        };
        let system = System::generate(s, u, 11, i, &p);
        let pair = system.with_evaluator(scheme, &p, |e| Some((e.optimise(), e.exhaustive(), e.locked(16).iter().any(|&l| l))));
        let Some((fast, slow, locks)) = pair else { continue };
        compared += 1;
        locking += usize::from(locks);
        match (&fast, &slow) {
            (None, None) => {}
            (Some((a, ways)), Some((b, _))) => {
                feasible += 1;
                assert!((a - b).abs() <= 1e-9 * b.abs().max(1.0), "system {i} {scheme:?}: search {a} ({ways:?}), enumeration {b}");
                assert_eq!(ways.cores.iter().sum::<usize>() + ways.level_c + ways.locked, p.platform.llc_ways);
            }
            _ => panic!("system {i} {scheme:?}: search {fast:?}, enumeration {slow:?}"),
        }
    }
    // Enough of each kind that the comparison means something.
    assert!(compared >= 900, "{compared} systems compared");
    assert!(feasible >= 500, "{feasible} feasible");
    assert!(locking >= 10, "{locking} with lockable IPC buffers");
}

#[test]
fn counts_do_not_depend_on_how_a_point_is_split_into_batches() {
    let p = ModelParams::default();
    let s = scenario(FIG15_C);
    let whole = schedulable_counts(s, 2.5, 5, 0, 24, &p);
    let mut parts = [0u64; 9];
    for (first, count) in [(0, 5), (5, 1), (6, 18)] {
        for (t, c) in parts.iter_mut().zip(schedulable_counts(s, 2.5, 5, first, count, &p)) {
            *t += c;
        }
    }
    assert_eq!(whole, parts);
    assert_ne!(schedulable_counts(s, 2.5, 6, 0, 24, &p), [0; 9], "another seed still gives counts");
}

#[test]
fn light_systems_are_schedulable_and_overloaded_ones_are_not() {
    let p = ModelParams::default();
    for s in Scenario::all().into_iter().step_by(41) {
        assert_eq!(schedulable_counts(s, 0.25, 1, 0, 8, &p), [8; 9], "{:?} at 0.25", s.names());
        assert_eq!(schedulable_counts(s, 8.0, 1, 0, 8, &p), [0; 9], "{:?} at 8", s.names());
    }
}

#[test]
fn table_3_gives_648_scenarios_named_as_in_the_paper() {
    let all = Scenario::all();
    assert_eq!(all.len(), 648);
    let names: std::collections::HashSet<[&str; 7]> = all.iter().map(Scenario::names).collect();
    assert_eq!(names.len(), 648);
    assert_eq!(Scenario::from_names(&FIG15_C).unwrap().names(), FIG15_C);
    let err = Scenario::from_names(&["C-Light", "Short", "Medium", "Slow", "Huge", "High", "Many"]).unwrap_err();
    assert!(err.contains("ipc_size") && err.contains("Huge"), "{err}");
    assert!(Scenario::from_names(&["C-Light"]).is_err());
}

#[test]
fn generated_systems_follow_table_3() {
    let p = ModelParams::default();
    let s = scenario(FIG15_C);
    let system = System::generate(s, 3.0, 2, 0, &p);
    let total: f64 = system.tasks.iter().map(|t| t.cost_us / t.period_us).sum();
    assert!((total - 3.0).abs() < 1e-6, "system utilisation {total}");
    for t in &system.tasks {
        let u = t.cost_us / t.period_us;
        match t.level {
            Level::A => assert!([12_000.0, 24_000.0].contains(&t.period_us) && u < 0.1),
            Level::B => assert!([24_000.0, 48_000.0].contains(&t.period_us) && u < 0.2),
            Level::C => assert!((12_000.0..100_000.0).contains(&t.period_us) && u < 0.4),
        }
        if let Some(link) = t.ipc {
            let partner = &system.tasks[link.partner];
            assert_eq!((partner.level, partner.period_us), (t.level, t.period_us), "partners share a level and a period");
            assert!([4096.0, 8192.0].contains(&link.message_bytes));
        }
    }
    // High bandwidth: at least 180 MB/s of buffers (or every task has one).
    let mb_s: f64 = system.tasks.iter().filter_map(|t| t.io.map(|io| io.bytes / t.period_us)).sum();
    assert!(mb_s >= 180.0 || system.tasks.iter().all(|t| t.io.is_some()), "{mb_s} MB/s");
}

#[test]
fn more_buffers_in_level_c_lower_the_cost_of_a_task_sharing_the_bank() {
    // Fig. 14's shape: DMA into the task's bank costs it, so moving buffers to level C helps.
    let p = ModelParams::default();
    let costs: Vec<f64> = (0..=5).map(|k| dma_inflation(&p, 20.0 * k as f64, 150.0, 2)).collect();
    assert!(costs.windows(2).all(|w| w[1] < w[0]), "{costs:?}");
    assert!(costs[5] > 1.0, "the bus still costs something with every buffer in level C");
    // With more ways the bank conflicts matter less (Fig. 13(b)).
    assert!(dma_inflation(&p, 0.0, 150.0, 8) < dma_inflation(&p, 0.0, 150.0, 2));
}

#[test]
fn ipc_costs_order_cl_below_ce_below_sbp_within_observation_1() {
    let p = ModelParams::default();
    for bytes in [64.0, 512.0, 8192.0] {
        let (sbp_s, sbp_r) = ipc_cost_us(&p, "SBP", bytes).unwrap();
        let (ce_s, ce_r) = ipc_cost_us(&p, "CE", bytes).unwrap();
        let (cl_s, cl_r) = ipc_cost_us(&p, "CL", bytes).unwrap();
        assert!(cl_s < ce_s && ce_s < sbp_s && cl_r < ce_r && ce_r < sbp_r);
        assert!((0.027..=0.054 + 1e-12).contains(&(cl_s / sbp_s)) && (0.292..=0.405 + 1e-12).contains(&(ce_r / sbp_r)));
    }
    assert!(ipc_cost_us(&p, "XX", 64.0).is_err());
}

#[test]
fn every_parameter_names_its_source() {
    let rows = ModelParams::default().table();
    assert!(rows.len() >= 25);
    for r in rows {
        assert!(!r.source.is_empty() && !r.value.is_empty(), "{r:?}");
    }
}
