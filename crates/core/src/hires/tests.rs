use super::*;
use proptest::prelude::*;

const MIB: u64 = 1 << 20;

fn cpu(budget_ms: u64, period_ms: u64) -> Spec {
    Spec::Cpu { budget_ns: budget_ms * 1_000_000, period_ns: period_ms * 1_000_000 }
}

fn reserve(tree: &mut ReservationTree, holder: SubsystemId, kind: Kind, spec: Spec) -> Result<ResId, Refusal> {
    let res = tree.create(holder, kind, spec.family())?;
    tree.bind(res, spec)?;
    Ok(res)
}

#[test]
fn the_fig6_servers_fit_one_cpu_and_one_more_tenth_does_not() {
    let mut tree = ReservationTree::new(1, 0, 0);
    for (name, budget, period) in [("web", 4, 8), ("rt25", 4, 25), ("rt20", 3, 20), ("rt10", 1, 10)] {
        let id = tree.add_subsystem(name, ReservationTree::ROOT).unwrap();
        reserve(&mut tree, id, Kind::Hard, cpu(budget, period)).unwrap();
    }
    // 0.5 + 0.16 + 0.15 + 0.1 = 0.91 of the CPU.
    assert_eq!(tree.holding(ReservationTree::ROOT, Family::Cpu).hard_out, 91 * CPU_PARTS / 100);
    let late = tree.add_subsystem("late", ReservationTree::ROOT).unwrap();
    let refused = reserve(&mut tree, late, Kind::Hard, cpu(1, 10)).unwrap_err();
    assert_eq!(
        refused.to_string(),
        "cpu hard reservation of 0.1000 CPU does not fit in root: 0.0900 CPU left of its 1.0000 CPU (hard holding minus overhead and hard reservations given)"
    );
    assert!(reserve(&mut tree, late, Kind::Hard, cpu(9, 100)).is_ok(), "exactly what is left fits");
}

#[test]
fn a_child_reserves_within_its_own_hard_holding_minus_its_overhead() {
    let mut tree = ReservationTree::new(2, 1024 * MIB, 0);
    let web = tree.add_subsystem("web", ReservationTree::ROOT).unwrap();
    reserve(&mut tree, web, Kind::Hard, cpu(4, 8)).unwrap();
    tree.set_overhead(web, Family::Cpu, CPU_PARTS / 10).unwrap();
    let worker = tree.add_subsystem("worker", web).unwrap();
    // 0.5 held, 0.1 overhead: 0.4 for its children.
    assert!(matches!(reserve(&mut tree, worker, Kind::Hard, cpu(41, 100)), Err(Refusal::DoesNotFit { .. })));
    reserve(&mut tree, worker, Kind::Hard, cpu(40, 100)).unwrap();
    // An overhead that would leave less than given out is refused.
    assert!(tree.set_overhead(web, Family::Cpu, CPU_PARTS / 5).is_err());
    // A soft reservation cannot come from nothing either: web holds no memory.
    assert!(reserve(&mut tree, worker, Kind::Soft, Spec::Memory { bytes: MIB }).is_err());
    tree.check().unwrap();
}

#[test]
fn a_revoked_soft_reservation_is_passed_down_to_the_leaves() {
    let mut tree = ReservationTree::new(1, 1000, 0);
    let a = tree.add_subsystem("a", ReservationTree::ROOT).unwrap();
    let b = tree.add_subsystem("b", a).unwrap();
    let c = tree.add_subsystem("c", b).unwrap();
    let ra = reserve(&mut tree, a, Kind::Soft, Spec::Memory { bytes: 600 }).unwrap();
    let rb = reserve(&mut tree, b, Kind::Soft, Spec::Memory { bytes: 500 }).unwrap();
    let rc = reserve(&mut tree, c, Kind::Soft, Spec::Memory { bytes: 400 }).unwrap();
    tree.revoke(ra, 200).unwrap();
    assert_eq!(tree.wait(ra), Some(Update::Reduced(Spec::Memory { bytes: 200 })));
    assert_eq!(tree.wait(rb), Some(Update::Reduced(Spec::Memory { bytes: 200 })), "a cannot give back 400 of its own");
    assert_eq!(tree.wait(rc), Some(Update::Reduced(Spec::Memory { bytes: 200 })), "nor can b");
    assert_eq!(tree.wait(rc), None);
    tree.revoke(ra, 0).unwrap();
    assert_eq!(tree.wait(rc), Some(Update::Revoked));
    assert_eq!(tree.bound(rc), None);
    tree.check().unwrap();
}

