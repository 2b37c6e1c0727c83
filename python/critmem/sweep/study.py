"""A sweep spec run (`critmem sweep SPEC.toml`, `run_spec`): every run simulated on a `Sweep`
with its results kept in OUT/.critmem-sweep, the metrics taken from each run's `critmem run
--json` result, a table with one row per run (runs.csv, runs.parquet) and a plot per varied key.

A metric is a dotted path into that result: a table's key, then into a list either an entry's
`name` (`tasks.navigation.hit_ratio`) or its index (`memory.banks.4.used_frames`). The paths
are checked against the first run's result before the others run.

The table's rows are in the spec's order (the points of the varied keys, the last varying
fastest, each with every seed), whatever finished first, so the same spec writes the same bytes
on local processes and on a Dask cluster.
"""

from __future__ import annotations

import difflib
import json
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from critmem.progress import Progress, QuietProgress
from critmem.sweep import table
from critmem.sweep.runner import Executor, LocalProcesses, ScenarioItem, Sweep, SweepError, simulate
from critmem.sweep.spec import SpecError, SweepSpec, load_spec, without_position

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["CACHE_DIR", "SweepOutcome", "default_out_dir", "lookup", "metric_paths", "run_spec"]

CACHE_DIR = ".critmem-sweep"
"""The folder in the output folder where each run's result is kept as it arrives."""
# The names of the files the last run wrote, so a later run removes those it no longer writes
# (a plot of a key no longer varied) and nothing else.
_MANIFEST = ".critmem-sweep-files"
_OWN_FILE = re.compile(r"runs\.(csv|parquet)|plot-[A-Za-z0-9._-]+\.png")


@dataclass(frozen=True)
class SweepOutcome:
    """What a spec's sweep made: its table, the files written and how many runs it computed."""

    spec: SweepSpec
    out_dir: Path
    rows: tuple[tuple[Any, ...], ...]
    """One row per run, in the spec's order; a value per column (`columns`)."""
    files: tuple[Path, ...]
    """The files written (runs.csv, runs.parquet, plots), in out_dir."""
    computed: int
    """Runs simulated by this call."""
    reused: int
    """Runs taken from the cache (an earlier call that was stopped, or ran the same runs)."""

    @property
    def columns(self) -> tuple[str, ...]:
        """The varied keys, `seed`, then the metrics."""
        return self.spec.columns

    def records(self) -> list[dict[str, Any]]:
        """The rows as dicts, column → value."""
        return [dict(zip(self.columns, row, strict=True)) for row in self.rows]

    def frame(self) -> pd.DataFrame:
        """The table as a pandas DataFrame, typed as runs.parquet is."""
        return table.frame(self.columns, self.rows)


def default_out_dir(spec: SweepSpec) -> Path:
    """Where a spec's results go when neither it nor the caller names a folder:
    results/sweep/NAME in the current folder, NAME the spec's file name without `.toml`."""
    stem = Path(spec.name).stem if spec.name != "<spec>" else "spec"
    return Path("results") / "sweep" / stem


def run_spec(
    spec: SweepSpec | str | os.PathLike[str],
    *,
    out_dir: str | os.PathLike[str] | None = None,
    executor: Executor | None = None,
    progress: Progress | None = None,
) -> SweepOutcome:
    """Runs the sweep `spec` (a spec file's path, or one `load_spec` read) and writes its
    table and plots to `out_dir` (default: the spec's `[output] dir`, else
    `default_out_dir(spec)`). Runs already in out_dir's cache are not simulated again.

    `executor` is where the runs happen (default: local processes, one per core; it is closed
    at the end); `progress` counts one step per run and one for writing. Raises SpecError (a
    SweepError) for a spec, a point or a metric that cannot run, in one line.
    """
    try:
        if not isinstance(spec, SweepSpec):
            spec = load_spec(spec)
        out = Path(out_dir) if out_dir is not None else spec.out_dir or default_out_dir(spec)
        items = _items(spec)
        try:
            out.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise SweepError(f"cannot write results to {str(out)!r}: {e.strerror or e}") from None
    except BaseException:
        if executor is not None:  # the sweep owns the executor it is given
            executor.close()
        raise
    progress = progress or QuietProgress()
    progress.start(len(items) + 1)
    with Sweep(executor or LocalProcesses(), cache_dir=out / CACHE_DIR, progress=progress) as sweep:
        # The first run alone, so a metric that is not in its result stops the sweep before
        # the other runs are made.
        first = sweep.map(simulate, items[:1], label=_label)
        _check_metrics(spec, first[0])
        results = first + sweep.map(simulate, items[1:], label=_label)
        computed, reused = len(sweep.computed), len(sweep.reused)
    progress.step("writing the table and plots")
    rows = tuple(_row(spec, item, result) for item, result in zip(items, results, strict=True))
    files = _write(spec, out, rows)
    return SweepOutcome(spec, out, rows, files, computed, reused)


# ---------------------------------------------------------------------------------------------
# Runs


def _items(spec: SweepSpec) -> list[ScenarioItem]:
    """One work item per run, each point's scenario loaded (not run) first so that a value a key
    cannot take is an error before anything runs."""
    from critmem import _core
    from critmem._core import ScenarioError
    from critmem.plugins import scenario_dir

    directory = str(spec.scenario_dir.resolve())
    items = []
    for point in spec.points():
        base = ScenarioItem(spec.scenario, overrides=point)
        where = f"{spec.scenario_name} with {_point_label(point)}" if point else spec.scenario_name
        try:
            scenario = base.scenario_dict()
        except SweepError as e:
            raise SpecError(f"{spec.name}: {where}: {e}") from None
        try:
            with scenario_dir(directory):
                _core.validate(json.dumps(scenario, default=str), where, "json")
        except ScenarioError as e:
            raise SpecError(f"{spec.name}: {without_position(str(e))}") from None
        items += [ScenarioItem(spec.scenario, seed=seed, overrides=point, directory=directory) for seed in spec.seeds]
    return items


