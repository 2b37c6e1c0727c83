"""`critmem analyze`, `validate`, `init` and `generate`: scenarios checked, analysed and written."""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from critmem import _core
from critmem._core import ScenarioError
from critmem._source import read_path
from critmem.cli import argtypes
from critmem.cli.errors import CliError, _Parser
from critmem.cli.outdir import _prepare_out_dir, _write_file
from critmem.cli.run_tables import _memory_reserve
from critmem.cli.tables import _console, _fmt, _plural, _print_warnings, _table, _text, _visible
from critmem.plugins import scenario_dir

if TYPE_CHECKING:
    from rich.console import Console

    from critmem.api import AnalysisResult

_ANALYZE_EPILOG = """\
examples:
  critmem examples copy rm-textbook
  critmem analyze rm-textbook.toml
  critmem examples copy partitioned-fp
  critmem analyze partitioned-fp.toml --json
  critmem examples copy overload
  critmem analyze overload.toml --check   # exit 1: not schedulable

What the analyses leave out (page faults and swap waits under [memory], a [control]
controller) is listed under "not covered" (`not_covered` in --json); `critmem run` shows
its effect."""


def _print_analysis(result: AnalysisResult) -> None:
    console = _console()
    r = result.report
    console.print(
        _text(f"{r['scenario']}: {r['scheduler']} on {_plural(r['cpus'], 'CPU')}, total utilization {_fmt(r['total_utilization'])}")
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
    if r.get("resources") is not None:
        _print_blocking(console, r)
    if r.get("servers") is not None:
        _print_server_analysis(console, r["servers"])
    test_rows = [[t["name"], _fmt(t["cpu"]), _words(t["verdict"]), t["detail"]] for t in r["tests"]]
    console.print(_table(["test", "cpu", "verdict", "detail"], test_rows, left=4))
    console.print(_text(f"verdict: {_words(result.verdict)}"))
    for line in r.get("not_covered", []):
        console.print(_text(f"not covered: {line}"))


def _section(sec: dict[str, Any]) -> str:
    within = f" in {sec['within']}" if sec["within"] is not None else ""
    return f"{sec['resource']}×{sec['units']} {_fmt(sec['duration_ms'])}{within}"


def _print_blocking(console: Console, r: dict[str, Any]) -> None:
    """Per task: its critical sections (resource×units, ms held), blocking term and bound."""
    rows = []
    for t, b in zip(r["tasks"], r["resources"]["tasks"], strict=True):
        sections = ", ".join(_section(sec) for sec in b["sections"]) or "-"
        rows.append([t["name"], sections, _fmt(b["blocking_ms"]), _fmt(t["response_time_ms"]), _fmt(t["schedulable"])])
    console.print(_table(["task", "critical sections (ms held)", "blocking ms", "response ms", "meets deadline"], rows, left=2))
    for b in r["resources"]["tasks"]:
        if b["blocking_ms"] is None and b["note"]:
            console.print(_text(f"{b['name']}: {b['note']}"))


def _print_server_analysis(console: Console, servers: list[dict[str, Any]]) -> None:
    """Per server: budget and period, what it is guaranteed and the supply its children see;
    with a server memory reservation, each server's reservation."""
    columns = ["server", "parent", "kind", "cpu", "budget ms", "period ms", "response ms", "guaranteed ms",
               "supply blackout ms", "backlogged share", "whole budget"]  # fmt: skip
    keys = ["cpu", "budget_ms", "period_ms", "response_ms", "guaranteed_budget_ms", "supply_blackout_ms", "backlogged_share"]
    memory = any("memory_reserved_mb" in s for s in servers)
    if memory:
        columns.append("memory MiB")
    rows = []
    for s in servers:
        whole = "-" if s["kind"] == "level" else _fmt(s["verdict"] == "schedulable")
        reserve = [_memory_reserve(s.get("memory_reserved_mb"), s.get("memory_kind"))] if memory else []
        rows.append([s["name"], s["parent"], s["kind"], *(_fmt(s[k]) for k in keys), whole, *reserve])
    console.print(_table(columns, rows, left=3))
    for s in servers:
        if s["detail"]:
            console.print(_text(f"{s['name']}: {s['detail']}"))


def _cmd_analyze(args: argparse.Namespace) -> int:
    src = read_path(args.file)
    if args.json:
        with scenario_dir(src.directory):
            report_json, warnings = _core.analyze(src.text, src.name, src.format)
        _print_warnings(warnings)
        sys.stdout.write(report_json + "\n")
        return _check_verdicts(json.loads(report_json)["tests"]) if args.check else 0
    from critmem.api import _analyze_source

    result = _analyze_source(src, warn=False)
    _print_warnings(result.warnings)
    _print_analysis(result)
    return _check_verdicts(result.report["tests"]) if args.check else 0


def _check_verdicts(tests: Sequence[dict[str, Any]]) -> int:
    """`analyze --check`: 1, with the failing tests named on stderr, if any test fails."""
    failed = [t for t in tests if t["verdict"] in _FAILING_VERDICTS]
    if not failed:
        return 0
    names = ", ".join(t["name"] if t["cpu"] is None else f"{t['name']} (CPU {t['cpu']})" for t in failed)
    print(f"critmem: check failed: {_visible(names)}", file=sys.stderr)
    return 1


def _cmd_validate(args: argparse.Namespace) -> int:
    failures: list[str] = []
    for name in args.files:
        try:
            src = read_path(name)
            with scenario_dir(src.directory):
                loaded = json.loads(_core.validate(src.text, src.name, src.format))
        except ScenarioError as e:
            failures.append(str(e))
            continue
        except OSError as e:
            failures.append(f"{e.filename if e.filename is not None else name}: {e.strerror or e}")
            continue
        _print_warnings(loaded["warnings"])
        print(
            _visible(
                f"{name}: ok: {loaded['scheduler']} on {_plural(loaded['cpus'], 'CPU')}, {_plural(loaded['tasks'], 'task')}, "
                f"horizon {loaded['horizon_ms']:g} ms, seed {loaded['seed']}"
            )
        )
    if not failures:
        return 0
    # Still one line, however many files fail.
    if len(failures) == 1:
        raise CliError(failures[0])
    raise CliError(f"{len(failures)} files do not load: " + "; ".join(failures))


def _cmd_init(args: argparse.Namespace) -> int:
    from critmem.starter import STARTER

    if args.file == "-":
        sys.stdout.write(STARTER)
        return 0
    _write_file(args.file, STARTER, args.force)
    print(f"wrote {args.file}: run it with `critmem run {args.file}`")
    return 0


def _cmd_generate(args: argparse.Namespace) -> int:
    import numpy as np

    from critmem import generate as gen

    try:
        low, high, log = gen.parse_periods(args.periods)
    except ValueError as e:
        raise CliError(f"argument --periods: {e}") from None
    if (args.tasks is None) == (args.schedcat is None):
        raise CliError("give --tasks N with --utilization U, or --schedcat NAME with --utilization as its cap")
    if args.schedcat is not None and args.schedcat not in gen.UTILIZATIONS:
        raise CliError(f"argument --schedcat: {args.schedcat!r} is not one of {', '.join(gen.UTILIZATIONS)}")
    if args.count < 1 or (args.tasks is not None and args.tasks < 1) or not math.isfinite(args.utilization) or args.utilization <= 0:
        raise CliError("--count and --tasks must be at least 1 and --utilization a positive number")
    rng = np.random.default_rng(args.seed)
    sets: list[str] = []
    for _ in range(args.count):
        try:
            if args.schedcat is not None:
                u = gen.schedcat_utilizations(args.schedcat, args.utilization, rng)
                if len(u) == 0:
                    raise ValueError(f"the first task drawn from {args.schedcat} already exceeds the cap {args.utilization}")
            elif args.method == "uunifast":
                u = (
                    gen.uunifast_discard(args.tasks, args.utilization, rng)
                    if args.utilization > 1
                    else gen.uunifast(args.tasks, args.utilization, rng)
                )
            else:
                u = gen.randfixedsum(args.tasks, args.utilization, rng)
        except ValueError as e:
            raise CliError(str(e)) from None
        periods = gen.periods_ms(len(u), rng, low_ms=low, high_ms=high, log_uniform=log)
        horizon = args.horizon_ms if args.horizon_ms is not None else gen.default_horizon_ms(periods)
        scenario = gen.taskset_scenario(u, periods, scheduler=args.scheduler, cpus=args.cpus, horizon_ms=horizon, seed=args.seed)
        text = json.dumps(scenario, indent=1) + "\n" if args.format == "json" else gen.to_toml(scenario)
        # What is written always loads (e.g. a scheduler kind that does not exist does not).
        _core.validate(text, "<generated>", args.format)
        sets.append(text)
    if args.out is None:
        if args.count != 1:
            raise CliError("--count above 1 needs --out DIR")
        sys.stdout.write(sets[0])
        return 0
    out_dir = _prepare_out_dir(args.out)
    names = [out_dir / f"set-{i:04d}.{args.format}" for i in range(len(sets))]
    if any(p.exists() for p in names):
        raise CliError(f"cannot write task sets to {args.out!r}: set-*.{args.format} files are already there")
    try:
        for path, text in zip(names, sets, strict=True):
            path.write_text(text, encoding="utf-8")
    except OSError as e:
        raise CliError(f"cannot write task sets to {args.out!r}: {e.strerror or e}") from None
    print(f"wrote {_plural(len(sets), 'task set')} to {out_dir}/")
    return 0


# Verdicts `analyze --check` fails on; "unknown" passes, as no test could decide.
_FAILING_VERDICTS = ("not_schedulable", "unbounded_tardiness")


def _words(identifier: str) -> str:
    """`not_schedulable` → `not schedulable`, for people."""
    return identifier.replace("_", " ")


def register(commands: argparse._SubParsersAction[_Parser]) -> None:
    """Adds `critmem analyze`, `validate`, `generate` and `init`."""
    fmt = argparse.RawDescriptionHelpFormatter
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
    analyze.add_argument(
        "--check",
        action="store_true",
        help="exit 1 when any test finds the task set not schedulable or its tardiness unbounded (for CI gates)",
    )
    analyze.set_defaults(handler=_cmd_analyze)

    validate = commands.add_parser(
        "validate",
        help="check scenario files without running them",
        description="Load each FILE as `run` would, without simulating it: print one line per file\n"
        "(scheduler, CPUs, tasks, horizon, seed) and any warnings; exit 2 if any file does not load.",
        epilog="examples:\n  critmem examples copy quickstart\n  critmem validate quickstart.toml",
        formatter_class=fmt,
    )
    validate.add_argument("files", metavar="FILE", nargs="+", help="scenario files (.toml or .json)")
    validate.set_defaults(handler=_cmd_validate)

    generate = commands.add_parser(
        "generate",
        help="write random task sets (UUniFast, RandFixedSum, SchedCAT distributions)",
        description="Write random implicit-deadline periodic task sets as scenario files: total\n"
        "utilisation split by RandFixedSum (uniform, default) or UUniFast (-Discard above 1),\n"
        "or drawn per task from a SchedCAT distribution up to a cap; periods uniform or\n"
        "log-uniform, rounded to whole ms. The same --seed gives the same sets.",
        epilog="examples:\n"
        "  critmem generate --tasks 8 --utilization 0.8 --periods log-uniform:10:1000 > set.toml\n"
        "  critmem generate --tasks 20 --utilization 3.2 --cpus 4 --scheduler gedf --count 100 --out sets/\n"
        "  critmem generate --schedcat uni-medium --utilization 2 --periods uni-moderate --cpus 2 --scheduler gedf",
        formatter_class=fmt,
    )
    generate.add_argument("--tasks", type=int, metavar="N", help="tasks per set (with --method)")
    generate.add_argument("--utilization", type=float, metavar="U", required=True, help="total utilisation (the cap with --schedcat)")
    generate.add_argument(
        "--method", choices=["randfixedsum", "uunifast"], default="randfixedsum", help="how U is split (default randfixedsum)"
    )
    generate.add_argument(
        "--schedcat", metavar="NAME",
        help="per-task utilisation distribution: uni-light, uni-medium, uni-heavy, exp-light, exp-medium, exp-heavy, bimo-light, bimo-medium, bimo-heavy",
    )  # fmt: skip
    generate.add_argument(
        "--periods",
        default="log-uniform:10:1000",
        metavar="SPEC",
        help="uniform:LO:HI, log-uniform:LO:HI (ms) or a SchedCAT name such as uni-moderate (default log-uniform:10:1000)",
    )
    generate.add_argument("--scheduler", default="rm", metavar="KIND", help="the sets' [scheduler] kind (default rm)")
    generate.add_argument("--cpus", type=int, default=1, metavar="M", help="the sets' CPUs (default 1)")
    generate.add_argument(
        "--horizon-ms", type=argtypes.positive_ms, metavar="X", help="the sets' horizon (default one hyperperiod, at most 100 s)"
    )
    generate.add_argument("--seed", type=argtypes.seed, default=0, metavar="N", help="random seed (default 0)")
    generate.add_argument("--count", type=int, default=1, metavar="K", help="how many sets (more than 1 needs --out)")
    generate.add_argument("--format", choices=["toml", "json"], default="toml", help="file format (default toml)")
    generate.add_argument(
        "--out", metavar="DIR", type=argtypes.out_dir, help="write set-0000.toml, ... to DIR instead of one set to stdout"
    )
    generate.set_defaults(handler=_cmd_generate)

    init = commands.add_parser(
        "init",
        help="write a commented starter scenario",
        description="Write a commented starter scenario (three periodic tasks under rate-monotonic\n"
        "scheduling, with pointers to memory, controllers, resources and servers) to FILE.",
        epilog="examples:\n  critmem init my.toml && critmem run my.toml\n  critmem init - | less",
        formatter_class=fmt,
    )
    init.add_argument(
        "file", metavar="FILE", nargs="?", default="scenario.toml", help="where to write it (default scenario.toml; - for stdout)"
    )
    init.add_argument("--force", action="store_true", help="replace FILE if it exists")
    init.set_defaults(handler=_cmd_init)
