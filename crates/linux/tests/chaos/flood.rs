//! The job socket flooded by hundreds of hostile or broken clients.

use super::*;

/// A flooding client: after one line on stdin (so the test can place it in a group first) it
/// opens `n` connections and, by `mode`, writes as fast as the agent reads:
/// - `valid`: well-formed release/complete pairs for job numbers of its own;
/// - `malformed`: lines that are not messages (bad JSON, wrong version, random bytes);
/// - `oversized`: bytes without a newline, forever;
/// - `idle`: connects and never sends (half-open connections held);
/// - `churn`: connects, sends junk, closes, connects again.
///
/// Connections the agent closes are opened again. On SIGTERM it prints
/// `{"connects": .., "bytes": ..}`.
pub const FLOODER: &str = r#"
import json, os, random, select, signal, socket, sys
sys.stdin.readline()
path, mode, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
rnd = random.Random(n * 7 + len(mode))
stats = {"connects": 0, "bytes": 0}
def done(*_):
    print(json.dumps(stats), flush=True)
    os._exit(0)
signal.signal(signal.SIGTERM, done)
def connect():
    # A group held at its limit cannot always pay for a new socket (ENFILE, ENOBUFS).
    try:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    except OSError:
        select.select([], [], [], 0.01)
        return None
    s.setblocking(False)
    try:
        s.connect(path)
    except OSError:
        s.close()
        return None
    stats["connects"] += 1
    return s
job = [0]
def payload():
    if mode == "valid":
        out = b""
        for _ in range(32):
            job[0] += 1
            out += b'{"v":1,"op":"release","job":%d,"deadline_ns":1}\n{"v":1,"op":"complete","job":%d}\n' % (job[0], job[0])
        return out
    if mode in ("malformed", "churn"):
        return b"".join(rnd.choice([b'{"v":1,"op":"release"}\n', b"not json\n", b'{"v":2,"op":"complete","job":1}\n',
                                    bytes(rnd.randrange(1, 256) for _ in range(64)).replace(b"\n", b"x") + b"\n"]) for _ in range(32))
    return b"x" * 8192
socks = [s for s in (connect() for _ in range(n)) if s]
print("ready", flush=True)
if mode == "idle":
    while True:
        signal.pause()
while True:
    if mode == "churn":
        s = connect()
        if s:
            try:
                stats["bytes"] += s.send(payload())
            except OSError:
                pass
            s.close()
        continue
    socks += [s for s in (connect() for _ in range(n - len(socks))) if s]
    if not socks:
        select.select([], [], [], 0.01)
        continue
    _, writable, _ = select.select([], socks, [], 0.05)
    for s in writable:
        try:
            stats["bytes"] += s.send(payload())
        except BlockingIOError:
            pass
        except OSError:
            socks.remove(s)
            s.close()
"#;

/// A legitimate client: after one line on stdin, reports `jobs` release/complete pairs at one
/// job per 5 ms on a connection of its own, then prints how many it sent and exits.
const LATE_CLIENT: &str = r#"
import errno, socket, sys, time
sys.stdin.readline()
path, jobs = sys.argv[1], int(sys.argv[2])
deadline = time.clock_gettime_ns(time.CLOCK_MONOTONIC) + 10**12
for attempt in range(200):
    try:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(path)
        break
    except OSError:
        s.close()
        time.sleep(0.05)
sent, retries = 0, 0
for job in range(10**9, 10**9 + jobs):
    data = b'{"v":1,"op":"release","job":%d,"deadline_ns":%d}\n{"v":1,"op":"complete","job":%d}\n' % (job, deadline, job)
    while data:
        try:
            data = data[s.send(data):]
        except OSError as e:
            # ENOBUFS: the kernel is short of socket memory for the moment (the flood's
            # unread data); a client tries again.
            if e.errno != errno.ENOBUFS:
                raise
            retries += 1
            time.sleep(0.001)
    sent += 1
    time.sleep(0.005)
print(sent, retries, flush=True)
s.close()
"#;

