"""The headline numbers of `critmem reproduce sara` beside the paper's, as tables: the
simulator's or, with `--platform linux`, this machine's."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from critmem.cli.tables import _fmt, _table, _text

if TYPE_CHECKING:
    from rich.console import Console


def print_headline(console: Console, summary: dict[str, Any]) -> None:
    if summary.get("platform") == "linux":
        _print_linux(console, summary)
        return
    _print_sim(console, summary)


def _print_sim(console: Console, summary: dict[str, Any]) -> None:
    """Fig. 11's means per controller, SARA's throughput gains and Fig. 7's fits."""
    hit, thr = summary.get("mean_deadline_hit_ratio", {}), summary.get("mean_nonrt_throughput", {})
    if not hit:
        return
    paper_hit = {"sara": summary.get("paper_sara_hit_ratio"), **summary.get("paper_baseline_hit_ratio", {})}
    keepable = summary.get("mean_keepable_hit_ratio", {})
    rows = [[c, _fmt(hit.get(c)), _fmt(paper_hit.get(c)), _fmt(keepable.get(c)), _fmt(thr.get(c))] for c in hit]
    step_up = summary.get("sara_step_up", {})
    if step_up.get("mean_deadline_hit_ratio") is not None:
        label = f"sara, x_up {step_up['step_up_bytes'] // 1_048_576} MiB (not the paper's rule)"
        rows.append(
            [
                label,
                _fmt(step_up["mean_deadline_hit_ratio"]),
                "-",
                _fmt(step_up.get("mean_keepable_hit_ratio")),
                _fmt(step_up.get("mean_nonrt_throughput")),
            ]
        )
    console.print(
        _text(
            f"mean over the {len({(c['workload'], c['memory_pct'], c['ssd']) for c in summary.get('configs', [])})} configurations (Fig. 11)"
        )
    )
    console.print(_table(["controller", "deadline-hit ratio", "paper", "keepable", "non-rt throughput /s"], rows, left=1))
    gains = summary.get("sara_throughput_gain", {})
    if gains:
        rows = [[b, _fmt(g.get("ratio_of_means")), _fmt(g.get("paper_mean"))] for b, g in gains.items()]
        console.print(_text("SARA's non-real-time throughput over the baseline's"))
        console.print(_table(["baseline", "model", "paper"], rows, left=1))
    fig7 = summary.get("fig7", {})
    if fig7:
        rows = [[w, _fmt(f.get("slope")), _fmt(f.get("intercept_ms")), _fmt(f.get("configured_bcet_ms"))] for w, f in fig7.items()]
        console.print(_text("execution time against stall per period (Fig. 7)"))
        console.print(_table(["workload", "slope", "intercept ms", "configured BCET ms"], rows, left=1))


def _print_linux(console: Console, summary: dict[str, Any]) -> None:
    """Fig. 11 per configuration on this machine, beside the simulator's prediction."""
    rows = [
        [
            f"{c['workload']} + {c['nrt']}", f"{c['memory_pct']} %", c["controller"], _fmt(c["hit_ratio"]), _fmt(c["simulated_hit_ratio"]),
            _fmt(summary["paper_hit_ratio"].get(c["controller"])), _fmt(c["throughput_per_s"]), _fmt(c["simulated_throughput_per_s"]),
        ]
        for c in summary["configs"]
    ]  # fmt: skip
    console.print(_text("Fig. 11 on this machine (soft real-time app + non-real-time app), with the simulator's prediction"))
    console.print(_table(["pair", "memory", "controller", "hit ratio", "simulated", "paper", "non-RT units/s", "simulated"], rows, left=3))
