"""Golden outputs: what the bundled examples (scenarios and sweep specs) and the quick
reproductions print and write.

`test_golden.py` compares a fresh run with the files in `tests/golden/`; they change only on
purpose, with `.venv/bin/python tests/golden_outputs.py --update` (then review the diff).
Wall-clock timings and output paths are left out: they differ from run to run by nature.
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = Path(__file__).resolve().parent / "golden"
CRITMEM = Path(sys.executable).parent / "critmem"
# Fields of a reproduction's --json that are wall-clock measurements or name this run's paths.
VOLATILE_FIELDS = ("table2_ns", "out_dir")


def _critmem(*argv: str) -> str:
    # From the project root with relative paths, so the scenario name in the output is the
    # same wherever the checkout lives.
    p = subprocess.run([str(CRITMEM), *argv], cwd=ROOT, capture_output=True, text=True, timeout=600, check=False)
    if p.returncode != 0:
        raise RuntimeError(f"critmem {' '.join(argv)} exited {p.returncode}: {p.stderr.strip()}")
    return p.stdout


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def example_names() -> list[str]:
    """The bundled scenarios: `NAME`, and `FOLDER/NAME` for those of the Python policy folders."""
    top = sorted(p.stem for p in (ROOT / "examples").glob("*.toml"))
    return top + sorted(f"{p.parent.name}/{p.stem}" for p in (ROOT / "examples").glob("python-*/*.toml"))


def golden_name(example: str) -> str:
    return f"run-{example.replace('/', '--')}.json"


def run_example(name: str) -> tuple[str, dict[str, str]]:
    """`critmem run examples/NAME.toml --json --out DIR`: the JSON, and a hash of each CSV and
    of summary.json in DIR."""
    with tempfile.TemporaryDirectory(prefix="critmem-golden-") as tmp:
        stdout = _critmem("run", f"examples/{name}.toml", "--json", "--out", tmp)
        files = sorted(p for p in Path(tmp).iterdir() if p.suffix == ".csv" or p.name == "summary.json")
        return stdout, {p.name: _sha256(p) for p in files}


# Each reproduction's `--json` as printed, by paper, once `run_reproduction` ran it: for the
# checks against its schema, which need the volatile fields too.
PRINTED: dict[str, dict[str, Any]] = {}


def run_reproduction(paper: str) -> dict[str, Any]:
    """`critmem reproduce PAPER --quick --json` less its volatile fields, with a hash of the
    results file where it is the same bytes on every run (the reports' prose is not pinned)."""
    with tempfile.TemporaryDirectory(prefix="critmem-golden-") as tmp:
        data: dict[str, Any] = json.loads(_critmem("reproduce", paper, "--quick", "--json", "--out", tmp))
        PRINTED[paper] = copy.deepcopy(data)
        for field in VOLATILE_FIELDS:
            data.pop(field, None)
        if paper in ("sara", "mc2"):
            data["results_json_sha256"] = _sha256(Path(tmp) / "results.json")
        return data


REPRODUCTIONS = ("shared-pages", "sara", "mc2")


def sweep_spec_names() -> list[str]:
    return sorted(p.stem for p in (ROOT / "examples" / "sweep").glob("*.toml"))


def run_sweep_spec(name: str) -> str:
    """`critmem sweep examples/sweep/NAME.toml`'s table: runs.csv."""
    with tempfile.TemporaryDirectory(prefix="critmem-golden-") as tmp:
        _critmem("sweep", f"examples/sweep/{name}.toml", "--out", tmp, "--json")
        return (Path(tmp) / "runs.csv").read_text(encoding="utf-8")


def collect() -> dict[str, str]:
    """Golden file name → its text."""
    out: dict[str, str] = {}
    hashes: dict[str, dict[str, str]] = {}
    for name in example_names():
        stdout, files = run_example(name)
        out[golden_name(name)] = stdout
        hashes[name] = files
    out["run-out-sha256.json"] = json.dumps(hashes, indent=2, sort_keys=True) + "\n"
    for name in sweep_spec_names():
        out[f"sweep-{name}.csv"] = run_sweep_spec(name)
    for paper in REPRODUCTIONS:
        out[f"reproduce-{paper}.json"] = json.dumps(run_reproduction(paper), indent=2, sort_keys=True) + "\n"
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--update", action="store_true", help="rewrite tests/golden/ from a fresh run")
    args = ap.parse_args()
    if not args.update:
        ap.error("nothing to do: pass --update to rewrite the golden files (the test compares them)")
    GOLDEN.mkdir(exist_ok=True)
    fresh = collect()
    for old in GOLDEN.iterdir():
        if old.name not in fresh:
            old.unlink()
    for name, text in fresh.items():
        (GOLDEN / name).write_text(text, encoding="utf-8")
    print(f"wrote {len(fresh)} golden files to {GOLDEN.relative_to(ROOT)}/")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
