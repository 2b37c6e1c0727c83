//! critmem on real Linux: the pieces the Linux platform and agent are built from.
//!
//! - [`layout`]: which cgroup layout the machine has (pure v2, or v1 memory + v2 PSI), from
//!   the text of `/proc/self/mounts` and `/proc/cgroups`.
//! - [`cgroup`]: the [`cgroup::CgroupBackend`] trait and its two implementations; roots are
//!   injectable so tests run on fake trees.
//! - [`psi`]: pressure files, deltas of `total`, triggers to wake early.
//! - [`writer`]: cgroup writes that may block in reclaim, off the control thread.
//! - [`journal`]: original values on disk before every change; restore on exit or after a
//!   crash.
//! - [`swap`]: critmem's own swapfile, and nothing else's.
//! - [`procfs`]: which cgroup a process is in.
//! - [`protocol`]: the job socket soft real-time processes report to; [`client`]: its Rust
//!   client (Python: `critmem.jobclient`, C: `include/critmem_job.h`).
//! - [`platform`]: [`LinuxPlatform`] (the controllers' [`critmem_policy::Platform`]); [`control_loop`]: the
//!   [`ControlLoop`] that ticks a controller on it.
//! - [`clock`]: the [`clock::Clock`] the loop and the platform run on (CLOCK_MONOTONIC, or a
//!   fake one in tests).
//! - [`metrics`]: Prometheus text-format metrics.
//! - [`session`]: the setup and end every tool that ticks a controller shares.
//! - [`run_summary`]: the typed summary of `critmem-linux-run`, in the simulator's terms.
//! - [`agent`]: the agent daemon's configuration and run.
//! - [`workload`]: pieces of the shipped soft real-time and throughput workers.
//!
//! Every fallible function returns [`Error`], whose messages say what to do.

pub mod agent;
pub mod agent_config;
pub mod cgroup;
pub mod client;
pub mod clock;
pub mod control_loop;
mod durable;
pub mod error;
pub mod external;
pub mod hires;
pub mod hires_bench;
pub mod journal;
pub mod launch;
pub mod layout;
pub mod metrics;
pub mod platform;
pub mod procfs;
pub mod protocol;
pub mod psi;
pub mod run_summary;
pub mod session;
pub mod swap;
pub mod workload;
pub mod writer;

pub use cgroup::{
    knob_change, open_backend, Capabilities, CgroupBackend, Change, FileWrite, GroupPath, HybridBackend, Knob, LimitBelowUsage, MemoryStat,
    PsiResource, V2Backend,
};
pub use error::{Error, Result};
pub use journal::{Journal, RestoreReport};
pub use layout::{detect_layout, detect_layout_in, Layout};
pub use platform::{ControlLoop, GroupSpec, LinuxPlatform, PlatformOptions};
pub use writer::KnobWriter;

/// The `/proc` the tools read unless told otherwise (every reader takes its root as an argument).
pub const PROC_ROOT: &str = "/proc";

/// Longest run the command-line tools accept (about 31 years), so any duration they take
/// fits every clock they add it to.
pub const MAX_RUN_SECONDS: f64 = 1e9;

/// `text` on one line: an error may quote user text (a name holding a newline) or a parser's
/// multi-line report, and the tools print one line per error.
pub fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Largest configuration, scenario or state file critmem reads (a user can name `/dev/zero`).
pub const MAX_INPUT_FILE_BYTES: u64 = 16 << 20;

/// Reads a file a user named as UTF-8 text, refusing one larger than
/// [`MAX_INPUT_FILE_BYTES`] instead of reading it all into memory.
pub fn read_input_file(path: &std::path::Path) -> std::io::Result<String> {
    use std::io::Read;
    let mut bytes = Vec::new();
    std::fs::File::open(path)?.take(MAX_INPUT_FILE_BYTES + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > MAX_INPUT_FILE_BYTES {
        return Err(std::io::Error::new(std::io::ErrorKind::InvalidData, format!("larger than {} MiB", MAX_INPUT_FILE_BYTES >> 20)));
    }
    String::from_utf8(bytes).map_err(|e| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("not UTF-8 text (invalid byte at offset {})", e.utf8_error().valid_up_to()),
        )
    })
}

/// A command-line duration in seconds: finite, above zero and at most [`MAX_RUN_SECONDS`].
pub fn parse_seconds(text: &str) -> std::result::Result<std::time::Duration, String> {
    let s: f64 = text.trim().parse().map_err(|_| format!("not a number of seconds: {text:?}"))?;
    if s.is_nan() || s <= 0.0 {
        return Err(format!("must be above 0 seconds (got {text})"));
    }
    if s > MAX_RUN_SECONDS {
        return Err(format!("must be at most {MAX_RUN_SECONDS:e} seconds (got {text})"));
    }
    match std::time::Duration::try_from_secs_f64(s) {
        Ok(d) if d.is_zero() => Err(format!("must be above 0 seconds (got {text}, which rounds to 0 ns)")),
        Ok(d) => Ok(d),
        Err(e) => Err(format!("{e} (got {text})")),
    }
}

