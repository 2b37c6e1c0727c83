"""The snippets of README.md and of the documentation under docs/ run as shown: every ```toml
block loads and runs (or, starting with `[root]`, loads as a HiRes reservation tree), and every
```console block's commands exit 0 and print the output lines the block shows.

A console block that needs more than the simulator carries an HTML comment on the line before
it, `<!-- snippet: root -->` (root and the Linux platform), `apps` (the apps extra and its data)
or `slow` (minutes, or background services), combinable; such a block runs only where the
matching CRITMEM_SNIPPETS_ROOT / _APPS / _SLOW variable is 1 (docs/snippets.md)."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import critmem
import pytest
from critmem.hires import ReservationTree

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
# Snippets that show only part of a file get this header.
HEADER = '[scheduler]\nkind = "rm"\n[run]\nhorizon_ms = 300\n'
MARKER = re.compile(r"<!--\s*snippet:\s*([a-z ]+?)\s*-->")
MARKERS = {"root": "CRITMEM_SNIPPETS_ROOT", "apps": "CRITMEM_SNIPPETS_APPS", "slow": "CRITMEM_SNIPPETS_SLOW"}


@dataclass(frozen=True)
class Block:
    path: Path
    line: int
    lang: str
    text: str
    markers: tuple[str, ...]

    @property
    def id(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def _blocks(lang: str) -> list[Block]:
    found = []
    for path in DOCS:
        lines = path.read_text(encoding="utf-8").splitlines()
        i = 0
        while i < len(lines):
            if lines[i] == f"```{lang}":
                end = lines.index("```", i + 1)
                before = lines[i - 1] if i > 0 else ""
                m = MARKER.fullmatch(before.strip())
                markers = tuple(m.group(1).split()) if m else ()
                found.append(Block(path, i + 1, lang, "\n".join(lines[i + 1 : end]) + "\n", markers))
                i = end
            i += 1
    return found


TOML = _blocks("toml")
CONSOLE = _blocks("console")


def _is_tree(block: Block) -> bool:
    return block.text.lstrip().startswith("[root]")


def test_the_markers_are_known() -> None:
    for path in DOCS:
        for m in MARKER.finditer(path.read_text(encoding="utf-8")):
            unknown = set(m.group(1).split()) - set(MARKERS)
            assert not unknown, f"{path.name}: unknown snippet marker {unknown}"


def test_the_docs_have_snippets_of_each_kind() -> None:
    assert len([b for b in TOML if not _is_tree(b)]) >= 7
    assert any(_is_tree(b) for b in TOML)
    assert len(CONSOLE) >= 8
    assert any(b.path.name == "README.md" for b in CONSOLE)


@pytest.mark.parametrize("block", [b for b in TOML if not _is_tree(b)], ids=lambda b: b.id)
def test_every_toml_snippet_runs(block: Block) -> None:
    text = block.text if "[scheduler]" in block.text else HEADER + block.text
    r = critmem.run(text, horizon_ms=300)
    assert len(r.tasks) >= 1
    assert (r.tasks["jobs"] > 0).all()


def test_the_memory_snippet_reports_memory() -> None:
    block = next(b for b in TOML if b.text.startswith("[memory]") and "[[task]]" in b.text)
    r = critmem.run(HEADER + block.text)
    assert r.memory is not None
    assert r.memory["tasks"][0]["minor_faults"] > 0
    assert not r.memory_timeline.empty


def test_the_reservation_tree_snippet_loads() -> None:
    (block,) = [b for b in TOML if _is_tree(b)]
    tree = ReservationTree.load(block.text)
    assert [name for name, _ in tree.subsystems()] == ["root", "web", "cgi"]
    tree.check()


def _skip_reason(block: Block) -> str | None:
    for marker in block.markers:
        if os.environ.get(MARKERS[marker]) != "1":
            return f"{block.id} is marked `{marker}`: set {MARKERS[marker]}=1 to run it"
        if marker == "root" and os.geteuid() != 0:
            return f"{block.id} needs root"
    return None


def _script(block: Block) -> tuple[str, list[str]]:
    """The block's commands as one bash script, and the output lines it shows."""
    commands, shown = [], []
    for line in block.text.splitlines():
        if line.startswith("$ "):
            cmd = line[2:]
            cmd = re.sub(r"^sudo ", "", cmd)
            cmd = cmd.replace(".venv/bin/critmem", "critmem").replace(".venv/bin/python", '"$CRITMEM_PY"')
            cmd = re.sub(r"\.venv/bin/(\w+)", r'"$CRITMEM_BIN/\1"', cmd)
            commands.append(cmd)
        elif line.strip():
            shown.append(line)
    prelude = [
        "set -euo pipefail",
        'critmem() { "$CRITMEM_PY" -m critmem "$@"; }',
        "trap 'kill $(jobs -p) 2>/dev/null || true' EXIT",
    ]
    return "\n".join(prelude + commands) + "\n", shown


def _words(text: str) -> str:
    return " ".join(text.split())


@pytest.mark.parametrize("block", CONSOLE, ids=lambda b: b.id)
def test_every_console_snippet_runs(block: Block, tmp_path: Path) -> None:
    reason = _skip_reason(block)
    if reason:
        pytest.skip(reason)
    script, shown = _script(block)
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    env = dict(os.environ, CRITMEM_PY=sys.executable, CRITMEM_BIN=str(Path(sys.executable).parent))
    env.setdefault("PYTHONPATH", "")
    env["PYTHONPATH"] = os.pathsep.join(p for p in [str(ROOT / "python"), env["PYTHONPATH"]] if p)
    done = subprocess.run(["bash", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900, check=False)
    assert done.returncode == 0, f"{block.id}: exit {done.returncode}\n{shlex.quote(script)}\n{done.stderr[-2000:]}"
    out = _words(done.stdout)
    for line in shown:
        assert _words(line.split("   #")[0]) in out, f"{block.id}: {line!r} not in the output"


def test_docs_hold_no_merge_conflict_markers() -> None:
    for doc in [*DOCS, ROOT / "BENCHMARKS.md"]:
        for n, line in enumerate(doc.read_text(encoding="utf-8").splitlines(), 1):
            assert not line.startswith(("<<<<<<< ", ">>>>>>> ")) and line != "=======", f"{doc.name}:{n}: {line[:40]}"
