"""`critmem run`: a scenario simulated, its tables printed and its traces and charts written."""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from critmem import _core
from critmem._core import MAX_TRACE_RECORDS, ScenarioError
from critmem._source import ScenarioSource, read_path
from critmem.cli import argtypes
from critmem.cli.errors import CliError, _Parser
from critmem.cli.outdir import _claim_out_dir, _prepare_out_dir, _record_out
from critmem.cli.run_tables import _controller_line, _GroupRow, _memory_reserve, _print_groups, _print_stalls, _print_tasks
from critmem.cli.tables import _console, _fmt, _note_left_out, _plural, _print_warnings, _row_table, _text, _worst
from critmem.plugins import scenario_dir

if TYPE_CHECKING:
    from rich.console import Console

    from critmem.api import RunResult

_RUN_EPILOG = """\
examples:
  critmem examples copy quickstart
  critmem run quickstart.toml
  critmem run quickstart.toml --seed 7 --horizon-ms 500 --out results/q7
  critmem examples copy rm-textbook
  critmem run rm-textbook.toml --json | python3 -m json.tool

--out DIR writes jobs.csv (one row per job), segments.csv (one row per stretch a job
ran on a CPU), summary.json (as --json prints it) and gantt.png; for a scenario with
[memory], also memory_timeline.csv and memory.png (resident pages per reservation and
per task, and reserved physical memory, over time); with [control], also
control_timeline.csv (one row per controller tick per group: limit, usage and PSI
totals), and memory.png draws each group's limit beside its usage. With --platform linux, --out DIR
writes summary.json, jobs.csv (one row per job of each task whose jobs are counted),
timeline.csv and memory.png (usage and limit of every group over time)."""


def _print_run(s: dict[str, Any], events: int) -> None:
    """The run's header line and tables, from its summary and the engine's event count."""
    console = _console()
    console.print(
        _text(
            f"{s['scenario']}: {s['scheduler']} on {_plural(s['cpus'], 'CPU')}, "
            f"horizon {s['horizon_ms']:g} ms, seed {s['seed']}, {events} events"
        )
    )
    control = s.get("control")
    if control is not None:
        console.print(_text(_controller_line(control["controller"], control["interval_ms"], control["ticks"], control["dropped_jobs"])))
    _print_tasks(console, s["tasks"], place="cpu")
    if control is not None and s.get("memory") is not None:
        _print_groups(console, _sim_group_rows(s), throughput="work/s")
    if "servers" in s:
        _print_servers(console, s["servers"], float(s["horizon_ms"]))
    if s.get("memory") is not None:
        _print_memory(console, s["memory"])
    if "tmem" in s:
        _print_tmem(console, s["tmem"])


def _print_tmem(console: Console, t: dict[str, Any]) -> None:
    """TMEM's line (policy, pool, runs, peak) and one row per managed cache: its minimum, peak
    and final allocation, desired allocation at the end, units handed out, growths from the
    pool, waits and their longest and total time. Past `_TABLE_ROWS` caches, those that
    waited longest."""
    total = t["total_units"]
    pool = "no limit" if total is None else f"{total} units ({total - t['min_units']} above the minimums)"
    console.print(
        _text(
            f"tmem: {t['policy']}, requests {t['wait']}, pool {pool}, {_plural(t['runs'], 'run')} every "
            f"{t['period_ns'] / 1e6:g} ms, peak {t['peak_allocated_units']} units in caches"
        )
    )
    shown = _worst(t["caches"], lambda c: (c["total_wait_ns"], c["waits"]))
    rows = [
        [
            c["component"],
            c["kind"],
            _fmt(c["min_units"]),
            _fmt(c["peak_allocated_units"]),
            _fmt(c["final_allocated_units"]),
            "none" if c["final_desired_units"] is None else _fmt(c["final_desired_units"]),
            _fmt(c["gets"]),
            _fmt(c["grows"]),
            _fmt(c["waits"]),
            _fmt(c["longest_wait_ns"] / 1e6),
            _fmt(c["total_wait_ns"] / 1e6),
        ]
        for c in shown
    ]
    columns = ["component", "kind", "min", "peak", "final", "desired", "gets", "grows", "waits", "longest wait ms", "total wait ms"]
    console.print(_row_table(console, columns, rows, left=2, optional=["grows", "longest wait ms"]))
    _note_left_out(console, len(t["caches"]), len(shown), "the longest waits", what="caches")


