//! A toy plant that closes SARA's control loop.

use super::*;

/// One periodic soft-RT task and one memory-hungry non-RT group. The soft-RT task needs
/// `NEED` bytes; with a limit `L` below that it stalls a share `min(1, (NEED − L)/RAMP)` of its
/// time (stall per interval falls linearly as the limit grows) and its execution time is exactly
/// BCET + stall (Eq. 1 holds by construction). With x = 1 MiB the loop gain per interval is
/// x/RAMP = 2.5 %; below about 1.5 % (e.g. RAMP = 100 MiB) SARA settles into a two-period cycle
/// instead (slow in-job correction, then the 1/n_remain end-of-period term overcorrects).
pub(super) struct Plant {
    fake: Fake,
    running: Option<(u64, u64, f64)>, // (job, release, remaining work ns)
    pending: VecDeque<(u64, u64)>,
    next_job: u64,
    stall_acc_ns: f64,
    /// (job, release, end, dropped)
    pub(super) finished: Vec<(u64, u64, u64, bool)>,
    /// How much slower than BCET the job's CPU work runs (1.0: Eq. 1 holds; above: the task
    /// also waits for a CPU, which no memory limit changes).
    cpu_slowdown: f64,
}

pub(super) const PLANT_L: u64 = 5 * MS;
pub(super) const PLANT_PERIOD: u64 = 1_000 * MS;
pub(super) const PLANT_BCET: u64 = 500 * MS;
pub(super) const PLANT_NEED: u64 = 100 * MIB;
/// Shortage at which the task stalls all the time.
pub(super) const PLANT_RAMP: u64 = 40 * MIB;
pub(super) const PLANT_TOTAL: u64 = 200 * MIB;

impl Plant {
    pub(super) fn new() -> Self {
        let mut fake = Fake::new(PLANT_TOTAL, vec![srt("rt", PLANT_PERIOD, PLANT_BCET, 10 * MIB), nrt("batch", 10 * MIB)]);
        fake.groups[1].usage_bytes = PLANT_TOTAL;
        Plant { fake, running: None, pending: VecDeque::new(), next_job: 0, stall_acc_ns: 0.0, finished: Vec::new(), cpu_slowdown: 1.0 }
    }

    pub(super) fn with_cpu_slowdown(cpu_slowdown: f64) -> Self {
        Plant { cpu_slowdown, ..Plant::new() }
    }

    fn stall_share(&self) -> f64 {
        let limit = self.fake.groups[0].knobs.max_bytes.unwrap_or(u64::MAX);
        (PLANT_NEED.saturating_sub(limit) as f64 / PLANT_RAMP as f64).min(1.0)
    }

    fn start_next(&mut self) {
        if self.running.is_none() {
            if let Some((job, release)) = self.pending.pop_front() {
                self.running = Some((job, release, PLANT_BCET as f64));
            }
        }
    }

    /// Advances from `t` to `t + PLANT_L`, releasing a job at period boundaries.
    fn advance(&mut self, t: u64) {
        if t == self.next_job * PLANT_PERIOD {
            self.next_job += 1;
            self.pending.push_back((self.next_job, t));
            self.fake.release(0, self.next_job, t, t + PLANT_PERIOD);
            self.start_next();
        }
        let end = (t + PLANT_L) as f64;
        let mut cursor = t as f64;
        let f = self.stall_share();
        while let Some((job, release, work)) = self.running {
            if f >= 1.0 {
                self.stall_acc_ns += end - cursor;
                break;
            }
            let to_finish = work * self.cpu_slowdown / (1.0 - f);
            if cursor + to_finish <= end {
                self.stall_acc_ns += f * to_finish;
                cursor += to_finish;
                let at_ns = cursor.round() as u64;
                self.fake.complete(0, job, at_ns);
                self.finished.push((job, release, at_ns, false));
                self.running = None;
                self.start_next();
            } else {
                self.stall_acc_ns += f * (end - cursor);
                self.running = Some((job, release, work - (end - cursor) * (1.0 - f) / self.cpu_slowdown));
                break;
            }
        }
        let stall_us = (self.stall_acc_ns / 1_000.0) as u64;
        let s = &mut self.fake.groups[0].stall;
        s.memory_some_us = stall_us;
        s.memory_full_us = stall_us;
        let limit = self.fake.groups[0].knobs.max_bytes.unwrap_or(u64::MAX);
        self.fake.groups[0].usage_bytes = PLANT_NEED.min(limit);
    }

