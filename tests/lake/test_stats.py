"""Per-file column stats from Parquet footers, compared with the rows DuckDB's ducklake extension writes."""

from __future__ import annotations

import dataclasses
import decimal
import io
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dbt.adapters.ducklake.lake.errors import InvalidDataFileError
from dbt.adapters.ducklake.lake.records import Column, ColumnStats, TableColumnStats
from dbt.adapters.ducklake.lake.types import arrow_schema, compare_values, format_value, parse_value
from dbt.adapters.ducklake.lake.write.datafiles import read_footer
from dbt.adapters.ducklake.lake.write.stats import file_column_stats, footer_size, merge_table_column_stats
from tests.lake.test_types import lake_columns
from tests.support import reference

META = "__ducklake_metadata_lake"


@pytest.fixture
def lake(tmp_path: Path) -> Iterator:
    with reference.attached(str(tmp_path / "cat.ducklake"), data_path=str(tmp_path / "data") + "/",
                            options={"DATA_INLINING_ROW_LIMIT": 0}) as con:
        yield con


def data_files(con, table: str, root: Path) -> list[tuple[int, Path, int]]:
    """(data_file_id, local path, footer_size) of the table's live data files."""
    rows = con.execute(
        f"""SELECT f.data_file_id, f.path, f.footer_size FROM {META}.ducklake_data_file f
            JOIN {META}.ducklake_table t USING (table_id)
            WHERE t.table_name = ? AND t.end_snapshot IS NULL AND f.end_snapshot IS NULL
            ORDER BY f.data_file_id""", [table]).fetchall()
    out = []
    for fid, path, footer in rows:
        local = Path(path) if Path(path).is_absolute() else next(root.rglob(Path(path).name))
        out.append((fid, local, footer))
    return out


def duckdb_stats(con, data_file_id: int) -> dict[int, ColumnStats]:
    rows = con.execute(
        f"""SELECT column_id, column_size_bytes, value_count, null_count, min_value, max_value, contains_nan
            FROM {META}.ducklake_file_column_stats WHERE data_file_id = ? ORDER BY column_id""",
        [data_file_id]).fetchall()
    return {r[0]: ColumnStats(*r) for r in rows}


