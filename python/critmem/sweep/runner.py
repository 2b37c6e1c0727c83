"""The runner under every study: work items and their keys, the executors, and `Sweep`, which
maps a function over items with each result kept in a cache folder (`critmem.sweep.cache`)."""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import multiprocessing
import os
import tomllib
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor, as_completed
from pathlib import Path
from types import TracebackType
from typing import Any, Protocol, Self, TypeVar

from critmem.progress import Progress, QuietProgress
from critmem.sweep.cache import CacheError, ResultCache

__all__ = [
    "SCHEDULER_ENV",
    "DaskCluster",
    "Executor",
    "LocalProcesses",
    "ScenarioItem",
    "Sweep",
    "SweepError",
    "code_fingerprint",
    "executor_for",
    "item_key",
    "item_seed",
    "result_key",
    "simulate",
]

T = TypeVar("T")
R = TypeVar("R")

SCHEDULER_ENV = "CRITMEM_DASK_SCHEDULER"
"""The environment variable naming a Dask scheduler to run sweeps on (like `--scheduler`)."""


class SweepError(Exception):
    """A sweep that cannot run: a work item that cannot be keyed, a scheduler out of reach."""


# ---------------------------------------------------------------------------------------------
# Keys and seeds


def _canonical(x: Any) -> Any:
    """`x` as JSON-able data that tells apart everything that can make a result differ: types
    are tagged (a tuple is not a list, 1 is not 1.0 or True), dict keys are sorted."""
    if x is None or isinstance(x, (bool, str)):
        return x
    if isinstance(x, int):
        return {"int": str(x)}
    if isinstance(x, float):
        return {"float": repr(x)}  # repr round-trips, and names nan and inf
    if isinstance(x, (list, tuple)):
        return {type(x).__name__: [_canonical(v) for v in x]}
    if isinstance(x, dict):
        pairs = [(json.dumps(_canonical(k), sort_keys=True), _canonical(v)) for k, v in x.items()]
        return {"dict": sorted(pairs, key=lambda p: p[0])}
    if isinstance(x, Path):
        return {"path": str(x)}
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        # A field marked `not_in_key` says where the item runs, not what it is.
        fields = {f.name: _canonical(getattr(x, f.name)) for f in dataclasses.fields(x) if not f.metadata.get("not_in_key")}
        return {f"{type(x).__module__}.{type(x).__qualname__}": fields}
    raise SweepError(
        f"a work item holds a {type(x).__name__}, which has no stable key; use dataclasses, dicts, lists, tuples, strings, numbers and None"
    )


