"""`critmem sweep SPEC.toml` and `critmem.sweep.run_spec`: a spec's runs make the same table on
local processes and on a Dask cluster, a stopped sweep resumes with only the runs it is missing,
every malformed spec is one line and exit code 2, and the cache holds JSON that reads back as it
was written and never runs code."""

from __future__ import annotations

import json
import math
import pickle
import re
import tomllib
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import (
    QUICKSTART,
    ROOT,
    SWEEP_SPECS,
    InProcess,
    StopAfter,
    assert_matches_output_schema,
    assert_one_line_error,
    assert_output_schema_rejects_mangling,
    cli,
)
from critmem.sweep import LocalProcesses, SpecError, SweepError, load_spec, run_spec
from critmem.sweep.cache import CacheError, ResultCache, decode, encode
from critmem.sweep.spec import MAX_RUNS, parse_spec
from critmem.sweep.study import CACHE_DIR, lookup, metric_paths
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

EXAMPLE_SPEC = ROOT / "examples" / "sweep" / "sweep.toml"


def _spec(tmp_path: Path, body: str, name: str = "spec.toml") -> Path:
    """A spec file in tmp_path over the quickstart (copied beside it)."""
    (tmp_path / "quickstart.toml").write_bytes(QUICKSTART.read_bytes())
    path = tmp_path / name
    path.write_text(body, encoding="utf-8")
    return path


SMALL = """
scenario = "quickstart.toml"
seeds = 2
metrics = ["tasks.perception.hit_ratio", "memory.components.map-service.major_faults"]
[vary]
"memory.total_mb" = [32, 64, 128]
"""


def _cache_entries(out: Path) -> list[Path]:
    return sorted((out / CACHE_DIR).rglob("*.json"))


# ---------------------------------------------------------------------------------------------
# The example, locally and on a cluster


def test_the_example_spec_is_bundled_and_small() -> None:
    assert SWEEP_SPECS == [EXAMPLE_SPEC]
    spec = load_spec(EXAMPLE_SPEC)
    assert spec.keys == ("memory.total_mb",) and spec.seeds == (1, 2, 3) and spec.runs == 12
    assert spec.scenario == QUICKSTART.read_text(encoding="utf-8")


def test_the_example_gives_identical_tables_locally_and_on_a_dask_cluster(dask_cluster: str, tmp_path: Path) -> None:
    local, cluster = tmp_path / "local", tmp_path / "cluster"
    a = cli("sweep", str(EXAMPLE_SPEC), "--out", str(local), "--workers", "2", "--json")
    b = cli("sweep", str(EXAMPLE_SPEC), "--out", str(cluster), "--scheduler", dask_cluster, "--json")
    assert a.code == 0 and b.code == 0, (a.stderr, b.stderr)
    got_a, got_b = json.loads(a.stdout), json.loads(b.stdout)
    assert (got_a["computed"], got_a["reused"]) == (12, 0) == (got_b["computed"], got_b["reused"])
    assert got_a["rows"] == got_b["rows"]
    files = ["runs.csv", "runs.parquet", "plot-memory.total_mb.png"]
    assert got_a["files"] == files == got_b["files"]
    for name in files:
        assert (local / name).read_bytes() == (cluster / name).read_bytes(), name
    # One row per run in the spec's order: each memory size with seeds 1 to 3.
    lines = (local / "runs.csv").read_text(encoding="utf-8").splitlines()
    assert lines[0].split(",") == ["memory.total_mb", "seed", *load_spec(EXAMPLE_SPEC).metrics]
    assert [tuple(line.split(",")[:2]) for line in lines[1:]] == [(str(mb), str(s)) for mb in (32, 64, 128, 256) for s in (1, 2, 3)]
    frame = __import__("pandas").read_parquet(local / "runs.parquet")
    assert list(frame.columns) == lines[0].split(",") and len(frame) == 12
    assert str(frame["memory.total_mb"].dtype) == "Int64" and str(frame["tasks.perception.hit_ratio"].dtype) == "float64"
    # Run again on the cluster: nothing to compute.
    again = cli("sweep", str(EXAMPLE_SPEC), "--out", str(cluster), "--scheduler", dask_cluster, "--json")
    assert (json.loads(again.stdout)["computed"], json.loads(again.stdout)["reused"]) == (0, 12)
    assert (cluster / "runs.csv").read_bytes() == (local / "runs.csv").read_bytes()


