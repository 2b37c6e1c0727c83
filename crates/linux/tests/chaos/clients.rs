//! Clients reporting for a group they are not in: from another cgroup, as another user, and
//! over the connection of a process whose pid now names someone else.

use super::*;

/// After one line on stdin: optionally becomes user `uid`, connects, sends a release claiming
/// group `claim`, and prints what became of it: `denied` (could not connect), `closed` (the
/// agent closed the connection) or `open`.
const CLAIMER: &str = r#"
import os, select, socket, sys, time
sys.stdin.readline()
path, claim, uid = sys.argv[1], sys.argv[2], int(sys.argv[3])
if uid >= 0:
    os.setgid(uid)
    os.setuid(uid)
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
try:
    s.connect(path)
except PermissionError:
    print("denied", flush=True)
    sys.exit(0)
s.sendall(b'{"v":1,"op":"release","job":7,"deadline_ns":1,"group":"%s"}\n' % claim.encode())
ready, _, _ = select.select([s], [], [], 3.0)
try:
    closed = bool(ready) and s.recv(4096) == b""
except ConnectionResetError:
    # Closed by the agent with the report unread.
    closed = True
print("closed" if closed else "open", flush=True)
"#;

/// Connects, forks a child that keeps the connection, prints its own pid and exits. The child
/// waits for a line on stdin (sent once the test has given the pid to a new process), sends a
/// release, and prints `closed` or `open` as above.
const PID_REUSE: &str = r#"
import os, select, socket, sys, time
sys.stdin.readline()
path = sys.argv[1]
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(path)
if os.fork() != 0:
    # Alive until the agent has taken the connection (two of its ticks): then it exits.
    time.sleep(float(sys.argv[2]))
    print(os.getpid(), flush=True)
    os._exit(0)
sys.stdin.readline()
try:
    s.sendall(b'{"v":1,"op":"release","job":9,"deadline_ns":1}\n')
except OSError:
    # The agent refused the connection when it accepted it (its process had exited).
    print("closed", flush=True)
    sys.exit(0)
ready, _, _ = select.select([s], [], [], 3.0)
try:
    closed = bool(ready) and s.recv(4096) == b""
except ConnectionResetError:
    # Closed by the agent with the report unread.
    closed = True
print("closed" if closed else "open", flush=True)
"#;

fn read_line(helper: &mut Helper) -> String {
    let mut line = String::new();
    std::io::BufRead::read_line(helper.stdout.as_mut().unwrap(), &mut line).unwrap();
    line.trim().to_owned()
}

#[test]
fn clients_reporting_for_a_group_they_are_not_in_are_refused_and_counted() {
    let case = "foreign_clients";
    let Some((_lock, machine)) = chaos_machine(case) else { return };
    let mut record = Record::new(case);
    let mut rig = Rig::running(&machine);
    let socket = rig.socket.to_string_lossy().into_owned();

    // A process of the throughput group claiming the soft real-time group.
    let mut other_group = Helper::python(CLAIMER, &[&socket, "srt", "-1"]);
    machine.backend.move_pid(&rig.nrt.group, other_group.pid()).unwrap();
    other_group.say("go");
    let other_group_outcome = read_line(&mut other_group);
    assert_eq!(other_group_outcome, "closed", "a claim for another group must be refused");

    // Another user (nobody), in the throughput group, claiming the soft real-time group.
    let mut other_user = Helper::python(CLAIMER, &[&socket, "srt", "65534"]);
    machine.backend.move_pid(&rig.nrt.group, other_user.pid()).unwrap();
    other_user.say("go");
    let other_user_outcome = read_line(&mut other_user);
    assert!(["denied", "closed"].contains(&other_user_outcome.as_str()), "another user's claim: {other_user_outcome}");

    // A client whose connecting process exited and whose pid is given to a new process in the
    // soft real-time group; the child still holding the connection then reports. What the
    // connection holds counts for the group its process was last seen in (throughput), never
    // for the group the reused pid is in, and the agent closes the connection after it.
    let hold_s = format!("{}", 2.0 * agent_interval_ns() as f64 / 1e9);
    let mut forked = Helper::python(PID_REUSE, &[&socket, &hold_s]);
    machine.backend.move_pid(&rig.nrt.group, forked.pid()).unwrap();
    forked.say("go");
    let dead_pid: u32 = read_line(&mut forked).parse().unwrap();
    forked.child.wait().unwrap();
    let mut impostor = None;
    for _ in 0..20 {
        std::fs::write("/proc/sys/kernel/ns_last_pid", (dead_pid - 1).to_string()).unwrap();
        let child = Command::new("sleep").arg("30").spawn().unwrap();
        if child.id() == dead_pid {
            impostor = Some(child);
            break;
        }
        let mut child = child;
        let _ = child.kill();
        let _ = child.wait();
    }
    let reused = impostor.is_some();
    if let Some(child) = &impostor {
        machine.backend.move_pid(&rig.srt.group, child.id()).unwrap();
    }
    forked.say("go");
    let reuse_outcome = read_line(&mut forked);
    if let Some(mut child) = impostor {
        let _ = child.kill();
        let _ = child.wait();
    }
    assert_eq!(reuse_outcome, "closed", "a dead process's connection must be closed (pid reused: {reused})");
    // The claim for another group is refused; so is nobody's, where the socket let it connect.
    let expected_refusals = 1 + u64::from(other_user_outcome == "closed");
    record.set("other_group", other_group_outcome);
    record.set("other_user", other_user_outcome);
    record.set("pid_reused", reused);
    record.set("pid_reuse", reuse_outcome);

    run_for(&mut rig, Duration::from_secs(1));
    let summary = rig.finish(&mut record);
    let refused = summary["job_socket"]["refused"].as_u64().unwrap();
    let srt = summary["groups"].as_array().unwrap().iter().find(|g| g["name"] == "srt").unwrap();
    let worker_released = record.values["worker_srt_released"].as_u64().unwrap();
    assert!(refused >= expected_refusals, "the refusals are counted: {summary}");
    assert_eq!(srt["released"].as_u64().unwrap(), worker_released, "no foreign report was counted for srt: {summary}");
    record.write(3);
}
