#!/usr/bin/env python3
"""A soft real-time program of your own as a critmem task: an example for `command = [...]`.

Every period it releases a job, reports it through `critmem.jobclient`, rewrites and verifies
its working set page by page, and reports the completion (or a drop, when the agent asks for
one). Period, deadline and compute time come from the task's declaration through the
environment critmem sets (CRITMEM_PERIOD_NS, CRITMEM_DEADLINE_NS, CRITMEM_WCET_NS). On
SIGTERM it prints a JSON line with its counts to stderr and exits 0; a corrupted page makes it
exit 1. See examples/linux-command.toml.

    usage: periodic_job.py [--wss-mib N]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time

from critmem.jobclient import JobClient

PAGE_BYTES = 4096


def env_ns(name: str) -> int:
    value = os.environ.get(name)
    if value is None or not value.isdigit() or int(value) <= 0:
        sys.exit(f"periodic_job.py: {name} must be a positive number of nanoseconds (critmem sets it)")
    return int(value)


def main() -> int:
    parser = argparse.ArgumentParser(description="A periodic job that reports to critmem.")
    parser.add_argument("--wss-mib", type=int, default=16, help="working set rewritten and verified every job")
    args = parser.parse_args()
    period_ns, deadline_ns, wcet_ns = (env_ns(f"CRITMEM_{k}_NS") for k in ("PERIOD", "DEADLINE", "WCET"))
    stopping = False

    def stop(_signum: int, _frame: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    pages = max(1, args.wss_mib * 2**20 // PAGE_BYTES)
    data = bytearray(pages * PAGE_BYTES)
    client = JobClient.from_env()
    counts = {"jobs": 0, "hits": 0, "misses": 0, "dropped": 0, "checksum_failures": 0}
    start_ns = time.monotonic_ns()
    job = 0
    while not stopping:
        release_ns = start_ns + job * period_ns
        deadline_abs_ns = release_ns + deadline_ns
        client.release(job, deadline_abs_ns, at_ns=max(release_ns, time.monotonic_ns()))
        stamp = job % 251
        dropped = False
        for page in range(pages):
            # Each page's first byte holds the previous job's stamp; check it, then rewrite it.
            at = page * PAGE_BYTES
            if job > 0 and data[at] != (job - 1) % 251:
                counts["checksum_failures"] += 1
            data[at] = stamp
            if page % 1024 == 0 and job in client.drop_requests():
                dropped = True
                break
        # The rest of the job's compute time, spent on the CPU.
        while not dropped and time.monotonic_ns() - release_ns < wcet_ns:
            pass
        now_ns = time.monotonic_ns()
        if dropped:
            client.drop(job, at_ns=now_ns)
            counts["dropped"] += 1
            # A dropped job left pages with the old stamp: finish rewriting them unreported.
            data[0 : pages * PAGE_BYTES : PAGE_BYTES] = bytes([stamp]) * pages
        else:
            client.complete(job, at_ns=now_ns)
            counts["hits" if now_ns <= deadline_abs_ns else "misses"] += 1
        counts["jobs"] += 1
        job += 1
        next_release_ns = start_ns + job * period_ns
        # A late job starts the next one at once (soft real-time: no skipping).
        while not stopping and time.monotonic_ns() < next_release_ns:
            time.sleep(max(0.0, min(0.05, (next_release_ns - time.monotonic_ns()) / 1e9)))
    client.close()
    print(json.dumps({"task": os.environ.get("CRITMEM_TASK"), **counts, "unsent": client.unsent}), file=sys.stderr)
    return 1 if counts["checksum_failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
