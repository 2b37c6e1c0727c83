"""Timelines in long (tidy) form, and the memory plot drawn on the caller's Axes."""

from __future__ import annotations

from pathlib import Path

import critmem
import numpy as np
import pytest
from conftest import EXAMPLES, GEDF_MIXED
from critmem.api import CONTROL_TIMELINE_COLUMNS, MEMORY_SERIES_KIND, MEMORY_TIMELINE_LONG_DTYPES
from critmem.memplot import memory_figure, memory_panels, plot_memory
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from test_controller_output import STATIC

SHARED_PAGES = EXAMPLES / "shared-pages.toml"


def _run(scenario: str | Path) -> critmem.RunResult:
    return critmem.run(scenario, record_jobs=False, record_segments=False)


def _axes(n: int = 1) -> list[Axes]:
    fig = Figure()
    FigureCanvasAgg(fig)
    return [fig.add_subplot(n, 1, k) for k in range(1, n + 1)]


def test_the_long_memory_timeline_has_one_row_per_sample_per_series() -> None:
    r = _run(STATIC)
    wide = r.memory_timeline
    long = r.memory_timeline_long()
    # 100 samples (one per ms over 100 ms) × 4 series: reserved_physical, used, r, b.
    assert len(wide) == 100 and len(long) == 100 * 4
    assert {c: str(t) for c, t in long.dtypes.items()} == {c: str(t) for c, t in MEMORY_TIMELINE_LONG_DTYPES.items()}
    assert long["kind"].dtype == MEMORY_SERIES_KIND
    first = long.iloc[:4]
    assert first["name"].tolist() == ["reserved_physical", "used", "r", "b"]
    assert first["kind"].tolist() == ["machine", "machine", "resident", "resident"]
    # At the end task r holds its 1 MiB (256 pages of 4 KiB) and b its 2 MiB (512 pages):
    # 256 × 4096 B / 2**20 = 1.0 MB, 512 × 4096 / 2**20 = 2.0 MB; 3.0 MB in use machine-wide.
    last = long[long["time_ms"] == 99.0].set_index("name")
    assert last.loc["r", "pages"] == 256 and last.loc["r", "value_mb"] == 1.0
    assert last.loc["b", "pages"] == 512 and last.loc["b", "value_mb"] == 2.0
    assert last.loc["used", "value_mb"] == 3.0 and last["pages"].isna()["used"]


def test_the_long_memory_timeline_holds_the_wide_frames_values() -> None:
    r = _run(SHARED_PAGES)
    wide = r.memory_timeline
    long = r.memory_timeline_long()
    series = len(wide.columns) - 1
    assert len(long) == len(wide) * series
    assert set(long["kind"]) == {"machine", "reservation", "resident"}
    page_mb = r.summary["memory"]["page_bytes"] / 2**20
    # Back to wide: every value of every series, at every sample.
    back = long.pivot(index="time_ms", columns=["kind", "name"], values=["value_mb", "pages"])
    for column in wide.columns[1:]:
        prefix, _, name = str(column).partition(":")
        if prefix == "reservation_pages":
            kind = "reservation"
        elif prefix == "resident_pages":
            kind = "resident"
        else:
            kind, name = "machine", prefix.removesuffix("_mb")
        if kind == "machine":
            np.testing.assert_array_equal(back[("value_mb", kind, name)].to_numpy(dtype=float), wide[column].to_numpy())
        else:
            np.testing.assert_array_equal(back[("pages", kind, name)].to_numpy(dtype="int64"), wide[column].to_numpy())
            np.testing.assert_array_equal(back[("value_mb", kind, name)].to_numpy(dtype=float), wide[column].to_numpy() * page_mb)


