"""The `critmem` command.

Every failure a user can cause (a bad file, scenario, argument or output folder) ends as
one line `critmem: error: ...` on stderr and exit code 2; never a traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import json
import math
import os
import re
import select
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, NoReturn

from critmem import __version__, _core, controllers, output_schemas
from critmem._core import MAX_TRACE_RECORDS, ScenarioError
from critmem._source import ScenarioSource, read_path
from critmem.linux import LinuxError
from critmem.profiling import DEFAULT_MAX_SLOWDOWN, DEFAULT_MAX_STEPS
from critmem.progress import BarProgress, QuietProgress
from critmem.reproduce import PAPERS, get

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    from critmem.api import AnalysisResult, RunResult
    from critmem.progress import Progress
    from critmem.reproduce import Reproduction
    from critmem.reproduce.checks import Check
    from critmem.sweep import Executor

# The tables (rich) and the results as data frames (pandas) load only where a command prints or
# writes them: `run --json` and `analyze --json` need neither, and start several times faster.

# The reader of stdout closed it early; nothing is printed (rich's console does the same).
EXIT_CLOSED_OUTPUT = 1
EXIT_USAGE = 2
# An exception that is not the user's fault: a bug in critmem.
EXIT_INTERNAL = 70

_U64_MAX = 2**64 - 1


class CliError(Exception):
    """A user error, reported as one line."""


class _Parser(argparse.ArgumentParser):
    # argparse prints usage plus the error over several lines; we want one line.
    def error(self, message: str) -> NoReturn:
        raise CliError(f"{message} (see '{self.prog} --help')")


def _seed(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if not 0 <= value <= _U64_MAX:
        raise argparse.ArgumentTypeError(f"must be between 0 and 2**64 - 1 (got {text})")
    return value


def _gantt_window(text: str) -> tuple[float, float]:
    start, sep, end = text.partition(":")
    try:
        window = (float(start), float(end))
    except ValueError:
        window = (math.nan, math.nan)
    if not sep or not all(math.isfinite(x) for x in window) or not 0 <= window[0] < window[1]:
        raise argparse.ArgumentTypeError(f"expected START:END in ms with 0 <= START < END (got {text!r})")
    return window


def _out_dir(text: str) -> str:
    # An empty name would silently mean the current directory.
    if not text:
        raise argparse.ArgumentTypeError("must name a folder (got an empty string)")
    return text


def _int_at_least(minimum: int) -> Callable[[str], int]:
    """An argument type for whole numbers from `minimum` up."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum} (got {text})")
        return value

    return parse


def _scheduler_address(text: str) -> str:
    # Dask names its schedulers by URL; a bare host:port would be read as something else.
    if "://" not in text or not text.split("://", 1)[1]:
        raise argparse.ArgumentTypeError(f"must be a scheduler address like tcp://HOST:PORT (got {text!r})")
    return text


def _positive(text: str, what: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not {what}: {text!r}") from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"must be a positive {what.removeprefix('a ')} (got {text})")
    return value


def _positive_number(text: str) -> float:
    return _positive(text, "a number")


def _positive_ms(text: str) -> float:
    return _positive(text, "a number of milliseconds")


# ---------------------------------------------------------------------------------------
# Output helpers


def _console() -> Console:
    from rich.console import Console

    # Created per call so it writes to the current sys.stdout (tests redirect it). Off a
    # terminal rich would assume 80 columns and wrap the table; give it room instead.
    # COLUMNS, when set, is the width asked for (as rich reads it on a terminal); tables then
    # narrow to it and prose wraps at word boundaries.
    out = sys.stdout
    columns = os.environ.get("COLUMNS", "")
    asked = out.isatty() or (columns.isdigit() and int(columns) > 0)
    width = None if asked else 160
    return Console(file=out, width=width, highlight=False, soft_wrap=not asked)


def _fmt(value: Any, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


# Control characters in a name (an ANSI escape, a newline) would act on the terminal or split a
# row; they are shown escaped, as Python writes them in a string literal.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def _visible(text: str) -> str:
    """`text` with every control character written as its escape (`\\x1b`, `\\n`)."""
    return _CONTROL.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)


def _text(text: str) -> Text:
    """Terminal text that is never read as rich markup and never acts on the terminal."""
    from rich.text import Text

    return Text(_visible(text))


def _table(columns: Sequence[str], rows: Sequence[Sequence[str]], *, left: int = 1) -> Table:
    """A plain table; the first `left` columns are text, the rest numbers (right-aligned).

    Every column but the first (names) may wrap at spaces, so on a narrow terminal headers
    and prose break into lines instead of being cut off.
    """
    from rich import box
    from rich.table import Table

    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False)
    for i, c in enumerate(columns):
        # Numbers are never cut: a column is at least as wide as its widest value.
        widest = max((len(_visible(row[i])) for row in rows), default=0) if i >= left else None
        table.add_column(c, justify="left" if i < left else "right", no_wrap=i == 0, min_width=widest)
    for row in rows:
        table.add_row(*(_text(cell) for cell in row))
    return table


# Below this console width a run's tables take their compact form (see `_row_table`).
_COMPACT_WIDTH = 100
# Headers of the compact form: every word at most 7 characters, so no column is wider than
# its values need.
_SHORT_HEADERS = {
    "released": "jobs",
    "completed": "done",
    "misses": "miss",
    "reservation": "resv",
    "swapped in": "swap in",
    "swapped out": "swap out",
    "resident MB": "res MB",
    "peak resident MB": "peak MB",
    "consumed ms": "used ms",
    "replenishments": "refills",
    "exhaustions": "empties",
    "checksum fails": "bad sums",
    "lowest limit MB": "lowest MB",
    "peak usage MB": "peak MB",
    "memory some ms": "mem some ms",
    "memory full ms": "mem full ms",
}
# Gap between two columns of the compact form.
_COMPACT_GAP = 2


def _row_table(
    console: Console, columns: Sequence[str], rows: Sequence[Sequence[str]], *, left: int = 1, optional: Sequence[str] = ()
) -> Table:
    """A table of one line per row (a task, a group, a server): the first `left` columns are
    text, the rest numbers (right-aligned). A value never wraps and a number is never cut;
    headers break at spaces. Narrower than `_COMPACT_WIDTH`, headers are shortened, columns
    sit closer, the `optional` columns are left out (in that order) while the rest would not
    fit, and names that still do not fit end in "…"."""
    from rich import box
    from rich.table import Table

    compact = console.width < _COMPACT_WIDTH
    keep = list(range(len(columns)))
    headers = [_SHORT_HEADERS.get(c, c) if compact else c for c in columns]

    def widest(i: int) -> int:
        return max((len(_visible(row[i])) for row in rows), default=0)

    def need(i: int) -> int:
        return max(max(len(w) for w in headers[i].split()), widest(i))

    if compact:
        for name in optional:
            if sum(need(i) for i in keep) + _COMPACT_GAP * (len(keep) - 1) <= console.width:
                break
            keep.remove(columns.index(name))
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False, collapse_padding=compact)
    # Compact columns are exactly as wide as they need; the names give way, down to a few
    # characters, where the rest leave too little.
    others = sum(need(j) for j in keep[1:]) + _COMPACT_GAP * (len(keep) - 1)
    for i in keep:
        justify: Literal["left", "right"] = "left" if i < left else "right"
        if not compact:
            table.add_column(headers[i], justify=justify, no_wrap=i == 0, overflow="fold", min_width=widest(i) if i >= left else None)
        elif i == 0:
            table.add_column(headers[i], no_wrap=True, width=max(4, min(need(i), console.width - others)))
        else:
            table.add_column(headers[i], justify=justify, overflow="fold", width=need(i))
    for row in rows:
        table.add_row(*(_cell(row[i]) for i in keep))
    return table


def _cell(text: str) -> Text:
    """A table value: one line, cut with "…" where its column is too narrow."""
    cell = _text(text)
    cell.no_wrap = True
    cell.overflow = "ellipsis"
    return cell


def _words(identifier: str) -> str:
    """`not_schedulable` → `not schedulable`, for people."""
    return identifier.replace("_", " ")


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


# ---------------------------------------------------------------------------------------
# critmem run


def _print_run(s: dict[str, Any], events: int) -> None:
    """The run's header line and tables, from its summary and the engine's event count."""
    console = _console()
    console.print(
        _text(
            f"{s['scenario']}: {s['scheduler']} on {_plural(s['cpus'], 'CPU')}, "
            f"horizon {s['horizon_ms']:g} ms, seed {s['seed']}, {events} events"
        )
    )
    control = s.get("control")
    if control is not None:
        console.print(_text(_controller_line(control["controller"], control["interval_ms"], control["ticks"], control["dropped_jobs"])))
    _print_tasks(console, s["tasks"], place="cpu")
    if control is not None and s.get("memory") is not None:
        _print_groups(console, _sim_group_rows(s), throughput="work/s")
    if "servers" in s:
        _print_servers(console, s["servers"], float(s["horizon_ms"]))
    if s.get("memory") is not None:
        _print_memory(console, s["memory"])
    if "tmem" in s:
        _print_tmem(console, s["tmem"])


def _print_tmem(console: Console, t: dict[str, Any]) -> None:
    """TMEM's line (policy, pool, runs, peak) and one row per managed cache: its minimum, peak
    and final allocation, desired allocation at the end, units handed out, growths from the
    pool, waits and their longest and total time. Past `_TABLE_ROWS` caches, those that
    waited longest."""
    total = t["total_units"]
    pool = "no limit" if total is None else f"{total} units ({total - t['min_units']} above the minimums)"
    console.print(
        _text(
            f"tmem: {t['policy']}, requests {t['wait']}, pool {pool}, {_plural(t['runs'], 'run')} every "
            f"{t['period_ns'] / 1e6:g} ms, peak {t['peak_allocated_units']} units in caches"
        )
    )
    shown = _worst(t["caches"], lambda c: (c["total_wait_ns"], c["waits"]))
    rows = [
        [
            c["component"],
            c["kind"],
            _fmt(c["min_units"]),
            _fmt(c["peak_allocated_units"]),
            _fmt(c["final_allocated_units"]),
            "none" if c["final_desired_units"] is None else _fmt(c["final_desired_units"]),
            _fmt(c["gets"]),
            _fmt(c["grows"]),
            _fmt(c["waits"]),
            _fmt(c["longest_wait_ns"] / 1e6),
            _fmt(c["total_wait_ns"] / 1e6),
        ]
        for c in shown
    ]
    columns = ["component", "kind", "min", "peak", "final", "desired", "gets", "grows", "waits", "longest wait ms", "total wait ms"]
    console.print(_row_table(console, columns, rows, left=2, optional=["grows", "longest wait ms"]))
    _note_left_out(console, len(t["caches"]), len(shown), "the longest waits", what="caches")


def _controller_line(name: str, interval_ms: float, ticks: int, dropped_jobs: int) -> str:
    return f"controller: {name}, every {interval_ms:g} ms ({_plural(ticks, 'tick')}, {_plural(dropped_jobs, 'job')} dropped at its request)"


# One row of the group table: name, limit at the end, lowest limit, peak usage (MB; None:
# unlimited, NaN: not measured), throughput (None: not measured), jobs pending and dropped.
_GroupRow = tuple[str, float | None, float | None, float | None, float | None, int | None, int | None]


def _print_groups(console: Console, rows: Sequence[_GroupRow], *, throughput: str) -> None:
    """One row per controlled group: its memory limit at the end and at its lowest, its peak
    usage, its tasks' throughput (`throughput` names the unit) and their pending and dropped
    jobs."""
    cells = [
        [name, _mb(final), _mb(lowest), _mb(peak), _fmt(rate, digits=2), _fmt(pending), _fmt(dropped)]
        for name, final, lowest, peak, rate, pending, dropped in rows
    ]
    columns = ["group", "limit MB", "lowest limit MB", "peak usage MB", throughput, "pending", "dropped"]
    console.print(_text('memory per group (limit = memory.max at the end, "none" = unlimited)'))
    console.print(_row_table(console, columns, cells, optional=["lowest limit MB"]))


