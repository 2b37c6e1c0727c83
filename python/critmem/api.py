"""The Python API: `run` simulates a scenario, `analyze` runs the schedulability analyses."""

from __future__ import annotations

import inspect
import json
import textwrap
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any, TypeVar

import numpy as np
import pandas as pd

from critmem import _core
from critmem._source import ScenarioInput, ScenarioSource, resolve

MAX_TRACE_RECORDS: int = _core.MAX_TRACE_RECORDS
"""Most job records and most segments a run keeps (the core's cap)."""

# Column → dtype of the per-job and per-segment frames. Explicit, so that an empty trace
# (nothing recorded) still has the right columns and types. Times are decimal ms.
# Fixed vocabularies are categoricals, so a frame knows every value even where none occurs.
OUTCOME_DTYPE = pd.CategoricalDtype(["completed", "aborted", "killed", "unfinished", "pending"])
CRITICALITY_DTYPE = pd.CategoricalDtype(["A", "B", "C", "D"], ordered=True)
JOB_DTYPES: dict[str, str | pd.CategoricalDtype] = {
    "task": "str",
    "job": "int64",
    "release_ms": "float64",
    "deadline_ms": "float64",
    "demand_ms": "float64",
    "executed_ms": "float64",
    "start_ms": "float64",  # NaN if the job never started
    "completion_ms": "float64",  # NaN if it never completed
    "response_ms": "float64",  # NaN if it never completed
    "tardiness_ms": "float64",
    "missed": "bool",
    "outcome": OUTCOME_DTYPE,
    "last_cpu": "Int64",  # <NA> if the job never ran
}
SERVER_DTYPES: dict[str, str | pd.CategoricalDtype] = {
    "name": "str",
    "parent": "str",  # "root" for a top-level server
    "kind": "str",  # deferrable | polling | level
    "cpu": "int64",
    "budget_ms": "float64",  # NaN for a level
    "period_ms": "float64",  # NaN for a level
    "consumed_ms": "float64",  # its jobs' and child-scheduler threads' time, descendants' included
    "replenishments": "int64",
    "exhaustions": "int64",
    "events_delivered": "int64",
    "event_ms": "float64",  # its own child-scheduler thread's time delivering events
}
# Columns `servers` has beyond SERVER_DTYPES when a server reserves memory in the page-level model.
SERVER_MEMORY_DTYPES: dict[str, str | pd.CategoricalDtype] = {
    "memory_reserved_mb": "float64",  # its reserve.memory_mib; NaN for a server reserving none
    "memory_kind": "str",  # hard | soft; None for a server reserving none
    "peak_resident_pages": "int64",  # the most pages its subtree's tasks held at once
}
SERVER_SUPPLY_DTYPES: dict[str, str | pd.CategoricalDtype] = {"server": "str", "period_start_ms": "float64", "consumed_ms": "float64"}
SERVER_EVENT_DTYPES: dict[str, str | pd.CategoricalDtype] = {"server": "str", "cpu": "int64", "start_ms": "float64", "end_ms": "float64"}
SERVER_EXHAUSTION_DTYPES: dict[str, str | pd.CategoricalDtype] = {"server": "str", "cpu": "int64", "time_ms": "float64"}
WAIT_DTYPES: dict[str, str | pd.CategoricalDtype] = {
    "task": "str",
    "job": "int64",
    "resource": "str",  # the resource's name; stack:NAME for a component's stack
    "start_ms": "float64",
    "end_ms": "float64",
}
SEGMENT_DTYPES: dict[str, str | pd.CategoricalDtype] = {
    "cpu": "int64",
    "task": "str",
    "job": "int64",
    "start_ms": "float64",
    "end_ms": "float64",
}

_U64_MAX = 2**64 - 1

_TMEM_CACHE_COLUMNS = (
    "component", "kind", "min_units", "peak_allocated_units", "final_allocated_units", "final_desired_units",
    "gets", "grows", "waits", "total_wait_ns", "longest_wait_ns", "removed_units", "longest_hold_ns",
    "longest_shrink_lag_ns",
)  # fmt: skip


