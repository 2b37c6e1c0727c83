"""A run's schedule as Chrome trace-event JSON, which Perfetto (ui.perfetto.dev) and
chrome://tracing open for interactive exploring: one track per CPU with the stretches each job
ran, and one track per task with each job from release to completion (misses marked)."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from critmem import _core
from critmem.api import RunResult

if TYPE_CHECKING:
    import pandas as pd

OUTCOMES: list[str] = list(_core.OUTCOMES)

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
    streamed from the traces' columns: a run of millions of segments is written without an
    object per event."""
    import numpy as np
    import pandas as pd

    out = Path(path)
    dump = json.dumps
    names = [str(n) for n in result.tasks["name"]]
    head = '{"traceEvents":[' + ",".join(dump(e, separators=(",", ":")) for e in trace_events_head(result))
    other = dump({"scenario": result.scenario, "seed": result.seed}, separators=(",", ":"))
    tail = f'],"displayTimeUnit":"ms","otherData":{other}}}\n'
    seg, j = result.segments, result.jobs

    def codes(column: pd.Series) -> bytes:
        # Tasks by their index in the task list, which is each job track's tid.
        return np.asarray(pd.Categorical(column.astype(str), categories=names).codes, dtype="<i8").tobytes()

    def raw(column: pd.Series, dtype: str) -> bytes:
        return np.ascontiguousarray(column.to_numpy(dtype=dtype)).tobytes()

    outcome = pd.Categorical(j["outcome"].astype(str), categories=OUTCOMES)
    _core.write_trace_events(
        str(out),
        head,
        tail,
        (raw(seg["cpu"], "<i8"), codes(seg["task"]), raw(seg["job"], "<i8"), raw(seg["start_ms"], "<f8"), raw(seg["end_ms"], "<f8")),
        (
            codes(j["task"]),
            raw(j["job"], "<i8"),
            raw(j["release_ms"], "<f8"),
            raw(j["deadline_ms"], "<f8"),
            raw(j["completion_ms"], "<f8"),
            raw(j["missed"], "|u1"),
            np.asarray(outcome.codes, dtype="<i8").tobytes(),
        ),
        [dump(n) for n in names],
        [dump(o) for o in OUTCOMES],
        float(result.horizon_ms),
    )
    return out


def write_csv(frame: pd.DataFrame, path: str | os.PathLike[str]) -> Path:
    """Writes `frame` as CSV with the bytes `frame.to_csv(path, index=False,
    lineterminator="\\n")` writes, many times faster on large traces. Columns of int, float,
    bool, nullable int, string and categorical dtypes; any other dtype is written by pandas."""
    import numpy as np
    import pandas as pd

    columns: list[tuple[str, bytes, bytes | None, list[str] | None]] = []
    for name in frame.columns:
        col = frame[name]
        dtype = col.dtype
        if isinstance(dtype, pd.CategoricalDtype):
            labels = [str(c) for c in dtype.categories]
            columns.append(("text", np.asarray(col.cat.codes, dtype="<i8").tobytes(), None, labels))
        elif isinstance(dtype, pd.Int64Dtype):
            mask = col.isna().to_numpy()
            columns.append(("nint", col.fillna(0).to_numpy(dtype="<i8").tobytes(), mask.astype("|u1").tobytes(), None))
        elif pd.api.types.is_bool_dtype(dtype) and not col.hasnans:
            columns.append(("bool", col.to_numpy(dtype="|u1").tobytes(), None, None))
        elif pd.api.types.is_signed_integer_dtype(dtype) and not isinstance(dtype, pd.api.extensions.ExtensionDtype):
            columns.append(("int", col.to_numpy(dtype="<i8").tobytes(), None, None))
        elif pd.api.types.is_unsigned_integer_dtype(dtype) and not isinstance(dtype, pd.api.extensions.ExtensionDtype):
            columns.append(("uint", col.to_numpy(dtype="<u8").tobytes(), None, None))
        elif pd.api.types.is_float_dtype(dtype) and not isinstance(dtype, pd.api.extensions.ExtensionDtype):
            columns.append(("float", col.to_numpy(dtype="<f8").tobytes(), None, None))
        elif pd.api.types.is_string_dtype(dtype) and (len(col) == 0 or col.map(type, na_action="ignore").isin([str]).all()):
            codes, uniques = pd.factorize(col, use_na_sentinel=True)
            columns.append(("text", np.asarray(codes, dtype="<i8").tobytes(), None, [str(u) for u in uniques]))
        else:
            frame.to_csv(path, index=False, lineterminator="\n")
            return Path(path)
    _core.write_csv(str(path), [str(c) for c in frame.columns], columns)
    return Path(path)


def _num(x: float) -> str:
    """A finite number as `json.dumps` writes it."""
    if not math.isfinite(x):
        raise ValueError(f"not a finite number: {x}")
    return float.__repr__(float(x))


# CSVW datatypes (https://www.w3.org/TR/tabular-data-primer/) of the frames' dtypes.
def _csvw_datatype(dtype: Any) -> str:
    import pandas as pd

    if pd.api.types.is_bool_dtype(dtype):
        return "boolean"
    if pd.api.types.is_integer_dtype(dtype):
        return "integer"
    if pd.api.types.is_float_dtype(dtype):
        return "double"
    return "string"


def write_csv_metadata(result: RunResult, out_dir: Path, csv_files: list[Path]) -> Path:
    """Writes `csv-metadata.json` in `out_dir`: W3C CSV on the Web metadata for `csv_files`
    (read back as the frames they came from): each table's columns with their datatypes (units
    are in the names: `_ms`, `_mb`, `_us`, `_pages`), and for the traces, the trace limit and
    the rows it left out, so a CSV read alone still says whether it is whole."""
    import pandas as pd

    traces = result.summary.get("traces") or {}
    left_out = {"jobs.csv": "jobs_left_out", "segments.csv": "segments_left_out", "waits.csv": "waits_left_out"}
    tables = []
    for path in csv_files:
        # The frame it was written from, else the types pandas reads from its first rows.
        frame = _csv_sources(result).get(path.name)
        if frame is None:
            frame = pd.read_csv(path, nrows=1000)
        columns = [{"name": str(name), "titles": str(name), "datatype": _csvw_datatype(frame[name].dtype)} for name in frame.columns]
        table: dict[str, Any] = {"url": path.name, "tableSchema": {"columns": columns}}
        key = left_out.get(path.name)
        if key is not None and key in traces:
            whole = traces[key] == 0
            table["dc:description"] = (
                "every row of the run"
                if whole
                else f"the first {traces['limit']:,} rows to end; {traces[key]:,} more were left out (the summary's per-task totals count every one)"
            )
            table["notes"] = [{"trace_limit": traces["limit"], "rows_left_out": traces[key]}]
        tables.append(table)
    meta = {"@context": "http://www.w3.org/ns/csvw", "tables": tables}
    out = out_dir / "csv-metadata.json"
    out.write_text(json.dumps(meta, indent=1) + "\n", encoding="utf-8")
    return out


def _csv_sources(result: RunResult) -> dict[str, pd.DataFrame]:
    """The frame each CSV of `critmem run --out` is written from."""
    sources = {
        "jobs.csv": result.jobs,
        "segments.csv": result.segments,
        "waits.csv": result.waits,
        "memory_timeline.csv": result.memory_timeline,
    }
    if result.servers is not None:
        sources["servers.csv"] = result.servers
        sources["server_supply.csv"] = result.server_supply
    return sources
