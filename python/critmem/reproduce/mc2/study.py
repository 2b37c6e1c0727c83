"""The schedulability study of the MC² paper (Sec. 6): what runs, and the numbers it yields.

A *scenario* is one choice from each of Table 3's seven categories (648 in all). Its work item
(`CurveItem`) computes the scenario's whole schedulability curve: at system utilisations on a
grid (`Plan.step` apart, from `step`), task systems are drawn in batches from the Rust core
(`critmem._core.mc2_schedulable`: generation, inflation, the optimisation framework and the
tests, all nine schemes on the same systems) until the 95 % Wilson interval of every scheme's
schedulable fraction is at most `Plan.half_width` wide on each side (Sec. 6.1's "within ±0.05
with 95% confidence"), or `Plan.max_systems` were drawn. The grid stops after the first point
where no scheme schedules any system; the curve is 0 beyond it.

Each scenario's seed is derived from the study's seed and the scenario (`critmem.sweep.item_seed`)
and each task system from (that seed, its index), so the numbers do not depend on how the
scenarios are split across workers, nor on the batch size.

The *schedulable-utilisation area* (SUA) of a scheme is the sum over scenarios of the area under
its curve: trapezoids over the grid, starting from the value 1 at utilisation 0 and taking the
curve as 0 beyond its last point.
"""

from __future__ import annotations

import hashlib
import itertools
import math
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from critmem.reproduce.mc2.paper import (
    PAPER_FIG8_SIZES_BYTES,
    PAPER_FIG14_LEVEL_C_PCT,
    PAPER_FIG15_CIRCLED,
    PAPER_FIG15_SCENARIOS,
    PAPER_OBS1_PCT_OF_SBP,
    PAPER_OBS10_RATIOS,
    PAPER_SUA_RATIOS,
    PAPER_SUBSET_RATIOS,
)
from critmem.sweep import item_seed

if TYPE_CHECKING:
    import pandas as pd

    from critmem.sweep import Sweep

Scenario = tuple[str, ...]
"""One choice name per category, in `categories()`'s order."""

Z_95 = 1.959963984540054
"""The standard normal's 97.5 % quantile: two-sided 95 % intervals."""

CATEGORY_KEYS = ("criticality", "period", "task_utilization", "reload", "ipc_size", "io_bandwidth", "direct_io")
"""Table 3's categories in order, as `critmem._core.MC2_CATEGORIES` names them (and the columns of
points.csv)."""

QUICK_SCENARIOS = 12
"""`--quick`: Fig. 15's three scenarios and nine more."""

IPC_STRATEGIES = ("SBP", "CE", "CL")
"""Sec. 4.2's IPC buffer strategies: bypass the cache (SBP), same-core exclusive (CE), locked in
the LLC (CL)."""
FIG14_BANDWIDTHS_MB_S = (10.0, 50.0, 190.0)
"""The bandwidths of the Fig. 14 analogue: the middle of Table 3's Low, Medium and High ranges."""
FIG14_WAYS = (2, 8)
"""LLC ways of the measured task in the Fig. 14 analogue (of 16): a small and a large region, as
in Fig. 13's two insets."""


def schemes() -> list[str]:
    """The nine schemes in the core's order (Sec. 6.1)."""
    from critmem import _core

    return list(_core.MC2_SCHEMES)


def categories() -> list[tuple[str, list[str]]]:
    """Table 3's seven categories and their choices, as the core defines them."""
    from critmem import _core

    return [(str(name), [str(c) for c in choices]) for name, choices in _core.MC2_CATEGORIES]


def all_scenarios() -> list[Scenario]:
    """Every scenario (648), in the order of the categories' choices."""
    return [tuple(s) for s in itertools.product(*(choices for _, choices in categories()))]


def notation(scenario: Sequence[str]) -> str:
    """The paper's tuple notation: `(C-Light, Long, Light, Quick, Small, High, Many)`."""
    return "(" + ", ".join(scenario) + ")"


