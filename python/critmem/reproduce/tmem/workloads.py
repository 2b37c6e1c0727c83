"""The TMEM paper's workloads (Sec. VI-B) as scenarios: real-time task sets drawn from a seed,
the Fig. 8 component graph, the best-effort threads of the open system, and an HTTP-style
request-response service for the Table IV analogue.

Where each rule comes from:

- Task sets (Sec. VI-B, and the original generator `tools/run_tmem.py` of COMPOSITE): periods
  exponential around 100 ms in whole ms, redrawn below 20 ms (the generator's two 10 ms
  ticks); utilisations in whole percent, each exponential around Σu/n and redrawn below 1 %,
  the whole set redrawn until the sum is exactly Σu; e_i = p_i·u_i; rate-monotonic priorities
  (ties by thread index).
- Fig. 8 (the figure's caption and the generator's component script `tools/tmem_python_static`):
  three lattices of nine components each — shared `sh0`–`sh8`, real-time `sh9`–`sh17`,
  best-effort `sh18`–`sh26` — and a sink that spends the rest of the budget. Each lattice is a
  3×3 grid of cells (i, j); a component calls its left child (i+1, j) or its right child
  (i, j+1). A call off the grid goes to the sink, except where a lattice leads into the shared
  one: the real-time lattice's left edge (3, j) enters shared cell (0, j), the best-effort
  lattice's right edge (i, 3) enters shared cell (i, 0). Weights: every real-time component
  calls left (toward the shared lattice) with 75 %, every best-effort one right (toward it)
  with 75 %; in the shared lattice the diagonal i = j ("the three components on the line") is
  50/50 and the others lean 75 % toward it. (The script's draw `v` in [0, 128) calls left iff
  v ≥ r: r = 32 gives 75 % left, r = 96 75 % right. One stored version of the script gives the
  shared centre `sh4` r = 125; the paper's 50/50 for the line is followed here.)
- Each lattice visit (Sec. VI-B "at each, 10 % of its e_i is consumed"): spend 10 % of the
  job's budget, take a cbuf, call a child passing it, free the cbuf. Every component has one
  stack and one cbuf as its minimum allocation (P3: the largest single request), the sink one
  stack and no cbufs.
- Entry points (open question 4): the paper's "two components at the top of the real-time
  subsystem" — `sh9` and `sh11`, each job choosing one with equal weight — by default; the
  generator's three entries (`sh9`, `sh11`, `sh14`, thread i fixed to entry i mod 3) as an
  option. Best-effort threads enter `sh18`, `sh19`, `sh21` likewise.
- Best-effort threads (Sec. VI-B, open question 9): criticality D, below every real-time
  priority, 20 ms jobs released every 20 ms (back to back), from 20 s up to 40 s.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

__all__ = [
    "BE_ENTRIES",
    "EXAMPLES",
    "LATTICES",
    "NO_COSTS",
    "RT_ENTRIES_PAPER",
    "RT_ENTRIES_SOURCE",
    "SINK",
    "TABLE3_COSTS",
    "Costs",
    "Edge",
    "HttpService",
    "RtTask",
    "TmemConfig",
    "be_tasks",
    "draw_periods_ms",
    "draw_utilizations_pct",
    "example_scenario",
    "example_toml",
    "fig8_components",
    "fig8_graph",
    "fig8_scenario",
    "http_scenario",
    "http_service",
    "min_units",
    "reachable",
    "rm_priorities",
    "task_set",
    "to_toml",
]

SINK = "sink"
"""The component every lattice path ends in: it spends what is left of the job's budget."""

# Cells of a 3×3 lattice in component order: by level i + j, then by decreasing i, as the
# generator's script numbers them (sh0 top, sh1/sh2 the next level, ..., sh8 bottom).
_CELLS: tuple[tuple[int, int], ...] = ((0, 0), (1, 0), (0, 1), (2, 0), (1, 1), (0, 2), (2, 1), (1, 2), (2, 2))
_SIDE = 3

LATTICES: dict[str, int] = {"shared": 0, "rt": 9, "be": 18}
"""Each lattice's first component number: shared sh0–sh8, real-time sh9–sh17, best-effort sh18–sh26."""

