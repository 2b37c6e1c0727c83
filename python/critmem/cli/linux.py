"""The commands that act on this machine's Linux: `run --platform linux`'s tables, `agent`,
`agent-config`, `swap`, `profile` and `hires` (most of them as root)."""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from critmem._source import read_path
from critmem.cli import argtypes
from critmem.cli.errors import CliError, _Parser
from critmem.cli.outdir import _claim_out_dir, _prepare_out_dir, _record_out, _write_file
from critmem.cli.run_tables import _Column, _GroupRow, _print_groups, _print_stalls, _print_tasks
from critmem.cli.tables import _console, _fmt, _plural, _text
from critmem.linux import DEFAULT_MAX_SLOWDOWN, DEFAULT_MAX_STEPS


def _cmd_run_linux(args: argparse.Namespace) -> int:
    from critmem import linux

    if args.seed is not None or args.horizon_ms is not None or args.parquet or args.gantt_window is not None or args.format != "png":
        raise CliError("--seed, --horizon-ms, --parquet, --gantt-window and --format are for the simulator; on Linux use --duration")
    read_path(args.file)  # a missing or unreadable file is the usual one-line OSError
    duration_s = linux.parse_duration_s(args.duration if args.duration is not None else "60s")
    out_dir = _prepare_out_dir(args.out) if args.out is not None else None
    if out_dir is not None:
        _claim_out_dir(args.out, out_dir, args.force)
    try:
        stop_grace_s = linux.parse_duration_s(args.stop_grace) if args.stop_grace is not None else None
    except linux.LinuxError as e:
        raise CliError(f"--stop-grace: {e}") from None
    summary = linux.run_scenario(args.file, duration_s, args.controller, args.controller_config, stop_grace_s=stop_grace_s)
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
                linux.write_jobs_csv(summary, out_dir / "jobs.csv"),
                linux.write_timeline_csv(summary, out_dir / "timeline.csv"),
                linux.plot_timeline(summary, out_dir / "memory.png"),
            ]
        except OSError as e:
            raise CliError(f"cannot write results to {str(out_dir)!r}: {e.strerror or e}") from None
        _record_out(out_dir, written)
        note = sys.stderr if args.json else sys.stdout
        print(f"wrote {', '.join(p.name for p in written)} to {out_dir}/ ({_plural(len(summary['jobs']), 'job')})", file=note)
        traces = summary["traces"]
        if traces["jobs_left_out"] > 0:
            print(
                f"note: a run keeps at most {traces['limit']:,} job rows, the first released; left out: "
                f"{_plural(traces['jobs_left_out'], 'job')} (the per-task totals count every job; summary.json records this)",
                file=note,
            )
    return 0


def _print_linux_run(summary: dict[str, Any]) -> None:
    """The simulator's per-task table and PSI table, for real processes."""
    console = _console()
    control = summary["control"]
    console.print(
        _text(
            f"{summary['scenario']}: Linux ({summary['backend']}) on {_plural(summary['cpus'], 'CPU')}, "
            f"{summary['horizon_ms'] / 1000:.1f} s under {summary['controller']}, {control['ticks']} ticks of "
            f"{control['interval_ms']:g} ms, {control['tick_cost_mean_us']:.0f} us each ({control['tick_cpu_mean_us']:.0f} us of CPU)"
        )
    )
    extra: list[_Column] = [("MiB/s", lambda t: _fmt(t["verified_mib_per_s"], digits=1))]
    # Only when a command wrote its progress file: most runs have no such task.
    if any(t.get("work_units_per_s") is not None for t in summary["tasks"]):
        extra.append(("work units/s", lambda t: _fmt(t["work_units_per_s"], digits=1)))
    extra.append(("checksum fails", lambda t: _fmt(t["checksum_failures"])))
    _print_tasks(console, summary["tasks"], place="group", extra=extra)
    _print_groups(console, _linux_group_rows(summary), throughput="MiB/s")
    _print_stalls(console, summary["memory"]["groups"])
    console.print(
        _text(
            f"limit writes {control['writes_ok']} ok, {control['writes_failed']} refused by the kernel, writes' CPU "
            f"{control['write_cpu_ms']:.1f} ms (the kernel's reclaim to the limits); "
            f"OOM rescues {control['oom_rescues']}; everything restored ({control['removed_dirs']} cgroup directories removed)"
        )
    )