def _frame(columns: dict[str, list[Any]], dtypes: dict[str, str | pd.CategoricalDtype]) -> pd.DataFrame:
    return pd.DataFrame({name: pd.Series(columns[name], dtype=dtype) for name, dtype in dtypes.items()})


def _server_dtypes(columns: dict[str, list[Any]]) -> dict[str, str | pd.CategoricalDtype]:
    """The server table's columns: the memory ones only when a server reserves memory."""
    return {**SERVER_DTYPES, **SERVER_MEMORY_DTYPES} if "memory_reserved_mb" in columns else SERVER_DTYPES


def _trace_frame(
    columns: dict[str, tuple[str, bytes]], dtypes: dict[str, str | pd.CategoricalDtype], task_names: list[str]
) -> pd.DataFrame:
    """A job or segment trace from the core's raw columns: `task` arrives as indices into the
    scenario's tasks, `outcome` as codes into OUTCOME_DTYPE's categories and `last_cpu` as -1
    where the job never ran."""
    data: dict[str, Any] = {}
    for name, dtype in dtypes.items():
        raw_dtype, raw = columns[name]
        values = np.frombuffer(raw, dtype=raw_dtype)
        if name == "task":
            data[name] = pd.array(np.asarray(task_names, dtype=object)[values] if len(values) else [], dtype=dtype)
        elif name == "outcome":
            data[name] = pd.Categorical.from_codes(values, dtype=OUTCOME_DTYPE)
        elif name == "last_cpu":
            data[name] = pd.arrays.IntegerArray(values.copy(), values < 0)
        else:
            data[name] = values.astype(str(dtype), copy=False)
    # The numeric columns stay views of the core's buffers: a million-job trace is not copied.
    return pd.DataFrame(data, copy=False)


def _raw_frame(columns: dict[str, tuple[str, bytes]]) -> pd.DataFrame:
    """A frame of the core's raw numeric columns, (dtype, little-endian bytes) each: no Python
    object per value. An empty column stays a list, typed as pandas types an empty list."""
    return pd.DataFrame({name: np.frombuffer(raw, dtype=dtype) if raw else [] for name, (dtype, raw) in columns.items()})


def _doc(text: str) -> dict[str, str]:
    """A field's description, kept in its metadata: `_document_fields` lists it in the class
    docstring, which `help()` shows (an attribute docstring it never shows)."""
    return {"doc": " ".join(text.split())}


_T = TypeVar("_T")


def _document_fields(cls: type[_T]) -> type[_T]:
    """Appends an `Attributes` section to `cls`'s docstring: each dataclass field with its
    annotation and its `_doc` text, so `help(cls)` lists every field with its meaning and unit."""
    lines = [inspect.cleandoc(cls.__doc__ or ""), "", "Attributes", "----------"]
    for f in fields(cls):  # type: ignore[arg-type]
        lines.append(f"{f.name} : {f.type}")
        lines += textwrap.wrap(f.metadata["doc"], width=88, initial_indent="    ", subsequent_indent="    ")
    cls.__doc__ = "\n".join(lines) + "\n"
    return cls


# The per-task columns of `RunResult.tasks` (the summary's per-task keys), with their units.
_RUN_TASK_COLUMNS = """name, criticality (categorical A–D, A highest), cpu (the CPU a partitioned scheduler
binds the task to, <NA> otherwise); counts of jobs: jobs (released), completed,
deadline_misses, aborted, dropped (of the aborted, those a controller dropped), killed (out
of memory), skipped (releases dropped because the previous job was unfinished), pending
(unfinished at the horizon with the deadline still ahead); hit_ratio (share 0–1 of the judged
jobs, all but pending ones, that met their deadline; NaN when none was judged);
max_response_ms, mean_response_ms (ms, NaN when no job completed), max_tardiness_ms (ms);
throughput_per_s (completed jobs per simulated second)."""


