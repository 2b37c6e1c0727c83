"""Reproduction of the evaluation of Kim and Rajkumar, "Shared-Page Management for Improving
the Temporal Isolation of Memory Reservations in Resource Kernels" (Sec. VI; the paper's text
is ../shared/papers/shared-page-memory-reservations.txt).

- `paper`: the paper's own numbers, quoted for comparison;
- `experiment`: the workload, every simulation (each step's sizes depend on the step before,
  so they run one after another in this process) and the numbers they yield;
- `report`: the figures, `report.md` and `table2.md`, from those numbers alone;
- `headline`: the tables `critmem reproduce` prints from the headline numbers.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from critmem.reproduce.results import finish, write_json, write_text

if TYPE_CHECKING:
    from critmem.progress import Progress
    from critmem.reproduce import Reproduction
    from critmem.reproduce.shared_pages.experiment import Workload

__all__ = ["reproduce"]


def reproduce(
    out_dir: Path,
    *,
    quick: bool = False,
    progress: Progress | None = None,
    workload: Workload | None = None,
) -> Reproduction:
    """Runs everything, writes report.md, fig8.png, fig9.png, results.json (deterministic)
    and table2.md, table2.json (wall-clock timings) to `out_dir`, and returns the headline
    numbers."""
    from critmem.progress import QuietProgress
    from critmem.reproduce.shared_pages import (
        experiment,
        report,  # matplotlib: only when writing
    )

    w = workload or (experiment.quick_workload() if quick else experiment.Workload())
    progress = progress or QuietProgress()
    progress.start(experiment.planned_steps(w) + 2)
    res = experiment.compute(w, quick=quick, progress=progress)
    progress.step("(d) timing the memory operations")
    t2 = experiment.table2(10 if quick else 50)
    progress.step("writing the report and figures")
    data = res.to_dict()
    out_dir.mkdir(parents=True, exist_ok=True)
    files = [
        write_json(out_dir / "results.json", data),
        write_json(out_dir / "table2.json", t2),
        write_text(out_dir / "table2.md", report.render_table2(t2)),
        report.plot_fig8(data, out_dir / "fig8.png"),
        report.plot_fig9(data, out_dir / "fig9.png"),
    ]
    report_md = report.render(data, t2, [p.name for p in files])
    summary = experiment.headline(data, t2)
    return finish(out_dir, report_md, files, summary, report.acceptance_checks(summary))