RT_ENTRIES_PAPER = ("sh9", "sh11")
"""The paper's "two components at the top of the real-time subsystem"."""
RT_ENTRIES_SOURCE = ("sh9", "sh11", "sh14")
"""The original generator's real-time entries (thread i enters entry i mod 3)."""
BE_ENTRIES = ("sh18", "sh19", "sh21")
"""The original generator's best-effort entries."""

COMPUTE_SHARE = 0.1
"""Sec. VI-B: "at each [component], 10 % of its e_i is consumed"."""
LEAN = 0.75
"""Fig. 8: "with a 75 % chance, it will invoke toward the dotted line, and 25 % away"."""

EntryMode = Literal["paper", "source"]


@dataclass(frozen=True)
class Costs:
    """TMEM's operation costs charged to the simulated CPU (µs)."""

    invocation_us: float = 0.0
    """Entering a component (`[components] invocation_cost_us`), on every call."""
    cbuf_map_us: float = 0.0
    """Mapping a passed cbuf into a component it is not yet mapped in (`[tmem] cbuf_map_us`)."""


TABLE3_COSTS = Costs(invocation_us=0.25, cbuf_map_us=0.08)
"""Table III, Core i7 column: "Invocation w/ cached stack" 0.25 µs (an invocation, call and
return, with TMEM's stack cache) and "cbuf2buf" 0.08 µs (a passed cbuf made usable in the
component it is passed to: the simulator's cbuf map). In the Fig. 8 scenarios both come out of
the job's budget, as in the paper ("passing the remaining time left for execution minus the
cost of an invocation"); in the HTTP service, whose steps are absolute, they add to a request."""
NO_COSTS = Costs()


# ---------------------------------------------------------------------------------------------
# Task sets


@dataclass(frozen=True)
class RtTask:
    """One real-time thread: whole-ms period, whole-percent utilisation, fp priority."""

    name: str
    period_ms: int
    utilization_pct: int
    priority: int

    @property
    def wcet_ms(self) -> float:
        """e_i = p_i·u_i (exact to 0.01 ms: whole ms times whole percent)."""
        return round(self.period_ms * self.utilization_pct / 100, 2)


def draw_periods_ms(n: int, rng: np.random.Generator, *, mean_ms: float = 100.0, min_ms: int = 20) -> list[int]:
    """`n` whole-ms periods, each exponential with mean `mean_ms` truncated to whole ms and
    redrawn below `min_ms` (the generator's `int(expovariate)` redrawn under two ticks)."""
    out: list[int] = []
    for _ in range(n):
        while True:
            p = int(rng.exponential(mean_ms))
            if p >= min_ms:
                out.append(p)
                break
    return out


def draw_utilizations_pct(n: int, total_pct: int, rng: np.random.Generator, *, max_sets: int = 1_000_000) -> list[int]:
    """`n` whole-percent utilisations summing to exactly `total_pct`: each exponential around
    total/n truncated to whole percent and redrawn below 1 %, the whole set redrawn until the
    sum is exact (the original generator's rule)."""
    if n < 1 or total_pct < n:
        raise ValueError(f"{n} utilisations of at least 1 % cannot sum to {total_pct} %")
    mean = total_pct / n
    for _ in range(max_sets):
        us: list[int] = []
        for _ in range(n):
            while True:
                u = int(rng.exponential(mean))
                if u >= 1:
                    us.append(u)
                    break
        if sum(us) == total_pct:
            return us
    raise ValueError(f"no set of {n} utilisations summing to {total_pct} % in {max_sets} draws")


def rm_priorities(periods_ms: Sequence[float]) -> list[int]:
    """Rate-monotonic priorities 0 (highest) … n−1: shorter period first, ties by index."""
    order = sorted(range(len(periods_ms)), key=lambda i: (periods_ms[i], i))
    prio = [0] * len(periods_ms)
    for rank, i in enumerate(order):
        prio[i] = rank
    return prio


