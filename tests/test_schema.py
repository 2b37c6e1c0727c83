"""The JSON Schema of scenario files: generated from the loader's own structures, checked in
at docs/scenario.schema.json (stale is a failure), accepting every bundled example and
rejecting what the loader rejects for a key or a type."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from conftest import EXAMPLE_FILES, ROOT, cli
from critmem import _core
from critmem._core import ScenarioError

SCHEMA_FILE = ROOT / "docs" / "scenario.schema.json"

BASE = """\
[machine]
cpus = 1
[scheduler]
kind = "rm"
[run]
horizon_ms = 20
[[task]]
name = "t1"
wcet_ms = 1
period_ms = 10
"""

MEMORY = """\
[memory]
total_mb = 64
[[reservation]]
name = "r1"
size_mb = 8
"""


@pytest.fixture(scope="module")
def validator() -> jsonschema.protocols.Validator:
    schema: dict[str, Any] = json.loads(_core.scenario_schema())
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


def test_checked_in_schema_is_the_generated_one() -> None:
    """Regenerate with `critmem schema > docs/scenario.schema.json` after changing the loader's keys."""
    assert SCHEMA_FILE.read_text(encoding="utf-8") == _core.scenario_schema(), "docs/scenario.schema.json is stale"


def test_schema_command_prints_it() -> None:
    o = cli("schema")
    assert o.code == 0 and o.stderr == ""
    assert o.stdout == SCHEMA_FILE.read_text(encoding="utf-8")
    schema = json.loads(o.stdout)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["additionalProperties"] is False


def test_choice_keys_list_the_loaders_names() -> None:
    defs = json.loads(_core.scenario_schema())["$defs"]
    # `kind` may also name a Python class (`file.py:Class`), the second alternative.
    kind = defs["Scheduler"]["properties"]["kind"]["anyOf"]
    assert kind[0]["enum"] == ["fp", "rm", "dm", "edf", "pfp", "pedf", "gedf", "gfp", "cyclic", "mc2"]
    assert "pattern" in kind[1]
    # An optional choice key may also be JSON's null, "left out".
    assert defs["Task"]["properties"]["criticality"]["enum"] == ["A", "B", "C", "D", None]


def test_the_base_case_is_valid_for_both(validator: jsonschema.protocols.Validator) -> None:
    for text in (BASE, BASE + MEMORY):
        _core.validate(text, "base.toml", "toml")
        validator.validate(tomllib.loads(text))


@pytest.mark.parametrize("path", EXAMPLE_FILES, ids=[p.stem for p in EXAMPLE_FILES])
def test_every_example_is_valid(validator: jsonschema.protocols.Validator, path: Path) -> None:
    with path.open("rb") as f:
        validator.validate(tomllib.load(f))


# (what is wrong, the scenario text, a fragment of the key the loader names). Every case is
# refused while the file is read, before any rule across keys.
BAD: list[tuple[str, str, str]] = [
    ("unknown top-level table", BASE + "[machines]\ncpus = 2\n", "machines"),
    ("unknown task key", BASE + "wcet = 1\n", "wcet"),
    ("unknown [run] key", BASE.replace("horizon_ms = 20", "horizon = 20"), "horizon"),
    ("cpus as a string", BASE.replace("cpus = 1", 'cpus = "two"'), "machine.cpus"),
    ("period as a string", BASE.replace("period_ms = 10", 'period_ms = "10"'), "period_ms"),
    ("task as a table, not an array", BASE.replace("[[task]]", "[task]"), "task"),
    ("exec as a string", BASE + 'exec = "fixed"\n', "exec"),
    ("seed as a string", BASE.replace("horizon_ms = 20", 'seed = "one"'), "seed"),
    ("unknown scheduler kind", BASE.replace('kind = "rm"', 'kind = "lottery"'), "scheduler.kind"),
    ("unknown priority order", BASE.replace('kind = "rm"', 'kind = "fp"\npriorities = "edf"'), "priorities"),
    ("unknown criticality", BASE + 'criticality = "E"\n', "criticality"),
    ("unknown overrun policy", BASE + 'overrun = "panic"\n', "overrun"),
    ("unknown arrival", BASE + 'arrival = "bursty"\n', "arrival"),
    ("unknown distribution", BASE + 'exec = { dist = "gamma", min_ms = 1, max_ms = 2 }\n', "dist"),
    ("missing for_ms of a suspension", BASE + "[[task.suspend]]\nafter_ms = 0.5\n", "suspend"),
    ("unknown swap device", BASE + MEMORY.replace("total_mb = 64", 'total_mb = 64\nswap = "floppy"'), "swap"),
    ("unknown reservation kind", BASE + MEMORY + 'kind = "soft"\n', "kind"),
    ("unknown region policy", BASE + MEMORY + '[[region]]\nname = "shm"\nsize_mb = 1\npolicy = "lru"\n', "policy"),
    ("unknown access pattern", BASE + 'reservation = "r1"\naccess = [{ pattern = "stride", mb = 1 }]\n' + MEMORY, "pattern"),
    ("unknown group role", BASE + MEMORY + '[[group]]\nname = "g"\nrole = "rt"\n', "role"),
    ("controller as a number", BASE + MEMORY + "[control]\ncontroller = 5\n", "controller"),
    ("unknown resource protocol", BASE + '[[resource]]\nname = "m"\nprotocol = "pcp"\n', "protocol"),
    ("scheduler kind neither built in nor a Python class", BASE.replace('kind = "rm"', 'kind = "edf.py"'), "scheduler.kind"),
    ("unknown server kind", BASE + '[[scheduler.server]]\nname = "s"\nkind = "sporadic"\n', "kind"),
    ("unknown stack wait", BASE + '[[component]]\nname = "c"\nstack_wait = "spin"\n', "stack_wait"),
]


@pytest.mark.parametrize(("what", "text", "key"), BAD, ids=[b[0] for b in BAD])
def test_loader_and_schema_both_refuse(validator: jsonschema.protocols.Validator, what: str, text: str, key: str) -> None:
    with pytest.raises(ScenarioError) as refused:
        _core.validate(text, "bad.toml", "toml")
    assert key in str(refused.value), f"{what}: {refused.value}"
    errors = list(validator.iter_errors(tomllib.loads(text)))
    assert errors, f"{what}: the schema accepts what the loader refuses ({refused.value})"
