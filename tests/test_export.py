"""The trace-event file is written event by event; its bytes are those of the whole trace
dumped at once."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import EXAMPLE_FILES, WriteScenario
from critmem import run
from critmem.export import trace_events, write_trace_events


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
