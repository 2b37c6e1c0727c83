//! The interference model's parameters: the platform, Table 3's distributions, and the ranges
//! each synthetic task's inflation parameters are drawn from, every one with its source.
//!
//! The paper gives its micro-benchmark results mostly as figures; where the text states a
//! number (Obs. 1–3, the Framecopy MOETs of Sec. 5.2, Sec. 5.3's 400 KB reads) it is used as
//! written. Where it gives only a shape (Figs. 12–14: ways as exponential decay, bandwidth as
//! negative exponential), the magnitude is an assumption, and says so.

/// A closed-open range `[lo, hi)` a value is drawn from uniformly.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Range {
    pub lo: f64,
    pub hi: f64,
}

const fn r(lo: f64, hi: f64) -> Range {
    Range { lo, hi }
}

/// The platform of the study (Sec. 2: the i.MX6).
#[derive(Clone, Debug, PartialEq)]
pub struct StudyPlatform {
    pub cores: usize,
    pub llc_ways: usize,
    /// One LLC way: 1 MiB / 16.
    pub way_bytes: f64,
    /// DRAM banks: one per core for levels A/B, the rest level C (Fig. 3).
    pub banks: usize,
}

/// Every parameter of the interference model. `Default` is the set the study uses.
#[derive(Clone, Debug, PartialEq)]
pub struct ModelParams {
    pub platform: StudyPlatform,
    /// Level-A PET over level-B PET (Sec. 2: A inflates B by 50 %).
    pub level_a_over_b: f64,
    /// Level-C PET (an average) over level-B PET (a maximum), per task.
    pub acet_over_moet: Range,
    /// Relative slowdown with no LLC ways over the full LLC, per task.
    pub way_sensitivity: Range,
    /// Decay length of the way curve in ways, per task.
    pub way_decay_ways: Range,
    /// Memory-bus slowdown at saturating DMA bandwidth, every task (Obs. 4).
    pub dma_bus: Range,
    /// Row-buffer-conflict slowdown at saturating DMA into the task's own bank, with no
    /// LLC ways (Obs. 5, Fig. 13(a)); scaled by the task's miss fraction at its ways.
    pub dma_bank: Range,
    /// Bandwidth (MB/s) at which the DMA terms reach 63 % of their saturation (Figs. 13–14's
    /// flattening: the negative exponential).
    pub dma_scale_mb_s: Range,
    /// Slowdown from other cores' CPU traffic in the task's bank (Obs. 3: Matrix +6 % MOET).
    pub cpu_bank_conflict: Range,
    /// A buffer copy's cost from another core's bank or level-C banks over from its own bank
    /// (Obs. 2: copying up to +81 %).
    pub foreign_copy_factor: Range,
    /// Copying I/O data from a kernel buffer in the task's own bank, bytes per µs (Sec. 5.2:
    /// 640×480 YUYV frame, 614,400 bytes, in 2,925.67 µs managed).
    pub copy_bytes_per_us: f64,
    /// An I/O buffer's size before it is capped by the job's own cost.
    pub io_buffer_bytes: Range,
    /// One interrupt per I/O operation: its handling time, µs.
    pub irq_us: f64,
    /// Chance that a task communicates with a partner of its level and period.
    pub ipc_pair_share: f64,
    /// Messages one job of a communicating task sends or receives.
    pub ipc_messages_per_job: Range,
    /// A job's messages at CE cost take at most this share of its cost.
    pub ipc_share_max: f64,
    /// SBP (uncached) send or receive: fixed µs per message.
    pub ipc_sbp_fixed_us: f64,
    /// SBP copy rate, bytes per µs.
    pub ipc_sbp_bytes_per_us: f64,
    /// CE over SBP, send and receive (Obs. 1).
    pub ipc_ce_send: Range,
    pub ipc_ce_receive: Range,
    /// CL over SBP, send and receive (Obs. 1).
    pub ipc_cl_send: Range,
    pub ipc_cl_receive: Range,
    /// Refilling LLC lines from DRAM, bytes per µs: bounds a preemption's reload by the
    /// partition's size.
    pub llc_fill_bytes_per_us: f64,
    /// Ways each core's A/B partition is assumed to get while tasks are packed (phase 1).
    pub packing_ways: usize,
}

impl Default for ModelParams {
    fn default() -> Self {
        ModelParams {
            platform: StudyPlatform { cores: 4, llc_ways: 16, way_bytes: 65536.0, banks: 8 },
            level_a_over_b: 1.5,
            acet_over_moet: r(0.5, 0.9),
            way_sensitivity: r(0.2, 1.0),
            way_decay_ways: r(1.0, 4.0),
            dma_bus: r(0.02, 0.10),
            dma_bank: r(0.05, 0.20),
            dma_scale_mb_s: r(50.0, 150.0),
            cpu_bank_conflict: r(0.03, 0.06),
            foreign_copy_factor: r(1.25, 1.81),
            copy_bytes_per_us: 614_400.0 / 2_925.67,
            io_buffer_bytes: r(65_536.0, 614_400.0),
            irq_us: 10.0,
            ipc_pair_share: 1.0,
            ipc_messages_per_job: r(1.0, 101.0),
            ipc_share_max: 0.25,
            ipc_sbp_fixed_us: 2.0,
            ipc_sbp_bytes_per_us: 200.0,
            ipc_ce_send: r(0.092, 0.129),
            ipc_ce_receive: r(0.292, 0.405),
            ipc_cl_send: r(0.027, 0.054),
            ipc_cl_receive: r(0.106, 0.159),
            llc_fill_bytes_per_us: 1000.0,
            packing_ways: 2,
        }
    }
}