#[test]
fn a_flood_of_hundreds_of_clients_keeps_the_tick_and_loses_no_legitimate_report() {
    let case = "job_socket_flood";
    let Some((_lock, machine)) = chaos_machine(case) else { return };
    let mut record = Record::new(case);
    let mut rig = Rig::running(&machine);
    let socket = rig.socket.to_string_lossy().into_owned();
    // In the throughput group: valid, malformed, oversized and idle connections; outside every
    // managed group: a client reconnecting as fast as it can. In the soft real-time group: a
    // client that never reads (the drop requests meant for its group pile up unread).
    let plan: [(&str, u32, bool); 6] = [
        ("valid", 60, true),
        ("malformed", 60, true),
        ("oversized", 40, true),
        ("idle", 100, true),
        ("churn", 1, false),
        ("idle", 4, false),
    ];
    let mut flooders = Vec::new();
    for (mode, n, in_nrt) in plan {
        let mut helper = Helper::python(FLOODER, &[&socket, mode, &n.to_string()]);
        if in_nrt {
            machine.backend.move_pid(&rig.nrt.group, helper.pid()).unwrap();
        }
        helper.say("go");
        helper.expect("ready");
        flooders.push((mode, helper));
    }
    let mut deaf = Helper::python(FLOODER, &[&socket, "idle", "1"]);
    machine.backend.move_pid(&rig.srt.group, deaf.pid()).unwrap();
    deaf.say("go");
    deaf.expect("ready");
    let connections: u32 = plan.iter().map(|p| p.1).sum::<u32>() + 1;
    record.set("flood_clients", connections);
    let interval_ns = agent_interval_ns();
    let probe = WakeProbe::start(Duration::from_nanos(interval_ns));

    // A legitimate client connecting in the middle of the flood.
    let late_jobs = if long() { 2000 } else { 300 };
    let mut late = Helper::python(LATE_CLIENT, &[&socket, &late_jobs.to_string()]);
    machine.backend.move_pid(&rig.srt.group, late.pid()).unwrap();
    late.say("go");
    let mut line = String::new();
    std::io::BufRead::read_line(late.stdout.as_mut().unwrap(), &mut line).unwrap();
    let said: Vec<u64> = line.split_whitespace().filter_map(|w| w.parse().ok()).collect();
    let [late_sent, late_retries] = said[..] else { panic!("late client said {line:?}") };
    record.set("late_client_enobufs_retries", late_retries);
    // Long enough, in the agent's ticks, to read the late client's reports beside the flood.
    run_for(&mut rig, steady().mul_f64(time_scale()));
    let machine_wake_p99_ns = probe.stop_p99_ns();
    // The loop (the main thread) ticks under SCHED_FIFO; the cgroup writers, which may reclaim
    // for long, do not.
    let policies = rig.agent.as_ref().unwrap().thread_policies();
    assert!(policies.contains(&("critmem-agent".to_owned(), 1)), "{policies:?}");
    let writers: Vec<u32> = policies.iter().filter(|(name, _)| name.starts_with("critmem-writer")).map(|p| p.1).collect();
    assert!(!writers.is_empty() && writers.iter().all(|&policy| policy == 0), "{policies:?}");
    record.set("machine_wake_latency_p99_ns", machine_wake_p99_ns);

    let mut flood_bytes = 0u64;
    let mut flood_connects = 0u64;
    for (mode, mut helper) in flooders.into_iter().chain([("idle", deaf)]) {
        nix::sys::signal::kill(Pid::from_raw(helper.pid() as i32), Signal::SIGTERM).unwrap();
        let mut line = String::new();
        let _ = std::io::BufRead::read_line(helper.stdout.as_mut().unwrap(), &mut line);
        let stats: serde_json::Value = serde_json::from_str(line.trim()).unwrap_or_else(|e| panic!("{mode} flooder said {line:?}: {e}"));
        flood_bytes += stats["bytes"].as_u64().unwrap();
        flood_connects += stats["connects"].as_u64().unwrap();
    }
    record.set("flood_bytes_sent", flood_bytes);
    record.set("flood_connects", flood_connects);
    record.set("late_client_jobs", late_sent);

    let workers = rig.stop_workers();
    std::thread::sleep(Duration::from_millis(200).mul_f64(time_scale()));
    let exit = rig.agent.take().unwrap().stop();
    assert_eq!(exit.code, Some(0), "{}", exit.stderr);
    let summary = exit.summary().clone();
    rig.check_restored();
    let srt_jobs = summary["groups"].as_array().unwrap().iter().find(|g| g["name"] == "srt").unwrap().clone();
    let worker_released = workers.srt["released"].as_u64().unwrap();
    let worker_completed = workers.srt["completed"].as_u64().unwrap();
    let stderr_lines = exit.stderr.lines().count();
    record.set("agent_log_lines", stderr_lines as u64);
    let lateness_p99 = summary["tick_lateness_p99_ns"].as_u64().unwrap();
    rig.teardown_swap();
    record.set("agent_srt_jobs", srt_jobs.clone());
    for key in ["ticks", "tick_lateness_p99_ns", "tick_lateness_max_ns", "tick_cost_p99_ns", "overruns"] {
        record.set(key, summary[key].clone());
    }
    record.set("job_socket", summary["job_socket"].clone());
    record.set("worker_srt_released", worker_released);
    record.set("worker_srt_completed", worker_completed);
    record.set("worker_srt_reports_unsent", workers.srt["reports_unsent"].clone());
    record.set("worker_srt_reports_sent", workers.srt["reports_sent"].clone());
    record.set("worker_srt_connects", workers.srt["connects"].clone());
    let _ = writeln!(std::io::stderr(), "flood summary: {summary}");
    // The flood may make a tick late by no more than the interval beyond what the machine
    // makes any thread of the agent's priority late meanwhile.
    assert!(
        lateness_p99 < interval_ns + machine_wake_p99_ns,
        "p99 tick lateness {lateness_p99} ns under the flood (interval {interval_ns} ns; a real-time thread beside it woke up to {machine_wake_p99_ns} ns late at p99)"
    );
    // No legitimate report was lost: the worker's client sent every report it made (those the
    // socket could not take at once, EAGAIN or ENOBUFS under the flood, waited in its outbox),
    // and the agent counted each one, and the late client's two per job.
    assert_eq!(workers.srt["reports_unsent"], 0, "the worker lost reports: {}", workers.srt);
    let agent_reports: u64 = ["released", "completed", "dropped"].iter().map(|k| srt_jobs[*k].as_u64().unwrap()).sum();
    let sent = workers.srt["reports_sent"].as_u64().unwrap() + 2 * late_sent;
    // The agent's warnings say why, when a report was not counted (rate-limited: one a second).
    let warnings: Vec<&str> = exit.stderr.lines().filter(|l| l.contains("WARN")).collect();
    assert_eq!(
        agent_reports,
        sent,
        "reports: agent {srt_jobs}, worker {}, late client {late_sent} jobs; the agent's warnings:\n{}",
        workers.srt,
        warnings.join("\n")
    );
    assert!(summary["job_socket"]["malformed_messages"].as_u64().unwrap() > 0, "the flood reached the agent: {summary}");
    record.write(connections as u64);
}
