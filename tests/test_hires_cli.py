"""`critmem hires`: a reservation tree as nested cgroups on the real machine, and its bad input."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import CRITMEM

BIN = Path(sys.executable).parent
HIRES = BIN / "critmem-hires"

needs_root = pytest.mark.skipif(
    os.geteuid() != 0 or not HIRES.is_file(),
    reason="real Linux: needs root and the Linux binaries in .venv/bin (scripts/setup.sh)",
)


def _run(*argv: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(CRITMEM), *argv], capture_output=True, text=True, timeout=timeout, check=False)


def _tree(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "tree.toml"
    path.write_text(f"[root]\ncpus = 1\nmemory_mib = 256\n{body}")
    return path


RT = f"""
[[subsystem]]
name = "rt"
reserve = [{{ family = "cpu", kind = "hard", budget_ms = 3, period_ms = 10 }}]
command = ["{HIRES}", "burn"]
"""


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["hires", "apply"], "hires apply needs TREE"),
        (["hires", "apply", "/nonexistent/tree.toml"], "no such tree file"),
        (["hires", "teardown", "tree.toml"], "hires teardown takes no TREE"),
        (["hires", "teardown", "--json"], "takes no --json"),
        (["hires", "apply", "tree.toml", "--duration", "soon"], "soon"),
        (["hires", "stop"], "invalid choice"),
    ],
)
def test_bad_hires_command_lines_are_one_line_errors(argv: list[str], needle: str, tmp_path: Path) -> None:
    (tmp_path / "tree.toml").write_text("[root]\ncpus = 1\nmemory_mib = 1\n")
    done = subprocess.run([str(CRITMEM), *argv], capture_output=True, text=True, timeout=60, check=False, cwd=tmp_path)
    assert done.returncode == 2, done
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], done.stderr


@needs_root
def test_a_tree_runs_its_command_at_its_reserved_share_and_is_removed(tmp_path: Path) -> None:
    name = f"critmem-test-hires-cli-{os.getpid()}"
    done = _run("hires", "apply", str(_tree(tmp_path, RT)), "--duration", "3s", "--json", "--name", name)
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    (rt,) = summary["subsystems"]
    assert rt["name"] == "rt" and rt["processes"] == 1
    assert abs(rt["cpu_share_measured"] - 0.3) <= 0.05, rt
    assert summary["timeline"] and set(summary["timeline"][-1]["shares"]) == {"rt"}
    assert not any(Path("/sys/fs/cgroup", h, name).exists() for h in ("cpu", "cpuacct", "memory", ""))


@needs_root
def test_a_tree_that_does_not_admit_is_refused_before_anything_changes(tmp_path: Path) -> None:
    tree = _tree(tmp_path, RT + RT.replace('"rt"', '"rt2"').replace("budget_ms = 3", "budget_ms = 8"))
    done = _run("hires", "apply", str(tree), "--name", f"critmem-test-hires-cli-bad-{os.getpid()}")
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "does not fit in root" in done.stderr, done.stderr


@needs_root
def test_a_command_after_dashes_runs_in_the_named_subsystem(tmp_path: Path) -> None:
    tree = _tree(tmp_path, RT + RT.replace('"rt"', '"batch"').replace("budget_ms = 3", "budget_ms = 2"))
    name = f"critmem-test-hires-cli-cmd-{os.getpid()}"
    done = _run(
        "hires",
        "apply",
        str(tree),
        "--in",
        "batch",
        "--json",
        "--name",
        name,
        "--duration",
        "2s",
        "--",
        "sh",
        "-c",
        "cat /proc/self/cgroup",
    )
    assert done.returncode == 0, done.stderr
    rows = {row["name"]: row for row in json.loads(done.stdout)["subsystems"]}
    assert rows["batch"]["processes"] == 2 and rows["rt"]["processes"] == 1
