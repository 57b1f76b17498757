"""Spark reads DuckDB-written values of types whose Parquet encoding a plain CAST would read differently."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from dbt.adapters.ducklake.lake import DuckLake
from dbt.adapters.ducklake.spark.read.scan import read_table
from tests.support.reference import attached


def test_hugeint_reads_as_duckdb_reads(spark: SparkSession, tmp_path: Path) -> None:
    """HUGEINT/UHUGEINT go to Parquet as DOUBLE; DuckDB reads the double's exact value (340282366920938432), which
    Spark's DOUBLE -> DECIMAL cast rounds through its shortest text (340282366920938430). Every magnitude from 0 to
    2^126, both signs, NULLs and list elements must equal DuckDB's reading."""
    catalog = f"ducklake:{tmp_path / 'cat.ducklake'}"
    with attached(catalog, data_path=str(tmp_path / "data")) as con:
        con.execute("CREATE TABLE lake.h (id INTEGER, h HUGEINT, uh UHUGEINT, lh HUGEINT[])")
        con.execute("""INSERT INTO lake.h SELECT i,
            CASE WHEN i % 50 = 7 THEN NULL ELSE (CASE WHEN i % 2 = 0 THEN 1 ELSE -1 END)
                 * (3::HUGEINT ** (i % 80) + (7::HUGEINT ** (i % 45))) END,
            CASE WHEN i % 50 = 9 THEN NULL ELSE 2::UHUGEINT ** (i % 127) + 12345 END,
            [2::HUGEINT ** (i % 126) + 1, NULL, -(5::HUGEINT ** (i % 54))]
            FROM range(201) t(i)""")
        con.execute("INSERT INTO lake.h VALUES (1000, 0, 0, []), (1001, -(2::HUGEINT ** 126), 2::UHUGEINT ** 126, NULL)")
        expected = {r[0]: r[1:] for r in con.execute("SELECT id, h, uh, lh FROM lake.h").fetchall()}
    state = DuckLake.open(catalog).snapshot()
    rows = read_table(spark, state, state.table("main", "h")).collect()
    assert [f.dataType.simpleString() for f in read_table(spark, state, state.table("main", "h")).schema.fields] == \
        ["int", "decimal(38,0)", "decimal(38,0)", "array<decimal(38,0)>"]
    got = {r.id: (r.h, r.uh, r.lh) for r in rows}
    assert got.keys() == expected.keys()

    def dec(v: object) -> object:
        if isinstance(v, list):
            return [dec(x) for x in v]
        return None if v is None else Decimal(v)  # type: ignore[arg-type]

    bad = {k: (got[k], e) for k, e in expected.items() if got[k] != tuple(dec(v) for v in e)}
    assert not bad, list(bad.items())[:3]
    assert got[1][0] == Decimal(-(3 + 7))


def test_hugeint_beyond_decimal38_names_the_column(spark: SparkSession, tmp_path: Path) -> None:
    """2^126 < values < 1e38 fit, larger HUGEINTs (up to 1.7e38) do not fit DECIMAL(38,0): reading that column fails
    naming it, while the other columns stay readable."""
    catalog = f"ducklake:{tmp_path / 'cat.ducklake'}"
    with attached(catalog, data_path=str(tmp_path / "data")) as con:
        con.execute("CREATE TABLE lake.big (id INTEGER, h HUGEINT)")
        # enough rows for a Parquet file (a few rows would be inlined in the catalog, read by another route)
        con.execute("INSERT INTO lake.big SELECT i, CASE WHEN i = 1 THEN 15 * 10::HUGEINT ** 37 END FROM range(300) t(i)")
    state = DuckLake.open(catalog).snapshot()
    df = read_table(spark, state, state.table("main", "big"))
    assert sorted(r.id for r in df.select("id").collect()) == list(range(300))
    with pytest.raises(Exception, match="column 'h' has DuckLake type int128"):
        df.select("h").collect()
