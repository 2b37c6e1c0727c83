"""Reproduction of the evaluation of TMEM, "Increasing Memory Utilization with Transient Memory
Scheduling" (the paper's text is ../shared/papers/tmem-transient-memory-scheduling.txt).

- `paper`: the paper's own numbers, quoted for comparison;
- `workloads`: the task sets, the Fig. 8 component graph and the Table IV service, as scenarios;
- `experiment`: every simulation the reproduction makes (on `critmem.sweep`) and the numbers
  they yield (`results.json`, the `--json` summary);
- `report`: the figures and `report.md`, from those numbers alone;
- `headline`: the tables `critmem reproduce` prints from the headline numbers.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Unpack

from critmem.reproduce.results import SWEEP_CACHE, reproduce_on_sweep, with_results_json

if TYPE_CHECKING:
    from critmem.reproduce import Reproduction
    from critmem.reproduce.results import SweepOptions, Written
    from critmem.reproduce.tmem.experiment import Plan

__all__ = ["SWEEP_CACHE", "reproduce"]


def reproduce(out_dir: Path, **options: Unpack[SweepOptions[Plan]]) -> Reproduction:
    """Runs everything on `executor` (default: local processes, one per core), writes report.md,
    results.json and the figures to `out_dir`, and returns the headline numbers."""
    from critmem.reproduce.tmem import experiment

    plan = options.get("plan") or (experiment.QUICK if options.get("quick") else experiment.Plan())
    return reproduce_on_sweep(out_dir, options, experiment.planned_runs(plan), partial(experiment.compute, plan), partial(_write, out_dir))


def _write(out_dir: Path, data: dict[str, Any]) -> Written:
    from critmem.reproduce.tmem import (
        experiment,
        report,  # matplotlib: only when writing
    )

    figures = [
        report.plot_fig6(data, out_dir / "fig6_tardiness.png", "max_tardiness_ms", "max tardiness (ms)", "Fig. 6a (model): max tardiness"),
        report.plot_fig6(
            data, out_dir / "fig6_misses.png", "misses_per_s", "deadline misses per second", "Fig. 6b (model): deadline misses"
        ),
        report.plot_fig7(data, out_dir / "fig7.png"),
        report.plot_pool_size(data, out_dir / "pool_size.png"),
    ]
    return with_results_json(out_dir, data, experiment.headline(data), figures, report.render, report.acceptance_checks(data))