def task_set(seed: int, *, n: int = 8, utilization: float = 0.8, mean_period_ms: float = 100.0, min_period_ms: int = 20) -> list[RtTask]:
    """The real-time threads of one experiment: `n` threads, Σu = `utilization` exactly (whole
    percent), drawn from numpy's Generator seeded with `seed` (periods first, then
    utilisations, as the original generator does)."""
    total_pct = round(utilization * 100)
    if not math.isclose(total_pct, utilization * 100, abs_tol=1e-9):
        raise ValueError(f"utilization {utilization} is not a whole percent")
    rng = np.random.default_rng(seed)
    periods = draw_periods_ms(n, rng, mean_ms=mean_period_ms, min_ms=min_period_ms)
    utils = draw_utilizations_pct(n, total_pct, rng)
    prio = rm_priorities(periods)
    return [RtTask(f"rt{i}", periods[i], utils[i], prio[i]) for i in range(n)]


# ---------------------------------------------------------------------------------------------
# Fig. 8


@dataclass(frozen=True)
class Edge:
    """A lattice component's two children and the chance of calling the left one."""

    left: str
    right: str
    left_weight: float

    @property
    def right_weight(self) -> float:
        return 1.0 - self.left_weight


def _name(lattice: str, cell: tuple[int, int]) -> str:
    return f"sh{LATTICES[lattice] + _CELLS.index(cell)}"


def _child(lattice: str, cell: tuple[int, int]) -> str:
    """The component at `cell` of `lattice`, or where a call off the grid goes."""
    i, j = cell
    if i < _SIDE and j < _SIDE:
        return _name(lattice, cell)
    if lattice == "rt" and i == _SIDE:
        return _name("shared", (0, j))
    if lattice == "be" and j == _SIDE:
        return _name("shared", (i, 0))
    return SINK


def _left_weight(lattice: str, cell: tuple[int, int]) -> float:
    i, j = cell
    if lattice == "rt":
        return LEAN  # left leads to the shared lattice
    if lattice == "be":
        return 1.0 - LEAN  # right leads to the shared lattice
    if i == j:
        return 0.5  # on the line
    # Left (i+1) moves toward the diagonal when i < j, right (j+1) when i > j.
    return LEAN if i < j else 1.0 - LEAN


def fig8_graph() -> dict[str, Edge]:
    """sh0 … sh26 → their children and weights, in component order."""
    out: dict[str, Edge] = {}
    for lattice in LATTICES:
        for cell in _CELLS:
            i, j = cell
            out[_name(lattice, cell)] = Edge(_child(lattice, (i + 1, j)), _child(lattice, (i, j + 1)), _left_weight(lattice, cell))
    return dict(sorted(out.items(), key=lambda kv: int(kv[0][2:])))


def reachable(graph: dict[str, Edge], entries: Iterable[str]) -> set[str]:
    """Every component a call from `entries` can reach (the sink included)."""
    seen: set[str] = set()
    todo = list(entries)
    while todo:
        c = todo.pop()
        if c in seen:
            continue
        seen.add(c)
        if c in graph:
            e = graph[c]
            todo += [e.left, e.right]
    return seen


def _call_step(e: Edge) -> dict[str, Any]:
    if e.left == e.right:  # sh8: both children are the sink
        return {"call_one_of": [e.left], "weights": [1.0], "pass_cbuf": True}
    return {"call_one_of": [e.left, e.right], "weights": [e.left_weight, e.right_weight], "pass_cbuf": True}


def fig8_components(entries: Iterable[str]) -> list[dict[str, Any]]:
    """`[[component]]` tables of the lattice components reachable from `entries`, in
    component order, then the sink."""
    graph = fig8_graph()
    used = reachable(graph, entries)
    out: list[dict[str, Any]] = []
    for name, e in graph.items():
        if name not in used:
            continue
        program = [{"compute_share": COMPUTE_SHARE}, {"cbuf": "alloc"}, _call_step(e), {"cbuf": "free"}]
        out.append({"name": name, "stacks": 1, "cbufs": 1, "program": program})
    out.append({"name": SINK, "stacks": 1, "program": [{"compute_rest": True}]})
    return out


def min_units(components: Iterable[dict[str, Any]]) -> int:
    """Σ of the minimum allocations (stacks + cbufs) of `components`."""
    return sum(int(c.get("stacks", 0)) + int(c.get("cbufs", 0)) for c in components)


def _entry_step(entries: Sequence[str], index: int, mode: EntryMode) -> dict[str, Any]:
    if mode == "source":
        return {"call_one_of": [entries[index % len(entries)]], "weights": [1.0]}
    return {"call_one_of": list(entries), "weights": [1.0 / len(entries)] * len(entries)}


