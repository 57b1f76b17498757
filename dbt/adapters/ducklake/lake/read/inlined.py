"""Rows stored inline in the catalog (ducklake_inlined_data_<tid>_<schema_version>), read as Arrow.

DuckDB keeps native types in a DuckDB catalog and its own text format for other types on SQLite/PostgreSQL; the
text is turned back into values with DuckDB's own casts (duckdb is already a dependency for DuckDB-file catalogs).
"""

from __future__ import annotations

import datetime as dt
import re
from decimal import Decimal
from typing import Any

import duckdb
import pyarrow as pa
from sqlalchemy.engine import Connection

from ..catalog.state import LakeState
from ..records import Column, InlinedTable, TableInfo
from ..types import duckdb_sql_type, parse_value
from .arrow_types import cast_to, plain_type

_VIA_TEXT = ("timetz", "int128", "uint128")
_NATIVE = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "float32", "float64", "boolean", "varchar",
           "blob", "json")
def read_inlined(state: LakeState, table: TableInfo, with_rowid: bool = True, history: bool = False,
                 only: str | None = None) -> list[pa.Table]:
    """The table's inlined rows visible at the state's snapshot, mapped to the table's current columns.

    With history, every row ever stored (deleted ones too), with its begin_snapshot and end_snapshot columns.
    With only, just that inlined-data table.
    """
    if not history:  # rows visible at a snapshot never change: read once per state (history rows do: ends are set)
        return state.inlined_rows(table, with_rowid, only,
                                  lambda: _read(state, table, with_rowid, history=False, only=only))
    return _read(state, table, with_rowid, history=True, only=only)


def _read(state: LakeState, table: TableInfo, with_rowid: bool, history: bool, only: str | None) -> list[pa.Table]:
    def wanted(conn: Connection | None = None) -> list[InlinedTable]:
        return [t for t in state.inlined_tables(table, conn) if (only is None or t.table_name == only)
                and not state.inlined_empty(t)]

    if state.knows_inlined(table) and not wanted():
        return []  # known to have none (or only empty ones): no connection
    out = []
    with state.db.read() as conn:  # one connection for the list of inlined-data tables and their rows
        for it in wanted(conn):
            names = [c.name for c in it.columns]
            quoted = ['"' + c.name.replace('"', '""') + '"' for c in it.columns]
            # DuckDB catalog: TIMETZ and 128-bit integers go through their text form (DuckDB's Arrow export cannot
            # carry them); other catalogs: every type without an exact native Python value does
            duck = state.db.location.backend == "duckdb"
            exprs = [
                f"CAST({q} AS VARCHAR)" if (c.type in _VIA_TEXT if duck else c.type not in _NATIVE) else q
                for q, c in zip(quoted, it.columns, strict=True)
            ]
            sys = state.db.spec.inlined  # the system columns' names (1.1 prefixes them with _ducklake_)
            cols_sql = ", ".join([f'"{sys.row_id}"'] + exprs)
            cols_sql += f", {sys.begin_snapshot}, {sys.end_snapshot}"
            where = f"{sys.begin_snapshot} <= :s" + (
                "" if history else f" AND ({sys.end_snapshot} IS NULL OR :s < {sys.end_snapshot})")
            sql = f"SELECT {cols_sql} FROM {state.db.t(it.table_name)} WHERE {where} ORDER BY {sys.row_id}"
            if state.db.location.backend == "duckdb":
                raw = conn.connection.dbapi_connection._ConnectionWrapper__c  # type: ignore[union-attr]
                got = _arrow(raw.execute(sql.replace(":s", "$s"), {"s": state.snapshot_id}))
                columns = {n: got.column(i + 1) for i, n in enumerate(names)}
                row_ids = got.column(0)
                count = got.num_rows
                begins, ends = got.column(len(names) + 1).to_pylist(), got.column(len(names) + 2).to_pylist()
            else:
                rows = state.db.query(conn, sql, {"s": state.snapshot_id})
                count = len(rows)
                row_ids = pa.array([r[0] for r in rows], pa.int64())
                columns = {n: [r[i + 1] for r in rows] for i, n in enumerate(names)}
                begins, ends = [r[len(names) + 1] for r in rows], [r[len(names) + 2] for r in rows]
            if count == 0:
                continue
            mapped = _map_columns(it, table, columns, row_ids, count, with_rowid)
            if history:
                mapped = mapped.append_column("begin_snapshot", pa.array(begins, pa.int64()))
                mapped = mapped.append_column("end_snapshot", pa.array(ends, pa.int64()))
            out.append(mapped)
        if not history:  # the rows visible at a snapshot expired meanwhile would be missing some
            state.require_snapshot(conn)
    return out


