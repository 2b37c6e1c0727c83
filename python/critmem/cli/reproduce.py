"""`critmem reproduce PAPER` and `critmem study mc2`: a paper's experiments run, their headline
printed by the paper's own package and their acceptance checks judged."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from critmem.cli import argtypes
from critmem.cli.errors import CliError, _Parser
from critmem.cli.outdir import _prepare_out_dir
from critmem.cli.tables import _console, _table, _text, _visible
from critmem.progress import BarProgress, QuietProgress
from critmem.reproduce import PAPERS, Paper, get

if TYPE_CHECKING:
    from critmem.progress import Progress
    from critmem.reproduce import Reproduction
    from critmem.reproduce.checks import Check
    from critmem.sweep import Executor


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
  critmem reproduce tmem --quick --json
  critmem reproduce hires --platform sim --quick
  sudo critmem reproduce hires --json    # the simulator and this machine (nested cgroups)
  sudo critmem reproduce sara --platform linux --periods 500   # the shipped apps on this machine
  sudo critmem reproduce sara --platform linux --repeat 8      # 8 interleaved runs per controller
  sudo critmem reproduce sara --platform linux --pair speech+tables   # a pair held out from development
  critmem reproduce mc2 --quick --json

sara, tmem and mc2 run their simulations on local worker processes (--workers N, default one per core) or
on a Dask cluster (--scheduler tcp://HOST:PORT, or CRITMEM_DASK_SCHEDULER), with the same
results either way; each result is kept in DIR/.critmem-sweep as it arrives, so a run that
was stopped resumes where it left off.

Writes report.md (each table and figure beside the paper's own numbers), PNG figures and
results.json (identical bytes for identical code) to DIR, by simulation only; shared-pages
also writes table2.md and table2.json (wall-clock timings of the simulator's memory operations, which vary
from run to run). Without --json the headline numbers are printed as tables."""


def _cmd_reproduce(args: argparse.Namespace) -> int:
    paper = get(args.paper)
    if not paper.sweeps and (args.scheduler is not None or args.workers is not None):
        raise CliError(
            f"{paper.name} runs its simulations one after another (each depends on the last); --scheduler and --workers are for "
            + " and ".join(p.name for p in PAPERS.values() if p.sweeps)
        )
    platforms: tuple[str, ...] | None = None
    if args.platform is not None:
        if args.platform not in paper.platforms:
            others = " and ".join(p.name for p in PAPERS.values() if args.platform in p.platforms)
            raise CliError(
                f"{paper.name} runs on the {' and '.join(paper.platforms)} platform only; --platform {args.platform} is for {others}"
            )
        platforms = (args.platform,)
    options: dict[str, Any] = {}
    if args.periods is not None:
        if "periods" not in paper.options or platforms != ("linux",):
            raise CliError("--periods is for sara --platform linux (the simulator's length is set by --quick)")
        options["periods"] = args.periods
    if args.repeat is not None:
        if "repeats" not in paper.options or platforms != ("linux",):
            raise CliError("--repeat is for sara --platform linux (the simulator is deterministic: one run says it all)")
        options["repeats"] = args.repeat
    if args.pair:
        if "pairs" not in paper.options or platforms != ("linux",):
            raise CliError("--pair is for sara --platform linux (the simulator's workloads are the paper's)")
        from critmem.reproduce.sara.machine import check_pairs

        try:
            check_pairs(args.pair)
        except ValueError as e:
            raise CliError(f"--pair: {e}") from None
        options["pairs"] = args.pair
    if "linux" in (platforms or paper.defaults) and os.geteuid() != 0:
        raise CliError(
            f"not root: the Linux parts of reproduce {paper.name} apply cgroups and need root; run it with sudo, or --platform sim for the simulator's parts alone"
        )
    out_dir = _prepare_out_dir(args.out if args.out is not None else str(paper.default_out))

    def run(progress: Progress, executor: Executor | None) -> Reproduction:
        return paper.run(out_dir, quick=args.quick, progress=progress, executor=executor, platforms=platforms, **options)

    # On this machine alone, nothing is simulated on a sweep.
    return _run_reproduction(args, paper, out_dir, run, sweeps=paper.sweeps and platforms != ("linux",))


