"""Figures and the Markdown report of `critmem reproduce sara`, from `experiment.compute`'s
data alone."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from critmem.reproduce.checks import Check
from critmem.reproduce.markdown import fmt as _f
from critmem.reproduce.markdown import report_start
from critmem.reproduce.markdown import save_png as _save
from critmem.reproduce.markdown import table as _table
from critmem.reproduce.sara.experiment import (
    CONTROLLERS,
    CRITMEM_CONTROLLER,
    JUDGED_AMONG,
    MEMORY_PCTS,
    MIB,
    SSDS,
    STEP_UP_BYTES,
    early_drop_rows,
)
from critmem.reproduce.sara.judgement import (
    KEEPABLE_GOAL,
    MARKDOWN_HEADER,
    THROUGHPUT_TOLERANCE,
    Point,
    markdown_rows,
    pareto_front,
    rule_text,
)
from critmem.reproduce.sara.paper import PAPER_BASELINE_HIT_RATIO, PAPER_FIG7, PAPER_SARA_HIT_RATIO

_COLORS = {
    "sara": "#d62728",
    "greedy": "#1f77b4",
    "offline": "#9467bd",
    "tmo-low": "#2ca02c",
    "tmo-high": "#17becf",
    "senpai": "#8c564b",
    "static": "#7f7f7f",
    "tailguard": "#ff7f0e",
    "sara-step-up": "#e377c2",
}


def _label(ax: Axes, title: str, xlabel: str, ylabel: str, legend_loc: Literal["upper left", "upper right", "lower right"]) -> None:
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.legend(loc=legend_loc, fontsize=8)
    ax.grid(alpha=0.3)


def _rows(data: dict[str, Any], controller: str | None = None) -> list[dict[str, Any]]:
    runs: list[dict[str, Any]] = data["runs"]
    return [r for r in runs if controller is None or r["controller"] == controller]


def _configs(data: dict[str, Any]) -> list[tuple[str, int, str]]:
    """(workload, memory %, swap) of every configuration, in the report's order."""
    return [(w["name"], pct, ssd) for w in data["workloads"] for pct in MEMORY_PCTS for ssd in SSDS]


def _find(data: dict[str, Any], workload: str, pct: int, ssd: str, controller: str) -> dict[str, Any] | None:
    for r in _rows(data, controller):
        if (r["workload"], r["memory_pct"], r["ssd"]) == (workload, pct, ssd):
            return r
    return None


def plot_fig7(data: dict[str, Any], path: Path) -> Path:
    fig = Figure(figsize=(10, 4), dpi=100)
    items = list(data["fig7"].items())
    for i, (name, f) in enumerate(items):
        ax = fig.add_subplot(1, len(items), i + 1)
        x = np.array(f["stall_ms"]) / 1000.0
        y = np.array(f["exec_ms"]) / 1000.0
        ax.scatter(x, y, s=8, color="#1f77b4", label="jobs")
        if len(x):
            xs = np.linspace(0, max(x.max(), 1e-3), 50)
            ax.plot(
                xs,
                f["slope"] * xs + f["intercept_ms"] / 1000.0,
                color="#d62728",
                label=f"fit: y = {f['slope']:.3f}x + {f['intercept_ms'] / 1000:.3f} s",
            )
        _label(
            ax,
            f"{name}: limit {f['limit_mb']:.0f} MB (R² {f['r_squared']:.3f})",
            "stall per period s_period (s)",
            "execution time t_exec (s)",
            "upper left",
        )
    fig.suptitle("Fig. 7 (model): execution time against stall per period, fixed limit beside graphchi")
    fig.tight_layout()
    return _save(fig, path)


def plot_fig11(data: dict[str, Any], path: Path) -> Path:
    fig = Figure(figsize=(16, 7), dpi=100)
    panels = [(pct, ssd) for pct in MEMORY_PCTS for ssd in SSDS]
    workloads = [w["name"] for w in data["workloads"]]
    width = 0.8 / len(CONTROLLERS)
    for col, (pct, ssd) in enumerate(panels):
        for row, metric in enumerate(("deadline_hit_ratio", "nonrt_throughput")):
            ax = fig.add_subplot(2, len(panels), row * len(panels) + col + 1)
            for k, c in enumerate(CONTROLLERS):
                vals = []
                for w in workloads:
                    r = _find(data, w, pct, ssd, c)
                    v = r[metric] if r is not None else None
                    vals.append(v if v is not None else 0.0)
                xs = np.arange(len(workloads)) + (k - (len(CONTROLLERS) - 1) / 2) * width
                ax.bar(xs, vals, width, color=_COLORS[c], label=c if (row, col) == (0, 0) else None)
            ax.set_xticks(np.arange(len(workloads)), workloads)
            ax.grid(axis="y", alpha=0.3)
            if row == 0:
                ax.set_title(f"{'small' if pct == 60 else 'large'} memory ({pct} %), {ssd}")
                ax.set_ylim(0, 1.05)
                ax.set_ylabel("soft RT deadline hit ratio")
            else:
                ax.set_ylabel("graphchi work units / s")
    fig.legend(loc="upper center", ncol=len(CONTROLLERS), fontsize=9)
    fig.tight_layout(rect=(0, 0, 1, 0.94))
    return _save(fig, path)


