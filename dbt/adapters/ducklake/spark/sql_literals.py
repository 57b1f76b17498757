"""Spark SQL text for values and identifiers (inlined rows and defaults become literals inside view SQL)."""

from __future__ import annotations

import datetime as dt
import math
from decimal import Decimal
from typing import Any

from pyspark.sql import types as T

from ..lake.records import Column
from .types import to_spark


def ident(name: str) -> str:
    """A Spark SQL identifier in backquotes."""
    return "`" + name.replace("`", "``") + "`"


def string_literal(text: str) -> str:
    """A Spark string literal; backslashes are escape characters in Spark SQL by default."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def python_literal(value: Any) -> str:
    """A Spark SQL literal of a Python value, typed by the value (dbt's %s bindings of seeds and tests)."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, dt.datetime):
        return f"TIMESTAMP '{value.isoformat(sep=' ')}'"
    if isinstance(value, dt.date):
        return f"DATE '{value.isoformat()}'"
    return string_literal(str(value))


def literal(value: Any, col: Column) -> str:
    """A Spark SQL expression of the column's Spark type holding value (NULL typed)."""
    from .type_values import spark_value  # types of a value are the column's Spark types (type_values)

    spark_type = to_spark(col)
    try:
        return _literal(spark_value(col, value), spark_type)
    except _TooWide:
        # a HUGEINT beyond DECIMAL(38,0) (an inlined row): only a query that selects it fails
        msg = (f"column {col.name!r} has DuckLake type {col.type} and a value beyond DECIMAL(38,0), Spark's widest "
               f"integer; narrow or cast it (e.g. to DOUBLE) in DuckDB")
        return f"CAST(raise_error({string_literal(msg)}) AS {spark_type.simpleString()})"


class _TooWide(ValueError):
    """A decimal value beyond its Spark type's precision."""


def _literal(value: Any, t: T.DataType) -> str:
    type_sql = t.simpleString()
    if value is None:
        return f"CAST(NULL AS {type_sql})"
    if isinstance(t, T.ArrayType):
        items = ", ".join(_literal(v, t.elementType) for v in value)
        return f"CAST(array({items}) AS {type_sql})" if value else f"CAST(array() AS {type_sql})"
    if isinstance(t, T.MapType):
        pairs = value.items() if isinstance(value, dict) else value
        items = ", ".join(f"{_literal(k, t.keyType)}, {_literal(v, t.valueType)}" for k, v in pairs)
        return f"CAST(map({items}) AS {type_sql})"
    if isinstance(t, T.StructType):
        get = value.get if isinstance(value, dict) else (lambda k, _v=value: getattr(_v, k))
        items = ", ".join(f"{string_literal(f.name)}, {_literal(get(f.name), f.dataType)}" for f in t.fields)
        return f"CAST(named_struct({items}) AS {type_sql})"
    if isinstance(t, T.BooleanType):
        return "true" if value else "false"
    if isinstance(t, T.FloatType | T.DoubleType):
        v = float(value)
        if math.isnan(v):
            return f"CAST('NaN' AS {type_sql})"
        if math.isinf(v):
            return f"CAST('{'Infinity' if v > 0 else '-Infinity'}' AS {type_sql})"
        return f"CAST({v!r} AS {type_sql})"
    if isinstance(t, T.ByteType | T.ShortType | T.IntegerType | T.LongType):
        return f"CAST({int(value)} AS {type_sql})"
    if isinstance(t, T.DecimalType):
        d = Decimal(value)
        if d.adjusted() >= t.precision - t.scale:
            raise _TooWide(f"{d} does not fit {type_sql}")
        return f"CAST('{d}' AS {type_sql})"
    if isinstance(t, T.StringType):
        return string_literal(str(value))
    if isinstance(t, T.BinaryType):
        return f"X'{bytes(value).hex().upper()}'"
    if isinstance(t, T.DateType):
        return f"DATE'{value.isoformat()}'"
    if isinstance(t, T.TimestampNTZType):
        v = value.replace(tzinfo=None) if isinstance(value, dt.datetime) else value  # type: ignore[assignment]
        return f"TIMESTAMP_NTZ'{v.isoformat(sep=' ')}'"  # type: ignore[attr-defined]
    if isinstance(t, T.TimestampType):
        v = value if value.tzinfo is not None else value.replace(tzinfo=dt.timezone.utc)
        return f"TIMESTAMP'{v.astimezone(dt.timezone.utc).replace(tzinfo=None).isoformat(sep=' ')}+00:00'"
    raise TypeError(f"no Spark literal for {type_sql}")
