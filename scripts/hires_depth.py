#!/usr/bin/env python3
"""HiRes's depth measurements on this machine's cgroups, as `critmem reproduce hires` makes
them, without the rest of the reproduction: Fig. 4(a)'s event latency and Fig. 4(c)'s page
map and unmap against the depth of nested cgroups, and (with `--http`) Table III's nginx
throughput. Run it on the host (cgroup v1 memory + v2 PSI) and in the v2 guest to compare:

    sudo .venv/bin/python scripts/hires_depth.py [--json FILE] [--http]
    sudo bash scripts/test-cgroup-v2.sh -- .venv/bin/python scripts/hires_depth.py --json FILE

Prints one table row per depth: the median over rounds of each round's median (µs) and its
ratio to depth 0 (HiRes: flat).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from critmem.reproduce.hires import depth
from critmem.reproduce.hires.experiment import Plan


def layout() -> str:
    """The cgroup layout, as the report names it."""
    if Path("/sys/fs/cgroup/cgroup.controllers").exists():
        return "cgroup v2 (unified)"
    return "cgroup v1 memory and cpu + v2 PSI (hybrid)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, help="also write every row to this file")
    parser.add_argument("--http", action="store_true", help="Table III too (needs nginx and ab)")
    parser.add_argument("--rounds", type=int, default=Plan().linux_rounds, help="rounds per depth (default: the reproduction's)")
    parser.add_argument(
        "--samples", type=int, default=Plan().linux_samples, help="samples per depth and round (default: the reproduction's)"
    )
    args = parser.parse_args()
    if args.rounds < 1 or args.samples < 1:
        parser.error("--rounds and --samples must be at least 1")
    plan = Plan(linux_rounds=args.rounds, linux_samples=args.samples)

    def progress(what: str) -> None:
        print(what, file=sys.stderr, flush=True)

    events = depth.event_latency_by_depth(plan.linux_depths, samples=plan.linux_samples, rounds=plan.linux_rounds, progress=progress)
    pages = depth.page_cost_by_depth(plan.linux_depths, samples=plan.linux_samples, rounds=plan.linux_rounds, progress=progress)
    http = []
    if args.http:
        http = depth.http_by_depth(
            plan.http_depths, seconds=plan.http_seconds, rounds=plan.http_rounds, progress=progress, quiet_wait_s=plan.http_quiet_wait_s
        )
    result = {"layout": layout(), "event_latency": events, "page_cost": pages, "http": http}
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    print(f"{result['layout']}: medians over {plan.linux_rounds} rounds of {plan.linux_samples} samples")
    print("| depth | event latency, µs | ratio | page map, µs | ratio | page unmap, µs | ratio |")
    print("|---|---|---|---|---|---|---|")
    for e, p in zip(events, pages):
        print(
            f"| {e['depth']} | {e['p50_ns'] / 1000:.2f} | {e['p50_ratio']:.3f} | {p['map_p50_ns'] / 1000:.2f} | {p['map_p50_ratio']:.3f} "
            f"| {p['unmap_p50_ns'] / 1000:.2f} | {p['unmap_p50_ratio']:.3f} |"
        )
    for h in http:
        print(f"http depth {h['depth']}: {h['connections_per_s']:.0f} connections/s, ratio {h['connections_ratio']:.3f}")


if __name__ == "__main__":
    main()