#[test]
fn a_revocation_stops_where_the_holder_can_give_back_what_it_keeps_for_itself() {
    let mut tree = ReservationTree::new(1, 1000, 0);
    let a = tree.add_subsystem("a", ReservationTree::ROOT).unwrap();
    let b = tree.add_subsystem("b", a).unwrap();
    let ra = reserve(&mut tree, a, Kind::Soft, Spec::Memory { bytes: 800 }).unwrap();
    let rb = reserve(&mut tree, b, Kind::Soft, Spec::Memory { bytes: 300 }).unwrap();
    tree.revoke(ra, 400).unwrap();
    assert_eq!(tree.wait(rb), None, "a kept 500 for itself, enough to give back 400");
    assert_eq!(tree.bound(rb), Some(Spec::Memory { bytes: 300 }));
}

#[test]
fn a_hard_reservation_takes_the_room_of_soft_ones_newest_first() {
    let mut tree = ReservationTree::new(1, 1000, 0);
    let old = tree.add_subsystem("old", ReservationTree::ROOT).unwrap();
    let new = tree.add_subsystem("new", ReservationTree::ROOT).unwrap();
    let hard = tree.add_subsystem("hard", ReservationTree::ROOT).unwrap();
    let r_old = reserve(&mut tree, old, Kind::Soft, Spec::Memory { bytes: 400 }).unwrap();
    let r_new = reserve(&mut tree, new, Kind::Soft, Spec::Memory { bytes: 400 }).unwrap();
    reserve(&mut tree, hard, Kind::Hard, Spec::Memory { bytes: 500 }).unwrap();
    assert_eq!(tree.wait(r_new), Some(Update::Reduced(Spec::Memory { bytes: 100 })));
    assert_eq!(tree.wait(r_old), None);
    assert!(reserve(&mut tree, hard, Kind::Soft, Spec::Memory { bytes: 101 }).is_err(), "no room left");
    tree.check().unwrap();
}

#[test]
fn deleting_a_hard_reservation_revokes_what_it_backed_down_the_subtree() {
    let mut tree = ReservationTree::new(1, 1000, 0);
    let a = tree.add_subsystem("a", ReservationTree::ROOT).unwrap();
    let b = tree.add_subsystem("b", a).unwrap();
    let c = tree.add_subsystem("c", b).unwrap();
    let ra = reserve(&mut tree, a, Kind::Hard, Spec::Memory { bytes: 600 }).unwrap();
    let rb = reserve(&mut tree, b, Kind::Hard, Spec::Memory { bytes: 400 }).unwrap();
    let rc = reserve(&mut tree, c, Kind::Hard, Spec::Memory { bytes: 300 }).unwrap();
    let rc_cpu = tree.create(c, Kind::Hard, Family::Cpu).unwrap();
    assert!(tree.bind(rc_cpu, cpu(1, 10)).is_err(), "b holds no CPU");
    tree.delete(ra).unwrap();
    for res in [ra, rb, rc] {
        assert_eq!(tree.wait(res), Some(Update::Revoked));
        assert_eq!(tree.bound(res), None);
    }
    assert!(tree.bind(ra, Spec::Memory { bytes: 1 }).is_err(), "a deleted reservation is gone");
    tree.check().unwrap();
}

#[test]
fn shrinking_a_hard_reservation_below_what_the_holder_passed_on_is_refused() {
    let mut tree = ReservationTree::new(1, 1000, 0);
    let a = tree.add_subsystem("a", ReservationTree::ROOT).unwrap();
    let b = tree.add_subsystem("b", a).unwrap();
    let ra = reserve(&mut tree, a, Kind::Hard, Spec::Memory { bytes: 600 }).unwrap();
    reserve(&mut tree, b, Kind::Hard, Spec::Memory { bytes: 400 }).unwrap();
    let refused = tree.bind(ra, Spec::Memory { bytes: 300 }).unwrap_err();
    assert!(matches!(refused, Refusal::ChildHoldsMore { .. }), "{refused}");
    assert_eq!(tree.bound(ra), Some(Spec::Memory { bytes: 600 }), "nothing changed");
    tree.bind(ra, Spec::Memory { bytes: 400 }).unwrap();
}

#[test]
fn bad_requests_are_refused_and_change_nothing() {
    let mut tree = ReservationTree::new(1, 1000, 0);
    let a = tree.add_subsystem("a", ReservationTree::ROOT).unwrap();
    assert!(tree.create(ReservationTree::ROOT, Kind::Hard, Family::Cpu).is_err(), "the root has no parent");
    assert!(tree.add_subsystem("a", ReservationTree::ROOT).is_err(), "names are unique");
    let res = tree.create(a, Kind::Hard, Family::Cpu).unwrap();
    assert!(tree.bind(res, Spec::Memory { bytes: 1 }).is_err(), "family mismatch");
    assert!(tree.bind(res, Spec::Cpu { budget_ns: 2, period_ns: 1 }).is_err(), "budget above period");
    assert!(tree.bind(res, Spec::Cpu { budget_ns: 0, period_ns: 0 }).is_err(), "no period");
    assert!(tree.revoke(res, 0).is_err(), "hard reservations are deleted, not revoked");
    assert_eq!(tree.bound(res), None);
}

