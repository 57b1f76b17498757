"""A local Spark Connect server (`local_server` kind "connect") takes the classic session's shortcuts: seeds written
by the driver without a Spark job (spark/write/local_write), no view re-registration at a commit (spark/read/names:
`LakeNames.invalidate`), and read pruning (spark/answer/read_pruning: derived tables instead of temporary views).

A process holds either a classic SparkSession or a Connect one: each Connect client is a child process (`python -m
tests.spark.test_local_server_shortcuts <workload> <args json>`, see `WORKLOADS`) attached to the module's server
(started by the first child, reused by the others). The test process checks the outcome with its classic session
and DuckDB once the child has exited (a DuckDB catalog file is open in one process at a time).
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import os
import pickle
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

from dbt.adapters.ducklake.lake import DuckLake
from dbt.adapters.ducklake.seeds import seed_dataframe
from dbt.adapters.ducklake.spark.write.work import LakeWork
from tests.spark.test_read_pruning import PRUNED, SETUP, UNPRUNED
from tests.support import reference
from tests.support.coverage import full_only
from tests.support.invariants import violations
from tests.support.local_servers import servers_root
from tests.support.spark_cluster import run_python

pytestmark = pytest.mark.slow

CHILD_TIMEOUT = 400.0  # the first child starts the server's JVM: 20-60 s on the shared 2-core machine
SCOPE = "shortcuts"  # one server for the module: its lakes' table names differ (Spark's catalog is the server's)

# every type a seed writes through the driver, with NULLs, NaN, zone-sensitive times and extreme values
NAMES = ["id", "i", "si", "ti", "name", "ts", "ts_ntz", "d", "amt", "big", "ok", "f", "r", "b"]
TYPES = ["bigint", "int", "smallint", "tinyint", "string", "timestamp", "timestamp_ntz", "date", "decimal(10,2)",
         "decimal(38,10)", "boolean", "double", "float", "binary"]
ROWS = [
    (1, 2147483647, 32767, 7, "plain", dt.datetime(2024, 3, 10, 2, 30), dt.datetime(2024, 11, 3, 1, 30, 0, 123456),
     dt.date(2024, 1, 2), decimal.Decimal("1.50"), "1234567890123456789012345678.0123456789", True, 1.5, "0.1", "ab"),
    (2, -2147483648, -32768, "-128", "it's a \\ back'slash\nnewline", "2024-11-03 01:30:00",
     "1969-12-31 23:59:59.999999", "1900-02-28", "-0.07", "-0.0000000001", "false", "-0.0", "-3.4e38", ""),
    (3, 0, 0, 0, "ünïcødé ✓ 𝄞", "1970-01-01 00:00:00", None, None, None, None, None, "NaN", "NaN", None),
    (4, None, None, None, None, None, None, None, None, None, None, None, None, None),
    (5, 1, 1, 127, "", "2038-01-19 03:14:08.5", "9999-12-31 23:59:59", "0001-01-01", "99999999.99", "0", "true",
     "1e300", "Infinity", "\u00ff"),
]


# ------------------------------------------------------------------------------------------ the children's side

def _session(root: str) -> tuple[Any, str]:
    """A Connect session on the module's server, and the server's URL."""
    from dbt.adapters.ducklake.spark.env import local_server
    from dbt.adapters.ducklake.spark.env.session import connect_session, is_classic

    server = local_server.attach(SCOPE, f"test {SCOPE}", "local[1]", {"spark.sql.shuffle.partitions": "2"},
                                 idle_timeout=600, root=root, kind="connect")
    spark = connect_session(server.url)
    assert not is_classic(spark)
    return spark, server.url


def _seed(root: str, catalog: str) -> dict:
    """The seed twice: bounded (written by the driver) and not (written by the server's executors)."""
    spark, _ = _session(root)
    lake = DuckLake.open(catalog)
    try:
        for name, bounded in (("by_connect", True), ("by_connect_spark", False)):
            with LakeWork(spark, lake) as work:
                work.create_table_as("main", name, seed_dataframe(spark, NAMES, ROWS, TYPES), replace=True,
                                     bounded=bounded)
    finally:
        lake.close()
    return {}


def _names(root: str, catalog: str) -> dict:
    """Two Connect sessions on the server, each with its own lake state, as two dbt processes have: after one's
    commit, the server's view is neither dropped nor re-registered, and each sees the new rows after its own
    refresh."""
    from pyspark.sql.connect.session import SparkSession as ConnectSession
    from pyspark.sql.types import LongType, StructField, StructType

    from dbt.adapters.ducklake.spark.env.session import apply_required_conf, connect_session
    from dbt.adapters.ducklake.spark.read.names import LakeNames

    a, url = _session(root)
    b = ConnectSession.builder.remote(url).create()  # a session of its own on the same server
    apply_required_conf(b)
    assert connect_session(url) is a and b is not a
    lake_a, lake_b = DuckLake.open(catalog), DuckLake.open(catalog)
    names_a, names_b = LakeNames(a, lake_a), LakeNames(b, lake_b)
    key = [("main", "n")]
    out: dict[str, list[int]] = {}

    def ids(spark: Any) -> list[int]:
        return sorted(r[0] for r in spark.sql("SELECT id FROM main.n").collect())

    def read(label: str, names: LakeNames, spark: Any) -> None:
        names.refresh(key)
        out[label] = ids(spark)

    def commit(spark: Any, lake: DuckLake, names: LakeNames, change: Callable[[LakeWork], object]) -> None:
        with LakeWork(spark, lake) as work:
            change(work)
        names.invalidate(work.touched)  # as the connection does after a commit

    try:
        read("a_first", names_a, a)
        read("b_first", names_b, b)
        rows = StructType([StructField("id", LongType())])
        commit(a, lake_a, names_a, lambda w: w.insert("main", "n", a.createDataFrame([(10,), (11,)], rows)))
        out["b_unrefreshed"] = ids(b)  # the server's view: still there, at the previous version
        read("a_next", names_a, a)  # a's next statement registers the new version
        read("b_next", names_b, b)
        commit(b, lake_b, names_b, lambda w: w.delete("main", "n", "id < 2"))
        read("b_after_own", names_b, b)
        read("a_after_b", names_a, a)
        # a table replaced by a model (new table id): the next statement reads the new table
        commit(a, lake_a, names_a, lambda w: w.create_table_as("main", "n", a.sql("SELECT CAST(7 AS BIGINT) AS id"),
                                                                replace=True))
        read("a_replaced", names_a, a)
        read("b_replaced", names_b, b)
    finally:
        lake_a.close()
        lake_b.close()
    return out


def _pruning(root: str, catalog: str, result: str) -> dict:
    """Each query pruned (files that must not be read are away), fetched after the block; Spark's unpruned answer;
    a dbt-like temporary view of a pruned query read after the block; the catalog-answered aggregates with the
    files away."""
    from dbt.adapters.ducklake.spark.answer.read_pruning import prune_query, pruned_reads
    from dbt.adapters.ducklake.spark.read.names import LakeNames
    from tests.spark.test_pruning import _only_files

    spark, _ = _session(root)
    lake = DuckLake.open(catalog)
    names = LakeNames(spark, lake)
    got: dict[str, Any] = {}
    try:
        state = names.refresh([("main", t) for t in ("t", "m", "k", "k2", "e")])
        for sql, keep in [(s, k) for s, k, _ in PRUNED] + [(s, {0, 100, 200, 300}) for s in UNPRUNED]:
            with _only_files(lake, lambda lo, hi, keep=keep: lo in keep):
                with pruned_reads(spark, state, sql) as q:
                    df = spark.sql(q.sql)
                pruned = [tuple(r) for r in df.collect()]  # after the block: Connect analyzes it now
            got[sql] = {"pruned": pruned, "files": q.files, "views": q.views,
                        "spark": [tuple(r) for r in spark.sql(sql).collect()]}
        # dbt's incremental materialization: a temporary view of the model's query, read later
        sql = "SELECT id, label FROM main.t WHERE id >= 120 AND id < 130"
        with _only_files(lake, lambda lo, hi: lo == 100):
            with pruned_reads(spark, state, sql) as q:
                spark.sql(q.sql).createOrReplaceTempView("model_tmp")
            got["temp_view"] = [tuple(r) for r in spark.sql("SELECT * FROM model_tmp").collect()]
        # count(*), max/min answered by the catalog: every file of the tables away
        st = lake.snapshot()
        files = [f.path for n in ("t", "m", "k", "k2") for f in st.files(st.table("main", n))]
        answered = ["SELECT count(*) FROM main.t", "SELECT count(*) AS n FROM main.k2 x",
                    "SELECT x FROM VALUES (240), (250), (260) AS v(x) WHERE x > (SELECT coalesce(max(id), -1) "
                    "FROM main.m)", "SELECT (SELECT max(d) FROM main.m), (SELECT count(*) + 1 FROM main.m x)"]
        expected = {s: [tuple(r) for r in spark.sql(s).collect()] for s in answered}
        queries = {s: prune_query(spark, state, s) for s in answered}
        for f in files:
            os.rename(f, f + ".away")
        try:
            for s, q in queries.items():
                df = spark.sql(q.sql)
                got[s] = {"answered": [tuple(r) for r in df.collect()], "text": q.sql, "columns": df.columns,
                          "spark": expected[s]}
        finally:
            for f in files:
                os.rename(f + ".away", f)
    finally:
        lake.close()
    with open(result, "wb") as f:
        pickle.dump(got, f)
    return {}


WORKLOADS: dict[str, Callable[..., dict]] = {"seed": _seed, "names": _names, "pruning": _pruning}


# ------------------------------------------------------------------------------------------ the tests' side

@pytest.fixture(scope="module")
def server_root(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with servers_root(tmp_path_factory.mktemp("shortcuts")) as root:
        yield root


def _child(root: str, workload: str, log_dir: Path, *args: str, env: dict[str, str] | None = None) -> dict:
    result = run_python(["-m", "tests.spark.test_local_server_shortcuts", workload, root, *args],
                        env={**os.environ, **(env or {})}, log_dir=log_dir, timeout=CHILD_TIMEOUT)
    assert result.returncode == 0, result.stderr[-5000:]
    return result.last_json()


def _duckdb(catalog: str, sql: str) -> list[tuple]:
    with reference.attached(catalog) as con:
        return con.execute(sql).fetchall()


def _created_by(catalog: str, table: str) -> set[str]:
    lake = DuckLake.open(catalog)
    try:
        st = lake.snapshot()
        return {pq.ParquetFile(f.path).metadata.created_by.split(" version")[0] for f in st.files(st.table("main", table))}
    finally:
        lake.close()


def test_a_seed_through_connect_is_written_by_the_driver_as_classic_writes_it(spark: SparkSession, server_root: str,
                                                                           tmp_path: Path) -> None:
    """The same seed through the server (a Python process whose local zone has a daylight-saving gap and overlap at
    the rows' times) and through a classic session: DuckDB reads equal rows and types; the server ran no Spark job
    for it (pyarrow wrote its file, as the classic shortcut does; without `bounded` the executors write parquet-mr
    files)."""
    catalog = f"duckdb:///{tmp_path}/s.ducklake"
    DuckLake.create(catalog, f"{tmp_path}/data/").close()
    _child(server_root, "seed", tmp_path / "child", catalog, env={"TZ": "America/New_York"})
    lake = DuckLake.open(catalog)
    try:
        with LakeWork(spark, lake) as work:
            work.create_table_as("main", "by_classic", seed_dataframe(spark, NAMES, ROWS, TYPES), replace=True)
    finally:
        lake.close()
    assert _created_by(catalog, "by_connect") == _created_by(catalog, "by_classic") == {"parquet-cpp-arrow"}
    assert _created_by(catalog, "by_connect_spark") == {"parquet-mr"}
    describe = "SELECT column_name, column_type FROM (DESCRIBE lake.main.{})"
    types = _duckdb(catalog, describe.format("by_classic"))
    assert _duckdb(catalog, describe.format("by_connect")) == types == _duckdb(catalog, describe.format("by_connect_spark"))
    assert [t for _, t in types] == ["BIGINT", "INTEGER", "SMALLINT", "TINYINT", "VARCHAR", "TIMESTAMP WITH TIME ZONE",
                                     "TIMESTAMP", "DATE", "DECIMAL(10,2)", "DECIMAL(38,10)", "BOOLEAN", "DOUBLE", "FLOAT",
                                     "BLOB"]
    got = _duckdb(catalog, "SELECT * FROM lake.main.by_connect ORDER BY id")
    assert repr(got) == repr(_duckdb(catalog, "SELECT * FROM lake.main.by_classic ORDER BY id"))  # NaN != NaN
    assert repr(got) == repr(_duckdb(catalog, "SELECT * FROM lake.main.by_connect_spark ORDER BY id"))
    assert len(got) == len(ROWS) and got[2][11] != got[2][11]  # NaN kept
    assert got[0][5] == dt.datetime(2024, 3, 10, 2, 30, tzinfo=got[0][5].tzinfo)  # the wall time of the gap, UTC
    assert _duckdb(catalog, "SELECT * FROM lake.main.by_connect EXCEPT SELECT * FROM lake.main.by_classic") == []
    assert violations(catalog) == []


def test_after_a_commit_on_connect_each_session_reads_the_new_version_after_its_own_refresh(
        server_root: str, tmp_path: Path) -> None:
    catalog = f"duckdb:///{tmp_path}/n.ducklake"
    with reference.attached(catalog, data_path=f"{tmp_path}/data/") as con:
        con.execute("CREATE TABLE lake.n AS SELECT range AS id FROM range(5)")
    got = _child(server_root, "names", tmp_path / "child", catalog)
    first = [0, 1, 2, 3, 4]
    assert got["a_first"] == got["b_first"] == first
    assert got["b_unrefreshed"] == first  # the commit neither dropped nor re-registered the server's view
    assert got["a_next"] == got["b_next"] == [*first, 10, 11]
    assert got["b_after_own"] == got["a_after_b"] == [2, 3, 4, 10, 11]
    assert got["a_replaced"] == got["b_replaced"] == [7]
    assert _duckdb(catalog, "SELECT id FROM lake.main.n") == [(7,)]


@full_only("pruned reads are test_read_pruning's, in-process; their analysis after the block on Connect")
def test_filtered_reads_on_connect_skip_files_and_give_sparks_and_duckdbs_rows(server_root: str,
                                                                              tmp_path: Path) -> None:
    """tests/spark/test_read_pruning's lake and queries through the server: a pruned read answers with the files it
    must not read away, its DataFrame fetched after the block (Connect analyzes then: no temporary view is left to
    drop), equal to Spark's unpruned answer and to DuckDB's; the catalog answers count(*) and max/min with every
    file away."""
    catalog = f"duckdb:///{tmp_path}/l.ducklake"
    reference.execute_all(catalog, SETUP, data_path=f"{tmp_path}/data/")
    result = tmp_path / "result.pickle"
    _child(server_root, "pruning", tmp_path / "child", catalog, str(result))
    got = pickle.loads(result.read_bytes())

    def duck(sql: str) -> list[tuple]:
        with reference.attached(catalog) as con:
            con.execute("USE lake")
            return sorted(con.execute(sql).fetchall(), key=repr)

    for sql, _, files in PRUNED:
        one = got[sql]
        assert one["files"] == {("main", "t"): files} and one["views"] == [], sql
        assert sorted(one["pruned"], key=repr) == sorted(one["spark"], key=repr) == duck(sql), sql
    for sql in UNPRUNED:
        one = got[sql]
        assert one["files"] == {}, sql
        assert sorted(one["pruned"], key=repr) == sorted(one["spark"], key=repr) == duck(sql), sql
    assert sorted(got["temp_view"]) == [(i, f"n{i}") for i in range(120, 130)]
    for sql, one in got.items():
        if "answered" in one:
            assert "main." not in one["text"], sql
            assert one["answered"] == one["spark"], sql
    assert got["SELECT count(*) FROM main.t"]["answered"] == duck("SELECT count(*) FROM main.t")


if __name__ == "__main__":
    print(json.dumps(WORKLOADS[sys.argv[1]](*sys.argv[2:])), flush=True)
