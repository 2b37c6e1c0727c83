"""Memory controllers written in Python, in the simulator: found by file, module or entry
point, run by scenario file, by `critmem.run` and by the command, checked by the platform
conformance script through the Python bridge; user errors are one line and exit code 2."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import critmem
import pytest
from conftest import CRITMEM, EXAMPLES
from critmem.controller import (
    ActionError,
    DropJob,
    JobCompletion,
    JobRelease,
    Observation,
    Reclaim,
    SetCpuMax,
    SetHigh,
    SetIoMax,
    SetMax,
    actions_from_wire,
    actions_to_wire,
    observation_from_wire,
    observation_to_wire,
)
from hypothesis import given
from hypothesis import strategies as st

EXAMPLE = EXAMPLES / "python-controller" / "hold-stall.toml"

# A scenario with memory pressure on a soft real-time group, its [control] left to the test.
SCENARIO = textwrap.dedent(
    """
    [machine]
    cpus = 2
    [scheduler]
    kind = "gedf"
    [run]
    horizon_ms = 1000
    seed = 5
    [memory]
    total_mb = 64
    swap = "fast-ssd"
    [control]
    {control}
    interval_ms = 5
    [[group]]
    name = "srt"
    role = "soft-rt"
    bcet_ms = 5
    floor_mb = 8
    [[group]]
    name = "batch"
    role = "non-rt"
    floor_mb = 16
    [[task]]
    name = "srt"
    wcet_ms = 5
    period_ms = 20
    group = "srt"
    private_mb = 12
    access = [{{ pattern = "random", refs = 500, writes = 0.2 }}]
    [[task]]
    name = "nrt"
    wcet_ms = 20
    period_ms = 40
    group = "batch"
    private_mb = 48
    access = [{{ pattern = "random", refs = 2000, writes = 0.3 }}]
    """
)

CONTROLLERS_PY = textwrap.dedent(
    """
    from critmem.controller import Controller, SetMax

    class CapBatch(Controller):
        \"\"\"Caps every non-real-time group at `cap_mb`.\"\"\"

        def __init__(self, cap_mb: int = 20, interval_ms: float = 5.0) -> None:
            self.cap_bytes = cap_mb << 20
            self.interval_ns = round(interval_ms * 1e6)
            self.ticks = 0

        def tick(self, observation):
            self.ticks += 1
            return [SetMax(i, self.cap_bytes) for i, g in enumerate(observation.groups) if g.role == "non-rt"]

    class Boom(Controller):
        def tick(self, observation):
            if observation.now_ns > 100_000_000:
                raise RuntimeError("lost my marbles")
            return []

    class Negative(Controller):
        def tick(self, observation):
            return [SetMax(0, -1)]

    class NotFinite(Controller):
        def tick(self, observation):
            return [SetMax(0, float("nan"))]

    class Stray(Controller):
        def tick(self, observation):
            return [SetMax(99, 1 << 20)]

    class NoTick:
        pass

    class Abstract(Controller):
        pass

    class Raises(Controller):
        def __init__(self) -> None:
            raise ValueError("bad start")
    """
)


@pytest.fixture
def controllers_dir(tmp_path: Path) -> Path:
    (tmp_path / "ctl.py").write_text(CONTROLLERS_PY)
    return tmp_path


def _scenario(directory: Path, control: str, name: str = "s.toml") -> Path:
    path = directory / name
    path.write_text(SCENARIO.format(control=control))
    return path


def _cli(*argv: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(CRITMEM), *argv], capture_output=True, text=True, timeout=300, check=False, cwd=cwd)


def _one_line_error(p: subprocess.CompletedProcess[str], *needles: str) -> str:
    assert p.returncode == 2, (p.returncode, p.stderr)
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("critmem: error: "), p.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


def test_the_example_runs_from_its_scenario_file_and_holds_the_stall_below_no_control(tmp_path: Path) -> None:
    held = critmem.run(EXAMPLE)
    assert held.summary["control"]["controller"] == "hold_stall.py:HoldStall"
    # The same scenario with the controller never acting (its target out of reach).
    text = EXAMPLE.read_text().replace("target_pct = 1.0", "target_pct = 99.0")
    (tmp_path / "hold_stall.py").write_text((EXAMPLE.parent / "hold_stall.py").read_text())
    (tmp_path / "idle.toml").write_text(text)
    idle = critmem.run(tmp_path / "idle.toml")

    def srt_stall_ms(r: Any) -> float:
        groups = {g["name"]: g for g in r.summary["memory"]["groups"]}
        return float(groups["srt"]["memory_some_us"]) / 1000

    assert srt_stall_ms(held) < 0.75 * srt_stall_ms(idle), (srt_stall_ms(held), srt_stall_ms(idle))
    limits = {g["name"]: g for g in held.summary["control"]["groups"]}
    assert limits["nrt"]["lowest_max_mb"] is not None, "HoldStall capped the non-real-time group"


def test_the_example_command_prints_the_python_controller_and_is_deterministic() -> None:
    first, second = _cli("run", str(EXAMPLE), "--json"), _cli("run", str(EXAMPLE), "--json")
    assert first.returncode == 0, first.stderr
    assert first.stdout == second.stdout
    assert json.loads(first.stdout)["control"]["controller"] == "hold_stall.py:HoldStall"


def test_a_module_class_runs_through_critmem_run_with_its_parameters(controllers_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(controllers_dir))
    text = SCENARIO.format(control='controller = "ctl:CapBatch"\nconfig = { cap_mb = 20 }')
    result = critmem.run(text)
    groups = {g["name"]: g for g in result.summary["control"]["groups"]}
    assert groups["batch"]["final_max_mb"] == 20
    assert groups["srt"]["final_max_mb"] is None
    # And as a dict, a file path relative to the working directory.
    monkeypatch.chdir(controllers_dir)
    scenario = {**_as_dict(text), "control": {"controller": "ctl.py:CapBatch", "config": {"cap_mb": 24}, "interval_ms": 5}}
    groups = {g["name"]: g for g in critmem.run(scenario).summary["control"]["groups"]}
    assert groups["batch"]["final_max_mb"] == 24


RECLAIM_PY = textwrap.dedent(
    """
    from critmem.controller import Controller, Reclaim

    class ReclaimBatch(Controller):
        \"\"\"Every `every` ticks, asks each non-real-time group to give up `mb` MiB.\"\"\"

        def __init__(self, mb: int = 8, every: int = 20) -> None:
            self.bytes = mb << 20
            self.every = every
            self.ticks = 0

        def tick(self, observation):
            self.ticks += 1
            if self.ticks % self.every:
                return []
            return [Reclaim(i, self.bytes) for i, g in enumerate(observation.groups) if g.role == "non-rt"]
    """
)


def test_a_python_controller_asking_for_reclaim_makes_the_simulator_evict_without_capping(tmp_path: Path) -> None:
    (tmp_path / "reclaim.py").write_text(RECLAIM_PY)

    def run(mb: int) -> Any:
        return critmem.run(_scenario(tmp_path, f'controller = "reclaim.py:ReclaimBatch"\nconfig = {{ mb = {mb} }}', f"r{mb}.toml"))

    reclaiming, asking_nothing = run(8), run(0)
    groups = {g["name"]: g for g in reclaiming.summary["control"]["groups"]}
    # Every 20th tick of 5 ms, at 100 to 900 ms of the 1 s run: 9 reclaims, each evicting 8 MiB.
    assert groups["batch"]["reclaimed_mb"] == 72.0
    assert groups["batch"]["lowest_max_mb"] is None and groups["batch"]["final_max_mb"] is None, "no limit was set"
    assert "reclaimed_mb" not in groups["srt"]
    assert all("reclaimed_mb" not in g for g in asking_nothing.summary["control"]["groups"])

    def nrt(r: Any) -> dict[str, Any]:
        return next(t for t in r.summary["memory"]["tasks"] if t["name"] == "nrt")

    # The evicted pages come back: dirty ones from swap (major faults), clean ones refilled.
    assert nrt(asking_nothing)["major_faults"] == 0
    assert nrt(reclaiming)["major_faults"] > 0 and nrt(reclaiming)["pages_swapped_out"] > 0
    assert nrt(reclaiming)["minor_faults"] > nrt(asking_nothing)["minor_faults"]


def _as_dict(text: str) -> dict[str, Any]:
    import tomllib

    return tomllib.loads(text)


def test_the_conformance_script_passes_through_the_python_bridge_in_the_simulator(tmp_path: Path) -> None:
    report = tmp_path / "probe.json"
    path = _scenario(tmp_path, f'controller = "critmem.conformance:Probe"\nconfig = {{ report_path = "{report}" }}')
    p = _cli("run", str(path), "--json")
    assert p.returncode == 0, p.stderr
    verdict = json.loads(report.read_text())
    assert verdict["finished"] and not verdict["violations"] and verdict["ticks"] > 100, verdict


def test_an_action_for_a_group_that_does_not_exist_is_ignored_as_the_platform_contract_says(controllers_dir: Path) -> None:
    path = _scenario(controllers_dir, 'controller = "ctl.py:Stray"')
    p = _cli("run", str(path), "--json")
    assert p.returncode == 0, p.stderr
    assert all(g["final_max_mb"] is None for g in json.loads(p.stdout)["control"]["groups"])


@pytest.mark.parametrize(
    ("control", "key", "needles"),
    [
        ('controller = "ctl.py:Nope"', "control.controller", ["ctl.py has no attribute 'Nope'"]),
        ('controller = "missing.py:X"', "control.controller", ["no file", "missing.py"]),
        ('controller = "no_such_module_xyz:X"', "control.controller", ["no module 'no_such_module_xyz'"]),
        ('controller = "nope"', "control.controller", ["unknown controller `nope`", "sara", "file.py:Class"]),
        ('controller = "ctl.py:NoTick"', "control.config", ["has no method tick"]),
        ('controller = "ctl.py:Abstract"', "control.config", ["does not implement tick"]),
        ('controller = "ctl.py:CapBatch"\nconfig = { cap_mb = "big" }', "control.config", ["parameter 'cap_mb' must be int, got 'big'"]),
        ('controller = "ctl.py:CapBatch"\nconfig = { cap = 1 }', "control.config", ["unknown parameter 'cap'", "cap_mb, interval_ms"]),
        ('controller = "ctl.py:Raises"', "control.config", ["Raises.__init__ raised ValueError: bad start", "ctl.py:"]),
    ],
)
def test_a_controller_that_cannot_be_loaded_is_one_line_naming_the_key(
    controllers_dir: Path, control: str, key: str, needles: list[str]
) -> None:
    path = _scenario(controllers_dir, control)
    _one_line_error(_cli("run", str(path)), f"s.toml: {key}: ", *needles)
    _one_line_error(_cli("validate", str(path)), key, *needles)


@pytest.mark.parametrize(
    ("name", "needles"),
    [
        ("Boom", ["Boom.tick raised RuntimeError: lost my marbles", "ctl.py:"]),
        ("Negative", ["Negative.tick returned a bad action", "between 0 and 2^64-1, got -1"]),
        ("NotFinite", ["NotFinite.tick returned a bad action", "finite whole number, got nan"]),
    ],
)
def test_user_code_failing_in_a_tick_stops_the_run_with_one_line(controllers_dir: Path, name: str, needles: list[str]) -> None:
    path = _scenario(controllers_dir, f'controller = "ctl.py:{name}"')
    line = _one_line_error(_cli("run", str(path)), *needles)
    if name == "Boom":
        # The user's file and line: the `raise` in ctl.py.
        lineno = CONTROLLERS_PY.splitlines().index('            raise RuntimeError("lost my marbles")') + 1
        assert line.endswith(f"ctl.py:{lineno})"), line
    # --debug adds the traceback, anywhere on the line.
    debug = _cli("run", str(path), "--debug")
    assert debug.returncode == 2 and "Traceback (most recent call last)" in debug.stderr
    assert debug.stderr.strip().splitlines()[-1] == line


def test_user_code_failing_raises_plugin_error_from_critmem_run(controllers_dir: Path) -> None:
    path = _scenario(controllers_dir, 'controller = "ctl.py:Boom"')
    with pytest.raises(critmem.PluginError, match=r"^Boom.tick raised RuntimeError: lost my marbles \(.*ctl.py:\d+\)$") as e:
        critmem.run(path)
    assert isinstance(e.value.__cause__, RuntimeError)
    # The fault does not outlive its run: the next one is clean.
    assert critmem.run(_scenario(controllers_dir, 'controller = "ctl.py:CapBatch"', "t.toml")).summary["control"]


def _install_entry_point(site: Path, name: str, target: str) -> None:
    """A distribution on `site` that registers `target` as controller `name`."""
    (site / "mypolicies").mkdir()
    (site / "mypolicies" / "__init__.py").write_text(CONTROLLERS_PY)
    info = site / "mypolicies-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: mypolicies\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[critmem.controllers]\n{name} = {target}\n")


def test_an_installed_entry_point_adds_a_controller_a_scenario_can_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    site = tmp_path / "site"
    site.mkdir()
    _install_entry_point(site, "cap-batch", "mypolicies:CapBatch")
    monkeypatch.syspath_prepend(str(site))
    listed = {c.name: c for c in critmem.controllers()}
    assert listed["cap-batch"].summary == "Python class mypolicies:CapBatch"
    assert list(listed)[: len(critmem._core.controllers())] == [n for n, _ in critmem._core.controllers()]
    text = SCENARIO.format(control='controller = "cap-batch"\nconfig = { cap_mb = 18 }')
    groups = {g["name"]: g for g in critmem.run(text).summary["control"]["groups"]}
    assert groups["batch"]["final_max_mb"] == 18
    # The command line sees it too (a new process, the same site on its path).
    path = _scenario(tmp_path, 'controller = "cap-batch"')
    env_path = subprocess.run(
        [str(CRITMEM), "run", str(path), "--json"],
        capture_output=True,
        text=True,
        check=False,
        env={"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin"},
    )
    assert env_path.returncode == 0, env_path.stderr
    # An unknown name lists it among the choices.
    with pytest.raises(critmem.ScenarioError, match=r"unknown controller `nope`; use one of: .*tailguard, cap-batch \(or a Python class"):
        critmem.run(SCENARIO.format(control='controller = "nope"'))


# -- The typed observation and actions ----------------------------------------------------------

_u64 = st.integers(0, (1 << 64) - 1)
_opt = st.none() | _u64


@st.composite
def _wire_observations(draw: st.DrawFn) -> dict[str, Any]:
    groups = []
    for i in range(draw(st.integers(1, 4))):
        srt = draw(st.booleans())
        groups.append(
            {
                "name": f"g{i}",
                "role": {"SoftRealTime": {"deadline_ns": draw(_u64), "bcet_ns": draw(_u64)}} if srt else "NonRealTime",
                "stall": {k: draw(_u64) for k in ("memory_some_us", "memory_full_us", "io_some_us", "io_full_us", "cpu_some_us")},
                "usage_bytes": draw(_u64),
                "knobs": {k: draw(_opt) for k in ("max_bytes", "high_bytes", "min_bytes", "low_bytes")},
                "floor_bytes": draw(_u64),
                "cpu_usage_us": draw(_u64),
                "bandwidth": {k: draw(_opt) for k in ("cpu_millicpus", "io_read_bytes_per_s", "io_write_bytes_per_s")},
            }
        )
    events = draw(
        st.lists(
            st.one_of(
                st.builds(lambda g, j, t, d: {"Release": {"group": g, "job": j, "at_ns": t, "deadline_ns": d}}, _u64, _u64, _u64, _u64),
                st.builds(lambda g, j, t: {"Completion": {"group": g, "job": j, "at_ns": t}}, _u64, _u64, _u64),
                st.builds(lambda g, j, t: {"Drop": {"group": g, "job": j, "at_ns": t}}, _u64, _u64, _u64),
            ),
            max_size=5,
        )
    )
    return {
        "now_ns": draw(_u64),
        "total_memory_bytes": draw(_u64),
        "cpus": draw(st.integers(1, 1 << 16)),
        "groups": groups,
        "events": events,
    }


@given(_wire_observations())
def test_observations_round_trip_between_the_wire_and_the_typed_form(wire: dict[str, Any]) -> None:
    typed = observation_from_wire(wire)
    assert isinstance(typed, Observation)
    assert observation_to_wire(typed) == wire


@given(
    st.lists(
        st.one_of(
            st.builds(SetMax, _u64, _opt),
            st.builds(SetHigh, _u64, _opt),
            st.builds(DropJob, _u64, _u64),
            st.builds(Reclaim, _u64, _u64),
            st.builds(SetCpuMax, _u64, _opt),
            st.builds(SetIoMax, _u64, _opt, _opt),
        ),
        max_size=6,
    )
)
def test_valid_actions_round_trip(actions: list[Any]) -> None:
    assert actions_from_wire(json.loads(json.dumps(actions_to_wire(actions)))) == actions


@pytest.mark.parametrize(
    ("actions", "needle"),
    [
        ([SetMax(0, -5)], "between 0 and 2^64-1, got -5"),
        ([SetMax(0, math.inf)], "finite whole number, got inf"),  # type: ignore[arg-type]
        ([SetMax(0, 1.5)], "finite whole number, got 1.5"),  # type: ignore[arg-type]
        ([SetMax(0, True)], "whole number, got True"),
        ([SetMax(-1, 5)], "group must be between 0"),
        ([DropJob(0, -2)], "job must be between 0"),
        ([Reclaim(0, None)], "(Reclaim) bytes must be a whole number, got None"),  # type: ignore[arg-type]
        ([SetCpuMax(0, -1)], "(SetCpuMax) millicpus must be between 0"),
        ([SetIoMax(0, None, 0.5)], "(SetIoMax) write_bytes_per_s must be a finite whole number, got 0.5"),  # type: ignore[arg-type]
        (["SetMax"], "action 0 is a str"),
        (SetMax(0, 1), "must return a list of actions, got SetMax"),
    ],
)
def test_actions_no_platform_can_apply_are_refused_by_name(actions: Any, needle: str) -> None:
    with pytest.raises(ActionError, match=None) as e:
        actions_to_wire(actions)
    assert needle in str(e.value)


def test_whole_floats_and_none_are_accepted_as_the_rust_side_reads_them() -> None:
    whole: Any = 4096.0
    assert actions_to_wire([SetMax(1, whole), SetHigh(0, None)]) == [
        {"SetMax": {"group": 1, "bytes": 4096}},
        {"SetHigh": {"group": 0, "bytes": None}},
    ]
    assert actions_to_wire(None) == [] and actions_to_wire(()) == []


def test_observation_events_keep_their_kinds_in_order() -> None:
    wire = {
        "now_ns": 5,
        "total_memory_bytes": 10,
        "groups": [],
        "events": [{"Release": {"group": 0, "job": 1, "at_ns": 2, "deadline_ns": 3}}, {"Completion": {"group": 0, "job": 1, "at_ns": 4}}],
    }
    obs = observation_from_wire(wire)
    assert obs.events == (JobRelease(0, 1, 2, 3), JobCompletion(0, 1, 4))


def test_the_controller_host_answers_the_linux_protocol(controllers_dir: Path) -> None:
    """The process a Python controller runs in on Linux: load, ticks, one-line errors."""
    wire = {
        "now_ns": 1,
        "total_memory_bytes": 1 << 30,
        "groups": [
            {
                "name": "b",
                "role": "NonRealTime",
                "stall": dict.fromkeys(("memory_some_us", "memory_full_us", "io_some_us", "io_full_us"), 0),
                "usage_bytes": 0,
                "knobs": dict.fromkeys(("max_bytes", "high_bytes", "min_bytes", "low_bytes")),
                "floor_bytes": 0,
            }
        ],
        "events": [],
    }
    requests = [
        {"load": "ctl.py:CapBatch", "params": {"cap_mb": 3, "interval_ms": 2.0}},
        {"tick": wire},
    ]
    p = subprocess.run(
        [sys.executable, "-m", "critmem.controller_host"],
        input="".join(json.dumps(r) + "\n" for r in requests),
        capture_output=True,
        text=True,
        env={"CRITMEM_SCENARIO_DIR": str(controllers_dir), "PATH": "/usr/bin:/bin"},
        check=True,
        timeout=60,
    )
    replies = [json.loads(line) for line in p.stdout.splitlines()]
    assert replies == [
        {"ok": {"name": "ctl.py:CapBatch", "interval_ns": 2_000_000}},
        {"actions": [{"SetMax": {"group": 0, "bytes": 3 << 20}}]},
    ]
    bad = subprocess.run(
        [sys.executable, "-m", "critmem.controller_host"],
        input=json.dumps({"load": "ctl.py:Nope"}) + "\n",
        capture_output=True,
        text=True,
        env={"CRITMEM_SCENARIO_DIR": str(controllers_dir), "PATH": "/usr/bin:/bin"},
        check=True,
        timeout=60,
    )
    assert json.loads(bad.stdout) == {"error": "controller `ctl.py:Nope`: ctl.py has no attribute 'Nope'", "not_found": True}


def test_critmem_run_takes_a_controller_class_an_instance_or_a_name() -> None:
    sys.path.insert(0, str(EXAMPLE.parent))
    try:
        from hold_stall import HoldStall
    finally:
        sys.path.remove(str(EXAMPLE.parent))
    from_file = critmem.run(EXAMPLE)
    from_class = critmem.run(EXAMPLE, controller=HoldStall, controller_config={"target_pct": 1.0, "step_mb": 4.0})
    assert from_class.summary["control"]["controller"] == "HoldStall"
    assert from_class.summary["control"]["groups"] == from_file.summary["control"]["groups"]
    assert from_class.summary["tasks"] == from_file.summary["tasks"]
    instance = HoldStall(target_pct=1.0, step_mb=4.0)
    assert critmem.run(EXAMPLE, controller=instance).summary["control"]["groups"] == from_file.summary["control"]["groups"]
    assert critmem.run(EXAMPLE, controller="greedy").summary["control"]["controller"] == "greedy"
    with pytest.raises(ValueError, match="an instance is used as it is"):
        critmem.run(EXAMPLE, controller=instance, controller_config={"target_pct": 2.0})
    with pytest.raises(ValueError, match="controller_config configures a controller given with controller="):
        critmem.run(EXAMPLE, controller_config={"target_pct": 2.0})
    with pytest.raises(critmem.ScenarioError, match="control.config: controller `HoldStall`: parameter 'target_pct' must be float"):
        critmem.run(EXAMPLE, controller=HoldStall, controller_config={"target_pct": "high"})


def test_a_sweep_runs_a_python_controller_named_relative_to_its_scenario(tmp_path: Path) -> None:
    folder = tmp_path / "study"
    folder.mkdir()
    for name in ("hold_stall.py", "hold-stall.toml"):
        (folder / name).write_text((EXAMPLE.parent / name).read_text())
    (folder / "sweep.toml").write_text(
        'scenario = "hold-stall.toml"\nseeds = [1]\nmetrics = ["tasks.control-loop.hit_ratio"]\n[vary]\n"control.config.target_pct" = [0.5, 2.0]\n'
    )
    # From another folder: the file is found beside the scenario, not in the working directory.
    p = _cli("sweep", str(folder / "sweep.toml"), "--out", str(tmp_path / "out"), cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert (tmp_path / "out" / "runs.csv").read_text().count("\n") == 3


def test_agent_config_names_the_python_file_from_anywhere_with_its_parameters(tmp_path: Path) -> None:
    import tomllib

    p = _cli("agent-config", str(EXAMPLE.relative_to(EXAMPLE.parents[2])), cwd=EXAMPLE.parents[2])
    assert p.returncode == 0, p.stderr
    config = tomllib.loads(p.stdout)
    assert config["controller"] == f"{EXAMPLE.parent / 'hold_stall.py'}:HoldStall"
    assert config["controller_config"] == {"target_pct": 1.0, "step_mb": 4.0}
