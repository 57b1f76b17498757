"""Queries read only the data files their WHERE can match (spark/answer/read_pruning): filters by literals and by
uncorrelated scalar subqueries (dbt's incremental filter) prune a lake table's files.

The proof of skipping is an outcome: the files that should be skipped are moved away before the query runs, so
reading one fails it. Every result is compared with DuckDB running the same query on the lake; the tricky cases
(OR/NOT, NULLs, time zones, renamed columns, deletes, inlined rows, correlated or shadowed subqueries) must give
DuckDB's rows whether or not they prune.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession

from dbt.adapters.ducklake.lake import DuckLake
from dbt.adapters.ducklake.spark.answer import read_pruning, small_counts
from dbt.adapters.ducklake.spark.answer.read_pruning import prune_query, pruned_reads
from dbt.adapters.ducklake.spark.read.names import LakeNames
from tests.spark.test_pruning import _only_files
from tests.support import reference
from tests.support.spark_jobs import job_group

# main.t: four files of 100 rows (ids 0-99, ..., 300-399), every column growing with id; n is NULL in the first file
# and in the odd rows of the others; then rows 350-359 deleted, column `s` renamed to `label`, and two rows inlined
# (ids 1000, 1001). main.m: one file, the "target" whose max the filters compare with.
SETUP = [
    "CREATE TABLE lake.t (id BIGINT, s VARCHAR, n INTEGER, d DATE, amt DECIMAL(10, 2), ts TIMESTAMP, "
    "tz TIMESTAMPTZ)",
    "CALL lake.set_option('data_inlining_row_limit', 0)",
] + [
    f"INSERT INTO lake.t SELECT i, 'n' || lpad(i::VARCHAR, 3, '0'), CASE WHEN i >= 100 AND i % 2 = 0 THEN i END, "
    f"DATE '2024-01-01' + (i // 100)::INT, i / 4, TIMESTAMP '2024-01-01' + INTERVAL (i) HOUR, "
    f"TIMESTAMPTZ '2024-01-01 00:00:00+00' + INTERVAL (i) HOUR FROM range({k * 100}, {k * 100 + 100}) r(i)"
    for k in range(4)
] + [
    "DELETE FROM lake.t WHERE id BETWEEN 350 AND 359",
    "ALTER TABLE lake.t RENAME COLUMN s TO label",
    "CREATE TABLE lake.m AS SELECT id, n, amt, ts, tz, d FROM lake.t WHERE id BETWEEN 200 AND 249",
    # max(id): 8 in k, 350 in k2; the statistics say 9 (k: row 9 deleted) and 8 (k2: 350 is inlined)
    "CREATE TABLE lake.k AS SELECT id FROM range(0, 10) r(id)",
    "DELETE FROM lake.k WHERE id = 9",
    "CREATE TABLE lake.k2 AS SELECT id FROM range(0, 9) r(id)",
    "CALL lake.set_option('data_inlining_row_limit', 10)",
    "INSERT INTO lake.k2 VALUES (350)",
    "INSERT INTO lake.t VALUES (1000, 'inl', 7, DATE '2030-01-01', 9.5, TIMESTAMP '2030-01-01', "
    "TIMESTAMPTZ '2030-01-01 00:00:00+00'), (1001, NULL, NULL, NULL, NULL, NULL, NULL)",
    "CREATE TABLE lake.e (id BIGINT, d DATE)",
]


@pytest.fixture(scope="module")
def lake(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, DuckLake]]:
    root = tmp_path_factory.mktemp("read_pruning")
    catalog = f"duckdb:///{root}/l.ducklake"
    reference.execute_all(catalog, SETUP, data_path=f"{root}/data/")
    lake = DuckLake.open(catalog)
    try:
        yield catalog, lake
    finally:
        lake.close()


def _duckdb(catalog: str, sql: str) -> list[tuple]:
    with reference.attached(catalog) as con:
        con.execute("USE lake")
        return sorted(con.execute(sql).fetchall(), key=repr)


def _spark(spark: SparkSession, lake: DuckLake, sql: str, keep_ids: set[int] | None = None
           ) -> tuple[list[tuple], dict]:
    names = LakeNames(spark, lake)
    state = names.refresh([("main", "t"), ("main", "m"), ("main", "k"), ("main", "k2")])
    keep = keep_ids if keep_ids is not None else {0, 100, 200, 300}
    with _only_files(lake, lambda lo, hi: lo in keep):  # main.t's file k holds ids 100k..100k+99
        with pruned_reads(spark, state, sql) as q:
            df = spark.sql(q.sql)
        rows = sorted((tuple(r) for r in df.collect()), key=repr)  # after the views are dropped: the plan holds
    return rows, q.files


# (query, files of main.t it must read (by first id), (files read, files skipped))
PRUNED = [
    ("SELECT id, label FROM main.t WHERE id >= 120 AND id < 130", {100}, (1, 3)),
    ("SELECT id FROM main.t WHERE ts > (SELECT max(ts) FROM main.m)", {200, 300}, (2, 2)),
    ("SELECT id FROM main.t x WHERE x.tz >= (SELECT max(tz) FROM main.m) AND x.n IS NOT NULL", {200, 300}, (2, 2)),
    ("SELECT id, amt FROM main.t WHERE amt <= (SELECT min(amt) FROM main.m)", {0, 100, 200}, (3, 1)),
    ("SELECT id FROM main.t WHERE d = (SELECT max(d) FROM main.m) OR id < 10", {0, 200}, (2, 2)),
    ("SELECT count(*) FROM main.t WHERE label >= 'n3'", {300}, (1, 3)),
    ("SELECT id FROM main.t WHERE id > 340", {300}, (1, 3)),  # rows 350-359 deleted
    ("SELECT id FROM main.t WHERE id > 500", set(), (0, 4)),  # only the inlined rows
    ("SELECT id FROM main.t WHERE n IS NULL AND id < 100", {0}, (1, 3)),
    ("SELECT id FROM main.t WHERE id IN (SELECT id FROM main.t WHERE id BETWEEN 5 AND 7)", {0, 100, 200, 300},
     (1, 3)),  # only the inner read prunes (the outer WHERE has no literal)
    ("WITH x AS (SELECT * FROM main.t WHERE id < 100) SELECT count(*) FROM x", {0}, (1, 3)),
    # dbt's `where` config on a test: the derived table's files pruned by both conditions
    ("SELECT id FROM (SELECT * FROM main.t WHERE id >= 100) x WHERE x.id < 130 AND n IS NOT NULL", {100}, (1, 3)),
    ("SELECT id FROM (SELECT * FROM main.t) x WHERE id < 30", {0}, (1, 3)),
    ("SELECT count(*) FROM (SELECT * FROM main.t WHERE id < 250) x WHERE label >= 'n2'", {200}, (1, 3)),
]


@pytest.mark.parametrize(("sql", "keep", "files"), PRUNED)
def test_filtered_reads_skip_files_and_return_duckdbs_rows(spark: SparkSession, lake: tuple[str, DuckLake],
                                                          sql: str, keep: set[int], files: tuple[int, int]) -> None:
    catalog, lk = lake
    got, read = _spark(spark, lk, sql, keep)
    assert read == {("main", "t"): files}
    assert got == _duckdb(catalog, sql)


def test_timestamptz_subquery_is_exact_in_any_session_time_zone(spark: SparkSession,
                                                                lake: tuple[str, DuckLake]) -> None:
    catalog, lk = lake
    sql = "SELECT id FROM main.t WHERE tz > (SELECT max(tz) FROM main.m)"
    old = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", "America/New_York")
    try:
        got, read = _spark(spark, lk, sql, {200, 300})
    finally:
        spark.conf.set("spark.sql.session.timeZone", old)
    assert read == {("main", "t"): (2, 2)}
    assert got == _duckdb(catalog, sql) and len(got) == 141  # 250-399 without the 10 deleted, and 1000


# statements whose reads cannot (or must not) be pruned: the same rows as DuckDB, every file read
UNPRUNED = [
    "SELECT id FROM main.t WHERE NOT (id < 300)",
    "SELECT id FROM main.t WHERE id < 10 OR upper(label) = 'N350'",  # an OR with an undecidable side
    "SELECT id FROM main.t WHERE n > 5 OR n IS NULL",
    "SELECT id FROM main.t WHERE id > (SELECT max(n) FROM main.m)",  # INT vs BIGINT: not substituted
    "SELECT id FROM main.t WHERE id > (SELECT max(id) FROM main.m WHERE false)",  # NULL: no row
    # correlated: the subquery alone does not analyze
    "SELECT id FROM main.t x WHERE x.id > (SELECT max(m.id) FROM main.m m WHERE m.id < x.id - 240)",
    "SELECT x.id FROM main.t x JOIN main.m y ON x.id = y.id WHERE x.id < 100",  # joins are left alone
]


@pytest.mark.parametrize("sql", UNPRUNED)
def test_undecidable_filters_read_every_file(spark: SparkSession, lake: tuple[str, DuckLake], sql: str) -> None:
    catalog, lk = lake
    got, read = _spark(spark, lk, sql)
    assert read == {}
    assert got == _duckdb(catalog, sql)


def test_a_cte_shadowing_a_view_is_not_evaluated_alone(spark: SparkSession, lake: tuple[str, DuckLake]) -> None:
    _, lk = lake
    spark.sql("CREATE OR REPLACE TEMPORARY VIEW shadow AS SELECT CAST(5 AS BIGINT) AS id")
    try:
        sql = ("WITH shadow AS (SELECT CAST(390 AS BIGINT) AS id) "
               "SELECT id FROM main.t WHERE id > (SELECT max(id) FROM shadow)")
        got, read = _spark(spark, lk, sql)
    finally:
        spark.catalog.dropTempView("shadow")
    assert read == {}
    assert sorted(r[0] for r in got) == [*range(391, 400), 1000, 1001]


def test_statements_that_are_not_queries_are_unchanged(spark: SparkSession, lake: tuple[str, DuckLake]) -> None:
    _, lk = lake
    st = LakeNames(spark, lk).refresh([("main", "t")])
    for sql in ["SET spark.sql.shuffle.partitions = 4", "SHOW TABLES IN main", "SELECT 1 WHERE true"]:
        q = prune_query(spark, st, sql)
        assert q.sql == sql and not q.views


def test_max_from_exact_statistics_needs_no_read(spark: SparkSession, lake: tuple[str, DuckLake]) -> None:
    """max/min of a table without deletes or inlined rows comes from the catalog: main.m's file can be away."""
    catalog, lk = lake
    sql = "SELECT id FROM main.t WHERE ts > (SELECT max(ts) FROM main.m) AND id <= (SELECT max(id) FROM main.m m)"
    names = LakeNames(spark, lk)
    state = names.refresh([("main", "t"), ("main", "m")])
    st = lk.snapshot()
    (mfile,) = st.files(st.table("main", "m"))
    os.rename(mfile.path, mfile.path + ".away")
    try:
        with pruned_reads(spark, state, sql) as q:
            got = sorted(r[0] for r in spark.sql(q.sql).collect())
    finally:
        os.rename(mfile.path + ".away", mfile.path)
    assert "main.m" not in q.sql and q.files == {("main", "t"): (1, 3)}
    assert got == [r[0] for r in _duckdb(catalog, sql)] == []  # ts > max(ts) means id > 249: none <= 249


