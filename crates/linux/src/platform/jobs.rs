//! Per-group job accounting from the job socket.

use super::*;
use critmem_core::{Nanos, TaskStats};

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
}

#[derive(Clone, Copy, Debug)]
struct OpenJob {
    release_ns: u64,
    deadline_ns: u64,
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
    pub(super) fn take_job_events(&mut self, now_ns: u64) -> Vec<JobEvent> {
        let Some(server) = self.server.as_mut() else { return Vec::new() };
        let mut events = Vec::new();
        for report in server.poll() {
            let at_ns = report.at_ns.unwrap_or(now_ns);
            let (group, job) = (report.group, report.job);
            let jobs = &mut self.groups[group].jobs;
            events.push(match report.op {
                JobOp::Release { deadline_ns } => {
                    jobs.released += 1;
                    jobs.open.insert(job, OpenJob { release_ns: at_ns, deadline_ns });
                    // A client that never completes must not grow this without bound (the
                    // controllers keep no more waiting jobs than this either).
                    while jobs.open.len() > critmem_policy::MAX_PENDING_JOBS {
                        jobs.open.pop_first();
                    }
                    JobEvent::Release { group, job, at_ns, deadline_ns }
                }
                JobOp::Complete => {
                    jobs.complete(job, at_ns);
                    JobEvent::Completion { group, job, at_ns }
                }
                JobOp::Drop => {
                    jobs.dropped += 1;
                    jobs.open.remove(&job);
                    JobEvent::Drop { group, job, at_ns }
                }
            });
        }
        events
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn socket_counts_become_the_simulators_totals_judged_at_the_end_of_the_run() {
        let mut counts = JobCounts::default();
        let release = |c: &mut JobCounts, job: u64, release_ns: u64, deadline_ns: u64| {
            c.released += 1;
            c.open.insert(job, OpenJob { release_ns, deadline_ns });
        };
        release(&mut counts, 0, 0, 10);
        counts.complete(0, 4); // on time, response 4
        release(&mut counts, 1, 10, 20);
        counts.complete(1, 26); // 6 late, response 16
        release(&mut counts, 2, 20, 30);
        counts.dropped += 1; // dropped by the controller
        counts.open.remove(&2);
        release(&mut counts, 3, 30, 40); // unfinished, deadline passed at the end (45): 5 late
        release(&mut counts, 4, 40, 50); // unfinished, deadline ahead: pending
        let stats = counts.task_stats(45);
        assert_eq!(
            (stats.released, stats.completed, stats.deadline_misses, stats.aborted, stats.dropped, stats.pending),
            (5, 2, 3, 1, 1, 1)
        );
        assert_eq!((stats.max_response, stats.mean_response(), stats.max_tardiness), (Some(Nanos(16)), Some(Nanos(10)), Nanos(6)));
        assert_eq!(stats.hit_ratio(), Some(0.25));
        assert_eq!(counts.overdue(45), 1);
    }
}
