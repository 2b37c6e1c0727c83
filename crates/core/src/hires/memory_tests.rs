use super::*;
use crate::hires::{Kind, ResId, Spec, Update};
use proptest::prelude::*;

const PAGE: u64 = 4096;
const ROOT: SubsystemId = ReservationTree::ROOT;

fn reserve(memory: &mut HierMemory, holder: SubsystemId, kind: Kind, bytes: u64) -> Result<ResId, Refusal> {
    memory.change_reservations(|tree| {
        let res = tree.create(holder, kind, Family::Memory)?;
        tree.bind(res, Spec::Memory { bytes })?;
        Ok(res)
    })
}

fn add(memory: &mut HierMemory, name: &str, parent: SubsystemId) -> SubsystemId {
    memory.change_reservations(|tree| tree.add_subsystem(name, parent)).unwrap()
}

/// A machine of `frames` pages with a chain root → a → b → c, each bound `pages` pages hard.
fn chain(frames: u64, pages: [u64; 3]) -> (HierMemory, [SubsystemId; 3]) {
    let mut memory = HierMemory::new(ReservationTree::new(1, frames * PAGE, 0), PAGE).unwrap();
    let a = add(&mut memory, "a", ROOT);
    let b = add(&mut memory, "b", a);
    let c = add(&mut memory, "c", b);
    for (id, pages) in [a, b, c].into_iter().zip(pages) {
        reserve(&mut memory, id, Kind::Hard, pages * PAGE).unwrap();
    }
    (memory, [a, b, c])
}

#[test]
fn an_alias_past_the_bound_is_refused_and_says_what_to_bind() {
    let (mut memory, [a, ..]) = chain(16, [2, 1, 0]);
    for page in 0..3 {
        memory.allocate(page * PAGE).unwrap();
    }
    memory.alias(ROOT, 0, a, 0x10000).unwrap();
    memory.alias(ROOT, PAGE, a, 0x11000).unwrap();
    let refused = memory.alias(ROOT, 2 * PAGE, a, 0x12000).unwrap_err();
    assert_eq!(
        refused.to_string(),
        "a would hold 3 pages, more than the 2 its memory reservations bind (8192 bytes); bind more memory to a or remove one of its aliases first"
    );
    assert_eq!(memory.frame_at(a, 0x12000), None, "nothing changed");
    // The same frame again at another address holds no more memory.
    memory.alias(ROOT, 0, a, 0x12000).unwrap();
    assert_eq!(memory.pages_held(a), PagesHeld { frames: 2, aliases: 3 });
    // A bound of part of a page binds no page.
    reserve(&mut memory, a, Kind::Soft, PAGE - 1).unwrap();
    assert_eq!(memory.bound_pages(a), 2);
    memory.check().unwrap();
}

#[test]
fn refusals_name_what_is_wrong() {
    let (mut memory, [a, b, _]) = chain(4, [2, 1, 0]);
    memory.allocate(0).unwrap();
    let cases = [
        (
            memory.clone().alias(ROOT, 0, b, 0).map(drop),
            "b is not a child of root: a parent aliases into and removes from its direct children only",
        ),
        (memory.clone().alias(ROOT, PAGE, a, 0).map(drop), "root holds no page at 0x1000; name an address it maps"),
        (memory.clone().alias(ROOT, 1, a, 0).map(drop), "address 0x1 is not a multiple of the 4096-byte page; give a page-aligned address"),
        (memory.clone().remove(ROOT, a, 0).map(drop), "a holds no page at 0x0; name an address it maps"),
        (
            memory.clone().alias(a, 0, ROOT, 0).map(drop),
            "root is not a child of a: a parent aliases into and removes from its direct children only",
        ),
        (memory.clone().alias(ROOT, 0, SubsystemId(9), 0).map(drop), "no subsystem or reservation subsystem #9"),
    ];
    for (result, expected) in cases {
        assert_eq!(result.unwrap_err().to_string(), expected);
    }
    assert_eq!(
        memory.allocate(0).unwrap_err().to_string(),
        "root already maps a page at 0x0; remove that alias first or pick another address"
    );
    for page in 1..4 {
        memory.allocate(page * PAGE).unwrap();
    }
    assert_eq!(memory.allocate(4 * PAGE).unwrap_err().to_string(), "no free frame: all 4 are in use; free a page at the root first");
    assert_eq!(
        HierMemory::new(ReservationTree::new(1, PAGE, 0), 1000).unwrap_err().to_string(),
        "page_bytes = 1000: must be a power of two of at least 512"
    );
}