# scalar subqueries the catalog answers wherever they stand (not only in a pruned read's WHERE)
ANSWERED = [
    "SELECT x FROM VALUES (240), (250), (260) AS v(x) WHERE x > (SELECT coalesce(max(id), -1) FROM main.m)",
    "SELECT (SELECT max(d) FROM main.m), (SELECT min(ts) FROM main.m) AS lo, (SELECT max(tz) FROM main.m), "
    "(SELECT count(*) + 1 FROM main.m x), (SELECT min(n) FROM main.m)",
    "SELECT coalesce((SELECT max(id) FROM main.e), -1) AS a, (SELECT min(d) FROM main.e) AS b, "
    "(SELECT count(*) FROM main.e) AS c",
    "SELECT 1 AS one WHERE 249 IN (SELECT max(id) FROM main.m)",
]


@pytest.mark.parametrize("sql", ANSWERED)
def test_aggregates_of_exact_statistics_are_answered_anywhere(spark: SparkSession, lake: tuple[str, DuckLake],
                                                              sql: str) -> None:
    """max/min/count(*) subqueries over tables whose statistics are exact (dbt's incremental filter over a source
    that is not a lake table, `coalesce(max(id), -1)`) read no file: main.m's file is away while Spark answers, and
    the rows and column names are Spark's own answer."""
    _, lk = lake
    names = LakeNames(spark, lk)
    state = names.refresh([("main", "m"), ("main", "e")])
    want = spark.sql(sql)
    expected, columns = [tuple(r) for r in want.collect()], want.columns
    st = lk.snapshot()
    (mfile,) = st.files(st.table("main", "m"))
    q = prune_query(spark, state, sql)
    os.rename(mfile.path, mfile.path + ".away")
    try:
        df = spark.sql(q.sql)
        got = [tuple(r) for r in df.collect()]
    finally:
        os.rename(mfile.path + ".away", mfile.path)
    assert "main." not in q.sql and not q.views
    assert q.replaced >= {("main", "m")} or "main.m" not in sql
    assert got == expected and df.columns == columns


