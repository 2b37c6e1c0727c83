//! HiRes's hierarchy of resource reservations (Sec. III-A, Table I of the HiRes paper).
//!
//! Subsystems form a tree under the root (the machine). A subsystem gets resources of one
//! family (CPU, memory, I/O) from its parent through reservations: [`ReservationTree::create`]
//! makes an empty one, [`ReservationTree::bind`] asks for an amount (admission control runs in
//! the parent, once, here), [`ReservationTree::delete`] revokes it, and
//! [`ReservationTree::wait`] hands the child the updates of its soft reservations.
//!
//! - A **hard** reservation is the child's for good: the hard reservations a subsystem gives
//!   out never exceed the hard reservations it holds minus its own overhead (the rule of
//!   Sec. III-A), so a hard guarantee deep in the tree is backed all the way to the root.
//! - A **soft** reservation uses what the hard ones leave and can be taken back. A subsystem
//!   that loses soft resources and has given them on to its own children passes the
//!   revocation down, newest reservation first, until what it gives out fits again.
//!
//! Amounts of every family are integers: memory in bytes, I/O in bytes per second, CPU in
//! parts per 10^12 of one CPU. A CPU reservation's budget/period is rounded up where it is
//! asked for and a capacity rounded down, so admission never lets more through than exact
//! arithmetic would.
//!
//! [`memory`] maps the memory reserved here page by page: HiRes's `alias` and `remove`.

pub mod memory;

use std::collections::VecDeque;
use std::fmt;

pub use memory::{HierMemory, MemoryRefusal, PagesHeld};

/// CPU amounts are parts per 10^12 of one CPU.
pub const CPU_PARTS: u64 = 1_000_000_000_000;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Family {
    Cpu,
    Memory,
    Io,
}

impl Family {
    pub const ALL: [Family; 3] = [Family::Cpu, Family::Memory, Family::Io];

    fn index(self) -> usize {
        self as usize
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Family::Cpu => "cpu",
            Family::Memory => "memory",
            Family::Io => "io",
        }
    }

    /// `amount` in this family's unit, for a person.
    pub fn describe(self, amount: u64) -> String {
        match self {
            Family::Cpu => format!("{:.4} CPU", amount as f64 / CPU_PARTS as f64),
            Family::Memory => format!("{:.2} MiB", amount as f64 / (1u64 << 20) as f64),
            Family::Io => format!("{:.2} MiB/s", amount as f64 / (1u64 << 20) as f64),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    Hard,
    Soft,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Hard => "hard",
            Kind::Soft => "soft",
        }
    }
}

/// What a reservation holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Spec {
    /// `budget_ns` of CPU time every `period_ns`.
    Cpu {
        budget_ns: u64,
        period_ns: u64,
    },
    Memory {
        bytes: u64,
    },
    Io {
        bytes_per_s: u64,
    },
}

impl Spec {
    pub fn family(&self) -> Family {
        match self {
            Spec::Cpu { .. } => Family::Cpu,
            Spec::Memory { .. } => Family::Memory,
            Spec::Io { .. } => Family::Io,
        }
    }

    /// The amount it asks for: a CPU share rounded up.
    pub fn amount(&self) -> u64 {
        match *self {
            Spec::Cpu { budget_ns, period_ns } => cpu_parts(budget_ns, period_ns, true),
            Spec::Memory { bytes } => bytes,
            Spec::Io { bytes_per_s } => bytes_per_s,
        }
    }

    /// The largest spec of the same shape (a CPU reservation keeps its period) whose amount is
    /// at most `amount`; `None` when that is nothing.
    fn shrunk_to(&self, amount: u64) -> Option<Spec> {
        let spec = match *self {
            Spec::Cpu { period_ns, .. } => {
                let budget_ns = (u128::from(amount) * u128::from(period_ns) / u128::from(CPU_PARTS)) as u64;
                Spec::Cpu { budget_ns, period_ns }
            }
            Spec::Memory { .. } => Spec::Memory { bytes: amount },
            Spec::Io { .. } => Spec::Io { bytes_per_s: amount },
        };
        (spec.amount() > 0).then_some(spec)
    }