def plot_fig12(data: dict[str, Any], path: Path) -> Path:
    fig = Figure(figsize=(12, 4), dpi=100)
    workloads = [w["name"] for w in data["workloads"]]
    for i, w in enumerate(workloads):
        ax = fig.add_subplot(1, len(workloads), i + 1)
        for c in ("greedy", "sara"):
            r = _find(data, w, 60, "slow-ssd", c)
            if r is None or "series" not in r:
                continue
            s = r["series"]
            ax.plot(s["time_s"], s["srt_usage_mb"], color=_COLORS[c], lw=0.8, label=f"{c}: memory used")
        _label(ax, f"{w} beside graphchi, 60 % memory, slow SSD", "time (s)", "soft RT memory (MB)", "lower right")
    fig.suptitle("Fig. 12 (model): memory held by the soft real-time task, SARA vs Greedy")
    fig.tight_layout()
    return _save(fig, path)


STEP_UP_JOBS_SHOWN = 150


def plot_step_up(data: dict[str, Any], path: Path) -> Path:
    """Per-job response time over the deadline under the paper's Eq. 6 and with x_up."""
    fig = Figure(figsize=(12, 4), dpi=100)
    workloads = data["workloads"]
    for i, w in enumerate(workloads):
        ax = fig.add_subplot(1, len(workloads), i + 1)
        for c, label, color in (
            ("sara", "paper's rule (one x)", _COLORS["sara"]),
            ("sara-step-up", f"x_up = {STEP_UP_BYTES / MIB:g} MiB", "#ff7f0e"),
        ):
            r = _find(data, w["name"], 60, "slow-ssd", c)
            if r is None or "series" not in r:
                continue
            shown = r["series"]["job_response_ms"][:STEP_UP_JOBS_SHOWN]  # a readable stretch
            resp = np.array([x if x is not None else np.nan for x in shown], dtype=float)
            ax.plot(np.arange(len(resp)), resp / w["deadline_ms"], color=color, lw=0.7, label=label)
        ax.axhline(1.0, color="black", ls="--", lw=0.8, label="deadline")
        _label(
            ax,
            f"{w['name']}, 60 % memory, slow SSD",
            f"job (period; the first {STEP_UP_JOBS_SHOWN} at most)",
            "response time / deadline",
            "lower right",
        )
    fig.suptitle("SARA: response time per job, the paper's Eq. 6 vs growing by x_up (dropped jobs left out)")
    fig.tight_layout()
    return _save(fig, path)


KEEPABLE_FLOOR = 0.8
"""The keepable hit ratio at the foot of the keepable-against-throughput panels: a controller
below it is drawn on it, pointing down, with its value written beside."""


