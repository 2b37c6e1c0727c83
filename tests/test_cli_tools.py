"""`critmem validate` and `critmem init`: the tools beside the simulator."""

from __future__ import annotations

from pathlib import Path

from conftest import EXAMPLE_FILES, EXAMPLES, WriteScenario, cli, cli_process


def test_validate_accepts_every_example_with_one_line_each() -> None:
    o = cli("validate", *(str(p) for p in EXAMPLE_FILES))
    assert o.code == 0, o.stderr
    assert o.stderr == ""
    lines = o.stdout.splitlines()
    assert len(lines) == len(EXAMPLE_FILES)
    rm = next(line for line in lines if "rm-textbook" in line)
    assert rm.endswith("rm-textbook.toml: ok: rm on 1 CPU, 4 tasks, horizon 360 ms, seed 1"), rm


def test_validate_reports_each_bad_file_and_exits_2(scenario_file: WriteScenario, tmp_path: Path) -> None:
    bad = scenario_file('[scheduler]\nkind = "lottery"\n')
    missing = tmp_path / "missing.toml"
    o = cli_process("validate", str(EXAMPLES / "rm-textbook.toml"), str(bad), str(missing))
    assert o.code == 2
    # One error line however many files fail, naming each.
    errors = o.stderr.splitlines()
    assert len(errors) == 1, errors
    assert errors[0].startswith(f"critmem: error: 2 files do not load: {bad}: scheduler.kind"), errors[0]
    assert errors[0].endswith(f"; {missing}: No such file or directory")
    assert "rm-textbook.toml: ok" in o.stdout
    one = cli("validate", str(missing))
    assert one.code == 2 and one.stderr == f"critmem: error: {missing}: No such file or directory\n"


def test_validate_shows_warnings_on_stderr(scenario_file: WriteScenario) -> None:
    path = scenario_file(
        '[scheduler]\nkind = "rm"\n[run]\nhorizon_ms = 10\n[[task]]\nname = "a"\nperiod_ms = 5\nwcet_ms = 1\noffset_ms = 10\n'
    )
    o = cli("validate", str(path))
    assert o.code == 0
    assert o.stderr.startswith(f"warning: {path}: task[0].offset_ms: ")


def test_init_writes_a_starter_that_runs_and_analyses_without_warnings(tmp_path: Path) -> None:
    path = tmp_path / "mine.toml"
    o = cli("init", str(path))
    assert o.code == 0 and path.exists()
    for command in ("validate", "run", "analyze"):
        r = cli(command, str(path))
        assert r.code == 0 and r.stderr == "", (command, r.stderr)
    # Every section the starter points to is a real key of the format.
    text = path.read_text(encoding="utf-8")
    for section in ("[memory]", "[[group]]", "[control]", "[[resource]]", "[[scheduler.server]]"):
        assert section in text


def test_init_never_overwrites_without_force(tmp_path: Path) -> None:
    path = tmp_path / "mine.toml"
    path.write_text("keep me\n", encoding="utf-8")
    o = cli("init", str(path))
    assert o.code == 2 and "exists; give --force" in o.stderr
    assert path.read_text(encoding="utf-8") == "keep me\n"
    assert cli("init", str(path), "--force").code == 0
    assert path.read_text(encoding="utf-8").startswith("# A critmem scenario")


def test_init_dash_writes_to_stdout() -> None:
    o = cli("init", "-")
    assert o.code == 0 and o.stdout.startswith("# A critmem scenario")
