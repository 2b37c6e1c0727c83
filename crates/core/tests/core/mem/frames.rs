//! The frame allocator seam: the default allocator hands out exactly the frames per-pool FIFO
//! free lists do and conserves them, and the memory model's invariant check catches an
//! allocator that loses, doubles or miscounts a frame.

use super::*;

use critmem_core::mem::frames::GLOBAL_POOL;
use proptest::collection::vec;
use proptest::prelude::*;
use std::collections::VecDeque;

/// Per-pool FIFO queues of free frames, the machine starting with every frame free in the
/// global pool in index order: what the default allocator must reproduce frame for frame.
#[derive(Debug)]
struct Model {
    free: Vec<VecDeque<u32>>,
}

impl Model {
    fn new(total: u32) -> Model {
        Model { free: vec![(0..total).collect()] }
    }

    fn add_pool(&mut self, pool: u32) {
        assert_eq!(pool as usize, self.free.len(), "pools are added in index order");
        self.free.push(VecDeque::new());
    }

    fn take(&mut self, pool: u32) -> Option<u32> {
        self.free[pool as usize].pop_front()
    }

    fn give_back(&mut self, pool: u32, f: u32) {
        self.free[pool as usize].push_back(f);
    }
}

/// Whether `a` says exactly what `model` says: per pool the same free count, per frame the
/// same pool (or taken), and a clean self-check.
fn agree<A: FrameAllocator>(a: &A, model: &Model) -> Result<(), String> {
    a.check()?;
    let mut pool_of = vec![None; a.total_frames() as usize];
    for (p, q) in model.free.iter().enumerate() {
        if a.free_frames(p as u32) != q.len() as u64 {
            return Err(format!("pool {p}: {} free frames, the model has {}", a.free_frames(p as u32), q.len()));
        }
        for &f in q {
            pool_of[f as usize] = Some(p as u32);
        }
    }
    for (f, want) in pool_of.into_iter().enumerate() {
        let got = a.free_pool_of(f as u32);
        if got != want {
            return Err(format!("frame {f}: free in {got:?}, the model says {want:?}"));
        }
    }
    Ok(())
}

#[derive(Clone, Debug)]
enum Op {
    AddPool,
    /// Take from the pool `n % pools`.
    Take(u32),
    /// Give the taken frame `i % taken` back to the pool `p % pools`.
    GiveBack(u32, u32),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        1 => Just(Op::AddPool),
        4 => any::<u32>().prop_map(Op::Take),
        4 => (any::<u32>(), any::<u32>()).prop_map(|(i, p)| Op::GiveBack(i, p)),
    ]
}

proptest! {
    #![proptest_config(common::seeded_config("frames", 256))]

    #[test]
    fn free_lists_hand_out_the_frames_fifo_free_lists_would_and_conserve_them(total in 1u32..48, ops in vec(op(), 0..300)) {
        let mut a = FreeLists::new(total);
        let mut model = Model::new(total);
        let mut taken: Vec<u32> = Vec::new();
        let mut pools = 1u32;
        for (step, op) in ops.into_iter().enumerate() {
            match op {
                Op::AddPool => {
                    if pools < 6 {
                        a.add_pool(pools);
                        model.add_pool(pools);
                        pools += 1;
                    }
                }
                Op::Take(n) => {
                    let p = n % pools;
                    let got = a.take(FrameRequest::from_pool(p));
                    prop_assert_eq!(got, model.take(p), "step {}: take from pool {}", step, p);
                    taken.extend(got);
                }
                Op::GiveBack(i, n) => {
                    if !taken.is_empty() {
                        let f = taken.swap_remove(i as usize % taken.len());
                        a.give_back(n % pools, f);
                        model.give_back(n % pools, f);
                    }
                }
            }
            agree(&a, &model).map_err(|e| TestCaseError::fail(format!("step {step}: {e}")))?;
            let free: u64 = (0..pools).map(|p| a.free_frames(p)).sum();
            prop_assert_eq!(free + taken.len() as u64, u64::from(total), "step {}: frames not conserved", step);
        }
    }
}