@_document_fields
@dataclass(frozen=True, eq=False)
class RunResult:
    """One simulation run. `to_json()` is the core's summary, byte for byte.

    Times are in milliseconds (`_ms`), memory in MB of 2**20 bytes (`_mb`) or in pages
    (`_pages`), PSI totals in microseconds (`_us`). `memory_timeline_long()` and
    `control_timeline_long()` give the timelines in long (tidy) form.
    """

    summary: dict[str, Any] = field(
        repr=False,
        metadata=_doc("""The summary JSON as a dict: scenario, scheduler, cpus, horizon_ms (ms), seed, tasks
        (one dict per task, the keys of `tasks`), and the sections the scenario enables (memory,
        control, servers, traces)."""),
    )
    tasks: pd.DataFrame = field(repr=False, metadata=_doc("One row per task, columns: " + _RUN_TASK_COLUMNS))
    jobs: pd.DataFrame = field(
        repr=False,
        metadata=_doc("""One row per job, ordered by release time (dtypes: `JOB_DTYPES`): task, job (index from 0),
        release_ms, deadline_ms (absolute, ms), demand_ms (execution time it needs, ms),
        executed_ms (ms it ran), start_ms, completion_ms, response_ms (ms; NaN if it never
        started or completed), tardiness_ms (ms past its deadline, 0 if met), missed (bool),
        outcome (categorical: completed, aborted, killed, unfinished, pending), last_cpu (<NA>
        if it never ran)."""),
    )
    segments: pd.DataFrame = field(
        repr=False,
        metadata=_doc("""One row per stretch a job ran on a CPU, ordered as the engine emitted them
        (dtypes: `SEGMENT_DTYPES`): cpu, task, job, start_ms, end_ms (ms)."""),
    )
    jobs_left_out: int = field(
        metadata=_doc("""Jobs missing from `jobs` because a trace keeps at most its limit (`run(trace_limit=...)`,
        at most and by default `MAX_TRACE_RECORDS`; the first to end are kept; the summary and
        `tasks` still count every job, and the summary's `traces` section records the limit)."""),
    )
    segments_left_out: int = field(metadata=_doc("Segments missing from `segments` for the same reason."))
    seed: int = field(metadata=_doc("The random seed the run used (the scenario's, or `run(seed=...)`)."))
    events: int = field(metadata=_doc("Scheduler events the engine handled (a count)."))
    hyperperiod_ms: float | None = field(
        metadata=_doc("Least common multiple of the task periods (ms), None if it is not representable."),
    )
    memory_timeline: pd.DataFrame = field(
        repr=False,
        metadata=_doc("""Samples of memory use over time, wide (empty unless the scenario declares [memory]):
        time_ms (ms), reserved_physical_mb (MB set aside for reservations), used_mb (MB of frames
        in use machine-wide), then `reservation_pages:<name>` (pages each reservation accounts)
        and `resident_pages:<task>` (pages resident per task). Long form:
        `memory_timeline_long()`."""),
    )
    control_timeline: pd.DataFrame = field(
        repr=False,
        metadata=_doc("""One row per controller tick, wide (empty unless the scenario declares [control]):
        time_ms (ms), then per group `max_mb:<g>` and `high_mb:<g>` (memory.max and memory.high
        in MB, NaN when unlimited), `usage_mb:<g>` (MB) and the cumulative PSI totals
        `memory_some_us:<g>`, `io_some_us:<g>` (µs). A long run keeps one row per
        `control_timeline_every_ticks` ticks instead (past 2**20 rows, or 2**24 values). Long
        form: `control_timeline_long()`."""),
    )
    control_timeline_every_ticks: int = field(
        metadata=_doc("Controller ticks per row of `control_timeline` (1 unless a long run was thinned)."),
    )
    summary_json: str = field(repr=False, metadata=_doc("The summary JSON text, as `to_json()` returns it."))
    server_supply: pd.DataFrame = field(
        repr=False,
        metadata=_doc("""Per period of each budgeted server: server, period_start_ms (ms), consumed_ms (ms of
        budget used; the k-th period starts at k × period_ms; empty without servers)."""),
    )
    server_events: pd.DataFrame = field(
        repr=False,
        metadata=_doc("""Stretches each server's child-scheduler thread ran delivering events: server, cpu,
        start_ms, end_ms (ms; empty without servers or without `event_cost_us`)."""),
    )
    server_exhaustions: pd.DataFrame = field(
        repr=False,
        metadata=_doc("Instants each server's budget ran out: server, cpu, time_ms (ms)."),
    )
    server_table: pd.DataFrame | None = field(
        repr=False,
        metadata=_doc("""One row per server (dtypes: `SERVER_DTYPES`): name, parent, kind, cpu, budget_ms,
        period_ms (ms, NaN for a level), consumed_ms, event_ms (ms), replenishments,
        exhaustions, events_delivered (counts); when a server reserves memory in the page-level
        model also `SERVER_MEMORY_DTYPES`: memory_reserved_mb (MiB, NaN without a reservation),
        memory_kind, peak_resident_pages; None without servers; see `servers`."""),
    )
    task_servers: tuple[str | None, ...] = field(
        metadata=_doc("Each task's leaf server, in the order of `tasks` (empty without servers)."),
    )
    waits: pd.DataFrame = field(
        repr=False,
        metadata=_doc("""One row per stretch a job waited (dtypes: `WAIT_DTYPES`): task, job, resource,
        start_ms, end_ms (ms), in order of the wait's end: for units of a resource, for a stack
        of a component (resource `stack:NAME`), or held back from starting under srp (the
        resource whose ceiling held it back, or `srp`). A wait ends at its grant, at its job's
        end if the job was aborted while waiting, or at the horizon. Empty unless jobs are
        recorded and the scenario declares a resource or a component."""),
    )
    waits_left_out: int = field(
        metadata=_doc("Waits missing from `waits` because a trace keeps at most its limit."),
    )
    resources_declared: bool = field(
        metadata=_doc("Whether the scenario declares a resource or a component (`run --out` then writes waits.csv)."),
    )
    warnings: tuple[str, ...] = field(
        default=(),
        metadata=_doc("""What the scenario allows but rarely means (one line each naming the key); `run` also
        issues each as a `ScenarioWarning`."""),
    )

    def to_json(self) -> str:
        """The summary JSON text, byte for byte what `critmem run --json` prints."""
        return self.summary_json

    def __repr__(self) -> str:
        t = self.tasks
        return (
            f"RunResult(scenario={self.scenario!r}, scheduler={self.scheduler!r}, cpus={self.cpus}, "
            f"horizon_ms={self.horizon_ms:g}, seed={self.seed}, tasks={len(t)}, jobs={int(t['jobs'].sum())}, "
            f"deadline_misses={int(t['deadline_misses'].sum())}, events={self.events})"
        )

    def _repr_html_(self) -> str:
        """A notebook's view: the header line and the per-task table (first rows only)."""
        columns = ["name", "criticality", "cpu", "jobs", "completed", "deadline_misses", "hit_ratio", "max_response_ms", "max_tardiness_ms"]
        return _html_summary(repr(self), self.tasks[columns])

    @property
    def scenario(self) -> str:
        """The scenario's name (its file's path, or what `run` was given)."""
        return str(self.summary["scenario"])

    @property
    def scheduler(self) -> str:
        """The scheduler's kind, as the scenario names it (rm, edf, gedf, ...)."""
        return str(self.summary["scheduler"])

    @property
    def cpus(self) -> int:
        """Number of CPUs simulated."""
        return int(self.summary["cpus"])

    @property
    def horizon_ms(self) -> float:
        """Length of the simulated run (ms)."""
        return float(self.summary["horizon_ms"])

    @property
    def memory(self) -> dict[str, Any] | None:
        """Per-task faults and swapping, PSI totals per group, reservations (with [memory]):
        the summary's `memory` section (page_bytes in bytes, sizes in `_mb` or `_pages`, times
        in `_ms`, PSI totals in `_us`), None without [memory]."""
        m = self.summary.get("memory")
        return None if m is None else dict(m)

    @property
    def tmem_caches(self) -> pd.DataFrame | None:
        """One row per cache TMEM manages (the summary's `tmem.caches`: component, kind
        stack|cbuf, units min/peak/final/desired, gets, grows, waits, wait times in ns,
        removed units, the longest hold and the longest shrink lag in ns), or None without
        [tmem]."""
        t = self.summary.get("tmem")
        return None if t is None else pd.DataFrame(t["caches"], columns=list(_TMEM_CACHE_COLUMNS))

    @property
    def tmem_timeline(self) -> pd.DataFrame | None:
        """One row per run of TMEM's memory scheduler: `time_ms`, units in caches
        (`allocated_units`), of them in use (`in_use_units`) and free in the pool
        (`pool_free_units`, <NA> with no limit); None without [tmem]."""
        t = self.summary.get("tmem")
        if t is None:
            return None
        points = t["timeline"]
        return pd.DataFrame(
            {
                "time_ms": pd.Series([p["time_ns"] / 1e6 for p in points], dtype="float64"),
                "allocated_units": pd.Series([p["allocated_units"] for p in points], dtype="int64"),
                "in_use_units": pd.Series([p["in_use_units"] for p in points], dtype="int64"),
                "pool_free_units": pd.Series([p["pool_free_units"] for p in points], dtype="Int64"),
            }
        )

    @property
    def servers(self) -> pd.DataFrame | None:
        """One row per server of the scheduler hierarchy (columns: `SERVER_DTYPES`), or None
        when the scenario declares none."""
        return self.server_table

    def memory_timeline_long(self) -> pd.DataFrame:
        """`memory_timeline` in long (tidy) form: one row per sample per series, sample-major
        and series in the wide frame's column order (columns: `MEMORY_TIMELINE_LONG_DTYPES`).

        - time_ms: the sample's time (ms);
        - kind: categorical `MEMORY_SERIES_KIND`: `reservation` (pages a reservation accounts),
          `resident` (a task's resident pages), `machine` (machine-wide series);
        - name: the reservation's or task's name, or for `machine` rows `reserved_physical`
          (memory set aside for reservations) or `used` (frames in use);
        - value_mb: the value in MB (pages × the scenario's page size / 2**20);
        - pages: the value in pages, as the wide frame holds it (<NA> for the machine-wide
          series, which the core gives in MB).

        `seaborn.relplot(data=r.memory_timeline_long(), x="time_ms", y="value_mb", hue="name",
        row="kind", kind="line")` plots it without reshaping. Empty (with these columns)
        without [memory].
        """
        return _memory_timeline_long(self)

    def control_timeline_long(self) -> pd.DataFrame:
        """`control_timeline` in long (tidy) form: one row per recorded tick per group,
        tick-major and groups in `[[group]]` order (columns: `CONTROL_TIMELINE_COLUMNS`):
        time_ms (ms), tick (counts from 1; a long run records one tick in
        `control_timeline_every_ticks`), group, max_mb and high_mb (memory.max and memory.high
        in MB, NaN, an empty CSV cell, when unlimited), usage_mb (MB), and the cumulative PSI
        totals memory_some_us, io_some_us (µs, int64). `critmem run --out` writes it as
        control_timeline.csv. Empty (with these columns) without [control]."""
        return _control_timeline_long(self)