def test_answered_values_are_duckdbs(spark: SparkSession, lake: tuple[str, DuckLake]) -> None:
    catalog, lk = lake
    sql = "SELECT (SELECT max(id) FROM main.m), (SELECT min(d) FROM main.m), (SELECT max(n) FROM main.m)"
    q = prune_query(spark, LakeNames(spark, lk).refresh([("main", "m")]), sql)
    assert "main." not in q.sql
    assert [tuple(r) for r in spark.sql(q.sql).collect()] == _duckdb(catalog, sql)


@pytest.mark.parametrize("sql", [
    # a derived table's columns are named by the aggregates' texts and nullable
    "SELECT * FROM (SELECT max(id) FROM main.m) s", "SELECT m FROM (SELECT max(id) AS m FROM main.m) s",
    "SELECT (SELECT max(id) FROM main.k)", "SELECT (SELECT max(id) FROM main.k2)",  # deletes, inlined rows
    "SELECT (SELECT max(amt) FROM main.m)",  # decimal: the statistics' text is not an exact value here
    "SELECT (SELECT max(id) FROM main.t)",
    "SELECT (SELECT count(id) FROM main.m)", "SELECT (SELECT max(id) FROM main.m GROUP BY n LIMIT 1)",
])
def test_other_subqueries_are_left_to_spark(spark: SparkSession, lake: tuple[str, DuckLake], sql: str) -> None:
    _, lk = lake
    st = LakeNames(spark, lk).refresh([("main", "m"), ("main", "k"), ("main", "k2"), ("main", "t")])
    assert prune_query(spark, st, sql).sql == sql


