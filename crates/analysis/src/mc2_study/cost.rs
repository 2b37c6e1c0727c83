//! Phases 1 and 2 of Sec. 6.1 (packing level-A/B tasks, placing buffers) and each task's
//! execution cost as a function of its partition's LLC ways under a scheme.
//!
//! A task's cost at the reference level (B for levels A and B, C for level C), with `m(w)` its
//! miss fraction at `w` ways (1 at none, 0 with the whole LLC, exponential in between):
//!
//! `c(w) = P·(α + β·m(w)) + extra (+ lock delta when its IPC buffer is locked in the LLC)`
//!
//! - `α = 1 + bus(BW) + conflict`: memory-bus contention from all DMA (Obs. 4) and, when other
//!   cores' CPU traffic reaches its bank, bank conflicts (Obs. 3);
//! - `β = s·α + bank(BW_own)`: LLC misses, and row conflicts from DMA into its own bank, which
//!   more ways hide (Obs. 5);
//! - `extra`: an I/O copy from a bank other than its own costs `(f − 1)·copy` more (Obs. 2);
//!   IPC costs its strategy's price over CE's (Obs. 1).
//!
//! `bus` and `bank` are negative exponentials in MB/s (Sec. 6.1). Level A costs 1.5× level B;
//! level C an average, `acet × c`. Interrupts land on CPU 0 (Sec. 3.2).

use super::generate::{Level, StudyTask};
use super::params::ModelParams;
use super::Scheme;
use rand::Rng;

/// Where a buffer lives: a core's level-A/B bank or the level-C banks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bank {
    Core(usize),
    LevelC,
}

/// How a scheme handles IPC and I/O buffers (the `x|y` notation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IpcMode {
    Random,
    LevelC,
    Optimised,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IoMode {
    Random,
    LevelC,
    AbAll,
    AbLongPeriods,
    AbShortPeriods,
}

/// An IPC buffer's strategy for a level-A/B task.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IpcStrategy {
    Sbp,
    Ce,
    /// CL when the locked region has room for it, else SBP.
    ClCandidate,
    /// Random bank; `true` when it happens to be the shared core's own bank.
    Random(bool),
}

/// Interrupt time a job of period `period_us` on CPU 0 can see: at most ⌈T/T_io⌉ + 1
/// completions of each I/O task fall within one period.
pub fn irq_per_job_us(tasks: &[StudyTask], period_us: f64, params: &ModelParams) -> f64 {
    tasks.iter().filter(|t| t.io.is_some()).map(|t| params.irq_us * ((period_us / t.period_us).ceil() + 1.0)).sum()
}

/// Phase 1: worst-fit packing of the level-A/B tasks by their level-B utilisation at the
/// packing ways. With `group_pairs`, communicating pairs are packed together (so CE applies)
/// and split only when no core has room for both. CPU 0's room counts the interrupts it takes.
/// `None`: some task fits nowhere.
pub fn partition(tasks: &[StudyTask], miss: &[Vec<f64>], params: &ModelParams, group_pairs: bool) -> Option<Vec<Option<usize>>> {
    let cores = params.platform.cores;
    let w = params.packing_ways;
    let util = |i: usize| {
        let t = &tasks[i];
        t.reference_cost_us(params) * (1.0 + t.way_sensitivity * miss[i][w]) / t.period_us
    };
    let level_a = |i: usize| if tasks[i].level == Level::A { params.level_a_over_b * util(i) } else { 0.0 };
    // Items: single tasks, or pairs of one level (A–A or B–B).
    let mut items: Vec<(f64, Vec<usize>)> = Vec::new();
    let mut seen = vec![false; tasks.len()];
    for (i, t) in tasks.iter().enumerate() {
        if t.level == Level::C || seen[i] {
            continue;
        }
        seen[i] = true;
        let mut members = vec![i];
        if let (true, Some(ipc)) = (group_pairs, t.ipc) {
            seen[ipc.partner] = true;
            members.push(ipc.partner);
        }
        items.push((members.iter().map(|&j| util(j)).sum(), members));
    }
    // Decreasing utilisation; ties by first task, so the order is a function of the system.
    items.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1[0].cmp(&b.1[0])));
    let mut used_b = vec![0.0; cores];
    let mut used_a = vec![0.0; cores];
    let mut cpu = vec![None; tasks.len()];
    let worst_fit = |used_b: &[f64]| (0..cores).min_by(|&x, &y| used_b[x].total_cmp(&used_b[y])).unwrap_or(0);
    // Interrupt utilisation each task would carry on CPU 0, computed once per task.
    let irq_util_on_cpu0: Vec<f64> = tasks.iter().map(|t| irq_per_job_us(tasks, t.period_us, params) / t.period_us).collect();
    let irq = |i: usize, k: usize| if k == 0 { irq_util_on_cpu0[i] } else { 0.0 };
    let mut queue: std::collections::VecDeque<Vec<usize>> = items.into_iter().map(|(_, m)| m).collect();
    while let Some(members) = queue.pop_front() {
        let k = worst_fit(&used_b);
        let ub: f64 = members.iter().map(|&i| util(i) + irq(i, k)).sum();
        let ua: f64 = members.iter().map(|&i| level_a(i) + irq(i, k)).sum();
        if used_b[k] + ub <= 1.0 && used_a[k] + ua <= 1.0 {
            used_b[k] += ub;
            used_a[k] += ua;
            for &i in &members {
                cpu[i] = Some(k);
            }
        } else if members.len() > 1 {
            // Capacity runs out: give up CE for this pair.
            for &i in members.iter().rev() {
                queue.push_front(vec![i]);
            }
        } else {
            return None;
        }
    }
    Some(cpu)
}

