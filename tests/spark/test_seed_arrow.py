"""Seed values converted on the driver (seeds.seed_arrow) are Spark's casts of the same values (seeds.seed_dataframe):
same column names and types, same values, for every type dbt infers from a CSV as dbt reads it; any other type or
value is left to Spark."""

from __future__ import annotations

import datetime as dt
import decimal
from pathlib import Path

import pytest
from dbt_common.clients.agate_helper import from_csv
from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from dbt.adapters.ducklake.impl import DuckLakeAdapter
from dbt.adapters.ducklake.seeds import seed_arrow, seed_dataframe

CSV = """id,amount,flag,day,at,at_space,at_zone,label,whole
1,1.5,true,2024-01-01,2024-01-01T10:00:00,2024-01-01 10:00:00,2024-01-01T10:00:00+02:00,héllo,1e3
-2,0.1,false,1999-12-31,2024-02-29T23:59:59.123456,1970-01-01 00:00:00,2024-01-01T00:00:00Z,"with ""quote"", comma",12
9223372036854775807,12345678901234.5,,2000-02-29,,,2024-06-01T12:30:00-05:00,,-7
-9223372036854775808,0.00001,true,,1970-01-01T00:00:00,2000-01-01 00:00:01,,plain,
0,-0.0,false,0001-01-01,9999-12-31T23:59:59.999999,,9999-12-31T23:59:59+01:00,  spaced  ,0
"""


def _values(spark: SparkSession, df: object) -> list[tuple]:
    """Rows with zoned timestamps as micros (collect gives the Python process's wall time)."""
    cols = [F.unix_micros(F.col(f"`{f.name}`")) if isinstance(f.dataType, T.TimestampType) else F.col(f"`{f.name}`")
            for f in df.schema.fields]  # type: ignore[attr-defined]
    return [tuple(r) for r in df.select(*cols).collect()]  # type: ignore[attr-defined]


def _arrow_values(table: object) -> list[tuple]:
    cols = []
    for col in table.columns:  # type: ignore[attr-defined]
        values = col.to_pylist()
        if str(col.type).startswith("timestamp[us, tz="):
            epoch = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
            values = [None if v is None else (v - epoch) // dt.timedelta(microseconds=1) for v in values]
        cols.append(values)
    return list(zip(*cols, strict=True))


def test_driver_values_are_sparks_casts(spark: SparkSession, tmp_path: Path) -> None:
    path = tmp_path / "seed.csv"
    path.write_text(CSV)
    table = from_csv(str(path), [])
    names = list(table.column_names)
    rows = [tuple(r) for r in table.rows]
    types = [DuckLakeAdapter.convert_type(table, i) for i in range(len(names))]
    # zone-less date-times are TIMESTAMP_NTZ (collected as their wall time on both sides); offsets make an instant
    assert types[:7] == ["bigint", "double", "boolean", "date", "timestamp_ntz", "timestamp_ntz", "timestamp"]
    got = seed_arrow(names, rows, types)
    assert got is not None
    schema, data = got
    df = seed_dataframe(spark, names, rows, types)
    assert [(f.name, f.dataType) for f in schema.fields] == [(f.name, f.dataType) for f in df.schema.fields]
    assert _arrow_values(data) == _values(spark, df)
    assert _arrow_values(data)[0][4:6] == (dt.datetime(2024, 1, 1, 10), dt.datetime(2024, 1, 1, 10))
    # the same zone-less values as instants (a column_types override of `timestamp`): UTC wall time, as Spark's
    as_instants = types[:4] + ["timestamp", "timestamp"] + types[6:]
    got = seed_arrow(names, rows, as_instants)
    assert got is not None
    assert _arrow_values(got[1]) == _values(spark, seed_dataframe(spark, names, rows, as_instants))
    # text overrides of any column: the text Spark is given
    as_text = ["string"] * len(names)
    got = seed_arrow(names, rows, as_text)
    assert got is not None and _arrow_values(got[1]) == _values(spark, seed_dataframe(spark, names, rows, as_text))


@pytest.mark.parametrize(("rows", "types", "why"), [
    ([("1.5",)], ["bigint"], "a text Spark casts"),
    ([(decimal.Decimal("5.0"),)], ["bigint"], "a fraction digit (ANSI decides)"),
    ([(decimal.Decimal("9223372036854775808"),)], ["bigint"], "beyond BIGINT"),
    ([(True,)], ["bigint"], "a boolean as a number"),
    ([("true",)], ["boolean"], "a text as a boolean"),
    ([(dt.datetime(2024, 1, 1, 1),)], ["date"], "a date-time as a date"),
    ([(dt.date(2024, 1, 1),)], ["timestamp"], "a date as a date-time"),
    ([(dt.date(2024, 1, 1),)], ["timestamp_ntz"], "a date as a zone-less date-time"),
    ([(dt.datetime(2024, 1, 1, 1, tzinfo=dt.timezone.utc),)], ["timestamp_ntz"], "an instant as a wall time"),
    ([(1,)], ["int"], "a type the driver leaves to Spark"),
    ([(1,)], ["decimal(10,2)"], "a type the driver leaves to Spark"),
    ([], ["bigint"], "no rows"),
])
def test_other_values_and_types_are_left_to_spark(rows: list[tuple], types: list[str], why: str) -> None:
    assert seed_arrow(["c"], rows, types) is None, why


def test_a_timestamp_ntz_session_casts_timestamps_itself() -> None:
    rows = [(dt.datetime(2024, 1, 1, 10),)]
    assert seed_arrow(["at"], rows, ["timestamp"]) is not None
    assert seed_arrow(["at"], rows, ["timestamp"], timestamp_ntz=True) is None
    # an explicit timestamp_ntz does not depend on the session's setting
    assert seed_arrow(["at"], rows, ["timestamp_ntz"], timestamp_ntz=True) is not None
