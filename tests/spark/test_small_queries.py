"""Data tests of SQL of their own over small lake tables are counted on the driver by DuckDB
(spark/answer/small_queries.py through spark/answer/read_pruning.py) with Spark's answer: each accepted construct over edge values
(NULLs, an empty table, int64 and decimal extremes, NaN, -0.0 and infinities, unicode and empty strings, duplicates,
inlined rows), compared with Spark running the query as written. Whatever is outside the whitelist is left to
Spark."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import sqlglot
from pyspark.sql import SparkSession

from dbt.adapters.ducklake.lake import DuckLake
from dbt.adapters.ducklake.spark.answer.read_pruning import PrunedQuery, prune_query
from dbt.adapters.ducklake.spark.answer.small_queries import count_query_rows
from dbt.adapters.ducklake.spark.read.names import LakeNames
from tests.support import reference

SETUP = [
    "CALL lake.set_option('data_inlining_row_limit', 0)",
    "CREATE TABLE lake.e (i INTEGER, b BIGINT, s VARCHAR, d DATE, m DECIMAL(38, 10), x DOUBLE, flag BOOLEAN)",
    "INSERT INTO lake.e VALUES (1, 9223372036854775807, 'a', DATE '2024-01-01', 12345678901234567890.5, 0.0, true),"
    " (2, -9223372036854775808, 'é', DATE '1970-01-01', -0.0000000001, -0.0, false),"
    " (3, 0, '', NULL, 0, 'NaN', NULL), (NULL, NULL, NULL, DATE '9999-12-31', NULL, NULL, true),"
    " (5, 5, 'a', DATE '2024-01-01', 5, 'Infinity', false), (6, 6, '日本', DATE '2024-02-29', 6.5, '-Infinity', true),"
    " (7, 7, 'A', DATE '2024-01-02', 0.5, 0.5, NULL), (7, 7, 'A', DATE '2024-01-02', 0.5, 7.0, NULL)",
    "CREATE TABLE lake.o (i INTEGER, s VARCHAR, x DOUBLE)",
    "INSERT INTO lake.o VALUES (1, 'a', 1.0), (7, 'A', 'NaN'), (NULL, NULL, NULL), (8, 'zz', -0.0)",
    "CREATE TABLE lake.z (i INTEGER, s VARCHAR)",
    "CREATE TABLE lake.f (r REAL, t TIMESTAMP)",
    "INSERT INTO lake.f VALUES (0.1, TIMESTAMP '2024-01-01')",
    "CALL lake.set_option('data_inlining_row_limit', 10)",
    "INSERT INTO lake.o VALUES (9, 'é', 2.5), (1, 'a', 1.0)",
]
_RELATIONS = [("main", n) for n in ("e", "o", "z", "f", "ev")]


@pytest.fixture(scope="module")
def lake(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DuckLake]:
    root = tmp_path_factory.mktemp("small_queries")
    catalog = f"duckdb:///{root}/l.ducklake"
    reference.execute_all(catalog, SETUP, data_path=f"{root}/data/")
    lake = DuckLake.open(catalog)
    with lake.transaction(commit_message="a view") as tx:
        tx.create_view("main", "ev", "SELECT i AS k, cast(d AS date) AS d, s FROM main.e WHERE i > 1")
    try:
        yield lake
    finally:
        lake.close()


_TEST = ("select count(*) as failures, count(*) != 0 as should_warn, count(*) != 0 as should_error "
         "from ({inner}) dbt_internal_test")

COUNTED = [
    "select * from main.e where not (x >= 0)",  # NaN is the greatest: not below 0
    "select * from main.e where x = 0",  # -0.0 = 0.0
    "select * from main.e where x = x",  # NaN = NaN
    "select * from main.e where x > i",
    "select * from main.e where m > 0.5 or m < -0.0000000001",
    "select * from main.e where m = b",
    "select * from main.e where b > 9223372036854775806 or b < -9223372036854775807",
    "select * from main.e where s > 'é' or s = ''",
    "select * from main.e where s <> 'a'",
    "select * from main.e where s is null or d is not null",
    "select * from main.e where flag",
    "select * from main.e where not flag and d < d",
    "select s, count(*) as n from main.e group by s having count(*) > 1",
    "select distinct s, d from main.e",
    "select s, d from main.e except select s, null from main.o",
    "select s from main.e intersect select s from main.o",
    "select i from main.e union select i from main.o",
    "select x from main.e union all select x from main.o",
    "select * from main.e a join main.o b on a.i = b.i and a.s = b.s",
    "select a.i from main.e a left join main.o b on a.s = b.s where b.s is null",
    "select a.i from main.e a full outer join main.o b on a.i = b.i where a.i is null or b.i is null",
    "select * from (select count(s) as c from main.z having count(s) = 0) validation_errors",
    "select * from (select count(x) as c from main.e having count(x) = 0) validation_errors",
    "select max(s) as a, min(d) as b from main.e",
    "select * from main.e limit 3",
    "with a as (select i, s from main.e), b as (select i from main.o) select * from a where i > 1",
    "with t as (select i, count(*) as n from main.e group by i), u as (select i, count(*) as n from main.o group by i)"
    " select * from t except select * from u",
    "select * from (select * from main.e where s = 'A') dbt_subquery where i > 6",
    "select * from main.ev where d > d or k >= 6",  # a lake view with an identity cast
    "select * from main.z where i is null",
]


def _pruned(spark: SparkSession, lk: DuckLake, inner: str) -> tuple[str, PrunedQuery]:
    sql = _TEST.format(inner=inner)
    return sql, prune_query(spark, LakeNames(spark, lk).refresh(_RELATIONS), sql)


@pytest.mark.parametrize("inner", COUNTED)
def test_counted_on_the_driver_as_spark_counts(spark: SparkSession, lake: DuckLake, inner: str) -> None:
    sql, q = _pruned(spark, lake, inner)
    assert q.row is not None and "__ducklake_one" in q.sql
    got = [tuple(r) for r in spark.sql(q.sql).collect()]
    assert got == [q.row.values]
    assert got == [tuple(r) for r in spark.sql(sql).collect()]  # Spark's own answer, the query as written


def test_the_counts_are_not_all_zero(spark: SparkSession, lake: DuckLake) -> None:
    """The edge values make most of these queries yield rows: the counts compared are real ones."""
    counts = [_pruned(spark, lake, inner)[1].row for inner in COUNTED]
    assert sum(1 for r in counts if r is not None and r.values[0] > 0) >= len(COUNTED) - 5


LEFT_TO_SPARK = [
    "select * from main.f where r > 0.1",  # REAL: DuckDB compares it with the literal as REAL, Spark as DOUBLE
    "select * from main.f where t is null",  # a timestamp
    "select x, count(*) from main.e group by x",  # DOUBLE grouped (-0.0, NaN)
    "select distinct x from main.e",
    "select x from main.e except select x from main.o",
    "select min(x) from main.e",
    "select i + 1 as j from main.e",  # arithmetic (overflow, types)
    "select * from main.e where s = 1",  # across kinds: Spark casts
    "select * from main.e where m < -0.00000000005",  # DECIMAL(39,11) in common: Spark rounds the literal
    "select * from main.e where d > '2024-01-01'",
    "select * from main.e where cast(s as int) > 1",  # a cast that converts
    "select * from e where i > 1",  # a bare name: maybe a temporary view
    "select * from main.e where s like 'a%'",  # a function
    "select * from main.e where s = 'a\\\\b'",  # an escape Spark reads
    "select * from main.e where x > 1e3",  # an exponent: a DOUBLE literal in Spark
    "select * from main.e where i",  # a condition that is no boolean
    "select a.i from main.e a left semi join main.o b on a.i = b.i",
    "select i, row_number() over (order by i) as r from main.e",  # a window
    "select * from main.e where i in (select i from main.o)",
    "select * from main.e where current_date > d",
    "select count(distinct s) as n from main.e having count(distinct s) = 0",
]


@pytest.mark.parametrize("inner", LEFT_TO_SPARK)
def test_other_queries_are_left_to_spark(lake: DuckLake, inner: str) -> None:
    assert count_query_rows(lake.snapshot(), sqlglot.parse_one(inner, read="spark")) is None

