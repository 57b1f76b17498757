"""Every operation of the format layer, on files pyarrow writes, read back by DuckDB at every snapshot.

One scenario per backend: DDL, appends (nested types, partitions, a name-mapped file), deletes (first, repeated,
whole file), an update with preserved row ids, schema evolution, views, comments, renames and drops. After each commit
the expected rows are recorded; then DuckDB must return exactly them at that snapshot (current and AT VERSION), agree on
count(*), min/max and filters, and its ducklake_table_changes must equal ours. Then DuckDB keeps writing on top and
runs its maintenance, and we read what it produced.
"""

from __future__ import annotations

import datetime as dt
import os
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dbt.adapters.ducklake.lake.lake import DuckLake
from dbt.adapters.ducklake.lake.paths import data_file_name, join_path
from dbt.adapters.ducklake.lake.read.arrow_types import plain_type
from dbt.adapters.ducklake.lake.read.changes import read_changes
from dbt.adapters.ducklake.lake.read.scan import read_arrow
from dbt.adapters.ducklake.lake.records import Column, TableInfo
from dbt.adapters.ducklake.lake.write.datafiles import describe_parquet
from dbt.adapters.ducklake.lake.write.writer import write_data_files
from tests.lake.compare import arrow_rows
from tests.support import reference
from tests.support.invariants import violations

UTC = dt.timezone.utc

COLUMNS = [
    Column(0, "id", "int64", nullable=False),
    Column(0, "name", "varchar"),
    Column(0, "score", "float64"),
    Column(0, "qty", "int32"),
    Column(0, "amount", "decimal(10,2)"),
    Column(0, "day", "date"),
    Column(0, "ts", "timestamptz"),
    Column(0, "flag", "boolean"),
    Column(0, "tags", "list", children=(Column(0, "element", "varchar"),)),
    Column(0, "info", "struct", children=(Column(0, "a", "int32"), Column(0, "b", "varchar"))),
    Column(0, "attrs", "map", children=(Column(0, "key", "varchar", nullable=False), Column(0, "value", "int32"))),
]


def make_row(i: int) -> dict[str, Any]:
    return {
        "id": i,
        "name": None if i % 7 == 3 else f"name-{i:04d}",
        "score": i * 1.5 - 20,
        "qty": i % 13,
        "amount": Decimal(i * 125) / 100,
        "day": dt.date(2024, 1, 1) + dt.timedelta(days=i % 90),
        "ts": dt.datetime(2024, 1, 1, tzinfo=UTC) + dt.timedelta(hours=i),
        "flag": i % 2 == 0,
        "tags": None if i % 5 == 0 else [f"t{i}", None] if i % 3 == 0 else [f"t{i}"],
        "info": None if i % 6 == 0 else {"a": i, "b": None if i % 4 == 0 else f"b{i}"},
        "attrs": None if i % 8 == 0 else [("k", i), ("z", None)],
    }


class Model:
    """The rows each table should have after each snapshot."""

    def __init__(self) -> None:
        self.rows: dict[str, dict[int, dict[str, Any]]] = {}  # table -> id -> row
        self.columns: dict[str, list[Column]] = {}
        self.expected: list[tuple[int, str, list[Column], list[dict[str, Any]]]] = []

    def record(self, snapshot: int, *tables: str) -> None:
        for t in tables:
            self.expected.append((snapshot, t, list(self.columns[t]), [dict(r) for r in self.rows[t].values()]))


def rows_table(columns: list[Column], rows: list[dict[str, Any]]) -> pa.Table:
    return pa.Table.from_pylist(rows, schema=pa.schema([pa.field(c.name, plain_type(c)) for c in columns]))


def append(lake: DuckLake, table: TableInfo, rows: list[dict[str, Any]], message: str, **kw: Any) -> int:
    state = lake.snapshot()
    specs = write_data_files(table, state.table_path(table), rows_table(list(table.columns), rows), **kw)
    with lake.transaction(author="tests", commit_message=message) as tx:
        tx.add_data_files(table.schema_name, table.name, specs)
    assert tx.committed is not None
    return tx.committed.snapshot_id


def positions_of(lake: DuckLake, schema: str, name: str, ids: set[int]) -> dict[int, list[int]]:
    """{data_file_id: [positions]} of the rows with these ids (read through our reader's plan)."""
    state = lake.snapshot()
    table = state.table(schema, name)
    out: dict[int, list[int]] = {}
    for f in state.files(table):
        col = pq.read_table(f.path).column("id").to_pylist()
        hits = [p for p, v in enumerate(col) if v in ids]
        if hits:
            out[f.data_file_id] = hits
    return out