/// Parses a critmem tool's command line. A usage error is one line on stderr,
/// `NAME: what is wrong (see 'NAME --help')`, with exit code 2 like the tools' other errors;
/// `--help` prints as usual.
pub fn parse_args<T: clap::Parser>() -> T {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    T::try_parse_from(&args).unwrap_or_else(|e| match usage_error_line::<T>(&e, &args) {
        Some(line) => {
            use std::io::Write;
            // Nothing to do if stderr is gone; exit 2 all the same.
            let _ = writeln!(std::io::stderr().lock(), "{line}");
            std::process::exit(2)
        }
        None => e.exit(),
    })
}

/// The one-line form of a clap error for the tool `T`, or None for help and version output.
/// clap's tips ("a similar argument exists") are kept, after a semicolon; the help it points
/// to is that of the subcommand `args` (the whole command line) name, if any.
pub fn usage_error_line<T: clap::CommandFactory>(e: &clap::Error, args: &[std::ffi::OsString]) -> Option<String> {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    let cmd = T::command();
    let name = cmd.get_name();
    let help_for = match args.iter().skip(1).find_map(|a| cmd.find_subcommand(a)) {
        Some(sub) if sub.get_name() != "help" => format!("{name} {}", sub.get_name()),
        _ => name.to_string(),
    };
    // What the user typed, when it holds a control character clap would print raw (a newline
    // would split the line); such input is shown escaped instead.
    let raw_input = e
        .context()
        .flat_map(|(_, v)| match v {
            ContextValue::String(s) => std::slice::from_ref(s),
            ContextValue::Strings(v) => v.as_slice(),
            _ => &[],
        })
        .find(|s| s.chars().any(char::is_control));
    let what = match (e.kind(), raw_input) {
        (ErrorKind::DisplayHelp | ErrorKind::DisplayVersion, _) => return None,
        // clap shows the whole help when a required subcommand or argument is missing.
        (ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand | ErrorKind::MissingSubcommand, _) => {
            let subcommands: Vec<&str> = cmd.get_subcommands().map(|c| c.get_name()).filter(|n| *n != "help").collect();
            if subcommands.is_empty() {
                let required: Vec<String> = cmd
                    .get_arguments()
                    .filter(|a| a.is_required_set())
                    .map(|a| a.get_long().map_or_else(|| format!("<{}>", a.get_id().as_str().to_uppercase()), |l| format!("--{l}")))
                    .collect();
                format!("the following required arguments were not provided: {}", required.join(", "))
            } else {
                format!("a command is required: {}", subcommands.join(", "))
            }
        }
        (kind, Some(input)) => {
            let reason = std::error::Error::source(e).map(|r| format!(": {}", r.to_string().escape_debug())).unwrap_or_default();
            match (kind, e.get(ContextKind::InvalidArg)) {
                (ErrorKind::InvalidValue | ErrorKind::ValueValidation, Some(ContextValue::String(arg))) => {
                    format!("invalid value {input:?} for '{arg}'{reason}")
                }
                (ErrorKind::UnknownArgument, _) => format!("unexpected argument {input:?} found"),
                _ => format!("{} (input {input:?}){reason}", kind.as_str().unwrap_or("bad command line")),
            }
        }
        (_, None) => {
            // clap's text: the message, the items it lists (one per indented line), a blank
            // line, then tips and usage.
            let text = e.render().to_string();
            let mut lines = text.lines();
            let first = lines.next().unwrap_or_default();
            let mut what = first.strip_prefix("error: ").unwrap_or(first).trim().to_string();
            let items: Vec<&str> = lines.by_ref().take_while(|l| !l.trim().is_empty()).map(str::trim).collect();
            if !items.is_empty() {
                what.push(' ');
                what.push_str(&items.join(", "));
            }
            for tip in lines.filter_map(|l| l.trim().strip_prefix("tip: ")) {
                what.push_str("; ");
                what.push_str(tip);
            }
            what
        }
    };
    Some(format!("{name}: {what} (see '{help_for} --help')"))
}

#[cfg(test)]
mod tests {
    #[test]
    fn input_files_are_read_up_to_a_bound() {
        let dir = tempfile::tempdir().unwrap();
        let small = dir.path().join("small.toml");
        std::fs::write(&small, "a = 1\n").unwrap();
        assert_eq!(super::read_input_file(&small).unwrap(), "a = 1\n");
        let e = super::read_input_file(std::path::Path::new("/dev/zero")).unwrap_err();
        assert_eq!(e.to_string(), "larger than 16 MiB");
        let big = dir.path().join("big.toml");
        std::fs::File::create(&big).unwrap().set_len(super::MAX_INPUT_FILE_BYTES + 1).unwrap();
        assert!(super::read_input_file(&big).is_err());
        std::fs::write(&small, b"\xff").unwrap();
        assert_eq!(super::read_input_file(&small).unwrap_err().kind(), std::io::ErrorKind::InvalidData);
    }

