"""How Spark writes a DuckLake column whose type Spark cannot write as such, in a Parquet encoding that DuckDB reads
as that type (its Parquet reader casts a file's type to the column's) and that `type_readings` reads back:

| DuckLake | Spark value (types.to_spark) | written as | DuckDB reads it by |
| uuid | canonical text | BINARY, the 16 bytes | BLOB(16) -> UUID |
| time, timetz | 'HH:MM:SS[.ffffff]' (timetz: + offset; stored as UTC) | TIMESTAMP_NTZ on 1970-01-01 | TIMESTAMP -> TIME(TZ) |
| interval | struct(months, days, micros) | STRING '<m> months <d> days <us> microseconds' | VARCHAR -> INTERVAL |
| timestamp_ns/_ms/_s | TIMESTAMP_NTZ | TIMESTAMP_NTZ (microseconds) | TIMESTAMP -> TIMESTAMP_* |
| geometry | WKT text | STRING (checked to start as WKT) | VARCHAR -> GEOMETRY |
Checked against DuckDB 1.5.5 (tests/spark/test_column_types.py).
"""

from __future__ import annotations

from pyspark.sql import types as T

from ...lake.errors import UnsupportedTypeError
from ...lake.records import Column
from ..read.type_readings import nested_sql
from ..sql_literals import string_literal
from ..types import FIELD_ID_KEY, UNWRITABLE, to_spark

_EPOCH_NTZ = "TIMESTAMP_NTZ'1970-01-01 00:00:00'"
_WKT = ("'(?i)^\\\\s*(POINT|LINESTRING|POLYGON|MULTIPOINT|MULTILINESTRING|MULTIPOLYGON|GEOMETRYCOLLECTION)"
        "(\\\\s+(Z|M|ZM))?\\\\s*([(]|EMPTY)'")


def needs_conversion(col: Column) -> bool:
    """Whether the column (or a descendant) is written in another type than its Spark value's."""
    return any(c.type in _CONVERTED for c in col.walk())


_CONVERTED = frozenset({"uuid", "time", "timetz", "interval", "geometry"}) | frozenset(UNWRITABLE)


def write_type(col: Column) -> T.DataType:
    """The Spark type the column's values are written to Parquet as.

    Raises:
        UnsupportedTypeError: the column (or a child) has a type this adapter cannot write (types.UNWRITABLE).
    """
    t = col.type
    if t in UNWRITABLE:
        raise UnsupportedTypeError(f"column {col.name!r}: {UNWRITABLE[t]}")
    if t == "list":
        return T.ArrayType(write_type(col.children[0]), True)
    if t == "map":
        return T.MapType(write_type(col.children[0]), write_type(col.children[1]), True)
    if t == "struct":
        return T.StructType([T.StructField(c.name, write_type(c), True, {FIELD_ID_KEY: c.column_id})
                             for c in col.children])
    if t == "uuid":
        return T.BinaryType()
    if t in ("time", "timetz"):
        return T.TimestampNTZType()
    if t in ("interval", "geometry"):
        return T.StringType()
    return to_spark(col)


def write_sql(col: Column, ref: str, where: str) -> str:
    """SQL turning the column's Spark value at ref into its written value (ref itself where they are the same); a
    value that is not one of the type (a malformed uuid or time) fails the write naming the column (where)."""
    return nested_sql(col, ref, lambda c, r: _write_leaf(c, r, where))


def _write_leaf(col: Column, ref: str, where: str) -> str:
    t = col.type
    if t == "uuid":
        digits = f"regexp_replace({ref}, '[-{{}}]', '')"
        return (f"CASE WHEN {ref} IS NULL THEN NULL WHEN {digits} RLIKE '^[0-9a-fA-F]{{32}}$' THEN unhex({digits}) "
                f"ELSE CAST({_fail(where, 'uuid', ref)} AS BINARY) END")
    if t == "time":
        ts = f"try_cast(concat('1970-01-01 ', trim({ref})) AS TIMESTAMP_NTZ)"
        return f"CASE WHEN {ref} IS NULL THEN NULL ELSE coalesce({ts}, CAST({_fail(where, 'time', ref)} AS TIMESTAMP_NTZ)) END"
    if t == "timetz":
        return _timetz_sql(ref, where)
    if t == "geometry":  # DuckDB parses the WKT when it reads the file; text that is not WKT would fail there
        return (f"CASE WHEN {ref} IS NULL OR {ref} RLIKE {_WKT} THEN {ref} "
                f"ELSE CAST({_fail(where, 'geometry', ref)} AS STRING) END")
    if t == "interval":
        parts = ", ".join(f"CAST({ref}.{p} AS STRING), ' {unit} '" for p, unit in
                          (("months", "months"), ("days", "days")))
        return f"CASE WHEN {ref} IS NULL THEN NULL ELSE concat({parts}, CAST({ref}.micros AS STRING), ' microseconds') END"
    return ref


def _timetz_sql(ref: str, where: str) -> str:
    """A time with an offset ('12:34:56.5+02', '12:34:56-05:30', no offset = UTC) as its UTC time on 1970-01-01."""
    pattern = "'^\\\\s*([0-9]+:[0-9]{2}:[0-9]{2}(?:[.][0-9]+)?)\\\\s*(?:([+-])([0-9]{2})(?::?([0-9]{2}))?)?\\\\s*$'"
    clock = f"try_cast(concat('1970-01-01 ', regexp_extract({ref}, {pattern}, 1)) AS TIMESTAMP_NTZ)"
    sign = f"CASE regexp_extract({ref}, {pattern}, 2) WHEN '-' THEN -1 ELSE 1 END"
    hours = f"coalesce(try_cast(regexp_extract({ref}, {pattern}, 3) AS INT), 0)"
    minutes = f"coalesce(try_cast(regexp_extract({ref}, {pattern}, 4) AS INT), 0)"
    utc = f"timestampadd(MINUTE, -{sign} * ({hours} * 60 + {minutes}), {clock})"
    day = f"{_EPOCH_NTZ} + INTERVAL 1 DAY"
    wrapped = (f"CASE WHEN {utc} < {_EPOCH_NTZ} THEN {utc} + INTERVAL 1 DAY WHEN {utc} >= {day} "
               f"THEN {utc} - INTERVAL 1 DAY ELSE {utc} END")
    return (f"CASE WHEN {ref} IS NULL THEN NULL WHEN {clock} IS NULL THEN CAST({_fail(where, 'timetz', ref)} AS "
            f"TIMESTAMP_NTZ) ELSE {wrapped} END")


def _fail(where: str, type_: str, ref: str) -> str:
    msg = string_literal(f"{where} has DuckLake type {type_}; this value is not one: ")
    return f"raise_error(concat({msg}, CAST({ref} AS STRING)))"