def _sim_group_rows(s: dict[str, Any]) -> list[_GroupRow]:
    """The simulator's group rows: limits from `control.groups`, each task's figures summed
    into the group `memory.tasks` places it in."""
    member = {t["name"]: t["group"] for t in s["memory"]["tasks"]}
    rows: list[_GroupRow] = []
    for g in s["control"]["groups"]:
        tasks = [t for t in s["tasks"] if member.get(t["name"]) == g["name"]]
        rows.append(
            (
                g["name"],
                g["final_max_mb"],
                g["lowest_max_mb"],
                g["peak_usage_mb"],
                sum(t["throughput_per_s"] for t in tasks) if tasks else None,
                sum(t["pending"] for t in tasks) if tasks else None,
                sum(t["dropped"] for t in tasks) if tasks else None,
            )
        )
    return rows


def _print_servers(console: Console, servers: Sequence[dict[str, Any]], horizon_ms: float) -> None:
    """One row per server of the scheduler hierarchy: its budget, the CPU share it used (its
    child-scheduler threads' event delivery included), and the events it delivered; with a
    server memory reservation, each server's reservation and the most its subtree held."""
    memory = any("peak_resident_pages" in v for v in servers)
    rows = [
        [
            v["name"],
            v["parent"],
            v["kind"],
            _fmt(v["budget_ms"]),
            _fmt(v["period_ms"]),
            _fmt(v["consumed_ms"]),
            # Of all the CPUs it runs on.
            f"{100 * v['consumed_ms'] / (horizon_ms * len(v['cpus'])):.1f}%" if horizon_ms > 0 else "-",
            _fmt(v["replenishments"]),
            _fmt(v["exhaustions"]),
            _fmt(v["events_delivered"]),
            _fmt(v["event_ms"]),
            *([_memory_reserve(v["memory_reserved_mb"], v["memory_kind"]), _fmt(v["peak_resident_pages"])] if memory else []),
        ]
        for v in servers
    ]
    columns = ["server", "parent", "kind", "budget ms", "period ms", "consumed ms", "cpu share", "replenishments",
               "exhaustions", "events", "event ms"]  # fmt: skip
    if memory:
        columns += ["memory MiB", "peak pages"]
    console.print(_row_table(console, columns, rows, left=3, optional=["event ms", "events", "exhaustions"]))


def _print_memory(console: Console, memory: dict[str, Any]) -> None:
    """Per-task faults and swapping, then per-group PSI stall totals."""
    page_mb = float(memory["page_bytes"]) / 1_048_576
    console.print(
        _text(
            f"memory: {memory['total_frames'] * page_mb:g} MB in {memory['page_bytes']} B pages, swap {memory['swap']}, "
            f"reserved physical memory at the end {memory['reserved_physical_mb']:g} MB"
        )
    )
    rows = [
        [
            t["name"],
            t["reservation"] or "-",
            _fmt(t["minor_faults"]),
            _fmt(t["major_faults"]),
            _fmt(t["pages_swapped_in"]),
            _fmt(t["pages_swapped_out"]),
            _fmt(t["resident_pages"] * page_mb),
            _fmt(t["peak_resident_pages"] * page_mb),
            _fmt(float(t["fault_wait_ms"])),
        ]
        for t in _worst(memory["tasks"], lambda t: (float(t["fault_wait_ms"]), t["major_faults"]))
    ]
    columns = ["task", "reservation", "minor faults", "major faults", "swapped in", "swapped out",
               "resident MB", "peak resident MB", "fault wait ms"]  # fmt: skip
    console.print(_row_table(console, columns, rows, left=2, optional=["swapped in", "minor faults", "resident MB"]))
    _note_left_out(console, len(memory["tasks"]), len(rows), "the longest fault waits")
    components = [
        [
            c["name"],
            c["reservation"] or "-",
            _fmt(c["minor_faults"]),
            _fmt(c["major_faults"]),
            _fmt(c["resident_pages"] * page_mb),
            _fmt(c["peak_resident_pages"] * page_mb),
        ]
        for c in memory.get("components", [])
    ]
    if components:
        console.print(_text("components' own memory: the faults their invocations took in it (the callers waited for them)"))
        columns = ["component", "reservation", "minor faults", "major faults", "resident MB", "peak resident MB"]
        console.print(_row_table(console, columns, components, left=2))
    shared = [
        [
            u["region"],
            t["name"],
            _fmt(u["jobs_ended"]),
            _fmt(u["mean_job_pages"] * page_mb if u["jobs_ended"] else None),
            _fmt(u["largest_job_pages"] * page_mb if u["jobs_ended"] else None),
        ]
        for t in memory["tasks"]
        for u in t.get("shared_regions", [])
    ]
    if shared:
        console.print(_text("shared regions: distinct pages each task touched per ended job (the mean is the paper's Avg(S))"))
        console.print(
            _row_table(console, ["region", "task", "jobs ended", "mean MB", "largest MB"], sorted(shared, key=lambda row: row[0]), left=2)
        )
    _print_stalls(console, memory["groups"])


