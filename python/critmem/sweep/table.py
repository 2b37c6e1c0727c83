"""A sweep's table: one row per run, written as CSV (values as Python prints them, so the file
reads back as the same numbers) and as Parquet with a type per column."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["cell_text", "column_kind", "csv_bytes", "frame", "write_parquet"]


def cell_text(v: Any) -> str:
    """A value as the CSV table writes it: numbers as Python prints them (the shortest text that
    reads back as the same number), booleans as true/false, None as nothing, a list or table as
    JSON."""
    if v is None:
        return ""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return v
    return json.dumps(v, separators=(",", ":"))


_I64 = (-(2**63), 2**63 - 1)


def column_kind(values: Sequence[Any]) -> str:
    """The type of a column: bool, int, uint (a seed past 2**63), float or text (anything
    else, as `cell_text` writes it)."""
    present = [v for v in values if v is not None]
    if not present:
        return "text"
    if all(isinstance(v, bool) for v in present):
        return "bool"
    if all(type(v) is int for v in present):
        if all(_I64[0] <= v <= _I64[1] for v in present):
            return "int"
        return "uint" if all(0 <= v < 2**64 for v in present) else "text"
    if all(type(v) in (int, float) for v in present):
        return "float"
    return "text"


def csv_bytes(columns: Sequence[str], rows: Sequence[tuple[Any, ...]]) -> bytes:
    """The table as CSV: a header of `columns`, then the rows."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(columns)
    w.writerows([cell_text(v) for v in row] for row in rows)
    return buf.getvalue().encode("utf-8")


def frame(columns: Sequence[str], rows: Sequence[tuple[Any, ...]]) -> pd.DataFrame:
    """The table as a DataFrame, each column typed by `column_kind` (nullable: a value may be
    missing) and text columns as `cell_text` writes them."""
    import pandas as pd

    dtypes = {"bool": "boolean", "int": "Int64", "uint": "UInt64", "float": "float64", "text": "string"}
    data: dict[str, list[Any]] = {}
    kinds: dict[str, str] = {}
    for i, name in enumerate(columns):
        values = [row[i] for row in rows]
        kind = column_kind(values)
        data[name] = values if kind != "text" else [None if v is None else cell_text(v) for v in values]
        kinds[name] = dtypes[kind]
    return pd.DataFrame(data, columns=list(columns), dtype=object).astype(kinds)


def write_parquet(columns: Sequence[str], rows: Sequence[tuple[Any, ...]], path: Path) -> None:
    """Writes the table to `path` as Parquet (needs pyarrow), typed as `frame` types it."""
    frame(columns, rows).to_parquet(path, index=False, engine="pyarrow", compression="zstd")