#[test]
fn remove_takes_back_every_alias_made_from_the_page_down_to_the_grandchildren() {
    let (mut memory, [a, b, c]) = chain(8, [3, 2, 1]);
    let frame = memory.allocate(0).unwrap();
    memory.allocate(PAGE).unwrap();
    memory.alias(ROOT, 0, a, 0).unwrap();
    memory.alias(ROOT, PAGE, a, PAGE).unwrap();
    memory.alias(a, 0, b, 0x5000).unwrap();
    memory.alias(a, 0, b, 0x6000).unwrap();
    memory.alias(b, 0x6000, c, 0x7000).unwrap();
    memory.alias(a, PAGE, b, PAGE).unwrap();
    assert_eq!(memory.frame_at(c, 0x7000), Some(frame));
    assert_eq!(memory.subtree_pages(a), PagesHeld { frames: 2, aliases: 6 });
    assert_eq!(memory.subtree_pages(b), PagesHeld { frames: 2, aliases: 4 });
    assert_eq!(memory.remove(ROOT, a, 0).unwrap(), 4, "a's alias, b's two made from it, and c's");
    assert_eq!(memory.mappings(b).collect::<Vec<_>>(), vec![(PAGE, memory.frame_at(ROOT, PAGE).unwrap())]);
    assert_eq!(memory.pages_held(c), PagesHeld::default());
    assert_eq!(memory.frame_at(ROOT, 0), Some(frame), "the root keeps its own page");
    assert_eq!(memory.free(PAGE).unwrap(), 2, "freeing a page removes its aliases");
    assert_eq!((memory.frames_in_use(), memory.free_frames()), (1, 7));
    memory.check().unwrap();
}

#[test]
fn siblings_share_a_frame_only_through_their_parent() {
    let mut memory = HierMemory::new(ReservationTree::new(1, 8 * PAGE, 0), PAGE).unwrap();
    let left = add(&mut memory, "left", ROOT);
    let right = add(&mut memory, "right", ROOT);
    for id in [left, right] {
        reserve(&mut memory, id, Kind::Hard, 2 * PAGE).unwrap();
    }
    let frame = memory.allocate(0).unwrap();
    assert_eq!(memory.alias(ROOT, 0, left, 0x1000).unwrap(), frame);
    assert_eq!(memory.alias(ROOT, 0, right, 0x2000).unwrap(), frame);
    assert!(matches!(memory.alias(left, 0x1000, right, 0x3000), Err(MemoryRefusal::NotAChild { .. })));
    assert_eq!(memory.subtree_pages(ROOT), PagesHeld { frames: 1, aliases: 2 });
    assert_eq!(memory.remove(ROOT, left, 0x1000).unwrap(), 1);
    assert_eq!(memory.frame_at(right, 0x2000), Some(frame), "the sibling's alias is its own");
}

#[test]
fn a_revoked_soft_reservation_removes_the_newest_aliases_down_the_subtree() {
    let mut memory = HierMemory::new(ReservationTree::new(1, 16 * PAGE, 0), PAGE).unwrap();
    let a = add(&mut memory, "a", ROOT);
    let b = add(&mut memory, "b", a);
    let ra = reserve(&mut memory, a, Kind::Soft, 4 * PAGE).unwrap();
    let rb = reserve(&mut memory, b, Kind::Soft, 3 * PAGE).unwrap();
    for page in 0..4 {
        memory.allocate(page * PAGE).unwrap();
        memory.alias(ROOT, page * PAGE, a, page * PAGE).unwrap();
    }
    for page in 0..3 {
        memory.alias(a, page * PAGE, b, page * PAGE).unwrap();
    }
    // a keeps 2 of its 4 pages: 1 was its own, the other comes out of b's 3 (the tree passes
    // the revocation on). a loses its two newest aliases, b the alias made from one of them.
    memory.change_reservations(|tree| tree.revoke(ra, 2 * PAGE)).unwrap();
    assert_eq!(memory.tree().bound(rb), Some(Spec::Memory { bytes: 2 * PAGE }));
    assert_eq!(memory.mappings(a).map(|(addr, _)| addr).collect::<Vec<_>>(), vec![0, PAGE]);
    assert_eq!(memory.mappings(b).map(|(addr, _)| addr).collect::<Vec<_>>(), vec![0, PAGE]);
    // b alone losing room loses its own newest alias.
    memory.change_reservations(|tree| tree.revoke(rb, PAGE)).unwrap();
    assert_eq!(memory.mappings(b).map(|(addr, _)| addr).collect::<Vec<_>>(), vec![0]);
    assert_eq!(memory.pages_held(a).frames, 2);
    memory.check().unwrap();
}

