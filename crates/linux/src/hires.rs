//! HiRes reservation trees on real Linux: each subsystem of a tree
//! ([`critmem_core::hires`]) becomes a cgroup nested as in the tree, under one directory of
//! critmem's own in every hierarchy it needs, and its reservations become the cgroup's limits:
//!
//! | reservation | cgroup v1 | cgroup v2 |
//! |---|---|---|
//! | CPU, hard | `cpu.cfs_period_us`, `cpu.cfs_quota_us`, `cpu.shares` | `cpu.max`, `cpu.weight` |
//! | CPU, soft | `cpu.shares` (1024 per CPU) | `cpu.weight` (100 per CPU) |
//! | memory, hard | `memory.limit_in_bytes` | `memory.max` |
//! | memory, soft | `memory.soft_limit_in_bytes` | `memory.high` |
//! | I/O, hard | `blkio.throttle.read_bps_device`, `…write_bps_device` | `io.max` (`rbps`, `wbps`) |
//!
//! A hard CPU reservation is a cap (the bandwidth) and a weight proportional to its share (1024
//! or 100 per CPU, as a soft one): with every sibling busy, the kernel's fair share of each is
//! then at least its reservation, since the siblings' reservations add up to at most their
//! parent's. The tree's top directory, the root's own, has the kernel's highest weight, so that
//! processes outside the tree on its CPUs take next to nothing from its reservations. Nested cgroups enforce a parent's CPU bandwidth and memory limit on its whole subtree, as
//! HiRes's parents do; the tree's admission control has already checked that children fit.
//! A subsystem with children runs its own processes in a leaf of its own, [`OWN`], holding what
//! it keeps for itself as one more child would (a weight, and within a hard CPU reservation a
//! bandwidth at its period), so that its own processes cannot take what its children reserved.
//! A hard I/O reservation caps the subsystem's reads and its writes on the tree's `io_device`
//! each at its bandwidth (direct I/O and, on v2, writeback; v1 cannot charge writeback to a
//! cgroup). Soft I/O reservations, and hard ones of a tree that names no device, are admitted
//! but not applied: the summary lists them. Every directory is created through the journal, so a crash is
//! undone by the next start or by [`teardown`]; nothing outside critmem's directories is
//! written. A subsystem's CPU time is the kernel's own count (`cpuacct.usage`, or
//! `usage_usec` of `cpu.stat` on v2).

use crate::cgroup::bandwidth::{self, BlockDevice};
use crate::cgroup::{write_value, Change, FileWrite};
use crate::error::{Error, Result};
use crate::journal::{Journal, RestoreReport};
use crate::layout::Mount;
use critmem_core::hires::{Family, Kind, ReservationTree, Spec, SubsystemId, CPU_PARTS};
use critmem_core::scenario::TreeFile;
use std::path::{Path, PathBuf};

/// The leaf holding the own processes of a subsystem that has children.
pub const OWN: &str = ".own";

/// Where the cgroup controllers a tree needs are mounted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HiresCgroups {
    /// One hierarchy per controller (`cpu` and `cpuacct` may be one).
    V1 {
        cpu: PathBuf,
        cpuacct: PathBuf,
        memory: PathBuf,
        /// Block I/O throttling and accounting, where the machine mounts it.
        blkio: Option<PathBuf>,
    },
    V2 {
        root: PathBuf,
    },
}

impl HiresCgroups {
    /// From `/proc/self/mounts`: v1 where `cpu`, `cpuacct` and `memory` are mounted as v1
    /// hierarchies, otherwise the cgroup2 mount, whose root must offer `cpu` and `memory`
    /// (`controllers` is the text of its `cgroup.controllers`).
    pub fn detect(mounts: &[Mount], controllers: impl Fn(&Path) -> Option<String>) -> Result<Self> {
        let v1 = |controller: &str| {
            mounts.iter().find(|m| m.fs_type == "cgroup" && m.options.iter().any(|o| o == controller)).map(|m| m.mount_point.clone())
        };
        if let (Some(cpu), Some(cpuacct), Some(memory)) = (v1("cpu"), v1("cpuacct"), v1("memory")) {
            return Ok(HiresCgroups::V1 { cpu, cpuacct, memory, blkio: v1("blkio") });
        }
        let unsupported = |reason: String| Error::Config {
            path: PathBuf::from("/proc/self/mounts"),
            reason: format!("no cgroup hierarchies for a HiRes tree: {reason}"),
        };
        let root = mounts
            .iter()
            .find(|m| m.fs_type == "cgroup2")
            .map(|m| m.mount_point.clone())
            .ok_or_else(|| unsupported("neither v1 cpu, cpuacct and memory hierarchies nor a cgroup2 mount".into()))?;
        let offered = controllers(&root).unwrap_or_default();
        for needed in ["cpu", "memory"] {
            if !offered.split_whitespace().any(|c| c == needed) {
                return Err(unsupported(format!("the cgroup2 root {} does not offer the {needed} controller", root.display())));
            }
        }
        Ok(HiresCgroups::V2 { root })
    }