def select_scenarios(filters: Sequence[str]) -> list[Scenario]:
    """The scenarios matching every filter `category=choice` (several filters on one category
    match any of their choices), in `all_scenarios()`'s order; ValueError naming what is wrong."""
    cats = dict(categories())
    wanted: dict[str, set[str]] = {}
    for f in filters:
        for part in (p.strip() for p in f.split(",")):
            if not part:
                continue
            name, sep, choice = part.partition("=")
            name, choice = name.strip(), choice.strip()
            if not sep or not name or not choice:
                raise ValueError(f"scenario filter {part!r} is not CATEGORY=CHOICE (e.g. ipc_size=Large)")
            if name not in cats:
                raise ValueError(f"scenario filter {part!r}: unknown category {name!r}; known: {', '.join(cats)}")
            if choice not in cats[name]:
                raise ValueError(f"scenario filter {part!r}: {name} has no choice {choice!r}; its choices: {', '.join(cats[name])}")
            wanted.setdefault(name, set()).add(choice)
    index = {name: i for i, name in enumerate(cats)}
    return [s for s in all_scenarios() if all(s[index[name]] in chosen for name, chosen in wanted.items())]


def quick_scenarios() -> list[Scenario]:
    """`--quick`'s dozen: Fig. 15's three, then scenarios that bring a choice not yet covered,
    then any, each time the next in a fixed order (by a hash of its notation), until every
    choice of every category appears at least once."""
    fig15 = [tuple(s) for s in PAPER_FIG15_SCENARIOS.values()]
    rest = sorted((s for s in all_scenarios() if s not in fig15), key=lambda s: hashlib.sha256(notation(s).encode()).hexdigest())
    chosen = list(fig15)
    covered = {(i, c) for s in chosen for i, c in enumerate(s)}
    while len(chosen) < QUICK_SCENARIOS and rest:
        pick = next((s for s in rest if any((i, c) not in covered for i, c in enumerate(s))), rest[0])
        rest.remove(pick)
        chosen.append(pick)
        covered |= {(i, c) for i, c in enumerate(pick)}
    order = {s: i for i, s in enumerate(all_scenarios())}
    return sorted(chosen, key=lambda s: order[s])


# ---------------------------------------------------------------------------------------------
# The plan


@dataclass(frozen=True)
class Plan:
    """How much to run: the full study, `--quick`'s, or any subset with its own grid."""

    seed: int = 1
    """The study's seed; each scenario's is derived from it and the scenario."""
    step: float = 0.25
    """The system-utilisation grid: step, 2·step, … (the paper's plots: steps of about 0.25)."""
    half_width: float = 0.05
    """Sec. 6.1: each point's fraction within ±0.05 with 95 % confidence, for every scheme."""
    batch: int = 16
    """Task systems drawn per call into the core (results do not depend on it)."""
    max_systems: int = 400
    """At most this many task systems per point (a fraction near 0.5 needs about 380)."""
    max_utilization: float = 8.0
    """The grid ends here at the latest (twice the platform's four cores)."""
    scenarios: tuple[Scenario, ...] | None = None
    """The scenarios to run (None: all 648)."""
    quick: bool = False

    def scenario_list(self) -> list[Scenario]:
        return list(self.scenarios) if self.scenarios is not None else all_scenarios()

    def validate(self) -> None:
        """ValueError naming the first parameter that cannot work."""
        if not (math.isfinite(self.step) and self.step > 0):
            raise ValueError(f"step must be a positive number (got {self.step})")
        if not (math.isfinite(self.max_utilization) and self.max_utilization >= self.step):
            raise ValueError(f"step must be at most the grid's end, utilisation {self.max_utilization:g} (got {self.step:g})")
        if not 0 < self.half_width < 0.5:
            raise ValueError(f"half width must be between 0 and 0.5 (got {self.half_width})")
        if self.batch < 1 or self.max_systems < 1:
            raise ValueError(f"batch and max systems must be at least 1 (got {self.batch} and {self.max_systems})")
        if not 0 <= self.seed < 2**64:
            raise ValueError(f"seed must be between 0 and 2**64 - 1 (got {self.seed})")
        if self.scenarios is not None and not self.scenarios:
            raise ValueError("no scenario to run")


