"""The Python API: `run` simulates a scenario, `analyze` runs the schedulability analyses."""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

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


def _frame(columns: dict[str, list[Any]], dtypes: dict[str, str | pd.CategoricalDtype]) -> pd.DataFrame:
    return pd.DataFrame({name: pd.Series(columns[name], dtype=dtype) for name, dtype in dtypes.items()})


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


@dataclass(frozen=True, eq=False)
class RunResult:
    """One simulation run. `to_json()` is the core's summary, byte for byte."""

    summary: dict[str, Any] = field(repr=False)
    """The summary JSON as a dict: scenario, scheduler, cpus, horizon_ms, seed, tasks."""
    tasks: pd.DataFrame = field(repr=False)
    """One row per task, with the summary's per-task fields as columns."""
    jobs: pd.DataFrame = field(repr=False)
    """One row per job, ordered by release time (columns: `JOB_DTYPES`)."""
    segments: pd.DataFrame = field(repr=False)
    """One row per stretch a job ran on a CPU, ordered as the engine emitted them."""
    jobs_left_out: int
    """Jobs missing from `jobs` because a trace keeps at most `MAX_TRACE_RECORDS` (the first
    to end are kept; the summary and `tasks` still count every job)."""
    segments_left_out: int
    """Segments missing from `segments` for the same reason."""
    seed: int
    events: int
    """Scheduler events the engine handled."""
    hyperperiod_ms: float | None
    """Least common multiple of the task periods, if it is representable."""
    memory_timeline: pd.DataFrame = field(repr=False)
    """Samples of memory use over time (empty unless the scenario declares [memory]): time_ms,
    reserved_physical_mb, used_mb, then `reservation_pages:<name>` (pages each reservation
    accounts) and `resident_pages:<task>`."""
    control_timeline: pd.DataFrame = field(repr=False)
    """One row per controller tick: time_ms, then per group `max_mb:<g>` and `high_mb:<g>`
    (memory.max and memory.high, NaN when unlimited), `usage_mb:<g>` and the cumulative PSI
    totals `memory_some_us:<g>`, `io_some_us:<g>` (empty unless the scenario declares [control]). A long run keeps one row per `control_timeline_every_ticks`
    ticks instead (past 2**20 rows, or 2**24 values)."""
    control_timeline_every_ticks: int
    summary_json: str = field(repr=False)
    server_supply: pd.DataFrame = field(repr=False)
    """Per period of each budgeted server: server, period_start_ms, consumed_ms (the k-th
    period starts at k × period_ms; empty without servers)."""
    server_events: pd.DataFrame = field(repr=False)
    """Stretches each server's child-scheduler thread ran delivering events: server, cpu,
    start_ms, end_ms (empty without servers or without `event_cost_us`)."""
    server_exhaustions: pd.DataFrame = field(repr=False)
    """Instants each server's budget ran out: server, cpu, time_ms."""
    server_table: pd.DataFrame | None = field(repr=False)
    """One row per server (columns: `SERVER_DTYPES`), None without servers; see `servers`."""
    task_servers: tuple[str | None, ...]
    """Each task's leaf server, in the order of `tasks` (empty without servers)."""
    waits: pd.DataFrame = field(repr=False)
    """One row per stretch a job waited (columns: `WAIT_DTYPES`), in order of the wait's end:
    for units of a resource, for a stack of a component (resource `stack:NAME`), or held back
    from starting under srp (the resource whose ceiling held it back, or `srp`). A wait ends
    at its grant, at its job's end if the job was aborted while waiting, or at the horizon.
    Empty unless jobs are recorded and the scenario declares a resource or a component."""
    waits_left_out: int
    """Waits missing from `waits` because a trace keeps at most `MAX_TRACE_RECORDS`."""
    resources_declared: bool
    """Whether the scenario declares a resource or a component (`run --out` then writes
    waits.csv)."""
    warnings: tuple[str, ...] = ()
    """What the scenario allows but rarely means (one line each naming the key); `run` also
    issues each as a `ScenarioWarning`."""

    def to_json(self) -> str:
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
        return str(self.summary["scenario"])

    @property
    def scheduler(self) -> str:
        return str(self.summary["scheduler"])

    @property
    def cpus(self) -> int:
        return int(self.summary["cpus"])

    @property
    def horizon_ms(self) -> float:
        return float(self.summary["horizon_ms"])

    @property
    def memory(self) -> dict[str, Any] | None:
        """Per-task faults and swapping, PSI totals per group, reservations (with [memory])."""
        m = self.summary.get("memory")
        return None if m is None else dict(m)

    @property
    def servers(self) -> pd.DataFrame | None:
        """One row per server of the scheduler hierarchy (columns: `SERVER_DTYPES`), or None
        when the scenario declares none."""
        return self.server_table


# Rows a notebook view shows of a per-task table before it says how many it left out.
_HTML_ROWS = 20


def _html_summary(title: str, table: pd.DataFrame) -> str:
    import html

    more = len(table) - _HTML_ROWS
    note = f"<p>… and {more} more rows</p>" if more > 0 else ""
    return f"<p><code>{html.escape(title)}</code></p>{table.head(_HTML_ROWS).to_html(index=False)}{note}"


@dataclass(frozen=True, eq=False)
class AnalysisResult:
    """Schedulability analyses of one scenario. `to_json()` is the analysis report, byte for byte."""

    report: dict[str, Any] = field(repr=False)
    """The report JSON as a dict: scenario, scheduler, cpus, total_utilization, tasks, tests,
    verdict."""
    tasks: pd.DataFrame = field(repr=False)
    """One row per task: utilization, wcet/period/deadline, RTA response time, verdicts."""
    tests: pd.DataFrame = field(repr=False)
    """One row per test that applies: name, cpu, verdict, detail."""
    report_json: str = field(repr=False)
    warnings: tuple[str, ...] = ()
    """The scenario's warnings, as `RunResult.warnings`."""

    @property
    def verdict(self) -> str:
        return str(self.report["verdict"])

    def to_json(self) -> str:
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
        server_table=_frame(out.servers, SERVER_DTYPES) if out.servers["name"] else None,
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
