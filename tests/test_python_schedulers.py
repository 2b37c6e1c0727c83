"""CPU and transient-memory schedulers written in Python: a Python EDF decides exactly as the
built-in one on random task sets (one CPU and global on several), runs as a server's policy,
a Python re-implementation of a built-in memory scheduler gives the built-in's output, and
every failure of user code or of its naming is one line with exit code 2."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import critmem
import numpy as np
import pandas as pd
import pytest
from conftest import EXAMPLES, ROOT, assert_one_line_error, cli
from critmem import _core
from critmem.generate import periods_ms, taskset_scenario, uunifast
from critmem.plugins import PluginError

PYTHON_EXAMPLE = EXAMPLES / "python-scheduler"
EDF = f"{PYTHON_EXAMPLE / 'edf.py'}:Edf"


def _random_set(seed: int, cpus: int) -> dict[str, Any]:
    """A random implicit-deadline task set: 2–7 tasks of total utilisation up to 0.95 per CPU
    (some overload, so misses and ties happen), periods 2–40 ms."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 8))
    total = float(rng.uniform(0.3, 0.95 * cpus + 0.3))
    utils = np.minimum(uunifast(n, total, rng), 1.0)
    periods = periods_ms(n, rng, low_ms=2.0, high_ms=40.0, log_uniform=True)
    return taskset_scenario(utils, periods, scheduler="edf" if cpus == 1 else "gedf", cpus=cpus, horizon_ms=120.0, seed=seed)


def _schedule(scenario: dict[str, Any]) -> tuple[pd.DataFrame, pd.DataFrame]:
    result = critmem.run(scenario)
    return result.jobs, result.segments


@pytest.mark.parametrize("cpus", [1, 2, 3, 4])
def test_python_edf_decides_as_the_built_in_edf_on_random_task_sets(cpus: int) -> None:
    # 80 sets on one CPU, 40 on each of 2, 3 and 4 (global EDF): 200 in all.
    count = 80 if cpus == 1 else 40
    for seed in range(count):
        builtin = _random_set(1000 * cpus + seed, cpus)
        python = json.loads(json.dumps(builtin))
        python["scheduler"] = {"kind": EDF}
        jobs_b, segments_b = _schedule(builtin)
        jobs_p, segments_p = _schedule(python)
        assert len(segments_b) > 0
        pd.testing.assert_frame_equal(jobs_p, jobs_b, obj=f"jobs of seed {1000 * cpus + seed} on {cpus} CPUs")
        pd.testing.assert_frame_equal(segments_p, segments_b, obj=f"segments of seed {1000 * cpus + seed} on {cpus} CPUs")


def test_the_example_runs_and_names_its_scheduler(tmp_path: Path) -> None:
    o = cli("run", str(PYTHON_EXAMPLE / "edf.toml"), "--json")
    assert o.code == 0, o.stderr
    out = json.loads(o.stdout)
    assert out["scheduler"] == "python-edf"
    text = (PYTHON_EXAMPLE / "edf.toml").read_text().replace('"edf.py:Edf"', '"edf"')
    builtin = cli("run", str(_write(tmp_path, "edf.toml", text)), "--json")
    assert [t["max_response_ms"] for t in out["tasks"]] == [t["max_response_ms"] for t in json.loads(builtin.stdout)["tasks"]]


def _server_scenario(policy: str) -> str:
    return (PYTHON_EXAMPLE / "server.toml").read_text().replace('policy = "edf.py:Edf"', f'policy = "{policy}"')


def test_python_edf_under_a_deferrable_server_schedules_as_the_built_in_policy() -> None:
    # Under a server the Python scheduler sees the server's one CPU and its own tasks' jobs.
    result = critmem.run(PYTHON_EXAMPLE / "server.toml")
    # The gedf task policy on one CPU is the built-in counterpart of a Python task policy.
    builtin = critmem.run(_server_scenario("gedf"))
    pd.testing.assert_frame_equal(result.segments, builtin.segments)
    pd.testing.assert_frame_equal(result.jobs, builtin.jobs)
    server = result.summary["servers"][0]
    assert server["name"] == "edf-part" and server["consumed_ms"] > 0
    # Its budget bounds it: at most 4 ms in every 10 ms.
    ran = result.segments[result.segments["task"].isin(["a", "b"])]
    assert float((ran["end_ms"] - ran["start_ms"]).sum()) <= 4.0 * 20 + 1e-9