/// Phase 2 and the IPC strategies: each task's I/O buffer bank and IPC strategy (and for
/// level C, or under R, its IPC buffer's bank).
pub struct BufferPlacement {
    pub io_bank: Vec<Option<Bank>>,
    pub ipc: Vec<Option<IpcStrategy>>,
    pub ipc_bank: Vec<Option<Bank>>,
}

fn random_bank(params: &ModelParams, rng: &mut impl Rng) -> Bank {
    let cores = params.platform.cores;
    let b = rng.random_range(0..params.platform.banks);
    if b < params.platform.banks - cores {
        Bank::LevelC
    } else {
        Bank::Core(b - (params.platform.banks - cores))
    }
}

pub fn place(tasks: &[StudyTask], cpu: &[Option<usize>], scheme: Scheme, params: &ModelParams, rng: &mut impl Rng) -> BufferPlacement {
    let n = tasks.len();
    let (ipc_mode, io_mode) = scheme.modes();
    let own = |i: usize| cpu[i].map_or(Bank::LevelC, Bank::Core);
    // LP/SP: the I/O tasks within each of levels A and B with the longer (shorter) periods.
    let mut favoured = vec![false; n];
    if matches!(io_mode, IoMode::AbLongPeriods | IoMode::AbShortPeriods) {
        for level in [Level::A, Level::B] {
            let mut io: Vec<usize> = (0..n).filter(|&i| tasks[i].level == level && tasks[i].io.is_some()).collect();
            io.sort_by(|&a, &b| tasks[a].period_us.total_cmp(&tasks[b].period_us).then(a.cmp(&b)));
            if io_mode == IoMode::AbLongPeriods {
                io.reverse();
            }
            for &i in io.iter().take(io.len() / 2) {
                favoured[i] = true;
            }
        }
    }
    let io_bank = (0..n)
        .map(|i| {
            tasks[i].io.map(|_| match (io_mode, tasks[i].level) {
                (IoMode::Random, _) => random_bank(params, rng),
                (_, Level::C) | (IoMode::LevelC, _) => Bank::LevelC,
                (IoMode::AbAll, _) => own(i),
                (IoMode::AbLongPeriods | IoMode::AbShortPeriods, _) => {
                    if favoured[i] {
                        own(i)
                    } else {
                        Bank::LevelC
                    }
                }
            })
        })
        .collect();
    let mut ipc = vec![None; n];
    let mut ipc_bank = vec![None; n];
    for i in 0..n {
        let Some(link) = tasks[i].ipc else { continue };
        if !link.sender {
            continue;
        }
        let j = link.partner;
        let (strategy, bank) = if tasks[i].level == Level::C {
            let bank = if ipc_mode == IpcMode::Random { random_bank(params, rng) } else { Bank::LevelC };
            (None, bank)
        } else {
            match ipc_mode {
                IpcMode::LevelC => (Some(IpcStrategy::Sbp), Bank::LevelC),
                IpcMode::Optimised if cpu[i] == cpu[j] => (Some(IpcStrategy::Ce), own(i)),
                IpcMode::Optimised => (Some(IpcStrategy::ClCandidate), Bank::LevelC),
                IpcMode::Random => {
                    let bank = random_bank(params, rng);
                    (Some(IpcStrategy::Random(cpu[i] == cpu[j] && bank == own(i))), bank)
                }
            }
        };
        ipc[i] = strategy;
        ipc[j] = strategy;
        ipc_bank[i] = Some(bank);
        ipc_bank[j] = Some(bank);
    }
    BufferPlacement { io_bank, ipc, ipc_bank }
}

/// Each task's cost terms under one placement.
#[derive(Clone, Debug, PartialEq)]
pub struct Costs {
    /// `P·α` and `P·β` at the reference level.
    pub fixed: Vec<f64>,
    pub missing: Vec<f64>,
    /// Additive µs at the reference level.
    pub extra: Vec<f64>,
    /// Cost change when the task's IPC buffer is locked in the LLC (negative).
    pub lock_delta: Vec<f64>,
    /// Locked-region bytes a CL candidate pair needs, on its sender; 0 otherwise.
    pub lock_bytes: Vec<f64>,
    /// Interrupt time per job on CPU 0 (µs, levels A and B).
    pub irq: Vec<f64>,
    /// Level-C capacity taken by interrupts and the OS's intermediate copies.
    pub level_c_overhead: f64,
}

