"""A DuckDB-written table of 150 small files on S3 (moto's server on loopback), with delete files, an
inlined delete and inlined rows, read by the adapter through a listing (spark/read/listing.py): its rows equal DuckDB's at
the newest snapshot and at one before the deletes, DML locators give DuckDB's row ids, and the view's SQL does not
grow with the file count (no per-file branch, path or literal).

The read runs in a child process: its Spark driver needs the s3a connector on its class path from the start, which
the shared test session does not have."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from dbt.adapters.ducklake.spark.env import s3a
from tests.support import s3
from tests.support.coverage import FULL

pytestmark = [pytest.mark.slow, pytest.mark.spark,
              pytest.mark.skipif(s3a.cached_jars() is None,
                                 reason="the s3a connector is not cached: run scripts/setup.sh")]

# enough that a branch, path or literal per file would show in the SQL; each file costs requests per scan (moto
# answers a few hundred a second), so the default suite takes fewer (still many more than the one branch allowed)
FILES = 150 if FULL else 20

_CHILD = r"""
import json, sys
from dbt.adapters.ducklake.lake import DuckLake
from dbt.adapters.ducklake.lake.storage import ObjectStoreConfig, configure_object_store
from dbt.adapters.ducklake.spark.env import s3a
from dbt.adapters.ducklake.spark.read import first_read, scan
from dbt.adapters.ducklake.spark.env.session import build_session

a = json.loads(sys.argv[1])
keys = dict(key_id=a["key_id"], secret=a["secret"], region=a["region"], endpoint=a["endpoint"], url_style="path",
            use_ssl=False)
conf = {"spark.sql.shuffle.partitions": "2", **s3a.connector_conf({}, "local[2]"),
        **s3a.hadoop_conf(session_token=None, **keys)}
spark = build_session("local[2]", "s3-many-files", conf)
spark.sparkContext.setLogLevel("ERROR")
configure_object_store(ObjectStoreConfig(**keys))
lake = DuckLake.open(a["catalog"])
out = {}
for snap in a["snapshots"]:
    st = lake.snapshot(snap)
    t = st.table("main", "events")
    sql = scan.table_sql(spark, st, t)
    rows = spark.sql(f"SELECT id, kind, amount FROM ({sql}) ORDER BY id").collect()
    out[str(snap)] = {"sql": sql, "rows": [list(r) for r in rows]}
