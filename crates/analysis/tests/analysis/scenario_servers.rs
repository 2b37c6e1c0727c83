//! Scenarios with a scheduler hierarchy through `analyze`: HiRes Fig. 6 at its three web-server
//! periods checked against the simulated service, and random server trees whose cleared
//! tasks never miss in simulation.

use crate::common::{cases, load};
use critmem_analysis::{analyze, AnalysisReport, ServerReport, Verdict};
use critmem_core::{simulate, Nanos, Scenario, SimOptions};
use proptest::prelude::*;

fn fig6(web_period_ms: u32) -> Scenario {
    let path = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/servers-hires-fig6.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    let text = text.replace("budget_ms = 4\nperiod_ms = 16\n", &format!("budget_ms = 4\nperiod_ms = {web_period_ms}\n"));
    // Long enough for every period of every server to repeat (lcm of 8/16/32, 10, 20, 25).
    load(&text.replace("horizon_ms = 400", "horizon_ms = 800"))
}

fn server<'a>(r: &'a AnalysisReport, name: &str) -> &'a ServerReport {
    r.servers.as_ref().expect("servers").iter().find(|s| s.name == name).unwrap()
}

/// The CPU time each server's subtree got in each of its periods, from the segment trace.
fn served_per_period(s: &Scenario, name: &str) -> Vec<Nanos> {
    let h = s.hierarchy.as_ref().unwrap();
    let j = h.servers.iter().position(|x| x.name == name).unwrap();
    let period = h.servers[j].period.0;
    let run = simulate(s, SimOptions { record_jobs: false, record_segments: true, check_invariants: true });
    let mut got = vec![0u64; (s.horizon.0 / period) as usize];
    for g in run.segments.iter().filter(|g| h.task_server[g.task as usize] == j) {
        // Split each segment at period boundaries.
        let mut at = g.start.0;
        while at < g.end.0 {
            let k = at / period;
            let stop = g.end.0.min((k + 1) * period);
            if let Some(x) = got.get_mut(k as usize) {
                *x += stop - at;
            }
            at = stop;
        }
    }
    got.into_iter().map(Nanos).collect()
}

#[test]
fn fig6_at_4_per_16_and_4_per_32_gives_every_server_its_whole_budget() {
    // The CPU-bound threads never idle, so their deferrable servers never defer (no jitter).
    // At 4/16 (web jitter 12), as tasks: rt10 1 + 4·⌈(R+12)/16⌉: 5 → 9; rt20 3 + 4·2 + 2 = 13;
    // rt25 4 + 4·⌈(R+12)/16⌉ + ⌈R/10⌉ + 3·⌈R/20⌉: 12 → 17 → 17. At 4/32 (jitter 28) the same.
    for (period, responses) in [(16, [4.0, 9.0, 13.0, 17.0]), (32, [4.0, 9.0, 13.0, 17.0])] {
        let s = fig6(period);
        let r = analyze(&s);
        for (name, resp) in ["web", "rt10", "rt20", "rt25"].iter().zip(responses) {
            let x = server(&r, name);
            assert_eq!(x.verdict, Verdict::Schedulable, "4/{period} {name}: {}", x.detail);
            assert_eq!(x.response_ms, Some(resp), "4/{period} {name}");
            assert_eq!(x.supply_budget_ms, x.budget_ms);
            // The simulator serves the always-busy threads exactly their budget every period.
            if *name != "web" {
                let got = served_per_period(&s, name);
                assert!(
                    got.iter().all(|&g| Nanos::from_ms(g.0 / 1_000_000) == g && g.as_ms_f64() == x.budget_ms.unwrap()),
                    "{name}: {got:?}"
                );
            }
        }
        // The web server's threads ask for 0.5/4 + 1.5/8 + 3/16 = 50 % of the CPU from a 25 %
        // (12.5 %) server, and the CPU-bound threads for a whole CPU from 10-16 %: they miss.
        assert_eq!(r.verdict, Verdict::NotSchedulable);
        assert!(r.tests[0].detail.contains("the tasks of web, rt10, rt20, rt25 need more"), "{}", r.tests[0].detail);
        assert_eq!(server(&r, "rt25").backlogged_share, Some(0.16));
    }
}

