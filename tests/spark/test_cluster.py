"""The Spark layer on a Spark standalone cluster (a master and one 1-core worker on 127.0.0.1), not just local[N].

The test process already holds a local SparkContext (one per process), so the cluster's driver is a child process:
this module run as `python -m tests.spark.test_cluster <master> <root>` (see `_workload`). It creates a partitioned
table from spark.range, appends, deletes, and reads the table back in Spark, all with tasks run by the cluster's
executor, then prints one JSON line. After the child has exited (the DuckDB catalog file is closed), DuckDB's
ducklake extension must read exactly the expected rows. The module's cluster also runs the lost-executor MERGE
(tests/spark/test_lost_executor.py).
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.spark.test_lost_executor import check_merge_runs_again
from tests.support import reference
from tests.support.spark_cluster import FAST_JVM_OPTIONS, StandaloneCluster, run_python, standalone_cluster

CTAS_ROWS, APPEND_ROWS = 20_000, 10_000
KEYS = 3  # k = id % 3, the identity partition column
DELETE = "id % 7 = 0"


def _expected_ids() -> list[int]:
    return [i for i in range(CTAS_ROWS + APPEND_ROWS) if i % 7 != 0]


def _workload(master: str, root: str) -> dict:
    """The driver's side (child process): CTAS, append, delete and read back on the cluster; the facts to check."""
    from pyspark.sql import DataFrame
    from pyspark.sql import functions as F

    from dbt.adapters.ducklake.lake.lake import DuckLake
    from dbt.adapters.ducklake.spark.env.session import build_session
    from dbt.adapters.ducklake.spark.read import scan
    from dbt.adapters.ducklake.spark.write import one_shot

    started = time.monotonic()
    timings: dict[str, float] = {}

    def lap(step: str) -> None:
        timings[step] = round(time.monotonic() - started, 1)

    spark = build_session(master, "cluster-test", {
        "spark.executor.cores": "1",
        "spark.executor.memory": "512m",
        "spark.cores.max": "1",
        "spark.driver.memory": "512m",
        "spark.pyspark.python": sys.executable,
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.ui.enabled": "false",
        "spark.driver.extraJavaOptions": FAST_JVM_OPTIONS,
        "spark.executor.extraJavaOptions": FAST_JVM_OPTIONS,
    })
    spark.sparkContext.setLogLevel("WARN")
    lap("session")
    lake = DuckLake.create(f"duckdb:///{root}/catalog.ducklake", f"{root}/data/")
    try:
        def rows(start: int, end: int, parts: int) -> DataFrame:  # rows made by the executors, several partitions
            return spark.range(start, end, numPartitions=parts).withColumn("k", (F.col("id") % KEYS).cast("int"))

        snaps = [one_shot.create_table_as(spark, lake, "main", "t", rows(0, CTAS_ROWS, 3), partition_by=[("k", "identity")])]
        lap("create_table_as")
        snaps.append(one_shot.append(spark, lake, "main", "t", rows(CTAS_ROWS, CTAS_ROWS + APPEND_ROWS, 1)))
        lap("append")
        snaps.append(one_shot.delete_where(spark, lake, "main", "t", DELETE))
        lap("delete_where")
        state = lake.snapshot()
        view = scan.register_table(spark, state, state.table("main", "t"))
        lap("register_table")
        per_key = spark.sql(f"SELECT k, count(*), sum(id) FROM {view} GROUP BY k").collect()
        lap("read")
        # where Python tasks ran: an executor's cwd is <worker work dir>/app-…/<executor id> (local mode: the driver's)
        task_dirs = spark.range(0, 4, numPartitions=4).rdd.map(lambda _: os.getcwd()).collect()
        sc = spark.sparkContext
        return {
            "master": sc.master,
            "block_managers": sc._jsc.sc().getExecutorMemoryStatus().size(),  # the driver's and each executor's
            "driver_dir": os.getcwd(),
            "task_dirs": task_dirs,
            "snapshots": [s.snapshot_id if s else None for s in snaps],
            "count": sum(r[1] for r in per_key),
            "sum": sum(r[2] for r in per_key),
            "per_key": {r[0]: [r[1], r[2]] for r in per_key},
            "data_files": len(state.files(state.table("main", "t"))),
            "timings": timings,
        }
    finally:
        lake.close()
        spark.stop()


