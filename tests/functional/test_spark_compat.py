"""What dbt-spark users and macro packages run: relation listing with SHOW, a post-hook that drops what its node
created, `grants` (said to be ignored, once per run), and the materializations DuckLake has no place for."""

from __future__ import annotations

import os

import pytest
from dbt.tests.util import run_dbt, run_dbt_and_capture

from tests.support import reference

LIST_MACRO = """
{% macro list_relations(statement) %}
  {% set res = run_query(statement) %}
  {% for row in res.rows %}
    {% do log("LISTED~~" ~ (row.values() | join("~~")) | replace("\\n", "\\\\n"), info=true) %}
  {% endfor %}
{% endmacro %}
"""
DROPPED = """
{{ config(materialized='table', post_hook="{% do adapter.drop_relation(this.incorporate(type='table')) %}") }}
select 1 as id
"""
GRANTED = """
{{ config(materialized='table', grants={'select': ['reporter']}) }}
select 1 as id
"""
GRANTED_VIEW = """
{{ config(materialized='view', grants={'select': ['reporter']}) }}
select * from {{ ref('granted') }}
"""
MATVIEW = "{{ config(materialized='materialized_view') }} select 1 as id"
UDF_SQL = "SELECT price * 2"
UDF_YML = """
functions:
  - name: price_for_xlarge
    arguments:
      - name: price
        data_type: float
    returns:
      data_type: float
"""


def _listed(output: str) -> list[list[str]]:
    return [line.split("LISTED~~", 1)[1].split("~~") for line in output.splitlines() if "LISTED~~" in line]


class TestSparkCompat:
    @pytest.fixture(scope="class")
    def macros(self) -> dict[str, str]:
        return {"list_relations.sql": LIST_MACRO}

    @pytest.fixture(scope="class")
    def models(self) -> dict[str, str]:
        return {"dropped.sql": DROPPED, "granted.sql": GRANTED, "granted_view.sql": GRANTED_VIEW}

    def test_show_tables_lists_the_lake_catalog(self, project: object) -> None:
        catalog = project.adapter.config.credentials.catalog  # type: ignore[attr-defined]
        schema = project.test_schema  # type: ignore[attr-defined]
        # objects that no statement of this process ever touched: another writer made them
        with reference.attached(catalog) as con:
            con.execute(f"CREATE SCHEMA IF NOT EXISTS lake.{schema}")
            con.execute(f"CREATE TABLE lake.{schema}.stg_orders AS SELECT 1::BIGINT AS id, 'x' AS name")
            con.execute(f"CREATE TABLE lake.{schema}.stg_customers AS SELECT 2::INTEGER AS id")
            con.execute(f"CREATE VIEW lake.{schema}.stg_view AS SELECT id FROM lake.{schema}.stg_orders")
            con.execute(f"CREATE TABLE lake.{schema}.other AS SELECT 3 AS id")
        _, out = run_dbt_and_capture(["run-operation", "list_relations", "--args",
                                      f"{{statement: \"show tables in {schema} like 'stg_*'\"}}"])
        assert sorted(_listed(out)) == [[schema, n, "False"] for n in ("stg_customers", "stg_orders", "stg_view")]
        _, out = run_dbt_and_capture(["run-operation", "list_relations", "--args",
                                      f"{{statement: \"SHOW TABLE EXTENDED IN {schema} LIKE 'stg_o*|oth*'\"}}"])
        rows = sorted(_listed(out))
        assert [r[:3] for r in rows] == [[schema, "other", "False"], [schema, "stg_orders", "False"]]
        info = rows[1][3].replace("\\n", "\n")
        # the lines dbt-spark parses: the type and the columns
        assert "Type: MANAGED" in info and "Provider: ducklake" in info
        assert " |-- id: bigint (nullable = true)" in info and " |-- name: string (nullable = true)" in info
        _, out = run_dbt_and_capture(["run-operation", "list_relations", "--args",
                                      f"{{statement: \"show views in {schema}\"}}"])
        # the lake's views, plus whatever temporary views this Spark session holds (listed too, as Spark does)
        listed = _listed(out)
        assert [r for r in listed if r[2] == "False"] == [[schema, "stg_view", "False"]]
        assert all(r[0] == "" for r in listed if r[2] == "True")
        # a schema the lake does not have: Spark's error, named
        _, out = run_dbt_and_capture(["run-operation", "list_relations", "--args",
                                      "{statement: \"show tables in no_such_schema\"}"], expect_pass=False)
        assert "SCHEMA_NOT_FOUND" in out and "`no_such_schema`" in out

    def test_post_hook_drops_what_its_node_created(self, project: object) -> None:
        catalog = project.adapter.config.credentials.catalog  # type: ignore[attr-defined]
        data_path = project.adapter.config.credentials.data_path  # type: ignore[attr-defined]
        schema = project.test_schema  # type: ignore[attr-defined]
        with reference.attached(catalog, read_only=True) as con:
            before = con.execute("SELECT max(snapshot_id) FROM lake.snapshots()").fetchone()[0]
        results, out = run_dbt_and_capture(["run", "--select", "dropped granted granted_view"])
        assert [r.status for r in results] == ["success"] * 3
        with reference.attached(catalog, read_only=True) as con:
            tables = {r[0] for r in con.execute(
                f"SELECT table_name FROM duckdb_tables() WHERE database_name = 'lake' AND schema_name = '{schema}'"
            ).fetchall()}
            messages = [r[0] for r in con.execute(
                f"SELECT commit_message FROM lake.snapshots() WHERE snapshot_id > {before}").fetchall()]
        # created and dropped in one transaction: as in DuckDB, nothing is committed and no file stays behind
        assert "dropped" not in tables and "granted" in tables
        assert not any("model.test.dropped" in (m or "") for m in messages), messages
        parquet = [f for d, _, fs in os.walk(data_path) for f in fs
                   if f.endswith(".parquet") and "_ducklake_spark" not in d]  # not the read manifests (symlinks)
        assert len(parquet) == 1, parquet  # granted's file only: dropped's was removed with its unstaged table
        # when the table existed before the run: CREATE OR REPLACE then DROP commits only the drop, as in DuckDB
        with reference.attached(catalog) as con:
            con.execute(f"CREATE TABLE lake.{schema}.dropped AS SELECT 7 AS id")
            before = con.execute("SELECT max(snapshot_id) FROM lake.snapshots()").fetchone()[0]
        run_dbt(["run", "--select", "dropped"])
        with reference.attached(catalog, read_only=True) as con:
            changes = con.execute(f"SELECT changes FROM lake.snapshots() WHERE snapshot_id > {before}").fetchall()
            assert con.execute("SELECT count(*) FROM duckdb_tables() WHERE database_name = 'lake' AND "
                               "table_name = 'dropped'").fetchone()[0] == 0
        assert [list(c[0]) for c in changes] == [["tables_dropped"]], changes
        # grants: one warning for the run, naming the first relation, not one per node
        assert out.count("the `grants` config is ignored") == 1, out
        assert "DuckLake has no privileges" in out


