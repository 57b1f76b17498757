"""How each DuckLake type is read from Parquet in Spark: the physical *reading* type a manifest's explicit schema asks
Spark's Parquet reader for, and the SQL that turns it into the Spark value users see (`types.to_spark`).

Why: Spark cannot read some Parquet logical types DuckDB writes (UUID, TIME, TIMESTAMP(NANOS), INTERVAL) as Spark
types; read as their physical values (16 bytes, microseconds, nanoseconds, 12 bytes) through an explicit schema they
never block the table, and a projection makes DuckDB's value of them. Some types are stored differently by DuckDB and
by this adapter's writer (`VARYING`): those tables' files are grouped by their footers' encoding (see manifest.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql import types as T

from ...lake.records import Column
from ..sql_literals import string_literal

FIELD_ID_KEY = "parquet.field.id"
# types whose Parquet encoding depends on the writer (DuckDB: DOUBLE / TIMESTAMP(NANOS) / annotated; ours: DECIMAL /
# TIMESTAMP(MICROS)); files of tables holding them are grouped by encoding, read from their footers
VARYING = frozenset({"int128", "uint128", "timestamp_ns", "geometry", "variant"})
# DuckDB writes these with Parquet logical types (GEOMETRY, VARIANT) that Spark 4.0's parquet-java 1.15 cannot parse:
# a file holding one cannot be opened at all, whichever columns a query selects; Spark reads a copy (spark/read/readable.py)
UNOPENABLE = frozenset({"geometry", "variant"})
Encoding = tuple[tuple[int, str], ...]  # sorted (column id, kind) of the VARYING leaves a file holds
_EPOCH_NTZ = "TIMESTAMP_NTZ'1970-01-01 00:00:00'"


def varying(columns: Sequence[Column]) -> list[Column]:
    """The leaves (at any depth) whose encoding must come from the file's footer."""
    return [c for top in columns for c in top.walk() if c.type in VARYING]


def file_encoding(schema: pa.Schema, columns: Sequence[Column]) -> Encoding:
    """How a file (its Arrow schema with field ids) stores the table's VARYING leaves."""
    leaves = varying(columns)
    if not leaves:
        return ()
    types = dict(_by_field_id(schema))
    out = []
    for c in leaves:
        t = types.get(c.column_id)
        if t is not None:
            out.append((c.column_id, encoding_kind(c.type, t)))
    return tuple(sorted(out))


def _by_field_id(fields: Any) -> Iterator[tuple[int, pa.DataType]]:
    for f in fields:
        raw = (f.metadata or {}).get(b"PARQUET:field_id")
        if raw is not None:
            yield int(raw), f.type
        t = f.type
        if pa.types.is_struct(t):
            yield from _by_field_id([t.field(i) for i in range(t.num_fields)])
        elif pa.types.is_map(t):
            yield from _by_field_id([t.key_field, t.item_field])
        elif pa.types.is_list(t) or pa.types.is_large_list(t):
            yield from _by_field_id([t.value_field])


def encoding_kind(type_: str, t: pa.DataType) -> str:
    """How a Parquet field (as Arrow reads it) stores a VARYING type."""
    if type_ in ("int128", "uint128"):
        return "double" if pa.types.is_floating(t) else "decimal"
    if type_ == "timestamp_ns":
        # an integer: nanoseconds, as a remote readable copy holds them (spark/read/remote_readable.py)
        return "ns" if (pa.types.is_timestamp(t) and t.unit == "ns") or pa.types.is_integer(t) else "us"
    if type_ == "geometry" and (pa.types.is_string(t) or pa.types.is_large_string(t)):
        return "text"  # WKT, as this adapter writes it: Spark opens the file
    return "opaque"


def unopenable(encoding: Encoding, columns: Sequence[Column]) -> Column | None:
    """The first column a file holds that Spark cannot open the file with (see UNOPENABLE), or None."""
    ids = {i for i, k in encoding if k == "opaque"}
    return next((c for top in columns for c in top.walk() if c.column_id in ids), None)


