"""The headline numbers of `critmem reproduce shared-pages` beside the paper's, as tables."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from critmem.cli.tables import _fmt, _table, _text

if TYPE_CHECKING:
    from rich.console import Console


def print_headline(console: Console, summary: dict[str, Any]) -> None:
    """Fig. 8's minimum reservations, Table III, Fig. 9's misses and Table II's timings."""
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
    ops = summary.get("table2_ns", {})
    if ops:
        cols = list(next(iter(ops.values())))
        rows = [[op, *(_fmt(v.get(c), 1) for c in cols)] for op, v in ops.items()]
        console.print(_text("memory operations, wall-clock ns of the simulator's data structures (Table II)"))
        console.print(_table(["operation", *cols], rows))
