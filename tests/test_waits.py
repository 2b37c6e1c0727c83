"""Blocking: `RunResult.waits`, `run --out`'s waits.csv, and the Gantt chart's wait bars."""

from __future__ import annotations

from pathlib import Path

from conftest import EXAMPLES, RM_TEXTBOOK, cli
from critmem import RunResult, run
from critmem.gantt import WAIT_HATCH, WAIT_LABEL, plot_gantt
from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.collections import PolyCollection
from matplotlib.figure import Figure
from matplotlib.legend import Legend
from matplotlib.text import Text

INVERSION = EXAMPLES / "resources-inversion.toml"
COLUMNS = ["task", "job", "resource", "start_ms", "end_ms"]


def _inversion(protocol: str) -> str:
    return INVERSION.read_text(encoding="utf-8").replace('protocol = "pip"', f'protocol = "{protocol}"')


def test_waits_hold_each_blocking_of_the_inversion() -> None:
    r = run(INVERSION)
    assert list(r.waits.columns) == COLUMNS
    assert [str(t) for t in r.waits.dtypes] == ["str", "int64", "str", "float64", "float64"]
    # pip: hi (released at 2, 22, 42) locks bus 1 ms later and lo, running in its place,
    # gives it back after the 3 ms left of its section.
    rows = [tuple(row) for row in r.waits.itertuples(index=False)]
    assert rows == [("hi", 0, "bus", 3.0, 6.0), ("hi", 1, "bus", 23.0, 26.0), ("hi", 2, "bus", 43.0, 46.0)]
    assert (r.waits_left_out, r.resources_declared) == (0, True)
    # none: med's 10 ms run inside hi's wait, 3 → 16.
    none = run(_inversion("none"))
    assert list(none.waits["end_ms"] - none.waits["start_ms"]) == [13.0, 13.0, 13.0]


def test_waits_are_empty_with_their_columns_without_resources_or_records() -> None:
    r = run(RM_TEXTBOOK)
    assert (list(r.waits.columns), len(r.waits), r.resources_declared) == (COLUMNS, 0, False)
    unrecorded = run(INVERSION, record_jobs=False)
    assert (list(unrecorded.waits.columns), len(unrecorded.waits), unrecorded.resources_declared) == (COLUMNS, 0, True)


def test_out_writes_waits_csv_only_for_a_scenario_with_resources(tmp_path: Path) -> None:
    out = tmp_path / "inv"
    o = cli("run", str(INVERSION), "--out", str(out))
    assert o.code == 0, o.stderr
    lines = (out / "waits.csv").read_text(encoding="utf-8").splitlines()
    assert lines == ["task,job,resource,start_ms,end_ms", "hi,0,bus,3.0,6.0", "hi,1,bus,23.0,26.0", "hi,2,bus,43.0,46.0"]
    assert "waits.csv" in (out / ".critmem-out").read_text(encoding="utf-8").splitlines()
    # A second run with --force replaces it as one of critmem's own files.
    again = cli("run", str(INVERSION), "--out", str(out), "--force")
    assert again.code == 0, again.stderr
    plain = tmp_path / "rm"
    assert cli("run", str(RM_TEXTBOOK), "--out", str(plain)).code == 0
    assert not (plain / "waits.csv").exists()


def _axes(result: RunResult) -> Axes:
    """The chart drawn on an Axes of the size `plot_gantt` writes."""
    return plot_gantt(result, ax=Figure(figsize=(12, 4), dpi=110).add_subplot())


def _wait_collections(children: list[Artist]) -> list[PolyCollection]:
    return [c for c in children if isinstance(c, PolyCollection) and c.get_hatch() == WAIT_HATCH]


def test_gantt_draws_each_wait_as_a_labelled_hatched_bar(tmp_path: Path) -> None:
    r = run(_inversion("none"))
    ax = _axes(r)
    bars = _wait_collections(ax.get_children())
    # One collection (hi on CPU 0) holding hi's three 13 ms waits.
    assert len(bars) == 1
    assert len(bars[0].get_paths()) == 3
    labels = [t.get_text() for t in ax.get_children() if isinstance(t, Text) and t.get_text() == "bus"]
    assert len(labels) == 3  # 13 ms of a 60 ms chart is wide enough for "bus"
    legend = ax.get_legend()
    assert isinstance(legend, Legend)
    assert WAIT_LABEL in [t.get_text() for t in legend.get_texts()]
    png = plot_gantt(r, tmp_path / "gantt.png")
    assert png.stat().st_size > 0


def test_gantt_without_waits_has_no_wait_bars_or_legend_entry() -> None:
    ax = _axes(run(RM_TEXTBOOK))
    assert _wait_collections(ax.get_children()) == []
    legend = ax.get_legend()
    assert isinstance(legend, Legend)
    assert WAIT_LABEL not in [t.get_text() for t in legend.get_texts()]
