"""A sweep spec: a TOML file naming a base scenario, the keys to vary, the seeds, the metrics to
keep and where to write them (`critmem sweep SPEC.toml`, `critmem.sweep.run_spec`).

    # A sweep over the quickstart's memory size and seeds
    scenario = "../quickstart.toml"     # relative to this file; or a [scenario] table inline
    seeds = 3                           # seeds 1, 2, 3; or a list, e.g. [7, 11]
    metrics = ["tasks.navigation.hit_ratio", "memory.tasks.analytics.major_faults"]

    [vary]
    "memory.total_mb" = [32, 64, 128]   # a list of values
    "run.horizon_ms" = { start = 1000, stop = 2000, step = 500 }   # 1000, 1500, 2000

    [[vary.zip]]                        # these keys move together: (10, 1), (20, 2)
    "task.0.period_ms" = [10, 20]
    "task.0.wcet_ms" = [1, 2]

    [output]
    dir = "results"                     # relative to this file (default: results/sweep/NAME
                                        # in the current folder, NAME the spec's file name)
    formats = ["csv", "parquet"]        # default: csv, and parquet where pyarrow is installed
    plots = true                        # one PNG per varied key (default true)

Every run is one point of the product of the varied keys (each `[[vary.zip]]` group is one
axis whose keys move together) with one seed. Loading checks everything a spec says that needs no
simulation; a metric's path is checked against the first run's result (`critmem.sweep.study`).
"""

from __future__ import annotations

import importlib.util
import itertools
import json
import math
import os
import re
import tomllib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from critmem.sweep.runner import SweepError

__all__ = ["FORMATS", "MAX_RUNS", "Axis", "SpecError", "SweepSpec", "load_spec", "parse_spec"]

FORMATS = ("csv", "parquet")
"""The table formats `[output] formats` takes."""
MAX_RUNS = 100_000
"""The most runs a spec may ask for (a range with a mistyped step would otherwise ask for
millions)."""

_U64_MAX = 2**64 - 1
_TOP_KEYS = ("scenario", "seeds", "metrics", "vary", "output")
_OUTPUT_KEYS = ("dir", "formats", "plots")
_RANGE_KEYS = ("start", "stop", "step")
_ZIP = "zip"
# The run's seed is what `seeds` varies; overriding it would leave the seed column wrong.
_SEED_KEY = "run.seed"


class SpecError(SweepError):
    """A sweep spec that cannot run, in one line naming the spec and what is wrong."""


@dataclass(frozen=True)
class Axis:
    """One axis of the sweep: a key and its values, or keys that move together (a zip group)."""

    keys: tuple[str, ...]
    values: tuple[tuple[Any, ...], ...]
    """One tuple per point of the axis, a value per key."""


@dataclass(frozen=True)
class SweepSpec:
    """A loaded and checked sweep spec."""

    name: str
    """The spec as messages name it: its path as given, or `<spec>`."""
    scenario: str
    """The base scenario's text: TOML, or JSON (starting with `{`) for one given inline."""
    scenario_name: str
    """The base scenario as messages name it: its path as the spec gives it, or `[scenario]`."""
    axes: tuple[Axis, ...]
    seeds: tuple[int, ...]
    metrics: tuple[str, ...]
    out_dir: Path | None
    """`[output] dir`, resolved against the spec's folder; None: the caller's default."""
    formats: tuple[str, ...]
    plots: bool
    scenario_dir: Path = Path(".")
    """Where the scenario's relative `file.py:Class` names start: the scenario file's folder, or
    the spec's for a [scenario] table."""

    @property
    def keys(self) -> tuple[str, ...]:
        """Every varied key, in the order of the axes."""
        return tuple(k for axis in self.axes for k in axis.keys)

    @property
    def columns(self) -> tuple[str, ...]:
        """The table's columns: the varied keys, `seed`, the metrics."""
        return (*self.keys, "seed", *self.metrics)

    def points(self) -> Iterator[tuple[tuple[str, Any], ...]]:
        """Every point of the sweep as (key, value) overrides, the last axis varying fastest."""
        for combo in itertools.product(*(axis.values for axis in self.axes)):
            yield tuple(pair for axis, values in zip(self.axes, combo, strict=True) for pair in zip(axis.keys, values, strict=True))

    @property
    def runs(self) -> int:
        return math.prod(len(a.values) for a in self.axes) * len(self.seeds)


