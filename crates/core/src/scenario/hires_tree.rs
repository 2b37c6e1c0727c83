//! The reservation tree as a TOML file:
//!
//! ```toml
//! [root]                 # what the machine offers
//! cpus = 1
//! memory_mib = 1024
//! io_mib_per_s = 100     # optional
//! io_device = "/dev/vda" # optional: the disk I/O reservations throttle on Linux (a block
//!                        # device, or any path on a filesystem of that disk)
//!
//! [[subsystem]]
//! name = "web"
//! parent = "root"        # optional: the root
//! overhead = { memory_kib = 64, cpu_percent = 0.5 }   # optional, held back from its children
//! reserve = [
//!   { family = "cpu", kind = "hard", budget_ms = 4, period_ms = 8 },
//!   { family = "memory", kind = "soft", mib = 256 },
//! ]
//! command = ["./server", "--port", "8080"]   # optional: on Linux, run inside it
//! processes = 1                               # optional: copies of the command
//! ```
//!
//! Subsystems may come in any order; each one's reservations are made from its parent, parents
//! first, in file order, through the same admission control as [`ReservationTree::bind`].

use super::raw::without_type_names;
use crate::hires::{Family, Kind, Refusal, ResId, ReservationTree, Spec, SubsystemId, CPU_PARTS};
use serde::Deserialize;

/// What is wrong with a tree file, in one line.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{where_}: {reason}")]
pub struct TreeError {
    pub where_: String,
    pub reason: String,
}

