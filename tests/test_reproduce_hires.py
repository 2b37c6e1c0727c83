"""`critmem reproduce hires`: Fig. 6's shares in the simulator and as nested cgroups on this
machine, Fig. 5's latency against depth, the report, and the platform choice."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import TIME_SCALE, assert_matches_output_schema, assert_one_line_error, assert_output_schema_rejects_mangling, cli
from critmem.reproduce.hires import _headline, experiment, machine, paper, reproduce

HIRES = Path(sys.executable).parent / "critmem-hires"
needs_root = pytest.mark.skipif(
    os.geteuid() != 0 or not HIRES.is_file(),
    reason="real Linux: needs root and the Linux binaries in .venv/bin (scripts/setup.sh)",
)
ROWS = {"name", "phase", "budget", "period", "share"}


@pytest.fixture(scope="module")
def sim_summary(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("hires")
    o = cli("reproduce", "hires", "--platform", "sim", "--quick", "--json", "--out", str(out))
    assert o.code == 0, o.stderr
    summary: dict[str, Any] = json.loads(o.stdout)
    summary["_out"] = str(out)
    return summary


def test_json_matches_its_output_schema(sim_summary: dict[str, Any]) -> None:
    printed = {k: v for k, v in sim_summary.items() if k != "_out"}
    assert_matches_output_schema("reproduce-hires", printed)
    assert_output_schema_rejects_mangling("reproduce-hires", printed)


def test_json_with_the_linux_parts_matches_its_output_schema(sim_summary: dict[str, Any]) -> None:
    # The headline of both platforms, the Linux rows as machine.fig6_linux and _depth make them.
    linux_rows = [
        {**r, "budget": float(r["budget"]), "period": float(r["period"]), "share": r["share"] * 0.98} for r in sim_summary["fig6"]["sim"]
    ]
    depth_rows = [{"depth": d, "p50_us": 5.0 + d, "p99_us": 9.0, "max_us": 20.0, "ratio": (5.0 + d) / 5.0} for d in (0, 1, 2, 4)]
    data = {
        "platforms": ["sim", "linux"],
        "fig6": {"sim": {"rows": sim_summary["fig6"]["sim"]}, "linux": {"rows": linux_rows}},
        "fig5": [{"depth": r["depth"], "mean_us": r["mean_us"], "samples": 3} for r in sim_summary["fig5"]],
        "fig4a_sim": sim_summary["fig4a_sim"],
        "fig4b_sim": sim_summary["fig4b_sim"],
        "depth": {"event_latency": depth_rows, "page_map": depth_rows, "page_unmap": depth_rows, "http": depth_rows},
    }
    printed = {**_headline(data), "out_dir": "results/reproduce/hires", "files": ["report.md", "results.json", "fig6.png", "depth.png"]}
    assert set(printed["depth"]) == {"event_latency", "page_map", "page_unmap", "http"}
    assert_matches_output_schema("reproduce-hires", printed)
    assert_output_schema_rejects_mangling("reproduce-hires", printed)


def _reserved(row: dict[str, Any]) -> float:
    return float(row["budget"]) / float(row["period"])


def test_json_has_a_row_per_reservation_and_phase_and_no_linux_rows_on_the_simulator(sim_summary: dict[str, Any]) -> None:
    rows = sim_summary["fig6"]["sim"]
    assert sim_summary["fig6"]["linux"] == []
    assert all(set(r) == ROWS for r in rows)
    assert sorted((r["phase"], r["name"]) for r in rows) == sorted((p, n) for p in range(3) for n in ("web", "rt10", "rt20", "rt25"))
    web = {r["phase"]: (r["budget"], r["period"]) for r in rows if r["name"] == "web"}
    assert web == {0: (4, 8), 1: (4, 16), 2: (4, 32)}


def test_every_server_gets_its_reservation_when_the_child_has_4_per_16_or_32(sim_summary: dict[str, Any]) -> None:
    for r in sim_summary["fig6"]["sim"]:
        if r["phase"] > 0:
            assert abs(r["share"] - _reserved(r)) <= 0.01, r


def test_at_4_per_8_the_child_gets_half_and_rt25_what_the_analysis_gives(sim_summary: dict[str, Any]) -> None:
    at8 = {r["name"]: r["share"] for r in sim_summary["fig6"]["sim"] if r["phase"] == 0}
    assert abs(at8["web"] - 0.5) <= 0.01
    analysis = experiment.fig6_analysis(8)
    # 91 % in all: the lowest server is not guaranteed its whole budget, and the simulator
    # gives exactly the analysis' long-run share when every server is backlogged.
    assert analysis["rt25"]["guaranteed_budget_ms"] < 4
    assert at8["rt25"] == pytest.approx(analysis["rt25"]["backlogged_share"], abs=1e-9)
    assert at8["rt25"] < 0.16


def test_timer_event_latency_grows_by_one_delivery_per_level(sim_summary: dict[str, Any]) -> None:
    cost = experiment.QUICK.fig5_event_cost_us
    rows = sim_summary["fig5"]
    assert [r["depth"] for r in rows] == list(experiment.QUICK.fig5_depths)
    for r in rows:
        assert r["mean_us"] == pytest.approx(r["depth"] * cost, abs=1e-6)


def test_an_event_between_two_threads_and_a_packet_reach_their_thread_at_once_at_every_depth(sim_summary: dict[str, Any]) -> None:
    # Fig. 4(a) and 4(b) from the model: no child-scheduler event on either path, so no growth
    # with depth, where the timer path (Fig. 5) grows by one delivery per level.
    assert [r["mean_us"] for r in sim_summary["fig4a_sim"]] == [0.0] * len(experiment.QUICK.fig5_depths)
    assert {r["packet_mean_us"] for r in sim_summary["fig4b_sim"]} == {0.0}
    assert [r["depth"] for r in sim_summary["fig4b_sim"]] == [d for d in experiment.QUICK.fig5_depths if d >= 1]


def test_report_figures_and_same_bytes_again(sim_summary: dict[str, Any], tmp_path: Path) -> None:
    out = Path(sim_summary["_out"])
    assert {"report.md", "results.json", "fig6.png", "fig5.png"} <= {p.name for p in out.iterdir()}
    text = (out / "report.md").read_text(encoding="utf-8")
    assert "Fig. 6" in text and "4/25" in text and "| NO |" not in text
    again = reproduce(tmp_path, quick=True, platforms=("sim",))
    assert again.summary["fig6"] == {k: v for k, v in sim_summary["fig6"].items()}
    assert (tmp_path / "results.json").read_bytes() == (out / "results.json").read_bytes()
    assert (tmp_path / "fig6.png").read_bytes() == (out / "fig6.png").read_bytes()


def test_platform_is_for_hires_and_sara_only_and_linux_needs_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert_one_line_error(
        cli("reproduce", "tmem", "--platform", "linux", "--out", str(tmp_path / "t")),
        "tmem runs on the sim platform only",
        "is for sara and hires",
    )
    assert_one_line_error(
        cli("reproduce", "sara", "--periods", "10", "--out", str(tmp_path / "s")), "--periods is for sara --platform linux"
    )
    assert_one_line_error(cli("reproduce", "hires", "--platform", "linux", "--periods", "10", "--out", str(tmp_path / "s")), "--periods")
    assert_one_line_error(cli("reproduce", "sara", "--repeat", "3", "--out", str(tmp_path / "s")), "--repeat is for sara --platform linux")
    assert_one_line_error(cli("reproduce", "sara", "--platform", "linux", "--repeat", "0", "--out", str(tmp_path / "s")), "--repeat")
    assert_one_line_error(
        cli("reproduce", "sara", "--pair", "speech+tables", "--out", str(tmp_path / "s")), "--pair is for sara --platform linux"
    )
    assert_one_line_error(
        cli("reproduce", "sara", "--platform", "linux", "--pair", "speech+nope", "--out", str(tmp_path / "s")),
        "'nope' is not a non-real-time app",
    )
    assert_one_line_error(
        cli("reproduce", "sara", "--platform", "linux", "--pair", "speech+graph", "--pair", "speech+tables", "--out", str(tmp_path / "s")),
        "--pair: one pair per soft real-time app",
    )
    assert_one_line_error(
        cli("reproduce", "sara", "--platform", "linux", "--pair", "speech+graph", "--pair", "vision+tables", "--out", str(tmp_path / "s")),
        "--pair: one non-real-time app per reproduction",
    )
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    assert_one_line_error(cli("reproduce", "hires", "--out", str(tmp_path / "h")), "not root", "--platform sim")
    assert_one_line_error(cli("reproduce", "sara", "--platform", "linux", "--out", str(tmp_path / "s")), "not root")
    assert not (tmp_path / "h").exists() and not (tmp_path / "s").exists()


def _left_behind() -> list[Path]:
    return [p for p in Path("/sys/fs/cgroup").glob(f"*/{machine.TREE_NAME}*")]


@needs_root
def test_fig6_on_linux_gives_each_cgroup_its_budget_within_5_percent_and_leaves_nothing() -> None:
    # Periods and phases stretched on a slower machine (shares unchanged).
    factor = round(TIME_SCALE)
    data = machine.fig6_linux(2.0 * factor, lambda _step: None, period_factor=factor)
    assert len(data["rows"]) == 12
    for r in data["rows"]:
        assert abs(r["share"] - _reserved(r)) <= 0.05, r
        # Closer than that: within a tenth of each budget, 1 ms per 10 ms included.
        assert abs(r["share"] / _reserved(r) - 1.0) <= 0.10, r
    assert {p["phase"] for p in data["timeline"]} == {0, 1, 2}
    assert _left_behind() == []
    headline = _headline({"platforms": ["linux"], "fig6": {"linux": data}, "depth": {}})
    assert_matches_output_schema("reproduce-hires", {**headline, "out_dir": "out", "files": ["report.md"]})


def test_the_linux_tree_holds_the_papers_reservations(tmp_path: Path) -> None:
    from critmem.hires import ReservationTree

    tree = ReservationTree.load(machine.fig6_tree(8, "/bin/true"))
    assert tree is not None
    text = machine.fig6_tree(32, "/bin/true")
    assert "budget_ms = 4, period_ms = 32" in text and f"processes = {paper.PAPER_FIG6_WEB_THREADS}" in text
