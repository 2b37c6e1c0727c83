//! Per-group job accounting from the job socket, and, where asked, the jobs one by one.

use super::*;
use critmem_core::{Nanos, TaskStats};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// What a group used in one control interval.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IntervalUse {
    /// `max(Δ memory some, Δ io some)`: SARA's `s_intv` (Eq. 3).
    pub stall_us: u64,
    /// CPU time used, and time a task waited for a CPU (`cpu.pressure` some), where known.
    pub cpu_us: Option<(u64, u64)>,
}

/// Per-group job accounting from the job socket.
#[derive(Clone, Debug, Default)]
pub struct JobCounts {
    pub released: u64,
    pub completed: u64,
    pub dropped: u64,
    /// Completions at or before the released deadline.
    pub deadline_hits: u64,
    /// Completions after the released deadline.
    pub completed_late: u64,
    /// Of the completions whose release was seen: the longest and the summed response time,
    /// and the longest time past the deadline.
    pub max_response_ns: u64,
    pub total_response_ns: u128,
    pub max_tardiness_ns: u64,
    /// Released jobs not yet completed or dropped, by job number.
    open: BTreeMap<u64, OpenJob>,
    /// The jobs one by one, when kept ([`JobCounts::keep_rows`]).
    log: Option<JobLog>,
}

#[derive(Clone, Copy, Debug)]
struct OpenJob {
    release_ns: u64,
    deadline_ns: u64,
}

/// One job as its reports on the job socket described it (CLOCK_MONOTONIC times).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct JobTrace {
    pub job: u64,
    /// None for a completion or drop whose release never arrived (a lost report).
    pub release_ns: Option<u64>,
    pub deadline_ns: Option<u64>,
    pub completion_ns: Option<u64>,
    pub drop_ns: Option<u64>,
    /// When the job could start: its release, or the end of the job before it if later (a
    /// group's jobs run one after another). None for a job that never became the running one.
    pub start_ns: Option<u64>,
    /// `s_period` of SARA's Eq. 2: the sum over the control ticks while this was the group's
    /// running job of `max(Δ memory some, Δ io some)` (Eq. 3), in µs; a tick's interval counts
    /// for the job running when it began. None where `start_ns` is.
    pub stall_us: Option<u64>,
    /// CPU time the group used over the same intervals (`cpu.stat` usage), in µs; None where
    /// the kernel has no per-group `cpu.stat` or the job never ran.
    pub cpu_us: Option<u64>,
    /// Time over the same intervals in which a task of the group waited for a CPU
    /// (`cpu.pressure` some), in µs; None as `cpu_us`.
    pub cpu_wait_us: Option<u64>,
}

/// How a job ended, judged at the end of the run as [`JobCounts::task_stats`] judges it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JobOutcome {
    Completed,
    /// Dropped (at the controller's request or by the workload): a deadline miss.
    Dropped,
    /// Neither completed nor dropped, and its deadline had passed at the end: a miss.
    Unfinished,
    /// Neither completed nor dropped, and its deadline still ahead at the end: not judged.
    Pending,
}

impl JobOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            JobOutcome::Completed => "completed",
            JobOutcome::Dropped => "dropped",
            JobOutcome::Unfinished => "unfinished",
            JobOutcome::Pending => "pending",
        }
    }
}

impl JobTrace {
    pub fn outcome(&self, end_ns: u64) -> JobOutcome {
        match (self.completion_ns, self.drop_ns, self.deadline_ns) {
            (Some(_), _, _) => JobOutcome::Completed,
            (None, Some(_), _) => JobOutcome::Dropped,
            (None, None, Some(deadline_ns)) if deadline_ns < end_ns => JobOutcome::Unfinished,
            (None, None, _) => JobOutcome::Pending,
        }
    }

    /// Completion − release, where both are known (saturating, as the counts take it).
    pub fn response_ns(&self) -> Option<u64> {
        Some(self.completion_ns?.saturating_sub(self.release_ns?))
    }

