//! The job socket: who may report, controller drops reaching the worker, the C and Python clients.

use super::*;

const REPORT: &str = r#"
import socket, sys
sys.stdin.readline()
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(sys.argv[1])
s.sendall(sys.argv[2].encode() + b"\n")
print("sent", flush=True)
sys.stdin.read()
"#;

#[test]
fn only_a_process_inside_the_group_can_report_its_jobs() {
    let Some(machine) = machine("only_a_process_inside_the_group_can_report_its_jobs") else { return };
    let mut guard = GroupGuard::create(&machine);
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("run/critmem.sock");
    let mut server = bind_job_server(&machine, &socket, vec![ReportingGroup { name: "rt".into(), cgroup: guard.group.to_string() }]);
    let message = r#"{"v":1,"op":"release","job":3,"deadline_ns":1000,"group":"rt"}"#;
    let socket_arg = socket.to_string_lossy().into_owned();

    let inside = guard.adopt(Helper::python(REPORT, &[&socket_arg, message]));
    let inside_pid = inside.pid();
    inside.say("go");
    inside.expect("sent");
    let mut outside = Helper::python(REPORT, &[&socket_arg, message]);
    outside.say("go");
    outside.expect("sent");

    let mut jobs = Vec::new();
    wait_until("both connections to be handled", Duration::from_secs(5), || {
        jobs.extend(server.poll());
        let stats = server.stats();
        stats.accepted_messages + stats.refused >= 2
    });
    assert_eq!(jobs.len(), 1);
    assert_eq!((jobs[0].pid, jobs[0].job, jobs[0].op), (inside_pid, 3, JobOp::Release { deadline_ns: 1000 }));
    assert_eq!(server.stats().refused, 1, "the process outside the group is refused");
}

/// Drops every odd job of group 0 as soon as its release is seen, and records the drops the
/// workload reports back.
struct DropOddJobs {
    reported_drops: std::sync::Arc<Mutex<Vec<u64>>>,
}

impl critmem_policy::Controller for DropOddJobs {
    fn name(&self) -> &str {
        "drop-odd-jobs"
    }

    fn tick(&mut self, obs: &critmem_policy::Observation) -> Vec<critmem_policy::Action> {
        use critmem_policy::{Action, JobEvent};
        let mut actions = Vec::new();
        for event in &obs.events {
            match *event {
                JobEvent::Release { group, job, .. } if job % 2 == 1 => actions.push(Action::DropJob { group, job }),
                JobEvent::Drop { job, .. } => self.reported_drops.lock().unwrap().push(job),
                _ => {}
            }
        }
        actions
    }
}

#[test]
fn a_job_the_controller_drops_is_abandoned_by_the_soft_real_time_worker() {
    let Some(machine) = machine("a_job_the_controller_drops_is_abandoned_by_the_soft_real_time_worker") else { return };
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("run/jobs.sock");
    let (mut guard, path) = one_srt_group_with_job_socket(&machine, dir.path(), &socket);
    let platform = guard.get();
    // Jobs of 20 ms compute every 50 ms: a drop asked within a tick of the release lands
    // while the job still runs.
    let socket_arg = socket.to_string_lossy().into_owned();
    let srt = Worker::start(
        |pid| platform.add_process(0, pid).unwrap(),
        SRT_WORKER,
        &["--socket", &socket_arg, "--period-ms", "50", "--compute-us", "20000", "--wss-mib", "8"],
    );
    let reported = std::sync::Arc::new(Mutex::new(Vec::new()));
    let mut controller = DropOddJobs { reported_drops: reported.clone() };
    let mut control = ControlLoop::new(5_000_000, MonotonicClock::shared());
    let started = Instant::now();
    control.run(platform, &mut controller, || started.elapsed() >= Duration::from_secs(4), |_, _, _| {}).unwrap();
    let (counts, stats) = (platform.job_counts(0).clone(), platform.stats().clone());
    let (summary, code) = srt.stop();
    let report = guard.restore();
    let reported = reported.lock().unwrap().clone();
    let _ = writeln!(
        std::io::stderr(),
        "drops asked {}, reported back {reported:?}, agent counts {counts:?}, worker {summary}",
        stats.drops_requested
    );
    assert_eq!(code, Some(0));
    assert_eq!(summary["checksum_failures"], 0);
    let dropped = summary["dropped"].as_u64().unwrap();
    assert!(dropped >= 20, "the worker abandoned the dropped jobs: {summary}");
    assert!(summary["completed"].as_u64().unwrap() >= 20, "and completed the others: {summary}");
    assert!(stats.drops_requested >= 20);
    assert!(reported.len() as u64 >= dropped - 1, "the worker reported its drops back: {reported:?}");
    assert!(reported.iter().all(|job| job % 2 == 1), "only the jobs asked for were dropped: {reported:?}");
    assert_eq!(counts.dropped, reported.len() as u64);
    assert!(report.failures.is_empty() && !machine.backend.exists(&path), "{report:?}");
}

