"""Scheduler servers in the results: the --json entries, --out's servers.csv and
server_supply.csv, the API's frames, and the Gantt chart's server rows."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import matplotlib.image
from conftest import EXAMPLES, GEDF_MIXED, cli
from critmem import run
from critmem.gantt import _server_rows, plot_gantt

FIG6 = EXAMPLES / "servers-hires-fig6.toml"

# A deferrable 2/5 server with 100 us per delivered event over jobs of 1 ms every 5 ms: each
# period the event takes 0.1 ms and the job 1 ms, so the server consumes 1.1 ms per period.
COSTED = """
[run]
horizon_ms = 20
[scheduler]
kind = "fp"
event_cost_us = 100
[[scheduler.server]]
name = "outer"
kind = "level"
priority = 0
policy = "fp"
[[scheduler.server]]
name = "s"
parent = "outer"
kind = "deferrable"
budget_ms = 2
period_ms = 5
priority = 0
policy = "rm"
[[task]]
name = "a"
wcet_ms = 1
period_ms = 5
server = "s"
"""


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def test_json_servers_carry_exhaustions_and_delivered_events() -> None:
    o = cli("run", str(FIG6), "--json")
    assert o.code == 0, o.stderr
    servers = json.loads(o.stdout)["servers"]
    # Every fig6 server is backlogged: its budget runs out in every period.
    assert [(s["name"], s["exhaustions"], s["replenishments"]) for s in servers] == [
        ("web", 25, 25),
        ("rt10", 40, 40),
        ("rt20", 20, 20),
        ("rt25", 16, 16),
    ]
    assert all(s["events_delivered"] == 0 and s["event_ms"] == 0.0 for s in servers)


def test_out_writes_one_row_per_server_and_one_per_server_period(tmp_path: Path) -> None:
    o = cli("run", str(FIG6), "--out", str(tmp_path))
    assert o.code == 0, o.stderr
    assert "servers.csv, server_supply.csv" in o.stdout
    servers = _rows(tmp_path / "servers.csv")
    assert [s["name"] for s in servers] == ["web", "rt10", "rt20", "rt25"]
    assert list(servers[0]) == [
        "name", "parent", "kind", "cpu", "budget_ms", "period_ms", "consumed_ms",
        "replenishments", "exhaustions", "events_delivered", "event_ms",
    ]  # fmt: skip
    supply = _rows(tmp_path / "server_supply.csv")
    # 400 ms: 25 periods of 16, 40 of 10, 20 of 20, 16 of 25, each receiving its whole budget.
    assert len(supply) == 25 + 40 + 20 + 16
    budget = {s["name"]: float(s["budget_ms"]) for s in servers}
    assert all(float(r["consumed_ms"]) == budget[r["server"]] for r in supply)
    web = [float(r["period_start_ms"]) for r in supply if r["server"] == "web"]
    assert web == [16.0 * k for k in range(25)]


def test_out_without_servers_writes_no_server_files(tmp_path: Path) -> None:
    assert cli("run", str(GEDF_MIXED), "--out", str(tmp_path)).code == 0
    assert not (tmp_path / "servers.csv").exists() and not (tmp_path / "server_supply.csv").exists()


def test_the_api_reports_event_delivery_per_server() -> None:
    r = run(COSTED)
    assert r.servers is not None
    # outer delivers each release in 0.1 ms, then s in 0.1 ms: 4 periods, 4 events each.
    assert list(r.servers["events_delivered"]) == [4, 4]
    assert [round(x, 9) for x in r.servers["event_ms"]] == [0.4, 0.4]
    # s pays its own deliveries and the jobs (4 × 1.1 ms); outer also pays its own (4 × 0.1).
    assert [round(x, 9) for x in r.servers["consumed_ms"]] == [4.8, 4.4]
    starts = [round(x, 9) for x in r.jobs["start_ms"]]
    assert starts == [0.2, 5.2, 10.2, 15.2]
    assert list(r.server_events["server"]) == ["outer"] * 4 + ["s"] * 4
    assert list(r.server_supply["period_start_ms"]) == [0.0, 5.0, 10.0, 15.0]
    assert r.task_servers == ("s",)
    flat = run(GEDF_MIXED)
    assert flat.servers is None and flat.server_supply.empty and flat.task_servers == ()


def test_the_gantt_chart_has_a_row_per_server_under_its_cpu(tmp_path: Path) -> None:
    r = run(COSTED)
    cpu_row, server_row, labels = _server_rows(r)
    assert (cpu_row, server_row, labels) == ({0: 0}, {"outer": 1, "s": 2}, ["CPU 0", "  outer", "    s"])
    a, b = plot_gantt(r, tmp_path / "a.png"), plot_gantt(run(COSTED), tmp_path / "b.png")
    assert a.read_bytes() == b.read_bytes()
    flat = plot_gantt(run(COSTED.replace("event_cost_us = 100", "event_cost_us = 0")), tmp_path / "c.png")
    # Same rows, no hatched delivery: the charts differ.
    assert flat.read_bytes() != a.read_bytes()
    rows_high = matplotlib.image.imread(a).shape[0]
    assert rows_high > matplotlib.image.imread(plot_gantt(run(GEDF_MIXED), tmp_path / "q.png")).shape[0]


# Two servers on a 64 MiB machine: "a" reserves 8 MiB and its task sweeps 16 MiB; "b" reserves
# 16 MiB, soft, and its task sweeps 4 MiB.
MEMORY = """
[scheduler]
kind = "fp"
[run]
horizon_ms = 200
[memory]
total_mb = 64
page_bytes = 65536
swap = "fast-ssd"
[[scheduler.server]]
name = "a"
kind = "deferrable"
budget_ms = 5
period_ms = 10
priority = 0
policy = "fp"
reserve = { memory_mib = 8 }
[[scheduler.server]]
name = "b"
kind = "deferrable"
budget_ms = 5
period_ms = 10
priority = 1
policy = "fp"
reserve = { memory_mib = 16, kind = "soft" }
[[task]]
name = "big"
server = "a"
priority = 0
wcet_ms = 2
period_ms = 20
private_mb = 16
access = [{ pattern = "sweep", mb = 16, writes = 1.0 }]
[[task]]
name = "small"
server = "b"
priority = 0
wcet_ms = 2
period_ms = 20
private_mb = 4
access = [{ pattern = "sweep", mb = 4, writes = 1.0 }]
"""


def test_server_memory_reservations_appear_in_json_servers_csv_and_the_api(tmp_path: Path) -> None:
    path = tmp_path / "mem.toml"
    path.write_text(MEMORY)
    o = cli("run", str(path), "--json")
    assert o.code == 0, o.stderr
    summary = json.loads(o.stdout)
    servers = summary["servers"]
    assert [(s["memory_reserved_mb"], s["memory_kind"], s["peak_resident_pages"]) for s in servers] == [
        (8.0, "hard", 128),
        (16.0, "soft", 64),
    ]
    # The bounded task pages against its own reservation; its sibling never waits for the device.
    big, small = summary["memory"]["tasks"]
    assert big["major_faults"] > 0 and small["major_faults"] == 0
    o = cli("run", str(path), "--out", str(tmp_path / "out"))
    assert o.code == 0, o.stderr
    rows = _rows(tmp_path / "out" / "servers.csv")
    assert list(rows[0])[-3:] == ["memory_reserved_mb", "memory_kind", "peak_resident_pages"]
    assert [(r["memory_reserved_mb"], r["memory_kind"], r["peak_resident_pages"]) for r in rows] == [
        ("8.0", "hard", "128"),
        ("16.0", "soft", "64"),
    ]
    table = run(MEMORY).servers
    assert table is not None
    assert list(table["peak_resident_pages"]) == [128, 64] and list(table["memory_kind"]) == ["hard", "soft"]
    # The run's table shows each reservation beside the budgets.
    o = cli("run", str(path))
    assert o.code == 0 and "8.000 hard" in o.stdout and "16.000 soft" in o.stdout, o.stdout
    o = cli("analyze", str(path))
    assert o.code == 0 and "8.000 hard" in o.stdout, o.stdout
