//! The server tree as HiRes's reservation tree: budgets as hard CPU reservations of the parent,
//! `overhead_percent`, `reserve` of memory and I/O, levels that reserve nothing, and the
//! one-line errors of a tree that over-reserves.

use critmem_core::hires::Kind;
use critmem_core::load_toml_str;

fn load(text: &str) -> Result<critmem_core::Scenario, String> {
    load_toml_str(text, "t.toml").map_err(|e| e.to_string())
}

/// Servers `(name, parent, budget_ms, period_ms, extra keys)` under an fp root, each leaf with a
/// task.
fn tree(servers: &[(&str, &str, f64, f64, &str)], head: &str) -> String {
    let mut s = format!("[scheduler]\nkind = \"fp\"\n{head}");
    for (i, (name, parent, budget, period, extra)) in servers.iter().enumerate() {
        let kind = if *budget > 0.0 {
            format!("kind = \"deferrable\"\nbudget_ms = {budget}\nperiod_ms = {period}\n")
        } else {
            "kind = \"level\"\n".into()
        };
        s += &format!("[[scheduler.server]]\nname = \"{name}\"\nparent = \"{parent}\"\n{kind}priority = {i}\npolicy = \"fp\"\n{extra}\n");
    }
    for (name, ..) in servers.iter().filter(|(n, ..)| !servers.iter().any(|(_, p, ..)| p == n)) {
        s += &format!("[[task]]\nname = \"t-{name}\"\nserver = \"{name}\"\npriority = 0\nwcet_ms = 0.1\nperiod_ms = 100\n");
    }
    s
}

#[test]
fn children_that_reserve_more_cpu_than_their_parent_holds_are_refused_naming_the_server() {
    let over = tree(&[("web", "root", 4.0, 10.0, ""), ("a", "web", 2.0, 10.0, ""), ("b", "web", 3.0, 10.0, "")], "");
    assert_eq!(
        load(&over).unwrap_err(),
        "t.toml: scheduler.server[2].budget_ms: server \"b\" reserves 0.3000 CPU (3 ms per 10 ms) hard, more than server \"web\" has left: \
         0.2000 CPU of 0.4000 CPU (hard holding minus overhead and hard reservations given)"
    );
    // Exactly full is fine, and so is a 91 % machine.
    assert!(load(&tree(&[("web", "root", 4.0, 10.0, ""), ("a", "web", 2.0, 10.0, ""), ("b", "web", 2.0, 10.0, "")], "")).is_ok());
    assert!(load(&tree(&[("x", "root", 4.0, 8.0, ""), ("y", "root", 4.1, 10.0, "")], "")).is_ok());
    // Top-level servers share their CPU.
    assert!(load(&tree(&[("x", "root", 6.0, 10.0, ""), ("y", "root", 5.0, 10.0, "")], ""))
        .unwrap_err()
        .starts_with("t.toml: scheduler.server[1].budget_ms: server \"y\" reserves 0.5000 CPU (5 ms per 10 ms) hard, more than CPU 0 has left: 0.4000 CPU"));
    // `overcommit` lets it load: the budgets still hold at run time.
    assert!(load(&over.replace("kind = \"fp\"\n", "kind = \"fp\"\novercommit = true\n")).is_ok());
}

#[test]
fn overhead_percent_holds_back_part_of_a_servers_reservation_from_its_children() {
    let with = |pct: &str| tree(&[("web", "root", 4.0, 10.0, pct), ("a", "web", 2.0, 10.0, ""), ("b", "web", 1.6, 10.0, "")], "");
    assert!(load(&with("overhead_percent = 5")).is_ok());
    assert!(load(&with("overhead_percent = 10")).is_ok(), "0.36 left for 0.2 + 0.16");
    assert!(load(&with("overhead_percent = 11")).unwrap_err().starts_with("t.toml: scheduler.server[2].budget_ms: server \"b\" reserves"));
    assert_eq!(
        load(&with("overhead_percent = -1")).unwrap_err(),
        "t.toml: scheduler.server[0].overhead_percent: must be between 0 and 100 (got -1)"
    );
    let on_level = tree(&[("lvl", "root", 0.0, 0.0, "overhead_percent = 5"), ("a", "lvl", 2.0, 10.0, "")], "");
    assert_eq!(
        load(&on_level).unwrap_err(),
        "t.toml: scheduler.server[0].overhead_percent: a level holds no budget: only a deferrable or polling server keeps overhead"
    );
}

