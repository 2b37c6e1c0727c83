"""The Python API: `critmem.run` and `critmem.analyze` accept a path, TOML text or a dict."""

from __future__ import annotations

import json
import tomllib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import critmem
import pandas as pd
import pytest
from conftest import EXAMPLES, GEDF_MIXED, RM_TEXTBOOK, cli
from critmem.api import JOB_DTYPES, MAX_TRACE_RECORDS, SEGMENT_DTYPES

TASK_COLUMNS = [
    "name", "criticality", "cpu", "jobs", "completed", "deadline_misses", "aborted", "dropped", "killed", "skipped",
    "pending", "hit_ratio", "max_response_ms", "mean_response_ms", "max_tardiness_ms", "throughput_per_s",
]  # fmt: skip

RM_TEXT = RM_TEXTBOOK.read_text()


def _rm_dict() -> dict[str, Any]:
    return tomllib.loads(RM_TEXT)


@pytest.mark.parametrize(
    "scenario",
    [str(RM_TEXTBOOK), RM_TEXTBOOK, RM_TEXT, _rm_dict(), json.dumps(_rm_dict())],
    ids=["path str", "pathlib.Path", "TOML text", "dict", "JSON text"],
)
def test_run_accepts_every_kind_of_scenario(scenario: Any) -> None:
    r = critmem.run(scenario)
    assert list(r.tasks.columns) == TASK_COLUMNS
    assert list(r.tasks["name"]) == ["t1", "t2", "t3", "t4"]
    assert list(r.tasks["max_response_ms"]) == [1.0, 2.0, 7.0, 18.0]
    assert r.seed == 1 and r.scheduler == "rm" and r.cpus == 1 and r.horizon_ms == 360.0


def test_source_names_say_where_the_scenario_came_from() -> None:
    assert critmem.run(RM_TEXTBOOK).scenario == str(RM_TEXTBOOK)
    assert critmem.run(RM_TEXT).scenario == "<string>"
    assert critmem.run(_rm_dict()).scenario == "<dict>"


def test_jobs_and_segments_are_typed_frames_that_agree_with_the_summary() -> None:
    r = critmem.run(GEDF_MIXED)
    assert list(r.jobs.columns) == list(JOB_DTYPES)
    assert list(r.segments.columns) == list(SEGMENT_DTYPES)
    for frame, dtypes in ((r.jobs, JOB_DTYPES), (r.segments, SEGMENT_DTYPES)):
        for column, dtype in dtypes.items():
            assert frame[column].dtype == pd.Series([], dtype=dtype).dtype, column
    assert len(r.jobs) == r.tasks["jobs"].sum()
    assert r.jobs["release_ms"].is_monotonic_increasing
    per_task = r.jobs.groupby("task", sort=False)
    completed = r.jobs[r.jobs["outcome"] == "completed"].groupby("task")
    for t in r.summary["tasks"]:
        assert per_task.get_group(t["name"])["missed"].sum() == t["deadline_misses"]
        assert completed.get_group(t["name"])["response_ms"].max() == pytest.approx(t["max_response_ms"])
    # No job runs before its release or after the horizon.
    assert (r.segments["end_ms"] > r.segments["start_ms"]).all()
    assert r.segments["end_ms"].max() <= r.horizon_ms


def test_unfinished_jobs_have_no_completion_or_response() -> None:
    r = critmem.run(RM_TEXT, horizon_ms=10.5)
    pending = r.jobs[r.jobs["outcome"] != "completed"]
    assert not pending.empty
    assert pending["completion_ms"].isna().all() and pending["response_ms"].isna().all()


def test_to_json_is_the_cli_json_byte_for_byte(tmp_path: Path) -> None:
    r = critmem.run(str(GEDF_MIXED))
    # Traces kept: the summary says how much of them, as `--out`'s summary does.
    assert r.to_json() + "\n" == cli("run", str(GEDF_MIXED), "--json", "--out", str(tmp_path)).stdout
    assert r.summary["traces"] == {
        "limit": MAX_TRACE_RECORDS,
        "jobs": len(r.jobs),
        "jobs_left_out": 0,
        "segments": len(r.segments),
        "segments_left_out": 0,
    }
    # No traces, no traces section: the summary alone, as plain `--json` prints it.
    bare = critmem.run(str(GEDF_MIXED), record_jobs=False, record_segments=False)
    assert "traces" not in bare.summary
    assert bare.to_json() + "\n" == cli("run", str(GEDF_MIXED), "--json").stdout
    # The summary's counts come from the engine's per-task statistics, the jobs frame from its
    # job records: they must tell the same story.
    for t in r.summary["tasks"]:
        mine = r.jobs[r.jobs["task"] == t["name"]]
        assert len(mine) == t["jobs"], t["name"]
        assert int((mine["outcome"] == "completed").sum()) == t["completed"], t["name"]
        assert int(mine["missed"].sum()) == t["deadline_misses"], t["name"]


