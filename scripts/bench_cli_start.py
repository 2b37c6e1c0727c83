#!/usr/bin/env python3
"""Wall time of short CLI commands against `python -c pass` (the interpreter's own start),
measured alternately in one run so the ratio holds on a noisy machine.

    .venv/bin/python scripts/bench_cli_start.py [--rounds N]

Prints, per command, the median wall time over the rounds, the baseline's median, and the
median of the per-round differences (what critmem adds to starting Python). critmem's modules
are compiled to bytecode first, as `scripts/setup.sh` leaves them: every start but the first
after an edit.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CRITMEM = Path(sys.executable).with_name("critmem")
COMMANDS = {
    "run rm-textbook --json": [str(CRITMEM), "run", "examples/rm-textbook.toml", "--json"],
    "analyze rm-textbook --json": [str(CRITMEM), "analyze", "examples/rm-textbook.toml", "--json"],
    "run rm-textbook (table)": [str(CRITMEM), "run", "examples/rm-textbook.toml"],
}
BASELINE = [sys.executable, "-c", "pass"]


def wall_s(argv: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(argv, cwd=ROOT, stdout=subprocess.DEVNULL, check=True)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=30)
    rounds = parser.parse_args().rounds
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "python" / "critmem")], check=True)
    for argv in (BASELINE, *COMMANDS.values()):
        wall_s(argv)  # warm the page cache
    base: list[float] = []
    times: dict[str, list[float]] = {name: [] for name in COMMANDS}
    extra: dict[str, list[float]] = {name: [] for name in COMMANDS}
    for _ in range(rounds):
        b = wall_s(BASELINE)
        base.append(b)
        for name, argv in COMMANDS.items():
            t = wall_s(argv)
            times[name].append(t)
            extra[name].append(t - b)
    print(f"python -c pass: {statistics.median(base) * 1e3:.1f} ms (median of {rounds})")
    for name in COMMANDS:
        print(
            f"critmem {name}: {statistics.median(times[name]) * 1e3:.1f} ms, "
            f"{statistics.median(extra[name]) * 1e3:.1f} ms more than python -c pass"
        )


if __name__ == "__main__":
    main()