def _linux_group_rows(summary: dict[str, Any]) -> list[_GroupRow]:
    """Linux's group rows: limits and peak usage from the control timeline, the MiB/s the
    group's throughput workers verified, and the jobs its workloads reported."""
    timeline = summary["control"]["timeline"]
    rows: list[_GroupRow] = []
    for i, g in enumerate(summary["memory"]["groups"]):
        samples = [sample["groups"][i] for sample in timeline]
        limits = [p["max_bytes"] for p in samples if p["max_bytes"] is not None]
        final = samples[-1]["max_bytes"] if samples else math.nan
        rates = [t["verified_mib_per_s"] for t in summary["tasks"] if t["group"] == g["name"] and t["verified_mib_per_s"] is not None]
        reported = g["jobs_reported"] > 0
        rows.append(
            (
                g["name"],
                final if final is None or math.isnan(final) else final / 1_048_576,
                min(limits) / 1_048_576 if limits else (None if samples else math.nan),
                max(p["usage_bytes"] for p in samples) / 1_048_576 if samples else math.nan,
                sum(rates) if rates else None,
                g["jobs_pending"] if reported else None,
                g["jobs_dropped"] if reported else None,
            )
        )
    return rows


def _cmd_agent(args: argparse.Namespace) -> int:
    from critmem import linux

    duration_s = None if args.duration is None else linux.parse_duration_s(args.duration)
    argv = linux.agent_argv(args.config, args.dry_run, duration_s, args.log_level)
    sys.stdout.flush()
    sys.stderr.flush()
    # exec: the daemon gets SIGTERM/SIGINT itself and restores everything before it exits.
    os.execv(argv[0], argv)


def _cmd_agent_config(args: argparse.Namespace) -> int:
    from critmem import linux

    read_path(args.file)  # a missing or unreadable file is the usual one-line OSError
    text = linux.agent_config_from_scenario(args.file)
    if args.out is None:
        sys.stdout.write(text)
        return 0
    _write_file(args.out, text, args.force)
    print(f"wrote {args.out}: start the agent with `sudo critmem agent --config {args.out}`")
    return 0


def _cmd_hires(args: argparse.Namespace) -> int:
    from critmem import linux

    duration_s = None if args.duration is None else linux.parse_duration_s(args.duration)
    argv = linux.hires_argv(
        args.action,
        args.tree,
        name=args.name,
        duration_s=duration_s,
        in_subsystem=args.in_subsystem,
        as_json=args.json,
        command=args.command_after,
    )
    linux.require_root(f"critmem hires {args.action}")
    sys.stdout.flush()
    sys.stderr.flush()
    # exec: SIGINT/SIGTERM reach it, and it removes the tree before it exits.
    os.execv(argv[0], argv)


def _program_name(command: Sequence[str]) -> str:
    """`python -m pkg.app` → app, `python dir/tool.py` → tool, `./server` → server."""
    if Path(command[0]).name.startswith("python"):
        if "-m" in command[1:-1]:
            return command[command.index("-m") + 1].rsplit(".", 1)[-1]
        script = next((w for w in command[1:] if not w.startswith("-")), None)
        if script is not None:
            return Path(script).stem
    return Path(command[0]).name


