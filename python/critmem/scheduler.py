"""CPU schedulers written in Python: the base class and the typed task table and jobs.

A scheduler has the contract of the simulator's Rust `Scheduler` trait. The simulator tells it
which jobs are eligible to run (`on_ready`, `on_remove`) and asks it, after every batch of
events at one instant, which job each CPU runs (`choose`); a time-triggered policy (a table,
budgets) also says when it may answer differently with no event (`next_wakeup_ns`). Before the
first event it gets the task table and its CPU count (`setup`). A scenario names it as its root
scheduler, or as the policy of a top-level server, over the server's CPUs:

    [scheduler]
    kind = "edf.py:Edf"          # or "package.module:Class", or an entry point
    config = { tie = "seq" }     # keyword arguments of the class

    >>> import critmem
    >>> class Fifo(critmem.Scheduler):
    ...     def __init__(self) -> None:
    ...         self.queue: list[critmem.Job] = []
    ...     def on_ready(self, job: critmem.Job) -> None:
    ...         self.queue.append(job)
    ...     def on_remove(self, job_key: int) -> None:
    ...         self.queue = [j for j in self.queue if j.key != job_key]
    ...     def choose(self, now_ns: int, current):
    ...         return [j.key for j in self.queue[: self.cpus]] + [None] * (self.cpus - len(self.queue[: self.cpus]))
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

Assignment = Sequence[int | None]
"""What `choose` returns: one entry per CPU, a ready job's key or None (idle)."""


@dataclass(frozen=True, slots=True)
class Task:
    """One task of the scenario, as the scheduler's table holds it. `index` is its position in
    the scenario (`Job.task`); `wcet_ns` is the largest execution time its distribution can
    draw; `priority` is the scenario's (lower number = higher priority), `cpu` its pinning."""

    index: int
    name: str
    period_ns: int
    deadline_ns: int
    wcet_ns: int
    offset_ns: int
    priority: int | None
    criticality: str
    cpu: int | None


@dataclass(frozen=True, slots=True)
class Inherited:
    """The priority a job inherits (a lock's waiter's, under PIP or SRP): the task and
    absolute deadline it is ordered by where they beat its own."""

    task: int
    abs_deadline_ns: int


@dataclass(frozen=True, slots=True)
class Job:
    """A job eligible to run. `key` names it in `choose`'s answer and `on_remove` (keys are
    reused once a job ends); `seq` is its global release sequence number, unique, the
    tie-breaker the built-in schedulers use."""

    key: int
    task: int
    seq: int
    release_ns: int
    abs_deadline_ns: int
    donor: Inherited | None = None

    @property
    def effective_deadline_ns(self) -> int:
        """Its absolute deadline, or an inherited earlier one."""
        if self.donor is not None and self.donor.abs_deadline_ns < self.abs_deadline_ns:
            return self.donor.abs_deadline_ns
        return self.abs_deadline_ns


class Scheduler:
    """Base class of a CPU scheduler written in Python. Override `on_ready`, `on_remove` and
    `choose`; `setup` (which keeps `tasks` and `cpus`) and `next_wakeup_ns` are optional.

    `name` (a class attribute or set in `__init__`) is what results call it; the scenario's
    name for it by default. An exception raised in any method stops the run with a one-line
    error naming the class, the method and the line (`critmem run --debug` prints the
    traceback)."""

    name: ClassVar[str | None] = None
    tasks: tuple[Task, ...] = ()
    cpus: int = 1

    def setup(self, tasks: Sequence[Task], cpus: int) -> None:
        """Called once before the first event: the scenario's tasks (every task; a scheduler
        under a server sees only its own tasks' jobs) and the number of CPUs it assigns,
        numbered from 0 (a server's CPUs are its own, renumbered)."""
        self.tasks = tuple(tasks)
        self.cpus = cpus

    def on_ready(self, job: Job) -> None:
        """`job` became eligible: released at the head of its task, resumed, or back with a
        new inherited priority after an `on_remove`."""
        raise NotImplementedError

    def on_remove(self, job_key: int) -> None:
        """The job is no longer eligible: it completed, was aborted, suspended or blocked, or
        its priority is about to change."""
        raise NotImplementedError

    def choose(self, now_ns: int, current: Sequence[int | None]) -> Assignment:
        """The job each CPU runs from `now_ns` on: a sequence of `cpus` entries, each a ready
        job's key or None, no job twice. `current[cpu]` is what the CPU runs now."""
        raise NotImplementedError

    def next_wakeup_ns(self, now_ns: int) -> int | None:
        """The next instant after `now_ns` at which `choose` may answer differently with no
        event (a table's boundary, a budget's end); None when only events change it. Only
        called when a class overrides it."""
        return None


def overrides(obj: object, method: str) -> bool:
    """Whether `obj`'s class defines `method` itself rather than taking `Scheduler`'s."""
    own = getattr(type(obj), method, None)
    return own is not None and own is not getattr(Scheduler, method, None)
