"""Shared helpers: run the CLI in-process or as the installed console script, what the
real-machine tests need to know about this machine, and checks of outputs against their schemas."""

from __future__ import annotations

import contextlib
import copy
import io
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from critmem.cli import main

# pytest-xdist's workers set COLUMNS (80): the CLI would take it as a width asked for and wrap
# its lines. Tests see the CLI as a pipe sees it unless they ask for a width themselves.
os.environ.pop("COLUMNS", None)
os.environ.pop("LINES", None)

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
EXAMPLE_FILES = sorted(EXAMPLES.glob("*.toml"))
# The sweep specs over the examples (`critmem sweep`).
SWEEP_SPECS = sorted(EXAMPLES.glob("sweep/*.toml"))
# Scenarios of the Python policy examples, a folder each with the .py files they name.
POLICY_EXAMPLES = sorted(EXAMPLES.glob("python-*/*.toml"))
POLICY_PY_FILES = sorted(EXAMPLES.glob("python-*/*.py"))
# The console script installed next to the interpreter running the tests.
CRITMEM = Path(sys.executable).parent / "critmem"

RM_TEXTBOOK = EXAMPLES / "rm-textbook.toml"
QUICKSTART = EXAMPLES / "quickstart.toml"
# A plain mixed-criticality scenario: global EDF, no memory model, no controller, no servers.
GEDF_MIXED = EXAMPLES / "gedf-mixed.toml"

CGROUP_ROOTS = (Path("/sys/fs/cgroup"), Path("/sys/fs/cgroup/memory"), Path("/sys/fs/cgroup/unified"))

# Modules that run real processes under cgroups, swap or wall-clock timing: they measure the
# machine, so scripts/test.sh runs them on their own after the rest has run on every core.
SERIAL_MODULES = frozenset(
    {
        "test_apps.py",
        "test_hires_cli.py",
        "test_hires_depth.py",
        "test_linux_cli.py",
        "test_profile.py",
        "test_python_controllers_linux.py",
        "test_reproduce_hires.py",
        "test_reproduce_sara_linux.py",
    }
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.name in SERIAL_MODULES:
            item.add_marker(pytest.mark.serial)


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


def _time_scale() -> float:
    text = os.environ.get("CRITMEM_TIME_SCALE", "1")
    try:
        scale = float(text)
    except ValueError:
        scale = float("nan")
    if not scale >= 1 or scale == float("inf"):
        raise pytest.UsageError(f"CRITMEM_TIME_SCALE must be a number of at least 1, not {text!r}")
    return scale


# How many times slower this machine runs code than the ones the tests' timings were chosen on:
# scripts/v2-guest-suite.sh measures it in its emulated guest; 1 elsewhere. Tests that wait
# for real processes stretch their waits and durations by it.
TIME_SCALE = _time_scale()


def active_swaps() -> list[str]:
    """The swap areas that are on: each one's file, type, size and priority (not how much of it
    is in use, which moves with the machine's memory)."""
    areas = []
    for line in Path("/proc/swaps").read_text().splitlines()[1:]:
        fields = line.split()
        areas.append(" ".join(fields[:3] + fields[4:]))
    return areas


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


@pytest.fixture(scope="module")
def dask_cluster() -> Iterator[str]:
    """The address of a Dask LocalCluster of two one-thread worker processes."""
    distributed = pytest.importorskip("distributed")
    # The dashboard on a free port: clusters of tests running side by side (xdist) would
    # otherwise all ask for 8787.
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0") as cluster:
        yield str(cluster.scheduler_address)


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


def assert_matches_output_schema(name: str, data: Any) -> None:
    """`data` is valid against critmem's output schema `name` (`critmem schema --output NAME`)."""
    from critmem import output_schema
    from jsonschema import Draft202012Validator

    errors = sorted(Draft202012Validator(output_schema(name)).iter_errors(data), key=lambda e: list(e.absolute_path))
    described = [f"at {'/'.join(map(str, e.absolute_path)) or '(top)'}: {e.message[:300]}" for e in errors[:10]]
    assert not errors, f"{len(errors)} violations of the {name} schema:\n" + "\n".join(described)


_JUNK: dict[str, list[Any]] = {"__unexpected__": []}


def _first_items(data: Any) -> Any:
    """`data` with every array cut to its first two items (a pair stays whole): each kind of
    node to mangle, without mangling every row."""
    if isinstance(data, dict):
        return {k: _first_items(v) for k, v in data.items()}
    if isinstance(data, list):
        return [_first_items(v) for v in data[:2]]
    return data


def _paths(data: Any, at: tuple[str | int, ...] = ()) -> list[tuple[str | int, ...]]:
    out = [at]
    if isinstance(data, dict):
        for k, v in data.items():
            out += _paths(v, (*at, k))
    elif isinstance(data, list):
        for i, v in enumerate(data):
            out += _paths(v, (*at, i))
    return out


def _mangled(data: Any, path: tuple[str | int, ...]) -> Any:
    """`data` with the node at `path` changed the way no schema node should accept: an object
    gains an unknown key, an array an object item, a scalar becomes an object."""
    root = copy.deepcopy(data)
    if not path:
        root["__unexpected__"] = _JUNK
        return root
    parent = root
    for step in path[:-1]:
        parent = parent[step]
    node = parent[path[-1]]
    if isinstance(node, dict):
        node["__unexpected__"] = _JUNK
    elif isinstance(node, list):
        node.append(_JUNK)
    else:
        parent[path[-1]] = _JUNK
    return root


def assert_output_schema_rejects_mangling(name: str, data: Any) -> None:
    """Every node of the output schema `name` constrains what `data` holds there: changing any
    one node of `data` (arrays cut to their first two items) makes it invalid."""
    from critmem import output_schema
    from jsonschema import Draft202012Validator

    validator = Draft202012Validator(output_schema(name))
    sample = _first_items(data)
    assert validator.is_valid(sample), f"{name}: the sample itself is invalid"
    accepted = [p for p in _paths(sample) if validator.is_valid(_mangled(sample, p))]
    assert not accepted, f"{name} accepts junk at: {['/'.join(map(str, p)) or '(top)' for p in accepted[:10]]}"


class InProcess:
    """An executor that runs the items here, one after another (for checks of the sweep itself)."""

    def run(self, fn: Any, items: Any, keys: Any) -> Iterator[tuple[int, Any]]:
        for i, item in enumerate(items):
            yield i, fn(item)

    def close(self) -> None:
        pass
