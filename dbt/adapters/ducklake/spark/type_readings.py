"""How a table column is read from the Parquet value DuckDB stored for it, where a plain CAST would differ from DuckDB."""

from __future__ import annotations

from .sql_literals import string_literal


def wide_integer_from_double_sql(ref: str, name: str, type_: str) -> str:
    """DECIMAL(38,0) from a DOUBLE holding a HUGEINT/UHUGEINT (DuckDB writes those as DOUBLE), by DuckDB's route.

    DuckDB converts the double's exact binary value; Spark's DOUBLE -> DECIMAL cast goes through the double's shortest
    decimal text (340282366920938432 becomes 340282366920938430). Here d = m * 2^k exactly: k = max(0, log2|d| - 60)
    makes m = d / 2^k an integer below 2^62 (a double has 53 significant bits), so the BIGINT cast is exact, and 2^k
    (k <= 68) is built from two exact BIGINT factors. A value DECIMAL(38,0) cannot hold raises an error naming the column.
    """
    k = f"greatest(0, CAST(floor(log2(abs({ref}))) AS INT) - 60)"
    a, b = f"least({k}, 50)", f"({k} - least({k}, 50))"
    exact = (f"CAST({ref} / pow(2, {k}) AS BIGINT) * CAST(CAST(pow(2, {a}) AS BIGINT) AS DECIMAL(19,0))"
             f" * CAST(CAST(pow(2, {b}) AS BIGINT) AS DECIMAL(19,0))")
    msg = (f"column {name!r} has DuckLake type {type_} and a value beyond DECIMAL(38,0), Spark's widest integer; "
           f"narrow or cast it (e.g. to DOUBLE) in DuckDB")
    return (f"CASE WHEN {ref} IS NULL OR {ref} = 0 THEN CAST({ref} AS DECIMAL(38,0))"
            f" WHEN isnan({ref}) OR abs({ref}) >= 1e38 THEN CAST(raise_error({string_literal(msg)}) AS DECIMAL(38,0))"
            f" ELSE CAST({exact} AS DECIMAL(38,0)) END")