#[test]
fn fig6_at_4_per_8_guarantees_the_lowest_server_only_part_of_its_budget_and_the_simulation_agrees() {
    // 91 %: rt25 as a task: 12 → 17 → 21 → 4 + 4·⌈25/8⌉ + ⌈25/10⌉ + 3·⌈25/20⌉ = 29 > 25, so
    // its whole budget is not guaranteed. Phased over lcm(8, 10, 20, 25) = 200 ms, with web
    // free to defer its budget anywhere in its period and rt10, rt20 (always busy, responses
    // 9 and 17) running within [10m, 10m + 9) and [20m, 20m + 17): in its period [75, 100) web
    // can take 4 + 4 + 4 + 4 ([72,80) ... [96,104) ∩), rt10 1 + 1 + 1 and rt20 2 ([60,77) ∩)
    // + 3: 24 of 25 ms. It is guaranteed 1 ms per period.
    let s = fig6(8);
    let r = analyze(&s);
    for name in ["web", "rt10", "rt20"] {
        assert_eq!(server(&r, name).verdict, Verdict::Schedulable, "{name}");
    }
    let rt25 = server(&r, "rt25");
    assert_eq!(rt25.verdict, Verdict::Unknown);
    assert_eq!(rt25.guaranteed_budget_ms, Some(1.0));
    // Γ(25, 1): blackout 2·(25 − 1) = 48 ms.
    assert_eq!((rt25.supply_budget_ms, rt25.supply_period_ms, rt25.supply_blackout_ms), (Some(1.0), Some(25.0), Some(48.0)));
    assert!(rt25.detail.contains("response bound reaches 29 ms > its 25 ms period"), "{}", rt25.detail);
    // The simulated web threads use less than the worst case: rt25 gets its 4 ms in every
    // period, which the analysis does not claim.
    assert!(served_per_period(&s, "rt25").iter().all(|&g| g == Nanos::from_ms(4)));
    for name in ["rt10", "rt20"] {
        let budget = Nanos::try_from_ms_f64(server(&r, name).budget_ms.unwrap()).unwrap();
        assert!(served_per_period(&s, name).iter().all(|&g| g == budget), "{name}");
    }
}

#[test]
fn fig6_at_4_per_8_with_an_always_busy_web_server_is_guaranteed_exactly_what_it_gets() {
    // One web thread that never idles: web no longer defers (response 4, it runs in
    // [8m, 8m + 4)). rt10 responds in 1 + 4 = 5, rt20 in 3 + 4 + 1 = 8. In rt25's period
    // [0, 25) web takes 4 + 4 + 4 + 1, rt10 1 + 1 + 1, rt20 3 + 3: 22, leaving 3; no period
    // of the hyperperiod leaves less. The simulation gives rt25 exactly 3 ms in [0, 25).
    let path = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/servers-hires-fig6.toml");
    let text = std::fs::read_to_string(&path).unwrap().replace("budget_ms = 4\nperiod_ms = 16\n", "budget_ms = 4\nperiod_ms = 8\n");
    let start = text.find("[[task]]\nname = \"web-event\"").unwrap();
    let end = text.find("[[task]]\nname = \"cpu10\"").unwrap();
    let busy = "[[task]]\nname = \"web-busy\"\nwcet_ms = 1000\nperiod_ms = 1000\npriority = 0\nserver = \"web\"\n\n";
    let s = load(&format!("{}{busy}{}", &text[..start], &text[end..]).replace("horizon_ms = 400", "horizon_ms = 800"));
    let r = analyze(&s);
    assert_eq!(server(&r, "web").response_ms, Some(4.0));
    assert_eq!(server(&r, "rt20").response_ms, Some(8.0));
    let rt25 = server(&r, "rt25");
    assert_eq!((rt25.verdict, rt25.guaranteed_budget_ms), (Verdict::Unknown, Some(3.0)));
    let got = served_per_period(&s, "rt25");
    assert_eq!(got.iter().min(), Some(&Nanos::from_ms(3)));
    assert_eq!(got[0], Nanos::from_ms(3));
}

