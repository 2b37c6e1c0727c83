"""Bad input of every kind ends as one `critmem: error:` line on stderr and exit code 2."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import critmem
import critmem.cli.run as run_command
import pytest
from conftest import CRITMEM, EXAMPLES, RM_TEXTBOOK, Outcome, WriteScenario, assert_one_line_error, cli, cli_process

GOOD = """\
[machine]
cpus = 1
[scheduler]
kind = "rm"
[run]
horizon_ms = 40
[[task]]
name = "a"
wcet_ms = 1
period_ms = 4
"""

MEM = GOOD.replace("[[task]]", "[memory]\ntotal_mb = 64\n[[task]]") + "private_mb = 16\n"
# Four more tasks of 64 GiB private memory each: 5 × 2^24 pages mapped.
MANY_BIG_TASKS = "".join(f'[[task]]\nname = "big{i}"\nwcet_ms = 1\nperiod_ms = 40\nprivate_mb = 65536\n' for i in range(4))

# A server reserving more memory than the server it runs under holds.
NESTED_MEMORY = """\
[scheduler]
kind = "fp"
[run]
horizon_ms = 40
[memory]
total_mb = 64
[[scheduler.server]]
name = "outer"
kind = "deferrable"
budget_ms = 4
period_ms = 10
priority = 0
policy = "fp"
reserve = { memory_mib = 8 }
[[scheduler.server]]
name = "inner"
parent = "outer"
kind = "deferrable"
budget_ms = 2
period_ms = 10
priority = 0
policy = "fp"
reserve = { memory_mib = 9 }
[[task]]
name = "a"
server = "inner"
priority = 0
wcet_ms = 1
period_ms = 10
private_mb = 1
"""

SARA = (EXAMPLES / "linux-sara.toml").read_text(encoding="utf-8")
assert 'group = "nrt"' in SARA and "horizon_ms = 1000" in SARA and "interval_ms = 5" in SARA

# (id, file content, extra CLI arguments, fragments the error line must contain)
BAD_SCENARIOS: list[tuple[str, str | bytes, list[str], list[str]]] = [
    ("unknown key", GOOD.replace("period_ms = 4", "period_ms = 4\nperiodd_ms = 4"), [], ["task[0]", "periodd_ms"]),
    ("unknown scheduler", GOOD.replace('"rm"', '"lottery"'), [], ["scheduler.kind", "unknown scheduler", "lottery"]),
    ("missing period", GOOD.replace("period_ms = 4", ""), [], ["task[0].period_ms", "missing"]),
    ("period -1", GOOD.replace("period_ms = 4", "period_ms = -1"), [], ["task[0].period_ms", "must not be negative"]),
    ("period 0", GOOD.replace("period_ms = 4", "period_ms = 0"), [], ["task[0].period_ms", "must be greater than 0"]),
    ("deadline 0", GOOD + "deadline_ms = 0\n", [], ["task[0].deadline_ms", "must be greater than 0"]),
    ("cpus 0", GOOD.replace("cpus = 1", "cpus = 0"), [], ["machine.cpus", "at least 1"]),
    (
        "pinned to CPU 5 of 2",
        GOOD.replace("cpus = 1", "cpus = 2").replace('"rm"', '"pfp"') + "cpu = 5\n",
        [],
        ["task[0].cpu", "CPU 5 does not exist"],
    ),
    ("TOML syntax error", GOOD.replace("cpus = 1", "cpus = = 1"), [], ["line 2, column"]),
    ("empty file", "", [], ["scheduler", "missing section"]),
    ("binary garbage", b"\x00\xff\xfe\x89PNG\r\n\x1a\n\x00\x00", [], ["not UTF-8"]),
    ("control-character garbage", "\x00\x01\x02 [[[ = ]]]\x7f", [], ["line 1"]),
    # Sizes the loader refuses rather than letting the simulation exhaust this machine's memory.
    (
        "per-job references over the cap",
        MEM + 'access = [{ pattern = "random", refs = 2147483647 }]\n',
        [],
        ["task[0].access", "references per job"],
    ),
    (
        "sweep passes over the cap",
        MEM + 'access = [{ pattern = "sweep", passes = 2147483647 }]\n',
        [],
        ["task[0].access", "references per job"],
    ),
    (
        "timeline samples over the cap",
        MEM.replace("total_mb = 64", "total_mb = 64\nsample_ms = 0.000001"),
        [],
        ["memory.sample_ms", "larger sample_ms"],
    ),
    ("physical memory over the cap", MEM.replace("total_mb = 64", "total_mb = 4000000"), [], ["memory.total_mb", "too large"]),
    ("private memory over the cap", MEM.replace("private_mb = 16", "private_mb = 8e6"), [], ["task[0].private_mb", "too large"]),
    (
        "regions over the cap",
        MEM + "".join(f'[[region]]\nname = "r{i}"\nsize_mb = 65536\n' for i in range(5)),
        [],
        ["task", "regions and tasks map"],
    ),
    ("mapped pages over the cap", MEM.replace("private_mb = 16", "private_mb = 65536") + MANY_BIG_TASKS, [], ["task", "2^26"]),
    (
        "server memory over its parent's",
        NESTED_MEMORY,
        [],
        ["scheduler.server[1].reserve.memory_mib", 'server "inner" reserves 9.00 MiB hard', 'more than server "outer" has left'],
    ),
    ("bad --seed value", GOOD, ["--seed", "twelve"], ["argument --seed", "twelve"]),
    ("negative --seed", GOOD, ["--seed", "-3"], ["argument --seed"]),
    ("bad --horizon-ms", GOOD, ["--horizon-ms", "-5"], ["argument --horizon-ms"]),
    ("unknown flag", GOOD, ["--frobnicate"], ["unrecognized arguments: --frobnicate"]),
    # Misconfigurations a file allows syntactically but that would silently run something else.
    ("non-real-time group misspelt", SARA.replace('group = "nrt"', 'group = "nrr"'), [], ["task[1].group", '"nrr"', '"nrt"']),
    ("soft real-time group misspelt", SARA.replace('group = "srt"', 'group = "str"'), [], ["task[0].group", '"str"', '"srt"']),
    ("tick longer than the horizon", SARA.replace("horizon_ms = 1000", "horizon_ms = 3"), [], ["control.interval_ms", "never run"]),
    (
        "tick that would take hours",
        SARA.replace("interval_ms = 5", "interval_ms = 0.000001"),
        [],
        ["control.interval_ms", "longer interval"],
    ),
    # One job program: a step naming what the file does not declare, and SRP with a job that can fault.
    (
        "program step on an unknown region",
        MEM.replace("private_mb = 16\n", "")
        + 'private_mb = 1\nprogram = [{ access = [{ pattern = "sweep", region = "tiles", mb = 1 }], compute_ms = 1 }]\n',
        [],
        ["task[0].program[0].access[0].region", 'no region named "tiles"'],
    ),
    (
        "program step on an unknown resource",
        GOOD + 'program = [{ lock = "bus" }, { compute_ms = 1 }, { unlock = "bus" }]\n',
        [],
        ["task[0].program[0].lock", 'unknown resource "bus"'],
    ),
    (
        "program step calling an unknown component",
        GOOD + '[[component]]\nname = "fs"\n[[task]]\nname = "b"\nperiod_ms = 4\nprogram = [{ compute_ms = 1 }, { call = "db" }]\n',
        [],
        ["task[1].program[1].call", 'unknown component "db"'],
    ),
    (
        "SRP job that can fault",
        MEM.replace("private_mb = 16\n", "").replace("[memory]", '[[resource]]\nname = "bus"\nprotocol = "srp"\n[memory]')
        + 'private_mb = 1\nprogram = [{ lock = "bus" }, { access = [{ pattern = "sweep", mb = 1 }], compute_ms = 1 }, { unlock = "bus" }]\n',
        [],
        ["task[0].program[1].access", 'srp resource "bus"', "never suspend"],
    ),
]


def _check(o: Outcome, path: Path, fragments: list[str]) -> None:
    file_errors = not any(f.startswith(("argument", "unrecognized")) for f in fragments)
    # Scenario errors name the file first, then the key and the reason.
    assert_one_line_error(o, *fragments, *([f"critmem: error: {path}: "] if file_errors else []))


@pytest.mark.parametrize(("content", "extra", "fragments"), [c[1:] for c in BAD_SCENARIOS], ids=[c[0] for c in BAD_SCENARIOS])
def test_bad_scenario_is_one_line_and_exit_2(
    scenario_file: WriteScenario, content: str | bytes, extra: list[str], fragments: list[str]
) -> None:
    path = scenario_file(content)
    _check(cli("run", str(path), *extra), path, fragments)
    if not extra:
        _check(cli("analyze", str(path)), path, fragments)


@pytest.mark.parametrize(("content", "extra", "fragments"), [c[1:] for c in BAD_SCENARIOS], ids=[c[0] for c in BAD_SCENARIOS])
def test_bad_scenario_through_the_console_script(
    scenario_file: WriteScenario, content: str | bytes, extra: list[str], fragments: list[str]
) -> None:
    path = scenario_file(content)
    _check(cli_process("run", str(path), *extra), path, fragments)


def test_missing_file_is_a_clean_error_not_a_parse_error(tmp_path: Path) -> None:
    missing = tmp_path / "nope.toml"
    for o in (cli("run", str(missing)), cli_process("run", str(missing)), cli("analyze", str(missing))):
        assert_one_line_error(o, str(missing), "No such file or directory")


def test_directory_as_file_is_a_clean_error(tmp_path: Path) -> None:
    for o in (cli("run", str(tmp_path)), cli_process("run", str(tmp_path)), cli("analyze", str(tmp_path))):
        assert_one_line_error(o, str(tmp_path), "is a directory")


def test_empty_name_and_endless_files_are_clean_errors() -> None:
    for o in (cli("run", ""), cli("analyze", "")):
        assert_one_line_error(o, "''", "name is empty")
    # /dev/zero never ends: the reader stops at its cap instead of filling memory.
    for o in (cli("run", "/dev/zero"), cli_process("analyze", "/dev/zero")):
        assert_one_line_error(o, "/dev/zero", "too large for a scenario file")


def test_non_finite_controller_parameters_are_refused_by_name(scenario_file: WriteScenario) -> None:
    text = (EXAMPLES / "sara-opencv.toml").read_text(encoding="utf-8")
    assert "[control]\n" in text
    for value in ("nan", "inf", "-inf"):
        path = scenario_file(text.replace("[control]\n", f"[control]\nconfig = {{ step_up_bytes = {value} }}\n"))
        assert_one_line_error(cli("analyze", str(path)), "control.config.step_up_bytes", "finite")


def test_an_error_echoing_a_huge_value_stays_a_readable_line(scenario_file: WriteScenario) -> None:
    path = scenario_file(GOOD.replace('"rm"', '"' + "x" * 100_000 + '"'))
    o = cli("run", str(path))
    assert_one_line_error(o, "scheduler.kind", "more characters")
    assert len(o.stderr) < 2200, len(o.stderr)


def test_an_error_about_a_very_long_path_still_says_what_is_wrong(tmp_path: Path) -> None:
    deep = tmp_path / "/".join(["d" * 200] * 12)
    deep.mkdir(parents=True)
    path = deep / "s.toml"
    path.write_text(GOOD.replace('"rm"', '"nope"'), encoding="utf-8")
    o = cli("run", str(path))
    assert_one_line_error(o, "more characters", "scheduler.kind")
    assert len(o.stderr) < 2200, len(o.stderr)


def test_unwritable_out_folder_is_a_clean_error(tmp_path: Path) -> None:
    # Tests may run as root, which ignores permission bits; a file in the way never yields.
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    for out, reason in ((blocker, "exists and is not a folder"), (blocker / "results", "Not a directory")):
        o = cli("run", str(RM_TEXTBOOK), "--out", str(out))
        assert_one_line_error(o, "cannot write results to", str(out), reason)
    assert_one_line_error(cli("reproduce", "shared-pages", "--out", str(blocker)), "exists and is not a folder")


def test_an_out_folder_that_is_a_broken_or_looping_link_is_named_as_such(tmp_path: Path) -> None:
    dangling = tmp_path / "dangling"
    dangling.symlink_to(tmp_path / "gone")
    looping = tmp_path / "loop"
    looping.symlink_to(looping)
    for out, reason in ((dangling, "symbolic link to"), (looping, "symbolic link that loops")):
        o = cli("run", str(RM_TEXTBOOK), "--out", str(out))
        assert_one_line_error(o, "cannot write results to", str(out), reason)
    assert "which does not exist" in cli("run", str(RM_TEXTBOOK), "--out", str(dangling)).stderr
    # A link to an existing folder is a folder.
    real = tmp_path / "real"
    real.mkdir()
    linked = tmp_path / "linked"
    linked.symlink_to(real)
    assert cli("run", str(RM_TEXTBOOK), "--out", str(linked)).code == 0
    assert (real / "summary.json").is_file()


@pytest.mark.parametrize(
    ("argv", "fragments"),
    [
        ([], ["required: COMMAND"]),
        (["frobnicate"], ["invalid choice: 'frobnicate'"]),
        (["run"], ["required: FILE"]),
        (["analyze", str(RM_TEXTBOOK), "--seed", "3"], ["unrecognized arguments: --seed 3", "see 'critmem analyze --help'"]),
        (["reproduce", "sara", "--bogus"], ["unrecognized arguments: --bogus", "see 'critmem reproduce --help'"]),
        (["run", str(RM_TEXTBOOK), "--out", ""], ["argument --out", "empty string"]),
    ],
    ids=["no command", "unknown command", "run without FILE", "analyze with a run flag", "reproduce with an unknown flag", "empty --out"],
)
def test_bad_command_line_is_one_line_and_exit_2(argv: list[str], fragments: list[str]) -> None:
    assert_one_line_error(cli(*argv), *fragments, "--help")


def test_help_and_version_exit_0_with_an_example() -> None:
    for argv in (["--help"], ["run", "--help"], ["analyze", "--help"]):
        o = cli(*argv)
        assert o.code == 0
        assert "examples:" in o.stdout and "critmem " in o.stdout
    o = cli("--version")
    assert o.code == 0 and o.stdout.startswith("critmem 0.")


@pytest.mark.parametrize(
    "argv",
    [["run", str(RM_TEXTBOOK)], ["run", str(RM_TEXTBOOK), "--json"], ["analyze", str(RM_TEXTBOOK), "--json"]],
    ids=["table", "json", "analyze json"],
)
def test_stdout_closed_by_its_reader_ends_quietly_with_exit_1(argv: list[str]) -> None:
    # `critmem run X | head` once printed "critmem: error: Broken pipe" (exit 2) after --json,
    # and a table ended at exit 1 only because rich handles it; both now end the same way.
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before critmem writes anything
    try:
        p = subprocess.run([str(CRITMEM), *argv], stdout=write_end, stderr=subprocess.PIPE, text=True, timeout=120, check=False)
    finally:
        os.close(write_end)
    assert (p.returncode, p.stderr) == (1, "")


def test_a_broken_pipe_that_is_not_stdout_is_still_a_one_line_error(monkeypatch: pytest.MonkeyPatch) -> None:
    def handler(_args: object) -> int:
        raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setattr(run_command, "_cmd_run", handler)
    assert_one_line_error(cli("run", str(RM_TEXTBOOK)), "Broken pipe")


def test_a_large_output_cut_short_by_its_reader_ends_quietly_with_exit_1(scenario_file: WriteScenario) -> None:
    # Far more than a pipe holds (64 KiB): critmem is blocked writing when the reader leaves,
    # and the write can return short without raising; that too must not look like success.
    many = GOOD + "".join(f'[[task]]\nname = "t{i}"\nwcet_ms = 1\nperiod_ms = 40\n' for i in range(3000))
    path = scenario_file(many)
    for argv in ([str(path), "--json"], [str(path)]):
        with subprocess.Popen([str(CRITMEM), "run", *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE) as p:
            assert p.stdout is not None and p.stderr is not None
            assert len(p.stdout.read(10)) == 10
            p.stdout.close()
            err = p.stderr.read()
            assert (p.wait(timeout=120), err) == (1, b""), argv


def test_a_file_name_that_is_not_utf8_runs_and_is_named_with_a_replacement_character(tmp_path: Path) -> None:
    good, bad = tmp_path / os.fsdecode(b"good\xff.toml"), tmp_path / os.fsdecode(b"bad\xff.toml")
    good.write_text(RM_TEXTBOOK.read_text(encoding="utf-8"), encoding="utf-8")
    bad.write_text("x =", encoding="utf-8")
    for command in ("run", "analyze"):
        ran = subprocess.run([str(CRITMEM), command, os.fsencode(good)], capture_output=True, timeout=120, check=False)
        assert ran.returncode == 0, ran.stderr
        assert "good\N{REPLACEMENT CHARACTER}.toml" in ran.stdout.decode("utf-8").splitlines()[0]
        failed = subprocess.run([str(CRITMEM), command, os.fsencode(bad)], capture_output=True, timeout=120, check=False)
        err = failed.stderr.decode("utf-8")
        assert failed.returncode == 2 and len(err.splitlines()) == 1 and "bad\N{REPLACEMENT CHARACTER}.toml: line 1" in err, err


# (id, file content, fragments the warning line must contain)
WARNED_SCENARIOS: list[tuple[str, str, list[str]]] = [
    (
        "equal fixed priorities",
        GOOD.replace('"rm"', '"fp"') + 'priority = 1\n[[task]]\nname = "b"\nwcet_ms = 1\nperiod_ms = 4\npriority = 1\n',
        ["task[1].priority", "task[0]", "listed first"],
    ),
    ("offset past the horizon", GOOD + "offset_ms = 40\n", ["task[0].offset_ms", "releases no job"]),
    ("default horizon of a single job", GOOD.replace("[run]\nhorizon_ms = 40\n", ""), ["run.horizon_ms", "single job"]),
]


@pytest.mark.parametrize(("content", "fragments"), [c[1:] for c in WARNED_SCENARIOS], ids=[c[0] for c in WARNED_SCENARIOS])
def test_a_likely_mistake_is_one_warning_line_on_stderr(scenario_file: WriteScenario, content: str, fragments: list[str]) -> None:
    path = scenario_file(content)
    for o in (cli("run", str(path), "--json"), cli("analyze", str(path))):
        assert o.code == 0, o.stderr
        lines = o.stderr.splitlines()
        assert len(lines) == 1, lines
        assert lines[0].startswith(f"warning: {path}: "), lines[0]
        for f in fragments:
            assert f in lines[0], (f, lines[0])
    # --json keeps stdout one JSON object.
    assert json.loads(cli("run", str(path), "--json").stdout)["tasks"]


def test_the_api_issues_scenario_warnings(scenario_file: WriteScenario) -> None:
    path = scenario_file(GOOD + "offset_ms = 40\n")
    with pytest.warns(critmem.ScenarioWarning, match=r"task\[0\]\.offset_ms"):
        result = critmem.run(path)
    assert len(result.warnings) == 1
    with pytest.warns(critmem.ScenarioWarning):
        assert critmem.analyze(path).warnings == result.warnings


def test_the_examples_load_without_warnings() -> None:
    for path in sorted(EXAMPLES.glob("*.toml")):
        o = cli("analyze", str(path))
        assert o.code == 0 and o.stderr == "", (path, o.stderr)


def test_each_command_builds_only_its_own_modules_parser_and_parses_the_same() -> None:
    """A command line names its command, so only that command's module is imported; the map
    from command to module must hold every command the full parser has."""
    import argparse

    from critmem.cli.parser import COMMAND_MODULES, MODULE_OF_COMMAND, build_parser

    full = build_parser()
    action = next(a for a in full._actions if isinstance(a, argparse._SubParsersAction))
    assert sorted(action.choices) == sorted(MODULE_OF_COMMAND)
    assert set(MODULE_OF_COMMAND.values()) == set(COMMAND_MODULES)
    for command, module in MODULE_OF_COMMAND.items():
        alone = build_parser(command)
        sub = next(a for a in alone._actions if isinstance(a, argparse._SubParsersAction))
        assert command in sub.choices, (command, module)
        assert sub.choices[command].format_help() == action.choices[command].format_help(), command
