//! HiRes's hierarchical I/O: packets demultiplexed by port to event threads activated without
//! child-scheduler events, drops, transmit rate limits, per-subsystem usage, and the load
//! errors of `[io]` and of the server tree's reservations.

use critmem_core::io::IoResult;
use critmem_core::{load_toml_str, simulate, Nanos, SimOptions, SimResult};
use proptest::prelude::*;

const MS: u64 = 1_000_000;
const US: u64 = 1_000;

fn run(text: &str) -> SimResult {
    let s = load_toml_str(text, "test.toml").unwrap_or_else(|e| panic!("{e}"));
    simulate(&s, SimOptions { record_jobs: true, record_segments: false, check_invariants: true })
}

fn io(r: &SimResult) -> &IoResult {
    r.io().expect("the scenario declares [io]")
}

fn load_err(text: &str) -> String {
    load_toml_str(text, "t.toml").map(|_| ()).expect_err("the scenario is refused").to_string()
}

/// A chain of servers `d{depth}` (deferrable 2 ms per 10 ms on top, levels below) at root
/// priority `depth`, its leaf holding event thread `rx{depth}` on port 7000 + depth (packets
/// every 10 ms from `offset_ms`) and `timer{depth}`, released 1 ms after each packet.
fn chain(depth: usize, offset_ms: f64) -> (String, String) {
    let mut servers = format!(
        "[[scheduler.server]]\nname = \"d{depth}\"\nkind = \"deferrable\"\nbudget_ms = 2\nperiod_ms = 10\npriority = {depth}\npolicy = \"fp\"\n"
    );
    let mut leaf = format!("d{depth}");
    for level in 1..depth {
        let name = format!("d{depth}.{level}");
        servers +=
            &format!("[[scheduler.server]]\nname = \"{name}\"\nparent = \"{leaf}\"\nkind = \"level\"\npriority = 0\npolicy = \"fp\"\n");
        leaf = name;
    }
    let rest = format!(
        "[[io.stream]]\nport = {port}\nbytes = 64\nperiod_ms = 10\noffset_ms = {offset_ms}\n\
         [[io.port]]\nport = {port}\ntask = \"rx{depth}\"\n\
         [[task]]\nname = \"rx{depth}\"\nserver = \"{leaf}\"\npriority = 0\nwcet_ms = 0.05\nperiod_ms = 10\n\
         [[task]]\nname = \"timer{depth}\"\nserver = \"{leaf}\"\npriority = 1\nwcet_ms = 0.2\nperiod_ms = 10\noffset_ms = {}\n",
        offset_ms + 1.0,
        port = 7000 + depth,
    );
    (servers, rest)
}

fn chains(depths: &[usize], horizon_ms: u64) -> String {
    let mut servers = String::new();
    let mut rest = String::new();
    for (i, &d) in depths.iter().enumerate() {
        let (s, r) = chain(d, 2.5 * i as f64);
        servers += &s;
        rest += &r;
    }
    format!("[run]\nhorizon_ms = {horizon_ms}\n[scheduler]\nkind = \"fp\"\nevent_cost_us = 100\n[io]\n{servers}{rest}")
}

/// Release-to-start delay of every job of task `task` that started.
fn start_delays(r: &SimResult, task: &str) -> Vec<Nanos> {
    let t = r.tasks.iter().position(|t| t.name == task).expect("the task") as u32;
    r.jobs.iter().filter(|j| j.task == t).filter_map(|j| j.start.map(|s| s - j.release)).collect()
}

#[test]
fn packet_latency_is_flat_across_depth_while_a_timer_wake_grows_by_the_event_cost_per_level() {
    let r = run(&chains(&[1, 2, 3, 4], 200));
    let io = io(&r);
    for depth in 1..=4usize {
        let port = io.ports.iter().find(|p| p.port == 7000 + depth as u16).expect("bound port");
        assert_eq!((port.depth, port.arrivals, port.received, port.started), (depth, 20, 20, 20), "depth {depth}");
        // Dispatched at its arrival at every depth: no child-scheduler event on the way.
        assert_eq!((port.latency_total_ns, port.latency_max_ns), (0, 0), "depth {depth}");
        let timer = start_delays(&r, &format!("timer{depth}"));
        assert_eq!(timer.len(), 20);
        assert!(timer.iter().all(|&d| d == Nanos(depth as u64 * 100 * US)), "depth {depth}: {timer:?}");
    }
    // Every packet's job became eligible with no event; the timers' events were delivered one
    // per server on their paths.
    for s in &io.subsystems {
        assert_eq!(s.direct_activations, s.packets_received, "{}", s.name);
    }
    let delivered: u64 = r.servers().iter().map(|s| s.events_delivered).sum();
    assert_eq!(delivered, 20 * (1 + 2 + 3 + 4));
}

