"""The TMEM paper's own numbers (Wang, Song, Parmer, Sweeney, Venkataramani, "Increasing Memory
Utilization with Transient Memory Scheduling"; ../shared/papers/tmem-transient-memory-scheduling.txt),
quoted in the report and the `--json` summary for comparison; nothing is computed from them.
Figs. 6 and 7 are plots whose data the text does not give: only what the text states is here."""

from __future__ import annotations

PAPER_FIG6_MIN_PAGES = 48
"""Fig. 6's caption and Sec. VI-B: the minimum allocation to the real-time and shared
subsystems, 48 pages (the x-axis' 0)."""
PAPER_FIG7_MIN_PAGES = 74
"""Fig. 7's caption: the minimum allocation with the best-effort subsystem, 74 pages (0)."""
PAPER_SLOPE_RATIO = 4.0
"""Sec. VI-B: "A linear regression of the TMEM algorithm and the greedy approach show that the
slope of the TMEM algorithm is 4 times steeper"."""
PAPER_RUN_S = 60
"""Sec. VI-B: the closed system "for 60 seconds"."""
PAPER_TASK_SETS = 10
"""Sec. VI-B: "Each experiment is run ten times with different generated task sets"."""
PAPER_BE_WINDOW_S = (20, 40)
"""Sec. VI-B, Fig. 7: best-effort threads arrive at 20 s and complete at 40 s."""
PAPER_POLICY_PERIOD_MS = 250
"""Sec. V-B: the policy runs every quarter second."""
PAPER_POLICY_OVERHEAD_PCT = 0.2
"""Sec. V-B: the policy's cost, 0.2 % of execution time at that period."""

PAPER_TABLE4: dict[str, tuple[float, int]] = {
    # row -> (tau_qos response time in µs, TMEM above the minimum in units)
    "min": (38.8, 35),
    "max": (10.1, 48),
    "static": (10.1, 140),
    "tmem": (12.7, 42),
}
"""Table IV: the HTTP service (23 components, 13 with stacks, 7 with cbufs, 8 threads). The
static row's 140 equals (13 + 7) caches × 8 threads − 20 minimum units; the min row's 35 above
the minimum is not what "only the minimal allocation" implies and is quoted as printed."""

PAPER_TABLE4_SHAPE = {"components": 23, "stack_components": 13, "cbuf_components": 7, "threads": 8}
"""Sec. VI-B: the service's size."""

PAPER_TABLE3_US_I7: dict[str, float] = {
    # operation -> µs on the paper's Core i7 at 3.4 GHz (Table III)
    "invocation before TMEM": 0.24,
    "thread block and wakeup": 0.51,
    "invocation with a cached stack": 0.25,
    "invocation with PI": 2.11,
    "cached cbuf_alloc": 0.07,
    "cached cbuf_free": 0.09,
    "cbuf2buf": 0.08,
    "cbuf_alloc with PI": 2.23,
}
"""Table III (i7 column); `workloads.TABLE3_COSTS` charges two of them in the generated scenarios."""
