"""Shared helpers: run the CLI in-process or as the installed console script, and what the
real-machine tests need to know about this machine."""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from critmem.cli import main

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
EXAMPLE_FILES = sorted(EXAMPLES.glob("*.toml"))
# The console script installed next to the interpreter running the tests.
CRITMEM = Path(sys.executable).parent / "critmem"

RM_TEXTBOOK = EXAMPLES / "rm-textbook.toml"
QUICKSTART = EXAMPLES / "quickstart.toml"
# A plain mixed-criticality scenario: global EDF, no memory model, no controller, no servers.
GEDF_MIXED = EXAMPLES / "gedf-mixed.toml"

CGROUP_ROOTS = (Path("/sys/fs/cgroup"), Path("/sys/fs/cgroup/memory"), Path("/sys/fs/cgroup/unified"))


def linux_machine_reason() -> str | None:
    """Why critmem's real-Linux runs cannot happen on this machine, or None."""
    if os.geteuid() != 0:
        return "not root (cgroups and swap need root)"
    if " cgroup2 " not in Path("/proc/self/mounts").read_text():
        return "no cgroup2 mount (PSI)"
    if not (CRITMEM.parent / "critmem-linux-run").is_file():
        return "the Linux binaries are not installed in .venv/bin (run scripts/setup.sh)"
    return None


def cgroups_named(prefix: str, *extra_roots: Path) -> list[str]:
    """Cgroups (and entries of `extra_roots`) whose names start with `prefix`."""
    found = []
    for root in (*CGROUP_ROOTS, *extra_roots):
        if root.is_dir():
            found += [str(p) for p in root.glob(f"{prefix}*")]
    return found


def active_swaps() -> list[str]:
    """The swap areas that are on, one /proc/swaps line each."""
    return Path("/proc/swaps").read_text().splitlines()[1:]


@dataclass(frozen=True)
class Outcome:
    code: int
    stdout: str
    stderr: str


class StopAfter:
    """Progress that interrupts a sweep (as Ctrl-C would) after `steps` steps."""

    def __init__(self, steps: int) -> None:
        self.left = steps

    def start(self, total: int) -> None:
        pass

    def step(self, description: str) -> None:
        self.left -= 1
        if self.left == 0:
            raise KeyboardInterrupt


def cli(*argv: str) -> Outcome:
    """Runs `critmem argv...` in-process, capturing its output."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return Outcome(code, out.getvalue(), err.getvalue())


def cli_process(*argv: str, cwd: Path = ROOT) -> Outcome:
    """Runs the installed `critmem` console script as a separate process."""
    p = subprocess.run([str(CRITMEM), *argv], cwd=cwd, capture_output=True, text=True, timeout=120, check=False)
    return Outcome(p.returncode, p.stdout, p.stderr)


def assert_one_line_error(o: Outcome, *fragments: str) -> None:
    """Exit 2, nothing on stdout, exactly one `critmem: error:` line on stderr naming `fragments`."""
    assert o.code == 2, o
    assert o.stdout == "", o
    assert "Traceback" not in o.stderr, o.stderr
    lines = o.stderr.splitlines()
    assert len(lines) == 1 and o.stderr.endswith("\n"), o.stderr
    assert lines[0].startswith("critmem: error: "), lines[0]
    for f in fragments:
        assert f in lines[0], f"{f!r} not in {lines[0]!r}"


WriteScenario = Callable[..., Path]


@pytest.fixture
def scenario_file(tmp_path: Path) -> WriteScenario:
    """Writes text or bytes to a scenario file in a temporary folder and returns its path."""

    def write(content: str | bytes, name: str = "scenario.toml") -> Path:
        path = tmp_path / name
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
        return path

    return write