    fn check(&self) -> Result<(), Refusal> {
        match *self {
            Spec::Cpu { period_ns: 0, .. } => Err(Refusal::Invalid("a CPU reservation needs a period above 0".into())),
            Spec::Cpu { budget_ns, period_ns } if budget_ns > period_ns => {
                Err(Refusal::Invalid(format!("budget {budget_ns} ns exceeds period {period_ns} ns")))
            }
            _ => Ok(()),
        }
    }
}

impl fmt::Display for Spec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Spec::Cpu { budget_ns, period_ns } => write!(f, "{} ms per {} ms", budget_ns as f64 / 1e6, period_ns as f64 / 1e6),
            Spec::Memory { bytes } => write!(f, "{}", Family::Memory.describe(bytes)),
            Spec::Io { bytes_per_s } => write!(f, "{}", Family::Io.describe(bytes_per_s)),
        }
    }
}

/// `budget / period` of one CPU in [`CPU_PARTS`], rounded up or down.
fn cpu_parts(budget_ns: u64, period_ns: u64, round_up: bool) -> u64 {
    let num = u128::from(budget_ns) * u128::from(CPU_PARTS);
    let den = u128::from(period_ns.max(1));
    (if round_up { num.div_ceil(den) } else { num / den }) as u64
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SubsystemId(pub usize);

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ResId(pub usize);

/// What a soft reservation's holder learns through [`ReservationTree::wait`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Update {
    /// The parent took part of it back: this is what is left.
    Reduced(Spec),
    /// The parent took all of it back (or deleted it).
    Revoked,
}

/// Why a request was refused; nothing changed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("{0}")]
    Invalid(String),
    #[error("no subsystem or reservation {0}")]
    Unknown(String),
    #[error("{} {} reservation of {} does not fit in {parent}: {} left of its {} ({basis})", .family.as_str(), .kind.as_str(), .family.describe(*.asked), .family.describe(*.available), .family.describe(*.capacity))]
    DoesNotFit { parent: String, family: Family, kind: Kind, asked: u64, available: u64, capacity: u64, basis: &'static str },
    #[error("{child} has given out {} of {} in hard reservations, more than the {} it would hold", .family.describe(*.given), .family.as_str(), .family.describe(*.asked))]
    ChildHoldsMore { child: String, family: Family, given: u64, asked: u64 },
}

#[derive(Clone, Debug)]
struct Subsystem {
    name: String,
    parent: Option<SubsystemId>,
    overhead: [u64; 3],
}

#[derive(Clone, Debug)]
struct Reservation {
    holder: SubsystemId,
    kind: Kind,
    family: Family,
    bound: Option<Spec>,
    deleted: bool,
    updates: VecDeque<Update>,
}

/// One family's resources at one subsystem.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Holding {
    /// Held through hard reservations (the root: the machine's capacity).
    pub hard_in: u64,
    pub soft_in: u64,
    pub overhead: u64,
    /// Given out to its children.
    pub hard_out: u64,
    pub soft_out: u64,
}

impl Holding {
    /// What the hard reservations given out may reach.
    pub fn hard_capacity(&self) -> u64 {
        self.hard_in.saturating_sub(self.overhead)
    }

    /// What all reservations given out may reach.
    pub fn capacity(&self) -> u64 {
        (self.hard_in + self.soft_in).saturating_sub(self.overhead)
    }

    /// Left for the subsystem's own use.
    pub fn own(&self) -> u64 {
        self.capacity().saturating_sub(self.hard_out + self.soft_out)
    }
}

/// The tree of subsystems and the reservations between them.
#[derive(Clone, Debug)]
pub struct ReservationTree {
    subsystems: Vec<Subsystem>,
    reservations: Vec<Reservation>,
    root_capacity: [u64; 3],
}

impl ReservationTree {
    pub const ROOT: SubsystemId = SubsystemId(0);