def _run_reproduction(
    args: argparse.Namespace, paper: Paper, out_dir: Path, run: Callable[[Progress, Executor | None], Reproduction], *, sweeps: bool
) -> int:
    """Runs a reproduction or study of `paper` with a progress bar and the executor the
    arguments name, and prints its headline and checks (or its --json)."""
    from critmem.sweep import SCHEDULER_ENV, SweepError, executor_for

    started = time.monotonic()
    # The bar goes to stderr; with --json a script reads the output, so it stays quiet.
    progress = BarProgress() if sys.stderr.isatty() and not args.json else QuietProgress()
    try:
        executor = executor_for(args.scheduler, args.workers) if sweeps else None
        with progress:
            reproduction = run(progress, executor)
    except SweepError as e:
        where = f" (from {SCHEDULER_ENV})" if args.scheduler is None and os.environ.get(SCHEDULER_ENV) else ""
        raise CliError(f"{e}{where}") from None
    elapsed = time.monotonic() - started
    note = sys.stderr if args.json else sys.stdout
    if args.json:
        sys.stdout.write(json.dumps(reproduction.summary, allow_nan=False) + "\n")
    else:
        paper.print_headline(_console(), reproduction.summary)
        _print_checks(reproduction.checks)
    files = ", ".join(p.relative_to(out_dir).as_posix() if p.is_relative_to(out_dir) else p.name for p in reproduction.files)
    print(f"wrote {files} to {out_dir}/ in {elapsed:.1f} s", file=note)
    return _check_reproduction(reproduction.checks) if args.check else 0


def _cmd_study(args: argparse.Namespace) -> int:
    """`critmem study mc2`: the MC² schedulability study, with its plan's knobs."""
    from dataclasses import replace

    from critmem.reproduce import mc2
    from critmem.reproduce.mc2 import study

    plan = study.quick_plan(args.seed) if args.quick else study.Plan(seed=args.seed)
    try:
        if args.scenarios:
            chosen = set(study.select_scenarios(args.scenarios))
            scenarios = [s for s in plan.scenario_list() if s in chosen]
            if not scenarios:
                raise CliError(f"--scenarios {' '.join(args.scenarios)}: no scenario{' of --quick' if args.quick else ''} matches")
            plan = replace(plan, scenarios=tuple(scenarios))
        plan = replace(plan, step=args.step if args.step is not None else plan.step)
        plan.validate()
    except ValueError as e:
        raise CliError(str(e)) from None
    out_dir = _prepare_out_dir(args.out if args.out is not None else str(Path("results") / "study" / "mc2"))

    def run(progress: Progress, executor: Executor | None) -> Reproduction:
        return mc2.reproduce(out_dir, progress=progress, plan=plan, executor=executor)

    return _run_reproduction(args, get("mc2"), out_dir, run, sweeps=True)


def _print_checks(checks: Sequence[Check]) -> None:
    """The report's acceptance checks: what each expects, what this run measured, and whether it holds."""
    if not checks:
        return
    console = _console()
    console.print(_text("acceptance checks"))
    rows = [[c.name, c.expected, c.measured, "yes" if c.passed else "NO"] for c in checks]
    console.print(_table(["check", "expected", "measured", "holds"], rows, left=3))


def _check_reproduction(checks: Sequence[Check]) -> int:
    """`reproduce --check`: 1, with the checks that do not hold named on stderr, if any does not."""
    from critmem.reproduce.checks import failed

    bad = failed(checks)
    if not bad:
        return 0
    names = "; ".join(f"{c.name} (expected {c.expected}, measured {c.measured})" for c in bad)
    print(f"critmem: check failed: {_visible(names)}", file=sys.stderr)
    return 1