def delete_ids(lake: DuckLake, schema: str, name: str, ids: set[int], message: str) -> int:
    with lake.transaction(commit_message=message) as tx:
        for fid, positions in positions_of(lake, schema, name, ids).items():
            tx.delete_rows(schema, name, fid, positions)
    assert tx.committed is not None
    return tx.committed.snapshot_id


def test_every_operation_is_read_by_duckdb(catalog_url: str, data_path: str) -> None:
    lake = DuckLake.create(catalog_url, data_path)
    model = Model()

    # DDL: schema, table with nested types, comments ------------------------------------------------------------
    with lake.transaction(author="tests", commit_message="create", commit_extra_info='{"k": 1}') as tx:
        tx.create_schema("s1")
        table = tx.create_table("s1", "t", COLUMNS, comment="the main table")
        tx.set_comment("s1", "t", "the key", column="id")
    assert [c.column_id for c in table.all_columns()] == list(range(1, 17))
    model.columns["t"] = list(table.columns)
    model.rows["t"] = {}
    model.record(tx.committed.snapshot_id, "t")

    # appends: three files in one snapshot, then one more -----------------------------------------------------
    state = lake.snapshot()
    table = state.table("s1", "t")
    specs = []
    for lo, hi in ((0, 40), (40, 70), (70, 100)):
        rows = [make_row(i) for i in range(lo, hi)]
        specs += write_data_files(table, state.table_path(table), rows_table(list(table.columns), rows))
        model.rows["t"].update({r["id"]: r for r in rows})
    with lake.transaction(commit_message="insert 3 files") as tx:
        tx.add_data_files("s1", "t", specs)
    model.record(tx.committed.snapshot_id, "t")
    rows = [make_row(i) for i in range(100, 130)]
    model.rows["t"].update({r["id"]: r for r in rows})
    model.record(append(lake, table, rows, "insert 4th file"), "t")

    # deletes: first, repeated on the same file (1.0 partial delete file), a whole file ---------------------------
    for ids in ({1, 2, 3, 39}, {5, 6}, set(range(40, 70))):
        for i in ids:
            model.rows["t"].pop(i)
        model.record(delete_ids(lake, "s1", "t", ids, f"delete {len(ids)}"), "t")

    # update with preserved row ids: delete + insert with _ducklake_internal_row_id in one snapshot -------------
    state = lake.snapshot()
    table = state.table("s1", "t")
    current = {r["id"]: r for r in read_arrow(state, table).to_pylist()}
    upd_ids = {10, 11, 100}
    new_rows = [{**make_row(i), "name": f"updated-{i}"} for i in sorted(upd_ids)]
    specs = write_data_files(table, state.table_path(table), rows_table(list(table.columns), new_rows),
                             row_ids=[current[i]["rowid"] for i in sorted(upd_ids)])
    with lake.transaction(commit_message="update") as tx:
        for fid, positions in positions_of(lake, "s1", "t", upd_ids).items():
            tx.delete_rows("s1", "t", fid, positions)
        tx.add_data_files("s1", "t", specs)
    model.rows["t"].update({r["id"]: r for r in new_rows})
    model.record(tx.committed.snapshot_id, "t")

    # schema evolution: add column with default, rename, promote, drop; then append under the new schema ---------
    with lake.transaction(commit_message="evolve") as tx:
        tx.add_column("s1", "t", Column(0, "extra", "int32", initial_default="7", default_value="7"))
        tx.rename_column("s1", "t", "score", "points")
        tx.alter_column_type("s1", "t", "qty", "int64")
        tx.drop_column("s1", "t", "flag")
    table = lake.snapshot().table("s1", "t")
    model.columns["t"] = list(table.columns)
    for r in model.rows["t"].values():
        r["extra"] = 7
        r["points"] = r.pop("score")
        r.pop("flag")
    model.record(tx.committed.snapshot_id, "t")
    rows = []
    for i in range(130, 140):
        r = make_row(i)
        r["points"] = r.pop("score")
        r.pop("flag")
        r["extra"] = i
        rows.append(r)
    model.rows["t"].update({r["id"]: r for r in rows})
    model.record(append(lake, table, rows, "insert after evolve"), "t")

    # a file without field ids, registered with a name mapping ----------------------------------------------------
    state = lake.snapshot()
    table = state.table("s1", "t")
    rows = []
    for i in range(140, 145):
        r = make_row(i)
        r["points"] = r.pop("score")
        r.pop("flag")
        r["extra"] = None
        rows.append(r)
    plain = rows_table(list(table.columns), rows)  # no field-id metadata anywhere
    path = join_path(state.table_path(table), data_file_name())
    os.makedirs(os.path.dirname(path), exist_ok=True)
    pq.write_table(plain.select(list(reversed(plain.column_names))), path)  # reordered columns too
    spec = describe_parquet(path, table.columns, by="name")
    assert spec.name_mapping is not None
    with lake.transaction(commit_message="name-mapped file") as tx:
        tx.add_data_files("s1", "t", [spec])
    model.rows["t"].update({r["id"]: r for r in rows})
    model.record(tx.committed.snapshot_id, "t")

    # a partitioned table; the spec changes midway -------------------------------------------------------------
    pcols = [Column(0, "id", "int64"), Column(0, "cat", "varchar"), Column(0, "ts", "timestamp")]
    with lake.transaction(commit_message="create partitioned") as tx:
        ptable = tx.create_table("s1", "p", pcols, partition_by=[("cat", "identity"), ("ts", "year")])
    model.columns["p"] = list(ptable.columns)
    model.rows["p"] = {}
    prow = [{"id": i, "cat": [None, "a", "b"][i % 3], "ts": dt.datetime(2022 + i % 3, 1 + i % 12, 1)} for i in range(30)]
    ptable = lake.snapshot().table("s1", "p")
    model.rows["p"].update({r["id"]: r for r in prow})
    model.record(append(lake, ptable, prow, "insert partitioned"), "p")
    with lake.transaction(commit_message="repartition") as tx:
        tx.set_partitioning("s1", "p", [("ts", "month"), ("id", "bucket(4)")])
    ptable = lake.snapshot().table("s1", "p")
    prow = [{"id": i, "cat": "c", "ts": dt.datetime(2025, 1 + i % 12, 2)} for i in range(30, 50)]
    model.rows["p"].update({r["id"]: r for r in prow})
    model.record(append(lake, ptable, prow, "insert repartitioned"), "p")

    # views, renames, drops -------------------------------------------------------------------------------------
    with lake.transaction(commit_message="views") as tx:
        tx.create_view("s1", "v", "SELECT id, name FROM s1.t WHERE id > 100", column_aliases=["k", "label"],
                       comment="a view")
        tx.create_schema("gone")
        tx.create_table("gone", "tmp", [Column(0, "x", "int32")])
    with lake.transaction(commit_message="renames and drops") as tx:
        tx.rename_view("s1", "v", "v2")
        tx.drop_schema("gone", cascade=True)
    last = tx.committed.snapshot_id
    lake.close()

    assert violations(catalog_url) == []
    check_with_duckdb(catalog_url, model, last)
    duckdb_writes_on_top(catalog_url)


