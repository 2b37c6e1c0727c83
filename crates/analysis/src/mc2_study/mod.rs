//! MC²'s schedulability study (Kim et al., "Supporting I/O and IPC via Fine-Grained OS
//! Isolation for Mixed-Criticality Real-Time Tasks", Sec. 6): task systems from Table 3,
//! execution costs inflated by the interference each scheme's buffer placement causes, the
//! three-phase optimisation of Sec. 6.1, and the count of schedulable systems per scheme.
//!
//! [`schedulable_counts`] is the study's inner loop: task system `i` of a point is generated
//! from `(seed, i)` alone, so any split of a point into batches gives the same counts.

mod cost;
mod generate;
mod optimise;
mod params;

pub use cost::{miss_curve, Bank, IoMode, IpcMode, IpcStrategy};
pub use generate::{generate, Io, Ipc, Level, Scenario, StudyTask, CATEGORIES};
pub use optimise::{Evaluator, Ways};
pub use params::{ModelParams, ParamRow, Range, StudyPlatform};

use critmem_core::rng::sub_rng;

/// The nine buffer-management schemes, `IPC|I/O`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Scheme {
    RR,
    CC,
    OC,
    CcAbAll,
    CcAbLp,
    CcAbSp,
    OcAbAll,
    OcAbLp,
    OcAbSp,
}

impl Scheme {
    pub const ALL: [Scheme; 9] = [
        Scheme::RR,
        Scheme::CC,
        Scheme::OC,
        Scheme::CcAbAll,
        Scheme::CcAbLp,
        Scheme::CcAbSp,
        Scheme::OcAbAll,
        Scheme::OcAbLp,
        Scheme::OcAbSp,
    ];

    /// The paper's name.
    pub fn name(self) -> &'static str {
        match self {
            Scheme::RR => "R|R",
            Scheme::CC => "C|C",
            Scheme::OC => "O|C",
            Scheme::CcAbAll => "C|C+A/B-ALL",
            Scheme::CcAbLp => "C|C+A/B-LP",
            Scheme::CcAbSp => "C|C+A/B-SP",
            Scheme::OcAbAll => "O|C+A/B-ALL",
            Scheme::OcAbLp => "O|C+A/B-LP",
            Scheme::OcAbSp => "O|C+A/B-SP",
        }
    }

    pub fn modes(self) -> (IpcMode, IoMode) {
        match self {
            Scheme::RR => (IpcMode::Random, IoMode::Random),
            Scheme::CC => (IpcMode::LevelC, IoMode::LevelC),
            Scheme::OC => (IpcMode::Optimised, IoMode::LevelC),
            Scheme::CcAbAll => (IpcMode::LevelC, IoMode::AbAll),
            Scheme::CcAbLp => (IpcMode::LevelC, IoMode::AbLongPeriods),
            Scheme::CcAbSp => (IpcMode::LevelC, IoMode::AbShortPeriods),
            Scheme::OcAbAll => (IpcMode::Optimised, IoMode::AbAll),
            Scheme::OcAbLp => (IpcMode::Optimised, IoMode::AbLongPeriods),
            Scheme::OcAbSp => (IpcMode::Optimised, IoMode::AbShortPeriods),
        }
    }
}

/// One task system ready for its schemes: the tasks, their miss curves, and both packings.
pub struct System {
    pub tasks: Vec<StudyTask>,
    pub miss: Vec<Vec<f64>>,
    /// Phase 1 without and with communicating pairs packed together.
    pub packed: [Option<Vec<Option<usize>>>; 2],
    seed: u64,
    index: u64,
}

impl System {
    /// Task system `index` of a point.
    pub fn generate(scenario: Scenario, system_utilization: f64, seed: u64, index: u64, params: &ModelParams) -> System {
        let mut rng = sub_rng(seed, "mc2-study-system", index);
        let tasks = generate(scenario, system_utilization, params, &mut rng);
        let miss: Vec<Vec<f64>> = tasks.iter().map(|t| miss_curve(t.way_decay_ways, params.platform.llc_ways)).collect();
        let packed = [cost::partition(&tasks, &miss, params, false), cost::partition(&tasks, &miss, params, true)];
        System { tasks, miss, packed, seed, index }
    }