# Kinds of series in `RunResult.memory_timeline_long()`.
MEMORY_SERIES_KIND = pd.CategoricalDtype(["reservation", "resident", "machine"])
MEMORY_TIMELINE_LONG_DTYPES: dict[str, str | pd.CategoricalDtype] = {
    "time_ms": "float64",
    "kind": MEMORY_SERIES_KIND,
    "name": "str",
    "value_mb": "float64",
    "pages": "Int64",
}
# The wide frame's machine-wide columns (MB) → their `name` in the long form.
_MACHINE_SERIES = {"reserved_physical_mb": "reserved_physical", "used_mb": "used"}
_MIB = 1_048_576


def _memory_timeline_long(result: RunResult) -> pd.DataFrame:
    wide = result.memory_timeline
    memory = result.memory
    if memory is None or wide.empty:
        return pd.DataFrame({name: pd.Series([], dtype=dtype) for name, dtype in MEMORY_TIMELINE_LONG_DTYPES.items()})
    page_mb = float(memory["page_bytes"]) / _MIB
    kinds: list[str] = []
    names: list[str] = []
    values_mb: list[np.ndarray[Any, np.dtype[np.float64]]] = []
    pages: list[np.ndarray[Any, np.dtype[np.int64]]] = []
    missing: list[bool] = []
    for column in (str(c) for c in wide.columns):
        if column == "time_ms":
            continue
        if column in _MACHINE_SERIES:
            kinds.append("machine")
            names.append(_MACHINE_SERIES[column])
            values_mb.append(wide[column].to_numpy(dtype="float64"))
            pages.append(np.zeros(len(wide), dtype="int64"))
            missing.append(True)
            continue
        prefix, name = column.split(":", 1)
        kinds.append({"reservation_pages": "reservation", "resident_pages": "resident"}[prefix])
        names.append(name)
        counts = wide[column].to_numpy(dtype="int64")
        values_mb.append(counts * page_mb)
        pages.append(counts)
        missing.append(False)
    samples, series = len(wide), len(names)
    # One column per series side by side, read row by row: sample-major order.
    page_values = np.column_stack(pages).ravel()
    page_missing = np.tile(np.array(missing, dtype=bool), samples)
    return pd.DataFrame(
        {
            "time_ms": np.repeat(wide["time_ms"].to_numpy(dtype="float64"), series),
            "kind": pd.Categorical(np.tile(np.array(kinds, dtype=object), samples), dtype=MEMORY_SERIES_KIND),
            "name": pd.Series(np.tile(np.array(names, dtype=object), samples), dtype="str"),
            "value_mb": np.column_stack(values_mb).ravel(),
            "pages": pd.arrays.IntegerArray(page_values, page_missing),
        }
    )