#[test]
fn the_bundled_example_shows_flat_io_latency_and_timer_latency_growing_with_depth() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/hires-io-demux.toml");
    let text = std::fs::read_to_string(path).expect("the example");
    let s = load_toml_str(&text, "hires-io-demux.toml").unwrap_or_else(|e| panic!("{e}"));
    let r = simulate(&s, SimOptions { record_jobs: true, record_segments: false, check_invariants: true });
    let io = io(&r);
    let rx: Vec<_> = (1..=4).map(|d| io.ports.iter().find(|p| p.port == 7000 + d).expect("bound")).collect();
    for (d, p) in rx.iter().enumerate() {
        assert_eq!(p.depth, d + 1);
        assert_eq!(p.received, 100);
        assert_eq!(p.latency_max_ns, rx[0].latency_max_ns, "port {}", p.port);
        assert_eq!(p.latency_total_ns, rx[0].latency_total_ns, "port {}", p.port);
    }
    for d in 1..=4u64 {
        assert!(start_delays(&r, &format!("timer-d{d}")).iter().all(|&x| x == Nanos(d * 100 * US)), "timer-d{d}");
    }
    let bulk = io.subsystems.iter().find(|s| s.name == "bulk").expect("bulk");
    assert!(bulk.messages_delayed > 0 && bulk.bytes_sent > 0);
    let unbound = io.ports.iter().find(|p| p.port == 9999).expect("seen");
    assert!(unbound.task.is_none() && unbound.dropped == unbound.arrivals && unbound.arrivals > 0);
}

/// Two subsystems under an fp root: `hi` (priority 0) with `hi-job`, and `lo` at depth
/// `lo_depth` holding the event thread `rx` on port 80.
fn two(hi_job: &str, lo_depth: usize, streams: &str) -> String {
    let mut text = format!(
        "[run]\nhorizon_ms = 30\n[scheduler]\nkind = \"fp\"\nevent_cost_us = 100\n[io]\n{streams}\
         [[io.port]]\nport = 80\ntask = \"rx\"\n\
         [[scheduler.server]]\nname = \"hi\"\nkind = \"level\"\npriority = 0\npolicy = \"fp\"\n\
         [[scheduler.server]]\nname = \"lo\"\nkind = \"deferrable\"\nbudget_ms = 1\nperiod_ms = 10\npriority = 1\npolicy = \"fp\"\n"
    );
    let mut leaf = "lo".to_string();
    for level in 1..lo_depth {
        text +=
            &format!("[[scheduler.server]]\nname = \"lo{level}\"\nparent = \"{leaf}\"\nkind = \"level\"\npriority = 0\npolicy = \"fp\"\n");
        leaf = format!("lo{level}");
    }
    text + &format!(
        "[[task]]\nname = \"hi-job\"\nserver = \"hi\"\npriority = 0\nperiod_ms = 30\n{hi_job}\n\
         [[task]]\nname = \"rx\"\nserver = \"{leaf}\"\npriority = 0\nwcet_ms = 0.1\nperiod_ms = 10\n"
    )
}

