"""Each writer pitfall of the DuckLake protocol (as the reference implements it): our layer avoids it, and, where
cheap, the pitfall really matters: a copy of our catalog mutated to the wrong value makes DuckDB 1.5.5 answer wrongly
or fail, or `violations()` flags it. Then bad input: a clear error naming the problem, and the lake exactly as before.

Most pitfall tests run on one SQLite-catalog lake built once (`base`) and copied per test (a copy of the catalog file
points at the same data directory, so mutations never touch the original). The bad-input tests run on every backend.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import os
import shutil
import socket
import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from dbt.adapters.ducklake.lake.catalog import ddl
from dbt.adapters.ducklake.lake.catalog.database import CatalogDB
from dbt.adapters.ducklake.lake.catalog.url import parse_catalog
from dbt.adapters.ducklake.lake.errors import (
    CatalogConnectionError,
    CommitConflictError,
    DuckLakeError,
    InvalidDataFileError,
    NotALakeError,
    SchemaEvolutionError,
    SchemaExistsError,
    TableExistsError,
    UnsupportedTypeError,
    UnsupportedVersionError,
)
from dbt.adapters.ducklake.lake.lake import DuckLake
from dbt.adapters.ducklake.lake.paths import data_file_name, join_path
from dbt.adapters.ducklake.lake.records import Column, TableInfo
from dbt.adapters.ducklake.lake.types import arrow_schema
from dbt.adapters.ducklake.lake.write.datafiles import describe_parquet
from dbt.adapters.ducklake.lake.write.writer import write_data_files
from tests.conftest import CATALOG_BACKENDS, _catalog_url
from tests.support import reference
from tests.support.invariants import violations

UTC = dt.timezone.utc

COLUMNS = [
    Column(0, "id", "int64"),
    Column(0, "f32", "float32"),
    Column(0, "f64", "float64"),
    Column(0, "dec", "decimal(10,2)"),
    Column(0, "ts", "timestamp"),
    Column(0, "tstz", "timestamptz"),
    Column(0, "d", "date"),
    Column(0, "b", "boolean"),
    Column(0, "s", "varchar"),
    Column(0, "bl", "blob"),
    Column(0, "l", "list", children=(Column(0, "element", "int32"),)),
    Column(0, "st", "struct", children=(Column(0, "a", "int32"), Column(0, "b", "varchar"))),
    Column(0, "m", "map", children=(Column(0, "key", "varchar", nullable=False), Column(0, "value", "int32"))),
]
# DuckDB's SQL type of each scalar column (for casts of stats strings and for literals)
SQL_TYPES = {"id": "BIGINT", "f32": "FLOAT", "f64": "DOUBLE", "dec": "DECIMAL(10,2)", "ts": "TIMESTAMP",
             "tstz": "TIMESTAMPTZ", "d": "DATE", "b": "BOOLEAN", "s": "VARCHAR", "bl": "BLOB"}
# ... and of each leaf's DuckLake type
LEAF_TYPES = {"int32": "INTEGER", "int64": "BIGINT", "float32": "FLOAT", "float64": "DOUBLE",
              "decimal(10,2)": "DECIMAL(10,2)", "timestamp": "TIMESTAMP", "timestamptz": "TIMESTAMPTZ", "date": "DATE",
              "boolean": "BOOLEAN", "varchar": "VARCHAR", "blob": "BLOB"}


def make_row(i: int) -> dict[str, Any]:
    return {
        "id": i,
        "f32": i / 3,
        "f64": i * 1.1 - 5,
        "dec": Decimal(i * 125) / 100,
        "ts": dt.datetime(2024, 1, 1, 12, 30, 15, 123456) + dt.timedelta(days=i),
        "tstz": dt.datetime(2024, 1, 1, tzinfo=UTC) + dt.timedelta(hours=i, seconds=0.5),
        "d": dt.date(2024, 2, 1) + dt.timedelta(days=i),
        "b": i % 3 == 0,
        "s": None if i == 7 else f"s{i:02d}",
        "bl": bytes([i, 255 - i]),
        "l": [i, i + 1],
        "st": {"a": i, "b": f"b{i}"},
        "m": [("k", i)],
    }


# ---------------------------------------------------------------------------------------------------------------
# helpers


def arrow_rows(table: TableInfo, rows: list[dict[str, Any]]) -> pa.Table:
    return pa.Table.from_pylist(rows, schema=arrow_schema(table.columns))


def append(lake: DuckLake, schema: str, name: str, rows: list[dict[str, Any]], **kw: Any) -> int:
    state = lake.snapshot()
    table = state.table(schema, name)
    specs = write_data_files(table, state.table_path(table), arrow_rows(table, rows), **kw)
    with lake.transaction() as tx:
        tx.add_data_files(schema, name, specs)
    assert tx.committed is not None
    return tx.committed.snapshot_id


def positions_of(lake: DuckLake, schema: str, name: str, ids: set[int]) -> dict[int, list[int]]:
    """{data_file_id: [positions]} of the rows with these ids."""
    state = lake.snapshot()
    out: dict[int, list[int]] = {}
    for f in state.files(state.table(schema, name)):
        hits = [p for p, v in enumerate(pq.read_table(f.path).column("id").to_pylist()) if v in ids]
        if hits:
            out[f.data_file_id] = hits
    return out


def delete_ids(lake: DuckLake, schema: str, name: str, ids: set[int]) -> int:
    with lake.transaction() as tx:
        for fid, positions in positions_of(lake, schema, name, ids).items():
            tx.delete_rows(schema, name, fid, positions)
    assert tx.committed is not None
    return tx.committed.snapshot_id


def sqlite_file(url: str) -> str:
    path = parse_catalog(url).file_path
    assert path is not None
    return path


def mutate(url: str, *statements: str, params: tuple[Any, ...] = ()) -> None:
    """Apply raw SQL to a SQLite catalog (the 'wrong value' of a pitfall)."""
    con = sqlite3.connect(sqlite_file(url))
    try:
        for s in statements:
            con.execute(s, params if "?" in s else ())
        con.commit()
    finally:
        con.close()


def catalog_query(url: str, sql: str) -> list[tuple[Any, ...]]:
    con = sqlite3.connect(sqlite_file(url))
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def duck(url: str, *statements: str) -> list[tuple[Any, ...]]:
    """DuckDB's answer to the last statement, on a fresh attach of the lake (session time zone UTC)."""
    with reference.attached(url) as con:
        con.execute("SET TimeZone = 'UTC'")
        for s in statements[:-1]:
            con.execute(s)
        return con.execute(statements[-1]).fetchall()


