"""DuckLake type strings, Arrow mapping and value texts, checked against DuckDB 1.5 and its ducklake extension."""

from __future__ import annotations

import datetime as dt
import functools
import itertools
import math
import random
import struct
import uuid
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dbt.adapters.ducklake.lake.errors import UnsupportedTypeError
from dbt.adapters.ducklake.lake.records import Column
from dbt.adapters.ducklake.lake.types import (
    BASE_TYPES,
    arrow_field,
    arrow_schema,
    compare_values,
    decimal_params,
    format_value,
    from_arrow,
    parse_type,
    parse_value,
    to_arrow,
)
from tests.support import reference

META = "__ducklake_metadata_lake"

ALL_TYPES_DDL = """
    i8 TINYINT, i16 SMALLINT, i32 INTEGER, i64 BIGINT, i128 HUGEINT,
    u8 UTINYINT, u16 USMALLINT, u32 UINTEGER, u64 UBIGINT, u128 UHUGEINT,
    f32 FLOAT, f64 DOUBLE, d DECIMAL(10, 2), d38 DECIMAL(38, 10), s VARCHAR, bl BLOB, b BOOLEAN,
    dt DATE, t TIME, ttz TIMETZ, ts TIMESTAMP, tz TIMESTAMPTZ, ts_s TIMESTAMP_S, ts_ms TIMESTAMP_MS,
    ts_ns TIMESTAMP_NS, iv INTERVAL, u UUID, j JSON,
    l INTEGER[], ll VARCHAR[][], st STRUCT(a INTEGER, b VARCHAR), m MAP(VARCHAR, INTEGER),
    ls STRUCT(x DOUBLE, y INTEGER[])[], ms MAP(INTEGER, STRUCT(p DATE, q BOOLEAN))
"""


def lake_columns(con, table: str) -> tuple[Column, ...]:
    """The column tree DuckDB recorded in ducklake_column for a table."""
    rows = con.execute(
        f"""SELECT c.column_id, c.column_name, c.column_type, c.parent_column, c.nulls_allowed
            FROM {META}.ducklake_column c JOIN {META}.ducklake_table t USING (table_id)
            WHERE t.table_name = ? AND t.end_snapshot IS NULL AND c.end_snapshot IS NULL
            ORDER BY c.column_order""", [table]).fetchall()

    def build(parent):
        return tuple(Column(cid, name, typ, bool(nulls), children=build(cid))
                     for cid, name, typ, par, nulls in rows if par == parent)

    return build(None)


@pytest.fixture
def lake(tmp_path: Path):
    with reference.attached(str(tmp_path / "cat.ducklake"), data_path=str(tmp_path / "data") + "/",
                            options={"DATA_INLINING_ROW_LIMIT": 0}) as con:
        yield con


# ------------------------------------------------------------------------------------------- parse_type

@pytest.mark.parametrize("text, expected", [
    ("INT64", "int64"), ("int64", "int64"), (" Varchar ", "varchar"), ("DECIMAL(10, 2)", "decimal(10,2)"),
    ("decimal(38,0)", "decimal(38,0)"), ("TimestampTZ", "timestamptz"), ("timestamp_us", "timestamp"),
    ("LIST", "list"), ("Struct", "struct"), ("map", "map"), ("uint128", "uint128"), ("geometry", "geometry"),
    ("VARIANT", "variant"), ("json", "json"), ("time_ns", "time_ns"),
])
def test_parse_type_normalises(text, expected):
    assert parse_type(text) == expected


@pytest.mark.parametrize("text", ["BIGINT", "INTEGER", "int", "string", "decimal(39,2)", "decimal(10,11)",
                                  "decimal(0,0)", "decimal(10)", "unknown", "", "int32[]", "enum"])
def test_parse_type_rejects_with_the_type_named(text):
    with pytest.raises(UnsupportedTypeError, match="unsupported DuckLake type") as err:
        parse_type(text)
    assert repr(text) in str(err.value)


def test_every_type_the_reference_writes_parses(lake):
    lake.execute(f"CREATE TABLE lake.t ({ALL_TYPES_DDL})")
    written = {c.type for top in lake_columns(lake, "t") for c in top.walk()}
    assert {parse_type(t) for t in written} == written
    assert written <= BASE_TYPES | {"decimal(10,2)", "decimal(38,10)"}


