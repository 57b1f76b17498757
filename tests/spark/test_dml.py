"""DELETE with Spark gives the same table, snapshot and change feed as DuckDB running the same statement."""

from __future__ import annotations

import pytest
from pyspark.sql import SparkSession

from dbt.adapters.ducklake.lake import DuckLake, read_arrow
from dbt.adapters.ducklake.lake.changes import read_changes
from dbt.adapters.ducklake.spark.dml import delete_where
from tests.lake.compare import arrow_rows
from tests.support import reference
from tests.support.invariants import violations
from tests.support.reference_lakes import build

CASES = [
    # scenario, schema, table, conditions applied one after the other
    ("repeated_deletes", "main", "d", ["id % 3 = 0", "v LIKE 'r2%'", "id BETWEEN 20 AND 60"]),
    ("inlined", "s", "t", ["id > 9 AND id < 120", "score IS NULL OR flag = 42"]),
    ("updates", "main", "u", ["v = 'all' AND id >= 1005", "n < 40"]),
    ("compaction", "main", "c", ["id % 2 = 1"]),
    ("nested", "main", "n", ["size(l) > 1 OR s.a IS NULL"]),
]


@pytest.mark.parametrize(("scenario", "schema", "table", "conditions"), CASES, ids=[c[0] for c in CASES])
def test_delete_like_duckdb(spark: SparkSession, tmp_path: object, scenario: str, schema: str, table: str,
                            conditions: list[str]) -> None:
    ours, theirs = f"duckdb:///{tmp_path}/ours.ducklake", f"duckdb:///{tmp_path}/theirs.ducklake"
    build(ours, f"{tmp_path}/ours_data/", scenario)
    build(theirs, f"{tmp_path}/theirs_data/", scenario)
    lake = DuckLake.open(ours)
    first = lake.snapshot().snapshot_id
    if not any(t.name == table for t in lake.snapshot().tables.values()):
        pytest.fail(f"scenario {scenario} has no table {table}")
    for cond in conditions:
        snap = delete_where(spark, lake, schema, table, cond, author="tests", commit_message=f"delete {cond}")
        assert snap is not None and snap.commit_message == f"delete {cond}"
    assert delete_where(spark, lake, schema, table, "false") is None  # nothing matched: no snapshot
    assert lake.snapshot().snapshot_id == first + len(conditions)
    st = lake.snapshot()
    our_rows = arrow_rows(read_arrow(st, st.table(schema, table)))
    our_changes = arrow_rows(read_changes(lake, schema, table, first + 1, st.snapshot_id))
    lake.close()
    with reference.attached(theirs) as con:
        for cond in conditions:
            duck_cond = cond.replace("size(l)", "len(l)")
            con.execute(f"DELETE FROM lake.{schema}.{table} WHERE {duck_cond}")
        expected = con.execute(f"SELECT rowid, * FROM lake.{schema}.{table}").to_arrow_table()
        latest = con.execute("SELECT max(snapshot_id) FROM lake.snapshots()").fetchone()[0]
        expected_changes = con.execute(
            f"SELECT * FROM ducklake_table_changes('lake', '{schema}', '{table}', {first + 1}, {latest})"
        ).to_arrow_table()
    assert our_rows == arrow_rows(expected)
    assert our_changes == arrow_rows(expected_changes)
    with reference.attached(ours) as con:  # and DuckDB reads what we wrote the same way
        assert arrow_rows(con.execute(f"SELECT rowid, * FROM lake.{schema}.{table}").to_arrow_table()) == our_rows
    assert violations(ours) == []


UPDATE_CASES = [
    ("repeated_deletes", "main", "d", [({"v": "upper(v)"}, "id % 4 = 1"), ({"id": "id + 1000"}, "id < 30")]),
    ("inlined", "s", "t", [({"score": "score * 2", "name": "'x'"}, "id >= 20"), ({"flag": "7"}, None)]),
    ("updates", "main", "u", [({"n": "n + 1"}, "v = 'all'")]),
]


@pytest.mark.parametrize(("scenario", "schema", "table", "updates"), UPDATE_CASES, ids=[c[0] for c in UPDATE_CASES])
def test_update_like_duckdb(spark: SparkSession, tmp_path: object, scenario: str, schema: str, table: str,
                            updates: list) -> None:
    from dbt.adapters.ducklake.spark.dml import update_where

    ours, theirs = f"duckdb:///{tmp_path}/ours.ducklake", f"duckdb:///{tmp_path}/theirs.ducklake"
    build(ours, f"{tmp_path}/ours_data/", scenario)
    build(theirs, f"{tmp_path}/theirs_data/", scenario)
    lake = DuckLake.open(ours)
    first = lake.snapshot().snapshot_id
    for sets, cond in updates:
        assert update_where(spark, lake, schema, table, sets, cond) is not None
    assert update_where(spark, lake, schema, table, {list(updates[0][0])[0]: "NULL"}, "false") is None
    st = lake.snapshot()
    our_rows = arrow_rows(read_arrow(st, st.table(schema, table)))
    our_changes = arrow_rows(read_changes(lake, schema, table, first + 1, st.snapshot_id))
    lake.close()
    with reference.attached(theirs) as con:
        for sets, cond in updates:
            assignment = ", ".join(f"{k} = {v}" for k, v in sets.items())
            con.execute(f"UPDATE lake.{schema}.{table} SET {assignment}" + (f" WHERE {cond}" if cond else ""))
        expected = con.execute(f"SELECT rowid, * FROM lake.{schema}.{table}").to_arrow_table()
        latest = con.execute("SELECT max(snapshot_id) FROM lake.snapshots()").fetchone()[0]
        expected_changes = con.execute(
            f"SELECT * FROM ducklake_table_changes('lake', '{schema}', '{table}', {first + 1}, {latest})"
        ).to_arrow_table()
    assert our_rows == arrow_rows(expected)
    assert our_changes == arrow_rows(expected_changes)
    kinds = {r[2] for r in our_changes}
    assert {"update_preimage", "update_postimage"} <= kinds
    with reference.attached(ours) as con:
        assert arrow_rows(con.execute(f"SELECT rowid, * FROM lake.{schema}.{table}").to_arrow_table()) == our_rows
    assert violations(ours) == []
