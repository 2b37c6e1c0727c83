"""What every app shares: importing its extra, stopping on a signal, its memory figures."""

from __future__ import annotations

import importlib
import signal
import sys
from pathlib import Path
from types import ModuleType

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
