"""The unit of work (`LakeWork`): several statements, one snapshot, and DML on a table created in the same unit."""

from __future__ import annotations

import pytest
from pyspark.sql import SparkSession

from dbt.adapters.ducklake.lake import DuckLake, read_arrow
from dbt.adapters.ducklake.spark.write.dml import MergeCardinalityError, When
from dbt.adapters.ducklake.spark.write.work import LakeWork
from tests.lake.compare import arrow_rows
from tests.support.coverage import pairs
from tests.support.invariants import violations

TARGET = "SELECT CAST(id AS INT) AS id, concat('t', id) AS v, CAST(id * 10 AS BIGINT) AS n FROM range(1, 9)"
SOURCE = "SELECT CAST(id AS INT) AS id, concat('s', id) AS v, CAST(id AS BIGINT) AS n FROM range(5, 12)"
CLAUSES = {
    "update_insert": [When("matched", "update", None, {"v": "s.v"}), When("not_matched", "insert")],
    "conditions": [When("matched", "delete", "s.id = 6"), When("matched", "update", "t.n > 60", None),
                   When("not_matched", "insert", "s.id % 2 = 0"), When("not_matched_by_source", "update", "t.id < 3",
                                                                        {"v": "'gone'"}),
                   When("not_matched_by_source", "delete", "t.id = 4")],
    "by_source_only": [When("not_matched_by_source", "delete")],
    "insert_only": [When("not_matched", "insert", None, None, ("id", "v"))],
}


def _rows(lake: DuckLake, table: str) -> list[tuple]:
    st = lake.snapshot()
    return sorted(r[1:] for r in arrow_rows(read_arrow(st, st.table("main", table))))  # row ids left out


# by default each case on one catalog backend, the backends in turn (every case and every backend still run); every
# pair in the full suite
@pytest.mark.parametrize(("case", "catalog_url"), [
    pytest.param(c, b, id=f"{b}-{c}", marks=[pytest.mark.postgres] if b == "postgres" else [])
    for c, b in pairs(sorted(CLAUSES), ["duckdb", "sqlite", "postgres"])], indirect=["catalog_url"])
def test_merge_into_a_table_created_in_the_same_unit(spark: SparkSession, catalog_url: str, data_path: str,
                                                      case: str) -> None:
    """MERGE after CREATE TABLE AS in one unit gives the rows the same MERGE gives after the table's commit (as
    DELETE and UPDATE do: the unit's staged files are rewritten), in one snapshot."""
    lake = DuckLake.create(catalog_url, data_path)
    clauses = CLAUSES[case]
    work = LakeWork(spark, lake)
    work.create_table_as("main", "committed", spark.sql(TARGET))
    work.commit()
    work = LakeWork(spark, lake)
    assert work.merge("main", "committed", spark.sql(SOURCE), "t.id = s.id", clauses) is not None
    work.commit()

    before = lake.snapshot().snapshot_id
    work = LakeWork(spark, lake)
    work.create_table_as("main", "new", spark.sql(TARGET))
    work.merge("main", "new", spark.sql(SOURCE), "t.id = s.id", clauses)
    work.commit()
    assert lake.snapshot().snapshot_id == before + 1
    assert _rows(lake, "new") == _rows(lake, "committed")
    lake.close()
    assert violations(catalog_url) == []


def test_merge_into_an_empty_table_created_in_the_same_unit(spark: SparkSession, tmp_path: object) -> None:
    lake = DuckLake.create(f"duckdb:///{tmp_path}/m.ducklake", f"{tmp_path}/data/")
    work = LakeWork(spark, lake)
    work.create_table_as("main", "t", spark.sql(TARGET + " WHERE false"))
    work.merge("main", "t", spark.sql(SOURCE), "t.id = s.id", CLAUSES["update_insert"])
    work.commit()
    assert _rows(lake, "t") == [(i, f"s{i}", i) for i in range(5, 12)]
    lake.close()