def _mb(value: float | None) -> str:
    """MB to one decimal; None is no limit, NaN not measured."""
    if value is None:
        return "none"
    return "-" if math.isnan(value) else f"{value:.1f}"


def _sim_group_rows(s: dict[str, Any]) -> list[_GroupRow]:
    """The simulator's group rows: limits from `control.groups`, each task's figures summed
    into the group `memory.tasks` places it in."""
    member = {t["name"]: t["group"] for t in s["memory"]["tasks"]}
    rows: list[_GroupRow] = []
    for g in s["control"]["groups"]:
        tasks = [t for t in s["tasks"] if member.get(t["name"]) == g["name"]]
        rows.append(
            (
                g["name"],
                g["final_max_mb"],
                g["lowest_max_mb"],
                g["peak_usage_mb"],
                sum(t["throughput_per_s"] for t in tasks) if tasks else None,
                sum(t["pending"] for t in tasks) if tasks else None,
                sum(t["dropped"] for t in tasks) if tasks else None,
            )
        )
    return rows


def _linux_group_rows(summary: dict[str, Any]) -> list[_GroupRow]:
    """Linux's group rows: limits and peak usage from the control timeline, the MiB/s the
    group's throughput workers verified, and the jobs its workloads reported."""
    timeline = summary["control"]["timeline"]
    rows: list[_GroupRow] = []
    for i, g in enumerate(summary["memory"]["groups"]):
        samples = [sample["groups"][i] for sample in timeline]
        limits = [p["max_bytes"] for p in samples if p["max_bytes"] is not None]
        final = samples[-1]["max_bytes"] if samples else math.nan
        rates = [t["verified_mib_per_s"] for t in summary["tasks"] if t["group"] == g["name"] and t["verified_mib_per_s"] is not None]
        reported = g["jobs_reported"] > 0
        rows.append(
            (
                g["name"],
                final if final is None or math.isnan(final) else final / 1_048_576,
                min(limits) / 1_048_576 if limits else (None if samples else math.nan),
                max(p["usage_bytes"] for p in samples) / 1_048_576 if samples else math.nan,
                sum(rates) if rates else None,
                g["jobs_pending"] if reported else None,
                g["jobs_dropped"] if reported else None,
            )
        )
    return rows


def _print_servers(console: Console, servers: Sequence[dict[str, Any]], horizon_ms: float) -> None:
    """One row per server of the scheduler hierarchy: its budget, the CPU share it used (its
    child-scheduler threads' event delivery included), and the events it delivered; with a
    server memory reservation, each server's reservation and the most its subtree held."""
    memory = any("peak_resident_pages" in v for v in servers)
    rows = [
        [
            v["name"],
            v["parent"],
            v["kind"],
            _fmt(v["budget_ms"]),
            _fmt(v["period_ms"]),
            _fmt(v["consumed_ms"]),
            # Of all the CPUs it runs on.
            f"{100 * v['consumed_ms'] / (horizon_ms * len(v['cpus'])):.1f}%" if horizon_ms > 0 else "-",
            _fmt(v["replenishments"]),
            _fmt(v["exhaustions"]),
            _fmt(v["events_delivered"]),
            _fmt(v["event_ms"]),
            *([_memory_reserve(v["memory_reserved_mb"], v["memory_kind"]), _fmt(v["peak_resident_pages"])] if memory else []),
        ]
        for v in servers
    ]
    columns = ["server", "parent", "kind", "budget ms", "period ms", "consumed ms", "cpu share", "replenishments",
               "exhaustions", "events", "event ms"]  # fmt: skip
    if memory:
        columns += ["memory MiB", "peak pages"]
    console.print(_row_table(console, columns, rows, left=3, optional=["event ms", "events", "exhaustions"]))


def _memory_reserve(mib: float | None, kind: str | None) -> str:
    """A server's memory reservation as `8 hard`, or `-` for none."""
    return "-" if mib is None else f"{_fmt(mib)} {kind}"


# A column of the task table beyond the common ones: header, and the cell of a task's row.
_Column = tuple[str, Callable[[dict[str, Any]], str]]


def _print_tasks(console: Console, tasks: Sequence[dict[str, Any]], *, place: str, extra: Sequence[_Column] = ()) -> None:
    """The per-task table of a run on either platform: the fields both summaries share, with
    the same meaning (a Linux task whose jobs were not counted shows "-"). `place` is the
    column after the criticality: the simulator's `cpu` (a number) or Linux's `group` (text).
    Past `_TABLE_ROWS` tasks it shows those with the most misses, then the longest tardiness
    (in file order), and says how many it left out: a terminal cannot show 10,000 rows."""
    shown = _worst(tasks, lambda t: (t["deadline_misses"] or 0, t["max_tardiness_ms"] or 0.0))
    rows = []
    for t in shown:
        hit = t["hit_ratio"]
        rows.append(
            [
                t["name"],
                t["criticality"],
                _fmt(t[place]),
                _fmt(t["jobs"]),
                _fmt(t["completed"]),
                _fmt(t["deadline_misses"]),
                "-" if hit is None else f"{100 * hit:.1f}%",
                _fmt(t["max_response_ms"]),
                _fmt(t["mean_response_ms"]),
                _fmt(t["max_tardiness_ms"]),
                *(cell(t) for _, cell in extra),
            ]
        )
    columns = ["task", "crit", place, "released", "completed", "misses", "hit ratio",
               "max resp ms", "mean resp ms", "max tard ms", *(header for header, _ in extra)]  # fmt: skip
    optional = ["mean resp ms", *(header for header, _ in extra[1:])]
    console.print(_row_table(console, columns, rows, left=3 if place == "group" else 2, optional=optional))
    _note_left_out(console, len(tasks), len(shown), "the most deadline misses, then the longest tardiness")


# Most rows a per-task table shows on a terminal; --json and --out's files have every task.
_TABLE_ROWS = 40


def _worst(rows: Sequence[dict[str, Any]], key: Callable[[dict[str, Any]], tuple[float, ...]]) -> list[dict[str, Any]]:
    """All of `rows`, or past `_TABLE_ROWS` the `_TABLE_ROWS` with the largest `key`, in their
    own order."""
    if len(rows) <= _TABLE_ROWS:
        return list(rows)
    ranked = sorted(range(len(rows)), key=lambda i: tuple(-k for k in key(rows[i])))[:_TABLE_ROWS]
    return [rows[i] for i in sorted(ranked)]


def _note_left_out(console: Console, total: int, shown: int, by: str, what: str = "tasks") -> None:
    if shown < total:
        every = what.removesuffix("s")
        console.print(
            _text(f"… {total - shown:,} more {what} not shown: these {shown} have {by}; --json and --out's summary.json have every {every}")
        )


def _print_memory(console: Console, memory: dict[str, Any]) -> None:
    """Per-task faults and swapping, then per-group PSI stall totals."""
    page_mb = float(memory["page_bytes"]) / 1_048_576
    console.print(
        _text(
            f"memory: {memory['total_frames'] * page_mb:g} MB in {memory['page_bytes']} B pages, swap {memory['swap']}, "
            f"reserved physical memory at the end {memory['reserved_physical_mb']:g} MB"
        )
    )
    rows = [
        [
            t["name"],
            t["reservation"] or "-",
            _fmt(t["minor_faults"]),
            _fmt(t["major_faults"]),
            _fmt(t["pages_swapped_in"]),
            _fmt(t["pages_swapped_out"]),
            _fmt(t["resident_pages"] * page_mb),
            _fmt(t["peak_resident_pages"] * page_mb),
            _fmt(float(t["fault_wait_ms"])),
        ]
        for t in _worst(memory["tasks"], lambda t: (float(t["fault_wait_ms"]), t["major_faults"]))
    ]
    columns = ["task", "reservation", "minor faults", "major faults", "swapped in", "swapped out",
               "resident MB", "peak resident MB", "fault wait ms"]  # fmt: skip
    console.print(_row_table(console, columns, rows, left=2, optional=["swapped in", "minor faults", "resident MB"]))
    _note_left_out(console, len(memory["tasks"]), len(rows), "the longest fault waits")
    components = [
        [
            c["name"],
            c["reservation"] or "-",
            _fmt(c["minor_faults"]),
            _fmt(c["major_faults"]),
            _fmt(c["resident_pages"] * page_mb),
            _fmt(c["peak_resident_pages"] * page_mb),
        ]
        for c in memory.get("components", [])
    ]
    if components:
        console.print(_text("components' own memory: the faults their invocations took in it (the callers waited for them)"))
        columns = ["component", "reservation", "minor faults", "major faults", "resident MB", "peak resident MB"]
        console.print(_row_table(console, columns, components, left=2))
    shared = [
        [
            u["region"],
            t["name"],
            _fmt(u["jobs_ended"]),
            _fmt(u["mean_job_pages"] * page_mb if u["jobs_ended"] else None),
            _fmt(u["largest_job_pages"] * page_mb if u["jobs_ended"] else None),
        ]
        for t in memory["tasks"]
        for u in t.get("shared_regions", [])
    ]
    if shared:
        console.print(_text("shared regions: distinct pages each task touched per ended job (the mean is the paper's Avg(S))"))
        console.print(
            _row_table(console, ["region", "task", "jobs ended", "mean MB", "largest MB"], sorted(shared, key=lambda row: row[0]), left=2)
        )
    groups = [
        [
            g["name"],
            _fmt(g["memory_some_us"] / 1000),
            _fmt(g["memory_full_us"] / 1000),
            _fmt(g["io_some_us"] / 1000),
            _fmt(g["io_full_us"] / 1000),
        ]
        for g in memory["groups"]
    ]
    console.print(_text("stall totals per group (PSI: some = at least one task stalled, full = all non-idle tasks stalled)"))
    console.print(
        _row_table(
            console,
            ["group", "memory some ms", "memory full ms", "io some ms", "io full ms"],
            groups,
            optional=["memory full ms", "io full ms"],
        )
    )


def _prepare_out_dir(out: str) -> Path:
    path = Path(out)
    # mkdir would say "File exists" for a file in the way; name the real problem.
    if path.exists() and not path.is_dir():
        raise CliError(f"cannot write results to {out!r}: it exists and is not a folder")
    if path.is_symlink():
        # mkdir would say "File exists" for a link to nowhere too.
        try:
            os.stat(path)
        except OSError as e:
            reason = {
                errno.ENOENT: f"it is a symbolic link to {os.readlink(path)!r}, which does not exist",
                errno.ELOOP: "it is a symbolic link that loops",
            }.get(e.errno or 0, e.strerror or str(e))
            raise CliError(f"cannot write results to {out!r}: {reason}") from None
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise CliError(f"cannot write results to {out!r}: {e.strerror or e}") from None
    if not os.access(path, os.W_OK):
        raise CliError(f"cannot write results to {out!r}: permission denied")
    return path


# `run --out` keeps the names of the files it wrote here, so a later run knows which files in
# the folder are critmem's own.
_MANIFEST = ".critmem-out"
# Every file `run --out` may write, on either platform.
_OUT_NAMES = frozenset(
    {
        "jobs.csv",
        "segments.csv",
        "summary.json",
        "gantt.png",
        "gantt.svg",
        "gantt.pdf",
        "trace.json",
        "jobs.parquet",
        "segments.parquet",
        "memory_timeline.parquet",
        "memory_timeline.csv",
        "control_timeline.csv",
        "memory.png",
        "waits.csv",
        "servers.csv",
        "server_supply.csv",
        "timeline.csv",
        "csv-metadata.json",
        _MANIFEST,
    }
)