def _cmd_profile(args: argparse.Namespace) -> int:
    from critmem import linux, profiling

    command = tuple(args.command_after)
    if not command:
        raise CliError("profile needs the program after --, e.g. critmem profile -- ./my-app --flag")
    if not 0 < args.ratio < 1:
        raise CliError(f"--ratio must be between 0 and 1 (got {args.ratio:g})")
    if not args.max_slowdown > 1 or not math.isfinite(args.max_slowdown):
        raise CliError(f"--max-slowdown must be a number above 1 (got {args.max_slowdown:g})")
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise CliError(f"--out {args.out}: exists and is not a folder")
    if out.is_dir() and any(out.iterdir()) and not args.force:
        raise CliError(f"--out {args.out}: folder is not empty (--force writes into it)")
    name = args.name or _program_name(command)
    opt = profiling.Options(
        command=command,
        name=name,
        mode="units" if args.units else "jobs",
        period_ms=args.period_ms,
        deadline_ms=args.deadline_ms or args.period_ms,
        jobs=args.jobs,
        units_duration_s=linux.parse_duration_s(args.units_duration),
        steps=args.steps,
        ratio=args.ratio,
        max_slowdown=args.max_slowdown,
        interval_ms=20.0,
        swap_bytes=linux.parse_size_bytes(args.swap_size),
    )
    console = _console()
    result = profiling.profile(opt, out, progress=lambda line: print(f"critmem profile: {line}", file=sys.stderr, flush=True))
    if args.json:
        print(json.dumps(result))
        return 0
    f7 = result["fig7"]
    console.print(
        _text(
            f"{name}: BCET {result['bcet_ms']:.1f} ms; memory min/avg/max {result['memory_mb']['min']}/{result['memory_mb']['avg']}/{result['memory_mb']['max']} MiB"
        )
    )
    if f7 is not None:
        console.print(_text(f"Fig. 7 fit: exec = {f7['slope']:.3f}·stall + {f7['intercept_ms']:.1f} ms (R² {f7['r_squared']:.3f})"))
    for r in result["limits"]:
        lim = "none" if r["limit_mb"] is None else f"{r['limit_mb']:.0f} MiB"
        console.print(
            _text(
                f"  limit {lim}: exec {r['exec_ms']:.0f} ms, stall {r['stall_ms']:.0f} ms, simulated {r['simulated_exec_ms']:.0f} ms ({r['sim_error_pct']:+.1f} %)"
            )
        )
    console.print(_text(f"wrote {out}/report.md, fig2.png, fig7.png, profile.json, workload.toml"))
    return 0


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


