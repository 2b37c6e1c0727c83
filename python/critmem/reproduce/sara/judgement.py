"""How critmem's own controller is judged against the others of the sweep, on one
configuration (DEVELOPERS.md, "Soft real-time memory controllers"):

- deadlines on the jobs a controller can keep: at least `KEEPABLE_GOAL` of the judged jobs that
  are not transient peaks, and no more missed peaks than SARA;
- throughput by dominance: no other controller has both a higher keepable hit ratio and a
  higher non-real-time throughput, and among the controllers that keep at least
  `KEEPABLE_GOAL` of their keepable jobs, its throughput is the best or within
  `THROUGHPUT_TOLERANCE` of it.

Both platforms' reports judge with `judge`, from one `Point` per controller.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from critmem.reproduce.markdown import fmt
from critmem.reproduce.results import num

__all__ = [
    "KEEPABLE_GOAL",
    "MACHINE_KEEPABLE_GOAL",
    "MARKDOWN_HEADER",
    "THROUGHPUT_TOLERANCE",
    "Point",
    "judge",
    "judge_on_machine",
    "keepable_hit_ratio",
    "markdown_rows",
    "pareto_front",
    "rule_text",
]

KEEPABLE_GOAL = 0.99
"""Share of the keepable jobs (judged jobs that are not transient peaks) that must meet their deadline."""
THROUGHPUT_TOLERANCE = 0.01
"""How far below the best throughput among the controllers meeting `KEEPABLE_GOAL` critmem's
controller may be, as a share of that best."""


@dataclass(frozen=True)
class Point:
    """One controller on one configuration."""

    keepable_hit_ratio: float | None
    nonrt_throughput: float | None
    peak_job_misses: int | None


def keepable_hit_ratio(jobs: int, misses: int, peak_jobs: int, peak_job_misses: int) -> float | None:
    """Hits over the judged jobs that are not transient peaks (None when every judged job is a
    peak), from the judged jobs, their misses, and how many of each were peaks."""
    keepable = jobs - peak_jobs
    if keepable <= 0:
        return None
    return (keepable - (misses - peak_job_misses)) / keepable


def _known(p: Point) -> bool:
    return p.keepable_hit_ratio is not None and p.nonrt_throughput is not None


def pareto_front(points: Mapping[str, Point]) -> list[str]:
    """The controllers no other one beats on both keepable hit ratio and throughput (a tie on
    either is no domination), ordered by throughput."""
    known = {c: p for c, p in points.items() if _known(p)}
    front = [c for c, p in known.items() if not any(_dominates(q, p) for q in known.values())]
    return sorted(front, key=lambda c: (known[c].nonrt_throughput, c))


def _dominates(a: Point, b: Point) -> bool:
    assert a.keepable_hit_ratio is not None and a.nonrt_throughput is not None
    assert b.keepable_hit_ratio is not None and b.nonrt_throughput is not None
    return a.keepable_hit_ratio > b.keepable_hit_ratio and a.nonrt_throughput > b.nonrt_throughput


def judge(points: Mapping[str, Point], controller: str, sara: str = "sara") -> dict[str, Any]:
    """The judgement of `controller` among `points` (every controller of the configuration,
    `controller` and `sara` among them): who dominates it, the best throughput among the
    controllers keeping `KEEPABLE_GOAL` of their keepable jobs and its ratio to that, its peak
    misses beside SARA's, and whether the rule holds. A missing value fails the rule."""
    me, s = points.get(controller), points.get(sara)
    others = {c: p for c, p in points.items() if c != controller and _known(p)}
    mine_known = me is not None and _known(me)
    dominated_by = sorted(c for c, p in others.items() if mine_known and me is not None and _dominates(p, me))
    keeping = {c: p for c, p in points.items() if _known(p) and (p.keepable_hit_ratio or 0.0) >= KEEPABLE_GOAL}
    best = max(keeping, key=lambda c: (keeping[c].nonrt_throughput or 0.0, c == controller), default=None)
    best_thr = keeping[best].nonrt_throughput if best is not None else None
    thr = me.nonrt_throughput if me is not None else None
    ratio = thr / best_thr if thr is not None and best_thr else None
    keepable = me.keepable_hit_ratio if me is not None else None
    peaks = me.peak_job_misses if me is not None else None
    sara_peaks = s.peak_job_misses if s is not None else None
    keeps = keepable is not None and keepable >= KEEPABLE_GOAL and peaks is not None and sara_peaks is not None and peaks <= sara_peaks
    # The best is critmem's controller itself or one it is within the tolerance of.
    near_best = thr is not None and best_thr is not None and thr >= (1.0 - THROUGHPUT_TOLERANCE) * best_thr
    return {
        "keepable_hit_ratio": keepable,
        "nonrt_throughput": thr,
        "peak_job_misses": peaks,
        "sara_peak_job_misses": sara_peaks,
        "dominated_by": dominated_by,
        "best_keeping": best,
        "best_keeping_nonrt_throughput": best_thr,
        "throughput_ratio_to_best": num(ratio, 4),
        "keeps": keeps,
        "throughput_holds": mine_known and not dominated_by and near_best,
        "holds": keeps and mine_known and not dominated_by and near_best,
    }