    /// How far past its deadline the job ended, as the task's `max_tardiness_ms` counts it: a
    /// completed job's completion − deadline, an unfinished one's `end_ns` − deadline, 0 for
    /// one pending, none for a dropped job (it produced no result) or an unknown deadline.
    pub fn tardiness_ns(&self, end_ns: u64) -> Option<u64> {
        let deadline_ns = self.deadline_ns?;
        match self.outcome(end_ns) {
            JobOutcome::Completed => self.completion_ns.map(|c| c.saturating_sub(deadline_ns)),
            JobOutcome::Unfinished => Some(end_ns - deadline_ns),
            JobOutcome::Pending => Some(0),
            JobOutcome::Dropped => None,
        }
    }

    /// A deadline miss as the task's `deadline_misses` counts it (a completion whose release
    /// never arrived is not judged).
    pub fn missed(&self, end_ns: u64) -> bool {
        match self.outcome(end_ns) {
            JobOutcome::Completed => matches!((self.completion_ns, self.deadline_ns), (Some(c), Some(d)) if c > d),
            JobOutcome::Dropped | JobOutcome::Unfinished => true,
            JobOutcome::Pending => false,
        }
    }
}

/// A group's jobs one by one, at most as many as a budget shared with other groups allows.
#[derive(Clone, Debug)]
struct JobLog {
    /// In the order of each job's first report.
    rows: Vec<JobTrace>,
    /// Rows of jobs neither completed nor dropped, by job number.
    open: BTreeMap<u64, usize>,
    /// Rows still to be had, over every group sharing it.
    budget: Arc<AtomicUsize>,
    /// Jobs released when the budget was spent: counted, not kept.
    left_out: u64,
    /// The row of the job running now: the oldest open one.
    running: Option<usize>,
}

impl JobLog {
    /// A new row, if the budget has one.
    fn push(&mut self, row: JobTrace) -> Option<usize> {
        self.budget.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |left| left.checked_sub(1)).ok()?;
        self.rows.push(row);
        Some(self.rows.len() - 1)
    }

    fn record(&mut self, job: u64, op: JobOp, at_ns: u64) {
        match op {
            JobOp::Release { deadline_ns } => {
                let row = JobTrace { job, release_ns: Some(at_ns), deadline_ns: Some(deadline_ns), ..JobTrace::default() };
                match self.push(row) {
                    Some(index) => {
                        self.open.insert(job, index);
                        if self.running.is_none() {
                            self.start(index, at_ns);
                        }
                    }
                    None => {
                        self.left_out += 1;
                        // A job number used again: the earlier job's row is no longer the one reported on.
                        self.open.remove(&job);
                    }
                }
            }
            JobOp::Complete | JobOp::Drop => {
                let index = match self.open.remove(&job) {
                    Some(index) => index,
                    // Its release was lost (the counts take it the same way); a job released
                    // once the budget was spent is already counted as left out.
                    None => match self.push(JobTrace { job, ..JobTrace::default() }) {
                        Some(index) => index,
                        None => return,
                    },
                };
                let row = &mut self.rows[index];
                if op == JobOp::Complete {
                    row.completion_ns = Some(at_ns);
                } else {
                    row.drop_ns = Some(at_ns);
                }
                if self.running == Some(index) {
                    self.running = None;
                    // Rows are pushed in release order: the lowest open index is the oldest.
                    if let Some(&next) = self.open.values().min() {
                        self.start(next, at_ns);
                    }
                }
            }
        }
    }

    fn start(&mut self, index: usize, at_ns: u64) {
        let row = &mut self.rows[index];
        row.start_ns = Some(row.release_ns.map_or(at_ns, |r| r.max(at_ns)));
        row.stall_us = Some(0);
        self.running = Some(index);
    }

    fn add_interval(&mut self, interval: &IntervalUse) {
        let Some(row) = self.running.map(|i| &mut self.rows[i]) else { return };
        if let Some(stall) = row.stall_us.as_mut() {
            *stall += interval.stall_us;
        }
        if let Some((cpu_us, wait_us)) = interval.cpu_us {
            *row.cpu_us.get_or_insert(0) += cpu_us;
            *row.cpu_wait_us.get_or_insert(0) += wait_us;
        }
    }
}

impl JobCounts {
    /// Released jobs neither completed nor dropped whose deadline is before `now_ns`: misses
    /// nobody reported (a workload that stopped, or one killed at the end of a run).
    pub fn overdue(&self, now_ns: u64) -> u64 {
        self.open.values().filter(|j| j.deadline_ns < now_ns).count() as u64
    }