    /// The hierarchies' roots, each once.
    pub fn roots(&self) -> Vec<&Path> {
        let mut roots: Vec<&Path> = match self {
            HiresCgroups::V1 { cpu, cpuacct, memory, blkio } => {
                let mut roots: Vec<&Path> = vec![cpu, cpuacct, memory];
                roots.extend(blkio.as_deref());
                roots
            }
            HiresCgroups::V2 { root } => vec![root],
        };
        roots.sort();
        roots.dedup();
        roots
    }

    /// The directories of the cgroup at `rel` (relative to every root).
    pub fn dirs(&self, rel: &Path) -> Vec<PathBuf> {
        self.roots().into_iter().map(|root| root.join(rel)).collect()
    }

    /// The CPU weight of `share` (in [`CPU_PARTS`]) of the cgroup at `rel`.
    fn weight(&self, rel: &Path, share: u64) -> FileWrite {
        match self {
            HiresCgroups::V1 { cpu, .. } => FileWrite::new(
                cpu.join(rel).join("cpu.shares"),
                (u128::from(share) * 1024 / u128::from(CPU_PARTS)).max(2).to_string(),
                true,
            ),
            HiresCgroups::V2 { root } => FileWrite::new(
                root.join(rel).join("cpu.weight"),
                (u128::from(share) * 100 / u128::from(CPU_PARTS)).clamp(1, 10_000).to_string(),
                true,
            ),
        }
    }

    /// The kernel's highest CPU weight for the tree's top directory: the tree's hard
    /// reservations hold against processes outside it on the same CPUs.
    pub fn top_weight(&self, rel: &Path) -> FileWrite {
        match self {
            HiresCgroups::V1 { cpu, .. } => FileWrite::new(cpu.join(rel).join("cpu.shares"), TOP_SHARES_V1.to_string(), true),
            HiresCgroups::V2 { root } => FileWrite::new(root.join(rel).join("cpu.weight"), TOP_WEIGHT_V2.to_string(), true),
        }
    }

    /// The limits a reservation of `kind` holding `spec` sets in the cgroup at `rel`;
    /// an error where the kernel cannot express it.
    pub fn writes(&self, rel: &Path, kind: Kind, spec: Spec) -> std::result::Result<Vec<FileWrite>, String> {
        let write = |root: &Path, file: &str, value: String| FileWrite::new(root.join(rel).join(file), value, true);
        Ok(match (self, spec, kind) {
            (_, Spec::Cpu { budget_ns, period_ns }, Kind::Hard) => {
                // CFS bandwidth: a period of 1 ms to 1 s, a quota of at least 1 ms, in µs.
                let (budget_us, period_us) = (budget_ns / 1000, period_ns / 1000);
                if !(1000..=1_000_000).contains(&period_us) || budget_us < 1000 {
                    return Err(format!(
                        "the kernel's CPU bandwidth needs a period of 1 ms to 1 s and a budget of at least 1 ms (got {spec})"
                    ));
                }
                let mut writes = self.writes(rel, Kind::Soft, spec)?;
                match self {
                    HiresCgroups::V1 { cpu, .. } => {
                        writes.push(write(cpu, bandwidth::V1_CFS_PERIOD, period_us.to_string()));
                        writes.push(write(cpu, bandwidth::V1_CFS_QUOTA, bandwidth::v1_cfs_quota(Some(budget_us))));
                    }
                    HiresCgroups::V2 { root } => {
                        writes.push(write(root, bandwidth::V2_CPU_MAX, bandwidth::v2_cpu_max(Some(budget_us), period_us)))
                    }
                }
                writes
            }
            (_, Spec::Cpu { .. }, Kind::Soft) => vec![self.weight(rel, spec.amount())],
            (HiresCgroups::V1 { memory, .. }, Spec::Memory { bytes }, kind) => {
                let file = if kind == Kind::Hard { "memory.limit_in_bytes" } else { "memory.soft_limit_in_bytes" };
                vec![write(memory, file, bytes.to_string())]
            }
            (HiresCgroups::V2 { root }, Spec::Memory { bytes }, kind) => {
                vec![write(root, if kind == Kind::Hard { "memory.max" } else { "memory.high" }, bytes.to_string())]
            }
            (_, Spec::Io { .. }, _) => Vec::new(),
        })
    }