def test_long_timelines_are_empty_with_their_columns_without_memory_or_control() -> None:
    r = _run(GEDF_MIXED)
    memory = r.memory_timeline_long()
    assert memory.empty and list(memory.columns) == list(MEMORY_TIMELINE_LONG_DTYPES)
    assert str(memory["pages"].dtype) == "Int64" and memory["kind"].dtype == MEMORY_SERIES_KIND
    control = r.control_timeline_long()
    assert control.empty and list(control.columns) == list(CONTROL_TIMELINE_COLUMNS)
    # [memory] without [control]: a memory timeline, no control rows.
    assert _run(SHARED_PAGES).control_timeline_long().empty


def test_the_long_control_timeline_holds_the_wide_frames_values() -> None:
    r = _run(EXAMPLES / "sara-sphinx.toml")
    wide = r.control_timeline
    long = r.control_timeline_long()
    groups = [str(g["name"]) for g in r.summary["control"]["groups"]]
    assert len(long) == len(wide) * len(groups) and len(long) > 0
    assert str(long["tick"].dtype) == "int64" and str(long["io_some_us"].dtype) == "int64"
    for k, group in enumerate(groups):
        rows = long.iloc[k :: len(groups)]
        assert set(rows["group"]) == {group}
        np.testing.assert_array_equal(rows["time_ms"].to_numpy(), wide["time_ms"].to_numpy())
        for field in ("max_mb", "high_mb", "usage_mb", "memory_some_us", "io_some_us"):
            np.testing.assert_array_equal(rows[field].to_numpy(dtype=float), wide[f"{field}:{group}"].to_numpy(dtype=float))


def test_plot_memory_draws_the_first_panel_on_the_given_axes_and_returns_them() -> None:
    r = _run(STATIC)
    assert memory_panels(r) == ("groups", "pages", "machine")
    (ax,) = _axes()
    assert plot_memory(r, ax=ax) is ax
    # The groups panel: per group a usage line and a limit step line (memory.high is unset).
    labels = [str(line.get_label()) for line in ax.get_lines()]
    assert labels == ["rt usage", "rt limit", "batch usage", "batch limit"]
    assert ax.get_xlim() == (0.0, 0.1) and ax.get_xlabel() == "time (s)"
    (pages,) = _axes()
    plot_memory(r, ax=pages, panel="pages")
    assert [str(line.get_label()) for line in pages.get_lines()] == ["resident r", "resident b"]


def test_plot_memory_draws_every_panel_on_a_sequence_of_axes() -> None:
    r = _run(SHARED_PAGES)
    panels = memory_panels(r)
    assert panels == ("pages", "machine")
    axes = _axes(len(panels))
    assert plot_memory(r, ax=axes) is axes
    # The same lines as the figure's panels, in the same order.
    fig_axes = memory_figure(r).get_axes()
    for mine, theirs in zip(axes, fig_axes, strict=True):
        assert [str(line.get_label()) for line in mine.get_lines()] == [str(line.get_label()) for line in theirs.get_lines()]
        assert len(mine.get_lines()) > 0
    with pytest.raises(ValueError, match="expected 2 Axes"):
        plot_memory(r, ax=_axes(3))
    with pytest.raises(ValueError, match="panel: expected one of pages, machine"):
        plot_memory(r, ax=_axes()[0], panel="groups")


def test_plot_memory_to_a_path_writes_the_figure_and_refuses_a_run_without_memory(tmp_path: Path) -> None:
    r = _run(SHARED_PAGES)
    out = plot_memory(r, tmp_path / "m.png")
    assert out == tmp_path / "m.png"
    # The same bytes as saving memory_figure directly, as `critmem run --out` wrote memory.png.
    memory_figure(r).savefig(tmp_path / "direct.png", format="png", bbox_inches="tight", metadata={"Software": None})
    assert out.read_bytes() == (tmp_path / "direct.png").read_bytes()
    with pytest.raises(ValueError, match="no \\[memory\\] section"):
        plot_memory(_run(GEDF_MIXED), ax=_axes()[0])
    with pytest.raises(ValueError, match="needs a path"):
        plot_memory(r)  # type: ignore[call-overload]
