"""dbt runs on the lake, each checked by opening the lake with DuckDB: rows, types, comments, partition values,
snapshot count and provenance; a failing model leaves the lake exactly as it was."""

from __future__ import annotations

import json

import pytest
from dbt.tests.util import run_dbt

from tests.support import reference

SEED = "id,name,amount,day\n1,a,1.5,2026-01-01\n2,b,2.5,2026-01-02\n3,c,,2026-02-03\n"
TABLE = """
{{ config(materialized='table', partition_by=['month(day)']) }}
select id, upper(name) as name, amount, day from {{ ref('src') }}
"""
VIEW = "select id, name from {{ ref('tbl') }} where amount is not null"
SCHEMA_YML = """
version: 2
models:
  - name: tbl
    description: "the table's comment"
    config: {persist_docs: {relation: true, columns: true}}
    columns:
      - name: id
        description: "the id's comment"
"""
BROKEN = "select no_such_column from {{ ref('src') }}"


def _lake(project: object) -> tuple[str, str]:
    target = project.adapter.config.credentials  # type: ignore[attr-defined]
    return target.catalog, project.test_schema  # type: ignore[attr-defined]


class TestRunIsReadByDuckDB:
    @pytest.fixture(scope="class")
    def seeds(self) -> dict[str, str]:
        return {"src.csv": SEED}

    @pytest.fixture(scope="class")
    def models(self) -> dict[str, str]:
        return {"tbl.sql": TABLE, "vw.sql": VIEW, "schema.yml": SCHEMA_YML}

    def test_models_land_as_one_snapshot_each(self, project: object) -> None:
        catalog, schema = _lake(project)
        with reference.attached(catalog, read_only=True) as con:
            before = con.execute("SELECT max(snapshot_id) FROM lake.snapshots()").fetchone()[0]
        assert len(run_dbt(["seed"])) == 1
        assert len(run_dbt(["run"])) == 2
        with reference.attached(catalog, read_only=True) as con:
            rows = con.execute(f"SELECT id, name, amount, day FROM lake.{schema}.tbl ORDER BY id").fetchall()
            assert [r[:2] for r in rows] == [(1, "A"), (2, "B"), (3, "C")]
            assert rows[2][2] is None and str(rows[0][3]) == "2026-01-01"
            types = dict(con.execute(f"SELECT column_name, data_type FROM duckdb_columns() WHERE database_name = "
                                     f"'lake' AND schema_name = '{schema}' AND table_name = 'tbl'").fetchall())
            assert types == {"id": "BIGINT", "name": "VARCHAR", "amount": "DOUBLE", "day": "DATE"}
            assert con.execute(f"SELECT comment FROM duckdb_tables() WHERE database_name = 'lake' AND "
                               f"schema_name = '{schema}' AND table_name = 'tbl'").fetchone()[0] == "the table's comment"
            assert con.execute(f"SELECT comment FROM duckdb_columns() WHERE database_name = 'lake' AND schema_name = "
                               f"'{schema}' AND table_name = 'tbl' AND column_name = 'id'").fetchone()[0] == \
                "the id's comment"
            # the view is a DuckLake view that DuckDB itself can query
            assert con.execute(f"SELECT * FROM lake.{schema}.vw ORDER BY id").fetchall() == [(1, "A"), (2, "B")]
            snaps = con.execute("SELECT snapshot_id, author, commit_message, commit_extra_info FROM lake.snapshots() "
                                f"WHERE snapshot_id > {before} ORDER BY snapshot_id").fetchall()
        # seed, table (with its comments), view: three snapshots, each naming its node
        assert len(snaps) == 3, snaps
        assert [s[2].split(":")[0] for s in snaps] == ["seed.test.src", "model.test.tbl", "model.test.vw"]
        extra = json.loads(snaps[1][3])
        assert extra["node_unique_id"] == "model.test.tbl" and extra["adapter"] == "dbt-ducklake"
        assert extra["invocation_id"] and extra["dbt_version"].startswith("1.11")

    def test_partition_values_are_months(self, project: object) -> None:
        catalog, schema = _lake(project)
        from dbt.adapters.ducklake.lake import DuckLake

        lake = DuckLake.open(catalog)
        st = lake.snapshot()
        files = st.files(st.table(schema, "tbl"))
        lake.close()
        assert {f.partition_values for f in files} == {("1",), ("2",)}


