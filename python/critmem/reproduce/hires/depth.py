"""The Linux part of the HiRes reproduction against depth: the same program run in the deepest
of N nested reservations (N + 1 cgroups below the roots: critmem's top directory, then l1 … lN),
as the paper runs its subsystems deeper in the hierarchy.

- `event_latency_by_depth`: Fig. 4(a)'s analogue, `critmem-hires event-latency` (an eventfd
  wake-up between two threads on one CPU) in the deepest subsystem of `chain_tree(depth)`;
- `page_cost_by_depth`: Fig. 4(c)'s analogue, `critmem-hires page-cost` (map, fault in and
  unmap one anonymous page);
- `http_by_depth`: Table III's analogue, nginx serving a page it compresses per request in the
  deepest subsystem, loaded by `ab` from outside the tree.

Depth 0 runs the program in the tree's root, critmem's top directory with no subsystem below
it: every depth starts from the same cgroup with the same weight, and depth d adds d levels.
Depths are interleaved across rounds (in alternating order) so that the machine's noise falls
on every depth alike, and every row carries its ratio to depth 0 of the same call. Everything
needs root; each failure is a one-line `LinuxError`.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from critmem.linux import LinuxError, binary, require_root

__all__ = [
    "CPU_OVERHEAD_PERCENT",
    "chain_tree",
    "event_latency_by_depth",
    "http_by_depth",
    "page_cost_by_depth",
]

CPU_PERIOD_MS = 100.0
CPU_OVERHEAD_PERCENT = 0.0
"""What each level holds back from its child. None: every level's hard CPU reservation is a
whole CPU (quota = period), so CFS bandwidth control accounts and checks at every level while a
program on one CPU is never held below a whole CPU, and what depth costs is the nesting alone."""
MEMORY_MIB = 1024
MEMORY_OVERHEAD_MIB = 1

Progress = Callable[[str], None] | None


def chain_tree(depth: int) -> str:
    """A tree file of `depth` nested subsystems l1 … lN, each the parent of the next, each with a
    hard CPU reservation of a whole CPU less its depth × `CPU_OVERHEAD_PERCENT` (per 100 ms) and
    a hard memory limit of a MiB less per level; the root offers every CPU this process may use.
    Depth 0 is the root alone."""
    if depth < 0:
        raise LinuxError(f"depth must be at least 0 (got {depth})")
    cpus = len(os.sched_getaffinity(0))
    lines = ["[root]", f"cpus = {cpus}", f"memory_mib = {MEMORY_MIB * 2}", ""]
    if depth == 0:
        return "\n".join(lines)
    for level in range(1, depth + 1):
        budget_ms = CPU_PERIOD_MS * (1 - level * CPU_OVERHEAD_PERCENT / 100)
        parent = "root" if level == 1 else f"l{level - 1}"
        lines += [
            "[[subsystem]]",
            f'name = "l{level}"',
            f'parent = "{parent}"',
            f"overhead = {{ cpu_percent = {CPU_OVERHEAD_PERCENT}, memory_kib = {MEMORY_OVERHEAD_MIB * 1024} }}",
            "reserve = [",
            f'  {{ family = "cpu", kind = "hard", budget_ms = {budget_ms:.3f}, period_ms = {CPU_PERIOD_MS:.0f} }},',
            f'  {{ family = "memory", kind = "hard", mib = {MEMORY_MIB - level * MEMORY_OVERHEAD_MIB} }},',
            "]",
            "",
        ]
    return "\n".join(lines)


def _check_depths(depths: Iterable[int]) -> list[int]:
    chosen = list(dict.fromkeys(depths))
    if not chosen:
        raise LinuxError("no depths to measure")
    if any(d < 0 for d in chosen):
        raise LinuxError(f"depths must be at least 0 (got {chosen})")
    require_root("a measurement inside nested cgroups")
    return chosen


def _check_count(name: str, value: int, least: int) -> None:
    if value < least:
        raise LinuxError(f"{name} must be at least {least} (got {value})")


def _rounds_order(depths: Sequence[int], rounds: int) -> Iterator[tuple[int, int]]:
    """(round, depth), every depth once a round, in file order then reversed, and so on."""
    for r in range(rounds):
        for depth in depths if r % 2 == 0 else reversed(depths):
            yield r, depth


def _tree_name() -> str:
    return f"critmem-hires-depth-{os.getpid()}"


@contextmanager
def _tree(depth: int) -> Iterator[tuple[list[str], str]]:
    """The `critmem-hires ... apply TREE --in lN --json` prefix of a command run `depth` deep
    (`--in root` at depth 0) and the cgroup path it runs in; afterwards the tree is gone, also after
    an error or Ctrl-C (by its journal)."""
    hires = binary("critmem-hires")
    with tempfile.TemporaryDirectory(prefix="critmem-hires-depth-") as tmp:
        name = _tree_name()
        base = [hires, f"--name={name}", f"--state-dir={tmp}"]
        tree = Path(tmp) / f"chain-{depth}.toml"
        tree.write_text(chain_tree(depth))
        leaf = "/" + "/".join([name, *(f"l{level}" for level in range(1, depth + 1))])
        inside = f"l{depth}" if depth else "root"
        try:
            yield [*base, "apply", str(tree), f"--in={inside}", "--json", "--"], leaf
        except BaseException:
            # What a killed critmem-hires left, by its journal; the first error is the one told.
            subprocess.run([*base, "teardown"], capture_output=True, check=False)
            raise
        done = subprocess.run([*base, "teardown"], capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise LinuxError(f"the depth-{depth} tree {name} was not removed: {_one_line(done.stderr)}")


def _one_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return " ".join((lines[-1] if lines else "failed without a message").split())


def _run(argv: list[str]) -> tuple[int, str, str]:
    """Runs `argv` to its end. On Ctrl-C the program (critmem-hires stops and undoes its tree on
    SIGINT) is waited for, then KeyboardInterrupt goes on."""
    with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as child:
        try:
            out, err = child.communicate()
        except BaseException:
            if child.poll() is None:
                child.send_signal(signal.SIGINT)
                try:
                    child.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    child.kill()
                    child.wait()
            raise
    return child.returncode, out, err


def _measurement(lines: str, key: str) -> dict[str, Any] | None:
    """The last JSON object holding `key` among `lines`."""
    for line in reversed(lines.strip().splitlines()):
        if line.startswith("{"):
            try:
                value = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(value, dict) and key in value:
                return value
    return None


def _measure(depth: int, subcommand: list[str], key: str) -> dict[str, Any]:
    """`critmem-hires SUBCOMMAND --json` run `depth` deep; its JSON, checked to come from there."""
    program = [binary("critmem-hires"), *subcommand, "--json"]
    with _tree(depth) as (prefix, cgroup):
        code, _summary_json, err = _run([*prefix, *program])
    if code != 0:
        raise LinuxError(f"{subcommand[0]} at depth {depth}: {_one_line(err)}")
    # Inside a tree the program's output reaches critmem-hires's stderr (its stdout is the summary).
    measured = _measurement(err, key)
    if measured is None:
        raise LinuxError(f"{subcommand[0]} at depth {depth} printed no measurement: {_one_line(err)}")
    if measured.get("cpu_cgroup") != cgroup:
        raise LinuxError(f"{subcommand[0]} at depth {depth} ran in cgroup {measured.get('cpu_cgroup')!r}, not {cgroup!r}")
    return measured


def _summary(per_round: list[dict[str, Any]], prefix: str) -> dict[str, Any]:
    """One depth's statistics over its rounds: the median of each round's figure (one round
    that met a burst of the machine's other work moves no row), and the largest maximum."""
    row: dict[str, Any] = {}
    for p in ("mean_ns", "stddev_ns", "p50_ns", "p95_ns", "p99_ns"):
        row[f"{prefix}{p}"] = statistics.median(s[p] for s in per_round)
    row[f"{prefix}max_ns"] = max(s["max_ns"] for s in per_round)
    row[f"{prefix}round_p50_ns"] = [s["p50_ns"] for s in per_round]
    return row


def _with_ratios(rows: list[dict[str, Any]], keys: Sequence[str]) -> list[dict[str, Any]]:
    """Each row's `KEY_ratio` for every key: its value over depth 0's (None without depth 0)."""
    base = next((r for r in rows if r["depth"] == 0), None)
    for row in rows:
        for key in keys:
            ratio_key = key.removesuffix("_ns").removesuffix("_per_s").removesuffix("_ms") + "_ratio"
            row[ratio_key] = row[key] / base[key] if base is not None and base[key] and row[key] is not None else None
    return rows


def _sampled_by_depth(
    command: str,
    what: str,
    parts: dict[str, str],
    depths: Iterable[int],
    samples: int,
    rounds: int,
    warmup: int,
    progress: Progress,
) -> list[dict[str, Any]]:
    """`critmem-hires COMMAND --samples --warmup` (`what`, in progress) at each depth, `rounds`
    times: one row per depth with the statistics over the rounds of each of `parts` (the figure
    in the program's JSON, and the prefix of its statistics in the row)."""
    _check_count("samples", samples, 1)
    _check_count("warmup", warmup, 0)
    chosen = _check_depths(depths)
    _check_count("rounds", rounds, 1)
    subcommand = [command, f"--samples={samples}", f"--warmup={warmup}"]
    measured: dict[int, list[dict[str, Any]]] = {d: [] for d in chosen}
    for r, depth in _rounds_order(chosen, rounds):
        if progress is not None:
            progress(f"HiRes on Linux: {what} {depth} deep (round {r + 1} of {rounds})")
        measured[depth].append(_measure(depth, subcommand, next(iter(parts))))
    rows = []
    for d in chosen:
        row: dict[str, Any] = {"depth": d, "rounds": rounds, "samples": samples, "cpu": measured[d][0]["cpu"]}
        for part, prefix in parts.items():
            row.update(_summary([m[part] for m in measured[d]], prefix))
        rows.append(row)
    return rows


def event_latency_by_depth(
    depths: Iterable[int] = range(9), samples: int = 1500, rounds: int = 3, warmup: int = 100, progress: Progress = None
) -> list[dict[str, Any]]:
    """Fig. 4(a)'s analogue: the eventfd wake-up latency between two threads on one CPU, run
    in the deepest subsystem of `chain_tree(depth)` for each depth, `samples` per depth and round. One row per depth: its statistics
    over the rounds (`mean_ns`, `p50_ns`, ...) and their ratios to depth 0 (`mean_ratio`,
    `p50_ratio`, ...)."""
    rows = _sampled_by_depth("event-latency", "event latency", {"latency": ""}, depths, samples, rounds, warmup, progress)
    return _with_ratios(rows, ["mean_ns", "p50_ns", "p95_ns", "p99_ns"])


def page_cost_by_depth(
    depths: Iterable[int] = range(9), samples: int = 10_000, rounds: int = 3, warmup: int = 100, progress: Progress = None
) -> list[dict[str, Any]]:
    """Fig. 4(c)'s analogue: mapping (with the write that faults it in) and unmapping one
    anonymous private page, run in the deepest subsystem of `chain_tree(depth)`. One row per depth: `map_*` and
    `unmap_*` statistics over the rounds and their ratios to depth 0."""
    parts = {"map": "map_", "unmap": "unmap_"}
    rows = _sampled_by_depth("page-cost", "page map and unmap", parts, depths, samples, rounds, warmup, progress)
    return _with_ratios(rows, ["map_mean_ns", "map_p50_ns", "unmap_mean_ns", "unmap_p50_ns"])


# ---------------------------------------------------------------------------------------------
# Table III: a web server against depth.

_AB_FIELDS = {
    "requests_per_s": re.compile(r"^Requests per second:\s+([\d.]+)", re.MULTILINE),
    "latency_ms": re.compile(r"^Time per request:\s+([\d.]+) \[ms\] \(mean\)$", re.MULTILINE),
    "p95_ms": re.compile(r"^\s+95%\s+(\d+)", re.MULTILINE),
    "complete": re.compile(r"^Complete requests:\s+(\d+)", re.MULTILINE),
    "failed": re.compile(r"^Failed requests:\s+(\d+)", re.MULTILINE),
}
_AB_NON_2XX = re.compile(r"^Non-2xx responses:\s+(\d+)", re.MULTILINE)

PAGE_WORDS = 12_000
"""Words of the served page (about 60 KiB)."""
GZIP_LEVEL = 6

# ab stops at -t seconds or -n requests, whichever comes first, and keeps a record of each
# request: -n is this per second, past what one CPU serves without keep-alive.
AB_REQUESTS_PER_S = 100_000


def parse_ab(text: str) -> dict[str, float]:
    """What `ab` reports: requests (connections, without -k) per second, the mean time per
    request in ms (per concurrent client), the 95 % line in ms, complete and failed requests."""
    parsed: dict[str, float] = {}
    for key, pattern in _AB_FIELDS.items():
        m = pattern.search(text)
        if m is None:
            raise LinuxError(f"ab printed no {key.replace('_', ' ')}: {_one_line(text)}")
        parsed[key] = float(m.group(1))
    non_2xx = _AB_NON_2XX.search(text)
    parsed["non_2xx"] = float(non_2xx.group(1)) if non_2xx else 0.0
    return parsed


def _program(name: str, package: str) -> str:
    found = shutil.which(name) or next((p for d in ("/usr/sbin", "/sbin") if os.access(p := f"{d}/{name}", os.X_OK)), None)
    if found is None:
        raise LinuxError(f"{name} not found: install {package} (scripts/setup.sh does as root) for the HiRes HTTP measurement")
    return found


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _nginx_config(root: Path, port: int) -> Path:
    """One worker serving `root`/www on 127.0.0.1:`port`, in the foreground, every file it
    writes in `root`."""
    www = root / "www"
    www.mkdir()
    # A page the worker compresses for every request (gzip, as the client asks), so that the
    # server's CPU, not ab's, sets the rate: text of words drawn from a fixed seed.
    words = [f"w{(i * 2654435761) % 997:x}" for i in range(PAGE_WORDS)]
    (www / "index.html").write_text("<html><body>" + " ".join(words) + "</body></html>\n")
    # The worker runs as an unprivileged user: it must read the page.
    for path in (root, www, www / "index.html"):
        path.chmod(0o755 if path.is_dir() else 0o644)
    temp = {kind: root / kind for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")}
    conf = root / "nginx.conf"
    conf.write_text(
        f"""daemon off;
master_process on;
worker_processes 1;
pid {root}/nginx.pid;
error_log {root}/error.log warn;
events {{ worker_connections 1024; }}
http {{
    access_log off;
    keepalive_timeout 0;
    gzip on;
    gzip_comp_level {GZIP_LEVEL};
    gzip_min_length 0;
    gzip_http_version 1.0;
    gzip_types text/html;
{"".join(f"    {kind}_temp_path {path};{chr(10)}" for kind, path in temp.items())}    server {{
        listen 127.0.0.1:{port};
        root {www};
    }}
}}
"""
    )
    return conf


def _cpu_busy_ticks() -> dict[int, tuple[int, int]]:
    """Per CPU: (busy, total) clock ticks from /proc/stat."""
    ticks: dict[int, tuple[int, int]] = {}
    for line in Path("/proc/stat").read_text().splitlines():
        name, *fields = line.split()
        if name.startswith("cpu") and name != "cpu":
            values = [int(v) for v in fields[:8]]
            idle = values[3] + values[4]
            ticks[int(name[3:])] = (sum(values) - idle, sum(values))
    return ticks


def _cpu_controller_root() -> Path | None:
    """Where the cgroup hierarchy holding the CPU controller is mounted (v1 `cpu`, else cgroup2)."""
    unified = None
    for line in Path("/proc/self/mounts").read_text().splitlines():
        fields = line.split()
        if len(fields) >= 4 and fields[2] == "cgroup" and "cpu" in fields[3].split(","):
            return Path(fields[1])
        if len(fields) >= 3 and fields[2] == "cgroup2":
            unified = Path(fields[1])
    return unified


def _throttled_periods(cgroup: str) -> int:
    """Periods in which CFS bandwidth control throttled `cgroup` or any cgroup above it up to
    the hierarchy's root (`nr_throttled` of each `cpu.stat`)."""
    root = _cpu_controller_root()
    if root is None:
        return 0
    total = 0
    parts = [p for p in cgroup.split("/") if p]
    for end in range(1, len(parts) + 1):
        text = _read(root.joinpath(*parts[:end], "cpu.stat"))
        total += next((int(v) for k, v in (line.split() for line in text.splitlines() if line.strip()) if k == "nr_throttled"), 0)
    return total


def _busy_share(before: dict[int, tuple[int, int]], after: dict[int, tuple[int, int]], cpu: int) -> float | None:
    if cpu not in before or cpu not in after:
        return None
    busy, total = (after[cpu][i] - before[cpu][i] for i in (0, 1))
    return busy / total if total > 0 else None


QUIET_CPU_BUSY = 0.1
"""Before each HTTP round: how busy (at most) the two CPUs must have been over half a second."""


def _wait_quiet(cpus: Sequence[int], wait_s: float) -> float:
    """Waits up to `wait_s` for `cpus` to be at most `QUIET_CPU_BUSY` busy over half a second
    (other programs' work competes with the server); the busiest one's share, at the end."""
    deadline = time.monotonic() + wait_s
    while True:
        before = _cpu_busy_ticks()
        time.sleep(0.5)
        after = _cpu_busy_ticks()
        busiest = max((_busy_share(before, after, cpu) or 0.0) for cpu in cpus)
        if busiest <= QUIET_CPU_BUSY or time.monotonic() >= deadline:
            return busiest


def _server_cpu_ticks(master: int) -> int:
    """User and system CPU time of nginx's master process `master` and its workers, in clock
    ticks (the processes' own time, whatever else runs on their CPU)."""
    ticks = 0
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        # The fields after the name, which may hold anything, end at its last `)`.
        fields = _read(proc / "stat").rpartition(")")[2].split()
        if len(fields) > 12 and (int(proc.name) == master or fields[1] == str(master)):
            ticks += int(fields[11]) + int(fields[12])
    return ticks


def _master_pid(pid_file: Path, timeout_s: float = 60.0) -> int:
    deadline = time.monotonic() + timeout_s
    while not (text := _read(pid_file).strip()).isdigit():
        if time.monotonic() > deadline:
            raise LinuxError(f"nginx wrote no pid to {pid_file} within {timeout_s:.0f} s")
        time.sleep(0.02)
    return int(text)


def _wait_listening(port: int, server: subprocess.Popen[bytes], logs: Sequence[Path], timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        if server.poll() is not None:
            raise LinuxError(f"nginx ended before serving (exit {server.returncode}): {_one_line(''.join(map(_read, logs)))}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            if time.monotonic() > deadline:
                said = _one_line("".join(map(_read, logs)))
                raise LinuxError(f"nginx did not listen on 127.0.0.1:{port} within {timeout_s:.0f} s: {said}") from None
            time.sleep(0.05)


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""


def _stop(child: subprocess.Popen[bytes], signum: int) -> None:
    """`signum` to `child`, SIGKILL after 10 s; reaped."""
    if child.poll() is None:
        child.send_signal(signum)
        try:
            child.wait(timeout=10)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()


def _http_once(depth: int, seconds: int, concurrency: int, nginx: str, ab: str, taskset: str) -> dict[str, Any]:
    """One ab run against nginx `depth` levels deep: ab's figures and each CPU's busy share."""
    cpus = sorted(os.sched_getaffinity(0))
    # The server on the last CPU, ab on the first: neither takes the other's CPU at any depth.
    server_cpu, client_cpu = cpus[-1], cpus[0]
    with tempfile.TemporaryDirectory(prefix="critmem-hires-nginx-") as tmp, _tree(depth) as (prefix, cgroup):
        root = Path(tmp)
        port = _free_port()
        conf = _nginx_config(root, port)
        server_argv = [taskset, "-c", str(server_cpu), nginx, "-p", str(root), "-c", str(conf), "-e", str(root / "error.log")]
        log = root / "server.log"
        with log.open("wb") as log_file:
            server = subprocess.Popen([*prefix, *server_argv], stdout=log_file, stderr=log_file, stdin=subprocess.DEVNULL)
        summary_out = ""
        try:
            _wait_listening(port, server, [root / "error.log", log])
            url = f"http://127.0.0.1:{port}/index.html"
            master = _master_pid(root / "nginx.pid")
            before = _cpu_busy_ticks()
            throttled_before = _throttled_periods(cgroup)
            server_ticks_before = _server_cpu_ticks(master)
            done = subprocess.run(
                [
                    taskset,
                    "-c",
                    str(client_cpu),
                    ab,
                    "-q",
                    "-H",
                    "Accept-Encoding: gzip",
                    "-c",
                    str(concurrency),
                    "-t",
                    str(seconds),
                    "-n",
                    str(AB_REQUESTS_PER_S * seconds),
                    url,
                ],
                capture_output=True,
                text=True,
                check=False,
            )
            after = _cpu_busy_ticks()
            throttled = _throttled_periods(cgroup) - throttled_before
            server_cpu_s = (_server_cpu_ticks(master) - server_ticks_before) / os.sysconf("SC_CLK_TCK")
            if done.returncode != 0:
                raise LinuxError(f"ab at depth {depth}: {_one_line(done.stderr or done.stdout)}")
            measured: dict[str, Any] = dict(parse_ab(done.stdout))
        finally:
            # critmem-hires stops the server and removes the tree on SIGTERM; nginx stops on it too.
            _stop(server, signal.SIGTERM)
            summary_out = _read(log)
        if server.returncode != 0:
            raise LinuxError(f"critmem-hires at depth {depth}: {_one_line(summary_out)}")
    if measured["complete"] == 0 or measured["non_2xx"] > 0:
        raise LinuxError(f"ab at depth {depth}: {measured['complete']:.0f} requests complete, {measured['non_2xx']:.0f} not 2xx")
    measured["throttled_periods"] = throttled
    measured["server_cpu_us_per_connection"] = server_cpu_s * 1e6 / measured["complete"]
    measured["server_cpu_busy"] = _busy_share(before, after, server_cpu)
    measured["client_cpu_busy"] = _busy_share(before, after, client_cpu)
    return measured


def http_by_depth(
    depths: Iterable[int] = range(5),
    seconds: int = 5,
    concurrency: int = 20,
    rounds: int = 3,
    progress: Progress = None,
    quiet_wait_s: float = 30.0,
) -> list[dict[str, Any]]:
    """Table III's analogue: nginx (one worker, a 60 KiB page it gzips per request, no keep-alive) in the
    deepest subsystem of `chain_tree(depth)` on the last CPU, `ab -c concurrency -t seconds` from outside the tree on the
    first, `rounds` times per depth, depths interleaved, each round after waiting up to
    `quiet_wait_s` for both CPUs to be quiet. One row per depth: connections per second (mean
    and stddev over the rounds), ab's mean latency and 95 % line in ms, each CPU's busy share
    during the run and the busiest one's before it, the server's own CPU time per connection, the
    periods CFS bandwidth control throttled the tree, and the ratios to depth 0."""
    if not quiet_wait_s >= 0:
        raise LinuxError(f"quiet_wait_s must be at least 0 (got {quiet_wait_s})")
    # ab takes whole seconds.
    if not (isinstance(seconds, int) and 1 <= seconds <= 3600):
        raise LinuxError(f"seconds must be a whole number from 1 to 3600 (got {seconds!r})")
    _check_count("concurrency", concurrency, 1)
    _check_count("rounds", rounds, 1)
    chosen = _check_depths(depths)
    require_root("the HiRes HTTP measurement")
    nginx = _program("nginx", "nginx-light (or nginx)")
    ab = _program("ab", "apache2-utils")
    taskset = _program("taskset", "util-linux")
    measured: dict[int, list[dict[str, Any]]] = {d: [] for d in chosen}
    for r, depth in _rounds_order(chosen, rounds):
        if progress is not None:
            progress(f"HiRes on Linux: nginx {depth} deep under ab (round {r + 1} of {rounds})")
        background = _wait_quiet(sorted(os.sched_getaffinity(0)), quiet_wait_s)
        measured[depth].append({**_http_once(depth, seconds, concurrency, nginx, ab, taskset), "background_cpu_busy": background})
    rows = []
    for d in chosen:
        runs = measured[d]
        rates = [m["requests_per_s"] for m in runs]
        busy = [m["server_cpu_busy"] for m in runs if m["server_cpu_busy"] is not None]
        client = [m["client_cpu_busy"] for m in runs if m["client_cpu_busy"] is not None]
        rows.append(
            {
                "depth": d,
                "rounds": rounds,
                "seconds": seconds,
                "concurrency": concurrency,
                "connections_per_s": statistics.fmean(rates),
                "connections_per_s_stddev": statistics.stdev(rates) if len(rates) > 1 else 0.0,
                "latency_ms": statistics.fmean(m["latency_ms"] for m in runs),
                "p95_ms": statistics.median(m["p95_ms"] for m in runs),
                "requests": sum(m["complete"] for m in runs),
                "failed": sum(m["failed"] for m in runs),
                "throttled_periods": sum(m["throttled_periods"] for m in runs),
                "server_cpu_busy": statistics.fmean(busy) if busy else None,
                "client_cpu_busy": statistics.fmean(client) if client else None,
                "background_cpu_busy": statistics.median(m["background_cpu_busy"] for m in runs),
                # What depth costs the server, also where ab's CPU or other programs set the rate.
                "server_cpu_us_per_connection": statistics.median(m["server_cpu_us_per_connection"] for m in runs),
                "round_connections_per_s": rates,
            }
        )
    return _with_ratios(rows, ["connections_per_s", "latency_ms", "server_cpu_us_per_connection"])