def _claim_out_dir(out: str, path: Path, force: bool) -> None:
    """Refuses a folder holding anything but critmem's own files of an earlier run; with
    `force`, removes those (and only those) so no stale file sits beside the new results."""
    entries = sorted(os.listdir(path))
    if not entries:
        return
    try:
        listed = set((path / _MANIFEST).read_text(encoding="utf-8").splitlines())
    except FileNotFoundError:
        listed = set()
    except OSError as e:
        raise CliError(f"cannot write results to {out!r}: {_MANIFEST}: {e.strerror or e}") from None
    own = [n for n in entries if n == _MANIFEST or (n in listed and n in _OUT_NAMES and (path / n).is_file())]
    foreign = [n for n in entries if n not in own]
    if not force:
        if foreign:
            shown = ", ".join(_visible(n) for n in foreign[:3]) + (", ..." if len(foreign) > 3 else "")
            raise CliError(
                f"cannot write results to {out!r}: it holds files critmem did not write ({shown}); "
                "choose an empty or new folder, or give --force to replace only critmem's files of an earlier run"
            )
        raise CliError(f"cannot write results to {out!r}: it holds the results of an earlier run; give --force to replace them")
    clash = sorted(set(foreign) & _OUT_NAMES)
    if clash:
        raise CliError(f"cannot write results to {out!r}: {_visible(clash[0])} is in the way and critmem did not write it")
    try:
        for name in own:
            (path / name).unlink()
    except OSError as e:
        raise CliError(f"cannot write results to {out!r}: {e.strerror or e}") from None


def _record_out(out_dir: Path, written: Sequence[Path]) -> None:
    """Lists the files this run wrote in the folder's manifest."""
    try:
        (out_dir / _MANIFEST).write_text("".join(f"{p.name}\n" for p in written), encoding="utf-8")
    except OSError as e:
        raise CliError(f"cannot write results to {str(out_dir)!r}: {e.strerror or e}") from None


def _progress_bar(src: ScenarioSource, horizon_ms: float | None) -> contextlib.AbstractContextManager[Callable[[float], object] | None]:
    """A progress bar for a long run when stderr is a terminal (the core calls it only once a
    run has taken half a second); nothing otherwise. `horizon_ms` is the CLI's override."""
    if not sys.stderr.isatty():
        return contextlib.nullcontext(None)
    from critmem.progress import SimulatedTimeBar

    if horizon_ms is None:
        try:
            horizon_ms = float(json.loads(_core.validate(src.text, src.name, src.format))["horizon_ms"])
        except (ScenarioError, ValueError):
            # The run itself reports what is wrong with the scenario.
            return contextlib.nullcontext(None)
    return SimulatedTimeBar(horizon_ms)


def _write_results(
    result: RunResult,
    out_dir: Path,
    *,
    parquet: bool = False,
    gantt_window: tuple[float, float] | None = None,
    chart_format: str = "png",
    traces: bool = True,
) -> list[Path]:
    from critmem.export import write_csv, write_csv_metadata, write_trace_events
    from critmem.gantt import plot_gantt  # matplotlib is slow to import; only --out needs it

    summary_json = out_dir / "summary.json"
    written: list[Path] = []
    try:
        if traces:
            written += [write_csv(result.jobs, out_dir / "jobs.csv"), write_csv(result.segments, out_dir / "segments.csv")]
        summary_json.write_text(result.to_json() + "\n", encoding="utf-8")
        written.append(summary_json)
        if traces:
            written.append(plot_gantt(result, out_dir / f"gantt.{chart_format}", window=gantt_window, fmt=chart_format))
            written.append(write_trace_events(result, out_dir / "trace.json"))
        if parquet:
            # Parquet keeps the frames' types (categoricals, nullable integers) that CSV loses.
            for name, frame in (("jobs", result.jobs), ("segments", result.segments)):
                path = out_dir / f"{name}.parquet"
                frame.to_parquet(path, index=False, engine="pyarrow", compression="zstd")
                written.append(path)
        if result.servers is not None:
            servers_csv = out_dir / "servers.csv"
            supply_csv = out_dir / "server_supply.csv"
            write_csv(result.servers, servers_csv)
            write_csv(result.server_supply, supply_csv)
            written += [servers_csv, supply_csv]
        if result.resources_declared and traces:
            waits_csv = out_dir / "waits.csv"
            write_csv(result.waits, waits_csv)
            written.append(waits_csv)
        if result.memory is not None:
            from critmem.memplot import plot_memory

            timeline_csv = out_dir / "memory_timeline.csv"
            write_csv(result.memory_timeline, timeline_csv)
            written.append(timeline_csv)
            if result.summary.get("control") is not None:
                control_csv = out_dir / "control_timeline.csv"
                write_csv(result.control_timeline_long(), control_csv)
                written.append(control_csv)
            written.append(plot_memory(result, out_dir / "memory.png"))
            if parquet:
                timeline_parquet = out_dir / "memory_timeline.parquet"
                result.memory_timeline.to_parquet(timeline_parquet, index=False, engine="pyarrow", compression="zstd")
                written.append(timeline_parquet)
        written.append(write_csv_metadata(result, out_dir, [p for p in written if p.suffix == ".csv"]))
    except OSError as e:
        raise CliError(f"cannot write results to {str(out_dir)!r}: {e.strerror or e}") from None
    return written


def _cmd_run(args: argparse.Namespace) -> int:
    if args.platform == "linux":
        return _cmd_run_linux(args)
    if args.duration is not None or args.controller is not None or args.controller_config is not None:
        raise CliError(
            "--duration, --controller and --controller-config need --platform linux (the simulator runs to the scenario's horizon with its [control] controller)"
        )
    src = read_path(args.file)
    if args.out is None and (args.gantt_window is not None or args.format != "png"):
        raise CliError("--gantt-window and --format shape the Gantt chart --out writes: give --out DIR")
    if args.out is None and (args.trace_limit is not None or args.no_traces):
        raise CliError("--trace-limit and --no-traces shape the traces --out writes: give --out DIR")
    if args.no_traces and (args.trace_limit is not None or args.gantt_window is not None or args.format != "png" or args.parquet):
        raise CliError("--no-traces writes no traces: drop --trace-limit, --gantt-window, --format and --parquet")
    if args.parquet:
        if args.out is None or args.platform == "linux":
            raise CliError("--parquet needs --out DIR on the simulator")
        import importlib.util

        if importlib.util.find_spec("pyarrow") is None:
            raise CliError("--parquet needs pyarrow: pip install 'critmem[parquet]'")
    if args.out is None:
        # The summary alone: straight from the core, without building data frames.
        with _progress_bar(src, args.horizon_ms) as progress:
            out = _core.simulate(
                src.text, src.name, src.format, seed=args.seed, horizon_ms=args.horizon_ms,
                record_jobs=False, record_segments=False, progress=progress,
            )  # fmt: skip
        _print_warnings(out.warnings)
        if args.json:
            sys.stdout.write(out.summary_json + "\n")
        else:
            _print_run(json.loads(out.summary_json), out.events)
        return 0
    from critmem.api import _run_source

    out_dir = _prepare_out_dir(args.out) if args.out is not None else None
    if out_dir is not None:
        _claim_out_dir(args.out, out_dir, args.force)
    record = out_dir is not None and not args.no_traces
    with _progress_bar(src, args.horizon_ms) as progress:
        result = _run_source(
            src, seed=args.seed, horizon_ms=args.horizon_ms, record_jobs=record, record_segments=record,
            trace_limit=args.trace_limit, progress=progress, warn=False,
        )  # fmt: skip
    _print_warnings(result.warnings)
    if args.json:
        sys.stdout.write(result.to_json() + "\n")
    else:
        _print_run(result.summary, result.events)
    if out_dir is not None:
        written = _write_results(
            result, out_dir, parquet=args.parquet, gantt_window=args.gantt_window, chart_format=args.format, traces=record
        )
        _record_out(out_dir, written)
        # With --json, stdout carries the JSON object and nothing else.
        note = sys.stderr if args.json else sys.stdout
        files = ", ".join(p.name for p in written)
        traces = f" ({_plural(len(result.jobs), 'job')}, {_plural(len(result.segments), 'segment')})" if record else ""
        print(f"wrote {files} to {out_dir}/{traces}", file=note)
        left_out = [
            _plural(n, what)
            for n, what in ((result.jobs_left_out, "job"), (result.segments_left_out, "segment"), (result.waits_left_out, "wait"))
            if n > 0
        ]
        if left_out:
            limit = result.summary["traces"]["limit"]
            print(
                f"note: a trace keeps at most {limit:,} rows, the first to end; left out: "
                f"{' and '.join(left_out)} (the per-task totals count every job; summary.json records this)",
                file=note,
            )
    return 0


def _cmd_run_linux(args: argparse.Namespace) -> int:
    from critmem import linux

    if args.seed is not None or args.horizon_ms is not None or args.parquet or args.gantt_window is not None or args.format != "png":
        raise CliError("--seed, --horizon-ms, --parquet, --gantt-window and --format are for the simulator; on Linux use --duration")
    read_path(args.file)  # a missing or unreadable file is the usual one-line OSError
    duration_s = linux.parse_duration_s(args.duration if args.duration is not None else "60s")
    out_dir = _prepare_out_dir(args.out) if args.out is not None else None
    if out_dir is not None:
        _claim_out_dir(args.out, out_dir, args.force)
    summary = linux.run_scenario(args.file, duration_s, args.controller, args.controller_config)
    if args.json:
        sys.stdout.write(json.dumps(summary, allow_nan=False) + "\n")
    else:
        _print_linux_run(summary)
    if out_dir is not None:
        try:
            summary_json = out_dir / "summary.json"
            summary_json.write_text(json.dumps(summary, allow_nan=False, indent=1) + "\n", encoding="utf-8")
            written = [
                summary_json,
                linux.write_jobs_csv(summary, out_dir / "jobs.csv"),
                linux.write_timeline_csv(summary, out_dir / "timeline.csv"),
                linux.plot_timeline(summary, out_dir / "memory.png"),
            ]
        except OSError as e:
            raise CliError(f"cannot write results to {str(out_dir)!r}: {e.strerror or e}") from None
        _record_out(out_dir, written)
        note = sys.stderr if args.json else sys.stdout
        print(f"wrote {', '.join(p.name for p in written)} to {out_dir}/ ({_plural(len(summary['jobs']), 'job')})", file=note)
        traces = summary["traces"]
        if traces["jobs_left_out"] > 0:
            print(
                f"note: a run keeps at most {traces['limit']:,} job rows, the first released; left out: "
                f"{_plural(traces['jobs_left_out'], 'job')} (the per-task totals count every job; summary.json records this)",
                file=note,
            )
    return 0


def _print_linux_run(summary: dict[str, Any]) -> None:
    """The simulator's per-task table and PSI table, for real processes."""
    console = _console()
    control = summary["control"]
    console.print(
        _text(
            f"{summary['scenario']}: Linux ({summary['backend']}) on {_plural(summary['cpus'], 'CPU')}, "
            f"{summary['horizon_ms'] / 1000:.1f} s under {summary['controller']}, {control['ticks']} ticks of "
            f"{control['interval_ms']:g} ms, {control['tick_cost_mean_us']:.0f} us each ({control['tick_cpu_mean_us']:.0f} us of CPU)"
        )
    )
    extra: list[_Column] = [("MiB/s", lambda t: _fmt(t["verified_mib_per_s"], digits=1))]
    # Only when a command wrote its progress file: most runs have no such task.
    if any(t.get("work_units_per_s") is not None for t in summary["tasks"]):
        extra.append(("work units/s", lambda t: _fmt(t["work_units_per_s"], digits=1)))
    extra.append(("checksum fails", lambda t: _fmt(t["checksum_failures"])))
    _print_tasks(console, summary["tasks"], place="group", extra=extra)
    _print_groups(console, _linux_group_rows(summary), throughput="MiB/s")
    groups = [
        [
            g["name"],
            _fmt(g["memory_some_us"] / 1000),
            _fmt(g["memory_full_us"] / 1000),
            _fmt(g["io_some_us"] / 1000),
            _fmt(g["io_full_us"] / 1000),
        ]
        for g in summary["memory"]["groups"]
    ]
    console.print(_text("stall totals per group (PSI: some = at least one task stalled, full = all non-idle tasks stalled)"))
    console.print(
        _row_table(
            console,
            ["group", "memory some ms", "memory full ms", "io some ms", "io full ms"],
            groups,
            optional=["memory full ms", "io full ms"],
        )
    )
    console.print(
        _text(
            f"limit writes {control['writes_ok']} ok, {control['writes_failed']} refused by the kernel, writes' CPU "
            f"{control['write_cpu_ms']:.1f} ms (the kernel's reclaim to the limits); "
            f"OOM rescues {control['oom_rescues']}; everything restored ({control['removed_dirs']} cgroup directories removed)"
        )
    )


