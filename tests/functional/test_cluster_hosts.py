"""dbt on a Spark cluster whose hosts share nothing but the object store and the catalog (tests/support/cluster_rig.py):
the sample project (jaffle_shop's size: seeds, staging views, marts, a Python model, an incremental model, a change-feed
incremental merge, a dbt snapshot, data tests) plus a model paced to run for seconds on both executors, built twice
on the cluster with DuckDB changing a source in between, and the faults a cluster has.

Every table is compared with what DuckDB 1.5.5 computes from the same lake (on its own host, reading S3 and the
PostgreSQL catalog), the catalog with the reference's invariants, and DuckDB's orphan dry run with what the store holds.

No host reads another's disk by construction: each host mounts a private tmpfs over the rig's folder (its working
directory, TMPDIR, Spark's local and work dirs are in it), the lake's data path is on S3, and the test checks that no
host's folder holds a Parquet file after the builds (Spark's staging is on S3 too).
"""

from __future__ import annotations

import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dbt.adapters.ducklake.spark.env import s3a
from tests.support.cluster_rig import KEY_ID, SECRET, WORKERS, Rig, cluster_rig
from tests.support.coverage import FULL, full_only

REPO_ROOT = Path(__file__).resolve().parents[2]
pytestmark = [
    pytest.mark.slow, pytest.mark.spark, pytest.mark.postgres,
    pytest.mark.skipif(s3a.cached_jars() is None, reason="the s3a connector is not cached: run setup.sh"),
    pytest.mark.skipif(shutil.which("unshare") is None or shutil.which("nsenter") is None or
                       (hasattr(__import__("os"), "geteuid") and __import__("os").geteuid() != 0),
                       reason="the cluster's hosts need root, unshare and nsenter (network and mount namespaces)"),
]

# paced: each of 8 tasks sleeps 0.5 s per row (60 orders: ~4 s a task, ~16 s on two one-core executors), so that a
# worker can be killed or cut off while its tasks run
PACED = """{{ config(materialized='table') }}
select order_id, customer_id, ordered_at, status, amount
from (select /*+ REPARTITION(8) */ * from {{ ref('stg_orders') }})
where java_method('java.lang.Thread', 'sleep', cast(500 as bigint)) is not null
"""
# DuckDB changes raw_customers between the builds: each statement its own snapshot
# (customer 2's orders move to the new customer 99 before 2 goes: the relationships test holds)
UPSTREAM = ["UPDATE lake.main.raw_customers SET country = 'be' WHERE id = 1",
            "UPDATE lake.main.raw_customers SET country = 'de' WHERE id = 1",
            "INSERT INTO lake.main.raw_customers VALUES (99, 'Zoe Quinn', 'fr')",
            "UPDATE lake.main.raw_orders SET customer_id = 99 WHERE customer_id = 2",
            "DELETE FROM lake.main.raw_customers WHERE id = 2"]
BUILD = ("--exclude", "resource_type:seed")  # the seeds are the project's sources: loaded once, then DuckDB's
ORDERS = "select id, customer_id, ordered_at, status, amount from lake.main.raw_orders"
# each table as DuckDB computes it from the sources at the lake's latest snapshot (model -> (its columns, the SQL))
EXPECTED = {
    "customers": ("customer_id, name, country, orders, revenue, first_order_at", """
        select c.id, c.name, upper(c.country), count(o.id),
               coalesce(sum(case when o.status <> 'returned' then o.amount end), 0), min(o.ordered_at)
        from lake.main.raw_customers c left join lake.main.raw_orders o on o.customer_id = c.id group by all"""),
    "orders_by_month": ("order_id, customer_id, ordered_at, status, amount", ORDERS),
    "orders_paced": ("order_id, customer_id, ordered_at, status, amount", ORDERS),
    # append-only: an order keeps the customer it had when appended
    "order_log": ("order_id, ordered_at, amount", "select id, ordered_at, amount from lake.main.raw_orders"),
    "customer_directory": ("id, name, country", "select id, name, upper(country) from lake.main.raw_customers"),
    "customer_cohorts": ("cohort_month, months_since_first, active_customers, revenue", """
        with m as (select customer_id, date_trunc('month', ordered_at)::date as month, amount
                   from lake.main.raw_orders where status <> 'returned'),
             f as (select customer_id, min(month) as cohort_month from m group by 1)
        select f.cohort_month, date_diff('month', f.cohort_month, m.month), count(distinct m.customer_id),
               round(sum(m.amount), 2)
        from m join f using (customer_id) group by all"""),
}


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rig]:
    # the hosts' folder where every user can reach it (PostgreSQL runs as `postgres`; pytest's folders are root's
    # only), and short (PostgreSQL's socket path); the logs stay with pytest's
    hosts = Path(tempfile.mkdtemp(prefix="dlk-rig-", dir="/tmp"))
    hosts.chmod(0o755)
    try:
        with cluster_rig(hosts, tmp_path_factory.mktemp("cluster-logs")) as running:
            yield running
    finally:
        shutil.rmtree(hosts, ignore_errors=True)