# ---------------------------------------------------------------------------------------------- reading types

def reading_type(col: Column, enc: dict[int, str], user: T.DataType) -> T.DataType:
    """The type the explicit schema reads the column's Parquet values as (user: `to_spark(col)`)."""
    t = col.type
    if t == "list":
        (elem,) = col.children
        return T.ArrayType(reading_type(elem, enc, user.elementType), True)  # type: ignore[attr-defined]
    if t == "map":
        k, v = col.children
        return T.MapType(reading_type(k, enc, user.keyType), reading_type(v, enc, user.valueType),  # type: ignore
                         True)
    if t == "struct":
        fields = user.fields  # type: ignore[attr-defined]
        return T.StructType([T.StructField(c.name, reading_type(c, enc, f.dataType), True,
                                           {FIELD_ID_KEY: c.column_id}) for c, f in zip(col.children, fields, strict=True)])
    if t in ("uuid", "interval"):
        return T.BinaryType()
    if t == "geometry":
        return T.StringType()  # WKT (readable copies of DuckDB's files, and this adapter's)
    if t == "variant":
        return T.VariantType()
    if t in ("time", "timetz", "time_ns"):
        return T.LongType()
    if t == "timestamp_ns":
        return T.TimestampNTZType() if enc.get(col.column_id) == "us" else T.LongType()
    if t in ("int128", "uint128"):
        return T.DoubleType() if enc.get(col.column_id) == "double" else T.DecimalType(38, 0)
    return user


def file_reading_schema(schema: pa.Schema) -> T.StructType:
    """The explicit Spark schema a Parquet file is read with by its own field names (the footer-based path: name-mapped
    files, remote storage), its physical values as `reading_type` reads them: Spark never infers a schema, so a
    UUID/TIME/TIMESTAMP(NANOS)/INTERVAL field (which Spark's inference rejects) reads as bytes or ticks that
    `project` turns into the column's value. Fields of a type Spark cannot read are left out (read as NULL)."""
    fields = [T.StructField(f.name, t, True) for f in schema if (t := _reading_of_arrow(f.type)) is not None]
    return T.StructType(fields)


def _reading_of_arrow(t: pa.DataType) -> T.DataType | None:
    if isinstance(t, pa.BaseExtensionType):  # arrow.uuid
        return _reading_of_arrow(t.storage_type)
    if pa.types.is_struct(t):
        names = {t.field(i).name for i in range(t.num_fields)}
        if names in ({"metadata", "value"}, {"metadata", "value", "typed_value"}):
            return T.VariantType()  # a variant group (a readable copy of DuckDB's file: spark/read/readable.py)
        kids = [T.StructField(t.field(i).name, k, True) for i in range(t.num_fields)
                if (k := _reading_of_arrow(t.field(i).type)) is not None]
        return T.StructType(kids) if kids else None
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        e = _reading_of_arrow(t.value_type)
        return None if e is None else T.ArrayType(e, True)
    if pa.types.is_map(t):
        k, v = _reading_of_arrow(t.key_type), _reading_of_arrow(t.item_type)
        return None if k is None or v is None else T.MapType(k, v, True)
    if pa.types.is_decimal(t):
        return T.DecimalType(t.precision, t.scale) if t.precision <= 38 else None
    if pa.types.is_timestamp(t):
        if t.unit == "ns":
            return T.LongType()  # nanoseconds since the epoch (timestamp_ns)
        return T.TimestampType() if t.tz is not None else T.TimestampNTZType()
    if pa.types.is_time32(t):
        return T.IntegerType()
    if pa.types.is_time64(t):
        return T.LongType()  # ticks since midnight (time, timetz)
    for test, spark in _ARROW_SCALARS:
        if test(t):
            return spark()
    return None