def ducks(url: str, *queries: str) -> list[list[tuple[Any, ...]]]:
    """DuckDB's answers to several queries, in one session (attaching costs more than a small query)."""
    with reference.attached(url) as con:
        con.execute("SET TimeZone = 'UTC'")
        return [con.execute(q).fetchall() for q in queries]


def duck_error(url: str, *statements: str) -> str:
    with pytest.raises(duckdb.Error) as err:
        duck(url, *statements)
    return str(err.value)


@dataclass(frozen=True)
class Base:
    url: str
    data_path: str
    rows: list[dict[str, Any]]


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Base:
    """A SQLite-catalog lake: s1.t (COLUMNS) with two data files (ids 0-9, 10-19) in two commits."""
    root = tmp_path_factory.mktemp("pitfalls_base")
    (root / "data").mkdir()
    url = f"sqlite:///{root}/lake.sqlite"
    lake = DuckLake.create(url, str(root / "data") + "/")
    with lake.transaction() as tx:
        tx.create_schema("s1")
        tx.create_table("s1", "t", COLUMNS)
    append(lake, "s1", "t", [make_row(i) for i in range(10)])
    append(lake, "s1", "t", [make_row(i) for i in range(10, 20)])
    lake.close()
    return Base(url, str(root / "data") + "/", [make_row(i) for i in range(20)])


@pytest.fixture
def copy(base: Base, tmp_path: Path) -> Callable[[], str]:
    """Copies of the base catalog (same data directory), one new file per call."""
    counter = iter(range(1000))

    def make() -> str:
        target = tmp_path / f"copy{next(counter)}.sqlite"
        shutil.copy(sqlite_file(base.url), target)
        return f"sqlite:///{target}"

    return make


def table_of(url: str, name: str = "t") -> TableInfo:
    lake = DuckLake.open(url)
    try:
        return lake.snapshot().table("s1", name)
    finally:
        lake.close()


def live_files(url: str) -> list[tuple[Any, ...]]:
    """(data_file_id, absolute path, record_count, row_id_start) of the live data files of s1.t."""
    lake = DuckLake.open(url)
    try:
        state = lake.snapshot()
        return [(f.data_file_id, f.path, f.record_count, f.row_id_start) for f in state.files(state.table("s1", "t"))]
    finally:
        lake.close()


def real_footer_size(path: str) -> int:
    with open(path, "rb") as fh:
        fh.seek(-8, os.SEEK_END)
        tail = fh.read(8)
    assert tail[4:] == b"PAR1"
    return int.from_bytes(tail[:4], "little")


def register_file(url: str, data_file_id: int, path: str) -> None:
    """Point a data file row of a (copied) catalog at another Parquet file, with exact size and footer."""
    mutate(url, "UPDATE ducklake_data_file SET path = ?, path_is_relative = 0, file_size_bytes = ?, footer_size = ? "
                f"WHERE data_file_id = {data_file_id}", params=(path, os.path.getsize(path), real_footer_size(path)))


# ---------------------------------------------------------------------------------------------------------------
# (1) stats: exact bounds, castable strings in DuckDB's format


def _truth(paths: list[str]) -> pa.Table:
    return pa.concat_tables([pq.read_table(p) for p in paths])


def _leaf_values(table: pa.Table, column_id: int, columns: list[Column]) -> tuple[pa.Array | pa.ChunkedArray, str]:
    """The values of one leaf (by column id) of a file read with pyarrow, and its DuckLake type."""
    for top in columns:
        col = table.column(top.name)
        if top.column_id == column_id:
            return col, top.type
        for child in top.children:
            if child.column_id != column_id:
                continue
            flat = col.combine_chunks()
            if top.type == "list":
                return pc.list_flatten(flat), child.type
            if top.type == "struct":
                return flat.field(child.name), child.type
            return (flat.keys if child.name == "key" else flat.items), child.type
    raise AssertionError(f"no leaf {column_id}")


def _check_bounds(con: duckdb.DuckDBPyConnection, where: str, values: Any, type_: str, lo: str | None,
                  hi: str | None) -> list[str]:
    problems = []
    mm = pc.min_max(values)
    want = (mm["min"].as_py(), mm["max"].as_py())
    sql_type = LEAF_TYPES[type_]
    for name, text, expected in (("min", lo, want[0]), ("max", hi, want[1])):
        if text is None:
            problems.append(f"{where}: {name} is NULL")
            continue
        if sql_type == "BLOB":  # DuckDB writes blob bounds as uppercase hex
            got = con.execute("SELECT unhex($1)", [text]).fetchone()[0]
            if text != text.upper():
                problems.append(f"{where}: blob {name} {text!r} is not uppercase hex")
        else:
            got = con.execute(f"SELECT TRY_CAST($1 AS {sql_type})", [text]).fetchone()[0]
        if got is None:
            problems.append(f"{where}: {name} {text!r} does not cast to {sql_type}")
        elif got != expected:
            problems.append(f"{where}: {name} {text!r} reads {got!r}, the data's {name} is {expected!r}")
    return problems


def test_stats_strings_are_exact_bounds_and_castable(base: Base) -> None:
    """Every file and table stats string of every leaf casts (DuckDB TRY_CAST) to exactly the data's min/max."""
    files = live_files(base.url)
    columns = list(table_of(base.url).columns)
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    problems: list[str] = []
    leaves = [leaf.column_id for top in columns for leaf in top.leaves()]
    stats = catalog_query(base.url, "SELECT data_file_id, column_id, min_value, max_value, null_count, value_count "
                                    "FROM ducklake_file_column_stats")
    by_file = {(r[0], r[1]): r[2:] for r in stats}
    for fid, path, _rc, _start in files:
        data = pq.read_table(path)
        for cid in leaves:
            values, type_ = _leaf_values(data, cid, columns)
            assert (fid, cid) in by_file, f"file {fid} has no stats row for leaf {cid}"
            lo, hi, nulls, count = by_file[(fid, cid)]
            problems += _check_bounds(con, f"file {fid} column {cid}", values, type_, lo, hi)
            if (nulls, count) != (values.null_count, len(values) - values.null_count):
                problems.append(f"file {fid} column {cid}: null/value counts {(nulls, count)}")
    assert {r[1] for r in stats} == set(leaves), "stats rows for the leaves exactly (none for list/struct/map)"
    everything = _truth([f[1] for f in files])
    table_stats = catalog_query(base.url, "SELECT column_id, min_value, max_value, contains_null "
                                          "FROM ducklake_table_column_stats")
    assert {r[0] for r in table_stats} == set(leaves)
    for cid, lo, hi, has_null in table_stats:
        values, type_ = _leaf_values(everything, cid, columns)
        problems += _check_bounds(con, f"table column {cid}", values, type_, lo, hi)
        if bool(has_null) != (values.null_count > 0):
            problems.append(f"table column {cid}: contains_null {has_null}")
    con.close()
    assert problems == []
    # the formats DuckDB writes, for a few exact strings
    got = {r[1]: (r[2], r[3]) for r in stats if r[0] == files[1][0]}
    assert got[1] == ("10", "19")
    assert got[4] == ("12.50", "23.75")
    assert got[5] == ("2024-01-11 12:30:15.123456", "2024-01-20 12:30:15.123456")
    assert got[6] == ("2024-01-01 10:00:00.5+00", "2024-01-01 19:00:00.5+00")
    assert got[7] == ("2024-02-11", "2024-02-20")
    assert got[8] == ("0", "1")
    assert got[10] == ("0AF5", "13EC")


