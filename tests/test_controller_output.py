"""What a run with `[control]` prints and writes: the controller and each group's memory in
the tables, control_timeline.csv, the limits in memory.png, and tables that fit 80 columns."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import critmem
import numpy as np
import pytest
from conftest import EXAMPLES, GEDF_MIXED, cli
from critmem.api import CONTROL_TIMELINE_COLUMNS
from critmem.cli.linux import _print_linux_run
from critmem.memplot import memory_figure
from matplotlib.colors import to_rgba

SARA_OPENCV = EXAMPLES / "sara-opencv.toml"
SERVERS_FIG6 = EXAMPLES / "servers-hires-fig6.toml"
SHARED_PAGES = EXAMPLES / "shared-pages.toml"

# Two groups under the static controller, ticking every 10 ms over 100 ms: 9 ticks (10, ...,
# 90 ms; the horizon is exclusive). The soft real-time group gets the configured 4 MiB; the
# non-real-time one what is left of 16 MiB, 12 MiB. Each task's first job pays one minor
# fault per 4 KiB page it touches (1 MiB = 256 pages, 2 MiB = 512, 1 us each).
STATIC = """
[machine]
cpus = 2
[scheduler]
kind = "pfp"
[run]
horizon_ms = 100
[memory]
total_mb = 16
[control]
controller = "static"
interval_ms = 10
config = { default_limit_bytes = 4194304 }
[[group]]
name = "rt"
role = "soft-rt"
bcet_ms = 1
floor_mb = 1
[[group]]
name = "batch"
floor_mb = 1
[[task]]
name = "r"
wcet_ms = 1
period_ms = 10
cpu = 0
group = "rt"
private_mb = 1
access = [{ pattern = "sweep" }]
[[task]]
name = "b"
wcet_ms = 5
period_ms = 5
deadline_ms = 1000
cpu = 1
group = "batch"
private_mb = 2
access = [{ pattern = "sweep" }]
"""


@pytest.fixture
def static_scenario(tmp_path: Path) -> Path:
    path = tmp_path / "static.toml"
    path.write_text(STATIC, encoding="utf-8")
    return path


@pytest.fixture(autouse=True)
def default_width(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)


def _group_rows(stdout: str, names: tuple[str, ...] = ("rt", "batch")) -> dict[str, list[str]]:
    """The cells of the group table's rows, by group name."""
    lines = stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("memory per group"))
    assert lines[start + 1].split()[:2] == ["group", "limit"], lines[start + 1]
    rows: dict[str, list[str]] = {}
    for line in lines[start + 3 :]:
        if not line.startswith(tuple(f"{n} " for n in names)):
            break
        cells = line.split()
        rows[cells[0]] = cells[1:]
    return rows


def test_the_header_names_the_controller_and_each_groups_memory(static_scenario: Path) -> None:
    o = cli("run", str(static_scenario))
    assert o.code == 0, o.stderr
    lines = o.stdout.splitlines()
    assert lines[1] == "controller: static, every 10 ms (9 ticks, 0 jobs dropped at its request)"
    rows = _group_rows(o.stdout)
    # limit at the end, lowest limit, peak usage (MB), work/s, pending, dropped.
    # r: 10 jobs of 1 ms (+0.256 ms of faults in the first) all complete: 10 / 0.1 s = 100/s.
    # b: back to back, 5 ms each; the first pays 0.512 ms of faults, so the job released at
    # 95 ms ends at 100.512 ms, after the horizon: 19 completed / 0.1 s = 190/s, 1 pending.
    assert rows == {
        "rt": ["4.0", "4.0", "1.0", "100.00", "0", "0"],
        "batch": ["12.0", "12.0", "2.0", "190.00", "1", "0"],
    }


def test_a_run_without_control_prints_no_controller_or_group_memory() -> None:
    o = cli("run", str(SHARED_PAGES))
    assert o.code == 0
    assert "controller:" not in o.stdout and "memory per group" not in o.stdout


