"""dbt's timestamp and check snapshot strategies on a source that DuckDB changes between runs, checked with DuckDB:
each run that changes something is one DuckLake snapshot, a run with nothing new commits nothing, and every
snapshot the runs made reads the same in DuckDB as in Spark."""

from __future__ import annotations

import datetime as dt

import pytest
from dbt.tests.util import run_dbt

from tests.support import reference
from tests.support.coverage import FULL

SOURCES = """
version: 2
sources:
  - name: crm
    schema: "{{ target.schema }}"
    tables: [{name: customers}]
"""
BY_TIME = """
{% snapshot customers_by_time %}
{{ config(strategy='timestamp', unique_key='id', updated_at='updated_at', hard_deletes='invalidate') }}
select * from {{ source('crm', 'customers') }}
{% endsnapshot %}
"""
BY_CHECK = """
{% snapshot customers_by_check %}
{{ config(strategy='check', unique_key=['id'], check_cols=['name'], hard_deletes='new_record',
          dbt_valid_to_current="to_timestamp('9999-12-31')") }}
select id, name from {{ source('crm', 'customers') }}
{% endsnapshot %}
"""
END = dt.datetime(9999, 12, 31)


class TestSnapshotStrategiesWithDuckDB:
    @pytest.fixture(scope="class")
    def models(self) -> dict[str, str]:
        return {"sources.yml": SOURCES}

    @pytest.fixture(scope="class")
    def snapshots(self) -> dict[str, str]:
        return {"by_time.sql": BY_TIME, "by_check.sql": BY_CHECK}

    def test_runs_commit_one_snapshot_each_and_nothing_when_unchanged(self, project: object) -> None:
        catalog = project.adapter.config.credentials.catalog  # type: ignore[attr-defined]
        schema = project.test_schema  # type: ignore[attr-defined]
        src = f"lake.{schema}.customers"

        def duck(sql: str, *, fetch: bool = False) -> list[tuple]:
            with reference.attached(catalog) as con:
                cur = con.execute(sql)
                return cur.fetchall() if fetch else []

        def latest() -> int:
            return duck("SELECT max(snapshot_id) FROM lake.snapshots()", fetch=True)[0][0]

        duck(f"CREATE TABLE {src} (id INTEGER, name VARCHAR, updated_at TIMESTAMP)")
        duck(f"INSERT INTO {src} VALUES (1, 'Ann', TIMESTAMP '2026-01-01 10:00:00'), "
             "(2, 'Bob', TIMESTAMP '2026-01-01 10:00:00'), (3, 'Cy', TIMESTAMP '2026-01-01 10:00:00')")
        start = latest()
        assert len(run_dbt(["snapshot"])) == 2
        first = latest()
        assert first == start + 2  # one snapshot per snapshot node
        if FULL:  # a run with nothing new after the changes below commits nothing too, by default
            run_dbt(["snapshot"])
            assert latest() == first  # nothing changed upstream: nothing committed

        duck(f"UPDATE {src} SET name = 'Anne', updated_at = TIMESTAMP '2026-02-01 10:00:00' WHERE id = 1")
        duck(f"DELETE FROM {src} WHERE id = 2")
        duck(f"INSERT INTO {src} VALUES (4, 'Dee', TIMESTAMP '2026-02-01 11:00:00')")
        changed = latest()
        run_dbt(["snapshot"])
        second = latest()
        assert second == changed + 2
        run_dbt(["snapshot"])
        assert latest() == second

        by_time = duck(f"SELECT id, name, dbt_valid_from, dbt_valid_to IS NULL FROM lake.{schema}.customers_by_time "
                       "ORDER BY id, dbt_valid_from", fetch=True)
        jan, feb = dt.datetime(2026, 1, 1, 10), dt.datetime(2026, 2, 1, 10)
        assert by_time == [(1, "Ann", jan, False), (1, "Anne", feb, True), (2, "Bob", jan, False),
                           (3, "Cy", jan, True), (4, "Dee", dt.datetime(2026, 2, 1, 11), True)]
        closed = duck(f"SELECT dbt_valid_to FROM lake.{schema}.customers_by_time WHERE id = 1 AND name = 'Ann'",
                      fetch=True)
        assert closed == [(feb,)]  # closed at the new version's updated_at

        by_check = duck(f"SELECT id, name, dbt_valid_to = TIMESTAMP '9999-12-31', dbt_is_deleted "
                        f"FROM lake.{schema}.customers_by_check ORDER BY id, dbt_valid_from", fetch=True)
        assert by_check == [(1, "Ann", False, "False"), (1, "Anne", True, "False"), (2, "Bob", False, "False"),
                            (2, "Bob", True, "True"), (3, "Cy", True, "False"), (4, "Dee", True, "False")]

        # every snapshot these runs made reads the same in DuckDB (AT VERSION) as in Spark (ducklake_at's relation)
        adapter = project.adapter  # type: ignore[attr-defined]
        for table in ("customers_by_time", "customers_by_check"):
            with reference.attached(catalog, read_only=True) as con:
                made = [v for (v,) in con.execute("SELECT snapshot_id FROM lake.snapshots() WHERE snapshot_id >= ? "
                                                  "ORDER BY 1", [start]).fetchall()]
            for version in made:
                with reference.attached(catalog, read_only=True) as con:
                    try:
                        want = sorted(con.execute(f"SELECT id, name, dbt_scd_id FROM lake.{schema}.{table} "
                                                  f"AT (VERSION => {version})").fetchall())
                    except Exception:  # noqa: BLE001 - the table did not exist yet at this version
                        continue
                with adapter.connection_named("__test"):
                    at = adapter.ducklake_at(adapter.get_relation(None, schema, table), version=version)
                    _, got = adapter.execute(f"select id, name, dbt_scd_id from {at}", fetch=True)
                assert sorted(tuple(r) for r in got.rows) == want, (table, version)