    /// The least level-C utilisation under `scheme` and a way split reaching it (`None` when
    /// levels A and B cannot pass). The O schemes pack communicating pairs together first and,
    /// when the packing without pairs does better, take that one: CE applied less aggressively
    /// as capacity runs out (Sec. 6.1), so that O never loses to SBP for want of room.
    pub fn solve(&self, scheme: Scheme, params: &ModelParams) -> Option<(f64, Ways)> {
        let grouped = self.with_evaluator(scheme, params, |e| e.optimise());
        // Without a pair that packing kept together, both packings are the same.
        if scheme.modes().0 != IpcMode::Optimised || self.packed[0] == self.packed[1] {
            return grouped;
        }
        let single = self.with_packing(0, scheme, params, |e| e.optimise());
        match (grouped, single) {
            (Some(g), Some(s)) => Some(if s.0 < g.0 { s } else { g }),
            (g, s) => g.or(s),
        }
    }

    /// Runs `f` on the way search of `scheme` with its own packing (pairs together under the O
    /// schemes); `None` when phase 1 fails.
    pub fn with_evaluator<R>(&self, scheme: Scheme, params: &ModelParams, f: impl FnOnce(&Evaluator) -> Option<R>) -> Option<R> {
        let (ipc, _) = scheme.modes();
        self.with_packing(usize::from(ipc == IpcMode::Optimised), scheme, params, f)
    }

    fn with_packing<R>(&self, packing: usize, scheme: Scheme, params: &ModelParams, f: impl FnOnce(&Evaluator) -> Option<R>) -> Option<R> {
        let cpu = self.packed[packing].as_ref()?;
        // R's random banks come from their own stream, the same for every call.
        let mut rng = sub_rng(self.seed, "mc2-study-banks", self.index);
        let placement = cost::place(&self.tasks, cpu, scheme, params, &mut rng);
        let costs = cost::costs(&self.tasks, cpu, &placement, params);
        f(&Evaluator::new(&self.tasks, cpu, &costs, &self.miss, params))
    }

    /// Whether every level passes under `scheme`.
    pub fn schedulable(&self, scheme: Scheme, params: &ModelParams) -> bool {
        self.solve(scheme, params).is_some_and(|(u, _)| u <= params.platform.cores as f64 + 1e-9)
    }
}

/// How many of task systems `first .. first + count` at this point are schedulable under each
/// scheme, in [`Scheme::ALL`]'s order.
pub fn schedulable_counts(
    scenario: Scenario,
    system_utilization: f64,
    seed: u64,
    first: u64,
    count: u64,
    params: &ModelParams,
) -> [u64; 9] {
    let mut out = [0; 9];
    for index in first..first + count {
        let system = System::generate(scenario, system_utilization, seed, index, params);
        for (k, scheme) in Scheme::ALL.into_iter().enumerate() {
            out[k] += u64::from(system.schedulable(scheme, params));
        }
    }
    out
}

/// IPC micro-benchmark analogue (Fig. 8): a message's worst-case send and receive cost under
/// `strategy` ("SBP", "CE" or "CL"), µs, at the upper end of Obs. 1's ratios.
pub fn ipc_cost_us(params: &ModelParams, strategy: &str, bytes: f64) -> Result<(f64, f64), String> {
    let sbp = params.sbp_message_us(bytes);
    let (send, receive) = match strategy {
        "SBP" => (1.0, 1.0),
        "CE" => (params.ipc_ce_send.hi, params.ipc_ce_receive.hi),
        "CL" => (params.ipc_cl_send.hi, params.ipc_cl_receive.hi),
        other => return Err(format!("unknown IPC strategy {other:?} (one of SBP, CE, CL)")),
    };
    Ok((sbp * send, sbp * receive))
}

/// DMA micro-benchmark analogue (Fig. 14): the worst-case cost of a level-A task that does no
/// I/O, over its cost on an idle system with the same ways, when I/O at `bandwidth_mb_s`
/// keeps `level_c_percent` of its buffers in level-C banks and the rest in the task's bank.
pub fn dma_inflation(params: &ModelParams, level_c_percent: f64, bandwidth_mb_s: f64, ways: usize) -> f64 {
    let miss = miss_curve(params.way_decay_ways.hi, params.platform.llc_ways)[ways.min(params.platform.llc_ways)];
    let scale = params.dma_scale_mb_s.lo;
    let own_mb_s = bandwidth_mb_s * (1.0 - level_c_percent / 100.0);
    let alpha = 1.0 + params.dma_bus.hi * (1.0 - (-bandwidth_mb_s / scale).exp());
    let s = params.way_sensitivity.hi;
    let beta = s * alpha + params.dma_bank.hi * (1.0 - (-own_mb_s / scale).exp());
    (alpha + beta * miss) / (1.0 + s * miss)
}
