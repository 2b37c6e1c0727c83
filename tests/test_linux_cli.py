"""`critmem run --platform linux`, `critmem agent`, `critmem swap` and the Python job client.

Bad input is checked everywhere (one line, exit 2). The real-machine tests need root and a
cgroup layout critmem supports; elsewhere they skip saying why. Everything they create has a
name of its own and is removed (the commands restore it themselves; the tests check).
"""

from __future__ import annotations

import json
import math
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import CRITMEM, EXAMPLES, TIME_SCALE, active_swaps, assert_matches_output_schema, cgroups_named, cli, linux_machine_reason
from critmem import jobclient
from critmem.linux import LinuxError, _one_line, agent_argv, parse_duration_s, parse_size_bytes, plot_timeline, run_scenario

LINUX_EXAMPLE = EXAMPLES / "linux-sara.toml"
BIN = Path(sys.executable).parent


def _run(*argv: str, timeout: float = 120, columns: int | None = None) -> subprocess.CompletedProcess[str]:
    """The critmem command; `columns` wide when given (else 80: narrower tables shorten headers)."""
    env = None if columns is None else {**os.environ, "COLUMNS": str(columns)}
    return subprocess.run([str(CRITMEM), *argv], capture_output=True, text=True, timeout=timeout, check=False, env=env)


def _one_line_error(p: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert p.returncode == 2, p
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("critmem: error: "), p.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]


_machine_reason = linux_machine_reason

# Where runs keep their restore journals and job sockets.
RUN_STATE = Path("/run/critmem-linux-run")

needs_machine = pytest.mark.skipif(_machine_reason() is not None, reason=f"real Linux: {_machine_reason()}")


def _leftover_cgroups(prefix: str) -> list[str]:
    """Cgroups named `prefix*`, and a run's journal and socket directory (`critmem-run-<pid>.d`)."""
    return cgroups_named(prefix, RUN_STATE)


def _run_state_left() -> bool:
    """The runs' journal directory is still there with no critmem-linux-run alive to use it."""
    if not RUN_STATE.exists():
        return False
    comms = []
    for comm_file in Path("/proc").glob("[0-9]*/comm"):
        try:
            comms.append(comm_file.read_text().strip())
        except OSError:
            continue
    # comm is truncated to 15 characters.
    return "critmem-linux-r" not in comms


# -------------------------------------------------------------------------------------------
# Bad input: one line, exit 2, before anything is touched.


def test_sizes_and_durations_parse_in_the_usual_units() -> None:
    assert parse_size_bytes("4G") == 4 * 2**30
    assert parse_size_bytes("512MiB") == 512 * 2**20
    assert parse_size_bytes("1.5g") == 3 * 2**29
    assert parse_size_bytes("4096") == 4096
    assert parse_duration_s("60s") == 60.0
    assert parse_duration_s("2m") == 120.0
    assert parse_duration_s("500ms") == 0.5
    assert parse_duration_s("90") == 90.0


@pytest.mark.parametrize("duration_s", [0.0, -1.0, math.nan, math.inf, 2e9, 1e-12])
def test_the_python_api_checks_a_duration_before_any_tool_sees_it(duration_s: float) -> None:
    with pytest.raises(LinuxError, match="duration must be above 0 and at most"):
        run_scenario(str(LINUX_EXAMPLE), duration_s, None)
    with pytest.raises(LinuxError, match="duration must be above 0 and at most"):
        agent_argv(str(LINUX_EXAMPLE), False, duration_s, None)


def test_a_tool_error_reads_as_its_error_line_not_the_help_hint() -> None:
    clap = "error: invalid value 'x' for '--size-bytes <SIZE_BYTES>': invalid digit\n\nFor more information, try '--help'.\n"
    assert _one_line(clap, "critmem-swap: ") == "invalid value 'x' for '--size-bytes <SIZE_BYTES>': invalid digit"
    assert _one_line("warning: slow\ncritmem-swap: no swapfile of critmem's\n", "critmem-swap: ") == "no swapfile of critmem's"


def _fake_tool(tmp_path: Path, exit_code: int) -> Path:
    """A stand-in for a critmem tool: on SIGINT it takes 0.5 s to "restore", notes that it
    finished, and exits with `exit_code` (an error line first if it is not 0)."""
    tool = tmp_path / "fake-tool"
    tool.write_text(
        f"""#!{sys.executable}
import json, signal, sys, time
from pathlib import Path
def stop(signum, frame):
    time.sleep(0.5)
    Path({str(tmp_path / "restored")!r}).write_text("restored after SIGINT")
    if {exit_code}:
        sys.stderr.write("fake-tool: could not restore /x/memory.max\\n")
        sys.exit({exit_code})
    print(json.dumps({{"ok": True}}))
    sys.exit(0)
signal.signal(signal.SIGINT, stop)
signal.signal(signal.SIGTERM, stop)
sys.stderr.write("fake-tool: started\\n")
sys.stderr.flush()
Path({str(tmp_path / "ready")!r}).write_text("SIGINT handler installed")
time.sleep(30)
"""
    )
    tool.chmod(0o755)
    return tool


@pytest.fixture
def sigint_delivered() -> Iterator[None]:
    """Python's Ctrl-C handler for the test. Started as `cmd &` from a script, or under nohup,
    the test process inherits SIGINT ignored and would never see the Ctrl-C it sends itself;
    a user's terminal always delivers it."""
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, before)