# The columns of `RunResult.control_timeline_long()` (and control_timeline.csv), in order.
CONTROL_TIMELINE_COLUMNS = ("time_ms", "tick", "group", "max_mb", "high_mb", "usage_mb", "memory_some_us", "io_some_us")


def _control_timeline_long(result: RunResult) -> pd.DataFrame:
    control = result.summary.get("control")
    names = [str(g["name"]) for g in control["groups"]] if control is not None else []
    wide = result.control_timeline
    rows = len(wide) if names else 0

    def stacked(field: str) -> Any:
        # One column per group side by side, read row by row: tick-major order.
        return np.column_stack([wide[f"{field}:{g}"].to_numpy() for g in names]).ravel() if rows else np.array([], dtype="float64")

    ticks = 1 + np.arange(rows, dtype="int64") * result.control_timeline_every_ticks
    return pd.DataFrame(
        {
            "time_ms": np.repeat(wide["time_ms"].to_numpy() if rows else np.array([], dtype="float64"), len(names)),
            "tick": np.repeat(ticks, len(names)),
            "group": pd.Series(np.tile(np.array(names, dtype=object), rows), dtype="str"),
            "max_mb": stacked("max_mb"),
            "high_mb": stacked("high_mb"),
            "usage_mb": stacked("usage_mb"),
            "memory_some_us": stacked("memory_some_us").astype("int64"),
            "io_some_us": stacked("io_some_us").astype("int64"),
        },
        columns=list(CONTROL_TIMELINE_COLUMNS),
    )


