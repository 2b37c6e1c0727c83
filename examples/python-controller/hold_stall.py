"""A memory controller in Python: it holds the soft real-time groups' memory stall below a
target by taking memory from the non-real-time groups while the stall is above it, and giving
it back, a step per tick, while the stall stays under half of it."""

from __future__ import annotations

from collections.abc import Sequence

from critmem.controller import Action, Controller, Observation, SetMax

MIB = 1 << 20


class HoldStall(Controller):
    def __init__(self, target_pct: float = 5.0, step_mb: float = 4.0, interval_ms: float = 5.0) -> None:
        if not 0.0 < target_pct < 100.0:
            raise ValueError(f"target_pct must be between 0 and 100, got {target_pct}")
        if step_mb <= 0 or interval_ms <= 0:
            raise ValueError("step_mb and interval_ms must be positive")
        self.target_pct = target_pct
        self.step_bytes = int(step_mb * MIB)
        self.interval_ns = int(interval_ms * 1e6)
        self.previous: tuple[int, list[int]] | None = None  # (time, each group's stall total)

    def tick(self, observation: Observation) -> Sequence[Action]:
        now_ns, groups = observation.now_ns, observation.groups
        stall_us = [g.stall.memory_some_us for g in groups]
        previous, self.previous = self.previous, (now_ns, stall_us)
        if previous is None or now_ns <= previous[0]:
            return []
        elapsed_us = (now_ns - previous[0]) / 1000
        # The worst soft real-time group's share of this interval spent stalled on memory.
        worst_pct = max(
            (100.0 * (stall_us[i] - previous[1][i]) / elapsed_us for i, g in enumerate(groups) if g.role == "soft-rt"),
            default=0.0,
        )
        actions: list[Action] = []
        for i, g in enumerate(groups):
            if g.role != "non-rt":
                continue
            limit = g.knobs.max_bytes if g.knobs.max_bytes is not None else observation.total_memory_bytes
            if worst_pct > self.target_pct:
                wanted = max(g.floor_bytes, min(limit, g.usage_bytes) - self.step_bytes)
            elif worst_pct < self.target_pct / 2:
                wanted = min(observation.total_memory_bytes, limit + self.step_bytes)
            else:
                continue
            if wanted != limit:
                actions.append(SetMax(i, wanted))
        return actions