def test_jobs_the_controller_dropped_show_in_the_header_and_their_groups_row() -> None:
    o = cli("run", str(SARA_OPENCV))
    assert o.code == 0, o.stderr
    summary = json.loads(cli("run", str(SARA_OPENCV), "--json").stdout)
    control = summary["control"]
    assert o.stdout.splitlines()[1] == (
        f"controller: sara, every 5 ms ({control['ticks']} ticks, {control['dropped_jobs']} jobs dropped at its request)"
    )
    assert control["dropped_jobs"] > 0
    rows = _group_rows(o.stdout, ("opencv", "graphchi"))
    dropped = {t["name"]: t["dropped"] for t in summary["tasks"]}
    assert int(rows["opencv"][-1]) == dropped["opencv"] == control["dropped_jobs"]
    for g, row in zip(control["groups"], (rows["opencv"], rows["graphchi"]), strict=True):
        assert row[:3] == [f"{g['final_max_mb']:.1f}", f"{g['lowest_max_mb']:.1f}", f"{g['peak_usage_mb']:.1f}"]


def test_the_linux_summary_prints_the_same_group_rows(capsys: pytest.CaptureFixture[str]) -> None:
    mib = 1_048_576
    task = {
        "criticality": "C", "cpu": None, "jobs": None, "completed": None, "deadline_misses": None, "hit_ratio": None,
        "max_response_ms": None, "mean_response_ms": None, "max_tardiness_ms": None, "checksum_failures": 0,
    }  # fmt: skip
    psi = {"memory_some_us": 1000, "memory_full_us": 0, "io_some_us": 0, "io_full_us": 0}
    no_jobs = {"jobs_reported": 0, "jobs_completed": 0, "jobs_dropped": 0, "jobs_pending": 0}
    summary: dict[str, Any] = {
        "scenario": "l.toml", "backend": "cgroup v2", "cpus": 2, "horizon_ms": 2000.0, "controller": "sara",
        "tasks": [
            {**task, "name": "s", "group": "srt", "verified_mib_per_s": None},
            {**task, "name": "n1", "group": "nrt", "verified_mib_per_s": 30.5},
            {**task, "name": "n2", "group": "nrt", "verified_mib_per_s": 12.0},
        ],
        "memory": {
            "total_bytes": 256 * mib,
            "groups": [
                {"name": "srt", **psi, **no_jobs, "jobs_reported": 20, "jobs_completed": 17, "jobs_dropped": 2, "jobs_pending": 1},
                {"name": "nrt", **psi, **no_jobs},
            ],
        },
        "control": {
            "interval_ms": 100.0, "ticks": 20, "tick_cost_mean_us": 50.0, "tick_cpu_mean_us": 21.0, "writes_ok": 3,
            "writes_failed": 0, "write_cpu_ms": 12.5, "oom_rescues": 0, "removed_dirs": 2,
            "timeline": [
                {"t_ms": 100.0, "groups": [{"usage_bytes": 40 * mib, "max_bytes": None, "high_bytes": None},
                                           {"usage_bytes": 90 * mib, "max_bytes": 200 * mib, "high_bytes": None}]},
                {"t_ms": 200.0, "groups": [{"usage_bytes": 60 * mib, "max_bytes": 64 * mib, "high_bytes": None},
                                           {"usage_bytes": 80 * mib, "max_bytes": 192 * mib, "high_bytes": None}]},
                {"t_ms": 300.0, "groups": [{"usage_bytes": 50 * mib, "max_bytes": 96 * mib, "high_bytes": None},
                                           {"usage_bytes": 100 * mib, "max_bytes": 160 * mib, "high_bytes": None}]},
            ],
        },
    }  # fmt: skip
    _print_linux_run(summary)
    out = capsys.readouterr().out
    assert "under sara, 20 ticks of 100 ms, 50 us each (21 us of CPU)" in out.splitlines()[0]
    assert "writes' CPU 12.5 ms (the kernel's reclaim to the limits)" in out
    header = next(line for line in out.splitlines() if line.startswith("group ") and "limit MB" in line)
    assert header.split()[-3:] == ["MiB/s", "pending", "dropped"]
    # srt: limit 96 MiB at the end, lowest 64, peak usage 60; no throughput worker; its
    # reported jobs: 1 pending, 2 dropped. nrt: 160 at the end, lowest 160, peak 100;
    # 30.5 + 12.0 = 42.5 MiB/s; it reported no jobs.
    assert _group_rows(out, ("srt", "nrt")) == {
        "srt": ["96.0", "64.0", "60.0", "-", "1", "2"],
        "nrt": ["160.0", "160.0", "100.0", "42.50", "-", "-"],
    }


