"""The HiRes measurements against cgroup depth (critmem.reproduce.hires.depth) on the real machine.

They need root, the Linux binaries in .venv/bin, and for the HTTP one nginx and ab
(scripts/setup.sh installs all as root); elsewhere they skip saying why. Each checks that the
measurement left no cgroup and no server of its own behind.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest
from critmem.linux import LinuxError
from critmem.reproduce.hires import depth

HIRES = Path(sys.executable).parent / "critmem-hires"


def _machine_reason() -> str | None:
    if os.geteuid() != 0:
        return "not root (nested cgroups need root)"
    if not HIRES.is_file():
        return "the Linux binaries are not installed in .venv/bin (run scripts/setup.sh)"
    return None


def _http_reason() -> str | None:
    missing = [name for name in ("nginx", "ab") if shutil.which(name, path=f"{os.environ.get('PATH', '')}:/usr/sbin:/sbin") is None]
    if missing:
        return f"{' and '.join(missing)} not installed (scripts/setup.sh installs nginx-light and apache2-utils as root)"
    return _machine_reason()


needs_machine = pytest.mark.skipif(_machine_reason() is not None, reason=f"real Linux: {_machine_reason()}")
needs_http = pytest.mark.skipif(_http_reason() is not None, reason=f"real Linux: {_http_reason()}")


def _left_behind() -> list[str]:
    """Cgroups named like the measurements' trees, in any hierarchy."""
    name = depth._tree_name()
    return [str(p) for p in Path("/sys/fs/cgroup").glob(f"*/{name}")] + [str(p) for p in Path("/sys/fs/cgroup").glob(name)]


def _our_servers() -> list[str]:
    """Processes started from the measurement's nginx configuration directories."""
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if "critmem-hires-nginx-" in cmdline:
                found.append(f"{proc.name}: {cmdline}")
    return found


def test_a_chain_tree_nests_each_level_in_the_one_before_with_a_cpu_and_memory_limit() -> None:
    root_only = depth.chain_tree(0)
    assert root_only.startswith("[root]") and "[[subsystem]]" not in root_only
    text = depth.chain_tree(3)
    assert text.count("[[subsystem]]") == 3
    assert 'name = "l3"\nparent = "l2"' in text and 'name = "l1"\nparent = "root"' in text
    # A whole CPU at every level: each has a bandwidth (quota = period) and none holds back.
    assert text.count("budget_ms = 100.000, period_ms = 100") == 3
    assert 'family = "memory", kind = "hard"' in text
    with pytest.raises(LinuxError, match="at least 0"):
        depth.chain_tree(-1)


def test_ab_output_is_parsed_and_a_report_without_figures_is_refused() -> None:
    ab = """Complete requests:      25121
Failed requests:        0
Requests per second:    12560.04 [#/sec] (mean)
Time per request:       1.592 [ms] (mean)
Time per request:       0.080 [ms] (mean, across all concurrent requests)

Percentage of the requests served within a certain time (ms)
  50%      1
  95%      3
 100%     12 (longest request)
"""
    parsed = depth.parse_ab(ab)
    assert parsed == {"requests_per_s": 12560.04, "latency_ms": 1.592, "p95_ms": 3.0, "complete": 25121, "failed": 0, "non_2xx": 0}
    with pytest.raises(LinuxError, match="ab printed no requests per s"):
        depth.parse_ab("apr_socket_connect(): Connection refused (111)")


def test_bad_arguments_are_one_line_errors() -> None:
    with pytest.raises(LinuxError, match="samples must be at least 1"):
        depth.event_latency_by_depth(depths=[0], samples=0)
    with pytest.raises(LinuxError, match="depths must be at least 0"):
        depth.page_cost_by_depth(depths=[-1], samples=10)
    with pytest.raises(LinuxError, match="seconds must be a whole number"):
        depth.http_by_depth(depths=[0], seconds=0)


@needs_machine
def test_event_latency_and_page_cost_are_measured_in_the_deepest_cgroup_and_leave_nothing() -> None:
    steps: list[str] = []
    rows = depth.event_latency_by_depth(depths=[0, 2], samples=200, rounds=1, progress=steps.append)
    assert [r["depth"] for r in rows] == [0, 2]
    assert len(steps) == 2 and "2 deep" in steps[1]
    for row in rows:
        assert row["samples"] == 200
        assert 0 < row["p50_ns"] <= row["p99_ns"] <= row["max_ns"] < 1e9, row
    assert rows[0]["p50_ratio"] == 1.0
    assert rows[1]["p50_ratio"] == rows[1]["p50_ns"] / rows[0]["p50_ns"]
    assert _left_behind() == []
    # The deepest tree the measurements use is admitted and applied.
    (deep,) = depth.page_cost_by_depth(depths=[8], samples=50, rounds=1)
    assert deep["depth"] == 8 and 0 < deep["map_p50_ns"] <= deep["map_max_ns"] and 0 < deep["unmap_p50_ns"], deep
    assert deep["map_p50_ratio"] is None, "no depth 0 to compare with"
    assert _left_behind() == []


@needs_http
def test_nginx_is_measured_at_each_depth_under_ab_and_nothing_is_left_running() -> None:
    # No waiting for a quiet machine: this checks the measurement, not its figures.
    rows = depth.http_by_depth(depths=[0, 1], seconds=1, rounds=1, quiet_wait_s=0)
    assert [r["depth"] for r in rows] == [0, 1]
    for row in rows:
        assert row["connections_per_s"] > 0 and row["requests"] > 0 and row["failed"] == 0, row
        assert row["latency_ms"] > 0 and row["p95_ms"] >= 0, row
    assert rows[0]["connections_ratio"] == 1.0
    assert rows[1]["connections_ratio"] == rows[1]["connections_per_s"] / rows[0]["connections_per_s"]
    assert _left_behind() == []
    assert _our_servers() == []
