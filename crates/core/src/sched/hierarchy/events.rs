//! Child-scheduler event delivery (HiRes Sec. III-C).
//!
//! A server learns that a job below it became eligible (released, woken, or its task's next
//! job let in) only through its child-scheduler thread (cs). Two activations need no event: a
//! job woken by the job that runs in its own leaf (the waker invoked the leaf's scheduler, no
//! parent takes part), and an I/O event thread that outranks what runs ([`super::activation`]). The root sees the event at once
//! and queues it at the top-level server on the job's path. When that server would be
//! dispatched, its cs runs instead while events are pending: the CPU runs no job, and each
//! event takes the server's `event_cost` of CPU time, charged to it and every server above
//! it. A delivered event enters the next server down, whose cs must deliver it in turn, and
//! at the job's leaf server the job becomes one the leaf may dispatch. With nothing else
//! competing a job at depth d therefore starts d deliveries after its event. A cs is
//! preemptible and resumes its partial delivery.
//!
//! A job that blocks in the parent (suspends for I/O, or waits off the CPU for a lock or a
//! stack) is an event as well: it leaves the leaf's queue, and the servers on its path learn
//! it one delivery each, so the next job in them is dispatched only after those deliveries
//! (their threads run first). A job that completes is the child's own doing and needs none.
//!
//! With `pending_event_check` (HiRes's `pevt`) a child dispatches only once no event is
//! pending for it. Without it, an event that arrives while the cs delivers what it was told
//! is the last event is not seen: the child dispatches after that delivery, and the event
//! waits until the parent activates the cs again for another reason, the next event for that
//! server or its next replenishment.

use super::super::{JobKey, ReadyJob};
use super::HierarchyScheduler;
use crate::time::Nanos;
use crate::MAX_TRACE_RECORDS;
use std::collections::VecDeque;

/// "This job became eligible" (or, with `block`, "blocked in the parent"), on its way down to
/// its leaf server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Event {
    key: JobKey,
    seq: u64,
    leaf: usize,
    block: bool,
}

/// The event-delivery state of a hierarchy, per node and per CPU.
pub(super) struct Delivery {
    check: bool,
    /// Events of the current instant, routed to their top-level servers at the decision.
    inbox: Vec<Event>,
    /// Jobs that left the scheduler since the last decision: (key, seq, known to their
    /// leaf). One that comes back before the decision changed its priority; it is no event.
    gone: Vec<(JobKey, u64, bool)>,
    /// Events each server's cs will deliver, oldest first.
    pending: Vec<VecDeque<Event>>,
    /// Events a server's cs missed (without the check), oldest first.
    late: Vec<Vec<Event>>,
    /// CPU time left of the delivery a server's cs has begun.
    delivery_left_ns: Vec<Option<u64>>,
    /// Whether that delivery began as the last event its cs could see.
    last_one: Vec<bool>,
    /// Whether each CPU runs a server's cs (the server is then `running[cpu]`).
    pub(super) on_cs: Vec<bool>,
}

impl Delivery {
    pub(super) fn new(nodes: usize, cpus: usize, check: bool) -> Self {
        Delivery {
            check,
            inbox: Vec::new(),
            gone: Vec::new(),
            pending: vec![VecDeque::new(); nodes],
            late: vec![Vec::new(); nodes],
            delivery_left_ns: vec![None; nodes],
            last_one: vec![false; nodes],
            on_cs: vec![false; cpus],
        }
    }

    /// `job` became eligible in `leaf`. Returns true if the leaf knows it at once: it left
    /// and came back within this instant (a new priority) while the leaf knew it.
    pub(super) fn arrive(&mut self, job: &ReadyJob, leaf: usize) -> bool {
        if let Some(at) = self.gone.iter().position(|&(k, seq, _)| k == job.key && seq == job.seq) {
            // Blocked and back within the instant: no block to tell. Unknown to the leaf, its
            // event is still on its way down.
            self.inbox.retain(|e| !(e.block && e.key == job.key && e.seq == job.seq));
            return self.gone.remove(at).2;
        }
        self.inbox.push(Event { key: job.key, seq: job.seq, leaf, block: false });
        false
    }

    /// Whether `job` left the scheduler at this instant (its return is then a new priority,
    /// which [`Delivery::arrive`] settles).
    pub(super) fn left_this_instant(&self, job: &ReadyJob) -> bool {
        self.gone.iter().any(|&(k, seq, _)| k == job.key && seq == job.seq)
    }

    /// The job (`key`, `seq`), known to `leaf`, blocked in the parent: an event for the leaf
    /// to learn it (after [`Delivery::stopped`]).
    pub(super) fn blocked(&mut self, key: JobKey, seq: u64, leaf: usize) {
        self.inbox.push(Event { key, seq, leaf, block: true });
    }

    /// The job (`key`, `seq`) left the scheduler; `known` if its leaf knew it.
    pub(super) fn stopped(&mut self, key: JobKey, seq: u64, known: bool) {
        self.gone.push((key, seq, known));
    }

    /// A replenishment activates the server's cs afresh: it sees every event it missed.
    pub(super) fn replenished(&mut self, server: usize) {
        self.reveal(server);
    }

    fn reveal(&mut self, server: usize) {
        if !self.late[server].is_empty() {
            let late = std::mem::take(&mut self.late[server]);
            self.pending[server].extend(late);
            self.last_one[server] = false;
        }
    }

