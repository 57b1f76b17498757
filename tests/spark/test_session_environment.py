"""A driver starting on one thread leaves the process environment alone for the others: dbt starts the embedded
session in the background while its main thread parses the project, and dbt iterates os.environ (to scrub secrets
from its errors). A variable added or removed meanwhile breaks that iteration (seen: a dbt command failing with
KeyError 'PYSPARK_GATEWAY_PORT'). In a fresh process: the environment a session needs is prepared on the main thread,
then a driver starts on another thread while the main thread iterates the environment without pause."""

from __future__ import annotations

import json
import os
from pathlib import Path

CHILD = """
import json, os, sys, threading
from dbt.adapters.ducklake.spark.env.session import build_session, prepare_environment

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
print(json.dumps({"errors": errors[:5], "passes": passes, "start_error": started.get("error"), "rows": rows,
                  "added": sorted(set(after) - set(before)), "removed": sorted(set(before) - set(after)),
                  "changed": sorted(k for k in before if k in after and before[k] != after[k])}))
"""


def test_a_driver_starting_on_another_thread_leaves_the_environment_alone(tmp_path: Path) -> None:
    from tests.support.spark_cluster import run_python

    env = {k: v for k, v in os.environ.items()
           if k not in ("PYSPARK_PYTHON", "SPARK_LOCAL_IP", "SPARK_AUTH_SOCKET_TIMEOUT", "SPARK_BUFFER_SIZE")}
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2])
    child = run_python(["-c", CHILD, str(tmp_path / "spark.log")], env=env, log_dir=tmp_path / "child", timeout=300)
    assert child.returncode == 0, child.stderr[-4000:]
    got = json.loads(child.stdout.strip().splitlines()[-1])
    assert got["start_error"] is None and got["rows"] == 3, got
    assert got["errors"] == [] and got["passes"] > 0, got
    assert (got["added"], got["removed"], got["changed"]) == ([], [], []), got
