"""What every app shares: importing its extra, stopping on a signal, its memory figures."""

from __future__ import annotations

import importlib
import json
import os
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from critmem.jobclient import ProgressReporter

T = TypeVar("T")
# Self-check failures reported one by one on stderr; the count covers the rest.
REPORTED_FAILURES = 5

# The exit code of a program that cannot run as asked (missing extra, bad argument), as the CLI's.
EXIT_USAGE = 2
# The extra that brings in every app's third-party package.
EXTRA = "apps"


def require(module: str, app: str) -> ModuleType:
    """`module`, or one line on stderr naming the extra to install and exit code 2."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        print(f"{app}: cannot import {module} ({e}): install the '{EXTRA}' extra: pip install 'critmem[{EXTRA}]'", file=sys.stderr)
        raise SystemExit(EXIT_USAGE) from None


def usage_error(app: str, message: str) -> SystemExit:
    print(f"{app}: {message}", file=sys.stderr)
    return SystemExit(EXIT_USAGE)


class StopFlag:
    """Set by SIGTERM or SIGINT: the program finishes what it is doing and reports."""

    def __init__(self) -> None:
        self.stopping = False
        signal.signal(signal.SIGTERM, self._stop)
        signal.signal(signal.SIGINT, self._stop)

    def _stop(self, _signum: int, _frame: object) -> None:
        self.stopping = True


def memory_mb() -> dict[str, float | None]:
    """This process's resident memory now (`vmrss_mb`) and at its peak (`vmhwm_mb`), in MiB."""
    figures: dict[str, float | None] = {"vmrss_mb": None, "vmhwm_mb": None}
    try:
        status = Path("/proc/self/status").read_text(encoding="ascii")
    except OSError:
        return figures
    for line in status.splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            figures[f"{key.lower()}_mb"] = round(int(value.split()[0]) / 1024, 1)
    return figures


def median(values: list[float]) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def run_work_units(
    app: str,
    limit: int | None,
    stop: StopFlag,
    progress: ProgressReporter,
    unit: Callable[[], T],
    check: Callable[[T, T | None], str | None],
    facts: dict[str, Any],
) -> int:
    """A non-real-time app's main loop: `unit` after `unit` until `limit` of them or a stop, each
    checked against the first (`check(result, first)`, None for the first itself) and counted in
    `progress`; then one JSON line of counts (with `facts`) on stderr. The exit code: 1 if a
    self-check failed, else 0."""
    reference: T | None = None
    units = failures = 0
    unit_s: list[float] = []
    unit_cpu_s: list[float] = []
    started = time.monotonic()
    while not stop.stopping and (limit is None or units < limit):
        began, began_cpu = time.monotonic(), time.process_time()
        result = unit()
        wrong = check(result, reference)
        if reference is None:
            reference = result
        units += 1
        unit_s.append(time.monotonic() - began)
        unit_cpu_s.append(time.process_time() - began_cpu)
        if wrong is not None:
            failures += 1
            if failures <= REPORTED_FAILURES:
                print(f"{app}: self-check failed in work unit {units}: {wrong}", file=sys.stderr)
        progress.update(units)
    progress.close()
    elapsed_s = time.monotonic() - started
    line = {
        "app": app,
        "task": os.environ.get("CRITMEM_TASK"),
        "work_units": units,
        "self_check_failures": failures,
        "work_units_per_s": round(units / elapsed_s, 3) if elapsed_s > 0 else None,
        "unit_ms_median": _ms(median(unit_s)),
        "unit_cpu_ms_median": _ms(median(unit_cpu_s)),
        **facts,
        **memory_mb(),
    }
    print(json.dumps(line), file=sys.stderr)
    return 1 if failures else 0


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1000, 1)
