"""The bundled examples: `critmem examples` lists them, `critmem examples copy` writes one out
(never over a file), and the commands in `--help` work from a folder outside the checkout."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from conftest import (
    CRITMEM,
    EXAMPLE_FILES,
    EXAMPLES,
    POLICY_EXAMPLES,
    POLICY_PY_FILES,
    QUICKSTART,
    ROOT,
    SWEEP_SPECS,
    assert_one_line_error,
    cli,
    cli_process,
)
from critmem import examples


def test_bundled_examples_are_the_checkouts() -> None:
    specs = [f"sweep/{p.stem}" for p in SWEEP_SPECS]
    policies = [f"{p.parent.name}/{p.stem}" for p in POLICY_EXAMPLES]
    assert [e.name for e in examples.bundled()] == [p.stem for p in EXAMPLE_FILES] + specs + policies
    assert [e.command for e in examples.bundled()] == ["run"] * len(EXAMPLE_FILES) + ["sweep"] * len(specs) + ["run"] * len(policies)
    for p, name in zip(POLICY_EXAMPLES, policies, strict=True):
        assert examples.text(name) == p.read_text(encoding="utf-8")
    for p in EXAMPLE_FILES:
        assert examples.text(p.stem) == p.read_text(encoding="utf-8")
    for p, name in zip(SWEEP_SPECS, specs, strict=True):
        assert examples.text(name) == p.read_text(encoding="utf-8")
        # A spec simulates a bundled scenario beside its folder, so a copy of both runs.
        scenario = tomllib.loads(p.read_text(encoding="utf-8"))["scenario"]
        assert (p.parent / scenario).resolve().parent == EXAMPLES and (p.parent / scenario).resolve() in EXAMPLE_FILES


def test_listing_names_each_example_with_its_first_comment_line() -> None:
    o = cli("examples")
    assert o.code == 0 and o.stderr == ""
    lines = o.stdout.splitlines()
    for p in EXAMPLE_FILES:
        first = p.read_text(encoding="utf-8").splitlines()[0].lstrip("#").strip()
        row = next((line for line in lines if line.startswith(p.stem + " ")), None)
        assert row is not None, p.stem
        assert first[:40] in " ".join(lines), p.stem


def test_copy_then_run_in_a_fresh_folder(tmp_path: Path) -> None:
    copied = cli_process("examples", "copy", "quickstart", cwd=tmp_path)
    assert copied.code == 0, copied.stderr
    assert (tmp_path / "quickstart.toml").read_bytes() == QUICKSTART.read_bytes()
    ran = cli_process("run", "quickstart.toml", "--json", cwd=tmp_path)
    assert ran.code == 0, ran.stderr
    assert '"scenario":"quickstart.toml"' in ran.stdout.replace(" ", "")


@pytest.mark.parametrize("example", POLICY_EXAMPLES, ids=[f"{p.parent.name}/{p.stem}" for p in POLICY_EXAMPLES])
def test_a_python_policy_example_copies_with_its_python_files_and_runs(tmp_path: Path, example: Path) -> None:
    name = f"{example.parent.name}/{example.stem}"
    copied = cli_process("examples", "copy", name, cwd=tmp_path)
    assert copied.code == 0, copied.stderr
    folder = tmp_path / example.parent.name
    assert sorted(p.name for p in folder.iterdir()) == sorted([example.name, *(p.name for p in example.parent.glob("*.py"))])
    ran = cli_process("run", str(folder / example.name), "--json")
    assert ran.code == 0, ran.stderr
    assert ran.stdout == cli_process("run", str(example), "--json").stdout.replace(str(example), str(folder / example.name))


def test_copy_never_replaces_a_file(tmp_path: Path) -> None:
    target = tmp_path / "quickstart.toml"
    target.write_text("mine\n")
    o = cli("examples", "copy", "quickstart", str(tmp_path))
    assert_one_line_error(o, "quickstart.toml", "exists")
    assert target.read_text() == "mine\n"


def test_copy_to_a_file_name(tmp_path: Path) -> None:
    o = cli("examples", "copy", "rm-textbook.toml", str(tmp_path / "mine.toml"))
    assert o.code == 0, o.stderr
    assert (tmp_path / "mine.toml").read_text(encoding="utf-8") == examples.text("rm-textbook")


def test_unknown_example_is_a_one_line_error_naming_the_known_ones() -> None:
    assert_one_line_error(cli("examples", "copy", "no-such"), "no-such", "quickstart", "rm-textbook")


def _help_examples(*command: str) -> list[str]:
    """The command lines under `examples:` in `critmem COMMAND --help`."""
    text = cli(*command, "--help").stdout
    block = text[text.index("examples:\n") + len("examples:\n") :].split("\n\n")[0]
    return [line.strip() for line in block.splitlines() if line.strip()]


# Lines that need root or run a whole reproduction: the others run here.
def _runnable(line: str) -> bool:
    return not line.startswith("sudo ") and "critmem reproduce" not in line


@pytest.mark.parametrize("command", [(), ("run",), ("analyze",), ("validate",), ("examples",), ("agent-config",), ("schema",), ("sweep",)])
def test_help_examples_work_outside_a_checkout(tmp_path: Path, command: tuple[str, ...]) -> None:
    lines = [line for line in _help_examples(*command) if _runnable(line)]
    assert lines
    env = {**os.environ, "PATH": f"{CRITMEM.parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    for line in lines:
        p = subprocess.run(["bash", "-c", line], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300, check=False)
        want = 1 if "exit 1" in line else 0
        assert p.returncode == want, f"{line}: {p.stderr}"


def test_python_running_the_module_finds_them_too(tmp_path: Path) -> None:
    p = subprocess.run([sys.executable, "-m", "critmem", "examples"], cwd=tmp_path, capture_output=True, text=True, check=False)
    assert p.returncode == 0 and "quickstart" in p.stdout


def test_the_wheel_includes_every_example_through_the_link() -> None:
    """maturin packs what pyproject's `include` matches, python-source prefix removed, into the
    wheel (critmem/_examples/NAME.toml, critmem/_examples/sweep/NAME.toml); the link makes it
    match the checkout's examples."""
    with (ROOT / "pyproject.toml").open("rb") as f:
        include = tomllib.load(f)["tool"]["maturin"]["include"]
    globs = [i["path"] for i in include if "wheel" in i["format"]]
    examples = ROOT / "python" / "critmem" / "_examples"
    matched = sorted(p.relative_to(examples).as_posix() for g in globs for p in ROOT.glob(g))
    assert matched == sorted(p.relative_to(EXAMPLES).as_posix() for p in [*EXAMPLE_FILES, *SWEEP_SPECS, *POLICY_EXAMPLES, *POLICY_PY_FILES])
    assert (ROOT / "python" / "critmem" / "_examples").resolve() == (ROOT / "examples").resolve()
