"""The first hour, in real dbt processes: no way to write to the wrong lake.

A typo in a profile key is an error naming the nearest key; relative paths are the project's, whatever directory dbt
runs from, and `dbt debug` shows them absolute; `dbt debug` creates nothing; a lake is created by a writing command
only, and never over a data path holding another lake's files; orphan deletion refuses files that look like another
lake's.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import reference

pytestmark = pytest.mark.slow

MODEL = "{{ config(materialized='table') }}\nselect id from range(3)"


def _project(root: Path, profile_body: str) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "dbt_project.yml").write_text("name: hour\nversion: '1.0'\nprofile: hour\nconfig-version: 2\n")
    (root / "models").mkdir(exist_ok=True)
    (root / "models" / "m.sql").write_text(MODEL)
    (root / "profiles.yml").write_text("hour:\n  target: dev\n  outputs:\n    dev:\n      type: ducklake\n"
                                       "      master: 'local[1]'\n      threads: 1\n" + profile_body)
    return root


def _dbt(cwd: Path, project: Path, *args: str) -> tuple[int, str]:
    env = {**os.environ, "DBT_PROFILES_DIR": str(project), "PYSPARK_PYTHON": sys.executable}
    proc = subprocess.Popen([sys.executable, "-c", "from dbt.cli.main import cli; cli()", *args, "--project-dir",
                             str(project)], cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=600)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    return proc.returncode, out.decode(errors="replace")


def _tree(root: Path) -> set[str]:
    return {os.path.relpath(os.path.join(d, n), root) for d, dirs, files in os.walk(root) for n in dirs + files}


def test_profile_typo_is_an_error_naming_the_key(tmp_path: Path) -> None:
    project = _project(tmp_path / "proj", "      catlog: lake/metadata.ducklake\n")
    code, out = _dbt(tmp_path, project, "debug")
    assert code != 0
    assert "unknown key `catlog`" in out and "did you mean `catalog`" in out
    assert not (tmp_path / "proj" / "metadata.ducklake").exists()


def test_paths_are_the_projects_and_debug_creates_nothing(tmp_path: Path) -> None:
    project = _project(tmp_path / "proj", "      catalog: lake/metadata.ducklake\n      data_path: lake/data/\n")
    before_cwd, before_proj = _tree(tmp_path), _tree(project)
    code, out = _dbt(tmp_path, project, "debug")  # run from the parent directory
    assert code == 0, out[-3000:]
    assert f"catalog: {project}/lake/metadata.ducklake" in out and f"data_path: {project}/lake/data/" in out
    assert "holds no DuckLake yet" in out
    assert not (project / "lake").exists() and not (tmp_path / "lake").exists()
    # only dbt's own files (its logs, target/, the anonymous user id) appeared
    assert all(p.startswith(("logs", "target", ".user.yml")) for p in _tree(project) - before_proj)
    assert all(p.startswith(("proj", "logs", "target", ".user.yml")) for p in _tree(tmp_path) - before_cwd)
    # a reading command does not create it either, and says how
    code, out = _dbt(tmp_path, project, "compile")
    assert code != 0 and "holds no DuckLake yet" in out and not (project / "lake").exists()
    # the first writing command creates it in the project, not where dbt was started
    code, out = _dbt(tmp_path, project, "run")
    assert code == 0, out[-3000:]
    assert (project / "lake" / "metadata.ducklake").exists() and not (tmp_path / "lake").exists()
    # quiet: no Spark or JVM start-up lines on the terminal; they are in logs/spark.log beside dbt's log
    for noise in ("log4j", "incubator", "NativeCodeLoader", "WARN Utils", "setLogLevel"):
        assert noise not in out, noise
    assert "incubator" in (project / "logs" / "spark.log").read_text()
    with reference.attached(str(project / "lake" / "metadata.ducklake"), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM lake.main.m").fetchone()[0] == 3

    # a second catalog (a typo) over the same data path: its creation is refused, nothing is written
    stray = _project(tmp_path / "stray", f"      catalog: {project}/lake/metadta.ducklake\n"
                                         f"      data_path: {project}/lake/data/\n")
    code, out = _dbt(tmp_path, stray, "run")
    assert code != 0 and "already holds Parquet files" in out, out[-3000:]
    assert not (project / "lake" / "metadta.ducklake").exists()



SLOW = ("{{ config(materialized='table') }}\n"
        "select max(a.id * b.id) as s from range(300000) a cross join range(300000) b")  # no overflow: runs on


def test_ctrl_c_stops_the_running_model(tmp_path: Path) -> None:
    import time

    project = _project(tmp_path / "proj", "      catalog: lake/metadata.ducklake\n      data_path: lake/data/\n")
    (project / "models" / "slow.sql").write_text(SLOW)
    env = {**os.environ, "DBT_PROFILES_DIR": str(project), "PYSPARK_PYTHON": sys.executable}
    proc = subprocess.Popen(  # SIGINT restored: a non-interactive shell's background job would ignore it
        [sys.executable, "-c", "from dbt.cli.main import cli; cli()", "run", "--select", "slow", "--project-dir",
         str(project)], cwd=tmp_path, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, start_new_session=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    os.set_blocking(proc.stdout.fileno(), False)  # type: ignore[union-attr]
    out = b""
    try:
        deadline = time.monotonic() + 300
        while b"START sql table model" not in out and time.monotonic() < deadline:
            time.sleep(0.5)
            out += proc.stdout.read() or b""  # type: ignore[union-attr]
        time.sleep(3)  # the cross join's job is running
        proc.send_signal(signal.SIGINT)
        sent = time.monotonic()
        try:
            proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            out += proc.stdout.read() or b""  # type: ignore[union-attr]
            pytest.fail("dbt still ran 120 s after Ctrl-C; its output:\n" + out.decode(errors="replace")[-3000:])
        took = time.monotonic() - sent
        out += proc.stdout.read() or b""  # type: ignore[union-attr]
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    text = out.decode(errors="replace")
    assert proc.returncode == 2 and took < 60, (proc.returncode, took, text[-3000:])
    assert "CANCEL query model.hour.slow" in text and "Exited because of keyboard interrupt" in text
    # no JVM stack traces and no trace from the adapter (dbt-core prints its own traceback of the interrupt)
    assert "at org.apache" not in text and "java.lang" not in text and "dbt/adapters/ducklake" not in text
    with reference.attached(str(project / "lake" / "metadata.ducklake"), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM duckdb_tables() WHERE database_name = 'lake'").fetchone()[0] == 0
    # nothing of the cancelled write stays in the data folder: no file, no empty table folder
    left = [str(p.relative_to(project)) for p in (project / "lake" / "data").rglob("*")] \
        if (project / "lake" / "data").exists() else []
    assert left == [], left
