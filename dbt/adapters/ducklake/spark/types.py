"""Spark <-> DuckLake types, table driven. Types with no equivalent raise UnsupportedTypeError naming the column.

Types Spark has no equal of are given the Spark value a user can work with and compare with DuckDB's (README,
"Column types"): uuid and times as DuckDB's text, timestamp_ns as TIMESTAMP_NTZ (microseconds), interval as a struct
of its parts. Back to DuckLake, a field's `ducklake.type` metadata (or the model's `ducklake_types`) names the type.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

from pyspark.sql import types as T

from ..lake.errors import UnsupportedTypeError
from ..lake.records import Column
from ..lake.types import NESTED_TYPES, decimal_params, parse_type

FIELD_ID_KEY = "parquet.field.id"
TYPE_KEY = "ducklake.type"  # field metadata: the DuckLake type a Spark field is stored as (a new table's column)

# DuckLake -> Spark for scalar types. Unsigned integers widen to the next signed type that holds them.
_TO_SPARK: dict[str, Callable[[], T.DataType]] = {
    "int8": T.ByteType, "int16": T.ShortType, "int32": T.IntegerType, "int64": T.LongType,
    "uint8": T.ShortType, "uint16": T.IntegerType, "uint32": T.LongType, "uint64": lambda: T.DecimalType(20, 0),
    "int128": lambda: T.DecimalType(38, 0), "uint128": lambda: T.DecimalType(38, 0),
    "float32": T.FloatType, "float64": T.DoubleType, "varchar": T.StringType, "json": T.StringType,
    "boolean": T.BooleanType, "blob": T.BinaryType, "date": T.DateType,
    "timestamp": T.TimestampNTZType, "timestamp_s": T.TimestampNTZType, "timestamp_ms": T.TimestampNTZType,
    "timestamptz": T.TimestampType,
    # no Spark equal: DuckDB's text (uuid, times, geometry as WKT), microseconds (timestamp_ns), parts (interval),
    # JSON text (variant: DuckDB's variant::JSON)
    "uuid": T.StringType, "time": T.StringType, "timetz": T.StringType, "time_ns": T.StringType,
    "timestamp_ns": T.TimestampNTZType, "geometry": T.StringType, "variant": T.StringType,
    "interval": lambda: T.StructType([T.StructField("months", T.IntegerType()), T.StructField("days", T.IntegerType()),
                                      T.StructField("micros", T.LongType())]),
}
# DuckLake types this adapter cannot write values of, and why
UNWRITABLE = {
    "variant": "DuckLake type variant cannot be written from Spark 4.0 (no Parquet VARIANT logical type, and DuckDB "
               "reads text into a variant as one string, not as JSON); store the JSON text as json",
    "time_ns": "DuckLake type time_ns cannot be written to Parquet (DuckDB 1.5 cannot either); use time",
}
# DuckLake types a Spark field may be stored as (TYPE_KEY, ducklake_types), by the Spark types whose values convert
_STORABLE_AS = {
    "uuid": (T.StringType, T.VarcharType, T.CharType), "time": (T.StringType, T.VarcharType, T.CharType),
    "timetz": (T.StringType, T.VarcharType, T.CharType), "interval": (T.StructType,),
    "timestamp_ns": (T.TimestampNTZType,), "timestamp_ms": (T.TimestampNTZType,), "timestamp_s": (T.TimestampNTZType,),
    "int128": (T.DecimalType,), "uint128": (T.DecimalType,), "json": (T.StringType,),
    "geometry": (T.StringType, T.VarcharType, T.CharType),
    "uint8": (T.ShortType,), "uint16": (T.IntegerType,), "uint32": (T.LongType,), "uint64": (T.DecimalType,),
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
    raise UnsupportedTypeError(f"column {name!r} has DuckLake type {t}, which Spark cannot use")


def spark_field(column: Column, path: str = "") -> T.StructField:
    """A StructField with the column's field id (Spark writes it into Parquet for top-level and struct fields)."""
    return T.StructField(column.name, to_spark(column, path), nullable=column.nullable,
                         metadata={FIELD_ID_KEY: column.column_id})


def spark_schema(columns: Sequence[Column]) -> T.StructType:
    """The Spark schema of a table's columns, with field ids."""
    return T.StructType([spark_field(c) for c in columns])


