"""Type stubs for the Rust extension `critmem._core` (crates/py). Checked by stubtest in CI."""

from collections.abc import Callable, Sequence
from typing import Any, Final, final

__all__ = [
    "CPU_PARTS",
    "MAX_TRACE_RECORDS",
    "MC2_CATEGORIES",
    "MC2_SCHEMES",
    "OUTCOMES",
    "ConformanceProbe",
    "ReservationTree",
    "ScenarioError",
    "SimOutput",
    "__version__",
    "analyze",
    "controllers",
    "estimate_bcet_ms",
    "fit_exec_vs_stall",
    "mc2_dma_inflation",
    "mc2_ipc_cost_us",
    "mc2_model_parameters",
    "mc2_schedulable",
    "measure_memory_ops",
    "memory_schedulers",
    "pick_offline_limit",
    "pick_tmo_threshold",
    "sara_job_stalls",
    "scenario_schema",
    "schedulers",
    "simulate",
    "tmem_policy_cost",
    "validate",
    "write_csv",
    "write_trace_events",
]

__version__: Final[str]
CPU_PARTS: Final[int]
"""A reservation tree's CPU amounts are parts of one CPU: this many make a CPU."""
MC2_SCHEMES: Final[list[str]]
"""MC²'s nine buffer-management schemes, `IPC|I/O`, in the order `mc2_schedulable` counts them."""
MC2_CATEGORIES: Final[list[tuple[str, list[str]]]]
"""Table 3's seven categories and their choices, in the paper's order (648 scenarios)."""
MAX_TRACE_RECORDS: Final[int]
"""Most job records and most segments one run keeps."""
OUTCOMES: Final[list[str]]
"""Job outcomes in the order of their codes in `SimOutput.jobs["outcome"]`."""

@final
class ReservationTree:
    """HiRes's tree of subsystems and the hard and soft reservations between them, and the pages
    each subsystem holds."""

    def __new__(cls, cpus: int, memory_bytes: int, io_bytes_per_s: int = 0, *, page_bytes: int = 4096) -> ReservationTree: ...
    @staticmethod
    def load(text: str, *, page_bytes: int = 4096) -> ReservationTree: ...
    @property
    def page_bytes(self) -> int:
        """Bytes per page of the tree's memory."""
    def add_subsystem(self, name: str, parent: str = "root") -> None: ...
    def subsystems(self) -> list[tuple[str, str | None]]: ...
    def set_overhead(self, subsystem: str, family: str, amount: int) -> None: ...
    def create(self, holder: str, kind: str, family: str) -> int: ...
    def bind(
        self,
        res: int,
        *,
        budget_ns: int | None = None,
        period_ns: int | None = None,
        bytes: int | None = None,
        bytes_per_s: int | None = None,
    ) -> None: ...
    def revoke(self, res: int, keep: int) -> None: ...
    def delete(self, res: int) -> None: ...
    def wait(self, res: int) -> str | dict[str, Any] | None: ...
    def bound(self, res: int) -> dict[str, Any] | None: ...
    def holding(self, subsystem: str, family: str) -> dict[str, int]: ...
    def allocate(self, addr: int) -> int: ...
    def free(self, addr: int) -> int: ...
    def alias(self, parent: str, parent_addr: int, child: str, child_addr: int) -> int: ...
    def remove(self, parent: str, child: str, child_addr: int) -> int: ...
    def pages(self, subsystem: str) -> dict[str, int]: ...
    def subtree_pages(self, subsystem: str) -> dict[str, int]: ...
    def mappings(self, subsystem: str) -> list[tuple[int, int]]: ...
    def frames(self) -> dict[str, int]: ...
    def check(self) -> None: ...

class ScenarioError(ValueError):
    """A scenario that could not be loaded. The message is one line: `file: key: reason`."""

@final
class ConformanceProbe:
    """The platform conformance script (`critmem_policy::ConformanceProbe`) for a Python
    controller to drive (`critmem.conformance.Probe`)."""

    def __new__(cls, interval_ns: int) -> ConformanceProbe: ...
    def tick(self, observation_json: str) -> str:
        """One tick: the observation's JSON in, the actions' JSON out."""
    def verdict(self) -> tuple[bool, int, list[str]]:
        """(finished, ticks seen, violations): the script's verdict so far."""

