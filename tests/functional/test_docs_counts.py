"""`dbt docs generate` reports exact row counts (record counts minus deleted rows, plus inlined rows), as DuckDB's
count(*) answers, not DuckLake's estimated size (which counts deleted rows)."""

from __future__ import annotations

import json
import os

import pytest
from dbt.tests.util import run_dbt

from tests.support import reference

MODEL = "{{ config(materialized='table') }}\nselect id from range(9)"


class TestDocsRowCounts:
    @pytest.fixture(scope="class")
    def models(self) -> dict[str, str]:
        return {"nine.sql": MODEL}

    def test_row_count_is_exact(self, project: object) -> None:
        run_dbt(["run"])
        catalog = project.adapter.config.credentials.catalog  # type: ignore[attr-defined]
        schema = project.test_schema  # type: ignore[attr-defined]
        with reference.attached(catalog) as con:
            con.execute(f"DELETE FROM lake.{schema}.nine WHERE id = 4")  # an inlined delete
            con.execute(f"DELETE FROM lake.{schema}.nine WHERE id IN (0, 1)")
            con.execute(f"INSERT INTO lake.{schema}.nine VALUES (100)")  # an inlined row
            exact = con.execute(f"SELECT count(*) FROM lake.{schema}.nine").fetchone()[0]
            estimated = con.execute("SELECT estimated_size FROM duckdb_tables() WHERE database_name = 'lake' AND "
                                    "table_name = 'nine'").fetchone()[0]
        assert exact == 7 and estimated != exact
        run_dbt(["docs", "generate"])
        with open(os.path.join(project.project_root, "target", "catalog.json")) as f:  # type: ignore[attr-defined]
            nodes = json.load(f)["nodes"]
        assert nodes["model.test.nine"]["stats"]["rows"]["value"] == exact


APPEND = """
{{ config(materialized='incremental') }}
select id from range(5)
{% if is_incremental() %} where id > (select max(id) from {{ this }}) {% endif %}
"""


class TestNothingNewSaysSo:
    @pytest.fixture(scope="class")
    def models(self) -> dict[str, str]:
        return {"appended.sql": APPEND}

    def test_an_incremental_run_that_adds_nothing_says_insert_0(self, project: object) -> None:
        first = run_dbt(["run"])
        assert first[0].adapter_response["_message"].startswith("CTAS")
        catalog = project.adapter.config.credentials.catalog  # type: ignore[attr-defined]
        with reference.attached(catalog, read_only=True) as con:
            before = con.execute("SELECT max(snapshot_id) FROM lake.snapshots()").fetchone()[0]
        second = run_dbt(["run"])
        assert second[0].adapter_response["_message"] == "INSERT 0"
        assert second[0].adapter_response["rows_affected"] == 0
        with reference.attached(catalog, read_only=True) as con:
            assert con.execute("SELECT max(snapshot_id) FROM lake.snapshots()").fetchone()[0] == before
