//! The server tree as HiRes's reservation tree (Sec. III-A): every budgeted
//! `[[scheduler.server]]` holds a hard CPU reservation of `budget_ms / period_ms` from its
//! parent, and a server's `reserve` holds memory and I/O bandwidth, hard or soft. Admission
//! control runs once, at load: what a server's children reserve must fit in what it holds
//! minus its `overhead_percent` (hard within hard), so a guarantee deep in the tree is backed
//! up to the machine.
//!
//! A level holds no budget and is no reservation: the servers below it reserve from the
//! nearest ancestor that holds the family, else from the root. The CPU root of a top-level
//! server is the CPUs it runs on (one, or a level's `cpus`); each such set is a tree of its
//! own, since levels on the same CPUs share them by priority, not by reservation. Memory and
//! I/O come from the machine: `[memory]`'s total and `[io] bandwidth_bytes_per_s`, unbounded
//! when the file does not give them.

use super::error::{Ctx, ScenarioError};
use super::raw::{some_choice, some_choice_schema, Choice, RawScheduler};
use crate::hires::{Family, Kind, Refusal, ReservationTree, Spec, SubsystemId};
use crate::mem::BoundKind;
use crate::model::memory::ServerBound;
use crate::model::scheduler::{Hierarchy, Mc2Levels, ServerSpec};
use schemars::JsonSchema;
use serde::Deserialize;
use std::collections::BTreeMap;

/// `reserve = { ... }` of a `[[scheduler.server]]`.
#[derive(Deserialize, JsonSchema, Debug)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "ServerReserve")]
pub(in crate::scenario) struct RawReserve {
    /// Memory reserved for the server, MiB: bounds the resident pages of every task under it.
    pub(super) memory_mib: Option<f64>,
    /// Transmit bandwidth of the I/O device; its tasks' sends are rate-limited to it.
    pub(super) io_bytes_per_s: Option<f64>,
    /// Most bytes its tasks may send at once after a quiet spell (the token bucket's depth).
    pub(super) io_burst_bytes: Option<f64>,
    /// `hard` (default: set aside) or `soft` (a cap whose pages global pressure may take).
    #[serde(default, deserialize_with = "some_choice")]
    #[schemars(schema_with = "some_choice_schema::<Kind>")]
    pub(super) kind: Option<Kind>,
}

impl Choice for Kind {
    const NOUN: &'static str = "reservation kind";
    const NAMES: &'static [&'static str] = &["hard", "soft"];
}

/// What one server reserves beyond its budget.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ServerReservation {
    /// `None`: the server has no `reserve` (hard, when it has one and names no kind).
    pub kind: Option<Kind>,
    pub memory_bytes: Option<u64>,
    pub io_bytes_per_s: Option<u64>,
    pub io_burst_bytes: Option<u64>,
    /// CPU kept back from its children, in parts per 10^12 of a CPU.
    pub overhead_cpu_parts: u64,
}

/// Each server's reservations, in file order, after admission by the reservation tree.
/// With `overcommit` the amounts are read but not admitted.
pub(super) fn validate_reservations(
    cx: &Ctx,
    raw: &RawScheduler,
    hierarchy: Option<&Hierarchy>,
    memory_bytes: Option<u64>,
    io_bytes_per_s: Option<u64>,
) -> Result<Vec<ServerReservation>, ScenarioError> {
    let Some(h) = hierarchy else {
        if raw.overcommit.is_some() {
            return Err(cx.err(
                "scheduler.overcommit",
                "only applies with [[scheduler.server]]: it lets servers reserve more than their parent holds",
            ));
        }
        return Ok(Vec::new());
    };
    let overcommit = raw.overcommit.unwrap_or(false);
    let raw = &raw.server;
    let servers = &h.servers;
    let mut out = Vec::with_capacity(servers.len());
    for (j, (s, spec)) in raw.iter().zip(servers).enumerate() {
        let k = |f: &str| format!("scheduler.server[{j}].{f}");
        let mut r = ServerReservation::default();
        if let Some(pct) = s.overhead_percent {
            if spec.budget.0 == 0 {
                return Err(cx.err(k("overhead_percent"), "a level holds no budget: only a deferrable or polling server keeps overhead"));
            }
            if !pct.is_finite() || !(0.0..=100.0).contains(&pct) {
                return Err(cx.err(k("overhead_percent"), format!("must be between 0 and 100 (got {pct})")));
            }
            let own = Spec::Cpu { budget_ns: spec.budget.0, period_ns: spec.period.0 }.amount();
            r.overhead_cpu_parts = (own as f64 * pct / 100.0).ceil() as u64;
        }
        if let Some(res) = &s.reserve {
            reserve_amounts(cx, j, res, &mut r)?;
        }
        out.push(r);
    }
    if overcommit {
        return Ok(out);
    }
    let order = top_down(servers);
    admit_cpu(cx, servers, &order, &out)?;
    let memory = |r: &ServerReservation| r.memory_bytes.map(|b| Spec::Memory { bytes: b });
    admit(cx, servers, &order, &out, memory, memory_bytes, "reserve.memory_mib", "[memory]'s total")?;
    let io = |r: &ServerReservation| r.io_bytes_per_s.map(|b| Spec::Io { bytes_per_s: b });
    admit(cx, servers, &order, &out, io, io_bytes_per_s, "reserve.io_bytes_per_s", "[io] bandwidth_bytes_per_s")?;
    Ok(out)
}