def check_table(con, table: str, root: Path, expected_differences: dict[str, str] | None = None, *,
                by: str = "field_id") -> list[ColumnStats]:
    """Our stats of every data file of the table equal DuckDB's, except the named columns, where ours are a
    safe version of DuckDB's for the given reason:

    - 'nan': DuckDB takes min/max from its writer's memory, but its Parquet writer leaves min/max out of
      chunks holding a NaN, so the footer has none; ours are NULL (contains_nan True in both).
    - 'no_footer_stats': interval and timetz chunks carry no Parquet statistics; DuckDB then records
      size/value_count/null_count as 0 (a NULL-safe filter would even prune on value_count = 0). Ours: the
      real compressed size and NULL counts.
    - 'truncated': DuckDB stores its Parquet writer's 256-byte truncated (inexact) string bounds; ours are
      NULL because Parquet marks them inexact (exact or absent).
    - 'bool_text': ducklake_add_data_files prints boolean bounds as 'true'/'false', DuckDB's writer '0'/'1'.
    - 'blob_text': ducklake_add_data_files prints blob bounds as '\\x00\\xFF' where DuckDB's writer (and we)
      use hex; both denote the same bytes (DuckDB does not prune on blob stats).
    - 'nan_unknown': a foreign file registered with ducklake_add_data_files: DuckDB records contains_nan
      NULL (unknown); we say True (maybe), which DuckDB treats the same way.
    """
    expected_differences = expected_differences or {}
    columns = lake_columns(con, table)
    leaves = {leaf.column_id: leaf for top in columns for leaf in top.leaves()}
    by_name = {leaf.column_id: name for top in columns for leaf in top.leaves() for name in [leaf.name]}
    all_ours: list[ColumnStats] = []
    files = data_files(con, table, root)
    assert files
    for fid, path, _ in files:
        ours = file_column_stats(pq.ParquetFile(path).metadata, columns, by=by)
        theirs = duckdb_stats(con, fid)
        assert [s.column_id for s in ours] == sorted(theirs), "one row per leaf, in column_id order"
        for o in ours:
            t = theirs[o.column_id]
            reason = expected_differences.get(leaves[o.column_id].name)
            if t.min_value is t.max_value is None and o.min_value is not None and reason != "truncated":
                # DuckDB drops a file's bounds when some row group holds only NULLs (or has no bounds); we
                # skip all-NULL row groups. Ours must then be the true bounds: check them on the data.
                assert (o.min_value, o.max_value) == true_bounds(con, table, columns, o.column_id)
                t = dataclasses.replace(t, min_value=o.min_value, max_value=o.max_value)
            if reason is None:
                assert o == t, (by_name[o.column_id], o, t)
            elif reason == "nan":
                assert (o.column_size_bytes, o.value_count, o.null_count) == (
                    t.column_size_bytes, t.value_count, t.null_count)
                assert o.contains_nan is True and t.contains_nan is True
                assert o.min_value is None and o.max_value is None
            elif reason == "no_footer_stats":
                assert (t.column_size_bytes, t.value_count, t.null_count, t.min_value) == (0, 0, 0, None)
                assert o.column_size_bytes > 0 and o.value_count is None and o.null_count is None
                assert o.min_value is None and o.max_value is None
            elif reason == "truncated":
                assert (o.column_size_bytes, o.value_count, o.null_count) == (
                    t.column_size_bytes, t.value_count, t.null_count)
                assert o.min_value in (None, t.min_value) and o.max_value in (None, t.max_value)
                assert None in (o.min_value, o.max_value)
            elif reason == "blob_text":  # add_data_files prints blobs as '\\x00\\xFF', its own writer as hex
                assert (o.column_size_bytes, o.value_count, o.null_count) == (
                    t.column_size_bytes, t.value_count, t.null_count)
                for ours_text, their_text in ((o.min_value, t.min_value), (o.max_value, t.max_value)):
                    if their_text != ours_text:
                        assert bytes.fromhex(ours_text) == con.execute("SELECT ?::BLOB", [their_text]).fetchone()[0]
            elif reason == "bool_text":  # add_data_files prints 'true'/'false', DuckDB's writer (and we) '1'/'0'
                assert o == ColumnStats(t.column_id, t.column_size_bytes, t.value_count, t.null_count,
                                        *(format_value("boolean", parse_value("boolean", v))
                                          for v in (t.min_value, t.max_value)), t.contains_nan)
            elif reason == "nan_unknown":
                assert o == ColumnStats(t.column_id, t.column_size_bytes, t.value_count, t.null_count,
                                        t.min_value, t.max_value, True)
                assert t.contains_nan is None
            else:
                raise AssertionError(reason)
        all_ours.extend(ours)
    return all_ours


def true_bounds(con, table: str, columns: tuple[Column, ...], column_id: int) -> tuple[str, str]:
    """min/max of a leaf column computed by DuckDB from the data, as stat texts."""

    def path(cols, trail):
        for c in cols:
            if c.column_id == column_id:
                return [*trail, c]
            found = path(c.children, [*trail, c])
            if found:
                return found
        return None

    steps = path(columns, [])
    query = f"SELECT {steps[0].name} AS v FROM lake.{table}"
    for parent, child in zip(steps, steps[1:], strict=False):
        expr = {"list": "unnest(v)", "struct": f'v."{child.name}"',
                "map": f"unnest(map_{'keys' if child.name == 'key' else 'values'}(v))"}[parent.type]
        query = f"SELECT {expr} AS v FROM ({query})"
    leaf = steps[-1]
    row = con.execute(f"SELECT min(v), max(v), min(v)::VARCHAR, max(v)::VARCHAR FROM ({query})").fetchone()
    if leaf.type in ("blob", "boolean"):
        return format_value(leaf.type, row[0]), format_value(leaf.type, row[1])
    return row[2], row[3]


