"""`critmem reproduce tmem`: the TMEM paper's workloads, measures and report.

The generator, the TOML writer, the measures and the report are tested here on their own (the
report from results built by the measure functions on hand-made runs). The tests that simulate
need a simulator that loads `[tmem]`; they skip until it does.
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

import matplotlib.image
import numpy as np
import pandas as pd
import pytest
from conftest import ROOT, assert_matches_output_schema, assert_output_schema_rejects_mangling, cli
from critmem.progress import QuietProgress
from critmem.reproduce import PAPERS
from critmem.reproduce.tmem import experiment, report, workloads
from critmem.reproduce.tmem.experiment import Plan, Spec
from critmem.reproduce.tmem.paper import PAPER_TABLE3_US_I7, PAPER_TABLE4, PAPER_TABLE4_SHAPE
from critmem.reproduce.tmem.workloads import Edge, TmemConfig
from hypothesis import given, settings
from hypothesis import strategies as st

T = TypeVar("T")
R = TypeVar("R")


# ---------------------------------------------------------------------------------------------
# Task sets


@pytest.mark.parametrize("seed", range(1, 21))
def test_task_set_sums_exactly_to_the_utilisation_in_whole_percent(seed: int) -> None:
    ts = workloads.task_set(seed)
    assert len(ts) == 8
    assert sum(t.utilization_pct for t in ts) == 80
    for t in ts:
        assert isinstance(t.period_ms, int) and t.period_ms >= 20
        assert isinstance(t.utilization_pct, int) and t.utilization_pct >= 1
        assert t.wcet_ms == pytest.approx(t.period_ms * t.utilization_pct / 100, abs=1e-9)


@pytest.mark.parametrize("seed", range(1, 11))
def test_priorities_are_rate_monotonic(seed: int) -> None:
    ts = workloads.task_set(seed)
    assert sorted(t.priority for t in ts) == list(range(8))
    by_priority = sorted(ts, key=lambda t: t.priority)
    periods = [t.period_ms for t in by_priority]
    assert periods == sorted(periods)


def test_rm_priorities_break_ties_by_index() -> None:
    # Periods 50, 20, 50, 30: 20 first (index 1), then 30 (index 3), then the two 50s in index order.
    assert workloads.rm_priorities([50, 20, 50, 30]) == [2, 0, 3, 1]


def test_same_seed_same_set_and_different_seeds_differ() -> None:
    assert workloads.task_set(7) == workloads.task_set(7)
    sets = {tuple((t.period_ms, t.utilization_pct) for t in workloads.task_set(s)) for s in range(1, 11)}
    assert len(sets) == 10


@pytest.mark.parametrize(("utilization", "n"), [(0.6, 8), (0.9, 8), (0.8, 12)])
def test_utilisation_and_thread_count_are_parameters(utilization: float, n: int) -> None:
    ts = workloads.task_set(3, n=n, utilization=utilization)
    assert len(ts) == n
    assert sum(t.utilization_pct for t in ts) == round(utilization * 100)
    s = workloads.fig8_scenario(3, n_rt=n, utilization=utilization)
    assert [t["name"] for t in s["task"]] == [f"rt{i}" for i in range(n)]
    assert sum(t["wcet_ms"] / t["period_ms"] for t in s["task"]) == pytest.approx(utilization, abs=1e-9)


def test_impossible_utilisations_are_refused() -> None:
    with pytest.raises(ValueError, match="cannot sum"):
        workloads.draw_utilizations_pct(8, 7, np.random.default_rng(1))
    with pytest.raises(ValueError, match="whole percent"):
        workloads.task_set(1, utilization=0.805)


def test_periods_are_exponential_around_the_mean_above_the_minimum() -> None:
    ps = np.array(workloads.draw_periods_ms(20_000, np.random.default_rng(5)))
    assert ps.min() >= 20
    # An exponential of mean 100 truncated to whole ms and conditioned on >= 20: mean 20 + 100 - 0.5
    # (memorylessness; the truncation to whole ms takes about half a ms off).
    assert ps.mean() == pytest.approx(119.5, rel=0.03)


# ---------------------------------------------------------------------------------------------
# Fig. 8

# Transcribed from the original component script (tools/tmem_python_static): each component's
# [calll_] and [callr_] targets (exe_cb_sbc.o is the sink).
SCRIPT_CHILDREN = {
    "sh0": ("sh1", "sh2"), "sh1": ("sh3", "sh4"), "sh2": ("sh4", "sh5"), "sh3": ("sink", "sh6"),
    "sh4": ("sh6", "sh7"), "sh5": ("sh7", "sink"), "sh6": ("sink", "sh8"), "sh7": ("sh8", "sink"),
    "sh8": ("sink", "sink"),
    "sh9": ("sh10", "sh11"), "sh10": ("sh12", "sh13"), "sh11": ("sh13", "sh14"), "sh12": ("sh0", "sh15"),
    "sh13": ("sh15", "sh16"), "sh14": ("sh16", "sink"), "sh15": ("sh2", "sh17"), "sh16": ("sh17", "sink"),
    "sh17": ("sh5", "sink"),
    "sh18": ("sh19", "sh20"), "sh19": ("sh21", "sh22"), "sh20": ("sh22", "sh23"), "sh21": ("sink", "sh24"),
    "sh22": ("sh24", "sh25"), "sh23": ("sh25", "sh0"), "sh24": ("sink", "sh26"), "sh25": ("sh26", "sh1"),
    "sh26": ("sink", "sh3"),
}  # fmt: skip
# The script's r values: left iff a draw in [0, 128) is >= r, so r32 is 96/128 = 0.75 left, r96
# 32/128 = 0.25 left, no r 64/128 = 0.5; the line sh0, sh4, sh8 is 50/50 (the paper's caption).
LEFT_WEIGHT = {
    **{f"sh{k}": 0.5 for k in (0, 4, 8)},
    **{f"sh{k}": 0.25 for k in (1, 3, 6)},
    **{f"sh{k}": 0.75 for k in (2, 5, 7)},
    **{f"sh{k}": 0.75 for k in range(9, 18)},
    **{f"sh{k}": 0.25 for k in range(18, 27)},
}


def test_fig8_wiring_and_weights_match_the_original_script() -> None:
    graph = workloads.fig8_graph()
    assert list(graph) == [f"sh{k}" for k in range(27)]
    assert {k: (e.left, e.right) for k, e in graph.items()} == SCRIPT_CHILDREN
    assert {k: e.left_weight for k, e in graph.items()} == LEFT_WEIGHT
    assert graph["sh12"] == Edge("sh0", "sh15", 0.75)
    assert graph["sh23"].right_weight == 0.75


def _lattice_program(c: dict[str, Any]) -> None:
    p = c["program"]
    assert p[0] == {"compute_share": 0.1}
    assert p[1] == {"cbuf": "alloc"}
    assert p[3] == {"cbuf": "free"}
    assert p[2]["pass_cbuf"] is True
    assert sum(p[2]["weights"]) == pytest.approx(1.0)
    assert (c["stacks"], c["cbufs"]) == (1, 1)


def test_closed_system_has_the_real_time_and_shared_lattices_and_the_sink() -> None:
    s = workloads.fig8_scenario(1)
    names = [c["name"] for c in s["component"]]
    # sh9 reaches every real-time component; sh12, sh15, sh17 lead into sh0, sh2, sh5, and sh0
    # reaches the whole shared lattice. The best-effort lattice is never entered.
    assert names == [f"sh{k}" for k in range(18)] + ["sink"]
    for c in s["component"][:-1]:
        _lattice_program(c)
    assert s["component"][-1] == {"name": "sink", "stacks": 1, "program": [{"compute_rest": True}]}
    # 18 lattice components with a stack and a cbuf each, the sink a stack: 18 * 2 + 1.
    assert workloads.min_units(s["component"]) == 37
    sh8 = next(c for c in s["component"] if c["name"] == "sh8")
    assert sh8["program"][2] == {"call_one_of": ["sink"], "weights": [1.0], "pass_cbuf": True}


def test_open_system_has_27_components_and_the_sink_and_best_effort_threads() -> None:
    s = workloads.fig8_scenario(1, open_system=True)
    assert [c["name"] for c in s["component"]] == [f"sh{k}" for k in range(27)] + ["sink"]
    assert workloads.min_units(s["component"]) == 27 * 2 + 1
    rt = [t for t in s["task"] if t["name"].startswith("rt")]
    be = [t for t in s["task"] if t["name"].startswith("be")]
    assert len(rt) == 8 and len(be) == 8
    assert min(t["priority"] for t in be) > max(t["priority"] for t in rt)
    for t in be:
        assert (t["criticality"], t["period_ms"], t["wcet_ms"], t["offset_ms"], t["stop_ms"]) == ("D", 20, 20, 20_000, 40_000)
        assert t["program"] == [{"call_one_of": ["sh18", "sh19", "sh21"], "weights": [1 / 3] * 3}]
    for t in rt:
        assert "criticality" not in t
        assert t["program"] == [{"call_one_of": ["sh9", "sh11"], "weights": [0.5, 0.5]}]
    assert s["scheduler"] == {"kind": "fp"} and s["machine"] == {"cpus": 1}
    assert s["run"] == {"horizon_ms": 60_000.0, "seed": 1}


def test_source_entries_fix_each_thread_to_one_of_three() -> None:
    s = workloads.fig8_scenario(2, open_system=True, entries="source")
    rt = [t["program"][0]["call_one_of"] for t in s["task"] if t["name"].startswith("rt")]
    assert rt == [["sh9"], ["sh11"], ["sh14"], ["sh9"], ["sh11"], ["sh14"], ["sh9"], ["sh11"]]
    be = [t["program"][0]["call_one_of"] for t in s["task"] if t["name"].startswith("be")]
    assert be[:4] == [["sh18"], ["sh19"], ["sh21"], ["sh18"]]


def test_tmem_table_of_each_scheme() -> None:
    assert experiment.scheme_config("max", 30).table() == {"policy": "max", "wait": "inherit", "period_ms": 250.0, "first_run_ms": 1250.0}
    assert experiment.scheme_config("greedy-nopi", 12).table() == {
        "policy": "greedy",
        "wait": "block",
        "units_above_min": 12,
        "period_ms": 250.0,
        "first_run_ms": 1250.0,
    }
    assert experiment.scheme_config("tmem-composite", 5).table()["policy"] == "tmem-composite"
    assert experiment.scheme_config("tmem-nopi", 3).table()["wait"] == "block"
    assert experiment.scheme_config("min", None).table()["units_above_min"] == 0
    assert experiment.scheme_config("min", 20).table()["units_above_min"] == 0
    with pytest.raises(ValueError, match="unknown scheme"):
        experiment.scheme_config("lru", 1)


# ---------------------------------------------------------------------------------------------
# Table IV's service


def test_http_service_has_the_papers_shape() -> None:
    svc = workloads.http_service()
    assert len(svc.components) == PAPER_TABLE4_SHAPE["components"] == 23
    assert len(svc.stack_components) == PAPER_TABLE4_SHAPE["stack_components"] == 13
    assert len(svc.cbuf_components) == PAPER_TABLE4_SHAPE["cbuf_components"] == 7
    assert set(svc.cbuf_components) <= set(svc.stack_components)
    # conn_mgr 0.3 + port_ns 0.2 + 0.2 + tcp (0.3 + ip (0.5 + nic (0.6 + evt_mgr 0.3 + sched 0.2))
    # + timer (0.2 + sched 0.2 + stats 0.1)) = 0.7 + 2.4 = 3.1; http_parse 0.9 + url_cache 0.3
    # + lock_svc 0.4 = 1.6; content_mgr 0.3 + ramfs (0.4 + fs_lookup 0.8 + 0.3 + valloc 0.4) = 2.2;
    # http_resp 0.6 + tcp 2.4 + log 0.2 = 3.2; in all 3.1 + 1.6 + 2.2 + 3.2 = 10.1 µs.
    assert svc.request_compute_us() == pytest.approx(10.1)


def test_http_scenario_threads_and_static_allocation() -> None:
    s = workloads.http_scenario(TmemConfig("tmem", "inherit", 24))
    assert len(s["task"]) == PAPER_TABLE4_SHAPE["threads"]
    qos = s["task"][0]
    # 32 calls of 0.25 µs (Table III's costs, the default) and the components' 2.1 µs of compute,
    # each step rounded to the ns: the paper's 10.1 µs.
    assert (qos["name"], qos["priority"], qos["criticality"], qos["deadline_ms"]) == ("qos", 0, "B", 0.010104)
    assert workloads.http_scenario(costs=workloads.NO_COSTS)["task"][0]["deadline_ms"] == 0.0101
    assert all(t["criticality"] == "D" and t["priority"] > 0 for t in s["task"][1:])
    assert s["tmem"]["units_above_min"] == 24
    static = workloads.http_scenario(TmemConfig("min", "inherit", 0), static_units=8)
    units = sum(c.get("stacks", 0) + c.get("cbufs", 0) for c in static["component"])
    # (13 stack caches + 7 cbuf caches) * 8 = 160 = the service's minimum 20 + Table IV's 140.
    assert units == 160 and units - workloads.min_units(workloads.http_service().components) == PAPER_TABLE4["static"][1]


# ---------------------------------------------------------------------------------------------
# TOML


@pytest.mark.parametrize(
    "scenario",
    [
        workloads.fig8_scenario(1),
        workloads.fig8_scenario(4, open_system=True, entries="source", tmem=TmemConfig("max", "inherit", None)),
        workloads.fig8_scenario(2, n_rt=12, utilization=0.9),
        workloads.http_scenario(static_units=8),
    ],
    ids=["closed", "open-source-max", "12-threads", "http-static"],
)
def test_toml_reads_back_to_the_same_dict(scenario: dict[str, Any]) -> None:
    text = workloads.to_toml(scenario, header=("a header", "", "second line"))
    assert tomllib.loads(text) == scenario
    assert text.startswith("# a header\n#\n# second line\n\n")
    assert workloads.to_toml(scenario, header=("a header", "", "second line")) == text


_scalars = st.one_of(
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=8),
)
_keys = st.text(min_size=1, max_size=6)
_values = st.recursive(_scalars, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_keys, inner, max_size=3), max_leaves=6)
_tables = st.dictionaries(_keys, _values, max_size=4)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(_keys, _tables | st.lists(_tables, min_size=1, max_size=3), max_size=4))
def test_toml_round_trips_any_supported_shape(scenario: dict[str, Any]) -> None:
    assert tomllib.loads(workloads.to_toml(scenario)) == scenario


def test_toml_refuses_what_it_cannot_write() -> None:
    with pytest.raises(ValueError, match="inf"):
        workloads.to_toml({"run": {"horizon_ms": float("inf")}})
    with pytest.raises(TypeError, match="table"):
        workloads.to_toml({"seed": 1})
    with pytest.raises(TypeError, match="table"):
        workloads.to_toml({"task": []})


# ---------------------------------------------------------------------------------------------
# Measures on hand-made runs


def _jobs(rows: Sequence[tuple[str, float, float | None, float, bool]]) -> pd.DataFrame:
    """(task, deadline_ms, completion_ms or None, tardiness_ms, missed) → a jobs frame."""
    return pd.DataFrame(
        {
            "task": [r[0] for r in rows],
            "deadline_ms": [r[1] for r in rows],
            "completion_ms": [np.nan if r[2] is None else r[2] for r in rows],
            # Each job released 0.01 ms before its deadline.
            "response_ms": [np.nan if r[2] is None else r[2] - r[1] + 0.01 for r in rows],
            "tardiness_ms": [r[3] for r in rows],
            "missed": [r[4] for r in rows],
        }
    )


HAND_JOBS = _jobs(
    [
        ("rt0", 510.0, 500.0, 0.0, False),
        ("rt0", 1196.0, 1200.0, 4.0, True),
        ("rt0", 1898.0, 1900.0, 2.0, True),
        ("rt0", 2600.0, 2500.0, 0.0, False),
        ("rt0", 2999.0, 3000.0, 1.0, True),  # completes exactly at the horizon: the last window
        ("rt1", 1493.0, 1500.0, 7.0, True),
        ("rt1", 2800.0, None, 200.0, True),  # unfinished at the horizon, its deadline passed
        ("be0", 2550.0, 2600.0, 50.0, True),  # best effort: left out
    ]
)


def test_window_maxima_and_misses_known_answer() -> None:
    rt = {"rt0", "rt1"}
    # Windows [0,1000), [1000,2000), [2000,3000]: completions 500 (0) | 1200 (4), 1500 (7),
    # 1900 (2) | 2500 (0), 3000 (1); the unfinished job completes in none.
    assert experiment.window_max_tardiness_ms(HAND_JOBS, rt, 3000) == [0.0, 7.0, 1.0]
    # Missed deadlines: 1196, 1898, 1493 in the second window; 2999, 2800 in the third.
    assert experiment.window_misses(HAND_JOBS, rt, 3000) == [0, 3, 2]
    m = experiment.tardiness_measures(HAND_JOBS, rt, 3000)
    # (0 + 7 + 1) / 3 windows; the largest 7; 5 misses in 3 s.
    assert m == {"max_tardiness_ms": pytest.approx(8 / 3), "run_max_tardiness_ms": 7.0, "misses_per_s": pytest.approx(5 / 3)}


def test_a_partial_last_window_counts() -> None:
    # 2.5 s: windows [0,1), [1,2), [2,2.5].
    assert experiment.windows(2500) == 3 and experiment.windows(3000) == 3 and experiment.windows(1) == 1
    assert experiment.window_max_tardiness_ms(_jobs([("a", 2100, 2400, 3.0, True)]), {"a"}, 2500) == [0.0, 0.0, 3.0]


def test_real_time_tasks_leave_out_criticality_d() -> None:
    tasks = pd.DataFrame({"name": ["rt0", "be0", "qos"], "criticality": pd.Categorical(["C", "D", "B"])})
    assert experiment.real_time_tasks(tasks) == {"rt0", "qos"}


def test_window_memory_known_answer() -> None:
    tl = [
        {"time_ns": 250_000_000, "allocated_units": 40},
        {"time_ns": 500_000_000, "allocated_units": 45},
        {"time_ns": 1_250_000_000, "allocated_units": 37},
    ]
    # Minimum 37: window 0 holds 40 and 45 → 8 above it; window 1 37 → 0; window 2 no policy run.
    assert experiment.window_memory_units(tl, 37, 3000) == [8.0, 0.0, None]


def test_slopes_and_their_ratio_known_answer() -> None:
    # ys 9, 5, 1 at xs 0, 10, 20: Σdx·dy / Σdx² = (−10·4 + 10·−4) / 200 = −0.4.
    assert experiment.lsq_slope([0, 10, 20], [9, 5, 1]) == pytest.approx(-0.4)
    assert experiment.lsq_slope([5, 5], [1, 2]) is None
    rows = [{"scheme": "tmem", "memory_above_min": x, "max_tardiness_ms": y} for x, y in [(20, 0.0), (0, 8.0), (10, 4.0)]]
    rows += [{"scheme": "greedy", "memory_above_min": x, "max_tardiness_ms": y} for x, y in [(0, 9.0), (10, 8.0), (20, 7.0)]]
    # tmem −0.4 per unit, greedy −0.1: tmem's slope is 4 times greedy's (the paper's claim).
    s = experiment.slope_ratio(rows)
    assert s["tmem_slope"] == pytest.approx(-0.4) and s["greedy_slope"] == pytest.approx(-0.1)
    assert s["ratio"] == pytest.approx(4.0)
    flat = [r | {"max_tardiness_ms": 1.0} if r["scheme"] == "greedy" else r for r in rows]
    assert experiment.slope_ratio(flat)["ratio"] is None


def test_memory_sizes_are_even_whole_units() -> None:
    assert experiment.memory_sizes(30, 4) == [0, 10, 20, 30]
    # round(5k/7) for k = 0..7: 0, 1, 1, 2, 3, 4, 4, 5.
    assert experiment.memory_sizes(5, 8) == [0, 1, 2, 3, 4, 5]
    assert experiment.memory_sizes(0, 8) == [0]


# ---------------------------------------------------------------------------------------------
# The experiment and the report, on runs made up from the measures

TINY = Plan(
    task_sets=2, horizon_ms=3000, sizes=3, fig7_task_sets=2, fig7_horizon_ms=6000, be_start_ms=2000, be_stop_ms=4000,
    table4_horizon_ms=1000, robustness=((0.6, 8), (0.8, 12)), robustness_task_sets=1, robustness_horizon_ms=2000, robustness_sizes=2,
    held_out_task_sets=2, robustness_held_out_task_sets=1,
)  # fmt: skip
# Made-up tardiness per scheme: at memory m above the minimum, base − slope·m (≥ 0).
FAKE_LINES = {
    "min": (9.0, 0),
    "max": (0.5, 0),
    "fair": (7.0, 0.1),
    "greedy": (8.0, 0.1),
    "greedy-nopi": (12.0, 0.1),
    "tmem": (6.0, 0.4),
    "tmem-nopi": (10.0, 0.2),
    "tmem-composite": (5.5, 0.35),
    "watermark": (5.0, 0.4),
    "watermark-nopi": (9.0, 0.2),
}
HELD_FRACTION = {"watermark": 0.5, "watermark-nopi": 0.5}
"""Made-up units held on average, as a share of the memory above the minimum (1 for others)."""
FAKE_MAX_PEAK = 12
FAKE_MIN = 37


def _fake_tardiness(spec: Spec) -> float:
    base, slope = FAKE_LINES["tmem" if spec.scheme == "static" else spec.scheme]
    return max(0.0, base - slope * (spec.units_above_min or 0))


def fake_measure(spec: Spec) -> dict[str, Any]:
    """What `measure` returns for `spec`, from a made-up run: one real-time job completing late
    in each window and one best-effort job, and a tmem section."""
    n = experiment.windows(spec.horizon_ms)
    tardy = _fake_tardiness(spec)
    rows = [("rt0", 1000.0 * k + 400, 1000.0 * k + 500, tardy, tardy > 0) for k in range(n)]
    rows.append(("be0", 100.0, 900.0, 99.0, True))
    peak = FAKE_MIN + (FAKE_MAX_PEAK if spec.scheme == "max" else (spec.units_above_min or 0))
    held = FAKE_MIN + HELD_FRACTION.get(spec.scheme, 1.0) * (peak - FAKE_MIN)
    summary = {
        "tmem": {
            "min_units": FAKE_MIN,
            "peak_allocated_units": peak,
            "allocated_unit_us": round(held * spec.horizon_ms * 1000),
            "caches": [{"waits": 3}, {"waits": 4}],
            "timeline": [{"time_ns": int(t * 1e6), "allocated_units": peak} for t in np.arange(250, spec.horizon_ms + 1, 250)],
        }
    }
    tasks = pd.DataFrame({"name": ["rt0", "be0", "qos"], "criticality": ["C", "D", "B"]})
    jobs = _jobs(rows)
    if spec.kind == "table4":
        jobs = pd.concat([jobs, _jobs([("qos", 10.0, 10.0 + tardy / 100, 0.0, False)])], ignore_index=True)
    return experiment.measure_run(spec, summary, tasks, jobs)


class InProcess:
    """An executor that runs each item here (the made-up `measure`)."""

    def run(self, fn: Callable[[T], R], items: Sequence[T], keys: Sequence[str]) -> Iterator[tuple[int, R]]:
        for i, item in enumerate(items):
            yield i, fn(item)

    def close(self) -> None:
        pass


@pytest.fixture
def fake_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(experiment, "measure", fake_measure)


@pytest.fixture
def tiny_data(fake_runs: None, tmp_path: Path) -> dict[str, Any]:
    from critmem.sweep import Sweep

    with Sweep(InProcess(), cache_dir=tmp_path / "cache") as sweep:
        return experiment.compute(TINY, sweep)


def test_compute_sizes_from_max_and_averages_over_sets(tiny_data: dict[str, Any]) -> None:
    d = tiny_data
    assert d["memory_sizes"] == [0, 6, 12]  # max peaks 12 above the minimum; 3 sizes
    # 2 sets × (min, max) + 2 sets × 9 schemes (Fig. 7) + 5 Table IV rows + 2 sets × 8 sized schemes × 3 sizes
    # + 2 held-out sets × 4 schemes × 3 sizes, and per robustness configuration 1 set × (max + 7 schemes × 2
    # sizes) + 1 held-out set × 4 schemes × 2 sizes.
    assert d["simulation_runs"] == 4 + 18 + 5 + 48 + 24 + 2 * (1 + 14 + 8) == experiment.planned_runs(TINY)
    assert d["critmem_scheduler"] == "watermark"
    assert d["seed_sets"] == {"design": [1, 2], "held_out": [11, 12], "robustness_held_out": [11]}
    greedy = {r["memory_above_min"]: r for r in d["fig6"] if r["scheme"] == "greedy" and r["seed_set"] == "design"}
    # 3 one-second windows each with a job 8 − 0.1·m late: the mean of the window maxima.
    assert greedy[6]["max_tardiness_ms"] == pytest.approx(7.4) and greedy[6]["task_sets"] == 2
    assert greedy[6]["misses_per_s"] == pytest.approx(1.0)
    assert greedy[6]["peak_above_min"] == 6
    assert greedy[6]["mean_units_held"] == pytest.approx(6.0)
    held_out = [r for r in d["fig6"] if r["seed_set"] == "held_out"]
    assert {r["scheme"] for r in held_out} == set(experiment.HELD_OUT_SCHEMES)
    own = {r["memory_above_min"]: r for r in held_out if r["scheme"] == "watermark"}
    assert own[12]["mean_units_held"] == pytest.approx(6.0) and own[12]["task_sets"] == 2
    assert all({"seed_set", "mean_units_held"} <= set(r) for r in d["fig6"])
    mx = next(r for r in d["fig6"] if r["scheme"] == "max")
    assert mx["memory_above_min"] == FAKE_MAX_PEAK and mx["max_tardiness_ms"] == pytest.approx(0.5)
    assert d["slope"]["ratio"] == pytest.approx(4.0)
    # Fig. 7: 6 bins per scheme; memory is the peak above the minimum at each policy run.
    tm7 = [r for r in d["fig7"] if r["scheme"] == "tmem"]
    assert [r["t_s"] for r in tm7] == [0, 1, 2, 3, 4, 5]
    assert all(r["memory_units"] == TINY.fig7_units_above_min for r in tm7)
    assert {(r["scheme"], r["phase"]) for r in d["fig7_phases"]} == {
        (s, p) for s in experiment.FIG7_SCHEMES for p in ("before", "during", "after")
    }
    t4 = {r["policy"]: r for r in d["table4"]}
    assert list(t4) == ["min", "max", "static", "tmem", "watermark"]
    # qos completes tardiness/100 ms after its deadline, released 0.01 ms before it: under min
    # (9) 0.09 + 0.01 ms = 100 µs.
    assert t4["min"]["response_us"] == pytest.approx(100.0)
    assert t4["tmem"]["tmem_above_min"] == FAKE_MIN + TINY.table4_units_above_min - 20
    assert (t4["static"]["paper_response_us"], t4["static"]["paper_tmem_above_min"]) == PAPER_TABLE4["static"]
    # The paper has no row for critmem's scheduler; it runs with tmem's memory.
    assert (t4["watermark"]["paper_response_us"], t4["watermark"]["paper_tmem_above_min"]) == (None, None)
    assert t4["watermark"]["response_us"] == pytest.approx(10.0)  # max(0, 5 − 0.4·24) / 100 + 0.01 ms
    # Robustness: sizes 0 and max's peak; 2 s runs, so 2 windows each.
    rob = d["robustness"]
    assert [(r["utilization"], r["n_rt"], r["memory_sizes"]) for r in rob] == [(0.6, 8, [0, 12]), (0.8, 12, [0, 12])]
    tm = {r["memory_above_min"]: r["max_tardiness_ms"] for r in rob[1]["fig6"] if r["scheme"] == "tmem" and r["seed_set"] == "design"}
    assert tm == {0: pytest.approx(6.0), 12: pytest.approx(1.2)}
    assert {r["scheme"] for r in rob[0]["fig6"] if r["seed_set"] == "design"} == {"max", *experiment.ROBUST_SCHEMES}
    assert {r["scheme"] for r in rob[0]["fig6"] if r["seed_set"] == "held_out"} == set(experiment.HELD_OUT_SCHEMES)


def test_headline_has_the_documented_keys(tiny_data: dict[str, Any]) -> None:
    h = experiment.headline(tiny_data)
    assert {"fig6", "slope_ratio", "fig7", "table4", "robustness", "critmem_scheduler", "seed_sets"} <= set(h)
    assert h["critmem_scheduler"] == "watermark"
    keys = {"scheme", "seed_set", "memory_above_min", "max_tardiness_ms", "misses_per_s", "mean_units_held"}
    assert all(set(r) == keys for r in h["fig6"])
    assert {r["seed_set"] for r in h["fig6"]} == {"design", "held_out"}
    assert any(r["scheme"] == "watermark" for r in h["fig6"])
    assert all(set(r) == keys for c in h["robustness"] for r in c["fig6"])
    assert all(set(r) == {"scheme", "t_s", "memory_units", "max_tardiness_ms", "misses_per_s"} for r in h["fig7"])
    json.dumps(h, allow_nan=False)


def _own_check(data: dict[str, Any], name: str) -> bool:
    return next(c for c in report.acceptance_checks(data) if c.name == name).passed


def _set(data: dict[str, Any], scheme: str, size: int, field: str, value: float) -> None:
    for r in data["fig6"]:
        if r["scheme"] == scheme and r["seed_set"] == "held_out" and r["memory_above_min"] == size:
            r[field] = value


def test_acceptance_checks_hold_and_fail_as_the_numbers_say(tiny_data: dict[str, Any]) -> None:
    checks = report.acceptance_checks(tiny_data)
    own = "watermark vs greedy, {}, held-out seeds: {}"
    where = ["Fig. 6", "Σu 0.6, 8 threads", "Σu 0.8, 12 threads"]
    assert [c.name for c in checks] == [
        "greedy no worse than greedy-nopi",
        "tmem no worse than tmem-nopi",
        "watermark no worse than watermark-nopi",
        "tmem's own cost",
        "tmem-composite's own cost",
        "watermark's own cost",
        "watermark run under 50 µs",
        *[own.format(w, what) for w in where for what in ("every size", "on average", "memory")],
    ]
    assert all(c.passed for c in checks), [c for c in checks if not c.passed]
    every, average, memory = (own.format("Fig. 6", what) for what in ("every size", "on average", "memory"))
    # Greedy 8 − 0.1·12 = 6.8 ms at +12: 5 % is 0.34 ms, so 7.13 is within and 7.15 is not.
    for value, within in ((7.13, True), (7.15, False)):
        d = json.loads(json.dumps(tiny_data))
        _set(d, "watermark", 12, "max_tardiness_ms", value)
        assert _own_check(d, every) is within
    # Greedy at 0 ms: the allowance is 0.1 ms.
    for value, within in ((0.09, True), (0.11, False)):
        d = json.loads(json.dumps(tiny_data))
        _set(d, "greedy", 12, "max_tardiness_ms", 0.0)
        _set(d, "watermark", 12, "max_tardiness_ms", value)
        assert _own_check(d, every) is within
    # The mean over the sizes must be below greedy's (or both 0).
    d = json.loads(json.dumps(tiny_data))
    for x in (0, 6, 12):
        _set(d, "watermark", x, "max_tardiness_ms", 8 - 0.1 * x)
    assert not _own_check(d, average) and _own_check(d, every)
    for x in (0, 6, 12):
        _set(d, "watermark", x, "max_tardiness_ms", 0.0)
        _set(d, "greedy", x, "max_tardiness_ms", 0.0)
    assert _own_check(d, average)
    # Holding as much as greedy on average is not fewer.
    d = json.loads(json.dumps(tiny_data))
    for x in (0, 6, 12):
        _set(d, "watermark", x, "mean_units_held", float(x))
    assert not _own_check(d, memory)
    # Design-seed rows do not count toward the held-out checks.
    d = json.loads(json.dumps(tiny_data))
    for r in d["fig6"]:
        if r["scheme"] == "watermark" and r["seed_set"] == "design":
            r["max_tardiness_ms"] = 99.0
    assert _own_check(d, every)
    d = json.loads(json.dumps(tiny_data))
    for r in d["fig6"]:
        if r["scheme"] == "watermark-nopi":
            r["max_tardiness_ms"] = 0.0
    assert not _own_check(d, "watermark no worse than watermark-nopi")
    # A policy over the paper's share of the period fails its cost check.
    d = json.loads(json.dumps(tiny_data))
    for r in d["policy_cost"]:
        if r["policy"] == "tmem":
            r["share_of_period_pct"] = 0.25
    assert not _own_check(d, "tmem's own cost")


def test_reproduce_writes_the_report_figures_and_results(fake_runs: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from critmem.reproduce.tmem import reproduce

    out = tmp_path / "out"
    rep = reproduce(out, plan=TINY, executor=InProcess(), progress=QuietProgress())
    assert [p.name for p in rep.files] == [
        "report.md",
        "results.json",
        "fig6_tardiness.png",
        "fig6_misses.png",
        "fig7.png",
        "pool_size.png",
    ]
    for p in rep.files:
        assert p.exists() and p.stat().st_size > 0
    for png in rep.files[2:]:
        assert matplotlib.image.imread(png).shape[0] > 100
    text = (out / "report.md").read_text(encoding="utf-8")
    for heading in (
        "## Setup",
        "## Fig. 6",
        "## Fig. 7",
        "## Table IV",
        "## critmem's own scheduler",
        "## Robustness",
        "## Acceptance checks",
    ):
        assert heading in text
    assert "| tmem / greedy | 4.00 | 4 |" in text
    assert "| min | 100.000 | 38.800 |" in text
    # greedy 8 − 0.1·m, greedy-nopi 12 − 0.1·m, tmem 6 − 0.4·m, tmem-nopi 10 − 0.2·m, means over m = 0 and 12.
    # tmem-composite: 5.5 at +0 and 5.5 − 0.35·12 = 1.3 at +12, mean 3.4; watermark 5 − 0.4·m: 2.6;
    # watermark-nopi 9 − 0.2·m: 7.8. Units held: greedy m (mean 6), watermark m / 2 (3).
    assert (
        "| 0.6 | 8 | +0, +12 | design (1) | 7.400 | 11.400 | 3.600 | 8.800 | 3.400 | 2.600 | 7.800 | 6.00 | 3.00 | 4.00 | 3 of 3 |" in text
    )
    assert "| 0.6 | 8 | +0, +12 | held-out (1) | 7.400 | – | 3.600 | – | 3.400 | 2.600 | – | 6.00 | 3.00 | – | 3 of 3 |" in text
    data = json.loads((out / "results.json").read_text())
    assert data["minimums"] == {
        "fig6_min_units": 37,
        "fig7_min_units": 55,
        "table4_min_units": 20,
        "paper_fig6_min_pages": 48,
        "paper_fig7_min_pages": 74,
    }
    assert rep.summary["files"] == [p.name for p in rep.files]
    assert all(c.passed for c in rep.checks)
    assert_matches_output_schema("reproduce-tmem", rep.summary)


# ---------------------------------------------------------------------------------------------
# The command line


def test_help_lists_tmem() -> None:
    o = cli("reproduce", "--help")
    assert o.code == 0
    assert "tmem " in o.stdout and PAPERS["tmem"].summary[:40] in " ".join(o.stdout.split())
    assert "critmem reproduce tmem --quick --json" in o.stdout
    assert PAPERS["tmem"].sweeps


def test_quick_json_matches_its_output_schema(tmp_path: Path) -> None:
    o = cli("reproduce", "tmem", "--quick", "--json", "--out", str(tmp_path))
    assert o.code == 0, o.stderr
    summary = json.loads(o.stdout)
    assert summary["quick"] is True
    assert_matches_output_schema("reproduce-tmem", summary)
    assert_output_schema_rejects_mangling("reproduce-tmem", summary)


# ---------------------------------------------------------------------------------------------
# Real runs of the TMEM scenarios

TMEM_KEYS = {"policy", "wait", "period_ns", "total_units", "min_units", "runs", "peak_allocated_units", "caches", "timeline"}
CACHE_KEYS = {
    "component", "kind", "min_units", "peak_allocated_units", "final_allocated_units", "final_desired_units",
    "gets", "grows", "waits", "total_wait_ns", "longest_wait_ns", "removed_units",
}  # fmt: skip


@pytest.mark.parametrize("open_system", [False, True], ids=["closed", "open"])
def test_fig8_scenarios_run_with_the_tmem_section(open_system: bool) -> None:
    from critmem.api import run

    s = workloads.fig8_scenario(1, open_system=open_system, horizon_ms=3000, be_start_ms=1000, be_stop_ms=2000)
    r = run(s, record_segments=False)
    t = r.summary["tmem"]
    assert TMEM_KEYS <= set(t)
    assert (t["policy"], t["wait"]) == ("tmem", "inherit")
    assert t["min_units"] == workloads.min_units(s["component"])
    assert t["total_units"] == t["min_units"] + 20
    assert t["min_units"] <= t["peak_allocated_units"] <= t["total_units"]
    comps = [c["name"] for c in s["component"]]
    assert len(t["caches"]) == len(comps) + len(comps) - 1  # a stack cache each, a cbuf cache but the sink's
    assert all(CACHE_KEYS <= set(c) for c in t["caches"])
    # The first run at 1250 ms, then every 250 ms: 1250, 1500, ..., 2750.
    assert len(t["timeline"]) == t["runs"] == (3000 - 1250) // 250
    assert set(r.jobs["task"]) == {x["name"] for x in s["task"]}
    m = experiment.measure(Spec("fig7" if open_system else "fig6", "tmem", 1, 20, 3000, be_start_ms=1000, be_stop_ms=2000))
    assert m["min_units"] == t["min_units"]


def test_generated_scenarios_carry_table_iii_costs() -> None:
    costs = workloads.TABLE3_COSTS
    assert costs.invocation_us == PAPER_TABLE3_US_I7["invocation with a cached stack"] == 0.25
    assert costs.cbuf_map_us == PAPER_TABLE3_US_I7["cbuf2buf"] == 0.08
    for spec in (Spec("fig6", "greedy", 1, 10, 1000), Spec("fig7", "tmem", 2, 20, 1000), Spec("table4", "min", 1, 0, 100)):
        s = spec.scenario()
        assert s["components"] == {"invocation_cost_us": 0.25}, spec
        assert s["tmem"]["cbuf_map_us"] == 0.08, spec
    # Without costs the tables are left out (the bundled examples' form).
    bare = workloads.fig8_scenario(1, costs=workloads.NO_COSTS)
    assert "components" not in bare and "cbuf_map_us" not in bare["tmem"]
    assert "components" not in workloads.example_scenario("tmem-fig8")


def test_with_table_iii_costs_a_request_still_takes_the_papers_time_and_its_first_maps_on_top() -> None:
    """One handler thread with unlimited memory (no waits). The paper's 10.1 µs response
    includes its 32 invocations, so with Table III's 0.25 µs a call the components compute
    2.1 µs and the calls take 8 µs: every request takes 10.1 µs (to the ns of rounding each
    step), and the first also 0.08 µs per passed cbuf mapped where it goes (later requests reuse
    the same units, already mapped). The deadline is the steady state, so only the first
    request is late, by its maps."""
    from critmem.api import run

    def responses(costs: workloads.Costs) -> tuple[list[float], int, float]:
        s = workloads.http_scenario(TmemConfig("max", "inherit", None), threads=1, horizon_ms=5, costs=costs)
        r = run(s, record_segments=False)
        q = r.jobs[r.jobs["task"] == "qos"].sort_values("release_ms")
        assert sum(c["waits"] for c in r.summary["tmem"]["caches"]) == 0
        return [float(x) for x in q["response_ms"]], int(r.summary["tmem"]["cbuf_mappings"]), float(s["task"][0]["deadline_ms"])

    base, _, base_deadline = responses(workloads.NO_COSTS)
    costly, maps, deadline = responses(workloads.TABLE3_COSTS)
    assert len(base) == len(costly) >= 10
    assert base == pytest.approx([0.0101] * len(base), abs=1e-9)
    assert workloads.http_service().request_calls() == 32
    svc = workloads.http_service(0.25)
    assert svc.request_compute_us() == pytest.approx(2.1, abs=0.03)
    assert svc.request_compute_us(workloads.TABLE3_COSTS) == pytest.approx(10.1, abs=0.03)
    assert maps == 6  # conn_mgr→tcp, tcp→ip, ip→nic, http_parse→url_cache, content_mgr→ramfs, http_resp→tcp
    assert costly[1:] == pytest.approx([deadline] * (len(costly) - 1), abs=1e-9)
    assert costly[0] - deadline == pytest.approx(maps * 0.08 / 1000, abs=1e-9)
    assert deadline == pytest.approx(base_deadline, abs=3e-5)


def test_same_seed_gives_the_same_run() -> None:
    spec = Spec("fig6", "greedy", 2, 10, 5000)
    assert experiment.measure(spec) == experiment.measure(spec)


def test_http_service_runs_and_static_needs_no_waits() -> None:
    static = experiment.measure(Spec("table4", "static", 1, 0, 300, static_units=8))
    assert static["waits"] == 0
    assert static["peak_allocated_units"] == 160
    mn = experiment.measure(Spec("table4", "min", 1, 0, 300))
    assert mn["qos_mean_response_us"] >= static["qos_mean_response_us"] >= 10.1 - 1e-6


@pytest.mark.parametrize(("utilization", "n"), [(0.6, 8), (0.9, 8), (0.8, 12)])
def test_fig6_ordering_holds_at_other_utilisations_and_sizes(utilization: float, n: int) -> None:
    """Beyond the paper's U = 0.8 with 8 threads (test-sized): each scheme with priority
    inheritance is no worse than its variant without. (`tmem` and `tmem-composite` against greedy
    are reported, not asserted: the report shows where they trail greedy and why.)"""
    plan = Plan(task_sets=2, horizon_ms=20_000, sizes=3, n_rt=n, utilization=utilization, held_out_task_sets=0)
    peaks = [experiment.measure(experiment._spec(plan, "fig6", "max", seed, None))["peak_above_min"] for seed in (1, 2)]
    sizes = experiment.memory_sizes(max(peaks), plan.sizes)
    schemes = {s for pair in experiment.NOPI_PAIRS for s in pair}
    runs = [experiment.measure(s) for s in experiment.second_batch(plan, sizes) if s.scheme in schemes]
    data = {"fig6": experiment.fig6_rows(runs, sizes)}
    checks = {c.name: c for c in report.acceptance_checks(data)}
    for pi, nopi in experiment.NOPI_PAIRS:
        assert checks[f"{pi} no worse than {nopi}"].passed, checks[f"{pi} no worse than {nopi}"]


def test_quick_reproduction_end_to_end(tmp_path: Path) -> None:
    o = cli("reproduce", "tmem", "--quick", "--json", "--out", str(tmp_path))
    assert o.code == 0, o.stderr
    summary = json.loads(o.stdout)
    assert summary["critmem_scheduler"] == "watermark"
    assert {r["scheme"] for r in summary["fig6"]} == set(experiment.SCHEMES)
    assert {r["scheme"] for r in summary["fig6"] if r["seed_set"] == "held_out"} == set(experiment.HELD_OUT_SCHEMES)
    assert all(r["mean_units_held"] is not None for r in summary["fig6"])
    assert [(c["utilization"], c["n_rt"]) for c in summary["robustness"]] == [(0.6, 8), (0.9, 8), (0.8, 12)]
    assert all({r["seed_set"] for r in c["fig6"]} == {"design", "held_out"} for c in summary["robustness"])
    assert [r["policy"] for r in summary["table4"]] == list(experiment.TABLE4_ROWS)
    assert len([r for r in summary["fig7"] if r["scheme"] == "tmem"]) == 60
    for name in ("report.md", "results.json", "fig6_tardiness.png", "fig6_misses.png", "fig7.png", "pool_size.png"):
        assert (tmp_path / name).exists()


@pytest.mark.parametrize("name", list(workloads.EXAMPLES))
def test_bundled_examples_load(name: str) -> None:
    from critmem import _core

    _core.validate(workloads.example_toml(name), f"{name}.toml", "toml")


def test_examples_folder_holds_the_generated_text() -> None:
    for name in workloads.EXAMPLES:
        path = ROOT / "examples" / f"{name}.toml"
        if not path.exists():
            pytest.skip(f"{path.name} is not in examples/ on this branch")
        assert path.read_text(encoding="utf-8") == workloads.example_toml(name)
