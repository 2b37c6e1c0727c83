"""HiRes's hierarchy of resource reservations and hierarchical memory (the HiRes paper's
Sec. III-A and III-E, Tables I and II).

Subsystems form a tree under the root (the machine). A subsystem gets CPU, memory or I/O from
its parent through reservations: `create` makes an empty one, `bind` asks for an amount
(admission control runs in the parent), `delete` revokes it, and `wait` hands the holder the
updates of its reservations.

- A hard reservation is the holder's for good: what a subsystem gives out hard never exceeds
  what it holds hard minus its overhead.
- A soft one uses what the hard ones leave and can be taken back (`revoke`); a subsystem that
  passed it on takes it back from its own children, newest first.

Amounts are integers: memory in bytes, I/O in bytes per second, CPU in `CPU_PARTS` per CPU.

    >>> from critmem.hires import ReservationTree
    >>> tree = ReservationTree(cpus=1, memory_bytes=2**30)
    >>> tree.add_subsystem("web")
    >>> res = tree.create("web", "hard", "cpu")
    >>> tree.bind(res, budget_ns=4_000_000, period_ns=8_000_000)
    >>> tree.holding("root", "cpu")["hard_out"] / CPU_PARTS
    0.5

Memory reserved is mapped page by page (Table II). The root allocates frames of the machine
(its memory in pages of `page_bytes`) into its own address space; a parent aliases a page it
holds into a direct child, at most as many distinct pages as the child's memory reservations
bind, and `remove` takes an alias back with every alias made from it further down. A revoked
or deleted reservation takes the newest aliases of what no longer fits. Addresses are byte
addresses, page-aligned.

    >>> tree.bind(tree.create("web", "hard", "memory"), bytes=2 * tree.page_bytes)
    >>> tree.allocate(0x1000)
    0
    >>> tree.alias("root", 0x1000, "web", 0x8000)
    0
    >>> tree.pages("web")
    {'frames': 1, 'aliases': 1, 'bound_pages': 2}

The same tree as a TOML file is what `critmem hires apply` runs on real Linux
(`ReservationTree.load(text)` reads one).
"""

from __future__ import annotations

from critmem._core import CPU_PARTS, ReservationTree

__all__ = ["CPU_PARTS", "ReservationTree"]