def test_decimal_params():
    assert decimal_params("DECIMAL(10, 2)") == (10, 2)
    assert decimal_params("decimal(38,0)") == (38, 0)
    with pytest.raises(ValueError):
        decimal_params("int32")


# ----------------------------------------------------------------------------------------- Arrow mapping

def field_ids(t: pa.DataType, path: str = "") -> list[tuple[str, str | None]]:
    """(path, PARQUET:field_id) of every field below an Arrow type."""
    out = []
    children = ([t.key_field, t.item_field] if pa.types.is_map(t) else [t.value_field] if pa.types.is_list(t)
                else [t.field(i) for i in range(t.num_fields)] if pa.types.is_struct(t) else [])
    for f in children:
        fid = (f.metadata or {}).get(b"PARQUET:field_id")
        out.append((f"{path}.{f.name}", fid and fid.decode()))
        out.extend(field_ids(f.type, f"{path}.{f.name}"))
    return out


def test_from_arrow_assigns_ids_depth_first_like_duckdb(lake):
    lake.execute("CREATE TABLE lake.t (i INT, l INT[], st STRUCT(a INT, b VARCHAR), m MAP(VARCHAR, INT[]))")
    theirs = lake_columns(lake, "t")
    schema = pa.schema([
        pa.field("i", pa.int32()), pa.field("l", pa.list_(pa.int32())),
        pa.field("st", pa.struct([pa.field("a", pa.int32()), pa.field("b", pa.string())])),
        pa.field("m", pa.map_(pa.string(), pa.list_(pa.int32()))),
    ])
    counter = itertools.count(1)
    ours = tuple(from_arrow(f, counter) for f in schema)
    assert ours == theirs
    assert [(c.name, c.column_id) for top in ours for c in top.walk()][:6] == [
        ("i", 1), ("l", 2), ("element", 3), ("st", 4), ("a", 5), ("b", 6)]
    assert ours[3].children[0].nullable is True  # DuckDB records map keys as nullable


def test_from_arrow_accepts_callables_and_iterators():
    f = pa.field("x", pa.struct([pa.field("y", pa.int8())]))
    assert from_arrow(f, itertools.count(10).__next__) == from_arrow(f, itertools.count(10))
    assert from_arrow(f, itertools.count(10)).children[0].column_id == 11


def test_arrow_round_trip_of_every_type_duckdb_writes(lake, tmp_path):
    lake.execute(f"CREATE TABLE lake.t ({ALL_TYPES_DDL})")
    columns = lake_columns(lake, "t")
    # types whose Arrow form maps back to another DuckLake type (as DuckDB's own Arrow export does)
    lossy = {"timetz": "time", "int128": "decimal(38,0)", "uint128": "decimal(38,0)"}
    for col in columns:
        back = from_arrow(arrow_field(col), itertools.count(col.column_id))
        assert back == (col if col.type not in lossy else Column(col.column_id, col.name, lossy[col.type]))


def test_field_ids_on_every_node_match_the_files_duckdb_writes(lake, tmp_path):
    lake.execute("CREATE TABLE lake.t (i INT, l INT[], st STRUCT(a INT, b VARCHAR[]), m MAP(VARCHAR, STRUCT(x INT)),"
                 " ls STRUCT(p INT, q MAP(INT, INT))[], u UUID, j JSON, dt DATE)")
    lake.execute("INSERT INTO lake.t VALUES (1, [1], {'a': 1, 'b': ['x']}, MAP {'k': {'x': 1}},"
                 " [{'p': 1, 'q': MAP {1: 2}}], uuid(), '{}', '2024-01-01')")
    duck_file = next((tmp_path / "data").rglob("*.parquet"))
    duck_schema = pq.read_schema(duck_file)
    ours = arrow_schema(lake_columns(lake, "t"))
    assert ours.names == duck_schema.names
    for ours_field, duck_field in zip(ours, duck_schema, strict=True):
        assert ours_field.metadata == duck_field.metadata
        assert field_ids(ours_field.type) == field_ids(duck_field.type)
        assert all(fid is not None for _, fid in field_ids(ours_field.type))
        assert ours_field.type == duck_field.type
    # and pyarrow writes them into the Parquet schema of our own files
    path = tmp_path / "ours.parquet"
    pq.write_table(pa.Table.from_pylist([], schema=ours), path)
    written = pq.read_schema(path)
    assert [f.metadata for f in written] == [f.metadata for f in ours]
    assert [field_ids(f.type) for f in written] == [field_ids(f.type) for f in ours]
    text = str(pq.ParquetFile(path).schema)
    assert "field_id=-1 list" in text and "field_id=-1 key_value" in text  # repeated groups carry no id
    assert "required binary field_id=" in text  # map keys are required


