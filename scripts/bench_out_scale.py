#!/usr/bin/env python3
"""`critmem run --out` on 10,000 tasks against `critmem run --json` on the same scenario:
wall time and peak memory of each, measured alternately in one run so the ratio holds on a
noisy machine, and the size of the Gantt chart written.

    .venv/bin/python scripts/bench_out_scale.py [--rounds N]

The scenario is generated: 10,000 tasks under gEDF on 16 CPUs at 80 % of the machine,
periods log-uniform in 5–50 ms, 1 simulated second (about 700,000 jobs).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CRITMEM = Path(sys.executable).with_name("critmem")


def measure(argv: list[str]) -> tuple[float, float]:
    """Wall seconds and peak resident MB of one command."""
    start = time.perf_counter()
    p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(p.pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(argv)} failed")
    return wall, usage.ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    rounds = parser.parse_args().rounds
    with tempfile.TemporaryDirectory(prefix="critmem-bench-") as tmp:
        scenario = Path(tmp) / "big.toml"
        generated = subprocess.run(
            [str(CRITMEM), "generate", "--tasks", "10000", "--utilization", "12.8", "--cpus", "16", "--scheduler", "gedf",
             "--periods", "log-uniform:5:50", "--horizon-ms", "1000", "--seed", "1"],
            check=True, capture_output=True, text=True,
        ).stdout  # fmt: skip
        scenario.write_text(generated)
        out = Path(tmp) / "out"
        json_runs, out_runs = [], []
        for _ in range(rounds):
            json_runs.append(measure([str(CRITMEM), "run", str(scenario), "--json"]))
            shutil.rmtree(out, ignore_errors=True)
            out_runs.append(measure([str(CRITMEM), "run", str(scenario), "--out", str(out)]))
        summary = json.loads((out / "summary.json").read_text())
        width, height = struct.unpack(">II", (out / "gantt.png").read_bytes()[16:24])
    json_s = statistics.median(w for w, _ in json_runs)
    out_s = statistics.median(w for w, _ in out_runs)
    print(f"--json: {json_s:.2f} s, {max(m for _, m in json_runs):.0f} MB peak")
    print(f"--out:  {out_s:.2f} s, {max(m for _, m in out_runs):.0f} MB peak ({out_s / json_s:.2f} x --json)")
    print(f"traces: {summary['traces']}; gantt.png {width} x {height} px")


if __name__ == "__main__":
    main()
