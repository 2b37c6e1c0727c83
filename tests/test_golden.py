"""The bundled examples and the quick reproductions give exactly the checked-in outputs.

A difference is a change of behaviour: if it is meant, regenerate the files with
`.venv/bin/python tests/golden_outputs.py --update` and review the diff.
"""

from __future__ import annotations

import difflib

import pytest
from conftest import assert_matches_output_schema, assert_output_schema_rejects_mangling
from golden_outputs import GOLDEN, PRINTED, REPRODUCTIONS, collect, example_names, golden_name, sweep_spec_names

_REGENERATE = "if the change is meant: .venv/bin/python tests/golden_outputs.py --update"


@pytest.fixture(scope="module")
def fresh() -> dict[str, str]:
    return collect()


def _expected_names() -> list[str]:
    names = [golden_name(n) for n in example_names()] + ["run-out-sha256.json"] + [f"sweep-{n}.csv" for n in sweep_spec_names()]
    return names + [f"reproduce-{p}.json" for p in REPRODUCTIONS]


@pytest.mark.parametrize("name", _expected_names())
def test_output_matches_its_golden_file(fresh: dict[str, str], name: str) -> None:
    path = GOLDEN / name
    assert path.exists(), f"{path} is missing; {_REGENERATE}"
    expected = path.read_text(encoding="utf-8")
    if fresh[name] != expected:
        diff = "".join(difflib.unified_diff(expected.splitlines(True), fresh[name].splitlines(True), "golden", "fresh", n=1))
        pytest.fail(f"{name} differs from its golden file; {_REGENERATE}\n{diff[:4000]}")


def test_no_stale_golden_files() -> None:
    assert sorted(p.name for p in GOLDEN.iterdir()) == sorted(_expected_names())


@pytest.mark.parametrize("paper", REPRODUCTIONS)
def test_reproduction_json_matches_its_output_schema(fresh: dict[str, str], paper: str) -> None:
    # `fresh` ran it; its output as printed, volatile fields and all.
    assert_matches_output_schema(f"reproduce-{paper}", PRINTED[paper])
    assert_output_schema_rejects_mangling(f"reproduce-{paper}", PRINTED[paper])