def _progress_bar(src: ScenarioSource, horizon_ms: float | None) -> contextlib.AbstractContextManager[Callable[[float], object] | None]:
    """A progress bar for a long run when stderr is a terminal (the core calls it only once a
    run has taken half a second); nothing otherwise. `horizon_ms` is the CLI's override."""
    if not sys.stderr.isatty():
        return contextlib.nullcontext(None)
    from critmem.progress import SimulatedTimeBar

    if horizon_ms is None:
        try:
            with scenario_dir(src.directory):
                horizon_ms = float(json.loads(_core.validate(src.text, src.name, src.format))["horizon_ms"])
        except (ScenarioError, ValueError):
            # The run itself reports what is wrong with the scenario.
            return contextlib.nullcontext(None)
    return SimulatedTimeBar(horizon_ms)


def _write_results(
    result: RunResult,
    out_dir: Path,
    *,
    parquet: bool = False,
    gantt_window: tuple[float, float] | None = None,
    chart_format: str = "png",
    traces: bool = True,
) -> list[Path]:
    from critmem.export import write_csv, write_csv_metadata, write_trace_events
    from critmem.gantt import plot_gantt  # matplotlib is slow to import; only --out needs it

    summary_json = out_dir / "summary.json"
    written: list[Path] = []
    try:
        if traces:
            written += [write_csv(result.jobs, out_dir / "jobs.csv"), write_csv(result.segments, out_dir / "segments.csv")]
        summary_json.write_text(result.to_json() + "\n", encoding="utf-8")
        written.append(summary_json)
        if traces:
            written.append(plot_gantt(result, out_dir / f"gantt.{chart_format}", window=gantt_window, fmt=chart_format))
            written.append(write_trace_events(result, out_dir / "trace.json"))
        if parquet:
            # Parquet keeps the frames' types (categoricals, nullable integers) that CSV loses.
            for name, frame in (("jobs", result.jobs), ("segments", result.segments)):
                path = out_dir / f"{name}.parquet"
                frame.to_parquet(path, index=False, engine="pyarrow", compression="zstd")
                written.append(path)
        if result.servers is not None:
            servers_csv = out_dir / "servers.csv"
            supply_csv = out_dir / "server_supply.csv"
            write_csv(result.servers, servers_csv)
            write_csv(result.server_supply, supply_csv)
            written += [servers_csv, supply_csv]
        if result.resources_declared and traces:
            waits_csv = out_dir / "waits.csv"
            write_csv(result.waits, waits_csv)
            written.append(waits_csv)
        if result.memory is not None:
            from critmem.memplot import plot_memory

            timeline_csv = out_dir / "memory_timeline.csv"
            write_csv(result.memory_timeline, timeline_csv)
            written.append(timeline_csv)
            if result.summary.get("control") is not None:
                control_csv = out_dir / "control_timeline.csv"
                write_csv(result.control_timeline_long(), control_csv)
                written.append(control_csv)
            written.append(plot_memory(result, out_dir / "memory.png"))
            if parquet:
                timeline_parquet = out_dir / "memory_timeline.parquet"
                result.memory_timeline.to_parquet(timeline_parquet, index=False, engine="pyarrow", compression="zstd")
                written.append(timeline_parquet)
        written.append(write_csv_metadata(result, out_dir, [p for p in written if p.suffix == ".csv"]))
    except OSError as e:
        raise CliError(f"cannot write results to {str(out_dir)!r}: {e.strerror or e}") from None
    return written