def register(commands: argparse._SubParsersAction[_Parser]) -> None:
    """Adds `critmem agent`, `agent-config`, `swap`, `profile` and `hires`."""
    fmt = argparse.RawDescriptionHelpFormatter
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

    agent_config = commands.add_parser(
        "agent-config",
        help="make an agent configuration from a scenario's groups and controller",
        description="Write the critmem-agent configuration of FILE's [memory], [[group]]s and [control]: the\n"
        "same controller with every parameter written out, over the same groups, each a cgroup the\n"
        "agent creates under critmem/. The agent's own parser checks it before it is written.",
        epilog="examples:\n  critmem examples copy linux-sara\n  critmem agent-config linux-sara.toml --out agent.toml\n  sudo critmem agent --config agent.toml --dry-run --duration 30s",
        formatter_class=fmt,
    )
    agent_config.add_argument("file", metavar="FILE", help="scenario file with [memory], [[group]] and [control]")
    agent_config.add_argument("--out", metavar="CONFIG", help="write it to CONFIG instead of stdout")
    agent_config.add_argument("--force", action="store_true", help="replace CONFIG if it exists")
    agent_config.set_defaults(handler=_cmd_agent_config)

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

    profile = commands.add_parser(
        "profile",
        help="measure a program under a ladder of memory limits and write a simulator workload (root)",
        description="Run CMD alone in a cgroup of its own, with no limit and then under limits shrinking\n"
        "by --ratio from its measured peak, with critmem's swapfile on (set up for the run and removed\n"
        "afterwards when there is none). A program that reports jobs through critmem.jobclient is\n"
        "measured per job; one that writes a progress file (--units) per work unit. Writes to DIR:\n"
        "report.md (BCET, Table I's memory min/avg/max, execution time against limit as Fig. 2, stall\n"
        "against execution time with Eq. 1's fit as Fig. 7), fig2.png, fig7.png, profile.json and\n"
        "workload.toml, a scenario whose task declares memory behaviour fitted to the measured curve,\n"
        "runnable in the simulator (and, with its command, on Linux).",
        epilog="examples:\n  sudo critmem profile --out results/speech -- .venv/bin/python -m critmem.apps.speech --buffer-mb 200\n"
        "  sudo critmem profile --units --out results/graph -- .venv/bin/python -m critmem.apps.graph",
        usage="critmem profile [options] -- CMD ...",
        formatter_class=fmt,
    )
    profile.set_defaults(command_after=[])
    profile.add_argument(
        "--out", metavar="DIR", type=argtypes.out_dir, default="results/profile", help="where the report goes (default results/profile)"
    )
    profile.add_argument("--name", help="the program's name in the report and workload (default: CMD's last word without options)")
    profile.add_argument("--units", action="store_true", help="CMD reports work units in a progress file, not jobs (a throughput program)")
    profile.add_argument(
        "--period-ms", type=argtypes.positive_ms, default=2500.0, metavar="X", help="job period given to CMD (default 2500)"
    )
    profile.add_argument("--deadline-ms", type=argtypes.positive_ms, metavar="X", help="relative deadline (default: the period)")
    profile.add_argument(
        "--jobs", type=argtypes.int_at_least(3), default=12, metavar="N", help="jobs per limit, the first a warm-up (default 12)"
    )
    profile.add_argument(
        "--units-duration",
        metavar="D",
        default="40s",
        help="--units: how long each limit runs (default 40s; longer, up to 64 times, until 3 units are timed with no limit)",
    )
    profile.add_argument(
        "--steps", type=argtypes.int_at_least(1), default=DEFAULT_MAX_STEPS, metavar="N",
        help=f"at most this many limits below the peak (default {DEFAULT_MAX_STEPS}); the ladder ends sooner at --max-slowdown",
    )  # fmt: skip
    profile.add_argument(
        "--ratio", type=float, default=0.8, metavar="R", help="each limit is R times the one before (0 < R < 1, default 0.8)"
    )
    profile.add_argument(
        "--max-slowdown", type=float, default=DEFAULT_MAX_SLOWDOWN, metavar="X",
        help=f"stop the ladder once execution takes X times its unlimited time (default {DEFAULT_MAX_SLOWDOWN:g})",
    )  # fmt: skip
    profile.add_argument(
        "--swap-size", metavar="SIZE", default="4G", help="size of the swapfile made when critmem has none on (default 4G)"
    )
    profile.add_argument("--json", action="store_true", help="print profile.json instead of the summary")
    profile.add_argument("--force", action="store_true", help="write into DIR even if it is not empty")
    profile.set_defaults(handler=_cmd_profile)

    hires = commands.add_parser(
        "hires",
        help="apply a HiRes reservation tree as nested cgroups and run commands in it (root)",
        description="apply: create TREE's subsystems as nested cgroups with their reservations as limits (CPU\n"
        "bandwidth, memory), start each subsystem's command inside it (and CMD in --in), report each\n"
        "subsystem's CPU share by the kernel's accounting against its reservation, and remove it all\n"
        "when the commands are done, after --duration, or on Ctrl-C. A tree that does not admit (a\n"
        "child over-reserved, a budget above its period, a cycle) is refused in one line.\n"
        "teardown: remove the cgroups an apply killed with -9 left (its processes died with it).",
        epilog="examples:\n  sudo critmem hires apply tree.toml --duration 10s\n  sudo critmem hires apply tree.toml --in web -- ./server --port 8080\n"
        "  sudo critmem hires teardown",
        usage="critmem hires {apply,teardown} [TREE] [options] [-- CMD ...]",
        formatter_class=fmt,
    )
    hires.add_argument("action", choices=["apply", "teardown"], metavar="ACTION", help="apply or teardown")
    hires.add_argument("tree", metavar="TREE", nargs="?", help="apply: the reservation tree (TOML)")
    # `-- CMD ...` is split off before parsing (main), as argparse would take CMD's options.
    hires.set_defaults(command_after=[])
    hires.add_argument(
        "--in", dest="in_subsystem", metavar="NAME", help="apply: the subsystem CMD runs in (needed when the tree has several)"
    )
    hires.add_argument("--duration", metavar="D", help="apply: stop after D, e.g. 30s (default: when the commands are done)")
    hires.add_argument("--json", action="store_true", help="apply: print the summary as JSON")
    hires.add_argument("--name", metavar="NAME", help="the tree's top cgroup directory (default critmem-hires)")
    hires.set_defaults(handler=_cmd_hires)
