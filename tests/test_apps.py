"""The real applications in `critmem.apps` (speech, vision, graph, tables): alone they check their own
results and say so in their exit code; a wrong input fails the self-check; a missing extra is one
line and exit code 2; and, as root, each bundled Linux example runs them under critmem with
every self-check passed, jobs reported and nothing left behind."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import CRITMEM, EXAMPLES, ROOT, TIME_SCALE, cgroups_named, linux_machine_reason
from critmem.apps import speech_audio, tables

PYTHON = sys.executable
# The apps' imports of their third-party packages.
EXTRAS = {"speech": "pocketsphinx", "vision": "cv2", "graph": "igraph"}
# Small, quick settings: a few MiB of recordings, two frames, a small graph; no waiting
# between jobs.
QUICK = {
    "speech": ["--buffer-mb", "1", "--period-ms", "1"],
    "vision": ["--frames", "2", "--period-ms", "1"],
    "graph": ["--vertices", "20000"],
    "tables": ["--rows", "20000", "--customers", "2000", "--products", "300"],
}


def _env(**extra: str) -> dict[str, str]:
    """This environment without what critmem would set for a task, plus `extra`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CRITMEM_")}
    return {**env, **extra}


def _app(app: str, *args: str, env: dict[str, str] | None = None, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PYTHON, "-m", f"critmem.apps.{app}", *args],
        cwd=ROOT,
        env=env or _env(),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def _counts(stderr: str) -> dict[str, Any]:
    """The JSON line of counts an app prints last on stderr."""
    lines = [line for line in stderr.splitlines() if line.startswith("{")]
    assert lines, stderr
    counts: dict[str, Any] = json.loads(lines[-1])
    return counts


def _needs_speech_audio() -> None:
    if not speech_audio.is_complete(speech_audio.default_dir()):
        pytest.skip(f"no synthesised speech in {speech_audio.default_dir()} (scripts/setup.sh makes it; it needs espeak-ng)")


@pytest.mark.parametrize("app", ["speech", "vision"])
def test_soft_real_time_app_passes_its_self_check_alone(app: str) -> None:
    if app == "speech":
        _needs_speech_audio()
    p = _app(app, *QUICK[app], "--jobs", "3")
    assert p.returncode == 0, p.stderr
    counts = _counts(p.stderr)
    assert counts["app"] == app and counts["jobs"] == 3 and counts["self_check_failures"] == 0, counts
    assert counts["hits"] + counts["misses"] == 3 and counts["dropped"] == counts["unfinished"] == 0, counts
    assert counts["job_ms_median"] > 0 and counts["vmhwm_mb"] > 0, counts


def test_speech_decoding_far_from_its_words_fails_the_self_check(tmp_path: Path) -> None:
    # One sentence's recording beside another sentence's words.
    _needs_speech_audio()
    audio = speech_audio.default_dir()
    shutil.copy(audio / "utt-00.raw", tmp_path / "mislabelled.raw")
    shutil.copy(audio / "utt-01.txt", tmp_path / "mislabelled.txt")
    p = _app("speech", "--audio", str(tmp_path / "mislabelled.raw"), *QUICK["speech"], "--jobs", "2")
    assert p.returncode == 1, p.stderr
    assert "self-check failed in job 0: mislabelled decodes as 'please open the door'" in p.stderr, p.stderr
    # The second decoding gives the first one's transcript again: one failure only.
    counts = _counts(p.stderr)
    assert counts["jobs"] == 2 and counts["self_check_failures"] == 1, counts


def test_speech_audio_check_says_whether_a_directory_holds_the_recordings(tmp_path: Path) -> None:
    _needs_speech_audio()

    def check(directory: Path) -> int:
        return _app("speech_audio", "--check", "--out", str(directory)).returncode

    assert check(speech_audio.default_dir()) == 0
    assert check(tmp_path / "none") == 1
    partial = tmp_path / "partial"
    shutil.copytree(speech_audio.default_dir(), partial)
    (partial / "utt-03.raw").unlink()
    assert check(partial) == 1


def test_vision_frames_too_noisy_for_its_pipeline_fail_the_self_check() -> None:
    p = _app("vision", *QUICK["vision"], "--noise", "100", "--jobs", "2")
    assert p.returncode == 1, p.stderr
    assert "self-check failed in job 0 (frame 0)" in p.stderr, p.stderr
    assert _counts(p.stderr)["self_check_failures"] == 2


def test_graph_checks_its_pagerank_and_reports_work_units(tmp_path: Path) -> None:
    progress = tmp_path / "progress.json"
    p = _app("graph", *QUICK["graph"], "--units", "3", env=_env(CRITMEM_PROGRESS_FILE=str(progress)))
    assert p.returncode == 0, p.stderr
    counts = _counts(p.stderr)
    assert counts["work_units"] == 3 and counts["self_check_failures"] == 0 and counts["work_units_per_s"] > 0, counts
    assert counts["vertices"] == 20000 and counts["edges"] > 0, counts
    assert json.loads(progress.read_text()) == {"work_units": 3}


