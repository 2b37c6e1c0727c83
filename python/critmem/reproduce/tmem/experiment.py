"""The experiment of the TMEM reproduction: what runs, and the numbers it yields.

Every number in `results.json` and in the report's "model" columns comes from simulating the
generated workloads (`workloads`); the "paper" columns quote the paper (`paper`). The
experiments (Sec. VI-B):

- Fig. 6: the closed system (real-time threads only) under each scheme — min, max, fair,
  greedy, greedy without PI, tmem, tmem without PI — at memory sizes from 0 to the peak `max`
  reaches above the minimum, on every task set; per run the largest tardiness of any real-time
  job completing in each 1 s window, averaged over the windows, and misses per second;
- the least-squares slope of that tardiness against memory for tmem and greedy, and their ratio
  (the paper: tmem's is 4× steeper);
- Fig. 7: the open system (best-effort threads from 20 s to 40 s) under each scheme, in 1 s
  bins: memory above the minimum, the largest tardiness, misses;
- Table IV: the request-response service under min, max, static and tmem: the high-QoS
  thread's mean response time and the transient memory used above the minimum;
- critmem's own scheduler (`CRITMEM_SCHEDULER`) beside them everywhere, and a held-out
  evaluation: it was designed on the task sets of seeds 1–10 (`DESIGN_SEEDS`) and is measured
  again, with greedy, tmem and tmem-composite, on task sets it never saw (`Plan.held_out_seeds`),
  at Fig. 6's memory sizes and at each robustness configuration.

Each simulation is one `Spec` run by `measure` on `critmem.sweep`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np
import pandas as pd

from critmem.reproduce.results import num
from critmem.reproduce.tmem.paper import PAPER_FIG6_MIN_PAGES, PAPER_FIG7_MIN_PAGES, PAPER_SLOPE_RATIO, PAPER_TABLE4
from critmem.reproduce.tmem.workloads import TmemConfig, fig8_scenario, http_scenario, http_service, min_units, task_set
from critmem.sweep import Sweep

WINDOW_MS = 1000.0
"""Sec. VI-B: "the average of per-second deadlines missed and maximum tardiness"."""

CRITMEM_SCHEDULER = "watermark"
"""critmem's own memory scheduler (`critmem_policy::tmem::Watermark`)."""
SCHEMES: dict[str, tuple[str, str]] = {
    # scheme -> (policy, wait)
    "min": ("min", "inherit"),
    "max": ("max", "inherit"),
    "fair": ("fair", "inherit"),
    "greedy": ("greedy", "inherit"),
    "greedy-nopi": ("greedy", "block"),
    "tmem": ("tmem", "inherit"),
    "tmem-nopi": ("tmem", "block"),
    "tmem-composite": ("tmem-composite", "inherit"),
    CRITMEM_SCHEDULER: (CRITMEM_SCHEDULER, "inherit"),
    f"{CRITMEM_SCHEDULER}-nopi": (CRITMEM_SCHEDULER, "block"),
}
"""Sec. VI-B's configurations; "-nopi" waits without priority inheritance. `tmem-composite`
is the original system's policy (tmem_policy.c), beside the paper's Algorithm 1 (`tmem`);
`watermark` is critmem's own."""
SIZED = ("fair", "greedy", "greedy-nopi", "tmem", "tmem-nopi", "tmem-composite", CRITMEM_SCHEDULER, f"{CRITMEM_SCHEDULER}-nopi")
"""The schemes run at every memory size (min has only its minimum, max no limit)."""
NOPI_PAIRS = (("greedy", "greedy-nopi"), ("tmem", "tmem-nopi"), (CRITMEM_SCHEDULER, f"{CRITMEM_SCHEDULER}-nopi"))
ROBUST_SCHEMES = ("greedy", "greedy-nopi", "tmem", "tmem-nopi", "tmem-composite", CRITMEM_SCHEDULER, f"{CRITMEM_SCHEDULER}-nopi")
"""The schemes the acceptance compares, run again on other kinds of task sets."""
HELD_OUT_SCHEMES = ("greedy", "tmem", "tmem-composite", CRITMEM_SCHEDULER)
"""The schemes run again on the held-out task sets."""
FIG7_SCHEMES = tuple(s for s in SCHEMES if s != f"{CRITMEM_SCHEDULER}-nopi")
TABLE4_ROWS = ("min", "max", "static", "tmem", CRITMEM_SCHEDULER)
DESIGN_SEEDS = tuple(range(1, 11))
"""The task sets `watermark` was designed on (Fig. 6's, Σu 0.8, 8 threads): its parameters were
chosen from runs of these seeds only."""