SCALARS = """
    i8 TINYINT, i16 SMALLINT, i32 INTEGER, i64 BIGINT, u8 UTINYINT, u16 USMALLINT, u32 UINTEGER, u64 UBIGINT,
    h HUGEINT, uh UHUGEINT, f32 FLOAT, f64 DOUBLE,
    d41 DECIMAL(4,1), d93 DECIMAL(9,3), d184 DECIMAL(18,4), d3810 DECIMAL(38,10), d200 DECIMAL(20,0),
    s VARCHAR, bl BLOB, b BOOLEAN, dt DATE, t TIME, ts TIMESTAMP, tz TIMESTAMPTZ, ts_s TIMESTAMP_S,
    ts_ms TIMESTAMP_MS, ts_ns TIMESTAMP_NS, u UUID, j JSON, iv INTERVAL, ttz TIMETZ
"""
SCALAR_ROWS = """
(-128, -32768, -2147483648, -9223372036854775808, 0, 0, 0, 0, -170141183460469231731687303715884105728, 0,
 '-inf', '-inf', -999.9, -1.5, -12345678901234.5678, -1234567890123456789012345678.0123456789,
 -99999999999999999999, '', ''::BLOB, false, '0044-03-15 (BC)', '00:00:00', '0044-03-15 (BC) 12:00:00.5',
 '1970-01-01 00:00:00+00', '1900-01-01 00:00:01', '1900-01-01 00:00:00.001', '1677-09-22 00:00:00.000000001',
 '00000000-0000-0000-0000-000000000000', '{"a": 1}', INTERVAL 1 DAY, '12:00:00+05'),
(127, 32767, 2147483647, 9223372036854775807, 255, 65535, 4294967295, 18446744073709551615, 1, 2,
 3.4028235e38, 1e300, 999.9, 0.001, 1.0, 0.0000000001, 5, 'héllo wörld 😀', '\\xFF\\x01'::BLOB, true,
 '9999-12-31', '24:00:00', '294247-01-10 04:00:54.775806', '2262-01-01 00:00:00.5+00', '2262-01-01 00:00:00',
 '2262-01-01 00:00:00.999', '2262-04-11 23:47:16.854775', 'ffffffff-ffff-ffff-ffff-ffffffffffff', '[1,2]',
 INTERVAL '1 year 2 months', '13:00:00-03:30'),
(0, 1, 7, 8, 9, 10, 11, 12, 13, 14, 33.333332, 0.1, 0.5, 2.25, 3.125, 4.5, 6, 'z', '\\x00'::BLOB, NULL,
 '2000-02-29', '12:00:00.5', '2024-01-05 14:00:00.123', '2024-01-01 12:40:00+01', '2024-01-01 00:00:00',
 '2024-01-01 00:00:00.12', '2024-01-01 00:00:00.000001', '7fffffff-ffff-ffff-ffff-ffffffffffff', 'null',
 INTERVAL '1 second', '00:00:00+00'),
(NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, -0.0, -0.0, NULL, NULL, NULL, NULL, NULL, NULL,
 NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)
"""