    /// The limits a hard I/O reservation of `bytes_per_s` sets on disk `device` (major, minor)
    /// in the cgroup at `rel`: its read and its write bandwidth each. `None` where the machine
    /// has no block I/O controller.
    pub fn io_writes(&self, rel: &Path, bytes_per_s: u64, device: (u64, u64)) -> Option<Vec<FileWrite>> {
        let device = BlockDevice::from(device);
        match self {
            HiresCgroups::V1 { blkio: Some(blkio), .. } => Some(
                [bandwidth::V1_READ_BPS, bandwidth::V1_WRITE_BPS]
                    .iter()
                    .map(|file| FileWrite::new(blkio.join(rel).join(file), bandwidth::v1_bps(device, Some(bytes_per_s)), true))
                    .collect(),
            ),
            HiresCgroups::V1 { blkio: None, .. } => None,
            HiresCgroups::V2 { root } => Some(vec![FileWrite::new(
                root.join(rel).join(bandwidth::V2_IO_MAX),
                bandwidth::v2_io_max(device, Some(bytes_per_s), Some(bytes_per_s)),
                true,
            )]),
        }
    }

    /// Bytes the cgroup at `rel` and its descendants have read and written on block devices,
    /// by the kernel's count; `None` without a block I/O controller.
    pub fn io_bytes(&self, rel: &Path) -> Result<Option<u64>> {
        let (path, v1) = match self {
            HiresCgroups::V1 { blkio: Some(blkio), .. } => (blkio.join(rel).join("blkio.throttle.io_service_bytes_recursive"), true),
            HiresCgroups::V1 { blkio: None, .. } => return Ok(None),
            HiresCgroups::V2 { root } => (root.join(rel).join("io.stat"), false),
        };
        let text = match std::fs::read_to_string(&path) {
            // cgroup v2 without the io controller in this cgroup: no count to give.
            Err(e) if !v1 && e.kind() == std::io::ErrorKind::NotFound && path.parent().is_some_and(Path::is_dir) => return Ok(None),
            other => other.map_err(|e| Error::io("read", &path, e))?,
        };
        Ok(Some(if v1 { v1_io_total(&text) } else { v2_io_total(&text) }))
    }

    /// CPU time the cgroup at `rel` and its descendants have used, in ns, by the kernel's count.
    pub fn cpu_usage_ns(&self, rel: &Path) -> Result<u64> {
        match self {
            HiresCgroups::V1 { cpuacct, .. } => {
                let path = cpuacct.join(rel).join("cpuacct.usage");
                let text = std::fs::read_to_string(&path).map_err(|e| Error::io("read", &path, e))?;
                text.trim()
                    .parse()
                    .map_err(|_| Error::parse("cpuacct.usage", path.display().to_string(), format!("not a number: {text:?}")))
            }
            HiresCgroups::V2 { root } => {
                let path = root.join(rel).join("cpu.stat");
                let text = std::fs::read_to_string(&path).map_err(|e| Error::io("read", &path, e))?;
                text.lines()
                    .find_map(|l| l.strip_prefix("usage_usec ").and_then(|v| v.trim().parse::<u64>().ok()))
                    .map(|us| us * 1000)
                    .ok_or_else(|| Error::parse("cpu.stat", path.display().to_string(), "no usage_usec line"))
            }
        }
    }
}

