"""Many-row INSERTs on a DuckDB catalog go through Arrow (lake/catalog/arrow_insert.py) and write what executemany writes.

The same scenario (nested columns, several files with stats in one commit, name-mapped files, partition values,
first and repeated deletes, tags, views, drops) is committed twice, once through Arrow and once with Arrow turned
off; every catalog table must hold the same rows in the same storage order, of the same column types.
"""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dbt.adapters.ducklake.lake.catalog import arrow_insert
from dbt.adapters.ducklake.lake.catalog import database as catalog
from dbt.adapters.ducklake.lake.lake import DuckLake
from dbt.adapters.ducklake.lake.paths import data_file_name, join_path
from dbt.adapters.ducklake.lake.records import Column
from dbt.adapters.ducklake.lake.write.builder import coalesce
from dbt.adapters.ducklake.lake.write.datafiles import describe_parquet
from dbt.adapters.ducklake.lake.write.writer import write_data_files
from tests.support.invariants import violations

COLUMNS = [
    Column(0, "id", "int64", nullable=False),
    Column(0, "name", "varchar"),
    Column(0, "score", "float64"),
    Column(0, "day", "date"),
    Column(0, "info", "struct", children=(Column(0, "a", "int32"), Column(0, "b", "varchar"))),
]
# columns whose values are random per run (uuids, times, generated file names) or depend on them (delete files hold
# their data file's path, so their sizes vary with it)
MASKED = {"schema_uuid", "table_uuid", "view_uuid", "snapshot_time", "schedule_start", "path"}
MASKED_DELETE_FILE = {"file_size_bytes", "footer_size"}


def rows(lo: int, hi: int) -> pa.Table:
    ids = list(range(lo, hi))
    return pa.table({
        "id": pa.array(ids, pa.int64()),
        "name": [None if i % 7 == 3 else f"n{i}" for i in ids],
        "score": [float("nan") if i == 5 else i * 1.5 for i in ids],
        "day": [dt.date(2024, 1, 1) + dt.timedelta(days=i) for i in ids],
        "info": [None if i % 4 == 0 else {"a": i, "b": f"b{i}"} for i in ids],
    })


def scenario(catalog_url: str, data_path: str) -> None:
    lake = DuckLake.create(catalog_url, data_path)
    with lake.transaction(author="tests", commit_message="create") as tx:
        tx.create_schema("s1")
        tx.create_table("s1", "t", COLUMNS, comment="c")
        tx.set_comment("s1", "t", "the key", column="id")
        tx.create_table("s1", "p", [Column(0, "id", "int64"), Column(0, "cat", "varchar")],
                        partition_by=[("cat", "identity")])
    state = lake.snapshot()
    t = state.table("s1", "t")
    specs = [s for lo in range(0, 60, 10) for s in write_data_files(t, state.table_path(t), rows(lo, lo + 10))]
    named = []
    for lo in (60, 70):  # files without field ids: a name mapping each, in one commit
        path = join_path(state.table_path(t), data_file_name())
        os.makedirs(os.path.dirname(path), exist_ok=True)
        pq.write_table(rows(lo, lo + 10), path)
        named.append(describe_parquet(path, t.columns, by="name"))
    p = state.table("s1", "p")
    pdata = pa.table({"id": pa.array(range(12), pa.int64()), "cat": [None, "a", "b"] * 4})
    pspecs = write_data_files(p, state.table_path(p), pdata)
    with lake.transaction(commit_message="files") as tx:
        tx.add_data_files("s1", "t", specs + named)
        tx.add_data_files("s1", "p", pspecs)
    for positions in ([0, 3], [5]):  # the second adds to existing delete files (1.0 style: old row ends)
        files = sorted(lake.snapshot().files(lake.snapshot().table("s1", "t")), key=lambda f: f.data_file_id)
        with lake.transaction(commit_message="delete") as tx:
            for f in files[:4]:
                tx.delete_rows("s1", "t", f.data_file_id, positions)
    with lake.transaction(commit_message="more") as tx:
        tx.add_column("s1", "t", Column(0, "extra", "int32", initial_default="7", default_value="7"))
        tx.set_tag("s1", "t", "k", "v")
        tx.create_view("s1", "v", "SELECT id FROM s1.t", column_aliases=["k"])
    state = lake.snapshot()
    t = state.table("s1", "t")
    more = rows(100, 120).append_column("extra", pa.array([1] * 20, pa.int32()))
    with lake.transaction(commit_message="append") as tx:
        tx.add_data_files("s1", "t", write_data_files(t, state.table_path(t), more.slice(0, 10))
                          + write_data_files(t, state.table_path(t), more.slice(10)))
    with lake.transaction(commit_message="drop") as tx:
        tx.drop_table("s1", "p")
    lake.close()


def dump(path: str) -> dict[str, tuple[list[tuple[str, str]], list[tuple[Any, ...]]]]:
    """Every table of the catalog file: its columns and types, and its rows in storage order (masked)."""
    con = duckdb.connect(path, read_only=True)
    try:
        out = {}
        for (name,) in con.execute("SELECT table_name FROM duckdb_tables() ORDER BY 1").fetchall():
            cols = [(r[0], r[1]) for r in con.execute(f'DESCRIBE "{name}"').fetchall()]
            masked = MASKED | (MASKED_DELETE_FILE if name == "ducklake_delete_file" else set())
            select = ", ".join("NULL" if c in masked else f'"{c}"' for c, _ in cols)
            out[name] = (cols, con.execute(f'SELECT {select} FROM "{name}" ORDER BY rowid').fetchall())
        return out
    finally:
        con.close()