# ---------------------------------------------------------------------------------------
# critmem agent, critmem swap


def _cmd_agent(args: argparse.Namespace) -> int:
    from critmem import linux

    duration_s = None if args.duration is None else linux.parse_duration_s(args.duration)
    argv = linux.agent_argv(args.config, args.dry_run, duration_s, args.log_level)
    sys.stdout.flush()
    sys.stderr.flush()
    # exec: the daemon gets SIGTERM/SIGINT itself and restores everything before it exits.
    os.execv(argv[0], argv)


def _cmd_agent_config(args: argparse.Namespace) -> int:
    from critmem import linux

    read_path(args.file)  # a missing or unreadable file is the usual one-line OSError
    text = linux.agent_config_from_scenario(args.file)
    if args.out is None:
        sys.stdout.write(text)
        return 0
    try:
        with open(args.out, "x" if not args.force else "w", encoding="utf-8") as f:
            f.write(text)
    except FileExistsError:
        raise CliError(f"{args.out}: exists; give --force to replace it") from None
    except OSError as e:
        raise CliError(f"cannot write {args.out!r}: {e.strerror or e}") from None
    print(f"wrote {args.out}: start the agent with `sudo critmem agent --config {args.out}`")
    return 0


def _cmd_hires(args: argparse.Namespace) -> int:
    from critmem import linux

    duration_s = None if args.duration is None else linux.parse_duration_s(args.duration)
    argv = linux.hires_argv(
        args.action,
        args.tree,
        name=args.name,
        duration_s=duration_s,
        in_subsystem=args.in_subsystem,
        as_json=args.json,
        command=args.command_after,
    )
    linux.require_root(f"critmem hires {args.action}")
    sys.stdout.flush()
    sys.stderr.flush()
    # exec: SIGINT/SIGTERM reach it, and it removes the tree before it exits.
    os.execv(argv[0], argv)


def _program_name(command: Sequence[str]) -> str:
    """`python -m pkg.app` → app, `python dir/tool.py` → tool, `./server` → server."""
    if Path(command[0]).name.startswith("python"):
        if "-m" in command[1:-1]:
            return command[command.index("-m") + 1].rsplit(".", 1)[-1]
        script = next((w for w in command[1:] if not w.startswith("-")), None)
        if script is not None:
            return Path(script).stem
    return Path(command[0]).name


def _cmd_profile(args: argparse.Namespace) -> int:
    from critmem import linux, profiling

    command = tuple(args.command_after)
    if not command:
        raise CliError("profile needs the program after --, e.g. critmem profile -- ./my-app --flag")
    if not 0 < args.ratio < 1:
        raise CliError(f"--ratio must be between 0 and 1 (got {args.ratio:g})")
    if not args.max_slowdown > 1 or not math.isfinite(args.max_slowdown):
        raise CliError(f"--max-slowdown must be a number above 1 (got {args.max_slowdown:g})")
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise CliError(f"--out {args.out}: exists and is not a folder")
    if out.is_dir() and any(out.iterdir()) and not args.force:
        raise CliError(f"--out {args.out}: folder is not empty (--force writes into it)")
    name = args.name or _program_name(command)
    opt = profiling.Options(
        command=command,
        name=name,
        mode="units" if args.units else "jobs",
        period_ms=args.period_ms,
        deadline_ms=args.deadline_ms or args.period_ms,
        jobs=args.jobs,
        units_duration_s=linux.parse_duration_s(args.units_duration),
        steps=args.steps,
        ratio=args.ratio,
        max_slowdown=args.max_slowdown,
        interval_ms=20.0,
        swap_bytes=linux.parse_size_bytes(args.swap_size),
    )
    console = _console()
    result = profiling.profile(opt, out, progress=lambda line: print(f"critmem profile: {line}", file=sys.stderr, flush=True))
    if args.json:
        print(json.dumps(result))
        return 0
    f7 = result["fig7"]
    console.print(
        _text(
            f"{name}: BCET {result['bcet_ms']:.1f} ms; memory min/avg/max {result['memory_mb']['min']}/{result['memory_mb']['avg']}/{result['memory_mb']['max']} MiB"
        )
    )
    if f7 is not None:
        console.print(_text(f"Fig. 7 fit: exec = {f7['slope']:.3f}·stall + {f7['intercept_ms']:.1f} ms (R² {f7['r_squared']:.3f})"))
    for r in result["limits"]:
        lim = "none" if r["limit_mb"] is None else f"{r['limit_mb']:.0f} MiB"
        console.print(
            _text(
                f"  limit {lim}: exec {r['exec_ms']:.0f} ms, stall {r['stall_ms']:.0f} ms, simulated {r['simulated_exec_ms']:.0f} ms ({r['sim_error_pct']:+.1f} %)"
            )
        )
    console.print(_text(f"wrote {out}/report.md, fig2.png, fig7.png, profile.json, workload.toml"))
    return 0


def _cmd_swap(args: argparse.Namespace) -> int:
    from critmem import linux

    if args.action != "setup":
        # Silently ignored, a `teardown --path X` would look as if it removed X.
        given = [flag for flag, value in (("--size", args.size), ("--path", args.path)) if value is not None]
        if given:
            raise CliError(
                f"swap {args.action} takes no {' or '.join(given)} (only setup does); {args.action} acts on the swapfile the state file records"
            )
    if args.action == "setup":
        if args.size is None:
            raise CliError("swap setup needs --size (e.g. --size 4G)")
        result = linux.swap_setup(linux.parse_size_bytes(args.size), args.path, args.state_file)
        print(f"swapfile {result['swapfile']} ({result['size_bytes'] / 2**30:.2f} GiB) enabled; `critmem swap teardown` removes it")
    elif args.action == "teardown":
        result = linux.swap_teardown(args.state_file)
        removed = result["removed"]
        print("critmem has no swapfile; nothing to do" if removed is None else f"swapfile {removed} disabled and deleted")
    else:
        result = linux.swap_status(args.state_file)
        print(json.dumps(result))
    return 0


# ---------------------------------------------------------------------------------------
# critmem analyze


def _print_analysis(result: AnalysisResult) -> None:
    console = _console()
    r = result.report
    console.print(
        _text(f"{r['scenario']}: {r['scheduler']} on {_plural(r['cpus'], 'CPU')}, total utilization {_fmt(r['total_utilization'])}")
    )
    task_rows = [
        [
            t["name"],
            _fmt(t["cpu"]),
            _fmt(t["utilization"]),
            _fmt(t["wcet_ms"]),
            _fmt(t["period_ms"]),
            _fmt(t["deadline_ms"]),
            _fmt(t["priority_rank"]),
            _fmt(t["response_time_ms"]),
            _fmt(t["schedulable"]),
            _fmt(t["tardiness_bound_ms"]),
        ]
        for t in r["tasks"]
    ]
    columns = ["task", "cpu", "util", "wcet ms", "period ms", "deadline ms", "prio rank",
               "response ms", "meets deadline", "tardiness bound ms"]  # fmt: skip
    console.print(_table(columns, task_rows))
    if r.get("resources") is not None:
        _print_blocking(console, r)
    if r.get("servers") is not None:
        _print_server_analysis(console, r["servers"])
    test_rows = [[t["name"], _fmt(t["cpu"]), _words(t["verdict"]), t["detail"]] for t in r["tests"]]
    console.print(_table(["test", "cpu", "verdict", "detail"], test_rows, left=4))
    console.print(_text(f"verdict: {_words(result.verdict)}"))
    for line in r.get("not_covered", []):
        console.print(_text(f"not covered: {line}"))


def _print_warnings(lines: Sequence[str]) -> None:
    """The scenario's warnings on stderr, so `--json` output stays one object."""
    for line in lines:
        print(f"warning: {line}", file=sys.stderr)


def _section(sec: dict[str, Any]) -> str:
    within = f" in {sec['within']}" if sec["within"] is not None else ""
    return f"{sec['resource']}×{sec['units']} {_fmt(sec['duration_ms'])}{within}"


def _print_blocking(console: Console, r: dict[str, Any]) -> None:
    """Per task: its critical sections (resource×units, ms held), blocking term and bound."""
    rows = []
    for t, b in zip(r["tasks"], r["resources"]["tasks"], strict=True):
        sections = ", ".join(_section(sec) for sec in b["sections"]) or "-"
        rows.append([t["name"], sections, _fmt(b["blocking_ms"]), _fmt(t["response_time_ms"]), _fmt(t["schedulable"])])
    console.print(_table(["task", "critical sections (ms held)", "blocking ms", "response ms", "meets deadline"], rows, left=2))
    for b in r["resources"]["tasks"]:
        if b["blocking_ms"] is None and b["note"]:
            console.print(_text(f"{b['name']}: {b['note']}"))


def _print_server_analysis(console: Console, servers: list[dict[str, Any]]) -> None:
    """Per server: budget and period, what it is guaranteed and the supply its children see;
    with a server memory reservation, each server's reservation."""
    columns = ["server", "parent", "kind", "cpu", "budget ms", "period ms", "response ms", "guaranteed ms",
               "supply blackout ms", "backlogged share", "whole budget"]  # fmt: skip
    keys = ["cpu", "budget_ms", "period_ms", "response_ms", "guaranteed_budget_ms", "supply_blackout_ms", "backlogged_share"]
    memory = any("memory_reserved_mb" in s for s in servers)
    if memory:
        columns.append("memory MiB")
    rows = []
    for s in servers:
        whole = "-" if s["kind"] == "level" else _fmt(s["verdict"] == "schedulable")
        reserve = [_memory_reserve(s.get("memory_reserved_mb"), s.get("memory_kind"))] if memory else []
        rows.append([s["name"], s["parent"], s["kind"], *(_fmt(s[k]) for k in keys), whole, *reserve])
    console.print(_table(columns, rows, left=3))
    for s in servers:
        if s["detail"]:
            console.print(_text(f"{s['name']}: {s['detail']}"))


def _cmd_analyze(args: argparse.Namespace) -> int:
    src = read_path(args.file)
    if args.json:
        report_json, warnings = _core.analyze(src.text, src.name, src.format)
        _print_warnings(warnings)
        sys.stdout.write(report_json + "\n")
        return _check_verdicts(json.loads(report_json)["tests"]) if args.check else 0
    from critmem.api import _analyze_source

    result = _analyze_source(src, warn=False)
    _print_warnings(result.warnings)
    _print_analysis(result)
    return _check_verdicts(result.report["tests"]) if args.check else 0


def _check_verdicts(tests: Sequence[dict[str, Any]]) -> int:
    """`analyze --check`: 1, with the failing tests named on stderr, if any test fails."""
    failed = [t for t in tests if t["verdict"] in _FAILING_VERDICTS]
    if not failed:
        return 0
    names = ", ".join(t["name"] if t["cpu"] is None else f"{t['name']} (CPU {t['cpu']})" for t in failed)
    print(f"critmem: check failed: {_visible(names)}", file=sys.stderr)
    return 1


def _cmd_validate(args: argparse.Namespace) -> int:
    failures: list[str] = []
    for name in args.files:
        try:
            src = read_path(name)
            loaded = json.loads(_core.validate(src.text, src.name, src.format))
        except ScenarioError as e:
            failures.append(str(e))
            continue
        except OSError as e:
            failures.append(f"{e.filename if e.filename is not None else name}: {e.strerror or e}")
            continue
        _print_warnings(loaded["warnings"])
        print(
            _visible(
                f"{name}: ok: {loaded['scheduler']} on {_plural(loaded['cpus'], 'CPU')}, {_plural(loaded['tasks'], 'task')}, "
                f"horizon {loaded['horizon_ms']:g} ms, seed {loaded['seed']}"
            )
        )
    if not failures:
        return 0
    # Still one line, however many files fail.
    if len(failures) == 1:
        raise CliError(failures[0])
    raise CliError(f"{len(failures)} files do not load: " + "; ".join(failures))