def _write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(textwrap.dedent(text))
    return p


_SCENARIO = """
[scheduler]
kind = "{kind}"
{config}
[run]
horizon_ms = 50

[[task]]
name = "a"
period_ms = 10
wcet_ms = 2

[[task]]
name = "b"
period_ms = 20
wcet_ms = 5
"""


def _run_with(tmp_path: Path, body: str, kind: str = "sched.py:S", config: str = "") -> Any:
    _write(tmp_path, "sched.py", body)
    scenario = _write(tmp_path, "s.toml", _SCENARIO.format(kind=kind, config=config))
    return cli("run", str(scenario), "--json")


_FIFO = """
import critmem

class S(critmem.Scheduler):
    def __init__(self, depth: int = 1) -> None:
        self.queue = []
    def on_ready(self, job):
        self.queue.append(job.key)
    def on_remove(self, job_key):
        self.queue.remove(job_key)
    def choose(self, now_ns, current):
        return self.queue[:1] + [None] * (1 - len(self.queue[:1]))
"""


def test_a_file_name_is_relative_to_the_scenario_and_config_gives_keyword_arguments(tmp_path: Path) -> None:
    o = _run_with(tmp_path, _FIFO, config="config = { depth = 3 }")
    assert o.code == 0, o.stderr
    assert json.loads(o.stdout)["scheduler"] == "sched.py:S"


@pytest.mark.parametrize(
    ("body", "kind", "config", "expected"),
    [
        (_FIFO, "nope.py:S", "", "s.toml: scheduler.kind: scheduler `nope.py:S`: no file"),
        (_FIFO, "sched.py:Missing", "", "scheduler.kind: scheduler `sched.py:Missing`: sched.py has no attribute 'Missing'"),
        (_FIFO.replace("def choose", "def chose"), "sched.py:S", "", "scheduler.kind: scheduler `sched.py:S`: S does not implement choose"),
        (
            _FIFO,
            "sched.py:S",
            'config = { depth = "deep" }',
            "scheduler.config: scheduler `sched.py:S`: parameter 'depth' must be int, got 'deep'",
        ),
        (_FIFO, "sched.py:S", "config = { width = 2 }", "scheduler.config: scheduler `sched.py:S`: unknown parameter 'width'"),
        (_FIFO, "edff", "", 'scheduler.kind: unknown scheduler "edff"; expected'),
        (_FIFO, "edf", "config = { depth = 3 }", "scheduler.config: only applies to a Python scheduler"),
    ],
)
def test_a_scheduler_that_cannot_load_is_one_line_naming_its_key(tmp_path: Path, body: str, kind: str, config: str, expected: str) -> None:
    assert_one_line_error(_run_with(tmp_path, body, kind=kind, config=config), expected)


@pytest.mark.parametrize(
    ("choose", "expected"),
    [
        ("return [99]", "S.choose put job 99 on CPU 0, but job 99 is not ready"),
        ("return []", "S.choose returned 0 entries for 1 CPUs"),
        ("return 5", "S.choose returned int, not a sequence of job keys"),
        ("return ['x']", "S.choose returned 'x' for CPU 0"),
        ("return [1 // 0]", "S.choose raised ZeroDivisionError: integer division or modulo by zero ("),
    ],
)
def test_an_invalid_assignment_or_an_exception_stops_the_run_in_one_line(tmp_path: Path, choose: str, expected: str) -> None:
    body = _FIFO.replace("return self.queue[:1] + [None] * (1 - len(self.queue[:1]))", choose)
    o = _run_with(tmp_path, body)
    assert_one_line_error(o, expected)
    if "raised" in expected:
        assert "sched.py:12)" in o.stderr


