"""`critmem study mc2` and `critmem reproduce mc2`: MC²'s schedulability study.

The areas, intervals and checks are tested on their own; the study itself on a few scenarios
with a coarse grid and few task systems per point, through the Python API, so it stays quick.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from conftest import StopAfter, assert_matches_output_schema, assert_one_line_error, cli
from critmem import _core
from critmem.reproduce import PAPERS, Reproduction
from critmem.reproduce.mc2 import SWEEP_CACHE, report, reproduce, study
from critmem.reproduce.mc2.paper import PAPER_FIG15_SCENARIOS, PAPER_OBS10_RATIOS, PAPER_SUA_RATIOS, PAPER_SUBSET_RATIOS
from critmem.reproduce.mc2.study import Plan
from critmem.sweep import LocalProcesses

SCHEMES = ["R|R", "C|C", "O|C", "C|C+A/B-ALL", "C|C+A/B-LP", "C|C+A/B-SP", "O|C+A/B-ALL", "O|C+A/B-LP", "O|C+A/B-SP"]
FIG15 = [tuple(s) for s in PAPER_FIG15_SCENARIOS.values()]


class InProcess:
    """Runs the items here, one after another (the sweep's behaviour is the same on any executor)."""

    workers = 1

    def run(self, fn: Any, items: Any, keys: Any) -> Iterator[tuple[int, Any]]:
        for i, item in enumerate(items):
            yield i, fn(item)

    def close(self) -> None:
        pass


def _tiny(scenarios: list[tuple[str, ...]], **kw: Any) -> Plan:
    """A study small enough for a test: a coarse grid, at most 32 systems per point."""
    options: dict[str, Any] = {"step": 1.0, "max_systems": 32, "batch": 16, "scenarios": tuple(scenarios)} | kw
    return Plan(**options)


def _point(u: float, n: int, **counts: int) -> dict[str, Any]:
    return {
        "utilization": u,
        "systems": n,
        "schedulable": {s: counts.get(s.replace("|", "_"), 0) for s in SCHEMES} | {"X": counts.get("X", 0)},
    }


# ---------------------------------------------------------------------------------------------
# Intervals, grid, areas, ratios


def test_wilson_interval_matches_the_formula_and_the_stopping_rule() -> None:
    lo, hi = study.wilson(5, 10)
    assert (round(lo, 4), round(hi, 4)) == (0.2366, 0.7634)
    assert study.wilson(0, 0) == (0.0, 1.0)
    lo, hi = study.wilson(0, 16)
    assert lo == 0.0 and hi > 0.15
    # All or none schedulable: 48 systems are enough for ±0.05; half of them needs about 380.
    assert not study.precise_enough([0, 32], 32, 0.05)
    assert study.precise_enough([0, 48], 48, 0.05)
    assert not study.precise_enough([0, 176], 352, 0.05)
    assert study.precise_enough([0, 192], 384, 0.05)


def test_the_grid_starts_at_the_step_and_has_no_rounding_drift() -> None:
    assert study.utilization_grid(0.25, 1.0) == [0.25, 0.5, 0.75, 1.0]
    assert study.utilization_grid(0.1, 0.3) == [0.1, 0.2, 0.3]
    assert study.utilization_grid(0.5, 1.9) == [0.5, 1.0, 1.5]


def test_area_starts_at_one_and_is_zero_beyond_the_last_point() -> None:
    points = [_point(0.25, 4, X=4), _point(0.5, 4, X=2), _point(0.75, 4, X=0)]
    # (1 + 1)/2·0.25 + (1 + 0.5)/2·0.25 + (0.5 + 0)/2·0.25
    assert study.area(points, "X") == pytest.approx(0.5)
    assert study.area([_point(1.0, 4, X=0)], "X") == pytest.approx(0.5)
    assert study.interpolate(points, "X", 0.6) == pytest.approx(0.5 - 0.5 * 0.1 / 0.25)
    assert study.interpolate(points, "X", 0.1) == pytest.approx(1.0)
    assert study.interpolate(points, "X", 5.0) == 0.0


def test_every_ratio_key_names_two_schemes() -> None:
    keys = [*PAPER_SUA_RATIOS, *PAPER_OBS10_RATIOS]
    assert study.split_ratio("O|C+A/B-ALL/C|C", SCHEMES) == ("O|C+A/B-ALL", "C|C")
    assert study.split_ratio("C|C+A/B-ALL/C|C+A/B-LP", SCHEMES) == ("C|C+A/B-ALL", "C|C+A/B-LP")
    for key in keys:
        num, den = study.split_ratio(key, SCHEMES)
        assert f"{num}/{den}" == key
    for num, den, where, _ in PAPER_SUBSET_RATIOS.values():
        assert num in SCHEMES and den in SCHEMES and where.split("=")[0] in study.CATEGORY_KEYS
    with pytest.raises(ValueError, match="not a ratio"):
        study.split_ratio("C|C/X", SCHEMES)


def test_ratios_over_a_subset_count_only_its_scenarios() -> None:
    large = ("C-Light", "Long", "Light", "Quick", "Large", "High", "Many")
    small = ("C-Light", "Long", "Light", "Quick", "Small", "Low", "Many")

    def curve(scenario: tuple[str, ...], oc: int) -> dict[str, Any]:
        return {"scenario": list(scenario), "points": [_point(1.0, 10, C_C=5, O_C=oc), _point(2.0, 10)]}

    curves = [curve(large, 10), curve(small, 5)]
    r = study.ratios(curves, SCHEMES)
    # C|C: 0.75 + 0.25 = 1.0 per scenario; O|C: 1.0 + 0.5 = 1.5 with Large, 1.0 with Small.
    assert r["O|C/C|C (Large IPC)"] == pytest.approx(1.5)
    assert r["O|C/C|C"] == pytest.approx(1.25)
    assert r["C|C/R|R"] == pytest.approx(1.0 / 0.5)
    assert r["C|C+A/B-ALL/C|C (High bandwidth)"] == pytest.approx(0.5)


def _checkable(sua: Mapping[str, float], ratios: Mapping[str, float | None]) -> dict[str, Any]:
    return {
        "sua": sua,
        "paper_ratios": study.paper_ratios(),
        "ratios": ratios,
        "ipc": [
            {f"{s}_{op}_us": v for s, v in (("CL", 1.0), ("CE", 2.0), ("SBP", 3.0)) for op in ("send", "receive")}
            | {"CL_send_pct_of_SBP": 33.3}
        ],
        "dma": [{"ways": 2, "bandwidth_mb_s": 50.0, "level_c_pct": p, "inflation": 1.5 - p / 200} for p in (0, 50, 100)],
    }


def test_the_checks_hold_for_the_papers_orderings_and_fail_otherwise() -> None:
    good = {"R|R": 10.0, "C|C": 10.5, "O|C": 11.6, "C|C+A/B-ALL": 10.8, "C|C+A/B-LP": 10.5, "C|C+A/B-SP": 10.5}
    good |= {"O|C+A/B-ALL": 12.0, "O|C+A/B-LP": 11.6, "O|C+A/B-SP": 11.7}
    checks = report.acceptance_checks(_checkable(good, dict(study.paper_ratios())))
    assert all(c.passed for c in checks), [c for c in checks if not c.passed]
    hard = [c for c in checks if not c.name.startswith("goal: ")]
    goals = [c for c in checks if c.name.startswith("goal: ")]
    assert len(goals) == len(study.paper_ratios()) and len(hard) >= 6
    bad = good | {"R|R": 11.0, "C|C+A/B-SP": 11.0}
    # A ratio off the paper's fails its goal unless the report explains that difference.
    off = dict(study.paper_ratios()) | {"O|C/C|C": 1.2, "O|C+A/B-ALL/C|C": 1.3}
    checks = report.acceptance_checks(_checkable(bad, off))
    failed = {c.name for c in checks if not c.passed}
    assert failed == {
        "coarse partitioning and buffers in A/B banks help (Obs. 7, 9, 11)",
        "C|C+A/B-SP no better than C|C+A/B-ALL (Obs. 10)",
        "goal: O|C+A/B-ALL/C|C near the paper's",
    }
    explained = next(c for c in checks if c.name == "goal: O|C/C|C near the paper's")
    assert explained.passed and "explained" in explained.measured


# ---------------------------------------------------------------------------------------------
# Scenarios


def test_the_core_names_the_schemes_and_648_scenarios() -> None:
    assert study.schemes() == SCHEMES
    assert [name for name, _ in study.categories()] == list(study.CATEGORY_KEYS)
    scenarios = study.all_scenarios()
    assert len(scenarios) == len(set(scenarios)) == 648
    assert set(FIG15) <= set(scenarios)


def test_quick_runs_a_dozen_scenarios_with_fig15s_and_every_choice() -> None:
    quick = study.quick_plan()
    chosen = quick.scenario_list()
    assert quick.quick and len(chosen) == 12 == len(set(chosen))
    assert set(FIG15) <= set(chosen)
    for i, (_, choices) in enumerate(study.categories()):
        assert {s[i] for s in chosen} == set(choices)
    assert study.quick_plan().scenario_list() == chosen


def test_scenario_filters_select_by_category_and_name_what_is_wrong() -> None:
    large = study.select_scenarios(["ipc_size=Large"])
    assert len(large) == 324 and all(s[4] == "Large" for s in large)
    two = study.select_scenarios(["ipc_size=Large,period=Short", "period=Long"])
    assert len(two) == 216 and {s[1] for s in two} == {"Short", "Long"}
    for bad, words in (("ipc_size=Huge", "Small, Large"), ("size=Large", "known: criticality"), ("Large", "CATEGORY=CHOICE")):
        with pytest.raises(ValueError, match=words):
            study.select_scenarios([bad])


# ---------------------------------------------------------------------------------------------
# One curve


def test_a_curve_is_precise_enough_at_every_point_and_ends_after_all_zero() -> None:
    item = study.CurveItem(FIG15[2], 1, 0.5, 0.1, 16, 64, 8.0)
    c = study.curve(item)
    points = c["points"]
    assert [p["utilization"] for p in points] == study.utilization_grid(0.5, 8.0)[: len(points)]
    for p in points:
        assert set(p["schedulable"]) == set(SCHEMES)
        assert 0 < p["systems"] <= 64 and p["systems"] % 16 == 0
        assert all(0 <= k <= p["systems"] for k in p["schedulable"].values())
        assert p["systems"] == 64 or study.precise_enough(list(p["schedulable"].values()), p["systems"], 0.1)
    assert not c["truncated"]
    assert not any(points[-1]["schedulable"].values())
    assert all(any(p["schedulable"].values()) for p in points[:-1])
    assert c["seed"] == study.scenario_seed(1, FIG15[2])


def test_task_systems_do_not_depend_on_the_batch() -> None:
    scenario, seed = list(FIG15[0]), study.scenario_seed(3, FIG15[0])
    whole = _core.mc2_schedulable(scenario, 2.0, seed, 0, 24)
    parts = [_core.mc2_schedulable(scenario, 2.0, seed, first, n) for first, n in ((0, 8), (8, 5), (13, 11))]
    assert whole == [sum(col) for col in zip(*parts, strict=True)]
    with pytest.raises(ValueError, match="Huge"):
        _core.mc2_schedulable([*scenario[:4], "Huge", *scenario[5:]], 2.0, seed, 0, 1)


# ---------------------------------------------------------------------------------------------
# The study through the Python API


def _run(out: Path, plan: Plan, **kw: Any) -> Reproduction:
    return reproduce(out, plan=plan, executor=kw.pop("executor", InProcess()), **kw)


def test_the_study_writes_its_files_and_the_summary_names_the_paper_keys(tmp_path: Path) -> None:
    plan = _tiny([FIG15[0], FIG15[2]])
    rep = _run(tmp_path, plan)
    s = rep.summary
    assert list(s)[:4] == ["scenarios", "sua", "paper_ratios", "ratios"]
    assert s["scenarios"] == 2
    assert list(s["sua"]) == SCHEMES and all(v > 0 for v in s["sua"].values())
    assert s["paper_ratios"] == {**PAPER_SUA_RATIOS, **PAPER_OBS10_RATIOS, **{k: v[3] for k, v in PAPER_SUBSET_RATIOS.items()}}
    assert list(s["ratios"]) == list(s["paper_ratios"])
    assert s["paper_ratios"]["C|C/R|R"] == 1.05 and s["paper_ratios"]["O|C+A/B-ALL/R|R"] == 1.20
    json.dumps(s, allow_nan=False)
    for name in ("report.md", "results.json", "points.csv", "points.parquet", "sua.csv", "fig15.png", "fig8.png", "fig14.png", "timing.md"):
        assert (tmp_path / name).is_file(), name
    grid = sorted((tmp_path / "grid").glob("*.png"))
    assert len(grid) == 2
    index = (tmp_path / "grid" / "index.html").read_text(encoding="utf-8")
    assert "(C-Light, Long, Light, Quick, Small, High, Many)" in index and all(p.name in index for p in grid)

    points = pd.read_csv(tmp_path / "points.csv")
    assert list(points.columns) == [
        *study.CATEGORY_KEYS,
        "utilization",
        "scheme",
        "systems",
        "schedulable",
        "fraction",
        "ci_low",
        "ci_high",
    ]
    assert set(points["scheme"]) == set(SCHEMES)
    assert ((points["ci_low"] <= points["fraction"]) & (points["fraction"] <= points["ci_high"])).all()
    assert (points["fraction"] == (points["schedulable"] / points["systems"]).round(6)).all()
    assert pd.read_parquet(tmp_path / "points.parquet").equals(points)
    sua = pd.read_csv(tmp_path / "sua.csv")
    assert list(sua["scheme"]) == SCHEMES
    assert sua["sua"].tolist() == pytest.approx([s["sua"][x] for x in SCHEMES], abs=1e-6)

    text = (tmp_path / "report.md").read_text(encoding="utf-8")
    for heading in (
        "## Setup",
        "## SUA ratios beside the paper's",
        "## Orderings",
        "## Goals",
        "## Fig. 15",
        "## Micro-benchmark",
        "## The model's parameters",
    ):
        assert heading in text, heading
    assert "value at utilisation 0 as 1" in text and "0 beyond its last point" in text
    assert "| C\\|C/R\\|R |" in text and "80 days" in text
    for p in _core.mc2_model_parameters():
        assert p["name"] in text
    names = [c.name for c in rep.checks]
    assert any(n.startswith("goal: C|C/R|R") for n in names) and "IPC-buffer optimisation beats coarse partitioning (Obs. 8)" in names


def test_the_same_seed_gives_the_same_bytes_and_another_seed_other_systems(tmp_path: Path) -> None:
    plan = _tiny([FIG15[1], FIG15[2]])
    _run(tmp_path / "a", plan)
    # Worker processes instead of this one: the same bytes.
    _run(tmp_path / "b", plan, executor=LocalProcesses(2))
    for name in ("points.csv", "sua.csv", "report.md", "results.json", "fig15.png"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name
    _run(tmp_path / "d", _tiny([FIG15[1], FIG15[2]], seed=2))
    assert (tmp_path / "a" / "points.csv").read_bytes() != (tmp_path / "d" / "points.csv").read_bytes()


def test_a_scenarios_curve_does_not_depend_on_the_others_or_their_order(tmp_path: Path) -> None:
    alone = json.loads(json.dumps(study.curve(study.curve_items(_tiny([FIG15[2]]))[0])))
    _run(tmp_path, _tiny([FIG15[0], FIG15[1], FIG15[2]][::-1]))
    data = json.loads((tmp_path / "results.json").read_text())
    got = next(c for c in data["curves"] if tuple(c["scenario"]) == FIG15[2])
    assert got["points"] == alone["points"] and got["seed"] == alone["seed"]


def test_an_interrupted_study_computes_only_the_missing_scenarios_when_run_again(tmp_path: Path) -> None:
    plan = _tiny(FIG15)
    with pytest.raises(KeyboardInterrupt):
        _run(tmp_path, plan, progress=StopAfter(2))
    assert not (tmp_path / "report.md").exists()
    assert len(list((tmp_path / SWEEP_CACHE).rglob("*.json"))) == 2
    _run(tmp_path, plan)
    timing = json.loads((tmp_path / "timing.json").read_text())
    assert (timing["computed"], timing["reused"]) == (1, 2)
    first = (tmp_path / "points.csv").read_bytes()
    _run(tmp_path, plan)
    timing = json.loads((tmp_path / "timing.json").read_text())
    assert (timing["computed"], timing["reused"]) == (0, 3)
    assert (tmp_path / "points.csv").read_bytes() == first
    assert timing["cpu_s"] > 0 and "80 days" in (tmp_path / "timing.md").read_text()


def test_a_smaller_study_in_the_same_folder_leaves_no_stale_grid_plots(tmp_path: Path) -> None:
    _run(tmp_path, _tiny(FIG15))
    _run(tmp_path, _tiny(FIG15[:1]))
    assert len(list((tmp_path / "grid").glob("*.png"))) == 1


def test_the_micro_benchmark_analogues_have_figs_8_and_14s_shape() -> None:
    ipc = study.ipc_costs()
    assert [r["size_bytes"] for r in ipc] == [64, 128, 256, 512, 1024, 2048, 4096, 8192]
    for r in ipc:
        for op in ("send", "receive"):
            assert 0 < r[f"CL_{op}_us"] < r[f"CE_{op}_us"] < r[f"SBP_{op}_us"]
    assert [(r["strategy"], r["operation"]) for r in study.ipc_ranges(ipc)] == [
        ("CL", "send"), ("CL", "receive"), ("CE", "send"), ("CE", "receive"),
    ]  # fmt: skip
    dma = study.dma_inflation()
    for w in study.FIG14_WAYS:
        for bw in study.FIG14_BANDWIDTHS_MB_S:
            line = [r["inflation"] for r in dma if (r["ways"], r["bandwidth_mb_s"]) == (w, bw)]
            assert len(line) == 6 and all(math.isfinite(x) and x >= 1 for x in line)
            assert line == sorted(line, reverse=True) and line[-1] < line[0]


# ---------------------------------------------------------------------------------------------
# The command line


def test_mc2_is_a_registered_paper_that_sweeps() -> None:
    assert PAPERS["mc2"].sweeps and PAPERS["mc2"].module == "critmem.reproduce.mc2"
    o = cli("reproduce", "--help")
    assert o.code == 0 and "mc2" in o.stdout
    flat = " ".join(o.stdout.split())
    assert "sara, tmem, mc2: local worker processes" in flat
    o = cli("study", "mc2", "--help")
    assert o.code == 0 and "--scenarios" in o.stdout and "--scheduler" in o.stdout and "critmem study mc2 --quick" in o.stdout


@pytest.mark.parametrize(
    ("argv", "fragments"),
    [
        (["study", "mc2", "--scenarios", "ipc_size=Huge"], ["ipc_size has no choice 'Huge'", "Small, Large"]),
        (["study", "mc2", "--scenarios", "colour=Red"], ["unknown category 'colour'"]),
        (["study", "mc2", "--step", "0"], ["argument --step", "positive"]),
        (["study", "mc2", "--workers", "0"], ["argument --workers", "at least 1"]),
        (["study", "nope"], ["invalid choice: 'nope'"]),
        (["study"], ["required: STUDY"]),
        (["reproduce", "mc2", "--bogus"], ["unrecognized arguments: --bogus"]),
        (["study", "mc2", "--quick", "--scenarios", "criticality=C-Heavy,period=Long,task_utilization=Light"], ["no scenario of --quick"]),
    ],
    ids=[
        "unknown choice",
        "unknown category",
        "zero step",
        "zero workers",
        "unknown study",
        "no study",
        "unknown flag",
        "empty quick subset",
    ],
)
def test_bad_study_arguments_are_one_line_errors(argv: list[str], fragments: list[str], tmp_path: Path) -> None:
    assert_one_line_error(cli(*argv, "--out", str(tmp_path / "out")) if argv[0] == "study" and len(argv) > 1 else cli(*argv), *fragments)
    assert not (tmp_path / "out" / "report.md").exists()


def test_study_json_prints_one_object_with_the_paper_keys(tmp_path: Path) -> None:
    # One scenario, a coarse grid: a smoke run of the command as a user types it.
    pick = ",".join(f"{k}={v}" for k, v in zip(study.CATEGORY_KEYS, FIG15[2], strict=True))
    o = cli("study", "mc2", "--scenarios", pick, "--step", "2", "--workers", "1", "--out", str(tmp_path), "--json")
    assert o.code == 0, o.stderr
    summary = json.loads(o.stdout)
    assert o.stdout.count("\n") == 1
    assert list(summary)[:4] == ["scenarios", "sua", "paper_ratios", "ratios"]
    assert summary["scenarios"] == 1 and list(summary["sua"]) == SCHEMES
    assert_matches_output_schema("study-mc2", summary)
    assert "wrote report.md" in o.stderr and "grid/index.html" in o.stderr
