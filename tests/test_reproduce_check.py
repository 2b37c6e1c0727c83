"""`critmem reproduce PAPER --check`: the terminal summary lists the report's acceptance checks
(name, expected, measured, whether each holds) and the command exits 1 when one does not
hold, naming it on stderr; --json stays the same object."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import cli
from critmem.reproduce.shared_pages import report as shared_pages_report


def test_shared_pages_quick_meets_every_check(tmp_path: Path) -> None:
    o = cli("reproduce", "shared-pages", "--quick", "--check", "--out", str(tmp_path))
    assert o.code == 0, o.stderr
    assert o.stderr == ""
    out = o.stdout
    assert "acceptance checks" in out
    for fragment in ("τ1 minimum reservation (Fig. 8)", "11 MB (paper)", "SPC total for {τ1, τ2} (Table III)", "τ1 with τ2, SPEL (Fig. 9)"):
        assert fragment in " ".join(out.split()), fragment
    assert " NO " not in out


def test_a_check_that_does_not_hold_exits_1_and_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The Table III totals agree with the paper's to the report's two decimals; say they never do.
    monkeypatch.setattr(shared_pages_report, "_close", lambda _model, _formula: False)
    o = cli("reproduce", "shared-pages", "--quick", "--check", "--out", str(tmp_path))
    assert o.code == 1
    assert "NO" in o.stdout
    err = o.stderr.splitlines()
    assert len(err) == 1 and err[0].startswith("critmem: check failed: "), o.stderr
    assert "SPC total for {τ1, τ1} (Table III) (expected 22 MB (paper), measured 22.00 MB)" in err[0]
    assert "minimum reservation" not in err[0]


def test_without_check_the_exit_code_ignores_the_checks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shared_pages_report, "_close", lambda _model, _formula: False)
    o = cli("reproduce", "shared-pages", "--quick", "--out", str(tmp_path))
    assert o.code == 0, o.stderr
    assert "NO" in o.stdout


def test_json_output_is_unchanged_by_check(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shared_pages_report, "_close", lambda _model, _formula: False)
    plain = cli("reproduce", "shared-pages", "--quick", "--json", "--out", str(tmp_path / "a"))
    checked = cli("reproduce", "shared-pages", "--quick", "--json", "--check", "--out", str(tmp_path / "b"))
    assert plain.code == 0 and checked.code == 1

    def stable(text: str) -> dict[str, Any]:
        d: dict[str, Any] = json.loads(text)
        for key in ("table2_ns", "out_dir"):
            d.pop(key)
        return d

    assert stable(plain.stdout) == stable(checked.stdout)
    assert "check failed: " in checked.stderr
