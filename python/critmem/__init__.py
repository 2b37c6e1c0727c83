"""critmem: predictable memory management for mixed-criticality real-time systems.

`run` simulates a scenario deterministically; `analyze` runs the schedulability analyses;
`controllers` lists the memory controllers a scenario's `[control]` can name, `schedulers` the
scheduler kinds its `[scheduler]` can name, `memory_schedulers` the policies its `[tmem]` can
name (`Scheduler` and `MemoryScheduler` are the base classes of ones written in Python); `output_schema(name)` gives the JSON Schema of a
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
    from critmem.memory_scheduler import MemoryScheduler, SetDesired, TmemObservation
    from critmem.output_schemas import output_schema, output_schema_names
    from critmem.plugins import PluginError
    from critmem.scheduler import Inherited, Job, Scheduler, Task

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
    "Scheduler": "critmem.scheduler",
    "Task": "critmem.scheduler",
    "Job": "critmem.scheduler",
    "Inherited": "critmem.scheduler",
    "MemoryScheduler": "critmem.memory_scheduler",
    "TmemObservation": "critmem.memory_scheduler",
    "SetDesired": "critmem.memory_scheduler",
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
    texts list them (the scenario loader's own list, `critmem_core::SchedulerKind`), then the
    Python schedulers installed packages register under the `critmem.schedulers` entry point
    group, by name. A scenario may also name any Python class as `"file.py:Class"`."""
    from critmem.plugins import entry_points

    builtin = tuple(SchedulerInfo(name, summary) for name, summary in _core.schedulers())
    installed = sorted(entry_points("schedulers").items())
    return builtin + tuple(SchedulerInfo(name, f"Python scheduler {ep.value} (installed)") for name, ep in installed)


class MemorySchedulerInfo(NamedTuple):
    """One transient-memory scheduler as users name it."""

    name: str
    """The name a scenario's `[tmem] policy` uses."""
    summary: str
    """One line for help texts and listings."""


def memory_schedulers() -> tuple[MemorySchedulerInfo, ...]:
    """Every `[tmem] policy` a scenario can name: the built-in memory schedulers
    (`critmem_policy::tmem::MEMORY_SCHEDULERS`) in the order help texts list them, then the
    Python ones installed packages register under `critmem.memory_schedulers`, by name."""
    from critmem.plugins import entry_points

    builtin = tuple(MemorySchedulerInfo(name, summary) for name, summary in _core.memory_schedulers())
    installed = sorted(entry_points("memory_schedulers").items())
    return builtin + tuple(MemorySchedulerInfo(name, f"Python memory scheduler {ep.value} (installed)") for name, ep in installed)


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
    "Inherited",
    "Job",
    "MemoryScheduler",
    "MemorySchedulerInfo",
    "PluginError",
    "RunResult",
    "ScenarioError",
    "ScenarioInput",
    "ScenarioWarning",
    "Scheduler",
    "SchedulerInfo",
    "SetDesired",
    "Task",
    "TmemObservation",
    "__version__",
    "analyze",
    "controllers",
    "memory_schedulers",
    "output_schema",
    "output_schema_names",
    "run",
    "schedulers",
]
