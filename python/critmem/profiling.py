"""`critmem profile -- CMD ...`: a program measured under a ladder of memory limits on real
Linux, and turned into a simulator workload.

The program runs as the only task of one cgroup, first with no effective limit, then under
limits that shrink by `ratio` per step from its measured peak, with critmem's swapfile on. A
program that reports jobs (`critmem.jobclient`) is measured per job: BCET (the median job
alone), execution time (completion less start), memory stall, CPU time and CPU wait. One that
writes a progress file (`critmem.jobclient.ProgressReporter`) is measured per work unit over
a fixed stretch. From that come the figures SARA's Sec. III-B profiles: execution time
against limit (Fig. 2), stall against execution time with the linear fit of Eq. 1 (Fig. 7) and
the group's memory min/avg/max (Table I). The simulator workload is a scenario whose task
declares the program's memory behaviour (a one-time sweep of its cold memory, then skewed
accesses over a working set), the swap device's figures as measured here and the kernel's CPU
per page swapped in; its working set and accesses per job are fitted so that the simulated
execution time follows the measured curve, and both are shown side by side.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import functools
import json
import math
import multiprocessing
import os
import random
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from critmem import linux
from critmem.linux import LinuxError

MIB = 1_048_576
PAGE_BYTES = 4096
# Fig. 7's acceptance band (slope) and intercept tolerance against the BCET.
SLOPE_BAND = (0.8, 1.2)
INTERCEPT_TOLERANCE = 0.15
# Simulator-vs-machine: the bound and the goal on each limit's relative error.
SIM_BOUND = 0.20
SIM_GOAL = 0.10
# The simulated workload's shape: a share of the working set (HOT_FRACTION) takes a share of
# its accesses (HOT_SHARE); a tenth of the accesses write. The fit starts from the first skew
# and also tries the others, more skewed: a program whose execution time rises gently and then
# falls off a cliff (a hot part scanned every job) needs one of them.
HOT_FRACTION = 0.3
HOT_SHARE = 0.8
Skew = tuple[float, float]
SKEWS: tuple[Skew, ...] = ((HOT_FRACTION, HOT_SHARE), (0.3, 0.95), (0.35, 0.9), (0.4, 0.9), (0.5, 0.95))
WRITE_SHARE = 0.1
# A throughput program's unlimited run must time at least this many work units; on a machine
# slower than the duration was chosen for, it is run again, each time this many times as long,
# up to the last factor.
MIN_PROFILE_UNITS = 3
UNITS_STRETCH = 4
UNITS_STRETCH_MAX = 64


@dataclass(frozen=True)
class Options:
    command: tuple[str, ...]
    name: str
    # "jobs": the program reports jobs; "units": it writes a progress file.
    mode: str
    period_ms: float
    deadline_ms: float
    jobs: int
    units_duration_s: float
    steps: int
    ratio: float
    max_slowdown: float
    interval_ms: float
    swap_bytes: int


@dataclass
class LimitRun:
    """One run of the program under one limit (None: unlimited)."""

    limit_bytes: int | None
    exec_ms: list[float] = field(default_factory=list)
    stall_ms: list[float] = field(default_factory=list)
    cpu_ms: list[float] = field(default_factory=list)
    cpu_wait_ms: list[float] = field(default_factory=list)
    usage_mb: list[float] = field(default_factory=list)
    swap_ins: int = 0
    swap_outs: int = 0
    units: int = 0
    duration_s: float = 0.0
    oom_rescues: int = 0
    failed_checks: int = 0
    wall_s: float = 0.0

    def mean(self, name: str) -> float | None:
        values: list[float] = getattr(self, name)
        return statistics.fmean(values) if values else None

    @property
    def count(self) -> int:
        return len(self.exec_ms)


def _vmstat() -> dict[str, int]:
    out: dict[str, int] = {}
    with open("/proc/vmstat", encoding="ascii") as f:
        for line in f:
            key, _, value = line.partition(" ")
            if key in ("pswpin", "pswpout"):
                out[key] = int(value)
    return out


@functools.cache
def _memtotal_bytes() -> int:
    with open("/proc/meminfo", encoding="ascii") as f:
        for line in f:
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    raise LinuxError("/proc/meminfo has no MemTotal line")


def _toml_str(text: str) -> str:
    return json.dumps(text)


def run_scenario_text(
    opt: Options,
    limit_bytes: int,
    *,
    sim_task: str = "",
    swap_table: str = "",
    swap_in_cpu_us: float = 0.0,
    machine_bytes: int | None = None,
) -> str:
    """The scenario of one profiling run (and, with `sim_task`, of the simulated workload). A
    soft real-time program's limit is its group's; the machine's memory is `machine_bytes`, by
    default this machine's."""
    jobs = opt.mode == "jobs"
    horizon_ms = (opt.jobs + 1) * opt.period_ms if jobs else opt.units_duration_s * 1000
    # A non-real-time group gets the memory the controller divides, less the soft real-time
    # groups' (none here): its limit is that total.
    memory_mb = math.ceil((max(machine_bytes or _memtotal_bytes(), limit_bytes) if jobs else limit_bytes) / MIB)
    lines = [
        f"# critmem profile of {' '.join(opt.command)}",
        "[machine]",
        "cpus = 2",
        "[scheduler]",
        'kind = "gedf"',
        "[run]",
        f"horizon_ms = {horizon_ms:g}",
        "seed = 1",
        "[memory]",
        f"total_mb = {memory_mb}",
        f"page_bytes = {PAGE_BYTES}",
        f"swap = {swap_table or _toml_str('slow-ssd')}",
    ]
    if swap_in_cpu_us > 0:
        lines.append(f"swap_in_cpu_us = {swap_in_cpu_us:.3f}")
    lines += [
        "[control]",
        'controller = "static"',
        f"interval_ms = {opt.interval_ms:g}",
        f"config = {{ default_limit_bytes = {limit_bytes} }}",
        "[[group]]",
        f"name = {_toml_str(opt.name)}",
    ]
    if jobs:
        lines += ['role = "soft-rt"', f"bcet_ms = {max(1.0, opt.period_ms / 4):g}", "floor_mb = 1"]
    else:
        lines += ['role = "non-rt"', "floor_mb = 1"]
    lines += [
        "[[task]]",
        f"name = {_toml_str(opt.name)}",
        f'criticality = "{"C" if jobs else "D"}"',
        sim_task or f"wcet_ms = {opt.period_ms / 2:g}",
        f"period_ms = {opt.period_ms:g}",
        f"deadline_ms = {opt.deadline_ms if jobs else 3_600_000:g}",
        f"group = {_toml_str(opt.name)}",
        f"command = [{', '.join(_toml_str(c) for c in opt.command)}]",
        f"reports_jobs = {'true' if jobs else 'false'}",
    ]
    return "\n".join(lines) + "\n"