def test_duckdb_min_max_and_filters_are_right_at_the_bounds(base: Base) -> None:
    """DuckDB answers MIN/MAX from our stats, and prunes files with them: both right at the exact bounds."""
    truth = _truth([f[1] for f in live_files(base.url)]).drop_columns(["l", "st", "m"])
    with reference.attached(base.url) as con:
        con.execute("SET TimeZone = 'UTC'")
        con.register("truth", truth)
        for col in SQL_TYPES:
            q = f"SELECT min({col}), max({col}), count({col}) FROM {{src}}"
            assert con.execute(q.format(src="lake.s1.t")).fetchall() == con.execute(q.format(src="truth")).fetchall()
            lo, hi = con.execute(f"SELECT min({col})::VARCHAR, max({col})::VARCHAR FROM truth").fetchone()
            for op, text in ((">=", hi), (">", hi), ("<=", lo), ("<", lo), (">=", lo), ("=", hi)):
                literal = "'" + text.replace("'", "''") + f"'::{SQL_TYPES[col]}"
                q = f"SELECT count(*) FROM {{src}} WHERE {col} {op} {literal}"
                got = con.execute(q.format(src="lake.s1.t")).fetchone()[0]
                assert got == con.execute(q.format(src="truth")).fetchone()[0], q
        # and the plan really answers MIN/MAX from metadata (no Parquet scan), so stats are what it returns
        plan = con.execute("EXPLAIN SELECT min(id), max(id) FROM lake.s1.t").fetchall()[0][1]
        assert "COLUMN_DATA_SCAN" in plan and "DUCKLAKE_SCAN" not in plan


def test_wrong_stats_make_duckdb_answer_wrongly(copy: Callable[[], str]) -> None:
    widened = copy()
    mutate(widened, "UPDATE ducklake_table_column_stats SET min_value = '-100' WHERE column_id = 1")
    assert duck(widened, "SELECT min(id), max(id) FROM lake.s1.t") == [(-100, 19)]  # the stats are the answer
    narrowed = copy()
    mutate(narrowed, "UPDATE ducklake_table_column_stats SET max_value = '3' WHERE column_id = 1")
    assert duck(narrowed, "SELECT count(*) FROM lake.s1.t WHERE id >= 4") == [(0,)]  # 16 rows silently dropped
    uncastable = copy()
    mutate(uncastable, "UPDATE ducklake_file_column_stats SET max_value = 'abc' WHERE column_id = 1 AND data_file_id = 1")
    assert duck(uncastable, "SELECT count(*) FROM lake.s1.t WHERE id >= 15") == [(0,)]  # the file is skipped
    assert any("not castable" in v for v in violations(uncastable))
    too_small = copy()
    mutate(too_small, "UPDATE ducklake_file_column_stats SET max_value = '18' WHERE column_id = 1 AND data_file_id = 1")
    assert duck(too_small, "SELECT count(*) FROM lake.s1.t WHERE id >= 19") == [(0,)]
    assert any("outside" in v for v in violations(too_small))


# ---------------------------------------------------------------------------------------------------------------
# (2) record_count: rows ever added, not reduced by deletes


def test_record_count_counts_rows_ever_added(copy: Callable[[], str]) -> None:
    url = copy()
    lake = DuckLake.open(url)
    delete_ids(lake, "s1", "t", {0, 19})  # the min and the max row
    delete_ids(lake, "s1", "t", {5})
    stats = lake.snapshot().table_stats(lake.snapshot().table("s1", "t"))
    lake.close()
    assert stats is not None and (stats.record_count, stats.next_row_id) == (20, 20)
    assert catalog_query(url, "SELECT sum(record_count) FROM ducklake_data_file WHERE end_snapshot IS NULL") == [(20,)]
    assert duck(url, "SELECT count(*), min(id), max(id) FROM lake.s1.t") == [(17, 1, 18)]  # scanned: right
    assert violations(url) == []
    # the pitfall: a writer that decrements record_count on delete makes DuckDB answer MIN/MAX from stale stats
    mutate(url, "UPDATE ducklake_table_stats SET record_count = 17")
    assert duck(url, "SELECT min(id), max(id) FROM lake.s1.t") == [(0, 19)]


# ---------------------------------------------------------------------------------------------------------------
# (3) footer_size


def test_footer_size_is_the_real_one(copy: Callable[[], str]) -> None:
    url = copy()
    lake = DuckLake.open(url)
    delete_ids(lake, "s1", "t", {3})
    lake.close()
    data = catalog_query(url, "SELECT data_file_id, footer_size, file_size_bytes FROM ducklake_data_file")
    for (fid, path, _rc, _start) in live_files(url):
        row = next(r for r in data if r[0] == fid)
        assert row[1:] == (real_footer_size(path), os.path.getsize(path))
    (did, footer, size, path), = catalog_query(
        url, "SELECT delete_file_id, footer_size, file_size_bytes, path FROM ducklake_delete_file")
    full = os.path.join(os.path.dirname(live_files(url)[0][1]), path)
    assert (footer, size) == (real_footer_size(full), os.path.getsize(full))
    assert violations(url) == []
    # the pitfall: a wrong footer_size makes DuckDB fail to read the file
    mutate(url, "UPDATE ducklake_data_file SET footer_size = footer_size + 1 WHERE data_file_id = 0")
    assert "footer length" in duck_error(url, "SELECT sum(id) FROM lake.s1.t")
    assert any("footer_size" in v for v in violations(url))


# ---------------------------------------------------------------------------------------------------------------
# (4) field ids on every nested node