def be_tasks(
    n: int = 8,
    *,
    start_ms: float = 20_000,
    stop_ms: float = 40_000,
    job_ms: float = 20,
    first_priority: int = 100,
    entries: EntryMode = "paper",
) -> list[dict[str, Any]]:
    """The best-effort threads of the open system (criticality D, priorities below every
    real-time one): `job_ms` jobs released every `job_ms` from `start_ms` until `stop_ms`."""
    return [
        {
            "name": f"be{i}",
            "criticality": "D",
            "priority": first_priority + i,
            "period_ms": job_ms,
            "wcet_ms": job_ms,
            "offset_ms": start_ms,
            "stop_ms": stop_ms,
            "program": [_entry_step(BE_ENTRIES, i, entries)],
        }
        for i in range(n)
    ]


@dataclass(frozen=True)
class TmemConfig:
    """The `[tmem]` table: a scheme's policy and wait, and the memory above the minimum."""

    policy: str = "tmem"
    """min | max | fair | greedy | tmem | tmem-composite | watermark."""
    wait: str = "inherit"
    """inherit (priority inheritance) | block (the -nopi variants)."""
    units_above_min: int | None = 20
    """Transient memory beyond Σ minimums the pool holds; None: no limit (what `max` runs with)."""
    period_ms: float = 250.0
    """How often the policy runs (Sec. V-B: every quarter second)."""
    first_run_ms: float = 1250.0
    """The policy's first run: the original system's policy thread waited five of its periods
    (tmem_policy.c), caches growing freely until then, for every scheme alike."""

    def table(self) -> dict[str, Any]:
        t: dict[str, Any] = {"policy": self.policy, "wait": self.wait}
        if self.units_above_min is not None:
            t["units_above_min"] = self.units_above_min
        t["period_ms"] = self.period_ms
        t["first_run_ms"] = self.first_run_ms
        return t


def fig8_scenario(
    seed: int,
    *,
    tmem: TmemConfig | None = None,
    n_rt: int = 8,
    utilization: float = 0.8,
    horizon_ms: float = 60_000,
    open_system: bool = False,
    n_be: int = 8,
    be_start_ms: float = 20_000,
    be_stop_ms: float = 40_000,
    entries: EntryMode = "paper",
    costs: Costs = TABLE3_COSTS,
) -> dict[str, Any]:
    """One Fig. 6 (closed) or Fig. 7 (`open_system`) scenario: task set `seed` (also the run's
    seed, which fixes every job's call draws) on one CPU under explicit fixed priorities, the
    components its threads can reach, `[tmem]` (default `TmemConfig()`) and TMEM's operation
    `costs` (default Table III's)."""
    tmem = tmem or TmemConfig()
    tasks = task_set(seed, n=n_rt, utilization=utilization)
    rt_entries = RT_ENTRIES_PAPER if entries == "paper" else RT_ENTRIES_SOURCE
    task_tables: list[dict[str, Any]] = [
        {
            "name": t.name,
            "priority": t.priority,
            "period_ms": float(t.period_ms),
            "wcet_ms": t.wcet_ms,
            "program": [_entry_step(rt_entries, i, entries)],
        }
        for i, t in enumerate(tasks)
    ]
    used_entries: list[str] = list(rt_entries)
    if open_system:
        task_tables += be_tasks(n_be, start_ms=be_start_ms, stop_ms=be_stop_ms, entries=entries)
        used_entries += BE_ENTRIES
    return _with_costs(
        {
            "machine": {"cpus": 1},
            "scheduler": {"kind": "fp"},
            "run": {"horizon_ms": float(horizon_ms), "seed": seed},
            "tmem": tmem.table(),
            "component": fig8_components(used_entries),
            "task": task_tables,
        },
        costs,
    )


def _with_costs(scenario: dict[str, Any], costs: Costs) -> dict[str, Any]:
    """`scenario` with `costs`: `[components] invocation_cost_us` and `[tmem] cbuf_map_us`,
    each only when not 0 (so a scenario without costs is written as before)."""
    out: dict[str, Any] = {}
    for key, section in scenario.items():
        if key == "component" and costs.invocation_us:
            out["components"] = {"invocation_cost_us": costs.invocation_us}
        if key == "tmem" and costs.cbuf_map_us:
            section = section | {"cbuf_map_us": costs.cbuf_map_us}
        out[key] = section
    return out


