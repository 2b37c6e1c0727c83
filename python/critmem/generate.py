"""Random task sets for studies: utilisations by UUniFast (Bini & Buttazzo) or RandFixedSum
(Stafford; uniform over the constrained simplex, as Emberson et al. use it for real-time
task sets), periods uniform or log-uniform, and the named distributions of SchedCAT's
generators. Every function takes a `numpy.random.Generator`, so a seed gives the same set.

RandFixedSum is written here rather than taken from `convolutionalfixedsum`: that package's
scalable sampler draws from Python's global `random` state, which a seed per task set (and
threads in a sweep) cannot own.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

# SchedCAT's period ranges in ms (integers drawn uniformly, or log-uniformly for the log- ones).
PERIODS_MS: dict[str, tuple[int, int]] = {
    "uni-short": (3, 33),
    "uni-moderate": (10, 100),
    "uni-long": (50, 250),
    "log-uni-short": (3, 33),
    "log-uni-moderate": (10, 100),
    "log-uni-long": (50, 250),
}


def _uniform(lo: float, hi: float) -> Callable[[np.random.Generator], float]:
    return lambda rng: float(rng.uniform(lo, hi))


def _exponential(mean: float) -> Callable[[np.random.Generator], float]:
    # SchedCAT redraws values above 1: a task cannot need more than its CPU.
    def draw(rng: np.random.Generator) -> float:
        while True:
            u = float(rng.exponential(mean))
            if u <= 1.0:
                return u

    return draw


def _bimodal(light_weight: int, heavy_weight: int) -> Callable[[np.random.Generator], float]:
    def draw(rng: np.random.Generator) -> float:
        if rng.uniform(0, light_weight + heavy_weight) < light_weight:
            return float(rng.uniform(0.001, 0.5))
        return float(rng.uniform(0.5, 0.9))

    return draw


# SchedCAT's per-task utilisation distributions.
UTILIZATIONS: dict[str, Callable[[np.random.Generator], float]] = {
    "uni-light": _uniform(0.001, 0.1),
    "uni-medium": _uniform(0.1, 0.4),
    "uni-heavy": _uniform(0.5, 0.9),
    "exp-light": _exponential(0.10),
    "exp-medium": _exponential(0.25),
    "exp-heavy": _exponential(0.50),
    "bimo-light": _bimodal(8, 1),
    "bimo-medium": _bimodal(6, 3),
    "bimo-heavy": _bimodal(4, 5),
}


def uunifast(n: int, total: float, rng: np.random.Generator) -> np.ndarray:
    """`n` utilisations summing to `total`, uniform over the simplex (UUniFast). With `total`
    above 1 some may exceed 1: use `uunifast_discard` for multiprocessor sets."""
    if n < 1 or not total > 0:
        raise ValueError(f"need n >= 1 and total > 0 (got n={n}, total={total})")
    out = np.empty(n)
    left = total
    for i in range(n - 1):
        next_left = left * rng.random() ** (1.0 / (n - 1 - i))
        out[i] = left - next_left
        left = next_left
    out[n - 1] = left
    return out


def uunifast_discard(n: int, total: float, rng: np.random.Generator, *, max_tries: int = 10_000) -> np.ndarray:
    """UUniFast, redrawn until no utilisation exceeds 1 (Davis & Burns's UUniFast-Discard)."""
    if total > n:
        raise ValueError(f"{n} tasks of utilisation at most 1 cannot sum to {total}")
    for _ in range(max_tries):
        u = uunifast(n, total, rng)
        if (u <= 1.0).all():
            return u
    raise ValueError(f"no set of {n} utilisations summing to {total} with each at most 1 in {max_tries} draws: use randfixedsum")


def randfixedsum(n: int, total: float, rng: np.random.Generator, *, lower: float = 0.0, upper: float = 1.0) -> np.ndarray:
    """`n` values in [lower, upper] summing to `total`, uniform over that polytope (Stafford's
    RandFixedSum)."""
    # A total computed in floats may round a hair past a bound it means to reach.
    tol = 1e-12 * max(1.0, abs(n * upper), abs(n * lower))
    if n * upper < total <= n * upper + tol:
        total = n * upper
    elif n * lower - tol <= total < n * lower:
        total = n * lower
    if n < 1 or not lower < upper or not n * lower <= total <= n * upper:
        raise ValueError(f"no {n} values in [{lower}, {upper}] sum to {total}")
    if n == 1:
        return np.array([float(total)])
    s = (total - n * lower) / (upper - lower)  # the same problem in the unit cube
    k = max(min(math.floor(s), n - 1), 0)
    s = max(min(s, k + 1), k)
    # 1-based arrays, as the algorithm is usually written.
    s1 = np.array([0.0] + [s - (k - i + 1) for i in range(1, n + 1)])
    s2 = np.array([0.0] + [(k + n - i + 1) - s for i in range(1, n + 1)])
    big, tiny = np.finfo(float).max, np.nextafter(0.0, 1.0)
    w = np.zeros((n + 1, n + 2))
    w[1, 2] = big
    t = np.zeros((n, n + 1))
    for i in range(2, n + 1):
        for c in range(1, i + 1):
            a = w[i - 1, c + 1] * s1[c] / i
            b = w[i - 1, c] * s2[n - i + c] / i
            w[i, c + 1] = a + b
            denom = w[i, c + 1] + tiny
            t[i - 1, c] = b / denom if s2[n - i + c] > s1[c] else 1.0 - a / denom
    x = np.zeros(n + 1)
    left, j, sm, pr = s, k + 1, 0.0, 1.0
    for i in range(n - 1, 0, -1):
        e = 1 if rng.random() <= t[i, j] else 0
        sx = rng.random() ** (1.0 / i)
        sm += (1.0 - sx) * pr * left / (i + 1)
        pr *= sx
        x[n - i] = sm + pr * e
        left -= e
        j -= e
    x[n] = sm + pr * left
    # The construction orders the coordinates; a random permutation makes them exchangeable.
    return (upper - lower) * rng.permutation(x[1:]) + lower


def periods_ms(
    n: int, rng: np.random.Generator, *, low_ms: float, high_ms: float, log_uniform: bool, granularity_ms: float = 1.0
) -> np.ndarray:
    """`n` periods in [low_ms, high_ms], uniform or log-uniform, rounded to `granularity_ms`."""
    if not 0 < low_ms <= high_ms or not granularity_ms > 0:
        raise ValueError(f"periods need 0 < low <= high and a positive granularity (got {low_ms}, {high_ms}, {granularity_ms})")
    raw = np.exp(rng.uniform(math.log(low_ms), math.log(high_ms), n)) if log_uniform else rng.uniform(low_ms, high_ms, n)
    return np.clip(np.round(raw / granularity_ms) * granularity_ms, low_ms, high_ms)


def schedcat_utilizations(name: str, cap: float, rng: np.random.Generator) -> np.ndarray:
    """SchedCAT's way: draw from a named distribution until the next task would push the total
    past `cap`."""
    draw = UTILIZATIONS[name]
    out: list[float] = []
    total = 0.0
    while True:
        u = draw(rng)
        if total + u > cap:
            return np.array(out)
        out.append(u)
        total += u


def taskset_scenario(
    utilizations: np.ndarray,
    periods: np.ndarray,
    *,
    scheduler: str = "rm",
    cpus: int = 1,
    horizon_ms: float | None = None,
    seed: int = 0,
) -> dict[str, Any]:
    """A scenario (the file's structure as a dict) of implicit-deadline periodic tasks: task i
    has period `periods[i]` and WCET `utilizations[i] * periods[i]`, rounded to the µs (at
    least 1 µs)."""
    if len(utilizations) != len(periods):
        raise ValueError("one period per utilisation")
    tasks = [
        {"name": f"t{i}", "period_ms": float(p), "wcet_ms": max(round(float(u) * float(p), 3), 0.001)}
        for i, (u, p) in enumerate(zip(utilizations, periods, strict=True))
    ]
    run: dict[str, Any] = {"seed": seed}
    if horizon_ms is not None:
        run["horizon_ms"] = horizon_ms
    return {"machine": {"cpus": cpus}, "scheduler": {"kind": scheduler}, "run": run, "task": tasks}


def to_toml(scenario: dict[str, Any]) -> str:
    """A scenario dict of tables and arrays of tables with plain values, as TOML text."""

    def value(v: Any) -> str:
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, (int, float)):
            return repr(v)
        if isinstance(v, str):
            import json

            return json.dumps(v)  # JSON's escapes are TOML basic-string escapes
        raise TypeError(f"cannot write {type(v).__name__} as a TOML value")

    lines: list[str] = []
    for key, section in scenario.items():
        tables = section if isinstance(section, list) else [section]
        for table in tables:
            lines.append(f"[[{key}]]" if isinstance(section, list) else f"[{key}]")
            lines += [f"{k} = {value(v)}" for k, v in table.items()]
            lines.append("")
    return "\n".join(lines)


