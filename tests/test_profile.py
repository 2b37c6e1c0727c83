"""`critmem profile`: bad input is one line and exit 2; the simulated workload it writes slows
down under a limit the way a program does; on a real machine (root) it profiles a program
that reports jobs and leaves nothing behind."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import tomllib
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import CRITMEM, EXAMPLES, active_swaps, cgroups_named, linux_machine_reason
from critmem import profiling

MIB = 1 << 20


def _run(*argv: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(CRITMEM), *argv], capture_output=True, text=True, timeout=timeout, check=False)


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["profile"], "needs the program after --"),
        (["profile", "--ratio", "1.5", "--", "true"], "--ratio must be between 0 and 1"),
        (["profile", "--max-slowdown", "0.5", "--", "true"], "--max-slowdown must be a number above 1"),
        (["profile", "--jobs", "1", "--", "true"], "must be at least 3"),
        (["profile", "--units-duration", "soon", "--", "true"], "not a duration"),
        (["profile", "--swap-size", "big", "--", "true"], "not a size"),
    ],
)
def test_bad_profile_input_is_one_line_and_exit_code_2(argv: list[str], needle: str) -> None:
    p = _run(*argv)
    assert p.returncode == 2, p
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("critmem: error: ") and needle in lines[0], p.stderr


def test_a_folder_with_other_files_is_refused_without_force(tmp_path: Path) -> None:
    (tmp_path / "mine.txt").write_text("keep")
    p = _run("profile", "--out", str(tmp_path), "--", "true")
    assert p.returncode == 2 and "folder is not empty" in p.stderr, p
    assert (tmp_path / "mine.txt").read_text() == "keep"


def _options() -> profiling.Options:
    return profiling.Options(
        command=("prog",),
        name="prog",
        mode="jobs",
        period_ms=500.0,
        deadline_ms=500.0,
        jobs=5,
        units_duration_s=10.0,
        steps=3,
        ratio=0.8,
        max_slowdown=3.0,
        interval_ms=20.0,
        swap_bytes=MIB << 10,
    )


def test_the_simulated_workload_slows_down_once_its_working_set_does_not_fit() -> None:
    opt = _options()
    device = profiling.Device(read_latency_us=100.0, write_latency_us=80.0, read_mb_per_s=500.0, write_mb_per_s=400.0)
    task = profiling.sim_task_text(opt, peak_mb=64.0, working_set_mb=32.0, refs=20_000, compute_ms=100.0)
    roomy = profiling.simulate_exec_ms(opt, 128 * MIB, task, device, 0.0)
    tight = profiling.simulate_exec_ms(opt, 20 * MIB, task, device, 0.0)
    with_cpu = profiling.simulate_exec_ms(opt, 20 * MIB, task, device, 50.0)
    assert roomy is not None and tight is not None and with_cpu is not None
    # Everything resident: the compute alone.
    assert roomy == pytest.approx(100.0, rel=0.02)
    assert tight > 1.5 * roomy
    # The kernel's CPU per swap-in adds to the time, not to the stall.
    assert with_cpu > tight


def test_a_throughput_program_is_held_to_its_limit_too() -> None:
    from dataclasses import replace

    opt = replace(_options(), mode="units", name="batch")
    device = profiling.Device(100.0, 80.0, 500.0, 400.0)
    task = profiling.sim_task_text(opt, peak_mb=64.0, working_set_mb=32.0, refs=20_000, compute_ms=100.0)
    roomy = profiling.simulate_exec_ms(opt, 128 * MIB, task, device, 0.0)
    tight = profiling.simulate_exec_ms(opt, 20 * MIB, task, device, 0.0)
    assert roomy is not None and tight is not None
    assert tight > 1.5 * roomy, (roomy, tight)
    doc = tomllib.loads(profiling.run_scenario_text(opt, 20 * MIB))
    # A non-real-time group's limit is the memory its controller divides.
    assert doc["group"][0]["role"] == "non-rt" and doc["memory"]["total_mb"] == 20


def test_the_written_workload_is_a_scenario_for_both_platforms() -> None:
    opt = _options()
    device = profiling.Device(100.0, 80.0, 500.0, 400.0)
    text = profiling.run_scenario_text(
        opt, 64 * MIB, sim_task=profiling.sim_task_text(opt, 64.0, 32.0, 1000, 100.0), swap_table=device.toml(), swap_in_cpu_us=3.0
    )
    doc = tomllib.loads(text)
    task = doc["task"][0]
    assert task["command"] == ["prog"] and task["reports_jobs"] is True and task["private_mb"] == 64.0
    assert doc["memory"]["swap"]["read_latency_us"] == 100.0 and doc["memory"]["swap_in_cpu_us"] == 3.0
    assert doc["control"] == {"controller": "static", "interval_ms": 20, "config": {"default_limit_bytes": 64 * MIB}}


def test_one_slow_run_does_not_set_the_compute_time_of_every_simulated_limit() -> None:
    def run(limit_mb: int | None, exec_ms: float, swap_ins: int, stall_ms: float = 0.0) -> profiling.LimitRun:
        r = profiling.LimitRun(None if limit_mb is None else limit_mb * MIB, exec_ms=[exec_ms] * 9, stall_ms=[stall_ms] * 9)
        r.swap_ins = swap_ins
        return r

    # The unlimited run was slowed by something else on the machine; two more runs swapped nothing in.
    runs = [run(None, 80.0, 0), run(200, 52.0, 0), run(160, 50.0, 5), run(120, 90.0, 3000, stall_ms=30.0)]
    assert profiling.compute_ms_without_swap(runs) == pytest.approx(52.0)
    # With no run free of swap-ins, the unlimited one (less its stall) is all there is.
    assert profiling.compute_ms_without_swap([run(None, 70.0, 400, stall_ms=5.0), runs[3]]) == pytest.approx(65.0)


def test_the_fit_finds_a_skewed_working_set_the_first_skew_cannot_match() -> None:
    """A program measured as the simulator would run it with a skewed working set (a hot part
    scanned every job: a gentle rise, then a cliff): the fit matches it within the goal."""
    opt = _options()
    device = profiling.Device(100.0, 80.0, 500.0, 400.0)
    truth = profiling.sim_task_text(opt, peak_mb=64.0, working_set_mb=40.0, refs=30_000, compute_ms=100.0, skew=(0.4, 0.9))
    limits_mb = [None, 48, 36, 28, 22]
    runs = []
    for limit_mb in limits_mb:
        exec_ms = profiling.simulate_exec_ms(opt, (limit_mb or 128) * MIB, truth, device, 0.0)
        assert exec_ms is not None
        run = profiling.LimitRun(None if limit_mb is None else limit_mb * MIB, exec_ms=[exec_ms] * 4, stall_ms=[0.0] * 4)
        run.swap_ins = 0 if limit_mb is None else 1000
        runs.append(run)
    first_skew_only = [
        abs(e) for e in profiling.fit_simulation(opt, runs, 64.0, device, 0.0, lambda _: None, profiling.SKEWS[:1]).errors_pct
    ]
    fit = profiling.fit_simulation(opt, runs, 64.0, device, 0.0, lambda _: None)
    assert max(first_skew_only) > 100 * profiling.SIM_GOAL, first_skew_only
    assert max(abs(e) for e in fit.errors_pct) <= 100 * profiling.SIM_GOAL, (fit.hot_fraction, fit.hot_share, fit.errors_pct)
    assert (fit.hot_fraction, fit.hot_share) != profiling.SKEWS[0]


def test_linear_fit_recovers_a_line() -> None:
    xs = [0.0, 10.0, 20.0, 40.0]
    slope, intercept = profiling.linear_fit(xs, [2.0 * x + 5.0 for x in xs])
    assert (slope, intercept) == pytest.approx((2.0, 5.0))
    assert profiling.linear_fit([3.0, 3.0], [1.0, 2.0]) == (0.0, 1.5)


@pytest.mark.skipif(linux_machine_reason() is not None, reason=f"real Linux: {linux_machine_reason()}")
def test_profile_measures_a_program_under_limits_and_leaves_nothing_behind(tmp_path: Path) -> None:
    swaps_before = active_swaps()
    out = tmp_path / "profile"
    command = [sys.executable, str(EXAMPLES / "periodic_job.py"), "--wss-mib", "48"]
    p = _run(
        "profile", "--out", str(out), "--period-ms", "400", "--jobs", "4", "--steps", "2", "--ratio", "0.5",
        "--swap-size", "1G", "--json", "--", *command,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr
    result = json.loads(p.stdout)
    assert result["command"] == command and result["mode"] == "jobs" and result["name"] == "periodic_job"
    # periodic_job.py computes for half its period (the WCET critmem gives it) each job.
    assert 150 <= result["bcet_ms"] <= 400, result["bcet_ms"]
    assert result["memory_mb"]["max"] >= 48, result["memory_mb"]
    rows = result["limits"]
    assert rows[0]["limit_mb"] is None and len(rows) >= 2
    assert all(r["failed_checks"] == 0 for r in rows), rows
    # Under a quarter of its peak the working set no longer fits: stalls and swap-ins.
    assert rows[-1]["stall_ms"] > rows[0]["stall_ms"] and rows[-1]["swap_ins_per_job"] > 0, rows
    assert result["fig7"] is not None and len(result["fig7_points"]["exec_ms"]) >= 6
    for name in ("report.md", "fig2.png", "fig7.png", "profile.json", "workload.toml"):
        assert (out / name).is_file(), name
    # The workload it wrote simulates.
    sim = _run("run", str(out / "workload.toml"), "--json")
    assert sim.returncode == 0, sim.stderr
    assert json.loads(sim.stdout)["tasks"][0]["completed"] >= 3
    assert active_swaps() == swaps_before, "profile removes the swapfile it made and leaves any other"
    assert not cgroups_named("critmem-run-"), cgroups_named("critmem-run-")


def _profile_options(mode: str, units_duration_s: float) -> profiling.Options:
    return dataclasses.replace(_options(), mode=mode, units_duration_s=units_duration_s)


def _slow_units_program(unit_s: float) -> tuple[list[float], Callable[[profiling.Options, int | None, Path], profiling.LimitRun]]:
    """A fake measurement of a throughput program whose work units take `unit_s` each, the
    first one untimed; records the duration of every run."""
    durations: list[float] = []

    def measure(opt: profiling.Options, limit_bytes: int | None, workdir: Path) -> profiling.LimitRun:
        durations.append(opt.units_duration_s)
        run = profiling.LimitRun(limit_bytes)
        run.units = max(0, int(opt.units_duration_s // unit_s) - 1)
        return run

    return durations, measure


def test_a_throughput_program_too_slow_for_the_duration_is_timed_over_longer_runs(tmp_path: Path) -> None:
    said: list[str] = []
    durations, measure = _slow_units_program(unit_s=20.0)
    opt, base = profiling.measure_unlimited(_profile_options("units", 12.0), tmp_path, said.append, measure)
    # 12 s times no unit, 48 s one, 192 s eight: the limited runs take 192 s too.
    assert durations == [12.0, 48.0, 192.0] and base.units == 8 and opt.units_duration_s == 192.0
    assert said == ["run 1 again for 48 s: 0 work units timed, 3 needed", "run 1 again for 192 s: 1 work units timed, 3 needed"]
    # A program that never finishes a unit is not run for ever; a jobs program runs once.
    durations, measure = _slow_units_program(unit_s=1e9)
    opt, base = profiling.measure_unlimited(_profile_options("units", 12.0), tmp_path, said.append, measure)
    assert durations == [12.0, 48.0, 192.0, 768.0] and base.units == 0
    durations, measure = _slow_units_program(unit_s=1e9)
    opt, _ = profiling.measure_unlimited(_profile_options("jobs", 12.0), tmp_path, said.append, measure)
    assert durations == [12.0] and opt.units_duration_s == 12.0