def _project(rig: Rig, name: str, data_path: str, *, catalog: str, master: str | None = None,
             keys: bool = True, short_timeouts: bool = False) -> str:
    """The sample project on the client host (its own folder), with the paced model and a profile for the rig."""
    client = rig['client']
    project = str(client.home / name)
    client.run(["cp", "-r", str(REPO_ROOT / "sample_project"), project])
    client.run(["rm", "-rf", f"{project}/lake", f"{project}/target", f"{project}/logs"])
    client.write(f"{project}/models/marts/orders_paced.sql", PACED)
    profile = rig.profile("jaffle_lake", data_path=data_path, catalog=catalog, master=master, keys=keys,
                          short_timeouts=short_timeouts)
    client.write(f"{project}/profiles.yml", profile)
    return project


DBT = [sys.executable, "-c", "from dbt.cli.main import cli; cli()"]


def _dbt_env(project: str, extra: dict[str, str] | None = None) -> dict[str, str]:
    """A dbt process's environment on the client host: the project's profile, the embedded driver."""
    return {"DBT_PROFILES_DIR": project, "PYSPARK_PYTHON": sys.executable, "DBT_DUCKLAKE_WARM": "0", "CI": "true",
            **(extra or {})}


def _dbt_popen(rig: Rig, name: str, project: str, *args: str, env: dict[str, str] | None = None) -> Any:
    """A dbt command started on the client host (not waited for); its output in the rig's log `client-<name>`."""
    return rig['client'].popen(name, [*DBT, *args, "--project-dir", project], env=_dbt_env(project, env), cwd=project)


def _dbt(rig: Rig, project: str, *args: str, ok: bool = True, env: dict[str, str] | None = None,
         timeout: float = 900) -> str:
    """One dbt command on the client host (its own process and Spark driver); its output."""
    proc = rig['client'].run([*DBT, *args, "--project-dir", project], cwd=project, check=False, timeout=timeout,
                             env=_dbt_env(project, env))
    out = proc.stdout + proc.stderr
    assert (proc.returncode == 0) == ok, f"dbt {' '.join(args)} exited with {proc.returncode}:\n{out[-20000:]}\n" \
                                         f"{rig.logs(20)}"
    return out