def default_horizon_ms(periods: np.ndarray) -> float:
    """One hyperperiod of the periods (in whole µs), capped at 100 s."""
    us = [round(float(p) * 1000) for p in periods]
    return min(math.lcm(*us) / 1000, 100_000.0)


def parse_periods(spec: str) -> tuple[float, float, bool]:
    """`uniform:LO:HI`, `log-uniform:LO:HI` (ms) or a SchedCAT name → (low, high, log)."""
    if spec in PERIODS_MS:
        lo_ms, hi_ms = PERIODS_MS[spec]
        return float(lo_ms), float(hi_ms), spec.startswith("log-")
    kind, _, rest = spec.partition(":")
    lo, _, hi = rest.partition(":")
    if kind not in ("uniform", "log-uniform") or not lo or not hi:
        names = ", ".join(PERIODS_MS)
        raise ValueError(f"periods {spec!r}: give uniform:LO:HI or log-uniform:LO:HI in ms, or one of {names}")
    try:
        low, high = float(lo), float(hi)
    except ValueError:
        raise ValueError(f"periods {spec!r}: LO and HI must be numbers of ms") from None
    if not (math.isfinite(low) and math.isfinite(high) and 0 < low <= high):
        raise ValueError(f"periods {spec!r}: need 0 < LO <= HI")
    return low, high, kind == "log-uniform"
