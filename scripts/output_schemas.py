#!/usr/bin/env python3
"""Writes the JSON Schemas (draft 2020-12) of what critmem prints with `--json` to
python/critmem/schemas/output/NAME.schema.json, from the definitions below.

    .venv/bin/python scripts/output_schemas.py          # write them
    .venv/bin/python scripts/output_schemas.py --check  # exit 1 if a file differs

The definitions follow the code that prints each object: the Rust summaries (crates/core's
`SimResult::to_json` and its sections, crates/analysis's `AnalysisReport`, crates/linux's
`RunSummary`), the reproductions' `headline` functions and `critmem sweep`'s summary
(python/critmem/cli/sweep.py). A key always printed is
`required`; a section printed only when the scenario declares what it describes is not.
tests/test_output_schemas.py checks the files against these definitions and every bundled
example's and quick reproduction's output against the files.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

Schema = dict[str, Any]

OUT_DIR = Path(__file__).resolve().parent.parent / "python" / "critmem" / "schemas" / "output"
DRAFT = "https://json-schema.org/draft/2020-12/schema"
ID_BASE = "urn:critmem:schema:output:"


# ---------------------------------------------------------------------------------------
# Building blocks


def obj(description: str | None, required: dict[str, Schema], optional: dict[str, Schema] | None = None) -> Schema:
    """An object with exactly these keys: `required` always present, `optional` sometimes, in
    the order the output prints them (required first only where the output does so too)."""
    properties = {**required, **(optional or {})}
    out: Schema = {"type": "object"}
    if description:
        out["description"] = description
    out["properties"] = properties
    out["required"] = list(required)
    out["additionalProperties"] = False
    return out


def ordered(description: str | None, keys: list[tuple[str, Schema, bool]]) -> Schema:
    """An object with exactly these keys in print order: (key, schema, always present)."""
    out = obj(description, {k: s for k, s, _ in keys})
    out["required"] = [k for k, _, always in keys if always]
    return out


def mapping(values: Schema, description: str, *, keys: Schema | None = None) -> Schema:
    """An object whose keys are data (names from the scenario or the run), each value `values`."""
    out: Schema = {"type": "object", "description": description, "additionalProperties": values}
    if keys is not None:
        out["propertyNames"] = keys
    return out


def arr(items: Schema, description: str | None = None, **extra: Any) -> Schema:
    out: Schema = {"type": "array"}
    if description:
        out["description"] = description
    out["items"] = items
    out.update(extra)
    return out


def count(description: str | None = None) -> Schema:
    out: Schema = {"type": "integer", "minimum": 0}
    if description:
        out["description"] = description
    return out


def integer(description: str | None = None) -> Schema:
    out: Schema = {"type": "integer"}
    if description:
        out["description"] = description
    return out


def num(description: str | None = None, *, minimum: float | None = 0, maximum: float | None = None) -> Schema:
    """A number, at least `minimum` (default 0; None: any sign)."""
    out: Schema = {"type": "number"}
    if description:
        out["description"] = description
    if minimum is not None:
        out["minimum"] = minimum
    if maximum is not None:
        out["maximum"] = maximum
    return out


def ratio(description: str | None = None) -> Schema:
    return num(description, minimum=0, maximum=1)


def string(description: str | None = None, **extra: Any) -> Schema:
    out: Schema = {"type": "string"}
    if description:
        out["description"] = description
    out.update(extra)
    return out


def boolean(description: str | None = None) -> Schema:
    out: Schema = {"type": "boolean"}
    if description:
        out["description"] = description
    return out


def enum(values: list[str], description: str | None = None) -> Schema:
    out: Schema = {"type": "string"}
    if description:
        out["description"] = description
    out["enum"] = values
    return out


def const(value: Any, description: str | None = None) -> Schema:
    out: Schema = {"description": description} if description else {}
    out["const"] = value
    return out


def nullable(schema: Schema, description: str | None = None) -> Schema:
    """`schema` or null."""
    out = dict(schema)
    if description:
        out["description"] = description
    t = out["type"]
    if isinstance(t, str):
        out["type"] = [t, "null"]
    if "enum" in out and None not in out["enum"]:
        out["enum"] = [*out["enum"], None]
    return out


def pair(items: Schema, description: str) -> Schema:
    return arr(items, description, minItems=2, maxItems=2)


def document(name: str, title: str, description: str, body: Schema, defs: dict[str, Schema] | None = None) -> Schema:
    out: Schema = {"$schema": DRAFT, "$id": f"{ID_BASE}{name}", "title": title, "description": description}
    out.update(body)
    if defs:
        out["$defs"] = defs
    return out


def ref(name: str, description: str | None = None) -> Schema:
    out: Schema = {"$ref": f"#/$defs/{name}"}
    if description:
        out["description"] = description
    return out


CRITICALITY = enum(["A", "B", "C", "D"], "MC² criticality level: A and B hard real-time, C soft real-time, D best-effort")
VERDICT = enum(["schedulable", "not_schedulable", "bounded_tardiness", "unbounded_tardiness", "unknown"])
TASK_NAME = string("the task's name (`[[task]] name`)")
GROUP_NAME = string("the group's name (`[[group]] name`)")


def job_figures(*, nullable_all: bool) -> dict[str, Schema]:
    """A task's job figures (crates/core `JobFigures`), in print order. On Linux every one is
    null for a task whose jobs the run did not count."""
    figures: dict[str, Schema] = {
        "jobs": count("jobs released"),
        "completed": count("jobs that completed (on time or late)"),
        "deadline_misses": count("judged jobs that missed their deadline: late, aborted, killed or unfinished past it"),
        "aborted": count("jobs aborted at their deadline (overrun = abort), including those a controller dropped"),
        "dropped": count("of the aborted jobs, those a memory controller dropped"),
        "killed": count("jobs killed out of memory (always 0 on Linux)"),
        "skipped": count("releases skipped because the previous job was unfinished (overrun = skip; always 0 on Linux)"),
        "pending": count("jobs unfinished at the end with their deadline still ahead: not judged"),
        "hit_ratio": nullable(ratio(), "share of judged jobs (all but pending) that met their deadline; null when none was judged"),
        "max_response_ms": nullable(num(), "longest response time (completion − release), ms; null when no job completed"),
        "mean_response_ms": nullable(num(), "mean response time of completed jobs, ms; null when no job completed"),
        "max_tardiness_ms": num("longest lateness past the deadline of a job that missed, ms (0 without misses)"),
        "throughput_per_s": num("completed jobs per second of the run (a non-real-time task's work units per second)"),
    }
    if nullable_all:
        figures = {k: nullable(v) for k, v in figures.items()}
    return figures


# ---------------------------------------------------------------------------------------
# critmem run X --json (the simulator)


def run_schema() -> Schema:
    task = ordered(
        "one task's job figures over the run",
        [
            ("name", TASK_NAME, True),
            ("criticality", CRITICALITY, True),
            ("cpu", nullable(count(), "the CPU a partitioned scheduler bound the task to; null for a global or hierarchical one"), True),
            *[(k, v, True) for k, v in job_figures(nullable_all=False).items()],
        ],
    )
    reservation = obj(
        None,
        {
            "name": string("the reservation's (or limit group's) name"),
            "size_pages": count("its size, pages"),
            "charged_pages": count("pages charged to it at the end"),
            "frames_held": count("physical frames it held at the end"),
            "evictions": count("pages it evicted to stay within its size"),
            "spc_unmaps": count("shared pages unmapped under SPC"),
            "writebacks": count("dirty pages written back to swap"),
        },
    )
    memory = ordered(
        "page-level memory over the run; present only when the scenario declares `[memory]`",
        [
            ("page_bytes", count("page size, bytes"), True),
            ("total_frames", count("physical frames of the machine"), True),
            ("layout", enum(["mc2"], "the physical layout (`[memory] layout`); absent for the flat layout"), False),
            (
                "banks",
                arr(
                    obj(
                        "one DRAM bank of the MC² layout",
                        {
                            "bank": count("the bank's index"),
                            "owner": string("who owns it: `core N` or `level C`", pattern="^(core [0-9]+|level C)$"),
                            "frames": count("its frames"),
                            "used_frames": count("frames in use at the end"),
                        },
                    ),
                    "DRAM banks of the MC² layout; absent for the flat layout",
                ),
                False,
            ),
            ("swap", string("the swap device's name (`[memory] swap`, e.g. hdd, slow-ssd, fast-ssd)"), True),
            (
                "tasks",
                arr(
                    ordered(
                        "one task's memory",
                        [
                            ("name", TASK_NAME, True),
                            ("group", string("the group its pages are charged to"), True),
                            ("reservation", nullable(string(), "its memory reservation (`reservation`), or null"), True),
                            ("minor_faults", count("page faults served without I/O"), True),
                            ("major_faults", count("page faults that read from swap or a file"), True),
                            ("pages_swapped_in", count("pages read in from swap"), True),
                            ("pages_swapped_out", count("pages written out to swap"), True),
                            ("resident_pages", count("pages resident at the end"), True),
                            ("peak_resident_pages", count("most pages resident at once"), True),
                            ("fault_wait_ms", num("time its jobs waited for swap I/O on faults, ms"), True),
                            ("oom_kills", count("jobs killed out of memory"), True),
                            (
                                "shared_regions",
                                arr(
                                    obj(
                                        "distinct pages of a shared region the task touched per ended job",
                                        {
                                            "region": string("the region's name (`[[region]] name`)"),
                                            "jobs_ended": count("jobs that ended (any outcome)"),
                                            "mean_job_pages": num("mean distinct pages per job (the paper's Avg(S)), pages"),
                                            "largest_job_pages": count("most distinct pages one job touched, pages"),
                                        },
                                    ),
                                    "shared regions it touched; absent when none",
                                ),
                                False,
                            ),
                            ("bank_frames", arr(count(), "MC² layout: frames holding its pages, per bank; absent otherwise"), False),
                        ],
                    ),
                    "every task, in scenario order",
                ),
                True,
            ),
            (
                "groups",
                arr(
                    obj(
                        "one group's pressure stall totals (PSI) at the end",
                        {
                            "name": GROUP_NAME,
                            "memory_some_us": count("time at least one task stalled on memory, µs"),
                            "memory_full_us": count("time all non-idle tasks stalled on memory, µs"),
                            "io_some_us": count("time at least one task stalled on I/O, µs"),
                            "io_full_us": count("time all non-idle tasks stalled on I/O, µs"),
                        },
                    ),
                    "every group",
                ),
                True,
            ),
            ("reservations", arr(reservation, "every `[[reservation]]`"), True),
            ("limit_groups", arr(reservation, "groups with a memory limit, as reservations; absent when none"), False),
            ("reserved_physical_mb", num("physical memory the reservations set aside, MiB"), True),
            ("minor_faults", count("faults of the whole machine served without I/O: every task's and component's"), True),
            ("major_faults", count("faults of the whole machine that waited for swap or file I/O: every task's and component's"), True),
            ("global_evictions", count("pages the global LRU evicted (not those a reservation or group evicted from its own)"), True),
            (
                "auto_decisions",
                arr(
                    obj(
                        "the share policy `auto` chose for a shared region",
                        {
                            "region": string("the region's name"),
                            "chosen": enum(["global", "private", "first-touch", "spc", "spel"], "the policy chosen"),
                            "max_pages": count("the most pages one sharer touches, pages"),
                            "avg_pages": num("the sharers' mean pages, pages"),
                            "sharers": count("tasks sharing it"),
                        },
                    ),
                    "regions with `share = auto`",
                ),
                True,
            ),
            (
                "components",
                arr(
                    obj(
                        "a component's own memory: the faults its invocations took in it, whoever called",
                        {
                            "name": string("the component's name"),
                            "reservation": nullable(string(), "its memory reservation, or null"),
                            "minor_faults": count(),
                            "major_faults": count(),
                            "pages_swapped_in": count(),
                            "pages_swapped_out": count(),
                            "resident_pages": count("pages resident at the end"),
                            "peak_resident_pages": count("most pages resident at once"),
                        },
                    ),
                    "components with memory of their own; absent when none has any",
                ),
                False,
            ),
        ],
    )
    control = obj(
        "the memory controller's loop over the run; present only when the scenario declares `[control]`",
        {
            "controller": string("the controller's name (`critmem controllers`)"),
            "interval_ms": num("the control interval, ms"),
            "ticks": count("control ticks run"),
            "dropped_jobs": count("jobs aborted at the controller's request (also in each task's dropped)"),
            "ignored_actions": count("actions naming a group or job that does not exist (ignored)"),
            "groups": arr(
                obj(
                    "a group's limits over the run",
                    {
                        "name": GROUP_NAME,
                        "final_max_mb": nullable(num(), "its memory limit at the end, MiB; null: unlimited"),
                        "lowest_max_mb": nullable(num(), "its lowest memory limit, MiB; null: never limited"),
                        "peak_usage_mb": num("its most memory in use, MiB"),
                    },
                    {"reclaimed_mb": num("memory the controller's reclaims evicted, MiB; present only when they evicted some")},
                ),
                "every `[[group]]`, in file order",
            ),
        },
    )
    server = ordered(
        "one server of the scheduler hierarchy",
        [
            ("name", string("the server's name (`[[scheduler.server]] name`, or an MC² level)"), True),
            ("parent", string("its parent server, `root`, or an MC² level such as `level C`"), True),
            ("kind", enum(["deferrable", "polling", "level"]), True),
            ("cpus", arr(count(), "the CPUs it runs on"), True),
            ("budget_ms", nullable(num(), "budget Θ per period, ms; null for a level"), True),
            ("period_ms", nullable(num(), "replenishment period Π, ms; null for a level"), True),
            ("consumed_ms", num("CPU time it consumed, ms"), True),
            ("replenishments", count("budget replenishments"), True),
            ("exhaustions", count("times its budget ran out"), True),
            ("events_delivered", count("events its child-scheduler thread delivered"), True),
            ("event_ms", num("time its child-scheduler thread ran delivering events, ms"), True),
            (
                "memory_reserved_mb",
                nullable(
                    num(),
                    "its memory reservation (`reserve.memory_mib`), MiB; null: it reserves none. Only with `[memory]` and a server memory reservation in the scenario",
                ),
                False,
            ),
            (
                "memory_kind",
                nullable(enum(["hard", "soft"]), "its reservation's kind; null without one. Present with memory_reserved_mb"),
                False,
            ),
            ("peak_resident_pages", count("most pages its subtree's tasks held resident at once. Present with memory_reserved_mb"), False),
        ],
    )
    component = obj(
        "one `[[component]]` over the run",
        {
            "name": string("the component's name"),
            "stacks": nullable(count(), "its execution stacks; null: one per invocation"),
            "stack_wait": enum(["inherit", "block"], "how an invocation waits for a stack"),
            "invocations": count(),
            "peak_concurrent_invocations": count(),
            "stack_waits": count("invocations that waited for a stack"),
            "longest_stack_wait_ms": num("ms"),
            "total_stack_wait_ms": num("ms"),
        },
    )
    tmem = obj(
        "TMEM's transient memory over the run; present only when the scenario declares `[tmem]`",
        {
            "policy": string("the memory scheduler (`[tmem] policy`)"),
            "wait": enum(["inherit", "block"], "how a request waits (the table's setting; components may set their own)"),
            "period_ns": count("the memory scheduler's period, ns"),
            "total_units": nullable(count(), "units of the pool and the caches together; null: no limit"),
            "min_units": count("sum of the caches' minimums, units"),
            "runs": count("runs of the memory scheduler"),
            "peak_allocated_units": count("most units in caches at once"),
            "allocated_unit_us": count("units in caches integrated over the run, unit·µs"),
            "cbuf_mappings": count("passed cbufs mapped into a component"),
            "cbuf_unmappings": count("cbuf mappings removed with their unit"),
            "caches": arr(
                obj(
                    "one managed cache",
                    {
                        "component": string("the component owning it"),
                        "kind": enum(["stack", "cbuf"]),
                        "min_units": count(),
                        "peak_allocated_units": count(),
                        "final_allocated_units": count(),
                        "final_desired_units": nullable(count(), "δ after the last run, units; null: no limit"),
                        "gets": count("units handed out"),
                        "grows": count("units taken from the pool to serve a request"),
                        "waits": count("requests that waited"),
                        "total_wait_ns": count("ns"),
                        "longest_wait_ns": count("ns"),
                        "removed_units": count("units given back to the pool"),
                        "longest_hold_ns": count("longest time a unit was held, from grant to put, ns"),
                        "longest_shrink_lag_ns": count(
                            "longest time from a run that left the cache above δ to the put that brought it down, ns"
                        ),
                    },
                ),
                "every managed cache",
            ),
            "timeline": arr(
                obj(
                    "one run of the memory scheduler",
                    {
                        "time_ns": count("simulated time, ns"),
                        "allocated_units": count("units in caches after the run, free or held"),
                        "in_use_units": count(),
                        "pool_free_units": nullable(count(), "units in the pool; null: no limit"),
                    },
                ),
                "one point per run",
            ),
        },
    )
    io = obj(
        "the I/O device over the run: packets by port, bytes by subsystem; present only when the scenario declares `[io]`",
        {
            "arrivals": count("packets that arrived"),
            "received": count("packets delivered to a task"),
            "dropped_unbound": count("packets to a port no task is bound to"),
            "dropped_ring_full": count("packets dropped on a full ring"),
            "bytes_received": count("bytes"),
            "bytes_sent": count("bytes"),
            "ports": arr(
                obj(
                    "one destination port",
                    {
                        "port": integer("the port number"),
                        "task": nullable(string(), "the task bound to it; null: unbound"),
                        "subsystem": nullable(string(), "the bound task's subsystem; null: unbound"),
                        "depth": count("the subsystem's depth in the hierarchy (0: unbound or root)"),
                        "arrivals": count(),
                        "received": count(),
                        "dropped": count(),
                        "bytes_received": count("bytes"),
                        "mean_latency_us": nullable(
                            num(), "mean time from a packet's arrival to the start of the job handling it, µs; null: none started"
                        ),
                        "max_latency_us": nullable(num(), "µs; null: none started"),
                        "unfinished": count("packets whose job had not ended at the horizon"),
                    },
                ),
            ),
            "subsystems": arr(
                obj(
                    "one subsystem: what it received and sent, its bound bandwidth and its subtree's usage",
                    {
                        "name": string(),
                        "parent": string("its parent, or `root`"),
                        "depth": count(),
                        "packets_received": count(),
                        "bytes_received": count("bytes"),
                        "direct_activations": count("jobs of its event threads made eligible with no child-scheduler event"),
                        "bandwidth_bytes_per_s": nullable(count(), "its bound transmit bandwidth, bytes/s; null: unbounded"),
                        "messages_sent": count(),
                        "bytes_sent": count("bytes"),
                        "messages_delayed": count("messages that waited for its bandwidth bucket"),
                        "mean_transmit_delay_us": nullable(
                            num(), "mean wait for the bandwidth bucket per message sent, µs; null: nothing sent"
                        ),
                        "max_transmit_delay_us": num("µs"),
                        "messages_queued": count("messages still waiting at the horizon"),
                        "subtree_bytes_received": count("bytes"),
                        "subtree_bytes_sent": count("bytes"),
                    },
                ),
            ),
        },
    )
    traces = ordered(
        "how much of the job and segment traces the run kept; present only when the run recorded traces (`--out` without `--no-traces`)",
        [
            ("limit", count("most entries each trace keeps (the first to end)"), True),
            ("jobs", count("job records kept"), True),
            ("jobs_left_out", count("jobs that ended after the trace was full"), True),
            ("segments", count("execution segments kept"), True),
            ("segments_left_out", count(), True),
            ("waits", count("resource and stack waits kept; only with resources or components"), False),
            ("waits_left_out", count("only with resources or components"), False),
        ],
    )
    body = ordered(
        None,
        [
            ("scenario", string("the scenario as named on the command line (its path)"), True),
            ("scheduler", string("the scheduler's kind (`[scheduler] kind`: rm, edf, gedf, pfp, cyclic, mc2, …)", minLength=1), True),
            ("cpus", count("CPUs of the simulated machine"), True),
            ("horizon_ms", num("simulated time, ms"), True),
            ("seed", count("the run's random seed"), True),
            ("tasks", arr(task, "every task, in scenario order"), True),
            ("memory", memory, False),
            ("control", control, False),
            ("servers", arr(server, "present only when the scenario declares servers (`[[scheduler.server]]`)", minItems=1), False),
            ("components", arr(component, "present only when the scenario declares `[[component]]`s", minItems=1), False),
            ("tmem", tmem, False),
            ("io", io, False),
            ("traces", traces, False),
        ],
    )
    return document(
        "run",
        "critmem run --json",
        "The summary of one simulated run (`critmem run FILE --json`, summary.json of `--out`, "
        "`critmem.run(...).to_json()`). Sections other than the run and its tasks appear only when the "
        "scenario declares what they describe. Times are in the unit their key names (_ms, _us, _ns).",
        body,
    )


# ---------------------------------------------------------------------------------------
# critmem analyze X --json


def analyze_schema() -> Schema:
    test = obj(
        "one test's conclusion for one CPU or the whole machine",
        {
            "name": string("the test (e.g. fp-rta, edf-utilization, gedf-tardiness, cyclic-supply, hierarchy, mc2-level-c)"),
            "cpu": nullable(count(), "the CPU it analysed; null: the whole machine"),
            "verdict": VERDICT,
            "detail": string("one sentence: the result and the assumptions it rests on"),
        },
    )
    task = obj(
        "per-task figures",
        {
            "name": TASK_NAME,
            "cpu": nullable(count(), "the CPU the task runs on: its partition CPU, 0 on a one-CPU machine, null otherwise"),
            "utilization": num("WCET / period (suspensions not included)"),
            "wcet_ms": num("ms"),
            "period_ms": num("period or minimum inter-arrival time, ms"),
            "deadline_ms": num("relative deadline, ms"),
            "priority_rank": nullable(count(), "fixed-priority rank the simulator uses (0 = highest); null for dynamic priorities"),
            "response_time_ms": nullable(
                num(),
                "worst-case response time (exact or a bound, per the test's detail), ms; null when the test gives none or the task can miss",
            ),
            "schedulable": nullable(boolean(), "true: never misses; false: can miss; null: not decided per task"),
            "tardiness_bound_ms": nullable(num(), "upper bound on lateness past the deadline (global EDF, implicit deadlines), ms"),
            "criticality": CRITICALITY,
            "suspension_ms": num("total self-suspension per job, counted as execution by the tests, ms"),
        },
    )
    resources = obj(
        "shared resources and each task's blocking; present only when the scenario declares `[[resource]]`s",
        {
            "resources": arr(
                obj(
                    "one `[[resource]]` as the analysis sees it",
                    {
                        "name": string(),
                        "units": count(),
                        "protocol": enum(["none", "pip", "srp"]),
                        "users": arr(TASK_NAME, "tasks whose programs lock it, in task order"),
                    },
                )
            ),
            "tasks": arr(
                obj(
                    "a task's critical sections and blocking term",
                    {
                        "name": TASK_NAME,
                        "sections": arr(
                            obj(
                                "one critical section of the task's program",
                                {
                                    "resource": string(),
                                    "units": count(),
                                    "duration_ms": num("how long the units can be held, ms"),
                                    "within": nullable(string(), "the resource of the section it is nested in, or null"),
                                },
                            )
                        ),
                        "blocking_ms": nullable(
                            num(),
                            "the longest time lower-priority (or lower-level) jobs can delay a job, ms; null: no bound is known (see note)",
                        ),
                        "note": string("why there is no bound, or what the term rests on; empty when there is nothing to say"),
                    },
                ),
                "one entry per task, in task order",
            ),
        },
    )
    server = ordered(
        "one server of the scheduler hierarchy",
        [
            ("name", string(), True),
            ("parent", string("the parent server, or `root`"), True),
            ("cpu", count(), True),
            ("kind", enum(["deferrable", "polling", "level"]), True),
            ("policy", string("how it orders its children (fp, rm, edf, …)"), True),
            ("budget_ms", nullable(num(), "Θ, ms; null for a level"), True),
            ("period_ms", nullable(num(), "Π, ms; null for a level"), True),
            (
                "response_ms",
                nullable(
                    num(),
                    "worst response of its budget as a task on its parent's supply, ms; null if not within its period, or for a level",
                ),
                True,
            ),
            ("guaranteed_budget_ms", nullable(num(), "budget it surely gets every period while it has work, ms"), True),
            (
                "supply_budget_ms",
                nullable(num(), "its children see at least this much in every supply_period_ms, ms; null: nothing guaranteed, or a level"),
                True,
            ),
            ("supply_period_ms", nullable(num(), "ms"), True),
            (
                "supply_blackout_ms",
                nullable(num(), "the longest stretch its children may go without supply while they have work, ms"),
                True,
            ),
            (
                "backlogged_share",
                nullable(
                    ratio(),
                    "its long-run CPU share when every server under the root is backlogged (top-level servers under an fp root only)",
                ),
                True,
            ),
            (
                "verdict",
                enum(["schedulable", "unknown"], "schedulable: its whole budget every period; unknown: only guaranteed_budget_ms"),
                True,
            ),
            ("detail", string(), True),
            ("memory_reserved_mb", num("its memory reservation (`reserve.memory_mib`), MiB; absent for a server reserving none"), False),
            ("memory_kind", enum(["hard", "soft"], "its memory reservation's kind; absent for a server reserving none"), False),
        ],
    )
    body = ordered(
        None,
        [
            ("scenario", string("the scenario as named on the command line"), True),
            ("scheduler", string("the scheduler's kind", minLength=1), True),
            ("cpus", count("CPUs of the machine"), True),
            ("total_utilization", num("Σ WCET / period over all tasks"), True),
            ("verdict", ref("verdict", "the tests' combined conclusion"), True),
            ("tests", arr(test, "every test that applied"), True),
            ("tasks", arr(task, "every task, in scenario order"), True),
            ("resources", resources, False),
            ("servers", arr(server, "present only when the scenario declares servers", minItems=1), False),
            (
                "not_covered",
                arr(string(), "what the scenario runs that no test models, one line each; the verdicts hold only for what is modelled"),
                True,
            ),
        ],
    )
    test["properties"]["verdict"] = ref("verdict")
    return document(
        "analyze",
        "critmem analyze --json",
        "The schedulability report of a scenario (`critmem analyze FILE --json`, "
        "`critmem.analyze(...).to_json()`). Every verdict other than `unknown` is a proof under the "
        "sporadic task model. Times are milliseconds.",
        body,
        {"verdict": VERDICT},
    )


# ---------------------------------------------------------------------------------------
# critmem run X --platform linux --json


def linux_run_schema() -> Schema:
    task = ordered(
        "one task: the simulator's per-task fields where they mean the same, and what only a real machine has",
        [
            ("name", TASK_NAME, True),
            ("criticality", CRITICALITY, True),
            ("cpu", const(None, "always null: Linux does not pin a task to a CPU"), True),
            ("group", GROUP_NAME, True),
            (
                "worker",
                nullable(enum(["critmem-srt-worker", "critmem-nrt-worker"]), "the shipped worker that ran the task; null for a command"),
                True,
            ),
            ("command", nullable(arr(string()), "the scenario's command that ran the task; null for a shipped worker"), True),
            ("reports_jobs", boolean("whether the task reports its jobs on the job socket"), True),
            *[(k, v, True) for k, v in job_figures(nullable_all=True).items()],
            ("verified_mib", nullable(count(), "a throughput worker's MiB read and verified; null otherwise"), True),
            ("verified_mib_per_s", nullable(num(), "the same per second, MiB/s"), True),
            (
                "work_units",
                nullable(count(), "a command's last count in its progress file (CRITMEM_PROGRESS_FILE); null when it wrote none"),
                True,
            ),
            ("work_units_per_s", nullable(num(), "the same per second of the time it ran"), True),
            ("checksum_failures", nullable(count(), "a shipped worker's pages whose contents changed under it; null for a command"), True),
            ("exit_code", nullable(integer(), "the process's exit code, if it exited"), True),
            ("exit_signal", nullable(integer(), "the signal that ended the process, if one did"), True),
            ("exited_early_s", nullable(num(), "when the process exited by itself before the end of the run, s"), True),
            (
                "stopped_by",
                nullable(enum(["SIGTERM", "SIGKILL"]), "what ended a command still running at the end (SIGKILL after the grace period)"),
                True,
            ),
        ],
    )
    job = obj(
        "one job of a counted task; times in ms since the run started (the control loop's first tick), so a job released just before has a negative release",
        {
            "task": TASK_NAME,
            "job": count("the job's number as its process reported it"),
            "release_ms": nullable(num(minimum=None), "null for a completion or drop whose release report never arrived"),
            "deadline_ms": nullable(num(minimum=None), "absolute deadline, ms"),
            "start_ms": nullable(num(minimum=None), "when it could start: its release, or the end of the job before it if later"),
            "completion_ms": nullable(num(minimum=None)),
            "drop_ms": nullable(num(minimum=None)),
            "response_ms": nullable(num(), "completion − release, ms"),
            "tardiness_ms": nullable(
                num(),
                "completion − deadline, 0 if met; for an unfinished job the end of the run − deadline; 0 for a pending one; null for a dropped job or an unknown deadline",
            ),
            "missed": boolean(),
            "outcome": enum(["completed", "dropped", "unfinished", "pending"]),
            "stall_ms": nullable(num(), "SARA's Eq. 2 s_period from the group's PSI over the control intervals the job ran in, ms"),
            "cpu_ms": nullable(
                num(), "CPU time the job's group used over those intervals, ms; null where the kernel gives no per-group cpu.stat"
            ),
            "cpu_wait_ms": nullable(num(), "time the group waited for a CPU (cpu.pressure some) over those intervals, ms"),
        },
    )
    group = obj(
        "one group: its PSI totals at the end and the jobs its workloads reported",
        {
            "name": GROUP_NAME,
            "memory_some_us": count("µs"),
            "memory_full_us": count("µs"),
            "io_some_us": count("µs"),
            "io_full_us": count("µs"),
            "cpu_some_us": count("time some task of the group waited for a CPU (cpu.pressure some), µs"),
            "jobs_reported": count(),
            "jobs_completed": count(),
            "jobs_dropped": count(),
            "jobs_pending": count(),
            "deadline_hits": count("completed by their deadline"),
            "deadline_misses": count(),
        },
    )
    sample = obj(
        "every group's usage and limits at one tick",
        {
            "t_ms": num("ms since the run started"),
            "groups": arr(
                obj(
                    "one group, in the order of memory.groups",
                    {
                        "usage_bytes": count("bytes"),
                        "max_bytes": nullable(count(), "memory.max, bytes; null: no limit"),
                        "high_bytes": nullable(count(), "memory.high, bytes; null: no limit"),
                        "memory_some_us": count("PSI memory some total so far, µs"),
                        "io_some_us": count("PSI io some total so far, µs"),
                        "cpu_some_us": count("PSI cpu some total so far, µs"),
                        "cpu_usage_us": count("CPU time the group used so far, µs"),
                        "cpu_millicpus": nullable(count(), "CPU limit in force, thousandths of one CPU; null: none"),
                        "io_read_bytes_per_s": nullable(count(), "swap-disk read limit in force, bytes/s; null: none"),
                        "io_write_bytes_per_s": nullable(count(), "swap-disk write limit in force, bytes/s; null: none"),
                    },
                )
            ),
            "work_units": arr(
                nullable(count()),
                "per task, in the order of tasks: a command's progress count so far (null before it wrote one, and for every other task)",
            ),
        },
    )
    control = obj(
        "the control loop's run",
        {
            "interval_ms": num("the control interval, ms"),
            "ticks": count(),
            "tick_cost_mean_us": num("wall time from a tick's observation to the end of its apply, mean, µs"),
            "tick_cost_p99_us": num("the same, 99th percentile, µs"),
            "tick_cpu_mean_us": num("CPU time the loop's thread used per tick, mean, µs"),
            "writes_ok": count("limit writes the kernel accepted"),
            "writes_failed": count("limit writes the kernel refused"),
            "write_cpu_ms": num("CPU time the writer threads used in limit writes (mostly the kernel's reclaim), ms"),
            "oom_rescues": count(),
            "drops_requested": count("job drops the controller asked for"),
            "leftover_processes_killed": count("processes left in the run's cgroups at the end, killed"),
            "restored_files": count("cgroup files restored to their value before the run"),
            "removed_dirs": count("cgroup directories removed"),
            "timeline": arr(sample, "one sample per tick"),
        },
    )
    body = ordered(
        None,
        [
            ("scenario", string("the scenario as named on the command line"), True),
            ("platform", const("linux"), True),
            ("scheduler", const("linux", "the kernel schedules the tasks"), True),
            ("cpus", count("CPUs the machine offers the run"), True),
            ("horizon_ms", num("how long the run lasted, ms"), True),
            ("seed", count("the scenario's seed, passed to the shipped workers"), True),
            ("controller", string("the memory controller that ran (`--controller` or the scenario's `[control]`)"), True),
            ("backend", enum(["cgroup v2", "hybrid (v1 memory + v2 PSI)"], "the cgroup backend"), True),
            ("tasks", arr(task, "every task, in scenario order"), True),
            ("jobs", arr(job, "every counted task's jobs, by release time (at most traces.limit)"), True),
            (
                "traces",
                obj(
                    "how many job rows the run kept",
                    {
                        "limit": count("most rows a run keeps"),
                        "jobs": count("rows in jobs"),
                        "jobs_left_out": count("jobs released after the limit was reached: counted in the totals, not kept"),
                    },
                ),
                True,
            ),
            (
                "memory",
                obj("memory the groups share, and each group", {"total_bytes": count("bytes"), "groups": arr(group)}),
                True,
            ),
            ("control", control, True),
        ],
    )
    return document(
        "linux-run",
        "critmem run --platform linux --json",
        "The summary of a scenario run on real processes in cgroups (`critmem run FILE --platform linux "
        "--json`, summary.json of `--out`; printed by critmem-linux-run). Fields named as the "
        "simulator's mean what they mean there; a task whose jobs the run did not count has every job "
        "figure null.",
        body,
    )


# ---------------------------------------------------------------------------------------
# critmem reproduce PAPER --json (and critmem study mc2 --json)

OUT_DIR_KEY = string("the output folder the reproduction wrote to")
FILES_KEY = arr(string(), "the files written, relative to out_dir, the report first", minItems=1)
QUICK_KEY = boolean("whether this was the reduced `--quick` version")
RUNS_KEY = count("simulations run")
CONTROLLER_NAME = string("a memory controller's name (`critmem controllers`) or a SARA variant")


def reproduction(name: str, title: str, description: str, keys: list[tuple[str, Schema, bool]]) -> Schema:
    body = ordered(None, [*keys, ("out_dir", OUT_DIR_KEY, True), ("files", FILES_KEY, True)])
    return document(name, title, description, body)


def shared_pages_schema() -> Schema:
    techniques = ["no-sp-mgmt", "spc", "spel"]
    fig9_keys = ["no-sp-mgmt", "first-touch", "spc", "spel", "alone"]
    mb_pair = pair(count(), "the two tasks' minimum reservations, MiB")
    cell = obj(
        "one technique on one task set",
        {
            "reservations_mb": mb_pair,
            "total_mb": num("physical memory the set took, mean over runs, MiB"),
            "total_range_mb": pair(num(), "the least and the most over runs, MiB"),
            "formula_mb": count("the paper's formula, MiB"),
            "paper_reservations_mb": arr(count(), "the paper's reservations, MiB (empty: not in the paper)", maxItems=2),
            "paper_total_mb": nullable(count(), "the paper's total, MiB; null: not in the paper"),
        },
    )
    per_task = obj(None, {"tau1": count("MiB"), "tau2": count("MiB")})
    per_policy = obj(None, {k: count() for k in fig9_keys})
    ops = ["alloc", "free", "map", "unmap"]
    table2 = obj(
        "Table II: the model's cost of each memory operation, ns (wall-clock: varies from run to run)",
        {op: obj(None, {col: num("ns") for col in ("global", "reservation", "spc")}) for op in ops},
    )
    return reproduction(
        "reproduce-shared-pages",
        "critmem reproduce shared-pages --json",
        "Headline numbers of the shared-page reproduction (Kim and Rajkumar): minimum reservations "
        "(Fig. 8), physical memory per technique (Table III), tau1's misses beside tau2 (Fig. 9) and "
        "the memory operations' cost (Table II).",
        [
            (
                "table3",
                obj(
                    "Table III: per task set, per technique",
                    {s: obj(None, {t: cell for t in techniques}) for s in ("tau1+tau1", "tau1+tau2", "tau2+tau2")},
                ),
                True,
            ),
            ("min_reservation_mb", dict(per_task, description="Fig. 8: the smallest reservation with no miss, per task, MiB"), True),
            ("paper_min_reservation_mb", dict(per_task, description="the paper's, MiB"), True),
            ("tau1_misses", dict(per_policy, description="Fig. 9: tau1's deadline misses per share policy"), True),
            ("tau1_steady_misses", dict(per_policy, description="the same once both tasks run"), True),
            (
                "tau2_periods_with_tau1_miss",
                obj(
                    "per share policy: [tau2's periods in which tau1 missed, tau2's periods]",
                    {k: pair(count(), "[periods with a miss, periods]") for k in fig9_keys},
                ),
                True,
            ),
            ("table2_ns", table2, True),
            ("quick", QUICK_KEY, True),
            ("simulation_runs", RUNS_KEY, True),
        ],
    )


def critmem_judgement(config_key: Schema) -> Schema:
    """How critmem's controller is judged on each configuration (reproduce/sara/judgement.py)."""
    return arr(
        obj(
            "critmem's controller on one configuration, judged among the others",
            {
                "config": config_key,
                "hit_ratio": nullable(ratio(), "its deadline hit ratio over all judged jobs"),
                "peak_jobs": count("judged jobs that were transient peaks"),
                "keepable_hit_ratio": nullable(ratio(), "its hit ratio over the judged jobs that were not transient peaks"),
                "nonrt_throughput": nullable(num(), "the non-real-time task's work units per second"),
                "peak_job_misses": nullable(count(), "transient peaks it missed"),
                "sara_peak_job_misses": nullable(count(), "transient peaks SARA missed"),
                "dominated_by": arr(CONTROLLER_NAME, "the controllers with both a higher keepable hit ratio and a higher throughput"),
                "best_keeping": nullable(CONTROLLER_NAME, "the highest-throughput controller keeping at least 0.99 of its keepable jobs"),
                "best_keeping_nonrt_throughput": nullable(num(), "its throughput"),
                "throughput_ratio_to_best": nullable(num(), "critmem's controller's throughput over that best"),
                "keeps": boolean("keepable hit ratio at least 0.99 and no more peaks missed than SARA"),
                "throughput_holds": boolean("dominated by none, and within 1 % of the best throughput"),
                "holds": boolean("both"),
            },
        ),
        "per configuration",
    )


