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


def trace_events_head(result: RunResult) -> list[dict[str, Any]]:
    """The trace's metadata events: the two processes, each CPU's track and each task's."""
    events: list[dict[str, Any]] = [
        {"ph": "M", "pid": _CPUS_PID, "name": "process_name", "args": {"name": f"CPUs: {result.scenario}"}},
        {"ph": "M", "pid": _TASKS_PID, "name": "process_name", "args": {"name": "jobs, release to completion"}},
    ]
    for cpu in range(result.cpus):
        events.append({"ph": "M", "pid": _CPUS_PID, "tid": cpu, "name": "thread_name", "args": {"name": f"CPU {cpu}"}})
    names = [str(n) for n in result.tasks["name"]]
    for i, name in enumerate(names):
        events.append({"ph": "M", "pid": _TASKS_PID, "tid": i, "name": "thread_name", "args": {"name": name}})
    return events


def trace_events(result: RunResult) -> dict[str, Any]:
    """The trace as a dict in the trace-event format (times in µs)."""
    names = [str(n) for n in result.tasks["name"]]
    index = {name: i for i, name in enumerate(names)}
    events = trace_events_head(result)
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
    """Writes `trace_events(result)` as compact JSON (the same bytes for the same run),
    event by event: a run of many jobs is written without building every event as a dict."""
    out = Path(path)
    dump = json.dumps
    names = [str(n) for n in result.tasks["name"]]
    quoted = {name: dump(name) for name in names}
    index = {name: i for i, name in enumerate(names)}
    with out.open("w", encoding="utf-8") as f:
        head = trace_events_head(result)
        f.write('{"traceEvents":[' + ",".join(dump(e, separators=(",", ":")) for e in head))
        seg = result.segments
        columns = (seg[c].tolist() for c in ("cpu", "task", "job", "start_ms", "end_ms"))
        for cpu, task, job, start, end in zip(*columns, strict=True):
            f.write(
                f',{{"ph":"X","pid":{_CPUS_PID},"tid":{cpu},"name":{quoted[str(task)]},"cat":"run",'
                f'"ts":{_num(_us(start))},"dur":{_num(_us(end - start))},"args":{{"job":{job}}}}}'
            )
        j = result.jobs
        columns = (j[c].tolist() for c in ("task", "job", "release_ms", "deadline_ms", "completion_ms", "missed", "outcome"))
        for task, job, release, deadline, completion, missed, outcome in zip(*columns, strict=True):
            end = completion if not math.isnan(completion) else result.horizon_ms
            name = str(task)
            args = f'{{"job":{job},"outcome":{dump(str(outcome))},"deadline_ms":{_num(deadline)}' + (',"missed":true}' if missed else "}")
            f.write(
                f',{{"ph":"X","pid":{_TASKS_PID},"tid":{index[name]},"name":{dump(f"{name} #{job}")},'
                f'"cat":"{"missed" if missed else "job"}","ts":{_num(_us(release))},"dur":{_num(_us(end - release))},"args":{args}}}'
            )
        other = dump({"scenario": result.scenario, "seed": result.seed}, separators=(",", ":"))
        f.write(f'],"displayTimeUnit":"ms","otherData":{other}}}\n')
    return out


def _num(x: float) -> str:
    """A finite number as `json.dumps` writes it."""
    if not math.isfinite(x):
        raise ValueError(f"not a finite number: {x}")
    return float.__repr__(float(x))