@final
class SimOutput:
    """What one simulation run hands to Python."""

    @property
    def summary_json(self) -> str:
        """The core's summary JSON, byte for byte."""
    @property
    def seed(self) -> int:
        """The seed actually used (the override, or the scenario's)."""
    @property
    def events(self) -> int:
        """Events the engine handled."""
    @property
    def hyperperiod_ms(self) -> float | None:
        """Least common multiple of the periods in ms, if it fits in 64-bit nanoseconds."""
    @property
    def jobs(self) -> dict[str, tuple[str, bytes]]:
        """Per-job columns as (numpy dtype, little-endian bytes): task (index into the
        scenario's tasks), job, release_ms, deadline_ms, demand_ms, executed_ms, start_ms,
        completion_ms, response_ms (NaN where there is none), tardiness_ms, missed, outcome
        (index into OUTCOMES), last_cpu (-1 if it never ran)."""
    @property
    def jobs_left_out(self) -> int:
        """Jobs not in `jobs` because the trace was full (the first MAX_TRACE_RECORDS to end are kept)."""
    @property
    def segments(self) -> dict[str, tuple[str, bytes]]:
        """Execution-segment columns, raw as `jobs`: cpu, task (index), job, start_ms, end_ms."""
    @property
    def segments_left_out(self) -> int:
        """Segments not in `segments` because the trace was full."""
    @property
    def memory_timeline(self) -> dict[str, list[Any]]:
        """Memory timeline columns (empty without [memory]): time_ms, reserved_physical_mb,
        used_mb, reservation_pages:<name> (pages it accounts), resident_pages:<task>."""
    @property
    def control_timeline_every_ticks(self) -> int:
        """Controller ticks per control-timeline row (1 unless a long run thinned it)."""
    @property
    def control_timeline(self) -> dict[str, tuple[str, bytes]]:
        """Control-loop columns (empty without [control]), one row per tick (per
        `control_timeline_every_ticks` ticks in a long run): time_ms, then per
        group max_mb:<g> and high_mb:<g> (NaN when unlimited), usage_mb:<g>, and cumulative PSI totals
        memory_some_us:<g> and io_some_us:<g>. Each is (numpy dtype, little-endian
        bytes), for `numpy.frombuffer`."""
    @property
    def servers(self) -> dict[str, list[Any]]:
        """One row per server of the scheduler hierarchy (empty lists without servers):
        name, parent, kind, cpu, budget_ms, period_ms (None for a level), consumed_ms,
        replenishments, exhaustions, events_delivered, event_ms; and when a server reserves
        memory in the page-level model, memory_reserved_mb and memory_kind (None for a server
        reserving none) and peak_resident_pages."""
    @property
    def server_supply(self) -> dict[str, list[Any]]:
        """Per period of each budgeted server: server, period_start_ms, consumed_ms."""
    @property
    def server_events(self) -> dict[str, list[Any]]:
        """Stretches each server's child-scheduler thread ran delivering events: server,
        cpu, start_ms, end_ms."""
    @property
    def server_exhaustions(self) -> dict[str, list[Any]]:
        """Instants each server's budget ran out: server, cpu, time_ms."""
    @property
    def task_servers(self) -> list[str | None]:
        """Each task's leaf server, in task order (None without servers)."""
    @property
    def waits(self) -> dict[str, list[Any]] | None:
        """Each wait of a job for a resource, a component's stack or SRP's start check:
        task, job, resource, start_ms, end_ms (empty lists unless jobs were recorded; None
        when the scenario declares no resource and no component)."""
    @property
    def waits_left_out(self) -> int:
        """Waits not in `waits` because the trace was full."""
    @property
    def warnings(self) -> list[str]:
        """What the scenario allows but rarely means, one line each naming the key."""

def simulate(
    text: str,
    source_name: str,
    format: str,
    *,
    seed: int | None = None,
    horizon_ms: float | None = None,
    record_jobs: bool = True,
    record_segments: bool = True,
    trace_limit: int | None = None,
    progress: Callable[[float], object] | None = None,
) -> SimOutput:
    """Loads `text` ("toml" or "json"), simulates it and returns the results. `progress` is
    called with the simulated time in ms every so often once the run has taken half a second;
    Ctrl-C (or an exception from `progress`) stops the run and is raised.

    Raises ScenarioError for a scenario that does not load or a bad horizon override."""

def write_csv(path: str, header: list[str], columns: list[tuple[str, bytes, bytes | None, list[str] | None]]) -> None:
    """Writes a CSV with the bytes pandas' `to_csv(index=False, lineterminator="\\n")` writes.
    Each column is (kind, values, mask, labels): "text" (int64 codes into labels, negative for
    missing), "int", "uint", "float", "bool", or "nint" (int64 values and a byte mask)."""

def write_trace_events(
    path: str,
    head: str,
    tail: str,
    segments: tuple[bytes, bytes, bytes, bytes, bytes],
    jobs: tuple[bytes, bytes, bytes, bytes, bytes, bytes, bytes],
    quoted_tasks: list[str],
    quoted_outcomes: list[str],
    horizon_ms: float,
) -> None:
    """Writes the schedule as trace-event JSON: head, one event per segment and per job, tail."""