def test_to_arrow_types():
    def arrow(t: str) -> pa.DataType:
        return to_arrow(Column(1, "c", t))

    assert arrow("uint64") == pa.uint64()
    assert arrow("decimal(9,3)") == pa.decimal128(9, 3)
    assert arrow("timestamptz") == pa.timestamp("us", tz="UTC")
    assert arrow("timestamp_ms") == pa.timestamp("ms")
    assert arrow("interval") == pa.month_day_nano_interval()
    assert arrow("uuid") == pa.uuid()
    assert arrow("json") == pa.json_()
    for t in ("variant", "geometry"):
        with pytest.raises(UnsupportedTypeError):
            arrow(t)
    m = to_arrow(Column(1, "m", "map", children=(Column(2, "key", "varchar"), Column(3, "value", "int8"))))
    assert m.key_field.nullable is False and m.key_field.metadata == {b"PARQUET:field_id": b"2"}


@pytest.mark.parametrize("arrow_type, expected", [
    (pa.uint8(), "uint8"), (pa.uint64(), "uint64"), (pa.int16(), "int16"), (pa.large_string(), "varchar"),
    (pa.string_view(), "varchar"), (pa.large_binary(), "blob"), (pa.binary(7), "blob"),
    (pa.timestamp("us"), "timestamp"), (pa.timestamp("us", tz="Europe/Amsterdam"), "timestamptz"),
    (pa.timestamp("ns", tz="UTC"), "timestamptz"), (pa.timestamp("s"), "timestamp_s"),
    (pa.timestamp("ms"), "timestamp_ms"), (pa.timestamp("ns"), "timestamp_ns"), (pa.time32("ms"), "time"),
    (pa.time64("us"), "time"), (pa.time64("ns"), "time"), (pa.date64(), "date"),
    (pa.dictionary(pa.int32(), pa.string()), "varchar"), (pa.decimal128(10, 2), "decimal(10,2)"),
    (pa.decimal256(20, 0), "decimal(20,0)"), (pa.month_day_nano_interval(), "interval"),
    (pa.uuid(), "uuid"), (pa.json_(), "json"), (pa.large_list(pa.int8()), "list"),
    (pa.list_(pa.int8(), 3), "list"), (pa.bool_(), "boolean"), (pa.float32(), "float32"),
])
def test_from_arrow_types(arrow_type, expected):
    assert from_arrow(pa.field("c", arrow_type), itertools.count(1)).type == expected


@pytest.mark.parametrize("arrow_type", [
    pa.duration("us"), pa.float16(), pa.null(), pa.decimal256(50, 0),
    pa.dense_union([pa.field("a", pa.int8())]), pa.struct([]),
])
def test_from_arrow_rejects_types_without_ducklake_equivalent(arrow_type):
    f = pa.field("outer", pa.struct([pa.field("inner", pa.list_(arrow_type))]))
    with pytest.raises(UnsupportedTypeError) as err:
        from_arrow(f, itertools.count(1))
    assert "'outer.inner.element'" in str(err.value)


# ------------------------------------------------------------------------------------- value texts

def duck_text(con, sql_type: str, literal: str) -> str:
    return con.execute(f"SELECT CAST(CAST(? AS {sql_type}) AS VARCHAR)", [literal]).fetchone()[0]


