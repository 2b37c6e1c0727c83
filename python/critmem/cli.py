"""The `critmem` command.

Every failure a user can cause (a bad file, scenario, argument or output folder) ends as
one line `critmem: error: ...` on stderr and exit code 2; never a traceback.
"""

from __future__ import annotations

import argparse
import errno
import json
import math
import os
import select
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from critmem import __version__, controllers
from critmem._core import ScenarioError
from critmem._source import read_path
from critmem.api import MAX_TRACE_RECORDS, AnalysisResult, RunResult, _analyze_source, _run_source
from critmem.linux import LinuxError
from critmem.progress import BarProgress, QuietProgress
from critmem.reproduce import PAPERS, get

# The reader of stdout closed it early; nothing is printed (rich's console does the same).
EXIT_CLOSED_OUTPUT = 1
EXIT_USAGE = 2
# An exception that is not the user's fault: a bug in critmem.
EXIT_INTERNAL = 70

_U64_MAX = 2**64 - 1


class CliError(Exception):
    """A user error, reported as one line."""


class _Parser(argparse.ArgumentParser):
    # argparse prints usage plus the error over several lines; we want one line.
    def error(self, message: str) -> NoReturn:
        raise CliError(f"{message} (see '{self.prog} --help')")


def _seed(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if not 0 <= value <= _U64_MAX:
        raise argparse.ArgumentTypeError(f"must be between 0 and 2**64 - 1 (got {text})")
    return value


def _out_dir(text: str) -> str:
    # An empty name would silently mean the current directory.
    if not text:
        raise argparse.ArgumentTypeError("must name a folder (got an empty string)")
    return text


def _workers(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1 (got {text})")
    return value


def _scheduler_address(text: str) -> str:
    # Dask names its schedulers by URL; a bare host:port would be read as something else.
    if "://" not in text or not text.split("://", 1)[1]:
        raise argparse.ArgumentTypeError(f"must be a scheduler address like tcp://HOST:PORT (got {text!r})")
    return text


def _positive_ms(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of milliseconds: {text!r}") from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"must be a positive number of milliseconds (got {text})")
    return value


# ---------------------------------------------------------------------------------------
# Output helpers


def _console() -> Console:
    # Created per call so it writes to the current sys.stdout (tests redirect it). Off a
    # terminal rich would assume 80 columns and wrap the table; give it room instead.
    out = sys.stdout
    width = None if out.isatty() else 160
    return Console(file=out, width=width, highlight=False, soft_wrap=True)


def _fmt(value: Any, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def _table(columns: Sequence[str], rows: Sequence[Sequence[str]], *, left: int = 1) -> Table:
    """A plain table; the first `left` columns are text, the rest numbers (right-aligned).

    Every column but the first (names) may wrap at spaces, so on a narrow terminal headers
    and prose break into lines instead of being cut off.
    """
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False)
    for i, c in enumerate(columns):
        # Numbers are never cut: a column is at least as wide as its widest value.
        widest = max((len(row[i]) for row in rows), default=0) if i >= left else None
        table.add_column(c, justify="left" if i < left else "right", no_wrap=i == 0, min_width=widest)
    for row in rows:
        # Text(), not str: task names must never be read as rich markup.
        table.add_row(*(Text(cell) for cell in row))
    return table


def _words(identifier: str) -> str:
    """`not_schedulable` → `not schedulable`, for people."""
    return identifier.replace("_", " ")


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


# ---------------------------------------------------------------------------------------
# critmem run


def _print_run(result: RunResult) -> None:
    console = _console()
    s = result.summary
    console.print(
        Text(
            f"{s['scenario']}: {s['scheduler']} on {_plural(s['cpus'], 'CPU')}, "
            f"horizon {s['horizon_ms']:g} ms, seed {s['seed']}, {result.events} events"
        )
    )
    _print_tasks(console, s["tasks"], place="cpu")
    if "servers" in s:
        _print_servers(console, s["servers"], float(s["horizon_ms"]))
    if result.memory is not None:
        _print_memory(console, result.memory)


def _print_servers(console: Console, servers: Sequence[dict[str, Any]], horizon_ms: float) -> None:
    """One row per server of the scheduler hierarchy: its budget, the CPU share it used (its
    child-scheduler threads' event delivery included), and the events it delivered."""
    rows = [
        [
            v["name"],
            v["parent"],
            v["kind"],
            _fmt(v["budget_ms"]),
            _fmt(v["period_ms"]),
            _fmt(v["consumed_ms"]),
            f"{100 * v['consumed_ms'] / horizon_ms:.1f}%" if horizon_ms > 0 else "-",
            _fmt(v["replenishments"]),
            _fmt(v["exhaustions"]),
            _fmt(v["events_delivered"]),
            _fmt(v["event_ms"]),
        ]
        for v in servers
    ]
    columns = ["server", "parent", "kind", "budget ms", "period ms", "consumed ms", "cpu share", "replenishments",
               "exhaustions", "events", "event ms"]  # fmt: skip
    console.print(_table(columns, rows, left=3))


# A column of the task table beyond the common ones: header, and the cell of a task's row.
_Column = tuple[str, Callable[[dict[str, Any]], str]]


def _print_tasks(console: Console, tasks: Sequence[dict[str, Any]], *, place: str, extra: Sequence[_Column] = ()) -> None:
    """The per-task table of a run on either platform: the fields both summaries share, with
    the same meaning (a Linux task whose jobs were not counted shows "-"). `place` is the
    column after the criticality: the simulator's `cpu` (a number) or Linux's `group` (text)."""
    rows = []
    for t in tasks:
        hit = t["hit_ratio"]
        rows.append(
            [
                t["name"],
                t["criticality"],
                _fmt(t[place]),
                _fmt(t["jobs"]),
                _fmt(t["completed"]),
                _fmt(t["deadline_misses"]),
                "-" if hit is None else f"{100 * hit:.1f}%",
                _fmt(t["max_response_ms"]),
                _fmt(t["mean_response_ms"]),
                _fmt(t["max_tardiness_ms"]),
                *(cell(t) for _, cell in extra),
            ]
        )
    columns = ["task", "crit", place, "released", "completed", "misses", "hit ratio",
               "max resp ms", "mean resp ms", "max tard ms", *(header for header, _ in extra)]  # fmt: skip
    console.print(_table(columns, rows, left=3 if place == "group" else 2))


def _print_memory(console: Console, memory: dict[str, Any]) -> None:
    """Per-task faults and swapping, then per-group PSI stall totals."""
    page_mb = float(memory["page_bytes"]) / 1_048_576
    console.print(
        Text(
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
            _fmt(float(t["fault_wait_ms"])),
        ]
        for t in memory["tasks"]
    ]
    columns = ["task", "reservation", "minor faults", "major faults", "swapped in", "swapped out",
               "resident MB", "fault wait ms"]  # fmt: skip
    console.print(_table(columns, rows, left=2))
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
        console.print(Text("shared regions: distinct pages each task touched per ended job (the mean is the paper's Avg(S))"))
        console.print(_table(["region", "task", "jobs ended", "mean MB", "largest MB"], sorted(shared, key=lambda row: row[0]), left=2))
    groups = [
        [
            g["name"],
            _fmt(g["memory_some_us"] / 1000),
            _fmt(g["memory_full_us"] / 1000),
            _fmt(g["io_some_us"] / 1000),
            _fmt(g["io_full_us"] / 1000),
        ]
        for g in memory["groups"]
    ]
    console.print(Text("stall totals per group (PSI: some = at least one task stalled, full = all non-idle tasks stalled)"))
    console.print(_table(["group", "memory some ms", "memory full ms", "io some ms", "io full ms"], groups))


def _prepare_out_dir(out: str) -> Path:
    path = Path(out)
    # mkdir would say "File exists" for a file in the way; name the real problem.
    if path.exists() and not path.is_dir():
        raise CliError(f"cannot write results to {out!r}: it exists and is not a folder")
    if path.is_symlink():
        # mkdir would say "File exists" for a link to nowhere too.
        try:
            os.stat(path)
        except OSError as e:
            reason = {
                errno.ENOENT: f"it is a symbolic link to {os.readlink(path)!r}, which does not exist",
                errno.ELOOP: "it is a symbolic link that loops",
            }.get(e.errno or 0, e.strerror or str(e))
            raise CliError(f"cannot write results to {out!r}: {reason}") from None
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise CliError(f"cannot write results to {out!r}: {e.strerror or e}") from None
    if not os.access(path, os.W_OK):
        raise CliError(f"cannot write results to {out!r}: permission denied")
    return path


def _write_results(result: RunResult, out_dir: Path) -> list[Path]:
    from critmem.gantt import plot_gantt  # matplotlib is slow to import; only --out needs it

    jobs_csv = out_dir / "jobs.csv"
    segments_csv = out_dir / "segments.csv"
    summary_json = out_dir / "summary.json"
    written = [jobs_csv, segments_csv, summary_json]
    try:
        result.jobs.to_csv(jobs_csv, index=False, lineterminator="\n")
        result.segments.to_csv(segments_csv, index=False, lineterminator="\n")
        summary_json.write_text(result.to_json() + "\n", encoding="utf-8")
        written.append(plot_gantt(result, out_dir / "gantt.png"))
        if result.servers is not None:
            servers_csv = out_dir / "servers.csv"
            supply_csv = out_dir / "server_supply.csv"
            result.servers.to_csv(servers_csv, index=False, lineterminator="\n")
            result.server_supply.to_csv(supply_csv, index=False, lineterminator="\n")
            written += [servers_csv, supply_csv]
        if result.memory is not None:
            from critmem.memplot import plot_memory

            timeline_csv = out_dir / "memory_timeline.csv"
            result.memory_timeline.to_csv(timeline_csv, index=False, lineterminator="\n")
            written += [timeline_csv, plot_memory(result, out_dir / "memory.png")]
    except OSError as e:
        raise CliError(f"cannot write results to {str(out_dir)!r}: {e.strerror or e}") from None
    return written


def _cmd_run(args: argparse.Namespace) -> int:
    if args.platform == "linux":
        return _cmd_run_linux(args)
    if args.duration is not None or args.controller is not None or args.controller_config is not None:
        raise CliError(
            "--duration, --controller and --controller-config need --platform linux (the simulator runs to the scenario's horizon with its [control] controller)"
        )
    src = read_path(args.file)
    out_dir = _prepare_out_dir(args.out) if args.out is not None else None
    record = out_dir is not None
    result = _run_source(src, seed=args.seed, horizon_ms=args.horizon_ms, record_jobs=record, record_segments=record)
    if args.json:
        sys.stdout.write(result.to_json() + "\n")
    else:
        _print_run(result)
    if out_dir is not None:
        written = _write_results(result, out_dir)
        # With --json, stdout carries the JSON object and nothing else.
        note = sys.stderr if args.json else sys.stdout
        files = ", ".join(p.name for p in written)
        print(
            f"wrote {files} to {out_dir}/ ({_plural(len(result.jobs), 'job')}, {_plural(len(result.segments), 'segment')})",
            file=note,
        )
        left_out = [_plural(n, what) for n, what in ((result.jobs_left_out, "job"), (result.segments_left_out, "segment")) if n > 0]
        if left_out:
            print(
                f"note: a trace keeps at most {MAX_TRACE_RECORDS:,} rows, the first to end; left out: "
                f"{' and '.join(left_out)} (the per-task totals count every job)",
                file=note,
            )
    return 0


def _cmd_run_linux(args: argparse.Namespace) -> int:
    from critmem import linux

    if args.seed is not None or args.horizon_ms is not None:
        raise CliError("--seed and --horizon-ms are for the simulator; on Linux use --duration")
    read_path(args.file)  # a missing or unreadable file is the usual one-line OSError
    duration_s = linux.parse_duration_s(args.duration if args.duration is not None else "60s")
    out_dir = _prepare_out_dir(args.out) if args.out is not None else None
    summary = linux.run_scenario(args.file, duration_s, args.controller, args.controller_config)
    if args.json:
        sys.stdout.write(json.dumps(summary, allow_nan=False) + "\n")
    else:
        _print_linux_run(summary)
    if out_dir is not None:
        try:
            summary_json = out_dir / "summary.json"
            summary_json.write_text(json.dumps(summary, allow_nan=False, indent=1) + "\n", encoding="utf-8")
            written = [
                summary_json,
                linux.write_timeline_csv(summary, out_dir / "timeline.csv"),
                linux.plot_timeline(summary, out_dir / "memory.png"),
            ]
        except OSError as e:
            raise CliError(f"cannot write results to {str(out_dir)!r}: {e.strerror or e}") from None
        note = sys.stderr if args.json else sys.stdout
        print(f"wrote {', '.join(p.name for p in written)} to {out_dir}/", file=note)
    return 0


def _print_linux_run(summary: dict[str, Any]) -> None:
    """The simulator's per-task table and PSI table, for real processes."""
    console = _console()
    control = summary["control"]
    console.print(
        Text(
            f"{summary['scenario']}: Linux ({summary['backend']}) on {_plural(summary['cpus'], 'CPU')}, "
            f"{summary['horizon_ms'] / 1000:.1f} s under {summary['controller']}, {control['ticks']} ticks of "
            f"{control['interval_ms']:g} ms, {control['tick_cost_mean_us']:.0f} us each"
        )
    )
    _print_tasks(
        console,
        summary["tasks"],
        place="group",
        extra=[
            ("MiB/s", lambda t: _fmt(t["verified_mib_per_s"], digits=1)),
            ("checksum fails", lambda t: _fmt(t["checksum_failures"])),
        ],
    )
    groups = [
        [
            g["name"],
            _fmt(g["memory_some_us"] / 1000),
            _fmt(g["memory_full_us"] / 1000),
            _fmt(g["io_some_us"] / 1000),
            _fmt(g["io_full_us"] / 1000),
        ]
        for g in summary["memory"]["groups"]
    ]
    console.print(Text("stall totals per group (PSI: some = at least one task stalled, full = all non-idle tasks stalled)"))
    console.print(_table(["group", "memory some ms", "memory full ms", "io some ms", "io full ms"], groups))
    console.print(
        Text(
            f"limit writes {control['writes_ok']} ok, {control['writes_failed']} refused by the kernel; "
            f"OOM rescues {control['oom_rescues']}; everything restored ({control['removed_dirs']} cgroup directories removed)"
        )
    )


# ---------------------------------------------------------------------------------------
# critmem agent, critmem swap


def _cmd_agent(args: argparse.Namespace) -> int:
    from critmem import linux

    duration_s = None if args.duration is None else linux.parse_duration_s(args.duration)
    argv = linux.agent_argv(args.config, args.dry_run, duration_s, args.log_level)
    sys.stdout.flush()
    sys.stderr.flush()
    # exec: the daemon gets SIGTERM/SIGINT itself and restores everything before it exits.
    os.execv(argv[0], argv)


def _cmd_swap(args: argparse.Namespace) -> int:
    from critmem import linux

    if args.action != "setup":
        # Silently ignored, a `teardown --path X` would look as if it removed X.
        given = [flag for flag, value in (("--size", args.size), ("--path", args.path)) if value is not None]
        if given:
            raise CliError(
                f"swap {args.action} takes no {' or '.join(given)} (only setup does); {args.action} acts on the swapfile the state file records"
            )
    if args.action == "setup":
        if args.size is None:
            raise CliError("swap setup needs --size (e.g. --size 4G)")
        result = linux.swap_setup(linux.parse_size_bytes(args.size), args.path, args.state_file)
        print(f"swapfile {result['swapfile']} ({result['size_bytes'] / 2**30:.2f} GiB) enabled; `critmem swap teardown` removes it")
    elif args.action == "teardown":
        result = linux.swap_teardown(args.state_file)
        removed = result["removed"]
        print("critmem has no swapfile; nothing to do" if removed is None else f"swapfile {removed} disabled and deleted")
    else:
        result = linux.swap_status(args.state_file)
        print(json.dumps(result))
    return 0


# ---------------------------------------------------------------------------------------
# critmem analyze


def _print_analysis(result: AnalysisResult) -> None:
    console = _console()
    r = result.report
    console.print(
        Text(f"{r['scenario']}: {r['scheduler']} on {_plural(r['cpus'], 'CPU')}, total utilization {_fmt(r['total_utilization'])}")
    )
    task_rows = [
        [
            t["name"],
            _fmt(t["cpu"]),
            _fmt(t["utilization"]),
            _fmt(t["wcet_ms"]),
            _fmt(t["period_ms"]),
            _fmt(t["deadline_ms"]),
            _fmt(t["priority_rank"]),
            _fmt(t["response_time_ms"]),
            _fmt(t["schedulable"]),
            _fmt(t["tardiness_bound_ms"]),
        ]
        for t in r["tasks"]
    ]
    columns = ["task", "cpu", "util", "wcet ms", "period ms", "deadline ms", "prio rank",
               "response ms", "meets deadline", "tardiness bound ms"]  # fmt: skip
    console.print(_table(columns, task_rows))
    test_rows = [[t["name"], _fmt(t["cpu"]), _words(t["verdict"]), t["detail"]] for t in r["tests"]]
    console.print(_table(["test", "cpu", "verdict", "detail"], test_rows, left=4))
    console.print(Text(f"verdict: {_words(result.verdict)}"))


def _cmd_analyze(args: argparse.Namespace) -> int:
    result = _analyze_source(read_path(args.file))
    if args.json:
        sys.stdout.write(result.to_json() + "\n")
    else:
        _print_analysis(result)
    return 0


# ---------------------------------------------------------------------------------------
# critmem reproduce


def _print_reproduction(summary: dict[str, Any]) -> None:
    """The headline numbers beside the paper's, for people; the report has everything."""
    console = _console()
    mins, paper_mins = summary.get("min_reservation_mb", {}), summary.get("paper_min_reservation_mb", {})
    if mins:
        rows = [[k, _fmt(v), _fmt(paper_mins.get(k))] for k, v in mins.items()]
        console.print(Text("minimum schedulable reservation (MB)"))
        console.print(_table(["task", "model", "paper"], rows))
    table3 = summary.get("table3", {})
    if table3:
        rows = []
        for set_key, techs in table3.items():
            for tech, c in techs.items():
                rows.append(
                    [
                        set_key, tech, " + ".join(str(x) for x in c["reservations_mb"]), _fmt(c["total_mb"]),
                        _fmt(c.get("formula_mb")), " + ".join(str(x) for x in c["paper_reservations_mb"]), _fmt(c["paper_total_mb"]),
                    ]
                )  # fmt: skip
        console.print(Text("physical memory usage (Table III)"))
        console.print(
            _table(["task set", "technique", "reserve MB", "total MB", "formula MB", "paper reserve MB", "paper total MB"], rows, left=2)
        )
    misses = summary.get("tau1_misses", {})
    if misses:
        periods = summary.get("tau2_periods_with_tau1_miss", {})
        steady = summary.get("tau1_steady_misses", {})
        rows = [
            [k, _fmt(v), _fmt(steady.get(k)), "-" if k not in periods else f"{periods[k][0]} of {periods[k][1]}"] for k, v in misses.items()
        ]
        console.print(Text("tau1 with tau2 (Fig. 9)"))
        console.print(_table(["policy", "tau1 misses", "after warm-up", "tau2 periods with a miss"], rows))
    _print_sara_headline(console, summary)
    ops = summary.get("table2_ns", {})
    if ops:
        cols = list(next(iter(ops.values())))
        rows = [[op, *(_fmt(v.get(c), 1) for c in cols)] for op, v in ops.items()]
        console.print(Text("memory operations, wall-clock ns of the simulator's data structures (Table II)"))
        console.print(_table(["operation", *cols], rows))


def _print_sara_headline(console: Console, summary: dict[str, Any]) -> None:
    hit, thr = summary.get("mean_deadline_hit_ratio", {}), summary.get("mean_nonrt_throughput", {})
    if not hit:
        return
    paper_hit = {"sara": summary.get("paper_sara_hit_ratio"), **summary.get("paper_baseline_hit_ratio", {})}
    rows = [[c, _fmt(hit.get(c)), _fmt(paper_hit.get(c)), _fmt(thr.get(c))] for c in hit]
    step_up = summary.get("sara_step_up", {})
    if step_up.get("mean_deadline_hit_ratio") is not None:
        label = f"sara, x_up {step_up['step_up_bytes'] // 1_048_576} MiB (not the paper's rule)"
        rows.append([label, _fmt(step_up["mean_deadline_hit_ratio"]), "-", _fmt(step_up.get("mean_nonrt_throughput"))])
    console.print(
        Text(
            f"mean over the {len({(c['workload'], c['memory_pct'], c['ssd']) for c in summary.get('configs', [])})} configurations (Fig. 11)"
        )
    )
    console.print(_table(["controller", "deadline-hit ratio", "paper", "non-rt throughput /s"], rows, left=1))
    gains = summary.get("sara_throughput_gain", {})
    if gains:
        rows = [[b, _fmt(g.get("ratio_of_means")), _fmt(g.get("paper_mean"))] for b, g in gains.items()]
        console.print(Text("SARA's non-real-time throughput over the baseline's"))
        console.print(_table(["baseline", "model", "paper"], rows, left=1))
    fig7 = summary.get("fig7", {})
    if fig7:
        rows = [[w, _fmt(f.get("slope")), _fmt(f.get("intercept_ms")), _fmt(f.get("configured_bcet_ms"))] for w, f in fig7.items()]
        console.print(Text("execution time against stall per period (Fig. 7)"))
        console.print(_table(["workload", "slope", "intercept ms", "configured BCET ms"], rows, left=1))


def _cmd_reproduce(args: argparse.Namespace) -> int:
    from critmem.sweep import SCHEDULER_ENV, SweepError, executor_for

    paper = get(args.paper)
    if not paper.sweeps and (args.scheduler is not None or args.workers is not None):
        raise CliError(
            f"{paper.name} runs its simulations one after another (each depends on the last); --scheduler and --workers are for sara"
        )
    out_dir = _prepare_out_dir(args.out if args.out is not None else str(paper.default_out))
    started = time.monotonic()
    # The bar goes to stderr; with --json a script reads the output, so it stays quiet.
    progress = BarProgress() if sys.stderr.isatty() and not args.json else QuietProgress()
    try:
        executor = executor_for(args.scheduler, args.workers) if paper.sweeps else None
        with progress:
            reproduction = paper.run(out_dir, quick=args.quick, progress=progress, executor=executor)
    except SweepError as e:
        where = f" (from {SCHEDULER_ENV})" if args.scheduler is None and os.environ.get(SCHEDULER_ENV) else ""
        raise CliError(f"{e}{where}") from None
    elapsed = time.monotonic() - started
    note = sys.stderr if args.json else sys.stdout
    if args.json:
        sys.stdout.write(json.dumps(reproduction.summary, allow_nan=False) + "\n")
    else:
        _print_reproduction(reproduction.summary)
    files = ", ".join(p.name for p in reproduction.files)
    print(f"wrote {files} to {out_dir}/ in {elapsed:.1f} s", file=note)
    return 0


# ---------------------------------------------------------------------------------------
# Parser and entry point

_DESCRIPTION = """\
critmem: predictable memory management for mixed-criticality real-time systems.
Simulates scenario files (TOML) deterministically and analyses their schedulability."""

_EPILOG = """\
examples:
  critmem run examples/quickstart.toml
  critmem run examples/quickstart.toml --seed 7 --out results/quickstart
  critmem run examples/rm-textbook.toml --json
  critmem analyze examples/rm-textbook.toml
  critmem reproduce shared-pages
  sudo critmem run examples/linux-sara.toml --platform linux --duration 60s
  sudo critmem swap setup --size 4G

Errors print one line on stderr and exit with code 2."""

_RUN_EPILOG = """\
examples:
  critmem run examples/quickstart.toml
  critmem run examples/quickstart.toml --seed 7 --horizon-ms 500 --out results/q7
  critmem run examples/rm-textbook.toml --json | python3 -m json.tool

--out DIR writes jobs.csv (one row per job), segments.csv (one row per stretch a job
ran on a CPU), summary.json (as --json prints it) and gantt.png; for a scenario with
[memory], also memory_timeline.csv and memory.png (resident pages per reservation and
per task, and reserved physical memory, over time). With --platform linux, --out DIR
writes summary.json, timeline.csv and memory.png (usage and limit of every group over
time)."""

_ANALYZE_EPILOG = """\
examples:
  critmem analyze examples/rm-textbook.toml
  critmem analyze examples/partitioned-fp.toml --json"""


def _reproduce_epilog() -> str:
    papers = "\n".join(f"  {p.name:<14} {p.summary}" for p in PAPERS.values())
    return f"""\
papers:
{papers}

examples:
  critmem reproduce shared-pages
  critmem reproduce shared-pages --quick --out /tmp/sp
  critmem reproduce shared-pages --json | python3 -m json.tool
  critmem reproduce sara --quick
  critmem reproduce sara --scheduler tcp://127.0.0.1:8786 --out results/sara

sara runs its simulations on local worker processes (--workers N, default one per core) or
on a Dask cluster (--scheduler tcp://HOST:PORT, or CRITMEM_DASK_SCHEDULER), with the same
results either way; each result is kept in DIR/.critmem-sweep as it arrives, so a run that
was stopped resumes where it left off.

Writes report.md (each table and figure beside the paper's own numbers), PNG figures and
results.json (identical bytes for identical code) to DIR, by simulation only; shared-pages
also writes table2.md and table2.json (wall-clock timings of the simulator's memory operations, which vary
from run to run). Without --json the headline numbers are printed as tables."""


def build_parser() -> argparse.ArgumentParser:
    fmt = argparse.RawDescriptionHelpFormatter
    parser = _Parser(prog="critmem", description=_DESCRIPTION, epilog=_EPILOG, formatter_class=fmt)
    parser.add_argument("--version", action="version", version=f"critmem {__version__}")
    commands = parser.add_subparsers(title="commands", dest="command", metavar="COMMAND", required=True)

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
        "--out", metavar="DIR", type=_out_dir,
        help="also write jobs.csv, segments.csv, summary.json and gantt.png to DIR (with [memory]: memory_timeline.csv, memory.png; on linux: summary.json, timeline.csv, memory.png)",
    )  # fmt: skip
    run.add_argument("--seed", type=_seed, metavar="N", help="seed for random execution times and arrivals (default: [run] seed, else 0)")
    run.add_argument(
        "--horizon-ms", type=_positive_ms, metavar="X",
        help="simulated time in ms (default: [run] horizon_ms, else one hyperperiod plus the largest offset)",
    )  # fmt: skip
    run.add_argument(
        "--platform", choices=["sim", "linux"], default="sim",
        help="sim (default): simulate; linux: run the tasks as real processes in cgroups (root)",
    )  # fmt: skip
    run.add_argument("--duration", metavar="D", help="linux: how long the processes run, e.g. 60s, 2m (default 60s)")
    run.add_argument(
        "--controller", metavar="NAME",
        help=f"linux: controller in place of the scenario's: {', '.join(c.name for c in controllers())}",
    )  # fmt: skip
    run.add_argument(
        "--controller-config",
        metavar="JSON",
        help="linux: the controller's parameters as a JSON object, e.g. '{\"limit_bytes\": 67108864}'",
    )
    run.set_defaults(handler=_cmd_run)

    analyze = commands.add_parser(
        "analyze",
        help="run the schedulability analyses for a scenario",
        description="Run the analyses that apply to FILE's scheduler (response-time analysis for\n"
        "fixed priorities, EDF utilization and processor-demand tests, the global-EDF\n"
        "bounded-tardiness condition, a cyclic table's slot supply) and print the per-task\n"
        "results, each test and the verdict.",
        epilog=_ANALYZE_EPILOG,
        formatter_class=fmt,
    )
    analyze.add_argument("file", metavar="FILE", help="scenario file (.toml or .json)")
    analyze.add_argument("--json", action="store_true", help="print the analysis report as one JSON object")
    analyze.set_defaults(handler=_cmd_analyze)

    reproduce = commands.add_parser(
        "reproduce",
        help="regenerate a paper's tables and figures by simulation",
        description="Regenerate PAPER's experiments from scratch in the simulator and write a report\n"
        "with the results beside the paper's own numbers.",
        epilog=_reproduce_epilog(),
        formatter_class=fmt,
    )
    reproduce.add_argument("paper", metavar="PAPER", choices=sorted(PAPERS), help=f"one of: {', '.join(sorted(PAPERS))}")
    reproduce.add_argument("--out", metavar="DIR", type=_out_dir, help="output folder (default: results/reproduce/PAPER)")
    reproduce.add_argument("--json", action="store_true", help="print the headline numbers as one JSON object")
    reproduce.add_argument("--quick", action="store_true", help="a reduced version: fewer periods and runs (a first look; under a minute)")
    reproduce.add_argument(
        "--scheduler", metavar="ADDRESS", type=_scheduler_address,
        help="sara: run the simulations on the Dask cluster of this scheduler, e.g. tcp://127.0.0.1:8786 (default: $CRITMEM_DASK_SCHEDULER, else local processes)",
    )  # fmt: skip
    reproduce.add_argument("--workers", metavar="N", type=_workers, help="sara: local worker processes (default: one per core)")
    reproduce.set_defaults(handler=_cmd_reproduce)

    agent = commands.add_parser(
        "agent",
        help="run the memory agent daemon over existing cgroups (root)",
        description="Run critmem-agent with FILE: it controls the configured cgroups' memory from PSI\n"
        "until SIGINT/SIGTERM, then restores every value it changed (also after a crash, on the\n"
        "next start). See crates/linux/dist/agent.example.toml and critmem-agent.service.",
        epilog="examples:\n  sudo critmem agent --config /etc/critmem/agent.toml\n  sudo critmem agent --config agent.toml --dry-run --duration 30s",
        formatter_class=fmt,
    )
    agent.add_argument("--config", metavar="FILE", required=True, help="agent configuration (TOML)")
    agent.add_argument("--dry-run", action="store_true", help="log the writes the controller asks for; change nothing")
    agent.add_argument("--duration", metavar="D", help="stop (restoring everything) after D, e.g. 60s")
    agent.add_argument("--log-level", choices=["error", "warn", "info", "debug", "trace"], help="log level (default info)")
    agent.set_defaults(handler=_cmd_agent)

    swap = commands.add_parser(
        "swap",
        help="set up or tear down critmem's own swapfile (root)",
        description="Manage a swapfile of critmem's own (recorded in a state file, labelled critmem-swap);\n"
        "teardown removes exactly that file and never touches any other swap.",
        epilog="examples:\n  sudo critmem swap setup --size 4G\n  sudo critmem swap teardown\n  critmem swap status",
        formatter_class=fmt,
    )
    swap.add_argument("action", choices=["setup", "teardown", "status"], metavar="ACTION", help="setup, teardown or status")
    swap.add_argument("--size", metavar="SIZE", help="setup: size, e.g. 4G, 512M")
    swap.add_argument("--path", metavar="FILE", help="setup: where (ext4/xfs; default /var/lib/critmem/critmem.swap)")
    swap.add_argument("--state-file", metavar="FILE", help="where critmem records its swapfile (default /var/lib/critmem/swap.json)")
    swap.set_defaults(handler=_cmd_swap)
    return parser


_MAX_ERROR_CHARS = 2000


def _fail(message: str, code: int = EXIT_USAGE) -> int:
    one_line = " ".join(message.split())
    # A value echoed from the input can be megabytes long; the line stays readable. Its middle
    # goes: a long path comes first and the reason last, and both must stay.
    if len(one_line) > _MAX_ERROR_CHARS:
        head, tail = _MAX_ERROR_CHARS * 3 // 5, _MAX_ERROR_CHARS * 2 // 5
        left_out = len(one_line) - head - tail
        one_line = f"{one_line[:head]} … ({left_out} more characters) … {one_line[-tail:]}"
    print(f"critmem: error: {one_line}", file=sys.stderr)
    return code


def _fail_os(e: OSError) -> int:
    where = f"{e.filename or repr(e.filename)}: " if e.filename is not None else ""
    return _fail(f"{where}{e.strerror or e}")


def _stdout_reader_gone() -> bool:
    """Whether stdout is a pipe or socket whose reader has closed it (poll reports POLLERR)."""
    try:
        fd = sys.stdout.fileno()
    except (OSError, ValueError):  # replaced by an object without a descriptor
        return False
    poller = select.poll()
    poller.register(fd, select.POLLOUT)
    return any(events & select.POLLERR for _, events in poller.poll(0))


def _quiet_closed_stdout() -> int:
    """The reader of stdout went away (`critmem ... | head`): stop quietly, as rich does."""
    # Python would otherwise fail again flushing stdout at exit and print a traceback.
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    finally:
        os.close(devnull)
    return EXIT_CLOSED_OUTPUT


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the command line; returns the exit code (0 ok, 1 stdout closed early, 2 user
    error, 70 internal error)."""
    try:
        parser = build_parser()
        args, unknown = parser.parse_known_args(argv)
        if unknown:
            # parse_args would blame the top-level parser and point to 'critmem --help'.
            raise CliError(f"unrecognized arguments: {' '.join(unknown)} (see '{parser.prog} {args.command} --help')")
        handler: Callable[[argparse.Namespace], int] = args.handler
        code = handler(args)
        # Flushed here, not at exit, so a closed pipe is seen while it can still be handled.
        sys.stdout.flush()
        # A large write cut short by the reader leaving can return without an error.
        return _quiet_closed_stdout() if _stdout_reader_gone() else code
    except SystemExit as e:  # --help and --version; rich's console exits 1 on a closed pipe
        return e.code if isinstance(e.code, int) else 0
    except BrokenPipeError as e:
        if _stdout_reader_gone():
            return _quiet_closed_stdout()
        return _fail_os(e)
    except CliError as e:
        return _fail(str(e))
    except ScenarioError as e:
        return _fail(str(e))
    except LinuxError as e:
        return _fail(str(e))
    except OSError as e:
        return _fail_os(e)
    except KeyboardInterrupt:
        return 130
    except BaseException as e:  # noqa: BLE001 — includes pyo3's PanicException
        return _fail(f"internal error ({type(e).__name__}: {e}); please report it", EXIT_INTERNAL)
