"""critmem: predictable memory management for mixed-criticality real-time systems.

`run` simulates a scenario deterministically; `analyze` runs the schedulability analyses.
A scenario is a path to a .toml/.json file, TOML text, or a dict with the same structure.

    >>> import critmem
    >>> result = critmem.run("examples/rm-textbook.toml")
    >>> result.tasks[["name", "max_response_ms"]]
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

# Before numpy is first imported: OpenBLAS's worker threads spin-wait after each call and take
# CPU from the simulations running in threads (the sweeps); critmem's arrays are too small to
# gain from them. An explicit setting is kept.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from critmem._core import ScenarioError, __version__

if TYPE_CHECKING:
    from critmem._source import ScenarioInput
    from critmem.api import AnalysisResult, RunResult, analyze, run

# Loaded on first use, so `critmem.jobclient` in a real-time workload does not pull in pandas.
_LAZY = {
    "ScenarioInput": "critmem._source",
    "AnalysisResult": "critmem.api",
    "RunResult": "critmem.api",
    "analyze": "critmem.api",
    "run": "critmem.api",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'critmem' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__all__ = [
    "AnalysisResult",
    "RunResult",
    "ScenarioError",
    "ScenarioInput",
    "__version__",
    "analyze",
    "run",
]