TEXT_CASES = {  # DuckLake type -> (SQL type, literals DuckDB understands)
    "int8": ("TINYINT", ["-128", "0", "127"]),
    "uint64": ("UBIGINT", ["0", "18446744073709551615"]),
    "int128": ("HUGEINT", ["-170141183460469231731687303715884105728", "12345678901234567890"]),
    "float64": ("DOUBLE", ["0.1", "-1e-300", "1e300", "5e-324", "1e16", "1e15", "0.0001", "0.00001", "-0.0",
                           "inf", "-inf", "nan", "123456789.123", "1.7976931348623157e308"]),
    "float32": ("FLOAT", ["33.333332", "0.1", "1e-45", "3.4028235e38", "16777217", "9007199254740993", "1.5e-7",
                          "19781.0625", "-1915074.75", "100", "1e16", "inf", "-inf", "nan", "-0.0", "0.3"]),
    "decimal(4,1)": ("DECIMAL(4,1)", ["-999.9", "0", "0.5", "-0.5", "999.9"]),
    "decimal(38,10)": ("DECIMAL(38,10)", ["-1234567890123456789012345678.0123456789", "0.0000000001", "1"]),
    "decimal(20,0)": ("DECIMAL(20,0)", ["-99999999999999999999", "5"]),
    "date": ("DATE", ["2024-04-10", "0001-01-01", "9999-12-31", "10000-01-01", "0044-03-15 (BC)",
                      "0001-12-31 (BC)", "5877642-06-25 (BC)", "5881580-07-10", "infinity", "-infinity"]),
    "time": ("TIME", ["12:36:36", "00:00:00", "12:00:00.5", "23:59:59.999999", "24:00:00", "00:00:00.000001"]),
    "timestamp": ("TIMESTAMP", ["2024-01-05 14:00:00", "2024-01-05 14:00:00.123", "1969-12-31 23:59:59.999999",
                                "0044-03-15 (BC) 12:00:00.5", "12000-01-01 00:00:00", "infinity", "-infinity",
                                "290309-12-22 (BC) 00:00:00", "294247-01-10 04:00:54.775806"]),
    "timestamptz": ("TIMESTAMPTZ", ["2024-01-01 12:40:00+01", "2024-01-01 00:00:00.000001+00",
                                    "0001-01-01 00:00:00+00", "infinity", "-infinity"]),
    "timestamp_s": ("TIMESTAMP_S", ["2024-01-01 00:00:01", "1900-01-01 00:00:00"]),
    "timestamp_ms": ("TIMESTAMP_MS", ["2024-01-01 00:00:00.001", "2262-01-01 00:00:00.999"]),
    "timestamp_ns": ("TIMESTAMP_NS", ["2024-01-01 00:00:00.000000001", "1677-09-22 00:00:00.12",
                                      "2262-04-11 23:47:16.854775"]),
    "timetz": ("TIMETZ", ["12:00:00+05", "12:00:00.5-03:30", "12:00:00+05:30:15", "00:00:00.000001+15:59"]),
    "interval": ("INTERVAL", ["1 day", "1 year 2 months 3 days 04:05:06.5", "-1 day", "-1 second", "36 hours",
                              "0 seconds", "1 month -1 day 01:00:00", "-1 year", "13 months", "-13 months",
                              "2 days", "-2 years -3 months"]),
    "uuid": ("UUID", ["00000000-0000-0000-0000-000000000000", "FFFFFFFF-FFFF-FFFF-FFFF-FFFFFFFFFFFF",
                      "7fffffff-ffff-ffff-ffff-ffffffffffff", "80000000-0000-0000-0000-000000000000"]),
    "varchar": ("VARCHAR", ["", "abc", "héllo", "😀", "z", "\uffff", "A"]),
    "json": ("JSON", ['{"a": 1}', "[1,2]", "null"]),
}


@pytest.mark.parametrize("ltype", sorted(TEXT_CASES))
def test_text_round_trips_and_matches_duckdb(ltype):
    con = reference.connect()
    sql_type, literals = TEXT_CASES[ltype]
    texts = [duck_text(con, sql_type, lit) for lit in literals]
    for text in texts:
        try:
            value = parse_value(ltype, text)
        except ValueError:  # outside Python's datetime range: only the ordering below applies
            assert ltype in ("date", "time", "timestamp", "timestamptz", "timestamp_ns")
            continue
        if isinstance(value, float) and math.isnan(value):
            assert format_value(ltype, value) == "nan"
        else:
            assert format_value(ltype, value) == text, (ltype, text, value)
    # the typed order of the texts is DuckDB's order of the values
    order = [r[0] for r in con.execute(
        f"SELECT CAST(v AS VARCHAR) FROM (SELECT UNNEST(?::{sql_type}[]) v) ORDER BY v", [texts]).fetchall()]
    ours = sorted(texts, key=functools.cmp_to_key(lambda a, b: compare_values(ltype, a, b)))
    if ltype in ("interval", "timetz"):  # DuckDB orders these by normalised value; ties are ambiguous
        return
    assert ours == order