class TestFailingModelLeavesTheLake:
    @pytest.fixture(scope="class")
    def seeds(self) -> dict[str, str]:
        return {"src.csv": SEED}

    @pytest.fixture(scope="class")
    def models(self) -> dict[str, str]:
        return {"tbl.sql": TABLE, "broken.sql": "{{ config(materialized='table') }}\n" + BROKEN}

    def test_failure_is_clear_and_changes_nothing(self, project: object) -> None:
        catalog, schema = _lake(project)
        run_dbt(["seed"])
        run_dbt(["run", "--select", "tbl"])
        with reference.attached(catalog, read_only=True) as con:
            before = con.execute("SELECT max(snapshot_id) FROM lake.snapshots()").fetchone()[0]
            rows_before = con.execute(f"SELECT * FROM lake.{schema}.tbl ORDER BY id").fetchall()
        results = run_dbt(["run"], expect_pass=False)
        failed = [r for r in results if r.status == "error"]
        assert len(failed) == 1 and "no_such_column" in failed[0].message
        with reference.attached(catalog, read_only=True) as con:
            # tbl ran again (one new snapshot); broken added nothing
            assert con.execute("SELECT max(snapshot_id) FROM lake.snapshots()").fetchone()[0] == before + 1
            assert con.execute(f"SELECT * FROM lake.{schema}.tbl ORDER BY id").fetchall() == rows_before
            assert con.execute(f"SELECT count(*) FROM duckdb_tables() WHERE database_name = 'lake' AND "
                               f"schema_name = '{schema}' AND table_name = 'broken'").fetchone()[0] == 0


CONTRACT_YML = """
version: 2
models:
  - name: good
    config: {materialized: table, contract: {enforced: true}}
    columns:
      - {name: id, data_type: int, constraints: [{type: not_null}]}
      - {name: name, data_type: string}
  - name: bad
    config: {materialized: table, contract: {enforced: true}}
    columns:
      - {name: id, data_type: int, constraints: [{type: not_null}]}
      - {name: name, data_type: string}
"""


class TestContracts:
    @pytest.fixture(scope="class")
    def models(self) -> dict[str, str]:
        return {"good.sql": "select 1 as id, 'a' as name union all select 2, null",
                "bad.sql": "select cast(null as int) as id, 'a' as name",
                "schema.yml": CONTRACT_YML}

    def test_not_null_and_types_are_enforced(self, project: object) -> None:
        catalog, schema = _lake(project)
        with reference.attached(catalog, read_only=True) as con:
            before = con.execute("SELECT max(snapshot_id) FROM lake.snapshots()").fetchone()[0]
        results = run_dbt(["run"], expect_pass=False)
        status = {r.node.name: r for r in results}
        assert status["good"].status == "success"
        assert status["bad"].status == "error"
        assert "NOT NULL constraint failed" in status["bad"].message and "'id'" in status["bad"].message
        with reference.attached(catalog, read_only=True) as con:
            cols = con.execute(f"SELECT column_name, data_type, is_nullable FROM duckdb_columns() WHERE database_name "
                               f"= 'lake' AND schema_name = '{schema}' AND table_name = 'good'").fetchall()
            assert cols == [("id", "INTEGER", False), ("name", "VARCHAR", True)]
            assert con.execute(f"SELECT count(*) FROM duckdb_tables() WHERE database_name = 'lake' AND "
                               f"schema_name = '{schema}' AND table_name = 'bad'").fetchone()[0] == 0
            assert con.execute("SELECT max(snapshot_id) FROM lake.snapshots()").fetchone()[0] == before + 1
            # DuckDB enforces what we declared
            with pytest.raises(Exception, match="NOT NULL"):
                con.execute("DETACH lake")
                con.execute(reference.attach_sql(catalog))
                con.execute(f"INSERT INTO lake.{schema}.good VALUES (NULL, 'x')")


