"""What the reproductions' reports share: numbers and tables in Markdown, and figures saved as
PNG bytes that depend only on the results."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def fmt(x: Any, digits: int = 3) -> str:
    """A table cell: None as "–", a float to `digits` places, anything else as text."""
    if x is None:
        return "–"
    if isinstance(x, float):
        return f"{x:.{digits}f}"
    return str(x)


def table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A Markdown table; cells that are not text go through `fmt`."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(fmt(c) if not isinstance(c, str) else c for c in row) + " |" for row in rows]
    return "\n".join(lines)


def save_png(fig: Figure, path: Path) -> Path:
    """Writes `fig` to `path` as PNG with no "Software" entry (matplotlib's version)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(fig)
    fig.savefig(path, format="png", metadata={"Software": None})
    return path


def report_start(title: str, quick: bool, quick_note: str) -> list[str]:
    """A report's first paragraphs: `title` as its heading and, for a `--quick` run,
    `quick_note` on what it reduced."""
    out = [f"# {title}\n"]
    if quick:
        out.append(f"**Quick run** (`--quick`): {quick_note}\n")
    return out
