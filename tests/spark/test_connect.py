"""The Spark layer through Spark Connect: a `SparkConnectServer` (local[2] in its own JVM) on 127.0.0.1.

The client is a child process (`python -m tests.spark.test_connect sc://127.0.0.1:<port> <root>`, see `_workload`)
with no JVM of its own, kept apart from the test process's classic SparkSession. It sets the layer's required conf on
the Connect session, then creates a partitioned table, appends, deletes, updates, merges, reads the table through a
registered view and reads the change feed, and prints one JSON line. The server writes and reads the Parquet files;
the client (on the same file system) registers them in the catalog. After the child has exited, DuckDB's ducklake
extension must read exactly the expected rows, snapshots and changes. The module's server also serves the client of
remote GEOMETRY / VARIANT files (tests/spark/test_remote_readable.py).
"""

from __future__ import annotations

import json
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from dbt.adapters.ducklake.spark.env.session import REQUIRED_CONF
from tests.spark.test_remote_readable import _lake as remote_readable_lake
from tests.support import reference
from tests.support.spark_cluster import ConnectServer, connect_server, run_python

CTAS_ROWS, APPEND_ROWS = 2_000, 1_000
KEYS = 3  # k = id % 3, the identity partition column
DELETE = "id % 7 = 0"
UPDATE = "id % 10 = 1"  # SET v = concat('u', v)
MERGE_IDS = range(2_950, 3_050)  # source rows (id, id % 3, 'm<id>'): matched rows updated, the others inserted
CHANGES = (2, 5)  # the change feed from the append to the merge


def _expected() -> tuple[list[list], Counter]:
    """The table's rows [id, k, v] after every step, and the change feed's (snapshot, change_type) counts."""
    rows = {i: [i, i % KEYS, f"r{i}"] for i in range(CTAS_ROWS + APPEND_ROWS)}
    kinds: Counter = Counter({(2, "insert"): APPEND_ROWS})
    for i in [i for i in rows if i % 7 == 0]:
        del rows[i]
        kinds[(3, "delete")] += 1
    for i in [i for i in rows if i % 10 == 1]:
        rows[i][2] = "u" + rows[i][2]
        kinds[(4, "update_preimage")] += 1
        kinds[(4, "update_postimage")] += 1
    for i in MERGE_IDS:
        if i in rows:
            kinds[(5, "update_preimage")] += 1
            kinds[(5, "update_postimage")] += 1
        else:
            kinds[(5, "insert")] += 1
        rows[i] = [i, i % KEYS, f"m{i}"]
    return sorted(rows.values()), kinds


def _workload(url: str, root: str) -> dict:
    """The client's side (child process): every Spark-layer operation through the Connect session; the facts."""
    from pyspark import SparkContext
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql import functions as F
    from pyspark.sql.connect.session import SparkSession as ConnectSession

    from dbt.adapters.ducklake.lake.lake import DuckLake
    from dbt.adapters.ducklake.spark.env.session import apply_required_conf
    from dbt.adapters.ducklake.spark.read import changes, scan
    from dbt.adapters.ducklake.spark.write import one_shot

    started = time.monotonic()
    timings: dict[str, float] = {}

    def lap(step: str) -> None:
        timings[step] = round(time.monotonic() - started, 1)

    spark = SparkSession.builder.remote(url).getOrCreate()
    apply_required_conf(spark)
    lap("session")
    lake = DuckLake.create(f"duckdb:///{root}/catalog.ducklake", f"{root}/data/")
    try:
        def rows(start: int, end: int, parts: int) -> DataFrame:  # rows made by the server, several partitions
            return (spark.range(start, end, numPartitions=parts)
                    .withColumn("k", (F.col("id") % KEYS).cast("int"))
                    .withColumn("v", F.concat(F.lit("r"), F.col("id").cast("string"))))

        snaps = [one_shot.create_table_as(spark, lake, "main", "t", rows(0, CTAS_ROWS, 2), partition_by=[("k", "identity")])]
        lap("create_table_as")
        snaps.append(one_shot.append(spark, lake, "main", "t", rows(CTAS_ROWS, CTAS_ROWS + APPEND_ROWS, 1)))
        lap("append")
        snaps.append(one_shot.delete_where(spark, lake, "main", "t", DELETE))
        lap("delete_where")
        snaps.append(one_shot.update_where(spark, lake, "main", "t", {"v": "concat('u', v)"}, UPDATE))
        lap("update_where")
        source = spark.createDataFrame([(i, i % KEYS, f"m{i}") for i in MERGE_IDS], "id bigint, k int, v string")
        snaps.append(one_shot.merge_into(spark, lake, "main", "t", source, "t.id = s.id", matched="update",
                                    not_matched_insert=True))
        lap("merge_into")
        state = lake.snapshot()
        view = scan.register_table(spark, state, state.table("main", "t"))
        per_key = spark.sql(f"SELECT k, count(*), sum(id) FROM {view} GROUP BY k ORDER BY k").collect()
        table_rows = spark.sql(f"SELECT id, k, v FROM {view} ORDER BY id").collect()
        lap("read")
        feed = changes.table_changes(spark, lake, "main", "t", *CHANGES).collect()
        lap("table_changes")
        return {
            "connect": isinstance(spark, ConnectSession),
            "client_jvm": SparkContext._gateway is not None,  # a Connect client starts no JVM
            "required_conf": {k: spark.conf.get(k) for k in REQUIRED_CONF},
            "snapshots": [s.snapshot_id if s else None for s in snaps],
            "per_key": [list(r) for r in per_key],
            "rows": [list(r) for r in table_rows],
            "changes": [list(r) for r in feed],
            "data_files": len(state.files(state.table("main", "t"))),
            "timings": timings,
        }
    finally:
        lake.close()
        spark.stop()