#[test]
fn packets_reach_only_the_event_thread_of_their_port_and_unbound_ports_drop() {
    let streams = "[[io.stream]]\nport = 80\nbytes = 100\nperiod_ms = 5\n[[io.stream]]\nport = 81\nbytes = 40\nperiod_ms = 3\n";
    let r = run(&two("wcet_ms = 0.1\noffset_ms = 29", 1, streams));
    let io = io(&r);
    let (p80, p81) = (&io.ports[0], &io.ports[1]);
    assert_eq!((p80.port, p80.task.as_deref(), p80.subsystem.as_deref()), (80, Some("rx"), Some("lo")));
    assert_eq!((p80.arrivals, p80.received, p80.dropped, p80.bytes_received), (6, 6, 0, 600));
    assert_eq!((p81.port, p81.task.as_deref(), p81.arrivals, p81.received, p81.dropped), (81, None, 10, 0, 10));
    assert_eq!((io.arrivals, io.received, io.dropped_unbound), (16, 6, 10));
    let rx = r.tasks.iter().find(|t| t.name == "rx").expect("rx");
    assert_eq!(rx.stats.released, 6, "one job per packet, none of its own");
    let lo = io.subsystems.iter().find(|s| s.name == "lo").expect("lo");
    assert_eq!((lo.packets_received, lo.bytes_received), (6, 600));
    assert_eq!(io.subsystems.iter().find(|s| s.name == "hi").map(|s| s.packets_received), Some(0));
}

#[test]
fn an_event_thread_that_does_not_outrank_what_runs_waits_for_child_scheduler_delivery() {
    // hi's job runs 0.1-5.1 ms (after hi's own delivery of its release); the packet at 1 ms to
    // lo (depth d) cannot preempt it, so its activation is an ordinary event: after hi's job,
    // d deliveries of 0.1 ms, then rx starts.
    for depth in 1..=3u64 {
        let r = run(&two("wcet_ms = 5", depth as usize, "[[io.stream]]\nport = 80\nbytes = 10\nperiod_ms = 30\noffset_ms = 1\n"));
        let p = &io(&r).ports[0];
        assert_eq!(p.latency_max_ns, 4 * MS + (1 + depth) * 100 * US, "depth {depth}");
        assert_eq!(io(&r).subsystems[1].direct_activations, 0);
    }
    // Arriving with the CPU idle, it starts at once.
    let r = run(&two("wcet_ms = 5", 3, "[[io.stream]]\nport = 80\nbytes = 10\nperiod_ms = 30\noffset_ms = 6\n"));
    assert_eq!(io(&r).ports[0].latency_max_ns, 0);
}

#[test]
fn an_activated_event_thread_runs_only_within_its_servers_budget() {
    // lo has 1 ms per 10 ms; packets every 0.25 ms with 0.1 ms of work each use it up by 2.5 ms
    // of every period: later packets wait for the replenishment at 10 ms.
    let r = run(&two("wcet_ms = 0.1\noffset_ms = 29", 1, "[[io.stream]]\nport = 80\nbytes = 10\nperiod_ms = 0.25\nstop_ms = 10\n"));
    let lo = r.servers().iter().find(|s| s.name == "lo").expect("lo");
    assert_eq!(lo.period_consumed_ns[0], MS);
    let p = &io(&r).ports[0];
    assert_eq!(p.received, 40);
    assert!(p.latency_max_ns >= 7 * MS, "{}", p.latency_max_ns);
}

/// A subsystem whose event thread answers every packet of a Poisson stream with `reply`
/// bytes, under a bucket of `rate` bytes/s and `burst` bytes.
fn sender(rate: u64, burst: u64, reply: u64, seed: u64) -> String {
    format!(
        "[run]\nhorizon_ms = 2000\nseed = {seed}\n[scheduler]\nkind = \"fp\"\n\
         [io]\nbandwidth_bytes_per_s = 10_000_000\n\
         [[io.stream]]\nport = 80\nbytes = 200\nrate_per_s = 400\n\
         [[io.stream]]\nport = 99\nbytes = 60\nrate_per_s = 100\n\
         [[io.port]]\nport = 80\ntask = \"rx\"\n\
         [[io.port]]\nport = 81\ntask = \"rx2\"\n\
         [[io.transmit]]\ntask = \"rx\"\nport = 80\nbytes = {reply}\n\
         [[scheduler.server]]\nname = \"front\"\nparent = \"app\"\nkind = \"level\"\npriority = 0\npolicy = \"fp\"\n\
         reserve = {{ io_bytes_per_s = {rate}, io_burst_bytes = {burst} }}\n\
         [[scheduler.server]]\nname = \"app\"\nkind = \"deferrable\"\nbudget_ms = 5\nperiod_ms = 10\npriority = 0\npolicy = \"fp\"\n\
         reserve = {{ io_bytes_per_s = 5_000_000 }}\n\
         [[scheduler.server]]\nname = \"web\"\nparent = \"app\"\nkind = \"level\"\npriority = 1\npolicy = \"fp\"\n\
         [[task]]\nname = \"rx\"\nserver = \"front\"\npriority = 0\nwcet_ms = 0.1\nperiod_ms = 1\n\
         [[task]]\nname = \"rx2\"\nserver = \"web\"\npriority = 0\nwcet_ms = 0.1\nperiod_ms = 1\n"
    )
}