def register(commands: argparse._SubParsersAction[_Parser]) -> None:
    """Adds `critmem reproduce` and `critmem study`."""
    fmt = argparse.RawDescriptionHelpFormatter
    reproduce = commands.add_parser(
        "reproduce",
        help="regenerate a paper's tables and figures by simulation",
        description="Regenerate PAPER's experiments from scratch in the simulator and write a report\n"
        "with the results beside the paper's own numbers.",
        epilog=_reproduce_epilog(),
        formatter_class=fmt,
    )
    reproduce.add_argument("paper", metavar="PAPER", choices=sorted(PAPERS), help=f"one of: {', '.join(sorted(PAPERS))}")
    reproduce.add_argument("--out", metavar="DIR", type=argtypes.out_dir, help="output folder (default: results/reproduce/PAPER)")
    reproduce.add_argument("--json", action="store_true", help="print the headline numbers as one JSON object")
    reproduce.add_argument("--quick", action="store_true", help="a reduced version: fewer periods and runs (a first look; under a minute)")
    reproduce.add_argument(
        "--check", action="store_true", help="exit 1 when one of the report's acceptance checks does not hold (naming it on stderr)"
    )
    reproduce.add_argument(
        "--scheduler", metavar="ADDRESS", type=argtypes.scheduler_address,
        help="sara, tmem, mc2: run the simulations on the Dask cluster of this scheduler, e.g. tcp://127.0.0.1:8786 (default: $CRITMEM_DASK_SCHEDULER, else local processes)",
    )  # fmt: skip
    reproduce.add_argument(
        "--workers", metavar="N", type=argtypes.int_at_least(1), help="sara, tmem, mc2: local worker processes (default: one per core)"
    )
    reproduce.add_argument(
        "--platform", choices=["sim", "linux"],
        help="hires: run only the simulator's parts, or only the real-Linux parts (these need root); default: both. "
        "sara: linux runs Fig. 11 with critmem's shipped apps on this machine (root); default: sim",
    )  # fmt: skip
    reproduce.add_argument(
        "--periods", metavar="N", type=argtypes.int_at_least(3),
        help="sara --platform linux: soft real-time jobs per run (default: about half a minute a run, longer where the non-real-time app's work units are so slow that a run would hold fewer than 8 of them; the paper's 500)",
    )  # fmt: skip
    reproduce.set_defaults(handler=_cmd_reproduce)
    reproduce.add_argument(
        "--repeat", metavar="N", type=argtypes.int_at_least(1),
        help="sara --platform linux: runs of every controller at every configuration, interleaved, judged on their "
        "means and 95 %% intervals (default: 5, the fewest the judgement accepts; 1 with --quick); a stopped run "
        "resumes from the runs it finished",
    )  # fmt: skip
    reproduce.add_argument(
        "--pair", metavar="SRT+NRT", type=argtypes.sara_pair, action="append",
        help="sara --platform linux: run this soft real-time app beside this non-real-time app (soft real-time: speech, vision; "
        "non-real-time: graph, tables), instead of Fig. 11's; repeat for more pairs, one per soft real-time app, all beside one "
        "non-real-time app (default: speech+graph and vision+graph; with --quick, speech+graph)",
    )  # fmt: skip

    study = commands.add_parser(
        "study",
        help="run a large schedulability study (MC²'s)",
        description="Run a paper's schedulability study on local worker processes or a Dask cluster,\n"
        "with each work item's result kept in DIR/.critmem-sweep so a stopped study resumes.",
        epilog="examples:\n  critmem study mc2 --quick\n  critmem study mc2 --scenarios ipc_size=Large --step 0.5 --json\n"
        "  critmem study mc2 --scheduler tcp://127.0.0.1:8786 --out results/mc2",
        formatter_class=fmt,
    )
    studies = study.add_subparsers(title="studies", dest="study", metavar="STUDY", required=True)
    mc2 = studies.add_parser(
        "mc2",
        help="MC²'s study: 648 scenarios under nine IPC/I/O buffer schemes (Sec. 6)",
        description="The schedulability study of MC² (Sec. 6): per scenario (one choice per category of Table 3)\n"
        "the fraction of task systems schedulable under each of the nine schemes against system\n"
        "utilisation, drawn until each point is within ±0.05 at 95 % confidence; their schedulable-\n"
        "utilisation areas and ratios beside the paper's. Writes report.md, points.csv/.parquet,\n"
        "sua.csv, fig15.png, fig8.png, fig14.png, grid/index.html and results.json (the same bytes\n"
        "for the same code and seed), and timing.md/timing.json.",
        epilog="examples:\n  critmem study mc2 --quick\n  critmem study mc2 --scenarios ipc_size=Large,period=Short --step 0.5\n"
        "  critmem study mc2 --workers 8 --out results/mc2 --check",
        formatter_class=fmt,
    )
    mc2.add_argument("--out", metavar="DIR", type=argtypes.out_dir, help="output folder (default: results/study/mc2)")
    mc2.add_argument("--json", action="store_true", help="print the headline numbers as one JSON object")
    mc2.add_argument("--quick", action="store_true", help="a dozen scenarios, Fig. 15's three among them (under two minutes on two cores)")
    mc2.add_argument(
        "--check", action="store_true", help="exit 1 when one of the report's acceptance checks does not hold (naming it on stderr)"
    )
    mc2.add_argument("--seed", type=argtypes.seed, default=1, metavar="N", help="the study's seed (default 1)")
    mc2.add_argument("--step", type=argtypes.positive_number, metavar="X", help="the system-utilisation grid's step (default 0.25)")
    mc2.add_argument(
        "--scenarios", metavar="CATEGORY=CHOICE,...", action="append",
        help="only the scenarios with these choices (a category named twice: either), e.g. ipc_size=Large,io_bandwidth=High",
    )  # fmt: skip
    mc2.add_argument(
        "--scheduler", metavar="ADDRESS", type=argtypes.scheduler_address,
        help="run on the Dask cluster of this scheduler, e.g. tcp://127.0.0.1:8786 (default: $CRITMEM_DASK_SCHEDULER, else local processes)",
    )  # fmt: skip
    mc2.add_argument("--workers", metavar="N", type=argtypes.int_at_least(1), help="local worker processes (default: one per core)")
    mc2.set_defaults(handler=_cmd_study)