def test_the_json_output_matches_its_schema_and_the_terminal_shows_the_means(tmp_path: Path) -> None:
    spec = _spec(tmp_path, SMALL)
    o = cli("sweep", str(spec), "--out", str(tmp_path / "out"), "--workers", "1", "--json")
    assert o.code == 0, o.stderr
    data = json.loads(o.stdout)
    assert_matches_output_schema("sweep", data)
    assert_output_schema_rejects_mangling("sweep", data)
    assert data["columns"] == ["memory.total_mb", "seed", "tasks.perception.hit_ratio", "memory.components.map-service.major_faults"]
    assert re.fullmatch(
        r"6 simulated, 0 from the cache; wrote runs.csv, runs.parquet, plot-memory.total_mb.png to .*/out/ in [0-9.]+ s\n", o.stderr
    )
    table = cli("sweep", str(spec), "--out", str(tmp_path / "out"))
    assert table.code == 0 and table.stderr == ""
    rows = {r[0]: r for r in data["rows"]}
    assert rows[32][3] is not None
    for mb in (32, 64, 128):
        faults = [r[3] for r in data["rows"] if r[0] == mb]
        mean = sum(faults) / len(faults)
        shown = str(int(mean)) if mean.is_integer() else f"{mean:.4g}" if mean < 1000 else f"{mean:.1f}"
        assert re.search(rf"^{mb} .* {re.escape(shown)}$", table.stdout, re.MULTILINE), (mb, shown, table.stdout)
    assert "6 runs; each row the mean over seeds 1, 2" in table.stdout
    assert "0 simulated, 6 from the cache" in table.stdout


# ---------------------------------------------------------------------------------------------
# Resuming


def test_a_stopped_sweep_computes_only_the_missing_runs_and_a_finished_one_none(tmp_path: Path) -> None:
    spec, out = _spec(tmp_path, SMALL), tmp_path / "out"
    with pytest.raises(KeyboardInterrupt):
        run_spec(spec, out_dir=out, executor=InProcess(), progress=StopAfter(4))
    assert len(_cache_entries(out)) == 4 and not (out / "runs.csv").exists()
    resumed = run_spec(spec, out_dir=out, executor=InProcess())
    assert (resumed.computed, resumed.reused) == (2, 4)
    finished = run_spec(spec, out_dir=out, executor=LocalProcesses(2))
    assert (finished.computed, finished.reused) == (0, 6)
    fresh = run_spec(spec, out_dir=tmp_path / "fresh", executor=InProcess())
    assert fresh.computed == 6
    assert (out / "runs.csv").read_bytes() == (tmp_path / "fresh" / "runs.csv").read_bytes()
    assert resumed.rows == fresh.rows == finished.rows
    # A new point computes only its own runs.
    spec.write_text(SMALL.replace("[32, 64, 128]", "[32, 64, 128, 256]"), encoding="utf-8")
    grown = run_spec(spec, out_dir=out, executor=InProcess())
    assert (grown.computed, grown.reused) == (2, 6)


