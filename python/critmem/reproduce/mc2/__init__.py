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
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Unpack

from critmem.reproduce.results import SWEEP_CACHE, Written, reproduce_on_sweep, write_json, write_text

if TYPE_CHECKING:
    from critmem.reproduce import Reproduction
    from critmem.reproduce.mc2.study import Plan
    from critmem.reproduce.results import SweepOptions
    from critmem.sweep import Sweep

__all__ = ["SWEEP_CACHE", "reproduce"]


def reproduce(out_dir: Path, **options: Unpack[SweepOptions[Plan]]) -> Reproduction:
    """Runs the study on `executor` (default: local processes, one per core) and writes to
    `out_dir`: report.md, results.json, points.csv and points.parquet, sua.csv, fig15.png,
    fig8.png, fig14.png and grid/ (the same bytes for the same code and plan), and timing.md and
    timing.json (this run's wall-clock and CPU time). Returns the headline numbers and checks."""
    from critmem.reproduce.mc2 import study

    started_s = time.monotonic()
    plan = options.get("plan") or (study.quick_plan() if options.get("quick") else study.Plan())
    plan.validate()
    return reproduce_on_sweep(out_dir, options, study.planned_runs(plan), partial(_compute, plan), partial(_write, out_dir, started_s))


def _compute(plan: Plan, running: Sweep) -> tuple[dict[str, Any], dict[str, Any]]:
    """The study's results, and how the sweep made them: the CPU time of the curves, how many it
    computed and reused from the cache, and its workers."""
    from critmem.reproduce.mc2 import study

    data, cpu_s = study.compute(plan, running)
    workers = getattr(running.executor, "workers", None) or getattr(running.executor, "address", "?")
    return data, {"computed": len(running.computed), "reused": len(running.reused), "cpu_s": cpu_s, "workers": workers}


def _write(out_dir: Path, started_s: float, computed: tuple[dict[str, Any], dict[str, Any]]) -> Written:
    from critmem.reproduce.mc2 import (
        report,  # matplotlib: only when writing
        study,
    )

    data, run = computed
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
        "computed": run["computed"],
        "reused": run["reused"],
        "systems": data["systems"],
        "wall_s": round(time.monotonic() - started_s, 3),
        "cpu_s": round(run["cpu_s"], 3),
        "workers": run["workers"],
    }
    files.append(write_json(out_dir / "timing.json", timing))
    files.append(write_text(out_dir / "timing.md", report.render_timing(timing)))
    return Written(report_md, files, study.headline(data), report.acceptance_checks(data))


def _has_pyarrow() -> bool:
    import importlib.util

    return importlib.util.find_spec("pyarrow") is not None
