#!/usr/bin/env python3
"""Profiles each criterion benchmark of critmem-core (benches/engine.rs, hierarchy.rs,
memory.rs) with `perf` and renders one flame graph (SVG) per benchmark with inferno.

    python3 scripts/flamegraphs.py [--out docs/profiles] [--seconds 5] [--bench engine ...]

Each benchmark runs alone (`--bench --profile-time SECONDS --exact ID`: criterion iterates it
for that long, without analysis) under `perf record --call-graph dwarf`; `perf script` is
folded by `inferno-collapse-perf` and drawn by `inferno-flamegraph`. Alongside each SVG the
script prints the functions with the most samples: self time (the function's own code, what
it inlined included) and total time (with its callees), as percentages of the samples in the
benchmark's measured routine (its set-up is left out). Needs `perf` (kernel.perf_event_paranoid at most 2 is enough: only this process is
sampled) and inferno: when `inferno-flamegraph` is not on PATH it is installed once with
`cargo install` into `.cache/tools/` of this checkout (crates.io must be reachable then).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BENCHES = ["engine", "hierarchy", "memory"]
INFERNO_VERSION = "0.12.8"
TOOLS = ROOT / ".cache" / "tools"
# Sampling rate and stack copy per sample: enough samples for percentages to 1 %, and deep
# enough stacks for the engine's call chains, at a few MB of perf data per second.
FREQ_HZ = 499
STACK_BYTES = 16384
# Rust legacy mangling leaves a `::h0123456789abcdef` hash on every frame.
HASH = re.compile(r"::h[0-9a-f]{16}")
# The frame criterion calls a benchmark's routine from (`iter` and `iter_batched` alike).
ROUTINE = ";criterion::bencher::Bencher<"
# criterion's own frames around the routine (its warm-up, the loop collecting samples).
HARNESS = re.compile(r"criterion::|spec_from_iter")


def tool(name: str) -> str:
    """The path of inferno's `name`, installing inferno into .cache/tools if needed."""
    found = shutil.which(name) or shutil.which(name, path=str(TOOLS / "bin"))
    if found:
        return found
    print(f"flamegraphs: installing inferno {INFERNO_VERSION} into {TOOLS}", file=sys.stderr)
    argv = ["cargo", "install", "inferno", "--version", INFERNO_VERSION, "--locked", "--root", str(TOOLS)]
    subprocess.run(argv, check=True)
    found = shutil.which(name, path=str(TOOLS / "bin"))
    if not found:
        raise SystemExit(f"flamegraphs: {name} is missing after installing inferno")
    return found


def bench_executables(benches: list[str]) -> dict[str, Path]:
    """Builds the benchmarks (release profile, line tables included) and returns name → binary."""
    argv = ["cargo", "bench", "-p", "critmem-core", "--no-run", "--message-format=json", "--locked"]
    for b in benches:
        argv += ["--bench", b]
    out = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, check=True).stdout
    found: dict[str, Path] = {}
    for line in out.splitlines():
        msg = json.loads(line)
        if msg.get("reason") == "compiler-artifact" and msg.get("executable") and "bench" in msg["target"]["kind"]:
            found[msg["target"]["name"]] = Path(msg["executable"])
    return found


def benchmark_ids(exe: Path) -> list[str]:
    """The benchmark ids a criterion binary holds (`--list`)."""
    out = subprocess.run([str(exe), "--bench", "--list"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    return [line.rsplit(": ", 1)[0] for line in out.splitlines() if line.endswith(": benchmark")]


def collapse(exe: Path, bench_id: str, seconds: float, tmp: Path, collapse_perf: str) -> list[str]:
    """Samples one benchmark and returns the folded stacks (`frame;frame;... count`) of its
    measured routine."""
    data = tmp / "perf.data"
    record = ["perf", "record", "-q", "-F", str(FREQ_HZ), "--call-graph", f"dwarf,{STACK_BYTES}", "-o", str(data), "--"]
    run = [str(exe), "--bench", "--profile-time", str(seconds), "--exact", bench_id]
    subprocess.run(record + run, cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
    script = subprocess.run(["perf", "script", "--no-inline", "-i", str(data)], capture_output=True, text=True, check=True).stdout
    folded = subprocess.run([collapse_perf], input=script, capture_output=True, text=True, check=True).stdout
    # Only the measured routine: the bench's set-up (a run counting the events, the memory
    # model's construction) is left out, as criterion leaves it out of its figures.
    return [HASH.sub("", line) for line in folded.splitlines() if ROUTINE in line]


def top_functions(folded: list[str], n: int) -> tuple[list[tuple[str, float]], list[tuple[str, float]]]:
    """The `n` functions with most self and most total samples, as percentages of all samples
    (total: below the frames nearly every sample passes through)."""
    self_count: collections.Counter[str] = collections.Counter()
    total_count: collections.Counter[str] = collections.Counter()
    samples = 0
    for line in folded:
        stack, _, count = line.rpartition(" ")
        c = int(count)
        frames = stack.split(";")
        samples += c
        self_count[frames[-1]] += c
        for f in set(frames):
            total_count[f] += c
    pct = 100.0 / max(samples, 1)
    # Frames on nearly every stack (the process's start) and criterion's own say nothing.
    below_harness = [(f, c) for f, c in total_count.most_common() if c < 0.98 * samples and not HARNESS.search(f)]
    return (
        [(f, c * pct) for f, c in self_count.most_common(n)],
        [(f, c * pct) for f, c in below_harness[:n]],
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "profiles", help="where the SVGs go (default docs/profiles)")
    ap.add_argument("--seconds", type=float, default=5.0, help="profiled time per benchmark (default 5)")
    ap.add_argument("--bench", action="append", choices=BENCHES, help="which bench files (default all three)")
    ap.add_argument("--top", type=int, default=12, help="functions listed per benchmark (default 12)")
    args = ap.parse_args()
    if args.seconds <= 0:
        ap.error("--seconds must be positive")
    if not shutil.which("perf"):
        raise SystemExit("flamegraphs: perf is not installed")
    collapse_perf, flamegraph = tool("inferno-collapse-perf"), tool("inferno-flamegraph")
    benches = args.bench or BENCHES
    exes = bench_executables(benches)
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="critmem-flamegraphs-") as tmp:
        for bench in benches:
            for bench_id in benchmark_ids(exes[bench]):
                folded = collapse(exes[bench], bench_id, args.seconds, Path(tmp), collapse_perf)
                svg = args.out / f"{bench}--{bench_id.replace('/', '--')}.svg"
                title = f"critmem-core bench {bench}: {bench_id}"
                # Frames narrower than 0.3 % of the graph are left out: the SVGs stay small.
                draw = [flamegraph, "--title", title, "--minwidth", "3.6", "--hash", "--width", "1200"]
                with svg.open("w") as f:
                    subprocess.run(draw, input="\n".join(folded) + "\n", stdout=f, text=True, check=True)
                self_top, total_top = top_functions(folded, args.top)
                print(f"\n## {bench_id} ({os.path.relpath(svg, ROOT)})")
                print("self %   function")
                for name, p in self_top:
                    print(f"{p:6.1f}   {name}")
                print("total %  function")
                for name, p in total_top:
                    print(f"{p:6.1f}   {name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
