//! Every mechanism composes with every other: each pair in one minimal scenario, with both on
//! the same task wherever the mechanism is per-task. A pair either runs (loads, simulates to its
//! horizon with invariants checked, every task releasing jobs) or is refused in one line for a
//! reason of physics. The matrix is `docs/composition.md`; `CRITMEM_UPDATE_DOCS=1 cargo test
//! composition` rewrites it after a deliberate change.

use critmem_core::{load_toml_str, simulate, SimOptions};
use std::fmt::Write;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;

/// The mechanisms, in the matrix's order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum M {
    Servers,
    Pip,
    Srp,
    Components,
    Tmem,
    Memory,
    SharedPages,
    Controller,
    Mc2Scheduler,
    Mc2Layout,
    HiresIo,
    ServerReservation,
    Suspension,
    Gedf,
}

const ALL: [M; 14] = [
    M::Servers,
    M::Pip,
    M::Srp,
    M::Components,
    M::Tmem,
    M::Memory,
    M::SharedPages,
    M::Controller,
    M::Mc2Scheduler,
    M::Mc2Layout,
    M::HiresIo,
    M::ServerReservation,
    M::Suspension,
    M::Gedf,
];

impl M {
    fn name(self) -> &'static str {
        match self {
            M::Servers => "servers",
            M::Pip => "PIP resource",
            M::Srp => "SRP resource",
            M::Components => "components",
            M::Tmem => "TMEM",
            M::Memory => "page-level memory",
            M::SharedPages => "reservations, shared pages",
            M::Controller => "controller, groups",
            M::Mc2Scheduler => "mc2 scheduler",
            M::Mc2Layout => "mc2 memory layout",
            M::HiresIo => "HiRes I/O",
            M::ServerReservation => "server reservations",
            M::Suspension => "self-suspension",
            M::Gedf => "gEDF",
        }
    }

    /// What the mechanism puts in the pair's scenario.
    fn describe(self) -> &'static str {
        match self {
            M::Servers => "`t` and its peer run in a deferrable server (under a global level server with gEDF, under its level with `mc2`)",
            M::Pip => "`t` holds a `pip` mutex its peer also takes, with everything else of `t`'s inside the section",
            M::Srp => "the same with an `srp` resource",
            M::Components => "`t` calls a component with one stack inside its sections; with memory, the component touches its own private memory",
            M::Tmem => "`[tmem]` manages a component's stack and cbuf, which `t` and its peer call",
            M::Memory => "`[memory]`: `t` touches its private memory in an access step inside its sections (a fault there is blocking)",
            M::SharedPages => "`t` and its peer hold hard reservations and share a region under `spc`",
            M::Controller => "SARA over a soft real-time group (`t`) and a best-effort one (the peer) whose CPU (3 % of a CPU) and swap I/O (2 MB/s) are limited",
            M::Mc2Scheduler => "`kind = \"mc2\"`: `t` at level C (global EDF on what A and B leave)",
            M::Mc2Layout => "`layout = \"mc2\"`: `t` at level B pinned in core 0's bank, or in the level-C banks where it has to page (groups, shared regions, servers, gEDF)",
            M::HiresIo => "`[io]`: `t` is the event thread of a port, activated per packet, and sends a message per job",
            M::ServerReservation => "`t`'s server reserves 8 MiB of memory (and the I/O bandwidth its sends need), bounding its pages",
            M::Suspension => "`t` self-suspends after its sections",
            M::Gedf => "`kind = \"gedf\"` on two CPUs",
        }
    }

    fn short(self) -> &'static str {
        match self {
            M::Servers => "srv",
            M::Pip => "pip",
            M::Srp => "srp",
            M::Components => "cmp",
            M::Tmem => "tmem",
            M::Memory => "mem",
            M::SharedPages => "spc",
            M::Controller => "ctl",
            M::Mc2Scheduler => "mc2",
            M::Mc2Layout => "lay",
            M::HiresIo => "io",
            M::ServerReservation => "res",
            M::Suspension => "sus",
            M::Gedf => "gedf",
        }
    }
}

