"""Spark values of DuckLake values read from the catalog (inlined rows, defaults) for SQL literals: the same values
`type_readings.project` makes of them in a Parquet file."""

from __future__ import annotations

import datetime as dt
import uuid
from decimal import Decimal
from typing import Any

from ..lake.records import Column
from ..lake.types import format_value


def spark_value(col: Column, value: Any) -> Any:
    """The Spark value (as a Python value for a literal) of a value of the column read from the catalog (inlined
    rows, defaults), equal to what `project` makes of the same value in a file."""
    if value is None:
        return None
    t = col.type
    if t == "list":
        return [spark_value(col.children[0], v) for v in value]
    if t == "map":
        pairs = value.items() if isinstance(value, dict) else value
        return [(spark_value(col.children[0], k), spark_value(col.children[1], v)) for k, v in pairs]
    if t == "struct":
        get = value.get if isinstance(value, dict) else (lambda k: getattr(value, k))
        return {c.name: spark_value(c, get(c.name)) for c in col.children}
    if t == "uuid":
        if isinstance(value, bytes | bytearray):
            return str(uuid.UUID(bytes=bytes(value)))
        return str(value if isinstance(value, uuid.UUID) else uuid.UUID(str(value)))
    if t in ("time", "time_ns", "timetz"):
        return _clock_text(col.type, value)
    if t == "timestamp_ns":
        return _micros_datetime(value)
    if t == "interval":
        if isinstance(value, dt.timedelta):
            return {"months": 0, "days": value.days, "micros": value.seconds * 10**6 + value.microseconds}
        months, days, nanos = (value.months, value.days, value.nanoseconds) if hasattr(value, "months") else value
        return {"months": months, "days": days, "micros": nanos // 1000 if nanos >= 0 else -(-nanos // 1000)}
    if t in ("int128", "uint128"):
        return Decimal(value)
    return value


def _clock_text(type_: str, value: Any) -> str:
    if isinstance(value, dt.time):
        offset = value.utcoffset() or dt.timedelta()
        moment = dt.datetime.combine(dt.date(2000, 1, 1), value.replace(tzinfo=None)) - offset
        text = format_value("time", moment.time())
    else:
        text = format_value("time_ns" if type_ == "time_ns" else "time", int(value))
    assert text is not None  # None only for a NULL value
    return text + "+00" if type_ == "timetz" else text


def _micros_datetime(value: Any) -> dt.datetime:
    if hasattr(value, "nanosecond"):  # a pandas.Timestamp (pyarrow's timestamp[ns] values): its ns count
        value = int(value.value)
    if isinstance(value, int):  # nanoseconds: truncated toward zero, as DuckDB's TIMESTAMP_NS -> TIMESTAMP cast
        micros = value // 1000 if value >= 0 else -(-value // 1000)
        return dt.datetime(1970, 1, 1) + dt.timedelta(microseconds=micros)
    return value.replace(tzinfo=None) if isinstance(value, dt.datetime) else value