def _cmd_init(args: argparse.Namespace) -> int:
    from critmem.starter import STARTER

    if args.file == "-":
        sys.stdout.write(STARTER)
        return 0
    path = Path(args.file)
    try:
        with path.open("x" if not args.force else "w", encoding="utf-8") as f:
            f.write(STARTER)
    except FileExistsError:
        raise CliError(f"{args.file}: exists; give --force to replace it") from None
    except OSError as e:
        raise CliError(f"cannot write {args.file!r}: {e.strerror or e}") from None
    print(f"wrote {args.file}: run it with `critmem run {args.file}`")
    return 0


def _cmd_generate(args: argparse.Namespace) -> int:
    import numpy as np

    from critmem import generate as gen

    try:
        low, high, log = gen.parse_periods(args.periods)
    except ValueError as e:
        raise CliError(f"argument --periods: {e}") from None
    if (args.tasks is None) == (args.schedcat is None):
        raise CliError("give --tasks N with --utilization U, or --schedcat NAME with --utilization as its cap")
    if args.schedcat is not None and args.schedcat not in gen.UTILIZATIONS:
        raise CliError(f"argument --schedcat: {args.schedcat!r} is not one of {', '.join(gen.UTILIZATIONS)}")
    if args.count < 1 or (args.tasks is not None and args.tasks < 1) or not math.isfinite(args.utilization) or args.utilization <= 0:
        raise CliError("--count and --tasks must be at least 1 and --utilization a positive number")
    rng = np.random.default_rng(args.seed)
    sets: list[str] = []
    for _ in range(args.count):
        try:
            if args.schedcat is not None:
                u = gen.schedcat_utilizations(args.schedcat, args.utilization, rng)
                if len(u) == 0:
                    raise ValueError(f"the first task drawn from {args.schedcat} already exceeds the cap {args.utilization}")
            elif args.method == "uunifast":
                u = (
                    gen.uunifast_discard(args.tasks, args.utilization, rng)
                    if args.utilization > 1
                    else gen.uunifast(args.tasks, args.utilization, rng)
                )
            else:
                u = gen.randfixedsum(args.tasks, args.utilization, rng)
        except ValueError as e:
            raise CliError(str(e)) from None
        periods = gen.periods_ms(len(u), rng, low_ms=low, high_ms=high, log_uniform=log)
        horizon = args.horizon_ms if args.horizon_ms is not None else gen.default_horizon_ms(periods)
        scenario = gen.taskset_scenario(u, periods, scheduler=args.scheduler, cpus=args.cpus, horizon_ms=horizon, seed=args.seed)
        text = json.dumps(scenario, indent=1) + "\n" if args.format == "json" else gen.to_toml(scenario)
        # What is written always loads (e.g. a scheduler kind that does not exist does not).
        _core.validate(text, "<generated>", args.format)
        sets.append(text)
    if args.out is None:
        if args.count != 1:
            raise CliError("--count above 1 needs --out DIR")
        sys.stdout.write(sets[0])
        return 0
    out_dir = _prepare_out_dir(args.out)
    names = [out_dir / f"set-{i:04d}.{args.format}" for i in range(len(sets))]
    if any(p.exists() for p in names):
        raise CliError(f"cannot write task sets to {args.out!r}: set-*.{args.format} files are already there")
    try:
        for path, text in zip(names, sets, strict=True):
            path.write_text(text, encoding="utf-8")
    except OSError as e:
        raise CliError(f"cannot write task sets to {args.out!r}: {e.strerror or e}") from None
    print(f"wrote {_plural(len(sets), 'task set')} to {out_dir}/")
    return 0


# Verdicts `analyze --check` fails on; "unknown" passes, as no test could decide.
_FAILING_VERDICTS = ("not_schedulable", "unbounded_tardiness")


# ---------------------------------------------------------------------------------------
# critmem reproduce


def _print_reproduction(summary: dict[str, Any]) -> None:
    """The headline numbers beside the paper's, for people; the report has everything."""
    console = _console()
    if summary.get("paper") == "hires":
        _print_hires_headline(console, summary)
        return
    if summary.get("paper") == "mc2":
        _print_mc2_headline(console, summary)
        return
    if summary.get("paper") == "sara" and summary.get("platform") == "linux":
        _print_sara_linux_headline(console, summary)
        return
    mins, paper_mins = summary.get("min_reservation_mb", {}), summary.get("paper_min_reservation_mb", {})
    if mins:
        rows = [[k, _fmt(v), _fmt(paper_mins.get(k))] for k, v in mins.items()]
        console.print(_text("minimum schedulable reservation (MB)"))
        console.print(_table(["task", "model", "paper"], rows))
    table3 = summary.get("table3", {})
    if table3:
        rows = []
        for set_key, techs in table3.items():
            for tech, c in techs.items():
                rows.append(
                    [
                        set_key, tech, " + ".join(str(x) for x in c["reservations_mb"]), _fmt(c["total_mb"]),
                        _fmt(c.get("formula_mb")), " + ".join(str(x) for x in c["paper_reservations_mb"]), _fmt(c["paper_total_mb"]),
                    ]
                )  # fmt: skip
        console.print(_text("physical memory usage (Table III)"))
        console.print(
            _table(["task set", "technique", "reserve MB", "total MB", "formula MB", "paper reserve MB", "paper total MB"], rows, left=2)
        )
    misses = summary.get("tau1_misses", {})
    if misses:
        periods = summary.get("tau2_periods_with_tau1_miss", {})
        steady = summary.get("tau1_steady_misses", {})
        rows = [
            [k, _fmt(v), _fmt(steady.get(k)), "-" if k not in periods else f"{periods[k][0]} of {periods[k][1]}"] for k, v in misses.items()
        ]
        console.print(_text("tau1 with tau2 (Fig. 9)"))
        console.print(_table(["policy", "tau1 misses", "after warm-up", "tau2 periods with a miss"], rows))
    _print_sara_headline(console, summary)
    _print_tmem_headline(console, summary)
    ops = summary.get("table2_ns", {})
    if ops:
        cols = list(next(iter(ops.values())))
        rows = [[op, *(_fmt(v.get(c), 1) for c in cols)] for op, v in ops.items()]
        console.print(_text("memory operations, wall-clock ns of the simulator's data structures (Table II)"))
        console.print(_table(["operation", *cols], rows))


def _print_sara_headline(console: Console, summary: dict[str, Any]) -> None:
    hit, thr = summary.get("mean_deadline_hit_ratio", {}), summary.get("mean_nonrt_throughput", {})
    if not hit:
        return
    paper_hit = {"sara": summary.get("paper_sara_hit_ratio"), **summary.get("paper_baseline_hit_ratio", {})}
    rows = [[c, _fmt(hit.get(c)), _fmt(paper_hit.get(c)), _fmt(thr.get(c))] for c in hit]
    step_up = summary.get("sara_step_up", {})
    if step_up.get("mean_deadline_hit_ratio") is not None:
        label = f"sara, x_up {step_up['step_up_bytes'] // 1_048_576} MiB (not the paper's rule)"
        rows.append([label, _fmt(step_up["mean_deadline_hit_ratio"]), "-", _fmt(step_up.get("mean_nonrt_throughput"))])
    console.print(
        _text(
            f"mean over the {len({(c['workload'], c['memory_pct'], c['ssd']) for c in summary.get('configs', [])})} configurations (Fig. 11)"
        )
    )
    console.print(_table(["controller", "deadline-hit ratio", "paper", "non-rt throughput /s"], rows, left=1))
    gains = summary.get("sara_throughput_gain", {})
    if gains:
        rows = [[b, _fmt(g.get("ratio_of_means")), _fmt(g.get("paper_mean"))] for b, g in gains.items()]
        console.print(_text("SARA's non-real-time throughput over the baseline's"))
        console.print(_table(["baseline", "model", "paper"], rows, left=1))
    fig7 = summary.get("fig7", {})
    if fig7:
        rows = [[w, _fmt(f.get("slope")), _fmt(f.get("intercept_ms")), _fmt(f.get("configured_bcet_ms"))] for w, f in fig7.items()]
        console.print(_text("execution time against stall per period (Fig. 7)"))
        console.print(_table(["workload", "slope", "intercept ms", "configured BCET ms"], rows, left=1))


def _print_hires_headline(console: Console, summary: dict[str, Any]) -> None:
    """Fig. 6's shares per phase on each platform, and the costs against depth."""
    shares: dict[tuple[int, str], dict[str, Any]] = {}
    for platform, rows in summary["fig6"].items():
        for r in rows:
            cell = shares.setdefault(
                (r["phase"], r["name"]), {"reserved": r["budget"] / r["period"], "budget": f"{r['budget']:g}/{r['period']:g}"}
            )
            cell[platform] = r["share"]
    if shares:
        console.print(_text("CPU share of one CPU per phase (Fig. 6)"))
        rows = [
            [str(phase), name, c["budget"], _fmt(c["reserved"]), _fmt(c.get("sim")), _fmt(c.get("linux"))]
            for (phase, name), c in sorted(shares.items())
        ]
        console.print(_table(["phase", "subsystem", "budget/period", "reserved", "simulator", "linux"], rows, left=2))
    if summary.get("fig5"):
        console.print(_text("timer-event latency against depth, simulator (Fig. 5)"))
        console.print(_table(["depth", "mean µs"], [[str(r["depth"]), _fmt(r["mean_us"], 2)] for r in summary["fig5"]]))
    for key, label in (
        ("event_latency", "event latency"),
        ("page_map", "page map"),
        ("page_unmap", "page unmap"),
        ("http", "HTTP connections/s"),
    ):
        rows = summary.get("depth", {}).get(key)
        if rows:
            console.print(_text(f"{label} on Linux against cgroup depth, ratio to depth 0"))
            console.print(_table(["depth", "ratio"], [[str(r["depth"]), _fmt(r["ratio"])] for r in rows]))


def _print_tmem_headline(console: Console, summary: dict[str, Any]) -> None:
    fig6 = summary.get("fig6", [])
    if not fig6:
        return
    sizes = sorted({r["memory_above_min"] for r in fig6 if r["scheme"] not in ("min", "max")})
    schemes = list(dict.fromkeys(r["scheme"] for r in fig6))
    rows = []
    for scheme in schemes:
        by = {r["memory_above_min"]: r["max_tardiness_ms"] for r in fig6 if r["scheme"] == scheme}
        if scheme in ("min", "max"):
            ((x, v),) = by.items()
            rows.append([f"{scheme} (at +{_fmt(x)})", *[_fmt(v) if s == sizes[0] else "" for s in sizes]])
        else:
            rows.append([scheme, *[_fmt(by.get(s)) for s in sizes]])
    console.print(_text("mean max tardiness (ms) against transient memory above the minimum (Fig. 6a)"))
    console.print(_table(["scheme", *[f"+{_fmt(s)}" for s in sizes]], rows, left=1))
    console.print(_text(f"tmem's slope over greedy's: {_fmt(summary.get('slope_ratio'))} (paper: 4)"))
    table4 = summary.get("table4", [])
    if table4:
        rows = [
            [r["policy"], _fmt(r["response_us"]), _fmt(r["paper_response_us"]), _fmt(r["tmem_above_min"]), _fmt(r["paper_tmem_above_min"])]
            for r in table4
        ]
        console.print(_text("request-response service (Table IV)"))
        console.print(_table(["policy", "response µs", "paper", "TMEM above min", "paper"], rows, left=1))


def _cmd_reproduce(args: argparse.Namespace) -> int:
    paper = get(args.paper)
    if not paper.sweeps and (args.scheduler is not None or args.workers is not None):
        raise CliError(
            f"{paper.name} runs its simulations one after another (each depends on the last); --scheduler and --workers are for "
            + " and ".join(p.name for p in PAPERS.values() if p.sweeps)
        )
    platforms: tuple[str, ...] | None = None
    if args.platform is not None:
        if args.platform not in paper.platforms:
            others = " and ".join(p.name for p in PAPERS.values() if args.platform in p.platforms)
            raise CliError(
                f"{paper.name} runs on the {' and '.join(paper.platforms)} platform only; --platform {args.platform} is for {others}"
            )
        platforms = (args.platform,)
    options: dict[str, Any] = {}
    if args.periods is not None:
        if "periods" not in paper.options or platforms != ("linux",):
            raise CliError("--periods is for sara --platform linux (the simulator's length is set by --quick)")
        options["periods"] = args.periods
    if "linux" in (platforms or paper.defaults) and os.geteuid() != 0:
        raise CliError(
            f"not root: the Linux parts of reproduce {paper.name} apply cgroups and need root; run it with sudo, or --platform sim for the simulator's parts alone"
        )
    out_dir = _prepare_out_dir(args.out if args.out is not None else str(paper.default_out))

    def run(progress: Progress, executor: Executor | None) -> Reproduction:
        return paper.run(out_dir, quick=args.quick, progress=progress, executor=executor, platforms=platforms, **options)

    # On this machine alone, nothing is simulated on a sweep.
    return _run_reproduction(args, out_dir, run, sweeps=paper.sweeps and platforms != ("linux",))


