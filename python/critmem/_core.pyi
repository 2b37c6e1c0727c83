"""Type stubs for the Rust extension `critmem._core` (crates/py). Checked by stubtest in CI."""

from typing import Any, Final, final

__all__ = ["__version__", "ScenarioError", "SimOutput", "simulate", "analyze"]

__version__: Final[str]

class ScenarioError(ValueError):
    """A scenario that could not be loaded. The message is one line: `file: key: reason`."""

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
    def jobs(self) -> dict[str, list[Any]]:
        """Per-job columns: task, job, release_ms, deadline_ms, demand_ms, executed_ms,
        start_ms, completion_ms, response_ms (None where there is none), tardiness_ms,
        missed, outcome, last_cpu (None if it never ran)."""
    @property
    def segments(self) -> dict[str, list[Any]]:
        """Execution-segment columns: cpu, task, job, start_ms, end_ms."""

def simulate(
    text: str,
    source_name: str,
    format: str,
    *,
    seed: int | None = None,
    horizon_ms: float | None = None,
    record_jobs: bool = True,
    record_segments: bool = True,
) -> SimOutput:
    """Loads `text` ("toml" or "json"), simulates it and returns the results.

    Raises ScenarioError for a scenario that does not load or a bad horizon override."""

def analyze(text: str, source_name: str, format: str) -> str:
    """Loads `text` and runs the schedulability analyses; returns the report as JSON."""
