"""Small inserts stored in the catalog (data inlining), as DuckDB 1.5 writes them.

DuckDB puts the rows of an INSERT of at most `data_inlining_row_limit` rows (the option of the table, else of its
schema, else of the lake) into the table's newest inlined-data table (`ducklake_inlined_data_<tid>_<schema_version>`)
instead of a Parquet file. Writers here stage every insert as files; at commit, an insert whose rows fit the limit
is read back from its (small) files and written as inlined rows, and the files are removed once the commit landed.
Deciding at commit keeps every reader of staged files (DML on a table created in the same unit, staged reads of a
write-audit-publish build) unchanged, and the limit is the one the catalog holds when the snapshot is written.

What the commit writes is what DuckDB writes for the same insert: rows with `row_id` from `next_row_id` and
`begin_snapshot` = the commit's snapshot; `next_row_id` and `record_count` advanced, `file_size_bytes` not;
table column stats widened by the rows' min/max (booleans 'true'/'false', no NaN flag); `next_file_id` advanced
once per table; `inlined_insert:<tid>` in the snapshot's changes. A table without an inlined-data table gets one
for the commit's schema version, which that bumps (with no schema_versions row).

Where the lake stores no option, DuckDB follows its ATTACH option DATA_INLINING_ROW_LIMIT, else its session's
`ducklake_default_data_inlining_row_limit` (10); neither is stored. Here the lake's `default_inlining_limit` plays the
ATTACH option (the dbt profile's `data_inlining_row_limit`); unset, an insert into such a lake is not inlined.
A stored option wins over it, as in DuckDB.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from ..catalog.state import load_inlined_tables
from ..errors import InvalidOptionError
from ..paths import discard_files
from ..read.scan import read_data_file
from ..records import Column, ColumnStats, TableInfo
from ..types import format_value
from . import catalog_rows
from .datafiles import DataFileSpec

if TYPE_CHECKING:
    from .builder import CatalogBuilder

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


def row_limit(b: CatalogBuilder, info: TableInfo, overrides: Mapping[tuple[str, str], int]) -> int:
    """The inlining limit of an insert into the table: the caller's limit for it, else the lake's option (table, then
    schema, then global scope), else the lake's default (DuckDB's ATTACH option), else 0."""
    key = (info.schema_name.lower(), info.name.lower())
    if key in overrides:
        return overrides[key]
    value = b.catalog.option(OPTION, info.table_id, info.schema_id)
    if value is None:
        return b.default_inlining_limit or 0
    return parse_limit(value)


def inlinable(b: CatalogBuilder, info: TableInfo) -> bool:
    """The reference's CanInlineColumns, narrowed to the types this writer inlines."""
    return b.can_inline(info) and all(c.type in INLINED_TYPES or c.type.startswith("decimal") for c in info.columns)


def take_small_insert(b: CatalogBuilder, info: TableInfo, files: Sequence[DataFileSpec],
                      overrides: Mapping[tuple[str, str], int], cache: dict[str, pa.Table]) -> list[DataFileSpec]:
    """Stage an insert's rows as inlined rows when they fit the table's limit; returns the files still to register
    (all of them when the insert is not inlined; an UPDATE's post-images always: they keep their row ids)."""
    small = [f for f in files if not f.has_row_ids]
    count = sum(f.record_count for f in small)
    if not count or count > row_limit(b, info, overrides) or not inlinable(b, info):
        return list(files)
    target = _target(b, info)
    if target is None:
        return list(files)
    data = pa.concat_tables([_read(f.path, info, cache) for f in small])
    delta = b.stats_delta(info.table_id)
    start = _next_row_id(b, info.table_id) + delta.rows_added
    delta.rows_added += count
    delta.record_count += count
    for st in inlined_stats(info, data):
        delta.file_stats.setdefault(st.column_id, []).append(st)
    b.file_id()  # DuckDB advances next_file_id once per table an insert inlines into
    b.changes.inlined_inserted.add(info.table_id)
    b.inlined_rows.append(InlinedRows(info, target, start, data, tuple(f.path for f in small), b.table_path(info)))
    return [f for f in files if f.has_row_ids]