#[test]
fn the_bytes_a_subsystem_sends_in_any_window_stay_within_its_rate_and_burst() {
    let (rate, burst) = (300_000u64, 4_500u64);
    let r = run(&sender(rate, burst, 1500, 3));
    let io = io(&r);
    let app = &io.subsystems[0];
    assert_eq!(app.name, "front");
    assert!(app.messages_delayed > 0, "the offered 600 kB/s exceeds the bound 300 kB/s");
    let sent = &io.transmissions;
    assert_eq!(sent.len() as u64, app.messages_sent);
    for i in 0..sent.len() {
        let mut bytes = 0u128;
        for j in i..sent.len() {
            bytes += u128::from(sent[j].bytes);
            let window_ns = u128::from((sent[j].at - sent[i].at).0);
            assert!(bytes * 1_000_000_000 <= u128::from(rate) * window_ns + u128::from(burst) * 1_000_000_000, "[{i}, {j}]");
        }
    }
    // Not a byte more than the bucket allowed over the run, and every message accounted for.
    assert!(u128::from(app.bytes_sent) <= u128::from(rate) * 2 + u128::from(burst));
    let completed = r.tasks[0].stats.completed;
    assert_eq!(app.messages_sent + app.messages_queued, completed);
}

#[test]
fn each_subsystems_subtree_usage_adds_up_to_the_devices_total() {
    let r = run(&sender(1_000_000, 3000, 500, 5));
    let io = io(&r);
    let (front, app, web) = (&io.subsystems[0], &io.subsystems[1], &io.subsystems[2]);
    assert_eq!(app.subtree_bytes_received, app.bytes_received + front.subtree_bytes_received + web.subtree_bytes_received);
    assert_eq!(app.subtree_bytes_sent, app.bytes_sent + front.subtree_bytes_sent + web.subtree_bytes_sent);
    assert!(front.bytes_sent > 0 && front.bytes_received > 0);
    let top: Vec<_> = io.subsystems.iter().filter(|s| s.parent == "root").collect();
    assert_eq!(top.iter().map(|s| s.subtree_bytes_received).sum::<u64>(), io.bytes_received);
    assert_eq!(top.iter().map(|s| s.subtree_bytes_sent).sum::<u64>(), io.bytes_sent);
    let by_port: u64 = io.ports.iter().map(|p| p.bytes_received).sum();
    assert_eq!(by_port, io.bytes_received);
}