def _run_reproduction(
    args: argparse.Namespace, out_dir: Path, run: Callable[[Progress, Executor | None], Reproduction], *, sweeps: bool
) -> int:
    """Runs a reproduction or study with a progress bar and the executor the arguments name,
    and prints its headline and checks (or its --json)."""
    from critmem.sweep import SCHEDULER_ENV, SweepError, executor_for

    started = time.monotonic()
    # The bar goes to stderr; with --json a script reads the output, so it stays quiet.
    progress = BarProgress() if sys.stderr.isatty() and not args.json else QuietProgress()
    try:
        executor = executor_for(args.scheduler, args.workers) if sweeps else None
        with progress:
            reproduction = run(progress, executor)
    except SweepError as e:
        where = f" (from {SCHEDULER_ENV})" if args.scheduler is None and os.environ.get(SCHEDULER_ENV) else ""
        raise CliError(f"{e}{where}") from None
    elapsed = time.monotonic() - started
    note = sys.stderr if args.json else sys.stdout
    if args.json:
        sys.stdout.write(json.dumps(reproduction.summary, allow_nan=False) + "\n")
    else:
        _print_reproduction(reproduction.summary)
        _print_checks(reproduction.checks)
    files = ", ".join(p.relative_to(out_dir).as_posix() if p.is_relative_to(out_dir) else p.name for p in reproduction.files)
    print(f"wrote {files} to {out_dir}/ in {elapsed:.1f} s", file=note)
    return _check_reproduction(reproduction.checks) if args.check else 0


def _cmd_study(args: argparse.Namespace) -> int:
    """`critmem study mc2`: the MC² schedulability study, with its plan's knobs."""
    from dataclasses import replace

    from critmem.reproduce import mc2
    from critmem.reproduce.mc2 import study

    plan = study.quick_plan(args.seed) if args.quick else study.Plan(seed=args.seed)
    try:
        if args.scenarios:
            chosen = set(study.select_scenarios(args.scenarios))
            scenarios = [s for s in plan.scenario_list() if s in chosen]
            if not scenarios:
                raise CliError(f"--scenarios {' '.join(args.scenarios)}: no scenario{' of --quick' if args.quick else ''} matches")
            plan = replace(plan, scenarios=tuple(scenarios))
        plan = replace(plan, step=args.step if args.step is not None else plan.step)
        plan.validate()
    except ValueError as e:
        raise CliError(str(e)) from None
    out_dir = _prepare_out_dir(args.out if args.out is not None else str(Path("results") / "study" / "mc2"))

    def run(progress: Progress, executor: Executor | None) -> Reproduction:
        return mc2.reproduce(out_dir, progress=progress, plan=plan, executor=executor)

    return _run_reproduction(args, out_dir, run, sweeps=True)


def _print_sara_linux_headline(console: Console, summary: dict[str, Any]) -> None:
    rows = [
        [
            c["workload"], f"{c['memory_pct']} %", c["controller"], _fmt(c["hit_ratio"]), _fmt(c["simulated_hit_ratio"]),
            _fmt(summary["paper_hit_ratio"].get(c["controller"])), _fmt(c["throughput_per_s"]), _fmt(c["simulated_throughput_per_s"]),
        ]
        for c in summary["configs"]
    ]  # fmt: skip
    console.print(_text("Fig. 11 on this machine (the shipped apps beside graph), with the simulator's prediction"))
    console.print(
        _table(["workload", "memory", "controller", "hit ratio", "simulated", "paper", "graph units/s", "simulated"], rows, left=3)
    )


def _print_mc2_headline(console: Console, summary: dict[str, Any]) -> None:
    console.print(_text(f"schedulable-utilisation areas over {_plural(summary['scenarios'], 'scenario')}"))
    console.print(_table(["scheme", "SUA"], [[s, _fmt(v)] for s, v in summary["sua"].items()], left=1))
    rows = [[k, _fmt(summary["ratios"].get(k)), _fmt(v, 2)] for k, v in summary["paper_ratios"].items()]
    console.print(_text("SUA ratios"))
    console.print(_table(["ratio", "model", "paper"], rows, left=1))


def _print_checks(checks: Sequence[Check]) -> None:
    """The report's acceptance checks: what each expects, what this run measured, and whether it holds."""
    if not checks:
        return
    console = _console()
    console.print(_text("acceptance checks"))
    rows = [[c.name, c.expected, c.measured, "yes" if c.passed else "NO"] for c in checks]
    console.print(_table(["check", "expected", "measured", "holds"], rows, left=3))


def _check_reproduction(checks: Sequence[Check]) -> int:
    """`reproduce --check`: 1, with the checks that do not hold named on stderr, if any does not."""
    from critmem.reproduce.checks import failed

    bad = failed(checks)
    if not bad:
        return 0
    names = "; ".join(f"{c.name} (expected {c.expected}, measured {c.measured})" for c in bad)
    print(f"critmem: check failed: {_visible(names)}", file=sys.stderr)
    return 1


# ---------------------------------------------------------------------------------------
# critmem schema and critmem examples


def _cmd_schema(args: argparse.Namespace) -> int:
    sys.stdout.write(output_schemas.schema_command_output(args.output))
    return 0


def _cmd_examples(args: argparse.Namespace) -> int:
    from critmem import examples

    if args.action is None:
        rows = [[e.name, e.summary] for e in examples.bundled()]
        _console().print(_table(["example", "what it shows"], rows, left=2))
        return 0
    try:
        written = examples.copy(args.name, Path(args.dest) if args.dest is not None else Path())
    except examples.ExampleError as e:
        raise CliError(str(e)) from None
    print(f"wrote {written}: run it with `critmem run {written}`")
    return 0


# ---------------------------------------------------------------------------------------
# Parser and entry point

_DESCRIPTION = """\
critmem: predictable memory management for mixed-criticality real-time systems.
Simulates scenario files (TOML) deterministically and analyses their schedulability."""

_EPILOG = """\
examples:
  critmem examples
  critmem examples copy quickstart
  critmem run quickstart.toml
  critmem run quickstart.toml --seed 7 --out results/quickstart
  critmem examples copy rm-textbook
  critmem run rm-textbook.toml --json
  critmem analyze rm-textbook.toml
  critmem reproduce shared-pages
  critmem examples copy linux-sara
  sudo critmem run linux-sara.toml --platform linux --duration 60s
  sudo critmem swap setup --size 4G

`critmem examples copy NAME` writes a bundled example to the current folder (a checkout
has them all in examples/).

Errors print one line on stderr and exit with code 2."""

_RUN_EPILOG = """\
examples:
  critmem examples copy quickstart
  critmem run quickstart.toml
  critmem run quickstart.toml --seed 7 --horizon-ms 500 --out results/q7
  critmem examples copy rm-textbook
  critmem run rm-textbook.toml --json | python3 -m json.tool

--out DIR writes jobs.csv (one row per job), segments.csv (one row per stretch a job
ran on a CPU), summary.json (as --json prints it) and gantt.png; for a scenario with
[memory], also memory_timeline.csv and memory.png (resident pages per reservation and
per task, and reserved physical memory, over time); with [control], also
control_timeline.csv (one row per controller tick per group: limit, usage and PSI
totals), and memory.png draws each group's limit beside its usage. With --platform linux, --out DIR
writes summary.json, jobs.csv (one row per job of each task whose jobs are counted),
timeline.csv and memory.png (usage and limit of every group over time)."""

_ANALYZE_EPILOG = """\
examples:
  critmem examples copy rm-textbook
  critmem analyze rm-textbook.toml
  critmem examples copy partitioned-fp
  critmem analyze partitioned-fp.toml --json
  critmem examples copy overload
  critmem analyze overload.toml --check   # exit 1: not schedulable

What the analyses leave out (page faults and swap waits under [memory], a [control]
controller) is listed under "not covered" (`not_covered` in --json); `critmem run` shows
its effect."""


def _reproduce_epilog() -> str:
    papers = "\n".join(f"  {p.name:<14} {p.summary}" for p in PAPERS.values())
    return f"""\
papers:
{papers}

examples:
  critmem reproduce shared-pages
  critmem reproduce shared-pages --quick --out /tmp/sp
  critmem reproduce shared-pages --json | python3 -m json.tool
  critmem reproduce sara --quick
  critmem reproduce sara --scheduler tcp://127.0.0.1:8786 --out results/sara
  critmem reproduce tmem --quick --json
  critmem reproduce hires --platform sim --quick
  sudo critmem reproduce hires --json    # the simulator and this machine (nested cgroups)
  sudo critmem reproduce sara --platform linux --periods 500   # the shipped apps on this machine
  critmem reproduce mc2 --quick --json

sara, tmem and mc2 run their simulations on local worker processes (--workers N, default one per core) or
on a Dask cluster (--scheduler tcp://HOST:PORT, or CRITMEM_DASK_SCHEDULER), with the same
results either way; each result is kept in DIR/.critmem-sweep as it arrives, so a run that
was stopped resumes where it left off.

Writes report.md (each table and figure beside the paper's own numbers), PNG figures and
results.json (identical bytes for identical code) to DIR, by simulation only; shared-pages
also writes table2.md and table2.json (wall-clock timings of the simulator's memory operations, which vary
from run to run). Without --json the headline numbers are printed as tables."""


