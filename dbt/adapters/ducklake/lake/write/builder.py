"""Turns staged operations into the catalog rows of one snapshot, as the reference writes them.

A CatalogBuilder is the working catalog of one commit attempt (a CatalogView on the latest state, reading the
catalog through its connection) that also records, for each change, the statements of lake/catalog_rows and
lake/file_rows that write it. The operations replayed on a fresh builder give the rows of a retried commit.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from sqlalchemy.engine import Connection

from ..catalog.database import CatalogDB
from ..catalog.state import LakeState
from ..read.deletes import DeletePositions, read_delete_file
from ..records import Column, ColumnStats, DataFile, SchemaInfo, Snapshot, TableColumnStats, TableInfo, ViewInfo
from . import catalog_rows, file_rows, inlined_rows
from .catalog_view import CatalogReader, CatalogView, parent_of
from .delete_files import DeleteFileSpec
from .inlined_rows import InlinedRows
from .nested_fields import NestedChange

DEFAULT_INLINING_LIMIT = 10  # spec 1.0's default data_inlining_row_limit


class CatalogBuilder(CatalogView):
    """The working catalog of one commit attempt, and the statements that record it.

    Each change first goes through the view (validation and state), then adds its rows; a change made of others
    (drop_schema drops its tables first, create_table partitions after new_table) adds theirs as it makes them.
    """

    def __init__(self, db: CatalogDB, conn: Connection, latest: LakeState) -> None:
        self.catalog = CatalogReader(db, conn)
        super().__init__(latest, self.catalog)
        self.db = db
        self.conn = conn
        self.statements: list[tuple[str, Any]] = []
        self.now = dt.datetime.now(dt.timezone.utc)
        self.written_files: list[str] = []  # files this attempt wrote (removed if it fails)
        self._live_files: dict[int, list[DataFile]] = {}  # the latest snapshot's files, per table (see live_files)
        # small inserts this attempt writes as inlined rows (lake/write/inlining), and the tables that need a new
        # inlined-data table for them whatever their limit says
        self.inlined_rows: list[InlinedRows] = []
        self.inlined_targets: set[int] = set()
        # limits of data_inlining_row_limit given by the transaction for single tables, by (schema, table)
        self.inlining_overrides: dict[tuple[str, str], int] = {}
        # the limit where the catalog stores none (DuckLake.default_inlining_limit: DuckDB's ATTACH option)
        self.default_inlining_limit: int | None = None
        # delete files written before the catalog transaction (see delete_files), kept by the transaction across
        # attempts, and the ones this attempt needs that were not written
        self.written_deletes: dict[DeleteFileSpec, tuple[str, int, int]] = {}
        self.unwritten_deletes: list[DeleteFileSpec] = []
        self.read_deletes_cache: dict[tuple[str, int], DeletePositions] = {}

    # statements ----------------------------------------------------------------------------------------------
    def add_rows(self, statement: tuple[str, Any]) -> None:
        """A many-row statement of one catalog table (lake/catalog_rows, lake/file_rows), left out without rows."""
        if statement[1]:
            self.add(*statement)

    def add(self, sql: str, params: Any = None) -> None:
        self.statements.append((sql, params))

    def delete_file(self, spec: DeleteFileSpec) -> tuple[str, int, int] | None:
        """(path, size, footer size) of the delete file written for spec; None, noted, if none was."""
        written = self.written_deletes.get(spec)
        if written is None:
            self.unwritten_deletes.append(spec)
            return None
        self.written_files.append(written[0])
        return written

    def read_deletes(self, path: str, begin_snapshot: int) -> DeletePositions:
        """A delete file's positions, read once per transaction."""
        key = (path, begin_snapshot)
        if key not in self.read_deletes_cache:
            self.read_deletes_cache[key] = read_delete_file(path, begin_snapshot)
        return self.read_deletes_cache[key]

    def live_files(self, table_id: int) -> list[DataFile]:
        """The table's data files in the latest snapshot (read once per commit attempt)."""
        if table_id not in self._live_files:
            self._live_files[table_id] = self.catalog.live_files(self.latest, self.table_by_id(table_id))
        return self._live_files[table_id]

    # schemas -----------------------------------------------------------------------------------------------
    def create_schema(self, name: str) -> SchemaInfo:
        info = super().create_schema(name)
        self.add(*catalog_rows.schema(self.db.dialect, info, self.snapshot_id))
        return info

    def drop_schema(self, name: str, cascade: bool) -> None:
        schema_id = self.schema(name).schema_id
        super().drop_schema(name, cascade)  # its tables' and views' rows first
        self.add(*catalog_rows.end_schema(schema_id, self.snapshot_id))

    # tables --------------------------------------------------------------------------------------------------
    def new_table(self, schema: str, name: str, columns: Sequence[Column], keep_column_ids: bool) -> TableInfo:
        info = super().new_table(schema, name, columns, keep_column_ids)
        self.add(*catalog_rows.table(self.db.dialect, info, self.snapshot_id))
        self.insert_columns(info.table_id, info.columns)
        return info

    def insert_columns(self, table_id: int, columns: Sequence[Column]) -> None:
        """The ducklake_column rows of new top-level columns and their children, in one statement."""
        rows: list[catalog_rows.ColumnRow] = []

        def walk(col: Column, parent_id: int | None) -> None:
            rows.append(catalog_rows.ColumnRow.of(table_id, col, parent_id))
            for child in col.children:
                walk(child, col.column_id)

        for c in columns:
            walk(c, None)
        self.add_rows(catalog_rows.columns(self.db.dialect, rows, self.snapshot_id))

    def drop_table(self, info: TableInfo) -> None:
        super().drop_table(info)
        tid, sid = info.table_id, self.snapshot_id
        for statement in (catalog_rows.end_table(tid, sid), catalog_rows.end_partition_info(tid, sid),
                          catalog_rows.end_columns(tid, sid), catalog_rows.end_column_tags(tid, sid),
                          file_rows.end_data_files(sid, table_id=tid), file_rows.end_delete_files(sid, table_id=tid),
                          catalog_rows.end_sort_info(tid, sid), catalog_rows.end_tags(tid, sid)):
            self.add(*statement)

    def rename_table(self, info: TableInfo, new_name: str) -> TableInfo:
        new = super().rename_table(info, new_name)
        self.add(*catalog_rows.end_table(info.table_id, self.snapshot_id))
        self.add(*catalog_rows.table(self.db.dialect, new, self.snapshot_id))
        return new

    def set_partitioning(self, info: TableInfo, fields: Sequence[tuple[str, str]] | None) -> TableInfo:
        new = super().set_partitioning(info, fields)
        if info.partition is not None:
            self.add(*catalog_rows.end_partition_info(info.table_id, self.snapshot_id))
        if new.partition is not None:
            self.add(*catalog_rows.partition_info(info.table_id, new.partition, self.snapshot_id))
            self.add(*catalog_rows.partition_columns(info.table_id, new.partition))
        return new

    def set_sorted_by(self, info: TableInfo, keys: Sequence[str] | None) -> TableInfo:
        new = super().set_sorted_by(info, keys)
        if info.sort is not None:
            self.add(*catalog_rows.end_sort_info(info.table_id, self.snapshot_id))
        if new.sort is not None:
            self.add(*catalog_rows.sort_info(info.table_id, new.sort, self.snapshot_id))
            self.add_rows(catalog_rows.sort_expressions(info.table_id, new.sort))
        return new

    def set_table_options(self, info: TableInfo, options: dict[str, str]) -> None:
        """Table-scope options, as set_option(..., table_name => ...) writes them (no snapshot of their own)."""
        for name, value in sorted(options.items()):
            self.add(*catalog_rows.delete_option(name, "table", info.table_id))
            self.add(*catalog_rows.option(name, value, "table", info.table_id))

    # columns -------------------------------------------------------------------------------------------------
    def add_column(self, info: TableInfo, column: Column) -> TableInfo:
        new = super().add_column(info, column)
        self.insert_columns(info.table_id, new.columns[-1:])
        return new

    def drop_column(self, info: TableInfo, name: str) -> TableInfo:
        new = super().drop_column(info, name)
        for col in info.column(name).walk():
            self.add(*catalog_rows.end_columns(info.table_id, self.snapshot_id, col.column_id))
        return new

    def change_nested_column(self, info: TableInfo, change: NestedChange) -> TableInfo:
        """End the rows of the fields that change and begin theirs, with the reference's flags (nested_fields)."""
        out = super().change_nested_column(info, change)
        for column_id in change.ended:
            self.add(*catalog_rows.end_columns(info.table_id, self.snapshot_id, column_id))
        rows = [catalog_rows.ColumnRow(info.table_id, r.column.column_id, r.column.column_id, r.column.name,
                                       r.column.type, None, "NULL", r.nulls_allowed, r.parent, r.default_value_type)
                for r in change.rows]
        self.add_rows(catalog_rows.columns(self.db.dialect, rows, self.snapshot_id))
        return out

    def replace_column(self, info: TableInfo, old: Column, new: Column) -> TableInfo:
        """End a column's row and insert its new version (same id): rename, type, default, nullability."""
        out = super().replace_column(info, old, new)
        self.add(*catalog_rows.end_columns(info.table_id, self.snapshot_id, old.column_id))
        row = catalog_rows.ColumnRow.of(info.table_id, new, parent_of(info.columns, old.column_id))
        self.add(*catalog_rows.columns(self.db.dialect, row, self.snapshot_id))
        return out

    # views ---------------------------------------------------------------------------------------------------
    def create_view(self, schema: str, name: str, sql: str, dialect: str, aliases: Sequence[str]) -> ViewInfo:
        info = super().create_view(schema, name, sql, dialect, aliases)
        self.add(*catalog_rows.view(self.db.dialect, info, self.snapshot_id))
        return info

    def drop_view(self, info: ViewInfo) -> None:
        super().drop_view(info)
        self.add(*catalog_rows.end_view(info.view_id, self.snapshot_id))
        self.add(*catalog_rows.end_tags(info.view_id, self.snapshot_id))
        if self.db.spec.view_column_tags:
            self.add(*catalog_rows.end_view_column_tags(info.view_id, self.snapshot_id))

    def rename_view(self, info: ViewInfo, new_name: str) -> ViewInfo:
        new = super().rename_view(info, new_name)
        self.add(*catalog_rows.end_view(info.view_id, self.snapshot_id))
        self.add(*catalog_rows.view(self.db.dialect, new, self.snapshot_id))
        return new

    # comments and tags ---------------------------------------------------------------------------------------
    def set_tag(self, object_id: int, key: str, value: str | None, is_view: bool) -> None:
        super().set_tag(object_id, key, value, is_view)
        self.add(*catalog_rows.end_tags(object_id, self.snapshot_id, key))
        if value is not None:
            self.add(*catalog_rows.tag(object_id, key, value, self.snapshot_id))

    def set_column_tag(self, info: TableInfo, column_id: int, key: str, value: str | None) -> None:
        super().set_column_tag(info, column_id, key, value)
        self.add(*catalog_rows.end_column_tags(info.table_id, self.snapshot_id, (column_id, key)))
        if value is not None:
            self.add(*catalog_rows.column_tag(info.table_id, column_id, key, value, self.snapshot_id))

    def set_view_column_tag(self, info: ViewInfo, column: str, key: str, value: str | None) -> None:
        super().set_view_column_tag(info, column, key, value)
        self.add(*catalog_rows.end_view_column_tags(info.view_id, self.snapshot_id, (column, key)))
        if value is not None:
            self.add(*catalog_rows.view_column_tag(info.view_id, column, key, value, self.snapshot_id))

    # files ---------------------------------------------------------------------------------------------------
    def file_details(self, file_id: int, table_id: int, stats: Sequence[ColumnStats],
                     partition_values: Sequence[str | None]) -> None:
        """The ducklake_file_column_stats and ducklake_file_partition_value rows of one data file."""
        self.add_rows(file_rows.column_stats(self.db.dialect, [(file_id, table_id, st) for st in stats]))
        self.add_rows(file_rows.partition_values([(file_id, table_id, partition_values)]))

    def schedule_for_deletion(self, files: Sequence[tuple[int, str]]) -> None:
        """ducklake_files_scheduled_for_deletion rows of (file id, absolute path) pairs, scheduled now."""
        self.add_rows(file_rows.scheduled_for_deletion(self.db.dialect, files, self.latest.data_path, self.now))

    # the snapshot --------------------------------------------------------------------------------------------
    def record(self, author: str | None, message: str | None, extra: str | None) -> Snapshot:
        """The snapshot this attempt writes, as the catalog will have it."""
        return Snapshot(snapshot_id=self.snapshot_id, snapshot_time=self.now, schema_version=self.schema_version,
                        next_catalog_id=self.next_catalog_id, next_file_id=self.next_file_id,
                        changes_made=self.changes.render(), author=author, commit_message=message,
                        commit_extra_info=extra)

    def finish(self, author: str | None, message: str | None, extra: str | None) -> list[tuple[str, Any]]:
        """The complete statement list: snapshot row, change rows, stats, schema versions, snapshot changes."""
        snap = self.record(author, message, extra)
        out: list[tuple[str, Any]] = [catalog_rows.snapshot(self.db.dialect, snap)]
        out += self.statements
        out += self.stats_statements()
        out += self.inlined_table_statements()
        out += inlined_rows.row_statements(self.db, self.inlined_rows, self.snapshot_id)
        inserted = self.changes.inserted_tables | self.changes.inlined_inserted | self.created_table_ids
        out += inlined_rows.option_statements(self.db, self.inlining_overrides, self.tables.values(), inserted)
        if self.schema_version_tables:
            out.append(catalog_rows.schema_versions(self.snapshot_id, self.schema_version,
                                                    sorted(self.schema_version_tables)))
        out.append(catalog_rows.snapshot_changes(snap))
        return coalesce(out)

    def inlined_table_statements(self) -> list[tuple[str, Any]]:
        """An empty inlined-data table for every table this commit creates or alters, as the reference makes them.

        DuckDB inserts small batches into a table's newest inlined-data table; without one for the new schema
        version it would write rows of the new shape into the old one.
        """
        out: list[tuple[str, Any]] = []
        tables = [self.table_by_id(t) for t in sorted(self.schema_version_tables | self.inlined_targets)
                  if t not in self.changes.dropped_tables and any(i.table_id == t for i in self.tables.values())]
        if not tables:
            return out
        default = DEFAULT_INLINING_LIMIT if self.default_inlining_limit is None else self.default_inlining_limit
        for info in tables:
            limit = self.catalog.option(inlined_rows.OPTION, info.table_id, info.schema_id)
            if limit is None:
                limit = str(default)
            if info.table_id not in self.inlined_targets and (int(limit) <= 0 or not self.can_inline(info)):
                continue
            name = f"ducklake_inlined_data_{info.table_id}_{self.schema_version}"
            cols = ", ".join(
                '"' + c.name.replace('"', '""') + '" ' + self.db.dialect.inlined_column_type(c) for c in info.columns
            )
            out.append(catalog_rows.inlined_data_tables(info.table_id, name, self.schema_version))
            sys = self.db.spec.inlined
            out.append((f"CREATE TABLE IF NOT EXISTS {{p}}{name}({sys.row_id} BIGINT, {sys.begin_snapshot} BIGINT, "
                        f"{sys.end_snapshot} BIGINT, {cols})", None))
        return out

    def can_inline(self, info: TableInfo) -> bool:
        """The reference's CanInlineColumns: no system column names, names the backend can hold, inlinable types."""
        for col in info.columns:
            if self.db.spec.inlined.is_reserved(col.name):
                return False
            if len(col.name) > self.db.dialect.max_identifier_length:
                return False
            if any(n.type in ("geometry", "variant") for n in col.walk()):
                return False
        return True

    def stats_statements(self) -> list[tuple[str, Any]]:
        out: list[tuple[str, Any]] = []
        dialect = self.db.dialect
        for tid, delta in sorted(self.stats.items()):
            if tid in self.changes.dropped_tables:
                continue
            current = self.catalog.table_stats(tid)
            if current is None:
                out.append(catalog_rows.table_stats(catalog_rows.TableStatsRow(
                    tid, delta.record_count, delta.rows_added, delta.file_size_bytes)))
                known = [self.fold(tid, cid, None, files) for cid, files in sorted(delta.file_stats.items())
                         if cid not in delta.unknown_bounds]
                if known:
                    out.append(catalog_rows.table_column_stats(dialect, known))
                continue
            rc, nr, fs = current
            out.append(catalog_rows.update_table_stats(catalog_rows.TableStatsRow(
                tid, rc + delta.record_count, nr + delta.rows_added, fs + delta.file_size_bytes)))
            existing = self.catalog.table_column_stats(tid)
            updates: list[TableColumnStats] = []
            for cid, files in sorted(delta.file_stats.items()):
                if cid not in existing:
                    continue  # like the reference: columns added after the stats row was made get no row
                merged = self.fold(tid, cid, existing[cid], files)
                if cid in delta.unknown_bounds:
                    # NULL bounds read as "no values yet" to DuckDB's next merge, which would then narrow the range
                    # below the data; without a row, the reference never narrows (it only updates existing rows)
                    out.append(catalog_rows.delete_table_column_stats(tid, cid))
                    continue
                updates.append(replace(merged, table_id=tid, column_id=cid))
            if updates:
                out.append(catalog_rows.update_table_column_stats(dialect, updates))
        return out

    def fold(self, table_id: int, column_id: int, start: TableColumnStats | None,
             files: list[ColumnStats]) -> TableColumnStats:
        """Table-level stats widened by each file's stats, as the reference merges them."""
        from .stats import merge_table_column_stats

        type_ = self.column_type(table_id, column_id)
        current = start
        for st in files:
            current = merge_table_column_stats(current, st, type_, table_id=table_id)
        assert current is not None
        return current

    def column_type(self, table_id: int, column_id: int) -> str:
        return self.table_by_id(table_id).column_by_id(column_id).type


def coalesce(statements: Sequence[tuple[str, Any]]) -> list[tuple[str, Any]]:
    """Adjacent runs of one statement (e.g. a delete-file row per DeleteRows) merged into one many-row statement.

    The same rows in the same order: a many-row statement runs as its rows one after the other, but it is one call,
    which a DuckDB catalog turns into one INSERT from Arrow (catalog.execute).
    """
    out: list[tuple[str, Any]] = []
    for sql, params in statements:
        rows = _param_rows(params)
        prev = _param_rows(out[-1][1]) if out and out[-1][0] == sql else None
        if rows and prev:
            out[-1] = (sql, prev + rows)
        else:
            out.append((sql, params))
    return out


def _param_rows(params: Any) -> list[dict[str, Any]] | None:
    if isinstance(params, dict):
        return [params]
    return list(params) if isinstance(params, list) else None
