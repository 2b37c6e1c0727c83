"""`critmem run` on a scenario with page-level memory: the memory tables and files."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import matplotlib.image
import pytest
from conftest import EXAMPLES, RM_TEXTBOOK, cli
from critmem import run
from critmem.memplot import plot_memory

SHARED_PAGES = EXAMPLES / "shared-pages.toml"


def test_run_prints_per_task_memory_and_per_group_stall_tables() -> None:
    o = cli("run", str(SHARED_PAGES))
    assert o.code == 0, o.stderr
    lines = o.stdout.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("task") and "major faults" in line)
    columns = (
        "reservation",
        "minor faults",
        "major faults",
        "swapped in",
        "swapped out",
        "resident MB",
        "peak resident MB",
        "fault wait ms",
    )
    for column in columns:
        assert column in lines[header], column
    rows = {line.split()[0]: line.split() for line in lines[header + 2 : header + 4]}
    assert sorted(rows) == ["tau1", "tau2"]
    memory = run(SHARED_PAGES).memory
    assert memory is not None
    tau1 = next(t for t in memory["tasks"] if t["name"] == "tau1")
    # task reservation minor major in out resident peak wait
    assert rows["tau1"][1:6] == [
        "r1",
        str(tau1["minor_faults"]),
        str(tau1["major_faults"]),
        str(tau1["pages_swapped_in"]),
        str(tau1["pages_swapped_out"]),
    ]
    page_mb = memory["page_bytes"] / 1_048_576
    assert float(rows["tau1"][7]) == pytest.approx(tau1["peak_resident_pages"] * page_mb, abs=1e-3)
    assert tau1["peak_resident_pages"] >= tau1["resident_pages"]
    assert float(rows["tau1"][8]) == pytest.approx(tau1["fault_wait_ms"], abs=1e-3)
    groups = next(i for i, line in enumerate(lines) if line.startswith("group"))
    for column in ("memory some ms", "memory full ms", "io some ms", "io full ms"):
        assert column in lines[groups]
    assert {lines[groups + 2].split()[0], lines[groups + 3].split()[0]} == {"r1", "r2"}


def test_a_run_without_memory_prints_no_memory_tables() -> None:
    o = cli("run", str(RM_TEXTBOOK))
    assert o.code == 0
    assert "major faults" not in o.stdout and "memory some" not in o.stdout


def test_out_writes_the_memory_timeline_and_its_chart(tmp_path: Path) -> None:
    o = cli("run", str(SHARED_PAGES), "--out", str(tmp_path))
    assert o.code == 0, o.stderr
    assert {"memory.png", "memory_timeline.csv"} <= {p.name for p in tmp_path.iterdir()}
    assert "memory.png" in o.stdout.splitlines()[-1]
    with (tmp_path / "memory_timeline.csv").open(newline="") as f:
        rows = list(csv.reader(f))
    assert rows[0] == [
        "time_ms", "reserved_physical_mb", "used_mb",
        "reservation_pages:r1", "reservation_pages:r2", "resident_pages:tau1", "resident_pages:tau2",
    ]  # fmt: skip
    times = [float(r[0]) for r in rows[1:]]
    assert len(times) > 10 and times == sorted(times)
    pixels = matplotlib.image.imread(tmp_path / "memory.png")
    assert pixels.shape[0] > 300 and pixels.std() > 0.05


def test_memory_chart_is_byte_identical_for_identical_runs(tmp_path: Path) -> None:
    a = plot_memory(run(SHARED_PAGES), tmp_path / "a.png").read_bytes()
    b = plot_memory(run(SHARED_PAGES), tmp_path / "b.png").read_bytes()
    assert a == b


def test_a_run_without_memory_writes_no_memory_files(tmp_path: Path) -> None:
    assert cli("run", str(RM_TEXTBOOK), "--out", str(tmp_path)).code == 0
    assert not (tmp_path / "memory.png").exists() and not (tmp_path / "memory_timeline.csv").exists()
    with pytest.raises(ValueError, match=r"\[memory\]"):
        plot_memory(run(RM_TEXTBOOK), tmp_path / "m.png")


def test_dollar_signs_in_names_are_drawn_as_written(tmp_path: Path) -> None:
    # matplotlib reads text between two `$` as math; a task, reservation or file name with
    # them must neither fail the run nor change what the charts say.
    text = SHARED_PAGES.read_text(encoding="utf-8")
    text = text.replace('name = "tau1"', 'name = "$$"').replace('"r1"', '"$\\\\frac{$"')
    scenario = tmp_path / "cost$x$.toml"
    scenario.write_text(text, encoding="utf-8")
    out = tmp_path / "out"
    o = cli("run", str(scenario), "--out", str(out))
    assert o.code == 0, o.stderr
    assert {"gantt.png", "memory.png"} <= {p.name for p in out.iterdir()}
    # An escaped name is drawn pixel for pixel as the same name with math parsing off; `$x$`
    # unescaped would be drawn as math (an italic x), which differs.
    from critmem.gantt import literal_text
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    def pixels(text: str, parse_math: bool = True) -> bytes:
        fig = Figure(figsize=(3, 0.5), dpi=60)
        FigureCanvasAgg(fig)
        fig.text(0.02, 0.3, text, parse_math=parse_math)
        png = io.BytesIO()
        fig.savefig(png, format="png", metadata={"Software": None})
        return png.getvalue()

    for name in ("$$", "$\\frac{$", "cost$x$.toml", "$x$"):
        assert pixels(literal_text(name)) == pixels(name, parse_math=False), name
    assert pixels("$x$") != pixels("$x$", parse_math=False)
