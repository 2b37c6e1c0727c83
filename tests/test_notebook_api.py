"""The API as a notebook uses it: numpy inputs, short reprs, documented fields, tidy frames
and plots on the notebook's own Axes."""

from __future__ import annotations

import pydoc
import re
import tomllib
from dataclasses import fields

import critmem
import numpy as np
import pandas as pd
from conftest import EXAMPLES, RM_TEXTBOOK
from critmem.gantt import plot_gantt
from critmem.memplot import plot_memory
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

# Fields whose values are times, and the unit their help text must give.
_TIME_FIELDS = ("hyperperiod_ms", "memory_timeline", "control_timeline", "jobs", "segments", "waits", "server_supply")


def _help_text(cls: type) -> str:
    return pydoc.render_doc(cls, renderer=pydoc.plaintext)  # type: ignore[attr-defined]


def _field_text(text: str, name: str) -> str:
    """The help text of one field: its `name : type` line and the indented lines below it."""
    match = re.search(rf"^ \|  {name} : .*\n((?: \|      .*\n)+)", text, flags=re.MULTILINE)
    assert match is not None, f"help() does not list {name}"
    return match.group(1)


def test_help_lists_every_run_result_field_with_its_meaning_and_units() -> None:
    text = _help_text(critmem.RunResult)
    for f in fields(critmem.RunResult):
        assert len(_field_text(text, f.name).split()) >= 3, f.name
    for name in _TIME_FIELDS:
        assert re.search(r"\bms\b", _field_text(text, name)), name
    tasks = _field_text(text, "tasks")
    for column in ("max_response_ms", "mean_response_ms", "max_tardiness_ms", "throughput_per_s", "hit_ratio"):
        assert column in tasks
    assert "µs" in _field_text(text, "control_timeline") and "MB" in _field_text(text, "memory_timeline")
    # Each DataFrame field names its columns with their units.
    jobs = _field_text(text, "jobs")
    for column in ("release_ms", "deadline_ms", "response_ms", "outcome"):
        assert column in jobs
    # The methods giving long timelines say so too.
    assert "memory_timeline_long" in text and "value_mb" in text and "control_timeline_long" in text


def test_help_lists_every_analysis_result_field_with_its_meaning_and_units() -> None:
    text = _help_text(critmem.AnalysisResult)
    for f in fields(critmem.AnalysisResult):
        assert len(_field_text(text, f.name).split()) >= 3, f.name
    tasks = _field_text(text, "tasks")
    for column in ("wcet_ms", "period_ms", "deadline_ms", "response_time_ms", "utilization"):
        assert column in tasks
    assert "(ms" in tasks or "ms)" in tasks


def test_a_notebook_session() -> None:
    scenario = tomllib.loads((EXAMPLES / "sara-sphinx.toml").read_text())
    # Values as a notebook computes them: numpy scalars.
    scenario["run"]["horizon_ms"] = np.int64(scenario["run"]["horizon_ms"])
    for task in scenario["task"]:
        if "wcet_ms" in task:
            task["wcet_ms"] = np.float64(task["wcet_ms"])
    r = critmem.run(scenario)
    assert len(repr(r)) < 2_048
    assert "<table" in r._repr_html_()
    assert "ms" in (critmem.RunResult.__doc__ or "")

    fig = Figure()
    FigureCanvasAgg(fig)
    gantt_ax, memory_ax = fig.add_subplot(2, 1, 1), fig.add_subplot(2, 1, 2)
    assert plot_gantt(r, ax=gantt_ax, window=(0, 200)) is gantt_ax
    assert gantt_ax.collections, "the Gantt chart drew no bars"
    assert plot_memory(r, ax=memory_ax) is memory_ax
    assert memory_ax.get_lines(), "the memory plot drew no lines"

    # Long timelines group and aggregate without reshaping.
    usage = r.control_timeline_long().groupby("group", sort=False)["usage_mb"].max()
    assert list(usage.index) == [str(g["name"]) for g in r.summary["control"]["groups"]]
    memory = r.memory_timeline_long()
    peak = memory[memory["kind"] == "resident"].groupby("name", sort=False, observed=True)["value_mb"].max()
    assert set(peak.index) == {str(t["name"]) for t in r.summary["tasks"]}
    assert isinstance(memory["kind"].dtype, pd.CategoricalDtype)

    a = critmem.analyze(RM_TEXTBOOK)
    assert len(repr(a)) < 2_048 and "<table" in a._repr_html_()
