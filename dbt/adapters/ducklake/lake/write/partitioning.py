"""Partition transforms as the reference computes them, on Arrow data: the values stored per data file.

identity = the value's text; year/month/day/hour = DuckDB's year()/month()/day()/hour() (calendar fields, not
Iceberg epoch offsets); bucket(N) = (murmur3_32(value) & 2147483647) % N, hashing each type as DuckDB 1.5 does (tests compare).
DuckLake 1.1 adds epoch_year/epoch_month/epoch_day/epoch_hour: Iceberg's transforms, the whole years, months, days or
hours since 1970-01-01 00:00 (UTC for timestamptz), floored (1969-12-31 is day -1); a 1.0 catalog cannot hold them.
"""

from __future__ import annotations

import datetime as dt
import re
import struct
from collections.abc import Sequence
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from ..errors import SchemaEvolutionError
from ..records import Column, TableInfo
from ..types import decimal_params, format_value

_BUCKET = re.compile(r"^bucket\((\d+)\)$")
_TEMPORAL = ("date", "timestamp", "timestamptz", "timestamp_s", "timestamp_ms", "timestamp_ns")


def validate_transform(column: Column, transform: str, epoch: bool = True) -> str:
    """The normalised transform for a column; epoch: the catalog can hold the epoch_* transforms (DuckLake 1.1).

    Raises:
        SchemaEvolutionError: unknown or ill-typed transforms, or an epoch_* one where the catalog cannot hold it.
    """
    t = transform.strip().lower().replace(" ", "")
    if t == "identity":
        if column.is_nested:
            raise SchemaEvolutionError(f"cannot partition by nested column {column.name!r}")
        return t
    if t in ("year", "month", "day", "hour") or t in EPOCH_TRANSFORMS:
        if column.type not in _TEMPORAL or (t.endswith("hour") and column.type == "date"):
            raise SchemaEvolutionError(f"partition transform {t} needs a date/timestamp column; {column.name!r} is {column.type}")
        if t in EPOCH_TRANSFORMS and not epoch:
            raise SchemaEvolutionError(
                f"partition transform {t} is a DuckLake 1.1 feature and this lake's catalog is spec 1.0 (a 1.0 "
                "reader could not read the table): use year, month, day or hour, or a 1.1 lake")
        return t
    m = _BUCKET.match(t)
    if m:
        if int(m.group(1)) <= 0:
            raise SchemaEvolutionError(f"bucket count must be positive, got {transform!r}")
        return t
    raise SchemaEvolutionError(
        f"unknown partition transform {transform!r}; use identity, year, month, day, hour, bucket(N) or (DuckLake 1.1) "
        "epoch_year, epoch_month, epoch_day, epoch_hour"
    )


def partition_values(table: TableInfo, data: pa.Table) -> list[tuple[str | None, ...]]:
    """The partition key of every row, as the strings ducklake_file_partition_value stores (None = NULL)."""
    assert table.partition is not None
    per_key = []
    for f in table.partition.fields:
        col = table.column_by_id(f.column_id)
        per_key.append(transform_values(col, f.transform, data.column(col.name)))
    return list(zip(*per_key, strict=True)) if per_key else [() for _ in range(data.num_rows)]


def transform_values(col: Column, transform: str, arr: pa.ChunkedArray | pa.Array) -> list[str | None]:
    """One partition value string per row for one transform."""
    if transform == "identity":
        return [None if v is None else format_value(col.type, v, form="value") for v in arr.to_pylist()]
    if transform in ("year", "month", "day", "hour"):
        if col.type == "timestamptz":
            arr = pc.cast(arr, pa.timestamp("us", tz="UTC"))
        fn = {"year": pc.year, "month": pc.month, "day": pc.day, "hour": pc.hour}[transform]
        return [None if v is None else str(v) for v in fn(arr).to_pylist()]
    if transform in EPOCH_TRANSFORMS:
        return _epoch_values(col, transform, arr)
    m = _BUCKET.match(transform)
    if m:
        n = int(m.group(1))
        return [None if v is None else str((murmur3_32(_bucket_bytes(col.type, v)) & 0x7FFFFFFF) % n)
                for v in arr.to_pylist()]
    raise SchemaEvolutionError(f"unknown partition transform {transform!r}")