/// The Python client's script for [`the_c_and_python_job_clients_report_to_the_real_agent_socket`]:
/// the module file is loaded on its own (it needs only the standard library).
const PYTHON_CLIENT: &str = r#"
import importlib.util, sys, time
spec = importlib.util.spec_from_file_location("jobclient", sys.argv[1])
jc = importlib.util.module_from_spec(spec); spec.loader.exec_module(jc)
c = jc.JobClient(sys.argv[2])
now = time.monotonic_ns()
c.release(1, now + 20_000_000, at_ns=now)
c.complete(1)
c.release(2, now + 40_000_000)
for _ in range(500):
    if 2 in c.drop_requests():
        break
    time.sleep(0.01)
c.drop(2)
time.sleep(0.3)  # the agent checks the sender's cgroup as it reads each message
print(f"sent {c.sent} unsent {c.unsent}")
sys.exit(0 if c.unsent == 0 else 1)
"#;

const C_CLIENT: &str = r#"
#include "critmem_job.h"
#include <stdlib.h>
int main(int argc, char **argv) {
    struct critmem_job_client c;
    if (argc != 2 || critmem_job_init(&c, argv[1]) != 0) return 2;
    uint64_t now = critmem_job_now_ns();
    critmem_job_release_at(&c, 1, now + 20000000ULL, now);
    critmem_job_complete(&c, 1);
    critmem_job_release(&c, 2, now + 40000000ULL);
    for (int i = 0; i < 500 && !critmem_job_drop_requested(&c, 2); i++) {
        struct timespec pause = {0, 10000000L};
        nanosleep(&pause, NULL);
    }
    critmem_job_drop(&c, 2);
    critmem_job_flush(&c, 1000);
    /* The agent checks the sender's cgroup as it reads each message: stay until it has. */
    struct timespec linger = {0, 300000000L};
    nanosleep(&linger, NULL);
    printf("sent %llu unsent %llu\n", (unsigned long long)c.sent, (unsigned long long)c.unsent);
    critmem_job_close(&c);
    return c.unsent == 0 ? 0 : 1;
}
"#;

