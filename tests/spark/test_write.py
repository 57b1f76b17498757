"""Spark writes as DuckLake data files: DuckDB's ducklake extension must read exactly the DataFrame's rows.

Every scenario also checks the catalog invariants and that the data path holds nothing but registered data files
(no _SUCCESS, .crc or staging leftovers).
"""

from __future__ import annotations

import datetime as dt
import os
import struct
import threading
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from dbt.adapters.ducklake.lake.errors import (
    CommitConflictError,
    InvalidDataFileError,
    NoSuchTableError,
    UnsupportedTypeError,
)
from dbt.adapters.ducklake.lake.lake import DuckLake
from dbt.adapters.ducklake.lake.records import Column, PartitionField, PartitionSpec, TableInfo
from dbt.adapters.ducklake.lake.write.partitioning import _bucket_bytes, murmur3_32
from dbt.adapters.ducklake.spark.types import columns_from_spark
from dbt.adapters.ducklake.spark.write import one_shot, write
from tests.lake.compare import arrow_rows, plain_rows
from tests.support import reference
from tests.support.coverage import FULL
from tests.support.invariants import violations

UTC = dt.timezone.utc

ALL_TYPES = (
    "by byte, sh short, i int, l long, f float, d double, dec decimal(38,10), s string, bo boolean, bin binary, "
    "dt date, ts timestamp, tn timestamp_ntz, arr array<int>, st struct<a:int, b:string, inner:struct<x:double>>, "
    "m map<string,int>, deep array<struct<k:string, v:array<map<string,bigint>>>>, ms map<int, struct<p:string>>"
)
ALL_ROWS = [
    (1, 2, 3, 4, 0.1, 2.5, Decimal("12345678901234567890.1234567890"), "héllo", True, b"\x00\xffab",
     dt.date(2024, 2, 29), dt.datetime(2024, 1, 5, 14, 0, 0, 123456, tzinfo=UTC), dt.datetime(2024, 1, 5, 14, 0),
     [1, None, 3], (1, "x", (1.25,)), {"a": 1, "b": None}, [("k", [{"z": 9}, None]), None], {7: ("p",), 8: None}),
    (-128, -32768, -2**31, -2**63, -3.5, -1e300, Decimal("-0.0000000001"), "", False, b"",
     dt.date(1969, 12, 31), dt.datetime(1969, 12, 31, 23, 59, 59, 500000, tzinfo=UTC),
     dt.datetime(1900, 1, 1, 0, 0, 0, 1), [], (None, None, None), {}, [], {}),
    (None,) * 18,
]
FLAT_TYPES = ("i int, st struct<a:int, b:struct<c:string>>, ts timestamp")
FLAT_ROWS = [(1, (2, ("deep",)), dt.datetime(2020, 5, 1, 12, tzinfo=UTC)), (2, None, None), (3, (None, None), None)]


@pytest.fixture
def lake(catalog_url: str, data_path: str) -> DuckLake:
    lk = DuckLake.create(catalog_url, data_path)
    tx = lk.transaction()
    tx.create_schema("s")
    tx.commit()
    return lk


@pytest.fixture
def sqlite_lake(tmp_path: Path, data_path: str) -> tuple[str, DuckLake]:
    url = f"sqlite:///{tmp_path}/metadata.sqlite"
    lk = DuckLake.create(url, data_path)
    tx = lk.transaction()
    tx.create_schema("s")
    tx.commit()
    return url, lk


def duck(catalog: str, sql: str, params: list[Any] | None = None) -> list[tuple[Any, ...]]:
    with reference.attached(catalog) as con:
        con.execute("SET TimeZone = 'UTC'")
        return con.execute(sql, params or []).fetchall()


def spark_rows(df: DataFrame) -> list[tuple[Any, ...]]:
    return arrow_rows(df.toArrow())  # the small test DataFrame only