# Rows a notebook view shows of a per-task table before it says how many it left out.
_HTML_ROWS = 20


def _html_summary(title: str, table: pd.DataFrame) -> str:
    import html

    more = len(table) - _HTML_ROWS
    note = f"<p>… and {more} more rows</p>" if more > 0 else ""
    return f"<p><code>{html.escape(title)}</code></p>{table.head(_HTML_ROWS).to_html(index=False)}{note}"


@_document_fields
@dataclass(frozen=True, eq=False)
class AnalysisResult:
    """Schedulability analyses of one scenario. `to_json()` is the analysis report, byte for byte.

    Times are in milliseconds (`_ms`); utilizations are shares of one CPU (0–1 each).
    """

    report: dict[str, Any] = field(
        repr=False,
        metadata=_doc("""The report JSON as a dict: scenario, scheduler, cpus, total_utilization (sum of the
        tasks' wcet/period, in CPUs), verdict, tests, tasks, not_covered (what no test models), and
        resources and servers where the scenario declares them."""),
    )
    tasks: pd.DataFrame = field(
        repr=False,
        metadata=_doc("""One row per task, the report's per-task keys as columns: name, cpu (its partition CPU,
        0 on a one-CPU machine, None otherwise), utilization (wcet/period, share of one CPU),
        wcet_ms, period_ms (period or minimum inter-arrival time), deadline_ms (ms),
        priority_rank (fixed-priority rank, 0 highest; None for dynamic priorities),
        response_time_ms (worst-case response time, ms; None when no test gives one or the
        task can miss), schedulable (True never misses, False can miss, None not decided per
        task), tardiness_bound_ms (ms past the deadline, global EDF), criticality (categorical
        A–D), suspension_ms (self-suspension per job, ms)."""),
    )
    tests: pd.DataFrame = field(
        repr=False,
        metadata=_doc(
            "One row per test that applies: name, cpu (None for a test of the whole machine), verdict, detail (one sentence: the result and the assumptions it rests on)."
        ),
    )
    report_json: str = field(repr=False, metadata=_doc("The report JSON text, as `to_json()` returns it."))
    warnings: tuple[str, ...] = field(default=(), metadata=_doc("The scenario's warnings, as `RunResult.warnings`."))

    @property
    def verdict(self) -> str:
        """The overall verdict: schedulable, not_schedulable, bounded_tardiness,
        unbounded_tardiness or unknown (no test that applies could decide)."""
        return str(self.report["verdict"])

    def to_json(self) -> str:
        """The report JSON text, byte for byte what `critmem analyze --json` prints."""
        return self.report_json

    def __repr__(self) -> str:
        r = self.report
        return (
            f"AnalysisResult(scenario={r['scenario']!r}, scheduler={r['scheduler']!r}, cpus={r['cpus']}, "
            f"tasks={len(self.tasks)}, tests={len(self.tests)}, verdict={self.verdict!r})"
        )

    def _repr_html_(self) -> str:
        """A notebook's view: the header line and each test's verdict."""
        return _html_summary(repr(self), self.tests)


