"""A run's schedule as Chrome trace-event JSON, which Perfetto (ui.perfetto.dev) and
chrome://tracing open for interactive exploring: one track per CPU with the stretches each job
ran, and one track per task with each job from release to completion (misses marked)."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

from critmem.api import RunResult

_CPUS_PID = 1
_TASKS_PID = 2


def trace_events(result: RunResult) -> dict[str, Any]:
    """The trace as a dict in the trace-event format (times in µs)."""
    events: list[dict[str, Any]] = [
        {"ph": "M", "pid": _CPUS_PID, "name": "process_name", "args": {"name": f"CPUs: {result.scenario}"}},
        {"ph": "M", "pid": _TASKS_PID, "name": "process_name", "args": {"name": "jobs, release to completion"}},
    ]
    for cpu in range(result.cpus):
        events.append({"ph": "M", "pid": _CPUS_PID, "tid": cpu, "name": "thread_name", "args": {"name": f"CPU {cpu}"}})
    names = [str(n) for n in result.tasks["name"]]
    for i, name in enumerate(names):
        events.append({"ph": "M", "pid": _TASKS_PID, "tid": i, "name": "thread_name", "args": {"name": name}})
    index = {name: i for i, name in enumerate(names)}
    seg = result.segments
    for cpu, task, job, start, end in zip(*(seg[c].tolist() for c in ("cpu", "task", "job", "start_ms", "end_ms")), strict=True):
        events.append(
            {"ph": "X", "pid": _CPUS_PID, "tid": cpu, "name": str(task), "cat": "run",
             "ts": _us(start), "dur": _us(end - start), "args": {"job": job}}
        )  # fmt: skip
    j = result.jobs
    columns = ("task", "job", "release_ms", "deadline_ms", "completion_ms", "missed", "outcome")
    for task, job, release, deadline, completion, missed, outcome in zip(*(j[c].tolist() for c in columns), strict=True):
        end = completion if not math.isnan(completion) else result.horizon_ms
        args: dict[str, Any] = {"job": job, "outcome": str(outcome), "deadline_ms": deadline}
        if missed:
            args["missed"] = True
        events.append(
            {"ph": "X", "pid": _TASKS_PID, "tid": index[str(task)], "name": f"{task} #{job}",
             "cat": "missed" if missed else "job", "ts": _us(release), "dur": _us(end - release), "args": args}
        )  # fmt: skip
    return {"traceEvents": events, "displayTimeUnit": "ms", "otherData": {"scenario": result.scenario, "seed": result.seed}}


def _us(ms: float) -> float:
    # Whole ns, in µs: the engine's resolution, without float noise in the file.
    return round(float(ms) * 1000, 3)


def write_trace_events(result: RunResult, path: str | os.PathLike[str]) -> Path:
    """Writes `trace_events(result)` as compact JSON (the same bytes for the same run)."""
    out = Path(path)
    out.write_text(json.dumps(trace_events(result), separators=(",", ":"), allow_nan=False) + "\n", encoding="utf-8")
    return out
