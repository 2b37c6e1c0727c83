"""A sweep spec's plots: one PNG per varied key, a panel per metric with the metric against the
key's values, the mean over the seeds as a line and the lowest to the highest as a band. Each
combination of the other axes' values is a line of its own while there are at most
`MAX_LINES`; past that, the line is the mean over them too. The bytes depend only on the
table (no "Software" entry naming matplotlib's version)."""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from critmem.sweep.spec import SweepSpec
from critmem.sweep.table import cell_text

__all__ = ["MAX_LINES", "plot_keys", "plot_name"]

MAX_LINES = 6
"""The most lines a panel draws, one per combination of the other axes' values."""


def plot_name(key: str) -> str:
    """The file name of `key`'s plot."""
    return f"plot-{re.sub(r'[^A-Za-z0-9._-]', '_', key)}.png"


def _number(v: Any) -> float | None:
    return float(v) if isinstance(v, (bool, int, float)) else None


def plot_keys(spec: SweepSpec, rows: Sequence[tuple[Any, ...]], out: Path) -> list[Path]:
    """Writes a plot per varied key to `out` and returns their paths; none when no metric has a
    number (or nothing is varied)."""
    first_metric = len(spec.keys) + 1
    metrics = [(m, first_metric + i) for i, m in enumerate(spec.metrics) if any(_number(row[first_metric + i]) is not None for row in rows)]
    if not metrics:
        return []
    written: list[Path] = []
    taken: set[str] = set()
    for a, axis in enumerate(spec.axes):
        for k, key in enumerate(axis.keys):
            name = plot_name(key)
            stem, n = name[: -len(".png")], 2
            while name in taken:  # two keys that differ only in characters a file name cannot hold
                name, n = f"{stem}-{n}.png", n + 1
            taken.add(name)
            written.append(_plot_key(spec, rows, metrics, a, k, out / name))
    return written


def _plot_key(spec: SweepSpec, rows: Sequence[tuple[Any, ...]], metrics: list[tuple[str, int]], a: int, k: int, path: Path) -> Path:
    axis, key = spec.axes[a], spec.axes[a].keys[k]
    xs_raw = [point[k] for point in axis.values]
    numeric_x = all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in xs_raw)
    # A numeric key is drawn in its values' order, a text one at evenly spaced positions.
    order = sorted(range(len(xs_raw)), key=lambda j: xs_raw[j]) if numeric_x else list(range(len(xs_raw)))
    xs = [float(xs_raw[j]) if numeric_x else float(pos) for pos, j in enumerate(order)]
    others = [b for b in range(len(spec.axes)) if b != a]
    combos = list(itertools.product(*(range(len(spec.axes[b].values)) for b in others)))
    merged = len(combos) > MAX_LINES
    lines: list[tuple[str | None, list[tuple[int, ...]]]] = (
        [(None, combos)] if merged or len(combos) == 1 else [(_combo_label(spec, others, c), [c]) for c in combos]
    )
    lengths = [len(ax.values) for ax in spec.axes]
    seeds = len(spec.seeds)

    def runs_at(j: int, group: list[tuple[int, ...]]) -> list[tuple[Any, ...]]:
        out: list[tuple[Any, ...]] = []
        for c in group:
            index = dict(zip(others, c, strict=True)) | {a: j}
            p = 0
            for b, length in enumerate(lengths):
                p = p * length + index[b]
            out += rows[p * seeds : (p + 1) * seeds]
        return out

    fig = Figure(figsize=(7.0, 1.0 + 2.4 * len(metrics)), layout="constrained")
    FigureCanvasAgg(fig)
    panels: list[Axes] = [fig.add_subplot(len(metrics), 1, i + 1) for i in range(len(metrics))]
    for panel, (metric, col) in zip(panels, metrics, strict=True):
        for n, (label, group) in enumerate(lines):
            mean, low, high = [], [], []
            for j in order:
                ys = [y for row in runs_at(j, group) if (y := _number(row[col])) is not None]
                mean.append(sum(ys) / len(ys) if ys else math.nan)
                low.append(min(ys) if ys else math.nan)
                high.append(max(ys) if ys else math.nan)
            color = f"C{n % 10}"
            panel.plot(xs, mean, marker="o", ms=3.5, lw=1.4, color=color, label=label)
            if low != high:
                panel.fill_between(xs, low, high, color=color, alpha=0.18, lw=0)
        panel.set_title(metric, fontsize=9, loc="left")
        panel.grid(True, alpha=0.3)
        panel.tick_params(labelsize=8)
        if numeric_x and xs[0] > 0 and xs[-1] / xs[0] >= 10:
            # Sizes and rates often grow geometrically (powers of two for memory).
            panel.set_xscale("log", base=2 if all(float(x).is_integer() and int(x) & (int(x) - 1) == 0 for x in xs) else 10)
            panel.minorticks_off()
        if not numeric_x or len(xs) <= 12:
            panel.set_xticks(xs, [cell_text(xs_raw[j]) for j in order])
        if lines[0][0] is not None and panel is panels[0]:
            panel.legend(fontsize=7, loc="best")
    panels[-1].set_xlabel(key, fontsize=9)
    over = f"{seeds} seed{'s' if seeds != 1 else ''}" + (" and the other keys' values" if merged else "")
    fig.suptitle(f"against {key}: mean over {over}, band from lowest to highest", fontsize=9)
    fig.savefig(path, format="png", dpi=110, metadata={"Software": None})
    return path


def _combo_label(spec: SweepSpec, others: list[int], combo: tuple[int, ...]) -> str:
    return ", ".join(
        f"{key}={cell_text(v)}"
        for b, i in zip(others, combo, strict=True)
        for key, v in zip(spec.axes[b].keys, spec.axes[b].values[i], strict=True)
    )
