"""DML and filtered scans skip the data files whose statistics exclude their condition or merge keys.

The proof is an outcome: before each statement, the files that should be skipped are moved away, so reading one of
them fails the statement. The results are compared with DuckDB running the same statements on a copy of the lake.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest
from pyspark.sql import SparkSession

from dbt.adapters.ducklake.lake import DuckLake, read_arrow
from dbt.adapters.ducklake.lake.read.scan import plan_scan
from dbt.adapters.ducklake.spark.read.predicates import to_predicate
from dbt.adapters.ducklake.spark.read.scan import read_table
from dbt.adapters.ducklake.spark.write.one_shot import delete_where, merge_into, update_where
from tests.lake.compare import arrow_rows
from tests.support import reference
from tests.support.invariants import violations

# four files of 100 rows each: ids 0-99, 100-199, 200-299, 300-399 (x holds a NaN in the last one)
SETUP = [
    "CREATE TABLE lake.t (id BIGINT, name VARCHAR, x DOUBLE, d DATE)",
    "CALL lake.set_option('data_inlining_row_limit', 0)",
] + [
    f"INSERT INTO lake.t SELECT i, 'n' || lpad(i::VARCHAR, 3, '0'), "
    f"CASE WHEN i = 399 THEN 'NaN'::DOUBLE ELSE i / 10 END, DATE '2024-01-01' + (i // 100)::INT "
    f"FROM range({k * 100}, {k * 100 + 100}) r(i)"
    for k in range(4)
]


def _build(catalog: str, data: str) -> None:
    reference.execute_all(catalog, SETUP, data_path=data)


@contextmanager
def _only_files(lake: DuckLake, keep: Callable[[int, int], bool]) -> Iterator[int]:
    """Move away every live file of main.t whose id range [min, max] keep() rejects; yields how many moved."""
    st = lake.snapshot()
    moved = []
    for f in st.files(st.table("main", "t")):
        ids = next(s for s in f.stats if s.column_id == 1)
        if not keep(int(ids.min_value), int(ids.max_value)):
            os.rename(f.path, f.path + ".away")
            moved.append(f.path)
    try:
        yield len(moved)
    finally:
        for p in moved:
            os.rename(p + ".away", p)


@pytest.fixture
def passes(monkeypatch: pytest.MonkeyPatch) -> None:
    """MERGE by its passes: a small MERGE's one join reads its (small) target whole, by design."""
    from dbt.adapters.ducklake.spark.write import dml

    monkeypatch.setattr(dml, "SMALL_MERGE_TARGET_ROWS", -1)


@pytest.mark.usefixtures("passes")
def test_dml_reads_only_files_that_can_match(spark: SparkSession, tmp_path: object) -> None:
    ours, theirs = f"duckdb:///{tmp_path}/ours.ducklake", f"duckdb:///{tmp_path}/theirs.ducklake"
    _build(ours, f"{tmp_path}/ours_data/")
    _build(theirs, f"{tmp_path}/theirs_data/")
    lake = DuckLake.open(ours)
    st = lake.snapshot()
    t = st.table("main", "t")
    assert plan_scan(st, t, to_predicate("id BETWEEN 120 AND 130", t.columns)).pruned == 3

    with _only_files(lake, lambda lo, hi: lo <= 130 and hi >= 120) as away:
        assert away == 3
        assert delete_where(spark, lake, "main", "t", "id BETWEEN 120 AND 130") is not None
    with _only_files(lake, lambda lo, hi: hi >= 390) as away:
        assert away == 3
        assert update_where(spark, lake, "main", "t", {"name": "upper(name)"}, "id >= 390 AND x > 1") is not None
    # a small source prunes by its key values: 205..210 and 1000 touch only the file of 200-299
    source = spark.sql("SELECT CAST(id AS BIGINT) AS id, concat('m', id) AS name, CAST(0 AS DOUBLE) AS x, "
                       "DATE '2030-01-01' AS d FROM (SELECT explode(array(205, 207, 210, 1000)) AS id)")
    with _only_files(lake, lambda lo, hi: lo <= 210 and hi >= 205) as away:
        assert away == 4  # the UPDATE added a file (390-399)
        assert merge_into(spark, lake, "main", "t", source, "t.id = s.id", matched="update",
                          matched_set={"name": "s.name"}, not_matched_insert=True) is not None
    # a filtered DataFrame read skips files too; the name bounds exclude every file but the first
    with _only_files(lake, lambda lo, hi: lo == 0) as away:
        assert away == 6  # and the MERGE two more (its post-images; the new row)
        got = sorted(tuple(r) for r in read_table(spark, lake.snapshot(), t, "name >= 'n' AND name < 'n005' AND t.d IS NOT NULL")
                     .collect())
    assert [r[0] for r in got] == [0, 1, 2, 3, 4]

    st = lake.snapshot()
    ours_rows = _no_nan(arrow_rows(read_arrow(st, st.table("main", "t"))))
    lake.close()
    src = source.toArrow()  # noqa: F841 - read by DuckDB's replacement scan
    with reference.attached(theirs) as con:
        con.execute("DELETE FROM lake.t WHERE id BETWEEN 120 AND 130")
        con.execute("UPDATE lake.t SET name = upper(name) WHERE id >= 390 AND x > 1")
        con.execute("MERGE INTO lake.t AS t USING src AS s ON t.id = s.id WHEN MATCHED THEN UPDATE SET name = s.name "
                    "WHEN NOT MATCHED THEN INSERT VALUES (s.id, s.name, s.x, s.d)")
        expected = _no_nan(arrow_rows(con.execute("SELECT rowid, * FROM lake.t").to_arrow_table()))
    assert ours_rows == expected
    with reference.attached(ours) as con:
        assert _no_nan(arrow_rows(con.execute("SELECT rowid, * FROM lake.t").to_arrow_table())) == expected
    assert violations(ours) == []


