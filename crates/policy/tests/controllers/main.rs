//! Behaviour of every controller on synthetic observation sequences, with expectations computed
//! by hand from the published formulas (SARA Eq. 3–6 and Definition 1, TMO's reclaim rule,
//! senpai.py's update rule), property tests over random sequences, and a toy plant that closes
//! SARA's control loop.

use std::collections::VecDeque;

use critmem_policy::*;
use proptest::prelude::*;
use serde_json::json;

const MIB: u64 = 1 << 20;
const MS: u64 = 1_000_000;

fn srt(name: &str, deadline_ns: u64, bcet_ns: u64, floor_bytes: u64) -> GroupObservation {
    GroupObservation {
        name: name.into(),
        role: GroupRole::SoftRealTime { deadline_ns, bcet_ns },
        stall: StallTotals::default(),
        usage_bytes: 0,
        knobs: MemoryKnobs::default(),
        floor_bytes,
        cpu_usage_us: 0,
        bandwidth: BandwidthKnobs::default(),
    }
}

fn nrt(name: &str, floor_bytes: u64) -> GroupObservation {
    GroupObservation {
        name: name.into(),
        role: GroupRole::NonRealTime,
        stall: StallTotals::default(),
        usage_bytes: 0,
        knobs: MemoryKnobs::default(),
        floor_bytes,
        cpu_usage_us: 0,
        bandwidth: BandwidthKnobs::default(),
    }
}

/// A platform stand-in: holds the groups, applies actions to their knobs like cgroupfs would.
struct Fake {
    now_ns: u64,
    total: u64,
    groups: Vec<GroupObservation>,
    events: Vec<JobEvent>,
}

impl Fake {
    fn new(total: u64, groups: Vec<GroupObservation>) -> Self {
        Fake { now_ns: 0, total, groups, events: Vec::new() }
    }

    fn obs(&mut self) -> Observation {
        Observation {
            now_ns: self.now_ns,
            total_memory_bytes: self.total,
            cpus: 2,
            groups: self.groups.clone(),
            events: std::mem::take(&mut self.events),
        }
    }

    /// Adds `memory_us` of memory `some`/`full` stall and `io_us` of I/O stall to group `g`.
    fn stall(&mut self, g: usize, memory_us: u64, io_us: u64) {
        let s = &mut self.groups[g].stall;
        s.memory_some_us += memory_us;
        s.memory_full_us += memory_us;
        s.io_some_us += io_us;
        s.io_full_us += io_us;
    }

    fn release(&mut self, group: usize, job: u64, at_ns: u64, deadline_ns: u64) {
        self.events.push(JobEvent::Release { group, job, at_ns, deadline_ns });
    }

    fn complete(&mut self, group: usize, job: u64, at_ns: u64) {
        self.events.push(JobEvent::Completion { group, job, at_ns });
    }

    fn apply(&mut self, actions: &[Action]) {
        for a in actions {
            match *a {
                Action::SetMax { group, bytes } => self.groups[group].knobs.max_bytes = bytes,
                Action::SetHigh { group, bytes } => self.groups[group].knobs.high_bytes = bytes,
                Action::SetMin { group, bytes } => self.groups[group].knobs.min_bytes = bytes,
                Action::SetLow { group, bytes } => self.groups[group].knobs.low_bytes = bytes,
                Action::SetCpuMax { group, millicpus } => self.groups[group].bandwidth.cpu_millicpus = millicpus,
                Action::SetIoMax { group, read_bytes_per_s, write_bytes_per_s } => {
                    let b = &mut self.groups[group].bandwidth;
                    (b.io_read_bytes_per_s, b.io_write_bytes_per_s) = (read_bytes_per_s, write_bytes_per_s);
                }
                Action::DropJob { .. } | Action::Reclaim { .. } => {}
            }
        }
    }

    /// One tick at `now_ns`: observe, decide, apply.
    fn tick(&mut self, c: &mut dyn Controller, now_ns: u64) -> Vec<Action> {
        self.now_ns = now_ns;
        let obs = self.obs();
        let actions = c.tick(&obs);
        self.apply(&actions);
        actions
    }
}

fn drops(actions: &[Action]) -> Vec<(usize, u64)> {
    actions
        .iter()
        .filter_map(|a| match *a {
            Action::DropJob { group, job } => Some((group, job)),
            _ => None,
        })
        .collect()
}

fn sara(cfg: SaraConfig) -> Sara {
    Sara::new(cfg).unwrap()
}

/// SARA with a 512 MiB starting limit on a 1 GiB machine: one soft-RT group (d = 100 ms,
/// BCET = 57 ms, so s_ideal_period = 43 ms = 20 intervals of 5 ms) and one non-RT group.
fn sara_setup(cfg: SaraConfig) -> (Sara, Fake) {
    let fake = Fake::new(1 << 30, vec![srt("rt", 100 * MS, 57 * MS, 0), nrt("batch", 0)]);
    (sara(SaraConfig { initial_limit_bytes: Some(512 * MIB), ..cfg }), fake)
}

/// Releases job 1 at t = 0 (deadline 100 ms) and takes the baseline tick.
fn start_first_job(c: &mut Sara, f: &mut Fake) {
    f.release(0, 1, 0, 100 * MS);
    f.tick(c, 0);
}

/// The wire form the Python controllers and the Linux controller host send: each action's
/// serde form, the reclaim included.
#[test]
fn actions_cross_the_wire_in_their_serde_form() {
    let wire = json!([
        { "SetMax": { "group": 1, "bytes": null } },
        { "DropJob": { "group": 0, "job": 7 } },
        { "Reclaim": { "group": 1, "bytes": 8_388_608 } },
    ]);
    let actions: Vec<Action> = serde_json::from_value(wire.clone()).unwrap();
    assert_eq!(
        actions,
        [Action::SetMax { group: 1, bytes: None }, Action::DropJob { group: 0, job: 7 }, Action::Reclaim { group: 1, bytes: 8 << 20 }]
    );
    assert_eq!(serde_json::to_value(&actions).unwrap(), wire);
    assert_eq!(actions.iter().map(Action::group).collect::<Vec<_>>(), [1, 0, 1]);
    let bad = serde_json::from_value::<Vec<Action>>(json!([{ "Reclaim": { "group": 0, "bytes": null } }]));
    assert!(bad.is_err(), "a reclaim needs its bytes");
}

mod factory;
mod fixed;
mod plant;
mod props;
mod sara;
mod senpai;
mod tailguard;
mod tmo;
