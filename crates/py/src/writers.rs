//! Fast writers for large traces: CSV with the bytes pandas' `to_csv(index=False,
//! lineterminator="\n")` writes, and the schedule as Chrome trace-event JSON with the bytes
//! `critmem.export.trace_events` describes. A 10,000-task run has millions of rows; in Python
//! each value would be an object.

use std::fs::File;
use std::io::{self, BufWriter, Write};

/// Why a write failed: the file system, or buffers that do not fit together.
#[derive(Debug)]
pub enum WriteError {
    Io(io::Error),
    Argument(String),
}

impl From<io::Error> for WriteError {
    fn from(e: io::Error) -> Self {
        WriteError::Io(e)
    }
}

impl From<String> for WriteError {
    fn from(e: String) -> Self {
        WriteError::Argument(e)
    }
}

/// One CSV column's values, as numpy hands them over (little-endian buffers).
pub enum CsvColumn<'a> {
    /// Codes into `labels`; a negative code is a missing value (an empty cell).
    Text {
        codes: &'a [u8],
        labels: Vec<String>,
    },
    Int(&'a [u8]),
    UInt(&'a [u8]),
    /// NaN is an empty cell.
    Float(&'a [u8]),
    Bool(&'a [u8]),
    /// Values and a mask (non-zero: missing, an empty cell).
    NullableInt {
        values: &'a [u8],
        mask: &'a [u8],
    },
}

impl CsvColumn<'_> {
    fn rows(&self) -> Result<usize, String> {
        let whole = |b: &[u8], width: usize| {
            if b.len().is_multiple_of(width) {
                Ok(b.len() / width)
            } else {
                Err(format!("a buffer of {} bytes is not whole {width}-byte values", b.len()))
            }
        };
        match self {
            CsvColumn::Text { codes, .. } => whole(codes, 8),
            CsvColumn::Int(b) | CsvColumn::UInt(b) | CsvColumn::Float(b) => whole(b, 8),
            CsvColumn::Bool(b) => Ok(b.len()),
            CsvColumn::NullableInt { values, mask } => {
                let n = whole(values, 8)?;
                if mask.len() != n {
                    return Err(format!("a nullable column has {n} values and a mask of {}", mask.len()));
                }
                Ok(n)
            }
        }
    }

    /// Appends row `i`'s cell; whether it is empty.
    fn push(&self, i: usize, out: &mut String) -> Result<bool, String> {
        match self {
            CsvColumn::Text { codes, labels } => {
                let code = i64_at(codes, i);
                if code < 0 {
                    return Ok(true);
                }
                let label = labels.get(code as usize).ok_or_else(|| format!("code {code} past {} labels", labels.len()))?;
                push_csv_field(label, out);
                Ok(label.is_empty())
            }
            CsvColumn::Int(b) => {
                out.push_str(itoa::Buffer::new().format(i64_at(b, i)));
                Ok(false)
            }
            CsvColumn::UInt(b) => {
                out.push_str(itoa::Buffer::new().format(u64::from_le_bytes(b[i * 8..i * 8 + 8].try_into().expect("8 bytes"))));
                Ok(false)
            }
            CsvColumn::Float(b) => {
                let v = f64_at(b, i);
                if v.is_nan() {
                    return Ok(true);
                }
                push_py_float(v, out);
                Ok(false)
            }
            CsvColumn::Bool(b) => {
                out.push_str(if b[i] != 0 { "True" } else { "False" });
                Ok(false)
            }
            CsvColumn::NullableInt { values, mask } => {
                if mask[i] != 0 {
                    return Ok(true);
                }
                out.push_str(itoa::Buffer::new().format(i64_at(values, i)));
                Ok(false)
            }
        }
    }
}

fn i64_at(b: &[u8], i: usize) -> i64 {
    i64::from_le_bytes(b[i * 8..i * 8 + 8].try_into().expect("8 bytes"))
}

fn f64_at(b: &[u8], i: usize) -> f64 {
    f64::from_le_bytes(b[i * 8..i * 8 + 8].try_into().expect("8 bytes"))
}

/// A field as Python's csv module writes it with `QUOTE_MINIMAL` and `lineterminator="\n"`:
/// quoted, with quotes doubled, when it holds a comma, a quote or a newline.
fn push_csv_field(s: &str, out: &mut String) {
    if s.contains([',', '"', '\n']) {
        out.push('"');
        out.push_str(&s.replace('"', "\"\""));
        out.push('"');
    } else {
        out.push_str(s);
    }
}

/// Of two candidates as short as `digits` and as close to `v` (exactly halfway between them),
/// the one with the even last digit, as Python picks; Rust's `{:e}` picks the upper one.
fn ties_to_even(v: f64, exp: i32, digits: String) -> String {
    let n = digits.len();
    let last = digits.as_bytes()[n - 1];
    if (last - b'0').is_multiple_of(2) {
        return digits;
    }
    // v's exact decimal expansion (a double has at most 767 significant digits).
    let exact = format!("{v:.800e}");
    let Some((mantissa, exact_exp)) = exact.split_once('e') else { return digits };
    let exact_digits: Vec<u8> = mantissa.bytes().filter(|&b| b != b'.').collect();
    let mut lower = digits.clone().into_bytes();
    lower[n - 1] -= 1;
    let halfway = exact_exp.parse() == Ok(exp)
        && exact_digits[..n] == lower[..]
        && exact_digits[n] == b'5'
        && exact_digits[n + 1..].iter().all(|&b| b == b'0');
    let lower = String::from_utf8(lower).expect("ASCII digits");
    let reads_back = format!("{}.{}0e{exp}", &lower[..1], &lower[1..]).parse::<f64>() == Ok(v);
    if halfway && reads_back {
        lower
    } else {
        digits
    }
}

/// `v` as Python's `repr(float)` writes it: the shortest digits that read back as `v`, in
/// positional notation for exponents from -4 to 15 (with at least one decimal, `27.0`), else
/// as `1.5e-05` / `1e+16`.
pub fn push_py_float(v: f64, out: &mut String) {
    // Times in ms from whole nanoseconds are most of a trace: v = n / 10^6 exactly as the
    // float nearest it. Below 2^32 ms a float's spacing is under 10^-6, so no other decimal
    // of at most six places reads back as v: n / 10^6 with its trailing zeros cut is the
    // shortest, which is what repr() writes (from 10^-4 up; below, repr() uses an exponent).
    if (1e-4..4e9).contains(&v.abs()) {
        let n = (v * 1e6).round();
        if n / 1e6 == v {
            push_scaled(n as i64, 6, out);
            return;
        }
    }
    if v.is_infinite() {
        out.push_str(if v > 0.0 { "inf" } else { "-inf" });
        return;
    }
    if v == 0.0 {
        out.push_str(if v.is_sign_negative() { "-0.0" } else { "0.0" });
        return;
    }
    // Rust's `{:e}` gives the same shortest round-trip digits: `d[.ddd]e[-]x`.
    let sci = format!("{v:e}");
    let (mantissa, exp) = sci.split_once('e').expect("`{:e}` has an exponent");
    let exp: i32 = exp.parse().expect("a decimal exponent");
    let (negative, mantissa) = match mantissa.strip_prefix('-') {
        Some(m) => (true, m),
        None => (false, mantissa),
    };
    let digits = ties_to_even(v.abs(), exp, mantissa.chars().filter(|&c| c != '.').collect());
    if negative {
        out.push('-');
    }
    if (-4..16).contains(&exp) {
        if exp < 0 {
            out.push_str("0.");
            out.extend(std::iter::repeat_n('0', (-exp - 1) as usize));
            out.push_str(&digits);
        } else {
            let int_len = exp as usize + 1;
            if digits.len() <= int_len {
                out.push_str(&digits);
                out.extend(std::iter::repeat_n('0', int_len - digits.len()));
                out.push_str(".0");
            } else {
                out.push_str(&digits[..int_len]);
                out.push('.');
                out.push_str(&digits[int_len..]);
            }
        }
    } else {
        out.push_str(&digits[..1]);
        if digits.len() > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        out.push('e');
        out.push(if exp < 0 { '-' } else { '+' });
        let e = exp.unsigned_abs();
        if e < 10 {
            out.push('0');
        }
        out.push_str(itoa::Buffer::new().format(e));
    }
}

/// `n / 10^decimals` in positional notation with its trailing zeros cut, at least one decimal
/// (`27.0`, `0.5`, `1.000001`).
fn push_scaled(n: i64, decimals: u32, out: &mut String) {
    let scale = 10u64.pow(decimals);
    if n < 0 {
        out.push('-');
    }
    let m = n.unsigned_abs();
    out.push_str(itoa::Buffer::new().format(m / scale));
    out.push('.');
    let mut frac = m % scale;
    if frac == 0 {
        out.push('0');
        return;
    }
    let mut width = decimals;
    while frac.is_multiple_of(10) {
        frac /= 10;
        width -= 1;
    }
    let digits = itoa::Buffer::new().format(frac).len() as u32;
    out.extend(std::iter::repeat_n('0', (width - digits) as usize));
    out.push_str(itoa::Buffer::new().format(frac));
}

/// Writes a CSV of `header` and `columns` (equal lengths) to `path`.
pub fn write_csv(path: &str, header: &[String], columns: &[CsvColumn<'_>]) -> Result<(), WriteError> {
    if header.len() != columns.len() {
        return Err(format!("{} column names for {} columns", header.len(), columns.len()).into());
    }
    let mut rows = None;
    for c in columns {
        let n = c.rows()?;
        if *rows.get_or_insert(n) != n {
            return Err("columns of different lengths".to_string().into());
        }
    }
    let rows = rows.unwrap_or(0);
    let mut w = BufWriter::with_capacity(1 << 20, File::create(path)?);
    let mut line = String::new();
    for (k, name) in header.iter().enumerate() {
        if k > 0 {
            line.push(',');
        }
        push_csv_field(name, &mut line);
    }
    if header.len() == 1 && header[0].is_empty() {
        line.push_str("\"\"");
    }
    line.push('\n');
    for i in 0..rows {
        let mut empty = true;
        for (k, c) in columns.iter().enumerate() {
            if k > 0 {
                line.push(',');
            }
            empty &= c.push(i, &mut line)?;
        }
        // The csv module quotes a lone empty field, so the row is not a blank line.
        if columns.len() == 1 && empty {
            line.push_str("\"\"");
        }
        line.push('\n');
        if line.len() >= 1 << 16 {
            w.write_all(line.as_bytes())?;
            line.clear();
        }
    }
    w.write_all(line.as_bytes())?;
    Ok(w.flush()?)
}

/// The columns of the trace's two kinds of events.
pub struct TraceColumns<'a> {
    /// Per segment: cpu, task code (index into the task list), job, start and end in ms.
    pub seg_cpu: &'a [u8],
    pub seg_task: &'a [u8],
    pub seg_job: &'a [u8],
    pub seg_start_ms: &'a [u8],
    pub seg_end_ms: &'a [u8],
    /// Per job: task code, job, release, deadline and completion (NaN: none) in ms, missed,
    /// outcome code.
    pub job_task: &'a [u8],
    pub job_index: &'a [u8],
    pub job_release_ms: &'a [u8],
    pub job_deadline_ms: &'a [u8],
    pub job_completion_ms: &'a [u8],
    pub job_missed: &'a [u8],
    pub job_outcome: &'a [u8],
}

/// Microseconds as `round(ms * 1000, 3)` gives them, from whole nanoseconds: the engine's
/// resolution, so no float noise from the ms values reaches the file.
fn push_us(ns: i64, out: &mut String) {
    // ns / 1000 with its trailing zeros cut is the float's repr while the float's spacing is
    // under 10^-3 (below 2^42 µs) and it is at least 10^-4 (any whole ns is).
    if ns.unsigned_abs() < 1 << 52 {
        push_scaled(ns, 3, out);
    } else {
        push_py_float(ns as f64 / 1000.0, out);
    }
}

fn ns_of(ms: f64) -> i64 {
    (ms * 1e6).round() as i64
}

/// Writes the trace-event JSON: `head` (the opening and the metadata events, ending just
/// before the first run event), then one event per segment and per job, then `tail`.
/// `quoted_tasks` and `quoted_outcomes` are the JSON strings of the task names (in task
/// order) and of the outcome names (in code order).
pub fn write_trace(
    path: &str,
    head: &str,
    tail: &str,
    c: &TraceColumns<'_>,
    quoted_tasks: &[String],
    quoted_outcomes: &[String],
    horizon_ms: f64,
) -> Result<(), WriteError> {
    let segs = c.seg_cpu.len() / 8;
    let jobs = c.job_task.len() / 8;
    let lengths_ok = [c.seg_task, c.seg_job, c.seg_start_ms, c.seg_end_ms].iter().all(|b| b.len() == segs * 8)
        && c.seg_cpu.len() == segs * 8
        && [c.job_task, c.job_index, c.job_release_ms, c.job_deadline_ms, c.job_completion_ms, c.job_outcome]
            .iter()
            .all(|b| b.len() == jobs * 8)
        && c.job_missed.len() == jobs;
    if !lengths_ok {
        return Err("trace columns of different lengths".to_string().into());
    }
    let task = |code: i64| {
        quoted_tasks
            .get(usize::try_from(code).unwrap_or(usize::MAX))
            .ok_or_else(|| format!("task code {code} past {} tasks", quoted_tasks.len()))
    };
    let mut w = BufWriter::with_capacity(1 << 20, File::create(path)?);
    let mut out = String::from(head);
    let mut flush = |out: &mut String, force: bool| -> Result<(), WriteError> {
        if force || out.len() >= 1 << 16 {
            w.write_all(out.as_bytes())?;
            out.clear();
        }
        Ok(())
    };
    let mut int = itoa::Buffer::new();
    for i in 0..segs {
        let (start, end) = (ns_of(f64_at(c.seg_start_ms, i)), ns_of(f64_at(c.seg_end_ms, i)));
        out.push_str(",{\"ph\":\"X\",\"pid\":1,\"tid\":");
        out.push_str(int.format(i64_at(c.seg_cpu, i)));
        out.push_str(",\"name\":");
        out.push_str(task(i64_at(c.seg_task, i))?);
        out.push_str(",\"cat\":\"run\",\"ts\":");
        push_us(start, &mut out);
        out.push_str(",\"dur\":");
        push_us(end - start, &mut out);
        out.push_str(",\"args\":{\"job\":");
        out.push_str(int.format(i64_at(c.seg_job, i)));
        out.push_str("}}");
        flush(&mut out, false)?;
    }
    for i in 0..jobs {
        let code = i64_at(c.job_task, i);
        let name = task(code)?;
        let job = i64_at(c.job_index, i);
        let completion = f64_at(c.job_completion_ms, i);
        let release = ns_of(f64_at(c.job_release_ms, i));
        let end = ns_of(if completion.is_nan() { horizon_ms } else { completion });
        let missed = c.job_missed[i] != 0;
        let outcome_code = i64_at(c.job_outcome, i);
        let outcome = quoted_outcomes
            .get(usize::try_from(outcome_code).unwrap_or(usize::MAX))
            .ok_or_else(|| format!("outcome code {outcome_code} unknown"))?;
        out.push_str(",{\"ph\":\"X\",\"pid\":2,\"tid\":");
        out.push_str(int.format(code));
        out.push_str(",\"name\":");
        // The JSON string of `"{name} #{job}"`: the name's, with the ASCII suffix inside.
        out.push_str(&name[..name.len() - 1]);
        out.push_str(" #");
        out.push_str(int.format(job));
        out.push_str("\",\"cat\":\"");
        out.push_str(if missed { "missed" } else { "job" });
        out.push_str("\",\"ts\":");
        push_us(release, &mut out);
        out.push_str(",\"dur\":");
        push_us(end - release, &mut out);
        out.push_str(",\"args\":{\"job\":");
        out.push_str(int.format(job));
        out.push_str(",\"outcome\":");
        out.push_str(outcome);
        out.push_str(",\"deadline_ms\":");
        push_py_float(f64_at(c.job_deadline_ms, i), &mut out);
        out.push_str(if missed { ",\"missed\":true}}" } else { "}}" });
        flush(&mut out, false)?;
    }
    out.push_str(tail);
    flush(&mut out, true)?;
    Ok(w.flush()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repr(v: f64) -> String {
        let mut s = String::new();
        push_py_float(v, &mut s);
        s
    }

    #[test]
    fn floats_read_as_python_writes_them() {
        // Each right-hand side is what CPython's repr() prints.
        let cases = [
            (27.0, "27.0"),
            (0.1, "0.1"),
            (1e16, "1e+16"),
            (1e-5, "1e-05"),
            (1e-4, "0.0001"),
            (123456789.123, "123456789.123"),
            (-0.0, "-0.0"),
            (5e-324, "5e-324"),
            (1.5e-7, "1.5e-07"),
            (9999999999999998.0, "9999999999999998.0"),
            (1e15, "1000000000000000.0"),
            (-2.5e22, "-2.5e+22"),
            (0.30000000000000004, "0.30000000000000004"),
            (1e100, "1e+100"),
            // Exactly halfway between ...12 and ...13: Python takes the even one.
            (70368744177664.0 + 0.125, "70368744177664.12"),
            (0.125, "0.125"),
        ];
        for (v, want) in cases {
            assert_eq!(repr(v), want, "{v:e}");
        }
    }

    #[test]
    fn whole_nanoseconds_take_the_fast_path_with_repr_s_digits() {
        // Each right-hand side is repr(n / 1e6) in CPython.
        for (ns, want) in [
            (27_000_000i64, "27.0"),
            (1, "1e-06"),
            (100, "0.0001"),
            (123_456_789_123, "123456.789123"),
            (1_500_000, "1.5"),
            (-2_000_001, "-2.000001"),
        ] {
            assert_eq!(repr(ns as f64 / 1e6), want, "{ns}");
        }
        let mut s = String::new();
        for ns in [0i64, 1, 1_000, 1_234_567, 999] {
            push_us(ns, &mut s);
            s.push('|');
        }
        // repr(round(ns / 1e6 * 1000, 3)) in CPython.
        assert_eq!(s, "0.0|0.001|1.0|1234.567|0.999|");
    }

    #[test]
    fn fields_are_quoted_as_the_csv_module_quotes_them() {
        let mut s = String::new();
        for f in ["a,b", "q\"q", "n\nl", "r\rr", " sp ", ""] {
            push_csv_field(f, &mut s);
            s.push('|');
        }
        assert_eq!(s, "\"a,b\"|\"q\"\"q\"|\"n\nl\"|r\rr| sp ||");
    }
}