#[test]
fn the_same_seed_gives_the_same_run_and_another_seed_another() {
    let a = run(&sender(300_000, 3000, 1500, 11));
    let b = run(&sender(300_000, 3000, 1500, 11));
    assert_eq!(a.to_json(), b.to_json());
    assert_eq!(a.io(), b.io());
    let c = run(&sender(300_000, 3000, 1500, 12));
    assert_ne!(io(&a).transmissions, io(&c).transmissions);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// Every arrival is received or dropped, port by port and in total, whatever the streams,
    /// bindings, ring size and seed.
    #[test]
    fn every_arrival_is_received_or_dropped(
        seed in any::<u64>(),
        ring in 1i64..4,
        rates in proptest::collection::vec((80i64..84, 50.0f64..3000.0), 1..5),
    ) {
        let mut text = format!(
            "[run]\nhorizon_ms = 200\nseed = {seed}\n[scheduler]\nkind = \"fp\"\nevent_cost_us = 50\n[io]\nring_packets = {ring}\n\
             [[io.port]]\nport = 80\ntask = \"a\"\n[[io.port]]\nport = 81\ntask = \"b\"\n\
             [[scheduler.server]]\nname = \"s\"\nkind = \"deferrable\"\nbudget_ms = 3\nperiod_ms = 10\npriority = 0\npolicy = \"fp\"\n\
             [[scheduler.server]]\nname = \"t\"\nparent = \"s\"\nkind = \"level\"\npriority = 0\npolicy = \"fp\"\n\
             [[scheduler.server]]\nname = \"u\"\nparent = \"s\"\nkind = \"level\"\npriority = 1\npolicy = \"fp\"\n\
             [[task]]\nname = \"a\"\nserver = \"u\"\npriority = 0\nwcet_ms = 0.3\nperiod_ms = 1\n\
             [[task]]\nname = \"b\"\nserver = \"t\"\npriority = 1\nexec = {{ dist = \"uniform\", min_ms = 0.1, max_ms = 0.6 }}\nperiod_ms = 1\n"
        );
        for (port, rate) in &rates {
            text += &format!("[[io.stream]]\nport = {port}\nbytes = 100\nrate_per_s = {rate}\n");
        }
        let r = run(&text);
        let io = io(&r);
        prop_assert_eq!(io.received + io.dropped_unbound + io.dropped_ring_full, io.arrivals);
        for p in &io.ports {
            prop_assert_eq!(p.received + p.dropped, p.arrivals);
            prop_assert!(p.started + p.unfinished <= p.received);
        }
        prop_assert_eq!(io.ports.iter().map(|p| p.arrivals).sum::<u64>(), io.arrivals);
        let released: u64 = r.tasks.iter().map(|t| t.stats.released).sum();
        prop_assert_eq!(released, io.received);
    }
}

const BASE: &str = "[scheduler]\nkind = \"fp\"\n\
    [[scheduler.server]]\nname = \"a\"\nkind = \"deferrable\"\nbudget_ms = 2\nperiod_ms = 10\npriority = 0\npolicy = \"fp\"\n\
    [[scheduler.server]]\nname = \"b\"\nkind = \"deferrable\"\nbudget_ms = 2\nperiod_ms = 10\npriority = 1\npolicy = \"fp\"\n\
    [[task]]\nname = \"ta\"\nserver = \"a\"\npriority = 0\nwcet_ms = 0.1\nperiod_ms = 10\n\
    [[task]]\nname = \"tb\"\nserver = \"b\"\npriority = 0\nwcet_ms = 0.1\nperiod_ms = 10\n";

#[test]
fn a_bad_io_section_is_one_line_naming_its_key() {
    let cases = [
        ("[[io.port]]\nport = 80\ntask = \"nope\"\n", "t.toml: io.port[0].task: no task named \"nope\""),
        (
            "[[io.port]]\nport = 80\ntask = \"ta\"\n[[io.port]]\nport = 80\ntask = \"tb\"\n",
            "t.toml: io.port[1].port: port 80 is bound twice (also io.port[0]): a packet goes to one event thread",
        ),
        (
            "[[io.port]]\nport = 80\ntask = \"ta\"\n[[io.transmit]]\ntask = \"tb\"\nport = 80\nbytes = 10\n",
            "t.toml: io.transmit[0].port: source port 80 is bound to server \"a\" (task \"ta\"), not to task \"tb\"'s server \"b\": a subsystem sends only from its own ports",
        ),
        (
            "[[io.transmit]]\ntask = \"tb\"\nport = 81\nbytes = 10\n",
            "t.toml: io.transmit[0].port: source port 81 is not bound: bind it with [[io.port]] to an event thread of server \"b\"",
        ),
        (
            "[[io.port]]\nport = 80\ntask = \"ta\"\n[[io.transmit]]\ntask = \"ta\"\nport = 80\nbytes = 10\n",
            "t.toml: io.transmit[0].task: server \"a\" has no I/O bandwidth bound to rate-limit task \"ta\" by: give scheduler.server[0] (\"a\") reserve.io_bytes_per_s",
        ),
        ("bandwidth_bytes_per_s = -5\n", "t.toml: io.bandwidth_bytes_per_s: must not be negative (got -5)"),
        ("[[io.stream]]\nport = 70000\nbytes = 1\nperiod_ms = 1\n", "t.toml: io.stream[0].port: must be a port from 0 to 65535 (got 70000)"),
        (
            "[[io.stream]]\nport = 7\nbytes = 1\nperiod_ms = 1\nrate_per_s = 3\n",
            "t.toml: io.stream[0].rate_per_s: give period_ms (periodic) or rate_per_s (Poisson), not both",
        ),
        ("ring_packets = 0\n", "t.toml: io.ring_packets: must be at least 1 (got 0)"),
    ];
    for (io, want) in cases {
        let text = format!("{BASE}[io]\n{io}");
        assert_eq!(load_err(&text), want);
    }
}

