"""Seeds and other rows Spark evaluates on the driver are written by the lake writer, without a Spark job, and small
results are collected and written the same way (spark/write/local_write): the same values DuckDB reads as from the
executors' write."""

from __future__ import annotations

import datetime as dt
import decimal
import os
import time
from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession

from dbt.adapters.ducklake import seeds
from dbt.adapters.ducklake.lake import DuckLake
from dbt.adapters.ducklake.seeds import seed_dataframe
from dbt.adapters.ducklake.spark.read.names import LakeNames
from dbt.adapters.ducklake.spark.write import local_write
from dbt.adapters.ducklake.spark.write.local_write import is_local
from dbt.adapters.ducklake.spark.write.work import LakeWork
from tests.support import reference
from tests.support.invariants import violations

NAMES = ["id", "name", "ts", "ts_ntz", "d", "amt", "ok", "f", "small"]
TYPES = ["bigint", "string", "timestamp", "timestamp_ntz", "date", "decimal(10,2)", "boolean", "double", "tinyint"]
ROWS = [
    (1, "plain", dt.datetime(2024, 3, 10, 2, 30), dt.datetime(2024, 11, 3, 1, 30, 0, 123456), dt.date(2024, 1, 2),
     decimal.Decimal("1.50"), True, 1.5, 7),
    (2, "it's a \\ back'slash\nnewline", "2024-11-03 01:30:00", "1969-12-31 23:59:59.999999", "1900-02-28",
     "-0.07", "false", "-0.0", "-128"),
    (3, "ünïcødé ✓ 𝄞", "1970-01-01 00:00:00", None, None, None, None, "NaN", None),
    (4, None, None, None, None, None, None, None, None),
    (5, "", "2038-01-19 03:14:08.5", "9999-12-31 23:59:59", "0001-01-01", "99999999.99", "true", "1e300", "127"),
]


@pytest.fixture
def lake(tmp_path: object) -> Iterator[tuple[str, DuckLake]]:
    catalog = f"duckdb:///{tmp_path}/s.ducklake"
    lk = DuckLake.create(catalog, f"{tmp_path}/data/")
    try:
        yield catalog, lk
    finally:
        lk.close()


def _jobs(spark: SparkSession) -> int:
    return len(spark.sparkContext.statusTracker().getJobIdsForGroup(None))


def _duckdb(catalog: str, sql: str) -> list[tuple]:
    with reference.attached(catalog) as con:
        return con.execute(sql).fetchall()


