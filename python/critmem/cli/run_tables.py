"""The tables of a run that both platforms print: tasks, controlled groups, PSI stalls."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from critmem.cli.tables import _fmt, _note_left_out, _plural, _row_table, _text, _worst

if TYPE_CHECKING:
    from rich.console import Console


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


def _print_stalls(console: Console, groups: Sequence[dict[str, Any]]) -> None:
    """Per group, its PSI stall totals: memory and I/O, some and full."""
    rows = [
        [
            g["name"],
            _fmt(g["memory_some_us"] / 1000),
            _fmt(g["memory_full_us"] / 1000),
            _fmt(g["io_some_us"] / 1000),
            _fmt(g["io_full_us"] / 1000),
        ]
        for g in groups
    ]
    console.print(_text("stall totals per group (PSI: some = at least one task stalled, full = all non-idle tasks stalled)"))
    console.print(
        _row_table(
            console,
            ["group", "memory some ms", "memory full ms", "io some ms", "io full ms"],
            rows,
            optional=["memory full ms", "io full ms"],
        )
    )