/// One call the memory model made on its allocator.
#[derive(Clone, Debug)]
enum Call {
    AddPool(u32),
    Take(u32, Option<u32>),
    GiveBack(u32, u32),
}

/// The default allocator, with a log of every call the memory model makes on it.
#[derive(Clone, Debug)]
struct Recording {
    inner: FreeLists,
    calls: Vec<Call>,
}

impl FrameAllocator for Recording {
    fn total_frames(&self) -> u32 {
        self.inner.total_frames()
    }
    fn add_pool(&mut self, pool: u32) {
        self.calls.push(Call::AddPool(pool));
        self.inner.add_pool(pool);
    }
    fn take(&mut self, req: FrameRequest) -> Option<u32> {
        let got = self.inner.take(req);
        self.calls.push(Call::Take(req.pool, got));
        got
    }
    fn give_back(&mut self, pool: u32, f: u32) {
        self.calls.push(Call::GiveBack(pool, f));
        self.inner.give_back(pool, f);
    }
    fn free_frames(&self, pool: u32) -> u64 {
        self.inner.free_frames(pool)
    }
    fn free_pool_of(&self, f: u32) -> Option<u32> {
        self.inner.free_pool_of(f)
    }
    fn check(&self) -> Result<(), String> {
        self.inner.check()
    }
}

#[test]
fn the_memory_model_gets_the_frames_fifo_free_lists_would_hand_out() {
    let (mut takes, mut reservation_takes, mut give_backs) = (0u64, 0u64, 0u64);
    for seed in 0..48 {
        let (_, m) = props::scenario_on(seed, |cfg, dev| {
            let frames = cfg.total_frames;
            Memory::with_allocator(cfg, dev, Recording { inner: FreeLists::new(frames), calls: Vec::new() }).unwrap()
        });
        let rec = m.frame_allocator();
        let mut model = Model::new(rec.total_frames());
        for (i, call) in rec.calls.iter().enumerate() {
            match *call {
                Call::AddPool(p) => model.add_pool(p),
                Call::Take(p, got) => {
                    assert_eq!(got, model.take(p), "seed {seed}, call {i}: take from pool {p}");
                    takes += 1;
                    reservation_takes += u64::from(p != GLOBAL_POOL && got.is_some());
                }
                Call::GiveBack(p, f) => {
                    model.give_back(p, f);
                    give_backs += 1;
                }
            }
        }
        agree(&rec.inner, &model).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
    }
    assert!(
        takes > 0 && reservation_takes > 0 && give_backs > 0,
        "{takes} takes ({reservation_takes} from reservations), {give_backs} give-backs"
    );
}

/// How a [`Faulty`] allocator goes wrong once it has served `strike_at` takes and give-backs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fault {
    /// Never: the control.
    Never,
    /// Drops a frame given back.
    Loses,
    /// Hands out a frame and keeps it free too.
    Doubles,
    /// Counts one free global frame too many.
    Miscounts,
}

#[derive(Clone, Debug)]
struct Faulty {
    inner: FreeLists,
    fault: Fault,
    strike_at: u32,
    calls: u32,
    struck: bool,
}

impl Faulty {
    fn strikes(&mut self, fault: Fault) -> bool {
        self.calls += 1;
        let now = self.fault == fault && !self.struck && self.calls > self.strike_at;
        self.struck |= now;
        now
    }
}

impl FrameAllocator for Faulty {
    fn total_frames(&self) -> u32 {
        self.inner.total_frames()
    }
    fn add_pool(&mut self, pool: u32) {
        self.inner.add_pool(pool);
    }
    fn take(&mut self, req: FrameRequest) -> Option<u32> {
        let f = self.inner.take(req)?;
        if self.strikes(Fault::Doubles) {
            self.inner.give_back(req.pool, f);
        }
        Some(f)
    }
    fn give_back(&mut self, pool: u32, f: u32) {
        if !self.strikes(Fault::Loses) {
            self.inner.give_back(pool, f);
        }
    }
    fn free_frames(&self, pool: u32) -> u64 {
        let extra = self.fault == Fault::Miscounts && self.calls > self.strike_at && pool == GLOBAL_POOL;
        self.inner.free_frames(pool) + u64::from(extra)
    }
    fn free_pool_of(&self, f: u32) -> Option<u32> {
        self.inner.free_pool_of(f)
    }
    fn check(&self) -> Result<(), String> {
        self.inner.check()
    }
}

