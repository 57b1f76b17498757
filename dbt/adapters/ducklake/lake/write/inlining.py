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

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import pyarrow as pa

from ..catalog.state import load_inlined_tables
from ..read.scan import read_data_file
from ..records import TableInfo
from .datafiles import DataFileSpec
from .inlined_rows import INLINED_TYPES, OPTION, InlinedRows, inlined_stats, parse_limit

if TYPE_CHECKING:
    from .builder import CatalogBuilder


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