    /// When the next delivery under way ends, if no CPU changes before.
    pub(super) fn next_delivery_end(&self, now: Nanos, running: &[Option<usize>]) -> u64 {
        let mut best = u64::MAX;
        for (cpu, &on) in self.on_cs.iter().enumerate() {
            if let (true, Some(server)) = (on, running[cpu]) {
                best = best.min(now.0 + self.delivery_left_ns[server].unwrap_or(0));
            }
        }
        best
    }
}

impl HierarchyScheduler {
    fn delivery(&mut self) -> &mut Delivery {
        self.delivery.as_mut().expect("event delivery is on")
    }

    /// The time `ran_ns` up to `now` that CPU `cpu` ran `node`: if that was the node's cs, it
    /// went to the delivery under way, which ends when none is left.
    pub(super) fn advance_delivery(&mut self, cpu: usize, node: usize, ran_ns: u64, now: Nanos) {
        if !self.delivery().on_cs[cpu] {
            return;
        }
        let n = &mut self.nodes[node];
        n.event_ns += ran_ns;
        let start = Nanos(now.0 - ran_ns);
        let room = n.event_segments.len() < MAX_TRACE_RECORDS;
        match n.event_segments.last_mut() {
            Some(last) if last.1 == start => last.1 = now,
            _ if room => n.event_segments.push((start, now)),
            _ => {}
        }
        let d = self.delivery();
        let left = d.delivery_left_ns[node].as_mut().expect("a cs runs only while it delivers");
        debug_assert!(ran_ns <= *left, "a delivery ran past its end");
        *left = left.saturating_sub(ran_ns);
        if *left == 0 {
            d.delivery_left_ns[node] = None;
            d.last_one[node] = false;
            let ev = d.pending[node].pop_front().expect("a delivery under way has its event");
            self.nodes[node].events_delivered += 1;
            self.pass_down(node, ev);
        }
    }

    /// `server` has delivered `ev`: the job enters its view, or the event the next server's.
    fn pass_down(&mut self, server: usize, ev: Event) {
        if server == ev.leaf && ev.block {
            // The job already left the leaf's queue: the delivery is what the leaf paid.
            return;
        }
        if server == ev.leaf {
            // The job may have left meanwhile (or its slot been reused): then nothing enters.
            if let Some((leaf, key)) = self.leaf_of_job.take(ev.key) {
                self.leaf_of_job.insert(ev.key, (leaf, key));
                if key.seq == ev.seq {
                    self.nodes[leaf].jobs.insert(key, ev.key);
                }
            }
            return;
        }
        let mut child = ev.leaf;
        while self.nodes[child].parent != Some(server) {
            child = self.nodes[child].parent.expect("the leaf is below the server");
        }
        self.queue_at(child, ev);
    }

    /// An event reaches `server`: a server without cost passes it on at once.
    fn queue_at(&mut self, server: usize, ev: Event) {
        if self.nodes[server].cost_ns == 0 {
            self.nodes[server].events_delivered += 1;
            self.pass_down(server, ev);
            return;
        }
        let d = self.delivery();
        if !d.check && d.delivery_left_ns[server].is_some() && d.last_one[server] {
            d.late[server].push(ev);
        } else {
            // The parent activates the cs to deliver it: the cs asks for every event.
            d.reveal(server);
            d.pending[server].push_back(ev);
        }
    }

    /// [`super::super::Scheduler::choose`] with event delivery.
    pub(super) fn choose_with_events(&mut self, now: Nanos, _current: &[Option<JobKey>], assign: &mut [Option<JobKey>]) {
        self.begin_decision(now);
        let d = self.delivery();
        d.gone.clear();
        let inbox = std::mem::take(&mut d.inbox);
        for &ev in &inbox {
            let mut top = ev.leaf;
            while let Some(p) = self.nodes[top].parent.filter(|&p| self.nodes[p].kind.is_some()) {
                top = p;
            }
            self.queue_at(top, ev);
        }
        let mut inbox = inbox;
        inbox.clear();
        self.delivery().inbox = inbox;
        let d = self.delivery.as_ref().expect("event delivery is on");
        for at in 0..self.bottom_up.len() {
            let i = self.bottom_up[at];
            let node = &self.nodes[i];
            let own = if node.children.is_empty() { node.jobs.first().is_some() } else { self.inner_work(i) };
            let work = own || !d.pending[i].is_empty();
            self.idle[i] = !work;
            self.eligible[i] = work && (!node.budgeted() || node.left_ns > 0);
        }
        for (cpu, slot) in assign.iter_mut().enumerate() {
            let mut at = self.roots[cpu];
            let mut job = None;
            let mut on_cs = false;
            if self.eligible[at] {
                loop {
                    // A child dispatches only once its events are delivered; a cs runs first.
                    if !self.delivery().pending[at].is_empty() {
                        on_cs = true;
                        break;
                    }
                    match self.best_child(at) {
                        Some(c) => at = c,
                        None => break,
                    }
                }
                if !on_cs {
                    job = self.nodes[at].jobs.first();
                }
            }
            if on_cs {
                let cost = self.nodes[at].cost_ns;
                let d = self.delivery();
                if d.delivery_left_ns[at].is_none() {
                    d.delivery_left_ns[at] = Some(cost);
                    d.last_one[at] = d.pending[at].len() == 1;
                }
            }
            *slot = job;
            self.running[cpu] = (job.is_some() || on_cs).then_some(at);
            self.assigned[cpu] = job.and_then(|k| self.leaf_of_job.get(k).map(|(_, q)| (k, q)));
            self.delivery().on_cs[cpu] = on_cs;
        }
    }
}