def test_seed_and_horizon_overrides() -> None:
    r = critmem.run(GEDF_MIXED, seed=7, horizon_ms=100)
    assert (r.seed, r.summary["seed"], r.horizon_ms) == (7, 7, 100.0)
    assert r.segments["end_ms"].max() <= 100.0


def test_horizon_override_runs_a_scenario_whose_hyperperiod_is_too_long() -> None:
    scenario: dict[str, Any] = {
        "scheduler": {"kind": "edf"},
        "task": [
            {"name": "a", "wcet_ms": 1, "period_ms": 99.999989},
            {"name": "b", "wcet_ms": 1, "period_ms": 99.999971},
        ],
    }
    with pytest.raises(critmem.ScenarioError, match=r"run\.horizon_ms"):
        critmem.run(scenario)
    assert critmem.run(scenario, horizon_ms=1000).tasks["jobs"].tolist() == [11, 11]


def test_recording_can_be_turned_off() -> None:
    r = critmem.run(GEDF_MIXED, record_jobs=False, record_segments=False)
    assert r.jobs.empty and list(r.jobs.columns) == list(JOB_DTYPES)
    assert r.segments.empty and list(r.segments.columns) == list(SEGMENT_DTYPES)
    # The same run: the summaries differ only in the recorded run's traces section.
    recorded = critmem.run(GEDF_MIXED).summary
    assert "traces" in recorded and "traces" not in r.summary
    del recorded["traces"]
    assert r.summary == recorded


def test_a_trace_limit_keeps_the_first_entries_and_the_summary_counts_the_rest() -> None:
    full = critmem.run(GEDF_MIXED)
    capped = critmem.run(GEDF_MIXED, trace_limit=100)
    assert (len(capped.jobs), len(capped.segments)) == (100, 100)
    assert capped.jobs_left_out == len(full.jobs) - 100
    assert capped.segments_left_out == len(full.segments) - 100
    assert capped.summary["traces"] == {
        "limit": 100,
        "jobs": 100,
        "jobs_left_out": len(full.jobs) - 100,
        "segments": 100,
        "segments_left_out": len(full.segments) - 100,
    }
    # The kept segments are the first the engine emitted; per-task totals still count all.
    pd.testing.assert_frame_equal(capped.segments, full.segments.head(100))
    pd.testing.assert_frame_equal(capped.tasks, full.tasks)
    with pytest.raises(ValueError, match="trace_limit"):
        critmem.run(GEDF_MIXED, trace_limit=-1)


def test_the_control_timeline_has_a_row_per_tick_with_typed_columns() -> None:
    from critmem.reproduce.sara import experiment as sara

    w = sara.WORKLOADS[1]  # opencv beside graphchi, SARA every 5 ms, 4 periods of 800 ms
    r = critmem.run(sara.Spec(w, 60, "slow-ssd", "sara", (), 4, 1).scenario(), record_jobs=False, record_segments=False)
    ct = r.control_timeline
    per_group = ("max_mb", "high_mb", "usage_mb", "memory_some_us", "io_some_us")
    assert list(ct.columns) == ["time_ms", *(f"{c}:{g}" for g in ("opencv", "graphchi") for c in per_group)]
    assert {str(t) for c, t in ct.dtypes.items() if "_us:" in str(c)} == {"int64"}
    assert {str(t) for c, t in ct.dtypes.items() if "_us:" not in str(c)} == {"float64"}
    # A tick every 5 ms up to the 3200 ms horizon (exclusive).
    assert len(ct) == 639 and ct["time_ms"].tolist()[:2] == [5.0, 10.0]
    assert r.memory is not None
    for g in r.memory["groups"]:
        psi = ct[f"memory_some_us:{g['name']}"]
        assert psi.is_monotonic_increasing and 0 < psi.iloc[-1] <= g["memory_some_us"]
    assert critmem.run(GEDF_MIXED).control_timeline.empty


