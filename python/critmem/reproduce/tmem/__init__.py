"""Reproduction of the evaluation of TMEM, "Increasing Memory Utilization with Transient Memory
Scheduling" (the paper's text is ../shared/papers/tmem-transient-memory-scheduling.txt).

- `paper`: the paper's own numbers, quoted for comparison;
- `workloads`: the task sets, the Fig. 8 component graph and the Table IV service, as scenarios;
- `experiment`: every simulation the reproduction makes (on `critmem.sweep`) and the numbers
  they yield (`results.json`, the `--json` summary);
- `report`: the figures and `report.md`, from those numbers alone.

This module only ties them together (`reproduce`); it imports them when called, so nothing
imports it back.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from critmem.progress import Progress
    from critmem.reproduce import Reproduction
    from critmem.reproduce.tmem.experiment import Plan
    from critmem.sweep import Executor

__all__ = ["SWEEP_CACHE", "reproduce"]

SWEEP_CACHE = ".critmem-sweep"
"""The folder in the output folder where each simulation's result is kept as it arrives, so an
interrupted reproduction resumes where it stopped."""


def reproduce(
    out_dir: Path,
    *,
    quick: bool = False,
    progress: Progress | None = None,
    plan: Plan | None = None,
    executor: Executor | None = None,
) -> Reproduction:
    """Runs everything on `executor` (default: local processes, one per core), writes report.md,
    results.json and the figures to `out_dir`, and returns the headline numbers."""
    from critmem.progress import QuietProgress
    from critmem.reproduce import Reproduction
    from critmem.reproduce.tmem import (
        experiment,
        report,  # matplotlib: only when writing
    )
    from critmem.sweep import Sweep

    plan = plan or (experiment.QUICK if quick else experiment.Plan())
    progress = progress or QuietProgress()
    progress.start(experiment.planned_runs(plan) + 1)
    with Sweep(executor, cache_dir=out_dir / SWEEP_CACHE, progress=progress) as sweep:
        data = experiment.compute(plan, sweep)
    progress.step("writing the report and figures")
    summary = experiment.headline(data)
    out_dir.mkdir(parents=True, exist_ok=True)
    files = [
        _write_json(out_dir / "results.json", data),
        report.plot_fig6(data, out_dir / "fig6_tardiness.png", "max_tardiness_ms", "max tardiness (ms)", "Fig. 6a (model): max tardiness"),
        report.plot_fig6(
            data, out_dir / "fig6_misses.png", "misses_per_s", "deadline misses per second", "Fig. 6b (model): deadline misses"
        ),
        report.plot_fig7(data, out_dir / "fig7.png"),
        report.plot_pool_size(data, out_dir / "pool_size.png"),
    ]
    report_md = out_dir / "report.md"
    report_md.write_text(report.render(data, summary, [p.name for p in files]), encoding="utf-8")
    files.insert(0, report_md)
    summary["out_dir"] = str(out_dir)
    summary["files"] = [p.name for p in files]
    return Reproduction(summary=summary, files=files, checks=report.acceptance_checks(data))


def _write_json(path: Path, data: Any) -> Path:
    path.write_text(json.dumps(data, indent=1, allow_nan=False) + "\n", encoding="utf-8")
    return path
