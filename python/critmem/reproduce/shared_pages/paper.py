"""The shared-page paper's own numbers (Kim and Rajkumar, Sec. VI;
../shared/papers/shared-page-memory-reservations.txt), quoted in the report and the `--json`
summary for comparison, and the names of its Table II's rows and columns; nothing is computed
from the numbers."""

from __future__ import annotations

PAPER_MIN_RESERVATION_MB = {"tau1": 11, "tau2": 2}
"""Sec. VI-B: tau1 needs 11 MB (10 MB "could not even finish its first period"), tau2 2 MB."""

PAPER_TABLE3: dict[str, dict[str, tuple[list[int], int, str]]] = {
    # set -> technique -> (per-task reservations MB, total physical MB, the paper's arithmetic)
    "tau1+tau1": {
        "no-sp-mgmt": ([11, 11], 12, "(11+11)-10"),
        "spc": ([11, 11], 22, "11+11"),
        "spel": ([11, 11], 12, "(11+11)-10"),
    },
    "tau2+tau2": {
        "no-sp-mgmt": ([2, 2], 3, "(2+2)-1"),
        "spc": ([2, 2], 4, "2+2"),
        "spel": ([11, 11], 12, "(11+11)-10"),
    },
    "tau1+tau2": {
        "no-sp-mgmt": ([11, 2], 12, "(11+2)-1"),
        "spc": ([11, 2], 13, "11+2"),
        "spel": ([11, 11], 12, "(11+11)-10"),
    },
}

PAPER_FIG9 = {
    "no-sp-mgmt": "misses every 500 ms (once per tau2 period)",
    "spc": "same as alone: no misses",
    "spel": "same as alone: no misses",
}

PAPER_TABLE2_CYCLES: dict[str, dict[str, float]] = {
    # operation -> column -> CPU cycles (rdtsc, Core i5-2540M at 2.6 GHz, Linux/RK 2.6.32)
    "alloc": {"global": 400.4, "reservation": 192.4, "spc": 202.3},
    "free": {"global": 208.6, "reservation": 187.2, "spc": 188.6},
    "map": {"global": 1197.0, "reservation": 1220.4, "spc": 1417.3},
    "unmap": {"global": 816.2, "reservation": 834.3, "spc": 1059.7},
}
PAPER_CPU_GHZ = 2.6

TABLE2_ROWS = {
    "alloc": "Page allocation (`alloc_page`)",
    "free": "Page deallocation (`__free_page`)",
    "map": "Mapping a shared page to a page table",
    "unmap": "Unmapping a shared page from a page table",
}
TABLE2_COLUMNS = {
    "global": "Global Mgmt",
    "reservation": "Mem Reserve w/o SP-Mgmt",
    "spc": "Mem Reserve w/ SP-Mgmt (SPC)",
}