def machine_judgement(config_key: Schema) -> Schema:
    """How critmem's controller is judged on this machine (judgement.judge_on_machine)."""
    interval = nullable(arr(num(minimum=None), minItems=2, maxItems=2), "95 % interval [low, high]; null after one run")
    return arr(
        obj(
            "critmem's controller on one workload and memory share, judged among the others over repeated runs",
            {
                "config": config_key,
                "nrt": string("the non-real-time app beside the soft real-time one (graph, tables)"),
                "hit_ratio": nullable(ratio(), "its deadline hit ratio, mean over the runs"),
                "runs": count("runs per controller"),
                "keepable_hit_ratio": nullable(ratio(), "its hit ratio over the keepable jobs, mean over the runs"),
                "keepable_interval": interval,
                "nonrt_throughput": nullable(num(), "the non-real-time app's work units per second, mean over the runs"),
                "nonrt_throughput_interval": interval,
                "greedy_nonrt_throughput_interval": interval,
                "dominated_by": arr(
                    CONTROLLER_NAME, "the controllers whose keepable hit ratio and throughput intervals both lie wholly above its own"
                ),
                "above_greedy_required": boolean("memory binds here: its throughput must lie above Greedy's beyond the intervals"),
                "above_greedy": nullable(boolean(), "whether it does; null where not required"),
                "keeps": boolean("mean keepable hit ratio at least 0.95"),
                "throughput_holds": boolean("dominated by none beyond the intervals, and above Greedy where required"),
                "holds": boolean("both"),
            },
        ),
        "per workload and memory share",
    )