#[test]
fn deleting_a_reservation_empties_its_holder_and_everything_below() {
    let (mut memory, [a, b, c]) = chain(8, [3, 2, 1]);
    let ra = memory.tree().reservations_of(a).next().unwrap().0;
    memory.allocate(0).unwrap();
    memory.alias(ROOT, 0, a, 0).unwrap();
    memory.alias(a, 0, b, 0).unwrap();
    memory.alias(b, 0, c, 0).unwrap();
    memory.change_reservations(|tree| tree.delete(ra)).unwrap();
    assert_eq!(memory.wait(ra), Some(Update::Revoked));
    for id in [a, b, c] {
        assert_eq!((memory.bound_pages(id), memory.pages_held(id)), (0, PagesHeld::default()));
    }
    assert_eq!(memory.frames_in_use(), 1, "the root's page stays");
    memory.check().unwrap();
}

#[test]
fn an_allocator_that_is_not_the_roots_memory_is_refused() {
    let tree = ReservationTree::new(1, 8 * PAGE + 100, 0);
    let refused = HierMemory::with_allocator(tree.clone(), PAGE, FreeLists::new(9)).unwrap_err();
    assert_eq!(refused.to_string(), "the frame allocator manages 9 frames, 9 of them free; the root's memory needs exactly 8, all free");
    let memory = HierMemory::with_allocator(tree, PAGE, FreeLists::new(8)).unwrap();
    assert_eq!((memory.total_frames(), memory.free_frames()), (8, 8), "the root's memory in whole pages");
}

type MemoryState = (BTreeMap<MapId, Mapping>, Vec<Space>, u64);

impl HierMemory {
    fn wait(&mut self, res: ResId) -> Option<Update> {
        self.change_reservations(|tree| Ok(tree.wait(res))).unwrap()
    }

    /// Everything an operation may change: the reservations' bounds, and the memory.
    fn state(&self) -> (Vec<Option<Spec>>, MemoryState) {
        let bounds = self.tree.reservations.iter().map(|r| r.bound).collect();
        (bounds, (self.mappings.clone(), self.spaces.clone(), self.free_frames()))
    }

    /// `top` and every mapping made from it.
    fn made_from(&self, top: MapId) -> Vec<MapId> {
        let mut all = vec![top];
        let mut i = 0;
        while i < all.len() {
            all.extend(self.mappings[&all[i]].aliases.iter().copied());
            i += 1;
        }
        all
    }
}

/// One random request.
#[derive(Clone, Debug)]
enum Op {
    Add {
        parent: usize,
    },
    Reserve {
        holder: usize,
        soft: bool,
        bytes: u64,
    },
    Rebind {
        res: usize,
        bytes: u64,
    },
    Revoke {
        res: usize,
        keep_bytes: u64,
    },
    Delete {
        res: usize,
    },
    Allocate {
        page: u64,
    },
    Free {
        pick: usize,
    },
    /// Into subsystem `child` from its parent (or, `stray`, from some other subsystem).
    Alias {
        child: usize,
        pick: usize,
        child_page: u64,
        stray: Option<usize>,
        misaligned: bool,
    },
    Remove {
        child: usize,
        pick: usize,
        stray: Option<usize>,
    },
}