def _signal_when_ready(tmp_path: Path, signum: int) -> threading.Thread:
    """Sends `signum` to this process once the fake tool has its handler (on a loaded machine
    its start can take over a second); the caller joins the thread."""

    def send() -> None:
        deadline = time.monotonic() + 60
        while not (tmp_path / "ready").exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        os.kill(os.getpid(), signum)

    timer = threading.Thread(target=send)
    timer.start()
    return timer


@pytest.mark.parametrize("exit_code", [0, 2])
@pytest.mark.parametrize("pass_stderr", [False, True])
@pytest.mark.usefixtures("sigint_delivered")
def test_ctrl_c_waits_for_the_tool_to_restore_and_shows_its_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], exit_code: int, pass_stderr: bool
) -> None:
    from critmem import linux

    tool = _fake_tool(tmp_path, exit_code)
    monkeypatch.setattr(linux, "binary", lambda name: str(tool))
    # Ctrl-C reaches this process only; _call must pass it on and wait.
    timer = _signal_when_ready(tmp_path, signal.SIGINT)
    with pytest.raises(KeyboardInterrupt):
        linux._call("fake-tool", [], pass_stderr=pass_stderr)
    timer.join()
    assert (tmp_path / "restored").read_text() == "restored after SIGINT", "the tool finished its restore before _call returned"
    err = capsys.readouterr().err
    if exit_code:
        assert "critmem: fake-tool: could not restore /x/memory.max" in err, err
    else:
        assert "could not restore" not in err, err


@pytest.mark.parametrize("exit_code", [0, 2])
@pytest.mark.usefixtures("sigint_delivered")
def test_a_tool_that_finished_before_ctrl_c_says_what_it_left(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], exit_code: int
) -> None:
    """Found by review: a swap setup that had finished when Ctrl-C came exited 0 with the
    swapfile on, and the CLI said nothing of it."""
    from critmem import linux

    tool = _fake_tool(tmp_path, exit_code)
    monkeypatch.setattr(linux, "binary", lambda name: str(tool))
    timer = _signal_when_ready(tmp_path, signal.SIGINT)
    with pytest.raises(KeyboardInterrupt):
        linux._call("fake-tool", [], finished_note=lambda result: f"had already finished: ok={result['ok']}")
    timer.join()
    err = capsys.readouterr().err
    assert ("critmem: had already finished: ok=True" in err) == (exit_code == 0), err


@pytest.mark.parametrize("exit_code", [0, 2])
def test_sigterm_is_passed_on_to_the_tool_and_waits_for_its_restore(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], exit_code: int
) -> None:
    """Found by the audit: SIGTERM ended `critmem run` at once and left the tool running unseen
    to the end of its --duration."""
    from critmem import linux

    tool = _fake_tool(tmp_path, exit_code)
    monkeypatch.setattr(linux, "binary", lambda name: str(tool))
    before = signal.getsignal(signal.SIGTERM)
    timer = _signal_when_ready(tmp_path, signal.SIGTERM)
    with pytest.raises(SystemExit) as stopped:
        linux._call("fake-tool", [], pass_stderr=True)
    timer.join()
    assert stopped.value.code == 128 + signal.SIGTERM
    assert (tmp_path / "restored").read_text() == "restored after SIGINT", "the tool finished its restore before _call returned"
    assert signal.getsignal(signal.SIGTERM) is before, "this process's own SIGTERM handling is back"
    err = capsys.readouterr().err
    assert ("critmem: fake-tool: could not restore /x/memory.max" in err) == bool(exit_code), err


@pytest.mark.parametrize(
    ("argv", "needles"),
    [
        (["run", str(LINUX_EXAMPLE), "--platform", "linux", "--duration", "soon"], ["not a duration"]),
        (["run", str(LINUX_EXAMPLE), "--platform", "linux", "--duration", "0s"], ["positive"]),
        (["run", str(LINUX_EXAMPLE), "--platform", "linux", "--controller", "nope"], ["unknown controller 'nope'"]),
        (["run", str(LINUX_EXAMPLE), "--platform", "linux", "--seed", "3"], ["--seed"]),
        (["run", str(LINUX_EXAMPLE), "--platform", "linux", "--controller-config", "{oops"], ["not JSON"]),
        (
            ["run", str(LINUX_EXAMPLE), "--platform", "linux", "--controller-config", '{"step_bytes": 1e400}'],
            ["not JSON", "1e400 is out of range"],
        ),
        (
            ["run", str(LINUX_EXAMPLE), "--platform", "linux", "--controller-config", '{"step_bytes": NaN}'],
            ["not JSON", "NaN is not a JSON number"],
        ),
        (
            [
                "run",
                str(LINUX_EXAMPLE),
                "--platform",
                "linux",
                "--controller",
                "static",
                "--controller-config",
                '{"limits_bytes": {"nope": 1}}',
            ],
            ['names "nope", which is not a soft real-time group (they are: "srt")'],
        ),
        (["run", str(LINUX_EXAMPLE), "--platform", "mars"], ["invalid choice"]),
        (["run", "no-such-file.toml", "--platform", "linux"], ["no-such-file.toml"]),
        (["run", str(LINUX_EXAMPLE), "--duration", "5s"], ["need --platform linux"]),
        (["run", str(LINUX_EXAMPLE), "--stop-grace", "5s"], ["--stop-grace", "need --platform linux"]),
        (["run", str(LINUX_EXAMPLE), "--platform", "linux", "--stop-grace", "soon"], ["--stop-grace: not a duration"]),
        (["run", str(LINUX_EXAMPLE), "--platform", "linux", "--stop-grace", "0s"], ["--stop-grace: duration must be positive"]),
        (["swap", "setup", "--size", "4X"], ["not a size"]),
        (["swap", "setup"], ["--size"]),
        (["swap", "explode"], ["invalid choice"]),
        (["run", str(LINUX_EXAMPLE), "--platform", "linux", "--duration", "inf"], ["not a duration"]),
        (["run", str(LINUX_EXAMPLE), "--platform", "linux", "--duration", "2000000000s"], ["too long"]),
        (["swap", "setup", "--size", "9" * 400], ["too large"]),
        (["swap", "status", "--state-file", ""], ["--state-file", "empty string"]),
        (["swap", "status", "--size", "4G"], ["swap status takes no --size"]),
        (["swap", "teardown", "--path", "/var/lib/x.swap"], ["swap teardown takes no --path", "state file records"]),
        (["swap", "status", "--state-file", "/dev/zero"], ["/dev/zero", "larger than 16 MiB"]),
        (["agent", "--config", "/dev/zero"], ["not a regular file"]),
        (["agent", "--config", "no-such-agent.toml"], ["no such configuration file"]),
        (["agent"], ["--config"]),
    ],
)
def test_bad_linux_input_is_one_line_and_exit_code_2(argv: list[str], needles: list[str]) -> None:
    out = cli(*argv)
    assert out.code == 2, out
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("critmem: error: "), out.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None, reason="needs root and setpriv to run as another user")
@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["run", str(LINUX_EXAMPLE), "--platform", "linux", "--duration", "1s"], "not root"),
        (["swap", "setup", "--size", "1G"], "not root"),
        (["swap", "teardown"], "not root"),
    ],
)
def test_not_root_is_one_line(argv: list[str], needle: str) -> None:
    p = subprocess.run(
        ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable, "-m", "critmem", *argv],
        capture_output=True, text=True, timeout=60, check=False, cwd="/",
    )  # fmt: skip
    _one_line_error(p, needle)


