"""Small inserts written as inlined rows, as DuckDB writes them: the same inserts on two lakes, one written by DuckDB
and one by us, give the same catalog rows, and both read the same at every snapshot."""

from __future__ import annotations

import datetime as dt
import os
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest

from dbt.adapters.ducklake.lake import Column, DuckLake, read_arrow, write_data_files
from dbt.adapters.ducklake.lake.maintenance.compaction import flush_inlined_data
from tests.lake.compare import arrow_rows
from tests.support import reference
from tests.support.invariants import violations

COLUMNS = [("id", "int64", "BIGINT"), ("v", "varchar", "VARCHAR"), ("d", "decimal(9,2)", "DECIMAL(9,2)"),
           ("ts", "timestamp", "TIMESTAMP"), ("b", "boolean", "BOOLEAN"), ("f", "float64", "DOUBLE"),
           ("day", "date", "DATE"), ("tz", "timestamptz", "TIMESTAMPTZ"), ("small", "int32", "INTEGER")]
UTC = dt.timezone.utc


def _rows(ids: range, nan: bool = False) -> list[tuple[Any, ...]]:
    return [(i, None if i % 4 == 1 else f"v{i}", Decimal(i) / 4, dt.datetime(2024, 1, 1 + i % 20, i % 24),
             None if i % 3 == 0 else i % 2 == 0, float("nan") if nan and i % 2 else i / 8,
             dt.date(2023, 12, 1) + dt.timedelta(days=i), dt.datetime(2024, 2, 1, 12, tzinfo=UTC) + dt.timedelta(
                 seconds=i), -i) for i in ids]


def _literal(value: Any) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, float):
        return f"'{value}'::DOUBLE"
    if isinstance(value, bool | int | Decimal):
        return str(value)
    if isinstance(value, dt.datetime) and value.tzinfo is not None:
        return f"TIMESTAMPTZ '{value.isoformat()}'"
    return f"'{value}'"


def _insert_sql(rows: list[tuple[Any, ...]]) -> str:
    return "INSERT INTO lake.t VALUES " + ", ".join("(" + ", ".join(map(_literal, r)) + ")" for r in rows)


def _arrow(rows: list[tuple[Any, ...]]) -> pa.Table:
    types = [pa.int64(), pa.string(), pa.decimal128(9, 2), pa.timestamp("us"), pa.bool_(), pa.float64(), pa.date32(),
             pa.timestamp("us", tz="UTC"), pa.int32()]
    return pa.table({name: pa.array([r[i] for r in rows], types[i]) for i, (name, _, _) in enumerate(COLUMNS)})


# (limit to set before the step or None, rows of the insert); the first insert writes a file, the others are small
STEPS = [(0, range(0, 20)), (10, range(20, 23)), (None, range(23, 25)), (None, range(25, 37)), (None, range(37, 47))]


def _duckdb_lake(con: Any) -> None:
    con.execute("CREATE TABLE theirs.t (" + ", ".join(f"{n} {d}" for n, _, d in COLUMNS) + ")")
    for limit, ids in STEPS:
        if limit is not None:
            con.execute(f"CALL theirs.set_option('data_inlining_row_limit', {limit})")
        con.execute(_insert_sql(_rows(ids, nan=ids.start == 23)).replace("lake.t", "theirs.t"))


def _our_lake(catalog: str, data: str) -> DuckLake:
    lake = DuckLake.create(catalog, data)
    with lake.transaction() as tx:
        tx.create_table("main", "t", [Column(0, n, t) for n, t, _ in COLUMNS])
    for limit, ids in STEPS:
        if limit is not None:
            lake.set_option("data_inlining_row_limit", str(limit))
        table = lake.snapshot().table("main", "t")
        with lake.transaction() as tx:
            tx.add_data_files("main", "t", write_data_files(table, lake.snapshot().table_path(table),
                                                            _arrow(_rows(ids, nan=ids.start == 23))))
    return lake


def _catalog_rows(con: Any, alias: str) -> dict[str, list[Any]]:
    """The catalog rows an insert writes, without what differs between any two writers (times, files' bytes)."""
    md = f"__ducklake_metadata_{alias}"
    queries = {
        "snapshot": "SELECT snapshot_id, schema_version, next_catalog_id, next_file_id FROM {md}.ducklake_snapshot",
        "changes": "SELECT snapshot_id, changes_made FROM {md}.ducklake_snapshot_changes",
        "inlined_tables": "SELECT * FROM {md}.ducklake_inlined_data_tables",
        "table_stats": "SELECT table_id, record_count, next_row_id FROM {md}.ducklake_table_stats",
        "column_stats": "SELECT * FROM {md}.ducklake_table_column_stats",
        "schema_versions": "SELECT * FROM {md}.ducklake_schema_versions",
    }
    out = {k: sorted(con.execute(q.format(md=md)).fetchall(), key=repr) for k, q in queries.items()}
    for name in [r[1] for r in out["inlined_tables"]]:
        # as text: NaN equals nothing, its repr equals itself
        out[name] = sorted(repr(r) for r in con.execute(f"SELECT * FROM {md}.{name}").fetchall())
    out["inlined_columns"] = sorted(con.execute(
        "SELECT table_name, column_name, data_type FROM duckdb_columns() WHERE database_name = "
        f"'{md}' AND table_name LIKE 'ducklake_inlined_data_%'").fetchall())
    return out


