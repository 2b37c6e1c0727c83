"""Gantt chart of a run: one row per CPU, one colour per task, deadline misses marked."""

from __future__ import annotations

import math
import os
from pathlib import Path

import matplotlib
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import Colormap
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from critmem.api import RunResult

# Beyond about this many segments per CPU row, bars shrink to slivers; plot a leading
# window instead.
SEGMENTS_PER_CPU = 80


def _round_down(x: float) -> float:
    """x rounded down to two significant digits, for a window end that reads well."""
    if x <= 0:
        return x
    step = 10.0 ** (math.floor(math.log10(x)) - 1)
    return math.floor(x / step) * step


def _window_end_ms(result: RunResult, max_segments: int) -> float:
    """End of the plotted window: the horizon; else one hyperperiod, where that fits in
    `max_segments`; else about where the first `max_segments` start."""
    horizon_ms = result.horizon_ms
    if len(result.segments) <= max_segments:
        return horizon_ms
    starts = result.segments["start_ms"].sort_values(kind="stable", ignore_index=True)
    cut = float(starts.iloc[max_segments])
    hyper = result.hyperperiod_ms
    if hyper is not None and hyper <= cut:
        return hyper  # one whole hyperperiod shows every pattern the schedule repeats
    return min(horizon_ms, _round_down(cut) or cut)


def literal_text(text: str) -> str:
    """`text` as matplotlib must be given it to draw it as written: a pair of `$` in a task or
    file name would otherwise be parsed as math (and fail to parse, or render as symbols)."""
    return text.replace("$", r"\$")


def plot_gantt(result: RunResult, path: str | os.PathLike[str], *, max_segments: int | None = None) -> Path:
    """Writes the chart as a PNG to `path` (byte-identical for identical results).

    At most `max_segments` segments are drawn (default: SEGMENTS_PER_CPU per CPU); a longer
    run is shown from its start and the title says how much.
    """
    segments = result.segments
    jobs = result.jobs
    names = [str(n) for n in result.tasks["name"]]
    cmap: Colormap = matplotlib.colormaps["tab10" if len(names) <= 10 else "tab20"]
    colour = {name: cmap(i % cmap.N) for i, name in enumerate(names)}

    limit = SEGMENTS_PER_CPU * result.cpus if max_segments is None else max_segments
    end_ms = _window_end_ms(result, limit)
    shown = segments[segments["start_ms"] < end_ms]

    fig = Figure(figsize=(12, 1.6 + 0.7 * result.cpus), dpi=110)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    for name in names:
        mine = shown[shown["task"] == name]
        if mine.empty:
            continue
        ends = mine["end_ms"].clip(upper=end_ms)
        for _, group in mine.groupby("cpu", sort=True):
            cpu = int(group["cpu"].iloc[0])
            widths = ends[group.index] - group["start_ms"]
            ax.broken_barh(
                list(zip(group["start_ms"], widths)),
                (cpu - 0.38, 0.76),
                facecolors=colour[name],
                edgecolor="none",
            )

    # A miss is drawn at its deadline, on the CPU the job last ran on (or its task's own
    # CPU, or CPU 0, if it never ran).
    home_cpu = {str(n): (0 if pd.isna(c) else int(c)) for n, c in zip(result.tasks["name"], result.tasks["cpu"])}
    missed = jobs[jobs["missed"] & (jobs["deadline_ms"] <= end_ms)]
    if not missed.empty:
        ys = [(home_cpu.get(str(t), 0) if pd.isna(c) else int(c)) - 0.46 for t, c in zip(missed["task"], missed["last_cpu"])]
        ax.scatter(missed["deadline_ms"], ys, marker="v", s=36, color="red", zorder=3, clip_on=False)

    ax.set_xlim(0, end_ms)
    ax.set_ylim(result.cpus - 0.5, -0.6)  # CPU 0 on top, room above it for miss markers
    ax.set_yticks(range(result.cpus), [f"CPU {c}" for c in range(result.cpus)])
    ax.set_xlabel("time (ms)")
    ax.grid(axis="x", linewidth=0.4, alpha=0.5)

    title = f"{result.scenario} — {result.scheduler} on {result.cpus} CPU{'s' if result.cpus != 1 else ''}, seed {result.seed}"
    if end_ms < result.horizon_ms:
        what = "first hyperperiod" if end_ms == result.hyperperiod_ms else "first"
        title += f"\n{what} {end_ms:g} ms of {result.horizon_ms:g} ms shown ({len(segments)} segments in all)"
    else:
        title += f", {end_ms:g} ms"
    ax.set_title(literal_text(title), fontsize="medium")

    handles: list[Patch | Line2D] = [Patch(facecolor=colour[n], label=literal_text(n)) for n in names]
    n_missed = int(jobs["missed"].sum())
    handles.append(Line2D([], [], marker="v", color="red", linestyle="none", label=f"deadline miss ({n_missed} in all)"))
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small", frameon=False)

    out = Path(path)
    # No "Software" (version) entry: the PNG depends only on the result.
    fig.savefig(out, format="png", bbox_inches="tight", metadata={"Software": None})
    return out