def quick_plan(seed: int = 1) -> Plan:
    """`--quick`: a dozen scenarios (Fig. 15's among them), the full grid and precision."""
    return Plan(seed=seed, scenarios=tuple(quick_scenarios()), quick=True)


# ---------------------------------------------------------------------------------------------
# One scenario's curve (the work item)


@dataclass(frozen=True)
class CurveItem:
    """One scenario's whole curve, and how precisely to compute it."""

    scenario: Scenario
    seed: int
    """The study's seed (the scenario's own is `scenario_seed(seed, scenario)`)."""
    step: float
    half_width: float
    batch: int
    max_systems: int
    max_utilization: float


def scenario_seed(seed: int, scenario: Sequence[str]) -> int:
    """The seed of a scenario's task systems: from the study's seed and the scenario alone."""
    return item_seed(("mc2", seed, tuple(scenario)))


def utilization_grid(step: float, max_utilization: float) -> list[float]:
    """step, 2·step, … up to `max_utilization` (rounded, so 0.1·3 is 0.3)."""
    n = math.floor(max_utilization / step + 1e-9)
    return [round(k * step, 9) for k in range(1, n + 1)]


def wilson(k: int, n: int, z: float = Z_95) -> tuple[float, float]:
    """The Wilson score interval of k successes in n trials ((0, 1) for n = 0)."""
    if n <= 0:
        return 0.0, 1.0
    p = k / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def precise_enough(counts: Sequence[int], n: int, half_width: float) -> bool:
    """Whether every scheme's interval is at most `half_width` on each side of its centre."""
    for k in counts:
        lo, hi = wilson(k, n)
        if (hi - lo) / 2 > half_width:
            return False
    return True


def curve(item: CurveItem) -> dict[str, Any]:
    """Computes `item`'s curve: per grid point the task systems drawn and how many each scheme
    schedules; `cpu_s` is the CPU time it took (a measurement, kept out of the deterministic
    outputs)."""
    from critmem import _core

    names = list(_core.MC2_SCHEMES)
    seed = scenario_seed(item.seed, item.scenario)
    started = time.thread_time()
    points: list[dict[str, Any]] = []
    truncated = True
    for u in utilization_grid(item.step, item.max_utilization):
        n = 0
        counts = [0] * len(names)
        while n < item.max_systems:
            count = min(item.batch, item.max_systems - n)
            got = _core.mc2_schedulable(list(item.scenario), u, seed, n, count)
            counts = [a + int(b) for a, b in zip(counts, got, strict=True)]
            n += count
            if precise_enough(counts, n, item.half_width):
                break
        points.append({"utilization": u, "systems": n, "schedulable": dict(zip(names, counts, strict=True))})
        if not any(counts):
            truncated = False
            break
    return {
        "scenario": list(item.scenario),
        "seed": seed,
        "points": points,
        "truncated": truncated,
        "cpu_s": time.thread_time() - started,
    }


def curve_items(plan: Plan) -> list[CurveItem]:
    return [
        CurveItem(s, plan.seed, plan.step, plan.half_width, plan.batch, plan.max_systems, plan.max_utilization)
        for s in plan.scenario_list()
    ]


def _label(item: CurveItem) -> str:
    return notation(item.scenario)


# ---------------------------------------------------------------------------------------------
# Areas and ratios (pure functions of the curves)


def area(points: Sequence[Mapping[str, Any]], scheme: str) -> float:
    """The area under one scheme's curve: trapezoids from (0, 1) through the grid's points; 0
    beyond the last point."""
    x0, y0 = 0.0, 1.0
    total = 0.0
    for p in points:
        x1 = float(p["utilization"])
        y1 = p["schedulable"][scheme] / p["systems"]
        total += (y0 + y1) / 2 * (x1 - x0)
        x0, y0 = x1, y1
    return total


def matches(scenario: Sequence[str], where: str | None) -> bool:
    """Whether `scenario` has the choice `where` names (`category=choice`; None: any)."""
    if where is None:
        return True
    name, _, choice = where.partition("=")
    return scenario[CATEGORY_KEYS.index(name)] == choice