def _map_columns(it: InlinedTable, table: TableInfo, columns: dict[str, Any], row_ids: Any, count: int,
                 with_rowid: bool) -> pa.Table:
    by_id = {c.column_id: c for c in it.columns}
    data: dict[str, Any] = {}
    if with_rowid:
        data["rowid"] = pa.array(row_ids, pa.int64()) if not isinstance(row_ids, pa.ChunkedArray) else row_ids
    for col in table.columns:
        target = plain_type(col)
        src = by_id.get(col.column_id)
        if src is None:
            value = None if col.initial_default is None or col.is_nested else parse_value(col.type, col.initial_default)
            data[col.name] = pa.array([value] * count, target)
            continue
        values = columns[src.name]
        data[col.name] = _to_arrow(values, src, target)
    return pa.table(data)


def _to_arrow(values: Any, src: Column, target: pa.DataType) -> pa.Array:
    if isinstance(values, pa.ChunkedArray) and src.type in _VIA_TEXT:
        values = values.to_pylist()
    if src.type in ("int128", "uint128"):
        return cast_to(pa.array([None if v is None else int(v) for v in values], pa.decimal256(39, 0)), target)
    if isinstance(values, pa.ChunkedArray):  # DuckDB catalog: already typed
        arr = values.combine_chunks()
        return cast_to(arr, target)
    if src.type == "timetz":
        return cast_to(pa.array([None if v is None else _utc_time(str(v)) for v in values], pa.time64("us")), target)
    if src.type in ("varchar", "json"):
        values = [v.decode("utf-8") if isinstance(v, bytes | memoryview) else v for v in values]  # type: ignore[union-attr]
        return cast_to(pa.array(values, pa.string()), target)
    if src.type == "blob":
        return cast_to(pa.array([bytes(v) if isinstance(v, memoryview) else v for v in values], pa.binary()), target)
    if src.type in ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float32", "float64") \
            and all(v is None or isinstance(v, int | float) for v in values):
        return cast_to(pa.array(values, plain_type(src)), target)
    if src.type.startswith("decimal") and all(v is None or isinstance(v, Decimal | int) for v in values):
        return cast_to(pa.array(values, plain_type(src)), target)
    if src.type == "boolean" and all(v is None or isinstance(v, bool | int) for v in values):
        return cast_to(pa.array([None if v is None else bool(v) for v in values], pa.bool_()), target)
    # DuckDB's text form (SQLite/PostgreSQL catalogs): let DuckDB parse its own format
    texts = pa.array([None if v is None else _unwrap_casts(str(v)) if src.is_nested else str(v) for v in values],
                     pa.string())
    con = duckdb.connect()
    try:
        con.execute("SET TimeZone = 'UTC'")
        src_table = pa.table({"v": texts})  # noqa: F841 - read by DuckDB's replacement scan
        got = _arrow(con.execute(f"SELECT CAST(v AS {duckdb_sql_type(src)}) AS v FROM src_table"))
    finally:
        con.close()
    arr = got.column(0).combine_chunks()
    return cast_to(arr, target)





# DuckDB writes a nested value's non-native leaves as casts ({'t': CAST('01:02:03' AS TIME)}), which its VARCHAR ->
# STRUCT/LIST/MAP cast does not parse; the quoted text alone casts to the leaf's type
_LEAF_CAST = re.compile(r"CAST\(('(?:[^']|'')*') AS [A-Za-z_ ]+(?:\(\d+(?:,\s*\d+)?\))?\)")


def _unwrap_casts(text: str) -> str:
    return _LEAF_CAST.sub(r"\1", text)


def _arrow(result: Any) -> pa.Table:
    # duckdb 1.5 renamed fetch_arrow_table to to_arrow_table
    fetch = getattr(result, "to_arrow_table", None) or result.fetch_arrow_table
    return fetch()


def _utc_time(text: str) -> dt.time:
    """A TIMETZ text ('12:00:00+05:30') as the UTC time it stands for (how Parquet stores TIMETZ)."""
    value = parse_value("timetz", text)
    offset = value.utcoffset() or dt.timedelta()
    moment = dt.datetime.combine(dt.date(2000, 1, 1), value.replace(tzinfo=None)) - offset
    return moment.time()