def _target(b: CatalogBuilder, info: TableInfo) -> str | None:
    """The inlined-data table the rows go to (created by the commit when it has none), or None: keep files."""
    name = f"ducklake_inlined_data_{info.table_id}_{{}}"
    if info.table_id in b.created_table_ids:
        b.inlined_targets.add(info.table_id)
        return name.format(b.schema_version)
    if info.table_id in b.schema_version_tables:
        return None  # altered in this commit: the rows' shape is the old one's, DuckDB's is the new one's
    pending = next((r.target for r in b.inlined_rows if r.table.table_id == info.table_id), None)
    if pending is not None:
        return pending
    existing = load_inlined_tables(b.db, b.conn, info.table_id)
    if not existing:
        b.schema_changed = True  # DuckDB bumps the schema version for a table's first inlined-data table
        b.inlined_targets.add(info.table_id)
        return name.format(b.schema_version)
    newest = max(existing, key=lambda t: t.schema_version)
    shape = [(c.column_id, c.name, c.type) for c in info.columns]
    return newest.table_name if [(c.column_id, c.name, c.type) for c in newest.columns] == shape else None


def _read(path: str, info: TableInfo, cache: dict[str, pa.Table]) -> pa.Table:
    # kept per staged operation: a retried commit reads no file again
    if path not in cache:
        cache[path] = read_data_file(path, info.columns)
    return cache[path]


def _next_row_id(b: CatalogBuilder, table_id: int) -> int:
    stats = b.catalog.table_stats(table_id)
    return stats[1] if stats else 0


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


def row_statements(b: CatalogBuilder) -> list[tuple[str, Any]]:
    """The INSERTs of the commit's inlined rows, into inlined-data tables that exist by then."""
    out: list[tuple[str, Any]] = []
    sys = b.db.spec.inlined
    for rows in b.inlined_rows:
        cols = rows.table.columns
        names = ", ".join('"' + c.name.replace('"', '""') + '"' for c in cols)
        binds = ", ".join(f":c{i}" for i in range(len(cols)))
        values = [rows.data.column(c.name).to_pylist() for c in cols]
        params = [{"r": rows.row_id_start + n, "s": b.snapshot_id,
                   **{f"c{i}": _param(b, c, values[i][n]) for i, c in enumerate(cols)}}
                  for n in range(rows.data.num_rows)]
        out.append((f"INSERT INTO {{p}}{rows.target} ({sys.row_id}, {sys.begin_snapshot}, {sys.end_snapshot}, "
                    f"{names}) VALUES (:r, :s, NULL, {binds})", params))
    return out


def _param(b: CatalogBuilder, col: Column, value: Any) -> Any:
    """A value as the backend's inlined-data column holds it: native on DuckDB; on SQLite and PostgreSQL, as the
    column the reference's metadata manager declares (dialect.inlined_column_type) takes it: DuckDB's text of the
    value where that is text."""
    if value is None:
        return None
    if b.db.location.backend == "duckdb":
        if col.type == "timestamptz" and isinstance(value, dt.datetime):
            return value.astimezone(dt.timezone.utc)
        return value
    declared = b.db.dialect.inlined_column_type(col)
    if declared in ("BIGINT", "INTEGER", "SMALLINT"):
        return int(value)
    if declared == "BOOLEAN":
        return bool(value)
    if declared in ("REAL", "DOUBLE PRECISION") or declared.startswith("NUMERIC"):
        return value
    if declared == "BYTEA":
        return value.encode() if isinstance(value, str) else bytes(value)
    return format_value(col.type, value, form="value")


def option_statements(b: CatalogBuilder) -> list[tuple[str, Any]]:
    """A limit given for a table this commit inserts into, stored as the table's option (DuckDB follows it too)."""
    if b.db.spec.versioned_options or not b.inlining_overrides:
        return []  # a 1.1 development catalog versions its options: not written here (lake.set_option says so)
    out: list[tuple[str, Any]] = []
    inserted = b.changes.inserted_tables | b.changes.inlined_inserted
    for info in b.tables.values():
        limit = b.inlining_overrides.get((info.schema_name.lower(), info.name.lower()))
        if limit is not None and info.table_id in inserted | b.created_table_ids:
            out += catalog_rows.table_option(info.table_id, OPTION, str(limit))
    return out


def remove_inlined_files(rows: Sequence[InlinedRows]) -> None:
    """The staged files of inlined rows, once the commit that inlined them landed (nothing references them)."""
    for r in rows:
        discard_files(r.files, r.table_dir)
