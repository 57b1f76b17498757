"""Remote GEOMETRY / VARIANT files (spark/read/remote_readable.py): the decode runs where the adapter is not installed (it is
shipped by value), and the whole path works through Spark Connect (no JVM in the client: Spark reads the bytes,
decodes and writes the copies). Every file is taken as remote through `lake.paths.is_local`, so file:// URIs go the
way s3:// ones would."""

from __future__ import annotations

import json
import pickle
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from dbt.adapters.ducklake.lake import DuckLake
from dbt.adapters.ducklake.spark.read import remote_readable
from tests.support import reference

ROWS = ("(1, 'POINT(1 2)', 42::VARIANT), (2, 'LINESTRING(0 0, 1.5 -2e-7)', {'k': [1, 2], 'z': 'q'}::VARIANT), "
        "(3, NULL, NULL), (4, 'POLYGON EMPTY', 'text'::VARIANT), (5, 'POINT Z (1 2 3)', [1.5, NULL]::VARIANT)")
EXPECTED_SQL = ("SELECT id, g::VARCHAR, CASE WHEN v IS NULL THEN NULL ELSE v::JSON::VARCHAR END FROM lake.gv "
                "ORDER BY id")


def _lake(root: Path) -> tuple[str, list[list]]:
    """A DuckDB lake with one table gv (id, g GEOMETRY, v VARIANT) in two files and a delete; DuckDB's rows."""
    catalog = f"ducklake:{root / 'cat.ducklake'}"
    root.mkdir(parents=True, exist_ok=True)
    with reference.attached(catalog, data_path=str(root / "data")) as con:
        con.execute("CALL lake.set_option('data_inlining_row_limit', 0)")
        con.execute("CREATE TABLE lake.gv (id INTEGER, g GEOMETRY, v VARIANT)")
        con.execute(f"INSERT INTO lake.gv VALUES {ROWS}")
        con.execute("INSERT INTO lake.gv VALUES (6, 'MULTIPOINT(1 2, 3 4)', {'a': {'b': NULL}}::VARIANT)")
        con.execute("DELETE FROM lake.gv WHERE id = 2")
        return catalog, [list(r) for r in con.execute(EXPECTED_SQL).fetchall()]


_BLOCKED_CHILD = """
import pickle, sys
sys.modules["dbt"] = None  # importing the adapter now fails, as on an executor without it
func, batch = pickle.load(sys.stdin.buffer)
pickle.dump([b.to_pylist() for b in func(iter([batch]))], sys.stdout.buffer)
"""


def test_the_decode_runs_without_the_adapter(tmp_path: Path) -> None:
    """The mapInArrow function as Spark pickles it (cloudpickle, this module by value), run by a Python in which
    `import dbt` fails: it decodes a DuckDB file's bytes into the copy's rows."""
    from pyspark import cloudpickle

    _lake(tmp_path)
    state = DuckLake.open(f"ducklake:{tmp_path / 'cat.ducklake'}").snapshot()
    info = state.table("main", "gv")
    f = state.files(info)[0]
    geometry = {c.column_id for c in info.columns if c.type == "geometry"}
    schema = remote_readable.copy_schema(pq.read_schema(f.path), geometry)
    remote_readable._by_value()
    func = remote_readable.decoder(schema, geometry)
    batch = pa.RecordBatch.from_pydict({"content": [Path(f.path).read_bytes()], remote_readable.COPY: ["k"]})
    data = cloudpickle.dumps((func, batch))
    child = subprocess.run([sys.executable, "-c", _BLOCKED_CHILD], input=data, capture_output=True, timeout=120)
    assert child.returncode == 0, child.stderr.decode()[-3000:]
    rows = [r for batch_rows in pickle.loads(child.stdout) for r in batch_rows]
    assert [(r["id"], r["g"], r[remote_readable.POS_COLUMN], r[remote_readable.COPY]) for r in rows] == [
        (1, "POINT (1 2)", 0, "k"), (2, "LINESTRING (0 0, 1.5 -2e-07)", 1, "k"), (3, None, 2, "k"),
        (4, "POLYGON EMPTY", 3, "k"), (5, "POINT Z (1 2 3)", 4, "k")]
    assert rows[0]["v"]["metadata"] and isinstance(rows[0]["v"], dict)  # the variant group, kept for Spark


def _workload(url: str, catalog: str) -> dict:
    """The Connect client's side (child process): every file taken as remote; the view's rows and the copies made."""
    from pyspark.sql import SparkSession

    from dbt.adapters.ducklake.lake import paths
    from dbt.adapters.ducklake.spark.env.session import apply_required_conf
    from dbt.adapters.ducklake.spark.read import scan

    spark = SparkSession.builder.remote(url).getOrCreate()
    apply_required_conf(spark)
    paths.is_local = lambda path: False  # as s3:// files: the decode is Spark's
    try:
        state = DuckLake.open(catalog).snapshot()
        view = scan.register_table(spark, state, state.table("main", "gv"))
        rows = [list(r) for r in spark.sql(f"SELECT id, g, v FROM {view} ORDER BY id").collect()]
        ids = [r[0] for r in spark.sql(f"SELECT id FROM {view} WHERE id > 3 ORDER BY id").collect()]
        return {"rows": rows, "ids": ids, "connect": type(spark).__module__}
    finally:
        spark.stop()


# the Connect test of these files, test_remote_files_read_through_spark_connect, is in test_connect.py: it shares that
# module's server (a Connect server's start is most of such a test's time); its client is this module's _workload


if __name__ == "__main__":
    print(json.dumps(_workload(sys.argv[1], sys.argv[2])), flush=True)