COUNT_MACRO = """
{% macro count_rows(rel) %}
  {% set n = run_query("select count(*) from " ~ rel)[0][0] %}
  {{ log("rows in " ~ rel ~ ": " ~ n, info=True) }}
{% endmacro %}
"""


class TestOperationsShowAndAnalyses:
    @pytest.fixture(scope="class")
    def seeds(self) -> dict[str, str]:
        return {"src.csv": SEED}

    @pytest.fixture(scope="class")
    def macros(self) -> dict[str, str]:
        return {"count_rows.sql": COUNT_MACRO}

    @pytest.fixture(scope="class")
    def analyses(self) -> dict[str, str]:
        return {"by_name.sql": "select name, count(*) as n from {{ ref('src') }} group by name"}

    def test_lake_tables_by_name(self, project: object) -> None:
        from dbt.tests.util import run_dbt_and_capture

        schema = project.test_schema  # type: ignore[attr-defined]
        run_dbt(["seed"])
        _, out = run_dbt_and_capture(["run-operation", "count_rows", "--args", f"{{rel: {schema}.src}}"])
        assert f"rows in {schema}.src: 3" in out
        _, out = run_dbt_and_capture(["show", "--inline", f"select id, name from {schema}.src order by id",
                                      "--limit", "2"])
        assert "|  1 | a    |" in out and "|  2 | b    |" in out and "| c" not in out
        run_dbt(["compile", "--select", "by_name"])  # analyses compile against the lake's relations


class TestDmlOnTheModelInsideItsTransaction:
    @pytest.fixture(scope="class")
    def models(self) -> dict[str, str]:
        # a post-hook changing the table the model just created: the same snapshot (its staged files rewritten)
        inside = ("{{ config(materialized='table', post_hook=['update {{ this }} set v = v * 10 where id > 1', "
                  "'delete from {{ this }} where id = 3']) }}\nselect id, id as v from range(1, 5)")
        after = ("{{ config(materialized='table', post_hook=after_commit('update {{ this }} set v = 2')) }}\n"
                 "select 1 as v")
        # an incremental run: rows appended, then a hook deleting from the same table inside the transaction
        incr = ("{{ config(materialized='incremental', post_hook='delete from {{ this }} where id = 1') }}\n"
                "select id from range(1, 3)")
        return {"inside.sql": inside, "after.sql": after, "incr.sql": incr}

    def test_own_writes_are_seen_or_refused_clearly(self, project: object) -> None:
        catalog, schema = _lake(project)
        with reference.attached(catalog, read_only=True) as con:
            before = con.execute("SELECT max(snapshot_id) FROM lake.snapshots()").fetchone()[0]
        results = {r.node.name: r for r in run_dbt(["run"])}
        assert all(r.status == "success" for r in results.values())
        with reference.attached(catalog, read_only=True) as con:
            assert con.execute(f"SELECT id, v FROM lake.{schema}.inside ORDER BY id").fetchall() == [
                (1, 1), (2, 20), (4, 40)]
            assert con.execute(f"SELECT v FROM lake.{schema}.after").fetchall() == [(2,)]
            assert con.execute(f"SELECT id FROM lake.{schema}.incr").fetchall() == [(2,)]
            messages = [r[0] for r in con.execute("SELECT commit_message FROM lake.snapshots() WHERE snapshot_id > "
                                                  f"{before}").fetchall()]
            # inside and incr: one snapshot each (hooks included); after: its model, then the hook's own commit
            assert sum(m.startswith("model.test.inside:") for m in messages) == 1
            assert sum(m.startswith("model.test.incr:") for m in messages) == 1
            snaps_before = con.execute("SELECT max(snapshot_id) FROM lake.snapshots()").fetchone()[0]
        results = {r.node.name: r for r in run_dbt(["run", "--select", "incr"], expect_pass=False)}
        assert results["incr"].status == "error"
        assert "after it was changed in the same transaction" in results["incr"].message
        with reference.attached(catalog, read_only=True) as con:
            assert con.execute("SELECT max(snapshot_id) FROM lake.snapshots()").fetchone()[0] == snaps_before
            assert con.execute(f"SELECT id FROM lake.{schema}.incr").fetchall() == [(2,)]