# one cluster for the module's tests (each driver is its own application, run one after the other on the 1-core
# worker): the daemons' start is a good part of a test's time
@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneCluster]:
    with standalone_cluster(tmp_path_factory.mktemp("cluster"), cores=1, memory="1g", timeout=90) as c:
        yield c


@pytest.mark.slow
def test_write_delete_and_read_on_a_standalone_cluster(cluster: StandaloneCluster, tmp_path: Path) -> None:
    lake_dir = tmp_path / "lake"
    lake_dir.mkdir()
    child = run_python(["-m", "tests.spark.test_cluster", cluster.master_url, str(lake_dir)], env=cluster.env(),
                       log_dir=tmp_path / "child", timeout=240)
    if child.returncode != 0:
        pytest.fail(f"the cluster driver failed (exit {child.returncode}):\n{child.stderr[-6000:]}\n{cluster.logs()}",
                    pytrace=False)
    got = child.last_json()
    print("cluster driver, seconds since start:", got["timings"])  # shown with -rP

    # the work really ran on the cluster: a spark:// master, one executor besides the driver, tasks in its directory
    assert got["master"] == cluster.master_url
    assert got["block_managers"] == 2
    work = str(cluster.work_dir) + os.sep
    assert got["task_dirs"] and all(d.startswith(work) and d != got["driver_dir"] for d in got["task_dirs"]), got
    assert len(set(got["task_dirs"])) == 1  # one executor

    ids = _expected_ids()
    per_key = {k: [sum(1 for i in ids if i % KEYS == k), sum(i for i in ids if i % KEYS == k)] for k in range(KEYS)}
    assert got["snapshots"] == [1, 2, 3]
    assert (got["count"], got["sum"]) == (len(ids), sum(ids))
    assert {int(k): v for k, v in got["per_key"].items()} == per_key
    assert got["data_files"] >= KEYS * 2  # each write: at least one file per key (no inlining)

    # the data path holds only registered files: no Spark staging, _SUCCESS or .crc left by executors or driver
    data = lake_dir / "data"
    # besides the read manifests (symlinks under _ducklake_spark/, which no engine takes for data)
    on_disk = sorted(p for p in data.rglob("*") if p.is_file() and "_ducklake_spark" not in p.parts)
    assert on_disk and all(p.name.startswith("ducklake-") and p.suffix == ".parquet" for p in on_disk), on_disk
    assert not any("ducklake-write-" in str(p) for p in on_disk)

    # DuckDB (the reference) reads the same table (the child has exited: the catalog file is closed)
    with reference.attached(f"duckdb:///{lake_dir}/catalog.ducklake", read_only=True) as con:
        assert con.execute("SELECT count(*), sum(id) FROM lake.main.t").fetchone() == (len(ids), sum(ids))
        assert {k: [n, total] for k, n, total in con.execute(
            "SELECT k, count(*), sum(id) FROM lake.main.t GROUP BY k").fetchall()} == per_key
        assert con.execute("SELECT count(*) FROM lake.main.t WHERE " + DELETE).fetchone() == (0,)
        assert [r[0] for r in con.execute("SELECT snapshot_id FROM lake.snapshots() ORDER BY 1").fetchall()] == [
            0, 1, 2, 3]
        files = con.execute("SELECT count(*) FROM ducklake_list_files('lake', 't', schema => 'main')").fetchone()[0]
        assert files == got["data_files"]

    # a dbt project (SQL and Python models) built on the same cluster: the Python model runs in dbt's driver
    from tests.functional.test_connect_dbt import build_project

    build_project(cluster.master_url, tmp_path / "dbt", cluster.env())


@pytest.mark.slow
def test_merge_runs_again_when_its_kept_source_is_lost(cluster: StandaloneCluster, tmp_path: Path) -> None:
    """A MERGE whose kept source is lost with its executor runs again (see tests/spark/test_lost_executor.py)."""
    check_merge_runs_again(cluster, tmp_path)


if __name__ == "__main__":
    print(json.dumps(_workload(sys.argv[1], sys.argv[2])), flush=True)
