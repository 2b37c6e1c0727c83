"""Memory timeline of a run: resident pages per reservation and per task, and the physical
memory set aside for reservations, over time (from `RunResult.memory_timeline`)."""

from __future__ import annotations

import os
from pathlib import Path

import matplotlib
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from critmem.api import RunResult
from critmem.gantt import literal_text

MIB = 1_048_576


def plot_memory(result: RunResult, path: str | os.PathLike[str]) -> Path:
    """Writes the memory timeline as a PNG to `path` (byte-identical for identical results).

    Top: pages each reservation accounts and each task's resident set, in MB. Bottom: the
    physical memory set aside for reservations (the shared-page paper's "total physical
    memory usage") and the frames in use machine-wide. Raises ValueError for a run without
    `[memory]`.
    """
    memory = result.memory
    tl = result.memory_timeline
    if memory is None or tl.empty:
        raise ValueError("the scenario has no [memory] section: there is no memory timeline to plot")
    page_mb = float(memory["page_bytes"]) / MIB
    t_s = tl["time_ms"] / 1000.0
    reservations = [c for c in tl.columns if str(c).startswith("reservation_pages:")]
    residents = [c for c in tl.columns if str(c).startswith("resident_pages:")]

    fig = Figure(figsize=(11, 6.2), dpi=100)
    FigureCanvasAgg(fig)
    top = fig.add_subplot(2, 1, 1)
    bottom = fig.add_subplot(2, 1, 2, sharex=top)
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
    top.set_title("pages accounted per reservation (solid) and resident per task (dashed)", fontsize="medium")
    top.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small", frameon=False)
    top.grid(linewidth=0.3, alpha=0.5)
    top.set_ylim(bottom=0)

    bottom.step(t_s, tl["reserved_physical_mb"], where="post", linewidth=1.4, color="black", label="reserved physical memory")
    bottom.step(t_s, tl["used_mb"], where="post", linewidth=0.9, linestyle="--", color="grey", label="frames in use")
    bottom.set_ylabel("MB")
    bottom.set_xlabel("time (s)")
    bottom.set_title(
        f"physical memory set aside for reservations (end: {memory['reserved_physical_mb']:g} MB) and in use",
        fontsize="medium",
    )
    bottom.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small", frameon=False)
    bottom.grid(linewidth=0.3, alpha=0.5)
    bottom.set_ylim(bottom=0)
    bottom.set_xlim(0, result.horizon_ms / 1000.0)
    fig.suptitle(literal_text(f"{result.scenario} — memory, swap {memory['swap']}, seed {result.seed}"), fontsize="medium")
    fig.subplots_adjust(hspace=0.35)

    out = Path(path)
    # No "Software" (version) entry: the PNG depends only on the result.
    fig.savefig(out, format="png", bbox_inches="tight", metadata={"Software": None})
    return out