def assert_clean(lake: DuckLake) -> None:
    """The data path holds only data files the catalog knows (no _SUCCESS, .crc or staging leftovers), all present."""
    on_disk = [os.path.join(root, n) for root, _, names in os.walk(lake.data_path) for n in names]
    assert [p for p in on_disk if not (os.path.basename(p).startswith("ducklake-") and p.endswith(".parquet"))
            or "ducklake-write-" in p] == []
    with lake.db.read() as conn:
        known = lake.db.query(conn, "SELECT count(*) FROM {p}ducklake_data_file")[0][0]
    assert len(on_disk) == known
    state = lake.snapshot()
    assert all(os.path.exists(f.path) for info in state.tables.values() for f in state.files(info))


# ----------------------------------------------------------------------------------------------- types both ways

@pytest.mark.parametrize("catalog_url", ["duckdb", pytest.param("postgres", marks=pytest.mark.postgres)],
                         indirect=True)  # the partitioned test covers SQLite too
def test_every_type_round_trips_through_duckdb(spark: SparkSession, lake: DuckLake, catalog_url: str) -> None:
    df = spark.createDataFrame(ALL_ROWS, ALL_TYPES)
    flat = spark.createDataFrame(FLAT_ROWS, FLAT_TYPES)
    snap = one_shot.create_table_as(spark, lake, "s", "every", df, author="me", commit_message="ctas")
    one_shot.create_table_as(spark, lake, "s", "flat", flat)

    assert snap.author == "me" and snap.commit_message == "ctas"
    with reference.attached(catalog_url) as con:
        con.execute("SET TimeZone = 'UTC'")
        q = lambda sql: con.execute(sql).fetchall()  # noqa: E731
        assert plain_rows(q("SELECT * FROM lake.s.every")) == spark_rows(df)
        assert plain_rows(q("SELECT * FROM lake.s.flat")) == spark_rows(flat)
        # nested values are really there (a missing field id or name mapping reads NULL silently)
        assert q("SELECT arr[1], st.inner.x, m['a'], deep[1].v[1]['z'], ms[7].p FROM lake.s.every WHERE i = 3") == [
            (1, 1.25, 1, 9, "p")]
        assert q("SELECT st.b.c FROM lake.s.flat WHERE i = 1") == [("deep",)]
        # timestamps: an instant (timestamptz) and a wall-clock time (timestamp)
        assert q("SELECT ts = TIMESTAMPTZ '2024-01-05 14:00:00.123456+00', tn = TIMESTAMP '2024-01-05 14:00:00' "
                 "FROM lake.s.every WHERE i = 3") == [(True, True)]
        types = dict(q("SELECT column_name, data_type FROM information_schema.columns WHERE table_name = 'every'"))
        assert types["ts"] == "TIMESTAMP WITH TIME ZONE" and types["tn"] == "TIMESTAMP"
        assert types["dec"] == "DECIMAL(38,10)" and types["by"] == "TINYINT" and types["bin"] == "BLOB"
        # statistics are exact: count and min/max answered from metadata agree with the data
        assert q("SELECT count(*), min(l), max(dec), min(ts) FROM lake.s.every") == [
            (3, -2**63, Decimal("12345678901234567890.1234567890"),
             dt.datetime(1969, 12, 31, 23, 59, 59, 500000, tzinfo=UTC))]
    state = lake.snapshot()
    every, flat_info = state.table("s", "every"), state.table("s", "flat")
    assert all(f.mapping_id is not None for f in state.files(every))  # lists/maps: a name mapping
    assert all(f.mapping_id is None for f in state.files(flat_info))  # structs only: field ids
    assert violations(catalog_url) == []
    assert_clean(lake)


