"""The headline numbers of `critmem reproduce tmem` beside the paper's, as tables."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from critmem.cli.tables import _fmt, _table, _text

if TYPE_CHECKING:
    from rich.console import Console


def print_headline(console: Console, summary: dict[str, Any]) -> None:
    """Fig. 6a's tardiness against transient memory, tmem's slope over greedy's and Table IV."""
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
