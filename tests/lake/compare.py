"""Turning our Arrow results into the Python values DuckDB's client returns, so rows compare with ==."""

from __future__ import annotations

import datetime as dt
from typing import Any

import duckdb
import pyarrow as pa

from tests.support.reference_lakes import sort_rows


def _plain(value: Any) -> Any:
    """Normalise what differs only in representation: aware times to naive UTC times, nested values recursively."""
    if isinstance(value, dt.time) and value.tzinfo is not None:
        offset = value.utcoffset() or dt.timedelta()
        base = dt.datetime.combine(dt.date(2000, 1, 1), value.replace(tzinfo=None)) - offset
        return base.time()
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, tuple):
        return tuple(_plain(v) for v in value)
    if isinstance(value, dict):
        return {_plain(k): _plain(v) for k, v in value.items()}
    return value


def arrow_rows(table: pa.Table) -> list[tuple[Any, ...]]:
    """Rows of an Arrow table as DuckDB's Python client would return them, sorted like reference_state."""
    # DuckDB cannot ingest decimal256 (our type for 128-bit integers): pass those as text and turn them into ints
    wide = [i for i, f in enumerate(table.schema) if pa.types.is_decimal256(f.type)]
    for i in wide:
        table = table.set_column(i, table.field(i).name, table.column(i).cast(pa.string()))
    con = duckdb.connect()
    try:
        con.execute("SET TimeZone = 'UTC'")
        con.register("t", table)
        rows = con.execute("SELECT * FROM t").fetchall()
    finally:
        con.close()
    fixed = [tuple(int(v) if i in wide and v is not None else v for i, v in enumerate(r)) for r in rows]
    return sort_rows([tuple(_plain(v) for v in r) for r in fixed])


def plain_rows(rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    return sort_rows([tuple(_plain(v) for v in r) for r in rows])
