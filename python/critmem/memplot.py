"""Memory timeline of a run: each controlled group's usage and limit (from
`RunResult.control_timeline`), resident pages per reservation and per task, and the physical
memory set aside for reservations, over time (from `RunResult.memory_timeline`). `plot_memory` writes it as a PNG or draws it
on the caller's matplotlib Axes."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, overload

import matplotlib
import numpy as np
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from critmem.api import RunResult
from critmem.gantt import literal_text

MIB = 1_048_576


# The panels a memory figure can hold, top to bottom; `memory_panels` says which a run has.
PANELS = ("groups", "pages", "machine")


def memory_panels(result: RunResult) -> tuple[str, ...]:
    """The panels `memory_figure(result)` draws, top to bottom: `groups` (with `[control]`:
    each group's usage and limits), `pages` (per reservation and per task) and `machine`
    (machine-wide memory). Raises ValueError for a run without `[memory]`."""
    _check_memory(result)
    return PANELS if _groups(result) else PANELS[1:]


@overload
def plot_memory(result: RunResult, path: str | os.PathLike[str], *, ax: None = None, panel: str | None = None) -> Path: ...
@overload
def plot_memory(result: RunResult, path: None = None, *, ax: Axes, panel: str | None = None) -> Axes: ...
@overload
def plot_memory(result: RunResult, path: None = None, *, ax: Sequence[Axes], panel: None = None) -> Sequence[Axes]: ...
def plot_memory(
    result: RunResult,
    path: str | os.PathLike[str] | None = None,
    *,
    ax: Axes | Sequence[Axes] | None = None,
    panel: str | None = None,
) -> Path | Axes | Sequence[Axes]:
    """The memory timeline of `result`: written to `path` as `memory_figure(result)`, a PNG
    (byte-identical for identical results), or drawn on axes the caller owns and returned.

    `ax=` one Axes draws one panel: `panel` (one of `memory_panels(result)`), by default the
    first the run has (the groups' limits with `[control]`, else the pages per reservation and
    task). `ax=` a sequence of Axes (e.g. from `plt.subplots(len(memory_panels(r)),
    sharex=True)`) draws every panel, one on each, top to bottom. Times are in seconds, memory
    in MB. Raises ValueError for a run without `[memory]`, or for a `panel` or a number of
    Axes that does not match the run's panels.
    """
    if ax is None:
        if path is None:
            raise ValueError("plot_memory needs a path to write to or an ax to draw on")
        if panel is not None:
            raise ValueError("panel chooses what one Axes shows: give it with ax=, not with a path")
        fig = memory_figure(result)
        out = Path(path)
        # No "Software" (version) entry: the PNG depends only on the result.
        fig.savefig(out, format="png", bbox_inches="tight", metadata={"Software": None})
        return out
    panels = memory_panels(result)
    if isinstance(ax, Axes):
        chosen = panels[0] if panel is None else panel
        if chosen not in panels:
            raise ValueError(f"panel: expected one of {', '.join(panels)} for this run (got {chosen!r})")
        _draw_panel(ax, result, chosen)
        _time_axis(ax, result)
        return ax
    if panel is not None:
        raise ValueError("panel chooses what one Axes shows: a sequence of Axes gets every panel")
    axes = list(np.ravel(np.asarray(ax, dtype=object)))
    if len(axes) != len(panels):
        raise ValueError(f"ax: expected {len(panels)} Axes, one per panel ({', '.join(panels)}), got {len(axes)}")
    for one, kind in zip(axes, panels):
        _draw_panel(one, result, kind)
        one.set_xlim(0, result.horizon_ms / 1000.0)
    axes[-1].set_xlabel("time (s)")
    return ax


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
    panels = memory_panels(result)
    memory = _check_memory(result)
    fig = Figure(figsize=(11, 6.2 if len(panels) == 2 else 9.3), dpi=100)
    FigureCanvasAgg(fig)
    axes = [fig.add_subplot(len(panels), 1, 1)]
    axes += [fig.add_subplot(len(panels), 1, k, sharex=axes[0]) for k in range(2, len(panels) + 1)]
    for ax, kind in zip(axes, panels):
        _draw_panel(ax, result, kind)
    _time_axis(axes[-1], result)
    fig.suptitle(literal_text(f"{result.scenario} — memory, swap {memory['swap']}, seed {result.seed}"), fontsize="medium")
    fig.subplots_adjust(hspace=0.35)
    return fig


def _check_memory(result: RunResult) -> dict[str, Any]:
    memory = result.memory
    if memory is None or result.memory_timeline.empty:
        raise ValueError("the scenario has no [memory] section: there is no memory timeline to plot")
    return memory


def _groups(result: RunResult) -> list[str]:
    control = result.summary.get("control")
    return [str(g["name"]) for g in control["groups"]] if control is not None and not result.control_timeline.empty else []


def _time_axis(ax: Axes, result: RunResult) -> None:
    ax.set_xlabel("time (s)")
    ax.set_xlim(0, result.horizon_ms / 1000.0)


def _draw_panel(ax: Axes, result: RunResult, kind: str) -> None:
    if kind == "groups":
        _draw_group_limits(ax, result, _groups(result), result.summary["control"])
    elif kind == "pages":
        _draw_pages(ax, result)
    else:
        _draw_machine(ax, result)


def _series(result: RunResult) -> tuple[list[str], list[str]]:
    """The wide timeline's reservation and resident columns."""
    columns = [str(c) for c in result.memory_timeline.columns]
    return [c for c in columns if c.startswith("reservation_pages:")], [c for c in columns if c.startswith("resident_pages:")]


def _draw_pages(top: Axes, result: RunResult) -> None:
    """Pages each reservation accounts (solid) and each task's resident set (dashed), in MB."""
    memory = _check_memory(result)
    tl = result.memory_timeline
    page_mb = float(memory["page_bytes"]) / MIB
    t_s = tl["time_ms"] / 1000.0
    reservations, residents = _series(result)
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


def _draw_machine(bottom: Axes, result: RunResult) -> None:
    """The physical memory set aside for reservations (with reservations) and the frames in
    use machine-wide, in MB."""
    memory = _check_memory(result)
    tl = result.memory_timeline
    page_mb = float(memory["page_bytes"]) / MIB
    t_s = tl["time_ms"] / 1000.0
    reservations, _ = _series(result)
    if reservations:
        bottom.step(t_s, tl["reserved_physical_mb"], where="post", linewidth=1.4, color="black", label="reserved physical memory")
    bottom.step(t_s, tl["used_mb"], where="post", linewidth=0.9, linestyle="--", color="grey", label="frames in use")
    bottom.set_ylabel("MB")
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