def load_spec(path: str | os.PathLike[str]) -> SweepSpec:
    """Reads and checks the spec file `path`; SpecError (one line) for anything wrong with it."""
    name = str(path)
    try:
        data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as e:
        raise SpecError(f"{name}: {e.strerror or e}") from None
    except UnicodeDecodeError as e:
        raise SpecError(f"{name}: not UTF-8 text (invalid byte at offset {e.start})") from None
    except tomllib.TOMLDecodeError as e:
        raise SpecError(f"{name}: {' '.join(str(e).split())}") from None
    return parse_spec(data, name=name, folder=Path(path).parent)


def parse_spec(data: Mapping[str, Any], *, name: str = "<spec>", folder: Path | None = None) -> SweepSpec:
    """Checks a spec already read from TOML; relative paths in it are resolved against `folder`
    (default: the current folder). The base scenario is read and loaded (not run) to know its
    seed; SpecError (one line) for anything wrong."""
    return _Parser(name, folder or Path()).parse(data)


class _Parser:
    def __init__(self, name: str, folder: Path) -> None:
        self.name = name
        self.folder = folder

    def fail(self, message: str) -> SpecError:
        return SpecError(f"{self.name}: {message}")

    def parse(self, data: Mapping[str, Any]) -> SweepSpec:
        _refuse_unknown(self, data, _TOP_KEYS, "")
        if "scenario" not in data:
            raise self.fail('no scenario: give `scenario = "FILE.toml"` (relative to the spec) or a [scenario] table')
        if "metrics" not in data:
            raise self.fail('no metrics: give `metrics = ["tasks.NAME.hit_ratio", ...]`, paths into `critmem run --json`')
        scenario, scenario_name, scenario_seed = self.scenario(data["scenario"])
        axes = self.vary(data.get("vary", {}))
        seeds = self.seeds(data["seeds"]) if "seeds" in data else (scenario_seed,)
        metrics = self.metrics(data["metrics"], axes)
        out_dir, formats, plots = self.output(data.get("output", {}))
        scenario_dir = (self.folder / data["scenario"]).parent if isinstance(data["scenario"], str) else self.folder
        spec = SweepSpec(self.name, scenario, scenario_name, axes, seeds, metrics, out_dir, formats, plots, scenario_dir)
        if spec.runs > MAX_RUNS:
            raise self.fail(
                f"{spec.runs:,} runs (the varied values' product times the seeds) is more than the {MAX_RUNS:,} a sweep may make"
            )
        return spec

    # -- scenario ---------------------------------------------------------------------------

    def scenario(self, value: Any) -> tuple[str, str, int]:
        from critmem import _core
        from critmem._core import ScenarioError
        from critmem._source import read_path

        if isinstance(value, str):
            if not value:
                raise self.fail("scenario: an empty path")
            path = self.folder / value
            try:
                src = read_path(path)
            except OSError as e:
                raise self.fail(f"scenario {value}: {e.strerror or e}") from None
            except ScenarioError as e:
                raise self.fail(str(e)) from None
            text, fmt, shown = src.text, src.format, value
            if fmt == "json" and not text.lstrip().startswith("{"):
                raise self.fail(f"scenario {value}: a JSON scenario is an object (starting with {{)")
        elif isinstance(value, dict):
            try:
                text = json.dumps(value, allow_nan=False)
            except (TypeError, ValueError):
                raise self.fail("[scenario]: holds a date or time, which no scenario key takes") from None
            fmt, shown = "json", "[scenario]"
        else:
            raise self.fail(f"scenario: expected a file name or a [scenario] table (got {_shown(value)})")
        from critmem.plugins import scenario_dir

        try:
            with scenario_dir((self.folder / value).parent if isinstance(value, str) else self.folder):
                loaded = json.loads(_core.validate(text, shown, fmt))
        except ScenarioError as e:
            message = str(e) if isinstance(value, str) else without_position(str(e))
            raise self.fail(message) from None
        return text, shown, int(loaded["seed"])

    # -- vary -------------------------------------------------------------------------------

    def vary(self, table: Any) -> tuple[Axis, ...]:
        if not isinstance(table, dict):
            raise self.fail(f"vary: expected a table of keys to vary (got {_shown(table)})")
        axes: list[Axis] = []
        for key, values in self.leaves(table, "", zipped=False):
            axes.append(Axis((key,), tuple((v,) for v in values)))
        for n, group in enumerate(self.zip_groups(table.get(_ZIP)), 1):
            where = f"vary.zip[{n}]"
            if not isinstance(group, dict) or not group:
                raise self.fail(f"{where}: expected a table of keys, each with a list of values (got {_shown(group)})")
            leaves = self.leaves(group, "", zipped=True, where=where)
            lengths = {k: len(v) for k, v in leaves}
            if len(set(lengths.values())) > 1:
                shown = ", ".join(f"{k} has {n}" for k, n in lengths.items())
                raise self.fail(f"{where}: its keys move together, so their lists must be as long as one another ({shown})")
            keys = tuple(k for k, _ in leaves)
            points = tuple(zip(*(v for _, v in leaves), strict=True))
            seen: dict[str, int] = {}
            for i, point in enumerate(points):
                text = json.dumps(_typed(list(point)), sort_keys=True)
                if text in seen:
                    shown = ", ".join(f"{k} = {_toml(v)}" for k, v in zip(keys, point, strict=True))
                    raise self.fail(f"{where}: the point {shown} is listed twice (at {seen[text]} and {i})")
                seen[text] = i
            axes.append(Axis(keys, points))
        self.check_keys([k for axis in axes for k in axis.keys])
        return tuple(axes)

    def zip_groups(self, groups: Any) -> list[Any]:
        if groups is None:
            return []
        if not isinstance(groups, list) or not groups:
            raise self.fail(f"vary.zip: expected [[vary.zip]] tables of keys that move together (got {_shown(groups)})")
        return groups

    def leaves(self, table: dict[str, Any], prefix: str, *, zipped: bool, where: str = "vary") -> list[tuple[str, tuple[Any, ...]]]:
        """The (dotted key, values) of a table of keys to vary; a nested table that is not a
        range adds its name to the key, so `memory.total_mb = [...]` and
        `"memory.total_mb" = [...]` say the same."""
        out: list[tuple[str, tuple[Any, ...]]] = []
        for k, v in table.items():
            if not zipped and not prefix and k == _ZIP:
                continue
            key = f"{prefix}{k}"
            if not k or any(not part for part in k.split(".")):
                raise self.fail(f"{where}: {key!r} is not a dotted key like memory.total_mb")
            if isinstance(v, list):
                out.append((key, self.values(v, f"{where}.{key}", unique=not zipped)))
            elif isinstance(v, dict) and any(r in v for r in _RANGE_KEYS):
                out.append((key, self.range(v, f"{where}.{key}")))
            elif isinstance(v, dict):
                if not v:
                    raise self.fail(f"{where}.{key}: an empty table")
                out += self.leaves(v, f"{key}.", zipped=zipped, where=where)
            else:
                raise self.fail(
                    f"{where}.{key}: expected a list of values or a {{start, stop, step}} range (got {_shown(v)}; one value is a list of one: [{_toml(v)}])"
                )
        return out

    def values(self, values: list[Any], where: str, *, unique: bool) -> tuple[Any, ...]:
        """A key's list of values; `unique`: no value twice (a zipped key may repeat a value,
        its group's points may not)."""
        if not values:
            raise self.fail(f"{where}: an empty list (give at least one value)")
        seen: dict[str, int] = {}
        for i, v in enumerate(values):
            bad = _non_scenario_value(v)
            if bad is not None:
                raise self.fail(f"{where}[{i}]: {bad}")
            # Typed, so 1 and 1.0 and true stay apart, as they do in the scenario.
            text = json.dumps(_typed(v), sort_keys=True)
            if unique and text in seen:
                raise self.fail(f"{where}: {_toml(v)} is listed twice (at {seen[text]} and {i})")
            seen[text] = i
        return tuple(values)

    def range(self, r: dict[str, Any], where: str) -> tuple[Any, ...]:
        extra = sorted(set(r) - set(_RANGE_KEYS))
        missing = [k for k in _RANGE_KEYS if k not in r]
        if extra or missing:
            problem = f"unknown key {extra[0]!r}" if extra else f"no {missing[0]}"
            raise self.fail(f"{where}: a range is {{start, stop, step}}: {problem}")
        for k in _RANGE_KEYS:
            if isinstance(r[k], bool) or not isinstance(r[k], (int, float)) or not math.isfinite(r[k]):
                raise self.fail(f"{where}.{k}: expected a number (got {_shown(r[k])})")
        start, stop, step = r["start"], r["stop"], r["step"]
        if step <= 0:
            raise self.fail(f"{where}.step: must be positive (got {_toml(step)})")
        if stop < start:
            raise self.fail(f"{where}: stop ({_toml(stop)}) is below start ({_toml(start)})")
        # stop is included when the grid reaches it; the slack absorbs 0.1 + 0.2 != 0.3.
        n = math.floor((stop - start) / step + 1e-9) + 1
        if n > MAX_RUNS:
            raise self.fail(f"{where}: {n:,} values, more than the {MAX_RUNS:,} a sweep may make")
        if all(type(r[k]) is int for k in _RANGE_KEYS):
            return tuple(start + i * step for i in range(n))
        return tuple(round(start + i * step, 12) for i in range(n))

    def check_keys(self, keys: list[str]) -> None:
        seen: set[str] = set()
        for key in keys:
            if key in seen:
                raise self.fail(f"vary: {key} is varied twice")
            if key == _SEED_KEY:
                raise self.fail("vary: run.seed is what `seeds` varies; list the seeds there")
            seen.add(key)
        for a in keys:
            for b in keys:
                if b.startswith(a + "."):
                    raise self.fail(f"vary: {b} lies inside {a}, which is varied too")

    # -- seeds, metrics, output ------------------------------------------------------------

    def seeds(self, value: Any) -> tuple[int, ...]:
        if isinstance(value, int) and not isinstance(value, bool):
            if not 1 <= value <= MAX_RUNS:
                raise self.fail(f"seeds: a count from 1 to {MAX_RUNS:,} (got {value})")
            return tuple(range(1, value + 1))
        if not isinstance(value, list) or not value:
            raise self.fail(f"seeds: expected a count (seeds 1 to N) or a list of seeds (got {_shown(value)})")
        for i, s in enumerate(value):
            if isinstance(s, bool) or not isinstance(s, int) or not 0 <= s <= _U64_MAX:
                raise self.fail(f"seeds[{i}]: expected a whole number from 0 to 2**64 - 1 (got {_shown(s)})")
        if len(set(value)) != len(value):
            twice = next(s for s in value if value.count(s) > 1)
            raise self.fail(f"seeds: {twice} is listed twice")
        return tuple(value)

    def metrics(self, value: Any, axes: tuple[Axis, ...]) -> tuple[str, ...]:
        if not isinstance(value, list) or not value:
            raise self.fail(
                f'metrics: expected a list of paths into `critmem run --json`, e.g. ["tasks.NAME.hit_ratio"] (got {_shown(value)})'
            )
        taken = {k: "a varied key" for axis in axes for k in axis.keys} | {"seed": "the seed column"}
        for i, m in enumerate(value):
            if not isinstance(m, str) or not m or any(not part for part in m.split(".")):
                raise self.fail(f"metrics[{i}]: expected a dotted path like tasks.NAME.hit_ratio (got {_shown(m)})")
            if m in taken:
                raise self.fail(f"metrics: {m} is listed twice" if taken[m] == "a metric" else f"metrics: {m} is {taken[m]}'s column")
            taken[m] = "a metric"
        return tuple(value)

    def output(self, table: Any) -> tuple[Path | None, tuple[str, ...], bool]:
        if not isinstance(table, dict):
            raise self.fail(f"output: expected a table (got {_shown(table)})")
        _refuse_unknown(self, table, _OUTPUT_KEYS, "output.")
        out_dir: Path | None = None
        if "dir" in table:
            d = table["dir"]
            if not isinstance(d, str) or not d:
                raise self.fail(f"output.dir: expected a folder name (got {_shown(d)})")
            out_dir = self.folder / d
        has_pyarrow = importlib.util.find_spec("pyarrow") is not None
        formats: tuple[str, ...] = ("csv", "parquet") if has_pyarrow else ("csv",)
        if "formats" in table:
            f = table["formats"]
            if not isinstance(f, list) or not f or any(x not in FORMATS for x in f) or len(set(f)) != len(f):
                raise self.fail(f"output.formats: expected a list of distinct formats out of {', '.join(FORMATS)} (got {_shown(f)})")
            if "parquet" in f and not has_pyarrow:
                raise self.fail("output.formats: parquet needs pyarrow: pip install 'critmem[parquet]'")
            formats = tuple(x for x in FORMATS if x in f)
        plots = table.get("plots", True)
        if not isinstance(plots, bool):
            raise self.fail(f"output.plots: expected true or false (got {_shown(plots)})")
        return out_dir, formats, plots


