"""`critmem analyze` and `critmem.analyze`: the analyses agree with the textbook and the simulator."""

from __future__ import annotations

import json
import tomllib

import critmem
import pytest
from conftest import EXAMPLES, RM_TEXTBOOK, cli

REPORT_KEYS = {"scenario", "scheduler", "cpus", "total_utilization", "verdict", "tests", "tasks"}
TASK_KEYS = {
    "name", "cpu", "utilization", "wcet_ms", "period_ms", "deadline_ms", "priority_rank",
    "response_time_ms", "schedulable", "tardiness_bound_ms",
}  # fmt: skip
TEST_KEYS = {"name", "cpu", "verdict", "detail"}


def test_rm_textbook_set_is_schedulable_with_responses_1_2_7_18() -> None:
    a = critmem.analyze(RM_TEXTBOOK)
    assert a.verdict == "schedulable"
    assert list(a.tasks["name"]) == ["t1", "t2", "t3", "t4"]
    assert list(a.tasks["response_time_ms"]) == [1.0, 2.0, 7.0, 18.0]
    assert a.tasks["schedulable"].tolist() == [True] * 4
    assert a.tests["name"].tolist() == ["fp-rta"]


def test_analysis_and_simulation_agree_on_the_rm_textbook_set() -> None:
    analysed = critmem.analyze(RM_TEXTBOOK).tasks["response_time_ms"].tolist()
    simulated = critmem.run(RM_TEXTBOOK).tasks["max_response_ms"].tolist()
    assert analysed == simulated


def test_analyze_accepts_a_dict_and_toml_text() -> None:
    text = RM_TEXTBOOK.read_text()
    for scenario in (text, tomllib.loads(text)):
        assert critmem.analyze(scenario).tasks["response_time_ms"].tolist() == [1.0, 2.0, 7.0, 18.0]


def test_overloaded_rm_set_is_reported_not_schedulable() -> None:
    a = critmem.analyze(EXAMPLES / "overload.toml")
    assert a.verdict == "not_schedulable"
    by_task = dict(zip(a.tasks["name"], a.tasks["schedulable"]))
    assert by_task["control"] and by_task["io"] and not by_task["vision"]
    # The simulator agrees: the hard tasks never miss, the soft one does.
    sim = critmem.run(EXAMPLES / "overload.toml").tasks.set_index("name")["deadline_misses"]
    assert sim["control"] == sim["io"] == 0 and sim["vision"] > 0


def test_report_has_the_documented_shape() -> None:
    a = critmem.analyze(RM_TEXTBOOK)
    assert REPORT_KEYS <= a.report.keys()
    assert TASK_KEYS <= set(a.tasks.columns)
    assert TEST_KEYS <= set(a.tests.columns)
    assert a.to_json() + "\n" == cli("analyze", str(RM_TEXTBOOK), "--json").stdout


def test_cli_analyze_prints_tasks_tests_and_the_verdict() -> None:
    o = cli("analyze", str(RM_TEXTBOOK))
    assert o.code == 0 and o.stderr == ""
    lines = o.stdout.splitlines()
    assert lines[0] == f"{RM_TEXTBOOK}: rm on 1 CPU, total utilization 0.950"
    t4 = next(line.split() for line in lines if line.startswith("t4 "))
    # task cpu util wcet period deadline rank response meets-deadline tardiness-bound
    assert t4 == ["t4", "0", "0.167", "3.000", "18.000", "18.000", "3", "18.000", "yes", "-"]
    assert any(line.startswith("fp-rta") and "schedulable" in line for line in lines)
    assert lines[-1] == "verdict: schedulable"


@pytest.mark.parametrize("example", ["rm-textbook.toml", "quickstart.toml"])
def test_cli_analyze_json_is_the_report_byte_for_byte(example: str) -> None:
    o = cli("analyze", str(EXAMPLES / example), "--json")
    assert o.code == 0
    assert o.stdout == critmem.analyze(EXAMPLES / example).to_json() + "\n"
    assert REPORT_KEYS <= json.loads(o.stdout).keys()


def test_analyze_check_exits_1_only_when_a_test_fails() -> None:
    passing = cli("analyze", str(EXAMPLES / "rm-textbook.toml"), "--check")
    assert passing.code == 0 and passing.stderr == ""
    failing = cli("analyze", str(EXAMPLES / "overload.toml"), "--check", "--json")
    assert failing.code == 1
    assert json.loads(failing.stdout)["verdict"] == "not_schedulable"
    assert failing.stderr.splitlines() == ["critmem: check failed: fp-rta (CPU 0)"]
    # Without --check the same report exits 0.
    assert cli("analyze", str(EXAMPLES / "overload.toml")).code == 0


def test_cli_analyze_prints_blocking_terms_for_shared_resources() -> None:
    o = cli("analyze", str(EXAMPLES / "resources-inversion.toml"))
    assert o.code == 0 and o.stderr == ""
    rows = {line.split()[0]: line.split() for line in o.stdout.splitlines() if "bus×1" in line}
    # task, section (resource×units, ms held), blocking ms, response ms, meets deadline
    assert rows["hi"] == ["hi", "bus×1", "1.000", "4.000", "6.000", "yes"]
    assert rows["lo"] == ["lo", "bus×1", "4.000", "0.000", "17.000", "yes"]
    report = json.loads(cli("analyze", str(EXAMPLES / "resources-inversion.toml"), "--json").stdout)
    assert [t["blocking_ms"] for t in report["resources"]["tasks"]] == [4.0, 4.0, 0.0]
    assert report["tests"][0]["name"] == "fp-rta-blocking"


def test_cli_analyze_prints_a_row_per_server() -> None:
    o = cli("analyze", str(EXAMPLES / "servers-hires-fig6.toml"))
    assert o.code == 0
    rt25 = next(line.split() for line in o.stdout.splitlines() if line.startswith("rt25 ") and "deferrable" in line)
    # server parent kind cpu budget period response guaranteed blackout share whole-budget
    assert rt25 == ["rt25", "root", "deferrable", "0", "4.000", "25.000", "17.000", "4.000", "42.000", "0.160", "yes"]
    report = json.loads(cli("analyze", str(EXAMPLES / "servers-hires-fig6.toml"), "--json").stdout)
    assert [s["verdict"] for s in report["servers"]] == ["schedulable"] * 4
    assert "resources" not in report


def test_analyze_leaves_component_stack_waits_out_and_says_so() -> None:
    report = json.loads(cli("analyze", str(EXAMPLES / "components-calltree.toml"), "--json").stdout)
    assert report["verdict"] == "unknown"
    assert [(t["name"], t["verdict"]) for t in report["tests"]] == [("components", "unknown")]
    assert 'component "fs" has 1 execution stack,' in report["tests"][0]["detail"]