/// Pairs refused because SRP's guarantee cannot hold: the shared task locks an SRP resource
/// and can suspend (it sleeps, or touches pages that may be paged out: in the global pool, a
/// group's, or a server's bound, a first touch may wait for reclaim to write a page back).
const PHYSICS: [(M, M); 4] = [(M::Srp, M::Memory), (M::Srp, M::Controller), (M::Srp, M::ServerReservation), (M::Srp, M::Suspension)];

/// The scenario with mechanisms `on`, all on task "t" where they are per-task.
fn scenario(on: &[M]) -> String {
    let has = |m: M| on.contains(&m);
    // A server's memory reservation bounds what its tasks touch: it comes with memory.
    let memory = has(M::Memory) || has(M::SharedPages) || has(M::Controller) || has(M::Mc2Layout) || has(M::ServerReservation);
    let servers = has(M::Servers) || has(M::ServerReservation);
    let mut cpus = 1;
    let mut kind = "fp";
    let mut sched = String::new();
    let mut blocks = String::new();
    // The shared task's keys and its program: before the locks, inside them, after them.
    let mut keys: Vec<String> = vec!["name = \"t\"".into(), "period_ms = 20".into(), "priority = 1".into()];
    let mut locks: Vec<&str> = Vec::new();
    let mut inside: Vec<String> = Vec::new();
    let mut after: Vec<String> = Vec::new();
    // The other task: contends for what t locks or calls.
    let mut peer: Vec<String> = vec!["name = \"peer\"".into(), "period_ms = 30".into(), "priority = 2".into()];
    let mut peer_steps: Vec<String> = Vec::new();
    let mut crit = "B";
    let mut cpu: Option<u32> = None;

    if has(M::Gedf) {
        cpus = 2;
        kind = "gedf";
    }
    if has(M::Mc2Scheduler) {
        cpus = 2;
        kind = "mc2";
        crit = "C";
    }
    // The mc2 layout places t's pages: pinned in core 0's bank at level B where it can be pinned
    // to a core, else in the level-C banks (a group reclaims its pages and a shared region is
    // level C's, so those keep it at level C too).
    let level_c = has(M::Gedf) || servers || has(M::SharedPages) || has(M::Controller);
    if has(M::Mc2Layout) && !level_c {
        crit = "B";
        cpu = Some(0);
        if kind == "fp" {
            kind = "pfp";
        }
    }
    if has(M::Mc2Layout) && level_c {
        crit = "C";
    }
    if servers {
        // A server's tasks send within the I/O bandwidth it reserves.
        let reserve = match (has(M::ServerReservation), has(M::HiresIo)) {
            (true, true) => "reserve = { memory_mib = 8, io_bytes_per_s = 100_000 }\n",
            (true, false) => "reserve = { memory_mib = 8 }\n",
            (false, true) => "reserve = { io_bytes_per_s = 100_000 }\n",
            (false, false) => "",
        };
        if kind == "gedf" {
            // A global level over both CPUs with the budgeted server under it.
            kind = "fp";
            writeln!(sched, "[[scheduler.server]]\nname = \"g\"\nkind = \"level\"\npriority = 0\ncpus = [0, 1]\npolicy = \"gedf\"")
                .unwrap();
            writeln!(sched, "[[scheduler.server]]\nname = \"s\"\nparent = \"g\"\nkind = \"deferrable\"\nbudget_ms = 8\nperiod_ms = 10\npolicy = \"fp\"\n{reserve}").unwrap();
        } else {
            // Under mc2 its level ranks a server; elsewhere its priority among the root's children.
            let priority = if kind == "mc2" { "" } else { "priority = 0\n" };
            writeln!(sched, "[[scheduler.server]]\nname = \"s\"\nkind = \"deferrable\"\nbudget_ms = 8\nperiod_ms = 10\n{priority}policy = \"fp\"\n{reserve}").unwrap();
        }
        keys.push("server = \"s\"".into());
        peer.push("server = \"s\"".into());
    }
    if memory {
        let layout = if has(M::Mc2Layout) { "layout = \"mc2\"\n" } else { "" };
        writeln!(blocks, "[memory]\ntotal_mb = 64\nswap = \"fast-ssd\"\n{layout}").unwrap();
        keys.push("private_mb = 1".into());
        peer.push("private_mb = 1".into());
        inside.push("{ access = [{ pattern = \"sweep\", mb = 1, writes = 0.5 }], compute_ms = 0.5 }".into());
        peer_steps.push("{ access = [{ pattern = \"sweep\", mb = 1 }], compute_ms = 0.5 }".into());
    }
    if has(M::SharedPages) {
        writeln!(blocks, "[[reservation]]\nname = \"r\"\nsize_mb = 4\n\n[[reservation]]\nname = \"q\"\nsize_mb = 4\n").unwrap();
        writeln!(blocks, "[[region]]\nname = \"shm\"\nsize_mb = 1\npolicy = \"spc\"\n").unwrap();
        keys.push("reservation = \"r\"".into());
        peer.push("reservation = \"q\"".into());
        inside.push("{ access = [{ pattern = \"sweep\", region = \"shm\", mb = 1 }], compute_ms = 0.5 }".into());
        peer_steps.push("{ access = [{ pattern = \"sweep\", region = \"shm\", mb = 1 }], compute_ms = 0.5 }".into());
    }
    if has(M::Controller) {
        writeln!(blocks, "[control]\ncontroller = \"sara\"\ninterval_ms = 5\n").unwrap();
        // The best-effort group's CPU and swap I/O are held low: its tasks are throttled, in
        // their sections too.
        writeln!(blocks, "[[group]]\nname = \"soft\"\nrole = \"soft-rt\"\nbcet_ms = 1\nfloor_mb = 2\n\n[[group]]\nname = \"batch\"\nrole = \"non-rt\"\nfloor_mb = 2\ncpu_millicpus = 30\nio_read_mb_per_s = 2\nio_write_mb_per_s = 2\n").unwrap();
        keys.push("group = \"soft\"".into());
        peer.push("group = \"batch\"".into());
    }
    if has(M::Pip) {
        writeln!(blocks, "[[resource]]\nname = \"P\"\nprotocol = \"pip\"\n").unwrap();
        locks.push("P");
    }
    if has(M::Srp) {
        writeln!(blocks, "[[resource]]\nname = \"S\"\nprotocol = \"srp\"\n").unwrap();
        locks.push("S");
    }
    if has(M::Components) {
        let own = if memory {
            "private_mb = 0.5\nprogram = [{ compute_ms = 0.5 }, { access = [{ pattern = \"sweep\", mb = 0.5 }], compute_ms = 0.2 }]"
        } else {
            "program = [{ compute_ms = 0.5 }]"
        };
        writeln!(blocks, "[[component]]\nname = \"c\"\nstacks = 1\n{own}\n").unwrap();
        inside.push("{ call = \"c\" }".into());
        peer_steps.push("{ call = \"c\" }".into());
    }
    if has(M::Tmem) {
        writeln!(blocks, "[tmem]\npolicy = \"tmem\"\nperiod_ms = 10\nunits_above_min = 2\n").unwrap();
        writeln!(blocks, "[[component]]\nname = \"tc\"\nstacks = 1\ncbufs = 1\nprogram = [{{ compute_ms = 0.3 }}, {{ cbuf = \"alloc\" }}, {{ compute_ms = 0.2 }}, {{ cbuf = \"free\" }}]\n").unwrap();
        inside.push("{ call = \"tc\" }".into());
        peer_steps.push("{ call = \"tc\" }".into());
    }
    if has(M::HiresIo) {
        writeln!(
            blocks,
            "[io]\nbandwidth_bytes_per_s = 1_000_000\n\n[[io.stream]]\nport = 7000\nbytes = 64\nperiod_ms = 20\n\n[[io.port]]\nport = 7000\ntask = \"t\"\n\n[[io.transmit]]\ntask = \"t\"\nport = 7000\nbytes = 100\n"
        )
        .unwrap();
    }
    if has(M::Suspension) {
        after.push("{ suspend_ms = 1 }".into());
    }
    if kind == "mc2" || has(M::Mc2Layout) {
        keys.push(format!("criticality = \"{crit}\""));
        peer.push(format!("criticality = \"{crit}\""));
    }
    if let Some(c) = cpu {
        keys.push(format!("cpu = {c}"));
        peer.push(format!("cpu = {c}"));
    }
    // The program: compute, each lock with everything inside it, then what comes after.
    let mut steps: Vec<String> = vec!["{ compute_ms = 0.5 }".into()];
    steps.extend(locks.iter().map(|r| format!("{{ lock = \"{r}\" }}")));
    steps.extend(inside);
    steps.push("{ compute_ms = 1 }".into());
    steps.extend(locks.iter().rev().map(|r| format!("{{ unlock = \"{r}\" }}")));
    steps.extend(after);
    steps.push("{ compute_ms = 0.5 }".into());
    keys.push(format!("program = [\n  {},\n]", steps.join(",\n  ")));
    let mut peer_program: Vec<String> = vec!["{ compute_ms = 1 }".into()];
    peer_program.extend(locks.iter().map(|r| format!("{{ lock = \"{r}\" }}")));
    peer_program.extend(peer_steps);
    peer_program.push("{ compute_ms = 1 }".into());
    peer_program.extend(locks.iter().rev().map(|r| format!("{{ unlock = \"{r}\" }}")));
    peer.push(format!("program = [{}]", peer_program.join(", ")));
    format!(
        "[machine]\ncpus = {cpus}\n\n[scheduler]\nkind = \"{kind}\"\n{sched}\n[run]\nhorizon_ms = 200\nseed = 1\n\n{blocks}\n[[task]]\n{}\n\n[[task]]\n{}\n",
        keys.join("\n"),
        peer.join("\n")
    )
}