/// One row of the parameter table a report prints.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParamRow {
    pub name: &'static str,
    pub value: String,
    pub unit: &'static str,
    pub source: &'static str,
}

fn range_text(x: Range) -> String {
    format!("[{}, {})", x.lo, x.hi)
}

impl ModelParams {
    /// The parameters with their sources, in the order a report lists them.
    pub fn table(&self) -> Vec<ParamRow> {
        let row = |name, value: String, unit, source| ParamRow { name, value, unit, source };
        let p = &self.platform;
        vec![
            row("cores", p.cores.to_string(), "", "Sec. 2: the i.MX6 has four Cortex-A9 cores"),
            row("llc_ways", p.llc_ways.to_string(), "", "Sec. 2: 1 MB 16-way L2"),
            row("way_bytes", p.way_bytes.to_string(), "bytes", "Sec. 2: 1 MB / 16 ways"),
            row("banks", p.banks.to_string(), "", "Sec. 2, Fig. 3: eight 128 MB banks, one per core for A/B, four for C and the OS"),
            row("level_a_over_b", self.level_a_over_b.to_string(), "×", "Sec. 2: level-A PETs inflate level-B PETs by 50 %"),
            row("acet_over_moet", range_text(self.acet_over_moet), "×", "assumed: level-C PETs are averages (Sec. 2); Fig. 11's pairs are not in the text"),
            row("way_sensitivity", range_text(self.way_sensitivity), "× at 0 ways", "assumed magnitude; shape: exponential decay in ways (Sec. 6.1, Fig. 12)"),
            row("way_decay_ways", range_text(self.way_decay_ways), "ways", "assumed; Fig. 12: diminishing returns from more ways"),
            row("dma_bus", range_text(self.dma_bus), "× at saturation", "assumed magnitude; Obs. 4: MOET rises with DMA bandwidth wherever the buffers are"),
            row("dma_bank", range_text(self.dma_bank), "× at saturation, 0 ways", "assumed magnitude; Obs. 5–6, Figs. 13(a), 14: row conflicts when buffers share the task's bank, fewer with more ways"),
            row("dma_scale_mb_s", range_text(self.dma_scale_mb_s), "MB/s", "assumed; Sec. 6.1: negative exponential in bandwidth (Figs. 13–14 flatten at high bandwidth)"),
            row("cpu_bank_conflict", range_text(self.cpu_bank_conflict), "×", "Obs. 3: CPU-sourced interference inflated Matrix's MOET 6 %, its ACET 3 %"),
            row("foreign_copy_factor", range_text(self.foreign_copy_factor), "×", "Obs. 2: copying from a level-C frame buffer took up to 81 % longer (color conversion 31 %)"),
            row("copy_bytes_per_us", format!("{:.1}", self.copy_bytes_per_us), "bytes/µs", "Sec. 5.2: Framecopy 640×480 (614,400 bytes) in 2,925.67 µs managed"),
            row("io_buffer_bytes", range_text(self.io_buffer_bytes), "bytes", "Sec. 5: frames up to 640×480 YUYV; 400 KB SSD reads (Sec. 5.3); capped at the job's cost"),
            row("irq_us", self.irq_us.to_string(), "µs", "assumed: one completion interrupt per I/O operation (the measured times are not in the text)"),
            row("ipc_pair_share", self.ipc_pair_share.to_string(), "", "assumed (the paper gives no share): every task that finds a partner of its level and period communicates with it (Sec. 6.1, footnote 11)"),
            row("ipc_messages_per_job", range_text(self.ipc_messages_per_job), "messages", "Sec. 5.1: the Sender and Receiver jobs pass 100 messages"),
            row("ipc_share_max", self.ipc_share_max.to_string(), "of the job at CE cost", "assumed (the paper gives no volume); Sec. 6.2: tasks spend a small share of their time on IPC and I/O buffers"),
            row("ipc_sbp_fixed_us", self.ipc_sbp_fixed_us.to_string(), "µs", "assumed: system-call cost of one message"),
            row("ipc_sbp_bytes_per_us", self.ipc_sbp_bytes_per_us.to_string(), "bytes/µs", "assumed: uncached copy rate (Fig. 8's absolute times are not in the text)"),
            row("ipc_ce_send", range_text(self.ipc_ce_send), "of SBP", "Obs. 1: CE sending 9.2–12.9 % of SBP"),
            row("ipc_ce_receive", range_text(self.ipc_ce_receive), "of SBP", "Obs. 1: CE receiving 29.2–40.5 % of SBP"),
            row("ipc_cl_send", range_text(self.ipc_cl_send), "of SBP", "Obs. 1: CL sending 2.7–5.4 % of SBP"),
            row("ipc_cl_receive", range_text(self.ipc_cl_receive), "of SBP", "Obs. 1: CL receiving 10.6–15.9 % of SBP"),
            row("llc_fill_bytes_per_us", self.llc_fill_bytes_per_us.to_string(), "bytes/µs", "assumed: about 1 GB/s of line fills; a reload never exceeds refilling the partition"),
            row("packing_ways", self.packing_ways.to_string(), "ways", "assumed: phase 1 packs at an even split of half the LLC over the cores (Fig. 3's default)"),
        ]
    }

    /// SBP cost of one message of `bytes`, µs.
    pub fn sbp_message_us(&self, bytes: f64) -> f64 {
        self.ipc_sbp_fixed_us + bytes / self.ipc_sbp_bytes_per_us
    }
}
