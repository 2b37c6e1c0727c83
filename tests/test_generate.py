"""Task-set generators: the utilisation splitters' invariants and distributions, and
`critmem generate`'s files."""

from __future__ import annotations

import tomllib
from pathlib import Path

import critmem
import numpy as np
import pytest
from conftest import cli
from critmem import generate as gen
from hypothesis import given, settings
from hypothesis import strategies as st


@settings(max_examples=200, deadline=None)
@given(
    n=st.integers(1, 24), fraction=st.floats(0.0, 1.0), lower=st.floats(0.0, 0.3), width=st.floats(0.05, 1.0), seed=st.integers(0, 2**32)
)
def test_randfixedsum_meets_its_sum_and_bounds(n: int, fraction: float, lower: float, width: float, seed: int) -> None:
    upper = lower + width
    total = n * lower + fraction * n * width
    x = gen.randfixedsum(n, total, np.random.default_rng(seed), lower=lower, upper=upper)
    assert len(x) == n
    assert abs(x.sum() - total) <= 1e-9 * max(1.0, total)
    assert (x >= lower - 1e-12).all() and (x <= upper + 1e-12).all()


def test_randfixedsum_takes_a_total_that_rounds_past_its_upper_bound() -> None:
    # n × lower + n × width lands a hair above n × (lower + width) in floats here.
    n, lower, width = 21, 0.12908661191224527, 0.2380330977784686
    total = n * lower + n * width
    assert total > n * (lower + width)
    x = gen.randfixedsum(n, total, np.random.default_rng(1), lower=lower, upper=lower + width)
    assert abs(x.sum() - total) <= 1e-9 and (x <= lower + width + 1e-12).all()


@settings(max_examples=200, deadline=None)
@given(n=st.integers(1, 32), total=st.floats(0.01, 8.0), seed=st.integers(0, 2**32))
def test_uunifast_sums_to_its_total(n: int, total: float, seed: int) -> None:
    x = gen.uunifast(n, total, np.random.default_rng(seed))
    assert abs(x.sum() - total) <= 1e-9 * total and (x >= 0).all()


def test_randfixedsum_is_uniform_on_known_marginals() -> None:
    rng = np.random.default_rng(7)
    # Two values summing to 1: the first is uniform on [0, 1], so its deciles hold 10 % each.
    first = np.array([gen.randfixedsum(2, 1.0, rng)[0] for _ in range(20_000)])
    deciles = np.histogram(first, bins=10, range=(0, 1))[0] / len(first)
    assert np.abs(deciles - 0.1).max() < 0.01
    # Uniform on the 3-simplex: a coordinate is Beta(1, 2), P(x <= 0.5) = 1 - 0.5^2 = 0.75.
    x = np.array([gen.randfixedsum(3, 1.0, rng) for _ in range(20_000)])
    assert np.abs((x <= 0.5).mean(axis=0) - 0.75).max() < 0.015
    # UUniFast draws from the same simplex.
    y = np.array([gen.uunifast(3, 1.0, rng) for _ in range(20_000)])
    assert np.abs((y <= 0.5).mean(axis=0) - 0.75).max() < 0.015


def test_uunifast_discard_keeps_every_task_within_one_cpu() -> None:
    rng = np.random.default_rng(3)
    for _ in range(200):
        assert gen.uunifast_discard(8, 3.0, rng).max() <= 1.0
    with pytest.raises(ValueError, match="cannot sum"):
        gen.uunifast_discard(2, 3.0, rng)


def test_schedcat_distributions_stay_in_their_ranges_and_under_the_cap() -> None:
    rng = np.random.default_rng(5)
    for name, (lo, hi) in {"uni-light": (0.001, 0.1), "uni-medium": (0.1, 0.4), "uni-heavy": (0.5, 0.9)}.items():
        u = gen.schedcat_utilizations(name, 4.0, rng)
        assert (u >= lo).all() and (u <= hi).all() and u.sum() <= 4.0 and len(u) > 0
    assert (gen.schedcat_utilizations("exp-heavy", 10.0, rng) <= 1.0).all()


def test_log_uniform_periods_spread_evenly_over_decades() -> None:
    p = gen.periods_ms(30_000, np.random.default_rng(1), low_ms=10, high_ms=1000, log_uniform=True)
    assert p.min() >= 10 and p.max() <= 1000 and (p == np.round(p)).all()
    below_100 = (p < 100).mean()
    assert abs(below_100 - 0.5) < 0.02


def test_generate_writes_a_set_that_loads_with_the_asked_utilisation(tmp_path: Path) -> None:
    o = cli("generate", "--tasks", "6", "--utilization", "0.75", "--periods", "uniform:10:50", "--seed", "4")
    assert o.code == 0, o.stderr
    scenario = tomllib.loads(o.stdout)
    assert len(scenario["task"]) == 6
    total = sum(t["wcet_ms"] / t["period_ms"] for t in scenario["task"])
    assert abs(total - 0.75) < 6 * 0.0005 / 10  # each WCET rounded to the µs
    assert all(10 <= t["period_ms"] <= 50 for t in scenario["task"])
    result = critmem.run(o.stdout)
    assert result.summary["tasks"][0]["jobs"] > 0
    # The same seed gives the same bytes; another seed another set.
    assert cli("generate", "--tasks", "6", "--utilization", "0.75", "--periods", "uniform:10:50", "--seed", "4").stdout == o.stdout
    assert cli("generate", "--tasks", "6", "--utilization", "0.75", "--periods", "uniform:10:50", "--seed", "5").stdout != o.stdout


def test_generate_many_sets_into_a_folder(tmp_path: Path) -> None:
    out = tmp_path / "sets"
    o = cli(
        "generate",
        "--tasks",
        "12",
        "--utilization",
        "2.5",
        "--cpus",
        "4",
        "--scheduler",
        "gedf",
        "--count",
        "4",
        "--out",
        str(out),
        "--format",
        "json",
    )
    assert o.code == 0, o.stderr
    files = sorted(out.iterdir())
    assert [f.name for f in files] == [f"set-{i:04d}.json" for i in range(4)]
    assert len({f.read_text() for f in files}) == 4
    for f in files:
        assert critmem.analyze(f).report["cpus"] == 4
    again = cli("generate", "--tasks", "12", "--utilization", "2.5", "--count", "4", "--out", str(out), "--format", "json")
    assert again.code == 2 and "already there" in again.stderr


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (["--tasks", "3", "--utilization", "5"], "no 3 values in [0.0, 1.0] sum to 5.0"),
        (["--tasks", "3", "--utilization", "0.5", "--scheduler", "lottery"], 'unknown scheduler "lottery"'),
        (["--tasks", "3", "--utilization", "0.5", "--periods", "uniform:9"], "argument --periods"),
        (["--tasks", "3", "--utilization", "0.5", "--periods", "uniform:50:10"], "need 0 < LO <= HI"),
        (["--schedcat", "uni-huge", "--utilization", "1"], "argument --schedcat"),
        (["--utilization", "1"], "give --tasks N"),
        (["--tasks", "0", "--utilization", "1"], "at least 1"),
        (["--tasks", "3", "--utilization", "nan"], "positive number"),
        (["--tasks", "3", "--utilization", "1", "--count", "2"], "needs --out"),
    ],
)
def test_generate_bad_arguments_are_one_line(argv: list[str], fragment: str) -> None:
    o = cli("generate", *argv)
    assert o.code == 2 and o.stdout == ""
    lines = o.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("critmem: error: ") and fragment in lines[0], lines