def sua(curves: Sequence[Mapping[str, Any]], scheme_names: Sequence[str], where: str | None = None) -> dict[str, float]:
    """Each scheme's SUA over the curves whose scenario matches `where`."""
    mine = [c for c in curves if matches(c["scenario"], where)]
    return {s: sum(area(c["points"], s) for c in mine) for s in scheme_names}


def _ratio(a: float, b: float) -> float | None:
    return a / b if b > 0 else None


def paper_ratios() -> dict[str, float]:
    """Every ratio the paper states, by key (`"C|C/R|R"`; a subset's key names it)."""
    return {**PAPER_SUA_RATIOS, **PAPER_OBS10_RATIOS, **{k: v[3] for k, v in PAPER_SUBSET_RATIOS.items()}}


def ratios(curves: Sequence[Mapping[str, Any]], scheme_names: Sequence[str]) -> dict[str, float | None]:
    """Ours for every key of `paper_ratios()` (None where the denominator's SUA is 0 or no
    scenario of a subset ran)."""
    total = sua(curves, scheme_names)
    out: dict[str, float | None] = {}
    for key in (*PAPER_SUA_RATIOS, *PAPER_OBS10_RATIOS):
        num, den = split_ratio(key, scheme_names)
        out[key] = _ratio(total[num], total[den])
    for key, (num, den, where, _) in PAPER_SUBSET_RATIOS.items():
        sub = sua(curves, scheme_names, where)
        out[key] = _ratio(sub[num], sub[den])
    return out


def split_ratio(key: str, scheme_names: Sequence[str]) -> tuple[str, str]:
    """`"O|C+A/B-ALL/C|C"` → ("O|C+A/B-ALL", "C|C"): the "/" whose both sides are schemes (their
    names hold "/" too)."""
    parts = key.split("/")
    for cut in range(1, len(parts)):
        num, den = "/".join(parts[:cut]), "/".join(parts[cut:])
        if num in scheme_names and den in scheme_names:
            return num, den
    raise ValueError(f"{key!r} is not a ratio of two schemes")


BREAKDOWN_RATIOS = ("C|C/R|R", "O|C/C|C", "C|C+A/B-ALL/C|C", "O|C+A/B-ALL/R|R")
"""The ratios shown per category choice in the report."""


def breakdown(curves: Sequence[Mapping[str, Any]], scheme_names: Sequence[str]) -> list[dict[str, Any]]:
    """Per category choice: how many scenarios ran with it and the main ratios over them."""
    rows = []
    for name, choices in categories():
        for choice in choices:
            where = f"{name}={choice}"
            n = sum(1 for c in curves if matches(c["scenario"], where))
            sub = sua(curves, scheme_names, where)
            rows.append(
                {
                    "category": name,
                    "choice": choice,
                    "scenarios": n,
                    "ratios": {k: _ratio(*(sub[s] for s in split_ratio(k, scheme_names))) for k in BREAKDOWN_RATIOS},
                }
            )
    return rows


def interpolate(points: Sequence[Mapping[str, Any]], scheme: str, u: float) -> float:
    """A scheme's curve at utilisation `u`, linear between grid points (1 at 0, 0 beyond)."""
    x0, y0 = 0.0, 1.0
    for p in points:
        x1, y1 = float(p["utilization"]), float(p["schedulable"][scheme] / p["systems"])
        if u <= x1:
            return y0 + (y1 - y0) * (u - x0) / (x1 - x0) if x1 > x0 else y1
        x0, y0 = x1, y1
    return 0.0


# ---------------------------------------------------------------------------------------------
# Tables


def point_rows(curves: Sequence[Mapping[str, Any]], scheme_names: Sequence[str]) -> list[dict[str, Any]]:
    """points.csv: one row per scenario × utilisation × scheme."""
    rows = []
    for c in curves:
        cats = dict(zip(CATEGORY_KEYS, c["scenario"], strict=True))
        for p in c["points"]:
            n = p["systems"]
            for s in scheme_names:
                k = p["schedulable"][s]
                lo, hi = wilson(k, n)
                rows.append(
                    cats
                    | {
                        "utilization": p["utilization"],
                        "scheme": s,
                        "systems": n,
                        "schedulable": k,
                        "fraction": round(k / n, 6),
                        "ci_low": round(lo, 6),
                        "ci_high": round(hi, 6),
                    }
                )
    return rows


