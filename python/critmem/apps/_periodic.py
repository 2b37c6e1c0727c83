"""The periodic loop of the soft real-time apps (speech, vision), as examples/periodic_job.py.

Period and deadline come from `--period-ms`/`--deadline-ms`, else from CRITMEM_PERIOD_NS /
CRITMEM_DEADLINE_NS (critmem sets them for a task's command), else the app's defaults. A job
is released every period and reported through `critmem.jobclient` when critmem runs the
program (CRITMEM_JOB_SOCKET set); standalone nothing is reported. A late job starts the next at
once: no release is skipped. A job checks between its stages whether the agent asked to drop
it (it is then abandoned and reported dropped) or SIGTERM/SIGINT came (it is abandoned
unreported and the program stops). At the end one JSON line of counts goes to stderr; the exit
code is 1 if any job's self-check failed, else 0.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from critmem.apps._support import StopFlag, median, memory_mb, usage_error
from critmem.jobclient import SOCKET_ENV, JobClient

# A job: `job(number, abandon)` does job `number`, calling `abandon()` between its stages and
# returning None as soon as it says True; otherwise it returns whether its self-check passed.
Job = Callable[[int, Callable[[], bool]], bool | None]

NS_PER_MS = 1_000_000


@dataclass(frozen=True)
class Timing:
    period_ns: int
    deadline_ns: int
    # Stop after this many jobs (None: until SIGTERM/SIGINT).
    max_jobs: int | None


def add_arguments(parser: argparse.ArgumentParser, *, default_period_ms: float) -> None:
    group = parser.add_argument_group("timing (critmem sets the period and deadline in the environment)")
    group.add_argument(
        "--period-ms",
        type=float,
        help=f"release a job every this many ms (default: CRITMEM_PERIOD_NS, else {default_period_ms:g})",
    )
    group.add_argument("--deadline-ms", type=float, help="relative deadline (default: CRITMEM_DEADLINE_NS, else the period)")
    group.add_argument("--jobs", type=int, metavar="N", help="stop after N jobs (default: run until SIGTERM or SIGINT)")


def timing(args: argparse.Namespace, app: str, *, default_period_ms: float) -> Timing:
    """The period, deadline and job count asked for: flags first, then the environment."""

    def ns(flag_ms: float | None, env: str, fallback_ns: int) -> int:
        if flag_ms is not None:
            if not flag_ms > 0:
                raise usage_error(app, f"--{env.split('_')[1].lower()}-ms must be positive (got {flag_ms:g})")
            return round(flag_ms * NS_PER_MS)
        value = os.environ.get(env)
        if value is None:
            return fallback_ns
        if not value.isdigit() or int(value) <= 0:
            raise usage_error(app, f"{env} must be a positive number of nanoseconds (got {value!r})")
        return int(value)

    period_ns = ns(args.period_ms, "CRITMEM_PERIOD_NS", round(default_period_ms * NS_PER_MS))
    deadline_ns = ns(args.deadline_ms, "CRITMEM_DEADLINE_NS", period_ns)
    if args.jobs is not None and args.jobs < 1:
        raise usage_error(app, f"--jobs must be at least 1 (got {args.jobs})")
    return Timing(period_ns, deadline_ns, args.jobs)


def run(app: str, job: Job, timing: Timing, stop: StopFlag, extra: Callable[[], dict[str, Any]] | None = None) -> int:
    """Runs `job` periodically until `timing.max_jobs` or a stop signal; returns the exit code."""
    client = JobClient.from_env() if os.environ.get(SOCKET_ENV) else None
    counts = {"jobs": 0, "hits": 0, "misses": 0, "dropped": 0, "unfinished": 0, "self_check_failures": 0}
    job_ms: list[float] = []
    # CPU time per job too: on a busy machine it is still close to the job's time alone.
    job_cpu_ms: list[float] = []
    start_ns = time.monotonic_ns()
    number = 0
    while not stop.stopping and (timing.max_jobs is None or number < timing.max_jobs):
        release_ns = start_ns + number * timing.period_ns
        deadline_abs_ns = release_ns + timing.deadline_ns
        began_ns = max(release_ns, time.monotonic_ns())
        if client is not None:
            client.release(number, deadline_abs_ns, at_ns=began_ns)
        abandon = _Abandon(client, number, stop)
        cpu_ns = time.process_time_ns()
        passed = job(number, abandon)
        now_ns = time.monotonic_ns()
        counts["jobs"] += 1
        if passed is None:
            if abandon.drop_asked:
                if client is not None:
                    client.drop(number, at_ns=now_ns)
                counts["dropped"] += 1
            else:
                counts["unfinished"] += 1
        else:
            if client is not None:
                client.complete(number, at_ns=now_ns)
            counts["hits" if now_ns <= deadline_abs_ns else "misses"] += 1
            job_ms.append((now_ns - began_ns) / NS_PER_MS)
            job_cpu_ms.append((time.process_time_ns() - cpu_ns) / NS_PER_MS)
            if not passed:
                counts["self_check_failures"] += 1
        number += 1
        if timing.max_jobs is not None and number >= timing.max_jobs:
            break
        next_release_ns = start_ns + number * timing.period_ns
        while not stop.stopping and time.monotonic_ns() < next_release_ns:
            time.sleep(max(0.0, min(0.05, (next_release_ns - time.monotonic_ns()) / 1e9)))
    if client is not None:
        client.close()
    line = {
        "app": app,
        "task": os.environ.get("CRITMEM_TASK"),
        **counts,
        "period_ms": timing.period_ns / NS_PER_MS,
        "deadline_ms": timing.deadline_ns / NS_PER_MS,
        "job_ms_median": _rounded(median(job_ms)),
        "job_ms_max": _rounded(max(job_ms, default=None)),
        "job_cpu_ms_median": _rounded(median(job_cpu_ms)),
        **memory_mb(),
        **(extra() if extra is not None else {}),
        "unsent": client.unsent if client is not None else 0,
    }
    print(json.dumps(line), file=sys.stderr)
    return 1 if counts["self_check_failures"] else 0


class _Abandon:
    """Whether job `number` is to be abandoned: the agent asked to drop it, or a stop signal came."""

    def __init__(self, client: JobClient | None, number: int, stop: StopFlag) -> None:
        self.client = client
        self.number = number
        self.stop = stop
        self.drop_asked = False

    def __call__(self) -> bool:
        if self.client is not None and not self.drop_asked and self.number in self.client.drop_requests():
            self.drop_asked = True
        return self.drop_asked or self.stop.stopping


def _rounded(ms: float | None) -> float | None:
    return None if ms is None else round(ms, 1)