/// One random request to the tree.
#[derive(Clone, Debug)]
enum Op {
    Add { parent: usize },
    Reserve { holder: usize, soft: bool, family: usize, amount: u64 },
    Rebind { res: usize, amount: u64 },
    Revoke { res: usize, keep: u64 },
    Delete { res: usize },
    Overhead { id: usize, family: usize, amount: u64 },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        2 => (0..8usize).prop_map(|parent| Op::Add { parent }),
        // Mostly memory, so that chains of reservations of one family form.
        4 => (0..8usize, any::<bool>(), prop_oneof![4 => Just(1usize), 1 => Just(0usize), 1 => Just(2usize)], 0..400u64)
            .prop_map(|(holder, soft, family, amount)| Op::Reserve { holder, soft, family, amount }),
        1 => (0..24usize, 0..600u64).prop_map(|(res, amount)| Op::Rebind { res, amount }),
        2 => (0..24usize, 0..600u64).prop_map(|(res, keep)| Op::Revoke { res, keep }),
        1 => (0..24usize).prop_map(|res| Op::Delete { res }),
        1 => (0..8usize, 0..3usize, 0..100u64).prop_map(|(id, family, amount)| Op::Overhead { id, family, amount }),
    ]
}

/// `amount` as a spec of family `family` (CPU: thousandths of a CPU per 10 ms).
fn spec_of(family: Family, amount: u64) -> Spec {
    match family {
        Family::Cpu => Spec::Cpu { budget_ns: amount.min(1000) * 10_000, period_ns: 10_000_000 },
        Family::Memory => Spec::Memory { bytes: amount },
        Family::Io => Spec::Io { bytes_per_s: amount },
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    /// Whatever is asked, in any order: every subsystem's hard reservations given out fit its
    /// hard holding minus its overhead, and all it gives out fits all it holds — so a
    /// revocation anywhere has reached every leaf below — and a refused request changes
    /// nothing.
    #[test]
    fn every_subsystem_gives_out_no_more_than_it_holds(ops in proptest::collection::vec(op(), 1..60)) {
        let mut tree = ReservationTree::new(1, 1000, 1000);
        let mut subsystems = vec![ReservationTree::ROOT];
        let mut reservations: Vec<ResId> = Vec::new();
        for (step, op) in ops.into_iter().enumerate() {
            let bounds = |tree: &ReservationTree| -> Vec<Option<Spec>> { tree.reservations.iter().map(|r| r.bound).collect() };
            let before = bounds(&tree);
            let result = match op {
                Op::Add { parent } => {
                    // Counted from the newest: deep trees.
                    let parent = subsystems[subsystems.len() - 1 - parent % subsystems.len()];
                    tree.add_subsystem(&format!("s{step}"), parent).map(|id| subsystems.push(id))
                }
                Op::Reserve { holder, soft, family, amount } => {
                    let holder = subsystems[subsystems.len() - 1 - holder % subsystems.len()];
                    let kind = if soft { Kind::Soft } else { Kind::Hard };
                    let family = Family::ALL[family];
                    tree.create(holder, kind, family).and_then(|res| {
                        reservations.push(res);
                        tree.bind(res, spec_of(family, amount))
                    })
                }
                Op::Rebind { res, amount } if !reservations.is_empty() => {
                    let res = reservations[res % reservations.len()];
                    let family = tree.reservations[res.0].family;
                    tree.bind(res, spec_of(family, amount))
                }
                Op::Revoke { res, keep } if !reservations.is_empty() => tree.revoke(reservations[res % reservations.len()], keep),
                Op::Delete { res } if !reservations.is_empty() => tree.delete(reservations[res % reservations.len()]),
                Op::Overhead { id, family, amount } => tree.set_overhead(subsystems[id % subsystems.len()], Family::ALL[family], amount),
                _ => Ok(()),
            };
            if let Err(Refusal::DoesNotFit { .. } | Refusal::ChildHoldsMore { .. }) = &result {
                prop_assert_eq!(&bounds(&tree)[..before.len()], &before[..], "a refused request changed the tree");
            }
            if let Err(e) = tree.check() {
                return Err(TestCaseError::fail(format!("after {op:?} ({result:?}): {e}")));
            }
        }
    }
}