def _no_nan(rows: list[tuple]) -> list[tuple]:
    """Rows without rowid, NaN as text (NaN != NaN would fail any comparison), sorted."""
    return sorted(tuple("NaN" if isinstance(v, float) and math.isnan(v) else v for v in r[1:]) for r in rows)


@pytest.mark.usefixtures("passes")
def test_merge_with_a_large_source_prunes_by_key_range(spark: SparkSession, tmp_path: object) -> None:
    from dbt.adapters.ducklake.spark.write import dml

    catalog = f"duckdb:///{tmp_path}/m.ducklake"
    _build(catalog, f"{tmp_path}/data/")
    lake = DuckLake.open(catalog)
    source = spark.sql("SELECT id, 'z' AS name, CAST(1 AS DOUBLE) AS x, DATE '2030-01-01' AS d "
                       "FROM range(310, 330)")
    old = dml.MAX_KEY_LIST
    dml.MAX_KEY_LIST = 5  # make this source count as large: only its key range [310, 329] prunes
    try:
        with _only_files(lake, lambda lo, hi: lo <= 329 and hi >= 310) as away:
            assert away == 3
            assert merge_into(spark, lake, "main", "t", source, "t.id = s.id AND t.d >= '2024-01-04'",
                              matched="delete") is not None
    finally:
        dml.MAX_KEY_LIST = old
    st = lake.snapshot()
    ids = sorted(r[1] for r in arrow_rows(read_arrow(st, st.table("main", "t"))))
    lake.close()
    assert ids == [i for i in range(400) if not 310 <= i < 330]


def test_merge_deleting_unmatched_target_rows_reads_every_file(spark: SparkSession, tmp_path: object) -> None:
    catalog = f"duckdb:///{tmp_path}/m.ducklake"
    _build(catalog, f"{tmp_path}/data/")
    lake = DuckLake.open(catalog)
    source = spark.sql("SELECT id FROM range(0, 400) WHERE id % 2 = 0")
    with _only_files(lake, lambda lo, hi: True) as away:
        assert away == 0
        assert merge_into(spark, lake, "main", "t", source, "t.id = s.id", not_matched_by_source_delete=True)
    st = lake.snapshot()
    ids = sorted(r[1] for r in arrow_rows(read_arrow(st, st.table("main", "t"))))
    lake.close()
    assert ids == list(range(0, 400, 2))


@pytest.mark.parametrize("cond", ["x > 39", "x != 1.0", "NOT (id < 300)", "name > 'n3' OR x > 100"])
def test_conditions_that_cannot_be_decided_by_stats_still_find_every_row(spark: SparkSession, tmp_path: object,
                                                                          cond: str) -> None:
    catalog = f"duckdb:///{tmp_path}/m.ducklake"
    _build(catalog, f"{tmp_path}/data/")
    lake = DuckLake.open(catalog)
    st = lake.snapshot()
    got = sorted(r[0] for r in read_table(spark, st, st.table("main", "t"), cond).select("id").collect())
    lake.close()
    with reference.attached(catalog) as con:
        expected = sorted(r[0] for r in con.execute(f"SELECT id FROM lake.t WHERE {cond}").fetchall())
    assert got == expected and expected
