"""dbt's generic tests over small lake tables are counted on the driver (spark/answer/small_counts.py through
spark/answer/read_pruning.py): no Spark job, and the answer is Spark's own (the query run as written) and DuckDB's, on
DuckDB-written tables with deletes, an update, inlined rows, a column added later, duplicates and NULLs in files and
inlined rows, and through a lake view. Shapes whose values Arrow would compare otherwise than Spark (floats, implicit
casts, escapes) and tables that are not small are left to Spark."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession

from dbt.adapters.ducklake.lake import DuckLake
from dbt.adapters.ducklake.lake.errors import MissingDataFileError
from dbt.adapters.ducklake.spark.answer import read_pruning, small_counts
from dbt.adapters.ducklake.spark.answer.read_pruning import PrunedQuery, prune_query
from dbt.adapters.ducklake.spark.read.names import LakeNames
from tests.support import reference
from tests.support.spark_jobs import job_group

# main.p (parent): ids 0-39 in two files, a delete file (ids 5, 6), an update (id 7 -> 107: a delete + a new row),
# then inlined rows (a duplicate id 10, id NULL); kind has values outside ('a', 'b') and NULLs; main.c (child):
# INTEGER parent ids, some missing from main.p, some NULL; a column `late` added after the first file.
SETUP = [
    "CALL lake.set_option('data_inlining_row_limit', 0)",
    "CREATE TABLE lake.p (id BIGINT, kind VARCHAR, flag BOOLEAN, amt DECIMAL(9, 2), d DATE, x DOUBLE, "
    "ts TIMESTAMP)",
    "INSERT INTO lake.p SELECT i, CASE WHEN i % 3 = 0 THEN 'a' WHEN i % 3 = 1 THEN 'b' WHEN i < 10 THEN NULL "
    "ELSE 'z' || (i % 2) END, i % 2 = 0, i / 4, DATE '2024-01-01' + (i // 5)::INT, (i % 4) * 0.5, "
    "TIMESTAMP '2024-01-01' + INTERVAL (i // 2) HOUR FROM range(0, 20) r(i)",
    "INSERT INTO lake.p SELECT i, CASE WHEN i % 3 = 0 THEN 'a' ELSE 'b' END, i % 2 = 0, i / 4, "
    "DATE '2024-01-01' + (i // 5)::INT, (i % 4) * 0.5, TIMESTAMP '2024-01-01' + INTERVAL (i // 2) HOUR "
    "FROM range(20, 40) r(i)",
    "DELETE FROM lake.p WHERE id IN (5, 6)",
    "UPDATE lake.p SET id = 107 WHERE id = 7",
    "CREATE TABLE lake.c (cid INTEGER, pid INTEGER, note VARCHAR)",
    "INSERT INTO lake.c SELECT i, CASE WHEN i % 7 = 0 THEN NULL ELSE i * 3 END, 'n' || i FROM range(0, 30) r(i)",
    "ALTER TABLE lake.c ADD COLUMN late VARCHAR",
    "INSERT INTO lake.c VALUES (100, 5, 'x', 'l'), (101, 999, 'y', NULL), (102, 7, NULL, 'l')",
    "CALL lake.set_option('data_inlining_row_limit', 10)",
    "INSERT INTO lake.p VALUES (10, 'c', NULL, 1.5, NULL, NULL, NULL), (NULL, 'a', true, NULL, NULL, NULL, NULL)",
    "INSERT INTO lake.c VALUES (103, 107, 'i', NULL), (NULL, 10, NULL, NULL)",
]


@pytest.fixture(scope="module")
def lake(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, DuckLake]]:
    root = tmp_path_factory.mktemp("small_counts")
    catalog = f"duckdb:///{root}/l.ducklake"
    reference.execute_all(catalog, SETUP, data_path=f"{root}/data/")
    lake = DuckLake.open(catalog)
    with lake.transaction(commit_message="a view") as tx:
        tx.create_view("main", "pv", "SELECT id AS key, kind FROM main.p")
    try:
        yield catalog, lake
    finally:
        lake.close()


# dbt's data-test wrapper and its generic tests, as dbt-core 1.11 renders them
_TEST = ("select count(*) as failures, count(*) != 0 as should_warn, count(*) != 0 as should_error "
         "from ({inner}) dbt_internal_test")
_UNIQUE = ("select {c} as unique_field, count(*) as n_records from {t} where {c} is not null group by {c} "
           "having count(*) > 1")
_ACCEPTED = ("with all_values as (select {c} as value_field, count(*) as n_records from {t} group by {c}) "
             "select * from all_values where value_field not in ({values})")
_RELATIONSHIPS = ("with child as (select {c} as from_field from {t} where {c} is not null), "
                  "parent as (select {f} as to_field from {to}) select from_field from child left join parent "
                  "on child.from_field = parent.to_field where parent.to_field is null")
_NOT_NULL = "select {c} from {t} where {c} is null"
_RELATIONS = [("main", n) for n in ("p", "c", "pv")]

COUNTED = [
    _UNIQUE.format(c="id", t="main.p"),  # 10 twice: a file row and an inlined row
    _UNIQUE.format(c="kind", t="main.p"),
    _UNIQUE.format(c="flag", t="main.p"),
    _UNIQUE.format(c="amt", t="main.p"),
    _UNIQUE.format(c="d", t="main.p"),
    _UNIQUE.format(c="ts", t="main.p"),
    _UNIQUE.format(c="cid", t="main.c"),
    _UNIQUE.format(c="late", t="main.c"),  # NULL in the files written before it was added
    _UNIQUE.format(c="key", t="main.pv"),  # through a view of the table
    "select id as u, count(*) as n from main.p group by id having count(*) > 1",  # no WHERE: the NULL group too
    "select id, count(*) from main.p group by id having count(*) >= 1",
    _ACCEPTED.format(c="kind", t="main.p", values="'a','b'"),
    _ACCEPTED.format(c="kind", t="main.pv", values="'a','b','c'"),
    _ACCEPTED.format(c="kind", t="main.p", values="'a','b',NULL"),  # never true
    _ACCEPTED.format(c="id", t="main.p", values="1,2,3,-4"),
    _ACCEPTED.format(c="flag", t="main.p", values="true"),
    _RELATIONSHIPS.format(c="pid", t="main.c", f="id", to="main.p"),  # INTEGER child, BIGINT parent
    _RELATIONSHIPS.format(c="pid", t="main.c", f="key", to="main.pv"),
    _RELATIONSHIPS.format(c="id", t="main.p", f="cid", to="main.c"),
    "with child as (select pid as from_field from main.c), parent as (select id as to_field from main.p) "
    "select child.from_field from child left outer join parent on parent.to_field = child.from_field "
    "where parent.to_field is null",  # NULL children are orphans too
    _NOT_NULL.format(c="kind", t="main.p"),
    _NOT_NULL.format(c="late", t="main.c"),
    _NOT_NULL.format(c="x", t="main.p"),
    "select * from main.p where id is null",
]


def _pruned(spark: SparkSession, lk: DuckLake, inner: str) -> tuple[str, PrunedQuery]:
    """dbt's wrapper around the test, and what the adapter's read path makes of it."""
    sql = _TEST.format(inner=inner)
    return sql, prune_query(spark, LakeNames(spark, lk).refresh(_RELATIONS), sql)


@pytest.mark.parametrize("inner", COUNTED)
def test_generic_tests_are_counted_without_a_job(spark: SparkSession, lake: tuple[str, DuckLake], inner: str) -> None:
    catalog, lk = lake
    sql, q = _pruned(spark, lk, inner)
    assert "__ducklake_one" in q.sql and "main." not in q.sql
    with job_group(spark, "small-counts") as group_jobs:
        df = spark.sql(q.sql)
        got = [tuple(r) for r in df.collect()]
        jobs = group_jobs()
    assert jobs == []
    expected = [tuple(r) for r in spark.sql(sql).collect()]  # Spark's own answer, the query as written
    assert got == expected
    assert df.schema == spark.sql(sql).schema
    with reference.attached(catalog) as con:
        con.execute("USE lake")
        assert con.execute(sql).fetchall() == expected


def test_the_counts_are_not_all_zero(spark: SparkSession, lake: tuple[str, DuckLake]) -> None:
    """The lake above makes most of these tests fail: the counts compared are real ones."""
    _, lk = lake
    LakeNames(spark, lk).refresh(_RELATIONS)
    failing = [inner for inner in COUNTED if spark.sql(_TEST.format(inner=inner)).collect()[0][0] > 0]
    assert len(failing) >= len(COUNTED) - 3


LEFT_TO_SPARK = [
    _UNIQUE.format(c="x", t="main.p"),  # DOUBLE: Spark groups NaN with NaN and -0.0 with 0.0
    _UNIQUE.format(c="id + 1", t="main.p"),  # an expression
    _UNIQUE.format(c="id", t="(select * from main.p where id > 3) dbt_subquery"),  # dbt's `where` config
    _UNIQUE.format(c="id", t="main.p") + " limit 5",
    _ACCEPTED.format(c="id", t="main.p", values="'1','2'"),  # Spark casts the strings
    _ACCEPTED.format(c="kind", t="main.p", values="'a','b\\\\'"),  # an escape Spark reads
    _ACCEPTED.format(c="d", t="main.p", values="'2024-01-01'"),
    _RELATIONSHIPS.format(c="kind", t="main.p", f="cid", to="main.c"),  # VARCHAR = INTEGER: Spark casts
    _RELATIONSHIPS.format(c="amt", t="main.p", f="id", to="main.p"),
    "with child as (select pid as from_field from main.c), parent as (select id as to_field from main.p) "
    "select from_field from child left join parent on child.from_field = parent.to_field "
    "where parent.to_field is null or from_field > 3",
    "select id from main.p where id is null or kind is null",
    "select id + 1 from main.p where id is null",
    "select cid from main.c where note is null group by cid",
]


@pytest.mark.parametrize("inner", LEFT_TO_SPARK)
def test_other_shapes_are_left_to_spark(spark: SparkSession, lake: tuple[str, DuckLake], inner: str,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Not counted here (DuckDB counts some of them on the driver: tests/spark/test_small_queries.py)."""
    monkeypatch.setattr(read_pruning, "count_query_rows", lambda state, query: None)
    assert "__ducklake_one" not in _pruned(spark, lake[1], inner)[1].sql