def sara_schema() -> Schema:
    per_controller = mapping(nullable(num()), "per controller; null where no run gave a value", keys=CONTROLLER_NAME)
    config_key = string("a configuration: workload/memory %/SSD", pattern="^[^/]+/[0-9]+%/[^/]+$")
    return reproduction(
        "reproduce-sara",
        "critmem reproduce sara --json",
        "Headline numbers of the SARA reproduction in the simulator: every controller on each "
        "configuration (Fig. 11), the means beside the paper's, Fig. 7's fits, early job dropping "
        "(Fig. 13) and SARA with a separate growth step.",
        [
            ("critmem_controller", string("critmem's own soft real-time controller, shown beside SARA"), True),
            (
                "configs",
                arr(
                    obj(
                        "one controller on one configuration",
                        {
                            "workload": string("the soft real-time workload (e.g. sphinx, opencv)"),
                            "memory_pct": count("memory as a share of the workloads' peak, %"),
                            "ssd": string("the swap device (slow-ssd, fast-ssd)"),
                            "controller": CONTROLLER_NAME,
                            "deadline_hit_ratio": nullable(ratio(), "the soft real-time task's deadline hit ratio"),
                            "keepable_hit_ratio": nullable(
                                ratio(), "its hit ratio over the judged jobs that were not transient peaks; null when all were"
                            ),
                            "peak_jobs": count("judged jobs that were transient peaks"),
                            "nonrt_throughput": nullable(num(), "the non-real-time task's work units per second"),
                        },
                    ),
                    "every controller on every configuration",
                ),
                True,
            ),
            ("mean_deadline_hit_ratio", per_controller, True),
            ("mean_keepable_hit_ratio", per_controller, True),
            ("mean_nonrt_throughput", per_controller, True),
            (
                "sara_throughput_gain",
                obj(
                    "SARA's non-real-time throughput over a baseline's",
                    {
                        base: obj(
                            None,
                            {
                                "ratio_of_means": nullable(num()),
                                "mean_of_ratios": nullable(num()),
                                "max_ratio": nullable(num()),
                                "paper_mean": num("the paper's"),
                                "paper_max": num("the paper's"),
                            },
                        )
                        for base in ("greedy", "tmo-low")
                    },
                ),
                True,
            ),
            ("paper_sara_hit_ratio", ratio("the paper's SARA hit ratio"), True),
            ("paper_baseline_hit_ratio", mapping(ratio(), "the paper's hit ratios of Offline and TMO-High", keys=CONTROLLER_NAME), True),
            (
                "fig7",
                mapping(
                    obj(
                        "Fig. 7's fit of execution time against stall",
                        {
                            "slope": num(minimum=None),
                            "intercept_ms": num("ms", minimum=None),
                            "r_squared": num(minimum=None, maximum=1),
                            "configured_bcet_ms": num("the workload's configured BCET, ms"),
                        },
                    ),
                    "per workload",
                ),
                True,
            ),
            (
                "early_drop",
                arr(
                    obj(
                        "SARA with and without early job dropping on one configuration",
                        {
                            "config": config_key,
                            "cascaded_misses_with_drop": count(),
                            "cascaded_misses_without_drop": count(),
                            "dropped": count("jobs dropped"),
                            "hit_ratio_with_drop": nullable(ratio()),
                            "hit_ratio_without_drop": nullable(ratio()),
                        },
                    )
                ),
                True,
            ),
            (
                "sara_step_up",
                obj(
                    "SARA with a separate growth step (not the paper's rule)",
                    {
                        "step_up_bytes": count("the growth step, bytes"),
                        "mean_deadline_hit_ratio": nullable(ratio()),
                        "mean_keepable_hit_ratio": nullable(ratio()),
                        "mean_nonrt_throughput": nullable(num()),
                        "throughput_gain": obj(None, {"greedy": nullable(num()), "tmo-low": nullable(num())}),
                    },
                ),
                True,
            ),
            ("critmem_controller_judgement", critmem_judgement(config_key), True),
            ("quick", QUICK_KEY, True),
            ("simulation_runs", RUNS_KEY, True),
        ],
    )