def test_a_seed_is_written_without_a_spark_job_as_the_executors_write_it(spark: SparkSession,
                                                                       lake: tuple[str, DuckLake],
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """The same rows through the driver (inline VALUES) and through the executors (a larger-seed DataFrame): DuckDB
    reads equal tables with equal types, and the driver's write ran no Spark job, in a Python process whose local
    time zone has a daylight-saving gap and overlap at the rows' times (zoned timestamps must not pass through it)."""
    catalog, lk = lake
    monkeypatch.setenv("TZ", "America/New_York")
    time.tzset()
    try:
        local = seed_dataframe(spark, NAMES, ROWS, TYPES)
        assert is_local(local)
        before = _jobs(spark)
        with LakeWork(spark, lk) as work:
            work.create_table_as("main", "by_driver", local, replace=True)
        assert _jobs(spark) == before
        LakeNames(spark, lk).refresh([("main", "by_driver")])
        read = spark.sql("SELECT * FROM main.by_driver")  # a small result of executors' work (a read)
        assert not is_local(read)
        with LakeWork(spark, lk) as work:  # collected, written by the driver
            work.create_table_as("main", "by_collect", read, replace=True)
        assert _jobs(spark) > before
        monkeypatch.setattr(seeds, "VALUES_CELLS", 0)  # as a seed too large for VALUES: computed by executors
        remote = seed_dataframe(spark, NAMES, ROWS, TYPES)
        assert not is_local(remote)
        with LakeWork(spark, lk) as work:  # rows of unknown size (Spark has no estimate): the executors write them
            work.create_table_as("main", "by_spark", remote, replace=True)
    finally:
        monkeypatch.delenv("TZ")
        time.tzset()
    lk.close()
    describe = "SELECT column_name, column_type FROM (DESCRIBE lake.main.{})"
    assert _duckdb(catalog, describe.format("by_driver")) == _duckdb(catalog, describe.format("by_spark"))
    got = _duckdb(catalog, "SELECT * FROM lake.main.by_driver ORDER BY id")
    assert repr(got) == repr(_duckdb(catalog, "SELECT * FROM lake.main.by_spark ORDER BY id"))  # NaN != NaN
    assert len(got) == len(ROWS) and got[2][7] != got[2][7]  # NaN kept
    assert got[0][2] == dt.datetime(2024, 3, 10, 2, 30, tzinfo=got[0][2].tzinfo)  # the wall time of the gap, UTC
    assert _duckdb(catalog, "SELECT * FROM lake.main.by_driver EXCEPT SELECT * FROM lake.main.by_spark") == []
    assert _duckdb(catalog, describe.format("by_collect")) == _duckdb(catalog, describe.format("by_spark"))
    assert repr(_duckdb(catalog, "SELECT * FROM lake.main.by_collect ORDER BY id")) == repr(got)
    assert _writers(catalog, "by_driver") == _writers(catalog, "by_collect") == {"parquet-cpp-arrow"}
    assert _writers(catalog, "by_spark") == {"parquet-mr"}
    assert violations(catalog) == []


def _writers(catalog: str, table: str) -> set[str]:
    """The writers of the table's data files (pyarrow on the driver, parquet-mr on Spark's executors)."""
    import pyarrow.parquet as pq

    paths = _duckdb(catalog, f"SELECT data_file FROM ducklake_list_files('lake', '{table}')")
    return {pq.ParquetFile(p).metadata.created_by.split(" version")[0] for (p,) in paths}


def test_a_seed_value_spark_cannot_cast_fails_and_leaves_the_lake(spark: SparkSession,
                                                                 lake: tuple[str, DuckLake]) -> None:
    """Under ANSI casts (Spark's default; the dbt tests of the same process may have turned it off)."""
    catalog, lk = lake
    before = lk.snapshot().snapshot_id
    ansi = spark.conf.get("spark.sql.ansi.enabled")
    spark.conf.set("spark.sql.ansi.enabled", "true")
    try:
        with pytest.raises(Exception, match="CAST_INVALID_INPUT|cannot be cast"), LakeWork(spark, lk) as work:
            work.create_table_as("main", "bad", seed_dataframe(spark, ["id"], [("1",), ("x1",)], ["bigint"]))
    finally:
        spark.conf.set("spark.sql.ansi.enabled", ansi)
    assert lk.snapshot().snapshot_id == before
    data = os.path.join(os.path.dirname(catalog.removeprefix("duckdb:///")), "data")
    assert [f for _, _, fs in os.walk(data) for f in fs if f.endswith(".parquet")] == []


def test_results_not_small_go_through_spark(spark: SparkSession, lake: tuple[str, DuckLake],
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """Small results are collected (one Spark job, not a write); a result Spark estimates larger than
    SMALL_RESULT_BYTES, or that has more than SMALL_RESULT_ROWS rows (an estimate is no bound), is written by
    Spark's executors. The rows are the same every way."""
    catalog, lk = lake
    query = spark.range(1000).selectExpr("id", "explode(sequence(0, id % 3)) AS k")  # Spark estimates 1,000 rows
    assert not is_local(query)
    with LakeWork(spark, lk) as work:
        work.create_table_as("main", "small", query)
    monkeypatch.setattr(local_write, "SMALL_RESULT_ROWS", 1999)  # the result has 1,999 rows: still small
    with LakeWork(spark, lk) as work:
        work.create_table_as("main", "rows_ok", query)
    monkeypatch.setattr(local_write, "SMALL_RESULT_ROWS", 1998)
    with LakeWork(spark, lk) as work:
        work.create_table_as("main", "many_rows", query)
    monkeypatch.setattr(local_write, "SMALL_RESULT_ROWS", 100_000)
    monkeypatch.setattr(local_write, "SMALL_RESULT_BYTES", 1000)
    with LakeWork(spark, lk) as work:
        work.create_table_as("main", "large_estimate", query)
    lk.close()
    assert _writers(catalog, "small") == _writers(catalog, "rows_ok") == {"parquet-cpp-arrow"}
    assert _writers(catalog, "many_rows") == _writers(catalog, "large_estimate") == {"parquet-mr"}
    counts = _duckdb(catalog, "SELECT (SELECT count(*) FROM lake.main.small), (SELECT count(*) FROM lake.main.many_rows)")
    assert counts == [(1999, 1999)]
    for t in ("rows_ok", "many_rows", "large_estimate"):
        assert _duckdb(catalog, f"SELECT * FROM lake.main.small EXCEPT ALL SELECT * FROM lake.main.{t}") == []
    assert violations(catalog) == []