# the delete positions gathered in the background by the first read: the next plan reads them from one file
first_read.wait_for_builds()
st = lake.snapshot()
sql = scan.table_sql(spark, st, st.table("main", "events"))
rows = spark.sql(f"SELECT id, kind, amount FROM ({sql}) ORDER BY id").collect()
out["gathered"] = {"sql": sql, "rows": [list(r) for r in rows]}
st = lake.snapshot()
t = st.table("main", "events")
plan = scan.plan_scan(st, t, None, positions=False)
targets = scan.target_rows_sql(spark, st, t, plan)
locs = spark.sql(" UNION ALL ".join(f"SELECT {scan.RID}, id FROM ({s})" for s in targets)).collect()
out["locators"] = sorted([r[0], r[1]] for r in locs)
out["targets_sql"] = targets
print("RESULT " + json.dumps(out))
"""


def _lake(server: s3.S3Server, root: Path) -> tuple[str, int, int]:
    """FILES files of 100 rows written by DuckDB to a new bucket (one INSERT closing a file after each row group),
    then a DELETE (a delete file per data file), a delete DuckDB inlines and inlined rows; (catalog, the snapshot
    before the deletes, the newest snapshot)."""
    bucket = server.make_bucket()
    catalog = str(root / "m.ducklake")
    con = s3.connect(server)
    try:
        con.execute(f"ATTACH 'ducklake:{catalog}' AS lake (DATA_PATH 's3://{bucket}/data/')")
        con.execute("CALL lake.set_option('data_inlining_row_limit', 0)")
        con.execute("CALL lake.set_option('parquet_row_group_size', 100)")
        con.execute("CALL lake.set_option('target_file_size', '1B')")
        con.execute("CREATE TABLE lake.main.events (id BIGINT, kind VARCHAR, amount DOUBLE)")
        branches = " UNION ALL ".join(f"SELECT {i * 100} + range AS id, 'k' || (range % 7) AS kind, "
                                      "range * 1.5 AS amount FROM range(100)" for i in range(FILES))
        con.execute(f"INSERT INTO lake.main.events {branches}")
        before = con.execute("SELECT max(snapshot_id) FROM lake.snapshots()").fetchone()[0]
        con.execute("DELETE FROM lake.main.events WHERE id % 97 = 3")
        con.execute("CALL lake.set_option('data_inlining_row_limit', 10)")
        con.execute(f"INSERT INTO lake.main.events VALUES ({FILES * 100}, 'late', 1.0), ({FILES * 100 + 1}, "
                    "'late', 2.0)")
        con.execute("DELETE FROM lake.main.events WHERE id IN (5, 1005)")  # small: DuckDB inlines the deletes
        newest = con.execute("SELECT max(snapshot_id) FROM lake.snapshots()").fetchone()[0]
        files = con.execute("SELECT count(*) FROM ducklake_list_files('lake', 'events') WHERE "
                            "delete_file IS NOT NULL").fetchone()[0]
        assert files >= FILES - 5, files  # delete files of nearly every data file
    finally:
        con.close()
    return catalog, int(before), int(newest)


def test_many_files_on_s3_read_as_duckdb_reads_them(tmp_path: Path, s3_server: s3.S3Server) -> None:
    catalog, before, newest = _lake(s3_server, tmp_path)
    args = {"catalog": catalog, "snapshots": [newest, before], "key_id": s3_server.key_id,
            "secret": s3_server.secret, "region": s3_server.region, "endpoint": s3_server.endpoint}
    proc = subprocess.run([sys.executable, "-c", _CHILD, json.dumps(args)], capture_output=True, text=True,
                          timeout=600, stdin=subprocess.DEVNULL, cwd=tmp_path)
    lines = [x for x in proc.stdout.splitlines() if x.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, proc.stdout[-3000:] + proc.stderr[-3000:]
    got = json.loads(lines[0][len("RESULT "):])
    con = s3.connect(s3_server)
    try:
        con.execute(f"ATTACH 'ducklake:{catalog}' AS lake (READ_ONLY)")
        for snap in (newest, before):
            theirs = [list(r) for r in con.execute(
                f"SELECT id, kind, amount FROM lake.main.events AT (VERSION => {snap}) ORDER BY id").fetchall()]
            assert got[str(snap)]["rows"] == theirs, snap
            if snap == newest:
                assert got["gathered"]["rows"] == theirs
        rowids = sorted([int(r[0]), int(r[1])] for r in con.execute("SELECT rowid, id FROM lake.main.events "
                                                                    "WHERE rowid IS NOT NULL").fetchall())
    finally:
        con.close()
    assert len(got[str(newest)]["rows"]) == FILES * 100 - len(range(3, FILES * 100, 97)) - 2 + 2
    # inlined rows have no file: the locators of the file rows are DuckDB's row ids of the file rows
    assert got["locators"] == [r for r in rowids if r[1] < FILES * 100]
    assert got["gathered"]["sql"] != got[str(newest)]["sql"]  # read through the gathered positions
    for sql in (got[str(newest)]["sql"], got[str(before)]["sql"], got["gathered"]["sql"]):
        # one branch for the files whatever their number (and one for the inlined rows at the newest snapshot)
        assert sql.count("UNION ALL") <= 1 + sql.count("UNION ALL SELECT path, pos"), sql
        assert "ducklake-" not in sql and "s3a://" not in sql and len(sql) < 3000, sql
    assert all("ducklake-" not in s and "s3a://" not in s for s in got["targets_sql"])
