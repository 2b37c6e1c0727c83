"""Transient-memory (TMEM) schedulers written in Python: the base class and the typed
observation and answer.

A memory scheduler has the contract of the Rust `MemoryScheduler` trait: every `[tmem]
period_ms` it receives a `TmemObservation` (each cache's allocation and contention, each
thread's tardiness since the previous run, the time each thread blocked in each cache) and
returns the desired allocation δ of the caches whose δ it sets. A scenario names it as its
`[tmem] policy`:

    [tmem]
    policy = "fair.py:Fair"     # or "package.module:Class", or an entry point
    config = { headroom = 1 }   # keyword arguments of the class

    >>> import critmem
    >>> class Minimum(critmem.MemoryScheduler):
    ...     def schedule(self, observation):
    ...         return [critmem.SetDesired(i, c.min_units) for i, c in enumerate(observation.caches)]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, TypeAlias

UnitKind: TypeAlias = Literal["stack", "cbuf"]


@dataclass(frozen=True, slots=True)
class CacheObservation:
    """One component's cache of one kind of unit at a run. `desired_units` is the δ in
    force (None: no limit but the pool); `estimated_requests` the concurrently requested
    units since the previous run."""

    component: str
    kind: UnitKind
    min_units: int
    desired_units: int | None
    allocated_units: int
    estimated_requests: int
    touched_units: int
    waiting_now: int
    blocked_concurrency_ceil: int
    self_suspensions: int


@dataclass(frozen=True, slots=True)
class ThreadObservation:
    """One thread (task) at a run: its jobs since the previous run and their tardiness."""

    name: str
    real_time: bool
    priority_rank: int
    completed_jobs: int
    missed_jobs: int
    avg_tardiness_ns: int
    avg_lateness_ns: int


@dataclass(frozen=True, slots=True)
class BlockObservation:
    """The time thread `thread` spent blocked waiting for a unit of cache `cache` since the
    previous run (indices into the observation's lists)."""

    cache: int
    thread: int
    blocked_ns: int
    blocks: int


@dataclass(frozen=True, slots=True)
class TmemObservation:
    """Everything a memory scheduler sees at one run. `total_units` and `free_pool_units`
    are None with an unlimited pool."""

    now_ns: int
    total_units: int | None
    free_pool_units: int | None
    caches: tuple[CacheObservation, ...]
    threads: tuple[ThreadObservation, ...]
    blocks: tuple[BlockObservation, ...]


@dataclass(frozen=True, slots=True)
class SetDesired:
    """The desired allocation δ of cache `cache` (its index in `observation.caches`); None:
    no limit but the pool. The platform raises it to the cache's minimum."""

    cache: int
    units: int | None


class MemoryScheduler:
    """Base class of a memory scheduler written in Python: override `schedule`. `name` is what
    results call it (default: the scenario's name for it)."""

    name: ClassVar[str | None] = None

    def schedule(self, observation: TmemObservation) -> Sequence[SetDesired]:
        """One run: the δ of every cache whose δ it sets (the others keep theirs)."""
        raise NotImplementedError


class AllocationError(ValueError):
    """An answer of `schedule` that is not a list of `SetDesired`."""


def observation_from_wire(wire: Mapping[str, Any]) -> TmemObservation:
    """The observation from the simulator's JSON form."""
    return TmemObservation(
        now_ns=wire["now_ns"],
        total_units=wire["total_units"],
        free_pool_units=wire["free_pool_units"],
        caches=tuple(CacheObservation(**c) for c in wire["caches"]),
        threads=tuple(ThreadObservation(**t) for t in wire["threads"]),
        blocks=tuple(BlockObservation(**b) for b in wire["blocks"]),
    )


def _units(value: object) -> bool:
    return value is None or (isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2**32)


def allocations_to_wire(answer: object, caches: int) -> list[dict[str, int | None]]:
    """The answer in the simulator's JSON form; AllocationError for anything but a sequence of
    `SetDesired` naming existing caches with whole units."""
    if not isinstance(answer, Sequence) or isinstance(answer, str | bytes):
        raise AllocationError(f"must return a list of SetDesired, got {type(answer).__name__}")
    out: list[dict[str, int | None]] = []
    for item in answer:
        if not isinstance(item, SetDesired):
            raise AllocationError(f"must return SetDesired items, got {item!r}")
        if isinstance(item.cache, bool) or not isinstance(item.cache, int) or not 0 <= item.cache < caches:
            raise AllocationError(f"cache {item.cache!r} does not exist: the observation has {caches} caches")
        if not _units(item.units):
            raise AllocationError(f"units of cache {item.cache} must be a whole number of units or None, got {item.units!r}")
        out.append({"cache": item.cache, "units": item.units})
    return out
