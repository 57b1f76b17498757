"""Reading DuckDB-written tables of many small files through the lake's Spark view, vs plain Spark Parquet and DuckDB.

For each size N, DuckDB 1.5.5 writes a table the way frequent loads leave it before compaction: N appends of 100
rows (one Parquet file each, inlining off), then a DELETE of about 1 % of the rows, then a few inlined inserts
(inlining back on). Then, in one process: the view's registration / planning (`scan.table_sql` + CREATE VIEW), a
`count(*)`, a selective filter and a full-column aggregate through the view; the same queries by
`spark.read.parquet` of the same live file list (no deletes applied: the floor); and DuckDB's times on the lake.
Planning is measured as the adapter plans a statement (`LakeNames`): the first reader of the snapshot with nothing
cached and no manifest on disk ("cold", split into its steps, the check of the files on storage among them), a new
process's first reader where the manifest exists, the same snapshot again, and after an unrelated commit; and the
lake check (`check_files`, with and without footers). Above 10,000 files the lake is built by multi-file INSERTs (see
`build_lake`); the lake's shape is read back from DuckDB's catalog tables.

With `--store s3` each size is measured twice in the one run: on local disk, then the same lake on S3 (its files
uploaded as DuckDB wrote them, the catalog's data path pointed at the bucket): moto's server on 127.0.0.1 started by
the bench, or an S3 endpoint given by `--s3-endpoint` (keys from AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY). The S3
figures carry the server's own cost per request (`s3_request_ms`: a ranged GET of a data file's footer).

Run: .venv/bin/python -m bench.many_files [--files 1000,10000] [--repeat 2] [--workdir DIR] [--json out.json]
     [--build auto|per-insert|multi] [--skip queries,spark_count,spark_filter,spark_aggregate,adapter,duckdb]
     [--store local|s3] [--s3-endpoint HOST:PORT]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from dbt.adapters.ducklake.lake import DuckLake
from dbt.adapters.ducklake.lake.maintenance.cleanup import SPARK_MANIFESTS
from dbt.adapters.ducklake.spark.env.session import build_session
from dbt.adapters.ducklake.spark.read import listing
from dbt.adapters.ducklake.spark.read.names import LakeNames
from dbt.adapters.ducklake.spark.read.scan import file_uri, table_sql
from tests.support import reference, s3

BATCH = 250
FILES_PER_INSERT = 100  # the "multi" build: one INSERT (one snapshot) writes this many files of 100 rows


def build_lake(root: str, n_files: int, method: str = "per-insert") -> str:
    """A DuckDB-written lake with n_files files of 100 rows, ~1 % deleted (a delete file per data file), a few
    inlined rows.

    per-insert: one INSERT per file, a commit per BATCH inserts (the shape measured at 1k and 10k files; ~27 ms a
    file, 45 min for 100k files on a loaded machine). multi: one INSERT per FILES_PER_INSERT files, each its own
    snapshot: a UNION ALL of 100-row branches (each a 100-row chunk) written with DuckLake's parquet_row_group_size
    100 and target_file_size 1 byte, so DuckDB closes a file after every row group. DuckDB then leaves one empty
    (0-row) file per INSERT (the file it opened after the last row group); those rows are removed from the catalog
    (and the files from disk) before the DELETE, so the lake holds exactly n_files files of 100 rows.
    """
    catalog = f"{root}/m.ducklake"
    con = reference.connect()
    try:
        con.execute(f"ATTACH 'ducklake:{catalog}' AS lake (DATA_PATH '{root}/data/')")
        con.execute("CALL lake.set_option('data_inlining_row_limit', 0)")
        con.execute("CREATE TABLE lake.main.events (id BIGINT, kind VARCHAR, amount DOUBLE)")
        if method == "per-insert":
            for first in range(0, n_files, BATCH):  # one file per INSERT; a commit per batch (one transaction of
                con.execute("BEGIN")                 # thousands of inserts grows superlinearly in DuckDB)
                for i in range(first, min(n_files, first + BATCH)):
                    con.execute(f"INSERT INTO lake.main.events SELECT {i * 100} + range, 'k' || (range % 7), "
                                "range * 1.5 FROM range(100)")
                con.execute("COMMIT")
        else:
            con.execute("CALL lake.set_option('parquet_row_group_size', 100)")
            con.execute("CALL lake.set_option('target_file_size', '1B')")
            for first in range(0, n_files, FILES_PER_INSERT):
                branches = " UNION ALL ".join(
                    f"SELECT {i * 100} + range AS id, 'k' || (range % 7) AS kind, range * 1.5 AS amount "
                    "FROM range(100)" for i in range(first, min(n_files, first + FILES_PER_INSERT)))
                con.execute(f"INSERT INTO lake.main.events {branches}")
            con.execute("DETACH lake")
            _drop_empty_files(con, catalog, root)
            con.execute(f"ATTACH 'ducklake:{catalog}' AS lake (DATA_PATH '{root}/data/')")
        con.execute("DELETE FROM lake.main.events WHERE id % 97 = 3")
        con.execute("CALL lake.set_option('data_inlining_row_limit', 10)")
        con.execute(f"INSERT INTO lake.main.events VALUES ({n_files * 100}, 'late', 1.0), ({n_files * 100 + 1}, "
                    "'late', 2.0)")
    finally:
        con.close()
    return catalog


def _drop_empty_files(con: Any, catalog: str, root: str) -> None:
    """Remove the multi build's 0-row files from the DuckDB catalog file (their rows, column stats and size in the
    table stats) and from disk, and the two write options it set (back to DuckLake's defaults)."""
    con.execute(f"ATTACH '{catalog}' AS cat")
    try:
        empty = con.execute("SELECT data_file_id, path, path_is_relative, file_size_bytes FROM "
                            "cat.ducklake_data_file WHERE record_count = 0").fetchall()
        if empty:
            ids = ",".join(str(r[0]) for r in empty)
            con.execute(f"DELETE FROM cat.ducklake_file_column_stats WHERE data_file_id IN ({ids})")
            con.execute(f"DELETE FROM cat.ducklake_data_file WHERE data_file_id IN ({ids})")
            con.execute("UPDATE cat.ducklake_table_stats SET file_size_bytes = file_size_bytes - "
                        f"{sum(r[3] for r in empty)}")
        con.execute("DELETE FROM cat.ducklake_metadata WHERE key IN ('parquet_row_group_size', 'target_file_size')")
    finally:
        con.execute("DETACH cat")
    if empty:
        where = {os.path.basename(r[1]): r[1] for r in empty}
        for d, _sub, names in os.walk(f"{root}/data"):
            for name in names:
                if name in where:
                    os.remove(os.path.join(d, name))


def lake_shape(catalog: str) -> dict[str, Any]:
    """The lake as DuckDB's catalog tables have it: live data files, their record counts, delete files, snapshots,
    inlined rows."""
    with reference.attached(catalog, read_only=True) as con:
        meta = "__ducklake_metadata_lake"
        files, lo, hi = con.execute(f"SELECT count(*), min(record_count), max(record_count) FROM {meta}."
                                    "ducklake_data_file WHERE end_snapshot IS NULL").fetchone()
        deletes = con.execute(f"SELECT count(*) FROM {meta}.ducklake_delete_file WHERE end_snapshot IS NULL"
                              ).fetchone()[0]
        snapshots = con.execute(f"SELECT count(*) FROM {meta}.ducklake_snapshot").fetchone()[0]
        rows = con.execute("SELECT count(*) FROM lake.main.events").fetchone()[0]
    return {"data_files": files, "rows_per_file": [lo, hi], "delete_files": deletes, "snapshots": snapshots,
            "live_rows": rows}


class Phases:
    """Wall time spent in the cold plan's steps (functions of the adapter's path, wrapped while active)."""

    STEPS = (("state", "dbt.adapters.ducklake.lake.lake", "DuckLake.advance"),
             ("plan_scan (catalog rows of the files)", "dbt.adapters.ducklake.spark.read.scan", "plan_scan"),
             ("verify (the files on storage, as listed)", "dbt.adapters.ducklake.spark.read.scan", "verify_scan"),
             ("gather_deletes (read delete files)", "dbt.adapters.ducklake.spark.read.manifest", "gather_deletes"),
             ("materialize (links + deletes file)", "dbt.adapters.ducklake.spark.read.manifest", "_materialize"),
             ("spark_table (catalog tables)", "dbt.adapters.ducklake.spark.read.manifest", "spark_table"),
             ("listing (S3: logs, maps, catalog tables)", "dbt.adapters.ducklake.spark.read.listing", "prepare"),
             ("first_read (data source table)", "dbt.adapters.ducklake.spark.read.first_read", "table_sql"),
             ("inlined rows", "dbt.adapters.ducklake.spark.read.scan", "_inlined_sql"),
             ("create_view (Spark analysis, listing)", "dbt.adapters.ducklake.spark.read.names", "create_view"))

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self._undo: list[Callable[[], None]] = []

    def __enter__(self) -> Phases:
        import importlib

        for label, module, attr in self.STEPS:
            owner: Any = importlib.import_module(module)
            if "." in attr:
                cls, attr = attr.split(".")
                owner = getattr(owner, cls)
            orig = owner.__dict__[attr] if isinstance(owner, type) else getattr(owner, attr)

            def wrapped(*a: Any, _orig: Any = orig, _label: str = label, **k: Any) -> Any:
                if threading.current_thread() is not threading.main_thread():
                    return _orig(*a, **k)  # a background manifest build (spark/read/first_read.py): not the plan's time
                t = time.perf_counter()
                try:
                    return _orig(*a, **k)
                finally:
                    self.seconds[_label] = self.seconds.get(_label, 0.0) + time.perf_counter() - t

            setattr(owner, attr, wrapped)
            self._undo.append(lambda owner=owner, attr=attr, orig=orig: setattr(owner, attr, orig))
        return self

    def __exit__(self, *exc: object) -> None:
        for undo in reversed(self._undo):
            undo()

    def rounded(self) -> dict[str, float]:
        return {k: round(v, 2) for k, v in self.seconds.items()}


def forget_process_caches(spark: Any) -> None:
    """As a new process sees the lake: no cached delete positions, no Spark tables over manifests (the manifest
    directories on disk stay: built by an earlier process)."""
    from dbt.adapters.ducklake.lake.read import file_checks
    from dbt.adapters.ducklake.spark.read import manifest

    file_checks.forget()  # every file is looked at again
    with manifest._lock:
        manifest._delete_cache.clear()
        manifest._delete_cache_rows = 0
        created = list(manifest._created)
        manifest._created.clear()
    for name in created:
        spark.sql(f"DROP TABLE IF EXISTS {name}")


def timed(fn: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    times, out = [], None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times), out


SESSION_CONF: dict[str, str] = {}


class S3Store:
    """Where the S3 figures are read from: an S3 server (moto's, or an endpoint given), a bucket per lake."""

    def __init__(self, server: Any) -> None:
        self.server = server

    def client(self) -> Any:
        import boto3

        return boto3.client("s3", endpoint_url=self.server.url, aws_access_key_id=self.server.key_id,
                            aws_secret_access_key=self.server.secret, region_name=self.server.region)

    def spark_conf(self) -> dict[str, str]:
        from dbt.adapters.ducklake.spark.env import s3a

        keys = self.server.profile_keys()
        return {**s3a.connector_conf({}, "local[2]"),
                **s3a.hadoop_conf(key_id=keys["s3_access_key_id"], secret=keys["s3_secret_access_key"],
                                  session_token=None, region=keys["s3_region"], endpoint=keys["s3_endpoint"],
                                  url_style=keys["s3_url_style"], use_ssl=keys["s3_use_ssl"])}

    def configure_driver(self) -> None:
        from dbt.adapters.ducklake.lake.storage import ObjectStoreConfig, configure_object_store

        s = self.server
        configure_object_store(ObjectStoreConfig(key_id=s.key_id, secret=s.secret, region=s.region,
                                                 endpoint=s.endpoint, url_style="path", use_ssl=False))

    def upload(self, root: str, n_files: int) -> str:
        """The local lake's data files uploaded to a new bucket, and a copy of its catalog whose data path is the
        bucket's (DuckDB stores the files' paths relative to it); the copy's path."""
        from concurrent.futures import ThreadPoolExecutor

        bucket = self.server.make_bucket(f"many-{n_files}-{uuid.uuid4().hex[:8]}")
        client = self.client()
        local = []
        for d, subs, names in os.walk(f"{root}/data"):
            subs[:] = [x for x in subs if x != SPARK_MANIFESTS]
            local += [os.path.join(d, n) for n in names]

        def put(path: str) -> None:
            client.upload_file(path, bucket, "data/" + os.path.relpath(path, f"{root}/data"))

        with ThreadPoolExecutor(16) as pool:
            list(pool.map(put, local))
        catalog = f"{root}/m_s3.ducklake"
        shutil.copyfile(f"{root}/m.ducklake", catalog)
        import duckdb

        con = duckdb.connect()
        try:
            con.execute(f"ATTACH '{catalog}' AS cat")
            con.execute(f"UPDATE cat.ducklake_metadata SET value = 's3://{bucket}/data/' WHERE key = 'data_path'")
            bad = con.execute("SELECT count(*) FROM cat.ducklake_data_file WHERE NOT path_is_relative").fetchone()[0]
            assert bad == 0, "the lake's files must be stored relative to its data path"
        finally:
            con.close()
        return catalog

    def request_ms(self, catalog: str, n: int = 200) -> float:
        """moto's (or the endpoint's) own cost of one request: a ranged GET of a data file's last 8 bytes, median."""
        lake = DuckLake.open(catalog)
        try:
            st = lake.snapshot()
            path = st.files(st.table("main", "events"))[0].path
        finally:
            lake.close()
        bucket, key = path[len("s3://"):].split("/", 1)
        client = self.client()
        times = []
        for _ in range(n):
            t = time.perf_counter()
            client.get_object(Bucket=bucket, Key=key, Range="bytes=-8")["Body"].read()
            times.append(time.perf_counter() - t)
        return statistics.median(times) * 1000


def run(n_files: int, repeat: int, workdir: str | None = None, method: str = "auto",
        skip: frozenset[str] = frozenset(), store: S3Store | None = None) -> dict[str, Any]:
    # with a workdir, lakes are kept there (lake<N>) and reused by later runs; their read manifests are removed first
    # so that planning starts cold
    root = os.path.join(workdir, f"lake{n_files}") if workdir else tempfile.mkdtemp(prefix=f"many-{n_files}-")
    try:
        t = time.perf_counter()
        catalog = f"{root}/m.ducklake"
        if not (workdir and os.path.exists(catalog)):
            shutil.rmtree(root, ignore_errors=True)
            os.makedirs(root)
            method = method if method != "auto" else ("per-insert" if n_files <= 10_000 else "multi")
            catalog = build_lake(root, n_files, method)
        shutil.rmtree(f"{root}/data/{SPARK_MANIFESTS}", ignore_errors=True)
        built = time.perf_counter() - t
        out: dict[str, Any] = {"files": n_files, "store": "s3" if store else "local", "build_s": round(built, 1),
                               **lake_shape(catalog)}
        spark = build_session("local[2]", "many-files", {"spark.sql.shuffle.partitions": "4", **SESSION_CONF})
        spark.sparkContext.setLogLevel("ERROR")
        spark.sql("SELECT count(*) FROM range(10)").collect()  # the JVM's first query is not planning's cost
        if store:
            t = time.perf_counter()
            catalog = store.upload(root, n_files)
            out["upload_s"] = round(time.perf_counter() - t, 1)
            store.configure_driver()
            out["s3_request_ms"] = round(store.request_ms(catalog), 2)  # a new bucket: no listing of it yet
        lake = DuckLake.open(catalog)
        # the first reader of the snapshot, as the adapter plans a statement (LakeNames): nothing cached in the
        # process, no manifest on disk; then a new process's first reader where an earlier one built the manifest
        def first_plan(key: str) -> LakeNames:
            """A fresh LakeNames' first refresh of the table, timed and split by phase into out[key + _s/_phases]."""
            names = LakeNames(spark, lake)
            with Phases() as ph:
                t = time.perf_counter()
                names.refresh([("main", "events")])
                out[f"{key}_s"] = time.perf_counter() - t
            out[f"{key}_phases"] = ph.rounded()
            return names

        first_plan("plan_adapter_cold")
        from dbt.adapters.ducklake.spark.read import first_read

        first_read.wait_for_builds()  # the manifest the first reader's statement started building in the background
        forget_process_caches(spark)
        lake.close()
        lake = DuckLake.open(catalog)
        names = first_plan("plan_adapter_cold_manifest_built")

        def plan() -> int:
            st = lake.snapshot()
            sql = table_sql(spark, st, st.table("main", "events"))
            spark.sql("CREATE DATABASE IF NOT EXISTS bench")
            spark.sql(f"CREATE OR REPLACE VIEW bench.events AS {sql}")
            return len(sql)

        # the lake check (ducklake_check_files): every file's size, and with footers each footer read
        from dbt.adapters.ducklake.lake.maintenance.check import check_files

        out["check_files_s"], _ = timed(lambda: check_files(lake), repeat)
        if not store:  # on S3 a GET per file: the footer check is a maintenance operation, not a read's cost
            out["check_files_footers_s"], _ = timed(lambda: check_files(lake, footers=True), repeat)
        try:
            out["plan_s"], out["view_sql_chars"] = timed(plan, 1)  # re-planned (the manifest exists)
            out["plan_warm_s"], _ = timed(plan, repeat)
        except Exception as e:  # noqa: BLE001 - the failure at this size is a figure too
            out["plan_error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"
            return out
        # as the adapter plans a statement (spark/read/names): the state and the view SQL cached while the table is
        # unchanged, at the same snapshot and after another writer's commit to an unrelated table
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
        paths = [file_uri(f.path) for f in st.files(st.table("main", "events"))]
        if "queries" not in skip:
            t = time.perf_counter()  # the list's check and listing (requests per file on S3): not in the queries'
            spark.read.parquet(*paths).createOrReplaceTempView("raw_events")
            out["parquet_plan_s"] = time.perf_counter() - t
        answers = {}
        print(json.dumps({"partial": out}), flush=True)
        for name, q in queries.items():
            if "queries" in skip or f"spark_{name}" in skip:
                continue
            try:
                out[f"{name}_view_s"], got = timed(lambda q=q: spark.sql(q.format(t="bench.events")).collect(), repeat)
                answers[name] = sorted(tuple(r) for r in got)
            except Exception as e:  # noqa: BLE001
                out[f"{name}_view_error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"
            out[f"{name}_parquet_s"], _ = timed(lambda q=q: spark.sql(q.format(t="raw_events")).collect(), repeat)
            print(json.dumps({"partial": {k: v for k, v in out.items() if k.startswith(name)}}), flush=True)
        # as dbt models get them: the statement through the adapter's query path (count(*) from the catalog,
        # files pruned by their statistics)
        from dbt.adapters.ducklake.spark.answer.read_pruning import pruned_reads

        def via_adapter(q: str) -> list[Any]:
            st = lake.snapshot()
            with pruned_reads(spark, st, q) as pq_:
                return spark.sql(pq_.sql).collect()

        for name in ("count", "filter"):
            if "adapter" in skip:
                break
            q = queries[name].format(t="main.events")  # the lake table, as a model names it
            out[f"{name}_adapter_s"], got = timed(lambda q=q: via_adapter(q), repeat)
            answers[f"{name}_adapter"] = sorted(tuple(r) for r in got)
        with (s3.attached(store.server, catalog, read_only=True) if store
              else reference.attached(catalog, read_only=True)) as con:
            for name, q in queries.items():
                if "duckdb" in skip:
                    break
                out[f"{name}_duckdb_s"], theirs = timed(
                    lambda q=q: con.execute(q.format(t="lake.main.events")).fetchall(), repeat)
                for key in (name, f"{name}_adapter"):  # answers must be DuckDB's (sums compared to 1e-9 relative)
                    if key in answers:
                        out[f"{key}_equal"] = _same(answers[key], sorted(tuple(r) for r in theirs))
        if store:  # this machine's listings of the bucket (never read again: each run has its own bucket)
            shutil.rmtree(os.path.dirname(listing.root(lake.snapshot().data_path, 0)), ignore_errors=True)
        lake.close()
        out["load_avg_1m_at_end"] = os.getloadavg()[0]
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
    ap.add_argument("--build", default="auto", choices=("auto", "per-insert", "multi"),
                    help="how a missing lake is built (auto: per-insert up to 10,000 files, multi above)")
    ap.add_argument("--skip", default="", help="comma-separated parts not measured: queries (Spark's), spark_<query> (one of "
                    "them: count, filter, aggregate), adapter, duckdb")
    ap.add_argument("--workdir", default=None, help="keep the built lakes here (lake<N>) and reuse them")
    ap.add_argument("--store", default="local", choices=("local", "s3"),
                    help="s3: each size on local disk, then the same lake on S3")
    ap.add_argument("--s3-endpoint", default=None, help="an S3 endpoint (host:port, path style, no TLS) instead of "
                    "moto's server started here; keys from AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY")
    args = ap.parse_args()
    results = []
    skip = frozenset(filter(None, args.skip.split(",")))
    with contextlib.ExitStack() as stack:
        store = None
        if args.store == "s3":
            if args.s3_endpoint:
                server = s3.S3Server(args.s3_endpoint, os.environ["AWS_ACCESS_KEY_ID"],
                                     os.environ["AWS_SECRET_ACCESS_KEY"], os.environ.get("AWS_REGION", "us-east-1"))
            else:
                server = stack.enter_context(s3.moto_server(os.path.join(tempfile.gettempdir(), "many-files-moto.log")))
            store = S3Store(server)
            SESSION_CONF.update(store.spark_conf())  # the one session of the run (local runs too) reaches S3
        for n in (int(x) for x in args.files.split(",")):
            for where in ([None, store] if store else [None]):
                # the S3 run reuses the lake the local run built (given a workdir; else it builds its own)
                r = run(n, args.repeat, args.workdir, args.build, skip, where)
                print(json.dumps(r), flush=True)
                results.append(r)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    os._exit(0)  # the SparkSession's JVM goes with the process


if __name__ == "__main__":
    main()