def sara_linux_schema() -> Schema:
    per_controller = mapping(nullable(num()), "per controller, mean over the runs; null where none gave a value", keys=CONTROLLER_NAME)
    return reproduction(
        "reproduce-sara-linux",
        "critmem reproduce sara --platform linux --json",
        "Headline numbers of Fig. 11 on this machine: every controller with critmem's shipped apps, "
        "measured and as the simulator predicts it.",
        [
            ("paper", const("sara"), True),
            ("platform", const("linux"), True),
            ("critmem_controller", string("critmem's own soft real-time controller"), True),
            ("mean_deadline_hit_ratio", per_controller, True),
            ("mean_nonrt_throughput", per_controller, True),
            ("simulated_deadline_hit_ratio", per_controller, True),
            ("simulated_nonrt_throughput", per_controller, True),
            ("paper_hit_ratio", mapping(ratio(), "the paper's hit ratios", keys=CONTROLLER_NAME), True),
            ("bcet_ms", mapping(num(), "each app's measured BCET, ms"), True),
            (
                "configs",
                arr(
                    obj(
                        "one controller on one workload and memory share",
                        {
                            "workload": string("the soft real-time app"),
                            "nrt": string("the non-real-time app beside it (graph, tables)"),
                            "memory_pct": count("%"),
                            "controller": CONTROLLER_NAME,
                            "hit_ratio": nullable(ratio(), "measured"),
                            "keepable_hit_ratio": nullable(
                                ratio(), "measured, over the judged jobs that were not transient peaks (the apps have none)"
                            ),
                            "peak_jobs": count("judged jobs that were transient peaks (0: the apps have none)"),
                            "throughput_per_s": nullable(num(), "measured, work units/s"),
                            "simulated_hit_ratio": nullable(ratio()),
                            "simulated_throughput_per_s": nullable(num()),
                            "runs": count("runs on this machine the means are over"),
                            "intervals": obj(
                                "95 % intervals of the mean over the runs, [low, high]; null after one run",
                                {
                                    m: nullable(arr(num(minimum=None), minItems=2, maxItems=2))
                                    for m in ("hit_ratio", "keepable_hit_ratio", "throughput_per_s")
                                },
                            ),
                        },
                    )
                ),
                True,
            ),
            (
                "critmem_controller_judgement",
                machine_judgement(string("a configuration: workload/memory %", pattern="^[^/]+/[0-9]+%$")),
                True,
            ),
            (
                "prediction_error",
                obj(
                    "the simulator's prediction against every run on this machine",
                    {
                        "runs": count("runs compared"),
                        "hit_ratio_points": obj(
                            "|predicted - measured| hit ratio, in points (0.05 apart: 5)",
                            {"median": nullable(num()), "p90": nullable(num(), "nearest-rank 90th percentile")},
                        ),
                        "throughput_pct": obj(
                            "|predicted - measured| non-real-time throughput, % of the measured",
                            {"median": nullable(num()), "p90": nullable(num(), "nearest-rank 90th percentile")},
                        ),
                    },
                ),
                True,
            ),
        ],
    )


