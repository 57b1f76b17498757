"""Many-row INSERTs into a DuckDB catalog from one registered Arrow table instead of executemany.

DuckDB's Python driver runs `executemany` as one prepared execution per row, and binds every value through a Python
conversion (which looks for pandas each time): about 1 ms per row, so a commit of 1,024 files (7,000+ catalog rows)
took 11-16 s. The same rows as a pyarrow table registered on the same connection, inserted with one
`INSERT INTO t SELECT ... FROM <registered table>`, take milliseconds, and run inside the commit's transaction.

Only statements of the form the builder writes are rewritten: `INSERT INTO {p}<catalog table> [(cols)] VALUES (...)`
whose target is a catalog table of `ddl.CATALOG_TABLES`. Each VALUES expression becomes
`CAST(<expression with :name -> the Arrow column> AS <the column's DDL type>)`, so all-NULL and integer columns get
exactly the catalog's types. Anything else (other statements, values Arrow cannot type) returns False and the caller
falls back to executemany.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping, Sequence
from contextlib import suppress
from functools import cache, lru_cache
from typing import Any

import pyarrow as pa
from sqlalchemy.engine import Connection

from . import ddl

# SQLAlchemy text()'s own bind-parameter pattern, so exactly the names it would bind are taken from the Arrow table
_BIND_RE = re.compile(r"(?<![:\w\x5c]):(\w+)(?!:)")
_INSERT_RE = re.compile(
    r"\s*INSERT\s+INTO\s+\{p\}(\w+)\s*(?:\(([^()]*)\))?\s*VALUES\s*\((.*)\)\s*", re.IGNORECASE | re.DOTALL
)
_COUNTER = itertools.count()


@cache
def catalog_column_types() -> dict[str, dict[str, str]]:
    """Per catalog table, its columns in order -> DuckDB type, from the DDL the catalog was created with (and the
    columns 1.1 adds, which statements only ever name)."""
    return {t: cols | ddl.ADDED_IN_1_1.get(t, {}) for t, cols in ddl.table_columns().items()}


def split_top_level(text: str) -> list[str]:
    """Split a VALUES list on commas outside parentheses and quotes."""
    parts: list[str] = []
    depth = 0
    quote: str | None = None
    start = 0
    for i, ch in enumerate(text):
        if quote:
            if ch == quote:
                quote = None  # a doubled quote closes and reopens: same result
        elif ch in ("'", '"'):
            quote = ch
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
    parts.append(text[start:].strip())
    return parts


@lru_cache(maxsize=256)
def rewrite(sql: str) -> tuple[str, tuple[str, ...]] | None:
    """`INSERT INTO {p}t [(cols)] VALUES (...)` -> (`INSERT INTO {p}t [(cols)] SELECT CAST(...) ... FROM {src}`,
    the bind names in first-use order); None if the statement is not one this module handles."""
    m = _INSERT_RE.fullmatch(sql)
    if m is None:
        return None
    table, col_list, values = m.groups()
    types = catalog_column_types().get(table)
    if types is None:
        return None
    exprs = split_top_level(values)
    # positional: the 1.0 columns (1.1's added ones are only ever named)
    targets = [c.strip() for c in col_list.split(",")] if col_list is not None else list(ddl.table_columns()[table])
    if len(exprs) != len(targets) or any(t not in types for t in targets):
        return None
    names: list[str] = []

    def column(b: re.Match[str]) -> str:
        if b.group(1) not in names:
            names.append(b.group(1))
        return 'src."' + b.group(1) + '"'

    select = ", ".join(f"CAST({_BIND_RE.sub(column, e)} AS {types[t]})" for e, t in zip(exprs, targets, strict=True))
    cols = f" ({col_list})" if col_list is not None else ""
    return f"INSERT INTO {{p}}{table}{cols} SELECT {select} FROM {{src}} AS src", tuple(names)


def _is_plain(t: pa.DataType) -> bool:
    # types whose meaning in DuckDB is the same as the driver's binding of the Python value
    return (pa.types.is_null(t) or pa.types.is_boolean(t) or pa.types.is_int64(t) or pa.types.is_string(t)
            or pa.types.is_floating(t) or pa.types.is_timestamp(t) or pa.types.is_date(t))


def arrow_rows(names: Sequence[str], rows: Sequence[Mapping[str, Any]]) -> pa.Table | None:
    """The rows as one Arrow column per bind name; None if a value is missing or Arrow types a column oddly."""
    arrays = []
    try:
        for name in names:
            arrays.append(pa.array([r[name] for r in rows]))
    except (KeyError, TypeError, ValueError, OverflowError, pa.ArrowException):
        return None  # executemany reports it, or binds what Arrow cannot type
    if not all(_is_plain(a.type) for a in arrays):
        return None
    return pa.Table.from_arrays(arrays, names=list(names))


def insert_from_arrow(conn: Connection, prefix: str, sql: str, rows: Sequence[Mapping[str, Any]]) -> bool:
    """Run a many-row INSERT from a registered Arrow table on conn's DuckDB connection (same transaction).

    Returns False, having done nothing, when the statement or the values are not ones this handles.
    """
    plan = rewrite(sql)
    if plan is None:
        return False
    select, names = plan
    table = arrow_rows(names, rows)
    if table is None:
        return False
    raw = conn.connection.driver_connection
    src = f"__ducklake_rows_{next(_COUNTER)}"
    raw.register(src, table)  # type: ignore[union-attr]
    try:
        # through SQLAlchemy, so a failure is a DBAPIError as with executemany (commit retries look for that)
        conn.exec_driver_sql(select.replace("{p}", prefix).replace("{src}", f'"{src}"'))
    except BaseException:
        with suppress(Exception):  # the transaction may be aborted now; the connection is closed right after
            raw.unregister(src)  # type: ignore[union-attr]
        raise
    raw.unregister(src)  # type: ignore[union-attr]
    return True