def test_tables_that_are_not_small_are_left_to_spark(spark: SparkSession, lake: tuple[str, DuckLake],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    _, lk = lake
    sql = _TEST.format(inner=_UNIQUE.format(c="id", t="main.p"))
    st = LakeNames(spark, lk).refresh(_RELATIONS)
    assert "__ducklake_one" in prune_query(spark, st, sql).sql
    for name, small in (("SMALL_ROWS", 39), ("SMALL_FILES", 1), ("SMALL_BYTES", 100)):
        with monkeypatch.context() as m:
            m.setattr(small_counts, name, small)
            assert "__ducklake_one" not in prune_query(spark, st, sql).sql, name


def test_a_missing_file_fails_the_count_naming_it(spark: SparkSession, lake: tuple[str, DuckLake]) -> None:
    """A file the catalog lists but the disk lacks (gone after the view's plan checked it): the count on the driver
    fails as every read of it does, naming the table, the snapshot and the file; never a count of the other files."""
    import os

    _, lk = lake
    st = LakeNames(spark, lk).refresh(_RELATIONS)
    path = st.files(st.table("main", "c"))[0].path
    os.rename(path, path + ".away")
    try:
        with pytest.raises(MissingDataFileError, match=f"^lake table main.c at snapshot {st.snapshot_id}: data file "
                                                       f"{path} is missing"):
            prune_query(spark, st, _TEST.format(inner=_UNIQUE.format(c="cid", t="main.c")))
    finally:
        os.rename(path + ".away", path)
