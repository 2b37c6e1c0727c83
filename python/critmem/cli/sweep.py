"""`critmem sweep SPEC.toml`: a study of one scenario over varied keys and seeds, described by a
spec file, run on `critmem.sweep` (local processes or a Dask cluster) and written as a table
with one row per run and a plot per varied key."""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from critmem.cli import argtypes
from critmem.cli.errors import CliError, _Parser
from critmem.cli.outdir import _prepare_out_dir
from critmem.cli.tables import _console, _table, _visible
from critmem.progress import BarProgress, QuietProgress

if TYPE_CHECKING:
    from critmem.sweep import SweepOutcome

_DESCRIPTION = """\
Simulate a scenario at every point of the keys a spec file varies, with each of its seeds, and
keep the metrics it names from each run's result: runs.csv (and runs.parquet where pyarrow is
installed) with one row per run, and a plot of the metrics against each varied key."""

_EPILOG = """\
examples:
  critmem examples copy quickstart
  critmem examples copy sweep/sweep
  critmem sweep sweep/sweep.toml
  critmem sweep sweep/sweep.toml --json --out results/sweep-json

the spec (TOML; paths in it are relative to the spec's folder):
  scenario = "../quickstart.toml"     # the base scenario, or a [scenario] table inline
  seeds = 3                           # seeds 1 to 3, or a list: [7, 11]; default: the scenario's
  metrics = ["tasks.navigation.hit_ratio", "memory.tasks.analytics.major_faults"]
                                      # paths into `critmem run --json` (list entries by name)
  [vary]                              # the runs are every combination of these
  "memory.total_mb" = [32, 64, 128]   # a list of values
  "run.horizon_ms" = { start = 1000, stop = 2000, step = 500 }   # a range, stop included
  [[vary.zip]]                        # keys that move together, one axis
  "task.0.period_ms" = [10, 20]
  "task.0.wcet_ms" = [1, 2]
  [output]
  dir = "results"                     # default: results/sweep/NAME in the current folder
  formats = ["csv", "parquet"]        # default: csv, and parquet where pyarrow is installed
  plots = true

Runs on local worker processes (--workers N, default one per core) or on a Dask cluster
(--scheduler tcp://HOST:PORT, or CRITMEM_DASK_SCHEDULER), with the same table either way. Each
run's result is kept in DIR/.critmem-sweep as it arrives: run again, a sweep that was stopped
computes only the runs it is missing, and one that finished computes nothing."""


