"""The experiment of the SARA reproduction: what runs, and the numbers it yields.

Every number in `results.json` and in the report's "model" columns comes from simulating the
bundled workloads (`workloads/sara-*.toml`, modelled on the paper's Table I); the "paper"
columns quote the paper for comparison. The experiments:

- profiling: each soft real-time workload's BCET measured with its memory unconstrained, and
  Fig. 7's fit of execution time against stall per period under a fixed constrained limit;
- the baselines' own searches: Offline's static limit (the smallest meeting a target hit
  ratio on profiling runs) and TMO-High's PSI threshold (exhaustive, mean elapsed time just
  below the deadline);
- Fig. 11: every controller on both soft real-time workloads co-running with the graph
  workload, memory at 60 % and 80 % of their aggregate peak, slow and fast SSD swap;
- Fig. 12: the soft real-time group's memory over time under SARA and Greedy;
- Fig. 13: SARA with and without early job dropping, and the cascaded misses it prevents.

Profiling runs use a different seed from the evaluation runs, as profiling on a real machine
happens before, not during, the run it configures.
"""

from __future__ import annotations

import copy
import functools
import math
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from critmem import _core, controllers
from critmem.api import RunResult, run
from critmem.reproduce.results import num
from critmem.reproduce.sara.judgement import Point, judge, keepable_hit_ratio
from critmem.reproduce.sara.paper import PAPER_BASELINE_HIT_RATIO, PAPER_MAX_THROUGHPUT_GAIN, PAPER_SARA_HIT_RATIO, PAPER_THROUGHPUT_GAIN
from critmem.sweep import Sweep

MIB = 1_048_576
WORKLOAD_DIR = Path(__file__).with_name("workloads")

# ---------------------------------------------------------------------------------------------
# The experiment.

CONTROLLERS = tuple(c.name for c in controllers())
"""Every registered controller, in the registry's order (the figures' and tables' order)."""
CRITMEM_CONTROLLER = "tailguard"
"""critmem's own soft real-time controller, shown beside SARA and the baselines."""
MEMORY_PCTS = (60, 80)
SSDS = ("slow-ssd", "fast-ssd")
EVAL_SEED = 1
PROFILE_SEED = 1001
STEP_UP_BYTES = 2 * MIB
"""x for growing the limit in the `sara-step-up` variant (not the paper's rule): Eq. 6 with
x = 1 MiB can take back up to x·ρ per interval but add only x·(1 − ρ), ρ being the job's
target stall share (0.7–0.8 here). Evaluated beside the paper's rule, never instead of it."""
VARIANTS: dict[str, tuple[tuple[str, Any], ...]] = {
    "sara-no-drop": (("early_drop", False),),
    "sara-step-up": (("step_up_bytes", STEP_UP_BYTES),),
}
"""SARA variants evaluated on every configuration besides the controllers, with their configs."""
JUDGED_AMONG = (*CONTROLLERS, "sara-step-up")
"""What critmem's controller is judged against on each configuration (`judgement.judge`): every
controller and SARA's step-up variant (early dropping off is SARA made worse, not a rival)."""


@dataclass(frozen=True)
class Workload:
    """A soft real-time workload co-running with the graph workload (Table I)."""

    name: str
    file: str
    srt: str
    """The soft real-time task and its group (same name)."""
    srt_min_mb: float
    srt_max_mb: float
    nrt_max_mb: float
    deadline_ms: float
    period_ms: float
    configured_bcet_ms: float
    nrt: str = "graphchi"

    @property
    def peak_mb(self) -> float:
        """Aggregate peak memory of the two workloads (the base of 60 % and 80 %)."""
        return self.srt_max_mb + self.nrt_max_mb

    def base(self) -> dict[str, Any]:
        """The workload's scenario file, parsed (a copy of its own: callers change it)."""
        return copy.deepcopy(_workload_file(self.file))


@functools.cache
def _workload_file(name: str) -> dict[str, Any]:
    # Parsed once per process: a sweep's worker runs hundreds of these workloads.
    with open(WORKLOAD_DIR / name, "rb") as f:
        return tomllib.load(f)


WORKLOADS = (
    Workload("sphinx", "sara-sphinx.toml", "sphinx", 136, 338, 272, 1500, 1500, 480),
    Workload("opencv", "sara-opencv.toml", "opencv", 97, 183, 272, 800, 800, 140),
)