    /// A tree holding only the root, which owns `cpus` CPUs, `memory_bytes` and
    /// `io_bytes_per_s`.
    pub fn new(cpus: u64, memory_bytes: u64, io_bytes_per_s: u64) -> Self {
        ReservationTree {
            subsystems: vec![Subsystem { name: "root".into(), parent: None, overhead: [0; 3] }],
            reservations: Vec::new(),
            root_capacity: [cpus.saturating_mul(CPU_PARTS), memory_bytes, io_bytes_per_s],
        }
    }

    pub fn add_subsystem(&mut self, name: &str, parent: SubsystemId) -> Result<SubsystemId, Refusal> {
        self.subsystem(parent)?;
        if self.find(name).is_some() {
            return Err(Refusal::Invalid(format!("a subsystem named {name:?} exists already")));
        }
        self.subsystems.push(Subsystem { name: name.to_owned(), parent: Some(parent), overhead: [0; 3] });
        Ok(SubsystemId(self.subsystems.len() - 1))
    }

    pub fn find(&self, name: &str) -> Option<SubsystemId> {
        self.subsystems.iter().position(|s| s.name == name).map(SubsystemId)
    }

    pub fn name(&self, id: SubsystemId) -> &str {
        &self.subsystems[id.0].name
    }

    pub fn parent(&self, id: SubsystemId) -> Option<SubsystemId> {
        self.subsystems[id.0].parent
    }

    pub fn subsystems(&self) -> impl Iterator<Item = SubsystemId> {
        (0..self.subsystems.len()).map(SubsystemId)
    }

    /// What `id` spends of `family` on managing its children (its run queue, timer
    /// propagation, its data structures): held back from what it can give out.
    pub fn set_overhead(&mut self, id: SubsystemId, family: Family, amount: u64) -> Result<(), Refusal> {
        self.subsystem(id)?;
        let mut after = self.holding(id, family);
        after.overhead = amount;
        if after.hard_out > after.hard_capacity() || after.hard_out + after.soft_out > after.capacity() {
            return Err(Refusal::Invalid(format!(
                "{}: an overhead of {} leaves less than it has given out",
                self.name(id),
                family.describe(amount)
            )));
        }
        self.subsystems[id.0].overhead[family.index()] = amount;
        Ok(())
    }

    /// An empty reservation of `family` for `holder` from its parent (Table I's `create`).
    pub fn create(&mut self, holder: SubsystemId, kind: Kind, family: Family) -> Result<ResId, Refusal> {
        if self.subsystem(holder)?.parent.is_none() {
            return Err(Refusal::Invalid("the root has no parent to reserve from".into()));
        }
        self.reservations.push(Reservation { holder, kind, family, bound: None, deleted: false, updates: VecDeque::new() });
        Ok(ResId(self.reservations.len() - 1))
    }

