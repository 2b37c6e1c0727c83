"""Gantt chart of a run: one row per CPU, one colour per task, deadline misses marked.

With scheduler servers, each CPU's row is followed by one row per server of its hierarchy
(depth-first, children indented): a leaf server's row shows its tasks' segments, every
server's row its child-scheduler thread delivering events (hatched) and the instants its
budget ran out (a black tick).

With shared resources or components, each stretch a job waited for one is a thin hatched bar
in its task's colour along the bottom of the row of the CPU the task last ran on, labelled
with what it waited on where the bar is wide enough."""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any, overload

import matplotlib
import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import Colormap
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from critmem.api import RunResult

WAIT_HATCH = "xxxx"
WAIT_LABEL = "waiting on a resource"
# A wait's bar: the bottom strip of its row's band (execution bars fill row ± 0.38), hatched
# over a clear face so what runs meanwhile shows through.
_WAIT_Y, _WAIT_HEIGHT = 0.16, 0.22
# Width of one character of a wait's label at 6 pt, in pixels at the figure's 110 dpi.
_LABEL_CHAR_PX = 6 * 0.62 / 72 * 110

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


def _server_rows(result: RunResult) -> tuple[dict[int, int], dict[str, int], list[str]]:
    """The chart's rows: CPU → row, server → row, and each row's label. Without servers,
    row c is CPU c."""
    servers = result.servers
    if servers is None:
        return {c: c for c in range(result.cpus)}, {}, [f"CPU {c}" for c in range(result.cpus)]
    names = [str(n) for n in servers["name"]]
    known = set(names)
    children: dict[str, list[str]] = {}
    for name, parent in zip(names, servers["parent"]):
        # Under the root, or under one of MC²'s levels ("level C"): a row below its CPU's.
        children.setdefault(str(parent) if str(parent) in known else "root", []).append(name)
    cpu_of = {name: int(c) for name, c in zip(names, servers["cpu"])}
    cpu_row: dict[int, int] = {}
    server_row: dict[str, int] = {}
    labels: list[str] = []

    def add(name: str, depth: int) -> None:
        server_row[name] = len(labels)
        labels.append("  " * depth + name)
        for child in children.get(name, []):
            add(child, depth + 1)

    for cpu in range(result.cpus):
        cpu_row[cpu] = len(labels)
        labels.append(f"CPU {cpu}")
        for top in children.get("root", []):
            if cpu_of[top] == cpu:
                add(top, 1)
    return cpu_row, server_row, labels


# A legend past this many tasks names the ones that ran longest and greys the rest.
LEGEND_TASKS = 20
# Release and deadline marks are drawn while the window holds at most this many jobs.
JOB_MARKS = 400
# The figure stays under 4,000 px on each side at its 110 dpi.
MAX_HEIGHT_IN = 36.0
FORMATS = ("png", "svg", "pdf")