def test_out_writes_the_control_timeline_one_row_per_tick_per_group(static_scenario: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    o = cli("run", str(static_scenario), "--out", str(out))
    assert o.code == 0, o.stderr
    assert "control_timeline.csv" in o.stdout.splitlines()[-1]
    with (out / "control_timeline.csv").open(newline="") as f:
        rows = list(csv.reader(f))
    assert tuple(rows[0]) == CONTROL_TIMELINE_COLUMNS == (
        "time_ms", "tick", "group", "max_mb", "high_mb", "usage_mb", "memory_some_us", "io_some_us",
    )  # fmt: skip
    body = rows[1:]
    assert len(body) == 9 * 2
    assert [r[0] for r in body] == [f"{10.0 * (k // 2 + 1)}" for k in range(18)]
    assert [r[1] for r in body] == [str(k // 2 + 1) for k in range(18)]
    assert [r[2] for r in body] == ["rt", "batch"] * 9
    # Static limits (4 and 16 - 4 = 12 MiB), no memory.high (empty), each task's pages all
    # resident from the first tick on (1 and 2 MiB), no stalls.
    assert {tuple(r[3:]) for r in body[0::2]} == {("4.0", "", "1.0", "0", "0")}
    assert {tuple(r[3:]) for r in body[1::2]} == {("12.0", "", "2.0", "0", "0")}
    # --force knows the file as critmem's own.
    assert cli("run", str(static_scenario), "--out", str(out), "--force").code == 0
    assert (out / "control_timeline.csv").exists()


# Columns that are counts, names or flags rather than quantities with a unit.
_UNITLESS = {"task", "job", "cpu", "last_cpu", "missed", "outcome", "group", "tick", "name", "parent", "kind", "server",
             "replenishments", "exhaustions", "events_delivered"}  # fmt: skip


@pytest.mark.parametrize("which", ["static", "servers-hires-fig6", "shared-pages"])
def test_every_csv_column_names_its_unit(which: str, static_scenario: Path, tmp_path: Path) -> None:
    scenario = static_scenario if which == "static" else EXAMPLES / f"{which}.toml"
    out = tmp_path / "out"
    assert cli("run", str(scenario), "--out", str(out)).code == 0
    written = sorted(out.glob("*.csv"))
    assert len(written) >= 3
    for path in written:
        with path.open(newline="") as f:
            header = next(csv.reader(f))
        for column in header:
            # A per-object column is `quantity_unit:<object>`.
            assert column in _UNITLESS or column.split(":", 1)[0].endswith(("_ms", "_mb", "_pages", "_us")), (path.name, column)
    if which == "static":
        with (out / "memory_timeline.csv").open(newline="") as f:
            assert next(csv.reader(f)) == ["time_ms", "reserved_physical_mb", "used_mb", "resident_pages:r", "resident_pages:b"]


def test_a_thinned_control_timeline_counts_its_ticks() -> None:
    r = critmem.run(STATIC, record_jobs=False, record_segments=False)
    long = r.control_timeline_long()
    assert list(long.columns) == list(CONTROL_TIMELINE_COLUMNS)
    assert long["tick"].tolist() == [k // 2 + 1 for k in range(18)]
    assert str(long["memory_some_us"].dtype) == "int64" and str(long["tick"].dtype) == "int64"
    assert critmem.run(GEDF_MIXED, record_jobs=False, record_segments=False).control_timeline_long().empty


def test_memory_png_draws_each_groups_limit_beside_its_usage() -> None:
    fig = memory_figure(critmem.run(STATIC, record_jobs=False, record_segments=False))
    axes = fig.get_axes()
    assert len(axes) == 3
    groups = axes[0]
    assert "limit" in groups.get_title()
    lines = {str(line.get_label()): line for line in groups.get_lines()}
    assert set(lines) == {"rt usage", "rt limit", "batch usage", "batch limit"}, "no memory.high set: no high lines"
    for name, limit_mb, usage_mb in (("rt", 4.0, 1.0), ("batch", 12.0, 2.0)):
        usage, limit = lines[f"{name} usage"], lines[f"{name} limit"]
        assert usage.get_linestyle() == "-" and limit.get_linestyle() == "--"
        assert limit.get_drawstyle() == "steps-post"
        assert to_rgba(usage.get_color())[:3] == to_rgba(limit.get_color())[:3]
        # Ticks at 10, 20, ..., 90 ms, drawn in seconds.
        assert np.asarray(limit.get_xdata()).tolist() == [k / 100 for k in range(1, 10)]
        assert np.asarray(limit.get_ydata()).tolist() == [limit_mb] * 9
        assert np.asarray(usage.get_ydata()).tolist() == [usage_mb] * 9
    assert to_rgba(lines["rt limit"].get_color()) != to_rgba(lines["batch limit"].get_color())
    # No reservations: neither a reservation line nor "reserved physical memory".
    for ax in axes[1:]:
        assert "reservation" not in ax.get_title()
        assert not any("reserv" in str(line.get_label()) for line in ax.get_lines())


def test_memory_png_keeps_its_reservation_panels_without_control() -> None:
    fig = memory_figure(critmem.run(SHARED_PAGES, record_jobs=False, record_segments=False))
    axes = fig.get_axes()
    assert len(axes) == 2
    assert "reservation" in axes[0].get_title() and "reservations" in axes[1].get_title()
    assert "reserved physical memory" in {str(line.get_label()) for line in axes[1].get_lines()}


def test_memory_png_draws_memory_high_where_it_is_set() -> None:
    text = STATIC.replace('name = "batch"\nfloor_mb = 1', 'name = "batch"\nfloor_mb = 1\nhigh_mb = 10')
    fig = memory_figure(critmem.run(text, record_jobs=False, record_segments=False))
    lines = {str(line.get_label()): line for line in fig.get_axes()[0].get_lines()}
    assert lines["batch high"].get_linestyle() == ":" and np.asarray(lines["batch high"].get_ydata()).tolist() == [10.0] * 9
    assert "rt high" not in lines


def _task_rows(stdout: str, names: list[str]) -> list[str]:
    """The task table's rows (the lines after its rule, one per task), checking that the
    line after them starts something else: prose, or the header of the next table."""
    lines = stdout.splitlines()
    rule = next(i for i, line in enumerate(lines) if line.startswith("─"))
    rows = lines[rule + 1 : rule + 1 + len(names)]
    after = lines[rule + 1 + len(names) : rule + 1 + len(names) + 4]
    if after and after[0].startswith(" "):
        # A header broken over lines starts indented; its rule follows within a few lines.
        assert any(line.startswith("─") for line in after), after
    return rows


@pytest.mark.parametrize("scenario", [GEDF_MIXED, SARA_OPENCV, SERVERS_FIG6], ids=lambda p: p.stem)
def test_tables_fit_80_columns_with_one_row_per_task(scenario: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    names = [t["name"] for t in json.loads(cli("run", str(scenario), "--json").stdout)["tasks"]]
    monkeypatch.setenv("COLUMNS", "80")
    o = cli("run", str(scenario))
    assert o.code == 0, o.stderr
    longest = max(len(line) for line in o.stdout.splitlines())
    assert longest <= 80, o.stdout
    rows = _task_rows(o.stdout, names)
    assert [row.split()[0] for row in rows] == names


def test_long_names_are_cut_rather_than_wrapped_at_80_columns(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    long = "a-task-with-a-name-much-longer-than-the-terminal-leaves-room-for-beside-its-numbers"
    path = tmp_path / "long.toml"
    path.write_text(
        f'[scheduler]\nkind = "rm"\n[[task]]\nname = "{long}"\nwcet_ms = 1\nperiod_ms = 4\n[[task]]\nname = "b"\nwcet_ms = 1\nperiod_ms = 5\n',
        encoding="utf-8",
    )
    monkeypatch.setenv("COLUMNS", "80")
    o = cli("run", str(path))
    assert o.code == 0, o.stderr
    assert max(len(line) for line in o.stdout.splitlines()) <= 80
    rows = _task_rows(o.stdout, [long, "b"])
    assert rows[0].split()[0].endswith("…") and long.startswith(rows[0].split()[0][:-1])
    assert rows[1].split()[0] == "b"
    # The numbers stay whole: the long task's hyperperiod-long run releases 5 jobs of 4 ms.
    assert rows[0].split()[3:5] == ["5", "5"]


def test_the_default_width_keeps_the_wide_table() -> None:
    o = cli("run", str(GEDF_MIXED))
    header = next(line for line in o.stdout.splitlines() if line.startswith("task "))
    columns = ["task", "crit", "cpu", "released", "completed", "misses", "hit ratio", "max resp ms", "mean resp ms", "max tard ms"]
    assert header.split() == " ".join(columns).split()
