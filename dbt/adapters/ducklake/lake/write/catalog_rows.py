"""The rows of the catalog's own tables: one writer per catalog table (as the reference's metadata manager).

Each function gives the one statement (SQL with `{p}`, and its parameters) that writes rows of one catalog table in
one way: `<table>` inserts rows, `end_<table>` sets end_snapshot on live rows, `update_<table>`/`delete_<table>`
change stats in place. The file tables have theirs in lake/file_rows. A row given alone gives a parameter dict,
a sequence of rows a list (a many-row statement; see builder.coalesce), exactly as the commit has always run them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..records import Column, PartitionSpec, SchemaInfo, Snapshot, SortSpec, TableColumnStats, TableInfo, ViewInfo

if TYPE_CHECKING:
    from ..catalog.dialect import Dialect

Params = dict[str, Any] | list[dict[str, Any]]
Statement = tuple[str, Params]


# end_ statements: each table's name spelled out, so a reader (and test_catalog_rows) finds every writer of it
_LIVE = " SET end_snapshot = :sid WHERE end_snapshot IS NULL AND "


def _end(sql: str, params: dict[str, Any], snapshot_id: int) -> Statement:
    return sql, {**params, "sid": snapshot_id}


# snapshots -------------------------------------------------------------------------------------------------------
def snapshot(dialect: Dialect, snap: Snapshot) -> Statement:
    """INSERT INTO ducklake_snapshot."""
    return (f"INSERT INTO {{p}}ducklake_snapshot VALUES (:sid, {dialect.timestamp_literal_sql()}, :sv, :nci, :nfi)",
            {"sid": snap.snapshot_id, "ts": dialect.timestamp_param(snap.snapshot_time), "sv": snap.schema_version,
             "nci": snap.next_catalog_id, "nfi": snap.next_file_id})


def snapshot_changes(snap: Snapshot) -> Statement:
    """INSERT INTO ducklake_snapshot_changes."""
    return ("INSERT INTO {p}ducklake_snapshot_changes VALUES (:sid, :c, :a, :m, :x)",
            {"sid": snap.snapshot_id, "c": snap.changes_made, "a": snap.author, "m": snap.commit_message,
             "x": snap.commit_extra_info})


def schema_versions(snapshot_id: int, schema_version: int, table_ids: Sequence[int]) -> Statement:
    """INSERT INTO ducklake_schema_versions, one row per table."""
    return ("INSERT INTO {p}ducklake_schema_versions VALUES (:sid, :sv, :tid)",
            [{"sid": snapshot_id, "sv": schema_version, "tid": t} for t in table_ids])


# schemas, tables, views ------------------------------------------------------------------------------------------
def schema(dialect: Dialect, info: SchemaInfo, snapshot_id: int) -> Statement:
    """INSERT INTO ducklake_schema, beginning at snapshot_id."""
    return ("INSERT INTO {p}ducklake_schema VALUES (:id, :u, :sid, NULL, :n, :path, :rel)",
            {"id": info.schema_id, "u": dialect.uuid_param(info.schema_uuid), "sid": snapshot_id, "n": info.name,
             "path": info.path, "rel": dialect.bool_param(info.path_is_relative)})


def end_schema(schema_id: int, snapshot_id: int) -> Statement:
    return _end("UPDATE {p}ducklake_schema" + _LIVE + "schema_id = :id", {"id": schema_id}, snapshot_id)


def table(dialect: Dialect, info: TableInfo, snapshot_id: int) -> Statement:
    """INSERT INTO ducklake_table, beginning at snapshot_id (a rename keeps the table's begin in its record)."""
    return ("INSERT INTO {p}ducklake_table VALUES (:id, :u, :sid, NULL, :schema, :n, :path, :rel)",
            {"id": info.table_id, "u": dialect.uuid_param(info.table_uuid), "sid": snapshot_id,
             "schema": info.schema_id, "n": info.name, "path": info.path,
             "rel": dialect.bool_param(info.path_is_relative)})


def end_table(table_id: int, snapshot_id: int) -> Statement:
    return _end("UPDATE {p}ducklake_table" + _LIVE + "table_id = :id", {"id": table_id}, snapshot_id)


def view(dialect: Dialect, info: ViewInfo, snapshot_id: int) -> Statement:
    """INSERT INTO ducklake_view, beginning at snapshot_id."""
    return ("INSERT INTO {p}ducklake_view VALUES (:id, :u, :sid, NULL, :schema, :n, :d, :sql, :a)",
            {"id": info.view_id, "u": dialect.uuid_param(info.view_uuid), "sid": snapshot_id,
             "schema": info.schema_id, "n": info.name, "d": info.dialect, "sql": info.sql, "a": info.column_aliases})


def end_view(view_id: int, snapshot_id: int) -> Statement:
    return _end("UPDATE {p}ducklake_view" + _LIVE + "view_id = :id", {"id": view_id}, snapshot_id)


def end_sort_info(table_id: int, snapshot_id: int) -> Statement:
    return _end("UPDATE {p}ducklake_sort_info" + _LIVE + "table_id = :id", {"id": table_id}, snapshot_id)


def sort_info(table_id: int, spec: SortSpec, snapshot_id: int) -> Statement:
    """INSERT INTO ducklake_sort_info (a table's SET SORTED BY, beginning at snapshot_id)."""
    return ("INSERT INTO {p}ducklake_sort_info VALUES (:id, :tid, :sid, NULL)",
            {"id": spec.sort_id, "tid": table_id, "sid": snapshot_id})


def sort_expressions(table_id: int, spec: SortSpec) -> Statement:
    """INSERT INTO ducklake_sort_expression, one row per key, spelled as the reference spells them."""
    return ("INSERT INTO {p}ducklake_sort_expression VALUES (:id, :tid, :k, :e, :d, :dir, :nulls)",
            [{"id": spec.sort_id, "tid": table_id, "k": f.key_index, "e": f.expression, "d": f.dialect,
              "dir": "DESC" if f.descending else "ASC", "nulls": "NULLS_FIRST" if f.nulls_first else "NULLS_LAST"}
             for f in spec.fields])


# options (ducklake_metadata; set_option's rows carry no snapshot) -------------------------------------------------
def delete_option(name: str, scope: str | None, scope_id: int | None) -> Statement:
    where = "key = :k AND scope IS NULL" if scope is None else "key = :k AND scope = :s AND scope_id = :i"
    return f"DELETE FROM {{p}}ducklake_metadata WHERE {where}", {"k": name, "s": scope, "i": scope_id}


def option(name: str, value: str, scope: str | None, scope_id: int | None) -> Statement:
    """INSERT INTO ducklake_metadata: an option of the lake (scope None), a schema or a table."""
    return ("INSERT INTO {p}ducklake_metadata VALUES (:k, :v, :s, :i)",
            {"k": name, "v": value, "s": scope, "i": scope_id})


# columns ---------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ColumnRow:
    """One ducklake_column row as stored (default_value is the stored text: 'NULL' for no default)."""

    table_id: int
    column_id: int
    column_order: int
    name: str
    type: str
    initial_default: str | None
    default_value: str | None
    nulls_allowed: bool
    parent: int | None
    default_value_type: str | None

    @classmethod
    def of(cls, table_id: int, col: Column, parent: int | None) -> ColumnRow:
        """A column of the working catalog, ordered by its id, as the reference writes new columns."""
        return cls(table_id, col.column_id, col.column_id, col.name, col.type, col.initial_default,
                   col.default_value if col.default_value is not None else "NULL", col.nullable, parent,
                   "" if col.is_nested else "literal")


def columns(dialect: Dialect, rows: ColumnRow | Sequence[ColumnRow], snapshot_id: int, *,
            ended: bool = False) -> Statement:
    """INSERT INTO ducklake_column, beginning at snapshot_id; ended: ending there too (a clone's retired ids)."""

    def params(r: ColumnRow) -> dict[str, Any]:
        return {"cid": r.column_id, "sid": snapshot_id, "tid": r.table_id, "ord": r.column_order, "name": r.name,
                "type": r.type, "init": r.initial_default, "dflt": r.default_value,
                "nulls": dialect.bool_param(r.nulls_allowed), "parent": r.parent, "dtype": r.default_value_type}

    end = ":sid" if ended else "NULL"
    sql = (f"INSERT INTO {{p}}ducklake_column VALUES (:cid, :sid, {end}, :tid, :ord, :name, :type, :init, :dflt, "
           ":nulls, :parent, :dtype, 'duckdb')")
    return (sql, params(rows)) if isinstance(rows, ColumnRow) else (sql, [params(r) for r in rows])


def end_columns(table_id: int, snapshot_id: int, column_id: int | None = None) -> Statement:
    """End a table's column rows: all of them, or one column's (not its children's)."""
    if column_id is None:
        return _end("UPDATE {p}ducklake_column" + _LIVE + "table_id = :id", {"id": table_id}, snapshot_id)
    return _end("UPDATE {p}ducklake_column" + _LIVE + "table_id = :t AND column_id = :c",
                {"t": table_id, "c": column_id}, snapshot_id)


# partitioning ----------------------------------------------------------------------------------------------------
def partition_info(table_id: int, spec: PartitionSpec, snapshot_id: int) -> Statement:
    """INSERT INTO ducklake_partition_info."""
    return ("INSERT INTO {p}ducklake_partition_info VALUES (:pid, :tid, :sid, NULL)",
            {"pid": spec.partition_id, "tid": table_id, "sid": snapshot_id})


def end_partition_info(table_id: int, snapshot_id: int) -> Statement:
    return _end("UPDATE {p}ducklake_partition_info" + _LIVE + "table_id = :id", {"id": table_id}, snapshot_id)


def partition_columns(table_id: int, spec: PartitionSpec) -> Statement:
    """INSERT INTO ducklake_partition_column, one row per key."""
    return ("INSERT INTO {p}ducklake_partition_column VALUES (:pid, :tid, :k, :cid, :tr)",
            [{"pid": spec.partition_id, "tid": table_id, "k": f.key_index, "cid": f.column_id, "tr": f.transform}
             for f in spec.fields])


# tags ------------------------------------------------------------------------------------------------------------
def tag(object_id: int, key: str, value: str, snapshot_id: int) -> Statement:
    """INSERT INTO ducklake_tag (a table's or view's tag)."""
    return ("INSERT INTO {p}ducklake_tag VALUES (:id, :sid, NULL, :k, :v)",
            {"id": object_id, "sid": snapshot_id, "k": key, "v": value})


def end_tags(object_id: int, snapshot_id: int, key: str | None = None) -> Statement:
    """End an object's tags: all of them, or the one with this key."""
    if key is None:
        return _end("UPDATE {p}ducklake_tag" + _LIVE + "object_id = :id", {"id": object_id}, snapshot_id)
    return _end("UPDATE {p}ducklake_tag" + _LIVE + "object_id = :id AND key = :k", {"id": object_id, "k": key},
                snapshot_id)


def column_tag(table_id: int, column_id: int, key: str, value: str, snapshot_id: int) -> Statement:
    """INSERT INTO ducklake_column_tag."""
    return ("INSERT INTO {p}ducklake_column_tag VALUES (:t, :c, :sid, NULL, :k, :v)",
            {"t": table_id, "c": column_id, "sid": snapshot_id, "k": key, "v": value})


def end_column_tags(table_id: int, snapshot_id: int, column_key: tuple[int, str] | None = None) -> Statement:
    """End a table's column tags: all of them, or one (column id, key)'s."""
    if column_key is None:
        return _end("UPDATE {p}ducklake_column_tag" + _LIVE + "table_id = :id", {"id": table_id}, snapshot_id)
    return _end("UPDATE {p}ducklake_column_tag" + _LIVE + "table_id = :t AND column_id = :c AND key = :k",
                {"t": table_id, "c": column_key[0], "k": column_key[1]}, snapshot_id)


def view_column_tag(view_id: int, column: str, key: str, value: str, snapshot_id: int) -> Statement:
    """INSERT INTO ducklake_view_column_tag (DuckLake 1.1)."""
    return ("INSERT INTO {p}ducklake_view_column_tag VALUES (:v, :c, :sid, NULL, :k, :val)",
            {"v": view_id, "c": column, "sid": snapshot_id, "k": key, "val": value})


def end_view_column_tags(view_id: int, snapshot_id: int, column_key: tuple[str, str] | None = None) -> Statement:
    """End a view's column tags: all of them (the view is dropped), or one (column, key)'s."""
    if column_key is None:
        return _end("UPDATE {p}ducklake_view_column_tag" + _LIVE + "view_id = :id", {"id": view_id}, snapshot_id)
    return _end("UPDATE {p}ducklake_view_column_tag" + _LIVE + "view_id = :v AND column_name = :c AND key = :k",
                {"v": view_id, "c": column_key[0], "k": column_key[1]}, snapshot_id)


# stats -----------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class TableStatsRow:
    table_id: int
    record_count: int
    next_row_id: int
    file_size_bytes: int


def table_stats(row: TableStatsRow) -> Statement:
    """INSERT INTO ducklake_table_stats (a table's first)."""
    return ("INSERT INTO {p}ducklake_table_stats VALUES (:t, :rc, :nr, :fs)", _stats_params(row))


def update_table_stats(row: TableStatsRow) -> Statement:
    """UPDATE ducklake_table_stats to the row's values."""
    return ("UPDATE {p}ducklake_table_stats SET record_count = :rc, file_size_bytes = :fs, next_row_id = :nr "
            "WHERE table_id = :t", _stats_params(row))


def _stats_params(row: TableStatsRow) -> dict[str, Any]:
    return {"t": row.table_id, "rc": row.record_count, "nr": row.next_row_id, "fs": row.file_size_bytes}


def table_column_stats(dialect: Dialect, rows: Sequence[TableColumnStats]) -> Statement:
    """INSERT INTO ducklake_table_column_stats."""
    return ("INSERT INTO {p}ducklake_table_column_stats VALUES (:t, :c, :cn, :nan, :mn, :mx, NULL)",
            [_column_stats_params(dialect, r) for r in rows])


def update_table_column_stats(dialect: Dialect, rows: Sequence[TableColumnStats]) -> Statement:
    """UPDATE ducklake_table_column_stats to the rows' values."""
    return ("UPDATE {p}ducklake_table_column_stats SET contains_null = :cn, contains_nan = :nan, "
            "min_value = :mn, max_value = :mx WHERE table_id = :t AND column_id = :c",
            [_column_stats_params(dialect, r) for r in rows])


def delete_table_column_stats(table_id: int, column_id: int) -> Statement:
    """DELETE a column's ducklake_table_column_stats row."""
    return ("DELETE FROM {p}ducklake_table_column_stats WHERE table_id = :t AND column_id = :c",
            {"t": table_id, "c": column_id})


def _column_stats_params(dialect: Dialect, r: TableColumnStats) -> dict[str, Any]:
    return {"t": r.table_id, "c": r.column_id, "cn": dialect.bool_param(r.contains_null),
            "nan": dialect.bool_param(r.contains_nan), "mn": r.min_value, "mx": r.max_value}


# inlined data ----------------------------------------------------------------------------------------------------
def inlined_data_tables(table_id: int, table_name: str, schema_version: int) -> Statement:
    """INSERT INTO ducklake_inlined_data_tables."""
    return ("INSERT INTO {p}ducklake_inlined_data_tables VALUES (:t, :n, :v)",
            {"t": table_id, "n": table_name, "v": schema_version})


def table_option(table_id: int, key: str, value: str) -> list[Statement]:
    """A table-scope ducklake_metadata option (replacing the table's earlier value), as set_option writes it."""
    where = {"k": key, "i": table_id}
    return [("DELETE FROM {p}ducklake_metadata WHERE key = :k AND scope = 'table' AND scope_id = :i", where),
            ("INSERT INTO {p}ducklake_metadata VALUES (:k, :v, 'table', :i)", {**where, "v": value})]
