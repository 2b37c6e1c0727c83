"""`critmem run`: the table, the JSON object, the results folder, every bundled example."""

from __future__ import annotations

import json
import re
import struct
import subprocess
import sys
import tomllib
import zlib
from pathlib import Path

import matplotlib.image
import pytest
from conftest import EXAMPLE_FILES, EXAMPLES, QUICKSTART, RM_TEXTBOOK, WriteScenario, cli, cli_process
from critmem import run
from critmem.api import MAX_TRACE_RECORDS
from critmem.cli.outdir import _OUT_NAMES
from critmem.gantt import _window_end_ms, plot_gantt

SUMMARY_TASK_KEYS = {"name", "jobs", "completed", "deadline_misses", "max_response_ms", "mean_response_ms", "max_tardiness_ms"}


def test_run_prints_a_header_and_one_row_per_task() -> None:
    o = cli("run", str(RM_TEXTBOOK))
    assert o.code == 0, o.stderr
    assert o.stderr == ""
    lines = o.stdout.splitlines()
    assert re.fullmatch(rf"{re.escape(str(RM_TEXTBOOK))}: rm on 1 CPU, horizon 360 ms, seed 1, \d+ events", lines[0])
    for column in ("task", "crit", "released", "completed", "misses", "hit ratio", "max resp ms", "mean resp ms", "max tard ms"):
        assert column in lines[1], column
    rows = {line.split()[0]: line.split() for line in lines[3:]}
    assert sorted(rows) == ["t1", "t2", "t3", "t4"]
    # task crit cpu released completed misses hit max mean tard
    assert rows["t3"] == ["t3", "B", "-", "40", "40", "0", "100.0%", "7.000", "5.050", "0.000"]


def test_run_json_has_the_documented_keys_and_nothing_else_on_stdout() -> None:
    o = cli("run", str(QUICKSTART), "--json")
    assert o.code == 0, o.stderr
    assert o.stdout.endswith("}\n") and o.stdout.count("\n") == 1
    summary = json.loads(o.stdout)
    assert {"tasks", "seed"} <= summary.keys()
    assert summary["seed"] == 42
    assert len(summary["tasks"]) == 6
    # The quickstart declares memory, a controller and a server: their sections are there.
    assert {"memory", "control", "servers", "components", "tmem"} <= summary.keys()
    for task in summary["tasks"]:
        assert SUMMARY_TASK_KEYS <= task.keys(), task.keys()


def test_rm_textbook_worst_responses_are_1_2_7_18_ms() -> None:
    summary = json.loads(cli("run", str(RM_TEXTBOOK), "--json").stdout)
    assert [t["max_response_ms"] for t in summary["tasks"]] == [1.0, 2.0, 7.0, 18.0]
    assert all(t["deadline_misses"] == 0 for t in summary["tasks"])


def test_seed_and_horizon_flags_override_the_file() -> None:
    summary = json.loads(cli("run", str(QUICKSTART), "--json", "--seed", "7", "--horizon-ms", "250.5").stdout)
    assert summary["seed"] == 7
    assert summary["horizon_ms"] == 250.5


