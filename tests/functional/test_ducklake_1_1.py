"""A dbt project on a DuckLake 1.1 lake (`ducklake_version: "1.1"`): the adapter creates the lake at 1.1, writes
tables, an incremental merge (delete files), a view whose column comment goes to ducklake_view_column_tag, and the
lake turned back into 1.0 (tests/support/spec_1_1.py) reads in DuckDB 1.5.5 as dbt wrote it."""

from __future__ import annotations

import sqlite3

import pytest
from dbt.tests.util import run_dbt

from tests.support import reference, spec_1_1
from tests.support.invariants import violations

TABLE = "{{ config(materialized='table') }}\nselect id, id * 2 as v from range(1, 6)"
MERGE = """{{ config(materialized='incremental', incremental_strategy='merge', unique_key='id') }}
select id, concat('b', '{{ var('batch') }}') as name from range({{ var('batch') }}, 6)"""
VIEW = "select id as ident, v from {{ ref('tbl') }} where v > 4"
SCHEMA_YML = """
version: 2
models:
  - name: vw
    config: {persist_docs: {relation: true, columns: true}}
    columns:
      - name: ident
        description: "the view column's comment"
"""


class TestDuckLake11Project:
    @pytest.fixture(scope="class")
    def dbt_profile_target(self, ducklake_root: str, unique_schema: str) -> dict[str, object]:
        return {"type": "ducklake", "catalog": f"sqlite:///{ducklake_root}/{unique_schema}.sqlite",
                "data_path": f"{ducklake_root}/{unique_schema}_data/", "master": "local[2]", "threads": 1,
                "ducklake_version": "1.1"}

    @pytest.fixture(scope="class")
    def models(self) -> dict[str, str]:
        return {"tbl.sql": TABLE, "merged.sql": MERGE, "vw.sql": VIEW, "schema.yml": SCHEMA_YML}

    def test_a_project_on_a_1_1_lake(self, project: object) -> None:
        url = project.adapter.config.credentials.catalog  # type: ignore[attr-defined]
        schema = project.test_schema  # type: ignore[attr-defined]
        assert len(run_dbt(["run", "--vars", "{batch: 1}"])) == 3
        assert len(run_dbt(["run", "--vars", "{batch: 3}", "--select", "merged"])) == 1
        with sqlite3.connect(url.removeprefix("sqlite:///")) as con:
            assert con.execute("SELECT value FROM ducklake_metadata WHERE key = 'version'").fetchone() == ("1.1",)
            # by the name the view's query gives the column (the view has no column aliases)
            assert con.execute("SELECT column_name, key, value FROM ducklake_view_column_tag WHERE end_snapshot IS "
                               "NULL").fetchall() == [("ident", "comment", "the view column's comment")]
            assert con.execute("SELECT count(*) FROM ducklake_data_file WHERE row_group_count IS NULL").fetchone() == (0,)
            assert con.execute("SELECT count(*) FROM ducklake_delete_file").fetchone()[0] >= 1
        assert violations(url) == []
        spec_1_1.to_1_0(url)
        with reference.attached(url, read_only=True) as con:
            assert con.execute(f"SELECT * FROM lake.{schema}.tbl ORDER BY id").fetchall() == [
                (i, i * 2) for i in range(1, 6)]
            assert con.execute(f"SELECT * FROM lake.{schema}.merged ORDER BY id").fetchall() == [
                (1, "b1"), (2, "b1"), (3, "b3"), (4, "b3"), (5, "b3")]