def test_field_ids_on_every_nested_node(base: Base, copy: Callable[[], str]) -> None:
    table = table_of(base.url)
    fid, path, _rc, _start = live_files(base.url)[0]
    schema = pq.read_schema(path)

    def field_id(f: pa.Field) -> int | None:
        return int(f.metadata[b"PARQUET:field_id"]) if f.metadata and b"PARQUET:field_id" in f.metadata else None

    for col in table.columns:
        f = schema.field(col.name)
        assert field_id(f) == col.column_id
        if col.type == "list":
            assert field_id(f.type.value_field) == col.children[0].column_id
        elif col.type == "struct":
            assert [field_id(f.type.field(i)) for i in range(f.type.num_fields)] == [c.column_id for c in col.children]
        elif col.type == "map":
            assert (field_id(f.type.key_field), field_id(f.type.item_field)) == tuple(c.column_id for c in col.children)
            assert not f.type.key_field.nullable  # map keys are required
    # in the Parquet schema itself (as DuckDB reads it): the repeated groups ('list', 'key_value') carry no id,
    # every other node below the root does
    nodes = duckdb.execute("SELECT name, repetition_type, field_id FROM parquet_schema($1)", [path]).fetchall()[1:]
    assert len(nodes) == 20  # 10 scalars + l/list/element + st/a/b + m/key_value/key/value
    for name, repetition, fid_ in nodes:
        if repetition == "REPEATED":
            assert fid_ is None, f"repeated group {name} has a field id"
        else:
            assert fid_ is not None, f"node {name} has no field id"
    expected = ([3, 4], {"a": 3, "b": "b3"}, {"k": 3})
    assert duck(base.url, "SELECT l, st, m FROM lake.s1.t WHERE id = 3") == [expected]

    # the pitfall: the same file without ids below the top level (what Spark writes) reads NULL, without an error
    stripped = pa.schema([pa.field(f.name, _strip_nested_ids(f.type), f.nullable, f.metadata) for f in schema])
    bare = join_path(os.path.dirname(path), "no-nested-ids-" + data_file_name())
    pq.write_table(pq.read_table(path).cast(stripped), bare)
    ids = dict(duckdb.execute("SELECT name, field_id FROM parquet_schema($1)", [bare]).fetchall()[1:])
    assert ids["l"] == 11 and ids["element"] is None and ids["a"] is None and ids["value"] is None
    url = copy()
    register_file(url, fid, bare)
    assert duck(url, "SELECT l, st FROM lake.s1.t WHERE id = 3") == [([None, None], {"a": None, "b": None})]
    assert "MAP" in duck_error(url, "SELECT m FROM lake.s1.t WHERE id = 3")  # a map's required key cannot be NULL
    assert any("nested node" in v for v in violations(url))


def _strip_nested_ids(t: pa.DataType) -> pa.DataType:
    if pa.types.is_list(t):
        return pa.list_(pa.field(t.value_field.name, _strip_nested_ids(t.value_type), t.value_field.nullable))
    if pa.types.is_struct(t):
        return pa.struct([pa.field(f.name, _strip_nested_ids(f.type), f.nullable) for f in t])
    if pa.types.is_map(t):
        return pa.map_(pa.field("key", t.key_type, False), pa.field("value", _strip_nested_ids(t.item_type)))
    return t


# ---------------------------------------------------------------------------------------------------------------
# (5) delete file layout; (6) one live delete file per data file


def _delete_file(url: str) -> tuple[tuple[Any, ...], str]:
    (row,) = catalog_query(url, "SELECT delete_file_id, data_file_id, begin_snapshot, end_snapshot, delete_count, "
                                "partial_max, path, path_is_relative FROM ducklake_delete_file")
    table_dir = os.path.dirname(live_files(url)[0][1])
    return row, os.path.join(table_dir, row[6]) if row[7] else row[6]


def test_delete_file_layout(copy: Callable[[], str]) -> None:
    url = copy()
    lake = DuckLake.open(url)
    fid = live_files(url)[0][0]
    with lake.transaction() as tx:
        tx.delete_rows("s1", "t", fid, [5, 2])  # given unsorted
    first = tx.committed.snapshot_id
    _row, path = _delete_file(url)
    t = pq.read_table(path)
    assert t.column_names == ["file_path", "pos"]
    assert [t.schema.field(i).type for i in range(2)] == [pa.string(), pa.int64()]
    assert [t.schema.field(i).metadata[b"PARQUET:field_id"] for i in range(2)] == [b"2147483646", b"2147483645"]
    assert t.column("pos").to_pylist() == [2, 5]
    with lake.transaction() as tx:
        tx.delete_rows("s1", "t", fid, [3])
    second = tx.committed.snapshot_id
    lake.close()
    _row, path = _delete_file(url)
    t = pq.read_table(path)
    assert t.column_names == ["file_path", "pos", "_ducklake_internal_snapshot_id"]
    assert t.schema.field(2).type == pa.int64() and t.schema.field(2).metadata[b"PARQUET:field_id"] == b"2147483539"
    assert t.column("pos").to_pylist() == [2, 3, 5]
    assert t.column("_ducklake_internal_snapshot_id").to_pylist() == [first, second, first]
    assert duck(url, "SELECT list(id ORDER BY id) FROM lake.s1.t WHERE id < 10") == [([0, 1, 4, 6, 7, 8, 9],)]
    assert violations(url) == []
    # the pitfall: an unsorted or an int32 `pos` makes DuckDB fail
    for name, bad in (("unsorted", t.take([2, 1, 0])),
                      ("int32", t.set_column(1, pa.field("pos", pa.int32(), metadata=t.schema.field(1).metadata),
                                             t.column(1).cast(pa.int32())))):
        wrong = path.replace(".parquet", f"-{name}.parquet")
        pq.write_table(bad, wrong)
        broken = copy()
        shutil.copy(sqlite_file(url), sqlite_file(broken))
        mutate(broken, "UPDATE ducklake_delete_file SET path = ?, path_is_relative = 0, file_size_bytes = ?, "
                       "footer_size = ?", params=(wrong, os.path.getsize(wrong), real_footer_size(wrong)))
        assert "delete" in duck_error(broken, "SELECT sum(id) FROM lake.s1.t")  # a scan (count(*) is metadata)
        assert violations(broken), name


