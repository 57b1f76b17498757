"""Partition transforms equal DuckDB's: bucket hashing per type, and calendar fields."""

from __future__ import annotations

import datetime as dt
import uuid
from decimal import Decimal

import pytest

from dbt.adapters.ducklake.lake.write.partitioning import _bucket_bytes, murmur3_32
from tests.support import reference

CASES = [
    ("int32", "INTEGER", [0, 1, -1, 34, 2**31 - 1]),
    ("int64", "BIGINT", [-7, 2**62]),
    ("boolean", "BOOLEAN", [True, False]),
    ("float32", "FLOAT", [1.5, -0.25]),
    ("float64", "DOUBLE", [1.5, 1e300]),
    ("decimal(10,2)", "DECIMAL(10,2)", [Decimal("1.5"), Decimal("-12345678.91")]),
    ("decimal(30,10)", "DECIMAL(30,10)", [Decimal("1.5"), Decimal("-3.25")]),
    ("varchar", "VARCHAR", ["", "iceberg", "héllo wörld, a longer string of bytes"]),
    ("blob", "BLOB", [b"", b"\x00\xff\x10abc"]),
    ("date", "DATE", [dt.date(2017, 11, 16), dt.date(1969, 12, 31)]),
    ("timestamp", "TIMESTAMP", [dt.datetime(2017, 11, 16, 22, 31, 8)]),
    ("timestamptz", "TIMESTAMPTZ", [dt.datetime(2017, 11, 16, 22, 31, 8, tzinfo=dt.timezone.utc)]),
    ("uuid", "UUID", [uuid.UUID("f79c3e09-677c-4abd-9ee0-cd0d4e02e2a6")]),
]


@pytest.mark.parametrize(("ducklake_type", "sql_type", "values"), CASES, ids=[c[0] for c in CASES])
def test_bucket_hash_equals_duckdb(ducklake_type: str, sql_type: str, values: list) -> None:
    con = reference.connect()
    try:
        con.execute("SET TimeZone = 'UTC'")
        for v in values:
            theirs = con.execute(f"SELECT murmur3_32(CAST($1 AS {sql_type}))", [v]).fetchone()[0]
            assert murmur3_32(_bucket_bytes(ducklake_type, v)) == theirs, (ducklake_type, v)
    finally:
        con.close()
