"""Every DuckLake column type: DuckDB 1.5.5 writes a table per type (NULLs, extremes, nested uses) in Parquet files and
inlined; Spark reads each as the documented value (docs/guide/column-types.md), writes a copy of the same DuckLake types
(CREATE TABLE AS and an append), and DuckDB reads the copy equal to the source."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

from dbt.adapters.ducklake.lake import DuckLake, paths
from dbt.adapters.ducklake.spark.read import changes, remote_readable, scan
from dbt.adapters.ducklake.spark.read.scan import read_table
from dbt.adapters.ducklake.spark.write import one_shot
from tests.support.coverage import pairs
from tests.support.reference import attached

# name -> (DuckDB column type, values); each table is (id INTEGER, v <type>)
TYPES: dict[str, tuple[str, list[str]]] = {
    "uuid": ("UUID", ["'00000000-0000-0000-0000-000000000000'", "'ffffffff-ffff-ffff-ffff-ffffffffffff'",
                      "'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'"]),
    "time": ("TIME", ["'00:00:00'", "'23:59:59.999999'", "'12:34:56.1'"]),
    "timetz": ("TIMETZ", ["'00:00:00+00'", "'12:34:56.5+02'", "'23:59:59.999999-05:30'", "'01:00:00+03'"]),
    "timestamp_ns": ("TIMESTAMP_NS", ["'1970-01-01 00:00:00.000000001'", "'2262-04-11 23:47:16.854775'",
                                      "'1677-09-22 00:12:43.145225'", "'2020-01-01 00:00:00.123456789'"]),
    "timestamp_ms": ("TIMESTAMP_MS", ["'1969-12-31 23:59:59.999'", "'2024-01-02 03:04:05.123'"]),
    "timestamp_s": ("TIMESTAMP_S", ["'1677-09-22 00:00:00'", "'2024-01-02 03:04:05'"]),
    "interval": ("INTERVAL", ["INTERVAL '14 months 2 days 3.005 seconds'", "INTERVAL '0 days'",
                              "INTERVAL '100 years 30 days 23 hours 59 minutes'"]),
    "hugeint": ("HUGEINT", ["0", "-(2::HUGEINT ** 100)", "340282366920938432", "123"]),
    "uhugeint": ("UHUGEINT", ["0", "2::UHUGEINT ** 120", "7"]),
    "list_uuid": ("UUID[]", ["['a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'::UUID, NULL]", "[]"]),
    "struct": ("STRUCT(t TIME, iv INTERVAL, u UUID, tz TIMETZ)",
               ["{'t': '01:02:03.5', 'iv': INTERVAL '1 day 2 seconds', 'u': 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', "
                "'tz': '10:00:00+00'}", "{'t': NULL, 'iv': NULL, 'u': NULL, 'tz': NULL}"]),
    "map": ("MAP(UUID, TIMESTAMP_NS)", ["MAP {'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'::UUID: "
                                       "TIMESTAMP_NS '2020-01-01 00:00:00.000001'}"]),
    "list_struct": ("STRUCT(tz TIMETZ, iv INTERVAL)[]", ["[{'tz': '23:00:00+00', 'iv': INTERVAL '3 months'}, NULL]"]),
}
# how each DuckLake type is stored: the copy must be of the same type
DUCKLAKE = {"uuid": "uuid", "time": "time", "timetz": "timetz", "timestamp_ns": "timestamp_ns",
            "timestamp_ms": "timestamp_ms", "timestamp_s": "timestamp_s", "interval": "interval",
            "hugeint": "int128", "uhugeint": "uint128"}
NESTED_TYPES = {"list_uuid": {"v.element": "uuid"},
                "struct": {"v.t": "time", "v.iv": "interval", "v.u": "uuid", "v.tz": "timetz"},
                "map": {"v.key": "uuid", "v.value": "timestamp_ns"},
                "list_struct": {"v.element.tz": "timetz", "v.element.iv": "interval"}}


def _create(con: Any, inlined: bool) -> None:
    for name, (typ, values) in TYPES.items():
        rows = ", ".join(f"({i}, {v})" for i, v in enumerate([*values, "NULL"]))
        table = f"{name}_inl" if inlined else name
        con.execute(f"CREATE TABLE lake.{table} (id INTEGER, v {typ})")
        con.execute(f"INSERT INTO lake.{table} VALUES {rows}")


@pytest.fixture
def source(file_catalog_url: str, data_path: str) -> str:
    with attached(file_catalog_url, data_path=data_path) as con:
        _create(con, inlined=True)  # a few rows: inlined in the catalog (text on SQLite)
        con.execute("CALL lake.set_option('data_inlining_row_limit', 0)")
        _create(con, inlined=False)  # Parquet files
    return file_catalog_url


def _rows(con: Any, table: str, col: str = "v") -> list[tuple[Any, ...]]:
    return con.execute(f"SELECT id, {col} FROM lake.{table} ORDER BY id").fetchall()


def _utc(v: Any) -> Any:
    """A TIMETZ as the UTC time of day it stands for (as DuckDB stores it in Parquet; inlined rows keep the offset)."""
    if isinstance(v, dt.time) and v.utcoffset():
        moment = dt.datetime.combine(dt.date(2000, 1, 1), v.replace(tzinfo=None)) - v.utcoffset()  # type: ignore
        return moment.time().replace(tzinfo=dt.timezone.utc)
    return v


def test_each_type_reads_as_documented_and_copies_back(spark: SparkSession, source: str, data_path: str) -> None:
    lake = DuckLake.open(source)
    for suffix in ("", "_inl"):
        state = lake.snapshot()
        for name in TYPES:
            df = read_table(spark, state, state.table("main", name + suffix))
            types = {"v": DUCKLAKE[name]} if name in DUCKLAKE else NESTED_TYPES[name]
            one_shot.create_table_as(spark, lake, "main", f"copy_{name}{suffix}", df, types=types)
            one_shot.append(spark, lake, "main", f"copy_{name}{suffix}", df.selectExpr("id + 100 AS id", "v"))
    with attached(source, data_path=data_path, read_only=True) as con:
        for suffix in ("", "_inl"):
            for name in TYPES:
                src, copy = name + suffix, f"copy_{name}{suffix}"
                src_type = con.execute(f"SELECT data_type FROM information_schema.columns WHERE table_name = '{src}' "
                                       f"AND column_name = 'v'").fetchone()
                copy_type = con.execute(f"SELECT data_type FROM information_schema.columns WHERE table_name = "
                                        f"'{copy}' AND column_name = 'v'").fetchone()
                assert copy_type == src_type, (copy, copy_type, src_type)
                # TIMESTAMP_NS keeps microseconds (DuckDB's own TIMESTAMP_NS -> TIMESTAMP cast); TIMETZ is kept as
                # the same instant in UTC (Python's aware times compare so)
                col = "CAST(v AS TIMESTAMP)" if name == "timestamp_ns" else "v"
                # against the Parquet source (the same rows): DuckDB 1.5.5 fails to read its own inlined nested
                # values with TIME/INTERVAL leaves from a SQLite catalog ("Failed to read inlined data")
                expected = [(i, _utc(v)) for i, v in _rows(con, name, col)]
                got = [(i, _utc(v)) for i, v in _rows(con, copy, col)]
                assert got == expected + [(i + 100, v) for i, v in expected], copy


# "footer": every file read by the footer-based path (name-mapped files, remote storage), with its own explicit schema;
# "remote": every file taken as remote (as s3:// would be): the footer-based path, and files Spark cannot open (DuckDB's
# GEOMETRY / VARIANT) read through copies Spark makes from their bytes (spark/read/remote_readable.py), not the driver
READERS = pytest.mark.parametrize("reader", ["manifest", "footer", "remote"])


def _use(reader: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(scan, "USE_MANIFESTS", reader == "manifest")
    if reader == "remote":
        monkeypatch.setattr(paths, "is_local", lambda path: False)


# by default each reader over one of the catalog files, in turn (both files and all readers still run; the tests above
# and below read every reader over a DuckDB file); every combination in the full suite
@pytest.mark.parametrize(("reader", "file_catalog_url"), [
    pytest.param(r, c, id=f"{c}-{r}") for r, c in pairs(["manifest", "footer", "remote"], ["duckdb", "sqlite"])],
    indirect=["file_catalog_url"])
def test_values_as_spark_shows_them(spark: SparkSession, source: str, reader: str,
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    _use(reader, monkeypatch)
    state = DuckLake.open(source).snapshot()
    for suffix in ("", "_inl"):
        def rows(name: str) -> list[Any]:
            df = read_table(spark, state, state.table("main", name + suffix))  # noqa: B023
            return [r.v for r in df.orderBy("id").collect()]

        assert rows("uuid") == ["00000000-0000-0000-0000-000000000000", "ffffffff-ffff-ffff-ffff-ffffffffffff",
                                "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", None]
        assert rows("time") == ["00:00:00", "23:59:59.999999", "12:34:56.1", None]
        assert rows("timetz") == ["00:00:00+00", "10:34:56.5+00", "05:29:59.999999+00", "22:00:00+00", None]
        assert rows("timestamp_ns")[3] == dt.datetime(2020, 1, 1, 0, 0, 0, 123456)
        assert [None if r is None else r.asDict() for r in rows("interval")] == [
            {"months": 14, "days": 2, "micros": 3_005_000}, {"months": 0, "days": 0, "micros": 0},
            {"months": 1200, "days": 30, "micros": (23 * 60 + 59) * 60 * 10**6}, None]
        assert rows("hugeint")[:3] == [Decimal(0), Decimal(-(2**100)), Decimal(340282366920938432)]
        assert rows("list_uuid") == [["a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", None], [], None]
        s = rows("struct")[0]
        assert (s.t, s.u, s.tz, s.iv.asDict()) == ("01:02:03.5", "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",
                                                   "10:00:00+00", {"months": 0, "days": 1, "micros": 2_000_000})


@READERS
def test_one_column_does_not_block_its_table(spark: SparkSession, tmp_path: Path, reader: str,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """All types in one table: a query of some columns reads them; GEOMETRY and VARIANT files (which Spark 4.0 cannot
    open) are read through readable copies, and a table whose files predate the column reads."""
    _use(reader, monkeypatch)
    catalog = f"ducklake:{tmp_path / 'cat.ducklake'}"
    cols = ", ".join(f"c_{n} {t}" for n, (t, _) in TYPES.items())
    values = ", ".join(v[0] for _, v in TYPES.values())
    with attached(catalog, data_path=str(tmp_path / "data")) as con:
        con.execute("CALL lake.set_option('data_inlining_row_limit', 0)")
        con.execute(f"CREATE TABLE lake.mixed (id INTEGER, s VARCHAR, d DATE, {cols})")
        con.execute(f"INSERT INTO lake.mixed VALUES (1, 'a', DATE '2024-01-01', {values})")
        con.execute("CREATE TABLE lake.geo (id INTEGER, g GEOMETRY)")
        con.execute("INSERT INTO lake.geo VALUES (1, 'POINT(1 2)')")
        con.execute("CREATE TABLE lake.later (id INTEGER)")
        con.execute("INSERT INTO lake.later VALUES (1)")
        con.execute("ALTER TABLE lake.later ADD COLUMN v VARIANT")
    state = DuckLake.open(catalog).snapshot()
    mixed = read_table(spark, state, state.table("main", "mixed"))
    assert [tuple(r) for r in mixed.select("id", "s", "d").collect()] == [(1, "a", dt.date(2024, 1, 1))]
    assert mixed.select("c_uuid").collect()[0][0] == "00000000-0000-0000-0000-000000000000"
    assert [tuple(r) for r in read_table(spark, state, state.table("main", "geo")).collect()] == [(1, "POINT (1 2)")]
    # an append from Spark (WKT text) next to DuckDB's file (WKB, read through a copy): both engines read both
    lake = DuckLake.open(catalog)
    one_shot.append(spark, lake, "main", "geo", spark.sql("SELECT 2 AS id, 'LINESTRING (0 0, 1 1)' AS g"))
    state = lake.snapshot()
    assert sorted(tuple(r) for r in read_table(spark, state, state.table("main", "geo")).collect()) == \
        [(1, "POINT (1 2)"), (2, "LINESTRING (0 0, 1 1)")]
    with attached(catalog, data_path=str(tmp_path / "data"), read_only=True) as con:
        assert con.execute("SELECT id, typeof(g), g::VARCHAR FROM lake.geo ORDER BY id").fetchall() == \
            [(1, "GEOMETRY", "POINT (1 2)"), (2, "GEOMETRY", "LINESTRING (0 0, 1 1)")]
    assert [tuple(r) for r in read_table(spark, state, state.table("main", "later")).collect()] == [(1, None)]


def test_a_value_that_is_not_of_the_type_fails_the_write(spark: SparkSession, tmp_path: Path) -> None:
    catalog = f"ducklake:{tmp_path / 'cat.ducklake'}"
    with attached(catalog, data_path=str(tmp_path / "data")):
        pass  # DuckDB creates the lake
    lake = DuckLake.open(catalog)
    df = spark.sql("SELECT 'not-a-uuid' AS u")
    with pytest.raises(Exception, match="column 'u'.* has DuckLake type uuid; this value is not one: not-a-uuid"):
        one_shot.create_table_as(spark, lake, "main", "bad", df, types={"u": "uuid"})
    with pytest.raises(Exception, match="cannot be stored as DuckLake type uuid"):
        one_shot.create_table_as(spark, lake, "main", "bad", spark.sql("SELECT 1 AS u"), types={"u": "uuid"})


# GEOMETRY and VARIANT: DuckDB 1.5.5 writes them with Parquet logical types Spark 4.0 cannot open (read through
# copies, spark/read/readable.py); values as DuckDB prints them: WKT (g::VARCHAR) and JSON (v::JSON)
GEOMETRIES = ["'POINT(1 2)'", "'POINT Z (1 2 3)'", "'POINT EMPTY'", "'LINESTRING(0 0, 1.5 -2e-7)'",
              "'POLYGON((0 0, 1 0, 1 1, 0 0), (0.1 0.1, 0.2 0.1, 0.2 0.2, 0.1 0.1))'", "'MULTIPOINT(1 2, 3 4)'",
              "'MULTIPOLYGON(((0 0, 1 0, 1 1, 0 0)), EMPTY)'", "'GEOMETRYCOLLECTION(POINT(1 2), LINESTRING(0 0, 1 1))'",
              "'POINT ZM (1 2 3 4)'", "'MULTILINESTRING((0 0, 1e20 1), (2 2, 3 3))'"]
VARIANTS = ["42::VARIANT", "'text'::VARIANT", "{'k': [1, 2], 'z': 'q'}::VARIANT", "DATE '2024-01-01'::VARIANT",
            "[1.5, NULL]::VARIANT", "true::VARIANT", "'{\"a\": {\"b\": null}}'::JSON::VARIANT", "3.25::DECIMAL(9,2)::VARIANT"]


@READERS
def test_geometry_and_variant_read_as_duckdb_prints_them_and_copy_back(spark: SparkSession, tmp_path: Path,
                                                                       reader: str,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    _use(reader, monkeypatch)
    catalog = f"ducklake:{tmp_path / 'cat.ducklake'}"
    n = max(len(GEOMETRIES), len(VARIANTS))
    rows = ", ".join(f"({i}, {GEOMETRIES[i] if i < len(GEOMETRIES) else 'NULL'}, "
                     f"{VARIANTS[i] if i < len(VARIANTS) else 'NULL'}, [{GEOMETRIES[i % len(GEOMETRIES)]}::GEOMETRY, "
                     f"NULL], {{'g': {GEOMETRIES[(i + 1) % len(GEOMETRIES)]}::GEOMETRY, 'n': {i}}})" for i in range(n))
    with attached(catalog, data_path=str(tmp_path / "data")) as con:
        con.execute("CALL lake.set_option('data_inlining_row_limit', 0)")
        con.execute("CREATE TABLE lake.gv (id INTEGER, g GEOMETRY, v VARIANT, gl GEOMETRY[], gs STRUCT(g GEOMETRY, n INT))")
        con.execute(f"INSERT INTO lake.gv VALUES {rows}, ({n}, NULL, NULL, NULL, NULL)")
        con.execute("DELETE FROM lake.gv WHERE id = 1")
        expected = con.execute("SELECT id, g::VARCHAR, CASE WHEN v IS NULL THEN NULL ELSE v::JSON::VARCHAR END, "
                               "gl::VARCHAR[], CASE WHEN gs IS NOT NULL THEN {'g': gs.g::VARCHAR, 'n': gs.n} END FROM lake.gv "
                               "ORDER BY id").fetchall()
    lake = DuckLake.open(catalog)
    state = lake.snapshot()
    df = read_table(spark, state, state.table("main", "gv"))
    assert df.schema.simpleString() == "struct<id:int,g:string,v:string,gl:array<string>,gs:struct<g:string,n:int>>"
    got = [(r.id, r.g, r.v, r.gl, None if r.gs is None else {"g": r.gs.g, "n": r.gs.n})
           for r in df.orderBy("id").collect()]
    assert got == [tuple(e) for e in expected]
    assert df.select("id").count() == n  # a query of the other columns reads them (id 1 deleted)
    feed = changes.table_changes(spark, lake, "main", "gv", 1, state.snapshot_id)
    inserted = {r.id: (r.g, r.v) for r in feed.where("change_type = 'insert'").collect()}
    assert [(i, *inserted[i]) for i, *_ in expected] == [(e[0], e[1], e[2]) for e in expected]
    assert [r.id for r in feed.where("change_type = 'delete'").collect()] == [1]
    # back: geometry as WKT text DuckDB parses (ducklake_types), variant as its JSON text (json)
    types = {"g": "geometry", "v": "json", "gl.element": "geometry", "gs.g": "geometry"}
    one_shot.create_table_as(spark, lake, "main", "gv_copy", df, types=types)
    one_shot.append(spark, lake, "main", "gv_copy", df.selectExpr("id + 100 AS id", "g", "v", "gl", "gs"))
    with pytest.raises(Exception, match="variant cannot be written"):
        one_shot.create_table_as(spark, lake, "main", "gv_bad", df, types={"v": "variant"})
    with attached(catalog, data_path=str(tmp_path / "data"), read_only=True) as con:
        kinds = con.execute("SELECT column_name, data_type FROM information_schema.columns WHERE table_name = "
                            "'gv_copy' ORDER BY ordinal_position").fetchall()
        assert kinds == [("id", "INTEGER"), ("g", "GEOMETRY"), ("v", "JSON"), ("gl", "GEOMETRY[]"),
                         ("gs", "STRUCT(g GEOMETRY, n INTEGER)")]
        # (DuckDB casts a NULL variant to the JSON text 'null', though `v IS NULL`: the copy holds NULL)
        src = con.execute("SELECT id, g, CASE WHEN v IS NOT NULL THEN v::JSON END, gl, gs FROM lake.gv "
                          "ORDER BY id").fetchall()
        copy = con.execute("SELECT id, g, v, gl, gs FROM lake.gv_copy ORDER BY id").fetchall()
        assert copy == src + [(i + 100, *rest) for i, *rest in src]
    # the copy (Spark's files: WKT text) reads as the source does
    state = DuckLake.open(catalog).snapshot()
    back = read_table(spark, state, state.table("main", "gv_copy")).where("id < 100").orderBy("id").collect()
    assert [(r.id, r.g, r.gl) for r in back] == [(e[0], e[1], e[3]) for e in expected]
    # DML on DuckDB's table: a DELETE (positions only) works, an UPDATE would rewrite rows holding a variant
    with pytest.raises(Exception, match="variant cannot be written"):
        one_shot.update_where(spark, lake, "main", "gv", {"g": "'POINT (0 0)'"}, "id = 0")
    one_shot.delete_where(spark, lake, "main", "gv", "id = 2")
    state = DuckLake.open(catalog).snapshot()
    left = read_table(spark, state, state.table("main", "gv")).orderBy("id").collect()
    assert [(r.id, r.g, r.v) for r in left] == [(e[0], e[1], e[2]) for e in expected if e[0] != 2]


def test_name_mapped_files_read_every_type(spark: SparkSession, tmp_path: Path) -> None:
    """A file DuckDB added with ducklake_add_data_files (matched by a name mapping, so read by the footer-based path
    with its own explicit schema) reads UUID/TIME/TIMESTAMP_NS/INTERVAL as the manifest path does."""
    catalog = f"ducklake:{tmp_path / 'cat.ducklake'}"
    path = tmp_path / "added.parquet"
    cols = "id INTEGER, u UUID, t TIME, ns TIMESTAMP_NS, iv INTERVAL"
    with attached(catalog, data_path=str(tmp_path / "data")) as con:
        con.execute(f"COPY (SELECT 1::INTEGER AS id, 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'::UUID AS u, "
                    f"TIME '12:34:56.5' AS t, TIMESTAMP_NS '2020-01-01 00:00:00.123456789' AS ns, "
                    f"INTERVAL '14 months 2 days 3 seconds' AS iv) TO '{path}'")
        con.execute(f"CREATE TABLE lake.added ({cols})")
        con.execute(f"CALL ducklake_add_data_files('lake', 'added', '{path}')")
        expected = con.execute("SELECT id, u::VARCHAR, t::VARCHAR, CAST(ns AS TIMESTAMP) FROM lake.added").fetchall()
    state = DuckLake.open(catalog).snapshot()
    info = state.table("main", "added")
    assert all(f.mapping_id is not None for f in state.files(info))
    rows = read_table(spark, state, info).collect()
    assert [(r.id, r.u, r.t, r.ns) for r in rows] == expected
    assert rows[0].iv.asDict() == {"months": 14, "days": 2, "micros": 3_000_000}
    assert [tuple(r) for r in read_table(spark, state, info).select("id").collect()] == [(1,)]


def test_remote_geometry_and_variant_files_read_through_copies_spark_makes(spark: SparkSession, tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """Files taken as remote (the driver never opens them for the decode): Spark reads their bytes, decodes them and
    writes one copy per file under the table's _ducklake_spark/ folder; several files and row groups, NULLs, nested
    variants, every geometry kind, deletes after the insert; a query of the other columns; the copies are reused."""
    _use("remote", monkeypatch)
    catalog = f"ducklake:{tmp_path / 'cat.ducklake'}"
    geoms = ", ".join(GEOMETRIES)
    variants = ", ".join([*VARIANTS, "{'a': [{'b': 1::VARIANT}, {'b': 'x'::VARIANT}], 'c': NULL}::VARIANT",
                          "[[1, 2], []]::VARIANT"])
    with attached(catalog, data_path=str(tmp_path / "data")) as con:
        con.execute("CALL lake.set_option('data_inlining_row_limit', 0)")
        con.execute("CALL lake.set_option('parquet_row_group_size', 1000)")  # several row groups in the big file
        con.execute("CREATE TABLE lake.rg (id INTEGER, s VARCHAR, g GEOMETRY, v VARIANT, uu UUID)")
        con.execute(f"INSERT INTO lake.rg SELECT i, 's' || i, CASE WHEN i % 7 = 3 THEN NULL ELSE "
                    f"([{geoms}])[i % {len(GEOMETRIES)} + 1]::GEOMETRY END, CASE WHEN i % 5 = 4 THEN NULL ELSE "
                    f"([{variants}])[i % {len(VARIANTS) + 2} + 1] END, uuid() FROM range(6000) t(i)")
        con.execute("INSERT INTO lake.rg SELECT i, NULL, ('POINT (' || i || ' 0.5)')::GEOMETRY, "
                    "{'n': i, 'l': [i, NULL]}::VARIANT, NULL FROM range(6000, 6010) t(i)")
        con.execute("INSERT INTO lake.rg VALUES (7000, 'last', NULL, NULL, NULL)")
        con.execute("DELETE FROM lake.rg WHERE id % 997 = 1 OR id IN (6003, 7000)")
        expected = con.execute("SELECT id, s, g::VARCHAR, CASE WHEN v IS NULL THEN NULL ELSE v::JSON::VARCHAR END, "
                               "uu::VARCHAR FROM lake.rg ORDER BY id").fetchall()
    state = DuckLake.open(catalog).snapshot()
    info = state.table("main", "rg")
    assert len(state.files(info)) >= 2  # (the file of the one row deleted since is dropped)
    name = scan.register_table(spark, state, info)  # the persistent view dbt models read
    got = [tuple(r) for r in spark.sql(f"SELECT id, s, g, v, uu FROM {name} ORDER BY id").collect()]
    assert len(got) == len(expected) and got == [tuple(e) for e in expected]
    assert [tuple(r) for r in spark.sql(f"SELECT id, s FROM {name} WHERE id > 5990 ORDER BY id").collect()] == \
        [(e[0], e[1]) for e in expected if e[0] > 5990]
    root = tmp_path / "data" / "_ducklake_spark" / f"t{info.table_id}" / "readable"
    jobs = sorted(p.name for p in root.iterdir())
    copies = sorted(root.glob("s*/__ducklake_copy=*/*.parquet"))
    assert len(copies) == len(state.files(info))  # a copy per file (a Spark job per footer layout)
    assert not list(root.glob("*.parquet"))  # and no copy made by the driver
    for c in copies:  # rows in source order: the row index is the source position (deletes and row ids apply)
        assert pq.read_table(c, columns=[remote_readable.POS_COLUMN]).column(0).to_pylist() == \
            list(range(pq.ParquetFile(c).metadata.num_rows))
    # as another process sees them (no copy known in memory): found by listing, reused, no new Spark job
    monkeypatch.setattr(remote_readable, "_known", {})
    state = DuckLake.open(catalog).snapshot()
    assert read_table(spark, state, state.table("main", "rg")).count() == len(expected)
    assert sorted(p.name for p in root.iterdir()) == jobs
