//! Child-scheduler event delivery in the server hierarchy: a cost per delivered event, the
//! latency to a job d servers deep, budgets paying for delivery, and the pending-event race.

use critmem_core::{load_toml_str, simulate, Nanos, SimOptions, SimResult};

const MS: u64 = 1_000_000;
const US: u64 = 1_000;

fn run(text: &str) -> SimResult {
    let s = load_toml_str(text, "test.toml").unwrap_or_else(|e| panic!("{e}"));
    simulate(&s, SimOptions { record_jobs: true, record_segments: true, check_invariants: true })
}

/// Start time of the first job of task `task`.
fn first_start(r: &SimResult, task: u32) -> Option<Nanos> {
    r.jobs.iter().find(|j| j.task == task && j.index == 0).and_then(|j| j.start)
}

/// A chain of `depth` level servers s0 > s1 > ... with one task in the deepest, released at
/// 10 ms, and the given cost per event.
fn chain(depth: usize, cost_us: u64) -> String {
    let mut s = format!("[run]\nhorizon_ms = 20\n[scheduler]\nkind = \"fp\"\nevent_cost_us = {cost_us}\n");
    for d in 0..depth {
        s += &format!("[[scheduler.server]]\nname = \"s{d}\"\nkind = \"level\"\npriority = 0\npolicy = \"fp\"\n");
        if d > 0 {
            s += &format!("parent = \"s{}\"\n", d - 1);
        }
    }
    s + &format!("[[task]]\nname = \"t\"\nwcet_ms = 1\nperiod_ms = 20\noffset_ms = 10\npriority = 0\nserver = \"s{}\"\n", depth - 1)
}

#[test]
fn a_timer_wake_d_servers_deep_starts_after_d_deliveries() {
    // Released at 10 ms with nothing else to do: each server on the path delivers the event
    // in turn, 100 us each, so the job starts at 10 ms + d × 0.1 ms and responds in
    // 1 ms + d × 0.1 ms.
    for depth in 1..=3u64 {
        let r = run(&chain(depth as usize, 100));
        assert_eq!(first_start(&r, 0), Some(Nanos(10 * MS + depth * 100 * US)), "depth {depth}");
        assert_eq!(r.tasks[0].stats.max_response, Some(Nanos(MS + depth * 100 * US)), "depth {depth}");
        // One event per server, each charged to it and every server above it.
        for (d, s) in r.servers().iter().enumerate() {
            assert_eq!((s.events_delivered, s.event_ns), (1, 100 * US), "depth {depth}, server {d}");
            let below = depth - d as u64;
            assert_eq!(s.consumed_ns, MS + below * 100 * US, "depth {depth}, server {d}");
            assert_eq!(s.event_segments, vec![(Nanos(10 * MS + d as u64 * 100 * US), Nanos(10 * MS + (d as u64 + 1) * 100 * US))]);
        }
    }
    // Without a cost nothing is delayed and no event is counted.
    let r = run(&chain(3, 0));
    assert_eq!(first_start(&r, 0), Some(Nanos(10 * MS)));
    assert!(r.servers().iter().all(|s| s.events_delivered == 0 && s.event_ns == 0));
}

#[test]
fn a_server_without_cost_passes_events_on_at_once() {
    // s1 overrides the cost with 0: only s0 (100 us) and s2 (100 us) take time.
    let text = chain(3, 100).replace("name = \"s1\"\n", "name = \"s1\"\nevent_cost_us = 0\n");
    let r = run(&text);
    assert_eq!(first_start(&r, 0), Some(Nanos(10 * MS + 200 * US)));
    let counted: Vec<(u64, u64)> = r.servers().iter().map(|s| (s.events_delivered, s.event_ns)).collect();
    assert_eq!(counted, vec![(1, 100 * US), (1, 0), (1, 100 * US)]);
}

fn deferrable(task: &str, cost_us: u64, horizon_ms: u64) -> String {
    format!(
        "[run]\nhorizon_ms = {horizon_ms}\n[scheduler]\nkind = \"fp\"\nevent_cost_us = {cost_us}\n\
         [[scheduler.server]]\nname = \"s\"\nkind = \"deferrable\"\nbudget_ms = 2\nperiod_ms = 5\npriority = 0\npolicy = \"rm\"\n\
         [[task]]\nname = \"a\"\nserver = \"s\"\n{task}"
    )
}

