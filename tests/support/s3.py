"""A local S3 for tests: moto's server on 127.0.0.1 (path-style addressing, no TLS), and DuckDB with httpfs and an
S3 secret for it, so that the reference reads and writes the same buckets as the adapter."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import duckdb

from tests.support import reference

# moto accepts any key pair; these are recognisable in a leak check
ACCESS_KEY_ID = "AKIADUCKLAKETESTKEY0"
SECRET_ACCESS_KEY = "s3cr3t-Duck1ake-n0t-to-be-sh0wn"
REGION = "us-east-1"


@dataclass(frozen=True)
class S3Server:
    """A running S3-compatible server."""

    endpoint: str  # host:port (what DuckDB's ENDPOINT and the profile's s3_endpoint take)
    key_id: str = ACCESS_KEY_ID
    secret: str = SECRET_ACCESS_KEY
    region: str = REGION

    @property
    def url(self) -> str:
        return f"http://{self.endpoint}"

    def make_bucket(self, name: str | None = None) -> str:
        """A new empty bucket; its name."""
        bucket = name or f"lake-{uuid.uuid4().hex[:12]}"
        req = urllib.request.Request(f"{self.url}/{bucket}", method="PUT")
        with urllib.request.urlopen(req, timeout=10):
            pass
        return bucket

    def keys(self, bucket: str) -> list[str]:
        """Every key of the bucket as the server holds it (directory markers too, which pyarrow lists as folders)."""
        import botocore.session

        client = botocore.session.get_session().create_client(
            "s3", region_name=self.region, endpoint_url=self.url, aws_access_key_id=self.key_id,
            aws_secret_access_key=self.secret)
        return sorted(o["Key"] for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket)
                      for o in page.get("Contents", []))

    def profile_keys(self) -> dict[str, object]:
        """The ducklake profile keys that reach this server."""
        return {"s3_access_key_id": self.key_id, "s3_secret_access_key": self.secret, "s3_region": self.region,
                "s3_endpoint": self.endpoint, "s3_url_style": "path", "s3_use_ssl": False}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def moto_server(log_path: str) -> Iterator[S3Server]:
    """moto's S3 server on 127.0.0.1 at a free port, stopped on exit (its output in log_path)."""
    port = _free_port()
    env = {**os.environ, "MOTO_S3_CUSTOM_ENDPOINTS": f"http://127.0.0.1:{port}"}
    with open(log_path, "ab") as log:
        proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                                stdout=log, stderr=log, stdin=subprocess.DEVNULL, env=env)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=2):
                    break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"moto's server did not start (see {log_path})") from None
                time.sleep(0.2)
        yield S3Server(f"127.0.0.1:{port}")
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def httpfs_path() -> str:
    """The httpfs extension shipped in the duckdb-extension-httpfs wheel."""
    import duckdb_extension_httpfs

    return os.path.join(os.path.dirname(duckdb_extension_httpfs.__file__), "extensions", f"v{duckdb.__version__}",
                        "httpfs.duckdb_extension")


def connect(server: S3Server) -> duckdb.DuckDBPyConnection:
    """The reference DuckDB (ducklake, sqlite, postgres) with httpfs loaded and an S3 secret for the server."""
    con = reference.connect()
    con.execute(f"LOAD '{httpfs_path()}'")
    con.execute(f"""CREATE SECRET s3_test (TYPE s3, KEY_ID '{server.key_id}', SECRET '{server.secret}',
                    REGION '{server.region}', ENDPOINT '{server.endpoint}', URL_STYLE 'path', USE_SSL false)""")
    return con


@contextmanager
def attached(server: S3Server, catalog: str, alias: str = "lake", **kw: object) -> Iterator[duckdb.DuckDBPyConnection]:
    """A fresh reference DuckDB reaching the server, with the lake attached; closed on exit."""
    con = connect(server)
    try:
        con.execute(reference.attach_sql(catalog, alias, **kw))  # type: ignore[arg-type]
        yield con
    finally:
        con.close()


def profile_yaml(name: str, server: S3Server, catalog: str, data_path: str, *, extra: str = "",
                 targets: dict[str, str] | None = None, schema: str = "main") -> str:
    """profiles.yml for a lake on the server: target `dev` (in `schema`), plus one output per `targets` entry
    (name -> schema) that differs from dev only in its schema; `extra` is appended to every output (indented YAML
    lines, without a schema: a second one would override the target's)."""
    keys = "".join(f"      {k}: {v!r}\n" if isinstance(v, str) else f"      {k}: {str(v).lower()}\n"
                   for k, v in server.profile_keys().items())
    body = (f"      type: ducklake\n      master: 'local[1]'\n      threads: 1\n      catalog: '{catalog}'\n"
            f"      data_path: '{data_path}'\n      spark_config:\n        spark.sql.shuffle.partitions: '2'\n"
            + keys + extra)
    outputs = "".join(f"    {target}:\n      schema: {other}\n{body}" for target, other in (targets or {}).items())
    return f"{name}:\n  target: dev\n  outputs:\n    dev:\n      schema: {schema}\n{body}{outputs}"


def run_dbt(project: str | os.PathLike[str], *args: str, ok: bool = True,
            env_extra: dict[str, str] | None = None) -> str:
    """One dbt command in its own process (its own Spark driver), with only the profile's S3 keys; its output."""
    env = {**os.environ, "DBT_PROFILES_DIR": str(project), "PYSPARK_PYTHON": sys.executable, **(env_extra or {})}
    for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):  # the profile's keys only
        env.pop(k, None)
    proc = subprocess.run([sys.executable, "-c", "from dbt.cli.main import cli; cli()", *args, "--project-dir",
                           str(project)], cwd=project, env=env, stdin=subprocess.DEVNULL, capture_output=True,
                          text=True, timeout=600)
    out = proc.stdout + proc.stderr
    assert (proc.returncode == 0) == ok, f"dbt {' '.join(args)} exited with {proc.returncode}:\n{out[-20000:]}"
    return out


def latest_snapshot(con: object) -> int:
    """The lake's (attached as `lake`) latest snapshot id."""
    return int(con.execute("SELECT max(snapshot_id) FROM lake.snapshots()").fetchone()[0])  # type: ignore[attr-defined]


def rows_at(con: object, table: str, snapshot: int, columns: str = "*") -> list[tuple] | None:
    """A table's rows (qualified name) at the snapshot as DuckDB reads them, sorted (None: no such table then)."""
    try:
        got = con.execute(f"SELECT {columns} FROM {table} AT (VERSION => {snapshot}) ORDER BY ALL")  # type: ignore[attr-defined]
    except Exception as e:  # noqa: BLE001 - DuckDB's catalog error for a table that did not exist (yet)
        if "does not exist" in str(e) or "not found" in str(e).lower():
            return None
        raise
    return [tuple(r) for r in got.fetchall()]
