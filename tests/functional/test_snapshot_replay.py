"""The `ducklake` snapshot strategy: DuckDB changes a source several times between `dbt snapshot` runs; every
intermediate version is kept, valid from the commit time of the DuckLake snapshot that made it until the next one."""

from __future__ import annotations

import datetime as dt

import pytest
from dbt.tests.util import run_dbt

from tests.support import reference

SOURCES = """
version: 2
sources:
  - name: shop
    schema: "{{ target.schema }}"
    tables: [{name: orders}]
"""
HISTORY = """
{% snapshot orders_history %}
{{ config(strategy='ducklake', unique_key='id', hard_deletes='invalidate') }}
select * from {{ ducklake_changes(source('shop', 'orders')) }}
{% endsnapshot %}
"""
RECORDS = """
{% snapshot orders_records %}
{{ config(strategy='ducklake', unique_key=['id'], hard_deletes='new_record',
          dbt_valid_to_current="to_timestamp('9999-12-31')") }}
select id, upper(status) as status, _ducklake_change_type, _ducklake_snapshot_id, _ducklake_commit_time
from {{ ducklake_changes(source('shop', 'orders')) }}
{% endsnapshot %}
"""


def _naive(ts: dt.datetime | None) -> dt.datetime | None:
    if ts is None or ts.tzinfo is None:
        return ts
    return ts.astimezone(dt.timezone.utc).replace(tzinfo=None)


class TestDuckLakeSnapshotStrategy:
    @pytest.fixture(scope="class")
    def models(self) -> dict[str, str]:
        return {"sources.yml": SOURCES}

    @pytest.fixture(scope="class")
    def snapshots(self) -> dict[str, str]:
        return {"orders_history.sql": HISTORY, "orders_records.sql": RECORDS}

    def test_every_intermediate_version_is_kept(self, project: object) -> None:
        catalog = project.adapter.config.credentials.catalog  # type: ignore[attr-defined]
        schema = project.test_schema  # type: ignore[attr-defined]
        t = f"lake.{schema}.orders"

        def duck(*statements: str) -> list[dt.datetime]:
            times = []
            with reference.attached(catalog) as con:
                for s in statements:
                    con.execute(s)
                    times.append(_naive(con.execute("SELECT snapshot_time FROM lake.snapshots() ORDER BY "
                                                    "snapshot_id DESC LIMIT 1").fetchone()[0]))
            return times

        (a,) = duck(f"CREATE TABLE {t} (id INTEGER, status VARCHAR)")
        (a,) = duck(f"INSERT INTO {t} VALUES (1, 'new'), (2, 'new')")
        run_dbt(["snapshot"])
        b, c, d, e = duck(f"UPDATE {t} SET status = 'paid' WHERE id = 1", f"UPDATE {t} SET status = 'shipped' "
                          "WHERE id = 1", f"DELETE FROM {t} WHERE id = 2", f"INSERT INTO {t} VALUES (3, 'new')")
        run_dbt(["snapshot"])
        with reference.attached(catalog, read_only=True) as con:
            rows = [(r[0], r[1], _naive(r[2]), _naive(r[3])) for r in con.execute(
                f"SELECT id, status, dbt_valid_from, dbt_valid_to FROM lake.{schema}.orders_history "
                "ORDER BY id, dbt_valid_from").fetchall()]
            before = con.execute("SELECT max(snapshot_id) FROM lake.snapshots()").fetchone()[0]
            records = [(r[0], r[1], _naive(r[2]), _naive(r[3]), r[4]) for r in con.execute(
                f"SELECT id, status, dbt_valid_from, dbt_valid_to, dbt_is_deleted FROM lake.{schema}.orders_records "
                "ORDER BY id, dbt_valid_from").fetchall()]
        assert rows == [(1, "new", a, b), (1, "paid", b, c), (1, "shipped", c, None), (2, "new", a, d),
                        (3, "new", e, None)]
        end = dt.datetime(9999, 12, 31)
        assert records == [(1, "NEW", a, b, "False"), (1, "PAID", b, c, "False"), (1, "SHIPPED", c, end, "False"),
                           (2, "NEW", a, d, "False"), (2, "NEW", d, end, "True"), (3, "NEW", e, end, "False")]
        # nothing changed upstream: a second run changes nothing
        run_dbt(["snapshot"])
        with reference.attached(catalog, read_only=True) as con:
            assert con.execute("SELECT max(snapshot_id) FROM lake.snapshots()").fetchone()[0] == before