class ScenarioWarning(UserWarning):
    """Something a scenario file allows but rarely means (the message names the key)."""


def _issue(lines: list[str], warn: bool) -> tuple[str, ...]:
    """The scenario's warnings, issued as `ScenarioWarning`s when `warn`."""
    if warn:
        for line in lines:
            warnings.warn(line, ScenarioWarning, stacklevel=4)
    return tuple(lines)


def _check_seed(seed: int | None) -> None:
    if seed is None:
        return
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise TypeError(f"seed must be an int, not {type(seed).__name__}")
    if not 0 <= seed <= _U64_MAX:
        raise ValueError(f"seed must be between 0 and 2**64 - 1 (got {seed})")


def _run_source(
    src: ScenarioSource,
    *,
    seed: int | None = None,
    horizon_ms: float | None = None,
    record_jobs: bool = True,
    record_segments: bool = True,
    trace_limit: int | None = None,
    progress: Callable[[float], object] | None = None,
    warn: bool = True,
) -> RunResult:
    _check_seed(seed)
    if trace_limit is not None and (isinstance(trace_limit, bool) or not isinstance(trace_limit, int) or trace_limit < 0):
        raise ValueError(f"trace_limit must be a whole number of entries, at least 0 (got {trace_limit!r})")
    from critmem.plugins import scenario_dir

    with scenario_dir(src.directory):
        out = _core.simulate(
            src.text,
            src.name,
            src.format,
            seed=seed,
            horizon_ms=None if horizon_ms is None else float(horizon_ms),
            record_jobs=record_jobs,
            record_segments=record_segments,
            trace_limit=None if trace_limit is None else min(trace_limit, MAX_TRACE_RECORDS),
            progress=progress,
        )
    summary: dict[str, Any] = json.loads(out.summary_json)
    tasks = pd.DataFrame(summary["tasks"])
    # Partitioned schedulers bind tasks to CPUs, the others leave cpu null.
    tasks["cpu"] = tasks["cpu"].astype("Int64")
    tasks["criticality"] = tasks["criticality"].astype(CRITICALITY_DTYPE)
    # The engine lists jobs as they end; a trace reads better in release order.
    names = [str(t["name"]) for t in summary["tasks"]]
    # The core lists jobs in release order (those released together in the order they ended).
    jobs = _trace_frame(out.jobs, JOB_DTYPES, names)
    return RunResult(
        summary=summary,
        tasks=tasks,
        jobs=jobs,
        segments=_trace_frame(out.segments, SEGMENT_DTYPES, names),
        jobs_left_out=out.jobs_left_out,
        segments_left_out=out.segments_left_out,
        seed=out.seed,
        events=out.events,
        hyperperiod_ms=out.hyperperiod_ms,
        memory_timeline=pd.DataFrame(out.memory_timeline),
        control_timeline=_raw_frame(out.control_timeline),
        control_timeline_every_ticks=out.control_timeline_every_ticks,
        summary_json=out.summary_json,
        server_supply=_frame(out.server_supply, SERVER_SUPPLY_DTYPES),
        server_events=_frame(out.server_events, SERVER_EVENT_DTYPES),
        server_exhaustions=_frame(out.server_exhaustions, SERVER_EXHAUSTION_DTYPES),
        server_table=_frame(out.servers, _server_dtypes(out.servers)) if out.servers["name"] else None,
        task_servers=tuple(out.task_servers) if out.servers["name"] else (),
        waits=_frame(out.waits or {name: [] for name in WAIT_DTYPES}, WAIT_DTYPES),
        waits_left_out=out.waits_left_out,
        resources_declared=out.waits is not None,
        warnings=_issue(out.warnings, warn),
    )