@pytest.mark.parametrize("ddl, column", [("x int, iv interval day to second", "iv"), ("x int, arr array<void>", "arr")])
def test_unsupported_spark_type_is_named(spark: SparkSession, sqlite_lake: tuple[str, DuckLake], ddl: str,
                                         column: str) -> None:
    url, lake = sqlite_lake
    df = spark.createDataFrame([], T.StructType.fromDDL(ddl))
    with pytest.raises(UnsupportedTypeError, match=column):
        one_shot.create_table_as(spark, lake, "s", "t", df)
    nulls = spark.range(1).select(F.col("id"), F.lit(None).alias("nothing"))
    with pytest.raises(UnsupportedTypeError, match="nothing"):
        one_shot.create_table_as(spark, lake, "s", "t", nulls)
    assert [s.snapshot_id for s in lake.snapshots()] == [0, 1]


def test_data_that_does_not_fit_the_table(spark: SparkSession, sqlite_lake: tuple[str, DuckLake]) -> None:
    url, lake = sqlite_lake
    tx = lake.transaction()
    info = tx.create_table("s", "t", columns_from_spark(T.StructType.fromDDL("id bigint, Name string, st struct<a:int>")))
    base = spark.createDataFrame([(1, "a", (1,))], "ID int, name string, st struct<a:int>")
    # case-insensitive names, any order, safe casts: fine (analysed only, nothing written)
    assert write.conform(base.select("st", "name", "ID"), info).columns == ["id", "Name", "st"]
    with pytest.raises(InvalidDataFileError, match="no column 'st'"):
        write.conform(base.drop("st"), info)
    with pytest.raises(InvalidDataFileError, match=r"\['extra'\]"):
        write.conform(base.withColumn("extra", F.lit(1)), info)
    with pytest.raises(InvalidDataFileError, match=r"'id'.*struct<a:int>.*bigint"):
        write.conform(base.select(F.col("st").alias("ID"), "name", "st"), info)
    with pytest.raises(InvalidDataFileError, match=r"'st'.*\['b'\] are not fields of the table's struct \['a'\]"):
        write.conform(base.select("ID", "name", F.struct(F.col("st.a").alias("b")).alias("st")), info)
    # struct fields go by name at any depth (Spark casts structs by position): reordered, or missing (NULL)
    wide = tx.create_table("s", "w", columns_from_spark(T.StructType.fromDDL(
        "st struct<a:int, b:string>, l array<struct<x:int, y:string>>")))
    data = spark.createDataFrame([(("b1", 1), [(1,)]), (None, None)], "st struct<b:string, a:int>, l array<struct<x:int>>")
    rows = write.conform(data, wide).collect()
    assert [(r.st and tuple(r.st), r.l and [tuple(e) for e in r.l]) for r in rows] == [
        ((1, "b1"), [(1, None)]), (None, None)]


@pytest.mark.parametrize("version", [1, 2])
def test_row_groups_hold_duckdbs_rows(spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                      version: int) -> None:
    """Spark's row groups hold the rows DuckDB's insert of the same rows puts in each, with the lake's
    parquet_row_group_size (3000: DuckDB closes a group at the 2,048-row chunk that reaches it), for columns whose
    buffered bytes do not grow (all NULL, one boolean value) as for others."""
    from dbt.adapters.ducklake.spark.write import local_write

    monkeypatch.setattr(local_write, "SMALL_RESULT_BYTES", -1)  # Spark's writer, not the driver's
    catalog_url = f"duckdb:///{tmp_path}/layout.ducklake"
    lake = DuckLake.create(catalog_url, f"{tmp_path}/data/")
    lake.set_option("parquet_row_group_size", "3000")
    lake.set_option("parquet_version", str(version))
    rows = "SELECT id, CAST(NULL AS INT) AS n, true AS b, CAST(id % 7 AS STRING) AS s FROM range(10000) r(id)"
    one_shot.create_table_as(spark, lake, "main", "ours", spark.sql(rows).coalesce(1))
    with reference.attached(catalog_url) as con:
        con.execute("SET threads = 1")  # the rows in order, as Spark's one task writes them
        con.execute(f"CREATE TABLE lake.theirs AS {rows}")

    def groups(table: str) -> list[int]:
        state = lake.snapshot()
        (path,) = [f.path for f in state.files(state.table("main", table))]
        meta = pq.ParquetFile(path).metadata
        return [meta.row_group(i).num_rows for i in range(meta.num_row_groups)]

    assert groups("theirs") == [4096, 4096, 1808]
    assert groups("ours") == groups("theirs")
    lake.close()