def test_tables_checks_its_report_and_reports_work_units(tmp_path: Path) -> None:
    progress = tmp_path / "progress.json"
    p = _app("tables", *QUICK["tables"], "--units", "3", env=_env(CRITMEM_PROGRESS_FILE=str(progress)))
    assert p.returncode == 0, p.stderr
    counts = _counts(p.stderr)
    assert counts["work_units"] == 3 and counts["self_check_failures"] == 0 and counts["work_units_per_s"] > 0, counts
    assert counts["rows"] == 20000 and counts["vmhwm_mb"] > 0, counts
    assert json.loads(progress.read_text()) == {"work_units": 3}


def test_a_tables_report_that_does_not_add_up_or_differs_from_the_first_fails_the_self_check() -> None:
    sales, products = tables.make_tables(5000, 50, 500, seed=3)
    want = tables.expected(sales, products)
    first = tables.report(sales, products, 10)
    assert tables.check(first, want, None) is None and tables.check(tables.report(sales, products, 10), want, first) is None
    # A category's sales lost: the categories no longer add up to the sales.
    short = tables.Report(first.by_category.iloc[1:], first.top_customers)
    assert "the categories' revenue adds up to" in (tables.check(short, want, None) or "")
    # The join took the wrong product's cost: the margin no longer adds up.
    wrong_cost = products.assign(unit_cost=products["unit_cost"].to_numpy()[::-1])
    assert "the categories' margin adds up to" in (tables.check(tables.report(sales, wrong_cost, 10), want, None) or "")
    # The top list without its first customer, and one more from below the cut at its end.
    top = tables.report(sales, products, 11).top_customers
    assert "below a customer left out" in (tables.check(tables.Report(first.by_category, top.iloc[1:]), want, None) or "")
    # Other tables: the report is no longer the first unit's.
    sales4, products4 = tables.make_tables(5000, 50, 500, seed=4)
    other = tables.report(sales4, products4, 10)
    assert tables.check(other, tables.expected(sales4, products4), None) is None
    assert "differs from the first unit's" in (tables.check(other, tables.expected(sales4, products4), first) or "")


def test_graph_killed_before_its_first_unit_has_reported_zero_units(tmp_path: Path) -> None:
    progress = tmp_path / "progress.json"
    env = _env(CRITMEM_PROGRESS_FILE=str(progress))
    # A graph this size takes seconds to build: the kill lands before any unit is done.
    p = subprocess.Popen([PYTHON, "-m", "critmem.apps.graph", "--vertices", "5000000"], cwd=ROOT, env=env)
    try:
        deadline = time.monotonic() + 60 * TIME_SCALE
        while not progress.exists() and p.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        p.kill()
        p.wait()
    assert json.loads(progress.read_text()) == {"work_units": 0}


def test_jobs_are_reported_and_a_drop_request_abandons_the_job(tmp_path: Path) -> None:
    # An agent's end of the job socket that asks for job 1 to be dropped as soon as it is released.
    path = tmp_path / "jobs.sock"
    received: list[dict[str, Any]] = []
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listener:
        listener.bind(str(path))
        listener.listen(1)
        listener.settimeout(60)

        def agent() -> None:
            connection, _ = listener.accept()
            with connection, connection.makefile("rb") as lines:
                for line in lines:
                    message = json.loads(line)
                    received.append(message)
                    if message["op"] == "release" and message["job"] == 1:
                        connection.sendall(b'{"v":1,"op":"drop","job":1}\n')

        thread = threading.Thread(target=agent, daemon=True)
        thread.start()
        env = _env(CRITMEM_JOB_SOCKET=str(path), CRITMEM_PERIOD_NS="100000000", CRITMEM_DEADLINE_NS="90000000")
        p = _app("vision", "--frames", "2", "--jobs", "3", env=env)
        thread.join(timeout=10)
    assert p.returncode == 0, p.stderr
    counts = _counts(p.stderr)
    assert counts["dropped"] == 1 and counts["jobs"] == 3 and counts["hits"] + counts["misses"] == 2, counts
    assert (counts["period_ms"], counts["deadline_ms"], counts["unsent"]) == (100.0, 90.0, 0), counts
    assert [(m["op"], m["job"]) for m in received] == [
        ("release", 0),
        ("complete", 0),
        ("release", 1),
        ("drop", 1),
        ("release", 2),
        ("complete", 2),
    ]
    assert received[0]["deadline_ns"] - received[0]["at_ns"] <= 90_000_000