def tmem_schema() -> Schema:
    fig6_row = obj(
        "one scheme at one memory size, means over the task sets",
        {
            "scheme": string("the memory scheduler (min, max, fair, greedy, tmem, watermark, … and -nopi variants)"),
            "seed_set": enum(["design", "held_out"], "the task sets: those the design was tuned on, or held out"),
            "memory_above_min": num("transient memory above the minimum, units"),
            "max_tardiness_ms": nullable(num(), "ms"),
            "misses_per_s": nullable(num()),
            "mean_units_held": nullable(num("units")),
        },
    )
    seeds = arr(integer())
    return reproduction(
        "reproduce-tmem",
        "critmem reproduce tmem --json",
        "Headline numbers of the TMEM reproduction: Fig. 6 on the design and held-out task sets, the "
        "robustness configurations likewise, Fig. 7's open system and Table IV's service.",
        [
            ("critmem_scheduler", string("critmem's own memory scheduler, shown beside the paper's"), True),
            ("seed_sets", obj("the task sets' seeds", {"design": seeds, "held_out": seeds, "robustness_held_out": seeds}), True),
            ("fig6", arr(fig6_row, "Fig. 6"), True),
            (
                "robustness",
                arr(
                    obj(
                        "Fig. 6 at another utilisation and thread count",
                        {
                            "utilization": num(),
                            "n_rt": count("real-time threads"),
                            "memory_sizes": arr(num(), "memory sizes above the minimum, units"),
                            "fig6": arr(fig6_row),
                        },
                    )
                ),
                True,
            ),
            ("slope_ratio", nullable(num(minimum=None), "tmem's slope of tardiness against memory over greedy's"), True),
            (
                "fig7",
                arr(
                    obj(
                        "one scheme in one 1 s bin of the open system, means over task sets",
                        {
                            "scheme": string(),
                            "t_s": num("the bin's start, s"),
                            "memory_units": nullable(num(), "units"),
                            "max_tardiness_ms": nullable(num(), "ms"),
                            "misses_per_s": nullable(num()),
                        },
                    )
                ),
                True,
            ),
            (
                "table4",
                arr(
                    obj(
                        "one policy serving the request-response service",
                        {
                            "policy": string(),
                            "response_us": nullable(num(), "the QoS thread's mean response, µs"),
                            "max_response_us": nullable(num(), "µs"),
                            "tmem_above_min": integer("units above the service's minimum"),
                            "paper_response_us": nullable(num(), "µs; null: not in the paper"),
                            "paper_tmem_above_min": nullable(integer(), "null: not in the paper"),
                        },
                    )
                ),
                True,
            ),
            ("quick", QUICK_KEY, True),
            ("simulation_runs", RUNS_KEY, True),
        ],
    )