def check_with_duckdb(catalog_url: str, model: Model, last: int) -> None:
    with reference.attached(catalog_url) as con:
        con.execute("SET TimeZone = 'UTC'")
        for snapshot, name, columns, rows in model.expected:
            got = con.execute(f"SELECT * FROM lake.s1.{name} AT (VERSION => {snapshot})").to_arrow_table()
            assert arrow_rows(got) == arrow_rows(rows_table(columns, rows)), f"s1.{name} at snapshot {snapshot}"
            count, lo, hi = con.execute(
                f"SELECT count(*), min(id), max(id) FROM lake.s1.{name} AT (VERSION => {snapshot})").fetchone()
            ids = [r["id"] for r in rows]
            assert (count, lo, hi) == (len(rows), min(ids, default=None), max(ids, default=None)), snapshot
            for k in (0, 50, 101, 139):
                n = con.execute(f"SELECT count(*) FROM lake.s1.{name} AT (VERSION => {snapshot}) WHERE id >= {k}"
                                ).fetchone()[0]
                assert n == sum(1 for i in ids if i >= k), (snapshot, k)
        # the latest state through the current (non time-travel) path, and metadata DuckDB shows
        latest_t = [rows for _s, name, _c, rows in model.expected if name == "t"][-1]
        assert con.execute("SELECT count(*) FROM lake.s1.t").fetchone()[0] == len(latest_t)
        assert con.execute("SELECT comment FROM duckdb_tables() WHERE table_name = 't' AND database_name = 'lake'"
                           ).fetchone()[0] == "the main table"
        assert con.execute("SELECT comment FROM duckdb_columns() WHERE table_name = 't' AND column_name = 'id' "
                           "AND database_name = 'lake'").fetchone()[0] == "the key"
        assert con.execute("SELECT * FROM lake.s1.v2 ORDER BY k LIMIT 2").fetchall() == [
            (101, None), (102, "name-0102")]
        snaps = con.execute("SELECT snapshot_id, author, commit_message, commit_extra_info FROM lake.snapshots() "
                            "ORDER BY 1").fetchall()
        assert snaps[1] == (1, "tests", "create", '{"k": 1}')
        assert snaps[-1][0] == last
        # DuckDB's change feed over every single snapshot and the whole range, and rowids at every snapshot
        feeds = {}
        for start, end in [(s, s) for s, *_ in snaps[1:]] + [(1, last)]:
            for name in ("t", "p"):
                try:
                    feeds[(name, start, end)] = con.execute(
                        f"SELECT * FROM ducklake_table_changes('lake', 's1', '{name}', {start}, {end})").to_arrow_table()
                except Exception:  # the table does not exist at the end snapshot
                    continue
        with_rowid = {(name, snapshot): con.execute(
            f"SELECT rowid, * FROM lake.s1.{name} AT (VERSION => {snapshot})").to_arrow_table()
            for snapshot, name, _c, _r in model.expected}
    # DuckDB's file handles are closed now (a DuckDB catalog file is open in one place at a time)
    lake = DuckLake.open(catalog_url)
    try:
        assert len(feeds) > 20
        for (name, start, end), theirs in feeds.items():
            assert arrow_rows(read_changes(lake, "s1", name, start, end)) == arrow_rows(theirs), (name, start, end)
        for (name, snapshot), theirs in with_rowid.items():
            st = lake.snapshot(snapshot)
            assert arrow_rows(read_arrow(st, st.table("s1", name))) == arrow_rows(theirs), (name, snapshot)
    finally:
        lake.close()


