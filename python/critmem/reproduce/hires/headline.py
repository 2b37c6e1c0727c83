"""The headline numbers of `critmem reproduce hires` beside the paper's, as tables."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from critmem.cli.tables import _fmt, _table, _text

if TYPE_CHECKING:
    from rich.console import Console


def print_headline(console: Console, summary: dict[str, Any]) -> None:
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