def points_frame(curves: Sequence[Mapping[str, Any]], scheme_names: Sequence[str]) -> pd.DataFrame:
    import pandas as pd

    columns = [*CATEGORY_KEYS, "utilization", "scheme", "systems", "schedulable", "fraction", "ci_low", "ci_high"]
    return pd.DataFrame(point_rows(curves, scheme_names), columns=columns)


def sua_rows(data: Mapping[str, Any]) -> list[dict[str, Any]]:
    """sua.csv: per scheme its SUA, its mean per scenario, and over the Large-IPC and
    High-bandwidth scenarios (Obs. 8 and 9)."""
    n = data["scenarios"]
    return [
        {
            "scheme": s,
            "sua": round(v, 6),
            "sua_per_scenario": round(v / n, 6) if n else None,
            "sua_large_ipc": round(data["sua_subsets"]["ipc_size=Large"][s], 6),
            "sua_high_bandwidth": round(data["sua_subsets"]["io_bandwidth=High"][s], 6),
        }
        for s, v in data["sua"].items()
    ]


# ---------------------------------------------------------------------------------------------
# The model's micro-benchmark analogues (Figs. 8 and 14) and parameters


def ipc_costs(sizes: Iterable[int] = PAPER_FIG8_SIZES_BYTES) -> list[dict[str, Any]]:
    """Fig. 8's shape: the model's worst-case send and receive cost of each strategy per message
    size, and CL's and CE's as percentages of SBP's."""
    from critmem import _core

    rows = []
    for size in sizes:
        row: dict[str, Any] = {"size_bytes": size}
        for strategy in IPC_STRATEGIES:
            send, receive = _core.mc2_ipc_cost_us(strategy, size)
            row[f"{strategy}_send_us"] = round(float(send), 6)
            row[f"{strategy}_receive_us"] = round(float(receive), 6)
        for strategy in ("CL", "CE"):
            for op in ("send", "receive"):
                base = row[f"SBP_{op}_us"]
                row[f"{strategy}_{op}_pct_of_SBP"] = round(100 * row[f"{strategy}_{op}_us"] / base, 3) if base > 0 else None
        rows.append(row)
    return rows