# ---------------------------------------------------------------------------------------------
# Table IV: a request-response service


@dataclass(frozen=True)
class HttpService:
    """The components of the service and which of them hold managed stacks and cbufs."""

    components: list[dict[str, Any]]
    """`[[component]]` tables (programs in absolute compute; the request path is fixed)."""
    request: list[dict[str, Any]]
    """The program of one request (a job of every handler thread)."""

    @property
    def stack_components(self) -> list[str]:
        return [c["name"] for c in self.components if "stacks" in c]

    @property
    def cbuf_components(self) -> list[str]:
        return [c["name"] for c in self.components if "cbufs" in c]

    def request_calls(self) -> int:
        """Invocations one request makes, nested calls included."""
        by_name = {c["name"]: c for c in self.components}

        def calls(program: list[dict[str, Any]]) -> int:
            return sum(1 + calls(by_name[s["call"]].get("program", [])) for s in program if "call" in s)

        return calls(self.request)

    def request_compute_us(self, costs: Costs = NO_COSTS) -> float:
        """CPU time of one request with every stack and cbuf in its cache and every passed cbuf
        already mapped where it goes (µs): its compute and, with `costs`, an invocation's cost
        per call."""
        by_name = {c["name"]: c for c in self.components}

        def total(program: list[dict[str, Any]]) -> float:
            t = 0.0
            for step in program:
                t += 1000 * float(step.get("compute_ms", 0.0))
                if "call" in step:
                    t += costs.invocation_us + total(by_name[step["call"]].get("program", []))
            return t

        return round(total(self.request), 6)


def _us(x: float) -> dict[str, Any]:
    return {"compute_ms": round(x / 1000, 6)}