def test_a_job_on_two_cpus_is_refused(tmp_path: Path) -> None:
    body = _FIFO.replace(
        "return self.queue[:1] + [None] * (1 - len(self.queue[:1]))", "return [self.queue[0]] * 2 if self.queue else [None, None]"
    )
    _write(tmp_path, "sched.py", body)
    scenario = _write(
        tmp_path, "s.toml", "[machine]\ncpus = 2\n" + _SCENARIO.format(kind="gedf.py:S".replace("gedf.py", "sched.py"), config="")
    )
    o = cli("run", str(scenario), "--json")
    assert o.code == 2 and "S.choose put job 0 on two CPUs (0 and 1)" in o.stderr, o.stderr


def test_an_exception_in_on_ready_names_the_method_and_debug_prints_the_traceback(tmp_path: Path) -> None:
    body = _FIFO.replace("self.queue.append(job.key)", "raise RuntimeError('no room')")
    o = _run_with(tmp_path, body)
    assert o.code == 2 and "S.on_ready raised RuntimeError: no room (" in o.stderr
    o = cli("run", str(tmp_path / "s.toml"), "--debug")
    assert o.code == 2 and "Traceback" in o.stderr and "RuntimeError: no room" in o.stderr


def test_the_api_raises_plugin_error_for_user_code(tmp_path: Path) -> None:
    body = _FIFO.replace("self.queue.remove(job_key)", "raise KeyError(job_key)")
    _write(tmp_path, "sched.py", body)
    with pytest.raises(PluginError, match=r"^S.on_remove raised KeyError"):
        critmem.run(_write(tmp_path, "s.toml", _SCENARIO.format(kind="sched.py:S", config="")))


_WAKING = """
import critmem

class S(critmem.Scheduler):
    '''Runs nothing before 7 ms: only a wakeup makes it choose again in time.'''
    def __init__(self):
        self.ready = []
    def on_ready(self, job):
        self.ready.append(job.key)
    def on_remove(self, job_key):
        self.ready.remove(job_key)
    def choose(self, now_ns, current):
        return [self.ready[0] if self.ready and now_ns >= 7_000_000 else None]
    def next_wakeup_ns(self, now_ns):
        return 7_000_000 if now_ns < 7_000_000 else None
"""


def test_next_wakeup_makes_the_simulator_ask_again(tmp_path: Path) -> None:
    _write(tmp_path, "sched.py", _WAKING)
    result = critmem.run(_write(tmp_path, "s.toml", _SCENARIO.format(kind="sched.py:S", config="")))
    assert float(result.segments["start_ms"].min()) == 7.0


def test_the_task_table_reaches_setup(tmp_path: Path) -> None:
    body = _FIFO.replace(
        "self.queue = []",
        "self.queue = []\n    def setup(self, tasks, cpus):\n        assert [(t.name, t.period_ns, t.wcet_ns, t.deadline_ns) for t in tasks] == "
        "[('a', 10_000_000, 2_000_000, 10_000_000), ('b', 20_000_000, 5_000_000, 20_000_000)] and cpus == 1, tasks",
    )
    o = _run_with(tmp_path, body)
    assert o.code == 0, o.stderr


def test_schedulers_and_memory_schedulers_list_the_built_ins() -> None:
    assert [s.name for s in critmem.schedulers()][:10] == [n for n, _ in _core.schedulers()]
    names = [s.name for s in critmem.memory_schedulers()]
    assert names[:7] == ["min", "max", "fair", "greedy", "tmem", "tmem-composite", "watermark"]
    assert all(s.summary for s in critmem.memory_schedulers())


# -- Transient-memory schedulers --------------------------------------------------------------

_FAIR = '''
import critmem

class Fair(critmem.MemoryScheduler):
    """The built-in `fair`: the units above the minimums split equally, in cache order."""
    def schedule(self, observation):
        caches = observation.caches
        if observation.total_units is None:
            return [critmem.SetDesired(i, None) for i in range(len(caches))]
        if not caches:
            return []
        spare = max(observation.total_units - sum(c.min_units for c in caches), 0)
        share, extra = divmod(spare, len(caches))
        return [critmem.SetDesired(i, c.min_units + share + (i < extra)) for i, c in enumerate(caches)]
'''


