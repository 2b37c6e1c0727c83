"""Memory controllers written in Python: the base class and the typed observation and actions.

A controller has the contract of the Rust `Controller` trait: each tick it receives an
`Observation` of the groups it manages and returns actions. It is pure: it reads no clock, file
or cgroup, so the same class runs in the simulator and against real processes on Linux
(`critmem run --platform linux`, the agent). A scenario names it in `[control]`:

    [control]
    controller = "hold_stall.py:HoldStall"   # or "package.module:Class", or an entry point
    config = { target_pct = 10.0 }           # keyword arguments of the class

    >>> import critmem
    >>> class Nothing(critmem.Controller):
    ...     def tick(self, observation):
    ...         return []
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, TypeAlias

Role: TypeAlias = Literal["soft-rt", "non-rt"]

DEFAULT_INTERVAL_NS = 5_000_000
"""The tick of a controller that does not set `interval_ns` (SARA's monitoring interval)."""


@dataclass(frozen=True, slots=True)
class StallTotals:
    """Cumulative stall since the group was created, in microseconds, as PSI's `total=`
    reports it: take differences between ticks."""

    memory_some_us: int
    memory_full_us: int
    io_some_us: int
    io_full_us: int
    cpu_some_us: int = 0
    """Time some task of the group was runnable but waited for a CPU (`cpu.pressure`)."""


@dataclass(frozen=True, slots=True)
class MemoryKnobs:
    """A group's memory knobs now (`None`: no limit or no protection)."""

    max_bytes: int | None
    high_bytes: int | None
    min_bytes: int | None
    low_bytes: int | None


@dataclass(frozen=True, slots=True)
class BandwidthKnobs:
    """A group's CPU and I/O bandwidth limits now (`None`: no limit)."""

    cpu_millicpus: int | None = None
    """CPU time over all the group's tasks, in thousandths of one CPU (`cpu.max`)."""
    io_read_bytes_per_s: int | None = None
    """Reads from the swap device (`io.max` `rbps`)."""
    io_write_bytes_per_s: int | None = None
    """Writes to the swap device (`io.max` `wbps`)."""


@dataclass(frozen=True, slots=True)
class GroupObservation:
    """One managed group at a tick. `deadline_ns` and `bcet_ns` are set for soft real-time
    groups only."""

    name: str
    role: Role
    deadline_ns: int | None
    bcet_ns: int | None
    stall: StallTotals
    usage_bytes: int
    knobs: MemoryKnobs
    floor_bytes: int
    """The smallest limit the platform applies (the group's declared floor)."""
    cpu_usage_us: int = 0
    """CPU time the group's tasks used since the group was created."""
    bandwidth: BandwidthKnobs = BandwidthKnobs()


@dataclass(frozen=True, slots=True)
class JobRelease:
    group: int
    job: int
    at_ns: int
    deadline_ns: int


@dataclass(frozen=True, slots=True)
class JobCompletion:
    group: int
    job: int
    at_ns: int


@dataclass(frozen=True, slots=True)
class JobDrop:
    group: int
    job: int
    at_ns: int


JobEvent: TypeAlias = JobRelease | JobCompletion | JobDrop


@dataclass(frozen=True, slots=True)
class Observation:
    """Everything a controller sees at one tick. A group is named in actions by its index in
    `groups`, which is stable for a run."""

    now_ns: int
    total_memory_bytes: int
    groups: tuple[GroupObservation, ...]
    events: tuple[JobEvent, ...]
    """Job boundaries of soft real-time groups since the previous tick, in order."""
    cpus: int = 1
    """CPUs of the machine: a CPU limit of `cpus * 1000` millicpus or more limits nothing."""

    def group(self, name: str) -> int:
        """The index of the group called `name` (KeyError if none is)."""
        for i, g in enumerate(self.groups):
            if g.name == name:
                return i
        raise KeyError(name)


@dataclass(frozen=True, slots=True)
class SetMax:
    """A hard limit (`memory.max`); `None` removes it. The platform rounds down to whole pages
    and never goes below the group's floor."""

    group: int
    bytes: int | None


@dataclass(frozen=True, slots=True)
class SetHigh:
    """A throttling limit (`memory.high`); `None` removes it."""

    group: int
    bytes: int | None


@dataclass(frozen=True, slots=True)
class SetMin:
    """Hard protection from reclaim (`memory.min`); `None` removes it."""

    group: int
    bytes: int | None


@dataclass(frozen=True, slots=True)
class SetLow:
    """Best-effort protection from reclaim (`memory.low`); `None` removes it."""

    group: int
    bytes: int | None


@dataclass(frozen=True, slots=True)
class DropJob:
    """Abort the running job `job` of `group` now."""

    group: int
    job: int


@dataclass(frozen=True, slots=True)
class Reclaim:
    """Reclaim up to `bytes` of the group's memory now, its coldest pages first, without
    changing any limit (cgroup v2's `memory.reclaim`); the pages fault back in when touched
    again. Whole pages are asked (less than a page asks nothing); on cgroup v1 it does
    nothing."""

    group: int
    bytes: int


@dataclass(frozen=True, slots=True)
class SetCpuMax:
    """A CPU bandwidth limit over all the group's tasks (`cpu.max`, over 100 ms periods), in
    thousandths of one CPU; `None` removes it. The platform applies at least 10 (1 ms per
    period), and none where the limit covers every CPU."""

    group: int
    millicpus: int | None


@dataclass(frozen=True, slots=True)
class SetIoMax:
    """Limits of the group's reads from and writes to the swap device (`io.max`; cgroup v1's
    `blkio.throttle.*_bps_device`), bytes per second; `None` removes a direction's limit. The
    platform applies at least 1 MiB/s; one without a swap device it may limit ignores it."""

    group: int
    read_bytes_per_s: int | None
    write_bytes_per_s: int | None


Action: TypeAlias = SetMax | SetHigh | SetMin | SetLow | DropJob | Reclaim | SetCpuMax | SetIoMax


class Controller:
    """Base class of memory controllers written in Python. Subclasses implement `tick`; the
    keyword arguments of `__init__` are the scenario's `[control] config` (type-checked
    against their annotations before the run starts)."""

    interval_ns: int = DEFAULT_INTERVAL_NS
    """The tick period the platform's loop calls `tick` at, unless `[control] interval_ms`
    sets another."""

    name: ClassVar[str | None] = None
    """Short name for reports; the class name when unset."""

    def tick(self, observation: Observation) -> Sequence[Action]:
        """This tick's actions."""
        raise NotImplementedError(f"{type(self).__name__} does not implement tick(observation)")


class ActionError(ValueError):
    """An action a platform cannot apply (a negative or non-finite limit, a wrong type)."""


def observation_from_wire(wire: Mapping[str, Any]) -> Observation:
    """The observation of the platforms' JSON form (the serde form of the Rust type)."""
    groups = []
    for g in wire["groups"]:
        role = g["role"]
        srt = role.get("SoftRealTime") if isinstance(role, dict) else None
        s, k, b = g["stall"], g["knobs"], g.get("bandwidth", {})
        groups.append(
            GroupObservation(
                name=g["name"],
                role="soft-rt" if srt is not None else "non-rt",
                deadline_ns=srt["deadline_ns"] if srt is not None else None,
                bcet_ns=srt["bcet_ns"] if srt is not None else None,
                stall=StallTotals(s["memory_some_us"], s["memory_full_us"], s["io_some_us"], s["io_full_us"], s.get("cpu_some_us", 0)),
                usage_bytes=g["usage_bytes"],
                knobs=MemoryKnobs(k["max_bytes"], k["high_bytes"], k["min_bytes"], k["low_bytes"]),
                floor_bytes=g["floor_bytes"],
                cpu_usage_us=g.get("cpu_usage_us", 0),
                bandwidth=BandwidthKnobs(b.get("cpu_millicpus"), b.get("io_read_bytes_per_s"), b.get("io_write_bytes_per_s")),
            )
        )
    events: list[JobEvent] = []
    for e in wire["events"]:
        ((kind, f),) = e.items()
        if kind == "Release":
            events.append(JobRelease(f["group"], f["job"], f["at_ns"], f["deadline_ns"]))
        elif kind == "Completion":
            events.append(JobCompletion(f["group"], f["job"], f["at_ns"]))
        else:
            events.append(JobDrop(f["group"], f["job"], f["at_ns"]))
    return Observation(wire["now_ns"], wire["total_memory_bytes"], tuple(groups), tuple(events), wire.get("cpus", 1))


def observation_to_wire(observation: Observation) -> dict[str, Any]:
    """The platforms' JSON form of `observation` (the inverse of `observation_from_wire`)."""
    groups = []
    for g in observation.groups:
        role: Any = {"SoftRealTime": {"deadline_ns": g.deadline_ns, "bcet_ns": g.bcet_ns}} if g.role == "soft-rt" else "NonRealTime"
        s, k, b = g.stall, g.knobs, g.bandwidth
        groups.append(
            {
                "name": g.name,
                "role": role,
                "stall": {
                    "memory_some_us": s.memory_some_us,
                    "memory_full_us": s.memory_full_us,
                    "io_some_us": s.io_some_us,
                    "io_full_us": s.io_full_us,
                    "cpu_some_us": s.cpu_some_us,
                },
                "usage_bytes": g.usage_bytes,
                "knobs": {"max_bytes": k.max_bytes, "high_bytes": k.high_bytes, "min_bytes": k.min_bytes, "low_bytes": k.low_bytes},
                "floor_bytes": g.floor_bytes,
                "cpu_usage_us": g.cpu_usage_us,
                "bandwidth": {
                    "cpu_millicpus": b.cpu_millicpus,
                    "io_read_bytes_per_s": b.io_read_bytes_per_s,
                    "io_write_bytes_per_s": b.io_write_bytes_per_s,
                },
            }
        )
    events: list[dict[str, Any]] = []
    for e in observation.events:
        if isinstance(e, JobRelease):
            events.append({"Release": {"group": e.group, "job": e.job, "at_ns": e.at_ns, "deadline_ns": e.deadline_ns}})
        else:
            kind = "Completion" if isinstance(e, JobCompletion) else "Drop"
            events.append({kind: {"group": e.group, "job": e.job, "at_ns": e.at_ns}})
    return {
        "now_ns": observation.now_ns,
        "total_memory_bytes": observation.total_memory_bytes,
        "cpus": observation.cpus,
        "groups": groups,
        "events": events,
    }


def actions_from_wire(wire: Sequence[Mapping[str, Any]]) -> list[Action]:
    """The typed actions of their JSON form (the inverse of `actions_to_wire`)."""
    kinds: dict[str, type[SetMax | SetHigh | SetMin | SetLow]] = {"SetMax": SetMax, "SetHigh": SetHigh, "SetMin": SetMin, "SetLow": SetLow}
    actions: list[Action] = []
    for a in wire:
        ((kind, f),) = a.items()
        if kind == "DropJob":
            actions.append(DropJob(f["group"], f["job"]))
        elif kind == "Reclaim":
            actions.append(Reclaim(f["group"], f["bytes"]))
        elif kind == "SetCpuMax":
            actions.append(SetCpuMax(f["group"], f["millicpus"]))
        elif kind == "SetIoMax":
            actions.append(SetIoMax(f["group"], f["read_bytes_per_s"], f["write_bytes_per_s"]))
        else:
            actions.append(kinds[kind](f["group"], f["bytes"]))
    return actions


_LIMITS: dict[type, str] = {SetMax: "SetMax", SetHigh: "SetHigh", SetMin: "SetMin", SetLow: "SetLow"}
_U64_MAX = (1 << 64) - 1


def _whole(what: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ActionError(f"{what} must be a whole number, got {value!r}")
    if isinstance(value, float):
        if not math.isfinite(value) or value != int(value):
            raise ActionError(f"{what} must be a finite whole number, got {value!r}")
        value = int(value)
    if not 0 <= value <= _U64_MAX:
        raise ActionError(f"{what} must be between 0 and 2^64-1, got {value}")
    return value


def actions_to_wire(actions: object) -> list[dict[str, Any]]:
    """The platforms' JSON form of a tick's actions; ActionError names the first that no
    platform could apply. Actions for groups that do not exist pass: platforms ignore them."""
    if actions is None:
        return []
    if not isinstance(actions, Sequence | set | frozenset) or isinstance(actions, str | bytes):
        raise ActionError(f"tick must return a list of actions, got {type(actions).__name__}")
    wire: list[dict[str, Any]] = []
    for i, a in enumerate(actions):
        kind = _LIMITS.get(type(a))
        if kind is not None:
            assert isinstance(a, SetMax | SetHigh | SetMin | SetLow)
            limit = None if a.bytes is None else _whole(f"action {i} ({kind}) bytes", a.bytes)
            wire.append({kind: {"group": _whole(f"action {i} ({kind}) group", a.group), "bytes": limit}})
        elif isinstance(a, DropJob):
            wire.append(
                {"DropJob": {"group": _whole(f"action {i} (DropJob) group", a.group), "job": _whole(f"action {i} (DropJob) job", a.job)}}
            )
        elif isinstance(a, Reclaim):
            wire.append(
                {
                    "Reclaim": {
                        "group": _whole(f"action {i} (Reclaim) group", a.group),
                        "bytes": _whole(f"action {i} (Reclaim) bytes", a.bytes),
                    }
                }
            )
        elif isinstance(a, SetCpuMax):
            millicpus = None if a.millicpus is None else _whole(f"action {i} (SetCpuMax) millicpus", a.millicpus)
            wire.append({"SetCpuMax": {"group": _whole(f"action {i} (SetCpuMax) group", a.group), "millicpus": millicpus}})
        elif isinstance(a, SetIoMax):
            rate = {
                d: None if v is None else _whole(f"action {i} (SetIoMax) {d}", v)
                for d, v in (("read_bytes_per_s", a.read_bytes_per_s), ("write_bytes_per_s", a.write_bytes_per_s))
            }
            wire.append({"SetIoMax": {"group": _whole(f"action {i} (SetIoMax) group", a.group), **rate}})
        else:
            raise ActionError(
                f"action {i} is a {type(a).__name__}, not SetMax, SetHigh, SetMin, SetLow, DropJob, Reclaim, SetCpuMax or SetIoMax"
            )
    return wire