    /// The counts as the simulator's per-task totals, judged at `end_ns` (the end of the run):
    /// a dropped job is aborted, and so a deadline miss; a job still open is a miss if its
    /// deadline has passed, else pending; killed and skipped jobs are not reported on the job
    /// socket (0).
    pub fn task_stats(&self, end_ns: u64) -> TaskStats {
        let mut stats = TaskStats {
            released: self.released,
            completed: self.completed,
            deadline_misses: self.completed_late + self.dropped,
            aborted: self.dropped,
            dropped: self.dropped,
            max_response: (self.completed > 0).then_some(Nanos(self.max_response_ns)),
            total_response: self.total_response_ns,
            max_tardiness: Nanos(self.max_tardiness_ns),
            ..TaskStats::default()
        };
        for job in self.open.values() {
            judge_unfinished(&mut stats, job.deadline_ns, end_ns);
        }
        stats
    }

    /// Keeps the jobs reported from now on one by one ([`JobCounts::rows`]), each new row
    /// taken from `budget` (shared with other groups, so a run's rows stay bounded); once it
    /// is spent, further jobs are only counted ([`JobCounts::rows_left_out`]).
    pub fn keep_rows(&mut self, budget: Arc<AtomicUsize>) {
        self.log = Some(JobLog { rows: Vec::new(), open: BTreeMap::new(), budget, left_out: 0, running: None });
    }

    /// Whether the jobs are kept one by one (their stall then needs fresh PSI every tick).
    pub fn keeps_rows(&self) -> bool {
        self.log.is_some()
    }

    /// Adds what the group used in one control interval to the kept row of the job running
    /// since the interval began.
    pub fn add_interval(&mut self, interval: &IntervalUse) {
        if let Some(log) = self.log.as_mut() {
            log.add_interval(interval);
        }
    }

    /// The jobs kept one by one, in the order of their first report (empty unless kept).
    /// Each agrees with the counts: as many `completed`, `dropped`, missed and pending rows
    /// as [`JobCounts::task_stats`] counts, unless rows were left out, a client kept more
    /// than [`critmem_policy::MAX_PENDING_JOBS`] jobs open (the counts then forget the
    /// oldest; their rows are still judged) or released a job number again while it was open.
    pub fn rows(&self) -> &[JobTrace] {
        self.log.as_ref().map_or(&[], |log| &log.rows)
    }

    /// Jobs released once the row budget was spent.
    pub fn rows_left_out(&self) -> u64 {
        self.log.as_ref().map_or(0, |log| log.left_out)
    }

    /// Counts one report: job `job` was released, completed or dropped at `at_ns`.
    pub fn record(&mut self, job: u64, op: JobOp, at_ns: u64) {
        if let Some(log) = self.log.as_mut() {
            log.record(job, op, at_ns);
        }
        match op {
            JobOp::Release { deadline_ns } => {
                self.released += 1;
                self.open.insert(job, OpenJob { release_ns: at_ns, deadline_ns });
                // A client that never completes must not grow this without bound (the
                // controllers keep no more waiting jobs than this either).
                while self.open.len() > critmem_policy::MAX_PENDING_JOBS {
                    self.open.pop_first();
                }
            }
            JobOp::Complete => self.complete(job, at_ns),
            JobOp::Drop => {
                self.dropped += 1;
                self.open.remove(&job);
            }
        }
    }

    fn complete(&mut self, job: u64, at_ns: u64) {
        self.completed += 1;
        let Some(open) = self.open.remove(&job) else { return };
        let response_ns = at_ns.saturating_sub(open.release_ns);
        self.max_response_ns = self.max_response_ns.max(response_ns);
        self.total_response_ns += u128::from(response_ns);
        if at_ns <= open.deadline_ns {
            self.deadline_hits += 1;
        } else {
            self.completed_late += 1;
            self.max_tardiness_ns = self.max_tardiness_ns.max(at_ns - open.deadline_ns);
        }
    }
}

/// Counts a job still unfinished at `end_ns` into `stats` as the simulator does at its
/// horizon: a deadline miss (late by `end_ns - deadline_ns`) once its deadline has passed,
/// else pending.
pub fn judge_unfinished(stats: &mut TaskStats, deadline_ns: u64, end_ns: u64) {
    if deadline_ns < end_ns {
        stats.deadline_misses += 1;
        stats.max_tardiness = stats.max_tardiness.max(Nanos(end_ns - deadline_ns));
    } else {
        stats.pending += 1;
    }
}

