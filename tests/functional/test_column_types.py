"""Column types through dbt: DuckDB 1.5.5 writes a table per column type and one with all of them; dbt models copy each
(ducklake_types keeps the DuckLake type), an incremental model appends to them, and DuckDB reads the copies equal to
the sources (TIMESTAMP_NS at microseconds, TIMETZ as its UTC time: docs/guide/column-types.md)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pytest
from dbt.tests.util import run_dbt

from dbt.adapters.ducklake.lake import paths
from tests.support import reference
from tests.support.coverage import FULL

SOURCES = {
    "t_uuid": ("UUID", "uuid", ["'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'", "'ffffffff-ffff-ffff-ffff-ffffffffffff'"]),
    "t_time": ("TIME", "time", ["'23:59:59.999999'", "'00:00:00'"]),
    "t_timetz": ("TIMETZ", "timetz", ["'12:34:56.5+02'", "'00:00:00+00'"]),
    "t_ns": ("TIMESTAMP_NS", "timestamp_ns", ["'2020-01-01 00:00:00.123456789'", "'1970-01-01 00:00:00'"]),
    "t_ms": ("TIMESTAMP_MS", "timestamp_ms", ["'2024-01-02 03:04:05.123'", "'1969-12-31 23:59:59.999'"]),
    "t_s": ("TIMESTAMP_S", "timestamp_s", ["'2024-01-02 03:04:05'", "'1677-09-22 00:00:00'"]),
    "t_interval": ("INTERVAL", "interval", ["INTERVAL '14 months 2 days 3.005 seconds'", "INTERVAL '0 days'"]),
    "t_hugeint": ("HUGEINT", "int128", ["340282366920938432", "-(2::HUGEINT ** 100)"]),
    "t_uhugeint": ("UHUGEINT", "uint128", ["2::UHUGEINT ** 120", "0"]),
}
COPY = """
{{{{ config(materialized='table', ducklake_types={{'v': '{type}'}}) }}}}
select id, v from src.{table}
"""
APPEND = """
{{{{ config(materialized='incremental', ducklake_types={{'v': '{type}'}}) }}}}
select id + {{{{ var('shift', 0) }}}} as id, v from src.{table}
"""
MIXED = """
{{ config(materialized='incremental') }}
select id + {{ var('shift', 0) }} as id, s, c_uuid, c_time, c_interval from src.mixed
"""


def _utc(v: Any) -> Any:
    if isinstance(v, dt.time) and v.utcoffset():
        moment = dt.datetime.combine(dt.date(2000, 1, 1), v.replace(tzinfo=None)) - v.utcoffset()  # type: ignore
        return moment.time().replace(tzinfo=dt.timezone.utc)
    return v


class TestColumnTypes:
    @pytest.fixture(scope="class")
    def models(self) -> dict[str, str]:
        out = {}
        for table, (_, lake_type, _) in SOURCES.items():
            # an append model's first run creates its table as the table copy does (ducklake_types, DuckDB's rows of
            # files and inlined rows): the table copies are in the full suite
            if FULL:
                out[f"copy_{table}.sql"] = COPY.format(type=lake_type, table=table)
            out[f"append_{table}.sql"] = APPEND.format(type=lake_type, table=table)
        out["mixed_part.sql"] = MIXED
        return out

    def test_copies_equal_duckdb_sources(self, project: Any) -> None:
        creds = project.adapter.config.credentials
        catalog, schema = creds.catalog, project.test_schema
        with reference.attached(catalog) as con:
            con.execute("CREATE SCHEMA lake.src")
            for table, (typ, _, values) in SOURCES.items():
                con.execute(f"CREATE TABLE lake.src.{table} (id INTEGER, v {typ})")
                rows = ", ".join(f"({i}, {v})" for i, v in enumerate([*values, "NULL"]))
                con.execute(f"INSERT INTO lake.src.{table} VALUES {rows}")  # inlined
            con.execute("CALL lake.set_option('data_inlining_row_limit', 0)")
            for table in SOURCES:
                con.execute(f"INSERT INTO lake.src.{table} SELECT id + 10, v FROM lake.src.{table}")  # a file
            cols = ", ".join(f"c_{t[2:]} {typ}" for t, (typ, _, _) in SOURCES.items())
            con.execute(f"CREATE TABLE lake.src.mixed (id INTEGER, s VARCHAR, {cols})")
            values = ", ".join(v[2][0] for v in SOURCES.values())
            con.execute(f"INSERT INTO lake.src.mixed VALUES (1, 'a', {values})")
        assert all(r.status == "success" for r in run_dbt(["run"]))
        assert all(r.status == "success" for r in run_dbt(["run", "--select", "append_*", "mixed_part",
                                                          "--vars", "{shift: 100}"]))
        with reference.attached(catalog, read_only=True) as con:
            def rows(sql: str) -> list[tuple[Any, ...]]:
                return [(r[0], _utc(r[1])) for r in con.execute(sql).fetchall()]

            for table, (typ, _, _) in SOURCES.items():
                col = "CAST(v AS TIMESTAMP)" if typ == "TIMESTAMP_NS" else "v"
                src = rows(f"SELECT id, {col} FROM lake.src.{table} ORDER BY id")
                checks = [(f"append_{table}", src + [(i + 100, v) for i, v in src])]
                if FULL:
                    checks.insert(0, (f"copy_{table}", src))
                for model, expected in checks:
                    kind = con.execute(f"SELECT data_type FROM information_schema.columns WHERE table_schema = "
                                       f"'{schema}' AND table_name = '{model}' AND column_name = 'v'").fetchone()
                    want = con.execute(f"SELECT data_type FROM information_schema.columns WHERE table_schema = 'src' "
                                       f"AND table_name = '{table}' AND column_name = 'v'").fetchone()
                    assert kind == want, (model, kind, want)
                    assert rows(f"SELECT id, {col} FROM lake.{schema}.{model} ORDER BY id") == expected, model
            got = con.execute(f"SELECT id, s, c_uuid, c_time, c_interval FROM lake.{schema}.mixed_part "
                              f"ORDER BY id").fetchall()
            # no ducklake_types: columns passed through unchanged keep DuckDB's types (the read carries them)
            (src,) = con.execute("SELECT id, s, c_uuid, c_time, c_interval FROM lake.src.mixed").fetchall()
            assert got == [src, (101, *src[1:])]
            types = "SELECT column_name, data_type FROM information_schema.columns WHERE table_schema = '{}' AND " \
                    "table_name = '{}' AND column_name IN ('c_uuid', 'c_time', 'c_interval') ORDER BY 1"
            assert con.execute(types.format(schema, "mixed_part")).fetchall() == \
                con.execute(types.format("src", "mixed")).fetchall() == \
                [("c_interval", "INTERVAL"), ("c_time", "TIME"), ("c_uuid", "UUID")]


# GEOMETRY and VARIANT (DuckDB's files of them are read through readable copies): read as WKT / JSON text, written
# back as geometry (ducklake_types, from WKT) and json; on_schema_change adds columns with the model's ducklake_types.
GEO_COPY = """
{{ config(materialized='table', ducklake_types={'g': 'geometry', 'gl.element': 'geometry', 'v': 'json'}) }}
select id, g, gl, v from src.gv
"""
GEO_APPEND = """
{{ config(materialized='incremental', ducklake_types={'g': 'geometry', 'v': 'json'}) }}
select id + {{ var('shift', 0) }} as id, g, v from src.gv
"""
GEO_OTHERS = """
{{ config(materialized='table') }}
select id, s, u from src.gv
"""
EVOLVE = """
{{ config(materialized='incremental', on_schema_change=var('change', 'append_new_columns'),
          ducklake_types=({'u': 'uuid', 'g': 'geometry', 'iv': 'interval'} if var('shift', 0) else {})) }}
