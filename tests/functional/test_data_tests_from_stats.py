"""dbt data tests whose filter the lake's statistics prove matches no row (a not_null test on a column with no NULL
in any file, no inlined row) are answered without reading the table (spark/answer/read_pruning.py), through a view model
too, and a NULL that another writer adds later, in a file or inlined, still fails them with the right count. The
generic tests that must read values (unique, accepted_values, relationships) count small tables' rows on the driver
(spark/answer/small_counts.py): their failures are DuckDB's counts."""

from __future__ import annotations

import os

import pytest
from dbt.tests.util import run_dbt

from tests.support import reference

ORDERS = """
{{ config(materialized='table') }}
select id, concat('o', id) as name, id * 2 as qty, case when id % 2 = 0 then 'even' else 'odd' end as kind
from range(0, 20, 1, 2)
"""
ORDERS_V = """
{{ config(materialized='view') }}
select id as order_id, name from {{ ref('orders') }}
"""
SCHEMA_YML = """
version: 2
models:
  - name: orders_v
    columns:
      - name: order_id
        data_tests:
          - not_null
          - relationships:
              arguments: {to: ref('orders'), field: qty}
              config: {severity: warn}
  - name: orders
    columns:
      - name: id
        data_tests: [not_null, unique]
      - name: name
        data_tests: [not_null]
      - name: qty
        data_tests:
          - not_null:
              config: {where: "id < 10"}
      - name: kind
        data_tests:
          - accepted_values:
              arguments:
                values: ['even', 'odd']
"""


class TestDataTestsFromStatistics:
    @pytest.fixture(scope="class")
    def models(self) -> dict[str, str]:
        return {"orders.sql": ORDERS, "orders_v.sql": ORDERS_V, "schema.yml": SCHEMA_YML}

    def test_passing_then_failing_when_duckdb_adds_nulls(self, project: object) -> None:
        catalog = project.adapter.config.credentials.catalog  # type: ignore[attr-defined]
        schema = project.test_schema  # type: ignore[attr-defined]
        results = run_dbt(["build"])
        assert {r.node.name: (str(r.status), r.failures) for r in results if r.node.resource_type == "test"} == {
            "not_null_orders_id": ("pass", 0), "unique_orders_id": ("pass", 0),
            "not_null_orders_name": ("pass", 0), "not_null_orders_qty": ("pass", 0),
            "not_null_orders_v_order_id": ("pass", 0), "accepted_values_orders_kind__even__odd": ("pass", 0),
            "relationships_orders_v_order_id__qty__ref_orders_": ("warn", 10)}  # odd ids: no such qty
        # the not_null tests read no file: with the table's files away they still pass (unique must read: error)
        data = project.adapter.config.credentials.data_path  # type: ignore[attr-defined]
        files = [os.path.join(d, f) for d, _, fs in os.walk(data) for f in fs if f.endswith(".parquet")]
        assert files
        for f in files:
            os.rename(f, f + ".away")
        try:
            results = run_dbt(["test"], expect_pass=False)
        finally:
            for f in files:
                os.rename(f + ".away", f)
        assert {r.node.name: str(r.status) for r in results} == {
            "not_null_orders_id": "pass", "unique_orders_id": "error", "not_null_orders_name": "pass",
            "not_null_orders_qty": "pass", "not_null_orders_v_order_id": "pass",  # the view model's too
            "accepted_values_orders_kind__even__odd": "error", "relationships_orders_v_order_id__qty__ref_orders_": "error"}
        # (the ATTACH option, not set_option: DuckDB 1.5's set_option crashes on a lake that has a view)
        with reference.attached(catalog, options={"DATA_INLINING_ROW_LIMIT": 10}) as con:
            con.execute(f"INSERT INTO lake.{schema}.orders VALUES (100, NULL, 1, 'even'), (101, NULL, NULL, 'weird')")  # inlined
        with reference.attached(catalog, options={"DATA_INLINING_ROW_LIMIT": 0}) as con:
            con.execute(f"INSERT INTO lake.{schema}.orders VALUES (NULL, 'x', NULL, NULL), (5, 'y', NULL, 'odd')")  # a file
            assert con.execute(f"SELECT count(*) FROM lake.{schema}.orders").fetchone() == (24,)
        results = run_dbt(["test"], expect_pass=False)
        assert {r.node.name: (str(r.status), r.failures) for r in results} == {
            "not_null_orders_id": ("fail", 1), "unique_orders_id": ("fail", 1),
            "not_null_orders_name": ("fail", 2), "not_null_orders_qty": ("fail", 1),
            "not_null_orders_v_order_id": ("fail", 1), "accepted_values_orders_kind__even__odd": ("fail", 1),
            "relationships_orders_v_order_id__qty__ref_orders_": ("warn", 12)}
        with reference.attached(catalog) as con:  # DuckDB counts the same
            assert con.execute(f"SELECT count(*) FILTER (WHERE name IS NULL), count(*) FILTER (WHERE qty IS NULL "
                               f"AND id < 10) FROM lake.{schema}.orders").fetchone() == (2, 1)
            assert con.execute(f"SELECT count(DISTINCT kind) FILTER (WHERE kind NOT IN ('even', 'odd')) "
                               f"FROM lake.{schema}.orders").fetchone() == (1,)
            assert con.execute(f"SELECT count(*) FROM lake.{schema}.orders WHERE id IS NOT NULL AND id NOT IN "
                               f"(SELECT qty FROM lake.{schema}.orders WHERE qty IS NOT NULL)").fetchone() == (12,)