    use super::{parse_seconds, MAX_RUN_SECONDS};
    use proptest::prelude::*;
    use std::time::Duration;

    proptest! {
        /// Whatever is accepted is a positive duration of at most MAX_RUN_SECONDS.
        #[test]
        fn seconds_never_panic_and_stay_in_range(
            bytes in proptest::collection::vec(any::<u8>(), 0..40),
            text in r"[ \t]?(\+|-)?([0-9]{0,25}(\.[0-9]{0,25})?([eE](\+|-)?[0-9]{0,4})?|inf|infinity|nan|NaN)[ \t\n]?",
            float in any::<f64>(),
        ) {
            for text in [String::from_utf8_lossy(&bytes).into_owned(), text, float.to_string(), format!("{float:e}")] {
                if let Ok(d) = parse_seconds(&text) {
                    prop_assert!(!d.is_zero() && d <= Duration::from_secs_f64(MAX_RUN_SECONDS), "{:?} -> {:?}", text, d);
                }
            }
        }

        #[test]
        fn whole_seconds_parse_back(secs in 1..=MAX_RUN_SECONDS as u64) {
            prop_assert_eq!(parse_seconds(&secs.to_string()), Ok(Duration::from_secs(secs)));
            prop_assert_eq!(parse_seconds(&format!(" {secs}.0\n")), Ok(Duration::from_secs(secs)));
        }

        /// Decimal fractions land within a nanosecond-scale rounding of their value.
        #[test]
        fn fractional_seconds_parse_back(s in 1e-9..=MAX_RUN_SECONDS) {
            let d = parse_seconds(&s.to_string()).unwrap();
            prop_assert!((d.as_secs_f64() - s).abs() <= 1e-9 + s * f64::EPSILON, "{} -> {:?}", s, d);
        }
    }

    #[test]
    fn seconds_must_be_finite_positive_and_bounded() {
        assert_eq!(parse_seconds("1.5"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_seconds("1e9"), Ok(Duration::from_secs(1_000_000_000)));
        for bad in ["0", "-1", "nan", "NaN", "inf", "-inf", "1e300", "1e10", "1e-12", "", "soon"] {
            assert!(parse_seconds(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[derive(clap::Parser, Debug)]
    #[command(name = "tool", version)]
    struct Tool {
        #[arg(long)]
        state_file: Option<String>,
        #[command(subcommand)]
        command: Sub,
    }

    #[derive(clap::Subcommand, Debug)]
    enum Sub {
        Setup {
            #[arg(long)]
            size_bytes: u64,
        },
        Teardown,
    }

    fn line(argv: &[&str]) -> Option<String> {
        let e = <Tool as clap::Parser>::try_parse_from(argv).expect_err("argv is bad");
        let args: Vec<std::ffi::OsString> = argv.iter().map(Into::into).collect();
        super::usage_error_line::<Tool>(&e, &args)
    }

    #[test]
    fn usage_errors_are_one_line_naming_the_tool_and_what_is_wrong() {
        let cases: [(&[&str], &str); 8] = [
            (
                &["tool", "setup", "--size-bytes", "x"],
                "tool: invalid value 'x' for '--size-bytes <SIZE_BYTES>': invalid digit found in string (see 'tool setup --help')",
            ),
            (
                &["tool", "setup"],
                "tool: the following required arguments were not provided: --size-bytes <SIZE_BYTES> (see 'tool setup --help')",
            ),
            (&["tool"], "tool: a command is required: setup, teardown (see 'tool --help')"),
            (&["tool", "--state-file", "x"], "tool: a command is required: setup, teardown (see 'tool --help')"),
            (
                &["tool", "setup", "--size-byte", "1"],
                "tool: unexpected argument '--size-byte' found; a similar argument exists: '--size-bytes' (see 'tool setup --help')",
            ),
            (&["tool", "--bogus"], "tool: unexpected argument '--bogus' found (see 'tool --help')"),
            // A newline in the input must not split the line or hide the reason.
            (
                &["tool", "setup", "--size-bytes", "1\n\nx"],
                "tool: invalid value \"1\\n\\nx\" for '--size-bytes <SIZE_BYTES>': invalid digit found in string (see 'tool setup --help')",
            ),
            (&["tool", "--bo\ngus"], "tool: unexpected argument \"--bo\\ngus\" found (see 'tool --help')"),
        ];
        for (argv, want) in cases {
            assert_eq!(line(argv).as_deref(), Some(want), "{argv:?}");
        }
        // Help and version are not errors.
        assert_eq!(line(&["tool", "--help"]), None);
        assert_eq!(line(&["tool", "--version"]), None);
    }
}
