//! Cost of the memory model's own operations: the shared-page paper's Table II, as time per
//! operation of the model's data structures (not kernel cycles).
//!
//! The clock is injected: critmem-core reads none. A front end passes a monotonic clock in
//! nanoseconds (the Python bindings pass `std::time::Instant`); the tests pass a counter, so
//! what is measured can be checked exactly.

use crate::mem::{DeviceSpec, MemConfig, MemError, Memory, RefKind, RegionKind, ResId, ReservationKind, ReservationSpec, SharePolicy, Vpn};
use crate::time::Nanos;

/// The three columns of the paper's Table II: global management (no reservation, the shared
/// region left to the global LRU), reservations without shared-page management (No-SP-Mgmt),
/// reservations with it (SPC). Each is (name, reserved, policy of the shared region).
pub const OP_COLUMNS: [(&str, bool, SharePolicy); 3] =
    [("global", false, SharePolicy::Global), ("reservation", true, SharePolicy::Private), ("spc", true, SharePolicy::Spc)];

/// The rows: allocate (first touch of a private anonymous page: zero-fill fault that takes a
/// frame and installs the entry), free (the frames of those pages released when their address
/// space exits), map (a second address space's first read of a resident shared page) and
/// unmap (that space exiting, which unmaps each shared page and undoes its charge).
pub const OP_ROWS: [&str; 4] = ["alloc", "free", "map", "unmap"];

/// Most pages one measurement may take (the machine it builds holds four times as many frames).
pub const MAX_OP_PAGES: u32 = 1 << 22;

/// Why a measurement could not be made.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum OpCostError {
    #[error("iterations must be at least 1 and pages from 1 to {MAX_OP_PAGES} (got iterations={iterations}, pages={pages})")]
    BadArguments { iterations: u32, pages: u32 },
    #[error(transparent)]
    Mem(#[from] MemError),
}

/// The median time per operation of one (row, column) cell of Table II.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct OpCost {
    /// One of [`OP_ROWS`].
    pub operation: &'static str,
    /// One of the names in [`OP_COLUMNS`].
    pub column: &'static str,
    pub ns_per_op: f64,
}

/// Nanoseconds per operation of each row (in [`OP_ROWS`] order) for `pages` operations, in one
/// fresh machine; `clock_ns` reads a monotonic clock.
pub fn time_ops_once(reserved: bool, policy: SharePolicy, pages: u32, clock_ns: &mut dyn FnMut() -> u64) -> Result<[f64; 4], MemError> {
    let frames = pages.saturating_mul(4).saturating_add(4096);
    let cfg = MemConfig { check_every_operation: false, ..MemConfig::with_frames(frames) };
    let mut mem = Memory::new(cfg, DeviceSpec::hdd())?;
    let t0 = Nanos::ZERO;
    let res = |mem: &mut Memory, name: &str| -> Result<Option<ResId>, MemError> {
        if !reserved {
            return Ok(None);
        }
        let spec = ReservationSpec { name: name.into(), pages: u64::from(pages) + 64, kind: ReservationKind::Hard };
        mem.create_reservation(t0, spec).map(Some)
    };
    let (ra, rb, rc) = (res(&mut mem, "a")?, res(&mut mem, "b")?, res(&mut mem, "c")?);
    let shm = mem.create_shared("shm", RegionKind::SharedAnon, pages, policy)?;
    let (a, b, c) = (mem.create_space("a", ra)?, mem.create_space("b", rb)?, mem.create_space("c", rc)?);
    let va = mem.map_shared(t0, a, shm, true)?;
    let vb = mem.map_shared(t0, b, shm, true)?;
    let (_, vc) = mem.map_private(c, "private", pages)?;
    // `a` brings the shared pages in (not timed): they are resident, owned by `a`'s pool.
    for i in 0..pages {
        mem.access(t0, a, va.offset(i), RefKind::Write)?;
    }
    let touch = |mem: &mut Memory, space, base: Vpn, kind| -> Result<(), MemError> {
        for i in 0..pages {
            std::hint::black_box(mem.access(t0, space, base.offset(i), kind)?);
        }
        Ok(())
    };
    let per_op = |start_ns: u64, end_ns: u64| end_ns.saturating_sub(start_ns) as f64 / f64::from(pages);
    let start = clock_ns();
    touch(&mut mem, c, vc, RefKind::Write)?;
    let alloc = per_op(start, clock_ns());
    let start = clock_ns();
    mem.exit_space(t0, c)?;
    let free = per_op(start, clock_ns());
    let start = clock_ns();
    touch(&mut mem, b, vb, RefKind::Read)?;
    let map = per_op(start, clock_ns());
    let start = clock_ns();
    mem.exit_space(t0, b)?;
    let unmap = per_op(start, clock_ns());
    std::hint::black_box(&mem);
    Ok([alloc, free, map, unmap])
}

/// The median over `iterations` fresh machines of ns per operation, for every row of every
/// column (column by column, rows in [`OP_ROWS`] order).
pub fn measure_ops(iterations: u32, pages: u32, clock_ns: &mut dyn FnMut() -> u64) -> Result<Vec<OpCost>, OpCostError> {
    if iterations == 0 || pages == 0 || pages > MAX_OP_PAGES {
        return Err(OpCostError::BadArguments { iterations, pages });
    }
    let mut out = Vec::with_capacity(OP_COLUMNS.len() * OP_ROWS.len());
    for (column, reserved, policy) in OP_COLUMNS {
        let mut samples: [Vec<f64>; 4] = Default::default();
        for _ in 0..iterations {
            let t = time_ops_once(reserved, policy, pages, clock_ns)?;
            for (k, v) in t.into_iter().enumerate() {
                samples[k].push(v);
            }
        }
        for (operation, mut s) in OP_ROWS.into_iter().zip(samples) {
            s.sort_by(f64::total_cmp);
            let median = (s[(s.len() - 1) / 2] + s[s.len() / 2]) / 2.0;
            out.push(OpCost { operation, column, ns_per_op: median });
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_row_and_column_is_measured_with_the_injected_clock() {
        // A clock that advances 1000 ns per read: each timed stretch reads it twice, so every
        // operation costs exactly 1000 ns / pages whatever the machine.
        let mut now = 0;
        let mut clock = || {
            now += 1000;
            now
        };
        let rows = measure_ops(3, 64, &mut clock).unwrap();
        assert_eq!(rows.len(), 12);
        for (column, _, _) in OP_COLUMNS {
            for operation in OP_ROWS {
                let cell = rows.iter().find(|r| (r.operation, r.column) == (operation, column)).expect("every cell");
                assert_eq!(cell.ns_per_op, 1000.0 / 64.0, "{operation}/{column}");
            }
        }
    }

    #[test]
    fn a_real_clock_gives_finite_non_negative_costs() {
        let origin = std::time::Instant::now();
        let mut clock = || origin.elapsed().as_nanos() as u64;
        let rows = measure_ops(2, 64, &mut clock).unwrap();
        assert!(rows.iter().all(|r| r.ns_per_op.is_finite() && r.ns_per_op >= 0.0), "{rows:?}");
    }

    #[test]
    fn bad_arguments_are_refused() {
        let mut clock = || 0;
        for (iterations, pages) in [(0, 64), (1, 0), (1, MAX_OP_PAGES + 1)] {
            let e = measure_ops(iterations, pages, &mut clock).unwrap_err();
            assert_eq!(e, OpCostError::BadArguments { iterations, pages });
            assert!(e.to_string().starts_with("iterations must be at least 1"), "{e}");
        }
    }
}
