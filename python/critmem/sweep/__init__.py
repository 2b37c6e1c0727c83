"""`critmem.sweep`: one runner for every study, and sweeps a spec file describes.

A study is a function mapped over work items: picklable values made of dataclasses, dicts,
lists, tuples, strings, numbers and None (a `ScenarioItem` — scenario text, seed, overrides —
or whatever the study needs). `Sweep.map` runs them on an executor and returns the results in
the items' order:

- `LocalProcesses` (the default): worker processes on this machine, no server;
- `DaskCluster`: a Dask distributed scheduler at `tcp://HOST:PORT`, whose workers have critmem
  installed (`critmem reproduce sara --scheduler ...`, or `CRITMEM_DASK_SCHEDULER`).

Every item has a key, a hash of what it is (`item_key`), so nothing depends on how the work is
split: a seed the item leaves open is derived from the item (`item_seed`), never from its
position or the worker, and with a cache folder each result is stored under its key as it
arrives, so a sweep that was stopped part-way computes only the items still missing when run
again. The cache holds JSON (`critmem.sweep.cache`), never pickles, so reading it runs no code;
a function whose results are cached returns plain data. Cached results are reused only by the
same code: the key includes a hash of the installed critmem package (`code_fingerprint`).

    from critmem.sweep import ScenarioItem, Sweep, simulate

    if __name__ == "__main__":  # worker processes import the main script; only the parent sweeps
        items = [ScenarioItem(text, overrides=(("memory.total_mb", mb),)) for mb in (256, 512)]
        with Sweep(cache_dir=Path("results/my-study/.critmem-sweep")) as sweep:
            summaries = sweep.map(simulate, items)

A study that varies a scenario's keys over seeds and keeps some numbers of each run needs no
code: a spec file says so (`critmem.sweep.spec`), `run_spec` runs it and writes a table with
one row per run and a plot per varied key (`critmem sweep SPEC.toml`).

    outcome = run_spec("examples/sweep/sweep.toml", out_dir="results/sweep")
    outcome.frame()  # one row per run: the varied keys, the seed, the metrics
"""

from __future__ import annotations

from critmem.sweep.runner import (
    SCHEDULER_ENV,
    DaskCluster,
    Executor,
    LocalProcesses,
    ScenarioItem,
    Sweep,
    SweepError,
    code_fingerprint,
    executor_for,
    item_key,
    item_seed,
    result_key,
    simulate,
)
from critmem.sweep.spec import SpecError, SweepSpec, load_spec
from critmem.sweep.study import SweepOutcome, run_spec

__all__ = [
    "SCHEDULER_ENV",
    "DaskCluster",
    "Executor",
    "LocalProcesses",
    "ScenarioItem",
    "SpecError",
    "Sweep",
    "SweepError",
    "SweepOutcome",
    "SweepSpec",
    "code_fingerprint",
    "executor_for",
    "item_key",
    "item_seed",
    "load_spec",
    "result_key",
    "run_spec",
    "simulate",
]