def scheme_config(scheme: str, units_above_min: int | None) -> TmemConfig:
    """The `[tmem]` table of `scheme` with `units_above_min` beyond the minimums (max: no limit;
    min: nothing beyond them, whatever the size)."""
    if scheme not in SCHEMES:
        raise ValueError(f"unknown scheme {scheme!r}; known: {', '.join(SCHEMES)}")
    policy, wait = SCHEMES[scheme]
    if scheme == "max":
        return TmemConfig(policy=policy, wait=wait, units_above_min=None)
    return TmemConfig(policy=policy, wait=wait, units_above_min=0 if scheme == "min" else (units_above_min or 0))


# ---------------------------------------------------------------------------------------------
# The plan


@dataclass(frozen=True)
class Plan:
    """How much to run: the full experiment, or `--quick`'s reduced one."""

    task_sets: int = 10
    """Sec. VI-B: "Each experiment is run ten times with different generated task sets"."""
    horizon_ms: float = 60_000
    """Sec. VI-B: 60 s (the original generator ran 120 s; open question 12)."""
    sizes: int = 8
    """Memory sizes of Fig. 6, evenly from 0 to max's peak above the minimum."""
    fig7_task_sets: int = 10
    fig7_horizon_ms: float = 60_000
    be_start_ms: float = 20_000
    be_stop_ms: float = 40_000
    fig7_units_above_min: int = 20
    """Memory beyond the minimum in Fig. 7 (the paper does not give it)."""
    table4_units_above_min: int = 24
    """tmem's memory beyond the minimum in Table IV (the paper's tmem row used 42)."""
    table4_horizon_ms: float = 2_000
    table4_static_units: int = 8
    """The static row: every managed cache holds as many units as there are threads."""
    n_rt: int = 8
    utilization: float = 0.8
    entries: str = "paper"
    robustness: tuple[tuple[float, int], ...] = ((0.6, 8), (0.9, 8), (0.8, 12))
    """(Σu, threads) of the robustness runs: Fig. 6's comparison on other task sets."""
    robustness_task_sets: int = 2
    robustness_horizon_ms: float = 20_000
    robustness_sizes: int = 3
    held_out_task_sets: int = 10
    """Task sets the scheduler never saw, from seed `held_out_first_seed` on."""
    held_out_first_seed: int = 11
    robustness_held_out_task_sets: int = 5
    quick: bool = False

    @property
    def design_seeds(self) -> list[int]:
        return list(range(1, self.task_sets + 1))

    @property
    def held_out_seeds(self) -> list[int]:
        return list(range(self.held_out_first_seed, self.held_out_first_seed + self.held_out_task_sets))

    @property
    def robustness_held_out_seeds(self) -> list[int]:
        return list(range(self.held_out_first_seed, self.held_out_first_seed + self.robustness_held_out_task_sets))


QUICK = Plan(
    task_sets=3, horizon_ms=20_000, sizes=4, fig7_task_sets=3, table4_horizon_ms=500, robustness_task_sets=1,
    held_out_task_sets=3, robustness_held_out_task_sets=1, quick=True,
)  # fmt: skip
"""`--quick`: 3 task sets (and 3 held-out ones) × 20 s × 4 memory sizes; Fig. 7 keeps its 60 s
with best-effort threads from 20 s to 40 s, on 3 task sets."""