def test_a_write_plan_costs_few_jvm_calls(spark: SparkSession, sqlite_lake: tuple[str, DuckLake],
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """Building a write's plan (casts, field ids) costs a few JVM round trips per column: PySpark's per-call origin
    capture (about six more per DataFrame function call) is off in the layer's sessions."""
    from py4j.java_gateway import GatewayClient

    assert spark.conf.get("spark.python.sql.dataFrameDebugging.enabled") == "false"
    _, lake = sqlite_lake
    info = lake.transaction().create_table("s", "t", columns_from_spark(
        T.StructType.fromDDL("a bigint, b string, c double, d string")))
    df = spark.createDataFrame([(1, "x", 1.5, "y")], "a int, b string, c double, d string")
    df.schema  # noqa: B018 - resolved before counting
    calls = 0
    send = GatewayClient.send_command
    me = threading.get_ident()

    def counted(self: GatewayClient, *args: Any, **kw: Any) -> Any:
        nonlocal calls
        # this thread's calls only: background work of earlier tests in the process (a listing's gather job)
        # talks to the same JVM meanwhile
        calls += threading.get_ident() == me
        return send(self, *args, **kw)

    monkeypatch.setattr(GatewayClient, "send_command", counted)
    assert write.conform(df, info).columns == ["a", "b", "c", "d"]
    assert calls <= 100, calls  # 4 columns: 68 calls; 188 with the origin capture on


# ------------------------------------------------------------------------------------------------- partitioning

PART_TYPES = (
    "id int, cat string, flag boolean, f float, dec decimal(10,2), bin binary, tsz timestamp, ts timestamp_ntz, "
    "d date, n bigint"
)
PART_ROWS = [
    (1, "a", True, 1.5, Decimal("1.25"), b"\x00a", dt.datetime(2024, 1, 5, 14, 0, tzinfo=UTC),
     dt.datetime(2024, 1, 5, 14, 30), dt.date(2024, 1, 5), 5),
    (2, "a", True, 1.5, Decimal("1.25"), b"\x00a", dt.datetime(2024, 1, 5, 14, 0, tzinfo=UTC),
     dt.datetime(2024, 1, 5, 14, 30), dt.date(2024, 1, 5), 5),
    (3, "", False, -0.0, Decimal("-7.00"), b"", dt.datetime(1969, 12, 31, 23, 59, 59, 500000, tzinfo=UTC),
     dt.datetime(1969, 12, 31, 23, 0), dt.date(1969, 12, 31), -1),
    (4, None, None, None, None, None, None, None, None, None),
    (5, "x/y:z é%", False, 2.25, Decimal("0.00"), b"/=%", dt.datetime(2024, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
     dt.datetime(2000, 2, 29, 0, 0, 0, 1), dt.date(2000, 2, 29), 2**40),
    (6, "b", True, float("nan"), Decimal("99999999.99"), b"b", dt.datetime(2024, 6, 1, tzinfo=UTC),
     dt.datetime(2024, 6, 1, 23, 0), dt.date(2024, 6, 1), 123456789),
]
PART_SPEC = [("cat", "identity"), ("flag", "identity"), ("f", "identity"), ("dec", "identity"), ("bin", "identity"),
             ("tsz", "identity"), ("ts", "identity"), ("d", "identity"), ("tsz", "year"), ("tsz", "month"),
             ("tsz", "day"), ("tsz", "hour"), ("ts", "year"), ("ts", "hour"), ("d", "month"), ("n", "bucket(4)"),
             ("cat", "bucket(3)"), ("d", "bucket(5)"), ("tsz", "bucket(7)"), ("ts", "bucket(2)"),
             ("bin", "bucket(6)"), ("dec", "bucket(8)"), ("flag", "bucket(3)")]
DUCK_SPEC = ", ".join(c if t == "identity" else f"{t}({c})" if "(" not in t else f"bucket({t[7:-1]}, {c})"
                      for c, t in PART_SPEC)


def _values_by_id(lake: DuckLake, table: str) -> dict[int, tuple[str | None, ...]]:
    state = lake.snapshot()
    out = {}
    for f in state.files(state.table("s", table)):
        for i in pq.read_table(f.path).column("id").to_pylist():
            out[i] = f.partition_values
    return out


# SQLite by default (the round trip of every type above takes the DuckDB file and PostgreSQL; test_dml's dynamic
# partition overwrite writes partitions on all three); every backend in the full suite
@pytest.mark.parametrize("catalog_url", [
    "sqlite", *(["duckdb", pytest.param("postgres", marks=pytest.mark.postgres)] if FULL else [])], indirect=True)
def test_partitioned_write_matches_duckdb(spark: SparkSession, lake: DuckLake, catalog_url: str) -> None:
    df = spark.createDataFrame(PART_ROWS, PART_TYPES)
    one_shot.create_table_as(spark, lake, "s", "ours", df, partition_by=PART_SPEC)
    with reference.attached(catalog_url, options={"DATA_INLINING_ROW_LIMIT": 0}) as con:
        con.execute("SET TimeZone = 'UTC'")
        con.execute("CREATE TABLE lake.s.theirs AS SELECT * FROM lake.s.ours LIMIT 0")
        con.execute(f"ALTER TABLE lake.s.theirs SET PARTITIONED BY ({DUCK_SPEC})")
        con.execute("INSERT INTO lake.s.theirs SELECT * FROM lake.s.ours")
        for row_filter in ("cat = 'a'", "cat = ''", "cat IS NULL", "n = 5", "n = 1099511627776", "d = DATE '2000-02-29'",
                           "tsz >= TIMESTAMPTZ '2024-06-01 00:00:00+00'", "year(tsz) = 1969", "bin = ''::BLOB",
                           "dec = 99999999.99", "isnan(f)", "f = 0", "flag"):
            ours = con.execute(f"SELECT list(id ORDER BY id) FROM lake.s.ours WHERE {row_filter}").fetchall()
            theirs = con.execute(f"SELECT list(id ORDER BY id) FROM lake.s.theirs WHERE {row_filter}").fetchall()
            assert ours == theirs, row_filter
        rows = con.execute("SELECT * FROM lake.s.ours").fetchall()
    assert len(rows) == len(PART_ROWS)
    ours_by_id, theirs_by_id = _values_by_id(lake, "ours"), _values_by_id(lake, "theirs")
    assert ours_by_id == theirs_by_id
    assert ours_by_id[1] == ours_by_id[2]  # equal rows, equal partition: one file
    assert ours_by_id[4] == (None,) * len(PART_SPEC)
    state = lake.snapshot()
    files = state.files(state.table("s", "ours"))
    assert len(files) == 5
    # DuckDB's layout: <column or transform>=<url-encoded value>/…, NULL as __HIVE_DEFAULT_PARTITION__
    paths = sorted(os.path.relpath(f.path, state.table_path(state.table("s", "ours"))) for f in files)
    assert all(p.startswith("cat=") and "/year=" in p and "/bucket=" in p for p in paths)
    assert any(p.startswith("cat=x%2Fy%3Az%20%C3%A9%25/") for p in paths)
    assert any(p.startswith("cat=__HIVE_DEFAULT_PARTITION__/flag=__HIVE_DEFAULT_PARTITION__/") for p in paths)
    # NaN known from the footer: a NaN max bound in the file with NaN, real bounds elsewhere
    f_id = state.table("s", "ours").column("f").column_id
    nan_of = {f.partition_values[0]: next(s.contains_nan for s in f.stats if s.column_id == f_id) for f in files}
    assert nan_of == {"a": False, "": False, None: False, "x/y:z é%": False, "b": True}
    assert violations(catalog_url) == []
    assert_clean(lake)


def _bucket_table(duck_types: list[str], n: int) -> TableInfo:
    cols = tuple(Column(i + 1, f"v{i}", t, True) for i, t in enumerate(duck_types))
    fields = tuple(PartitionField(i, i + 1, f"bucket({n})") for i in range(len(duck_types)))
    return TableInfo(1, "u", 0, "s", "t", "t/", True, 1, cols, PartitionSpec(9, fields))


BUCKET_CASES = [  # (Spark type, DuckLake type, values)
    ("string", "varchar", ["", "a", "ab", "abc", "abcd", "abcde", "abcdef", "abcdefg", "héllo wörld!", "日本語テキスト",
                           "x" * 33, None]),
    ("binary", "blob", [b"", b"\x00", b"\xff\xfe", b"\x80\x81\x82", b"\x00\x01\x02\x03\x04", bytes(range(256)), None]),
    ("bigint", "int64", [0, 1, -1, 2**31, -2**63, 2**63 - 1, None]),
    ("date", "date", [dt.date(1970, 1, 1), dt.date(1, 1, 1), dt.date(9999, 12, 31), None]),
    ("timestamp", "timestamptz", [dt.datetime(2024, 1, 5, 14, 0, 0, 1, tzinfo=UTC),
                                  dt.datetime(1800, 1, 1, tzinfo=UTC), None]),
    ("decimal(18,3)", "decimal(18,3)", [Decimal("1.500"), Decimal("-999999999999999.999"), None]),
]


def _reference_bucket(duck_type: str, v: Any, n: int) -> str | None:
    if v is None:
        return None
    if duck_type.startswith("decimal"):  # DuckDB hashes decimal(p<=18) as its unscaled int64 (not Iceberg's bytes)
        return str((murmur3_32(struct.pack("<q", int(v.scaleb(3)))) & 0x7FFFFFFF) % n)
    return str((murmur3_32(_bucket_bytes(duck_type, v)) & 0x7FFFFFFF) % n)


def test_bucket_hash_is_the_reference_murmur3(spark: SparkSession) -> None:
    rows = max(len(c[2]) for c in BUCKET_CASES)
    data = [tuple(c[2][r] if r < len(c[2]) else None for c in BUCKET_CASES) for r in range(rows)]
    df = spark.createDataFrame(data, ", ".join(f"v{i} {c[0]}" for i, c in enumerate(BUCKET_CASES)))
    table = _bucket_table([c[1] for c in BUCKET_CASES], 1000)
    keys = write._partition_keys(table, df)
    out = df
    for k in keys:
        out = k.add(out)
    assert out.columns == df.columns + [k.name for k in keys]  # the helper columns are gone
    got = out.collect()
    for i, (_, duck_type, _) in enumerate(BUCKET_CASES):
        want = [_reference_bucket(duck_type, row[i], 1000) for row in data]
        assert [keys[i].value(r[keys[i].name]) for r in got] == want, duck_type


def test_partition_keys_ignore_the_session_time_zone(spark: SparkSession) -> None:
    cols = (Column(1, "tsz", "timestamptz", True), Column(2, "ts", "timestamp", True))
    fields = [(1, "identity"), (1, "year"), (1, "day"), (1, "hour"), (1, "bucket(4)"), (2, "identity"), (2, "hour")]
    spec = PartitionSpec(9, tuple(PartitionField(i, c, t) for i, (c, t) in enumerate(fields)))
    table = TableInfo(1, "u", 0, "s", "t", "t/", True, 1, cols, spec)
    df = spark.createDataFrame([(dt.datetime(2023, 12, 31, 20, 0, tzinfo=UTC), dt.datetime(2023, 12, 31, 20, 0))],
                               "tsz timestamp, ts timestamp_ntz")

    def values() -> list[str | None]:
        keys = write._partition_keys(table, df)
        out = df
        for k in keys:
            out = k.add(out)
        row = out.collect()[0]
        return [k.value(row[k.name]) for k in keys]

    utc = values()
    spark.conf.set("spark.sql.session.timeZone", "Asia/Kolkata")  # 2024-01-01 01:30 there
    try:
        kolkata = values()
    finally:
        spark.conf.set("spark.sql.session.timeZone", "UTC")
    bucket = str((murmur3_32(_bucket_bytes("timestamptz", dt.datetime(2023, 12, 31, 20, 0, tzinfo=UTC)))
                  & 0x7FFFFFFF) % 4)
    assert utc == kolkata == ["2023-12-31 20:00:00+00", "2023", "31", "20", bucket, "2023-12-31 20:00:00", "20"]


def test_bucket_of_an_unsupported_type_is_refused(spark: SparkSession) -> None:
    df = spark.createDataFrame([(1.5,)], "v double")
    with pytest.raises(UnsupportedTypeError, match="'v0'.*float64"):
        write._partition_keys(_bucket_table(["float64"], 4), df.withColumnRenamed("v", "v0"))


# --------------------------------------------------------------------------------------- snapshots and failures

def test_create_table_as_is_one_snapshot_and_replace_keeps_history(spark: SparkSession,
                                                                     sqlite_lake: tuple[str, DuckLake]) -> None:
    url, lake = sqlite_lake
    first = one_shot.create_table_as(spark, lake, "s", "t", spark.range(3).withColumn("p", F.col("id") % 2),
                                  partition_by=[("p", "identity")], comment="v1")
    assert [r[0] for r in duck(url, "SELECT snapshot_id FROM lake.snapshots()")] == [0, 1, 2]
    second = one_shot.create_table_as(spark, lake, "s", "t", spark.range(10, 12).withColumn("x", F.lit("new")),
                                   replace=True)
    assert second.snapshot_id == first.snapshot_id + 1
    # an empty DataFrame still creates the table, and an empty append writes no snapshot
    one_shot.create_table_as(spark, lake, "s", "empty", spark.range(0))
    assert one_shot.append(spark, lake, "s", "empty", spark.range(0)) is None
    # a partition value too long for a directory name is still stored whole
    long = "z" * 5000
    one_shot.create_table_as(spark, lake, "s", "long", spark.createDataFrame([(long, 1), ("", 2)], "p string, i int"),
                          partition_by=[("p", "identity")])
    state = lake.snapshot()
    assert sorted(f.partition_values for f in state.files(state.table("s", "long"))) == [("",), (long,)]
    with reference.attached(url) as con:
        q = lambda sql, *p: con.execute(sql, list(p)).fetchall()  # noqa: E731
        assert [r[0] for r in q("SELECT snapshot_id FROM lake.snapshots()")] == [0, 1, 2, 3, 4, 5]
        changes = q("SELECT changes FROM lake.snapshots() WHERE snapshot_id = 3")[0][0]
        assert set(changes) >= {"tables_created", "tables_dropped", "tables_inserted_into"}
        assert sorted(q("SELECT * FROM lake.s.t")) == [(10, "new"), (11, "new")]
        assert sorted(q(f"SELECT * FROM lake.s.t AT (VERSION => {first.snapshot_id})")) == [(0, 0), (1, 1), (2, 0)]
        assert q("SELECT comment FROM duckdb_tables() WHERE table_name = 't' AND database_name = 'lake'") == [(None,)]
        assert q("SELECT count(*) FROM lake.s.empty") == [(0,)]
        assert q("SELECT i FROM lake.s.long WHERE p = ?", long) == [(1,)]
    assert violations(url) == []
    assert_clean(lake)


def test_append_and_a_failed_commit_leaves_nothing(spark: SparkSession, sqlite_lake: tuple[str, DuckLake],
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    url, lake = sqlite_lake
    one_shot.create_table_as(spark, lake, "s", "t", spark.range(2).withColumn("b", F.col("id") % 2),
                          partition_by=[("b", "identity")])
    snap = one_shot.append(spark, lake, "s", "t", spark.range(2, 5).select(F.col("id").alias("ID"), F.lit(1).alias("b")),
                        commit_message="more")
    assert snap is not None and snap.commit_message == "more"
    assert duck(url, "SELECT list(id ORDER BY id), list(rowid ORDER BY rowid) FROM lake.s.t") == [
        ([0, 1, 2, 3, 4], [0, 1, 2, 3, 4])]
    before = lake.snapshots()
    tree = lambda: {os.path.join(r, n) for r, ds, ns in os.walk(lake.data_path) for n in ns + ds}  # noqa: E731
    tree_before = tree()

    real = write.write_files

    def write_then_drop(*args: Any, **kwargs: Any) -> Any:
        out = real(*args, **kwargs)
        assert out and all(os.path.exists(f.path) for f in out)
        tx = lake.transaction()
        tx.drop_table("s", "t")
        tx.commit()
        return out

    monkeypatch.setattr(write, "write_files", write_then_drop)
    with pytest.raises((CommitConflictError, NoSuchTableError)):
        one_shot.append(spark, lake, "s", "t", spark.range(5, 7).withColumn("b", F.lit(7)))  # a new partition
    after = lake.snapshots()
    assert [s.snapshot_id for s in after] == [s.snapshot_id for s in before] + [before[-1].snapshot_id + 1]
    assert "dropped_table" in (after[-1].changes_made or "")  # only the drop; the append left no trace
    assert tree() == tree_before  # the written files and the partition directories made for them are gone
    assert violations(url) == []


EPOCH_FIELDS = [(1, "epoch_year"), (1, "epoch_month"), (1, "epoch_day"), (1, "epoch_hour"), (2, "epoch_year"),
                (2, "epoch_month"), (2, "epoch_day"), (2, "epoch_hour"), (3, "epoch_year"), (3, "epoch_month"),
                (3, "epoch_day")]


def test_epoch_partition_keys_are_whole_units_since_1970(spark: SparkSession) -> None:
    """DuckLake 1.1's epoch_* keys: whole years/months/days/hours since 1970-01-01 (UTC), floored before 1970;
    the oracle is DuckDB's date_diff, and the session time zone changes nothing."""
    import duckdb

    cols = (Column(1, "tsz", "timestamptz", True), Column(2, "ts", "timestamp", True), Column(3, "d", "date", True))
    spec = PartitionSpec(9, tuple(PartitionField(i, c, t) for i, (c, t) in enumerate(EPOCH_FIELDS)))
    table = TableInfo(1, "u", 0, "s", "t", "t/", True, 1, cols, spec)
    rows = [(r[6], r[7], r[8]) for r in PART_ROWS]
    df = spark.createDataFrame(rows, "tsz timestamp, ts timestamp_ntz, d date")

    def values() -> list[list[str | None]]:
        keys = write._partition_keys(table, df)
        out = df
        for k in keys:
            out = k.add(out)
        return [[k.value(r[k.name]) for k in keys] for r in out.collect()]

    utc = values()
    spark.conf.set("spark.sql.session.timeZone", "Asia/Kolkata")
    try:
        kolkata = values()
    finally:
        spark.conf.set("spark.sql.session.timeZone", "UTC")
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    units = {"epoch_year": "year", "epoch_month": "month", "epoch_day": "day", "epoch_hour": "hour"}
    starts = {1: "TIMESTAMPTZ '1970-01-01 00:00:00+00'", 2: "TIMESTAMP '1970-01-01'", 3: "DATE '1970-01-01'"}
    casts = {1: "TIMESTAMPTZ", 2: "TIMESTAMP", 3: "DATE"}
    want = []
    for row in rows:
        sql = ", ".join(f"date_diff('{units[t]}', {starts[c]}, ${c}::{casts[c]})" for c, t in EPOCH_FIELDS)
        got = con.execute(f"SELECT {sql}", list(row)).fetchone()
        want.append([None if v is None else str(v) for v in got])
    assert utc == kolkata == want