/// Read and written bytes of every device in blkio's `io_service_bytes_recursive`
/// (`MAJ:MIN Read N`, `MAJ:MIN Write N`, ...; the `Total` lines would count them twice).
fn v1_io_total(text: &str) -> u64 {
    text.lines()
        .filter_map(|line| match line.split_whitespace().collect::<Vec<_>>()[..] {
            [_, "Read" | "Write", n] => n.parse::<u64>().ok(),
            _ => None,
        })
        .sum()
}

/// `rbytes` and `wbytes` of every device in v2's `io.stat`.
fn v2_io_total(text: &str) -> u64 {
    text.split_whitespace()
        .filter_map(|field| field.strip_prefix("rbytes=").or_else(|| field.strip_prefix("wbytes=")))
        .filter_map(|n| n.parse::<u64>().ok())
        .sum()
}

/// The disk (major, minor) of `path`: a block device node's own number, or else the device of
/// the filesystem holding `path`; a partition is taken as its whole disk, which is what the
/// kernel throttles.
pub fn resolve_io_device(path: &Path) -> std::result::Result<(u64, u64), String> {
    let disk = bandwidth::whole_disk_of(path, Path::new("/sys")).map_err(|reason| format!("io_device {reason}"))?;
    Ok((disk.major, disk.minor))
}

/// Each subsystem's cgroup, relative to the hierarchies' roots: `top/parent/.../name`.
pub fn cgroup_paths(tree: &ReservationTree, top: &str) -> Vec<(SubsystemId, PathBuf)> {
    tree.subsystems()
        .map(|id| {
            let mut names = Vec::new();
            let mut at = Some(id);
            while let Some(s) = at.filter(|&s| s != ReservationTree::ROOT) {
                names.push(tree.name(s));
                at = tree.parent(s);
            }
            (id, names.iter().rev().fold(PathBuf::from(top), |path, name| path.join(name)))
        })
        .collect()
}

/// A tree applied to the machine: its cgroups exist and hold their limits until
/// [`AppliedTree::teardown`] (or, after a crash, [`teardown`]) undoes it.
pub struct AppliedTree {
    pub cgroups: HiresCgroups,
    /// Parents first; the root's entry is the top directory.
    pub paths: Vec<(SubsystemId, PathBuf)>,
    journal: Journal,
}

/// What applying found and did.
pub struct Applied {
    pub tree: AppliedTree,
    /// A crashed earlier application's leftovers, restored first.
    pub recovered: Option<RestoreReport>,
    /// I/O reservations admitted in the tree but not applied.
    pub io_not_applied: Vec<String>,
}

/// `cpu.shares` of a tree's top directory (cgroup v1's maximum).
const TOP_SHARES_V1: u32 = 262_144;
/// `cpu.weight` of a tree's top directory (cgroup v2's maximum).
const TOP_WEIGHT_V2: u32 = 10_000;