def test_one_live_delete_file_per_data_file(copy: Callable[[], str]) -> None:
    url = copy()
    lake = DuckLake.open(url)
    fid = live_files(url)[0][0]
    first = delete_ids(lake, "s1", "t", {1, 2})
    (old_id, *_), old_path = _delete_file(url)
    second = delete_ids(lake, "s1", "t", {4})
    lake.close()
    # the old row is gone (DELETEd, not end-snapshotted): one row in all, begun at the first delete
    row, new_path = _delete_file(url)
    assert row[:6] == (row[0], fid, first, None, 3, second)
    assert row[0] != old_id and os.path.exists(new_path)
    # ... and the old file is scheduled for deletion (path relative to data_path) but still there for time travel
    (sched,) = catalog_query(url, "SELECT data_file_id, path, path_is_relative FROM ducklake_files_scheduled_for_deletion")
    data_path = DuckLake.open(url).data_path  # (SQLite catalog, no pool: nothing to close)
    assert sched[0] == old_id and sched[2] == 1 and os.path.join(data_path, sched[1]) == old_path
    assert os.path.exists(old_path)
    q = "SELECT list(id ORDER BY id) FROM lake.s1.t AT (VERSION => {}) WHERE id < 6"
    at_first, at_second, count, feed = ducks(
        url, q.format(first), q.format(second), "SELECT count(*) FROM lake.s1.t",
        f"SELECT change_type, id FROM ducklake_table_changes('lake', 's1', 't', {first}, {second}) ORDER BY id")
    assert (at_first, at_second, count) == ([([0, 3, 4, 5],)], [([0, 3, 5],)], [(17,)])
    assert feed == [("delete", 1), ("delete", 2), ("delete", 4)]  # each delete once (no 0.3-style double report)
    assert violations(url) == []
    # the pitfall: a second live delete file for the same data file (the old one kept alive) breaks the scan
    ghost = join_path(os.path.dirname(live_files(url)[0][1]), "ghost-delete.parquet")
    shutil.copy(old_path, ghost)
    mutate(url, "INSERT INTO ducklake_delete_file VALUES (?, 2, ?, NULL, ?, ?, 0, 'parquet', 2, ?, ?, NULL, NULL)",
           params=(old_id, first, fid, ghost, os.path.getsize(ghost), real_footer_size(ghost)))
    assert duck(url, "SELECT count(*), count(DISTINCT id) FROM (SELECT id FROM lake.s1.t)") != [(17, 17)]
    assert any("2 live delete files" in v for v in violations(url))


# ---------------------------------------------------------------------------------------------------------------
# (7) id counters; (8) schema_version and schema_versions; (9) change strings — on one lake with a history


@dataclass
class History:
    url: str
    snaps: dict[str, int]  # step label -> snapshot id


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> History:
    """A SQLite lake with one commit per kind of change, including a name-mapped file and odd names."""
    root = tmp_path_factory.mktemp("pitfalls_history")
    url = f"sqlite:///{root}/lake.sqlite"
    lake = DuckLake.create(url, str(root / "data") + "/")
    snaps: dict[str, int] = {}
    cols = [Column(0, "id", "int64"), Column(0, "cat", "varchar")]

    def step(label: str, fn: Callable[[Any], None]) -> None:
        with lake.transaction() as tx:
            fn(tx)
        snaps[label] = tx.committed.snapshot_id

    step("create", lambda tx: (tx.create_schema("s1"), tx.create_table("s1", "t", cols)))
    snaps["insert"] = append(lake, "s1", "t", [{"id": i, "cat": "a"} for i in range(5)])
    snaps["insert2"] = append(lake, "s1", "t", [{"id": i, "cat": "b"} for i in range(5, 10)])
    step("comment table", lambda tx: tx.set_comment("s1", "t", "hi"))
    step("comment column", lambda tx: tx.set_comment("s1", "t", "key", column="id"))
    step("add column", lambda tx: tx.add_column("s1", "t", Column(0, "x", "int32")))
    snaps["delete"] = delete_ids(lake, "s1", "t", {1})
    step("create view", lambda tx: tx.create_view("s1", "v", "SELECT id FROM s1.t"))
    step("comment view", lambda tx: tx.set_comment("s1", "v", "a view"))
    step("rename table", lambda tx: tx.rename_table("s1", "t", "u"))
    step("partition", lambda tx: tx.set_partitioning("s1", "u", [("cat", "identity")]))
    snaps["insert3"] = append(lake, "s1", "u", [{"id": 20, "cat": "c", "x": 1}])
    # a file without field ids, registered with a name mapping (its id comes from next_file_id too)
    state = lake.snapshot()
    table = state.table("s1", "u")
    path = join_path(state.table_path(table), data_file_name())
    pq.write_table(pa.table({"id": pa.array([30], pa.int64()), "cat": ["c"], "x": pa.array([2], pa.int32())}), path)
    spec = dataclasses.replace(describe_parquet(path, table.columns, by="name"), partition_values=("c",))
    step("mapped", lambda tx: tx.add_data_files("s1", "u", [spec]))
    step("odd names", lambda tx: (tx.create_schema('we"ird'), tx.create_table('we"ird', "a.b", cols)))
    step("drop view", lambda tx: tx.drop_view("s1", "v"))
    step("drop table", lambda tx: tx.drop_table('we"ird', "a.b"))
    step("drop schema", lambda tx: tx.drop_schema('we"ird'))
    lake.close()
    return History(url, snaps)


def test_id_counters(history: History, copy: Callable[[], str]) -> None:
    url = history.url
    snaps = catalog_query(url, "SELECT snapshot_id, next_catalog_id, next_file_id FROM ducklake_snapshot ORDER BY 1")
    assert [s[0] for s in snaps] == list(range(len(snaps)))  # consecutive from 0
    assert all(a[1] <= b[1] and a[2] <= b[2] for a, b in zip(snaps, snaps[1:], strict=False))
    (max_file,) = catalog_query(url, "SELECT max(x) FROM (SELECT data_file_id x FROM ducklake_data_file UNION ALL "
                                     "SELECT delete_file_id FROM ducklake_delete_file UNION ALL "
                                     "SELECT mapping_id FROM ducklake_column_mapping)")[0]
    (max_cat,) = catalog_query(url, "SELECT max(x) FROM (SELECT schema_id x FROM ducklake_schema UNION ALL "
                                    "SELECT table_id FROM ducklake_table UNION ALL SELECT view_id FROM ducklake_view "
                                    "UNION ALL SELECT partition_id FROM ducklake_partition_info)")[0]
    assert catalog_query(url, "SELECT count(*) FROM ducklake_column_mapping") == [(1,)]
    assert snaps[-1][2] == max_file + 1  # every file, delete file and mapping id was taken from it, none skipped
    assert snaps[-1][1] == max_cat + 1
    assert violations(url) == []
    # the pitfall: a next_file_id that is not past every file id makes DuckDB's next insert collide
    broken = copy()
    mutate(broken, "UPDATE ducklake_snapshot SET next_file_id = 1 "
                   "WHERE snapshot_id = (SELECT max(snapshot_id) FROM ducklake_snapshot)")
    assert any("next_file_id" in v for v in violations(broken))
    err = duck_error(broken, "SET ducklake_max_retry_count = 0", "INSERT INTO lake.s1.t (id) SELECT range FROM range(30)")
    assert "UNIQUE" in err or "PRIMARY KEY" in err.upper()