def test_a_scenario_without_groups_is_refused_on_linux(tmp_path: Path) -> None:
    if _machine_reason() is not None:
        pytest.skip(f"real Linux: {_machine_reason()}")
    p = _run("run", str(EXAMPLES / "rm-textbook.toml"), "--platform", "linux", "--duration", "1s")
    _one_line_error(p, "needs [memory] and at least one [[group]]")


# -------------------------------------------------------------------------------------------
# Real runs.


@needs_machine
@pytest.mark.parametrize(
    ("scenario_interval_ms", "argv", "tick_ms"),
    [
        (10, [], 10.0),  # the scenario's interval is SARA's l_intv
        (5, ["--controller-config", '{"interval_ns": 2000000}'], 2.0),  # the config in use decides
        (10, ["--controller", "sara"], 5.0),  # another controller: its own default
        (10, ["--controller", "greedy"], 5.0),
    ],
)
def test_sara_ticks_at_its_monitoring_interval_on_linux(tmp_path: Path, scenario_interval_ms: int, argv: list[str], tick_ms: float) -> None:
    text = LINUX_EXAMPLE.read_text(encoding="utf-8")
    assert "interval_ms = 5\n" in text
    scenario = tmp_path / "s.toml"
    scenario.write_text(text.replace("interval_ms = 5\n", f"interval_ms = {scenario_interval_ms}\n"), encoding="utf-8")
    p = _run("run", str(scenario), "--platform", "linux", "--duration", "1s", "--json", *argv)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["control"]["interval_ms"] == tick_ms


@needs_machine
@pytest.mark.parametrize(
    ("controller", "config"),
    [
        (None, None),
        ("greedy", None),
        ("tmo-low", None),
        ("senpai", None),
        ("static", '{"default_limit_bytes": 104857600}'),
        ("offline", '{"limit_bytes": 62914560}'),
        ("tmo-high", '{"psi_threshold_pct": 30.0}'),
    ],
)
def test_a_scenario_runs_on_real_processes_and_leaves_nothing_behind(controller: str | None, config: str | None) -> None:
    # Stretched on a slower machine, where each job takes longer too.
    argv = ["run", str(LINUX_EXAMPLE), "--platform", "linux", "--duration", f"{3 * TIME_SCALE:g}s", "--json"]
    if controller is not None:
        argv += ["--controller", controller]
    if config is not None:
        argv += ["--controller-config", config]
    p = _run(*argv)
    assert p.returncode == 0, p.stderr
    summary = json.loads(p.stdout)
    assert_matches_output_schema("linux-run", summary)
    assert summary["platform"] == "linux" and summary["controller"] == (controller or "sara")
    tasks = {t["name"]: t for t in summary["tasks"]}
    srt, nrt = tasks["control-loop"], tasks["analytics"]
    # 150 periods in 3 s; a third of them is a generous floor for a loaded machine (fewer where
    # each job takes TIME_SCALE times as long).
    assert srt["jobs"] >= 50 / TIME_SCALE and srt["hit_ratio"] is not None, srt
    assert nrt["verified_mib_per_s"] > 0 and nrt["jobs"] is None, nrt
    assert srt["checksum_failures"] == 0 and nrt["checksum_failures"] == 0
    assert srt["exit_code"] == 0 and nrt["exit_code"] == 0
    assert [g["name"] for g in summary["memory"]["groups"]] == ["srt", "nrt"]
    assert summary["control"]["ticks"] > 100 and summary["control"]["timeline"]
    assert summary["control"]["removed_dirs"] >= 2
    assert not _leftover_cgroups("critmem-run-"), _leftover_cgroups("critmem-run-")
    assert not _run_state_left(), f"{RUN_STATE} left behind: {list(RUN_STATE.iterdir())}"