def duckdb_writes_on_top(catalog_url: str) -> None:
    """DuckDB inserts (inlined and not), deletes, updates, compacts, expires and cleans up on our lake."""
    with reference.attached(catalog_url) as con:
        con.execute("SET TimeZone = 'UTC'")
        con.execute("INSERT INTO lake.s1.p VALUES (1000, 'x', TIMESTAMP '2025-05-05')")  # inlined (<= 10 rows)
        con.execute("INSERT INTO lake.s1.p SELECT 2000 + i, 'y', TIMESTAMP '2025-06-06' FROM range(50) r(i)")
        con.execute("DELETE FROM lake.s1.p WHERE id < 5")
        con.execute("UPDATE lake.s1.t SET name = 'duck' WHERE id IN (0, 20, 120)")
        con.execute("CALL ducklake_merge_adjacent_files('lake')")
        latest = con.execute("SELECT max(snapshot_id) FROM lake.snapshots()").fetchone()[0]
        con.execute(f"CALL ducklake_expire_snapshots('lake', versions => [{latest - 3}, {latest - 4}])")
        con.execute("CALL ducklake_cleanup_old_files('lake', cleanup_all => true)")
        expected_t = con.execute("SELECT rowid, * FROM lake.s1.t").to_arrow_table()
        expected_p = con.execute("SELECT rowid, * FROM lake.s1.p").to_arrow_table()
        alive = [r[0] for r in con.execute("SELECT snapshot_id FROM lake.snapshots() ORDER BY 1").fetchall()]
        history = {s: con.execute(f"SELECT rowid, * FROM lake.s1.t AT (VERSION => {s})").to_arrow_table()
                   for s in alive[-6:]}
    lake = DuckLake.open(catalog_url)
    try:
        st = lake.snapshot()
        assert arrow_rows(read_arrow(st, st.table("s1", "t"))) == arrow_rows(expected_t)
        assert arrow_rows(read_arrow(st, st.table("s1", "p"))) == arrow_rows(expected_p)
        for s, expected in history.items():
            st = lake.snapshot(s)
            assert arrow_rows(read_arrow(st, st.table("s1", "t"))) == arrow_rows(expected), s
        # and we keep writing after DuckDB's maintenance: DuckDB reads that too
        table = lake.snapshot().table("s1", "p")
        snap = append(lake, table, [{"id": 5000, "cat": "z", "ts": dt.datetime(2026, 1, 1)}], "after duckdb")
    finally:
        lake.close()
    with reference.attached(catalog_url) as con:
        got = con.execute(f"SELECT count(*) FROM lake.s1.p AT (VERSION => {snap}) WHERE id = 5000").fetchone()[0]
        assert got == 1
    assert violations(catalog_url) == []


@pytest.fixture(autouse=True)
def _utc(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TZ", "UTC")