@overload
def plot_gantt(
    result: RunResult,
    path: str | os.PathLike[str],
    *,
    ax: None = None,
    max_segments: int | None = None,
    window: tuple[float, float] | None = None,
    fmt: str | None = None,
) -> Path: ...
@overload
def plot_gantt(
    result: RunResult,
    path: None = None,
    *,
    ax: Axes,
    max_segments: int | None = None,
    window: tuple[float, float] | None = None,
    fmt: str | None = None,
) -> Axes: ...
def plot_gantt(
    result: RunResult,
    path: str | os.PathLike[str] | None = None,
    *,
    ax: Axes | None = None,
    max_segments: int | None = None,
    window: tuple[float, float] | None = None,
    fmt: str | None = None,
) -> Path | Axes:
    """The chart of `result`: drawn on `ax` (returned), or written to `path` as PNG, SVG or
    PDF (`fmt`, default the path's suffix, else PNG; byte-identical for identical results).

    `window=(start_ms, end_ms)` shows that stretch; without it at most `max_segments`
    segments are drawn (default: SEGMENTS_PER_CPU per CPU), a longer run shown from its
    start with the title saying how much.
    """
    if window is not None and not (0 <= window[0] < window[1]):
        raise ValueError(f"window: expected 0 <= start < end in ms (got {window[0]:g}:{window[1]:g})")
    if ax is not None:
        _draw(ax, result, max_segments, window)
        return ax
    if path is None:
        raise ValueError("plot_gantt needs a path to write to or an ax to draw on")
    out = Path(path)
    kind = fmt or (out.suffix[1:].lower() if out.suffix[1:].lower() in FORMATS else "png")
    if kind not in FORMATS:
        raise ValueError(f"format: expected one of {', '.join(FORMATS)} (got {kind!r})")
    rows = len(_server_rows(result)[2])
    fig = Figure(figsize=(12, min(MAX_HEIGHT_IN, 1.6 + 0.7 * rows)), dpi=110)
    FigureCanvasAgg(fig)
    _draw(fig.add_subplot(), result, max_segments, window)
    # No creator, version or date entries, and fixed SVG ids: the file depends only on the result.
    metadata: dict[str, Any] = {
        "png": {"Software": None},
        "svg": {"Date": None, "Creator": None},
        "pdf": {"CreationDate": None, "Creator": None, "Producer": None},
    }[kind]
    with matplotlib.rc_context({"svg.hashsalt": "critmem"}):
        fig.savefig(out, format=kind, bbox_inches="tight", metadata=metadata)
    return out


