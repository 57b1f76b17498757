"""The catalog rows of data and delete files: one writer per catalog table (as the reference's metadata manager).

Each function gives the statement (SQL with `{p}`, and its parameter rows) that inserts rows of one catalog table
(or ends or removes them: `end_`, `remove_`); the caller runs it in its commit (`CatalogBuilder.add`) or, for
maintenance that commits no snapshot, on its connection (`CatalogDB.execute`). Paths are stored relative to the
table's directory (data and delete files) or to the data path (files scheduled for deletion) when they are inside it.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..catalog import ddl
from ..paths import relative_to
from ..records import ColumnStats

if TYPE_CHECKING:
    from ..catalog.dialect import Dialect

Statement = tuple[str, list[dict[str, Any]]]
NameMappingEntry = tuple[str, int, "int | None", bool]  # (source name, target field id, parent, is partition)


def stored_path(path: str, directory: str) -> tuple[str, bool]:
    """(path as stored, path_is_relative): relative to directory when inside it."""
    rel = relative_to(path, directory)
    return (rel, True) if rel is not None else (path, False)


@dataclass(frozen=True)
class DataFileRow:
    """One ducklake_data_file row (path absolute: stored relative to table_dir when inside it)."""

    data_file_id: int
    table_id: int
    begin_snapshot: int
    path: str
    table_dir: str
    record_count: int
    file_size_bytes: int
    footer_size: int | None
    row_id_start: int | None
    partition_id: int | None
    file_order: int | None = None
    mapping_id: int | None = None
    partial_max: int | None = None
    row_group_count: int | None = None


def data_files(dialect: Dialect, rows: Sequence[DataFileRow], row_group_counts: bool = False) -> Statement:
    """INSERT INTO ducklake_data_file, one parameter row per file; row_group_counts: the catalog has the column
    (DuckLake 1.1)."""
    params = []
    for r in rows:
        path, rel = stored_path(r.path, r.table_dir)
        params.append({"fid": r.data_file_id, "tid": r.table_id, "b": r.begin_snapshot, "ord": r.file_order,
                       "path": path, "rel": dialect.bool_param(rel), "rc": r.record_count, "size": r.file_size_bytes,
                       "footer": r.footer_size, "rid": r.row_id_start, "pid": r.partition_id, "mid": r.mapping_id,
                       "pmax": r.partial_max, "rgc": r.row_group_count})
    cols, rgc = _with_row_groups("ducklake_data_file", row_group_counts)
    return (f"INSERT INTO {{p}}ducklake_data_file ({cols}) VALUES (:fid, :tid, :b, NULL, :ord, :path, :rel, "
            f"'parquet', :rc, :size, :footer, :rid, :pid, NULL, :mid, :pmax{rgc})", params)


def _with_row_groups(table: str, row_group_counts: bool) -> tuple[str, str]:
    """(the column list of an INSERT into a file table, the row group count's value placeholder or '')."""
    columns = ", ".join(ddl.table_columns()[table])
    return (columns + ", row_group_count", ", :rgc") if row_group_counts else (columns, "")


@dataclass(frozen=True)
class DeleteFileRow:
    """One ducklake_delete_file row (path absolute: stored relative to table_dir when inside it)."""

    delete_file_id: int
    table_id: int
    begin_snapshot: int
    data_file_id: int
    path: str
    table_dir: str
    delete_count: int
    file_size_bytes: int
    footer_size: int | None
    partial_max: int | None = None
    format: str = "parquet"  # or "puffin" (a deletion vector)
    row_group_count: int | None = None  # a Parquet delete file's (DuckLake 1.1 records it; NULL for Puffin)


def delete_files(dialect: Dialect, rows: Sequence[DeleteFileRow], row_group_counts: bool = False) -> Statement:
    """INSERT INTO ducklake_delete_file, one parameter row per file; row_group_counts: as data_files."""
    params = []
    for r in rows:
        path, rel = stored_path(r.path, r.table_dir)
        params.append({"did": r.delete_file_id, "tid": r.table_id, "b": r.begin_snapshot, "fid": r.data_file_id,
                       "path": path, "rel": dialect.bool_param(rel), "n": r.delete_count, "size": r.file_size_bytes,
                       "footer": r.footer_size, "pmax": r.partial_max, "fmt": r.format, "rgc": r.row_group_count})
    cols, rgc = _with_row_groups("ducklake_delete_file", row_group_counts)
    return (f"INSERT INTO {{p}}ducklake_delete_file ({cols}) VALUES (:did, :tid, :b, NULL, :fid, :path, :rel, :fmt, "
            f":n, :size, :footer, NULL, :pmax{rgc})", params)


def end_data_files(snapshot_id: int, *, table_id: int | None = None, data_file_id: int | None = None
                   ) -> tuple[str, dict[str, Any]]:
    """End the live ducklake_data_file rows of a table, or one file's."""
    where, params = _file_filter(table_id, data_file_id)
    return "UPDATE {p}ducklake_data_file" + _LIVE + where, {**params, "sid": snapshot_id}


def end_delete_files(snapshot_id: int, *, table_id: int | None = None, data_file_id: int | None = None
                     ) -> tuple[str, dict[str, Any]]:
    """End the live ducklake_delete_file rows of a table, or of one data file."""
    where, params = _file_filter(table_id, data_file_id)
    return "UPDATE {p}ducklake_delete_file" + _LIVE + where, {**params, "sid": snapshot_id}


_LIVE = " SET end_snapshot = :sid WHERE end_snapshot IS NULL AND "


def _file_filter(table_id: int | None, data_file_id: int | None) -> tuple[str, dict[str, Any]]:
    if (table_id is None) == (data_file_id is None):
        raise ValueError("end a table's files or one data file's, not both or neither")
    return ("table_id = :id", {"id": table_id}) if table_id is not None else ("data_file_id = :f", {"f": data_file_id})


def remove_delete_file(delete_file_id: int) -> tuple[str, dict[str, Any]]:
    """DELETE a ducklake_delete_file row (a 1.0-style delete file replaced by one holding all its deletes)."""
    return "DELETE FROM {p}ducklake_delete_file WHERE delete_file_id = :d", {"d": delete_file_id}


def scheduled_for_deletion(dialect: Dialect, files: Sequence[tuple[int, str]], data_path: str,
                           now: dt.datetime) -> Statement:
    """INSERT INTO ducklake_files_scheduled_for_deletion of (file id, absolute path) pairs, scheduled at now."""
    params = []
    for file_id, full in files:
        path, rel = stored_path(full, data_path)
        params.append({"d": file_id, "path": path, "rel": dialect.bool_param(rel), "ts": dialect.timestamp_param(now)})
    return ("INSERT INTO {p}ducklake_files_scheduled_for_deletion VALUES (:d, :path, :rel, "
            + dialect.timestamp_literal_sql() + ")", params)


def column_stats(dialect: Dialect, rows: Sequence[tuple[int, int, ColumnStats]]) -> Statement:
    """INSERT INTO ducklake_file_column_stats of (data file id, table id, stats) rows."""
    return ("INSERT INTO {p}ducklake_file_column_stats VALUES (:fid, :tid, :cid, :size, :vc, :nc, :mn, :mx, :nan, NULL)",
            [{"fid": fid, "tid": tid, "cid": st.column_id, "size": st.column_size_bytes, "vc": st.value_count,
              "nc": st.null_count, "mn": st.min_value, "mx": st.max_value, "nan": dialect.bool_param(st.contains_nan)}
             for fid, tid, st in rows])


def partition_values(rows: Sequence[tuple[int, int, Sequence[str | None]]]) -> Statement:
    """INSERT INTO ducklake_file_partition_value of (data file id, table id, the file's values by key index) rows."""
    return ("INSERT INTO {p}ducklake_file_partition_value VALUES (:fid, :tid, :k, :v)",
            [{"fid": fid, "tid": tid, "k": k, "v": v} for fid, tid, values in rows for k, v in enumerate(values)])


def name_mappings(dialect: Dialect, rows: Sequence[tuple[int, int, Sequence[NameMappingEntry]]]) -> list[Statement]:
    """INSERT INTO ducklake_column_mapping and ducklake_name_mapping of (mapping id, table id, entries) rows."""
    if not rows:
        return []
    out = [("INSERT INTO {p}ducklake_column_mapping VALUES (:m, :t, 'map_by_name')",
            [{"m": mid, "t": tid} for mid, tid, _ in rows])]
    names = [{"m": mid, "c": i, "src": src, "target": target, "parent": parent, "part": dialect.bool_param(part)}
             for mid, _, entries in rows for i, (src, target, parent, part) in enumerate(entries)]
    if names:
        out.append(("INSERT INTO {p}ducklake_name_mapping VALUES (:m, :c, :src, :target, :parent, :part)", names))
    return out