def test_a_bad_metric_stops_after_the_first_run(tmp_path: Path) -> None:
    spec = _spec(tmp_path, SMALL.replace("tasks.perception.hit_ratio", "memory.major_fault"))
    o = cli("sweep", str(spec), "--out", str(tmp_path / "out"), "--workers", "1")
    assert_one_line_error(o, "metric memory.major_fault is not in a run's result", "nearest: memory.major_faults")
    assert len(_cache_entries(tmp_path / "out")) == 1
    table = _spec(tmp_path, SMALL.replace("tasks.perception.hit_ratio", "tasks.perception"))
    o = cli("sweep", str(table), "--out", str(tmp_path / "out"), "--workers", "1")
    assert_one_line_error(o, "metric tasks.perception is a table, not a value", "numbers such as tasks.perception.jobs")
    typo = _spec(tmp_path, SMALL.replace("tasks.perception.hit_ratio", "tasks.perceptoin.hit_ratio"))
    o = cli("sweep", str(typo), "--out", str(tmp_path / "out"), "--workers", "1")
    assert_one_line_error(o, "tasks.perceptoin.hit_ratio", "nearest: tasks.perception.hit_ratio")


# ---------------------------------------------------------------------------------------------
# The cache: JSON only, and an entry that does not read back is computed again