/// Creates the tree's cgroups under `top` in every hierarchy and writes their limits, each
/// directory journaled at `journal` first. Fails, undoing what it did, where the top
/// directory exists already (it is not critmem's to reuse) or the kernel refuses a limit.
pub fn apply(file: &TreeFile, cgroups: HiresCgroups, top: &str, journal: &Path) -> Result<Applied> {
    let device = match file.io_device.as_deref() {
        Some(path) => Some(resolve_io_device(Path::new(path)).map_err(|reason| Error::Config { path: PathBuf::from(path), reason })?),
        None => None,
    };
    let (journal, recovered) = Journal::open(journal)?;
    let tree = &file.tree;
    let paths = cgroup_paths(tree, top);
    let mut applied = AppliedTree { cgroups, paths, journal };
    let mut io_not_applied = Vec::new();
    // cgroup v2: the controllers every cgroup of the tree gets; io wherever the root offers it,
    // for the I/O each subsystem did (`io.stat`) even without an I/O reservation.
    let mut v2_controllers = vec!["cpu", "memory"];
    if let HiresCgroups::V2 { root } = &applied.cgroups {
        let file = root.join("cgroup.controllers");
        let offered = std::fs::read_to_string(&file).map_err(|e| Error::io("read", &file, e))?;
        if device.is_some() || offered.split_whitespace().any(|c| c == "io") {
            v2_controllers.push("io");
        }
    }
    let result = (|| -> Result<()> {
        for dir in applied.cgroups.dirs(Path::new(top)) {
            if dir.exists() {
                return Err(Error::Config {
                    path: dir.clone(),
                    reason: "exists already: another tree is applied (critmem hires teardown), or the name is taken".into(),
                });
            }
        }
        if let HiresCgroups::V2 { root } = &applied.cgroups {
            for write in delegation_writes(root, Path::new(top), &v2_controllers)? {
                applied.journal.perform(&Change::Write(write))?;
            }
        }
        let paths = applied.paths.clone();
        for (id, rel) in &paths {
            let has_children = tree.subsystems().any(|s| tree.parent(s) == Some(*id));
            let mut made = vec![rel.clone()];
            if has_children && *id != ReservationTree::ROOT {
                made.push(rel.join(OWN));
            }
            for rel in &made {
                for (root, dir) in applied.cgroups.roots().into_iter().zip(applied.cgroups.dirs(rel)) {
                    applied.journal.perform(&Change::Mkdir { dir, evacuate_to: root.to_owned() })?;
                }
            }
            if let HiresCgroups::V2 { root } = &applied.cgroups {
                // Children get the controllers (inside critmem's own directory only).
                if has_children {
                    let controllers: Vec<String> = v2_controllers.iter().map(|c| format!("+{c}")).collect();
                    write_value(&root.join(rel).join("cgroup.subtree_control"), &controllers.join(" "))?;
                }
            }
            if *id == ReservationTree::ROOT {
                applied.journal.perform(&Change::Write(applied.cgroups.top_weight(rel)))?;
            }
            if made.len() == 2 {
                for write in own_writes(&applied.cgroups, tree, *id, &made[1]) {
                    applied.journal.perform(&Change::Write(write))?;
                }
            }
            for (_, kind, _, spec) in tree.reservations_of(*id) {
                let Some(spec) = spec else { continue };
                if let Spec::Io { bytes_per_s } = spec {
                    let writes = match (device, kind) {
                        (Some(device), Kind::Hard) => applied.cgroups.io_writes(rel, bytes_per_s, device),
                        _ => None,
                    };
                    match writes {
                        Some(writes) => {
                            for write in writes {
                                applied.journal.perform(&Change::Write(write))?;
                            }
                        }
                        None => io_not_applied.push(format!("{}: {} {spec}", tree.name(*id), kind.as_str())),
                    }
                    continue;
                }
                let writes = applied
                    .cgroups
                    .writes(rel, kind, spec)
                    .map_err(|reason| Error::Config { path: PathBuf::from(tree.name(*id)), reason })?;
                for write in writes {
                    applied.journal.perform(&Change::Write(write))?;
                }
            }
        }
        Ok(())
    })();
    match result {
        Ok(()) => Ok(Applied { tree: applied, recovered, io_not_applied }),
        Err(e) => {
            let _ = applied.teardown();
            Err(e)
        }
    }
}

/// The `cgroup.subtree_control` writes that give the cgroup2 directory `top` the `needed`
/// controllers: a controller reaches a cgroup only where every ancestor, the root included,
/// lists it there (the kernel refuses `+cpu` in `top` with ENOENT otherwise). Systemd's root
/// usually delegates them already; a bare root (a guest without systemd) does not. Ancestors
/// that do not exist yet are left to the tree's own directories.
fn delegation_writes(root: &Path, top: &Path, needed: &[&str]) -> Result<Vec<FileWrite>> {
    let mut writes = Vec::new();
    let mut dir = root.to_owned();
    for component in top.parent().into_iter().flat_map(Path::components).map(Some).chain([None]) {
        if !dir.is_dir() {
            break;
        }
        let file = dir.join("cgroup.subtree_control");
        let enabled = std::fs::read_to_string(&file).map_err(|e| Error::io("read", &file, e))?;
        let missing: Vec<String> =
            needed.iter().filter(|c| !enabled.split_whitespace().any(|e| e == **c)).map(|c| format!("+{c}")).collect();
        if !missing.is_empty() {
            writes.push(FileWrite::new(file, missing.join(" "), true));
        }
        match component {
            Some(component) => dir.push(component),
            None => break,
        }
    }
    Ok(writes)
}