def test_scalar_types_match_duckdb(lake, tmp_path):
    lake.execute(f"CREATE TABLE lake.scalars ({SCALARS})")
    lake.execute(f"INSERT INTO lake.scalars VALUES {SCALAR_ROWS}")
    ours = check_table(lake, "scalars", tmp_path, {"iv": "no_footer_stats", "ttz": "no_footer_stats"})
    by_id = {s.column_id: s for s in ours}
    columns = {c.name: c.column_id for c in lake_columns(lake, "scalars")}
    # a few of the texts, spelled out
    assert (by_id[columns["u64"]].min_value, by_id[columns["u64"]].max_value) == ("0", "18446744073709551615")
    assert by_id[columns["f32"]].max_value == "3.4028235e+38" and by_id[columns["f32"]].contains_nan is False
    assert by_id[columns["d3810"]].min_value == "-1234567890123456789012345678.0123456789"
    assert by_id[columns["dt"]].min_value == "0044-03-15 (BC)"
    assert by_id[columns["tz"]].max_value == "2262-01-01 00:00:00.5+00"
    assert by_id[columns["bl"]].max_value == "FF01" and by_id[columns["b"]].min_value == "0"
    assert by_id[columns["h"]].min_value is None and by_id[columns["h"]].value_count == 3  # HUGEINT as DOUBLE


def test_nan_floats(lake, tmp_path):
    lake.execute("CREATE TABLE lake.f (a FLOAT, b DOUBLE, all_nan DOUBLE, no_nan DOUBLE, only_null FLOAT)")
    lake.execute("""INSERT INTO lake.f VALUES (1.5, 'nan', 'nan', 1.0, NULL), ('nan', -2.5, 'nan', 'inf', NULL),
                    (NULL, NULL, NULL, NULL, NULL), ('-inf', 1e10, 'nan', -1.0, NULL)""")
    ours = check_table(lake, "f", tmp_path, {"a": "nan", "b": "nan"})
    nan = {s.column_id: s.contains_nan for s in ours}
    assert list(nan.values()) == [True, True, True, False, False]


def test_nested_types(lake, tmp_path):
    lake.execute("""CREATE TABLE lake.n (l INT[], ll VARCHAR[][], st STRUCT(a INT, b VARCHAR),
        ls STRUCT(x DOUBLE, y VARCHAR[])[], m MAP(VARCHAR, INT), ms MAP(INT, STRUCT(p DATE, q BOOLEAN)),
        sl STRUCT(k INT[], v MAP(VARCHAR, DECIMAL(9,2))), e INT[])""")
    lake.execute("""INSERT INTO lake.n VALUES
        ([1, 2, NULL], [['a', NULL], [], NULL], {'a': 1, 'b': 'x'}, [{'x': 1.5, 'y': ['p', 'q']}, NULL],
         MAP {'k': 1, 'z': NULL}, MAP {1: {'p': '2024-01-01', 'q': true}, 2: NULL},
         {'k': [5, 6], 'v': MAP {'m': 1.25}}, []),
        (NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL),
        ([], [[]], {'a': NULL, 'b': NULL}, [], MAP {}, MAP {}, {'k': NULL, 'v': NULL}, [NULL]),
        ([-7], [['zz']], {'a': -3, 'b': ''}, [{'x': -0.5, 'y': []}], MAP {'a': -1},
         MAP {-5: {'p': '1999-12-31', 'q': false}}, {'k': [], 'v': MAP {}}, NULL)""")
    ours = check_table(lake, "n", tmp_path)
    element = {s.column_id: s for s in ours}[2]
    assert (element.value_count, element.null_count, element.min_value, element.max_value) == (3, 3, "-7", "2")


def test_all_null_and_empty_values(lake, tmp_path):
    lake.execute("CREATE TABLE lake.z (i INT, s VARCHAR, d DATE, l INT[], st STRUCT(a INT), f DOUBLE, e VARCHAR,"
                 " dec DECIMAL(38,2), u UUID, b BOOLEAN)")
    lake.execute("INSERT INTO lake.z SELECT NULL, NULL, NULL, NULL, NULL, NULL, '', NULL, NULL, NULL FROM range(5)")
    ours = check_table(lake, "z", tmp_path)
    i = ours[0]
    assert (i.value_count, i.null_count, i.min_value, i.max_value) == (0, 5, None, None)
    ids = {c.name: c.column_id for c in lake_columns(lake, "z")}
    empty = next(s for s in ours if s.column_id == ids["e"])
    assert (empty.min_value, empty.max_value) == ("", "")


