"""A Spark cluster of separate hosts on this machine (tests/support/hosts.py) that share nothing but the catalog
server and the object store: an S3 host (moto's server), a catalog host (PostgreSQL), a Spark standalone master, two
workers (one core each), a client host that runs dbt, a host where DuckDB reads the lake, and, on demand, a Spark
Connect server host.

Every Spark process gets its temporary files, local dirs and work dir in its host's own folder; the s3a connector's
jars are the cluster's own (each host's class path, from the machine's jar cache: installed software, as a cluster
image would carry it), so no executor downloads them from the driver.

Run as `python -m tests.support.cluster_rig duckdb <catalog> <endpoint> <script>` on the DuckDB host: it attaches the
lake, runs the script's statements (JSON list) and prints their rows as one JSON document.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dbt.adapters.ducklake.spark.env import s3a
from tests.support import postgres
from tests.support.hosts import Host, HostError, Network
from tests.support.spark_cluster import FAST_JVM_OPTIONS, spark_home

REPO_ROOT = Path(__file__).resolve().parents[2]
S3_PORT, PG_PORT, MASTER_PORT, CONNECT_PORT = 9000, 5432, 7077, 15002
KEY_ID, SECRET, REGION = "AKIADUCKLAKERIGKEY00", "rig-s3cr3t-n0t-to-be-sh0wn", "us-east-1"
BUCKET = "lake"
WORKERS = ("worker1", "worker2")
# short timeouts, so that a lost executor or worker is noticed within seconds, not Spark's default two minutes
NETWORK_CONF = {"spark.network.timeout": "20s", "spark.executor.heartbeatInterval": "2s",
                "spark.network.timeoutInterval": "5s"}


def _wait(what: str, deadline: float, check: Callable[[], bool], logs: Callable[[], str]) -> None:
    while not check():
        if time.monotonic() > deadline:
            raise HostError(f"timed out waiting for {what}\n{logs()}")
        time.sleep(0.3)


@dataclass
class Rig:
    """The running hosts and what reaches their services."""

    net: Network
    hosts: dict[str, Host] = field(default_factory=dict)
    connect_url: str = ""

    def __getitem__(self, name: str) -> Host:
        return self.hosts[name]

    @property
    def master_url(self) -> str:
        return f"spark://{self['master'].ip}:{MASTER_PORT}"

    @property
    def s3_endpoint(self) -> str:
        return f"{self['s3'].ip}:{S3_PORT}"

    def catalog(self, database: str = "lake") -> str:
        return f"postgresql://postgres@{self['catalog'].ip}:{PG_PORT}/{database}"

    def logs(self, lines: int = 40) -> str:
        """The tails of every host's service logs and of each executor's stderr (in a worker's private folder, read
        on that host: it is gone with the rig)."""
        parts = [h.logs(lines) for h in self.hosts.values()]
        for name in WORKERS:
            host = self.hosts.get(name)
            if host is None:
                continue
            for path in host.files("work"):
                if path.endswith("/stderr"):
                    text = host.run(["tail", "-n", str(lines), str(host.home / "work" / path)], check=False).stdout
                    parts.append(f"--- {name}: executor {path} (last {lines} lines) ---\n{text}")
        return "\n".join(parts)

    # -- services -------------------------------------------------------------------------------------------------

    def _spark_env(self, host: Host, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        host.run(["mkdir", "-p", str(host.home / "conf"), str(host.home / "work")])
        return {"SPARK_HOME": spark_home(), "SPARK_CONF_DIR": str(host.home / "conf"),
                "SPARK_DAEMON_MEMORY": "256m", "PYSPARK_PYTHON": sys.executable,
                "SPARK_DAEMON_JAVA_OPTS": f"{FAST_JVM_OPTIONS} -Djava.io.tmpdir={host.home / 'tmp'}",
                **(extra or {})}

    def _spark_class(self, host: Host, name: str, args: list[str], env: Mapping[str, str] | None = None) -> None:
        host.popen(name, [os.path.join(spark_home(), "bin", "spark-class"), *args], env=self._spark_env(host, env))

    def start_s3(self) -> None:
        host = self['s3']
        endpoint = f"http://{host.ip}:{S3_PORT}"
        host.popen("moto", [sys.executable, "-m", "moto.server", "-H", host.ip, "-p", str(S3_PORT)],
                   env={"MOTO_S3_CUSTOM_ENDPOINTS": endpoint})

        def up() -> bool:
            return host.run([sys.executable, "-c", f"import urllib.request as u; u.urlopen('{endpoint}/', timeout=2)"],
                            check=False).returncode == 0

        _wait("the S3 server", time.monotonic() + 60, up, self.logs)
        host.run([sys.executable, "-c", "import urllib.request as u; "
                  f"u.urlopen(u.Request('{endpoint}/{BUCKET}', method='PUT'), timeout=10)"])

    def start_catalog(self) -> None:
        """PostgreSQL on the catalog host (as the `postgres` OS user: it refuses root), reachable from the subnet."""
        host = self['catalog']
        bindir, run_as = postgres.find_bindir(), postgres.run_as_prefix()
        data = host.home / "pgdata"
        host.run(["sh", "-c", f"mkdir -p '{data}' && chown postgres '{host.home}' '{data}'"])
        host.run([*run_as, os.path.join(bindir, "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust",
                  "-E", "UTF8", "--no-locale", "--no-sync"])
        host.run(["sh", "-c", f"echo 'host all all 0.0.0.0/0 trust' >> '{data}/pg_hba.conf'"])
        self.start_catalog_server()
        self.create_database("lake")

    def start_catalog_server(self) -> None:
        """Start the catalog server on its existing data (first start included)."""
        host = self['catalog']
        bindir, run_as = postgres.find_bindir(), postgres.run_as_prefix()
        host.run([*run_as, os.path.join(bindir, "pg_ctl"), "-D", str(host.home / "pgdata"), "-l",
                  str(host.home / "pg.log"), "-w", "-t", "60", "-o",
                  f"-h {host.ip} -p {PG_PORT} -k {host.home} -c fsync=off -c max_connections=200", "start"])

    def create_database(self, name: str) -> None:
        """A new empty database on the catalog server (a lake of its own)."""
        host = self['catalog']
        host.run([*postgres.run_as_prefix(), os.path.join(postgres.find_bindir(), "psql"), "-h", host.ip, "-U",
                  "postgres", "-c", f"CREATE DATABASE {name}"])

    def wait_catalog(self, timeout: float = 60) -> None:
        host = self['catalog']
        ready = [os.path.join(postgres.find_bindir(), "pg_isready"), "-h", host.ip, "-p", str(PG_PORT)]
        _wait("the catalog server", time.monotonic() + timeout, lambda: host.run(ready, check=False).returncode == 0,
              self.logs)

    def stop_catalog(self) -> None:
        """Stop the catalog server (every connection to it is cut)."""
        host = self['catalog']
        bindir, run_as = postgres.find_bindir(), postgres.run_as_prefix()
        host.run([*run_as, os.path.join(bindir, "pg_ctl"), "-D", str(host.home / "pgdata"), "-m", "fast", "-w",
                  "stop"])

    def restart_catalog(self) -> None:
        """Restart the catalog server (every connection to it is cut)."""
        self.stop_catalog()
        self.start_catalog_server()

    def start_spark(self) -> None:
        master = self['master']
        self._spark_class(master, "master", ["org.apache.spark.deploy.master.Master", "--host", master.ip,
                                             "--port", str(MASTER_PORT), "--webui-port", "8080"],
                          env={"SPARK_MASTER_OPTS": "-Dspark.worker.timeout=10"})
        for name in WORKERS:
            self.start_worker(name)
        self.wait_workers(len(WORKERS))

    def start_worker(self, name: str) -> None:
        host = self[name]
        self._spark_class(host, "worker", ["org.apache.spark.deploy.worker.Worker", self.master_url, "--host", host.ip,
                                           "--cores", "1", "--memory", "1g", "--webui-port", "8081",
                                           "--work-dir", str(host.home / "work")])

    def master_state(self) -> dict[str, Any]:
        """The master's JSON status, asked from the client host."""
        out = self['client'].run([sys.executable, "-c", "import urllib.request as u, sys; sys.stdout.write(u.urlopen("
                                  f"'http://{self['master'].ip}:8080/json/', timeout=20).read().decode())"],
                                 check=False)
        return json.loads(out.stdout) if out.returncode == 0 and out.stdout else {}

    def wait_workers(self, n: int, timeout: float = 120, *, exactly: bool = False) -> None:
        """Until the master counts n alive workers (at least n, or exactly n: a lost one no longer counted)."""
        def counted() -> bool:
            alive = self.master_state().get("aliveworkers")  # {} while the master does not answer (a loaded host)
            return alive is not None and (alive == n if exactly else alive >= n)

        _wait(f"{n} alive workers", time.monotonic() + timeout, counted, self.logs)

    def start_connect(self) -> str:
        """A Spark Connect server on its own host, its driver on the cluster; its sc:// URL."""
        if self.connect_url:
            return self.connect_url
        host = self['connect']
        conf = {**self.spark_conf(host), **{f"spark.hadoop.{k}": v for k, v in self.s3a_settings().items()}}
        args = [os.path.join(spark_home(), "bin", "spark-submit"), "--class",
                "org.apache.spark.sql.connect.service.SparkConnectServer", "--name", "rig-connect",
                "--master", self.master_url, "--driver-memory", "768m",
                "--driver-class-path", os.pathsep.join(s3a.cached_jars() or [])]
        conf["spark.connect.grpc.binding.address"] = host.ip
        conf["spark.connect.grpc.binding.port"] = str(CONNECT_PORT)
        for k, v in conf.items():
            args += ["--conf", f"{k}={v}"]
        # spark-submit sizes the Connect server's driver (a daemon, as the Thrift server) by SPARK_DAEMON_MEMORY
        host.popen("connect", args, env=self._spark_env(host, {"SPARK_DAEMON_MEMORY": "768m"}))
        # ready once its port answers (from the client host): with the AWS SDK bundle first on the class path,
        # slf4j binds no logger and the server logs nothing
        probe = [sys.executable, "-c", f"import socket; socket.create_connection(('{host.ip}', {CONNECT_PORT}), 2)"]
        _wait("the Spark Connect server", time.monotonic() + 180,
              lambda: self['client'].run(probe, check=False).returncode == 0, self.logs)
        self.connect_url = f"sc://{host.ip}:{CONNECT_PORT}"
        return self.connect_url

    # -- what the driver and DuckDB need ---------------------------------------------------------------------------

    def s3a_settings(self) -> dict[str, str]:
        return {"fs.s3a.endpoint": f"http://{self.s3_endpoint}", "fs.s3a.path.style.access": "true",
                "fs.s3a.connection.ssl.enabled": "false", "fs.s3a.access.key": KEY_ID,
                "fs.s3a.secret.key": SECRET, "fs.s3a.endpoint.region": REGION}

    def spark_conf(self, driver: Host) -> dict[str, str]:
        """The Spark settings of a driver on `driver`: reachable from the executors at its address, two one-core
        executors, the connector from each host's own class path."""
        jars = os.pathsep.join(s3a.cached_jars() or [])
        return {"spark.driver.host": driver.ip, "spark.driver.bindAddress": driver.ip,
                "spark.executor.cores": "1", "spark.executor.memory": "512m", "spark.cores.max": "2",
                "spark.executor.extraClassPath": jars,
                "spark.driver.extraJavaOptions": f"{FAST_JVM_OPTIONS} -Djava.io.tmpdir={driver.home / 'tmp'}",
                "spark.executor.extraJavaOptions": FAST_JVM_OPTIONS,
                "spark.sql.shuffle.partitions": "4", "spark.ui.enabled": "false"}

    def profile(self, name: str, *, data_path: str, master: str | None = None, threads: int = 2,
                catalog: str | None = None, keys: bool = True, short_timeouts: bool = False) -> str:
        """profiles.yml for dbt on the client host; short_timeouts: an executor that stops answering is given up in
        20 s, not Spark's default 120 s (under load, the short ones can give up on busy executors too)."""
        client = self['client']
        lines = [f"{name}:", "  target: dev", "  outputs:", "    dev:", "      type: ducklake",
                 f"      master: '{master or self.master_url}'", f"      threads: {threads}", "      schema: main",
                 f"      catalog: '{catalog or self.catalog()}'", f"      data_path: '{data_path}'",
                 f"      s3_endpoint: '{self.s3_endpoint}'", "      s3_url_style: path", "      s3_use_ssl: false",
                 f"      s3_region: {REGION}"]
        if keys:
            lines += [f"      s3_access_key_id: {KEY_ID}", f"      s3_secret_access_key: {SECRET}"]
        if master is None or not master.startswith("sc://"):
            lines.append("      spark_config:")
            conf = {**self.spark_conf(client), **(NETWORK_CONF if short_timeouts else {})}
            lines += [f"        {k}: '{v}'" for k, v in conf.items()]
        return "\n".join(lines) + "\n"

    def duckdb(self, catalog: str, statements: list[str], data_path: str = "") -> list[list[list[Any]]]:
        """Statements run by DuckDB 1.5.5 on the DuckDB host against the lake (attached as `lake`, with data_path
        when it is new); their rows."""
        out = self['duckdb'].run([sys.executable, "-m", "tests.support.cluster_rig", "duckdb", catalog,
                                  self.s3_endpoint, data_path], input=json.dumps(statements), cwd=str(REPO_ROOT))
        return json.loads(out.stdout.splitlines()[-1])

    def lakecheck(self, catalog: str) -> list[str]:
        """The catalog invariants (tests/support/invariants.py) checked from the DuckDB host."""
        out = self['duckdb'].run([sys.executable, "-m", "tests.support.cluster_rig", "invariants", catalog,
                                  self.s3_endpoint], cwd=str(REPO_ROOT))
        return json.loads(out.stdout.splitlines()[-1])

    def store_keys(self, prefix: str = "") -> list[str]:
        """Every object key in the bucket under prefix (listed from the client host)."""
        code = ("import boto3, json, sys\n"
                f"c = boto3.client('s3', endpoint_url='http://{self.s3_endpoint}', aws_access_key_id='{KEY_ID}', "
                f"aws_secret_access_key='{SECRET}', region_name='{REGION}')\n"
                "keys = []\n"
                f"for page in c.get_paginator('list_objects_v2').paginate(Bucket='{BUCKET}', Prefix='{prefix}'):\n"
                "    keys += [o['Key'] for o in page.get('Contents', [])]\n"
                "sys.stdout.write(json.dumps(keys))\n")
        return json.loads(self['client'].run([sys.executable, "-c", code]).stdout)