def plot_keepable(
    panels: Sequence[tuple[str, dict[str, Point]]], highlight: str, title: str, xlabel: str, path: Path, goal: float = KEEPABLE_GOAL
) -> Path:
    """Keepable hit ratio against non-real-time throughput, one point per controller and one
    panel per configuration (`panels`: its title and its points), with the Pareto front (the
    controllers no other beats on both) as a staircase, `highlight` drawn large and the
    keepable `goal` dotted."""
    cols = min(4, max(1, len(panels)))
    rows = -(-len(panels) // cols)
    fig = Figure(figsize=(4.2 * cols, 3.6 * rows + 0.8), dpi=100)
    shown: dict[str, Any] = {}
    for i, (name, points) in enumerate(panels):
        ax = fig.add_subplot(rows, cols, i + 1)
        known = {c: p for c, p in points.items() if p.keepable_hit_ratio is not None and p.nonrt_throughput is not None}
        front = pareto_front(known)
        if front:
            xs = [float(known[c].nonrt_throughput or 0.0) for c in front]
            ys = [max(KEEPABLE_FLOOR, float(known[c].keepable_hit_ratio or 0.0)) for c in front]
            # The edge of what the front dominates: down from each point to the next one's level.
            sx, sy = [0.0, xs[0]], [ys[0], ys[0]]
            for x, y in zip(xs[1:], ys[1:]):
                sx += [sx[-1], x]
                sy += [y, y]
            sx.append(sx[-1])
            sy.append(KEEPABLE_FLOOR)
            ax.plot(sx, sy, color="0.35", lw=0.8, ls="--", zorder=1, label="Pareto front" if i == 0 else None)
        for c, p in known.items():
            x, y = float(p.nonrt_throughput or 0.0), float(p.keepable_hit_ratio or 0.0)
            below = y < KEEPABLE_FLOOR
            big = c == highlight
            h = ax.scatter(
                [x],
                [max(y, KEEPABLE_FLOOR)],
                s=220 if big else 36,
                marker="*" if big else ("v" if below else "o"),
                color=_COLORS.get(c, "#000000"),
                edgecolors="black" if big else "none",
                linewidths=0.8,
                zorder=4 if big else 3,
                clip_on=False,
            )
            shown.setdefault(c, h)
            if below:
                ax.annotate(f"{y:.2f}", (x, KEEPABLE_FLOOR), textcoords="offset points", xytext=(4, 4), fontsize=7)
        ax.axhline(goal, color="grey", lw=0.8, ls=":", zorder=0)
        ax.set_ylim(KEEPABLE_FLOOR, 1.005)
        ax.set_xlim(left=0.0)
        ax.set_title(name, fontsize=10)
        ax.set_xlabel(xlabel, fontsize=8)
        ax.set_ylabel("keepable hit ratio", fontsize=8)
        ax.grid(alpha=0.3)
    handles = [shown[c] for c in shown]
    labels = list(shown)
    front_lines = [ln for ax in fig.axes for ln in ax.get_lines() if ln.get_label() == "Pareto front"]
    if front_lines:
        handles.append(front_lines[0])
        labels.append("Pareto front")
    fig.legend(handles, labels, loc="upper center", ncol=min(len(labels), 10), fontsize=8)
    fig.suptitle(title, y=0.0, va="bottom", fontsize=9)
    fig.tight_layout(rect=(0, 0.04, 1, 0.95))
    return _save(fig, path)


def keepable_panels(data: dict[str, Any]) -> list[tuple[str, dict[str, Point]]]:
    """Per configuration, every controller critmem's is judged among, as points."""
    out = []
    for name, pct, ssd in _configs(data):
        points = {}
        for c in JUDGED_AMONG:
            r = _find(data, name, pct, ssd, c)
            if r is not None:
                points[c] = Point(r["keepable_hit_ratio"], r["nonrt_throughput"], r["peak_job_misses"])
        out.append((f"{name}, {pct} % memory, {ssd}", points))
    return out


def plot_keepable_sim(data: dict[str, Any], path: Path) -> Path:
    return plot_keepable(
        keepable_panels(data),
        CRITMEM_CONTROLLER,
        f"keepable hit ratio (judged jobs that are not transient peaks) against graphchi's throughput; "
        f"dotted: {KEEPABLE_GOAL}; a point under {KEEPABLE_FLOOR} is drawn at it with its value",
        "graphchi work units / s",
        path,
    )


def fig13_config(data: dict[str, Any]) -> tuple[str, int, str]:
    """The configuration Fig. 13 shows: the one where early dropping dropped most jobs
    (ties and no drops at all: Sphinx, small memory, slow SSD)."""
    best = ("sphinx", 60, "slow-ssd")
    most = 0
    for r in _rows(data, "sara"):
        if "series" in r and r["dropped"] > most:
            most, best = r["dropped"], (r["workload"], r["memory_pct"], r["ssd"])
    return best


def plot_fig13(data: dict[str, Any], path: Path) -> Path:
    w, pct, ssd = fig13_config(data)
    fig = Figure(figsize=(12, 4), dpi=100)
    ax = fig.add_subplot(1, 1, 1)
    deadline = next(x["deadline_ms"] for x in data["workloads"] if x["name"] == w)
    for c, label, marker in (("sara-no-drop", "without early dropping", "o"), ("sara", "with early dropping", "x")):
        r = _find(data, w, pct, ssd, c)
        if r is None or "series" not in r:
            continue
        s = r["series"]
        resp = [x if x is not None else np.nan for x in s["job_response_ms"]]
        ax.plot(np.arange(len(resp)), np.array(resp) / 1000.0, marker=marker, ms=3, lw=0.6, label=label)
        dropped = [i for i, o in enumerate(s["job_outcome"]) if o == "aborted"]
        if dropped:
            ax.scatter(dropped, [deadline / 1000.0] * len(dropped), color="black", s=12, label="dropped", zorder=3)
    ax.axhline(deadline / 1000.0, color="red", ls="--", lw=0.8, label="deadline")
    _label(
        ax,
        f"Fig. 13 (model): SARA with and without early job dropping — {w}, {pct} % memory, {ssd}",
        "job (period)",
        "elapsed time from release (s)",
        "upper right",
    )
    fig.tight_layout()
    return _save(fig, path)


def render(data: dict[str, Any], summary: dict[str, Any], files: Sequence[str]) -> str:
    plan = data["plan"]
    out = report_start(
        "SARA: stall-aware real-time memory allocation — reproduction by simulation",
        data["quick"],
        "fewer periods and candidates; numbers are indicative only.",
    )
    out.append(
        "Every *model* number below was computed by critmem's simulator from the bundled workloads "
        "(`python/critmem/reproduce/sara/workloads/sara-*.toml`, also under `examples/`); *paper* numbers are "
        "quoted from the paper for comparison. The controllers are the `critmem-policy` objects the Linux "
        f"agent runs. Evaluation runs: {plan['periods']} soft real-time periods each, seed 1; profiling runs "
        f"(BCET, Fig. 7, Offline and TMO-High searches) use seed 1001. {data['simulation_runs']} simulations "
        f"in all. Files: {', '.join(files)}.\n"
    )
    out.append("## Workloads (Table I)\n")
    out.append(
        _table(
            ["workload", "deadline (ms)", "BCET configured (ms)", "SRT memory min/max (MB)", "graphchi max (MB)", "aggregate peak (MB)"],
            [
                [
                    w["name"],
                    w["deadline_ms"],
                    w["configured_bcet_ms"],
                    f"{w['srt_min_mb']}/{w['srt_max_mb']}",
                    w["nrt_max_mb"],
                    w["peak_mb"],
                ]
                for w in data["workloads"]
            ],
        )
    )
    out.append(
        "\nMemory is 60 % (small) or 80 % (large) of the aggregate peak; swap on the `slow-ssd` "
        "(560/510 MB/s) or `fast-ssd` (2100/1000 MB/s) device preset. SARA: l_intv = 5 ms, x = 1 MiB, "
        "(m, n) = (80 %, 90 %), early dropping on.\n"
    )
    out.append("## Profiling: BCET and Fig. 7\n")
    out.append(
        _table(
            ["workload/swap", "BCET configured (ms)", "BCET measured (ms)"],
            [[k, v["configured_ms"], v["measured_ms"]] for k, v in data["bcet"].items()],
        )
    )
    out.append("\nThe measured BCET (smallest execution time minus stall, memory unconstrained) is what the controllers are given.\n")
    out.append(
        _table(
            ["workload", "fixed limit (MB)", "slope (paper ≈ 1)", "intercept (ms)", "configured BCET (ms)", "intercept error", "R²"],
            [
                [
                    k,
                    v["limit_mb"],
                    v["slope"],
                    v["intercept_ms"],
                    v["configured_bcet_ms"],
                    f"{v['intercept_error_pct']:+.1f} %",
                    v["r_squared"],
                ]
                for k, v in data["fig7"].items()
            ],
        )
    )
    out.append(
        f"\nPaper (Sphinx): slope approaches {PAPER_FIG7['slope']}, intercept approximates "
        f"{PAPER_FIG7['intercept_s']} s. ![Fig. 7](fig7.png)\n"
    )
    out.append("## The baselines' searches\n")
    out.append(
        _table(
            [
                "configuration",
                "Offline limit (MB)",
                "Offline profile (MB: hit ratio)",
                "TMO-High threshold (%)",
                "TMO-High search (%: mean response ms)",
            ],
            [
                [
                    k,
                    data["offline"][k]["limit_mb"],
                    ", ".join(f"{p['limit_mb']:.0f}: {_f(p['hit_ratio'], 2)}" for p in data["offline"][k]["profile"]),
                    data["tmo_high"][k]["threshold_pct"],
                    ", ".join(f"{p['threshold_pct']:.0f}: {_f(p['mean_response_ms'], 0)}" for p in data["tmo_high"][k]["search"]),
                ]
                for k in data["offline"]
            ],
        )
    )
    out.append(f"\nOffline picks the smallest limit whose profiled hit ratio reaches {plan['offline_target_hit_ratio']}.\n")
    out.append("## Fig. 11: deadline hit ratio and non-real-time throughput\n")
    header = ["workload", "memory", "swap"] + [f"{c} hit / thr" for c in CONTROLLERS]
    rows: list[list[Any]] = []
    for name, pct, ssd in _configs(data):
        row: list[Any] = [name, f"{pct} %", ssd]
        for c in CONTROLLERS:
            r = _find(data, name, pct, ssd, c)
            row.append(f"{_f(r['deadline_hit_ratio'], 2)} / {_f(r['nonrt_throughput'], 1)}" if r else "–")
        rows.append(row)
    out.append(_table(header, rows))
    out.append("\n(thr = graphchi work units per simulated second.) ![Fig. 11](fig11.png)\n")
    hit = summary["mean_deadline_hit_ratio"]
    gains = summary["sara_throughput_gain"]
    out.append("### Headline numbers beside the paper's\n")
    out.append(
        _table(
            ["quantity", "model", "paper"],
            [
                ["SARA mean deadline hit ratio", _f(hit.get("sara"), 4), _f(PAPER_SARA_HIT_RATIO, 4)],
                ["Offline mean deadline hit ratio", _f(hit.get("offline"), 4), _f(PAPER_BASELINE_HIT_RATIO["offline"], 4)],
                ["TMO-High mean deadline hit ratio", _f(hit.get("tmo-high"), 4), _f(PAPER_BASELINE_HIT_RATIO["tmo-high"], 4)],
                ["Greedy mean deadline hit ratio", _f(hit.get("greedy"), 4), "high (not given)"],
                ["TMO-Low mean deadline hit ratio", _f(hit.get("tmo-low"), 4), "high (not given)"],
                [
                    "SARA / Greedy throughput (mean of per-config ratios)",
                    _f(gains["greedy"]["mean_of_ratios"], 2),
                    _f(gains["greedy"]["paper_mean"], 2),
                ],
                ["SARA / Greedy throughput (ratio of means)", _f(gains["greedy"]["ratio_of_means"], 2), "–"],
                ["SARA / Greedy largest ratio", _f(gains["greedy"]["max_ratio"], 2), _f(gains["greedy"]["paper_max"], 2)],
                [
                    "SARA / TMO-Low throughput (mean of per-config ratios)",
                    _f(gains["tmo-low"]["mean_of_ratios"], 2),
                    _f(gains["tmo-low"]["paper_mean"], 2),
                ],
                ["SARA / TMO-Low throughput (ratio of means)", _f(gains["tmo-low"]["ratio_of_means"], 2), "–"],
                ["SARA / TMO-Low largest ratio", _f(gains["tmo-low"]["max_ratio"], 2), _f(gains["tmo-low"]["paper_max"], 2)],
            ],
        )
    )
    out.append(_step_up_section(data, summary))
    out.append(_critmem_section(data, summary))
    out.append("\n## Fig. 12: memory of the soft real-time task over time\n")
    out.append("![Fig. 12](fig12.png)\n")
    usage_rows = []
    for name, pct, ssd in _configs(data):
        s, g = _find(data, name, pct, ssd, "sara"), _find(data, name, pct, ssd, "greedy")
        if s and g:
            usage_rows.append(
                [f"{name}/{pct} %/{ssd}", s["srt_mean_usage_mb"], g["srt_mean_usage_mb"], s["nrt_mean_usage_mb"], g["nrt_mean_usage_mb"]]
            )
    out.append(_table(["configuration", "SRT MB (SARA)", "SRT MB (Greedy)", "graphchi MB (SARA)", "graphchi MB (Greedy)"], usage_rows))
    out.append("\n## Fig. 13: early job dropping\n")
    w13, p13, s13 = fig13_config(data)
    out.append(f"Shown: {w13}, {p13} % memory, {s13}. ![Fig. 13](fig13.png)\n")
    out.append(
        _table(
            ["configuration", "jobs dropped", "cascaded misses with dropping", "cascaded misses without"],
            [[e["config"], e["dropped"], e["cascaded_misses_with_drop"], e["cascaded_misses_without_drop"]] for e in summary["early_drop"]],
        )
    )
    out.append(
        "\nA cascaded miss is a missed job that started late because its predecessor overran. A job is "
        "dropped only when Definition 1 holds (≥ 80 % of its intervals stalled > 90 % of l_intv) and its "
        "remaining ideal stall is negative.\n"
    )
    out.append("## Acceptance checks (computed)\n")
    out.append(_acceptance(data, summary))
    out.append("\n## Where the model and the paper differ, with data\n")
    out.append(_discussion(data))
    return "\n".join(out) + "\n"


def _step_up_section(data: dict[str, Any], summary: dict[str, Any]) -> str:
    su = summary["sara_step_up"]
    x_up_mib = su["step_up_bytes"] / MIB
    rows = []
    for name, pct, ssd in _configs(data):
        a, b = _find(data, name, pct, ssd, "sara"), _find(data, name, pct, ssd, "sara-step-up")
        if a and b:
            rows.append(
                [
                    f"{name}/{pct} %/{ssd}",
                    f"{_f(a['deadline_hit_ratio'], 3)} / {_f(a['nonrt_throughput'], 1)}",
                    f"{_f(b['deadline_hit_ratio'], 3)} / {_f(b['nonrt_throughput'], 1)}",
                    f"{a['dropped']} / {b['dropped']}",
                    f"{_f(a['median_tardiness_ms'], 1)} / {_f(b['median_tardiness_ms'], 1)}",
                ]
            )
    hit = summary["mean_deadline_hit_ratio"]
    thr = summary["mean_nonrt_throughput"]
    rows.append(
        [
            "**mean**",
            f"{_f(hit.get('sara'), 4)} / {_f(thr.get('sara'), 2)}",
            f"{_f(su['mean_deadline_hit_ratio'], 4)} / {_f(su['mean_nonrt_throughput'], 2)}",
            "",
            "",
        ]
    )
    return (
        f"\n### SARA growing by x_up = {x_up_mib:g} MiB (not the paper's rule)\n\n"
        "Eq. 6 uses one x in both directions. A job's target stall share ρ = s_ideal_intv / l_intv is "
        "0.7–0.8 in these configurations, so one interval can take back up to x·ρ but add at most "
        "x·(1 − ρ): after a trim that was too deep SARA climbs back 3–4× slower than it trimmed, "
        "while the job's time grows as BCET/(1 − ρ). The variant `step_up_bytes` gives growth its "
        f"own x ({x_up_mib:g} MiB here; trims keep x = 1 MiB). Same runs, same seed:\n\n"
        + _table(
            [
                "configuration",
                "paper's rule: hit / thr",
                f"x_up = {x_up_mib:g} MiB: hit / thr",
                "jobs dropped (paper / x_up)",
                "median lateness of misses, ms (paper / x_up)",
            ],
            rows,
        )
        + "\n\nIt is a deviation from the paper and is reported beside it, never in place of it; "
        "every other number in this report is the paper's rule (`step_up_bytes` unset). "
        "Job by job (60 % memory, slow SSD) the paper's rule swings from early to late and back "
        "over a few periods; the variant keeps them inside it: "
        "![x_up](fig_step_up.png)\n"
    )


def _critmem_section(data: dict[str, Any], summary: dict[str, Any]) -> str:
    judged = summary["critmem_controller_judgement"]
    held = sum(e["holds"] for e in judged)
    peaks = sum(e["peak_job_misses"] or 0 for e in judged)
    greedy_peaks = sum(r["peak_job_misses"] for r in _rows(data, "greedy"))
    thr = summary["mean_nonrt_throughput"]
    c = CRITMEM_CONTROLLER
    failing = [e for e in judged if not e["holds"]]
    why = "; ".join(
        f"{e['config']}: "
        + ", ".join(
            part
            for part in (
                f"keepable hit ratio {_f(e['keepable_hit_ratio'], 4)}" if not (e["keepable_hit_ratio"] or 0) >= KEEPABLE_GOAL else "",
                f"{e['peak_job_misses']} peaks missed against SARA's {e['sara_peak_job_misses']}"
                if e["peak_job_misses"] is None or e["sara_peak_job_misses"] is None or e["peak_job_misses"] > e["sara_peak_job_misses"]
                else "",
                f"dominated by {', '.join(e['dominated_by'])}" if e["dominated_by"] else "",
                f"{_f(e['throughput_ratio_to_best'], 3)} of {e['best_keeping']}'s throughput"
                if e["throughput_ratio_to_best"] is None or e["throughput_ratio_to_best"] < 1 - THROUGHPUT_TOLERANCE
                else "",
            )
            if part
        )
        for e in failing
    )
    return (
        f"\n### critmem's controller: {c}\n\n"
        f"`{c}` keeps SARA's per-interval stall steering and changes what it aims at and how it recovers: "
        "the job's non-stall time is learned from completed jobs (a high quantile of completion − start − stall) "
        "instead of trusting the configured BCET, so CPU contention, which Eq. 1 leaves out, shows up in the "
        "budget; each job aims to finish a guard band early that starts at 0, widens by 1 % of the deadline "
        "with each job that misses without a rescue and narrows by 0.1 % with each job on time; the limit grows "
        "by 2 MiB units and shrinks by 1 MiB; a job stalled for nearly a whole interval at its limit, with less "
        "slack left than that interval's stall, is rescued (its limit follows its usage to the end of the job); "
        "and a job certain to miss (its stall so far and the fastest remembered non-stall time already past the "
        "deadline) is dropped. Every parameter is documented in `critmem_policy::tailguard`.\n\n"
        + rule_text(c, ", ".join(x for x in JUDGED_AMONG if x != c))
        + " The transient peaks are every 50th job from job 25, which first searches the model densely: "
        "a peak job that does not find that data resident reads it from swap, on the device the graph "
        "workload faults on too, and meeting it takes keeping the model resident all along, which is what "
        f"the throughput is made of (Greedy, which leaves the soft real-time task all it takes, misses {greedy_peaks} "
        f"peak jobs in all at a mean throughput of {_f(thr.get('greedy'), 2)}; `{c}` misses {peaks}).\n\n"
        + _table(MARKDOWN_HEADER, markdown_rows(judged))
        + f"\n\nThe rule holds in {held} of {len(judged)} configurations"
        + (f"; not in {why}." if failing else ".")
        + " Each configuration's controllers, keepable hit ratio against throughput, with the Pareto front: "
        "![keepable hit ratio against throughput](fig_keepable.png)\n"
    )


def _discussion(data: dict[str, Any]) -> str:
    sara = _rows(data, "sara")
    out: list[str] = []
    out.append(
        "**SARA's hit ratio.** Eq. 4–6 steer each job's stall to `d − t_BCET − t_wait`, i.e. each job "
        "to finish *at* its deadline; a job whose stall overshoots the target by a few intervals "
        "misses, and with a target stall share ρ of 0.7–0.8 Eq. 6 adds at most x·(1 − ρ) per "
        "interval, so SARA gives memory back slowly when a job runs late (the x_up variant above "
        "measures this). The missed jobs are late by little:\n"
    )
    out.append(
        _table(
            ["configuration", "hit ratio", "mean response (ms)", "deadline (ms)", "median lateness of misses (ms)", "mean SRT memory (MB)"],
            [
                [
                    f"{r['workload']}/{r['memory_pct']} %/{r['ssd']}",
                    r["deadline_hit_ratio"],
                    r["mean_response_ms"],
                    next(w["deadline_ms"] for w in data["workloads"] if w["name"] == r["workload"]),
                    r["median_tardiness_ms"],
                    r["srt_mean_usage_mb"],
                ]
                for r in sara
            ],
        )
    )
    early = {e["config"]: e for e in early_drop_rows(data)}
    helped = [k for k, e in early.items() if e["cascaded_misses_with_drop"] < e["cascaded_misses_without_drop"]]
    hurt = [k for k, e in early.items() if e["cascaded_misses_with_drop"] > e["cascaded_misses_without_drop"]]
    out.append(
        "\n**Long stalls and early dropping.** Definition 1 needs ≥ 80 % of a job's intervals to "
        "stall more than 90 % of l_intv. The simulator has no system-wide stall that suspends every "
        "process at once; its long stalls come from the workloads' transient peaks (every 50th job "
        "searches the model densely) queueing on the swap device. The largest share of severe "
        "intervals over a whole job (a dropped job counted to its deadline) per configuration: "
        + ", ".join(f"{r['workload']}/{r['memory_pct']} %/{r['ssd']} {_f(r['max_severe_share'], 2)}" for r in sara)
        + f". Dropping reduced cascaded misses in {', '.join(helped) or 'no configuration'} and "
        f"increased them in {', '.join(hurt) or 'no configuration'}: after a peak SARA has raised "
        "the limit, so the late successor of an undropped peak usually still finishes in time.\n"
    )
    tmo_rows = []
    for k, t in data["tmo_high"].items():
        w, pct, ssd = k.split("/")
        pct_i = int(pct.rstrip("%"))
        th, gr = _find(data, w, pct_i, ssd, "tmo-high"), _find(data, w, pct_i, ssd, "greedy")
        means = [p["mean_response_ms"] for p in t["search"] if p["mean_response_ms"] is not None]
        tmo_rows.append(
            [
                k,
                t["threshold_pct"],
                f"{min(means):.0f}–{max(means):.0f}" if means else "–",
                th["srt_mean_usage_mb"] if th else None,
                gr["srt_mean_usage_mb"] if gr else None,
            ]
        )
    out.append(
        "\n**TMO-High.** TMO reclaims once per 6 s period (`memory.reclaim`, 1 % of usage scaled by "
        "how far PSI is below the threshold) and never caps the group. A soft real-time job touches "
        "its working set every period, so reclaimed pages fault back within a period; no threshold "
        "brings the mean elapsed time near the deadline, the search picks its largest candidate, and "
        "TMO-High holds nearly what Greedy holds:\n"
    )
    out.append(_table(["configuration", "threshold (%)", "profiled mean responses (ms)", "SRT MB (TMO-High)", "SRT MB (Greedy)"], tmo_rows))
    off_rows = []
    for k, o in data["offline"].items():
        w, pct, ssd = k.split("/")
        r = _find(data, w, int(pct.rstrip("%")), ssd, "offline")
        prof = next((p["hit_ratio"] for p in o["profile"] if p["limit_mb"] == o["limit_mb"]), None)
        off_rows.append([k, o["limit_mb"], prof, r["deadline_hit_ratio"] if r else None])
    out.append(
        "\n**Offline.** The static limit is the smallest candidate that met the target on a profiling "
        "run (another seed, fewer periods). Where the evaluation's hit ratio stays high, the model's "
        "job-to-job variation is smaller than the paper's (its only runtime variation is the "
        "transient peak every 50 jobs); where a peak falls on a tight limit, misses follow:\n"
    )
    out.append(_table(["configuration", "limit (MB)", "hit ratio on the profile", "hit ratio evaluated"], off_rows))
    return "\n".join(out) + "\n"


# The data behind "why Offline and TMO-High do not fail here" (the section above): no TMO-High
# threshold brings the mean response within this share of the deadline, and Offline's evaluated
# hit ratio stays within this much of its profile's.
TMO_HIGH_FAR_FROM_DEADLINE = 0.9
OFFLINE_PROFILE_HOLDS = 0.1


def _baselines_explained(data: dict[str, Any], which: list[str]) -> tuple[bool, str]:
    """Whether the data bear out the report's explanation for each baseline in `which`
    ("offline", "tmo-high") not failing as in the paper, and the figures that show it."""
    deadline_ms = {w["name"]: w["deadline_ms"] for w in data.get("workloads", [])}
    ok, shown = True, []
    if "tmo-high" in which:
        shares = []
        for k, t in data.get("tmo_high", {}).items():
            means = [p["mean_response_ms"] for p in t["search"] if p["mean_response_ms"] is not None]
            d = deadline_ms.get(k.split("/")[0])
            largest = max((p["threshold_pct"] for p in t["search"]), default=None)
            if not means or not d or t["threshold_pct"] != largest:
                ok = False
                continue
            shares.append(max(means) / d)
        ok = ok and bool(shares) and max(shares) < TMO_HIGH_FAR_FROM_DEADLINE
        shown.append(f"TMO-High's slowest profiled mean response {_f(max(shares) * 100 if shares else None, 0)} % of the deadline")
    if "offline" in which:
        gaps = []
        for k, o in data.get("offline", {}).items():
            w, pct, ssd = k.split("/")
            r = _find(data, w, int(pct.rstrip("%")), ssd, "offline")
            prof = next((p["hit_ratio"] for p in o["profile"] if p["limit_mb"] == o["limit_mb"]), None)
            if r is None or r["deadline_hit_ratio"] is None or prof is None:
                ok = False
                continue
            gaps.append(abs(r["deadline_hit_ratio"] - prof))
        ok = ok and bool(gaps) and max(gaps) <= OFFLINE_PROFILE_HOLDS
        shown.append(f"Offline evaluated within {_f(max(gaps) if gaps else None, 3)} of its profile's hit ratio")
    return ok, "; ".join(shown)


def _baselines_verdict(data: dict[str, Any], hit: dict[str, Any]) -> tuple[str, str]:
    """The acceptance check: Offline and TMO-High clearly below SARA ("yes"), or not but with the
    report's explanation borne out by the data ("explained"), or neither."""
    sara = hit.get("sara")
    below = {c: hit.get(c) is not None and sara is not None and hit[c] < sara - 0.05 for c in ("offline", "tmo-high")}
    value = f"offline {_f(hit.get('offline'), 3)}, tmo-high {_f(hit.get('tmo-high'), 3)}"
    if all(below.values()):
        return "yes", value
    if any(hit.get(c) is None for c in below) or sara is None:
        return "**no**", value
    explained, figures = _baselines_explained(data, [c for c, b in below.items() if not b])
    return ("explained" if explained else "**no**"), f"{value}; {figures}"


# A check's row: its short name, the report's wording, what it expects, whether it holds ("yes",
# "explained" or "**no**" where the answer has a third case) and the value shown.
_Row = tuple[str, str, str, bool | str, str]


def _acceptance_rows(data: dict[str, Any], summary: dict[str, Any]) -> list[_Row]:
    hit = summary["mean_deadline_hit_ratio"]
    g = summary["sara_throughput_gain"]
    early = summary["early_drop"]
    fig7 = data["fig7"]
    su = summary["sara_step_up"]
    return [
        (
            "SARA hit ratio",
            "SARA mean deadline hit ratio ≥ 0.95",
            "≥ 0.95",
            hit.get("sara") is not None and hit["sara"] >= 0.95,
            _f(hit.get("sara"), 4),
        ),
        (
            "SARA with x_up",
            (
                f"(not the paper's rule) SARA with x_up = {su['step_up_bytes'] / MIB:g} MiB: mean hit ratio ≥ 0.95, "
                "throughput ≥ 3× Greedy's and TMO-Low's"
            ),
            "hit ratio ≥ 0.95; throughput ≥ 3× Greedy's and TMO-Low's",
            (su["mean_deadline_hit_ratio"] or 0) >= 0.95 and all((g or 0) >= 3 for g in su["throughput_gain"].values()),
            f"{_f(su['mean_deadline_hit_ratio'], 4)}; {_f(su['throughput_gain']['greedy'], 2)}× / {_f(su['throughput_gain']['tmo-low'], 2)}×",
        ),
        (
            "throughput over Greedy",
            "SARA non-RT throughput ≥ 3× Greedy's (ratio of means)",
            "≥ 3×",
            (g["greedy"]["ratio_of_means"] or 0) >= 3,
            _f(g["greedy"]["ratio_of_means"], 2),
        ),
        (
            "throughput over TMO-Low",
            "SARA non-RT throughput ≥ 3× TMO-Low's (ratio of means)",
            "≥ 3×",
            (g["tmo-low"]["ratio_of_means"] or 0) >= 3,
            _f(g["tmo-low"]["ratio_of_means"], 2),
        ),
        (
            "Offline and TMO-High below SARA",
            (
                "Offline and TMO-High hit ratio clearly below SARA's (yes), or not and the data bear out why (explained, "
                'see "Where the model and the paper differ")'
            ),
            "more than 0.05 below SARA's, or explained",
            *_baselines_verdict(data, hit),
        ),
        (
            "Fig. 7 fit",
            "Fig. 7 slope within 0.9–1.1 and intercept within 10 % of the configured BCET",
            "slope 0.9–1.1; intercept within 10 %",
            all(0.9 <= v["slope"] <= 1.1 and abs(v["intercept_error_pct"]) <= 10 for v in fig7.values()),
            "; ".join(f"{k}: {v['slope']:.3f}, {v['intercept_error_pct']:+.1f} %" for k, v in fig7.items()),
        ),
        (
            "early dropping",
            "Early dropping reduces cascaded misses in a configuration with long stalls",
            "fewer cascaded misses with dropping somewhere",
            any(e["dropped"] > 0 and e["cascaded_misses_with_drop"] < e["cascaded_misses_without_drop"] for e in early),
            f"{sum(e['dropped'] for e in early)} jobs dropped in all",
        ),
        *_critmem_rows(summary["critmem_controller_judgement"]),
    ]


def _critmem_rows(judged: list[dict[str, Any]]) -> list[_Row]:
    """critmem's controller in every configuration: its keepable jobs kept, and its throughput
    undominated and near the best (`judgement.judge`); with no configuration judged, neither holds."""
    c = CRITMEM_CONTROLLER
    keepable = [e["keepable_hit_ratio"] for e in judged]
    lowest = min((k for k in keepable if k is not None), default=None)
    over = [e["config"] for e in judged if not e["keeps"]]
    ratios = [(e["throughput_ratio_to_best"], e["config"], e["best_keeping"]) for e in judged if e["throughput_ratio_to_best"] is not None]
    worst = min(ratios, default=None)
    dominated = [f"{e['config']} by {', '.join(e['dominated_by'])}" for e in judged if e["dominated_by"]]
    return [
        (
            f"{c} keeps the keepable jobs",
            f"`{c}` in every configuration: keepable hit ratio ≥ {KEEPABLE_GOAL} and no more transient peaks missed than SARA",
            f"keepable ≥ {KEEPABLE_GOAL}; peak misses ≤ SARA's",
            bool(judged) and all(e["keeps"] for e in judged),
            f"lowest keepable {_f(lowest, 4)}; " + (f"not held in {', '.join(over)}" if over else "held in every configuration"),
        ),
        (
            f"{c} throughput undominated",
            (
                f"`{c}` in every configuration: no controller has both a higher keepable hit ratio and a higher throughput, "
                f"and its throughput is within {THROUGHPUT_TOLERANCE * 100:g} % of the best among those keeping ≥ {KEEPABLE_GOAL}"
            ),
            f"dominated nowhere; ≥ {1 - THROUGHPUT_TOLERANCE:.2f} × the best",
            bool(judged) and all(e["throughput_holds"] for e in judged),
            (
                f"lowest ratio {_f(worst[0], 3)} ({worst[1]}, to {worst[2]}); dominated in {'; '.join(dominated) or 'none'}"
                if worst is not None
                else f"no ratio; dominated in {'; '.join(dominated) or 'none'}"
            ),
        ),
    ]


_HOLDS = {True: "yes", False: "**no**"}


def acceptance_checks(data: dict[str, Any], summary: dict[str, Any]) -> list[Check]:
    """The report's acceptance checks; "explained" counts as holding, as the report says."""
    return [
        Check(name, expected, value, ok in ("yes", "explained") if isinstance(ok, str) else ok)
        for name, _, expected, ok, value in _acceptance_rows(data, summary)
    ]


def _acceptance(data: dict[str, Any], summary: dict[str, Any]) -> str:
    rows = _acceptance_rows(data, summary)
    return _table(["check", "holds", "value"], [[c, ok if isinstance(ok, str) else _HOLDS[ok], v] for _, c, _, ok, v in rows])
