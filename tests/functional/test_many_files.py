"""A table of the shape frequent loads leave: DuckDB wrote 2,000 small files (10k and more in
bench/many_files.py), a column added half-way (with a default the older files read), a column widened (INTEGER to
BIGINT), deletes in every file, an update, inlined rows and an inlined delete. dbt models over it, time travel and
the change feed equal DuckDB's answers, and DELETE / UPDATE / MERGE run through dbt leave what DuckDB leaves running
the same statements. The lake is built once for the class."""

from __future__ import annotations

import os
from decimal import Decimal
from typing import Any

import pytest
from dbt.tests.util import run_dbt

from tests.support import reference
from tests.support.coverage import FULL, full_only
from tests.support.invariants import violations

# two manifest chunks (256 file ids each) by default, as the version matrix's smoke set reads: enough for a read across
# chunks, a column added and widened half-way, and deletes in every file; eight chunks in the full suite
FILES = int(os.environ.get("DUCKLAKE_MANY_FILES", "2000" if FULL else "300"))
ROWS = 10  # per file
# ids are file * ROWS + row: a range across the column add (half-way) and the widening (at 7/10)
SOME_LOW, SOME_HIGH = FILES * ROWS * 12 // 25, FILES * ROWS * 37 // 50 - 1
# a row of a file (past the widening), deleted by an inlined delete
FILE_ROW = 12345 if FILES * ROWS > 12345 else FILES * ROWS * 2 // 3 + 5


def build_lake(catalog: str, data_path: str) -> dict[str, int]:
    """The table raw.events; returns snapshot ids worth reading back (before the deletes, before the update)."""
    con = reference.connect()
    marks: dict[str, int] = {}
    try:
        con.execute(reference.attach_sql(catalog, data_path=data_path))
        con.execute("CALL lake.set_option('data_inlining_row_limit', 0)")
        con.execute("CREATE SCHEMA lake.raw")
        con.execute("CREATE TABLE lake.raw.events (id BIGINT, category VARCHAR, amount DOUBLE, qty INTEGER)")
        con.execute("BEGIN")
        for i in range(FILES):  # one file per INSERT; a commit per 250 (DuckDB's cost per insert grows with the
            if i and i % 250 == 0:  # transaction's inserts)
                con.execute("COMMIT")
                con.execute("BEGIN")
            if i == FILES // 2:
                con.execute("COMMIT")
                con.execute("ALTER TABLE lake.raw.events ADD COLUMN note VARCHAR DEFAULT 'old'")
                con.execute("BEGIN")
            if i == FILES * 7 // 10:
                con.execute("COMMIT")
                # inlining on (below the 10 rows of each insert) before this ALTER: DuckDB 1.5.5 then creates the
                # inlined table with this schema version; one created later by an INSERT gets a schema version
                # without a ducklake_schema_versions row, and after any later DDL in the lake DuckDB reads its rows
                # with the columns of another version (wrong values; this reader gets them right)
                con.execute("CALL lake.set_option('data_inlining_row_limit', 5)")
                con.execute("ALTER TABLE lake.raw.events ALTER COLUMN qty TYPE BIGINT")
                con.execute("BEGIN")
            extra = ", 'n' || (range % 3)" if i >= FILES // 2 else ""
            con.execute(f"INSERT INTO lake.raw.events SELECT {i * ROWS} + range, 'k' || (range % 7), range * 1.5, "
                        f"{i} * 100000 + range{extra} FROM range({ROWS})")
        con.execute("COMMIT")
        marks["before_deletes"] = _latest(con)
        con.execute("DELETE FROM lake.raw.events WHERE id % 97 = 3")  # a delete file for most files
        con.execute("DELETE FROM lake.raw.events WHERE id % 89 = 1")  # and again: rewritten delete files
        marks["before_update"] = _latest(con)
        con.execute("UPDATE lake.raw.events SET amount = -amount WHERE id % 1000 = 7")
        con.execute(f"INSERT INTO lake.raw.events VALUES ({FILES * ROWS}, 'late', 1.0, 5000000000, 'x'), "
                    f"({FILES * ROWS + 1}, 'late', 2.0, NULL, NULL)")  # inlined rows
        con.execute(f"DELETE FROM lake.raw.events WHERE id = {FILE_ROW}")  # an inlined delete of a file row
        marks["latest"] = _latest(con)
    finally:
        con.close()
    return marks


def _latest(con: Any) -> int:
    return con.execute("SELECT max(snapshot_id) FROM lake.snapshots()").fetchone()[0]