def test_schema_version_bumps_exactly_on_ddl(history: History) -> None:
    url = history.url
    version = dict(catalog_query(url, "SELECT snapshot_id, schema_version FROM ducklake_snapshot"))
    rows = catalog_query(url, "SELECT begin_snapshot, schema_version, table_id FROM ducklake_schema_versions")
    with_row = {r[0] for r in rows}
    ddl_steps = {"create", "comment table", "comment column", "add column", "create view", "comment view",
                 "rename table", "partition", "odd names", "drop view", "drop table", "drop schema"}
    table_steps = {"create", "add column", "rename table", "partition", "odd names"}  # column/partition/rename
    for label, snap in history.snaps.items():
        bump = version[snap] - version[snap - 1]
        assert bump == (1 if label in ddl_steps else 0), f"{label}: schema_version +{bump}"
        assert (snap in with_row) == (label in table_steps), f"{label}: schema_versions row"
    assert all(r[1] == version[r[0]] for r in rows)
    tables = {r[0] for r in catalog_query(url, "SELECT table_id FROM ducklake_table")}
    assert tables <= {r[2] for r in rows}, "every table has schema_versions rows"


def test_duckdb_maintenance_needs_schema_versions(copy: Callable[[], str]) -> None:
    merged = copy()
    assert ducks(merged, "CALL ducklake_merge_adjacent_files('lake')", "SELECT count(*), sum(id) FROM lake.s1.t") == [
        [("s1", "t", 2, 1)], [(20, 190)]]
    # the pitfall: without schema_versions rows DuckDB's compaction fails with an INTERNAL error
    broken = copy()
    mutate(broken, "DELETE FROM ducklake_schema_versions")
    assert "INTERNAL" in duck_error(broken, "CALL ducklake_merge_adjacent_files('lake')")
    assert any("schema_versions" in v for v in violations(broken))


def test_running_duckdb_session_sees_our_ddl(copy: Callable[[], str]) -> None:
    """DuckDB caches the catalog per schema_version: our bump makes a running session see a new table."""
    for bump in (True, False):
        url = copy()
        with reference.attached(url) as con:
            assert con.execute("SELECT count(*) FROM lake.s1.t").fetchone() == (20,)
            lake = DuckLake.open(url)
            with lake.transaction() as tx:
                tx.create_table("s1", "fresh", [Column(0, "i", "int32")])
            lake.close()
            if not bump:  # the pitfall: the same commit without a schema_version bump
                mutate(url, "UPDATE ducklake_snapshot SET schema_version = schema_version - 1 "
                            f"WHERE snapshot_id = {tx.committed.snapshot_id}")
            try:
                seen = con.execute("SELECT count(*) FROM lake.s1.fresh").fetchone() == (0,)
            except duckdb.CatalogException:
                seen = False
        assert seen == bump


EXPECTED_CHANGES = {
    "create": {"schemas_created": ["s1"], "tables_created": ["s1.t"]},
    "insert": {"tables_inserted_into": ["{t}"]},
    "insert2": {"tables_inserted_into": ["{t}"]},
    "comment table": {"tables_altered": ["{t}"]},
    "comment column": {"tables_altered": ["{t}"]},
    "add column": {"tables_altered": ["{t}"]},
    "delete": {"tables_deleted_from": ["{t}"]},
    "create view": {"views_created": ["s1.v"]},
    "comment view": {"views_altered": ["{v}"]},
    "rename table": {"tables_created": ["s1.u"]},
    "partition": {"tables_altered": ["{t}"]},
    "insert3": {"tables_inserted_into": ["{t}"]},
    "mapped": {"tables_inserted_into": ["{t}"]},
    # DuckDB shows a table name that needs quoting quoted (checked on a lake DuckDB wrote with the same names)
    "odd names": {"schemas_created": ['we"ird'], "tables_created": ['"we""ird"."a.b"']},
    "drop view": {"views_dropped": ["{v}"]},
    "drop table": {"tables_dropped": ["{odd}"]},
    "drop schema": {"schemas_dropped": ["{odd_schema}"]},
}


def test_change_strings_parse_in_duckdb_and_match(history: History, copy: Callable[[], str]) -> None:
    ids = {
        "t": catalog_query(history.url, "SELECT DISTINCT table_id FROM ducklake_table WHERE table_name = 't'")[0][0],
        "v": catalog_query(history.url, "SELECT DISTINCT view_id FROM ducklake_view")[0][0],
        "odd": catalog_query(history.url, "SELECT table_id FROM ducklake_table WHERE table_name = 'a.b'")[0][0],
        "odd_schema": catalog_query(history.url, "SELECT schema_id FROM ducklake_schema WHERE schema_name = 'we\"ird'")[0][0],
    }
    got = dict(duck(history.url, "SELECT snapshot_id, changes FROM lake.snapshots()"))
    for label, snap in history.snaps.items():
        want = {k: [x.format(**{n: str(i) for n, i in ids.items()}) for x in v] for k, v in EXPECTED_CHANGES[label].items()}
        assert got[snap] == want, label
    # byte for byte what DuckDB writes for the same names
    assert catalog_query(history.url, "SELECT changes_made FROM ducklake_snapshot_changes WHERE snapshot_id = "
                         f"{history.snaps['odd names']}") == [('created_schema:"we""ird",created_table:"we""ird"."a.b"',)]
    assert violations(history.url) == []
    # the pitfall: one unknown token breaks DuckDB's snapshots() (and its conflict checks)
    broken = copy()
    mutate(broken, "UPDATE ducklake_snapshot_changes SET changes_made = changes_made || ',foo:1' WHERE snapshot_id = 2")
    assert "Unsupported change type foo" in duck_error(broken, "SELECT * FROM lake.snapshots()")
    assert any("unknown change token" in v for v in violations(broken))


# ---------------------------------------------------------------------------------------------------------------
# (10) row ids


