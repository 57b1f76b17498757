"""Seed rows (an agate table, as dbt reads the CSV on the driver) as a Spark DataFrame of the seed's column types, and
the `Seed` change that labels their load."""

from __future__ import annotations

import datetime as dt
import decimal
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T

from .router import Change


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


def seed_dataframe(spark: SparkSession, names: Sequence[str], rows: Sequence[Sequence[Any]],
                   types: Sequence[str]) -> DataFrame:
    """Rows as text, cast by Spark to each column's type (so a column_types override is any Spark type)."""
    raw = [f"c{i}" for i in range(len(names))]
    schema = T.StructType([T.StructField(r, T.StringType()) for r in raw])
    df = spark.createDataFrame([tuple(_text(v) for v in row) for row in rows], schema)
    quoted = ["`" + n.replace("`", "``") + "`" for n in names]
    return df.selectExpr(*[f"CAST({r} AS {t}) AS {q}" for r, t, q in zip(raw, types, quoted, strict=True)])
