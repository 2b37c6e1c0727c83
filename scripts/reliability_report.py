"""Prints the figures of the last chaos-suite run as the Markdown tables of docs/reliability.md.

Reads the per-case JSON records the suite writes (default: target/tmp/chaos) and, for the
soak test, its per-second samples (soak.csv). Usage:

    python scripts/reliability_report.py [DIR]
"""

from __future__ import annotations

import csv
import json
import statistics
import sys
from pathlib import Path


def ms(ns: object) -> str:
    return f"{float(ns) / 1e6:.2f}" if isinstance(ns, (int, float)) else "–"


def main() -> int:
    folder = Path(sys.argv[1] if len(sys.argv) > 1 else "target/tmp/chaos")
    records = sorted(folder.glob("*.json"))
    if not records:
        print(f"reliability_report: no chaos records in {folder}", file=sys.stderr)
        return 2
    cases = [json.loads(p.read_text()) for p in records]
    print("| case | passed | faults injected | ticks | tick lateness p99 / max, ms | tick cost p99, ms | s |")
    print("|---|---|---|---|---|---|---|")
    for c in cases:
        print(
            f"| {c['case']} | {'yes' if c.get('passed') else 'no'} | {c.get('faults_injected', '–')} "
            f"| {c.get('ticks', '–')} | {ms(c.get('tick_lateness_p99_ns'))} / {ms(c.get('tick_lateness_max_ns'))} "
            f"| {ms(c.get('tick_cost_p99_ns'))} | {c.get('seconds', '–')} |"
        )
    print()
    # The agent is kept from running on purpose in these two.
    held = {"agent_sigstop", "agent_cpu_throttled"}
    timed = [c for c in cases if c["case"] not in held and "tick_lateness_max_ns" in c]
    if timed:
        worst = max(timed, key=lambda c: float(c["tick_lateness_max_ns"]))
        print(f"Worst tick lateness where the agent could run: {ms(worst['tick_lateness_max_ns'])} ms ({worst['case']}).")
    flood = next((c for c in cases if c["case"] == "job_socket_flood"), None)
    if flood:
        sock = flood["job_socket"]
        jobs = flood["agent_srt_jobs"]
        received = jobs["released"] + jobs["completed"] + jobs["dropped"]
        lost = flood["worker_srt_reports_sent"] + 2 * flood["late_client_jobs"] - received
        print(
            f"Under the flood: {sock['malformed_messages']} malformed lines dropped, {sock['over_limit']} connections "
            f"over a quota and {sock['refused']} refused; legitimate reports sent but lost: {lost} "
            f"(the worker could not send {flood['worker_srt_reports_unsent']})."
        )
    print(
        f"Cases passed: {sum(1 for c in cases if c.get('passed'))} of {len(cases)}; faults injected: {sum(int(c.get('faults_injected', 0)) for c in cases)}."
    )
    soak = folder / "soak.csv"
    if soak.exists():
        rows = list(csv.DictReader(soak.open()))
        # After the warm-up (the first sixth, at least 10 s): the trend, not the settling.
        warm = rows[max(10, len(rows) // 6) :] or rows
        t = [float(r["t_s"]) / 3600.0 for r in warm]
        rss = [float(r["rss_kib"]) for r in warm]
        slope = statistics.linear_regression(t, rss).slope if len(set(t)) > 1 else 0.0
        costs = [float(r["tick_cost_mean_us"]) for r in warm if float(r["tick_cost_mean_us"]) > 0]
        print(
            f"Soak: {len(rows)} s sampled each second; after the warm-up resident memory "
            f"{min(rss):.0f}–{max(rss):.0f} KiB (trend {slope:+.0f} KiB/hour), descriptors "
            f"{min(int(r['fds']) for r in warm)}–{max(int(r['fds']) for r in warm)}, journal at most "
            f"{max(int(r['journal_bytes']) for r in rows)} bytes, mean tick cost "
            f"{statistics.mean(costs[: len(costs) // 2] or [0]):.0f} µs in the first half and "
            f"{statistics.mean(costs[len(costs) // 2 :] or [0]):.0f} µs in the second."
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