def _number(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _mean_text(v: float) -> str:
    if math.isnan(v):
        return "-"
    if v.is_integer():
        return str(int(v))
    return f"{v:.4g}" if abs(v) < 1000 else f"{v:.1f}"


def _wrapped(path: str, width: int = 24) -> str:
    """A dotted path over lines of at most `width` characters where it can break (after a dot):
    a table of many metrics keeps every column's name whole."""
    lines = [""]
    for part in path.split("."):
        piece = part if not lines[-1] else f".{part}"
        if lines[-1] and len(lines[-1]) + len(piece) > width:
            lines.append(piece)
        else:
            lines[-1] += piece
    return "\n".join(lines)


def _print_means(outcome: SweepOutcome) -> None:
    """The table on the terminal: a row per point, each metric's mean over the seeds."""
    from critmem.sweep.table import cell_text

    spec = outcome.spec
    keys, seeds = len(spec.keys), len(spec.seeds)
    rows = []
    for start in range(0, len(outcome.rows), seeds):
        runs = outcome.rows[start : start + seeds]
        cells = [cell_text(v) for v in runs[0][:keys]]
        for i in range(len(spec.metrics)):
            ys = [y for row in runs if (y := _number(row[keys + 1 + i])) is not None]
            cells.append(_mean_text(sum(ys) / len(ys)) if ys else "-")
        rows.append(cells)
    from rich.markup import escape

    headers = [escape(_wrapped(_visible(name))) for name in (*spec.keys, *spec.metrics)]
    _console().print(_table(headers, rows, left=max(keys, 1)))
    what = f"the mean over seeds {', '.join(map(str, spec.seeds))}" if seeds > 1 else f"seed {spec.seeds[0]}"
    print(_visible(f"{len(outcome.rows)} runs; each row {what}"))


def _summary(outcome: SweepOutcome) -> dict[str, Any]:
    """`--json`: what ran and the table, a row per run with a value per column (a list or table
    a key was set to written as JSON text, as in runs.csv)."""
    from critmem.sweep.table import cell_text

    spec = outcome.spec

    def value(v: Any) -> Any:
        return v if v is None or isinstance(v, (bool, int, float, str)) else cell_text(v)

    return {
        "spec": spec.name,
        "scenario": spec.scenario_name,
        "keys": list(spec.keys),
        "seeds": list(spec.seeds),
        "metrics": list(spec.metrics),
        "columns": list(outcome.columns),
        "rows": [[value(v) for v in row] for row in outcome.rows],
        "runs": len(outcome.rows),
        "computed": outcome.computed,
        "reused": outcome.reused,
        "out_dir": str(outcome.out_dir),
        "files": [p.name for p in outcome.files],
    }


def _cmd_sweep(args: argparse.Namespace) -> int:
    from critmem.sweep import SCHEDULER_ENV, SweepError, executor_for, load_spec, run_spec
    from critmem.sweep.study import default_out_dir

    started = time.monotonic()
    try:
        spec = load_spec(args.spec)
    except SweepError as e:
        raise CliError(str(e)) from None
    try:
        executor = executor_for(args.scheduler, args.workers)
    except SweepError as e:
        where = f" (from {SCHEDULER_ENV})" if args.scheduler is None and os.environ.get(SCHEDULER_ENV) else ""
        raise CliError(f"{e}{where}") from None
    try:
        out_dir = _prepare_out_dir(args.out if args.out is not None else str(spec.out_dir or default_out_dir(spec)))
    except BaseException:
        executor.close()
        raise
    # The bar goes to stderr; with --json a script reads the output, so it stays quiet.
    progress = BarProgress() if sys.stderr.isatty() and not args.json else QuietProgress()
    try:
        with progress:
            outcome = run_spec(spec, out_dir=out_dir, executor=executor, progress=progress)
    except SweepError as e:
        raise CliError(str(e)) from None
    elapsed = time.monotonic() - started
    if args.json:
        sys.stdout.write(json.dumps(_summary(outcome), allow_nan=False) + "\n")
    else:
        _print_means(outcome)
    files = ", ".join(p.name for p in outcome.files)
    note = sys.stderr if args.json else sys.stdout
    print(
        _visible(
            f"{outcome.computed} simulated, {outcome.reused} from the cache; wrote {files} to {Path(outcome.out_dir).as_posix()}/ in {elapsed:.1f} s"
        ),
        file=note,
    )
    return 0


def register(commands: argparse._SubParsersAction[_Parser]) -> None:
    """Adds `critmem sweep`."""
    sweep = commands.add_parser(
        "sweep",
        help="run a scenario over varied keys and seeds from a spec file; a table and plots",
        description=_DESCRIPTION,
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sweep.add_argument("spec", metavar="SPEC", help="the sweep's spec file (.toml)")
    sweep.add_argument(
        "--out", metavar="DIR", type=argtypes.out_dir,
        help="output folder (default: the spec's [output] dir, else results/sweep/NAME, NAME the spec's file name)",
    )  # fmt: skip
    sweep.add_argument("--json", action="store_true", help="print the table and what was run as one JSON object")
    sweep.add_argument(
        "--scheduler", metavar="ADDRESS", type=argtypes.scheduler_address,
        help="run on the Dask cluster of this scheduler, e.g. tcp://127.0.0.1:8786 (default: $CRITMEM_DASK_SCHEDULER, else local processes)",
    )  # fmt: skip
    sweep.add_argument("--workers", metavar="N", type=argtypes.int_at_least(1), help="local worker processes (default: one per core)")
    sweep.set_defaults(handler=_cmd_sweep)
