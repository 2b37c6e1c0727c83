//! Task systems from Table 3's seven categories (Sec. 6.1, steps 1–4).

use super::params::{ModelParams, Range};
use rand::Rng;

/// Criticality level of a generated task (level D is absent, Sec. 2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    A,
    B,
    C,
}

/// The seven categories of Table 3 and their choices, in the paper's order.
pub const CATEGORIES: [(&str, &[&str]); 7] = [
    ("criticality", &["C-Light", "C-Heavy", "All-Mod."]),
    ("period", &["Short", "Moderate", "Long"]),
    ("task_utilization", &["Light", "Medium", "Heavy"]),
    ("reload", &["Quick", "Slow"]),
    ("ipc_size", &["Small", "Large"]),
    ("io_bandwidth", &["Low", "Medium", "High"]),
    ("direct_io", &["Few", "Many"]),
];

/// One scenario: the index of the chosen column in each category.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Scenario(pub [usize; 7]);

impl Scenario {
    /// From the choices' names, e.g. `["C-Light", "Long", "Light", "Quick", "Small", "High", "Many"]`.
    pub fn from_names<S: AsRef<str>>(names: &[S]) -> Result<Scenario, String> {
        if names.len() != CATEGORIES.len() {
            return Err(format!("a scenario names {} choices, one per category, got {}", CATEGORIES.len(), names.len()));
        }
        let mut idx = [0; 7];
        for (i, ((category, choices), name)) in CATEGORIES.iter().zip(names).enumerate() {
            let name = name.as_ref();
            idx[i] = choices
                .iter()
                .position(|c| *c == name)
                .ok_or_else(|| format!("{category}: unknown choice {name:?} (one of {})", choices.join(", ")))?;
        }
        Ok(Scenario(idx))
    }

    /// Every scenario, in the order of the categories (648 of them).
    pub fn all() -> Vec<Scenario> {
        let mut out = vec![Scenario([0; 7])];
        for (i, (_, choices)) in CATEGORIES.iter().enumerate() {
            out = out
                .into_iter()
                .flat_map(|s| {
                    (0..choices.len()).map(move |c| {
                        let mut t = s.0;
                        t[i] = c;
                        Scenario(t)
                    })
                })
                .collect();
        }
        out
    }

    pub fn names(&self) -> [&'static str; 7] {
        std::array::from_fn(|i| CATEGORIES[i].1[self.0[i]])
    }
}

const fn r(lo: f64, hi: f64) -> Range {
    Range { lo, hi }
}

/// Category 1: percentage of the system utilisation at levels A, B, C.
const CRIT_PERCENT: [[Range; 3]; 3] = [
    [r(35.0, 45.0), r(35.0, 45.0), r(10.0, 30.0)],
    [r(10.0, 30.0), r(10.0, 30.0), r(50.0, 70.0)],
    [r(28.0, 39.0), r(28.0, 39.0), r(28.0, 39.0)],
];
/// Category 2: periods in ms; A and B from a harmonic pair, C from a range.
const PERIOD_AB_MS: [[[f64; 2]; 2]; 3] = [[[12.0, 24.0], [24.0, 48.0]], [[20.0, 40.0], [40.0, 80.0]], [[48.0, 96.0], [96.0, 192.0]]];
const PERIOD_C_MS: [Range; 3] = [r(12.0, 100.0), r(20.0, 100.0), r(50.0, 500.0)];
/// Category 3: per-task utilisation at A, B, C.
const TASK_UTIL: [[Range; 3]; 3] =
    [[r(0.001, 0.03), r(0.001, 0.05), r(0.001, 0.1)], [r(0.02, 0.1), r(0.05, 0.2), r(0.1, 0.4)], [r(0.1, 0.2), r(0.2, 0.4), r(0.4, 0.6)]];