MACHINE_KEEPABLE_GOAL = 0.95
"""On this machine (2 cores, repeated runs): the share of keepable jobs critmem's controller
must keep, on the mean over the runs."""


def judge_on_machine(
    points: Mapping[str, Point],
    intervals: Mapping[str, Mapping[str, list[float] | None]],
    controller: str,
    *,
    above_greedy: bool,
    greedy: str = "greedy",
) -> dict[str, Any]:
    """The judgement of `controller` from repeated runs on a machine (DEVELOPERS.md): its mean
    keepable hit ratio at least `MACHINE_KEEPABLE_GOAL`; no controller that dominates it beyond
    the 95 % intervals (both its keepable hit ratio and its throughput intervals wholly above
    `controller`'s); and, where `above_greedy` (memory binds), its throughput interval wholly
    above Greedy's. `intervals` holds, per controller, the [low, high] of `keepable_hit_ratio`
    and `throughput_per_s` (None after one run: the mean stands for both ends)."""

    def bounds(c: str, metric: str, value: float | None) -> tuple[float, float] | None:
        iv = intervals.get(c, {}).get(metric)
        if iv is not None:
            return iv[0], iv[1]
        return None if value is None else (value, value)

    def ends(c: str) -> tuple[tuple[float, float], tuple[float, float]] | None:
        p = points[c]
        k, t = bounds(c, "keepable_hit_ratio", p.keepable_hit_ratio), bounds(c, "throughput_per_s", p.nonrt_throughput)
        return None if k is None or t is None else (k, t)

    me = points.get(controller)
    mine = ends(controller) if me is not None else None
    dominated_by = []
    if mine is not None:
        for c in sorted(points):
            theirs = ends(c) if c != controller else None
            if theirs is not None and theirs[0][0] > mine[0][1] and theirs[1][0] > mine[1][1]:
                dominated_by.append(c)
    keepable = me.keepable_hit_ratio if me is not None else None
    keeps = keepable is not None and keepable >= MACHINE_KEEPABLE_GOAL
    g = ends(greedy) if greedy in points else None
    beats_greedy = None
    if above_greedy:
        beats_greedy = mine is not None and g is not None and mine[1][0] > g[1][1]
    throughput_holds = mine is not None and not dominated_by and beats_greedy is not False
    return {
        "keepable_hit_ratio": keepable,
        "keepable_interval": intervals.get(controller, {}).get("keepable_hit_ratio"),
        "nonrt_throughput": me.nonrt_throughput if me is not None else None,
        "nonrt_throughput_interval": intervals.get(controller, {}).get("throughput_per_s"),
        "greedy_nonrt_throughput_interval": intervals.get(greedy, {}).get("throughput_per_s"),
        "dominated_by": dominated_by,
        "above_greedy_required": above_greedy,
        "above_greedy": beats_greedy,
        "keeps": keeps,
        "throughput_holds": throughput_holds,
        "holds": keeps and throughput_holds,
    }


MARKDOWN_HEADER = [
    "configuration",
    "keepable hit ratio (all jobs)",
    "peak misses / SARA's, of the peaks",
    "graph throughput",
    "dominated by",
    f"best throughput keeping ≥ {KEEPABLE_GOAL}",
    "ratio to it",
    "holds",
]
"""The columns of `markdown_rows`."""


def markdown_rows(judged: list[dict[str, Any]]) -> list[list[str]]:
    """A report's table of judgements (`judge`'s records with `config`, `hit_ratio` and
    `peak_jobs`), one row per configuration."""
    rows = []
    for e in judged:
        best = e["best_keeping"]
        rows.append(
            [
                e["config"],
                f"{fmt(e['keepable_hit_ratio'], 4)} ({fmt(e['hit_ratio'], 3)})",
                f"{fmt(e['peak_job_misses'])} / {fmt(e['sara_peak_job_misses'])} of {fmt(e['peak_jobs'])}",
                fmt(e["nonrt_throughput"], 2),
                ", ".join(e["dominated_by"]) or "none",
                f"{best}, {fmt(e['best_keeping_nonrt_throughput'], 2)}" if best is not None else "none",
                fmt(e["throughput_ratio_to_best"], 3),
                "yes" if e["holds"] else "**no**",
            ]
        )
    return rows


def rule_text(controller: str, among: str) -> str:
    """The rule in words, for `controller` judged among `among` (their names, as text)."""
    return (
        f"`{controller}` is judged on the jobs a controller can keep: the transient peaks are set apart, "
        f"and the rest, the keepable jobs, must meet their deadlines at least {KEEPABLE_GOAL} of the time, "
        f"with no more peaks missed than SARA misses. Its throughput is judged by dominance among {among}: "
        "none may have both a higher keepable hit ratio and a higher throughput, and among those that keep "
        f"at least {KEEPABLE_GOAL} of their keepable jobs (`{controller}` too) the best throughput is the "
        f"reference, which `{controller}` must reach or come within {THROUGHPUT_TOLERANCE * 100:g} % of."
    )