def test_long_strings(lake, tmp_path):
    lake.execute("CREATE TABLE lake.long (a VARCHAR, b VARCHAR, c BLOB, d BLOB, short VARCHAR)")
    lake.execute("""INSERT INTO lake.long VALUES
        (repeat('a', 300) || 'x', repeat('é', 300), repeat('\\xFF', 300)::BLOB, repeat('\\x01', 300)::BLOB, 'k'),
        (repeat('b', 257), repeat('é', 10), '\\x00'::BLOB, '\\x00'::BLOB, repeat('s', 256))""")
    # 'b': its longest value cannot be truncated upwards (no ASCII byte to increment), so DuckDB keeps no
    # bounds at all, like 'c' (all 0xFF bytes); we agree on both.
    check_table(lake, "long", tmp_path, {"a": "truncated", "d": "truncated"})


def test_many_row_groups(tmp_path):
    catalog, data = str(tmp_path / "cat.ducklake"), str(tmp_path / "data") + "/"
    with reference.attached(catalog, data_path=data) as con:
        con.execute("CALL lake.set_option('parquet_row_group_size', 2048)")
        con.execute("CALL lake.set_option('data_inlining_row_limit', 0)")
    with reference.attached(catalog, data_path=data) as con:
        con.execute("""CREATE TABLE lake.r AS SELECT i, (i * 7919 % 10007)::VARCHAR s,
            CASE WHEN i % 3 = 0 THEN NULL ELSE i * 1.5 END f, ((i % 1000)::DECIMAL(12,3) / 7)::DECIMAL(12,3) d,
            TIMESTAMP '2024-01-01' + i * INTERVAL 1 MINUTE ts, CASE WHEN i < 5000 THEN NULL ELSE i END late,
            [i, i + 1] l FROM range(20000) t(i)""")
        (_, path, _), = data_files(con, "r", tmp_path)
        assert pq.ParquetFile(path).metadata.num_row_groups > 5
        # 'late' is NULL in the first row groups: DuckDB keeps no bounds for it, we keep the true ones
        (late,) = [s for s in check_table(con, "r", tmp_path) if s.column_id == 6]
        assert (late.min_value, late.max_value) == ("5000", "19999")


def test_footer_size(lake, tmp_path):
    lake.execute("CREATE TABLE lake.t (i INT, s VARCHAR)")
    lake.execute("INSERT INTO lake.t VALUES (1, 'a'), (2, NULL)")
    for _, path, footer in data_files(lake, "t", tmp_path):
        assert footer_size(path) == footer
        assert footer_size(str(path)) == footer
        with open(path, "rb") as f:
            f.seek(3)
            assert footer_size(f) == footer
            assert f.tell() == 3
    with pytest.raises(InvalidDataFileError):
        footer_size(io.BytesIO(b"not a parquet file"))


def test_read_footer_gives_duckdb_sizes_from_one_parse(lake, tmp_path):
    lake.execute("CREATE TABLE lake.t (i INT, s VARCHAR)")
    lake.execute("INSERT INTO lake.t VALUES (1, 'a'), (2, NULL)")
    for _, path, footer in data_files(lake, "t", tmp_path):
        got = read_footer(str(path))
        assert (got.footer_size, got.file_size) == (footer, path.stat().st_size)
        assert got.metadata.num_rows == 2 and got.metadata.created_by.startswith("DuckDB")
        assert got.schema.names == pq.ParquetFile(path).schema_arrow.names
    bad = tmp_path / "bad.parquet"
    bad.write_bytes(b"PAR1 truncated")
    for path in (bad, tmp_path / "missing.parquet"):
        with pytest.raises(InvalidDataFileError):
            read_footer(str(path))


# ------------------------------------------------------------------------------- files of other writers

