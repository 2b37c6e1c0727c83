"""Benchmark of the MC² schedulability study (`critmem study mc2`).

Measures, from empty caches:
- the `--quick` study's curves on a Dask `LocalCluster` with 1 and with 2 worker processes
  (one thread each), alternating, `--rounds` times; the speedup is the ratio of the medians;
- the `--quick` study's curves on local processes (the default executor);
- with `--full`, the whole `critmem reproduce mc2` (648 scenarios, figures included): wall and
  CPU time.
The baseline, measured in the same run, is one scenario's curve (Fig. 15(c)) computed alone in
this process.
Usage: .venv/bin/python scripts/bench_mc2.py [--rounds N] [--full]"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import tempfile
import time
from pathlib import Path

from critmem.reproduce import mc2
from critmem.reproduce.mc2 import study
from critmem.reproduce.mc2.paper import PAPER_FIG15_SCENARIOS
from critmem.sweep import DaskCluster, Executor, LocalProcesses, Sweep


def curves_wall_s(executor: Executor, plan: study.Plan) -> float:
    with tempfile.TemporaryDirectory() as cache:
        t = time.perf_counter()
        with Sweep(executor, cache_dir=Path(cache)) as sweep:
            study.compute(plan, sweep)
        return time.perf_counter() - t


def on_dask(workers: int, plan: study.Plan) -> float:
    from distributed import LocalCluster

    with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        executor = DaskCluster(cluster.scheduler_address)
        try:
            return curves_wall_s(executor, plan)
        finally:
            executor.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--full", action="store_true")
    args = parser.parse_args()
    plan = study.quick_plan()
    item = study.curve_items(study.Plan(scenarios=(tuple(PAPER_FIG15_SCENARIOS["c"]),)))[0]
    t = time.perf_counter()
    study.curve(item)
    baseline_s = time.perf_counter() - t
    one, two = [], []
    for _ in range(args.rounds):
        one.append(on_dask(1, plan))
        two.append(on_dask(2, plan))
    local_s = curves_wall_s(LocalProcesses(), plan)
    out = {
        "baseline_fig15c_curve_s": round(baseline_s, 3),
        "quick_curves_local_processes_s": round(local_s, 3),
        "quick_curves_dask_1_worker_s": [round(x, 3) for x in one],
        "quick_curves_dask_2_workers_s": [round(x, 3) for x in two],
        "dask_speedup_2_over_1": round(statistics.median(one) / statistics.median(two), 3),
    }
    if args.full:
        cpu0 = resource.getrusage(resource.RUSAGE_CHILDREN).ru_utime + resource.getrusage(resource.RUSAGE_SELF).ru_utime
        with tempfile.TemporaryDirectory() as d:
            t = time.perf_counter()
            mc2.reproduce(Path(d))
            out["full_reproduce_wall_s"] = round(time.perf_counter() - t, 1)
        cpu1 = resource.getrusage(resource.RUSAGE_CHILDREN).ru_utime + resource.getrusage(resource.RUSAGE_SELF).ru_utime
        out["full_reproduce_cpu_s"] = round(cpu1 - cpu0, 1)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
