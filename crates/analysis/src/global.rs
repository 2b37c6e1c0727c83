//! Global scheduling on m identical CPUs: global EDF (bounded tardiness, GFB) and global
//! fixed priority (Bertogna–Cirinei response-time bounds).

use crate::model::{compare, exact_density, exact_utilization, nanos, Ratio, TaskParams};
use critmem_core::Nanos;
use std::cmp::Ordering;

/// Fixed-point steps one task's global-FP analysis may take before giving up.
const MAX_STEPS: u64 = 10_000_000;

/// Devi & Anderson's condition for bounded tardiness under global EDF (RTSS 2005; it holds
/// for any relative deadlines by Leontyev & Anderson's generalisation): total utilisation
/// ≤ m and every task's utilisation ≤ 1. `None` when U is too close to m to compare exactly.
pub fn gedf_tardiness_is_bounded(tasks: &[TaskParams], m: usize) -> Option<bool> {
    if tasks.iter().any(|t| t.wcet > t.period) {
        return Some(false);
    }
    crate::model::utilization_cmp(tasks, m as u64).map(|o| o != Ordering::Greater)
}

/// The density form of the Goossens–Funk–Baruah test (RTS 2003; densities per Bertogna,
/// Cirinei & Lipari 2005): `Σδ ≤ m − (m − 1)·δmax` with `δ = C/min(D, T)` is sufficient for
/// global EDF to meet every deadline. `None` when too close to call exactly.
pub fn gedf_gfb(tasks: &[TaskParams], m: usize) -> Option<bool> {
    if tasks.is_empty() {
        return Some(true);
    }
    let dens = |t: &TaskParams| Ratio::new(t.wcet.0.into(), t.period.0.min(t.deadline.0).into());
    let d_max = tasks.iter().map(dens).max_by(|a, b| a.cmp_exact(*b)).expect("non-empty");
    if d_max.cmp_exact(Ratio::int(1)) == Ordering::Greater {
        return Some(false);
    }
    let extra = d_max.checked_mul(Ratio::int((m - 1) as u128));
    let exact = exact_density(tasks).and_then(|s| s.checked_add(extra?));
    let approx = tasks.iter().map(TaskParams::density).sum::<f64>() + (m - 1) as f64 * d_max.to_f64();
    compare(exact, approx, Ratio::int(m as u128)).map(|o| o != Ordering::Greater)
}

/// Devi & Anderson's tardiness bound per task under global EDF, implicit deadlines only
/// (Corollary 1 of "Tardiness bounds under global EDF scheduling on a multiprocessor",
/// RTSS 2005): task k's tardiness is at most `x + Ck` with
/// `x = (Σ of the Λ largest C − Cmin) / (m − Σ of the Λ−1 largest u)` and `Λ = ⌈U⌉ − 1`.
///
/// `None` if some deadline differs from its period, the condition of
/// [`gedf_tardiness_is_bounded`] does not hold, or the arithmetic overflows.
pub fn gedf_tardiness_bounds(tasks: &[TaskParams], m: usize) -> Option<Vec<Nanos>> {
    if tasks.iter().any(|t| t.deadline != t.period) || gedf_tardiness_is_bounded(tasks, m) != Some(true) {
        return None;
    }
    let u = exact_utilization(tasks)?;
    let lambda = (u.ceil() as usize).saturating_sub(1);
    if lambda == 0 {
        // U ≤ 1: the GFB test passes for any m, so nothing is ever late.
        return Some(vec![Nanos::ZERO; tasks.len()]);
    }
    let mut costs: Vec<u128> = tasks.iter().map(|t| u128::from(t.wcet.0)).collect();
    costs.sort_unstable_by(|a, b| b.cmp(a));
    let e_min = *costs.last().expect("non-empty");
    let e_sum: u128 = costs.iter().take(lambda).sum();
    let mut utils: Vec<Ratio> = tasks.iter().map(|t| Ratio::new(t.wcet.0.into(), t.period.0.into())).collect();
    utils.sort_unstable_by(|a, b| b.cmp_exact(*a));
    let u_sum = utils.iter().take(lambda - 1).try_fold(Ratio::int(0), |acc, x| acc.checked_add(*x))?;
    let capacity = Ratio::int(m as u128).checked_sub(u_sum)?;
    if capacity.is_zero() {
        return None;
    }
    let x = Ratio::int(e_sum.saturating_sub(e_min)).checked_div(capacity)?.ceil();
    Some(tasks.iter().map(|t| nanos(x + u128::from(t.wcet.0))).collect())
}