fn op() -> impl Strategy<Value = Op> {
    let stray = prop_oneof![6 => Just(None), 1 => (0..8usize).prop_map(Some)];
    prop_oneof![
        2 => (0..4usize).prop_map(|parent| Op::Add { parent }),
        // Mostly whole pages, some a part of a page more, so that rounding down is exercised.
        4 => (0..8usize, any::<bool>(), 0..7u64, prop_oneof![3 => Just(0), 1 => 1..PAGE])
            .prop_map(|(holder, soft, pages, part)| Op::Reserve { holder, soft, bytes: pages * PAGE + part }),
        1 => (0..16usize, 0..8 * PAGE).prop_map(|(res, bytes)| Op::Rebind { res, bytes }),
        2 => (0..16usize, 0..8 * PAGE).prop_map(|(res, keep_bytes)| Op::Revoke { res, keep_bytes }),
        1 => (0..16usize).prop_map(|res| Op::Delete { res }),
        3 => (0..24u64).prop_map(|page| Op::Allocate { page }),
        1 => (0..24usize).prop_map(|pick| Op::Free { pick }),
        10 => (0..8usize, 0..24usize, 0..12u64, stray.clone(), proptest::bool::weighted(0.05))
            .prop_map(|(child, pick, child_page, stray, misaligned)| Op::Alias { child, pick, child_page, stray, misaligned }),
        2 => (0..8usize, 0..24usize, stray).prop_map(|(child, pick, stray)| Op::Remove { child, pick, stray }),
    ]
}

/// The `pick`th address `id` maps, if it maps any.
fn nth_addr(memory: &HierMemory, id: SubsystemId, pick: usize) -> Option<u64> {
    let addrs: Vec<u64> = memory.mappings(id).map(|(addr, _)| addr).collect();
    (!addrs.is_empty()).then(|| addrs[pick % addrs.len()])
}

