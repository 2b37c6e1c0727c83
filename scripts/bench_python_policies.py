"""The cost of a scheduler written in Python: events per second of one simulation under the
built-in EDF and under the Python EDF of examples/python-scheduler (which decides the same,
job for job), on one CPU and global on four; and the wall time of a TMEM run under the
built-in `fair` and a Python re-implementation. Prints each pair and the ratio.

    PYTHONPATH=python .venv/bin/python scripts/bench_python_policies.py [--rounds 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from critmem import _core
from critmem.generate import periods_ms, taskset_scenario, to_toml, uunifast
from critmem.plugins import scenario_dir

ROOT = Path(__file__).resolve().parent.parent
EDF = f"{ROOT / 'examples' / 'python-scheduler' / 'edf.py'}:Edf"

FAIR = """
import critmem

class Fair(critmem.MemoryScheduler):
    def schedule(self, observation):
        caches = observation.caches
        if observation.total_units is None:
            return [critmem.SetDesired(i, None) for i in range(len(caches))]
        spare = max(observation.total_units - sum(c.min_units for c in caches), 0)
        share, extra = divmod(spare, max(len(caches), 1))
        return [critmem.SetDesired(i, c.min_units + share + (i < extra)) for i, c in enumerate(caches)]
"""


def _taskset(tasks: int, cpus: int, kind: str, horizon_ms: float) -> str:
    rng = np.random.default_rng(7)
    utils = uunifast(tasks, 0.8 * cpus, rng)
    periods = periods_ms(tasks, rng, low_ms=5.0, high_ms=100.0, log_uniform=True)
    return to_toml(taskset_scenario(utils, periods, scheduler=kind, cpus=cpus, horizon_ms=horizon_ms))


def _events_per_s(text: str, rounds: int) -> tuple[float, int]:
    """Median events/s of `rounds` runs, and the events of one."""
    rates = []
    events = 0
    for _ in range(rounds):
        start = time.perf_counter()
        out = _core.simulate(text, "bench.toml", "toml", record_jobs=False, record_segments=False)
        rates.append(out.events / (time.perf_counter() - start))
        events = out.events
    return statistics.median(rates), events


def _wall_s(text: str, directory: Path, rounds: int) -> float:
    times = []
    with scenario_dir(directory):
        for _ in range(rounds):
            start = time.perf_counter()
            _core.simulate(text, "bench.toml", "toml", record_jobs=False, record_segments=False)
            times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3, help="runs of each configuration (the median is printed)")
    args = parser.parse_args()
    print("| configuration | built-in | Python | ratio (Python / built-in) |")
    print("|---|---|---|---|")
    for label, tasks, cpus, builtin_kind, horizon_ms in (
        ("EDF, 10 tasks, 1 CPU", 10, 1, "edf", 200_000.0),
        ("gEDF, 20 tasks, 4 CPUs", 20, 4, "gedf", 100_000.0),
    ):
        builtin = _taskset(tasks, cpus, builtin_kind, horizon_ms)
        python = builtin.replace(f'kind = "{builtin_kind}"', f'kind = "{EDF}"')
        b, events_b = _events_per_s(builtin, args.rounds)
        p, events_p = _events_per_s(python, args.rounds)
        assert events_b == events_p, "the two schedulers decided differently"
        print(f"| {label}, {events_b:,} events | {b / 1e6:.2f} M events/s | {p / 1e3:.0f} K events/s | {p / b:.4f} |")
    text = (ROOT / "examples" / "tmem-open.toml").read_text()
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "fair.py").write_text(FAIR)
        b = _wall_s(text.replace('policy = "tmem"', 'policy = "fair"'), Path(tmp), args.rounds)
        p = _wall_s(text.replace('policy = "tmem"', 'policy = "fair.py:Fair"'), Path(tmp), args.rounds)
    print(f"| TMEM examples/tmem-open.toml, fair (240 scheduler runs) | {b * 1e3:.1f} ms | {p * 1e3:.1f} ms | {p / b:.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
