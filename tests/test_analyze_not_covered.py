"""`critmem analyze` names what its tests leave out: page-level memory (faults and swap
waits) and a controller; `critmem run` shows their effect."""

from __future__ import annotations

import json

from conftest import EXAMPLES, RM_TEXTBOOK, cli


def _not_covered(path: str) -> list[str]:
    o = cli("analyze", path, "--json")
    assert o.code == 0, o.stderr
    lines: list[str] = json.loads(o.stdout)["not_covered"]
    return lines


def test_a_plain_task_set_leaves_nothing_out() -> None:
    assert _not_covered(str(RM_TEXTBOOK)) == []
    o = cli("analyze", str(RM_TEXTBOOK))
    assert "not covered" not in o.stdout


def test_page_level_memory_is_named_as_outside_the_analysis() -> None:
    lines = _not_covered(str(EXAMPLES / "shared-pages.toml"))
    assert len(lines) == 1
    assert "page faults" in lines[0] and "swap I/O on hdd" in lines[0] and "`critmem run`" in lines[0]


def test_a_controller_is_named_too() -> None:
    lines = _not_covered(str(EXAMPLES / "sara-opencv.toml"))
    assert len(lines) == 2
    assert lines[1].startswith("the sara controller ([control])")


def test_text_output_lists_them_after_the_verdict() -> None:
    o = cli("analyze", str(EXAMPLES / "sara-opencv.toml"))
    assert o.code == 0, o.stderr
    out = " ".join(o.stdout.split())
    verdict_at = out.index("verdict:")
    assert out.index("not covered: page-level memory") > verdict_at
    assert "not covered: the sara controller" in out


def test_check_judges_the_tests_verdicts_alone() -> None:
    # Schedulable by RTA (tau1 40 of 100 ms, tau2 180 of 500 ms) whatever the faults add.
    o = cli("analyze", str(EXAMPLES / "shared-pages.toml"), "--check")
    assert o.code == 0 and "not covered: page-level memory" in " ".join(o.stdout.split())
