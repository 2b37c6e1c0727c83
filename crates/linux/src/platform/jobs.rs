//! Per-group job accounting from the job socket.

use super::*;

/// Per-group job accounting from the job socket.
#[derive(Clone, Debug, Default)]
pub struct JobCounts {
    pub released: u64,
    pub completed: u64,
    pub dropped: u64,
    /// Completions at or before the released deadline.
    pub deadline_hits: u64,
    pub deadline_misses: u64,
    /// Deadlines of released jobs not yet completed or dropped, by job number.
    open: BTreeMap<u64, u64>,
}

impl JobCounts {
    /// Released jobs neither completed nor dropped whose deadline is before `now_ns`: misses
    /// nobody reported (a workload that stopped, or one killed at the end of a run).
    pub fn overdue(&self, now_ns: u64) -> u64 {
        self.open.values().filter(|&&d| d < now_ns).count() as u64
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
                    jobs.open.insert(job, deadline_ns);
                    // A client that never completes must not grow this without bound (the
                    // controllers keep no more waiting jobs than this either).
                    while jobs.open.len() > critmem_policy::MAX_PENDING_JOBS {
                        jobs.open.pop_first();
                    }
                    JobEvent::Release { group, job, at_ns, deadline_ns }
                }
                JobOp::Complete => {
                    jobs.completed += 1;
                    if let Some(deadline_ns) = jobs.open.remove(&job) {
                        if at_ns <= deadline_ns {
                            jobs.deadline_hits += 1;
                        } else {
                            jobs.deadline_misses += 1;
                        }
                    }
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
