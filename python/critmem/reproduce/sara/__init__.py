"""Reproduction of the evaluation of SARA, "Stall-Aware Real-Time Memory Allocation" (the
paper's text is ../shared/papers/sara-stall-aware-allocation.txt).

- `paper`: the paper's own numbers, quoted for comparison;
- `experiment`: the workloads, every simulation the reproduction makes (on `critmem.sweep`)
  and the numbers they yield (`results.json`, the `--json` summary);
- `report`: the figures and `report.md`, from those numbers alone;
- `judgement`: how critmem's own controller is judged against the others, on both platforms;
- `headline`: the tables `critmem reproduce` prints from the headline numbers;
- `machine`: Fig. 11 on this machine with critmem's shipped apps (`--platform linux`).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Unpack

from critmem.reproduce.results import SWEEP_CACHE, finish, reproduce_on_sweep, with_results_json, write_json

if TYPE_CHECKING:
    from critmem.progress import Progress
    from critmem.reproduce import Reproduction
    from critmem.reproduce.results import SweepOptions, Written
    from critmem.reproduce.sara.experiment import Plan

__all__ = ["SWEEP_CACHE", "reproduce"]


def reproduce(
    out_dir: Path,
    *,
    platforms: tuple[str, ...] = ("sim",),
    periods: int | None = None,
    repeats: int | None = None,
    pairs: Sequence[tuple[str, str]] | None = None,
    **options: Unpack[SweepOptions[Plan]],
) -> Reproduction:
    """Runs everything on `executor` (default: local processes, one per core), writes report.md,
    results.json and the figures to `out_dir`, and returns the headline numbers.

    `platforms=("linux",)` runs Fig. 11 on this machine instead, with critmem's shipped apps
    (root; `periods` soft real-time jobs per run, every controller run `repeats` times, interleaved;
    runs finished before a stop are taken from `out_dir` when run again), for each of `pairs`
    (soft real-time app, non-real-time app) when given, else speech and vision beside graph."""
    from critmem.progress import QuietProgress

    quick = options.get("quick", False)
    if tuple(platforms) == ("linux",):
        progress = options.get("progress") or QuietProgress()
        return _reproduce_on_machine(out_dir, quick=quick, progress=progress, periods=periods, repeats=repeats, pairs=pairs)
    if tuple(platforms) != ("sim",):
        raise ValueError(f"sara runs on one platform at a time, sim or linux (got {', '.join(platforms) or 'none'})")
    if periods is not None or repeats is not None or pairs is not None:
        raise ValueError("periods, repeats and pairs are for the Linux platform; the simulator's runs come from the plan")
    from critmem.reproduce.sara import experiment

    plan = options.get("plan") or (experiment.QUICK if quick else experiment.Plan())
    return reproduce_on_sweep(out_dir, options, experiment.planned_runs(plan), partial(experiment.compute, plan), partial(_write, out_dir))


def _write(out_dir: Path, data: dict[str, Any]) -> Written:
    from critmem.reproduce.sara import (
        experiment,
        report,  # matplotlib: only when writing
    )

    summary = experiment.headline(data)
    figures = [
        report.plot_fig7(data, out_dir / "fig7.png"),
        report.plot_fig11(data, out_dir / "fig11.png"),
        report.plot_fig12(data, out_dir / "fig12.png"),
        report.plot_fig13(data, out_dir / "fig13.png"),
        report.plot_step_up(data, out_dir / "fig_step_up.png"),
        report.plot_keepable_sim(data, out_dir / "fig_keepable.png"),
    ]
    return with_results_json(out_dir, data, summary, figures, report.render, report.acceptance_checks(data, summary))


def _reproduce_on_machine(
    out_dir: Path, *, quick: bool, progress: Progress, periods: int | None, repeats: int | None, pairs: Sequence[tuple[str, str]] | None
) -> Reproduction:
    from critmem.reproduce.sara import machine

    plan = machine.plan_for(quick, periods, repeats, pairs)
    progress.start(machine.planned_steps(plan) + 1)
    out_dir.mkdir(parents=True, exist_ok=True)
    data = machine.compute(plan, out_dir, progress)
    progress.step("writing the report and figure")
    summary = machine.headline(data)
    files = [
        write_json(out_dir / "results.json", data),
        machine.plot(data, out_dir / "fig11.png"),
        machine.plot_keepable(data, out_dir / machine.KEEPABLE_FIGURE),
    ]
    return finish(out_dir, machine.render(data, summary, "fig11.png"), files, summary, machine.checks(data))