#[test]
fn a_nested_tree_with_a_level_and_edf_is_analysed_level_by_level() {
    // root fp: outer (deferrable 6/10) with children a (polling 2/10, prio 0) and b (polling
    // 2/10, prio 1); lvl (a plain level) with task z below outer.
    // outer: 6 ≤ 10, whole budget, Γ(10, 6) for a and b: blackout 2·4 = 8.
    // a on Γ(10, 6): least t with sbf(t) ≥ 2: t = 8 + 2 = 10 ≤ 10. b: 2 + 2 (a) = 4 at t = 12 > 10
    // (a polling sibling may take its budget again at 10): not whole; phased: in [0, 10) a takes
    // 2 and sbf(10) = 2, so nothing is left: guaranteed 0.
    let text = "[scheduler]\nkind = \"fp\"\n[run]\nhorizon_ms = 100\n\
        [[scheduler.server]]\nname = \"outer\"\nkind = \"deferrable\"\nbudget_ms = 6\nperiod_ms = 10\npriority = 0\npolicy = \"fp\"\n\
        [[scheduler.server]]\nname = \"a\"\nparent = \"outer\"\nkind = \"polling\"\nbudget_ms = 2\nperiod_ms = 10\npriority = 0\npolicy = \"edf\"\n\
        [[scheduler.server]]\nname = \"b\"\nparent = \"outer\"\nkind = \"polling\"\nbudget_ms = 2\nperiod_ms = 10\npriority = 1\n\
        [[scheduler.server]]\nname = \"lvl\"\nkind = \"level\"\npriority = 1\n\
        [[task]]\nname = \"x\"\nwcet_ms = 1\nperiod_ms = 40\nserver = \"a\"\n\
        [[task]]\nname = \"y\"\nwcet_ms = 1\nperiod_ms = 40\npriority = 0\nserver = \"b\"\n\
        [[task]]\nname = \"z\"\nwcet_ms = 2\nperiod_ms = 20\npriority = 0\nserver = \"lvl\"\n";
    let s = load(text);
    let r = analyze(&s);
    assert_eq!(server(&r, "outer").verdict, Verdict::Schedulable);
    assert_eq!(server(&r, "a").verdict, Verdict::Schedulable);
    assert_eq!(server(&r, "a").response_ms, Some(10.0));
    assert_eq!(server(&r, "b").verdict, Verdict::Unknown);
    assert_eq!(server(&r, "b").guaranteed_budget_ms, Some(0.0));
    assert_eq!(server(&r, "lvl").budget_ms, None);
    // x on Γ(10, 2) under EDF: dbf(40) = 1 ≤ sbf(40) = 2·(40 − 16)/10 ... holds. z below outer
    // (jitter 4): 2 + 6·⌈(R + 4)/10⌉: 8 → 14 → 14 ≤ 20. y has no guaranteed supply.
    let by_name = |n: &str| r.task(n).unwrap().schedulable;
    assert_eq!((by_name("x"), by_name("y"), by_name("z")), (Some(true), None, Some(true)));
    assert_eq!(r.task("z").unwrap().response_time_ms, Some(14.0));
    assert_eq!(r.verdict, Verdict::Unknown);
    let run = simulate(&s, SimOptions::default());
    assert!(run.tasks.iter().all(|t| t.stats.deadline_misses == 0));
}

#[test]
fn a_polling_server_may_drop_a_budget_just_before_its_work_arrives() {
    // s1 (polling 3/5 below s0, polling 1/5) responds in 3 + 1 = 4 ≤ 5: Γ(5, 3), but at 5 its
    // subtree is idle and the budget is gone; t2, released at 6, waits for the next period,
    // behind s0's task at 10: it completes at 12 (response 6). The supply is Γ(5, 3) delayed by
    // Θ = 3: blackout 2·(5 − 3) + 3 = 7, so t2's bound is 7 + 1 = 8.
    let text = "[scheduler]\nkind = \"fp\"\n[run]\nhorizon_ms = 40\n\
        [[scheduler.server]]\nname = \"s0\"\nkind = \"polling\"\nbudget_ms = 1\nperiod_ms = 5\npriority = 0\n\
        [[scheduler.server]]\nname = \"s1\"\nkind = \"polling\"\nbudget_ms = 3\nperiod_ms = 5\npriority = 1\n\
        [[task]]\nname = \"t0\"\nwcet_ms = 1\nperiod_ms = 10\npriority = 0\nserver = \"s0\"\n\
        [[task]]\nname = \"t2\"\nwcet_ms = 1\nperiod_ms = 10\noffset_ms = 6\npriority = 1\nserver = \"s1\"\n";
    let s = load(text);
    let r = analyze(&s);
    assert_eq!(server(&r, "s1").supply_blackout_ms, Some(7.0));
    assert_eq!(r.task("t2").unwrap().response_time_ms, Some(8.0));
    let run = simulate(&s, SimOptions::default());
    assert_eq!(run.tasks[1].stats.max_response, Some(Nanos::from_ms(6)));
}