    /// Binds `spec` to `res`, replacing what it held (Table I's `bind`). Admission control in
    /// the parent: a hard reservation must fit in the parent's hard holding minus its overhead
    /// and what it has given out hard; soft reservations of the parent's other children are
    /// revoked, newest first, where a hard one needs their room. A soft reservation must fit
    /// in what the parent holds, hard and soft, minus its overhead and what it gave out.
    /// Shrinking a reservation its holder has passed on revokes the holder's soft
    /// reservations as needed; a hard one is refused where the holder's own hard reservations
    /// would no longer fit.
    pub fn bind(&mut self, res: ResId, spec: Spec) -> Result<(), Refusal> {
        let r = self.reservation(res)?.clone();
        spec.check()?;
        if spec.family() != r.family {
            return Err(Refusal::Invalid(format!("a {} reservation cannot hold {}", r.family.as_str(), spec.family().as_str())));
        }
        let parent = self.subsystems[r.holder.0].parent.expect("reservations have a parent");
        let family = r.family;
        let old = r.bound.map_or(0, |s| s.amount());
        let asked = spec.amount();
        let at_parent = self.holding(parent, family);
        let (basis, capacity, others) = match r.kind {
            Kind::Hard => ("hard holding minus overhead and hard reservations given", at_parent.hard_capacity(), at_parent.hard_out - old),
            Kind::Soft => {
                ("holding minus overhead and reservations given", at_parent.capacity(), at_parent.hard_out + at_parent.soft_out - old)
            }
        };
        let available = capacity.saturating_sub(others);
        if asked > available {
            return Err(Refusal::DoesNotFit {
                parent: self.name(parent).to_owned(),
                family,
                kind: r.kind,
                asked,
                available,
                capacity,
                basis,
            });
        }
        // Shrinking: the holder's hard reservations must still fit.
        let at_holder = self.holding(r.holder, family);
        let hard_in_after = if r.kind == Kind::Hard { at_holder.hard_in - old + asked } else { at_holder.hard_in };
        if at_holder.hard_out > hard_in_after.saturating_sub(at_holder.overhead) {
            return Err(Refusal::ChildHoldsMore {
                child: self.name(r.holder).to_owned(),
                family,
                given: at_holder.hard_out,
                asked: hard_in_after,
            });
        }
        self.reservations[res.0].bound = Some(spec);
        // A hard reservation may need the room of the parent's soft ones.
        if r.kind == Kind::Hard {
            self.shed_soft(parent, family, Some(res));
        }
        self.shed_soft(r.holder, family, None);
        Ok(())
    }

    /// Takes back part or all of a soft reservation (the parent's side of revocation): what is
    /// left is at most `keep` of its family's amount. The holder hears of it through
    /// [`ReservationTree::wait`] and passes it on to its children where it cannot give it back.
    pub fn revoke(&mut self, res: ResId, keep: u64) -> Result<(), Refusal> {
        let r = self.reservation(res)?;
        if r.kind != Kind::Soft {
            return Err(Refusal::Invalid("only a soft reservation can be revoked; delete a hard one".into()));
        }
        self.reduce(res, keep);
        Ok(())
    }

    /// Deletes `res`, revoking whatever was bound to it (Table I's `delete`); the holder gives
    /// back to its children whatever no longer fits, hard reservations included (they were
    /// backed by this one), newest first, down the whole subtree.
    pub fn delete(&mut self, res: ResId) -> Result<(), Refusal> {
        let r = self.reservation(res)?.clone();
        let gone = &mut self.reservations[res.0];
        gone.deleted = true;
        gone.bound = None;
        gone.updates.push_back(Update::Revoked);
        self.shed_hard(r.holder, r.family);
        self.shed_soft(r.holder, r.family, None);
        Ok(())
    }

    /// The next update of a reservation, oldest first (Table I's `wait`, without blocking): a
    /// soft one reduced or revoked, any one deleted (by its holder, or because what backed it
    /// went).
    pub fn wait(&mut self, res: ResId) -> Option<Update> {
        self.reservations.get_mut(res.0)?.updates.pop_front()
    }

    /// What `res` holds now.
    pub fn bound(&self, res: ResId) -> Option<Spec> {
        self.reservations.get(res.0).filter(|r| !r.deleted).and_then(|r| r.bound)
    }

    pub fn holder(&self, res: ResId) -> SubsystemId {
        self.reservations[res.0].holder
    }

