"""on_schema_change inside struct columns (also in list elements): append_new_columns adds the fields a model's
structs gained, sync_all_columns adds, drops and widens them, ducklake_rename_column renames one; no file is
rewritten, DuckDB and Spark read every snapshot alike, the catalog rows are DuckDB's for the same ALTERs, and a
narrowing fails naming the field with the lake as it was."""

from __future__ import annotations

from pathlib import Path

import pytest
from dbt.tests.util import run_dbt

from tests.support import reference
from tests.support.invariants import violations

MODEL = """
{{ config(materialized='incremental', unique_key='id', on_schema_change=var('osc', 'append_new_columns')) }}
{#- each batch's keys are new (a merge's updates of reordered structs: tests/spark/test_work.py) -#}
{% set b = var('batch', 0) %}
select id,
  {% if b == 0 %} named_struct('a', cast(id as int), 'b', concat('b', id))
  {% elif b == 1 %} named_struct('a', cast(id as int), 'c', id * 10, 'b', concat('b', id))
  {% elif b == 2 %} named_struct('a', id, 'c', id * 10)
  {% elif b == 3 %} named_struct('a', id, 'd', id * 10)
  {% else %} named_struct('a', cast(id as int), 'd', id * 10)
  {% endif %} as s,
  array(named_struct('x', id {% if b >= 1 %}, 'y', concat('y', id){% endif %})) as l
from range({{ b * 2 }}, {{ b * 2 + 2 }}, 1, 1)
"""
# the same changes made by DuckDB on a parallel lake: one transaction per run
DUCKDB_CHANGES = [
    ["CREATE TABLE lake.t (id BIGINT, s STRUCT(a INTEGER, b VARCHAR), l STRUCT(x BIGINT)[])"],
    ["ALTER TABLE lake.t ADD COLUMN s.c BIGINT", "ALTER TABLE lake.t ADD COLUMN l.element.y VARCHAR"],
    ["ALTER TABLE lake.t ALTER s TYPE STRUCT(a BIGINT, c BIGINT)"],
    ["ALTER TABLE lake.t RENAME s.c TO d"],
]
COLUMN_ROWS = ("SELECT column_id, begin_snapshot, end_snapshot, column_order, column_name, column_type, "
               "initial_default, default_value, nulls_allowed, parent_column, default_value_type "
               "FROM __ducklake_metadata_lake.ducklake_column WHERE table_id = {tid} ORDER BY column_id, begin_snapshot")
# each snapshot's fields, read on both sides (DuckDB's lists count from 1, Spark's from 0)
FIELDS = [("s.a", "s.b", "l[{i}].x"), ("s.a", "s.b", "s.c", "l[{i}].x", "l[{i}].y"), ("s.a", "s.c", "l[{i}].x", "l[{i}].y"),
          ("s.a", "s.d", "l[{i}].x", "l[{i}].y"), ("s.a", "s.d", "l[{i}].x", "l[{i}].y")]


def _fields_sql(fields: tuple[str, ...], relation: str, base: int, text: str) -> str:
    """id and the fields as text, padded with NULLs to five (every snapshot's rows in one shape)."""
    values = [f"cast({f.format(i=base)} as {text})" for f in fields] + [f"cast(NULL as {text})"] * (5 - len(fields))
    return f"select id, {', '.join(values)} from {relation}"


def _ranked(rows: list[tuple]) -> list[tuple]:
    """Column rows with snapshot ids as their rank among the table's snapshots (the lakes number them apart)."""
    snaps = sorted({s for r in rows for s in r[1:3] if s is not None})
    return [(r[0], snaps.index(r[1]), None if r[2] is None else snaps.index(r[2]), *r[3:8], bool(r[8]), *r[9:])
            for r in rows]


class TestNestedSchemaChange:
    @pytest.fixture(scope="class")
    def models(self) -> dict[str, str]:
        return {"evolving.sql": MODEL}

    def test_struct_fields_evolve_as_duckdb_evolves_them(self, project: object, tmp_path: Path) -> None:
        catalog = project.adapter.config.credentials.catalog  # type: ignore[attr-defined]
        schema = project.test_schema  # type: ignore[attr-defined]
        versions = []
        for args in (["--vars", "{batch: 0}"], ["--vars", "{batch: 1}"], ["--vars", "{batch: 2, osc: sync_all_columns}"],
                     None, ["--vars", "{batch: 3, osc: sync_all_columns}"]):
            if args is None:
                run_dbt(["run-operation", "ducklake_rename_column",
                         "--args", "{table: evolving, column: s.c, new_name: d}"])
            else:
                run_dbt(["run", *args])
            with reference.attached(catalog, read_only=True) as con:
                versions.append(con.execute("SELECT max(snapshot_id) FROM lake.snapshots()").fetchone()[0])

        # a narrowing: a clear error naming the field, nothing committed
        results = run_dbt(["run", "--vars", "{batch: 4, osc: sync_all_columns}"], expect_pass=False)
        assert "cannot change 's.a' from int64 to int32: only widening" in results[0].message, results[0].message
        with reference.attached(catalog, read_only=True) as con:
            assert con.execute("SELECT max(snapshot_id) FROM lake.snapshots()").fetchone()[0] == versions[-1]
            rows = con.execute(f"SELECT * FROM lake.{schema}.evolving ORDER BY id").fetchall()
            tid = con.execute("SELECT table_id FROM __ducklake_metadata_lake.ducklake_table WHERE table_name = "
                              "'evolving' AND end_snapshot IS NULL").fetchone()[0]
            ours = _ranked(con.execute(COLUMN_ROWS.format(tid=tid)).fetchall())
            for v in versions:  # every row has its row id at every snapshot (lakecheck's read)
                assert con.execute(f"SELECT count(*) = count(rowid) FROM lake.{schema}.evolving AT (VERSION => {v})"
                                   ).fetchone() == (True,)
            duck = [(n, *r) for n, v in enumerate(versions)
                    for r in con.execute(_fields_sql(FIELDS[n], f"lake.{schema}.evolving AT (VERSION => {v})", 1,
                                                     "VARCHAR")).fetchall()]
        # old rows read fields added later as NULL; c's values written before its rename read as d
        assert rows == [(i, {"a": i, "d": None if i < 2 else i * 10}, [{"x": i, "y": None if i < 2 else f"y{i}"}])
                        for i in range(8)]
        # Spark reads every snapshot as DuckDB does (in one query: a Spark job per snapshot is slow)
        adapter = project.adapter  # type: ignore[attr-defined]
        with adapter.connection_named("__test"):
            relation = adapter.get_relation(None, schema, "evolving")
            ats = [adapter.ducklake_at(relation, version=v) for v in versions]
        union = " union all ".join(f"select {n} as n, * from ({_fields_sql(FIELDS[n], at, 0, 'string')})"
                                   for n, at in enumerate(ats))
        spark = project.run_sql(f"select * from ({union}) order by n, id", fetch="all")  # type: ignore[attr-defined]
        assert [tuple(r) for r in spark] == sorted(duck)

        with reference.attached(f"{tmp_path}/parallel.ducklake", data_path=f"{tmp_path}/parallel/") as con:
            for statements in DUCKDB_CHANGES:
                con.execute("BEGIN")
                for sql in statements:
                    con.execute(sql)
                con.execute("COMMIT")
            assert _ranked(con.execute(COLUMN_ROWS.format(tid=1)).fetchall()) == ours
        assert violations(catalog) == []
