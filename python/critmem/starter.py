"""The commented starter scenario `critmem init` writes."""

from __future__ import annotations

STARTER = """\
# A critmem scenario: times are decimal milliseconds. `critmem run FILE` simulates it,
# `critmem analyze FILE` runs the schedulability analyses, `critmem validate FILE` checks it.

[machine]
cpus = 1                  # CPUs the scheduler assigns

[scheduler]
kind = "rm"               # fp | rm | dm | edf | pfp | pedf | gedf | gfp | cyclic
                          # (fp takes each task's `priority`, lower number = higher)

[run]
horizon_ms = 200          # simulated time; default: one hyperperiod plus the largest offset
seed = 1                  # seed of random execution times and arrivals

# One [[task]] per periodic (or sporadic) task.
[[task]]
name = "control"
period_ms = 10
wcet_ms = 2               # or exec = { dist = "uniform", min_ms = 1, max_ms = 2 }
deadline_ms = 10          # default: the period
criticality = "A"         # A | B | C | D: a label for reports

[[task]]
name = "sensor"
period_ms = 20
wcet_ms = 4
offset_ms = 1             # first release

[[task]]
name = "logger"
period_ms = 50
exec = { dist = "uniform", min_ms = 5, max_ms = 15 }
criticality = "D"

# More to add (see the documentation's scenario pages, docs/scenarios/, and its scenario reference):
# [memory] with total_mb, swap and per-task private_mb/access streams: the page-level model;
# [[group]] and [control] controller = "sara": memory-limited groups under a controller;
# [[resource]] name/units/protocol = "none" | "pip" | "srp", and a task `program` of
#   { compute_ms }, { lock = "r" }, { unlock = "r" } steps: shared resources;
# [[scheduler.server]] name/kind = "deferrable" | "polling" | "level"/budget_ms/period_ms and a
#   task `server = "name"`: a hierarchy of servers.
"""