#[test]
fn a_deferrable_servers_budget_pays_for_its_event_deliveries() {
    // Jobs of 1 ms every 5 ms under a 2/5 server with 100 us per event: each period the cs
    // delivers the release (0.1 ms), then the job runs 1 ms; response 1.1 ms. Over 50 ms:
    // 10 events, 10 × 1.1 = 11 ms consumed, of which 1 ms delivering.
    let r = run(&deferrable("wcet_ms = 1\nperiod_ms = 5\n", 100, 50));
    assert_eq!(r.tasks[0].stats.max_response, Some(Nanos(MS + 100 * US)));
    let s = &r.servers()[0];
    assert_eq!((s.events_delivered, s.event_ns, s.consumed_ns), (10, MS, 11 * MS));
    assert_eq!(s.period_consumed_ns, vec![MS + 100 * US; 10]);
    // Backlogged (one job longer than the run): the one event at 0 takes 0.1 ms of the first
    // period's 2, so the job runs 1.9 + 9 × 2 = 19.9 ms, and the server consumes exactly its
    // budget share, 10 × 2 = 20 ms, exhausted at 2, 7, ..., 47 ms.
    let r = run(&deferrable("wcet_ms = 1000\nperiod_ms = 1000\n", 100, 50));
    let ran: u64 = r.segments.iter().map(|g| (g.end - g.start).0).sum();
    assert_eq!(ran, 19_900 * US);
    let s = &r.servers()[0];
    assert_eq!((s.consumed_ns, s.event_ns, s.exhaustions), (20 * MS, 100 * US, 10));
    assert_eq!(s.exhausted_at, (0..10).map(|k| Nanos((5 * k + 2) * MS)).collect::<Vec<_>>());
    assert_eq!(s.period_consumed_ns, vec![2 * MS; 10]);
}

#[test]
fn a_delivery_preempted_by_a_higher_server_resumes_where_it_stopped() {
    // hi (priority 0) has a job of 2 ms at 0.5 ms; lo's cs starts delivering lo's release at
    // 0 (cost 1 ms), is preempted at 0.5 by hi's cs (1 ms, 0.5-1.5) and hi's job (1.5-3.5),
    // and finishes its remaining 0.5 ms at 3.5-4: lo's job starts at 4.
    let text = "[run]\nhorizon_ms = 20\n[scheduler]\nkind = \"fp\"\nevent_cost_us = 1000\n\
        [[scheduler.server]]\nname = \"hi\"\nkind = \"level\"\npriority = 0\npolicy = \"fp\"\n\
        [[scheduler.server]]\nname = \"lo\"\nkind = \"level\"\npriority = 1\npolicy = \"fp\"\n\
        [[task]]\nname = \"h\"\nwcet_ms = 2\nperiod_ms = 20\noffset_ms = 0.5\npriority = 0\nserver = \"hi\"\n\
        [[task]]\nname = \"l\"\nwcet_ms = 1\nperiod_ms = 20\npriority = 1\nserver = \"lo\"\n";
    let r = run(text);
    assert_eq!(first_start(&r, 0), Some(Nanos(1_500 * US)));
    assert_eq!(first_start(&r, 1), Some(Nanos(4 * MS)));
    assert_eq!(r.servers()[1].event_segments, vec![(Nanos(0), Nanos(500 * US)), (Nanos(3_500 * US), Nanos(4 * MS))]);
    assert_eq!(r.servers()[1].event_ns, MS);
}

/// HiRes's race: c1 (low priority, 8 ms) is released at 0 and its event delivered 0-1 ms
/// (cost 1 ms); c2 (high priority, 1 ms) is released at 0.5, during that delivery, the last
/// its cs was told of. With `c3` a third job (0.5 ms, lowest) arrives at 5 ms.
fn race(check: bool, c3: bool) -> SimResult {
    let mut text = format!(
        "[run]\nhorizon_ms = 30\n[scheduler]\nkind = \"fp\"\nevent_cost_us = 1000\npending_event_check = {check}\n\
         [[scheduler.server]]\nname = \"s\"\nkind = \"deferrable\"\nbudget_ms = 14\nperiod_ms = 20\npriority = 0\npolicy = \"fp\"\n\
         [[task]]\nname = \"c1\"\nwcet_ms = 8\nperiod_ms = 20\npriority = 1\nserver = \"s\"\n\
         [[task]]\nname = \"c2\"\nwcet_ms = 1\nperiod_ms = 20\noffset_ms = 0.5\npriority = 0\nserver = \"s\"\n"
    );
    if c3 {
        text += "[[task]]\nname = \"c3\"\nwcet_ms = 0.5\nperiod_ms = 20\noffset_ms = 5\npriority = 2\nserver = \"s\"\n";
    }
    run(&text)
}