def hires_schema() -> Schema:
    share_row = obj(
        "one subsystem's (server's) CPU share in one phase",
        {
            "name": string("the server or subsystem"),
            "phase": count("the phase: 0, 1, 2 for the web server's three periods"),
            "budget": num("its reserved budget, ms"),
            "period": num("its period, ms"),
            "share": num("its measured share of one CPU"),
        },
    )
    latency = arr(obj(None, {"depth": count("hierarchy depth"), "mean_us": num("µs")}))
    ratio_rows = arr(obj(None, {"depth": count("cgroup depth"), "ratio": nullable(num(), "the measure at this depth over depth 0")}))
    return reproduction(
        "reproduce-hires",
        "critmem reproduce hires --json",
        "Headline numbers of the HiRes reproduction: Fig. 6's CPU shares in the simulator and as "
        "nested cgroups on Linux, Fig. 5's and Fig. 4's latencies against depth in the simulator, "
        "and the Linux measurements against cgroup depth. The simulator's parts appear with "
        "`sim` in platforms, the Linux parts with `linux`.",
        [
            ("paper", const("hires"), True),
            ("platforms", arr(enum(["sim", "linux"]), "where its experiments ran", minItems=1, uniqueItems=True), True),
            (
                "fig6",
                obj("Fig. 6's rows per platform (empty where it did not run)", {"sim": arr(share_row), "linux": arr(share_row)}),
                True,
            ),
            (
                "paper_table3",
                mapping(
                    obj(
                        "the paper's web server at one depth",
                        {
                            "connections_per_s": num(),
                            "stddev": num("connections/s"),
                            "latency_ms": num("ms"),
                            "p95_ms": num("ms"),
                        },
                    ),
                    "Table III as the paper gives it, by depth",
                    keys=string(pattern="^[0-9]+$"),
                ),
                True,
            ),
            ("fig5", dict(latency, description="timer-event latency against depth (simulator)"), False),
            ("fig4a_sim", dict(latency, description="event latency between two threads against depth (simulator)"), False),
            (
                "fig4b_sim",
                arr(obj(None, {"depth": count(), "packet_mean_us": num("µs")}), "packet latency against depth (simulator)"),
                False,
            ),
            (
                "depth",
                obj(
                    "Linux: each measure at each cgroup depth over depth 0; present when the Linux parts ran",
                    {},
                    {
                        "event_latency": ratio_rows,
                        "page_map": ratio_rows,
                        "page_unmap": ratio_rows,
                        "http": ratio_rows,
                    },
                ),
                False,
            ),
        ],
    )