@dataclass(frozen=True)
class Spec:
    """One simulation run."""

    kind: str
    """fig6 | fig7 | table4."""
    scheme: str
    set_seed: int
    units_above_min: int | None
    horizon_ms: float
    n_rt: int = 8
    utilization: float = 0.8
    entries: str = "paper"
    be_start_ms: float = 20_000
    be_stop_ms: float = 40_000
    static_units: int | None = None
    seed_set: str = "design"
    """design | held_out: whether the scheduler's design saw this task set."""

    def scenario(self) -> dict[str, Any]:
        if self.kind == "table4":
            scheme = "min" if self.scheme == "static" else self.scheme
            return http_scenario(
                scheme_config(scheme, self.units_above_min),
                static_units=self.static_units,
                horizon_ms=self.horizon_ms,
                seed=self.set_seed,
            )
        return fig8_scenario(
            self.set_seed,
            tmem=scheme_config(self.scheme, self.units_above_min),
            n_rt=self.n_rt,
            utilization=self.utilization,
            horizon_ms=self.horizon_ms,
            open_system=self.kind == "fig7",
            be_start_ms=self.be_start_ms,
            be_stop_ms=self.be_stop_ms,
            entries="source" if self.entries == "source" else "paper",
        )


# ---------------------------------------------------------------------------------------------
# Measures (pure functions of a run's frames, tested on hand-made ones)


def real_time_tasks(tasks: pd.DataFrame) -> set[str]:
    """Names of the tasks in the policy's objective: every criticality but D (best effort)."""
    return {str(n) for n, c in zip(tasks["name"], tasks["criticality"]) if str(c) != "D"}


def windows(horizon_ms: float, window_ms: float = WINDOW_MS) -> int:
    """How many `window_ms` windows cover [0, horizon_ms)."""
    return max(1, math.ceil(horizon_ms / window_ms - 1e-9))


