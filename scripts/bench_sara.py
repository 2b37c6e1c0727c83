"""Benchmark of `critmem reproduce sara`: wall time of the full sweep and simulated seconds
per wall second, with a baseline measured in the same run (one of the sweep's 500-period
evaluation runs, alone, in this process). The sweep runs on local worker processes, one per
core, as `critmem reproduce sara` does, from an empty cache.
Usage: .venv/bin/python scripts/bench_sara.py [--quick]"""

from __future__ import annotations

import os
import resource
import sys
import tempfile
import time
from pathlib import Path

import critmem.reproduce.sara
from critmem.reproduce.sara import experiment as sara


def simulated_s(plan: sara.Plan) -> float:
    """Simulated time of every run the reproduction makes."""
    eval_ms = sum((len(sara.CONTROLLERS) + len(sara.VARIANTS)) * plan.periods * w.period_ms for w, _, _ in sara.configs())
    profile_ms = sum(plan.profile_periods * w.period_ms for w in sara.WORKLOADS for _ in sara.SSDS)
    fig7_ms = sum(plan.fig7_periods * w.period_ms for w in sara.WORKLOADS)
    search_ms = sum(
        (plan.offline_candidates + len(plan.tmo_candidates_pct)) * plan.profile_periods * w.period_ms for w, _, _ in sara.configs()
    )
    return (eval_ms + profile_ms + fig7_ms + search_ms) / 1000.0


def main() -> None:
    plan = sara.QUICK if "--quick" in sys.argv else sara.Plan()
    w = sara.WORKLOADS[0]
    t = time.perf_counter()
    sara.measure(sara.Spec(w, 60, "slow-ssd", "sara", (), plan.periods, 1, w.configured_bcet_ms))
    baseline_s = time.perf_counter() - t
    cpu0 = resource.getrusage(resource.RUSAGE_SELF).ru_utime
    t = time.perf_counter()
    with tempfile.TemporaryDirectory() as out:
        critmem.reproduce.sara.reproduce(Path(out), plan=plan)
    sweep_s = time.perf_counter() - t
    # The simulations run in worker processes: their CPU time is the children's.
    cpu_s = resource.getrusage(resource.RUSAGE_SELF).ru_utime - cpu0 + resource.getrusage(resource.RUSAGE_CHILDREN).ru_utime
    sim_s = simulated_s(plan)
    print(f"cores: {os.cpu_count()}  plan: {'quick' if plan.quick else 'full'}  runs: {sara.planned_runs(plan)}")
    print(f"baseline (one {plan.periods}-period evaluation run, {w.name} 60 % slow-ssd sara): {baseline_s:.1f} s")
    print(f"sweep: {sweep_s:.1f} s wall, {cpu_s:.1f} s CPU, {sweep_s / baseline_s:.1f}x the baseline")
    print(f"simulated: {sim_s:.0f} s, {sim_s / sweep_s:.0f} simulated s per wall s")


if __name__ == "__main__":
    main()
