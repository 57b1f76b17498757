"""Reading a unit of work's staged state (spark/write/staged_reads, `LakeNames.staged`): before the commit, each object the
unit changed reads as the commit will make it (what write-audit-publish builds audit)."""

from __future__ import annotations

import os
from pathlib import Path

from pyspark.sql import SparkSession

from dbt.adapters.ducklake.lake import DuckLake, read_arrow
from dbt.adapters.ducklake.spark.read.names import LakeNames
from dbt.adapters.ducklake.spark.write.dml import When
from dbt.adapters.ducklake.spark.write.staged_reads import ABSENT, SCRATCH_PREFIX
from dbt.adapters.ducklake.spark.write.work import LakeWork
from tests.lake.compare import arrow_rows
from tests.support.invariants import violations

TARGET = "SELECT CAST(id AS INT) AS id, concat('t', id) AS v FROM range(1, 9)"
SOURCE = "SELECT CAST(id AS INT) AS id, concat('s', id) AS v FROM range(5, 12)"


def _committed(lake: DuckLake, table: str) -> list[tuple]:
    st = lake.snapshot()
    return sorted(r[1:] for r in arrow_rows(read_arrow(st, st.table("main", table))))  # row ids left out


def _files(data: str) -> set[str]:
    # the read path's manifests (links to committed files, made by any read) are left out
    return {os.path.join(d, f) for d, _, fs in os.walk(data) for f in fs if "_ducklake_spark" not in d}


def _staged(spark: SparkSession, work: LakeWork, table: str) -> list[tuple]:
    sql = work.read_sql("main", table)
    assert sql not in (None, ABSENT)
    return sorted(tuple(r) for r in spark.sql(sql).collect())


def test_staged_reads_equal_the_committed_result(spark: SparkSession, tmp_path: Path) -> None:
    data = f"{tmp_path}/data/"
    catalog = f"duckdb:///{tmp_path}/m.ducklake"
    lake = DuckLake.create(catalog, data)
    with LakeWork(spark, lake) as work:
        for name in ("merged", "appended", "deleted", "untouched", "dropped"):
            work.create_table_as("main", name, spark.sql(TARGET))

    work = LakeWork(spark, lake)
    work.merge("main", "merged", spark.sql(SOURCE), "t.id = s.id",
               [When("matched", "update", None, {"v": "s.v"}), When("not_matched", "insert")])
    work.insert("main", "appended", spark.sql(SOURCE))
    work.delete("main", "deleted", "id % 3 = 0")
    work.create_table_as("main", "created", spark.sql(SOURCE))
    work.delete("main", "created", "id = 7")
    work.drop("main", "dropped")
    names = LakeNames(spark, lake)  # the lake's Spark names, as statements of a build read them
    names.staged = work
    names.refresh([("main", "created")])
    work.create_view("main", "created_view", "SELECT id, v FROM main.created WHERE id > 8")

    staged = {t: _staged(spark, work, t) for t in ("merged", "appended", "deleted", "created")}
    assert work.read_sql("main", "untouched") is None
    assert work.read_sql("main", "dropped") == ABSENT
    assert os.listdir(data) and any(d.startswith(SCRATCH_PREFIX) for d in os.listdir(data))  # deleted positions

    # through the names (a view reading a staged table too)
    names.refresh([("main", "merged"), ("main", "created_view"), ("main", "untouched")])
    assert sorted(tuple(r) for r in spark.table("main.merged").collect()) == staged["merged"]
    assert sorted(tuple(r) for r in spark.table("main.created_view").collect()) == [
        r for r in staged["created"] if r[0] > 8]
    assert sorted(tuple(r) for r in spark.table("main.untouched").collect()) == _committed(lake, "untouched")
    assert names.reads_staged([("main", "merged")]) and not names.reads_staged([("main", "untouched")])

    work.commit()
    assert not any(d.startswith(SCRATCH_PREFIX) for d in os.listdir(data))
    for table, rows in staged.items():
        assert rows == _committed(lake, table), table
    names.staged = None
    names.invalidate(work.touched)
    names.refresh([("main", "merged")])
    assert sorted(tuple(r) for r in spark.table("main.merged").collect()) == staged["merged"]
    lake.close()
    assert violations(catalog) == []


def test_rollback_removes_the_staged_and_scratch_files(spark: SparkSession, tmp_path: Path) -> None:
    data = f"{tmp_path}/data/"
    lake = DuckLake.create(f"duckdb:///{tmp_path}/m.ducklake", data)
    with LakeWork(spark, lake) as work:
        work.create_table_as("main", "t", spark.sql(TARGET))
    before = _files(data)
    work = LakeWork(spark, lake)
    work.delete("main", "t", "id < 3")
    work.insert("main", "t", spark.sql(SOURCE))
    assert len(_staged(spark, work, "t")) == 6 + 7
    work.rollback()
    assert _files(data) == before
    assert not any(d.startswith(SCRATCH_PREFIX) for d in os.listdir(data))
    lake.close()