def foreign_table() -> pa.Table:
    nan = float("nan")
    return pa.table({
        "u32": pa.array([1, 4_000_000_000, None], pa.uint32()),
        "u64": pa.array([1, 2**64 - 1, None], pa.uint64()),
        "u8": pa.array([0, 255, None], pa.uint8()),
        "dec": pa.array([decimal.Decimal("1.50"), decimal.Decimal("-3.25"), None], pa.decimal128(10, 2)),
        "dec38": pa.array([decimal.Decimal("1e30"), decimal.Decimal("-0.5"), None], pa.decimal128(38, 1)),
        "f": pa.array([1.5, nan, None], pa.float64()),
        "f32": pa.array([0.1, -2.5, 7.0], pa.float32()),
        "s": pa.array(["b", "a" * 300, None]),
        "bl": pa.array([b"\x00\xff", b"", None], pa.binary()),
        "tsms": pa.array([0, -1234, None], pa.timestamp("ms")),
        "tsns": pa.array([0, 1_234_567, None], pa.timestamp("ns")),
        "ts": pa.array([10**15, -1, None], pa.timestamp("us")),
        "tz": pa.array([10**15, 5, None], pa.timestamp("us", tz="UTC")),
        "dt": pa.array([0, -800_000, None], pa.date32()),
        "t": pa.array([0, 86_399_999_999, None], pa.time64("us")),
        "b": pa.array([True, True, None]),
        "u": pa.array([b"\x12" * 16, b"\x80" + b"\x00" * 15, None], pa.uuid()),
        "l": pa.array([[1, None], None, []], pa.list_(pa.int32())),
        "st": pa.array([{"x": 1, "y": "q"}, None, {"x": None, "y": "a"}],
                       pa.struct([("x", pa.int16()), ("y", pa.string())])),
        "m": pa.array([[("k", 1.5)], [], None], pa.map_(pa.string(), pa.float64())),
    })


FOREIGN_DDL = """u32 UINTEGER, u64 UBIGINT, u8 UTINYINT, dec DECIMAL(10,2), dec38 DECIMAL(38,1), f DOUBLE, f32 FLOAT,
    s VARCHAR, bl BLOB, tsms TIMESTAMP_MS, tsns TIMESTAMP_NS, ts TIMESTAMP, tz TIMESTAMPTZ, dt DATE, t TIME,
    b BOOLEAN, u UUID, l INTEGER[], st STRUCT(x SMALLINT, y VARCHAR), m MAP(VARCHAR, DOUBLE)"""


@pytest.mark.parametrize("options", [
    {}, {"version": "1.0", "coerce_timestamps": "us", "allow_truncated_timestamps": True},
    {"store_decimal_as_integer": True}, {"row_group_size": 1},
    {"use_dictionary": False, "compression": "zstd"},
], ids=["default", "v1", "decimal-int", "row-groups", "plain"])
def test_foreign_file_by_name_matches_add_data_files(lake, tmp_path, options):
    """A pyarrow file without field ids, registered by DuckDB, which reads the stats from the same footer."""
    path = tmp_path / "foreign.parquet"
    table, ddl = foreign_table(), FOREIGN_DDL
    if options.get("version") == "1.0":  # Parquet 1.0 keeps uint32 as a plain INT64, which DuckDB will not map
        table, ddl = table.drop_columns(["u32"]), ddl.replace("u32 UINTEGER, ", "")
    pq.write_table(table, path, **options)
    lake.execute(f"CREATE TABLE lake.t ({ddl})")
    lake.execute(f"CALL ducklake_add_data_files('lake', 't', '{path}')")
    check_table(lake, "t", tmp_path, {"f": "nan_unknown", "f32": "nan_unknown", "value": "nan_unknown",
                                       "bl": "blob_text", "b": "bool_text"},
                by="name")
    # no field ids in the file: matching by id finds nothing
    assert file_column_stats(pq.ParquetFile(path).metadata, lake_columns(lake, "t")) == []


