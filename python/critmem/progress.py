"""How a long computation (a sweep, a reproduction) reports how far it is.

`Progress` is what the computation calls; `QuietProgress` reports nothing; `BarProgress` is a
rich progress bar with the time elapsed and an estimate of the time left, on stderr.
"""

from __future__ import annotations

import sys
from types import TracebackType
from typing import Protocol, Self

__all__ = ["BarProgress", "Progress", "QuietProgress", "SimulatedTimeBar"]


class Progress(Protocol):
    """Where a computation reports how far it is."""

    def start(self, total: int) -> None:
        """The number of steps the whole computation will take."""

    def step(self, description: str) -> None:
        """One step done; `description` says what it was."""


class QuietProgress:
    """Reports nothing."""

    def start(self, total: int) -> None:
        pass

    def step(self, description: str) -> None:
        pass

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        pass


class BarProgress:
    """A rich progress bar on stderr: steps done of the total, time elapsed and an estimate of the
    time left. Use it as a context manager; the bar disappears when the block ends."""

    def __init__(self) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn, TimeRemainingColumn
        from rich.progress import Progress as RichProgress

        self._bar = RichProgress(
            TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
            TextColumn("ETA"), TimeRemainingColumn(),
            console=Console(file=sys.stderr), transient=True,
        )  # fmt: skip
        self._task = self._bar.add_task("starting", total=None)

    def __enter__(self) -> Self:
        self._bar.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self._bar.stop()

    def start(self, total: int) -> None:
        self._bar.update(self._task, total=total, completed=0)

    def step(self, description: str) -> None:
        self._bar.update(self._task, advance=1, description=description)


class SimulatedTimeBar:
    """A rich bar on stderr of a simulation's progress in simulated ms against its horizon,
    with the time elapsed and left. Pass it as a run's `progress` callback inside its `with`
    block; the core calls it only once a run has taken half a second, so a short run shows
    nothing, and the bar disappears when the block ends."""

    def __init__(self, horizon_ms: float | None) -> None:
        self._horizon_ms = horizon_ms
        self._bar: object | None = None

    def __call__(self, now_ms: float) -> None:
        from rich.progress import Progress as RichProgress

        if self._bar is None:
            from rich.console import Console
            from rich.progress import BarColumn, TextColumn, TimeElapsedColumn, TimeRemainingColumn

            bar = RichProgress(
                TextColumn("simulating"), BarColumn(), TextColumn("{task.completed:,.0f} of {task.total:,.0f} ms"),
                TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(),
                console=Console(file=sys.stderr), transient=True,
            )  # fmt: skip
            self._task = bar.add_task("simulating", total=self._horizon_ms)
            bar.start()
            self._bar = bar
        assert isinstance(self._bar, RichProgress)
        self._bar.update(self._task, completed=now_ms)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        from rich.progress import Progress as RichProgress

        if isinstance(self._bar, RichProgress):
            self._bar.stop()
