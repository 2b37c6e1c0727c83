"""Same scenario and seed → byte-identical output; another seed changes random demands."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import QUICKSTART, RM_TEXTBOOK, cli

OUTPUT_FILES = ["jobs.csv", "segments.csv", "summary.json", "gantt.png"]


@pytest.mark.parametrize("seed", [None, "0", "12345", str(2**64 - 1)])
def test_same_seed_gives_byte_identical_json(seed: str | None) -> None:
    print(f"seed={seed or 'from the file (42)'}")
    argv = ["run", str(QUICKSTART), "--json", *(["--seed", seed] if seed else [])]
    first, second = cli(*argv), cli(*argv)
    assert first.code == second.code == 0
    assert first.stdout.encode() == second.stdout.encode()


def test_same_seed_gives_byte_identical_files(tmp_path: Path) -> None:
    seed = "2024"
    print(f"seed={seed}")
    a, b = tmp_path / "a", tmp_path / "b"
    for out in (a, b):
        assert cli("run", str(QUICKSTART), "--seed", seed, "--out", str(out)).code == 0
    for name in OUTPUT_FILES:
        assert (a / name).read_bytes() == (b / name).read_bytes(), name


def test_a_different_seed_changes_random_demands(tmp_path: Path) -> None:
    seeds = ["1", "2"]
    print(f"seeds={seeds}")
    outs = [tmp_path / s for s in seeds]
    summaries = []
    for seed, out in zip(seeds, outs):
        o = cli("run", str(QUICKSTART), "--seed", seed, "--json", "--out", str(out))
        assert o.code == 0
        summaries.append(json.loads(o.stdout))
    assert [s["seed"] for s in summaries] == [1, 2]
    # Not just the seed field: the per-task results and the traces differ.
    assert summaries[0]["tasks"] != summaries[1]["tasks"]
    assert (outs[0] / "jobs.csv").read_bytes() != (outs[1] / "jobs.csv").read_bytes()


def test_seed_does_not_matter_when_nothing_is_random() -> None:
    seeds = ["1", "99"]
    print(f"seeds={seeds}")
    tasks = [json.loads(cli("run", str(RM_TEXTBOOK), "--seed", s, "--json").stdout)["tasks"] for s in seeds]
    assert tasks[0] == tasks[1]