/// Response time of the first job of `task`.
fn first_response(r: &SimResult, task: u32) -> Option<Nanos> {
    r.jobs.iter().find(|j| j.task == task && j.index == 0).and_then(|j| j.response())
}

#[test]
fn the_pending_event_check_delivers_an_event_that_arrives_during_the_last_delivery() {
    // With the check: c1's event 0-1, c2's (pending since 0.5) 1-2, c2 runs 2-3 (response
    // 2.5 ms), c1 3-5; c3's event preempts c1 at 5-6; c1 runs on 6-12, c3 12-12.5.
    let r = race(true, true);
    assert_eq!(first_start(&r, 1), Some(Nanos(2 * MS)));
    assert_eq!(first_response(&r, 1), Some(Nanos(2_500 * US)));
    assert_eq!(first_response(&r, 0), Some(Nanos(12 * MS)));
    assert_eq!(first_response(&r, 2), Some(Nanos(7_500 * US)));
    assert_eq!(r.servers()[0].events_delivered, 6, "c1, c2 and c3 released in [0, 20) and again in [20, 30)");
}

#[test]
fn without_the_check_a_late_event_waits_for_the_next_one() {
    // Without it: c2's event arrives while the cs delivers c1's, the last it saw, so the cs
    // dispatches c1 at 1 ms (1-5). c3's event at 5 activates the cs again, which now sees
    // c2's too: 5-6 c2's, 6-7 c3's; c2 runs 7-8: response 7.5 ms instead of 2.5, its extra
    // delay the 5 ms until the next event. c1 finishes 8-12 (response 12 either way).
    let r = race(false, true);
    assert_eq!(first_start(&r, 1), Some(Nanos(7 * MS)));
    assert_eq!(first_response(&r, 1), Some(Nanos(7_500 * US)));
    assert_eq!(first_response(&r, 0), Some(Nanos(12 * MS)));
    assert_eq!(first_response(&r, 2), Some(Nanos(7_500 * US)));
}

#[test]
fn without_the_check_and_no_other_event_a_late_event_waits_for_the_replenishment() {
    // No c3: c1 runs 1-9 and the server idles with c2's event unseen until its budget is
    // replenished at 20 ms; then the cs delivers c2's (20-21) and c1's second release
    // (21-22), and c2 runs 22-23: response 22.5 ms, past its deadline of 20.5.
    let r = race(false, false);
    assert_eq!(first_start(&r, 1), Some(Nanos(22 * MS)));
    assert_eq!(r.tasks[1].stats.deadline_misses, 1);
    let r = race(true, false);
    assert_eq!(first_start(&r, 1), Some(Nanos(2 * MS)));
    assert_eq!(r.tasks[1].stats.deadline_misses, 0);
}

#[test]
fn event_cost_keys_are_checked() {
    let head = "[scheduler]\nkind = \"fp\"\n";
    let server = "[[scheduler.server]]\nname = \"s\"\nkind = \"level\"\npriority = 0\n";
    let task = "[[task]]\nname = \"a\"\nwcet_ms = 1\nperiod_ms = 5\npriority = 1\nserver = \"s\"\n";
    let flat = "[[task]]\nname = \"a\"\nwcet_ms = 1\nperiod_ms = 5\npriority = 1\n";
    let cases = [
        (format!("{head}event_cost_us = -1\n{server}{task}"), "scheduler.event_cost_us", "must not be negative"),
        (format!("{head}{server}event_cost_us = nan\n{task}"), "scheduler.server[0].event_cost_us", "finite number of microseconds"),
        (format!("{head}event_cost_us = 5\n{flat}"), "scheduler.event_cost_us", "only applies with [[scheduler.server]]"),
        (format!("{head}pending_event_check = false\n{flat}"), "scheduler.pending_event_check", "only applies with [[scheduler.server]]"),
    ];
    for (text, key, reason) in cases {
        let e = load_toml_str(&text, "bad.toml").expect_err(&text).to_string();
        let prefix = format!("bad.toml: {key}: ");
        assert!(!e.contains('\n') && e.starts_with(&prefix) && e.contains(reason), "expected {prefix}...{reason}..., got {e}");
    }
}

