"""The experiment of the shared-page reproduction: what runs, and the numbers it yields.

Every number in `results.json` and in the report's "model" columns is computed here by
simulating the configured workloads; the "paper" columns are quotations of the paper's own
numbers, for comparison. The experiments:

(a) Fig. 8 — the smallest hard reservation (whole MB) with which tau1 and tau2, each alone,
    meet every deadline in steady state;
(b) Table III — per-task reservations and total physical memory for {tau1,tau1},
    {tau2,tau2} and {tau1,tau2} under No-SP-Mgmt, SPC and SPEL;
(c) Fig. 9 — tau1's response time per job beside tau2 (at its minimum reservation) under no
    shared-page management, the memory-cgroup first-touch rule, SPC and SPEL, and alone;
(d) Table II — wall-clock cost of the model's own allocate/free/map/unmap operations;
plus supplementary runs that explain where the model and the paper differ.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import pandas as pd

from critmem import _core
from critmem._core import ScenarioError
from critmem.api import RunResult, run
from critmem.progress import Progress, QuietProgress
from critmem.reproduce.results import num
from critmem.reproduce.shared_pages.paper import (
    PAPER_CPU_GHZ,
    PAPER_MIN_RESERVATION_MB,
    PAPER_TABLE2_CYCLES,
    PAPER_TABLE3,
    TABLE2_COLUMNS,
    TABLE2_ROWS,
)

MIB = 1_048_576

# ---------------------------------------------------------------------------------------------
# The workload

SHM_REGION = "shm"
"""The name of the shared region in the generated scenarios."""


@dataclass(frozen=True)
class Workload:
    """The experiment's parameters. The paper fixes the task parameters, the shared region
    and the disk; what it leaves open is chosen as documented in the report ("Workload")."""

    shm_mb: int = 10
    """The shared-memory region (shmget) both tasks map."""
    tau1_wcet_ms: float = 40.0
    tau1_period_ms: float = 100.0
    tau2_wcet_ms: float = 100.0
    tau2_period_ms: float = 500.0
    tau2_chunk_mb: int = 1
    """tau2 works on this much of the region per job, the next chunk in the next job."""
    tau2_passes: int = 4
    """How often tau2 goes over its chunk in one job (not stated in the paper)."""
    private_mb: float = 0.125
    """Each task's private code/data/stack footprint (not stated in the paper)."""
    swap: str = "hdd"
    readahead_pages: int = 8
    total_mb: int = 4096
    page_bytes: int = 4096
    seed: int = 1
    warmup_laps: int = 2
    """Jobs released in the first `warmup_laps` passes of the slowest task over the region
    are not judged (the start-up: zero-fill, then the first write-back of every page)."""
    measure_laps: int = 4
    """Judged steady state after the warm-up, in passes of the slowest task over the region."""
    sample_ms: float = 10.0
    """Memory timeline sampling interval."""

    def pages(self, mb: float) -> int:
        return round(mb * MIB / self.page_bytes)

    def period_ms(self, kind: str) -> float:
        return self.tau1_period_ms if kind == "tau1" else self.tau2_period_ms

    def lap_ms(self, kind: str) -> float:
        """Time `kind` takes to cover the whole shared region once."""
        if kind == "tau1":
            return self.tau1_period_ms
        return self.tau2_period_ms * math.ceil(self.shm_mb / self.tau2_chunk_mb)

    @property
    def lap_max_ms(self) -> float:
        """The slowest task's lap: every run of the experiment uses this time scale."""
        return max(self.lap_ms("tau1"), self.lap_ms("tau2"))

    @property
    def warmup_ms(self) -> float:
        """Jobs released before this are shown but not judged."""
        return self.warmup_laps * self.lap_max_ms

    @property
    def horizon_ms(self) -> float:
        return (self.warmup_laps + self.measure_laps) * self.lap_max_ms

    def footprint_mb(self, kind: str) -> float:
        """Pages one job references: the region (tau1) or a chunk (tau2), plus private."""
        shared = self.shm_mb if kind == "tau1" else self.tau2_chunk_mb
        return shared + self.private_mb


@dataclass(frozen=True)
class Member:
    """One task instance of a task set."""

    kind: str  # "tau1" | "tau2"
    name: str
    reservation_mb: int
    offset_ms: float = 0.0


