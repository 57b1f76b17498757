"""`master: local-server`: successive dbt commands share a warm Spark driver per lake (joined through Py4J).

Two projects, each with its own lake and a model of the same name (`main.m`), run as real `dbt` processes: the first
command starts the lake's server, later ones reuse it, the other lake gets its own server (Spark's session catalog is
shared by all sessions of a server, so two lakes must not share one), an unused server stops after its idle time, a
table dropped by DuckDB between two commands is not read from the warm server's stale view (time-travel views still
resolve), `dbt debug` reports the server, and a killed server is replaced by the next command.
"""

from __future__ import annotations

import datetime as dt
import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from dbt.adapters.ducklake.lake import DuckLake
from dbt.adapters.ducklake.spark.env import local_server
from tests.support import reference
from tests.support.local_servers import servers_root, wait_for
from tests.support.spark_cluster import ChildResult, run_python

pytestmark = pytest.mark.slow


def write_project(root: Path, who: str, idle_timeout: int) -> Path:
    """A project whose table `main.m` holds one row naming it, with a test that the row is its own."""
    project = root / f"project_{who}"
    lake = root / f"lake_{who}"
    files = {
        "dbt_project.yml": f"name: p{who}\nversion: '1.0'\nprofile: p{who}\nconfig-version: 2\n",
        "models/m.sql": f"{{{{ config(materialized='table') }}}}\nselect 1 as id, '{who}' as who",
        "models/schema.yml": "version: 2\nmodels:\n  - name: m\n    columns:\n      - name: who\n        data_tests:\n"
                             f"          - accepted_values:\n              arguments:\n                values: ['{who}']\n",
        "profiles.yml": f"p{who}:\n  target: dev\n  outputs:\n    dev:\n      type: ducklake\n"
                        f"      catalog: {lake}/metadata.ducklake\n      data_path: {lake}/data/\n      schema: main\n"
                        f"      master: local-server[1]\n      server_idle_timeout: {idle_timeout}\n      threads: 1\n",
    }
    if who == "B":  # a seed: written by the driver without a Spark job on the server too (spark/write/local_write)
        files["seeds/s.csv"] = "id,name,ts\n1,x,2024-03-10 02:30:00\n2,,\n"
    for name, text in files.items():
        (project / name).parent.mkdir(parents=True, exist_ok=True)
        (project / name).write_text(text)
    return project


@pytest.fixture
def servers(tmp_path: Path) -> Iterator[str]:
    with servers_root(tmp_path) as root:
        yield root


def dbt(project: Path, root: str, *args: str, log_dir: Path) -> ChildResult:
    env = {**os.environ, "DBT_PROFILES_DIR": str(project), "PYSPARK_PYTHON": sys.executable,
           local_server.ROOT_ENV: root}
    return run_python(["-c", "from dbt.cli.main import cli; cli()", *args, "--project-dir", str(project)],
                      env=env, log_dir=log_dir, timeout=600)


def server_of(root: str, lake: Path) -> tuple[str, dict[str, Any] | None]:
    """The server directory of a lake (the one whose launch names it) and its running server, if any."""
    for name in sorted(os.listdir(root)):
        directory = os.path.join(root, name)
        launch = Path(directory, "launch.json")
        if launch.exists() and str(lake) in launch.read_text():
            return directory, local_server.status(directory)
    raise AssertionError(f"no server directory for {lake} under {root}")


