"""The simulator's part of the HiRes reproduction: Fig. 6 (CPU shares of servers and of a child
subsystem with its own scheduler, in three phases) and Fig. 5 (timer-event latency against
depth), each simulated from scratch on critmem's scheduler tree.

A timer tick of the paper is a millisecond here, on both platforms: Linux's CFS bandwidth
control takes quotas and periods of 1 ms and more, so the same budgets run on both.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from critmem.reproduce.hires.paper import PAPER_FIG6_SERVERS, PAPER_FIG6_WEB_BUDGET, PAPER_FIG6_WEB_PERIODS, PAPER_FIG6_WEB_THREADS

__all__ = ["QUICK", "Plan", "fig5_sim", "fig6_analysis", "fig6_scenario", "fig6_sim", "phase_horizon_ms"]


@dataclass(frozen=True)
class Plan:
    """How much of each experiment to run."""

    fig6_sim_ms: int = 2400
    """Simulated time per Fig. 6 phase: a multiple of every phase's hyperperiod (200, 400 and 800 ms)."""
    fig6_window_ms: int = 100
    """The width of one point of the share-over-time curves."""
    fig6_linux_s: float = 10.0
    """Real seconds per Fig. 6 phase on Linux."""
    fig5_depths: tuple[int, ...] = tuple(range(9))
    fig5_event_cost_us: float = 2.0
    """CPU time a child-scheduler thread takes to deliver one event (the model's parameter; the
    paper's Fig. 5 gives a cost that grows with depth but no figure per level in its text)."""
    fig5_sim_ms: int = 1000
    fig4c_samples: int = 10_000
    """Alias/remove pairs timed per depth in the model (the paper: 10K samples)."""
    linux_depths: tuple[int, ...] = tuple(range(9))
    """Depths of the nested cgroups for the event-latency and page-cost measurements."""
    linux_samples: int = 1500
    """Samples per depth and round (the paper: 1500 for Fig. 4(a), 10K for Fig. 4(c))."""
    linux_rounds: int = 3
    http_depths: tuple[int, ...] = (0, 1, 2, 3, 4)
    http_seconds: int = 5
    """Seconds of `ab` per depth and round (whole seconds: ab's unit)."""
    http_rounds: int = 3
    http_quiet_wait_s: float = 30.0
    """Before each HTTP round: how long to wait at most for the CPUs to be quiet."""
    seed: int = 1


QUICK = Plan(
    fig6_sim_ms=800,
    fig6_linux_s=3.0,
    fig5_depths=(0, 1, 2, 4, 8),
    fig5_sim_ms=200,
    fig4c_samples=500,
    linux_depths=(0, 1, 4, 8),
    linux_samples=300,
    linux_rounds=1,
    http_depths=(0, 1, 4),
    http_seconds=1,
    http_rounds=1,
    http_quiet_wait_s=5.0,
)

# The web server's six threads under its own fixed-priority scheduler, the event thread first:
# (name, period ms, min and max execution ms). Together they ask for about 140 % of a CPU, so,
# like the paper's server under ab, the subsystem always has work and spends all it is given.
WEB_THREADS: tuple[tuple[str, float, float, float], ...] = (
    ("web-event", 1.0, 0.1, 0.3),
    ("web-net", 2.0, 0.2, 0.6),
    ("web-main", 2.0, 0.3, 0.9),
    ("web-cgi", 4.0, 1.0, 3.0),
    ("web-fs", 8.0, 0.5, 1.5),
    ("web-log", 16.0, 0.5, 1.5),
)
assert len(WEB_THREADS) == PAPER_FIG6_WEB_THREADS


def phase_horizon_ms(plan: Plan) -> int:
    return plan.fig6_sim_ms


