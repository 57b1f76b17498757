"""Time travel in models, tests and analyses (ducklake_at) and the time-travel generic tests, checked against
DuckDB's own AT (VERSION => n) reads of the same lake."""

from __future__ import annotations

import datetime as dt

import pytest
from dbt.tests.util import run_dbt

from tests.support import reference

ORDERS = """
{{ config(materialized='incremental', unique_key='id') }}
select id, concat('o', id) as name, {{ var('price', 1) }} * id as price
from range(0, {{ var('n', 3) }}, 1, 1)
"""
LOG = """
{{ config(materialized='incremental') }}
select id, {{ var('n', 3) }} as run from range({{ var('n', 3) - 3 }}, {{ var('n', 3) }}, 1, 1)
"""
AT_VERSION = """
select * from {{ ducklake_at(ref('orders'), version=var('v')) }}
"""
SCHEMA_YML = """
version: 2
models:
  - name: orders
    data_tests:
      - ducklake_no_rows_lost: {arguments: {key: id}}
      - ducklake_row_count_change: {arguments: {max_change: 5}}
  - name: log
    data_tests:
      - ducklake_history_unchanged
"""


def _lake(project: object) -> tuple[str, str]:
    return project.adapter.config.credentials.catalog, project.test_schema  # type: ignore[attr-defined]


def _show(project: object, sql: str) -> list[tuple]:
    result = project.run_sql(sql, fetch="all")  # type: ignore[attr-defined]
    return sorted(tuple(r) for r in result)


class TestTimeTravel:
    @pytest.fixture(scope="class")
    def models(self) -> dict[str, str]:
        return {"orders.sql": ORDERS, "log.sql": LOG, "schema.yml": SCHEMA_YML}

    @pytest.fixture(scope="class")
    def analyses(self) -> dict[str, str]:
        return {"at_version.sql": AT_VERSION}

    def test_versions_read_as_duckdb_reads_them(self, project: object) -> None:
        catalog, schema = _lake(project)
        versions = []
        for n, price in ((3, 1), (5, 1), (5, 2)):
            results = run_dbt(["build", "--vars", f"{{n: {n}, price: {price}}}"])
            assert all(r.status in ("success", "pass") for r in results), [(r.node.name, r.status) for r in results]
            with reference.attached(catalog, read_only=True) as con:
                versions.append(con.execute("SELECT max(snapshot_id), max(snapshot_time) FROM lake.snapshots()"
                                            ).fetchone())
        with reference.attached(catalog, read_only=True) as con:
            expected = {v: sorted(con.execute(f"SELECT * FROM lake.{schema}.orders AT (VERSION => {v})").fetchall())
                        for v, _ in versions}
        for v, _ in versions:
            # the relation ducklake_at gives for a version reads what DuckDB reads at that version
            assert _show(project, f"select * from {_at(project, v)}") == expected[v]
        # by time: the version current at the second build's snapshot time
        ts = versions[1][1].astimezone(dt.timezone.utc).replace(tzinfo=None).isoformat()
        adapter = project.adapter  # type: ignore[attr-defined]
        with adapter.connection_named("__test"):
            rel = adapter.get_relation(None, schema, "orders")
            name = adapter.ducklake_at(rel, timestamp=ts)
            assert name.endswith(f"orders__at_{versions[1][0]}`")
            back = adapter.ducklake_at(rel, changes_back=1)
            assert back.endswith(f"orders__at_{versions[1][0]}`")
            assert adapter.ducklake_at(rel, changes_back=10) is None
        results = run_dbt(["compile", "--select", "at_version", "--vars", f"{{v: {versions[0][0]}}}"])
        assert f"orders__at_{versions[0][0]}" in results[0].node.compiled_code

    def test_missing_version_is_a_clear_error(self, project: object) -> None:
        with pytest.raises(Exception, match=r"snapshot 99999 does not exist \(never made, or expired\)"):
            run_dbt(["compile", "--select", "at_version", "--vars", "{v: 99999}"])

    def test_generic_tests_fail_when_history_breaks(self, project: object) -> None:
        # eight more orders at once: the row-count bound (5) fails; nothing was lost
        results = {r.node.name: r.status for r in run_dbt(["build", "--vars", "{n: 13, price: 2}"],
                                                          expect_pass=False)}
        assert results["ducklake_row_count_change_orders_5"] == "fail"
        assert results["ducklake_no_rows_lost_orders_id"] == "pass"
        assert results["ducklake_history_unchanged_log_"] == "pass"
        # a full refresh with fewer rows: rows lost, and log's history rewritten
        results = {r.node.name: r.status for r in run_dbt(["build", "--full-refresh", "--vars", "{n: 4}"],
                                                          expect_pass=False)}
        assert results["ducklake_no_rows_lost_orders_id"] == "fail"
        assert results["ducklake_history_unchanged_log_"] == "fail"


def _at(project: object, v: int) -> str:
    adapter = project.adapter  # type: ignore[attr-defined]
    with adapter.connection_named("__test"):
        rel = adapter.get_relation(None, project.test_schema, "orders")  # type: ignore[attr-defined]
        return adapter.ducklake_at(rel, version=v)
