//! Pressure stall information: parsing pressure files, deltas of `total`, and triggers.
//!
//! The averages are recomputed by the kernel only about every 2 s, so a millisecond control
//! loop uses deltas of `total` (microseconds of stall, fresh on every read). Triggers are too
//! coarse to control with (at best one event per 50 ms slot of a ≥500 ms window); they only
//! wake a sleeping loop early.

use crate::error::{Error, Result};
use critmem_policy::StallTotals;
use nix::poll::{PollFd, PollFlags};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// One line of a pressure file.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PsiLine {
    /// Share of wall time stalled, percent, averaged over 10/60/300 s.
    pub avg10: f64,
    pub avg60: f64,
    pub avg300: f64,
    /// Cumulative stall time, microseconds.
    pub total_us: u64,
}

/// A whole pressure file.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Pressure {
    pub some: PsiLine,
    /// Absent in `cpu.pressure` before Linux 5.13.
    pub full: Option<PsiLine>,
}

/// Parses a pressure file (`/proc/pressure/*`, or a cgroup's `memory.pressure`,
/// `io.pressure`, `cpu.pressure`); format from `kernel/sched/psi.c`:
///
/// ```text
/// some avg10=0.00 avg60=0.00 avg300=0.00 total=123
/// full avg10=0.00 avg60=0.00 avg300=0.00 total=0
/// ```
///
/// Exactly the kernel's lines are accepted: `some` or `full`, then the four fields in that
/// order, single-spaced, the averages as `%lu.%02lu` and `total` as a u64. The `some` line is
/// required; the `full` line may be missing (older kernels' cpu.pressure). Empty lines and a
/// `\r` ending a line are tolerated; anything else (other line kinds, missing, extra or
/// reordered fields, other spacing, non-numbers, duplicate lines) is an error, so a kernel
/// that ever changed the format would be reported rather than misread.
pub fn parse_pressure(text: &str, origin: &str) -> Result<Pressure> {
    let (some, full) = split_file(text.as_bytes()).map_err(|m| match m.line {
        Some(line) => Error::parse("PSI", origin, format!("{} in {:?}", m.reason, String::from_utf8_lossy(line))),
        None => Error::parse("PSI", origin, m.reason),
    })?;
    let psi_line = |line: KernelLine| -> Result<PsiLine> {
        // split_line checked the `%lu.%02lu` shape, so this parse cannot fail in practice.
        let avg = |bytes: &[u8]| {
            std::str::from_utf8(bytes)
                .ok()
                .and_then(|s| s.parse::<f64>().ok())
                .ok_or_else(|| Error::parse("PSI", origin, "average is not a number"))
        };
        Ok(PsiLine { avg10: avg(line.avgs[0])?, avg60: avg(line.avgs[1])?, avg300: avg(line.avgs[2])?, total_us: line.total_us })
    };
    Ok(Pressure { some: psi_line(some)?, full: full.map(psi_line).transpose()? })
}

/// The `total=` of the `some` and `full` lines of a pressure file, straight from its bytes:
/// the control loop's fast path, which needs nothing else (no averages, no UTF-8 check, no
/// allocation). `None` exactly when [`parse_pressure`] refuses the file (it shares the
/// grammar), which then says what is wrong. A missing `full` line reads as 0.
pub fn parse_totals(bytes: &[u8]) -> Option<(u64, u64)> {
    let (some, full) = split_file(bytes).ok()?;
    Some((some.total_us, full.map_or(0, |l| l.total_us)))
}

/// One line of a pressure file split into its fields, without allocating.
struct KernelLine<'a> {
    full: bool,
    /// avg10, avg60 and avg300 as printed (`%lu.%02lu`), checked but not converted: only the
    /// full parser needs them.
    avgs: [&'a [u8]; 3],
    total_us: u64,
}

/// Why bytes are not a pressure file: the offending line (if one is to blame) and the reason.
struct Malformed<'a> {
    line: Option<&'a [u8]>,
    reason: &'static str,
}