def test_merge_into_a_new_table_refuses_several_matches(spark: SparkSession, tmp_path: object) -> None:
    lake = DuckLake.create(f"duckdb:///{tmp_path}/m.ducklake", f"{tmp_path}/data/")
    work = LakeWork(spark, lake)
    work.create_table_as("main", "t", spark.sql(TARGET))
    twice = spark.sql("SELECT CAST(2 AS INT) AS id, 'a' AS v, 1L AS n UNION ALL SELECT 2, 'b', 2L")
    with pytest.raises(MergeCardinalityError, match="repeats keys"):
        work.merge("main", "t", twice, "t.id = s.id", CLAUSES["update_insert"])
    with pytest.raises(MergeCardinalityError, match="several source rows match one target row"):
        work.merge("main", "t", twice, "t.id = 2 AND s.n > 0", [When("matched", "delete")])
    work.rollback()
    assert not lake.snapshot().tables
    lake.close()


def test_a_column_added_after_a_drop_keeps_the_rows_written_in_the_same_unit(spark: SparkSession,
                                                                               file_catalog_url: str,
                                                                               data_path: str) -> None:
    """ADD COLUMN then INSERT in one unit (dbt's on_schema_change inside a model's transaction) on a table that
    dropped a column before: the new column's id is above the dropped one's (the reference never reuses an id), and
    the files written in the unit carry that same id, so DuckDB reads the new column's values (not NULL)."""
    from dbt.adapters.ducklake.lake.records import Column
    from tests.support import reference

    lake = DuckLake.create(file_catalog_url, data_path)
    with LakeWork(spark, lake) as work:
        work.create_table_as("main", "t", spark.sql("SELECT CAST(id AS INT) AS a, CAST(id AS INT) AS b, "
                                                    "CAST(id AS INT) AS c FROM range(3)"))
    with LakeWork(spark, lake) as work:
        work.drop_column("main", "t", "c")
    with LakeWork(spark, lake) as work:
        work.add_columns("main", "t", [Column(0, "d", "varchar")])
        work.insert("main", "t", spark.sql("SELECT 10 AS a, 20 AS b, 'new' AS d"))
    info = lake.snapshot().table("main", "t")
    assert info.column("d").column_id == 4  # a:1, b:2, c:3 (dropped), d:4
    assert _rows(lake, "t") == [(0, 0, None), (1, 1, None), (2, 2, None), (10, 20, "new")]
    lake.close()
    with reference.attached(file_catalog_url, read_only=True) as con:
        assert sorted(con.execute("SELECT a, b, d FROM lake.main.t").fetchall(), key=str) == sorted(
            [(0, 0, None), (1, 1, None), (2, 2, None), (10, 20, "new")], key=str)
    assert violations(file_catalog_url) == []


def test_merge_matches_struct_fields_by_name(spark: SparkSession, tmp_path: object) -> None:
    """A source whose struct lists the table's fields in another order: values go to the fields of their names, also
    where two clauses' values meet in one expression (Spark would cast, or refuse, the structs by position)."""
    lake = DuckLake.create(f"duckdb:///{tmp_path}/m.ducklake", f"{tmp_path}/data/")
    work = LakeWork(spark, lake)
    work.create_table_as("main", "t", spark.sql("SELECT id, named_struct('a', id, 'b', concat('t', id)) AS st "
                                                "FROM range(1, 4)"))
    work.commit()
    work = LakeWork(spark, lake)
    source = spark.sql("SELECT id, named_struct('b', concat('s', id), 'a', id * 10) AS st FROM range(2, 6)")
    work.merge("main", "t", source, "t.id = s.id", [When("matched", "update", "s.id = 2", None),
                                                    When("matched", "update", None, {"st": "s.st"}),
                                                    When("not_matched", "insert")])
    work.commit()
    assert _rows(lake, "t") == [(1, {"a": 1, "b": "t1"})] + [(i, {"a": i * 10, "b": f"s{i}"}) for i in range(2, 6)]
    lake.close()