def measure_limit(opt: Options, limit_bytes: int | None, workdir: Path) -> LimitRun:
    """Runs the program once under `limit_bytes` and measures it."""
    effective = limit_bytes if limit_bytes is not None else _memtotal_bytes()
    path = workdir / f"run-{'unlimited' if limit_bytes is None else limit_bytes // MIB}.toml"
    path.write_text(run_scenario_text(opt, effective), encoding="utf-8")
    jobs = opt.mode == "jobs"
    # A job may take `max_slowdown` times its period and more before the ladder stops.
    duration_s = (opt.jobs + 2) * opt.period_ms / 1000 * (opt.max_slowdown + 1) + 30 if jobs else opt.units_duration_s
    before = _vmstat()
    started = time.monotonic()
    summary = linux.run_scenario(str(path), duration_s, None, stop_after_jobs=opt.jobs if jobs else None)
    wall_s = time.monotonic() - started
    after = _vmstat()
    run = LimitRun(limit_bytes)
    run.wall_s = wall_s
    run.swap_ins = after.get("pswpin", 0) - before.get("pswpin", 0)
    run.swap_outs = after.get("pswpout", 0) - before.get("pswpout", 0)
    run.oom_rescues = int(summary["control"]["oom_rescues"])
    task = summary["tasks"][0]
    run.failed_checks = int(task.get("checksum_failures") or 0)
    if task.get("exit_code") not in (None, 0):
        run.failed_checks += 1
    timeline = summary["control"]["timeline"]
    first_start_ms = 0.0
    if jobs:
        rows = [j for j in summary["jobs"] if j["outcome"] == "completed" and j["start_ms"] is not None]
        if rows:
            first_start_ms = float(rows[0]["start_ms"])
        # The first job warms the program up (imports, models, caches): left out.
        for j in rows[1:]:
            run.exec_ms.append(float(j["completion_ms"]) - float(j["start_ms"]))
            run.stall_ms.append(float(j["stall_ms"] or 0.0))
            run.cpu_ms.append(float(j["cpu_ms"] or 0.0))
            run.cpu_wait_ms.append(float(j["cpu_wait_ms"] or 0.0))
    else:
        # Per work unit, between the first and the last sample with a new count.
        points = [(s["t_ms"], s["work_units"][0], s["groups"][0]) for s in timeline if s["work_units"][0] is not None]
        if len(points) >= 2:
            (t0, u0, g0), (t1, u1, g1) = points[0], points[-1]
            first_start_ms = t0
            units = u1 - u0
            if units > 0:
                stall_us = (g1["memory_some_us"] - g0["memory_some_us"]) + (g1["io_some_us"] - g0["io_some_us"])
                run.units = units
                run.duration_s = (t1 - t0) / 1000
                per_unit_ms = (t1 - t0) / units
                run.exec_ms = [per_unit_ms]
                run.stall_ms = [stall_us / 1000 / units]
    run.usage_mb = [s["groups"][0]["usage_bytes"] / MIB for s in timeline if s["t_ms"] >= first_start_ms]
    return run


