"""Earliest deadline first, written in Python: on every CPU it can, the ready jobs with the
earliest (inherited) absolute deadlines run; a job that keeps running keeps its CPU, the others
take the free CPUs in ascending order. Ties go to the job released first (`seq`). These are
the built-in `edf` and `gedf`'s decisions, job for job."""

from __future__ import annotations

import heapq
from collections.abc import Sequence

import critmem


class Edf(critmem.Scheduler):
    name = "python-edf"

    def __init__(self) -> None:
        # Each ready job's priority: (deadline, release sequence number); smaller runs first.
        self.ready: dict[int, tuple[int, int]] = {}

    def on_ready(self, job: critmem.Job) -> None:
        self.ready[job.key] = (job.effective_deadline_ns, job.seq)

    def on_remove(self, job_key: int) -> None:
        self.ready.pop(job_key, None)

    def choose(self, now_ns: int, current: Sequence[int | None]) -> list[int | None]:
        top = heapq.nsmallest(self.cpus, self.ready, key=self.ready.__getitem__)
        chosen = set(top)
        # A chosen job that runs stays on its CPU, so nothing migrates needlessly.
        assign = [job if job in chosen else None for job in current]
        placed = {job for job in assign if job is not None}
        free = (cpu for cpu, job in enumerate(assign) if job is None)
        for job in top:
            if job not in placed:
                assign[next(free)] = job
        return assign