def test_row_ids_are_contiguous_and_an_update_keeps_them(copy: Callable[[], str]) -> None:
    url = copy()
    files = live_files(url)
    assert [(f[2], f[3]) for f in files] == [(10, 0), (10, 10)]
    lake = DuckLake.open(url)
    state = lake.snapshot()
    table = state.table("s1", "t")
    assert state.table_stats(table).next_row_id == 20
    # UPDATE s1.t SET s = 'new' WHERE id IN (3, 15): delete + insert with the old row ids, in one snapshot
    rows = [{**make_row(i), "s": "new"} for i in (3, 15)]
    specs = write_data_files(table, state.table_path(table), arrow_rows(table, rows), row_ids=[3, 15])
    with lake.transaction() as tx:
        for fid, positions in positions_of(lake, "s1", "t", {3, 15}).items():
            tx.delete_rows("s1", "t", fid, positions)
        tx.add_data_files("s1", "t", specs)
    snap = tx.committed.snapshot_id
    stats = lake.snapshot().table_stats(table)
    lake.close()
    new = [f for f in live_files(url) if f[0] not in {files[0][0], files[1][0]}]
    assert [(f[2], f[3]) for f in new] == [(2, 20)]  # a fresh row_id_start, as the reference does
    assert (stats.record_count, stats.next_row_id) == (22, 22)
    updated, ids, feed = ducks(
        url, "SELECT rowid, id, s FROM lake.s1.t WHERE id IN (3, 15) ORDER BY id",
        "SELECT count(*), count(DISTINCT rowid), min(rowid), max(rowid) FROM lake.s1.t",
        f"SELECT rowid, change_type, s FROM ducklake_table_changes('lake', 's1', 't', {snap}, {snap}) "
        "ORDER BY rowid, change_type")
    assert updated == [(3, 3, "new"), (15, 15, "new")]
    assert ids == [(20, 20, 0, 19)]
    assert feed == [(3, "update_postimage", "new"), (3, "update_preimage", "s03"),
                    (15, "update_postimage", "new"), (15, "update_preimage", "s15")]
    assert violations(url) == []
    # the pitfall: overlapping row-id ranges silently duplicate rowids
    broken = copy()
    mutate(broken, f"UPDATE ducklake_data_file SET row_id_start = 0 WHERE data_file_id = {files[1][0]}")
    assert duck(broken, "SELECT count(*), count(DISTINCT rowid) FROM lake.s1.t") == [(20, 10)]


# ---------------------------------------------------------------------------------------------------------------
# bad input: a clear error naming the problem, and the lake exactly as before


def catalog_dump(url: str) -> dict[str, list[str]]:
    """Every row of every ducklake_* table (sorted reprs), without going through the layer under test."""
    db = CatalogDB(parse_catalog(url))
    out: dict[str, list[str]] = {}
    try:
        with db.read() as conn:
            if db.location.backend == "sqlite":
                names = [r[0] for r in db.query(conn, "SELECT name FROM sqlite_master WHERE type = 'table'")]
            else:
                names = [r[0] for r in db.query(
                    conn, "SELECT table_name FROM information_schema.tables WHERE table_schema = :s",
                    {"s": db.dialect.default_schema})]
            for name in sorted(names):
                out[name] = sorted(repr(tuple(r)) for r in db.query(conn, f'SELECT * FROM "{name}"'))
    finally:
        db.dispose()
    return out


def files_on_disk(data_path: str) -> list[str]:
    return sorted(os.path.relpath(os.path.join(d, f), data_path) for d, _s, fs in os.walk(data_path) for f in fs)


@dataclass
class Victim:
    url: str
    data_path: str

    def state(self) -> tuple[Any, ...]:
        lake = DuckLake.open(self.url)
        try:
            snaps = [(s.snapshot_id, s.schema_version, s.next_catalog_id, s.next_file_id, s.changes_made)
                     for s in lake.snapshots()]
        finally:
            lake.close()
        return snaps, catalog_dump(self.url), files_on_disk(self.data_path)