def _epoch_values(col: Column, transform: str, arr: pa.ChunkedArray | pa.Array) -> list[str | None]:
    """Whole years/months/days/hours since 1970-01-01 (UTC), floored; nanoseconds floored to microseconds first."""
    if col.type == "date":
        days = pc.cast(arr, pa.int32())
        if transform == "epoch_day":
            return [None if v is None else str(v) for v in days.to_pylist()]
        arr = pc.cast(arr, pa.timestamp("us"))
    if isinstance(arr.type, pa.TimestampType) and arr.type.tz is not None:
        arr = pc.cast(arr, pa.timestamp(arr.type.unit, tz="UTC"))
    if transform in ("epoch_day", "epoch_hour"):
        unit = _MICROS_PER_DAY if transform == "epoch_day" else _MICROS_PER_HOUR
        micros = pc.cast(pc.cast(arr, pa.timestamp("us", tz=getattr(arr.type, "tz", None)), safe=False), pa.int64())
        return [None if v is None else str(v // unit) for v in micros.to_pylist()]  # // floors
    years, months = pc.year(arr).to_pylist(), pc.month(arr).to_pylist()
    if transform == "epoch_year":
        return [None if y is None else str(y - 1970) for y in years]
    return [None if y is None else str((y - 1970) * 12 + m - 1) for y, m in zip(years, months, strict=True)]


_MICROS_PER_DAY, _MICROS_PER_HOUR = 86_400_000_000, 3_600_000_000
EPOCH_TRANSFORMS = ("epoch_year", "epoch_month", "epoch_day", "epoch_hour")


def _bucket_bytes(type_: str, v: Any) -> bytes:
    """Iceberg's single-value serialisation for hashing (ints as 8-byte little endian longs, etc.)."""
    if type_ in ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "boolean"):
        return struct.pack("<q", int(v))
    if type_ in ("float32", "float64"):
        return struct.pack("<d", float(v))  # DuckDB hashes both as the double's bits
    if type_ == "date":
        return struct.pack("<q", (v - dt.date(1970, 1, 1)).days)
    if type_ in ("timestamp", "timestamptz", "timestamp_s", "timestamp_ms", "timestamp_ns"):
        if v.tzinfo is not None:
            v = v.astimezone(dt.timezone.utc).replace(tzinfo=None)
        micros = (v - dt.datetime(1970, 1, 1)) // dt.timedelta(microseconds=1)
        return struct.pack("<q", micros)
    if type_ in ("varchar", "json"):
        return v.encode("utf-8")
    if type_ == "blob":
        return bytes(v)
    if type_ == "uuid":
        return str(v).encode("ascii")  # DuckDB hashes a UUID's canonical text, not its 16 bytes
    if type_.startswith("decimal"):
        # as DuckDB 1.5 hashes them (checked against it): the unscaled value as a long up to 18 digits, the text above
        p, s = decimal_params(type_)
        value = Decimal(v)
        if p <= 18:
            return struct.pack("<q", int(value.scaleb(s)))
        return str(format_value(type_, value, form="value")).encode("utf-8")
    raise SchemaEvolutionError(f"bucket partitioning of {type_} columns is not supported")


def murmur3_32(data: bytes, seed: int = 0) -> int:
    """MurmurHash3 x86 32-bit, as a signed int32 (Iceberg's and DuckDB's murmur3_32)."""
    c1, c2 = 0xCC9E2D51, 0x1B873593
    h = seed & 0xFFFFFFFF
    n = len(data) // 4
    for i in range(n):
        k = int.from_bytes(data[4 * i : 4 * i + 4], "little")
        k = (k * c1) & 0xFFFFFFFF
        k = ((k << 15) | (k >> 17)) & 0xFFFFFFFF
        k = (k * c2) & 0xFFFFFFFF
        h ^= k
        h = ((h << 13) | (h >> 19)) & 0xFFFFFFFF
        h = (h * 5 + 0xE6546B64) & 0xFFFFFFFF
    tail = data[4 * n :]
    k = 0
    if len(tail) >= 3:
        k ^= tail[2] << 16
    if len(tail) >= 2:
        k ^= tail[1] << 8
    if tail:
        k ^= tail[0]
        k = (k * c1) & 0xFFFFFFFF
        k = ((k << 15) | (k >> 17)) & 0xFFFFFFFF
        k = (k * c2) & 0xFFFFFFFF
        h ^= k
    h ^= len(data)
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & 0xFFFFFFFF
    h ^= h >> 16
    return h - (1 << 32) if h & 0x80000000 else h


__all__: Sequence[str] = ["murmur3_32", "partition_values", "transform_values", "validate_transform"]