def build_parser() -> argparse.ArgumentParser:
    fmt = argparse.RawDescriptionHelpFormatter
    parser = _Parser(prog="critmem", description=_DESCRIPTION, epilog=_EPILOG, formatter_class=fmt)
    parser.add_argument("--version", action="version", version=f"critmem {__version__}")
    commands = parser.add_subparsers(title="commands", dest="command", metavar="COMMAND", required=True)

    run = commands.add_parser(
        "run",
        help="simulate a scenario and print a per-task table",
        description="Simulate FILE to its horizon and print one row per task: jobs released and\n"
        "completed, deadline misses, hit ratio, max and mean response time, max tardiness.",
        epilog=_RUN_EPILOG,
        formatter_class=fmt,
    )
    run.add_argument("file", metavar="FILE", help="scenario file (.toml, or .json with the same structure)")
    run.add_argument("--json", action="store_true", help="print the summary as one JSON object instead of the table")
    run.add_argument(
        "--out", metavar="DIR", type=_out_dir,
        help="also write jobs.csv, segments.csv, summary.json and gantt.png to DIR (with [memory]: memory_timeline.csv, memory.png; with [control]: control_timeline.csv; on linux: summary.json, jobs.csv, timeline.csv, memory.png)",
    )  # fmt: skip
    run.add_argument(
        "--parquet", action="store_true", help="with --out: also write the traces as Parquet (needs pyarrow, the parquet extra)"
    )
    run.add_argument(
        "--trace-limit", type=_int_at_least(0), metavar="N",
        help=f"with --out: keep at most N rows of each trace (jobs, segments, waits), the first to end (default and most: {MAX_TRACE_RECORDS:,}); summary.json and csv-metadata.json say what was left out",
    )  # fmt: skip
    run.add_argument(
        "--no-traces", action="store_true",
        help="with --out: write the summary, timelines and plots without the per-job and per-segment traces (no jobs.csv, segments.csv, waits.csv, trace.json, Gantt chart)",
    )  # fmt: skip
    run.add_argument(
        "--gantt-window", type=_gantt_window, metavar="START:END",
        help="with --out: the Gantt chart shows this stretch of the run, in ms (default: the whole run, or a leading window of a long one)",
    )  # fmt: skip
    run.add_argument(
        "--format", choices=["png", "svg", "pdf"], default="png",
        help="with --out: the Gantt chart's file format: gantt.png (default), gantt.svg or gantt.pdf",
    )  # fmt: skip
    run.add_argument(
        "--force", action="store_true",
        help="with --out: replace critmem's own files of an earlier run in DIR (other files stay; without it a folder that is not empty is refused)",
    )  # fmt: skip
    run.add_argument("--seed", type=_seed, metavar="N", help="seed for random execution times and arrivals (default: [run] seed, else 0)")
    run.add_argument(
        "--horizon-ms", type=_positive_ms, metavar="X",
        help="simulated time in ms (default: [run] horizon_ms, else one hyperperiod plus the largest offset)",
    )  # fmt: skip
    run.add_argument(
        "--platform", choices=["sim", "linux"], default="sim",
        help="sim (default): simulate; linux: run the tasks as real processes in cgroups (root)",
    )  # fmt: skip
    run.add_argument("--duration", metavar="D", help="linux: how long the processes run, e.g. 60s, 2m (default 60s)")
    run.add_argument(
        "--controller", metavar="NAME",
        help=f"linux: controller in place of the scenario's: {', '.join(c.name for c in controllers())}",
    )  # fmt: skip
    run.add_argument(
        "--controller-config",
        metavar="JSON",
        help="linux: the controller's parameters as a JSON object, e.g. '{\"limit_bytes\": 67108864}'",
    )
    run.set_defaults(handler=_cmd_run)

    analyze = commands.add_parser(
        "analyze",
        help="run the schedulability analyses for a scenario",
        description="Run the analyses that apply to FILE's scheduler (response-time analysis for\n"
        "fixed priorities, EDF utilization and processor-demand tests, the global-EDF\n"
        "bounded-tardiness condition, a cyclic table's slot supply) and print the per-task\n"
        "results, each test and the verdict.",
        epilog=_ANALYZE_EPILOG,
        formatter_class=fmt,
    )
    analyze.add_argument("file", metavar="FILE", help="scenario file (.toml or .json)")
    analyze.add_argument("--json", action="store_true", help="print the analysis report as one JSON object")
    analyze.add_argument(
        "--check",
        action="store_true",
        help="exit 1 when any test finds the task set not schedulable or its tardiness unbounded (for CI gates)",
    )
    analyze.set_defaults(handler=_cmd_analyze)

    validate = commands.add_parser(
        "validate",
        help="check scenario files without running them",
        description="Load each FILE as `run` would, without simulating it: print one line per file\n"
        "(scheduler, CPUs, tasks, horizon, seed) and any warnings; exit 2 if any file does not load.",
        epilog="examples:\n  critmem examples copy quickstart\n  critmem validate quickstart.toml",
        formatter_class=fmt,
    )
    validate.add_argument("files", metavar="FILE", nargs="+", help="scenario files (.toml or .json)")
    validate.set_defaults(handler=_cmd_validate)

    generate = commands.add_parser(
        "generate",
        help="write random task sets (UUniFast, RandFixedSum, SchedCAT distributions)",
        description="Write random implicit-deadline periodic task sets as scenario files: total\n"
        "utilisation split by RandFixedSum (uniform, default) or UUniFast (-Discard above 1),\n"
        "or drawn per task from a SchedCAT distribution up to a cap; periods uniform or\n"
        "log-uniform, rounded to whole ms. The same --seed gives the same sets.",
        epilog="examples:\n"
        "  critmem generate --tasks 8 --utilization 0.8 --periods log-uniform:10:1000 > set.toml\n"
        "  critmem generate --tasks 20 --utilization 3.2 --cpus 4 --scheduler gedf --count 100 --out sets/\n"
        "  critmem generate --schedcat uni-medium --utilization 2 --periods uni-moderate --cpus 2 --scheduler gedf",
        formatter_class=fmt,
    )
    generate.add_argument("--tasks", type=int, metavar="N", help="tasks per set (with --method)")
    generate.add_argument("--utilization", type=float, metavar="U", required=True, help="total utilisation (the cap with --schedcat)")
    generate.add_argument(
        "--method", choices=["randfixedsum", "uunifast"], default="randfixedsum", help="how U is split (default randfixedsum)"
    )
    generate.add_argument(
        "--schedcat", metavar="NAME",
        help="per-task utilisation distribution: uni-light, uni-medium, uni-heavy, exp-light, exp-medium, exp-heavy, bimo-light, bimo-medium, bimo-heavy",
    )  # fmt: skip
    generate.add_argument(
        "--periods",
        default="log-uniform:10:1000",
        metavar="SPEC",
        help="uniform:LO:HI, log-uniform:LO:HI (ms) or a SchedCAT name such as uni-moderate (default log-uniform:10:1000)",
    )
    generate.add_argument("--scheduler", default="rm", metavar="KIND", help="the sets' [scheduler] kind (default rm)")
    generate.add_argument("--cpus", type=int, default=1, metavar="M", help="the sets' CPUs (default 1)")
    generate.add_argument("--horizon-ms", type=_positive_ms, metavar="X", help="the sets' horizon (default one hyperperiod, at most 100 s)")
    generate.add_argument("--seed", type=_seed, default=0, metavar="N", help="random seed (default 0)")
    generate.add_argument("--count", type=int, default=1, metavar="K", help="how many sets (more than 1 needs --out)")
    generate.add_argument("--format", choices=["toml", "json"], default="toml", help="file format (default toml)")
    generate.add_argument("--out", metavar="DIR", type=_out_dir, help="write set-0000.toml, ... to DIR instead of one set to stdout")
    generate.set_defaults(handler=_cmd_generate)

    init = commands.add_parser(
        "init",
        help="write a commented starter scenario",
        description="Write a commented starter scenario (three periodic tasks under rate-monotonic\n"
        "scheduling, with pointers to memory, controllers, resources and servers) to FILE.",
        epilog="examples:\n  critmem init my.toml && critmem run my.toml\n  critmem init - | less",
        formatter_class=fmt,
    )
    init.add_argument(
        "file", metavar="FILE", nargs="?", default="scenario.toml", help="where to write it (default scenario.toml; - for stdout)"
    )
    init.add_argument("--force", action="store_true", help="replace FILE if it exists")
    init.set_defaults(handler=_cmd_init)

    reproduce = commands.add_parser(
        "reproduce",
        help="regenerate a paper's tables and figures by simulation",
        description="Regenerate PAPER's experiments from scratch in the simulator and write a report\n"
        "with the results beside the paper's own numbers.",
        epilog=_reproduce_epilog(),
        formatter_class=fmt,
    )
    reproduce.add_argument("paper", metavar="PAPER", choices=sorted(PAPERS), help=f"one of: {', '.join(sorted(PAPERS))}")
    reproduce.add_argument("--out", metavar="DIR", type=_out_dir, help="output folder (default: results/reproduce/PAPER)")
    reproduce.add_argument("--json", action="store_true", help="print the headline numbers as one JSON object")
    reproduce.add_argument("--quick", action="store_true", help="a reduced version: fewer periods and runs (a first look; under a minute)")
    reproduce.add_argument(
        "--check", action="store_true", help="exit 1 when one of the report's acceptance checks does not hold (naming it on stderr)"
    )
    reproduce.add_argument(
        "--scheduler", metavar="ADDRESS", type=_scheduler_address,
        help="sara, tmem, mc2: run the simulations on the Dask cluster of this scheduler, e.g. tcp://127.0.0.1:8786 (default: $CRITMEM_DASK_SCHEDULER, else local processes)",
    )  # fmt: skip
    reproduce.add_argument(
        "--workers", metavar="N", type=_int_at_least(1), help="sara, tmem, mc2: local worker processes (default: one per core)"
    )
    reproduce.add_argument(
        "--platform", choices=["sim", "linux"],
        help="hires: run only the simulator's parts, or only the real-Linux parts (these need root); default: both. "
        "sara: linux runs Fig. 11 with critmem's shipped apps on this machine (root); default: sim",
    )  # fmt: skip
    reproduce.add_argument(
        "--periods", metavar="N", type=_int_at_least(3),
        help="sara --platform linux: soft real-time jobs per run (default: about half a minute each; the paper's 500)",
    )  # fmt: skip
    reproduce.set_defaults(handler=_cmd_reproduce)

    study = commands.add_parser(
        "study",
        help="run a large schedulability study (MC²'s)",
        description="Run a paper's schedulability study on local worker processes or a Dask cluster,\n"
        "with each work item's result kept in DIR/.critmem-sweep so a stopped study resumes.",
        epilog="examples:\n  critmem study mc2 --quick\n  critmem study mc2 --scenarios ipc_size=Large --step 0.5 --json\n"
        "  critmem study mc2 --scheduler tcp://127.0.0.1:8786 --out results/mc2",
        formatter_class=fmt,
    )
    studies = study.add_subparsers(title="studies", dest="study", metavar="STUDY", required=True)
    mc2 = studies.add_parser(
        "mc2",
        help="MC²'s study: 648 scenarios under nine IPC/I/O buffer schemes (Sec. 6)",
        description="The schedulability study of MC² (Sec. 6): per scenario (one choice per category of Table 3)\n"
        "the fraction of task systems schedulable under each of the nine schemes against system\n"
        "utilisation, drawn until each point is within ±0.05 at 95 % confidence; their schedulable-\n"
        "utilisation areas and ratios beside the paper's. Writes report.md, points.csv/.parquet,\n"
        "sua.csv, fig15.png, fig8.png, fig14.png, grid/index.html and results.json (the same bytes\n"
        "for the same code and seed), and timing.md/timing.json.",
        epilog="examples:\n  critmem study mc2 --quick\n  critmem study mc2 --scenarios ipc_size=Large,period=Short --step 0.5\n"
        "  critmem study mc2 --workers 8 --out results/mc2 --check",
        formatter_class=fmt,
    )
    mc2.add_argument("--out", metavar="DIR", type=_out_dir, help="output folder (default: results/study/mc2)")
    mc2.add_argument("--json", action="store_true", help="print the headline numbers as one JSON object")
    mc2.add_argument("--quick", action="store_true", help="a dozen scenarios, Fig. 15's three among them (under two minutes on two cores)")
    mc2.add_argument(
        "--check", action="store_true", help="exit 1 when one of the report's acceptance checks does not hold (naming it on stderr)"
    )
    mc2.add_argument("--seed", type=_seed, default=1, metavar="N", help="the study's seed (default 1)")
    mc2.add_argument("--step", type=_positive_number, metavar="X", help="the system-utilisation grid's step (default 0.25)")
    mc2.add_argument(
        "--scenarios", metavar="CATEGORY=CHOICE,...", action="append",
        help="only the scenarios with these choices (a category named twice: either), e.g. ipc_size=Large,io_bandwidth=High",
    )  # fmt: skip
    mc2.add_argument(
        "--scheduler", metavar="ADDRESS", type=_scheduler_address,
        help="run on the Dask cluster of this scheduler, e.g. tcp://127.0.0.1:8786 (default: $CRITMEM_DASK_SCHEDULER, else local processes)",
    )  # fmt: skip
    mc2.add_argument("--workers", metavar="N", type=_int_at_least(1), help="local worker processes (default: one per core)")
    mc2.set_defaults(handler=_cmd_study)

    agent = commands.add_parser(
        "agent",
        help="run the memory agent daemon over existing cgroups (root)",
        description="Run critmem-agent with FILE: it controls the configured cgroups' memory from PSI\n"
        "until SIGINT/SIGTERM, then restores every value it changed (also after a crash, on the\n"
        "next start). See crates/linux/dist/agent.example.toml and critmem-agent.service.",
        epilog="examples:\n  sudo critmem agent --config /etc/critmem/agent.toml\n  sudo critmem agent --config agent.toml --dry-run --duration 30s",
        formatter_class=fmt,
    )
    agent.add_argument("--config", metavar="FILE", required=True, help="agent configuration (TOML)")
    agent.add_argument("--dry-run", action="store_true", help="log the writes the controller asks for; change nothing")
    agent.add_argument("--duration", metavar="D", help="stop (restoring everything) after D, e.g. 60s")
    agent.add_argument("--log-level", choices=["error", "warn", "info", "debug", "trace"], help="log level (default info)")
    agent.set_defaults(handler=_cmd_agent)

    agent_config = commands.add_parser(
        "agent-config",
        help="make an agent configuration from a scenario's groups and controller",
        description="Write the critmem-agent configuration of FILE's [memory], [[group]]s and [control]: the\n"
        "same controller with every parameter written out, over the same groups, each a cgroup the\n"
        "agent creates under critmem/. The agent's own parser checks it before it is written.",
        epilog="examples:\n  critmem examples copy linux-sara\n  critmem agent-config linux-sara.toml --out agent.toml\n  sudo critmem agent --config agent.toml --dry-run --duration 30s",
        formatter_class=fmt,
    )
    agent_config.add_argument("file", metavar="FILE", help="scenario file with [memory], [[group]] and [control]")
    agent_config.add_argument("--out", metavar="CONFIG", help="write it to CONFIG instead of stdout")
    agent_config.add_argument("--force", action="store_true", help="replace CONFIG if it exists")
    agent_config.set_defaults(handler=_cmd_agent_config)

    swap = commands.add_parser(
        "swap",
        help="set up or tear down critmem's own swapfile (root)",
        description="Manage a swapfile of critmem's own (recorded in a state file, labelled critmem-swap);\n"
        "teardown removes exactly that file and never touches any other swap.",
        epilog="examples:\n  sudo critmem swap setup --size 4G\n  sudo critmem swap teardown\n  critmem swap status",
        formatter_class=fmt,
    )
    swap.add_argument("action", choices=["setup", "teardown", "status"], metavar="ACTION", help="setup, teardown or status")
    swap.add_argument("--size", metavar="SIZE", help="setup: size, e.g. 4G, 512M")
    swap.add_argument("--path", metavar="FILE", help="setup: where (ext4/xfs; default /var/lib/critmem/critmem.swap)")
    swap.add_argument("--state-file", metavar="FILE", help="where critmem records its swapfile (default /var/lib/critmem/swap.json)")
    swap.set_defaults(handler=_cmd_swap)

    profile = commands.add_parser(
        "profile",
        help="measure a program under a ladder of memory limits and write a simulator workload (root)",
        description="Run CMD alone in a cgroup of its own, with no limit and then under limits shrinking\n"
        "by --ratio from its measured peak, with critmem's swapfile on (set up for the run and removed\n"
        "afterwards when there is none). A program that reports jobs through critmem.jobclient is\n"
        "measured per job; one that writes a progress file (--units) per work unit. Writes to DIR:\n"
        "report.md (BCET, Table I's memory min/avg/max, execution time against limit as Fig. 2, stall\n"
        "against execution time with Eq. 1's fit as Fig. 7), fig2.png, fig7.png, profile.json and\n"
        "workload.toml, a scenario whose task declares memory behaviour fitted to the measured curve,\n"
        "runnable in the simulator (and, with its command, on Linux).",
        epilog="examples:\n  sudo critmem profile --out results/speech -- .venv/bin/python -m critmem.apps.speech --buffer-mb 200\n"
        "  sudo critmem profile --units --out results/graph -- .venv/bin/python -m critmem.apps.graph",
        usage="critmem profile [options] -- CMD ...",
        formatter_class=fmt,
    )
    profile.set_defaults(command_after=[])
    profile.add_argument(
        "--out", metavar="DIR", type=_out_dir, default="results/profile", help="where the report goes (default results/profile)"
    )
    profile.add_argument("--name", help="the program's name in the report and workload (default: CMD's last word without options)")
    profile.add_argument("--units", action="store_true", help="CMD reports work units in a progress file, not jobs (a throughput program)")
    profile.add_argument("--period-ms", type=_positive_ms, default=2500.0, metavar="X", help="job period given to CMD (default 2500)")
    profile.add_argument("--deadline-ms", type=_positive_ms, metavar="X", help="relative deadline (default: the period)")
    profile.add_argument("--jobs", type=_int_at_least(3), default=12, metavar="N", help="jobs per limit, the first a warm-up (default 12)")
    profile.add_argument("--units-duration", metavar="D", default="40s", help="--units: how long each limit runs (default 40s)")
    profile.add_argument(
        "--steps", type=_int_at_least(1), default=DEFAULT_MAX_STEPS, metavar="N",
        help=f"at most this many limits below the peak (default {DEFAULT_MAX_STEPS}); the ladder ends sooner at --max-slowdown",
    )  # fmt: skip
    profile.add_argument(
        "--ratio", type=float, default=0.8, metavar="R", help="each limit is R times the one before (0 < R < 1, default 0.8)"
    )
    profile.add_argument(
        "--max-slowdown", type=float, default=DEFAULT_MAX_SLOWDOWN, metavar="X",
        help=f"stop the ladder once execution takes X times its unlimited time (default {DEFAULT_MAX_SLOWDOWN:g})",
    )  # fmt: skip
    profile.add_argument(
        "--swap-size", metavar="SIZE", default="4G", help="size of the swapfile made when critmem has none on (default 4G)"
    )
    profile.add_argument("--json", action="store_true", help="print profile.json instead of the summary")
    profile.add_argument("--force", action="store_true", help="write into DIR even if it is not empty")
    profile.set_defaults(handler=_cmd_profile)

    hires = commands.add_parser(
        "hires",
        help="apply a HiRes reservation tree as nested cgroups and run commands in it (root)",
        description="apply: create TREE's subsystems as nested cgroups with their reservations as limits (CPU\n"
        "bandwidth, memory), start each subsystem's command inside it (and CMD in --in), report each\n"
        "subsystem's CPU share by the kernel's accounting against its reservation, and remove it all\n"
        "when the commands are done, after --duration, or on Ctrl-C. A tree that does not admit (a\n"
        "child over-reserved, a budget above its period, a cycle) is refused in one line.\n"
        "teardown: remove the cgroups an apply killed with -9 left (its processes died with it).",
        epilog="examples:\n  sudo critmem hires apply tree.toml --duration 10s\n  sudo critmem hires apply tree.toml --in web -- ./server --port 8080\n"
        "  sudo critmem hires teardown",
        usage="critmem hires {apply,teardown} [TREE] [options] [-- CMD ...]",
        formatter_class=fmt,
    )
    hires.add_argument("action", choices=["apply", "teardown"], metavar="ACTION", help="apply or teardown")
    hires.add_argument("tree", metavar="TREE", nargs="?", help="apply: the reservation tree (TOML)")
    # `-- CMD ...` is split off before parsing (main), as argparse would take CMD's options.
    hires.set_defaults(command_after=[])
    hires.add_argument(
        "--in", dest="in_subsystem", metavar="NAME", help="apply: the subsystem CMD runs in (needed when the tree has several)"
    )
    hires.add_argument("--duration", metavar="D", help="apply: stop after D, e.g. 30s (default: when the commands are done)")
    hires.add_argument("--json", action="store_true", help="apply: print the summary as JSON")
    hires.add_argument("--name", metavar="NAME", help="the tree's top cgroup directory (default critmem-hires)")
    hires.set_defaults(handler=_cmd_hires)

    schema = commands.add_parser(
        "schema",
        help="print the JSON Schema of scenario files",
        description="Print the JSON Schema (draft 2020-12) of scenario files: every key, its type and each\n"
        "choice key's accepted values, derived from the loader itself. Editors use it to complete\n"
        "and check scenarios as they are written; rules across keys are the loader's alone\n"
        "(`critmem validate FILE`).",
        epilog="examples:\n  critmem schema > scenario.schema.json",
        formatter_class=fmt,
    )
    schema.add_argument(
        "--output",
        metavar="KIND",
        choices=output_schemas.OUTPUT_SCHEMA_NAMES,
        help=f"print the JSON Schema of an output instead: {', '.join(output_schemas.OUTPUT_SCHEMA_NAMES)}",
    )
    schema.set_defaults(handler=_cmd_schema)

    examples = commands.add_parser(
        "examples",
        help="list the bundled example scenarios, or copy one out",
        description="List the example scenarios that ship with critmem (name and first comment line), or\n"
        "write one to the current folder (or DEST) with `copy`; an existing file is never replaced.",
        epilog="examples:\n  critmem examples\n  critmem examples copy quickstart\n  critmem run quickstart.toml",
        formatter_class=fmt,
    )
    examples.set_defaults(handler=_cmd_examples, action=None)
    examples_actions = examples.add_subparsers(dest="action", metavar="ACTION")
    copy = examples_actions.add_parser(
        "copy",
        help="write the example NAME to the current folder (or DEST)",
        description="Write the bundled example NAME as NAME.toml in the current folder, or to DEST (a folder\n"
        "or a file name); an existing file is never replaced.",
        formatter_class=fmt,
    )
    copy.add_argument("name", metavar="NAME", help="an example's name, as `critmem examples` lists it")
    copy.add_argument("dest", metavar="DEST", nargs="?", help="folder or file to write (default: the current folder)")
    return parser