#[derive(Clone, Debug, PartialEq)]
enum Outcome {
    Runs,
    Refused(String),
    Crashed(String),
}

fn try_pair(on: &[M]) -> Outcome {
    let text = scenario(on);
    let run = catch_unwind(AssertUnwindSafe(|| {
        let s = match load_toml_str(&text, "pair.toml") {
            Ok(s) => s,
            Err(e) => return Err(e.to_string()),
        };
        let r = simulate(&s, SimOptions { record_jobs: false, record_segments: false, check_invariants: true });
        assert!(r.tasks.iter().all(|t| t.stats.released > 0), "every task released jobs: {:?}", r.tasks);
        Ok(())
    }));
    match run {
        Ok(Ok(())) => Outcome::Runs,
        Ok(Err(e)) => Outcome::Refused(e),
        Err(p) => Outcome::Crashed(
            p.downcast_ref::<String>().cloned().or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string())).unwrap_or_default(),
        ),
    }
}

fn render(results: &[((M, M), Outcome)]) -> String {
    let runs = results.iter().filter(|(_, o)| *o == Outcome::Runs).count();
    let mut out = String::new();
    writeln!(out, "# Composition matrix\n").unwrap();
    writeln!(
        out,
        "Every pair of mechanisms in one minimal scenario, both on the same task wherever the mechanism is per-task (`crates/core/tests/core/composition.rs` builds and runs them; this page is its output). **{runs} of {} pairs run**; the others are refused in one line, for the reason given below the table.\n",
        results.len()
    )
    .unwrap();
    let mut header = String::from("| |");
    let mut rule = String::from("|---|");
    for m in ALL {
        write!(header, " {} |", m.short()).unwrap();
        rule.push_str(":-:|");
    }
    writeln!(out, "{header}\n{rule}").unwrap();
    for a in ALL {
        write!(out, "| **{}** ({}) |", a.short(), a.name()).unwrap();
        for b in ALL {
            let cell = if a == b {
                "·"
            } else {
                let key = if a < b { (a, b) } else { (b, a) };
                match &results.iter().find(|(k, _)| *k == key).expect("every pair").1 {
                    Outcome::Runs => "✓",
                    Outcome::Refused(_) => "✗",
                    Outcome::Crashed(_) => "crash",
                }
            };
            write!(out, " {cell} |").unwrap();
        }
        writeln!(out).unwrap();
    }
    writeln!(out, "\n✓ runs, ✗ refused.\n").unwrap();
    writeln!(out, "## The mechanisms\n").unwrap();
    writeln!(
        out,
        "Each scenario has a task `t` (a program: compute, then each lock with everything per-task inside it, then what comes after) and a peer that contends for what `t` locks and calls. What each mechanism adds:\n"
    )
    .unwrap();
    for m in ALL {
        writeln!(out, "- **{}** ({}): {}", m.short(), m.name(), m.describe()).unwrap();
    }
    writeln!(
        out,
        "\nBeyond pairs, a property test draws any set of the mechanisms together: it runs or is refused in one line, never crashes; all but SRP together on one task run.\n"
    )
    .unwrap();
    let refused: Vec<_> = results.iter().filter(|(_, o)| matches!(o, Outcome::Refused(_))).collect();
    if !refused.is_empty() {
        writeln!(out, "## Refused pairs\n").unwrap();
        for ((a, b), o) in refused {
            let Outcome::Refused(why) = o else { unreachable!() };
            let why = why.strip_prefix("pair.toml: ").unwrap_or(why);
            writeln!(out, "- {} × {}: `{}`", a.name(), b.name(), why).unwrap();
        }
    }
    out
}