@pytest.mark.parametrize("app", ["vision", "graph", "tables"])
def test_sigterm_ends_an_endless_run_with_its_counts_and_exit_code_0(app: str) -> None:
    args = ["--frames", "2", "--size", "640x480", "--period-ms", "50"] if app == "vision" else QUICK[app]
    with subprocess.Popen([PYTHON, "-m", f"critmem.apps.{app}", *args], cwd=ROOT, env=_env(), stderr=subprocess.PIPE, text=True) as process:
        # Past the imports, so the app's handler is in place.
        time.sleep(3 * TIME_SCALE)
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=60 * TIME_SCALE)
    assert process.returncode == 0, stderr
    counts = _counts(stderr)
    assert counts["self_check_failures"] == 0, counts
    assert (counts["jobs"] if app == "vision" else counts["work_units"]) > 0, counts


@pytest.mark.parametrize("app", sorted(EXTRAS))
def test_missing_extra_is_one_line_and_exit_code_2_and_help_still_works(app: str) -> None:
    # As if the package were not installed: an import of it fails.
    run = f"import runpy, sys; sys.modules[{EXTRAS[app]!r}] = None; sys.argv[0] = {app!r}; runpy.run_module('critmem.apps.{app}', run_name='__main__')"
    p = subprocess.run([PYTHON, "-c", run, *QUICK[app]], cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=60, check=False)
    assert p.returncode == 2, p.stderr
    lines = p.stderr.splitlines()
    assert len(lines) == 1 and "Traceback" not in p.stderr, p.stderr
    assert lines[0].startswith(f"{app}: cannot import {EXTRAS[app]}") and "critmem[apps]" in lines[0], lines[0]
    helped = subprocess.run([PYTHON, "-c", run, "--help"], cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=60, check=False)
    assert helped.returncode == 0 and "usage: python -m critmem.apps." in helped.stdout, helped.stderr


@pytest.mark.parametrize(
    ("app", "args", "needle"),
    [
        ("speech", ["--jobs", "0"], "--jobs must be at least 1"),
        ("speech", ["--audio", "/nonexistent/speech.raw"], "/nonexistent/speech.raw does not exist"),
        ("vision", ["--period-ms", "-5"], "--period-ms must be positive"),
        ("graph", ["--damping", "1.5"], "--damping must be between 0 and 1"),
        ("tables", ["--rows", "0"], "--rows must be at least 1"),
    ],
)
def test_bad_arguments_are_one_line_and_exit_code_2(app: str, args: list[str], needle: str) -> None:
    p = _app(app, *args)
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and needle in p.stderr, p.stderr


def test_bad_period_in_the_environment_is_one_line_and_exit_code_2() -> None:
    p = _app("vision", "--jobs", "1", env=_env(CRITMEM_PERIOD_NS="soon"))
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and "CRITMEM_PERIOD_NS" in p.stderr, p.stderr


# --- Under critmem on the real machine ---------------------------------------------------------


_machine_reason = linux_machine_reason


def _critmem_cgroups() -> set[str]:
    return set(cgroups_named("critmem-"))


@pytest.mark.skipif(_machine_reason() is not None, reason=f"real Linux: {_machine_reason()}")
@pytest.mark.parametrize("example", ["linux-speech", "linux-vision"])
def test_example_runs_the_apps_under_critmem_with_every_self_check_passed(example: str) -> None:
    if example == "linux-speech":
        _needs_speech_audio()
    before = _critmem_cgroups()
    p = subprocess.run(
        # A PageRank round or a recognition may outlast the default grace on a slower machine.
        [
            str(CRITMEM),
            "run",
            str(EXAMPLES / f"{example}.toml"),
            "--platform",
            "linux",
            "--duration",
            "20s",
            "--stop-grace",
            f"{5 * TIME_SCALE:g}s",
            "--json",
        ],
        cwd=ROOT,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=180 * TIME_SCALE,
        check=False,
    )
    assert p.returncode == 0, p.stderr[-3000:]
    tasks = {t["name"]: t for t in json.loads(p.stdout)["tasks"]}
    srt = tasks[example.removeprefix("linux-")]
    graph = tasks["graph"]
    for row in (srt, graph):
        assert row["exit_code"] == 0 and row["exited_early_s"] is None, (row, p.stderr[-3000:])
    assert srt["reports_jobs"] is True and srt["jobs"] > 0 and srt["hit_ratio"] is not None, srt
    assert graph["work_units"] > 0, graph
    # Each app's closing line: both there, no self-check failed.
    lines = [json.loads(line) for line in p.stderr.splitlines() if line.startswith('{"app": ')]
    assert sorted(line["app"] for line in lines) == sorted([srt["name"], "graph"]), p.stderr[-3000:]
    assert all(line["self_check_failures"] == 0 for line in lines), lines
    assert _critmem_cgroups() == before