/// The reservations of MC²'s servers (memory and I/O bandwidth; a server under a level has no
/// child servers to keep CPU back from). A server under a level has no parent server: each
/// family is admitted against the machine's (`[memory]`'s total, `[io]`'s bandwidth), hard ones
/// before soft ones, as HiRes's root admits its children.
pub(super) fn validate_mc2_reservations(
    cx: &Ctx,
    raw: &RawScheduler,
    levels: &Mc2Levels,
    memory_bytes: Option<u64>,
    io_bytes_per_s: Option<u64>,
) -> Result<Vec<ServerReservation>, ScenarioError> {
    let mut out = Vec::with_capacity(levels.servers.len());
    for (j, s) in raw.server.iter().enumerate().take(levels.servers.len()) {
        let mut r = ServerReservation::default();
        if let Some(res) = &s.reserve {
            reserve_amounts(cx, j, res, &mut r)?;
        }
        out.push(r);
    }
    if raw.overcommit.unwrap_or(false) {
        return Ok(out);
    }
    let families: [(SpecOf, Option<u64>, &str, &str); 2] = [
        (|r| r.memory_bytes.map(|b| Spec::Memory { bytes: b }), memory_bytes, "reserve.memory_mib", "[memory]'s total"),
        (|r| r.io_bytes_per_s.map(|b| Spec::Io { bytes_per_s: b }), io_bytes_per_s, "reserve.io_bytes_per_s", "[io] bandwidth_bytes_per_s"),
    ];
    for (spec_of, capacity, key, machine) in families {
        let cap = capacity.unwrap_or(u64::MAX);
        let mut tree = ReservationTree::new(0, cap, cap);
        let ids: Vec<SubsystemId> =
            levels.servers.iter().map(|s| tree.add_subsystem(&s.name, ReservationTree::ROOT).expect("server names are unique")).collect();
        for kind in [Kind::Hard, Kind::Soft] {
            for (j, r) in out.iter().enumerate().filter(|(_, r)| r.kind == Some(kind)) {
                let Some(spec) = spec_of(r) else { continue };
                let parent = format!("the machine ({machine})");
                bind(cx, &mut tree, ids[j], kind, spec, &format!("scheduler.server[{j}].{key}"), &levels.servers[j].name, &parent)?;
            }
        }
    }
    Ok(out)
}

/// A reservation family's amount in a server's reservation.
type SpecOf = fn(&ServerReservation) -> Option<Spec>;

/// The memory reservations of MC²'s servers as bounds of the page-level model, one per server
/// when some server reserves memory; no parents.
pub(super) fn mc2_memory_bounds(
    levels: &Mc2Levels,
    res: &[ServerReservation],
    page_bytes: u64,
) -> Result<Vec<ServerBound>, (String, String)> {
    if res.iter().all(|r| r.memory_bytes.is_none()) {
        return Ok(Vec::new());
    }
    let mut out = Vec::with_capacity(levels.servers.len());
    for (j, (spec, r)) in levels.servers.iter().zip(res).enumerate() {
        let pages = r.memory_bytes.map(|b| b / page_bytes);
        if pages == Some(0) {
            return Err((
                format!("scheduler.server[{j}].reserve.memory_mib"),
                format!("server {:?} reserves less than one page ({page_bytes} bytes), so its tasks could hold no page", spec.name),
            ));
        }
        let kind = match r.kind {
            Some(Kind::Hard) if pages.is_some() => BoundKind::Hard,
            _ => BoundKind::Soft,
        };
        out.push(ServerBound {
            server: j,
            name: spec.name.clone(),
            bytes: r.memory_bytes,
            pages,
            kind,
            parent: None,
            tasks: (0..levels.task_server.len()).filter(|&t| levels.task_server[t] == Some(j)).collect(),
        });
    }
    Ok(out)
}