    /// Reservations held by `id`, in the order they were made.
    pub fn reservations_of(&self, id: SubsystemId) -> impl Iterator<Item = (ResId, Kind, Family, Option<Spec>)> + '_ {
        self.reservations
            .iter()
            .enumerate()
            .filter(move |(_, r)| r.holder == id && !r.deleted)
            .map(|(i, r)| (ResId(i), r.kind, r.family, r.bound))
    }

    /// What `id` holds and gives out of `family`.
    pub fn holding(&self, id: SubsystemId, family: Family) -> Holding {
        let mut h = Holding { overhead: self.subsystems[id.0].overhead[family.index()], ..Holding::default() };
        if id == Self::ROOT {
            h.hard_in = self.root_capacity[family.index()];
        }
        for r in self.reservations.iter().filter(|r| !r.deleted && r.family == family) {
            let amount = r.bound.map_or(0, |s| s.amount());
            let given_by = self.subsystems[r.holder.0].parent;
            match (r.kind, r.holder == id, given_by == Some(id)) {
                (Kind::Hard, true, _) => h.hard_in += amount,
                (Kind::Soft, true, _) => h.soft_in += amount,
                (Kind::Hard, _, true) => h.hard_out += amount,
                (Kind::Soft, _, true) => h.soft_out += amount,
                _ => {}
            }
        }
        h
    }

    /// Every rule of the tree, for tests and debug checks: what each subsystem gives out fits
    /// what it holds, hard within hard.
    pub fn check(&self) -> Result<(), String> {
        for id in self.subsystems() {
            for family in Family::ALL {
                let h = self.holding(id, family);
                if h.hard_out > h.hard_capacity() {
                    return Err(format!(
                        "{} gives out {} hard of {} {}: {h:?}",
                        self.name(id),
                        h.hard_out,
                        h.hard_capacity(),
                        family.as_str()
                    ));
                }
                if h.hard_out + h.soft_out > h.capacity() {
                    return Err(format!("{} gives out more {} than it holds: {h:?}", self.name(id), family.as_str()));
                }
            }
        }
        Ok(())
    }

    fn subsystem(&self, id: SubsystemId) -> Result<&Subsystem, Refusal> {
        self.subsystems.get(id.0).ok_or_else(|| Refusal::Unknown(format!("subsystem #{}", id.0)))
    }

    fn reservation(&self, res: ResId) -> Result<&Reservation, Refusal> {
        self.reservations.get(res.0).filter(|r| !r.deleted).ok_or_else(|| Refusal::Unknown(format!("reservation #{}", res.0)))
    }

    /// Reservations `id` gave out of `family` and `kind`, newest first.
    fn given(&self, id: SubsystemId, family: Family, kind: Kind) -> Vec<ResId> {
        (0..self.reservations.len())
            .rev()
            .filter(|&i| {
                let r = &self.reservations[i];
                !r.deleted && r.family == family && r.kind == kind && r.bound.is_some() && self.subsystems[r.holder.0].parent == Some(id)
            })
            .map(ResId)
            .collect()
    }

    /// Revokes `id`'s soft reservations, newest first (never `spare`), until what it gives
    /// out fits what it holds.
    fn shed_soft(&mut self, id: SubsystemId, family: Family, spare: Option<ResId>) {
        for res in self.given(id, family, Kind::Soft) {
            let h = self.holding(id, family);
            let over = (h.hard_out + h.soft_out).saturating_sub(h.capacity());
            if over == 0 {
                return;
            }
            if Some(res) == spare {
                continue;
            }
            let amount = self.reservations[res.0].bound.map_or(0, |s| s.amount());
            self.reduce(res, amount.saturating_sub(over));
        }
    }

    /// Deletes `id`'s hard reservations, newest first, until they fit its hard holding.
    fn shed_hard(&mut self, id: SubsystemId, family: Family) {
        for res in self.given(id, family, Kind::Hard) {
            let h = self.holding(id, family);
            if h.hard_out <= h.hard_capacity() {
                return;
            }
            let _ = self.delete(res);
        }
    }

    /// Shrinks soft reservation `res` to at most `keep`, tells its holder, and lets the holder
    /// pass the loss on.
    fn reduce(&mut self, res: ResId, keep: u64) {
        let r = &mut self.reservations[res.0];
        let Some(spec) = r.bound else { return };
        if spec.amount() <= keep {
            return;
        }
        r.bound = spec.shrunk_to(keep);
        r.updates.push_back(r.bound.map_or(Update::Revoked, Update::Reduced));
        let (holder, family) = (r.holder, r.family);
        self.shed_soft(holder, family, None);
    }
}

#[cfg(test)]
mod tests;