/// Runs one client program inside a managed group against a real job server: it reports
/// release 1, complete 1, release 2, receives the agent's drop request for job 2 and reports
/// the drop. Returns the server's view, in order.
fn exercise_client(machine: &Machine, program: &str, args: &[&str]) -> Vec<(JobOp, u64)> {
    let mut guard = GroupGuard::create(machine);
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("run/jobs.sock");
    let mut server = bind_job_server(machine, &socket, vec![ReportingGroup { name: "rt".into(), cgroup: guard.group.to_string() }]);
    let socket_arg = socket.to_string_lossy().into_owned();
    let mut argv: Vec<&str> = args.to_vec();
    argv.push(&socket_arg);
    let mut worker = Worker::start(|pid| machine.backend.move_pid(&guard.group, pid).unwrap(), program, &argv);
    let mut seen = Vec::new();
    let mut asked = false;
    let deadline = Instant::now() + Duration::from_secs(10);
    while seen.len() < 4 && Instant::now() < deadline {
        for report in server.poll() {
            seen.push((report.op, report.job));
        }
        if !asked && seen.iter().any(|&(op, job)| job == 2 && matches!(op, JobOp::Release { .. })) {
            asked = server.deliver_drop(0, 2) > 0;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let mut child = worker.child.take().unwrap();
    let status = child.wait().unwrap();
    let mut out = String::new();
    std::io::Read::read_to_string(child.stdout.as_mut().unwrap(), &mut out).unwrap();
    let _ = writeln!(std::io::stderr(), "{program}: {out:?}, server saw {seen:?}, stats {:?}", server.stats());
    assert!(status.success(), "{program} exited with {status}");
    assert_eq!(server.stats().malformed_messages, 0);
    guard.helpers.clear();
    seen
}

fn assert_client_conversation(seen: &[(JobOp, u64)]) {
    assert_eq!(seen.len(), 4, "{seen:?}");
    assert!(matches!(seen[0], (JobOp::Release { .. }, 1)), "{seen:?}");
    assert_eq!(seen[1], (JobOp::Complete, 1));
    assert!(matches!(seen[2], (JobOp::Release { .. }, 2)), "{seen:?}");
    assert_eq!(seen[3], (JobOp::Drop, 2), "the client received the agent's drop request and reported the drop");
}

#[test]
fn the_c_and_python_job_clients_report_to_the_real_agent_socket() {
    let test = "the_c_and_python_job_clients_report_to_the_real_agent_socket";
    let Some(machine) = machine(test) else { return };
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let dir = tempfile::tempdir().unwrap();

    let python = if Path::new("/usr/bin/python3").exists() { "/usr/bin/python3" } else { "python3" };
    let script = dir.path().join("client.py");
    std::fs::write(&script, PYTHON_CLIENT).unwrap();
    let module = repo.join("python/critmem/jobclient.py");
    let seen = exercise_client(&machine, python, &[&script.to_string_lossy(), &module.to_string_lossy()]);
    assert_client_conversation(&seen);

    let Some(exe) = compile_c(test, C_CLIENT, dir.path()) else { return };
    let seen = exercise_client(&machine, &exe.to_string_lossy(), &[]);
    assert_client_conversation(&seen);
}

/// Reports until the socket is full and some wait in the outbox, says so, then (after a line on
/// stdin) flushes them and says how it went.
const C_OUTBOX: &str = r#"
#include "critmem_job.h"
#include <stdlib.h>
int main(int argc, char **argv) {
    struct critmem_job_client c;
    if (argc != 2 || critmem_job_init(&c, argv[1]) != 0) return 2;
    uint64_t job = 0;
    while (critmem_job_pending(&c) == 0 && job < 1000000) critmem_job_complete(&c, job++);
    printf("jobs %llu sent %llu unsent %llu pending %llu\n", (unsigned long long)job, (unsigned long long)c.sent,
           (unsigned long long)c.unsent, (unsigned long long)critmem_job_pending(&c));
    fflush(stdout);
    char go[8];
    if (fgets(go, sizeof go, stdin) == NULL) return 2;
    int flushed = critmem_job_flush(&c, 5000);
    printf("flushed %d sent %llu unsent %llu\n", flushed, (unsigned long long)c.sent, (unsigned long long)c.unsent);
    critmem_job_close(&c);
    return 0;
}
"#;

/// The C client's outbox: reports the socket could not take yet reach the agent later, whole
/// and in order (the Rust and Python clients have the same tests of their own). Needs no root.
#[test]
fn the_c_client_holds_reports_the_socket_cannot_take_yet_and_sends_them_in_order() {
    let test = "the_c_client_holds_reports_the_socket_cannot_take_yet_and_sends_them_in_order";
    let dir = tempfile::tempdir().unwrap();
    let Some(exe) = compile_c(test, C_OUTBOX, dir.path()) else { return };
    let socket = dir.path().join("jobs.sock");
    let listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    let mut child = Command::new(&exe).arg(&socket).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().unwrap();
    let (mut peer, _) = listener.accept().unwrap();
    let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
    let numbers = |line: &str| -> Vec<u64> { line.split_whitespace().filter_map(|w| w.parse().ok()).collect() };
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    let [jobs, sent, unsent, pending] = numbers(&line)[..] else { panic!("the client said {line:?}") };
    assert!(pending > 0 && unsent == 0 && sent + pending == jobs, "{line}");
    // Read everything while the client flushes.
    let reader = std::thread::spawn(move || {
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(&mut peer, &mut bytes).unwrap();
        bytes
    });
    writeln!(child.stdin.as_mut().unwrap(), "go").unwrap();
    line.clear();
    out.read_line(&mut line).unwrap();
    assert!(child.wait().unwrap().success());
    let bytes = reader.join().unwrap();
    assert_eq!(numbers(&line), vec![0, jobs, 0], "flushed, all sent, none lost: {line}");
    let seen: Vec<u64> =
        bytes.split(|&b| b == b'\n').filter(|l| !l.is_empty()).map(|l| critmem_linux::protocol::parse_message(l).unwrap().job).collect();
    assert_eq!(seen, (0..jobs).collect::<Vec<_>>(), "every report arrived once, whole and in order");
}

/// `source` built against `include/critmem_job.h` with every warning an error, into `dir`;
/// `None` (the test skipped, saying why) without a C compiler.
fn compile_c(test: &str, source: &str, dir: &Path) -> Option<PathBuf> {
    if Command::new("cc").arg("--version").output().is_err() {
        skip(test, "no C compiler (cc) on this machine: the C header was not tested");
        return None;
    }
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let path = dir.join("client.c");
    std::fs::write(&path, source).unwrap();
    let exe = dir.join("client");
    let compile = Command::new("cc")
        .args(["-std=c11", "-Wall", "-Wextra", "-Werror", "-pedantic", "-I"])
        .arg(repo.join("include"))
        .arg(&path)
        .arg("-o")
        .arg(&exe)
        .output()
        .unwrap();
    assert!(compile.status.success(), "include/critmem_job.h does not compile cleanly: {}", String::from_utf8_lossy(&compile.stderr));
    Some(exe)
}

/// One created soft real-time group "srt" over 256 MiB, with a job server on `socket`; and
/// the group's path.
fn one_srt_group_with_job_socket(machine: &Machine, dir: &Path, socket: &Path) -> (PlatformGuard, GroupPath) {
    let path = GroupPath::new(&unique_name()).unwrap();
    let specs = vec![GroupSpec { name: "srt".into(), path: path.clone(), role: srt_role(), floor_bytes: 16 * MIB, create: true }];
    (platform_with_job_socket(machine, dir, socket, specs, 256 * MIB), path)
}

/// Sends `$2` release reports (jobs 1..=N) on one connection, then waits.
const MANY_REPORTS: &str = r#"
import socket, sys
sys.stdin.readline()
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(sys.argv[1])
lines = "".join('{"v":1,"op":"release","job":%d,"deadline_ns":1000000}\n' % j for j in range(1, int(sys.argv[2]) + 1))
s.sendall(lines.encode())
print("sent", flush=True)
sys.stdin.read()
"#;

#[test]
fn reports_sent_before_the_end_of_a_run_are_counted_though_no_tick_read_them() {
    let Some(machine) = machine("reports_sent_before_the_end_of_a_run_are_counted_though_no_tick_read_them") else { return };
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("run/jobs.sock");
    let (mut guard, _) = one_srt_group_with_job_socket(&machine, dir.path(), &socket);
    let mut client = Helper::python(MANY_REPORTS, &[&socket.to_string_lossy(), "500"]);
    guard.get().add_process(0, client.pid()).unwrap();
    client.say("go");
    client.expect("sent");
    assert_eq!(guard.get().job_counts(0).released, 0, "nothing read before the drain");
    guard.get().drain_job_reports(Duration::from_secs(5));
    let released = guard.get().job_counts(0).released;
    drop(client);
    guard.restore();
    assert_eq!(released, 500);
}