/// Bertogna & Cirinei's response-time bounds for global fixed priority (RTSS 2007), in
/// discrete time (1 ns), as mechanised in Prosa: for tasks in priority order,
/// `R = C + ⌊Σ_hp min(W_i(R), R − C + 1) / m⌋` with the workload bound
/// `W_i(L) = N·C_i + min(C_i, L + R_i − C_i − N·T_i)`, `N = ⌊(L + R_i − C_i)/T_i⌋`.
///
/// Sufficient only. Entry k is `Some(R)` (R ≤ D) or `None` when the bound exceeds the
/// deadline, the task or a higher-priority one has D > T, or a higher-priority task has no
/// bound (its workload cannot be bounded then).
pub fn gfp_response_bounds(tasks: &[TaskParams], ranks: &[u32], m: usize) -> Vec<Option<Nanos>> {
    assert_eq!(tasks.len(), ranks.len(), "one rank per task");
    assert!(m >= 1, "at least one CPU");
    let mut order: Vec<usize> = (0..tasks.len()).collect();
    order.sort_by_key(|&i| ranks[i]);
    let mut out = vec![None; tasks.len()];
    // (C, T, R) of the higher-priority tasks analysed so far.
    let mut hp: Vec<(u128, u128, u128)> = Vec::new();
    for &k in &order {
        let t = &tasks[k];
        if t.deadline > t.period {
            break;
        }
        match bc_bound(u128::from(t.wcet.0), u128::from(t.deadline.0), &hp, m as u128) {
            Some(r) => {
                out[k] = Some(nanos(r));
                hp.push((t.wcet.0.into(), t.period.0.into(), r));
            }
            None => break,
        }
    }
    out
}

/// Value, slope (0 or 1) and length of the linear stretch starting at `x` of one
/// higher-priority task's interference term `min(W_i(x), x − c + 1)`.
fn term(x: u128, c: u128, (ci, ti, ri): (u128, u128, u128)) -> (u128, u128, u128) {
    let y = x + ri - ci;
    let (n, r) = (y / ti, y % ti);
    let cap = x - c + 1;
    if r < ci {
        // W rises with slope 1, like the cap: whichever is smaller stays smaller.
        ((n * ci + r).min(cap), 1, ci - r)
    } else {
        let w = (n + 1) * ci;
        if w <= cap {
            (w, 0, ti - r)
        } else {
            (cap, 1, (ti - r).min(w - cap))
        }
    }
}

/// The least fixed point of the Bertogna–Cirinei recurrence, if it is at most `d`.
///
/// Plain iteration can crawl 1 ns per step (when every term sits at its cap), so between
/// breakpoints of the piecewise-linear sum the first point with f(x) ≤ x is solved for
/// directly. Every x visited stays at or below the least fixed point, and a returned value
/// always satisfies f(x) ≤ x, so the result is a sound bound even if a shortcut misfires.
fn bc_bound(c: u128, d: u128, hp: &[(u128, u128, u128)], m: u128) -> Option<u128> {
    let f_parts = |x: u128| {
        let (mut sum, mut slope, mut len) = (0u128, 0u128, u128::MAX);
        for &h in hp {
            let (v, s, l) = term(x, c, h);
            sum += v;
            slope += s;
            len = len.min(l);
        }
        (sum, slope, len)
    };
    let f = |x: u128| c + f_parts(x).0 / m;
    let mut x = c;
    for _ in 0..MAX_STEPS {
        if x > d {
            return None;
        }
        let (sum, slope, len) = f_parts(x);
        let fx = c + sum / m;
        if fx <= x {
            return Some(x);
        }
        // f(x + δ) ≤ x + δ  ⇔  sum + slope·δ ≤ m·(x + δ − c) + m − 1 within this stretch.
        let need = sum + 1 - m * (x - c + 1);
        if m > slope {
            let delta = need.div_ceil(m - slope);
            if delta < len {
                let y = x + delta;
                if f(y) <= y {
                    return (y <= d).then_some(y);
                }
                x = fx;
                continue;
            }
        }
        x = (x + len).max(fx);
    }
    None
}