_ARROW_SCALARS: list[tuple[Callable[[pa.DataType], bool], Callable[[], T.DataType]]] = [
    (pa.types.is_boolean, T.BooleanType), (pa.types.is_int8, T.ByteType), (pa.types.is_int16, T.ShortType),
    (pa.types.is_int32, T.IntegerType), (pa.types.is_int64, T.LongType), (pa.types.is_uint8, T.ShortType),
    (pa.types.is_uint16, T.IntegerType), (pa.types.is_uint32, T.LongType),
    (pa.types.is_uint64, lambda: T.DecimalType(20, 0)), (pa.types.is_float32, T.FloatType),
    (pa.types.is_float64, T.DoubleType), (pa.types.is_string, T.StringType), (pa.types.is_large_string, T.StringType),
    (pa.types.is_binary, T.BinaryType), (pa.types.is_large_binary, T.BinaryType),
    (pa.types.is_fixed_size_binary, T.BinaryType), (pa.types.is_date32, T.DateType),
]


# ------------------------------------------------------------------------------------------------ projections

def nested_sql(col: Column, ref: str, leaf: Callable[[Column, str], str], depth: int = 0) -> str:
    """SQL applying leaf(column, ref) to every leaf of a column tree through lists, maps and structs (lambdas and
    named_struct); ref itself where no leaf changes."""
    t = col.type
    if t == "list":
        var = f"e{depth}"
        inner = nested_sql(col.children[0], var, leaf, depth + 1)
        return ref if inner == var else f"transform({ref}, {var} -> {inner})"
    if t == "map":
        kv, vv = f"k{depth}", f"v{depth}"
        kexpr = nested_sql(col.children[0], kv, leaf, depth + 1)
        vexpr = nested_sql(col.children[1], vv, leaf, depth + 1)
        out = ref
        if vexpr != vv:
            out = f"transform_values({out}, ({kv}, {vv}) -> {vexpr})"
        if kexpr != kv:
            out = f"transform_keys({out}, ({kv}, {vv}) -> {kexpr})"
        return out
    if t == "struct":
        parts = [(c.name, nested_sql(c, f"{ref}.`{c.name.replace('`', '``')}`", leaf, depth)) for c in col.children]
        if all(p == f"{ref}.`{n.replace('`', '``')}`" for n, p in parts):
            return ref
        inner = ", ".join(f"{string_literal(n)}, {p}" for n, p in parts)
        return f"CASE WHEN {ref} IS NULL THEN NULL ELSE named_struct({inner}) END"
    return leaf(col, ref)


def project(col: Column, ref: str, enc: dict[int, str]) -> str:
    """SQL turning the read value at ref into the column's Spark value; ref itself where they are the same."""
    return nested_sql(col, ref, lambda c, r: _project_leaf(c, r, enc))


def _project_leaf(col: Column, ref: str, enc: dict[int, str]) -> str:
    t = col.type
    if t == "uuid":
        return f"lower(regexp_replace(hex({ref}), '^(.{{8}})(.{{4}})(.{{4}})(.{{4}})(.{{12}})$', '$1-$2-$3-$4-$5'))"
    if t in ("time", "time_ns"):
        return clock_text_sql(ref, 10**9 if t == "time_ns" else 10**6)
    if t == "timetz":
        return f"concat({clock_text_sql(ref, 10**6)}, '+00')"  # Parquet holds the UTC time: DuckDB reads +00 too
    if t == "timestamp_ns":
        if enc.get(col.column_id) == "us":
            return ref
        # DuckDB's TIMESTAMP_NS -> TIMESTAMP cast truncates toward zero, as div does
        return f"timestampadd(MICROSECOND, div({ref}, 1000), {_EPOCH_NTZ})"
    if t == "interval":
        return _interval_sql(ref)
    if t in ("int128", "uint128") and enc.get(col.column_id) == "double":
        return wide_integer_from_double_sql(ref, col.name, t)
    if t == "variant":
        # DuckDB's variant::JSON; a variant NULL is DuckDB's SQL NULL (how it stores an inserted NULL)
        return f"CASE WHEN is_variant_null({ref}) THEN NULL ELSE to_json({ref}) END"
    return ref


