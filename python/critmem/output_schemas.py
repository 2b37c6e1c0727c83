"""JSON Schemas (draft 2020-12) of what critmem prints with `--json`: `critmem run` on the
simulator and on Linux, `critmem analyze`, each `critmem reproduce PAPER`, `critmem study mc2`
and `critmem sweep`.

They ship as `critmem/schemas/output/NAME.schema.json`, written by scripts/output_schemas.py
from the code that prints each object. A key always printed is required; a section printed only
when the scenario declares what it describes (`memory`, `control`, `servers`, `components`,
`tmem`, `io`) is optional. `critmem schema --output NAME` prints one.

    >>> import critmem
    >>> critmem.output_schema_names()[:2]
    ('analyze', 'linux-run')
    >>> critmem.output_schema("run")["required"][:2]
    ['scenario', 'scheduler']
"""

from __future__ import annotations

import json
from importlib import resources
from importlib.resources.abc import Traversable
from typing import Any

__all__ = ["OUTPUT_SCHEMA_NAMES", "output_schema", "output_schema_names", "schema_command_output"]

OUTPUT_SCHEMA_NAMES = (
    "analyze",
    "linux-run",
    "reproduce-hires",
    "reproduce-mc2",
    "reproduce-sara",
    "reproduce-sara-linux",
    "reproduce-shared-pages",
    "reproduce-tmem",
    "run",
    "study-mc2",
    "sweep",
)
"""Every output schema's name, sorted: what `critmem schema --output` accepts. A constant, so
building the command line reads no files."""

_SUFFIX = ".schema.json"


def _file(name: str) -> Traversable:
    if name not in OUTPUT_SCHEMA_NAMES:
        raise KeyError(f"unknown output schema {name!r}; known: {', '.join(OUTPUT_SCHEMA_NAMES)}")
    return resources.files("critmem") / "schemas" / "output" / f"{name}{_SUFFIX}"


def output_schema_names() -> tuple[str, ...]:
    """The names `output_schema` takes, sorted: `run`, `analyze`, `linux-run`, `reproduce-PAPER`, `study-mc2`, `sweep`."""
    return OUTPUT_SCHEMA_NAMES


def output_schema(name: str) -> dict[str, Any]:
    """The JSON Schema of output `name` (see `output_schema_names()`), a fresh dict each call;
    KeyError naming the known ones for any other name."""
    schema: dict[str, Any] = json.loads(_file(name).read_text(encoding="utf-8"))
    return schema


def schema_command_output(kind: str | None) -> str:
    """What `critmem schema` prints: the scenario schema without `--output`, else the output
    schema `kind` as its file holds it."""
    if kind is None:
        from critmem import _core

        return _core.scenario_schema()
    return _file(kind).read_text(encoding="utf-8")