def run(
    scenario: ScenarioInput,
    *,
    seed: int | None = None,
    horizon_ms: float | None = None,
    record_jobs: bool = True,
    record_segments: bool = True,
    trace_limit: int | None = None,
    progress: Callable[[float], object] | None = None,
) -> RunResult:
    """Simulates `scenario` to its horizon.

    `scenario` is a path (str or pathlib.Path) to a .toml/.json file, TOML text, or a dict
    with the file's structure. `seed` and `horizon_ms` override the scenario's `[run]`
    values. Turn off `record_jobs`/`record_segments` for long runs that need only the
    per-task summary, or keep at most `trace_limit` entries of each trace (at most
    `MAX_TRACE_RECORDS`, the default); the summary's `traces` section says what was left
    out. `progress`, if given, is called with the simulated time in ms a few times a second
    once the run has taken half a second; an exception it raises, or Ctrl-C, stops the run and
    propagates. Raises `ScenarioError` for a scenario that does not load and OSError
    for a file that cannot be read.
    """
    return _run_source(
        resolve(scenario),
        seed=seed,
        horizon_ms=horizon_ms,
        record_jobs=record_jobs,
        record_segments=record_segments,
        trace_limit=trace_limit,
        progress=progress,
    )


def _analyze_source(src: ScenarioSource, *, warn: bool = True) -> AnalysisResult:
    from critmem.plugins import scenario_dir

    with scenario_dir(src.directory):
        report_json, scenario_warnings = _core.analyze(src.text, src.name, src.format)
    report: dict[str, Any] = json.loads(report_json)
    tasks = pd.DataFrame(report["tasks"])
    if "criticality" in tasks:
        tasks["criticality"] = tasks["criticality"].astype(CRITICALITY_DTYPE)
    return AnalysisResult(
        report=report,
        tasks=tasks,
        tests=pd.DataFrame(report["tests"], columns=["name", "cpu", "verdict", "detail"]),
        report_json=report_json,
        warnings=_issue(scenario_warnings, warn),
    )


def analyze(scenario: ScenarioInput) -> AnalysisResult:
    """Runs the schedulability analyses that apply to `scenario`'s scheduler.

    Accepts the same inputs as `run`; raises the same errors.
    """
    return _analyze_source(resolve(scenario))
