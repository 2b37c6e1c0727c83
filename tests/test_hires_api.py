"""`critmem.hires.ReservationTree`: HiRes's reservations from Python."""

from __future__ import annotations

import doctest

import pytest
from critmem import hires
from critmem.hires import CPU_PARTS, ReservationTree

MS = 1_000_000


def test_the_module_example_runs() -> None:
    assert doctest.testmod(hires, raise_on_error=True).attempted > 0


def test_admission_refuses_what_does_not_fit_and_changes_nothing() -> None:
    tree = ReservationTree(cpus=1, memory_bytes=0)
    for name, budget, period in [("web", 4, 8), ("rt25", 4, 25), ("rt20", 3, 20), ("rt10", 1, 10)]:
        tree.add_subsystem(name)
        tree.bind(tree.create(name, "hard", "cpu"), budget_ns=budget * MS, period_ns=period * MS)
    assert tree.holding("root", "cpu")["hard_out"] == 91 * CPU_PARTS // 100
    tree.add_subsystem("late")
    res = tree.create("late", "hard", "cpu")
    with pytest.raises(ValueError, match="does not fit in root: 0.0900 CPU left"):
        tree.bind(res, budget_ns=1 * MS, period_ns=10 * MS)
    assert tree.bound(res) is None
    tree.check()


def test_a_revocation_reaches_the_leaves_through_wait() -> None:
    tree = ReservationTree(cpus=1, memory_bytes=1000)
    tree.add_subsystem("a")
    tree.add_subsystem("b", parent="a")
    ra = tree.create("a", "soft", "memory")
    tree.bind(ra, bytes=600)
    rb = tree.create("b", "soft", "memory")
    tree.bind(rb, bytes=500)
    tree.revoke(ra, 200)
    assert tree.wait(rb) == {"family": "memory", "bytes": 200, "amount": 200}
    tree.delete(ra)
    assert tree.wait(rb) == "revoked"
    assert tree.wait(rb) is None and tree.bound(rb) is None
    assert tree.subsystems() == [("root", None), ("a", "root"), ("b", "a")]


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda t: t.create("nobody", "hard", "cpu"), 'no subsystem named "nobody"'),
        (lambda t: t.create("a", "firm", "cpu"), "kind must be hard or soft"),
        (lambda t: t.create("a", "hard", "disk"), "family must be cpu, memory or io"),
        (lambda t: t.bind(t.create("a", "hard", "cpu"), bytes=1), "a cpu reservation cannot hold memory"),
        (lambda t: t.bind(t.create("a", "hard", "cpu"), budget_ns=1), "give budget_ns and period_ns"),
        (lambda t: t.add_subsystem("a"), "exists already"),
        (lambda t: ReservationTree.load("[root]\ncpus = 0\nmemory_mib = 1\n"), "root.cpus: must be at least 1"),
    ],
)
def test_bad_requests_are_one_line_value_errors(call: object, message: str) -> None:
    tree = ReservationTree(cpus=1, memory_bytes=1000)
    tree.add_subsystem("a")
    with pytest.raises(ValueError, match=message):
        call(tree)  # type: ignore[operator]


def test_a_tree_file_loads_with_its_reservations() -> None:
    tree = ReservationTree.load(
        '[root]\ncpus = 2\nmemory_mib = 64\n[[subsystem]]\nname = "web"\nreserve = [{ family = "memory", kind = "hard", mib = 16 }]\n'
    )
    assert tree.holding("web", "memory")["hard_in"] == 16 * 2**20
    assert tree.holding("root", "cpu")["own"] == 2 * CPU_PARTS
