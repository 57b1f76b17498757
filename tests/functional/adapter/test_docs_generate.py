"""dbt-tests-adapter's docs generate and catalog suites. Spark's type names (`bigint` for a seed's integers, as
dbt-spark, `string`, `timestamp_ntz` for zone-less date-times) and relation types (`table`, `view`, as dbt-spark);
tables carry DuckLake's row and byte statistics, checked here against what DuckDB reads from the same lake."""

from __future__ import annotations

import json
import os

import pytest
from dbt.tests.adapter.basic import expected_catalog
from dbt.tests.adapter.basic.test_docs_generate import (
    BaseDocsGenerate,
    BaseDocsGenReferences,
    run_and_generate,
    verify_catalog,
)
from dbt.tests.adapter.catalog import files
from dbt.tests.adapter.catalog.relation_types import CatalogRelationTypes

from tests.support import reference


def _with_lake_stats(project, expected: dict) -> dict:
    """The expected catalog with each table's statistics: those of catalog.json, once their values are DuckDB's."""
    with open(os.path.join(project.project_root, "target", "catalog.json")) as f:
        found = json.load(f)
    catalog = project.adapter.config.credentials.catalog
    checked = 0
    with reference.attached(catalog, read_only=True) as con:
        for key in "nodes", "sources":
            for unique_id, node in expected[key].items():
                stats = found[key][unique_id]["stats"]
                if "rows" not in stats:
                    continue
                meta = found[key][unique_id]["metadata"]
                rows, size = con.execute(
                    "SELECT count(*), (SELECT file_size_bytes FROM __ducklake_metadata_lake.ducklake_table_stats s "
                    "JOIN __ducklake_metadata_lake.ducklake_table t USING (table_id) WHERE t.end_snapshot IS NULL "
                    f"AND t.table_name = '{meta['name']}') FROM lake.{meta['schema']}.{meta['name']}"
                ).fetchone()
                assert (stats["rows"]["value"], stats["bytes"]["value"]) == (rows, size), unique_id
                assert stats["has_stats"]["value"] is True
                node["stats"] = stats
                checked += 1
    assert checked, "no table with statistics in the catalog"
    return expected


class NoUser:
    @pytest.fixture(scope="class")
    def profile_user(self):
        return None  # a lake has no owner; the catalog's table_owner is None


class TestDocsGenerate(NoUser, BaseDocsGenerate):
    @pytest.fixture(scope="class")
    def expected_catalog(self, project, profile_user):
        return expected_catalog.base_expected_catalog(
            project, role=None, id_type="bigint", text_type="string", time_type="timestamp_ntz", view_type="view",
            table_type="table", model_stats=expected_catalog.no_stats(),
        )

    def test_run_and_generate_no_compile(self, project, expected_catalog):
        start_time = run_and_generate(project, ["--no-compile"])
        assert not os.path.exists(os.path.join(project.project_root, "target", "manifest.json"))
        verify_catalog(project, _with_lake_stats(project, expected_catalog), start_time)

    def test_run_and_generate(self, project, expected_catalog):
        start_time = run_and_generate(project)
        verify_catalog(project, _with_lake_stats(project, expected_catalog), start_time)
        assert os.path.exists(os.path.join(".", "target", "assets", "lorem-ipsum.txt"))
        assert not os.path.exists(os.path.join(".", "target", "non-existent-assets"))


class TestDocsGenReferences(NoUser, BaseDocsGenReferences):
    @pytest.fixture(scope="class")
    def expected_catalog(self, project, profile_user):
        return expected_catalog.expected_references_catalog(
            project, role=None, id_type="bigint", text_type="string", time_type="timestamp_ntz", bigint_type="bigint",
            view_type="view", table_type="table", model_stats=expected_catalog.no_stats(),
        )

    def test_references(self, project, expected_catalog):
        start_time = run_and_generate(project)
        verify_catalog(project, _with_lake_stats(project, expected_catalog), start_time)


class TestCatalogRelationTypes(CatalogRelationTypes):
    """No materialized view (DuckLake has none: the materialization fails by design)."""

    @pytest.fixture(scope="class", autouse=True)
    def models(self):
        yield {"my_table.sql": files.MY_TABLE, "my_view.sql": files.MY_VIEW}

    @pytest.mark.parametrize(
        "node_name,relation_type",
        [("seed.test.my_seed", "table"), ("model.test.my_table", "table"), ("model.test.my_view", "view")],
    )
    def test_relation_types_populate_correctly(self, docs, node_name, relation_type):
        super().test_relation_types_populate_correctly(docs, node_name, relation_type)