@dataclass(frozen=True)
class Plan:
    """How much to run: the full experiment, or `--quick`'s reduced one."""

    periods: int = 500
    """Soft real-time periods per evaluation run (the paper's 500)."""
    profile_periods: int = 40
    """Periods per profiling run of the Offline and TMO-High searches."""
    fig7_periods: int = 200
    offline_candidates: int = 13
    tmo_candidates_pct: tuple[float, ...] = (10, 20, 30, 40, 50, 60, 70, 80, 90)
    offline_target_hit_ratio: float = 0.95
    quick: bool = False


QUICK = Plan(
    periods=40,
    profile_periods=12,
    fig7_periods=40,
    offline_candidates=5,
    tmo_candidates_pct=(10, 30, 50, 70, 90),
    quick=True,
)


@dataclass(frozen=True)
class Spec:
    """One simulation run."""

    workload: Workload
    memory_pct: int
    ssd: str
    controller: str
    config: tuple[tuple[str, Any], ...]
    periods: int
    seed: int
    bcet_ms: float | None = None
    keep_series: bool = False
    """Keep per-job and memory-over-time series (for figures)."""

    @property
    def total_mb(self) -> float:
        return round(self.workload.peak_mb * self.memory_pct / 100.0, 4)

    def scenario(self) -> dict[str, Any]:
        w = self.workload
        d = w.base()
        d["run"] = {"horizon_ms": self.periods * w.period_ms, "seed": self.seed}
        d["memory"]["total_mb"] = self.total_mb
        d["memory"]["swap"] = self.ssd
        d["control"] = {"controller": self.controller, "interval_ms": 5, "config": dict(self.config)}
        if self.bcet_ms is not None:
            for g in d["group"]:
                if g["name"] == w.srt:
                    g["bcet_ms"] = self.bcet_ms
        return d


def _cfg(**kw: Any) -> tuple[tuple[str, Any], ...]:
    return tuple(sorted(kw.items()))