def from_spark(field: T.StructField, next_id: Callable[[], int], path: str = "",
               types: Mapping[str, str] | None = None) -> Column:
    """A DuckLake column tree for a Spark field; ids come from next_id, parent before children (as DuckDB numbers).

    The DuckLake type of a field is its TYPE_KEY metadata, or types[path] (lower-case dotted path: `c`, `c.element`,
    `c.key`, `c.value`, `s.field`), else the Spark type's own.

    Raises:
        UnsupportedTypeError: the field (or a child) has a type DuckLake cannot store, or is asked to be stored as a
            type its values cannot be.
    """
    name = f"{path}.{field.name}" if path else field.name
    column_id = next_id()
    dt = field.dataType
    wanted = (types or {}).get(name.lower()) or field.metadata.get(TYPE_KEY)
    if wanted:
        return Column(column_id, field.name, _stored_as(name, dt, wanted), field.nullable)
    if isinstance(dt, T.ArrayType):
        elem = from_spark(T.StructField("element", dt.elementType, dt.containsNull), next_id, name, types)
        return Column(column_id, field.name, "list", field.nullable, children=(elem,))
    if isinstance(dt, T.MapType):
        key = from_spark(T.StructField("key", dt.keyType, False), next_id, name, types)
        value = from_spark(T.StructField("value", dt.valueType, dt.valueContainsNull), next_id, name, types)
        return Column(column_id, field.name, "map", field.nullable, children=(key, value))
    if isinstance(dt, T.StructType):
        if not dt.fields:
            raise UnsupportedTypeError(f"column {name!r} is a struct without fields, which DuckLake cannot store")
        kids = tuple(from_spark(f, next_id, name, types) for f in dt.fields)
        return Column(column_id, field.name, "struct", field.nullable, children=kids)
    for cls, conv in _FROM_SPARK:
        if type(dt) is cls:
            return Column(column_id, field.name, conv(dt), field.nullable)
    raise UnsupportedTypeError(
        f"column {name!r} has Spark type {dt.simpleString()}, which DuckLake cannot store"
    )


def columns_from_spark(schema: T.StructType, not_null: Collection[str] = (),
                       types: Mapping[str, str] | None = None) -> list[Column]:
    """DuckLake columns (ids from 1, depth first) for a Spark schema, e.g. for CREATE TABLE AS SELECT.

    Columns are nullable, as DuckDB's CREATE TABLE AS makes them whatever the query's nullability; the top-level
    columns named in not_null (case-insensitive) are NOT NULL. types: DuckLake types by column path (from_spark).

    Raises:
        UnsupportedTypeError: see from_spark; or types names a column path the schema does not have.
    """
    counter = iter(range(1, 1 << 31))
    wanted = {n.lower() for n in not_null}
    lowered = {k.lower(): v for k, v in (types or {}).items()}
    cols = [_nullable(from_spark(f, lambda: next(counter), types=lowered)) for f in schema.fields]
    paths = {_path for c in cols for _path in _paths(c)}
    unknown = sorted(set(lowered) - paths)
    if unknown:
        raise UnsupportedTypeError(f"ducklake_types names columns {unknown} that the model does not have "
                                   f"(its columns: {sorted(paths)})")
    return [dataclasses.replace(c, nullable=False) if c.name.lower() in wanted else c for c in cols]


def _nullable(col: Column) -> Column:
    return dataclasses.replace(col, nullable=True, children=tuple(_nullable(c) for c in col.children))


def _paths(col: Column, prefix: str = "") -> list[str]:
    name = f"{prefix}.{col.name}".lower() if prefix else col.name.lower()
    return [name] + [p for c in col.children for p in _paths(c, name)]