#[test]
fn a_waiter_in_one_server_runs_its_holder_from_a_sibling_server_and_pays_for_it() {
    // Servers hi > mid > lo (deferrable 10/20 each). lo takes the bus at 0 for 3 ms; hi wants
    // it at 1 ms and waits, linked to lo; mid (5 ms) arrives at 1.5. hi stays the root's
    // choice, so lo runs in its place 1-3 (mid waits), unlocks; hi runs 3-4, mid 4-9.
    // Responses: hi 3, mid 7.5, lo 3. hi's server pays for lo's 2 ms in its place: it
    // consumed 3 ms, lo's 1 ms (0-1), mid's 5. With protocol "none" mid runs first and hi
    // responds in 8 ms. The budgets (1.5 CPUs in all) never run out: the tree is overcommitted.
    let text = |protocol: &str, cost_us: u64| {
        let mut s = format!(
            "[run]\nhorizon_ms = 20\n[scheduler]\nkind = \"fp\"\nevent_cost_us = {cost_us}\novercommit = true\n\
             [[resource]]\nname = \"bus\"\nprotocol = \"{protocol}\"\n"
        );
        for (i, name) in ["hi", "mid", "lo"].iter().enumerate() {
            s += &format!("[[scheduler.server]]\nname = \"{name}\"\nkind = \"deferrable\"\nbudget_ms = 10\nperiod_ms = 20\npriority = {i}\npolicy = \"fp\"\n");
        }
        s + "[[task]]\nname = \"h\"\nperiod_ms = 20\noffset_ms = 1\npriority = 0\nserver = \"hi\"\n\
             program = [{ lock = \"bus\" }, { compute_ms = 1 }, { unlock = \"bus\" }]\n\
             [[task]]\nname = \"m\"\nwcet_ms = 5\nperiod_ms = 20\noffset_ms = 1.5\npriority = 1\nserver = \"mid\"\n\
             [[task]]\nname = \"l\"\nperiod_ms = 20\npriority = 2\nserver = \"lo\"\n\
             program = [{ lock = \"bus\" }, { compute_ms = 3 }, { unlock = \"bus\" }]\n"
    };
    let r = run(&text("pip", 0));
    let resp: Vec<Option<Nanos>> = (0..3).map(|t| first_response(&r, t)).collect();
    assert_eq!(resp, vec![Some(Nanos(3 * MS)), Some(Nanos(7_500 * US)), Some(Nanos(3 * MS))]);
    let consumed: Vec<u64> = r.servers().iter().map(|s| s.consumed_ns).collect();
    assert_eq!(consumed, vec![3 * MS, 5 * MS, MS]);
    let r = run(&text("none", 0));
    assert_eq!(first_response(&r, 0), Some(Nanos(8 * MS)));
    // With 100 us per event: lo's cs delivers l's release 0-0.1, l takes the bus at 0.1 and
    // runs 0.1-1 (0.9 of its 3 ms); hi's cs delivers h's release 1-1.1; h waits at 1.1 and
    // stays hi's choice, so l runs 1.1-3.2 in its place (mid's event, pending since 1.5, waits
    // behind hi); h runs 3.2-4.2: response 3.2 ms. hi pays 0.1 + 2.1 + 1 = 3.2 ms.
    let r = run(&text("pip", 100));
    assert_eq!(first_response(&r, 0), Some(Nanos(3_200 * US)));
    assert_eq!(r.servers()[0].consumed_ns, 3_200 * US);
}

/// A chain of `depth` level servers with two tasks in the deepest: `io` (priority 0) computes
/// 1 ms, suspends 5 ms and computes 1 ms more; `bg` (priority 1) computes 4 ms. Both are
/// released at 0.
fn blocking_chain(depth: usize, cost_us: u64) -> String {
    let mut s = format!("[run]\nhorizon_ms = 20\n[scheduler]\nkind = \"fp\"\nevent_cost_us = {cost_us}\n");
    for d in 0..depth {
        s += &format!("[[scheduler.server]]\nname = \"s{d}\"\nkind = \"level\"\npriority = 0\npolicy = \"fp\"\n");
        if d > 0 {
            s += &format!("parent = \"s{}\"\n", d - 1);
        }
    }
    let leaf = depth - 1;
    s + &format!(
        "[[task]]\nname = \"io\"\nwcet_ms = 2\nperiod_ms = 20\npriority = 0\nserver = \"s{leaf}\"\nsuspend = [{{ after_ms = 1, for_ms = 5 }}]\n\
         [[task]]\nname = \"bg\"\nwcet_ms = 4\nperiod_ms = 20\npriority = 1\nserver = \"s{leaf}\"\n"
    )
}