@pytest.mark.parametrize(
    ("scenario", "message"),
    [
        (RM_TEXT.replace("period_ms = 4", "period_ms = 0"), r"^<string>: task\[0\]\.period_ms: must be greater than 0"),
        ({**_rm_dict(), "machine": {"cpus": 0}}, r"^<dict>: machine\.cpus: must be at least 1"),
        (
            {"scheduler": {"kind": "rm"}, "task": [{"name": "x", "wcet_ms": float("nan"), "period_ms": 1}]},
            r"^<dict>: task\[0\]\.wcet_ms: must be a finite number \(got nan\)$",
        ),
        ({"scheduler": {"kind": "rm"}, "run": {"seed": object()}}, r"^<dict>: run\.seed: a object cannot be written in a scenario$"),
        ("[machine\ncpus = 1", r"^<string>: line 1"),
    ],
    ids=["TOML text", "dict", "NaN in a dict", "object in a dict", "TOML syntax"],
)
def test_bad_scenarios_raise_scenario_error_with_one_line(scenario: Any, message: str) -> None:
    with pytest.raises(critmem.ScenarioError, match=message) as e:
        critmem.run(scenario)
    assert "\n" not in str(e.value)
    assert isinstance(e.value, ValueError)


def test_a_missing_file_is_a_file_error_not_a_parse_error(tmp_path: Path) -> None:
    for missing in (str(tmp_path / "nope.toml"), tmp_path / "nope.toml", "nope.json"):
        with pytest.raises(FileNotFoundError):
            critmem.run(missing)
    with pytest.raises(IsADirectoryError):
        critmem.run(tmp_path)


def test_bad_overrides_are_rejected() -> None:
    with pytest.raises(ValueError, match="seed"):
        critmem.run(RM_TEXT, seed=-1)
    with pytest.raises(TypeError, match="seed"):
        critmem.run(RM_TEXT, seed=1.5)  # type: ignore[arg-type]
    for horizon_ms in (0.0, -1.0, float("nan"), float("inf")):
        with pytest.raises(critmem.ScenarioError, match=r"horizon_ms \(override\)"):
            critmem.run(RM_TEXT, horizon_ms=horizon_ms)


def test_runs_in_threads_give_the_same_results() -> None:
    # The simulation releases the GIL; runs must stay independent and deterministic.
    with ThreadPoolExecutor(max_workers=4) as pool:
        outputs = list(pool.map(lambda seed: critmem.run(GEDF_MIXED, seed=seed).to_json(), [3, 3, 4, 4]))
    assert outputs[0] == outputs[1] and outputs[2] == outputs[3] and outputs[0] != outputs[2]


def test_controllers_are_the_registry_every_front_end_lists() -> None:
    from critmem import linux
    from critmem.reproduce.sara import experiment as sara

    registry = critmem.controllers()
    names = [c.name for c in registry]
    assert len(names) == len(set(names)) >= 7 and all(c.summary for c in registry)
    # The scenario loader (Rust) names the same controllers, in the same order.
    scenario = sara.Spec(sara.WORKLOADS[1], 60, "slow-ssd", "nope", (), 1, 1).scenario()
    with pytest.raises(critmem.ScenarioError, match=r"unknown controller `nope`; use one of: (.*)$") as e:
        critmem.run(scenario)
    assert str(e.value).rsplit("use one of: ", 1)[1] == ", ".join(names) + ' (or a Python class: "file.py:Class" or "package.module:Class")'
    assert linux.CONTROLLERS == sara.CONTROLLERS == tuple(names)
    run_help = " ".join(cli("run", "--help").stdout.split())
    assert f"controller in place of the scenario's: {', '.join(names)}" in run_help


def test_schedulers_are_the_registry_of_the_loaders_kinds() -> None:
    registry = critmem.schedulers()
    names = [s.name for s in registry]
    assert len(names) == len(set(names)) >= 10
    assert all(s.summary and "\n" not in s.summary for s in registry)
    assert {"SchedulerInfo", "schedulers"} <= set(critmem.__all__)
    # The scenario loader (Rust) names the same kinds, in the same order: in its schema and in
    # the error for a kind it does not know.
    schema = json.loads(critmem._core.scenario_schema())
    assert schema["$defs"]["Scheduler"]["properties"]["kind"]["anyOf"][0]["enum"] == names
    o = cli("generate", "--tasks", "3", "--utilization", "0.5", "--scheduler", "lottery")
    assert o.code == 2 and o.stderr.rstrip().endswith(f"expected {', '.join(names[:-1])} or {names[-1]}")