/// Category 4: largest cache reload time, percent of the execution cost.
const RELOAD_PERCENT: [Range; 2] = [r(1.0, 10.0), r(25.0, 50.0)];
/// Category 5: IPC message sizes, bytes.
const IPC_BYTES: [[f64; 2]; 2] = [[128.0, 256.0], [4096.0, 8192.0]];
/// Category 6: total I/O bandwidth, MB/s (closed ranges in the paper).
const IO_MB_S: [Range; 3] = [r(0.0, 20.0), r(40.0, 60.0), r(180.0, 200.0)];
/// Category 7: percentage of I/O tasks whose buffers take DMA directly.
const DIRECT_PERCENT: [Range; 2] = [r(0.0, 30.0), r(70.0, 100.0)];

/// A task's IPC: one partner of the same level and period.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Ipc {
    pub partner: usize,
    pub sender: bool,
    pub message_bytes: f64,
    pub messages_per_job: f64,
    /// CE and CL cost over SBP for this task's side (send or receive).
    pub ce_ratio: f64,
    pub cl_ratio: f64,
}

/// A task's I/O: one buffer filled each job, copied in at the job's start.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Io {
    pub bytes: f64,
    /// DMA into the buffer itself (like the SSD); otherwise into level-C packet buffers the
    /// OS copies from (like the USB camera).
    pub direct: bool,
}

/// A generated task. Times in µs.
#[derive(Clone, Debug, PartialEq)]
pub struct StudyTask {
    pub level: Level,
    pub period_us: f64,
    /// Its own level's PET on an idle system with the whole LLC.
    pub cost_us: f64,
    pub acet_over_moet: f64,
    pub way_sensitivity: f64,
    pub way_decay_ways: f64,
    pub dma_bus: f64,
    pub dma_bank: f64,
    pub dma_scale_mb_s: f64,
    pub cpu_bank_conflict: f64,
    pub foreign_copy_factor: f64,
    pub reload_share: f64,
    pub ipc: Option<Ipc>,
    pub io: Option<Io>,
}

impl StudyTask {
    /// The PET the model's costs are written at: level B for A and B tasks, level C for C.
    pub fn reference_cost_us(&self, params: &ModelParams) -> f64 {
        match self.level {
            Level::A => self.cost_us / params.level_a_over_b,
            Level::B | Level::C => self.cost_us,
        }
    }
}

fn draw(rng: &mut impl Rng, x: Range) -> f64 {
    if x.hi > x.lo {
        rng.random_range(x.lo..x.hi)
    } else {
        x.lo
    }
}

/// A task system of the scenario at `system_utilization` (the sum of each task's own-level
/// utilisation).
pub fn generate(scenario: Scenario, system_utilization: f64, params: &ModelParams, rng: &mut impl Rng) -> Vec<StudyTask> {
    let [crit, period, util, reload, ipc_size, bandwidth, direct] = scenario.0;
    // Step 1: the level shares, normalised to the system utilisation.
    let percent: [f64; 3] = std::array::from_fn(|l| draw(rng, CRIT_PERCENT[crit][l]));
    let total_percent: f64 = percent.iter().sum();
    let mut tasks = Vec::new();
    for (l, level) in [Level::A, Level::B, Level::C].into_iter().enumerate() {
        let mut left = system_utilization * percent[l] / total_percent;
        while left > 1e-9 {
            let u = draw(rng, TASK_UTIL[util][l]).min(left);
            left -= u;
            let period_ms = match level {
                Level::A | Level::B => PERIOD_AB_MS[period][l][rng.random_range(0..2)],
                Level::C => draw(rng, PERIOD_C_MS[period]),
            };
            let period_us = period_ms * 1000.0;
            tasks.push(StudyTask {
                level,
                period_us,
                cost_us: u * period_us,
                acet_over_moet: draw(rng, params.acet_over_moet),
                way_sensitivity: draw(rng, params.way_sensitivity),
                way_decay_ways: draw(rng, params.way_decay_ways),
                dma_bus: draw(rng, params.dma_bus),
                dma_bank: draw(rng, params.dma_bank),
                dma_scale_mb_s: draw(rng, params.dma_scale_mb_s),
                cpu_bank_conflict: draw(rng, params.cpu_bank_conflict),
                foreign_copy_factor: draw(rng, params.foreign_copy_factor),
                reload_share: draw(rng, RELOAD_PERCENT[reload]) / 100.0,
                ipc: None,
                io: None,
            });
        }
    }
    pair_for_ipc(&mut tasks, IPC_BYTES[ipc_size], params, rng);
    assign_io(&mut tasks, draw(rng, IO_MB_S[bandwidth]), draw(rng, DIRECT_PERCENT[direct]) / 100.0, params, rng);
    tasks
}

