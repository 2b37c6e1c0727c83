"""The JSON Schemas of critmem's `--json` outputs: valid draft 2020-12 schemas, the files
scripts/output_schemas.py writes, printed by `critmem schema --output`, met by every bundled
example's `run --json` and `analyze --json`, and strict: a mangled output fails.

The quick reproductions are checked where their tests already run them: test_golden.py
(shared-pages, sara, mc2), test_reproduce_hires.py, test_reproduce_tmem.py, test_study_mc2.py;
the Linux outputs in the real-machine tests and below on outputs built as the code builds them.
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import critmem
import critmem.reproduce
import pytest
from conftest import EXAMPLE_FILES, ROOT, assert_matches_output_schema, assert_output_schema_rejects_mangling, cli
from critmem import _core, output_schema, output_schema_names
from jsonschema import Draft202012Validator

SCHEMA_DIR = ROOT / "python" / "critmem" / "schemas" / "output"
GOLDEN_RUNS = sorted(p for p in (ROOT / "tests" / "golden").glob("run-*.json") if p.name != "run-out-sha256.json")
# The sections a scenario declares, each shown only when it does: run --json key → declared?
SECTIONS: dict[str, Callable[[dict[str, Any]], bool]] = {
    "memory": lambda s: "memory" in s,
    "control": lambda s: "control" in s,
    "servers": lambda s: bool(s.get("scheduler", {}).get("server")),
    "components": lambda s: bool(s.get("component")),
    "tmem": lambda s: "tmem" in s,
    "io": lambda s: "io" in s,
}


def _ids(paths: list[Path]) -> list[str]:
    return [p.stem for p in paths]


def _json_of_every_example(command: str) -> dict[str, dict[str, Any]]:
    """`critmem COMMAND EXAMPLE --json` of every bundled example, by name."""
    out = {}
    for path in EXAMPLE_FILES:
        o = cli(command, str(path), "--json")
        assert o.code == 0, o.stderr
        out[path.stem] = json.loads(o.stdout)
    return out


@pytest.fixture(scope="module")
def runs() -> dict[str, dict[str, Any]]:
    """`critmem run EXAMPLE --json` of every bundled example, by name."""
    return _json_of_every_example("run")


@pytest.fixture(scope="module")
def analyses() -> dict[str, dict[str, Any]]:
    """`critmem analyze EXAMPLE --json` of every bundled example, by name."""
    return _json_of_every_example("analyze")


# ---------------------------------------------------------------------------------------
# The schemas themselves


@pytest.mark.parametrize("name", output_schema_names())
def test_every_schema_is_a_valid_draft_2020_12_schema(name: str) -> None:
    schema = output_schema(name)
    Draft202012Validator.check_schema(schema)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["type"] == "object" and schema["additionalProperties"] is False and schema["required"]


def test_the_files_are_what_the_definitions_write() -> None:
    p = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "output_schemas.py"), "--check"], capture_output=True, text=True, timeout=60, check=False
    )
    assert p.returncode == 0, f"{p.stderr}run scripts/output_schemas.py to write them"


def test_the_names_are_the_packaged_files() -> None:
    files = sorted(p.name.removesuffix(".schema.json") for p in SCHEMA_DIR.glob("*.schema.json"))
    assert list(output_schema_names()) == files
    assert critmem.output_schema_names() == output_schema_names()
    assert {"run", "analyze", "linux-run", "study-mc2", "reproduce-sara-linux"} <= set(files)
    assert {f"reproduce-{p}" for p in critmem.reproduce.PAPERS} <= set(files)


def test_an_unknown_name_is_a_key_error_naming_the_known_ones() -> None:
    with pytest.raises(KeyError, match="known: analyze, linux-run"):
        output_schema("nope")


def test_each_call_gives_a_fresh_dict() -> None:
    output_schema("run")["required"].clear()
    assert output_schema("run")["required"]


def test_optional_sections_are_not_required() -> None:
    assert not set(SECTIONS) & set(output_schema("run")["required"])
    assert {"resources", "servers"}.isdisjoint(output_schema("analyze")["required"])


# ---------------------------------------------------------------------------------------
# critmem schema


def test_schema_without_output_prints_the_scenario_schema() -> None:
    o = cli("schema")
    assert o.code == 0 and o.stderr == ""
    assert o.stdout == _core.scenario_schema()


@pytest.mark.parametrize("name", output_schema_names())
def test_schema_output_prints_the_packaged_file(name: str) -> None:
    o = cli("schema", "--output", name)
    assert o.code == 0 and o.stderr == ""
    assert o.stdout == (SCHEMA_DIR / f"{name}.schema.json").read_text(encoding="utf-8")
    assert json.loads(o.stdout) == output_schema(name)


def test_schema_output_of_an_unknown_kind_is_a_usage_error() -> None:
    o = cli("schema", "--output", "nope")
    assert o.code == 2 and o.stdout == ""
    assert "invalid choice: 'nope'" in o.stderr


# ---------------------------------------------------------------------------------------
# Every bundled example's outputs


@pytest.mark.parametrize("example", _ids(EXAMPLE_FILES))
def test_run_json_of_every_bundled_example_matches_its_schema(runs: dict[str, dict[str, Any]], example: str) -> None:
    assert_matches_output_schema("run", runs[example])


@pytest.mark.parametrize("golden", GOLDEN_RUNS, ids=_ids(GOLDEN_RUNS))
def test_run_json_with_traces_matches_its_schema(golden: Path) -> None:
    # The golden outputs are `run --json --out DIR`: with the traces section.
    data = json.loads(golden.read_text(encoding="utf-8"))
    assert "traces" in data
    assert_matches_output_schema("run", data)


@pytest.mark.parametrize("example", _ids(EXAMPLE_FILES))
def test_analyze_json_of_every_bundled_example_matches_its_schema(analyses: dict[str, dict[str, Any]], example: str) -> None:
    assert_matches_output_schema("analyze", analyses[example])


@pytest.mark.parametrize("path", EXAMPLE_FILES, ids=_ids(EXAMPLE_FILES))
def test_run_shows_a_section_exactly_when_the_scenario_declares_it(
    runs: dict[str, dict[str, Any]], analyses: dict[str, dict[str, Any]], path: Path
) -> None:
    scenario = tomllib.loads(path.read_text(encoding="utf-8"))
    declared = {key for key, declares in SECTIONS.items() if declares(scenario)}
    assert set(SECTIONS) & set(runs[path.stem]) == declared
    # The analysis shows the servers it analyses: a hierarchy's, never undeclared ones.
    if "servers" in analyses[path.stem]:
        assert "servers" in declared


def test_the_examples_cover_every_section() -> None:
    covered = {key for p in EXAMPLE_FILES for key, declares in SECTIONS.items() if declares(tomllib.loads(p.read_text(encoding="utf-8")))}
    assert covered == set(SECTIONS)


# ---------------------------------------------------------------------------------------
# Strictness: a mangled output fails


@pytest.mark.parametrize("example", ["quickstart", "hires-io-demux", "shared-pages", "mc2-memory-layout"])
def test_run_schema_rejects_a_change_at_any_node(runs: dict[str, dict[str, Any]], example: str) -> None:
    assert_output_schema_rejects_mangling("run", runs[example])


@pytest.mark.parametrize("example", ["resources-inversion", "servers-hires-fig6", "quickstart"])
def test_analyze_schema_rejects_a_change_at_any_node(analyses: dict[str, dict[str, Any]], example: str) -> None:
    assert_output_schema_rejects_mangling("analyze", analyses[example])


def _without(*path: str | int) -> Callable[[dict[str, Any]], None]:
    def change(d: Any) -> None:
        for step in path[:-1]:
            d = d[step]
        del d[path[-1]]

    return change


def _set(value: Any, *path: str | int) -> Callable[[dict[str, Any]], None]:
    def change(d: Any) -> None:
        for step in path[:-1]:
            d = d[step]
        d[path[-1]] = value

    return change


RUN_MANGLINGS = {
    "no tasks": _without("tasks"),
    "a task without hit_ratio": _without("tasks", 0, "hit_ratio"),
    "a server without consumed_ms": _without("servers", 0, "consumed_ms"),
    "memory without swap": _without("memory", "swap"),
    "control without ticks": _without("control", "ticks"),
    "tmem without caches": _without("tmem", "caches"),
    "cpus as text": _set("2", "cpus"),
    "an unknown criticality": _set("E", "tasks", 0, "criticality"),
    "a hit ratio above 1": _set(1.5, "tasks", 0, "hit_ratio"),
    "a negative job count": _set(-1, "tasks", 0, "jobs"),
    "null jobs": _set(None, "tasks", 0, "jobs"),
    "a fractional fault count": _set(1.5, "memory", "tasks", 0, "minor_faults"),
    "an unknown server kind": _set("sporadic", "servers", 0, "kind"),
    "an empty servers list": _set([], "servers"),
}


@pytest.mark.parametrize("change", RUN_MANGLINGS.values(), ids=RUN_MANGLINGS.keys())
def test_a_mangled_run_output_fails(runs: dict[str, dict[str, Any]], change: Callable[[dict[str, Any]], None]) -> None:
    data = copy.deepcopy(runs["quickstart"])
    assert_matches_output_schema("run", data)
    change(data)
    assert not Draft202012Validator(output_schema("run")).is_valid(data)


ANALYZE_MANGLINGS = {
    "no verdict": _without("verdict"),
    "no not_covered": _without("not_covered"),
    "an unknown verdict": _set("maybe", "verdict"),
    "a test's unknown verdict": _set("maybe", "tests", 0, "verdict"),
    "a task without wcet_ms": _without("tasks", 0, "wcet_ms"),
    "schedulable as text": _set("yes", "tasks", 0, "schedulable"),
}


@pytest.mark.parametrize("change", ANALYZE_MANGLINGS.values(), ids=ANALYZE_MANGLINGS.keys())
def test_a_mangled_analysis_fails(analyses: dict[str, dict[str, Any]], change: Callable[[dict[str, Any]], None]) -> None:
    data = copy.deepcopy(analyses["quickstart"])
    change(data)
    assert not Draft202012Validator(output_schema("analyze")).is_valid(data)


# ---------------------------------------------------------------------------------------
# Linux outputs, as their code builds them (the real runs need root: test_linux_cli.py and
# test_reproduce_sara_linux.py check those where they can run)


def _linux_summary() -> dict[str, Any]:
    """A `critmem run --platform linux --json` summary with every kind of task: a soft real-time
    worker whose jobs are counted, a throughput worker, and a command stopped at the end."""
    figures = {
        "jobs": 12, "completed": 11, "deadline_misses": 1, "aborted": 1, "dropped": 1, "killed": 0, "skipped": 0, "pending": 0,
        "hit_ratio": 11 / 12, "max_response_ms": 480.5, "mean_response_ms": 300.25, "max_tardiness_ms": 0.0, "throughput_per_s": 2.2,
    }  # fmt: skip
    uncounted = dict.fromkeys(figures)
    common = {"criticality": "C", "cpu": None, "exit_code": None, "exit_signal": None, "exited_early_s": None}
    tasks = [
        {"name": "video", **common, "group": "srt", "worker": "critmem-srt-worker", "command": None, "reports_jobs": True, **figures,
         "verified_mib": None, "verified_mib_per_s": None, "work_units": None, "work_units_per_s": None, "checksum_failures": 0,
         "stopped_by": None},
        {"name": "scan", **common, "criticality": "D", "group": "nrt", "worker": "critmem-nrt-worker", "command": None,
         "reports_jobs": False, **uncounted, "verified_mib": 640, "verified_mib_per_s": 128.0, "work_units": None,
         "work_units_per_s": None, "checksum_failures": 0, "stopped_by": None},
        {"name": "tool", **common, "criticality": "D", "group": "nrt", "worker": None, "command": ["python3", "-m", "tool"],
         "reports_jobs": False, **uncounted, "verified_mib": None, "verified_mib_per_s": None, "work_units": 42,
         "work_units_per_s": 8.4, "checksum_failures": None, "stopped_by": "SIGTERM"},
    ]  # fmt: skip
    # The row crates/linux's run_summary test pins, as a job of `video`.
    job = {"task": "video", "job": 3, "release_ms": -0.5, "deadline_ms": 2.5, "start_ms": 1.0, "completion_ms": 3.0, "drop_ms": None,
           "response_ms": 2.5, "tardiness_ms": 0.5, "missed": True, "outcome": "completed", "stall_ms": 0.25, "cpu_ms": 0.9,
           "cpu_wait_ms": None}  # fmt: skip
    psi = {"memory_some_us": 1000, "memory_full_us": 0, "io_some_us": 10, "io_full_us": 0, "cpu_some_us": 5}
    jobs = {"jobs_reported": 12, "jobs_completed": 11, "jobs_dropped": 1, "jobs_pending": 0, "deadline_hits": 11, "deadline_misses": 1}
    no_jobs = dict.fromkeys(jobs, 0)
    sample = {"usage_bytes": 40 << 20, "max_bytes": None, "high_bytes": 64 << 20, "memory_some_us": 10, "io_some_us": 0,
              "cpu_some_us": 3, "cpu_usage_us": 90_000, "cpu_millicpus": 500, "io_read_bytes_per_s": None, "io_write_bytes_per_s": None}  # fmt: skip
    return {
        "scenario": "linux-sara.toml", "platform": "linux", "scheduler": "linux", "cpus": 2, "horizon_ms": 5000.0, "seed": 1,
        "controller": "sara", "backend": "cgroup v2", "tasks": tasks, "jobs": [job],
        "traces": {"limit": 100_000, "jobs": 1, "jobs_left_out": 0},
        "memory": {"total_bytes": 256 << 20, "groups": [{"name": "srt", **psi, **jobs}, {"name": "nrt", **psi, **no_jobs}]},
        "control": {
            "interval_ms": 100.0, "ticks": 50, "tick_cost_mean_us": 50.0, "tick_cost_p99_us": 90.0, "tick_cpu_mean_us": 21.0,
            "writes_ok": 3, "writes_failed": 0, "write_cpu_ms": 12.5, "oom_rescues": 0, "drops_requested": 1,
            "leftover_processes_killed": 1, "restored_files": 4, "removed_dirs": 2,
            "timeline": [{"t_ms": 100.0, "groups": [sample, {**sample, "max_bytes": 200 << 20}], "work_units": [None, None, 3]}],
        },
    }  # fmt: skip


def test_a_linux_run_summary_matches_its_schema() -> None:
    summary = _linux_summary()
    assert_matches_output_schema("linux-run", summary)
    assert_output_schema_rejects_mangling("linux-run", summary)


LINUX_MANGLINGS = {
    "a pinned cpu": _set(0, "tasks", 0, "cpu"),
    "an unknown worker": _set("my-worker", "tasks", 0, "worker"),
    "an unknown outcome": _set("aborted", "jobs", 0, "outcome"),
    "another platform": _set("sim", "platform"),
    "no control": _without("control"),
    "a task without checksum_failures": _without("tasks", 1, "checksum_failures"),
}


@pytest.mark.parametrize("change", LINUX_MANGLINGS.values(), ids=LINUX_MANGLINGS.keys())
def test_a_mangled_linux_run_summary_fails(change: Callable[[dict[str, Any]], None]) -> None:
    data = _linux_summary()
    change(data)
    assert not Draft202012Validator(output_schema("linux-run")).is_valid(data)


def test_the_sara_linux_headline_matches_its_schema() -> None:
    from critmem.reproduce.sara import machine

    def run(controller: str, pct: int, hit: float | None) -> dict[str, Any]:
        return {
            "workload": "speech", "nrt": "graph", "memory_pct": pct, "controller": controller,
            "machine": {"hit_ratio": hit, "keepable_hit_ratio": hit, "peak_jobs": 0, "peak_job_misses": 0, "throughput_per_s": 0.4},
            "simulator": {"hit_ratio": 1.0, "throughput_per_s": None},
        }  # fmt: skip

    data = {
        "profiles": {"speech": {"bcet_ms": 1600.0}, "graph": {"bcet_ms": 900.0}},
        "runs": [run("greedy", 60, 1.0), run("sara", 60, None), run("tailguard", 60, 1.0), run("greedy", 80, 0.9), run("sara", 80, 0.5),
                 run("tailguard", 80, None)],
    }  # fmt: skip
    summary = {
        **machine.headline(data),
        "out_dir": "results/reproduce/sara",
        "files": ["report.md", "results.json", "fig11.png", "fig_keepable.png"],
    }
    assert [e["config"] for e in summary["critmem_controller_judgement"]] == ["speech/60%", "speech/80%"]
    assert_matches_output_schema("reproduce-sara-linux", summary)
    assert_output_schema_rejects_mangling("reproduce-sara-linux", summary)