/// The limits of subsystem `id`'s [`OWN`] leaf at `rel`: a weight for what it keeps of the CPU
/// and, where it holds a hard CPU reservation, that share as a bandwidth at the reservation's
/// period (at least the kernel's 1 ms).
fn own_writes(cgroups: &HiresCgroups, tree: &ReservationTree, id: SubsystemId, rel: &Path) -> Vec<FileWrite> {
    let own = tree.holding(id, Family::Cpu).own();
    let mut writes = vec![cgroups.weight(rel, own)];
    let period_ns = tree.reservations_of(id).find_map(|(_, kind, _, spec)| match (kind, spec) {
        (Kind::Hard, Some(Spec::Cpu { period_ns, .. })) => Some(period_ns),
        _ => None,
    });
    if let Some(period_ns) = period_ns {
        let budget_ns = (u128::from(own) * u128::from(period_ns) / u128::from(CPU_PARTS)) as u64;
        let spec = Spec::Cpu { budget_ns: budget_ns.max(1_000_000).min(period_ns), period_ns };
        // The bandwidth alone: the weight is the one above.
        writes.extend(cgroups.writes(rel, Kind::Hard, spec).unwrap_or_default().into_iter().skip(1));
    }
    writes
}

impl AppliedTree {
    /// The cgroup of subsystem `id`, relative to the roots.
    pub fn path(&self, id: SubsystemId) -> &Path {
        &self.paths.iter().find(|(s, _)| *s == id).expect("every subsystem has a path").1
    }

    /// Moves `pid` into subsystem `id`'s cgroup in every hierarchy (its [`OWN`] leaf where it
    /// has children).
    pub fn move_pid(&self, id: SubsystemId, pid: u32) -> Result<()> {
        let path = self.path(id);
        let has_children = self.paths.iter().any(|(_, p)| p.parent() == Some(path));
        let leaf = if has_children { path.join(OWN) } else { path.to_owned() };
        for dir in self.cgroups.dirs(&leaf) {
            write_value(&dir.join("cgroup.procs"), &pid.to_string())?;
        }
        Ok(())
    }

    /// Removes every cgroup (processes still inside moved to the roots first) and the journal.
    pub fn teardown(self) -> Result<RestoreReport> {
        self.journal.restore_all()
    }
}

