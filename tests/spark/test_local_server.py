"""The warm local server (`spark/env/local_server.py`, a driver JVM joined through Py4J): started on first use, shared
by later and concurrent processes, kept while a process uses it, stopped when idle, replaced when killed; each
process has its own session on it, and cancels and leaves without touching the others' work.

Each client is a real child process (only one SparkContext per process; and leases are per process). Servers live
under a temporary root and are stopped on the way out, failure or not.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from dbt.adapters.ducklake.spark.env import local_server
from tests.support.local_servers import servers_root, wait_for
from tests.support.spark_cluster import REPO_ROOT, run_python

pytestmark = pytest.mark.slow

IDLE = 4.0  # seconds: the servers here stop this long after their last client
CLIENT_TIMEOUT = 400.0  # a first attach starts a JVM: 20-60 s on the shared 2-core machine

# attach, run a query through the server, optionally hold the lease until a file exists, print the outcome as JSON
CLIENT = """
import json, os, sys, time
from dbt.adapters.ducklake.spark.env import local_server
from dbt.adapters.ducklake.spark.env.session import gateway_session
scope, root, idle, hold = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4]
print(json.dumps({"begin": time.time()}), flush=True)
server = local_server.attach(scope, "test " + scope, "local[1]", {"spark.sql.shuffle.partitions": "2"},
                             idle_timeout=idle, root=root)
spark = gateway_session(server.port, server.token)
answer = spark.sql("SELECT 40 + 2 AS x").collect()[0].x
print(json.dumps({"attached": time.time()}), flush=True)
while hold and not os.path.exists(hold):
    time.sleep(0.1)
print(json.dumps({"pid": server.pid, "port": server.port, "fresh": server.fresh, "answer": answer,
                  "dir": server.directory, "log": server.log_path, "t": time.time()}))
"""


@pytest.fixture
def root(tmp_path: Path) -> Iterator[str]:
    with servers_root(tmp_path) as path:
        yield path


def client(root: str, scope: str, log_dir: Path, hold: str = "") -> dict:
    result = run_python(["-c", CLIENT, scope, root, str(IDLE), hold], env=dict(os.environ), log_dir=log_dir,
                        timeout=CLIENT_TIMEOUT)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.last_json()


def spawn(root: str, scope: str, log_dir: Path, hold: str = "") -> tuple[subprocess.Popen[bytes], Path]:
    """A client running in the background (stdout to a file); with hold, it keeps its lease until that file exists."""
    log_dir.mkdir(parents=True, exist_ok=True)
    out = log_dir / "stdout"
    with open(out, "wb") as f, open(log_dir / "stderr", "wb") as err:
        proc = subprocess.Popen([sys.executable, "-c", CLIENT, scope, root, str(IDLE), hold], stdout=f, stderr=err,
                                cwd=REPO_ROOT, start_new_session=True)
    return proc, out


def finish(proc: subprocess.Popen[bytes], out: Path) -> dict:
    try:
        assert proc.wait(timeout=CLIENT_TIMEOUT) == 0, (out.parent / "stderr").read_text()[-3000:]
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    return json.loads(out.read_text().splitlines()[-1])


def alive(pid: int) -> bool:
    return local_server._alive(pid)


def test_start_reuse_lease_and_idle_stop(root: str, tmp_path: Path) -> None:
    release = str(tmp_path / "release")
    holder, holder_out = spawn(root, "lake-a", tmp_path / "holder", hold=release)
    try:
        wait_for("the first client to attach", lambda: holder_out.exists() and "attached" in holder_out.read_text(),
                 CLIENT_TIMEOUT)
        second = client(root, "lake-a", tmp_path / "second")
        assert second["answer"] == 42 and second["fresh"] is False  # the running server, not a new one
        time.sleep(IDLE * 2)  # the holder still has its lease: no idle stop
        assert alive(second["pid"])
    finally:
        Path(release).touch()
        first = finish(holder, holder_out)
    assert first["fresh"] is True and first["answer"] == 42
    assert first["pid"] == second["pid"] and first["port"] == second["port"]
    # the last lease is gone: the supervisor stops the server after IDLE seconds and forgets it
    wait_for("the idle stop", lambda: not alive(first["pid"]), IDLE + 60)
    assert local_server.status(first["dir"]) is None
    assert not os.path.exists(os.path.join(first["dir"], "server.json"))
    assert f"no client for {IDLE:g} s" in Path(first["log"]).read_text()


def test_concurrent_first_use_starts_one_server_and_a_killed_one_is_replaced(root: str, tmp_path: Path) -> None:
    a = spawn(root, "lake-b", tmp_path / "a")
    b = spawn(root, "lake-b", tmp_path / "b")
    ra, rb = finish(*a), finish(*b)
    assert ra["pid"] == rb["pid"] and sorted([ra["fresh"], rb["fresh"]]) == [False, True]
    assert ra["answer"] == rb["answer"] == 42

    os.kill(ra["pid"], signal.SIGKILL)  # a crash of the server's JVM
    wait_for("the killed server to be gone", lambda: not alive(ra["pid"]), 30)
    after = client(root, "lake-b", tmp_path / "after")
    assert after["fresh"] is True and after["pid"] != ra["pid"] and after["answer"] == 42
    assert after["dir"] == ra["dir"]


def test_server_directory_is_per_scope_and_settings(tmp_path: Path) -> None:
    root = str(tmp_path)
    one = local_server.server_dir("lake-a", "local[1]", {}, root)
    assert one == local_server.server_dir("lake-a", "local[1]", {}, root)
    assert one != local_server.server_dir("lake-b", "local[1]", {}, root)
    assert one != local_server.server_dir("lake-a", "local[2]", {}, root)
    assert one != local_server.server_dir("lake-a", "local[1]", {"spark.driver.memory": "2g"}, root)
    with pytest.raises(ValueError, match="spark.sql.session.timeZone"):
        local_server.server_settings("local[1]", {"spark.sql.session.timeZone": "Europe/Paris"})


# joins the server, makes a temporary view, runs a tagged job that lasts until cancelled (or, with "quick", a query),
# cancels its own jobs, leaves; prints what it saw as JSON lines
SHARER = """
import json, os, sys, threading, time
from dbt.adapters.ducklake.spark.env import local_server
from dbt.adapters.ducklake.spark.env.session import cancel_all, gateway_session, is_classic, leave_gateway, tag_jobs
scope, root, me, mode, go = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5]
server = local_server.attach(scope, "test " + scope, "local[2]", {}, idle_timeout=60, root=root)
spark = gateway_session(server.port, server.token, {"spark.sql.shuffle.partitions": "3"})
spark.range(2).createOrReplaceTempView("only_" + me)
views = sorted(t.name for t in spark.catalog.listTables() if t.name.startswith("only_"))
print(json.dumps({"views": views, "classic": is_classic(spark), "pid": server.pid,
                  "partitions": spark.conf.get("spark.sql.shuffle.partitions")}), flush=True)