def _draw(ax: Axes, result: RunResult, max_segments: int | None, window: tuple[float, float] | None) -> None:
    segments = result.segments
    jobs = result.jobs
    names = [str(n) for n in result.tasks["name"]]
    # The tasks that ran longest get colours (and legend entries); past LEGEND_TASKS the rest
    # share one grey.
    ran = (segments["end_ms"] - segments["start_ms"]).groupby(segments["task"].astype(str), sort=False).sum()
    ran_ms = ran.to_dict()
    order = sorted(range(len(names)), key=lambda i: (-float(ran_ms.get(names[i], 0.0)), i))
    named = set(names) if len(names) <= LEGEND_TASKS else {names[i] for i in order[: LEGEND_TASKS - 1]}
    cmap: Colormap = matplotlib.colormaps["tab10" if len(named) <= 10 else "tab20"]
    colour: dict[str, Any] = {name: cmap(i % cmap.N) for i, name in enumerate(n for n in names if n in named)}
    for name in names:
        colour.setdefault(name, (0.75, 0.75, 0.75, 1.0))

    if window is None:
        limit = SEGMENTS_PER_CPU * result.cpus if max_segments is None else max_segments
        start_ms, end_ms = 0.0, _window_end_ms(result, limit)
    else:
        start_ms, end_ms = window[0], min(window[1], result.horizon_ms)
    shown = segments[(segments["start_ms"] < end_ms) & (segments["end_ms"] > start_ms)]
    cpu_row, server_row, labels = _server_rows(result)
    rows = len(labels)
    # Each task's row: its leaf server's, or its CPU's (keyed by the CPU it ran on) without servers.
    task_row = {n: server_row[s] for n, s in zip(names, result.task_servers) if s is not None}

    # One bar collection per row, each bar in its task's colour.
    starts = shown["start_ms"].clip(lower=start_ms)
    spans = list(zip(starts, shown["end_ms"].clip(upper=end_ms) - starts))
    tasks_shown = [str(t) for t in shown["task"]]
    bars_of: dict[int, tuple[list[tuple[float, float]], list[Any]]] = {}
    for span, name, cpu in zip(spans, tasks_shown, shown["cpu"]):
        for row in [cpu_row[int(cpu)]] + ([task_row[name]] if name in task_row else []):
            bars, colours = bars_of.setdefault(row, ([], []))
            bars.append(span)
            colours.append(colour[name])
    for row, (bars, colours) in sorted(bars_of.items()):
        ax.broken_barh(bars, (row - 0.38, 0.76), facecolors=colours, edgecolor="none")
    if server_row:
        _draw_server_activity(ax, result, cpu_row, server_row, end_ms)
    home_cpu = {str(n): (0 if pd.isna(c) else int(c)) for n, c in zip(result.tasks["name"], result.tasks["cpu"])}
    if not result.waits.empty:
        axes_px = float(ax.bbox.width)
        _draw_waits(ax, result, colour, home_cpu, cpu_row, task_row, end_ms, axes_px)

    def job_rows(frame: pd.DataFrame) -> list[float]:
        # A job's row: its task's, or the CPU it last ran on (or its task's own, or CPU 0).
        return [
            task_row.get(str(t), cpu_row[home_cpu.get(str(t), 0) if pd.isna(c) else int(c)])
            for t, c in zip(frame["task"], frame["last_cpu"])
        ]

    in_window = jobs[(jobs["release_ms"] <= end_ms) & (jobs["deadline_ms"] >= start_ms)]
    if 0 < len(in_window) <= JOB_MARKS:
        # Releases below each row, deadlines met above it, in the task's colour.
        released = in_window[in_window["release_ms"] >= start_ms]
        ys = [y + 0.47 for y in job_rows(released)]
        ax.scatter(released["release_ms"], ys, marker="^", s=14, c=[colour[str(t)] for t in released["task"]], zorder=3, clip_on=False)
        met = in_window[~in_window["missed"] & (in_window["deadline_ms"] <= end_ms)]
        ys = [y - 0.46 for y in job_rows(met)]
        ax.scatter(met["deadline_ms"], ys, marker="v", s=14, c=[colour[str(t)] for t in met["task"]], zorder=3, clip_on=False)
    # A miss is drawn at its deadline in red.
    missed = jobs[jobs["missed"] & (jobs["deadline_ms"] <= end_ms) & (jobs["deadline_ms"] >= start_ms)]
    if not missed.empty:
        ys = [y - 0.46 for y in job_rows(missed)]
        ax.scatter(missed["deadline_ms"], ys, marker="v", s=36, color="red", zorder=3, clip_on=False)

    ax.set_xlim(start_ms, end_ms)
    ax.set_ylim(rows - 0.5, -0.6)  # CPU 0 on top, room above it for miss markers
    ax.set_yticks(range(rows), [literal_text(label) for label in labels])
    ax.set_xlabel("time (ms)")
    ax.grid(axis="x", linewidth=0.4, alpha=0.5)

    title = f"{result.scenario} — {result.scheduler} on {result.cpus} CPU{'s' if result.cpus != 1 else ''}, seed {result.seed}"
    if window is not None:
        title += f"\n{start_ms:g}–{end_ms:g} ms of {result.horizon_ms:g} ms shown"
    elif end_ms < result.horizon_ms:
        what = "first hyperperiod" if end_ms == result.hyperperiod_ms else "first"
        title += f"\n{what} {end_ms:g} ms of {result.horizon_ms:g} ms shown ({len(segments)} segments in all)"
    else:
        title += f", {end_ms:g} ms"
    ax.set_title(literal_text(title), fontsize="medium")

    misses = jobs[jobs["missed"]].groupby(jobs["task"].astype(str), sort=False).size()

    def entry(n: str) -> str:
        k = int(misses.get(n, 0))
        return literal_text(n) + (f" ({k} missed)" if k else "")

    handles: list[Patch | Line2D] = [Patch(facecolor=colour[n], label=entry(n)) for n in names if n in named]
    others = len(names) - len(named)
    if others:
        handles.append(Patch(facecolor=(0.75, 0.75, 0.75, 1.0), label=f"{others} other tasks"))
    n_missed = int(jobs["missed"].sum())
    if 0 < len(in_window) <= JOB_MARKS:
        handles.append(Line2D([], [], marker="^", color="dimgray", linestyle="none", markersize=4, label="release"))
        handles.append(Line2D([], [], marker="v", color="dimgray", linestyle="none", markersize=4, label="deadline met"))
    handles.append(Line2D([], [], marker="v", color="red", linestyle="none", label=f"deadline miss ({n_missed} in all)"))
    if server_row:
        handles.append(Patch(facecolor="white", edgecolor="dimgray", hatch="////", label="event delivery"))
        handles.append(Line2D([], [], marker="|", color="black", linestyle="none", label="budget exhausted"))
    if not result.waits.empty:
        handles.append(Patch(facecolor="white", edgecolor="dimgray", hatch=WAIT_HATCH, label=WAIT_LABEL))
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small", frameon=False)