@pytest.mark.parametrize("inner", ["main.k", "main.k2"])
def test_statistics_that_count_deleted_or_miss_inlined_rows_are_not_used(spark: SparkSession,
                                                                        lake: tuple[str, DuckLake], inner: str) -> None:
    catalog, lk = lake
    sql = f"SELECT id FROM main.t WHERE id > (SELECT max(id) FROM {inner})"
    got, read = _spark(spark, lk, sql, {0, 100, 200, 300} if inner == "main.k" else {300})
    assert got == _duckdb(catalog, sql)
    assert read == ({} if inner == "main.k" else {("main", "t"): (1, 3)})
    ids = sorted(r[0] for r in got)
    assert ids[0] == (9 if inner == "main.k" else 360)  # above the true max, not the statistics' (350-359 deleted)


@pytest.mark.parametrize("sql", ["SELECT count(*) FROM main.t", "SELECT count(*) AS n FROM main.k2 x",
                                 "SELECT COUNT(*) FROM main.k"])
def test_count_star_comes_from_the_catalog(spark: SparkSession, lake: tuple[str, DuckLake], sql: str) -> None:
    """count(*) of a table (deletes, inlined rows and deletes counted as DuckDB does) needs no file: every file of
    the lake is away while Spark answers, and the answer and its column name are what Spark would give."""
    catalog, lk = lake
    st = LakeNames(spark, lk).refresh([("main", "t"), ("main", "k"), ("main", "k2")])
    files = [f.path for name in ("t", "k", "k2") for f in st.files(st.table("main", name))]
    q = prune_query(spark, st, sql)
    for f in files:
        os.rename(f, f + ".away")
    try:
        df = spark.sql(q.sql)
        got = [tuple(r) for r in df.collect()]
    finally:
        for f in files:
            os.rename(f + ".away", f)
    assert "main." not in q.sql and not q.views
    assert df.columns == spark.sql(sql).columns
    assert got == _duckdb(catalog, sql)


