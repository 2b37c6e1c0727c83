"""critmem: predictable memory management for mixed-criticality real-time systems.

`run` simulates a scenario deterministically; `analyze` runs the schedulability analyses;
`controllers` lists the memory controllers a scenario's `[control]` can name, `schedulers` the
scheduler kinds its `[scheduler]` can name; `output_schema(name)` gives the JSON Schema of a
`--json` output. A scenario is a path to a .toml/.json file, TOML text, or a dict with the
same structure. Studies of many runs map a function over work items with `critmem.sweep` (local
processes or a Dask cluster), or run a spec file of keys to vary (`critmem.sweep.run_spec`).

    >>> import critmem
    >>> result = critmem.run("examples/rm-textbook.toml")
    >>> result.tasks[["name", "max_response_ms"]]
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, NamedTuple

# Before numpy is first imported: OpenBLAS's worker threads spin-wait after each call and take
# CPU from the simulations running in threads (the sweeps); critmem's arrays are too small to
# gain from them. An explicit setting is kept.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from critmem import _core
from critmem._core import ScenarioError, __version__

if TYPE_CHECKING:
    from critmem._source import ScenarioInput
    from critmem.api import AnalysisResult, RunResult, ScenarioWarning, analyze, run
    from critmem.controller import Controller
    from critmem.output_schemas import output_schema, output_schema_names
    from critmem.plugins import PluginError

# Loaded on first use, so `critmem.jobclient` in a real-time workload does not pull in pandas.
_LAZY = {
    "ScenarioInput": "critmem._source",
    "Controller": "critmem.controller",
    "PluginError": "critmem.plugins",
    "AnalysisResult": "critmem.api",
    "RunResult": "critmem.api",
    "ScenarioWarning": "critmem.api",
    "analyze": "critmem.api",
    "run": "critmem.api",
    "output_schema": "critmem.output_schemas",
    "output_schema_names": "critmem.output_schemas",
}


class ControllerInfo(NamedTuple):
    """One memory controller as users name it."""

    name: str
    """The name a scenario's `[control] controller`, the agent's config and `--controller` use."""
    summary: str
    """One line for help texts and listings."""


def controllers() -> tuple[ControllerInfo, ...]:
    """Every controller a scenario's `[control]` can name: critmem's own
    (`critmem_policy::CONTROLLERS`, in the order help texts list them), then those installed
    packages register under the `critmem.controllers` entry point group, by name. A Python
    class is named directly too (`"file.py:Class"`, `"package.module:Class"`)."""
    from critmem.plugins import entry_points

    builtin = tuple(ControllerInfo(name, summary) for name, summary in _core.controllers())
    installed = sorted(entry_points("controllers").items())
    return builtin + tuple(ControllerInfo(name, f"Python class {ep.value}") for name, ep in installed if name not in dict(builtin))


class SchedulerInfo(NamedTuple):
    """One scheduler kind as users name it."""

    name: str
    """The name a scenario's `[scheduler] kind` and `critmem generate --scheduler` use."""
    summary: str
    """One line for help texts and listings."""


def schedulers() -> tuple[SchedulerInfo, ...]:
    """The scheduler registry: every `[scheduler] kind` a scenario can name, in the order help
    texts list them (the scenario loader's own list, `critmem_core::SchedulerKind`)."""
    return tuple(SchedulerInfo(name, summary) for name, summary in _core.schedulers())


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
    "Controller",
    "ControllerInfo",
    "PluginError",
    "RunResult",
    "ScenarioError",
    "ScenarioInput",
    "ScenarioWarning",
    "SchedulerInfo",
    "__version__",
    "analyze",
    "controllers",
    "output_schema",
    "output_schema_names",
    "run",
    "schedulers",
]
