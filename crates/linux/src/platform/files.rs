//! The files a tick reads, kept open, and the byte-level parsers of the fast read path.

use super::*;

/// The files a tick reads, kept open: re-reading an open cgroup file from offset 0 skips the
/// path lookup and open/close that dominate a tick's cost.
pub(super) struct OpenFiles {
    memory_pressure: std::fs::File,
    io_pressure: std::fs::File,
    usage: std::fs::File,
    /// Per knob (max, high, min, low); `None` where the backend has no such file.
    knobs: [Option<std::fs::File>; 4],
}

impl OpenFiles {
    pub(super) fn open(backend: &dyn CgroupBackend, group: &GroupPath) -> Option<Self> {
        let open = |path: &Path| std::fs::File::open(path).ok();
        let memory_dir = backend.group_dirs(group).into_iter().next()?;
        let usage = open(&memory_dir.join("memory.current")).or_else(|| open(&memory_dir.join("memory.usage_in_bytes")))?;
        let mut knobs: [Option<std::fs::File>; 4] = Default::default();
        for (slot, knob) in knobs.iter_mut().zip(Knob::ALL) {
            if let Some(write) = backend.plan_knob(group, knob, None).ok().flatten() {
                *slot = Some(open(&write.path)?);
            }
        }
        Some(OpenFiles {
            memory_pressure: open(&backend.pressure_file(group, PsiResource::Memory))?,
            io_pressure: open(&backend.pressure_file(group, PsiResource::Io))?,
            usage,
            knobs,
        })
    }

    /// Reads usage unless `usage_now` is given, the pressure files `fresh` asks for (the others
    /// keep their `kept` totals) and, unless `knobs_now` is given, the knob files; `None` on any
    /// failure (the caller then goes the slow way, which names the error, e.g. a vanished
    /// group). Parses bytes in place: only the PSI totals and plain numbers, no UTF-8 check,
    /// no allocation.
    pub(super) fn read(
        &self,
        buf: &mut [u8; READ_BUF_BYTES],
        fresh: StallInputs,
        kept: StallTotals,
        usage_now: Option<u64>,
        knobs_now: Option<MemoryKnobs>,
    ) -> Option<(StallTotals, u64, MemoryKnobs)> {
        let (memory_some_us, memory_full_us) = if fresh.memory {
            crate::psi::parse_totals(pread_start(&self.memory_pressure, buf)?)?
        } else {
            (kept.memory_some_us, kept.memory_full_us)
        };
        let (io_some_us, io_full_us) =
            if fresh.io { crate::psi::parse_totals(pread_start(&self.io_pressure, buf)?)? } else { (kept.io_some_us, kept.io_full_us) };
        let usage = match usage_now {
            Some(usage) => usage,
            None => parse_u64(pread_start(&self.usage, buf)?)?,
        };
        if let Some(knobs) = knobs_now {
            return Some((
                StallTotals { memory_some_us, memory_full_us, io_some_us, io_full_us, cpu_some_us: kept.cpu_some_us },
                usage,
                knobs,
            ));
        }
        let mut values = [None; 4];
        for ((value, file), knob) in values.iter_mut().zip(&self.knobs).zip(Knob::ALL) {
            if let Some(file) = file {
                let bytes = pread_start(file, buf)?;
                *value =
                    if bytes.trim_ascii() == b"max" { None } else { knob_value(parse_u64(bytes)?, matches!(knob, Knob::Min | Knob::Low)) };
            }
        }
        let knobs = MemoryKnobs { max_bytes: values[0], high_bytes: values[1], min_bytes: values[2], low_bytes: values[3] };
        Some((StallTotals { memory_some_us, memory_full_us, io_some_us, io_full_us, cpu_some_us: kept.cpu_some_us }, usage, knobs))
    }
}

/// A group's CPU files (its CPU time, [`CgroupBackend::cpu_usage_file`], and `cpu.pressure`),
/// kept open; read on the ticks that refresh the totals a controller does not read, and every
/// tick for jobs kept one by one.
pub(super) struct CpuFiles {
    usage_file: CpuUsageFile,
    usage: std::fs::File,
    pressure: std::fs::File,
    /// Totals at the previous tick, while jobs are kept one by one.
    last_tick: Option<(u64, u64)>,
}