def test_a_python_fair_gives_the_built_in_fairs_output_byte_for_byte(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    _write(tmp_path, "fair.py", _FAIR)
    text = (ROOT / "examples" / "tmem-open.toml").read_text()
    assert 'policy = "tmem"' in text
    _write(tmp_path, "builtin.toml", text.replace('policy = "tmem"', 'policy = "fair"'))
    _write(tmp_path, "python.toml", text.replace('policy = "tmem"', 'policy = "fair.py:Fair"'))
    a = cli("run", "builtin.toml", "--json")
    b = cli("run", "python.toml", "--json")
    assert a.code == 0 and b.code == 0, a.stderr + b.stderr
    assert '"policy":"fair"' in a.stdout
    # The file names the scenario and the policy as written; every other byte is the same.
    expected = a.stdout.replace('"scenario":"builtin.toml"', '"scenario":"python.toml"').replace(
        '"policy":"fair"', '"policy":"fair.py:Fair"'
    )
    assert b.stdout == expected


@pytest.mark.parametrize(
    ("body", "policy", "expected"),
    [
        (_FAIR, "fair.py:Nope", "tmem.policy: memory scheduler `fair.py:Nope`: fair.py has no attribute 'Nope'"),
        (_FAIR, "fiar", "tmem.policy: unknown memory scheduler `fiar`; use one of: min, max, fair"),
        (
            _FAIR.replace("return [critmem.SetDesired(i, c.min_units", "return [critmem.SetDesired(i + 100, c.min_units"),
            "fair.py:Fair",
            "Fair.schedule returned a bad allocation: cache 100 does not exist",
        ),
        (_FAIR.replace("spare = max(", "spare = 1 / 0 + max("), "fair.py:Fair", "Fair.schedule raised ZeroDivisionError"),
    ],
)
def test_a_memory_scheduler_that_fails_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, body: str, policy: str, expected: str
) -> None:
    monkeypatch.chdir(tmp_path)
    _write(tmp_path, "fair.py", body)
    text = (ROOT / "examples" / "tmem-open.toml").read_text().replace('policy = "tmem"', f'policy = "{policy}"')
    _write(tmp_path, "s.toml", text)
    assert_one_line_error(cli("run", "s.toml", "--json"), expected)


def test_an_installed_entry_point_is_a_name_and_is_listed(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from importlib.metadata import EntryPoint

    from critmem import plugins

    monkeypatch.syspath_prepend(str(PYTHON_EXAMPLE))
    installed = {
        "schedulers": {"py-edf": EntryPoint("py-edf", "edf:Edf", "critmem.schedulers")},
        "memory_schedulers": {},
        "controllers": {},
    }
    monkeypatch.setattr(plugins, "entry_points", lambda kind: installed[kind])
    assert critmem.schedulers()[-1] == critmem.SchedulerInfo("py-edf", "Python scheduler edf:Edf (installed)")
    text = (PYTHON_EXAMPLE / "edf.toml").read_text()
    result = critmem.run(text.replace('"edf.py:Edf"', '"py-edf"'))
    builtin = critmem.run(text.replace('"edf.py:Edf"', '"edf"'))
    assert result.summary["scheduler"] == "python-edf"
    pd.testing.assert_frame_equal(result.segments, builtin.segments)
    # A name neither built in nor installed lists both.
    o = _run_with(tmp_path, _FIFO, kind="py-edff")
    assert_one_line_error(o, "scheduler.kind: unknown scheduler")


def test_analyze_reports_a_python_scheduler_as_not_analysed() -> None:
    report = critmem.analyze(PYTHON_EXAMPLE / "edf.toml").report
    assert [(t["name"], t["verdict"]) for t in report["tests"]] == [("python-scheduler", "unknown")]
