"""The schedulability study of MC², "Supporting I/O and IPC via Fine-Grained OS Isolation for
Mixed-Criticality Real-Time Tasks" (Sec. 6; the paper's text is
../shared/papers/mc2-io-ipc-isolation.txt): `critmem study mc2` and `critmem reproduce mc2`.

- `paper`: the paper's own numbers, quoted for comparison;
- `study`: the scenarios, each scenario's curve (a work item on `critmem.sweep`, computed by
  the Rust core), the areas and ratios (`results.json`, the `--json` summary);
- `report`: the figures, the per-scenario grid and `report.md`, from those numbers alone.

This module only ties them together (`reproduce`); it imports them when called, so nothing
imports it back.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from critmem.progress import Progress
    from critmem.reproduce import Reproduction
    from critmem.reproduce.mc2.study import Plan
    from critmem.sweep import Executor

__all__ = ["SWEEP_CACHE", "reproduce"]

SWEEP_CACHE = ".critmem-sweep"
"""The folder in the output folder where each scenario's curve is kept as it arrives, so an
interrupted study computes only the scenarios still missing when run again."""


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
    from critmem.progress import QuietProgress
    from critmem.reproduce import Reproduction
    from critmem.reproduce.mc2 import (
        report,  # matplotlib: only when writing
        study,
    )
    from critmem.sweep import Sweep

    started = time.monotonic()
    plan = plan or (study.quick_plan() if quick else study.Plan())
    plan.validate()
    progress = progress or QuietProgress()
    progress.start(study.planned_runs(plan) + 1)
    with Sweep(executor, cache_dir=out_dir / SWEEP_CACHE, progress=progress) as sweep:
        data, cpu_s = study.compute(plan, sweep)
        computed, reused = len(sweep.computed), len(sweep.reused)
        workers = getattr(sweep.executor, "workers", None) or getattr(sweep.executor, "address", "?")
    progress.step("writing the report and figures")
    out_dir.mkdir(parents=True, exist_ok=True)
    frame = study.points_frame(data["curves"], data["schemes"])
    files = [_write_json(out_dir / "results.json", data)]
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
    report_md = out_dir / "report.md"
    names = [p.relative_to(out_dir).as_posix() for p in files]
    report_md.write_text(report.render(data, [*names, "timing.md", "timing.json"]), encoding="utf-8")
    files.insert(0, report_md)
    timing = {
        "scenarios": data["scenarios"],
        "computed": computed,
        "reused": reused,
        "systems": data["systems"],
        "wall_s": round(time.monotonic() - started, 3),
        "cpu_s": round(cpu_s, 3),
        "workers": workers,
    }
    files.append(_write_json(out_dir / "timing.json", timing))
    timing_md = out_dir / "timing.md"
    timing_md.write_text(report.render_timing(timing), encoding="utf-8")
    files.append(timing_md)
    summary = study.headline(data)
    summary["out_dir"] = str(out_dir)
    summary["files"] = [p.relative_to(out_dir).as_posix() for p in files]
    return Reproduction(summary=summary, files=files, checks=report.acceptance_checks(data))


def _has_pyarrow() -> bool:
    import importlib.util

    return importlib.util.find_spec("pyarrow") is not None


def _write_json(path: Path, data: Any) -> Path:
    path.write_text(json.dumps(data, indent=1, allow_nan=False) + "\n", encoding="utf-8")
    return path