/// Step 2: pairs of one level and period exchange messages each job.
fn pair_for_ipc(tasks: &mut [StudyTask], sizes: [f64; 2], params: &ModelParams, rng: &mut impl Rng) {
    let n = tasks.len();
    let mut order: Vec<usize> = (0..n).collect();
    // Fisher–Yates with the study's own stream, so pairing is part of the seed.
    for i in (1..n).rev() {
        order.swap(i, rng.random_range(0..=i));
    }
    let mut taken = vec![false; n];
    for (pos, &i) in order.iter().enumerate() {
        if taken[i] || !rng.random_bool(params.ipc_pair_share) {
            continue;
        }
        // Levels A and B pair only within a period (their periods are discrete); level C
        // takes its partner's period.
        let partner = order[pos + 1..].iter().copied().find(|&j| {
            !taken[j] && tasks[j].level == tasks[i].level && (tasks[i].level == Level::C || tasks[j].period_us == tasks[i].period_us)
        });
        let Some(j) = partner else { continue };
        taken[i] = true;
        taken[j] = true;
        if tasks[j].level == Level::C {
            let u = tasks[j].cost_us / tasks[j].period_us;
            tasks[j].period_us = tasks[i].period_us;
            tasks[j].cost_us = u * tasks[j].period_us;
        }
        let bytes = sizes[rng.random_range(0..2)];
        let send_ce = draw(rng, params.ipc_ce_send);
        let receive_ce = draw(rng, params.ipc_ce_receive);
        let send_cl = draw(rng, params.ipc_cl_send);
        let receive_cl = draw(rng, params.ipc_cl_receive);
        let sbp = params.sbp_message_us(bytes);
        // The job's messages, capped so that at CE cost they take at most the allowed share.
        let cap = |t: &StudyTask, ratio: f64| (params.ipc_share_max * t.reference_cost_us(params) / (sbp * ratio)).floor();
        let wanted = draw(rng, params.ipc_messages_per_job).floor();
        let messages = wanted.min(cap(&tasks[i], send_ce)).min(cap(&tasks[j], receive_ce));
        if messages < 1.0 {
            continue;
        }
        tasks[i].ipc =
            Some(Ipc { partner: j, sender: true, message_bytes: bytes, messages_per_job: messages, ce_ratio: send_ce, cl_ratio: send_cl });
        tasks[j].ipc = Some(Ipc {
            partner: i,
            sender: false,
            message_bytes: bytes,
            messages_per_job: messages,
            ce_ratio: receive_ce,
            cl_ratio: receive_cl,
        });
    }
}

/// Steps 3–4: buffers go to tasks in random order until the bandwidth is met; a share of them
/// take DMA directly.
fn assign_io(tasks: &mut [StudyTask], target_mb_s: f64, direct_share: f64, params: &ModelParams, rng: &mut impl Rng) {
    let n = tasks.len();
    let mut order: Vec<usize> = (0..n).collect();
    for i in (1..n).rev() {
        order.swap(i, rng.random_range(0..=i));
    }
    let mut mb_s = 0.0;
    for i in order {
        if mb_s >= target_mb_s {
            break;
        }
        let t = &mut tasks[i];
        // The copy at the job's start is part of the job: a buffer no larger than the job can copy.
        let bytes = draw(rng, params.io_buffer_bytes).min(t.reference_cost_us(params) * params.copy_bytes_per_us);
        let direct = rng.random_bool(direct_share.clamp(0.0, 1.0));
        t.io = Some(Io { bytes, direct });
        mb_s += bytes / t.period_us;
    }
}