/// The grammar both parsers share, so they accept exactly the same files.
fn split_file(bytes: &[u8]) -> std::result::Result<(KernelLine<'_>, Option<KernelLine<'_>>), Malformed<'_>> {
    let (mut some, mut full) = (None, None);
    for line in bytes.split(|&b| b == b'\n') {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.is_empty() {
            continue;
        }
        let parsed = split_line(line).map_err(|reason| Malformed { line: Some(line), reason })?;
        let (slot, duplicate) = if parsed.full { (&mut full, "duplicate `full` line") } else { (&mut some, "duplicate `some` line") };
        if slot.is_some() {
            return Err(Malformed { line: Some(line), reason: duplicate });
        }
        *slot = Some(parsed);
    }
    let some = some.ok_or(Malformed { line: None, reason: "no `some` line" })?;
    Ok((some, full))
}

const FIELDS_EXPECTED: &str = "expected `some` or `full` then `avg10=.. avg60=.. avg300=.. total=..`, single-spaced, in that order";

/// `some|full avg10=A avg60=B avg300=C total=T`, as `psi_show` prints it.
fn split_line(line: &[u8]) -> std::result::Result<KernelLine<'_>, &'static str> {
    let mut words = line.split(|&b| b == b' ');
    let full = match words.next() {
        Some(b"some") => false,
        Some(b"full") => true,
        _ => return Err(FIELDS_EXPECTED),
    };
    let mut value = |key: &[u8]| words.next().and_then(|word| word.strip_prefix(key)).ok_or(FIELDS_EXPECTED);
    let avgs = [value(b"avg10=")?, value(b"avg60=")?, value(b"avg300=")?];
    let total = value(b"total=")?;
    if words.next().is_some() {
        return Err(FIELDS_EXPECTED);
    }
    if !avgs.iter().all(|avg| is_average(avg)) {
        return Err("an average is not a `%lu.%02lu` number");
    }
    let total_us = parse_u64(total).ok_or("total is not an unsigned 64-bit integer")?;
    Ok(KernelLine { full, avgs, total_us })
}

/// `%lu.%02lu`: up to 20 digits (a u64), a dot, exactly two digits.
fn is_average(bytes: &[u8]) -> bool {
    let Some(dot) = bytes.iter().position(|&b| b == b'.') else { return false };
    let (whole, hundredths) = (&bytes[..dot], &bytes[dot + 1..]);
    (1..=20).contains(&whole.len())
        && whole.iter().all(u8::is_ascii_digit)
        && hundredths.len() == 2
        && hundredths.iter().all(u8::is_ascii_digit)
}

/// Decimal digits only; `None` if empty or over u64 (`total` is a full u64, `%llu`, so 20
/// digits can still overflow).
pub(crate) fn parse_u64(digits: &[u8]) -> Option<u64> {
    if digits.is_empty() || digits.len() > 20 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    digits.iter().try_fold(0u64, |n, d| n.checked_mul(10)?.checked_add(u64::from(d - b'0')))
}

/// Reads and parses one pressure file; a missing file is [`Error::PsiMissing`].
pub fn read_pressure(path: &Path) -> Result<Pressure> {
    match std::fs::read_to_string(path) {
        Ok(text) => parse_pressure(&text, &path.display().to_string()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(Error::PsiMissing { path: path.to_owned() }),
        Err(e) => Err(Error::io("read", path, e)),
    }
}

/// Combines a group's memory, io and (where read) CPU pressure into the controllers' totals.
pub fn stall_totals(memory: &Pressure, io: &Pressure, cpu: Option<&Pressure>) -> StallTotals {
    StallTotals {
        memory_some_us: memory.some.total_us,
        memory_full_us: memory.full.map_or(0, |l| l.total_us),
        io_some_us: io.some.total_us,
        io_full_us: io.full.map_or(0, |l| l.total_us),
        cpu_some_us: cpu.map_or(0, |p| p.some.total_us),
    }
}

/// Stall accumulated between two readings. A total that went backwards means the group was
/// recreated under the same name; the new totals are then the stall since recreation.
pub fn stall_delta(previous: &StallTotals, now: &StallTotals) -> StallTotals {
    let d = |prev: u64, now: u64| if now >= prev { now - prev } else { now };
    StallTotals {
        memory_some_us: d(previous.memory_some_us, now.memory_some_us),
        memory_full_us: d(previous.memory_full_us, now.memory_full_us),
        io_some_us: d(previous.io_some_us, now.io_some_us),
        io_full_us: d(previous.io_full_us, now.io_full_us),
        cpu_some_us: d(previous.cpu_some_us, now.cpu_some_us),
    }
}

/// Which stall a trigger watches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StallKind {
    Some,
    Full,
}