/// The servers' memory reservations as bounds of the page-level model, parents first: every
/// server gets one when some server reserves memory (a server reserving none only counts its
/// subtree's pages, for its figures), none otherwise. A reservation is its whole pages; one
/// smaller than a page is refused, since its tasks could hold nothing.
pub(super) fn memory_bounds(
    cx: &Ctx,
    hierarchy: Option<&Hierarchy>,
    res: &[ServerReservation],
    page_bytes: u64,
) -> Result<Vec<ServerBound>, ScenarioError> {
    let Some(h) = hierarchy else { return Ok(Vec::new()) };
    if res.iter().all(|r| r.memory_bytes.is_none()) {
        return Ok(Vec::new());
    }
    let order = top_down(&h.servers);
    let mut at = vec![0; h.servers.len()];
    let mut out = Vec::with_capacity(order.len());
    for &j in &order {
        let s = &h.servers[j];
        let pages = res[j].memory_bytes.map(|b| b / page_bytes);
        if pages == Some(0) {
            return Err(cx.err(
                format!("scheduler.server[{j}].reserve.memory_mib"),
                format!("server {:?} reserves less than one page ({page_bytes} bytes), so its tasks could hold no page", s.name),
            ));
        }
        let kind = match res[j].kind {
            Some(Kind::Hard) if pages.is_some() => BoundKind::Hard,
            _ => BoundKind::Soft,
        };
        at[j] = out.len();
        out.push(ServerBound {
            server: j,
            name: s.name.clone(),
            bytes: res[j].memory_bytes,
            pages,
            kind,
            parent: s.parent.map(|p| at[p]),
            tasks: (0..h.task_server.len()).filter(|&t| h.task_server[t] == j).collect(),
        });
    }
    Ok(out)
}

/// A non-negative amount given in `unit`s, in whole base units.
/// Server `j`'s `reserve` table into `r`: its kind (hard unless given) and its memory and I/O
/// amounts.
fn reserve_amounts(cx: &Ctx, j: usize, res: &RawReserve, r: &mut ServerReservation) -> Result<(), ScenarioError> {
    let k = |f: &str| format!("scheduler.server[{j}].reserve.{f}");
    r.kind = Some(res.kind.unwrap_or(Kind::Hard));
    r.memory_bytes = res.memory_mib.map(|v| amount(cx, &k("memory_mib"), v, (1u64 << 20) as f64)).transpose()?;
    r.io_bytes_per_s = res.io_bytes_per_s.map(|v| amount(cx, &k("io_bytes_per_s"), v, 1.0)).transpose()?;
    r.io_burst_bytes = res.io_burst_bytes.map(|v| amount(cx, &k("io_burst_bytes"), v, 1.0)).transpose()?;
    if r.io_burst_bytes.is_some() && r.io_bytes_per_s.is_none() {
        return Err(cx.err(k("io_burst_bytes"), "shapes an I/O reservation: give io_bytes_per_s too"));
    }
    Ok(())
}

fn amount(cx: &Ctx, key: &str, value: f64, unit: f64) -> Result<u64, ScenarioError> {
    if !value.is_finite() {
        return Err(cx.err(key, "must be a finite number"));
    }
    if value < 0.0 {
        return Err(cx.err(key, format!("must not be negative (got {value})")));
    }
    let base = (value * unit).round();
    if base >= u64::MAX as f64 {
        return Err(cx.err(key, format!("is too large (got {value})")));
    }
    Ok(base as u64)
}

/// Servers with parents before children (file order among those ready).
fn top_down(servers: &[ServerSpec]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..servers.len()).filter(|&j| servers[j].parent.is_none()).collect();
    let mut at = 0;
    while at < order.len() {
        let p = order[at];
        order.extend((0..servers.len()).filter(|&c| servers[c].parent == Some(p)));
        at += 1;
    }
    order
}

/// The nearest ancestor of `j` for which `holds` is true.
fn holder_above(servers: &[ServerSpec], j: usize, holds: impl Fn(usize) -> bool) -> Option<usize> {
    let mut at = servers[j].parent;
    while let Some(p) = at {
        if holds(p) {
            return Some(p);
        }
        at = servers[p].parent;
    }
    None
}

/// The CPUs a top-level server's subtree runs on.
fn cpus_of(servers: &[ServerSpec], mut j: usize) -> Vec<usize> {
    while let Some(p) = servers[j].parent {
        j = p;
    }
    if servers[j].cpus.is_empty() {
        vec![servers[j].cpu]
    } else {
        servers[j].cpus.clone()
    }
}

fn cpus_name(cpus: &[usize]) -> String {
    match cpus {
        [one] => format!("CPU {one}"),
        many => format!("CPUs {many:?}"),
    }
}