def test_our_arrow_schema_gives_the_same_stats_by_field_id(lake, tmp_path):
    lake.execute(f"CREATE TABLE lake.t ({FOREIGN_DDL})")
    columns = lake_columns(lake, "t")
    path = tmp_path / "ours.parquet"
    pq.write_table(foreign_table().cast(arrow_schema(columns)), path)
    md = pq.ParquetFile(path).metadata
    assert file_column_stats(md, columns) == file_column_stats(md, columns, by="name")
    assert len(file_column_stats(md, columns)) == sum(1 for c in columns for _ in c.leaves())


def test_pyarrow_float_stats_say_maybe_nan_unless_told():
    table = pa.table({"f": pa.array([1.0, float("nan"), 2.0]), "g": pa.array([1.0, 2.0, None]),
                      "n": pa.array([None, None], pa.float64()).take([0, 1, 0])})
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    md = pq.read_metadata(pa.BufferReader(sink.getvalue()))
    cols = [Column(1, "f", "float64"), Column(2, "g", "float64"), Column(3, "n", "float64")]
    f, g, n = file_column_stats(md, cols, by="name")
    # Arrow's writer skips NaN when it computes min/max, so the bounds hold for the other values
    assert (f.min_value, f.max_value, f.contains_nan) == ("1.0", "2.0", True)
    assert g.contains_nan is True  # nothing in the footer says there is no NaN
    assert (n.value_count, n.contains_nan) == (0, False)
    _, g2, _ = file_column_stats(md, cols, by="name", contains_nan={2: False})
    assert g2.contains_nan is False


def test_timestamp_units_convert_only_when_exact():
    table = pa.table({"ms": pa.array([1, 2], pa.timestamp("ms")), "ns_exact": pa.array([1000, 5000], pa.timestamp("ns")),
                      "ns": pa.array([1001, 5000], pa.timestamp("ns")),
                      "tz": pa.array([0, 1], pa.timestamp("us", tz="UTC"))})
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    md = pq.read_metadata(pa.BufferReader(sink.getvalue()))
    cols = [Column(1, "ms", "timestamp"), Column(2, "ns_exact", "timestamp"), Column(3, "ns", "timestamp"),
            Column(4, "tz", "timestamp")]
    ms, ns_exact, ns, tz = file_column_stats(md, cols, by="name")
    assert (ms.min_value, ms.max_value) == ("1970-01-01 00:00:00.001", "1970-01-01 00:00:00.002")
    assert (ns_exact.min_value, ns_exact.max_value) == ("1970-01-01 00:00:00.000001", "1970-01-01 00:00:00.000005")
    assert (ns.min_value, ns.max_value) == (None, "1970-01-01 00:00:00.000005")  # 1001 ns is no whole microsecond
    # UTC-adjusted values in a naive column depend on DuckDB's session time zone: no bounds
    assert (tz.min_value, tz.max_value, tz.value_count) == (None, None, 2)


# ------------------------------------------------------------------------------------- table-level stats

def test_merged_stats_match_duckdb_table_column_stats(lake, tmp_path):
    lake.execute("CREATE TABLE lake.t (i INT, s VARCHAR, f DOUBLE, b BOOLEAN, d DATE, l INT[], late BIGINT)")
    lake.execute("INSERT INTO lake.t VALUES (5, 'm', 1.5, true, '2024-01-01', [1], NULL)")
    lake.execute("INSERT INTO lake.t VALUES (10, 'b', -1.5, NULL, '2023-01-01', [], NULL),"
                 " (NULL, 'z', 2, false, NULL, NULL, NULL)")
    lake.execute("INSERT INTO lake.t VALUES (-3, 'a', NULL, NULL, NULL, [-9, 100], 7)")
    columns = lake_columns(lake, "t")
    types = {leaf.column_id: leaf.type for top in columns for leaf in top.leaves()}
    table_id = lake.execute(f"SELECT table_id FROM {META}.ducklake_table WHERE table_name = 't'").fetchone()[0]
    merged: dict[int, TableColumnStats] = {}
    for _, path, _ in data_files(lake, "t", tmp_path):
        for s in file_column_stats(pq.ParquetFile(path).metadata, columns):
            merged[s.column_id] = merge_table_column_stats(merged.get(s.column_id), s, types[s.column_id],
                                                           table_id=table_id)
    theirs = {r[1]: TableColumnStats(*r) for r in lake.execute(
        f"""SELECT table_id, column_id, contains_null, contains_nan, min_value, max_value
            FROM {META}.ducklake_table_column_stats ORDER BY column_id""").fetchall()}
    assert merged == theirs