def _reads(con: Any, alias: str, snapshots: range) -> list[list[str]]:
    return [sorted(repr(r) for r in con.execute(f"SELECT rowid, * FROM {alias}.t AT (VERSION => {s})").fetchall())
            for s in snapshots]


def test_small_inserts_are_inlined_as_duckdb_inlines_them(file_catalog_url: str, tmp_path: Any) -> None:
    theirs_url = file_catalog_url.rsplit("/", 1)[0] + "/theirs" + os.path.splitext(file_catalog_url)[1]
    os.makedirs(tmp_path / "theirs_data")
    con = reference.connect()  # one DuckDB for the whole test: loading the extensions is its slowest part
    try:
        con.execute("SET TimeZone = 'UTC'")
        con.execute(reference.attach_sql(theirs_url, "theirs", data_path=str(tmp_path / "theirs_data") + "/"))
        _duckdb_lake(con)
        lake = _our_lake(file_catalog_url, str(tmp_path / "ours_data") + "/")
        latest = lake.latest_snapshot_id()
        lake.close()
        con.execute(reference.attach_sql(file_catalog_url, "ours", read_only=True))
        assert _catalog_rows(con, "ours") == _catalog_rows(con, "theirs")
        changes = [c for _, c in _catalog_rows(con, "ours")["changes"]]
        assert changes[-4:] == ["inlined_insert:1", "inlined_insert:1", "inserted_into_table:1", "inlined_insert:1"]
        expected = _reads(con, "theirs", range(1, latest + 1))
        assert _reads(con, "ours", range(1, latest + 1)) == expected
        con.execute("DETACH ours")

        lake = DuckLake.open(file_catalog_url)
        for s in range(2, latest + 1):  # our reader at every snapshot equals DuckDB's on its own lake
            state = lake.snapshot(s)
            got = arrow_rows(read_arrow(state, state.table("main", "t")).select(["rowid"] + [n for n, _, _ in COLUMNS]))
            assert sorted(repr(r) for r in got) == expected[s - 1]
        assert violations(file_catalog_url) == []

        # both flushes: ours on our lake, DuckDB's on its own; reads stay equal at every snapshot
        assert flush_inlined_data(lake, "main", "t") == [("main", "t", 15)]
        lake.close()
        con.execute("CALL ducklake_flush_inlined_data('theirs')")
        con.execute(reference.attach_sql(file_catalog_url, "ours", read_only=True))
        assert _reads(con, "ours", range(1, latest + 2)) == _reads(con, "theirs", range(1, latest + 2))
        con.execute("DETACH ours")
    finally:
        con.close()
    assert violations(file_catalog_url) == []


def test_deletes_of_inlined_rows_and_limits_per_table(file_catalog_url: str, data_path: str) -> None:
    lake = DuckLake.create(file_catalog_url, data_path)
    lake.set_option("data_inlining_row_limit", "0")
    with lake.transaction() as tx:
        table = tx.create_table("main", "t", [Column(0, "id", "int64"), Column(0, "v", "varchar")])
    with lake.transaction() as tx:  # the transaction's limit for the table wins over the lake's 0
        tx.set_inlining_limit("main", "t", 5)
        tx.add_data_files("main", "t", write_data_files(table, lake.snapshot().table_path(table),
                                                        pa.table({"id": [1, 2, 3], "v": ["a", "b", "c"]})))
    st = lake.snapshot()
    assert st.files(st.table("main", "t")) == []
    assert not any(os.scandir(st.table_path(st.table("main", "t"))))  # the staged file is gone
    assert st.snapshot.changes_made == "inlined_insert:1"
    with lake.transaction() as tx:  # the limit was stored as the table's option: later inserts follow it
        tx.add_data_files("main", "t", write_data_files(table, lake.snapshot().table_path(table),
                                                        pa.table({"id": [4], "v": ["d"]})))
        other = tx.create_table("main", "u", [Column(0, "id", "int64")])
    assert lake.snapshot().snapshot.changes_made == 'created_table:"main"."u",inlined_insert:1'
    with lake.transaction() as tx:  # a table without its own option: the lake's 0 holds, a file
        tx.add_data_files("main", "u", write_data_files(other, lake.snapshot().table_path(other),
                                                        pa.table({"id": [1]})))
    assert lake.snapshot().snapshot.changes_made == "inserted_into_table:2"
    with lake.transaction() as tx:
        tx.delete_inlined_rows("main", "t", [1])
    with reference.attached(file_catalog_url) as con:
        assert con.execute("SELECT rowid, * FROM lake.t ORDER BY id").fetchall() == [(0, 1, "a"), (2, 3, "c"),
                                                                                     (3, 4, "d")]
        con.execute("DELETE FROM lake.t WHERE id = 3")
        con.execute("UPDATE lake.t SET v = 'A' WHERE id = 1")
    st = lake.snapshot()
    assert arrow_rows(read_arrow(st, st.table("main", "t"))) == [(0, 1, "A"), (3, 4, "d")]
    assert violations(file_catalog_url) == []
    with pytest.raises(ValueError, match="data_inlining_row_limit must be a non-negative integer"):
        lake.transaction().set_inlining_limit("main", "t", -1)
