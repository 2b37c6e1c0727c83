"""Each reproduction is a package — the paper's numbers, the experiment, the report — whose
modules import one another without cycles, and each imports alone."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import critmem.reproduce

REPRODUCE = Path(critmem.reproduce.__file__).resolve().parent
PAPER_PACKAGES = ("hires", "sara", "shared_pages", "tmem")


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted(REPRODUCE.rglob("*.py")):
        parts = path.relative_to(REPRODUCE.parent.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


def _imports(path: Path, package: str) -> set[str]:
    """Every module `path` imports, at the top or inside a function (`from X import Y` counts
    as X.Y where that is a module)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else []))
            found.add(base)
            found |= {f"{base}.{a.name}" for a in node.names}
    return found


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    graph = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
        graph[name] = {m for m in _imports(path, package) if m in modules and m != name}
    return graph


def test_each_paper_has_its_numbers_experiment_and_report() -> None:
    graph = _graph()
    for paper in PAPER_PACKAGES:
        pkg = f"critmem.reproduce.{paper}"
        assert {f"{pkg}.paper", f"{pkg}.experiment", f"{pkg}.report"} <= graph.keys(), paper
        # The paper's numbers depend on nothing; the report on the experiment, never back.
        assert graph[f"{pkg}.paper"] == set()
        assert f"{pkg}.experiment" in graph[f"{pkg}.report"]
        assert f"{pkg}.report" not in graph[f"{pkg}.experiment"]


def test_the_reproduce_modules_import_one_another_without_cycles() -> None:
    graph = _graph()
    assert len(graph) >= 9
    done: set[str] = set()

    def visit(name: str, path: list[str]) -> None:
        assert name not in path, f"import cycle: {' -> '.join([*path, name])}"
        if name in done:
            return
        for dep in sorted(graph[name]):
            visit(dep, [*path, name])
        done.add(name)

    for name in sorted(graph):
        visit(name, [])


def test_each_module_imports_alone_in_a_fresh_interpreter() -> None:
    procs = {name: subprocess.Popen([sys.executable, "-c", f"import {name}"], stderr=subprocess.PIPE, text=True) for name in _modules()}
    for name, p in procs.items():
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, f"import {name}: {err}"