def _draw_server_activity(ax: Axes, result: RunResult, cpu_row: dict[int, int], server_row: dict[str, int], end_ms: float) -> None:
    """Event delivery (hatched) on its server's row and its CPU's, and budget exhaustions."""
    events = result.server_events[result.server_events["start_ms"] < end_ms]
    for server, group in events.groupby("server", sort=True):
        spans = list(zip(group["start_ms"], group["end_ms"].clip(upper=end_ms) - group["start_ms"]))
        cpu = int(group["cpu"].iloc[0])
        for row in (server_row[str(server)], cpu_row[cpu]):
            ax.broken_barh(spans, (row - 0.38, 0.76), facecolors="white", edgecolor="dimgray", hatch="////", linewidth=0.4)
    out = result.server_exhaustions[result.server_exhaustions["time_ms"] <= end_ms]
    if not out.empty:
        ys = [server_row[str(s)] for s in out["server"]]
        ax.scatter(out["time_ms"], ys, marker="|", s=120, color="black", linewidths=1.2, zorder=3)


def _last_cpus(result: RunResult, waits: pd.DataFrame, home_cpu: dict[str, int]) -> list[int]:
    """For each wait, the CPU its task last ran on before the wait began (else the task's own
    CPU, else CPU 0)."""
    segments = result.segments.sort_values(["task", "start_ms"], kind="stable")
    by_task = {str(t): (g["start_ms"].to_numpy(), g["cpu"].to_numpy()) for t, g in segments.groupby("task", sort=True)}
    cpus = []
    for task, start in zip(waits["task"], waits["start_ms"]):
        starts, on = by_task.get(str(task), (np.empty(0), np.empty(0, dtype=np.int64)))
        i = int(np.searchsorted(starts, start, side="left")) - 1
        cpus.append(int(on[i]) if i >= 0 else home_cpu.get(str(task), 0))
    return cpus


def _draw_waits(
    ax: Axes,
    result: RunResult,
    colour: dict[str, Any],
    home_cpu: dict[str, int],
    cpu_row: dict[int, int],
    task_row: dict[str, int],
    end_ms: float,
    axes_px: float,
) -> None:
    """Each wait as a thin hatched bar in its task's colour on its task's rows, labelled with
    what it waited on where the label fits."""
    waits = result.waits[result.waits["start_ms"] < end_ms]
    if waits.empty:
        return
    cpus = _last_cpus(result, waits, home_cpu)
    px_per_ms = axes_px / end_ms if end_ms > 0 else 0.0
    # One bar collection per (row, task), in first-wait order.
    spans: dict[tuple[int, str], list[tuple[float, float]]] = {}
    rows_ends = zip(waits["task"], waits["resource"], waits["start_ms"], waits["end_ms"].clip(upper=end_ms))
    for (task, resource, start, end), cpu in zip(rows_ends, cpus):
        name = str(task)
        width = float(end) - float(start)
        label = literal_text(str(resource))
        fits = width * px_per_ms >= (len(label) + 2) * _LABEL_CHAR_PX
        for row in [cpu_row[cpu]] + ([task_row[name]] if name in task_row else []):
            spans.setdefault((row, name), []).append((float(start), width))
            if fits:
                ax.text(
                    float(start) + width / 2,
                    row + _WAIT_Y + _WAIT_HEIGHT / 2,
                    label,
                    fontsize=6,
                    ha="center",
                    va="center",
                    zorder=2.6,
                    bbox={"facecolor": "white", "edgecolor": "none", "pad": 0.4},
                )
    for (row, name), bars in spans.items():
        ax.broken_barh(
            bars,
            (row + _WAIT_Y, _WAIT_HEIGHT),
            facecolors="none",
            edgecolor=colour[name],
            hatch=WAIT_HATCH,
            linewidth=0.8,
            zorder=2.5,
        )