def _digest(*parts: Any) -> str:
    return hashlib.sha256(json.dumps([_canonical(p) for p in parts], sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def item_key(item: Any) -> str:
    """A hash of what `item` is (64 hex digits): equal items have equal keys in every process
    and on every machine; items that differ in any field, or in a type, differ."""
    return _digest("item", item)


def item_seed(item: Any) -> int:
    """A seed (0 to 2**64 − 1) derived from the item alone, so it is the same however the work
    is split across workers."""
    return int(_digest("seed", item)[:16], 16)


@functools.cache
def code_fingerprint() -> str:
    """A hash of the installed critmem package (its Python modules, data files and the compiled
    extension): results cached by one version of the code are not reused by another."""
    root = Path(__file__).resolve().parent.parent  # the critmem package
    h = hashlib.sha256()
    for path in sorted(root.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts and path.suffix in (".py", ".pyi", ".so", ".pyd", ".toml"):
            h.update(str(path.relative_to(root)).encode() + b"\0")
            h.update(hashlib.sha256(path.read_bytes()).digest())
    return h.hexdigest()


def _function_name(fn: Callable[..., Any]) -> str:
    return f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', repr(fn))}"


def result_key(fn: Callable[..., Any], item: Any) -> str:
    """The key of `fn(item)` (a hash of the function's name and the item): what the cache
    stores it under and what `Sweep.computed` and `Sweep.reused` list."""
    return _digest("result", _function_name(fn), item)


# ---------------------------------------------------------------------------------------------
# A generic work item: a scenario, its seed, overrides


@dataclasses.dataclass(frozen=True)
class ScenarioItem:
    """One simulation: scenario text, its seed and overrides of its keys."""

    scenario: str
    """TOML text, or JSON text starting with `{`."""
    seed: int | None = None
    """The run's seed; None derives one from the item (`item_seed`)."""
    overrides: tuple[tuple[str, Any], ...] = ()
    """(dotted key, value) pairs set in the scenario before it runs, e.g.
    `("memory.total_mb", 366)` or `("task.0.wcet_ms", 2)` (a number indexes a list)."""
    directory: str | None = dataclasses.field(default=None, compare=False, metadata={"not_in_key": True})
    """Where the scenario's relative `file.py:Class` names start (None: the working directory);
    not part of the item's key or seed."""

    def run_seed(self) -> int:
        return self.seed if self.seed is not None else item_seed(self)

    def scenario_dict(self) -> dict[str, Any]:
        """The scenario with the overrides applied."""
        text = self.scenario.lstrip()
        try:
            d: dict[str, Any] = json.loads(text) if text.startswith("{") else tomllib.loads(text)
        except ValueError as e:  # JSONDecodeError and TOMLDecodeError are ValueErrors
            raise SweepError(f"work item scenario: {' '.join(str(e).split())}") from None
        for dotted, value in self.overrides:
            _set_dotted(d, dotted, value)
        return d


def _set_dotted(d: dict[str, Any], dotted: str, value: Any) -> None:
    keys = dotted.split(".")
    node: Any = d
    for i, k in enumerate(keys):
        last = i == len(keys) - 1
        if isinstance(node, list):
            if not k.isdigit() or int(k) >= len(node):
                raise SweepError(f"override {dotted}: {'.'.join(keys[:i]) or 'the scenario'} has no entry {k}")
            if last:
                node[int(k)] = value
            else:
                node = node[int(k)]
        elif isinstance(node, dict):
            if last:
                node[k] = value
            else:
                node = node.setdefault(k, {})
        else:
            raise SweepError(f"override {dotted}: {'.'.join(keys[:i])} is a value, not a table")


def simulate(item: ScenarioItem) -> dict[str, Any]:
    """Simulates `item` and returns its summary (the object `critmem run --json` prints)."""
    from critmem.api import run
    from critmem.plugins import scenario_dir

    with scenario_dir(item.directory):
        result = run(item.scenario_dict(), seed=item.run_seed(), record_jobs=False, record_segments=False)
    return result.summary


# ---------------------------------------------------------------------------------------------
# Executors


class Executor(Protocol):
    """Where a sweep's items run."""

    def run(self, fn: Callable[[T], R], items: Sequence[T], keys: Sequence[str]) -> Iterator[tuple[int, R]]:
        """Runs `fn` on every item and yields (index, result) as each one finishes, in any
        order; `keys[i]` names `fn(items[i])` uniquely (a hash of the function and the item).
        Raises what `fn` raised."""
        ...

    def close(self) -> None:
        """Releases the workers or the connection."""
        ...


class LocalProcesses:
    """Worker processes on this machine (default: one per core). The processes are started
    fresh (spawn), not forked, so they share no state (no locks held by the caller's threads);
    they import the caller's main script, which therefore needs the usual
    `if __name__ == "__main__":` guard around its sweep."""

    def __init__(self, workers: int | None = None) -> None:
        if workers is not None and workers < 1:
            raise SweepError(f"workers must be at least 1 (got {workers})")
        self.workers = workers or os.cpu_count() or 1
        self._pool: ProcessPoolExecutor | None = None

    def run(self, fn: Callable[[T], R], items: Sequence[T], keys: Sequence[str]) -> Iterator[tuple[int, R]]:
        if self._pool is None:
            self._pool = ProcessPoolExecutor(self.workers, mp_context=multiprocessing.get_context("spawn"))
        futures: dict[Future[R], int] = {self._pool.submit(fn, item): i for i, item in enumerate(items)}
        try:
            for f in as_completed(futures):
                yield futures[f], f.result()
        finally:
            for f in futures:
                f.cancel()

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None


class DaskCluster:
    """A Dask distributed scheduler, e.g. `tcp://127.0.0.1:8786`. Its workers need critmem
    installed (the same version: results are compared byte for byte with local runs)."""

    def __init__(self, address: str, *, timeout_s: float = 10.0) -> None:
        self.address = address
        self._distributed = _import_distributed()
        try:
            self._client = self._distributed.Client(address, timeout=f"{timeout_s}s", set_as_default=False)
        except (OSError, TimeoutError, ValueError) as e:
            raise SweepError(f"cannot reach the Dask scheduler at {address}: {' '.join(str(e).split())}") from None

    def run(self, fn: Callable[[T], R], items: Sequence[T], keys: Sequence[str]) -> Iterator[tuple[int, R]]:
        # The key names the task on the cluster: the same item under the same function is the
        # same task, whoever submits it.
        futures = [self._client.submit(fn, item, key=f"critmem-sweep-{key}", pure=False) for item, key in zip(items, keys, strict=True)]
        index = {f.key: i for i, f in enumerate(futures)}
        try:
            for f in self._distributed.as_completed(futures, loop=self._client.loop):
                yield index[f.key], f.result()
        finally:
            self._client.cancel(futures)

    def close(self) -> None:
        self._client.close()


def _import_distributed() -> Any:
    """The `distributed` package, typed loosely: only part of its API is annotated."""
    try:
        import distributed
    except ImportError:
        raise SweepError("running on a Dask scheduler needs the `distributed` package (pip install distributed)") from None
    return distributed


def executor_for(scheduler: str | None = None, workers: int | None = None) -> Executor:
    """The executor a command line asks for: the Dask scheduler `scheduler` (else the one named
    by CRITMEM_DASK_SCHEDULER), otherwise `workers` local processes."""
    address = scheduler or os.environ.get(SCHEDULER_ENV) or None
    if address is not None:
        if workers is not None:
            raise SweepError("--workers is for local processes; a Dask cluster has its own workers")
        return DaskCluster(address)
    return LocalProcesses(workers)


# ---------------------------------------------------------------------------------------------
# The sweep


def _open_cache(directory: Path) -> ResultCache:
    try:
        return ResultCache(directory, code_fingerprint()[:16])
    except OSError as e:
        raise SweepError(f"cannot use the sweep cache {str(directory)!r}: {e.strerror or e}") from None


class Sweep:
    """Maps functions over work items on an executor, with an optional cache folder of JSON
    files (`critmem.sweep.cache`): a function's results must then be plain data (None, bools,
    numbers, numpy numbers, strings, lists, tuples, dicts).

    Use it as a context manager: the executor is closed at the end. `computed` lists the keys
    of the items this sweep ran (not those it took from the cache), in the order they finished;
    `reused` those it took from the cache.
    """

    def __init__(self, executor: Executor | None = None, *, cache_dir: Path | None = None, progress: Progress | None = None) -> None:
        self.executor = executor if executor is not None else LocalProcesses()
        self.progress = progress or QuietProgress()
        try:
            self._cache = _open_cache(cache_dir) if cache_dir is not None else None
        except SweepError:
            self.executor.close()  # the sweep owns its executor, and will not be used
            raise
        self.computed: list[str] = []
        self.reused: list[str] = []

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        self.executor.close()

    def map(self, fn: Callable[[T], R], items: Sequence[T], *, label: Callable[[T], str] = str) -> list[R]:
        """`[fn(item) for item in items]`, computed on the executor (cached results reused, equal
        items computed once); one progress step per item, labelled `label(item)`."""
        name = _function_name(fn)
        if "<" in name:
            raise SweepError(f"{name} cannot run in another process: pass a function defined at a module's top level")
        keys = [result_key(fn, item) for item in items]
        copies = Counter(keys)
        labels = {key: label(item) for key, item in zip(keys, items)}
        results: dict[str, Any] = {}
        todo: dict[str, T] = {}
        for key, item in zip(keys, items):
            if key in results or key in todo:
                continue
            hit, value = self._cache.get(key) if self._cache is not None else (False, None)
            if hit:
                results[key] = value
                self.reused.append(key)
                for _ in range(copies[key]):
                    self.progress.step(labels[key])
            else:
                todo[key] = item
        pending = list(todo)
        for i, value in self.executor.run(fn, [todo[k] for k in pending], pending):
            key = pending[i]
            results[key] = value
            if self._cache is not None:
                try:
                    self._cache.put(key, value)
                except CacheError as e:
                    raise SweepError(f"{name} returned a result the sweep cache cannot keep: {e}") from None
            self.computed.append(key)
            for _ in range(copies[key]):
                self.progress.step(labels[key])
        return [results[k] for k in keys]