impl LinuxPlatform {
    /// Keeps the jobs of `groups` one by one from now on ([`JobCounts::rows`]), at most
    /// `limit` rows over all of them.
    pub fn keep_job_rows(&mut self, groups: &[GroupId], limit: usize) {
        let budget = Arc::new(AtomicUsize::new(limit));
        for &g in groups {
            if let Some(group) = self.groups.get_mut(g) {
                group.jobs.keep_rows(budget.clone());
            }
        }
    }

    /// Reads what the job socket still holds (reports sent before a stop that no tick read),
    /// into the job counts, for up to `budget`: until no connection has more to read.
    pub fn drain_job_reports(&mut self, budget: Duration) {
        let until = std::time::Instant::now() + budget;
        while std::time::Instant::now() < until && self.server.as_ref().is_some_and(JobServer::has_input) {
            let now_ns = self.clock.now_ns();
            self.take_job_events(now_ns);
        }
    }

    pub(super) fn take_job_events(&mut self, now_ns: u64) -> Vec<JobEvent> {
        let Some(server) = self.server.as_mut() else { return Vec::new() };
        let mut events = Vec::new();
        for report in server.poll() {
            let at_ns = report.at_ns.unwrap_or(now_ns);
            let (group, job) = (report.group, report.job);
            self.groups[group].jobs.record(job, report.op, at_ns);
            events.push(match report.op {
                JobOp::Release { deadline_ns } => JobEvent::Release { group, job, at_ns, deadline_ns },
                JobOp::Complete => JobEvent::Completion { group, job, at_ns },
                JobOp::Drop => JobEvent::Drop { group, job, at_ns },
            });
        }
        events
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn release(c: &mut JobCounts, job: u64, release_ns: u64, deadline_ns: u64) {
        c.record(job, JobOp::Release { deadline_ns }, release_ns);
    }

    /// The counts of the test below, job by job.
    fn five_jobs(counts: &mut JobCounts) {
        release(counts, 0, 0, 10);
        counts.record(0, JobOp::Complete, 4); // on time, response 4
        release(counts, 1, 10, 20);
        counts.record(1, JobOp::Complete, 26); // 6 late, response 16
        release(counts, 2, 20, 30);
        counts.record(2, JobOp::Drop, 25); // dropped by the controller
        release(counts, 3, 30, 40); // unfinished, deadline passed at the end (45): 5 late
        release(counts, 4, 40, 50); // unfinished, deadline ahead: pending
    }

    #[test]
    fn socket_counts_become_the_simulators_totals_judged_at_the_end_of_the_run() {
        let mut counts = JobCounts::default();
        five_jobs(&mut counts);
        let stats = counts.task_stats(45);
        assert_eq!(
            (stats.released, stats.completed, stats.deadline_misses, stats.aborted, stats.dropped, stats.pending),
            (5, 2, 3, 1, 1, 1)
        );
        assert_eq!((stats.max_response, stats.mean_response(), stats.max_tardiness), (Some(Nanos(16)), Some(Nanos(10)), Nanos(6)));
        assert_eq!(stats.hit_ratio(), Some(0.25));
        assert_eq!(counts.overdue(45), 1);
        assert!(counts.rows().is_empty(), "rows are kept only where asked");
    }

    #[test]
    fn kept_rows_are_judged_as_the_counts_are() {
        let mut counts = JobCounts::default();
        counts.keep_rows(Arc::new(AtomicUsize::new(100)));
        five_jobs(&mut counts);
        let end_ns = 45;
        let stats = counts.task_stats(end_ns);
        let rows = counts.rows();
        let outcomes: Vec<&str> = rows.iter().map(|r| r.outcome(end_ns).as_str()).collect();
        assert_eq!(outcomes, ["completed", "completed", "dropped", "unfinished", "pending"]);
        assert_eq!(rows.iter().map(|r| r.response_ns()).collect::<Vec<_>>(), [Some(4), Some(16), None, None, None]);
        assert_eq!(rows.iter().map(|r| r.tardiness_ns(end_ns)).collect::<Vec<_>>(), [Some(0), Some(6), None, Some(5), Some(0)]);
        assert_eq!(rows[2].drop_ns, Some(25));
        let missed = rows.iter().filter(|r| r.missed(end_ns)).count() as u64;
        let pending = rows.iter().filter(|r| r.outcome(end_ns) == JobOutcome::Pending).count() as u64;
        assert_eq!((rows.len() as u64, missed, pending), (stats.released, stats.deadline_misses, stats.pending));
        let worst = rows.iter().filter(|r| r.missed(end_ns)).filter_map(|r| r.tardiness_ns(end_ns)).max();
        assert_eq!(worst, Some(stats.max_tardiness.0));
        assert_eq!(rows.iter().filter_map(JobTrace::response_ns).max(), stats.max_response.map(|n| n.0));
    }

    #[test]
    fn a_completion_without_its_release_is_a_row_of_its_own_and_not_a_miss() {
        let mut counts = JobCounts::default();
        counts.keep_rows(Arc::new(AtomicUsize::new(100)));
        counts.record(7, JobOp::Complete, 70);
        counts.record(8, JobOp::Drop, 80);
        let rows = counts.rows();
        assert_eq!(rows[0], JobTrace { job: 7, completion_ns: Some(70), ..JobTrace::default() });
        assert_eq!(
            (rows[0].outcome(100), rows[0].missed(100), rows[0].response_ns(), rows[0].tardiness_ns(100)),
            (JobOutcome::Completed, false, None, None)
        );
        assert_eq!((rows[1].outcome(100), rows[1].missed(100)), (JobOutcome::Dropped, true));
        let stats = counts.task_stats(100);
        assert_eq!((stats.completed, stats.dropped, stats.deadline_misses), (1, 1, 1));
    }

    /// Each interval's stall lands on the job running when it began; a job queued behind an
    /// overrunning one starts when that one ends.
    #[test]
    fn kept_rows_carry_each_jobs_start_and_the_stall_of_its_intervals() {
        let mut counts = JobCounts::default();
        counts.keep_rows(Arc::new(AtomicUsize::new(100)));
        let stall = |us| IntervalUse { stall_us: us, cpu_us: Some((10 * us, us / 2)) };
        counts.add_interval(&stall(7)); // nothing running: idle stall belongs to no job
        release(&mut counts, 0, 0, 10);
        counts.add_interval(&stall(3));
        release(&mut counts, 1, 10, 20); // job 0 overruns its period
        counts.add_interval(&stall(4));
        counts.record(0, JobOp::Complete, 12);
        counts.add_interval(&stall(5));
        counts.record(1, JobOp::Drop, 15);
        counts.add_interval(&stall(6));
        let rows = counts.rows();
        assert_eq!((rows[0].start_ns, rows[0].stall_us, rows[0].cpu_us, rows[0].cpu_wait_us), (Some(0), Some(7), Some(70), Some(3)));
        assert_eq!((rows[1].start_ns, rows[1].stall_us, rows[1].cpu_us), (Some(12), Some(5), Some(50)));
        release(&mut counts, 2, 20, 30);
        assert_eq!(counts.rows()[2].start_ns, Some(20), "a job released with none running starts at its release");
        counts.record(9, JobOp::Complete, 25); // its release lost: never running
        assert_eq!((counts.rows()[3].start_ns, counts.rows()[3].stall_us), (None, None));
    }

    #[test]
    fn groups_share_one_row_budget_and_count_what_they_leave_out() {
        let budget = Arc::new(AtomicUsize::new(3));
        let (mut a, mut b) = (JobCounts::default(), JobCounts::default());
        a.keep_rows(budget.clone());
        b.keep_rows(budget);
        for job in 0..2 {
            release(&mut a, job, job * 10, job * 10 + 10);
            release(&mut b, job, job * 10, job * 10 + 10);
        }
        b.record(1, JobOp::Complete, 15); // its release found no room: no row, no new one
        release(&mut a, 2, 20, 30);
        assert_eq!((a.rows().len(), b.rows().len()), (2, 1));
        assert_eq!((a.rows_left_out(), b.rows_left_out()), (1, 1));
        assert_eq!((a.released, b.released, b.completed), (3, 2, 1), "the counts count every job");
        a.record(1, JobOp::Complete, 12);
        assert_eq!(a.rows()[1].completion_ns, Some(12), "a kept job's completion still lands on its row");
    }
}