@needs_machine
def test_linux_run_prints_the_tables_and_writes_plots(tmp_path: Path) -> None:
    p = _run(
        "run", str(LINUX_EXAMPLE), "--platform", "linux", "--duration", f"{2 * TIME_SCALE:g}s", "--out", str(tmp_path / "out"), columns=200
    )
    assert p.returncode == 0, p.stderr
    assert "hit ratio" in p.stdout and "control-loop" in p.stdout and "memory some ms" in p.stdout
    for name in ("summary.json", "jobs.csv", "timeline.csv", "memory.png"):
        assert (tmp_path / "out" / name).stat().st_size > 0
    # The shipped soft real-time worker's jobs, one row each.
    jobs = (tmp_path / "out" / "jobs.csv").read_text().splitlines()
    assert len(jobs) > 20 / TIME_SCALE and all(line.startswith("control-loop,") for line in jobs[1:]), jobs[:3]
    header = (tmp_path / "out" / "timeline.csv").read_text().splitlines()[0]
    assert header == (
        "t_ms,srt:usage_mb,srt:max_mb,srt:memory_some_us,srt:io_some_us,nrt:usage_mb,nrt:max_mb,nrt:memory_some_us,nrt:io_some_us"
    )


def _command_scenario(tmp_path: Path, srt_command: list[str] | None, nrt_command: list[str] | None, reports_jobs: bool = True) -> Path:
    """examples/linux-command.toml, as JSON, with the two tasks' commands replaced (None: none)."""
    import tomllib

    scenario = tomllib.loads((EXAMPLES / "linux-command.toml").read_text())
    for task, command in zip(scenario["task"], (srt_command, nrt_command), strict=True):
        task.pop("command", None)
        task.pop("reports_jobs", None)
        if command is not None:
            task["command"] = command
            if task["group"] == "srt" and reports_jobs:
                task["reports_jobs"] = True
    path = tmp_path / "commands.json"
    path.write_text(json.dumps(scenario))
    return path


def _processes_with(marker: str) -> list[str]:
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            text = cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if marker in text:
            found.append(text)
    return found


PERIODIC_JOB = [sys.executable, str(EXAMPLES / "periodic_job.py"), "--wss-mib", "16"]


@needs_machine
def test_commands_run_as_tasks_report_jobs_and_leave_no_process_behind(tmp_path: Path) -> None:
    # The non-real-time command leaves a grandchild in a session of its own (out of reach of a
    # process-group signal) and shows the signal mask it was started with.
    marker = "987.654"
    nrt = ["/bin/sh", "-c", f"grep SigBlk /proc/self/status >&2; setsid sleep {marker} & exec sleep {marker}"]
    path = _command_scenario(tmp_path, PERIODIC_JOB, nrt)
    p = _run("run", str(path), "--platform", "linux", "--duration", "4s", "--json")
    assert p.returncode == 0, p.stderr
    summary = json.loads(p.stdout)
    assert_matches_output_schema("linux-run", summary)
    tasks = {t["name"]: t for t in summary["tasks"]}
    srt, nrt_row = tasks["periodic-job"], tasks["analytics"]
    assert srt["command"] == PERIODIC_JOB and srt["worker"] is None and srt["reports_jobs"] is True
    # 100 ms periods for about 4 s, each reported over the job socket and counted by the group.
    assert srt["jobs"] >= 20 and srt["hit_ratio"] is not None, srt
    group = {g["name"]: g for g in summary["memory"]["groups"]}["srt"]
    assert group["jobs_reported"] == srt["jobs"] and group["deadline_hits"] >= 1
    # periodic_job.py exits 0 on SIGTERM when every page verified.
    assert srt["stopped_by"] == "SIGTERM" and srt["exit_code"] == 0 and srt["exited_early_s"] is None, srt
    assert '"checksum_failures": 0' in p.stderr
    assert nrt_row["command"] == nrt and nrt_row["jobs"] is None
    assert "SigBlk:\t0000000000000000" in p.stderr, "a command starts with no signal blocked"
    assert summary["control"]["leftover_processes_killed"] >= 1
    assert not _processes_with(marker), _processes_with(marker)
    assert not _leftover_cgroups("critmem-run-"), _leftover_cgroups("critmem-run-")


