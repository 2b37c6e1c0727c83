"""The real-Linux side of the `critmem` command: it drives the Rust binaries that scripts/setup.sh
installs beside the interpreter (.venv/bin): `critmem-linux-run` (a scenario on real processes
in cgroups), `critmem-agent` (the daemon) and `critmem-swap` (critmem's own swapfile).

Every failure is a `LinuxError` whose message is one line; the CLI prints it and exits 2.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from critmem import _core, _errors

# Raised by the functions here; it lives where the command line can catch it without loading this.
LinuxError = _errors.LinuxError

# The built-in controllers; a Python class ("file.py:Class", "module:Class") or an installed
# entry point names one too.
CONTROLLERS = tuple(name for name, _ in _core.controllers())
# `critmem profile`'s ladder goes down until a job (or unit) takes this many times its
# unlimited time: past the knee of SARA's Fig. 2 curve, however deep that is. DEFAULT_MAX_STEPS
# only bounds the profile's length.
DEFAULT_MAX_SLOWDOWN = 2.0
DEFAULT_MAX_STEPS = 24
MIB = 1_048_576

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(?:i?b)?\s*$", re.IGNORECASE)
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|min|h)?\s*$", re.IGNORECASE)


# The Rust tools refuse more than this (critmem_linux::MAX_RUN_SECONDS).
MAX_DURATION_S = 1e9
MAX_SIZE_BYTES = 1 << 60


def parse_size_bytes(text: str) -> int:
    """`4G`, `512M`, `1.5GiB`, `4096` (bytes) → bytes (binary units)."""
    m = _SIZE.match(text)
    if m is None:
        raise LinuxError(f"not a size: {text!r} (use e.g. 4G, 512M or a number of bytes)")
    value = float(m.group(1)) * 1024 ** "_kmgt".index(m.group(2).lower() or "_")
    if value < 1:
        raise LinuxError(f"size must be positive (got {text!r})")
    if not value <= MAX_SIZE_BYTES:
        raise LinuxError(f"size too large (got {text!r}; at most 1 EiB)")
    return int(value)


def parse_duration_s(text: str) -> float:
    """`60s`, `2m`, `500ms`, `90` (seconds) → seconds."""
    m = _DURATION.match(text)
    if m is None:
        raise LinuxError(f"not a duration: {text!r} (use e.g. 60s, 2m or 500ms)")
    scale = {"ms": 1e-3, "s": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0}[(m.group(2) or "s").lower()]
    value = float(m.group(1)) * scale
    if not value > 0:
        raise LinuxError(f"duration must be positive (got {text!r})")
    if not value <= MAX_DURATION_S:
        raise LinuxError(f"duration too long (got {text!r}; at most {MAX_DURATION_S:.0e} s)")
    return value


def _check_duration(duration_s: float) -> None:
    # The same bounds the Rust tools apply, checked here so their clap errors never reach a user.
    if not (duration_s >= 1e-9 and duration_s <= MAX_DURATION_S):
        raise LinuxError(f"duration must be above 0 and at most {MAX_DURATION_S:.0e} s (got {duration_s!r} s)")


def binary(name: str) -> str:
    """A critmem binary: beside the interpreter (the project's .venv/bin), else on PATH."""
    here = Path(sys.executable).parent / name
    if here.is_file() and os.access(here, os.X_OK):
        return str(here)
    found = shutil.which(name)
    if found is not None:
        return found
    raise LinuxError(
        f"{name} not found beside {sys.executable} or on PATH: run scripts/setup.sh, which installs the Linux binaries into .venv/bin"
    )


def agent_config_from_scenario(path: str) -> str:
    """The agent configuration `critmem-agent --config-from-scenario` makes of scenario `path`."""
    done = subprocess.run([binary("critmem-agent"), "--config-from-scenario", path], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise LinuxError(_one_line(done.stderr, "critmem-agent: "))
    return done.stdout


def require_root(what: str) -> None:
    if os.geteuid() != 0:
        raise LinuxError(f"not root: {what} changes cgroups or swap and needs root; run it with sudo")


def _one_line(stderr: str, prefix: str) -> str:
    lines = [line.removeprefix(prefix) for line in stderr.strip().splitlines() if line.strip()]
    # clap puts its "error: ..." line first and a hint about --help last.
    chosen = next((line for line in lines if line.startswith("error:")), lines[-1] if lines else "failed without a message")
    return " ".join(chosen.removeprefix("error:").split())


def _last_json(stdout: str) -> dict[str, Any] | None:
    """The JSON object a tool prints last, if its last line is one."""
    lines = stdout.strip().splitlines()
    try:
        value = json.loads(lines[-1]) if lines else None
    except json.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


def _call(
    name: str,
    args: Sequence[str],
    *,
    pass_stderr: bool = False,
    finished_note: Callable[[dict[str, Any]], str] | None = None,
) -> dict[str, Any]:
    """Runs binary `name` and returns the JSON object it prints last; its one-line error on failure.

    With `pass_stderr` its stderr (warnings, the output of a scenario's commands) reaches ours as
    it is written, all but the last line, which is held back: on failure it is the error.

    Ctrl-C is passed on to the tool, which stops and undoes what it set up (cgroups, limits, a
    half-made swapfile); this waits for that to finish, shows a failure, then raises
    KeyboardInterrupt. Leaving it running unseen, or killing it, could leave changes behind.
    A tool that had already finished its work when the signal came exits 0 with its result:
    `finished_note` turns that result into the line that tells the user so."""
    interrupted = False
    # SIGTERM or SIGHUP to this process, passed on to the tool as they came (see below).
    terminated: list[int] = []
    chunks: list[str] = []
    # All of stderr, or with `pass_stderr` only the line held back.
    err_lines: list[str] = []
    # A Python controller runs in a process of this interpreter, where critmem is installed.
    env = {**os.environ, "CRITMEM_PYTHON": os.environ.get("CRITMEM_PYTHON") or sys.executable}
    with (
        subprocess.Popen([binary(name), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env) as child,
        _passing_on(child, terminated),
    ):
        assert child.stdout is not None and child.stderr is not None
        out, err = child.stdout, child.stderr
        reader = threading.Thread(target=lambda: chunks.append(out.read()), daemon=True)

        def relay_stderr() -> None:
            for line in err:
                if pass_stderr and err_lines:
                    sys.stderr.write(err_lines.pop())
                    sys.stderr.flush()
                err_lines.append(line)

        while True:
            # Everything after the start is in here: a Ctrl-C that comes as soon as the tool is
            # up must reach it too.
            try:
                if reader.ident is None:
                    reader.start()
                relay_stderr()
                returncode = child.wait()
                break
            except KeyboardInterrupt:
                interrupted = True
                if child.poll() is None:
                    child.send_signal(signal.SIGINT)
        reader.join()
    stdout = "".join(chunks)
    last_err = "".join(err_lines)
    if pass_stderr and returncode == 0 and last_err:
        sys.stderr.write(last_err)
    if interrupted or terminated:
        if returncode != 0 and last_err.strip():
            sys.stderr.write(f"critmem: {name}: {_one_line(last_err, f'{name}: ')}\n")
        if finished_note is not None and returncode == 0 and (finished := _last_json(stdout)) is not None:
            sys.stderr.write(f"critmem: {finished_note(finished)}\n")
        if terminated:
            # The shell's code for death by that signal; the tool has undone its changes.
            raise SystemExit(128 + terminated[0])
        raise KeyboardInterrupt
    if returncode != 0:
        raise LinuxError(_one_line(last_err, f"{name}: "))
    value = _last_json(stdout)
    if value is None:
        raise LinuxError(f"{name} printed no JSON summary (stderr: {_one_line(last_err, name + ': ')})")
    return value


@contextlib.contextmanager
def _passing_on(child: subprocess.Popen[str], received: list[int]) -> Iterator[None]:
    """While the tool runs, SIGTERM and SIGHUP to this process are sent on to it and noted in
    `received`, instead of ending this process at once and leaving the tool running unseen
    (a run would go on to its --duration with nobody to stop it). It stops and restores as on
    Ctrl-C; the caller waits for that. Signal handlers can be set from the main thread only."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def pass_on(signum: int, _frame: object) -> None:
        received.append(signum)
        if child.poll() is None:
            child.send_signal(signum)

    previous = {signum: signal.signal(signum, pass_on) for signum in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _finite_float(text: str) -> float:
    # Python reads 1e400 as inf, which the controller would only refuse as "not JSON".
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"number {text} is out of range")
    return value


def _no_constant(name: str) -> float:
    raise ValueError(f"{name} is not a JSON number")


def run_scenario(
    path: str,
    duration_s: float,
    controller: str | None,
    controller_config: str | None = None,
    *,
    stop_after_jobs: int | None = None,
    stop_grace_s: float | None = None,
) -> dict[str, Any]:
    """Runs scenario `path` on real processes for `duration_s` (or until every job-reporting
    task has completed `stop_after_jobs` jobs), giving each task `stop_grace_s` (default 5 s)
    to exit after SIGTERM; the summary `critmem-linux-run` prints."""
    if controller is not None and controller not in CONTROLLERS and ":" not in controller:
        from critmem.plugins import entry_points

        if controller not in entry_points("controllers"):
            known = ", ".join((*CONTROLLERS, *sorted(entry_points("controllers"))))
            raise LinuxError(f'unknown controller {controller!r} (expected one of: {known}, or a Python class as "file.py:Class")')
    if controller_config is not None:
        try:
            parsed = json.loads(controller_config, parse_float=_finite_float, parse_constant=_no_constant)
        except ValueError as e:  # JSONDecodeError is one
            raise LinuxError(f"--controller-config is not JSON: {e}") from None
        if not isinstance(parsed, dict):
            raise LinuxError("--controller-config must be a JSON object")
    _check_duration(duration_s)
    if stop_grace_s is not None:
        _check_duration(stop_grace_s)
    require_root("critmem run --platform linux")
    # The --opt=value forms and "--" keep values that start with "-" from reading as options.
    args = [f"--duration-s={duration_s!r}"]
    if stop_grace_s is not None:
        args.append(f"--stop-grace-s={stop_grace_s!r}")
    if controller is not None:
        args.append(f"--controller={controller}")
    if controller_config is not None:
        args.append(f"--controller-config={controller_config}")
    if stop_after_jobs is not None:
        args.append(f"--stop-after-jobs={stop_after_jobs}")
    args += ["--", path]
    return _call("critmem-linux-run", args, pass_stderr=True)


def swap_setup(size_bytes: int, path: str | None, state_file: str | None) -> dict[str, Any]:
    require_root("critmem swap setup")
    args = _state(state_file) + ["setup", "--size-bytes", str(size_bytes)]
    if path is not None:
        args.append(f"--path={path}")

    def finished(result: dict[str, Any]) -> str:
        return f"swap setup had already finished: {result.get('swapfile')} is on; `critmem swap teardown` removes it"

    return _call("critmem-swap", args, finished_note=finished)


def swap_teardown(state_file: str | None) -> dict[str, Any]:
    require_root("critmem swap teardown")
    return _call("critmem-swap", _state(state_file) + ["teardown"])


def swap_status(state_file: str | None) -> dict[str, Any]:
    return _call("critmem-swap", _state(state_file) + ["status"])


def _state(state_file: str | None) -> list[str]:
    if state_file == "":
        raise LinuxError("--state-file must name a file (got an empty string)")
    return [] if state_file is None else [f"--state-file={state_file}"]


def hires_argv(
    action: str,
    tree: str | None,
    *,
    name: str | None = None,
    duration_s: float | None = None,
    in_subsystem: str | None = None,
    as_json: bool = False,
    command: Sequence[str] = (),
) -> list[str]:
    """The command line of `critmem-hires` for `critmem hires ACTION` (the CLI execs it, so
    SIGINT and SIGTERM reach it and it undoes the tree before it exits)."""
    argv = [binary("critmem-hires")]
    if name is not None:
        argv.append(f"--name={name}")
    if action == "teardown":
        extra = [
            flag
            for flag, given in (("TREE", tree), ("--duration", duration_s), ("--in", in_subsystem), ("--json", as_json), ("CMD", command))
            if given
        ]
        if extra:
            raise LinuxError(f"hires teardown takes no {', '.join(extra)}: it undoes the tree a killed apply left")
        return [*argv, "teardown"]
    if tree is None:
        raise LinuxError("hires apply needs TREE, a reservation tree file")
    if not Path(tree).is_file():
        raise LinuxError(f"{tree!r}: no such tree file")
    argv += ["apply", tree]
    if duration_s is not None:
        _check_duration(duration_s)
        argv.append(f"--duration-s={duration_s!r}")
    if in_subsystem is not None:
        argv.append(f"--in={in_subsystem}")
    if as_json:
        argv.append("--json")
    if command:
        argv += ["--", *command]
    return argv


def hires_run(tree: Path, *, name: str, duration_s: float) -> dict[str, Any]:
    """Applies reservation tree `tree` as nested cgroups under top directory `name`, runs its
    commands for `duration_s` and undoes it all; the JSON summary of `critmem-hires apply`
    (each subsystem's reserved and measured CPU share, and the shares over time)."""
    require_root("critmem hires")
    _check_duration(duration_s)
    return _call("critmem-hires", [f"--name={name}", "apply", str(tree), f"--duration-s={duration_s!r}", "--json"])


def agent_argv(config: str, dry_run: bool, duration_s: float | None, log_level: str | None) -> list[str]:
    """The command line that runs the agent daemon (the CLI execs it, so signals reach it)."""
    if not os.path.exists(config):
        raise LinuxError(f"{config!r}: no such configuration file")
    if not Path(config).is_file():
        raise LinuxError(f"{config!r}: not a regular file (the agent reads a TOML configuration file)")
    argv = [binary("critmem-agent"), f"--config={config}"]
    # A Python controller runs in a process of this interpreter (the exec keeps the environment).
    os.environ.setdefault("CRITMEM_PYTHON", sys.executable)
    if dry_run:
        argv.append("--dry-run")
    if duration_s is not None:
        _check_duration(duration_s)
        argv.append(f"--duration-s={duration_s!r}")
    if log_level is not None:
        argv.append(f"--log-level={log_level}")
    return argv


def write_timeline_csv(summary: dict[str, Any], path: Path) -> Path:
    """One row per sample: t_ms, then usage and limit (MiB) and the PSI some totals so far (µs)
    of every group."""
    names = [g["name"] for g in summary["memory"]["groups"]]
    header = ["t_ms"] + [f"{n}:{k}" for n in names for k in ("usage_mb", "max_mb", "memory_some_us", "io_some_us")]
    rows = [",".join(header)]
    for sample in summary["control"]["timeline"]:
        cells = [f"{sample['t_ms']:.3f}"]
        for g in sample["groups"]:
            cells.append(f"{g['usage_bytes'] / MIB:.3f}")
            cells.append("" if g["max_bytes"] is None else f"{g['max_bytes'] / MIB:.3f}")
            cells.append(str(g["memory_some_us"]))
            cells.append(str(g["io_some_us"]))
        rows.append(",".join(cells))
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


# The columns of jobs.csv, the simulator's where they mean the same.
JOB_COLUMNS = (
    "task",
    "job",
    "release_ms",
    "deadline_ms",
    "start_ms",
    "completion_ms",
    "drop_ms",
    "response_ms",
    "tardiness_ms",
    "missed",
    "outcome",
    "stall_ms",
    "cpu_ms",
    "cpu_wait_ms",
)


def write_jobs_csv(summary: dict[str, Any], path: Path) -> Path:
    """One row per job of every task whose jobs were counted, as the summary's `jobs` has them:
    times in ms since the run started, empty where unknown; `missed` as True/False."""

    def cell(value: Any) -> str:
        if value is None:
            return ""
        if isinstance(value, bool):
            return str(value)
        if isinstance(value, float):
            return repr(round(value, 6))
        return str(value)

    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(JOB_COLUMNS)
    for job in summary["jobs"]:
        writer.writerow([cell(job[c]) for c in JOB_COLUMNS])
    path.write_text(buffer.getvalue(), encoding="utf-8")
    return path


def plot_timeline(summary: dict[str, Any], path: Path) -> Path:
    """Usage (solid) and hard limit (dashed) of every group over the run, in MiB."""
    import matplotlib
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from critmem.gantt import literal_text

    names = [literal_text(g["name"]) for g in summary["memory"]["groups"]]
    timeline = summary["control"]["timeline"]
    t_s = [s["t_ms"] / 1000.0 for s in timeline]
    fig = Figure(figsize=(11, 4.5), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    cmap = matplotlib.colormaps["tab10"]
    for i, name in enumerate(names):
        usage = [s["groups"][i]["usage_bytes"] / MIB for s in timeline]
        limit = [math.nan if s["groups"][i]["max_bytes"] is None else s["groups"][i]["max_bytes"] / MIB for s in timeline]
        ax.plot(t_s, usage, color=cmap(i % 10), label=f"{name} usage")
        ax.plot(t_s, limit, color=cmap(i % 10), linestyle="--", label=f"{name} limit")
    ax.axhline(summary["memory"]["total_bytes"] / MIB, color="grey", linewidth=0.8, label="budget")
    ax.set_xlabel("time (s)")
    ax.set_ylabel("MiB")
    ax.set_title(literal_text(f"{summary['scenario']} on Linux under {summary['controller']}"))
    ax.legend(loc="upper right", fontsize="small")
    fig.tight_layout()
    fig.savefig(path)
    return path
