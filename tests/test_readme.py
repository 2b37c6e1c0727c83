"""The scenario snippets in README.md load and run as documented, and its reservation tree
loads."""

from __future__ import annotations

import re
from pathlib import Path

import critmem
from critmem.hires import ReservationTree

README = Path(__file__).resolve().parent.parent / "README.md"
# Snippets that show only part of a file get this header.
HEADER = '[scheduler]\nkind = "rm"\n[run]\nhorizon_ms = 300\n'


def _toml_blocks() -> list[str]:
    return re.findall(r"```toml\n(.*?)```", README.read_text(), re.DOTALL)


def _is_tree(block: str) -> bool:
    return block.lstrip().startswith("[root]")


def test_every_toml_snippet_in_the_readme_runs() -> None:
    blocks = [b for b in _toml_blocks() if not _is_tree(b)]
    assert len(blocks) >= 2
    for block in blocks:
        text = block if "[scheduler]" in block else HEADER + block
        r = critmem.run(text, horizon_ms=300)
        assert len(r.tasks) >= 1
        assert (r.tasks["jobs"] > 0).all()


def test_the_memory_snippet_reports_memory() -> None:
    block = next(b for b in _toml_blocks() if "[memory]" in b)
    r = critmem.run(HEADER + block)
    assert r.memory is not None
    assert r.memory["tasks"][0]["minor_faults"] > 0
    assert not r.memory_timeline.empty


def test_docs_hold_no_merge_conflict_markers() -> None:
    root = Path(__file__).resolve().parent.parent
    for doc in [root / "README.md", root / "BENCHMARKS.md", *sorted((root / "docs").glob("*.md"))]:
        for n, line in enumerate(doc.read_text(encoding="utf-8").splitlines(), 1):
            assert not line.startswith(("<<<<<<< ", ">>>>>>> ")) and line != "=======", f"{doc.name}:{n}: {line[:40]}"


def test_the_reservation_tree_snippet_loads() -> None:
    (block,) = [b for b in _toml_blocks() if _is_tree(b)]
    tree = ReservationTree.load(block)
    assert [name for name, _ in tree.subsystems()] == ["root", "web", "cgi"]
    tree.check()
