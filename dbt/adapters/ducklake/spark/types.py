"""Spark <-> DuckLake types, table driven. Types with no equivalent raise UnsupportedTypeError naming the column."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection, Sequence

from pyspark.sql import types as T

from ..lake.errors import UnsupportedTypeError
from ..lake.records import Column
from ..lake.types import decimal_params, parse_type

FIELD_ID_KEY = "parquet.field.id"

# DuckLake -> Spark for scalar types. Unsigned integers widen to the next signed type that holds them.
_TO_SPARK: dict[str, Callable[[], T.DataType]] = {
    "int8": T.ByteType, "int16": T.ShortType, "int32": T.IntegerType, "int64": T.LongType,
    "uint8": T.ShortType, "uint16": T.IntegerType, "uint32": T.LongType, "uint64": lambda: T.DecimalType(20, 0),
    "int128": lambda: T.DecimalType(38, 0), "uint128": lambda: T.DecimalType(38, 0),
    "float32": T.FloatType, "float64": T.DoubleType, "varchar": T.StringType, "json": T.StringType,
    "boolean": T.BooleanType, "blob": T.BinaryType, "date": T.DateType,
    "timestamp": T.TimestampNTZType, "timestamp_s": T.TimestampNTZType, "timestamp_ms": T.TimestampNTZType,
    "timestamptz": T.TimestampType,
}
_NO_SPARK = {
    "time": "Spark has no time-of-day type",
    "timetz": "Spark has no time-of-day type",
    "time_ns": "Spark has no time-of-day type",
    "interval": "Spark's interval types cannot hold months and days together",
    "uuid": "Spark's Parquet reader cannot read the UUID logical type",
    "timestamp_ns": "Spark reads nanosecond timestamps only as raw longs",
    "variant": "DuckLake variant values are not readable by Spark's Parquet reader",
    "geometry": "Spark has no geometry type",
}

# Spark -> DuckLake
_FROM_SPARK: list[tuple[type, Callable[[T.DataType], str]]] = [
    (T.ByteType, lambda t: "int8"), (T.ShortType, lambda t: "int16"), (T.IntegerType, lambda t: "int32"),
    (T.LongType, lambda t: "int64"), (T.FloatType, lambda t: "float32"), (T.DoubleType, lambda t: "float64"),
    (T.DecimalType, lambda t: f"decimal({t.precision},{t.scale})"),  # type: ignore[attr-defined]
    (T.StringType, lambda t: "varchar"), (T.VarcharType, lambda t: "varchar"), (T.CharType, lambda t: "varchar"),
    (T.BooleanType, lambda t: "boolean"), (T.BinaryType, lambda t: "blob"), (T.DateType, lambda t: "date"),
    (T.TimestampNTZType, lambda t: "timestamp"), (T.TimestampType, lambda t: "timestamptz"),
]


def to_spark(column: Column, path: str = "") -> T.DataType:
    """The Spark type of a DuckLake column tree.

    Raises:
        UnsupportedTypeError: the column (or a child) has a type Spark cannot hold.
    """
    name = f"{path}.{column.name}" if path else column.name
    t = parse_type(column.type)
    if t == "list":
        (elem,) = column.children
        return T.ArrayType(to_spark(elem, name), containsNull=elem.nullable)
    if t == "map":
        key, value = column.children
        return T.MapType(to_spark(key, name), to_spark(value, name), valueContainsNull=value.nullable)
    if t == "struct":
        return T.StructType([spark_field(c, name) for c in column.children])
    if t.startswith("decimal"):
        return T.DecimalType(*decimal_params(t))
    if t in _TO_SPARK:
        return _TO_SPARK[t]()
    reason = _NO_SPARK.get(t, "it has no Spark equivalent")
    raise UnsupportedTypeError(f"column {name!r} has DuckLake type {t}, which Spark cannot use: {reason}")


def spark_field(column: Column, path: str = "") -> T.StructField:
    """A StructField with the column's field id (Spark writes it into Parquet for top-level and struct fields)."""
    return T.StructField(column.name, to_spark(column, path), nullable=column.nullable,
                         metadata={FIELD_ID_KEY: column.column_id})


def spark_schema(columns: Sequence[Column]) -> T.StructType:
    """The Spark schema of a table's columns, with field ids."""
    return T.StructType([spark_field(c) for c in columns])


def from_spark(field: T.StructField, next_id: Callable[[], int], path: str = "") -> Column:
    """A DuckLake column tree for a Spark field; ids come from next_id, parent before children (as DuckDB numbers).

    Raises:
        UnsupportedTypeError: the field (or a child) has a type DuckLake cannot store.
    """
    name = f"{path}.{field.name}" if path else field.name
    column_id = next_id()
    dt = field.dataType
    if isinstance(dt, T.ArrayType):
        elem = from_spark(T.StructField("element", dt.elementType, dt.containsNull), next_id, name)
        return Column(column_id, field.name, "list", field.nullable, children=(elem,))
    if isinstance(dt, T.MapType):
        key = from_spark(T.StructField("key", dt.keyType, False), next_id, name)
        value = from_spark(T.StructField("value", dt.valueType, dt.valueContainsNull), next_id, name)
        return Column(column_id, field.name, "map", field.nullable, children=(key, value))
    if isinstance(dt, T.StructType):
        if not dt.fields:
            raise UnsupportedTypeError(f"column {name!r} is a struct without fields, which DuckLake cannot store")
        kids = tuple(from_spark(f, next_id, name) for f in dt.fields)
        return Column(column_id, field.name, "struct", field.nullable, children=kids)
    for cls, conv in _FROM_SPARK:
        if type(dt) is cls:
            return Column(column_id, field.name, conv(dt), field.nullable)
    raise UnsupportedTypeError(
        f"column {name!r} has Spark type {dt.simpleString()}, which DuckLake cannot store"
    )


def columns_from_spark(schema: T.StructType, not_null: Collection[str] = ()) -> list[Column]:
    """DuckLake columns (ids from 1, depth first) for a Spark schema, e.g. for CREATE TABLE AS SELECT.

    Columns are nullable, as DuckDB's CREATE TABLE AS makes them whatever the query's nullability; the top-level
    columns named in not_null (case-insensitive) are NOT NULL.
    """
    counter = iter(range(1, 1 << 31))
    wanted = {n.lower() for n in not_null}
    cols = [_nullable(from_spark(f, lambda: next(counter))) for f in schema.fields]
    return [dataclasses.replace(c, nullable=False) if c.name.lower() in wanted else c for c in cols]


def _nullable(col: Column) -> Column:
    return dataclasses.replace(col, nullable=True, children=tuple(_nullable(c) for c in col.children))
