"""Object-store faults on a lake on S3, through a fault-injecting proxy in front of moto (tests/support/s3_faults):
a missing bucket and wrong credentials give a short error naming them; throttling (503 SlowDown) on writes and reads
is retried and the run succeeds; a write that fails for good mid-model fails the model with a short error, the
catalog keeps its snapshots, and orphan deletion finds and deletes exactly what the failed write left.

Oracle: DuckDB (httpfs + ducklake) reads the lake's rows; the catalog's snapshots before and after each fault."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from dbt.adapters.ducklake.spark.env import s3a
from tests.support import s3
from tests.support.coverage import FULL
from tests.support.s3_faults import FaultProxy, fault_proxy

pytestmark = [pytest.mark.slow, pytest.mark.spark,
              pytest.mark.skipif(s3a.cached_jars() is None,
                                 reason="the s3a connector is not cached: run scripts/setup.sh")]

SEED = "id,name\n1,ada\n2,bob\n3,cy\n4,dee\n5,eve\n6,fay\n"
# a partitioned table: Spark writes it (a small unpartitioned result is collected and written by the driver), in four
# tasks run one after another on local[1], each writing a file per partition it holds: a write that fails after two
# files has left some behind
TABLE = """{{ config(materialized='table', partition_by=['grp']) }}
select /*+ REPARTITION(4) */ id * {{ var('factor') }} as id, upper(name) as name, id % 2 as grp
from {{ ref('people') }}"""
# a file a Spark task writes (before its commit renames it): s3a's first PUT of each part file
ATTEMPT_FILE = r"/_temporary/.*attempt_[^/]*/.*part-[^/]*\.parquet$"
MISSING_BUCKET = "no-such-bucket-ducklake"
WRONG_KEY_ID = "AKIAWRONGDUCKLAKEKEY"
# small s3a retry intervals so that throttling costs the tests seconds, not minutes; few attempts so that a write
# that fails for good fails quickly
FAST_RETRIES = {"spark.hadoop.fs.s3a.retry.interval": "50ms", "spark.hadoop.fs.s3a.retry.limit": "2",
                "spark.hadoop.fs.s3a.retry.throttle.interval": "50ms", "spark.hadoop.fs.s3a.retry.throttle.limit": "6",
                "spark.hadoop.fs.s3a.attempts.maximum": "1"}


def _target(name: str, server: s3.S3Server, catalog: str, data_path: str, key_id: str | None = None) -> str:
    keys = {**server.profile_keys(), **({"s3_access_key_id": key_id} if key_id else {})}
    conf = {"spark.sql.shuffle.partitions": "2", **FAST_RETRIES}
    return (f"    {name}:\n      type: ducklake\n      master: 'local[1]'\n      threads: 1\n"
            f"      catalog: '{catalog}'\n      data_path: '{data_path}'\n      spark_config:\n"
            + "".join(f"        {k}: '{v}'\n" for k, v in conf.items())
            + "".join(f"      {k}: {v!r}\n" if isinstance(v, str) else f"      {k}: {str(v).lower()}\n"
                      for k, v in keys.items()))


def _project(root: Path, server: s3.S3Server, bucket: str) -> Path:
    (root / "models").mkdir(parents=True)
    (root / "seeds").mkdir()
    (root / "dbt_project.yml").write_text("name: s3faults\nversion: '1.0'\nprofile: s3faults\nconfig-version: 2\n"
                                          "vars:\n  factor: 1\n")
    (root / "seeds" / "people.csv").write_text(SEED)
    (root / "models" / "people_table.sql").write_text(TABLE)
    catalog = f"sqlite:///{root}/metadata.sqlite"
    (root / "profiles.yml").write_text(
        "s3faults:\n  target: dev\n  outputs:\n"
        + _target("dev", server, catalog, f"s3://{bucket}/lake/")
        + _target("wrong_key", server, catalog, f"s3://{bucket}/lake/", key_id=WRONG_KEY_ID)
        + _target("no_bucket", server, f"sqlite:///{root}/other.sqlite", f"s3://{MISSING_BUCKET}/lake/"))
    return root


def _dbt(project: Path, *args: str, ok: bool = True) -> str:
    env = {**os.environ, "DBT_PROFILES_DIR": str(project), "PYSPARK_PYTHON": sys.executable}
    for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):  # the profile's keys only
        env.pop(k, None)
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-c", "from dbt.cli.main import cli; cli()", *args, "--project-dir",
                           str(project)], cwd=project, env=env, stdin=subprocess.DEVNULL, capture_output=True,
                          text=True, timeout=300)
    out = proc.stdout + proc.stderr
    print(f"dbt {' '.join(args)}: {time.monotonic() - started:.1f}s")
    assert (proc.returncode == 0) == ok, f"dbt {' '.join(args)} exited with {proc.returncode}:\n{out}"
    return out


def _short(out: str) -> None:
    """The error dbt printed is short: no JVM stack, no Python traceback."""
    assert "\tat org.apache" not in out and "at software.amazon" not in out, out
    assert "Traceback (most recent call last)" not in out, out
    assert len(out.splitlines()) < 60, out


def _state(proxy: FaultProxy, catalog: str) -> tuple[list[tuple], list[tuple]]:
    """(the catalog's snapshots, people_table's rows) as DuckDB reads them (directly from the server)."""
    with s3.attached(proxy.upstream, catalog, read_only=True) as con:
        snapshots = [tuple(r) for r in con.execute("SELECT snapshot_id, schema_version, changes "
                                                   "FROM lake.snapshots() ORDER BY ALL").fetchall()]
        rows = [tuple(r) for r in con.execute("SELECT * FROM lake.main.people_table ORDER BY ALL").fetchall()]
    return snapshots, rows


def _tables(catalog: str) -> list[tuple]:
    """The tables a catalog holds (none: it holds no lake)."""
    import sqlite3

    con = sqlite3.connect(catalog[len("sqlite:///"):])
    try:
        if not con.execute("SELECT 1 FROM sqlite_master WHERE name = 'ducklake_table'").fetchall():
            return []
        return con.execute("SELECT table_name FROM ducklake_table").fetchall()
    finally:
        con.close()


def _listing(server: s3.S3Server, bucket: str) -> set[str]:
    """Every object of the bucket (s3:// paths), listed by DuckDB."""
    con = s3.connect(server)
    try:
        return {r[0] for r in con.execute(f"SELECT file FROM glob('s3://{bucket}/**')").fetchall()}
    finally:
        con.close()


@pytest.fixture
def proxy(s3_server: s3.S3Server) -> Iterator[FaultProxy]:
    with fault_proxy(s3_server) as p:
        yield p


def _expected(factor: int) -> list[tuple]:
    return sorted((int(i) * factor, n.upper(), int(i) % 2) for i, n in (line.split(",") for line in SEED.splitlines()[1:]))


def _orphans(proxy: FaultProxy, catalog: str) -> list[str]:
    """What orphan deletion would delete now (a dry run in this process, reaching the server directly)."""
    from dbt.adapters.ducklake.lake.lake import DuckLake
    from dbt.adapters.ducklake.lake.maintenance.cleanup import delete_orphaned_files
    from dbt.adapters.ducklake.lake.storage import ObjectStoreConfig, configure_object_store

    up = proxy.upstream
    configure_object_store(ObjectStoreConfig(key_id=up.key_id, secret=up.secret, region=up.region,
                                             endpoint=up.endpoint, url_style="path", use_ssl=False))
    return delete_orphaned_files(DuckLake.open(catalog), all=True, dry_run=True)


def test_faults_on_a_lake_on_s3(tmp_path: Path, proxy: FaultProxy) -> None:
    bucket = proxy.upstream.make_bucket()
    project = _project(tmp_path / "p", proxy.server, bucket)
    catalog = f"sqlite:///{project}/metadata.sqlite"

    # a missing bucket: a short error naming it, from dbt debug, and (in the full suite: its Spark start costs a
    # dbt process more) before a run does anything
    for command in ("debug", "run") if FULL else ("debug",):
        out = _dbt(project, command, "--target", "no_bucket", ok=False)
        _short(out)
        assert f"the bucket {MISSING_BUCKET!r} does not exist" in out, out
    assert not (project / "other.sqlite").exists() or not _tables(f"sqlite:///{project}/other.sqlite")

    # throttled (503 SlowDown) on Spark's writes of part files, the driver's footer reads of them and its moves of
    # them into the table: each retries, the build succeeds
    throttled = [proxy.add("slowdown", methods={"PUT"}, path=ATTEMPT_FILE, times=3),
                 proxy.add("slowdown", methods={"GET"}, path=r"/ducklake-write-[^/]+/.*part-", times=2),
                 proxy.add("slowdown", methods={"PUT"}, path=r"/people_table/.*ducklake-[^/]+\.parquet$", times=2)]
    _dbt(project, "build")
    assert [r.faulted for r in throttled] == [3, 2, 2]
    proxy.clear()
    before = _state(proxy, catalog)
    assert before[1] == _expected(1)

    # wrong credentials: a short error naming them; the lake as it was
    proxy.add("forbidden", key_id=WRONG_KEY_ID, times=None)
    out = _dbt(project, "run", "--target", "wrong_key", "--vars", "factor: 2", ok=False)
    _short(out)
    assert "refused the credentials" in out and WRONG_KEY_ID in out, out
    proxy.clear()
    assert _state(proxy, catalog) == before

    # the object store fails for good once two of the model's four part files are written: from then on every
    # write and delete under the table fails (a lost network), so the failed write cannot clean up after itself
    listed = _listing(proxy.upstream, bucket)
    # (bulk deletes are POSTs to the bucket itself, naming the keys in the body)
    proxy.add("error", methods={"PUT", "POST", "DELETE"}, path=r"/people_table/|^/[^/]+/?$", after=ATTEMPT_FILE,
              skip=2, times=None)
    out = _dbt(project, "run", "--vars", "factor: 2", ok=False)
    _short(out)
    assert "people_table" in out, out
    proxy.clear()
    assert _state(proxy, catalog) == before
    left = _listing(proxy.upstream, bucket) - listed
    assert left, "the failed write left nothing: the fault came too late"
    # Spark's files are in the writer's staging directory, which orphan deletion removes whole
    expected = {re.sub(r"(/ducklake-write-[^/]+)/.*", r"\1", p) for p in left}
    assert set(_orphans(proxy, catalog)) == expected
    out = _dbt(project, "run-operation", "ducklake_delete_orphaned_files", "--args", "{all: true}")
    assert f"deleted {len(expected)} files" in out, out
    assert _listing(proxy.upstream, bucket) == listed
    assert _state(proxy, catalog) == before

    if FULL:  # a rerun succeeds, through connections dropped mid-request on Spark's and the driver's writes
        dropped = [proxy.add("reset", methods={"PUT"}, path=ATTEMPT_FILE, times=2),
                   proxy.add("reset", methods={"PUT"}, path=r"/people_table/.*ducklake-[^/]+\.parquet$", times=1)]
        _dbt(project, "run", "--vars", "factor: 2")
        assert [r.faulted for r in dropped] == [2, 1]
        proxy.clear()
        after = _state(proxy, catalog)
        assert after[1] == _expected(2)
        assert after[0][:len(before[0])] == before[0]
        assert _orphans(proxy, catalog) == []
