"""Memory timeline of a run: each controlled group's usage and limit (from
`RunResult.control_timeline`), resident pages per reservation and per task, and the physical
memory set aside for reservations, over time (from `RunResult.memory_timeline`)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import matplotlib
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from critmem.api import RunResult
from critmem.gantt import literal_text

MIB = 1_048_576


def plot_memory(result: RunResult, path: str | os.PathLike[str]) -> Path:
    """Writes `memory_figure(result)` as a PNG to `path` (byte-identical for identical results).
    Raises ValueError for a run without `[memory]`."""
    fig = memory_figure(result)
    out = Path(path)
    # No "Software" (version) entry: the PNG depends only on the result.
    fig.savefig(out, format="png", bbox_inches="tight", metadata={"Software": None})
    return out


def memory_figure(result: RunResult) -> Figure:
    """The memory timeline as a figure, one panel above the other:

    - with `[control]`: each group's usage (solid) and the memory.max limit its controller
      set (dashed step, same colour), in MB — SARA's Fig. 12 view;
    - pages each reservation accounts (solid) and each task's resident set (dashed), in MB;
    - the physical memory set aside for reservations (the shared-page paper's "total
      physical memory usage", drawn only when the scenario declares reservations) and the
      frames in use machine-wide.

    Raises ValueError for a run without `[memory]`.
    """
    memory = result.memory
    tl = result.memory_timeline
    if memory is None or tl.empty:
        raise ValueError("the scenario has no [memory] section: there is no memory timeline to plot")
    page_mb = float(memory["page_bytes"]) / MIB
    t_s = tl["time_ms"] / 1000.0
    reservations = [c for c in tl.columns if str(c).startswith("reservation_pages:")]
    residents = [c for c in tl.columns if str(c).startswith("resident_pages:")]
    control = result.summary.get("control")
    groups = [str(g["name"]) for g in control["groups"]] if control is not None and not result.control_timeline.empty else []

    panels = 2 + (1 if groups else 0)
    fig = Figure(figsize=(11, 6.2 if panels == 2 else 9.3), dpi=100)
    FigureCanvasAgg(fig)
    axes = [fig.add_subplot(panels, 1, 1)]
    axes += [fig.add_subplot(panels, 1, k, sharex=axes[0]) for k in range(2, panels + 1)]
    if groups:
        assert control is not None
        _draw_group_limits(axes[0], result, groups, control)
    top, bottom = axes[-2], axes[-1]
    cmap = matplotlib.colormaps["tab10" if len(reservations) + len(residents) <= 10 else "tab20"]
    i = 0
    for c in reservations:
        top.step(
            t_s,
            tl[c] * page_mb,
            where="post",
            linewidth=1.4,
            color=cmap(i % cmap.N),
            label=literal_text(f"reservation {str(c).split(':', 1)[1]}"),
        )
        i += 1
    for c in residents:
        top.step(
            t_s,
            tl[c] * page_mb,
            where="post",
            linewidth=0.9,
            linestyle="--",
            color=cmap(i % cmap.N),
            label=literal_text(f"resident {str(c).split(':', 1)[1]}"),
        )
        i += 1
    top.set_ylabel("MB")
    if reservations:
        top.set_title("pages accounted per reservation (solid) and resident per task (dashed)", fontsize="medium")
    else:
        top.set_title("pages resident per task", fontsize="medium")
    top.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small", frameon=False)
    top.grid(linewidth=0.3, alpha=0.5)
    top.set_ylim(bottom=0)

    if reservations:
        bottom.step(t_s, tl["reserved_physical_mb"], where="post", linewidth=1.4, color="black", label="reserved physical memory")
    bottom.step(t_s, tl["used_mb"], where="post", linewidth=0.9, linestyle="--", color="grey", label="frames in use")
    bottom.set_ylabel("MB")
    bottom.set_xlabel("time (s)")
    if reservations:
        bottom.set_title(
            f"physical memory set aside for reservations (end: {memory['reserved_physical_mb']:g} MB) and in use",
            fontsize="medium",
        )
    else:
        bottom.set_title(f"frames in use machine-wide (of {memory['total_frames'] * page_mb:g} MB)", fontsize="medium")
    bottom.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small", frameon=False)
    bottom.grid(linewidth=0.3, alpha=0.5)
    bottom.set_ylim(bottom=0)
    bottom.set_xlim(0, result.horizon_ms / 1000.0)
    fig.suptitle(literal_text(f"{result.scenario} — memory, swap {memory['swap']}, seed {result.seed}"), fontsize="medium")
    fig.subplots_adjust(hspace=0.35)
    return fig


def _draw_group_limits(ax: Axes, result: RunResult, groups: list[str], control: dict[str, Any]) -> None:
    """Per group: usage as a line, memory.max as a dashed step line of the same colour (gaps
    where the group is unlimited) and, where it is ever set, memory.high as a dotted one."""
    ct = result.control_timeline
    t_s = ct["time_ms"] / 1000.0
    cmap = matplotlib.colormaps["tab10" if len(groups) <= 10 else "tab20"]
    for i, name in enumerate(groups):
        colour = cmap(i % cmap.N)
        ax.plot(t_s, ct[f"usage_mb:{name}"], linewidth=0.9, alpha=0.8, color=colour, label=literal_text(f"{name} usage"))
        ax.step(
            t_s,
            ct[f"max_mb:{name}"],
            where="post",
            linewidth=1.2,
            linestyle="--",
            color=colour,
            label=literal_text(f"{name} limit"),
        )
        high = ct[f"high_mb:{name}"]
        if high.notna().any():
            ax.step(t_s, high, where="post", linewidth=1.2, linestyle=":", color=colour, label=literal_text(f"{name} high"))
    every = result.control_timeline_every_ticks
    sampled = "" if every == 1 else f", one tick in {every} drawn"
    ax.set_ylabel("MB")
    ax.set_title(
        literal_text(
            f"memory per group: usage (solid) and limit memory.max (dashed), {control['controller']} every {control['interval_ms']:g} ms{sampled}"
        ),
        fontsize="medium",
    )
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small", frameon=False)
    ax.grid(linewidth=0.3, alpha=0.5)
    ax.set_ylim(bottom=0)
