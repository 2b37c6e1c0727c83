"""critmem: predictable memory management for mixed-criticality real-time systems.

`run` simulates a scenario deterministically; `analyze` runs the schedulability analyses.
A scenario is a path to a .toml/.json file, TOML text, or a dict with the same structure.

    >>> import critmem
    >>> result = critmem.run("examples/rm-textbook.toml")
    >>> result.tasks[["name", "max_response_ms"]]
"""

from critmem._core import ScenarioError, __version__
from critmem._source import ScenarioInput
from critmem.api import AnalysisResult, RunResult, analyze, run

__all__ = [
    "AnalysisResult",
    "RunResult",
    "ScenarioError",
    "ScenarioInput",
    "__version__",
    "analyze",
    "run",
]