/// Budgets: each budgeted server reserves `budget / period` of one CPU, hard, from the nearest
/// budgeted ancestor (less its overhead) or its CPUs.
fn admit_cpu(cx: &Ctx, servers: &[ServerSpec], order: &[usize], res: &[ServerReservation]) -> Result<(), ScenarioError> {
    let budgeted = |j: usize| servers[j].budget.0 > 0;
    let mut trees: BTreeMap<Vec<usize>, ReservationTree> = BTreeMap::new();
    let mut ids = vec![None; servers.len()];
    for &j in order.iter().filter(|&&j| budgeted(j)) {
        let cpus = cpus_of(servers, j);
        let tree = trees.entry(cpus.clone()).or_insert_with(|| ReservationTree::new(cpus.len() as u64, 0, 0));
        let parent = holder_above(servers, j, budgeted);
        let parent_id = parent.map_or(ReservationTree::ROOT, |p| ids[p].expect("parents come first"));
        let id = tree.add_subsystem(&servers[j].name, parent_id).expect("server names are unique");
        ids[j] = Some(id);
        let spec = Spec::Cpu { budget_ns: servers[j].budget.0, period_ns: servers[j].period.0 };
        let parent_name = parent.map_or_else(|| cpus_name(&cpus), |p| format!("server {:?}", servers[p].name));
        bind(cx, tree, id, Kind::Hard, spec, &format!("scheduler.server[{j}].budget_ms"), &servers[j].name, &parent_name)?;
        if res[j].overhead_cpu_parts > 0 {
            tree.set_overhead(id, Family::Cpu, res[j].overhead_cpu_parts).expect("no child has reserved yet");
        }
    }
    Ok(())
}

/// One family of `reserve`: hard reservations first, then soft ones, each from the nearest
/// ancestor holding the family, or the machine's `capacity`.
#[allow(clippy::too_many_arguments)]
fn admit(
    cx: &Ctx,
    servers: &[ServerSpec],
    order: &[usize],
    res: &[ServerReservation],
    spec_of: impl Fn(&ServerReservation) -> Option<Spec>,
    capacity: Option<u64>,
    key: &str,
    machine: &str,
) -> Result<(), ScenarioError> {
    let holds = |j: usize| spec_of(&res[j]).is_some();
    let cap = capacity.unwrap_or(u64::MAX);
    let mut tree = ReservationTree::new(0, cap, cap);
    let mut ids: Vec<Option<SubsystemId>> = vec![None; servers.len()];
    for &j in order.iter().filter(|&&j| holds(j)) {
        let parent = holder_above(servers, j, holds).map_or(ReservationTree::ROOT, |p| ids[p].expect("parents come first"));
        ids[j] = Some(tree.add_subsystem(&servers[j].name, parent).expect("server names are unique"));
    }
    for kind in [Kind::Hard, Kind::Soft] {
        for &j in order.iter().filter(|&&j| holds(j) && res[j].kind == Some(kind)) {
            let spec = spec_of(&res[j]).expect("it holds the family");
            let parent = holder_above(servers, j, holds)
                .map_or_else(|| format!("the machine ({machine})"), |p| format!("server {:?}", servers[p].name));
            let id = ids[j].expect("added");
            bind(cx, &mut tree, id, kind, spec, &format!("scheduler.server[{j}].{key}"), &servers[j].name, &parent)?;
        }
    }
    Ok(())
}

/// Creates and binds one reservation; a refusal is the error at `key`.
#[allow(clippy::too_many_arguments)]
fn bind(
    cx: &Ctx,
    tree: &mut ReservationTree,
    id: SubsystemId,
    kind: Kind,
    spec: Spec,
    key: &str,
    name: &str,
    parent: &str,
) -> Result<(), ScenarioError> {
    let res = tree.create(id, kind, spec.family()).expect("a server has a parent");
    tree.bind(res, spec).map_err(|refusal| match refusal {
        Refusal::DoesNotFit { family, available, capacity, basis, .. } => {
            let asked = match spec {
                Spec::Cpu { .. } => format!("{} ({spec})", describe(family, spec.amount())),
                _ => describe(family, spec.amount()),
            };
            cx.err(
                key,
                format!(
                    "server {name:?} reserves {asked} {}, more than {parent} has left: {} of {} ({basis})",
                    kind.as_str(),
                    describe(family, available),
                    describe(family, capacity),
                ),
            )
        }
        other => cx.err(key, format!("server {name:?}: {other}")),
    })
}

/// An amount in the unit the file gives it in.
fn describe(family: Family, amount: u64) -> String {
    match family {
        Family::Io if amount == u64::MAX => "unbounded bytes/s".into(),
        Family::Io => format!("{amount} bytes/s"),
        _ => family.describe(amount),
    }
}
