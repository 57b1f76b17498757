"""Change-feed incremental models: DuckDB changes an upstream DuckLake table between dbt runs (inserts, updates,
deletes, several changes of one row, an added column); after each run every downstream model equals a rebuild from
scratch, DuckDB reads every snapshot the runs made, and a failed run re-reads the same changes."""

from __future__ import annotations

import pytest
from dbt.tests.util import run_dbt

from tests.support import reference

SOURCES = """
version: 2
sources:
  - name: up
    schema: "{{ target.schema }}"
    tables: [{name: orders}]
"""
# merge: every column, deletes upstream become deletes here
MERGED = """
{{ config(materialized='incremental', unique_key='id', on_schema_change='append_new_columns') }}
select * from {{ ducklake_changes(source('up', 'orders')) }}
where {{ 'assert_true(id < 0) is null' if var('fail', false) else 'true' }}
"""
# delete+insert with a transformation and a composite key
DOUBLED = """
{{ config(materialized='incremental', incremental_strategy='delete+insert', unique_key=['id', 'shop']) }}
select id, shop, amount * 2 as amount2, _ducklake_change_type from {{ ducklake_changes(source('up', 'orders')) }}
"""
# append: new versions of rows, deletes skipped (the change type drives the strategy)
APPENDED = """
{{ config(materialized='incremental', incremental_strategy='append') }}
select id, amount, _ducklake_change_type from {{ ducklake_changes(source('up', 'orders')) }}
"""
# a change log: the change type renamed is data, so deletes are kept as rows
HISTORY = """
{{ config(materialized='incremental') }}
select id, amount, _ducklake_change_type as change from {{ ducklake_changes(source('up', 'orders')) }}
"""


def _lake(project: object) -> tuple[str, str]:
    return project.adapter.config.credentials.catalog, project.test_schema  # type: ignore[attr-defined]


def _rows(con: object, sql: str) -> list[tuple]:
    return sorted(con.execute(sql).fetchall(), key=repr)  # type: ignore[attr-defined]


