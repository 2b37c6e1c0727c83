"""A reproduction's acceptance checks: each criterion its report states, what it expects, what
the run measured and whether it holds. `critmem reproduce PAPER --check` exits 1 when one does
not hold."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["Check", "failed"]


@dataclass(frozen=True)
class Check:
    name: str
    """What is checked, in a few words."""
    expected: str
    """The criterion: a threshold, or the paper's number."""
    measured: str
    """This run's value, as the report shows it."""
    passed: bool


def failed(checks: Sequence[Check]) -> list[Check]:
    """The checks that do not hold, in order."""
    return [c for c in checks if not c.passed]