MODELS = {
    "all_rows.sql": "{{ config(materialized='table') }}\nselect * from {{ source('raw', 'events') }}",
    "some_rows.sql": "{{ config(materialized='table') }}\n"
                     "select id, category, amount, qty, note from {{ source('raw', 'events') }} "
                     f"where id between {SOME_LOW} and {SOME_HIGH}",
    "by_category.sql": "{{ config(materialized='table') }}\n"
                       "select category, note, count(*) as n, sum(amount) as total from {{ source('raw', 'events') }} "
                       "group by category, note",
    "before_update.sql": "{{ config(materialized='table') }}\n"
                         "select * from {{ ducklake_at(source('raw', 'events'), version=var('before_update')) }}",
    "feed.sql": "{{ config(materialized='incremental', unique_key='id') }}\n"
                "select id, category, amount, qty, note from {{ ducklake_changes(source('raw', 'events'), unique_key='id') }}",
}
SOURCES = "version: 2\nsources:\n  - name: raw\n    schema: raw\n    tables:\n      - name: events\n"
# what each model should hold, asked of DuckDB on the same lake
EXPECTED = {
    "all_rows": "SELECT * FROM lake.raw.events",
    "some_rows": f"SELECT id, category, amount, qty, note FROM lake.raw.events WHERE id BETWEEN {SOME_LOW} AND {SOME_HIGH}",
    "by_category": "SELECT category, note, count(*), sum(amount) FROM lake.raw.events GROUP BY ALL",
    "before_update": "SELECT * FROM lake.raw.events AT (VERSION => {before_update})",
    "feed": "SELECT * FROM lake.raw.events",
}
DML = """
{% macro many_files_dml() %}
  {% do run_query("delete from raw.events where id % 83 = 2 or id = " ~ var('inlined_id')) %}
  {% do run_query("update raw.events set note = 'upd', amount = amount + 1 where id % 500 = 11") %}
  {% do run_query("merge into raw.events t using (select case when id % 2 = 0 then id * 7 else id + 1000000 end as id,"
                  " 'm' as category, 0.5 as amount, id as qty, 'new' as note from range(0, 100)) s on t.id = s.id"
                  " when matched then update set amount = s.amount"
                  " when not matched then insert (id, category, amount, qty, note)"
                  " values (s.id, s.category, s.amount, s.qty, s.note)") %}
{% endmacro %}
"""
DUCKDB_DML = [
    "DELETE FROM lake.raw.events WHERE id % 83 = 2 OR id = {inlined_id}",
    "UPDATE lake.raw.events SET note = 'upd', amount = amount + 1 WHERE id % 500 = 11",
    "MERGE INTO lake.raw.events t USING (SELECT CASE WHEN range % 2 = 0 THEN range * 7 ELSE range + 1000000 END AS id, "
    "'m' AS category, 0.5 AS amount, range AS qty, 'new' AS note FROM range(0, 100)) s ON t.id = s.id "
    "WHEN MATCHED THEN UPDATE SET amount = s.amount "
    "WHEN NOT MATCHED THEN INSERT (id, category, amount, qty, note) VALUES (s.id, s.category, s.amount, s.qty, s.note)",
]


def _rows(rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """Rows comparable across engines: floats rounded (sums of many doubles differ in the last bits by order)."""
    def norm(v: Any) -> Any:
        if isinstance(v, float | Decimal):
            return round(float(v), 6)
        return v
    return sorted((tuple(norm(v) for v in r) for r in rows), key=repr)


class TestThousandsOfFiles:
    @pytest.fixture(scope="class")
    def lake(self, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
        """Built by DuckDB before dbt opens it (the project fixture creates the test schema through the adapter)."""
        root = str(tmp_path_factory.mktemp("many_files"))
        catalog, data = f"{root}/lake.ducklake", f"{root}/data/"
        return {"catalog": catalog, "data_path": data, "marks": build_lake(catalog, data)}

    @pytest.fixture(scope="class")
    def dbt_profile_target(self, lake: dict[str, Any]) -> dict[str, object]:
        return {"type": "ducklake", "catalog": lake["catalog"], "data_path": lake["data_path"], "master": "local[2]",
                "threads": 2, "spark_config": {"spark.sql.shuffle.partitions": "4"}}

    @pytest.fixture(scope="class")
    def marks(self, lake: dict[str, Any]) -> dict[str, int]:
        return lake["marks"]

    @pytest.fixture(scope="class")
    def models(self) -> dict[str, str]:
        return {**MODELS, "sources.yml": SOURCES}

    @pytest.fixture(scope="class")
    def macros(self) -> dict[str, str]:
        return {"dml.sql": DML}

    def test_models_time_travel_and_feed_equal_duckdb(self, project: Any, marks: dict[str, int]) -> None:
        catalog = project.adapter.config.credentials.catalog
        schema = project.test_schema
        results = run_dbt(["run", "--vars", f"{{before_update: {marks['before_update']}}}"])
        assert {r.node.name for r in results} == {m.removesuffix(".sql") for m in MODELS}
        with reference.attached(catalog, read_only=True) as con:
            files = con.execute("SELECT count(*) FROM ducklake_list_files('lake', 'events', schema => 'raw')").fetchone()[0]
            assert files >= FILES
            for model, query in EXPECTED.items():
                ours = con.execute(f"SELECT * FROM lake.{schema}.{model}").fetchall()
                theirs = con.execute(query.format(**marks)).fetchall()
                assert _rows(ours) == _rows(theirs), model
                assert len(ours) > 0, model
        assert violations(catalog) == []

    @full_only("DML through dbt over many files: the Spark DML tests cover its statements by default")
    def test_dml_through_dbt_equals_duckdb(self, project: Any, marks: dict[str, int]) -> None:
        catalog = project.adapter.config.credentials.catalog
        inlined_id = FILES * ROWS  # one of the inlined rows
        with reference.attached(catalog) as con:  # DuckDB's answer, rolled back
            con.execute("BEGIN")
            for stmt in DUCKDB_DML:
                con.execute(stmt.format(inlined_id=inlined_id))
            expected = con.execute("SELECT * FROM lake.raw.events").fetchall()
            con.execute("ROLLBACK")
            before = _latest(con)
        run_dbt(["run-operation", "many_files_dml", "--vars", f"{{inlined_id: {inlined_id}}}"])
        with reference.attached(catalog, read_only=True) as con:
            assert _latest(con) == before + 3  # one snapshot per statement
            ours = con.execute("SELECT * FROM lake.raw.events").fetchall()
        assert _rows(ours) == _rows(expected)
        assert violations(catalog) == []