#[test]
fn a_negative_or_too_small_bandwidth_bound_to_a_server_is_refused_at_its_key() {
    let with = |reserve: &str| {
        BASE.replace(
            "policy = \"fp\"\n[[scheduler.server]]\nname = \"b\"",
            &format!("policy = \"fp\"\nreserve = {reserve}\n[[scheduler.server]]\nname = \"b\""),
        ) + "[io]\n[[io.port]]\nport = 80\ntask = \"ta\"\n[[io.transmit]]\ntask = \"ta\"\nport = 80\nbytes = 1500\n"
    };
    assert_eq!(
        load_err(&with("{ io_bytes_per_s = -1 }")),
        "t.toml: scheduler.server[0].reserve.io_bytes_per_s: must not be negative (got -1)"
    );
    assert_eq!(
        load_err(&with("{ io_bytes_per_s = 0 }")),
        "t.toml: scheduler.server[0].reserve.io_bytes_per_s: must be above 0: task \"ta\" sends through it"
    );
    assert_eq!(
        load_err(&with("{ io_bytes_per_s = 1000, io_burst_bytes = 1000 }")),
        "t.toml: scheduler.server[0].reserve.io_burst_bytes: must hold the largest message sent through it (1500 bytes from task \"ta\")"
    );
    assert!(load_toml_str(&with("{ io_bytes_per_s = 1000 }"), "t.toml").is_ok());
}

#[test]
fn an_event_thread_that_skips_overruns_is_refused() {
    let text = BASE.replace("name = \"ta\"\n", "name = \"ta\"\noverrun = \"skip\"\n") + "[io]\n[[io.port]]\nport = 80\ntask = \"ta\"\n";
    assert!(load_err(&text).starts_with("t.toml: io.port[0].task: event thread \"ta\" has overrun = \"skip\""));
}

/// Under an edf root: `a` (2 ms per 5 ms) and `b` (4 ms per 20 ms), each with a job of
/// `job_ms` from 0 (`job_in` names whose) and an event thread; one packet at 1 ms to `to`.
fn edf_pair(job_in: &str, to: &str) -> SimResult {
    let port = if to == "a" { 80 } else { 81 };
    run(&format!(
        "[run]\nhorizon_ms = 20\n[scheduler]\nkind = \"edf\"\nevent_cost_us = 100\n[io]\n\
         [[io.stream]]\nport = {port}\nbytes = 10\nperiod_ms = 20\noffset_ms = 1\n\
         [[io.port]]\nport = 80\ntask = \"rx-a\"\n[[io.port]]\nport = 81\ntask = \"rx-b\"\n\
         [[scheduler.server]]\nname = \"a\"\nkind = \"deferrable\"\nbudget_ms = 2\nperiod_ms = 5\npolicy = \"fp\"\n\
         [[scheduler.server]]\nname = \"b\"\nkind = \"deferrable\"\nbudget_ms = 4\nperiod_ms = 20\npolicy = \"fp\"\n\
         [[task]]\nname = \"job\"\nserver = \"{job_in}\"\npriority = 1\nwcet_ms = 1.5\nperiod_ms = 20\n\
         [[task]]\nname = \"rx-a\"\nserver = \"a\"\npriority = 0\nwcet_ms = 0.1\nperiod_ms = 5\n\
         [[task]]\nname = \"rx-b\"\nserver = \"b\"\npriority = 0\nwcet_ms = 0.1\nperiod_ms = 20\n"
    ))
}

