"""Table analytics as a non-real-time task, a program apart from the SARA paper's workloads: a
sales report computed again and again from tables held in memory (pandas), as a data
warehouse's query would, as many times as the CPU and memory allow.

The tables are made at start-up from `--seed`: `--rows` sales (customer, product, day,
quantity, unit price), the customers drawn from a power law so that a few buy most, and
`--products` products (category, unit cost). Each work unit runs the report: the sales joined
with the products, each sale's revenue and margin, revenue and margin per category and month,
and the `--top` customers by revenue. The join and the derived columns are new arrays in every
unit, so a unit's peak is well above the memory between units (4 million rows: about 330 MiB
between units, the allocator keeping freed arrays, and 620 MiB at a unit's peak). Cumulative work units go to critmem through
`critmem.jobclient.ProgressReporter` (CRITMEM_PROGRESS_FILE), so a run's throughput is work
units per second.

Self-check of every unit, against figures computed without the join when the tables are made:
the categories' revenue and margin add up to the sales' own (to 1e-9 of them), the top customers
are those with the most revenue, with their revenue; and the report is the first unit's again,
exactly.

Run it under critmem (`critmem reproduce sara --platform linux --pair speech+tables`) or alone:

    python -m critmem.apps.tables --units 5
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from typing import Any

from critmem.apps._support import StopFlag, run_work_units, usage_error
from critmem.jobclient import ProgressReporter

APP = "tables"
SUM_TOLERANCE = 1e-9
CATEGORIES = 40
DAYS = 365
DAYS_PER_MONTH = 31


@dataclass
class Report:
    by_category: Any
    """Revenue and margin per (category, month): a DataFrame."""
    top_customers: Any
    """The top customers' revenue, largest first: a Series indexed by customer."""


@dataclass
class Expected:
    """What a report must agree with, computed without pandas' join and group-bys."""

    revenue: float
    margin: float
    customer_revenue: Any
    """Revenue per customer number (numpy), from the sales alone."""


def make_tables(rows: int, products: int, customers: int, seed: int) -> tuple[Any, Any]:
    """The sales and product tables of `seed`."""
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(seed)
    product_table = pd.DataFrame(
        {
            "product": np.arange(products, dtype=np.int32),
            "category": rng.integers(0, CATEGORIES, products).astype(np.int16),
            "unit_cost": rng.uniform(1.0, 50.0, products).round(2),
        }
    )
    product = rng.integers(0, products, rows).astype(np.int32)
    markup = rng.uniform(1.1, 1.6, rows)
    sales = pd.DataFrame(
        {
            "customer": ((rng.pareto(1.2, rows) * 1000).astype(np.int64) % customers).astype(np.int32),
            "product": product,
            "day": rng.integers(0, DAYS, rows).astype(np.int16),
            "quantity": rng.integers(1, 10, rows).astype(np.int16),
            "unit_price": (product_table["unit_cost"].to_numpy()[product] * markup).round(2),
        }
    )
    return sales, product_table


def expected(sales: Any, products: Any) -> Expected:
    """The totals and each customer's revenue, from the columns' arrays."""
    import numpy as np

    quantity = sales["quantity"].to_numpy().astype(np.float64)
    revenue = quantity * sales["unit_price"].to_numpy()
    cost = quantity * products["unit_cost"].to_numpy()[sales["product"].to_numpy()]
    per_customer = np.bincount(sales["customer"].to_numpy(), weights=revenue)
    return Expected(float(revenue.sum()), float((revenue - cost).sum()), per_customer)


def report(sales: Any, products: Any, top: int) -> Report:
    """One work unit: the sales report."""
    import pandas as pd

    joined = sales.merge(products, on="product", how="left", validate="many_to_one")
    quantity = joined["quantity"].astype("float64")
    revenue = quantity * joined["unit_price"]
    margin = revenue - quantity * joined["unit_cost"]
    frame = pd.DataFrame(
        {
            "category": joined["category"],
            "month": joined["day"] // DAYS_PER_MONTH,
            "customer": joined["customer"],
            "revenue": revenue,
            "margin": margin,
        }
    )
    by_category = frame.groupby(["category", "month"], sort=True)[["revenue", "margin"]].sum()
    top_customers = frame.groupby("customer", sort=True)["revenue"].sum().nlargest(top)
    return Report(by_category, top_customers)


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= SUM_TOLERANCE * max(abs(a), abs(b))


def check(r: Report, want: Expected, reference: Report | None) -> str | None:
    """What is wrong with a report, or None."""
    import numpy as np

    for column, total in (("revenue", want.revenue), ("margin", want.margin)):
        got = float(r.by_category[column].sum())
        if not _close(got, total):
            return f"the categories' {column} adds up to {got!r}, the sales' to {total!r}"
    # The top customers: each with its own revenue, and none below the revenue of the customer
    # ranked last in a list of their length (a customer left out above it would be).
    revenue = want.customer_revenue
    count = min(len(r.top_customers), int(np.count_nonzero(revenue)))
    cutoff = float(np.sort(revenue)[::-1][count - 1]) if count else 0.0
    for customer, got in r.top_customers.items():
        if not _close(float(got), float(revenue[int(customer)])):
            return f"customer {customer}'s revenue is {float(got)!r}, the sales' {float(revenue[int(customer)])!r}"
        if float(got) < cutoff and not _close(float(got), cutoff):
            return f"customer {customer} ({float(got)!r}) is in the top list below a customer left out ({cutoff!r})"
    if reference is not None:
        if not r.by_category.equals(reference.by_category):
            return "the revenue per category and month differs from the first unit's"
        if not r.top_customers.equals(reference.top_customers):
            return "the top customers differ from the first unit's"
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m critmem.apps.tables",
        description="Table analytics (pandas) as a non-real-time task: a sales report (join, revenue and margin per category and "
        "month, top customers) over tables held in memory, one work unit after another, each checked; reports cumulative work "
        "units to critmem. On SIGTERM/SIGINT: one JSON line on stderr, exit 0 (1 if a self-check failed).",
        epilog="examples:\n  python -m critmem.apps.tables --units 5\n  python -m critmem.apps.tables --rows 8000000",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--rows", type=int, default=4_000_000, help="sales; sets the memory (default: %(default)s)")
    parser.add_argument("--products", type=int, default=20_000, help="products (default: %(default)s)")
    parser.add_argument("--customers", type=int, default=500_000, help="customers (default: %(default)s)")
    parser.add_argument("--top", type=int, default=100, help="customers in the report's top list (default: %(default)s)")
    parser.add_argument("--seed", type=int, default=1, help="the tables (default: %(default)s)")
    parser.add_argument("--units", type=int, metavar="N", help="stop after N work units (default: run until SIGTERM or SIGINT)")
    args = parser.parse_args(argv)
    for name in ("rows", "products", "customers", "top"):
        if getattr(args, name) < 1:
            raise usage_error(APP, f"--{name} must be at least 1 (got {getattr(args, name)})")
    if args.units is not None and args.units < 1:
        raise usage_error(APP, f"--units must be at least 1 (got {args.units})")
    stop = StopFlag()
    progress = ProgressReporter.from_env()
    # A run stopped before the first unit (or while the tables are made) reads as 0 units
    # done, not as unknown.
    progress.update(0)
    sales, products = make_tables(args.rows, args.products, args.customers, args.seed)
    want = expected(sales, products)
    return run_work_units(
        APP,
        args.units,
        stop,
        progress,
        lambda: report(sales, products, args.top),
        lambda result, first: check(result, want, first),
        {"rows": len(sales)},
    )


if __name__ == "__main__":
    sys.exit(main())
