//! Every shipped Linux tool answers a bad command line with one line on stderr, naming itself
//! and what is wrong, and exit code 2; `--help` still prints the full help.

use std::process::Command;

const TOOLS: [(&str, &str); 6] = [
    ("critmem-agent", env!("CARGO_BIN_EXE_critmem-agent")),
    ("critmem-linux-run", env!("CARGO_BIN_EXE_critmem-linux-run")),
    ("critmem-loop-bench", env!("CARGO_BIN_EXE_critmem-loop-bench")),
    ("critmem-nrt-worker", env!("CARGO_BIN_EXE_critmem-nrt-worker")),
    ("critmem-srt-worker", env!("CARGO_BIN_EXE_critmem-srt-worker")),
    ("critmem-swap", env!("CARGO_BIN_EXE_critmem-swap")),
];

#[test]
fn a_bad_command_line_is_one_line_and_exit_2() {
    for (name, exe) in TOOLS {
        for argv in [&["--no-such-flag"][..], &["--no-such-flag", "--help"][..]] {
            let out = Command::new(exe).args(argv).output().unwrap();
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{name} {argv:?}: {stderr}");
            assert_eq!(stderr.lines().count(), 1, "{name} {argv:?}: {stderr}");
            assert!(
                stderr.starts_with(&format!("{name}: unexpected argument '--no-such-flag' found"))
                    && stderr.trim_end().ends_with(&format!("(see '{name} --help')")),
                "{name} {argv:?}: {stderr}"
            );
            assert!(out.stdout.is_empty(), "{name} {argv:?} wrote to stdout");
        }
    }
}

/// Each `(tool, argv, line)` exits 2 with exactly `line` on stderr.
fn assert_exact_errors(cases: &[(&str, &[&str], &str)]) {
    for &(name, argv, want) in cases {
        let exe = TOOLS.iter().find(|(n, _)| *n == name).unwrap().1;
        let out = Command::new(exe).args(argv).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{name} {argv:?}");
        assert_eq!(String::from_utf8_lossy(&out.stderr).trim_end(), want, "{name} {argv:?}");
    }
}

#[test]
fn missing_arguments_are_named_on_the_one_line() {
    let cases: [(&str, &[&str], &str); 5] = [
        ("critmem-linux-run", &[], "critmem-linux-run: the following required arguments were not provided: --duration-s <DURATION_S>, <FILE> (see 'critmem-linux-run --help')"),
        ("critmem-agent", &[], "critmem-agent: the following required arguments were not provided: --config <CONFIG> (see 'critmem-agent --help')"),
        ("critmem-swap", &[], "critmem-swap: a command is required: setup, teardown, status (see 'critmem-swap --help')"),
        ("critmem-agent", &["--config", "a.toml", "--realtime-priority", "100"], "critmem-agent: invalid value '100' for '--realtime-priority <PRIORITY>': 100 is not in 1..=99 (see 'critmem-agent --help')"),
        ("critmem-swap", &["setup", "--size-bytes", "4G"], "critmem-swap: invalid value '4G' for '--size-bytes <SIZE_BYTES>': invalid digit found in string (see 'critmem-swap setup --help')"),
    ];
    assert_exact_errors(&cases);
}

#[test]
fn help_is_not_an_error() {
    for (name, exe) in TOOLS {
        let out = Command::new(exe).arg("--help").output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{name}");
        let help = String::from_utf8_lossy(&out.stdout);
        assert!(help.contains("Usage:") && help.lines().count() > 3, "{name}: {help}");
    }
}

#[test]
fn a_closed_stderr_still_ends_in_exit_2() {
    for (name, exe) in TOOLS {
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let status = Command::new(exe).arg("--no-such-flag").stderr(writer).status().unwrap();
        assert_eq!(status.code(), Some(2), "{name}");
    }
}

