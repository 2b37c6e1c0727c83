"""The HiRes paper's own numbers (hierarchical resource management in the Composite OS; ../shared/papers/hires-hierarchical-resource-management.txt),
quoted in the report and the `--json` summary for comparison; nothing is computed from them.
Figs. 4–6 are plots whose data the text does not give: only what the text states is here."""

from __future__ import annotations

PAPER_FIG6_SERVERS: dict[str, tuple[int, int]] = {
    # name -> (budget, replenishment period) in timer ticks
    "rt25": (4, 25),
    "rt20": (3, 20),
    "rt10": (1, 10),
}
"""Sec. IV: "Three cpu-bound threads are also scheduled in servers with reservations (budgets and
replenishment periods) of 4 of 25, 3 of 20, and 1 of 10 timer ticks"."""

PAPER_FIG6_WEB_BUDGET = 4
"""Sec. IV, Fig. 6: "The budget of the web-server child subsystem remains 4 throughout"."""
PAPER_FIG6_WEB_PERIODS = (8, 16, 32)
"""Fig. 6's three phases: the web server's replenishment period 8, then 16, then 32 ticks, at the
highest priority in all."""
PAPER_FIG6_WEB_THREADS = 6
"""Sec. IV: the web server "consists of 6 separate threads, one of which is the event thread"."""

PAPER_TABLE3: dict[int, dict[str, float]] = {
    0: {"connections_per_s": 6356, "stddev": 205, "latency_ms": 3.5, "p95_ms": 5},
    1: {"connections_per_s": 6294, "stddev": 69, "latency_ms": 3.8, "p95_ms": 5},
}
"""Table III: the web server at depth 0 (the root subsystem) and depth 1, under ab with 20
concurrent connections for 30 s, averaged over 30 readings: "a 1% performance degradation"."""
PAPER_TABLE3_LOSS_DEPTH1 = 1 - 6294 / 6356
"""The loss at depth 1 that Table III's numbers give (about 1 %)."""

PAPER_IPC_US = 0.815
"""Sec. IV: an invocation between protection domains in Composite."""
PAPER_LINUX_PIPE_US = 10.305
"""Sec. IV: "a comparable operation between threads communicating over a pipe" on Linux 2.6.33."""
PAPER_FIG4_STDDEV_US = 0.01
"""Fig. 4(a): event latency between two threads, "standard deviations are always less than 0.01µs",
averaged over 1500 samples at every depth."""
PAPER_FIG4B_MAX_US = (29.91, 40.48)
"""Fig. 4(b): the worst interrupt-to-event-thread latencies, from interference by the timer tick."""
PAPER_FIG4C_MAX_US = (22.25, 37.33)
"""Fig. 4(c): the worst map/unmap costs, from interference by the timer tick."""
