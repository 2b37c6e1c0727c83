"""`critmem.sweep`: the same results on local processes and on a Dask cluster, however the work
is split, and an interrupted sweep resumes with only the items it is missing."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from conftest import InProcess, StopAfter, assert_one_line_error, cli
from critmem.reproduce.sara import experiment as sara
from critmem.sweep import (
    DaskCluster,
    Executor,
    LocalProcesses,
    ScenarioItem,
    Sweep,
    SweepError,
    code_fingerprint,
    item_key,
    item_seed,
    result_key,
    simulate,
)

# Random execution times, so the seed shows in every result.
STOCHASTIC = """
[scheduler]
kind = "edf"
[run]
horizon_ms = 200
[[task]]
name = "a"
period_ms = 10
exec = { dist = "uniform", min_ms = 1, max_ms = 6 }
[[task]]
name = "b"
period_ms = 25
exec = { dist = "normal", mean_ms = 8, sd_ms = 3, max_ms = 15 }
"""


def _items() -> list[ScenarioItem]:
    items = [ScenarioItem(STOCHASTIC, overrides=(("task.0.period_ms", p),)) for p in (8, 10, 12, 14)]
    return [*items, ScenarioItem(STOCHASTIC, seed=7), ScenarioItem(STOCHASTIC, seed=7, overrides=(("run.horizon_ms", 150),))]


def _by_key(items: list[ScenarioItem], results: list[dict[str, Any]]) -> dict[str, str]:
    return {item_key(i): json.dumps(r, sort_keys=True) for i, r in zip(items, results, strict=True)}


def test_keys_and_seeds_depend_on_the_item_alone() -> None:
    a = ScenarioItem("x", overrides=(("memory.total_mb", 1),))
    assert item_key(a) == item_key(ScenarioItem("x", overrides=(("memory.total_mb", 1),)))
    assert item_seed(a) == item_seed(ScenarioItem("x", overrides=(("memory.total_mb", 1),)))
    # A different value, or the same value as another type, is another item.
    for other in (
        ScenarioItem("x", overrides=(("memory.total_mb", 2),)),
        ScenarioItem("x", overrides=(("memory.total_mb", 1.0),)),
        ScenarioItem("x", overrides=(("memory.total_mb", True),)),
        ScenarioItem("x", seed=0, overrides=(("memory.total_mb", 1),)),
    ):
        assert item_key(other) != item_key(a) and item_seed(other) != item_seed(a), other
    # The same in a fresh interpreter (no per-process hash randomisation).
    code = "from critmem.sweep import ScenarioItem, item_key, item_seed; i = ScenarioItem('x', overrides=(('memory.total_mb', 1),)); print(item_key(i), item_seed(i))"
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env).stdout.split()
    assert out == [item_key(a), str(item_seed(a))]
    with pytest.raises(SweepError, match="has no stable key"):
        item_key(ScenarioItem("x", overrides=(("run.seed", object()),)))


def test_per_item_seeds_do_not_depend_on_how_the_work_is_split(tmp_path: Path) -> None:
    items = _items()
    with Sweep(LocalProcesses(1)) as one:
        in_order = one.map(simulate, items)
    # Two workers, the items reversed and one of them twice: each item's result is the same.
    shuffled = [*reversed(items), items[2]]
    with Sweep(LocalProcesses(2)) as two:
        split = two.map(simulate, shuffled)
    assert _by_key(shuffled, split) == _by_key(items, in_order)
    assert split[-1] == split[len(items) - 1 - 2]
    assert len(two.computed) == len(items), "an item given twice is computed once"
    for item, result in zip(items, in_order, strict=True):
        assert result["seed"] == (item.seed if item.seed is not None else item_seed(item))
    # Seeds left open differ from item to item, and so do the random execution times.
    open_seeds = {r["seed"] for i, r in zip(items, in_order, strict=True) if i.seed is None}
    assert len(open_seeds) == 4
    assert len({json.dumps(r["tasks"]) for r in in_order}) == len(items)


def test_a_dask_cluster_gives_the_local_results_byte_for_byte(dask_cluster: str) -> None:
    items = _items()
    w = sara.WORKLOADS[1]
    specs = [
        sara.Spec(w, pct, "fast-ssd", c, (), 3, 1, w.configured_bcet_ms, keep_series=True) for pct in (60, 80) for c in ("sara", "greedy")
    ]
    with Sweep(LocalProcesses(2)) as local:
        want = (local.map(simulate, items), local.map(sara.measure, specs))
    with Sweep(DaskCluster(dask_cluster)) as cluster:
        got = (cluster.map(simulate, items), cluster.map(sara.measure, specs))
        assert len(cluster.computed) == len(items) + len(specs)
    assert pickle.dumps(got) == pickle.dumps(want)
    assert json.dumps(got) == json.dumps(want)


def test_an_unreachable_scheduler_is_a_one_line_error() -> None:
    with pytest.raises(SweepError, match=r"^cannot reach the Dask scheduler at tcp://127\.0\.0\.1:9: "):
        DaskCluster("tcp://127.0.0.1:9", timeout_s=0.5)


@dataclass(frozen=True)
class Marked:
    """A scenario item whose function leaves a file behind each time it runs."""

    item: ScenarioItem
    name: str
    marks: str


def simulate_and_mark(m: Marked) -> dict[str, Any]:
    Path(m.marks, f"{m.name}.{os.getpid()}.{os.urandom(4).hex()}").touch()
    return simulate(m.item)


def _ran(marks: Path) -> list[str]:
    return sorted(p.name.split(".")[0] for p in marks.iterdir())


def test_an_interrupted_sweep_computes_only_the_missing_items_when_run_again(tmp_path: Path) -> None:
    marks, cache = tmp_path / "marks", tmp_path / "out" / ".critmem-sweep"
    marks.mkdir()
    items = [Marked(item, f"i{n}", str(marks)) for n, item in enumerate(_items())]
    with pytest.raises(KeyboardInterrupt), Sweep(LocalProcesses(2), cache_dir=cache, progress=StopAfter(3)) as first:
        first.map(simulate_and_mark, items, label=lambda m: m.name)
    assert len(first.computed) == 3
    kept = set(first.computed)
    for p in marks.iterdir():
        p.unlink()
    with Sweep(LocalProcesses(2), cache_dir=cache) as second:
        resumed = second.map(simulate_and_mark, items)
    # Only the items the first run did not finish ran again, each once.
    assert set(second.reused) == kept
    missing = [m.name for m in items if result_key(simulate_and_mark, m) not in kept]
    assert len(missing) == len(items) - 3
    assert _ran(marks) == sorted(missing)
    assert sorted(second.computed) == sorted(result_key(simulate_and_mark, m) for m in items if m.name in missing)
    with Sweep(LocalProcesses(1)) as fresh:
        assert fresh.map(simulate_and_mark, items) == resumed
    # A third run takes everything from the cache.
    for p in marks.iterdir():
        p.unlink()
    with Sweep(LocalProcesses(1), cache_dir=cache) as third:
        assert third.map(simulate_and_mark, items) == resumed
    assert third.computed == [] and _ran(marks) == []


def test_results_of_other_code_are_dropped_from_the_cache(tmp_path: Path) -> None:
    cache = tmp_path / ".critmem-sweep"
    stale = cache / "0123456789abcdef"
    stale.mkdir(parents=True)
    (stale / "x.pickle").write_bytes(b"old")
    with Sweep(LocalProcesses(1), cache_dir=cache):
        pass
    assert [p.name for p in cache.iterdir()] == [code_fingerprint()[:16]]


def test_the_sweep_refuses_functions_that_cannot_run_elsewhere_and_bad_overrides() -> None:
    executor: Executor = InProcess()
    with Sweep(executor) as sweep, pytest.raises(SweepError, match="top level"):
        sweep.map(lambda i: i, [1])
    with pytest.raises(SweepError, match=r"override task\.9\.wcet_ms: task has no entry 9"):
        ScenarioItem(STOCHASTIC, overrides=(("task.9.wcet_ms", 1),)).scenario_dict()
    with pytest.raises(SweepError, match=r"override run\.horizon_ms\.x: run\.horizon_ms is a value"):
        ScenarioItem(STOCHASTIC, overrides=(("run.horizon_ms.x", 1),)).scenario_dict()
    with pytest.raises(SweepError, match="at least 1"):
        LocalProcesses(0)


def test_reproduce_options_are_checked_before_anything_runs(tmp_path: Path) -> None:
    out = str(tmp_path / "x")
    assert_one_line_error(cli("reproduce", "sara", "--scheduler", "127.0.0.1:8786", "--out", out), "--scheduler", "tcp://HOST:PORT")
    assert_one_line_error(cli("reproduce", "sara", "--workers", "0", "--out", out), "--workers", "at least 1")
    assert_one_line_error(cli("reproduce", "shared-pages", "--workers", "2", "--out", out), "are for sara")
    assert_one_line_error(
        cli("reproduce", "sara", "--scheduler", "tcp://127.0.0.1:9", "--workers", "2", "--out", out), "--workers is for local processes"
    )