def test_temporal_ints_format_like_duckdb():
    con = reference.connect()
    con.execute("SET TimeZone = 'UTC'")
    rng = random.Random(7)
    for _ in range(300):
        days = rng.randrange(-2_000_000, 2_000_000)
        micros = rng.randrange(-(2**62), 2**62)
        nanos = rng.randrange(-(2**62), 2**62)
        row = con.execute("SELECT (DATE '1970-01-01' + ?::INTEGER)::VARCHAR, make_timestamp(?::BIGINT)::VARCHAR,"
                          " make_timestamp_ns(?::BIGINT)::VARCHAR, make_timestamp(?::BIGINT)::TIMESTAMPTZ::VARCHAR",
                          [days, micros, nanos, micros - micros % 10**6]).fetchone()
        assert format_value("date", days) == row[0]
        assert format_value("timestamp", micros) == row[1]
        assert format_value("timestamp_ns", nanos) == row[2]
        assert format_value("timestamptz", micros - micros % 10**6) == row[3]
        assert format_value("timestamp_s", (micros - micros % 10**6) // 10**6) == row[3][:-3]


def test_float32_text_matches_duckdb_or_names_the_same_float():
    """DuckDB prints FLOAT with fmt's Grisu: the shortest round-trip text, or the double's text where Grisu
    gives up. We match it except on some integers of 9-12 digits (Grisu gives up there for reasons of its own
    arithmetic); both texts then denote the same float32, which is all that stats and casts depend on."""
    con = reference.connect()
    rng = random.Random(3)
    values = [x for x in (struct.unpack("<f", struct.pack("<I", rng.getrandbits(32)))[0] for _ in range(20000))
              if not math.isnan(x)]
    theirs = [r[0] for r in con.execute("SELECT CAST(v AS VARCHAR) FROM (SELECT UNNEST(?::FLOAT[]) v)",
                                        [values]).fetchall()]
    mismatches = 0
    for x, text in zip(values, theirs, strict=True):
        ours = format_value("float32", x)
        if ours != text:
            mismatches += 1
            assert struct.pack("<f", float(ours)) == struct.pack("<f", float(text))
            assert x == int(x) and 10**8 <= abs(x) < 10**12, (x, ours, text)
    assert mismatches < len(values) / 200


def test_double_text_is_pythons_repr_as_in_duckdb():
    con = reference.connect()
    rng = random.Random(5)
    values = [x for x in (struct.unpack("<d", struct.pack("<Q", rng.getrandbits(64)))[0] for _ in range(5000))
              if not math.isnan(x)]
    theirs = [r[0] for r in con.execute("SELECT CAST(v AS VARCHAR) FROM (SELECT UNNEST(?::DOUBLE[]) v)",
                                        [values]).fetchall()]
    assert [format_value("float64", x) for x in values] == theirs


def test_value_form_of_blobs_and_booleans_matches_duckdb(tmp_path):
    """initial_default holds Value::ToString texts: escaped blobs and 'true'/'false' (not the stats forms)."""
    con = reference.connect()
    for blob in [b"", b"abc", b"\xaa\x00z", b"\\'\"", bytes(range(256))]:
        text = con.execute("SELECT CAST(?::BLOB AS VARCHAR)", [blob]).fetchone()[0]
        assert format_value("blob", blob, form="value") == text
        assert parse_value("blob", text) == blob
        assert parse_value("blob", format_value("blob", blob), form="stats") == blob
    assert [format_value("boolean", b, form="value") for b in (True, False)] == ["true", "false"]
    with reference.attached(str(tmp_path / "cat.ducklake"), data_path=str(tmp_path / "data") + "/") as lake:
        lake.execute("CREATE TABLE lake.t (i INT)")
        lake.execute("ALTER TABLE lake.t ADD COLUMN b BLOB DEFAULT '\\xAA\\x00z'")
        lake.execute("ALTER TABLE lake.t ADD COLUMN bo BOOLEAN DEFAULT 1")
        lake.execute("ALTER TABLE lake.t ADD COLUMN tz TIMESTAMPTZ DEFAULT '2024-01-01 10:00:00+02'")
        defaults = dict(lake.execute(f"SELECT column_name, initial_default FROM {META}.ducklake_column").fetchall())
    assert parse_value("blob", defaults["b"]) == b"\xaa\x00z"
    assert format_value("boolean", parse_value("boolean", defaults["bo"]), form="value") == defaults["bo"] == "true"
    assert format_value("timestamptz", parse_value("timestamptz", defaults["tz"])) == defaults["tz"]


def test_format_value_of_python_values():
    assert format_value("int32", None) is None
    assert format_value("boolean", True) == "1" and format_value("boolean", False) == "0"
    assert format_value("decimal(10,2)", 125) == "125.00"
    assert format_value("decimal(10,2)", Decimal("-0.005")) == "-0.01"  # half away from zero, as DuckDB casts
    assert format_value("decimal(10,2)", Decimal("-0.001")) == "0.00"
    assert format_value("decimal(5,0)", 12345) == "12345"
    with pytest.raises(ValueError):
        format_value("decimal(4,2)", 100)
    with pytest.raises(ValueError):
        format_value("uint8", 256)
    assert format_value("blob", b"\xab\x01") == "AB01"
    u = uuid.UUID("cd1c962b-b3ec-4ffb-90fd-34abbcefea85")
    assert format_value("uuid", u) == format_value("uuid", u.bytes) == format_value("uuid", str(u).upper()) == str(u)
    cet = dt.timezone(dt.timedelta(hours=1))
    assert format_value("timestamptz", dt.datetime(2024, 1, 1, 12, 40, tzinfo=cet)) == "2024-01-01 11:40:00+00"
    assert format_value("timestamp", dt.datetime(2024, 1, 5, 14, 0, 0, 120000)) == "2024-01-05 14:00:00.12"
    assert format_value("timestamp_ms", dt.datetime(2024, 1, 5, 14, 0, 0, 120000)) == "2024-01-05 14:00:00.12"
    assert format_value("date", dt.date(2024, 4, 10)) == "2024-04-10"
    assert format_value("time", dt.time(12, 0, 0, 500000)) == "12:00:00.5"
    assert format_value("timetz", dt.time(12, 0, tzinfo=dt.timezone(dt.timedelta(hours=-3, minutes=-30)))) \
        == "12:00:00-03:30"
    assert format_value("interval", dt.timedelta(days=3, seconds=1)) == "3 days 00:00:01"
    assert format_value("interval", pa.MonthDayNano([14, 0, 0])) == "1 year 2 months"
    assert format_value("json", {"a": [1, 2]}) == '{"a":[1,2]}'
    assert format_value("varchar", "héllo") == "héllo"
    with pytest.raises(UnsupportedTypeError):
        format_value("list", [1])


def test_parse_value_edges():
    assert parse_value("boolean", "true") is True and parse_value("boolean", "0") is False
    assert parse_value("blob", "AB01", form="stats") == b"\xab\x01"
    assert parse_value("blob", "AB01") == b"AB01"  # the default form is Value::ToString's, as in initial_default
    assert parse_value("timestamptz", "2024-01-01 11:40:00+00") == dt.datetime(2024, 1, 1, 11, 40,
                                                                                tzinfo=dt.timezone.utc)
    assert parse_value("decimal(10,2)", "125.00") == Decimal("125.00")
    for t, text in [("date", "infinity"), ("date", "0001-12-31 (BC)"), ("time", "24:00:00"),
                    ("timestamp_ns", "2024-01-01 00:00:00.000000001")]:
        with pytest.raises(ValueError):
            parse_value(t, text)


def test_compare_values():
    assert compare_values("int64", "9", "10") == -1  # numeric, not text order
    assert compare_values("float64", "nan", "inf") == 1  # DuckDB puts NaN above +inf
    assert compare_values("float64", "-0.0", "0.0") == 0
    assert compare_values("decimal(10,2)", "9.50", "10.00") == -1
    assert compare_values("boolean", "true", "0") == 1 and compare_values("boolean", "false", "0") == 0
    assert compare_values("date", "0001-12-31 (BC)", "0001-01-01") == -1
    assert compare_values("timestamp", "infinity", "294247-01-10 04:00:54.775806") == 1
    assert compare_values("timestamptz", "2024-01-01 12:00:00+01", "2024-01-01 11:00:00+00") == 0
    assert compare_values("varchar", "z", "é") == -1 and compare_values("varchar", "ab", "a") == 1
    assert compare_values("blob", "FF", "0100") == 1
    assert compare_values("uuid", "80000000-0000-0000-0000-000000000000",
                          "7fffffff-ffff-ffff-ffff-ffffffffffff") == 1
    with pytest.raises(UnsupportedTypeError):
        compare_values("struct", "a", "b")