/// A top server: deferrable?, budget, period, children (budget, period).
type Top = (bool, u32, u32, Vec<(u32, u32)>);
/// A leaf: EDF policy?, tasks (wcet, period, offset).
type Leaf = (bool, Vec<(u32, u32, u32)>);

/// A random tree: up to three top servers under an fp root, the first possibly with two
/// children; one or two tasks per leaf.
#[derive(Clone, Debug)]
struct Tree {
    tops: Vec<Top>,
    /// In leaf order.
    leaves: Vec<Leaf>,
}

impl Tree {
    fn text(&self) -> String {
        // Children may reserve more than their parent holds: the analysis must clear only
        // tasks that never miss there too, so admission is off.
        let mut s = String::from("[scheduler]\nkind = \"fp\"\novercommit = true\n");
        let mut leaves = Vec::new();
        let policy = |leaf: usize| if self.leaves[leaf].0 { "edf" } else { "fp" };
        for (k, (deferrable, budget, period, kids)) in self.tops.iter().enumerate() {
            let kind = if *deferrable { "deferrable" } else { "polling" };
            let own = if kids.is_empty() { policy(leaves.len()) } else { "fp" };
            s += &format!(
                "[[scheduler.server]]\nname = \"s{k}\"\nkind = \"{kind}\"\nbudget_ms = {budget}\nperiod_ms = {period}\npriority = {k}\npolicy = \"{own}\"\n"
            );
            if kids.is_empty() {
                leaves.push(format!("s{k}"));
            }
            for (c, (b, p)) in kids.iter().enumerate() {
                let kind = if (c + k) % 2 == 0 { "polling" } else { "deferrable" };
                s += &format!(
                    "[[scheduler.server]]\nname = \"s{k}c{c}\"\nparent = \"s{k}\"\nkind = \"{kind}\"\nbudget_ms = {b}\nperiod_ms = {p}\npriority = {c}\npolicy = \"{}\"\n",
                    policy(leaves.len())
                );
                leaves.push(format!("s{k}c{c}"));
            }
        }
        let mut n = 0;
        for (leaf, (_, tasks)) in leaves.iter().zip(&self.leaves) {
            for &(c, t, o) in tasks {
                s += &format!(
                    "[[task]]\nname = \"t{n}\"\nwcet_ms = {c}\nperiod_ms = {t}\noffset_ms = {}\npriority = {n}\nserver = \"{leaf}\"\n",
                    o % t
                );
                n += 1;
            }
        }
        s
    }
}

fn tree() -> impl Strategy<Value = Tree> {
    let periods = || prop::sample::select(vec![5u32, 10, 20, 40]);
    let top = (any::<bool>(), 1u32..=4, periods(), prop::collection::vec((1u32..=3, periods()), 0..=2))
        .prop_map(|(d, b, p, kids)| (d, b.min(p), p, kids.into_iter().map(|(b, q)| (b.min(q), q)).collect::<Vec<_>>()));
    let task = (1u32..=3, prop::sample::select(vec![10u32, 20, 40, 80]), 0u32..80);
    (prop::collection::vec(top, 1..=3), prop::collection::vec((any::<bool>(), prop::collection::vec(task, 1..=2)), 6)).prop_map(
        |(mut tops, leaves)| {
            // Children only under the first server (one or two levels).
            for t in tops.iter_mut().skip(1) {
                t.3.clear();
            }
            Tree { tops, leaves }
        },
    )
}

proptest! {
    // Every task the analysis clears meets every deadline in simulation, and responds within
    // its bound (horizon 400 ms: many periods of every server and task).
    #![proptest_config(cases(300))]
    #[test]
    fn cleared_tasks_in_random_server_trees_never_miss(t in tree()) {
        let text = format!("[run]\nhorizon_ms = 400\n{}", t.text());
        let s = load(&text);
        let report = analyze(&s);
        let run = simulate(&s, SimOptions { record_jobs: true, record_segments: false, check_invariants: true });
        for j in &run.jobs {
            let a = &report.tasks[j.task as usize];
            if a.schedulable != Some(true) {
                continue;
            }
            match (j.response(), a.response_time_ms) {
                (Some(r), Some(bound)) => prop_assert!(r <= Nanos::try_from_ms_f64(bound).unwrap(), "task {} job {}: {:?} > {} ms\n{}", a.name, j.index, r, bound, text),
                (Some(r), None) => prop_assert!(j.release + r <= j.abs_deadline, "task {} job {} late\n{}", a.name, j.index, text),
                (None, _) => prop_assert!(j.abs_deadline >= s.horizon, "task {} job {} unfinished past its deadline\n{}", a.name, j.index, text),
            }
        }
        // Servers cleared for their whole budget get it in every period they are busy through
        // is checked by the tasks above; at least one verdict is given per CPU.
        prop_assert_eq!(report.tests.len(), 1);
    }
}

