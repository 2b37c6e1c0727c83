"""What every reproduction writes the same way: JSON and text files, numbers rounded for JSON,
the sweep's cache folder, and the report with the `Reproduction` it returns; and the steps of a
reproduction whose simulations run on `critmem.sweep`, from its keyword options to its files."""

from __future__ import annotations

import contextlib
import json
import math
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, NamedTuple, TypedDict, TypeVar

if TYPE_CHECKING:
    from critmem.progress import Progress
    from critmem.reproduce import Reproduction
    from critmem.reproduce.checks import Check
    from critmem.sweep import Executor, Sweep

__all__ = [
    "SWEEP_CACHE",
    "SweepOptions",
    "Written",
    "finish",
    "num",
    "reproduce_on_sweep",
    "sweep",
    "with_results_json",
    "write_json",
    "write_text",
]

PlanT = TypeVar("PlanT")
DataT = TypeVar("DataT")

SWEEP_CACHE = ".critmem-sweep"
"""The folder in the output folder where each simulation's result is kept as it arrives, so an
interrupted reproduction resumes where it stopped."""


@contextlib.contextmanager
def sweep(out_dir: Path, executor: Executor | None, progress: Progress | None, runs: int) -> Iterator[Sweep]:
    """A sweep on `executor` (default: local processes, one per core) that keeps each result in
    out_dir/SWEEP_CACHE. `progress` counts `runs` steps and one more, for writing the report and
    figures, which starts when the block ends; `out_dir` is then made."""
    from critmem.progress import QuietProgress
    from critmem.sweep import Sweep

    progress = progress or QuietProgress()
    progress.start(runs + 1)
    with Sweep(executor, cache_dir=out_dir / SWEEP_CACHE, progress=progress) as running:
        yield running
    progress.step("writing the report and figures")
    out_dir.mkdir(parents=True, exist_ok=True)


def num(x: Any, digits: int) -> float | None:
    """`x` as a float rounded to `digits` places, for JSON; None for None or NaN."""
    if x is None:
        return None
    v = float(x)
    return None if math.isnan(v) else round(v, digits)


def write_json(path: Path, data: Any) -> Path:
    """Writes `data` as indented JSON (NaN refused, so the file is strict JSON)."""
    path.write_text(json.dumps(data, indent=1, allow_nan=False) + "\n", encoding="utf-8")
    return path


def write_text(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def finish(out_dir: Path, report_md: str, files: list[Path], summary: dict[str, Any], checks: list[Check]) -> Reproduction:
    """Writes `report_md` to out_dir/report.md and returns the reproduction: `files` with the
    report first, and `summary` with the output folder and those files (relative to it)."""
    from critmem.reproduce import Reproduction

    files.insert(0, write_text(out_dir / "report.md", report_md))
    summary["out_dir"] = str(out_dir)
    summary["files"] = [p.relative_to(out_dir).as_posix() for p in files]
    return Reproduction(summary=summary, files=files, checks=checks)


class SweepOptions(TypedDict, Generic[PlanT], total=False):
    """The keyword options of a `reproduce` whose simulations run on `critmem.sweep`."""

    quick: bool
    """`--quick`'s reduced plan instead of the full one (when no `plan` is given)."""
    progress: Progress | None
    plan: PlanT | None
    """What to run, instead of the full or the quick plan."""
    executor: Executor | None
    """Where the simulations run (default: local processes, one per core)."""


class Written(NamedTuple):
    """What a reproduction wrote from its numbers, for `finish`."""

    report_md: str
    files: list[Path]
    summary: dict[str, Any]
    checks: list[Check]


def reproduce_on_sweep(
    out_dir: Path,
    options: SweepOptions[PlanT],
    runs: int,
    compute: Callable[[Sweep], DataT],
    write: Callable[[DataT], Written],
) -> Reproduction:
    """A reproduction on `critmem.sweep`: `compute` makes its `runs` simulations on `options`'
    executor (each result kept in out_dir/SWEEP_CACHE), `write` writes the files from what it
    returns, and `finish` adds report.md."""
    with sweep(out_dir, options.get("executor"), options.get("progress"), runs) as running:
        data = compute(running)
    return finish(out_dir, *write(data))


def with_results_json(
    out_dir: Path,
    data: dict[str, Any],
    summary: dict[str, Any],
    figures: list[Path],
    render: Callable[[dict[str, Any], dict[str, Any], list[str]], str],
    checks: list[Check],
) -> Written:
    """`data` written to out_dir/results.json, listed before `figures`, and report.md's text
    from `render(data, summary, the names of those files)`."""
    files = [write_json(out_dir / "results.json", data), *figures]
    return Written(render(data, summary, [p.name for p in files]), files, summary, checks)