def task_spec(w: Workload, m: Member) -> dict[str, Any]:
    """The scenario's [[task]] entry for `m`.

    tau1 sweeps the whole region once per job; tau2 sweeps its 1 MB chunk `tau2_passes`
    times, the next chunk in the next job. Private pages (code, stack, data) are referenced
    throughout the job, one private reference per shared reference (interleaved): a program
    touches its code and stack while it works through its data.
    """
    if m.kind == "tau1":
        shm: dict[str, Any] = {"pattern": "sweep", "region": SHM_REGION, "mb": w.shm_mb}
        shm_refs = w.pages(w.shm_mb)
        wcet, period, crit = w.tau1_wcet_ms, w.tau1_period_ms, "B"
    else:
        shm = {"pattern": "sweep", "region": SHM_REGION, "mb": w.tau2_chunk_mb, "passes": w.tau2_passes}
        shm_refs = w.pages(w.tau2_chunk_mb) * w.tau2_passes
        wcet, period, crit = w.tau2_wcet_ms, w.tau2_period_ms, "C"
    private_passes = max(1, shm_refs // max(1, w.pages(w.private_mb)))
    private = {"pattern": "sweep", "region": "private", "mb": w.private_mb, "passes": private_passes}
    return {
        "name": m.name,
        "criticality": crit,
        "wcet_ms": wcet,
        "period_ms": period,
        "offset_ms": m.offset_ms,
        "reservation": f"r_{m.name}",
        "private_mb": w.private_mb,
        "access_order": "interleave",
        "access": [shm, private],
    }


def scenario(
    w: Workload,
    members: Sequence[Member],
    policy: str,
    *,
    horizon_ms: float | None = None,
    swap: str | None = None,
    readahead_pages: int | None = None,
) -> dict[str, Any]:
    """A complete scenario: the members under RM on one CPU, each with its own hard
    reservation, sharing the region under `policy` (global, private, first-touch, spc, spel)."""
    return {
        "machine": {"cpus": 1},
        "scheduler": {"kind": "rm"},
        "run": {"horizon_ms": w.horizon_ms if horizon_ms is None else horizon_ms, "seed": w.seed},
        "memory": {
            "total_mb": w.total_mb,
            "page_bytes": w.page_bytes,
            "swap": swap or w.swap,
            "readahead_pages": readahead_pages or w.readahead_pages,
            "sample_ms": w.sample_ms,
        },
        "reservation": [{"name": f"r_{m.name}", "size_mb": m.reservation_mb, "kind": "hard"} for m in members],
        "region": [{"name": SHM_REGION, "size_mb": w.shm_mb, "kind": "shm", "policy": policy}],
        "task": [task_spec(w, m) for m in members],
    }


# ---------------------------------------------------------------------------------------------
# Reading results


def _whole_or_num(x: float) -> int | float | None:
    """`x` as an int when it is whole (so it reads like the formulas' other totals)."""
    return int(x) if float(x).is_integer() else num(x, 3)


def _task_jobs(r: RunResult, name: str) -> pd.DataFrame:
    return r.jobs[r.jobs["task"] == name]


def task_summary(r: RunResult, name: str, warmup_ms: float) -> dict[str, Any]:
    """Misses over the whole run and in steady state, worst steady response (None when a
    steady-state job never finished), and the task's memory counters."""
    jobs = _task_jobs(r, name)
    steady = jobs[jobs["release_ms"] >= warmup_ms]
    judged = steady[steady["outcome"] != "pending"]
    all_done = bool((judged["outcome"] == "completed").all()) and len(judged) > 0
    mem = next(t for t in (r.memory or {})["tasks"] if t["name"] == name)
    return {
        "jobs": len(jobs),
        "misses": int(jobs["missed"].sum()),
        "steady_jobs": len(judged),
        "steady_misses": int(steady["missed"].sum()),
        "steady_unfinished": int((judged["outcome"] != "completed").sum()),
        "worst_response_ms": num(judged["response_ms"].max(), 3) if all_done else None,
        "median_response_ms": num(judged["response_ms"].median(), 3) if all_done else None,
        "major_faults": int(mem["major_faults"]),
        "pages_swapped_in": int(mem["pages_swapped_in"]),
        "fault_wait_ms": num(mem["fault_wait_ms"], 3),
    }


def job_series(r: RunResult, name: str) -> dict[str, list[Any]]:
    """Per job: release, response (None if unfinished), missed — what the figures plot."""
    jobs = _task_jobs(r, name)
    return {
        "release_ms": [num(x, 3) for x in jobs["release_ms"]],
        "response_ms": [num(x, 3) for x in jobs["response_ms"]],
        "missed": [bool(x) for x in jobs["missed"]],
    }


def physical_memory(r: RunResult, warmup_ms: float) -> dict[str, float | None]:
    """The paper's "total physical memory usage" (frames set aside for reservations,
    including lent ones, minus SPEL savings and No-SP-Mgmt duplicates) over the steady
    state: its time average, smallest and largest sample."""
    tl = r.memory_timeline
    st = tl[tl["time_ms"] >= warmup_ms]["reserved_physical_mb"]
    return {"mean_mb": num(st.mean(), 3), "min_mb": num(st.min(), 3), "max_mb": num(st.max(), 3)}


def shared_use_per_job_mb(r: RunResult) -> dict[str, float | None]:
    """Per task, the distinct pages of the shared region it touched per ended job, averaged
    over those jobs (the paper's Avg(S)), in MB, as the simulator measured them; None for a
    task that ended no job."""
    memory = r.memory
    assert memory is not None, "the experiments declare [memory]"
    out: dict[str, float | None] = {}
    for t in memory["tasks"]:
        use = [u for u in t.get("shared_regions", []) if u["region"] == SHM_REGION and u["jobs_ended"] > 0]
        out[t["name"]] = float(use[0]["mean_job_pages"]) * memory["page_bytes"] / 2**20 if use else None
    return out


def misses_per_period(r: RunResult, name: str, warmup_ms: float, period_ms: float, horizon_ms: float) -> list[int]:
    """Deadline misses of `name`'s jobs released in each steady-state period of length
    `period_ms` (tau2's), so "a miss in every tau2 period" can be read off."""
    jobs = _task_jobs(r, name)
    n = int((horizon_ms - warmup_ms) // period_ms)
    counts = [0] * n
    for rel, missed in zip(jobs["release_ms"], jobs["missed"]):
        k = int((float(rel) - warmup_ms) // period_ms)
        if 0 <= k < n and bool(missed):
            counts[k] += 1
    return counts


# ---------------------------------------------------------------------------------------------
# The experiments


@dataclass
class _Ctx:
    w: Workload
    progress: Progress
    runs: int = 0

    def run(self, s: dict[str, Any], what: str) -> RunResult:
        self.progress.step(what)
        self.runs += 1
        return run(s)


def search_sizes(w: Workload, kind: str) -> list[int]:
    """Whole-MB sizes the search tries: 1 MB up to one more than the job's footprint, and for
    tau2 also the size that holds the whole region (the paper's Fig. 8(b) compares 11 MB)."""
    top = math.ceil(w.footprint_mb(kind)) + 1
    sizes = list(range(1, top + 1))
    if kind == "tau2":
        whole = math.ceil(w.shm_mb + w.private_mb)
        whole += 1 if whole <= w.shm_mb + w.private_mb else 0
        if whole not in sizes:
            sizes.append(whole)
    return sizes


def search_min_reservation(ctx: _Ctx, kind: str) -> dict[str, Any]:
    """(a) Runs `kind` alone under every size of `search_sizes`; the minimum is the smallest
    size from which on every steady-state job meets its deadline."""
    w = ctx.w
    warm = w.warmup_ms
    rows = []
    series: dict[str, dict[str, list[Any]]] = {}
    for size in search_sizes(w, kind):
        r = ctx.run(scenario(w, [Member(kind, kind, size)], "private"), f"(a) {kind} alone, {size} MB")
        row = {"size_mb": size, **task_summary(r, kind, warm)}
        row["schedulable"] = row["steady_misses"] == 0 and row["steady_unfinished"] == 0
        rows.append(row)
        series[str(size)] = job_series(r, kind)
    minimum = None
    for i, row in enumerate(rows):
        if all(x["schedulable"] for x in rows[i:]):
            minimum = int(row["size_mb"])
            break
    return {"kind": kind, "warmup_ms": warm, "horizon_ms": w.horizon_ms, "minimum_mb": minimum, "sizes": rows, "series": series}


def spel_admitted_size(ctx: _Ctx, kind: str, start_mb: int) -> int:
    """The smallest whole-MB reservation from `start_mb` up that SPEL's admission test
    accepts for `kind` (the reservation must exceed the locked region), found by loading."""
    w = ctx.w
    ctx.progress.step(f"(b) SPEL admission for {kind}")
    for size in range(start_mb, w.total_mb + 1):
        try:
            run(scenario(w, [Member(kind, kind, size)], "spel", horizon_ms=w.period_ms(kind)), record_jobs=False, record_segments=False)
        except ScenarioError as e:
            if "SPEL" in str(e):
                continue
            raise
        return size
    raise ScenarioError(f"no reservation up to {w.total_mb} MB passes SPEL admission for {kind}")


SETS: list[tuple[str, list[str]]] = [
    ("tau1+tau1", ["tau1", "tau1"]),
    ("tau2+tau2", ["tau2", "tau2"]),
    ("tau1+tau2", ["tau1", "tau2"]),
]
TECHNIQUES: list[tuple[str, str, str]] = [
    # key, region policy, the paper's name
    ("no-sp-mgmt", "private", "No-SP-Mgmt"),
    ("spc", "spc", "SPC"),
    ("spel", "spel", "SPEL"),
]


def members_of(kinds: Sequence[str], sizes: Sequence[int], offsets: Sequence[float] | None = None) -> list[Member]:
    """Task instances with distinct names: tau1, tau1b, ... ("a copy of the program image")."""
    out: list[Member] = []
    seen: dict[str, int] = {}
    for i, (k, s) in enumerate(zip(kinds, sizes)):
        n = seen.get(k, 0)
        seen[k] = n + 1
        name = k if n == 0 else f"{k}{chr(ord('a') + n)}"
        out.append(Member(k, name, s, 0.0 if offsets is None else offsets[i]))
    return out


def table3(ctx: _Ctx, minimum: dict[str, int], spel_size: dict[str, int]) -> dict[str, Any]:
    """(b) Each task set under each technique, every task at its minimum reservation (under
    SPEL: the smallest size SPEL admits). Total physical memory is the steady-state average."""
    w = ctx.w
    out: dict[str, Any] = {}
    warm = w.warmup_ms
    for set_key, kinds in SETS:
        out[set_key] = {}
        for tech, policy, label in TECHNIQUES:
            sizes = [spel_size[k] if tech == "spel" else minimum[k] for k in kinds]
            members = members_of(kinds, sizes)
            r = ctx.run(scenario(w, members, policy), f"(b) {set_key} under {label}")
            total = sum(sizes)
            n = len(members)
            phys = physical_memory(r, warm)
            shared_mb = shared_use_per_job_mb(r)
            measured = [v for v in shared_mb.values() if v is not None]
            # Every sharer must have a measurement, or the formula has no input.
            least = min(measured) if len(measured) == n else None
            paper_res, paper_total, paper_expr = PAPER_TABLE3.get(set_key, {}).get(tech, ([], None, ""))
            out[set_key][tech] = {
                "tasks": [m.name for m in members],
                "reservations_mb": sizes,
                "sum_mb": total,
                "total_mb": phys["mean_mb"],
                "total_min_mb": phys["min_mb"],
                "total_max_mb": phys["max_mb"],
                "formula": {
                    "no-sp-mgmt": "sum - (n-1)*min Avg(S) = "
                    + (f"{total} - {n - 1}*{least:g}" if least is not None else "? (a sharer ended no job)"),
                    "spc": "sum",
                    "spel": f"sum - (n-1)*S = {total} - {n - 1}*{w.shm_mb}",
                }[tech],
                "formula_mb": {
                    "no-sp-mgmt": None if least is None else _whole_or_num(total - (n - 1) * least),
                    "spc": total,
                    "spel": total - (n - 1) * w.shm_mb,
                }[tech],
                "shared_use_per_job_mb": shared_mb,
                "steady_misses": {m.name: task_summary(r, m.name, warm)["steady_misses"] for m in members},
                "paper_reservations_mb": paper_res,
                "paper_total_mb": paper_total,
                "paper_arithmetic": paper_expr,
            }
    return out


FIG9_POLICIES: list[tuple[str, str | None, str]] = [
    ("no-sp-mgmt", "private", "No-SP-Mgmt"),
    ("first-touch", "first-touch", "first-touch (memory cgroup)"),
    ("spc", "spc", "SPC"),
    ("spel", "spel", "SPEL"),
    ("alone", None, "tau1 alone"),
]


def fig9_run(
    ctx: _Ctx,
    policy: str | None,
    sizes: dict[str, int],
    what: str,
    *,
    tau1_offset_ms: float = 0.0,
    swap: str | None = None,
    readahead_pages: int | None = None,
    keep_series: bool = True,
) -> dict[str, Any]:
    """tau1 with tau2 (or alone) under `policy`; tau1's misses overall, in steady state, per
    steady-state tau2 period, and its memory counters."""
    w = ctx.w
    members = [Member("tau1", "tau1", sizes["tau1"], tau1_offset_ms)]
    if policy is not None:
        members.append(Member("tau2", "tau2", sizes["tau2"]))
    warm, horizon = w.warmup_ms, w.horizon_ms
    s = scenario(w, members, policy or "private", horizon_ms=horizon, swap=swap, readahead_pages=readahead_pages)
    r = ctx.run(s, what)
    per = misses_per_period(r, "tau1", warm, w.tau2_period_ms, horizon)
    out: dict[str, Any] = {
        "reservations_mb": {m.name: m.reservation_mb for m in members},
        "tau1": task_summary(r, "tau1", warm),
        "tau2": task_summary(r, "tau2", warm) if policy is not None else None,
        "tau1_misses_per_tau2_period": per,
        "tau2_periods_with_tau1_miss": sum(1 for c in per if c > 0),
        "tau2_periods": len(per),
        "warmup_ms": warm,
        "horizon_ms": horizon,
    }
    if keep_series:
        out["series"] = job_series(r, "tau1")
    return out


def fig9(ctx: _Ctx, minimum: dict[str, int], spel_size: dict[str, int]) -> dict[str, Any]:
    """(c) tau1 with tau2 at its minimum reservation (under SPEL: both at the size SPEL
    admits, as in the paper's Table III) under each policy, and tau1 alone."""
    out: dict[str, Any] = {}
    for key, policy, label in FIG9_POLICIES:
        sizes = dict(spel_size) if key == "spel" else dict(minimum)
        if key == "spel":
            sizes["tau1"] = max(sizes["tau1"], minimum["tau1"])
        out[key] = {"label": label, **fig9_run(ctx, policy, sizes, f"(c) tau1 with tau2 under {label}")}
    return out


def swap_in_cost(ctx: _Ctx, minimum: dict[str, int]) -> list[dict[str, Any]]:
    """Why tau1 misses several deadlines per tau2 period under No-SP-Mgmt: the same run with
    cheaper swap-ins (larger readahead windows on the disk, or an SSD)."""
    w = ctx.w
    variants = [(w.swap, w.readahead_pages), ("hdd", 16), ("hdd", 32), ("slow-ssd", w.readahead_pages)]
    rows = []
    for swap, ra in dict.fromkeys(variants):
        res = fig9_run(
            ctx, "private", minimum, f"(s1) No-SP-Mgmt, {swap}, readahead {ra}",
            swap=swap, readahead_pages=ra, keep_series=False,
        )  # fmt: skip
        per = res["tau1_misses_per_tau2_period"]
        t1 = res["tau1"]
        periods = max(1, int(w.horizon_ms // w.tau2_period_ms))
        rows.append(
            {
                "swap": swap,
                "readahead_pages": ra,
                "tau1_steady_misses": t1["steady_misses"],
                "misses_per_tau2_period_min": min(per, default=0),
                "misses_per_tau2_period_max": max(per, default=0),
                "tau1_worst_response_ms": t1["worst_response_ms"],
                "tau1_swap_in_requests_per_tau2_period": num(t1["major_faults"] / periods, 1),
                "tau1_pages_swapped_in_per_tau2_period": num(t1["pages_swapped_in"] / periods, 1),
                "tau1_fault_wait_ms_per_tau2_period": num(float(t1["fault_wait_ms"] or 0) / periods, 1),
            }
        )
    return rows


def who_touches_first(ctx: _Ctx, minimum: dict[str, int]) -> list[dict[str, Any]]:
    """First-touch against No-SP-Mgmt when tau1 touches the region first (both released at
    0, tau1 has the higher priority) and when tau2 initialises it (tau1 starts one tau2 lap
    later, after tau2 has touched every chunk)."""
    w = ctx.w
    rows = []
    for first, offset in [("tau1", 0.0), ("tau2", w.lap_ms("tau2"))]:
        for key, policy in [("first-touch", "first-touch"), ("no-sp-mgmt", "private")]:
            res = fig9_run(
                ctx, policy, minimum, f"(s2) {key}, {first} touches first",
                tau1_offset_ms=offset, keep_series=False,
            )  # fmt: skip
            t1 = res["tau1"]
            rows.append(
                {
                    "policy": key,
                    "first_toucher": first,
                    "tau1_offset_ms": offset,
                    "tau1_misses_total": t1["misses"],
                    "tau1_misses_during_warmup": t1["misses"] - t1["steady_misses"],
                    "tau1_steady_misses": t1["steady_misses"],
                    "tau1_steady_jobs": t1["steady_jobs"],
                    "tau1_major_faults": t1["major_faults"],
                }
            )
    return rows


def tau2_pair_study(ctx: _Ctx) -> list[dict[str, Any]]:
    """{tau2,tau2} under No-SP-Mgmt: total physical memory and misses against the private
    footprint and the phase between the two copies (in phase: both started together)."""
    rows = []
    for private in dict.fromkeys([ctx.w.private_mb, 0.5, 1.0]):
        w = replace(ctx.w, private_mb=private)
        sub = _Ctx(w, ctx.progress)
        minimum = search_min_reservation(sub, "tau2")["minimum_mb"]
        ctx.runs += sub.runs
        if minimum is None:
            continue
        for phase_label, offset in [("in phase", 0.0), ("one period apart", w.tau2_period_ms)]:
            members = members_of(["tau2", "tau2"], [minimum, minimum], [0.0, offset])
            warm = w.warmup_ms
            r = ctx.run(scenario(w, members, "private"), f"(s3) tau2+tau2, private {private} MB, {phase_label}")
            phys = physical_memory(r, warm)
            rows.append(
                {
                    "private_mb": private,
                    "tau2_minimum_mb": minimum,
                    "phase": phase_label,
                    "total_mb": phys["mean_mb"],
                    "total_min_mb": phys["min_mb"],
                    "total_max_mb": phys["max_mb"],
                    "duplicate_mb": num(2 * minimum - float(phys["mean_mb"] or 0), 3),
                    "steady_misses": {m.name: task_summary(r, m.name, warm)["steady_misses"] for m in members},
                    "first_miss_release_ms": {m.name: first_miss(r, m.name) for m in members},
                }
            )
    return rows


def first_miss(r: RunResult, name: str) -> float | None:
    """Release time of `name`'s first job that missed its deadline (None: no miss)."""
    jobs = _task_jobs(r, name)
    missed = jobs[jobs["missed"]]
    return None if missed.empty else num(missed["release_ms"].iloc[0], 3)


def table2(iterations: int) -> dict[str, Any]:
    """(d) Wall-clock ns per operation of the model's data structures, beside the paper's
    cycles (also converted to ns at the paper's 2.6 GHz)."""
    ns = _core.measure_memory_ops(iterations)
    rows: dict[str, Any] = {}
    for op in TABLE2_ROWS:
        rows[op] = {
            col: {
                "model_ns": round(ns[f"{op}/{col}"], 1),
                "paper_cycles": PAPER_TABLE2_CYCLES[op][col],
                "paper_ns": round(PAPER_TABLE2_CYCLES[op][col] / PAPER_CPU_GHZ, 1),
            }
            for col in TABLE2_COLUMNS
        }
    return {"iterations": iterations, "pages_per_iteration": 4096, "rows": rows}


# ---------------------------------------------------------------------------------------------
# Putting it together


@dataclass
class Results:
    """Everything the reproduction computed (deterministic: `results.json`)."""

    workload: Workload
    quick: bool
    search: dict[str, Any]
    minimum: dict[str, int | None]
    spel_size: dict[str, int]
    table3: dict[str, Any]
    fig9: dict[str, Any]
    swap_in_cost: list[dict[str, Any]]
    first_touch: list[dict[str, Any]]
    tau2_pair: list[dict[str, Any]]
    runs: int = 0
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "paper": "shared-page-memory-reservations.txt",
            "quick": self.quick,
            "workload": asdict(self.workload),
            "min_reservation_mb": self.minimum,
            "paper_min_reservation_mb": PAPER_MIN_RESERVATION_MB,
            "spel_admitted_mb": self.spel_size,
            "search": self.search,
            "table3": self.table3,
            "fig9": self.fig9,
            "tau1_misses": {k: v["tau1"]["misses"] for k, v in self.fig9.items()},
            "supplementary": {
                "swap_in_cost": self.swap_in_cost,
                "first_touch": self.first_touch,
                "tau2_pair": self.tau2_pair,
            },
            "simulation_runs": self.runs,
        }


def planned_steps(w: Workload) -> int:
    """Simulation runs `compute` makes (for the progress bar)."""
    search = len(search_sizes(w, "tau1")) + len(search_sizes(w, "tau2"))
    pair = 3 * (len(search_sizes(w, "tau2")) + 2)
    return search + 2 + len(SETS) * len(TECHNIQUES) + len(FIG9_POLICIES) + 4 + 4 + pair


def compute(w: Workload, *, quick: bool = False, progress: Progress | None = None) -> Results:
    """Runs (a)-(c) and the supplementary studies for `w` (all simulation, deterministic)."""
    ctx = _Ctx(w, progress or QuietProgress())
    search = {k: search_min_reservation(ctx, k) for k in ("tau1", "tau2")}
    found = {k: search[k]["minimum_mb"] for k in ("tau1", "tau2")}
    missing = [k for k, v in found.items() if v is None]
    if missing:
        raise ScenarioError(f"no reservation size makes {', '.join(missing)} schedulable alone; check the workload")
    minimum = {k: int(v) for k, v in found.items() if v is not None}
    spel_size = {k: spel_admitted_size(ctx, k, minimum[k]) for k in ("tau1", "tau2")}
    t3 = table3(ctx, minimum, spel_size)
    f9 = fig9(ctx, minimum, spel_size)
    s1 = swap_in_cost(ctx, minimum)
    s2 = who_touches_first(ctx, minimum)
    s3 = tau2_pair_study(ctx)
    return Results(w, quick, search, dict(found), spel_size, t3, f9, s1, s2, s3, runs=ctx.runs)


def quick_workload() -> Workload:
    """The reduced version for tests: one lap of steady state instead of four."""
    return Workload(measure_laps=1)


def headline(data: dict[str, Any], t2: dict[str, Any]) -> dict[str, Any]:
    """What `--json` prints: the reproduction's headline numbers, each beside the paper's."""
    table3 = {
        set_key: {
            tech: {
                "reservations_mb": cell["reservations_mb"],
                "total_mb": cell["total_mb"],
                "total_range_mb": [cell["total_min_mb"], cell["total_max_mb"]],
                "formula_mb": cell["formula_mb"],
                "paper_reservations_mb": cell["paper_reservations_mb"],
                "paper_total_mb": cell["paper_total_mb"],
            }
            for tech, cell in techs.items()
        }
        for set_key, techs in data["table3"].items()
    }
    fig9 = data["fig9"]
    return {
        "table3": table3,
        "min_reservation_mb": data["min_reservation_mb"],
        "paper_min_reservation_mb": data["paper_min_reservation_mb"],
        "tau1_misses": data["tau1_misses"],
        "tau1_steady_misses": {k: v["tau1"]["steady_misses"] for k, v in fig9.items()},
        "tau2_periods_with_tau1_miss": {k: [v["tau2_periods_with_tau1_miss"], v["tau2_periods"]] for k, v in fig9.items()},
        "table2_ns": {op: {col: c["model_ns"] for col, c in cols.items()} for op, cols in t2["rows"].items()},
        "quick": data["quick"],
        "simulation_runs": data["simulation_runs"],
    }