def analyze(text: str, source_name: str, format: str) -> tuple[str, list[str]]:
    """Loads `text` and runs the schedulability analyses; returns the report as JSON and the
    scenario's warnings."""

def scenario_schema() -> str:
    """The JSON Schema of scenario files, derived from the loader's own structures (pretty JSON
    ending in a newline; `docs/scenario.schema.json` holds the same text)."""

def validate(text: str, source_name: str, format: str) -> str:
    """Loads `text` without running it; returns JSON with scheduler, cpus, tasks, horizon_ms,
    seed and warnings. Raises ScenarioError for a scenario that does not load."""

def measure_memory_ops(iterations: int = 20, pages: int = 4096) -> dict[str, float]:
    """Wall-clock nanoseconds per operation of the memory model's own data structures (not
    kernel cycles), the median over `iterations` fresh machines of `pages` operations each.

    Keys are `"<operation>/<column>"`: operations `alloc` (first touch of a private anonymous
    page), `free` (its frame released when the address space exits), `map` (a second address
    space's first read of a resident shared page), `unmap` (that space exiting); columns
    `global` (no reservation, shared region left to the global LRU), `reservation`
    (reservations, No-SP-Mgmt) and `spc` (reservations with Shared-Page Conservation).
    Raises ValueError if `iterations` is 0 or `pages` is not from 1 to 2**22."""

def fit_exec_vs_stall(stall_ms: list[float], exec_ms: list[float]) -> tuple[float, float, float]:
    """Least-squares line of execution time against stall per period (SARA's Fig. 7):
    (slope, intercept_ms, r_squared)."""

def estimate_bcet_ms(stall_ms: list[float], exec_ms: list[float]) -> float:
    """BCET from profiled jobs: the smallest execution time minus stall."""

def tmem_policy_cost(policy: str, components: int, threads: int, total_units: int, runs: int, seed: int) -> tuple[float, int]:
    """Median wall time (µs) of one run of a TMEM memory scheduler on a seeded synthetic
    observation of that size, and the units its plan moves."""

def pick_offline_limit(profile: list[tuple[int, float]], target_hit_ratio: float) -> int:
    """The smallest profiled limit (bytes) whose hit ratio reaches the target."""

def pick_tmo_threshold(evaluated: list[tuple[float, float]], deadline_ms: float) -> float:
    """The largest PSI threshold (%) whose mean elapsed time stays below the deadline."""

def sara_job_stalls(
    tick_ms: list[float],
    memory_some_us: list[int],
    io_some_us: list[int],
    interval_ms: float,
    start_ms: list[float],
    end_ms: list[float],
    *,
    threshold_pct: int | None = None,
) -> tuple[list[float], list[float]]:
    """SARA's view of each job (`critmem_policy::sara::job_stalls`): from one group's per-tick
    cumulative PSI `some` totals (every tick, in time order) and each job's start and end,
    (stall_ms, severe_share) per job: `s_period` (Eq. 2, the sum of `max(s_mem, s_io)` over the
    ticks whose interval overlaps the job) and the share of those intervals that were severe
    (Definition 1; `threshold_pct` is its n, by default SARA's 90). Raises ValueError for lists
    of different lengths, negative or non-finite times, ticks out of order or totals that fall."""

def schedulers() -> list[tuple[str, str]]:
    """The scheduler kinds a scenario's `[scheduler] kind` can name, as (name, summary) pairs in
    the order the loader lists them."""

def memory_schedulers() -> list[tuple[str, str]]:
    """The built-in memory schedulers a scenario's `[tmem] policy` can name, as (name, summary)
    pairs in the order help texts list them."""

def controllers() -> list[tuple[str, str]]:
    """The controller registry (`critmem_policy::CONTROLLERS`) as (name, summary) pairs, in the
    order help texts list them."""

def mc2_schedulable(scenario: Sequence[str], system_utilization: float, seed: int, first: int, count: int) -> list[int]:
    """How many of task systems `first .. first + count` of a point are schedulable under each
    scheme (`MC2_SCHEMES` order); system `i` comes from `(seed, i)` alone. ValueError names an
    unknown choice or a utilisation outside (0, 64]."""

def mc2_model_parameters() -> list[dict[str, str]]:
    """The MC² interference model's parameters: name, value, unit and source of each."""

def mc2_ipc_cost_us(strategy: str, size_bytes: int) -> tuple[float, float]:
    """A message's worst-case (send, receive) cost in µs under "SBP", "CE" or "CL"."""

def mc2_dma_inflation(level_c_percent: float, bandwidth_mb_s: float, ways: int) -> float:
    """A non-I/O level-A task's worst-case cost over an idle system's when that share of the
    I/O buffers is in level-C banks and the rest in its bank."""
