"""Seed rows (an agate table, as dbt reads the CSV on the driver) as a Spark DataFrame of the seed's column types, or
as Arrow computed on the driver when no Spark cast is needed (`seed_arrow`), and the `Seed` change that labels their
load."""

from __future__ import annotations

import datetime as dt
import decimal
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T

from .lake.types import INT_RANGES
from .router import Change
from .spark.sql_literals import string_literal
from .spark.write.local_write import arrow_type

VALUES_CELLS = 5_000  # an inline table of this many literals parses and analyzes faster than a Spark job writes it


@dataclass(frozen=True, kw_only=True)
class Seed(Change):
    """A seed's table, created or replaced with the seed's rows. Not a routed statement (load_seed stages it itself):
    a Change for the label of its operation in the commit message ("seed main.countries")."""

    kind: ClassVar[str] = "seed"


def _text(v: Any) -> str | None:
    if v is None:
        return None
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, decimal.Decimal):
        return format(v, "f")
    if isinstance(v, dt.datetime):
        return v.isoformat(sep=" ")
    if isinstance(v, dt.date):
        return v.isoformat()
    return str(v)


def is_inline(names: Sequence[str], rows: Sequence[Sequence[Any]]) -> bool:
    """Whether `seed_dataframe` makes the rows an inline table of the driver (bounded by VALUES_CELLS values)."""
    return len(rows) * len(names) <= VALUES_CELLS


# dbt's inferred seed types (dbt-spark's convert_*_type) that the driver converts exactly as Spark's CAST from the
# values' text would: their Spark types
_DRIVER_TYPES: dict[str, T.DataType] = {
    "bigint": T.LongType(), "double": T.DoubleType(), "string": T.StringType(), "boolean": T.BooleanType(),
    "date": T.DateType(), "timestamp": T.TimestampType(), "timestamp_ntz": T.TimestampNTZType(),
}
DRIVER_ROWS = 100_000  # as many rows as a small Spark result the driver writes (spark/write/local_write)
_LONG = INT_RANGES["int64"]


class _ToSpark(Exception):
    """A value the driver does not convert: Spark casts the seed."""


def seed_arrow(names: Sequence[str], rows: Sequence[Sequence[Any]], types: Sequence[str], *,
               timestamp_ntz: bool = False) -> tuple[T.StructType, pa.Table] | None:
    """The rows as the Spark schema `seed_dataframe` would give and the values Spark's casts would give, computed
    on the driver (no Spark: a `dbt seed` of such seeds needs no JVM); None when Spark must cast them.

    Only the types dbt infers, with values as agate parsed them for those types: integral numbers in BIGINT's range
    for bigint, numbers for double, booleans, dates, date-times for timestamp (a naive one is UTC wall time, as in the
    session's UTC zone; `timestamp_ntz`: the session's `timestamp` is TIMESTAMP_NTZ, left to Spark), naive date-times
    for timestamp_ntz (their wall time as is, as Spark's cast of their text), and any value for string
    (its text, as Spark is given it). Another type (a column_types override), another value (a cast Spark decides,
    e.g. the text "1.5" as bigint), no rows, or more than DRIVER_ROWS rows: None.
    """
    kinds = [t.strip().lower() for t in types]
    if not rows or len(rows) > DRIVER_ROWS or any(k not in _DRIVER_TYPES or (k == "timestamp" and timestamp_ntz)
                                                  for k in kinds):
        return None
    try:
        arrays = [pa.array([_driver_value(k, row[i]) for row in rows], type=arrow_type(_DRIVER_TYPES[k]))
                  for i, k in enumerate(kinds)]
    except _ToSpark:
        return None
    schema = T.StructType([T.StructField(n, _DRIVER_TYPES[k]) for n, k in zip(names, kinds, strict=True)])
    return schema, pa.Table.from_arrays(arrays, names=list(names))


def _driver_value(kind: str, v: Any) -> Any:
    if v is None:
        return None
    if kind == "string":
        return _text(v)
    if kind == "boolean":
        if isinstance(v, bool):
            return v
    elif kind in ("bigint", "double"):
        if isinstance(v, (int, decimal.Decimal)) and not isinstance(v, bool) and decimal.Decimal(v).is_finite():
            if kind == "double":
                return float(v)
            # no fraction digits at all (Spark's cast of "5.0" to bigint depends on ANSI mode)
            exact = isinstance(v, int) or v.as_tuple().exponent >= 0  # type: ignore[operator]
            if exact and _LONG[0] <= int(v) <= _LONG[1]:
                return int(v)
    elif kind == "date":
        if isinstance(v, dt.date) and not isinstance(v, dt.datetime):
            return v
    elif kind == "timestamp" and isinstance(v, dt.datetime):
        try:
            return v.replace(tzinfo=dt.timezone.utc) if v.tzinfo is None else v.astimezone(dt.timezone.utc)
        except OverflowError:  # beyond Python's year 9999 in UTC: Spark's range is wider
            raise _ToSpark from None
    elif kind == "timestamp_ntz" and isinstance(v, dt.datetime) and v.tzinfo is None:
        # Spark's cast of a zone-less text to TIMESTAMP_NTZ keeps its wall time (no session zone involved); a zoned
        # value (a column_types override of a column with offsets) is Spark's to decide
        return v
    raise _ToSpark


def seed_dataframe(spark: SparkSession, names: Sequence[str], rows: Sequence[Sequence[Any]],
                   types: Sequence[str]) -> DataFrame:
    """Rows as text, cast by Spark to each column's type (so a column_types override is any Spark type).

    Up to VALUES_CELLS values are an inline VALUES table, which Spark evaluates on the driver (no job: the lake
    writer writes the rows, spark/write/local_write; on Spark Connect when the write is told so: `is_inline`); larger seeds
    are a DataFrame of the rows, written by the executors.
    """
    raw = [f"c{i}" for i in range(len(names))]
    quoted = ["`" + n.replace("`", "``") + "`" for n in names]
    casts = [f"CAST({r} AS {t}) AS {q}" for r, t, q in zip(raw, types, quoted, strict=True)]
    texts = [tuple(_text(v) for v in row) for row in rows]
    if names and texts and is_inline(names, texts):
        values = ", ".join("(" + ", ".join("NULL" if v is None else string_literal(v) for v in row) + ")"
                           for row in texts)
        return spark.sql(f"SELECT {', '.join(casts)} FROM VALUES {values} AS v({', '.join(raw)})")
    schema = T.StructType([T.StructField(r, T.StringType()) for r in raw])
    return spark.createDataFrame(texts, schema).selectExpr(*casts)
