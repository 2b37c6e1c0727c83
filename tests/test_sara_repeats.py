"""Repeated runs of `reproduce sara --platform linux`: the interleaved schedule, the 95 %
intervals, the summary of one controller's runs, and resuming from the runs a stopped
reproduction finished."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from critmem.reproduce.sara import machine, repeats
from hypothesis import given
from hypothesis import strategies as st


@given(st.lists(st.sampled_from("abcdefgh"), min_size=1, max_size=8, unique=True), st.integers(1, 12))
def test_every_repeat_runs_every_controller_once_and_the_first_one_moves_along(controllers: list[str], n: int) -> None:
    order = repeats.schedule(controllers, n)
    assert len(order) == n * len(controllers)
    for k in range(n):
        block = order[k * len(controllers) : (k + 1) * len(controllers)]
        assert {r for r, _ in block} == {k} and sorted(c for _, c in block) == sorted(controllers)
        assert block[0][1] == controllers[k % len(controllers)]


def test_the_interval_is_student_t_and_needs_two_runs() -> None:
    # mean 2, standard deviation 1, t(2 df) = 4.303: 2 ± 4.303 / sqrt(3).
    assert repeats.interval([1.0, 2.0, 3.0]) == pytest.approx([2 - 2.4843, 2 + 2.4843], abs=1e-4)
    assert repeats.interval([0.5]) is None and repeats.interval([0.5, None]) is None
    assert repeats.interval([0.8, 0.8, 0.8]) == [0.8, 0.8]
    # Many runs: the normal quantile.
    _lo, hi = repeats.interval([0.0, 1.0] * 40) or [0.0, 0.0]
    assert hi - 0.5 == pytest.approx(1.96 * 0.5031 / (80**0.5), abs=1e-3)


def test_a_controllers_runs_sum_their_counts_and_average_the_rest() -> None:
    runs: list[dict[str, Any]] = [
        {"repeat": 1, "position": 0, "hit_ratio": 1.0, "jobs": 10, "misses": 0, "throughput_per_s": 4.0, "mean_stall_ms": None, "exit_codes": {"a": 0}},
        {"repeat": 2, "position": 3, "hit_ratio": 0.8, "jobs": 10, "misses": 2, "throughput_per_s": 5.0, "mean_stall_ms": 3.0, "exit_codes": {"a": 1}},
    ]  # fmt: skip
    assert repeats.aggregate(runs) == {
        "hit_ratio": 0.9, "jobs": 20, "misses": 2, "throughput_per_s": 4.5, "mean_stall_ms": 3.0, "exit_codes": {"a": [0, 1]}, "runs": 2,
    }  # fmt: skip


def test_a_stopped_reproduction_resumes_with_the_runs_it_finished(tmp_path: Path) -> None:
    measured: list[int] = []

    def measure(value: int) -> Any:
        def go() -> dict[str, Any]:
            measured.append(value)
            return {"hit_ratio": value / 10, "exit_codes": {"speech": 0}}

        return go

    scenario = {"task": [{"name": "speech"}], "memory": {"total_mb": 400.0}}
    first = repeats.RunStore(tmp_path / "runs")
    assert first.run(scenario, 0, measure(1)) == {"hit_ratio": 0.1, "exit_codes": {"speech": 0}}
    # Stopped here; started again: run 0 is taken from the store, run 1 is measured.
    again = repeats.RunStore(tmp_path / "runs")
    assert again.run(scenario, 0, measure(2)) == {"hit_ratio": 0.1, "exit_codes": {"speech": 0}}
    assert again.run(scenario, 1, measure(3)) == {"hit_ratio": 0.3, "exit_codes": {"speech": 0}}
    # Another scenario is another run.
    assert again.run({**scenario, "memory": {"total_mb": 300.0}}, 0, measure(4))["hit_ratio"] == 0.4
    assert measured == [1, 3, 4] and again.reused == 1


def test_the_plan_runs_five_repeats_by_default_and_one_when_quick() -> None:
    assert machine.plan_for(False, None).repeats == machine.DEFAULT_REPEATS == 5
    assert machine.plan_for(True, None).repeats == 1
    assert machine.plan_for(False, None, 8).repeats == 8
    plan = machine.plan_for(True, None, 3)
    # Each app profiled once, then per pair and memory share a search and every controller's runs.
    assert machine.planned_steps(plan) == 2 + len(plan.memory_pcts) * (1 + 3 * len(plan.controllers))
    full = machine.plan_for(False, None, 2)
    assert machine.planned_steps(full) == 3 + 2 * len(full.memory_pcts) * (1 + 2 * len(full.controllers))


def test_the_prediction_error_is_per_run_with_its_median_and_90th_percentile() -> None:
    def row(controller: str, sim_thr: float, measured: list[tuple[float, float]]) -> dict[str, Any]:
        runs = [{"hit_ratio": h, "throughput_per_s": t} for h, t in measured]
        return {"workload": "speech", "nrt": "graph", "memory_pct": 80, "controller": controller, "machine": runs[0], "machine_runs": runs,
                "simulator": {"hit_ratio": 1.0, "throughput_per_s": sim_thr}}  # fmt: skip

    data = {"runs": [row("greedy", 1.0, [(1.0, 1.0), (0.9, 0.8)]), row("sara", 2.0, [(0.5, 1.0), (1.0, 2.0), (0.8, 1.6)])]}
    e = machine.prediction_errors(data)
    # Throughput errors: 0, 25, 100, 0, 25 %; hit ratio errors: 0, 10, 50, 0, 20 points.
    assert e["runs"] == 5
    assert e["throughput_pct"] == {"median": 25.0, "p90": 100.0}
    assert e["hit_ratio_points"] == {"median": 10.0, "p90": 50.0}
    assert [r["throughput_pct"] for r in e["per_config"]] == [12.5, 41.67]