#[test]
fn levels_reserve_nothing_and_their_budgeted_children_reserve_from_above_them() {
    // web 0.5 > level > two children 0.25 each: they fit web; 0.3 would not.
    let fits =
        tree(&[("web", "root", 5.0, 10.0, ""), ("lvl", "web", 0.0, 0.0, ""), ("a", "lvl", 2.5, 10.0, ""), ("b", "lvl", 2.5, 10.0, "")], "");
    assert!(load(&fits).is_ok());
    let over = fits.replace("budget_ms = 2.5\nperiod_ms = 10\npriority = 3", "budget_ms = 3\nperiod_ms = 10\npriority = 3");
    assert!(load(&over)
        .unwrap_err()
        .contains("server \"b\" reserves 0.3000 CPU (3 ms per 10 ms) hard, more than server \"web\" has left: 0.2500 CPU"));
    // Servers on a level over two CPUs reserve from both: 1.5 CPUs fit, 2.5 do not.
    let global = |budgets: &[f64]| {
        let mut s = "[machine]\ncpus = 2\n[scheduler]\nkind = \"fp\"\n[[scheduler.server]]\nname = \"g\"\nkind = \"level\"\npriority = 0\ncpus = [0, 1]\npolicy = \"gedf\"\n".to_string();
        for (i, b) in budgets.iter().enumerate() {
            s += &format!("[[scheduler.server]]\nname = \"s{i}\"\nparent = \"g\"\nkind = \"deferrable\"\nbudget_ms = {b}\nperiod_ms = 10\npolicy = \"fp\"\n[[task]]\nname = \"t{i}\"\nserver = \"s{i}\"\npriority = 0\nwcet_ms = 1\nperiod_ms = 10\n");
        }
        s
    };
    assert!(load(&global(&[5.0, 5.0, 5.0])).is_ok());
    assert!(load(&global(&[10.0, 10.0, 5.0])).unwrap_err().contains("more than CPUs [0, 1] has left: 0.0000 CPU of 2.0000 CPU"));
}

#[test]
fn memory_and_io_reservations_fit_hard_within_hard_and_soft_within_what_is_held() {
    let mem = "[memory]\ntotal_mb = 256\n";
    let with = |web: &str, a: &str| {
        tree(&[("web", "root", 4.0, 10.0, &format!("reserve = {web}")), ("a", "web", 1.0, 10.0, &format!("reserve = {a}"))], "") + mem
    };
    let s = load(&with("{ memory_mib = 64, io_bytes_per_s = 1000 }", "{ memory_mib = 64, io_bytes_per_s = 1000 }")).expect("fits");
    assert_eq!(s.reservations[1].memory_bytes, Some(64 << 20));
    assert_eq!(s.reservations[1].kind, Some(Kind::Hard));
    assert_eq!(
        load(&with("{ memory_mib = 64 }", "{ memory_mib = 65 }")).unwrap_err(),
        "t.toml: scheduler.server[1].reserve.memory_mib: server \"a\" reserves 65.00 MiB hard, more than server \"web\" has left: \
         64.00 MiB of 64.00 MiB (hard holding minus overhead and hard reservations given)"
    );
    assert!(load(&with("{ memory_mib = 300 }", "{ memory_mib = 1 }"))
        .unwrap_err()
        .starts_with("t.toml: scheduler.server[0].reserve.memory_mib: server \"web\" reserves 300.00 MiB hard, more than the machine ([memory]'s total) has left"));
    // A hard reservation must be backed by hard ones all the way up; a soft one need not.
    assert!(load(&with("{ memory_mib = 64, kind = \"soft\" }", "{ memory_mib = 8 }"))
        .unwrap_err()
        .contains("server \"a\" reserves 8.00 MiB hard"));
    assert!(load(&with("{ memory_mib = 64, kind = \"soft\" }", "{ memory_mib = 8, kind = \"soft\" }")).is_ok());
    // I/O against the device's bandwidth.
    let io = with("{ io_bytes_per_s = 600 }", "{ io_bytes_per_s = 500 }") + "[io]\nbandwidth_bytes_per_s = 1000\n";
    assert!(load(&io).is_ok());
    let io = with("{ io_bytes_per_s = 1200 }", "{ io_bytes_per_s = 500 }") + "[io]\nbandwidth_bytes_per_s = 1000\n";
    assert!(load(&io).unwrap_err().starts_with(
        "t.toml: scheduler.server[0].reserve.io_bytes_per_s: server \"web\" reserves 1200 bytes/s hard, more than the machine ([io] bandwidth_bytes_per_s) has left: 1000 bytes/s"
    ));
    assert_eq!(
        load(&with("{ memory_mib = -2 }", "{ memory_mib = 1 }")).unwrap_err(),
        "t.toml: scheduler.server[0].reserve.memory_mib: must not be negative (got -2)"
    );
    assert!(load(&with("{ memory_mib = 1, kind = \"firm\" }", "{ memory_mib = 1 }"))
        .unwrap_err()
        .contains("unknown reservation kind \"firm\"; expected hard or soft"));
}

#[test]
fn every_bundled_example_is_admitted_by_its_tree() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples");
    let mut seen = 0;
    for entry in std::fs::read_dir(dir).expect("examples") {
        let path = entry.expect("entry").path();
        if path.extension().is_some_and(|e| e == "toml") {
            let text = std::fs::read_to_string(&path).expect("read");
            if text.contains("[[scheduler.server]]") {
                load(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
                seen += 1;
            }
        }
    }
    assert!(seen >= 6, "{seen}");
}