def clock_text_sql(ref: str, per_second: int) -> str:
    """DuckDB's text of a time of day given in ticks since midnight: HH:MM:SS[.fraction without trailing zeros]."""
    digits = len(str(per_second)) - 1

    def two(expr: str) -> str:
        return f"lpad(CAST({expr} AS STRING), 2, '0')"

    frac = (f"CASE WHEN {ref} % {per_second} = 0 THEN '' ELSE concat('.', regexp_replace(lpad(CAST({ref} % "
            f"{per_second} AS STRING), {digits}, '0'), '0+$', '')) END")
    return (f"concat({two(f'div({ref}, {per_second * 3600})')}, ':', {two(f'div({ref}, {per_second * 60}) % 60')}, "
            f"':', {two(f'div({ref}, {per_second}) % 60')}, {frac})")


def _interval_sql(ref: str) -> str:
    """(months, days, micros) of a Parquet INTERVAL (12 bytes: little-endian uint32 months, days, millis; DuckDB's
    files) or of the text this adapter writes ('<m> months <d> days <us> microseconds', never 12 bytes long)."""
    def le32(offset: int) -> str:
        hexes = ", ".join(f"substr(hex({ref}), {2 * (offset + i) + 1}, 2)" for i in (3, 2, 1, 0))
        return f"CAST(conv(concat({hexes}), 16, 10) AS BIGINT)"

    text = f"CAST({ref} AS STRING)"
    pattern = "'^(-?[0-9]+) months (-?[0-9]+) days (-?[0-9]+) microseconds$'"

    def part(i: int, typ: str) -> str:
        return f"CAST(regexp_extract({text}, {pattern}, {i}) AS {typ})"

    raw = (f"named_struct('months', CAST({le32(0)} AS INT), 'days', CAST({le32(4)} AS INT), "
           f"'micros', {le32(8)} * 1000)")
    written = f"named_struct('months', {part(1, 'INT')}, 'days', {part(2, 'INT')}, 'micros', {part(3, 'BIGINT')})"
    return f"CASE WHEN {ref} IS NULL THEN NULL WHEN length({ref}) = 12 THEN {raw} ELSE {written} END"


def wide_integer_from_double_sql(ref: str, name: str, type_: str) -> str:
    """DECIMAL(38,0) from a DOUBLE holding a HUGEINT/UHUGEINT (DuckDB writes those as DOUBLE), by DuckDB's route.

    DuckDB converts the double's exact binary value; Spark's DOUBLE -> DECIMAL cast goes through the double's shortest
    decimal text (340282366920938432 becomes 340282366920938430). Here d = m * 2^k exactly: k = max(0, log2|d| - 60)
    makes m = d / 2^k an integer below 2^62 (a double has 53 significant bits), so the BIGINT cast is exact, and 2^k
    (k <= 68) is built from two exact BIGINT factors. A value DECIMAL(38,0) cannot hold raises an error naming the column.
    """
    k = f"greatest(0, CAST(floor(log2(abs({ref}))) AS INT) - 60)"
    a, b = f"least({k}, 50)", f"({k} - least({k}, 50))"
    exact = (f"CAST({ref} / pow(2, {k}) AS BIGINT) * CAST(CAST(pow(2, {a}) AS BIGINT) AS DECIMAL(19,0))"
             f" * CAST(CAST(pow(2, {b}) AS BIGINT) AS DECIMAL(19,0))")
    msg = (f"column {name!r} has DuckLake type {type_} and a value beyond DECIMAL(38,0), Spark's widest integer; "
           f"narrow or cast it (e.g. to DOUBLE) in DuckDB")
    return (f"CASE WHEN {ref} IS NULL OR {ref} = 0 THEN CAST({ref} AS DECIMAL(38,0))"
            f" WHEN isnan({ref}) OR abs({ref}) >= 1e38 THEN CAST(raise_error({string_literal(msg)}) AS DECIMAL(38,0))"
            f" ELSE CAST({exact} AS DECIMAL(38,0)) END")