def http_service(invocation_us: float = 0.0) -> HttpService:
    """An HTTP service answering from a RAM file system, shaped like the paper's (Sec. VI-B:
    23 components, 13 needing stacks from the stack manager, 7 needing cbufs).

    A request enters through the connection manager, which receives it through TCP, IP and the
    NIC driver (each passing a cbuf down), is parsed (with a URL cache), served from the RAM
    file system through the content manager (path lookup, then the file's cbuf), and answered
    through TCP/IP/NIC again. The 13 components on that path that run on the caller's stack are
    managed (one stack each at minimum); 7 of them take cbufs. The other 10 — scheduler, memory
    manager, virtual-address allocator, the stack and cbuf managers, booter, printer, logger,
    statistics, port namespace — have stacks of their own, as system services in COMPOSITE do,
    so they never contend; those with no program are not on the request path. Compute per
    component is a few tenths of a µs (Table III: an invocation costs about 0.25 µs on the
    paper's i7), 10.1 µs a request in all, Table IV's response time without contention. That
    measured time includes the request's invocations, so with `invocation_us` charged per call
    each component's compute shrinks in proportion until compute and the 32 calls together
    take the same 10.1 µs (with Table III's 0.25 µs: 2.1 µs of compute, 8 µs of calls).
    """

    def managed(name: str, program: list[dict[str, Any]], *, cbuf: bool) -> dict[str, Any]:
        c: dict[str, Any] = {"name": name, "stacks": 1}
        if cbuf:
            c["cbufs"] = 1
        c["program"] = program
        return c

    def passing(compute_us: float, callee: str, *after: dict[str, Any]) -> list[dict[str, Any]]:
        return [_us(compute_us), {"cbuf": "alloc"}, {"call": callee, "pass_cbuf": True}, {"cbuf": "free"}, *after]

    components = [
        managed("conn_mgr", [_us(0.3), {"call": "port_ns"}, *passing(0.2, "tcp")], cbuf=True),
        managed("tcp", passing(0.3, "ip", {"call": "timer"}), cbuf=True),
        managed("ip", passing(0.5, "nic"), cbuf=True),
        managed("nic", [_us(0.6), {"call": "evt_mgr"}], cbuf=False),
        managed("evt_mgr", [_us(0.3), {"call": "sched"}], cbuf=False),
        managed("http_parse", passing(0.9, "url_cache"), cbuf=True),
        managed("url_cache", [_us(0.3), {"call": "lock_svc"}], cbuf=False),
        managed("lock_svc", [_us(0.2), {"call": "sched"}], cbuf=False),
        managed("content_mgr", passing(0.3, "ramfs"), cbuf=True),
        managed(
            "ramfs",
            [_us(0.4), {"call": "fs_lookup"}, {"cbuf": "alloc"}, _us(0.3), {"call": "valloc"}, {"cbuf": "free"}],
            cbuf=True,
        ),
        managed("fs_lookup", [_us(0.4), {"call": "lock_svc"}], cbuf=False),
        managed("http_resp", passing(0.6, "tcp", {"call": "log"}), cbuf=True),
        managed("timer", [_us(0.2), {"call": "sched"}, {"call": "stats"}], cbuf=False),
        {"name": "sched", "program": [_us(0.2)]},
        {"name": "mm", "program": [_us(0.2)]},
        {"name": "valloc", "program": [_us(0.2), {"call": "mm"}]},
        {"name": "stack_mgr"},
        {"name": "cbuf_mgr"},
        {"name": "boot"},
        {"name": "print", "program": [_us(0.1)]},
        {"name": "log", "program": [_us(0.1), {"call": "print"}]},
        {"name": "stats", "program": [_us(0.1)]},
        {"name": "port_ns", "program": [_us(0.2)]},
    ]
    request = [{"call": "conn_mgr"}, {"call": "http_parse"}, {"call": "content_mgr"}, {"call": "http_resp"}]
    svc = HttpService(components, request)
    if not invocation_us:
        return svc
    compute_us = svc.request_compute_us()
    scale = (compute_us - svc.request_calls() * invocation_us) / compute_us
    if scale <= 0:
        raise ValueError(f"{svc.request_calls()} invocations of {invocation_us} µs take more than a request's {compute_us} µs")

    def scaled(program: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [_us(1000 * float(step["compute_ms"]) * scale) if "compute_ms" in step else step for step in program]

    return HttpService([c | {"program": scaled(c["program"])} if "program" in c else c for c in components], request)


def http_scenario(
    tmem: TmemConfig | None = None,
    *,
    threads: int = 8,
    static_units: int | None = None,
    min_interarrival_ms: float = 0.1,
    max_interarrival_ms: float = 0.3,
    horizon_ms: float = 2_000,
    seed: int = 1,
    costs: Costs = TABLE3_COSTS,
) -> dict[str, Any]:
    """The Table IV scenario: `threads` handler threads, each a sporadic stream of requests on
    its own port; `qos` (the first) has the highest priority and a deadline equal to the
    request's uncontended processing time, so its tardiness is its response time's excess over
    it (Sec. VI-B: "any positive variation from the average processing time"); the others are
    best effort (criticality D). `static_units` gives every managed stack and cbuf cache that
    many units as its minimum (the `static` row: all memory any request could need). With
    `costs` (default Table III's) each call and each first mapping of a passed cbuf take CPU
    time, and the components' compute shrinks so that a request without contention still takes
    the paper's 10.1 µs (see `http_service`); the deadline is that steady state (every cbuf
    mapped), so a remapping after a unit went through the pool shows as tardiness."""
    tmem = tmem or TmemConfig()
    svc = http_service(costs.invocation_us)
    components = [dict(c) for c in svc.components]
    if static_units is not None:
        for c in components:
            for key in ("stacks", "cbufs"):
                if key in c:
                    c[key] = static_units
    processing_ms = round(svc.request_compute_us(costs) / 1000, 6)
    tasks: list[dict[str, Any]] = []
    for i in range(threads):
        t: dict[str, Any] = {"name": "qos" if i == 0 else f"port{i}"}
        if i == 0:
            t["criticality"] = "B"
            t["deadline_ms"] = processing_ms
        else:
            t["criticality"] = "D"
        t |= {
            "priority": i,
            "arrival": "sporadic",
            "min_interarrival_ms": min_interarrival_ms,
            "max_interarrival_ms": max_interarrival_ms,
            "program": list(svc.request),
        }
        tasks.append(t)
    return _with_costs(
        {
            "machine": {"cpus": 1},
            "scheduler": {"kind": "fp"},
            "run": {"horizon_ms": float(horizon_ms), "seed": seed},
            "tmem": tmem.table(),
            "component": components,
            "task": tasks,
        },
        costs,
    )


# ---------------------------------------------------------------------------------------------
# TOML


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if not math.isfinite(v):
            raise ValueError(f"cannot write {v} in a scenario")
        return repr(v)
    if isinstance(v, str):
        return _toml_str(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{_toml_key(k)} = {_toml_value(x)}" for k, x in v.items()) + " }" if v else "{}"
    raise TypeError(f"cannot write {type(v).__name__} as a TOML value")


def _toml_str(s: str) -> str:
    # A basic string: quote, backslash and the control characters TOML forbids are escaped
    # (as \uXXXX, which TOML reads for any of them); everything else is written as is.
    out = ['"']
    for ch in s:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04X}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def _toml_key(k: str) -> str:
    if k and all(c.isascii() and (c.isalnum() or c in "_-") for c in k):
        return k
    return _toml_str(k)