/// Found by the audit: the soft real-time worker read its stop signal only between jobs, so a
/// job of seconds outlived the runner's 5 s grace, was SIGKILLed, and its summary was lost.
#[test]
fn the_srt_worker_stops_within_a_job_on_sigterm_and_prints_its_summary() {
    let exe = env!("CARGO_BIN_EXE_critmem-srt-worker");
    let mut child = Command::new(exe)
        .args(["--wss-mib", "1", "--compute-us", "60000000", "--period-ms", "100000"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Signal only once the worker has blocked SIGTERM for its signalfd (bit 15 of SigBlk):
    // before that the default action would kill it.
    let blocks_sigterm = || {
        let status = std::fs::read_to_string(format!("/proc/{}/status", child.id())).unwrap_or_default();
        let mask = status.lines().find_map(|l| l.strip_prefix("SigBlk:")).and_then(|m| u64::from_str_radix(m.trim(), 16).ok());
        mask.is_some_and(|m| m & (1 << (nix::libc::SIGTERM - 1)) != 0)
    };
    let waiting_since = std::time::Instant::now();
    while !blocks_sigterm() {
        if waiting_since.elapsed() > std::time::Duration::from_secs(30) {
            child.kill().unwrap();
            panic!("the worker never blocked SIGTERM for its signalfd");
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    std::thread::sleep(std::time::Duration::from_millis(100)); // into its first job
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
    // A worker that stopped only between jobs would finish the 60 s job first and count it.
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let summary: critmem_linux::workload::SrtWorkerSummary = serde_json::from_slice(&out.stdout).unwrap();
    // Released, abandoned unfinished: neither completed nor dropped, its deadline reported.
    assert_eq!((summary.released, summary.completed, summary.dropped), (1, 0, 0), "{summary:?}");
    assert!(summary.unfinished_deadline_ns.is_some(), "{summary:?}");
}

/// Found by the audit: sizes beyond the machine aborted with the allocator's message and a
/// backtrace, and sizes or times beyond 64 bits wrapped around silently.
#[test]
fn worker_sizes_and_times_beyond_the_machine_are_one_line_errors() {
    let cases: [(&str, &[&str], &str); 5] = [
        ("critmem-nrt-worker", &["--wss-mib", "1000000000", "--duration-s", "0.1"], "--wss-mib 1000000000: cannot allocate"),
        ("critmem-nrt-worker", &["--wss-mib", "17592186044416", "--duration-s", "0.1"], "--wss-mib 17592186044416: too large"),
        ("critmem-srt-worker", &["--wss-mib", "1", "--cold-mib", "1000000000", "--duration-s", "0.1"], "cannot allocate"),
        (
            "critmem-srt-worker",
            &["--period-ms", "18446744073709551615", "--duration-s", "0.1"],
            "--period-ms 18446744073709551615 is too large",
        ),
        ("critmem-srt-worker", &["--phase", "0:17592186044416:1", "--duration-s", "0.1"], "WSS_MIB 17592186044416 is too large"),
    ];
    for (name, argv, want) in cases {
        let exe = TOOLS.iter().find(|(n, _)| *n == name).unwrap().1;
        let out = Command::new(exe).args(argv).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{name} {argv:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{name} {argv:?}: {stderr}");
        assert!(stderr.contains(want), "{name} {argv:?}: {stderr}");
    }
}

/// Found by the audit: `--controller-config '[]'` ran with the defaults (serde reads an array
/// as a struct's fields in order), where the option asks for a JSON object.
#[test]
fn a_controller_config_that_is_not_an_object_is_refused() {
    let scenario = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/linux-sara.toml");
    for (config, kind) in [("[]", "an array"), ("[1048576]", "an array"), ("null", "null"), ("\"x\"", "a string")] {
        let out = Command::new(env!("CARGO_BIN_EXE_critmem-linux-run"))
            .args(["--duration-s", "1", "--controller-config", config, scenario])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{config}: {stderr}");
        assert_eq!(stderr.trim_end(), format!("critmem-linux-run: --controller-config: not a JSON object (got {kind})"), "{config}");
    }
    for config in ["{oops", r#"{"step_bytes": 1e400}"#] {
        let out = Command::new(env!("CARGO_BIN_EXE_critmem-linux-run"))
            .args(["--duration-s", "1", "--controller-config", config, scenario])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{config}: {stderr}");
        assert!(stderr.starts_with("critmem-linux-run: --controller-config: not valid JSON: "), "{config}: {stderr}");
    }
}

/// Found by the audit: an unknown `--controller` was noticed only after the bench had created
/// its groups, and it exited without removing them or their journal.
#[test]
fn a_loop_bench_with_an_unknown_controller_creates_nothing() {
    let child = Command::new(env!("CARGO_BIN_EXE_critmem-loop-bench"))
        .args(["--controller", "nope", "--seconds", "1"])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.starts_with("critmem-loop-bench: unknown controller `nope`") && stderr.lines().count() == 1, "{stderr}");
    for root in ["/sys/fs/cgroup/memory", "/sys/fs/cgroup/unified", "/sys/fs/cgroup"] {
        for i in 0..4 {
            let group = std::path::Path::new(root).join(format!("critmem-bench-{pid}-{i}"));
            assert!(!group.exists(), "{} was left behind", group.display());
        }
    }
}

/// Found by the audit: `--state-file /dev/zero` read until the kernel killed the tool at
/// 23 GB. Every file a user names is read up to 16 MiB.
#[test]
fn endless_input_files_are_refused_at_16_mib() {
    let cases: [(&str, &[&str], &str); 3] = [
        ("critmem-swap", &["--state-file", "/dev/zero", "status"], "critmem-swap: read /dev/zero: larger than 16 MiB"),
        ("critmem-agent", &["--config", "/dev/zero", "--dry-run"], "critmem-agent: read configuration /dev/zero: larger than 16 MiB"),
        ("critmem-linux-run", &["--duration-s", "1", "/dev/zero"], "critmem-linux-run: /dev/zero: larger than 16 MiB"),
    ];
    assert_exact_errors(&cases);
}

/// The agent reads the older group spelling, warning once per deprecated key or role name
/// (before anything else can fail), and the scenario spelling without a warning.
#[test]
fn the_agent_warns_once_per_deprecated_spelling_and_reads_the_scenario_one_silently() {
    let dir = tempfile::tempdir().unwrap();
    let head = format!(
        "controller = \"greedy\"\ntotal_memory_bytes = 1073741824\nsocket = \"{}\"\njournal = \"{}\"\n",
        dir.path().join("run/jobs.sock").display(),
        dir.path().join("journal.jsonl").display()
    );
    // Groups that do not exist and may not be created: the run stops with one error line.
    let old = "[[group]]\nname = \"a\"\ncgroup = \"critmem-cli-test-missing/a\"\nrole = \"soft-real-time\"\nfloor_bytes = 4096\ndeadline_ns = 20000000\nbcet_ns = 1000000\n\
               [[group]]\nname = \"b\"\ncgroup = \"critmem-cli-test-missing/b\"\nrole = \"non-real-time\"\nfloor_bytes = 4096\n";
    let new = "[[group]]\nname = \"a\"\ncgroup = \"critmem-cli-test-missing/a\"\nrole = \"soft-rt\"\nfloor_mb = 0.004\ndeadline_ms = 20\nbcet_ms = 1\n\
               [[group]]\nname = \"b\"\ncgroup = \"critmem-cli-test-missing/b\"\nrole = \"non-rt\"\nfloor_mb = 0.004\n";
    let run = |groups: &str| {
        let config = dir.path().join("agent.toml");
        std::fs::write(&config, format!("{head}{groups}")).unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_critmem-agent")).arg("--config").arg(&config).arg("--dry-run").output().unwrap();
        assert_eq!(out.status.code(), Some(2));
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        (stderr.lines().filter(|l| l.starts_with("critmem-agent: warning: ")).map(str::to_owned).collect::<Vec<_>>(), stderr)
    };
    let (warnings, stderr) = run(old);
    let path = dir.path().join("agent.toml");
    let want: Vec<String> = [
        "group key bcet_ns is deprecated; write bcet_ms (milliseconds) instead",
        "group key deadline_ns is deprecated; write deadline_ms (milliseconds) instead",
        "group key floor_bytes is deprecated; write floor_mb (MiB) instead",
        "role = \"non-real-time\" is deprecated; write role = \"non-rt\" instead",
        "role = \"soft-real-time\" is deprecated; write role = \"soft-rt\" instead",
    ]
    .iter()
    .map(|w| format!("critmem-agent: warning: {}: {w}", path.display()))
    .collect();
    assert_eq!(warnings, want, "{stderr}");
    assert_eq!(stderr.lines().count(), want.len() + 1, "the warnings, then one error line: {stderr}");
    let (warnings, stderr) = run(new);
    assert!(warnings.is_empty() && stderr.lines().count() == 1, "{stderr}");
}
