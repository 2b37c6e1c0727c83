#!/usr/bin/env python3
"""Runs critmem-core's criterion benchmarks (engine events/s, memory references/s) of this
checkout and of another commit alternately, on the same machine in one run, and prints each
benchmark's throughput and the ratio HEAD / BASE (the machines are noisy: compare ratios).

    python3 scripts/bench_vs.py BASE [--rounds N] [--bench engine --bench memory]

BASE is any git revision; it is checked out into a temporary worktree and built with its own
target directory, kept in target/bench-vs/ so that a second comparison against the same
revision builds only HEAD. Each round runs BASE's and HEAD's benchmark binaries back to back,
alternating which goes first; the ratio reported is the median over rounds.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
UNITS = {"elem/s": 1.0, "Kelem/s": 1e3, "Melem/s": 1e6, "Gelem/s": 1e9}
# criterion prints the benchmark id on its own line, then `thrpt:  [low median high]`.
THRPT = re.compile(r"thrpt:\s+\[\S+ \S+ (?P<value>[0-9.]+) (?P<unit>\S+) \S+ \S+\]")


def bench_executables(checkout: Path, target: Path, benches: list[str]) -> dict[str, Path]:
    """Builds the benchmarks of `checkout` into `target` and returns bench name → binary."""
    argv = ["cargo", "bench", "-p", "critmem-core", "--no-run", "--message-format=json", "--locked"]
    for b in benches:
        argv += ["--bench", b]
    out = subprocess.run(argv, cwd=checkout, env=_env(target), capture_output=True, text=True, check=True).stdout
    found: dict[str, Path] = {}
    for line in out.splitlines():
        msg = json.loads(line)
        if msg.get("reason") == "compiler-artifact" and msg.get("executable") and "bench" in msg["target"]["kind"]:
            found[msg["target"]["name"]] = Path(msg["executable"])
    missing = set(benches) - set(found)
    if missing:
        raise SystemExit(f"bench_vs: {checkout}: no benchmark binary for {sorted(missing)}")
    return found


def _env(target: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["CARGO_TARGET_DIR"] = str(target)
    return env


def run_once(exe: Path, cwd: Path) -> dict[str, float]:
    """One run of a criterion binary: benchmark id → median throughput (elements/s)."""
    out = subprocess.run([str(exe), "--bench", "--noplot"], cwd=cwd, capture_output=True, text=True, check=True).stdout
    results: dict[str, float] = {}
    last_id = None
    for line in out.splitlines():
        stripped = line.strip()
        m = THRPT.search(stripped)
        if m and last_id:
            results[last_id] = float(m["value"]) * UNITS[m["unit"]]
        elif stripped and not stripped.startswith(("time:", "change:", "thrpt:", "Found", "Benchmarking", "Warning")) and "/" in stripped:
            last_id = stripped.split()[0]
    return results


def _rev(rev: str) -> str:
    return subprocess.run(["git", "rev-parse", rev], cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("base", help="the git revision to compare against")
    ap.add_argument("--rounds", type=int, default=3, help="alternating rounds (default 3)")
    ap.add_argument("--bench", action="append", choices=["engine", "memory"], help="which benchmarks (default both)")
    args = ap.parse_args()
    benches = args.bench or ["engine", "memory"]
    if args.rounds < 1:
        ap.error("--rounds must be at least 1")
    tmp = Path(tempfile.mkdtemp(prefix="critmem-bench-vs-"))
    base_dir = tmp / "base"
    try:
        subprocess.run(["git", "worktree", "add", "--detach", str(base_dir), args.base], cwd=ROOT, check=True, capture_output=True)
        print(f"building {args.base} and HEAD ...", file=sys.stderr)
        exes = {
            "base": bench_executables(base_dir, ROOT / "target" / "bench-vs" / _rev(args.base), benches),
            "head": bench_executables(ROOT, ROOT / "target", benches),
        }
        samples: dict[str, dict[str, list[float]]] = {"base": {}, "head": {}}
        for r in range(args.rounds):
            order = ["base", "head"] if r % 2 == 0 else ["head", "base"]
            for bench in benches:
                for side in order:
                    print(f"round {r + 1}/{args.rounds}: {bench} ({side})", file=sys.stderr)
                    for bid, v in run_once(exes[side][bench], base_dir if side == "base" else ROOT).items():
                        samples[side].setdefault(bid, []).append(v)
        print(f"| benchmark | {args.base} (median of {args.rounds}) | HEAD | ratio HEAD / {args.base} (median of rounds) |")
        print("|---|---|---|---|")
        for bid in sorted(samples["head"]):
            b, h = samples["base"].get(bid), samples["head"][bid]
            if not b:
                continue
            ratios = [hv / bv for hv, bv in zip(h, b)]
            print(
                f"| {bid} | {statistics.median(b) / 1e6:.2f} M/s | {statistics.median(h) / 1e6:.2f} M/s | {statistics.median(ratios):.3f} |"
            )
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(base_dir)], cwd=ROOT, capture_output=True, check=False)
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
