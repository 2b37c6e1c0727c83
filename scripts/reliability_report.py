"""Prints the figures of the last chaos-suite run as the Markdown tables of docs/reliability.md.

Reads the per-case JSON records the suite writes (default: target/tmp/chaos) and, for the
soak test, its per-second samples (soak.csv). Usage:

    python scripts/reliability_report.py [DIR]
"""

from __future__ import annotations

import csv
import json
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
    print(
        f"Cases passed: {sum(1 for c in cases if c.get('passed'))} of {len(cases)}; faults injected: {sum(int(c.get('faults_injected', 0)) for c in cases)}."
    )
    soak = folder / "soak.csv"
    if soak.exists():
        rows = list(csv.DictReader(soak.open()))
        print(
            f"Soak samples: {len(rows)} (one a second), resident memory {rows[0]['rss_kib']} → {rows[-1]['rss_kib']} KiB, descriptors {rows[0]['fds']} → {rows[-1]['fds']}."
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