def _cmd_run(args: argparse.Namespace) -> int:
    if args.platform == "linux":
        from critmem.cli.linux import _cmd_run_linux

        return _cmd_run_linux(args)
    if args.duration is not None or args.controller is not None or args.controller_config is not None or args.stop_grace is not None:
        raise CliError(
            "--duration, --stop-grace, --controller and --controller-config need --platform linux (the simulator runs to the scenario's horizon with its [control] controller)"
        )
    src = read_path(args.file)
    if args.out is None and (args.gantt_window is not None or args.format != "png"):
        raise CliError("--gantt-window and --format shape the Gantt chart --out writes: give --out DIR")
    if args.out is None and (args.trace_limit is not None or args.no_traces):
        raise CliError("--trace-limit and --no-traces shape the traces --out writes: give --out DIR")
    if args.no_traces and (args.trace_limit is not None or args.gantt_window is not None or args.format != "png" or args.parquet):
        raise CliError("--no-traces writes no traces: drop --trace-limit, --gantt-window, --format and --parquet")
    if args.parquet:
        if args.out is None or args.platform == "linux":
            raise CliError("--parquet needs --out DIR on the simulator")
        import importlib.util

        if importlib.util.find_spec("pyarrow") is None:
            raise CliError("--parquet needs pyarrow: pip install 'critmem[parquet]'")
    if args.out is None:
        # The summary alone: straight from the core, without building data frames.
        with _progress_bar(src, args.horizon_ms) as progress, scenario_dir(src.directory):
            out = _core.simulate(
                src.text, src.name, src.format, seed=args.seed, horizon_ms=args.horizon_ms,
                record_jobs=False, record_segments=False, progress=progress,
            )  # fmt: skip
        _print_warnings(out.warnings)
        if args.json:
            sys.stdout.write(out.summary_json + "\n")
        else:
            _print_run(json.loads(out.summary_json), out.events)
        return 0
    from critmem.api import _run_source

    out_dir = _prepare_out_dir(args.out) if args.out is not None else None
    if out_dir is not None:
        _claim_out_dir(args.out, out_dir, args.force)
    record = out_dir is not None and not args.no_traces
    with _progress_bar(src, args.horizon_ms) as progress:
        result = _run_source(
            src, seed=args.seed, horizon_ms=args.horizon_ms, record_jobs=record, record_segments=record,
            trace_limit=args.trace_limit, progress=progress, warn=False,
        )  # fmt: skip
    _print_warnings(result.warnings)
    if args.json:
        sys.stdout.write(result.to_json() + "\n")
    else:
        _print_run(result.summary, result.events)
    if out_dir is not None:
        written = _write_results(
            result, out_dir, parquet=args.parquet, gantt_window=args.gantt_window, chart_format=args.format, traces=record
        )
        _record_out(out_dir, written)
        # With --json, stdout carries the JSON object and nothing else.
        note = sys.stderr if args.json else sys.stdout
        files = ", ".join(p.name for p in written)
        traces = f" ({_plural(len(result.jobs), 'job')}, {_plural(len(result.segments), 'segment')})" if record else ""
        print(f"wrote {files} to {out_dir}/{traces}", file=note)
        left_out = [
            _plural(n, what)
            for n, what in ((result.jobs_left_out, "job"), (result.segments_left_out, "segment"), (result.waits_left_out, "wait"))
            if n > 0
        ]
        if left_out:
            limit = result.summary["traces"]["limit"]
            print(
                f"note: a trace keeps at most {limit:,} rows, the first to end; left out: "
                f"{' and '.join(left_out)} (the per-task totals count every job; summary.json records this)",
                file=note,
            )
    return 0


