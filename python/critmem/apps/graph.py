"""Graph analytics as a non-real-time task (the SARA paper's GraphChi workload): PageRank over a
power-law graph, computed again and again, as many times as the CPU and memory allow.

The graph is a Barabási-Albert graph (`--vertices`, `--edges-per-vertex`, `--seed`) built with
igraph at start-up and held in memory; each PageRank (igraph's PRPACK) is one work unit and
works in a copy of its own while it runs (250 000 vertices, 2 million edges: 175 MiB between
units, 273 MiB at a unit's peak). Cumulative work units go to critmem through
`critmem.jobclient.ProgressReporter` (CRITMEM_PROGRESS_FILE), so a run's throughput is work
units per second.

Self-check of every unit: the ranks are positive, sum to 1 and are the first unit's ranks
again (to 1e-12).

Run it under critmem (examples/linux-speech.toml, examples/linux-vision.toml) or alone:

    python -m critmem.apps.graph --units 10
"""

from __future__ import annotations

import argparse
import os
import random
import sys
from typing import Any

import numpy as np

from critmem.apps._support import StopFlag, require, run_work_units, usage_error
from critmem.jobclient import ProgressReporter

APP = "graph"
SUM_TOLERANCE = 1e-9
# Between two PageRanks of the same graph: one thread gives the same bits, several differ in
# the last bits of the sums.
RANK_TOLERANCE = 1e-12


def check(ranks: Any, reference: Any | None) -> str | None:
    """What is wrong with a PageRank vector, or None."""
    total = float(ranks.sum())
    if abs(total - 1.0) > SUM_TOLERANCE:
        return f"ranks sum to {total!r}, not 1"
    if float(ranks.min()) <= 0.0:
        return f"a rank is {float(ranks.min())!r}, not positive"
    if reference is not None:
        difference = float(np.abs(ranks - reference).max())
        if difference > RANK_TOLERANCE:
            return f"ranks differ from the first unit's by up to {difference:.3g}"
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m critmem.apps.graph",
        description="Graph analytics (igraph) as a non-real-time task: PageRank over a Barabási-Albert graph, one work unit after "
        "another, each checked; reports cumulative work units to critmem. On SIGTERM/SIGINT: one JSON line on stderr, exit 0 "
        "(1 if a self-check failed).",
        epilog="examples:\n  python -m critmem.apps.graph --units 10\n  python -m critmem.apps.graph --vertices 1000000",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--vertices", type=int, default=250_000, help="graph size; sets the memory (default: %(default)s)")
    parser.add_argument("--edges-per-vertex", type=int, default=8, help="edges each new vertex attaches with (default: %(default)s)")
    parser.add_argument("--seed", type=int, default=1, help="the graph (default: %(default)s)")
    parser.add_argument("--damping", type=float, default=0.85, help="PageRank's damping factor (default: %(default)g)")
    parser.add_argument("--threads", type=int, default=1, help="igraph's OpenMP threads (default: %(default)s)")
    parser.add_argument("--units", type=int, metavar="N", help="stop after N work units (default: run until SIGTERM or SIGINT)")
    args = parser.parse_args(argv)
    if args.vertices < 2 or args.edges_per_vertex < 1 or args.edges_per_vertex >= args.vertices:
        raise usage_error(
            APP, f"need --vertices >= 2 and 1 <= --edges-per-vertex < --vertices (got {args.vertices}, {args.edges_per_vertex})"
        )
    if not 0 < args.damping < 1:
        raise usage_error(APP, f"--damping must be between 0 and 1 (got {args.damping:g})")
    if args.threads < 1:
        raise usage_error(APP, f"--threads must be at least 1 (got {args.threads})")
    if args.units is not None and args.units < 1:
        raise usage_error(APP, f"--units must be at least 1 (got {args.units})")
    stop = StopFlag()
    # Read by OpenMP when igraph loads it. More threads than one spin-wait between PageRank's
    # loops: on two cores one thread was twice as fast, and takes one core only.
    os.environ["OMP_NUM_THREADS"] = str(args.threads)
    progress = ProgressReporter.from_env()
    # A run stopped before the first unit (or while the graph is built) reads as 0 units
    # done, not as unknown.
    progress.update(0)
    igraph = require("igraph", APP)
    igraph.set_random_number_generator(random.Random(args.seed))
    graph = igraph.Graph.Barabasi(args.vertices, args.edges_per_vertex)
    return run_work_units(
        APP,
        args.units,
        stop,
        progress,
        lambda: np.asarray(graph.pagerank(damping=args.damping), dtype=np.float64),
        check,
        {"vertices": graph.vcount(), "edges": graph.ecount()},
    )


if __name__ == "__main__":
    sys.exit(main())