def fig6_scenario(web_period_ms: int, horizon_ms: int, seed: int) -> dict[str, Any]:
    """Fig. 6's system for one phase: the web subsystem as a deferrable server of
    PAPER_FIG6_WEB_BUDGET ms per `web_period_ms` at the highest priority, holding its six
    threads under its own fixed priorities, and three CPU-bound threads in deferrable servers of
    4/25, 3/20 and 1/10 ms below it (rate-monotonic among themselves)."""
    servers: list[dict[str, Any]] = [
        {
            "name": "web",
            "kind": "deferrable",
            "budget_ms": PAPER_FIG6_WEB_BUDGET,
            "period_ms": web_period_ms,
            "priority": 0,
            "policy": "fp",
        }
    ]
    rt = sorted(PAPER_FIG6_SERVERS.items(), key=lambda kv: kv[1][1])
    servers += [
        {"name": name, "kind": "deferrable", "budget_ms": budget, "period_ms": period, "priority": rank + 1, "policy": "rm"}
        for rank, (name, (budget, period)) in enumerate(rt)
    ]
    tasks: list[dict[str, Any]] = [
        {
            "name": name,
            "exec": {"dist": "uniform", "min_ms": lo, "max_ms": hi},
            "period_ms": period,
            "priority": rank,
            "criticality": "D",
            "server": "web",
        }
        for rank, (name, period, lo, hi) in enumerate(WEB_THREADS)
    ]
    # One job longer than the run: the thread always has work.
    tasks += [{"name": f"cpu-{name}", "wcet_ms": horizon_ms, "period_ms": horizon_ms, "criticality": "C", "server": name} for name, _ in rt]
    return {
        "machine": {"cpus": 1},
        "scheduler": {"kind": "fp", "server": servers},
        "run": {"horizon_ms": horizon_ms, "seed": seed},
        "task": tasks,
    }


def _reserved(name: str, web_period_ms: int) -> tuple[int, int]:
    if name == "web":
        return PAPER_FIG6_WEB_BUDGET, web_period_ms
    return PAPER_FIG6_SERVERS[name]


def fig6_sim(plan: Plan, step: Callable[[str], None]) -> dict[str, Any]:
    """Simulates each phase; per server and phase: the budget, the period, the measured share
    (CPU time over the phase's length) and the share over time in windows of
    `plan.fig6_window_ms`."""
    import critmem

    rows: list[dict[str, Any]] = []
    timeline: list[dict[str, Any]] = []
    for phase, web_period in enumerate(PAPER_FIG6_WEB_PERIODS):
        step(f"Fig. 6 (simulator): web at {PAPER_FIG6_WEB_BUDGET} per {web_period}")
        horizon = plan.fig6_sim_ms
        result = critmem.run(fig6_scenario(web_period, horizon, plan.seed), record_jobs=False)
        table = result.server_table
        assert table is not None
        for name, consumed_ms in zip(table["name"], table["consumed_ms"], strict=True):
            budget, period = _reserved(str(name), web_period)
            rows.append({"name": str(name), "phase": phase, "budget": budget, "period": period, "share": float(consumed_ms) / horizon})
        timeline += _windows(result, phase, horizon, plan.fig6_window_ms)
    return {"rows": rows, "timeline": timeline, "phase_ms": plan.fig6_sim_ms, "window_ms": plan.fig6_window_ms}