impl CpuFiles {
    pub(super) fn open(backend: &dyn CgroupBackend, group: &GroupPath) -> Option<Self> {
        let usage_file = backend.cpu_usage_file(group);
        let usage = std::fs::File::open(usage_file.path()).ok()?;
        let pressure = std::fs::File::open(backend.pressure_file(group, PsiResource::Cpu)).ok()?;
        Some(CpuFiles { usage_file, usage, pressure, last_tick: None })
    }

    /// CPU time used and time waited for a CPU (`cpu.pressure` `some`), in µs since the
    /// group was made; `None` when a read fails.
    pub(super) fn totals(&self, buf: &mut [u8; READ_BUF_BYTES]) -> Option<(u64, u64)> {
        let usage_us = self.usage_file.parse_bytes(pread_start(&self.usage, buf)?)?;
        let wait_us = pread_start(&self.pressure, buf).and_then(crate::psi::parse_totals).map(|(some, _)| some)?;
        Some((usage_us, wait_us))
    }

    /// The part of `now` (this tick's [`Self::totals`]) since the previous tick's; None on
    /// the first tick or after a failed read (that interval is then lost, not misattributed).
    /// `None` for `now` also forgets the previous tick (a tick that did not read).
    pub(super) fn interval(&mut self, now: Option<(u64, u64)>) -> Option<(u64, u64)> {
        let before = std::mem::replace(&mut self.last_tick, now);
        let ((u0, w0), (u1, w1)) = (before?, now?);
        Some((u1.saturating_sub(u0), w1.saturating_sub(w0)))
    }
}

/// Every file a tick reads fits: a pressure file is two lines of under 80 bytes.
pub(super) const READ_BUF_BYTES: usize = 512;

/// pread from offset 0 into a fixed buffer; the bytes read.
pub(super) fn pread_start<'b>(file: &std::fs::File, buf: &'b mut [u8; READ_BUF_BYTES]) -> Option<&'b [u8]> {
    use std::os::unix::fs::FileExt;
    let n = file.read_at(buf, 0).ok()?;
    // A full buffer may be a truncated file: go the slow way.
    (n < buf.len()).then(|| &buf[..n])
}

/// A decimal number with optional surrounding whitespace (`4096\n`).
pub(super) fn parse_u64(bytes: &[u8]) -> Option<u64> {
    crate::psi::parse_u64(bytes.trim_ascii())
}

/// A knob's byte count as the controllers see it: v1's huge "no limit" value and a
/// protection of 0 are `None`.
pub(super) fn knob_value(bytes: u64, is_protection: bool) -> Option<u64> {
    const V1_UNLIMITED_FROM_BYTES: u64 = 1 << 62;
    if bytes >= V1_UNLIMITED_FROM_BYTES || (is_protection && bytes == 0) {
        None
    } else {
        Some(bytes)
    }
}

/// pread from offset 0: cgroupfs regenerates the contents on every read from the start.
pub(super) fn read_at_start<'b>(file: &std::fs::File, buf: &'b mut Vec<u8>) -> Option<&'b str> {
    use std::os::unix::fs::FileExt;
    buf.resize(4096, 0);
    let n = file.read_at(buf, 0).ok()?;
    std::str::from_utf8(&buf[..n]).ok()
}

/// `parse` of a file kept open across ticks. One not open yet, or whose read fails or does not
/// parse (reads of a removed cgroup's files fail), is opened anew with `open` and read once more.
pub(super) fn read_kept<T>(
    file: &mut Option<std::fs::File>,
    buf: &mut Vec<u8>,
    open: impl FnOnce() -> Option<std::fs::File>,
    parse: impl Fn(&str) -> Option<T>,
) -> Option<T> {
    if let Some(value) = file.as_ref().and_then(|f| read_at_start(f, buf)).and_then(&parse) {
        return Some(value);
    }
    *file = open();
    file.as_ref().and_then(|f| read_at_start(f, buf)).and_then(parse)
}

/// A knob file's value: `max` or, on v1, a huge number (`9223372036854771712`) is no limit; a
/// protection of 0 is no protection. `None` when unparsable.
#[cfg(test)]
pub(super) fn parse_knob(text: &str, is_protection: bool) -> Option<Option<u64>> {
    if text == "max" {
        return Some(None);
    }
    Some(knob_value(parse_u64(text.as_bytes())?, is_protection))
}