fn saturating(x_mb_s: f64, scale_mb_s: f64) -> f64 {
    1.0 - (-x_mb_s / scale_mb_s).exp()
}

pub fn costs(tasks: &[StudyTask], cpu: &[Option<usize>], placement: &BufferPlacement, params: &ModelParams) -> Costs {
    let n = tasks.len();
    let cores = params.platform.cores;
    let bank_index = |b: Bank| match b {
        Bank::Core(k) => k,
        Bank::LevelC => cores,
    };
    let own = |i: usize| cpu[i].map_or(Bank::LevelC, Bank::Core);
    // Traffic: DMA over the bus, DMA and OS copies into each bank, and whether a core's bank
    // is reached by CPU accesses from elsewhere.
    let mut bus_mb_s = 0.0;
    let mut bank_mb_s = vec![0.0; cores + 1];
    let mut foreign = vec![false; cores + 1];
    let mut irq_per_us = 0.0;
    let mut os_copy_util = 0.0;
    for (i, t) in tasks.iter().enumerate() {
        if let (Some(io), Some(bank)) = (t.io, placement.io_bank[i]) {
            let rate = io.bytes / t.period_us;
            bus_mb_s += rate;
            if io.direct {
                bank_mb_s[bank_index(bank)] += rate;
            } else {
                bank_mb_s[cores] += rate;
                bank_mb_s[bank_index(bank)] += rate;
                os_copy_util += io.bytes / params.copy_bytes_per_us / t.period_us;
            }
            if bank != own(i) {
                foreign[bank_index(bank)] = true;
            }
            irq_per_us += params.irq_us / t.period_us;
        }
        if let (Some(link), Some(bank)) = (t.ipc, placement.ipc_bank[i]) {
            if bank != own(i) || cpu[link.partner] != cpu[i] {
                foreign[bank_index(bank)] = true;
            }
        }
    }
    let mut c = Costs {
        fixed: vec![0.0; n],
        missing: vec![0.0; n],
        extra: vec![0.0; n],
        lock_delta: vec![0.0; n],
        lock_bytes: vec![0.0; n],
        irq: vec![0.0; n],
        level_c_overhead: irq_per_us + os_copy_util,
    };
    for (i, t) in tasks.iter().enumerate() {
        let p = t.reference_cost_us(params);
        let home = own(i);
        let conflict = match home {
            Bank::LevelC => t.cpu_bank_conflict,
            Bank::Core(k) if foreign[k] => t.cpu_bank_conflict,
            Bank::Core(_) => 0.0,
        };
        let alpha = 1.0 + t.dma_bus * saturating(bus_mb_s, t.dma_scale_mb_s) + conflict;
        let beta = t.way_sensitivity * alpha + t.dma_bank * saturating(bank_mb_s[bank_index(home)], t.dma_scale_mb_s);
        c.fixed[i] = p * alpha;
        c.missing[i] = p * beta;
        if let (Some(io), Some(bank)) = (t.io, placement.io_bank[i]) {
            if bank != home || home == Bank::LevelC {
                c.extra[i] += (t.foreign_copy_factor - 1.0) * io.bytes / params.copy_bytes_per_us;
            }
        }
        if let Some(link) = t.ipc {
            let sbp = link.messages_per_job * params.sbp_message_us(link.message_bytes);
            match placement.ipc[i] {
                None => c.extra[i] += sbp * link.ce_ratio * (t.foreign_copy_factor - 1.0),
                Some(IpcStrategy::Ce) | Some(IpcStrategy::Random(true)) => {}
                Some(IpcStrategy::Sbp) => c.extra[i] += sbp * (1.0 - link.ce_ratio),
                Some(IpcStrategy::Random(false)) => c.extra[i] += sbp * (t.foreign_copy_factor - link.ce_ratio),
                Some(IpcStrategy::ClCandidate) => {
                    c.extra[i] += sbp * (1.0 - link.ce_ratio);
                    c.lock_delta[i] = sbp * (link.cl_ratio - 1.0);
                    if link.sender {
                        c.lock_bytes[i] = link.messages_per_job * link.message_bytes;
                    }
                }
            }
        }
        if cpu[i] == Some(0) {
            c.irq[i] = irq_per_job_us(tasks, t.period_us, params);
        }
    }
    c
}

/// Miss fraction at each way count: 1 at no ways, 0 with all `ways`, exponential between.
pub fn miss_curve(decay_ways: f64, ways: usize) -> Vec<f64> {
    let floor = (-(ways as f64) / decay_ways).exp();
    (0..=ways).map(|w| (((-(w as f64) / decay_ways).exp() - floor) / (1.0 - floor)).max(0.0)).collect()
}