def _point_label(point: Sequence[tuple[str, Any]]) -> str:
    return ", ".join(f"{k}={table.cell_text(v)}" for k, v in point)


def _label(item: ScenarioItem) -> str:
    return ", ".join([*(f"{k}={table.cell_text(v)}" for k, v in item.overrides), f"seed {item.seed}"])


def _row(spec: SweepSpec, item: ScenarioItem, result: dict[str, Any]) -> tuple[Any, ...]:
    values = []
    for metric in spec.metrics:
        found, value = lookup(result, metric)
        if not found or isinstance(value, (dict, list)):
            raise SpecError(f"{spec.name}: metric {metric} is not a value in the result of the run with {_label(item)}")
        values.append(value)
    return (*(v for _, v in item.overrides), item.seed, *values)


# ---------------------------------------------------------------------------------------------
# Metrics: dotted paths into a run's result


def _segments(node: Any, parts: Sequence[str], i: int) -> tuple[Any, int] | None:
    """The child of `node` that parts[i:j] names (a key, a list entry's name, or an index; the
    longest name first, since names may hold dots), and j; None if there is none."""
    for j in range(len(parts), i, -1):
        name = ".".join(parts[i:j])
        if isinstance(node, dict) and name in node:
            return node[name], j
        if isinstance(node, list):
            for entry in node:
                if isinstance(entry, dict) and entry.get("name") == name:
                    return entry, j
    if isinstance(node, list) and parts[i].isdigit() and int(parts[i]) < len(node):
        return node[int(parts[i])], i + 1
    return None


def lookup(result: Any, path: str) -> tuple[bool, Any]:
    """(True, the value) at the dotted `path` in `result`, or (False, None)."""
    parts = path.split(".")
    node, i = result, 0
    while i < len(parts):
        step = _segments(node, parts, i)
        if step is None:
            return False, None
        node, i = step
    return True, node


def metric_paths(result: Any, prefix: str = "") -> list[str]:
    """Every path to a value in `result`, in its order: list entries by name where they have
    one, else by index."""
    if isinstance(result, dict):
        return [p for k, v in result.items() for p in metric_paths(v, f"{prefix}{k}.")]
    if isinstance(result, list):
        names = [e.get("name") if isinstance(e, dict) else None for e in result]
        named = all(isinstance(n, str) for n in names) and len(set(names)) == len(names)
        return [p for i, e in enumerate(result) for p in metric_paths(e, f"{prefix}{names[i] if named else i}.")]
    return [prefix[:-1]]


def _nearest(path: str, paths: list[str], n: int = 3) -> list[str]:
    """The paths most like `path`: those ending in the same key first."""
    last = path.rsplit(".", 1)[-1]
    same_end = [p for p in paths if p.rsplit(".", 1)[-1] == last]
    ranked = difflib.get_close_matches(path, same_end, n=n, cutoff=0) if same_end else []
    for p in difflib.get_close_matches(path, paths, n=n, cutoff=0.5):
        if p not in ranked:
            ranked.append(p)
    return ranked[:n]


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _check_metrics(spec: SweepSpec, result: dict[str, Any]) -> None:
    paths: list[str] | None = None
    for metric in spec.metrics:
        found, value = lookup(result, metric)
        if found and not isinstance(value, (dict, list)):
            continue
        if found:
            inside = [p for p in metric_paths(value, f"{metric}.") if _is_number(lookup(result, p)[1])]
            kind = "table" if isinstance(value, dict) else "list"
            holds = f"numbers such as {', '.join(inside[:3])}" if inside else "no numbers"
            raise SpecError(f"{spec.name}: metric {metric} is a {kind}, not a value; it holds {holds}")
        paths = paths if paths is not None else metric_paths(result)
        near = _nearest(metric, paths)
        hint = f"; nearest: {', '.join(near)}" if near else ""
        raise SpecError(f"{spec.name}: metric {metric} is not in a run's result (`critmem run --json`){hint}")


def _write(spec: SweepSpec, out: Path, rows: Sequence[tuple[Any, ...]]) -> tuple[Path, ...]:
    try:
        earlier = set((out / _MANIFEST).read_text(encoding="utf-8").splitlines())
    except FileNotFoundError:
        earlier = set()
    files: list[Path] = []
    if "csv" in spec.formats:
        (out / "runs.csv").write_bytes(table.csv_bytes(spec.columns, rows))
        files.append(out / "runs.csv")
    if "parquet" in spec.formats:
        table.write_parquet(spec.columns, rows, out / "runs.parquet")
        files.append(out / "runs.parquet")
    if spec.plots:
        from critmem.sweep import plots  # matplotlib: only when plotting

        files += plots.plot_keys(spec, rows, out)
    for name in sorted(earlier - {p.name for p in files}):
        if _OWN_FILE.fullmatch(name) and (out / name).is_file():
            (out / name).unlink()
    (out / _MANIFEST).write_text("".join(f"{p.name}\n" for p in files), encoding="utf-8")
    return tuple(files)