    pub(super) fn run(&mut self, c: &mut dyn Controller, periods: u64) -> Vec<u64> {
        let mut srt_limit_trace = Vec::new();
        let mut t = 0;
        while t < periods * PLANT_PERIOD {
            let actions = self.fake.tick(c, t);
            for (group, job) in drops(&actions) {
                if group == 0 && self.running.is_some_and(|r| r.0 == job) {
                    let (job, release, _) = self.running.take().unwrap();
                    self.fake.events.push(JobEvent::Drop { group, job, at_ns: t });
                    self.finished.push((job, release, t, true));
                    self.start_next();
                }
            }
            srt_limit_trace.push(self.fake.groups[0].knobs.max_bytes.unwrap_or(self.fake.groups[0].usage_bytes));
            self.advance(t);
            t += PLANT_L;
        }
        srt_limit_trace
    }
}

#[test]
fn sara_closes_the_loop_on_a_toy_plant_and_greedy_holds_everything() {
    let periods = 40;
    let mut plant = Plant::new();
    let mut c = sara(SaraConfig::default());
    let trace = plant.run(&mut c, periods);
    // After a 10-period warm-up every job ends at its deadline: at most one interval early
    // (SARA acts once per interval) and at most 0.1 ms late. Eq. 4 aims at the deadline itself
    // (s_period = d − BCET, no margin), so equality is the target and the residual either side is
    // Eq. 6's integer truncation and PSI's microsecond resolution.
    let settled: Vec<_> = plant.finished.iter().filter(|j| j.0 > 10).collect();
    assert!(settled.len() >= 25, "jobs finished: {}", plant.finished.len());
    for &&(job, release, end, dropped) in &settled {
        let response = end - release;
        assert!(!dropped, "job {job} dropped");
        assert!(response <= PLANT_PERIOD + 100_000, "job {job} late: {response} ns");
        assert!(response >= PLANT_PERIOD - PLANT_L, "job {job} early: {response} ns");
    }
    // The equilibrium the formulas predict: a stall share of 0.5 in every interval (s_ideal =
    // d − BCET = half the period) needs a limit of NEED − 0.5 · RAMP = 80 MiB.
    let tail = &trace[trace.len() - 2 * (PLANT_PERIOD / PLANT_L) as usize..];
    let mean_limit = tail.iter().sum::<u64>() / tail.len() as u64;
    assert!((78 * MIB..=82 * MIB).contains(&mean_limit), "mean soft-RT limit {mean_limit} bytes");
    let sara_nrt = plant.fake.groups[1].knobs.max_bytes.unwrap();

    let mut plant = Plant::new();
    let mut g = Greedy::new(GreedyConfig::default());
    let trace = plant.run(&mut g, 5);
    assert!(plant.finished.iter().all(|&(_, release, end, _)| end - release == PLANT_BCET), "greedy jobs never stall");
    assert_eq!(*trace.last().unwrap(), PLANT_NEED, "greedy's soft-RT task holds all it needs");
    let greedy_nrt = plant.fake.groups[1].knobs.max_bytes.unwrap();
    assert_eq!(greedy_nrt, PLANT_TOTAL - PLANT_NEED);
    assert!(sara_nrt >= greedy_nrt + 15 * MIB, "SARA gives non-RT {} MiB, Greedy {} MiB", sara_nrt / MIB, greedy_nrt / MIB);
}