def _windows(result: Any, phase: int, horizon_ms: int, window_ms: int) -> list[dict[str, Any]]:
    """Each server's CPU time per window over the window's length, from the execution segments
    (a segment crossing a window's edge is split there)."""
    server_of = dict(zip(result.tasks["name"], result.task_servers, strict=True))
    n = horizon_ms // window_ms
    busy: dict[str, list[float]] = {}
    for seg in result.segments.itertuples():
        server = server_of[seg.task]
        if server is None:
            continue
        cells = busy.setdefault(server, [0.0] * n)
        start, end = float(seg.start_ms), float(seg.end_ms)
        while start < end:
            w = min(int(start // window_ms), n - 1)
            edge = min(end, (w + 1) * window_ms)
            cells[w] += edge - start
            start = edge
    return [
        {"phase": phase, "t_ms": (w + 1) * window_ms, "name": name, "share": cells[w] / window_ms}
        for name, cells in sorted(busy.items())
        for w in range(n)
    ]


def fig6_analysis(web_period_ms: int) -> dict[str, dict[str, Any]]:
    """What fixed-priority analysis of deferrable servers guarantees each server in one phase:
    the budget it is sure to get every period and its share when every server is backlogged."""
    import critmem

    report = critmem.analyze(fig6_scenario(web_period_ms, 800, 1)).report
    out: dict[str, dict[str, Any]] = {}
    for server in report.get("servers", []):
        out[str(server["name"])] = {
            "guaranteed_budget_ms": server["guaranteed_budget_ms"],
            "backlogged_share": server["backlogged_share"],
            "response_ms": server["response_ms"],
            "verdict": server["verdict"],
        }
    return out


def _chain(depth: int, event_cost_us: float, horizon_ms: int, seed: int) -> dict[str, Any]:
    """A probe thread `depth` subsystems deep (a deferrable server holding the whole CPU, then a
    chain of levels), released by the timer every 10 ms, beside a CPU-bound thread at the
    root's lowest priority that keeps the CPU busy. At depth 0 the probe is the root's own
    thread: the root scheduler sees the tick itself and no child-scheduler thread runs."""
    probe: dict[str, Any] = {"name": "probe", "wcet_ms": 0.05, "period_ms": 10, "priority": 0, "criticality": "D"}
    busy: dict[str, Any] = {"name": "busy", "wcet_ms": horizon_ms, "period_ms": horizon_ms, "priority": 1, "criticality": "D"}
    scheduler: dict[str, Any] = {"kind": "fp"}
    if depth:
        servers: list[dict[str, Any]] = [
            {"name": "l1", "kind": "deferrable", "budget_ms": 10, "period_ms": 10, "priority": 0, "policy": "fp"}
        ]
        servers += [{"name": f"l{d}", "kind": "level", "parent": f"l{d - 1}", "priority": 0, "policy": "fp"} for d in range(2, depth + 1)]
        servers.append({"name": "background", "kind": "level", "priority": 1, "policy": "fp"})
        scheduler |= {"event_cost_us": event_cost_us, "pending_event_check": True, "server": servers}
        probe["server"] = f"l{depth}"
        busy["server"] = "background"
    return {"machine": {"cpus": 1}, "scheduler": scheduler, "run": {"horizon_ms": horizon_ms, "seed": seed}, "task": [probe, busy]}


def fig5_sim(plan: Plan, step: Callable[[str], None]) -> list[dict[str, Any]]:
    """Timer-event latency against depth: from each release of the probe to its first
    instant on the CPU, mean and max over the run."""
    import critmem

    rows: list[dict[str, Any]] = []
    for depth in plan.fig5_depths:
        step(f"Fig. 5 (simulator): timer events {depth} deep")
        result = critmem.run(_chain(depth, plan.fig5_event_cost_us, plan.fig5_sim_ms, plan.seed))
        jobs = result.jobs[result.jobs["task"] == "probe"]
        latency_us = ((jobs["start_ms"] - jobs["release_ms"]) * 1000.0).dropna().round(6)
        rows.append(
            {
                "depth": depth,
                "event_cost_us": plan.fig5_event_cost_us,
                "mean_us": float(latency_us.mean()),
                "max_us": float(latency_us.max()),
                "jobs": int(latency_us.size),
            }
        )
    return rows


def _event_chain(depth: int, event_cost_us: float, horizon_ms: int, seed: int) -> dict[str, Any]:
    """Fig. 4(a)'s two threads in `_chain`'s subsystem `depth` deep: `waiter` blocks on an event
    (a unit of `event`) that `signaller` holds and hands over when it is done, every 10 ms."""
    scenario = _chain(depth, event_cost_us, horizon_ms, seed)
    leaf = scenario["task"][0].get("server")
    signaller: dict[str, Any] = {
        "name": "signaller",
        "period_ms": 10,
        "priority": 1,
        "criticality": "D",
        "program": [{"lock": "event"}, {"compute_ms": 0.5}, {"unlock": "event"}, {"compute_ms": 0.05}],
    }
    waiter: dict[str, Any] = {
        "name": "waiter",
        "period_ms": 10,
        "offset_ms": 0.1,
        "priority": 0,
        "criticality": "D",
        "program": [{"lock": "event"}, {"compute_ms": 0.05}, {"unlock": "event"}],
    }
    if leaf is not None:
        signaller["server"] = waiter["server"] = leaf
    busy = dict(scenario["task"][-1], priority=2)
    scenario["task"] = [waiter, signaller, busy]
    scenario["resource"] = [{"name": "event", "units": 1, "protocol": "none"}]
    return scenario


def fig4a_sim(plan: Plan, step: Callable[[str], None]) -> list[dict[str, Any]]:
    """Fig. 4(a) from the model: from the instant `signaller` hands the event over to the
    instant `waiter` runs, against the depth of their subsystem."""
    import critmem

    rows: list[dict[str, Any]] = []
    for depth in plan.fig5_depths:
        step(f"Fig. 4(a) (simulator): an event between two threads {depth} deep")
        result = critmem.run(_event_chain(depth, plan.fig5_event_cost_us, plan.fig5_sim_ms, plan.seed))
        waits = result.waits[result.waits["task"] == "waiter"]
        segs = result.segments[result.segments["task"] == "waiter"]
        latency_us = []
        for job, woken_ms in zip(waits["job"], waits["end_ms"], strict=True):
            starts = segs[(segs["job"] == job) & (segs["start_ms"] >= woken_ms - 1e-9)]["start_ms"]
            if len(starts):
                latency_us.append(round((float(starts.min()) - float(woken_ms)) * 1000.0, 6))
        rows.append(
            {
                "depth": depth,
                "events": len(latency_us),
                "mean_us": sum(latency_us) / len(latency_us) if latency_us else None,
                "max_us": max(latency_us) if latency_us else None,
            }
        )
    return rows


def _io_chain(depth: int, event_cost_us: float, horizon_ms: int, seed: int) -> dict[str, Any]:
    """`_chain`'s subsystems with the probe as the event thread of port 7000, fed a packet every
    10 ms, and a timer-released twin of it beside: the packet path against the timer path."""
    scenario = _chain(depth, event_cost_us, horizon_ms, seed)
    probe = scenario["task"][0]
    timer = dict(probe, name="timer", offset_ms=5, priority=1)
    scenario["task"].insert(1, timer)
    scenario["io"] = {
        "bandwidth_bytes_per_s": 12_500_000,
        "stream": [{"port": 7000, "bytes": 64, "period_ms": 10}],
        "port": [{"port": 7000, "task": "probe"}],
    }
    return scenario


def fig4b_sim(plan: Plan, step: Callable[[str], None]) -> list[dict[str, Any]]:
    """Fig. 4(b) from the model: from a packet's arrival to its event thread's start, against
    the depth of the thread's subsystem, with the CPU kept busy below it; beside it, the same
    thread released by the timer (Fig. 5's path) in the same run."""
    import critmem

    rows: list[dict[str, Any]] = []
    for depth in plan.fig5_depths:
        if depth < 1:
            continue
        step(f"Fig. 4(b) (simulator): packets {depth} deep")
        result = critmem.run(_io_chain(depth, plan.fig5_event_cost_us, plan.fig5_sim_ms, plan.seed))
        summary = json.loads(result.summary_json)
        (port,) = [p for p in summary["io"]["ports"] if p["port"] == 7000]
        jobs = result.jobs[result.jobs["task"] == "timer"]
        timer_us = ((jobs["start_ms"] - jobs["release_ms"]) * 1000.0).dropna().round(6)
        rows.append(
            {
                "depth": depth,
                "packets": port["received"],
                "packet_mean_us": port["mean_latency_us"],
                "packet_max_us": port["max_latency_us"],
                "timer_mean_us": float(timer_us.mean()),
            }
        )
    return rows


def fig4c_model(depths: Sequence[int], samples: int, clock: Callable[[], int]) -> list[dict[str, Any]]:
    """Fig. 4(c) from the model: the cost of aliasing one page into a subsystem `depth` deep
    (from its parent, which holds the page through aliases from the root down) and of
    removing it again, as wall-clock time of the model's own data structures per operation
    (median of `samples`, read with `clock` in ns); like the paper's, each is one call of the
    parent, whatever the depth."""
    from critmem.hires import ReservationTree

    rows: list[dict[str, Any]] = []
    page = 4096
    for depth in depths:
        if depth < 1:
            continue
        tree = ReservationTree(cpus=1, memory_bytes=64 * page, page_bytes=page)
        parent = "root"
        for d in range(1, depth + 1):
            tree.add_subsystem(f"l{d}", parent)
            tree.bind(tree.create(f"l{d}", "hard", "memory"), bytes=(64 - d) * page)
            parent = f"l{d}"
        tree.allocate(page)
        for d in range(1, depth):
            tree.alias("root" if d == 1 else f"l{d - 1}", page, f"l{d}", page)
        holder, child = ("root" if depth == 1 else f"l{depth - 1}"), f"l{depth}"
        alias_ns: list[int] = []
        remove_ns: list[int] = []
        for _ in range(samples):
            t0 = clock()
            tree.alias(holder, page, child, page)
            t1 = clock()
            tree.remove(holder, child, page)
            t2 = clock()
            alias_ns.append(t1 - t0)
            remove_ns.append(t2 - t1)
        tree.check()
        rows.append({"depth": depth, "alias_ns": _median(alias_ns), "remove_ns": _median(remove_ns), "samples": samples})
    return rows


def _median(values: list[int]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return float(ordered[mid]) if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2.0


def sim_counts(plan: Plan) -> int:
    """The progress bar's steps of the simulator part."""
    return len(PAPER_FIG6_WEB_PERIODS) + 2 * len(plan.fig5_depths) + len([d for d in plan.fig5_depths if d >= 1])


def shares_by(rows: Sequence[dict[str, Any]], phase: int) -> dict[str, float]:
    return {str(r["name"]): float(r["share"]) for r in rows if r["phase"] == phase}