@pytest.mark.parametrize("sql", ["SELECT count(*) FROM main.t WHERE id > 5", "SELECT count(*), 1 FROM main.t",
                                 "SELECT count(DISTINCT id) FROM main.t", "SELECT count(id) FROM main.t",
                                 "SELECT count(*) FROM main.t GROUP BY id"])
def test_other_counts_are_left_to_spark(spark: SparkSession, lake: tuple[str, DuckLake], sql: str) -> None:
    _, lk = lake
    st = LakeNames(spark, lk).refresh([("main", "t")])
    assert "main.t" in prune_query(spark, st, sql).sql


def test_dataframe_filters_skip_files_like_sql(spark: SparkSession, lake: tuple[str, DuckLake]) -> None:
    """A Python model's dbt.ref() DataFrame (spark/answer/pruned_frames): filter/where on what the statistics decide read
    only the files that can match; other conditions filter every file; both give DuckDB's rows."""
    from pyspark.sql import functions as F

    from dbt.adapters.ducklake.spark.answer.pruned_frames import PrunableDataFrame, prunable

    catalog, lk = lake
    names = LakeNames(spark, lk)
    names.refresh([("main", "t")])
    df = prunable(spark.table("main.t"), "main.t", names.state, lambda refs: names.refresh(refs))
    assert isinstance(df, PrunableDataFrame) and df.columns == spark.table("main.t").columns
    with _only_files(lk, lambda lo, hi: lo == 100):  # only the file of ids 100-199 is left
        got = sorted(r.id for r in df.filter((F.col("id") >= 120) & (F.col("id") < 130)).select("id").collect())
        assert got == list(range(120, 130))
        got = sorted(r.id for r in df.where("id BETWEEN 150 AND 152 OR id > 5000").collect())
        assert got == [150, 151, 152]
    assert got == sorted(r[0] for r in _duckdb(catalog, "SELECT id FROM main.t WHERE id BETWEEN 150 AND 152 OR id > 5000"))
    # undecidable: every file read, the rows still DuckDB's
    odd = sorted(r.id for r in df.filter(F.upper(F.col("label")) == "N350").collect())
    assert odd == [r[0] for r in _duckdb(catalog, "SELECT id FROM main.t WHERE upper(label) = 'N350'")] == []
    got = sorted(r.id for r in df.filter(F.col("id") > 340).collect())
    assert got == sorted(r[0] for r in _duckdb(catalog, "SELECT id FROM main.t WHERE id > 340"))


@pytest.fixture
def statistics_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """No table counts as small: what the statistics alone answer (small tables' rows are counted on the driver:
    tests/spark/test_small_counts.py, test_small_queries.py)."""
    monkeypatch.setattr(small_counts, "SMALL_ROWS", -1)
    monkeypatch.setattr(read_pruning, "count_query_rows", lambda state, query: None)


# dbt's data-test wrapper around a not_null test (fail_calc count(*), warn_if/error_if != 0)
_TEST = ("select count(*) as failures, count(*) != 0 as should_warn, count(*) != 0 as should_error "
         "from ({inner}) dbt_internal_test")


@pytest.mark.parametrize("inner", ["select id from main.m where id is null",
                                   "select * from main.k where id is null limit 10",  # a delete file
                                   "select d, count(*) as n from main.m x where x.tz is null group by d",
                                   # inlined rows without a NULL there (decided on the rows)
                                   "select id from main.t where id is null",
                                   "select id from main.k2 where id is null",
                                   # dbt's `where` config
                                   "select n from (select * from main.m where n > 0) dbt_subquery where id is null",
                                   "select * from (select * from main.m) dbt_subquery where dbt_subquery.id > 5000"])
def test_counts_over_a_read_pruned_to_nothing_need_no_read_and_no_job(spark: SparkSession,
                                                                      lake: tuple[str, DuckLake], inner: str) -> None:
    """A data test whose filter the statistics prove matches no row (no NULL in any file, no inlined row) is
    answered as one row of zero counts: every file of the lake away, no Spark job, DuckDB's answer and Spark's
    column names and types."""
    catalog, lk = lake
    sql = _TEST.format(inner=inner)
    st = LakeNames(spark, lk).refresh([("main", n) for n in ("m", "k", "t", "k2")])
    files = [f.path for name in ("m", "k", "t", "k2") for f in st.files(st.table("main", name))]
    q = prune_query(spark, st, sql)
    for f in files:
        os.rename(f, f + ".away")
    try:
        with job_group(spark, "empty-test") as group_jobs:
            df = spark.sql(q.sql)
            got = [tuple(r) for r in df.collect()]
            jobs = group_jobs()
    finally:
        for f in files:
            os.rename(f + ".away", f)
    assert "main." not in q.sql and not q.views and len(q.replaced) == 1  # the table needs no Spark view either
    assert got == [(0, False, False)] == _duckdb(catalog, sql)
    assert df.schema == spark.sql(sql).schema
    assert jobs == []