class Marker:
    """Unpickling this would create a file: proof that a cache entry ran code."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self) -> tuple[Any, ...]:
        return (Path.touch, (Path(self.path),))


def test_the_cache_holds_json_and_a_tampered_entry_is_computed_again_not_run(tmp_path: Path) -> None:
    spec, out = _spec(tmp_path, SMALL), tmp_path / "out"
    first = run_spec(spec, out_dir=out, executor=InProcess())
    entries = _cache_entries(out)
    assert len(entries) == 6
    assert [p for p in (out / CACHE_DIR).rglob("*") if p.is_file() and p.suffix != ".json"] == []
    for p in entries:
        entry = json.loads(p.read_text(encoding="utf-8"))
        assert set(entry) == {"key", "result"} and entry["key"] == p.stem
        assert not p.read_bytes().startswith(b"\x80")  # no pickle protocol header
    marker = tmp_path / "ran-code"
    entries[0].write_bytes(pickle.dumps(Marker(str(marker))))  # what a hostile cache could hold
    entries[1].write_text(entries[1].read_text(encoding="utf-8")[:100], encoding="utf-8")  # cut short
    swapped = json.loads(entries[3].read_text(encoding="utf-8"))
    entries[2].write_text(json.dumps(swapped), encoding="utf-8")  # another run's entry under this key
    again = run_spec(spec, out_dir=out, executor=InProcess())
    assert not marker.exists()
    assert (again.computed, again.reused) == (3, 3)
    assert again.rows == first.rows
    for p in entries[:3]:
        assert json.loads(p.read_text(encoding="utf-8"))["key"] == p.stem


def test_entries_of_other_code_are_dropped_and_a_result_that_is_not_data_is_refused(tmp_path: Path) -> None:
    cache = ResultCache(tmp_path / "c", "new")
    (tmp_path / "c" / "old").mkdir()
    ResultCache(tmp_path / "c", "new")
    assert [p.name for p in (tmp_path / "c").iterdir()] == ["new"]
    with pytest.raises(CacheError, match=r"the result\['a'\]\[1\] is a tests?\.?.*Marker"):
        cache.put("k", {"a": [1, Marker("x")]})
    assert cache.get("k") == (False, None)
    assert not list((tmp_path / "c" / "new").iterdir()), "a refused result leaves no file"


def test_a_sweep_function_returning_objects_is_a_one_line_sweep_error(tmp_path: Path) -> None:
    from critmem.sweep import Sweep

    with (
        Sweep(InProcess(), cache_dir=tmp_path / "c") as sweep,
        pytest.raises(SweepError, match=r"^\S*make_marker returned a result the sweep cache cannot keep: the result is a"),
    ):
        sweep.map(make_marker, ["x"])


def make_marker(path: str) -> Marker:
    return Marker(path)


def _same(a: Any, b: Any, path: str = "result") -> None:
    """`b` equals `a` in value and in type, all the way down (NaN equal to NaN)."""
    assert type(a) is type(b), f"{path}: {type(a)} != {type(b)}"
    if isinstance(a, dict):
        assert list(a) == list(b), path
        for k in a:
            _same(a[k], b[k], f"{path}[{k!r}]")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _same(x, y, f"{path}[{i}]")
    elif isinstance(a, float) and math.isnan(a):
        assert math.isnan(b), path
    else:
        assert a == b and repr(a) == repr(b), path


def _round_trip(value: Any) -> Any:
    return decode(json.loads(json.dumps(encode(value), allow_nan=False)))


def test_the_codec_keeps_types_json_cannot_say() -> None:
    value: dict[Any, Any] = {
        "t": (1, (2.5, "x"), []),
        "f": [math.nan, math.inf, -math.inf, -0.0, 1e-310, 0.1 + 0.2],
        "big": [2**64 + 1, -(2**70)],
        3: "int key",
        (1, "a"): None,
        "$tuple": "a key like a tag",
        "": {"nested": {"$dict": [1]}},
        "np": [np.float64(0.1), np.float32(1.1), np.int64(-5), np.uint8(200), np.bool_(True), np.float64("nan")],
        "bool": [True, False, 1, 0],
    }
    _same(value, _round_trip(value))


@pytest.mark.parametrize(
    "bad",
    [
        {"$tuple": 1},
        {"$float": "1.5"},
        {"$dict": [[[1], 2]]},
        {"$dict": [[1]]},
        {"$numpy": ["object", 1]},
        {"$numpy": ["int8", 1000]},
        {"$numpy": ["float64", 1.5]},
        {"$eval": "print(1)"},
        {"$tuple": [], "x": 1},
    ],
)
def test_decoding_refuses_what_encode_never_writes(bad: Any) -> None:
    with pytest.raises((ValueError, OverflowError)):
        decode(bad)


plain_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=4)
        | st.lists(children, max_size=4).map(tuple)
        | st.dictionaries(st.text(max_size=6), children, max_size=4)
        | st.dictionaries(st.integers() | st.booleans() | st.none(), children, max_size=3)
    ),
    max_leaves=25,
)


@settings(max_examples=300, deadline=None, database=None)
@given(plain_values)
def test_every_plain_value_reads_back_as_it_was_written(value: Any) -> None:
    _same(value, _round_trip(value))


def test_every_studys_results_read_back_from_the_cache_as_computed() -> None:
    from critmem.reproduce.mc2 import study
    from critmem.reproduce.sara import experiment as sara
    from critmem.reproduce.tmem import experiment as tmem

    w = sara.WORKLOADS[1]
    results = [sara.measure(sara.Spec(w, 60, "fast-ssd", "sara", (), 3, 1, w.configured_bcet_ms, keep_series=True))]
    kinds: dict[str, Any] = {}
    for s in tmem.first_batch(tmem.QUICK):
        kinds.setdefault(s.kind, s)
    results += [tmem.measure(s) for s in kinds.values()]
    results.append(study.curve(study.curve_items(study.quick_plan())[0]))
    for r in results:
        _same(r, _round_trip(r))


# ---------------------------------------------------------------------------------------------
# The spec


def test_vary_takes_lists_ranges_nested_tables_and_zipped_keys(tmp_path: Path) -> None:
    spec = load_spec(
        _spec(
            tmp_path,
            """