def _window_of(t_ms: np.ndarray, n: int, window_ms: float) -> np.ndarray:
    # A time exactly at the horizon belongs to the last window.
    return np.minimum((t_ms // window_ms).astype(np.int64), n - 1)


def window_max_tardiness_ms(jobs: pd.DataFrame, rt: Iterable[str], horizon_ms: float, window_ms: float = WINDOW_MS) -> list[float]:
    """Per window, the largest tardiness of any job of `rt` completing in it (0 where none
    completes late or at all)."""
    n = windows(horizon_ms, window_ms)
    done = jobs[jobs["task"].isin(set(rt)) & jobs["completion_ms"].notna()]
    out = np.zeros(n)
    if len(done):
        idx = _window_of(done["completion_ms"].to_numpy(dtype=float), n, window_ms)
        np.maximum.at(out, idx, done["tardiness_ms"].to_numpy(dtype=float))
    return [float(x) for x in out]


def window_misses(jobs: pd.DataFrame, rt: Iterable[str], horizon_ms: float, window_ms: float = WINDOW_MS) -> list[int]:
    """Per window, the jobs of `rt` that missed a deadline falling in it."""
    n = windows(horizon_ms, window_ms)
    missed = jobs[jobs["task"].isin(set(rt)) & jobs["missed"].astype(bool)]
    out = np.zeros(n, dtype=np.int64)
    if len(missed):
        idx = _window_of(missed["deadline_ms"].to_numpy(dtype=float), n, window_ms)
        np.add.at(out, idx, 1)
    return [int(x) for x in out]


def tardiness_measures(jobs: pd.DataFrame, rt: Iterable[str], horizon_ms: float, window_ms: float = WINDOW_MS) -> dict[str, float]:
    """Sec. VI-B's measures of one run (open question 3): `max_tardiness_ms`, the per-window
    largest tardiness averaged over the windows; `run_max_tardiness_ms`, the largest of the run;
    `misses_per_s`, misses per second of the horizon."""
    rt = set(rt)
    per_window = window_max_tardiness_ms(jobs, rt, horizon_ms, window_ms)
    misses = int(jobs[jobs["task"].isin(rt)]["missed"].astype(bool).sum())
    return {
        "max_tardiness_ms": float(np.mean(per_window)),
        "run_max_tardiness_ms": float(max(per_window)),
        "misses_per_s": misses / (horizon_ms / 1000.0),
    }


def window_memory_units(
    timeline: Sequence[dict[str, Any]], min_units: int, horizon_ms: float, window_ms: float = WINDOW_MS
) -> list[float | None]:
    """Per window, the most transient memory allocated above `min_units` at any policy run in
    it (None for a window without one)."""
    n = windows(horizon_ms, window_ms)
    out: list[float | None] = [None] * n
    for point in timeline:
        k = min(int(point["time_ns"] / 1e6 // window_ms), n - 1)
        v = float(point["allocated_units"] - min_units)
        cur = out[k]
        out[k] = v if cur is None else max(cur, v)
    return out


def lsq_slope(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    """The least-squares slope of ys against xs (None with fewer than two distinct xs)."""
    x = np.asarray(xs, dtype=float)
    y = np.asarray(ys, dtype=float)
    if len(x) < 2 or np.ptp(x) == 0:
        return None
    dx = x - x.mean()
    return float((dx * (y - y.mean())).sum() / (dx * dx).sum())


def slope_ratio(fig6: Sequence[dict[str, Any]], a: str = "tmem", b: str = "greedy") -> dict[str, float | None]:
    """The slopes of max tardiness against memory of schemes `a` and `b` (from Fig. 6's rows)
    and `a`'s over `b`'s (None when `b`'s is 0 or missing)."""

    def slope(scheme: str) -> float | None:
        rows = sorted(
            (r for r in fig6 if r["scheme"] == scheme and r.get("seed_set", "design") == "design"), key=lambda r: r["memory_above_min"]
        )
        return lsq_slope([r["memory_above_min"] for r in rows], [r["max_tardiness_ms"] for r in rows])

    sa, sb = slope(a), slope(b)
    return {f"{a}_slope": sa, f"{b}_slope": sb, "ratio": None if sa is None or not sb else sa / sb}


def memory_sizes(peak_above_min: int, n: int) -> list[int]:
    """`n` whole-unit sizes evenly from 0 to `peak_above_min` (fewer where they coincide)."""
    if n < 2 or peak_above_min <= 0:
        return [0]
    return sorted({round(peak_above_min * k / (n - 1)) for k in range(n)})


# ---------------------------------------------------------------------------------------------
# One run


def measure(spec: Spec) -> dict[str, Any]:
    """Runs `spec` and returns what its figure or table needs."""
    from critmem.api import run

    r = run(spec.scenario(), record_segments=False)
    return measure_run(spec, r.summary, r.tasks, r.jobs)


def measure_run(spec: Spec, summary: dict[str, Any], tasks: pd.DataFrame, jobs: pd.DataFrame) -> dict[str, Any]:
    """What `spec`'s figure or table needs from a run's summary (its `tmem` section), task
    table and job records."""
    t = summary["tmem"]
    rt = real_time_tasks(tasks)
    out: dict[str, Any] = {
        "kind": spec.kind,
        "scheme": spec.scheme,
        "set_seed": spec.set_seed,
        "units_above_min": spec.units_above_min,
        "utilization": spec.utilization,
        "n_rt": spec.n_rt,
        "seed_set": spec.seed_set,
        "min_units": int(t["min_units"]),
        "peak_allocated_units": int(t["peak_allocated_units"]),
        "mean_units_held": num(int(t["allocated_unit_us"]) / (spec.horizon_ms * 1000.0) - int(t["min_units"]), 4),
        "peak_above_min": int(t["peak_allocated_units"]) - int(t["min_units"]),
        "waits": int(sum(c["waits"] for c in t["caches"])),
    }
    if spec.kind == "table4":
        q = jobs[(jobs["task"] == "qos") & jobs["response_ms"].notna()]
        out["qos_jobs"] = len(q)
        out["qos_mean_response_us"] = num(q["response_ms"].mean() * 1000, 3) if len(q) else None
        out["qos_max_response_us"] = num(q["response_ms"].max() * 1000, 3) if len(q) else None
        return out
    out |= {k: num(v, 4) for k, v in tardiness_measures(jobs, rt, spec.horizon_ms).items()}
    if spec.kind == "fig7":
        out["series"] = {
            "memory_units": window_memory_units(t["timeline"], int(t["min_units"]), spec.horizon_ms),
            "max_tardiness_ms": [num(x, 4) for x in window_max_tardiness_ms(jobs, rt, spec.horizon_ms)],
            "misses": window_misses(jobs, rt, spec.horizon_ms),
        }
    return out


def _label(s: Spec) -> str:
    size = "" if s.units_above_min is None else f" +{s.units_above_min}"
    held = " (held out)" if s.seed_set == "held_out" else ""
    return f"{s.kind} {s.scheme}{size} set {s.set_seed}{held}"


# ---------------------------------------------------------------------------------------------
# The experiment


def _spec(plan: Plan, kind: str, scheme: str, seed: int, units: int | None) -> Spec:
    if kind == "fig7":
        horizon = plan.fig7_horizon_ms
    elif kind == "table4":
        horizon = plan.table4_horizon_ms
    else:
        horizon = plan.horizon_ms
    return Spec(
        kind, scheme, seed, units, horizon, n_rt=plan.n_rt, utilization=plan.utilization, entries=plan.entries,
        be_start_ms=plan.be_start_ms, be_stop_ms=plan.be_stop_ms,
    )  # fmt: skip


def _robust_spec(plan: Plan, config: tuple[float, int], scheme: str, seed: int, units: int | None, seed_set: str = "design") -> Spec:
    utilization, n = config
    return Spec(
        "robust", scheme, seed, units, plan.robustness_horizon_ms, n_rt=n, utilization=utilization, entries=plan.entries,
        seed_set=seed_set,
    )  # fmt: skip


def first_batch(plan: Plan) -> list[Spec]:
    """What runs before the memory sizes are known: min and max on every task set (max's peak
    sets the sizes), Fig. 7, Table IV, and max on the robustness task sets."""
    seeds = range(1, plan.task_sets + 1)
    specs = [_spec(plan, "fig6", s, seed, None if s == "max" else 0) for seed in seeds for s in ("min", "max")]
    specs += [
        _spec(plan, "fig7", s, seed, None if s == "max" else plan.fig7_units_above_min)
        for seed in range(1, plan.fig7_task_sets + 1)
        for s in FIG7_SCHEMES
    ]
    for row in TABLE4_ROWS:
        units = {"min": 0, "max": None, "static": 0}.get(row, plan.table4_units_above_min)
        spec = _spec(plan, "table4", row, 1, units)
        specs.append(replace(spec, static_units=plan.table4_static_units) if row == "static" else spec)
    specs += [_robust_spec(plan, c, "max", seed, None) for c in plan.robustness for seed in range(1, plan.robustness_task_sets + 1)]
    return specs


def second_batch(plan: Plan, sizes: Sequence[int], robust_sizes: dict[tuple[float, int], list[int]] | None = None) -> list[Spec]:
    """Every sized scheme at every memory size on every task set, the held-out schemes at the
    same sizes on the held-out task sets, and the robustness schemes at each robustness
    configuration's sizes (the held-out schemes on its held-out task sets too)."""
    specs = [_spec(plan, "fig6", s, seed, size) for seed in plan.design_seeds for s in SIZED for size in sizes]
    specs += [
        replace(_spec(plan, "fig6", s, seed, size), seed_set="held_out")
        for seed in plan.held_out_seeds
        for s in HELD_OUT_SCHEMES
        for size in sizes
    ]
    for config, csizes in (robust_sizes or {}).items():
        specs += [
            _robust_spec(plan, config, s, seed, size)
            for seed in range(1, plan.robustness_task_sets + 1)
            for s in ROBUST_SCHEMES
            for size in csizes
        ]
        specs += [
            _robust_spec(plan, config, s, seed, size, "held_out")
            for seed in plan.robustness_held_out_seeds
            for s in HELD_OUT_SCHEMES
            for size in csizes
        ]
    return specs


def planned_runs(plan: Plan) -> int:
    """An upper bound of the runs `compute` makes (the sizes are known only after the first batch)."""
    per_config = plan.robustness_task_sets * len(ROBUST_SCHEMES) + plan.robustness_held_out_task_sets * len(HELD_OUT_SCHEMES)
    robust = len(plan.robustness) * per_config * plan.robustness_sizes
    fig6 = (plan.task_sets * len(SIZED) + plan.held_out_task_sets * len(HELD_OUT_SCHEMES)) * plan.sizes
    return len(first_batch(plan)) + fig6 + robust


def _mean(xs: Iterable[float | None]) -> float | None:
    v = [float(x) for x in xs if x is not None]
    return round(sum(v) / len(v), 4) if v else None


SEED_SETS = ("design", "held_out")


def fig6_rows(runs: Sequence[dict[str, Any]], sizes: Sequence[int], kind: str = "fig6") -> list[dict[str, Any]]:
    """Fig. 6's points from the runs of `kind`: per seed set, scheme and memory size, the means
    over task sets (min at 0, max at its mean peak above the minimum); `mean_units_held` is the
    units above the minimum held on average over each run."""
    rows: list[dict[str, Any]] = []
    for seed_set in SEED_SETS:
        for scheme in SCHEMES:
            mine = [r for r in runs if r["kind"] == kind and r["scheme"] == scheme and r["seed_set"] == seed_set]
            rows += _scheme_rows(scheme, seed_set, mine, sizes)
    return rows


def _scheme_rows(scheme: str, seed_set: str, mine: list[dict[str, Any]], sizes: Sequence[int]) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    if mine:
        groups: list[tuple[float, list[dict[str, Any]]]]
        if scheme in SIZED:
            groups = [(size, [r for r in mine if r["units_above_min"] == size]) for size in sizes]
        elif scheme == "max":
            groups = [(_mean(r["peak_above_min"] for r in mine) or 0.0, mine)]
        else:
            groups = [(0, mine)]
        for x, rs in groups:
            if rs:
                rows.append(
                    {
                        "scheme": scheme,
                        "seed_set": seed_set,
                        "memory_above_min": x,
                        "max_tardiness_ms": _mean(r["max_tardiness_ms"] for r in rs),
                        "misses_per_s": _mean(r["misses_per_s"] for r in rs),
                        "run_max_tardiness_ms": _mean(r["run_max_tardiness_ms"] for r in rs),
                        "peak_above_min": _mean(r["peak_above_min"] for r in rs),
                        "mean_units_held": _mean(r["mean_units_held"] for r in rs),
                        "task_sets": len(rs),
                    }
                )
    return rows


def fig7_rows(runs: Sequence[dict[str, Any]], window_ms: float = WINDOW_MS) -> list[dict[str, Any]]:
    """Fig. 7's series: per scheme and 1 s bin, means over task sets."""
    rows: list[dict[str, Any]] = []
    for scheme in SCHEMES:
        mine = [r for r in runs if r["kind"] == "fig7" and r["scheme"] == scheme]
        if not mine:
            continue
        n = min(len(r["series"]["misses"]) for r in mine)
        for k in range(n):
            rows.append(
                {
                    "scheme": scheme,
                    "t_s": round(k * window_ms / 1000.0, 3),
                    "memory_units": _mean(r["series"]["memory_units"][k] for r in mine),
                    "max_tardiness_ms": _mean(r["series"]["max_tardiness_ms"][k] for r in mine),
                    "misses_per_s": _mean(r["series"]["misses"][k] * 1000.0 / window_ms for r in mine),
                }
            )
    return rows


def fig7_phases(rows: Sequence[dict[str, Any]], plan: Plan) -> list[dict[str, Any]]:
    """Fig. 7's means per scheme before, during and after the best-effort threads."""
    phases = [
        ("before", 0.0, plan.be_start_ms),
        ("during", plan.be_start_ms, plan.be_stop_ms),
        ("after", plan.be_stop_ms, plan.fig7_horizon_ms),
    ]
    out = []
    for scheme in SCHEMES:
        for phase, lo, hi in phases:
            rs = [r for r in rows if r["scheme"] == scheme and lo <= r["t_s"] * 1000 < hi]
            if rs:
                out.append(
                    {
                        "scheme": scheme,
                        "phase": phase,
                        "memory_units": _mean(r["memory_units"] for r in rs),
                        "max_tardiness_ms": _mean(r["max_tardiness_ms"] for r in rs),
                        "misses_per_s": _mean(r["misses_per_s"] for r in rs),
                    }
                )
    return out


def table4_rows(runs: Sequence[dict[str, Any]], baseline_min_units: int) -> list[dict[str, Any]]:
    """Table IV: the QoS thread's mean response and the memory above the service's minimum
    (the static row's raised minimums count as memory above it)."""
    out = []
    for row in TABLE4_ROWS:
        r = next((x for x in runs if x["kind"] == "table4" and x["scheme"] == row), None)
        if r is None:
            continue
        paper_us, paper_units = PAPER_TABLE4.get(row, (None, None))
        out.append(
            {
                "policy": row,
                "response_us": r["qos_mean_response_us"],
                "max_response_us": r["qos_max_response_us"],
                "tmem_above_min": r["peak_allocated_units"] - baseline_min_units,
                "paper_response_us": paper_us,
                "paper_tmem_above_min": paper_units,
            }
        )
    return out


def task_set_table(plan: Plan) -> list[dict[str, Any]]:
    """Every task set's threads, design and held-out: p_i, u_i, e_i and priority."""
    return [
        {
            "set_seed": seed,
            "seed_set": seed_set,
            "tasks": [asdict(t) | {"wcet_ms": t.wcet_ms} for t in task_set(seed, n=plan.n_rt, utilization=plan.utilization)],
        }
        for seed_set, seeds in (("design", plan.design_seeds), ("held_out", plan.held_out_seeds))
        for seed in seeds
    ]


def minimums(plan: Plan) -> dict[str, Any]:
    """Σ minimum allocations of the closed and open systems and the service, ours beside the
    paper's pages."""
    closed = fig8_scenario(1, n_rt=plan.n_rt, utilization=plan.utilization)
    opened = fig8_scenario(1, n_rt=plan.n_rt, utilization=plan.utilization, open_system=True)
    return {
        "fig6_min_units": min_units(closed["component"]),
        "fig7_min_units": min_units(opened["component"]),
        "table4_min_units": min_units(http_service().components),
        "paper_fig6_min_pages": PAPER_FIG6_MIN_PAGES,
        "paper_fig7_min_pages": PAPER_FIG7_MIN_PAGES,
    }


def robustness_rows(plan: Plan, runs: Sequence[dict[str, Any]], robust_sizes: dict[tuple[float, int], list[int]]) -> list[dict[str, Any]]:
    """Per robustness configuration, its memory sizes and Fig. 6's rows of its runs."""
    out = []
    for config in plan.robustness:
        utilization, n = config
        mine = [r for r in runs if r["kind"] == "robust" and (r["utilization"], r["n_rt"]) == config]
        sizes = robust_sizes.get(config, [0])
        out.append({"utilization": utilization, "n_rt": n, "memory_sizes": sizes, "fig6": fig6_rows(mine, sizes, kind="robust")})
    return out


def _sizes_from_max(plan: Plan, runs: Sequence[dict[str, Any]]) -> tuple[list[int], dict[tuple[float, int], list[int]]]:
    """Fig. 6's memory sizes, and each robustness configuration's, from their max runs' peaks."""

    def peaks(kind: str, config: tuple[float, int] | None = None) -> list[int]:
        return [
            r["peak_above_min"]
            for r in runs
            if r["kind"] == kind and r["scheme"] == "max" and (config is None or (r["utilization"], r["n_rt"]) == config)
        ]

    sizes = memory_sizes(max(peaks("fig6"), default=0), plan.sizes)
    robust = {c: memory_sizes(max(peaks("robust", c), default=0), plan.robustness_sizes) for c in plan.robustness}
    return sizes, robust


def summarize(
    plan: Plan, runs: Sequence[dict[str, Any]], sizes: Sequence[int], robust_sizes: dict[tuple[float, int], list[int]] | None = None
) -> dict[str, Any]:
    """results.json: the plan, the workloads, every run's numbers and the figures' rows."""
    mins = minimums(plan)
    f6 = fig6_rows(runs, sizes)
    f7 = fig7_rows(runs)
    return {
        "paper": "tmem-transient-memory-scheduling.txt",
        "quick": plan.quick,
        "critmem_scheduler": CRITMEM_SCHEDULER,
        "seed_sets": {"design": plan.design_seeds, "held_out": plan.held_out_seeds, "robustness_held_out": plan.robustness_held_out_seeds},
        "plan": asdict(plan),
        "minimums": mins,
        "task_sets": task_set_table(plan),
        "memory_sizes": list(sizes),
        "fig6": f6,
        "slope": slope_ratio(f6),
        "paper_slope_ratio": PAPER_SLOPE_RATIO,
        "fig7": f7,
        "fig7_phases": fig7_phases(f7, plan),
        "table4": table4_rows(runs, mins["table4_min_units"]),
        "robustness": robustness_rows(plan, runs, robust_sizes or {}),
        "policy_cost": policy_cost(plan),
        "runs": [{k: v for k, v in r.items() if k != "series"} for r in runs],
        "simulation_runs": len(runs),
    }


POLICY_COST_SIZES: tuple[tuple[int, int, int], ...] = (
    (9, 8, 80),
    (27, 8, 320),
    (27, 16, 320),
    (27, 16, 1280),
    (81, 16, 320),
    (81, 32, 1280),
)
"""(components, threads, units) at which the policies' own run time is measured; (27, 16, 320)
is the paper's setup (Fig. 8's 27 components, 8 real-time and 8 best-effort threads, the original
pool of 320 pages)."""


def policy_cost(plan: Plan) -> list[dict[str, Any]]:
    """The wall time of one run of `tmem`, `tmem-composite` and `watermark` on a seeded synthetic observation
    of each size in `POLICY_COST_SIZES` after 16 untimed quiet windows (median of 21 runs, this machine), the units its plan
    moves, the bound M|C||T| on its steps, and its share of a 250 ms period. A measurement, so
    it differs from run to run, unlike every simulated number."""
    from critmem import _core

    rows = []
    for components, threads, units in POLICY_COST_SIZES:
        for policy in ("tmem", "tmem-composite", CRITMEM_SCHEDULER):
            us, moved = _core.tmem_policy_cost(policy, components, threads, units, 21 if not plan.quick else 5, 7)
            rows.append(
                {
                    "policy": policy,
                    "components": components,
                    "caches": 2 * components,
                    "threads": threads,
                    "units": units,
                    "run_us": round(us, 2),
                    "units_moved": moved,
                    "op_bound": units * 2 * components * threads,
                    "share_of_period_pct": round(100 * us / 250_000, 5),
                }
            )
    return rows


def compute(plan: Plan, sweep: Sweep) -> dict[str, Any]:
    """Every simulation of the reproduction on `sweep` (two batches: min, max, Fig. 7 and
    Table IV and max on the robustness task sets; then the sized schemes at the sizes max's
    peaks give), and what they measured."""
    first = first_batch(plan)
    runs = sweep.map(measure, first, label=_label)
    sizes, robust_sizes = _sizes_from_max(plan, runs)
    runs += sweep.map(measure, second_batch(plan, sizes, robust_sizes), label=_label)
    for _ in range(planned_runs(plan) - len(runs)):  # sizes that coincided: the bar still ends full
        sweep.progress.step("memory sizes that coincide")
    return summarize(plan, runs, sizes, robust_sizes)


HEADLINE_FIG6_KEYS = ("scheme", "seed_set", "memory_above_min", "max_tardiness_ms", "misses_per_s", "mean_units_held")


def headline(data: dict[str, Any]) -> dict[str, Any]:
    """What `--json` prints: Fig. 6 on the design and held-out task sets, the robustness
    configurations likewise, Fig. 7, Table IV."""
    return {
        "critmem_scheduler": data["critmem_scheduler"],
        "seed_sets": data["seed_sets"],
        "fig6": [{k: r[k] for k in HEADLINE_FIG6_KEYS} for r in data["fig6"]],
        "robustness": [
            {
                "utilization": c["utilization"],
                "n_rt": c["n_rt"],
                "memory_sizes": c["memory_sizes"],
                "fig6": [{k: r[k] for k in HEADLINE_FIG6_KEYS} for r in c["fig6"]],
            }
            for c in data["robustness"]
        ],
        "slope_ratio": data["slope"]["ratio"],
        "fig7": data["fig7"],
        "table4": data["table4"],
        "quick": data["quick"],
        "simulation_runs": data["simulation_runs"],
    }