def without_position(message: str) -> str:
    """A loader's message less its "at line L column C": a position in JSON critmem made (from
    an inline table or overrides), which the user never saw."""
    return re.sub(r" at line [0-9]+ column [0-9]+$", "", message)


def _refuse_unknown(parser: _Parser, table: Mapping[str, Any], known: tuple[str, ...], prefix: str) -> None:
    for k in table:
        if k not in known:
            raise parser.fail(f"unknown key {prefix}{k} (known: {', '.join(f'{prefix}{x}' for x in known)})")


def _non_scenario_value(v: Any) -> str | None:
    """Why `v` cannot be a scenario's value (a date or time, or a non-finite float), or None."""
    if isinstance(v, list):
        return next((r for r in map(_non_scenario_value, v) if r is not None), None)
    if isinstance(v, dict):
        return next((r for r in map(_non_scenario_value, v.values()) if r is not None), None)
    if isinstance(v, float) and not math.isfinite(v):
        return f"{v} is not a finite number"
    if v is None or isinstance(v, (bool, int, float, str)):
        return None
    return f"a {type(v).__name__}, which no scenario key takes"


def _typed(v: Any) -> Any:
    if isinstance(v, list):
        return [_typed(x) for x in v]
    if isinstance(v, dict):
        return {k: _typed(x) for k, x in v.items()}
    return [type(v).__name__, v]


def _toml(v: Any) -> str:
    """`v` as TOML writes it, for messages."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, (int, float)):
        return repr(v)
    return json.dumps(v, default=str)


def _shown(v: Any) -> str:
    """What a message says it got."""
    kind = {bool: "a boolean", int: "a number", float: "a number", str: "a string", list: "a list", dict: "a table"}.get(type(v))
    if kind is None:
        return f"a {type(v).__name__}"
    if isinstance(v, (list, dict)):
        return kind
    text = _toml(v)
    return f"{kind}, {text if len(text) <= 40 else text[:37] + '...'}"