select id + {{ var('shift', 0) }} as id
{%- if var('shift', 0) %}, u, g, named_struct('months', 1, 'days', 2, 'micros', id) as iv{% endif %}
from src.gv
"""


class TestGeometryVariantAndSchemaChange:
    @pytest.fixture(scope="class")
    def models(self) -> dict[str, str]:
        return {"geo_copy.sql": GEO_COPY, "geo_append.sql": GEO_APPEND, "geo_others.sql": GEO_OTHERS,
                "evolve.sql": EVOLVE, "evolve_sync.sql": EVOLVE.replace("var('change', 'append_new_columns')",
                                                                        "'sync_all_columns'")}

    def test_copies_and_added_columns(self, project: Any) -> None:
        catalog, schema = project.adapter.config.credentials.catalog, project.test_schema
        with reference.attached(catalog) as con:
            con.execute("CREATE SCHEMA lake.src")
            con.execute("CALL lake.set_option('data_inlining_row_limit', 0)")
            con.execute("CREATE TABLE lake.src.gv (id INTEGER, s VARCHAR, u UUID, g GEOMETRY, gl GEOMETRY[], "
                        "v VARIANT)")
            con.execute("""INSERT INTO lake.src.gv VALUES
                (1, 'a', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', 'POINT(1 2)', ['LINESTRING(0 0, 1 1)', NULL],
                 {'k': [1, 2], 'z': 'q'}::VARIANT),
                (2, 'b', NULL, 'POLYGON((0 0, 1 0, 1 1, 0 0))', [], 42::VARIANT),
                (3, NULL, 'ffffffff-ffff-ffff-ffff-ffffffffffff', NULL, NULL, NULL),
                (4, 'd', NULL, 'POINT Z (1 2 3)', ['POINT EMPTY'], 'text'::VARIANT)""")
        assert all(r.status == "success" for r in run_dbt(["run"]))
        assert all(r.status == "success" for r in run_dbt(["run", "--select", "geo_append", "evolve", "evolve_sync",
                                                          "--vars", "{shift: 100}"]))
        with reference.attached(catalog, read_only=True) as con:
            def types(model: str) -> list[tuple[str, str]]:
                return con.execute(f"SELECT column_name, data_type FROM information_schema.columns WHERE "
                                   f"table_schema = '{schema}' AND table_name = '{model}' "
                                   f"ORDER BY ordinal_position").fetchall()

            src = con.execute("SELECT id, g, gl, CASE WHEN v IS NOT NULL THEN v::JSON END FROM lake.src.gv "
                              "ORDER BY id").fetchall()
            assert types("geo_copy") == [("id", "INTEGER"), ("g", "GEOMETRY"), ("gl", "GEOMETRY[]"), ("v", "JSON")]
            assert con.execute(f"SELECT id, g, gl, v FROM lake.{schema}.geo_copy ORDER BY id").fetchall() == src
            got = con.execute(f"SELECT id, g, v FROM lake.{schema}.geo_append ORDER BY id").fetchall()
            assert got == [(i, g, v) for i, g, _, v in src] + [(i + 100, g, v) for i, g, _, v in src]
            # passed through unchanged, without ducklake_types: the UUID column stays a UUID
            assert con.execute(f"SELECT id, s, u FROM lake.{schema}.geo_others ORDER BY id").fetchall() == \
                con.execute("SELECT id, s, u FROM lake.src.gv ORDER BY id").fetchall()
            assert types("geo_others") == [("id", "INTEGER"), ("s", "VARCHAR"), ("u", "UUID")]
            for model in ("evolve", "evolve_sync"):
                assert types(model) == [("id", "INTEGER"), ("u", "UUID"), ("g", "GEOMETRY"),
                                        ("iv", "INTERVAL")], model
                rows = con.execute(f"SELECT id, u, g, iv FROM lake.{schema}.{model} ORDER BY id").fetchall()
                want = con.execute("SELECT id, NULL, NULL, NULL FROM lake.src.gv UNION ALL SELECT id + 100, u, g, "
                                   "INTERVAL '1 month 2 days' + to_microseconds(id) FROM lake.src.gv "
                                   "ORDER BY 1").fetchall()
                assert rows == want, model


class TestGeometryVariantOnRemoteStorage(TestGeometryVariantAndSchemaChange):
    """The same models with every data file taken as remote (as on s3://, which the driver does not open): DuckDB's
    GEOMETRY / VARIANT files are read through copies Spark makes from their bytes (spark/read/remote_readable.py);
    geo_others selects only the other columns."""

    @pytest.fixture(autouse=True)
    def remote(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setattr(paths, "is_local", lambda path: False)

    def test_copies_and_added_columns(self, project: Any) -> None:
        super().test_copies_and_added_columns(project)
        data = Path(project.adapter.config.credentials.data_path)
        assert list(data.glob("_ducklake_spark/t*/readable/s*/__ducklake_copy=*/*.parquet"))  # made by Spark
        assert not list(data.glob("_ducklake_spark/t*/readable/*.parquet"))  # none by the driver