scenario = "quickstart.toml"
metrics = ["tasks.navigation.hit_ratio"]
[vary]
memory.total_mb = [64, 128]
"tmem.units_above_min" = { start = 0, stop = 4, step = 2 }
[vary.run]
horizon_ms = { start = 0.1, stop = 0.3, step = 0.1 }
[[vary.zip]]
"control.interval_ms" = [5, 10]
"group.0.floor_mb" = [4, 8]
""",
        )
    )
    assert [a.keys for a in spec.axes] == [
        ("memory.total_mb",), ("tmem.units_above_min",), ("run.horizon_ms",), ("control.interval_ms", "group.0.floor_mb")
    ]  # fmt: skip
    assert spec.axes[1].values == ((0,), (2,), (4,)) and type(spec.axes[1].values[1][0]) is int
    assert spec.axes[2].values == ((0.1,), (0.2,), (0.3,))
    assert spec.axes[3].values == ((5, 4), (10, 8))
    assert spec.seeds == (42,), "default: the scenario's own seed"
    points = list(spec.points())
    assert len(points) == 2 * 3 * 3 * 2 == spec.runs
    assert points[0] == (
        ("memory.total_mb", 64),
        ("tmem.units_above_min", 0),
        ("run.horizon_ms", 0.1),
        ("control.interval_ms", 5),
        ("group.0.floor_mb", 4),
    )
    assert points[1][-2:] == (("control.interval_ms", 10), ("group.0.floor_mb", 8)), "the last axis varies fastest"
    assert spec.columns[-2:] == ("seed", "tasks.navigation.hit_ratio")


def test_an_inline_scenario_and_a_list_of_seeds(tmp_path: Path) -> None:
    scenario = tomllib.loads(QUICKSTART.read_text(encoding="utf-8"))
    data = {"scenario": scenario, "seeds": [7, 2**64 - 1], "metrics": ["seed"], "vary": {"run.horizon_ms": [100]}}
    with pytest.raises(SpecError, match="metrics: seed is the seed column's column"):
        parse_spec(data)
    data["metrics"] = ["tasks.telemetry.jobs"]
    out = run_spec(parse_spec(data), out_dir=tmp_path / "o", executor=InProcess())
    assert out.spec.scenario_name == "[scenario]"
    assert [r[1] for r in out.rows] == [7, 2**64 - 1]
    assert str(out.frame()["seed"].dtype) == "UInt64"


def test_the_docs_spec_loads() -> None:
    text = (ROOT / "docs" / "sweep.md").read_text(encoding="utf-8")
    block = text.split("```text\n", 1)[1].split("```", 1)[0]
    spec = parse_spec(tomllib.loads(block), name="docs/sweep.md", folder=EXAMPLE_SPEC.parent)
    assert spec.runs == 36 and len(spec.axes) == 3


BAD_SPECS = {
    "not toml": ("scenario = ", ["spec.toml: Invalid value"]),
    "unknown key": ("foo = 1\n" + SMALL, ["unknown key foo", "known: scenario, seeds, metrics, vary, output"]),
    "no scenario": ('metrics = ["x"]', ["no scenario"]),
    "no metrics": ('scenario = "quickstart.toml"', ["no metrics"]),
    "missing scenario": (SMALL.replace('"quickstart.toml"', '"nope.toml"'), ["scenario nope.toml: No such file"]),
    "scenario not a file name": (SMALL.replace('"quickstart.toml"', "3"), ["scenario: expected a file name or a [scenario] table"]),
    "scenario does not load": (
        'scenario = { scheduler = { kind = "nope" } }\nmetrics = ["x"]',
        ["spec.toml: [scenario]", "nope"],
    ),
    "a value, not a list": (SMALL.replace("[32, 64, 128]", "64"), ["vary.memory.total_mb: expected a list", "[64]"]),
    "empty list": (SMALL.replace("[32, 64, 128]", "[]"), ["vary.memory.total_mb: an empty list"]),
    "a value twice": (SMALL.replace("[32, 64, 128]", "[32, 64, 32]"), ["32 is listed twice"]),
    "range without step": (SMALL.replace("[32, 64, 128]", "{ start = 1, stop = 2 }"), ["a range is {start, stop, step}: no step"]),
    "range with an extra key": (SMALL.replace("[32, 64, 128]", "{ start = 1, stop = 2, step = 1, by = 2 }"), ["unknown key 'by'"]),
    "range step zero": (SMALL.replace("[32, 64, 128]", "{ start = 1, stop = 2, step = 0 }"), ["step: must be positive"]),
    "range backwards": (SMALL.replace("[32, 64, 128]", "{ start = 3, stop = 2, step = 1 }"), ["stop (2) is below start (3)"]),
    "range of text": (SMALL.replace("[32, 64, 128]", '{ start = "a", stop = 2, step = 1 }'), ["start: expected a number"]),
    "range too long": (SMALL.replace("[32, 64, 128]", "{ start = 0, stop = 1, step = 1e-9 }"), ["more than the 100,000"]),
    "too many runs": (SMALL.replace("seeds = 2", "seeds = 100000"), ["300,000 runs", "100,000"]),
    "run.seed varied": (SMALL + '"run.seed" = [1, 2]\n', ["run.seed is what `seeds` varies"]),
    "key inside another": (SMALL + "memory = [{ total_mb = 64 }]\n", ["memory.total_mb lies inside memory"]),
    "key twice": (SMALL + '[[vary.zip]]\n"memory.total_mb" = [1]\n', ["memory.total_mb is varied twice"]),
    "zip of unequal lists": (
        SMALL + '[[vary.zip]]\n"run.horizon_ms" = [1, 2]\n"tmem.period_ms" = [1]\n',
        ["run.horizon_ms has 2, tmem.period_ms has 1"],
    ),
    "zip not tables": (SMALL + "zip = [1]\n", ["vary.zip[1]: expected a table of keys"]),
    "empty key": (SMALL + '"memory." = [1]\n', ["'memory.' is not a dotted key"]),
    "empty nested table": (SMALL + "[vary.task]\n", ["vary.task: an empty table"]),
    "a date": (SMALL + '"run.horizon_ms" = [1979-05-27]\n', ["vary.run.horizon_ms[0]: a date"]),
    "seeds zero": (SMALL.replace("seeds = 2", "seeds = 0"), ["seeds: a count from 1"]),
    "seeds negative": (SMALL.replace("seeds = 2", "seeds = [-1]"), ["seeds[0]: expected a whole number"]),
    "seeds twice": (SMALL.replace("seeds = 2", "seeds = [3, 3]"), ["seeds: 3 is listed twice"]),
    "seeds text": (SMALL.replace("seeds = 2", 'seeds = "2"'), ["seeds: expected a count"]),
    "metrics empty": (
        SMALL.replace('metrics = ["tasks.perception.hit_ratio", "memory.components.map-service.major_faults"]', "metrics = []"),
        ["metrics: expected a list"],
    ),
    "metric with an empty part": (SMALL.replace("tasks.perception.hit_ratio", "tasks..hit_ratio"), ["metrics[0]: expected a dotted path"]),
    "metric twice": (
        SMALL.replace("memory.components.map-service.major_faults", "tasks.perception.hit_ratio"),
        ["tasks.perception.hit_ratio is listed twice"],
    ),
    "metric named as a key": (SMALL.replace("tasks.perception.hit_ratio", "memory.total_mb"), ["memory.total_mb is a varied key's column"]),
    "unknown output key": (
        SMALL + "[output]\nfolder = 'x'\n",
        ["unknown key output.folder (known: output.dir, output.formats, output.plots)"],
    ),
    "bad format": (SMALL + "[output]\nformats = ['xlsx']\n", ["output.formats: expected a list of distinct formats out of csv, parquet"]),
    "plots not a bool": (SMALL + "[output]\nplots = 'yes'\n", ["output.plots: expected true or false"]),
    "a point the layout refuses": (
        SMALL.replace("[32, 64, 128]", "[32, 100]"),
        ["quickstart.toml with memory.total_mb=100: memory.total_mb:", "power of two"],
    ),
    "a key the scenario lacks": (
        SMALL + '"memory.totl_mb" = [1]\n',
        ["with memory.total_mb=32, memory.totl_mb=1", "unknown field `totl_mb`"],
    ),
    "a list index past the end": (SMALL + '"task.9.period_ms" = [1]\n', ["override task.9.period_ms: task has no entry 9"]),
}


@pytest.mark.parametrize(("text", "fragments"), BAD_SPECS.values(), ids=BAD_SPECS.keys())
def test_a_malformed_spec_is_one_line_and_exit_code_2_before_anything_runs(tmp_path: Path, text: str, fragments: list[str]) -> None:
    spec = _spec(tmp_path, text)
    o = cli("sweep", str(spec), "--out", str(tmp_path / "out"))
    assert_one_line_error(o, *fragments)
    assert "at line 1 column" not in o.stderr, "positions in JSON the user never saw"
    assert not (tmp_path / "out" / CACHE_DIR).exists(), "nothing ran"


def test_command_line_errors_are_one_line(tmp_path: Path) -> None:
    assert_one_line_error(cli("sweep", str(tmp_path / "none.toml")), "none.toml: No such file or directory")
    spec, out = _spec(tmp_path, SMALL), str(tmp_path / "out")
    assert_one_line_error(cli("sweep", str(spec), "--workers", "0", "--out", out), "--workers", "at least 1")
    assert_one_line_error(cli("sweep", str(spec), "--scheduler", "127.0.0.1:1", "--out", out), "tcp://HOST:PORT")
    assert_one_line_error(
        cli("sweep", str(spec), "--scheduler", "tcp://127.0.0.1:9", "--workers", "2", "--out", out), "--workers is for local processes"
    )
    assert not (tmp_path / "out").exists(), "nothing is made before the executor is there"
    (tmp_path / "file").write_text("x")
    assert_one_line_error(cli("sweep", str(spec), "--out", str(tmp_path / "file")), "exists and is not a folder")
    (tmp_path / "bin.toml").write_bytes(b"\xff\xfe")
    assert_one_line_error(cli("sweep", str(tmp_path / "bin.toml")), "not UTF-8")


spec_keys = st.sampled_from(
    [
        "scenario",
        "seeds",
        "metrics",
        "vary",
        "output",
        "zip",
        "start",
        "stop",
        "step",
        "dir",
        "formats",
        "plots",
        "memory.total_mb",
        "run.seed",
        "task.0.period_ms",
        "memory",
        "x",
    ]
)
spec_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-3, 300)
    | st.floats(allow_nan=True)
    | st.sampled_from(["quickstart.toml", "", "csv", "tasks.navigation.hit_ratio", "a..b"]),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(spec_keys, children, max_size=4),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None, database=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(st.dictionaries(spec_keys, spec_values, max_size=6))
def test_any_spec_loads_or_is_one_line_spec_error(data: dict[str, Any]) -> None:
    data = {k: v for k, v in data.items() if v is not None}  # TOML has no null
    folder = EXAMPLE_SPEC.parent.parent  # where quickstart.toml is
    try:
        spec = parse_spec(data, name="fuzz.toml", folder=folder)
    except SpecError as e:
        assert str(e).startswith("fuzz.toml: ") and "\n" not in str(e)
        return
    assert 1 <= spec.runs <= MAX_RUNS and spec.metrics and spec.seeds


# ---------------------------------------------------------------------------------------------
# Metrics, the table and the plots


def test_metric_paths_name_list_entries_and_take_dotted_names_and_indices() -> None:
    result = {"tasks": [{"name": "a.b", "x": 1}, {"name": "c", "x": 2}], "banks": [{"used": 5}, {"used": 6}], "v": [7, 8]}
    assert lookup(result, "tasks.a.b.x") == (True, 1)
    assert lookup(result, "tasks.c.x") == (True, 2)
    assert lookup(result, "tasks.1.x") == (True, 2)
    assert lookup(result, "banks.1.used") == (True, 6)
    assert lookup(result, "v.0") == (True, 7)
    assert lookup(result, "tasks.d.x") == (False, None)
    assert lookup(result, "v.2") == (False, None)
    assert metric_paths(result) == [
        "tasks.a.b.name",
        "tasks.a.b.x",
        "tasks.c.name",
        "tasks.c.x",
        "banks.0.used",
        "banks.1.used",
        "v.0",
        "v.1",
    ]


def test_a_plot_per_varied_key_and_stale_plots_go(tmp_path: Path) -> None:
    zipped = SMALL + '[[vary.zip]]\n"run.horizon_ms" = [500, 1000]\n"control.controller" = ["sara", "greedy"]\n'
    spec = _spec(tmp_path, zipped.replace("seeds = 2", "seeds = 1"))
    out = tmp_path / "out"
    (out).mkdir()
    (out / "mine.txt").write_text("kept")
    first = run_spec(spec, out_dir=out, executor=InProcess())
    names = ["runs.csv", "runs.parquet", "plot-memory.total_mb.png", "plot-run.horizon_ms.png", "plot-control.controller.png"]
    assert [p.name for p in first.files] == names
    for p in first.files[2:]:
        assert p.read_bytes().startswith(b"\x89PNG") and b"Software" not in p.read_bytes()
    # Without the zip and with only CSV: the zipped keys' plots and the Parquet file go, the
    # user's file stays.
    spec.write_text(SMALL.replace("seeds = 2", "seeds = 1") + "[output]\nformats = ['csv']\n", encoding="utf-8")
    second = run_spec(spec, out_dir=out, executor=InProcess())
    assert (second.computed, second.reused) == (3, 0), "points without the zipped overrides are other runs"
    assert sorted(p.name for p in out.iterdir()) == sorted(
        [".critmem-sweep", ".critmem-sweep-files", "mine.txt", "runs.csv", "plot-memory.total_mb.png"]
    )
    spec.write_text(SMALL.replace("seeds = 2", "seeds = 1") + "[output]\nplots = false\n", encoding="utf-8")
    third = run_spec(spec, out_dir=out, executor=InProcess())
    assert [p.name for p in third.files] == ["runs.csv", "runs.parquet"] and third.computed == 0
    assert not (out / "plot-memory.total_mb.png").exists()


def test_the_output_dir_is_relative_to_the_spec_and_out_overrides_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = _spec(tmp_path, SMALL.replace("seeds = 2", "seeds = 1").replace("[32, 64, 128]", "[32]") + "[output]\ndir = 'there'\n")
    monkeypatch.chdir(tmp_path.parent)
    assert run_spec(spec, executor=InProcess()).out_dir == tmp_path / "there"
    assert (tmp_path / "there" / "runs.csv").exists()
    spec.write_text(SMALL.replace("seeds = 2", "seeds = 1").replace("[32, 64, 128]", "[32]"), encoding="utf-8")
    assert load_spec(spec).out_dir is None
    o = cli("sweep", str(spec), "--workers", "1")
    assert o.code == 0, o.stderr
    assert (tmp_path.parent / "results" / "sweep" / "spec" / "runs.csv").exists()


# ---------------------------------------------------------------------------------------------
# The example ships


def test_examples_lists_and_copies_the_sweep_spec(tmp_path: Path) -> None:
    listed = cli("examples")
    assert re.search(r"^sweep/sweep +The quickstart over memory sizes", listed.stdout, re.MULTILINE)
    o = cli("examples", "copy", "sweep/sweep", str(tmp_path))
    assert o.code == 0, o.stderr
    assert (tmp_path / "sweep" / "sweep.toml").read_bytes() == EXAMPLE_SPEC.read_bytes()
    assert "critmem sweep" in o.stdout and "critmem examples copy quickstart" in o.stdout
    assert cli("examples", "copy", "quickstart", str(tmp_path)).code == 0
    assert load_spec(tmp_path / "sweep" / "sweep.toml").scenario == QUICKSTART.read_text(encoding="utf-8")
    assert_one_line_error(cli("examples", "copy", "sweep/sweep", str(tmp_path)), "sweep.toml: exists")