# one server for the module: its JVM's start is most of a test's time, and each test's client is its own process and
# session, on its own lake
@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ConnectServer]:
    with connect_server(tmp_path_factory.mktemp("connect"), master="local[2]", memory="512m",
                        conf={"spark.sql.shuffle.partitions": "4"}, timeout=120) as s:
        yield s


@pytest.mark.slow
def test_write_dml_read_and_changes_through_spark_connect(server: ConnectServer, tmp_path: Path) -> None:
    lake_dir = tmp_path / "lake"
    lake_dir.mkdir()
    child = run_python(["-m", "tests.spark.test_connect", server.url, str(lake_dir)], env=server.env(),
                       log_dir=tmp_path / "child", timeout=300)
    if child.returncode != 0:
        pytest.fail(f"the Connect client failed (exit {child.returncode}):\n{child.stderr[-6000:]}\n{server.logs()}",
                    pytrace=False)
    got = child.last_json()
    print("Connect client, seconds since start:", got["timings"])  # shown with -rP

    # a Connect session, no JVM in the client: the server did the Spark work, with the conf the client set
    assert got["connect"] is True and got["client_jvm"] is False
    assert {k: str(v).lower() for k, v in got["required_conf"].items()} == {
        k: v.lower() for k, v in REQUIRED_CONF.items()}

    rows, kinds = _expected()
    per_key = [[k, sum(1 for r in rows if r[1] == k), sum(r[0] for r in rows if r[1] == k)] for k in range(KEYS)]
    assert got["snapshots"] == [1, 2, 3, 4, 5]
    assert got["per_key"] == per_key
    assert got["rows"] == rows
    assert Counter((r[0], r[2]) for r in got["changes"]) == kinds
    assert got["data_files"] >= KEYS * 2  # CTAS and append: at least one file per key each (no inlining)

    # the data path holds only registered files: no Spark staging, _SUCCESS or .crc left behind
    # besides the read manifests (symlinks under _ducklake_spark/, which no engine takes for data)
    on_disk = sorted(p for p in (lake_dir / "data").rglob("*") if p.is_file() and "_ducklake_spark" not in p.parts)
    assert on_disk and all(p.name.startswith("ducklake-") and p.suffix == ".parquet" for p in on_disk), on_disk

    # DuckDB (the reference) reads the same table, snapshots and changes (the child has exited: the file is closed)
    with reference.attached(f"duckdb:///{lake_dir}/catalog.ducklake", read_only=True) as con:
        assert [list(r) for r in con.execute("SELECT id, k, v FROM lake.main.t ORDER BY id").fetchall()] == rows
        assert [r[0] for r in con.execute("SELECT snapshot_id FROM lake.snapshots() ORDER BY 1").fetchall()] == [
            0, 1, 2, 3, 4, 5]
        theirs = con.execute(
            "SELECT snapshot_id, rowid, change_type, id, k, v FROM "
            f"ducklake_table_changes('lake', 'main', 't', {CHANGES[0]}, {CHANGES[1]})").fetchall()
        assert sorted(map(list, theirs)) == sorted(got["changes"])
        files = con.execute("SELECT count(*) FROM ducklake_list_files('lake', 't', schema => 'main')").fetchone()[0]
        assert files == got["data_files"]


@pytest.mark.slow
def test_remote_files_read_through_spark_connect(server: ConnectServer, tmp_path: Path) -> None:
    """Remote GEOMETRY / VARIANT files through Connect (tests/spark/test_remote_readable.py's lake and client): no JVM
    in the client, so the server reads the files' bytes, decodes them and writes the copies."""
    catalog, expected = remote_readable_lake(tmp_path / "lake")
    child = run_python(["-m", "tests.spark.test_remote_readable", server.url, catalog], env=server.env(),
                       log_dir=tmp_path / "child", timeout=300)
    if child.returncode != 0:
        pytest.fail(f"the Connect client failed (exit {child.returncode}):\n{child.stderr[-6000:]}\n{server.logs()}",
                    pytrace=False)
    got = child.last_json()
    assert "connect" in got["connect"]
    assert got["rows"] == expected
    assert got["ids"] == [r[0] for r in expected if r[0] > 3]
    copies = list((tmp_path / "lake" / "data" / "_ducklake_spark").rglob("__ducklake_copy=*/*.parquet"))
    assert len(copies) == 2  # made by the server's executors, one per data file


if __name__ == "__main__":
    print(json.dumps(_workload(sys.argv[1], sys.argv[2])), flush=True)
