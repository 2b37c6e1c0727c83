#!/usr/bin/env python3
"""What a memory controller written in Python costs per tick, beside a built-in one, in one run.

    .venv/bin/python scripts/bench_python_controller.py [--rounds N] [--linux-seconds S]

Simulator: the example's workload with memory to spare (so no limit ever binds and every
variant simulates the same work) is run without a controller, under the built-in `greedy`,
under a Python controller that returns nothing, and under the example's `HoldStall`, rounds
alternating; a controller's cost per tick is its run's median wall time less the
uncontrolled run's, over the ticks. The Python tick alone (the class's own `tick`, without the
bridge) is timed inside the process too.

Linux (as root, with the Linux binaries installed): `critmem-loop-bench` over 4 idle groups
at 5 ms under `greedy` and under `HoldStall`; besides the loop thread's figures, the CPU of the
whole process tree (the loop and the controller's Python process) per tick, from a short and a
long run so that starting up is left out, and as a share of a core at 5 ms.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "python-controller"
BIN = Path(sys.executable).parent

NOOP = """
from critmem.controller import Controller

class Noop(Controller):
    def tick(self, observation):
        return []
"""

TIMED = """
import time
from hold_stall import HoldStall

TOTAL_NS = [0, 0]

class TimedHoldStall(HoldStall):
    def tick(self, observation):
        start = time.perf_counter_ns()
        actions = super().tick(observation)
        TOTAL_NS[0] += time.perf_counter_ns() - start
        TOTAL_NS[1] += 1
        return actions
"""


def _variants(folder: Path) -> dict[str, Path]:
    text = (EXAMPLE / "hold-stall.toml").read_text(encoding="utf-8").replace("total_mb = 128", "total_mb = 1024")
    (folder / "hold_stall.py").write_text((EXAMPLE / "hold_stall.py").read_text(encoding="utf-8"))
    (folder / "noop.py").write_text(NOOP)
    (folder / "timed.py").write_text(TIMED)
    control = 'controller = "hold_stall.py:HoldStall"'
    out = {}
    for name, replacement in {
        "none": None,
        "greedy": 'controller = "greedy"',
        "python-noop": 'controller = "noop.py:Noop"',
        "python-holdstall": 'controller = "timed.py:TimedHoldStall"',
    }.items():
        if replacement is None:
            lines = text.splitlines()
            start = lines.index("[control]")
            variant = "\n".join(lines[:start] + lines[start + 4 :]) + "\n"
        else:
            variant = text.replace(control, replacement)
            if "timed" not in replacement:
                variant = variant.replace("config = { target_pct = 1.0, step_mb = 4.0 }\n", "")
        path = folder / f"{name}.toml"
        path.write_text(variant)
        out[name] = path
    return out


def bench_simulator(rounds: int) -> dict[str, Any]:
    from critmem import _core
    from critmem.plugins import scenario_dir

    with tempfile.TemporaryDirectory(prefix="critmem-bench-py-") as tmp:
        folder = Path(tmp)
        variants = _variants(folder)
        walls: dict[str, list[float]] = {name: [] for name in variants}
        ticks = 0
        sys.path.insert(0, str(folder))
        try:
            # Round 0 warms up (imports, the first file loads) and is not counted.
            for r in range(rounds + 1):
                order = list(variants) if r % 2 == 0 else list(reversed(variants))
                for name in order:
                    path = variants[name]
                    text = path.read_text()
                    with scenario_dir(folder):
                        start = time.perf_counter()
                        out = _core.simulate(text, path.name, "toml", record_jobs=False, record_segments=False)
                        if r > 0:
                            walls[name].append(time.perf_counter() - start)
                    control = json.loads(out.summary_json).get("control")
                    if control is not None:
                        ticks = int(control["ticks"])
            # The copy of timed.py the scenario loaded (critmem.plugins loads files by path).
            timed = next(m for m in list(sys.modules.values()) if getattr(m, "__file__", None) == str((folder / "timed.py").resolve()))
            total_ns, calls = timed.TOTAL_NS
            tick_alone_us = total_ns / max(calls, 1) / 1000
        finally:
            sys.path.remove(str(folder))
    median = {name: statistics.median(w) for name, w in walls.items()}
    per_tick_us = {name: (median[name] - median["none"]) / ticks * 1e6 for name in median if name != "none"}
    return {"rounds": rounds, "ticks": ticks, "median_wall_s": median, "per_tick_us": per_tick_us, "holdstall_tick_alone_us": tick_alone_us}


def _loop_bench(controller: str, seconds: float) -> tuple[dict[str, Any], float]:
    """critmem-loop-bench's figures and the CPU seconds of its process tree."""
    argv = [str(BIN / "critmem-loop-bench"), "--groups", "4", "--interval-ms", "5", "--seconds", str(seconds), "--controller", controller]
    env = {**os.environ, "CRITMEM_PYTHON": sys.executable}
    child = subprocess.Popen(argv, cwd=EXAMPLE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    # wait4 gives the CPU of the bench and of the processes it waited for (the controller's).
    _, status, usage = os.wait4(child.pid, 0)
    stdout = child.stdout.read() if child.stdout else ""
    if status != 0:
        raise SystemExit(f"{' '.join(argv)} failed: {child.stderr.read() if child.stderr else ''}")
    return json.loads(stdout.strip().splitlines()[-1]), usage.ru_utime + usage.ru_stime


def bench_linux(seconds: float) -> dict[str, Any] | None:
    if os.geteuid() != 0 or not (BIN / "critmem-loop-bench").is_file():
        print("linux: skipped (needs root and .venv/bin/critmem-loop-bench from scripts/setup.sh)", file=sys.stderr)
        return None
    out: dict[str, Any] = {}
    for controller in ("greedy", "hold_stall.py:HoldStall"):
        # A short and a long run: their difference leaves out the start (the Python process's
        # imports, the check of the class at load, the bench's baseline reads).
        short, short_cpu_s = _loop_bench(controller, seconds / 3)
        long, long_cpu_s = _loop_bench(controller, seconds)
        per_tick_us = (long_cpu_s - short_cpu_s) / (long["ticks"] - short["ticks"]) * 1e6
        out[controller] = {
            "ticks": long["ticks"],
            "loop_thread_cpu_per_tick_us": long["tick_cpu_mean_us"],
            "tick_wall_mean_us": long["tick_cost_mean_us"],
            "tick_wall_p99_us": long["tick_cost_p99_us"],
            "process_tree_cpu_per_tick_us": per_tick_us,
            "process_tree_share_of_one_core_pct": per_tick_us / 5000 * 100,
        }
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--linux-seconds", type=float, default=10.0)
    ap.add_argument("--no-linux", action="store_true")
    args = ap.parse_args()
    report: dict[str, Any] = {"simulator": bench_simulator(args.rounds)}
    if not args.no_linux:
        report["linux"] = bench_linux(args.linux_seconds)
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
