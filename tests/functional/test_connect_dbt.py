"""A dbt project run through Spark Connect (`master: sc://…`): a Connect server on 127.0.0.1, dbt in a child process,
the lake read by DuckDB afterwards."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from tests.support import reference
from tests.support.spark_cluster import connect_server, run_python

PY_MODEL = """
from pyspark.sql import functions as F


def model(dbt, session):
    dbt.config(materialized="table")
    stg = dbt.ref("stg")
    return stg.withColumn("name_len", F.length("name")).where(F.col("id") > 1)
"""

PROJECT = {
    "dbt_project.yml": "name: viaconnect\nversion: '1.0'\nprofile: viaconnect\nconfig-version: 2\n",
    "seeds/src.csv": "id,name\n1,a\n2,b\n3,c\n",
    "models/stg.sql": "{{ config(materialized='view') }}\nselect id, upper(name) as name from {{ ref('src') }}",
    "models/tbl.sql": "{{ config(materialized='table', partition_by=['id']) }}\nselect * from {{ ref('stg') }}",
    "models/py_tbl.py": PY_MODEL,
    "models/schema.yml": "version: 2\nmodels:\n  - name: tbl\n    columns:\n      - name: id\n"
                         "        data_tests: [unique, not_null]\n",
}


def build_project(master: str, tmp_path: Path, env: dict[str, str]) -> None:
    """`dbt build` of PROJECT in a child process on the given Spark master, checked with DuckDB: the SQL models and
    the Python model (same logic as SQL: DuckDB computes it from the view and compares)."""
    project = tmp_path / "project"
    for name, text in PROJECT.items():
        (project / name).parent.mkdir(parents=True, exist_ok=True)
        (project / name).write_text(text)
    lake = tmp_path / "lake"
    (project / "profiles.yml").write_text(
        "viaconnect:\n  target: dev\n  outputs:\n    dev:\n      type: ducklake\n"
        f"      catalog: {lake}/metadata.ducklake\n      data_path: {lake}/data/\n      schema: main\n"
        f"      master: {master}\n      threads: 2\n")
    env = {**env, "DBT_PROFILES_DIR": str(project), "PYSPARK_PYTHON": sys.executable}
    result = run_python(["-c", "from dbt.cli.main import cli; cli()", "build", "--project-dir", str(project)],
                        env=env, log_dir=tmp_path / "dbt_logs", timeout=600)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert "PASS=6" in result.stdout  # seed, view, table, Python table, two tests
    with reference.attached(str(lake / "metadata.ducklake"), read_only=True) as con:
        assert con.execute("SELECT * FROM lake.main.tbl ORDER BY id").fetchall() == [(1, "A"), (2, "B"), (3, "C")]
        assert con.execute("SELECT * FROM lake.main.stg ORDER BY id").fetchall() == [(1, "A"), (2, "B"), (3, "C")]
        assert con.execute("SELECT * FROM lake.main.py_tbl ORDER BY id").fetchall() == con.execute(
            "SELECT id, name, length(name) FROM lake.main.stg WHERE id > 1 ORDER BY id").fetchall()
        messages = [r[0] for r in con.execute("SELECT commit_message FROM lake.snapshots() WHERE snapshot_id > 0 "
                                              "ORDER BY snapshot_id").fetchall()]
    nodes = [m.split(":")[0] for m in messages]
    assert nodes[:2] == ["seed.viaconnect.src", "model.viaconnect.stg"]
    assert sorted(nodes[2:]) == ["model.viaconnect.py_tbl", "model.viaconnect.tbl"]


# The version matrix names the default environment's interpreter here: a client of this environment's pyspark minor
# then builds through a server of the default minor (Spark Connect keeps clients and servers of 4.x compatible).
OTHER_SERVER = os.environ.get("DUCKLAKE_CONNECT_SERVER_PYTHON")


@pytest.mark.slow
@pytest.mark.parametrize("server_python", [None, *([OTHER_SERVER] if OTHER_SERVER else [])],
                         ids=lambda p: "same-version" if p is None else "server-of-another-minor")
def test_dbt_build_through_spark_connect(tmp_path: Path, server_python: str | None) -> None:
    if server_python is not None:
        import subprocess

        import pyspark

        served = subprocess.run([server_python, "-c", "import pyspark; print(pyspark.__version__)"], check=True,
                                capture_output=True, text=True).stdout.strip()
        assert served.split(".")[:2] != pyspark.__version__.split(".")[:2], (served, pyspark.__version__)
    with connect_server(tmp_path / "server", python=server_python) as server:
        build_project(server.url, tmp_path, dict(os.environ))
