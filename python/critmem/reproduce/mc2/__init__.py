"""The schedulability study of MC², "Supporting I/O and IPC via Fine-Grained OS Isolation for
Mixed-Criticality Real-Time Tasks" (Sec. 6; the paper's text is
../shared/papers/mc2-io-ipc-isolation.txt): `critmem study mc2` and `critmem reproduce mc2`.

- `paper`: the paper's own numbers, quoted for comparison;
- `study`: the scenarios, each scenario's curve (a work item on `critmem.sweep`, computed by
  the Rust core), the areas and ratios (`results.json`, the `--json` summary);
- `report`: the figures, the per-scenario grid and `report.md`, from those numbers alone;
- `headline`: the tables `critmem reproduce` prints from the headline numbers.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

from critmem.reproduce.results import SWEEP_CACHE, finish, sweep, write_json, write_text

if TYPE_CHECKING:
    from critmem.progress import Progress
    from critmem.reproduce import Reproduction
    from critmem.reproduce.mc2.study import Plan
    from critmem.sweep import Executor

__all__ = ["SWEEP_CACHE", "reproduce"]


def reproduce(
    out_dir: Path,
    *,
    quick: bool = False,
    progress: Progress | None = None,
    plan: Plan | None = None,
    executor: Executor | None = None,
) -> Reproduction:
    """Runs the study on `executor` (default: local processes, one per core) and writes to
    `out_dir`: report.md, results.json, points.csv and points.parquet, sua.csv, fig15.png,
    fig8.png, fig14.png and grid/ (the same bytes for the same code and plan), and timing.md and
    timing.json (this run's wall-clock and CPU time). Returns the headline numbers and checks."""
    from critmem.reproduce.mc2 import (
        report,  # matplotlib: only when writing
        study,
    )

    started = time.monotonic()
    plan = plan or (study.quick_plan() if quick else study.Plan())
    plan.validate()
    with sweep(out_dir, executor, progress, study.planned_runs(plan)) as running:
        data, cpu_s = study.compute(plan, running)
        computed, reused = len(running.computed), len(running.reused)
        workers = getattr(running.executor, "workers", None) or getattr(running.executor, "address", "?")
    frame = study.points_frame(data["curves"], data["schemes"])
    files = [write_json(out_dir / "results.json", data)]
    frame.to_csv(out_dir / "points.csv", index=False)
    files.append(out_dir / "points.csv")
    if _has_pyarrow():
        frame.to_parquet(out_dir / "points.parquet", index=False)
        files.append(out_dir / "points.parquet")
    import pandas as pd

    pd.DataFrame(study.sua_rows(data)).to_csv(out_dir / "sua.csv", index=False)
    files.append(out_dir / "sua.csv")
    files += [
        report.plot_fig15(data, out_dir / "fig15.png"),
        report.plot_fig8(data, out_dir / "fig8.png"),
        report.plot_fig14(data, out_dir / "fig14.png"),
    ]
    grid = report.write_grid(data, out_dir / "grid")
    files.append(grid[0])
    names = [p.relative_to(out_dir).as_posix() for p in files]
    report_md = report.render(data, [*names, "timing.md", "timing.json"])
    timing = {
        "scenarios": data["scenarios"],
        "computed": computed,
        "reused": reused,
        "systems": data["systems"],
        "wall_s": round(time.monotonic() - started, 3),
        "cpu_s": round(cpu_s, 3),
        "workers": workers,
    }
    files.append(write_json(out_dir / "timing.json", timing))
    files.append(write_text(out_dir / "timing.md", report.render_timing(timing)))
    return finish(out_dir, report_md, files, study.headline(data), report.acceptance_checks(data))


def _has_pyarrow() -> bool:
    import importlib.util

    return importlib.util.find_spec("pyarrow") is not None