#[test]
fn a_job_blocking_in_the_parent_is_an_event_the_child_learns_by_delivery() {
    for depth in 1..=3u64 {
        let r = run(&blocking_chain(depth as usize, 100));
        let d = depth * 100 * US;
        // Both releases are delivered first (2 events × depth deliveries), so io starts at
        // 2d and suspends at 2d + 1 ms. The block then travels down (d) before bg, whose
        // release was delivered long ago, may start: bg starts at 3d + 1 ms.
        assert_eq!(first_start(&r, 0), Some(Nanos(2 * d)), "depth {depth}");
        assert_eq!(first_start(&r, 1), Some(Nanos(3 * d + MS)), "depth {depth}");
        // io wakes at 2d + 6 ms and takes d to be delivered; it preempts bg and ends 1 ms
        // later: response 3d + 7 ms.
        let io = r.jobs.iter().find(|j| j.task == 0 && j.index == 0).expect("io's job");
        assert_eq!(io.completion, Some(Nanos(3 * d + 7 * MS)), "depth {depth}");
        // Each server delivered two releases, one block and one wake.
        assert!(r.servers().iter().all(|s| s.events_delivered == 4), "depth {depth}: {:?}", r.servers());
    }
    // Without a cost bg starts the instant io suspends.
    let r = run(&blocking_chain(2, 0));
    assert_eq!(first_start(&r, 1), Some(Nanos(MS)));
}

/// `waiter` and `signaller` in the deepest of `depth` level servers: the signaller takes the
/// event (a unit, no inheritance) at 0 and hands it over at 1 ms; the waiter, released at
/// 0.5 ms, blocks on it.
fn handover_chain(depth: usize, cost_us: u64) -> String {
    let mut s = format!("[run]\nhorizon_ms = 10\n[scheduler]\nkind = \"fp\"\nevent_cost_us = {cost_us}\npending_event_check = true\n");
    s += "[[resource]]\nname = \"event\"\nunits = 1\nprotocol = \"none\"\n";
    for d in 0..depth {
        s += &format!("[[scheduler.server]]\nname = \"s{d}\"\nkind = \"level\"\npriority = 0\npolicy = \"fp\"\n");
        if d > 0 {
            s += &format!("parent = \"s{}\"\n", d - 1);
        }
    }
    let leaf = depth - 1;
    s += &format!(
        "[[task]]\nname = \"waiter\"\nperiod_ms = 10\noffset_ms = 0.5\npriority = 0\nserver = \"s{leaf}\"\n\
         program = [{{ lock = \"event\" }}, {{ compute_ms = 0.1 }}, {{ unlock = \"event\" }}]\n"
    );
    s + &format!(
        "[[task]]\nname = \"signaller\"\nperiod_ms = 10\npriority = 1\nserver = \"s{leaf}\"\n\
         program = [{{ lock = \"event\" }}, {{ compute_ms = 1 }}, {{ unlock = \"event\" }}, {{ compute_ms = 1 }}]\n"
    )
}

#[test]
fn a_thread_woken_by_one_of_its_own_subsystem_runs_with_no_delivery_at_any_depth() {
    // The signaller's release reaches it after d deliveries and it unlocks 1 ms of work later;
    // the waiter, woken by it, runs that very instant: its own subsystem's scheduler, which
    // the signaller invoked, lets it in, and no parent takes part (HiRes Fig. 4(a)).
    for depth in 1..=4usize {
        let r = run(&handover_chain(depth, 100));
        // The unlock: where the signaller's run time reaches its 1 ms of work under the lock.
        let mut ran = 0;
        let mut unlock = None;
        for seg in r.segments.iter().filter(|s| s.task == 1) {
            let len = seg.end.0 - seg.start.0;
            if unlock.is_none() && ran + len >= MS {
                unlock = Some(Nanos(seg.start.0 + (MS - ran)));
            }
            ran += len;
        }
        let unlock = unlock.expect("the signaller unlocked");
        let resumed = r.segments.iter().filter(|s| s.task == 0 && s.start >= unlock).map(|s| s.start).min();
        assert_eq!(resumed, Some(unlock), "depth {depth}: woken at {unlock:?}");
    }
}