@pytest.mark.parametrize("sql", [
    _TEST.format(inner="select n from main.m where n is null"),  # NULLs in the file: read
    _TEST.format(inner="select label from main.t where label is null"),  # an inlined row's NULL
    _TEST.format(inner="select id from main.t where id is null or id > 999"),  # inlined rows: not decided
    "select count(*) as c from (select count(*) as n from main.m where id is null) x",  # one row, not none
    "select count(*) as c from (select id, count(*) as n from main.m where id is null group by rollup(id)) x",
    "select count(*) as c from (select id, count(*) as n from main.m where id is null group by id, cube(id)) x",
    "select count(*) as c from (select id from main.m where id is null group by grouping sets ((id), ())) x",
    "select count(*) as c, max(1) as m from (select id from main.m where id is null) x",
    "select count(*) from (select id from main.m where id is null) x",  # Spark's own name for the column
    "select 1 as one from (select id from main.m where id is null) x",  # no aggregate: no row
    _TEST.format(inner="select n from (select * from main.m where id < 220) x where n is null"),
    _TEST.format(inner="select id from (select id from main.m where id > 0) x where id is null"),  # not SELECT *
    "select count(*) as c from (select id from main.m where id is null) x group by id",
])
def test_other_shapes_over_nothing_are_left_to_spark(spark: SparkSession, lake: tuple[str, DuckLake],
                                                     sql: str, statistics_only: None) -> None:
    """Spark's own answer (the unpruned query): a rollup's grand total over no row is Spark's (none; DuckDB gives
    one)."""
    _, lk = lake
    st = LakeNames(spark, lk).refresh([("main", "t"), ("main", "m"), ("main", "k2")])
    with pruned_reads(spark, st, sql) as q:
        assert "FROM VALUES (0) AS __ducklake_one" not in q.sql
        df = spark.sql(q.sql)
    assert sorted((tuple(r) for r in df.collect()), key=repr) == sorted(
        (tuple(r) for r in spark.sql(sql).collect()), key=repr)


@pytest.fixture(scope="module")
def views(lake: tuple[str, DuckLake]) -> tuple[str, DuckLake]:
    """Lake views over main.m (one file; no NULL id, NULLs in n) and main.t (inlined rows), nested and filtered."""
    catalog, lk = lake
    with lk.transaction(commit_message="views") as tx:
        tx.create_view("main", "vm", "SELECT id AS key, n, amt FROM main.m")
        tx.create_view("main", "vm2", "SELECT * FROM main.vm WHERE key >= 200")
        tx.create_view("main", "vm_expr", "SELECT id + 0 AS key FROM main.m")
        tx.create_view("main", "vm_alias", "SELECT id FROM main.m", column_aliases=["n"])
        tx.create_view("main", "vm_alias2", "SELECT id, n, amt FROM main.m", column_aliases=["k", "id"])
        tx.create_view("main", "vt", "SELECT id, label FROM main.t")
        tx.create_view("main", "vm_swap", "SELECT n AS id, id AS n FROM main.m")
        tx.create_view("main", "v_literals", "SELECT 'vm' AS tablename")  # no FROM (dbt's alias tests)
    return catalog, lk


_VIEWS = [("main", v) for v in ("vm", "vm2", "vm_expr", "vm_alias", "vt", "vm_swap", "v_literals", "m", "t")]


@pytest.mark.parametrize("inner", ["select key from main.vm where key is null",
                                   "select * from main.vm2 x where x.key is null",
                                   "select * from main.vm2 where key > 1000",
                                   "select * from main.vm2 where key < 200",  # the view's own filter too
                                   "select id from main.vt where id is null",  # inlined rows without NULL
                                   "select id from main.vm_swap where n is null",  # n is m's id: never NULL
                                   "select key from (select * from main.vm) dbt_subquery where key is null"])