#[test]
fn every_mechanism_but_srp_runs_together_on_one_task() {
    let all_but_srp: Vec<M> = ALL.iter().copied().filter(|&m| m != M::Srp).collect();
    assert_eq!(try_pair(&all_but_srp), Outcome::Runs, "{}", scenario(&all_but_srp));
}

#[test]
fn every_pair_of_mechanisms_runs_or_is_refused_for_physics() {
    // Each mechanism alone runs.
    for m in ALL {
        assert_eq!(try_pair(&[m]), Outcome::Runs, "{} alone:\n{}", m.name(), scenario(&[m]));
    }
    let mut results = Vec::new();
    for (i, &a) in ALL.iter().enumerate() {
        for &b in &ALL[i + 1..] {
            results.push(((a, b), try_pair(&[a, b])));
        }
    }
    let table = render(&results);
    let doc = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/composition.md");
    if std::env::var_os("CRITMEM_UPDATE_DOCS").is_some() {
        std::fs::write(&doc, &table).expect("docs/composition.md writable");
    }
    let crashes: Vec<_> = results.iter().filter(|(_, o)| matches!(o, Outcome::Crashed(_))).collect();
    assert!(crashes.is_empty(), "crashed: {crashes:#?}");
    let unexpected: Vec<String> = results
        .iter()
        .filter(|(pair, o)| matches!(o, Outcome::Refused(_)) && !PHYSICS.contains(pair))
        .map(|((a, b), o)| format!("{} × {}: {o:?}\n{}", a.name(), b.name(), scenario(&[*a, *b])))
        .collect();
    assert!(unexpected.is_empty(), "refused for no reason of physics:\n{}", unexpected.join("\n"));
    let runs = results.iter().filter(|(_, o)| *o == Outcome::Runs).count();
    assert!(runs >= 86, "{runs} of 91 pairs run");
    assert_eq!(std::fs::read_to_string(&doc).unwrap_or_default(), table, "docs/composition.md is stale: rerun with CRITMEM_UPDATE_DOCS=1");
}

proptest::proptest! {
    #![proptest_config(crate::common::seeded_config("compositions", 96))]

    /// Any set of mechanisms together loads and runs with invariants checked, or is refused
    /// in one line; nothing crashes.
    #[test]
    fn any_set_of_mechanisms_runs_or_is_refused_in_one_line(mask in 1u32..(1 << 14)) {
        let on: Vec<M> = ALL.iter().enumerate().filter(|(i, _)| mask >> i & 1 == 1).map(|(_, &m)| m).collect();
        match try_pair(&on) {
            Outcome::Runs => {}
            Outcome::Refused(e) => proptest::prop_assert!(e.starts_with("pair.toml: ") && !e.contains('\n'), "{e}"),
            Outcome::Crashed(p) => proptest::prop_assert!(false, "{on:?} crashed: {p}\n{}", scenario(&on)),
        }
    }
}