class TestChangeFeedIncremental:
    @pytest.fixture(scope="class")
    def models(self) -> dict[str, str]:
        return {"sources.yml": SOURCES, "merged.sql": MERGED, "doubled.sql": DOUBLED, "appended.sql": APPENDED,
                "history.sql": HISTORY}

    def _duck(self, project: object, *statements: str) -> None:
        catalog, schema = _lake(project)
        with reference.attached(catalog) as con:
            for s in statements:
                con.execute(s.format(t=f"lake.{schema}.orders"))

    def _check(self, project: object, expected_appended: list[tuple] | None = None) -> dict[str, list[tuple]]:
        """Downstream == rebuilt from the upstream now (as DuckDB reads both); returns the rows per model."""
        catalog, schema = _lake(project)
        with reference.attached(catalog, read_only=True) as con:
            cols = [r[0] for r in con.execute(
                f"SELECT column_name FROM duckdb_columns() WHERE database_name = 'lake' AND schema_name = '{schema}' "
                "AND table_name = 'orders' ORDER BY column_index").fetchall()]
            up = _rows(con, f"SELECT {', '.join(cols)} FROM lake.{schema}.orders")
            merged = _rows(con, f"SELECT {', '.join(cols)} FROM lake.{schema}.merged")
            assert merged == up
            doubled = _rows(con, f"SELECT id, shop, amount2 FROM lake.{schema}.doubled")
            assert doubled == _rows(con, f"SELECT id, shop, amount * 2 FROM lake.{schema}.orders")
            for table in ("merged", "doubled", "appended"):  # the change type is never stored
                names = [r[0] for r in con.execute(f"DESCRIBE lake.{schema}.{table}").fetchall()]
                assert "_ducklake_change_type" not in names
            history = _rows(con, f"SELECT id, amount, change FROM lake.{schema}.history")
            appended = _rows(con, f"SELECT id, amount FROM lake.{schema}.appended")
        assert appended == sorted([r[:2] for r in history if r[2] != "delete"], key=repr)
        if expected_appended is not None:
            assert history == sorted(expected_appended, key=repr)
        return {"merged": merged, "doubled": doubled, "history": history}

    def _snapshot(self, project: object) -> int:
        catalog, _ = _lake(project)
        with reference.attached(catalog, read_only=True) as con:
            return con.execute("SELECT max(snapshot_id) FROM lake.snapshots()").fetchone()[0]

    def test_downstream_follows_duckdb_changes(self, project: object) -> None:
        catalog, schema = _lake(project)
        self._duck(project, "CREATE TABLE {t} (id INTEGER, shop VARCHAR, amount DOUBLE)",
                   "INSERT INTO {t} VALUES (1, 'a', 10), (2, 'a', 20), (3, 'b', 30), (4, 'b', 40)")
        history: list[tuple[int, dict[str, list[tuple]]]] = []

        # first run: the whole upstream
        assert len(run_dbt(["run"])) == 4
        history.append((self._snapshot(project), self._check(project, [
            (1, 10.0, "insert"), (2, 20.0, "insert"), (3, 30.0, "insert"), (4, 40.0, "insert")])))

        # inserts, an update, a delete: in separate DuckDB snapshots
        self._duck(project, "INSERT INTO {t} VALUES (5, 'c', 50), (6, 'c', 60)",
                   "UPDATE {t} SET amount = 21 WHERE id = 2", "DELETE FROM {t} WHERE id = 3")
        run_dbt(["run"])
        history.append((self._snapshot(project), self._check(project, [
            (1, 10.0, "insert"), (2, 20.0, "insert"), (3, 30.0, "insert"), (4, 40.0, "insert"),
            (5, 50.0, "insert"), (6, 60.0, "insert"), (2, 21.0, "update_postimage"), (3, 30.0, "delete")])))

        # several changes of one row between runs, a key deleted and inserted again, a row inserted then deleted
        self._duck(project, "UPDATE {t} SET amount = 11 WHERE id = 1", "UPDATE {t} SET amount = 12 WHERE id = 1",
                   "DELETE FROM {t} WHERE id = 4", "INSERT INTO {t} VALUES (4, 'b', 44)",
                   "INSERT INTO {t} VALUES (7, 'd', 70)", "DELETE FROM {t} WHERE id = 7")
        run_dbt(["run"])
        history.append((self._snapshot(project), self._check(project)))
        log = history[-1][1]["history"]
        assert (1, 12.0, "update_postimage") in log and (1, 11.0, "update_postimage") not in log
        # per row id (no unique_key here): 4's old row deleted, its new row inserted; 7 netted to its delete
        assert (4, 44.0, "insert") in log and (4, 40.0, "delete") in log and (7, 70.0, "delete") in log

        # a run with no upstream change makes no snapshot
        before = self._snapshot(project)
        run_dbt(["run"])
        assert self._snapshot(project) == before

        # an added column: merged gains it (append_new_columns); rows changed since carry its values
        self._duck(project, "ALTER TABLE {t} ADD COLUMN note VARCHAR", "UPDATE {t} SET note = 'x' WHERE id = 5",
                   "INSERT INTO {t} VALUES (8, 'e', 80, 'new')")
        run_dbt(["run"])
        history.append((self._snapshot(project), self._check(project)))

        # DuckDB reads every snapshot the runs made, each equal to what was checked right after its run
        with reference.attached(catalog, read_only=True) as con:
            for snap, seen in history:
                cols = ", ".join(c for c in ("id", "shop", "amount", "note") if c in [
                    r[0] for r in con.execute(f"DESCRIBE (SELECT * FROM lake.{schema}.merged AT (VERSION => {snap}))"
                                              ).fetchall()])
                assert _rows(con, f"SELECT {cols} FROM lake.{schema}.merged AT (VERSION => {snap})") == seen["merged"]
                assert _rows(con, f"SELECT id, shop, amount2 FROM lake.{schema}.doubled AT (VERSION => {snap})") == \
                    seen["doubled"]

    def test_failed_run_rereads_the_same_changes(self, project: object) -> None:
        self._duck(project, "UPDATE {t} SET amount = amount + 1 WHERE id IN (1, 2)", "DELETE FROM {t} WHERE id = 6")
        before = self._snapshot(project)
        results = run_dbt(["run", "--select", "merged", "--vars", "{fail: true}"], expect_pass=False)
        assert results[0].status == "error"
        assert self._snapshot(project) == before  # nothing committed, the cursor included
        run_dbt(["run"])
        self._check(project)

    def test_full_refresh_rebuilds_from_the_current_rows(self, project: object) -> None:
        self._duck(project, "DELETE FROM {t} WHERE id = 1")
        run_dbt(["run", "--full-refresh"])
        rows = self._check(project)
        assert [r[2] for r in rows["history"]] == ["insert"] * len(rows["history"])

    def test_upstream_replaced_rebuilds(self, project: object) -> None:
        # a replaced upstream (new table id) has no changes relative to the cursor: the models are rebuilt
        self._duck(project, "CREATE OR REPLACE TABLE {t} (id INTEGER, shop VARCHAR, amount DOUBLE, note VARCHAR)",
                   "INSERT INTO {t} VALUES (100, 'z', 1, NULL)")
        run_dbt(["run"])
        self._check(project, [(100, 1.0, "insert")])

    def test_not_a_table_is_a_clear_error(self, project: object) -> None:
        catalog, schema = _lake(project)
        self._duck(project, f"CREATE VIEW lake.{schema}.orders_v AS SELECT * FROM lake.{schema}.orders")
        with open(f"{project.project_root}/models/from_view.sql", "w") as f:  # type: ignore[attr-defined]
            f.write("{{ config(materialized='incremental') }}\n"
                    "select * from {{ ducklake_changes(adapter.get_relation(this.database, this.schema, "
                    "'orders_v')) }}")
        results = run_dbt(["run", "--select", "from_view"], expect_pass=False)
        assert "is not a DuckLake table" in results[0].message