/// What waiting on a trigger found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TriggerEvent {
    /// The stall threshold was crossed within the window.
    Fired,
    /// The timeout passed first.
    Timeout,
    /// The group was removed (POLLERR): stop watching it.
    GroupGone,
}

/// A PSI trigger on one pressure file: `<some|full> <stall_us> <window_us>` written to the file
/// opened O_RDWR|O_NONBLOCK, then POLLPRI when the group stalled `stall_us` within a window.
/// The kernel allows one trigger per open file, so each trigger owns its descriptor.
#[derive(Debug)]
pub struct PsiTrigger {
    file: File,
    path: PathBuf,
}

/// Window bounds the kernel accepts (psi.rst).
pub const TRIGGER_WINDOW_MIN_US: u64 = 500_000;
pub const TRIGGER_WINDOW_MAX_US: u64 = 10_000_000;

/// Whether the kernel takes a trigger of `stall_us` within `window_us` (psi.rst's bounds).
pub fn trigger_accepted(stall_us: u64, window_us: u64) -> bool {
    (TRIGGER_WINDOW_MIN_US..=TRIGGER_WINDOW_MAX_US).contains(&window_us) && (1..=window_us).contains(&stall_us)
}

impl PsiTrigger {
    /// Arms a trigger. `stall_us` must be positive and at most `window_us`; `window_us` must lie
    /// in [500 ms, 10 s]. `proc_root` (`/proc`, or a fake tree) tells whether this process has
    /// CAP_SYS_RESOURCE when the kernel refuses the window.
    pub fn new(path: &Path, kind: StallKind, stall_us: u64, window_us: u64, proc_root: &Path) -> Result<Self> {
        if !trigger_accepted(stall_us, window_us) {
            return Err(Error::parse(
                "PSI trigger",
                path.display().to_string(),
                format!("window_us={window_us} must be in 500000..=10000000 and stall_us={stall_us} in 1..=window_us"),
            ));
        }
        let mut file =
            OpenOptions::new().read(true).write(true).custom_flags(nix::libc::O_NONBLOCK).open(path).map_err(|e| match e.kind() {
                std::io::ErrorKind::NotFound => Error::PsiMissing { path: path.to_owned() },
                _ => Error::io("open", path, e),
            })?;
        let kind = match kind {
            StallKind::Some => "some",
            StallKind::Full => "full",
        };
        let spec = format!("{kind} {stall_us} {window_us}");
        // The kernel wants the spec in one write.
        file.write_all(spec.as_bytes()).map_err(|e| match e.raw_os_error() {
            Some(nix::libc::EINVAL) => {
                // `%` rather than is_multiple_of: the workspace's rust-version predates it.
                #[allow(clippy::manual_is_multiple_of)]
                let hint = if window_us % UNPRIVILEGED_WINDOW_STEP_US != 0 && !has_cap_sys_resource(proc_root) {
                    "without CAP_SYS_RESOURCE (this process lacks it, e.g. in a container) the window must be a multiple of 2 s; use window_us=2000000 or grant the capability".to_owned()
                } else {
                    "stall_us must be at most window_us and the window within 500 ms..10 s".to_owned()
                };
                Error::PsiTriggerRejected { path: path.to_owned(), spec: spec.clone(), hint }
            }
            Some(nix::libc::EOPNOTSUPP) => Error::PsiTriggerRejected {
                path: path.to_owned(),
                spec: spec.clone(),
                hint: "pressure accounting is disabled for this group (cgroup.pressure is 0); write 1 to it".to_owned(),
            },
            _ => Error::io("arm PSI trigger on", path, e),
        })?;
        Ok(PsiTrigger { file, path: path.to_owned() })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Waits up to `timeout` for this trigger.
    pub fn wait(&self, timeout: Duration) -> Result<TriggerEvent> {
        Ok(wait_any(&[self], timeout)?.into_iter().next().map_or(TriggerEvent::Timeout, |(_, event)| event))
    }
}

/// Without CAP_SYS_RESOURCE the kernel accepts only windows that are multiples of 2 s (such
/// triggers ride on the 2 s averaging work instead of the real-time poller).
pub const UNPRIVILEGED_WINDOW_STEP_US: u64 = 2_000_000;

/// Whether this process has CAP_SYS_RESOURCE in its effective set, from the `CapEff:` line of
/// `<proc_root>/self/status` (hexadecimal capability mask, e.g. `CapEff:\t000001ffffffffff`).
/// Root in a container often lacks it, which restricts PSI trigger windows.
pub fn has_cap_sys_resource(proc_root: &Path) -> bool {
    const CAP_SYS_RESOURCE: u32 = 24;
    std::fs::read_to_string(proc_root.join("self/status"))
        .ok()
        .and_then(|status| parse_cap_eff(&status))
        .is_some_and(|caps| caps & (1 << CAP_SYS_RESOURCE) != 0)
}

fn parse_cap_eff(status: &str) -> Option<u64> {
    let line = status.lines().find_map(|l| l.strip_prefix("CapEff:"))?;
    u64::from_str_radix(line.trim(), 16).ok()
}

/// Waits up to `timeout` for any of `triggers`; returns the index and event of each that is
/// ready (empty on timeout). Interrupted waits (EINTR) return empty so the loop runs a tick.
pub fn wait_any(triggers: &[&PsiTrigger], timeout: Duration) -> Result<Vec<(usize, TriggerEvent)>> {
    Ok(wait_any_or_readable(triggers, &[], timeout)?.0)
}

/// [`wait_any`], also ending when one of `readable` has input (or hung up): returns the
/// triggers' events and whether any of `readable` is ready.
pub fn wait_any_or_readable(
    triggers: &[&PsiTrigger],
    readable: &[BorrowedFd<'_>],
    timeout: Duration,
) -> Result<(Vec<(usize, TriggerEvent)>, bool)> {
    let mut fds: Vec<PollFd> = triggers.iter().map(|t| PollFd::new(t.file.as_fd(), PollFlags::POLLPRI)).collect();
    fds.extend(readable.iter().map(|fd| PollFd::new(*fd, PollFlags::POLLIN)));
    // ppoll: a nanosecond timeout, where poll's milliseconds would wake early and need a
    // second sleep for the rest.
    match nix::poll::ppoll(&mut fds, Some(nix::sys::time::TimeSpec::from_duration(timeout)), None) {
        Ok(_) => {}
        Err(nix::errno::Errno::EINTR) => return Ok((Vec::new(), false)),
        Err(errno) => return Err(Error::io("poll", Path::new("PSI triggers"), errno.into())),
    }
    let revents = |fd: &PollFd| fd.revents().unwrap_or(PollFlags::empty());
    let mut ready = Vec::new();
    for (index, fd) in fds[..triggers.len()].iter().enumerate() {
        // POLLERR comes with POLLPRI when the group is destroyed, so check it first.
        if revents(fd).intersects(PollFlags::POLLERR | PollFlags::POLLNVAL | PollFlags::POLLHUP) {
            ready.push((index, TriggerEvent::GroupGone));
        } else if revents(fd).contains(PollFlags::POLLPRI) {
            ready.push((index, TriggerEvent::Fired));
        }
    }
    let has_input = fds[triggers.len()..].iter().any(|fd| !revents(fd).is_empty());
    Ok((ready, has_input))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn the_fast_totals_parser_agrees_with_the_full_parser() {
        let text = "some avg10=1.50 avg60=0.20 avg300=0.03 total=123456\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=789\n";
        let full = parse_pressure(text, "t").unwrap();
        assert_eq!(parse_totals(text.as_bytes()), Some((full.some.total_us, full.full.unwrap().total_us)));
        assert_eq!(parse_totals(b"some avg10=0.00 avg60=0.00 avg300=0.00 total=5\n"), Some((5, 0)));
        for bad in [
            &b""[..],
            b"full avg10=0.00 total=1\n",
            b"some total=\n",
            b"some total=1x\n",
            b"other total=1\n",
            b"some total=99999999999999999999\n",
        ] {
            assert_eq!(parse_totals(bad), None, "{:?}", String::from_utf8_lossy(bad));
        }
    }

    /// The fast path and the full parser agree on malformed lines: `some total=5` (no
    /// averages) is refused by both, so the control loop never takes totals from a file the
    /// slow path calls malformed.
    #[test]
    fn lines_missing_or_reordering_fields_are_refused_by_both_parsers() {
        for text in [
            "some total=5\n",
            "some avg10=0.00 total=5\n",
            "some avg10=0.00 avg60=0.00 total=5\n",
            "some total=5 avg10=0.00 avg60=0.00 avg300=0.00\n",
            "some avg60=0.00 avg10=0.00 avg300=0.00 total=5\n",
            "some  avg10=0.00 avg60=0.00 avg300=0.00 total=5\n",
            "some\tavg10=0.00 avg60=0.00 avg300=0.00 total=5\n",
            " some avg10=0.00 avg60=0.00 avg300=0.00 total=5\n",
            "some avg10=0.0 avg60=0.00 avg300=0.00 total=5\n",
            "some avg10=0.00 avg60=0.00 avg300=0.00 total=5 \n",
        ] {
            assert!(parse_pressure(text, "t").is_err(), "full parser accepted {text:?}");
            assert_eq!(parse_totals(text.as_bytes()), None, "fast path accepted {text:?}");
        }
        let crlf = "some avg10=0.00 avg60=0.00 avg300=0.00 total=5\r\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=2\r\n";
        assert_eq!(parse_pressure(crlf, "t").unwrap().full.unwrap().total_us, 2);
        assert_eq!(parse_totals(crlf.as_bytes()), Some((5, 2)));
    }

    /// A PSI average as `kernel/sched/psi.c` prints it (`%lu.%02lu`), from hundredths of a percent.
    fn avg_text(hundredths: u32) -> String {
        format!("{}.{:02}", hundredths / 100, hundredths % 100)
    }

    fn psi_line_text(kind: &str, avgs: [u32; 3], total: u64) -> String {
        format!("{kind} avg10={} avg60={} avg300={} total={total}\n", avg_text(avgs[0]), avg_text(avgs[1]), avg_text(avgs[2]))
    }

    fn totals_of(pressure: &Pressure) -> (u64, u64) {
        (pressure.some.total_us, pressure.full.map_or(0, |l| l.total_us))
    }

    /// How [`kernel_line_changed`] alters a kernel line.
    #[derive(Clone, Debug)]
    enum Change {
        None,
        /// Tolerated: a `\r\n` line ending.
        CarriageReturn,
        Drop(proptest::sample::Index),
        Duplicate(proptest::sample::Index),
        Swap(proptest::sample::Index, proptest::sample::Index),
        Insert(proptest::sample::Index, String),
        Separator(&'static str),
        LeadingSpace,
        Kind(&'static str),
        Average(proptest::sample::Index, &'static str),
        Total(&'static str),
    }

    /// A kernel line (`some` or `full`, averages with up to 20 integer digits, any total), maybe
    /// changed, ending in `\n`; with `Some((is_full, total))` if it is still a kernel line.
    fn kernel_line_changed() -> impl Strategy<Value = (String, Option<(bool, u64)>)> {
        use proptest::sample::{select, Index};
        let average =
            prop_oneof![0..=10_000u64, any::<u64>()].prop_map(|hundredths| format!("{}.{:02}", hundredths / 100, hundredths % 100));
        let change = prop_oneof![
            12 => Just(Change::None),
            2 => Just(Change::CarriageReturn),
            1 => any::<Index>().prop_map(Change::Drop),
            1 => any::<Index>().prop_map(Change::Duplicate),
            1 => (any::<Index>(), any::<Index>()).prop_map(|(a, b)| Change::Swap(a, b)),
            1 => (any::<Index>(), r"[a-z_]{0,6}total=[0-9]{1,5}|avg[0-9]{1,3}=[0-9]{1,2}\.[0-9]{2}|[a-z]{1,4}=total=[0-9]{1,3}").prop_map(|(at, word)| Change::Insert(at, word)),
            1 => select(vec!["  ", "\t", " \t", "\r"]).prop_map(Change::Separator),
            1 => Just(Change::LeadingSpace),
            1 => select(vec!["sone", "Some", "", "partial", "some=", "full:"]).prop_map(Change::Kind),
            1 => (any::<Index>(), select(vec!["1.5", "1.500", "-1.00", "+1.00", ".50", "1.", "NaN", "inf", "1e2", "1.0x", "", "123456789012345678901.00", "0,00"])).prop_map(|(at, avg)| Change::Average(at, avg)),
            1 => select(vec!["", "-1", "+1", "1x", "18446744073709551616", "99999999999999999999", "1.0", "0x10"]).prop_map(Change::Total),
        ];
        (any::<bool>(), [average.clone(), average.clone(), average], any::<u64>(), change).prop_map(|(is_full, avgs, total, change)| {
            let mut words =
                vec![format!("avg10={}", avgs[0]), format!("avg60={}", avgs[1]), format!("avg300={}", avgs[2]), format!("total={total}")];
            let (mut kind, mut separator, mut prefix, mut ending, mut kernel) =
                (if is_full { "full" } else { "some" }, " ", "", "\n", true);
            match change {
                Change::None => {}
                Change::CarriageReturn => ending = "\r\n",
                Change::Drop(at) => {
                    words.remove(at.index(4));
                    kernel = false;
                }
                Change::Duplicate(at) => {
                    let word = words[at.index(4)].clone();
                    words.insert(at.index(4), word);
                    kernel = false;
                }
                Change::Swap(a, b) => {
                    let (a, b) = (a.index(4), b.index(4));
                    words.swap(a, b);
                    kernel = a == b;
                }
                Change::Insert(at, word) => {
                    words.insert(at.index(5), word);
                    kernel = false;
                }
                Change::Separator(other) => {
                    separator = other;
                    kernel = false;
                }
                Change::LeadingSpace => {
                    prefix = " ";
                    kernel = false;
                }
                Change::Kind(other) => {
                    kind = other;
                    kernel = false;
                }
                Change::Average(at, avg) => {
                    let at = at.index(3);
                    words[at] = format!("{}={avg}", ["avg10", "avg60", "avg300"][at]);
                    kernel = false;
                }
                Change::Total(value) => {
                    words[3] = format!("total={value}");
                    kernel = false;
                }
            }
            (format!("{prefix}{kind}{separator}{}{ending}", words.join(separator)), kernel.then_some((is_full, total)))
        })
    }

    /// Pressure-file-shaped text: real and bogus line kinds and keys (also keys ending in
    /// `total`, which the full parser ignores), numbers that overflow u64, signs, odd spacing.
    const PSI_LIKE: &str = r"((some|full|sone|)([ \t]{1,2}(avg10|avg60|avg300|total|[a-z_]{0,6}total|[a-z0-9]{1,5})(=(-?[0-9]{0,22}(\.[0-9]{0,3})?|NaN|inf|total=[0-9]{1,3})?)?){0,6}[ \t]{0,2}\r?\n?){0,3}";

    proptest! {
        /// Never panics, and the fast path accepts exactly what the full parser accepts (bytes
        /// that are not UTF-8 never reach the full parser: `read_to_string` refuses them).
        #[test]
        fn pressure_parsers_agree_on_arbitrary_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
            let _ = parse_pressure(&String::from_utf8_lossy(&bytes), "fuzz");
            let full = std::str::from_utf8(&bytes).ok().and_then(|text| parse_pressure(text, "fuzz").ok());
            prop_assert_eq!(parse_totals(&bytes), full.map(|p| totals_of(&p)));
        }

        /// The fast path reads a total exactly when the full parser accepts the file, and the
        /// same one.
        #[test]
        fn pressure_parsers_agree_on_pressure_like_text(text in PSI_LIKE) {
            prop_assert_eq!(parse_totals(text.as_bytes()), parse_pressure(&text, "fuzz").ok().map(|p| totals_of(&p)));
        }

        /// Kernel files with one change per line (a field missing, duplicated, swapped or
        /// inserted, other spacing, a malformed number, a stray `\r`) and blank lines: both
        /// parsers accept exactly the files whose every line is still the kernel's, exactly one
        /// of them `some` and at most one `full`, and read the same totals from them.
        #[test]
        fn pressure_parsers_accept_exactly_kernel_files(
            lines in proptest::collection::vec((kernel_line_changed(), proptest::sample::select(vec!["", "\n", "\r\n"])), 0..4),
            final_newline in any::<bool>(),
        ) {
            let mut text = String::new();
            let (mut some, mut full, mut all_kernel) = (Vec::new(), Vec::new(), true);
            for ((line, kernel), blank) in &lines {
                text.push_str(blank);
                text.push_str(line);
                match kernel {
                    Some((false, total)) => some.push(*total),
                    Some((true, total)) => full.push(*total),
                    None => all_kernel = false,
                }
            }
            if !final_newline {
                text.pop();
            }
            let want = (all_kernel && some.len() == 1 && full.len() <= 1).then(|| (some[0], full.first().copied().unwrap_or(0)));
            prop_assert_eq!(parse_totals(text.as_bytes()), want, "fast path on {:?}", text);
            prop_assert_eq!(parse_pressure(&text, "gen").ok().map(|p| totals_of(&p)), want, "full parser on {:?}", text);
        }

        #[test]
        fn kernel_pressure_files_parse_back(
            some_avgs in [0..=10_000u32, 0..=10_000u32, 0..=10_000u32],
            some_total in any::<u64>(),
            full in proptest::option::of(([0..=10_000u32, 0..=10_000u32, 0..=10_000u32], any::<u64>())),
        ) {
            let line = |avgs: [u32; 3], total_us| PsiLine {
                avg10: f64::from(avgs[0]) / 100.0,
                avg60: f64::from(avgs[1]) / 100.0,
                avg300: f64::from(avgs[2]) / 100.0,
                total_us,
            };
            let mut text = psi_line_text("some", some_avgs, some_total);
            if let Some((avgs, total)) = full {
                text.push_str(&psi_line_text("full", avgs, total));
            }
            let want = Pressure { some: line(some_avgs, some_total), full: full.map(|(avgs, total)| line(avgs, total)) };
            prop_assert_eq!(parse_pressure(&text, "gen").unwrap(), want);
            prop_assert_eq!(parse_totals(text.as_bytes()), Some((some_total, full.map_or(0, |(_, total)| total))));
        }

        #[test]
        fn cap_eff_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200), text in r"(Cap(Eff|Prm):[ \t]{0,2}(0x)?[+-]?[0-9a-fA-FgG]{0,20}[ \t]*\n?){0,3}") {
            let _ = parse_cap_eff(&String::from_utf8_lossy(&bytes));
            let _ = parse_cap_eff(&text);
        }

        /// `/proc/<pid>/status` prints each capability set as 16 hex digits after a tab.
        #[test]
        fn cap_eff_parses_back(inh in any::<u64>(), prm in any::<u64>(), eff in any::<u64>(), bnd in any::<u64>()) {
            let status = format!("Name:\tx\nCapInh:\t{inh:016x}\nCapPrm:\t{prm:016x}\nCapEff:\t{eff:016x}\nCapBnd:\t{bnd:016x}\n");
            prop_assert_eq!(parse_cap_eff(&status), Some(eff));
        }
    }

    /// Found by `kernel_pressure_files_parse_back`: totals of 20 digits were refused.
    #[test]
    fn totals_of_twenty_digits_are_read() {
        let text = "some avg10=0.00 avg60=0.00 avg300=0.00 total=10000000000000000000\n";
        assert_eq!(parse_pressure(text, "t").unwrap().some.total_us, 10_000_000_000_000_000_000);
        assert_eq!(parse_totals(text.as_bytes()), Some((10_000_000_000_000_000_000, 0)));
        let max = format!("some avg10=0.00 avg60=0.00 avg300=0.00 total={}\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n", u64::MAX);
        assert_eq!(parse_totals(max.as_bytes()), Some((u64::MAX, 0)));
        assert_eq!(parse_totals(b"some avg10=0.00 avg60=0.00 avg300=0.00 total=18446744073709551616\n"), None);
    }

    /// Found by an earlier fuzz of extra words: the fast path read the value of an unknown key
    /// ending in `total=`. Extra words are now refused by both parsers.
    #[test]
    fn totals_come_from_the_total_key_only() {
        for text in [
            "some avg10=0.00 avg60=1.00 avg300=2.50 total=0 atotal=1\n",
            "some avg10=0.00 avg60=1.00 avg300=2.50 x=total=4\n",
            "some avg10=0.00 avg60=1.00 atotal=1 total=3\n",
        ] {
            assert!(parse_pressure(text, "t").is_err(), "{text:?}");
            assert_eq!(parse_totals(text.as_bytes()), None, "{text:?}");
        }
    }

    const MEMORY: &str = "some avg10=1.50 avg60=0.25 avg300=0.00 total=123456\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=789\n";

    #[test]
    fn both_lines_are_parsed() {
        let p = parse_pressure(MEMORY, "memory.pressure").unwrap();
        assert_eq!(p.some, PsiLine { avg10: 1.5, avg60: 0.25, avg300: 0.0, total_us: 123_456 });
        assert_eq!(p.full.unwrap().total_us, 789);
    }

    #[test]
    fn cpu_pressure_without_full_line_is_accepted() {
        let p = parse_pressure("some avg10=0.00 avg60=0.00 avg300=0.00 total=5\n", "cpu.pressure").unwrap();
        assert_eq!(p.some.total_us, 5);
        assert_eq!(p.full, None);
        let totals = stall_totals(&p, &p, Some(&p));
        assert_eq!((totals.memory_full_us, totals.cpu_some_us), (0, 5));
        assert_eq!(stall_totals(&p, &p, None).cpu_some_us, 0);
    }

    /// The kernel has printed the same four fields since PSI appeared (4.20); a new one is
    /// reported, not skipped.
    #[test]
    fn unknown_keys_are_refused() {
        let err = parse_pressure("some avg10=0.00 avg60=0.00 avg300=0.00 total=5 avg1=3.00\n", "x").unwrap_err();
        assert!(err.to_string().contains("in that order"), "{err}");
    }

    #[test]
    fn garbage_is_rejected() {
        for text in [
            "",
            "full avg10=0.00 avg60=0.00 avg300=0.00 total=1\n",
            "some avg10=0.00 avg60=0.00 avg300=0.00\n",
            "some avg10=0.00 avg60=0.00 avg300=0.00 total=-1\n",
            "some avg10=x avg60=0.00 avg300=0.00 total=1\n",
            "some avg10=NaN avg60=0.00 avg300=0.00 total=1\n",
            "some avg10=0.00 avg60=0.00 avg300=0.00 total=1\nsome avg10=0.00 avg60=0.00 avg300=0.00 total=1\n",
            "some avg10 avg60=0.00 avg300=0.00 total=1\n",
            "partial avg10=0.00 avg60=0.00 avg300=0.00 total=1\n",
            "\u{0}\u{1}binary",
        ] {
            assert!(parse_pressure(text, "fixture").is_err(), "accepted {text:?}");
        }
    }

    #[test]
    fn deltas_subtract_and_survive_a_recreated_group() {
        let a = StallTotals { memory_some_us: 100, memory_full_us: 10, io_some_us: 50, io_full_us: 5, cpu_some_us: 30 };
        let b = StallTotals { memory_some_us: 160, memory_full_us: 10, io_some_us: 20, io_full_us: 7, cpu_some_us: 45 };
        assert_eq!(
            stall_delta(&a, &b),
            StallTotals { memory_some_us: 60, memory_full_us: 0, io_some_us: 20, io_full_us: 2, cpu_some_us: 15 }
        );
    }

    #[test]
    fn missing_pressure_file_is_psi_missing() {
        let dir = tempfile::tempdir().unwrap();
        let err = read_pressure(&dir.path().join("memory.pressure")).unwrap_err();
        assert!(err.to_string().starts_with("PSI missing"), "{err}");
    }

    #[test]
    fn effective_capabilities_are_read_from_status() {
        assert_eq!(parse_cap_eff("Name:\tx\nCapEff:\t000001fffeffffff\n"), Some(0x1fffeffffff));
        assert_eq!(parse_cap_eff("Name:\tx\n"), None);
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("self")).unwrap();
        std::fs::write(dir.path().join("self/status"), "CapEff:\t000001fffeffffff\n").unwrap();
        assert!(!has_cap_sys_resource(dir.path()));
        std::fs::write(dir.path().join("self/status"), "CapEff:\t000001ffffffffff\n").unwrap();
        assert!(has_cap_sys_resource(dir.path()));
    }

    #[test]
    fn trigger_parameters_are_checked_before_touching_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("memory.pressure");
        std::fs::write(&path, MEMORY).unwrap();
        assert!(PsiTrigger::new(&path, StallKind::Some, 1000, 100_000, Path::new("/proc")).is_err());
        assert!(PsiTrigger::new(&path, StallKind::Some, 0, 1_000_000, Path::new("/proc")).is_err());
        assert!(PsiTrigger::new(&path, StallKind::Some, 2_000_000, 1_000_000, Path::new("/proc")).is_err());
        assert_eq!(std::fs::read_to_string(&path).unwrap(), MEMORY);
    }
}
