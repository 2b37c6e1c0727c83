"""HiRes's I/O device in the results: the `io` section of `critmem run --json` and of the
API's summary, and the load errors of `[io]` and of the server tree's reservations."""

from __future__ import annotations

import json

import pytest
from conftest import EXAMPLES, cli
from critmem import ScenarioError, run

DEMUX = EXAMPLES / "hires-io-demux.toml"


def test_the_json_summary_carries_the_io_section_with_flat_latency_across_depth() -> None:
    p = cli("run", str(DEMUX), "--json")
    assert p.code == 0, p.stderr
    io = json.loads(p.stdout)["io"]
    assert io["arrivals"] == io["received"] + io["dropped_unbound"] + io["dropped_ring_full"]
    by_port = {p["port"]: p for p in io["ports"]}
    depths = [by_port[7000 + d] for d in range(1, 5)]
    assert [p["depth"] for p in depths] == [1, 2, 3, 4]
    assert {(p["mean_latency_us"], p["max_latency_us"]) for p in depths} == {(0.0, 0.0)}
    assert by_port[9999]["task"] is None and by_port[9999]["dropped"] == by_port[9999]["arrivals"] > 0
    bulk = next(s for s in io["subsystems"] if s["name"] == "bulk")
    assert bulk["bandwidth_bytes_per_s"] == 600_000 and bulk["messages_delayed"] > 0
    top = [s for s in io["subsystems"] if s["parent"] == "root"]
    assert sum(s["subtree_bytes_received"] for s in top) == io["bytes_received"]


def test_the_api_summary_is_the_same_as_the_cli_json() -> None:
    result = run(DEMUX)
    timers = result.summary["tasks"]
    mean = {t["name"]: t["mean_response_ms"] for t in timers}
    # A timer job's response is its event deliveries (0.1 ms per level) plus its 0.2 ms.
    assert [round(mean[f"timer-d{d}"], 6) for d in range(1, 5)] == [0.3, 0.4, 0.5, 0.6]
    assert result.summary["io"] == json.loads(cli("run", str(DEMUX), "--json").stdout)["io"]


def test_a_scenario_whose_servers_over_reserve_their_parent_is_refused_naming_the_server() -> None:
    text = DEMUX.read_text().replace(
        'name = "bulk"\nkind = "deferrable"\nbudget_ms = 2', 'name = "bulk"\nkind = "deferrable"\nbudget_ms = 2.5'
    )
    with pytest.raises(ScenarioError, match=r"scheduler\.server\[10\]\.budget_ms: server \"bulk\" reserves 0\.2500 CPU"):
        run(text)