def mc2_schema(name: str, title: str) -> Schema:
    schemes = ["R|R", "C|C", "O|C", "C|C+A/B-ALL", "C|C+A/B-LP", "C|C+A/B-SP", "O|C+A/B-ALL", "O|C+A/B-LP", "O|C+A/B-SP"]
    ratio_keys = [
        "C|C/R|R",
        "O|C/C|C",
        "C|C+A/B-ALL/C|C",
        "O|C+A/B-ALL/C|C",
        "O|C+A/B-ALL/R|R",
        "C|C+A/B-ALL/C|C+A/B-LP",
        "C|C+A/B-ALL/C|C+A/B-SP",
        "O|C+A/B-ALL/O|C+A/B-LP",
        "O|C+A/B-ALL/O|C+A/B-SP",
        "O|C/C|C (Large IPC)",
        "C|C+A/B-ALL/C|C (High bandwidth)",
    ]
    return reproduction(
        name,
        title,
        "Headline numbers of MC²'s schedulability study: the schedulable-utilisation areas of the "
        "nine IPC/I/O buffer schemes and their ratios beside the paper's.",
        [
            ("scenarios", count("scenarios studied"), True),
            ("sua", obj("schedulable-utilisation area per scheme", {s: num() for s in schemes}), True),
            ("paper_ratios", obj("the paper's SUA ratios", {k: num() for k in ratio_keys}), True),
            (
                "ratios",
                obj("ours; null where the denominator is 0 or no scenario of a subset ran", {k: nullable(num()) for k in ratio_keys}),
                True,
            ),
            ("paper", const("mc2"), True),
            ("quick", QUICK_KEY, True),
            ("systems", count("task systems drawn"), True),
            ("truncated_scenarios", count("scenarios whose curve stopped at the grid's end"), True),
            (
                "fig15_circled",
                obj(
                    "the point Fig. 15 circles",
                    {
                        "inset": string(),
                        "scheme": enum(schemes),
                        "utilization": num(),
                        "paper_fraction": ratio(),
                        "fraction": nullable(ratio(), "ours; null when its scenario was not studied"),
                    },
                ),
                True,
            ),
            (
                "ipc_ranges",
                arr(
                    obj(
                        "Obs. 1: an IPC strategy's cost as a share of SBP's",
                        {
                            "strategy": enum(["CL", "CE"]),
                            "operation": enum(["send", "receive"]),
                            "low_pct": nullable(num(), "%"),
                            "high_pct": nullable(num(), "%"),
                            "paper_low_pct": num("%"),
                            "paper_high_pct": num("%"),
                        },
                    )
                ),
                True,
            ),
        ],
    )