_MAX_ERROR_CHARS = 2000


def _fail(message: str, code: int = EXIT_USAGE) -> int:
    one_line = " ".join(message.split())
    # A value echoed from the input can be megabytes long; the line stays readable. Its middle
    # goes: a long path comes first and the reason last, and both must stay.
    if len(one_line) > _MAX_ERROR_CHARS:
        head, tail = _MAX_ERROR_CHARS * 3 // 5, _MAX_ERROR_CHARS * 2 // 5
        left_out = len(one_line) - head - tail
        one_line = f"{one_line[:head]} … ({left_out} more characters) … {one_line[-tail:]}"
    print(f"critmem: error: {one_line}", file=sys.stderr)
    return code


def _fail_os(e: OSError) -> int:
    where = f"{e.filename or repr(e.filename)}: " if e.filename is not None else ""
    return _fail(f"{where}{e.strerror or e}")


def _stdout_reader_gone() -> bool:
    """Whether stdout is a pipe or socket whose reader has closed it (poll reports POLLERR)."""
    try:
        fd = sys.stdout.fileno()
    except (OSError, ValueError):  # replaced by an object without a descriptor
        return False
    poller = select.poll()
    poller.register(fd, select.POLLOUT)
    return any(events & select.POLLERR for _, events in poller.poll(0))


def _quiet_closed_stdout() -> int:
    """The reader of stdout went away (`critmem ... | head`): stop quietly, as rich does."""
    # Python would otherwise fail again flushing stdout at exit and print a traceback.
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    finally:
        os.close(devnull)
    return EXIT_CLOSED_OUTPUT


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the command line; returns the exit code (0 ok, 1 stdout closed early, 2 user
    error, 70 internal error)."""
    try:
        parser = build_parser()
        argv = list(sys.argv[1:] if argv is None else argv)
        after: list[str] = []
        if argv[:1] in (["hires"], ["profile"]) and "--" in argv:
            argv, after = argv[: argv.index("--")], argv[argv.index("--") + 1 :]
        args, unknown = parser.parse_known_args(argv)
        if after:
            args.command_after = after
        if unknown:
            # parse_args would blame the top-level parser and point to 'critmem --help'.
            raise CliError(f"unrecognized arguments: {' '.join(unknown)} (see '{parser.prog} {args.command} --help')")
        handler: Callable[[argparse.Namespace], int] = args.handler
        code = handler(args)
        # Flushed here, not at exit, so a closed pipe is seen while it can still be handled.
        sys.stdout.flush()
        # A large write cut short by the reader leaving can return without an error.
        return _quiet_closed_stdout() if _stdout_reader_gone() else code
    except SystemExit as e:  # --help and --version; rich's console exits 1 on a closed pipe
        return e.code if isinstance(e.code, int) else 0
    except BrokenPipeError as e:
        if _stdout_reader_gone():
            return _quiet_closed_stdout()
        return _fail_os(e)
    except CliError as e:
        return _fail(str(e))
    except ScenarioError as e:
        return _fail(str(e))
    except LinuxError as e:
        return _fail(str(e))
    except OSError as e:
        return _fail_os(e)
    except KeyboardInterrupt:
        return 130
    except BaseException as e:  # noqa: BLE001 — includes pyo3's PanicException
        return _fail(f"internal error ({type(e).__name__}: {e}); please report it", EXIT_INTERNAL)
