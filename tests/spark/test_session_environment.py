"""A driver starting on one thread leaves the process environment alone for the others: dbt starts the embedded
session in the background while its main thread parses the project, and dbt iterates os.environ (to scrub secrets
from its errors). A variable added or removed meanwhile breaks that iteration (seen: a dbt command failing with
KeyError 'PYSPARK_GATEWAY_PORT'). In a fresh process: the environment a session needs is prepared on the main thread,
then a driver starts on another thread while the main thread iterates the environment without pause.

The same process then stops that session and makes another (a stopped session's catalog is gone with it) and reads a
lake's tables through manifests in each: what the process keeps about Spark tables it made is kept per catalog."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

CHILD = """
import json, os, sys, threading
from dbt.adapters.ducklake.lake import DuckLake
from dbt.adapters.ducklake.spark.env.session import build_session, prepare_environment
from dbt.adapters.ducklake.spark.read import scan
from tests.support.reference_lakes import build

prepare_environment(sys.executable)
before = dict(os.environ)
errors, passes, started = [], 0, {}

def start():
    try:
        started["spark"] = build_session("local[1]", "env-test", {"spark.ui.enabled": "false"},
                                         log_file=sys.argv[1])
    except BaseException as e:
        started["error"] = repr(e)

thread = threading.Thread(target=start)
thread.start()
while thread.is_alive():
    try:
        for key, value in os.environ.items():  # as dbt's scrub_secrets iterates it
            pass
        passes += 1
    except Exception as e:
        errors.append(repr(e))
spark = started.get("spark")
rows = spark.range(3).count() if spark is not None else None
after = dict(os.environ)
reads, read_error = [], None
try:
    catalog = f"duckdb:///{sys.argv[2]}/m.ducklake"
    build(catalog, f"{sys.argv[2]}/data/", "updates")
    state = DuckLake.open(catalog).snapshot()
    for again in range(2):
        if again:  # a session of its own, with an empty catalog
            spark.stop()
            spark = build_session("local[1]", "env-test-again", {"spark.ui.enabled": "false"}, log_file=sys.argv[1])
        reads.append({f"{t.schema_name}.{t.name}": sorted(map(tuple, spark.sql(scan.table_sql(spark, state, t)).collect()))
                      for t in state.tables.values()})
except Exception as e:
    read_error = repr(e)[:2000]
print(json.dumps({"errors": errors[:5], "passes": passes, "start_error": started.get("error"), "rows": rows,
                  "added": sorted(set(after) - set(before)), "removed": sorted(set(before) - set(after)),
                  "changed": sorted(k for k in before if k in after and before[k] != after[k]),
                  "reads": reads, "read_error": read_error}, default=str))
"""


@pytest.fixture(scope="module")
def child(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    from tests.support.spark_cluster import run_python

    tmp_path = tmp_path_factory.mktemp("session-env")
    (tmp_path / "lake" / "data").mkdir(parents=True)
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYSPARK_PYTHON", "SPARK_LOCAL_IP", "SPARK_AUTH_SOCKET_TIMEOUT", "SPARK_BUFFER_SIZE")}
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2])
    done = run_python(["-c", CHILD, str(tmp_path / "spark.log"), str(tmp_path / "lake")], env=env,
                      log_dir=tmp_path / "child", timeout=300)
    assert done.returncode == 0, done.stderr[-4000:]
    got: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return got


def test_a_driver_starting_on_another_thread_leaves_the_environment_alone(child: dict[str, Any]) -> None:
    got = child
    assert got["start_error"] is None and got["rows"] == 3, got
    assert got["errors"] == [] and got["passes"] > 0, got
    assert (got["added"], got["removed"], got["changed"]) == ([], [], []), got


def test_a_session_made_again_reads_through_manifests_of_its_own(child: dict[str, Any]) -> None:
    """Seen: the second session's read failed with the manifest's table unresolved, as the process remembered
    having made it in the first session's catalog."""
    assert child["read_error"] is None, child["read_error"]
    first, again = child["reads"]
    assert first == again and sum(len(rows) for rows in first.values()) > 0