@needs_machine
def test_a_commands_jobs_are_listed_one_by_one_and_written_to_jobs_csv(tmp_path: Path) -> None:
    path = _command_scenario(tmp_path, PERIODIC_JOB, None)
    p = _run("run", str(path), "--platform", "linux", "--duration", "3s", "--json", "--out", str(tmp_path / "out"))
    assert p.returncode == 0, p.stderr
    summary = json.loads(p.stdout)
    assert_matches_output_schema("linux-run", summary)
    srt = {t["name"]: t for t in summary["tasks"]}["periodic-job"]
    # The task's own figures come from the reports of its group's only reporter.
    assert srt["max_response_ms"] > 0 and srt["mean_response_ms"] > 0 and srt["max_tardiness_ms"] is not None, srt
    rows = [j for j in summary["jobs"] if j["task"] == "periodic-job"]
    assert rows == summary["jobs"], "only a task whose jobs are counted has rows"
    assert summary["traces"] == {"limit": 100_000, "jobs": len(rows), "jobs_left_out": 0}
    outcomes = [r["outcome"] for r in rows]
    assert len(rows) == srt["jobs"] and outcomes.count("completed") == srt["completed"]
    assert outcomes.count("pending") == srt["pending"] and outcomes.count("dropped") == srt["dropped"]
    assert sum(r["missed"] for r in rows) == srt["deadline_misses"]
    completed = [r for r in rows if r["outcome"] == "completed"]
    assert max(r["response_ms"] for r in completed) == pytest.approx(srt["max_response_ms"], abs=1e-6)
    assert sum(r["response_ms"] for r in completed) / len(completed) == pytest.approx(srt["mean_response_ms"], abs=1e-3)
    for r in completed:
        # Times since the run's start, as the timeline's; the 100 ms relative deadline.
        assert -1_000 < r["release_ms"] < r["completion_ms"] < summary["horizon_ms"] + 6_000, r
        # Absolute deadlines, one period (100 ms) apart; a job released late keeps its own.
        assert r["deadline_ms"] == pytest.approx(rows[0]["deadline_ms"] + 100 * (r["job"] - rows[0]["job"]), abs=1e-3), r
        assert r["release_ms"] < r["deadline_ms"] <= r["release_ms"] + 100 + 1e-3, r
        assert r["response_ms"] == pytest.approx(r["completion_ms"] - r["release_ms"], abs=1e-3)
        assert r["tardiness_ms"] == pytest.approx(max(0.0, r["completion_ms"] - r["deadline_ms"]), abs=1e-3)
        # A job starts at its release, or when the one before it ends; its CPU time is the
        # program's own over the job, and no part of it is more than the job's length.
        assert r["release_ms"] - 1e-3 <= r["start_ms"] < r["completion_ms"], r
        length_ms = r["completion_ms"] - r["start_ms"]
        assert 0 <= r["stall_ms"] <= length_ms + 20 and 0 < r["cpu_ms"] <= length_ms + 20 and r["cpu_wait_ms"] >= 0, r
    assert [r["release_ms"] for r in rows] == sorted(r["release_ms"] for r in rows)
    lines = (tmp_path / "out" / "jobs.csv").read_text().splitlines()
    assert lines[0] == (
        "task,job,release_ms,deadline_ms,start_ms,completion_ms,drop_ms,response_ms,tardiness_ms,missed,outcome,stall_ms,cpu_ms,cpu_wait_ms"
    )
    assert len(lines) == 1 + len(rows)
    first = dict(zip(lines[0].split(","), lines[1].split(","), strict=True))
    assert first["task"] == "periodic-job" and first["job"] == str(rows[0]["job"]) and first["outcome"] == rows[0]["outcome"]
    assert float(first["release_ms"]) == pytest.approx(rows[0]["release_ms"], abs=1e-5) and first["missed"] in ("True", "False")
    assert "jobs.csv" in p.stderr


THROUGHPUT = """
import signal, sys
from critmem.jobclient import ProgressReporter
stopping = False
def stop(*_):
    global stopping
    stopping = True
signal.signal(signal.SIGTERM, stop)
done = 0
with ProgressReporter.from_env(min_interval_s=0.05) as progress:
    print("progress file:", progress.path, file=sys.stderr, flush=True)
    while not stopping:
        done += 1
        progress.update(done)
print("work units:", done, file=sys.stderr, flush=True)
"""


@needs_machine
def test_a_throughput_commands_progress_file_gives_its_work_units_per_second(tmp_path: Path) -> None:
    script = tmp_path / "throughput.py"
    script.write_text(THROUGHPUT)
    bad = tmp_path / "bad_progress.py"
    bad.write_text(
        "import os, time\nwith open(os.environ['CRITMEM_PROGRESS_FILE'], 'w') as f:\n    f.write('{\"work_units\": -3}')\ntime.sleep(600)\n"
    )
    path = _command_scenario(tmp_path, [sys.executable, str(bad)], [sys.executable, str(script)], reports_jobs=False)
    p = _run("run", str(path), "--platform", "linux", "--duration", "2s", "--json")
    assert p.returncode == 0, p.stderr
    summary = json.loads(p.stdout)
    assert_matches_output_schema("linux-run", summary)
    tasks = {t["name"]: t for t in summary["tasks"]}
    nrt, malformed = tasks["analytics"], tasks["periodic-job"]
    done = int(p.stderr.split("work units: ")[1].split()[0])
    # The final count the command wrote as it stopped on SIGTERM.
    assert nrt["work_units"] == done > 0, (nrt, p.stderr[-2000:])
    assert nrt["work_units_per_s"] == pytest.approx(done / (summary["horizon_ms"] / 1000), rel=1e-6)
    assert malformed["work_units"] is None and malformed["work_units_per_s"] is None
    assert "malformed progress file" in p.stderr and "work_units" in p.stderr
    assert summary["jobs"] == [] and summary["traces"]["jobs"] == 0
    progress_file = Path(p.stderr.split("progress file: ")[1].split()[0])
    assert progress_file.is_relative_to(RUN_STATE), progress_file
    assert not progress_file.parent.exists(), "the run's directory, progress files and all, is gone"
    assert not _leftover_cgroups("critmem-run-"), _leftover_cgroups("critmem-run-")
    assert not _run_state_left(), f"{RUN_STATE} left behind: {list(RUN_STATE.iterdir())}"