def test_warm_server_life_cycle_with_two_lakes(tmp_path: Path, servers: str) -> None:
    a, b = write_project(tmp_path, "A", idle_timeout=600), write_project(tmp_path, "B", idle_timeout=5)
    lake_a, lake_b = tmp_path / "lake_A", tmp_path / "lake_B"

    first = dbt(a, servers, "run", log_dir=tmp_path / "log1")
    assert first.returncode == 0, first.stdout[-4000:]
    assert "started by this command" in first.stdout  # a new daemon is announced, with its log
    dir_a, info_a = server_of(servers, lake_a)
    assert info_a is not None and os.path.exists(info_a["log"]) and f"log: {info_a['log']}" in first.stdout

    other = dbt(b, servers, "build", log_dir=tmp_path / "log2")
    assert other.returncode == 0 and "PASS=3" in other.stdout, other.stdout[-4000:]
    seed = DuckLake.open(str(lake_b / "metadata.ducklake"))
    try:
        st = seed.snapshot()
        (f,) = st.files(st.table("main", "s"))
        assert pq.ParquetFile(f.path).metadata.created_by.startswith("parquet-cpp-arrow")  # not a Spark job's file
    finally:
        seed.close()
    with reference.attached(str(lake_b / "metadata.ducklake")) as con:
        assert con.execute("SELECT id, name, ts FROM lake.main.s ORDER BY id").fetchall() == [
            (1, "x", dt.datetime(2024, 3, 10, 2, 30)), (2, None, None)]
    dir_b, info_b = server_of(servers, lake_b)
    assert dir_b != dir_a and info_b is not None and info_b["pid"] != info_a["pid"]

    again = dbt(a, servers, "build", log_dir=tmp_path / "log3")
    assert again.returncode == 0 and "PASS=2" in again.stdout, again.stdout[-4000:]  # A's own row, not B's
    assert "started by this command" not in again.stdout
    assert f"pid {info_a['pid']}, reused" in (a / "logs" / "dbt.log").read_text()
    assert server_of(servers, lake_a)[1] == info_a

    # B's server had no client for its 5 s idle time: stopped and forgotten, A's still runs
    wait_for("B's server to stop", lambda: server_of(servers, lake_b)[1] is None, 90)
    # forgotten first (no client attaches to a stopping server), then stopped: its JVM exits within its grace time
    wait_for("B's server process to exit", lambda: not local_server._alive(info_b["pid"]), 60)
    assert server_of(servers, lake_a)[1] == info_a

    # time travel registers `main.m__at_<n>`, a Spark view that is no lake object: the warm server keeps it usable
    travel = dbt(a, servers, "show", "--inline", "select who || '-then' as w from {{ ducklake_at(ref('m'), "
                 "changes_back=0) }}", log_dir=tmp_path / "log_tt")
    assert travel.returncode == 0 and "A-then" in travel.stdout, travel.stdout[-3000:]

    # a table dropped by another writer is gone for the next command, not read from the server's old view of it
    with reference.attached(str(lake_a / "metadata.ducklake")) as con:
        con.execute("DROP TABLE lake.main.m")
    show = dbt(a, servers, "show", "--inline", "select who from main.m", log_dir=tmp_path / "log4")
    assert show.returncode != 0 and "TABLE_OR_VIEW_NOT_FOUND" in show.stdout, show.stdout[-3000:]

    debug = dbt(a, servers, "debug", log_dir=tmp_path / "log5")
    assert debug.returncode == 0, debug.stdout[-3000:]
    assert (f"spark_server: running: Spark driver (Py4J gateway) at 127.0.0.1:{info_a['port']} (pid {info_a['pid']})"
            in debug.stdout)
    assert f"(pid {info_a['pid']}, reused" in debug.stdout and f"log: {info_a['log']}" in debug.stdout

    # the server and its supervisor killed outright (server.json left behind): the next command starts a new one
    os.killpg(info_a["supervisor_pid"], signal.SIGKILL)
    wait_for("the killed server to be gone", lambda: not local_server._alive(info_a["pid"]), 30)
    after = dbt(a, servers, "build", log_dir=tmp_path / "log6")
    assert after.returncode == 0 and "PASS=2" in after.stdout, after.stdout[-4000:]
    assert "started by this command" in after.stdout
    new_dir, new_info = server_of(servers, lake_a)
    assert new_dir == dir_a and new_info is not None and new_info["pid"] != info_a["pid"]
