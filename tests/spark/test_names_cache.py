"""The lake names' cached state and view SQL (spark/read/names.py): a statement after an unrelated commit reuses the view
SQL of the tables that commit did not touch, and every commit of another writer (DuckDB here) is seen by the next
statement, whichever table it touched."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from dbt.adapters.ducklake.lake import DuckLake
from dbt.adapters.ducklake.spark.read.names import LakeNames
from tests.support import reference


@pytest.fixture()
def lake(tmp_path: Path) -> Iterator[tuple[str, DuckLake]]:
    catalog = f"duckdb:///{tmp_path}/l.ducklake"
    with reference.attached(catalog, data_path=f"{tmp_path}/data/") as con:
        con.execute("CALL lake.set_option('data_inlining_row_limit', 2)")
        con.execute("CREATE TABLE lake.a AS SELECT range AS id FROM range(10)")
        con.execute("CREATE TABLE lake.b AS SELECT range AS id FROM range(10)")
    lk = DuckLake.open(catalog)
    try:
        yield catalog, lk
    finally:
        lk.close()


def _duck(catalog: str, lk: DuckLake, sql: str) -> None:
    lk.close()  # one DuckDB instance per file and process
    with reference.attached(catalog) as con:
        con.execute(sql)


def _read(spark: SparkSession, names: LakeNames, table: str) -> list[int]:
    names.refresh([("main", table)])
    return sorted(r[0] for r in spark.sql(f"SELECT id FROM main.{table}").collect())


def test_cached_view_sql_follows_other_writers(spark: SparkSession, lake: tuple[str, DuckLake]) -> None:
    catalog, lk = lake
    names = LakeNames(spark, lk)
    assert _read(spark, names, "a") == list(range(10))
    assert _read(spark, names, "b") == list(range(10))
    a_id = names.state().table("main", "a").table_id
    b_id = names.state().table("main", "b").table_id
    a_sql = names._table_sql[a_id]

    _duck(catalog, lk, "INSERT INTO lake.b SELECT range FROM range(100, 105)")  # a file
    assert _read(spark, names, "b") == [*range(10), *range(100, 105)]
    assert _read(spark, names, "a") == list(range(10))
    assert names._table_sql[a_id] is a_sql  # a's view SQL was not planned again
    assert names._table_sql[b_id] is not a_sql

    kept = [0, 1, *range(4, 10)]
    for sql, col, want_a in [
        ("DELETE FROM lake.a WHERE id IN (2, 3)", "id", kept),
        ("INSERT INTO lake.a VALUES (50)", "id", [*kept, 50]),  # inlined
        ("UPDATE lake.a SET id = 60 WHERE id = 50", "id", [*kept, 60]),
        ("ALTER TABLE lake.a RENAME COLUMN id TO key", "key", [*kept, 60]),
        ("CREATE TABLE lake.c AS SELECT 1 AS x", "key", [*kept, 60]),  # a unchanged: SQL reused, rows the same
    ]:
        _duck(catalog, lk, sql)
        names.refresh([("main", "a")])
        assert sorted(r[0] for r in spark.sql(f"SELECT {col} FROM main.a").collect()) == want_a, sql
    assert _read(spark, names, "b") == [*range(10), *range(100, 105)]


def test_a_database_spark_has_is_not_created_again(spark: SparkSession, lake: tuple[str, DuckLake],
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Registering a table runs CREATE DATABASE (a command Spark parses, analyses and runs: 10-20 ms) only for a
    database Spark does not have yet."""
    catalog, lk = lake
    _duck(catalog, lk, "CREATE SCHEMA lake.names_fresh; CREATE TABLE lake.names_fresh.t AS SELECT 7 AS id")
    created: list[str] = []
    real = SparkSession.sql

    def counted(self: SparkSession, query: str, *args: object, **kw: object) -> object:
        if query.lstrip().upper().startswith("CREATE DATABASE"):
            created.append(query)
        return real(self, query, *args, **kw)

    monkeypatch.setattr(SparkSession, "sql", counted)
    names = LakeNames(spark, lk)
    assert _read(spark, names, "a") == list(range(10))
    before = len(created)  # main and the manifests' database, if this session had not made them yet
    assert _read(spark, names, "b") == list(range(10))
    assert len(created) == before
    names.refresh([("names_fresh", "t")])
    assert len(created) == before + 1 and spark.catalog.databaseExists("names_fresh")
    assert [r[0] for r in spark.sql("SELECT id FROM names_fresh.t").collect()] == [7]
