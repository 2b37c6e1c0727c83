"""The `critmem` command.

Every failure a user can cause (a bad file, scenario, argument or output folder) ends as
one line `critmem: error: ...` on stderr and exit code 2; never a traceback.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from critmem import __version__
from critmem._core import ScenarioError
from critmem._source import read_path
from critmem.api import AnalysisResult, RunResult, _analyze_source, _run_source

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
    rows = []
    for t in s["tasks"]:
        hit = t["hit_ratio"]
        rows.append(
            [
                t["name"],
                t["criticality"],
                _fmt(t["cpu"]),
                _fmt(t["jobs"]),
                _fmt(t["completed"]),
                _fmt(t["deadline_misses"]),
                "-" if hit is None else f"{100 * hit:.1f}%",
                _fmt(t["max_response_ms"]),
                _fmt(t["mean_response_ms"]),
                _fmt(t["max_tardiness_ms"]),
            ]
        )
    columns = ["task", "crit", "cpu", "released", "completed", "misses", "hit ratio",
               "max resp ms", "mean resp ms", "max tard ms"]  # fmt: skip
    console.print(_table(columns, rows, left=2))


def _prepare_out_dir(out: str) -> Path:
    path = Path(out)
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
    try:
        result.jobs.to_csv(jobs_csv, index=False, lineterminator="\n")
        result.segments.to_csv(segments_csv, index=False, lineterminator="\n")
        summary_json.write_text(result.to_json() + "\n", encoding="utf-8")
        gantt_png = plot_gantt(result, out_dir / "gantt.png")
    except OSError as e:
        raise CliError(f"cannot write results to {str(out_dir)!r}: {e.strerror or e}") from None
    return [jobs_csv, segments_csv, summary_json, gantt_png]


def _cmd_run(args: argparse.Namespace) -> int:
    src = read_path(args.file)
    out_dir = _prepare_out_dir(args.out) if args.out is not None else None
    record = out_dir is not None
    result = _run_source(
        src, seed=args.seed, horizon_ms=args.horizon_ms, record_jobs=record, record_segments=record
    )
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
            f"wrote {files} to {out_dir}/ ({_plural(len(result.jobs), 'job')}, "
            f"{_plural(len(result.segments), 'segment')})",
            file=note,
        )
    return 0


# ---------------------------------------------------------------------------------------
# critmem analyze


def _print_analysis(result: AnalysisResult) -> None:
    console = _console()
    r = result.report
    console.print(
        Text(
            f"{r['scenario']}: {r['scheduler']} on {_plural(r['cpus'], 'CPU')}, "
            f"total utilization {_fmt(r['total_utilization'])}"
        )
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

Errors print one line on stderr and exit with code 2."""

_RUN_EPILOG = """\
examples:
  critmem run examples/quickstart.toml
  critmem run examples/quickstart.toml --seed 7 --horizon-ms 500 --out results/q7
  critmem run examples/rm-textbook.toml --json | python3 -m json.tool

--out DIR writes jobs.csv (one row per job), segments.csv (one row per stretch a job
ran on a CPU), summary.json (as --json prints it) and gantt.png."""

_ANALYZE_EPILOG = """\
examples:
  critmem analyze examples/rm-textbook.toml
  critmem analyze examples/partitioned-fp.toml --json"""


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
    run.add_argument("--out", metavar="DIR", help="also write jobs.csv, segments.csv, summary.json and gantt.png to DIR")
    run.add_argument("--seed", type=_seed, metavar="N", help="seed for random execution times and arrivals (default: [run] seed, else 0)")
    run.add_argument(
        "--horizon-ms", type=_positive_ms, metavar="X",
        help="simulated time in ms (default: [run] horizon_ms, else one hyperperiod plus the largest offset)",
    )  # fmt: skip
    run.set_defaults(handler=_cmd_run)

    analyze = commands.add_parser(
        "analyze",
        help="run the schedulability analyses for a scenario",
        description="Run the analyses that apply to FILE's scheduler (response-time analysis for\n"
        "fixed priorities, EDF utilization and processor-demand tests, the global-EDF\n"
        "bounded-tardiness condition) and print the per-task results, each test and the verdict.",
        epilog=_ANALYZE_EPILOG,
        formatter_class=fmt,
    )
    analyze.add_argument("file", metavar="FILE", help="scenario file (.toml or .json)")
    analyze.add_argument("--json", action="store_true", help="print the analysis report as one JSON object")
    analyze.set_defaults(handler=_cmd_analyze)
    return parser


def _fail(message: str, code: int = EXIT_USAGE) -> int:
    one_line = " ".join(message.split())
    print(f"critmem: error: {one_line}", file=sys.stderr)
    return code


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the command line; returns the exit code (0 ok, 2 user error, 70 internal error)."""
    try:
        args = build_parser().parse_args(argv)
        handler: Callable[[argparse.Namespace], int] = args.handler
        return handler(args)
    except SystemExit as e:  # --help and --version
        return e.code if isinstance(e.code, int) else 0
    except CliError as e:
        return _fail(str(e))
    except ScenarioError as e:
        return _fail(str(e))
    except OSError as e:
        where = f"{e.filename}: " if e.filename is not None else ""
        return _fail(f"{where}{e.strerror or e}")
    except KeyboardInterrupt:
        return 130
    except BaseException as e:  # noqa: BLE001 — includes pyo3's PanicException
        return _fail(f"internal error ({type(e).__name__}: {e}); please report it", EXIT_INTERNAL)