@needs_machine
def test_the_linux_table_shows_a_commands_work_units_per_second(tmp_path: Path) -> None:
    script = tmp_path / "throughput.py"
    script.write_text(THROUGHPUT)
    path = _command_scenario(tmp_path, PERIODIC_JOB, [sys.executable, str(script)])
    p = _run("run", str(path), "--platform", "linux", "--duration", "2s", columns=200)
    assert p.returncode == 0, p.stderr
    header = next(line for line in p.stdout.splitlines() if line.startswith("task "))
    assert "work units/s" in header, p.stdout
    rows = {line.split()[0]: line.split() for line in p.stdout.splitlines() if line.startswith(("analytics ", "periodic-job "))}
    # The column before the last (checksum fails, "-" for a command).
    assert float(rows["analytics"][-2]) > 0 and rows["periodic-job"][-2] == "-", rows


NEEDS_MEMORY_TO_STOP = """
import signal, sys, time
held = [bytearray(24 << 20)]
def stop(*_):
    held.append(bytearray(96 << 20))  # zero-filled: every page is touched
    print("stopped with", sum(map(len, held)) >> 20, "MiB", file=sys.stderr, flush=True)
    sys.exit(0)
signal.signal(signal.SIGTERM, stop)
while True:
    time.sleep(0.05)
"""


@needs_machine
def test_a_task_that_needs_memory_to_stop_gets_it_and_exits_cleanly(tmp_path: Path) -> None:
    # Offline holds the soft real-time group at 72 MiB, so the other gets 120 - 72 = 48 MiB; on
    # SIGTERM the command grows to 120 MiB. With no swap it waits at its limit, where it cannot
    # act on SIGTERM: the run must keep lifting the limit after its control loop has ended.
    script = tmp_path / "needs_memory_to_stop.py"
    script.write_text(NEEDS_MEMORY_TO_STOP)
    path = _command_scenario(tmp_path, None, [sys.executable, str(script)])
    argv = ["run", str(path), "--platform", "linux", "--duration", "2s", "--json"]
    p = _run(*argv, "--controller", "offline", "--controller-config", json.dumps({"limit_bytes": 72 << 20}), timeout=120)
    assert p.returncode == 0, p.stderr
    nrt = {t["name"]: t for t in json.loads(p.stdout)["tasks"]}["analytics"]
    assert nrt["stopped_by"] == "SIGTERM" and nrt["exit_code"] == 0, (nrt, p.stderr[-2000:])
    assert "stopped with 120 MiB" in p.stderr
    assert not _leftover_cgroups("critmem-run-"), _leftover_cgroups("critmem-run-")


@needs_machine
def test_the_run_ends_when_every_command_has_exited_and_says_how(tmp_path: Path) -> None:
    path = _command_scenario(tmp_path, ["/bin/sh", "-c", "exit 3"], ["true"], reports_jobs=False)
    p = _run("run", str(path), "--platform", "linux", "--duration", "10m", "--json", timeout=120)
    assert p.returncode == 0, p.stderr
    summary = json.loads(p.stdout)
    assert_matches_output_schema("linux-run", summary)
    assert summary["horizon_ms"] < 60_000, "the run stops once nothing is left running"
    tasks = {t["name"]: t for t in summary["tasks"]}
    assert tasks["periodic-job"]["exit_code"] == 3 and tasks["periodic-job"]["exited_early_s"] is not None
    assert tasks["analytics"]["exit_code"] == 0 and tasks["analytics"]["stopped_by"] is None
    assert tasks["periodic-job"]["jobs"] is None, "a command that does not report has no job counts"
    assert "soft real-time group has no task that reports jobs" in p.stderr
    assert "task process exited before the end of the run" in p.stderr
    assert not _leftover_cgroups("critmem-run-"), _leftover_cgroups("critmem-run-")


@needs_machine
@pytest.mark.parametrize(
    ("command", "needle"),
    [
        (["no-such-program-critmem"], '"no-such-program-critmem": no such executable file on PATH'),
        (["./not/here"], '"./not/here": no such executable file'),
        (["{tmp}/data.txt"], '/data.txt": no such executable file'),
    ],
)
def test_a_command_that_cannot_start_is_one_line_and_exit_code_2(tmp_path: Path, command: list[str], needle: str) -> None:
    (tmp_path / "data.txt").write_text("not a program\n")
    path = _command_scenario(tmp_path, PERIODIC_JOB, [c.replace("{tmp}", str(tmp_path)) for c in command])
    p = _run("run", str(path), "--platform", "linux", "--duration", "5s")
    _one_line_error(p, "task[1].command", needle)
    assert not _leftover_cgroups("critmem-run-"), _leftover_cgroups("critmem-run-")


def test_the_job_client_takes_its_socket_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(jobclient.SOCKET_ENV, raising=False)
    with pytest.raises(RuntimeError, match="CRITMEM_JOB_SOCKET is not set"):
        jobclient.JobClient.from_env()
    monkeypatch.setenv(jobclient.SOCKET_ENV, "/run/critmem-test/jobs.sock")
    assert jobclient.JobClient.from_env().path == "/run/critmem-test/jobs.sock"


