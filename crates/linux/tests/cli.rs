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

#[test]
fn missing_arguments_are_named_on_the_one_line() {
    let cases: [(&str, &[&str], &str); 4] = [
        ("critmem-linux-run", &[], "critmem-linux-run: the following required arguments were not provided: --duration-s <DURATION_S>, <FILE> (see 'critmem-linux-run --help')"),
        ("critmem-agent", &[], "critmem-agent: the following required arguments were not provided: --config <CONFIG> (see 'critmem-agent --help')"),
        ("critmem-swap", &[], "critmem-swap: a command is required: setup, teardown, status (see 'critmem-swap --help')"),
        ("critmem-swap", &["setup", "--size-bytes", "4G"], "critmem-swap: invalid value '4G' for '--size-bytes <SIZE_BYTES>': invalid digit found in string (see 'critmem-swap setup --help')"),
    ];
    for (name, argv, want) in cases {
        let exe = TOOLS.iter().find(|(n, _)| *n == name).unwrap().1;
        let out = Command::new(exe).args(argv).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{name} {argv:?}");
        assert_eq!(String::from_utf8_lossy(&out.stderr).trim_end(), want, "{name} {argv:?}");
    }
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
