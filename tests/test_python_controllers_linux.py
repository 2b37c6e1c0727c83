"""Memory controllers written in Python on real Linux: the example and the platform
conformance script through the Python bridge under `critmem run --platform linux`, the
agent with a Python controller, and user code failing mid-run (one line, exit code 2,
every limit restored first). They need root and a cgroup layout critmem supports; elsewhere
they skip saying why."""

from __future__ import annotations

import json
import os
import subprocess
import textwrap
from pathlib import Path

import pytest
from conftest import CRITMEM, EXAMPLES, TIME_SCALE, cgroups_named, linux_machine_reason

EXAMPLE = EXAMPLES / "python-controller" / "hold-stall.toml"
pytestmark = pytest.mark.skipif(linux_machine_reason() is not None, reason=f"real Linux: {linux_machine_reason()}")

# Small groups that stay under their floors, so no platform raises a limit to protect them
# (the conformance script's precondition).
SCENARIO = textwrap.dedent(
    """
    [machine]
    cpus = 2
    [scheduler]
    kind = "gedf"
    [run]
    horizon_ms = 1000
    [memory]
    total_mb = 512
    [control]
    {control}
    interval_ms = 5
    [[group]]
    name = "srt"
    role = "soft-rt"
    bcet_ms = 2
    floor_mb = 64
    [[group]]
    name = "batch"
    role = "non-rt"
    floor_mb = 64
    [[task]]
    name = "srt"
    wcet_ms = 2
    period_ms = 20
    group = "srt"
    private_mb = 8
    access = [{{ pattern = "random", refs = 256 }}]
    [[task]]
    name = "nrt"
    wcet_ms = 10
    period_ms = 40
    group = "batch"
    private_mb = 16
    access = [{{ pattern = "random", refs = 256 }}]
    """
)

CONTROLLERS_PY = textwrap.dedent(
    """
    from critmem.controller import Controller, SetMax

    class CapBatch(Controller):
        def __init__(self, cap_mb: int = 100) -> None:
            self.cap_bytes = cap_mb << 20

        def tick(self, observation):
            return [SetMax(i, self.cap_bytes) for i, g in enumerate(observation.groups) if g.role == "non-rt"]

    class Boom(Controller):
        def __init__(self) -> None:
            self.ticks = 0

        def tick(self, observation):
            self.ticks += 1
            if self.ticks > 40:
                raise RuntimeError("lost my marbles")
            return [SetMax(i, 100 << 20) for i, g in enumerate(observation.groups) if g.role == "non-rt"]
    """
)


def _run(*argv: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(CRITMEM), *argv], capture_output=True, text=True, timeout=timeout, check=False)


def _nothing_left() -> None:
    assert not cgroups_named("critmem-run-"), cgroups_named("critmem-run-")


def test_the_example_runs_on_real_processes_and_leaves_nothing_behind() -> None:
    p = _run("run", str(EXAMPLE), "--platform", "linux", "--duration", f"{3 * TIME_SCALE:g}s", "--json", timeout=180 * TIME_SCALE)
    assert p.returncode == 0, p.stderr
    summary = json.loads(p.stdout)
    assert summary["controller"] == "hold_stall.py:HoldStall"
    assert summary["control"]["ticks"] > 100, summary["control"]
    tasks = {t["name"]: t for t in summary["tasks"]}
    assert tasks["control-loop"]["jobs"] >= 50 / TIME_SCALE and tasks["analytics"]["verified_mib_per_s"] > 0
    _nothing_left()


def test_the_conformance_script_passes_through_the_python_bridge_on_real_cgroups(tmp_path: Path) -> None:
    report = tmp_path / "probe.json"
    path = tmp_path / "probe.toml"
    path.write_text(SCENARIO.format(control=f'controller = "critmem.conformance:Probe"\nconfig = {{ report_path = "{report}" }}'))
    p = _run("run", str(path), "--platform", "linux", "--duration", "8s", "--json")
    assert p.returncode == 0, p.stderr
    verdict = json.loads(report.read_text())
    assert verdict["finished"] and not verdict["violations"], verdict
    _nothing_left()


def test_a_python_controller_failing_mid_run_restores_then_stops_with_one_line(tmp_path: Path) -> None:
    (tmp_path / "ctl.py").write_text(CONTROLLERS_PY)
    path = tmp_path / "s.toml"
    path.write_text(SCENARIO.format(control='controller = "ctl.py:Boom"'))
    p = _run("run", str(path), "--platform", "linux", "--duration", "20s")
    assert p.returncode == 2, p.stderr
    lines = p.stderr.strip().splitlines()
    assert lines[-1].startswith("critmem: error: Boom.tick raised RuntimeError: lost my marbles (") and "ctl.py:" in lines[-1], p.stderr
    _nothing_left()
    debug = _run("run", str(path), "--platform", "linux", "--duration", "20s", "--debug")
    assert debug.returncode == 2 and "Traceback (most recent call last)" in debug.stderr, debug.stderr
    _nothing_left()


def test_the_agent_runs_a_python_controller_from_its_config_and_restores(tmp_path: Path) -> None:
    (tmp_path / "ctl.py").write_text(CONTROLLERS_PY)
    group = f"critmem-pytest-py-{os.getpid()}"
    config = tmp_path / "agent.toml"
    config.write_text(
        f'controller = "ctl.py:CapBatch"\ntotal_memory_bytes = {512 * 2**20}\nsocket = "{tmp_path}/run/jobs.sock"\n'
        f'journal = "{tmp_path}/journal.jsonl"\n[controller_config]\ncap_mb = 96\n'
        f'[[group]]\nname = "batch"\ncgroup = "{group}/batch"\nrole = "non-rt"\nfloor_mb = 32\ncreate = true\n'
    )
    p = _run("agent", "--config", str(config), "--duration", "2s", "--log-level", "error")
    assert p.returncode == 0, p.stderr
    summary = json.loads(p.stdout)
    assert summary["controller"] == "ctl.py:CapBatch" and summary["ticks"] > 50 and summary["removed_dirs"] >= 2, summary
    assert not cgroups_named(group)