def sweep_schema() -> Schema:
    cell = {"type": ["null", "boolean", "number", "string"], "description": "a value; a list or table a key was set to, as JSON text"}
    body = ordered(
        None,
        [
            ("spec", string("the spec file, as given"), True),
            ("scenario", string("the base scenario: its path as the spec gives it, or [scenario] for one given inline"), True),
            ("keys", arr(string(), "the varied keys (dotted scenario keys), in the table's order"), True),
            ("seeds", arr(count(), "the seeds every point runs with", minItems=1), True),
            ("metrics", arr(string(), "the metrics, dotted paths into `critmem run --json`", minItems=1), True),
            ("columns", arr(string(), "the table's columns: the keys, seed, then the metrics", minItems=2), True),
            ("rows", arr(arr(cell, "one run: a value per column"), "one row per run, in the spec's order (runs.csv's rows)"), True),
            ("runs", count("rows"), True),
            ("computed", count("runs simulated by this call"), True),
            ("reused", count("runs taken from the cache in out_dir"), True),
            ("out_dir", string("the output folder"), True),
            ("files", arr(string(), "the files written in out_dir: runs.csv, runs.parquet, plot-KEY.png", minItems=1), True),
        ],
    )
    return document(
        "sweep",
        "critmem sweep SPEC --json",
        "A sweep spec's runs: what it varied, its seeds and metrics, the table (a row per run) and how many runs were "
        "simulated or taken from the cache.",
        body,
    )


SCHEMAS: dict[str, Callable[[], Schema]] = {
    "run": run_schema,
    "analyze": analyze_schema,
    "linux-run": linux_run_schema,
    "reproduce-shared-pages": shared_pages_schema,
    "reproduce-sara": sara_schema,
    "reproduce-sara-linux": sara_linux_schema,
    "reproduce-tmem": tmem_schema,
    "reproduce-hires": hires_schema,
    "reproduce-mc2": lambda: mc2_schema("reproduce-mc2", "critmem reproduce mc2 --json"),
    "study-mc2": lambda: mc2_schema("study-mc2", "critmem study mc2 --json"),
    "sweep": sweep_schema,
}


def render(name: str) -> str:
    return json.dumps(SCHEMAS[name](), indent=2, ensure_ascii=False) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--check", action="store_true", help="exit 1 if a file differs from its definition")
    args = parser.parse_args()
    stale = []
    for name in SCHEMAS:
        path = OUT_DIR / f"{name}.schema.json"
        text = render(name)
        if args.check:
            if not path.exists() or path.read_text(encoding="utf-8") != text:
                stale.append(path)
        else:
            OUT_DIR.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
    extra = sorted(set(OUT_DIR.glob("*.schema.json")) - {OUT_DIR / f"{n}.schema.json" for n in SCHEMAS})
    for path in stale + extra:
        print(f"{path}: {'not generated by this script' if path in extra else 'differs'}", file=sys.stderr)
    return 1 if stale or extra else 0


if __name__ == "__main__":
    sys.exit(main())
