"""Turns staged operations into the catalog rows of one snapshot, as the reference writes them.

A CatalogBuilder starts from the latest state of the lake and the counters of its latest snapshot. Each operation
validates itself against the builder's working catalog and appends SQL statements; the same operations replayed on a
fresh builder give the rows of a retried commit.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from sqlalchemy.engine import Connection

from . import file_rows
from .catalog import CatalogDB
from .errors import (
    NoSuchSchemaError,
    NoSuchTableError,
    SchemaExistsError,
    TableExistsError,
)
from .paths import table_directory, uuid7
from .records import Column, ColumnStats, DataFile, SchemaInfo, TableColumnStats, TableInfo, ViewInfo
from .state import LakeState, ci_lookup, load_files

DEFAULT_INLINING_LIMIT = 10  # spec 1.0's default data_inlining_row_limit


def quote(name: str) -> str:
    """A name in a change string: double-quoted, '"' doubled (DuckDB's KeywordHelper::WriteQuoted)."""
    return '"' + name.replace('"', '""') + '"'


@dataclass
class ChangeSet:
    """What a commit changed, in the categories DuckDB's change strings and conflict rules use."""

    created_schemas: list[str] = field(default_factory=list)
    dropped_schemas: set[int] = field(default_factory=set)
    created_tables: list[tuple[str, str, bool]] = field(default_factory=list)  # (schema, name, is_view)
    dropped_tables: set[int] = field(default_factory=set)
    dropped_views: set[int] = field(default_factory=set)
    inserted_tables: set[int] = field(default_factory=set)
    deleted_tables: set[int] = field(default_factory=set)
    altered_tables: set[int] = field(default_factory=set)
    altered_views: set[int] = field(default_factory=set)
    inlined_inserted: set[int] = field(default_factory=set)
    inlined_deleted: set[int] = field(default_factory=set)
    inline_flushed: set[int] = field(default_factory=set)  # maintenance: flush_inlined_data
    merged_adjacent: set[int] = field(default_factory=set)  # maintenance: merge_adjacent_files
    deleted_files: set[int] = field(default_factory=set)  # data files we delete rows from (for conflict checks)
    # for conflict checks only: names of schemas we drop, ids of existing schemas we create entries in
    dropped_schema_names: set[str] = field(default_factory=set)
    created_in_schemas: set[int] = field(default_factory=set)

    def render(self) -> str:
        """The ducklake_snapshot_changes.changes_made string, in the reference's order."""
        parts = [f"dropped_schema:{i}" for i in sorted(self.dropped_schemas)]
        parts += [f"dropped_table:{i}" for i in sorted(self.dropped_tables)]
        parts += [f"dropped_view:{i}" for i in sorted(self.dropped_views)]
        parts += [f"created_schema:{quote(s)}" for s in self.created_schemas]
        parts += [
            f"created_{'view' if is_view else 'table'}:{quote(s)}.{quote(n)}" for s, n, is_view in self.created_tables
        ]
        parts += [f"inserted_into_table:{i}" for i in sorted(self.inserted_tables)]
        parts += [f"deleted_from_table:{i}" for i in sorted(self.deleted_tables)]
        parts += [f"altered_table:{i}" for i in sorted(self.altered_tables)]
        parts += [f"altered_view:{i}" for i in sorted(self.altered_views)]
        parts += [f"inlined_insert:{i}" for i in sorted(self.inlined_inserted)]
        parts += [f"inlined_delete:{i}" for i in sorted(self.inlined_deleted)]
        parts += [f"inline_flush:{i}" for i in sorted(self.inline_flushed)]
        parts += [f"merge_adjacent:{i}" for i in sorted(self.merged_adjacent)]
        return ",".join(parts)

    @property
    def empty(self) -> bool:
        return not self.render()

    def without_created(self, table_ids: set[int], view_ids: set[int]) -> ChangeSet:
        """A copy without the ids of tables and views this transaction creates, for conflict checks: they are
        provisional (a retry gives them fresh ids), and another writer's object may hold the same id meanwhile."""
        out = replace(self)
        for name in ("inserted_tables", "deleted_tables", "altered_tables", "inlined_inserted", "inlined_deleted",
                     "dropped_tables"):
            setattr(out, name, getattr(self, name) - table_ids)
        for name in ("altered_views", "dropped_views"):
            setattr(out, name, getattr(self, name) - view_ids)
        return out


@dataclass
class StatsDelta:
    """Changes to one table's ducklake_table_stats / ducklake_table_column_stats rows."""

    record_count: int = 0
    file_size_bytes: int = 0
    rows_added: int = 0  # next_row_id advance
    file_stats: dict[int, list[ColumnStats]] = field(default_factory=dict)  # per column, in file order
    unknown_bounds: set[int] = field(default_factory=set)  # columns with values whose min/max are not known


class CatalogBuilder:
    """The working catalog of one commit attempt, and the statements that record it."""

    def __init__(self, db: CatalogDB, conn: Connection, latest: LakeState) -> None:
        self.db = db
        self.conn = conn
        self.latest = latest
        snap = latest.snapshot
        self.snapshot_id = snap.snapshot_id + 1
        self.base_schema_version = snap.schema_version
        self.next_catalog_id = snap.next_catalog_id
        self.next_file_id = snap.next_file_id
        self.schemas: dict[str, SchemaInfo] = dict(latest.schemas)
        self.tables: dict[tuple[str, str], TableInfo] = dict(latest.tables)
        self.views: dict[tuple[str, str], ViewInfo] = dict(latest.views)
        self.statements: list[tuple[str, Any]] = []
        self.changes = ChangeSet()
        self.schema_changed = False
        self.schema_version_tables: set[int] = set()  # tables that get a ducklake_schema_versions row
        self.stats: dict[int, StatsDelta] = {}
        self.now = dt.datetime.now(dt.timezone.utc)
        self.written_files: list[str] = []  # files this attempt wrote (removed if it fails)
        self.created_table_ids: set[int] = set()
        self.created_view_ids: set[int] = set()
        self._assigned_column_ids: dict[int, list[int]] = {}  # column ids given out by this commit, per table
        self._live_files: dict[int, list[DataFile]] = {}  # the latest snapshot's files, per table (see live_files)

    # ids and statements ------------------------------------------------------------------------------------
    def catalog_id(self) -> int:
        cid = self.next_catalog_id
        self.next_catalog_id += 1
        return cid

    def file_id(self) -> int:
        fid = self.next_file_id
        self.next_file_id += 1
        return fid

    def add_rows(self, statement: file_rows.Statement) -> None:
        """A many-row INSERT of one catalog table (lake/file_rows), left out when it has no rows."""
        if statement[1]:
            self.add(*statement)

    def add(self, sql: str, params: Any = None) -> None:
        self.statements.append((sql, params))

    def end_rows(self, table: str, where: str, params: dict[str, Any]) -> None:
        """Set end_snapshot on the live rows of a catalog table that match."""
        self.add(
            f"UPDATE {{p}}{table} SET end_snapshot = :sid WHERE end_snapshot IS NULL AND {where}",
            {**params, "sid": self.snapshot_id},
        )

    def ddl_change(self, table_id: int | None = None, schema_row: bool = True) -> None:
        """Record a schema change: a new schema_version, and a schema_versions row for the table if asked."""
        self.schema_changed = True
        if table_id is not None and schema_row:
            self.schema_version_tables.add(table_id)

    @property
    def schema_version(self) -> int:
        return self.base_schema_version + (1 if self.schema_changed else 0)

    # lookups -------------------------------------------------------------------------------------------------
    def schema(self, name: str) -> SchemaInfo:
        found = ci_lookup(self.schemas, name)
        if found is None:
            raise NoSuchSchemaError(f"schema {name!r} does not exist")
        return found

    def table(self, schema: str, name: str) -> TableInfo:
        found = ci_lookup(self.tables, (schema, name))
        if found is None:
            raise NoSuchTableError(f"table {schema}.{name} does not exist")
        return found

    def table_by_id(self, table_id: int) -> TableInfo:
        for t in self.tables.values():
            if t.table_id == table_id:
                return t
        raise NoSuchTableError(f"table id {table_id} does not exist (was it dropped by another writer?)")

    def table_path(self, info: TableInfo) -> str:
        """The directory of a table as this builder has it (its schema may be created in this transaction)."""
        schema = next(s for s in self.schemas.values() if s.schema_id == info.schema_id)
        return table_directory(self.latest.data_path, schema, info)

    def live_files(self, table_id: int) -> list[DataFile]:
        """The table's data files in the latest snapshot (read once per commit attempt)."""
        if table_id not in self._live_files:
            self._live_files[table_id] = load_files(self.db, self.conn, self.latest, self.table_by_id(table_id))
        return self._live_files[table_id]

    def view(self, schema: str, name: str) -> ViewInfo:
        found = ci_lookup(self.views, (schema, name))
        if found is None:
            raise NoSuchTableError(f"view {schema}.{name} does not exist")
        return found

    def check_free(self, schema: str, name: str) -> None:
        if ci_lookup(self.tables, (schema, name)) is not None:
            raise TableExistsError(f"table {schema}.{name} already exists")
        if ci_lookup(self.views, (schema, name)) is not None:
            raise TableExistsError(f"a view {schema}.{name} already exists")

    def note_created_in(self, schema: SchemaInfo) -> None:
        if schema.begin_snapshot < self.snapshot_id:  # an existing schema another writer could drop
            self.changes.created_in_schemas.add(schema.schema_id)

    # schemas -----------------------------------------------------------------------------------------------
    def create_schema(self, name: str) -> SchemaInfo:
        if ci_lookup(self.schemas, name) is not None:
            raise SchemaExistsError(f"schema {name!r} already exists")
        sid = self.catalog_id()
        info = SchemaInfo(sid, str(uuid7()), name, name + "/", True, self.snapshot_id)
        self.add(
            "INSERT INTO {p}ducklake_schema VALUES (:id, :u, :sid, NULL, :n, :path, :rel)",
            {"id": sid, "u": self.db.dialect.uuid_param(info.schema_uuid), "sid": self.snapshot_id, "n": name,
             "path": info.path, "rel": self.db.dialect.bool_param(True)},
        )
        self.schemas[name] = info
        self.changes.created_schemas.append(name)
        self.ddl_change()
        return info

    def drop_schema(self, name: str, cascade: bool) -> None:
        info = self.schema(name)
        members = [t for t in self.tables.values() if t.schema_id == info.schema_id]
        views = [v for v in self.views.values() if v.schema_id == info.schema_id]
        if (members or views) and not cascade:
            names = ", ".join(sorted([t.name for t in members] + [v.name for v in views]))
            raise SchemaExistsError(f"schema {info.name!r} is not empty ({names}); drop it with cascade")
        for t in members:
            self.drop_table(t)
        for v in views:
            self.drop_view(v)
        self.end_rows("ducklake_schema", "schema_id = :id", {"id": info.schema_id})
        del self.schemas[info.name]
        if info.name in self.changes.created_schemas:  # created and dropped in this transaction: nothing to say
            self.changes.created_schemas.remove(info.name)
        else:
            self.changes.dropped_schemas.add(info.schema_id)
            self.changes.dropped_schema_names.add(info.name)
        self.ddl_change()

    # tables --------------------------------------------------------------------------------------------------
    def create_table(
        self, schema: str, name: str, columns: Sequence[Column], partition: Sequence[tuple[str, str]] | None,
        keep_column_ids: bool = False,
    ) -> TableInfo:
        s = self.schema(schema)
        self.check_free(s.name, name)
        tid = self.catalog_id()
        # a clone keeps its source's column ids: its files carry them as field ids
        cols = tuple(columns) if keep_column_ids else assign_column_ids(columns, 1)
        info = TableInfo(tid, str(uuid7()), s.schema_id, s.name, name, name + "/", True, self.snapshot_id, cols)
        self.add(
            "INSERT INTO {p}ducklake_table VALUES (:id, :u, :sid, NULL, :schema, :n, :path, :rel)",
            {"id": tid, "u": self.db.dialect.uuid_param(info.table_uuid), "sid": self.snapshot_id,
             "schema": s.schema_id, "n": name, "path": info.path, "rel": self.db.dialect.bool_param(True)},
        )
        self.insert_columns(tid, cols, None)
        self.tables[(s.name, name)] = info
        self.created_table_ids.add(tid)
        self.changes.created_tables.append((s.name, name, False))
        self.note_created_in(s)
        self.ddl_change(tid)
        if partition:
            info = self.set_partitioning(info, partition)
        return info

    def insert_columns(self, table_id: int, columns: Sequence[Column], parent: int | None) -> None:
        rows: list[dict[str, Any]] = []

        def walk(col: Column, parent_id: int | None) -> None:
            rows.append(self.column_row(table_id, col, parent_id))
            for child in col.children:
                walk(child, col.column_id)

        for c in columns:
            walk(c, parent)
        if rows:
            self.add(
                "INSERT INTO {p}ducklake_column VALUES (:cid, :sid, NULL, :tid, :ord, :name, :type, :init, :dflt, "
                ":nulls, :parent, :dtype, 'duckdb')",
                rows,
            )

    def column_row(self, table_id: int, col: Column, parent: int | None) -> dict[str, Any]:
        return {
            "cid": col.column_id, "sid": self.snapshot_id, "tid": table_id, "ord": col.column_id, "name": col.name,
            "type": col.type, "init": col.initial_default,
            "dflt": col.default_value if col.default_value is not None else "NULL",
            "nulls": self.db.dialect.bool_param(col.nullable), "parent": parent,
            "dtype": "" if col.is_nested else "literal",
        }

    def replace_table(self, old: TableInfo, new: TableInfo) -> TableInfo:
        del self.tables[(old.schema_name, old.name)]
        self.tables[(new.schema_name, new.name)] = new
        return new

    def drop_table(self, info: TableInfo) -> None:
        for catalog_table in ("ducklake_table", "ducklake_partition_info", "ducklake_column", "ducklake_column_tag",
                              "ducklake_data_file", "ducklake_delete_file", "ducklake_sort_info"):
            self.end_rows(catalog_table, "table_id = :id", {"id": info.table_id})
        self.end_rows("ducklake_tag", "object_id = :id", {"id": info.table_id})
        del self.tables[(info.schema_name, info.name)]
        if info.table_id in self.created_table_ids:  # created and dropped in this transaction
            self.changes.created_tables = [c for c in self.changes.created_tables
                                           if (c[0], c[1], c[2]) != (info.schema_name, info.name, False)]
        else:
            self.changes.dropped_tables.add(info.table_id)
        self.ddl_change()

    def rename_table(self, info: TableInfo, new_name: str) -> TableInfo:
        self.check_free(info.schema_name, new_name)
        self.end_rows("ducklake_table", "table_id = :id", {"id": info.table_id})
        self.add(
            "INSERT INTO {p}ducklake_table VALUES (:id, :u, :sid, NULL, :schema, :n, :path, :rel)",
            {"id": info.table_id, "u": self.db.dialect.uuid_param(info.table_uuid), "sid": self.snapshot_id,
             "schema": info.schema_id, "n": new_name, "path": info.path,
             "rel": self.db.dialect.bool_param(info.path_is_relative)},
        )
        self.changes.created_tables.append((info.schema_name, new_name, False))
        self.ddl_change(info.table_id)
        return self.replace_table(info, replace(info, name=new_name))

    def set_partitioning(self, info: TableInfo, fields: Sequence[tuple[str, str]] | None) -> TableInfo:
        if info.partition is not None:
            self.end_rows("ducklake_partition_info", "table_id = :id", {"id": info.table_id})
        spec = None
        if fields:
            from .partitioning import validate_transform
            from .records import PartitionField, PartitionSpec

            pf = tuple(
                PartitionField(i, info.column(c).column_id, validate_transform(info.column(c), t))
                for i, (c, t) in enumerate(fields)
            )
            pid = self.catalog_id()
            spec = PartitionSpec(pid, pf)
            self.add(
                "INSERT INTO {p}ducklake_partition_info VALUES (:pid, :tid, :sid, NULL)",
                {"pid": pid, "tid": info.table_id, "sid": self.snapshot_id},
            )
            self.add(
                "INSERT INTO {p}ducklake_partition_column VALUES (:pid, :tid, :k, :cid, :tr)",
                [{"pid": pid, "tid": info.table_id, "k": f.key_index, "cid": f.column_id, "tr": f.transform}
                 for f in pf],
            )
        self.altered(info.table_id)
        return self.replace_table(info, replace(info, partition=spec))

    def altered(self, table_id: int, schema_row: bool = True) -> None:
        # also for a table created in this commit, as the reference writes it (created_table:…,altered_table:<id>)
        self.changes.altered_tables.add(table_id)
        self.ddl_change(table_id, schema_row)

    # columns -------------------------------------------------------------------------------------------------
    def next_column_id(self, info: TableInfo) -> int:
        """The id a new column gets: above every id the table ever had, dropped columns' included, as the
        reference's GetNextColumnId (a reused id would map old files' data of a dropped column to the new one)."""
        top = info.max_column_id()
        if self.conn is not None and info.table_id not in self.created_table_ids:
            rows = self.db.query(self.conn, "SELECT max(column_id) FROM {p}ducklake_column WHERE table_id = :t",
                                 {"t": info.table_id})
            top = max(top, rows[0][0] or 0)
        top = max([top, *self._assigned_column_ids.get(info.table_id, [])])
        return top + 1

    def add_column(self, info: TableInfo, column: Column) -> TableInfo:
        if any(c.name.lower() == column.name.lower() for c in info.columns):
            raise TableExistsError(f"table {info.schema_name}.{info.name} already has a column {column.name!r}")
        (col,) = assign_column_ids([column], self.next_column_id(info))
        self._assigned_column_ids.setdefault(info.table_id, []).extend(c.column_id for c in col.walk())
        self.insert_columns(info.table_id, [col], None)
        self.altered(info.table_id)
        return self.replace_table(info, replace(info, columns=info.columns + (col,)))

    def drop_column(self, info: TableInfo, name: str) -> TableInfo:
        col = info.column(name)
        if len(info.columns) == 1:
            from .errors import SchemaEvolutionError

            raise SchemaEvolutionError(f"cannot drop {name!r}: it is the only column of {info.schema_name}.{info.name}")
        if info.partition and any(f.column_id == col.column_id for f in info.partition.fields):
            from .errors import SchemaEvolutionError

            raise SchemaEvolutionError(f"cannot drop {name!r}: table {info.name} is partitioned by it")
        ids = [c.column_id for c in col.walk()]
        for cid in ids:
            self.end_rows("ducklake_column", "table_id = :t AND column_id = :c", {"t": info.table_id, "c": cid})
        self.altered(info.table_id)
        return self.replace_table(info, replace(info, columns=tuple(c for c in info.columns if c is not col)))

    def replace_column(self, info: TableInfo, old: Column, new: Column) -> TableInfo:
        """End a column's row and insert its new version (same id): rename, type, default, nullability."""
        self.end_rows("ducklake_column", "table_id = :t AND column_id = :c", {"t": info.table_id, "c": old.column_id})
        parent = _parent_of(info.columns, old.column_id)
        self.add(
            "INSERT INTO {p}ducklake_column VALUES (:cid, :sid, NULL, :tid, :ord, :name, :type, :init, :dflt, "
            ":nulls, :parent, :dtype, 'duckdb')",
            self.column_row(info.table_id, new, parent),
        )
        self.altered(info.table_id)
        return self.replace_table(info, replace(info, columns=_swap(info.columns, old.column_id, new)))

    # views ---------------------------------------------------------------------------------------------------
    def create_view(self, schema: str, name: str, sql: str, dialect: str, aliases: Sequence[str]) -> ViewInfo:
        s = self.schema(schema)
        self.check_free(s.name, name)
        vid = self.catalog_id()
        alias_text = ",".join(quote(a) for a in aliases)
        info = ViewInfo(vid, str(uuid7()), s.schema_id, s.name, name, dialect, sql, alias_text, self.snapshot_id)
        self.insert_view(info)
        self.views[(s.name, name)] = info
        self.created_view_ids.add(vid)
        self.changes.created_tables.append((s.name, name, True))
        self.note_created_in(s)
        self.ddl_change()
        return info

    def insert_view(self, info: ViewInfo) -> None:
        self.add(
            "INSERT INTO {p}ducklake_view VALUES (:id, :u, :sid, NULL, :schema, :n, :d, :sql, :a)",
            {"id": info.view_id, "u": self.db.dialect.uuid_param(info.view_uuid), "sid": self.snapshot_id,
             "schema": info.schema_id, "n": info.name, "d": info.dialect, "sql": info.sql, "a": info.column_aliases},
        )

    def drop_view(self, info: ViewInfo) -> None:
        self.end_rows("ducklake_view", "view_id = :id", {"id": info.view_id})
        self.end_rows("ducklake_tag", "object_id = :id", {"id": info.view_id})
        del self.views[(info.schema_name, info.name)]
        self.changes.dropped_views.add(info.view_id)
        self.ddl_change()

    def rename_view(self, info: ViewInfo, new_name: str) -> ViewInfo:
        self.check_free(info.schema_name, new_name)
        self.end_rows("ducklake_view", "view_id = :id", {"id": info.view_id})
        new = replace(info, name=new_name, begin_snapshot=self.snapshot_id)
        self.insert_view(new)
        del self.views[(info.schema_name, info.name)]
        self.views[(info.schema_name, new_name)] = new
        self.changes.created_tables.append((info.schema_name, new_name, True))
        self.ddl_change()
        return new

    # comments and tags ---------------------------------------------------------------------------------------
    def set_tag(self, object_id: int, key: str, value: str | None, is_view: bool) -> None:
        self.end_rows("ducklake_tag", "object_id = :id AND key = :k", {"id": object_id, "k": key})
        if value is not None:
            self.add(
                "INSERT INTO {p}ducklake_tag VALUES (:id, :sid, NULL, :k, :v)",
                {"id": object_id, "sid": self.snapshot_id, "k": key, "v": value},
            )
        if is_view:
            self.changes.altered_views.add(object_id)
            self.ddl_change()
        else:
            self.altered(object_id, schema_row=False)

    def set_column_tag(self, info: TableInfo, column_id: int, key: str, value: str | None) -> None:
        self.end_rows(
            "ducklake_column_tag", "table_id = :t AND column_id = :c AND key = :k",
            {"t": info.table_id, "c": column_id, "k": key},
        )
        if value is not None:
            self.add(
                "INSERT INTO {p}ducklake_column_tag VALUES (:t, :c, :sid, NULL, :k, :v)",
                {"t": info.table_id, "c": column_id, "sid": self.snapshot_id, "k": key, "v": value},
            )
        self.altered(info.table_id, schema_row=False)

    # files ---------------------------------------------------------------------------------------------------
    def file_details(self, file_id: int, table_id: int, stats: Sequence[ColumnStats],
                     partition_values: Sequence[str | None]) -> None:
        """The ducklake_file_column_stats and ducklake_file_partition_value rows of one data file."""
        self.add_rows(file_rows.column_stats(self.db.dialect, [(file_id, table_id, st) for st in stats]))
        self.add_rows(file_rows.partition_values([(file_id, table_id, partition_values)]))

    def schedule_for_deletion(self, files: Sequence[tuple[int, str]]) -> None:
        """ducklake_files_scheduled_for_deletion rows of (file id, absolute path) pairs, scheduled now."""
        self.add_rows(file_rows.scheduled_for_deletion(self.db.dialect, files, self.latest.data_path, self.now))

    # stats ---------------------------------------------------------------------------------------------------
    def stats_delta(self, table_id: int) -> StatsDelta:
        return self.stats.setdefault(table_id, StatsDelta())

    def finish(self, author: str | None, message: str | None, extra: str | None) -> list[tuple[str, Any]]:
        """The complete statement list: snapshot row, change rows, stats, schema versions, snapshot changes."""
        out: list[tuple[str, Any]] = [
            (
                f"INSERT INTO {{p}}ducklake_snapshot VALUES (:sid, {self.db.dialect.timestamp_literal_sql()}, :sv, :nci, :nfi)",
                {"sid": self.snapshot_id, "ts": self.db.dialect.timestamp_param(self.now), "sv": self.schema_version,
                 "nci": self.next_catalog_id, "nfi": self.next_file_id},
            )
        ]
        out += self.statements
        out += self.stats_statements()
        out += self.inlined_table_statements()
        if self.schema_version_tables:
            out.append((
                "INSERT INTO {p}ducklake_schema_versions VALUES (:sid, :sv, :tid)",
                [{"sid": self.snapshot_id, "sv": self.schema_version, "tid": t}
                 for t in sorted(self.schema_version_tables)],
            ))
        out.append((
            "INSERT INTO {p}ducklake_snapshot_changes VALUES (:sid, :c, :a, :m, :x)",
            {"sid": self.snapshot_id, "c": self.changes.render(), "a": author, "m": message, "x": extra},
        ))
        return coalesce(out)

    def inlined_table_statements(self) -> list[tuple[str, Any]]:
        """An empty inlined-data table for every table this commit creates or alters, as the reference makes them.

        DuckDB inserts small batches into a table's newest inlined-data table; without one for the new schema
        version it would write rows of the new shape into the old one.
        """
        out: list[tuple[str, Any]] = []
        tables = [self.table_by_id(t) for t in sorted(self.schema_version_tables)
                  if t not in self.changes.dropped_tables and any(i.table_id == t for i in self.tables.values())]
        if not tables:
            return out
        limits = {(r[0], r[1]): r[2] for r in self.db.query(
            self.conn, "SELECT scope, scope_id, value FROM {p}ducklake_metadata WHERE key = 'data_inlining_row_limit'")}
        for info in tables:
            limit = next((limits[k] for k in (("table", info.table_id), ("schema", info.schema_id), (None, None))
                          if k in limits), str(DEFAULT_INLINING_LIMIT))
            if int(limit) <= 0 or not self.can_inline(info):
                continue
            name = f"ducklake_inlined_data_{info.table_id}_{self.schema_version}"
            cols = ", ".join(
                '"' + c.name.replace('"', '""') + '" ' + self.db.dialect.inlined_column_type(c) for c in info.columns
            )
            out.append(("INSERT INTO {p}ducklake_inlined_data_tables VALUES (:t, :n, :v)",
                        {"t": info.table_id, "n": name, "v": self.schema_version}))
            out.append((f"CREATE TABLE IF NOT EXISTS {{p}}{name}(row_id BIGINT, begin_snapshot BIGINT, "
                        f"end_snapshot BIGINT, {cols})", None))
        return out

    def can_inline(self, info: TableInfo) -> bool:
        """The reference's CanInlineColumns: no system column names, names the backend can hold, inlinable types."""
        for col in info.columns:
            if col.name.lower() in ("row_id", "begin_snapshot", "end_snapshot"):
                return False
            if len(col.name) > self.db.dialect.max_identifier_length:
                return False
            if any(n.type in ("geometry", "variant") for n in col.walk()):
                return False
        return True

    def stats_statements(self) -> list[tuple[str, Any]]:
        out: list[tuple[str, Any]] = []
        rd = self.db.dialect.read_bool
        bp = self.db.dialect.bool_param
        for tid, delta in sorted(self.stats.items()):
            if tid in self.changes.dropped_tables:
                continue
            row = self.db.query(
                self.conn,
                "SELECT record_count, next_row_id, file_size_bytes FROM {p}ducklake_table_stats WHERE table_id = :t",
                {"t": tid},
            )
            if not row:
                out.append((
                    "INSERT INTO {p}ducklake_table_stats VALUES (:t, :rc, :nr, :fs)",
                    {"t": tid, "rc": delta.record_count, "nr": delta.rows_added, "fs": delta.file_size_bytes},
                ))
                known = [self.fold(tid, cid, None, files) for cid, files in sorted(delta.file_stats.items())
                         if cid not in delta.unknown_bounds]
                if known:
                    out.append((
                        "INSERT INTO {p}ducklake_table_column_stats VALUES (:t, :c, :cn, :nan, :mn, :mx, NULL)",
                        [{"t": tid, "c": c.column_id, "cn": bp(c.contains_null), "nan": bp(c.contains_nan),
                          "mn": c.min_value, "mx": c.max_value} for c in known],
                    ))
                continue
            rc, nr, fs = row[0]
            out.append((
                "UPDATE {p}ducklake_table_stats SET record_count = :rc, file_size_bytes = :fs, next_row_id = :nr "
                "WHERE table_id = :t",
                {"t": tid, "rc": rc + delta.record_count, "nr": nr + delta.rows_added, "fs": fs + delta.file_size_bytes},
            ))
            existing = {
                r[0]: TableColumnStats(tid, r[0], rd(r[1]), rd(r[2]), r[3], r[4])
                for r in self.db.query(
                    self.conn,
                    "SELECT column_id, contains_null, contains_nan, min_value, max_value "
                    "FROM {p}ducklake_table_column_stats WHERE table_id = :t",
                    {"t": tid},
                )
            }
            updates = []
            for cid, files in sorted(delta.file_stats.items()):
                if cid not in existing:
                    continue  # like the reference: columns added after the stats row was made get no row
                merged = self.fold(tid, cid, existing[cid], files)
                if cid in delta.unknown_bounds:
                    # NULL bounds read as "no values yet" to DuckDB's next merge, which would then narrow the range
                    # below the data; without a row, the reference never narrows (it only updates existing rows)
                    out.append(("DELETE FROM {p}ducklake_table_column_stats WHERE table_id = :t AND column_id = :c",
                                {"t": tid, "c": cid}))
                    continue
                updates.append({"t": tid, "c": cid, "cn": bp(merged.contains_null), "nan": bp(merged.contains_nan),
                                "mn": merged.min_value, "mx": merged.max_value})
            if updates:
                out.append((
                    "UPDATE {p}ducklake_table_column_stats SET contains_null = :cn, contains_nan = :nan, "
                    "min_value = :mn, max_value = :mx WHERE table_id = :t AND column_id = :c",
                    updates,
                ))
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


def assign_column_ids(columns: Sequence[Column], first: int) -> tuple[Column, ...]:
    """Give columns ids depth first, parent before children, starting at first (as DuckDB numbers them)."""
    counter = [first]

    def assign(col: Column) -> Column:
        cid = counter[0]
        counter[0] += 1
        kids = tuple(assign(c) for c in col.children)
        return replace(col, column_id=cid, children=kids)

    return tuple(assign(c) for c in columns)


def _parent_of(columns: Sequence[Column], column_id: int) -> int | None:
    for top in columns:
        for node in top.walk():
            if any(ch.column_id == column_id for ch in node.children):
                return node.column_id
    return None


def _swap(columns: Sequence[Column], column_id: int, new: Column) -> tuple[Column, ...]:
    def sw(c: Column) -> Column:
        if c.column_id == column_id:
            return new
        return replace(c, children=tuple(sw(ch) for ch in c.children)) if c.children else c

    return tuple(sw(c) for c in columns)


