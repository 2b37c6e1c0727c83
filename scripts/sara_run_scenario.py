"""Writes one of `critmem reproduce sara`'s evaluation runs as a scenario file, for profiling
the simulator on the sweep's own work without Python around it:

    .venv/bin/python scripts/sara_run_scenario.py --out /tmp/sara.json
    cargo build --release -p critmem-core --example hot_paths
    valgrind --tool=callgrind target/release/examples/hot_paths scenario /tmp/sara.json

Usage: sara_run_scenario.py --out FILE.json [--workload sphinx|opencv] [--memory-pct 60|80]
       [--ssd slow-ssd|fast-ssd] [--controller NAME] [--periods N]"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from critmem.reproduce.sara import experiment as sara


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, required=True, help="the scenario file to write (JSON)")
    p.add_argument("--workload", choices=[w.name for w in sara.WORKLOADS], default="sphinx")
    p.add_argument("--memory-pct", type=int, choices=sara.MEMORY_PCTS, default=60)
    p.add_argument("--ssd", choices=sara.SSDS, default="fast-ssd")
    p.add_argument("--controller", choices=sara.CONTROLLERS, default="sara")
    p.add_argument("--periods", type=int, default=sara.Plan().periods, help="soft real-time periods (default: the sweep's)")
    a = p.parse_args()
    w = next(w for w in sara.WORKLOADS if w.name == a.workload)
    spec = sara.Spec(w, a.memory_pct, a.ssd, a.controller, (), a.periods, sara.EVAL_SEED, w.configured_bcet_ms)
    a.out.write_text(json.dumps(spec.scenario(), indent=1) + "\n")
    print(f"wrote {a.out}: {w.name} at {a.memory_pct} % on {a.ssd}, {a.controller}, {a.periods} periods")


if __name__ == "__main__":
    main()