def _toml_table(lines: list[str], header: str, table: dict[str, Any]) -> None:
    lines.append(header)
    for k, v in table.items():
        if isinstance(v, list) and v and all(isinstance(x, dict) for x in v):
            # A list of steps reads best one per line.
            lines.append(f"{_toml_key(k)} = [")
            lines += [f"  {_toml_value(x)}," for x in v]
            lines.append("]")
        else:
            lines.append(f"{_toml_key(k)} = {_toml_value(v)}")


def to_toml(scenario: dict[str, Any], *, header: Sequence[str] = ()) -> str:
    """`scenario` (top-level tables and arrays of tables; values of scalars, lists and inline
    tables) as TOML text that `tomllib` reads back to the same dict, the `header` lines first
    as comments. The same dict always gives the same text."""
    lines = [f"# {h}" if h else "#" for h in header]
    for key, section in scenario.items():
        if lines:
            lines.append("")
        if isinstance(section, dict):
            _toml_table(lines, f"[{_toml_key(key)}]", section)
        elif isinstance(section, list) and section and all(isinstance(t, dict) for t in section):
            for n, table in enumerate(section):
                if n:
                    lines.append("")
                _toml_table(lines, f"[[{_toml_key(key)}]]", table)
        else:
            raise TypeError(f"top-level key {key!r} must be a table or a non-empty array of tables")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------------
# Bundled examples

EXAMPLES: dict[str, tuple[str, ...]] = {
    "tmem-fig8": (
        "TMEM's Fig. 8 workload (closed system): 8 real-time threads through three lattices of components, tmem policy",
        "",
        'Generated by critmem.reproduce.tmem.workloads.example_toml("tmem-fig8"): task set seed 1, Σu = 0.8 in',
        "whole percent, periods exponential around 100 ms, rate-monotonic priorities. Each job enters sh9 or sh11",
        "and at each component spends 10 % of its budget, takes a cbuf and calls a child passing it (75 % toward",
        "the shared lattice sh0-sh8, 50/50 on its diagonal); the sink spends the rest. Every component starts",
        "with one stack and one cbuf; the tmem policy moves 20 more units between caches every 250 ms.",
    ),
    "tmem-open": (
        "TMEM's open system (Fig. 7): the Fig. 8 workload plus 8 best-effort threads from 20 s to 40 s, tmem policy",
        "",
        'Generated by critmem.reproduce.tmem.workloads.example_toml("tmem-open"): as tmem-fig8, with 8',
        "best-effort threads (criticality D, lowest priorities, 20 ms jobs every 20 ms) entering the best-effort",
        "lattice sh18-sh26, which leads into the shared one: they contend with the real-time threads for its",
        "stacks and cbufs.",
    ),
}
"""The bundled example scenarios this module writes (examples/NAME.toml): their header comments."""


def example_scenario(name: str) -> dict[str, Any]:
    """The scenario of bundled example `name` (seed 1, Σu = 0.8, tmem with 20 units above the
    minimum; no operation costs, the bundled examples' smallest form)."""
    if name not in EXAMPLES:
        raise KeyError(f"no TMEM example {name!r}; known: {', '.join(EXAMPLES)}")
    return fig8_scenario(1, tmem=TmemConfig("tmem", "inherit", 20), open_system=name == "tmem-open", costs=NO_COSTS)


def example_toml(name: str) -> str:
    """The text of bundled example `name`."""
    return to_toml(example_scenario(name), header=EXAMPLES[name])