def test_arrow_inserts_write_what_executemany_writes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[tuple[str, int, bool]] = []  # (sql, rows, went through Arrow)
    real = arrow_insert.insert_from_arrow

    def spy(conn: Any, prefix: str, sql: str, params: Any) -> bool:
        done = real(conn, prefix, sql, params)
        seen.append((sql, len(params), done))
        return done

    monkeypatch.setattr(catalog, "insert_from_arrow", spy)
    arrow_url = f"duckdb:///{tmp_path}/arrow.ducklake"
    data_path = str(tmp_path / "data") + "/"  # shared: file names are unique, and data_path is stored
    scenario(arrow_url, data_path)
    monkeypatch.setattr(catalog, "ARROW_INSERT_MIN_ROWS", 1 << 60)
    plain_url = f"duckdb:///{tmp_path}/plain.ducklake"
    scenario(plain_url, data_path)

    # every many-row INSERT into a catalog table went through Arrow, including the coalesced delete-file rows
    inserts = [s for s in seen if s[0].lstrip().upper().startswith("INSERT")]
    assert inserts and all(done for _, _, done in inserts), [s for s in inserts if not s[2]]
    targets = {sql.split()[2] for sql, _, _ in inserts}
    for table in ("ducklake_data_file", "ducklake_file_column_stats", "ducklake_file_partition_value",
                  "ducklake_delete_file", "ducklake_column", "ducklake_column_mapping", "ducklake_name_mapping",
                  "ducklake_table_column_stats"):
        assert "{p}" + table in targets, table

    arrow, plain = dump(f"{tmp_path}/arrow.ducklake"), dump(f"{tmp_path}/plain.ducklake")
    assert arrow.keys() == plain.keys()
    for name in arrow:
        assert arrow[name] == plain[name], name
    assert arrow["ducklake_data_file"][1] and arrow["ducklake_file_column_stats"][1]
    assert violations(arrow_url) == []


def test_rewrite_casts_every_value_to_the_ddl_type() -> None:
    sql, names = arrow_insert.rewrite(
        "INSERT INTO {p}ducklake_delete_file VALUES (:did, :tid, :begin, NULL, :fid, :path, :rel, 'parquet', :n, "
        ":size, :footer, NULL, :pmax)"
    )
    assert names == ("did", "tid", "begin", "fid", "path", "rel", "n", "size", "footer", "pmax")
    assert sql.startswith('INSERT INTO {p}ducklake_delete_file SELECT CAST(src."did" AS BIGINT), ')
    assert "CAST(NULL AS BIGINT)" in sql and "CAST('parquet' AS VARCHAR)" in sql and "CAST(NULL AS VARCHAR)" in sql
    assert 'CAST(src."rel" AS BOOLEAN)' in sql
    sql, names = arrow_insert.rewrite("INSERT INTO {p}ducklake_metadata (key, value) VALUES (:k, :v)")
    assert sql == ('INSERT INTO {p}ducklake_metadata (key, value) SELECT CAST(src."k" AS VARCHAR), '
                   'CAST(src."v" AS VARCHAR) FROM {src} AS src')
    # not handled: other statements, tables outside the catalog DDL, a wrong number of values
    assert arrow_insert.rewrite("UPDATE {p}ducklake_table_stats SET record_count = :rc WHERE table_id = :t") is None
    assert arrow_insert.rewrite("INSERT INTO {p}ducklake_inlined_data_1_1 VALUES (:a)") is None
    assert arrow_insert.rewrite("INSERT INTO {p}ducklake_tag VALUES (:a, :b)") is None


def test_values_arrow_cannot_type_fall_back_to_executemany(tmp_path: Path) -> None:
    assert arrow_insert.arrow_rows(["a"], [{"a": 1}, {"a": "x"}]) is None  # mixed types
    assert arrow_insert.arrow_rows(["a"], [{"a": 1}, {"b": 2}]) is None  # a missing value: executemany reports it
    assert arrow_insert.arrow_rows(["a"], [{"a": 1 << 70}, {"a": 1}]) is None  # beyond int64
    table = arrow_insert.arrow_rows(["a", "b"], [{"a": None, "b": True}, {"a": None, "b": None}])
    assert table is not None and table.schema.types == [pa.null(), pa.bool_()]
    # the fallback writes the rows all the same
    lake = DuckLake.create(f"duckdb:///{tmp_path}/c.ducklake", str(tmp_path / "d") + "/")
    with lake.db.write() as conn:
        lake.db.execute(conn, "INSERT INTO {p}ducklake_tag VALUES (:o, 1, NULL, :k, :v)",
                        [{"o": 1, "k": "a", "v": "x"}, {"o": "2", "k": "b", "v": None}])
    with lake.db.read() as conn:
        assert lake.db.query(conn, "SELECT object_id, key, value FROM {p}ducklake_tag ORDER BY 1") == [
            (1, "a", "x"), (2, "b", None)]
    lake.close()


def test_coalesce_merges_adjacent_runs_of_one_statement_only() -> None:
    a, b = "INSERT INTO {p}x VALUES (:v)", "DELETE FROM {p}x WHERE v = :v"
    out = coalesce([(a, {"v": 1}), (a, [{"v": 2}, {"v": 3}]), (b, {"v": 1}), (a, {"v": 4}), (a, None), (a, None),
                    (a, []), (a, {"v": 5})])
    assert out == [(a, [{"v": 1}, {"v": 2}, {"v": 3}]), (b, {"v": 1}), (a, {"v": 4}), (a, None), (a, None), (a, []),
                   (a, {"v": 5})]