/// Runs a workload that takes and gives back frames of the global pool and of a hard
/// reservation (faults, discards, an exit) on an allocator with `fault`, checking every
/// invariant after each operation; returns the first violation.
fn first_violation(fault: Fault, strike_at: u32) -> Option<String> {
    let cfg = MemConfig { readahead_pages: 1, check_every_operation: false, ..MemConfig::with_frames(40) };
    let alloc = Faulty { inner: FreeLists::new(40), fault, strike_at, calls: 0, struck: false };
    let mut m = Memory::with_allocator(cfg, DeviceSpec::slow_ssd(), alloc).unwrap();
    let r = res(&mut m, "r", 8, ReservationKind::Hard);
    let reserved = m.create_space("reserved", Some(r)).unwrap();
    let global = m.create_space("global", None).unwrap();
    let (_, vr) = m.map_private(reserved, "p", 12).unwrap();
    let (_, vg) = m.map_private(global, "p", 12).unwrap();
    let mut t = Nanos::ZERO;
    for round in 0..6u32 {
        for (s, v) in [(reserved, vr), (global, vg)] {
            for i in 0..12 {
                t += Nanos(1_000);
                if let Access::Major { ready_at, .. } = wr(&mut m, t, s, v.offset(i)) {
                    t = ready_at;
                }
                if let Err(e) = m.check_invariants() {
                    return Some(e);
                }
            }
            for i in (round % 3..12).step_by(3) {
                m.discard(s, v.offset(i)).unwrap();
                if let Err(e) = m.check_invariants() {
                    return Some(e);
                }
            }
        }
    }
    m.exit_space(t, reserved).unwrap();
    m.check_invariants().err()
}

#[test]
fn the_invariant_check_catches_an_allocator_that_loses_doubles_or_miscounts_a_frame() {
    assert_eq!(first_violation(Fault::Never, 0), None, "a sound allocator passes");
    // Setting up the reservation takes 8 frames and gives them to it (16 calls): strike after.
    for strike_at in [16, 21, 40] {
        let lost = first_violation(Fault::Loses, strike_at).expect("a lost frame is caught");
        assert!(lost.contains("(lost)"), "{lost}");
        let doubled = first_violation(Fault::Doubles, strike_at).expect("a doubled frame is caught");
        assert!(doubled.contains("holds a page"), "{doubled}");
        let miscounted = first_violation(Fault::Miscounts, strike_at).expect("a miscount is caught");
        assert!(miscounted.contains("the frame allocator counts"), "{miscounted}");
    }
}

#[test]
fn a_machine_refuses_an_allocator_that_does_not_start_with_all_its_frames_free_in_the_global_pool() {
    let wrong_size = Memory::with_allocator(MemConfig::with_frames(32), DeviceSpec::slow_ssd(), FreeLists::new(31)).unwrap_err();
    assert!(matches!(&wrong_size, MemError::InvalidConfig(m) if m.contains("manages 31 frames")), "{wrong_size}");
    let mut taken = FreeLists::new(32);
    taken.take(FrameRequest::from_pool(GLOBAL_POOL));
    let not_all_free = Memory::with_allocator(MemConfig::with_frames(32), DeviceSpec::slow_ssd(), taken).unwrap_err();
    assert!(matches!(&not_all_free, MemError::InvalidConfig(m) if m.contains("31 of them free")), "{not_all_free}");
    assert!(Memory::with_allocator(MemConfig::with_frames(32), DeviceSpec::slow_ssd(), FreeLists::new(32)).is_ok());
}