def register(commands: argparse._SubParsersAction[_Parser]) -> None:
    """Adds `critmem run`."""
    fmt = argparse.RawDescriptionHelpFormatter
    run = commands.add_parser(
        "run",
        help="simulate a scenario and print a per-task table",
        description="Simulate FILE to its horizon and print one row per task: jobs released and\n"
        "completed, deadline misses, hit ratio, max and mean response time, max tardiness.",
        epilog=_RUN_EPILOG,
        formatter_class=fmt,
    )
    run.add_argument("file", metavar="FILE", help="scenario file (.toml, or .json with the same structure)")
    run.add_argument("--json", action="store_true", help="print the summary as one JSON object instead of the table")
    run.add_argument(
        "--out", metavar="DIR", type=argtypes.out_dir,
        help="also write jobs.csv, segments.csv, summary.json and gantt.png to DIR (with [memory]: memory_timeline.csv, memory.png; with [control]: control_timeline.csv; on linux: summary.json, jobs.csv, timeline.csv, memory.png)",
    )  # fmt: skip
    run.add_argument(
        "--parquet", action="store_true", help="with --out: also write the traces as Parquet (needs pyarrow, the parquet extra)"
    )
    run.add_argument(
        "--trace-limit", type=argtypes.int_at_least(0), metavar="N",
        help=f"with --out: keep at most N rows of each trace (jobs, segments, waits), the first to end (default and most: {MAX_TRACE_RECORDS:,}); summary.json and csv-metadata.json say what was left out",
    )  # fmt: skip
    run.add_argument(
        "--no-traces", action="store_true",
        help="with --out: write the summary, timelines and plots without the per-job and per-segment traces (no jobs.csv, segments.csv, waits.csv, trace.json, Gantt chart)",
    )  # fmt: skip
    run.add_argument(
        "--gantt-window", type=argtypes.gantt_window, metavar="START:END",
        help="with --out: the Gantt chart shows this stretch of the run, in ms (default: the whole run, or a leading window of a long one)",
    )  # fmt: skip
    run.add_argument(
        "--format", choices=["png", "svg", "pdf"], default="png",
        help="with --out: the Gantt chart's file format: gantt.png (default), gantt.svg or gantt.pdf",
    )  # fmt: skip
    run.add_argument(
        "--force", action="store_true",
        help="with --out: replace critmem's own files of an earlier run in DIR (other files stay; without it a folder that is not empty is refused)",
    )  # fmt: skip
    run.add_argument(
        "--seed", type=argtypes.seed, metavar="N", help="seed for random execution times and arrivals (default: [run] seed, else 0)"
    )
    run.add_argument(
        "--horizon-ms", type=argtypes.positive_ms, metavar="X",
        help="simulated time in ms (default: [run] horizon_ms, else one hyperperiod plus the largest offset)",
    )  # fmt: skip
    run.add_argument(
        "--platform", choices=["sim", "linux"], default="sim",
        help="sim (default): simulate; linux: run the tasks as real processes in cgroups (root)",
    )  # fmt: skip
    run.add_argument("--duration", metavar="D", help="linux: how long the processes run, e.g. 60s, 2m (default 60s)")
    run.add_argument(
        "--stop-grace", metavar="D",
        help="linux: how long each task has to exit after SIGTERM at the end before it is killed (default 5s)",
    )  # fmt: skip
    run.add_argument(
        "--controller", metavar="NAME",
        # The built-in names: listing installed entry points would scan every package at each start.
        help=f"linux: controller in place of the scenario's: {', '.join(name for name, _ in _core.controllers())}, or a Python class (file.py:Class)",
    )  # fmt: skip
    run.add_argument(
        "--controller-config",
        metavar="JSON",
        help="linux: the controller's parameters as a JSON object, e.g. '{\"limit_bytes\": 67108864}'",
    )
    run.set_defaults(handler=_cmd_run)
