"""A dbt project run through Spark Connect (`master: sc://…`): a Connect server on 127.0.0.1, dbt in a child process,
the lake read by DuckDB afterwards."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from tests.support import reference
from tests.support.spark_cluster import connect_server, run_python

PROJECT = {
    "dbt_project.yml": "name: viaconnect\nversion: '1.0'\nprofile: viaconnect\nconfig-version: 2\n",
    "seeds/src.csv": "id,name\n1,a\n2,b\n3,c\n",
    "models/stg.sql": "{{ config(materialized='view') }}\nselect id, upper(name) as name from {{ ref('src') }}",
    "models/tbl.sql": "{{ config(materialized='table', partition_by=['id']) }}\nselect * from {{ ref('stg') }}",
    "models/schema.yml": "version: 2\nmodels:\n  - name: tbl\n    columns:\n      - name: id\n"
                         "        data_tests: [unique, not_null]\n",
}


@pytest.mark.slow
def test_dbt_build_through_spark_connect(tmp_path: Path) -> None:
    project = tmp_path / "project"
    for name, text in PROJECT.items():
        (project / name).parent.mkdir(parents=True, exist_ok=True)
        (project / name).write_text(text)
    lake = tmp_path / "lake"
    with connect_server(tmp_path / "server") as server:
        (project / "profiles.yml").write_text(
            "viaconnect:\n  target: dev\n  outputs:\n    dev:\n      type: ducklake\n"
            f"      catalog: {lake}/metadata.ducklake\n      data_path: {lake}/data/\n      schema: main\n"
            f"      master: {server.url}\n      threads: 2\n")
        env = {**os.environ, "DBT_PROFILES_DIR": str(project), "PYSPARK_PYTHON": sys.executable}
        result = run_python(["-c", "from dbt.cli.main import cli; cli()", "build", "--project-dir", str(project)],
                            env=env, log_dir=tmp_path / "dbt_logs", timeout=600)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert "PASS=5" in result.stdout  # seed, view, table, two tests
    with reference.attached(str(lake / "metadata.ducklake"), read_only=True) as con:
        assert con.execute("SELECT * FROM lake.main.tbl ORDER BY id").fetchall() == [(1, "A"), (2, "B"), (3, "C")]
        assert con.execute("SELECT * FROM lake.main.stg ORDER BY id").fetchall() == [(1, "A"), (2, "B"), (3, "C")]
        messages = [r[0] for r in con.execute("SELECT commit_message FROM lake.snapshots() WHERE snapshot_id > 0 "
                                              "ORDER BY snapshot_id").fetchall()]
    assert [m.split(":")[0] for m in messages] == ["seed.viaconnect.src", "model.viaconnect.stg",
                                                   "model.viaconnect.tbl"]