def _stored_as(name: str, dt: T.DataType, wanted: str) -> str:
    """The DuckLake type a field is asked to be stored as, checked against its Spark type.

    Raises:
        UnsupportedTypeError: naming the field, both types and the Spark types that can be stored so.
    """
    t = parse_type(wanted)
    if t in NESTED_TYPES:
        raise UnsupportedTypeError(f"column {name!r}: ducklake_types gives scalar types only; name the nested "
                                   f"field instead ({name}.element, {name}.key, {name}.value, {name}.<field>)")
    if t in UNWRITABLE:
        raise UnsupportedTypeError(f"column {name!r}: {UNWRITABLE[t]}")
    if t.startswith("decimal"):
        if isinstance(dt, T.DecimalType):
            return t
    elif t in _TO_SPARK and type(to_spark(Column(0, name, t, True))) is type(dt):
        return t
    ok = _STORABLE_AS.get(t, ())
    if isinstance(dt, ok):
        return t
    accepted = ", ".join(c.typeName() for c in ok) or "none"
    raise UnsupportedTypeError(f"column {name!r} has Spark type {dt.simpleString()}, which cannot be stored as "
                               f"DuckLake type {t} (Spark types that can: {accepted})")


def carried_type(column: Column) -> str | None:
    """The DuckLake type a top-level column's values keep when a model passes them through unchanged (TYPE_KEY
    metadata on the read), where the Spark type alone would store another (uuid -> varchar, uint8 -> int16,
    timestamp_ns -> timestamp, interval -> struct, json -> varchar); None where it would store the same type, or
    the type cannot be written."""
    t = parse_type(column.type)
    if t in NESTED_TYPES or t in UNWRITABLE:
        return None
    try:
        spark_type = to_spark(column)
    except UnsupportedTypeError:
        return None
    default = next((conv(spark_type) for cls, conv in _FROM_SPARK if type(spark_type) is cls), None)
    return t if default != t and t in _STORABLE_AS else None


def typed_reads(df: Any, columns: Sequence[Column]) -> Any:
    """df (a lake table's rows) with TYPE_KEY metadata on the columns whose DuckLake type the Spark type does not
    say (carried_type): Spark keeps a column's metadata through projections and aliases, so a model that selects it
    unchanged stores DuckDB's type again (a copy of a DuckDB table is the same table); an expression over it does
    not keep it, and stores its Spark type. The model's ducklake_types still decide over it."""
    from pyspark.sql import functions as F

    tagged = {c.name: t for c in columns if (t := carried_type(c)) is not None}
    if not tagged or set(tagged) - set(df.columns):
        return df
    return df.select(*[F.col(f"`{c}`").alias(c, metadata={**df.schema[c].metadata, TYPE_KEY: tagged[c]})
                       if c in tagged else F.col(f"`{c}`") for c in df.columns])


def keep_stored_types(current: Column, target: Column) -> Column:
    """A nested column's new type tree (from a Spark type) with the DuckLake type of each leaf that Spark reads as the
    new one kept: a field stored as uuid (or json, uint32, ...) reads as a Spark string (or long), so a model's
    unchanged field must not look like a type change. Fields are matched by name (case-insensitive)."""
    if current.children and target.children and current.type == target.type:
        by_name = {c.name.lower(): c for c in current.children}
        kids = tuple(keep_stored_types(by_name[t.name.lower()], t) if t.name.lower() in by_name else t
                     for t in target.children)
        return dataclasses.replace(target, children=kids)
    if current.children or target.children or current.type == target.type:
        return target
    try:
        same = to_spark(current) == to_spark(target)
    except UnsupportedTypeError:
        return target
    return dataclasses.replace(target, type=current.type) if same else target


def added_fields(current: T.DataType, new: T.DataType, path: tuple[str, ...]) -> list[tuple[tuple[str, ...], T.DataType]]:
    """The struct fields new has and current lacks (matched by name, case-insensitive, through list elements and map
    keys and values), each with its path from path: what ADD COLUMN s.f adds. Other differences are left out."""
    if isinstance(current, T.StructType) and isinstance(new, T.StructType):
        have = {f.name.lower(): f for f in current.fields}
        out: list[tuple[tuple[str, ...], T.DataType]] = []
        for f in new.fields:
            old = have.get(f.name.lower())
            out += ([((*path, f.name), f.dataType)] if old is None
                    else added_fields(old.dataType, f.dataType, (*path, old.name)))
        return out
    if isinstance(current, T.ArrayType) and isinstance(new, T.ArrayType):
        return added_fields(current.elementType, new.elementType, (*path, "element"))
    if isinstance(current, T.MapType) and isinstance(new, T.MapType):
        return (added_fields(current.keyType, new.keyType, (*path, "key"))
                + added_fields(current.valueType, new.valueType, (*path, "value")))
    return []