@pytest.mark.parametrize("kind", [s.name for s in critmem.schedulers() if s.name not in ("fp", "cyclic", "mc2")])
def test_generate_writes_task_sets_for_every_kind_it_can(kind: str) -> None:
    # fp needs each task's priority, a cyclic executive and MC²'s level A a table of windows:
    # generate writes neither.
    cpus = "1" if kind in ("fp", "rm", "dm", "edf") else "2"
    o = cli("generate", "--tasks", "4", "--utilization", "0.6", "--scheduler", kind, "--cpus", cpus)
    assert o.code == 0, o.stderr
    assert json.loads(critmem._core.validate(o.stdout, "set.toml", "toml"))["scheduler"] == kind


def test_numpy_numbers_and_arrays_are_accepted_wherever_numbers_are() -> None:
    import numpy as np

    plain = critmem.run(_rm_dict()).to_json()
    d = _rm_dict()
    for task in d["task"]:
        task["period_ms"] = np.int64(task["period_ms"])
        task["wcet_ms"] = np.float64(task["wcet_ms"])
    d["run"]["seed"] = np.uint32(d["run"].get("seed", 0))
    assert critmem.run(d).to_json() == plain
    # An array of periods where a list of tasks' values is built from one.
    periods = np.array([t["period_ms"] for t in _rm_dict()["task"]])
    d["task"] = [{**t, "period_ms": p} for t, p in zip(_rm_dict()["task"], periods, strict=True)]
    assert critmem.run(d).to_json() == plain


def test_a_path_that_does_not_exist_says_no_such_file_not_a_parse_error() -> None:
    for name in ("examples/no-such-scenario", "no-such-scenario"):
        with pytest.raises(FileNotFoundError, match="No such file"):
            critmem.run(name)


def test_results_have_a_short_repr_and_a_notebook_view() -> None:
    r = critmem.run(EXAMPLES / "sara-sphinx.toml")
    assert len(r.summary_json) > 2_000
    text = repr(r)
    assert len(text) < 2_000
    assert text.startswith("RunResult(scenario=") and "deadline_misses=" in text
    page = r._repr_html_()
    assert "<table" in page and "sphinx" in page and len(page) < 20_000
    a = critmem.analyze(RM_TEXTBOOK)
    assert repr(a) == f"AnalysisResult(scenario={str(RM_TEXTBOOK)!r}, scheduler='rm', cpus=1, tasks=4, tests=1, verdict='schedulable')"
    assert "<table" in a._repr_html_()


def test_names_in_the_notebook_view_are_escaped() -> None:
    d = _rm_dict()
    d["task"][0]["name"] = "<script>x</script>"
    page = critmem.run(d)._repr_html_()
    assert "<script>" not in page and "&lt;script&gt;" in page


def test_criticality_and_outcome_are_categoricals_with_every_value() -> None:
    r = critmem.run(GEDF_MIXED)
    assert list(r.tasks["criticality"].cat.categories) == ["A", "B", "C", "D"]
    assert r.tasks["criticality"].cat.ordered
    assert list(r.jobs["outcome"].cat.categories) == ["completed", "aborted", "killed", "unfinished", "pending"]
    # Counting by outcome lists outcomes that did not occur, as zero.
    counts = r.jobs["outcome"].value_counts()
    assert counts["killed"] == 0 and counts.sum() == len(r.jobs)
    assert list(critmem.analyze(GEDF_MIXED).tasks["criticality"].cat.categories) == ["A", "B", "C", "D"]


LONG_RUN_MS = 100_000


def _long_run_text() -> str:
    # 400 tasks every 1 ms on 16 CPUs for 100 s: tens of millions of events, far longer than
    # the callback's first call (0.5 s of wall time) on any machine; the test stops it early.
    tasks = "".join(f'[[task]]\nname = "t{i}"\nperiod_ms = 1\nwcet_ms = 0.03\n' for i in range(400))
    return f'[machine]\ncpus = 16\n[scheduler]\nkind = "gedf"\n[run]\nhorizon_ms = {LONG_RUN_MS}\n{tasks}'


def test_a_long_run_reports_its_simulated_time_and_an_exception_from_the_callback_stops_it() -> None:
    seen: list[float] = []

    class Enough(Exception):
        pass

    def progress(now_ms: float) -> None:
        seen.append(now_ms)
        if len(seen) == 3:
            raise Enough

    with pytest.raises(Enough):
        critmem.run(_long_run_text(), record_jobs=False, record_segments=False, progress=progress)
    # Called from the running simulation, with its time going forward inside the horizon.
    assert len(seen) == 3 and 0 < seen[0] < seen[1] < seen[2] < LONG_RUN_MS