@pytest.fixture(scope="module", params=CATALOG_BACKENDS)
def victim(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Victim:
    """A lake per backend: s1.t (id int64, s varchar) with a file, s1.p partitioned by cat with a file."""
    root = tmp_path_factory.mktemp(f"victim_{request.param}")
    url = _catalog_url(request.param, request, root)
    data_path = str(root / "data") + "/"
    lake = DuckLake.create(url, data_path)
    with lake.transaction() as tx:
        tx.create_schema("s1")
        tx.create_table("s1", "t", [Column(0, "id", "int64"), Column(0, "s", "varchar")])
        tx.create_table("s1", "p", [Column(0, "id", "int64"), Column(0, "cat", "varchar")],
                        partition_by=[("cat", "identity")])
    append(lake, "s1", "t", [{"id": i, "s": f"r{i}"} for i in range(5)])
    append(lake, "s1", "p", [{"id": i, "cat": "a"} for i in range(3)])
    lake.close()
    return Victim(url, data_path)


def test_unknown_catalog_scheme(tmp_path: Path) -> None:
    for url in ("mysql://user@localhost/lake", "foo:///tmp/lake.db"):
        scheme = url.split(":")[0]
        for attempt in (lambda u=url: DuckLake.open(u), lambda u=url: DuckLake.create(u, str(tmp_path) + "/")):
            with pytest.raises(CatalogConnectionError, match=scheme) as err:
                attempt()
            assert "duckdb" in str(err.value) and "sqlite" in str(err.value) and "postgresql" in str(err.value)
    assert os.listdir(tmp_path) == []


def test_unreachable_postgres(tmp_path: Path) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed once the block ends: nothing listens there
    url = f"postgresql://postgres@127.0.0.1:{port}/lake"
    for attempt in (lambda: DuckLake.open(url), lambda: DuckLake.create(url, str(tmp_path) + "/")):
        start = time.monotonic()
        with pytest.raises(CatalogConnectionError, match="cannot connect") as err:
            attempt()
        assert str(port) in str(err.value) and "127.0.0.1" in str(err.value)
        assert time.monotonic() - start < 15


def test_a_database_that_is_not_a_lake(tmp_path: Path) -> None:
    empty = tmp_path / "empty.sqlite"
    empty.touch()
    with pytest.raises(NotALakeError, match="ducklake_metadata"):
        DuckLake.open(f"sqlite:///{empty}")
    assert empty.stat().st_size == 0
    other = tmp_path / "other.sqlite"
    con = sqlite3.connect(other)
    con.execute("CREATE TABLE customers (id INTEGER, name TEXT)")
    con.execute("INSERT INTO customers VALUES (1, 'a')")
    con.commit()
    con.close()
    before = catalog_dump(f"sqlite:///{other}")
    with pytest.raises(NotALakeError, match="not a DuckLake"):
        DuckLake.open(f"sqlite:///{other}")
    assert catalog_dump(f"sqlite:///{other}") == before == {"customers": ["(1, 'a')"]}
    with pytest.raises(NotALakeError, match="does not exist"):
        DuckLake.open(f"sqlite:///{tmp_path}/missing.sqlite")
    assert not (tmp_path / "missing.sqlite").exists()


def test_a_lake_of_spec_0_3(tmp_path: Path) -> None:
    # A real 0.3 lake needs DuckDB 1.4; it is faked here from a 1.0 lake by rewriting the version row.
    url = f"sqlite:///{tmp_path}/old.sqlite"
    DuckLake.create(url, str(tmp_path / "data") + "/").close()
    mutate(url, "UPDATE ducklake_metadata SET value = '0.3' WHERE key = 'version'")
    before = catalog_dump(url)
    with pytest.raises(UnsupportedVersionError, match="0.3") as err:
        DuckLake.open(url)
    assert "AUTOMATIC_MIGRATION" in str(err.value) and "1.0" in str(err.value)
    with pytest.raises(DuckLakeError):
        DuckLake.open_or_create(url, str(tmp_path / "data") + "/")
    assert catalog_dump(url) == before


@contextmanager
def unchanged(victim: Victim) -> Iterator[None]:
    """The block's failed operations leave the lake exactly as it was: snapshots, every catalog row, files on disk."""
    before = victim.state()
    yield
    assert victim.state() == before, "a failed operation changed the lake"


def raises(action: Callable[[], Any], error: type[BaseException] | tuple[type[BaseException], ...],
           *needles: str) -> str:
    """Run the action, expecting the error; its message must name the problem (contain every needle)."""
    with pytest.raises(error) as err:
        action()
    message = str(err.value)
    for needle in needles:
        assert needle in message, f"{needle!r} not in {message!r}"
    return message


def test_unsupported_type(victim: Victim) -> None:
    lake = DuckLake.open(victim.url)
    with unchanged(victim):
        for bad in ("hugeint", "foo", "BIGINT", "decimal(40,2)"):  # DuckDB's names are not DuckLake's (int128, int64)

            def create(bad: str = bad) -> None:
                with lake.transaction() as tx:
                    tx.create_schema("never")  # staged before the bad table: must not be committed either
                    tx.create_table("s1", "bad", [Column(0, "id", "int64"), Column(0, "x", bad)])

            def nested(bad: str = bad) -> None:
                with lake.transaction() as tx:
                    tx.create_table("s1", "bad", [Column(0, "l", "list", children=(Column(0, "element", bad),))])

            def add(bad: str = bad) -> None:
                with lake.transaction() as tx:
                    tx.add_column("s1", "t", Column(0, "x", bad))

            for action in (create, nested, add):
                raises(action, UnsupportedTypeError, repr(bad), "unsupported")
    lake.close()


def test_partition_values_of_the_wrong_count(victim: Victim) -> None:
    lake = DuckLake.open(victim.url)
    state = lake.snapshot()
    table = state.table("s1", "p")
    specs = write_data_files(table, state.table_path(table), arrow_rows(table, [{"id": 9, "cat": "z"}]))
    assert specs[0].partition_values == ("z",)
    with unchanged(victim):
        for values in ((), ("z", "extra")):
            wrong = dataclasses.replace(specs[0], partition_values=values)

            def add(wrong: Any = wrong) -> None:
                with lake.transaction() as tx:
                    tx.add_data_files("s1", "p", [wrong])

            raises(add, InvalidDataFileError, "1 partition keys", f"{len(values)} partition values")
    # (the caller's data file is still there: the layer does not delete files it did not write) ours to clean up
    os.remove(specs[0].path)
    lake.close()


def test_delete_positions_out_of_range(victim: Victim) -> None:
    lake = DuckLake.open(victim.url)
    state = lake.snapshot()
    (f,) = state.files(state.table("s1", "t"))
    with unchanged(victim):  # no catalog row and no stray delete file
        for positions in ([5], [-1], [0, 1, 99]):
            def delete(positions: list[int] = positions) -> None:
                with lake.transaction() as tx:
                    tx.delete_rows("s1", "t", f.data_file_id, positions)

            bad = [p for p in positions if not 0 <= p < 5]
            # NB: a ValueError, not a DuckLakeError (errors.py says every deliberate error is one); accepted here
            raises(delete, (DuckLakeError, ValueError), str(bad), f"data file {f.data_file_id}", "5 rows")
    lake.close()


def test_commit_racing_a_drop(victim: Victim) -> None:
    setup = DuckLake.open(victim.url)
    with setup.transaction() as tx:
        tx.create_table("s1", "race", [Column(0, "id", "int64")])
    append(setup, "s1", "race", [{"id": i} for i in range(4)])
    setup.close()
    a = DuckLake.open(victim.url)
    state = a.snapshot()
    race = state.table("s1", "race")
    (f,) = state.files(race)
    tx_a = a.transaction(commit_message="A")
    tx_a.delete_rows("s1", "race", f.data_file_id, [1])
    b = DuckLake.open(victim.url)
    with b.transaction(commit_message="B") as tx_b:
        tx_b.drop_table("s1", "race")
    b.close()
    with unchanged(victim):  # as B left it, and A's delete file removed
        raises(tx_a.commit, CommitConflictError, "delete", "dropped", str(race.table_id))
    a.close()


def test_creating_an_existing_table(victim: Victim) -> None:
    lake = DuckLake.open(victim.url)

    def create() -> None:
        with lake.transaction() as tx:
            tx.create_schema("staged_first")  # staged, and must not be committed either
            tx.create_table("s1", "t", [Column(0, "id", "int64")])

    def create_other_case() -> None:
        with lake.transaction() as tx:
            tx.create_table("S1", "T", [Column(0, "id", "int64")])  # names are case-insensitive, as in DuckDB

    with unchanged(victim):
        raises(create, TableExistsError, "s1.t", "already exists")
        raises(create_other_case, TableExistsError, "already exists")
    lake.close()


def test_dropping_a_non_empty_schema_without_cascade(victim: Victim) -> None:
    lake = DuckLake.open(victim.url)

    def drop() -> None:
        with lake.transaction() as tx:
            tx.drop_schema("s1")

    with unchanged(victim):
        raises(drop, SchemaExistsError, "'s1'", "not empty", "cascade", "p, t")
    lake.close()


def test_a_narrowing_type_change(victim: Victim) -> None:
    lake = DuckLake.open(victim.url)
    with unchanged(victim):
        for column, old, new_type in (("id", "int64", "int32"), ("id", "int64", "decimal(10,2)"),
                                      ("s", "varchar", "int64")):
            def alter(column: str = column, new_type: str = new_type) -> None:
                with lake.transaction() as tx:
                    tx.alter_column_type("s1", "t", column, new_type)

            raises(alter, SchemaEvolutionError, f"t.{column} from {old} to {new_type}")
    lake.close()


def test_catalog_tables_are_the_reference_ones(victim: Victim) -> None:
    """Sanity for the dumps above: the victim lake has exactly the reference's catalog tables (plus the empty
    inlined-data tables the reference also makes for each created or altered table while inlining is on)."""
    names = set(catalog_dump(victim.url))
    inlined = {n for n in names if n.startswith("ducklake_inlined_data_") and n != "ducklake_inlined_data_tables"}
    assert names - inlined == {s.split("(")[0].split()[-1].replace("{schema}", "") for s in ddl.CATALOG_TABLES}
    assert inlined