HOSTS = ("s3", "catalog", "master", *WORKERS, "client", "duckdb", "connect")


@contextmanager
def cluster_rig(root: Path, log_dir: Path) -> Iterator[Rig]:
    """Every host up and its service running (the Connect server on demand); all of it gone on exit."""
    net = Network(root, log_dir)
    rig = Rig(net)
    try:
        net.start()
        for name in HOSTS:
            rig.hosts[name] = net.add(name, {"DBT_DUCKLAKE_JARS": s3a.jars_dir()})
        rig.start_s3()
        rig.start_catalog()
        rig.start_spark()
        yield rig
    finally:
        net.stop()


def _duckdb_main(catalog: str, endpoint: str, data_path: str = "") -> None:
    from tests.support import reference, s3

    statements = json.loads(sys.stdin.read())
    con = s3.connect(s3.S3Server(endpoint, KEY_ID, SECRET, REGION))
    con.execute(reference.attach_sql(catalog, "lake", data_path=data_path or None))
    results = []
    for sql in statements:
        cur = con.execute(sql)
        results.append([list(r) for r in cur.fetchall()] if cur.description else [])
    print(json.dumps(results, default=str))


def _invariants_main(catalog: str, endpoint: str, _data_path: str = "") -> None:
    from tests.support.invariants import violations

    os.environ.update({"AWS_ACCESS_KEY_ID": KEY_ID, "AWS_SECRET_ACCESS_KEY": SECRET, "AWS_REGION": REGION,
                       "AWS_ENDPOINT_URL": f"http://{endpoint}"})
    print(json.dumps(violations(catalog)))


if __name__ == "__main__":
    if len(sys.argv) not in (4, 5) or sys.argv[1] not in ("duckdb", "invariants"):
        raise SystemExit("usage: python -m tests.support.cluster_rig duckdb|invariants CATALOG S3_ENDPOINT [DATA_PATH]")
    (_duckdb_main if sys.argv[1] == "duckdb" else _invariants_main)(*sys.argv[2:])