class TestUnsupportedMaterializations:
    @pytest.fixture(scope="class")
    def models(self) -> dict[str, str]:
        return {"mv.sql": MATVIEW}

    @pytest.fixture(scope="class")
    def functions(self) -> dict[str, str]:
        return {"price_for_xlarge.sql": UDF_SQL, "price_for_xlarge.yml": UDF_YML}

    def test_clear_errors(self, project: object) -> None:
        catalog = project.adapter.config.credentials.catalog  # type: ignore[attr-defined]
        results = run_dbt(["build"], expect_pass=False)
        by_name = {r.node.name: str(r.message) for r in results}
        assert "no materialized views" in by_name["mv"] and "materialized='table'" in by_name["mv"]
        assert "cannot create the function" in by_name["price_for_xlarge"]
        assert "dbt macro" in by_name["price_for_xlarge"]
        with reference.attached(catalog, read_only=True) as con:
            assert con.execute("SELECT count(*) FROM duckdb_tables() WHERE database_name = 'lake'").fetchone()[0] == 0


class TestCursor:
    def test_fetchmany_then_fetchall_loses_no_row(self, project: object) -> None:
        adapter = project.adapter  # type: ignore[attr-defined]
        with adapter.connection_named("cursor_test"):
            handle = adapter.connections.get_thread_connection().handle
            cur = handle.cursor()
            cur.execute("select id from range(10) order by id")
            assert cur.fetchmany(3) == [(0,), (1,), (2,)]
            assert cur.fetchone() == (3,)
            assert cur.fetchall() == [(i,) for i in range(4, 10)]
            assert cur.fetchmany(2) == [] and cur.fetchall() == []
            cur.execute("select id from range(3)")
            assert cur.fetchmany(5) == [(0,), (1,), (2,)] and cur.fetchall() == []

    def test_columns_of_a_missing_relation_are_none_and_a_broken_view_is_an_error(self, project: object) -> None:
        """get_columns_in_relation: [] only for a relation that does not exist; a view that no longer analyses (a
        column it reads was dropped) raises, as any other error does."""
        adapter = project.adapter  # type: ignore[attr-defined]
        schema = project.test_schema  # type: ignore[attr-defined]
        project.run_sql(f"create table {schema}.cols_t as select 1 as a, 2 as b")  # type: ignore[attr-defined]
        project.run_sql(f"create view {schema}.cols_v as select b from {schema}.cols_t")  # type: ignore[attr-defined]
        with adapter.connection_named("columns_test"):
            view = adapter.Relation.create(schema=schema, identifier="cols_v", type="view")
            assert [c.column for c in adapter.get_columns_in_relation(view)] == ["b"]
            missing = adapter.Relation.create(schema=schema, identifier="no_such_relation", type="view")
            assert adapter.get_columns_in_relation(missing) == []
        project.run_sql(f"alter table {schema}.cols_t drop column b")  # type: ignore[attr-defined]
        with adapter.connection_named("columns_test"), pytest.raises(Exception, match="UNRESOLVED_COLUMN"):
            adapter.get_columns_in_relation(view)