def test_merge_semantics():
    first = merge_table_column_stats(None, ColumnStats(3, 10, 2, 0, "5", "9"), "int32", table_id=1)
    assert first == TableColumnStats(1, 3, False, None, "5", "9")
    with pytest.raises(ValueError):
        merge_table_column_stats(None, ColumnStats(3, 10, 2, 0, "5", "9"), "int32")
    wider = merge_table_column_stats(first, ColumnStats(3, 10, 2, 1, "10", "40"), "int32")
    assert wider == TableColumnStats(1, 3, True, None, "5", "40")  # numeric, not text, comparison
    all_null = merge_table_column_stats(first, ColumnStats(3, 10, 0, 4, None, None), "int32")
    assert all_null == TableColumnStats(1, 3, True, None, "5", "9")
    unknown = merge_table_column_stats(first, ColumnStats(3, 10, 2, 0, None, "99"), "int32")
    assert (unknown.min_value, unknown.max_value) == (None, "99")  # unknown stays unknown, as in DuckDB
    nulls_unknown = merge_table_column_stats(first, ColumnStats(3, 10, None, None, "1", "2"), "int32")
    assert nulls_unknown.contains_null is None and nulls_unknown.min_value == "1"
    # DuckDB's own table stats may say 'true'/'false' (from inlined rows) where files say '0'/'1'
    booleans = merge_table_column_stats(TableColumnStats(1, 4, False, None, "false", "false"),
                                        ColumnStats(4, 5, 1, 0, "1", "1"), "boolean")
    assert (booleans.min_value, booleans.max_value) == ("false", "1")
    assert compare_values("boolean", booleans.max_value, "true") == 0
    floats = merge_table_column_stats(TableColumnStats(1, 5, False, False, "1.0", "2.0"),
                                      ColumnStats(5, 5, 1, 0, "-1e+300", "0.5", True), "float64")
    assert (floats.contains_nan, floats.min_value, floats.max_value) == (True, "-1e+300", "2.0")


def test_nan_inference_trusts_only_duckdb_writers_that_drop_nan_bounds(lake, tmp_path):
    lake.execute("CREATE TABLE lake.f (clean DOUBLE, dirty DOUBLE)")
    lake.execute("INSERT INTO lake.f VALUES (1.0, 'nan'), (2.0, 3.0)")
    columns = lake_columns(lake, "f")
    (_, path, footer), = data_files(lake, "f", tmp_path)
    raw = path.read_bytes()[-8 - footer:-8]
    clean, dirty = file_column_stats(raw, columns)  # the raw Thrift footer works as well as FileMetaData
    assert file_column_stats(pq.ParquetFile(path).metadata, columns) == [clean, dirty]
    assert (clean.contains_nan, clean.min_value, clean.max_value) == (False, "1.0", "2.0")
    assert (dirty.contains_nan, dirty.min_value, dirty.max_value) == (True, None, None)
    # before 1.3 DuckDB's writer did not leave NaN chunks without bounds: nothing can be inferred
    assert b"DuckDB version v1.5.5" in raw
    old = raw.replace(b"DuckDB version v1.5.5", b"DuckDB version v1.2.0")
    clean, dirty = file_column_stats(old, columns)
    assert (clean.contains_nan, clean.min_value, clean.max_value) == (True, "1.0", "2.0")
    assert dirty.contains_nan is True