@dataclass(frozen=True)
class Device:
    """The swap device as measured with direct I/O on the swapfile's filesystem."""

    read_latency_us: float
    write_latency_us: float
    read_mb_per_s: float
    write_mb_per_s: float

    def toml(self) -> str:
        return (
            f'{{ name = "measured", read_latency_us = {self.read_latency_us:.1f}, write_latency_us = {self.write_latency_us:.1f}, '
            f"read_mb_per_s = {self.read_mb_per_s:.1f}, write_mb_per_s = {self.write_mb_per_s:.1f} }}"
        )


def measure_device(directory: str, size_bytes: int = 64 * MIB, samples: int = 400) -> Device:
    """Latency of 4 KiB direct reads and writes at random offsets, and bandwidth of 1 MiB ones,
    on a file of its own in `directory` (removed afterwards)."""
    import mmap

    rng = random.Random(1)
    big = 1 * MIB
    buf = mmap.mmap(-1, big)  # page-aligned, as O_DIRECT needs
    buf.write(bytes(rng.getrandbits(8) for _ in range(4096)) * (big // 4096))
    fd, name = tempfile.mkstemp(prefix=".critmem-profile-", dir=directory)
    try:
        os.close(fd)
        fd = os.open(name, os.O_RDWR | os.O_DIRECT)
        try:
            started = time.perf_counter()
            for off in range(0, size_bytes, big):
                os.pwritev(fd, [buf], off)
            os.fsync(fd)
            write_mb_per_s = size_bytes / MIB / (time.perf_counter() - started)
            whole = memoryview(buf)
            small = whole[:4096]
            offsets = [rng.randrange(size_bytes // 4096) * 4096 for _ in range(samples)]
            started = time.perf_counter()
            for off in offsets:
                os.preadv(fd, [small], off)
            read_latency_us = (time.perf_counter() - started) / samples * 1e6
            started = time.perf_counter()
            for off in offsets[: samples // 4]:
                os.pwritev(fd, [small], off)
            write_latency_us = (time.perf_counter() - started) / (samples // 4) * 1e6
            started = time.perf_counter()
            for off in range(0, size_bytes, big):
                os.preadv(fd, [buf], off)
            read_mb_per_s = size_bytes / MIB / (time.perf_counter() - started)
            small.release()
            whole.release()
        finally:
            os.close(fd)
    except OSError as e:
        raise LinuxError(f"measuring the swap device in {directory}: {e.strerror or e}") from None
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(name)
        buf.close()
    return Device(read_latency_us, write_latency_us, read_mb_per_s, write_mb_per_s)


def linear_fit(xs: Sequence[float], ys: Sequence[float]) -> tuple[float, float]:
    """Least-squares slope and intercept of ys on xs (slope 0 when xs do not vary)."""
    if len(set(xs)) < 2:
        return 0.0, statistics.fmean(ys)
    line = statistics.linear_regression(xs, ys)
    return line.slope, line.intercept


@dataclass(frozen=True)
class SimFit:
    working_set_mb: float
    refs_per_job: int
    compute_ms: float
    spread_ms: float
    swap_in_cpu_us: float
    simulated_exec_ms: list[float]
    errors_pct: list[float]
    hot_fraction: float = HOT_FRACTION
    hot_share: float = HOT_SHARE


def sim_task_text(
    opt: Options,
    peak_mb: float,
    working_set_mb: float,
    refs: int,
    compute_ms: float,
    spread_ms: float = 0.0,
    skew: Skew = (HOT_FRACTION, HOT_SHARE),
) -> str:
    """The simulated task's memory behaviour: its cold memory swept once in its first job, then
    `refs` skewed accesses per job over a working set at the top of its memory (`skew`: the share
    of the working set that takes a share of the accesses). Its compute is `compute_ms` a job,
    or uniform within `spread_ms` either side of it."""
    # Whole pages, so that offset + span never passes the task's memory by a rounding.
    ws_pages = max(1, round(working_set_mb * MIB / PAGE_BYTES))
    private_pages = max(ws_pages, math.ceil(peak_mb * MIB / PAGE_BYTES))
    cold_pages = private_pages - ws_pages

    def mb(pages: int) -> str:
        return f"{pages * PAGE_BYTES / MIB:.8f}".rstrip("0").rstrip(".")

    private_mb = mb(private_pages)
    access = []
    if cold_pages:
        access.append(f'{{ pattern = "sweep", span_mb = {mb(cold_pages)}, mb = {mb(cold_pages)}, from_job = 0, every_jobs = 1000000000 }}')
    access.append(
        f'{{ pattern = "hotcold", offset_mb = {mb(cold_pages)}, span_mb = {mb(ws_pages)}, refs = {refs}, '
        f"hot_fraction = {skew[0]}, hot_share = {skew[1]}, writes = {WRITE_SHARE} }}"
    )
    return "\n".join(
        [
            (
                f'exec = {{ dist = "uniform", min_ms = {compute_ms - spread_ms:.3f}, max_ms = {compute_ms + spread_ms:.3f} }}'
                if spread_ms > 0
                else f"wcet_ms = {compute_ms:.3f}"
            ),
            f"private_mb = {private_mb}",
            'access_order = "sequence"',
            "access = [",
            *(f"  {a}," for a in access),
            "]",
        ]
    )


def simulate_exec_ms(opt: Options, limit_bytes: int, task: str, device: Device, swap_in_cpu_us: float) -> float | None:
    """Mean simulated execution time of the jobs after the first, under `limit_bytes`."""
    from critmem.api import run

    # Only the group's limit binds: a machine just above it simulates as this one would, and
    # without the frames of all of this machine's memory to set up.
    text = run_scenario_text(
        opt, limit_bytes, sim_task=task, swap_table=device.toml(), swap_in_cpu_us=swap_in_cpu_us, machine_bytes=limit_bytes + 64 * MIB
    )
    # The simulator ignores `command`; the measured program is not run.
    result = run(text, record_segments=False)
    jobs = result.jobs
    done = jobs[(jobs["outcome"] == "completed") & (jobs["job"] > 0)]
    if done.empty:
        return None
    return float((done["completion_ms"] - done["start_ms"]).mean())


def _simulated_times(job: tuple[Options, str, tuple[int, ...], Device, float]) -> list[float | None]:
    """One fit point: the simulated task's mean execution time under each limit."""
    opt, task, limits, device, swap_in_cpu_us = job
    return [simulate_exec_ms(opt, limit, task, device, swap_in_cpu_us) for limit in limits]


def compute_ms_without_swap(runs: Sequence[LimitRun]) -> float:
    """A job's (or unit's) compute time: over the runs that swapped next to nothing in (at most
    one page per job on average; the unlimited run first among them), the median of the mean
    execution time less the mean stall. The mean, as the simulated means are compared with the
    measured ones; the median over those runs, so that one run slowed by something else on the
    machine does not set the time of every simulated limit."""
    quiet = [r for r in runs if r.count and r.swap_ins <= r.count + 1] or [runs[0]]
    return max(1.0, statistics.median(statistics.fmean(r.exec_ms) - (r.mean("stall_ms") or 0.0) for r in quiet))


def fit_simulation(
    opt: Options,
    runs: list[LimitRun],
    peak_mb: float,
    device: Device,
    swap_in_cpu_us: float,
    progress: Callable[[str], None],
    skews: Sequence[Skew] = SKEWS,
) -> SimFit:
    """The working set, accesses per job and their skew whose simulated execution times are
    nearest to the measured ones at every profiled limit: the smallest largest relative error
    (then the least squared one), over a coarse grid and then finer ones around its best point;
    when that misses the 10 % goal with the first of `skews`, the others on the same grids too."""
    # Every run here has jobs: the unlimited run first.
    targets = [(r.limit_bytes or int(peak_mb * MIB * 2), statistics.fmean(r.exec_ms)) for r in runs]
    unlimited = runs[0]
    compute_ms = compute_ms_without_swap(runs)
    # The jobs' own variation alone (half the 10th-90th percentile range), as jobs differ in work.
    spread_ms = 0.0
    if opt.mode == "jobs" and len(unlimited.exec_ms) >= 4:
        deciles = statistics.quantiles(unlimited.exec_ms, n=10)
        spread_ms = min(0.9 * compute_ms, (deciles[-1] - deciles[0]) / 2)
        if spread_ms < 0.02 * compute_ms:
            spread_ms = 0.0
    smallest_mb = min(lim for lim, _ in targets) / MIB
    limits = tuple(lim for lim, _ in targets)
    best: tuple[tuple[float, float], float, int, Skew, list[float]] | None = None
    # Each point's error (largest relative, then sum of squares), inf where a job never ended.
    tried_points: dict[tuple[float, int, Skew], tuple[float, float]] = {}

    def evaluate(pool: concurrent.futures.Executor, points: Sequence[tuple[float, int, Skew]]) -> None:
        """Simulates the points not tried yet, in parallel, and keeps the best point so far (the
        first of equals, in the order given: the same whatever the pool's size)."""
        nonlocal best
        new = [p for p in dict.fromkeys(points) if p not in tried_points and p[0] > 0]
        jobs = [
            (opt, sim_task_text(opt, peak_mb, ws, refs, compute_ms, spread_ms, skew), limits, device, swap_in_cpu_us)
            for ws, refs, skew in new
        ]
        for (ws, refs, skew), tried in zip(new, pool.map(_simulated_times, jobs)):
            err = (math.inf, math.inf)
            done = [t for t in tried if t is not None]
            if len(done) == len(tried):
                rel = [t / m - 1 for t, (_, m) in zip(done, targets)]
                err = (max(abs(e) for e in rel), sum(e * e for e in rel))
                if best is None or err < best[0]:
                    best = (err, ws, refs, skew, done)
            tried_points[(ws, refs, skew)] = err

    def around(ws_factors: Sequence[float], refs_factors: Sequence[float]) -> list[tuple[float, int, Skew]]:
        if best is None:
            return []
        _, ws0, refs0, skew, _ = best
        return [(round(min(peak_mb, ws0 * wf), 1), max(100, round(refs0 * rf)), skew) for wf in ws_factors for rf in refs_factors]

    ws_grid = sorted({round(peak_mb * f, 1) for f in (0.15, 0.25, 0.35, 0.5, 0.65, 0.8, 1.0)} | {round(smallest_mb * 0.9, 1)})
    ref_grid = [2_000, 5_000, 10_000, 20_000, 40_000, 80_000, 160_000]

    def coarse_then_fine(pool: concurrent.futures.Executor, tried_skews: Sequence[Skew], first: int) -> None:
        for k, skew in enumerate(tried_skews):
            progress(f"fitting the simulated workload: skew {first + k}/{len(skews)}, {len(ws_grid) * len(ref_grid)} points")
            evaluate(pool, [(ws, refs, skew) for ws in ws_grid for refs in ref_grid])
        progress("fitting the simulated workload: refining")
        evaluate(pool, around((0.8, 0.9, 1.0, 1.1, 1.25), (0.6, 0.8, 1.0, 1.25, 1.6)))
        evaluate(pool, around((0.95, 1.0, 1.05), (0.85, 0.92, 1.0, 1.08, 1.17)))

    # Simulations run in worker processes, one per core; forkserver, as the caller may have threads.
    context = multiprocessing.get_context("forkserver")
    with concurrent.futures.ProcessPoolExecutor(max_workers=os.cpu_count() or 1, mp_context=context) as pool:
        coarse_then_fine(pool, skews[:1], 1)
        # Off the goal with the first skew: the others too.
        if best is not None and best[0][0] > SIM_GOAL:
            coarse_then_fine(pool, skews[1:], 2)
    if best is None:
        raise LinuxError("no simulated workload completed its jobs at the profiled limits")
    _, ws, refs, skew, sims = best
    errors = [100 * (s / m - 1) for s, (_, m) in zip(sims, targets)]
    return SimFit(ws, refs, compute_ms, spread_ms, swap_in_cpu_us, sims, errors, hot_fraction=skew[0], hot_share=skew[1])


def measure_unlimited(
    opt: Options, workdir: Path, progress: Callable[[str], None], measure: Callable[[Options, int | None, Path], LimitRun] = measure_limit
) -> tuple[Options, LimitRun]:
    """The run with no limit, and the options the limited runs take: a throughput program that
    timed fewer than MIN_PROFILE_UNITS work units runs again for longer (the machine is slower
    than its duration was chosen for), and so do the runs after it."""
    base = measure(opt, None, workdir)
    asked_s = opt.units_duration_s
    while opt.mode == "units" and base.units < MIN_PROFILE_UNITS and opt.units_duration_s * UNITS_STRETCH <= asked_s * UNITS_STRETCH_MAX:
        opt = replace(opt, units_duration_s=opt.units_duration_s * UNITS_STRETCH)
        progress(f"run 1 again for {opt.units_duration_s:g} s: {base.units} work units timed, {MIN_PROFILE_UNITS} needed")
        base = measure(opt, None, workdir)
    return opt, base


def profile(opt: Options, out: Path, progress: Callable[[str], None] = lambda _: None) -> dict[str, Any]:
    """Profiles `opt.command` and writes report.md, profile.json, workload.toml, fig2.png and
    fig7.png to `out`; returns profile.json's content."""
    linux.require_root("critmem profile")
    out.mkdir(parents=True, exist_ok=True)
    wall_started = time.monotonic()
    with swapfile_on(opt.swap_bytes, progress) as swapfile:
        with tempfile.TemporaryDirectory(prefix="critmem-profile-") as tmp:
            workdir = Path(tmp)
            progress("run 1: no limit")
            opt, base = measure_unlimited(opt, workdir, progress)
            runs = [base]
            if base.count == 0:
                raise LinuxError(
                    f"{opt.command[0]} reported no completed {'job' if opt.mode == 'jobs' else 'work unit'} beyond the first: "
                    + (
                        "is it a critmem.jobclient program? (--units for a progress-file program)"
                        if opt.mode == "jobs"
                        else "does it write CRITMEM_PROGRESS_FILE?"
                    )
                )
            peak_mb = max(base.usage_mb) if base.usage_mb else 0.0
            base_exec = statistics.median(base.exec_ms)
            limit = peak_mb * MIB
            stopped = f"{opt.steps} limits measured"
            for step in range(1, opt.steps + 1):
                limit *= opt.ratio
                if limit < 8 * MIB:
                    stopped = "the next limit would be under 8 MiB"
                    break
                progress(f"run {step + 1}: limit {limit / MIB:.0f} MiB")
                r = measure_limit(opt, int(limit), workdir)
                runs.append(r)
                mean = r.mean("exec_ms")
                if r.oom_rescues:
                    stopped = f"the OOM guard had to raise the limit at {limit / MIB:.0f} MiB"
                    break
                # A throughput program's run has one figure: its time per unit.
                if mean is None or r.count < (max(1, (opt.jobs - 1) // 2) if opt.mode == "jobs" else 1):
                    stopped = f"fewer than half the jobs finished in time at {limit / MIB:.0f} MiB"
                    break
                if mean > opt.max_slowdown * base_exec:
                    stopped = f"execution time passed {opt.max_slowdown:g}× the unlimited one at {limit / MIB:.0f} MiB"
                    break
            progress("measuring the swap device")
            device = measure_device(os.path.dirname(swapfile))
        measured = [r for r in runs if r.count]
        # Kernel CPU per page swapped in: the CPU time a job gains per swap-in per job.
        swap_in_cpu_us = 0.0
        if len(measured) >= 2 and opt.mode == "jobs":
            xs = [r.swap_ins / (r.count + 1) for r in measured]
            ys = [r.mean("cpu_ms") or 0.0 for r in measured]
            slope, _ = linear_fit(xs, ys)
            swap_in_cpu_us = max(0.0, slope * 1000)
        fit = fit_simulation(opt, measured, peak_mb, device, swap_in_cpu_us, progress)
        result = _result(opt, measured, peak_mb, base_exec, device, fit, stopped, time.monotonic() - wall_started)
        workload = run_scenario_text(
            opt,
            int(peak_mb * MIB),
            sim_task=sim_task_text(
                opt, peak_mb, fit.working_set_mb, fit.refs_per_job, fit.compute_ms, fit.spread_ms, (fit.hot_fraction, fit.hot_share)
            ),
            swap_table=device.toml(),
            swap_in_cpu_us=swap_in_cpu_us,
        )
        (out / "workload.toml").write_text(workload, encoding="utf-8")
        (out / "profile.json").write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
        _plots(result, out)
        (out / "report.md").write_text(_report(result), encoding="utf-8")
        return result


@contextlib.contextmanager
def swapfile_on(size_bytes: int, progress: Callable[[str], None] = lambda _: None) -> Iterator[str]:
    """critmem's swapfile on while the block runs: the one already on, else one of `size_bytes`
    made here and removed afterwards."""
    path = critmem_swapfile()
    if path is not None:
        yield path
        return
    progress(f"setting up critmem's swapfile ({size_bytes / 2**30:.1f} GiB)")
    path = str(linux.swap_setup(size_bytes, None, None)["swapfile"])
    try:
        yield path
    finally:
        linux.swap_teardown(None)


def critmem_swapfile() -> str | None:
    """critmem's swapfile, if it is set up and on."""
    status = linux.swap_status(None)
    path = status.get("swapfile")
    if path and any(entry.get("path") == path for entry in status.get("active", [])):
        return str(path)
    return None


def _result(
    opt: Options, runs: list[LimitRun], peak_mb: float, base_exec: float, device: Device, fit: SimFit, stopped: str, wall_s: float
) -> dict[str, Any]:
    """profile.json's content; `runs` are the runs with jobs, the unlimited one first."""
    import critmem._core as core

    points_stall = [s for r in runs for s in r.stall_ms]
    points_exec = [e for r in runs for e in r.exec_ms]
    fig7: dict[str, Any] | None = None
    if len(points_exec) >= 3:
        slope, intercept, r2 = core.fit_exec_vs_stall(points_stall, points_exec)
        cpu_slope, _ = linear_fit(points_stall, [c for r in runs for c in r.cpu_ms]) if opt.mode == "jobs" else (0.0, 0.0)
        fig7 = {
            "slope": round(slope, 4),
            "intercept_ms": round(intercept, 2),
            "r_squared": round(r2, 4),
            "slope_in_band": SLOPE_BAND[0] <= slope <= SLOPE_BAND[1],
            "intercept_error_pct": round(100 * (intercept / base_exec - 1), 2),
            "intercept_within": abs(intercept / base_exec - 1) <= INTERCEPT_TOLERANCE,
            # CPU time a job gains per ms of stall: the kernel's swap-in work, not in the stall.
            "cpu_per_stall": round(cpu_slope, 4),
        }
    usage = runs[0].usage_mb
    rows = []
    for r, sim, err in zip(runs, fit.simulated_exec_ms, fit.errors_pct):
        rows.append(
            {
                "limit_mb": None if r.limit_bytes is None else round(r.limit_bytes / MIB, 1),
                "jobs": r.count,
                "exec_ms": round(r.mean("exec_ms") or 0.0, 2),
                "stall_ms": round(r.mean("stall_ms") or 0.0, 2),
                "cpu_ms": None if r.mean("cpu_ms") is None else round(r.mean("cpu_ms") or 0.0, 2),
                "cpu_wait_ms": None if r.mean("cpu_wait_ms") is None else round(r.mean("cpu_wait_ms") or 0.0, 2),
                "swap_ins_per_job": round(r.swap_ins / (r.count + 1), 1),
                "oom_rescues": r.oom_rescues,
                "failed_checks": r.failed_checks,
                "simulated_exec_ms": round(sim, 2),
                "sim_error_pct": round(err, 2),
                "wall_s": round(r.wall_s, 1),
            }
        )
    return {
        "command": list(opt.command),
        "name": opt.name,
        "mode": opt.mode,
        "period_ms": opt.period_ms,
        "units_duration_s": opt.units_duration_s if opt.mode == "units" else None,
        "bcet_ms": round(base_exec, 2),
        "memory_mb": {
            "min": round(min(usage), 1) if usage else None,
            "avg": round(statistics.fmean(usage), 1) if usage else None,
            "max": round(peak_mb, 1),
        },
        "ladder_stopped": stopped,
        "limits": rows,
        "fig7": fig7,
        "fig7_points": {"stall_ms": [round(x, 2) for x in points_stall], "exec_ms": [round(x, 2) for x in points_exec]},
        "device": asdict(device),
        "simulated_workload": {
            "working_set_mb": fit.working_set_mb,
            "refs_per_job": fit.refs_per_job,
            "hot_fraction": fit.hot_fraction,
            "hot_share": fit.hot_share,
            "compute_ms": round(fit.compute_ms, 2),
            "compute_spread_ms": round(fit.spread_ms, 2),
            "swap_in_cpu_us": round(fit.swap_in_cpu_us, 3),
            "max_error_pct": round(max(abs(e) for e in fit.errors_pct), 2),
            "within_bound": all(abs(e) <= 100 * SIM_BOUND for e in fit.errors_pct),
            "within_goal": all(abs(e) <= 100 * SIM_GOAL for e in fit.errors_pct),
        },
        "wall_s": round(wall_s, 1),
    }


def _plots(result: dict[str, Any], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in result["limits"] if r["limit_mb"] is not None]
    unit = "job" if result["mode"] == "jobs" else "work unit"
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot([r["limit_mb"] for r in rows], [r["exec_ms"] for r in rows], "o-", label="measured")
    ax.plot([r["limit_mb"] for r in rows], [r["simulated_exec_ms"] for r in rows], "s--", label="simulated workload")
    ax.axhline(result["bcet_ms"], color="grey", lw=0.8, ls=":", label="BCET (no limit)")
    ax.set_xlabel("memory limit (MiB)")
    ax.set_ylabel(f"mean execution time per {unit} (ms)")
    ax.set_title(f"{result['name']}: execution time against memory limit")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out / "fig2.png", dpi=110)
    plt.close(fig)

    pts = result["fig7_points"]
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.scatter(pts["stall_ms"], pts["exec_ms"], s=10, label=f"{unit}s")
    f7 = result["fig7"]
    if f7 is not None and pts["stall_ms"]:
        xs = [0.0, max(pts["stall_ms"])]
        ax.plot(
            xs,
            [f7["intercept_ms"] + f7["slope"] * x for x in xs],
            "r-",
            label=f"fit: {f7['slope']:.2f}·stall + {f7['intercept_ms']:.0f} ms",
        )
    ax.set_xlabel("memory + I/O stall (ms)")
    ax.set_ylabel("execution time (ms)")
    ax.set_title(f"{result['name']}: Eq. 1, execution time against stall")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out / "fig7.png", dpi=110)
    plt.close(fig)


def _report(result: dict[str, Any]) -> str:
    m = result["memory_mb"]
    sw = result["simulated_workload"]
    d = result["device"]
    lines = [
        f"# critmem profile: {result['name']}",
        "",
        f"`{' '.join(result['command'])}`, period {result['period_ms']:g} ms"
        + (f", {result['units_duration_s']:g} s a limit." if result.get("units_duration_s") else "."),
        "",
        f"- BCET (median {'job' if result['mode'] == 'jobs' else 'work unit'} with no limit, the first left out): **{result['bcet_ms']:.1f} ms**",
        f"- Memory with no limit (Table I): min {m['min']} MiB, avg {m['avg']} MiB, max {m['max']} MiB",
        f"- Ladder: {len(result['limits'])} runs; it stopped because {result['ladder_stopped']}.",
        (
            f"- Swap device (direct I/O beside the swapfile): 4 KiB reads {d['read_latency_us']:.0f} µs, writes {d['write_latency_us']:.0f} µs; "
            f"1 MiB transfers {d['read_mb_per_s']:.0f} MB/s read, {d['write_mb_per_s']:.0f} MB/s write."
        ),
        f"- Profiler wall time: {result['wall_s']:.0f} s.",
        "",
        "## Execution time against memory limit (Fig. 2), measured and simulated",
        "",
        "| limit (MiB) | jobs | exec (ms) | stall (ms) | CPU (ms) | CPU wait (ms) | swap-ins/job | simulated exec (ms) | error |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in result["limits"]:
        lim = "none" if r["limit_mb"] is None else f"{r['limit_mb']:.0f}"
        cpu = "—" if r["cpu_ms"] is None else f"{r['cpu_ms']:.0f}"
        wait = "—" if r["cpu_wait_ms"] is None else f"{r['cpu_wait_ms']:.0f}"
        lines.append(
            f"| {lim} | {r['jobs']} | {r['exec_ms']:.0f} | {r['stall_ms']:.0f} | {cpu} | {wait} | {r['swap_ins_per_job']:.0f} | "
            f"{r['simulated_exec_ms']:.0f} | {r['sim_error_pct']:+.1f} % |"
        )
    lines += [
        "",
        "![Fig. 2](fig2.png)",
        "",
        f"The simulated workload (`workload.toml`): {sw['working_set_mb']:.0f} MiB working set, {sw['refs_per_job']} accesses per job, "
        f"{sw['hot_share']:.0%} of them to {sw['hot_fraction']:.0%} of the working set, "
        f"{sw['compute_ms']:.0f} ms of compute (± {sw['compute_spread_ms']:.0f} ms, uniform), {sw['swap_in_cpu_us']:.1f} µs of kernel CPU per page swapped in, on the device measured here. "
        f"Largest error {sw['max_error_pct']:.1f} %: "
        + (
            "within the 10 % goal."
            if sw["within_goal"]
            else "within the 20 % bound."
            if sw["within_bound"]
            else "**outside the 20 % bound**."
        ),
        "",
        "## Stall against execution time (Fig. 7)",
        "",
    ]
    f7 = result["fig7"]
    if f7 is None:
        lines.append("Too few points for a fit.")
    else:
        lines += [
            (
                f"Fit over every measured {'job' if result['mode'] == 'jobs' else 'limit'}: exec = {f7['slope']:.3f} · stall + {f7['intercept_ms']:.1f} ms "
                f"(R² {f7['r_squared']:.3f}). Slope in 0.8–1.2: **{'yes' if f7['slope_in_band'] else 'no'}**; intercept "
                f"{f7['intercept_error_pct']:+.1f} % from the BCET: **{'within' if f7['intercept_within'] else 'outside'} 15 %**."
            ),
            "",
        ]
        if not (f7["slope_in_band"] and f7["intercept_within"]) and result["mode"] == "jobs":
            lines.append(
                f"Why it departs from Eq. 1 (t_exec = BCET + stall): each ms of stall comes with {f7['cpu_per_stall']:.2f} ms more CPU time "
                "(the kernel's swap-in and reclaim work, charged to the job as CPU, not as stall); the CPU wait column is the time the job "
                "was runnable but waiting for a CPU, which no memory limit explains."
            )
            lines.append("")
    lines.append("![Fig. 7](fig7.png)")
    return "\n".join(lines) + "\n"
