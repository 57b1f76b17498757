"""Several writers, crashes and a catalog server that goes away, with real processes.

* Two dbt processes build different models of one lake at the same time while DuckDB inserts into and deletes from
  a source table (PostgreSQL and SQLite catalogs): every commit lands, nothing is lost.
* Two dbt processes rebuild the same model at once: one snapshot each, in some order; the table is whole.
* Two dbt processes on a DuckDB-file catalog take turns on the file and both succeed.
* kill -9 at every phase of a model's commit: the lake is unchanged or has the model whole, DuckDB reads it, orphan
  deletion finds exactly the files the crash left, the next run succeeds.
* The PostgreSQL catalog server stops while a model commits: a clear error naming the catalog (no password), the lake
  intact, and after a restart the rerun succeeds.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from dbt.adapters.ducklake.lake import DuckLake
from dbt.adapters.ducklake.lake.maintenance.cleanup import delete_orphaned_files
from tests.support import postgres, reference
from tests.support.coverage import FULL
from tests.support.invariants import violations
from tests.support.spark_cluster import REPO_ROOT

pytestmark = pytest.mark.slow


@dataclass
class Child:
    proc: subprocess.Popen[bytes]
    log: Path

    def wait(self, timeout: float = 600) -> tuple[int, str]:
        try:
            self.proc.wait(timeout=timeout)
        finally:
            _kill_group(self.proc)
        return self.proc.returncode, self.log.read_text(errors="replace")


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)  # a driver JVM left behind by a killed dbt


def _project(root: Path, catalog: str, data: Path, models: dict[str, str], threads: int = 2) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "dbt_project.yml").write_text("name: writers\nversion: '1.0'\nprofile: writers\nconfig-version: 2\n")
    (root / "models").mkdir(exist_ok=True)
    for name, sql in models.items():
        (root / "models" / name).write_text(sql)
    (root / "profiles.yml").write_text(
        "writers:\n  target: dev\n  outputs:\n    dev:\n      type: ducklake\n"
        f"      catalog: '{catalog}'\n      data_path: '{data}/'\n      schema: main\n      master: 'local[1]'\n"
        f"      threads: {threads}\n      spark_config: {{spark.sql.shuffle.partitions: '2'}}\n")
    return root


def _dbt(project: Path, *args: str, env: dict[str, str] | None = None, tag: str = "dbt") -> Child:
    log = project / f"{tag}-{time.monotonic_ns()}.log"
    full_env = {**os.environ, "DBT_PROFILES_DIR": str(project), "PYSPARK_PYTHON": sys.executable, **(env or {})}
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-c", "from dbt.cli.main import cli; cli()", *args, "--project-dir",
                                 str(project)], stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                env=full_env, cwd=REPO_ROOT, start_new_session=True)
    return Child(proc, log)


def _parquet(data: Path) -> set[str]:
    return {os.path.normpath(os.path.join(d, f)) for d, _, fs in os.walk(data) for f in fs if f.endswith(".parquet")}


def _models(prefix: str, n: int, source: bool = True) -> dict[str, str]:
    src = "main.src" if source else "range(50)"
    return {f"{prefix}{i}.sql": "{{ config(materialized='table') }}\n"
            f"select id, id * {i + 1} as v from {src}" for i in range(n)}


def _first_version(catalog: str, data: Path, table: str, select: str) -> None:
    """The model's first version, written by DuckDB: what the test is about starts with the next run (and one dbt
    process, a JVM start, fewer per test)."""
    DuckLake.create(catalog, str(data) + "/").close()
    with reference.attached(catalog) as con:
        con.execute(f"CREATE TABLE lake.main.{table} AS SELECT {select}")


# several writers ---------------------------------------------------------------------------------------------------
# SQLite's turns on one file are in the full suite; the default run takes PostgreSQL, where writers overlap most
@pytest.fixture(params=["postgres", "sqlite"] if FULL else ["postgres"])
def shared_catalog(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "postgres":
        server: postgres.PostgresServer = request.getfixturevalue("pg_server")
        yield server.create_database(f"writers_{os.getpid()}_{time.monotonic_ns() % 10**9}")
    else:
        yield f"sqlite:///{tmp_path}/catalog.sqlite"


def test_two_dbt_processes_and_duckdb_write_one_lake(shared_catalog: str, tmp_path: Path) -> None:
    data = tmp_path / "data"
    lake = DuckLake.create(shared_catalog, str(data) + "/")
    lake.close()
    with reference.attached(shared_catalog) as con:
        con.execute("CREATE TABLE lake.main.src AS SELECT range AS id FROM range(100)")
    a = _project(tmp_path / "a", shared_catalog, data, _models("a", 3))
    b = _project(tmp_path / "b", shared_catalog, data, _models("b", 3))
    children = [_dbt(a, "run", tag="a"), _dbt(b, "run", tag="b")]
    # meanwhile DuckDB inserts into and deletes from the source, retrying on conflicts as its users would
    done = threading.Event()
    duck_commits: list[str] = []
    errors: list[str] = []

    def duckdb_writer() -> None:
        n = 0
        with reference.attached(shared_catalog) as con:
            while not done.is_set() and n < 40:
                stmt = (f"INSERT INTO lake.main.src VALUES ({1000 + n})" if n % 2 == 0
                        else f"DELETE FROM lake.main.src WHERE id = {n}")
                try:
                    con.execute(stmt)
                    duck_commits.append(stmt)
                except Exception as e:  # noqa: BLE001 - a DuckDB-side conflict is its own retry's business
                    errors.append(str(e))
                n += 1
                time.sleep(0.2)

    writer = threading.Thread(target=duckdb_writer)
    writer.start()
    outcomes = [c.wait() for c in children]
    done.set()
    writer.join()
    for code, log in outcomes:
        assert code == 0, log[-4000:]
    with reference.attached(shared_catalog, read_only=True) as con:
        inserted = sum(1 for s in duck_commits if s.startswith("INSERT"))
        deleted = sum(1 for s in duck_commits if s.startswith("DELETE"))
        assert con.execute("SELECT count(*) FROM lake.main.src").fetchone()[0] == 100 + inserted - deleted
        messages = [r[0] for r in con.execute("SELECT commit_message FROM lake.snapshots()").fetchall()]
        for m in ["a0", "a1", "a2", "b0", "b1", "b2"]:
            assert sum(1 for x in messages if x and x.startswith(f"model.writers.{m}:")) == 1, (m, messages)
            rows = con.execute(f"SELECT count(*) FROM lake.main.{m}").fetchone()[0]
            assert 100 - deleted <= rows <= 100 + inserted  # the source as of the snapshot the model read
    assert violations(shared_catalog) == []


def test_two_processes_rebuild_the_same_model(shared_catalog: str, tmp_path: Path) -> None:
    data = tmp_path / "data"
    model = {"same.sql": "{{ config(materialized='table') }}\nselect id, '{{ var(\"who\") }}' as who from range(20)"}
    p = _project(tmp_path / "p", shared_catalog, data, model)
    _first_version(shared_catalog, data, "same", "range AS id, 'first' AS who FROM range(20)")
    children = [_dbt(p, "run", "--vars", f"{{who: {w}}}", tag=w) for w in ("x", "y")]
    outcomes = [c.wait() for c in children]
    ok = [code == 0 for code, _ in outcomes]
    for code, log in outcomes:  # success, or one clear error (a conflict), never a crash
        assert code == 0 or "Transaction conflict" in log or "CommitConflictError" in log, log[-3000:]
    assert any(ok)
    with reference.attached(shared_catalog, read_only=True) as con:
        rows = con.execute("SELECT count(*), count(DISTINCT who), min(who) FROM lake.main.same").fetchone()
        assert rows[0] == 20 and rows[1] == 1 and rows[2] in ("x", "y")  # whole: one version, not a mix
        commits = [r[0] for r in con.execute("SELECT commit_message FROM lake.snapshots() WHERE commit_message "
                                             "LIKE 'model.writers.same:%'").fetchall()]
        assert len(commits) == sum(ok)  # one snapshot per successful rebuild
    assert violations(shared_catalog) == []


def test_two_processes_on_a_duckdb_file_catalog_take_turns(tmp_path: Path) -> None:
    catalog = f"{tmp_path}/metadata.ducklake"
    data = tmp_path / "data"
    a = _project(tmp_path / "a", catalog, data, _models("a", 2, source=False))
    b = _project(tmp_path / "b", catalog, data, _models("b", 2, source=False))
    first = _dbt(a, "run", tag="a")
    time.sleep(1.0)
    second = _dbt(b, "run", tag="b")
    for code, log in (first.wait(), second.wait()):
        assert code == 0, log[-4000:]
    with reference.attached(catalog, read_only=True) as con:
        for m in ("a0", "a1", "b0", "b1"):
            assert con.execute(f"SELECT count(*) FROM lake.main.{m}").fetchone()[0] == 50
    assert violations(catalog) == []


# crashes ------------------------------------------------------------------------------------------------------------
# a catalog transaction left open by default: the kill comes after the files are written, so it leaves files that
# were never registered too (orphan deletion must find exactly those); a kill right after the files are written,
# during Spark's write and right after the commit in the full suite
@pytest.mark.parametrize("phase", ["spark_write", "files_written", "catalog_transaction", "after_commit"] if FULL
                         else ["catalog_transaction"])
def test_kill_at_every_phase_of_a_commit(phase: str, tmp_path: Path) -> None:
    catalog = f"sqlite:///{tmp_path}/catalog.sqlite"
    data = tmp_path / "data"
    model = {"m.sql": "{{ config(materialized='table') }}\nselect id, {{ var('gen') }} as gen from range(10)"}
    p = _project(tmp_path / "p", catalog, data, model, threads=1)
    _first_version(catalog, data, "m", "range AS id, 1 AS gen FROM range(10)")
    lake = DuckLake.open(catalog)
    before_snap = lake.latest_snapshot().snapshot_id
    before_files = _parquet(data)
    code, log = _dbt(p, "run", "--vars", "{gen: 2}", env={"DUCKLAKE_TEST_CRASH_AT": phase}).wait()
    assert code == -signal.SIGKILL, (code, log[-3000:])
    committed = phase == "after_commit"
    with reference.attached(catalog, read_only=True) as con:
        assert con.execute("SELECT max(snapshot_id) FROM lake.snapshots()").fetchone()[0] == before_snap + committed
        assert con.execute("SELECT count(*), min(gen), max(gen) FROM lake.main.m").fetchone() == (
            10, 1 + committed, 1 + committed)
    assert violations(catalog) == []
    # what the crash left: written, never registered; orphan deletion finds exactly those
    left = _parquet(data) - before_files
    # Spark's own output (part files, .crc, _SUCCESS) is still in the writer's staging directory: that goes whole
    expected = {os.path.join(*p.split(os.sep)[:next(i for i, x in enumerate(p.split(os.sep))
                                                     if x.startswith("ducklake-write-")) + 1])
                if "ducklake-write-" in p else p for p in left}
    expected = {("/" + e if not e.startswith("/") else e) for e in expected}
    lake = DuckLake.open(catalog)
    orphans = set(delete_orphaned_files(lake, all=True, dry_run=True))
    if committed:
        assert orphans == set()
    else:
        assert left and orphans == expected, (left, orphans)
    # the next run succeeds; then orphan deletion removes the crash's files, nothing else
    code, log = _dbt(p, "run", "--vars", "{gen: 3}").wait()
    assert code == 0, log[-3000:]
    assert set(delete_orphaned_files(lake, all=True)) == orphans
    leftovers = [os.path.join(d, f) for d, _, fs in os.walk(data) for f in fs
                 if f.endswith((".crc", "_SUCCESS")) or "ducklake-write-" in d]
    assert leftovers == []
    with reference.attached(catalog, read_only=True) as con:
        assert con.execute("SELECT count(*), min(gen) FROM lake.main.m").fetchone() == (10, 3)
        for ver in range(1, before_snap + 1):  # time travel into the older versions still reads
            con.execute(f"SELECT count(*) FROM lake.main.m AT (VERSION => {ver})").fetchall()
    assert violations(catalog) == []


# the catalog server goes away -----------------------------------------------------------------------------------
def test_catalog_server_stops_while_a_model_commits(tmp_path: Path) -> None:
    server = postgres.start_private()
    try:
        pw_user_enforced = server.add_password_user("gone_user", "Gone-Pa55/word")
        url = server.database_url(server.create_database("gone").rsplit("/", 1)[1])
        catalog = url.replace("postgres@", "gone_user:Gone-Pa55%2Fword@", 1) if pw_user_enforced else url
        data = tmp_path / "data"
        models = {"m1.sql": "{{ config(materialized='table') }}\nselect id from range(5)",
                  "m2.sql": "{{ config(materialized='table') }}\nselect id from {{ ref('m1') }}"}
        p = _project(tmp_path / "p", catalog, data, models, threads=1)
        _first_version(catalog, data, "m1", "range AS id FROM range(5)")  # what m2 reads
        marker = tmp_path / "paused"
        child = _dbt(p, "run", "--select", "m2", env={"DUCKLAKE_TEST_PAUSE_AT": "files_written",
                                                       "DUCKLAKE_TEST_PAUSE_FILE": str(marker)})
        deadline = time.monotonic() + 300
        while not marker.exists():
            assert child.proc.poll() is None and time.monotonic() < deadline, child.log.read_text()[-3000:]
            time.sleep(0.1)
        server.halt()
        marker.unlink()
        code, log = child.wait()
        assert code != 0
        assert "m2" in log and "catalog" in log and "Gone-Pa55" not in log and "Gone-Pa55%2Fword" not in log
        assert f"127.0.0.1:{server.port}" in log  # names the catalog
        server.resume()
        with reference.attached(catalog, read_only=True) as con:
            tables = {r[0] for r in con.execute("SELECT table_name FROM duckdb_tables() "
                                                "WHERE database_name = 'lake'").fetchall()}
            assert tables == {"m1"}  # intact: m1 whole, no trace of m2
            assert con.execute("SELECT count(*) FROM lake.main.m1").fetchone()[0] == 5
        code, log = _dbt(p, "run", "--select", "m2").wait()
        assert code == 0, log[-3000:]
        with reference.attached(catalog, read_only=True) as con:
            assert con.execute("SELECT count(*) FROM lake.main.m2").fetchone()[0] == 5
        assert violations(catalog) == []
    finally:
        server.stop()