def _png_size(data: bytes) -> tuple[int, int]:
    """Checks the PNG signature and the IHDR chunk's CRC; returns (width, height)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    length, kind = struct.unpack(">I4s", data[8:16])
    assert kind == b"IHDR" and length == 13
    body = data[16 : 16 + length]
    (crc,) = struct.unpack(">I", data[16 + length : 20 + length])
    assert zlib.crc32(kind + body) == crc
    assert data.endswith(b"IEND\xaeB`\x82")
    width, height = struct.unpack(">II", body[:8])
    return width, height


def test_out_writes_the_trace_summary_and_a_gantt_png(tmp_path: Path) -> None:
    out = tmp_path / "results" / "quickstart"
    o = cli("run", str(QUICKSTART), "--out", str(out))
    assert o.code == 0, o.stderr
    # The quickstart has memory, a controller, a server and resources: their files sit beside the traces.
    assert sorted(p.name for p in out.iterdir()) == [
        ".critmem-out", "control_timeline.csv", "csv-metadata.json", "gantt.png", "jobs.csv", "memory.png",
        "memory_timeline.csv", "segments.csv", "server_supply.csv", "servers.csv", "summary.json", "trace.json", "waits.csv",
    ]  # fmt: skip
    assert sorted((out / ".critmem-out").read_text().splitlines()) == sorted(p.name for p in out.iterdir() if p.name != ".critmem-out")
    assert str(out) in o.stdout.splitlines()[-1]

    summary = json.loads((out / "summary.json").read_text())
    jobs = (out / "jobs.csv").read_text().splitlines()
    assert (
        jobs[0]
        == "task,job,release_ms,deadline_ms,demand_ms,executed_ms,start_ms,completion_ms,response_ms,tardiness_ms,missed,outcome,last_cpu"
    )
    assert len(jobs) - 1 == sum(t["jobs"] for t in summary["tasks"])
    segments = (out / "segments.csv").read_text().splitlines()
    assert segments[0] == "cpu,task,job,start_ms,end_ms"
    assert len(segments) > 1

    width, height = _png_size((out / "gantt.png").read_bytes())
    assert width > 400 and height > 100
    # It decodes, and is not blank.
    pixels = matplotlib.image.imread(out / "gantt.png")
    assert pixels.shape[:2] == (height, width)
    assert pixels.std() > 0.05


def test_a_trace_limit_keeps_the_first_rows_and_every_file_says_what_it_left_out(tmp_path: Path) -> None:
    full = run(RM_TEXTBOOK)
    o = cli("run", str(RM_TEXTBOOK), "--out", str(tmp_path), "--trace-limit", "10")
    assert o.code == 0, o.stderr
    jobs_left, segments_left = len(full.jobs) - 10, len(full.segments) - 10
    note = o.stdout.splitlines()[-1]
    assert note.startswith("note: a trace keeps at most 10 rows, the first to end; left out: "), note
    assert (
        f"left out: {jobs_left} jobs and {segments_left} segments (the per-task totals count every job; summary.json records this)" in note
    )
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["traces"] == {"limit": 10, "jobs": 10, "jobs_left_out": jobs_left, "segments": 10, "segments_left_out": segments_left}
    # The per-task totals still count every job.
    assert summary["tasks"] == json.loads(full.to_json())["tasks"]
    assert len((tmp_path / "jobs.csv").read_text().splitlines()) == 1 + 10
    meta = {t["url"]: t for t in json.loads((tmp_path / "csv-metadata.json").read_text())["tables"]}
    assert meta["jobs.csv"]["notes"] == [{"trace_limit": 10, "rows_left_out": jobs_left}]
    assert f"{segments_left:,} more were left out" in meta["segments.csv"]["dc:description"]
    columns = {c["name"]: c["datatype"] for c in meta["jobs.csv"]["tableSchema"]["columns"]}
    assert (columns["task"], columns["job"], columns["release_ms"], columns["missed"], columns["last_cpu"]) == (
        "string", "integer", "double", "boolean", "integer"
    )  # fmt: skip
    whole = cli("run", str(RM_TEXTBOOK), "--out", str(tmp_path / "again"))
    assert "note:" not in whole.stdout
    again = {t["url"]: t for t in json.loads((tmp_path / "again" / "csv-metadata.json").read_text())["tables"]}
    assert again["jobs.csv"]["notes"] == [{"trace_limit": MAX_TRACE_RECORDS, "rows_left_out": 0}]


def test_no_traces_writes_the_summary_without_traces(tmp_path: Path) -> None:
    o = cli("run", str(EXAMPLES / "linux-sara.toml"), "--out", str(tmp_path), "--no-traces")
    assert o.code == 0, o.stderr
    written = sorted(p.name for p in tmp_path.iterdir())
    assert written == [".critmem-out", "control_timeline.csv", "csv-metadata.json", "memory.png", "memory_timeline.csv", "summary.json"]
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert "traces" not in summary
    assert summary == json.loads(cli("run", str(EXAMPLES / "linux-sara.toml"), "--json").stdout)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--trace-limit", "5"], "--trace-limit and --no-traces shape the traces --out writes: give --out DIR"),
        (["--no-traces"], "--trace-limit and --no-traces shape the traces --out writes: give --out DIR"),
        (
            ["--out", "OUT", "--no-traces", "--trace-limit", "5"],
            "--no-traces writes no traces: drop --trace-limit, --gantt-window, --format and --parquet",
        ),
        (["--out", "OUT", "--trace-limit", "-1"], "argument --trace-limit: must be at least 0 (got -1)"),
        (["--out", "OUT", "--trace-limit", "many"], "argument --trace-limit: not an integer: 'many'"),
    ],
)
def test_trace_flags_are_checked_up_front(argv: list[str], message: str, tmp_path: Path) -> None:
    o = cli("run", str(RM_TEXTBOOK), *[str(tmp_path / "o") if a == "OUT" else a for a in argv])
    assert o.code == 2 and o.stdout == ""
    assert len(o.stderr.splitlines()) == 1 and message in o.stderr, o.stderr
    assert not (tmp_path / "o").exists() or not any((tmp_path / "o").iterdir())


def test_out_with_json_keeps_stdout_to_the_json_object(tmp_path: Path) -> None:
    o = cli("run", str(RM_TEXTBOOK), "--json", "--out", str(tmp_path))
    assert o.code == 0
    assert json.loads(o.stdout)["scenario"] == str(RM_TEXTBOOK)
    assert "wrote" in o.stderr
    assert (tmp_path / "summary.json").read_text() == o.stdout


def test_gantt_of_a_long_run_shows_a_window_and_says_so(tmp_path: Path) -> None:
    result = run(QUICKSTART)
    # The chart draws a leading window only when it must; the title says so.
    assert len(result.segments) > 200
    plot_gantt(result, tmp_path / "small.png", max_segments=100)
    plot_gantt(result, tmp_path / "all.png", max_segments=10**6)
    assert (tmp_path / "small.png").read_bytes() != (tmp_path / "all.png").read_bytes()
    assert _window_end_ms(result, 100) < result.horizon_ms
    assert _window_end_ms(result, 10**6) == result.horizon_ms


@pytest.mark.parametrize("example", EXAMPLE_FILES, ids=[p.name for p in EXAMPLE_FILES])
def test_every_bundled_example_runs_and_analyses(example: Path, tmp_path: Path) -> None:
    o = cli("run", str(example), "--out", str(tmp_path))
    assert o.code == 0, o.stderr
    assert (tmp_path / "gantt.png").stat().st_size > 0
    # Every file it wrote is one `--force` knows as critmem's own, so none is left stale.
    written = {p.name for p in tmp_path.iterdir()}
    assert written <= _OUT_NAMES, written - _OUT_NAMES
    o = cli("analyze", str(example))
    assert o.code == 0, o.stderr
    assert "verdict:" in o.stdout


def test_installed_console_script_runs_the_readme_command(tmp_path: Path) -> None:
    o = cli_process("run", "examples/quickstart.toml", "--out", str(tmp_path / "q"))
    assert o.code == 0, o.stderr
    assert "flight-control" in o.stdout
    assert (tmp_path / "q" / "gantt.png").exists()
    assert cli_process("--version").stdout.startswith("critmem ")


def test_a_json_scenario_file_runs_like_its_toml_twin(scenario_file: WriteScenario) -> None:
    path = scenario_file(json.dumps(tomllib.loads(RM_TEXTBOOK.read_text())), name="rm.json")
    o = cli("run", str(path), "--json")
    assert o.code == 0, o.stderr
    assert [t["max_response_ms"] for t in json.loads(o.stdout)["tasks"]] == [1.0, 2.0, 7.0, 18.0]


def test_jobs_aborted_at_their_deadline_are_not_tardy() -> None:
    r = run(EXAMPLES / "overload.toml")
    aborted = r.jobs[r.jobs["outcome"] == "aborted"]
    assert not aborted.empty
    assert (aborted["tardiness_ms"] == 0).all()


def test_control_characters_in_names_are_shown_escaped_one_row_per_task(scenario_file: WriteScenario) -> None:
    names = ["\x1b[2Jclear", "two\nlines", "bell\x07"]
    tasks = "".join(f"[[task]]\nname = {json.dumps(n)}\nwcet_ms = 1\nperiod_ms = 10\n" for n in names)
    path = scenario_file(f'[scheduler]\nkind = "rm"\n[run]\nhorizon_ms = 20\n{tasks}')
    for command in ("run", "analyze"):
        o = cli_process(command, str(path))
        assert o.code == 0, o.stderr
        assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f]", o.stdout), repr(o.stdout)
        for shown in (r"\x1b[2Jclear", r"two\nlines", r"bell\x07"):
            rows = [line for line in o.stdout.splitlines() if shown in line]
            assert len(rows) == 1, (command, shown, o.stdout)


def test_out_refuses_a_folder_that_is_not_empty_and_force_replaces_only_critmems_files(tmp_path: Path) -> None:
    out = tmp_path / "results"
    out.mkdir()
    (out / "notes.txt").write_text("mine\n")
    refused = cli("run", str(RM_TEXTBOOK), "--out", str(out))
    assert refused.code == 2 and refused.stdout == ""
    expected = (
        f"critmem: error: cannot write results to {str(out)!r}: it holds files critmem did not write (notes.txt); "
        "choose an empty or new folder, or give --force to replace only critmem's files of an earlier run"
    )
    assert refused.stderr.splitlines() == [expected]
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt"]

    # A memory scenario writes memory.png; a later run without [memory] must not leave it stale.
    assert cli("run", str(EXAMPLES / "shared-pages.toml"), "--out", str(out), "--force").code == 0
    assert (out / "memory.png").exists()
    again = cli("run", str(RM_TEXTBOOK), "--out", str(out))
    assert again.code == 2 and "critmem did not write (notes.txt)" in again.stderr
    assert cli("run", str(RM_TEXTBOOK), "--out", str(out), "--force").code == 0
    names = sorted(p.name for p in out.iterdir())
    assert names == [
        ".critmem-out",
        "csv-metadata.json",
        "gantt.png",
        "jobs.csv",
        "notes.txt",
        "segments.csv",
        "summary.json",
        "trace.json",
    ]
    assert (out / "notes.txt").read_text() == "mine\n"


def test_out_refuses_an_earlier_runs_folder_without_force(tmp_path: Path) -> None:
    out = tmp_path / "results"
    assert cli("run", str(RM_TEXTBOOK), "--out", str(out)).code == 0
    o = cli("run", str(RM_TEXTBOOK), "--out", str(out))
    assert o.code == 2 and o.stderr.endswith("it holds the results of an earlier run; give --force to replace them\n")


def test_force_never_replaces_a_file_critmem_did_not_write(tmp_path: Path) -> None:
    out = tmp_path / "results"
    out.mkdir()
    (out / "jobs.csv").write_text("my own jobs\n")
    o = cli("run", str(RM_TEXTBOOK), "--out", str(out), "--force")
    assert o.code == 2 and "jobs.csv is in the way and critmem did not write it" in o.stderr
    assert (out / "jobs.csv").read_text() == "my own jobs\n"


def test_json_commands_load_neither_pandas_nor_rich(tmp_path: Path) -> None:
    # What keeps `run --json` and `analyze --json` fast to start (BENCHMARKS.md times it).
    probe = (
        "import sys, contextlib, io\n"
        "from critmem.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        f"    assert main(['run', {str(RM_TEXTBOOK)!r}, '--json']) == 0\n"
        f"    assert main(['analyze', {str(RM_TEXTBOOK)!r}, '--json']) == 0\n"
        "print(sorted(m for m in ('pandas', 'numpy', 'matplotlib', 'rich') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=tmp_path)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr
    # The table needs rich, and still no data frames.
    table = probe.replace(", '--json']) == 0\n    assert main(['analyze'", "]) == 0\n    assert main(['analyze'")
    assert table != probe
    out = subprocess.run([sys.executable, "-c", table], capture_output=True, text=True, check=True, cwd=tmp_path)
    assert out.stdout.strip() == "['rich']", out.stdout + out.stderr


def test_out_writes_a_trace_event_file_of_the_schedule(tmp_path: Path) -> None:
    overload = EXAMPLES / "overload.toml"
    assert cli("run", str(overload), "--out", str(tmp_path)).code == 0
    trace = json.loads((tmp_path / "trace.json").read_text())
    result = run(overload)
    events = trace["traceEvents"]
    runs = [e for e in events if e["ph"] == "X" and e["pid"] == 1]
    jobs = [e for e in events if e["ph"] == "X" and e["pid"] == 2]
    assert len(runs) == len(result.segments) and len(jobs) == len(result.jobs)
    # Each task's time on the CPUs is its jobs' executed time (µs against ms).
    for name, executed_ms in result.jobs.groupby("task", observed=True)["executed_ms"].sum().items():
        ran_us = sum(e["dur"] for e in runs if e["name"] == name)
        assert abs(ran_us - executed_ms * 1000) < 1e-3 * max(1.0, ran_us)
    missed = [e for e in jobs if e["cat"] == "missed"]
    assert len(missed) == int(result.jobs["missed"].sum()) > 0
    names = {e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    assert {"CPU 0", *map(str, result.tasks["name"])} <= names
    # The same run writes the same bytes.
    again = tmp_path / "again"
    assert cli("run", str(overload), "--out", str(again)).code == 0
    assert (again / "trace.json").read_bytes() == (tmp_path / "trace.json").read_bytes()


def test_parquet_traces_keep_the_frames_types(tmp_path: Path) -> None:
    import pandas as pd

    o = cli("run", str(EXAMPLES / "shared-pages.toml"), "--out", str(tmp_path), "--parquet")
    assert o.code == 0, o.stderr
    result = run(EXAMPLES / "shared-pages.toml")
    for name, frame in (("jobs", result.jobs), ("segments", result.segments), ("memory_timeline", result.memory_timeline)):
        loaded = pd.read_parquet(tmp_path / f"{name}.parquet")
        pd.testing.assert_frame_equal(loaded, frame, check_categorical=True)
    assert "jobs.parquet" in (tmp_path / ".critmem-out").read_text().splitlines()
    refused = cli("run", str(RM_TEXTBOOK), "--parquet")
    assert refused.code == 2 and "--parquet needs --out DIR" in refused.stderr


@pytest.mark.serial
def test_ctrl_c_stops_a_long_simulation(tmp_path: Path) -> None:
    import signal
    import time

    from conftest import CRITMEM

    # 400 tasks every 1 ms on 16 CPUs for 1,000 simulated s: minutes to run out.
    tasks = "".join(f'[[task]]\nname = "t{i}"\nperiod_ms = 1\nwcet_ms = 0.03\n' for i in range(400))
    scenario = tmp_path / "long.toml"
    scenario.write_text(f'[machine]\ncpus = 16\n[scheduler]\nkind = "gedf"\n[run]\nhorizon_ms = 1000000\n{tasks}')
    # A shell starts background jobs with SIGINT ignored, and an ignored signal stays ignored
    # through exec: critmem gets Ctrl-C's usual disposition first, as a terminal's foreground
    # job has.
    argv = [str(CRITMEM), "run", str(scenario), "--json"]
    reset = "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); os.execv(sys.argv[1], sys.argv[1:])"
    p = subprocess.Popen([sys.executable, "-c", reset, *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        # Ctrl-C is for a running simulation: wait until the extension is loaded (imports
        # done), then a little longer, however loaded the machine is.
        maps = Path(f"/proc/{p.pid}/maps")
        deadline = time.monotonic() + 60
        while p.poll() is None and "_core" not in maps.read_text() and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(2)
        p.send_signal(signal.SIGINT)
        stdout, stderr = p.communicate(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate()
    assert p.returncode == 130, stderr
    assert stdout == "" and "Traceback" not in stderr