def job_stall_ms(r: RunResult, group: str, starts_ms: np.ndarray, ends_ms: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per job: `s_period` (Eq. 2), the sum of `s_intv = max(s_mem, s_io)` (Eq. 3, PSI some)
    over the controller intervals that overlap the job's execution, and the share of those
    intervals that were severe (Definition 1), as `critmem_policy::sara::job_stalls` computes
    them from the group's control timeline."""
    if r.control_timeline_every_ticks != 1:
        raise ValueError("per-job stall needs a row per controller tick; this run's control timeline was thinned (shorten the run)")
    ct = r.control_timeline
    stall, share = _core.sara_job_stalls(
        ct["time_ms"].to_numpy().tolist(),
        ct[f"memory_some_us:{group}"].to_numpy().tolist(),
        ct[f"io_some_us:{group}"].to_numpy().tolist(),
        float(r.summary["control"]["interval_ms"]),
        np.asarray(starts_ms, dtype=float).tolist(),
        np.asarray(ends_ms, dtype=float).tolist(),
    )
    return np.array(stall, dtype=float), np.array(share, dtype=float)


def srt_jobs(r: RunResult, w: Workload) -> pd.DataFrame:
    """The soft real-time jobs with elapsed time (start to end, the wait excluded), stall
    per period, and whether a miss was cascaded (the job started late behind an overrun)."""
    j = r.jobs[r.jobs["task"] == w.srt].reset_index(drop=True)
    end = j["completion_ms"].fillna(j["deadline_ms"]).to_numpy(dtype=float)
    start = j["start_ms"].fillna(j["release_ms"]).to_numpy(dtype=float)
    stall, severe = job_stall_ms(r, w.srt, start, end)
    return j.assign(
        exec_ms=j["completion_ms"] - j["start_ms"],
        stall_ms=stall,
        severe_share=severe,
        late_start=(j["start_ms"] - j["release_ms"]) > 1e-6,
    )


def peak_jobs(w: Workload, jobs: int) -> list[int]:
    """Indices of the soft real-time task's transient-peak jobs among its first `jobs`: those
    an access with `every_jobs` (from `from_job`) adds to."""
    task = next(t for t in w.base()["task"] if t["name"] == w.srt)
    out: set[int] = set()
    for a in task.get("access", []):
        if "every_jobs" in a:
            out.update(range(int(a.get("from_job", 0)), jobs, int(a["every_jobs"])))
    return sorted(out)


def measure(spec: Spec) -> dict[str, Any]:
    """Runs `spec` and returns its metrics (plus series when asked)."""
    w = spec.workload
    r = run(spec.scenario(), record_segments=False)
    tasks = r.tasks.set_index("name")
    jobs = srt_jobs(r, w)
    judged = jobs[jobs["outcome"] != "pending"]
    missed = judged["missed"].astype(bool)
    peak = judged.index.isin(peak_jobs(w, len(jobs)))
    completed = jobs[jobs["outcome"] == "completed"]
    ct = r.control_timeline
    out: dict[str, Any] = {
        "workload": w.name,
        "memory_pct": spec.memory_pct,
        "ssd": spec.ssd,
        "controller": spec.controller,
        "config": dict(spec.config),
        "periods": spec.periods,
        "seed": spec.seed,
        "total_mb": spec.total_mb,
        "deadline_hit_ratio": num(tasks.loc[w.srt, "hit_ratio"], 4),
        "nonrt_throughput": num(tasks.loc[w.nrt, "throughput_per_s"], 4),
        "jobs": len(judged),
        "misses": int(missed.sum()),
        "cascaded_misses": int((missed & judged["late_start"]).sum()),
        "peak_jobs": int(peak.sum()),
        "peak_job_misses": int((missed & peak).sum()),
        "keepable_hit_ratio": num(keepable_hit_ratio(len(judged), int(missed.sum()), int(peak.sum()), int((missed & peak).sum())), 4),
        "dropped": int(jobs["outcome"].eq("aborted").sum()),
        "mean_elapsed_ms": num(completed["exec_ms"].mean(), 2),
        "mean_response_ms": num(completed["response_ms"].mean(), 2),
        "mean_stall_ms": num(judged["stall_ms"].mean(), 2),
        # How late the missed jobs were: SARA aims every job at its deadline.
        "median_tardiness_ms": num(judged.loc[missed, "tardiness_ms"].median(), 2) if missed.any() else 0.0,
        # Definition 1: the largest share of a job's intervals that were severe (m = 80 %).
        "max_severe_share": num(judged["severe_share"].max(), 3),
        "srt_mean_usage_mb": num(ct[f"usage_mb:{w.srt}"].mean(), 2),
        "nrt_mean_usage_mb": num(ct[f"usage_mb:{w.nrt}"].mean(), 2),
    }
    if spec.keep_series:
        step = max(1, len(ct) // 1500)  # enough points for a figure
        out["series"] = {
            "time_s": [round(x / 1000.0, 3) for x in ct["time_ms"].to_numpy()[::step]],
            "srt_usage_mb": [round(float(x), 3) for x in ct[f"usage_mb:{w.srt}"].to_numpy()[::step]],
            "srt_limit_mb": [num(x, 3) for x in ct[f"max_mb:{w.srt}"].to_numpy()[::step]],
            "job_release_s": [round(x / 1000.0, 3) for x in judged["release_ms"]],
            "job_response_ms": [num(x, 3) for x in judged["response_ms"]],
            "job_exec_ms": [num(x, 3) for x in judged["exec_ms"]],
            "job_stall_ms": [round(float(x), 3) for x in judged["stall_ms"]],
            "job_outcome": list(judged["outcome"]),
        }
    return out


def configs() -> list[tuple[Workload, int, str]]:
    return [(w, pct, ssd) for w in WORKLOADS for pct in MEMORY_PCTS for ssd in SSDS]


def _key(w: Workload, pct: int, ssd: str) -> str:
    return f"{w.name}/{pct}%/{ssd}"


def offline_candidates_mb(w: Workload, n: int) -> list[float]:
    """Candidate static limits for the Offline search: evenly from the workload's minimum to
    its maximum memory (Table I)."""
    return [round(w.srt_min_mb + (w.srt_max_mb - w.srt_min_mb) * i / (n - 1), 3) for i in range(n)]


def static_partition_mb(w: Workload, total_mb: float) -> float:
    """The fixed partition: memory split in proportion to the workloads' peaks."""
    return round(total_mb * w.srt_max_mb / w.peak_mb, 3)


def planned_runs(plan: Plan) -> int:
    n_cfg = len(configs())
    profiling = len(WORKLOADS) * len(SSDS) + len(WORKLOADS)
    searches = n_cfg * (plan.offline_candidates + len(plan.tmo_candidates_pct))
    return profiling + searches + n_cfg * (len(CONTROLLERS) + len(VARIANTS))


def compute(plan: Plan, sweep: Sweep) -> dict[str, Any]:
    """Every simulation of the reproduction, run on `sweep` (two batches: the profiling runs
    and searches, then the evaluation they configure), and what they measured."""
    runs = 0

    # 1. Profiling: BCET with memory unconstrained (Greedy, large memory), and Fig. 7 under a
    #    fixed limit halfway between the workload's minimum and maximum, beside the graph job.
    bcet_specs = [Spec(w, 80, ssd, "greedy", (), plan.profile_periods, PROFILE_SEED, keep_series=True) for w in WORKLOADS for ssd in SSDS]
    fig7_specs = [
        Spec(
            w,
            60,
            "slow-ssd",
            "static",
            _cfg(limits_bytes={w.srt: int((w.srt_min_mb + w.srt_max_mb) / 2 * MIB)}),
            plan.fig7_periods,
            PROFILE_SEED,
            keep_series=True,
        )
        for w in WORKLOADS
    ]
    # 2. The baselines' searches, per configuration, on profiling runs.
    offline_specs = [
        Spec(w, pct, ssd, "static", _cfg(limits_bytes={w.srt: int(mb * MIB)}), plan.profile_periods, PROFILE_SEED)
        for w, pct, ssd in configs()
        for mb in offline_candidates_mb(w, plan.offline_candidates)
    ]
    tmo_specs = [
        Spec(w, pct, ssd, "tmo-high", _cfg(psi_threshold_pct=t), plan.profile_periods, PROFILE_SEED)
        for w, pct, ssd in configs()
        for t in plan.tmo_candidates_pct
    ]
    first = sweep.map(measure, bcet_specs + fig7_specs + offline_specs + tmo_specs, label=_profiling_label)
    runs += len(first)
    bcet_runs = first[: len(bcet_specs)]
    fig7_runs = first[len(bcet_specs) : len(bcet_specs) + len(fig7_specs)]
    offline_runs = first[len(bcet_specs) + len(fig7_specs) : len(bcet_specs) + len(fig7_specs) + len(offline_specs)]
    tmo_runs = first[len(first) - len(tmo_specs) :]

    bcet: dict[str, Any] = {}
    for s, res in zip(bcet_specs, bcet_runs):
        se = res["series"]
        ok = [(st, ex) for st, ex in zip(se["job_stall_ms"], se["job_exec_ms"]) if ex is not None]
        bcet[f"{s.workload.name}/{s.ssd}"] = {
            "configured_ms": s.workload.configured_bcet_ms,
            "measured_ms": round(_core.estimate_bcet_ms([a for a, _ in ok], [b for _, b in ok]), 3),
        }
    fig7: dict[str, Any] = {}
    for s, res in zip(fig7_specs, fig7_runs):
        se = res["series"]
        pts = [(st, ex) for st, ex in zip(se["job_stall_ms"], se["job_exec_ms"]) if ex is not None]
        slope, intercept_ms, r2 = _core.fit_exec_vs_stall([a for a, _ in pts], [b for _, b in pts])
        fig7[s.workload.name] = {
            "limit_mb": dict(s.config)["limits_bytes"][s.workload.srt] / MIB,
            "slope": round(slope, 4),
            "intercept_ms": round(intercept_ms, 2),
            "r_squared": round(r2, 4),
            "configured_bcet_ms": s.workload.configured_bcet_ms,
            "intercept_error_pct": round(100 * (intercept_ms / s.workload.configured_bcet_ms - 1), 2),
            "stall_ms": [round(a, 2) for a, _ in pts],
            "exec_ms": [round(b, 2) for _, b in pts],
        }

    offline: dict[str, Any] = {}
    i = 0
    for w, pct, ssd in configs():
        n = plan.offline_candidates
        rows = offline_runs[i : i + n]
        i += n
        profile = [(int(dict(r["config"])["limits_bytes"][w.srt]), r["deadline_hit_ratio"] or 0.0) for r in rows]
        try:
            limit = _core.pick_offline_limit(profile, plan.offline_target_hit_ratio)
            note = None
        except ValueError as e:
            limit, note = max(profile, key=lambda p: (p[1], -p[0]))[0], str(e)
        offline[_key(w, pct, ssd)] = {
            "limit_mb": round(limit / MIB, 3),
            "note": note,
            "profile": [{"limit_mb": round(b / MIB, 3), "hit_ratio": h} for b, h in profile],
        }
    tmo_high: dict[str, Any] = {}
    i = 0
    for w, pct, ssd in configs():
        n = len(plan.tmo_candidates_pct)
        rows = tmo_runs[i : i + n]
        i += n
        evaluated = [(float(dict(r["config"])["psi_threshold_pct"]), r["mean_response_ms"] or math.inf) for r in rows]
        try:
            threshold = _core.pick_tmo_threshold([(t, m) for t, m in evaluated], w.deadline_ms)
            note = None
        except ValueError as e:
            threshold, note = min(evaluated, key=lambda p: p[1])[0], str(e)
        tmo_high[_key(w, pct, ssd)] = {
            "threshold_pct": threshold,
            "note": note,
            "search": [{"threshold_pct": t, "mean_response_ms": num(m, 2)} for t, m in evaluated],
        }

    # 3. Evaluation: every controller on every configuration, and the SARA variants.
    def controller_config(w: Workload, pct: int, ssd: str, c: str) -> tuple[tuple[str, Any], ...]:
        k = _key(w, pct, ssd)
        if c == "offline":
            return _cfg(limit_bytes=int(offline[k]["limit_mb"] * MIB))
        if c == "tmo-high":
            return _cfg(psi_threshold_pct=tmo_high[k]["threshold_pct"])
        if c == "static":
            return _cfg(limits_bytes={w.srt: int(static_partition_mb(w, w.peak_mb * pct / 100) * MIB)})
        return ()

    def eval_spec(w: Workload, pct: int, ssd: str, c: str, config: tuple[tuple[str, Any], ...]) -> Spec:
        measured = bcet[f"{w.name}/{ssd}"]["measured_ms"]
        series = pct == 60 and c in ("sara", "greedy", *VARIANTS)
        return Spec(w, pct, ssd, "sara" if c in VARIANTS else c, config, plan.periods, EVAL_SEED, measured, series)

    eval_specs: list[Spec] = []
    labels: list[str] = []
    for w, pct, ssd in configs():
        for c in CONTROLLERS:
            eval_specs.append(eval_spec(w, pct, ssd, c, controller_config(w, pct, ssd, c)))
            labels.append(c)
        for v, config in VARIANTS.items():
            eval_specs.append(eval_spec(w, pct, ssd, v, config))
            labels.append(v)
    evaluated_runs = sweep.map(measure, eval_specs, label=_eval_label)
    runs += len(evaluated_runs)
    rows = []
    for label, res in zip(labels, evaluated_runs):
        res = dict(res)
        res["controller"] = label
        rows.append(res)

    return {
        "quick": plan.quick,
        "plan": {
            "periods": plan.periods,
            "profile_periods": plan.profile_periods,
            "fig7_periods": plan.fig7_periods,
            "offline_target_hit_ratio": plan.offline_target_hit_ratio,
        },
        "workloads": [
            {
                "name": w.name,
                "file": w.file,
                "deadline_ms": w.deadline_ms,
                "configured_bcet_ms": w.configured_bcet_ms,
                "srt_min_mb": w.srt_min_mb,
                "srt_max_mb": w.srt_max_mb,
                "nrt_max_mb": w.nrt_max_mb,
                "peak_mb": w.peak_mb,
            }
            for w in WORKLOADS
        ],
        "bcet": bcet,
        "fig7": fig7,
        "offline": offline,
        "tmo_high": tmo_high,
        "runs": rows,
        "simulation_runs": runs,
    }


def _profiling_label(s: Spec) -> str:
    return f"profiling {s.workload.name} {s.memory_pct}% {s.ssd} ({s.controller})"


def _eval_label(s: Spec) -> str:
    return f"{s.workload.name} {s.memory_pct}% {s.ssd} {s.controller}"


def early_drop_rows(data: dict[str, Any]) -> list[dict[str, Any]]:
    """SARA with and without early dropping, per configuration."""
    runs: list[dict[str, Any]] = data["runs"]
    without = {(r["workload"], r["memory_pct"], r["ssd"]): r for r in runs if r["controller"] == "sara-no-drop"}
    out = []
    for a in (r for r in runs if r["controller"] == "sara"):
        b = without.get((a["workload"], a["memory_pct"], a["ssd"]))
        if b is not None:
            out.append(
                {
                    "config": f"{a['workload']}/{a['memory_pct']}%/{a['ssd']}",
                    "cascaded_misses_with_drop": a["cascaded_misses"],
                    "cascaded_misses_without_drop": b["cascaded_misses"],
                    "dropped": a["dropped"],
                    "hit_ratio_with_drop": a["deadline_hit_ratio"],
                    "hit_ratio_without_drop": b["deadline_hit_ratio"],
                }
            )
    return out


CONFIG_ROW_KEYS = (
    "workload",
    "memory_pct",
    "ssd",
    "controller",
    "deadline_hit_ratio",
    "keepable_hit_ratio",
    "peak_jobs",
    "nonrt_throughput",
)
"""What `--json` shows of each controller's run on each configuration."""


def headline(data: dict[str, Any]) -> dict[str, Any]:
    """What `--json` prints: one row per configuration and controller, then the acceptance
    numbers beside the paper's."""
    rows = [r for r in data["runs"] if r["controller"] in CONTROLLERS]
    configs_out = [{k: r[k] for k in CONFIG_ROW_KEYS} for r in rows]
    by: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        by.setdefault(r["controller"], []).append(r)

    def mean(xs: Sequence[float | None]) -> float | None:
        v = [x for x in xs if x is not None]
        return round(sum(v) / len(v), 4) if v else None

    hit = {c: mean([r["deadline_hit_ratio"] for r in rs]) for c, rs in by.items()}
    keepable = {c: mean([r["keepable_hit_ratio"] for r in rs]) for c, rs in by.items()}
    thr = {c: mean([r["nonrt_throughput"] for r in rs]) for c, rs in by.items()}
    gains: dict[str, Any] = {}
    for base in ("greedy", "tmo-low"):
        pairs = [
            (s["nonrt_throughput"], b["nonrt_throughput"])
            for s, b in zip(by.get("sara", []), by.get(base, []))
            if s["nonrt_throughput"] and b["nonrt_throughput"]
        ]
        ratios = [a / b for a, b in pairs]
        gains[base] = {
            "ratio_of_means": _ratio(thr.get("sara"), thr.get(base)),
            "mean_of_ratios": round(sum(ratios) / len(ratios), 3) if ratios else None,
            "max_ratio": round(max(ratios), 3) if ratios else None,
            "paper_mean": PAPER_THROUGHPUT_GAIN[base],
            "paper_max": PAPER_MAX_THROUGHPUT_GAIN[base],
        }
    early = early_drop_rows(data)
    step_up = [r for r in data["runs"] if r["controller"] == "sara-step-up"]
    step_up_thr = mean([r["nonrt_throughput"] for r in step_up])
    return {
        "critmem_controller": CRITMEM_CONTROLLER,
        "configs": configs_out,
        "mean_deadline_hit_ratio": hit,
        "mean_keepable_hit_ratio": keepable,
        "mean_nonrt_throughput": thr,
        "sara_throughput_gain": gains,
        "paper_sara_hit_ratio": PAPER_SARA_HIT_RATIO,
        "paper_baseline_hit_ratio": PAPER_BASELINE_HIT_RATIO,
        "fig7": {k: {f: v[f] for f in ("slope", "intercept_ms", "r_squared", "configured_bcet_ms")} for k, v in data["fig7"].items()},
        "early_drop": early,
        "sara_step_up": {
            "step_up_bytes": STEP_UP_BYTES,
            "mean_deadline_hit_ratio": mean([r["deadline_hit_ratio"] for r in step_up]),
            "mean_keepable_hit_ratio": mean([r["keepable_hit_ratio"] for r in step_up]),
            "mean_nonrt_throughput": step_up_thr,
            "throughput_gain": {base: _ratio(step_up_thr, thr.get(base)) for base in ("greedy", "tmo-low")},
        },
        "critmem_controller_judgement": critmem_judgement(data),
        "quick": data["quick"],
        "simulation_runs": data["simulation_runs"],
    }


def critmem_judgement(data: dict[str, Any]) -> list[dict[str, Any]]:
    """Per configuration where critmem's controller ran: its judgement among `JUDGED_AMONG`
    (`judgement.judge`), with its plain hit ratio beside the keepable one."""
    runs: list[dict[str, Any]] = data["runs"]
    by = {(r["workload"], r["memory_pct"], r["ssd"], r["controller"]): r for r in runs}
    out = []
    for w, pct, ssd in configs():
        mine = by.get((w.name, pct, ssd, CRITMEM_CONTROLLER))
        if mine is None:
            continue
        points = {
            c: Point(r["keepable_hit_ratio"], r["nonrt_throughput"], r["peak_job_misses"])
            for c in JUDGED_AMONG
            if (r := by.get((w.name, pct, ssd, c))) is not None
        }
        out.append(
            {
                "config": _key(w, pct, ssd),
                "hit_ratio": mine["deadline_hit_ratio"],
                "peak_jobs": mine["peak_jobs"],
                **judge(points, CRITMEM_CONTROLLER),
            }
        )
    return out


def _ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 3) if a is not None and b else None
