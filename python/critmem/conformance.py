"""The platform conformance script as a Python controller: `Probe` drives the script every
platform must pass (`critmem_policy::conformance`, the contract of `Platform::apply`) through
the Python bridge, so the checks cover what a Python controller sees and what its actions
do, in the simulator and on real Linux:

    [control]
    controller = "critmem.conformance:Probe"
    config = { report_path = "probe.json" }

It converts each typed observation back to the platforms' form for the script and the
script's actions to typed actions, and writes its verdict to `report_path` (JSON: `finished`,
`ticks`, `violations`) at every tick: the platform may end the run at any time."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path

from critmem import _core
from critmem.controller import Action, Controller, Observation, actions_from_wire, observation_to_wire


class Probe(Controller):
    name = "conformance"

    def __init__(self, report_path: str, interval_ms: float = 5.0) -> None:
        if interval_ms <= 0:
            raise ValueError(f"interval_ms must be positive, got {interval_ms}")
        self.interval_ns = round(interval_ms * 1e6)
        self.report_path = Path(report_path)
        self._probe = _core.ConformanceProbe(self.interval_ns)

    def tick(self, observation: Observation) -> Sequence[Action]:
        actions = actions_from_wire(json.loads(self._probe.tick(json.dumps(observation_to_wire(observation)))))
        finished, ticks, violations = self._probe.verdict()
        # Whole or not at all (a rename): the run may end between any two ticks.
        partial = self.report_path.with_name(self.report_path.name + ".partial")
        partial.write_text(json.dumps({"finished": finished, "ticks": ticks, "violations": violations}))
        os.replace(partial, self.report_path)
        return actions
