#!/usr/bin/env python3
"""The control loop woken by PSI triggers against the timer loop, in one run: CPU at idle and
the reaction to a memory stall burst.

    sudo .venv/bin/python scripts/bench_psi_wake.py [--rounds N] [--burst-at-s S]

Each round runs `critmem-loop-bench` once per loop, in turn (rounds interleave the loops, so a
change in the machine's speed touches every loop alike): two groups, senpai on the first (hard
limits, its probes off, so it acts as soon as the group has stalled 10 ms since its last action,
whatever the loop's interval), which stays idle until `--burst-at-s` and then streams a file
larger than its limit through its page cache. A loop's idle CPU is the whole process's
CPU from 1 s to the burst, as a share of one core; its reaction is the time from the burst's
start to senpai's first action on the group, and the stall the group had by then.

The loops:
- timer, 5 ms: the agent's default without triggers;
- timer, 1 s: the timer loop at the idle CPU of a resting loop;
- triggers, 5 ms: triggers armed, no rests (the agent's default);
- triggers + rests: 5 ms while busy, resting up to `--idle-interval-ms` after a quiet tick.

The triggers watch 10 ms of `some` stall within a 500 ms window where this process has
CAP_SYS_RESOURCE, else within 2 s (the kernel's bound without it; such triggers are checked by
the kernel's 2 s averaging work, not its real-time poller, so they fire up to 2 s late).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

BIN = Path(sys.executable).parent
# senpai ticking with every loop tick, hard limits, its probes off: it acts exactly when the
# group has stalled 10 ms since its last action, whatever the loop's interval.
SENPAI = {"knob": "max", "pressure_us": 10000, "tick_ns": 5_000_000, "interval_ticks": 1_000_000}
CAP_SYS_RESOURCE = 24


def has_cap_sys_resource() -> bool:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("CapEff:"):
            return bool(int(line.split()[1], 16) & (1 << CAP_SYS_RESOURCE))
    return False


def loops(window_us: int, idle_interval_ms: int) -> dict[str, list[str]]:
    triggers = ["--trigger-stall-us", "10000", "--trigger-window-us", str(window_us)]
    return {
        "timer, 5 ms": ["--interval-ms", "5"],
        "timer, 1 s": ["--interval-ms", "1000"],
        "triggers, 5 ms": ["--interval-ms", "5", *triggers],
        f"triggers + rests to {idle_interval_ms / 1000:g} s": [
            "--interval-ms",
            "5",
            *triggers,
            "--idle-interval-ms",
            str(idle_interval_ms),
        ],
    }


def run_once(args: argparse.Namespace, loop_args: list[str]) -> dict:
    command = [
        str(BIN / "critmem-loop-bench"),
        "--groups",
        "2",
        "--controller",
        "senpai",
        "--controller-config",
        json.dumps(SENPAI),
        "--seconds",
        str(args.burst_at_s + 20),
        "--burst-at-s",
        str(args.burst_at_s),
        *loop_args,
    ]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        sys.exit(f"bench_psi_wake: {' '.join(command)} failed: {done.stderr.strip()}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def figure(value: float) -> str:
    """Three significant digits, without an exponent."""
    if value >= 100:
        return f"{value:.0f}"
    if value >= 10:
        return f"{value:.1f}"
    return f"{value:.3g}"


def spread(values: list[float]) -> str:
    """The median and the range."""
    if not values:
        return "no action"
    return f"{figure(statistics.median(values))} ({figure(min(values))}–{figure(max(values))})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--burst-at-s", type=float, default=6.0)
    parser.add_argument("--idle-interval-ms", type=int, default=1000)
    parser.add_argument("--json", type=Path, help="also write every run's figures to this file")
    args = parser.parse_args()
    if args.rounds < 1 or args.burst_at_s < 2 or args.idle_interval_ms < 10:
        parser.error("--rounds ≥ 1, --burst-at-s ≥ 2 and --idle-interval-ms ≥ 10")
    privileged = has_cap_sys_resource()
    window_us = 500_000 if privileged else 2_000_000
    chosen = loops(window_us, args.idle_interval_ms)
    runs: dict[str, list[dict]] = {name: [] for name in chosen}
    for round_index in range(args.rounds):
        for name, loop_args in chosen.items():
            print(f"round {round_index + 1}/{args.rounds}: {name}", file=sys.stderr, flush=True)
            runs[name].append(run_once(args, loop_args))
    if args.json:
        args.json.write_text(json.dumps({"window_us": window_us, "cap_sys_resource": privileged, "runs": runs}, indent=2) + "\n")
    cap = "with" if privileged else "without"
    print(f"trigger: 10 ms of some stall within {window_us / 1e6:g} s ({cap} CAP_SYS_RESOURCE); {args.rounds} rounds")
    print("| loop | idle CPU, % of one core | reaction, ms | stall before the action, ms | early wakes |")
    print("|---|---|---|---|---|")
    for name, results in runs.items():
        idle = [r["burst"]["idle_process_cpu_share_of_one_core_pct"] for r in results]
        reaction = [r["burst"]["reaction_ms"] for r in results if r["burst"]["reaction_ms"] is not None]
        stall = [r["burst"]["stall_before_action_ms"] for r in results if r["burst"]["stall_before_action_ms"] is not None]
        wakes = sum(r["early_wakes"] for r in results)
        print(f"| {name} | {spread(idle)} | {spread(reaction)} | {spread(stall)} | {wakes} |")


if __name__ == "__main__":
    main()
