"""The headline numbers of `critmem reproduce mc2` and `critmem study mc2` beside the paper's, as tables."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from critmem.cli.tables import _fmt, _plural, _table, _text

if TYPE_CHECKING:
    from rich.console import Console


def print_headline(console: Console, summary: dict[str, Any]) -> None:
    """The schemes' schedulable-utilisation areas and their ratios beside the paper's."""
    console.print(_text(f"schedulable-utilisation areas over {_plural(summary['scenarios'], 'scenario')}"))
    console.print(_table(["scheme", "SUA"], [[s, _fmt(v)] for s, v in summary["sua"].items()], left=1))
    rows = [[k, _fmt(summary["ratios"].get(k)), _fmt(v, 2)] for k, v in summary["paper_ratios"].items()]
    console.print(_text("SUA ratios"))
    console.print(_table(["ratio", "model", "paper"], rows, left=1))
