"""Repeated runs on this machine: the schedule that interleaves the controllers, the 95 %
intervals over the runs, and the store that lets a stopped reproduction resume.

A machine's speed drifts (here by up to 2x within an hour), so one run per controller compares
the machine's moods as much as the controllers. Every repeat runs every controller once, each
repeat starting one controller further along the list, so no controller always runs first or
always after the same neighbour; the runs of one controller are then summarised by their mean
and a Student-t 95 % interval.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from critmem.reproduce.results import num
from critmem.sweep import code_fingerprint, item_key
from critmem.sweep.cache import ResultCache

__all__ = ["INTERVAL_METRICS", "RunStore", "aggregate", "interval", "schedule"]

# Two-sided 95 % quantiles of Student's t by degrees of freedom (1 to 30); the normal
# distribution's 1.96 beyond.
_T95 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110,
        2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042)  # fmt: skip

INTERVAL_METRICS = ("hit_ratio", "keepable_hit_ratio", "throughput_per_s")
"""The per-run measurements summarised with an interval."""

# Counts add up over the runs; every other number is averaged.
_SUMMED = frozenset({"jobs", "misses", "dropped", "peak_jobs", "peak_job_misses", "oom_rescues", "failed_checks"})


def schedule(controllers: Sequence[str], repeats: int) -> list[tuple[int, str]]:
    """(repeat, controller) in the order they run: each repeat every controller once, repeat k
    starting at the k-th controller."""
    n = len(controllers)
    return [(k, controllers[(k + i) % n]) for k in range(repeats) for i in range(n)]


def interval(values: Sequence[float | None]) -> list[float] | None:
    """The 95 % confidence interval of the mean of `values` ([low, high]); None with fewer than
    two known values."""
    known = [v for v in values if v is not None]
    if len(known) < 2:
        return None
    mean = statistics.fmean(known)
    t = _T95[len(known) - 2] if len(known) - 1 <= len(_T95) else 1.96
    half = t * statistics.stdev(known) / math.sqrt(len(known))
    return [round(mean - half, 4), round(mean + half, 4)]


def aggregate(runs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """One controller's runs as one measurement: counts summed, other numbers averaged over the
    runs that have them, and the exit codes of every run by app."""
    out: dict[str, Any] = {}
    for key in runs[0]:
        if key in ("repeat", "position"):
            continue
        values = [r.get(key) for r in runs]
        if key == "exit_codes":
            out[key] = {app: [r[key].get(app) for r in runs] for app in runs[0][key]}
        elif key in _SUMMED:
            out[key] = sum(int(v or 0) for v in values)
        else:
            known = [float(v) for v in values if v is not None]
            out[key] = num(statistics.fmean(known), 4) if known else None
    out["runs"] = len(runs)
    return out


class RunStore:
    """Each finished run on the machine, kept under `directory` by what it ran (the scenario and
    the repeat's number), so a reproduction stopped part-way runs only what is missing when
    started again. Entries of another version of critmem are dropped."""

    def __init__(self, directory: Path) -> None:
        self._cache = ResultCache(directory, code_fingerprint()[:16])
        self.reused = 0

    def run(self, scenario: dict[str, Any], repeat: int, measure: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        key = item_key({"scenario": scenario, "repeat": repeat})
        hit, value = self._cache.get(key)
        if hit:
            self.reused += 1
            return dict(value)
        measured = measure()
        self._cache.put(key, measured)
        return measured
