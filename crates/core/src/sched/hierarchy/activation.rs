//! Activations that need no child-scheduler event (HiRes Sec. III-D): an I/O event thread
//! woken by a packet is dispatched by the kernel without invoking the schedulers when, in
//! every scheduler it shares with the thread that runs, it ranks higher. The schedulers
//! publish their priorities in a region the kernel reads; here the hierarchy compares the
//! same orders its decisions use. Where the comparison fails, the activation is an ordinary
//! event, delivered down the hierarchy.

use super::super::ReadyJob;
use super::{HierarchyScheduler, ServerKind, ServerPolicy};
use crate::time::Nanos;

impl HierarchyScheduler {
    /// Makes `job`, activated at `now`, eligible in its leaf with no event to deliver, if it
    /// outranks what runs on its CPU and every budgeted server above it has budget; whether it
    /// did.
    pub(super) fn activate_at_once(&mut self, now: Nanos, job: &ReadyJob) -> bool {
        let leaf = self.task_leaf[job.task];
        if self.delivery.is_none() || self.nodes[leaf].task_policy.is_some() || !self.outranks_running(now, job, leaf) {
            return false;
        }
        let key = self.nodes[leaf].order.key(job);
        self.leaf_of_job.insert(job.key, (leaf, key));
        self.nodes[leaf].jobs.insert(key, job.key);
        self.nodes[leaf].direct_activations += 1;
        true
    }

    /// Lets `job`, woken by the job that runs in its own leaf, into that leaf with no event:
    /// the leaf's scheduler, which the waker invoked, knows of it; whether it did.
    pub(super) fn wake_in_running_leaf(&mut self, job: &ReadyJob) -> bool {
        let leaf = self.task_leaf[job.task];
        let Some(d) = self.delivery.as_ref() else { return false };
        if self.nodes[leaf].task_policy.is_some() || d.left_this_instant(job) {
            return false;
        }
        let cpu = self.cpu_of(leaf);
        let waker_here = match (self.running[cpu], self.assigned[cpu]) {
            (Some(run), Some((k, q))) => run == leaf && !d.on_cs[cpu] && self.leaf_of_job.get(k) == Some((leaf, q)),
            _ => false,
        };
        if !waker_here {
            return false;
        }
        let key = self.nodes[leaf].order.key(job);
        self.leaf_of_job.insert(job.key, (leaf, key));
        self.nodes[leaf].jobs.insert(key, job.key);
        true
    }

    fn outranks_running(&self, now: Nanos, job: &ReadyJob, leaf: usize) -> bool {
        let cpu = self.cpu_of(leaf);
        let mut at = Some(leaf);
        while let Some(i) = at {
            if self.nodes[i].budgeted() && self.budget_left_ns(i, now, cpu) == 0 {
                return false;
            }
            at = self.nodes[i].parent;
        }
        let Some(run) = self.running[cpu] else { return true };
        let on_cs = self.delivery.as_ref().is_some_and(|d| d.on_cs[cpu]);
        if on_cs && self.is_above_or_at(run, leaf) {
            // The thread delivering events to the subtree runs: its scheduler learns of the
            // event thread with the rest, in order.
            return false;
        }
        if !on_cs && run == leaf {
            return match self.assigned[cpu] {
                Some((k, q)) if self.leaf_of_job.get(k) == Some((leaf, q)) => self.nodes[leaf].order.key(job) < q,
                // The job that ran left at this instant.
                _ => true,
            };
        }
        let mine = self.path_from_root(leaf);
        let theirs = self.path_from_root(run);
        let split = mine.iter().zip(&theirs).take_while(|(a, b)| a == b).count();
        // Below the split both paths run through the same servers, which rank them alike.
        match (mine.get(split), theirs.get(split)) {
            (Some(&a), Some(&b)) => self.ranks_above(mine[split - 1], a, b, now),
            _ => false,
        }
    }

    /// Whether, among the children of `parent`, `a` ranks above `b` in its order at `now`.
    fn ranks_above(&self, parent: usize, a: usize, b: usize, now: Nanos) -> bool {
        let p = &self.nodes[parent];
        if p.windows.is_some() {
            // Only the child whose window is open runs: the one that runs now.
            return false;
        }
        match p.policy {
            ServerPolicy::Edf => (self.period_end_ns(a, now), a) < (self.period_end_ns(b, now), b),
            _ => {
                let at = |c: usize| p.children.iter().position(|&x| x == c);
                at(a) < at(b)
            }
        }
    }

    /// The end of server `i`'s current period as of `now` (a boundary at `now` replenishes).
    fn period_end_ns(&self, i: usize, now: Nanos) -> u64 {
        let n = &self.nodes[i];
        if n.period_ns > 0 && n.next_boundary_ns <= now.0 {
            (now.0 / n.period_ns + 1) * n.period_ns
        } else {
            n.next_boundary_ns
        }
    }

    /// Budget server `i` has at `now`, as the next decision will see it: replenished at a
    /// boundary, lost by an idle polling server, less what ran below it since the last one.
    fn budget_left_ns(&self, i: usize, now: Nanos, cpu: usize) -> u64 {
        let n = &self.nodes[i];
        if n.next_boundary_ns <= now.0 {
            return n.budget_ns;
        }
        if n.kind == Some(ServerKind::Polling) && self.idle[i] && now > self.last_choose {
            return 0;
        }
        match self.running[cpu] {
            Some(r) if self.is_above_or_at(i, r) => n.left_ns.saturating_sub((now - self.last_choose).0),
            _ => n.left_ns,
        }
    }

    /// Whether node `a` is `b` or one of its ancestors.
    fn is_above_or_at(&self, a: usize, mut b: usize) -> bool {
        loop {
            if a == b {
                return true;
            }
            match self.nodes[b].parent {
                Some(p) => b = p,
                None => return false,
            }
        }
    }

    /// The nodes from `i`'s root down to `i`.
    fn path_from_root(&self, mut i: usize) -> Vec<usize> {
        let mut path = vec![i];
        while let Some(p) = self.nodes[i].parent {
            path.push(p);
            i = p;
        }
        path.reverse();
        path
    }
}