if mode == "long":
    outcome = {}
    def job():
        tag_jobs(spark, "job-" + me)
        try:
            spark.range(0, 10**13, 1, 1).selectExpr("sum(id * 7 % 13)").collect()  # one task: a core stays free
            outcome["done"] = True
        except Exception as e:  # cancelled
            outcome["error"] = type(e).__name__ + ": " + str(e)[:200]
    t = threading.Thread(target=job)
    t.start()
    while not os.path.exists(go):
        time.sleep(0.1)
    time.sleep(3)
    print(json.dumps({"running_after_other_left": t.is_alive()}), flush=True)
    cancel_all(spark)
    t.join(120)
    print(json.dumps({"joined": not t.is_alive(), **outcome}), flush=True)
else:
    tag_jobs(spark, "job-" + me)
    print(json.dumps({"answer": spark.sql("SELECT 6 * 7 AS x").collect()[0].x}), flush=True)
    cancel_all(spark)  # this process has nothing running: the other's job must go on
leave_gateway(spark)
print(json.dumps({"left": True}), flush=True)
"""


def test_processes_share_the_driver_with_their_own_sessions_cancels_and_exits(root: str, tmp_path: Path) -> None:
    go = str(tmp_path / "go")
    (tmp_path / "a").mkdir()
    out_a = tmp_path / "a" / "stdout"
    with open(out_a, "wb") as f, open(tmp_path / "a" / "stderr", "wb") as err:
        a = subprocess.Popen([sys.executable, "-c", SHARER, "lake-c", root, "a", "long", go], stdout=f, stderr=err,
                             cwd=REPO_ROOT, start_new_session=True)
    try:
        wait_for("A to join", lambda: out_a.exists() and "views" in out_a.read_text(), CLIENT_TIMEOUT)
        b = run_python(["-c", SHARER, "lake-c", root, "b", "quick", go], env=dict(os.environ),
                       log_dir=tmp_path / "b", timeout=CLIENT_TIMEOUT)
        assert b.returncode == 0, b.stderr[-3000:]
        seen_b = [json.loads(line) for line in b.stdout.splitlines() if line.startswith("{")]
        Path(go).touch()
        assert a.wait(timeout=CLIENT_TIMEOUT) == 0, (tmp_path / "a" / "stderr").read_text()[-3000:]
    finally:
        if a.poll() is None:
            os.killpg(a.pid, signal.SIGKILL)
    seen_a = [json.loads(line) for line in out_a.read_text().splitlines() if line.startswith("{")]
    # one JVM, a session each: temporary views and runtime settings are each process's own
    assert seen_a[0]["pid"] == seen_b[0]["pid"] and seen_a[0]["classic"] and seen_b[0]["classic"]
    assert seen_a[0]["views"] == ["only_a"] and seen_b[0]["views"] == ["only_b"]
    assert seen_a[0]["partitions"] == seen_b[0]["partitions"] == "3"
    assert seen_b[1] == {"answer": 42} and seen_b[-1] == {"left": True}
    # B's cancel and B's exit left A's job running (B did not stop the shared context); A's cancel stopped it
    assert seen_a[1] == {"running_after_other_left": True}
    assert seen_a[2]["joined"] and "done" not in seen_a[2] and "cancel" in seen_a[2]["error"].lower()
    assert alive(seen_a[0]["pid"])  # the server outlives its clients until it is idle
