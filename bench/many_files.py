"""Reading DuckDB-written tables of many small files through the lake's Spark view, vs plain Spark Parquet and DuckDB.

For each size N, DuckDB 1.5.5 writes a table the way frequent loads leave it before compaction: N appends of 100
rows (one Parquet file each, inlining off), then a DELETE of about 1 % of the rows, then a few inlined inserts
(inlining back on). Then, in one process: the view's registration / planning (`scan.table_sql` + CREATE VIEW), a
`count(*)`, a selective filter and a full-column aggregate through the view; the same queries by
`spark.read.parquet` of the same live file list (no deletes applied: the floor); and DuckDB's times on the lake.

Run: .venv/bin/python -m bench.many_files [--files 1000,10000] [--repeat 2] [--workdir DIR] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable
from typing import Any

from dbt.adapters.ducklake.lake import DuckLake
from dbt.adapters.ducklake.lake.maintenance.cleanup import SPARK_MANIFESTS
from dbt.adapters.ducklake.spark.names import LakeNames
from dbt.adapters.ducklake.spark.scan import table_sql
from dbt.adapters.ducklake.spark.session import build_session
from tests.support import reference

BATCH = 250


def build_lake(root: str, n_files: int) -> str:
    """A DuckDB-written lake with n_files appends of 100 rows, ~1 % deleted, a few inlined rows."""
    catalog = f"{root}/m.ducklake"
    con = reference.connect()
    try:
        con.execute(f"ATTACH 'ducklake:{catalog}' AS lake (DATA_PATH '{root}/data/')")
        con.execute("CALL lake.set_option('data_inlining_row_limit', 0)")
        con.execute("CREATE TABLE lake.main.events (id BIGINT, kind VARCHAR, amount DOUBLE)")
        for first in range(0, n_files, BATCH):  # one file per INSERT; a commit per batch (one transaction of
            con.execute("BEGIN")                 # thousands of inserts grows superlinearly in DuckDB)
            for i in range(first, min(n_files, first + BATCH)):
                con.execute(f"INSERT INTO lake.main.events SELECT {i * 100} + range, 'k' || (range % 7), "
                            "range * 1.5 FROM range(100)")
            con.execute("COMMIT")
        con.execute("DELETE FROM lake.main.events WHERE id % 97 = 3")
        con.execute("CALL lake.set_option('data_inlining_row_limit', 10)")
        con.execute(f"INSERT INTO lake.main.events VALUES ({n_files * 100}, 'late', 1.0), ({n_files * 100 + 1}, "
                    "'late', 2.0)")
    finally:
        con.close()
    return catalog


def timed(fn: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    times, out = [], None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times), out


def run(n_files: int, repeat: int, workdir: str | None = None) -> dict[str, Any]:
    # with a workdir, lakes are kept there (lake<N>) and reused by later runs; their read manifests are removed first
    # so that planning starts cold
    root = os.path.join(workdir, f"lake{n_files}") if workdir else tempfile.mkdtemp(prefix=f"many-{n_files}-")
    try:
        t = time.perf_counter()
        catalog = f"{root}/m.ducklake"
        if not (workdir and os.path.exists(catalog)):
            shutil.rmtree(root, ignore_errors=True)
            os.makedirs(root)
            catalog = build_lake(root, n_files)
        shutil.rmtree(f"{root}/data/{SPARK_MANIFESTS}", ignore_errors=True)
        built = time.perf_counter() - t
        spark = build_session("local[2]", "many-files", {"spark.sql.shuffle.partitions": "4"})
        spark.sparkContext.setLogLevel("ERROR")
        spark.sql("SELECT count(*) FROM range(10)").collect()  # the JVM's first query is not planning's cost
        lake = DuckLake.open(catalog)
        out: dict[str, Any] = {"files": n_files, "build_s": round(built, 1)}

        def plan() -> int:
            st = lake.snapshot()
            sql = table_sql(spark, st, st.table("main", "events"))
            spark.sql("CREATE DATABASE IF NOT EXISTS bench")
            spark.sql(f"CREATE OR REPLACE VIEW bench.events AS {sql}")
            return len(sql)

        try:
            out["plan_s"], out["view_sql_chars"] = timed(plan, 1)  # first: cold footers
            out["plan_warm_s"], _ = timed(plan, repeat)
        except Exception as e:  # noqa: BLE001 - the failure at this size is a figure too
            out["plan_error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"
            return out
        # as the adapter plans a statement (spark/names): the state and the view SQL cached while the table is
        # unchanged, at the same snapshot and after another writer's commit to an unrelated table
        names = LakeNames(spark, lake)
        names.refresh([("main", "events")])
        out["plan_adapter_same_snapshot_s"], _ = timed(lambda: names.refresh([("main", "events")]), repeat)

        def after_unrelated_commit() -> None:
            with lake.transaction(commit_message="bench: an unrelated commit") as tx:
                tx.create_schema(f"bench_other_{uuid.uuid4().hex[:8]}")  # a new snapshot naming no table
            t = time.perf_counter()
            names.refresh([("main", "events")])
            after.append(time.perf_counter() - t)

        after: list[float] = []
        for _ in range(repeat):
            after_unrelated_commit()
        out["plan_adapter_after_unrelated_commit_s"] = statistics.median(after)
        queries = {"count": "SELECT count(*) FROM {t}", "filter": "SELECT count(*), sum(amount) FROM {t} WHERE id "
                   "BETWEEN 1000 AND 1099", "aggregate": "SELECT kind, sum(amount), count(*) FROM {t} GROUP BY kind"}
        st = lake.snapshot()
        paths = [f.path for f in st.files(st.table("main", "events"))]
        spark.read.parquet(*paths).createOrReplaceTempView("raw_events")
        answers = {}
        for name, q in queries.items():
            try:
                out[f"{name}_view_s"], got = timed(lambda q=q: spark.sql(q.format(t="bench.events")).collect(), repeat)
                answers[name] = sorted(tuple(r) for r in got)
            except Exception as e:  # noqa: BLE001
                out[f"{name}_view_error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"
            out[f"{name}_parquet_s"], _ = timed(lambda q=q: spark.sql(q.format(t="raw_events")).collect(), repeat)
        # as dbt models get them: the statement through the adapter's query path (count(*) from the catalog,
        # files pruned by their statistics)
        from dbt.adapters.ducklake.spark.read_pruning import pruned_reads

        def via_adapter(q: str) -> list[Any]:
            st = lake.snapshot()
            with pruned_reads(spark, st, q) as pq_:
                return spark.sql(pq_.sql).collect()

        for name in ("count", "filter"):
            q = queries[name].format(t="main.events")  # the lake table, as a model names it
            out[f"{name}_adapter_s"], got = timed(lambda q=q: via_adapter(q), repeat)
            answers[f"{name}_adapter"] = sorted(tuple(r) for r in got)
        with reference.attached(catalog, read_only=True) as con:
            for name, q in queries.items():
                out[f"{name}_duckdb_s"], theirs = timed(
                    lambda q=q: con.execute(q.format(t="lake.main.events")).fetchall(), repeat)
                for key in (name, f"{name}_adapter"):  # answers must be DuckDB's (sums compared to 1e-9 relative)
                    if key in answers:
                        out[f"{key}_equal"] = _same(answers[key], sorted(tuple(r) for r in theirs))
        lake.close()
        return {k: (round(v, 3) if isinstance(v, float) else v) for k, v in out.items()}
    finally:
        if not workdir:
            shutil.rmtree(root, ignore_errors=True)


def _same(a: list[tuple[Any, ...]], b: list[tuple[Any, ...]]) -> bool:
    if len(a) != len(b):
        return False
    for ra, rb in zip(a, b, strict=True):
        for x, y in zip(ra, rb, strict=True):
            if isinstance(x, float) or isinstance(y, float):
                if abs(float(x) - float(y)) > 1e-9 * max(1.0, abs(float(y))):
                    return False
            elif x != y:
                return False
    return True


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", default="1000,10000")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--json", default=None)
    ap.add_argument("--workdir", default=None, help="keep the built lakes here (lake<N>) and reuse them")
    args = ap.parse_args()
    results = []
    for n in (int(x) for x in args.files.split(",")):
        r = run(n, args.repeat, args.workdir)
        print(json.dumps(r), flush=True)
        results.append(r)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    os._exit(0)  # the SparkSession's JVM goes with the process


if __name__ == "__main__":
    main()