def _wait_log(rig: Rig, project: str, text: str, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while rig['client'].run(["grep", "-q", "-F", text, f"{project}/logs/dbt.log"], check=False).returncode != 0:
        assert time.monotonic() < deadline, f"dbt never logged {text!r}"
        time.sleep(0.3)


def _rows(rows: list[list[Any]]) -> list[tuple[str, ...]]:
    return sorted(tuple(str(v) for v in r) for r in rows)


def _check_tables(rig: Rig, catalog: str) -> None:
    """Every model table equals DuckDB's own computation from the sources, and the snapshot holds every version of
    raw_customers the lake ever had (current ones open)."""
    names = list(EXPECTED)
    sql = []
    for name in names:
        cols, expected = EXPECTED[name]
        sql += [f"select {cols} from lake.main.{name}", expected]
    snaps = [r[0] for r in rig.duckdb(catalog, [
        "select snapshot_id from lake.snapshots() where snapshot_id >= (select min(begin_snapshot) from "
        "__ducklake_metadata_lake.ducklake_table where table_name = 'raw_customers')"])[0]]
    sql += [f"select id, name, country from lake.main.raw_customers at (version => {s})" for s in snaps]
    got = rig.duckdb(catalog, [*sql, "select id, name, country, dbt_valid_to is null from lake.main.customers_history"])
    for i, name in enumerate(names):
        assert _rows(got[2 * i]) == _rows(got[2 * i + 1]), name
    versions: set[tuple[str, ...]] = set()
    for rows in got[2 * len(names):-1]:
        versions |= set(_rows(rows))
    history = got[-1]
    assert set(_rows([r[:3] for r in history])) == versions
    assert len(history) == len(versions)
    latest = _rows(got[-2])
    assert _rows([r[:3] for r in history if r[3] is True or r[3] == "True"]) == latest


def _no_orphans(rig: Rig, catalog: str) -> list[str]:
    """DuckDB's dry runs: nothing scheduled for cleanup; the files it would delete as orphans (none expected)."""
    got = rig.duckdb(catalog, ["select * from ducklake_cleanup_old_files('lake', cleanup_all => true, dry_run => true)",
                               "select * from ducklake_delete_orphaned_files('lake', cleanup_all => true, "
                               "dry_run => true)"])
    assert got[0] == []
    return [r[0] for r in got[1] if "/_ducklake_spark/" not in r[0]]


def _no_local_lake_files(rig: Rig) -> None:
    """No host's own folder holds a Parquet file: Spark's staging and every lake file are on S3."""
    for host in rig.hosts.values():
        assert [f for f in host.files() if f.endswith(".parquet")] == [], host.name


@full_only("the cluster of hosts: the Spark layer's standalone-cluster test writes, deletes and reads by default")
def test_two_builds_with_a_worker_killed_mid_model(rig: Rig) -> None:
    catalog = rig.catalog()
    data_path = "s3://lake/jaffle/"
    project = _project(rig, "jaffle", data_path, catalog=catalog)
    _dbt(rig, project, "debug")
    _dbt(rig, project, "seed")  # the shop's raw tables (sources of the project, as DuckDB writers would load them)

    # build 1: worker1 dies (every process of the host, SIGKILL) while the paced model's tasks run on both
    # executors; Spark runs the lost tasks on worker2 and the build completes
    build = _dbt_popen(rig, "dbt-build-1", project, "build", *BUILD)
    _wait_log(rig, project, "main.orders_paced")
    time.sleep(6)  # into the model's job: executors started, tasks running
    assert rig.master_state().get("activeapps"), "the build runs no Spark application on the cluster"
    killed = rig[WORKERS[0]].kill_all(signal.SIGKILL)
    assert killed
    assert build.wait(timeout=900) == 0, rig.logs(60)
    rig.wait_workers(1, exactly=True)  # the master lost worker1
    rig.start_worker(WORKERS[0])  # the machine comes back
    rig.wait_workers(len(WORKERS))
    _check_tables(rig, catalog)
    assert _no_orphans(rig, catalog) == []

    files = rig.duckdb(catalog, ["select data_file from ducklake_list_files('lake', 'orders_paced')"])[0]
    assert files and all(str(f[0]).startswith(data_path) for f in files)
    assert rig.lakecheck(catalog) == []
    if not FULL:  # the second build (a MERGE, a snapshot's new versions on the cluster) is in the full suite
        _no_local_lake_files(rig)
        return
    # DuckDB changes a source; build 2 merges those changes (change feed, snapshot) and rebuilds the rest
    rig.duckdb(catalog, UPSTREAM)
    _dbt(rig, project, "build", *BUILD)  # an executor lost mid-MERGE is survived too (the MERGE runs again)
    _check_tables(rig, catalog)
    assert _no_orphans(rig, catalog) == []
    files = rig.duckdb(catalog, ["select data_file from ducklake_list_files('lake', 'orders_paced')"])[0]
    assert files and all(str(f[0]).startswith(data_path) for f in files)
    assert rig.lakecheck(catalog) == []
    _no_local_lake_files(rig)


def _leftovers(rig: Rig, catalog: str, data_path: str) -> tuple[set[str], set[str]]:
    """(objects in the store under the lake's data path that no catalog row names, what DuckDB's orphan dry run
    would delete); Spark's readable copies aside (not lake files)."""
    prefix = data_path[len("s3://lake/"):]
    # directory markers (empty keys ending in /, which Spark's s3a connector puts for folders it makes) are no
    # files: neither engine reads or lists them as lake files
    keys = {f"s3://lake/{k}" for k in rig.store_keys(prefix) if "/_ducklake_spark/" not in k and not k.endswith("/")}
    meta = "__ducklake_metadata_lake"
    path = ("case when f.path_is_relative then case when t.path_is_relative then case when s.path_is_relative "
            f"then '{data_path}' || s.path else s.path end || t.path else t.path end || f.path else f.path end")
    joins = (f"join {meta}.ducklake_table t using (table_id) join {meta}.ducklake_schema s using (schema_id)")
    listed = rig.duckdb(catalog, [f"select {path} from {meta}.ducklake_data_file f {joins} union all "
                                  f"select {path} from {meta}.ducklake_delete_file f {joins}"])[0]
    known = {str(r[0]) for r in listed}
    return keys - known, set(_no_orphans(rig, catalog))


@pytest.mark.skipif(not FULL, reason="heavy cluster faults run in the full suite (DUCKLAKE_TEST_FULL=1)")
def test_worker_cut_off_mid_model(rig: Rig) -> None:
    """A worker's cable pulled while its tasks run, put back after Spark gave up on it: the build completes, the
    lost attempt's files are not in the catalog, and whatever it left in the store is exactly DuckDB's orphans."""
    catalog, data_path = rig.catalog("lake_cut"), "s3://lake/cut/"
    rig.create_database("lake_cut")
    project = _project(rig, "cut", data_path, catalog=catalog, short_timeouts=True)
    _dbt(rig, project, "seed")
    build = _dbt_popen(rig, "dbt-build-cut", project, "build", *BUILD)
    _wait_log(rig, project, "main.orders_paced")
    time.sleep(6)
    worker = rig[WORKERS[0]]
    worker.cut()
    time.sleep(30)  # past spark.network.timeout (20 s): the driver removes the executor, re-runs its tasks
    worker.plug()
    assert build.wait(timeout=900) == 0, rig.logs(60)
    _check_tables(rig, catalog)
    time.sleep(10)  # the cut-off executor, reconnected, may still finish its attempt's write
    stray, orphans = _leftovers(rig, catalog, data_path)
    assert stray == orphans
    assert rig.lakecheck(catalog) == []
    rig.wait_workers(len(WORKERS))


@pytest.mark.skipif(not FULL, reason="heavy cluster faults run in the full suite (DUCKLAKE_TEST_FULL=1)")
def test_driver_killed_in_a_commit(rig: Rig) -> None:
    """dbt dies (SIGKILL) inside a model's catalog transaction: the lake is as it was, the model's files are in the
    store and are exactly what DuckDB's orphan deletion finds; the rerun builds the model."""
    catalog, data_path = rig.catalog("lake_kill"), "s3://lake/kill/"
    rig.create_database("lake_kill")
    project = _project(rig, "kill", data_path, catalog=catalog)
    _dbt(rig, project, "seed")
    _dbt(rig, project, "run", "--select", "stg_orders")
    before = rig.duckdb(catalog, ["select max(snapshot_id) from lake.snapshots()"])[0]
    _dbt(rig, project, "run", "--select", "orders_by_month", ok=False,
         env={"DUCKLAKE_TEST_CRASH_AT": "catalog_transaction"})
    got = rig.duckdb(catalog, ["select table_name from duckdb_tables() where database_name = 'lake' "
                               "and table_name = 'orders_by_month'", "select max(snapshot_id) from lake.snapshots()"])
    assert got == [[], before]
    stray, orphans = _leftovers(rig, catalog, data_path)
    assert stray and stray == orphans
    _dbt(rig, project, "run", "--select", "orders_by_month")
    got = rig.duckdb(catalog, [f"select {EXPECTED['orders_by_month'][0]} from lake.main.orders_by_month", ORDERS])
    assert _rows(got[0]) == _rows(got[1])
    assert rig.lakecheck(catalog) == []


def _paused_run(rig: Rig, project: str, name: str, model: str) -> tuple[Any, str]:
    """`dbt run --select model` on the client host, paused inside each commit's catalog transaction (before COMMIT)
    until the pause file is removed; returns once it is paused the first time: (the process, the pause file)."""
    pause = f"{project}/paused"
    run = _dbt_popen(rig, name, project, "run", "--select", model,
                     env={"DUCKLAKE_TEST_PAUSE_AT": "catalog_transaction", "DUCKLAKE_TEST_PAUSE_FILE": pause})
    deadline = time.monotonic() + 600
    while not rig['client'].exists(pause):
        assert run.poll() is None and time.monotonic() < deadline, rig.logs(40)
        time.sleep(0.3)
    return run, pause


def _release(rig: Rig, run: Any, pause: str) -> int:
    """Let the paused run go on (every later pause too) until it exits; its exit code."""
    while run.poll() is None:
        rig['client'].run(["rm", "-f", pause])
        time.sleep(0.3)
    return int(run.returncode)


@pytest.mark.skipif(not FULL, reason="heavy cluster faults run in the full suite (DUCKLAKE_TEST_FULL=1)")
def test_catalog_server_restarted_or_down_mid_commit(rig: Rig) -> None:
    """The catalog server restarts while a model's catalog transaction is open: the commit was not applied, so the
    adapter commits again and the model is built once. The server down at that moment: the node fails with a short
    error naming the catalog, the lake is as it was, and the rerun succeeds."""
    catalog, data_path = rig.catalog("lake_restart"), "s3://lake/restart/"
    rig.create_database("lake_restart")
    project = _project(rig, "restart", data_path, catalog=catalog)
    _dbt(rig, project, "seed")
    _dbt(rig, project, "run", "--select", "stg_orders", "stg_customers")
    before = rig.duckdb(catalog, ["select max(snapshot_id) from lake.snapshots()"])[0][0][0]

    run, pause = _paused_run(rig, project, "dbt-run-restart", "orders_by_month")
    rig.restart_catalog()
    assert _release(rig, run, pause) == 0
    out = (rig.net.log_dir / "client-dbt-run-restart.log").read_text(errors="replace")
    assert "was not applied (the catalog failed while committing): retrying" in out
    got = rig.duckdb(catalog, [f"select {EXPECTED['orders_by_month'][0]} from lake.main.orders_by_month", ORDERS,
                               "select max(snapshot_id) from lake.snapshots()"])
    assert _rows(got[0]) == _rows(got[1]) and got[2] == [[before + 1]]  # one snapshot: committed once

    run, pause = _paused_run(rig, project, "dbt-run-down", "customers")
    rig.stop_catalog()
    try:
        assert _release(rig, run, pause) != 0
    finally:
        rig.start_catalog_server()
    out = (rig.net.log_dir / "client-dbt-run-down.log").read_text(errors="replace")
    summary = out.split("Completed with")[-1]
    assert "customers" in summary and "catalog" in summary and rig['catalog'].ip in summary, out[-5000:]
    assert "Traceback" not in summary
    rig.wait_catalog()
    got = rig.duckdb(catalog, ["select table_name from duckdb_tables() where database_name = 'lake' "
                               "and table_name = 'customers'", "select max(snapshot_id) from lake.snapshots()"])
    assert got == [[], [[before + 1]]]
    _dbt(rig, project, "run", "--select", "customers")
    cols, expected = EXPECTED["customers"]
    got = rig.duckdb(catalog, [f"select {cols} from lake.main.customers", expected])
    assert _rows(got[0]) == _rows(got[1])
    assert rig.lakecheck(catalog) == []


@pytest.mark.skipif(not FULL, reason="the Spark Connect host runs in the full suite (DUCKLAKE_TEST_FULL=1)")
def test_build_through_spark_connect_host(rig: Rig) -> None:
    """dbt on the client host drives a Spark Connect server on its own host (its driver on the cluster): the keys
    are the server's configuration; the client's own S3 work takes them from the AWS variables."""
    catalog, data_path = rig.catalog("lake_connect"), "s3://lake/connect/"
    rig.create_database("lake_connect")
    url = rig.start_connect()
    project = _project(rig, "connect", data_path, catalog=catalog, master=url, keys=False)
    aws = {"AWS_ACCESS_KEY_ID": KEY_ID, "AWS_SECRET_ACCESS_KEY": SECRET}
    _dbt(rig, project, "seed", env=aws)
    _dbt(rig, project, "build", *BUILD, env=aws)
    _check_tables(rig, catalog)
    assert _no_orphans(rig, catalog) == []
    assert rig.lakecheck(catalog) == []