def test_counts_over_views_of_a_table_pruned_to_nothing_are_answered(spark: SparkSession, views: tuple[str, DuckLake],
                                                                     inner: str) -> None:
    """A data test of a view model (a projection of a lake table's columns, nested and filtered views too) is
    answered from the table's statistics: no file read, Spark's answer."""
    _, lk = views
    sql = _TEST.format(inner=inner)
    st = LakeNames(spark, lk).refresh(_VIEWS)
    q = prune_query(spark, st, sql)
    assert "__ducklake_one" in q.sql and "main." not in q.sql
    assert [tuple(r) for r in spark.sql(q.sql).collect()] == [tuple(r) for r in spark.sql(sql).collect()] == [
        (0, False, False)]


@pytest.mark.parametrize("inner", ["select n from main.vm where n is null",  # NULLs in the file
                                   "select key from main.vm_expr where key is null",  # an expression
                                   "select id from main.vm_swap where id is null",  # m's n: NULLs
                                   "select label from main.vt where label is null",  # an inlined NULL
                                   "select * from main.vm where key < 210",
                                   "select tablename from main.v_literals where tablename != 'vm'"])
def test_other_views_are_left_to_spark(spark: SparkSession, views: tuple[str, DuckLake], inner: str,
                                       statistics_only: None) -> None:
    _, lk = views
    sql = _TEST.format(inner=inner)
    st = LakeNames(spark, lk).refresh(_VIEWS)
    with pruned_reads(spark, st, sql) as q:
        assert "__ducklake_one" not in q.sql
        df = spark.sql(q.sql)
    assert [tuple(r) for r in df.collect()] == [tuple(r) for r in spark.sql(sql).collect()]


def test_a_view_with_column_aliases_is_not_expanded(spark: SparkSession, views: tuple[str, DuckLake]) -> None:
    """Its columns are renamed by position (here n is m's id): the view's text alone does not tell its names."""
    _, lk = views
    st = LakeNames(spark, lk).refresh([("main", "m")])
    assert "__ducklake_one" not in prune_query(spark, st, _TEST.format(inner="select n from main.vm_alias where n is null")).sql


def test_a_column_added_later_is_null_in_older_files(spark: SparkSession, tmp_path) -> None:
    """Files written before a column was added hold no statistics for it: its NULLs there are not proven absent."""
    catalog = f"duckdb:///{tmp_path}/added.ducklake"
    with reference.attached(catalog, data_path=f"{tmp_path}/data/") as con:
        con.execute("CALL lake.set_option('data_inlining_row_limit', 0)")
        con.execute("CREATE TABLE lake.a (id BIGINT)")
        con.execute("INSERT INTO lake.a SELECT range FROM range(5)")
        con.execute("ALTER TABLE lake.a ADD COLUMN c INTEGER")
        con.execute("ALTER TABLE lake.a ADD COLUMN d INTEGER DEFAULT 7")
        con.execute("INSERT INTO lake.a SELECT range, 1, 2 FROM range(5, 8)")
    lk = DuckLake.open(catalog)
    try:
        st = LakeNames(spark, lk).refresh([("main", "a")])
        for column, nulls in (("c", 5), ("d", 0)):
            sql = _TEST.format(inner=f"select {column} from main.a where {column} is null")
            with pruned_reads(spark, st, sql) as q:
                df = spark.sql(q.sql)
            assert [tuple(r) for r in df.collect()] == [(nulls, nulls != 0, nulls != 0)] == _duckdb(catalog, sql)
    finally:
        lk.close()


@pytest.mark.parametrize(("view", "columns"), [("vm_alias", ["n"]), ("vm_alias2", ["k", "id", "amt"])])
def test_view_column_aliases_rename_by_position(spark: SparkSession, views: tuple[str, DuckLake], view: str,
                                                columns: list[str]) -> None:
    """A DuckLake view's column aliases rename its first columns (the rest keep theirs), as DuckDB reads it."""
    catalog, lk = views
    LakeNames(spark, lk).refresh([("main", view)])
    got = spark.sql(f"SELECT * FROM main.{view}")
    assert got.columns == columns
    assert sorted((tuple(r) for r in got.collect()), key=repr) == _duckdb(catalog, f"SELECT * FROM main.{view}")
    with reference.attached(catalog) as con:
        assert [d[0] for d in con.execute(f"SELECT * FROM lake.main.{view}").description] == columns