/// Undoes what a crashed application left, by its journal; `None` when there is nothing.
pub fn teardown(journal: &Path) -> Result<Option<RestoreReport>> {
    if !journal.exists() {
        return Ok(None);
    }
    let (empty, report) = Journal::open(journal)?;
    empty.restore_all()?;
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;
    use critmem_core::scenario::load_tree_str;

    fn v1() -> HiresCgroups {
        HiresCgroups::V1 {
            cpu: "/cg/cpu".into(),
            cpuacct: "/cg/cpuacct".into(),
            memory: "/cg/memory".into(),
            blkio: Some("/cg/blkio".into()),
        }
    }

    #[test]
    fn controllers_missing_from_an_ancestors_subtree_control_are_enabled_there() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::write(root.join("cgroup.subtree_control"), "memory pids\n").unwrap();
        std::fs::create_dir(root.join("a")).unwrap();
        std::fs::write(root.join("a/cgroup.subtree_control"), "cpu io memory\n").unwrap();
        let writes = |top: &str, needed: &[&str]| -> Vec<(PathBuf, String)> {
            delegation_writes(root, Path::new(top), needed).unwrap().into_iter().map(|w| (w.path, w.contents)).collect()
        };
        assert_eq!(writes("top", &["cpu", "memory", "io"]), [(root.join("cgroup.subtree_control"), "+cpu +io".to_owned())]);
        assert_eq!(writes("a/top", &["cpu", "memory"]), [(root.join("cgroup.subtree_control"), "+cpu".to_owned())]);
        std::fs::write(root.join("cgroup.subtree_control"), "cpu io memory\n").unwrap();
        assert_eq!(writes("a/top", &["cpu", "memory", "io"]), []);
        // An ancestor still to be made is left alone.
        assert_eq!(writes("b/c/top", &["cpu", "memory"]), []);
    }

    #[test]
    fn reservations_become_the_kernels_limits() {
        let rel = Path::new("top/web");
        let cpu = Spec::Cpu { budget_ns: 4_000_000, period_ns: 8_000_000 };
        let contents =
            |w: Vec<FileWrite>| -> Vec<(String, String)> { w.into_iter().map(|w| (w.path.display().to_string(), w.contents)).collect() };
        assert_eq!(
            contents(v1().writes(rel, Kind::Hard, cpu).unwrap()),
            [
                ("/cg/cpu/top/web/cpu.shares".into(), "512".into()),
                ("/cg/cpu/top/web/cpu.cfs_period_us".into(), "8000".into()),
                ("/cg/cpu/top/web/cpu.cfs_quota_us".into(), "4000".into())
            ]
        );
        assert_eq!(contents(v1().writes(rel, Kind::Soft, cpu).unwrap()), [("/cg/cpu/top/web/cpu.shares".into(), "512".into())]);
        let v2 = HiresCgroups::V2 { root: "/cg".into() };
        assert_eq!(
            contents(v2.writes(rel, Kind::Hard, cpu).unwrap()),
            [("/cg/top/web/cpu.weight".into(), "50".into()), ("/cg/top/web/cpu.max".into(), "4000 8000".into())]
        );
        let memory = Spec::Memory { bytes: 1 << 20 };
        assert_eq!(
            contents(v1().writes(rel, Kind::Soft, memory).unwrap()),
            [("/cg/memory/top/web/memory.soft_limit_in_bytes".into(), "1048576".into())]
        );
        assert_eq!(contents(v2.writes(rel, Kind::Hard, memory).unwrap()), [("/cg/top/web/memory.max".into(), "1048576".into())]);
        assert_eq!(
            contents(v1().io_writes(rel, 4 << 20, (254, 0)).unwrap()),
            [
                ("/cg/blkio/top/web/blkio.throttle.read_bps_device".into(), "254:0 4194304".into()),
                ("/cg/blkio/top/web/blkio.throttle.write_bps_device".into(), "254:0 4194304".into())
            ]
        );
        assert_eq!(contents(v2.io_writes(rel, 1000, (8, 0)).unwrap()), [("/cg/top/web/io.max".into(), "8:0 rbps=1000 wbps=1000".into())]);
        let no_blkio = HiresCgroups::V1 { cpu: "/c".into(), cpuacct: "/c".into(), memory: "/m".into(), blkio: None };
        assert!(no_blkio.io_writes(rel, 1000, (8, 0)).is_none());
        let too_fine = Spec::Cpu { budget_ns: 500_000, period_ns: 8_000_000 };
        assert!(v1().writes(rel, Kind::Hard, too_fine).unwrap_err().contains("at least 1 ms"));
    }

    #[test]
    fn io_bytes_count_reads_and_writes_of_every_device_once() {
        let v1 = "254:0 Read 4096\n254:0 Write 8192\n254:0 Sync 0\n254:0 Async 12288\n254:0 Discard 0\n254:0 Total 12288\n8:0 Read 1\nTotal 12289\n";
        assert_eq!(v1_io_total(v1), 12289);
        assert_eq!(v2_io_total("254:0 rbytes=4096 wbytes=8192 rios=1 wios=2 dbytes=0 dios=0\n8:0 rbytes=1 wbytes=0\n"), 12289);
        assert_eq!(v1_io_total(""), 0);
    }

    #[test]
    fn a_v2_cgroup_without_the_io_controller_has_no_io_count_and_a_missing_one_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("top/a")).unwrap();
        std::fs::write(dir.path().join("top/io.stat"), "254:0 rbytes=4096 wbytes=1 rios=1 wios=1\n").unwrap();
        let v2 = HiresCgroups::V2 { root: dir.path().to_owned() };
        assert_eq!(v2.io_bytes(Path::new("top")).unwrap(), Some(4097));
        assert_eq!(v2.io_bytes(Path::new("top/a")).unwrap(), None);
        assert!(v2.io_bytes(Path::new("top/gone")).is_err());
    }

    #[test]
    fn subsystems_nest_under_the_top_directory_as_in_the_tree() {
        let file = load_tree_str(
            "[root]\ncpus = 1\nmemory_mib = 64\n[[subsystem]]\nname = \"cgi\"\nparent = \"web\"\n[[subsystem]]\nname = \"web\"\n",
        )
        .unwrap();
        let paths = cgroup_paths(&file.tree, "critmem-hires");
        let of = |name: &str| paths.iter().find(|(id, _)| file.tree.name(*id) == name).unwrap().1.clone();
        assert_eq!(of("root"), PathBuf::from("critmem-hires"));
        let top = v1().top_weight(&of("root"));
        assert_eq!((top.path.display().to_string(), top.contents), ("/cg/cpu/critmem-hires/cpu.shares".into(), "262144".into()));
        assert_eq!(of("cgi"), PathBuf::from("critmem-hires/web/cgi"));
    }

    #[test]
    fn a_parents_own_processes_hold_what_it_keeps_for_itself() {
        let file = load_tree_str(
            "[root]\ncpus = 1\nmemory_mib = 64\n[[subsystem]]\nname = \"web\"\nreserve = [{ family = \"cpu\", kind = \"hard\", budget_ms = 5, period_ms = 10 }]\n\
             [[subsystem]]\nname = \"cgi\"\nparent = \"web\"\nreserve = [{ family = \"cpu\", kind = \"hard\", budget_ms = 2, period_ms = 10 }]\n",
        )
        .unwrap();
        let web = file.tree.find("web").unwrap();
        let writes: Vec<(String, String)> = own_writes(&v1(), &file.tree, web, Path::new("t/web/.own"))
            .into_iter()
            .map(|w| (w.path.display().to_string(), w.contents))
            .collect();
        assert_eq!(
            writes,
            [
                ("/cg/cpu/t/web/.own/cpu.shares".into(), "307".into()),
                ("/cg/cpu/t/web/.own/cpu.cfs_period_us".into(), "10000".into()),
                ("/cg/cpu/t/web/.own/cpu.cfs_quota_us".into(), "3000".into()),
            ]
        );
    }

    #[test]
    fn the_machines_hierarchies_are_found_in_its_mounts() {
        let mounts = crate::layout::parse_mounts(
            "cgroup2 /sys/fs/cgroup/unified cgroup2 rw 0 0\ncgroup /sys/fs/cgroup/cpu cgroup rw,cpu 0 0\ncgroup /sys/fs/cgroup/cpuacct cgroup rw,cpuacct 0 0\ncgroup /sys/fs/cgroup/memory cgroup rw,memory 0 0\n",
        )
        .unwrap();
        assert_eq!(
            HiresCgroups::detect(&mounts, |_| None).unwrap(),
            HiresCgroups::V1 {
                cpu: "/sys/fs/cgroup/cpu".into(),
                cpuacct: "/sys/fs/cgroup/cpuacct".into(),
                memory: "/sys/fs/cgroup/memory".into(),
                blkio: None
            }
        );
        let with_blkio = crate::layout::parse_mounts(
            "cgroup /sys/fs/cgroup/cpu,cpuacct cgroup rw,cpu,cpuacct 0 0\ncgroup /sys/fs/cgroup/memory cgroup rw,memory 0 0\ncgroup /sys/fs/cgroup/blkio cgroup rw,blkio 0 0\n",
        )
        .unwrap();
        let found = HiresCgroups::detect(&with_blkio, |_| None).unwrap();
        assert!(matches!(&found, HiresCgroups::V1 { blkio: Some(b), .. } if b == Path::new("/sys/fs/cgroup/blkio")));
        // cpu and cpuacct in one hierarchy: its directories are made once.
        assert_eq!(found.roots().len(), 3);
        let v2 = crate::layout::parse_mounts("cgroup2 /sys/fs/cgroup cgroup2 rw 0 0\n").unwrap();
        assert_eq!(
            HiresCgroups::detect(&v2, |_| Some("cpuset cpu io memory".into())).unwrap(),
            HiresCgroups::V2 { root: "/sys/fs/cgroup".into() }
        );
        let err = HiresCgroups::detect(&v2, |_| Some("memory".into())).unwrap_err().to_string();
        assert!(err.contains("cpu controller"), "{err}");
    }
}
