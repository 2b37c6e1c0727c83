"""The Gantt chart at any size: windows, formats, an Axes of the caller's, capped legend and
height, release and deadline marks."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest
from conftest import RM_TEXTBOOK, WriteScenario, cli
from critmem import run
from critmem.gantt import JOB_MARKS, LEGEND_TASKS, plot_gantt
from matplotlib.axes import Axes
from matplotlib.collections import PathCollection, PolyCollection
from matplotlib.figure import Figure
from matplotlib.legend import Legend


def _png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    width, height = struct.unpack(">II", data[16:24])
    return int(width), int(height)


def _legend_labels(ax: Axes) -> list[str]:
    legend = ax.get_legend()
    assert isinstance(legend, Legend)
    return [t.get_text() for t in legend.get_texts()]


def test_plot_gantt_draws_on_the_callers_axes_and_returns_them() -> None:
    fig = Figure()
    ax = fig.add_subplot()
    got = plot_gantt(run(RM_TEXTBOOK), ax=ax)
    assert got is ax
    assert ax.get_xlabel() == "time (ms)"
    assert len(ax.collections) > 0
    assert "release" in _legend_labels(ax)


def test_a_window_shows_only_that_stretch_and_says_so() -> None:
    ax = plot_gantt(run(RM_TEXTBOOK), ax=Figure().add_subplot(), window=(10.0, 30.0))
    assert ax.get_xlim() == (10.0, 30.0)
    assert "10–30 ms of" in ax.get_title()
    # Every bar drawn starts within the window.
    bars = [c for c in ax.collections if isinstance(c, PolyCollection)]
    assert bars
    for c in bars:
        for path in c.get_paths():
            assert float(np.asarray(path.vertices)[:, 0].min()) >= 10.0


def test_release_and_deadline_marks_one_per_job_in_the_window() -> None:
    r = run(RM_TEXTBOOK)
    assert len(r.jobs) <= JOB_MARKS
    ax = plot_gantt(r, ax=Figure().add_subplot())
    scatters = [c for c in ax.collections if isinstance(c, PathCollection)]
    end = ax.get_xlim()[1]
    shown = r.jobs[r.jobs["release_ms"] <= end]
    assert 0 < len(shown) < len(r.jobs)  # a leading window of the run
    assert len(np.asarray(scatters[0].get_offsets())) == len(shown)
    met = shown[~shown["missed"] & (shown["deadline_ms"] <= end)]
    assert len(np.asarray(scatters[1].get_offsets())) == len(met)


def test_misses_are_counted_per_task_in_the_legend(scenario_file: WriteScenario) -> None:
    path = scenario_file(
        '[scheduler]\nkind = "fp"\n[run]\nhorizon_ms = 20\n'
        '[[task]]\nname = "hi"\npriority = 0\nwcet_ms = 3\nperiod_ms = 5\n'
        '[[task]]\nname = "lo"\npriority = 1\nwcet_ms = 5\nperiod_ms = 10\n'
    )
    r = run(path)
    missed = int(r.jobs[r.jobs["task"] == "lo"]["missed"].sum())
    assert missed > 0
    assert f"lo ({missed} missed)" in _legend_labels(plot_gantt(r, ax=Figure().add_subplot()))


def test_many_tasks_keep_the_legend_and_the_image_small(scenario_file: WriteScenario, tmp_path: Path) -> None:
    tasks = "".join(f'[[task]]\nname = "t{i}"\nwcet_ms = 0.01\nperiod_ms = {10 + i % 7}\n' for i in range(300))
    path = scenario_file(f'[machine]\ncpus = 64\n[scheduler]\nkind = "gedf"\n[run]\nhorizon_ms = 20\n{tasks}')
    r = run(path)
    ax = plot_gantt(r, ax=Figure().add_subplot())
    labels = _legend_labels(ax)
    assert f"{300 - (LEGEND_TASKS - 1)} other tasks" in labels
    assert len(labels) <= LEGEND_TASKS + 5
    png = plot_gantt(r, tmp_path / "g.png")
    width, height = _png_size(png)
    assert width < 4000 and height < 4000, (width, height)


@pytest.mark.parametrize("fmt", ["svg", "pdf"])
def test_out_writes_the_chart_as_svg_or_pdf_the_same_bytes_every_time(fmt: str, tmp_path: Path) -> None:
    for name in ("a", "b"):
        o = cli("run", str(RM_TEXTBOOK), "--out", str(tmp_path / name), "--format", fmt, "--gantt-window", "0:12")
        assert o.code == 0, o.stderr
    a, b = (tmp_path / n / f"gantt.{fmt}" for n in ("a", "b"))
    assert a.read_bytes() == b.read_bytes()
    assert not (tmp_path / "a" / "gantt.png").exists()
    head = a.read_bytes()[:5]
    assert head == (b"%PDF-" if fmt == "pdf" else b"<?xml")


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--gantt-window", "5"], "expected START:END in ms with 0 <= START < END (got '5')"),
        (["--gantt-window", "9:3"], "expected START:END in ms with 0 <= START < END (got '9:3')"),
        (["--gantt-window", "a:b"], "expected START:END in ms with 0 <= START < END (got 'a:b')"),
        (["--format", "bmp"], "invalid choice: 'bmp'"),
    ],
)
def test_bad_chart_options_are_one_line_and_exit_2(argv: list[str], message: str, tmp_path: Path) -> None:
    o = cli("run", str(RM_TEXTBOOK), "--out", str(tmp_path / "o"), *argv)
    assert o.code == 2
    assert message in o.stderr
    assert o.stderr.count("\n") <= 2  # argparse's usage line and the error


def test_chart_options_need_out() -> None:
    o = cli("run", str(RM_TEXTBOOK), "--format", "svg")
    assert o.code == 2
    assert o.stderr.strip().endswith("--gantt-window and --format shape the Gantt chart --out writes: give --out DIR")
