"""A MERGE whose kept source is lost with its executor runs again and commits what DuckDB's MERGE gives.

The source of a MERGE is computed once and kept on the executors (a local checkpoint) for its passes. On a cluster
the executor holding it can die between passes. The test pauses the MERGE right after the source is kept
(DUCKLAKE_TEST_PAUSE_AT=merge_source_kept), kills the only executor of a Spark standalone cluster (SIGKILL; the worker
starts a new one), and lets it go on: the first run fails with CHECKPOINT_RDD_BLOCK_ID_NOT_FOUND, the second one
(two copies of each block) succeeds. One snapshot, the rows DuckDB's own MERGE gives, no file of the failed run left.

The driver is a child process (this module run as `python -m tests.spark.test_lost_executor <master> <root>`): the
test process already holds a local SparkContext. The test itself (test_merge_runs_again_when_its_kept_source_is_lost)
is in tests/spark/test_cluster.py, on that module's cluster: a cluster's start is a good part of each test's time.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.lake.compare import arrow_rows
from tests.support import reference
from tests.support.invariants import violations
from tests.support.spark_cluster import FAST_JVM_OPTIONS, StandaloneCluster, run_python

TARGET = "CREATE TABLE lake.main.t AS SELECT range AS id, 'old ' || range AS v FROM range(2000)"
MERGE_ON = "t.id = s.id"
SOURCE = "SELECT range AS id, 'new ' || range AS v FROM range(1000, 3000)"  # what the Spark source holds too


def _workload(master: str, root: str) -> dict:
    """The driver's side: MERGE a source computed on the cluster into the table DuckDB made."""
    from dbt.adapters.ducklake.lake.lake import DuckLake
    from dbt.adapters.ducklake.spark.env.session import build_session
    from dbt.adapters.ducklake.spark.write import dml, one_shot

    dml.SMALL_MERGE_TARGET_ROWS = -1  # the passes with a kept source (a small merge keeps none: it is one job)

    spark = build_session(master, "lost-executor-test", {
        "spark.executor.cores": "1", "spark.executor.memory": "512m", "spark.cores.max": "1",
        "spark.driver.memory": "512m", "spark.pyspark.python": sys.executable,
        "spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1", "spark.ui.enabled": "false",
        "spark.driver.extraJavaOptions": FAST_JVM_OPTIONS, "spark.executor.extraJavaOptions": FAST_JVM_OPTIONS,
    })
    spark.sparkContext.setLogLevel("ERROR")
    lake = DuckLake.open(f"duckdb:///{root}/ours.ducklake")
    try:
        source = spark.range(1000, 3000, numPartitions=4).selectExpr("id", "concat('new ', id) AS v")
        snap = one_shot.merge_into(spark, lake, "main", "t", source, MERGE_ON, matched="update",
                                   not_matched_insert=True)
        return {"snapshot": snap.snapshot_id if snap else None}
    finally:
        lake.close()
        spark.stop()


def _executor_pids(work_dir: Path) -> list[int]:
    """The cluster's executor JVMs (their working directory is under the worker's)."""
    pids = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if "CoarseGrainedExecutorBackend" in (proc / "cmdline").read_text(errors="replace") and \
                    os.readlink(proc / "cwd").startswith(str(work_dir)):
                pids.append(int(proc.name))
        except OSError:
            continue
    return pids


def check_merge_runs_again(cluster: StandaloneCluster, tmp_path: Path) -> None:
    """The test, on a running cluster (tests/spark/test_cluster.py's: one cluster serves both modules' drivers)."""
    ours, theirs = f"duckdb:///{tmp_path}/ours.ducklake", f"duckdb:///{tmp_path}/theirs.ducklake"
    for catalog, data in ((ours, "ours_data"), (theirs, "theirs_data")):
        reference.execute_all(catalog, [TARGET], data_path=f"{tmp_path}/{data}/")
    reference.execute_all(theirs, [f"MERGE INTO lake.main.t USING ({SOURCE}) s ON {MERGE_ON} "
                                   "WHEN MATCHED THEN UPDATE SET v = s.v WHEN NOT MATCHED THEN INSERT VALUES (s.id, s.v)"])

    pause = tmp_path / "paused"
    killed: list[int] = []
    pauses = 0
    stop = threading.Event()

    def release() -> None:  # first pause: kill the executor holding the source; then let every run go on
        nonlocal pauses
        while not stop.is_set():
            if pause.exists():
                pauses += 1
                if pauses == 1:
                    for pid in _executor_pids(cluster.work_dir):
                        os.kill(pid, signal.SIGKILL)
                        killed.append(pid)
                    time.sleep(2)  # the driver learns of the loss (the connection drops at once)
                pause.unlink()
            time.sleep(0.1)

    watcher = threading.Thread(target=release, daemon=True)
    watcher.start()
    env = {**cluster.env(), "DUCKLAKE_TEST_PAUSE_AT": "merge_source_kept", "DUCKLAKE_TEST_PAUSE_FILE": str(pause)}
    try:
        child = run_python(["-m", "tests.spark.test_lost_executor", cluster.master_url, str(tmp_path)], env=env,
                           log_dir=tmp_path / "child", timeout=300)
    finally:
        stop.set()
        watcher.join()
    if child.returncode != 0:
        pytest.fail(f"the MERGE failed (exit {child.returncode}):\n{child.stderr[-6000:]}\n{cluster.logs()}",
                    pytrace=False)

    assert killed, "no executor was running while the MERGE was paused"
    assert pauses == 2, f"the MERGE's source was kept {pauses} times (one failed run and one retry expected)"
    assert "CHECKPOINT_RDD_BLOCK_ID_NOT_FOUND" in child.stderr and "running it again" in child.stderr
    assert child.last_json()["snapshot"] == 2  # one snapshot for the MERGE, after DuckDB's CREATE

    with reference.attached(ours, read_only=True) as con, reference.attached(theirs, "ref", read_only=True) as ref:
        got = arrow_rows(con.execute("SELECT * FROM lake.main.t ORDER BY id").to_arrow_table())
        want = arrow_rows(ref.execute("SELECT * FROM ref.main.t ORDER BY id").to_arrow_table())
        assert got == want
        registered = {f for row in con.execute("SELECT data_file, delete_file FROM ducklake_list_files("
                                               "'lake', 't', schema => 'main')").fetchall() for f in row if f}
    assert violations(ours) == []
    # the failed run's files were removed: the data folder holds exactly the registered files
    on_disk = {str(p) for p in (tmp_path / "ours_data").rglob("*.parquet") if "_ducklake_spark" not in p.parts}
    assert on_disk == registered


if __name__ == "__main__":
    print(json.dumps(_workload(sys.argv[1], sys.argv[2])), flush=True)