def ipc_ranges(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Obs. 1's ranges from the model's rows beside the paper's."""
    out = []
    for strategy, ops in PAPER_OBS1_PCT_OF_SBP.items():
        for op, (plo, phi) in ops.items():
            vals = [r[f"{strategy}_{op}_pct_of_SBP"] for r in rows if r[f"{strategy}_{op}_pct_of_SBP"] is not None]
            out.append(
                {
                    "strategy": strategy,
                    "operation": op,
                    "low_pct": min(vals) if vals else None,
                    "high_pct": max(vals) if vals else None,
                    "paper_low_pct": plo,
                    "paper_high_pct": phi,
                }
            )
    return out


def dma_inflation(
    shares: Iterable[int] = PAPER_FIG14_LEVEL_C_PCT,
    bandwidths: Iterable[float] = FIG14_BANDWIDTHS_MB_S,
    ways: Iterable[int] = FIG14_WAYS,
) -> list[dict[str, Any]]:
    """Fig. 14's shape: a non-I/O level-A task's worst-case cost relative to an idle system, per
    share of I/O buffers in level-C banks, bandwidth and LLC ways."""
    from critmem import _core

    shares = list(shares)
    bandwidths = list(bandwidths)
    return [
        {"ways": w, "bandwidth_mb_s": bw, "level_c_pct": pct, "inflation": round(float(_core.mc2_dma_inflation(float(pct), bw, w)), 6)}
        for w in ways
        for bw in bandwidths
        for pct in shares
    ]


def parameters() -> list[dict[str, str]]:
    """The model's parameters with their sources, as the core states them."""
    from critmem import _core

    return [{k: str(p[k]) for k in ("name", "value", "unit", "source")} for p in _core.mc2_model_parameters()]


# ---------------------------------------------------------------------------------------------
# The study


def planned_runs(plan: Plan) -> int:
    return len(plan.scenario_list())


def compute(plan: Plan, sweep: Sweep) -> tuple[dict[str, Any], float]:
    """Every scenario's curve on `sweep`, and what they yield (results.json); beside it the CPU
    time the curves took, summed over the scenarios (a measurement, so apart from the data)."""
    plan.validate()
    items = curve_items(plan)
    # Longest first, so that the last to finish are short and the workers stay evenly busy: a
    # system's cost grows with its task count, which lighter per-task utilisations raise.
    light_first = {choice: i for i, choice in enumerate(dict(categories())["task_utilization"])}
    order = sorted(range(len(items)), key=lambda i: light_first[items[i].scenario[CATEGORY_KEYS.index("task_utilization")]])
    done = sweep.map(curve, [items[i] for i in order], label=_label)
    curves: list[dict[str, Any]] = [{} for _ in items]
    for position, i in enumerate(order):
        curves[i] = done[position]
    cpu_s = sum(float(c.get("cpu_s", 0.0)) for c in curves)
    return summarize(plan, curves), cpu_s


def summarize(plan: Plan, curves: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """results.json: the plan, every curve, the SUAs, the ratios beside the paper's, the
    breakdown per choice, Fig. 15's scenarios and the micro-benchmark analogues."""
    names = schemes()
    curves = [{k: v for k, v in c.items() if k != "cpu_s"} for c in curves]
    ipc = ipc_costs()
    fig15 = {}
    for inset, scenario in PAPER_FIG15_SCENARIOS.items():
        found = next((c for c in curves if tuple(c["scenario"]) == scenario), None)
        fig15[inset] = {"scenario": list(scenario), "computed": found is not None}
    inset, scheme, u, paper_fraction = PAPER_FIG15_CIRCLED
    circled = next((c for c in curves if tuple(c["scenario"]) == PAPER_FIG15_SCENARIOS[inset]), None)
    return {
        "paper": "mc2-io-ipc-isolation.txt",
        "quick": plan.quick,
        "plan": {k: v for k, v in asdict(plan).items() if k != "scenarios"},
        "schemes": names,
        "categories": [{"name": n, "choices": cs} for n, cs in categories()],
        "scenarios": len(curves),
        "systems": sum(p["systems"] for c in curves for p in c["points"]),
        "points": sum(len(c["points"]) for c in curves),
        "truncated": [c["scenario"] for c in curves if c["truncated"]],
        "sua": sua(curves, names),
        "sua_subsets": {where: sua(curves, names, where) for _, _, where, _ in PAPER_SUBSET_RATIOS.values()},
        "paper_ratios": paper_ratios(),
        "ratios": ratios(curves, names),
        "breakdown": breakdown(curves, names),
        "fig15": fig15,
        "fig15_circled": {
            "inset": inset,
            "scheme": scheme,
            "utilization": u,
            "paper_fraction": paper_fraction,
            "fraction": None if circled is None else round(interpolate(circled["points"], scheme, u), 4),
        },
        "parameters": parameters(),
        "ipc": ipc,
        "ipc_ranges": ipc_ranges(ipc),
        "dma": dma_inflation(),
        "curves": curves,
    }


def headline(data: Mapping[str, Any]) -> dict[str, Any]:
    """What `--json` prints: the scenario count, the SUAs, the paper's ratios and ours first."""
    return {
        "scenarios": data["scenarios"],
        "sua": {s: round(v, 6) for s, v in data["sua"].items()},
        "paper_ratios": dict(data["paper_ratios"]),
        "ratios": {k: None if v is None else round(v, 4) for k, v in data["ratios"].items()},
        "paper": "mc2",
        "quick": data["quick"],
        "systems": data["systems"],
        "truncated_scenarios": len(data["truncated"]),
        "fig15_circled": data["fig15_circled"],
        "ipc_ranges": data["ipc_ranges"],
    }
