"""The trace-event file is written event by event; its bytes are those of the whole trace
dumped at once. The fast CSV writer writes the bytes pandas writes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from conftest import EXAMPLE_FILES, WriteScenario
from critmem import run
from critmem.export import trace_events, write_csv, write_trace_events
from hypothesis import given, settings
from hypothesis import strategies as st


def _dumped(result: object) -> bytes:
    return (json.dumps(trace_events(result), separators=(",", ":"), allow_nan=False) + "\n").encode()  # type: ignore[arg-type]


@pytest.mark.parametrize("example", EXAMPLE_FILES[:8], ids=[p.name for p in EXAMPLE_FILES[:8]])
def test_streamed_trace_is_the_whole_trace_dumped(example: Path, tmp_path: Path) -> None:
    r = run(example)
    out = write_trace_events(r, tmp_path / "trace.json")
    assert out.read_bytes() == _dumped(r)


def test_names_that_need_escaping_and_unfinished_jobs(scenario_file: WriteScenario, tmp_path: Path) -> None:
    path = scenario_file(
        '[scheduler]\nkind = "fp"\n[run]\nhorizon_ms = 12\n'
        '[[task]]\nname = "quote\\" back\\\\slash ünï $x$"\npriority = 0\nwcet_ms = 3\nperiod_ms = 5\n'
        '[[task]]\nname = "lo"\npriority = 1\nwcet_ms = 5\nperiod_ms = 10\n'
    )
    r = run(path)
    assert r.jobs["completion_ms"].isna().any()  # a job still running at the horizon
    out = write_trace_events(r, tmp_path / "trace.json")
    assert out.read_bytes() == _dumped(r)
    names = {e["name"] for e in json.loads(out.read_text(encoding="utf-8"))["traceEvents"]}
    assert {"lo #0", 'quote" back\\slash ünï $x$ #0'} <= names


_TEXT = st.one_of(
    st.none(),
    st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=6),
    st.sampled_from(["a,b", 'q"q', "n\nl", "r\rr", " ", ""]),
)
_FLOAT = st.one_of(
    st.floats(allow_nan=True, allow_infinity=False),
    st.sampled_from([0.0, -0.0, 1e16, 1e-5, 1e-4, 27.0, 0.1, 5e-324, 9999999999999998.0]),
)


@st.composite
def _frames(draw: st.DrawFn) -> pd.DataFrame:
    rows = draw(st.integers(0, 6))
    kinds = draw(st.lists(st.sampled_from(["text", "float", "int", "bool", "nint", "cat"]), min_size=1, max_size=5))
    data: dict[str, Any] = {}
    for i, kind in enumerate(kinds):
        name = draw(st.sampled_from(["x", "a,b", "t ms", f"c{i}"])) + str(i)
        if kind == "text":
            data[name] = pd.Series(draw(st.lists(_TEXT, min_size=rows, max_size=rows)), dtype="str")
        elif kind == "float":
            data[name] = pd.Series(draw(st.lists(_FLOAT, min_size=rows, max_size=rows)), dtype="float64")
        elif kind == "int":
            data[name] = pd.Series(draw(st.lists(st.integers(-(2**63), 2**63 - 1), min_size=rows, max_size=rows)), dtype="int64")
        elif kind == "bool":
            data[name] = pd.Series(draw(st.lists(st.booleans(), min_size=rows, max_size=rows)), dtype="bool")
        elif kind == "nint":
            data[name] = pd.Series(
                draw(st.lists(st.one_of(st.none(), st.integers(-(2**40), 2**40)), min_size=rows, max_size=rows)), dtype="Int64"
            )
        else:
            dtype = pd.CategoricalDtype(["completed", "x,y", "pending"])
            data[name] = pd.Series(
                draw(st.lists(st.sampled_from(["completed", "x,y", "pending"]), min_size=rows, max_size=rows)), dtype=dtype
            )
    return pd.DataFrame(data)


@settings(max_examples=300, deadline=None)
@given(frame=_frames())
def test_write_csv_writes_the_bytes_pandas_writes(frame: pd.DataFrame, tmp_path_factory: pytest.TempPathFactory) -> None:
    d = tmp_path_factory.mktemp("csv")
    write_csv(frame, d / "fast.csv")
    frame.to_csv(d / "pandas.csv", index=False, lineterminator="\n")
    assert (d / "fast.csv").read_bytes() == (d / "pandas.csv").read_bytes()