fn err(where_: impl Into<String>, reason: impl Into<String>) -> TreeError {
    TreeError { where_: where_.into(), reason: reason.into() }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTree {
    root: RawRoot,
    #[serde(default)]
    subsystem: Vec<RawSubsystem>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRoot {
    cpus: u64,
    memory_mib: f64,
    #[serde(default)]
    io_mib_per_s: f64,
    #[serde(default)]
    io_device: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSubsystem {
    name: String,
    #[serde(default)]
    parent: Option<String>,
    #[serde(default)]
    overhead: RawOverhead,
    #[serde(default)]
    reserve: Vec<RawReserve>,
    #[serde(default)]
    command: Option<Vec<String>>,
    #[serde(default)]
    processes: Option<u32>,
}

#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawOverhead {
    #[serde(default)]
    cpu_percent: f64,
    #[serde(default)]
    memory_kib: f64,
    #[serde(default)]
    io_kib_per_s: f64,
}

#[derive(Deserialize)]
#[serde(tag = "family", rename_all = "lowercase")]
enum RawReserve {
    Cpu(RawCpu),
    Memory(RawMemory),
    Io(RawIo),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCpu {
    kind: Kind,
    budget_ms: f64,
    period_ms: f64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawMemory {
    kind: Kind,
    mib: f64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawIo {
    kind: Kind,
    mib_per_s: f64,
}

/// A loaded tree: the reservations made, and which subsystem and reservation each line of the
/// file became.
#[derive(Clone, Debug)]
pub struct TreeFile {
    pub tree: ReservationTree,
    /// In file order: the subsystem and its reservations, in the order listed.
    pub subsystems: Vec<(SubsystemId, Vec<ResId>)>,
    /// In file order: the command each subsystem runs (on Linux), and how many copies.
    pub commands: Vec<Option<(Vec<String>, u32)>>,
    /// The disk whose bandwidth the I/O reservations are (on Linux), as written.
    pub io_device: Option<String>,
}

/// Reads `text` as a reservation tree; every reservation is made and admitted, or the first
/// that is not is the error.
pub fn load_tree_str(text: &str) -> Result<TreeFile, TreeError> {
    let deserializer = toml::Deserializer::parse(text).map_err(|e| {
        let at = e.span().map_or("tree".to_owned(), |span| {
            let before = &text[..span.start.min(text.len())];
            let column = before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1;
            format!("tree, line {}, column {column}", before.matches('\n').count() + 1)
        });
        err(at, one_line(e.message()))
    })?;
    let raw: RawTree = serde_path_to_error::deserialize(deserializer).map_err(|e| {
        let path = e.path().to_string();
        err(if path == "." { "tree".to_owned() } else { path }, without_type_names(&one_line(e.into_inner().message())))
    })?;
    let amount = |where_: &str, value: f64, unit: f64| -> Result<u64, TreeError> {
        if !value.is_finite() || value < 0.0 {
            return Err(err(where_, format!("must be a number of at least 0 (got {value})")));
        }
        let scaled = (value * unit).round();
        if scaled > u64::MAX as f64 {
            return Err(err(where_, format!("is too large (got {value})")));
        }
        Ok(scaled as u64)
    };
    let mut tree = ReservationTree::new(
        raw.root.cpus,
        amount("root.memory_mib", raw.root.memory_mib, (1u64 << 20) as f64)?,
        amount("root.io_mib_per_s", raw.root.io_mib_per_s, (1u64 << 20) as f64)?,
    );
    if raw.root.cpus == 0 {
        return Err(err("root.cpus", "must be at least 1"));
    }
    if raw.root.io_device.as_deref().is_some_and(|d| d.trim().is_empty()) {
        return Err(err("root.io_device", "must name a block device or a path on its filesystem"));
    }

    let names: Vec<&str> = raw.subsystem.iter().map(|s| s.name.as_str()).collect();
    for (i, s) in raw.subsystem.iter().enumerate() {
        let at = format!("subsystem[{i}]");
        if s.name.is_empty() || s.name == "root" {
            return Err(err(format!("{at}.name"), format!("must be a name other than \"root\" (got {:?})", s.name)));
        }
        if names[..i].contains(&s.name.as_str()) {
            return Err(err(format!("{at}.name"), format!("{:?} is listed twice", s.name)));
        }
        if let Some(parent) = s.parent.as_deref().filter(|p| *p != "root" && !names.contains(p)) {
            return Err(err(format!("{at}.parent"), format!("no subsystem named {parent:?}")));
        }
        if s.name.contains(['/', '\0']) || s.name.starts_with('.') {
            return Err(err(
                format!("{at}.name"),
                format!("must not contain '/' or start with '.' (got {:?}): it names a directory", s.name),
            ));
        }
        match (&s.command, s.processes) {
            (Some(command), _) if command.first().is_none_or(String::is_empty) => {
                return Err(err(format!("{at}.command"), "must name a program"));
            }
            (None, Some(_)) => return Err(err(format!("{at}.processes"), "needs a command")),
            (_, Some(0)) => return Err(err(format!("{at}.processes"), "must be at least 1")),
            _ => {}
        }
    }
    let order = parents_first(&raw.subsystem)?;

    let mut made: Vec<Option<(SubsystemId, Vec<ResId>)>> = vec![None; raw.subsystem.len()];
    for i in order {
        let s = &raw.subsystem[i];
        let at = format!("subsystem[{i}] ({})", s.name);
        let parent = tree.find(s.parent.as_deref().unwrap_or("root")).expect("parents come first");
        let id = tree.add_subsystem(&s.name, parent).map_err(|e| err(&at, e.to_string()))?;
        let overheads = [
            (Family::Cpu, "cpu_percent", s.overhead.cpu_percent, CPU_PARTS as f64 / 100.0),
            (Family::Memory, "memory_kib", s.overhead.memory_kib, 1024.0),
            (Family::Io, "io_kib_per_s", s.overhead.io_kib_per_s, 1024.0),
        ];
        for (family, key, value, unit) in overheads {
            let value = amount(&format!("{at}.overhead.{key}"), value, unit)?;
            tree.set_overhead(id, family, value).map_err(|e| err(&at, e.to_string()))?;
        }
        let mut reservations = Vec::new();
        for (j, r) in s.reserve.iter().enumerate() {
            let at = format!("{at}.reserve[{j}]");
            let (kind, spec) = match r {
                RawReserve::Cpu(c) => {
                    let budget_ns = amount(&format!("{at}.budget_ms"), c.budget_ms, 1e6)?;
                    let period_ns = amount(&format!("{at}.period_ms"), c.period_ms, 1e6)?;
                    if period_ns == 0 {
                        return Err(err(format!("{at}.period_ms"), "must be greater than 0"));
                    }
                    if budget_ns > period_ns {
                        return Err(err(
                            format!("{at}.budget_ms"),
                            format!("must not exceed period_ms (got {} > {})", c.budget_ms, c.period_ms),
                        ));
                    }
                    (c.kind, Spec::Cpu { budget_ns, period_ns })
                }
                RawReserve::Memory(m) => (m.kind, Spec::Memory { bytes: amount(&format!("{at}.mib"), m.mib, (1u64 << 20) as f64)? }),
                RawReserve::Io(o) => {
                    (o.kind, Spec::Io { bytes_per_s: amount(&format!("{at}.mib_per_s"), o.mib_per_s, (1u64 << 20) as f64)? })
                }
            };
            if s.reserve[..j].iter().any(|other| family_of(other) == spec.family()) {
                return Err(err(&at, format!("a second {} reservation: one per family and subsystem", spec.family().as_str())));
            }
            let res = tree.create(id, kind, spec.family()).map_err(|e| err(&at, e.to_string()))?;
            tree.bind(res, spec).map_err(|e: Refusal| err(&at, e.to_string()))?;
            reservations.push(res);
        }
        made[i] = Some((id, reservations));
    }
    Ok(TreeFile {
        tree,
        subsystems: made.into_iter().map(|m| m.expect("every subsystem made")).collect(),
        commands: raw.subsystem.into_iter().map(|s| s.command.map(|c| (c, s.processes.unwrap_or(1)))).collect(),
        io_device: raw.root.io_device,
    })
}

fn family_of(r: &RawReserve) -> Family {
    match r {
        RawReserve::Cpu(_) => Family::Cpu,
        RawReserve::Memory(_) => Family::Memory,
        RawReserve::Io(_) => Family::Io,
    }
}

/// Indices of `subsystems` with every parent before its children; a cycle is an error naming
/// it.
fn parents_first(subsystems: &[RawSubsystem]) -> Result<Vec<usize>, TreeError> {
    let parent_of = |i: usize| -> Option<usize> {
        let parent = subsystems[i].parent.as_deref().filter(|p| *p != "root")?;
        subsystems.iter().position(|s| s.name == parent)
    };
    let mut placed = vec![false; subsystems.len()];
    let mut order = Vec::with_capacity(subsystems.len());
    while order.len() < subsystems.len() {
        let ready: Vec<usize> = (0..subsystems.len()).filter(|&i| !placed[i] && parent_of(i).is_none_or(|p| placed[p])).collect();
        if ready.is_empty() {
            // Every subsystem left has a parent left: following parents must come round.
            let mut seen = Vec::new();
            let mut at = (0..subsystems.len()).find(|&i| !placed[i]).expect("some left");
            while !seen.contains(&at) {
                seen.push(at);
                at = parent_of(at).expect("a parent left");
            }
            let start = seen.iter().position(|&i| i == at).expect("on the path");
            let mut cycle: Vec<&str> = seen[start..].iter().map(|&i| subsystems[i].name.as_str()).collect();
            cycle.push(&subsystems[at].name);
            return Err(err(format!("subsystem[{at}].parent"), format!("a cycle: {}", cycle.join(" → "))));
        }
        for i in ready {
            placed[i] = true;
            order.push(i);
        }
    }
    Ok(order)
}

fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const MIB: u64 = 1 << 20;

    const FIG6_TREE: &str = r#"
[root]
cpus = 1
memory_mib = 1024

[[subsystem]]
name = "web"
overhead = { memory_kib = 64, cpu_percent = 1 }
reserve = [
  { family = "cpu", kind = "hard", budget_ms = 4, period_ms = 8 },
  { family = "memory", kind = "soft", mib = 256 },
]

[[subsystem]]
name = "cgi"
parent = "web"
reserve = [{ family = "cpu", kind = "hard", budget_ms = 1, period_ms = 4 }]

[[subsystem]]
name = "rt25"
reserve = [{ family = "cpu", kind = "hard", budget_ms = 4, period_ms = 25 }]
command = ["burn"]
processes = 2
"#;

    #[test]
    fn a_tree_file_makes_its_reservations_parents_first() {
        // The child listed before its parent.
        let blocks: Vec<&str> = FIG6_TREE.split("[[subsystem]]").collect();
        let text = [blocks[0], blocks[2], blocks[1], blocks[3]].join("[[subsystem]]");
        let loaded = load_tree_str(&text).unwrap();
        let tree = &loaded.tree;
        let web = tree.find("web").unwrap();
        let cgi = tree.find("cgi").unwrap();
        assert_eq!(tree.parent(cgi), Some(web));
        assert_eq!(loaded.subsystems.len(), 3);
        assert_eq!(loaded.subsystems[0].0, cgi, "in file order");
        assert_eq!(loaded.commands[2], Some((vec!["burn".to_owned()], 2)));
        assert_eq!(loaded.commands[0], None);
        let at_web = tree.holding(web, Family::Cpu);
        assert_eq!((at_web.hard_in, at_web.overhead, at_web.hard_out), (CPU_PARTS / 2, CPU_PARTS / 100, CPU_PARTS / 4));
        assert_eq!(tree.holding(web, Family::Memory).soft_in, 256 * MIB);
        assert_eq!(tree.holding(ReservationTree::ROOT, Family::Cpu).hard_out, 66 * CPU_PARTS / 100);
        tree.check().unwrap();
    }

    #[test]
    fn bad_tree_files_are_one_line_naming_what_is_wrong() {
        let cases = [
            (
                FIG6_TREE.replace("budget_ms = 1, period_ms = 4", "budget_ms = 3, period_ms = 4"),
                "subsystem[1] (cgi).reserve[0]: cpu hard reservation of 0.7500 CPU does not fit in web",
            ),
            (
                FIG6_TREE.replace("budget_ms = 4, period_ms = 25", "budget_ms = 26, period_ms = 25"),
                "subsystem[2] (rt25).reserve[0].budget_ms: must not exceed period_ms (got 26 > 25)",
            ),
            (FIG6_TREE.replace("name = \"web\"", "name = \"web\"\nparent = \"cgi\""), "subsystem[0].parent: a cycle: web → cgi → web"),
            (
                FIG6_TREE.replace("family = \"memory\"", "family = \"disk\""),
                "subsystem[0].reserve[1].family: unknown variant `disk`, expected one of `cpu`, `memory`, `io`",
            ),
            (FIG6_TREE.replace("parent = \"web\"", "parent = \"nginx\""), "subsystem[1].parent: no subsystem named \"nginx\""),
            (FIG6_TREE.replace("name = \"rt25\"", "name = \"web\""), "subsystem[2].name: \"web\" is listed twice"),
            (
                FIG6_TREE.replace("mib = 256", "mib = 256, pages = 3"),
                "subsystem[0].reserve[1]: unknown field `pages`, expected `kind` or `mib`",
            ),
            (FIG6_TREE.replace("cpus = 1", "cpus = 0"), "root.cpus: must be at least 1"),
            (FIG6_TREE.replace("mib = 256", "mib = -1"), "subsystem[0] (web).reserve[1].mib: must be a number of at least 0 (got -1)"),
            (FIG6_TREE.replace("[root]", "[rot]"), "rot: unknown field `rot`, expected `root` or `subsystem`"),
            (FIG6_TREE.replace("name = \"cgi\"", "name = \"cgi\"\nprocesses = 2"), "subsystem[1].processes: needs a command"),
            (FIG6_TREE.replace("name = \"cgi\"", "name = \"cgi\"\ncommand = []"), "subsystem[1].command: must name a program"),
            (FIG6_TREE.replace("name = \"cgi\"", "name = \".own\""), "subsystem[1].name: must not contain '/'"),
            ("[root\n".to_owned(), "tree, line 1, column 6: unclosed table, expected `]`"),
        ];
        for (text, expected) in cases {
            let error = load_tree_str(&text).unwrap_err().to_string();
            assert!(error.starts_with(expected), "expected {expected:?}, got {error:?}");
            assert!(!error.contains('\n'), "{error:?}");
        }
    }

    proptest! {
        /// Whatever the text, loading it gives a tree or an error; never a panic.
        #[test]
        fn any_text_loads_or_is_refused(cut in 0..FIG6_TREE.len(), junk in "[ -~\n]{0,40}") {
            let mut text = FIG6_TREE.to_owned();
            let cut = (0..=cut).rev().find(|&i| text.is_char_boundary(i)).unwrap_or(0);
            text.insert_str(cut, &junk);
            let _ = load_tree_str(&text);
        }
    }
}
