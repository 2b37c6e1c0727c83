"""Reproduction of the evaluation of HiRes, hierarchical resource management (the paper's text
is ../shared/papers/hires-hierarchical-resource-management.txt).

- `paper`: the paper's own numbers, quoted for comparison;
- `experiment`: the simulator's Fig. 6 and Fig. 5;
- `machine`: Fig. 6 on real Linux, as nested cgroups with real CPU-bound processes;
- `depth`: Fig. 4's event latency and page cost and Table III's HTTP server against cgroup depth,
  on real Linux;
- `report`: the figures and `report.md`, from the collected numbers alone;
- `headline`: the tables `critmem reproduce` prints from the headline numbers.

The Linux parts need root; `platforms=("sim",)` runs the simulator's alone.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from critmem.progress import Progress
    from critmem.reproduce import Reproduction
    from critmem.reproduce.hires.experiment import Plan

from critmem.reproduce.results import finish, write_json, write_text

__all__ = ["PLATFORMS", "reproduce"]

PLATFORMS = ("sim", "linux")


def reproduce(
    out_dir: Path,
    *,
    quick: bool = False,
    progress: Progress | None = None,
    platforms: Sequence[str] = PLATFORMS,
    plan: Plan | None = None,
) -> Reproduction:
    """Runs the parts of `platforms`, writes report.md, results.json and the figures to
    `out_dir`, and returns the headline numbers."""
    from critmem.progress import QuietProgress
    from critmem.reproduce.hires import experiment
    from critmem.reproduce.hires import report as rep  # matplotlib: only when writing
    from critmem.reproduce.hires.paper import PAPER_FIG6_WEB_PERIODS

    unknown = [p for p in platforms if p not in PLATFORMS]
    if unknown or not platforms:
        raise ValueError(f"platforms must be some of {', '.join(PLATFORMS)} (got {', '.join(platforms) or 'none'})")
    plan = plan or (experiment.QUICK if quick else experiment.Plan())
    progress = progress or QuietProgress()
    on_linux = "linux" in platforms
    if on_linux:
        from critmem import linux

        linux.require_root("reproduce hires on Linux (nested cgroups)")
    linux_steps = len(PAPER_FIG6_WEB_PERIODS) + _depth_steps(plan) if on_linux else 0
    progress.start((experiment.sim_counts(plan) + 1 if "sim" in platforms else 0) + linux_steps + 1)
    timings: dict[str, Any] = {}

    data: dict[str, Any] = {"platforms": list(platforms), "plan": _plan_dict(plan), "fig6": {}, "depth": {}}
    if "sim" in platforms:
        data["fig6"]["sim"] = experiment.fig6_sim(plan, progress.step)
        data["fig6_analysis"] = {str(p): experiment.fig6_analysis(p) for p in PAPER_FIG6_WEB_PERIODS}
        data["fig5"] = experiment.fig5_sim(plan, progress.step)
        data["fig4a_sim"] = experiment.fig4a_sim(plan, progress.step)
        data["fig4b_sim"] = experiment.fig4b_sim(plan, progress.step)
        progress.step("Fig. 4(c) (model): alias and remove against depth")
        import time

        timings = {"fig4c_model": experiment.fig4c_model(plan.fig5_depths, plan.fig4c_samples, time.perf_counter_ns)}
    if on_linux:
        from critmem.reproduce.hires import machine

        data["fig6"]["linux"] = machine.fig6_linux(plan.fig6_linux_s, progress.step)
        data["depth"] = _depth(plan, progress.step)

    progress.step("writing the report and figures")
    out_dir.mkdir(parents=True, exist_ok=True)
    files = [write_json(out_dir / "results.json", data), rep.plot_fig6(data, out_dir / "fig6.png")]
    if "sim" in platforms:
        # Wall-clock timings differ from run to run: apart from the report, which stays the same bytes.
        files.append(write_json(out_dir / "fig4_model.json", timings))
        files.append(write_text(out_dir / "fig4_model.md", rep.render_fig4_model(timings)))
    if data.get("fig5"):
        files.append(rep.plot_fig5(data, out_dir / "fig5.png"))
    if data["depth"]:
        files.append(rep.plot_depth(data, out_dir / "depth.png"))
    return finish(out_dir, rep.render(data, [p.name for p in files]), files, _headline(data), rep.acceptance_checks(data))


def _headline(data: dict[str, Any]) -> dict[str, Any]:
    from critmem.reproduce.hires.paper import PAPER_TABLE3

    fig6 = {platform: part["rows"] for platform, part in data["fig6"].items()}
    summary: dict[str, Any] = {
        "paper": "hires",
        "platforms": data["platforms"],
        "fig6": {"sim": fig6.get("sim", []), "linux": fig6.get("linux", [])},
        "paper_table3": {str(k): v for k, v in PAPER_TABLE3.items()},
    }
    if data.get("fig5"):
        summary["fig5"] = [{"depth": r["depth"], "mean_us": r["mean_us"]} for r in data["fig5"]]
        summary["fig4a_sim"] = [{"depth": r["depth"], "mean_us": r["mean_us"]} for r in data["fig4a_sim"]]
        summary["fig4b_sim"] = [{"depth": r["depth"], "packet_mean_us": r["packet_mean_us"]} for r in data["fig4b_sim"]]
    for key in ("event_latency", "page_map", "page_unmap", "http"):
        rows = data["depth"].get(key)
        if rows:
            summary.setdefault("depth", {})[key] = [{"depth": r["depth"], "ratio": r["ratio"]} for r in rows]
    return summary


def _plan_dict(plan: Plan) -> dict[str, Any]:
    from dataclasses import asdict

    return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(plan).items()}


def _depth_steps(plan: Plan) -> int:
    return 2 * plan.linux_rounds * len(plan.linux_depths) + plan.http_rounds * len(plan.http_depths)


def _depth(plan: Plan, step: Callable[[str], None]) -> dict[str, Any]:
    """Fig. 4(a), 4(c) and Table III on Linux against cgroup depth, as the report's rows: the
    median over rounds of each round's median (µs), its 99th percentile and the ratio to depth 0."""
    from critmem.reproduce.hires import depth

    def rows(measured: list[dict[str, Any]], prefix: str) -> list[dict[str, Any]]:
        return [
            {
                "depth": r["depth"],
                "p50_us": r[f"{prefix}p50_ns"] / 1000.0,
                "p99_us": r[f"{prefix}p99_ns"] / 1000.0,
                "max_us": r[f"{prefix}max_ns"] / 1000.0,
                "ratio": r[f"{prefix}p50_ratio"],
            }
            for r in measured
        ]

    events = depth.event_latency_by_depth(plan.linux_depths, samples=plan.linux_samples, rounds=plan.linux_rounds, progress=step)
    pages = depth.page_cost_by_depth(plan.linux_depths, samples=plan.linux_samples, rounds=plan.linux_rounds, progress=step)
    http = depth.http_by_depth(
        plan.http_depths, seconds=plan.http_seconds, rounds=plan.http_rounds, progress=step, quiet_wait_s=plan.http_quiet_wait_s
    )
    return {
        "event_latency": rows(events, ""),
        "page_map": rows(pages, "map_"),
        "page_unmap": rows(pages, "unmap_"),
        "http": [
            {
                "depth": r["depth"],
                "connections_per_s": r["connections_per_s"],
                "stddev": r["connections_per_s_stddev"],
                "latency_ms": r["latency_ms"],
                "p95_ms": r["p95_ms"],
                "server_cpu_us_per_connection": r["server_cpu_us_per_connection"],
                "server_cpu_busy": r["server_cpu_busy"],
                "client_cpu_busy": r["client_cpu_busy"],
                "throttled_periods": r["throttled_periods"],
                "ratio": r["connections_ratio"],
            }
            for r in http
        ],
    }
