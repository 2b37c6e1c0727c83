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


PAGE = 4096


def memory_chain(pages: tuple[int, int, int]) -> ReservationTree:
    """root → a → b → c, each bound `pages` pages hard, on a machine of 16 pages."""
    tree = ReservationTree(cpus=1, memory_bytes=16 * PAGE, page_bytes=PAGE)
    for name, parent, n in zip("abc", ["root", "a", "b"], pages, strict=True):
        tree.add_subsystem(name, parent=parent)
        tree.bind(tree.create(name, "hard", "memory"), bytes=n * PAGE)
    return tree


def test_an_alias_past_the_bound_is_refused_with_what_to_bind() -> None:
    tree = memory_chain((2, 1, 0))
    for page in range(3):
        tree.allocate(page * PAGE)
        if page < 2:
            tree.alias("root", page * PAGE, "a", 0x10000 + page * PAGE)
    with pytest.raises(
        ValueError, match=r"^a would hold 3 pages, more than the 2 its memory reservations bind \(8192 bytes\); bind more memory to a"
    ) as refused:
        tree.alias("root", 2 * PAGE, "a", 0x12000)
    assert "\n" not in str(refused.value)
    assert tree.pages("a") == {"frames": 2, "aliases": 2, "bound_pages": 2}, "nothing changed"
    tree.check()


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda t: t.alias("root", 0, "b", 0), "b is not a child of root: a parent aliases into and removes from its direct children only"),
        (lambda t: t.alias("a", 0, "b", 0), "a holds no page at 0x0"),
        (lambda t: t.alias("root", 0, "a", 0x10), "address 0x10 is not a multiple of the 4096-byte page"),
        (lambda t: t.allocate(0), "root already maps a page at 0x0"),
        (lambda t: t.remove("root", "a", 0x5000), "a holds no page at 0x5000"),
        (lambda t: t.alias("root", 0, "nobody", 0), 'no subsystem named "nobody"'),
        (lambda t: ReservationTree(cpus=1, memory_bytes=PAGE, page_bytes=1000), "page_bytes = 1000: must be a power of two"),
    ],
)
def test_bad_memory_requests_are_one_line_value_errors(call: object, message: str) -> None:
    tree = memory_chain((2, 1, 0))
    tree.allocate(0)
    with pytest.raises(ValueError, match=message):
        call(tree)  # type: ignore[operator]


def test_remove_reaches_the_grandchildren_and_subtrees_count_frames_once() -> None:
    tree = memory_chain((3, 2, 1))
    frame = tree.allocate(0)
    tree.allocate(PAGE)
    tree.alias("root", 0, "a", 0)
    tree.alias("root", PAGE, "a", PAGE)
    tree.alias("a", 0, "b", 0x5000)
    tree.alias("a", 0, "b", 0x6000)
    assert tree.alias("b", 0x6000, "c", 0x7000) == frame
    assert tree.subtree_pages("a") == {"frames": 2, "aliases": 5}
    assert tree.subtree_pages("b") == {"frames": 1, "aliases": 3}
    assert tree.pages("b") == {"frames": 1, "aliases": 2, "bound_pages": 2}
    assert tree.remove("root", "a", 0) == 4
    assert tree.mappings("c") == [] and tree.mappings("b") == []
    assert tree.mappings("a") == [(PAGE, tree.mappings("root")[1][1])]
    assert tree.free(PAGE) == 1
    assert tree.frames() == {"total": 16, "in_use": 1, "free": 15}
    tree.check()


def test_a_revoked_soft_reservation_takes_the_newest_aliases() -> None:
    tree = ReservationTree(cpus=1, memory_bytes=16 * PAGE)
    tree.add_subsystem("a")
    res = tree.create("a", "soft", "memory")
    tree.bind(res, bytes=3 * PAGE)
    for page in range(3):
        tree.allocate(page * PAGE)
        tree.alias("root", page * PAGE, "a", page * PAGE)
    tree.revoke(res, PAGE)
    assert [addr for addr, _ in tree.mappings("a")] == [0]
    tree.delete(res)
    assert tree.pages("a") == {"frames": 0, "aliases": 0, "bound_pages": 0}
    assert tree.frames()["in_use"] == 3, "the root keeps its pages"
