"""Fig. 6 on real Linux: the same reservations as nested cgroups (`critmem-hires apply`), each
holding real CPU-bound processes, one run per phase; shares from the kernel's own CPU
accounting (cpuacct on cgroup v1, cpu.stat on v2)."""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from critmem.reproduce.hires.paper import PAPER_FIG6_SERVERS, PAPER_FIG6_WEB_BUDGET, PAPER_FIG6_WEB_PERIODS, PAPER_FIG6_WEB_THREADS

__all__ = ["TREE_NAME", "fig6_linux", "fig6_tree"]

TREE_NAME = "critmem-hires-reproduce"
"""The top cgroup directory of the trees this reproduction applies (and its journal's name)."""


def fig6_tree(web_period_ms: int, burn: str, period_factor: int = 1) -> str:
    """The tree file of one phase, on one CPU: the web subsystem with six CPU-bound processes
    in a hard CPU reservation of 4 ms per `web_period_ms`, and three subsystems of one
    CPU-bound process each at 4/25, 3/20 and 1/10 ms. On Linux every reservation is a CFS
    bandwidth limit (quota per period) with a weight in proportion to its share; the web
    subsystem's processes share its quota under CFS, Linux having no child scheduler of the
    subsystem's own. `period_factor` multiplies every budget and period (the shares stay), for
    a machine that runs code that many times slower."""
    lines = ["[root]", "cpus = 1", "memory_mib = 1024", ""]
    entries = [("web", PAPER_FIG6_WEB_BUDGET, web_period_ms, PAPER_FIG6_WEB_THREADS)]
    entries += [(name, budget, period, 1) for name, (budget, period) in PAPER_FIG6_SERVERS.items()]
    for name, budget, period, processes in entries:
        budget, period = budget * period_factor, period * period_factor
        lines += [
            "[[subsystem]]",
            f'name = "{name}"',
            f'reserve = [{{ family = "cpu", kind = "hard", budget_ms = {budget}, period_ms = {period} }}]',
            f'command = ["{burn}", "burn"]',
            f"processes = {processes}",
            "",
        ]
    return "\n".join(lines)


def fig6_linux(seconds_per_phase: float, step: Callable[[str], None], period_factor: int = 1) -> dict[str, Any]:
    """Runs the three phases one after another; per subsystem and phase the budget, the period
    and the measured share of one CPU, and the shares over time as critmem-hires sampled them.
    `period_factor`: see [`fig6_tree`]."""
    from critmem import linux

    burn = linux.binary("critmem-hires")
    rows: list[dict[str, Any]] = []
    timeline: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="critmem-hires-fig6-") as tmp:
        for phase, web_period in enumerate(PAPER_FIG6_WEB_PERIODS):
            step(f"Fig. 6 (Linux): web at {PAPER_FIG6_WEB_BUDGET} per {web_period} ms, {seconds_per_phase:g} s")
            tree = Path(tmp) / f"phase{phase}.toml"
            tree.write_text(fig6_tree(web_period, burn, period_factor), encoding="utf-8")
            summary = linux.hires_run(tree, name=TREE_NAME, duration_s=seconds_per_phase)
            for sub in summary["subsystems"]:
                (cpu,) = [r for r in sub["reservations"] if r["family"] == "cpu"]
                rows.append(
                    {
                        "name": sub["name"],
                        "phase": phase,
                        "budget": cpu["budget_ms"],
                        "period": cpu["period_ms"],
                        "share": sub["cpu_share_measured"],
                    }
                )
            timeline += [
                {"phase": phase, "t_ms": point["t_s"] * 1000.0, "name": name, "share": share}
                for point in summary["timeline"]
                for name, share in sorted(point["shares"].items())
            ]
            backend = summary["backend"]
    return {"rows": rows, "timeline": timeline, "phase_s": seconds_per_phase, "backend": backend}