#[test]
fn resources_inside_a_hierarchy_are_listed_but_not_analysed() {
    let text = "[scheduler]\nkind = \"fp\"\n[[resource]]\nname = \"m\"\nprotocol = \"pip\"\n\
        [[scheduler.server]]\nname = \"s\"\nkind = \"deferrable\"\nbudget_ms = 5\nperiod_ms = 10\npriority = 0\n\
        [[task]]\nname = \"a\"\npriority = 0\nperiod_ms = 20\nserver = \"s\"\nprogram = [{ lock = \"m\" }, { compute_ms = 1 }, { unlock = \"m\" }]\n";
    let r = analyze(&load(text));
    assert_eq!(server(&r, "s").verdict, Verdict::Schedulable);
    let res = r.resources.as_ref().unwrap();
    assert_eq!(res.tasks[0].blocking_ms, None);
    assert!(res.tasks[0].note.starts_with("not analysed: shared resources in a scheduler hierarchy"));
    assert_eq!(r.task("a").unwrap().schedulable, None);
    assert_eq!(r.verdict, Verdict::Unknown);
}

#[test]
fn servers_with_task_policies_count_as_work_and_say_what_they_leave_undecided() {
    let path = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/servers-mc2-composed.toml");
    let r = analyze(&load(&std::fs::read_to_string(&path).unwrap()));
    let task = |name: &str| r.tasks.iter().find(|t| t.name == name).unwrap();
    // Level B's partitioned rate-monotonic tasks are analysed on their CPU below level A's
    // table tasks there: fusion 3 + nav 2 = 5 ms on CPU 0, control 2 + attitude 1 = 3 ms on
    // CPU 1.
    assert_eq!((task("fusion").response_time_ms, task("control").response_time_ms), (Some(5.0), Some(3.0)));
    // The table, global EDF and global FP tasks are left undecided, on every CPU they run on.
    for cpu in [0, 1] {
        let test = r.tests.iter().find(|t| t.name == "hierarchy" && t.cpu == Some(cpu)).unwrap();
        assert_eq!(test.verdict, Verdict::Unknown, "{}", test.detail);
        for what in ["planner (global EDF inside a level is not analysed)", "logger (global fixed priority inside a level is not analysed)"]
        {
            assert!(test.detail.contains(what), "CPU {cpu}: {}", test.detail);
        }
        let table_task = if cpu == 0 { "nav" } else { "attitude" };
        assert!(test.detail.contains(&format!("{table_task} (a cyclic table inside a level is not analysed)")), "{}", test.detail);
    }
}

#[test]
fn the_server_table_shows_each_servers_memory_reservation() {
    let path = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/servers-hires-fig6.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    let plain = analyze(&load(&text));
    assert!(plain.servers.as_ref().unwrap().iter().all(|s| s.memory_reserved_mb.is_none() && s.memory_kind.is_none()));
    assert!(!plain.to_json().contains("memory_reserved_mb"), "no reservation, no key");
    // rt10 reserves 8 MiB hard, rt20 4 MiB soft (no [memory]: admitted against an unbounded machine).
    let reserved = text
        .replace("name = \"rt10\"\n", "name = \"rt10\"\nreserve = { memory_mib = 8 }\n")
        .replace("name = \"rt20\"\n", "name = \"rt20\"\nreserve = { memory_mib = 4, kind = \"soft\" }\n");
    let r = analyze(&load(&reserved));
    assert_eq!((server(&r, "rt10").memory_reserved_mb, server(&r, "rt10").memory_kind), (Some(8.0), Some("hard")));
    assert_eq!((server(&r, "rt20").memory_reserved_mb, server(&r, "rt20").memory_kind), (Some(4.0), Some("soft")));
    assert_eq!((server(&r, "web").memory_reserved_mb, server(&r, "web").memory_kind), (None, None));
    assert!(r.to_json().contains("\"memory_reserved_mb\":8.0,\"memory_kind\":\"hard\""));
}
