"""Arbitrary files given to `critmem run`/`analyze` end in exit 0 or a one-line exit 2, never a crash.

Runs the CLI's `main` in-process (no process per example). Generation is seeded so CI is
reproducible; set CRITMEM_TEST_SEED to explore other inputs.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest
from conftest import Outcome, cli
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

SEED = int(os.environ.get("CRITMEM_TEST_SEED", "20260607"))

# Lines of real scenario files, with good and bad values, so that random combinations
# often get past the TOML parser and reach validation, simulation and analysis.
FRAGMENTS = [
    "[machine]", "cpus = 1", "cpus = 2", "cpus = 0", "cpus = -4", 'cpus = "two"',
    "[scheduler]", 'kind = "rm"', 'kind = "dm"', 'kind = "fp"', 'kind = "edf"', 'kind = "pfp"',
    'kind = "pedf"', 'kind = "gedf"', 'kind = "gfp"', 'kind = "cyclic"', 'kind = "nope"',
    'priorities = "rm"', 'priorities = "explicit"', "major_frame_ms = 20",
    "[[scheduler.slot]]", 'task = "a"', "start_ms = 0", "duration_ms = 5", "start_ms = 18",
    "[[task]]", 'name = "a"', 'name = "b"', 'name = ""', "wcet_ms = 1", "wcet_ms = 3.5", "wcet_ms = 0",
    "period_ms = 4", "period_ms = 10", "period_ms = 0", "period_ms = -1", "period_ms = 1e308",
    "deadline_ms = 3", "deadline_ms = 0", "offset_ms = 2", "offset_ms = -1", "priority = 1", "priority = 2",
    'criticality = "A"', 'criticality = "D"', 'criticality = "Z"', "cpu = 0", "cpu = 1", "cpu = 5",
    'overrun = "abort"', 'overrun = "skip"', 'overrun = "later"', 'arrival = "sporadic"',
    "min_interarrival_ms = 5", "max_interarrival_ms = 9", "max_interarrival_ms = 2",
    'exec = { dist = "uniform", min_ms = 0.5, max_ms = 2 }', 'exec = { dist = "normal", mean_ms = 1, sd_ms = 0.3, max_ms = 2 }',
    'exec = { dist = "empirical", values_ms = [0.5, 1, 2] }', 'exec = { dist = "empirical", values_ms = [] }',
    "suspend = [{ after_ms = 0.5, for_ms = 1 }]", "suspend = [{ after_ms = 9, for_ms = 1 }]",
    "[run]", "horizon_ms = 50", "horizon_ms = 0", "horizon_ms = nan", "seed = 3", "seed = -1",
    "[[task]]\nname = \"c\"\nwcet_ms = 1\nperiod_ms = 5", "x = 1", "= =", "[", "]]", '"unterminated',
    # One job program: memory, locks, calls and suspensions mixed, over declarations that may be missing.
    "[memory]", "total_mb = 64", "total_mb = 1", 'swap = "hdd"', "private_mb = 1", "private_mb = 0.004",
    '[[resource]]\nname = "r"\nprotocol = "srp"', '[[resource]]\nname = "r"\nprotocol = "pip"',
    '[[region]]\nname = "shm"\nsize_mb = 1\nkind = "file"', '[[component]]\nname = "c"\nstacks = 1\nprivate_mb = 0.5',
    'program = [{ access = [{ pattern = "sweep", mb = 1 }], compute_ms = 1 }]',
    'program = [{ lock = "r" }, { access = [{ pattern = "random", refs = 5, region = "shm" }] }, { unlock = "r" }]',
    'program = [{ compute_ms = 1 }, { call = "c" }, { suspend_ms = 1 }]',
    'program = [{ access = [{ pattern = "trace", pages = [0, 9] }], access_order = "interleave" }]',
    'program = [{ access = [], compute_ms = -1 }]',
]  # fmt: skip

fragment_soup = st.lists(st.sampled_from(FRAGMENTS), max_size=24).map("\n".join)


def _pick(good: list[str], bad: list[str]) -> st.SearchStrategy[str]:
    """Mostly a good value, about one draw in twenty a bad one: a scenario has many fields."""
    # Repetition weights the draw (integers() would favour its bounds).
    return st.sampled_from(good * (19 * len(bad)) + bad * len(good))


@st.composite
def scenario_files(draw: st.DrawFn) -> str:
    """Well-formed TOML shaped like a scenario, mostly valid, with an occasional bad value.

    Periods are small and horizons short, so every valid draw simulates in milliseconds.
    """
    kind = draw(st.sampled_from(["fp", "rm", "dm", "edf", "pfp", "pedf", "gedf", "gfp", "cyclic"]))
    uniprocessor = kind in ("fp", "rm", "dm", "edf")
    cpus = draw(_pick(["1"] if uniprocessor else ["1", "2", "3"], ["0", "2", "-1"]))
    lines = ["[machine]", f"cpus = {cpus}", "[scheduler]", f'kind = "{kind}"']
    n_tasks = draw(st.integers(1, 4))
    if kind == "cyclic":
        lines.append(f"major_frame_ms = {draw(_pick(['20'], ['10', '0']))}")
        starts = draw(st.lists(st.sampled_from(["0", "5", "12"]), unique=True, max_size=3))
        for i, start_ms in enumerate(starts):
            duration_ms = draw(_pick(["2", "4"], ["9"]))
            lines += ["[[scheduler.slot]]", f'task = "t{i % n_tasks}"', f"start_ms = {start_ms}", f"duration_ms = {duration_ms}"]
    horizon_ms = draw(st.one_of(st.none(), _pick(["10", "45.5", "80"], ["0"])))
    seed = draw(st.one_of(st.none(), _pick(["0", "7"], ["-1"])))
    run = [f"{k} = {v}" for k, v in (("horizon_ms", horizon_ms), ("seed", seed)) if v is not None]
    if run:
        lines += ["[run]", *run]
    for i in range(n_tasks):
        lines += ["[[task]]", f'name = "{draw(_pick([f"t{i}"], ["t0", ""]))}"']
        if draw(st.integers(0, 5)) == 0:
            lines += ['arrival = "sporadic"', "min_interarrival_ms = 5", f"max_interarrival_ms = {draw(_pick(['5', '9'], ['3']))}"]
        else:
            lines.append(f"period_ms = {draw(_pick(['2', '4', '5', '10', '20'], ['0', '-1']))}")
        exec_lines = [
            "wcet_ms = 1", "wcet_ms = 0.5", "wcet_ms = 3",
            'exec = { dist = "uniform", min_ms = 0.5, max_ms = 2 }',
            'exec = { dist = "normal", mean_ms = 1, sd_ms = 0.4, min_ms = 0.2, max_ms = 3 }',
            'exec = { dist = "empirical", values_ms = [0.5, 1, 4] }',
        ]  # fmt: skip
        lines.append(draw(_pick(exec_lines, ["wcet_ms = 0", 'exec = { dist = "empirical", values_ms = [] }'])))
        if kind == "fp":
            lines.append(f"priority = {draw(st.sampled_from(['1', '2', '3']))}")

        def optional(values: st.SearchStrategy[str]) -> st.SearchStrategy[str | None]:
            return st.one_of(st.none(), values)

        fields = {
            "deadline_ms": optional(_pick(["1", "3", "8"], ["0"])),
            "offset_ms": optional(_pick(["0", "1.5"], ["-1"])),
            "criticality": optional(_pick(['"A"', '"B"', '"C"', '"D"'], ['"E"'])),
            # Pinning is for partitioned schedulers; elsewhere it is an error, drawn rarely.
            "cpu": optional(_pick(["0", "1"], ["5"])) if kind in ("pfp", "pedf") else st.sampled_from([None] * 19 + ["0"]),
            "overrun": optional(_pick(['"continue"', '"abort"', '"skip"'], ['"later"'])),
            "suspend": optional(_pick(["[{ after_ms = 0.2, for_ms = 1 }]"], ["[{ after_ms = 9, for_ms = 1 }]"])),
        }
        for key, values in fields.items():
            value = draw(values)
            if value is not None:
                lines.append(f"{key} = {value}")
    return "\n".join(lines) + "\n"


file_content = st.one_of(
    st.binary(max_size=300),
    st.text(max_size=300),
    fragment_soup,
    scenario_files(),
    scenario_files().map(lambda t: t.encode("utf-8")),
)


@pytest.fixture(autouse=True, scope="module")
def _print_seed() -> None:
    print(f"hypothesis seed: {SEED} (set CRITMEM_TEST_SEED to change it)")


def _check(o: Outcome) -> None:
    said = f"hypothesis seed {SEED}: {o}"
    assert o.code in (0, 2), said
    assert "Traceback" not in o.stderr, said
    if o.code == 2:
        assert o.stderr.startswith("critmem: error: ") and o.stderr.count("\n") == 1, said
        assert o.stdout == "", said


@seed(SEED)
@settings(max_examples=400, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(content=file_content, command=st.sampled_from(["run", "analyze"]), as_json=st.booleans())
def test_arbitrary_files_never_crash_the_cli(content: str | bytes, command: str, as_json: bool) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "fuzz.toml"
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8", errors="surrogatepass")
        _check(cli(command, str(path), *(["--json"] if as_json else [])))


@seed(SEED)
@settings(max_examples=200, deadline=None, database=None)
@given(
    argv=st.lists(
        st.one_of(st.sampled_from(["run", "analyze", "--json", "--out", "--seed", "--horizon-ms", "-h"]), st.text(max_size=12)), max_size=5
    )
)
def test_arbitrary_arguments_never_crash_the_cli(argv: list[str]) -> None:
    # Keep any --out folder inside a temporary directory.
    with tempfile.TemporaryDirectory() as tmp:
        cwd = os.getcwd()
        os.chdir(tmp)
        try:
            _check(cli(*argv))
        finally:
            os.chdir(cwd)