#[test]
fn under_edf_an_event_thread_outranks_a_server_whose_period_ends_later() {
    // b's job runs 0.1-1.6 ms (its period ends at 20); a's ends at 5, so the packet for a at
    // 1 ms preempts b at once.
    let r = edf_pair("b", "a");
    assert_eq!(io(&r).ports[0].latency_max_ns, 0);
    // a's job runs 0.1-1.6 ms; the packet for b at 1 ms does not outrank it: after a's job,
    // one delivery of 0.1 ms, so rx-b starts at 1.7 ms.
    let r = edf_pair("a", "b");
    assert_eq!(io(&r).ports[1].latency_max_ns, 700 * US);
}

#[test]
fn in_its_own_server_an_event_thread_preempts_only_a_lower_priority_job() {
    // One server with a job of 3 ms from 0 (delivered 0-0.1, runs 0.1-3.1) and the event
    // thread at priority `rx`: above the job it starts at its packet (1 ms), below it after.
    let text = |rx: i64| {
        format!(
            "[run]\nhorizon_ms = 20\n[scheduler]\nkind = \"fp\"\nevent_cost_us = 100\n[io]\n\
             [[io.stream]]\nport = 80\nbytes = 10\nperiod_ms = 20\noffset_ms = 1\n[[io.port]]\nport = 80\ntask = \"rx\"\n\
             [[scheduler.server]]\nname = \"s\"\nkind = \"level\"\npriority = 0\npolicy = \"fp\"\n\
             [[task]]\nname = \"job\"\nserver = \"s\"\npriority = 1\nwcet_ms = 3\nperiod_ms = 20\n\
             [[task]]\nname = \"rx\"\nserver = \"s\"\npriority = {rx}\nwcet_ms = 0.1\nperiod_ms = 20\n"
        )
    };
    assert_eq!(io(&run(&text(0))).ports[0].latency_max_ns, 0);
    assert_eq!(io(&run(&text(2))).ports[0].latency_max_ns, 2_200 * US, "after the job (3.1) and its own delivery (3.2)");
}

/// MC²'s servers are I/O subsystems too: a level-C server's tasks send within the bandwidth it
/// reserves, the root's own tasks at the device's, and the root's usage includes the server's.
#[test]
fn a_server_under_mc2_sends_within_its_reserved_bandwidth_beside_the_roots_own_tasks() {
    let text = r#"
[machine]
cpus = 2
[scheduler]
kind = "mc2"
[run]
horizon_ms = 100
[io]
bandwidth_bytes_per_s = 1_000_000
[[io.stream]]
port = 7000
bytes = 64
period_ms = 10
[[io.stream]]
port = 7001
bytes = 64
period_ms = 10
[[io.port]]
port = 7000
task = "served"
[[io.port]]
port = 7001
task = "plain"
[[io.transmit]]
task = "served"
port = 7000
bytes = 1000
[[io.transmit]]
task = "plain"
port = 7001
bytes = 1000
[[scheduler.server]]
name = "s"
kind = "deferrable"
budget_ms = 5
period_ms = 10
reserve = { io_bytes_per_s = 50_000 }
[[task]]
name = "served"
criticality = "C"
server = "s"
wcet_ms = 0.1
period_ms = 10
[[task]]
name = "plain"
criticality = "C"
wcet_ms = 0.1
period_ms = 10
"#;
    let r = run(text);
    let io = io(&r);
    let names: Vec<&str> = io.subsystems.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["s", "root"]);
    let (s, root) = (&io.subsystems[0], &io.subsystems[1]);
    assert_eq!((s.bandwidth_bytes_per_s, root.bandwidth_bytes_per_s), (Some(50_000), Some(1_000_000)));
    // 1000 B every 10 ms is 100 kB/s: twice what s reserves, so its messages wait; the root's
    // device has room for the plain task's.
    assert!(s.messages_delayed > 0 && s.messages_sent < root.messages_sent, "{s:?} {root:?}");
    assert_eq!(root.messages_delayed, 0);
    assert_eq!(root.subtree_bytes_sent, root.bytes_sent + s.bytes_sent);
    // What servers reserve together must fit the device.
    let e = load_err(&text.replace("io_bytes_per_s = 50_000", "io_bytes_per_s = 2_000_000"));
    assert!(e.starts_with("t.toml: scheduler.server[0].reserve.io_bytes_per_s: server \"s\" reserves 2000000 bytes/s hard, more than the machine ([io] bandwidth_bytes_per_s) has left"), "{e}");
}