/// Runs `op`, drawing subsystems counted from the newest (deep trees) and addresses from
/// what is mapped; the mappings an accepted `remove` or `free` must have taken away.
fn apply(
    memory: &mut HierMemory,
    subsystems: &mut Vec<SubsystemId>,
    reservations: &mut Vec<ResId>,
    step: usize,
    op: &Op,
) -> (Result<(), MemoryRefusal>, Vec<MapId>) {
    let newest = |i: usize| subsystems[subsystems.len() - 1 - i % subsystems.len()];
    let res_of = |i: usize| reservations.get(i % reservations.len().max(1)).copied();
    let mut gone = Vec::new();
    let result = match *op {
        Op::Add { parent } => {
            let parent = newest(parent);
            memory
                .change_reservations(|tree| tree.add_subsystem(&format!("s{step}"), parent))
                .map(|id| subsystems.push(id))
                .map_err(Into::into)
        }
        Op::Reserve { holder, soft, bytes } => {
            let kind = if soft { Kind::Soft } else { Kind::Hard };
            let holder = newest(holder);
            memory
                .change_reservations(|tree| {
                    let res = tree.create(holder, kind, Family::Memory)?;
                    reservations.push(res);
                    tree.bind(res, Spec::Memory { bytes })
                })
                .map_err(Into::into)
        }
        Op::Rebind { res, bytes } => match res_of(res) {
            Some(res) => memory.change_reservations(|tree| tree.bind(res, Spec::Memory { bytes })).map_err(Into::into),
            None => Ok(()),
        },
        Op::Revoke { res, keep_bytes } => match res_of(res) {
            Some(res) => memory.change_reservations(|tree| tree.revoke(res, keep_bytes)).map_err(Into::into),
            None => Ok(()),
        },
        Op::Delete { res } => match res_of(res) {
            Some(res) => memory.change_reservations(|tree| tree.delete(res)).map_err(Into::into),
            None => Ok(()),
        },
        Op::Allocate { page } => memory.allocate(page * PAGE).map(drop),
        Op::Free { pick } => {
            let addr = nth_addr(memory, ROOT, pick).unwrap_or(pick as u64 * PAGE);
            if let Some(&id) = memory.spaces[ROOT.0].by_addr.get(&addr) {
                gone = memory.made_from(id);
            }
            memory.free(addr).map(|removed| assert_eq!(removed + 1, gone.len() as u64))
        }
        Op::Alias { child, pick, child_page, stray, misaligned } => {
            // Into a subsystem with memory bound to it where there is one.
            let bound: Vec<SubsystemId> = subsystems[1..].iter().copied().filter(|&s| memory.bound_pages(s) > 0).collect();
            let child = if bound.is_empty() { newest(child) } else { bound[child % bound.len()] };
            let parent = stray.map(newest).or(memory.tree.parent(child)).unwrap_or(ROOT);
            let parent_addr = nth_addr(memory, parent, pick).unwrap_or(pick as u64 * PAGE) + u64::from(misaligned);
            let child_addr = child_page * PAGE;
            memory.alias(parent, parent_addr, child, child_addr).map(|frame| {
                assert_eq!(memory.frame_at(child, child_addr), Some(frame));
                assert_eq!(memory.frame_at(parent, parent_addr), Some(frame));
            })
        }
        Op::Remove { child, pick, stray } => {
            let child = newest(child);
            let parent = stray.map(newest).or(memory.tree.parent(child)).unwrap_or(ROOT);
            let child_addr = nth_addr(memory, child, pick).unwrap_or(0);
            if let Some(&id) = memory.spaces[child.0].by_addr.get(&child_addr) {
                gone = memory.made_from(id);
            }
            memory.remove(parent, child, child_addr).map(|removed| assert_eq!(removed, gone.len() as u64))
        }
    };
    if result.is_err() {
        gone.clear();
    }
    (result, gone)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    /// Whatever is asked, in any order: every invariant holds; no subtree holds more distinct
    /// frames than is bound to its top; `remove` and `free` leave no alias made from what they
    /// took; a refused request changes nothing; and freeing everything at the end gives every
    /// frame back.
    #[test]
    fn aliases_stay_within_what_is_bound_and_frames_are_conserved(ops in proptest::collection::vec(op(), 1..120)) {
        let mut memory = HierMemory::new(ReservationTree::new(1, 16 * PAGE, 0), PAGE).unwrap();
        let mut subsystems = vec![ROOT];
        let mut reservations = Vec::new();
        for (step, op) in ops.iter().enumerate() {
            let before = memory.state();
            let (result, gone) = apply(&mut memory, &mut subsystems, &mut reservations, step, op);
            let context = format!("step {step}, {op:?} ({result:?})");
            if let Err(e) = memory.check() {
                return Err(TestCaseError::fail(format!("{context}: {e}")));
            }
            if result.is_err() {
                // A reservation created before its bind was refused stays, empty.
                let (bounds, after) = memory.state();
                prop_assert!(bounds[..before.0.len()] == before.0[..] && after == before.1, "{}: a refused request changed something", context);
            }
            for id in gone {
                prop_assert!(!memory.mappings.contains_key(&id), "{}: an alias made from a removed page is left", context);
            }
            for &id in &subsystems {
                let held = memory.subtree_pages(id).frames;
                prop_assert!(held <= memory.bound_pages(id), "{}: {} holds {} frames below it, beyond its bound", context, memory.tree.name(id), held);
            }
        }
        let roots: Vec<u64> = memory.mappings(ROOT).map(|(addr, _)| addr).collect();
        for addr in roots {
            memory.free(addr).unwrap();
        }
        prop_assert!(memory.mappings.is_empty() && memory.spaces.iter().all(|s| *s == Space::default()));
        prop_assert_eq!(memory.free_frames(), u64::from(memory.total_frames()));
        memory.check().unwrap();
    }

    /// Deleting every reservation leaves nothing mapped below the root, and the root's pages
    /// where they were.
    #[test]
    fn deleting_every_reservation_empties_every_subsystem(ops in proptest::collection::vec(op(), 1..60)) {
        let mut memory = HierMemory::new(ReservationTree::new(1, 16 * PAGE, 0), PAGE).unwrap();
        let mut subsystems = vec![ROOT];
        let mut reservations = Vec::new();
        for (step, op) in ops.iter().enumerate() {
            let _ = apply(&mut memory, &mut subsystems, &mut reservations, step, op);
        }
        let root_pages: Vec<(u64, u32)> = memory.mappings(ROOT).collect();
        for res in reservations {
            let _ = memory.change_reservations(|tree| tree.delete(res));
        }
        for &id in &subsystems[1..] {
            prop_assert_eq!(memory.pages_held(id), PagesHeld::default());
        }
        prop_assert_eq!(memory.mappings(ROOT).collect::<Vec<_>>(), root_pages);
        memory.check().unwrap();
    }
}
