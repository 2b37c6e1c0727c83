"""Terminal output: tables, cell formatting and the text that never acts on the terminal."""

from __future__ import annotations

import math
import os
import re
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

# rich loads only where a command prints tables: `run --json` and `analyze --json` start
# several times faster without it.


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


def _print_warnings(lines: Sequence[str]) -> None:
    """The scenario's warnings on stderr, so `--json` output stays one object."""
    for line in lines:
        print(f"warning: {line}", file=sys.stderr)
