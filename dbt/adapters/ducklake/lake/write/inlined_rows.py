"""What a commit writes for the small inserts it stores in the catalog (lake/write/inlining decides which): the rows'
record and statistics, the INSERTs into the inlined-data tables, a table's stored limit, and the staged files' removal
once the commit landed. Nothing here reads the commit's builder: the builder writes these statements and inlining
fills the records, so neither imports the other both ways."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from ..catalog.database import CatalogDB
from ..errors import InvalidOptionError
from ..paths import discard_files
from ..records import Column, ColumnStats, TableInfo
from ..types import format_value
from . import catalog_rows

OPTION = "data_inlining_row_limit"
# the column types whose values the writer inlines (top-level columns only); a table with any other column type
# keeps writing files (DuckDB inlines more types, e.g. nested ones, which its own text format carries)
INLINED_TYPES = {"boolean", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "float32", "float64",
                 "varchar", "date", "timestamp", "timestamptz"}


@dataclass
class InlinedRows:
    """The rows one commit inlines into one table: written after the inlined-data tables are created."""

    table: TableInfo
    target: str  # the inlined-data table's name
    row_id_start: int
    data: pa.Table  # the table's columns
    files: tuple[str, ...]  # the staged files they came from (removed once the commit landed)
    table_dir: str


def parse_limit(value: object) -> int:
    """A data_inlining_row_limit value (a non-negative integer). Raises ValueError naming the value."""
    try:
        limit = int(str(value).strip())
    except ValueError:
        limit = -1
    if limit < 0:
        raise InvalidOptionError(f"data_inlining_row_limit must be a non-negative integer (0 disables inlining), got {value!r}")
    return limit


def inlined_stats(info: TableInfo, data: pa.Table) -> list[ColumnStats]:
    """Per column, the stats DuckDB derives from inlined rows: counts, min/max as Value::ToString (NaN the
    greatest float), no NaN flag."""
    out = []
    for col in info.columns:
        arr = data.column(col.name)
        nulls = arr.null_count
        values = [v for v in arr.to_pylist() if v is not None]
        low = high = None
        if values:
            if col.type in ("float32", "float64") and any(v != v for v in values):
                high = "nan"
                finite = [v for v in values if v == v]
                low = format_value(col.type, min(finite), form="value") if finite else "nan"
            else:
                mm = pc.min_max(arr)
                low = format_value(col.type, mm["min"].as_py(), form="value")
                high = format_value(col.type, mm["max"].as_py(), form="value")
        out.append(ColumnStats(col.column_id, None, len(values), nulls, low, high, None))
    return out


def row_statements(db: CatalogDB, inlined: Sequence[InlinedRows], snapshot_id: int) -> list[tuple[str, Any]]:
    """The INSERTs of a commit's inlined rows, into inlined-data tables that exist by then."""
    out: list[tuple[str, Any]] = []
    sys = db.spec.inlined
    for rows in inlined:
        cols = rows.table.columns
        names = ", ".join('"' + c.name.replace('"', '""') + '"' for c in cols)
        binds = ", ".join(f":c{i}" for i in range(len(cols)))
        values = [rows.data.column(c.name).to_pylist() for c in cols]
        params = [{"r": rows.row_id_start + n, "s": snapshot_id,
                   **{f"c{i}": _param(db, c, values[i][n]) for i, c in enumerate(cols)}}
                  for n in range(rows.data.num_rows)]
        out.append((f"INSERT INTO {{p}}{rows.target} ({sys.row_id}, {sys.begin_snapshot}, {sys.end_snapshot}, "
                    f"{names}) VALUES (:r, :s, NULL, {binds})", params))
    return out


def _param(db: CatalogDB, col: Column, value: Any) -> Any:
    """A value as the backend's inlined-data column holds it: native on DuckDB; on SQLite and PostgreSQL, as the
    column the reference's metadata manager declares (dialect.inlined_column_type) takes it: DuckDB's text of the
    value where that is text."""
    if value is None:
        return None
    if db.location.backend == "duckdb":
        if col.type == "timestamptz" and isinstance(value, dt.datetime):
            return value.astimezone(dt.timezone.utc)
        return value
    declared = db.dialect.inlined_column_type(col)
    if declared in ("BIGINT", "INTEGER", "SMALLINT"):
        return int(value)
    if declared == "BOOLEAN":
        return bool(value)
    if declared in ("REAL", "DOUBLE PRECISION") or declared.startswith("NUMERIC"):
        return value
    if declared == "BYTEA":
        return value.encode() if isinstance(value, str) else bytes(value)
    return format_value(col.type, value, form="value")


def option_statements(db: CatalogDB, overrides: Mapping[tuple[str, str], int], tables: Iterable[TableInfo],
                      inserted: AbstractSet[int]) -> list[tuple[str, Any]]:
    """A limit given for a table a commit inserts into (`inserted`: the ids of the tables it inserts into or creates),
    stored as the table's option (DuckDB follows it too)."""
    if db.spec.versioned_options or not overrides:
        return []  # a 1.1 development catalog versions its options: not written here (lake.set_option says so)
    out: list[tuple[str, Any]] = []
    for info in tables:
        limit = overrides.get((info.schema_name.lower(), info.name.lower()))
        if limit is not None and info.table_id in inserted:
            out += catalog_rows.table_option(info.table_id, OPTION, str(limit))
    return out


def remove_inlined_files(rows: Sequence[InlinedRows]) -> None:
    """The staged files of inlined rows, once the commit that inlined them landed (nothing references them)."""
    for r in rows:
        discard_files(r.files, r.table_dir)