@needs_machine
def test_swap_setup_and_teardown_manage_only_critmems_own_swapfile(tmp_path: Path) -> None:
    swaps = active_swaps
    before = swaps()
    state, path = tmp_path / "state.json", tmp_path / "critmem-test.swap"
    common = ["--state-file", str(state)]
    p = _run("swap", "setup", "--size", "64M", "--path", str(path), *common)
    try:
        assert p.returncode == 0, p.stderr
        assert "enabled" in p.stdout
        assert any(str(path) in line for line in swaps())
        again = _run("swap", "setup", "--size", "64M", "--path", str(tmp_path / "second.swap"), *common)
        _one_line_error(again, "already has a swapfile")
        status = json.loads(_run("swap", "status", *common).stdout)
        assert status["swapfile"] == str(path)
    finally:
        down = _run("swap", "teardown", *common)
    assert down.returncode == 0 and "disabled and deleted" in down.stdout, down
    assert swaps() == before and not path.exists()
    nothing = _run("swap", "teardown", *common)
    assert nothing.returncode == 0 and "nothing to do" in nothing.stdout


def _alive(pid: int) -> bool:
    """Running (a zombie nobody has reaped yet counts as gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


@needs_machine
def test_a_run_killed_with_sigkill_takes_its_tasks_and_the_next_run_removes_its_groups() -> None:
    run = subprocess.Popen(
        [str(BIN / "critmem-linux-run"), "--duration-s=60", "--", str(LINUX_EXAMPLE)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    name = f"critmem-run-{run.pid}"
    journal = RUN_STATE / f"{name}.journal"
    sockets = RUN_STATE / f"{name}.d"
    task_pids: list[int] = []
    deadline = time.monotonic() + 20
    while len(task_pids) < 2 and time.monotonic() < deadline:
        time.sleep(0.1)
        task_pids = [int(p) for d in _leftover_cgroups(name) for f in Path(d).glob("*/cgroup.procs") for p in f.read_text().split()]
    assert len(task_pids) >= 2, f"the run's two tasks never appeared in its groups: {run.poll()} {_leftover_cgroups(name)}"
    assert journal.is_file()
    run.kill()
    run.wait(timeout=10)
    deadline = time.monotonic() + 10
    while any(_alive(p) for p in task_pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(_alive(p) for p in task_pids), "a task outlived its run"
    assert _leftover_cgroups(name) and journal.is_file() and sockets.is_dir(), "nothing restored them yet"

    p = _run("run", str(LINUX_EXAMPLE), "--platform", "linux", "--duration", "1s", "--json")
    assert p.returncode == 0, p.stderr
    assert "ended without restoring" in p.stderr and str(run.pid) in p.stderr, p.stderr
    assert not _leftover_cgroups(name), "the next run removes a crashed run's groups, journal and socket"
    assert not journal.exists() and not sockets.exists()
    assert not _run_state_left(), f"{RUN_STATE} left behind: {list(RUN_STATE.iterdir())}"


@needs_machine
def test_the_agent_command_runs_the_daemon_and_restores(tmp_path: Path) -> None:
    group = f"critmem-pytest-{os.getpid()}"
    config = tmp_path / "agent.toml"
    config.write_text(
        f'controller = "greedy"\ntotal_memory_bytes = {512 * 2**20}\nsocket = "{tmp_path}/run/jobs.sock"\n'
        f'journal = "{tmp_path}/journal.jsonl"\n'
        f'[[group]]\nname = "batch"\ncgroup = "{group}/batch"\nrole = "non-rt"\nfloor_mb = 32\ncreate = true\n'
    )
    p = _run("agent", "--config", str(config), "--duration", "1s", "--log-level", "error")
    assert p.returncode == 0, p.stderr
    assert "deprecated" not in p.stderr, p.stderr
    summary = json.loads(p.stdout)
    assert summary["controller"] == "greedy" and summary["ticks"] > 50 and summary["removed_dirs"] >= 2
    assert not _leftover_cgroups(group)
    assert not (tmp_path / "journal.jsonl").exists()


@needs_machine
def test_the_agent_starts_on_a_fresh_machine_with_a_configuration_from_a_scenario(tmp_path: Path) -> None:
    """No state or runtime directory exists on a fresh machine: the agent makes what its
    journal and socket need (owner-only) and removes it again when it stops."""
    state, runtime = Path("/var/lib/critmem"), Path("/run/critmem")
    if state.exists() or runtime.exists():
        pytest.skip(f"{state} or {runtime} exists already: this machine is not in a fresh state, and it is not the test's to remove")
    group = f"critmem-pytest-{os.getpid()}"
    text = cli("agent-config", str(EXAMPLES / "linux-sara.toml")).stdout
    assert 'journal = "/var/lib/critmem/journal.jsonl"' in text and 'socket = "/run/critmem/jobs.sock"' in text
    config = tmp_path / "agent.toml"
    config.write_text(text.replace('cgroup = "critmem/', f'cgroup = "{group}/'))
    p = _run("agent", "--config", str(config), "--duration", "1s", "--log-level", "error")
    assert p.returncode == 0, p.stderr
    summary = json.loads(p.stdout)
    assert summary["controller"] == "sara" and summary["removed_dirs"] >= 2
    assert not _leftover_cgroups(group)
    assert not state.exists() and not runtime.exists(), "the agent removes the directories it made"


# -------------------------------------------------------------------------------------------
# The Python job client against a stand-in agent (the wire format is checked against the
# Rust parser in crates/linux/tests/linux/jobs.rs, with the real agent's socket).


def test_the_python_job_client_speaks_protocol_version_1(tmp_path: Path) -> None:
    path = tmp_path / "jobs.sock"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(1)
    received: list[dict[str, object]] = []

    def agent() -> None:
        conn, _ = server.accept()
        buf = b""
        with conn:
            while len(received) < 4:
                chunk = conn.recv(4096)
                if not chunk:
                    break
                buf += chunk
                *lines, buf = buf.split(b"\n")
                for line in lines:
                    received.append(json.loads(line))
                    if received[-1].get("op") == "release" and received[-1].get("job") == 2:
                        conn.sendall(b'{"v":1,"op":"drop","job":9}\n{"v":1,"op":"drop","job":2}\ngarbage\n')

    thread = threading.Thread(target=agent)
    thread.start()
    with jobclient.JobClient(path) as client:
        assert client.release(1, deadline_ns=1_000, at_ns=10)
        assert client.complete(1, at_ns=20)
        assert client.release(2, deadline_ns=2_000)
        asked: list[int] = []
        for _ in range(500):
            asked += client.drop_requests()
            if 2 in asked:
                break
            threading.Event().wait(0.01)
        assert asked == [9, 2]
        assert client.drop(2)
        thread.join(5)
        assert (client.sent, client.unsent, client.connects) == (4, 0, 1)
    server.close()
    assert received[0] == {"v": 1, "op": "release", "job": 1, "deadline_ns": 1000, "at_ns": 10}
    assert received[1] == {"v": 1, "op": "complete", "job": 1, "at_ns": 20}
    assert received[2]["op"] == "release" and received[2]["deadline_ns"] == 2000
    assert received[3]["op"] == "drop" and received[3]["job"] == 2


def test_the_python_job_client_never_raises_without_an_agent(tmp_path: Path) -> None:
    client = jobclient.JobClient(tmp_path / "nobody.sock")
    assert not client.release(0, deadline_ns=1)
    assert client.drop_requests() == []
    assert (client.sent, client.unsent) == (0, 1)
    with pytest.raises(ValueError, match="deadline_ns"):
        jobclient.format_message("complete", 1, deadline_ns=5)
    with pytest.raises(ValueError, match="unknown op"):
        jobclient.format_message("finish", 1)
    assert jobclient.parse_drop_request(b'{"v":2,"op":"drop","job":1}') is None
    assert jobclient.parse_drop_request(b'{"v":1,"op":"drop","job":true}') is None


def test_the_linux_timeline_chart_draws_dollar_signs_in_names(tmp_path: Path) -> None:
    # matplotlib parses text between two `$` as math: `$$` alone must not fail the chart.
    sample = {"usage_bytes": 64 << 20, "max_bytes": 96 << 20}
    summary = {
        "scenario": "cost$x$.toml",
        "controller": "sara",
        "memory": {"total_bytes": 128 << 20, "groups": [{"name": "$$"}, {"name": "nrt"}]},
        "control": {"timeline": [{"t_ms": t, "groups": [sample, {"usage_bytes": 1 << 20, "max_bytes": None}]} for t in (0, 5, 10)]},
    }
    out = plot_timeline(summary, tmp_path / "timeline.png")
    assert out.stat().st_size > 0


# -------------------------------------------------------------------------------------------
# critmem swap on a fresh machine.

DEFAULT_SWAP_STATE_DIR = Path("/var/lib/critmem")


@pytest.mark.skipif(os.geteuid() != 0, reason="not root (swapon needs root)")
def test_swap_setup_and_teardown_work_on_a_fresh_machine() -> None:
    """The default state directory does not exist on a fresh machine: setup makes it (root's
    alone), teardown removes it again, and other swap stays exactly as it was."""
    if DEFAULT_SWAP_STATE_DIR.exists():
        pytest.skip(f"{DEFAULT_SWAP_STATE_DIR} exists already: this machine is not in a fresh state, and it is not the test's to remove")
    swaps_before = active_swaps()
    setup = _run("swap", "setup", "--size", "1G")
    try:
        if setup.returncode == 2 and "swapon" in setup.stderr:
            pytest.skip(f"swapon refused a file in {DEFAULT_SWAP_STATE_DIR}: {setup.stderr.strip()}")
        assert setup.returncode == 0, setup
        assert "enabled" in setup.stdout, setup.stdout
        mode = DEFAULT_SWAP_STATE_DIR.stat()
        assert (mode.st_mode & 0o777, mode.st_uid) == (0o700, 0)
        assert str(DEFAULT_SWAP_STATE_DIR / "critmem.swap") in Path("/proc/swaps").read_text()
    finally:
        teardown = _run("swap", "teardown")
    assert teardown.returncode == 0, teardown
    assert not DEFAULT_SWAP_STATE_DIR.exists(), "teardown removes the state directory setup made"
    assert active_swaps() == swaps_before


def test_agent_config_from_a_scenario_names_its_groups_and_controller(tmp_path: Path) -> None:
    o = cli("agent-config", str(EXAMPLES / "linux-sara.toml"))
    assert o.code == 0, o.stderr
    config = tomllib.loads(o.stdout)
    assert config["controller"] == "sara"
    assert config["controller_config"]["interval_ns"] == 5_000_000
    assert [(g["name"], g["role"], g["cgroup"]) for g in config["group"]] == [
        ("srt", "soft-rt", "critmem/srt"),
        ("nrt", "non-rt", "critmem/nrt"),
    ]
    out = tmp_path / "agent.toml"
    assert cli("agent-config", str(EXAMPLES / "linux-sara.toml"), "--out", str(out)).code == 0
    assert out.read_text() == o.stdout
    again = cli("agent-config", str(EXAMPLES / "linux-sara.toml"), "--out", str(out))
    assert again.code == 2 and "exists; give --force" in again.stderr
    refused = cli("agent-config", str(EXAMPLES / "rm-textbook.toml"))
    assert refused.code == 2 and refused.stderr.count("\n") == 1 and "[control]" in refused.stderr
